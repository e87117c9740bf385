//! A campaign's stages: each `--coverage-map RUN[+PROFILE...][@N]` read into a map (less the
//! scenarios the suites mark `xfail` or `health_only`), its profiles and its cap; each mutant's
//! step planned from them, the tracked equivalents and the state file; `--run`'s stages run in
//! turn, a survivor going on to the next that covers it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::Result;

use super::equivalents::EquivalentList;
use super::target::Target;
use crate::cli::MutantsArgs;
use crate::mutants::find;
use crate::mutants::mutant::Mutant;
use crate::mutants::plan::{self, Stage, Step};
use crate::mutants::report;
use crate::support::exit::{error, Kind};

/// `--run`: each stage's mutants still to run, on the stage's kernels (one schemata kernel
/// per stage and arch unless `--one-by-one`); the exit code of the last stage that ran any.
pub fn run_stages(
    args: &MutantsArgs,
    target: &Target,
    mutants: &[Mutant],
    stages: &[Stage],
    out: &Path,
    list: &EquivalentList,
) -> Result<u8> {
    let mut code = 0;
    let cache = crate::kernel::cache::root(args.cache_dir.as_deref());
    // Every mutant of the file, whatever was selected: one schemata kernel per stage
    // serves every shard and every resumed run.
    let all = find::mutants(&target.name, &target.text)?;
    for (k, stage) in stages.iter().enumerate() {
        // Read again at each stage: the earlier ones appended to the state file. A
        // `Run` is a mutant with no result yet or a survivor of an earlier stage.
        let kept = kept(args, out, list)?;
        let todo: BTreeMap<String, Step> = plan_stage(mutants, stages, k, &kept)
            .into_iter()
            .filter(|(_, step)| matches!(step, Step::Run { .. }))
            .collect();
        if todo.is_empty() {
            continue;
        }
        crate::support::progress::line(format!(
            "mutants: stage {} of {}, {}: {} mutants",
            k + 1,
            stages.len(),
            stage.label,
            todo.len()
        ));
        let arches: BTreeSet<&str> = todo
            .values()
            .filter_map(|s| match s {
                Step::Run { scenarios } => Some(scenarios.keys().map(String::as_str)),
                Step::Decided(_) => None,
            })
            .flatten()
            .collect();
        let kernels = super::child::Kernels {
            base: &target.patches,
            source: &target.source_args,
            profiles: &stage.profiles,
            schemata: None,
            cache: &cache,
        };
        let schemata = if args.one_by_one {
            None
        } else {
            let arches: Vec<&str> = arches.into_iter().collect();
            Some(super::runner::schemata_kernel(&all, &target.name, &target.text, &kernels, &arches, out)?)
        };
        let label = (stages.len() > 1).then_some(stage.label.as_str());
        let batching = match (&schemata, args.batch) {
            (Some(_), n) if n > 1 => Some(super::batches::Batching::of(mutants, stage, n as usize)?),
            _ => None,
        };
        code = super::runner::run_all(
            mutants,
            &target.text,
            super::child::Kernels { schemata: schemata.as_ref(), ..kernels },
            &todo,
            (out, label),
            (args.timeout, args.parallel as usize, batching.as_ref()),
        )?;
    }
    Ok(code)
}

/// Each mutant's step when there is something to plan from (coverage maps, a state file,
/// the equivalent list's entries; empty otherwise), and the stages of `--coverage-map`.
pub fn plan(
    args: &MutantsArgs,
    target: &Target,
    mutants: &[Mutant],
    out: &Path,
    list: &EquivalentList,
) -> Result<(BTreeMap<String, Step>, Vec<Stage>)> {
    let stages =
        args.coverage_map.iter().map(|spec| stage(args, spec, &target.name)).collect::<Result<Vec<Stage>>>()?;
    let kept = kept(args, out, list)?;
    let mut per_stage: Vec<_> = (0..stages.len()).map(|k| plan_stage(mutants, &stages, k, &kept)).collect();
    if stages.is_empty() {
        let (equivalent, done) = &kept;
        if equivalent.is_empty() && done.is_empty() {
            return Ok((BTreeMap::new(), stages));
        }
        per_stage.push(plan::plan(mutants, None, equivalent, done));
    }
    Ok((plan::first_covering(per_stage).into_iter().collect(), stages))
}

/// The equivalents that apply (none when rechecking them) and the state file's results.
pub fn kept(args: &MutantsArgs, out: &Path, list: &EquivalentList) -> Result<Kept> {
    // Not TCE's proofs: each holds for the one configuration it compiled with (a removed
    // rcu_read_unlock() compiles to nothing without lockdep and preemption, yet the debug
    // kernel's lockdep tells it apart).
    let equivalent = if args.recheck_equivalents { BTreeMap::new() } else { list.applied.equivalent.clone() };
    Ok((equivalent, plan::load_state(&plan::state_file(out))?))
}

/// The stage of one `--coverage-map RUN[+PROFILE...][@N]`: the map (without the scenarios
/// the suites mark `xfail`), its profiles and its cap.
fn stage(args: &MutantsArgs, spec: &str, file: &str) -> Result<Stage> {
    let StageSpec { run, profiles, cap } = split_stage(spec)?;
    let mut map = plan::read_coverage_map(&run, file).map_err(|e| error(Kind::BadInput, format!("{e:#}")))?;
    plan::leave_out(&mut map, &xfail_marked()?);
    let profiles = match profiles {
        Some(p) => p,
        None if !args.profiles.is_empty() => args.profiles.clone(),
        None => map_profiles(&run),
    };
    Ok(Stage::new(&run, map, profiles, cap))
}

/// The tracked equivalents and the state file's results, as [`kept`] reads them.
pub type Kept = (BTreeMap<String, String>, BTreeMap<String, report::MutantResult>);

/// Stage `k`'s plan: what the tracked list and the state file decide (but a survivor of an
/// earlier stage, which goes on), and for the rest the scenarios of the stage's map that cover
/// each mutant, cut to the stage's cap.
pub fn plan_stage(mutants: &[Mutant], stages: &[Stage], k: usize, (equivalent, done): &Kept) -> Vec<(String, Step)> {
    let labels: Vec<&str> = stages.iter().map(|s| s.label.as_str()).collect();
    let mut done = done.clone();
    done.retain(|_, r| !plan::goes_on(Some(r), k, &labels));
    let planned = plan::plan(mutants, Some(&stages[k].map), equivalent, &done);
    planned.into_iter().map(|(id, step)| (id, stages[k].capped(step))).collect()
}

/// A `--coverage-map` argument: the run folder, the profiles named (`+debug+kmemleak`;
/// `+default`: none) and the cap on each mutant's scenarios there (`@N`). A folder whose own
/// name has a `+` or an `@` is taken whole when it exists.
#[derive(Debug, PartialEq)]
struct StageSpec {
    run: PathBuf,
    profiles: Option<Vec<String>>,
    cap: Option<usize>,
}

fn split_stage(spec: &str) -> Result<StageSpec> {
    let whole = |run: &str| StageSpec { run: PathBuf::from(run), profiles: None, cap: None };
    if Path::new(spec).exists() {
        return Ok(whole(spec));
    }
    let (rest, cap) = match spec.rsplit_once('@') {
        Some((rest, n)) => {
            let n = n.parse::<usize>().ok().filter(|n| *n > 0).ok_or_else(|| {
                error(Kind::BadInput, format!("--coverage-map {spec}: `@{n}` is not a number of scenarios (1 or more)"))
            })?;
            (rest, Some(n))
        }
        None => (spec, None),
    };
    Ok(match rest.split_once('+') {
        Some((run, named)) => {
            let named = named.split('+').filter(|p| !p.is_empty() && *p != "default").map(str::to_string).collect();
            StageSpec { profiles: Some(named), cap, ..whole(run) }
        }
        None => StageSpec { cap, ..whole(rest) },
    })
}

/// The profiles the kernel of a coverage run was built with: the fragments its
/// `kernel-metadata.json` lists that are profiles, but `coverage` (the map's own instrument).
fn map_profiles(run: &Path) -> Vec<String> {
    let known = crate::kernel::kconfig::profile_names(&crate::support::checkout::project_root().join("kernel-configs"));
    let arches = std::fs::read_dir(run).into_iter().flatten().flatten();
    for arch in arches {
        let Ok(text) = std::fs::read_to_string(arch.path().join("kernel-metadata.json")) else { continue };
        let Ok(meta) = serde_json::from_str::<serde_json::Value>(&text) else { continue };
        let fragments = meta["config"]["fragments"].as_array().cloned().unwrap_or_default();
        return fragments
            .iter()
            .filter_map(|f| f.as_str()?.strip_suffix(".config").map(str::to_string))
            .filter(|p| p != "coverage" && known.contains(p))
            .collect();
    }
    vec![]
}

/// The scenarios (`suite/name`) left out of every map: those the checkout's suites mark
/// `xfail` (one expected to fail cannot kill a mutant, and an intermittent one that passed in
/// the map's run may fail and end the mutant's boot early: the fork storm's leftover event
/// did), and those of a `health_only` suite (the fuzz suite accepts any documented errno, so
/// what it alone detects is no measure of the suites' exact checks).
fn xfail_marked() -> Result<std::collections::BTreeSet<String>> {
    let suites = crate::run::pipeline::load_suites(&crate::run::pipeline::suite_files()?)?;
    Ok(suites
        .iter()
        .flat_map(|s| {
            s.scenarios
                .iter()
                .filter(|d| d.xfail.is_some() || s.health_only)
                .map(move |d| format!("{}/{}", s.suite, d.name))
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stage_names_its_profiles_after_the_map() {
        let spec = |run: &str, profiles: Option<&[&str]>, cap| StageSpec {
            run: PathBuf::from(run),
            profiles: profiles.map(|p| p.iter().map(|s| s.to_string()).collect()),
            cap,
        };
        assert_eq!(split_stage("/no/such/run").unwrap(), spec("/no/such/run", None, None));
        assert_eq!(split_stage("/no/run+debug").unwrap(), spec("/no/run", Some(&["debug"]), None));
        assert_eq!(
            split_stage("/no/run+faults+kmemleak").unwrap(),
            spec("/no/run", Some(&["faults", "kmemleak"]), None)
        );
        assert_eq!(split_stage("/no/run+default").unwrap(), spec("/no/run", Some(&[]), None));
        assert_eq!(split_stage("/no/run+debug@10").unwrap(), spec("/no/run", Some(&["debug"]), Some(10)));
        assert_eq!(split_stage("/no/run@3").unwrap(), spec("/no/run", None, Some(3)));
        assert!(split_stage("/no/run+debug@ten").is_err());
        assert!(split_stage("/no/run@0").is_err());
        let dir = tempfile::tempdir().unwrap();
        let odd = dir.path().join("a+b@2");
        std::fs::create_dir(&odd).unwrap();
        assert_eq!(
            split_stage(odd.to_str().unwrap()).unwrap(),
            spec(odd.to_str().unwrap(), None, None),
            "an existing folder is taken whole"
        );
    }

    #[test]
    fn a_maps_profiles_are_those_its_kernel_was_built_with_but_coverage() {
        let run = tempfile::tempdir().unwrap();
        assert!(map_profiles(run.path()).is_empty(), "no metadata: the default kernel");
        std::fs::create_dir(run.path().join("x86_64")).unwrap();
        let meta = serde_json::json!({"config": {"fragments":
            ["common.config", "x86_64.config", "coverage.config", "faults.config", "kmemleak.config", "mine.config"]}});
        std::fs::write(run.path().join("x86_64/kernel-metadata.json"), meta.to_string()).unwrap();
        assert_eq!(map_profiles(run.path()), ["faults", "kmemleak"], "not a user's fragment either");
    }
}
