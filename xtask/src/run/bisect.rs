//! `cargo xtask bisect --kernel-src TREE --good REF --bad REF [--filter ...]`: `git bisect`
//! driven in a private clone (never the user's tree), each step an incremental build of the
//! good commit's export plus the change to the step's commit, running only the selected
//! scenarios; a commit that cannot be built is skipped. It ends with the first bad commit and
//! its failing scenarios' output, and keeps a log of every step.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Result;

use crate::cli::BisectArgs;
use crate::kernel::git;
use crate::run::boot::Options;
use crate::run::pipeline::Pipeline;
use crate::support::exit::{code_for, error, Kind};
use crate::support::progress::line;

/// How one commit fared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mark {
    Good,
    Bad,
    /// It cannot be built or configured (exit 125): `git bisect skip`.
    Skip,
}

impl Mark {
    fn word(self) -> &'static str {
        match self {
            Mark::Good => "good",
            Mark::Bad => "bad",
            Mark::Skip => "skip",
        }
    }
}

/// One tested commit.
struct Step {
    commit: String,
    mark: Mark,
    run: Option<PathBuf>,
    /// `arch/scenario: last lines` of each failed scenario.
    failures: Vec<String>,
}

/// The most steps a bisection takes (a kernel's history between two releases needs about 14).
const MAX_STEPS: usize = 40;

/// `cargo xtask bisect`: the first bad commit between `--good` and `--bad`, its failures shown
/// and every step logged; exit 0, or 1 when that commit passes when tested on its own.
pub fn bisect(args: &BisectArgs) -> Result<u8> {
    let dir = args.kernel.source.kernel_src.as_ref().ok_or_else(|| {
        error(
            Kind::BadInput,
            "bisect needs --kernel-src TREE (or to run inside it), the git checkout --good and --bad belong to",
        )
    })?;
    let cache_dir = crate::kernel::cache::root(args.kernel.cache_dir.as_deref());
    let repo = git::repo(dir)?;
    let good = git::commit(&repo, &args.good, "--good")?;
    let bad = git::commit(&repo, &args.bad, "--bad")?;
    let results = args.vm.results_root();
    let chosen = crate::run::pipeline::choose(&args.select, &results)?;
    let needs = crate::setup::provision::Needs::boot(&args.kernel, &args.vm, false, &chosen.clients());
    crate::setup::provision::ensure(&crate::setup::provision::Needs { git: true, ..needs })?;
    // The pipeline of every step: its kernels are the step's commit's.
    let opts = Options::of(&args.vm, args.kernel.cache_dir.as_deref())?;
    let mut p = Pipeline { chosen, built: vec![], opts };
    let stamp = jiff::Zoned::now().strftime("%Y%m%d-%H%M%S").to_string();
    let log_dir = results.join(format!("bisect-{stamp}"));
    std::fs::create_dir_all(&log_dir)?;
    let log_file = log_dir.join("bisect.md");
    let mut log = format!(
        "# bisect of {}\n\ngood {}\nbad {}\nscenarios: {}\n\n",
        repo.display(),
        git::describe(&repo, &good),
        git::describe(&repo, &bad),
        if p.chosen.select.narrows() { p.chosen.select.describe() } else { "all".into() }
    );
    let clone = git::bisect_clone(&repo, &cache_dir)?;
    let mut answer = git::bisect(&clone, &["start", "--no-checkout", &bad, &good])?;
    let mut steps: Vec<Step> = Vec::new();
    let first_bad = loop {
        if let Some(first) = git::first_bad(&answer) {
            break first;
        }
        if answer.contains("only 'skip'ped commits left to test") {
            std::fs::write(&log_file, &log)?;
            line(format!("bisect: {}", answer.trim()));
            return Err(error(
                Kind::CannotBuild,
                format!("bisect: only unbuildable commits are left; see {}", log_file.display()),
            ));
        }
        if steps.len() >= MAX_STEPS {
            return Err(error(
                Kind::Infra,
                format!("bisect: no answer after {MAX_STEPS} steps; see {}", log_file.display()),
            ));
        }
        let commit = git::bisect_head(&clone)?;
        let step = test_commit(args, &mut p, &repo, &good, &commit, &cache_dir)?;
        let _ = writeln!(
            log,
            "- {} {}{}",
            step.mark.word(),
            git::describe(&repo, &commit),
            step.run.as_ref().map_or(String::new(), |r| format!(" ({})", r.display()))
        );
        std::fs::write(&log_file, &log)?;
        line(format!("bisect: {} is {}", git::describe(&repo, &commit), step.mark.word()));
        answer = git::bisect(&clone, &[step.mark.word(), &commit])?;
        steps.push(step);
    };
    // The first bad commit's own failures: from its step, or tested now (git can name it
    // without testing it, e.g. when it is --bad itself).
    let own = match steps.iter().position(|s| s.commit == first_bad) {
        Some(i) => steps.swap_remove(i),
        None => test_commit(args, &mut p, &repo, &good, &first_bad, &cache_dir)?,
    };
    let _ = writeln!(log, "\nfirst bad commit: {}\n", git::describe(&repo, &first_bad));
    let git_log = git::bisect(&clone, &["log"]).unwrap_or_default();
    let _ = writeln!(log, "## git bisect log\n\n```\n{}```", git_log);
    let _ = git::bisect(&clone, &["reset"]);
    println!("first bad commit: {}", git::describe(&repo, &first_bad));
    let mut code = 0;
    match own.mark {
        Mark::Bad => {
            for f in &own.failures {
                println!("{f}");
            }
            let _ = writeln!(log, "\n## its failures\n\n{}", own.failures.join("\n"));
        }
        Mark::Good => {
            // Flaky, or the selection does not show the regression.
            let say = "but tested on its own now, it passes: the failure is flaky or depends on another commit";
            println!("{say}");
            let _ = writeln!(log, "\n{say}");
            code = Kind::TestFailed.code();
        }
        Mark::Skip => println!("(it cannot be built, so git could not tell it from its neighbours)"),
    }
    std::fs::write(&log_file, &log)?;
    line(format!("bisect: log in {}", log_file.display()));
    Ok(code)
}

/// Builds `commit` as the good commit's export plus the change to it (an incremental build in
/// the repository's one mirror), runs the selected scenarios through `p` and marks it.
fn test_commit(
    args: &BisectArgs,
    p: &mut Pipeline,
    repo: &Path,
    good: &str,
    commit: &str,
    cache_dir: &Path,
) -> Result<Step> {
    line(format!("bisect: testing {}", git::describe(repo, commit)));
    let change = git::diff_patch(repo, good, Some(commit), cache_dir)?;
    let mut kernel = args.kernel.clone();
    kernel.source.kernel_src = None;
    kernel.source.git_commit = Some((repo.to_path_buf(), good.to_string()));
    kernel.source.patches = change.into_iter().chain(args.kernel.source.patches.iter().cloned()).collect();
    p.built = match kernel.request().and_then(|r| crate::kernel::build_all(&r)) {
        Ok(b) => b,
        Err(e) if code_for(&e) == Kind::CannotBuild.code() || code_for(&e) == Kind::BadInput.code() => {
            // A commit that does not build, or whose change does not apply as a patch.
            line(format!("bisect: {} cannot be built: {e:#}", git::describe(repo, commit)));
            return Ok(Step { commit: commit.to_string(), mark: Mark::Skip, run: None, failures: vec![] });
        }
        Err(e) => return Err(e.context(format!("bisect: building {commit}"))),
    };
    let ran = p.run()?;
    let mark = match ran.code {
        0 => Mark::Good,
        1 => Mark::Bad,
        other => {
            return Err(error(
                Kind::Infra,
                format!("bisect: the run of {commit} ended with exit code {other} (not a test verdict): stopping"),
            ))
        }
    };
    let mut failures = Vec::new();
    for a in ran.model.iter().flat_map(|m| &m.arches) {
        for s in a.scenarios.iter().filter(|s| s.status.is_failure()) {
            let mut tail = s.failing_step(4);
            if tail.is_empty() {
                tail = s.log.iter().rev().take(4).rev().map(String::as_str).collect();
            }
            failures.push(format!("{}/{} ({}):\n    {}", a.arch, s.name, s.status.as_str(), tail.join("\n    ")));
        }
    }
    let run = ran.dir;
    Ok(Step { commit: commit.to_string(), mark, run, failures })
}
