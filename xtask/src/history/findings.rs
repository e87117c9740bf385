//! A run's kernel reports against the history (sans-IO): each one `known` when a report with
//! the same fingerprint was recorded in an earlier run (the first such run named), else `new`.
//! Earlier is the store's time order (a run's start, then its id), so a run imported late
//! still finds what came before it; the same crash on another arch, kernel or scenario counts.

use serde::Serialize;

use super::store::Found;

/// One report of the run shown, marked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Marked {
    /// Empty outside any scenario.
    pub scenario: String,
    pub arch: String,
    pub kind: String,
    pub fingerprint: String,
    pub signature: String,
    pub summary: String,
    /// `known` or `new`.
    pub mark: &'static str,
    /// The first earlier run that had it (`None` when new).
    pub first_run: Option<String>,
    /// How many earlier runs had it.
    pub earlier_runs: usize,
}

/// The reports of run `run_id` on `host`, in its order, each marked against the runs before it.
pub fn mark(all: &[Found], run_id: &str, host: &str) -> Vec<Marked> {
    let this = |f: &Found| f.run_id == run_id && f.host == host;
    let Some(at) = all.iter().find(|f| this(f)).map(|f| (f.started_at.clone(), f.run_id.clone())) else {
        return Vec::new();
    };
    all.iter()
        .filter(|f| this(f))
        .map(|f| {
            let mut earlier: Vec<&Found> = all
                .iter()
                .filter(|e| !this(e) && e.row.fingerprint == f.row.fingerprint)
                .filter(|e| (e.started_at.as_str(), e.run_id.as_str()) < (at.0.as_str(), at.1.as_str()))
                .collect();
            earlier.dedup_by(|a, b| a.run_id == b.run_id && a.host == b.host);
            let r = &f.row;
            Marked {
                scenario: r.scenario.clone(),
                arch: r.arch.clone(),
                kind: r.kind.clone(),
                fingerprint: r.fingerprint.clone(),
                signature: r.signature.clone(),
                summary: r.summary.clone(),
                mark: if earlier.is_empty() { "new" } else { "known" },
                first_run: earlier.first().map(|e| e.run_id.clone()),
                earlier_runs: earlier.len(),
            }
        })
        .collect()
}

/// `history show`'s lines for the marked reports (nothing when there is none).
pub fn text(marked: &[Marked]) -> String {
    if marked.is_empty() {
        return String::new();
    }
    let mut out = format!("{} kernel report(s):\n", marked.len());
    for m in marked {
        let seen = match &m.first_run {
            Some(first) => format!("known (first in run {first}, {} earlier run(s))", m.earlier_runs),
            None => "new".to_string(),
        };
        let place = if m.scenario.is_empty() { "outside the scenarios" } else { m.scenario.as_str() };
        out.push_str(&format!("{seen} {} {} {place} {}: {}\n", m.fingerprint, m.arch, m.signature, m.summary));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::rows::{FindingRow, KernelId};

    fn found(run: &str, second: u32, fingerprint: &str, arch: &str) -> Found {
        Found {
            run_id: run.into(),
            host: "h".into(),
            started_at: format!("2026-01-01T00:00:{second:02}Z"),
            row: FindingRow {
                scenario: "abi/enable".into(),
                arch: arch.into(),
                kernel: KernelId::unknown(),
                kind: "kasan".into(),
                fingerprint: fingerprint.into(),
                signature: format!("kasan:{fingerprint}"),
                summary: "BUG: KASAN: slab-use-after-free in f+0x1/0x2".into(),
            },
        }
    }

    #[test]
    fn known_names_the_first_earlier_run_and_new_has_none() {
        let all = [
            found("r1", 1, "aaa", "arm64"),
            found("r2", 2, "aaa", "x86_64"),
            found("r2", 2, "aaa", "arm64"),
            found("r3", 3, "aaa", "x86_64"),
            found("r3", 3, "bbb", "x86_64"),
            found("r4", 4, "bbb", "x86_64"),
        ];
        let got: Vec<_> =
            mark(&all, "r3", "h").into_iter().map(|m| (m.fingerprint, m.mark, m.first_run, m.earlier_runs)).collect();
        assert_eq!(
            got,
            [("aaa".into(), "known", Some("r1".into()), 2), ("bbb".into(), "new", None, 0)],
            "a later run does not make a report known"
        );
        assert!(mark(&all, "r1", "h").iter().all(|m| m.mark == "new"));
        assert!(mark(&all, "r9", "h").is_empty());
        let shown = text(&mark(&all, "r3", "h"));
        assert!(
            shown.starts_with("2 kernel report(s):\nknown (first in run r1, 2 earlier run(s)) aaa x86_64 abi/enable"),
            "{shown}"
        );
        assert_eq!(text(&[]), "");
    }
}
