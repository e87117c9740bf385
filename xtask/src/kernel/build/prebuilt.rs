//! A kernel the user built (`--kernel-image`): no build, but its arch and its configuration
//! checked against what the suites need.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Result;

use super::model::{file_name, host, Built, Compiler, ConfigRecord, Metadata, METADATA_SCHEMA};
use crate::arch::Arch;
use crate::kernel::kconfig::{self, Fragment};
use crate::kernel::source::Identity;
use crate::support::exit::{error, Kind};
use crate::support::progress;

/// A kernel the user built (`--kernel-image`): no build, but its arch and its configuration
/// are checked against what the suites need.
pub fn prebuilt(
    arch: &'static Arch,
    image: &Path,
    config: Option<&Path>,
    fragments: &[Fragment],
    srctree: Option<&Path>,
) -> Result<Built> {
    let bad = |msg: String| error(Kind::BadInput, msg);
    let bytes = std::fs::read(image).map_err(|e| bad(format!("--kernel-image {}: {e}", image.display())))?;
    match crate::kernel::image::arch(&bytes) {
        Some(found) if found == arch.name => {}
        Some(found) => {
            return Err(bad(format!("--kernel-image {} is an {found} kernel, not {}", image.display(), arch.name)))
        }
        None => {
            return Err(bad(format!(
                "--kernel-image {}: not a bootable {} image (expected {}, uncompressed)",
                image.display(),
                arch.name,
                arch.image_path
            )))
        }
    }
    let config_path = match config {
        Some(c) => c.to_path_buf(),
        None => {
            let beside = image.parent().unwrap_or(Path::new(".")).join(".config");
            // An image inside a build tree (arch/*/boot/) has its .config at the tree's top.
            let top = image.ancestors().nth(4).map(|t| t.join(".config"));
            [Some(beside), top].into_iter().flatten().find(|p| p.is_file()).ok_or_else(|| {
                bad(format!("--kernel-image {}: no .config beside it; pass --kernel-config FILE", image.display()))
            })?
        }
    };
    let text = std::fs::read_to_string(&config_path)
        .map_err(|e| bad(format!("--kernel-config {}: {e}", config_path.display())))?;
    let parsed = kconfig::parse_config(&text);
    let mut requested = kconfig::merged_requests(fragments)?;
    requested.retain(|option, _| !kconfig::BUILD_CHOICES.contains(&option.as_str()));
    let mut missing = kconfig::check(&requested, &parsed);
    for m in &mut missing {
        m.why = Some(match srctree {
            Some(src) => kconfig::explain(src, arch.linux_arch, &m.option, &parsed),
            None => "pass --kernel-src to see its unmet dependencies".into(),
        });
    }
    if !missing.is_empty() {
        let lines: Vec<String> = missing.iter().map(|m| format!("  - {m}")).collect();
        return Err(bad(format!(
            "--kernel-image {}: its config {} lacks {} option(s) the suites need:\n{}",
            image.display(),
            config_path.display(),
            missing.len(),
            lines.join("\n")
        )));
    }
    let image = image.canonicalize()?;
    let sha = crate::support::files::sha256_file(&image)?;
    let metadata = Metadata {
        schema: METADATA_SCHEMA,
        arch: arch.name.to_string(),
        key: sha.clone(),
        source: Identity {
            kind: "prebuilt".into(),
            label: format!("prebuilt image {}", image.display()),
            id: sha,
            location: image.clone(),
            git_head: None,
            git_dirty: None,
            package_version: None,
        },
        patches: vec![],
        kernelrelease: crate::kernel::image::release(&bytes).unwrap_or_else(|| "unknown".into()),
        compiler: Compiler { command: "unknown".into(), version: "unknown".into() },
        config: ConfigRecord {
            sha256: crate::support::files::sha256_file(&config_path)?,
            fragments: fragments.iter().map(|f| f.name.clone()).collect(),
            requested: requested.iter().map(|(k, r)| (k.clone(), r.value.clone())).collect(),
            effective: requested
                .keys()
                .map(|k| (k.clone(), parsed.get(k).cloned().unwrap_or_else(|| "absent".into())))
                .collect(),
            missing: vec![],
        },
        make_commands: vec![],
        durations: BTreeMap::new(),
        built_at: String::new(),
        host: host(),
        image: file_name(&image.display().to_string()),
        gcov_files: vec![],
        make_vars: vec![],
    };
    progress::line(format!("{}: using prebuilt {} ({})", arch.name, image.display(), metadata.kernelrelease));
    Ok(Built { arch, image, config: config_path, metadata, cache_hit: true, source: None })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prebuilt_checks_arch_and_config() {
        let dir = tempfile::tempdir().unwrap();
        let image = dir.path().join("bzImage");
        std::fs::write(&image, crate::kernel::image::tests::x86_header("6.12.0")).unwrap();
        let frags = [
            Fragment { name: "common.config".into(), text: "CONFIG_USER_EVENTS=y\n".into() },
            // A build choice: a user's image compressed otherwise is accepted.
            Fragment { name: "x86_64.config".into(), text: "CONFIG_KERNEL_LZ4=y\n".into() },
        ];
        let x86 = crate::arch::select("x86_64").unwrap()[0];
        let arm = crate::arch::select("arm64").unwrap()[0];

        let err = prebuilt(x86, &image, None, &frags, None).unwrap_err().to_string();
        assert!(err.contains("no .config beside it"), "{err}");
        std::fs::write(dir.path().join(".config"), "# CONFIG_USER_EVENTS is not set\n").unwrap();
        let err = prebuilt(x86, &image, None, &frags, None).unwrap_err().to_string();
        assert!(err.contains("CONFIG_USER_EVENTS: asked for `y`"), "{err}");
        let err = prebuilt(arm, &image, None, &frags, None).unwrap_err().to_string();
        assert!(err.contains("is an x86_64 kernel, not arm64"), "{err}");

        std::fs::write(dir.path().join(".config"), "CONFIG_USER_EVENTS=y\nCONFIG_KERNEL_GZIP=y\n").unwrap();
        let built = prebuilt(x86, &image, None, &frags, None).unwrap();
        assert_eq!(built.metadata.kernelrelease, "6.12.0");
        assert_eq!(built.metadata.config.effective["CONFIG_USER_EVENTS"], "y");
    }
}
