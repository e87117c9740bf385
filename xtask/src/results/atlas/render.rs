//! The atlas's renderings but its page (`html`): `atlas.json` (the kernels, the grid, every
//! differing cell with its explanation, the stale rows), `kcidb.json` (every kernel's run in one
//! KCIDB document: a checkout per kernel, a build per kernel and arch, a test per cell) and the
//! text summary printed at the end.

use anyhow::Result;
use serde::Serialize;
use serde_json::{json, Value};

use super::explained::{Explanation, Judged, Listed};
use super::{Column, Grid, State};
use crate::results::model::Run;

/// `atlas.json`'s `schema_version`.
pub const SCHEMA_VERSION: u32 = 1;

/// The counts the summary and the page open with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Counts {
    pub rows: usize,
    pub uniform: usize,
    pub differing_rows: usize,
    pub differing_cells: usize,
    pub explained: usize,
    pub unexplained: usize,
    pub stale: usize,
}

impl Counts {
    pub fn of(grid: &Grid, judged: &Judged) -> Counts {
        let uniform = grid.rows.iter().filter(|r| r.uniform()).count();
        let unexplained = judged.unexplained().count();
        Counts {
            rows: grid.rows.len(),
            uniform,
            differing_rows: grid.rows.len() - uniform,
            differing_cells: judged.cells.len(),
            explained: judged.cells.len() - unexplained,
            unexplained,
            stale: judged.stale.len(),
        }
    }
}

#[derive(Serialize)]
struct DifferingOut<'a> {
    scenario: &'a str,
    kernel: &'a str,
    arch: &'a str,
    status: State,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'a str>,
    /// `debian arm64: pass`: the neighbours it differs from.
    against: Vec<String>,
    explanation: Option<&'a Explanation>,
}

/// `atlas.json`: pretty JSON, stamped `generated_at`.
pub fn json(grid: &Grid, judged: &Judged, generated_at: &str) -> Result<Vec<u8>> {
    let rows: Vec<Value> = grid
        .rows
        .iter()
        .map(|r| {
            let mut cells = serde_json::Map::new();
            for (k, column) in grid.kernels.iter().enumerate() {
                for (a, arch) in grid.arches.iter().enumerate() {
                    cells.insert(format!("{}/{arch}", column.label), serde_json::to_value(&r.cells[grid.at(k, a)])?);
                }
            }
            Ok(json!({ "scenario": r.scenario, "uniform": r.uniform(), "cells": cells }))
        })
        .collect::<Result<_>>()?;
    let differing: Vec<DifferingOut> = judged
        .cells
        .iter()
        .map(|(d, e)| DifferingOut {
            scenario: &grid.rows[d.row].scenario,
            kernel: &grid.kernels[d.kernel].label,
            arch: &grid.arches[d.arch],
            status: d.status,
            reason: grid.cell(d.row, d.kernel, d.arch).reason.as_deref(),
            against: against(grid, d),
            explanation: e.as_ref(),
        })
        .collect();
    let doc = json!({
        "schema_version": SCHEMA_VERSION,
        "generated_at": generated_at,
        "arches": grid.arches,
        "kernels": grid.kernels,
        "summary": Counts::of(grid, judged),
        "rows": rows,
        "differing": differing,
        "stale": judged.stale,
        "explanations_out_of_scope": judged.out_of_scope,
    });
    let mut bytes = serde_json::to_vec_pretty(&doc)?;
    bytes.push(b'\n');
    Ok(bytes)
}

/// The neighbours a cell differs from, in words: `debian arm64: pass`.
pub fn against(grid: &Grid, d: &super::Differing) -> Vec<String> {
    d.against
        .iter()
        .map(|n| format!("{} {}: {}", grid.kernels[n.kernel].label, grid.arches[n.arch], n.status.as_str()))
        .collect()
}

/// One KCIDB document of every kernel's run (`kcidb::render` of each, its logs under its own
/// folder's URL): the checkouts (one per source) and builds (one per kernel and arch) once,
/// every test of every run.
pub fn kcidb(runs: &[(&Run, String)]) -> Result<Vec<u8>> {
    let mut doc = json!({
        "version": { "major": crate::results::kcidb::MAJOR, "minor": crate::results::kcidb::MINOR },
        "checkouts": [], "builds": [], "tests": [],
    });
    for (run, url) in runs {
        let one: Value = serde_json::from_slice(&crate::results::kcidb::render(run, url)?)?;
        for key in ["checkouts", "builds", "tests"] {
            let Some(items) = one[key].as_array() else { continue };
            let Some(into) = doc[key].as_array_mut() else { continue };
            for item in items {
                if key == "tests" || !into.iter().any(|i| i["id"] == item["id"]) {
                    into.push(item.clone());
                }
            }
        }
    }
    let mut bytes = serde_json::to_vec_pretty(&doc)?;
    bytes.push(b'\n');
    Ok(bytes)
}

/// The summary printed at the end: kernels x arches, the rows, every unexplained cell and
/// stale row (the explained cells are in the files), each kernel's run folder.
pub fn summary(grid: &Grid, judged: &Judged) -> String {
    let c = Counts::of(grid, judged);
    let kernels: Vec<String> = grid.kernels.iter().map(Column::title).collect();
    let mut o = format!(
        "atlas: {} kernel(s) x {} arch(es): {} on {}\n",
        grid.kernels.len(),
        grid.arches.len(),
        kernels.join(", "),
        grid.arches.join(", ")
    );
    o.push_str(&format!(
        "rows: {} ({} uniform, {} differing); differing cells: {} ({} explained, {} unexplained); stale explanations: {}\n",
        c.rows, c.uniform, c.differing_rows, c.differing_cells, c.explained, c.unexplained, c.stale
    ));
    // The explained cells are in atlas.json and atlas.html; what fails is named here.
    for d in judged.unexplained() {
        o.push_str(&format!(
            "  UNEXPLAINED {} on {} {}: {} (against {})\n",
            grid.rows[d.row].scenario,
            grid.kernels[d.kernel].label,
            grid.arches[d.arch],
            d.status.as_str(),
            against(grid, d).join(", ")
        ));
    }
    for l in &judged.stale {
        o.push_str(&format!("  STALE {}:{}: {}\n", l.file, l.line, describe_row(l)));
    }
    for k in &grid.kernels {
        o.push_str(&format!("run {}: {}\n", k.label, k.run_dir.as_deref().unwrap_or("(nothing booted)")));
    }
    o
}

/// A list row in words: `registration/x arm64 >=7.3 abi-change`.
pub fn describe_row(l: &Listed) -> String {
    format!("{} {} {} {}: names no differing cell", l.scenario, l.arch, l.kernel, l.kind)
}
