//! `validate`'s runs of a side: the patched side's first run in lanes, one per arch, each
//! booting as soon as its kernel is built; and a side's runs until `--repeat`, the baseline's
//! remembered.

use std::path::{Path, PathBuf};

use anyhow::Result;

use super::memo::{remember, Runs};
use crate::cli::{KernelArgs, ValidateArgs};
use crate::results::model::Run;
use crate::run::boot::{Options, Watch};
use crate::run::pipeline::{Chosen, Pipeline};
use crate::support::exit::{error, Kind};
use crate::support::progress::line;

/// The order the patched side's lanes start in (their builds then run at once; a rebuild that
/// needs the whole machine still gives the first lane a head start): the arch whose boots took
/// longest on the baseline first, so its boots start while the others still build. With
/// `--affected` the boots are short and the builds take most of the time, so the arch that
/// reached /init soonest on the baseline goes first. Without a baseline time, the table's
/// order.
pub fn lane_order(base: &[(PathBuf, Run)], affected: bool) -> Vec<&'static str> {
    let mut took: std::collections::BTreeMap<&str, u64> = Default::default();
    for (_, run) in base {
        for a in &run.arches {
            let ms: u64 =
                a.boots.iter().map(|b| if affected { b.boot_ms.unwrap_or(b.wall_ms) } else { b.wall_ms }).sum();
            if let Some(arch) = crate::arch::ARCHES.iter().find(|x| x.name == a.arch) {
                *took.entry(arch.name).or_default() += ms;
            }
        }
    }
    let mut order: Vec<&'static str> = crate::arch::ARCHES.iter().map(|a| a.name).collect();
    if affected {
        order.sort_by_key(|a| took.get(a).copied().unwrap_or(u64::MAX));
    } else {
        order.sort_by_key(|a| std::cmp::Reverse(took.get(a).copied().unwrap_or(0)));
    }
    order
}

/// The patched side: its first run is a pipeline, every arch's kernel built at once (a patch's
/// rebuild is one object and the links, mostly one process each, so two arches share two cores
/// well) and each arch's boots started as soon as its kernel is built, beside the builds still
/// running (started in `order`); more repeats run as the baseline's do.
pub fn patched_side(
    chosen: Chosen,
    kernel: &KernelArgs,
    args: &ValidateArgs,
    order: &[&'static str],
    watch: &Watch,
) -> Result<(Runs, u8)> {
    let arches = crate::arch::select(&kernel.arch).map_err(|e| error(Kind::BadInput, format!("--arch: {e}")))?;
    let opts = Options { watch: Some(watch.clone()), ..Options::of(&args.vm, kernel.cache_dir.as_deref())? };
    if chosen.select.rerun_count() == Some(0) {
        let side = Pipeline { chosen, built: crate::kernel::build_all(&kernel.request()?)?, opts };
        return run_repeats(&side, args, None, 0);
    }
    let mut arches: Vec<&'static str> = arches.iter().map(|a| a.name).collect();
    arches.sort_by_key(|a| order.iter().position(|o| o == a));
    let run_dir = crate::judging::run_folder::new_run_dir(&args.vm.results_root())?;
    let lanes = std::thread::scope(|s| -> Result<Vec<_>> {
        let mut lanes = Vec::new();
        for arch in arches {
            let (run_dir, opts, chosen) = (&run_dir, &opts, &chosen);
            lanes.push(s.spawn(move || -> Result<_> {
                let lane = KernelArgs { arch: arch.to_string(), ..kernel.clone() };
                let built = crate::kernel::build_all(&lane.request()?)?;
                let boots = crate::run::pipeline::plan_boots(chosen, &built, opts.vms)?;
                let judged = crate::run::boot::run_plans_in(boots.plans, &[], opts, run_dir)?;
                crate::run::pipeline::save_skipped(run_dir, &built, &boots.skipped)?;
                Ok((judged, built))
            }));
        }
        lanes.into_iter().map(|h| h.join().unwrap_or_else(|_| Err(anyhow::anyhow!("a lane panicked")))).collect()
    })?;
    let (mut judged, mut built) = (Vec::new(), Vec::new());
    for (j, b) in lanes {
        judged.extend(j);
        built.extend(b);
    }
    if judged.is_empty() {
        return Err(error(Kind::BadInput, "the selection leaves the patched kernels nothing to boot"));
    }
    crate::run::boot::finish_run(&judged, &run_dir);
    let model = crate::run::pipeline::publish(&judged, &built)?.ok_or_else(no_run_folder)?;
    let mut code = crate::run::boot::exit_code(&judged);
    let mut runs = vec![(run_dir, model)];
    if args.repeat > 1 {
        std::thread::sleep(std::time::Duration::from_millis(1100));
        let (rest, c) = run_repeats(&Pipeline { chosen, built, opts }, args, None, 1)?;
        runs.extend(rest);
        code = code.max(c);
    }
    Ok((runs, code))
}

fn no_run_folder() -> anyhow::Error {
    error(Kind::Infra, "no boot ran, so there is no run folder")
}

/// Runs a side's pipeline until there are `--repeat` runs (counting `done` made before), each
/// with its reports; returns each run folder with its model, and the worst exit code. A
/// complete run of the baseline is remembered under `index`.
pub fn run_repeats(side: &Pipeline, args: &ValidateArgs, index: Option<&Path>, done: usize) -> Result<(Runs, u8)> {
    let mut runs = Vec::new();
    let mut code = 0;
    let wanted = args.repeat.max(1);
    for n in done + 1..=wanted {
        if wanted > 1 {
            line(format!("validate: repeat {n} of {wanted}"));
        }
        let ran = side.run()?;
        let (Some(dir), Some(run)) = (ran.dir, ran.model) else { return Err(no_run_folder()) };
        code = code.max(ran.code);
        // Only a complete run is worth reusing: no infrastructure failure, no interrupt.
        if let (Some(index), true) = (index, ran.code <= Kind::TestFailed.code()) {
            remember(index, &dir)?;
        }
        runs.push((dir, run));
        // Run folders are named by the second: the next run must not land in this one.
        std::thread::sleep(std::time::Duration::from_millis(1100));
    }
    Ok((runs, code))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lanes_longest_boots_first_or_with_affected_the_quickest_to_init() {
        let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("test_data/results/golden/run.json");
        let mut run = crate::results::compare::read_run_json(&fixture).unwrap();
        run.arches.truncate(2);
        let (a, b) = (run.arches[0].arch.clone(), run.arches[1].arch.clone());
        for (i, (wall, init)) in [(9_000, 3_000), (5_000, 1_000)].into_iter().enumerate() {
            run.arches[i].boots.truncate(1);
            run.arches[i].boots[0].wall_ms = wall;
            run.arches[i].boots[0].boot_ms = Some(init);
        }
        let base = [(PathBuf::from("b"), run)];
        assert_eq!(lane_order(&base, false)[..2], [a.as_str(), b.as_str()], "the longest boots first");
        assert_eq!(lane_order(&base, true)[..2], [b.as_str(), a.as_str()], "the quickest to /init first");
    }
}
