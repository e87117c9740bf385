//! The boots of a plan: one lane per arch, its shared boots (`--vms` parts), then the
//! scenarios marked `isolated` each in a boot of its own, then the resume boots for what a
//! crash or hang left unrun; each boot judged as it ends.

use std::path::Path;

use anyhow::Result;

use super::{boot_name, print_boot, run_all, BootRun, Job, Options};
use crate::judging::run_folder::{self, BootDir};
use crate::judging::verdict::BootVerdict;
use crate::kernel::build::Built;
use crate::run::breakage::{resume_plan, stop_spending, stopped_at, Breakage};
use crate::suites::Marks;
use crate::support::progress::line;
use crate::vm::children;

/// Boots `plan` on every built kernel and judges each boot.
pub fn run_plan_on(
    built: &[Built],
    plan: &protocol::Plan,
    extra: &[(String, Vec<u8>)],
    opts: &Options,
) -> Result<Vec<BootRun>> {
    let plans = built
        .iter()
        .map(|b| PlanFor { built: b, plan: plan.clone(), marks: Default::default(), dir: b.arch.name.to_string() })
        .collect();
    run_plans(plans, extra, opts)
}

/// A kernel and the plan compiled for it (suites compile per kernel: `requires` differ).
pub struct PlanFor<'a> {
    pub built: &'a Built,
    pub plan: protocol::Plan,
    pub marks: Marks,
    /// The boot's folder in the run: the arch name, or `<arch>.isolated-<n>` for a scenario
    /// that runs in a boot of its own.
    pub dir: String,
}

/// Cuts a plan's scenarios into `parts` consecutive plans of about equal size (fewer when there
/// are fewer scenarios), for `--vms`.
pub fn split_plan(plan: protocol::Plan, parts: usize) -> Vec<protocol::Plan> {
    let n = plan.scenarios.len();
    let parts = parts.clamp(1, n.max(1));
    let mut out = Vec::new();
    let mut rest = plan.scenarios.clone().into_iter();
    for k in 0..parts {
        let take = n / parts + usize::from(k < n % parts);
        out.push(protocol::Plan { scenarios: rest.by_ref().take(take).collect(), ..plan.clone() });
    }
    out
}

/// The folder of part `k` (from 1) of an arch's shared boot: `x86_64`, `x86_64.vm-2`, ...
pub fn shared_dir(arch: &str, k: usize) -> String {
    BootDir::Shared(k as u32).name(arch)
}

/// Boots the plans into a new run folder under the results root and judges each boot.
pub fn run_plans(plans: Vec<PlanFor>, extra: &[(String, Vec<u8>)], opts: &Options) -> Result<Vec<BootRun>> {
    let run_dir = run_folder::new_run_dir(&opts.results)?;
    let judged = run_plans_in(plans, extra, opts, &run_dir)?;
    finish_run(&judged, &run_dir);
    Ok(judged)
}

/// The boots' summaries and where the run is, once every lane has ended.
pub fn finish_run(judged: &[BootRun], run_dir: &Path) {
    for j in judged {
        print_boot(j);
    }
    line(format!("results: {}", run_dir.display()));
}

/// Boots the plans into `run_dir` and judges each boot. Each arch is a lane of its own: the
/// parts of its shared plan (`--vms`) side by side, then its isolated scenarios one boot at a
/// time (never beside another boot of the same arch, whose timing they would disturb). The
/// lanes run side by side, so no arch waits for another's boots. A boot that a crash or hang
/// ended early hands the scenarios it did not run to a fresh boot of the same kernel
/// (`<arch>.resume-N`, at most [`super::breakage::MAX_RESUMES`] per arch); the scenario that broke it keeps its
/// own verdict and is not run again. The judged boots come back wave by wave (every lane's
/// shared boots, then the first isolated ones, ...), the arches in the order of `plans`.
pub fn run_plans_in(
    plans: Vec<PlanFor>,
    extra: &[(String, Vec<u8>)],
    opts: &Options,
    run_dir: &Path,
) -> Result<Vec<BootRun>> {
    let mut lanes: Vec<Vec<PlanFor>> = Vec::new();
    for p in plans {
        match lanes.iter_mut().find(|l| l[0].built.arch.name == p.built.arch.name) {
            Some(lane) => lane.push(p),
            None => lanes.push(vec![p]),
        }
    }
    let ended: Vec<Result<Vec<(usize, BootRun)>>> = std::thread::scope(|s| {
        let handles: Vec<_> =
            lanes.into_iter().map(|lane| s.spawn(move || run_lane(lane, extra, opts, run_dir))).collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|_| Err(anyhow::anyhow!("a boot lane panicked")))).collect()
    });
    let mut judged = Vec::new();
    for lane in ended {
        judged.extend(lane?);
    }
    judged.sort_by_key(|(wave, _)| *wave);
    Ok(judged.into_iter().map(|(_, j)| j).collect())
}

/// One arch's boots, wave after wave; each judged boot with its wave's number.
fn run_lane(
    plans: Vec<PlanFor>,
    extra: &[(String, Vec<u8>)],
    opts: &Options,
    run_dir: &Path,
) -> Result<Vec<(usize, BootRun)>> {
    let (isolated, shared): (Vec<PlanFor>, Vec<PlanFor>) = plans
        .into_iter()
        .partition(|p| BootDir::parse(&p.dir).is_some_and(|(_, place)| matches!(place, BootDir::Isolated(_))));
    let mut waves: std::collections::VecDeque<Vec<PlanFor>> =
        std::iter::once(shared).chain(isolated.into_iter().map(|p| vec![p])).filter(|w| !w.is_empty()).collect();
    let mut resumes = 0;
    let mut breakage: Option<Breakage> = None;
    let mut broken_in_a_row = 0;
    let mut judged = Vec::new();
    let mut wave_no = 0;
    while let Some(wave) = waves.pop_front() {
        if children::interrupted() {
            break;
        }
        let jobs = wave
            .iter()
            .map(|p| Job {
                built: p.built,
                plan: protocol::Plan {
                    stop_at_first_failure: opts.fail_fast,
                    expected_failures: if opts.fail_fast { p.marks.xfail.keys().cloned().collect() } else { vec![] },
                    ..p.plan.clone()
                },
                extra: extra.to_vec(),
                out_dir: run_dir.join(&p.dir),
                xfail: p.marks.xfail.keys().cloned().collect(),
            })
            .collect();
        let outcomes = run_all(jobs, opts)?;
        let mut next = Vec::new();
        for (o, p) in outcomes.into_iter().zip(wave) {
            let mut j = BootRun::judge(o, &p.plan, p.marks.clone())?;
            if let Some(rest) = resume_plan(j.result(), &j.outcome.vm.ended, &p.plan) {
                let arch = p.built.arch.name;
                let (culprit, how) = stopped_at(j.result()).unwrap_or_default();
                let first = breakage.get_or_insert_with(|| Breakage {
                    at: std::time::Instant::now(),
                    culprit: culprit.clone(),
                    how: how.clone(),
                });
                if matches!(BootDir::parse(&p.dir), Some((_, BootDir::Resume(_)))) {
                    broken_in_a_row += 1;
                }
                let last = format!("{culprit}: {how}");
                let stop = if opts.fail_fast {
                    Some("--fail-fast: no fresh boot after a failure".to_string())
                } else {
                    stop_spending(broken_in_a_row, first.at.elapsed(), resumes, &last)
                };
                if let Some(why) = stop {
                    let why = format!("({}); {why}", first.how);
                    line(format!(
                        "{arch}: {} scenario(s) not run, collateral of {} {why}",
                        rest.scenarios.len(),
                        first.culprit
                    ));
                    j.boot.facts.collateral = Some(run_folder::Collateral { culprit: first.culprit.clone(), why });
                    j.boot.write_record()?;
                    judged.push((wave_no, j));
                    continue;
                }
                resumes += 1;
                let dir = BootDir::Resume(resumes).name(arch);
                line(format!(
                    "{arch}: {} ended early at {culprit} ({how}); its {} unrun scenario(s) go to a fresh boot, {dir}",
                    boot_name(&j.outcome.out_dir),
                    rest.scenarios.len()
                ));
                j.resumed_in = Some(dir.clone());
                next.push(PlanFor { built: p.built, plan: rest, marks: p.marks, dir });
            }
            judged.push((wave_no, j));
        }
        if !next.is_empty() {
            waves.push_back(next);
        }
        wave_no += 1;
        if opts.fail_fast && judged.iter().any(|(_, j)| j.counted().verdict != BootVerdict::Pass) {
            if !waves.is_empty() {
                let left: usize = waves.iter().flatten().map(|p| p.plan.scenarios.len()).sum();
                line(format!("--fail-fast: {left} scenario(s) of later boots not run after a failure"));
            }
            break;
        }
    }
    Ok(judged)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_split_evenly_and_boot_folders_name_their_place() {
        let mut plan = protocol::Plan::empty("x86_64");
        for i in 0..5 {
            plan.scenarios.push(protocol::Scenario { name: format!("s/{i}"), deadline_ms: 1, steps: vec![] });
        }
        let sizes = |parts| split_plan(plan.clone(), parts).iter().map(|p| p.scenarios.len()).collect::<Vec<_>>();
        assert_eq!(sizes(1), [5]);
        assert_eq!(sizes(2), [3, 2]);
        assert_eq!(sizes(3), [2, 2, 1]);
        assert_eq!(sizes(9), [1, 1, 1, 1, 1]);
        let parts = split_plan(plan.clone(), 2);
        assert_eq!(parts[1].scenarios[0].name, "s/3", "in plan order");
        assert_eq!(sizes(0), [5]);
        assert_eq!(split_plan(protocol::Plan::empty("x"), 3).len(), 1);
        assert_eq!((shared_dir("arm64", 1), shared_dir("arm64", 2)), ("arm64".into(), "arm64.vm-2".into()));
    }
}
