//! The checks of `cargo xtask test` that run this xtask as a user would, as a child process:
//! provisioning without apt (as root and as `nobody`), SIGTERM and Ctrl-C, a missing QEMU,
//! `--filter --list`, a patched kernel's hang to its verdict (validate and bisect on a git tree
//! are `git_tree.rs`'s).

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use protocol::steps::{Sleep, WriteFile};
use protocol::Step;

use xtask::cli::KernelArgs;
use xtask::support::cmd::{cmd, sh};
use xtask::support::progress::line;

/// A scenario of a hand-made plan.
pub fn scenario(name: &str, deadline_ms: u64, steps: Vec<Step>) -> protocol::Scenario {
    protocol::Scenario { name: name.into(), deadline_ms, steps }
}

/// Provisioning checks capabilities, not dpkg: this xtask runs with `apt`, `apt-get`,
/// `apt-cache`, `dpkg` and `dpkg-query` replaced on PATH by stand-ins that log their calls and
/// fail. As root (everything present): `boot --arch x86_64 --kernel-image` boots. As `nobody`
/// (no Rust toolchain it may read, no root): `kernel --kernel-image` works, and `setup --check`
/// and `boot` name what is missing with its packages and exit 129 without installing. No
/// stand-in may ever be called. Both halves need root (the second switches to uid 65534): run
/// by another user, the check fails saying so rather than pass on half of itself.
pub fn never_calls_apt(base: &KernelArgs) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc::getuid() };
    anyhow::ensure!(
        uid == 0,
        "needs root, and this runs as uid {uid}: the check boots as root, then runs the xtask as `nobody` \
         (uid 65534), which only root may switch to; run `cargo xtask test` as root, as the README says"
    );
    let dir = tempfile::Builder::new().prefix("xtask-no-apt-").tempdir()?;
    let d = dir.path();
    let built = crate::kernels(&KernelArgs { arch: "x86_64".into(), ..base.clone() })?;
    let (image, config) = (d.join("bzImage"), d.join("config"));
    std::fs::copy(&built[0].image, &image)?;
    std::fs::copy(&built[0].config, &config)?;
    let calls = d.join("apt-calls.log");
    std::fs::write(&calls, "")?;
    let shims = d.join("shims");
    std::fs::create_dir(&shims)?;
    for tool in ["apt", "apt-get", "apt-cache", "dpkg", "dpkg-query"] {
        let shim = shims.join(tool);
        std::fs::write(&shim, format!("#!/bin/sh\necho \"{tool} $*\" >> {}\nexit 1\n", calls.display()))?;
        std::fs::set_permissions(&shim, std::fs::Permissions::from_mode(0o755))?;
    }
    // `nobody` reads the image and writes the log.
    for p in [d, &shims] {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755))?;
    }
    for p in [&image, &config] {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o644))?;
    }
    std::fs::set_permissions(&calls, std::fs::Permissions::from_mode(0o666))?;
    let path = std::env::join_paths(
        std::iter::once(shims.clone()).chain(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())),
    )?;
    let kernel_image = |verb: &str| -> Vec<std::ffi::OsString> {
        let mut a: Vec<std::ffi::OsString> = vec![verb.into(), "--arch".into(), "x86_64".into()];
        a.extend(["--kernel-image".into(), image.clone().into(), "--kernel-config".into(), config.clone().into()]);
        a
    };
    let no_calls = || -> Result<()> {
        let log = std::fs::read_to_string(&calls)?;
        anyhow::ensure!(log.is_empty(), "apt or dpkg was called:\n{log}");
        Ok(())
    };

    // Root, everything present: a real boot, provisioning included (no --no-setup).
    let results = d.join("results");
    let (sh, xtask, boot) = (sh()?, this_xtask()?, kernel_image("boot"));
    let out = cmd!(sh, "{xtask} {boot...} --results {results}")
        .env("PATH", &path)
        .env_remove("XTASK_NO_SETUP")
        .ignore_status()
        .output()?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    anyhow::ensure!(out.status.success(), "boot as root exited {:?}: {stderr}", out.status.code());
    no_calls()?;

    // `nobody`, with a clean environment: no rustup, no root.
    let home = d.join("home");
    std::fs::create_dir(&home)?;
    // A `std::process::Command`, not xshell: xshell cannot set a child's uid and gid.
    let as_nobody = |args: Vec<std::ffi::OsString>| -> Result<std::process::Output> {
        Ok(Command::new(this_xtask()?)
            .args(args)
            .env_clear()
            .env("PATH", format!("{}:/usr/local/bin:/usr/bin:/bin", shims.display()))
            .env("HOME", &home)
            .uid(65534)
            .gid(65534)
            .stdin(Stdio::null())
            .output()?)
    };
    let out = as_nobody(kernel_image("kernel"))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    anyhow::ensure!(
        out.status.success() && stdout.trim() == format!("x86_64 {}", image.display()),
        "kernel --kernel-image as nobody exited {:?}: {stdout}{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    let out = as_nobody(vec!["setup".into(), "--check".into()])?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    anyhow::ensure!(out.status.code() == Some(129), "setup --check as nobody exited {:?}: {stdout}", out.status.code());
    anyhow::ensure!(
        stdout.contains("  rust target x86_64-unknown-linux-musl (the guest agent for x86_64): rustup target add")
            && stdout.contains("to install them:"),
        "setup --check as nobody does not name what is missing:\n{stdout}"
    );
    let out = as_nobody(kernel_image("boot"))?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    anyhow::ensure!(
        out.status.code() == Some(129) && stderr.contains("nothing was installed") && stderr.contains("rustup"),
        "boot as nobody exited {:?}: {stderr}",
        out.status.code()
    );
    no_calls()
}

/// The one run folder `xtask` made under `results` (skipping `latest`), once it exists.
pub fn run_folder(results: &Path) -> Option<std::path::PathBuf> {
    std::fs::read_dir(results).ok()?.flatten().map(|e| e.path()).find(|p| p.is_dir() && !p.ends_with("latest"))
}

/// Runs `xtask` as a user would, in the background, with its output in `log` (a
/// `std::process::Command`: xshell runs a command to its end and cannot leave it running).
pub fn spawn_xtask(args: &[&str], results: &Path, log: &Path, marker: &str) -> Result<std::process::Child> {
    let (key, value) = marker.split_once('=').unwrap_or_default();
    let log = std::fs::File::create(log)?;
    Ok(Command::new(this_xtask()?)
        .args(args)
        .arg("--results")
        .arg(results)
        .env(key, value)
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()?)
}

pub fn wait_for<T>(what: &str, within: Duration, mut probe: impl FnMut() -> Result<Option<T>>) -> Result<T> {
    let until = Instant::now() + within;
    loop {
        if let Some(v) = probe()? {
            return Ok(v);
        }
        anyhow::ensure!(Instant::now() < until, "{what}: not within {} s", within.as_secs());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// SIGTERM (what a CI runner sends) to a run while its second scenario runs: the run folder
/// keeps the console and the partial result channel, gets a run.json saying `interrupted`, and
/// `report --from` renders it; nothing the run started survives.
pub fn sigterm_keeps_the_evidence(scratch: &Path) -> Result<()> {
    let results = tempfile::tempdir_in(scratch)?;
    let marker = format!("XTASK_TEST_MARKER=sigterm-{}", std::process::id());
    let plan_path = results.path().join("plan.json");
    let mut plan = protocol::Plan::empty("sigterm");
    plan.scenarios = vec![
        scenario("sigterm/quick", 5_000, vec![Step::Sleep(Sleep { ms: 1 })]),
        scenario("sigterm/long", 600_000, vec![Step::Sleep(Sleep { ms: 600_000 })]),
    ];
    std::fs::write(&plan_path, serde_json::to_vec(&plan)?)?;
    let log = scratch.join("sigterm.log");
    let plan_arg = plan_path.display().to_string();
    let args = ["boot", "--arch", "x86_64", "--accel", "tcg", "--plan", &plan_arg];
    let mut child = spawn_xtask(&args, results.path(), &log, &marker)?;
    let ktap = wait_for("the second scenario beginning", Duration::from_secs(180), || {
        let ktap = run_folder(results.path()).map(|r| r.join("x86_64/results.ktap"));
        Ok(ktap.filter(|k| std::fs::read_to_string(k).is_ok_and(|t| t.contains("# ue-begin 2 "))))
    });
    let ktap = match ktap {
        Ok(k) => k,
        Err(e) => {
            let _ = child.kill();
            return Err(e.context(std::fs::read_to_string(&log).unwrap_or_default()));
        }
    };
    // SAFETY: kill has no memory-safety preconditions.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = wait_for("xtask's exit after SIGTERM", Duration::from_secs(40), || Ok(child.try_wait()?))?;
    let output = std::fs::read_to_string(&log).unwrap_or_default();
    anyhow::ensure!(status.code() == Some(130), "xtask exited with {status}, expected 130:\n{output}");
    std::thread::sleep(Duration::from_millis(300));
    let left = marked_processes(&marker);
    anyhow::ensure!(left.is_empty(), "left behind after SIGTERM: {left:?}");
    let run = ktap.parent().and_then(Path::parent).context("run folder")?.to_path_buf();
    let console = std::fs::read_to_string(run.join("x86_64/console.log"))?;
    anyhow::ensure!(console.contains(xtask::vm::qemu::BOOT_MARKER), "console.log lost the boot: {console:?}");
    let stream = xtask::judging::channel::read(&std::fs::read_to_string(&ktap)?);
    anyhow::ensure!(stream.record(1).is_some() && stream.sentinel.is_none(), "not a partial KTAP: {stream:?}");
    for kept in ["qemu-command.txt", "verdict.json"] {
        anyhow::ensure!(run.join("x86_64").join(kept).is_file(), "no {kept} in {}", run.display());
    }
    let model: serde_json::Value = serde_json::from_slice(&std::fs::read(run.join("run.json"))?)?;
    anyhow::ensure!(model["verdict"]["kind"] == "interrupted", "run.json verdict {}", model["verdict"]);
    let (sh, xtask) = (sh()?, this_xtask()?);
    let out = cmd!(sh, "{xtask} report --from {run}").ignore_status().output()?;
    anyhow::ensure!(
        out.status.code() == Some(130) && run.join("report.html").is_file(),
        "report --from exited {:?}: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}

/// A kernel patched to deadlock `DIAG_IOCSDEL` on one name (an incremental build of the cached
/// kernel), and a plan with the deadlock in the middle: the hung scenario's verdict comes within
/// 60 s of the hang, as `timeout` with the stuck process's kernel stack and the blocked-task
/// dump, every scenario after it passes in a resume boot, and the run exits 1.
pub fn hang_to_verdict(scratch: &Path) -> Result<()> {
    let root = xtask::support::checkout::project_root();
    let results = tempfile::tempdir_in(scratch)?;
    let marker = format!("XTASK_TEST_MARKER=hang-{}", std::process::id());
    let patch = root.join("xtask/test_data/patches/deadlock-on-delete.patch").display().to_string();
    let suite = root.join("xtask/test_data/suites/faults/fault.yaml").display().to_string();
    let log = scratch.join("hang.log");
    let args = ["boot", "--arch", "x86_64", "--patch", &patch, "--suite", &suite];
    let mut child = spawn_xtask(&args, results.path(), &log, &marker)?;
    let boot = || run_folder(results.path()).map(|r| r.join("x86_64"));
    // Builds the patched kernel first (incremental), then boots.
    let hang = wait_for("the deadlocking scenario beginning", Duration::from_secs(900), || {
        let begun = boot().is_some_and(|b| {
            std::fs::read_to_string(b.join("results.ktap")).is_ok_and(|t| t.contains("# ue-begin 2 fault/deadlock "))
        });
        if !begun && child.try_wait()?.is_some() {
            anyhow::bail!("xtask ended first:\n{}", std::fs::read_to_string(&log).unwrap_or_default());
        }
        Ok(begun.then(Instant::now))
    })?;
    let verdict = wait_for("the hung boot's verdict", Duration::from_secs(120), || {
        Ok(boot().filter(|b| b.join("verdict.json").is_file()).map(|_| Instant::now()))
    })?;
    let status = wait_for("xtask's exit", Duration::from_secs(120), || Ok(child.try_wait()?))?;
    let output = std::fs::read_to_string(&log).unwrap_or_default();
    let secs = (verdict - hang).as_secs_f64();
    line(format!("hang to verdict: {secs:.1} s (the scenario's deadline is 5 s)"));
    anyhow::ensure!(secs < 60.0, "the verdict came {secs:.1} s after the hang");
    anyhow::ensure!(status.code() == Some(1), "xtask exited with {status}, expected 1:\n{output}");
    let run = boot().and_then(|b| b.parent().map(Path::to_path_buf)).context("run folder")?;
    let model: serde_json::Value = serde_json::from_slice(&std::fs::read(run.join("run.json"))?)?;
    let scenarios = model["arches"][0]["scenarios"].as_array().context("no scenarios in run.json")?;
    let got: Vec<(String, String, String, String)> = scenarios
        .iter()
        .map(|s| {
            let text = |k: &str| s[k].as_str().unwrap_or("-").to_string();
            (text("name"), text("status"), text("judged"), text("boot"))
        })
        .collect();
    let want = [
        ("fault/before-the-hang", "pass", "-", "x86_64"),
        ("fault/deadlock", "fail", "timeout", "x86_64"),
        ("fault/after-the-hang-registers", "pass", "-", "x86_64.resume-1"),
        ("fault/after-the-hang-deletes", "pass", "-", "x86_64.resume-1"),
    ];
    let want: Vec<(String, String, String, String)> =
        want.iter().map(|(a, b, c, d)| (a.to_string(), b.to_string(), c.to_string(), d.to_string())).collect();
    anyhow::ensure!(got == want, "statuses {got:?}");
    let hung = &scenarios[1];
    let log_lines: Vec<&str> = hung["log"].as_array().into_iter().flatten().filter_map(|l| l.as_str()).collect();
    anyhow::ensure!(
        log_lines.iter().any(|l| l.contains("stuck in the kernel"))
            && log_lines.iter().any(|l| l.contains("state D"))
            && log_lines.iter().any(|l| l.contains("user_events_ioctl")),
        "no stuck-process evidence in the hung scenario's log: {log_lines:?}"
    );
    let blocked = hung["findings"].as_array().into_iter().flatten().any(|f| f["kind"] == "blocked-tasks");
    anyhow::ensure!(blocked, "no blocked-task dump attributed to the hung scenario: {}", hung["findings"]);

    // `--rerun-failed RUN` runs exactly the failed one again (and it hangs again).
    let again = tempfile::tempdir_in(scratch)?;
    let run_arg = run.display().to_string();
    let args = ["boot", "--arch", "x86_64", "--patch", &patch, "--suite", &suite, "--rerun-failed", &run_arg];
    let log = scratch.join("rerun.log");
    let mut child = spawn_xtask(&args, again.path(), &log, &marker)?;
    let status = wait_for("the rerun's exit", Duration::from_secs(300), || Ok(child.try_wait()?))?;
    let rerun = run_folder(again.path()).context("the rerun made no run folder")?;
    let model: serde_json::Value = serde_json::from_slice(&std::fs::read(rerun.join("run.json"))?)?;
    let names: Vec<&str> =
        model["arches"][0]["scenarios"].as_array().into_iter().flatten().filter_map(|s| s["name"].as_str()).collect();
    anyhow::ensure!(
        names == ["fault/deadlock"] && status.code() == Some(1),
        "--rerun-failed ran {names:?} and exited {status}"
    );
    Ok(())
}

/// The scenarios of `registration/*` that unregister an enabler successfully, so that the
/// forced clear runs: what the racy patch must regress, and nothing else.
const RACY_REGRESSES: [&str; 2] =
    ["registration/unregister-clears-the-bit-and-stops-updates", "registration/unregister-validation"];

/// `validate --profile debug --patch unlocked-forced-clear.patch --arch ARCH --filter
/// 'registration/*'`: the patch takes event_mutex out of the forced clear of an unregistered
/// bit, which no default run notices (`lockdep_assert_held` is compiled out); under the debug
/// profile lockdep warns in exactly the scenarios that unregister, validate names them as
/// regressed and exits 1, and each one's finding is the warning in user_event_enabler_write.
pub fn racy_patch_under_debug(scratch: &Path, arch: &str) -> Result<()> {
    let root = xtask::support::checkout::project_root();
    let results = tempfile::tempdir_in(scratch)?;
    let patch = root.join("xtask/test_data/patches/unlocked-forced-clear.patch");
    let (sh, xtask, dir) = (sh()?, this_xtask()?, results.path());
    let out = cmd!(
        sh,
        "{xtask} validate --profile debug --patch {patch} --arch {arch} --filter registration/* --results {dir}"
    )
    .ignore_status()
    .output()?;
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    anyhow::ensure!(out.status.code() == Some(1), "validate exited {:?}:\n{text}", out.status.code());
    // `  REGRESSED      registration/unregister-validation: pass -> fail`
    let mut regressed: Vec<&str> = text
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("REGRESSED "))
        .filter_map(|l| l.trim_start().split_once(": ").map(|(name, _)| name))
        .collect();
    regressed.sort_unstable();
    anyhow::ensure!(
        regressed == RACY_REGRESSES,
        "validate named {regressed:?} as regressed, expected {RACY_REGRESSES:?}:\n{text}"
    );
    // The patched side's run: each regressed scenario failed on the lockdep warning.
    let patched = text
        .lines()
        .find_map(|l| l.split_once("validate: comparing ")?.1.split_once(" with ")?.1.strip_suffix(" (patched)"))
        .with_context(|| format!("validate did not name the patched run:\n{text}"))?;
    let run: xtask::results::model::Run = serde_json::from_slice(&std::fs::read(Path::new(patched).join("run.json"))?)?;
    for name in RACY_REGRESSES {
        let s = run.arch(arch).and_then(|a| a.scenario(name)).with_context(|| format!("{name} is not in {patched}"))?;
        let warned = s.findings.iter().any(|f| f.kind == "warning" && f.summary.contains("user_event_enabler_write"));
        anyhow::ensure!(warned, "{name}: no WARNING in user_event_enabler_write among {:?}", s.findings);
    }
    Ok(())
}

/// `run --filter 'process/*' --list` prints exactly the process scenarios of each default arch
/// (`x86_64,arm64`: no other arch without `--arch`) and boots nothing (no run folder appears).
pub fn filter_list(scratch: &Path) -> Result<()> {
    let results = tempfile::tempdir_in(scratch)?;
    let (sh, xtask, dir) = (sh()?, this_xtask()?, results.path());
    let out = cmd!(sh, "{xtask} run --filter process/* --list --results {dir}").ignore_status().output()?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    anyhow::ensure!(out.status.success(), "exit {:?}: {}", out.status.code(), String::from_utf8_lossy(&out.stderr));
    let chosen = xtask::run::pipeline::choose(&xtask::cli::SelectArgs::default(), results.path())?;
    let process: Vec<String> = chosen
        .suites
        .iter()
        .filter(|s| s.suite == "process")
        .flat_map(|s| s.scenarios.iter().map(|sc| format!("process/{}", sc.name)))
        .collect();
    anyhow::ensure!(!process.is_empty(), "no process suite");
    let default = xtask::arch::select(xtask::arch::DEFAULT)?;
    for arch in xtask::arch::ARCHES {
        let listed: Vec<&str> = stdout.lines().filter_map(|l| l.strip_prefix(&format!("{} ", arch.name))).collect();
        if default.contains(&arch) {
            anyhow::ensure!(listed == process, "{} listed {listed:?}, the process suite has {process:?}", arch.name);
        } else {
            anyhow::ensure!(listed.is_empty(), "{} is not a default arch but listed {listed:?}", arch.name);
        }
    }
    anyhow::ensure!(run_folder(results.path()).is_none(), "--list booted (a run folder appeared)");
    Ok(())
}

/// Runs this xtask binary as a user would, with QEMU hidden.
pub fn missing_qemu(results: &Path) -> Result<()> {
    let (sh, xtask) = (sh()?, this_xtask()?);
    let boot = cmd!(sh, "{xtask} boot --arch arm64 --accel tcg --results {results}");
    let out = boot.env("XTASK_QEMU_DIR", "/nonexistent").ignore_status().output()?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    anyhow::ensure!(out.status.code() == Some(129), "exit {:?}, expected 129: {stderr}", out.status.code());
    anyhow::ensure!(
        stderr.contains("`qemu-system-aarch64` not found") && stderr.contains("Debian package qemu-system-arm"),
        "unclear error: {stderr}"
    );
    Ok(())
}

/// Starts a boot that hangs, interrupts it the way a terminal does (SIGINT to its process
/// group) and checks that no process it started survives. Processes are found by an
/// environment marker they inherit.
pub fn ctrl_c_leaves_nothing(results: &Path) -> Result<()> {
    let marker = format!("XTASK_TEST_MARKER=ctrl-c-{}", std::process::id());
    let plan_path = results.join("hang-plan.json");
    let mut plan = protocol::Plan::empty("ctrl-c");
    // It writes into the artifacts folder first, so the boot shares it and runs virtiofsd (a
    // plan that writes nothing there starts none).
    let artifact = Step::WriteFile(WriteFile {
        path: format!("{}/before-the-hang", protocol::ARTIFACTS_DIR),
        data: "x".into(),
        bytes: None,
        create: true,
        append: false,
        expect: Default::default(),
        within_ms: 0,
    });
    plan.scenarios = vec![scenario("ctrl-c/hang", 600_000, vec![artifact, Step::Sleep(Sleep { ms: 600_000 })])];
    std::fs::write(&plan_path, serde_json::to_vec(&plan)?)?;
    let (key, value) = marker.split_once('=').unwrap_or_default();
    // A `std::process::Command`: the boot runs in a process group of its own, to be signalled
    // as a terminal would, which xshell cannot ask for.
    let mut cmd = Command::new(this_xtask()?);
    cmd.args(["boot", "--arch", "x86_64", "--accel", "tcg", "--plan"])
        .arg(&plan_path)
        .arg("--results")
        .arg(results)
        .env(key, value)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0);
    let mut child = cmd.spawn()?;
    let deadline = Instant::now() + Duration::from_secs(120);
    let running = loop {
        let procs = marked_processes(&marker);
        if procs.iter().any(|c| c.contains("qemu-system")) && procs.iter().any(|c| c.contains("virtiofsd")) {
            break procs;
        }
        if Instant::now() > deadline || child.try_wait()?.is_some() {
            let _ = unsafe { libc::killpg(child.id() as i32, libc::SIGKILL) };
            anyhow::bail!("QEMU and virtiofsd never both ran (saw {procs:?})");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    std::thread::sleep(Duration::from_millis(500));
    // SAFETY: killpg has no memory-safety preconditions.
    unsafe { libc::killpg(child.id() as i32, libc::SIGINT) };
    let deadline = Instant::now() + Duration::from_secs(15);
    let status = loop {
        if let Some(st) = child.try_wait()? {
            break st;
        }
        anyhow::ensure!(Instant::now() < deadline, "xtask did not exit within 15 s of SIGINT");
        std::thread::sleep(Duration::from_millis(50));
    };
    std::thread::sleep(Duration::from_millis(300));
    let left = marked_processes(&marker);
    anyhow::ensure!(left.is_empty(), "left behind after Ctrl-C: {left:?} (before: {running:?})");
    anyhow::ensure!(status.code() == Some(130), "xtask exited with {status}, expected 130");
    Ok(())
}

/// This xtask's binary, to run it as a user would (cargo builds it for this test target).
pub fn this_xtask() -> Result<std::path::PathBuf> {
    Ok(std::path::PathBuf::from(env!("CARGO_BIN_EXE_xtask")))
}

/// Command lines of live (not zombie) processes whose environment holds `marker`.
fn marked_processes(marker: &str) -> Vec<String> {
    let Ok(dir) = std::fs::read_dir("/proc") else { return vec![] };
    dir.flatten()
        .filter(|e| e.file_name().to_string_lossy().chars().all(|c| c.is_ascii_digit()))
        .filter_map(|e| {
            let environ = std::fs::read(e.path().join("environ")).ok()?;
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            let zombie = stat.rsplit_once(')').is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'));
            let has = environ.split(|&b| b == 0).any(|v| v == marker.as_bytes());
            (has && !zombie).then(|| {
                let cmd = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
                String::from_utf8_lossy(&cmd).replace('\0', " ")
            })
        })
        .collect()
}
