//! The child runs of this binary a campaign starts: a mutant's `run` command line, the kernels
//! its runs boot, and the child itself (its stderr shown as it comes and kept).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};

/// The `run` command line of one mutant: the base patches then its own, the arches of its covering scenarios and
/// their union as filters in the plan's order (fastest first, `--in-filter-order`; each arch
/// runs the union: a superset of its own), its own results folder, `--fail-fast` (one failure
/// kills it), and the per-mutant `--timeout` if any.
pub fn run_argv(
    base: &[PathBuf],
    patch: &Path,
    scenarios: &BTreeMap<String, Vec<String>>,
    results: &Path,
    timeout: Option<Duration>,
) -> Vec<String> {
    let arches: Vec<&str> = scenarios.keys().map(String::as_str).collect();
    // Each arch's order (fastest first), the first arch's before the others'.
    let mut all: Vec<&String> = vec![];
    for s in scenarios.values().flatten() {
        if !all.contains(&s) {
            all.push(s);
        }
    }
    let mut argv = vec![
        "xtask".to_string(),
        "run".into(),
        "--fail-fast".into(),
        // A mutant's failure is its kill: never re-run (a schemata kernel's cells flip between
        // mutants by design).
        "--no-rerun-unstable".into(),
        "--in-filter-order".into(),
        "--arch".into(),
        arches.join(","),
    ];
    argv.extend(patch_args(base, patch));
    argv.extend(["--results".to_string(), results.display().to_string()]);
    if let Some(t) = timeout {
        argv.extend(["--timeout".to_string(), format!("{}s", t.as_secs().max(1))]);
    }
    for s in all {
        argv.extend(["--filter".to_string(), s.clone()]);
    }
    argv
}

/// The schemata kernel's patch and the number of each mutant it holds.
pub type SchemataKernel = (PathBuf, BTreeMap<String, u32>);

/// What the mutants' kernels are made of (the base patches, the profiles, the schemata kernel
/// if any) and where they are cached.
#[derive(Clone, Copy)]
pub struct Kernels<'a> {
    pub base: &'a [PathBuf],
    /// The source's flags (`--kernel-version X`), for the schemata build and every run.
    pub source: &'a [String],
    pub profiles: &'a [String],
    pub schemata: Option<&'a SchemataKernel>,
    /// The kernel cache, where a mutant built on its own is removed from after its run.
    pub cache: &'a Path,
}

/// `--patch P` for each base patch, then for `last`.
pub fn patch_args(base: &[PathBuf], last: &Path) -> Vec<String> {
    base.iter()
        .map(PathBuf::as_path)
        .chain([last])
        .flat_map(|p| ["--patch".to_string(), p.display().to_string()])
        .collect()
}

/// `--profile NAME` for each profile.
pub fn profile_args(profiles: &[String]) -> Vec<String> {
    profiles.iter().flat_map(|p| ["--profile".to_string(), p.clone()]).collect()
}

/// `cargo xtask <args>` as a child process: its exit code and what it said on stderr (shown as
/// it comes, and kept for the compiler's first error); recorded in the history when `record`.
pub fn child(args: &[String], record: bool) -> Result<(Option<i32>, Vec<String>)> {
    // This very program, even when a rebuild has replaced its file since it started.
    let proc_exe = Path::new("/proc/self/exe");
    let exe = if proc_exe.exists() { proc_exe.to_path_buf() } else { std::env::current_exe()? };
    // std::process rather than xshell: the child's stderr is shown as it comes.
    let mut child = std::process::Command::new(&exe)
        .args(args)
        // The child run records into the history this campaign was given (a batch's does not:
        // its scenarios have the batch's names).
        .envs(crate::history::child_env())
        .envs((!record).then_some((crate::history::ENV, "off")))
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .with_context(|| format!("starting {}", exe.display()))?;
    let mut said = Vec::new();
    for line in BufReader::new(child.stderr.take().expect("piped")).lines() {
        let line = line.context("reading the child's output")?;
        eprintln!("{line}");
        said.push(line);
    }
    Ok((child.wait().context("waiting for the child")?.code(), said))
}

/// How a child `run` into the results folder `results` ended: its exit code, what it said, and
/// its own run folder when it made one (`latest` moved), else `None`.
pub struct ChildRun {
    pub code: Option<i32>,
    pub said: Vec<String>,
    pub run: Option<PathBuf>,
}

/// `cargo xtask <args>` as a child process (see [`child`]) whose `run` writes into `results`.
pub fn child_run(args: &[String], results: &Path, record: bool) -> Result<ChildRun> {
    let latest = results.join(crate::judging::run_folder::LATEST);
    let before = std::fs::read_link(&latest).ok();
    let (code, said) = child(args, record)?;
    let fresh = std::fs::read_link(&latest).ok() != before;
    Ok(ChildRun { code, said, run: fresh.then_some(latest) })
}
