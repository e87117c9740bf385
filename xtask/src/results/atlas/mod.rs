//! The regression atlas (`cargo xtask atlas`), sans-IO: the grid of scenarios x (kernel x
//! arch) made from one run model per kernel, the neighbour rule that says which cells differ
//! (`differing`), their explanations (`explained`: a `requires` skip, or a row of
//! `suites/atlas-explained.tsv`), and the renderings (`render`: `atlas.json`, `atlas.html`, the
//! merged `kcidb.json`, the text summary).
//!
//! The neighbour rule. Kernels are ordered by version (their release; a kernel without one
//! last, in the order given). A cell is the status of one scenario on one kernel and arch
//! (`missing` when that run has no such scenario, or no such arch). A cell *differs* when:
//!
//! - (a change) it is not on the oldest kernel and its status is not that of the same arch on
//!   the next older kernel: the behaviour changed between those two versions, and the newer
//!   cell, where the new behaviour shows, carries the difference; or
//! - (an arch outlier) its status is not the one prevailing on its kernel: the status most of
//!   that kernel's arches have; a tie goes to the status most common in the whole row, then to
//!   a status that ran over `skip` and `missing` (so the arch that skips is the odd one), then
//!   to the one of the first arch (in `arch.rs`'s order) that has it.
//!
//! A row whose cells all agree is *uniform* and has no differing cell; any other row has at
//! least one.

pub mod explained;
pub mod html;
pub mod render;

use serde::Serialize;

use super::model::{Run, Status};
use crate::suites::Version;

/// One kernel of the atlas as its run left it.
#[derive(Debug, Clone)]
pub struct KernelRun<'a> {
    /// `debian`, `debian-7.3`, a tarball's stem or a tree's name (`matrix`'s labels).
    pub label: String,
    /// The `run` flags that select it (`--kernel-version 7.3`; empty for Debian's source).
    pub flags: String,
    /// Its run's model; `None` when nothing booted.
    pub run: Option<&'a Run>,
    /// Its run folder, as the atlas links it (relative to the atlas's folder).
    pub link: Option<String>,
}

/// A cell's state: the scenario's status in that run, or missing from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum State {
    Ran(Status),
    Missing,
}

impl State {
    pub fn as_str(self) -> &'static str {
        match self {
            State::Ran(s) => s.as_str(),
            State::Missing => "missing",
        }
    }
}

impl Serialize for State {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// One scenario on one kernel and arch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Cell {
    pub status: State,
    /// Why: its skip or xfail reason, as the run says it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// A kernel column of the grid, oldest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Column {
    pub label: String,
    pub flags: String,
    /// The release of its first arch's kernel (`6.12.117-arm64`), when its run recorded one.
    pub release: Option<String>,
    /// The version it starts with (`6.12.117`), which orders the columns and kernel ranges match.
    pub version: Option<String>,
    /// Its source in words (`Debian linux-source-6.12 6.12.117-1~deb12u1`).
    pub source: Option<String>,
    pub run_id: Option<String>,
    /// Its run folder, relative to the atlas's folder.
    pub run_dir: Option<String>,
    /// Per arch: the release and the build key of the kernel booted there.
    pub arches: Vec<ArchKernel>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ArchKernel {
    pub arch: String,
    pub release: Option<String>,
    pub build_key: Option<String>,
    /// The run's verdict on that arch (`pass`, `fail`, ...); `missing` when it did not boot.
    pub verdict: String,
}

impl Column {
    /// The version its release starts with, which orders the columns and kernel ranges match.
    pub fn version(&self) -> Option<Version> {
        self.release.as_deref().and_then(Version::from_release)
    }

    /// `debian-7.3 (7.3.4)`, as the reports name it.
    pub fn title(&self) -> String {
        match &self.release {
            Some(r) => format!("{} ({r})", self.label),
            None => self.label.clone(),
        }
    }
}

/// One scenario: its cells, kernel by kernel, arch by arch (`Grid::at`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Row {
    pub scenario: String,
    pub cells: Vec<Cell>,
}

impl Row {
    pub fn uniform(&self) -> bool {
        self.cells.windows(2).all(|w| w[0].status == w[1].status)
    }
}

/// Scenarios x (kernel x arch).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Grid {
    pub kernels: Vec<Column>,
    pub arches: Vec<String>,
    pub rows: Vec<Row>,
}

impl Grid {
    /// The grid of these kernels' runs on these arches, the kernels ordered by version, the
    /// rows in the order the runs first name them.
    pub fn build(kernels: &[KernelRun], arches: &[&str]) -> Grid {
        // An arch no run has (none of the kernels booted it, or `--from` folders of other
        // arches) is no column: its cells would all be `missing`, and outvote the arches that ran.
        let present: Vec<&str> = arches
            .iter()
            .copied()
            .filter(|a| kernels.iter().filter_map(|k| k.run).any(|r| r.arch(a).is_some()))
            .collect();
        let arches: &[&str] = if present.is_empty() { arches } else { &present };
        let mut order: Vec<(usize, Column)> = kernels.iter().map(column).enumerate().collect();
        order.sort_by_key(|(i, c)| (c.version().is_none(), c.version(), *i));
        let runs: Vec<Option<&Run>> = order.iter().map(|(i, _)| kernels[*i].run).collect();
        let mut names: Vec<String> = Vec::new();
        for run in runs.iter().flatten() {
            for n in run.scenario_names() {
                if !names.iter().any(|m| m == n) {
                    names.push(n.to_string());
                }
            }
        }
        let rows = names
            .into_iter()
            .map(|scenario| {
                let mut cells = Vec::new();
                for run in &runs {
                    for arch in arches {
                        let found = run.and_then(|r| r.arch(arch)).and_then(|a| a.scenario(&scenario));
                        cells.push(match found {
                            Some(s) => Cell { status: State::Ran(s.status), reason: s.reason.clone() },
                            None => Cell { status: State::Missing, reason: None },
                        });
                    }
                }
                Row { scenario, cells }
            })
            .collect();
        let kernels = order.into_iter().map(|(_, c)| c).collect();
        Grid { kernels, arches: arches.iter().map(|a| a.to_string()).collect(), rows }
    }

    /// The index of kernel `k`, arch `a`'s cell in a row.
    pub fn at(&self, k: usize, a: usize) -> usize {
        k * self.arches.len() + a
    }

    pub fn cell(&self, row: usize, k: usize, a: usize) -> &Cell {
        &self.rows[row].cells[self.at(k, a)]
    }

    /// The status prevailing on kernel `k` in `row` (see the module's rule).
    pub fn prevailing(&self, row: usize, k: usize) -> State {
        let cells = &self.rows[row].cells;
        let count = |s: State, of: &[Cell]| of.iter().filter(|c| c.status == s).count();
        let here = &cells[self.at(k, 0)..self.at(k + 1, 0)];
        // Candidates in arch order; the first of the best wins the last tie.
        let mut best: Option<((usize, usize, bool), State)> = None;
        for c in here {
            let ran = !matches!(c.status, State::Missing | State::Ran(Status::Skip));
            let key = (count(c.status, here), count(c.status, cells), ran);
            if best.is_none_or(|(b, _)| key > b) {
                best = Some((key, c.status));
            }
        }
        best.map_or(State::Missing, |(_, s)| s)
    }

    /// Every differing cell, row by row, kernel by kernel, arch by arch.
    pub fn differing(&self) -> Vec<Differing> {
        let mut out = Vec::new();
        for row in 0..self.rows.len() {
            if self.rows[row].uniform() {
                continue;
            }
            for k in 0..self.kernels.len() {
                let prevailing = self.prevailing(row, k);
                for a in 0..self.arches.len() {
                    let status = self.cell(row, k, a).status;
                    let mut against = Vec::new();
                    if k > 0 && self.cell(row, k - 1, a).status != status {
                        against.push(Neighbour { kernel: k - 1, arch: a, status: self.cell(row, k - 1, a).status });
                    }
                    if self.arches.len() > 1 && status != prevailing {
                        let others = (0..self.arches.len()).filter(|b| self.cell(row, k, *b).status == prevailing);
                        against.extend(others.map(|b| Neighbour { kernel: k, arch: b, status: prevailing }));
                    }
                    if !against.is_empty() {
                        out.push(Differing { row, kernel: k, arch: a, status, against });
                    }
                }
            }
        }
        out
    }
}

/// A differing cell and the neighbours it differs from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Differing {
    pub row: usize,
    pub kernel: usize,
    pub arch: usize,
    pub status: State,
    /// The older kernel's cell on the same arch (a change), then the arches whose status
    /// prevails on the same kernel (an outlier).
    pub against: Vec<Neighbour>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Neighbour {
    pub kernel: usize,
    pub arch: usize,
    pub status: State,
}

/// A kernel's column from its run: its release and source from its first arch with a kernel.
fn column(k: &KernelRun) -> Column {
    let first = k.run.and_then(|r| r.arches.iter().find_map(|a| a.kernel.as_ref()));
    let arches = k
        .run
        .map(|r| {
            r.arches
                .iter()
                .map(|a| ArchKernel {
                    arch: a.arch.clone(),
                    release: a.kernel.as_ref().map(|k| k.release.clone()),
                    build_key: a.kernel.as_ref().map(|k| k.build_key.clone()),
                    verdict: a.verdict.kind.clone(),
                })
                .collect()
        })
        .unwrap_or_default();
    Column {
        label: k.label.clone(),
        flags: k.flags.clone(),
        release: first.map(|f| f.release.clone()),
        version: first.and_then(|f| Version::from_release(&f.release)).map(|v| v.to_string()),
        source: first.map(|f| f.source.clone()),
        run_id: k.run.map(|r| r.run_id.clone()),
        run_dir: k.link.clone(),
        arches,
    }
}

#[cfg(test)]
mod tests;
