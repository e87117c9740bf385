//! The regression dashboard's page model, sans-IO: per arch, a table of scenario x kernel
//! (its release, and its profile when not `default`) with the latest status, the strip of the
//! last outcomes, the class and the first bad run of a cell failing now; and the measured
//! figures' trends, flagged only when the latest samples differ from the previous runs'
//! beyond their noise (a Mann-Whitney U test). `html` draws it.

pub mod html;

use std::collections::{BTreeMap, BTreeSet};

use super::classify::{self, failed, Class};
use super::rows::{KernelId, RunRow};
use super::stats::{mann_whitney, median};
use super::store::{Measured, Outcome, Recheck};

/// How many outcomes a cell's strip shows.
pub const STRIP: usize = 20;
/// How many previous runs a figure's latest samples are judged against.
pub const BASELINE_RUNS: usize = 5;
/// The p-value under which a change is flagged.
pub const ALPHA: f64 = 0.01;

/// The whole page.
#[derive(Debug, Clone, PartialEq)]
pub struct Page {
    pub store: String,
    pub runs: usize,
    /// The runs of mutants' kernels, left out.
    pub mutant_runs: usize,
    pub arches: Vec<ArchPage>,
}

/// One arch's part of the page.
#[derive(Debug, Clone, PartialEq)]
pub struct ArchPage {
    pub arch: String,
    /// The columns: kernel labels, sorted.
    pub kernels: Vec<String>,
    /// The rows to look at (failing, unstable, changed), worst first.
    pub rows: Vec<Row>,
    /// The rows that pass and keep passing, folded.
    pub folded: Vec<Row>,
    pub trends: Vec<Trend>,
}

/// One scenario: a cell per column (`None`: never ran on that kernel).
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub scenario: String,
    pub cells: Vec<Option<Cell>>,
}

/// One scenario on one kernel of one arch.
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    /// Its latest status.
    pub status: String,
    /// Its class in its kernel's latest run on the arch.
    pub class: Option<Class>,
    /// Its last outcomes, oldest first: (status, run id).
    pub strip: Vec<(String, String)>,
    /// When it fails now: the run after its last pass.
    pub first_bad: Option<FirstBad>,
}

/// The run where a cell failing now started to fail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FirstBad {
    pub run_id: String,
    pub started_at: String,
    pub commit: Option<String>,
    /// Whether it passed at some point before (else it has failed since its first verdict).
    pub passed_before: bool,
}

/// A measured figure's values over the runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Trend {
    pub scenario: String,
    pub name: String,
    pub kernel: String,
    pub unit: String,
    pub higher_is_better: bool,
    pub points: Vec<Point>,
    pub flag: Option<Flag>,
}

/// One run's samples of a figure: their median and range.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    pub run_id: String,
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

/// A change beyond the noise: the latest run against the previous ones.
#[derive(Debug, Clone, PartialEq)]
pub struct Flag {
    pub p: f64,
    /// Latest median over the baseline's median.
    pub ratio: f64,
    /// Whether the change is for the better (up for a throughput, down for a latency).
    pub better: bool,
}

/// A kernel's column label: its release, and its profile when not `default`.
pub fn label(k: &KernelId) -> String {
    label_of(&k.release, &k.profile)
}

fn label_of(release: &str, profile: &str) -> String {
    if profile == "default" || profile.is_empty() {
        release.to_string()
    } else {
        format!("{release} ({profile})")
    }
}

/// The index of the first bad outcome of a cell failing now: the first failed verdict after
/// its last passed one (with whether there was one); `None` when its last verdict passed or
/// it has none.
pub fn first_bad(statuses: &[&str]) -> Option<(usize, bool)> {
    let verdicts: Vec<(usize, bool)> = statuses.iter().enumerate().filter_map(|(i, s)| Some((i, failed(s)?))).collect();
    if !verdicts.last()?.1 {
        return None;
    }
    let last_pass = verdicts.iter().rposition(|(_, f)| !f);
    let from = last_pass.map_or(0, |p| p + 1);
    Some((verdicts[from].0, last_pass.is_some()))
}

/// Whether a kernel is a mutation campaign's mutant (a kernel of its own per mutant, whose
/// failures are killed mutants, not regressions): left out of the page.
fn is_mutant(profile: &str) -> bool {
    profile.contains("+mutant=")
}

/// The page from every run, every outcome, every re-run of a failure and every measured
/// figure, in time order.
pub fn page(
    store: &str,
    runs: &[RunRow],
    outcomes: &[Outcome],
    rechecks: &[Recheck],
    measured: &[Measured],
    window: usize,
) -> Page {
    let mutants: BTreeSet<(&str, &str)> = outcomes
        .iter()
        .filter(|o| is_mutant(&o.kernel.profile))
        .map(|o| (o.run_id.as_str(), o.host.as_str()))
        .collect();
    let outcomes: Vec<Outcome> = outcomes.iter().filter(|o| !is_mutant(&o.kernel.profile)).cloned().collect();
    let measured: Vec<Measured> = measured.iter().filter(|m| !is_mutant(&m.profile)).cloned().collect();
    let arches: BTreeSet<&str> = outcomes.iter().map(|o| o.arch.as_str()).collect();
    let arches = arches.into_iter().map(|a| arch_page(a, runs, (&outcomes, rechecks), &measured, window)).collect();
    Page { store: store.to_string(), runs: runs.len(), mutant_runs: mutants.len(), arches }
}

/// Rows that need no look: every cell passes now and its class says nothing happened.
fn quiet(row: &Row) -> bool {
    row.cells.iter().flatten().all(|c| {
        c.first_bad.is_none()
            && failed(&c.status) != Some(true)
            && matches!(c.class, None | Some(Class::Stable | Class::Skipped | Class::New))
    })
}

/// How bad a row is, for the order: failing now first, then its worst class (regression
/// first).
fn worst(row: &Row) -> (bool, Class) {
    let class = row.cells.iter().flatten().filter_map(|c| c.class).min().unwrap_or(Class::Stable);
    (!row.cells.iter().flatten().any(|c| failed(&c.status) == Some(true)), class)
}

fn arch_page(
    arch: &str,
    runs: &[RunRow],
    (outcomes, rechecks): (&[Outcome], &[Recheck]),
    measured: &[Measured],
    window: usize,
) -> ArchPage {
    let here: Vec<&Outcome> = outcomes.iter().filter(|o| o.arch == arch).collect();
    let kernels: BTreeSet<String> = here.iter().map(|o| label(&o.kernel)).collect();
    let kernels: Vec<String> = kernels.into_iter().collect();
    let classes = classes_of(arch, outcomes, rechecks, window);
    let commits: BTreeMap<(&str, &str), &RunRow> =
        runs.iter().map(|r| ((r.run_id.as_str(), r.host.as_str()), r)).collect();
    let mut seqs: BTreeMap<(&str, String), Vec<&Outcome>> = BTreeMap::new();
    for o in &here {
        seqs.entry((o.scenario.as_str(), label(&o.kernel))).or_default().push(o);
    }
    let scenarios: BTreeSet<&str> = here.iter().map(|o| o.scenario.as_str()).collect();
    let (mut rows, mut folded) = (Vec::new(), Vec::new());
    for scenario in scenarios {
        let cells = kernels
            .iter()
            .map(|k| {
                let seq = seqs.get(&(scenario, k.clone()))?;
                Some(cell_of(seq, classes.get(&(scenario.to_string(), k.clone())).copied(), &commits))
            })
            .collect();
        let row = Row { scenario: scenario.to_string(), cells };
        if quiet(&row) {
            folded.push(row);
        } else {
            rows.push(row);
        }
    }
    rows.sort_by(|a, b| worst(a).cmp(&worst(b)).then_with(|| a.scenario.cmp(&b.scenario)));
    let trends = trends(measured.iter().filter(|m| m.arch == arch));
    ArchPage { arch: arch.to_string(), kernels, rows, folded, trends }
}

/// The classes of each kernel's latest run on the arch, by scenario and kernel label (the
/// worst when two kernels, a config apart, share a label).
fn classes_of(
    arch: &str,
    outcomes: &[Outcome],
    rechecks: &[Recheck],
    window: usize,
) -> BTreeMap<(String, String), Class> {
    let mut latest: BTreeMap<&KernelId, &Outcome> = BTreeMap::new();
    for o in outcomes.iter().filter(|o| o.arch == arch) {
        latest.insert(&o.kernel, o);
    }
    let mut out = BTreeMap::new();
    for (kernel, run) in latest {
        for c in classify::classify_rechecked(outcomes, rechecks, &run.run_id, &run.host, window) {
            if c.arch == arch && &c.kernel == kernel {
                // The worst class when two kernels share a label.
                let class = out.entry((c.scenario.clone(), label(kernel))).or_insert(c.class);
                *class = (*class).min(c.class);
            }
        }
    }
    out
}

fn cell_of(seq: &[&Outcome], class: Option<Class>, runs: &BTreeMap<(&str, &str), &RunRow>) -> Cell {
    let statuses: Vec<&str> = seq.iter().map(|o| o.status.as_str()).collect();
    let first_bad = first_bad(&statuses).map(|(i, passed_before)| {
        let o = seq[i];
        FirstBad {
            run_id: o.run_id.clone(),
            started_at: o.started_at.clone(),
            commit: runs.get(&(o.run_id.as_str(), o.host.as_str())).and_then(|r| r.project_commit.clone()),
            passed_before,
        }
    });
    let tail = &seq[seq.len().saturating_sub(STRIP)..];
    Cell {
        status: seq.last().map_or_else(String::new, |o| o.status.clone()),
        class,
        strip: tail.iter().map(|o| (o.status.clone(), o.run_id.clone())).collect(),
        first_bad,
    }
}

/// The samples of one recorded figure (its value when it kept none).
fn samples_of(m: &Measured) -> Vec<f64> {
    if m.samples.is_empty() {
        vec![m.value]
    } else {
        m.samples.clone()
    }
}

/// Whether the latest samples differ from the pooled baseline beyond the noise.
pub fn flag(latest: &[f64], baseline: &[f64], higher_is_better: bool) -> Option<Flag> {
    let t = mann_whitney(latest, baseline)?;
    let (now, before) = (median(latest)?, median(baseline)?);
    if t.p >= ALPHA || before == 0.0 {
        return None;
    }
    let ratio = now / before;
    Some(Flag { p: t.p, ratio, better: (ratio > 1.0) == higher_is_better })
}

fn trends<'a>(measured: impl Iterator<Item = &'a Measured>) -> Vec<Trend> {
    let mut by: BTreeMap<(String, String, String), Vec<&Measured>> = BTreeMap::new();
    for m in measured {
        by.entry((m.scenario.clone(), m.name.clone(), label_of(&m.release, &m.profile))).or_default().push(m);
    }
    by.into_iter()
        .map(|((scenario, name, kernel), seq)| {
            let points = seq
                .iter()
                .map(|m| {
                    let s = samples_of(m);
                    Point {
                        run_id: m.run_id.clone(),
                        median: median(&s).unwrap_or(m.value),
                        min: s.iter().copied().fold(f64::INFINITY, f64::min),
                        max: s.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                    }
                })
                .collect();
            let (last, before) = seq.split_last().expect("a figure has a run");
            let baseline: Vec<f64> = before.iter().rev().take(BASELINE_RUNS).flat_map(|m| samples_of(m)).collect();
            let flag = flag(&samples_of(last), &baseline, last.higher_is_better);
            Trend {
                scenario,
                name,
                kernel,
                unit: last.unit.clone(),
                higher_is_better: last.higher_is_better,
                points,
                flag,
            }
        })
        .collect()
}

#[cfg(test)]
#[path = "dashboard/tests.rs"]
mod tests;
