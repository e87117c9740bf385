//! The gate's use of the history (sans-IO): which failures of a run are run again in a fresh
//! boot before they gate (those whose cell `classify` finds `unstable`: this very kernel's
//! window, this failure counted, flips both ways; never when a boot broke or the kernel reported in the
//! scenario), what each becomes after that re-run (`unstable` when it passed there, else
//! `regression`), and the run's exit code from them.

use std::collections::{BTreeMap, BTreeSet};

use super::classify::{failed, flips, Class, Classed};
use crate::results::model::{Rechecked, Run, Status};
use crate::support::exit::Kind;

/// A failure of the run classified whose history flips: one to run again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Suspect {
    pub arch: String,
    pub scenario: String,
    /// Its flips in the window, this failure counted.
    pub flips: usize,
    /// The outcomes of the window with a verdict, this one counted.
    pub runs: usize,
}

/// The failures (arch, scenario) of `run` that a re-run may forgive: none when one of its boots
/// broke (a panic, a hang, a boot that failed, an infrastructure error, kernel reports or
/// problems outside the scenarios), else each failed scenario without kernel reports of its
/// own.
pub fn forgivable(run: &Run) -> BTreeSet<(String, String)> {
    if !sound(run) {
        return BTreeSet::new();
    }
    run.arches
        .iter()
        .flat_map(|a| {
            let failed = a.scenarios.iter().filter(|s| s.status.is_failure() && s.findings.is_empty());
            failed.map(|s| (a.arch.clone(), s.name.clone()))
        })
        .collect()
}

/// Whether every boot of `run` ended sound: its verdict `pass` or `fail` (no panic, hang,
/// boot failure or infrastructure error), nothing reported outside its scenarios.
pub fn sound(run: &Run) -> bool {
    let mut boots = run.arches.iter().flat_map(|a| &a.boots);
    boots.all(|b| matches!(b.verdict.kind.as_str(), "pass" | "fail") && b.health().0 == Status::Pass)
}

/// The failures of the run `classed` (its cells, from `classify`) whose cell is `unstable`,
/// of those `forgivable` lets a re-run forgive. A failure with no flips both ways is not among
/// them: it gates at once.
pub fn suspects(classed: &[Classed], forgivable: &BTreeSet<(String, String)>) -> Vec<Suspect> {
    classed
        .iter()
        .filter(|c| c.class == Class::Unstable && c.status.as_deref().and_then(failed) == Some(true))
        .filter(|c| forgivable.contains(&(c.arch.clone(), c.scenario.clone())))
        .map(|c| {
            let (down, up) = flips(&c.same_kernel);
            Suspect { arch: c.arch.clone(), scenario: c.scenario.clone(), flips: down + up, runs: c.same_kernel.len() }
        })
        .collect()
}

/// Each suspect after its re-run, from the re-run's statuses by (arch, scenario): `unstable`
/// when it passed there (`pass`, `xfail`, `fixed`), else `regression` (failed again, skipped,
/// or absent, said `not-run`).
pub fn decide(suspects: &[Suspect], rerun: &BTreeMap<(String, String), String>) -> Vec<Rechecked> {
    suspects
        .iter()
        .map(|s| {
            let status = rerun.get(&(s.arch.clone(), s.scenario.clone())).cloned().unwrap_or_else(|| "not-run".into());
            let class = if failed(&status) == Some(false) { Class::Unstable } else { Class::Regression };
            Rechecked {
                arch: s.arch.clone(),
                scenario: s.scenario.clone(),
                flips: s.flips,
                runs: s.runs,
                rerun_status: status,
                class: class.as_str().into(),
            }
        })
        .collect()
}

/// The run's exit code once its suspects were re-run: 0 when the run failed only by its
/// scenarios (`code` is a test failure) and every failure (arch, scenario) is one that passed
/// on its re-run; else `code` as it was.
pub fn code(code: u8, failures: &[(String, String)], rechecked: &[Rechecked]) -> u8 {
    let forgiven = |(arch, scenario): &(String, String)| {
        rechecked.iter().any(|r| !r.gates() && &r.arch == arch && &r.scenario == scenario)
    };
    if code == Kind::TestFailed.code() && !failures.is_empty() && failures.iter().all(forgiven) {
        0
    } else {
        code
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::classify::classify;
    use crate::history::rows::KernelId;
    use crate::history::store::Outcome;

    /// The outcomes of runs r1.. of x86_64 cells, each run a list of (scenario, status).
    fn history(runs: &[&[(&str, &str)]]) -> Vec<Outcome> {
        let kernel = KernelId {
            release: "6.12".into(),
            source: "src".into(),
            source_id: "id".into(),
            patches: String::new(),
            config_hash: "cfg".into(),
            profile: "default".into(),
        };
        let mut out = Vec::new();
        for (n, run) in runs.iter().enumerate() {
            for (scenario, status) in *run {
                out.push(Outcome {
                    run_id: format!("r{}", n + 1),
                    host: "h".into(),
                    started_at: format!("2026-01-01T00:00:{:02}Z", n + 1),
                    scenario: (*scenario).into(),
                    arch: "x86_64".into(),
                    kernel: kernel.clone(),
                    build_key: None,
                    status: (*status).into(),
                    duration_ms: Some(10),
                    reason: None,
                });
            }
        }
        out
    }

    fn suspects_of(runs: &[&[(&str, &str)]]) -> Vec<Suspect> {
        let last = format!("r{}", runs.len());
        let all = runs.last().unwrap().iter().map(|(n, _)| ("x86_64".to_string(), n.to_string())).collect();
        suspects(&classify(&history(runs), &last, "h", 10), &all)
    }

    fn failures(names: &[&str]) -> Vec<(String, String)> {
        names.iter().map(|n| ("x86_64".to_string(), n.to_string())).collect()
    }

    #[test]
    fn only_failures_whose_history_flips_both_ways_are_rerun() {
        let got = suspects_of(&[
            &[("a/flaky", "fail"), ("a/broke", "pass"), ("a/always", "fail"), ("a/ok", "fail")],
            &[("a/flaky", "pass"), ("a/broke", "pass"), ("a/always", "fail"), ("a/ok", "pass")],
            &[("a/flaky", "fail"), ("a/broke", "fail"), ("a/always", "fail"), ("a/ok", "pass")],
        ]);
        let want = Suspect { arch: "x86_64".into(), scenario: "a/flaky".into(), flips: 2, runs: 3 };
        assert_eq!(got, [want], "a new regression and a persistent failure gate at once; a pass is no suspect");
        assert!(suspects_of(&[&[("a/new", "fail")]]).is_empty(), "no history: no re-run");
        let beyond = suspects_of(&[
            &[("a/b", "pass")],
            &[("a/b", "fail")],
            &[("a/b", "pass")],
            &[("a/b", "pass")],
            &[("a/b", "pass")],
            &[("a/b", "pass")],
            &[("a/b", "pass")],
            &[("a/b", "pass")],
            &[("a/b", "pass")],
            &[("a/b", "pass")],
            &[("a/b", "pass")],
            &[("a/b", "fail")],
        ]);
        assert!(beyond.is_empty(), "flips older than the window are not looked at");
    }

    #[test]
    fn a_rerun_that_passes_is_unstable_and_does_not_gate() {
        let s = suspects_of(&[&[("a/f", "pass")], &[("a/f", "fail")], &[("a/f", "pass")], &[("a/f", "fail")]]);
        assert_eq!((s[0].flips, s[0].runs), (3, 4));
        let passed = decide(&s, &[(("x86_64".into(), "a/f".into()), "pass".into())].into());
        assert_eq!((passed[0].class.as_str(), passed[0].gates()), ("unstable", false));
        assert_eq!(code(1, &failures(&["a/f"]), &passed), 0, "nothing else failed");
        assert_eq!(code(1, &failures(&["a/f", "a/g"]), &passed), 1, "another failure gates");
        assert_eq!(code(2, &failures(&["a/f"]), &passed), 2, "a broken boot or timeout is not forgiven");
        assert!(passed[0].describe().contains("flips 3 time(s) in 4 run(s)"), "{}", passed[0].describe());
    }

    #[test]
    fn a_rerun_that_fails_or_is_missing_is_a_regression() {
        let s = suspects_of(&[&[("a/f", "fail")], &[("a/f", "pass")], &[("a/f", "fail")]]);
        for rerun in [Some("fail"), Some("skip"), Some("error"), None] {
            let statuses = rerun.map(|r| (("x86_64".to_string(), "a/f".to_string()), r.to_string())).into_iter();
            let got = decide(&s, &statuses.collect());
            assert_eq!((got[0].class.as_str(), got[0].gates()), ("regression", true), "{rerun:?}");
            assert_eq!(got[0].rerun_status, rerun.unwrap_or("not-run"));
            assert_eq!(code(1, &failures(&["a/f"]), &got), 1);
        }
    }

    #[test]
    fn without_a_rerun_the_code_is_as_it_was() {
        // `--history off` or `--no-rerun-unstable`: no suspects, nothing re-run.
        assert_eq!(code(1, &failures(&["a/f"]), &[]), 1);
        assert_eq!(code(0, &[], &[]), 0);
        assert!(suspects(&[], &BTreeSet::new()).is_empty());
    }

    #[test]
    fn a_broken_boot_or_a_kernel_report_is_never_forgiven() {
        let mut run = crate::results::tests::fixture();
        assert!(forgivable(&run).is_empty() && !sound(&run), "the fixture's boots time out and panic");
        for b in run.arches.iter_mut().flat_map(|a| &mut a.boots) {
            b.verdict.kind = "fail".into();
        }
        assert!(sound(&run));
        let got: Vec<String> = forgivable(&run).into_iter().map(|(a, s)| format!("{a} {s}")).collect();
        let want = [
            "arm64 abi/enable",
            "arm64 abi/register",
            "arm64 abi/write",
            "x86_64 broken/oopses",
            "x86_64 hazards/slow-write",
        ];
        assert_eq!(got, want, "every failure but fault/panic, which has a kernel report");
        let flaky = suspects_of(&[&[("a/f", "fail")], &[("a/f", "pass")], &[("a/f", "fail")]]);
        assert_eq!(flaky.len(), 1);
        let last = classify(&history(&[&[("a/f", "fail")], &[("a/f", "pass")], &[("a/f", "fail")]]), "r3", "h", 10);
        assert!(suspects(&last, &BTreeSet::new()).is_empty(), "flips, but not forgivable: no re-run");
    }
}
