//! The run's child processes (QEMU, virtiofsd) and how they end: each in its own process
//! group, killed on drop, on SIGINT/SIGTERM/SIGHUP and when `--timeout` expires, with the
//! run writing what it has before it exits.

use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

/// Process groups of live children, killed by the Ctrl-C handler.
static GROUPS: Mutex<Vec<i32>> = Mutex::new(Vec::new());
/// Working folders of running VMs (sockets, initramfs, logs), removed by the Ctrl-C handler:
/// the handler exits the process, so their owners' drops never run.
pub(crate) static WORKDIRS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

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
pub(crate) fn stop_reason() -> String {
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
}
