//! `validate`'s coverage-first selection: the change read through a coverage map of the baseline
//! (`coverage::map`, `coverage::affected`), its scenarios put first in each arch's plan, or run
//! alone with `--affected`; a regression named as soon as its scenario ends (`watch`); and the
//! baseline's runs narrowed to what the patched side ran, so the comparison shows only those.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::{Context, Result};

use crate::cli::{KernelArgs, ValidateArgs};
use crate::coverage::{affected, map};
use crate::kernel::build::Built;
use crate::results::model::{Run, Status};
use crate::run::boot::Watch;
use crate::run::pipeline::Chosen;
use crate::support::exit::{error, Kind};
use crate::support::progress::line;

/// Per arch, the scenarios that run first (or alone).
pub type First = BTreeMap<String, BTreeSet<String>>;

/// Reads the change (`head`'s patches beyond `base`'s) through the baseline's coverage map and
/// puts the scenarios it affects first in `chosen` (`order`), or alone with `--affected`. Without
/// a map, or when the map cannot judge the change, the plan keeps its order and one line says
/// why; `--affected` then ends with the reason (exit 128).
pub fn put_first(
    chosen: &mut Chosen,
    built: &[Built],
    (base, head): (&KernelArgs, &KernelArgs),
    (args, base_runs): (&ValidateArgs, &[(PathBuf, Run)]),
) -> Result<Option<First>> {
    match judge(chosen, built, base, head, args)? {
        Ok(first) => {
            order(chosen, &first, base_runs, args.affected);
            Ok(Some(first))
        }
        Err(why) if args.affected => Err(error(
            Kind::BadInput,
            format!("validate --affected: {why}; without --affected, validate runs the whole plan"),
        )),
        Err(why) => {
            line(format!("validate: plain order: {why}"));
            Ok(None)
        }
    }
}

/// Per arch, the scenarios the change affects and those the map has no counts for; or why the
/// map cannot tell.
fn judge(
    chosen: &Chosen,
    built: &[Built],
    base: &KernelArgs,
    head: &KernelArgs,
    args: &ValidateArgs,
) -> Result<std::result::Result<First, String>> {
    let maps = map::find(&args.vm.results_root(), args.coverage_map.as_deref(), built)?;
    let base_patches = &base.source.patches;
    let change: Vec<PathBuf> = head.source.patches.iter().filter(|p| !base_patches.contains(p)).cloned().collect();
    let mut files: Vec<String> = Vec::new();
    for p in &change {
        let text = std::fs::read_to_string(p).map_err(|e| error(Kind::BadInput, format!("{}: {e}", p.display())))?;
        for f in crate::coverage::diff::patch_files(&text) {
            if !files.contains(&f) {
                files.push(f);
            }
        }
    }
    let mut texts = None;
    let mut first = First::new();
    for b in built {
        let arch = b.arch.name;
        let m = match &maps[arch] {
            Ok(m) => m,
            Err(why) => return Ok(Err(format!("no coverage map of the baseline for {arch}: {why}"))),
        };
        if let Err(why) = affected::judge_files(&files, &m.files) {
            return Ok(Err(why));
        }
        if texts.is_none() {
            let src = b.source.as_ref().context("a kernel built from source")?;
            let pristine = crate::kernel::source::pristine_root(&src.spec, &src.identity, &src.cache_dir)?;
            texts = Some(map::change_texts(&pristine, base_patches, &head.source.patches, &files)?);
        }
        let found = match affected::affected(&m.data, texts.as_deref().unwrap_or_default()) {
            Ok(found) => found,
            Err(why) => return Ok(Err(why)),
        };
        let compiled = crate::run::pipeline::compile_for(chosen, b)?;
        let planned: Vec<&String> = compiled.plan.scenarios.iter().chain(&compiled.isolated).map(|s| &s.name).collect();
        let unknown: Vec<&str> =
            planned.iter().filter(|n| !m.data.contains_key(n.as_str())).map(|n| n.as_str()).collect();
        // A change to no line of code (comments, blank lines) affects nothing, whatever the map.
        let code = !found.lines.is_empty();
        let chosen_here: BTreeSet<String> = planned
            .iter()
            .filter(|n| found.scenarios.contains(n.as_str()) || (code && unknown.contains(&n.as_str())))
            .map(|n| n.to_string())
            .collect();
        let lines: Vec<String> = found
            .lines
            .iter()
            .map(|(f, ls)| format!("{f}:{}", ls.iter().map(u32::to_string).collect::<Vec<_>>().join(",")))
            .collect();
        line(format!(
            "validate: {arch}: coverage map {}: {} of {} planned scenario(s) ran the baseline lines the change touches ({})",
            m.run.display(),
            found.scenarios.iter().filter(|s| chosen_here.contains(*s)).count(),
            planned.len(),
            if lines.is_empty() { "none".to_string() } else { lines.join("; ") },
        ));
        if code && !unknown.is_empty() {
            line(format!(
                "validate: {arch}: {} scenario(s) the map has no counts for run as well: {}",
                unknown.len(),
                unknown.join(", ")
            ));
        }
        first.insert(arch.to_string(), chosen_here);
    }
    Ok(Ok(first))
}

/// Puts each arch's `first` scenarios first in `chosen`, the shortest on the baseline first (so
/// the earliest failures come soonest; those the baseline has no time for after them), or alone
/// with `only`.
pub fn order(chosen: &mut Chosen, first: &First, base: &[(PathBuf, Run)], only: bool) {
    let mut took: BTreeMap<(&str, &str), u64> = BTreeMap::new();
    for a in base.iter().flat_map(|(_, run)| &run.arches) {
        for s in &a.scenarios {
            let ms = s.duration_ms.unwrap_or(u64::MAX);
            let e = took.entry((a.arch.as_str(), s.name.as_str())).or_insert(ms);
            *e = (*e).max(ms);
        }
    }
    let ranked = first
        .iter()
        .map(|(arch, names)| {
            let mut names: Vec<String> = names.iter().cloned().collect();
            names.sort_by_key(|n| took.get(&(arch.as_str(), n.as_str())).copied().unwrap_or(u64::MAX));
            (arch.clone(), names)
        })
        .collect();
    chosen.select.put_first(ranked, only);
}

/// Names a regression as soon as its scenario's result arrives (it passed on every baseline
/// run and fails now), and says when each arch's first scenarios have all ended.
pub fn watch(base: &[(PathBuf, Run)], first: Option<&First>, started: Instant) -> Watch {
    let tracker = Mutex::new(Tracker::new(base, first));
    Watch(Arc::new(move |boot: &str, l: &protocol::ResultLine| {
        let mut t = tracker.lock().unwrap_or_else(|e| e.into_inner());
        for news in t.see(boot, l, started.elapsed().as_secs_f64()) {
            line(news);
        }
    }))
}

/// What the patched side's results so far say against the baseline.
struct Tracker {
    /// (arch, scenario): whether it passed on every baseline run.
    passed: BTreeMap<(String, String), bool>,
    named: usize,
    /// Per arch, the first scenarios still to end, and how many of those that ended failed.
    remaining: First,
    failed: BTreeMap<String, usize>,
}

impl Tracker {
    fn new(base: &[(PathBuf, Run)], first: Option<&First>) -> Tracker {
        let mut passed: BTreeMap<(String, String), bool> = BTreeMap::new();
        for a in base.iter().flat_map(|(_, run)| &run.arches) {
            for s in &a.scenarios {
                *passed.entry((a.arch.clone(), s.name.clone())).or_insert(true) &= s.status == Status::Pass;
            }
        }
        Tracker { passed, named: 0, remaining: first.cloned().unwrap_or_default(), failed: BTreeMap::new() }
    }

    /// The lines to print for a result line of boot `boot` (`x86_64`, `x86_64.isolated-1`)
    /// that arrived `at` seconds after the start.
    fn see(&mut self, boot: &str, l: &protocol::ResultLine, at: f64) -> Vec<String> {
        let protocol::ResultLine::Result { name, outcome, .. } = l else { return vec![] };
        let arch = boot.split('.').next().unwrap_or(boot).to_string();
        let failed = matches!(outcome, protocol::Outcome::Fail | protocol::Outcome::Timeout);
        let mut out = Vec::new();
        if failed && self.passed.get(&(arch.clone(), name.clone())) == Some(&true) {
            let which = if self.named == 0 { "first regression" } else { "regression" };
            self.named += 1;
            out.push(format!("validate: {which}: {arch}/{name} passed on the baseline and fails now ({at:.1} s)"));
        }
        let Some(left) = self.remaining.get_mut(&arch) else { return out };
        if left.remove(name) {
            let n = self.failed.entry(arch.clone()).or_default();
            *n += usize::from(failed);
            if left.is_empty() {
                out.push(format!(
                    "validate: {arch}: the scenarios that ran the changed lines have ended, {n} failed ({at:.1} s)"
                ));
            }
        }
        out
    }
}

/// The baseline's runs cut to what the patched side ran (its arches, scenarios and boots), so
/// `--affected` compares only those.
pub fn narrow(base: &mut [(PathBuf, Run)], current: &[(PathBuf, Run)]) {
    let ran: BTreeSet<(&str, &str)> = current
        .iter()
        .flat_map(|(_, r)| r.arches.iter())
        .flat_map(|a| {
            let names = a.scenarios.iter().map(|s| s.name.as_str()).chain(a.boots.iter().map(|b| b.name.as_str()));
            names.map(|n| (a.arch.as_str(), n))
        })
        .collect();
    let arches: BTreeSet<&str> = ran.iter().map(|(a, _)| *a).collect();
    for (_, run) in base.iter_mut() {
        run.arches.retain(|a| arches.contains(a.arch.as_str()));
        for a in &mut run.arches {
            a.scenarios.retain(|s| ran.contains(&(a.arch.as_str(), s.name.as_str())));
            a.boots.retain(|b| ran.contains(&(a.arch.as_str(), b.name.as_str())));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn golden() -> Run {
        let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("test_data/results/golden/run.json");
        crate::results::compare::read_run_json(&fixture).unwrap()
    }

    fn result(name: &str, outcome: protocol::Outcome) -> protocol::ResultLine {
        protocol::ResultLine::Result {
            index: 1,
            name: name.into(),
            outcome,
            time_ms: 1,
            taint: 0,
            reason: String::new(),
        }
    }

    #[test]
    fn a_regression_is_named_as_its_result_arrives() {
        let run = golden();
        let a = &run.arches[0];
        let pass = a.scenarios.iter().find(|s| s.status == Status::Pass).unwrap().name.clone();
        let fail = a.scenarios.iter().find(|s| s.status.is_failure()).unwrap().name.clone();
        let first: First = [(a.arch.clone(), [pass.clone(), fail.clone()].into())].into();
        let mut t = Tracker::new(&[(PathBuf::from("base"), run.clone())], Some(&first));
        let isolated = format!("{}.isolated-1", a.arch);
        assert!(t.see(&a.arch, &result(&fail, protocol::Outcome::Fail), 1.0).is_empty(), "failed on the baseline too");
        let news = t.see(&isolated, &result(&pass, protocol::Outcome::Timeout), 2.5);
        assert_eq!(
            news,
            [
                format!("validate: first regression: {}/{pass} passed on the baseline and fails now (2.5 s)", a.arch),
                format!("validate: {}: the scenarios that ran the changed lines have ended, 2 failed (2.5 s)", a.arch),
            ]
        );
        let news = t.see(&a.arch, &result(&pass, protocol::Outcome::Fail), 3.0);
        assert_eq!(news.len(), 1, "{news:?}");
        assert!(news[0].starts_with("validate: regression: "), "{news:?}");
        assert!(t.see("arm64", &result("x/y", protocol::Outcome::Fail), 4.0).is_empty(), "not on the baseline");
    }

    #[test]
    fn the_baseline_is_narrowed_to_what_the_patched_side_ran() {
        let base = golden();
        let mut current = golden();
        current.arches.truncate(1);
        let a = &mut current.arches[0];
        a.scenarios.truncate(2);
        a.boots.truncate(1);
        let mut bases = vec![(PathBuf::from("b"), base)];
        narrow(&mut bases, &[(PathBuf::from("c"), current.clone())]);
        let names =
            |r: &Run| r.arches.iter().map(|a| (a.arch.clone(), a.scenarios.len(), a.boots.len())).collect::<Vec<_>>();
        assert_eq!(names(&bases[0].1), names(&current));
    }
}
