//! The plan: what the host compiles from the suites and the guest agent runs (`/plan.json`),
//! scenario by scenario and step by step. The YAML suites deserialize into these same types.
//! The step vocabulary is in `crate::steps`, one file per area.

use serde::{Deserialize, Serialize};

use crate::steps::Step;

/// What the agent runs, compiled by the host (the guest never parses YAML).
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Plan {
    pub version: u32,
    /// Free-form label for the logs (for example the arch).
    pub label: String,
    pub scenarios: Vec<Scenario>,
    /// Mount the user's virtio-fs share here, when the host shares one.
    #[serde(default)]
    pub share: Option<String>,
    /// Whether the artifacts folder comes over virtio-fs (else a tmpfs).
    #[serde(default)]
    pub artifacts_virtiofs: bool,
    /// Run an interactive shell on the console instead of (after) the scenarios.
    #[serde(default)]
    pub shell: bool,
    /// On a coverage kernel: reset the GCOV counters before each scenario and send them after
    /// it (`crate::gcov`). Absent otherwise, so a normal plan's JSON is as before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gcov: Option<crate::gcov::GcovPlan>,
    /// `run --fail-fast`: after the first scenario that fails or times out (other than those
    /// in `expected_failures`), the agent runs no more and reports the rest as skipped. Absent
    /// otherwise, so a normal plan's JSON is as before.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stop_at_first_failure: bool,
    /// The scenarios expected to fail (`xfail`), which do not stop a `stop_at_first_failure` plan.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub expected_failures: Vec<String>,
    /// Mutation testing in batches: scenarios that run under one setting of a kernel switch (a
    /// mutant's number). Absent otherwise, so a normal plan's JSON is as before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub groups: Option<Groups>,
}

/// Consecutive scenarios with the same value in `of` are a group. The agent writes the value
/// to `switch` before the group's first scenario, and `0` after its last, before the hygiene
/// (which then runs on the unswitched kernel and, unlike between two scenarios of a group,
/// does not judge the scenario: it only says whether the next group can run in this boot).
/// With `stop_at_first_failure`, a failure skips the rest of its group, not of the plan.
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Groups {
    /// The file each group's value is written to (the schemata kernel's `mutant` parameter).
    pub switch: String,
    /// Each grouped scenario's value, by name.
    pub of: std::collections::BTreeMap<String, u32>,
}

impl Plan {
    /// The group value of scenario `i`, if the plan has groups and names it.
    pub fn group_of(&self, i: usize) -> Option<u32> {
        let name = &self.scenarios.get(i)?.name;
        self.groups.as_ref()?.of.get(name).copied()
    }
}

impl Plan {
    /// A plan with no scenarios, at this protocol's version: the agent boots, reports its
    /// sentinel and powers off. Scenarios and options are added to it.
    pub fn empty(label: &str) -> Plan {
        Plan {
            version: crate::PROTOCOL_VERSION,
            label: label.into(),
            scenarios: vec![],
            share: None,
            artifacts_virtiofs: false,
            shell: false,
            gcov: None,
            stop_at_first_failure: false,
            expected_failures: vec![],
            groups: None,
        }
    }
}

/// One scenario: run in its own process group, killed at its deadline.
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// `suite/scenario`, unique in a plan.
    pub name: String,
    pub deadline_ms: u64,
    pub steps: Vec<Step>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expect::Expect;
    use crate::steps::{Lkdtm, Mkdir, Sleep};

    #[test]
    fn plan_is_json_with_tagged_steps() {
        let plan = Plan {
            version: crate::PROTOCOL_VERSION,
            label: "x86_64".into(),
            scenarios: vec![Scenario {
                name: "fault/warn".into(),
                deadline_ms: 1000,
                steps: vec![
                    Step::Lkdtm(Lkdtm { point: "WARNING".into() }),
                    Step::Sleep(Sleep { ms: 1 }),
                    Step::Mkdir(Mkdir { path: "/x".into(), expect: Expect::Value(0) }),
                ],
            }],
            share: None,
            artifacts_virtiofs: false,
            shell: false,
            gcov: None,
            stop_at_first_failure: false,
            expected_failures: vec![],
            groups: None,
        };
        let json = serde_json::to_string(&plan).unwrap();
        assert!(!json.contains("gcov"), "a normal plan's JSON is as before coverage: {json}");
        assert!(json.contains(r#"{"lkdtm":{"point":"WARNING"}}"#), "{json}");
        assert!(json.contains(r#"{"mkdir":{"path":"/x","expect":"0"}}"#), "an expectation is its text: {json}");
        assert_eq!(serde_json::from_str::<Plan>(&json).unwrap(), plan);
    }
}
