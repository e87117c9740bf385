//! The virtiofsd sandbox check: a guest plants symlinks and `..` paths in its shared folder
//! that point at a host file outside it and tries to read and overwrite that file through them;
//! meanwhile the host resolves the same paths as the serving daemon would, from the daemon's
//! own root (`/proc/PID/root`, `RESOLVE_IN_ROOT`). In the namespace and chroot sandboxes
//! neither reaches the file; unsandboxed (`none`, the negative control) the daemon's view does,
//! which shows the check can fail.

use std::collections::BTreeMap;
use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use protocol::steps::{Exec, Sleep};
use protocol::Step;

use xtask::cli::{KernelArgs, VmArgs};
use xtask::support::cmd::{cmd, sh, stdout};
use xtask::vm::virtiofsd::{Sandbox, SandboxChoice};

use crate::as_user;

const SECRET: &str = "host-only secret 5f1c";
const CANARY: &str = "canary.txt";
/// What the guest plants in its share (see `test_data/escape.c`), as the daemon would be asked
/// to resolve them: each must stay inside the share.
const PLANTED: [&str; 6] = ["abs", "rel", "deep", "up/canary.txt", "d/up3/canary.txt", "root/HOST"];

/// One boot per mode on `arch`: auto (namespace here, recorded as such), chroot, and none.
pub fn symlink_escapes(scratch: &Path, base: &KernelArgs, vm: &VmArgs, cache_dir: Option<&Path>) -> Result<()> {
    let arch = "x86_64";
    let a = xtask::arch::select(arch)?[0];
    let bin = scratch.join("escape");
    let src = xtask::support::checkout::project_root().join("xtask/test_data/escape.c");
    let (sh, cc) = (sh()?, a.compiler());
    stdout(cmd!(sh, "{cc} -static -O2 -o {bin} {src}")).with_context(|| format!("{cc} building {}", src.display()))?;
    let extra = vec![("/bin/escape".to_string(), std::fs::read(&bin)?)];
    let built = crate::kernels(&KernelArgs { arch: arch.into(), ..base.clone() })?;

    let mut seen = BTreeMap::new();
    for choice in [SandboxChoice::Auto, SandboxChoice::Chroot, SandboxChoice::None] {
        let root = scratch.join(format!("sandbox-{choice:?}").to_lowercase());
        std::fs::create_dir_all(&root)?;
        let canary = root.join(CANARY).canonicalize().unwrap_or(root.join(CANARY));
        std::fs::write(&canary, SECRET)?;
        let canary = canary.canonicalize()?;
        let mut plan = protocol::Plan::empty("sandbox");
        plan.scenarios = vec![as_user::scenario(
            "sandbox/plant-symlinks",
            60_000,
            vec![
                Step::Exec(Exec {
                    argv: vec![
                        "/bin/escape".into(),
                        protocol::ARTIFACTS_DIR.into(),
                        canary.display().to_string(),
                        format!("../../../{CANARY}"),
                        SECRET.into(),
                    ],
                    expect_exit: 0,
                }),
                // The host looks at the daemon while it still serves.
                Step::Sleep(Sleep { ms: 6_000 }),
            ],
        )];
        let vm = VmArgs { results: Some(root.clone()), virtiofsd_sandbox: choice, ..vm.clone() };
        let opts = xtask::run::boot::Options::of(&vm, cache_dir)?;
        let watcher = std::thread::spawn({
            let (root, canary) = (root.clone(), canary.clone());
            move || daemon_view(&root, &canary)
        });
        let judged = xtask::run::boot::run_plan_on(&built, &plan, &extra, &opts)?;
        let view = watcher.join().map_err(|_| anyhow::anyhow!("the daemon watcher panicked"))??;
        let j = &judged[0];
        let recorded = j.boot.facts.virtiofsd_sandbox;
        let what = format!("--virtiofsd-sandbox {choice:?}").to_lowercase();
        anyhow::ensure!(
            j.result().verdict.as_str() == "pass",
            "{what}: the guest's boot is {:?}: {:?}",
            j.result().verdict,
            j.result().scenarios
        );
        let now = std::fs::read_to_string(&canary)?;
        anyhow::ensure!(now == SECRET, "{what}: the host file outside the share now holds {now:?}");
        let stray: Vec<_> = std::fs::read_dir(&root)?
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n != CANARY && n != "latest" && !j.outcome.out_dir.starts_with(root.join(n)))
            .collect();
        anyhow::ensure!(stray.is_empty(), "{what}: files appeared beside the run folder: {stray:?}");
        let artifacts = j.outcome.out_dir.join("artifacts");
        let planted = std::fs::read_link(artifacts.join("abs"))
            .with_context(|| format!("{what}: the guest's symlink `abs` is not in {}", artifacts.display()))?;
        anyhow::ensure!(planted == canary, "{what}: `abs` points at {}", planted.display());
        match choice {
            SandboxChoice::Auto | SandboxChoice::Chroot => {
                let want = if choice == SandboxChoice::Chroot {
                    vec![Sandbox::Chroot]
                } else {
                    vec![Sandbox::Namespace, Sandbox::Chroot]
                };
                anyhow::ensure!(
                    recorded.is_some_and(|r| want.contains(&r)),
                    "{what}: the boot records virtiofsd's sandbox as {recorded:?}"
                );
                anyhow::ensure!(
                    view.reached.is_empty(),
                    "{what}: the daemon can reach the host file through {:?}",
                    view.reached
                );
            }
            _ => {
                anyhow::ensure!(recorded == Some(Sandbox::None), "{what}: recorded as {recorded:?}");
                // The negative control: unsandboxed, the daemon's own view follows the guest's
                // absolute symlink to the host file.
                anyhow::ensure!(
                    view.reached.iter().any(|p| p == "abs"),
                    "{what}: the unsandboxed daemon should reach the host file through `abs`, reached only {:?}",
                    view.reached
                );
            }
        }
        seen.insert(what, (recorded, view.reached));
    }
    xtask::support::progress::line(format!("virtiofsd sandboxes: {seen:?}"));
    Ok(())
}

/// What the serving daemon's root lets it reach.
struct View {
    /// The planted paths that resolve, inside the daemon's root, to the host file.
    reached: Vec<String>,
}

/// Waits for the guest's symlinks in a share under `root`, then resolves each planted path
/// inside the root of the daemon serving that share.
fn daemon_view(root: &Path, canary: &Path) -> Result<View> {
    let deadline = Instant::now() + Duration::from_secs(240);
    loop {
        let daemons = serving(root);
        if let Some((pid, share)) = daemons.first() {
            if share.join("d/up3").symlink_metadata().is_ok() {
                let host = canary.display().to_string();
                let mut reached = Vec::new();
                // Where the share is in the daemon's view: `/` when sandboxed, its host path
                // when not; both are tried, so the check does not assume the answer.
                for p in PLANTED {
                    let p = p.replace("HOST", host.trim_start_matches('/'));
                    for at in [PathBuf::from("/"), share.clone()] {
                        if read_in_root(*pid, &at.join(&p)).is_some_and(|s| s == SECRET) {
                            reached.push(p.split('/').next().unwrap_or_default().to_string());
                        }
                    }
                }
                return Ok(View { reached });
            }
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "no virtiofsd serving a folder under {} saw the guest's symlinks",
            root.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The virtiofsd processes that serve a folder under `root` and have no virtiofsd child (in
/// namespace mode the parent only waits for the sandboxed child): (pid, shared folder).
fn serving(root: &Path) -> Vec<(i32, PathBuf)> {
    let mut found: Vec<(i32, i32, PathBuf)> = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else { continue };
        let Ok(cmdline) = std::fs::read(e.path().join("cmdline")) else { continue };
        let args: Vec<String> = cmdline.split(|b| *b == 0).map(|a| String::from_utf8_lossy(a).into_owned()).collect();
        if !args.first().is_some_and(|a| a.ends_with("virtiofsd")) {
            continue;
        }
        let Some(dir) = args.iter().find_map(|a| a.strip_prefix("--shared-dir=")) else { continue };
        if !Path::new(dir).starts_with(root) {
            continue;
        }
        let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
        let ppid =
            stat.rsplit(')').next().and_then(|r| r.split_whitespace().nth(1)).and_then(|p| p.parse().ok()).unwrap_or(0);
        found.push((pid, ppid, PathBuf::from(dir)));
    }
    found
        .iter()
        .filter(|(pid, ..)| !found.iter().any(|(_, ppid, _)| ppid == pid))
        .map(|(pid, _, d)| (*pid, d.clone()))
        .collect()
}

/// Reads `path` as process `pid` would see it: resolved inside its root directory, with
/// absolute symlinks and `..` kept in that root (`openat2` with `RESOLVE_IN_ROOT`). `None`
/// when it does not resolve to a readable file.
fn read_in_root(pid: i32, path: &Path) -> Option<String> {
    use std::io::Read;
    use std::os::fd::FromRawFd;
    let root = std::fs::File::open(format!("/proc/{pid}/root")).ok()?;
    let c = CString::new(path.as_os_str().as_encoded_bytes()).ok()?;
    // SAFETY: `open_how` is plain integers; all-zero is its empty value.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = libc::O_RDONLY as u64 | libc::O_CLOEXEC as u64;
    how.resolve = libc::RESOLVE_IN_ROOT;
    use std::os::fd::AsRawFd;
    // SAFETY: a valid dirfd, a NUL-terminated path and an `open_how` of the size passed.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            root.as_raw_fd(),
            c.as_ptr(),
            &how as *const libc::open_how,
            std::mem::size_of::<libc::open_how>(),
        )
    };
    if fd < 0 {
        return None;
    }
    // SAFETY: the syscall returned a new file descriptor we own.
    let mut f = unsafe { std::fs::File::from_raw_fd(fd as i32) };
    let mut s = String::new();
    f.read_to_string(&mut s).ok()?;
    Some(s)
}

/// `auto` falls back to chroot when the host refuses namespaces, and says what each mode
/// answered when neither works: virtiofsd behind a wrapper that refuses the modes named in
/// `refuse`, as a host without namespaces (or without root) would. No boot: the daemons of a
/// boot are started exactly so.
pub fn fallback(scratch: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    use xtask::vm::virtiofsd::Share;
    let real = xtask::vm::virtiofsd::binary().context("virtiofsd is not installed")?;
    let share = Share { tag: "ue-artifacts".into(), host_dir: scratch.join("fallback-share") };
    std::fs::create_dir_all(&share.host_dir)?;
    let wrapper = |refuse: &str| -> Result<PathBuf> {
        let path = scratch.join(format!("virtiofsd-refusing-{}", refuse.replace('|', "-")));
        let pattern = refuse.split('|').map(|m| format!("--sandbox={m}")).collect::<Vec<_>>().join("|");
        let script = format!(
            "#!/bin/sh\nfor a; do case \"$a\" in {pattern}) echo \"Error entering sandbox: $a refused by the test host\" >&2; exit 1;; esac; done\nexec {} \"$@\"\n",
            real.display()
        );
        std::fs::write(&path, script)?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
        Ok(path)
    };
    let started = xtask::vm::virtiofsd::start(
        std::slice::from_ref(&share),
        scratch,
        scratch,
        Some(&wrapper("namespace")?),
        SandboxChoice::Auto,
    )?;
    anyhow::ensure!(started.sandbox == Some(Sandbox::Chroot), "auto without namespaces chose {:?}", started.sandbox);
    drop(started);
    let log = std::fs::read_to_string(scratch.join("virtiofsd-ue-artifacts.log"))?;
    anyhow::ensure!(
        log.trim() == "Error entering sandbox: --sandbox=namespace refused by the test host",
        "the boot's virtiofsd log should keep the refusal, and nothing from the chroot daemon: {log:?}"
    );
    let err = xtask::vm::virtiofsd::start(
        std::slice::from_ref(&share),
        scratch,
        scratch,
        Some(&wrapper("namespace|chroot")?),
        SandboxChoice::Auto,
    )
    .err()
    .context("auto started a daemon although every sandbox was refused")?;
    let text = format!("{err:#}");
    for want in [
        "--sandbox=namespace: exited before listening",
        "--sandbox=chroot: exited before listening",
        "refused by the test host",
        "--virtiofsd-sandbox none",
    ] {
        anyhow::ensure!(text.contains(want), "the error lacks {want:?}: {text}");
    }
    anyhow::ensure!(
        xtask::support::exit::code_for(&err) == xtask::support::exit::Kind::Infra.code(),
        "exit code {}",
        xtask::support::exit::code_for(&err)
    );
    Ok(())
}
