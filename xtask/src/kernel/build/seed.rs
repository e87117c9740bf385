//! A new build directory seeded from a finished one of another profile: same arch, source line
//! and compiler, its fragments a subset of the new one's. Kbuild then rebuilds only what the
//! configuration change reaches (each object depends on the options it reads, not on the whole
//! `.config`), as it does for a kernel engineer who turns an option on in a built tree.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use anyhow::{Context, Result};

use crate::kernel::kconfig::{self, Fragment};
use crate::kernel::source::contents_of;
use crate::support::cmd::{cmd, sh, stdout};

/// The fragment folder every build directory keeps (`configure::write_fragments`).
const FRAGMENTS: &str = "xtask-fragments";

/// Copies the closest finished sibling of `build_dir` into it (everything but its `.config`,
/// its stamps and its log), when `build_dir` has no kernel built yet; says which one, or
/// `None`. A `.config` already there (`--config-only` made it) goes first: the configuration is
/// made again over the sibling's, whatever their ages, so kbuild compares the two.
pub(super) fn seed(build_dir: &Path, fragments: &[Fragment], compiler: &str) -> Result<Option<PathBuf>> {
    if build_dir.join("vmlinux").exists() {
        return Ok(None);
    }
    let Some(sibling) = closest(build_dir, fragments, compiler) else { return Ok(None) };
    for stale in [".config", "xtask-configured"] {
        match std::fs::remove_file(build_dir.join(stale)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e.into()),
            _ => {}
        }
    }
    // A sibling being built is waited for: its objects are copied whole or not at all.
    let _reading = crate::support::files::Lock::acquire(&sibling.join("xtask-lock"))?;
    let sh = sh()?;
    let (from, to) = (contents_of(&sibling), contents_of(build_dir));
    let excludes = ["--exclude=/.config", "--exclude=/xtask-*", "--exclude=/build.log"];
    stdout(cmd!(sh, "rsync -a {excludes...} {from} {to}"))
        .with_context(|| format!("seeding {} from {}", build_dir.display(), sibling.display()))?;
    Ok(Some(sibling))
}

/// The finished build directory of the same arch, source line and compiler (the name's prefix
/// and `CONFIG_CC_VERSION_TEXT`) whose fragments are the most of `fragments` and no other;
/// the newest among equals.
fn closest(build_dir: &Path, fragments: &[Fragment], compiler: &str) -> Option<PathBuf> {
    let name = build_dir.file_name()?.to_str()?;
    let prefix = &name[..name.rfind('-')? + 1];
    let wanted: BTreeSet<&str> =
        fragments.iter().map(|f| f.name.as_str()).filter(|n| *n != kconfig::CLI_FRAGMENT).collect();
    let mut best: Option<(usize, SystemTime, PathBuf)> = None;
    for entry in std::fs::read_dir(build_dir.parent()?).ok()?.flatten() {
        let path = entry.path();
        let sibling = entry.file_name().to_string_lossy().into_owned();
        if path == build_dir || !sibling.starts_with(prefix) || !same_compiler(&path, compiler) {
            continue;
        }
        let Ok(built) = std::fs::metadata(path.join("vmlinux")).and_then(|m| m.modified()) else { continue };
        let Some(has) = fragment_names(&path) else { continue };
        if !has.iter().all(|n| wanted.contains(n.as_str())) {
            continue;
        }
        let better = best.as_ref().is_none_or(|(n, t, _)| (has.len(), built) > (*n, *t));
        if better {
            best = Some((has.len(), built, path));
        }
    }
    best.map(|(_, _, p)| p)
}

/// The names of the fragments a build directory was configured with (`01-common.config` is
/// `common.config`), the command line's left out.
fn fragment_names(dir: &Path) -> Option<BTreeSet<String>> {
    let names = std::fs::read_dir(dir.join(FRAGMENTS)).ok()?.flatten().filter_map(|e| {
        let file = e.file_name().to_string_lossy().into_owned();
        file.split_once('-').map(|(_, name)| name.to_string())
    });
    Some(names.filter(|n| n != kconfig::CLI_FRAGMENT).collect())
}

/// Whether a build directory's `.config` was made by `compiler` (`gcc --version`'s first line).
fn same_compiler(dir: &Path, compiler: &str) -> bool {
    let Ok(config) = std::fs::read_to_string(dir.join(".config")) else { return false };
    config
        .lines()
        .find_map(|l| l.strip_prefix("CONFIG_CC_VERSION_TEXT="))
        .is_some_and(|v| v.trim_matches('"') == compiler)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(root: &Path, name: &str, fragments: &[&str], cc: &str, built: bool) -> PathBuf {
        let d = root.join(name);
        std::fs::create_dir_all(d.join(FRAGMENTS)).unwrap();
        for (i, f) in fragments.iter().enumerate() {
            std::fs::write(d.join(FRAGMENTS).join(format!("{:02}-{f}", i + 1)), "").unwrap();
        }
        std::fs::write(d.join(".config"), format!("CONFIG_CC_VERSION_TEXT=\"{cc}\"\nCONFIG_A=y\n")).unwrap();
        if built {
            std::fs::write(d.join("vmlinux"), "elf").unwrap();
            std::fs::create_dir_all(d.join("kernel")).unwrap();
            std::fs::write(d.join("kernel/a.o"), name).unwrap();
        }
        std::fs::write(d.join("xtask-configured"), "stamp").unwrap();
        d
    }

    fn frags(names: &[&str]) -> Vec<Fragment> {
        names.iter().map(|n| Fragment { name: n.to_string(), text: String::new() }).collect()
    }

    #[test]
    fn the_closest_finished_sibling_of_the_same_line_and_compiler_is_copied_but_its_config() {
        let root = tempfile::tempdir().unwrap();
        let cc = "gcc (Debian 12.2.0-14) 12.2.0";
        dir(root.path(), "x86_64-linux-6.12-aaaa", &["common.config", "x86_64.config"], cc, true);
        dir(root.path(), "x86_64-linux-6.12-bbbb", &["common.config", "x86_64.config", "faults.config"], cc, true);
        dir(root.path(), "x86_64-linux-6.12-cccc", &["common.config", "x86_64.config", "debug.config"], cc, true);
        dir(root.path(), "x86_64-linux-6.12-dddd", &["common.config", "x86_64.config", "faults.config"], "clang", true);
        dir(root.path(), "x86_64-linux-7.3-eeee", &["common.config", "x86_64.config", "faults.config"], cc, true);
        dir(root.path(), "arm64-linux-6.12-ffff", &["common.config", "arm64.config", "faults.config"], cc, true);
        let new = root.path().join("x86_64-linux-6.12-ffff");
        std::fs::create_dir_all(&new).unwrap();
        let wanted =
            frags(&["common.config", "x86_64.config", "faults.config", "coverage.config", kconfig::CLI_FRAGMENT]);
        let seeded = seed(&new, &wanted, cc).unwrap().unwrap();
        assert!(seeded.ends_with("x86_64-linux-6.12-bbbb"), "the faults sibling, not the default one: {seeded:?}");
        assert_eq!(std::fs::read_to_string(new.join("kernel/a.o")).unwrap(), "x86_64-linux-6.12-bbbb");
        assert!(!new.join(".config").exists() && !new.join("xtask-configured").exists(), "configured afresh");
        std::fs::write(new.join("vmlinux"), "").unwrap();
        assert_eq!(seed(&new, &wanted, cc).unwrap(), None, "a directory with a kernel is not seeded again");

        // A directory `--config-only` configured: seeded, its configuration made again.
        let debug = root.path().join("x86_64-linux-6.12-9999");
        std::fs::create_dir_all(&debug).unwrap();
        std::fs::write(debug.join(".config"), "CONFIG_KASAN=y\n").unwrap();
        std::fs::write(debug.join("xtask-configured"), "stamp").unwrap();
        let seeded = seed(&debug, &frags(&["common.config", "x86_64.config", "debug.config"]), cc).unwrap();
        assert!(seeded.unwrap().ends_with("x86_64-linux-6.12-cccc"), "its own profile's, when there is one");
        assert!(!debug.join(".config").exists() && !debug.join("xtask-configured").exists(), "configured again");
        let other = root.path().join("x86_64-linux-6.12-8888");
        std::fs::create_dir_all(&other).unwrap();
        assert_eq!(seed(&other, &frags(&["kmsan.config"]), cc).unwrap(), None, "no sibling a subset of its fragments");
        let unbuilt = root.path().join("riscv64-linux-6.12-7777");
        dir(root.path(), "riscv64-linux-6.12-6666", &["common.config"], cc, false);
        std::fs::create_dir_all(&unbuilt).unwrap();
        assert_eq!(seed(&unbuilt, &frags(&["common.config"]), cc).unwrap(), None, "an unfinished sibling is no seed");
    }
}
