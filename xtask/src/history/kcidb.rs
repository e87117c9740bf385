//! KCIDB out of the history (sans-IO): recorded runs as one KCIDB v5.3 document, so a CI that
//! submits to KernelCI sends what the store holds. Its objects have the ids a run's own
//! `kcidb.json` gives them (`results::kcidb`): a checkout per source and patch set, a build per
//! kernel build (the cache's key), a test per run, arch and scenario, with the same path and
//! status. Each test's `misc` adds what only the history knows: the cell's class against the
//! runs before it (after the gate's re-run, when there was one), the re-run's status, and each
//! kernel report `known` (with the first run that had it) or `new`, by fingerprint. The store
//! keeps no boots and no logs: there are no boot tests, and log URLs only under `--base`.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::Result;
use serde_json::{json, Map, Value};

use super::classify::{classify_rechecked, Classed};
use super::findings::{mark, Marked};
use super::rows::{KernelId, RunRow};
use super::store::{Found, Outcome, Recheck};
use crate::results::kcidb::{
    build_id_of, checkout_id_of, excerpt_of, kcidb_status, patchset_of, test_id_of, test_path, MAJOR, MINOR, ORIGIN,
};
use crate::results::model::Status;
use crate::results::text::clean;

/// What the store holds, read once.
pub struct Held<'a> {
    pub outcomes: &'a [Outcome],
    pub found: &'a [Found],
    pub rechecks: &'a [Recheck],
}

/// The KCIDB document of `runs` (each recorded in `held`), classes over `window` outcomes; each
/// run's folder under `base` gives its tests' `log_url` (`<base>/<run id>/<arch>/console.log`)
/// when given.
pub fn render(held: &Held, runs: &[&RunRow], window: usize, base: Option<&str>) -> Result<Vec<u8>> {
    let mut checkouts: BTreeMap<String, Value> = BTreeMap::new();
    let mut builds: BTreeMap<String, Value> = BTreeMap::new();
    let mut tests = Vec::new();
    for run in runs {
        let mine = |run_id: &str, host: &str| run_id == run.run_id && host == run.host;
        let classed = classify_rechecked(held.outcomes, held.rechecks, &run.run_id, &run.host, window);
        let marked = mark(held.found, &run.run_id, &run.host);
        for o in held.outcomes.iter().filter(|o| mine(&o.run_id, &o.host)) {
            let patchset = patchset_of(o.kernel.patches.split(',').filter(|p| !p.is_empty()));
            let checkout_id = checkout_id_of(&o.kernel.source_id, &patchset);
            let c =
                checkouts.entry(checkout_id.clone()).or_insert_with(|| checkout(&checkout_id, &o.kernel, &patchset));
            // The earliest run of the checkout (RFC 3339 in UTC sorts as text).
            if c["start_time"].as_str().is_none_or(|t| run.started_at.as_str() < t) {
                c["start_time"] = json!(run.started_at);
            }
            let build_id = build_id_of(o.build_key.as_deref(), &o.run_id, &o.arch);
            builds.entry(build_id.clone()).or_insert_with(|| build(&build_id, &checkout_id, o));
            let class = classed.iter().find(|c| c.arch == o.arch && c.scenario == o.scenario);
            let reports: Vec<&Marked> =
                marked.iter().filter(|m| m.arch == o.arch && m.scenario == o.scenario).collect();
            tests.push(test(run, o, &build_id, class, &reports, base));
        }
    }
    let doc = json!({
        "version": { "major": MAJOR, "minor": MINOR },
        "checkouts": checkouts.into_values().collect::<Vec<_>>(),
        "builds": builds.into_values().collect::<Vec<_>>(),
        "tests": tests,
    });
    let mut bytes = serde_json::to_vec_pretty(&doc)?;
    bytes.push(b'\n');
    Ok(bytes)
}

fn checkout(id: &str, k: &KernelId, patchset: &str) -> Value {
    json!({
        "id": id,
        "origin": ORIGIN,
        "valid": true,
        "comment": clean(&k.source),
        "patchset_hash": patchset,
        "misc": { "source_id": k.source_id, "patches": k.patches.split(',').filter(|p| !p.is_empty()).collect::<Vec<_>>() },
    })
}

fn build(id: &str, checkout_id: &str, o: &Outcome) -> Value {
    let mut b = Map::new();
    b.insert("id".into(), json!(id));
    b.insert("checkout_id".into(), json!(checkout_id));
    b.insert("origin".into(), json!(ORIGIN));
    // A merged run names a second cell of an arch `<arch>-<cell>`: KCIDB wants the arch.
    b.insert("architecture".into(), json!(o.arch.split('-').next().unwrap_or(&o.arch)));
    if o.build_key.is_some() {
        b.insert("status".into(), json!("PASS"));
    }
    b.insert(
        "misc".into(),
        json!({ "kernel_release": o.kernel.release, "config_sha256": o.kernel.config_hash, "profile": o.kernel.profile }),
    );
    Value::Object(b)
}

/// A recorded status as KCIDB's (an unknown word: `ERROR`).
fn status_of(text: &str) -> &'static str {
    Status::ALL.iter().find(|s| s.as_str() == text).map_or("ERROR", |s| kcidb_status(*s))
}

fn test(
    run: &RunRow,
    o: &Outcome,
    build_id: &str,
    class: Option<&Classed>,
    reports: &[&Marked],
    base: Option<&str>,
) -> Value {
    let mut t = Map::new();
    t.insert("id".into(), json!(test_id_of(&o.run_id, &o.arch, &o.scenario)));
    t.insert("build_id".into(), json!(build_id));
    t.insert("origin".into(), json!(ORIGIN));
    let suite = o.scenario.split_once('/').map_or(o.scenario.as_str(), |(s, _)| s);
    t.insert("path".into(), json!(test_path(suite, &o.scenario)));
    t.insert("status".into(), json!(status_of(&o.status)));
    t.insert("start_time".into(), json!(run.started_at));
    if let Some(ms) = o.duration_ms {
        t.insert("duration".into(), json!(ms as f64 / 1000.0));
    }
    if let Some(r) = &o.reason {
        t.insert("comment".into(), json!(clean(r)));
    }
    if !reports.is_empty() {
        let text: Vec<&str> = reports.iter().map(|m| m.summary.as_str()).collect();
        t.insert("log_excerpt".into(), json!(excerpt_of(&text.join("\n"))));
    }
    if let Some(base) = base {
        let url = format!("{}/{}/{}/console.log", base.trim_end_matches('/'), o.run_id, o.arch);
        t.insert("log_url".into(), json!(url));
    }
    let mut misc = json!({
        "status": o.status,
        "scenario": o.scenario,
        "arch": o.arch,
        "host": o.host,
        "project_commit": run.project_commit,
    });
    if let Some(c) = class {
        misc["class"] = json!(c.class.as_str());
        misc["window"] = json!(c.window);
        if let Some(again) = &c.rerun {
            misc["rerun_status"] = json!(again);
        }
    }
    if !reports.is_empty() {
        let reports: Vec<Value> = reports
            .iter()
            .map(|m| {
                json!({ "kind": m.kind, "fingerprint": m.fingerprint, "signature": m.signature, "mark": m.mark,
                        "first_run": m.first_run })
            })
            .collect();
        misc["kernel_reports"] = json!(reports);
    }
    t.insert("misc".into(), misc);
    Value::Object(t)
}

/// The recorded runs `wanted` names (all of them when empty), oldest first; an id that is not
/// recorded is an error naming it.
pub fn chosen<'a>(runs: &'a [RunRow], wanted: &[String]) -> std::result::Result<Vec<&'a RunRow>, String> {
    if wanted.is_empty() {
        return Ok(runs.iter().collect());
    }
    let known: BTreeSet<&str> = runs.iter().map(|r| r.run_id.as_str()).collect();
    if let Some(missing) = wanted.iter().find(|w| !known.contains(w.as_str())) {
        return Err(format!("no run {missing} is recorded"));
    }
    Ok(runs.iter().filter(|r| wanted.contains(&r.run_id)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::rows::{of_run, Context, Origin};
    use crate::results::model::{Rechecked, Rerun, Run};

    fn golden() -> Run {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/test_data/results/golden/run.json");
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    /// The outcomes and findings of `runs` as the store reads them back, oldest first.
    fn stored(runs: &[Run]) -> (Vec<RunRow>, Vec<Outcome>, Vec<Found>, Vec<Recheck>) {
        let file = tempfile::NamedTempFile::new().unwrap();
        let db = crate::history::sqlite::Sqlite::open(file.path()).unwrap();
        let mut store = crate::history::Store::open(Box::new(db)).unwrap();
        for run in runs {
            let cx = Context {
                project_commit: Some("0123456789abcdef0123456789abcdef01234567".into()),
                host: "here",
                recorded_at: "2026-11-27T10:00:00Z".parse().unwrap(),
                origin: Origin::Import,
                folder: "results/x",
                profiles: &[],
            };
            assert!(store.record(&of_run(run, &cx)).unwrap());
        }
        (store.runs().unwrap(), store.outcomes().unwrap(), store.findings().unwrap(), store.rechecks().unwrap())
    }

    fn doc_of(runs: &[Run], wanted: &[String]) -> Value {
        let (rows, outcomes, found, rechecks) = stored(runs);
        let held = Held { outcomes: &outcomes, found: &found, rechecks: &rechecks };
        let chosen = chosen(&rows, wanted).unwrap();
        serde_json::from_slice(&render(&held, &chosen, 10, None).unwrap()).unwrap()
    }

    /// Every scenario's test, build and checkout has the id, path, status and links the run's
    /// own KCIDB document gives it: the two can be submitted side by side.
    #[test]
    fn the_ids_are_the_runs_own() {
        let run = golden();
        let own: Value = serde_json::from_slice(&crate::results::kcidb::render(&run, "file:///r").unwrap()).unwrap();
        let doc = doc_of(std::slice::from_ref(&run), &[]);
        let tests = doc["tests"].as_array().unwrap();
        let scenarios: usize = run.arches.iter().map(|a| a.scenarios.len()).sum();
        assert_eq!(tests.len(), scenarios);
        for t in tests {
            let twin = own["tests"].as_array().unwrap().iter().find(|o| o["id"] == t["id"]);
            let twin = twin.unwrap_or_else(|| panic!("no test {} in the run's own document", t["id"]));
            for field in ["build_id", "path", "status", "duration", "comment"] {
                assert_eq!(t[field], twin[field], "{field} of {}", t["id"]);
            }
        }
        let ids = |d: &Value, k: &str| -> BTreeSet<String> {
            d[k].as_array().unwrap().iter().map(|o| o["id"].as_str().unwrap().to_string()).collect()
        };
        assert_eq!(ids(&doc, "builds"), ids(&own, "builds"));
        assert_eq!(ids(&doc, "checkouts"), ids(&own, "checkouts"));
        for b in doc["builds"].as_array().unwrap() {
            let twin = own["builds"].as_array().unwrap().iter().find(|o| o["id"] == b["id"]).unwrap();
            assert_eq!((&b["checkout_id"], &b["architecture"]), (&twin["checkout_id"], &twin["architecture"]));
        }
        for c in doc["checkouts"].as_array().unwrap() {
            let twin = own["checkouts"].as_array().unwrap().iter().find(|o| o["id"] == c["id"]).unwrap();
            assert_eq!(c["patchset_hash"], twin["patchset_hash"], "{}", c["id"]);
        }
        let patched = doc["checkouts"].as_array().unwrap().iter().filter(|c| c["patchset_hash"] != "").count();
        assert!(patched > 0, "the golden run has a patched kernel");
    }

    /// The history's own words: the class against the runs before, the re-run's status, and a
    /// kernel report known from an earlier run.
    #[test]
    fn classes_reruns_and_known_reports() {
        let first = golden();
        let mut second = golden();
        second.run_id = "run-later".into();
        for b in second.arches.iter_mut().flat_map(|a| a.boots.iter_mut()) {
            b.started_at = Some("2027-01-02T03:00:00Z".into());
        }
        let failed = second.arches[0].scenarios.iter().position(|s| s.status == Status::Pass).unwrap();
        second.arches[0].scenarios[failed].status = Status::Fail;
        let (arch, name) = (second.arches[0].arch.clone(), second.arches[0].scenarios[failed].name.clone());
        second.rerun = Some(Rerun {
            run_id: Some("run-later-rerun".into()),
            scenarios: vec![Rechecked {
                arch: arch.clone(),
                scenario: name.clone(),
                flips: 2,
                runs: 3,
                rerun_status: "pass".into(),
                class: "unstable".into(),
            }],
        });
        let doc = doc_of(&[first, second], &["run-later".to_string()]);
        let tests = doc["tests"].as_array().unwrap();
        assert!(tests.iter().all(|t| t["id"].as_str().unwrap().contains(":run-later:")), "only the run asked for");
        let t = tests.iter().find(|t| t["misc"]["scenario"] == name && t["misc"]["arch"] == arch).unwrap();
        assert_eq!(
            (&t["status"], &t["misc"]["class"], &t["misc"]["rerun_status"]),
            (&json!("FAIL"), &json!("unstable"), &json!("pass"))
        );
        let stable = tests.iter().filter(|t| t["misc"]["class"] == "stable").count();
        assert!(stable > 0, "{doc}");
        let panic = tests.iter().find(|t| t["misc"]["scenario"] == "fault/panic").unwrap();
        let report = &panic["misc"]["kernel_reports"][0];
        assert_eq!((&report["mark"], &report["first_run"]), (&json!("known"), &json!("run-fixture")), "{panic}");
        assert!(panic["log_excerpt"].as_str().unwrap().contains("Kernel panic"), "{panic}");
    }

    #[test]
    fn an_unknown_run_is_named() {
        let (rows, ..) = stored(&[golden()]);
        assert_eq!(chosen(&rows, &["nope".into()]).unwrap_err(), "no run nope is recorded");
        assert_eq!(chosen(&rows, &[]).unwrap().len(), 1);
    }
}
