//! `validate`: the kernel developer's flow. Builds and runs the suites on the baseline (the
//! source without the patches) and on the patched source, on every arch asked for, then prints
//! the `compare` report between the two run folders and exits as `compare` does (3 when either
//! side's boots failed for infrastructure reasons). The build cache makes the baseline a hit
//! when it was built before, and the patched build an incremental rebuild of it.

use std::path::PathBuf;

use anyhow::Result;

use crate::exit::{error, Kind};
use crate::flags::ValidateArgs;
use crate::progress::line;

pub fn run(args: &ValidateArgs) -> Result<u8> {
    let src = &args.kernel.source;
    if src.patches.is_empty() {
        return Err(error(Kind::BadInput, "validate needs at least one --patch (the change to validate)"));
    }
    if src.kernel_image.is_some() {
        return Err(error(Kind::BadInput, "validate builds from source: --kernel-image cannot be patched"));
    }
    let files = if args.suites.is_empty() { crate::suite_files()? } else { args.suites.clone() };
    if files.is_empty() {
        return Err(error(Kind::BadInput, "validate has no suite to run: suites/ has no *.yaml and no --suite given"));
    }
    let suites = crate::load_suites(&files)?;
    crate::setup::run(false)?;
    let mut base_args = args.kernel.clone();
    base_args.source.patches.clear();
    line("validate: the baseline (no patches)");
    let (base_dir, base_code) = side(&suites, &base_args, args)?;
    let names: Vec<String> = src.patches.iter().map(|p| p.display().to_string()).collect();
    line(format!("validate: patched with {}", names.join(", ")));
    let (cur_dir, cur_code) = side(&suites, &args.kernel, args)?;
    if base_dir == cur_dir {
        return Err(error(Kind::Infra, format!("both sides wrote into {}", base_dir.display())));
    }
    line(format!("validate: comparing {} (base) with {} (patched)", base_dir.display(), cur_dir.display()));
    let code =
        crate::results::compare::run(&base_dir, &cur_dir, args.report.out.as_deref(), args.report.fail_on_metrics)?;
    let infra = Kind::Infra.code();
    if base_code == infra || cur_code == infra {
        line("validate: a boot failed for infrastructure reasons, so the comparison is incomplete");
        return Ok(infra);
    }
    Ok(code)
}

/// Builds (or fetches) the kernels, runs the suites and writes the reports; returns the run
/// folder and the run's own exit code.
fn side(
    suites: &[crate::suites::Suite],
    kernel: &crate::flags::KernelArgs,
    args: &ValidateArgs,
) -> Result<(PathBuf, u8)> {
    let built = crate::kernels(kernel)?;
    let judged = crate::run_suites_judged(suites, &built, &args.vm, kernel.cache_dir.as_deref())?;
    crate::publish_results(&judged, &built)?;
    let dir = judged
        .first()
        .and_then(|j| j.outcome.out_dir.parent())
        .map(PathBuf::from)
        .ok_or_else(|| error(Kind::Infra, "no boot ran, so there is no run folder"))?;
    Ok((dir, crate::boot::exit_code(&judged)))
}
