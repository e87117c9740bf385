//! One kernel report as the scanner reads it: what it is (`FindingKind`, the `Finding` it
//! becomes), what starts one (`trigger`, its kind and how it
//! ends), how it grows line by line until its end marker, rule or call trace ends, and the task
//! and taint its lines name.

use protocol::Marker;
use serde::Serialize;

use super::fingerprint::{self, Stack};

/// A report's excerpt keeps at most this many lines; the rest is in the full log.
pub(super) const MAX_EXCERPT: usize = 60;
pub(super) const CUT_HERE: &str = "------------[ cut here ]------------";

/// What kind of kernel report a finding is. None of them is informational: each one means the
/// kernel misbehaved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FindingKind {
    Panic,
    Oops,
    Bug,
    Warning,
    /// A `cut here` line with no report header after it (the log was cut, or an unknown report).
    CutHere,
    Kasan,
    /// `BUG: KMSAN: uninit-value in ...` (`--profile kmsan`).
    Kmsan,
    Kfence,
    Ubsan,
    HungTask,
    Lockdep,
    RcuStall,
    /// `sysrq: Show Blocked State`: the tasks in D state, dumped on purpose by the agent when a
    /// scenario's process would not die (evidence for a hang, not a report of its own).
    BlockedTasks,
}

impl FindingKind {
    pub fn as_str(self) -> &'static str {
        match self {
            FindingKind::Panic => "panic",
            FindingKind::Oops => "oops",
            FindingKind::Bug => "bug",
            FindingKind::Warning => "warning",
            FindingKind::CutHere => "cut-here",
            FindingKind::Kasan => "kasan",
            FindingKind::Kmsan => "kmsan",
            FindingKind::Kfence => "kfence",
            FindingKind::Ubsan => "ubsan",
            FindingKind::HungTask => "hung-task",
            FindingKind::Lockdep => "lockdep",
            FindingKind::RcuStall => "rcu-stall",
            FindingKind::BlockedTasks => "blocked-tasks",
        }
    }
}

/// One kernel report found on the console.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub kind: FindingKind,
    /// 1-based line of the report's header in the original log (the `WARNING:` line, not the
    /// `cut here` before it).
    pub line: usize,
    /// The header line without its timestamp.
    pub summary: String,
    /// The report's lines without timestamps, from its first line (the `cut here` when there is
    /// one) through its end marker, at most [`MAX_EXCERPT`] of them.
    pub excerpt: Vec<String>,
    /// The scenario running when the report began; `None` during boot, between scenarios and
    /// during teardown.
    pub scenario: Option<(usize, String)>,
    /// The taint flags the report printed (`G        W`); empty for `Not tainted`, `None` when
    /// the report shows no taint.
    pub taint_flags: Option<String>,
    /// The task the report is about, from its `CPU: ... PID: N Comm: X` line.
    pub pid: Option<u32>,
    pub comm: Option<String>,
    /// The excerpt does not reach the report's end: the log stopped, another report or a
    /// scenario marker interrupted it, or it was longer than the excerpt cap.
    pub truncated: bool,
    /// The faulting place and the reliable frames of the report's first call trace, as printed
    /// (`func+0xoff/0xlen`), at most [`super::fingerprint::KEPT_FRAMES`]; read from every line
    /// of the report, past the excerpt's cap too.
    pub frames: Vec<String>,
    /// Its kind and first meaningful functions, `kasan:f<g<h` (`super::fingerprint`).
    pub fingerprint: String,
    /// A short stable hash of `fingerprint` (12 hex digits).
    pub fingerprint_hash: String,
}

impl Finding {
    /// A one-line description for diagnostics: `WARNING at FILE:LINE func+0x..`, else the summary.
    pub fn describe(&self) -> String {
        if self.kind == FindingKind::Warning {
            if let Some((_, place)) = self.summary.split_once(" at ") {
                return format!("WARNING at {place}");
            }
        }
        self.summary.clone()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Ending {
    /// `---[ end trace ... ]---` or `---[ end Kernel panic ... ]---`.
    Marker,
    /// A `=====` rule (KASAN, KMSAN, KFENCE).
    Rule,
    /// The end of the call trace: `</TASK>` on x86, the first unindented line on arm64.
    Trace,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Trace {
    NotYet,
    Header,
    Bracketed,
    Plain,
}

#[derive(Debug, Clone, Copy)]
pub(super) struct Trigger {
    pub(super) kind: FindingKind,
    pub(super) ending: Ending,
    /// `Oops: ...` / `Internal error: ...`: the die() line that follows a BUG or a fault header.
    pub(super) die_line: bool,
}

pub(super) enum Class<'a> {
    Begin(usize, &'a str),
    End(usize),
    CutHere,
    Start(Trigger),
    Other,
}

pub(super) fn classify(msg: &str) -> Class<'_> {
    if Marker::is_marker(msg) {
        return match Marker::parse(msg) {
            Some(Marker::Begin { index, name }) => Class::Begin(index, name),
            Some(Marker::End { index }) => Class::End(index),
            Some(Marker::Progress { .. }) | None => Class::Other,
        };
    }
    if msg.trim() == CUT_HERE {
        return Class::CutHere;
    }
    trigger(msg).map_or(Class::Other, Class::Start)
}

pub(super) fn trigger(msg: &str) -> Option<Trigger> {
    use FindingKind::*;
    let t = |kind, ending| Some(Trigger { kind, ending, die_line: false });
    if msg.starts_with(crate::vm::qemu::PANIC_MARKER) {
        return t(Panic, Ending::Marker);
    }
    if msg.starts_with("Oops: ") || msg.starts_with("Internal error: ") {
        return Some(Trigger { kind: Oops, ending: Ending::Marker, die_line: true });
    }
    if msg.starts_with("BUG: KASAN: ") {
        return t(Kasan, Ending::Rule);
    }
    if msg.starts_with("BUG: KMSAN: ") {
        return t(Kmsan, Ending::Rule);
    }
    if msg.starts_with("BUG: KFENCE: ") {
        return t(Kfence, Ending::Rule);
    }
    if crate::vm::qemu::FAULT_MARKERS.iter().any(|p| msg.starts_with(p)) {
        return t(Oops, Ending::Marker);
    }
    if msg.starts_with("kernel BUG at ") {
        return t(Bug, Ending::Marker);
    }
    if msg.strip_prefix("watchdog: ").unwrap_or(msg).starts_with("BUG: ")
        || msg.contains("Watchdog detected hard LOCKUP")
    {
        return t(Bug, Ending::Trace);
    }
    // SLUB debugging: `BUG kmalloc-64 (Not tainted): Right Redzone overwritten`.
    if msg.starts_with("BUG ") && (msg.contains("(Not tainted)") || msg.contains("(Tainted: ")) {
        return t(Bug, Ending::Trace);
    }
    if msg.starts_with("UBSAN: ") {
        return t(Ubsan, Ending::Marker);
    }
    if msg.starts_with("INFO: task ") && msg.contains(" blocked for more than ") {
        return t(HungTask, Ending::Trace);
    }
    if msg.starts_with("sysrq: Show Blocked State") {
        return t(BlockedTasks, Ending::Trace);
    }
    let rcu = msg.strip_prefix("rcu: ").unwrap_or(msg);
    if rcu.starts_with("INFO: rcu_") && rcu.contains("stall") {
        return t(RcuStall, Ending::Trace);
    }
    if let Some(rest) = msg.strip_prefix("WARNING: ") {
        if rest.starts_with("CPU: ") || rest.starts_with("at ") {
            return t(Warning, Ending::Marker);
        }
        // Lockdep's headers: `possible circular locking dependency detected`, `inconsistent lock
        // state`, `suspicious RCU usage`, `bad unlock balance detected!`, ...
        if rest.starts_with("possible ") || rest.contains("lock") || rest.starts_with("suspicious RCU usage") {
            return t(Lockdep, Ending::Trace);
        }
        return t(Warning, Ending::Trace);
    }
    None
}

pub(super) struct Report {
    pub(super) finding: Finding,
    pub(super) ending: Ending,
    pub(super) trace: Trace,
    pub(super) absorbed_die: bool,
    /// Lines consumed after the first one, past the excerpt cap too.
    pub(super) consumed: usize,
    /// The call trace, from every line the report consumed.
    pub(super) stack: Stack,
    pub(super) capped: bool,
}

pub(super) enum Step {
    More,
    /// The line ended the report and belongs to it.
    Ended,
    /// The line is past the report's end and does not belong to it.
    EndedBefore,
}

impl Report {
    pub(super) fn new(line: usize, msg: &str, trigger: Trigger, scenario: Option<(usize, String)>) -> Report {
        let mut report = Report {
            finding: Finding {
                kind: trigger.kind,
                line,
                summary: msg.trim_end().to_string(),
                excerpt: Vec::new(),
                scenario,
                taint_flags: None,
                pid: None,
                comm: None,
                truncated: false,
                frames: Vec::new(),
                fingerprint: String::new(),
                fingerprint_hash: String::new(),
            },
            ending: trigger.ending,
            trace: Trace::NotYet,
            absorbed_die: trigger.die_line,
            consumed: 0,
            stack: Stack::default(),
            capped: false,
        };
        report.push(msg);
        report.consumed = 0;
        report
    }

    /// The header after a `cut here` turns the pending report into the real one.
    pub(super) fn upgrade(&mut self, line: usize, msg: &str, trigger: Trigger, scenario: Option<(usize, String)>) {
        self.finding.kind = trigger.kind;
        self.finding.line = line;
        self.finding.summary = msg.trim_end().to_string();
        self.finding.scenario = scenario;
        self.ending = trigger.ending;
        self.absorbed_die = trigger.die_line;
        self.push(msg);
    }

    pub(super) fn push(&mut self, msg: &str) {
        self.note(msg);
        self.stack.feed(msg);
        self.consumed += 1;
        if self.finding.excerpt.len() < MAX_EXCERPT {
            self.finding.excerpt.push(msg.trim_end().to_string());
        } else {
            self.capped = true;
        }
    }

    /// Picks the task and taint out of the report's lines, the first mention winning.
    fn note(&mut self, msg: &str) {
        let f = &mut self.finding;
        if f.taint_flags.is_none() {
            f.taint_flags = taint_of(msg);
        }
        if f.pid.is_none() || f.comm.is_none() {
            let (pid, comm) = task_of(msg);
            f.pid = f.pid.or(pid);
            f.comm = f.comm.take().or(comm);
        }
    }

    /// The finding, its frames and fingerprint filled in.
    pub(super) fn into_finding(self) -> Finding {
        let mut f = self.finding;
        f.frames = self.stack.frames();
        f.fingerprint = fingerprint::fingerprint(f.kind.as_str(), &f.frames, &f.summary);
        f.fingerprint_hash = fingerprint::hash(&f.fingerprint);
        f
    }

    pub(super) fn step(&mut self, msg: &str) -> Step {
        let t = msg.trim();
        if t.starts_with("---[ end trace") || t.starts_with("---[ end Kernel panic") {
            self.push(msg);
            return Step::Ended;
        }
        match self.ending {
            Ending::Marker => {}
            Ending::Rule => {
                if t.len() >= 20 && t.bytes().all(|b| b == b'=') {
                    self.push(msg);
                    return Step::Ended;
                }
            }
            Ending::Trace => match self.trace {
                Trace::NotYet => {
                    if t == "Call Trace:" || t == "Call trace:" {
                        self.trace = Trace::Header;
                    }
                }
                Trace::Header => {
                    if t.starts_with('<') {
                        self.trace = Trace::Bracketed;
                    } else if indented(msg) {
                        self.trace = Trace::Plain;
                    } else {
                        return Step::EndedBefore;
                    }
                }
                Trace::Bracketed => {
                    if t == "</TASK>" {
                        self.push(msg);
                        return Step::Ended;
                    }
                }
                Trace::Plain => {
                    if !indented(msg) {
                        return Step::EndedBefore;
                    }
                }
            },
        }
        self.push(msg);
        Step::More
    }
}

pub(super) fn indented(msg: &str) -> bool {
    msg.starts_with([' ', '\t'])
}

pub(super) fn taint_of(msg: &str) -> Option<String> {
    if msg.contains("Not tainted") {
        return Some(String::new());
    }
    let (_, rest) = msg.split_once("Tainted: ")?;
    // The flags are capitals and spaces up to the release; `Tainted: [W]=WARN` is not them.
    let flags: String = rest.chars().take_while(|c| c.is_ascii_uppercase() || *c == ' ').collect();
    let flags = flags.trim_end();
    (!flags.is_empty()).then(|| flags.to_string())
}

pub(super) fn task_of(msg: &str) -> (Option<u32>, Option<String>) {
    if msg.starts_with("CPU: ") && msg.contains(" Comm: ") {
        let comm = msg.split_once(" Comm: ").map(|(_, rest)| {
            let end = [" Not tainted", " Tainted: ", " Kdump: "].iter().filter_map(|m| rest.find(m)).min();
            rest[..end.unwrap_or(rest.len())].to_string()
        });
        return (number_after(msg, "PID: "), comm);
    }
    if msg.starts_with("WARNING: CPU: ") {
        return (number_after(msg, "PID: "), None);
    }
    // `INFO: task NAME:PID blocked for more than N seconds.`
    if let Some(rest) = msg.strip_prefix("INFO: task ") {
        if let Some((task, _)) = rest.split_once(" blocked for more than ") {
            if let Some((comm, pid)) = task.rsplit_once(':') {
                return (pid.parse().ok(), Some(comm.to_string()));
            }
        }
    }
    (None, None)
}

pub(super) fn number_after(s: &str, key: &str) -> Option<u32> {
    let (_, rest) = s.split_once(key)?;
    let end = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
    rest[..end].parse().ok()
}
