//! `validate`: the kernel developer's flow. Builds and runs the suites on the baseline (the
//! source without the patches) and on the patched source, on every arch asked for, then prints
//! the `compare` report between the two run folders and exits as `compare` does (3 when either
//! side's boots failed for infrastructure reasons). `--repeat N` runs each side N times, so
//! `compare` can tell a flaky scenario from a regression. The build cache makes the baseline a hit
//! when it was built before, and the patched build an incremental rebuild of it.
//!
//! - `sides`: the change the flags name, and each side's kernel flags;
//! - `memo`: the baseline's runs remembered by what determines them, and read back;
//! - `affected`: the change read through a coverage map of the baseline, its scenarios first;
//! - `lanes`: the patched side's lanes, and a side's runs until `--repeat`.

mod affected;
mod lanes;
mod memo;
mod sides;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::Result;

use crate::cli::{KernelArgs, ValidateArgs};
use crate::results::model::Run;
use crate::run::boot::Options;
use crate::run::pipeline::{blind_spots_code, Pipeline};
use crate::setup::provision::{ensure, Needs};
use crate::support::exit::{error, Kind};
use crate::support::progress::line;

/// `cargo xtask validate`: the baseline and the patched side run (the baseline read back when
/// it ran before), then compared.
pub fn validate(args: &ValidateArgs) -> Result<u8> {
    let started = Instant::now();
    sides::needs_a_change(args)?;
    let chosen = crate::run::pipeline::choose(&args.select, &args.vm.results_root())?;
    if chosen.suites.is_empty() {
        return Err(error(Kind::BadInput, "validate has no suite to run: suites/ has no *.yaml and no --suite given"));
    }
    if args.select.list {
        return Err(error(Kind::BadInput, "validate --list: use `run --list` with the same flags to see the plan"));
    }
    let needs = Needs::boot(&args.kernel, &args.vm, false, &chosen.clients());
    ensure(&Needs { git: needs.git || args.base.is_some(), ..needs })?;
    let (base_args, head_args, base_label, head_label) = sides::sides(args)?;
    line(format!("validate: the baseline: {base_label}"));
    let built = crate::kernel::build_all(&base_args.request()?)?;
    let opts = Options::of(&args.vm, base_args.cache_dir.as_deref())?;
    let mut side = Pipeline { chosen, built, opts };
    // The whole plan's baseline (remembered in plain order) serves any order and any part of it.
    let mut index = memo::index(&side, &base_args, args)?;
    let (mut base, mut base_code) = memo::remembered_runs(&index, args)?;
    let first = affected::put_first(&mut side.chosen, &side.built, (&base_args, &head_args), (args, &base))?;
    if let (Some(first), true) = (&first, args.affected) {
        if first.values().all(BTreeSet::is_empty) {
            line("validate --affected: the change touches no line of code (only comments or blank lines): nothing to run");
            return Ok(0);
        }
        if base.len() < args.repeat.max(1) {
            index = memo::index(&side, &base_args, args)?;
            (base, base_code) = memo::remembered_runs(&index, args)?;
        }
    }
    if let Some(first) = &first {
        // The baseline's times as they are now known (the key above is made in the order before).
        affected::order(&mut side.chosen, first, &base, args.affected);
    }
    let (current, cur_code) = if base.len() >= args.repeat.max(1) {
        line(format!("validate: the change: {head_label}"));
        let watch = affected::watch(&base, first.as_ref(), started);
        lanes::patched_side(side.chosen, &head_args, args, &lanes::lane_order(&base, args.affected), &watch)?
    } else {
        // The baseline has to run: it boots while the patched kernels build beside it (measured
        // on 2 cores: 62-66 s against 75-91 s one after the other, BENCHMARKS.md).
        line(format!("validate: the change: {head_label}, built while the baseline runs"));
        let (runs, code, head_built) = baseline_while_building(&side, &head_args, args, &index, base.len())?;
        base.extend(runs);
        base_code = base_code.max(code);
        let mut chosen = side.chosen;
        if let Some(first) = &first {
            // Now that the baseline has times, its shortest scenarios go first.
            affected::order(&mut chosen, first, &base, args.affected);
        }
        let watch = affected::watch(&base, first.as_ref(), started);
        let opts = Options { watch: Some(watch), ..Options::of(&args.vm, head_args.cache_dir.as_deref())? };
        lanes::run_repeats(&Pipeline { chosen, built: head_built, opts }, args, None, 0)?
    };
    compare_sides(args, &mut base, &current, base_code, cur_code)
}

/// The baseline's missing runs (after `done`), remembered under `index`, while the patched
/// kernels (`head`) build beside them; the runs, their worst exit code and the patched kernels.
fn baseline_while_building(
    base: &Pipeline,
    head: &KernelArgs,
    args: &ValidateArgs,
    index: &std::path::Path,
    done: usize,
) -> Result<(memo::Runs, u8, Vec<crate::kernel::build::Built>)> {
    let (ran, head_built) = std::thread::scope(|s| {
        let baseline = s.spawn(|| lanes::run_repeats(base, args, Some(index), done));
        crate::support::timings::hold();
        let started = Instant::now();
        let head_built = head.request().and_then(|r| crate::kernel::build_all(&r));
        let ran = baseline.join().unwrap_or_else(|_| Err(anyhow::anyhow!("the baseline's thread panicked")));
        crate::support::timings::release(started);
        (ran, head_built)
    });
    let (runs, code) = ran?;
    Ok((runs, code, head_built?))
}

/// The two sides compared (the baseline narrowed to what the change affects with
/// `--affected`): the patch's blind spots said, the `compare` report written, and its exit
/// code, or the infrastructure's when a boot of either side failed for that.
fn compare_sides(
    args: &ValidateArgs,
    base: &mut [(PathBuf, Run)],
    current: &[(PathBuf, Run)],
    base_code: u8,
    cur_code: u8,
) -> Result<u8> {
    if args.affected {
        affected::narrow(base, current);
    }
    if let Some(dir) = base.iter().find(|(d, _)| current.iter().any(|(c, _)| c == d)) {
        return Err(error(Kind::Infra, format!("both sides wrote into {}", dir.0.display())));
    }
    let folders = |s: &[(PathBuf, Run)]| s.iter().map(|(d, _)| d.display().to_string()).collect::<Vec<_>>().join(", ");
    line(format!("validate: comparing {} (base) with {} (patched)", folders(base), folders(current)));
    let last = current.last().map(|(d, _)| d.clone()).expect("at least one repeat");
    // The patch's blind spots first: its lines no scenario executed (a coverage run).
    let patched = current.last().map(|(_, r)| r);
    for l in patched
        .and_then(|r| r.coverage.as_ref())
        .and_then(|c| c.patch.as_ref())
        .map(|p| p.describe())
        .unwrap_or_default()
    {
        line(format!("validate: {l}"));
    }
    let out = args.report.out.clone().unwrap_or(last);
    let mut code =
        crate::results::compare::report(base, current, &out, args.report.fail_on_metrics, args.report.verbose)?;
    code = blind_spots_code(code, args.kernel.config.fail_on_blind_spots, patched, "validate: ");
    let infra = Kind::Infra.code();
    if base_code == infra || cur_code == infra {
        line("validate: a boot failed for infrastructure reasons, so the comparison is incomplete");
        return Ok(infra);
    }
    Ok(code)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn args(argv: &[&str]) -> ValidateArgs {
        let mut all = vec!["x", "validate"];
        all.extend_from_slice(argv);
        match crate::cli::Xtask::try_parse_from(all).unwrap().command {
            crate::cli::Cmd::Validate(v) => v,
            _ => unreachable!(),
        }
    }

    #[test]
    fn bad_input_ends_before_any_build() {
        let e = validate(&args(&["--arch", "x86_64"])).unwrap_err();
        assert_eq!(crate::support::exit::code_for(&e), 128);
        assert!(e.to_string().contains("--patch"), "{e}");
        let bad = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("test_data/suites/bad/bad-hex.yaml");
        let e = validate(&args(&["--patch", "p.patch", "--suite", bad.to_str().unwrap()])).unwrap_err();
        assert_eq!(crate::support::exit::code_for(&e), 128, "{e:#}");
    }
}
