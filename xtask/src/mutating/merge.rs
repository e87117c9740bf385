//! A campaign's shards: `--run` records in `<out>/campaign.json` which file text, selection
//! and shards its state file holds; `--merge DIR` folds shard folders (or folders holding
//! them: downloaded artifacts) into `<out>/state.jsonl` as `mutants::shards` rules, for the
//! normal `--report` to render.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::target::Target;
use crate::cli::MutantsArgs;
use crate::mutants::mutant::Mutant;
use crate::mutants::plan;
use crate::mutants::select::Shard;
use crate::mutants::shards::{self, Campaign, Part, CAMPAIGN_JSON};
use crate::support::exit::{error, Kind};

/// The campaign these flags select: the file text's digest, `--in-diff`'s and the `--id`s,
/// and `shard` (none: the whole selection).
pub fn campaign(args: &MutantsArgs, target: &Target, shard: Option<Shard>) -> Result<Campaign> {
    let in_diff = match &args.in_diff {
        Some(p) => Some(crate::support::files::sha256_hex(
            std::fs::read(p).map_err(|e| error(Kind::BadInput, format!("--in-diff {}: {e}", p.display())))?,
        )),
        None => None,
    };
    let mut ids = args.ids.clone();
    ids.sort();
    ids.dedup();
    Ok(Campaign {
        file: target.name.clone(),
        digest: crate::support::files::sha256_hex(&target.text),
        in_diff,
        ids,
        shards: shard.map(|s| s.to_string()).into_iter().collect(),
    })
}

/// Before `--run` appends to `<out>/state.jsonl`: `<out>/campaign.json` updated with this
/// run's shard (a warning when the folder held another text's or selection's results).
pub fn record_run(run: Campaign, out: &Path) -> Result<()> {
    let path = out.join(CAMPAIGN_JSON);
    let before = std::fs::read(&path).ok().and_then(|b| serde_json::from_slice::<Campaign>(&b).ok());
    let (now, warning) = Campaign::after_run(before, run);
    if let Some(w) = warning {
        eprintln!("warning: {}: {w}", out.display());
    }
    write_campaign(&now, out)
}

fn write_campaign(c: &Campaign, out: &Path) -> Result<()> {
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let path = out.join(CAMPAIGN_JSON);
    std::fs::write(&path, serde_json::to_string_pretty(c)? + "\n")
        .with_context(|| format!("writing {}", path.display()))
}

/// `--merge DIR...`: every shard folder found, checked and merged into `<out>/state.jsonl`
/// (rewritten whole, sorted by id) and `<out>/campaign.json` (the whole selection); `selected`
/// are the mutants the flags select, no shard taken.
pub fn merge(args: &MutantsArgs, target: &Target, selected: &[Mutant], out: &Path) -> Result<()> {
    let want = campaign(args, target, None)?;
    let mut parts = Vec::new();
    for dir in &args.merges {
        for folder in folders(dir)? {
            parts.push(part(&folder)?);
        }
    }
    let merged = shards::merge(&parts, &want, selected).map_err(|e| error(Kind::BadInput, e))?;
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let state = plan::state_file(out);
    let tmp = out.join("state.jsonl.merging");
    let mut text = String::new();
    for r in merged.values() {
        text += &serde_json::to_string(r)?;
        text.push('\n');
    }
    std::fs::write(&tmp, text).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, &state).with_context(|| format!("writing {}", state.display()))?;
    write_campaign(&want, out)?;
    let from: BTreeMap<&str, &[String]> =
        parts.iter().map(|p| (p.name.as_str(), p.campaign.shards.as_slice())).collect();
    let path = out.join("merged-from.json");
    std::fs::write(&path, serde_json::to_string_pretty(&from)? + "\n")
        .with_context(|| format!("writing {}", path.display()))?;
    eprintln!(
        "merged {} folders: {} results of the {} mutants selected into {}",
        parts.len(),
        merged.len(),
        selected.len(),
        state.display()
    );
    Ok(())
}

/// The shard folders of one `--merge DIR`: itself when it holds `campaign.json` or
/// `state.jsonl`, else those below it (two levels at most, in name order).
fn folders(dir: &Path) -> Result<Vec<PathBuf>> {
    let is_one = |d: &Path| d.join(CAMPAIGN_JSON).is_file() || plan::state_file(d).is_file();
    if !dir.is_dir() {
        return Err(error(Kind::BadInput, format!("--merge {}: not a folder", dir.display())));
    }
    if is_one(dir) {
        return Ok(vec![dir.to_path_buf()]);
    }
    let subdirs = |d: &Path| -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(d)
            .map(|rd| rd.flatten().map(|e| e.path()).filter(|p| p.is_dir()).collect())
            .unwrap_or_default();
        v.sort();
        v
    };
    let mut found = Vec::new();
    for d in subdirs(dir) {
        if is_one(&d) {
            found.push(d);
        } else {
            found.extend(subdirs(&d).into_iter().filter(|d| is_one(d)));
        }
    }
    if found.is_empty() {
        return Err(error(
            Kind::BadInput,
            format!(
                "--merge {}: no shard folder in it (one with {CAMPAIGN_JSON}, as `mutants --run` writes)",
                dir.display()
            ),
        ));
    }
    Ok(found)
}

/// One shard folder read: its record and its results.
fn part(folder: &Path) -> Result<Part> {
    let path = folder.join(CAMPAIGN_JSON);
    let name = folder.display().to_string();
    let bytes = std::fs::read(&path).map_err(|_| {
        error(
            Kind::BadInput,
            format!(
                "{name}: no {CAMPAIGN_JSON}: its state.jsonl does not say which file text and shard it is of \
                 (an older `mutants --run` wrote it); a `--run` with the shard's flags writes it, not running \
                 its finished mutants again"
            ),
        )
    })?;
    let campaign: Campaign =
        serde_json::from_slice(&bytes).map_err(|e| error(Kind::BadInput, format!("{}: {e}", path.display())))?;
    let state = plan::load_state(&plan::state_file(folder)).map_err(|e| error(Kind::BadInput, format!("{e:#}")))?;
    Ok(Part { name, campaign, state })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cmd, Xtask};
    use crate::mutants::report::{MutantResult, Outcome};
    use clap::Parser;

    fn args(dir: &Path, extra: &[&str]) -> MutantsArgs {
        let file = dir.join("a.c");
        let empty = dir.join("equivalent.tsv");
        std::fs::write(&file, "int f(int x) { return x + 1 < 2 && x != 3 ? 4 : 5; }\n").unwrap();
        std::fs::write(&empty, "").unwrap();
        let mut argv = vec!["x", "mutants", "--file", file.to_str().unwrap(), "--equivalent", empty.to_str().unwrap()];
        argv.extend(extra);
        let Cmd::Mutants(m) = Xtask::try_parse_from(argv).unwrap().command else { panic!() };
        m
    }

    /// Shard folders as `--run --shard K/2` leaves them, under `art/`, each mutant Survived.
    fn shards(dir: &Path) -> Vec<String> {
        let target = Target::of(&args(dir, &[])).unwrap();
        let all = crate::mutants::find::mutants(&target.name, &target.text).unwrap();
        let mut ids = vec![];
        for k in 1..=2 {
            let shard = Shard { k, n: 2 };
            let out = dir.join(format!("art/mutants-{k}-of-2"));
            record_run(campaign(&args(dir, &[]), &target, Some(shard)).unwrap(), &out).unwrap();
            for m in all.iter().filter(|m| shard.takes(m)) {
                let r = MutantResult {
                    id: m.id.clone(),
                    outcome: Outcome::Survived,
                    covered_by: vec![],
                    duration_ms: None,
                    stage: None,
                };
                plan::append_state(&plan::state_file(&out), &r).unwrap();
                ids.push(m.id.clone());
            }
        }
        ids.sort();
        ids
    }

    #[test]
    fn artifact_folders_merge_into_one_state_and_report() {
        let dir = tempfile::tempdir().unwrap();
        let ids = shards(dir.path());
        let (art, out) = (dir.path().join("art"), dir.path().join("merged"));
        let a = args(dir.path(), &["--merge", art.to_str().unwrap(), "--out", out.to_str().unwrap(), "--report"]);
        assert_eq!(crate::mutating::run(&a).unwrap(), 0);
        let merged = plan::load_state(&plan::state_file(&out)).unwrap();
        assert_eq!(merged.keys().cloned().collect::<Vec<_>>(), ids);
        let c: Campaign = serde_json::from_slice(&std::fs::read(out.join(CAMPAIGN_JSON)).unwrap()).unwrap();
        assert!(c.shards.is_empty(), "the merged folder holds the whole selection");
        let report = std::fs::read_to_string(out.join("mutants.json")).unwrap();
        assert_eq!(report.matches("\"Survived\"").count(), ids.len());
        // The merged folder merges again, alone or twice, to the same state.
        let again = dir.path().join("again");
        let o = out.to_str().unwrap();
        let a = args(dir.path(), &["--merge", o, "--merge", o, "--out", again.to_str().unwrap()]);
        crate::mutating::run(&a).unwrap();
        assert_eq!(std::fs::read(plan::state_file(&again)).unwrap(), std::fs::read(plan::state_file(&out)).unwrap());
    }

    #[test]
    fn a_folder_without_its_record_or_of_another_text_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        shards(dir.path());
        let one = dir.path().join("art/mutants-1-of-2");
        let out = dir.path().join("merged");
        let two = dir.path().join("art/mutants-2-of-2");
        let merge_args = |d: &Path| {
            let (d, two, out) = (d.to_str().unwrap(), two.to_str().unwrap(), out.to_str().unwrap());
            args(dir.path(), &["--merge", d, "--merge", two, "--out", out])
        };
        let record = std::fs::read(one.join(CAMPAIGN_JSON)).unwrap();
        let mut other: Campaign = serde_json::from_slice(&record).unwrap();
        other.digest = "0".repeat(64);
        std::fs::write(one.join(CAMPAIGN_JSON), serde_json::to_vec(&other).unwrap()).unwrap();
        let e = crate::mutating::run(&merge_args(&one)).unwrap_err().to_string();
        assert!(e.contains("mutants-1-of-2") && e.contains("another text of"), "{e}");
        std::fs::remove_file(one.join(CAMPAIGN_JSON)).unwrap();
        let e = crate::mutating::run(&merge_args(&one)).unwrap_err().to_string();
        assert!(e.contains("mutants-1-of-2: no campaign.json"), "{e}");
        let e = crate::mutating::run(&merge_args(&dir.path().join("nothing-here"))).unwrap_err().to_string();
        assert!(e.contains("not a folder"), "{e}");
        assert!(!plan::state_file(&out).exists(), "nothing written when refused");
    }
}
