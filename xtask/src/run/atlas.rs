//! `cargo xtask atlas`: one `run` per kernel, one kernel after the other (each its own run
//! folder, its arches booted as `run --arch` boots them, its kernels from the cache when they
//! are there), then the grid of their models (`results::atlas`) judged against the list of
//! explanations, and its renderings written into `results/atlas-<time>/`, with a
//! `results/latest-atlas` link.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::cli::matrix::KernelChoice;
use crate::cli::{AtlasArgs, KernelArgs, RunArgs};
use crate::results::atlas::{self, explained, Grid, KernelRun};
use crate::run::pipeline::{choose, Pipeline, Ran};
use crate::setup::provision::Needs;
use crate::support::exit::{error, Kind};
use crate::support::progress;

/// The link in the results folder to the newest atlas.
pub const LATEST: &str = "latest-atlas";

/// The atlas of `args` over `kernels`: its exit code (1 on an unexplained difference or a stale
/// explanation, else the worst of the runs' codes).
pub fn run(args: &AtlasArgs, kernels: &[KernelChoice]) -> Result<u8> {
    // A bad list fails before any kernel is built.
    let (list, arches) = list_and_arches(args)?;
    if let Some(dup) = kernels.iter().enumerate().find(|(i, k)| kernels[..*i].iter().any(|o| o.label == k.label)) {
        return Err(error(Kind::BadInput, format!("two kernels are both labelled `{}`", dup.1.label)));
    }
    let mut ran: Vec<(KernelChoice, Ran)> = Vec::new();
    for (n, k) in kernels.iter().enumerate() {
        let flags = if k.flags.is_empty() { "Debian's default source" } else { &k.flags };
        progress::line(format!("atlas: kernel {} of {}: {} ({flags})", n + 1, kernels.len(), k.label));
        match one_kernel(args, k) {
            Ok(Some(r)) => ran.push((k.clone(), r)),
            Ok(None) => {}
            // A kernel that cannot be built or booted is a column of missing cells; an
            // interrupt or the --timeout ends the atlas.
            Err(e) if !ends_the_atlas(&e) && !args.list => {
                progress::line(format!("atlas: {}: {e:#}", k.label));
                let code = crate::support::exit::code_for(&e);
                ran.push((k.clone(), Ran { dir: None, model: None, code }));
            }
            Err(e) => return Err(e),
        }
    }
    if args.list {
        return Ok(0);
    }
    judge_and_write(args, &ran, &arches, &list)
}

/// `--from`: the atlas of run folders made before, each one kernel's run (its label given as
/// `LABEL=DIR`, or made from its kernel), with nothing built or booted.
pub fn from_folders(args: &AtlasArgs) -> Result<u8> {
    let (list, arches) = list_and_arches(args)?;
    let mut ran: Vec<(KernelChoice, Ran)> = Vec::new();
    for spec in &args.from {
        let (label, dir) = match spec.split_once('=') {
            Some((l, d)) if !l.is_empty() && !l.contains('/') => (Some(l.to_string()), PathBuf::from(d)),
            _ => (None, PathBuf::from(spec)),
        };
        let dir = std::fs::canonicalize(&dir).map_err(|e| error(Kind::BadInput, format!("--from {spec}: {e}")))?;
        let model = crate::results::compare::read_run_json(&dir.join("run.json"))?;
        let label = label.unwrap_or_else(|| label_of(&model));
        if ran.iter().any(|(k, _)| k.label == label) {
            return Err(error(
                Kind::BadInput,
                format!("--from {spec}: a second run of kernel `{label}`: give it a label (LABEL=DIR)"),
            ));
        }
        let code = if model.verdict.kind == "pass" { 0 } else { Kind::TestFailed.code() };
        let choice = KernelChoice { label, flags: format!("--from {}", dir.display()), source: Default::default() };
        ran.push((choice, Ran { dir: Some(dir), model: Some(model), code }));
    }
    judge_and_write(args, &ran, &arches, &list)
}

/// How the atlas's folder links a run's folder: `../NAME` beside it in the results folder,
/// else its absolute path (a `--from` folder elsewhere).
fn link_to(run: &Path, results: &Path) -> String {
    let beside = std::fs::canonicalize(results).ok().zip(run.parent().and_then(|p| std::fs::canonicalize(p).ok()));
    match (beside, run.file_name()) {
        (Some((a, b)), Some(name)) if a == b => format!("../{}", name.to_string_lossy()),
        _ => run.display().to_string(),
    }
}

/// The list of explanations (`--explained`, default the tracked one) and the arches of `--arch`.
fn list_and_arches(args: &AtlasArgs) -> Result<(Vec<explained::Listed>, Vec<&'static str>)> {
    let root = crate::support::checkout::project_root();
    let list_path = args.explained.clone().unwrap_or_else(|| root.join(explained::LIST));
    let list = read_list(&list_path, &root)?;
    let arches = crate::arch::select(&args.arch)
        .map_err(|e| error(Kind::BadInput, format!("--arch: {e}")))?
        .iter()
        .map(|a| a.name)
        .collect();
    Ok((list, arches))
}

/// A run's kernel as an atlas label: `debian-7.3` for a Debian package, else the source's kind
/// and the release (`git-commit-6.12.117`).
fn label_of(run: &crate::results::model::Run) -> String {
    let Some(k) = run.arches.iter().find_map(|a| a.kernel.as_ref()) else { return run.run_id.clone() };
    let series: String = k.release.split('.').take(2).collect::<Vec<_>>().join(".");
    match k.source_kind.as_str() {
        "debian-package" => format!("debian-{series}"),
        kind => format!("{kind}-{}", k.release),
    }
}

/// The grid of the kernels' runs judged against the list, its files written and its summary
/// printed: the exit code (1 on an unexplained difference or a stale explanation, else the
/// worst of the runs' codes).
fn judge_and_write(
    args: &AtlasArgs,
    ran: &[(KernelChoice, Ran)],
    arches: &[&str],
    list: &[explained::Listed],
) -> Result<u8> {
    let results = args.vm.results_root();
    let links: Vec<KernelRun> = ran
        .iter()
        .map(|(k, r)| KernelRun {
            label: k.label.clone(),
            flags: k.flags.clone(),
            run: r.model.as_ref(),
            link: r.dir.as_deref().map(|d| link_to(d, &results)),
        })
        .collect();
    let grid = Grid::build(&links, arches);
    let judged = explained::judge(&grid, list);
    let dir = new_atlas_dir(&results)?;
    let urls: Vec<(&crate::results::model::Run, String)> = ran
        .iter()
        .filter_map(|(_, r)| {
            Some((r.model.as_ref()?, crate::results::folder_url(r.dir.as_deref()?, &r.model.as_ref()?.run_id)))
        })
        .collect();
    write(&dir, &grid, &judged, &urls)?;
    print!("{}", atlas::render::summary(&grid, &judged));
    println!("atlas: {}", dir.join("atlas.html").display());
    let runs = ran.iter().map(|(_, r)| r.code).max().unwrap_or(0);
    Ok(if !judged.passes() { runs.max(Kind::TestFailed.code()) } else { runs })
}

/// Whether a kernel's error ends the atlas (an interrupt, `--timeout`) rather than its column.
fn ends_the_atlas(e: &anyhow::Error) -> bool {
    let code = crate::support::exit::code_for(e);
    code == Kind::Interrupted.code() || code == Kind::TimedOut.code()
}

/// One kernel's run, as `cargo xtask run` makes it; with `--list`, its plans and whether its
/// kernels are cached, and `None`.
fn one_kernel(args: &AtlasArgs, k: &KernelChoice) -> Result<Option<Ran>> {
    let kernel = KernelArgs {
        arch: args.arch.clone(),
        source: k.source.clone(),
        config: crate::cli::ConfigArgs { profiles: args.profiles.clone(), ..Default::default() },
        knobs: Default::default(),
        jobs: args.jobs,
        cache_dir: args.cache_dir.clone(),
        config_only: args.list,
        json: false,
    };
    let run = RunArgs {
        kernel,
        vm: args.vm.clone(),
        budget: args.budget.clone(),
        select: args.select(),
        upstream_selftests: false,
        fail_fast: false,
        no_rerun_unstable: true,
    };
    let chosen = choose(&run.select, &run.vm.results_root())?;
    let needs = Needs::run(&run, &chosen.clients());
    let p = Pipeline::prepare(chosen, &needs, &run.kernel, &run.vm)?;
    if args.list {
        for b in &p.built {
            let cached = if b.cache_hit { "cached" } else { "NOT cached: the atlas would build it" };
            println!("{} {}: {}, {cached}", k.label, b.arch.name, b.metadata.kernelrelease);
        }
        p.list()?;
        return Ok(None);
    }
    p.run().map(Some)
}

/// The list of explanations, every bad row named.
fn read_list(path: &Path, root: &Path) -> Result<Vec<explained::Listed>> {
    let text = std::fs::read_to_string(path).map_err(|e| error(Kind::BadInput, format!("{}: {e}", path.display())))?;
    let exists = |rel: &str| root.join(rel).is_file();
    explained::parse(&text, &path.display().to_string(), &exists).map_err(|e| error(Kind::BadInput, e))
}

/// A new `results/atlas-<time>/`, with `results/latest-atlas` pointing at it.
fn new_atlas_dir(results: &Path) -> Result<PathBuf> {
    let name = format!("atlas-{}", jiff::Zoned::now().strftime("%Y%m%d-%H%M%S"));
    let dir = results.join(&name);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let latest = results.join(LATEST);
    let _ = std::fs::remove_file(&latest);
    let _ = std::os::unix::fs::symlink(&name, &latest);
    Ok(dir)
}

/// `atlas.json`, `atlas.html` and `kcidb.json` into the atlas's folder.
fn write(
    dir: &Path,
    grid: &Grid,
    judged: &explained::Judged,
    runs: &[(&crate::results::model::Run, String)],
) -> Result<()> {
    let now = jiff::Timestamp::now().round(jiff::Unit::Second)?.to_string();
    let files = [
        ("atlas.json", atlas::render::json(grid, judged, &now)?),
        ("atlas.html", atlas::html::render(grid, judged, &now)),
        ("kcidb.json", atlas::render::kcidb(runs)?),
    ];
    for (name, bytes) in files {
        let path = dir.join(name);
        crate::support::files::write_atomic(&path, &bytes).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_list_is_bad_input_naming_its_line_and_a_folder_gets_its_link() {
        let tmp = tempfile::tempdir().unwrap();
        let list = tmp.path().join("l.tsv");
        std::fs::write(&list, "# header\ns/a\t*\t*\tbug\tpatches/upstream/nosuch.md\tn\n").unwrap();
        let e = read_list(&list, &crate::support::checkout::project_root()).unwrap_err();
        assert_eq!(crate::support::exit::code_for(&e), 128);
        assert!(e.to_string().contains("l.tsv:2: field 5 (reference)"), "{e}");
        let e = read_list(&tmp.path().join("none.tsv"), tmp.path()).unwrap_err();
        assert_eq!(crate::support::exit::code_for(&e), 128);
        let dir = new_atlas_dir(tmp.path()).unwrap();
        assert!(dir.file_name().unwrap().to_string_lossy().starts_with("atlas-"));
        assert_eq!(std::fs::canonicalize(tmp.path().join(LATEST)).unwrap(), std::fs::canonicalize(&dir).unwrap());
        let run = crate::results::compare::read_run_json(
            &crate::support::checkout::project_root()
                .join("xtask/test_data/compare/base/20260102-000010-00001/run.json"),
        )
        .unwrap();
        assert_eq!(label_of(&run), "debian-6.12");
        let results = tmp.path().join("results");
        std::fs::create_dir_all(results.join("r1")).unwrap();
        assert_eq!(link_to(&results.join("r1"), &results), "../r1");
        assert_eq!(link_to(Path::new("/elsewhere/r2"), &results), "/elsewhere/r2");
        let interrupted = error(Kind::Interrupted, "x");
        assert!(ends_the_atlas(&interrupted) && !ends_the_atlas(&error(Kind::CannotBuild, "make failed")));
    }
}
