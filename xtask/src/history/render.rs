//! The history's answers as text and JSON (sans-IO): a run's classes and kernel reports
//! (`history show`) and the
//! scenarios that flip (`history flakes`).

use serde::Serialize;

use super::classify::{Class, Classed, Flaky};
use super::findings::Marked;
use super::rows::RunRow;

/// The `schema_version` of `history --json` and `history flakes --json`.
pub const JSON_SCHEMA_VERSION: u32 = 1;

#[derive(Serialize)]
struct ShowJson<'a> {
    schema_version: u32,
    store: &'a str,
    run: &'a RunRow,
    runs_recorded: usize,
    window: usize,
    counts: std::collections::BTreeMap<&'static str, usize>,
    cells: Vec<&'a Classed>,
    /// The run's kernel reports, each `known` (with the first run that had it) or `new`.
    findings: &'a [Marked],
}

/// How many cells of each class (the classes with none left out).
fn counts(classed: &[Classed]) -> std::collections::BTreeMap<&'static str, usize> {
    let mut out = std::collections::BTreeMap::new();
    for c in classed {
        *out.entry(c.class.as_str()).or_insert(0) += 1;
    }
    out
}

/// What `show` tells about one run.
pub struct Shown<'a> {
    pub store: &'a str,
    pub run: &'a RunRow,
    pub runs_recorded: usize,
    pub window: usize,
    pub classed: &'a [Classed],
    pub findings: &'a [Marked],
}

/// `history show --json`: every cell, stable ones too.
pub fn show_json(s: &Shown) -> String {
    let doc = ShowJson {
        schema_version: JSON_SCHEMA_VERSION,
        store: s.store,
        run: s.run,
        runs_recorded: s.runs_recorded,
        window: s.window,
        counts: counts(s.classed),
        cells: s.classed.iter().collect(),
        findings: s.findings,
    };
    serde_json::to_string_pretty(&doc).expect("plain data") + "\n"
}

/// `history show`: a heading, the counts, then a line per cell (stable and skipped ones only
/// with `verbose`).
pub fn show_text(s: &Shown, verbose: bool) -> String {
    let r = s.run;
    let mut out = format!(
        "run {} on {} ({}, {}), against {} recorded run(s) in {}, window {}\n",
        r.run_id, r.host, r.started_at, r.verdict, s.runs_recorded, s.store, s.window
    );
    let tally: Vec<String> = Class::ALL
        .iter()
        .filter_map(|c| counts(s.classed).get(c.as_str()).map(|n| format!("{n} {}", c.as_str())))
        .collect();
    out.push_str(&format!("{}\n", if tally.is_empty() { "no scenario".to_string() } else { tally.join(", ") }));
    for c in s.classed {
        if !verbose && matches!(c.class, Class::Stable | Class::Skipped) {
            continue;
        }
        let mut reason = c.reason.as_deref().map(|r| format!(": {r}")).unwrap_or_default();
        if let Some(again) = &c.rerun {
            reason.push_str(&format!(" (re-run in a fresh boot: {again})"));
        }
        out.push_str(&format!(
            "{:<18} {} {} {} [{}]{reason}\n",
            c.class.as_str(),
            c.arch,
            c.scenario,
            c.kernel.describe(),
            c.window.join(" ")
        ));
    }
    out.push_str(&super::findings::text(s.findings));
    out
}

#[derive(Serialize)]
struct FlakesJson<'a> {
    schema_version: u32,
    store: &'a str,
    runs_recorded: usize,
    scenarios: &'a [Flaky],
}

/// `history flakes --json`.
pub fn flakes_json(store: &str, runs_recorded: usize, flaky: &[Flaky]) -> String {
    let doc = FlakesJson { schema_version: JSON_SCHEMA_VERSION, store, runs_recorded, scenarios: flaky };
    serde_json::to_string_pretty(&doc).expect("plain data") + "\n"
}

/// `history flakes`: a line per scenario, then one per arch and kernel where it flipped.
pub fn flakes_text(store: &str, runs_recorded: usize, flaky: &[Flaky]) -> String {
    let mut out = format!("{} scenario(s) flipped in {runs_recorded} recorded run(s) in {store}\n", flaky.len());
    for f in flaky {
        out.push_str(&format!("{:>4} flip(s) {}\n", f.flips, f.scenario));
        for c in &f.cells {
            out.push_str(&format!(
                "     {:>4} {} {}: {} of {} failed\n",
                c.flips,
                c.arch,
                c.kernel.describe(),
                c.failed,
                c.runs
            ));
        }
    }
    out
}
