//! The merge of shard folders: refusals (another text, a missing shard, two results, a result
//! outside its shards), idempotence, and a real campaign's results split and merged back.

use std::collections::BTreeMap;

use super::*;
use crate::mutants::find;
use crate::mutants::report::Outcome;

const SRC: &str =
    "int f(int x) { return x + 1 < 2 && x != 3 ? 4 : 5; }\nint g(int y) { if (y > 7) return y - 1; return 0; }\n";

fn campaign(shards: &[&str]) -> Campaign {
    Campaign {
        file: "a.c".into(),
        digest: crate::support::files::sha256_hex(SRC),
        in_diff: None,
        ids: vec![],
        shards: shards.iter().map(|s| s.to_string()).collect(),
    }
}

fn result(id: &str, outcome: Outcome) -> MutantResult {
    MutantResult { id: id.into(), outcome, covered_by: vec!["s/a".into()], duration_ms: Some(7), stage: None }
}

/// Each shard `k/n` of the mutants as a part, every mutant Killed but those whose id is in
/// `survivors`.
fn parts(ms: &[Mutant], n: u64) -> Vec<Part> {
    (1..=n)
        .map(|k| {
            let shard = Shard { k, n };
            let state = ms
                .iter()
                .filter(|m| shard.takes(m))
                .map(|m| {
                    (m.id.clone(), result(&m.id, Outcome::Killed { by: vec!["s/a".into()], evidence: "x".into() }))
                })
                .collect();
            Part { name: format!("shard-{k}"), campaign: campaign(&[&shard.to_string()]), state }
        })
        .collect()
}

fn mutants() -> Vec<Mutant> {
    let ms = find::mutants("a.c", SRC).unwrap();
    assert!(ms.len() >= 9, "{}", ms.len());
    ms
}

#[test]
fn shards_merge_into_every_result_and_merging_again_changes_nothing() {
    let ms = mutants();
    let ps = parts(&ms, 3);
    let merged = merge(&ps, &campaign(&[]), &ms).unwrap();
    assert_eq!(merged.len(), ms.len());
    let twice: Vec<Part> = ps.iter().chain(ps.iter()).cloned().collect();
    assert_eq!(merge(&twice, &campaign(&[]), &ms).unwrap(), merged, "a folder merged with itself");
    let whole = Part { name: "merged".into(), campaign: campaign(&[]), state: merged.clone() };
    assert_eq!(merge(&[whole.clone(), whole], &campaign(&[]), &ms).unwrap(), merged, "the merge merged again");
    let mut other_duration = ps.clone();
    other_duration[0].state.values_mut().for_each(|r| r.duration_ms = Some(9));
    other_duration.extend(ps.iter().cloned());
    assert!(merge(&other_duration, &campaign(&[]), &ms).is_ok(), "durations aside");
}

#[test]
fn two_results_of_one_mutant_are_refused_naming_it_and_both_folders() {
    let ms = mutants();
    let mut ps = parts(&ms, 2);
    let mut again = ps[0].clone();
    let id = again.state.keys().next().unwrap().clone();
    again.name = "rerun".into();
    again.state.insert(id.clone(), result(&id, Outcome::Survived));
    ps.push(again);
    let e = merge(&ps, &campaign(&[]), &ms).unwrap_err();
    assert!(e.contains(&id) && e.contains("shard-1") && e.contains("rerun") && e.contains("Survived"), "{e}");
}

#[test]
fn a_missing_shard_is_refused_naming_it_and_one_of_its_mutants() {
    let ms = mutants();
    let mut ps = parts(&ms, 3);
    let gone = ps.remove(1);
    let e = merge(&ps, &campaign(&[]), &ms).unwrap_err();
    assert!(e.contains("shard 2/3 is missing"), "{e}");
    assert!(gone.state.keys().any(|id| e.contains(id.as_str())), "{e}");
    // A job that ran nothing (its share empty) still counts: only its absence is refused.
    let ps = parts(&ms, 40);
    let empty = ps.iter().position(|p| p.state.is_empty()).expect("an empty share of 40");
    assert!(merge(&ps, &campaign(&[]), &ms).is_ok());
    let mut fewer = ps.clone();
    fewer.remove(empty);
    let e = merge(&fewer, &campaign(&[]), &ms).unwrap_err();
    assert!(e.contains(&format!("shard {}/40 is missing", empty + 1)) && e.contains("no selected mutant"), "{e}");
}

#[test]
fn another_text_or_selection_is_refused_naming_the_folder_and_file() {
    let ms = mutants();
    let mut ps = parts(&ms, 2);
    ps[1].campaign.digest = crate::support::files::sha256_hex("int f(void) { return 1; }\n");
    ps[1].name = "old/shard-2".into();
    let e = merge(&ps, &campaign(&[]), &ms).unwrap_err();
    assert!(e.contains("old/shard-2") && e.contains("another text of a.c"), "{e}");
    let mut ps = parts(&ms, 2);
    ps[0].campaign.in_diff = Some("abc".into());
    assert!(merge(&ps, &campaign(&[]), &ms).unwrap_err().contains("--in-diff"));
    let mut ps = parts(&ms, 2);
    ps[0].campaign.file = "b.c".into();
    assert!(merge(&ps, &campaign(&[]), &ms).unwrap_err().contains("another file, b.c"));
}

#[test]
fn a_result_outside_its_folders_shards_is_refused() {
    let ms = mutants();
    let mut ps = parts(&ms, 2);
    let stray = ps[1].state.values().next().unwrap().clone();
    ps[0].state.insert(stray.id.clone(), stray.clone());
    let e = merge(&ps, &campaign(&[]), &ms).unwrap_err();
    assert!(e.contains(&stray.id) && e.contains("none of its shards (1/2)"), "{e}");
}

#[test]
fn a_folders_record_gathers_its_shards_and_says_when_the_text_changed() {
    let (c, w) = Campaign::after_run(None, campaign(&["1/4"]));
    assert_eq!((c.shards.as_slice(), w), (["1/4".to_string()].as_slice(), None));
    let (c, _) = Campaign::after_run(Some(c), campaign(&["3/4"]));
    let (c, _) = Campaign::after_run(Some(c), campaign(&["1/4"]));
    assert_eq!(c.shards, ["1/4", "3/4"]);
    let (whole, _) = Campaign::after_run(Some(c.clone()), campaign(&[]));
    assert!(whole.shards.is_empty(), "a run of the whole selection covers every shard");
    let mut other = campaign(&["2/4"]);
    other.digest = "0".repeat(64);
    let (c, w) = Campaign::after_run(Some(c), other.clone());
    assert_eq!(c, other);
    assert!(w.unwrap().contains("another text of a.c"));
}

/// A real campaign's results (40 lines of 7.3.4's `trace_events_user.c`, every outcome and
/// shard of four represented; its mutants as `--json` printed them, eight without a result):
/// split by `--shard`'s function and merged back, the report is the unsplit state's.
#[test]
fn a_real_campaign_split_by_shard_and_merged_reports_as_the_whole() {
    let dir = crate::support::checkout::project_root().join("xtask/test_data/mutants/shards");
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap();
    let mutants: Vec<Mutant> = serde_json::from_str(&read("mutants.json")).unwrap();
    let want: Campaign = serde_json::from_str(&read("campaign.json")).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("state.jsonl"), read("state.jsonl")).unwrap();
    let whole = crate::mutants::plan::load_state(&tmp.path().join("state.jsonl")).unwrap();
    assert_eq!((whole.len(), mutants.len()), (40, 48));
    for n in [1, 3, 4, 7] {
        let parts: Vec<Part> = (1..=n)
            .map(|k| {
                let shard = Shard { k, n };
                let state = whole.iter().filter(|(id, _)| shard.takes_id(id)).map(|(i, r)| (i.clone(), r.clone()));
                let campaign = Campaign { shards: vec![shard.to_string()], ..want.clone() };
                Part { name: format!("mutants-{k}-of-{n}"), campaign, state: state.collect() }
            })
            .collect();
        if n == 4 {
            assert!(parts.iter().all(|p| !p.state.is_empty()), "every quarter holds results");
        }
        let merged = merge(&parts, &want, &mutants).unwrap();
        assert_eq!(merged, whole, "{n} shards");
        assert_eq!(reports(&want, &mutants, &merged), reports(&want, &mutants, &whole), "{n} shards");
    }
    let (json, summary) = reports(&want, &mutants, &whole);
    let statuses: BTreeMap<&str, usize> =
        json["files"][&want.file]["mutants"].as_array().unwrap().iter().fold(BTreeMap::new(), |mut t, m| {
            *t.entry(m["status"].as_str().unwrap()).or_default() += 1;
            t
        });
    let want_statuses = [("CompileError", 2), ("Killed", 24), ("Pending", 8), ("Survived", 8), ("Timeout", 6)];
    assert_eq!(statuses, want_statuses.into_iter().collect::<BTreeMap<_, _>>());
    assert!(summary.contains("30 detected, 8 survived, 0 NoCoverage, 2 excluded, 8 not run yet"), "{summary}");
}

/// Stryker's `mutants.json` and `summary.md` of these results.
fn reports(c: &Campaign, mutants: &[Mutant], results: &BTreeMap<String, MutantResult>) -> (serde_json::Value, String) {
    let json = crate::mutants::report::stryker_json(&c.file, "", mutants, results);
    assert!(crate::mutants::report::schema_errors(&json).is_empty());
    (json, crate::mutants::summary::render(&c.file, mutants, results))
}
