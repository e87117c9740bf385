//! `summary.md` of a mutants run (sans-IO): the score, (Killed + Timeout) over every mutant
//! with an outcome except CompileError, RuntimeError and the equivalent ones, with and without the
//! NoCoverage ones, overall, per operator and per function; mutants without an outcome yet
//! are counted apart.

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::mutants::find::Mutant;
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
    s
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
        assert!(page.contains("Score 50.0%"), "{page}");
        assert!(page.contains("| `g` | - | - | 0 | 0 | 0 | 0 |"), "{page}");
        assert!(page.contains("| `NegateCondition` |"), "{page}");
    }
}
