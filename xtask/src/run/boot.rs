//! The boot phase: the agent and a plan become an initramfs, each arch boots in its own VM
//! (in parallel), and the console and result channel become one verdict per boot. Here: the
//! options, one VM's boot with its live listeners, its initramfs and QEMU spec; `lanes` (a
//! plan's boots per arch), `judged` (a boot with its verdict), `commands` (`exec`, `shell`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};

use super::accel::accel_for;
use crate::arch::Arch;
use crate::judging::run_folder::{self};
use crate::kernel::build::Built;
use crate::support::exit::{error, Kind};
use crate::support::progress::line;
use crate::vm::qemu::AccelChoice;
use crate::vm::qemu::{self, Accel, VmRun, VmSpec};
use crate::vm::virtiofsd::{SandboxChoice, Share};

/// Options shared by every boot of a run (the VM flags, resolved once by `Options::of`).
#[derive(Debug, Clone)]
pub struct Options {
    pub accel: AccelChoice,
    /// `--share HOST_DIR[:GUEST_PATH]`.
    pub share: Option<(PathBuf, String)>,
    /// `--virtiofsd-sandbox`.
    pub sandbox: SandboxChoice,
    pub cpus: u32,
    pub memory_mb: u32,
    /// `--kernel-args`, split at spaces.
    pub kernel_args: Vec<String>,
    /// `--qemu-args`, split at spaces.
    pub qemu_args: Vec<String>,
    /// VMs per arch for the shared scenarios (`--vms`).
    pub vms: usize,
    pub cache_dir: PathBuf,
    /// Where run folders go (`--results`, default `results/` in the checkout).
    pub results: PathBuf,
    /// Told each result line as it arrives, after it is printed.
    pub watch: Option<Watch>,
    /// `run --fail-fast`: each arch stops at its first failure.
    pub fail_fast: bool,
}

/// What a boot's result lines are told to as they arrive (the boot's folder name, the line):
/// `validate` names a regression as soon as its scenario ends.
#[derive(Clone)]
pub struct Watch(pub std::sync::Arc<WatchFn>);

/// A watch's function: the boot's folder name and the result line.
pub type WatchFn = dyn Fn(&str, &protocol::ResultLine) + Send + Sync;

impl std::fmt::Debug for Watch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Watch")
    }
}

impl Options {
    /// The VM flags resolved into the boots' options, once, before anything boots (a bad
    /// `--share` is bad input). `cache_dir` is `--cache-dir`.
    pub fn of(vm: &crate::cli::VmArgs, cache_dir: Option<&Path>) -> Result<Options> {
        let (kernel_args, qemu_args) = vm.split_args()?;
        Ok(Options {
            accel: vm.accel,
            share: vm.share.as_deref().map(parse_share).transpose()?,
            sandbox: vm.virtiofsd_sandbox,
            cpus: vm.cpus,
            memory_mb: vm.memory,
            kernel_args,
            qemu_args,
            vms: vm.vms as usize,
            cache_dir: crate::kernel::cache::root(cache_dir),
            results: vm.results_root(),
            watch: None,
            fail_fast: false,
        })
    }
}

/// One boot to run: a kernel, a plan and extra files for the initramfs.
pub struct Job<'a> {
    pub built: &'a Built,
    pub plan: protocol::Plan,
    /// (path in the guest, bytes) added to the initramfs, executable.
    pub extra: Vec<(String, Vec<u8>)>,
    /// `results/<run-id>/<arch>`: console, result channel, artifacts, verdict.
    pub out_dir: PathBuf,
    /// Scenarios expected to fail (`xfail`), so their live line says so.
    pub xfail: std::collections::BTreeSet<String>,
}

/// What one boot produced.
#[derive(Debug)]
pub struct Outcome {
    pub arch: &'static Arch,
    pub accel: Accel,
    pub vm: VmRun,
    pub out_dir: PathBuf,
    /// Whether the artifacts folder came back from the guest over virtio-fs.
    pub artifacts_shared: bool,
    /// What QEMU booted: kernel, initramfs (kept by content in the cache), machine; recorded so
    /// `cargo xtask replay` can boot it again.
    pub spec: VmSpec,
}

/// Parses `--share HOST_DIR[:GUEST_PATH]` (default guest path `/share`).
pub fn parse_share(arg: &str) -> Result<(PathBuf, String)> {
    let (host, guest) = match arg.split_once(':') {
        Some((h, g)) => (h, g.to_string()),
        None => (arg, "/share".to_string()),
    };
    let host = Path::new(host);
    if !host.is_dir() {
        return Err(error(Kind::BadInput, format!("--share {arg}: {} is not a directory", host.display())));
    }
    if !guest.starts_with('/') || guest == "/" {
        return Err(error(Kind::BadInput, format!("--share {arg}: the guest path `{guest}` must be absolute, not /")));
    }
    Ok((host.canonicalize()?, guest))
}

/// Boots every job, the arches in parallel, and returns the outcomes in job order.
pub fn run_all(jobs: Vec<Job>, opts: &Options) -> Result<Vec<Outcome>> {
    let virtiofsd = crate::vm::virtiofsd::binary();
    // Said only when a plan writes into `/artifacts`: `--share` without virtiofsd is an error
    // (`vm_spec`), and a plan that never names the folder loses nothing.
    if virtiofsd.is_none() && jobs.iter().any(|j| writes_artifacts(&j.plan)) {
        line(
            "virtiofsd not found: booting without virtio-fs, so what the scenarios write to /artifacts stays in \
             the guest (`cargo xtask setup` installs it)",
        );
    }
    // A missing QEMU is the host's problem, named before any boot starts.
    for job in &jobs {
        qemu::qemu_binary(job.built.arch, qemu::qemu_search_path().as_deref())?;
    }
    let mut prepared = Vec::new();
    for mut job in jobs {
        let started = std::time::Instant::now();
        let agent = crate::vm::initramfs::build_agent(job.built.arch)?;
        // The clients first, so a job's own file at the same path (`exec`) wins.
        let mut extra = crate::vm::initramfs::clients_for(job.built.arch, &job.plan, false)?;
        extra.append(&mut job.extra);
        job.extra = extra;
        crate::support::timings::record(Some(&boot_name(&job.out_dir)), "initramfs", started.elapsed());
        let accel = accel_for(job.built, &agent, opts.accel, &opts.cache_dir)?;
        prepared.push((job, agent, accel));
    }
    std::thread::scope(|s| {
        let handles: Vec<_> = prepared
            .into_iter()
            .map(|(job, agent, accel)| {
                let virtiofsd = virtiofsd.as_deref();
                s.spawn(move || boot_one(job, &agent, accel, virtiofsd, opts))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err(anyhow::anyhow!("a boot thread panicked"))))
            .collect()
    })
}

fn boot_one(mut job: Job, agent: &Path, accel: Accel, virtiofsd: Option<&Path>, opts: &Options) -> Result<Outcome> {
    let arch = job.built.arch;
    std::fs::create_dir_all(&job.out_dir)?;
    // Only the sockets live here: the logs go straight into the run folder as they come.
    let scratch = tempfile::Builder::new().prefix(&format!("xtask-vm-{}-", arch.name)).tempdir()?;
    let artifacts = job.out_dir.join(run_folder::ARTIFACTS);
    std::fs::create_dir_all(&artifacts)?;
    let started = std::time::Instant::now();
    let guest = Guest {
        built: job.built,
        agent,
        accel,
        extra: &job.extra,
        artifacts: Some(&artifacts),
        work: scratch.path(),
        logs: &job.out_dir,
    };
    let spec = vm_spec(&guest, &mut job.plan, virtiofsd, opts)?;
    let name = boot_name(&job.out_dir);
    crate::support::timings::record(Some(&name), "initramfs", started.elapsed());
    line(format!(
        "{name}: booting {} ({}, {} scenario(s))",
        job.built.metadata.kernelrelease,
        accel.name(),
        job.plan.scenarios.len()
    ));
    // A coverage kernel's snapshots go to gcov as they come, in idle time.
    let prefetch = crate::coverage::prefetch::Prefetch::start(job.built);
    let live = |l: &protocol::ResultLine| {
        live_line(&name, l, &job.xfail);
        if let Some(p) = &prefetch {
            p.line(l);
        }
        if let Some(w) = &opts.watch {
            (w.0)(&name, l);
        }
    };
    let vm = qemu::run_live(&spec, virtiofsd, &live).unwrap_or_else(|e| {
        // Past this point nothing is thrown away: the boot is judged an infrastructure error
        // with whatever logs it left.
        line(format!("{name}: the boot failed on the host: {e:#}"));
        // The judge reads both logs: a boot that never started leaves them empty.
        for log in [spec.console_log(), spec.results_log()] {
            if !log.exists() {
                let _ = std::fs::write(&log, b"");
            }
        }
        VmRun {
            ended: qemu::Ended::Failed { error: format!("{e:#}") },
            command_line: std::fs::read_to_string(job.out_dir.join(run_folder::QEMU_COMMAND))
                .unwrap_or_default()
                .trim()
                .to_string(),
            wall: started.elapsed(),
            boot: None,
            sandbox: None,
            // No run read the channel: what QEMU wrote, if anything, is read back once here.
            channel: crate::vm::channel::parse_all(&String::from_utf8_lossy(
                &std::fs::read(spec.results_log()).unwrap_or_default(),
            )),
        }
    });
    let to_init = vm.boot.unwrap_or(vm.wall);
    crate::support::timings::record(Some(&name), "boot", to_init);
    crate::support::timings::record(Some(&name), "scenarios", vm.wall.saturating_sub(to_init));
    Ok(Outcome { arch, accel, vm, out_dir: job.out_dir, artifacts_shared: job.plan.artifacts_virtiofs, spec })
}

/// A scenario's result as it arrives on the result channel, KUnit-style with the boot's name
/// (`[PASSED] x86_64/registration/basic (12 ms)`): the agent's view, before the host adds the
/// console's findings and the suites' marks, which the boot's summary then reports.
pub fn live_line(boot: &str, l: &protocol::ResultLine, xfail: &std::collections::BTreeSet<String>) {
    use protocol::{Outcome, ResultLine};
    match l {
        ResultLine::Result { name, outcome, time_ms, .. } => {
            let tag = match outcome {
                Outcome::Pass => "PASSED",
                Outcome::Fail if xfail.contains(name) => "XFAIL",
                Outcome::Fail => "FAILED",
                Outcome::Skip => "SKIPPED",
                Outcome::Timeout => "TIMEOUT",
            };
            line(format!("{} {boot}/{name} ({time_ms} ms)", crate::support::progress::tag(tag)));
        }
        ResultLine::Abort { reason, .. } => line(format!("{boot}: the agent gave up the boot: {reason}")),
        _ => {}
    }
}

/// What one VM boots: a kernel, the agent, the initramfs's extra files, and its folders.
struct Guest<'a> {
    built: &'a Built,
    agent: &'a Path,
    accel: Accel,
    /// (path in the guest, bytes) added to the initramfs, executable.
    extra: &'a [(String, Vec<u8>)],
    /// Where the guest's `/artifacts` comes back; `None` for the shell, where nothing does.
    artifacts: Option<&'a Path>,
    /// The VM's sockets and initramfs (short-lived).
    work: &'a Path,
    /// Its logs (kept).
    logs: &'a Path,
}

/// How much longer a kernel's boot takes for its sanitizer: KMSAN checks every load and store
/// of the kernel, and its boot under TCG took over a minute to reach `/init` where the default
/// kernel takes seconds.
fn sanitizer_slowdown(config: &Path) -> u64 {
    let text = std::fs::read_to_string(config).unwrap_or_default();
    if text.lines().any(|l| l == "CONFIG_KMSAN=y") {
        10
    } else {
        1
    }
}

/// Wires the virtio-fs shares into the plan, writes the initramfs (kept by content in the
/// cache) and returns the VM to run. A plan with a shell has no deadlines.
fn vm_spec(guest: &Guest, plan: &mut protocol::Plan, virtiofsd: Option<&Path>, opts: &Options) -> Result<VmSpec> {
    let Guest { built, agent, accel, extra, artifacts, work, logs } = *guest;
    let mut shares = Vec::new();
    if virtiofsd.is_some() {
        if let Some(dir) = artifacts.filter(|_| writes_artifacts(plan)) {
            shares.push(Share { tag: protocol::ARTIFACTS_TAG.into(), host_dir: dir.to_path_buf() });
            plan.artifacts_virtiofs = true;
        }
        if let Some((host, guest)) = &opts.share {
            shares.push(Share { tag: protocol::SHARE_TAG.into(), host_dir: host.clone() });
            plan.share = Some(guest.clone());
        }
    } else if opts.share.is_some() {
        return Err(error(Kind::Infra, "--share needs virtiofsd: run `cargo xtask setup`"));
    }
    let initrd = keep_initramfs(&opts.cache_dir, work, |path| crate::vm::initramfs::write(path, agent, plan, extra))?;
    let boot_timeout = Duration::from_secs(15 * accel.slowdown() as u64 * sanitizer_slowdown(&built.config));
    let deadlines: u64 = plan.scenarios.iter().map(|s| s.deadline_ms).sum();
    let (boot_timeout, watchdog, deadlines_ms) = if plan.shell {
        (Duration::MAX, Duration::MAX, None)
    } else {
        // The backstop behind the progress watchdog (`hang.rs`), which fires long before.
        let watchdog = boot_timeout + Duration::from_millis(deadlines) + Duration::from_secs(30);
        (boot_timeout, watchdog, Some(plan.scenarios.iter().map(|s| s.deadline_ms).collect()))
    };
    let names: Vec<&str> = plan.scenarios.iter().map(|s| s.name.as_str()).collect();
    let expected = if deadlines_ms.is_some() {
        crate::history::expected(built.arch.name, &names, &|i| reports_progress(&plan.scenarios[i]))
    } else {
        Vec::new()
    };
    Ok(VmSpec {
        arch: built.arch,
        kernel: built.image.clone(),
        initrd,
        workdir: work.to_path_buf(),
        logs: logs.to_path_buf(),
        accel,
        memory_mb: opts.memory_mb,
        cpus: opts.cpus,
        shares,
        sandbox: opts.sandbox,
        boot_timeout,
        watchdog,
        deadlines_ms,
        expected,
        extra_cmdline: opts.kernel_args.clone(),
        extra_qemu: opts.qemu_args.clone(),
        stop_after_death: opts.fail_fast.then_some(DEATH_GRACE),
    })
}

/// Whether a scenario has a step that writes progress markers (`register_until`): only those
/// are looked up in the history for the crawl rule.
fn reports_progress(s: &protocol::Scenario) -> bool {
    s.steps.iter().any(|step| matches!(step, protocol::Step::RegisterUntil(_)))
}

/// With `--fail-fast`, how long a VM runs on after its kernel killed a task: the agent reports
/// the scenario's failure itself when the task's death does not block it.
const DEATH_GRACE: Duration = Duration::from_secs(3);

/// Whether a plan names the guest's `/artifacts` folder (a step writes there): only then is it
/// shared over virtio-fs, so the other boots start no virtiofsd and need none.
fn writes_artifacts(plan: &protocol::Plan) -> bool {
    let json = serde_json::to_string(&plan.scenarios).unwrap_or_default();
    json.contains(&format!("\"{}/", protocol::ARTIFACTS_DIR))
        || json.contains(&format!("\"{}\"", protocol::ARTIFACTS_DIR))
}

/// Writes an initramfs with `write` and keeps it as `<cache>/initramfs/<sha256>.cpio`, so a
/// run folder can name the exact initramfs it booted (`replay`) without holding a copy.
fn keep_initramfs(cache_dir: &Path, scratch: &Path, write: impl FnOnce(&Path) -> Result<()>) -> Result<PathBuf> {
    let fresh = scratch.join("initramfs.cpio");
    write(&fresh)?;
    let digest = crate::support::files::sha256_file(&fresh)?;
    let dir = cache_dir.join("initramfs");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let kept = dir.join(format!("{digest}.cpio"));
    if !kept.is_file() {
        let part = dir.join(format!("{digest}.cpio.part-{}", std::process::id()));
        std::fs::copy(&fresh, &part).with_context(|| format!("keeping {}", kept.display()))?;
        std::fs::rename(&part, &kept)?;
    }
    Ok(kept)
}

/// The boot's folder name in the run (`x86_64`, `x86_64.isolated-1`), as phases are keyed.
fn boot_name(out_dir: &Path) -> String {
    out_dir.file_name().map_or(String::new(), |n| n.to_string_lossy().into_owned())
}

mod commands;
mod judged;
mod lanes;

pub use commands::{exec, shell};
pub use judged::{exit_code, print_boot, BootRun};
pub use lanes::{finish_run, run_plan_on, run_plans, run_plans_in, shared_dir, split_plan, PlanFor};

#[cfg(test)]
mod tests {
    use super::*;

    /// Only a plan that writes into /artifacts shares it (and wants virtiofsd).
    #[test]
    fn only_plans_naming_artifacts_share_them() {
        let write = |path: &str| {
            protocol::Step::WriteFile(protocol::steps::WriteFile {
                path: path.into(),
                data: "x".into(),
                bytes: None,
                create: true,
                append: false,
                expect: Default::default(),
                within_ms: 0,
            })
        };
        let plan = |path: &str| {
            let mut p = protocol::Plan::empty("x86_64");
            p.scenarios.push(protocol::Scenario { name: "s/a".into(), deadline_ms: 1, steps: vec![write(path)] });
            p
        };
        assert!(writes_artifacts(&plan("/artifacts/raw.dat")));
        assert!(!writes_artifacts(&plan("/tmp/artifacts-not")));
        assert!(!writes_artifacts(&protocol::Plan::empty("x86_64")));
    }

    #[test]
    fn shares_parse_with_a_default_guest_path() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().display().to_string();
        assert_eq!(parse_share(&d).unwrap().1, "/share");
        assert_eq!(parse_share(&format!("{d}:/mnt/x")).unwrap().1, "/mnt/x");
        assert_eq!(crate::support::exit::code_for(&parse_share(&format!("{d}:rel")).unwrap_err()), 128);
        assert_eq!(crate::support::exit::code_for(&parse_share("/no/such/dir").unwrap_err()), 128);
    }
}
