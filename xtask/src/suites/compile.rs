//! Validated suites compiled into the agent's plan for one kernel: scenarios whose `requires`
//! the kernel does not meet, or that run a guest client the arch has no build of, are left out
//! with the reason; `isolated` ones get boots of their own. A `requires` step is decided here too:
//! on a kernel that does not meet it, its steps are left out.

use std::collections::BTreeMap;

use super::model::{Requires, ScenarioDef, Suite, DEFAULT_DEADLINE_MS};
use super::requires::KernelFacts;

/// A scenario left out of a plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// `suite/scenario`.
    pub name: String,
    pub reason: String,
}

/// A plan for one kernel and what was left out of it.
#[derive(Debug, Clone, PartialEq)]
pub struct Compiled {
    pub plan: protocol::Plan,
    /// Scenarios marked `isolated`, each to run in a boot of its own, in order.
    pub isolated: Vec<protocol::Scenario>,
    pub skipped: Vec<Skipped>,
    pub marks: Marks,
}

/// What the suites expect of planned scenarios beyond their steps, by `suite/scenario`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Marks {
    /// Expected to fail: the reason.
    pub xfail: BTreeMap<String, String>,
    /// Of those, the ones whose known kernel bug has a fix: the patch (`fixed_by`).
    pub fixed_by: BTreeMap<String, String>,
    /// Of those, the ones whose bug shows only when a race goes its way (`intermittent`).
    pub intermittent: std::collections::BTreeSet<String>,
    /// Expected to provoke a kernel report including this text.
    pub expect_report: BTreeMap<String, String>,
    /// What each scenario checks: its catalogue items and its `note:` (for the reports).
    pub about: BTreeMap<String, About>,
}

/// A scenario's catalogue items (id, then the catalogue's summary once the caller fills it in),
/// its `description:` and its `note:`.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct About {
    pub covers: Vec<(String, String)>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// Compiles validated suites into one plan for one kernel, in file and scenario order.
/// Scenarios whose `requires` the kernel does not meet are skipped, not planned.
pub fn compile(suites: &[Suite], kernel: &KernelFacts, label: &str) -> Compiled {
    let mut plan = protocol::Plan::empty(label);
    let mut skipped = Vec::new();
    let mut marks = Marks::default();
    let mut isolated = Vec::new();
    for suite in suites {
        for s in &suite.scenarios {
            let name = format!("{}/{}", suite.suite, s.name);
            let reasons: Vec<String> = (suite.defaults.requires.unmet(kernel).into_iter())
                .chain(s.requires.unmet(kernel))
                .chain(clients_missing(s, label))
                .collect();
            if !reasons.is_empty() {
                skipped.push(Skipped { name, reason: reasons.join("; ") });
                continue;
            }
            if let Some(reason) = &s.xfail {
                marks.xfail.insert(name.clone(), reason.clone());
            }
            if let Some(fix) = &s.fixed_by {
                marks.fixed_by.insert(name.clone(), fix.clone());
            }
            if s.intermittent {
                marks.intermittent.insert(name.clone());
            }
            if let Some(text) = &s.expect_report {
                marks.expect_report.insert(name.clone(), text.clone());
            }
            if !s.covers.is_empty() || s.note.is_some() || s.description.is_some() {
                let covers = s.covers.iter().map(|id| (id.clone(), String::new())).collect();
                let about = About { covers, description: s.description.clone(), note: s.note.clone() };
                marks.about.insert(name.clone(), about);
            }
            let deadline_ms = s.deadline_ms.or(suite.defaults.deadline_ms).unwrap_or(DEFAULT_DEADLINE_MS);
            let mut steps = s.steps.clone();
            decide_requires(&mut steps, kernel);
            let scenario = protocol::Scenario { name, deadline_ms, steps };
            if s.isolated {
                isolated.push(scenario);
            } else {
                plan.scenarios.push(scenario);
            }
        }
    }
    Compiled { plan, isolated, skipped, marks }
}

/// Each `requires` step, at any depth, decided for this kernel: one it does not meet keeps why
/// (`unmet`) and none of its steps.
fn decide_requires(steps: &mut [protocol::Step], kernel: &KernelFacts) {
    for step in steps {
        if let protocol::Step::Requires(r) = step {
            let need = Requires { kernel: r.kernel.clone(), config: r.config.clone() };
            r.unmet = need.unmet(kernel);
            if r.unmet.is_some() {
                r.steps.clear();
            }
        }
        for inner in step.nested_mut() {
            decide_requires(inner, kernel);
        }
    }
}

/// Whether a skip reason is one `compile` gave: an unmet `requires` (`needs kernel ...`,
/// `needs CONFIG_...`) or a guest client the arch has no build of (`runs ..., which has no
/// build for ...`), as opposed to a skip the agent decided while the scenario ran. The atlas
/// takes such a skip as its own explanation.
pub fn skip_from_requires(reason: &str) -> bool {
    reason.starts_with("needs kernel ")
        || reason.starts_with("needs CONFIG_")
        || (reason.starts_with("runs ") && reason.contains(", which has no build for "))
}

/// Why a scenario cannot run on arch `label`: a guest client its steps run (named by its guest
/// path, as `initramfs::clients_for` finds them) that has no build for that arch.
fn clients_missing(s: &ScenarioDef, label: &str) -> Option<String> {
    let arch = crate::arch::select(label).ok().filter(|a| a.len() == 1)?[0];
    let why: Vec<String> = crate::vm::initramfs::clients_run_by(&s.steps)
        .into_iter()
        .filter_map(|c| {
            (c.target)(arch)
                .err()
                .map(|why| format!("runs {}, which has no build for {}: {why}", c.guest_path, arch.name))
        })
        .collect();
    (!why.is_empty()).then(|| why.join("; "))
}
