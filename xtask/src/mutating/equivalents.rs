//! The equivalent list of a campaign: the tracked `mutants/equivalent.tsv` (or `--equivalent`)
//! read against the file mutated, its stale entries warned of, `--check-equivalents`, and
//! `--recheck-equivalents`' verdict on the listed mutants once they ran.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use anyhow::Result;

use super::target::Target;
use crate::cli::MutantsArgs;
use crate::mutants::equivalent;
use crate::mutants::find;
use crate::mutants::mutant::Mutant;
use crate::mutants::plan;
use crate::mutants::report;
use crate::support::exit::{error, Kind};

/// The tracked list of equivalent mutants, in the checkout.
pub const EQUIVALENT_LIST: &str = "mutants/equivalent.tsv";

/// The equivalent list as read, and what of it applies to the file mutated.
pub struct EquivalentList {
    /// As shown in messages: the tracked list's path in the checkout, or `--equivalent`.
    pub path: String,
    pub entries: Vec<equivalent::Entry>,
    pub applied: equivalent::Applied,
    /// The SHA-256 of the file's text.
    pub digest: String,
}

/// The equivalent list's entries that do not apply to this file: each named when they are
/// few or asked for, else counted.
pub fn warn_of_entries(args: &MutantsArgs, list: &EquivalentList) {
    let warnings = list.applied.warnings(&list.entries, &list.path);
    if warnings.len() <= 3 || args.check_equivalents || args.recheck_equivalents {
        warnings.iter().for_each(|w| eprintln!("warning: {w}"));
    } else {
        eprintln!(
            "warning: {}: {} of {} entries do not apply to this file (`--check-equivalents` names them): those mutants run",
            list.path,
            warnings.len(),
            list.entries.len()
        );
    }
}

/// The equivalent list (`--equivalent` or the tracked one) and what of it applies to the
/// file's text and mutants.
pub fn read(args: &MutantsArgs, target: &Target) -> Result<EquivalentList> {
    let path =
        args.equivalent.clone().unwrap_or_else(|| crate::support::checkout::project_root().join(EQUIVALENT_LIST));
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if args.equivalent.is_some() => {
            return Err(error(Kind::BadInput, format!("--equivalent {}: {e}", path.display())))
        }
        Err(_) => String::new(),
    };
    let shown = if args.equivalent.is_some() { path.display().to_string() } else { EQUIVALENT_LIST.to_string() };
    let entries = equivalent::parse(&text).map_err(|e| error(Kind::BadInput, format!("{}: {e:#}", path.display())))?;
    // The whole file's mutants, whatever was selected: an entry is stale only when the file has no such mutant.
    let all = find::mutants(&target.name, &target.text)?;
    let ids: BTreeSet<&str> = all.iter().map(|m| m.id.as_str()).collect();
    let digest = crate::support::files::sha256_hex(&target.text);
    let applied = equivalent::apply(&entries, &digest, &ids);
    Ok(EquivalentList { path: shown, entries, applied, digest })
}

/// `--check-equivalents`: 0 when every entry applies to the file, 1 when one is stale.
pub fn check_equivalents(list: &EquivalentList) -> u8 {
    let prefix = &list.digest[..equivalent::DIGEST_LEN];
    if list.applied.is_stale() {
        eprintln!(
            "{}: {} of {} entries do not apply to this file (digest {prefix})",
            list.path,
            list.applied.no_mutant.len() + list.applied.other_file.len(),
            list.entries.len()
        );
        1
    } else {
        let here = list.entries.len() - list.applied.elsewhere.len();
        let others = match list.applied.elsewhere.len() {
            0 => String::new(),
            n => format!("; {n} more were argued for other texts and name no mutant of this one"),
        };
        eprintln!("{}: all {here} entries argued for this text apply (digest {prefix}){others}", list.path);
        0
    }
}

/// After `--recheck-equivalents` ran the listed mutants: 1 when one was detected (Killed,
/// Timeout), ran on a kernel that does not meet its conditions, or the list is stale; each said.
pub fn recheck_verdict(list: &EquivalentList, mutants: &[Mutant], out: &Path, cache: &Path) -> Result<u8> {
    let state = plan::load_state(&plan::state_file(out))?;
    let mut wrong = vec![];
    let mut confirmed = 0;
    for m in mutants {
        let Some(entry) = list.entries.iter().find(|e| e.id == m.id) else { continue };
        let at = format!("{}:{}: {}", list.path, entry.line, m.id);
        match state.get(&m.id).map(|r| &r.outcome) {
            Some(o @ (report::Outcome::Killed { .. } | report::Outcome::Timeout { .. })) => {
                let why = match o {
                    report::Outcome::Killed { by, evidence } => format!("killed by {}: {evidence}", by.join(", ")),
                    report::Outcome::Timeout { reason } => format!("timed out: {reason}"),
                    _ => unreachable!(),
                };
                wrong.push(format!("{at} is listed as equivalent but was {why}"));
                continue;
            }
            Some(report::Outcome::CompileError { reason }) => {
                wrong.push(format!("{at} does not build: {reason}"));
                continue;
            }
            _ => {}
        }
        let mut met = true;
        for (release, config) in run_kernels(&out.join("runs").join(&m.id), cache) {
            if let Some(why) = equivalent::unmet(entry, &release, &config) {
                wrong.push(format!(
                    "{at}: its argument rests on {}, and the kernel it ran on {why}",
                    entry.conditions.join(", ")
                ));
                met = false;
            }
        }
        confirmed += usize::from(met);
    }
    for w in list.applied.warnings(&list.entries, &list.path) {
        wrong.push(w);
    }
    for w in &wrong {
        eprintln!("recheck: {w}");
    }
    eprintln!(
        "recheck: {confirmed} of {} listed equivalents confirmed (survived or not covered, their conditions met), {} finding(s)",
        list.entries.len(),
        wrong.len()
    );
    Ok(u8::from(!wrong.is_empty()))
}

/// The release and `.config` of each kernel a mutant's newest run booted.
fn run_kernels(results: &Path, cache: &Path) -> Vec<(String, BTreeMap<String, String>)> {
    super::runner::booted_kernels(results, cache)
        .into_iter()
        .filter_map(|(meta, entry)| {
            let release = meta["kernelrelease"].as_str()?.to_string();
            let text = std::fs::read_to_string(entry.join("config")).ok()?;
            Some((release, crate::kernel::kconfig::parse_config(&text)))
        })
        .collect()
}
