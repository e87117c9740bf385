//! The run model's coverage part (`coverage/summary.json`, shown by the reports): per arch and
//! for their union, what the scenarios executed of the instrumented sources, and a patch's
//! changed lines against what ran.

use serde::{Deserialize, Serialize};

use super::Run;

/// What a coverage run's scenarios executed of the instrumented sources, per arch and for the
/// union of the arches (the last row, arch `all`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CoverageSummary {
    /// The instrumented sources, relative to the kernel tree.
    pub files: Vec<String>,
    pub rows: Vec<CoverageRow>,
    /// The annotated sources, relative to the run folder (`coverage/index.html`).
    pub index: String,
    /// Problems met reading the data (a scenario without a snapshot), one sentence each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<String>,
    /// A patched kernel's: what its patches add or change in the instrumented sources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patch: Option<PatchLines>,
}

/// The lines a patch set adds or changes in the instrumented sources, against what ran.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PatchLines {
    /// Added or changed lines.
    pub changed: u64,
    /// Of those, the ones that compile to code on some arch of the run.
    pub executable: u64,
    /// Of those, the ones some scenario executed on some arch.
    pub executed: u64,
    /// The executable ones no scenario executed on any arch: where a bug would go unseen.
    pub blind_spots: Vec<BlindSpot>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlindSpot {
    pub file: String,
    pub line: u32,
    pub text: String,
}

impl Run {
    /// A coverage run's patch lines that no scenario executed (none without a patch).
    pub fn blind_spots(&self) -> &[BlindSpot] {
        self.coverage.as_ref().and_then(|c| c.patch.as_ref()).map_or(&[], |p| p.blind_spots.as_slice())
    }
}

impl PatchLines {
    /// `3 of the patch's 5 executable changed lines ran; 2 blind spots`, and each blind spot as
    /// `file:line: text`.
    pub fn describe(&self) -> Vec<String> {
        let mut out = vec![format!(
            "the patch adds or changes {} line(s) in the instrumented sources, {} executable: {} executed by some \
             scenario, {} by none",
            self.changed,
            self.executable,
            self.executed,
            self.blind_spots.len()
        )];
        out.extend(self.blind_spots.iter().map(|b| format!("blind spot {}:{}: {}", b.file, b.line, b.text.trim())));
        out
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CoverageRow {
    /// An arch, or `all` for the union.
    pub arch: String,
    /// Scenarios whose counters were read.
    pub scenarios: usize,
    #[serde(flatten)]
    pub totals: CoverageTotals,
    /// The same without the boot's own counters (what ran before the first scenario: the
    /// init, the group's creation): what the scenarios alone executed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scenarios_only: Option<CoverageTotals>,
    /// The tracefile, relative to the run folder.
    pub tracefile: String,
}

/// Found and hit, for lines, branches and functions: a tracefile's, a file's or a run's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CoverageTotals {
    pub lines_found: u64,
    pub lines_hit: u64,
    pub branches_found: u64,
    pub branches_hit: u64,
    pub functions_found: u64,
    pub functions_hit: u64,
}

/// `hit` of `found` as a percentage; 0 when nothing was found.
fn percent(hit: u64, found: u64) -> f64 {
    if found == 0 {
        0.0
    } else {
        100.0 * hit as f64 / found as f64
    }
}

impl CoverageTotals {
    pub fn add(&mut self, o: &CoverageTotals) {
        self.lines_found += o.lines_found;
        self.lines_hit += o.lines_hit;
        self.branches_found += o.branches_found;
        self.branches_hit += o.branches_hit;
        self.functions_found += o.functions_found;
        self.functions_hit += o.functions_hit;
    }

    pub fn line_pct(&self) -> f64 {
        percent(self.lines_hit, self.lines_found)
    }

    pub fn branch_pct(&self) -> f64 {
        percent(self.branches_hit, self.branches_found)
    }

    /// `lines 812/1003 (81.0%), branches 402/750 (53.6%), functions 60/75`.
    pub fn describe(&self) -> String {
        format!(
            "lines {}/{} ({:.1}%), branches {}/{} ({:.1}%), functions {}/{}",
            self.lines_hit,
            self.lines_found,
            self.line_pct(),
            self.branches_hit,
            self.branches_found,
            self.branch_pct(),
            self.functions_hit,
            self.functions_found
        )
    }
}
