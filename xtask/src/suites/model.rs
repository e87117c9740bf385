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
    /// The suite checks the kernel's health (no WARN, Oops or taint), not exact ABI results:
    /// its scenarios count in no figure of the suites' power (the mutation maps leave them
    /// out, so a mutant they alone would fail counts as survived).
    #[serde(default)]
    pub health_only: bool,
    pub scenarios: Vec<ScenarioDef>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Defaults {
    #[serde(default)]
    pub deadline_ms: Option<u64>,
    /// What every scenario of the suite needs, on top of its own `requires` (both must hold:
    /// a kernel outside either range, or without any of either's options, skips it).
    #[serde(default)]
    pub requires: Requires,
}

#[derive(Debug, Clone, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScenarioDef {
    pub name: String,
    /// What the scenario checks and why, in a sentence or two (shown in the reports beside
    /// the scenario; explanations belong here rather than in YAML comments).
    #[serde(default)]
    pub description: Option<String>,
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
    /// With `xfail`: the known bug shows only when a race goes its way, so a failure is an
    /// `xfail` but a pass is a plain pass (it says nothing about the fix), never `fixed` or
    /// `xpass`. The scenario asserts the right behaviour; the bug stays named.
    #[serde(default)]
    pub intermittent: bool,
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
        let want = serde_json::to_string_pretty(&schemars::schema_for!(Suite)).unwrap() + "\n";
        crate::support::checkout::assert_generated_current(
            "suites/schema.json",
            &want,
            "UPDATE_SCHEMA",
            "schema_json_is_current",
        );
    }

    /// Every step kind, field and named value of `suites/schema.json` appears in code quotes
    /// (or a code block) of `docs/src/scenarios.md`, the language's documentation; errno names are
    /// documented as a whole (`expect`).
    #[test]
    fn every_name_of_the_language_is_documented() {
        let root = crate::support::checkout::project_root();
        let schema: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(root.join("suites/schema.json")).unwrap()).unwrap();
        let mut names = std::collections::BTreeSet::new();
        schema_names(&schema, &schema, &mut names, &mut Default::default());
        let doc = std::fs::read_to_string(root.join("docs/src/scenarios.md")).unwrap();
        let documented = quoted_words(&doc);
        let errno = |n: &str| {
            n.len() > 1 && n.starts_with('E') && n[1..].bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit())
        };
        let missing: Vec<&String> = names.iter().filter(|n| !errno(n) && !documented.contains(*n)).collect();
        assert_eq!(missing, Vec::<&String>::new(), "named in suites/schema.json, not in docs/src/scenarios.md");
    }

    /// Every step kind (a `Step` variant's serialized name, taken from the type itself) is in
    /// `suites/schema.json` and has its row in the language reference: named in code quotes in
    /// the first column of the table under `## The steps` in `docs/src/scenarios.md`.
    #[test]
    fn every_step_kind_is_in_the_schema_and_the_reference() {
        let root = crate::support::checkout::project_root();
        let kinds = step_kinds(&serde_json::to_value(schemars::schema_for!(protocol::Step)).unwrap());
        assert!(kinds.len() > 40, "the step kinds read from the type: {kinds:?}");
        let schema: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(root.join("suites/schema.json")).unwrap()).unwrap();
        let in_schema = step_kinds(&schema["$defs"]["Step"]);
        let rows = step_rows(&std::fs::read_to_string(root.join("docs/src/scenarios.md")).unwrap());
        let mut missing = Vec::new();
        for kind in &kinds {
            if !in_schema.contains(kind) {
                missing.push(format!("{kind}: not in suites/schema.json (UPDATE_SCHEMA=1 regenerates it)"));
            }
            if !rows.contains(kind) {
                missing.push(format!("{kind}: no row of `## The steps` in docs/src/scenarios.md names it"));
            }
        }
        assert!(missing.is_empty(), "step kinds missing:\n{}", missing.join("\n"));
    }

    /// The step kinds a schema of `Step` lists: the one key each of its `oneOf` entries requires.
    fn step_kinds(step: &serde_json::Value) -> std::collections::BTreeSet<String> {
        let entries = step["oneOf"].as_array().into_iter().flatten();
        entries.filter_map(|e| e["required"][0].as_str().map(String::from)).collect()
    }

    /// The names in code quotes in the first column of the table under `## The steps`.
    fn step_rows(doc: &str) -> std::collections::BTreeSet<String> {
        let section = doc.split("\n## The steps\n").nth(1).unwrap_or_default();
        let section = section.split("\n#").next().unwrap_or_default();
        let first_cells = section.lines().filter_map(|l| l.strip_prefix('|')?.split('|').next());
        first_cells.flat_map(|cell| quoted_words(cell).into_iter()).collect()
    }

    /// Property names and string constants of a schema node, following `$ref`s once each.
    fn schema_names(
        root: &serde_json::Value,
        node: &serde_json::Value,
        out: &mut std::collections::BTreeSet<String>,
        seen: &mut std::collections::BTreeSet<String>,
    ) {
        use serde_json::Value;
        let Value::Object(map) = node else { return };
        if let Some(Value::String(r)) = map.get("$ref") {
            let def = r.rsplit('/').next().unwrap().to_string();
            if seen.insert(def.clone()) {
                schema_names(root, &root["$defs"][&def], out, seen);
            }
        }
        if let Some(Value::Object(props)) = map.get("properties") {
            for (k, v) in props {
                out.insert(k.clone());
                schema_names(root, v, out, seen);
            }
        }
        if let Some(Value::String(c)) = map.get("const") {
            out.insert(c.clone());
        }
        for v in map.get("enum").and_then(Value::as_array).into_iter().flatten() {
            out.extend(v.as_str().map(String::from));
        }
        for key in ["oneOf", "anyOf", "allOf"] {
            for v in map.get(key).and_then(Value::as_array).into_iter().flatten() {
                schema_names(root, v, out, seen);
            }
        }
        for key in ["items", "additionalProperties"] {
            if let Some(v) = map.get(key) {
                schema_names(root, v, out, seen);
            }
        }
    }

    /// The identifiers inside the `code` spans and fenced blocks of a Markdown text.
    fn quoted_words(doc: &str) -> std::collections::BTreeSet<String> {
        let mut quoted: Vec<&str> = Vec::new();
        for (i, part) in doc.split("```").enumerate() {
            if i % 2 == 1 {
                quoted.push(part); // a fenced block
            } else {
                quoted.extend(part.split('`').skip(1).step_by(2)); // the `code` spans of prose
            }
        }
        quoted
            .iter()
            .flat_map(|q| q.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')))
            .filter(|w| !w.is_empty())
            .map(String::from)
            .collect()
    }
}
