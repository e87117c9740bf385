//! `validate`: the kernel developer's flow. Builds and runs the suites on the baseline (the
//! source without the patches) and on the patched source, on every arch asked for, then prints
//! the `compare` report between the two run folders and exits as `compare` does (3 when either
//! side's boots failed for infrastructure reasons). `--repeat N` runs each side N times, so
//! `compare` can tell a flaky scenario from a regression. The build cache makes the baseline a hit
//! when it was built before, and the patched build an incremental rebuild of it.

use std::collections::BTreeSet;
use std::path::PathBuf;

use anyhow::Result;

use crate::cli::{KernelArgs, ValidateArgs};
use crate::results::model::Run;
use crate::run::boot::{Options, Watch};
use crate::support::exit::{error, Kind};
use crate::support::progress::line;

impl ValidateArgs {
    pub fn run(self) -> Result<u8> {
        validate(&self)
    }
}

fn validate(args: &ValidateArgs) -> Result<u8> {
    let started = std::time::Instant::now();
    needs_a_change(args)?;
    let mut chosen = crate::run::pipeline::choose(&args.select, &args.vm.results_root())?;
    if chosen.suites.is_empty() {
        return Err(error(Kind::BadInput, "validate has no suite to run: suites/ has no *.yaml and no --suite given"));
    }
    if args.select.list {
        return Err(error(Kind::BadInput, "validate --list: use `run --list` with the same flags to see the plan"));
    }
    let clients = chosen.clients();
    let needs = crate::setup::provision::Needs::boot(&args.kernel, &args.vm, false, &clients);
    crate::setup::provision::ensure(&crate::setup::provision::Needs {
        git: needs.git || args.base.is_some(),
        ..needs
    })?;
    let (base_args, head_args, base_label, head_label) = sides(args)?;
    line(format!("validate: the baseline: {base_label}"));
    let base_built = crate::kernel::build_all(&base_args.request()?)?;
    // The whole plan's baseline (remembered in plain order) serves any order and any part of it.
    let mut index = baseline_index(&chosen, &base_built, &base_args, args)?;
    let (mut base, mut base_code) = remembered_runs(&index, args)?;
    let first = crate::verbs::affected::put_first(&mut chosen, &base_built, (&base_args, &head_args), (args, &base))?;
    if let (Some(first), true) = (&first, args.affected) {
        if first.values().all(BTreeSet::is_empty) {
            line("validate --affected: the change touches no line of code (only comments or blank lines): nothing to run");
            return Ok(0);
        }
        if base.len() < args.repeat.max(1) {
            index = baseline_index(&chosen, &base_built, &base_args, args)?;
            (base, base_code) = remembered_runs(&index, args)?;
        }
    }
    if let Some(first) = &first {
        // The baseline's times as they are now known (the key above is made in the order before).
        crate::verbs::affected::order(&mut chosen, first, &base, args.affected);
    }
    let (current, cur_code) = if base.len() >= args.repeat.max(1) {
        line(format!("validate: the change: {head_label}"));
        let watch = crate::verbs::affected::watch(&base, first.as_ref(), started);
        patched_side(&chosen, &head_args, args, &lane_order(&base, args.affected), &watch)?
    } else {
        // The baseline has to run: it boots while the patched kernels build beside it (measured
        // on 2 cores: 62-66 s against 75-91 s one after the other, BENCHMARKS.md).
        line(format!("validate: the change: {head_label}, built while the baseline runs"));
        let (ran, head_built) = std::thread::scope(|s| {
            let baseline =
                s.spawn(|| run_repeats(&chosen, &base_built, &base_args, args, (Some(&index), None), base.len()));
            crate::support::timings::hold();
            let started = std::time::Instant::now();
            let head_built = head_args.request().and_then(|r| crate::kernel::build_all(&r));
            let ran = baseline.join().unwrap_or_else(|_| Err(anyhow::anyhow!("the baseline's thread panicked")));
            crate::support::timings::release(started);
            (ran, head_built)
        });
        let (runs, code) = ran?;
        base.extend(runs);
        base_code = base_code.max(code);
        let head_built = head_built?;
        if let Some(first) = &first {
            // Now that the baseline has times, its shortest scenarios go first.
            crate::verbs::affected::order(&mut chosen, first, &base, args.affected);
        }
        let watch = crate::verbs::affected::watch(&base, first.as_ref(), started);
        run_repeats(&chosen, &head_built, &head_args, args, (None, Some(&watch)), 0)?
    };
    compare_sides(args, &mut base, &current, base_code, cur_code)
}

/// The flags name a change to validate, on a source that can be patched.
fn needs_a_change(args: &ValidateArgs) -> Result<()> {
    let src = &args.kernel.source;
    if src.patches.is_empty() && args.base.is_none() {
        return Err(error(
            Kind::BadInput,
            "validate needs the change to validate: --patch FILE, or --kernel-src TREE --base REF [--head REF]",
        ));
    }
    if args.head.is_some() && args.base.is_none() {
        return Err(error(Kind::BadInput, "--head REF goes with --base REF"));
    }
    if src.kernel_image.is_some() {
        return Err(error(Kind::BadInput, "validate builds from source: --kernel-image cannot be patched"));
    }
    Ok(())
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
        crate::verbs::affected::narrow(base, current);
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
    if code == 0 && args.kernel.config.fail_on_blind_spots && patched.is_some_and(|r| !r.blind_spots().is_empty()) {
        line("validate: --fail-on-blind-spots: the patch adds lines no scenario executed");
        code = crate::support::exit::BLIND_SPOTS;
    }
    let infra = Kind::Infra.code();
    if base_code == infra || cur_code == infra {
        line("validate: a boot failed for infrastructure reasons, so the comparison is incomplete");
        return Ok(infra);
    }
    Ok(code)
}

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
fn remembered(index: &std::path::Path) -> Vec<PathBuf> {
    let dirs: Vec<PathBuf> =
        std::fs::read(index).ok().and_then(|b| serde_json::from_slice(&b).ok()).unwrap_or_default();
    dirs.into_iter().filter(|d| d.join("run.json").is_file()).collect()
}

fn remember(index: &std::path::Path, dir: &std::path::Path) -> Result<()> {
    let mut dirs = remembered(index);
    dirs.push(dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf()));
    std::fs::create_dir_all(index.parent().expect("an index file has a folder"))?;
    crate::support::files::write_atomic(index, &serde_json::to_vec_pretty(&dirs)?)
}

/// The two sides' kernel flags and what each is. With `--patch` only: the source without and
/// with the patches. With `--base REF`: that commit of the `--kernel-src` git tree, exported
/// into the cache, against the same export plus the change to `--head REF` (or to the working
/// tree, uncommitted and untracked files included) as a patch, so the second side is an
/// incremental build of the first in one private mirror; `--patch` files apply on top of both.
fn sides(args: &ValidateArgs) -> Result<(KernelArgs, KernelArgs, String, String)> {
    let src = &args.kernel.source;
    let patch_names = || src.patches.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ");
    let Some(base_ref) = &args.base else {
        let mut base = args.kernel.clone();
        base.source.patches.clear();
        return Ok((
            base,
            args.kernel.clone(),
            "the source without the patches".into(),
            format!("patched with {}", patch_names()),
        ));
    };
    let dir = src.kernel_src.as_ref().ok_or_else(|| {
        error(
            Kind::BadInput,
            "--base REF needs --kernel-src TREE (or to run inside it), the git checkout REF belongs to",
        )
    })?;
    let cache_dir = crate::kernel::cache::root(args.kernel.cache_dir.as_deref());
    let repo = crate::kernel::git::repo(dir)?;
    let base_commit = crate::kernel::git::commit(&repo, base_ref, "--base")?;
    let head_commit = args.head.as_deref().map(|h| crate::kernel::git::commit(&repo, h, "--head")).transpose()?;
    let change = crate::kernel::git::diff_patch(&repo, &base_commit, head_commit.as_deref(), &cache_dir)?;
    let head_label = match &head_commit {
        Some(h) => crate::kernel::git::describe(&repo, h),
        None if crate::kernel::git::dirty(&repo) => {
            format!("{} with the working tree's uncommitted changes", crate::kernel::git::describe(&repo, "HEAD"))
        }
        None => crate::kernel::git::describe(&repo, "HEAD"),
    };
    if change.is_none() {
        line(format!("validate: no change between {base_ref} and {head_label}: both sides are the same kernel"));
    }
    let with = |extra: Option<&PathBuf>| {
        let mut k = args.kernel.clone();
        k.source.kernel_src = None;
        k.source.git_commit = Some((repo.clone(), base_commit.clone()));
        k.source.patches = extra.into_iter().cloned().chain(src.patches.iter().cloned()).collect();
        k
    };
    let extra = if src.patches.is_empty() { String::new() } else { format!(", plus {}", patch_names()) };
    Ok((
        with(None),
        with(change.as_ref()),
        format!("{}{extra}", crate::kernel::git::describe(&repo, &base_commit)),
        format!("{head_label}{extra}"),
    ))
}

/// The order the patched side's lanes start in (their builds then run at once; a rebuild that
/// needs the whole machine still gives the first lane a head start): the arch whose boots took
/// longest on the baseline first, so its boots start while the others still build. With
/// `--affected` the boots are short and the builds take most of the time, so the arch that
/// reached /init soonest on the baseline goes first. Without a baseline time, the table's
/// order.
fn lane_order(base: &[(PathBuf, Run)], affected: bool) -> Vec<&'static str> {
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
fn patched_side(
    chosen: &crate::run::pipeline::Chosen,
    kernel: &KernelArgs,
    args: &ValidateArgs,
    order: &[&'static str],
    watch: &Watch,
) -> Result<(Vec<(PathBuf, Run)>, u8)> {
    let arches = crate::arch::select(&kernel.arch).map_err(|e| error(Kind::BadInput, format!("--arch: {e}")))?;
    if chosen.select.rerun_count() == Some(0) {
        return run_repeats(
            chosen,
            &crate::kernel::build_all(&kernel.request()?)?,
            kernel,
            args,
            (None, Some(watch)),
            0,
        );
    }
    let mut arches: Vec<&'static str> = arches.iter().map(|a| a.name).collect();
    arches.sort_by_key(|a| order.iter().position(|o| o == a));
    let run_dir = crate::judging::run_folder::new_run_dir(&args.vm.results_root())?;
    let opts = Options { watch: Some(watch.clone()), ..Options::of(&args.vm, kernel.cache_dir.as_deref())? };
    let lanes = std::thread::scope(|s| -> Result<Vec<_>> {
        let mut lanes = Vec::new();
        for arch in arches {
            let (run_dir, opts) = (&run_dir, &opts);
            lanes.push(s.spawn(move || -> Result<_> {
                let built =
                    crate::kernel::build_all(&KernelArgs { arch: arch.to_string(), ..kernel.clone() }.request()?)?;
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
    crate::run::pipeline::publish(&judged, &built)?;
    let mut code = crate::run::boot::exit_code(&judged);
    let mut runs = vec![(run_dir.clone(), crate::results::compare::read_run_json(&run_dir.join("run.json"))?)];
    if args.repeat > 1 {
        std::thread::sleep(std::time::Duration::from_millis(1100));
        let (rest, c) = run_repeats(chosen, &built, kernel, args, (None, Some(watch)), 1)?;
        runs.extend(rest);
        code = code.max(c);
    }
    Ok((runs, code))
}

/// Where the baseline's runs are remembered: by what determines them (`results_key`).
fn baseline_index(
    chosen: &crate::run::pipeline::Chosen,
    built: &[crate::kernel::build::Built],
    kernel: &KernelArgs,
    args: &ValidateArgs,
) -> Result<PathBuf> {
    let cache_dir = crate::kernel::cache::root(kernel.cache_dir.as_deref());
    Ok(cache_dir.join("results").join(format!("{}.json", results_key(chosen, built, &args.vm)?)))
}

/// The baseline's runs already made with the same kernel, plan, agent and VM (up to
/// `--repeat`), read back instead of run again; none with `--fresh-baseline`.
fn remembered_runs(index: &std::path::Path, args: &ValidateArgs) -> Result<(Vec<(PathBuf, Run)>, u8)> {
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

/// Runs the suites on built kernels until there are `--repeat` runs (counting `done` made
/// before) and writes the reports; returns each run folder with its model, and the worst exit
/// code. A complete run of the baseline is remembered under `index`; the patched side's result
/// lines go to `watch`.
fn run_repeats(
    chosen: &crate::run::pipeline::Chosen,
    built: &[crate::kernel::build::Built],
    kernel: &KernelArgs,
    args: &ValidateArgs,
    (index, watch): (Option<&PathBuf>, Option<&Watch>),
    done: usize,
) -> Result<(Vec<(PathBuf, Run)>, u8)> {
    let mut runs = Vec::new();
    let mut code = 0;
    let wanted = args.repeat.max(1);
    for n in done + 1..=wanted {
        if wanted > 1 {
            line(format!("validate: repeat {n} of {wanted}"));
        }
        let opts = Options { watch: watch.cloned(), ..Options::of(&args.vm, kernel.cache_dir.as_deref())? };
        let judged = crate::run::pipeline::run(chosen, built, &opts)?;
        crate::run::pipeline::publish(&judged, built)?;
        let dir = judged
            .first()
            .and_then(|j| j.outcome.out_dir.parent())
            .map(PathBuf::from)
            .ok_or_else(|| error(Kind::Infra, "no boot ran, so there is no run folder"))?;
        let this = crate::run::boot::exit_code(&judged);
        code = code.max(this);
        let run = crate::results::compare::read_run_json(&dir.join("run.json"))?;
        // Only a complete run is worth reusing: no infrastructure failure, no interrupt.
        if let (Some(index), true) = (index, this <= Kind::TestFailed.code()) {
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
