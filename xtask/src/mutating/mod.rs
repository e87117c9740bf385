//! A mutation campaign, what `cargo xtask mutants` does with the mutants of `mutants/`: the file
//! mutated (`target`), the equivalent list read against it (`equivalents`), the stages planned
//! from coverage maps and run (`stages`), each mutant a child `run` of this binary on the
//! schemata kernel or its own (`runner`, its command line and child process in `child`), or several in one boot (`batches`), each one's
//! covering scenarios in the order that killed most so far (`kills`), trivial compiler
//! equivalence on a built kernel (`tce`), the selection shown and the reports written
//! (`output`), shard folders merged (`merge`). Above `run/` and `setup/`: it builds kernels
//! through them (TCE's build folder, the suites' `xfail` marks), where `mutants/` stays the
//! model, mostly sans-IO, that the reports and plans are made of.

pub mod batches;
pub mod child;
pub mod equivalents;
pub mod kills;
pub mod merge;
pub mod output;
pub mod runner;
pub mod stages;
pub mod target;
pub mod tce;

use std::path::{Path, PathBuf};

use anyhow::Result;

use self::equivalents::EquivalentList;
use self::target::Target;
use crate::cli::MutantsArgs;
use crate::mutants::find;
use crate::mutants::mutant::Mutant;
use crate::mutants::plan::{self, Step};
use crate::mutants::select::{self, Shard};
use crate::support::exit::{error, Kind};

/// `cargo xtask mutants`: the file's mutants found, selected and listed; with `--tce`, `--run`,
/// `--recheck-equivalents` and `--report` what each asks. The exit code.
pub fn run(args: &MutantsArgs) -> Result<u8> {
    let shard = match &args.shard {
        Some(s) => Some(s.parse::<Shard>().map_err(|e| error(Kind::BadInput, e))?),
        None => None,
    };
    let target = Target::of(args)?;
    let mutants = find::mutants(&target.name, &target.text)?;
    let total = mutants.len();
    let list = equivalents::read(args, &target)?;
    equivalents::warn_of_entries(args, &list);
    if args.check_equivalents {
        return Ok(equivalents::check_equivalents(&list));
    }
    let mutants = select(args, mutants, &target, &list, shard)?;
    if let Some(arches) = &args.tce {
        return tce::run(
            arches,
            &target.name,
            &target.text,
            &target.patches,
            &mutants,
            &list.applied.equivalent,
            &out_dir(args),
            args.cache_dir.as_deref(),
        );
    }
    let out = out_dir(args);
    if !args.merges.is_empty() {
        merge::merge(args, &target, &mutants, &out)?;
    }
    let (mut steps, stages) = stages::plan(args, &target, &mutants, &out, &list)?;
    output::show(args, &target, &mutants, &steps, total)?;
    let mut code = 0;
    if args.run {
        merge::record_run(merge::campaign(args, &target, shard)?, &out)?;
        code = stages::run_stages(args, &target, &mutants, &stages, &out, &list)?;
        // What this run decided; the tracked list still wins over a result kept from
        // before the mutant was listed (as in the plan).
        for (id, r) in plan::load_state(&plan::state_file(&out))? {
            if let Some(step) = steps.get_mut(&id).filter(|s| !plan::is_equivalent(s)) {
                *step = Step::Decided(r);
            }
        }
    }
    if args.recheck_equivalents {
        let cache = crate::kernel::cache::root(args.cache_dir.as_deref());
        code = code.max(equivalents::recheck_verdict(&list, &mutants, &out, &cache)?);
    }
    if args.report {
        output::write_report(&target, &mutants, &steps, &out)?;
    }
    if !args.list && !args.json && !args.report && !args.run && args.merges.is_empty() {
        eprintln!("nothing asked: use --list, --json, --report or --run");
    }
    Ok(code)
}

/// The mutants asked for: the listed equivalents with `--recheck-equivalents`, then those
/// on the lines of `--in-diff`, of `--shard` and with an `--id`.
fn select(
    args: &MutantsArgs,
    mut mutants: Vec<Mutant>,
    target: &Target,
    list: &EquivalentList,
    shard: Option<Shard>,
) -> Result<Vec<Mutant>> {
    // Rechecked: every listed mutant, those trivial compiler equivalence proved too (its
    // proof holds for the one kernel configuration it compiled with).
    let tce_proven = tce::proven(&base_out(args), &list.digest);
    if args.recheck_equivalents {
        mutants.retain(|m| list.applied.equivalent.contains_key(&m.id));
        let proven = list.applied.equivalent.keys().filter(|id| tce_proven.contains_key(*id)).count();
        eprintln!(
            "recheck: {proven} of the listed equivalents are also proven by TCE ({}), for its kernel's configuration",
            mutants_tce_file(&base_out(args))
        );
    }
    if let Some(patch) = &args.in_diff {
        let diff = std::fs::read_to_string(patch)
            .map_err(|e| error(Kind::BadInput, format!("--in-diff {}: {e}", patch.display())))?;
        mutants = select::on_lines(mutants, &select::patch_lines(&diff, &target.name));
    }
    if let Some(shard) = shard {
        mutants.retain(|m| shard.takes(m));
    }
    if !args.ids.is_empty() {
        if let Some(unknown) = args.ids.iter().find(|id| !mutants.iter().any(|m| m.id == **id)) {
            return Err(error(Kind::BadInput, format!("--id {unknown}: no such mutant of {}", target.name)));
        }
        mutants.retain(|m| args.ids.contains(&m.id));
    }
    Ok(mutants)
}

/// `--out`, default results/mutants/.
fn base_out(args: &MutantsArgs) -> PathBuf {
    args.out.clone().unwrap_or_else(|| crate::support::checkout::default_results().join("mutants"))
}

/// Where results go: `--out` (default results/mutants/), and its `recheck/` with
/// `--recheck-equivalents` (the listed mutants' own state file, not the run's).
fn out_dir(args: &MutantsArgs) -> PathBuf {
    let out = base_out(args);
    if args.recheck_equivalents {
        out.join("recheck")
    } else {
        out
    }
}

/// Where `--tce` keeps its findings, as said.
fn mutants_tce_file(out: &Path) -> String {
    out.join(tce::TCE_JSON).display().to_string()
}
