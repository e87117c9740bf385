//! The only module that spawns QEMU (virtiofsd through `virtiofsd.rs`): per-arch command lines, the accelerator
//! probe, process groups that die with the run (Ctrl-C included), the console tee and the
//! host watchdog.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::arch::Arch;
use crate::support::exit::{error, Kind};
use crate::vm::channel::{self, Lines};
use crate::vm::children::{interrupted, stop_reason, Group, WORKDIRS};
use crate::vm::virtiofsd::{self, Sandbox, SandboxChoice, Share};

/// `--accel`: what to run QEMU with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum AccelChoice {
    /// Probe KVM with a short trial boot (answer cached), fall back to TCG.
    Auto,
    Kvm,
    Tcg,
}

/// The kernel prints this right before it executes /init: the boot reached user space.
pub const BOOT_MARKER: &str = "Run /init as init process";
/// After this the kernel reboots at once (`panic=-1`), which ends QEMU (`-no-reboot`).
pub const PANIC_MARKER: &str = "Kernel panic - not syncing";

/// The first lines of the fault reports whose task dies (the `Oops:` line follows them).
pub const FAULT_MARKERS: [&str; 4] = [
    "BUG: unable to handle",
    "BUG: kernel NULL pointer dereference",
    "Unable to handle kernel ",
    "general protection fault",
];

/// Whether a console line (with or without its `[  time]` stamp) reports the kernel killing the
/// running task: an Oops or fault, or a `BUG()`.
pub fn dies(line: &str) -> bool {
    let msg = line.trim_start().strip_prefix('[').and_then(|r| r.split_once("] ")).map_or(line, |(_, m)| m);
    msg.starts_with("Oops: ")
        || msg.starts_with("Internal error: ")
        || msg.starts_with("kernel BUG at ")
        || FAULT_MARKERS.iter().any(|m| msg.starts_with(m))
}

/// What a VM writes into its log folder (`VmSpec::logs`; a boot's folder of the run, where
/// `run_folder` names them too): the serial console, the result channel, the command line and
/// QEMU's own stderr.
pub const CONSOLE_LOG: &str = "console.log";
pub const RESULTS_LOG: &str = "results.ktap";
pub const COMMAND_FILE: &str = "qemu-command.txt";
pub const STDERR_LOG: &str = "qemu-stderr.log";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Accel {
    Kvm,
    Tcg,
}

impl Accel {
    pub fn name(self) -> &'static str {
        match self {
            Accel::Kvm => "kvm",
            Accel::Tcg => "tcg",
        }
    }

    /// How much longer than under KVM things take; timeouts scale with it.
    pub fn slowdown(self) -> u32 {
        match self {
            Accel::Kvm => 1,
            Accel::Tcg => 4,
        }
    }
}

/// Finds a program on a `PATH`-style list.
pub fn find_program(name: &str, path_var: Option<&std::ffi::OsStr>) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    std::env::split_paths(path_var?)
        .map(|d| d.join(name))
        .find(|p| p.metadata().is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0))
}

/// Where to look for QEMU: `XTASK_QEMU_DIR` (a self-built QEMU) when set, else `PATH`.
pub fn qemu_search_path() -> Option<std::ffi::OsString> {
    std::env::var_os("XTASK_QEMU_DIR").or_else(|| std::env::var_os("PATH"))
}

/// The QEMU binary for an arch, or an error naming the package to install.
pub fn qemu_binary(arch: &Arch, path_var: Option<&std::ffi::OsStr>) -> Result<PathBuf> {
    find_program(arch.qemu_binary, path_var).ok_or_else(|| {
        error(
            Kind::Infra,
            format!(
                "`{}` not found in PATH (or XTASK_QEMU_DIR): install the Debian package {} (`cargo xtask setup` does)",
                arch.qemu_binary, arch.qemu_package
            ),
        )
    })
}

/// The first line of `<qemu> --version` (`QEMU emulator version 10.0.2 (Debian ...)`), as the
/// KVM probe's cache key and the run's provenance record it; `None` when QEMU does not answer.
pub fn version(binary: &Path) -> Option<String> {
    let sh = crate::support::cmd::sh().ok()?;
    let out = crate::support::cmd::text(sh.cmd(binary).arg("--version")).ok()?;
    out.lines().next().map(|l| l.trim().to_string())
}

/// One VM to run.
#[derive(Debug, Clone)]
pub struct VmSpec {
    pub arch: &'static Arch,
    pub kernel: PathBuf,
    pub initrd: PathBuf,
    /// A private directory for this VM's sockets (short paths: a socket path has 108 bytes).
    pub workdir: PathBuf,
    /// Where the logs are written as they come (`console.log`, `results.ktap`,
    /// `qemu-command.txt`, `qemu-stderr.log`): the boot's folder in the run, so an interrupt,
    /// a hang or an error loses nothing.
    pub logs: PathBuf,
    pub accel: Accel,
    pub memory_mb: u32,
    pub cpus: u32,
    pub shares: Vec<Share>,
    /// How their virtiofsd isolates itself (`--virtiofsd-sandbox`).
    pub sandbox: SandboxChoice,
    /// Kill the VM when the kernel has not reached /init by then.
    pub boot_timeout: Duration,
    /// Kill the VM when it has not ended by then (the host watchdog).
    pub watchdog: Duration,
    /// The plan's deadlines, scenario by scenario, for the progress watchdog (`hang.rs`);
    /// `None` runs without it (the KVM probe, the shell).
    pub deadlines_ms: Option<Vec<u64>>,
    /// The history's median per scenario, in the same order, for the crawl rule (`progress.rs`).
    pub expected: Vec<Option<crate::vm::progress::Expected>>,
    /// `--kernel-args`: appended to the kernel command line.
    pub extra_cmdline: Vec<String>,
    /// `--qemu-args`: appended to QEMU's arguments.
    pub extra_qemu: Vec<String>,
    /// `--fail-fast`: the kernel's death (an Oops, a fault, a `BUG()`: [`dies`]) ends the run,
    /// this long after it is on the console, unless the VM ends by itself first. The dying task
    /// may hold a lock the agent then waits on, and the progress watchdog would wait out the
    /// scenario's deadline and its grace for a verdict that is already known.
    pub stop_after_death: Option<Duration>,
}

/// How a VM ended, seen from the host (`verdict.json`'s `ended`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Ended {
    /// QEMU exited by itself (a reboot from the guest, including after a panic).
    Exited { code: Option<i32> },
    /// The host killed it, for `kind`'s reason.
    Killed {
        after_ms: u64,
        reason: String,
        #[serde(default)]
        kind: KillKind,
    },
    /// The boot could not go on: QEMU or virtiofsd failed on the host.
    Failed { error: String },
}

/// In words, as reports and progress lines show it: `exited with code 0`, `killed after 8000 ms:
/// the kernel did not reach /init`, `failed on the host: ...`.
impl std::fmt::Display for Ended {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Ended::Exited { code: Some(c) } => write!(f, "exited with code {c}"),
            Ended::Exited { code: None } => f.write_str("killed by a signal"),
            Ended::Killed { after_ms, reason, .. } => write!(f, "killed after {after_ms} ms: {reason}"),
            Ended::Failed { error } => write!(f, "failed on the host: {error}"),
        }
    }
}

/// Why the host killed a VM.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum KillKind {
    /// The kernel did not reach /init within the boot timeout.
    NoBoot,
    /// No progress on the result channel within the running scenario's deadline and grace.
    Hung,
    /// The whole-boot watchdog (the backstop), or runs saved before kinds were recorded.
    #[default]
    Watchdog,
    /// The kernel panicked but did not reboot.
    PanicNoReboot,
    /// SIGINT, SIGTERM or SIGHUP.
    Interrupted,
}

/// What a VM left behind, besides its logs in `VmSpec::logs`.
#[derive(Debug)]
pub struct VmRun {
    pub ended: Ended,
    pub command_line: String,
    pub wall: Duration,
    /// Time from QEMU start to the kernel's "Run /init" line.
    pub boot: Option<Duration>,
    /// The sandbox virtiofsd ran in; `None` when nothing was shared.
    pub sandbox: Option<Sandbox>,
    /// The result channel, every line parsed once as it came (`results.ktap` holds its text).
    pub channel: Vec<channel::Event>,
}

impl VmSpec {
    pub fn console_log(&self) -> PathBuf {
        self.logs.join(CONSOLE_LOG)
    }
    pub fn results_log(&self) -> PathBuf {
        self.logs.join(RESULTS_LOG)
    }

    /// The full QEMU argument list (without the binary).
    pub fn args(&self, sockets: &[PathBuf]) -> Vec<String> {
        let a = self.arch;
        let mut args: Vec<String> = Vec::new();
        let mut push = |xs: &[&str]| args.extend(xs.iter().map(|s| s.to_string()));
        let machine = if self.shares.is_empty() {
            a.qemu_machine.to_string()
        } else {
            // vhost-user needs guest memory the daemon can map.
            format!("{},memory-backend=mem", a.qemu_machine)
        };
        push(&["-M", &machine, "-accel", self.accel.name()]);
        let cpu = if self.accel == Accel::Kvm { "host" } else { a.qemu_cpu_tcg };
        push(&["-cpu", cpu, "-m", &format!("{}M", self.memory_mb), "-smp", &self.cpus.to_string()]);
        push(&["-nodefaults", "-no-reboot", "-display", "none", "-nic", "none", "-serial", "stdio"]);
        push(a.qemu_firmware);
        push(&["-kernel", &self.kernel.display().to_string(), "-initrd", &self.initrd.display().to_string()]);
        let mut cmdline = format!("console={} panic=-1 {}", a.console, a.cmdline);
        for extra in &self.extra_cmdline {
            cmdline.push(' ');
            cmdline.push_str(extra);
        }
        push(&["-append", cmdline.split_whitespace().collect::<Vec<_>>().join(" ").as_str()]);
        // The result channel: a virtio console port backed by a file, apart from the console.
        push(&["-device", &format!("virtio-serial-{}", a.virtio_bus)]);
        push(&["-chardev", &format!("file,id=results,path={}", self.results_log().display())]);
        push(&["-device", &format!("virtserialport,chardev=results,name={}", protocol::RESULT_PORT)]);
        if !self.shares.is_empty() {
            let size = format!("memory-backend-memfd,id=mem,size={}M,share=on", self.memory_mb);
            push(&["-object", &size]);
        }
        for (i, (share, sock)) in self.shares.iter().zip(sockets).enumerate() {
            push(&["-chardev", &format!("socket,id=fs{i},path={}", sock.display())]);
            push(&["-device", &format!("vhost-user-fs-{},chardev=fs{i},tag={}", a.virtio_bus, share.tag)]);
        }
        args.extend(self.extra_qemu.iter().cloned());
        args
    }
}

/// Boots one VM and waits for it to end, teeing the console to `console.log`.
pub fn run(spec: &VmSpec, virtiofsd: Option<&Path>) -> Result<VmRun> {
    run_live(spec, virtiofsd, &|_| {})
}

/// [`run`], handing each result-channel line to `live` as it arrives: the channel is read and
/// parsed here, once, and its events kept in [`VmRun::channel`].
pub fn run_live(spec: &VmSpec, virtiofsd: Option<&Path>, live: &dyn Fn(&protocol::ResultLine)) -> Result<VmRun> {
    std::fs::create_dir_all(&spec.workdir)?;
    std::fs::create_dir_all(&spec.logs)?;
    // QEMU truncates the log as it opens it; gone before, the tail cannot read an old one.
    let _ = std::fs::remove_file(spec.results_log());
    if let Ok(mut dirs) = WORKDIRS.lock() {
        dirs.push(spec.workdir.clone());
    }
    let qemu = qemu_binary(spec.arch, qemu_search_path().as_deref())?;
    let daemons = virtiofsd::start(&spec.shares, &spec.workdir, &spec.logs, virtiofsd, spec.sandbox)?;
    let args = spec.args(&daemons.sockets);
    let command_line = std::iter::once(qemu.display().to_string())
        .chain(args.iter().map(|a| if a.contains(' ') { format!("'{a}'") } else { a.clone() }))
        .collect::<Vec<_>>()
        .join(" ");
    std::fs::write(spec.logs.join(COMMAND_FILE), format!("{command_line}\n"))?;

    let mut cmd = Command::new(&qemu);
    cmd.args(&args).stdin(Stdio::null()).stdout(Stdio::piped());
    cmd.stderr(std::fs::File::create(spec.logs.join(STDERR_LOG))?);
    let started = Instant::now();
    let mut vm = Group::spawn(cmd, "qemu")?;
    let stdout = vm.child.stdout.take().context("qemu stdout")?;

    let (tx, rx) = mpsc::channel();
    let log_path = spec.console_log();
    let log = std::fs::File::create(&log_path).with_context(|| format!("creating {}", log_path.display()))?;
    let reader = std::thread::spawn(move || read_console(stdout, log, &tx));

    let mut seen = Seen::default();
    let mut watch = spec.deadlines_ms.clone().map(|d| {
        crate::vm::hang::Watch::new(d, spec.boot_timeout + STARTUP, started).with_expected(spec.expected.clone())
    });
    let mut tail = ResultsTail::default();
    let ended = loop {
        for ev in rx.try_iter() {
            match (ev, watch.as_mut()) {
                (Event::Progress(index, done, total, ms, at), Some(w)) => w.progress(index, done, total, ms, at),
                (ev, _) => seen.note(ev, started),
            }
        }
        for line in tail.read(&spec.results_log()) {
            live(line);
            if let Some(w) = watch.as_mut() {
                w.feed(line, Instant::now());
            }
        }
        if let Some(status) = vm.child.try_wait()? {
            if interrupted() {
                break killed(started, stop_reason(), KillKind::Interrupted);
            }
            break Ended::Exited { code: status.code() };
        }
        if let Some((reason, kind)) = kill_reason(spec, started.elapsed(), &seen, watch.as_ref()) {
            vm.signal(libc::SIGKILL);
            let _ = vm.child.wait();
            break killed(started, reason, kind);
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let wall = started.elapsed();
    for line in tail.read(&spec.results_log()) {
        live(line);
    }
    let channel = tail.finish();
    let sandbox = daemons.sandbox;
    drop(vm);
    drop(daemons);
    reader.join().map_err(|_| anyhow::anyhow!("console reader panicked"))?.context("reading the console")?;
    Ok(VmRun { ended, command_line, wall, boot: seen.boot, sandbox, channel })
}

/// Tees QEMU's stdout (the console) into `log`, telling the VM's loop when the kernel reached
/// /init, panicked or killed a task.
fn read_console(
    stdout: std::process::ChildStdout,
    mut log: std::fs::File,
    tx: &mpsc::Sender<Event>,
) -> std::io::Result<()> {
    for line in BufReader::new(stdout).split(b'\n') {
        let line = line?;
        log.write_all(&line)?;
        log.write_all(b"\n")?;
        let text = String::from_utf8_lossy(&line);
        if text.contains(BOOT_MARKER) {
            let _ = tx.send(Event::Booted(Instant::now()));
        } else if text.contains(PANIC_MARKER) {
            let _ = tx.send(Event::Panic);
        } else if dies(&text) {
            let _ = tx.send(Event::Died(Instant::now()));
        } else if let Some(protocol::Marker::Progress { index, done, total, elapsed_ms }) =
            protocol::Marker::find_progress(&text)
        {
            let _ = tx.send(Event::Progress(index, done, total, elapsed_ms, Instant::now()));
        }
    }
    log.flush()
}

/// What the console showed so far: when the kernel reached /init (after the start), when it
/// panicked, when it first killed a task.
#[derive(Default)]
struct Seen {
    boot: Option<Duration>,
    panic_at: Option<Instant>,
    died_at: Option<Instant>,
}

impl Seen {
    fn note(&mut self, ev: Event, started: Instant) {
        match ev {
            Event::Booted(at) => self.boot = Some(at - started),
            Event::Panic => self.panic_at = Some(Instant::now()),
            Event::Died(at) => self.died_at = self.died_at.or(Some(at)),
            Event::Progress(..) => {}
        }
    }
}

/// Why the VM must be killed now, `elapsed` after its start, if it must: a stop asked for, no
/// /init in time, a panic without a reboot, a task killed under `--fail-fast`, scenarios
/// overdue, the host watchdog.
fn kill_reason(
    spec: &VmSpec,
    elapsed: Duration,
    seen: &Seen,
    watch: Option<&crate::vm::hang::Watch>,
) -> Option<(String, KillKind)> {
    if interrupted() {
        Some((stop_reason(), KillKind::Interrupted))
    } else if seen.boot.is_none() && elapsed > spec.boot_timeout {
        let why = format!("the kernel did not reach /init within {} s", spec.boot_timeout.as_secs());
        Some((why, KillKind::NoBoot))
    } else if seen.panic_at.is_some_and(|p| p.elapsed() > Duration::from_secs(10)) {
        Some(("the kernel panicked but did not reboot within 10 s".to_string(), KillKind::PanicNoReboot))
    } else if let Some(after) = spec.stop_after_death.zip(seen.died_at).filter(|(grace, at)| at.elapsed() > *grace) {
        let why = format!(
            "the kernel killed a task (an Oops or BUG on the console) and --fail-fast stops at the first failure: \
             the VM was stopped {} s after it",
            after.0.as_secs()
        );
        Some((why, KillKind::Hung))
    } else if let Some(why) = watch.filter(|_| seen.boot.is_some()).and_then(|w| w.overdue(Instant::now())) {
        Some((why, KillKind::Hung))
    } else if elapsed > spec.watchdog {
        let why = format!("the VM did not end within the host watchdog of {} s", spec.watchdog.as_secs());
        Some((why, KillKind::Watchdog))
    } else {
        None
    }
}

/// Runs a VM with the terminal as its console, for `cargo xtask shell`. QEMU stays in the
/// terminal's foreground process group (it reads the keyboard); Ctrl-A x quits it.
pub fn interactive(spec: &VmSpec, virtiofsd: Option<&Path>) -> Result<Option<i32>> {
    std::fs::create_dir_all(&spec.workdir)?;
    let qemu = qemu_binary(spec.arch, qemu_search_path().as_deref())?;
    let daemons = virtiofsd::start(&spec.shares, &spec.workdir, &spec.logs, virtiofsd, spec.sandbox)?;
    let mut args = spec.args(&daemons.sockets);
    let at = args.iter().position(|a| a == "stdio").context("no -serial stdio in the arguments")?;
    args[at - 1] = "-chardev".into();
    args[at] = "stdio,id=con,mux=on,signal=off".into();
    args.extend(["-serial", "chardev:con", "-mon", "chardev=con,mode=readline"].map(String::from));
    let status = Command::new(&qemu).args(&args).status().with_context(|| format!("running {}", qemu.display()))?;
    drop(daemons);
    Ok(status.code())
}

enum Event {
    Booted(Instant),
    Panic,
    Died(Instant),
    /// A progress marker: scenario, done, total, elapsed ms, read at.
    Progress(usize, u64, u64, u64, Instant),
}

/// From /init to the agent's first line on the result channel (it waits up to 5 s for its
/// port), beyond the boot timeout.
const STARTUP: Duration = Duration::from_secs(30);

fn killed(started: Instant, reason: String, kind: KillKind) -> Ended {
    Ended::Killed { after_ms: started.elapsed().as_millis() as u64, reason, kind }
}

/// The result log read as it grows (QEMU appends to it), in whole lines, each parsed once: the
/// protocol lines handed on, every event kept.
#[derive(Default)]
struct ResultsTail {
    /// Opened once QEMU has created it; reads go on from where the last one stopped.
    file: Option<std::fs::File>,
    lines: Lines,
    events: Vec<channel::Event>,
}

impl ResultsTail {
    /// The protocol lines read since the last call.
    fn read(&mut self, path: &Path) -> impl Iterator<Item = &protocol::ResultLine> {
        use std::io::Read;
        let from = self.events.len();
        if self.file.is_none() {
            self.file = std::fs::File::open(path).ok();
        }
        if let Some(f) = self.file.as_mut() {
            let mut buf = Vec::new();
            if f.read_to_end(&mut buf).is_ok() && !buf.is_empty() {
                self.events.extend(self.lines.push(&buf));
            }
        }
        self.events[from..].iter().filter_map(channel::Event::line)
    }

    /// Every event of the log, its last line too when the stream was cut in it.
    fn finish(mut self) -> Vec<channel::Event> {
        self.events.extend(self.lines.finish());
        self.events
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// How a VM ended reads as words, never as Rust's `Killed { after_ms: .. }`.
    #[test]
    fn a_task_killed_by_the_kernel_is_seen_on_the_console() {
        assert!(dies("[   12.345678] BUG: kernel NULL pointer dereference, address: 0000000000000000"));
        assert!(dies("[    3.000001] Oops: general protection fault, probably for non-canonical address"));
        assert!(dies("kernel BUG at kernel/trace/trace_events_user.c:123!"));
        assert!(!dies("[    1.000000] WARNING: CPU: 0 PID: 1 at kernel/x.c:1 f+0x1/0x2"));
        assert!(!dies("[    1.000000] ue: a line that mentions Oops: in the middle"));
    }

    /// The log read as it grows hands on each protocol line once and keeps every event, the
    /// cut last line too: what reading the finished log whole gives.
    #[test]
    fn the_tail_reads_the_log_once_as_a_whole_read_would() {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(RESULTS_LOG);
        let mut tail = ResultsTail::default();
        assert_eq!(tail.read(&path).count(), 0, "no log yet");
        let mut log = std::fs::File::create(&path).unwrap();
        let whole = "KTAP version 1\n1..1\nnoise\n# ue-begin 1 a/b taint=0\nok 1 a/b # time_ms=2 taint=0";
        let (first, rest) = whole.split_at(30);
        log.write_all(first.as_bytes()).unwrap();
        let seen: Vec<protocol::ResultLine> = tail.read(&path).cloned().collect();
        assert_eq!(seen, [protocol::ResultLine::Header, protocol::ResultLine::Plan { count: 1 }]);
        log.write_all(rest.as_bytes()).unwrap();
        assert_eq!(tail.read(&path).count(), 1, "the begin line; the result has no newline yet");
        assert_eq!(tail.finish(), channel::parse_all(whole));
    }

    #[test]
    fn ended_reads_as_words() {
        let killed = Ended::Killed { after_ms: 8000, reason: "no /init".into(), kind: KillKind::NoBoot };
        assert_eq!(killed.to_string(), "killed after 8000 ms: no /init");
        assert_eq!(Ended::Exited { code: Some(0) }.to_string(), "exited with code 0");
        assert_eq!(Ended::Exited { code: None }.to_string(), "killed by a signal");
        assert_eq!(Ended::Failed { error: "x".into() }.to_string(), "failed on the host: x");
    }

    #[test]
    fn a_missing_qemu_names_the_package() {
        let arm = crate::arch::select("arm64").unwrap()[0];
        let dir = tempfile::tempdir().unwrap();
        let err = qemu_binary(arm, Some(dir.path().as_os_str())).unwrap_err();
        assert_eq!(
            err.to_string(),
            "`qemu-system-aarch64` not found in PATH (or XTASK_QEMU_DIR): install the Debian package qemu-system-arm (`cargo xtask setup` does)"
        );
        assert_eq!(crate::support::exit::code_for(&err), 129);
    }

    #[test]
    fn command_lines_follow_the_arch_table() {
        let x86 = crate::arch::select("x86_64").unwrap()[0];
        let spec = VmSpec {
            arch: x86,
            kernel: "/k/bzImage".into(),
            initrd: "/k/initrd".into(),
            workdir: "/w".into(),
            logs: "/w".into(),
            accel: Accel::Tcg,
            memory_mb: 256,
            cpus: 1,
            shares: vec![Share { tag: "ue-artifacts".into(), host_dir: "/a".into() }],
            sandbox: SandboxChoice::Auto,
            boot_timeout: Duration::from_secs(30),
            watchdog: Duration::from_secs(60),
            deadlines_ms: None,
            expected: Vec::new(),
            extra_cmdline: vec!["loglevel=7".into()],
            extra_qemu: vec!["-d".into(), "guest_errors".into()],
            stop_after_death: None,
        };
        let args = spec.args(&["/w/fs0.sock".into()]).join(" ");
        assert!(
            args.starts_with(
                "-M microvm,acpi=off,memory-backend=mem -accel tcg -cpu max -m 256M -smp 1 -nodefaults -no-reboot"
            ),
            "{args}"
        );
        assert!(args.contains("-append console=ttyS0 panic=-1 reboot=t no_timer_check loglevel=7 "), "{args}");
        assert!(args.contains("virtserialport,chardev=results,name=ue.results"), "{args}");
        assert!(args.contains("-object memory-backend-memfd,id=mem,size=256M,share=on"), "{args}");
        assert!(args.ends_with("vhost-user-fs-device,chardev=fs0,tag=ue-artifacts -d guest_errors"), "{args}");

        // s390x: channel I/O devices, the SCLP console; riscv64: OpenSBI before the kernel.
        let s390 = VmSpec { arch: crate::arch::select("s390x").unwrap()[0], ..spec.clone() };
        let args = s390.args(&["/w/fs0.sock".into()]).join(" ");
        assert!(args.starts_with("-M s390-ccw-virtio,memory-backend=mem -accel tcg -cpu qemu "), "{args}");
        assert!(args.contains(" -kernel /k/bzImage ") && !args.contains("-bios"), "{args}");
        assert!(args.contains("-append console=ttysclp0 panic=-1 loglevel=7 "), "{args}");
        assert!(args.contains("-device virtio-serial-ccw -chardev file,id=results"), "{args}");
        assert!(args.ends_with("vhost-user-fs-ccw,chardev=fs0,tag=ue-artifacts -d guest_errors"), "{args}");
        let riscv = VmSpec { arch: crate::arch::select("riscv64").unwrap()[0], shares: vec![], ..spec };
        let args = riscv.args(&[]).join(" ");
        assert!(args.starts_with("-M virt -accel tcg -cpu max "), "{args}");
        assert!(args.contains(" -serial stdio -bios default -kernel /k/bzImage "), "{args}");
        assert!(args.contains("-device virtio-serial-device "), "{args}");
    }
}
