//! A build directory configured: tinyconfig, the fragments merged with `merge_config.sh`,
//! `olddefconfig` (skipped when no Kconfig input changed), and every requested option checked
//! against the `.config` it made.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result};
use sha2::{Digest, Sha256};

use super::make::{run_logged, Make};
use super::model::Job;
use crate::arch::Arch;
use crate::kernel::kconfig::{self, Fragment, Missing};
use crate::kernel::source;
use crate::support::exit::{error, Kind};
use crate::support::files::hex;
use crate::support::progress::Task;

/// What a build directory's configuration was made from: the source, the fragments' contents
/// and every Kconfig or Makefile file the patch set changed, with its content.
fn config_inputs(req: &Job, frag_paths: &[PathBuf], mirror: &Path, state_file: &Path) -> Result<String> {
    let mut h = Sha256::new();
    h.update(req.source.id.as_bytes());
    for v in req.knobs.key_fields(req.arch) {
        h.update(b"\0make-var\0");
        h.update(v.as_bytes());
    }
    for f in frag_paths {
        h.update(b"\0fragment\0");
        h.update(std::fs::read(f).with_context(|| format!("reading {}", f.display()))?);
    }
    let mut touched = source::patched_files(state_file);
    touched.sort();
    for rel in touched.iter().filter(|r| kconfig_input(r)) {
        h.update(b"\0patched\0");
        h.update(rel.as_bytes());
        h.update(b"\0");
        h.update(std::fs::read(mirror.join(rel)).unwrap_or_default());
    }
    Ok(hex(&h.finalize()))
}

/// Whether a source file can change what `make *config` produces.
fn kconfig_input(rel: &str) -> bool {
    let name = rel.rsplit('/').next().unwrap_or(rel);
    name.starts_with("Kconfig")
        || name.starts_with("Makefile")
        || name.starts_with("Kbuild")
        || name.ends_with(".config")
        || rel.starts_with("scripts/kconfig/")
}

/// The `.config` of the build directory from the fragments (tinyconfig, merge_config.sh,
/// olddefconfig), unless no Kconfig input changed since it was made; the make commands that
/// made it, and the requested options as set and as missed.
pub(super) fn configure(
    req: &Job,
    make: &Make,
    requested: &BTreeMap<String, kconfig::Request>,
    tree_dir: &Path,
    log: &mut std::fs::File,
) -> Result<Configured> {
    let (mirror, build_dir) = (make.srctree, make.out);
    let frag_paths = write_fragments(&build_dir.join("xtask-fragments"), req.fragments)?;
    let task = Task::start(format!("{}: configuring", req.arch.name));
    let config_path = build_dir.join(".config");
    let mut commands = vec![make.command_line(&["tinyconfig"])];
    // The configuration depends on the fragments, the source, and the Kconfig and Makefile
    // files a patch changes: when none of that changed since this directory was configured, its
    // .config stands (a one-file patch to a .c file skips tinyconfig, merge and olddefconfig).
    // The requested options are still checked, here and after the build.
    let inputs = config_inputs(req, &frag_paths, mirror, &tree_dir.join("state.json"))?;
    let stamp = build_dir.join("xtask-configured");
    let configured = config_path.is_file() && std::fs::read_to_string(&stamp).is_ok_and(|s| s == inputs);
    if configured {
        commands.push("(tinyconfig, merge_config.sh and olddefconfig skipped: no Kconfig input changed)".into());
    } else {
        let _ = std::fs::remove_file(&stamp);
        make.run(&["tinyconfig"], log, None)?;
        let merge = mirror.join("scripts/kconfig/merge_config.sh");
        let mut merge_cmd = Command::new("sh");
        merge_cmd.arg(&merge).arg("-m").arg("-O").arg(build_dir).arg(build_dir.join(".config"));
        merge_cmd.args(&frag_paths).current_dir(build_dir);
        commands.push(format!(
            "(cd {} && sh {} -m -O {} {}/.config {})",
            build_dir.display(),
            merge.display(),
            build_dir.display(),
            build_dir.display(),
            frag_paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(" ")
        ));
        run_logged(merge_cmd, log, None).context("merging config fragments with merge_config.sh")?;
        commands.push(make.command_line(&["olddefconfig"]));
        make.run(&["olddefconfig"], log, None)?;
        crate::support::files::write_atomic(&stamp, inputs.as_bytes())?;
    }
    let (effective, missing) = check_config(&config_path, requested, mirror, req.arch)?;
    let how = if configured { ", configuration reused" } else { "" };
    task.finish(format!("{} of {} requested options set{how}", requested.len() - missing.len(), requested.len()));
    Ok(Configured { commands, effective, missing })
}

/// A configured build directory: the make commands that configured it, and the requested
/// options as they are set and as they were missed.
pub(super) struct Configured {
    pub(super) commands: Vec<String>,
    pub(super) effective: BTreeMap<String, String>,
    pub(super) missing: Vec<Missing>,
}

pub(super) fn write_fragments(dir: &Path, fragments: &[Fragment]) -> Result<Vec<PathBuf>> {
    if dir.exists() {
        std::fs::remove_dir_all(dir)?;
    }
    std::fs::create_dir_all(dir)?;
    let mut paths = Vec::new();
    for (i, f) in fragments.iter().enumerate() {
        let path = dir.join(format!("{:02}-{}", i + 1, f.name));
        std::fs::write(&path, &f.text)?;
        paths.push(path);
    }
    Ok(paths)
}

type Checked = (BTreeMap<String, String>, Vec<Missing>);

pub(super) fn check_config(
    config_path: &Path,
    requested: &BTreeMap<String, kconfig::Request>,
    srctree: &Path,
    arch: &Arch,
) -> Result<Checked> {
    let text = std::fs::read_to_string(config_path).with_context(|| format!("reading {}", config_path.display()))?;
    let config = kconfig::parse_config(&text);
    let mut missing = kconfig::check(requested, &config);
    for m in &mut missing {
        m.why = Some(kconfig::explain(srctree, arch.linux_arch, &m.option, &config));
    }
    let effective =
        requested.keys().map(|k| (k.clone(), config.get(k).cloned().unwrap_or_else(|| "absent".into()))).collect();
    Ok((effective, missing))
}

pub(super) fn missing_error(arch: &Arch, when: &str, missing: &[Missing], config: &Path) -> anyhow::Error {
    let mut lines: Vec<String> = missing.iter().map(|m| format!("  - {m}")).collect();
    let pre_6_4 = missing
        .iter()
        .any(|m| m.option == "CONFIG_USER_EVENTS" && m.why.as_deref().is_some_and(|w| w.contains("BROKEN")));
    if pre_6_4 {
        lines.push(
            "verdict: this kernel predates the user_events ABI of 6.4 (there CONFIG_USER_EVENTS depends on BROKEN, \
             and the original status-page design it carries is not what the suites test): nothing to build or boot"
                .to_string(),
        );
    }
    error(
        Kind::CannotBuild,
        format!(
            "{}: {} requested option(s) did not survive {when} (final config: {}):\n{}",
            arch.name,
            missing.len(),
            config.display(),
            lines.join("\n")
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kconfig_inputs_are_recognised() {
        for yes in [
            "kernel/trace/Kconfig",
            "Makefile",
            "arch/x86/Makefile.um",
            "init/Kconfig.debug",
            "Kbuild",
            "arch/arm64/configs/defconfig.config",
            "scripts/kconfig/conf.c",
        ] {
            assert!(kconfig_input(yes), "{yes}");
        }
        for no in
            ["kernel/trace/trace_events_user.c", "include/linux/trace_events.h", "Documentation/Makefile.rst.txt/x"]
        {
            assert!(!kconfig_input(no), "{no}");
        }
    }
}
