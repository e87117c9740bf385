//! The order a mutant's covering scenarios run in: those that killed the most mutants so far
//! first (the state file's kills and this run's, counted as each result is recorded), the
//! fastest first among equals (the plan's order); a run stops at its first kill, so the likely
//! killer saves the passes before it.

use std::collections::BTreeMap;
use std::sync::Mutex;

use crate::mutants::plan::Step;
use crate::mutants::report::{MutantResult, Outcome};

/// How many mutants each scenario (`suite/name`) has killed.
#[derive(Debug, Default)]
pub struct Kills(Mutex<BTreeMap<String, usize>>);

impl Kills {
    /// The kills of the results kept from before.
    pub fn of<'a>(kept: impl IntoIterator<Item = &'a MutantResult>) -> Kills {
        let kills = Kills::default();
        for r in kept {
            kills.count(r);
        }
        kills
    }

    /// One more result: each scenario that killed it counts once more.
    pub fn count(&self, r: &MutantResult) {
        if let Outcome::Killed { by, .. } = &r.outcome {
            let mut k = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            for s in by {
                *k.entry(s.clone()).or_default() += 1;
            }
        }
    }

    /// The steps of `ids` with each arch's scenarios in kill order (a stable sort of the plan's
    /// fastest-first order).
    pub fn order<'a>(
        &self,
        steps: &BTreeMap<String, Step>,
        ids: impl IntoIterator<Item = &'a str>,
    ) -> BTreeMap<String, Step> {
        let k = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut out = BTreeMap::new();
        for id in ids {
            let Some(step) = steps.get(id) else { continue };
            let mut step = step.clone();
            if let Step::Run { scenarios } = &mut step {
                for list in scenarios.values_mut() {
                    list.sort_by_key(|s| std::cmp::Reverse(k.get(s).copied().unwrap_or(0)));
                }
            }
            out.insert(id.to_string(), step);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scenarios_that_killed_most_go_first_the_fastest_among_equals() {
        let killed = |by: &[&str]| MutantResult {
            id: "x".into(),
            outcome: Outcome::Killed { by: by.iter().map(|s| s.to_string()).collect(), evidence: String::new() },
            covered_by: vec![],
            duration_ms: None,
            stage: None,
        };
        let kills = Kills::of([&killed(&["s/c"]), &killed(&["s/b"])]);
        kills.count(&killed(&["s/c"]));
        let fastest_first = vec!["s/a".to_string(), "s/b".into(), "s/c".into(), "s/d".into()];
        let steps = BTreeMap::from([(
            "m".to_string(),
            Step::Run { scenarios: BTreeMap::from([("x86_64".to_string(), fastest_first)]) },
        )]);
        let ordered = kills.order(&steps, ["m", "not-planned"]);
        let Some(Step::Run { scenarios }) = ordered.get("m") else { panic!("{ordered:?}") };
        assert_eq!(scenarios["x86_64"], ["s/c", "s/b", "s/a", "s/d"]);
        assert_eq!(ordered.len(), 1);
    }
}
