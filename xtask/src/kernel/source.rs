//! Kernel sources: where they come from, what identifies them, and the private mirror tree
//! that patches are applied to, so a user's tree is never written and patched builds stay
//! incremental.

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

use crate::support::cmd::{cmd, sh, stdout, text};
use crate::support::exit::{error, Kind};
use crate::support::files::{hex, sha256_file, sha256_hex};

/// The Debian package and tarball used when no source is given.
pub const DEBIAN_PACKAGE: &str = "linux-source-6.12";
pub const DEBIAN_TARBALL: &str = "/usr/src/linux-source-6.12.tar.xz";

/// Where the kernel source comes from.
#[derive(Debug, Clone)]
pub enum Spec {
    Debian,
    Tree(PathBuf),
    Tarball(PathBuf),
    /// One commit of a git tree, exported into the cache (`validate --base`, `bisect`).
    GitCommit {
        repo: PathBuf,
        commit: String,
    },
    /// `--kernel-version`: a `linux-source-X` package downloaded and unpacked into the cache.
    DebianVersion(crate::kernel::debian::Package),
}

/// What a source is, reproducibly: the cache key and the provenance record use it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Identity {
    /// `debian-package`, `tarball`, `git-tree` or `tree`.
    pub kind: String,
    /// Human-readable: package version, path, commit.
    pub label: String,
    /// The hex digest that changes whenever the source's content does.
    pub id: String,
    /// The path the source was read from.
    pub location: PathBuf,
    /// For git trees: the HEAD commit and whether the tree had uncommitted changes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub git_head: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub git_dirty: Option<bool>,
    /// For the Debian package: its version.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub package_version: Option<String>,
}

/// A patch given with `--patch`, by name and content digest.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Patch {
    pub path: PathBuf,
    pub sha256: String,
}

impl Patch {
    pub fn read(path: &Path) -> Result<Patch> {
        let bytes = std::fs::read(path)
            .map_err(|e| error(Kind::BadInput, format!("--patch {}: cannot read the patch: {e}", path.display())))?;
        let path = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
        Ok(Patch { path, sha256: sha256_hex(&bytes) })
    }
}

/// Identifies a source. Tarball digests are memoised under `cache_dir` by path, size and mtime,
/// so a cache hit does not re-read 150 MB.
pub fn identify(spec: &Spec, cache_dir: &Path) -> Result<Identity> {
    match spec {
        Spec::Debian => {
            let tarball = Path::new(DEBIAN_TARBALL);
            if !tarball.exists() {
                return Err(error(
                    Kind::Infra,
                    format!(
                        "the default kernel source {DEBIAN_TARBALL} is missing: install the Debian package \
                         {DEBIAN_PACKAGE} (`cargo xtask setup` does), or pass --kernel-src DIR or --kernel-tarball FILE"
                    ),
                ));
            }
            let sh = sh()?;
            let version = text(cmd!(sh, "dpkg-query -W").args(["-f=${Version}", DEBIAN_PACKAGE])).ok();
            let id = memoised_sha256(tarball, cache_dir)?;
            let label = format!("Debian {DEBIAN_PACKAGE} {}", version.as_deref().unwrap_or("(version unknown)"));
            Ok(Identity {
                kind: "debian-package".into(),
                label,
                id,
                location: tarball.into(),
                git_head: None,
                git_dirty: None,
                package_version: version,
            })
        }
        Spec::Tarball(path) => {
            let location = path
                .canonicalize()
                .map_err(|e| error(Kind::BadInput, format!("--kernel-tarball {}: {e}", path.display())))?;
            let id = memoised_sha256(&location, cache_dir)?;
            let label = format!("tarball {}", location.display());
            Ok(Identity {
                kind: "tarball".into(),
                label,
                id,
                location,
                git_head: None,
                git_dirty: None,
                package_version: None,
            })
        }
        Spec::DebianVersion(package) => {
            let id = memoised_sha256(&package.tarball, cache_dir)?;
            Ok(Identity {
                kind: "debian-package".into(),
                label: format!("Debian {} {}", package.name, package.version),
                id,
                location: package.tarball.clone(),
                git_head: None,
                git_dirty: None,
                package_version: Some(package.version.clone()),
            })
        }
        Spec::Tree(dir) => identify_tree(dir),
        Spec::GitCommit { repo, commit } => Ok(Identity {
            kind: "git-commit".into(),
            label: format!("git {} at {}", repo.display(), crate::kernel::git::describe(repo, commit)),
            id: sha256_hex(format!("git-commit\0{commit}")),
            // Every commit of one repository shares one mirror and build directory, so moving
            // between commits is an incremental build.
            location: repo.clone(),
            git_head: Some(commit.clone()),
            git_dirty: Some(false),
            package_version: None,
        }),
    }
}

fn memoised_sha256(path: &Path, cache_dir: &Path) -> Result<String> {
    let meta = std::fs::metadata(path).with_context(|| format!("reading {}", path.display()))?;
    let mtime = meta.modified()?.duration_since(std::time::UNIX_EPOCH)?.as_nanos();
    let stamp = sha256_hex(format!("{}\0{}\0{mtime}", path.display(), meta.len()));
    let memo = cache_dir.join("digests").join(stamp);
    if let Ok(id) = std::fs::read_to_string(&memo) {
        return Ok(id);
    }
    let id = sha256_file(path)?;
    std::fs::create_dir_all(memo.parent().unwrap())?;
    crate::support::files::write_atomic(&memo, id.as_bytes())?;
    Ok(id)
}

/// A kernel tree: a git checkout is HEAD plus its uncommitted and untracked changes; any
/// other directory is every file's path, size and mtime.
pub fn identify_tree(dir: &Path) -> Result<Identity> {
    let location =
        dir.canonicalize().map_err(|e| error(Kind::BadInput, format!("--kernel-src {}: {e}", dir.display())))?;
    if !location.join("Makefile").is_file() || !location.join("Kconfig").is_file() {
        return Err(error(
            Kind::BadInput,
            format!("--kernel-src {}: not a kernel tree (no top-level Makefile and Kconfig)", location.display()),
        ));
    }
    let sh = sh()?;
    let git = |args: &[&str]| stdout(crate::kernel::git::command(&sh, &location).args(args));
    let toplevel =
        git(&["rev-parse", "--show-toplevel"]).ok().map(|o| PathBuf::from(String::from_utf8_lossy(&o).trim()));
    if toplevel.as_deref() == Some(location.as_path()) {
        let head = String::from_utf8_lossy(&git(&["rev-parse", "HEAD"])?).trim().to_string();
        let diff = git(&["diff", "HEAD", "--binary", "--no-ext-diff", "--no-color"])?;
        let untracked = git(&["ls-files", "-z", "--others", "--exclude-standard"])?;
        let mut h = Sha256::new();
        h.update(b"git\0");
        h.update(head.as_bytes());
        h.update(b"\0");
        h.update(&diff);
        let mut dirty = !diff.is_empty();
        for name in untracked.split(|&b| b == 0).filter(|n| !n.is_empty()) {
            dirty = true;
            let rel = String::from_utf8_lossy(name).into_owned();
            h.update(b"\0untracked\0");
            h.update(rel.as_bytes());
            h.update(b"\0");
            h.update(sha256_file(&location.join(&rel)).unwrap_or_default().as_bytes());
        }
        let label = format!(
            "git tree {} at {}{}",
            location.display(),
            &head[..head.len().min(12)],
            if dirty { " with uncommitted changes" } else { "" }
        );
        return Ok(Identity {
            kind: "git-tree".into(),
            label,
            id: hex(&h.finalize()),
            location,
            git_head: Some(head),
            git_dirty: Some(dirty),
            package_version: None,
        });
    }
    let mut entries = Vec::new();
    walk(&location, &location, &mut entries)?;
    entries.sort();
    let mut h = Sha256::new();
    h.update(b"tree\0");
    for e in &entries {
        h.update(e.as_bytes());
        h.update(b"\n");
    }
    let label = format!("tree {}", location.display());
    Ok(Identity {
        kind: "tree".into(),
        label,
        id: hex(&h.finalize()),
        location,
        git_head: None,
        git_dirty: None,
        package_version: None,
    })
}

fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) -> Result<()> {
    for entry in std::fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))? {
        let entry = entry?;
        let path = entry.path();
        let ft = entry.file_type()?;
        if ft.is_dir() {
            if entry.file_name() != ".git" {
                walk(root, &path, out)?;
            }
        } else {
            let meta = entry.metadata()?;
            let mtime = meta.modified()?.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
            let rel = path.strip_prefix(root).unwrap_or(&path).display().to_string();
            out.push(format!("{rel}\0{}\0{mtime}", meta.len()));
        }
    }
    Ok(())
}

/// Returns the directory holding the pristine source: the user's tree as is, or a tarball
/// unpacked once into `cache_dir/sources/<digest>`.
pub fn pristine_root(spec: &Spec, ident: &Identity, cache_dir: &Path) -> Result<PathBuf> {
    let tarball = match spec {
        Spec::Tree(_) => return Ok(ident.location.clone()),
        Spec::GitCommit { repo, commit } => return crate::kernel::git::export(repo, commit, cache_dir),
        Spec::Debian | Spec::Tarball(_) | Spec::DebianVersion(_) => &ident.location,
    };
    let dest = cache_dir.join("sources").join(&ident.id);
    if dest.join("Makefile").is_file() {
        return Ok(dest);
    }
    std::fs::create_dir_all(cache_dir.join("sources"))?;
    let scratch = tempfile::Builder::new().prefix(".unpack-").tempdir_in(cache_dir.join("sources"))?;
    let task = crate::support::progress::Task::start(format!("unpacking {}", tarball.display()));
    let sh = sh()?;
    let into = scratch.path();
    stdout(cmd!(sh, "tar -xf {tarball} -C {into}"))
        .map_err(|e| error(Kind::BadInput, format!("unpacking kernel tarball {}: {e:#}", tarball.display())))?;
    task.finish("unpacked");
    // A kernel tarball holds one top-level directory; accept a flat one too.
    let mut tops: Vec<PathBuf> = std::fs::read_dir(scratch.path())?.flatten().map(|e| e.path()).collect();
    let top = if tops.len() == 1 && tops[0].is_dir() { tops.remove(0) } else { scratch.path().to_path_buf() };
    if !top.join("Makefile").is_file() || !top.join("Kconfig").is_file() {
        return Err(error(Kind::BadInput, format!("{} does not hold a kernel tree", tarball.display())));
    }
    std::fs::rename(&top, &dest).with_context(|| format!("moving the unpacked tree to {}", dest.display()))?;
    Ok(dest)
}

/// What the mirror holds beyond the pristine source: the files the last patch set touched.
#[derive(Debug, Default, Serialize, Deserialize)]
struct MirrorState {
    patched_files: Vec<String>,
    /// What the mirror was last brought to in full (the source's identity, its pristine path and
    /// the patches' digests); absent while a sync is under way or after one failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    synced: Option<String>,
    /// The pristine tree the mirror was last brought to in full: a mirror switched to another
    /// one (another source of its release line) has the files whose content differs refreshed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pristine: Option<PathBuf>,
}

/// Whether the mirror is already `pristine` with `patches` applied (what [`sync_mirror`] would
/// leave), without changing it.
pub fn mirror_synced(pristine: &Path, mirror: &Path, state_file: &Path, source_id: &str, patches: &[Patch]) -> bool {
    mirror_state(state_file).synced == Some(synced_as(pristine, source_id, patches))
        && mirror.join("Makefile").is_file()
}

/// The `synced` record of a mirror of `pristine` with `patches`.
fn synced_as(pristine: &Path, source_id: &str, patches: &[Patch]) -> String {
    let digests: Vec<&str> = patches.iter().map(|p| p.sha256.as_str()).collect();
    format!("{source_id} {} {}", pristine.display(), digests.join(","))
}

fn mirror_state(state_file: &Path) -> MirrorState {
    std::fs::read(state_file).ok().and_then(|b| serde_json::from_slice(&b).ok()).unwrap_or_default()
}

/// Brings `mirror` to exactly `pristine` plus `patches`, in order.
///
/// Unchanged files are hard links into the pristine tree (rsync `--link-dest`), so the mirror
/// costs no space and no time. Every file a patch touches, now or in the previous run, is
/// rewritten as a fresh inode with a new mtime: that keeps the pristine tree unwritten and
/// makes `make` rebuild exactly what changed, so a one-file patch is an incremental build.
///
/// A mirror already brought to the same source identity and patches (the previous arch of the
/// same command, or the previous command) is left as it is: only this tool writes it, under its
/// lock, and a change of source content changes the identity.
pub fn sync_mirror(
    pristine: &Path,
    mirror: &Path,
    state_file: &Path,
    source_id: &str,
    patches: &[Patch],
) -> Result<()> {
    let wanted = synced_as(pristine, source_id, patches);
    let previous = mirror_state(state_file);
    let whole = mirror.join("Makefile").is_file();
    if previous.synced.as_deref() == Some(wanted.as_str()) && whole {
        return Ok(());
    }
    let sh = sh()?;
    let same_source = format!("{source_id} {} ", pristine.display());
    if whole && previous.synced.as_deref().is_some_and(|s| s.starts_with(&same_source)) {
        // The mirror is this pristine tree plus other patches: only the files they touched
        // differ, so only those are put back (fresh copies, which `make` sees as changed).
        for rel in &previous.patched_files {
            restore(pristine, mirror, rel)?;
        }
    } else {
        // Another pristine tree (another source of the release line, or a git tree's other
        // commit): the files whose content differs from what the mirror holds, found before
        // the mirror is linked to the new tree, whose mtimes may be older than the objects.
        let switched = whole && previous.pristine.as_deref() != Some(pristine);
        let changed = if switched { content_changes(pristine, mirror)? } else { vec![] };
        std::fs::create_dir_all(mirror)?;
        let (src, dst) = (contents_of(pristine), contents_of(mirror));
        let link_dest = format!("--link-dest={}", pristine.display());
        stdout(cmd!(sh, "rsync -a --delete --exclude=/.git {link_dest} {src} {dst}"))
            .with_context(|| format!("mirroring {} into {}", pristine.display(), mirror.display()))?;
        for rel in previous.patched_files.iter().chain(&changed) {
            refresh(&mirror.join(rel))?;
        }
    }
    let mut state = MirrorState { pristine: Some(pristine.to_path_buf()), ..MirrorState::default() };
    for patch in patches {
        let touched = dry_run(mirror, &patch.path)?;
        state.patched_files.extend(touched.iter().cloned());
        // Record before applying, so a failure part-way still restores these next time.
        crate::support::files::write_atomic(state_file, &serde_json::to_vec(&state)?)?;
        for rel in &touched {
            refresh(&mirror.join(rel))?;
        }
        let file = &patch.path;
        let out = cmd!(sh, "patch -p1 --batch --forward --no-backup-if-mismatch -d {mirror} -i {file}")
            .ignore_status()
            .output()
            .context("running patch (install the Debian package `patch`)")?;
        if !out.status.success() {
            return Err(patch_error(&patch.path, &String::from_utf8_lossy(&out.stdout)));
        }
    }
    state.synced = Some(wanted);
    crate::support::files::write_atomic(state_file, &serde_json::to_vec(&state)?)?;
    Ok(())
}

/// The regular files of `pristine` whose content the mirror does not hold (changed or new), by
/// rsync's checksums in a dry run: what `make` must rebuild after a switch of source.
fn content_changes(pristine: &Path, mirror: &Path) -> Result<Vec<String>> {
    let sh = sh()?;
    let (src, dst) = (contents_of(pristine), contents_of(mirror));
    let format = "--out-format=%i %n";
    let out = text(cmd!(sh, "rsync -rlp --checksum --dry-run --exclude=/.git {format} {src} {dst}"))
        .with_context(|| format!("comparing {} with {}", pristine.display(), mirror.display()))?;
    Ok(out
        .lines()
        .filter_map(|l| l.strip_prefix(">f"))
        .filter_map(|l| l.split_once(' '))
        .map(|(_, n)| n.to_string())
        .collect())
}

/// A folder as rsync's source or destination of its contents: its path with a trailing `/`.
pub(crate) fn contents_of(dir: &Path) -> std::ffi::OsString {
    let mut arg = dir.as_os_str().to_owned();
    arg.push("/");
    arg
}

/// The files the mirror's current patch set touched (relative paths), as `sync_mirror` recorded.
pub fn patched_files(state_file: &Path) -> Vec<String> {
    std::fs::read(state_file)
        .ok()
        .and_then(|b| serde_json::from_slice::<MirrorState>(&b).ok())
        .map(|s| s.patched_files)
        .unwrap_or_default()
}

/// Puts a mirror's file back as the pristine tree has it, as a fresh copy (a new inode with the
/// current mtime), or removes it when the pristine tree has none (a patch made it).
fn restore(pristine: &Path, mirror: &Path, rel: &str) -> Result<()> {
    let (from, to) = (pristine.join(rel), mirror.join(rel));
    if !from.is_file() {
        return match std::fs::remove_file(&to) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e.into()),
            _ => Ok(()),
        };
    }
    let tmp = to.with_extension("xtask-refresh");
    std::fs::create_dir_all(to.parent().context("a file has a folder")?)?;
    std::fs::copy(&from, &tmp).with_context(|| format!("copying {}", from.display()))?;
    std::fs::rename(&tmp, &to)?;
    Ok(())
}

/// Rewrites a file as a new inode with the current mtime; a missing file is fine.
fn refresh(path: &Path) -> Result<()> {
    let Ok(bytes) = std::fs::read(path) else {
        return Ok(());
    };
    let perms = std::fs::metadata(path)?.permissions();
    let tmp = path.with_extension("xtask-refresh");
    std::fs::write(&tmp, bytes)?;
    std::fs::set_permissions(&tmp, perms)?;
    std::fs::rename(&tmp, path)?;
    Ok(())
}

/// Checks that a patch applies and returns the files it touches.
fn dry_run(tree: &Path, patch: &Path) -> Result<Vec<String>> {
    let sh = sh()?;
    let out = cmd!(sh, "patch -p1 --batch --forward --dry-run -d {tree} -i {patch}")
        .ignore_status()
        .output()
        .context("running patch (install the Debian package `patch`)")?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(patch_error(patch, &text));
    }
    Ok(touched_files(&text))
}

/// The files named by `patch` output lines (`checking file X`, `patching file X`).
pub fn touched_files(patch_output: &str) -> Vec<String> {
    let mut files = Vec::new();
    for line in patch_output.lines() {
        let name = line.strip_prefix("checking file ").or_else(|| line.strip_prefix("patching file "));
        if let Some(name) = name {
            let (name, renamed_from) = match name.split_once(" (renamed from ") {
                Some((n, from)) => (n, Some(from.trim_end_matches(')'))),
                None => (name, None),
            };
            for n in std::iter::once(name).chain(renamed_from) {
                let n = n.trim().trim_matches('\'').to_string();
                if !files.contains(&n) {
                    files.push(n);
                }
            }
        }
    }
    files
}

/// Names the patch, the file and the failing hunks from `patch` output.
pub fn patch_error(patch: &Path, patch_output: &str) -> anyhow::Error {
    let mut file = None;
    let mut problems = Vec::new();
    for line in patch_output.lines() {
        if let Some(f) = line.strip_prefix("checking file ").or_else(|| line.strip_prefix("patching file ")) {
            file = Some(f.trim().to_string());
        } else if let Some(f) = line.strip_prefix("|+++ ") {
            // A file patch cannot find is only named in the quoted header it prints.
            let f = f.split('\t').next().unwrap_or(f).trim();
            file = Some(f.split_once('/').map_or(f, |(_, rest)| rest).to_string());
        } else if (line.starts_with("Hunk #") && line.contains("FAILED")) || line.contains("No file to patch") {
            problems.push(format!("{}: {}", file.as_deref().unwrap_or("?"), line.trim()));
        } else if line.starts_with("Reversed (or previously applied) patch detected") {
            problems.push(format!("{}: already applied (reversed patch detected)", file.as_deref().unwrap_or("?")));
        } else if line.contains("Only garbage was found") || line.contains("malformed patch") {
            problems.push(line.trim().to_string());
        }
    }
    if problems.is_empty() {
        problems.push(patch_output.trim().lines().last().unwrap_or("patch failed").to_string());
    }
    problems.dedup();
    error(Kind::BadInput, format!("patch {} does not apply: {}", patch.display(), problems.join("; ")))
}

#[cfg(test)]
mod tests;
