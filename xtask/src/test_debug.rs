//! The debug profile in `cargo xtask test`: the kernel of [`ARCH`] built with
//! `kernel-configs/profiles/debug.config` (KASAN, lockdep, `DEBUG_ATOMIC_SLEEP`, hung-task
//! detection), the whole gating plan run on it, and the run judged exactly ([`judge`]): every
//! scenario ran, the ones that provoke a known bug showed their report, nothing else had one.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use anyhow::{Context, Result};

use crate::flags::{ConfigArgs, KernelArgs};
use crate::kernel::Built;
use crate::results::model::Run;

/// The arch `cargo xtask test` builds and runs the debug profile on. Both arches cost about the
/// same (a few minutes to build, a few to run the plan), but on arm64 under KASAN the 65k-event
/// scenario `limits/running-out-of-event-ids-is-enodev` overruns its 120 s deadline; on x86_64
/// it takes about 65 s (BENCHMARKS.md, "The debug profile").
pub const ARCH: &str = "x86_64";

/// A scenario that must run under the debug profile and pass with its expected kernel report
/// (catalogue K4, a use-after-free in 6.12), so that a profile or an arch that lost KASAN, or a
/// suite that lost the scenario, cannot pass by skipping it.
pub const MUST_REPORT: [(&str, &str); 1] =
    [("hazards/deleting-the-target-of-a-disabled-eprobe-frees-it-under-the-eprobe", "KASAN: slab-use-after-free")];

/// What the debug profile is for, checked in the built kernel's `.config`: KASAN, lockdep
/// (`PROVE_LOCKING` selects `LOCKDEP`), sleeping in atomic context, hung tasks.
const OPTIONS: [&str; 5] =
    ["CONFIG_KASAN", "CONFIG_PROVE_LOCKING", "CONFIG_LOCKDEP", "CONFIG_DEBUG_ATOMIC_SLEEP", "CONFIG_DETECT_HUNG_TASK"];

/// The debug kernel of [`ARCH`] (built, or a cache hit), with [`OPTIONS`] checked in its
/// `.config` and no requested option missing.
pub fn build(base: &KernelArgs) -> Result<Vec<Built>> {
    let debug = KernelArgs {
        arch: ARCH.into(),
        config: ConfigArgs { profiles: vec!["debug".into()], ..ConfigArgs::default() },
        ..base.clone()
    };
    let built = crate::pipeline::kernels(&debug)?;
    let b = built.first().context("no kernel built")?;
    let text = std::fs::read_to_string(&b.config).with_context(|| format!("reading {}", b.config.display()))?;
    let config = crate::kconfig::parse_config(&text);
    let off: Vec<String> = OPTIONS
        .iter()
        .filter(|o| config.get(**o).map(String::as_str) != Some("y"))
        .map(|o| format!("{o}={}", config.get(*o).map_or("absent", String::as_str)))
        .collect();
    anyhow::ensure!(off.is_empty(), "{}: {}", b.config.display(), off.join(", "));
    anyhow::ensure!(b.metadata.config.missing.is_empty(), "missing options: {:?}", b.metadata.config.missing);
    Ok(built)
}

/// The gating plan (every suite but the measuring one) on the debug kernel, into a run folder
/// under `results`, judged by [`judge`] with the suites' `expect_report` marks and [`MUST_REPORT`].
/// The scenarios the default-profile kernel `plain` skips too (arch variants: big-endian
/// only, `HIST_TRIGGERS=n`, a separate user address space) are the only skips allowed.
pub fn run_gating_plan(built: &[Built], plain: &[Built], opts: &crate::boot::Options, results: &Path) -> Result<()> {
    let chosen = crate::pipeline::choose(&crate::flags::SelectArgs::default(), results)?;
    let b = built.first().context("no kernel built")?;
    let expect_report = crate::pipeline::compile_for(&chosen, b)?.marks.expect_report;
    let p = plain.first().context("no default kernel")?;
    let skipped_anyway: BTreeSet<String> =
        crate::pipeline::compile_for(&chosen, p)?.skipped.into_iter().map(|s| s.name).collect();
    let judged = crate::pipeline::run(&chosen, built, opts)?;
    let run = crate::pipeline::publish(&judged, built)?.context("nothing booted")?;
    judge(&run, ARCH, &expect_report, &MUST_REPORT, &skipped_anyway)
}

/// What a debug-profile run of `arch` must show, every problem listed: each scenario that
/// expects a kernel report (`expect_report`: scenario -> text) passed with findings that are
/// all such reports; every other scenario passed, or failed as its `xfail` mark expects, with
/// no finding at all; nothing was skipped (but what the default profile skips too,
/// `skipped_anyway`) or left unrun; no boot has a finding outside the scenarios; and each of
/// `must_report` was planned with that expectation and ran.
pub fn judge(
    run: &Run,
    arch: &str,
    expect_report: &BTreeMap<String, String>,
    must_report: &[(&str, &str)],
    skipped_anyway: &BTreeSet<String>,
) -> Result<()> {
    use crate::results::model::Status as S;
    let a = run.arch(arch).with_context(|| format!("the run has no {arch}"))?;
    let mut problems = Vec::new();
    for (name, text) in must_report {
        match expect_report.get(*name) {
            Some(t) if t.contains(text) => {}
            other => problems.push(format!("{name}: expected to report {text:?}, the suites say {other:?}")),
        }
        if !a.scenarios.iter().any(|s| s.name == *name) {
            problems.push(format!("{name}: not in the run"));
        }
    }
    for s in &a.scenarios {
        let findings: Vec<&str> = s.findings.iter().map(|f| f.summary.as_str()).collect();
        let why = || s.reason.clone().unwrap_or_else(|| s.failing_step(3).join(" / "));
        match (s.status, expect_report.get(&s.name)) {
            (S::Pass, Some(text)) if !findings.is_empty() && findings.iter().all(|f| f.contains(text.as_str())) => {}
            (S::Pass, Some(text)) => {
                problems.push(format!("{}: expected only {text:?} reports, got {findings:?}", s.name))
            }
            (S::Pass | S::Xfail, None) if findings.is_empty() => {}
            (S::Pass | S::Xfail, None) => problems.push(format!("{}: kernel findings {findings:?}", s.name)),
            (S::Skip, _) if skipped_anyway.contains(&s.name) => {}
            (S::Skip, _) => problems.push(format!("{}: skipped ({})", s.name, why())),
            (status, _) => {
                let judged = s.judged.as_deref().map(|j| format!(" ({j})")).unwrap_or_default();
                problems.push(format!("{}: {}{judged}: {} {findings:?}", s.name, status.as_str(), why()));
            }
        }
    }
    for b in &a.boots {
        for f in &b.findings {
            problems.push(format!("boot {}: a finding outside the scenarios: {}", b.name, f.summary));
        }
    }
    anyhow::ensure!(!a.scenarios.is_empty(), "{arch} ran no scenario");
    anyhow::ensure!(problems.is_empty(), "{} problem(s):\n  {}", problems.len(), problems.join("\n  "));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::model::{Finding, Status};

    const UAF: &str = "KASAN: slab-use-after-free";

    fn finding(kind: &str, summary: &str) -> Finding {
        Finding { kind: kind.into(), summary: summary.into(), console_line: 1, excerpt: vec![], truncated: false }
    }

    /// The fixture's x86_64 made into a clean debug run: `hazards/slow-write` expects a KASAN
    /// report and shows it, `abi/write` is an xfail, the skipped `abi/enable` is gone.
    fn clean() -> (crate::results::model::Run, BTreeMap<String, String>) {
        let mut run = crate::results::tests::fixture();
        let a = run.arches.iter_mut().find(|a| a.arch == "x86_64").unwrap();
        a.scenarios.retain(|s| s.name != "abi/enable");
        let hz = a.scenarios.iter_mut().find(|s| s.name == "hazards/slow-write").unwrap();
        hz.status = Status::Pass;
        hz.findings = vec![finding("kasan", "BUG: KASAN: slab-use-after-free in trace_event_probe_cleanup+0xb1/0xf2")];
        let expect = BTreeMap::from([("hazards/slow-write".to_string(), UAF.to_string())]);
        (run, expect)
    }

    fn problems(run: &crate::results::model::Run, expect: &BTreeMap<String, String>) -> String {
        let must = [("hazards/slow-write", UAF)];
        judge(run, "x86_64", expect, &must, &BTreeSet::new()).map_or_else(|e| format!("{e:#}"), |()| "ok".into())
    }

    #[test]
    fn a_skip_the_default_profile_makes_too_is_an_arch_variant_not_a_problem() {
        let mut run = crate::results::tests::fixture();
        let a = run.arches.iter_mut().find(|a| a.arch == "x86_64").unwrap();
        let hz = a.scenarios.iter_mut().find(|s| s.name == "hazards/slow-write").unwrap();
        hz.status = Status::Pass;
        hz.findings = vec![finding("kasan", "BUG: KASAN: slab-use-after-free in trace_event_probe_cleanup+0xb1/0xf2")];
        let expect = BTreeMap::from([("hazards/slow-write".to_string(), UAF.to_string())]);
        let must = [("hazards/slow-write", UAF)];
        let anyway = BTreeSet::from(["abi/enable".to_string()]);
        assert!(judge(&run, "x86_64", &expect, &must, &anyway).is_ok());
        let e = judge(&run, "x86_64", &expect, &must, &BTreeSet::new()).unwrap_err();
        assert!(format!("{e:#}").contains("abi/enable: skipped"), "{e:#}");
    }

    #[test]
    fn a_clean_debug_run_passes() {
        let (run, expect) = clean();
        assert_eq!(problems(&run, &expect), "ok");
    }

    #[test]
    fn a_skip_a_failure_and_a_missing_expectation_are_each_named() {
        let run = crate::results::tests::fixture();
        assert_eq!(
            problems(&run, &BTreeMap::new()),
            "3 problem(s):\n  \
             hazards/slow-write: expected to report \"KASAN: slab-use-after-free\", the suites say None\n  \
             abi/enable: skipped (no perf_event_open in this kernel)\n  \
             hazards/slow-write: fail (timeout): the VM hung while this scenario ran: the watchdog fired \
             (killed after 90000 ms) []"
        );
    }

    #[test]
    fn a_finding_anywhere_else_fails_the_run() {
        let (mut run, expect) = clean();
        let a = run.arches.iter_mut().find(|a| a.arch == "x86_64").unwrap();
        a.scenarios[0].findings = vec![finding("lockdep", "WARNING: possible circular locking dependency detected")];
        a.scenarios[2].findings.push(finding("ubsan", "UBSAN: array-index-out-of-bounds in kernel/trace/x.c:1:2"));
        a.boots[0].findings = vec![finding("kasan", "BUG: KASAN: wild-memory-access in do_raw_spin_lock+0x130/0x1de")];
        assert_eq!(
            problems(&run, &expect),
            "3 problem(s):\n  \
             abi/register: kernel findings [\"WARNING: possible circular locking dependency detected\"]\n  \
             hazards/slow-write: expected only \"KASAN: slab-use-after-free\" reports, got \
             [\"BUG: KASAN: slab-use-after-free in trace_event_probe_cleanup+0xb1/0xf2\", \
             \"UBSAN: array-index-out-of-bounds in kernel/trace/x.c:1:2\"]\n  \
             boot x86_64: a finding outside the scenarios: BUG: KASAN: wild-memory-access in do_raw_spin_lock+0x130/0x1de"
        );
    }

    #[test]
    fn the_must_report_scenario_cannot_go_missing() {
        let (mut run, expect) = clean();
        run.arches
            .iter_mut()
            .find(|a| a.arch == "x86_64")
            .unwrap()
            .scenarios
            .retain(|s| s.name != "hazards/slow-write");
        assert_eq!(problems(&run, &expect), "1 problem(s):\n  hazards/slow-write: not in the run");
    }
}
