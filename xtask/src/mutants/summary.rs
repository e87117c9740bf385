//! `summary.md` of a mutants run (sans-IO): the score, (Killed + Timeout) over every mutant
//! with an outcome except CompileError, RuntimeError and the equivalent ones, with and without the
//! NoCoverage ones, overall, per operator and per function; mutants without an outcome yet
//! are counted apart. Then each Timeout mutant, with the scenario and the reason.

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::mutants::classify;
use crate::mutants::mutant::Mutant;
use crate::mutants::report::{MutantResult, Outcome};

/// The counts behind one score.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    pub detected: usize,
    pub survived: usize,
    pub no_coverage: usize,
    pub excluded: usize,
    pub pending: usize,
}

impl Tally {
    fn add(&mut self, outcome: Option<&Outcome>) {
        match outcome {
            None => self.pending += 1,
            Some(Outcome::Killed { .. } | Outcome::Timeout { .. }) => self.detected += 1,
            Some(Outcome::Survived) => self.survived += 1,
            Some(Outcome::NoCoverage) => self.no_coverage += 1,
            Some(Outcome::CompileError { .. } | Outcome::RuntimeError { .. } | Outcome::Equivalent { .. }) => {
                self.excluded += 1
            }
        }
    }

    /// The score over every counted mutant (NoCoverage ones as undetected), in percent.
    pub fn score(&self) -> Option<f64> {
        pct(self.detected, self.detected + self.survived + self.no_coverage)
    }

    /// The score, the covered score and the counts, as the page shows them.
    pub fn cells(&self) -> [String; 7] {
        let n = |v: usize| v.to_string();
        [
            show(self.score()),
            show(self.covered_score()),
            n(self.detected),
            n(self.survived),
            n(self.no_coverage),
            n(self.excluded),
            n(self.pending),
        ]
    }

    /// The score over the covered mutants only.
    pub fn covered_score(&self) -> Option<f64> {
        pct(self.detected, self.detected + self.survived)
    }
}

fn pct(n: usize, of: usize) -> Option<f64> {
    (of > 0).then(|| 100.0 * n as f64 / of as f64)
}

fn show(p: Option<f64>) -> String {
    p.map_or("-".to_string(), |p| format!("{p:.1}%"))
}

/// The whole file's tally, per operator and per function.
pub fn tallies(
    mutants: &[Mutant],
    results: &BTreeMap<String, MutantResult>,
) -> (Tally, BTreeMap<String, Tally>, BTreeMap<String, Tally>) {
    let (mut all, mut ops, mut fns) = (Tally::default(), BTreeMap::new(), BTreeMap::<String, Tally>::new());
    for m in mutants {
        let outcome = results.get(&m.id).map(|r| &r.outcome);
        all.add(outcome);
        ops.entry(m.operator.to_string()).or_insert_with(Tally::default).add(outcome);
        fns.entry(m.function.clone()).or_default().add(outcome);
    }
    (all, ops, fns)
}

/// The markdown page.
pub fn render(file: &str, mutants: &[Mutant], results: &BTreeMap<String, MutantResult>) -> String {
    let (all, ops, fns) = tallies(mutants, results);
    let mut s = format!("# Mutants of `{file}`\n\n");
    let [score, covered, detected, survived, no_coverage, excluded, pending] = all.cells();
    let _ = writeln!(
        s,
        "Score {score} (Killed + Timeout over all but CompileError, RuntimeError and equivalent), {covered} of the \
         covered ones; {detected} detected, {survived} survived, {no_coverage} NoCoverage, {excluded} \
         excluded, {pending} not run yet.\n"
    );
    for (title, rows) in [("operator", &ops), ("function", &fns)] {
        let _ =
            writeln!(s, "| {title} | score | covered score | detected | survived | NoCoverage | excluded | not run |");
        s.push_str("|---|---|---|---|---|---|---|---|\n");
        for (name, t) in rows {
            let _ = writeln!(s, "| `{name}` | {} |", t.cells().join(" | "));
        }
        s.push('\n');
    }
    timeouts(&mut s, mutants, results);
    s
}

/// The section of the Timeout mutants, if any: id, function, line, the scenarios the reason
/// names (`-` when it names none) and the reason.
fn timeouts(s: &mut String, mutants: &[Mutant], results: &BTreeMap<String, MutantResult>) {
    let rows: Vec<(&Mutant, &str)> = mutants
        .iter()
        .filter_map(|m| match results.get(&m.id).map(|r| &r.outcome) {
            Some(Outcome::Timeout { reason }) => Some((m, reason.as_str())),
            _ => None,
        })
        .collect();
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "## Timeout ({})\n\nCounted as detected. A run that passes `--timeout` with no scenario failed runs once \
         more, alone, with twice the time; only a second timeout is a Timeout.\n",
        rows.len()
    );
    s.push_str("| mutant | function | line | scenario | reason |\n|---|---|---|---|---|\n");
    let cell = crate::results::text::cell;
    for (m, reason) in rows {
        let scenarios = classify::timeout_scenarios(reason);
        let scenarios = if scenarios.is_empty() {
            "-".to_string()
        } else {
            scenarios.iter().map(|t| format!("`{}`", cell(t))).collect::<Vec<_>>().join(", ")
        };
        let _ = writeln!(s, "| `{}` | `{}` | {} | {scenarios} | {} |", m.id, cell(&m.function), m.line, cell(reason));
    }
    s.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scores_with_and_without_no_coverage() {
        let src = "int f(int x)\n{\n\tif (x < 2)\n\t\treturn -EINVAL;\n\treturn x + 1;\n}\nint g(int y)\n{\n\treturn y - 1;\n}\n";
        let ms = crate::mutants::find::mutants("k.c", src).unwrap();
        let outcomes = [
            Outcome::Killed { by: vec!["a/b".into()], evidence: "e".into() },
            Outcome::Timeout { reason: "hang".into() },
            Outcome::Survived,
            Outcome::NoCoverage,
            Outcome::CompileError { reason: "error".into() },
            Outcome::Equivalent { reason: "r".into() },
        ];
        let results: BTreeMap<String, MutantResult> = ms
            .iter()
            .zip(outcomes)
            .map(|(m, outcome)| {
                (
                    m.id.clone(),
                    MutantResult { id: m.id.clone(), outcome, covered_by: vec![], duration_ms: None, stage: None },
                )
            })
            .collect();
        let (all, _, fns) = tallies(&ms, &results);
        assert_eq!((all.detected, all.survived, all.no_coverage, all.excluded), (2, 1, 1, 2));
        assert_eq!(all.pending, ms.len() - 6);
        assert_eq!(all.score(), Some(50.0));
        assert!((all.covered_score().unwrap() - 66.666).abs() < 0.01);
        assert_eq!(fns["g"].score(), None, "nothing run in g yet");
        let page = render("k.c", &ms, &results);
        let score = format!(
            "Score 50.0% (Killed + Timeout over all but CompileError, RuntimeError and equivalent), 66.7% of the \
             covered ones; 2 detected, 1 survived, 1 NoCoverage, 2 excluded, {} not run yet.",
            ms.len() - 6
        );
        let scores: Vec<&str> = page.lines().filter(|l| l.starts_with("Score ")).collect();
        assert_eq!(scores, [score.as_str()], "one score line, worded as tests/real/mutants.rs expects it");
        assert!(page.contains("| `g` | - | - | 0 | 0 | 0 | 0 |"), "{page}");
        assert!(page.contains("| `NegateCondition` |"), "{page}");
        assert!(page.contains("## Timeout (1)"), "{page}");
    }

    #[test]
    fn every_timeout_is_listed_with_its_scenario_and_reason() {
        let src = "int f(int x)\n{\n\tif (x < 2)\n\t\treturn -EINVAL;\n\treturn x + 1;\n}\n";
        let ms = crate::mutants::find::mutants("k.c", src).unwrap();
        let confirmed = "the run passed --timeout 300 s, and again alone with 600 s; \
                         format/a on x86_64: running when the time ran out";
        let outcomes = [
            Outcome::Timeout { reason: confirmed.into() },
            Outcome::Killed { by: vec!["a/b".into()], evidence: "e".into() },
            Outcome::Timeout { reason: "the mutant's run passed --timeout 300 s".into() },
        ];
        let results: BTreeMap<String, MutantResult> = ms
            .iter()
            .zip(outcomes)
            .map(|(m, outcome)| {
                let r = MutantResult { id: m.id.clone(), outcome, covered_by: vec![], duration_ms: None, stage: None };
                (m.id.clone(), r)
            })
            .collect();
        let page = render("k.c", &ms, &results);
        let section = page.split_once("## Timeout (2)\n").map(|(_, s)| s).unwrap_or_else(|| panic!("{page}"));
        let rows: Vec<&str> = section.lines().filter(|l| l.starts_with("| `")).collect();
        assert_eq!(
            rows,
            [
                format!("| `{}` | `f` | {} | `format/a on x86_64` | {confirmed} |", ms[0].id, ms[0].line),
                format!("| `{}` | `f` | {} | - | the mutant's run passed --timeout 300 s |", ms[2].id, ms[2].line),
            ],
            "{page}"
        );
        assert!(!page.contains(&format!("| `{}` | `f` | {} | -", ms[1].id, ms[1].line)), "Killed is not listed");
        let none: BTreeMap<String, MutantResult> = BTreeMap::new();
        assert!(!render("k.c", &ms, &none).contains("## Timeout"), "no section without a Timeout");
    }
}
