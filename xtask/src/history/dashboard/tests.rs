//! The dashboard's page model, first bad runs, change flags, and the page built from a SQLite
//! history of imported runs.

use super::*;
use crate::history::rows::Origin;
use crate::history::sqlite::Sqlite;
use crate::history::store::Store;
use crate::results::model::{Metric, Run, Status};

#[test]
fn the_first_bad_run_follows_the_last_pass() {
    assert_eq!(first_bad(&["pass", "fail", "skip", "fail"]), Some((1, true)));
    assert_eq!(first_bad(&["fail", "pass", "pass", "error", "fail"]), Some((3, true)));
    assert_eq!(first_bad(&["pass", "fail", "skip", "pass"]), None, "passes now");
    assert_eq!(first_bad(&["fail", "skip", "fail"]), Some((0, false)), "never passed");
    assert_eq!(first_bad(&["pass", "fail", "skip"]), Some((1, true)), "a skip has no verdict");
    assert_eq!(first_bad(&["skip"]), None);
    assert_eq!(first_bad(&[]), None);
}

#[test]
fn noise_is_not_flagged_and_a_shift_is() {
    // Two draws of the same noise (a fixed pseudo-random walk around 100).
    let noise = |seed: u64, n: usize| -> Vec<f64> {
        let mut x = seed;
        (0..n)
            .map(|_| {
                x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
                100.0 + ((x >> 33) % 1000) as f64 / 100.0
            })
            .collect()
    };
    let baseline = noise(1, 25);
    assert_eq!(flag(&noise(2, 5), &baseline, true), None);
    assert_eq!(flag(&noise(3, 5), &baseline, true), None);
    let slower: Vec<f64> = noise(4, 5).iter().map(|v| v * 0.8).collect();
    let f = flag(&slower, &baseline, true).expect("a 20% drop is beyond the noise");
    assert!(f.p < ALPHA && (f.ratio - 0.8).abs() < 0.05 && !f.better, "{f:?}");
    let f = flag(&slower, &baseline, false).unwrap();
    assert!(f.better, "lower is better for a latency");
}

fn golden() -> Run {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/test_data/results/golden/run.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Run `n` of twelve: `abi/register` fails from run 7 on x86_64, `abi/write` flips, and a
/// figure's samples drop by a third in the last run.
fn nth_run(base: &Run, n: usize) -> Run {
    let mut run = base.clone();
    run.run_id = format!("run-{n:02}");
    for a in &mut run.arches {
        for b in &mut a.boots {
            b.started_at = Some(format!("2026-11-{:02}T10:00:00Z", n + 1));
        }
        let x86 = a.arch == "x86_64";
        for s in &mut a.scenarios {
            s.status = match s.name.as_str() {
                "abi/register" if x86 && n >= 7 => Status::Fail,
                "abi/register" => Status::Pass,
                "abi/write" if n.is_multiple_of(2) => Status::Fail,
                "abi/write" => Status::Pass,
                _ => s.status,
            };
            if s.name == "abi/register" {
                let scale = if n == 11 { 0.66 } else { 1.0 };
                let samples = (0..6).map(|i| scale * (1000.0 + f64::from((i * 7 + n as i32) % 10))).collect();
                let m = Metric { value: 1000.0 * scale, unit: "events/s".into(), higher_is_better: true, samples };
                s.metrics.insert("write_rate".into(), m);
            }
        }
    }
    run
}

#[test]
fn a_page_from_twelve_recorded_runs() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(Box::new(Sqlite::open(&dir.path().join("h.sqlite")).unwrap())).unwrap();
    // Twelve run folders, imported as `history import` does: read back from their run.json.
    let base = golden();
    let folders = dir.path().join("results");
    for n in 0..12 {
        let run = nth_run(&base, n);
        let folder = folders.join(&run.run_id);
        std::fs::create_dir_all(&folder).unwrap();
        std::fs::write(folder.join("run.json"), serde_json::to_string(&run).unwrap()).unwrap();
    }
    let loaded = crate::results::compare::load_side(&folders).unwrap();
    assert_eq!(loaded.len(), 12);
    for (folder, run) in loaded {
        let mut rows = crate::history::rows_of(&run, &folder, Origin::Import);
        // An import has no commit; one is set to see it on the first bad run.
        rows.run.project_commit = Some(format!("{}aabbccddeeff00112233445566778899aabbcc", &run.run_id[4..]));
        assert!(store.record(&rows).unwrap());
    }
    let runs = store.runs().unwrap();
    let measured = store.measurements().unwrap();
    assert_eq!(measured.iter().filter(|m| m.arch == "x86_64").count(), 12, "one figure per run");
    assert_eq!(measured[0].samples.len(), 6);
    let p = page("sqlite test", &runs, &store.outcomes().unwrap(), &[], &measured, 10);
    assert_eq!(p.runs, 12);
    let x86 = p.arches.iter().find(|a| a.arch == "x86_64").unwrap();
    let reg = x86.rows.iter().find(|r| r.scenario == "abi/register").expect("failing: not folded");
    let cell = reg.cells.iter().flatten().next().unwrap();
    assert_eq!(cell.status, "fail");
    assert_eq!(cell.class, Some(Class::PersistentFailure));
    let bad = cell.first_bad.as_ref().unwrap();
    assert_eq!((bad.run_id.as_str(), bad.passed_before), ("run-07", true));
    assert!(bad.commit.as_deref().unwrap().starts_with("07aabb"));
    assert_eq!(cell.strip.len(), 12);
    let write = x86.rows.iter().find(|r| r.scenario == "abi/write").unwrap();
    assert_eq!(write.cells.iter().flatten().next().unwrap().class, Some(Class::Unstable));
    assert!(x86.folded.iter().any(|r| r.scenario == "abi/enable"), "a skip alone is folded");
    let arm = p.arches.iter().find(|a| a.arch == "arm64").unwrap();
    assert!(arm.folded.iter().any(|r| r.scenario == "abi/register"), "arm64 keeps passing");
    let t = &x86.trends[0];
    assert_eq!((t.name.as_str(), t.points.len()), ("write_rate", 12));
    let f = t.flag.as_ref().expect("a drop by a third is flagged");
    assert!(!f.better && (f.ratio - 0.66).abs() < 0.01, "{f:?}");
    let html = crate::history::dashboard_html(&mut store, 10).unwrap();
    for want in [
        "<h2 id=\"x86_64\">x86_64</h2>",
        "abi/register",
        "first bad: run-07 at 2026-11-08T10:00:00Z, 07aabbccddee",
        "cls unstable",
        "scenario(s) pass and keep passing</summary>",
        "<svg",
        "worse (p=",
    ] {
        assert!(html.contains(want), "{want} missing from the page");
    }
    assert!(!html.contains("http://") && !html.contains("https://"), "nothing fetched");
}
