//! `compare`: a baseline and a current side (each one run or several repeats) classified per
//! arch and scenario, and their metrics judged against the noise measured in the runs themselves.
//!
//! The rules, in order, for one arch and scenario (boots count too, as `boot <name>`, by their
//! health outside the scenarios):
//!
//! - `new`: no result on the base side; `removed`: none on the current side.
//! - `flaky`: one side's repeats disagree on whether it failed (pass and fail, xfail and xpass:
//!   a status counts as failed when [`Status::is_failure`] says so, so `skip` sits with `pass`
//!   and `error`/`not-run` with `fail`); or the scenario carries an `xfail` mark (nextest and
//!   KernelCI treat a test whose result changes on a retry of the same code as flaky; a mark
//!   is the suite saying so ahead of time) and is `xfail` on one side and `xpass` on the other.
//!   Flaky never gates: it is listed with every status of both sides.
//! - otherwise each side's repeats agree: `regressed` (passed, now fails: the only class that
//!   makes `compare` exit 1), `fixed`, `still failing` or `unchanged`.
//!
//! A metric is the pooled `samples` of every repeat of a side (its `value` when it has none).
//! Its noise is the larger of the two sides' MAD scaled to a standard deviation (×1.4826). A
//! change counts only when both sides have at least [`MIN_SAMPLES`] samples, the medians differ
//! by more than [`NOISE_FACTOR`] times that noise, and the interquartile ranges do not overlap;
//! with fewer samples it is shown as `unmeasured` and never flagged. Samples within one run
//! miss the run-to-run variation (under TCG, host load moves a whole run: two runs of one
//! kernel differed beyond their own noise on a quarter of the figures), so a change is
//! `confirmed` only when each side pools at least [`MIN_RUNS`] runs, and only a confirmed
//! `worse` makes `--fail-on-metrics` exit 1.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Result;
use serde::{Deserialize, Serialize};

use super::model::{Run, Status, SCHEMA_VERSION};
use crate::support::exit::{error, Kind};

/// The `schema_version` of `compare.json`.
pub const COMPARE_SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Class {
    Regressed,
    Flaky,
    StillFailing,
    Fixed,
    New,
    Removed,
    /// Not run on a side because another scenario broke that kernel first: no verdict of
    /// its own, so neither a regression nor a fix (the culprit carries the change).
    Collateral,
    Unchanged,
}

impl Class {
    pub const ALL: [Class; 8] = [
        Class::Regressed,
        Class::Flaky,
        Class::StillFailing,
        Class::Fixed,
        Class::New,
        Class::Removed,
        Class::Collateral,
        Class::Unchanged,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Class::Regressed => "regressed",
            Class::Flaky => "flaky",
            Class::StillFailing => "still failing",
            Class::Fixed => "fixed",
            Class::New => "new",
            Class::Removed => "removed",
            Class::Collateral => "collateral",
            Class::Unchanged => "unchanged",
        }
    }
}

/// One side as read: where each repeat came from and its run id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SideInfo {
    pub runs: Vec<RunRef>,
    /// Per arch: the kernel release, source and patches (the first repeat's).
    pub kernels: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRef {
    pub run_id: String,
    pub path: String,
}

/// One arch and scenario (or boot) of the comparison.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    pub arch: String,
    /// `suite/scenario`, or `boot <name>` for a boot's health outside its scenarios.
    pub scenario: String,
    pub class: Class,
    /// The statuses of the base side's repeats (empty when absent there).
    pub base: Vec<Status>,
    pub current: Vec<Status>,
    /// Why, in words: the current side's reason or last log line for a failure, the rule that
    /// made it flaky.
    pub note: Option<String>,
}

/// `compare.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    pub schema_version: u32,
    pub base: SideInfo,
    pub current: SideInfo,
    /// Every arch and scenario, arches in first-seen order, then the worst class first.
    pub entries: Vec<Entry>,
    pub metrics: Vec<MetricChange>,
    /// How many entries fell in each class (`regressed`, `flaky`, ...).
    pub counts: BTreeMap<String, usize>,
}

impl Comparison {
    pub fn regressions(&self) -> usize {
        self.entries.iter().filter(|e| e.class == Class::Regressed).count()
    }

    pub fn worse_metrics(&self) -> usize {
        self.metrics.iter().filter(|m| m.verdict == MetricVerdict::Worse).count()
    }

    /// Metrics worse beyond noise with repeats on both sides.
    pub fn confirmed_worse_metrics(&self) -> usize {
        self.metrics.iter().filter(|m| m.verdict == MetricVerdict::Worse && m.confirmed).count()
    }

    /// 1 on a regressed scenario (or a confirmed metric worse beyond noise, when
    /// `metrics_gate`), else 0.
    pub fn exit_code(&self, metrics_gate: bool) -> u8 {
        if self.regressions() > 0 || (metrics_gate && self.confirmed_worse_metrics() > 0) {
            Kind::TestFailed.code()
        } else {
            0
        }
    }
}

/// Reads one side: a `run.json`, a run folder (its `run.json`, else its logs), or a folder of
/// run folders (each a repeat; a `latest` link is skipped). Every error is bad input (exit 128).
pub fn load_side(path: &Path) -> Result<Vec<(PathBuf, Run)>> {
    let bad = |m: String| error(Kind::BadInput, m);
    let meta = std::fs::metadata(path).map_err(|e| bad(format!("{}: {e}", path.display())))?;
    if meta.is_file() {
        return Ok(vec![(path.to_path_buf(), read_run_json(path)?)]);
    }
    if let Some(run) = read_run_folder(path)? {
        return Ok(vec![(path.to_path_buf(), run)]);
    }
    let mut runs = Vec::new();
    let mut entries: Vec<_> = std::fs::read_dir(path)
        .map_err(|e| bad(format!("{}: {e}", path.display())))?
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .collect();
    entries.sort();
    for dir in entries {
        if let Some(run) = read_run_folder(&dir)? {
            runs.push((dir, run));
        }
    }
    if runs.is_empty() {
        return Err(bad(format!(
            "{}: not a run.json, a run folder (run.json or <arch>/verdict.json) or a folder of run folders",
            path.display()
        )));
    }
    Ok(runs)
}

/// A run folder's model: its `run.json`, else derived from its logs; `None` when it is neither.
fn read_run_folder(dir: &Path) -> Result<Option<Run>> {
    let json = dir.join(crate::judging::run_folder::RUN_JSON);
    if json.is_file() {
        return read_run_json(&json).map(Some);
    }
    let has_boot = std::fs::read_dir(dir)
        .map(|rd| rd.flatten().any(|e| e.path().join(crate::judging::run_folder::VERDICT).is_file()))
        .unwrap_or(false);
    if has_boot {
        return super::collect::load(dir, jiff::Timestamp::now()).map(Some);
    }
    Ok(None)
}

/// A `run.json`, its schema version checked first; errors name the file and the field.
pub fn read_run_json(file: &Path) -> Result<Run> {
    let bad = |m: String| error(Kind::BadInput, m);
    let bytes = std::fs::read(file).map_err(|e| bad(format!("{}: {e}", file.display())))?;
    let value: serde_json::Value = serde_json::from_slice(&bytes)
        .map_err(|e| bad(format!("{}:{}:{}: {e}", file.display(), e.line(), e.column())))?;
    match value.get("schema_version").map(|v| v.as_u64()) {
        None => return Err(bad(format!("{}: field `schema_version` is missing: not a run.json", file.display()))),
        Some(Some(v)) if v == u64::from(SCHEMA_VERSION) => {}
        Some(v) => {
            return Err(bad(format!(
                "{}: field `schema_version` is {}, this xtask reads {SCHEMA_VERSION} (re-render it with `cargo xtask \
                 report --from` on its folder)",
                file.display(),
                v.map_or("not a number".to_string(), |v| v.to_string())
            )))
        }
    }
    serde_path_to_error::deserialize(value)
        .map_err(|e| bad(format!("{}: field `{}`: {}", file.display(), e.path(), e.inner())))
}

/// One (arch, scenario)'s statuses on one side, with the last repeat's note.
#[derive(Default)]
struct Results {
    statuses: Vec<Status>,
    note: Option<String>,
}

/// Arch -> scenario -> results, keeping first-seen order of arches and scenarios.
type Side = Vec<(String, Vec<(String, Results)>)>;

fn gather(runs: &[Run]) -> Side {
    let mut side: Side = Vec::new();
    for run in runs {
        for a in &run.arches {
            let idx = match side.iter().position(|(n, _)| *n == a.arch) {
                Some(i) => i,
                None => {
                    side.push((a.arch.clone(), Vec::new()));
                    side.len() - 1
                }
            };
            let scenarios = &mut side[idx].1;
            let mut add = |name: String, status: Status, note: Option<String>| {
                let r = match scenarios.iter().position(|(n, _)| *n == name) {
                    Some(i) => &mut scenarios[i].1,
                    None => {
                        scenarios.push((name, Results::default()));
                        &mut scenarios.last_mut().expect("just pushed").1
                    }
                };
                r.statuses.push(status);
                if note.is_some() {
                    r.note = note;
                }
            };
            for b in &a.boots {
                let (status, why) = b.health();
                add(format!("boot {}", b.name), status, status.is_failure().then_some(why));
            }
            for s in &a.scenarios {
                let note = if s.status.is_failure() {
                    // The failing step rather than the scenario process's own exit line.
                    let step = s.log.iter().rev().find(|l| !l.starts_with("exited with")).or(s.log.last());
                    s.reason.clone().or_else(|| step.cloned()).or_else(|| s.judged.clone())
                } else if s.status == Status::Collateral {
                    s.reason.clone()
                } else {
                    None
                };
                add(s.name.clone(), s.status, note);
            }
        }
    }
    side
}

fn side_info(runs: &[(PathBuf, Run)]) -> SideInfo {
    let mut kernels = BTreeMap::new();
    for (_, r) in runs {
        for a in &r.arches {
            kernels.entry(a.arch.clone()).or_insert_with(|| match &a.kernel {
                Some(k) => {
                    let patches = if k.patches.is_empty() {
                        "no patches".to_string()
                    } else {
                        k.patches.iter().map(|p| p.name.as_str()).collect::<Vec<_>>().join(" + ")
                    };
                    format!("{} from {}, {patches}", k.release, k.source)
                }
                None => "kernel not recorded".to_string(),
            });
        }
    }
    SideInfo {
        runs: runs.iter().map(|(p, r)| RunRef { run_id: r.run_id.clone(), path: p.display().to_string() }).collect(),
        kernels,
    }
}

/// `pass x2, fail` for a list of statuses.
pub fn describe(statuses: &[Status]) -> String {
    if statuses.is_empty() {
        return "absent".to_string();
    }
    let mut counts: Vec<(Status, usize)> = Vec::new();
    for s in statuses {
        match counts.iter_mut().find(|(x, _)| x == s) {
            Some((_, n)) => *n += 1,
            None => counts.push((*s, 1)),
        }
    }
    counts
        .iter()
        .map(|(s, n)| if *n == 1 { s.as_str().to_string() } else { format!("{} x{n}", s.as_str()) })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The class of one arch and scenario from both sides' statuses (the rules in the module doc).
pub fn classify(base: &[Status], current: &[Status]) -> (Class, Option<String>) {
    let mixed = |s: &[Status]| s.iter().any(|x| x.is_failure()) && s.iter().any(|x| !x.is_failure());
    let failed = |s: &[Status]| s.iter().all(|x| x.is_failure());
    match (base.is_empty(), current.is_empty()) {
        (true, true) => return (Class::Unchanged, None),
        (true, false) => return (Class::New, None),
        (false, true) => return (Class::Removed, None),
        _ => {}
    }
    let flaky_side = match (mixed(base), mixed(current)) {
        (true, true) => Some("both sides"),
        (true, false) => Some("the base side"),
        (false, true) => Some("the current side"),
        (false, false) => None,
    };
    if let Some(side) = flaky_side {
        return (Class::Flaky, Some(format!("repeats on {side} disagree on whether it failed")));
    }
    let has = |s: &[Status], x: Status| s.contains(&x);
    // Collateral: the kernel was broken by another scenario before this one could run.
    for (side, statuses) in [("current", current), ("base", base)] {
        if has(statuses, Status::Collateral) {
            return (Class::Collateral, Some(format!("not run on the {side} side: another scenario broke the kernel")));
        }
    }
    // A known kernel bug (xfail with `fixed_by`): its fix arrived, or went.
    if base.iter().all(|s| *s == Status::Xfail) && current.iter().all(|s| *s == Status::Fixed) {
        return (Class::Fixed, Some("a known kernel bug: the current kernel carries its fix".to_string()));
    }
    if base.iter().all(|s| *s == Status::Fixed) && current.iter().all(|s| *s == Status::Xfail) {
        return (
            Class::Regressed,
            Some("a known kernel bug: the base kernel carries its fix, the current one not".to_string()),
        );
    }
    if (has(base, Status::Xfail) && has(current, Status::Xpass))
        || (has(base, Status::Xpass) && has(current, Status::Xfail))
    {
        return (Class::Flaky, Some("marked xfail, and xfail on one side but xpass on the other".to_string()));
    }
    let class = match (failed(base), failed(current)) {
        (false, true) => Class::Regressed,
        (true, false) => Class::Fixed,
        (true, true) => Class::StillFailing,
        (false, false) => Class::Unchanged,
    };
    (class, None)
}

/// Compares two sides; each is one or more runs (repeats).
pub fn compare(base: &[(PathBuf, Run)], current: &[(PathBuf, Run)]) -> Comparison {
    let base_runs: Vec<Run> = base.iter().map(|(_, r)| r.clone()).collect();
    let cur_runs: Vec<Run> = current.iter().map(|(_, r)| r.clone()).collect();
    let (b, c) = (gather(&base_runs), gather(&cur_runs));
    let mut arches: Vec<&str> = b.iter().map(|(a, _)| a.as_str()).collect();
    for (a, _) in &c {
        if !arches.contains(&a.as_str()) {
            arches.push(a);
        }
    }
    let empty = Vec::new();
    let mut entries = Vec::new();
    for arch in arches {
        let bs = b.iter().find(|(a, _)| a == arch).map_or(&empty, |(_, s)| s);
        let cs = c.iter().find(|(a, _)| a == arch).map_or(&empty, |(_, s)| s);
        let mut names: Vec<&str> = bs.iter().map(|(n, _)| n.as_str()).collect();
        for (n, _) in cs {
            if !names.contains(&n.as_str()) {
                names.push(n);
            }
        }
        let mut mine = Vec::new();
        for name in names {
            let none = Results::default();
            let br = bs.iter().find(|(n, _)| n == name).map_or(&none, |(_, r)| r);
            let cr = cs.iter().find(|(n, _)| n == name).map_or(&none, |(_, r)| r);
            let (class, rule) = classify(&br.statuses, &cr.statuses);
            let note = match class {
                Class::Flaky => rule,
                Class::Regressed | Class::StillFailing | Class::New => cr.note.clone(),
                Class::Fixed | Class::Removed => br.note.as_ref().map(|n| format!("base: {n}")),
                Class::Unchanged => None,
                Class::Collateral => cr.note.clone().or_else(|| br.note.clone()).or(rule),
            };
            mine.push(Entry {
                arch: arch.to_string(),
                scenario: name.to_string(),
                class,
                base: br.statuses.clone(),
                current: cr.statuses.clone(),
                note,
            });
        }
        mine.sort_by_key(|e| e.class);
        entries.extend(mine);
    }
    let mut counts = BTreeMap::new();
    for e in &entries {
        *counts.entry(e.class.as_str().replace(' ', "-")).or_insert(0) += 1;
    }
    Comparison {
        schema_version: COMPARE_SCHEMA_VERSION,
        base: side_info(base),
        current: side_info(current),
        entries,
        metrics: metrics(&base_runs, &cur_runs),
        counts,
    }
}

/// Where `compare.json`/`compare.md` go by default: CURRENT itself when it is a folder, else
/// the folder of its `run.json`.
pub fn default_out(current: &Path) -> PathBuf {
    if current.is_dir() {
        current.to_path_buf()
    } else {
        current.parent().map_or_else(|| PathBuf::from("."), Path::to_path_buf)
    }
}

/// Writes `compare.json` and `compare.md` into `out`; returns their paths.
pub fn write(c: &Comparison, out: &Path) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(out).map_err(|e| error(Kind::BadInput, format!("--out {}: {e}", out.display())))?;
    let mut json = serde_json::to_vec_pretty(c)?;
    json.push(b'\n');
    let files = [(out.join("compare.json"), json), (out.join("compare.md"), render_markdown(c))];
    for (path, bytes) in &files {
        crate::support::files::write_atomic(path, bytes)?;
    }
    Ok(files.into_iter().map(|(p, _)| p).collect())
}

/// `cargo xtask compare BASE CURRENT`: prints the report, writes the files, returns the exit code.
pub fn run(base: &Path, current: &Path, out: Option<&Path>, metrics_gate: bool, verbose: bool) -> Result<u8> {
    let out = out.map_or_else(|| default_out(current), Path::to_path_buf);
    report(&load_side(base)?, &load_side(current)?, &out, metrics_gate, verbose)
}

/// Compares two sides already read, prints the report, writes the files into `out` and
/// returns the exit code.
pub fn report(b: &[(PathBuf, Run)], c: &[(PathBuf, Run)], out: &Path, metrics_gate: bool, verbose: bool) -> Result<u8> {
    let cmp = compare(b, c);
    print!("{}", render_text(&cmp, verbose));
    let written = write(&cmp, out)?;
    let names: Vec<String> = written.iter().map(|p| p.display().to_string()).collect();
    crate::support::progress::line(format!("comparison written to {}", names.join(", ")));
    Ok(cmp.exit_code(metrics_gate))
}

mod metrics;
mod render;

use metrics::metrics;
pub use metrics::{stats, MetricChange, MetricVerdict, Stats, MIN_RUNS, MIN_SAMPLES, NOISE_FACTOR};
pub use render::{render_markdown, render_text};

#[cfg(test)]
mod tests;
