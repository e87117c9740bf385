//! Between-scenario hygiene: whatever a scenario left in tracefs and the sysctls (enabled
//! events, triggers, instances, dynamic and user events, changed settings, trace records) is
//! undone before the next scenario starts, and a clean baseline is checked, so a failing
//! scenario's footprint is reported against it and never fails an innocent later one.
//!
//! The supervisor takes a [`Baseline`] once before the first scenario and calls
//! [`Baseline::restore`] after each one. On a healthy run the restore is a handful of small
//! reads that all match the baseline; only what differs is acted on, in an order the kernel
//! accepts: instances removed, events disabled, triggers removed (a trigger soft-enables its
//! event and holds a reference to it), dynamic events removed newest first (an eprobe or a
//! synthetic event before what it refers to), settings put back, user events deleted (last:
//! that may wait for the kernel). Filters go with the user events they were set on: scenarios
//! set them on no other event. Trace records are drained, not reported: a scenario that
//! traces legitimately leaves some.

use std::collections::BTreeSet;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::thread;
use std::time::{Duration, Instant};

use crate::runtime::sys;
use crate::steps::outcome;
use crate::steps::uevents::DIAG_IOCSDEL;

mod lines;

pub use lines::{
    dynamic_removal, parse_status, stats_entries, trigger_removal, DynamicRemoval, Status, TriggerRemoval,
};
use lines::{event_label, trigger_text};

/// How long user events may stay busy after their scenario ended. An exited process's
/// references go after an RCU grace period and a work item (the 7.3 selftests wait too); a
/// non-persistent event then deletes itself, and a persistent one can be deleted.
pub const DELETE_WAIT: Duration = Duration::from_secs(2);

/// The pause between two rounds of deletes while some are busy.
const DELETE_POLL: Duration = Duration::from_millis(1);

/// Rounds of disabling and trigger removal: a hist trigger whose variables another event's
/// trigger uses goes only after that one, and a fired `enable_event` trigger leaves its
/// target enabled for real once it is gone.
const ROUNDS: usize = 4;

/// Sysctls scenarios write, under `/proc/sys`.
const SYSCTLS: &[&str] = &["kernel/user_events_max", "kernel/perf_event_paranoid"];

/// Tracefs settings whose boot value is kept: a `traceoff` trigger turns tracing off. No
/// scenario writes another setting (`current_tracer`, `trace_options`, the buffer sizes);
/// one that starts to belongs here.
const TRACEFS_KNOBS: &[&str] = &["tracing_on"];

/// At most this many pages are read from one CPU's buffer to empty it.
const DRAIN_PAGES: usize = 1 << 16;

/// A file holding one value that is put back to its boot value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Knob {
    /// How a message names it: `sysctl kernel.user_events_max`, `tracing_on`.
    pub label: String,
    pub path: PathBuf,
}

/// Where hygiene looks: the guest uses [`HygieneRoots::guest`], tests a tree in a temp dir.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HygieneRoots {
    /// The tracefs mount (`/sys/kernel/tracing`).
    pub tracefs: PathBuf,
    /// Single-value files put back to their boot value, in this order.
    pub knobs: Vec<Knob>,
}

/// The kernel command line word that turns hygiene off (`cargo xtask run --kernel-args
/// ue.hygiene=off`), to measure its cost or to see what a scenario leaves to the next.
pub const OFF: &str = "ue.hygiene=off";

/// Whether hygiene runs, given the kernel command line (`/proc/cmdline`).
pub fn wanted(cmdline: &str) -> bool {
    !cmdline.split_whitespace().any(|w| w == OFF)
}

impl HygieneRoots {
    pub fn guest() -> HygieneRoots {
        HygieneRoots::at(Path::new("/sys/kernel/tracing"), Path::new("/proc/sys"))
    }

    /// The standard knobs under a tracefs root and a `/proc/sys` root.
    pub fn at(tracefs: &Path, proc_sys: &Path) -> HygieneRoots {
        let sysctls =
            SYSCTLS.iter().map(|s| Knob { label: format!("sysctl {}", s.replace('/', ".")), path: proc_sys.join(s) });
        let tracefs_knobs = TRACEFS_KNOBS.iter().map(|f| Knob { label: f.to_string(), path: tracefs.join(f) });
        HygieneRoots { tracefs: tracefs.to_path_buf(), knobs: sysctls.chain(tracefs_knobs).collect() }
    }
}

/// What a restore did: `left` names each thing the scenario left that was undone, `failed`
/// what could not be undone or is still not at its baseline.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Cleanup {
    pub left: Vec<String>,
    pub failed: Vec<String>,
}

/// The state at boot that every scenario must leave as it found it. A part that could not be
/// read at boot (a kernel without it) is not watched.
#[derive(Debug, Clone)]
pub struct Baseline {
    roots: HygieneRoots,
    /// The instances that exist at boot.
    instances: Option<BTreeSet<String>>,
    /// Whether tracefs has `set_event` (else no event is watched).
    set_event: bool,
    /// `dynamic_events` lines at boot.
    dynamic: Option<Vec<String>>,
    /// `user_events_status` at boot.
    status: Option<Status>,
    /// Each knob readable at boot with its boot value, trimmed.
    knobs: Vec<(Knob, String)>,
    /// Every CPU's `per_cpu/cpuN` folder of the top-level buffer.
    cpus: Vec<PathBuf>,
}

/// The parts of the state compared with the baseline, each read on its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    Instances,
    Enabled,
    Dynamic,
    Status,
    Knobs,
}

const PARTS: [Part; 5] = [Part::Instances, Part::Enabled, Part::Dynamic, Part::Status, Part::Knobs];

/// A file's non-blank lines, or why it could not be read.
type Lines = Result<Vec<String>, String>;

/// The state as read now; None for a part the baseline does not watch; a read that failed
/// is an error.
#[derive(Debug, Default)]
struct Snapshot {
    instances: Option<Result<BTreeSet<String>, String>>,
    /// Enabled events per event root: the top level (None) and each boot instance.
    enabled: Vec<(Option<String>, Lines)>,
    dynamic: Option<Lines>,
    status: Option<Result<Status, String>>,
    knobs: Vec<Result<String, String>>,
}

/// The directory of a `set_event` line's event under an event root.
fn event_dir(root: &Path, entry: &str) -> PathBuf {
    let (system, name) = entry.split_once(':').unwrap_or(("ftrace", entry));
    root.join("events").join(system).join(name)
}

fn in_instance(instance: &Option<String>) -> String {
    instance.as_ref().map(|i| format!(" in instance {i}")).unwrap_or_default()
}

fn read(path: &Path) -> Result<String, String> {
    fs::read(path)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .map_err(|e| format!("cannot read {}: {}", path.display(), sys::error_name(&e)))
}

fn lines(text: &str) -> Vec<String> {
    text.lines().filter(|l| !l.trim().is_empty()).map(String::from).collect()
}

fn read_dir_names(path: &Path) -> Result<BTreeSet<String>, String> {
    let names = fs::read_dir(path).map_err(|e| format!("cannot list {}: {}", path.display(), sys::error_name(&e)))?;
    Ok(names.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
}

/// One write(2) of `data`, as tracefs control files want; `truncate` opens with O_TRUNC (the
/// shell's `>`: it clears `set_event`, `trace` and a `trigger` file's hist triggers, and is
/// harmless on sysctls and settings). Never use it on `dynamic_events`: it removes them all.
fn write(path: &Path, data: &str, truncate: bool) -> Result<(), String> {
    let fail = |e: io::Error| sys::error_name(&e);
    let mut f = OpenOptions::new().write(true).truncate(truncate).append(!truncate).open(path).map_err(fail)?;
    if data.is_empty() {
        return Ok(());
    }
    match f.write(data.as_bytes()) {
        Ok(n) if n == data.len() => Ok(()),
        Ok(n) => Err(format!("short write of {n} of {} bytes", data.len())),
        Err(e) => Err(fail(e)),
    }
}

/// A read that failed, as a difference.
fn check<T>(r: &Result<T, String>, d: &mut Vec<String>) {
    if let Err(e) = r {
        d.push(e.clone());
    }
}

impl Baseline {
    /// Reads the boot state; taken once, before the first scenario.
    pub fn take(roots: &HygieneRoots) -> Baseline {
        let t = &roots.tracefs;
        let mut cpus: Vec<PathBuf> =
            fs::read_dir(t.join("per_cpu")).map(|d| d.flatten().map(|e| e.path()).collect()).unwrap_or_default();
        cpus.sort();
        Baseline {
            roots: roots.clone(),
            instances: read_dir_names(&t.join("instances")).ok(),
            set_event: t.join("set_event").exists(),
            dynamic: read(&t.join("dynamic_events")).ok().map(|s| lines(&s)),
            status: read(&t.join("user_events_status")).ok().map(|s| parse_status(&s)),
            knobs: roots
                .knobs
                .iter()
                .filter_map(|k| read(&k.path).ok().map(|v| (k.clone(), v.trim().to_string())))
                .collect(),
            cpus,
        }
    }

    /// Reads one part of the state into `now`.
    fn read_part(&self, part: Part, now: &mut Snapshot) {
        let t = &self.roots.tracefs;
        match part {
            Part::Instances => now.instances = self.instances.as_ref().map(|_| read_dir_names(&t.join("instances"))),
            Part::Enabled => {
                now.enabled.clear();
                if self.set_event {
                    now.enabled.push((None, read(&t.join("set_event")).map(|s| lines(&s))));
                    for i in self.instances.iter().flatten() {
                        let path = t.join("instances").join(i).join("set_event");
                        now.enabled.push((Some(i.clone()), read(&path).map(|s| lines(&s))));
                    }
                }
            }
            Part::Dynamic => {
                now.dynamic = self.dynamic.as_ref().map(|_| read(&t.join("dynamic_events")).map(|s| lines(&s)))
            }
            Part::Status => {
                now.status = self.status.as_ref().map(|_| read(&t.join("user_events_status")).map(|s| parse_status(&s)))
            }
            Part::Knobs => {
                now.knobs = self.knobs.iter().map(|(k, _)| read(&k.path).map(|v| v.trim().to_string())).collect()
            }
        }
    }

    /// How one part of `now` differs from the baseline, one line each; empty when clean.
    fn differences(&self, part: Part, now: &Snapshot) -> Vec<String> {
        let mut d = Vec::new();
        match part {
            Part::Instances => {
                if let (Some(base), Some(r)) = (&self.instances, &now.instances) {
                    check(r, &mut d);
                    if let Ok(names) = r {
                        d.extend(names.difference(base).map(|i| format!("instance {i} exists")));
                        d.extend(base.difference(names).map(|i| format!("instance {i} (present at boot) is gone")));
                    }
                }
            }
            Part::Enabled => {
                for (instance, r) in &now.enabled {
                    check(r, &mut d);
                    for e in r.iter().flatten() {
                        d.push(format!("event {e} is enabled{}", in_instance(instance)));
                    }
                }
            }
            Part::Dynamic => {
                if let (Some(base), Some(r)) = (&self.dynamic, &now.dynamic) {
                    check(r, &mut d);
                    if let Ok(now) = r {
                        d.extend(now.iter().filter(|l| !base.contains(l)).map(|l| format!("dynamic event {l}")));
                        let gone = base.iter().filter(|l| !now.contains(l));
                        d.extend(gone.map(|l| format!("dynamic event {l} (present at boot) is gone")));
                    }
                }
            }
            Part::Status => {
                if let (Some(base), Some(r)) = (&self.status, &now.status) {
                    check(r, &mut d);
                    if let Ok(s) = r {
                        if s.active != base.active || sorted(&s.events) != sorted(&base.events) {
                            let active = s.active.map_or("?".to_string(), |n| n.to_string());
                            let names =
                                if s.events.is_empty() { String::new() } else { format!(" ({})", s.events.join(", ")) };
                            d.push(format!("user_events_status shows Active: {active}{names}"));
                        }
                    }
                }
            }
            Part::Knobs => {
                for ((k, boot), r) in self.knobs.iter().zip(&now.knobs) {
                    check(r, &mut d);
                    if let Ok(v) = r {
                        if v != boot {
                            d.push(format!("{} is {v}, boot value {boot}", k.label));
                        }
                    }
                }
            }
        }
        d
    }

    /// Undoes what the last scenario left, then checks the baseline. Cheap reads first: when
    /// they all match, the only action left is emptying the trace buffer if it holds records.
    /// Only the parts that differed are read again for the check.
    pub fn restore(&self) -> Cleanup {
        let mut c = Cleanup::default();
        let mut now = Snapshot::default();
        for part in PARTS {
            self.read_part(part, &mut now);
        }
        let dirty: Vec<Part> = PARTS.into_iter().filter(|p| !self.differences(*p, &now).is_empty()).collect();
        // First, so the grace period that pending user events wait for runs meanwhile.
        self.drain_records(&mut c);
        if dirty.is_empty() {
            return c;
        }
        self.undo(&now, &mut c);
        for part in dirty {
            self.read_part(part, &mut now);
            c.failed.extend(self.differences(part, &now).into_iter().map(|d| format!("{d} after cleanup")));
        }
        c
    }

    /// Acts on what differs, in an order the kernel accepts.
    fn undo(&self, now: &Snapshot, c: &mut Cleanup) {
        let t = &self.roots.tracefs;
        // Instances first: removing one disables its events and drops its triggers.
        if let (Some(base), Some(Ok(names))) = (&self.instances, &now.instances) {
            for i in names.difference(base) {
                match fs::remove_dir(t.join("instances").join(i)) {
                    Ok(()) => c.left.push(format!("instance {i} (removed)")),
                    Err(e) => c.failed.push(format!("instance {i}: rmdir: {}", sys::error_name(&e))),
                }
            }
        }
        for (instance, r) in &now.enabled {
            if r.as_ref().is_ok_and(|l| !l.is_empty()) {
                let root = match instance {
                    Some(i) => t.join("instances").join(i),
                    None => t.clone(),
                };
                disable_events(&root, instance, c);
            }
        }
        for ((k, boot), r) in self.knobs.iter().zip(&now.knobs) {
            if let Ok(v) = r {
                if v != boot {
                    match write(&k.path, boot, true) {
                        Ok(()) => c.left.push(format!("{} {v} (restored to {boot})", k.label)),
                        Err(e) => c.failed.push(format!("{} {v}: writing {boot}: {e}", k.label)),
                    }
                }
            }
        }
        // Last: deleting user events may wait for the kernel.
        if let (Some(base), Some(Ok(lines))) = (&self.dynamic, &now.dynamic) {
            let extra: Vec<&String> = lines.iter().filter(|l| !base.contains(l)).collect();
            self.remove_dynamic(&extra, c);
        }
    }

    /// Removes dynamic events newest first: an eprobe or a synthetic event before what it
    /// refers to. User events are deleted by name, all of them in rounds, while any delete
    /// fails (EBUSY, or another errno from a changed kernel) and [`DELETE_WAIT`] has not
    /// passed: a non-persistent one then deletes itself (ENOENT, nothing left behind), a
    /// persistent one is deleted (the scenario left it).
    fn remove_dynamic(&self, lines: &[&String], c: &mut Cleanup) {
        let t = &self.roots.tracefs;
        let mut users = Vec::new();
        for line in lines.iter().rev() {
            match dynamic_removal(line) {
                Some(DynamicRemoval::User(name)) => users.push(name),
                Some(DynamicRemoval::Command(cmd)) => {
                    let what = line.split_whitespace().next().unwrap_or(line);
                    match write(&t.join("dynamic_events"), &cmd, false) {
                        Ok(()) => c.left.push(format!("dynamic event {what} (removed)")),
                        Err(e) => c.failed.push(format!("dynamic event {what}: {cmd}: {e}")),
                    }
                }
                None => {}
            }
        }
        if users.is_empty() {
            return;
        }
        let data = t.join("user_events_data");
        let fd = match File::options().read(true).write(true).open(&data) {
            Ok(f) => f,
            Err(e) => {
                let e = sys::error_name(&e);
                c.failed.extend(users.iter().map(|u| format!("user event {u}: cannot open {}: {e}", data.display())));
                return;
            }
        };
        let until = Instant::now() + DELETE_WAIT;
        let mut pending: Vec<(String, Vec<u8>)> = users
            .into_iter()
            .map(|u| {
                let mut text = u.clone().into_bytes();
                text.push(0);
                (u, text)
            })
            .collect();
        loop {
            let mut busy = Vec::new();
            for (name, text) in pending {
                match outcome::ioctl(fd.as_raw_fd(), DIAG_IOCSDEL, text.as_ptr() as u64) {
                    Ok(_) => c.left.push(format!("user event {name} (deleted)")),
                    Err(libc::ENOENT) => {}
                    // EBUSY, or whatever a changed kernel says instead: what counts is whether
                    // the event is gone by the end of the wait (a non-persistent one deletes
                    // itself once its references go, whatever its delete returned before).
                    Err(errno) => busy.push((name, text, errno)),
                }
            }
            if busy.is_empty() {
                return;
            }
            if Instant::now() >= until {
                for (name, _, errno) in busy {
                    let errno = sys::errno_name(errno);
                    c.failed.push(format!("user event {name}: DIAG_IOCSDEL: {errno} for {} s", DELETE_WAIT.as_secs()));
                }
                return;
            }
            pending = busy.into_iter().map(|(name, text, _)| (name, text)).collect();
            thread::sleep(DELETE_POLL);
        }
    }

    /// Empties the top-level trace buffer of a CPU that holds records (its `stats` say how
    /// many), by reading its `trace_pipe_raw` without blocking: a scenario that traces
    /// legitimately leaves records, so this is not reported. Not by opening `trace` with
    /// O_TRUNC, which resets the counters too but waits for an RCU grace period (about 20 ms
    /// under TCG); that is the fallback when reading leaves records.
    fn drain_records(&self, c: &mut Cleanup) {
        let holds = |cpu: &PathBuf| read(&cpu.join("stats")).ok().and_then(|s| stats_entries(&s)).unwrap_or(0) > 0;
        let full: Vec<&PathBuf> = self.cpus.iter().filter(|cpu| holds(cpu)).collect();
        if full.is_empty() {
            return;
        }
        let mut page = vec![0u8; 1 << 16];
        for cpu in &full {
            let Ok(mut f) =
                OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(cpu.join("trace_pipe_raw"))
            else {
                continue;
            };
            for _ in 0..DRAIN_PAGES {
                match f.read(&mut page) {
                    Ok(0) => break,
                    Ok(_) => {}
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(_) => break,
                }
            }
        }
        if full.iter().any(|cpu| holds(cpu)) {
            if let Err(e) = write(&self.roots.tracefs.join("trace"), "", true) {
                c.failed.push(format!("clearing the trace buffer: {e}"));
            }
        }
    }
}

fn sorted(v: &[String]) -> Vec<&String> {
    let mut v: Vec<&String> = v.iter().collect();
    v.sort();
    v
}

/// Disables every enabled event under an event root (tracefs or an instance) and removes the
/// triggers that keep events soft-enabled, in rounds; what was enabled and each trigger
/// removed is reported once. What is still enabled after the rounds is left to the check.
fn disable_events(root: &Path, instance: &Option<String>, c: &mut Cleanup) {
    let set_event = root.join("set_event");
    let mut reported = BTreeSet::new();
    for _ in 0..ROUNDS {
        let Ok(listed) = read(&set_event).map(|s| lines(&s)) else { return };
        if listed.is_empty() {
            return;
        }
        for e in &listed {
            // `1` or `1*`: enabled for real; `0*`: only soft-enabled, by a trigger or an eprobe.
            let state = read(&event_dir(root, e).join("enable")).unwrap_or_default();
            if state.starts_with('1') && reported.insert(e.clone()) {
                c.left.push(format!("{} was enabled in ftrace{} (disabled)", event_label(e), in_instance(instance)));
            }
        }
        if let Err(e) = write(&set_event, "", true) {
            c.failed.push(format!("disabling events{}: truncating set_event: {e}", in_instance(instance)));
            return;
        }
        let Ok(soft) = read(&set_event).map(|s| lines(&s)) else { return };
        for e in &soft {
            remove_triggers(&event_dir(root, e), e, c);
        }
    }
}

/// One round of trigger removal on an event: each line's removal, then the file read back;
/// the lines gone are reported.
fn remove_triggers(dir: &Path, entry: &str, c: &mut Cleanup) {
    let path = dir.join("trigger");
    let Ok(before) = read(&path) else { return };
    let before: Vec<&str> = before.lines().filter(|l| trigger_removal(l).is_some()).collect();
    if before.is_empty() {
        return;
    }
    let mut truncated = false;
    for line in &before {
        let result = match trigger_removal(line) {
            Some(TriggerRemoval::Write(cmd)) => write(&path, &cmd, false),
            Some(TriggerRemoval::Truncate) if !truncated => {
                truncated = true;
                write(&path, "", true)
            }
            _ => Ok(()),
        };
        // A removal the kernel refuses now (EBUSY: another trigger uses its variables) is
        // tried again next round; what stays is reported by the check.
        let _ = result;
    }
    let after = read(&path).unwrap_or_default();
    let on = entry.replacen(':', "/", 1);
    for line in before {
        if !after.lines().any(|l| l == line) {
            c.left.push(format!("trigger {} on {on} (removed)", trigger_text(line)));
        }
    }
}

/// A fake guest under `dir` for tests: `tracing/` and `sys/` (for `/proc/sys`) as plain files
/// at their boot values.
#[cfg(test)]
pub fn fake_tree(dir: &Path) -> HygieneRoots {
    let t = dir.join("tracing");
    for d in ["instances", "per_cpu/cpu0", "per_cpu/cpu1", "events/user_events/ev_a"] {
        fs::create_dir_all(t.join(d)).unwrap();
    }
    fs::create_dir_all(dir.join("sys/kernel")).unwrap();
    for (f, text) in [
        ("set_event", ""),
        ("dynamic_events", ""),
        ("user_events_status", "\nActive: 0\nBusy: 0\n"),
        ("user_events_data", ""),
        ("trace", "# tracer: nop\n"),
        ("tracing_on", "1\n"),
        ("per_cpu/cpu0/stats", "entries: 0\noverrun: 0\n"),
        ("per_cpu/cpu1/stats", "entries: 0\noverrun: 0\n"),
        ("events/user_events/ev_a/enable", "1\n"),
    ] {
        fs::write(t.join(f), text).unwrap();
    }
    fs::write(dir.join("sys/kernel/user_events_max"), "32768\n").unwrap();
    fs::write(dir.join("sys/kernel/perf_event_paranoid"), "2\n").unwrap();
    HygieneRoots::at(&t, &dir.join("sys"))
}

#[cfg(test)]
mod tests;
