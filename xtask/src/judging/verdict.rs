//! One verdict per boot from the plan, the result channel, the console scan and how the VM
//! ended; every planned scenario is accounted for, with a reason when it has no result.
//! Sans-IO: the caller reads the logs and watches QEMU.

use std::collections::BTreeMap;

use protocol::Outcome;
use serde::Serialize;

use crate::judging::channel::Stream;
use crate::judging::console::{self, Finding, FindingKind, Scan};

/// Console lines attached to scenarios that did not finish.
const TAIL_LINES: usize = 40;

/// How the VM ended, as the host saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostEnd {
    /// QEMU exited by itself (the guest powered off or rebooted, or QEMU died).
    Exited { code: Option<i32> },
    /// The host killed QEMU: the guest hung (the progress watchdog, or the whole-boot backstop).
    WatchdogFired { after_ms: u64, reason: String },
    /// The host killed QEMU: the kernel did not reach /init in time.
    NoBoot { reason: String },
    /// A signal (SIGINT, SIGTERM, SIGHUP) or `--timeout` stopped the run; `reason` says which
    /// (`interrupted by a signal`, `the run's --timeout of 20m expired`).
    Interrupted { after_ms: u64, reason: String },
    /// The boot could not go on (QEMU or virtiofsd failed on the host).
    InfraError(String),
}

impl HostEnd {
    /// What the judge makes of how QEMU ended.
    pub fn of(ended: &crate::vm::qemu::Ended) -> HostEnd {
        use crate::vm::qemu::{Ended, KillKind};
        match ended {
            Ended::Exited { code } => HostEnd::Exited { code: *code },
            Ended::Killed { reason, kind: KillKind::NoBoot, .. } => HostEnd::NoBoot { reason: reason.clone() },
            Ended::Killed { after_ms, reason, kind: KillKind::Interrupted } => {
                HostEnd::Interrupted { after_ms: *after_ms, reason: reason.clone() }
            }
            Ended::Killed { after_ms, reason, .. } => {
                HostEnd::WatchdogFired { after_ms: *after_ms, reason: reason.clone() }
            }
            Ended::Failed { error } => HostEnd::InfraError(error.clone()),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", content = "detail", rename_all = "kebab-case")]
pub enum BootVerdict {
    Pass,
    Fail,
    KernelPanic {
        scenario: Option<String>,
    },
    Timeout,
    /// The kernel never reached /init, and why.
    BootFailure(String),
    /// A signal stopped the run before the boot ended.
    Interrupted,
    InfraError(String),
}

impl BootVerdict {
    pub fn as_str(&self) -> &'static str {
        match self {
            BootVerdict::Pass => "pass",
            BootVerdict::Fail => "fail",
            BootVerdict::KernelPanic { .. } => "kernel-panic",
            BootVerdict::Timeout => "timeout",
            BootVerdict::BootFailure(_) => "boot-failure",
            BootVerdict::Interrupted => "interrupted",
            BootVerdict::InfraError(_) => "infra-error",
        }
    }

    /// Higher wins: infra-error > interrupted > boot-failure > kernel-panic > timeout > fail >
    /// pass.
    fn rank(&self) -> u8 {
        match self {
            BootVerdict::Pass => 0,
            BootVerdict::Fail => 1,
            BootVerdict::Timeout => 2,
            BootVerdict::KernelPanic { .. } => 3,
            BootVerdict::BootFailure(_) => 4,
            BootVerdict::Interrupted => 5,
            BootVerdict::InfraError(_) => 6,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    Pass,
    Fail,
    Skip,
    Timeout,
    NotRun,
    Crashed,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pass => "pass",
            Status::Fail => "fail",
            Status::Skip => "skip",
            Status::Timeout => "timeout",
            Status::NotRun => "not-run",
            Status::Crashed => "crashed",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ScenarioResult {
    /// 1-based, in plan order.
    pub index: usize,
    pub name: String,
    pub status: Status,
    /// `None` when the scenario has no result line.
    pub time_ms: Option<u64>,
    pub taint_before: Option<u64>,
    pub taint_after: Option<u64>,
    /// The scenario's own diagnostics, then the host's explanations.
    pub diagnostics: Vec<String>,
    /// Kernel reports attributed to this scenario.
    pub findings: Vec<Finding>,
    /// The end of the console log, for scenarios that did not finish.
    pub console_tail: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BootResult {
    pub verdict: BootVerdict,
    pub scenarios: Vec<ScenarioResult>,
    /// Kernel reports outside any planned scenario: boot, between scenarios, teardown.
    pub findings: Vec<Finding>,
    pub problems: Vec<String>,
}

/// Why the boot stopped early, if it did.
enum Stop {
    /// A panic, or an oops that killed init; the scenario it happened in, if any.
    Crash { finding: Finding, scenario: Option<(usize, String)> },
    /// The watchdog fired without a sentinel.
    Hang { after_ms: u64, reason: String, scenario: Option<(usize, String)> },
    /// The agent gave up the plan (`ue-abort`): a process stuck in the kernel, or the
    /// supervisor itself blocked while `scenario` ran.
    Abort { after: usize, reason: String, scenario: Option<(usize, String)> },
    /// A signal or `--timeout` stopped the run.
    Interrupted { reason: String, scenario: Option<(usize, String)> },
    /// QEMU exited without a sentinel and without a panic on the console.
    Vanished { code: Option<i32>, scenario: Option<(usize, String)> },
}

impl Stop {
    fn scenario(&self) -> Option<usize> {
        match self {
            Stop::Crash { scenario, .. }
            | Stop::Hang { scenario, .. }
            | Stop::Abort { scenario, .. }
            | Stop::Interrupted { scenario, .. }
            | Stop::Vanished { scenario, .. } => scenario.as_ref().map(|s| s.0),
        }
    }

    /// The boot's verdict for stopping this way, `planned` scenarios in the plan.
    fn verdict(&self, stream: &Stream, planned: usize) -> BootVerdict {
        match self {
            Stop::Crash { scenario, .. } => {
                BootVerdict::KernelPanic { scenario: scenario.as_ref().map(|s| s.1.clone()) }
            }
            Stop::Hang { .. } | Stop::Abort { .. } => BootVerdict::Timeout,
            Stop::Interrupted { .. } => BootVerdict::Interrupted,
            Stop::Vanished { code, scenario } => {
                let how = match code {
                    Some(c) => format!("QEMU exited with code {c}"),
                    None => "QEMU was killed by a signal".to_string(),
                };
                let when = match scenario {
                    Some((i, n)) => format!("while scenario {i} ({n}) ran"),
                    None => format!("after {} of {} results", stream.scenarios.len(), planned),
                };
                let empty = if stream.header_seen { "" } else { "; the result channel was empty" };
                BootVerdict::InfraError(format!("the agent ended without its sentinel: {how} {when}{empty}"))
            }
        }
    }
}

/// Decides the boot's verdict. `planned` holds the scenario names in plan order;
/// `expect_report` the scenarios that must provoke a kernel report including the given text.
pub fn decide(
    planned: &[String],
    expect_report: &BTreeMap<String, String>,
    stream: &Stream,
    scan: &Scan,
    console: &str,
    end: &HostEnd,
) -> BootResult {
    let mut problems = stream.problems.clone();
    check_names(planned, stream, scan, &mut problems);

    let boot_failure = boot_failure(stream, scan, console, end);
    let stop = if boot_failure.is_some() { None } else { stop(stream, scan, end) };
    if let (HostEnd::WatchdogFired { after_ms, .. }, Some(_)) = (end, &stream.sentinel) {
        problems.push(format!("the VM did not power off after the sentinel: the watchdog fired after {after_ms} ms"));
    }
    let ending = Ending {
        not_run_reason: not_run_reason(stop.as_ref(), end, boot_failure.as_deref()),
        tail: console::tail(console, TAIL_LINES),
        stop,
    };

    let mut scenarios = Vec::new();
    for (i, name) in planned.iter().enumerate() {
        let mut r = recorded(i + 1, name, stream, scan);
        ending.explain(&mut r, stream, &mut problems);
        judge_reports(&mut r, expect_report.get(name));
        scenarios.push(r);
    }

    let findings: Vec<Finding> = scan
        .findings
        .iter()
        .filter(|f| f.scenario.as_ref().is_none_or(|s| s.0 == 0 || s.0 > planned.len()))
        .cloned()
        .collect();
    let flagged = !problems.is_empty() || !findings.is_empty();
    let stopped = ending.stop.as_ref().map(|s| s.verdict(stream, planned.len()));
    let verdict = boot_verdict(flagged, &scenarios, stopped, boot_failure, end);
    BootResult { verdict, scenarios, findings, problems }
}

/// Why the scenarios without a result did not run, from how the boot ended.
fn not_run_reason(stop: Option<&Stop>, end: &HostEnd, boot_failure: Option<&str>) -> String {
    match (stop, end) {
        (_, HostEnd::InfraError(e)) => format!("not run: {e}"),
        _ if boot_failure.is_some() => {
            format!("not run: the kernel did not boot: {}", boot_failure.unwrap_or_default())
        }
        (Some(Stop::Interrupted { reason, .. }), _) if reason.starts_with("interrupted") => {
            format!("not run: the run was {reason}")
        }
        (Some(Stop::Interrupted { reason, .. }), _) => format!("not run: {reason}"),
        (Some(Stop::Abort { after, reason, .. }), _) => {
            format!("not run: the agent gave up the boot after scenario {after}: {reason}")
        }
        (Some(Stop::Crash { scenario: Some((i, n)), .. }), _) => {
            format!("not run: the kernel crashed during scenario {i} ({n})")
        }
        (Some(Stop::Crash { .. }), _) => "not run: the kernel crashed outside any scenario".to_string(),
        (Some(Stop::Hang { reason, .. }), _) => format!("not run: the VM hung: {reason}"),
        (Some(Stop::Vanished { .. }), _) => "not run: the agent ended without its sentinel".to_string(),
        (None, _) => "not run: the result channel has no result for it".to_string(),
    }
}

/// Scenario `index` as the result channel and the console scan recorded it: its result line's
/// outcome, times, taints and diagnostics (those so far if it was running), its findings.
fn recorded(index: usize, name: &str, stream: &Stream, scan: &Scan) -> ScenarioResult {
    let record = stream.record(index);
    let running = stream.running.as_ref().is_some_and(|(i, _)| *i == index);
    let mut r = ScenarioResult {
        index,
        name: name.to_string(),
        status: Status::NotRun,
        time_ms: record.map(|r| r.time_ms),
        taint_before: record.map_or(stream.running_taint.filter(|_| running), |r| r.taint_before),
        taint_after: record.map(|r| r.taint_after),
        diagnostics: match record {
            Some(r) => r.diagnostics.clone(),
            None if running => stream.running_diagnostics.clone(),
            None => Vec::new(),
        },
        findings: scan.findings.iter().filter(|f| f.scenario.as_ref().is_some_and(|s| s.0 == index)).cloned().collect(),
        console_tail: Vec::new(),
    };
    if let Some(rec) = record {
        r.status = match rec.outcome {
            Outcome::Pass => Status::Pass,
            Outcome::Fail => Status::Fail,
            Outcome::Skip => Status::Skip,
            Outcome::Timeout => Status::Timeout,
        };
    }
    r
}

/// How the boot ended, as each scenario's result is explained by it.
struct Ending {
    stop: Option<Stop>,
    /// Said of a scenario without a result that the stop does not explain.
    not_run_reason: String,
    /// The end of the console log, for scenarios that did not finish.
    tail: Vec<String>,
}

impl Ending {
    /// The boot's stop, when it happened during this scenario or left it without a result:
    /// its status and the host's explanation. A scenario missing from a stream that has its
    /// sentinel is a problem of the stream.
    fn explain(&self, r: &mut ScenarioResult, stream: &Stream, problems: &mut Vec<String>) {
        let (index, name) = (r.index, &r.name);
        let no_record = stream.record(index).is_none();
        let stopped_here = self.stop.as_ref().filter(|s| s.scenario() == Some(index));
        match stopped_here {
            Some(Stop::Crash { finding, .. }) => {
                r.status = Status::Crashed;
                r.diagnostics
                    .push(format!("the kernel crashed while this scenario ran (console line {})", finding.line));
                r.console_tail = self.tail.clone();
            }
            Some(Stop::Hang { after_ms, reason, .. }) if no_record => {
                r.status = Status::Timeout;
                r.diagnostics
                    .push(format!("the VM hung while this scenario ran: {reason} (killed after {after_ms} ms)"));
                r.console_tail = self.tail.clone();
            }
            Some(Stop::Abort { reason, .. }) => {
                if no_record {
                    r.status = Status::Timeout;
                }
                r.diagnostics.push(format!("the agent gave up the boot: {reason}"));
                r.console_tail = self.tail.clone();
            }
            Some(Stop::Interrupted { reason, .. }) if no_record => {
                r.diagnostics.push(format!("{reason} while it ran"));
                r.console_tail = self.tail.clone();
            }
            Some(Stop::Vanished { .. }) if no_record => {
                r.status = Status::Crashed;
                r.diagnostics.push("the VM stopped while this scenario ran, with no panic on the console".to_string());
                r.console_tail = self.tail.clone();
            }
            _ if no_record => {
                if self.stop.is_none() && stream.sentinel.is_some() {
                    problems
                        .push(format!("scenario {index} ({name}) has no result although the stream has its sentinel"));
                }
                r.diagnostics.push(self.not_run_reason.clone());
                r.console_tail = self.tail.clone();
            }
            _ => {}
        }
    }
}

/// The kernel's reports during a scenario, and its taint: each report named, the report it
/// must provoke (`wanted`, from `expect_report`) looked for; a pass or skip fails on a report
/// or a taint change it did not want.
fn judge_reports(r: &mut ScenarioResult, wanted: Option<&String>) {
    let upgradable = matches!(r.status, Status::Pass | Status::Skip);
    for f in &r.findings {
        r.diagnostics.push(format!("kernel {}: see findings", f.describe().trim_start_matches("Kernel ")));
    }
    // A scenario that provokes a known kernel bug on purpose: its report (and the taint that
    // comes with it) is the expected outcome; any other report still fails it.
    let is_wanted = |f: &Finding| wanted.is_some_and(|w| f.summary.contains(w.as_str()));
    let expected_seen = r.findings.iter().any(is_wanted);
    if let Some(w) = wanted.filter(|_| r.status == Status::Pass) {
        if expected_seen {
            r.diagnostics.push(format!("the expected kernel report including `{w}` came"));
        } else {
            r.diagnostics.push(format!("expected a kernel report including `{w}`; none came during the scenario"));
            r.status = Status::Fail;
        }
    }
    if let (Some(before), Some(after)) = (r.taint_before, r.taint_after) {
        if before != after {
            r.diagnostics.push(format!("taint changed {before} -> {after}"));
            if upgradable && !expected_seen {
                r.status = Status::Fail;
            }
        }
    }
    if upgradable && r.findings.iter().any(|f| !is_wanted(f)) {
        r.status = Status::Fail;
    }
}

/// The boot's verdict: the worst of a problem or a finding outside the scenarios (`flagged`),
/// each scenario's status, the early stop's verdict, a boot failure and an infrastructure
/// error, the first of equal rank kept.
fn boot_verdict(
    flagged: bool,
    scenarios: &[ScenarioResult],
    stopped: Option<BootVerdict>,
    boot_failure: Option<String>,
    end: &HostEnd,
) -> BootVerdict {
    let mut verdict = BootVerdict::Pass;
    let mut raise = |v: BootVerdict| {
        if v.rank() > verdict.rank() {
            verdict = v;
        }
    };
    if flagged {
        raise(BootVerdict::Fail);
    }
    for r in scenarios {
        match r.status {
            Status::Pass | Status::Skip => {}
            Status::Fail | Status::NotRun | Status::Crashed => raise(BootVerdict::Fail),
            Status::Timeout => raise(BootVerdict::Timeout),
        }
    }
    if let Some(v) = stopped {
        raise(v);
    }
    if let Some(why) = boot_failure {
        raise(BootVerdict::BootFailure(why));
    }
    if let HostEnd::InfraError(e) = end {
        raise(BootVerdict::InfraError(e.clone()));
    }
    verdict
}

/// A boot judged: the result channel as read, the verdict with every scenario's status, and the
/// same with the suites' expected failures counted.
#[derive(Debug, Clone)]
pub struct Judgement {
    pub stream: Stream,
    pub result: BootResult,
    /// The verdict that sets the exit code, and each scenario's xfail mark.
    pub counted: WithXfail,
}

impl Judgement {
    /// Judges a boot from its logs (the console as text, the result channel folded), how QEMU
    /// ended and the plan's scenario names in order, with the suites' `xfail` and
    /// `expect_report` marks. The one way a boot is judged: live after its VM ends, and by
    /// `report --from`.
    pub fn of(
        planned: &[String],
        marks: &XfailMarks,
        console: &str,
        stream: Stream,
        ended: &crate::vm::qemu::Ended,
    ) -> Judgement {
        let end = HostEnd::of(ended);
        let result = decide(planned, marks.expect_report, &stream, &console::scan(console), console, &end);
        let counted = with_xfail(&result, marks.xfail, marks.fixed_by, marks.intermittent);
        Judgement { stream, result, counted }
    }
}

/// Why the kernel never reached /init, when it did not: the host's boot timeout, or the console
/// (a panic before init, "No working init found") with no `Run /init` line and nothing on the
/// result channel. An empty console is QEMU's failure, not the kernel's.
fn boot_failure(stream: &Stream, scan: &Scan, console: &str, end: &HostEnd) -> Option<String> {
    match end {
        HostEnd::NoBoot { reason } => return Some(reason.clone()),
        HostEnd::Interrupted { .. } | HostEnd::InfraError(_) => return None,
        HostEnd::Exited { .. } | HostEnd::WatchdogFired { .. } => {}
    }
    if console.contains(crate::vm::qemu::BOOT_MARKER) || stream.header_seen || console.trim().is_empty() {
        return None;
    }
    Some(match scan.findings.iter().find(|f| f.kind == FindingKind::Panic) {
        Some(panic) => panic.summary.clone(),
        None => match end {
            HostEnd::Exited { code: Some(c) } => format!("QEMU exited (code {c}) before the kernel reached /init"),
            _ => "the VM ended before the kernel reached /init".to_string(),
        },
    })
}

fn stop(stream: &Stream, scan: &Scan, end: &HostEnd) -> Option<Stop> {
    let no_sentinel = stream.sentinel.is_none();
    // An oops in init is fatal ("Attempted to kill init!"), even when the log stops before the
    // panic line.
    let crash = scan
        .findings
        .iter()
        .find(|f| f.kind == FindingKind::Panic || (no_sentinel && f.kind == FindingKind::Oops && f.pid == Some(1)));
    if let Some(f) = crash {
        let scenario = f.scenario.clone().or_else(|| stream.running.clone());
        return Some(Stop::Crash { finding: f.clone(), scenario });
    }
    if !no_sentinel {
        return None;
    }
    // The result channel knows best what ran; the console fills in when the Begin line was lost.
    let running = stream.running.clone().or_else(|| scan.last_begun().filter(|(i, _)| stream.record(*i).is_none()));
    if let Some((after, reason)) = &stream.aborted {
        // A stuck scenario has its result and is named by `after`; a guard's abort comes while
        // the scenario runs.
        let scenario = running.or_else(|| stream.record(*after).map(|r| (r.index, r.name.clone())));
        return Some(Stop::Abort { after: *after, reason: reason.clone(), scenario });
    }
    match end {
        HostEnd::WatchdogFired { after_ms, reason } => {
            Some(Stop::Hang { after_ms: *after_ms, reason: reason.clone(), scenario: running })
        }
        HostEnd::Interrupted { reason, .. } => Some(Stop::Interrupted { reason: reason.clone(), scenario: running }),
        HostEnd::Exited { code } => Some(Stop::Vanished { code: *code, scenario: running }),
        HostEnd::NoBoot { .. } | HostEnd::InfraError(_) => None,
    }
}

fn check_names(planned: &[String], stream: &Stream, scan: &Scan, problems: &mut Vec<String>) {
    if let Some(n) = stream.plan {
        if n != planned.len() {
            problems.push(format!("the plan has {} scenarios, the result channel announced {n}", planned.len()));
        }
    }
    let seen = stream
        .scenarios
        .iter()
        .map(|r| ("result channel", r.index, &r.name))
        .chain(stream.running.iter().map(|(i, n)| ("result channel", *i, n)))
        .chain(scan.timeline.iter().map(|s| ("console", s.index, &s.name)));
    for (source, index, name) in seen {
        match index.checked_sub(1).and_then(|i| planned.get(i)) {
            Some(p) if p == name => {}
            Some(p) => problems.push(format!("the plan says scenario {index} is {p}, the {source} says {name}")),
            None => problems.push(format!("the {source} has scenario {index} ({name}), which is not in the plan")),
        }
    }
}

mod xfail;

pub use xfail::{with_xfail, Expected, WithXfail, XfailMarks};

#[cfg(test)]
mod tests;
