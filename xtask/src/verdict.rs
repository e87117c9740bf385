//! One verdict per boot from the plan, the result channel, the console scan and how the VM
//! ended; every planned scenario is accounted for, with a reason when it has no result.
//! Sans-IO: the caller reads the logs and watches QEMU.

use std::collections::BTreeMap;

use protocol::Outcome;
use serde::Serialize;

use crate::console::{self, Finding, FindingKind, Scan};
use crate::ktap::Stream;

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
    /// A signal (SIGINT, SIGTERM, SIGHUP) stopped the run.
    Interrupted { after_ms: u64 },
    /// The boot could not go on (QEMU or virtiofsd failed on the host).
    InfraError(String),
}

impl HostEnd {
    /// What the judge makes of how QEMU ended.
    pub fn of(ended: &crate::qemu::Ended) -> HostEnd {
        use crate::qemu::{Ended, KillKind};
        match ended {
            Ended::Exited { code } => HostEnd::Exited { code: *code },
            Ended::Killed { reason, kind: KillKind::NoBoot, .. } => HostEnd::NoBoot { reason: reason.clone() },
            Ended::Killed { after_ms, kind: KillKind::Interrupted, .. } => HostEnd::Interrupted { after_ms: *after_ms },
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
    /// A signal stopped the run.
    Interrupted { scenario: Option<(usize, String)> },
    /// QEMU exited without a sentinel and without a panic on the console.
    Vanished { code: Option<i32>, scenario: Option<(usize, String)> },
}

impl Stop {
    fn scenario(&self) -> Option<usize> {
        match self {
            Stop::Crash { scenario, .. }
            | Stop::Hang { scenario, .. }
            | Stop::Abort { scenario, .. }
            | Stop::Interrupted { scenario }
            | Stop::Vanished { scenario, .. } => scenario.as_ref().map(|s| s.0),
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
    let not_run_reason = match (&stop, end) {
        (_, HostEnd::InfraError(e)) => format!("not run: {e}"),
        _ if boot_failure.is_some() => {
            format!("not run: the kernel did not boot: {}", boot_failure.as_deref().unwrap_or_default())
        }
        (Some(Stop::Interrupted { .. }), _) => "not run: the run was interrupted by a signal".to_string(),
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
    };
    let tail = console::tail(console, TAIL_LINES);

    let mut scenarios = Vec::new();
    for (i, name) in planned.iter().enumerate() {
        let index = i + 1;
        let record = stream.record(index);
        let running = stream.running.as_ref().is_some_and(|(i, _)| *i == index);
        let mut r = ScenarioResult {
            index,
            name: name.clone(),
            status: Status::NotRun,
            time_ms: record.map(|r| r.time_ms),
            taint_before: record.map_or(stream.running_taint.filter(|_| running), |r| r.taint_before),
            taint_after: record.map(|r| r.taint_after),
            diagnostics: match record {
                Some(r) => r.diagnostics.clone(),
                None if running => stream.running_diagnostics.clone(),
                None => Vec::new(),
            },
            findings: scan
                .findings
                .iter()
                .filter(|f| f.scenario.as_ref().is_some_and(|s| s.0 == index))
                .cloned()
                .collect(),
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
        let stopped_here = stop.as_ref().filter(|s| s.scenario() == Some(index));
        match stopped_here {
            Some(Stop::Crash { finding, .. }) => {
                r.status = Status::Crashed;
                r.diagnostics
                    .push(format!("the kernel crashed while this scenario ran (console line {})", finding.line));
                r.console_tail = tail.clone();
            }
            Some(Stop::Hang { after_ms, reason, .. }) if record.is_none() => {
                r.status = Status::Timeout;
                r.diagnostics
                    .push(format!("the VM hung while this scenario ran: {reason} (killed after {after_ms} ms)"));
                r.console_tail = tail.clone();
            }
            Some(Stop::Abort { reason, .. }) => {
                if record.is_none() {
                    r.status = Status::Timeout;
                }
                r.diagnostics.push(format!("the agent gave up the boot: {reason}"));
                r.console_tail = tail.clone();
            }
            Some(Stop::Interrupted { .. }) if record.is_none() => {
                r.diagnostics.push("interrupted by a signal while it ran".to_string());
                r.console_tail = tail.clone();
            }
            Some(Stop::Vanished { .. }) if record.is_none() => {
                r.status = Status::Crashed;
                r.diagnostics.push("the VM stopped while this scenario ran, with no panic on the console".to_string());
                r.console_tail = tail.clone();
            }
            _ if record.is_none() => {
                if stop.is_none() && stream.sentinel.is_some() {
                    problems
                        .push(format!("scenario {index} ({name}) has no result although the stream has its sentinel"));
                }
                r.diagnostics.push(not_run_reason.clone());
                r.console_tail = tail.clone();
            }
            _ => {}
        }
        let upgradable = matches!(r.status, Status::Pass | Status::Skip);
        for f in &r.findings {
            r.diagnostics.push(format!("kernel {}: see findings", f.describe().trim_start_matches("Kernel ")));
        }
        // A scenario that provokes a known kernel bug on purpose: its report (and the taint that
        // comes with it) is the expected outcome; any other report still fails it.
        let wanted = expect_report.get(name);
        let is_wanted = |f: &Finding| wanted.is_some_and(|w| f.summary.contains(w.as_str()));
        let expected_seen = r.findings.iter().any(is_wanted);
        if let Some(w) = wanted.filter(|_| r.status == Status::Pass) {
            if expected_seen {
                r.diagnostics.push(format!("the expected kernel report including {w:?} came"));
            } else {
                r.diagnostics.push(format!("expected a kernel report including {w:?}; none came during the scenario"));
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
        scenarios.push(r);
    }

    let findings: Vec<Finding> = scan
        .findings
        .iter()
        .filter(|f| f.scenario.as_ref().is_none_or(|s| s.0 == 0 || s.0 > planned.len()))
        .cloned()
        .collect();

    let mut verdict = BootVerdict::Pass;
    let mut raise = |v: BootVerdict| {
        if v.rank() > verdict.rank() {
            verdict = v;
        }
    };
    if !problems.is_empty() || !findings.is_empty() {
        raise(BootVerdict::Fail);
    }
    for r in &scenarios {
        match r.status {
            Status::Pass | Status::Skip => {}
            Status::Fail | Status::NotRun | Status::Crashed => raise(BootVerdict::Fail),
            Status::Timeout => raise(BootVerdict::Timeout),
        }
    }
    match &stop {
        Some(Stop::Crash { scenario, .. }) => {
            raise(BootVerdict::KernelPanic { scenario: scenario.as_ref().map(|s| s.1.clone()) })
        }
        Some(Stop::Hang { .. } | Stop::Abort { .. }) => raise(BootVerdict::Timeout),
        Some(Stop::Interrupted { .. }) => raise(BootVerdict::Interrupted),
        Some(Stop::Vanished { code, scenario }) => {
            let how = match code {
                Some(c) => format!("QEMU exited with code {c}"),
                None => "QEMU was killed by a signal".to_string(),
            };
            let when = match scenario {
                Some((i, n)) => format!("while scenario {i} ({n}) ran"),
                None => format!("after {} of {} results", stream.scenarios.len(), planned.len()),
            };
            let empty = if stream.header_seen { "" } else { "; the result channel was empty" };
            raise(BootVerdict::InfraError(format!("the agent ended without its sentinel: {how} {when}{empty}")));
        }
        None => {}
    }
    if let Some(why) = boot_failure {
        raise(BootVerdict::BootFailure(why));
    }
    if let HostEnd::InfraError(e) = end {
        raise(BootVerdict::InfraError(e.clone()));
    }

    BootResult { verdict, scenarios, findings, problems }
}

/// A scenario the suite expects to fail, as it turned out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Expected {
    /// It failed as expected: not a failure of the run.
    Xfail,
    /// It passed: the reason it was marked is gone, which is a failure until the mark goes.
    Xpass,
}

/// A boot's verdict once expected failures are counted, and each scenario's mark (parallel to
/// `result.scenarios`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WithXfail {
    pub verdict: BootVerdict,
    pub marks: Vec<Option<Expected>>,
}

/// Applies the suites' `xfail` marks (`suite/scenario` -> reason). Only an ordinary failure
/// is forgiven: a timeout, a crash, a kernel finding or a taint change in an xfail scenario is
/// still a failure, since the mark is about the ABI's answers, not about the kernel's health.
pub fn with_xfail(result: &BootResult, xfail: &BTreeMap<String, String>) -> WithXfail {
    let marks: Vec<Option<Expected>> = result
        .scenarios
        .iter()
        .map(|s| {
            if !xfail.contains_key(&s.name) {
                return None;
            }
            match s.status {
                Status::Pass => Some(Expected::Xpass),
                Status::Fail if s.findings.is_empty() && s.taint_before == s.taint_after => Some(Expected::Xfail),
                _ => None,
            }
        })
        .collect();
    let mut verdict = result.verdict.clone();
    let only_xfails_failed = result.problems.is_empty()
        && result.findings.is_empty()
        && result
            .scenarios
            .iter()
            .zip(&marks)
            .all(|(s, m)| matches!(s.status, Status::Pass | Status::Skip) || *m == Some(Expected::Xfail));
    if verdict == BootVerdict::Fail && only_xfails_failed {
        verdict = BootVerdict::Pass;
    }
    if verdict == BootVerdict::Pass && marks.contains(&Some(Expected::Xpass)) {
        verdict = BootVerdict::Fail;
    }
    WithXfail { verdict, marks }
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
    /// Judges a boot from its logs (the console and the result channel, as text), how QEMU ended
    /// and the plan's scenario names in order, with the suites' `xfail` and `expect_report`
    /// marks. The one way a boot is judged: live after its VM ends, and by `report --from`.
    pub fn of(
        planned: &[String],
        xfail: &BTreeMap<String, String>,
        expect_report: &BTreeMap<String, String>,
        console: &str,
        results: &str,
        ended: &crate::qemu::Ended,
    ) -> Judgement {
        let stream = crate::ktap::read(results);
        let end = HostEnd::of(ended);
        let result = decide(planned, expect_report, &stream, &console::scan(console), console, &end);
        let counted = with_xfail(&result, xfail);
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
    if console.contains(crate::qemu::BOOT_MARKER) || stream.header_seen || console.trim().is_empty() {
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
        HostEnd::Interrupted { .. } => Some(Stop::Interrupted { scenario: running }),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ktap;

    const PASS_LOG: &str = include_str!("../test_data/console/x86_64-pass.log");
    const FAIL_LOG: &str = include_str!("../test_data/console/x86_64-fail.log");
    const WARN_LOG: &str = include_str!("../test_data/console/x86_64-warn.log");
    const PANIC_LOG: &str = include_str!("../test_data/console/x86_64-panic.log");
    const ARM64_OOPS_LOG: &str = include_str!("../test_data/console/arm64-oops-panic.log");
    const KASAN_LOG: &str = include_str!("../test_data/console/x86_64-kasan.log");
    const HUNG_LOG: &str = include_str!("../test_data/console/x86_64-hung-task.log");
    const TRUNCATED_LOG: &str = include_str!("../test_data/console/x86_64-truncated.log");
    const PASS: &str = include_str!("../test_data/ktap/pass.ktap");
    const FAIL: &str = include_str!("../test_data/ktap/fail.ktap");
    const SKIP: &str = include_str!("../test_data/ktap/skip.ktap");
    const TIMEOUT: &str = include_str!("../test_data/ktap/timeout.ktap");
    const TRUNCATED: &str = include_str!("../test_data/ktap/truncated.ktap");
    const BAD_SENTINEL: &str = include_str!("../test_data/ktap/bad-sentinel.ktap");
    const WARN: &str = include_str!("../test_data/ktap/warn.ktap");
    // Captured from a real arm64 boot of the 6.12.117 kernel (`cargo xtask boot --plan`).
    const CAPTURED_FAULTS_LOG: &str = include_str!("../test_data/console/captured-arm64-faults.log");
    const CAPTURED_FAULTS: &str = include_str!("../test_data/ktap/captured-arm64-faults.ktap");

    const ABI: [&str; 3] = ["abi/register", "abi/write", "abi/enable"];
    const EXITED: HostEnd = HostEnd::Exited { code: Some(0) };

    fn plan(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    fn run(names: &[&str], ktap: &str, log: &str, end: &HostEnd) -> BootResult {
        decide(&plan(names), &BTreeMap::new(), &ktap::read(ktap), &console::scan(log), log, end)
    }

    /// Checks the verdict string and every scenario's status.
    fn check(result: &BootResult, verdict: &str, statuses: &[Status]) {
        let got: Vec<Status> = result.scenarios.iter().map(|r| r.status).collect();
        assert_eq!((result.verdict.as_str(), got.as_slice()), (verdict, statuses), "{result:#?}");
    }

    use Status::*;

    #[test]
    fn captured_arm64_fault_injection_boot() {
        let names = ["fault/ok-before", "fault/warn", "fault/hang", "fault/ok-after", "fault/panic", "fault/never"];
        let r = run(&names, CAPTURED_FAULTS, CAPTURED_FAULTS_LOG, &EXITED);
        check(&r, "kernel-panic", &[Pass, Fail, Timeout, Pass, Crashed, NotRun]);
        assert_eq!(r.verdict, BootVerdict::KernelPanic { scenario: Some("fault/panic".into()) });
        let warn = &r.scenarios[1].findings;
        assert_eq!(warn.len(), 1);
        assert_eq!(warn[0].kind, FindingKind::Warning);
        assert!(warn[0].summary.contains("drivers/misc/lkdtm/bugs.c"), "{}", warn[0].summary);
        assert_eq!(r.scenarios[2].time_ms, Some(3001));
        assert_eq!(r.scenarios[4].findings[0].kind, FindingKind::Panic);
        assert!(!r.scenarios[5].console_tail.is_empty());
        assert!(r.findings.is_empty() && r.problems.is_empty(), "{:?} {:?}", r.findings, r.problems);
    }

    #[test]
    fn clean_boot_passes() {
        let r = run(&ABI, PASS, PASS_LOG, &EXITED);
        check(&r, "pass", &[Pass, Pass, Pass]);
        assert!(r.problems.is_empty() && r.findings.is_empty());
        assert!(r.scenarios.iter().all(|s| s.console_tail.is_empty()));
        assert_eq!(r.scenarios[0].diagnostics, ["registered \"ue_test u32 count\" at write index 0"]);
        assert_eq!((r.scenarios[2].time_ms, r.scenarios[2].taint_after), (Some(18), Some(0)));
    }

    #[test]
    fn failing_scenario_fails_the_boot() {
        let r = run(&ABI, FAIL, FAIL_LOG, &EXITED);
        check(&r, "fail", &[Pass, Fail, Pass]);
        assert!(r.scenarios[1].findings.is_empty(), "a user segfault is not a kernel finding");
    }

    #[test]
    fn skip_passes_and_timeout_outcome_times_out() {
        check(&run(&ABI, SKIP, PASS_LOG, &EXITED), "pass", &[Pass, Pass, Skip]);
        check(&run(&ABI, TIMEOUT, PASS_LOG, &EXITED), "timeout", &[Pass, Timeout, Pass]);
    }

    #[test]
    fn warn_and_taint_turn_a_pass_into_a_fail() {
        let r = run(&ABI, WARN, WARN_LOG, &EXITED);
        check(&r, "fail", &[Pass, Fail, Pass]);
        let s = &r.scenarios[1];
        assert_eq!(s.findings.len(), 1);
        assert_eq!(
            s.diagnostics,
            [
                "kernel WARNING at kernel/trace/trace_events_user.c:2378 user_events_write_core+0x2c5/0x2f0: see findings",
                "taint changed 0 -> 512",
            ]
        );
        assert!(s.console_tail.is_empty());
        // Scenario 3 began tainted and stayed so: not its doing.
        assert!(r.scenarios[2].diagnostics.is_empty());

        // Either signal alone is enough.
        check(&run(&ABI, PASS, WARN_LOG, &EXITED), "fail", &[Pass, Fail, Pass]);
        check(&run(&ABI, WARN, PASS_LOG, &EXITED), "fail", &[Pass, Fail, Pass]);
    }

    #[test]
    fn kasan_fails_its_scenario() {
        let r = run(&ABI, PASS, KASAN_LOG, &EXITED);
        check(&r, "fail", &[Pass, Pass, Fail]);
        assert_eq!(
            r.scenarios[2].diagnostics,
            ["kernel BUG: KASAN: slab-use-after-free in user_event_enabler_write+0x3a2/0x3f0: see findings"]
        );
    }

    #[test]
    fn an_expected_report_passes_its_scenario_and_only_it() {
        let expect = |text: &str| BTreeMap::from([("abi/enable".to_string(), text.to_string())]);
        let with = |text: &str, log: &str| {
            decide(&plan(&ABI), &expect(text), &ktap::read(PASS), &console::scan(log), log, &EXITED)
        };
        let r = with("KASAN: slab-use-after-free", KASAN_LOG);
        check(&r, "pass", &[Pass, Pass, Pass]);
        assert_eq!(
            r.scenarios[2].diagnostics.last().unwrap(),
            "the expected kernel report including \"KASAN: slab-use-after-free\" came"
        );
        // Another report than the one expected still fails it.
        check(&with("KASAN: double-free", KASAN_LOG), "fail", &[Pass, Pass, Fail]);
        // No report at all: the bug did not fire, which is a failure to look at.
        let r = with("KASAN: slab-use-after-free", PASS_LOG);
        check(&r, "fail", &[Pass, Pass, Fail]);
        assert_eq!(
            r.scenarios[2].diagnostics,
            ["expected a kernel report including \"KASAN: slab-use-after-free\"; none came during the scenario"]
        );
    }

    #[test]
    fn lkdtm_panic_in_scenario_2_of_4() {
        let names = ["abi/register", "fault/panic", "abi/write", "abi/enable"];
        for end in [EXITED, HostEnd::WatchdogFired { after_ms: 30_000, reason: "r".into() }] {
            let r = run(&names, TRUNCATED, PANIC_LOG, &end);
            check(&r, "kernel-panic", &[Pass, Crashed, NotRun, NotRun]);
            assert_eq!(r.verdict, BootVerdict::KernelPanic { scenario: Some("fault/panic".to_string()) });
            let crashed = &r.scenarios[1];
            assert_eq!(
                crashed.diagnostics,
                [
                    "step 1: lkdtm PANIC via /sys/kernel/debug/provoke-crash/DIRECT",
                    "the kernel crashed while this scenario ran (console line 30)",
                    "kernel panic - not syncing: dumptest: see findings",
                ]
            );
            assert_eq!(crashed.console_tail.len(), TAIL_LINES);
            assert_eq!(
                crashed.console_tail.last().unwrap(),
                "[    0.453398] ---[ end Kernel panic - not syncing: dumptest ]---"
            );
            assert_eq!(r.scenarios[2].diagnostics, ["not run: the kernel crashed during scenario 2 (fault/panic)"]);
            assert_eq!(r.scenarios[3].console_tail, crashed.console_tail);
            assert!(r.scenarios[0].console_tail.is_empty());
            assert!(r.problems.is_empty(), "{:?}", r.problems);
        }
    }

    #[test]
    fn arm64_oops_then_panic() {
        let ktap = "KTAP version 1\n1..2\n# ue-begin 1 abi/register taint=0\nok 1 abi/register # time_ms=21 taint=0\n\
                    # ue-end 1 taint=0\n# ue-begin 2 fault/null-deref taint=0\n";
        let r = run(&["abi/register", "fault/null-deref"], ktap, ARM64_OOPS_LOG, &EXITED);
        check(&r, "kernel-panic", &[Pass, Crashed]);
        assert_eq!(r.verdict, BootVerdict::KernelPanic { scenario: Some("fault/null-deref".to_string()) });
        let kinds: Vec<_> = r.scenarios[1].findings.iter().map(|f| (f.kind, f.line)).collect();
        assert_eq!(kinds, [(FindingKind::Oops, 27), (FindingKind::Panic, 74)]);
    }

    #[test]
    fn hung_task_with_the_watchdog_is_a_timeout() {
        let names = ["abi/register", "fault/hung-task", "abi/enable"];
        let ktap = "KTAP version 1\n1..3\n# ue-begin 1 abi/register taint=0\nok 1 abi/register # time_ms=14 taint=0\n\
                    # ue-end 1 taint=0\n# ue-begin 2 fault/hung-task taint=0\n";
        let r = run(&names, ktap, HUNG_LOG, &HostEnd::WatchdogFired { after_ms: 60_000, reason: "r".into() });
        check(&r, "timeout", &[Pass, Timeout, NotRun]);
        let hung = &r.scenarios[1];
        assert_eq!(hung.findings[0].kind, FindingKind::HungTask);
        assert_eq!(
            hung.diagnostics,
            [
                "the VM hung while this scenario ran: r (killed after 60000 ms)",
                "kernel INFO: task ue-agent:59 blocked for more than 10 seconds.: see findings",
            ]
        );
        assert_eq!(hung.console_tail.last().unwrap(), "[   15.361267]  </TASK>");
        assert_eq!(r.scenarios[2].diagnostics, ["not run: the VM hung: r"]);

        // The console alone names the hung scenario when the Begin line never reached the host.
        let ktap = "KTAP version 1\n1..3\n# ue-begin 1 abi/register taint=0\nok 1 abi/register # time_ms=14 taint=0\n";
        let r = run(&names, ktap, HUNG_LOG, &HostEnd::WatchdogFired { after_ms: 60_000, reason: "r".into() });
        check(&r, "timeout", &[Pass, Timeout, NotRun]);
    }

    #[test]
    fn truncated_oops_in_init_is_a_kernel_panic() {
        let names = ["abi/register", "abi/fork", "abi/enable"];
        let ktap = "KTAP version 1\n1..3\n# ue-begin 1 abi/register taint=0\nok 1 abi/register # time_ms=14 taint=0\n\
                    # ue-end 1 taint=0\n# ue-begin 2 abi/fork taint=0\n";
        let r = run(&names, ktap, TRUNCATED_LOG, &HostEnd::WatchdogFired { after_ms: 60_000, reason: "r".into() });
        check(&r, "kernel-panic", &[Pass, Crashed, NotRun]);
        assert_eq!(r.verdict, BootVerdict::KernelPanic { scenario: Some("abi/fork".to_string()) });
        assert_eq!(r.scenarios[1].console_tail.last().unwrap(), "[    0.453447] RDX: 00000000000");
    }

    #[test]
    fn agent_gone_without_sentinel_is_an_infra_error() {
        let r = run(&ABI, &PASS[..PASS.find("# ue-begin 2").unwrap()], PASS_LOG, &HostEnd::Exited { code: Some(1) });
        check(&r, "infra-error", &[Pass, NotRun, NotRun]);
        assert_eq!(
            r.verdict,
            BootVerdict::InfraError(
                "the agent ended without its sentinel: QEMU exited with code 1 after 1 of 3 results".into()
            )
        );
        assert_eq!(r.scenarios[1].diagnostics, ["not run: the agent ended without its sentinel"]);

        let r = run(&ABI, "", "", &HostEnd::Exited { code: None });
        check(&r, "infra-error", &[NotRun, NotRun, NotRun]);
        assert_eq!(
            r.verdict.clone(),
            BootVerdict::InfraError(
                "the agent ended without its sentinel: QEMU was killed by a signal after 0 of 3 results; \
                 the result channel was empty"
                    .into()
            )
        );

        let ktap = &PASS[..PASS.find("ok 2").unwrap()];
        let r = run(&ABI, ktap, PASS_LOG, &EXITED);
        check(&r, "infra-error", &[Pass, Crashed, NotRun]);
    }

    #[test]
    fn a_stuck_scenario_ends_the_boot_with_its_timeout_and_the_rest_unrun() {
        let names = ["abi/register", "abi/stuck", "abi/enable"];
        let ktap = "KTAP version 1\n1..3\n# ue-begin 1 abi/register taint=0\nok 1 abi/register # time_ms=14 taint=0\n\
                    # ue-end 1 taint=0\n# ue-begin 2 abi/stuck taint=0\n\
                    # pid 80 (ue-agent) task 80: state D (disk sleep), wchan msleep\n\
                    not ok 2 abi/stuck # TIMEOUT time_ms=10002 taint=0\n# ue-end 2 taint=0\n\
                    # ue-abort after=2 pid 80 of scenario 2 is stuck in the kernel\n";
        let r = run(&names, ktap, PASS_LOG, &EXITED);
        check(&r, "timeout", &[Pass, Timeout, NotRun]);
        assert_eq!(r.scenarios[1].diagnostics[0], "pid 80 (ue-agent) task 80: state D (disk sleep), wchan msleep");
        assert_eq!(
            r.scenarios[2].diagnostics,
            ["not run: the agent gave up the boot after scenario 2: pid 80 of scenario 2 is stuck in the kernel"]
        );
        // The guard's abort comes while the scenario still runs.
        let ktap =
            "KTAP version 1\n1..3\n# ue-begin 1 abi/register taint=0\n# ue-abort after=0 the supervisor was blocked\n";
        let r = run(&names, ktap, PASS_LOG, &EXITED);
        check(&r, "timeout", &[Timeout, NotRun, NotRun]);
        assert_eq!(r.scenarios[0].diagnostics, ["the agent gave up the boot: the supervisor was blocked"]);
    }

    #[test]
    fn a_kernel_that_never_reaches_init_is_a_boot_failure() {
        let log = "[    0.1] Linux version 6.12\n[    0.5] Kernel panic - not syncing: No working init found.  Try passing init= option to kernel.\n";
        let r = run(&ABI, "", log, &EXITED);
        check(&r, "boot-failure", &[NotRun, NotRun, NotRun]);
        assert_eq!(
            r.verdict,
            BootVerdict::BootFailure(
                "Kernel panic - not syncing: No working init found.  Try passing init= option to kernel.".into()
            )
        );
        assert!(r.scenarios[0].diagnostics[0].starts_with("not run: the kernel did not boot: Kernel panic"));
        let r = run(&ABI, "", "[    0.1] Linux version 6.12\n", &HostEnd::NoBoot { reason: "no /init in 60 s".into() });
        assert_eq!(r.verdict, BootVerdict::BootFailure("no /init in 60 s".into()));
    }

    #[test]
    fn an_interrupted_boot_says_so() {
        let ktap = &PASS[..PASS.find("ok 2").unwrap()];
        let r = run(&ABI, ktap, PASS_LOG, &HostEnd::Interrupted { after_ms: 900 });
        check(&r, "interrupted", &[Pass, NotRun, NotRun]);
        assert_eq!(r.scenarios[1].diagnostics.last().unwrap(), "interrupted by a signal while it ran");
        assert_eq!(r.scenarios[2].diagnostics, ["not run: the run was interrupted by a signal"]);
    }

    #[test]
    fn host_infra_error_wins() {
        let r = run(&ABI, "", "", &HostEnd::InfraError("qemu-system-aarch64: not found".into()));
        check(&r, "infra-error", &[NotRun, NotRun, NotRun]);
        assert_eq!(r.scenarios[0].diagnostics, ["not run: qemu-system-aarch64: not found"]);
        // Even over a panic.
        let r = run(&ABI, TRUNCATED, PANIC_LOG, &HostEnd::InfraError("lost the result channel".into()));
        assert_eq!(r.verdict.as_str(), "infra-error");
    }

    #[test]
    fn plan_mismatch_and_bad_sentinel_fail() {
        let r = run(&["abi/register", "abi/read", "abi/enable"], PASS, PASS_LOG, &EXITED);
        check(&r, "fail", &[Pass, Pass, Pass]);
        assert_eq!(
            r.problems,
            [
                "the plan says scenario 2 is abi/read, the result channel says abi/write",
                "the plan says scenario 2 is abi/read, the console says abi/write",
            ]
        );
        let r = run(&ABI, BAD_SENTINEL, PASS_LOG, &EXITED);
        check(&r, "fail", &[Pass, Fail, Pass]);
        assert_eq!(r.problems.len(), 2);
        let r = run(&ABI[..2], PASS, PASS_LOG, &EXITED);
        assert_eq!(r.verdict.as_str(), "fail");
        assert_eq!(r.problems[0], "the plan has 2 scenarios, the result channel announced 3");
    }

    #[test]
    fn boot_findings_and_poweroff_hangs_fail() {
        let log = PASS_LOG.replacen(
            "[    0.236712] Serial",
            "[    0.200000] BUG: scheduling while atomic: swapper/0/1/0x00000002\n[    0.236712] Serial",
            1,
        );
        let r = run(&ABI, PASS, &log, &EXITED);
        check(&r, "fail", &[Pass, Pass, Pass]);
        assert_eq!(r.findings.len(), 1);
        assert_eq!(r.findings[0].scenario, None);

        let r = run(&ABI, PASS, PASS_LOG, &HostEnd::WatchdogFired { after_ms: 5, reason: "r".into() });
        check(&r, "fail", &[Pass, Pass, Pass]);
        assert_eq!(r.problems, ["the VM did not power off after the sentinel: the watchdog fired after 5 ms"]);
    }

    #[test]
    fn missing_result_with_sentinel_is_a_problem() {
        let ktap = PASS.replace("ok 3 abi/enable # time_ms=18 taint=0\n", "");
        let r = run(&ABI, &ktap, PASS_LOG, &EXITED);
        check(&r, "fail", &[Pass, Pass, NotRun]);
        assert!(r
            .problems
            .contains(&"scenario 3 (abi/enable) has no result although the stream has its sentinel".into()));
        assert_eq!(r.scenarios[2].console_tail.len(), TAIL_LINES.min(PASS_LOG.lines().count()));
    }

    #[test]
    fn xfail_forgives_plain_failures_and_xpass_fails() {
        let marked = |names: &[&str]| -> BTreeMap<String, String> {
            names.iter().map(|n| (n.to_string(), "known kernel bug".to_string())).collect()
        };
        let failing = run(&ABI, FAIL, FAIL_LOG, &EXITED);
        assert_eq!(failing.verdict, BootVerdict::Fail);

        let x = with_xfail(&failing, &marked(&[]));
        assert_eq!((x.verdict, x.marks), (BootVerdict::Fail, vec![None, None, None]), "no marks change nothing");

        let x = with_xfail(&failing, &marked(&["abi/write"]));
        assert_eq!((x.verdict, x.marks), (BootVerdict::Pass, vec![None, Some(Expected::Xfail), None]));

        let x = with_xfail(&failing, &marked(&["abi/write", "abi/register"]));
        assert_eq!(x.verdict, BootVerdict::Fail, "an xpass fails the boot");
        assert_eq!(x.marks, [Some(Expected::Xpass), Some(Expected::Xfail), None]);

        let x = with_xfail(&run(&ABI, PASS, PASS_LOG, &EXITED), &marked(&["abi/enable"]));
        assert_eq!((x.verdict, x.marks), (BootVerdict::Fail, vec![None, None, Some(Expected::Xpass)]));

        // A WARNING and a taint change are the kernel's health, which no mark excuses.
        let warned = run(&ABI, WARN, WARN_LOG, &EXITED);
        let x = with_xfail(&warned, &marked(&["abi/write"]));
        assert_eq!((x.verdict, x.marks), (BootVerdict::Fail, vec![None, None, None]));

        // Nor a timeout or a crash.
        let x = with_xfail(&run(&ABI, TIMEOUT, PASS_LOG, &EXITED), &marked(&["abi/write"]));
        assert_eq!((x.verdict, x.marks), (BootVerdict::Timeout, vec![None, None, None]));
        let names = ["abi/register", "fault/panic", "abi/write", "abi/enable"];
        let x = with_xfail(&run(&names, TRUNCATED, PANIC_LOG, &EXITED), &marked(&["fault/panic", "abi/write"]));
        assert_eq!(x.verdict.as_str(), "kernel-panic");
        assert_eq!(x.marks, [None, None, None, None]);

        // A boot-level problem stays a failure even when every failing scenario is marked.
        let mismatched = run(&ABI[..2], FAIL, FAIL_LOG, &EXITED);
        let x = with_xfail(&mismatched, &marked(&["abi/write"]));
        assert_eq!((x.verdict, x.marks), (BootVerdict::Fail, vec![None, Some(Expected::Xfail)]));
    }

    #[test]
    fn serializes_with_stable_names() {
        let r = run(&["abi/register", "fault/panic", "abi/write", "abi/enable"], TRUNCATED, PANIC_LOG, &EXITED);
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["verdict"], serde_json::json!({"kind": "kernel-panic", "detail": {"scenario": "fault/panic"}}));
        assert_eq!(json["scenarios"][1]["status"], "crashed");
        assert_eq!(json["scenarios"][2]["status"], "not-run");
        assert_eq!(json["scenarios"][1]["findings"][0]["kind"], "panic");
        assert_eq!(serde_json::to_value(BootVerdict::Pass).unwrap(), serde_json::json!({"kind": "pass"}));
        let statuses = [Pass, Fail, Skip, Timeout, NotRun, Crashed];
        for s in statuses {
            assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
        }
    }
}
