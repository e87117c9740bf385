//! A kernel build's data: what one arch's build is asked (`Job`), the kernel it makes
//! (`Built`) and the provenance stored beside its image (`Metadata`), with the names a build's
//! files and folders take.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::arch::Arch;
use crate::kernel::kconfig::{Fragment, Missing};
use crate::kernel::knobs::Knobs;
use crate::kernel::source::{Identity, Patch, Spec};
use crate::support::files::sha256_hex;

pub const METADATA_SCHEMA: u32 = 1;

/// What to build on one arch (the kernel phase's `Request` made per arch by `build_all`).
pub struct Job<'a> {
    pub arch: &'static Arch,
    pub spec: &'a Spec,
    pub source: &'a Identity,
    pub patches: &'a [Patch],
    /// In merge order: common, arch, profiles, user fragments, `--kconfig`.
    pub fragments: &'a [Fragment],
    pub jobs: usize,
    pub cache_dir: &'a Path,
    /// Stop after the configuration check (no image, nothing cached).
    pub config_only: bool,
    /// Sources built with GCOV (`gcov.rs`); empty for a normal build.
    pub gcov_files: &'a [String],
    /// `LLVM=1`, `CC=`, `CROSS_COMPILE=`, ccache, extra make variables (`knobs.rs`).
    pub knobs: &'a Knobs,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Compiler {
    pub command: String,
    pub version: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ConfigRecord {
    /// SHA-256 of the final `.config`.
    pub sha256: String,
    pub fragments: Vec<String>,
    pub requested: BTreeMap<String, String>,
    /// The final value of each requested option (`absent` when not in `.config`).
    pub effective: BTreeMap<String, String>,
    pub missing: Vec<Missing>,
}

/// Provenance of one build, written as `metadata.json` beside the image.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Metadata {
    pub schema: u32,
    pub arch: String,
    pub key: String,
    pub source: Identity,
    pub patches: Vec<Patch>,
    pub kernelrelease: String,
    pub compiler: Compiler,
    pub config: ConfigRecord,
    pub make_commands: Vec<String>,
    /// Seconds per phase: source, configure, build, install.
    pub durations: BTreeMap<String, f64>,
    pub built_at: String,
    pub host: String,
    /// The image file name inside the build's directory.
    pub image: String,
    /// The sources built with GCOV, their `.gcno` and source in `gcov/` beside the image.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gcov_files: Vec<String>,
    /// The make variables of the build knobs (`ARCH=...`, `LLVM=1`, `CC=ccache gcc`, extra
    /// `--make-arg`s); absent for a build without knobs, whose variables are the arch's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub make_vars: Vec<String>,
}

/// A kernel ready to boot.
#[derive(Debug)]
pub struct Built {
    pub arch: &'static Arch,
    pub image: PathBuf,
    pub config: PathBuf,
    pub metadata: Metadata,
    /// True when no `make` ran at all.
    pub cache_hit: bool,
    /// Where the source came from, to bring its mirror back (`None` for a prebuilt image).
    pub source: Option<SourceRef>,
}

/// Enough to rebuild a kernel's private mirror: the upstream selftests must be built from the
/// very tree (source and patches) the kernel was, and on a cache hit nothing synced it.
#[derive(Debug, Clone)]
pub struct SourceRef {
    pub spec: Spec,
    pub identity: Identity,
    pub patches: Vec<Patch>,
    pub cache_dir: PathBuf,
}

/// The private mirror's folder name of a source: its release line (`linux-6.12`, from the
/// top Makefile's `VERSION` and `PATCHLEVEL`), so every source of one line (Debian's package, a
/// git tree, its commits, a tarball) shares one mirror and one build directory per arch and
/// profile, and moving between them rebuilds only what differs (`source::sync_mirror`). A tree
/// whose Makefile says no version has a folder of its own.
pub(super) fn location(source: &Identity, pristine: &Path) -> String {
    match release_line(pristine) {
        Some(line) => format!("linux-{line}"),
        None => sha256_hex(format!("{}\0{}", source.kind, source.location.display()))[..16].to_string(),
    }
}

/// `VERSION.PATCHLEVEL` of a kernel tree's top Makefile.
fn release_line(tree: &Path) -> Option<String> {
    let text = std::fs::read_to_string(tree.join("Makefile")).ok()?;
    let field = |name: &str| {
        text.lines().take(20).find_map(|l| {
            let (key, value) = l.split_once('=')?;
            (key.trim() == name)
                .then(|| value.trim().to_string())
                .filter(|v| v.chars().all(|c| c.is_ascii_digit()) && !v.is_empty())
        })
    };
    Some(format!("{}.{}", field("VERSION")?, field("PATCHLEVEL")?))
}

pub(super) fn file_name(path: &str) -> String {
    Path::new(path).file_name().unwrap_or_default().to_string_lossy().into_owned()
}

pub(super) fn host() -> String {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    format!("{} ({cores} cores)", name.trim())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_of_one_release_line_share_a_location() {
        let ident = |kind: &str, at: &Path| Identity {
            kind: kind.into(),
            label: String::new(),
            id: kind.into(),
            location: at.to_path_buf(),
            git_head: None,
            git_dirty: None,
            package_version: None,
        };
        let (a, b, c) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        std::fs::write(a.path().join("Makefile"), "# SPDX\nVERSION = 6\nPATCHLEVEL = 12\nSUBLEVEL = 118\n").unwrap();
        std::fs::write(b.path().join("Makefile"), "VERSION = 6\nPATCHLEVEL = 12\nSUBLEVEL = 0\nEXTRAVERSION = -rc1\n")
            .unwrap();
        std::fs::write(c.path().join("Makefile"), "all:\n").unwrap();
        assert_eq!(location(&ident("debian-package", a.path()), a.path()), "linux-6.12");
        assert_eq!(location(&ident("git-tree", b.path()), b.path()), "linux-6.12");
        let own = location(&ident("tree", c.path()), c.path());
        assert_eq!(own.len(), 16, "a tree with no version has a folder of its own: {own}");
        assert_ne!(own, location(&ident("git-tree", c.path()), c.path()));
    }
}
