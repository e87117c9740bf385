//! `compare`'s tests: the classification rules, metrics against their noise, the fixture sides
//! with repeats and the golden renderings.

use super::super::tests::check_golden;
use super::*;

fn data(p: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("test_data/compare").join(p)
}

fn fixture() -> Comparison {
    compare(&load_side(&data("base")).unwrap(), &load_side(&data("current")).unwrap())
}

fn class_of(c: &Comparison, arch: &str, scenario: &str) -> Class {
    c.entries.iter().find(|e| e.arch == arch && e.scenario == scenario).map(|e| e.class).unwrap()
}

#[test]
fn the_rules() {
    use Status::*;
    assert_eq!(classify(&[Pass], &[Fail]).0, Class::Regressed);
    assert_eq!(classify(&[Pass], &[NotRun]).0, Class::Regressed);
    assert_eq!(classify(&[Skip], &[Error]).0, Class::Regressed);
    assert_eq!(classify(&[Fail], &[Pass]).0, Class::Fixed);
    assert_eq!(classify(&[Error], &[Fail]).0, Class::StillFailing);
    assert_eq!(classify(&[Pass], &[Skip]).0, Class::Unchanged);
    assert_eq!(classify(&[], &[Fail]).0, Class::New);
    assert_eq!(classify(&[Pass], &[]).0, Class::Removed);
    assert_eq!(classify(&[Pass, Fail], &[Pass]).0, Class::Flaky);
    assert_eq!(classify(&[Pass], &[Pass, Pass, Error]).0, Class::Flaky);
    assert_eq!(classify(&[Xfail], &[Xpass]).0, Class::Flaky, "xfail/xpass churn across the sides");
    assert_eq!(classify(&[Xpass], &[Xfail]).0, Class::Flaky);
    assert_eq!(classify(&[Xfail, Xpass], &[Xfail, Xfail]).0, Class::Flaky, "churn within a side");
    assert_eq!(classify(&[Xfail], &[Xfail]).0, Class::Unchanged);
    assert_eq!(classify(&[Xfail], &[Fixed, Fixed]).0, Class::Fixed, "a known bug's fix arrived");
    assert_eq!(classify(&[Fixed], &[Xfail]).0, Class::Regressed, "a known bug's fix went");
    assert_eq!(classify(&[Fixed], &[Fixed]).0, Class::Unchanged);
    assert_eq!(classify(&[Fail, Error], &[Fail]).0, Class::StillFailing, "failed either way is not flaky");
    // Not run because another scenario broke that kernel: no verdict of its own, either way.
    assert_eq!(classify(&[Pass], &[Collateral]).0, Class::Collateral, "never a regression");
    assert_eq!(classify(&[Collateral], &[Pass]).0, Class::Collateral, "never a fix");
    assert_eq!(classify(&[Pass], &[Pass, Collateral]).0, Class::Collateral);
}

#[test]
fn fixture_sides_with_repeats() {
    let c = fixture();
    assert_eq!((c.base.runs.len(), c.current.runs.len()), (2, 2));
    let x = "x86_64";
    assert_eq!(class_of(&c, x, "registration/basic"), Class::Unchanged);
    assert_eq!(class_of(&c, x, "registration/regresses"), Class::Regressed);
    assert_eq!(class_of(&c, x, "registration/fixed"), Class::Fixed);
    assert_eq!(class_of(&c, x, "registration/still"), Class::StillFailing);
    assert_eq!(class_of(&c, x, "registration/flaky-current"), Class::Flaky);
    assert_eq!(class_of(&c, x, "registration/flaky-base"), Class::Flaky);
    assert_eq!(class_of(&c, x, "registration/old"), Class::Removed);
    assert_eq!(class_of(&c, x, "registration/added"), Class::New);
    assert_eq!(class_of(&c, x, "hazards/churn"), Class::Flaky);
    assert_eq!(class_of(&c, x, "boot x86_64"), Class::Unchanged);
    assert_eq!(class_of(&c, "arm64", "registration/skipped"), Class::Unchanged);
    let reg = c.entries.iter().find(|e| e.class == Class::Regressed).unwrap();
    assert_eq!(reg.base, [Status::Pass, Status::Pass]);
    assert_eq!(reg.note.as_deref(), Some("expected 0, got -22 (EINVAL)"));
    assert_eq!(c.regressions(), 1);
    assert_eq!(c.counts["flaky"], 3);
    assert_eq!(c.exit_code(false), 1);
    // The worst class first within an arch.
    assert_eq!(c.entries[0].class, Class::Regressed);
}

#[test]
fn a_regression_says_which_step_failed() {
    let mut sides = [load_side(&data("base")).unwrap(), load_side(&data("current")).unwrap()];
    for (_, run) in &mut sides[1] {
        let s = run.arches[0].scenarios.iter_mut().find(|s| s.name == "registration/regresses").unwrap();
        s.reason = None;
        s.log = vec!["step 9: check word w7: 0x40 (expected 0x80)".into(), "exited with status 1".into()];
    }
    let c = compare(&sides[0], &sides[1]);
    let reg = c.entries.iter().find(|e| e.class == Class::Regressed).unwrap();
    assert_eq!(reg.note.as_deref(), Some("step 9: check word w7: 0x40 (expected 0x80)"));
}

#[test]
fn metrics_are_judged_against_the_measured_noise() {
    let c = fixture();
    let m = |name: &str| c.metrics.iter().find(|m| m.metric == name).unwrap();
    // 100 -> 80 events/s with a MAD of 1: worse.
    let t = m("throughput");
    assert_eq!((t.base.n, t.base.median, t.current.median), (5, 100.0, 80.0));
    assert_eq!(t.verdict, MetricVerdict::Worse);
    assert!((t.change_pct.unwrap() + 20.0).abs() < 1e-9);
    // 100 -> 95 with a MAD of 10 on both sides: within the noise.
    assert_eq!(m("noisy").verdict, MetricVerdict::WithinNoise);
    assert_eq!(m("noisy").base.mad, 10.0);
    // 10 -> 8 ns, lower is better.
    assert_eq!(m("latency").verdict, MetricVerdict::Better);
    // A value without samples, twice per side: too few to measure noise.
    assert_eq!(m("single").verdict, MetricVerdict::Unmeasured);
    assert_eq!(c.worse_metrics(), 1);
    assert!(c.metrics.iter().all(|m| m.confirmed), "two runs a side");
    // One run a side: still worse beyond that run's noise, but unconfirmed, so no gate.
    let one = |p: &str| load_side(&data(p)).unwrap();
    let c = compare(&one("base/20260102-000010-00001"), &one("current/20260103-000010-00001"));
    let t = c.metrics.iter().find(|m| m.metric == "throughput").unwrap();
    assert_eq!((t.verdict, t.confirmed), (MetricVerdict::Worse, false));
    assert_eq!((c.worse_metrics(), c.confirmed_worse_metrics()), (1, 0));
    assert!(render_text(&c, false).contains("unconfirmed: fewer than 2 runs a side"));
    assert_eq!(c.exit_code(true), 1, "still 1: a scenario regressed");
}

#[test]
fn a_metric_change_inside_overlapping_iqrs_does_not_count() {
    // Both MADs are 0, so the medians' 0.5 exceeds the threshold, but the IQRs overlap.
    let (b, c) = ([10.0, 10.0, 10.0, 11.0, 11.0], [10.5, 10.5, 10.5, 11.0, 11.0]);
    assert_eq!((stats(&b).median, stats(&b).mad, stats(&b).q1, stats(&b).q3), (10.0, 0.0, 10.0, 11.0));
    assert_eq!((stats(&c).median, stats(&c).mad, stats(&c).q1), (10.5, 0.0, 10.5));
    let run = |samples: Vec<f64>| {
        let mut r = compare_run_with_metric(samples);
        r.run_id = "r".into();
        r
    };
    let p = PathBuf::from("x");
    let c = compare(&[(p.clone(), run(b.to_vec()))], &[(p.clone(), run(c.to_vec()))]);
    assert_eq!(c.metrics[0].threshold, 0.0);
    assert_eq!(c.metrics[0].verdict, MetricVerdict::WithinNoise);
    let c = compare(&[(p.clone(), run(vec![10.0; 3]))], &[(p, run(vec![10.5; 3]))]);
    assert_eq!(c.metrics[0].verdict, MetricVerdict::Better, "no noise at all: any change counts");
}

fn compare_run_with_metric(samples: Vec<f64>) -> Run {
    let mut r = read_run_json(&data("base/20260102-000010-00001/run.json")).unwrap();
    r.arches.truncate(1);
    let s = &mut r.arches[0].scenarios;
    s.retain(|s| s.name == "perf/throughput");
    let m = s[0].metrics.get_mut("throughput").unwrap();
    m.samples = samples;
    r
}

#[test]
fn single_runs_and_goldens() {
    let one = |p: &str| load_side(&data(p)).unwrap();
    let c = compare(&one("base/20260102-000010-00001"), &one("base/20260102-000020-00001/run.json"));
    assert_eq!(class_of(&c, "x86_64", "registration/flaky-base"), Class::Fixed);
    assert_eq!(c.exit_code(false), 0);
    assert_eq!(c.exit_code(true), 0);
    let c = fixture();
    assert_eq!(c.exit_code(true), 1);
    check_golden("compare.md", &render_markdown(&c));
    check_golden("compare.txt", render_text(&c, false).as_bytes());
    check_golden("compare-verbose.txt", render_text(&c, true).as_bytes());
}

#[test]
fn run_writes_beside_current_or_into_out() {
    let tmp = tempfile::tempdir().unwrap();
    let cur = tmp.path().join("cur");
    super::super::tests::copy_dir(&data("current"), &cur);
    assert_eq!(run(&data("base"), &cur, None, false, false).unwrap(), 1);
    let back: Comparison = serde_json::from_slice(&std::fs::read(cur.join("compare.json")).unwrap()).unwrap();
    assert_eq!(back, compare(&load_side(&data("base")).unwrap(), &load_side(&cur).unwrap()));
    assert!(cur.join("compare.md").is_file());
    let out = tmp.path().join("elsewhere");
    assert_eq!(
        run(&data("base/20260102-000010-00001"), &data("base/20260102-000010-00001"), Some(&out), false, false)
            .unwrap(),
        0
    );
    assert!(out.join("compare.json").is_file());
}

#[test]
fn bad_input_names_the_file_and_the_field() {
    let tmp = tempfile::tempdir().unwrap();
    let good = std::fs::read_to_string(data("base/20260102-000010-00001/run.json")).unwrap();
    let file = tmp.path().join("run.json");
    let check = |text: &str, want: &str| {
        std::fs::write(&file, text).unwrap();
        let e = load_side(&file).unwrap_err();
        assert_eq!(crate::support::exit::code_for(&e), 128, "{e}");
        let msg = format!("{e:#}");
        assert!(msg.contains(&file.display().to_string()) && msg.contains(want), "{msg}");
    };
    check(&good.replacen("\"schema_version\": 1", "\"schema_version\": 7", 1), "field `schema_version` is 7");
    check(&good.replacen("\"status\": \"pass\"", "\"status\": \"passed\"", 1), "arches[0].scenarios[0].status");
    check("{\"run_id\": 1}", "field `schema_version` is missing");
    check("{", "run.json:1:1");
    let e = load_side(tmp.path().join("nothing").as_path()).unwrap_err();
    assert_eq!(crate::support::exit::code_for(&e), 128);
    std::fs::remove_file(&file).unwrap();
    let e = load_side(tmp.path()).unwrap_err();
    assert!(e.to_string().contains("not a run.json, a run folder"), "{e}");
}
