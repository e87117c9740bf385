//! Evidence when the kernel under test hangs: which processes are stuck in the kernel and
//! where (`/proc/<pid>/stack`, `wchan`), the blocked-task dump (sysrq `w`), and the guard
//! thread that ends the plan when the supervisor itself stops making progress.

use std::fs;
use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use protocol::ResultLine;

use crate::runtime::sys;

/// How long a killed scenario gets to die before it counts as stuck in the kernel.
pub const KILL_GRACE: Duration = Duration::from_secs(2);
/// How many stack frames of each stuck task are reported.
const FRAMES: usize = 16;

/// Live members (not zombies) of process group `pgid`, from `/proc/*/stat`.
pub fn group_members(proc: &Path, pgid: u32) -> Vec<u32> {
    let Ok(dir) = fs::read_dir(proc) else { return vec![] };
    let mut pids: Vec<u32> = dir
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let stat = fs::read_to_string(proc.join(pid.to_string()).join("stat")).unwrap_or_default();
            stat_fields(&stat).is_some_and(|(state, group)| state != "Z" && group == pgid)
        })
        .collect();
    pids.sort_unstable();
    pids
}

/// (state, process group) from a `/proc/<pid>/stat` line; the command name may hold spaces.
fn stat_fields(stat: &str) -> Option<(&str, u32)> {
    let (_, rest) = stat.rsplit_once(')')?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    Some((f.first()?, f.get(2)?.parse().ok()?))
}

/// Where each task of process `pid` is: `pid 80 (ue-agent) task 80: state D (disk sleep),
/// wchan user_events_ioctl`, then its kernel stack frames, indented.
pub fn describe(proc: &Path, pid: u32) -> Vec<String> {
    let dir = proc.join(pid.to_string());
    let comm = fs::read_to_string(dir.join("comm")).unwrap_or_default().trim().to_string();
    let mut tids: Vec<u32> = fs::read_dir(dir.join("task"))
        .map(|d| d.flatten().filter_map(|e| e.file_name().to_str()?.parse().ok()).collect())
        .unwrap_or_default();
    tids.sort_unstable();
    if tids.is_empty() {
        tids.push(pid);
    }
    let mut out = Vec::new();
    for tid in tids {
        let task = dir.join("task").join(tid.to_string());
        let status = fs::read_to_string(task.join("status")).unwrap_or_default();
        let state = status.lines().find_map(|l| l.strip_prefix("State:")).unwrap_or("?").trim().to_string();
        let wchan = fs::read_to_string(task.join("wchan")).unwrap_or_default();
        let wchan = if wchan.is_empty() || wchan == "0" { "-".to_string() } else { wchan };
        out.push(format!("pid {pid} ({comm}) task {tid}: state {state}, wchan {wchan}"));
        match fs::read_to_string(task.join("stack")) {
            Ok(stack) => out.extend(stack.lines().take(FRAMES).map(|f| format!("  {}", f.trim()))),
            Err(e) => out.push(format!("  (no kernel stack: {})", sys::error_name(&e))),
        }
    }
    out
}

/// Asks the kernel to dump every task in D state on the console (sysrq `w`); the host's
/// console scan keeps it as the scenario's `blocked-tasks` finding.
pub fn show_blocked_tasks() -> Result<(), String> {
    fs::OpenOptions::new()
        .write(true)
        .open("/proc/sysrq-trigger")
        .and_then(|mut f| f.write_all(b"w"))
        .map_err(|e| format!("sysrq w: {}", sys::error_name(&e)))
}

/// What the guard watches: until when the supervisor may take for the current step, what that
/// step is, and the last scenario whose result was reported.
#[derive(Debug, Default)]
struct Armed {
    until: Option<Instant>,
    what: String,
    done: usize,
}

/// A thread that ends the plan when the supervisor does not come back in time (blocked in the
/// kernel itself, e.g. reading a tracefs file whose lock a dead worker holds): it writes the
/// evidence and `ue-abort` on its own handle of the result channel, then reboots.
#[derive(Clone)]
pub struct Guard {
    armed: Arc<Mutex<Armed>>,
}

impl Guard {
    /// Starts the guard thread; `out` is its own handle of the result channel.
    pub fn start(mut out: fs::File) -> Guard {
        let armed = Arc::new(Mutex::new(Armed::default()));
        let watched = Arc::clone(&armed);
        thread::spawn(move || loop {
            thread::sleep(Duration::from_millis(100));
            let fired = {
                let a = watched.lock().unwrap_or_else(|e| e.into_inner());
                a.until.filter(|u| Instant::now() > *u).map(|_| (a.what.clone(), a.done))
            };
            let Some((what, done)) = fired else { continue };
            let mut lines = vec![format!("the agent's supervisor is blocked ({what}); its threads:")];
            lines.extend(describe(Path::new("/proc"), 1).into_iter().filter(|l| !l.contains("state R")));
            if let Err(e) = show_blocked_tasks() {
                lines.push(e);
            }
            for l in lines {
                let _ = out.write_all(format!("{}\n", ResultLine::Diag(l).format()).as_bytes());
            }
            let abort = ResultLine::Abort { after: done, reason: format!("the supervisor was blocked ({what})") };
            let _ = out.write_all(format!("{}\n", abort.format()).as_bytes());
            let _ = out.flush();
            sys::console(&format!("ue-agent: supervisor blocked ({what}); rebooting"));
            // Give the console a moment for the blocked-task dump, then end the VM.
            thread::sleep(Duration::from_millis(500));
            sys::reboot();
        });
        Guard { armed }
    }

    /// The supervisor starts a step that must end within `budget`.
    pub fn arm(&self, budget: Duration, what: String, done: usize) {
        let mut a = self.armed.lock().unwrap_or_else(|e| e.into_inner());
        *a = Armed { until: Some(Instant::now() + budget), what, done };
    }

    pub fn disarm(&self) {
        self.armed.lock().unwrap_or_else(|e| e.into_inner()).until = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_give_state_and_group() {
        assert_eq!(stat_fields("80 (ue agent) D 1 80 80 0 -1"), Some(("D", 80)));
        assert_eq!(stat_fields("81 (a) b) Z 80 80 80 0"), Some(("Z", 80)));
        assert_eq!(stat_fields("garbage"), None);
    }

    #[test]
    fn a_sleeping_group_member_is_found_and_described() {
        let mut child = std::process::Command::new("sleep").arg("5").spawn().unwrap();
        let pid = child.id();
        let pgid = unsafe { libc::getpgid(pid as i32) } as u32;
        assert!(group_members(Path::new("/proc"), pgid).contains(&pid));
        let lines = describe(Path::new("/proc"), pid);
        assert!(lines[0].starts_with(&format!("pid {pid} (sleep) task {pid}: state ")), "{lines:?}");
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(!group_members(Path::new("/proc"), pgid).contains(&pid));
    }
}
