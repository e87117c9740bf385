//! Why an atlas cell differs: a `requires` skip explains itself (the cell is that skip, or
//! every neighbour it differs from is one); any other difference needs a row of the tracked
//! list, `suites/atlas-explained.tsv`, parsed here (sans-IO: the caller reads the file and says
//! which write-ups exist). A row that matches no differing cell of a grid that could show it
//! is stale.
//!
//! The list: `#` comments and blank lines, then one row per difference, six tab-separated
//! fields: the scenario (`suite/name`), the arch (or `*`), the kernel (a version range such as
//! `>=7.2` or `>=6.13,<7.3`, a kernel label such as `debian-7.3`, or `*`), the kind, its
//! reference, and a note. Kinds: `abi-change` (the reference is the upstream commit: its id,
//! 12 to 40 hex digits, a space, then its subject), `bug` (the reference is its write-up's
//! path under `patches/upstream/`), `test` (the scenario was wrong: the reference says how it
//! was fixed).

use serde::Serialize;

use super::{Differing, Grid, State};
use crate::suites::KernelRange;

/// The list's place in the checkout.
pub const LIST: &str = "suites/atlas-explained.tsv";

const FIELDS: [&str; 6] = ["scenario", "arch", "kernel", "kind", "reference", "note"];

/// One row of the list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Listed {
    /// The list it is a row of, as the atlas was given it.
    pub file: String,
    /// 1-based line in the list.
    pub line: usize,
    pub scenario: String,
    pub arch: String,
    pub kernel: String,
    pub kind: String,
    pub reference: String,
    pub note: String,
}

/// The rows of the list's text, or every bad field named by `file:line: field N (name)`.
/// `exists` says whether a `bug` row's write-up is in the checkout.
pub fn parse(text: &str, file: &str, exists: &dyn Fn(&str) -> bool) -> Result<Vec<Listed>, String> {
    let mut rows = Vec::new();
    let mut errors = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line_no = n + 1;
        if line.trim().is_empty() || line.trim_start().starts_with('#') {
            continue;
        }
        let fields: Vec<&str> = line.split('\t').map(str::trim).collect();
        if fields.len() != FIELDS.len() {
            errors.push(format!(
                "{file}:{line_no}: {} tab-separated field(s), want 6 ({})",
                fields.len(),
                FIELDS.join(", ")
            ));
            continue;
        }
        let mut bad =
            |i: usize, why: String| errors.push(format!("{file}:{line_no}: field {} ({}): {why}", i + 1, FIELDS[i]));
        let [scenario, arch, kernel, kind, reference, note] = [0, 1, 2, 3, 4, 5].map(|i| fields[i]);
        if scenario.split_once('/').is_none_or(|(s, n)| s.is_empty() || n.is_empty()) || scenario.contains(' ') {
            bad(0, format!("`{scenario}` is not a `suite/name`"));
        }
        if arch != "*" && !crate::arch::ARCHES.iter().any(|a| a.name == arch) {
            let names: Vec<&str> = crate::arch::ARCHES.iter().map(|a| a.name).collect();
            bad(1, format!("`{arch}` is not an arch ({}) or `*`", names.join(", ")));
        }
        if kernel.starts_with(['<', '>']) {
            if let Err(e) = KernelRange::parse(kernel) {
                bad(2, e);
            }
        } else if kernel.is_empty() || kernel.contains(char::is_whitespace) {
            bad(2, format!("`{kernel}` is neither a version range (>=7.2), a kernel label (debian-7.3) nor `*`"));
        }
        match kind {
            "abi-change" => {
                let (id, subject) = reference.split_once(' ').unwrap_or((reference, ""));
                let hex = (12..=40).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_hexdigit());
                if !hex || subject.trim().is_empty() {
                    bad(4, format!("`{reference}`: an abi-change names its upstream commit: its id, then its subject"));
                }
            }
            "bug" => {
                if !reference.starts_with("patches/upstream/") || !exists(reference) {
                    bad(4, format!("`{reference}`: a bug names its write-up, a file under patches/upstream/"));
                }
            }
            "test" => {
                if reference.is_empty() {
                    bad(4, "a test row says how the scenario was fixed".into());
                }
            }
            other => bad(3, format!("`{other}` is not abi-change, bug or test")),
        }
        if note.is_empty() {
            bad(5, "empty: say what differs and why".into());
        }
        rows.push(Listed {
            file: file.into(),
            line: line_no,
            scenario: scenario.into(),
            arch: arch.into(),
            kernel: kernel.into(),
            kind: kind.into(),
            reference: reference.into(),
            note: note.into(),
        });
    }
    if errors.is_empty() {
        Ok(rows)
    } else {
        Err(errors.join("\n"))
    }
}

impl Listed {
    /// Whether the row names this scenario on kernel column `k`, arch `a` of `grid`.
    pub fn names(&self, grid: &Grid, scenario: &str, k: usize, a: usize) -> bool {
        let column = &grid.kernels[k];
        let kernel = match self.kernel.as_str() {
            "*" => true,
            range if range.starts_with(['<', '>']) => {
                KernelRange::parse(range).is_ok_and(|r| column.version().is_some_and(|v| r.contains(v)))
            }
            label => label == column.label,
        };
        self.scenario == scenario && (self.arch == "*" || self.arch == grid.arches[a]) && kernel
    }

    /// Whether the grid has a cell the row names: a row it could show.
    fn in_scope(&self, grid: &Grid) -> bool {
        grid.rows.iter().any(|r| {
            (0..grid.kernels.len()).any(|k| (0..grid.arches.len()).any(|a| self.names(grid, &r.scenario, k, a)))
        })
    }
}

/// What explains a differing cell.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "from", rename_all = "kebab-case")]
pub enum Explanation {
    /// A skip decided from a `requires` (or a client with no build for the arch): this cell's,
    /// or the neighbour's it differs from (`on`: that neighbour, `kernel arch`).
    Requires {
        reason: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        on: Option<String>,
    },
    /// A row of the list.
    Listed(Listed),
}

impl Explanation {
    /// One line for a tooltip, a footnote or the summary.
    pub fn describe(&self) -> String {
        match self {
            Explanation::Requires { reason, on: None } => format!("requires: {reason}"),
            Explanation::Requires { reason, on: Some(on) } => format!("requires on {on}: {reason}"),
            Explanation::Listed(l) => format!("{} ({}): {} [{}:{}]", l.kind, l.reference, l.note, l.file, l.line),
        }
    }
}

/// The atlas judged: each differing cell with its explanation (`None`: unexplained), the
/// stale rows, and how many rows named nothing this grid could show.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Judged {
    pub cells: Vec<(Differing, Option<Explanation>)>,
    pub stale: Vec<Listed>,
    pub out_of_scope: usize,
}

impl Judged {
    pub fn unexplained(&self) -> impl Iterator<Item = &Differing> {
        self.cells.iter().filter(|(_, e)| e.is_none()).map(|(d, _)| d)
    }

    /// Whether the atlas passes: every differing cell explained, no stale row.
    pub fn passes(&self) -> bool {
        self.unexplained().next().is_none() && self.stale.is_empty()
    }
}

/// Each differing cell of `grid` explained by the first row of `list` that names it, else by
/// its `requires` skip; the rows that could name a cell of this grid but name no differing one
/// are stale.
pub fn judge(grid: &Grid, list: &[Listed]) -> Judged {
    let mut used = vec![false; list.len()];
    let mut cells = Vec::new();
    for d in grid.differing() {
        let scenario = &grid.rows[d.row].scenario;
        let listed = list.iter().position(|l| l.names(grid, scenario, d.kernel, d.arch));
        let explanation = match listed {
            Some(i) => {
                used[i] = true;
                Some(Explanation::Listed(list[i].clone()))
            }
            None => from_requires(grid, &d),
        };
        cells.push((d, explanation));
    }
    // A row used by no cell but naming one already explained by another row is not stale.
    for (i, l) in list.iter().enumerate() {
        if !used[i] {
            used[i] = cells.iter().any(|(d, _)| l.names(grid, &grid.rows[d.row].scenario, d.kernel, d.arch));
        }
    }
    let in_scope: Vec<bool> = list.iter().map(|l| l.in_scope(grid)).collect();
    let stale = list.iter().zip(&used).zip(&in_scope).filter(|((_, u), s)| !**u && **s).map(|((l, _), _)| l.clone());
    Judged { stale: stale.collect(), out_of_scope: in_scope.iter().filter(|s| !**s).count(), cells }
}

/// The `requires` skip that explains a cell: its own, else the one every neighbour it differs
/// from shares.
fn from_requires(grid: &Grid, d: &Differing) -> Option<Explanation> {
    let skip_reason = |k: usize, a: usize| {
        let c = grid.cell(d.row, k, a);
        let reason = c.reason.as_deref().filter(|r| crate::suites::skip_from_requires(r));
        (c.status == State::Ran(super::Status::Skip)).then_some(reason).flatten().map(String::from)
    };
    if let Some(reason) = skip_reason(d.kernel, d.arch) {
        return Some(Explanation::Requires { reason, on: None });
    }
    let reasons: Vec<Option<String>> = d.against.iter().map(|n| skip_reason(n.kernel, n.arch)).collect();
    if reasons.iter().all(Option::is_some) {
        let n = d.against[0];
        let on = format!("{} {}", grid.kernels[n.kernel].label, grid.arches[n.arch]);
        return reasons.into_iter().next().flatten().map(|reason| Explanation::Requires { reason, on: Some(on) });
    }
    None
}
