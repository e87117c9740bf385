//! What became of each mutant and `mutants.json` in
//! Stryker's mutation-testing-report-schema (version 1, `packages/report-schema` of
//! stryker-mutator/mutation-testing-elements; the report is checked here against the schema's
//! required fields and status values, written out by hand, not a copy of it). Sans-IO.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::mutants::mutant::Mutant;

/// What running a mutant showed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status")]
pub enum Outcome {
    /// The mutated kernel did not build; `reason` is the compiler's first error.
    CompileError { reason: String },
    /// No scenario executes the mutant's lines (per the coverage map), so none was run.
    NoCoverage,
    /// These scenarios failed; `evidence` is what showed it (a mismatch, an Oops, a report).
    Killed { by: Vec<String>, evidence: String },
    /// The boot did not end in time (a hang counts as detection, reported apart).
    Timeout { reason: String },
    /// Every covering scenario passed.
    Survived,
    /// No covering scenario failed, but some never ran: the boot ended early for a reason the
    /// mutant's outcome cannot rest on (an expected failure, an `xfail` scenario, left what
    /// cannot be undone). Stryker's RuntimeError: neither detected nor survived.
    RuntimeError { reason: String },
    /// Listed in the tracked equivalent list: it cannot change behaviour, for `reason`.
    Equivalent { reason: String },
}

impl Outcome {
    /// The outcome's name: `Killed`, `NoCoverage`, ...
    pub fn name(&self) -> &'static str {
        match self {
            Outcome::CompileError { .. } => "CompileError",
            Outcome::NoCoverage => "NoCoverage",
            Outcome::Killed { .. } => "Killed",
            Outcome::Timeout { .. } => "Timeout",
            Outcome::Survived => "Survived",
            Outcome::RuntimeError { .. } => "RuntimeError",
            Outcome::Equivalent { .. } => "Equivalent",
        }
    }
}

/// One mutant's result as the state file keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MutantResult {
    pub id: String,
    #[serde(flatten)]
    pub outcome: Outcome,
    /// The scenarios that execute the mutant's lines (the ones run).
    #[serde(default)]
    pub covered_by: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    /// The stage (a coverage map, its arches and profiles) the outcome comes from, when there
    /// were stages to go through: a survivor goes on to the next stage that covers it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage: Option<String>,
}

/// The status, `killedBy` and `statusReason` of an outcome in Stryker's vocabulary.
fn stryker_status(outcome: Option<&Outcome>) -> (&'static str, Vec<String>, Option<String>) {
    match outcome {
        None => ("Pending", vec![], None),
        Some(Outcome::CompileError { reason }) => ("CompileError", vec![], Some(reason.clone())),
        Some(Outcome::NoCoverage) => ("NoCoverage", vec![], Some("no scenario executes this line".into())),
        Some(Outcome::Killed { by, evidence }) => ("Killed", by.clone(), Some(evidence.clone())),
        Some(Outcome::Timeout { reason }) => ("Timeout", vec![], Some(reason.clone())),
        Some(Outcome::Survived) => ("Survived", vec![], None),
        Some(Outcome::RuntimeError { reason }) => ("RuntimeError", vec![], Some(reason.clone())),
        Some(Outcome::Equivalent { reason }) => ("Ignored", vec![], Some(format!("equivalent: {reason}"))),
    }
}

/// `mutants.json`: every mutant of one source file with its result (Pending when it has none
/// yet), the scenarios that covered or killed any as `testFiles` (one per suite file, the
/// part of a scenario id before its first `/`, or `scenarios` when it has none).
pub fn stryker_json(file: &str, source: &str, mutants: &[Mutant], results: &BTreeMap<String, MutantResult>) -> Value {
    let mut tests: BTreeSet<String> = BTreeSet::new();
    let list: Vec<Value> = mutants
        .iter()
        .map(|m| {
            let result = results.get(&m.id);
            let (status, killed_by, reason) = stryker_status(result.map(|r| &r.outcome));
            let covered_by = result.map(|r| r.covered_by.clone()).unwrap_or_default();
            tests.extend(covered_by.iter().cloned());
            tests.extend(killed_by.iter().cloned());
            let mut v = json!({
                "id": m.id,
                "mutatorName": m.operator.to_string(),
                "description": format!("{} in {}: {}", m.operator, m.function, m.change()),
                "replacement": m.replacement,
                "location": {
                    "start": {"line": m.line, "column": m.column},
                    "end": {"line": m.end_line, "column": m.end_column},
                },
                "status": status,
            });
            if result.is_some() {
                v["coveredBy"] = json!(covered_by);
            }
            if !killed_by.is_empty() {
                v["killedBy"] = json!(killed_by);
            }
            if let Some(reason) = reason {
                v["statusReason"] = json!(reason);
            }
            if let Some(ms) = result.and_then(|r| r.duration_ms) {
                v["duration"] = json!(ms);
            }
            v
        })
        .collect();
    let mut test_files: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for t in &tests {
        let suite = t.split_once('/').map_or("scenarios", |(s, _)| s);
        test_files.entry(suite.to_string()).or_default().push(json!({"id": t, "name": t}));
    }
    let test_files: serde_json::Map<String, Value> =
        test_files.into_iter().map(|(k, tests)| (k, json!({ "tests": tests }))).collect();
    json!({
        "schemaVersion": "1",
        "thresholds": {"high": 95, "low": 80},
        "framework": {"name": "cargo xtask mutants"},
        "files": { file: { "language": "c", "source": source, "mutants": list } },
        "testFiles": test_files,
    })
}

/// What the schema (version 1) requires of a report, each miss in a line (none: it
/// conforms): `schemaVersion`, `thresholds` `high` and `low`, `files` with `language`,
/// `source` and `mutants`, each mutant's `id`, `mutatorName`, `location.start`/`end` `line`
/// and `column` (from 1), a `status` of its enum, and string arrays for
/// `killedBy`/`coveredBy`; `testFiles`' tests with `id`, `name`.
pub fn schema_errors(r: &Value) -> Vec<String> {
    const STATUSES: [&str; 8] =
        ["Killed", "Survived", "NoCoverage", "CompileError", "RuntimeError", "Timeout", "Ignored", "Pending"];
    let mut errors = Vec::new();
    let mut need = |ok: bool, what: String| {
        if !ok {
            errors.push(what);
        }
    };
    need(r["schemaVersion"].is_string(), "schemaVersion".into());
    need(r["thresholds"]["high"].is_number() && r["thresholds"]["low"].is_number(), "thresholds".into());
    for (path, f) in r["files"].as_object().into_iter().flatten() {
        need(f["language"].is_string() && f["source"].is_string(), format!("files.{path}: language, source"));
        for (i, m) in f["mutants"].as_array().into_iter().flatten().enumerate() {
            let at = format!("files.{path}.mutants[{i}]");
            need(m["id"].is_string() && m["mutatorName"].is_string(), format!("{at}: id, mutatorName"));
            for end in ["start", "end"] {
                let p = &m["location"][end];
                let ok = ["line", "column"].iter().all(|k| p[*k].as_u64().is_some_and(|n| n >= 1));
                need(ok, format!("{at}.location.{end}"));
            }
            let status = m["status"].as_str().unwrap_or_default();
            need(STATUSES.contains(&status), format!("{at}.status: `{status}` is not a status of the schema"));
            for k in ["killedBy", "coveredBy"] {
                let ok = m.get(k).is_none_or(|v| v.as_array().is_some_and(|a| a.iter().all(Value::is_string)));
                need(ok, format!("{at}.{k}"));
            }
        }
    }
    for (suite, t) in r["testFiles"].as_object().into_iter().flatten() {
        for test in t["tests"].as_array().into_iter().flatten() {
            need(test["id"].is_string() && test["name"].is_string(), format!("testFiles.{suite}: id, name"));
        }
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: &str = "int f(int x)\n{\n\tif (x < 2)\n\t\treturn -EINVAL;\n\tg(x);\n\treturn x + 1;\n}\n";

    fn results(ms: &[Mutant]) -> BTreeMap<String, MutantResult> {
        let scen = |s: &str| vec![s.to_string()];
        let outcomes = [
            (
                Outcome::Killed { by: scen("abi/register-bad"), evidence: "expected -EINVAL, got 0".into() },
                scen("abi/register-bad"),
            ),
            (Outcome::Survived, scen("abi/register-ok")),
            (Outcome::NoCoverage, vec![]),
            (Outcome::CompileError { reason: "error: expected ';'".into() }, vec![]),
            (Outcome::Timeout { reason: "no progress for 60 s".into() }, scen("abi/register-ok")),
            (Outcome::Equivalent { reason: "the bound is never reached".into() }, vec![]),
        ];
        ms.iter()
            .zip(outcomes)
            .map(|(m, (outcome, covered_by))| {
                (
                    m.id.clone(),
                    MutantResult { id: m.id.clone(), outcome, covered_by, duration_ms: Some(1200), stage: None },
                )
            })
            .collect()
    }

    #[test]
    fn the_report_follows_the_published_schema() {
        let ms = crate::mutants::find::mutants("kernel/x.c", SRC).unwrap();
        assert!(ms.len() > 6, "a mutant per outcome and some Pending");
        let report = stryker_json("kernel/x.c", SRC, &ms, &results(&ms));
        assert_eq!(schema_errors(&report), Vec::<String>::new());
        // And the check rejects what the schema does: an unknown status.
        let mut bad = report.clone();
        bad["files"]["kernel/x.c"]["mutants"][0]["status"] = json!("Equivalent");
        assert_eq!(
            schema_errors(&bad),
            ["files.kernel/x.c.mutants[0].status: `Equivalent` is not a status of the schema"]
        );

        let statuses: Vec<&str> = report["files"]["kernel/x.c"]["mutants"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["status"].as_str().unwrap())
            .collect();
        assert_eq!(
            &statuses[..7],
            ["Killed", "Survived", "NoCoverage", "CompileError", "Timeout", "Ignored", "Pending"]
        );
        let first = &report["files"]["kernel/x.c"]["mutants"][0];
        assert_eq!(first["killedBy"], json!(["abi/register-bad"]));
        assert_eq!(first["statusReason"], json!("expected -EINVAL, got 0"));
        assert_eq!(
            report["testFiles"]["abi"]["tests"].as_array().unwrap().len(),
            2,
            "the scenarios that covered or killed a mutant, by suite"
        );
    }

    #[test]
    fn the_state_round_trips() {
        let ms = crate::mutants::find::mutants("kernel/x.c", SRC).unwrap();
        for r in results(&ms).values() {
            let text = serde_json::to_string(r).unwrap();
            assert_eq!(&serde_json::from_str::<MutantResult>(&text).unwrap(), r, "{text}");
        }
    }
}
