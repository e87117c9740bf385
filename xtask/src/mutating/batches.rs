//! `mutants --run --batch N`: up to N mutants of the schemata kernel in one boot, each a group
//! of its covering scenarios run under its number (`mutants::batch`), so a mutant costs its
//! scenarios rather than a boot. The batch's run is split per mutant and classified; an
//! outcome the batch cannot vouch for (a kernel report, a hang, a scenario the boot never
//! reached) is run again in a boot of the mutant's own, as are the mutants a batch cannot
//! hold: on several arches, covered by an `isolated` scenario, or on a line the kernel's boot
//! runs (a boot with the switch at 0 would not run their change there).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::Parser;

use super::child::{child_run, profile_args, run_argv, ChildRun, Kernels};
use crate::cli::Xtask;
use crate::coverage::runs::BOOT;
use crate::mutants::batch::{self, Batch, Group};
use crate::mutants::classify;
use crate::mutants::mutant::Mutant;
use crate::mutants::plan::{Stage, Step};
use crate::mutants::report::MutantResult;
use crate::results::model::{Run, Status};
use crate::support::exit::Kind;
use crate::support::progress::line;

/// How a stage's mutants are batched: at most `size` a boot; the ids in `alone` never; the
/// scenarios in `isolated` (boots of their own) never in a batch's plan.
#[derive(Debug, Clone, Default)]
pub struct Batching {
    pub size: usize,
    pub alone: BTreeSet<String>,
    pub isolated: BTreeSet<String>,
}

impl Batching {
    /// The stage's batching: the mutants on a line its map says the boot runs run alone, and
    /// the scenarios the suites mark `isolated` are left to a mutant's own run (a batch runs
    /// the others; a survivor with isolated scenarios left then runs alone, as its own run
    /// would have reached them only after the others passed).
    pub fn of(mutants: &[Mutant], stage: &Stage, size: usize) -> Result<Batching> {
        let select = crate::cli::SelectArgs::default();
        let chosen = crate::run::pipeline::choose(&select, Path::new("results"))?;
        let isolated: BTreeSet<String> = chosen
            .suites
            .iter()
            .flat_map(|s| s.scenarios.iter().filter(|d| d.isolated).map(move |d| format!("{}/{}", s.suite, d.name)))
            .collect();
        let mut alone = BTreeSet::new();
        for m in mutants {
            for map in stage.map.values() {
                let lines = map.lines_of(m);
                if map.scenarios.get(BOOT).is_some_and(|b| lines.iter().any(|l| b.contains(l))) {
                    alone.insert(m.id.clone());
                }
            }
        }
        Ok(Batching { size, alone, isolated })
    }

    /// Whether mutant `m`, with its step and number in the schemata kernel, can be batched.
    pub fn holds(&self, m: &Mutant, step: &Step, number: Option<u32>) -> bool {
        let shared = |s: &Vec<String>| s.iter().any(|s| !self.isolated.contains(s));
        let one_arch =
            matches!(step, Step::Run { scenarios } if scenarios.len() == 1 && scenarios.values().all(shared));
        self.size > 1 && number.is_some() && one_arch && !self.alone.contains(&m.id)
    }
}

/// What a batch's run decided: each vouched mutant's result (`None`: this stage's kernel skips
/// every scenario that covers it), the mutants to run alone, those whose group the boot never
/// started (it ended at an earlier group's crash or hang), for another batch, and the
/// survivors whose isolated scenarios are left, to run alone with only those.
#[derive(Default)]
pub struct Decided<'a> {
    pub results: Vec<(&'a Mutant, Option<MutantResult>)>,
    pub alone: Vec<&'a Mutant>,
    pub again: Vec<&'a Mutant>,
    pub isolated_left: Vec<(&'a Mutant, BTreeMap<String, Vec<String>>)>,
}

/// One batch's boot: its mutants' groups in one `run --mutant-batch` child of this binary (not
/// recorded in the history: its scenario names are the batch's), the run split per mutant.
pub fn run_batch<'a>(
    ms: &[&'a Mutant],
    (steps, batching): (&BTreeMap<String, Step>, &Batching),
    kernels: &Kernels,
    out: &Path,
    timeout: Option<Duration>,
) -> Result<Decided<'a>> {
    let (patch, numbers) = kernels.schemata.context("a batch runs on the schemata kernel")?;
    let mut groups = Vec::new();
    let mut arch = String::new();
    // The isolated covering scenarios of each mutant, which a survival in the batch leaves untried.
    let mut untried = BTreeMap::new();
    for m in ms {
        let Some(Step::Run { scenarios }) = steps.get(&m.id) else { continue };
        let Some((a, names)) = scenarios.iter().next() else { continue };
        arch.clone_from(a);
        let (isolated, shared): (Vec<String>, Vec<String>) =
            names.iter().cloned().partition(|s| batching.isolated.contains(s));
        if !isolated.is_empty() {
            untried.insert(m.id.clone(), BTreeMap::from([(a.clone(), isolated)]));
        }
        groups.push(Group { id: m.id.clone(), number: numbers[&m.id], scenarios: shared });
    }
    let b = Batch { groups };
    let dir = out.join("batches").join(&ms[0].id);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let file = dir.join("batch.json");
    std::fs::write(&file, serde_json::to_vec_pretty(&b)?).with_context(|| format!("writing {}", file.display()))?;
    let timeout = timeout.map(|t| t * ms.len() as u32);
    let filters = BTreeMap::from([(arch, b.filters())]);
    let mut argv = run_argv(kernels.base, patch, &filters, &dir, timeout);
    argv.extend(["--mutant-batch".to_string(), file.display().to_string()]);
    argv.extend(profile_args(kernels.profiles));
    argv.extend(kernels.source.iter().cloned());
    Xtask::try_parse_from(&argv).context("the batch's run command line")?;
    let started = Instant::now();
    let ChildRun { code, run, .. } = child_run(&argv[1..], &dir, false)?;
    if code == Some(i32::from(Kind::Interrupted.code())) || code.is_none() {
        return Err(crate::support::exit::error(Kind::Interrupted, "the batch's run was interrupted"));
    }
    let run =
        run.and_then(|r| crate::results::compare::read_run_json(&r.join(crate::judging::run_folder::RUN_JSON)).ok());
    let Some(run) = run else {
        line(format!("mutants: the batch of {} left no run (exit {code:?}): each runs alone", ms.len()));
        return Ok(Decided { alone: ms.to_vec(), ..Decided::default() });
    };
    let parts = batch::split(&run, &b);
    let mut decided = Decided::default();
    // The groups after the first that never started go to another batch; with none started,
    // the boot itself is in question, and each runs alone.
    let began = |r: &Run| {
        r.arches.iter().flat_map(|a| &a.scenarios).any(|s| !matches!(s.status, Status::NotRun | Status::Collateral))
    };
    let any_started = parts.values().any(began);
    for m in ms {
        let Some(mine) = parts.get(&m.id) else {
            decided.results.push((m, None));
            continue;
        };
        if any_started && !began(mine) {
            decided.again.push(m);
            continue;
        }
        let outcome = classify::classify(mine);
        let vouched = batch::vouched(mine, &outcome, &run);
        if let (Ok(()), crate::mutants::report::Outcome::Survived, Some(left)) =
            (&vouched, &outcome, untried.get(&m.id))
        {
            line(format!("mutant {}: survived the batch: its isolated scenarios in boots of its own", m.id));
            decided.isolated_left.push((m, left.clone()));
            continue;
        }
        if let Err(why) = vouched {
            line(format!("mutant {}: {why}: once more in a boot of its own", m.id));
            decided.alone.push(m);
            continue;
        }
        let ran: u64 = mine.arches.iter().flat_map(|a| &a.scenarios).filter_map(|s| s.duration_ms).sum();
        // Every covering scenario, as a run of its own records it (isolated ones included).
        let covered_by: BTreeSet<String> = match steps.get(&m.id) {
            Some(Step::Run { scenarios }) => scenarios.values().flatten().cloned().collect(),
            _ => BTreeSet::new(),
        };
        line(format!("mutant {}: {} (in a batch of {})", m.id, outcome.name(), ms.len()));
        let result = MutantResult {
            id: m.id.clone(),
            outcome,
            covered_by: covered_by.into_iter().collect(),
            duration_ms: Some(ran),
            stage: None,
        };
        decided.results.push((m, Some(result)));
    }
    line(format!("mutants: a batch of {} in {:.1} s", ms.len(), started.elapsed().as_secs_f64()));
    Ok(decided)
}
