//! A user's git kernel tree, read and never written: commits resolved, a commit exported into
//! the cache (`git archive`, no checkout, no index), the change between two commits (or a
//! commit and the working tree) as a patch on that export, so every commit of a series builds
//! incrementally in one private mirror; and the private clone `bisect` drives.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::support::cmd::{cmd, sh, stdout, text, Cmd, Shell};
use crate::support::exit::{error, Kind};
use crate::support::files::sha256_hex;

/// `git -C repo`, never writing the user's index: `status`, `diff` and friends otherwise refresh
/// it opportunistically. Every git command run on a user's tree goes through here.
pub fn command<'a>(sh: &'a Shell, repo: &Path) -> Cmd<'a> {
    cmd!(sh, "git --no-optional-locks -C {repo}")
}

/// The git checkout at `dir` (its top level), or a clear error.
pub fn repo(dir: &Path) -> Result<PathBuf> {
    let sh = sh()?;
    let top = text(command(&sh, dir).args(["rev-parse", "--show-toplevel"])).map_err(|e| {
        error(Kind::BadInput, format!("--kernel-src {}: not a git checkout ({e:#}); --base needs git", dir.display()))
    })?;
    Ok(PathBuf::from(top))
}

/// Whether `dir` is the top of a kernel git tree: a `Makefile` that sets `VERSION =`, a
/// `Kbuild` file or `kernel/` folder beside it, and a git work tree. An installed tool run
/// there takes it as the default source (`--kernel-src .`).
pub fn kernel_tree(dir: &Path) -> bool {
    let makefile = std::fs::read_to_string(dir.join("Makefile")).unwrap_or_default();
    let versioned = makefile.lines().take(10).any(|l| l.replace(' ', "").starts_with("VERSION="));
    if !versioned || !(dir.join("Kbuild").is_file() || dir.join("kernel").is_dir()) {
        return false;
    }
    sh().and_then(|sh| text(command(&sh, dir).args(["rev-parse", "--is-inside-work-tree"]))).is_ok_and(|t| t == "true")
}

/// The full commit id a ref names (`HEAD~1`, a tag, a branch), or an error naming the flag.
pub fn commit(repo: &Path, rev: &str, flag: &str) -> Result<String> {
    let sh = sh()?;
    text(command(&sh, repo).args(["rev-parse", "--verify", "--quiet", &format!("{rev}^{{commit}}")]))
        .map_err(|_| error(Kind::BadInput, format!("{flag} {rev}: not a commit in {}", repo.display())))
}

/// `abcdef012345 subject`.
pub fn describe(repo: &Path, commit: &str) -> String {
    sh().and_then(|sh| text(command(&sh, repo).args(["log", "-1", "--format=%h %s", commit])))
        .unwrap_or_else(|_| commit[..commit.len().min(12)].to_string())
}

/// Whether the working tree differs from HEAD (tracked changes or untracked files).
pub fn dirty(repo: &Path) -> bool {
    sh().and_then(|sh| stdout(command(&sh, repo).args(["status", "--porcelain", "--untracked-files=normal"])))
        .map_or(true, |o| !o.is_empty())
}

/// The tree of `commit` unpacked under `cache_dir/sources/git-<commit>` (once), with `git
/// archive`: the user's checkout, index and refs are never touched.
pub fn export(repo: &Path, commit: &str, cache_dir: &Path) -> Result<PathBuf> {
    let dest = cache_dir.join("sources").join(format!("git-{commit}"));
    if dest.join("Makefile").is_file() {
        return Ok(dest);
    }
    std::fs::create_dir_all(cache_dir.join("sources"))?;
    let scratch = tempfile::Builder::new().prefix(".export-").tempdir_in(cache_dir.join("sources"))?;
    let task = crate::support::progress::Task::start(format!("exporting {} of {}", &commit[..12], repo.display()));
    let archive = scratch.path().join("tree.tar");
    let sh = sh()?;
    stdout(command(&sh, repo).args(["archive", "--format=tar", "-o"]).arg(&archive).arg(commit))
        .with_context(|| format!("git archive {commit} in {}", repo.display()))?;
    let tree = scratch.path().join("tree");
    std::fs::create_dir_all(&tree)?;
    stdout(cmd!(sh, "tar -xf {archive} -C {tree}")).context("unpacking the git archive")?;
    task.finish("exported");
    if !tree.join("Makefile").is_file() || !tree.join("Kconfig").is_file() {
        return Err(error(Kind::BadInput, format!("commit {commit} of {} holds no kernel tree", repo.display())));
    }
    std::fs::rename(&tree, &dest).with_context(|| format!("moving the export to {}", dest.display()))?;
    Ok(dest)
}

/// The change from `base` to `head` (a commit, or the working tree with its uncommitted and
/// untracked files when `None`) as a `patch -p1` file in the cache, named by its content;
/// `None` when there is no change.
pub fn diff_patch(repo: &Path, base: &str, head: Option<&str>, cache_dir: &Path) -> Result<Option<PathBuf>> {
    let sh = sh()?;
    let mut text =
        stdout(command(&sh, repo).args(["diff", "--no-color", "--no-ext-diff", "--no-renames", base]).args(head))?;
    if head.is_none() {
        // Untracked files as new-file diffs, without `git add -N` (which would write the index).
        let untracked = stdout(command(&sh, repo).args(["ls-files", "-z", "--others", "--exclude-standard"]))?;
        for name in untracked.split(|&b| b == 0).filter(|n| !n.is_empty()) {
            let rel = String::from_utf8_lossy(name).into_owned();
            let out = command(&sh, repo)
                .args(["diff", "--no-color", "--no-index", "--", "/dev/null", &rel])
                .ignore_status()
                .output()
                .context("git diff --no-index")?;
            // Exit 1 means "differs", which is the point.
            text.extend_from_slice(&out.stdout);
        }
    }
    if text.is_empty() {
        return Ok(None);
    }
    let dir = cache_dir.join("git-diffs");
    std::fs::create_dir_all(&dir)?;
    let path = dir.join(format!("{}.patch", &sha256_hex(&text)[..24]));
    if !path.is_file() {
        crate::support::files::write_atomic(&path, &text)?;
    }
    Ok(Some(path))
}

/// A private clone for `git bisect` in the cache: it shares the user's objects (read only,
/// `--shared`) and has no checkout (`bisect start --no-checkout`), so the user's tree, index,
/// refs and bisect state stay as they are.
pub fn bisect_clone(repo: &Path, cache_dir: &Path) -> Result<PathBuf> {
    let key = &sha256_hex(repo.display().to_string())[..16];
    let dir = cache_dir.join("bisect").join(key);
    if dir.exists() {
        std::fs::remove_dir_all(&dir).with_context(|| format!("removing the old {}", dir.display()))?;
    }
    std::fs::create_dir_all(cache_dir.join("bisect"))?;
    let sh = sh()?;
    stdout(cmd!(sh, "git clone --quiet --shared --no-checkout {repo} {dir}"))
        .with_context(|| format!("cloning {} into {}", repo.display(), dir.display()))?;
    Ok(dir)
}

/// Runs `git bisect ARGS` in the private clone; its output.
pub fn bisect(clone: &Path, args: &[&str]) -> Result<String> {
    let sh = sh()?;
    let out = command(&sh, clone).arg("bisect").args(args).ignore_status().output().context("git bisect")?;
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    if !out.status.success() {
        anyhow::bail!("git bisect {} failed: {}", args.join(" "), text.trim());
    }
    Ok(text)
}

/// The commit `git bisect` wants tested next (`BISECT_HEAD` with `--no-checkout`).
pub fn bisect_head(clone: &Path) -> Result<String> {
    commit(clone, "BISECT_HEAD", "bisect")
}

/// `abc... is the first bad commit` in `git bisect`'s answer.
pub fn first_bad(text: &str) -> Option<String> {
    text.lines().find_map(|l| l.strip_suffix(" is the first bad commit").map(|c| c.trim().to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn script(dir: &Path, script: &str) {
        let sh = sh().unwrap();
        sh.change_dir(dir);
        stdout(cmd!(sh, "sh -c {script}")).unwrap();
    }

    #[test]
    fn a_kernel_git_tree_is_recognised() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        assert!(!kernel_tree(d), "an empty folder");
        std::fs::write(d.join("Makefile"), "# SPDX-License-Identifier: GPL-2.0\nVERSION = 6\nPATCHLEVEL = 12\n")
            .unwrap();
        std::fs::create_dir(d.join("kernel")).unwrap();
        assert!(!kernel_tree(d), "not a git work tree");
        script(d, "git init -q . && git -c user.name=t -c user.email=t@t add Makefile");
        assert!(kernel_tree(d));
        std::fs::write(d.join("Makefile"), "all:\n\techo VERSION = 6\n").unwrap();
        assert!(!kernel_tree(d), "a Makefile that does not set VERSION");
    }

    #[test]
    fn exports_diffs_and_bisects_without_touching_the_tree() {
        let dir = tempfile::tempdir().unwrap();
        let repo_dir = dir.path().join("linux");
        std::fs::create_dir_all(&repo_dir).unwrap();
        script(
            &repo_dir,
            "git init -q && git config user.email t@t && git config user.name t && \
             echo all: > Makefile && echo 'config X' > Kconfig && echo 1 > f && git add -A && git commit -qm one && \
             echo 2 > f && git commit -qam two && echo 3 > f && git commit -qam three && echo 4 > f && echo new > u",
        );
        let repo = repo(&repo_dir).unwrap();
        let cache = dir.path().join("cache");
        let one = commit(&repo, "HEAD~2", "--base").unwrap();
        let three = commit(&repo, "HEAD", "--head").unwrap();
        assert_eq!(one.len(), 40);
        assert!(describe(&repo, &one).ends_with(" one"));
        assert_eq!(crate::support::exit::code_for(&commit(&repo, "nope", "--base").unwrap_err()), 128);
        let tree = export(&repo, &one, &cache).unwrap();
        assert_eq!(std::fs::read_to_string(tree.join("f")).unwrap(), "1\n");
        let committed =
            std::fs::read_to_string(diff_patch(&repo, &one, Some(&three), &cache).unwrap().unwrap()).unwrap();
        assert!(committed.contains("-1\n+3\n") && !committed.contains("new"), "{committed}");
        let worktree = std::fs::read_to_string(diff_patch(&repo, &one, None, &cache).unwrap().unwrap()).unwrap();
        assert!(worktree.contains("-1\n+4\n") && worktree.contains("+new"), "{worktree}");
        assert_eq!(diff_patch(&repo, &three, Some(&three), &cache).unwrap(), None);
        // The user's tree still has its uncommitted change and no bisect state.
        assert_eq!(std::fs::read_to_string(repo_dir.join("f")).unwrap(), "4\n");

        let clone = bisect_clone(&repo, &cache).unwrap();
        let two = commit(&repo, "HEAD~1", "x").unwrap();
        bisect(&clone, &["start", "--no-checkout", &three, &one]).unwrap();
        assert_eq!(bisect_head(&clone).unwrap(), two);
        let answer = bisect(&clone, &["bad", &two]).unwrap();
        assert_eq!(first_bad(&answer), Some(two));
        assert!(!repo_dir.join(".git/BISECT_LOG").exists());
    }
}
