//! The boot phase: the agent and a plan become an initramfs, each arch boots in its own VM
//! (in parallel), and the console and result channel become one verdict per boot.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};

use super::accel::accel_for;
use super::breakage::{resume_plan, stop_spending, stopped_at, Breakage};
use crate::arch::Arch;
use crate::judging::run_folder::{self, BootDir, BootFacts, BootFolder, JudgedBoot, VmRecord};
use crate::judging::verdict::{BootResult, BootVerdict, WithXfail};
use crate::kernel::build::Built;
use crate::results::model::RunVerdict;
use crate::suites::Marks;
use crate::support::exit::{error, Kind};
use crate::support::progress::line;
use crate::vm::children;
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
    pub fn of(vm: &crate::flags::VmArgs, cache_dir: Option<&Path>) -> Result<Options> {
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
    let boot_timeout = Duration::from_secs(15 * accel.slowdown() as u64);
    let deadlines: u64 = plan.scenarios.iter().map(|s| s.deadline_ms).sum();
    let (boot_timeout, watchdog, deadlines_ms) = if plan.shell {
        (Duration::MAX, Duration::MAX, None)
    } else {
        // The backstop behind the progress watchdog (`hang.rs`), which fires long before.
        let watchdog = boot_timeout + Duration::from_millis(deadlines) + Duration::from_secs(30);
        (boot_timeout, watchdog, Some(plan.scenarios.iter().map(|s| s.deadline_ms).collect()))
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
        extra_cmdline: opts.kernel_args.clone(),
        extra_qemu: opts.qemu_args.clone(),
        stop_after_death: opts.fail_fast.then_some(DEATH_GRACE),
    })
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

/// Boots `plan` on every built kernel and judges each boot.
pub fn run_plan_on(
    built: &[Built],
    plan: &protocol::Plan,
    extra: &[(String, Vec<u8>)],
    opts: &Options,
) -> Result<Vec<BootRun>> {
    let plans = built
        .iter()
        .map(|b| PlanFor { built: b, plan: plan.clone(), marks: Default::default(), dir: b.arch.name.to_string() })
        .collect();
    run_plans(plans, extra, opts)
}

/// A kernel and the plan compiled for it (suites compile per kernel: `requires` differ).
pub struct PlanFor<'a> {
    pub built: &'a Built,
    pub plan: protocol::Plan,
    pub marks: Marks,
    /// The boot's folder in the run: the arch name, or `<arch>.isolated-<n>` for a scenario
    /// that runs in a boot of its own.
    pub dir: String,
}

/// Cuts a plan's scenarios into `parts` consecutive plans of about equal size (fewer when there
/// are fewer scenarios), for `--vms`.
pub fn split_plan(plan: protocol::Plan, parts: usize) -> Vec<protocol::Plan> {
    let n = plan.scenarios.len();
    let parts = parts.clamp(1, n.max(1));
    let mut out = Vec::new();
    let mut rest = plan.scenarios.clone().into_iter();
    for k in 0..parts {
        let take = n / parts + usize::from(k < n % parts);
        out.push(protocol::Plan { scenarios: rest.by_ref().take(take).collect(), ..plan.clone() });
    }
    out
}

/// The folder of part `k` (from 1) of an arch's shared boot: `x86_64`, `x86_64.vm-2`, ...
pub fn shared_dir(arch: &str, k: usize) -> String {
    BootDir::Shared(k as u32).name(arch)
}

/// Boots the plans into a new run folder under the results root and judges each boot.
pub fn run_plans(plans: Vec<PlanFor>, extra: &[(String, Vec<u8>)], opts: &Options) -> Result<Vec<BootRun>> {
    let run_dir = run_folder::new_run_dir(&opts.results)?;
    let judged = run_plans_in(plans, extra, opts, &run_dir)?;
    finish_run(&judged, &run_dir);
    Ok(judged)
}

/// The boots' summaries and where the run is, once every lane has ended.
pub fn finish_run(judged: &[BootRun], run_dir: &Path) {
    for j in judged {
        print_boot(j);
    }
    line(format!("results: {}", run_dir.display()));
}

/// Boots the plans into `run_dir` and judges each boot. Each arch is a lane of its own: the
/// parts of its shared plan (`--vms`) side by side, then its isolated scenarios one boot at a
/// time (never beside another boot of the same arch, whose timing they would disturb). The
/// lanes run side by side, so no arch waits for another's boots. A boot that a crash or hang
/// ended early hands the scenarios it did not run to a fresh boot of the same kernel
/// (`<arch>.resume-N`, at most [`super::breakage::MAX_RESUMES`] per arch); the scenario that broke it keeps its
/// own verdict and is not run again. The judged boots come back wave by wave (every lane's
/// shared boots, then the first isolated ones, ...), the arches in the order of `plans`.
pub fn run_plans_in(
    plans: Vec<PlanFor>,
    extra: &[(String, Vec<u8>)],
    opts: &Options,
    run_dir: &Path,
) -> Result<Vec<BootRun>> {
    let mut lanes: Vec<Vec<PlanFor>> = Vec::new();
    for p in plans {
        match lanes.iter_mut().find(|l| l[0].built.arch.name == p.built.arch.name) {
            Some(lane) => lane.push(p),
            None => lanes.push(vec![p]),
        }
    }
    let ended: Vec<Result<Vec<(usize, BootRun)>>> = std::thread::scope(|s| {
        let handles: Vec<_> =
            lanes.into_iter().map(|lane| s.spawn(move || run_lane(lane, extra, opts, run_dir))).collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|_| Err(anyhow::anyhow!("a boot lane panicked")))).collect()
    });
    let mut judged = Vec::new();
    for lane in ended {
        judged.extend(lane?);
    }
    judged.sort_by_key(|(wave, _)| *wave);
    Ok(judged.into_iter().map(|(_, j)| j).collect())
}

/// One arch's boots, wave after wave; each judged boot with its wave's number.
fn run_lane(
    plans: Vec<PlanFor>,
    extra: &[(String, Vec<u8>)],
    opts: &Options,
    run_dir: &Path,
) -> Result<Vec<(usize, BootRun)>> {
    let (isolated, shared): (Vec<PlanFor>, Vec<PlanFor>) = plans
        .into_iter()
        .partition(|p| BootDir::parse(&p.dir).is_some_and(|(_, place)| matches!(place, BootDir::Isolated(_))));
    let mut waves: std::collections::VecDeque<Vec<PlanFor>> =
        std::iter::once(shared).chain(isolated.into_iter().map(|p| vec![p])).filter(|w| !w.is_empty()).collect();
    let mut resumes = 0;
    let mut breakage: Option<Breakage> = None;
    let mut broken_in_a_row = 0;
    let mut judged = Vec::new();
    let mut wave_no = 0;
    while let Some(wave) = waves.pop_front() {
        if children::interrupted() {
            break;
        }
        let jobs = wave
            .iter()
            .map(|p| Job {
                built: p.built,
                plan: protocol::Plan {
                    stop_at_first_failure: opts.fail_fast,
                    expected_failures: if opts.fail_fast { p.marks.xfail.keys().cloned().collect() } else { vec![] },
                    ..p.plan.clone()
                },
                extra: extra.to_vec(),
                out_dir: run_dir.join(&p.dir),
                xfail: p.marks.xfail.keys().cloned().collect(),
            })
            .collect();
        let outcomes = run_all(jobs, opts)?;
        let mut next = Vec::new();
        for (o, p) in outcomes.into_iter().zip(wave) {
            let mut j = BootRun::judge(o, &p.plan, p.marks.clone())?;
            if let Some(rest) = resume_plan(j.result(), &j.outcome.vm.ended, &p.plan) {
                let arch = p.built.arch.name;
                let (culprit, how) = stopped_at(j.result()).unwrap_or_default();
                let first = breakage.get_or_insert_with(|| Breakage {
                    at: std::time::Instant::now(),
                    culprit: culprit.clone(),
                    how: how.clone(),
                });
                if matches!(BootDir::parse(&p.dir), Some((_, BootDir::Resume(_)))) {
                    broken_in_a_row += 1;
                }
                let last = format!("{culprit}: {how}");
                let stop = if opts.fail_fast {
                    Some("--fail-fast: no fresh boot after a failure".to_string())
                } else {
                    stop_spending(broken_in_a_row, first.at.elapsed(), resumes, &last)
                };
                if let Some(why) = stop {
                    let why = format!("({}); {why}", first.how);
                    line(format!(
                        "{arch}: {} scenario(s) not run, collateral of {} {why}",
                        rest.scenarios.len(),
                        first.culprit
                    ));
                    j.boot.facts.collateral = Some(run_folder::Collateral { culprit: first.culprit.clone(), why });
                    j.boot.write_record()?;
                    judged.push((wave_no, j));
                    continue;
                }
                resumes += 1;
                let dir = BootDir::Resume(resumes).name(arch);
                line(format!(
                    "{arch}: {} ended early at {culprit} ({how}); its {} unrun scenario(s) go to a fresh boot, {dir}",
                    boot_name(&j.outcome.out_dir),
                    rest.scenarios.len()
                ));
                j.resumed_in = Some(dir.clone());
                next.push(PlanFor { built: p.built, plan: rest, marks: p.marks, dir });
            }
            judged.push((wave_no, j));
        }
        if !next.is_empty() {
            waves.push_back(next);
        }
        wave_no += 1;
        if opts.fail_fast && judged.iter().any(|(_, j)| j.counted().verdict != BootVerdict::Pass) {
            if !waves.is_empty() {
                let left: usize = waves.iter().flatten().map(|p| p.plan.scenarios.len()).sum();
                line(format!("--fail-fast: {left} scenario(s) of later boots not run after a failure"));
            }
            break;
        }
    }
    Ok(judged)
}

/// `cargo xtask exec`: runs a static binary in the guest and returns its exit status.
pub fn exec(built: &Built, command: &[String], timeout_s: u64, opts: &Options) -> Result<u8> {
    let host_path = Path::new(&command[0]);
    let bytes = std::fs::read(host_path).map_err(|e| error(Kind::BadInput, format!("{}: {e}", host_path.display())))?;
    let arch = built.arch;
    let order = |big: bool| if big { "big-endian" } else { "little-endian" };
    match crate::vm::initramfs::elf_facts(&bytes) {
        Some(f) if f.bits64 && f.big_endian == arch.big_endian && f.machine == arch.elf_machine && !f.interp => {}
        None => return Err(error(Kind::BadInput, format!("{}: not an ELF executable", host_path.display()))),
        Some(f) if !f.bits64 || f.machine != arch.elf_machine || f.big_endian != arch.big_endian => {
            return Err(error(
                Kind::BadInput,
                format!(
                    "{}: a {}-bit {} ELF executable for machine {}, not {} (64-bit {}, machine {})",
                    host_path.display(),
                    if f.bits64 { 64 } else { 32 },
                    order(f.big_endian),
                    f.machine,
                    arch.name,
                    order(arch.big_endian),
                    arch.elf_machine
                ),
            ))
        }
        Some(_) => {
            return Err(error(
                Kind::BadInput,
                format!("{}: dynamically linked; the guest has no libraries, so build it static", host_path.display()),
            ))
        }
    }
    let name = host_path.file_name().unwrap_or_default().to_string_lossy().into_owned();
    let guest = format!("/bin/{name}");
    let mut argv = vec![guest.clone()];
    argv.extend(command[1..].iter().cloned());
    let mut plan = protocol::Plan::empty("exec");
    plan.scenarios.push(protocol::Scenario {
        name: format!("exec/{}", name.replace(char::is_whitespace, "_")),
        deadline_ms: timeout_s * 1000,
        steps: vec![protocol::Step::Exec(protocol::steps::Exec { argv, expect_exit: 0 })],
    });
    let judged = run_plan_on(std::slice::from_ref(built), &plan, &[(guest, bytes)], opts)?;
    // A signal before the VM started leaves no boot to read a status from.
    match judged.first() {
        Some(j) => exec_status(j),
        None => Err(error(Kind::Interrupted, "interrupted before the VM booted: the program did not run")),
    }
}

/// `cargo xtask shell`: the agent's interactive shell on the terminal.
pub fn shell(built: &Built, opts: &Options) -> Result<u8> {
    let agent = crate::vm::initramfs::build_agent(built.arch)?;
    let accel = accel_for(built, &agent, opts.accel, &opts.cache_dir)?;
    let scratch = tempfile::Builder::new().prefix("xtask-shell-").tempdir()?;
    let mut plan = protocol::Plan::empty("shell");
    plan.shell = true;
    let clients = crate::vm::initramfs::clients_for(built.arch, &plan, true)?;
    let virtiofsd = crate::vm::virtiofsd::binary();
    let guest = Guest {
        built,
        agent: &agent,
        accel,
        extra: &clients,
        artifacts: None,
        work: scratch.path(),
        logs: scratch.path(),
    };
    let spec = vm_spec(&guest, &mut plan, virtiofsd.as_deref(), opts)?;
    line(format!(
        "{}: shell on {} ({}); type `help`, `exit` ends it, Ctrl-A x kills QEMU",
        built.arch.name,
        built.metadata.kernelrelease,
        accel.name()
    ));
    qemu::interactive(&spec, virtiofsd.as_deref())?;
    Ok(0)
}

/// A boot with its verdict.
#[derive(Debug)]
pub struct BootRun {
    pub outcome: Outcome,
    /// Its folder, record and judgement, as the reports take them.
    pub boot: JudgedBoot,
    /// The resume boot that runs what this one left unrun (`x86_64.resume-1`).
    pub resumed_in: Option<String>,
}

impl BootRun {
    /// Judges a finished boot from its logs with the plan's marks, writes its record
    /// (`verdict.json`) beside them and times it (the `judge` phase).
    pub fn judge(outcome: Outcome, plan: &protocol::Plan, marks: Marks) -> Result<BootRun> {
        let started = std::time::Instant::now();
        let ms = |d: Duration| d.as_millis() as u64;
        let facts = BootFacts {
            arch: outcome.arch.name.to_string(),
            accel: outcome.accel.name().to_string(),
            qemu_command: outcome.vm.command_line.clone(),
            ended: outcome.vm.ended.clone(),
            wall_ms: ms(outcome.vm.wall),
            boot_ms: outcome.vm.boot.map(ms),
            // The boot ended just now, `wall` after QEMU started.
            started_at: jiff::Timestamp::now()
                .checked_sub(jiff::SignedDuration::from_millis(ms(outcome.vm.wall) as i64))
                .ok()
                .map(|t| t.round(jiff::Unit::Second).unwrap_or(t).to_string()),
            artifacts_shared: outcome.artifacts_shared,
            virtiofsd_sandbox: outcome.vm.sandbox,
            vm: Some(VmRecord::of(&outcome.spec)),
            xfail: marks.xfail,
            fixed_by: marks.fixed_by,
            intermittent: marks.intermittent,
            expect_report: marks.expect_report,
            about: marks.about,
            collateral: None,
        };
        let planned: Vec<String> = plan.scenarios.iter().map(|s| s.name.clone()).collect();
        let boot = JudgedBoot::judge(BootFolder::at(outcome.out_dir.clone()), facts, &planned)?;
        boot.write_record()?;
        crate::support::timings::record(Some(&boot.folder.name), "judge", started.elapsed());
        Ok(BootRun { outcome, boot, resumed_in: None })
    }

    /// The boot's result, every planned scenario accounted for.
    pub fn result(&self) -> &BootResult {
        &self.boot.judgement.result
    }

    /// The result with the plan's expected failures counted (the verdict that sets the exit code).
    pub fn counted(&self) -> &WithXfail {
        &self.boot.judgement.counted
    }
}

/// The boot's folder name in the run (`x86_64`, `x86_64.isolated-1`), as phases are keyed.
fn boot_name(out_dir: &Path) -> String {
    out_dir.file_name().map_or(String::new(), |n| n.to_string_lossy().into_owned())
}

pub fn print_boot(j: &BootRun) {
    use crate::judging::verdict::{Expected, Status};
    let arch = j.outcome.arch.name;
    let (result, counted, facts) = (j.result(), j.counted(), &j.boot.facts);
    for (s, mark) in result.scenarios.iter().zip(&counted.marks) {
        if s.status == Status::NotRun && (j.resumed_in.is_some() || facts.collateral.is_some()) {
            continue;
        }
        // Passes and skips were shown live; the summary names what needs a look.
        if mark.is_none() && matches!(s.status, Status::Pass | Status::Skip) {
            continue;
        }
        let tag = match (mark, s.status) {
            (Some(Expected::Xfail), _) => "XFAIL",
            (Some(Expected::Xpass), _) => "XPASS",
            (Some(Expected::Fixed), _) => "FIXED",
            (None, Status::Pass) => "PASSED",
            (None, Status::Fail) => "FAILED",
            (None, Status::Skip) => "SKIPPED",
            (None, Status::Timeout) => "TIMEOUT",
            (None, Status::NotRun) => "NOT RUN",
            (None, Status::Crashed) => "CRASHED",
        };
        let ms = s.time_ms.map_or(String::new(), |t| format!(" ({t} ms)"));
        let why = match (mark, facts.xfail.get(&s.name), facts.expect_report.get(&s.name)) {
            (Some(Expected::Xfail), Some(r), _) => format!(": {r}"),
            (Some(Expected::Xpass), Some(r), _) => format!(": marked xfail ({r}) but passed; remove the mark"),
            (Some(Expected::Fixed), Some(r), _) => {
                format!(": the kernel carries the fix of the known bug ({r}): {}", facts.fixed_by[&s.name])
            }
            (None, _, Some(text)) if s.status == Status::Pass => format!(": the expected kernel report ({text}) came"),
            _ => String::new(),
        };
        line(format!("{} {arch}/{}{ms}{why}", crate::support::progress::tag(tag), s.name));
        if s.status != Status::Pass && s.status != Status::Skip {
            for d in s.diagnostics.iter().rev().take(8).collect::<Vec<_>>().into_iter().rev() {
                eprintln!("           | {d}");
            }
            for f in &s.findings {
                eprintln!("           | kernel: {}", f.describe());
            }
        }
    }
    for f in &result.findings {
        line(format!("{arch}: kernel report outside the scenarios: {}", f.describe()));
    }
    for p in &result.problems {
        line(format!("{arch}: problem: {p}"));
    }
    if let Some(c) = &facts.collateral {
        let unrun = result.scenarios.iter().filter(|s| s.status == Status::NotRun).count();
        line(format!("{arch}: {unrun} scenario(s) not run, collateral of {} {}", c.culprit, c.why));
    }
    if let Some(next) = &j.resumed_in {
        let unrun = result.scenarios.iter().filter(|s| s.status == Status::NotRun).count();
        line(format!("{arch}: {unrun} scenario(s) not run in this boot ran in {next}"));
    }
    let boot = j.outcome.vm.boot.map_or("never".to_string(), |b| format!("{:.2} s", b.as_secs_f64()));
    let count = |e: Expected| counted.marks.iter().filter(|m| **m == Some(e)).count();
    let expected = match (count(Expected::Xfail), count(Expected::Xpass), count(Expected::Fixed)) {
        (0, 0, 0) => String::new(),
        (f, p, 0) => format!(", {f} xfail, {p} xpass"),
        (f, p, x) => format!(", {f} xfail, {p} xpass, {x} fixed"),
    };
    // `x86_64`, or `x86_64.isolated-1` for a scenario's own boot.
    let boot_name = j.outcome.out_dir.file_name().map_or(arch.into(), |n| n.to_string_lossy().into_owned());
    line(format!(
        "{boot_name}: verdict {} ({} scenario(s){expected}, /init reached at {boot}, VM {:.2} s, {})",
        counted.verdict.as_str(),
        result.scenarios.len(),
        j.outcome.vm.wall.as_secs_f64(),
        j.outcome.accel.name()
    ));
}

/// The process exit code for a set of boots (see `exit.rs`).
pub fn exit_code(judged: &[BootRun]) -> u8 {
    // A timeout, then an interrupt, wins: the run did not finish, whatever it found so far.
    if children::timed_out() {
        return Kind::TimedOut.code();
    }
    if children::interrupted() {
        return Kind::Interrupted.code();
    }
    // The run model's mapping, so a run and `report --from` of it exit alike.
    judged.iter().map(|j| RunVerdict::of(&j.counted().verdict).exit_code()).max().unwrap_or(0)
}

/// The exit status of `exec`'s program, from the agent's line for its step (the protocol's
/// `ExecEnd`), with the program's output printed.
fn exec_status(j: &BootRun) -> Result<u8> {
    use crate::judging::verdict::Status;
    let Some(s) = j.result().scenarios.first() else {
        return Err(error(Kind::Infra, "the exec scenario has no result"));
    };
    let mut code = None;
    for d in &s.diagnostics {
        match protocol::step_text(d, 1).and_then(protocol::ExecEnd::parse) {
            Some(end) => code = Some(end.status.shell_code()),
            None if code.is_none() => println!("{d}"),
            None => {}
        }
    }
    match (s.status, code) {
        (Status::Timeout, _) => Ok(124),
        (Status::Crashed | Status::NotRun, _) => Err(error(
            Kind::Infra,
            format!("the guest did not finish the program: verdict {}", j.result().verdict.as_str()),
        )),
        (_, Some(c)) => Ok(c),
        (_, None) => Err(error(Kind::Infra, "the agent did not report the program's exit status")),
    }
}

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
    fn plans_split_evenly_and_boot_folders_name_their_place() {
        let mut plan = protocol::Plan::empty("x86_64");
        for i in 0..5 {
            plan.scenarios.push(protocol::Scenario { name: format!("s/{i}"), deadline_ms: 1, steps: vec![] });
        }
        let sizes = |parts| split_plan(plan.clone(), parts).iter().map(|p| p.scenarios.len()).collect::<Vec<_>>();
        assert_eq!(sizes(1), [5]);
        assert_eq!(sizes(2), [3, 2]);
        assert_eq!(sizes(3), [2, 2, 1]);
        assert_eq!(sizes(9), [1, 1, 1, 1, 1]);
        let parts = split_plan(plan.clone(), 2);
        assert_eq!(parts[1].scenarios[0].name, "s/3", "in plan order");
        assert_eq!(sizes(0), [5]);
        assert_eq!(split_plan(protocol::Plan::empty("x"), 3).len(), 1);
        assert_eq!((shared_dir("arm64", 1), shared_dir("arm64", 2)), ("arm64".into(), "arm64.vm-2".into()));
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

    #[test]
    fn elf_checks_find_machine_and_interpreter() {
        let own = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        let f = crate::vm::initramfs::elf_facts(&own).unwrap();
        let host = crate::arch::ARCHES.iter().find(|a| a.uname_machine == std::env::consts::ARCH).unwrap();
        assert_eq!((f.machine, f.big_endian, f.bits64), (host.elf_machine, host.big_endian, true));
        assert!(f.interp, "the test binary is dynamically linked");
        assert_eq!(crate::vm::initramfs::elf_facts(b"#!/bin/sh\n"), None);
    }
}
