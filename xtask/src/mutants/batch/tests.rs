//! The batch's plan, its run split per mutant, and what it vouches for.

use super::*;
use crate::mutants::classify::classify;
use crate::results::model::Finding;

fn scenario(name: &str) -> protocol::Scenario {
    protocol::Scenario { name: name.into(), deadline_ms: 1000, steps: vec![] }
}

fn batch() -> Batch {
    Batch {
        groups: vec![
            Group { id: "m1".into(), number: 3, scenarios: vec!["s/a".into(), "s/b".into()] },
            Group { id: "m2".into(), number: 8, scenarios: vec!["s/b".into(), "s/c".into()] },
        ],
    }
}

#[test]
fn each_group_runs_its_scenarios_renamed_under_its_number() {
    let mut plan = protocol::Plan::empty("x86_64");
    plan.scenarios = vec![scenario("s/a"), scenario("s/b"), scenario("s/d")];
    let mut marks = Marks::default();
    marks.xfail.insert("s/b".into(), "a known bug".into());
    let compiled = Compiled { plan, isolated: vec![], skipped: vec![], marks };
    assert_eq!(batch().filters(), ["s/a", "s/b", "s/c"]);
    let out = batch().expand(compiled);
    let names: Vec<&str> = out.plan.scenarios.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["s/a@m1", "s/b@m1", "s/b@m2"], "s/c is not planned on this kernel: left out");
    let groups = out.plan.groups.unwrap();
    assert_eq!(groups.switch, SWITCH);
    assert_eq!(groups.of.values().copied().collect::<Vec<_>>(), [3, 3, 8]);
    assert_eq!(out.marks.xfail.keys().collect::<Vec<_>>(), ["s/b@m1", "s/b@m2"]);
}

/// The golden run's first arch made a batch's: `s/a@m1` passed, `s/b@m1` failed, `s/b@m2`
/// passed, all in its shared boot.
fn batch_run() -> Run {
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("test_data/results/golden/run.json");
    let mut run = crate::results::compare::read_run_json(&fixture).unwrap();
    run.arches.truncate(1);
    let arch = &mut run.arches[0];
    let template = arch.scenarios[0].clone();
    arch.scenarios = [("s/a@m1", Status::Pass), ("s/b@m1", Status::Fail), ("s/b@m2", Status::Pass)]
        .into_iter()
        .map(|(name, status)| crate::results::model::Scenario {
            name: name.into(),
            status,
            boot: Some(arch.boots[0].name.clone()),
            ..template.clone()
        })
        .collect();
    run
}

#[test]
fn the_run_splits_per_mutant_and_vouches_for_check_kills_and_clean_survivals() {
    let run = batch_run();
    let parts = split(&run, &batch());
    assert_eq!(parts.keys().collect::<Vec<_>>(), ["m1", "m2"]);
    let names = |r: &Run| r.arches[0].scenarios.iter().map(|s| s.name.clone()).collect::<Vec<_>>();
    assert_eq!(names(&parts["m1"]), ["s/a", "s/b"]);
    assert_eq!(names(&parts["m2"]), ["s/b"]);
    let (m1, m2) = (classify(&parts["m1"]), classify(&parts["m2"]));
    assert!(matches!(&m1, Outcome::Killed { by, .. } if by == &["s/b".to_string()]), "{m1:?}");
    assert_eq!(m2, Outcome::Survived);
    assert_eq!(vouched(&parts["m1"], &m1, &run), Ok(()));
    assert_eq!(vouched(&parts["m2"], &m2, &run), Ok(()));

    // A report between scenarios: whose it is cannot be told, so a survival is not vouched for,
    // and it is no mutant's kill in the split.
    let mut reported = run.clone();
    let finding = Finding { kind: "warning".into(), summary: "WARNING: at f".into(), ..Default::default() };
    reported.arches[0].boots[0].findings.push(finding.clone());
    let parts = split(&reported, &batch());
    assert_eq!(classify(&parts["m2"]), Outcome::Survived);
    let why = vouched(&parts["m2"], &Outcome::Survived, &reported).unwrap_err();
    assert!(why.contains("kernel report outside any scenario"), "{why}");
    assert_eq!(vouched(&parts["m1"], &m1, &reported), Ok(()));

    // A kill by a kernel report in the mutant's own scenario, and a hang there (what follows
    // it never runs), are vouched for; a scenario the boot never reached before any failure is
    // not.
    let mut oops = run.clone();
    oops.arches[0].scenarios[1].findings.push(finding);
    let parts = split(&oops, &batch());
    let killed = classify(&parts["m1"]);
    assert!(matches!(&killed, Outcome::Killed { evidence, .. } if evidence.contains("warning")), "{killed:?}");
    assert_eq!(vouched(&parts["m1"], &killed, &oops), Ok(()));
    let mut hung = run.clone();
    hung.arches[0].scenarios[0].status = Status::Fail;
    hung.arches[0].scenarios[0].judged = Some("timeout".into());
    hung.arches[0].scenarios[1].status = Status::Collateral;
    let parts = split(&hung, &batch());
    let timeout = classify(&parts["m1"]);
    assert!(matches!(timeout, Outcome::Timeout { .. }), "{timeout:?}");
    assert_eq!(vouched(&parts["m1"], &timeout, &hung), Ok(()));
    let mut cut = run.clone();
    cut.arches[0].scenarios[2].status = Status::NotRun;
    let parts = split(&cut, &batch());
    let why = vouched(&parts["m2"], &Outcome::Survived, &cut).unwrap_err();
    assert!(why.starts_with("1 covering scenario(s) did not end in the batch (s/b)"), "{why}");
}
