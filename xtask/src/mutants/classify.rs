//! A mutant's outcome from its build and the run of its covering scenarios (sans-IO): the
//! scenarios that failed and the evidence (the failing check's line, a kernel report, a hang),
//! a timeout when hangs are all there is, Survived when everything it ran passed; a run that
//! `--timeout` stopped with no scenario failed confirmed by a second run with twice the time
//! before it counts as Timeout, and the scenarios a Timeout's reason names.

use std::time::Duration;

use anyhow::Result;

use crate::mutants::report::Outcome;
use crate::results::model::{Run, Status};

/// The outcome of a mutant whose kernel built and ran `run` (the covering scenarios only).
pub fn classify(run: &Run) -> Outcome {
    let mut killed_by = Vec::new();
    let mut evidence = Vec::new();
    let mut timeouts = Vec::new();
    for arch in &run.arches {
        for s in arch.scenarios.iter().filter(|s| s.status.is_failure()) {
            let tag = format!("{} on {}", s.name, arch.arch);
            // A hang with no kernel report is a Timeout; with one (the task died holding a lock,
            // say), the report is the evidence. The blocked tasks the agent has the kernel list
            // (sysrq w) when a process will not die are the hang's own evidence, no report.
            let blocked = crate::judging::console::FindingKind::BlockedTasks.as_str();
            if s.judged.as_deref() == Some("timeout") && s.findings.iter().all(|f| f.kind == blocked) {
                timeouts.push(format!("{tag}: ran past its deadline"));
                continue;
            }
            if !killed_by.contains(&s.name) {
                killed_by.push(s.name.clone());
            }
            let why = if let Some(f) = s.findings.first() {
                format!("{}: {}", f.kind, f.summary)
            } else if s.status == Status::Xpass {
                "passed where it is expected to fail".to_string()
            } else if let Some(line) = s.failing_step(1).first() {
                line.to_string()
            } else {
                format!(
                    "{} ({})",
                    s.status.as_str(),
                    s.judged.as_deref().or(s.reason.as_deref()).unwrap_or("no detail")
                )
            };
            evidence.push(format!("{tag}: {why}"));
        }
        // A report outside any scenario (at boot, between scenarios) is the mutant's doing too.
        for boot in &arch.boots {
            if let Some(f) = boot.findings.first() {
                let by = format!("boot/{}", boot.name);
                if !killed_by.contains(&by) {
                    killed_by.push(by);
                }
                evidence.push(format!("{}: {}: {}", boot.name, f.kind, f.summary));
            }
        }
    }
    if !killed_by.is_empty() {
        evidence.extend(timeouts);
        return Outcome::Killed { by: killed_by, evidence: evidence.join("; ") };
    }
    if !timeouts.is_empty() {
        return Outcome::Timeout { reason: timeouts.join("; ") };
    }
    // Survived only when every covering scenario ran: a boot that an expected failure ended
    // (with --fail-fast nothing resumes it) leaves the rest untried.
    let not_run: Vec<&str> = run
        .arches
        .iter()
        .flat_map(|a| a.scenarios.iter().filter(|s| s.status == Status::Collateral))
        .map(|s| s.collateral_of.as_deref().unwrap_or("the boot's end"))
        .collect();
    if let Some(after) = not_run.first() {
        return Outcome::RuntimeError {
            reason: format!("{} covering scenario(s) never ran: the boot ended after {after}", not_run.len()),
        };
    }
    Outcome::Survived
}

/// How one run of a mutant's covering scenarios ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunEnd {
    /// It ended by itself, or a scenario had failed before `--timeout` stopped it: its outcome.
    Judged(Outcome),
    /// `--timeout` stopped it with no scenario failed; `evidence` holds what the judged run
    /// shows, each `SCENARIO on ARCH: what` (a scenario that ran past its deadline, the ones
    /// running when the time ran out).
    TimedOut { evidence: Vec<String> },
}

/// What a scenario running when `--timeout` stopped its run is said to be doing.
pub const RUNNING_AT_TIMEOUT: &str = "running when the time ran out";

/// How a run that `--timeout` stopped ended for the mutant. The stop leaves the scenario that
/// was running and those not started yet `not-run` in a boot judged `interrupted` (the running
/// one's log ends `... while it ran`): they are the clock's doing, not failures, so they are
/// left out before [`classify`]. Killed when what remains shows a failure or a kernel report,
/// else TimedOut, naming the hangs and the scenarios that were running.
pub fn timed_out(run: &Run) -> RunEnd {
    let mut rest = run.clone();
    let mut running = Vec::new();
    for arch in &mut rest.arches {
        let interrupted: Vec<String> =
            arch.boots.iter().filter(|b| b.verdict.kind == "interrupted").map(|b| b.name.clone()).collect();
        let name = arch.arch.clone();
        arch.scenarios.retain(|s| {
            let stopped = s.status == Status::NotRun && s.boot.as_ref().is_some_and(|b| interrupted.contains(b));
            if stopped && s.log.iter().any(|l| l.ends_with(" while it ran")) {
                running.push(format!("{} on {name}: {RUNNING_AT_TIMEOUT}", s.name));
            }
            !stopped
        });
    }
    match classify(&rest) {
        killed @ Outcome::Killed { .. } => RunEnd::Judged(killed),
        Outcome::Timeout { reason } => RunEnd::TimedOut { evidence: std::iter::once(reason).chain(running).collect() },
        _ => RunEnd::TimedOut { evidence: running },
    }
}

/// What a mutant's runs record, `--timeout` accounted for. A run that ended is judged as it
/// is. One that `timeout` stopped with no scenario failed may only have been slow (a loaded
/// host), so `again` runs it once more with twice the time (alone: the caller sees to it) and
/// that run's outcome is recorded: Killed, Survived, or, when it too is stopped, Timeout, its
/// reason naming both limits and what the judged run shows (the second run's evidence, else the
/// first's). Without a `timeout` there is no second run.
pub fn confirm_timeout(
    first: RunEnd,
    timeout: Option<Duration>,
    again: impl FnOnce(Duration) -> Result<RunEnd>,
) -> Result<Outcome> {
    let first = match first {
        RunEnd::Judged(outcome) => return Ok(outcome),
        RunEnd::TimedOut { evidence } => evidence,
    };
    let Some(timeout) = timeout else {
        let head = "the mutant's run passed its --timeout".to_string();
        return Ok(Outcome::Timeout { reason: std::iter::once(head).chain(first).collect::<Vec<_>>().join("; ") });
    };
    let longer = timeout * 2;
    let second = match again(longer)? {
        RunEnd::Judged(outcome) => return Ok(outcome),
        RunEnd::TimedOut { evidence } => evidence,
    };
    let head = format!("the run passed --timeout {} s, and again alone with {} s", timeout.as_secs(), longer.as_secs());
    let evidence = if second.is_empty() { first } else { second };
    Ok(Outcome::Timeout { reason: std::iter::once(head).chain(evidence).collect::<Vec<_>>().join("; ") })
}

/// The scenarios (`SCENARIO on ARCH`) a Timeout's reason names: the `; `-separated parts that
/// start `SCENARIO on ARCH: `, as [`classify`] and [`timed_out`] write them.
pub fn timeout_scenarios(reason: &str) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::new();
    for part in reason.split("; ") {
        let Some((tag, _)) = part.split_once(": ") else { continue };
        let Some((scenario, arch)) = tag.split_once(" on ") else { continue };
        let word = |w: &str| !w.is_empty() && !w.contains(char::is_whitespace);
        if word(scenario) && scenario.contains('/') && word(arch) && !out.contains(&tag) {
            out.push(tag);
        }
    }
    out
}

/// The outcome of a mutant whose kernel did not build: the compiler's first error line
/// (`file:line:col: error: ...`), else the first line that says `error:`.
pub fn compile_error(build_log: &str) -> Outcome {
    let line = build_log
        .lines()
        .find(|l| l.contains(": error:"))
        .or_else(|| build_log.lines().find(|l| l.contains("error:")))
        .or_else(|| build_log.lines().rev().find(|l| !l.trim().is_empty()))
        .unwrap_or("the build failed");
    Outcome::CompileError { reason: line.trim().to_string() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::model::Finding;

    /// The results fixture's run, its scenarios' statuses replaced.
    fn run(statuses: &[(Status, Option<&str>)]) -> Run {
        let mut run = crate::results::tests::fixture();
        run.arches.truncate(1);
        let arch = &mut run.arches[0];
        arch.boots.iter_mut().for_each(|b| b.findings.clear());
        arch.scenarios.truncate(statuses.len());
        assert_eq!(arch.scenarios.len(), statuses.len(), "the fixture has enough scenarios");
        for (s, (status, judged)) in arch.scenarios.iter_mut().zip(statuses) {
            s.status = *status;
            s.judged = judged.map(str::to_string);
            s.findings.clear();
            s.log = vec!["step 1: register: ok".into(), "step 2: write: -14 (expected 0)".into()];
        }
        run
    }

    /// A kernel report of `kind` at `console_line`, without its excerpt.
    fn finding(kind: &str, summary: &str, console_line: usize) -> Finding {
        Finding { kind: kind.into(), summary: summary.into(), console_line, ..Finding::default() }
    }

    #[test]
    fn outcomes_from_the_covering_scenarios_run() {
        assert_eq!(
            classify(&run(&[(Status::Pass, None), (Status::Skip, None), (Status::Xfail, None)])),
            Outcome::Survived
        );

        let r = run(&[(Status::Pass, None), (Status::Fail, None)]);
        let name = r.arches[0].scenarios[1].name.clone();
        let Outcome::Killed { by, evidence } = classify(&r) else { panic!() };
        assert_eq!(by, [name]);
        assert!(evidence.ends_with("step 2: write: -14 (expected 0)"), "{evidence}");

        let mut r = run(&[(Status::Error, Some("crashed"))]);
        r.arches[0].scenarios[0].findings.push(finding("oops", "BUG: kernel NULL pointer dereference", 7));
        let Outcome::Killed { evidence, .. } = classify(&r) else { panic!() };
        assert!(evidence.contains("oops: BUG: kernel NULL pointer dereference"), "{evidence}");

        let Outcome::Timeout { reason } = classify(&run(&[(Status::Fail, Some("timeout")), (Status::Pass, None)]))
        else {
            panic!()
        };
        assert!(reason.contains("ran past its deadline"));
        let Outcome::Killed { evidence, .. } = classify(&run(&[(Status::Fail, Some("timeout")), (Status::Fail, None)]))
        else {
            panic!("a failed check outranks a hang")
        };
        assert!(evidence.contains("deadline"));
        let mut r = run(&[(Status::Fail, Some("timeout"))]);
        r.arches[0].scenarios[0].findings.push(finding("oops", "Oops: general protection fault", 3));
        let Outcome::Killed { evidence, .. } = classify(&r) else { panic!("a hang with a kernel report is killed") };
        assert!(evidence.contains("oops: Oops: general protection fault"), "{evidence}");
        r.arches[0].scenarios[0].findings[0].kind = "blocked-tasks".into();
        assert!(matches!(classify(&r), Outcome::Timeout { .. }), "the agent's list of blocked tasks is no report");
        let mut r = run(&[(Status::Xfail, None), (Status::Collateral, None)]);
        r.arches[0].scenarios[1].collateral_of = Some("s/xfail".into());
        let Outcome::RuntimeError { reason } = classify(&r) else { panic!("untried scenarios are not survived") };
        assert!(reason.contains("1 covering scenario(s) never ran: the boot ended after s/xfail"), "{reason}");
        let Outcome::Killed { evidence, .. } = classify(&run(&[(Status::Xpass, None)])) else { panic!() };
        assert!(evidence.contains("expected to fail"));

        let mut r = run(&[(Status::Pass, None)]);
        r.arches[0].boots[0].findings.push(finding("kasan", "BUG: KASAN: slab-use-after-free", 9));
        let Outcome::Killed { by, .. } = classify(&r) else { panic!("a report outside the scenarios kills too") };
        assert!(by[0].starts_with("boot/"));
    }

    /// `run`'s scenarios in a boot that `--timeout` stopped: the one at `running` was running
    /// then, the ones after it not started.
    fn stopped(statuses: &[(Status, Option<&str>)], running: usize) -> Run {
        let mut r = run(statuses);
        let arch = &mut r.arches[0];
        arch.boots[0].verdict.kind = "interrupted".into();
        let boot = arch.boots[0].name.clone();
        for (i, s) in arch.scenarios.iter_mut().enumerate() {
            s.boot = Some(boot.clone());
            if i == running {
                s.log.push("the run's --timeout of 5m expired while it ran".into());
            }
        }
        r
    }

    #[test]
    fn a_run_the_timeout_stopped_is_killed_only_by_what_failed_before() {
        let r = stopped(&[(Status::Pass, None), (Status::NotRun, None), (Status::NotRun, None)], 1);
        let running = format!("{} on x86_64: {RUNNING_AT_TIMEOUT}", r.arches[0].scenarios[1].name);
        assert_eq!(timed_out(&r), RunEnd::TimedOut { evidence: vec![running.clone()] }, "not-run is the clock's doing");
        assert!(
            matches!(classify(&r), Outcome::Killed { .. }),
            "a run that ended by itself still counts a scenario left unrun"
        );

        let r = stopped(&[(Status::Fail, Some("timeout")), (Status::NotRun, None)], 1);
        let RunEnd::TimedOut { evidence } = timed_out(&r) else { panic!("a hang is no failure") };
        assert_eq!(evidence.len(), 2, "{evidence:?}");
        assert!(evidence[0].ends_with(": ran past its deadline") && evidence[1] == running, "{evidence:?}");

        let r = stopped(&[(Status::Fail, None), (Status::NotRun, None)], 1);
        assert!(matches!(timed_out(&r), RunEnd::Judged(Outcome::Killed { .. })), "a check failed before the stop");

        let mut r = stopped(&[(Status::Pass, None), (Status::NotRun, None)], 1);
        r.arches[0].boots[0].verdict.kind = "timeout".into();
        assert!(
            matches!(timed_out(&r), RunEnd::Judged(Outcome::Killed { .. })),
            "a not-run of a boot that was not interrupted is the mutant's"
        );
    }

    #[test]
    fn a_timeout_is_confirmed_by_a_second_run_with_twice_the_time() {
        let t = Some(Duration::from_secs(300));
        let first = || RunEnd::TimedOut { evidence: vec![format!("format/a on x86_64: {RUNNING_AT_TIMEOUT}")] };
        let never = |_: Duration| -> Result<RunEnd> { panic!("no second run") };
        let killed = Outcome::Killed { by: vec!["format/a".into()], evidence: "e".into() };

        // A run that ended is recorded as it is.
        assert_eq!(confirm_timeout(RunEnd::Judged(killed.clone()), t, never).unwrap(), killed);
        assert_eq!(confirm_timeout(RunEnd::Judged(Outcome::Survived), t, never).unwrap(), Outcome::Survived);

        // Stopped: the second run, with twice the time, decides.
        let mut asked = None;
        let again = |d: Duration| {
            asked = Some(d);
            Ok(RunEnd::Judged(Outcome::Survived))
        };
        assert_eq!(confirm_timeout(first(), t, again).unwrap(), Outcome::Survived, "slow, not detected");
        assert_eq!(asked, Some(Duration::from_secs(600)));
        let again = |_| Ok(RunEnd::Judged(killed.clone()));
        assert_eq!(confirm_timeout(first(), t, again).unwrap(), killed);

        // Stopped twice: Timeout, both limits and the scenario running named.
        let b = format!("format/b on x86_64: {RUNNING_AT_TIMEOUT}");
        let again = |_| Ok(RunEnd::TimedOut { evidence: vec![b.clone()] });
        let reason = "the run passed --timeout 300 s, and again alone with 600 s; \
                      format/b on x86_64: running when the time ran out";
        assert_eq!(confirm_timeout(first(), t, again).unwrap(), Outcome::Timeout { reason: reason.into() });
        let again = |_| Ok(RunEnd::TimedOut { evidence: vec![] });
        let Outcome::Timeout { reason } = confirm_timeout(first(), t, again).unwrap() else { panic!() };
        assert!(reason.ends_with("600 s; format/a on x86_64: running when the time ran out"), "{reason}");
        assert_eq!(timeout_scenarios(&reason), ["format/a on x86_64"]);

        // The second run's own failure is the run's error, not an outcome.
        assert!(confirm_timeout(first(), t, |_| anyhow::bail!("interrupted")).is_err());
        // No --timeout, no second run.
        let Outcome::Timeout { reason } = confirm_timeout(first(), None, never).unwrap() else { panic!() };
        assert!(reason.starts_with("the mutant's run passed its --timeout; format/a"), "{reason}");
    }

    #[test]
    fn a_timeouts_reason_names_its_scenarios() {
        let r = run(&[(Status::Fail, Some("timeout")), (Status::Fail, Some("timeout"))]);
        let names: Vec<String> = r.arches[0].scenarios.iter().map(|s| format!("{} on x86_64", s.name)).collect();
        let Outcome::Timeout { reason } = classify(&r) else { panic!() };
        assert_eq!(timeout_scenarios(&reason), names);
        assert_eq!(timeout_scenarios("the mutant's run passed --timeout 300 s"), Vec::<&str>::new());
        assert_eq!(
            timeout_scenarios("the run passed --timeout 300 s, and again alone with 600 s; a/b on arm64: ran past it"),
            ["a/b on arm64"]
        );
    }

    #[test]
    fn a_build_failure_names_the_first_compiler_error() {
        let log = "error: x86_64: the kernel build failed (make)\n  CC      kernel/trace/trace_events_user.o\nkernel/trace/trace_events_user.c:12:3: error: expected ';'\nmake: *** Error 1\n";
        assert_eq!(
            compile_error(log),
            Outcome::CompileError { reason: "kernel/trace/trace_events_user.c:12:3: error: expected ';'".into() }
        );
        assert_eq!(
            compile_error("make: *** Error 2\n\n"),
            Outcome::CompileError { reason: "make: *** Error 2".into() }
        );
    }
}
