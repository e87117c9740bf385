//! The kernel's own user_events selftests (`cargo xtask upstream`, `run --upstream-selftests`):
//! built from the same tree as the kernel (`build`), each binary run in a fresh boot of run's
//! lanes, its kselftest TAP read back (`tap`) and reported per test case (`report`) beside our
//! results. Not gating: only an infrastructure failure changes the exit code.

pub mod build;
pub mod report;
pub mod tap;

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};

use self::build::{build, SELFTEST_DIR};
use self::report::{print, report, BinaryReport};
use self::tap::CaseStatus;
use crate::kernel::build::Built;
use crate::run::boot::{self, BootRun, Job};
use crate::support::exit::Kind;
use crate::support::progress::line;

/// Runs every selftest binary of every kernel, each in its own boot, and writes
/// `<run_dir>/<arch>/upstream.json`. Returns 0, or 3 when a boot had an infrastructure error.
pub fn run(built: &[Built], opts: &boot::Options, run_dir: &Path) -> Result<u8> {
    let mut binaries = Vec::new();
    for b in built {
        binaries.push(build(b)?);
    }
    let mut reports: BTreeMap<&str, Vec<BinaryReport>> = BTreeMap::new();
    let mut code = 0;
    // Each binary in a fresh boot: the selftests leave events and enablements behind.
    let rounds = binaries.iter().map(|b| b.names.len()).max().unwrap_or(0);
    for round in 0..rounds {
        let mut jobs = Vec::new();
        let mut plans = Vec::new();
        for (b, bins) in built.iter().zip(&binaries) {
            let Some(name) = bins.names.get(round) else { continue };
            let bytes = std::fs::read(bins.dir.join(name))
                .with_context(|| format!("reading the built selftest {}", bins.dir.join(name).display()))?;
            let guest = format!("/bin/{name}");
            let mut plan = protocol::Plan::empty("upstream");
            plan.scenarios.push(protocol::Scenario {
                name: format!("upstream/{name}"),
                deadline_ms: bins.timeout_s * 1000,
                steps: vec![protocol::Step::Exec(protocol::steps::Exec { argv: vec![guest.clone()], expect_exit: 0 })],
            });
            let out_dir = run_dir.join(b.arch.name).join("upstream").join(name);
            jobs.push(Job {
                built: b,
                plan: plan.clone(),
                extra: vec![(guest, bytes)],
                out_dir,
                xfail: Default::default(),
            });
            plans.push((name.clone(), plan));
        }
        let outcomes = boot::run_all(jobs, opts)?;
        for (outcome, (name, plan)) in outcomes.into_iter().zip(plans) {
            let judged = BootRun::judge(outcome, &plan, Default::default())?;
            if matches!(judged.result().verdict, crate::judging::verdict::BootVerdict::InfraError(_)) {
                code = Kind::Infra.code();
            }
            let release = built
                .iter()
                .find(|b| b.arch.name == judged.outcome.arch.name)
                .map_or(String::new(), |b| b.metadata.kernelrelease.clone());
            let report = report(&name, &release, &judged);
            print(judged.outcome.arch.name, &report, &judged);
            reports.entry(judged.outcome.arch.name).or_default().push(report);
        }
    }
    for b in built {
        let arch = b.arch.name;
        let bins = reports.remove(arch).unwrap_or_default();
        let count = |s: CaseStatus| bins.iter().flat_map(|r| &r.parsed.cases).filter(|c| c.status == s).count();
        let (pass, fail, skip) = (count(CaseStatus::Pass), count(CaseStatus::Fail), count(CaseStatus::Skip));
        line(format!(
            "{arch}: upstream selftests on {}: {pass} passed, {fail} failed, {skip} skipped (not gating)",
            b.metadata.kernelrelease
        ));
        let record = serde_json::json!({
            "schema": 1,
            "arch": arch,
            "kernelrelease": b.metadata.kernelrelease,
            "source": b.metadata.source.label,
            "selftests": SELFTEST_DIR,
            "totals": { "pass": pass, "fail": fail, "skip": skip },
            "binaries": bins,
        });
        let path = run_dir.join(arch).join("upstream.json");
        std::fs::create_dir_all(run_dir.join(arch))?;
        std::fs::write(&path, serde_json::to_vec_pretty(&record)?)?;
    }
    line(format!("upstream results: {}", run_dir.display()));
    Ok(code)
}
