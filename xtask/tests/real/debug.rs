//! The debug profile in `cargo xtask test`: the kernel of [`ARCH`] built with
//! `kernel-configs/profiles/debug.config` (KASAN, lockdep, `DEBUG_ATOMIC_SLEEP`, hung-task
//! detection), the whole gating plan run on it, and the run judged exactly ([`judge`]): every
//! scenario ran, the ones that provoke a known bug showed their report, nothing else had one,
//! and the report's frames resolved to the tracing files' source lines.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use anyhow::{Context, Result};

use xtask::cli::{ConfigArgs, KernelArgs};
use xtask::kernel::build::Built;
use xtask::results::model::Run;

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
    let built = xtask::kernel::build_all(&debug.request()?)?;
    let b = built.first().context("no kernel built")?;
    let text = std::fs::read_to_string(&b.config).with_context(|| format!("reading {}", b.config.display()))?;
    let config = xtask::kernel::kconfig::parse_config(&text);
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
pub fn run_gating_plan(
    built: &[Built],
    plain: &[Built],
    opts: &xtask::run::boot::Options,
    results: &Path,
) -> Result<()> {
    let chosen = xtask::run::pipeline::choose(&xtask::cli::SelectArgs::default(), results)?;
    let b = built.first().context("no kernel built")?;
    let expect_report = xtask::run::pipeline::compile_for(&chosen, b)?.marks.expect_report;
    let p = plain.first().context("no default kernel")?;
    let skipped_anyway: BTreeSet<String> =
        xtask::run::pipeline::compile_for(&chosen, p)?.skipped.into_iter().map(|s| s.name).collect();
    let judged = xtask::run::pipeline::run(&chosen, built, opts)?;
    let run = xtask::run::pipeline::publish(&judged, built)?.context("nothing booted")?;
    judge(&run, ARCH, &expect_report, &MUST_REPORT, &skipped_anyway)?;
    symbolized(&run, MUST_REPORT[0].0)
}

/// The report of `scenario` has frames resolved to a tracing file's line (the debug profile
/// compiles those files with DWARF: `# make: CFLAGS_<file>.o=-g`).
fn symbolized(run: &Run, scenario: &str) -> Result<()> {
    let a = run.arch(ARCH).with_context(|| format!("the run has no {ARCH}"))?;
    let s = a.scenarios.iter().find(|s| s.name == scenario).with_context(|| format!("no {scenario}"))?;
    let places: Vec<&String> = s.findings.iter().flat_map(|f| &f.frames).flat_map(|f| &f.source).collect();
    let in_trace = places.iter().filter(|p| p.contains("kernel/trace/") && p.contains(".c:")).count();
    anyhow::ensure!(in_trace > 0, "{scenario}: no frame resolved to kernel/trace/*.c:LINE; places {places:?}");
    Ok(())
}

/// What a debug-profile run of `arch` must show, every problem listed: each scenario that
/// expects a kernel report (`expect_report`: scenario -> text) passed with findings that are
/// all such reports; every other scenario passed, or failed as its `xfail` mark expects, with
/// no finding at all; nothing was skipped (but what the default profile skips too,
/// `skipped_anyway`, and what asks for a kernel without KASAN, `CONFIG_KASAN=n`: the `leaks`
/// suite, whose figure KASAN's quarantine swamps) or left unrun; no boot has a finding outside the scenarios; and each of
/// `must_report` was planned with that expectation and ran.
pub fn judge(
    run: &Run,
    arch: &str,
    expect_report: &BTreeMap<String, String>,
    must_report: &[(&str, &str)],
    skipped_anyway: &BTreeSet<String>,
) -> Result<()> {
    use xtask::results::model::Status as S;
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
            (S::Pass | S::Xfail | S::Fixed, None) if findings.is_empty() => {}
            (S::Pass | S::Xfail | S::Fixed, None) => problems.push(format!("{}: kernel findings {findings:?}", s.name)),
            (S::Skip, _) if skipped_anyway.contains(&s.name) => {}
            (S::Skip, _) if s.reason.as_deref().is_some_and(|r| r.contains("needs CONFIG_KASAN=n")) => {}
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
