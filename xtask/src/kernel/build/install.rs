//! A finished build into the cache: its image, `.config`, symbols, log, fragments, patches,
//! GCOV notes and a `reproducer.sh` installed atomically with its `metadata.json`, and read
//! back.

use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result};

use super::configure::write_fragments;
use super::model::{file_name, Built, Job, Metadata};
use crate::arch::Arch;
use crate::kernel::knobs::shell_line;

/// Copies the build's outputs and provenance into the store directory, atomically.
pub(super) fn install(
    store: &Path,
    (build_dir, mirror, pristine): (&Path, &Path, &Path),
    metadata: &mut Metadata,
    req: &Job,
    started: Instant,
) -> Result<()> {
    let parent = store.parent().context("store has no parent")?;
    std::fs::create_dir_all(parent)?;
    let tmp = tempfile::Builder::new().prefix(".install-").tempdir_in(parent)?;
    let arch = req.arch;
    let copy = |from: &Path, to: &str| -> Result<()> {
        std::fs::copy(from, tmp.path().join(to)).with_context(|| format!("copying {}", from.display()))?;
        Ok(())
    };
    copy(&build_dir.join(arch.image_path), &metadata.image)?;
    copy(&build_dir.join(".config"), "config")?;
    copy(&build_dir.join("System.map"), "System.map")?;
    copy(&build_dir.join("vmlinux"), "vmlinux")?;
    copy(&build_dir.join("build.log"), "build.log")?;
    crate::kernel::gcov::keep(tmp.path(), build_dir, (mirror, pristine), req.gcov_files)?;
    let frag_dir = tmp.path().join("fragments");
    write_fragments(&frag_dir, req.fragments)?;
    std::fs::create_dir_all(tmp.path().join("patches"))?;
    for (i, p) in req.patches.iter().enumerate() {
        let name = format!("{:02}-{}", i + 1, file_name(&p.path.display().to_string()));
        std::fs::copy(&p.path, tmp.path().join("patches").join(name))?;
    }
    std::fs::write(tmp.path().join("reproducer.sh"), reproducer(metadata, arch))?;
    set_executable(&tmp.path().join("reproducer.sh"))?;
    metadata.durations.insert("install".to_string(), started.elapsed().as_secs_f64());
    std::fs::write(tmp.path().join("metadata.json"), serde_json::to_vec_pretty(metadata)?)?;
    if store.exists() {
        std::fs::remove_dir_all(store)?;
    }
    let kept = tmp.keep();
    std::fs::rename(&kept, store).with_context(|| format!("installing into {}", store.display()))?;
    Ok(())
}

fn set_executable(path: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))?;
    Ok(())
}

/// Reads a stored build back; `None` when the store has no complete entry.
pub(super) fn load(arch: &'static Arch, store: &Path) -> Result<Option<Built>> {
    let Ok(bytes) = std::fs::read(store.join("metadata.json")) else {
        return Ok(None);
    };
    let metadata: Metadata =
        serde_json::from_slice(&bytes).with_context(|| format!("reading {}", store.join("metadata.json").display()))?;
    let image = store.join(&metadata.image);
    if !image.is_file() {
        return Ok(None);
    }
    Ok(Some(Built { arch, image, config: store.join("config"), metadata, cache_hit: true, source: None }))
}

/// A shell script that rebuilds the same kernel by hand from the files stored beside it.
pub fn reproducer(m: &Metadata, arch: &Arch) -> String {
    let knobs = if m.make_vars.is_empty() { arch.make_vars() } else { m.make_vars.clone() };
    let vars = shell_line(&[knobs, crate::kernel::gcov::make_vars(&m.gcov_files)].concat());
    let mut s = String::new();
    s.push_str("#!/bin/sh\n");
    s.push_str(&format!(
        "# Rebuilds the {} kernel {} ({}) by hand, as `cargo xtask kernel` did.\n",
        m.arch, m.kernelrelease, m.source.label
    ));
    s.push_str("# Usage: sh reproducer.sh [WORKDIR]   (default: ./rebuild)\nset -eu\n");
    s.push_str("here=$(cd \"$(dirname \"$0\")\" && pwd)\nwork=${1:-$PWD/rebuild}\n");
    s.push_str(&format!("src=\"$work/src\"\nout=\"$work/build-{}\"\nmkdir -p \"$src\" \"$out\"\n", m.arch));
    match m.source.kind.as_str() {
        "debian-package" | "tarball" => {
            s.push_str(&format!(
                "# Source: {} (sha256 {}).\ntar -xf {} -C \"$src\" --strip-components=1\n",
                m.source.label,
                m.source.id,
                m.source.location.display()
            ));
        }
        _ => {
            if let Some(head) = &m.source.git_head {
                s.push_str(&format!("# Source: {} (commit {head}).\n", m.source.label));
            }
            if m.source.git_dirty == Some(true) {
                s.push_str("# The tree had uncommitted changes when it was built: they are copied as they are now.\n");
            }
            s.push_str(&format!("rsync -a --exclude=/.git {}/ \"$src\"/\n", m.source.location.display()));
        }
    }
    if !m.patches.is_empty() {
        s.push_str("for p in \"$here\"/patches/*; do patch -d \"$src\" -p1 --batch --forward < \"$p\"; done\n");
    }
    s.push_str(&format!("make -C \"$src\" O=\"$out\" {vars} tinyconfig\n"));
    s.push_str("(cd \"$out\" && sh \"$src\"/scripts/kconfig/merge_config.sh -m -O \"$out\" \"$out/.config\" \"$here\"/fragments/*)\n");
    s.push_str(&format!("make -C \"$src\" O=\"$out\" {vars} olddefconfig\n"));
    s.push_str(&format!("make -C \"$src\" O=\"$out\" {vars} -j\"$(nproc)\" {}\n", arch.image_target));
    s.push_str("if cmp -s \"$out/.config\" \"$here/config\"; then echo \"same .config as the cached build\"; else echo \".config differs from the cached build\" >&2; exit 1; fi\n");
    s.push_str(&format!("echo \"image: $out/{}\"\n", arch.image_path));
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::build::{Compiler, ConfigRecord};
    use crate::kernel::knobs::Knobs;
    use crate::kernel::source::{Identity, Patch};
    use std::collections::BTreeMap;

    #[test]
    fn reproducer_rebuilds_from_stored_files() {
        let arm = crate::arch::select("arm64").unwrap()[0];
        let m = Metadata {
            schema: 1,
            arch: "arm64".into(),
            key: "k".into(),
            source: Identity {
                kind: "debian-package".into(),
                label: "Debian linux-source-6.12".into(),
                id: "abc".into(),
                location: "/usr/src/linux-source-6.12.tar.xz".into(),
                git_head: None,
                git_dirty: None,
                package_version: None,
            },
            patches: vec![Patch { path: "/p/fix.patch".into(), sha256: "00".into() }],
            kernelrelease: "6.12.117".into(),
            compiler: Compiler { command: "aarch64-linux-gnu-gcc".into(), version: "12".into() },
            config: ConfigRecord {
                sha256: String::new(),
                fragments: vec![],
                requested: BTreeMap::new(),
                effective: BTreeMap::new(),
                missing: vec![],
            },
            make_commands: vec![],
            durations: BTreeMap::new(),
            built_at: String::new(),
            host: String::new(),
            image: "Image".into(),
            gcov_files: vec![],
            make_vars: vec![],
        };
        let s = reproducer(&m, arm);
        assert!(s.contains("tar -xf /usr/src/linux-source-6.12.tar.xz"), "{s}");
        assert!(s.contains("patch -d \"$src\" -p1"), "{s}");
        assert!(s.contains("ARCH=arm64 CROSS_COMPILE=aarch64-linux-gnu- -j\"$(nproc)\" Image"), "{s}");
        assert!(s.contains("merge_config.sh -m"), "{s}");
        // A build with knobs rebuilds with its recorded make variables, quoted for the shell.
        let knobs = Knobs { llvm: true, make_args: vec![("KCFLAGS".into(), "-O2 -g".into())], ..Knobs::default() };
        let s = reproducer(&Metadata { make_vars: knobs.make_vars(arm), ..m }, arm);
        assert!(s.contains("CROSS_COMPILE=aarch64-linux-gnu- LLVM=1 'KCFLAGS=-O2 -g' -j\"$(nproc)\" Image"), "{s}");
    }
}
