//! The suites' typed model: what a `suites/<area>.yaml` file holds, as serde-saphyr
//! deserializes it (the steps are the protocol's own `Step`).

use protocol::Step;
use serde::Deserialize;

/// A scenario's deadline when neither it nor its suite's `defaults` gives one.
pub const DEFAULT_DEADLINE_MS: u64 = 10_000;

/// One suite file.
#[derive(Debug, Clone, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Suite {
    /// Equals the file stem; plan names are `<suite>/<scenario>`.
    pub suite: String,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub defaults: Defaults,
    pub scenarios: Vec<ScenarioDef>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Defaults {
    #[serde(default)]
    pub deadline_ms: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScenarioDef {
    pub name: String,
    /// Catalogue item ids (`A15`).
    #[serde(default)]
    pub covers: Vec<String>,
    /// Upstream selftest assertions this scenario mirrors (`abi_test.c:enablement`).
    #[serde(default)]
    pub upstream: Vec<String>,
    #[serde(default)]
    pub requires: Requires,
    /// Why the scenario is expected to fail on the kernels we test.
    #[serde(default)]
    pub xfail: Option<String>,
    /// With `xfail` naming a known kernel bug: the fix (a patch in the checkout, such as
    /// `patches/upstream/0001-....patch`). On a kernel that carries it the scenario passes and
    /// is reported `fixed`, which does not fail the run; without it, it stays an `xfail`.
    #[serde(default)]
    pub fixed_by: Option<String>,
    /// Text a kernel report (KASAN, WARNING, ...) attributed to this scenario must include: for
    /// a scenario that provokes a known kernel bug on purpose. It passes only when its steps
    /// pass and such a report appears; that report and the taint it brings do not fail it.
    #[serde(default)]
    pub expect_report: Option<String>,
    /// Runs in a boot of its own, after the shared boot: for a scenario that leaves the kernel
    /// in a state others cannot share (tens of thousands of events whose teardown takes
    /// minutes, memory a kernel bug corrupted).
    #[serde(default)]
    pub isolated: bool,
    #[serde(default)]
    pub deadline_ms: Option<u64>,
    /// Where the kernel disagreed with the catalogue.
    #[serde(default)]
    pub note: Option<String>,
    pub steps: Vec<Step>,
}

/// What a kernel must have for a scenario to run; otherwise it is skipped with the reason.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Requires {
    /// Comma-separated bounds, all of which must hold: `>=6.4`, `<6.4`, `>=6.4,<6.13`.
    #[serde(default)]
    pub kernel: Option<String>,
    /// `CONFIG_X` (built in or a module) or `CONFIG_X=value` (`=n` also holds when absent).
    #[serde(default)]
    pub config: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `suites/schema.json`, the editors' schema, follows the model (protocol's `schemars`
    /// feature gives the steps); `UPDATE_SCHEMA=1 cargo test -p xtask schema` rewrites it.
    #[test]
    fn schema_json_is_current() {
        let path = crate::support::checkout::project_root().join("suites/schema.json");
        let want = serde_json::to_string_pretty(&schemars::schema_for!(Suite)).unwrap() + "\n";
        if std::env::var_os("UPDATE_SCHEMA").is_some() {
            std::fs::write(&path, &want).unwrap();
        }
        let got = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            got == want,
            "{} is stale: run `UPDATE_SCHEMA=1 cargo test -p xtask schema_json_is_current`",
            path.display()
        );
    }
}
