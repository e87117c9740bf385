//! A mutant's outcome from its build and the run of its covering scenarios (sans-IO): the
//! scenarios that failed and the evidence (the failing check's line, a kernel report, a hang),
//! a timeout when hangs are all there is, Survived when everything it ran passed.

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
        Finding { kind: kind.into(), summary: summary.into(), console_line, excerpt: vec![], truncated: false }
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
