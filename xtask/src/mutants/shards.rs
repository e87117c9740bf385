//! A campaign fanned out over shards and merged back (sans-IO): `campaign.json`, what a `--run`
//! records next to its state file (the file text's digest, the selection, the shards run
//! there), and the merge of several such folders' results into one state, refused when they
//! are of another text or selection, when a shard is missing or a mutant has two results.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::mutants::mutant::Mutant;
use crate::mutants::report::MutantResult;
use crate::mutants::select::Shard;

/// The record's file name, next to `state.jsonl`.
pub const CAMPAIGN_JSON: &str = "campaign.json";

/// What a folder's `state.jsonl` holds results of: the file, its text and selection, the shards.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Campaign {
    /// The file's path inside its kernel tree.
    pub file: String,
    /// The SHA-256 of the file's text (any `--patch` applied).
    pub digest: String,
    /// The SHA-256 of `--in-diff`'s patch, when one narrowed the selection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_diff: Option<String>,
    /// `--id`s, sorted (none: every mutant).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ids: Vec<String>,
    /// The `--shard`s run into the folder (`2/4`); none: the whole selection.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shards: Vec<String>,
}

impl Campaign {
    /// This record after one more run into the folder (of `run`, a new record with one shard
    /// or none); the warning when the folder held another text's or selection's results.
    pub fn after_run(before: Option<Campaign>, run: Campaign) -> (Campaign, Option<String>) {
        let Some(mut before) = before else { return (run, None) };
        if let Some(why) = before.same_selection(&run) {
            return (run, Some(format!("the folder held results of {why}: they no longer merge with this run's")));
        }
        if before.shards.is_empty() || run.shards.is_empty() {
            before.shards.clear();
        } else {
            before.shards.extend(run.shards);
            before.shards.sort();
            before.shards.dedup();
        }
        (before, None)
    }

    /// None when `other` is of the same file text and selection; else what differs, in words.
    pub fn same_selection(&self, other: &Campaign) -> Option<String> {
        if self.file != other.file {
            Some(format!("another file, {}", self.file))
        } else if self.digest != other.digest {
            Some(format!("another text of {} (digest {})", self.file, &self.digest[..self.digest.len().min(12)]))
        } else if self.in_diff != other.in_diff {
            Some("another --in-diff selection".to_string())
        } else if self.ids != other.ids {
            Some("another --id selection".to_string())
        } else {
            None
        }
    }

    /// The shards as parsed; an unreadable one is an error naming it.
    fn parsed_shards(&self) -> Result<Vec<Shard>, String> {
        self.shards.iter().map(|s| s.parse::<Shard>()).collect()
    }
}

/// One folder to merge: as shown in messages, its record and its results.
#[derive(Debug, Clone)]
pub struct Part {
    pub name: String,
    pub campaign: Campaign,
    pub state: BTreeMap<String, MutantResult>,
}

/// The results of `parts` as one state, for the campaign `want` (its shards none) whose
/// selected mutants are `selected`. Refused, each reason naming the folder and the mutant or
/// shard: a part of another file text or selection, a result of a mutant outside its part's
/// shards, a shard no part holds, a mutant with two different results (its duration aside;
/// the first part's is kept). Merging a folder with itself changes nothing.
pub fn merge(parts: &[Part], want: &Campaign, selected: &[Mutant]) -> Result<BTreeMap<String, MutantResult>, String> {
    let ids: BTreeSet<&str> = selected.iter().map(|m| m.id.as_str()).collect();
    let mut merged: BTreeMap<String, (MutantResult, &str)> = BTreeMap::new();
    for part in parts {
        if let Some(why) = part.campaign.same_selection(want) {
            return Err(format!(
                "{}: its results are of {why}, not of {} as given here (digest {})",
                part.name,
                want.file,
                &want.digest[..want.digest.len().min(12)]
            ));
        }
        let shards = part.campaign.parsed_shards().map_err(|e| format!("{}: {e}", part.name))?;
        for (id, r) in &part.state {
            if !ids.contains(id.as_str()) {
                return Err(format!(
                    "{}: mutant {id} is not one of the {} mutants selected of {}",
                    part.name,
                    ids.len(),
                    want.file
                ));
            }
            if !shards.is_empty() && !shards.iter().any(|s| s.takes_id(id)) {
                return Err(format!(
                    "{}: mutant {id} is of none of its shards ({})",
                    part.name,
                    part.campaign.shards.join(", ")
                ));
            }
            match merged.get(id) {
                Some((kept, from)) if !same_result(kept, r) => {
                    return Err(format!(
                        "mutant {id} has two results: {} in {from}, {} in {}",
                        said(kept),
                        said(r),
                        part.name
                    ))
                }
                Some(_) => {}
                None => {
                    merged.insert(id.clone(), (r.clone(), &part.name));
                }
            }
        }
    }
    missing_shard(parts, selected)?;
    Ok(merged.into_iter().map(|(id, (r, _))| (id, r)).collect())
}

/// The error naming a shard no part holds, with one of its mutants (when any is selected).
fn missing_shard(parts: &[Part], selected: &[Mutant]) -> Result<(), String> {
    if parts.is_empty() {
        return Err("no folder to merge".to_string());
    }
    if parts.iter().any(|p| p.campaign.shards.is_empty()) {
        return Ok(());
    }
    let held: Vec<Shard> = parts.iter().flat_map(|p| p.campaign.parsed_shards().unwrap_or_default()).collect();
    let splits: BTreeSet<u64> = held.iter().map(|s| s.n).collect();
    // Every share of each split the parts use: a job that failed before it wrote anything
    // is missing even when no selected mutant falls in its share.
    for n in splits {
        for k in 1..=n {
            let shard = Shard { k, n };
            if held.contains(&shard) {
                continue;
            }
            let of_it: Vec<&Mutant> = selected.iter().filter(|m| shard.takes(m)).collect();
            let uncovered: Vec<&&Mutant> = of_it.iter().filter(|m| !held.iter().any(|s| s.takes(m))).collect();
            if uncovered.is_empty() && !of_it.is_empty() {
                continue; // another split's shards hold its mutants
            }
            let which = match uncovered.first() {
                Some(m) => format!("mutant {} and {} more of it have no result", m.id, uncovered.len() - 1),
                None => "no selected mutant falls in it".to_string(),
            };
            return Err(format!("shard {k}/{n} is missing: no folder merged holds it ({which})"));
        }
    }
    Ok(())
}

/// Whether two results say the same, their durations aside.
fn same_result(a: &MutantResult, b: &MutantResult) -> bool {
    MutantResult { duration_ms: None, ..a.clone() } == MutantResult { duration_ms: None, ..b.clone() }
}

/// A result in a few words: `Killed by a/b`, `Survived`, `Timeout (reason)`.
fn said(r: &MutantResult) -> String {
    let stage = r.stage.as_deref().map(|s| format!(" at stage {s}")).unwrap_or_default();
    match &r.outcome {
        crate::mutants::report::Outcome::Killed { by, .. } => format!("Killed by {}{stage}", by.join(", ")),
        o => format!("{}{stage}", o.name()),
    }
}

#[cfg(test)]
#[path = "shards/tests.rs"]
mod tests;
