//! The checks of `cargo xtask test` that run this xtask as a user would on a git tree: a
//! small repository of a kernel source with a bad commit, `validate` of its range and
//! `bisect` (by scenario, and `bisect run` from inside the tree) naming the culprit.

use std::io::Write;
use std::path::Path;

use anyhow::Result;

use xtask::cli::TestArgs;
use xtask::support::cmd::{cmd, sh, stdout};

use crate::as_user::this_xtask;

/// A git kernel tree made from the cached default source (hard links, `git add -f`: Debian's
/// `.gitignore` ignores the top level), with a commit that breaks one scenario
/// (`limits/system-names-are-fixed`: the multi-format system renamed) and a harmless one after
/// it. Kept in the cache, so later test runs reuse it.
fn git_test_tree(cache_dir: &Path) -> Result<std::path::PathBuf> {
    let ident = xtask::kernel::source::identify(&xtask::kernel::source::Spec::Debian, cache_dir)?;
    let pristine = xtask::kernel::source::pristine_root(&xtask::kernel::source::Spec::Debian, &ident, cache_dir)?;
    let tree = cache_dir.join("test-data").join(format!("git-{}", &ident.id[..16]));
    if tree.join(".git/xtask-test-tree-done").is_file() {
        return Ok(tree);
    }
    let _ = std::fs::remove_dir_all(&tree);
    std::fs::create_dir_all(cache_dir.join("test-data"))?;
    let sh = sh()?;
    let run = |args: &[&str], date: &str| -> Result<()> {
        let who = ["-c", "user.name=xtask test", "-c", "user.email=xtask-test@invalid"];
        let git = cmd!(sh, "git -C {tree} {who...} {args...}");
        stdout(git.env("GIT_AUTHOR_DATE", date).env("GIT_COMMITTER_DATE", date))?;
        Ok(())
    };
    stdout(cmd!(sh, "cp -al {pristine} {tree}"))?;
    run(&["init", "-q"], "")?;
    // A kernel engineer's tree is packed already: no `gc --auto` repacking 80k files mid-check.
    run(&["config", "gc.auto", "0"], "")?;
    run(&["add", "-f", "-A", "."], "")?;
    run(&["commit", "-q", "-m", "base: the Debian source"], "2026-01-01T00:00:00Z")?;
    // Files are hard links into the pristine source: replace, never write in place.
    let edit = |rel: &str, from: &str, to: &str| -> Result<()> {
        let path = tree.join(rel);
        let text = std::fs::read_to_string(&path)?;
        anyhow::ensure!(text.contains(from), "{rel} has no {from:?}");
        std::fs::remove_file(&path)?;
        std::fs::write(&path, text.replacen(from, to, 1))?;
        Ok(())
    };
    edit(
        "kernel/trace/trace_events_user.c",
        "return kstrdup(USER_EVENTS_MULTI_SYSTEM, GFP_KERNEL);",
        "return kstrdup(\"user_events_multx\", GFP_KERNEL);",
    )?;
    run(
        &["commit", "-q", "-a", "-m", "tracing/user_events: rename the multi-format system (breaks it)"],
        "2026-01-02T00:00:00Z",
    )?;
    edit("Documentation/trace/user_events.rst", "user_events", "user_events")?;
    std::fs::OpenOptions::new()
        .append(true)
        .open(tree.join("Documentation/trace/user_events.rst"))?
        .write_all(b"\n.. A harmless documentation change.\n")?;
    run(&["commit", "-q", "-a", "-m", "docs: a harmless change"], "2026-01-03T00:00:00Z")?;
    std::fs::write(tree.join(".git/xtask-test-tree-done"), b"")?;
    Ok(tree)
}

/// `validate --kernel-src TREE --base HEAD~2` and `bisect --good HEAD~2 --bad HEAD` on the test
/// tree, x86_64, the limits suite: validate names the broken scenario and exits 1; bisect
/// prints the breaking commit.
pub fn git_tree_validate_and_bisect(scratch: &Path, args: &TestArgs) -> Result<()> {
    let cache_dir = xtask::kernel::cache::root(args.cache_dir.as_deref());
    let tree = git_test_tree(&cache_dir)?;
    let tree_arg = tree.display().to_string();
    let results = tempfile::tempdir_in(scratch)?;
    let results_arg = results.path().display().to_string();
    let common = ["--kernel-src", &tree_arg, "--arch", "x86_64", "--filter", "limits/*", "--results", &results_arg];
    let (sh, xtask) = (sh()?, this_xtask()?);
    let out = cmd!(sh, "{xtask} validate {common...} --base HEAD~2").ignore_status().output()?;
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    anyhow::ensure!(out.status.code() == Some(1), "validate exited {:?}:\n{text}", out.status.code());
    let regressed: Vec<&str> = text.lines().filter(|l| l.trim_start().starts_with("REGRESSED ")).collect();
    anyhow::ensure!(
        regressed.len() == 1 && regressed[0].contains("limits/system-names-are-fixed"),
        "validate did not name exactly limits/system-names-are-fixed as regressed:\n{text}"
    );
    let out = cmd!(sh, "{xtask} bisect {common...} --good HEAD~2 --bad HEAD").ignore_status().output()?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let text = format!("{stdout}{}", String::from_utf8_lossy(&out.stderr));
    anyhow::ensure!(out.status.code() == Some(0), "bisect exited {:?}:\n{text}", out.status.code());
    let breaking = xtask::kernel::git::commit(&tree, "HEAD~1", "test")?;
    let first = stdout.lines().find_map(|l| l.strip_prefix("first bad commit: ")).unwrap_or_default();
    anyhow::ensure!(
        breaking.starts_with(first.split_whitespace().next().unwrap_or("-"))
            && first.contains("rename the multi-format"),
        "bisect named {first:?}, the breaking commit is {breaking}:\n{text}"
    );
    anyhow::ensure!(
        stdout.contains("x86_64/limits/system-names-are-fixed"),
        "bisect did not show the failure:\n{text}"
    );
    anyhow::ensure!(
        !tree.join(".git/BISECT_LOG").exists() && xtask::kernel::git::commit(&tree, "HEAD", "t")? != breaking,
        "bisect touched the user's tree"
    );
    Ok(())
}

/// `git bisect start HEAD HEAD~2 && git bisect run ue-conformance run --arch x86_64 --filter
/// limits/system-names-are-fixed` with the test tree as the working folder, as a kernel
/// engineer would run it: no `--kernel-src` (the tree is the default source), the installed
/// binary's spelling, its exit codes read by git (0 good, 1 bad, 125 skip, 128+ abort). Git
/// must name the breaking commit; `git bisect reset` puts the tree back (its files are hard
/// links into the pristine source, which git replaces, never writes in place).
pub fn git_bisect_run_from_the_tree(scratch: &Path, args: &TestArgs) -> Result<()> {
    let cache_dir = xtask::kernel::cache::root(args.cache_dir.as_deref());
    let tree = git_test_tree(&cache_dir)?;
    let results = tempfile::tempdir_in(scratch)?;
    let results_arg = results.path().display().to_string();
    let tool = std::path::PathBuf::from(env!("CARGO_BIN_EXE_ue-conformance"));
    let breaking = xtask::kernel::git::commit(&tree, "HEAD~1", "test")?;
    let head = xtask::kernel::git::commit(&tree, "HEAD", "test")?;
    let sh = sh()?;
    sh.change_dir(&tree);
    // The tree's head is a branch; a bisection left over by an aborted earlier run is dropped.
    let _ = cmd!(sh, "git bisect reset").quiet().ignore_status().ignore_stderr().output();
    stdout(cmd!(sh, "git bisect start HEAD HEAD~2"))?;
    let filter = "limits/system-names-are-fixed";
    let out = cmd!(sh, "git bisect run {tool} run --arch x86_64 --filter {filter} --results {results_arg}")
        .env("XTASK_CACHE_DIR", &cache_dir)
        .ignore_status()
        .output();
    let log = cmd!(sh, "git bisect log").ignore_status().read().unwrap_or_default();
    let reset = stdout(cmd!(sh, "git bisect reset"));
    let out = out?;
    reset?;
    let text = format!(
        "{}{}
{log}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let named = text.lines().find_map(|l| l.strip_suffix(" is the first bad commit")).map(str::trim);
    anyhow::ensure!(
        out.status.success() && named == Some(breaking.as_str()),
        "git bisect run exited {:?} and named {named:?}, the breaking commit is {breaking}:\n{text}",
        out.status.code()
    );
    anyhow::ensure!(
        text.contains("source: the kernel tree here"),
        "the tool did not say it took the tree as the source:\n{text}"
    );
    anyhow::ensure!(
        xtask::kernel::git::commit(&tree, "HEAD", "test")? == head && !tree.join(".git/BISECT_LOG").exists(),
        "the tree was not put back at {head}"
    );
    Ok(())
}
