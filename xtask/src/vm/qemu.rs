//! The only module that spawns QEMU and virtiofsd: per-arch command lines, the accelerator
//! probe, process groups that die with the run (Ctrl-C included), the console tee and the
//! host watchdog.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::arch::Arch;
use crate::support::exit::{error, Kind};

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

/// Process groups of live children, killed by the Ctrl-C handler.
static GROUPS: Mutex<Vec<i32>> = Mutex::new(Vec::new());
/// Working folders of running VMs (sockets, initramfs, logs), removed by the Ctrl-C handler:
/// the handler exits the process, so their owners' drops never run.
static WORKDIRS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Set by SIGINT, SIGTERM or SIGHUP: running VMs end as `interrupted`, no new boot starts.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);
/// How long the run may take to write what it has (logs, verdicts, run.json) after a signal.
const INTERRUPT_GRACE: Duration = Duration::from_secs(30);

/// Set when `--timeout` expired (then `INTERRUPTED` is set too): its value, as given.
static TIMED_OUT: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Whether a signal (or `--timeout`) asked the run to stop.
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// Whether `--timeout` ended the run.
pub fn timed_out() -> bool {
    TIMED_OUT.get().is_some()
}

/// Why running VMs are being stopped, for their kill reason.
fn stop_reason() -> String {
    match TIMED_OUT.get() {
        Some(limit) => format!("the run's --timeout of {limit} expired"),
        None => "interrupted by a signal".to_string(),
    }
}

/// `--timeout`: after `limit` the run ends as a signal would end it (running boots killed and
/// judged `interrupted`, no new boot, reports written), then exits 131; with no VM running
/// (a kernel build), it exits 131 at once.
pub fn start_deadline(limit: Duration) {
    std::thread::spawn(move || {
        std::thread::sleep(limit);
        let shown = humanize(limit);
        let _ = TIMED_OUT.set(shown.clone());
        eprintln!("\ntimeout: the run took longer than --timeout {shown}: stopping it");
        stop(crate::support::exit::Kind::TimedOut.code());
    });
}

/// `20m`, `1h30m`, `90s`.
fn humanize(d: Duration) -> String {
    let s = d.as_secs();
    let parts = [(s / 3600, "h"), (s / 60 % 60, "m"), (s % 60, "s")];
    let text: String = parts.iter().filter(|(n, _)| *n > 0).map(|(n, u)| format!("{n}{u}")).collect();
    if text.is_empty() {
        format!("{} ms", d.as_millis())
    } else {
        text
    }
}

/// Installs the handler for SIGINT, SIGTERM and SIGHUP. It kills every child group (children
/// live in their own process groups, so a terminal's Ctrl-C does not reach QEMU half-way
/// through a write, which is why xtask must kill them itself). With no VM running it exits
/// with 130 at once. With VMs running, their boots end as `interrupted` and the run writes its
/// logs, verdicts and reports before it exits with 130; a second signal, or
/// [`INTERRUPT_GRACE`] without an exit, exits at once.
pub fn install_signal_handler() {
    let _ = ctrlc::set_handler(|| stop(crate::support::exit::Kind::Interrupted.code()));
}

/// Stops the run (a signal, or `--timeout`): kills every child group; exits with `code` at
/// once when no VM runs or this is the second stop, else lets the run write its reports.
fn stop(code: u8) {
    let again = INTERRUPTED.swap(true, Ordering::SeqCst);
    let booting = GROUPS.lock().map(|g| !g.is_empty()).unwrap_or(false);
    kill_all_groups();
    let what = if timed_out() { "timeout" } else { "interrupted" };
    if again || !booting {
        abandon_children();
        eprintln!("\n{what}: killed QEMU and virtiofsd");
        std::process::exit(code.into());
    }
    eprintln!("\n{what}: killed QEMU and virtiofsd; keeping the logs and writing the reports");
    std::thread::spawn(move || {
        std::thread::sleep(INTERRUPT_GRACE);
        kill_all_groups();
        std::process::exit(code.into());
    });
}

/// Kills every child group and removes the VMs' working folders, for a process about to exit
/// without unwinding (the reader of its stdout went away).
pub fn abandon_children() {
    kill_all_groups();
    for dir in WORKDIRS.lock().map(|d| d.clone()).unwrap_or_default() {
        let _ = std::fs::remove_dir_all(dir);
    }
}

fn kill_all_groups() {
    let groups = GROUPS.lock().map(|g| g.clone()).unwrap_or_default();
    for pgid in groups {
        // SAFETY: killpg has no memory-safety preconditions.
        unsafe {
            libc::killpg(pgid, libc::SIGKILL);
        }
    }
}

/// A child in its own process group; dropping it kills the whole group (TERM, then KILL).
pub struct Group {
    pub child: Child,
    pgid: i32,
    name: String,
}

impl Group {
    pub fn spawn(mut cmd: Command, name: &str) -> Result<Group> {
        cmd.process_group(0);
        let child = cmd.spawn().with_context(|| format!("starting {name}"))?;
        let pgid = child.id() as i32;
        GROUPS.lock().unwrap_or_else(|e| e.into_inner()).push(pgid);
        Ok(Group { child, pgid, name: name.to_string() })
    }

    pub fn signal(&self, sig: i32) {
        // SAFETY: killpg has no memory-safety preconditions.
        unsafe {
            libc::killpg(self.pgid, sig);
        }
    }

    /// Whether any process of the group is still running (zombies waiting for a reaper do not
    /// count: they are dead).
    pub fn alive(&self) -> bool {
        group_alive(self.pgid)
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        self.signal(libc::SIGTERM);
        let deadline = Instant::now() + Duration::from_millis(500);
        while Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_))) && !self.alive() {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        self.signal(libc::SIGKILL);
        let _ = self.child.wait();
        // Zombies of the group's other members are reaped by init; give them a moment.
        let deadline = Instant::now() + Duration::from_millis(500);
        while self.alive() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        if self.alive() {
            crate::support::progress::line(format!(
                "warning: {} (process group {}) survived SIGKILL",
                self.name, self.pgid
            ));
        }
        GROUPS.lock().unwrap_or_else(|e| e.into_inner()).retain(|&g| g != self.pgid);
    }
}

/// Scans `/proc/*/stat` for a live (not zombie) process in process group `pgid`.
pub fn group_alive(pgid: i32) -> bool {
    let Ok(dir) = std::fs::read_dir("/proc") else { return false };
    dir.flatten().any(|e| {
        let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
        // The command name may hold spaces; the fields after its closing parenthesis do not.
        let Some((_, rest)) = stat.rsplit_once(')') else { return false };
        let f: Vec<&str> = rest.split_whitespace().collect();
        f.len() > 2 && f[0] != "Z" && f[2].parse() == Ok(pgid)
    })
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

/// The virtiofsd binary: on PATH, or where `cargo install` puts it.
pub fn virtiofsd_binary() -> Option<PathBuf> {
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")));
    let mut candidates: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).map(|d| d.join("virtiofsd")).collect())
        .unwrap_or_default();
    candidates.extend(cargo_home.map(|h| h.join("bin/virtiofsd")));
    candidates.push("/usr/libexec/virtiofsd".into());
    let sh = crate::support::cmd::sh().ok()?;
    candidates.into_iter().find(|c| crate::support::cmd::succeeds(sh.cmd(c).arg("--version")))
}

/// A folder shared into the guest over virtio-fs.
#[derive(Debug, Clone)]
pub struct Share {
    pub tag: String,
    pub host_dir: PathBuf,
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
    /// Kill the VM when the kernel has not reached /init by then.
    pub boot_timeout: Duration,
    /// Kill the VM when it has not ended by then (the host watchdog).
    pub watchdog: Duration,
    /// The plan's deadlines, scenario by scenario, for the progress watchdog (`hang.rs`);
    /// `None` runs without it (the KVM probe, the shell).
    pub deadlines_ms: Option<Vec<u64>>,
    /// `--kernel-args`: appended to the kernel command line.
    pub extra_cmdline: Vec<String>,
    /// `--qemu-args`: appended to QEMU's arguments.
    pub extra_qemu: Vec<String>,
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

/// Starts virtiofsd for one folder and waits until its socket listens.
fn start_virtiofsd(binary: &Path, share: &Share, socket: &Path) -> Result<Group> {
    let mut cmd = Command::new(binary);
    cmd.arg(format!("--socket-path={}", socket.display()))
        .arg(format!("--shared-dir={}", share.host_dir.display()))
        .args(["--sandbox=none", "--cache=never", "--log-level=error"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    let mut group = Group::spawn(cmd, "virtiofsd")?;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if unix_socket_listening(socket) {
            return Ok(group);
        }
        if let Ok(Some(status)) = group.child.try_wait() {
            return Err(error(
                Kind::Infra,
                format!("virtiofsd for {} exited early ({status})", share.host_dir.display()),
            ));
        }
        if Instant::now() > deadline {
            return Err(error(Kind::Infra, format!("virtiofsd did not listen on {} within 10 s", socket.display())));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// One virtiofsd per shared folder, each listening on its socket in the VM's workdir.
fn start_shares(spec: &VmSpec, virtiofsd: Option<&Path>) -> Result<(Vec<Group>, Vec<PathBuf>)> {
    let mut daemons = Vec::new();
    let mut sockets = Vec::new();
    for (i, share) in spec.shares.iter().enumerate() {
        let binary = virtiofsd.ok_or_else(|| {
            error(
                Kind::Infra,
                "virtiofsd is needed to share folders: run `cargo xtask setup` (cargo install virtiofsd)",
            )
        })?;
        let socket = spec.workdir.join(format!("fs{i}.sock"));
        daemons.push(start_virtiofsd(binary, share, &socket)?);
        sockets.push(socket);
    }
    Ok((daemons, sockets))
}

/// Whether a Unix socket at `path` is listening, from `/proc/net/unix` (flag `__SO_ACCEPTCON`),
/// without connecting: virtiofsd serves exactly one connection, so a probe would use it up.
pub fn unix_socket_listening(path: &Path) -> bool {
    let table = std::fs::read_to_string("/proc/net/unix").unwrap_or_default();
    let want = path.display().to_string();
    listening_in(&table, &want)
}

fn listening_in(table: &str, path: &str) -> bool {
    table.lines().skip(1).any(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        f.len() >= 8 && f[7] == path && u32::from_str_radix(f[3], 16).is_ok_and(|flags| flags & 0x10000 != 0)
    })
}

/// Boots one VM and waits for it to end, teeing the console to `console.log`.
pub fn run(spec: &VmSpec, virtiofsd: Option<&Path>) -> Result<VmRun> {
    run_live(spec, virtiofsd, &|_| {})
}

/// [`run`], handing each result-channel line to `live` as it arrives.
pub fn run_live(spec: &VmSpec, virtiofsd: Option<&Path>, live: &dyn Fn(&protocol::ResultLine)) -> Result<VmRun> {
    std::fs::create_dir_all(&spec.workdir)?;
    std::fs::create_dir_all(&spec.logs)?;
    if let Ok(mut dirs) = WORKDIRS.lock() {
        dirs.push(spec.workdir.clone());
    }
    let qemu = qemu_binary(spec.arch, qemu_search_path().as_deref())?;
    let (daemons, sockets) = start_shares(spec, virtiofsd)?;
    let args = spec.args(&sockets);
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
    let mut log = std::fs::File::create(&log_path).with_context(|| format!("creating {}", log_path.display()))?;
    let reader = std::thread::spawn(move || -> std::io::Result<()> {
        for line in BufReader::new(stdout).split(b'\n') {
            let line = line?;
            log.write_all(&line)?;
            log.write_all(b"\n")?;
            let text = String::from_utf8_lossy(&line);
            if text.contains(BOOT_MARKER) {
                let _ = tx.send(Event::Booted(Instant::now()));
            } else if text.contains(PANIC_MARKER) {
                let _ = tx.send(Event::Panic);
            }
        }
        log.flush()
    });

    let mut boot = None;
    let mut panic_at = None;
    let mut watch =
        spec.deadlines_ms.clone().map(|d| crate::vm::hang::Watch::new(d, spec.boot_timeout + STARTUP, started));
    let mut tail = ResultsTail::default();
    let ended = loop {
        for ev in rx.try_iter() {
            match ev {
                Event::Booted(at) => boot = Some(at - started),
                Event::Panic => panic_at = Some(Instant::now()),
            }
        }
        for line in tail.read(&spec.results_log()) {
            live(&line);
            if let Some(w) = watch.as_mut() {
                w.feed(&line, Instant::now());
            }
        }
        if let Some(status) = vm.child.try_wait()? {
            if interrupted() {
                break killed(started, stop_reason(), KillKind::Interrupted);
            }
            break Ended::Exited { code: status.code() };
        }
        let elapsed = started.elapsed();
        let kill = if interrupted() {
            Some((stop_reason(), KillKind::Interrupted))
        } else if boot.is_none() && elapsed > spec.boot_timeout {
            let why = format!("the kernel did not reach /init within {} s", spec.boot_timeout.as_secs());
            Some((why, KillKind::NoBoot))
        } else if panic_at.is_some_and(|p| p.elapsed() > Duration::from_secs(10)) {
            Some(("the kernel panicked but did not reboot within 10 s".to_string(), KillKind::PanicNoReboot))
        } else if let Some(why) = watch.as_ref().filter(|_| boot.is_some()).and_then(|w| w.overdue(Instant::now())) {
            Some((why, KillKind::Hung))
        } else if elapsed > spec.watchdog {
            let why = format!("the VM did not end within the host watchdog of {} s", spec.watchdog.as_secs());
            Some((why, KillKind::Watchdog))
        } else {
            None
        };
        if let Some((reason, kind)) = kill {
            vm.signal(libc::SIGKILL);
            let _ = vm.child.wait();
            break killed(started, reason, kind);
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let wall = started.elapsed();
    for line in tail.read(&spec.results_log()) {
        live(&line);
    }
    drop(vm);
    drop(daemons);
    reader.join().map_err(|_| anyhow::anyhow!("console reader panicked"))?.context("reading the console")?;
    Ok(VmRun { ended, command_line, wall, boot })
}

/// Runs a VM with the terminal as its console, for `cargo xtask shell`. QEMU stays in the
/// terminal's foreground process group (it reads the keyboard); Ctrl-A x quits it.
pub fn interactive(spec: &VmSpec, virtiofsd: Option<&Path>) -> Result<Option<i32>> {
    std::fs::create_dir_all(&spec.workdir)?;
    let qemu = qemu_binary(spec.arch, qemu_search_path().as_deref())?;
    let (daemons, sockets) = start_shares(spec, virtiofsd)?;
    let mut args = spec.args(&sockets);
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
}

/// From /init to the agent's first line on the result channel (it waits up to 5 s for its
/// port), beyond the boot timeout.
const STARTUP: Duration = Duration::from_secs(30);

fn killed(started: Instant, reason: String, kind: KillKind) -> Ended {
    Ended::Killed { after_ms: started.elapsed().as_millis() as u64, reason, kind }
}

/// The result log read as it grows (QEMU appends to it), in whole lines.
#[derive(Default)]
struct ResultsTail {
    /// Opened once QEMU has created it; reads go on from where the last one stopped.
    file: Option<std::fs::File>,
    lines: crate::vm::hang::Lines,
}

impl ResultsTail {
    fn read(&mut self, path: &Path) -> Vec<protocol::ResultLine> {
        use std::io::Read;
        if self.file.is_none() {
            self.file = std::fs::File::open(path).ok();
        }
        let Some(f) = self.file.as_mut() else { return vec![] };
        let mut buf = Vec::new();
        if f.read_to_end(&mut buf).is_err() || buf.is_empty() {
            return vec![];
        }
        self.lines.push(&buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_timeout_is_named_as_it_was_written() {
        assert_eq!(humanize(Duration::from_secs(1200)), "20m");
        assert_eq!(humanize(Duration::from_secs(5400)), "1h30m");
        assert_eq!(humanize(Duration::from_secs(90)), "1m30s");
        assert_eq!(humanize(Duration::from_millis(500)), "500 ms");
        assert_eq!(stop_reason(), "interrupted by a signal", "no timeout in this process");
    }

    /// How a VM ended reads as words, never as Rust's `Killed { after_ms: .. }`.
    #[test]
    fn ended_reads_as_words() {
        let killed = Ended::Killed { after_ms: 8000, reason: "no /init".into(), kind: KillKind::NoBoot };
        assert_eq!(killed.to_string(), "killed after 8000 ms: no /init");
        assert_eq!(Ended::Exited { code: Some(0) }.to_string(), "exited with code 0");
        assert_eq!(Ended::Exited { code: None }.to_string(), "killed by a signal");
        assert_eq!(Ended::Failed { error: "x".into() }.to_string(), "failed on the host: x");
    }

    #[test]
    fn dropping_a_group_kills_its_grandchildren() {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "sleep 30 & sleep 30 & wait"]);
        let group = Group::spawn(cmd, "sleepers").unwrap();
        let pgid = group.pgid;
        std::thread::sleep(Duration::from_millis(100));
        assert!(group.alive());
        drop(group);
        assert!(!group_alive(pgid), "a process of the group survived");
        assert!(!GROUPS.lock().unwrap().contains(&pgid));
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
    fn listening_sockets_are_read_from_proc_net_unix() {
        let table = "Num       RefCount Protocol Flags    Type St Inode Path\n\
                     0000000000000000: 00000002 00000000 00010000 0001 01 27469 /tmp/vm/fs0.sock\n\
                     0000000000000000: 00000002 00000000 00000000 0001 03 27470 /tmp/vm/fs1.sock\n";
        assert!(listening_in(table, "/tmp/vm/fs0.sock"));
        assert!(!listening_in(table, "/tmp/vm/fs1.sock"), "connected, not listening");
        assert!(!listening_in(table, "/tmp/vm/other.sock"));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sock");
        let _listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        assert!(unix_socket_listening(&path));
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
            boot_timeout: Duration::from_secs(30),
            watchdog: Duration::from_secs(60),
            deadlines_ms: None,
            extra_cmdline: vec!["loglevel=7".into()],
            extra_qemu: vec!["-d".into(), "guest_errors".into()],
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
