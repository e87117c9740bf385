//! Kernel health from the serial console log: panics, oopses, BUGs, WARNs, sanitizer, lockdep,
//! hung-task and RCU-stall reports, each attributed to the scenario the guest agent was running
//! (from its `ue-agent: begin/end` kmsg markers). Sans-IO: takes the log text, returns data.

use protocol::Marker;
use serde::Serialize;

use crate::support::text::clean;

/// A report's excerpt keeps at most this many lines; the rest is in the full log.
const MAX_EXCERPT: usize = 60;
/// How many lines after a `cut here` the report header may come (other CPUs can interleave).
const CUT_HERE_WINDOW: usize = 5;
const CUT_HERE: &str = "------------[ cut here ]------------";

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

/// One scenario as the console saw it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Span {
    pub index: usize,
    pub name: String,
    pub begin_line: usize,
    /// `None` when the scenario never ended on the console.
    pub end_line: Option<usize>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Scan {
    /// In log order.
    pub findings: Vec<Finding>,
    /// The scenarios in the order they began.
    pub timeline: Vec<Span>,
}

impl Scan {
    /// The scenario begun but never ended: the one running when the log stopped.
    pub fn last_begun(&self) -> Option<(usize, String)> {
        self.timeline.last().filter(|s| s.end_line.is_none()).map(|s| (s.index, s.name.clone()))
    }
}

/// Scans a console log for kernel reports.
pub fn scan(console: &str) -> Scan {
    let mut scanner = Scanner::default();
    for (i, raw) in console.lines().enumerate() {
        let line = clean(raw);
        scanner.feed(i + 1, message(&line));
    }
    scanner.close(false);
    scanner.scan
}

/// The last `lines` lines of the log, normalised (timestamps kept), trailing blank lines dropped.
pub fn tail(console: &str, lines: usize) -> Vec<String> {
    let mut out: Vec<String> =
        console.lines().rev().map(clean).skip_while(|l| l.trim().is_empty()).take(lines).collect();
    out.reverse();
    out
}

/// The printk message of a console line: without `[    1.234567]` and a `[    T1]` caller id.
fn message(line: &str) -> &str {
    let Some(rest) = bracketed(line, is_timestamp) else {
        return line;
    };
    let rest = bracketed(rest, is_caller).unwrap_or(rest);
    rest.strip_prefix(' ').unwrap_or(rest)
}

fn bracketed(s: &str, ok: fn(&str) -> bool) -> Option<&str> {
    let inner = s.strip_prefix('[')?;
    let close = inner.find(']')?;
    ok(inner[..close].trim_start()).then(|| &inner[close + 1..])
}

// Requires the dot so that arm64's `[0000000000000000] pgd=...` page-table lines stay intact.
fn is_timestamp(s: &str) -> bool {
    let digits = |p: &str| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit());
    s.split_once('.').is_some_and(|(a, b)| digits(a) && digits(b))
}

fn is_caller(s: &str) -> bool {
    let mut b = s.bytes();
    matches!(b.next(), Some(b'T' | b'C')) && s.len() > 1 && b.all(|c| c.is_ascii_digit())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ending {
    /// `---[ end trace ... ]---` or `---[ end Kernel panic ... ]---`.
    Marker,
    /// A `=====` rule (KASAN, KFENCE).
    Rule,
    /// The end of the call trace: `</TASK>` on x86, the first unindented line on arm64.
    Trace,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Trace {
    NotYet,
    Header,
    Bracketed,
    Plain,
}

#[derive(Debug, Clone, Copy)]
struct Trigger {
    kind: FindingKind,
    ending: Ending,
    /// `Oops: ...` / `Internal error: ...`: the die() line that follows a BUG or a fault header.
    die_line: bool,
}

enum Class<'a> {
    Begin(usize, &'a str),
    End(usize),
    CutHere,
    Start(Trigger),
    Other,
}

fn classify(msg: &str) -> Class<'_> {
    if Marker::is_marker(msg) {
        return match Marker::parse(msg) {
            Some(Marker::Begin { index, name }) => Class::Begin(index, name),
            Some(Marker::End { index }) => Class::End(index),
            None => Class::Other,
        };
    }
    if msg.trim() == CUT_HERE {
        return Class::CutHere;
    }
    trigger(msg).map_or(Class::Other, Class::Start)
}

fn trigger(msg: &str) -> Option<Trigger> {
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

struct Report {
    finding: Finding,
    ending: Ending,
    trace: Trace,
    absorbed_die: bool,
    /// Lines consumed after the first one, past the excerpt cap too.
    consumed: usize,
    capped: bool,
}

enum Step {
    More,
    /// The line ended the report and belongs to it.
    Ended,
    /// The line is past the report's end and does not belong to it.
    EndedBefore,
}

impl Report {
    fn new(line: usize, msg: &str, trigger: Trigger, scenario: Option<(usize, String)>) -> Report {
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
            },
            ending: trigger.ending,
            trace: Trace::NotYet,
            absorbed_die: trigger.die_line,
            consumed: 0,
            capped: false,
        };
        report.push(msg);
        report.consumed = 0;
        report
    }

    /// The header after a `cut here` turns the pending report into the real one.
    fn upgrade(&mut self, line: usize, msg: &str, trigger: Trigger, scenario: Option<(usize, String)>) {
        self.finding.kind = trigger.kind;
        self.finding.line = line;
        self.finding.summary = msg.trim_end().to_string();
        self.finding.scenario = scenario;
        self.ending = trigger.ending;
        self.absorbed_die = trigger.die_line;
        self.push(msg);
    }

    fn push(&mut self, msg: &str) {
        self.note(msg);
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

    fn step(&mut self, msg: &str) -> Step {
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

fn indented(msg: &str) -> bool {
    msg.starts_with([' ', '\t'])
}

fn taint_of(msg: &str) -> Option<String> {
    if msg.contains("Not tainted") {
        return Some(String::new());
    }
    let (_, rest) = msg.split_once("Tainted: ")?;
    // The flags are capitals and spaces up to the release; `Tainted: [W]=WARN` is not them.
    let flags: String = rest.chars().take_while(|c| c.is_ascii_uppercase() || *c == ' ').collect();
    let flags = flags.trim_end();
    (!flags.is_empty()).then(|| flags.to_string())
}

fn task_of(msg: &str) -> (Option<u32>, Option<String>) {
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

fn number_after(s: &str, key: &str) -> Option<u32> {
    let (_, rest) = s.split_once(key)?;
    let end = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
    rest[..end].parse().ok()
}

#[derive(Default)]
struct Scanner {
    scan: Scan,
    open: Option<Report>,
    current: Option<(usize, String)>,
}

impl Scanner {
    fn feed(&mut self, line: usize, msg: &str) {
        match classify(msg) {
            Class::Begin(index, name) => {
                self.close(true);
                self.scan.timeline.push(Span { index, name: name.to_string(), begin_line: line, end_line: None });
                self.current = Some((index, name.to_string()));
            }
            Class::End(index) => {
                self.close(true);
                if self.current.as_ref().is_some_and(|(i, _)| *i == index) {
                    self.current = None;
                    if let Some(span) = self.scan.timeline.last_mut() {
                        span.end_line = Some(line);
                    }
                }
            }
            Class::CutHere => {
                self.close(true);
                let trigger = Trigger { kind: FindingKind::CutHere, ending: Ending::Marker, die_line: false };
                self.open = Some(Report::new(line, msg, trigger, self.current.clone()));
            }
            Class::Start(trigger) => {
                if let Some(report) = &mut self.open {
                    let kind = report.finding.kind;
                    if trigger.die_line && matches!(kind, FindingKind::Oops | FindingKind::Bug) && !report.absorbed_die
                    {
                        report.absorbed_die = true;
                        report.ending = Ending::Marker;
                        report.push(msg);
                        return;
                    }
                    if kind == FindingKind::CutHere && report.consumed <= CUT_HERE_WINDOW {
                        report.upgrade(line, msg, trigger, self.current.clone());
                        return;
                    }
                }
                self.close(true);
                self.open = Some(Report::new(line, msg, trigger, self.current.clone()));
            }
            Class::Other => {
                let Some(report) = &mut self.open else { return };
                match report.step(msg) {
                    Step::More => {}
                    Step::Ended | Step::EndedBefore => self.finish(true),
                }
            }
        }
    }

    /// Closes the open report because of a line that is not part of it (`interrupted`) or
    /// because the log ended. An arm64 trace ends at any unindented line, so an interruption
    /// there is its natural end.
    fn close(&mut self, interrupted: bool) {
        let natural = interrupted && self.open.as_ref().is_some_and(|r| r.trace == Trace::Plain);
        self.finish(natural);
    }

    fn finish(&mut self, ended: bool) {
        if let Some(mut report) = self.open.take() {
            report.finding.truncated = !ended || report.capped;
            self.scan.findings.push(report.finding);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::FindingKind::*;
    use super::*;

    /// (kind, line, scenario index, truncated)
    type Expected = (FindingKind, usize, Option<usize>, bool);

    fn check(fixture: &str, expected: &[Expected]) -> Scan {
        let scan = scan(fixture);
        let got: Vec<Expected> =
            scan.findings.iter().map(|f| (f.kind, f.line, f.scenario.as_ref().map(|s| s.0), f.truncated)).collect();
        assert_eq!(got, expected, "{:#?}", scan.findings);
        for f in &scan.findings {
            assert!(!f.excerpt.is_empty() && f.excerpt.len() <= MAX_EXCERPT, "{f:?}");
            assert!(f.excerpt.contains(&f.summary), "the excerpt holds the header: {f:?}");
        }
        scan
    }

    const PASS: &str = include_str!("../../test_data/console/x86_64-pass.log");
    const FAIL: &str = include_str!("../../test_data/console/x86_64-fail.log");
    const WARN: &str = include_str!("../../test_data/console/x86_64-warn.log");
    const PANIC: &str = include_str!("../../test_data/console/x86_64-panic.log");
    const ARM64_OOPS: &str = include_str!("../../test_data/console/arm64-oops-panic.log");
    const KASAN: &str = include_str!("../../test_data/console/x86_64-kasan.log");
    const HUNG: &str = include_str!("../../test_data/console/x86_64-hung-task.log");
    const TRUNCATED: &str = include_str!("../../test_data/console/x86_64-truncated.log");
    const ANSI: &str = include_str!("../../test_data/console/x86_64-ansi-crlf.log");
    const X86_REPORTS: &str = include_str!("../../test_data/console/x86_64-reports.log");
    const ARM64_REPORTS: &str = include_str!("../../test_data/console/arm64-reports.log");

    fn names(scan: &Scan) -> Vec<(usize, &str, usize, Option<usize>)> {
        scan.timeline.iter().map(|s| (s.index, s.name.as_str(), s.begin_line, s.end_line)).collect()
    }

    #[test]
    fn clean_boots_have_no_findings_and_a_closed_timeline() {
        let scan = check(PASS, &[]);
        assert_eq!(
            names(&scan),
            [(1, "abi/register", 26, Some(27)), (2, "abi/write", 28, Some(29)), (3, "abi/enable", 30, Some(31))]
        );
        assert_eq!(scan.last_begun(), None);
        // A user-space segfault and its `Code:` line are not kernel findings.
        check(FAIL, &[]);
    }

    #[test]
    fn warn_merges_with_its_cut_here_and_belongs_to_scenario_2() {
        let scan = check(WARN, &[(Warning, 30, Some(2), false)]);
        let f = &scan.findings[0];
        assert_eq!(
            f.summary,
            "WARNING: CPU: 1 PID: 58 at kernel/trace/trace_events_user.c:2378 user_events_write_core+0x2c5/0x2f0"
        );
        assert_eq!(f.scenario, Some((2, "abi/write".to_string())));
        assert_eq!(f.excerpt.first().map(String::as_str), Some(CUT_HERE));
        assert_eq!(f.excerpt.last().map(String::as_str), Some("---[ end trace 0000000000000000 ]---"));
        assert_eq!(f.excerpt.len(), 40);
        assert_eq!(f.excerpt[17], " <TASK>", "timestamps go, indentation stays");
        assert_eq!((f.pid, f.comm.as_deref(), f.taint_flags.as_deref()), (Some(58), Some("ue-probe"), Some("")));
        assert_eq!(f.describe(), "WARNING at kernel/trace/trace_events_user.c:2378 user_events_write_core+0x2c5/0x2f0");
    }

    #[test]
    fn lkdtm_panic_in_scenario_2_of_4() {
        let scan = check(PANIC, &[(Panic, 30, Some(2), false)]);
        let f = &scan.findings[0];
        assert_eq!(f.summary, "Kernel panic - not syncing: dumptest");
        assert_eq!(f.excerpt.len(), 28);
        assert_eq!(f.excerpt.last().unwrap(), "---[ end Kernel panic - not syncing: dumptest ]---");
        assert_eq!(scan.last_begun(), Some((2, "fault/panic".to_string())));
        assert_eq!(f.pid, Some(58));
    }

    #[test]
    fn arm64_oops_then_panic() {
        let scan = check(ARM64_OOPS, &[(Oops, 27, Some(2), false), (Panic, 74, Some(2), false)]);
        let oops = &scan.findings[0];
        assert_eq!(
            oops.summary,
            "Unable to handle kernel NULL pointer dereference at virtual address 0000000000000000"
        );
        assert_eq!(oops.excerpt.len(), 47, "from the fault line through `end trace`, `Internal error` included");
        assert!(oops.excerpt.contains(
            &"[0000000000000000] pgd=0800000041c6f403, p4d=0800000041c6f403, pud=0000000000000000".to_string()
        ));
        assert!(oops.excerpt.contains(&"pc : lkdtm_ACCESS_NULL+0x2c/0x58".to_string()));
        assert_eq!((oops.pid, oops.comm.as_deref()), (Some(61), Some("ue-agent")));
        let panic = &scan.findings[1];
        assert_eq!(panic.summary, "Kernel panic - not syncing: Oops: Fatal exception");
        assert_eq!(panic.excerpt.len(), 6);
        assert_eq!((panic.pid, panic.taint_flags.as_deref()), (None, None), "no stack dump after an oops");
    }

    #[test]
    fn kasan_report_is_capped_and_ends_at_its_rule() {
        let scan = check(KASAN, &[(Kasan, 32, Some(3), true)]);
        let f = &scan.findings[0];
        assert_eq!(f.summary, "BUG: KASAN: slab-use-after-free in user_event_enabler_write+0x3a2/0x3f0");
        assert_eq!(f.excerpt.len(), MAX_EXCERPT);
        assert_eq!(f.excerpt[2], "", "blank report lines stay");
        assert_eq!((f.pid, f.comm.as_deref(), f.taint_flags.as_deref()), (Some(71), Some("ue-probe"), Some("")));
        assert_eq!(names(&scan)[2], (3, "abi/enable", 30, Some(113)));
    }

    #[test]
    fn hung_task_while_the_log_stops() {
        let scan = check(HUNG, &[(HungTask, 30, Some(2), false)]);
        let f = &scan.findings[0];
        assert_eq!(f.excerpt.len(), 24, "through `</TASK>`");
        assert_eq!((f.pid, f.comm.as_deref(), f.taint_flags.as_deref()), (Some(59), Some("ue-agent"), Some("")));
        assert_eq!(scan.last_begun(), Some((2, "fault/hung-task".to_string())));
    }

    #[test]
    fn truncated_oops_in_init() {
        let scan = check(TRUNCATED, &[(Oops, 29, Some(2), true)]);
        let f = &scan.findings[0];
        assert_eq!(f.excerpt.len(), 12);
        assert_eq!(f.excerpt[4], "Oops: Oops: 0000 [#1] PREEMPT SMP NOPTI", "the die line joins the fault report");
        assert_eq!(f.excerpt.last().unwrap(), "RDX: 00000000000");
        assert_eq!((f.pid, f.comm.as_deref()), (Some(1), Some("ue-agent")));
        assert_eq!(scan.last_begun(), Some((2, "abi/fork".to_string())));
    }

    #[test]
    fn ansi_escapes_and_crlf_are_normalised() {
        let scan = check(ANSI, &[(Warning, 15, Some(1), false)]);
        let f = &scan.findings[0];
        assert_eq!(f.excerpt[0], CUT_HERE, "the escapes before the cut-here line are gone");
        assert!(f.excerpt.iter().all(|l| !l.contains(['\r', '\x1b'])));
        assert_eq!(names(&scan), [(1, "fault/warn", 12, Some(56)), (2, "abi/register", 58, Some(59))]);
        assert_eq!(
            tail(ANSI, 3),
            [
                "  ok 2 abi/register (15 ms)",
                "[    0.481640] ue-agent: sentinel written, powering off",
                "[    0.493851] reboot: Power down"
            ]
        );
        assert_eq!(tail(ANSI, 1000).len(), 62, "the empty line the final escape leaves is dropped");
        assert_eq!(tail(ANSI, 1000)[0], "SeaBIOS (version 1.16.3-debian-1.16.3-2)");
    }

    #[test]
    fn x86_reports_with_caller_ids() {
        let scan = check(
            X86_REPORTS,
            &[
                (Bug, 10, Some(1), false),
                (RcuStall, 53, Some(1), false),
                (Kfence, 86, Some(2), false),
                (CutHere, 115, None, true),
            ],
        );
        let [lockup, rcu, kfence, cut] = &scan.findings[..] else { unreachable!() };
        assert_eq!(lockup.summary, "watchdog: BUG: soft lockup - CPU#1 stuck for 22s! [ue-agent:57]");
        assert_eq!((lockup.excerpt.len(), lockup.pid, lockup.taint_flags.as_deref()), (43, Some(57), Some("")));
        assert_eq!(
            rcu.excerpt[1],
            "rcu: \t1-....: (20999 ticks this GP) idle=b7c4/1/0x4000000000000000 softirq=1406/1406 fqs=5208"
        );
        assert_eq!(rcu.taint_flags.as_deref(), Some("G             L"));
        assert_eq!((kfence.excerpt.len(), kfence.pid, kfence.comm.as_deref()), (25, Some(60), Some("ue-probe")));
        assert_eq!(cut.excerpt, [CUT_HERE]);
        assert_eq!(scan.last_begun(), None);
    }

    #[test]
    fn arm64_reports_without_timestamps() {
        let scan = check(
            ARM64_REPORTS,
            &[
                (Lockdep, 15, Some(1), true),
                (Bug, 103, Some(2), false),
                (Ubsan, 144, Some(3), false),
                (Bug, 172, Some(4), false),
            ],
        );
        let [lockdep, bug, ubsan, sleep] = &scan.findings[..] else { unreachable!() };
        assert_eq!(lockdep.summary, "WARNING: possible circular locking dependency detected");
        assert_eq!(lockdep.excerpt.len(), MAX_EXCERPT);
        assert_eq!(
            (lockdep.pid, lockdep.comm.as_deref(), lockdep.taint_flags.as_deref()),
            (Some(64), Some("ue-probe"), Some("")),
            "read past the excerpt cap"
        );
        assert_eq!(bug.summary, "kernel BUG at drivers/misc/lkdtm/bugs.c:76!");
        assert_eq!((bug.excerpt.len(), bug.excerpt[0].as_str()), (36, CUT_HERE));
        assert_eq!(bug.excerpt[2], "Internal error: Oops - BUG: 00000000f2000800 [#1] PREEMPT SMP");
        assert_eq!(ubsan.summary, "UBSAN: array-index-out-of-bounds in drivers/misc/lkdtm/bugs.c:376:16");
        assert_eq!((ubsan.excerpt.len(), ubsan.taint_flags.as_deref()), (25, Some("G      D")));
        assert_eq!(ubsan.excerpt.last().unwrap(), "---[ end trace ]---");
        assert_eq!(
            (sleep.excerpt.len(), sleep.pid),
            (25, Some(67)),
            "the arm64 trace ends at the next unindented line"
        );
        assert_eq!(sleep.excerpt.last().unwrap(), " el0t_64_sync+0x190/0x198");
    }

    #[test]
    fn one_line_reports_are_classified() {
        let cases: &[(&str, Option<FindingKind>)] = &[
            ("[    1.000000] Kernel panic - not syncing: VFS: Unable to mount root fs", Some(Panic)),
            ("Oops: 0002 [#1] SMP", Some(Oops)),
            ("[    2.5] BUG: unable to handle page fault for address: ffffffffc0000000", Some(Oops)),
            (
                "Oops: general protection fault, probably for non-canonical address 0xdead000000000100: 0000 [#1]",
                Some(Oops),
            ),
            ("BUG: scheduling while atomic: ue-probe/70/0x00000002", Some(Bug)),
            ("BUG: KFENCE: use-after-free read in f+0x1/0x2", Some(Kfence)),
            ("BUG kmalloc-64 (Not tainted): Right Redzone overwritten", Some(Bug)),
            ("WARNING: inconsistent lock state", Some(Lockdep)),
            ("WARNING: suspicious RCU usage", Some(Lockdep)),
            ("rcu: INFO: rcu_sched detected stalls on CPUs/tasks:", Some(RcuStall)),
            ("INFO: task kworker/0:1:12 blocked for more than 120 seconds.", Some(HungTask)),
            ("lkdtm: FAIL: survived array bounds overflow!", None),
            ("ue-probe[58]: segfault at 0 ip 0000000000401a2c sp 00007ffd2c9e1e40 error 4", None),
            ("    BUG: indented text is not a report header", None),
        ];
        for (line, kind) in cases {
            let scan = scan(line);
            assert_eq!(scan.findings.first().map(|f| f.kind), *kind, "{line}");
        }
        let hung = scan("INFO: task kworker/0:1:12 blocked for more than 120 seconds.");
        assert_eq!((hung.findings[0].pid, hung.findings[0].comm.as_deref()), (Some(12), Some("kworker/0:1")));
    }

    #[test]
    fn cut_here_followed_by_unrelated_lines_stays_a_cut_here() {
        let log = "------------[ cut here ]------------\na\nb\nc\nd\ne\nf\nWARNING: CPU: 0 PID: 1 at x.c:1 f+0x1/0x2\n";
        let scan = scan(log);
        let kinds: Vec<_> = scan.findings.iter().map(|f| (f.kind, f.line)).collect();
        assert_eq!(kinds, [(CutHere, 1), (Warning, 8)]);
    }

    #[test]
    fn attribution_follows_begin_and_end() {
        let log = "\
BUG: scheduling while atomic: a/1/0x2
ue-agent: begin 1 a/b
BUG: scheduling while atomic: a/2/0x2
ue-agent: end 1
BUG: scheduling while atomic: a/3/0x2
ue-agent: begin 2 a/c
ue-agent: end 7
BUG: scheduling while atomic: a/4/0x2
ue-agent: begin 3 a/d
";
        let scan = scan(log);
        let got: Vec<_> = scan.findings.iter().map(|f| f.scenario.clone()).collect();
        assert_eq!(got, [None, Some((1, "a/b".into())), None, Some((2, "a/c".into()))], "a stray end closes nothing");
        assert_eq!(scan.last_begun(), Some((3, "a/d".to_string())));
    }

    #[test]
    fn timestamps_are_stripped() {
        assert_eq!(message("[    1.234567] hi"), "hi");
        assert_eq!(message("[   12.000001][    T1] hi"), "hi");
        assert_eq!(message("[0000000000000000] pgd=0"), "[0000000000000000] pgd=0");
        assert_eq!(message("no stamp"), "no stamp");
        assert_eq!(message("[    1.234567]"), "");
    }

    #[test]
    fn tail_of_short_and_empty_logs() {
        assert_eq!(tail("", 5), Vec::<String>::new());
        assert_eq!(tail("a\nb\n\n\n", 5), ["a", "b"]);
        assert_eq!(tail(PANIC, 2).last().unwrap(), "[    0.453398] ---[ end Kernel panic - not syncing: dumptest ]---");
    }
}
