//! The classes of a run's scenarios against their history, and the flips of every scenario
//! (sans-IO: outcomes in time order in, classes out).
//!
//! A kernel is its release, source digest, patches, config digest and profile; a kernel *line*
//! is what a series of kernels under test shares: the release's major.minor and the profile
//! (6.12.117 and 6.12.117 with a patch, or a git tree's next commit, are one line; 7.3.4, or
//! the debug profile, another). A cell is a scenario on an arch and a line. An outcome has a
//! verdict when its status says passed (`pass`, `xfail`, `fixed`) or failed (`fail`, `xpass`,
//! `not-run`, `error`, as `Status::is_failure` says); `skip` and `collateral` have none and are
//! passed over. For the run classified, each cell of an arch and line it ran is, up to that
//! run:
//!
//! - `new`: no verdict before this one on the line;
//! - `unstable`: the last `window` outcomes of this very kernel flip both ways (a pass then a
//!   fail, and a fail then a pass), except one regression that this run fixes, which is
//!   `fixed`: flips between two kernels of the line are what a change did, not noise;
//! - otherwise against the line's verdict before (whichever kernel it was): `regression`
//!   (passed, fails now: the only class that gates), `fixed`, `persistent-failure`, `stable`;
//! - `skipped`: no verdict in this run;
//! - `missing`: recorded before on this arch and line, not in this run.

use std::collections::BTreeMap;

use serde::Serialize;

use super::rows::KernelId;
use super::store::{Outcome, Recheck};
use crate::results::model::Rechecked;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Class {
    Regression,
    Unstable,
    PersistentFailure,
    Fixed,
    New,
    Missing,
    Skipped,
    Stable,
}

impl Class {
    pub const ALL: [Class; 8] = [
        Class::Regression,
        Class::Unstable,
        Class::PersistentFailure,
        Class::Fixed,
        Class::New,
        Class::Missing,
        Class::Skipped,
        Class::Stable,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Class::Regression => "regression",
            Class::Unstable => "unstable",
            Class::PersistentFailure => "persistent-failure",
            Class::Fixed => "fixed",
            Class::New => "new",
            Class::Missing => "missing",
            Class::Skipped => "skipped",
            Class::Stable => "stable",
        }
    }
}

/// `Some(true)` for a failed outcome, `Some(false)` for a passed one, `None` for no verdict.
pub fn failed(status: &str) -> Option<bool> {
    match status {
        "fail" | "xpass" | "not-run" | "error" => Some(true),
        "pass" | "xfail" | "fixed" => Some(false),
        _ => None,
    }
}

/// What makes two kernels one: all of [`KernelId`] but the source's words.
fn kernel_key(k: &KernelId) -> KernelKey {
    (k.release.clone(), k.source_id.clone(), k.patches.clone(), k.config_hash.clone(), k.profile.clone())
}

/// Release, source digest, patches, config digest, profile.
type KernelKey = (String, String, String, String, String);

/// A kernel's line: its release's major.minor (`6.12` of `6.12.117`, `6.13` of `6.13.0-rc1`)
/// and its profile.
pub fn line_of(k: &KernelId) -> (String, String) {
    let mut parts = k.release.split(|c: char| !c.is_ascii_digit());
    let series = match (parts.next(), parts.next()) {
        (Some(major), Some(minor)) if !major.is_empty() && !minor.is_empty() => format!("{major}.{minor}"),
        _ => k.release.clone(),
    };
    (series, k.profile.clone())
}

/// Scenario, arch, kernel.
type Cell = (String, String, KernelKey);

fn cell(o: &Outcome) -> Cell {
    (o.scenario.clone(), o.arch.clone(), kernel_key(&o.kernel))
}

/// Scenario, arch, line.
type LineCell = (String, String, (String, String));

/// One cell's class in the run classified.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Classed {
    pub scenario: String,
    pub arch: String,
    pub kernel: KernelId,
    pub class: Class,
    /// Its status in this run (`None` when missing).
    pub status: Option<String>,
    /// The statuses of its line's last `window` outcomes, oldest first (this run's last).
    pub window: Vec<String>,
    /// The verdicts of this very kernel's last `window` outcomes (failed `true`), oldest
    /// first: what `unstable` is judged by.
    #[serde(skip)]
    pub same_kernel: Vec<bool>,
    /// This run's reason, if any (a skip's, a failure's).
    pub reason: Option<String>,
    /// Its status in the gate's re-run in a fresh boot, when the run re-ran it (its class is
    /// then the re-run's verdict: `unstable` when it passed there, else `regression`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rerun: Option<String>,
}

/// The flips of a sequence of verdicts: (pass then fail, fail then pass).
pub fn flips(verdicts: &[bool]) -> (usize, usize) {
    let mut down = 0;
    let mut up = 0;
    for w in verdicts.windows(2) {
        match (w[0], w[1]) {
            (false, true) => down += 1,
            (true, false) => up += 1,
            _ => {}
        }
    }
    (down, up)
}

/// The class of a cell from its line's outcomes up to this run, this run's last, and the
/// verdicts of this very kernel's window (`same_kernel`, this run's last).
fn class_of(line: &[&Outcome], same_kernel: &[bool]) -> Class {
    let Some((now, before)) = line.split_last() else { return Class::Missing };
    let Some(failed_now) = failed(&now.status) else { return Class::Skipped };
    let Some(failed_before) = before.iter().rev().find_map(|o| failed(&o.status)) else { return Class::New };
    let (down, up) = flips(same_kernel);
    let fixed_now = failed_before && !failed_now;
    if down > 0 && up > 0 && !(fixed_now && down == 1 && up == 1) {
        return Class::Unstable;
    }
    match (failed_before, failed_now) {
        (false, true) => Class::Regression,
        (true, false) => Class::Fixed,
        (true, true) => Class::PersistentFailure,
        (false, false) => Class::Stable,
    }
}

/// The classes of run (`run_id`, `host`)'s cells against `outcomes` (every recorded one, in
/// time order): each cell of the arches and lines the run has, looking at outcomes up to the
/// run's (`window` of them for the flips). Sorted by class, then scenario, arch and kernel.
pub fn classify(outcomes: &[Outcome], run_id: &str, host: &str, window: usize) -> Vec<Classed> {
    let is_run = |o: &Outcome| o.run_id == run_id && o.host == host;
    // Outcomes after the run's are not looked at (a run classified after later ones).
    let end = outcomes.iter().rposition(is_run).map_or(0, |i| i + 1);
    let upto = &outcomes[..end];
    let places: std::collections::BTreeSet<(String, (String, String))> =
        upto.iter().filter(|o| is_run(o)).map(|o| (o.arch.clone(), line_of(&o.kernel))).collect();
    let mut cells: BTreeMap<LineCell, Vec<&Outcome>> = BTreeMap::new();
    for o in upto.iter().filter(|o| places.contains(&(o.arch.clone(), line_of(&o.kernel)))) {
        cells.entry((o.scenario.clone(), o.arch.clone(), line_of(&o.kernel))).or_default().push(o);
    }
    let window = window.max(1);
    let mut out: Vec<Classed> = cells
        .into_values()
        .map(|seq| {
            let last = *seq.last().expect("a cell has an outcome");
            let here = is_run(last);
            let mine = kernel_key(&last.kernel);
            let same: Vec<&&Outcome> = seq.iter().filter(|o| kernel_key(&o.kernel) == mine).collect();
            let same_kernel: Vec<bool> =
                same[same.len().saturating_sub(window)..].iter().filter_map(|o| failed(&o.status)).collect();
            let tail = &seq[seq.len().saturating_sub(window)..];
            Classed {
                scenario: last.scenario.clone(),
                arch: last.arch.clone(),
                kernel: last.kernel.clone(),
                class: if here { class_of(&seq, &same_kernel) } else { Class::Missing },
                status: here.then(|| last.status.clone()),
                window: tail.iter().map(|o| o.status.clone()).collect(),
                same_kernel,
                reason: if here { last.reason.clone() } else { None },
                rerun: None,
            }
        })
        .collect();
    out.sort_by(|a, b| (a.class, &a.scenario, &a.arch, &a.kernel).cmp(&(b.class, &b.scenario, &b.arch, &b.kernel)));
    out
}

/// [`classify`], then each failure the gate re-ran in a fresh boot (`rechecks`: every recorded
/// re-run; this run's are used) takes the re-run's class, as the gate did, and its status
/// there: the classes `history`, its KCIDB and its dashboard show.
pub fn classify_rechecked(
    outcomes: &[Outcome],
    rechecks: &[Recheck],
    run_id: &str,
    host: &str,
    window: usize,
) -> Vec<Classed> {
    let rechecked: Vec<Rechecked> =
        rechecks.iter().filter(|c| c.run_id == run_id && c.host == host).map(|c| c.row.clone()).collect();
    with_rechecks(classify(outcomes, run_id, host, window), &rechecked)
}

/// `classed` (one run's cells) with what the gate's re-run of that run said (`rechecked`);
/// sorted again.
fn with_rechecks(mut classed: Vec<Classed>, rechecked: &[Rechecked]) -> Vec<Classed> {
    for c in &mut classed {
        let Some(r) = rechecked.iter().find(|r| r.arch == c.arch && r.scenario == c.scenario) else { continue };
        c.class = if r.gates() { Class::Regression } else { Class::Unstable };
        c.rerun = Some(r.rerun_status.clone());
    }
    classed.sort_by(|a, b| (a.class, &a.scenario, &a.arch, &a.kernel).cmp(&(b.class, &b.scenario, &b.arch, &b.kernel)));
    classed
}

/// Where a scenario flipped: one arch and kernel.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FlipCell {
    pub arch: String,
    pub kernel: KernelId,
    pub flips: usize,
    /// Its outcomes with a verdict.
    pub runs: usize,
    /// Of those, failed.
    pub failed: usize,
}

/// A scenario's flips over the whole history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Flaky {
    pub scenario: String,
    pub flips: usize,
    pub cells: Vec<FlipCell>,
}

/// Every scenario that flipped between passed and failed on some arch and kernel, most flips
/// first; each with the cells where it did.
pub fn flakes(outcomes: &[Outcome]) -> Vec<Flaky> {
    let mut cells: BTreeMap<Cell, Vec<&Outcome>> = BTreeMap::new();
    for o in outcomes {
        cells.entry(cell(o)).or_default().push(o);
    }
    let mut by_scenario: BTreeMap<String, Vec<FlipCell>> = BTreeMap::new();
    for ((scenario, arch, _), seq) in cells {
        let verdicts: Vec<bool> = seq.iter().filter_map(|o| failed(&o.status)).collect();
        let (down, up) = flips(&verdicts);
        if down + up == 0 {
            continue;
        }
        by_scenario.entry(scenario).or_default().push(FlipCell {
            arch,
            kernel: seq[0].kernel.clone(),
            flips: down + up,
            runs: verdicts.len(),
            failed: verdicts.iter().filter(|f| **f).count(),
        });
    }
    let mut out: Vec<Flaky> = by_scenario
        .into_iter()
        .map(|(scenario, mut cells)| {
            cells.sort_by(|a, b| b.flips.cmp(&a.flips).then_with(|| (&a.arch, &a.kernel).cmp(&(&b.arch, &b.kernel))));
            Flaky { scenario, flips: cells.iter().map(|c| c.flips).sum(), cells }
        })
        .collect();
    out.sort_by(|a, b| b.flips.cmp(&a.flips).then_with(|| a.scenario.cmp(&b.scenario)));
    out
}

#[cfg(test)]
#[path = "classify/tests.rs"]
mod tests;
