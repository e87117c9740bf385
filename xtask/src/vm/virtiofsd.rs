//! virtiofsd, the host side of the guest's virtio-fs folders, run sandboxed: the kernel under
//! test is untrusted code (CI boots patches from mailing lists), so the daemon serving it sees
//! only the folder made for the boot. Namespace mode (a mount namespace whose root is the
//! shared folder, empty network and PID namespaces) where the host allows it, chroot mode
//! otherwise; the mode used is recorded in the boot's record and shown in the reports.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::Result;
use serde::{Deserialize, Serialize};

use crate::support::exit::{error, Kind};
use crate::vm::children::Group;

/// A folder shared into the guest over virtio-fs.
#[derive(Debug, Clone)]
pub struct Share {
    pub tag: String,
    pub host_dir: PathBuf,
}

/// How virtiofsd isolates itself from the host (its `--sandbox`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Sandbox {
    /// New mount, PID and network namespaces, the shared folder pivoted to `/`: symlinks and
    /// `..` resolve inside the folder, and the daemon sees no other process or network.
    Namespace,
    /// `chroot` into the shared folder (root only): symlinks and `..` resolve inside it.
    Chroot,
    /// No isolation: a symlink planted by the guest can reach the host's files. Only when
    /// asked for by name.
    None,
}

impl Sandbox {
    pub fn name(self) -> &'static str {
        match self {
            Sandbox::Namespace => "namespace",
            Sandbox::Chroot => "chroot",
            Sandbox::None => "none",
        }
    }
}

/// `--virtiofsd-sandbox`: a mode by name, or the strongest the host allows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum SandboxChoice {
    /// namespace where the host allows it, else chroot; never none.
    #[default]
    Auto,
    Namespace,
    Chroot,
    /// Unsandboxed, as virtiofsd's own documentation warns against for untrusted guests.
    None,
}

impl SandboxChoice {
    /// The modes to try, strongest first.
    fn candidates(self) -> Vec<Sandbox> {
        match self {
            // The mode that worked last first, then the others, strongest first.
            SandboxChoice::Auto => {
                let mut modes = vec![Sandbox::Namespace, Sandbox::Chroot];
                if let Some(known) = *CHOSEN.lock().unwrap_or_else(|e| e.into_inner()) {
                    modes.sort_by_key(|m| *m != known);
                }
                modes
            }
            SandboxChoice::Namespace => vec![Sandbox::Namespace],
            SandboxChoice::Chroot => vec![Sandbox::Chroot],
            SandboxChoice::None => vec![Sandbox::None],
        }
    }
}

/// What `Auto` settled on in this process, tried first by later boots.
static CHOSEN: Mutex<Option<Sandbox>> = Mutex::new(None);

/// The virtiofsd binary: on PATH, or where `cargo install` puts it.
pub fn binary() -> Option<PathBuf> {
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

/// The daemons of one VM, one per share; dropping them kills them.
pub struct Daemons {
    _groups: Vec<Group>,
    /// Each share's socket, in the order of the shares.
    pub sockets: Vec<PathBuf>,
    /// The sandbox they run in; `None` when the VM shares nothing.
    pub sandbox: Option<Sandbox>,
}

/// One virtiofsd per shared folder, each listening on its socket in `workdir`, its stderr in
/// `logs/virtiofsd-<tag>.log`. With `Auto`, a mode the host refuses (the daemon exits before
/// it listens) is followed by the next one, and the refusal is kept in that log.
pub fn start(
    shares: &[Share],
    workdir: &Path,
    logs: &Path,
    binary: Option<&Path>,
    choice: SandboxChoice,
) -> Result<Daemons> {
    let mut daemons = Daemons { _groups: Vec::new(), sockets: Vec::new(), sandbox: None };
    for (i, share) in shares.iter().enumerate() {
        let binary = binary.ok_or_else(|| {
            error(
                Kind::Infra,
                "virtiofsd is needed to share folders: run `cargo xtask setup` (cargo install virtiofsd)",
            )
        })?;
        let socket = workdir.join(format!("fs{i}.sock"));
        let log = logs.join(format!("virtiofsd-{}.log", share.tag));
        let mut refused = Vec::new();
        let mut started = None;
        for mode in choice.candidates() {
            match start_one(binary, share, &socket, &log, mode)? {
                Ok(group) => {
                    started = Some((group, mode));
                    break;
                }
                Err(why) => refused.push(format!("--sandbox={}: {why}", mode.name())),
            }
        }
        let Some((group, mode)) = started else {
            return Err(error(
                Kind::Infra,
                format!(
                    "virtiofsd could not serve {} in any sandbox this host allows ({}); \
                     `--virtiofsd-sandbox none` runs it unsandboxed, which lets the guest reach host files",
                    share.host_dir.display(),
                    refused.join("; ")
                ),
            ));
        };
        if choice == SandboxChoice::Auto {
            *CHOSEN.lock().unwrap_or_else(|e| e.into_inner()) = Some(mode);
        }
        daemons._groups.push(group);
        daemons.sockets.push(socket);
        daemons.sandbox = Some(mode);
    }
    Ok(daemons)
}

/// Starts virtiofsd for one folder in `mode` and waits until its socket listens. The inner
/// `Err` is the daemon refusing the mode (it exited first, with its last stderr line); the
/// outer one, a failure to run it at all.
fn start_one(
    binary: &Path,
    share: &Share,
    socket: &Path,
    log: &Path,
    mode: Sandbox,
) -> Result<std::result::Result<Group, String>> {
    let _ = std::fs::remove_file(socket);
    let mut cmd = Command::new(binary);
    cmd.arg(format!("--socket-path={}", socket.display()))
        .arg(format!("--shared-dir={}", share.host_dir.display()))
        .arg(format!("--sandbox={}", mode.name()))
        .args(["--cache=never", "--log-level=error"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::OpenOptions::new().create(true).append(true).open(log)?);
    let mut group = Group::spawn(cmd, "virtiofsd")?;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if unix_socket_listening(socket) {
            return Ok(Ok(group));
        }
        if let Ok(Some(status)) = group.child.try_wait() {
            let said = std::fs::read_to_string(log).unwrap_or_default();
            let last = said.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("no message");
            return Ok(Err(format!("exited before listening ({status}): {}", last.trim())));
        }
        if Instant::now() > deadline {
            return Err(error(Kind::Infra, format!("virtiofsd did not listen on {} within 10 s", socket.display())));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listening_sockets_are_read_from_proc_net_unix() {
        let table = "Num       RefCount Protocol Flags    Type St Inode Path\n\
                     0000000000000000: 00000002 00000000 00010000 0001 01 1234 /tmp/vm/fs0.sock\n\
                     0000000000000000: 00000003 00000000 00000000 0001 03 1235 /tmp/vm/fs1.sock\n";
        assert!(listening_in(table, "/tmp/vm/fs0.sock"));
        assert!(!listening_in(table, "/tmp/vm/fs1.sock"), "connected, not listening");
        assert!(!listening_in(table, "/tmp/vm/other.sock"));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sock");
        let _listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        assert!(unix_socket_listening(&path));
    }

    #[test]
    fn auto_never_falls_back_to_none() {
        assert!(!SandboxChoice::Auto.candidates().contains(&Sandbox::None));
        assert_eq!(SandboxChoice::None.candidates(), vec![Sandbox::None]);
    }
}
