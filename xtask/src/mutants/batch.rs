//! Mutants in batches (sans-IO): several mutants of the schemata kernel in one boot. Each
//! mutant is a group of its covering scenarios, renamed `<scenario>@<mutant id>`, run with its
//! number written to the kernel's `mutant` parameter (`protocol::Groups`: the agent sets it
//! before the group, stops the group at its first failure, and sets 0 before the hygiene
//! after it); the batch's run split back into one run per mutant for `classify`, and which of
//! those outcomes the batch can vouch for (the others run in a boot of their own).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::mutants::report::Outcome;
use crate::results::model::{Run, Status};
use crate::suites::{Compiled, Marks};

/// The schemata kernel's switch (`trace_events_user.mutant` at run time).
pub const SWITCH: &str = "/sys/module/trace_events_user/parameters/mutant";

/// The mutants of one boot, in the order they run (`run --mutant-batch FILE`, JSON).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Batch {
    pub groups: Vec<Group>,
}

/// One mutant: its id, its number in the schemata kernel, its covering scenarios in order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Group {
    pub id: String,
    pub number: u32,
    pub scenarios: Vec<String>,
}

/// A scenario's name in mutant `id`'s group.
pub fn named(scenario: &str, id: &str) -> String {
    format!("{scenario}@{id}")
}

impl Batch {
    /// Every scenario a group names, once, in order: the `--filter`s of the batch's run.
    pub fn filters(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for s in self.groups.iter().flat_map(|g| &g.scenarios) {
            if !out.contains(s) {
                out.push(s.clone());
            }
        }
        out
    }

    /// A kernel's compiled suites made the batch's plan: each group's scenarios, renamed, in
    /// the group's order, with their marks; a scenario the kernel skips (`requires`) is left
    /// out of its group, as a run of the mutant alone would skip it. Isolated scenarios are
    /// never batched (the runner keeps their mutants out), so none are planned.
    pub fn expand(&self, compiled: Compiled) -> Compiled {
        let Compiled { plan, skipped, marks, .. } = compiled;
        let by_name: BTreeMap<&str, &protocol::Scenario> =
            plan.scenarios.iter().map(|s| (s.name.as_str(), s)).collect();
        let mut scenarios = Vec::new();
        let mut of = BTreeMap::new();
        let mut renamed_marks = Marks::default();
        for g in &self.groups {
            for name in &g.scenarios {
                let Some(s) = by_name.get(name.as_str()) else { continue };
                let renamed = named(name, &g.id);
                scenarios.push(protocol::Scenario { name: renamed.clone(), ..(*s).clone() });
                of.insert(renamed.clone(), g.number);
                copy_marks(&marks, name, &renamed, &mut renamed_marks);
            }
        }
        let groups = Some(protocol::Groups { switch: SWITCH.into(), of });
        let plan = protocol::Plan { scenarios, groups, ..plan };
        Compiled { plan, isolated: vec![], skipped, marks: renamed_marks }
    }
}

fn copy_marks(from: &Marks, name: &str, to_name: &str, to: &mut Marks) {
    let copy = |m: &BTreeMap<String, String>, out: &mut BTreeMap<String, String>| {
        if let Some(v) = m.get(name) {
            out.insert(to_name.to_string(), v.clone());
        }
    };
    copy(&from.xfail, &mut to.xfail);
    copy(&from.fixed_by, &mut to.fixed_by);
    copy(&from.expect_report, &mut to.expect_report);
    if from.intermittent.contains(name) {
        to.intermittent.insert(to_name.to_string());
    }
    if let Some(a) = from.about.get(name) {
        to.about.insert(to_name.to_string(), a.clone());
    }
}

/// A batch's run split per mutant: each mutant's scenarios under their own names, with the
/// boots they ran in (their reports outside any scenario left out: a batch cannot say whose
/// they are, see [`vouched`]). A mutant none of whose scenarios the run planned is absent.
pub fn split(run: &Run, batch: &Batch) -> BTreeMap<String, Run> {
    let mut out = BTreeMap::new();
    for g in &batch.groups {
        let suffix = format!("@{}", g.id);
        let mut mine = run.clone();
        let mut any = false;
        for arch in &mut mine.arches {
            arch.scenarios.retain(|s| s.name.ends_with(&suffix));
            for s in &mut arch.scenarios {
                s.name.truncate(s.name.len() - suffix.len());
                any = true;
            }
            let booted: BTreeSet<String> = arch.scenarios.iter().filter_map(|s| s.boot.clone()).collect();
            arch.boots.retain(|b| booted.contains(&b.name));
            for b in &mut arch.boots {
                b.findings.clear();
            }
        }
        if any {
            out.insert(g.id.clone(), mine);
        }
    }
    out
}

/// Whether the batch can vouch for a mutant's outcome from its part of the run (`mine`, from
/// [`split`]); why not, so that it runs in a boot of its own. A kill or a Timeout stands when
/// every covering scenario before the first failure ended (what comes after it a run of its
/// own would not run either: `--fail-fast`); it is the mutant's doing, in one of its own
/// scenarios, with the switch on, and the hygiene on the unswitched kernel had restored what
/// the groups before it changed. A survival stands when every covering scenario ended (passed,
/// or skipped by the agent: the kernel's `requires`) and no boot of the batch has a kernel
/// report between scenarios (whose mutant's it is cannot be told). Anything else (a scenario
/// the boot never reached, an outcome the batch has no evidence for) is left to a boot of the
/// mutant's own.
pub fn vouched(mine: &Run, outcome: &Outcome, whole: &Run) -> Result<(), String> {
    let mut unfinished = Vec::new();
    for s in mine.arches.iter().flat_map(|a| &a.scenarios) {
        if matches!(s.status, Status::Fail | Status::Error | Status::Xpass) {
            break;
        }
        if !matches!(s.status, Status::Pass | Status::Skip | Status::Xfail | Status::Fixed) {
            unfinished.push(s.name.as_str());
        }
    }
    if let Some(first) = unfinished.first() {
        return Err(format!("{} covering scenario(s) did not end in the batch ({first})", unfinished.len()));
    }
    match outcome {
        Outcome::Killed { .. } | Outcome::Timeout { .. } => Ok(()),
        Outcome::Survived => {
            let between: Vec<&str> = whole
                .arches
                .iter()
                .flat_map(|a| &a.boots)
                .filter(|b| !b.findings.is_empty())
                .map(|b| b.name.as_str())
                .collect();
            match between.first() {
                None => Ok(()),
                Some(b) => Err(format!("boot {b} has a kernel report outside any scenario")),
            }
        }
        other => Err(format!("{} in the batch", other.name())),
    }
}

#[cfg(test)]
mod tests;
