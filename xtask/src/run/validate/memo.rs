//! `validate`'s memo of baseline runs: a baseline run is remembered (in the cache, under
//! `results/<key>.json`) by what determines its results, and read back instead of run again.

use std::path::{Path, PathBuf};

use anyhow::Result;

use crate::cli::{KernelArgs, ValidateArgs};
use crate::results::model::Run;
use crate::run::pipeline::Pipeline;
use crate::support::progress::line;

/// A side's runs: each run folder with its model, oldest first.
pub type Runs = Vec<(PathBuf, Run)>;

/// What determines a run's results: each kernel's build key, the plan compiled for it, the
/// guest agent and clients that run it, and the VM options.
fn results_key(
    chosen: &crate::run::pipeline::Chosen,
    built: &[crate::kernel::build::Built],
    vm: &crate::cli::VmArgs,
) -> Result<String> {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    h.update(format!(
        "v1\0{:?}\0{}\0{}\0{}\0{:?}\0{:?}\0{:?}\0",
        vm.accel, vm.cpus, vm.memory, vm.vms, vm.kernel_args, vm.qemu_args, vm.share
    ));
    for b in built {
        h.update(b.metadata.key.as_bytes());
        let compiled = crate::run::pipeline::compile_for(chosen, b)?;
        let mut plans = vec![compiled.plan.clone()];
        plans.extend(
            compiled.isolated.iter().map(|s| protocol::Plan { scenarios: vec![s.clone()], ..compiled.plan.clone() }),
        );
        h.update(serde_json::to_vec(&plans)?);
        h.update(format!("{:?}{:?}", compiled.marks.xfail, compiled.marks.expect_report));
        h.update(std::fs::read(crate::vm::initramfs::build_agent(b.arch)?)?);
        for p in &plans {
            for (path, bytes) in crate::vm::initramfs::clients_for(b.arch, p, false)? {
                h.update(path.as_bytes());
                h.update(&bytes);
            }
        }
    }
    Ok(crate::support::files::hex(&h.finalize()))
}

/// The run folders recorded under a results key that still hold their run.json, oldest first.
fn remembered(index: &Path) -> Vec<PathBuf> {
    let dirs: Vec<PathBuf> =
        std::fs::read(index).ok().and_then(|b| serde_json::from_slice(&b).ok()).unwrap_or_default();
    dirs.into_iter().filter(|d| d.join("run.json").is_file()).collect()
}

pub fn remember(index: &Path, dir: &Path) -> Result<()> {
    let mut dirs = remembered(index);
    dirs.push(dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf()));
    std::fs::create_dir_all(index.parent().expect("an index file has a folder"))?;
    crate::support::files::write_atomic(index, &serde_json::to_vec_pretty(&dirs)?)
}

/// Where the baseline's runs are remembered: by what determines them (`results_key`).
pub fn index(side: &Pipeline, kernel: &KernelArgs, args: &ValidateArgs) -> Result<PathBuf> {
    let cache_dir = crate::kernel::cache::root(kernel.cache_dir.as_deref());
    Ok(cache_dir.join("results").join(format!("{}.json", results_key(&side.chosen, &side.built, &args.vm)?)))
}

/// The baseline's runs already made with the same kernel, plan, agent and VM (up to
/// `--repeat`), read back instead of run again; none with `--fresh-baseline`.
pub fn remembered_runs(index: &Path, args: &ValidateArgs) -> Result<(Runs, u8)> {
    let mut runs = Vec::new();
    let mut code = 0;
    if args.fresh_baseline {
        return Ok((runs, code));
    }
    for dir in remembered(index).into_iter().take(args.repeat.max(1)) {
        let run = crate::results::compare::read_run_json(&dir.join("run.json"))?;
        code = code.max(run.verdict.exit_code());
        line(format!(
            "validate: the baseline was run before with the same kernel, plan, agent and VM: {}",
            dir.display()
        ));
        runs.push((dir, run));
    }
    Ok((runs, code))
}
