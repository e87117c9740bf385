//! KCIDB v5 JSON (the schema of the `kcidb-io` package, v5.3): one checkout per source and
//! patch set, one build per arch kernel, one test per scenario and per boot. Statuses: pass
//! PASS, fail and xfail FAIL (the code is faulty, knowingly or not), xpass PASS, skip SKIP,
//! not run MISS, error ERROR; our own word stays in `misc.status`.
//!
//! Times: a build's `start_time` and `duration` (its phases, from the cache's metadata), a boot
//! test's and its scenarios' `start_time` (when QEMU started: the scenarios ran in that boot),
//! durations; the checkout's `start_time` is its earliest build's. Logs: each test's `log_url`
//! (the boot's `console.log`) and `output_files` (`console.log`, `results.ktap`) are paths
//! relative to the run folder joined to `base`, the folder's URL: the schema takes absolute URIs
//! only. `git_commit_hash` is set when the source is a git tree.

use anyhow::Result;
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

use super::model::{ArchRun, Run, Scenario, Status};
use super::text::clean;

/// The `origin` of every object: lower-case letters, digits and underscores.
pub const ORIGIN: &str = "ue_conformance";

/// The schema version written.
pub const MAJOR: u32 = 5;
pub const MINOR: u32 = 3;

/// The schema's cap on `log_excerpt`.
const EXCERPT_MAX: usize = 16384;

/// The KCIDB document of `run`, its log URLs under `base`, the run folder's URL
/// (`https://ci.example/runs/<run id>`, `file:///...`).
pub fn render(run: &Run, base: &str) -> Result<Vec<u8>> {
    let url = |rel: &str| format!("{}/{rel}", base.trim_end_matches('/'));
    let mut checkouts: Vec<Value> = Vec::new();
    let mut builds = Vec::new();
    let mut tests = Vec::new();
    for arch in &run.arches {
        let checkout_id = checkout_id(run, arch);
        let started = arch.kernel.as_ref().and_then(build_start).map(|(start, _)| start);
        match checkouts.iter_mut().find(|c| c["id"] == checkout_id) {
            None => checkouts.push(checkout(&checkout_id, arch, started)),
            Some(c) => {
                // The earliest build of the checkout (RFC 3339 in UTC sorts as text).
                let earlier = started.filter(|s| c["start_time"].as_str().is_none_or(|t| s.to_string().as_str() < t));
                if let Some(s) = earlier {
                    c["start_time"] = json!(s.to_string());
                }
            }
        }
        let build_id = build_id_of(arch.kernel.as_ref().map(|k| k.build_key.as_str()), &run.run_id, &arch.arch);
        builds.push(build(&build_id, &checkout_id, arch));
        for b in &arch.boots {
            let (status, why) = b.health();
            let mut t = Map::new();
            t.insert("id".into(), json!(format!("{ORIGIN}:{}:{}:boot", run.run_id, b.name)));
            t.insert("build_id".into(), json!(build_id));
            t.insert("origin".into(), json!(ORIGIN));
            t.insert("path".into(), json!("user_events.boot"));
            t.insert("status".into(), json!(kcidb_status(status)));
            t.insert("duration".into(), json!(b.wall_ms as f64 / 1000.0));
            t.insert("comment".into(), json!(clean(&why)));
            logs(&mut t, b, &url);
            t.insert("environment".into(), environment(b));
            t.insert("misc".into(), json!({ "boot": b.name, "verdict": b.verdict.kind, "ended": b.ended }));
            let mut excerpt = b.problems.join("\n");
            for f in &b.findings {
                excerpt.push_str(&format!("\n{}", f.excerpt.join("\n")));
            }
            if !excerpt.trim().is_empty() {
                t.insert("log_excerpt".into(), json!(excerpt_of(excerpt.trim())));
            }
            tests.push(Value::Object(t));
        }
        for s in &arch.scenarios {
            tests.push(test(run, arch, &build_id, s, &url));
        }
    }
    let doc = json!({
        "version": { "major": MAJOR, "minor": MINOR },
        "checkouts": checkouts,
        "builds": builds,
        "tests": tests,
    });
    let mut bytes = serde_json::to_vec_pretty(&doc)?;
    bytes.push(b'\n');
    Ok(bytes)
}

/// KCIDB's patchset hash: sha256 over the newline-terminated sha256 of each patch, in order;
/// empty without patches.
fn patchset_hash(arch: &ArchRun) -> String {
    arch.kernel.as_ref().map_or_else(String::new, |k| patchset_of(k.patches.iter().map(|p| p.sha256.as_str())))
}

/// [`patchset_hash`] of the patches' sha256, in order (the history keeps only those).
pub fn patchset_of<'a>(shas: impl Iterator<Item = &'a str>) -> String {
    let mut h = Sha256::new();
    let mut any = false;
    for sha in shas {
        any = true;
        h.update(format!("{sha}\n"));
    }
    if any {
        crate::support::files::hex(&h.finalize())
    } else {
        String::new()
    }
}

/// A checkout's id: its source's digest, and its patch set's hash when it has patches.
pub fn checkout_id_of(source_id: &str, patchset: &str) -> String {
    if patchset.is_empty() {
        format!("{ORIGIN}:{source_id}")
    } else {
        format!("{ORIGIN}:{source_id}+{patchset}")
    }
}

fn checkout_id(run: &Run, arch: &ArchRun) -> String {
    match &arch.kernel {
        Some(k) => checkout_id_of(&k.source_id, &patchset_hash(arch)),
        None => format!("{ORIGIN}:unknown-{}", run.run_id),
    }
}

/// A build's id: the cache's build key, or the run and arch without kernel metadata.
pub fn build_id_of(build_key: Option<&str>, run_id: &str, arch: &str) -> String {
    match build_key {
        Some(key) => format!("{ORIGIN}:{key}"),
        None => format!("{ORIGIN}:{run_id}-{arch}"),
    }
}

/// A scenario's test id in run `run_id` on `arch`.
pub fn test_id_of(run_id: &str, arch: &str, scenario: &str) -> String {
    format!("{ORIGIN}:{run_id}:{arch}:{scenario}")
}

/// When a build started and how long it took: its finish time less its phases.
fn build_start(k: &super::model::Kernel) -> Option<(jiff::Timestamp, u64)> {
    let (at, ms) = (k.built_at.as_deref()?.parse::<jiff::Timestamp>().ok()?, k.build_ms?);
    Some((at.checked_sub(jiff::SignedDuration::from_millis(ms as i64)).ok()?.round(jiff::Unit::Second).ok()?, ms))
}

/// A test's logs: the boot's console as `log_url`, both raw logs as `output_files`, and when
/// QEMU started as `start_time`.
fn logs(t: &mut Map<String, Value>, b: &super::model::Boot, url: &dyn Fn(&str) -> String) {
    if let Some(at) = &b.started_at {
        t.insert("start_time".into(), json!(at));
    }
    t.insert("log_url".into(), json!(url(&b.console_log)));
    let file = |rel: &str| json!({ "name": rel.rsplit('/').next().unwrap_or(rel), "url": url(rel) });
    t.insert("output_files".into(), json!([file(&b.console_log), file(&b.results_log)]));
}

fn checkout(id: &str, arch: &ArchRun, started: Option<jiff::Timestamp>) -> Value {
    let mut c = Map::new();
    c.insert("id".into(), json!(id));
    c.insert("origin".into(), json!(ORIGIN));
    c.insert("valid".into(), json!(true));
    if let Some(s) = started {
        c.insert("start_time".into(), json!(s.to_string()));
    }
    if let Some(k) = &arch.kernel {
        c.insert("comment".into(), json!(clean(&k.source)));
        c.insert("patchset_hash".into(), json!(patchset_hash(arch)));
        if let Some(commit) =
            k.git_commit.as_deref().filter(|c| c.len() == 40 && c.bytes().all(|b| b.is_ascii_hexdigit()))
        {
            c.insert("git_commit_hash".into(), json!(commit.to_ascii_lowercase()));
        }
        c.insert(
            "misc".into(),
            json!({
                "source_kind": k.source_kind,
                "source_id": k.source_id,
                "patches": k.patches.iter().map(|p| json!({ "name": p.name, "sha256": p.sha256 })).collect::<Vec<_>>(),
            }),
        );
    }
    Value::Object(c)
}

fn build(id: &str, checkout_id: &str, arch: &ArchRun) -> Value {
    let mut b = Map::new();
    b.insert("id".into(), json!(id));
    b.insert("checkout_id".into(), json!(checkout_id));
    b.insert("origin".into(), json!(ORIGIN));
    // A merged run names a second cell of an arch `<arch>-<cell>`: KCIDB wants the arch.
    b.insert("architecture".into(), json!(arch.arch.split('-').next().unwrap_or(&arch.arch)));
    if let Some(k) = &arch.kernel {
        b.insert("compiler".into(), json!(clean(&k.compiler)));
        b.insert("config_name".into(), json!(k.fragments.join("+")));
        b.insert("status".into(), json!("PASS"));
        if let Some((start, ms)) = build_start(k) {
            b.insert("start_time".into(), json!(start.to_string()));
            b.insert("duration".into(), json!(ms as f64 / 1000.0));
        }
        b.insert("misc".into(), json!({ "kernel_release": k.release, "config_sha256": k.config_hash }));
    }
    Value::Object(b)
}

fn environment(b: &super::model::Boot) -> Value {
    let qemu = b.qemu_version.as_deref().unwrap_or("QEMU (version not recorded)");
    let mut misc = json!({ "accel": b.accel, "qemu_version": b.qemu_version, "qemu_command": b.qemu_command });
    if let Some(sandbox) = &b.virtiofsd_sandbox {
        misc["virtiofsd_sandbox"] = json!(sandbox);
    }
    json!({ "comment": clean(&format!("{qemu}, {}", b.accel)), "misc": misc })
}

pub fn kcidb_status(s: Status) -> &'static str {
    match s {
        Status::Pass | Status::Xpass | Status::Fixed => "PASS",
        Status::Fail | Status::Xfail => "FAIL",
        Status::Skip => "SKIP",
        Status::NotRun | Status::Collateral => "MISS",
        Status::Error => "ERROR",
    }
}

/// A dot-separated path of `[a-zA-Z0-9_-]` parts: `user_events.<suite>.<scenario>`.
fn path_of(s: &Scenario) -> String {
    test_path(&s.suite, &s.name)
}

/// [`path_of`] a scenario `name` (`suite/short`) of `suite`.
pub fn test_path(suite: &str, name: &str) -> String {
    let part =
        |p: &str| p.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' }).collect::<String>();
    let short = name.split_once('/').map_or(name, |(_, n)| n);
    format!("user_events.{}.{}", part(suite), part(short))
}

/// The last `EXCERPT_MAX` characters (the end of a log says most), cleaned.
pub fn excerpt_of(text: &str) -> String {
    let text = clean(text);
    let n = text.chars().count();
    if n <= EXCERPT_MAX {
        return text;
    }
    text.chars().skip(n - EXCERPT_MAX).collect()
}

fn test(run: &Run, arch: &ArchRun, build_id: &str, s: &Scenario, url: &dyn Fn(&str) -> String) -> Value {
    let mut t = Map::new();
    t.insert("id".into(), json!(test_id_of(&run.run_id, &arch.arch, &s.name)));
    t.insert("build_id".into(), json!(build_id));
    t.insert("origin".into(), json!(ORIGIN));
    t.insert("path".into(), json!(path_of(s)));
    t.insert("status".into(), json!(kcidb_status(s.status)));
    if let Some(ms) = s.duration_ms {
        t.insert("duration".into(), json!(ms as f64 / 1000.0));
    }
    if let Some(r) = &s.reason {
        t.insert("comment".into(), json!(clean(r)));
    }
    let mut text: Vec<String> = s.log.clone();
    for f in &s.findings {
        text.extend(f.excerpt.iter().cloned());
    }
    text.extend(s.console_tail.iter().cloned());
    if !text.is_empty() {
        t.insert("log_excerpt".into(), json!(excerpt_of(&text.join("\n"))));
    }
    if let Some(b) = arch.boots.iter().find(|b| Some(&b.name) == s.boot.as_ref()) {
        logs(&mut t, b, url);
        t.insert("environment".into(), environment(b));
    }
    let mut misc = json!({ "status": s.status.as_str(), "scenario": s.name, "arch": arch.arch });
    if let Some(j) = &s.judged {
        misc["judged"] = json!(j);
    }
    if !s.metrics.is_empty() {
        misc["metrics"] = serde_json::to_value(&s.metrics).unwrap_or(Value::Null);
    }
    t.insert("misc".into(), misc);
    Value::Object(t)
}

#[cfg(test)]
mod tests {
    use super::super::tests::{check_golden, fixture};
    use super::*;

    #[test]
    fn golden() {
        check_golden("kcidb.json", &render(&fixture(), BASE).unwrap());
    }

    const BASE: &str = "https://ci.example/runs/20260102-030405-00001";

    /// Times and logs: a build's start and duration, each test's start, its console log and
    /// raw logs under the run folder's URL, the git commit of a git source.
    #[test]
    fn times_logs_and_the_commit() {
        let mut run = fixture();
        let k = run.arches[0].kernel.as_mut().unwrap();
        k.git_commit = Some("C236ADE0579BB76634B21F0712CA5D632655B1B6".into());
        let doc: Value = serde_json::from_slice(&render(&run, &format!("{BASE}/")).unwrap()).unwrap();
        assert_eq!(doc["checkouts"][0]["git_commit_hash"], "c236ade0579bb76634b21f0712ca5d632655b1b6");
        assert!(doc["checkouts"][0]["start_time"].is_string(), "{}", doc["checkouts"][0]);
        let build = &doc["builds"][0];
        assert!(build["start_time"].is_string() && build["duration"].as_f64().unwrap() > 0.0, "{build}");
        let tests = doc["tests"].as_array().unwrap();
        let boot = tests.iter().find(|t| t["path"] == "user_events.boot").unwrap();
        assert_eq!(boot["start_time"], "2026-01-02T03:00:00Z");
        assert_eq!(boot["log_url"], format!("{BASE}/x86_64/console.log"));
        assert_eq!(boot["output_files"][1]["url"], format!("{BASE}/x86_64/results.ktap"));
        assert_eq!(boot["output_files"][1]["name"], "results.ktap");
        let scenario = tests.iter().find(|t| t["misc"]["scenario"] == "abi/register").unwrap();
        assert_eq!(scenario["start_time"], boot["start_time"]);
        assert!(scenario["duration"].is_number(), "{scenario}");
    }

    #[test]
    fn ids_are_unique_and_paths_fit_the_schema() {
        let doc: Value = serde_json::from_slice(&render(&fixture(), BASE).unwrap()).unwrap();
        let tests = doc["tests"].as_array().unwrap();
        let ids: std::collections::BTreeSet<&str> = tests.iter().map(|t| t["id"].as_str().unwrap()).collect();
        assert_eq!(ids.len(), tests.len());
        for t in tests {
            let path = t["path"].as_str().unwrap();
            assert!(
                path.split('.')
                    .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')),
                "{path}"
            );
        }
        assert_eq!(doc["version"]["major"], 5);
    }
}
