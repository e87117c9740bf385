//! `matrix`: the GitHub Actions matrix of kernels x arches x profiles, one cell per job; each
//! cell carries the `cargo xtask run` flags that select it (see `docs/github-actions.yml`).

use std::path::Path;

use anyhow::Result;
use serde::Serialize;

use crate::kernel::debian::KernelVersion;
use crate::support::exit::{error, Kind};

/// One job of the matrix.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Cell {
    /// `<kernel>-<arch>-<profile>`: unique, fit for an artifact name.
    pub name: String,
    /// `debian`, the tarball's or tree's name, or `debian-<series>` for a `--kernel-version`.
    pub kernel: String,
    /// `--kernel-tarball F` / `--kernel-src DIR` / `--kernel-version X`, empty for Debian's source.
    pub kernel_args: String,
    pub arch: String,
    pub profile: String,
    /// `--profile NAME`, empty for `default`.
    pub profile_args: String,
}

/// A kernel spec: `debian`, a tarball (`*.tar`, `*.tar.*`, `*.tgz`) or a tree, as (label, flags).
fn kernel(spec: &str) -> Result<(String, String)> {
    if spec == "debian" {
        return Ok(("debian".into(), String::new()));
    }
    if spec.is_empty() || spec.contains(char::is_whitespace) {
        return Err(error(Kind::BadInput, format!("--kernel `{spec}`: empty or has spaces")));
    }
    let file = Path::new(spec).file_name().map_or(spec.to_string(), |n| n.to_string_lossy().into_owned());
    let tarball = [".tar", ".tar.gz", ".tar.xz", ".tar.bz2", ".tar.zst", ".tgz"]
        .iter()
        .find_map(|ext| file.strip_suffix(ext).map(String::from));
    Ok(match tarball {
        Some(stem) => (stem, format!("--kernel-tarball {spec}")),
        None => (file, format!("--kernel-src {spec}")),
    })
}

/// A Debian series given with `--kernel-version`, as (label, flags): `debian-7.3`.
fn version(v: &KernelVersion) -> (String, String) {
    let label = match &v.pin {
        None => format!("debian-{}", v.series),
        Some(pin) => format!("debian-{}", pin.replace(|c: char| !c.is_ascii_alphanumeric() && c != '.', "-")),
    };
    (label, format!("--kernel-version {v}"))
}

/// One kernel of a matrix or an atlas: its label, the `run` flags that select it, and those
/// flags as the source flags they set.
#[derive(Debug, Clone)]
pub struct KernelChoice {
    pub label: String,
    pub flags: String,
    pub source: super::SourceArgs,
}

/// Debian's source first, then each `--kernel` (a tarball or a tree; `debian` again is left
/// out), then each `--kernel-version`.
pub fn kernel_choices(kernels: &[String], versions: &[KernelVersion]) -> Result<Vec<KernelChoice>> {
    let mut out = vec![KernelChoice { label: "debian".into(), flags: String::new(), source: Default::default() }];
    for spec in kernels.iter().filter(|k| *k != "debian") {
        let (label, flags) = kernel(spec)?;
        let source = match flags.starts_with("--kernel-tarball") {
            true => super::SourceArgs { kernel_tarball: Some(spec.into()), ..Default::default() },
            false => super::SourceArgs { kernel_src: Some(spec.into()), ..Default::default() },
        };
        out.push(KernelChoice { label, flags, source });
    }
    for v in versions {
        let (label, flags) = version(v);
        out.push(KernelChoice {
            label,
            flags,
            source: super::SourceArgs { kernel_version: Some(v.clone()), ..Default::default() },
        });
    }
    Ok(out)
}

/// The matrix as `{"include": [cells]}`: Debian's source first, then each `--kernel`, then each
/// `--kernel-version`; every arch of `arch`; each profile (default: `default` and every
/// `kernel-configs/profiles/*.config` but `coverage`, `faults`, `kmemleak` and `kmsan`, which
/// `--profile NAME` asks for).
/// The profile of the fault-injection kernel (`kernel-configs/profiles/faults.config`).
const FAULTS: &str = "faults";
const KMEMLEAK: &str = "kmemleak";
/// x86_64 only, built with clang: asked for by name.
const KMSAN: &str = "kmsan";

pub fn cells(
    kernels: &[String],
    versions: &[KernelVersion],
    arch: &str,
    profiles: &[String],
    root: &Path,
) -> Result<Vec<Cell>> {
    let arches = crate::arch::select(arch).map_err(|e| error(Kind::BadInput, format!("--arch: {e}")))?;
    let dir = root.join("kernel-configs/profiles");
    let profiles: Vec<String> = if profiles.is_empty() {
        let mut found: Vec<String> = std::fs::read_dir(&dir)
            .map_err(|e| error(Kind::Infra, format!("{}: {e}", dir.display())))?
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.strip_suffix(".config").map(String::from))
            // A coverage kernel measures rather than gates, the kmemleak scenarios are measured
            // on x86_64 only so far, and the faults kernel (its suite passes on the four arches)
            // is one more kernel per arch; KMSAN is x86_64's and clang's: all asked for by name.
            .filter(|p| p != super::COVERAGE && p != FAULTS && p != KMEMLEAK && p != KMSAN)
            .collect();
        found.sort();
        std::iter::once("default".to_string()).chain(found).collect()
    } else {
        for p in profiles.iter().filter(|p| *p != "default") {
            if !dir.join(format!("{p}.config")).is_file() {
                return Err(error(
                    Kind::BadInput,
                    format!("--profile {p}: no {} (and not `default`)", dir.join(format!("{p}.config")).display()),
                ));
            }
        }
        profiles.to_vec()
    };
    let specs = kernel_choices(kernels, versions)?;
    let mut out = Vec::new();
    for KernelChoice { label, flags: kernel_args, .. } in specs {
        for a in &arches {
            for p in &profiles {
                let profile_args = if p == "default" { String::new() } else { format!("--profile {p}") };
                out.push(Cell {
                    name: format!("{label}-{}-{p}", a.name),
                    kernel: label.clone(),
                    kernel_args: kernel_args.clone(),
                    arch: a.name.to_string(),
                    profile: p.clone(),
                    profile_args,
                });
            }
        }
    }
    if let Some(dup) = out.iter().enumerate().find(|(i, c)| out[..*i].iter().any(|d| d.name == c.name)) {
        return Err(error(
            Kind::BadInput,
            format!("two --kernel/--kernel-version give the same cell name `{}`", dup.1.name),
        ));
    }
    Ok(out)
}

/// `cells` as the one-line JSON `strategy.matrix` takes (`fromJSON`).
pub fn matrix(
    kernels: &[String],
    versions: &[KernelVersion],
    arch: &str,
    profiles: &[String],
    root: &Path,
) -> Result<String> {
    let cells = cells(kernels, versions, arch, profiles, root)?;
    Ok(serde_json::json!({ "include": cells }).to_string())
}

/// `matrix --mutants-shards N`: one job per shard of a mutation campaign, each with its
/// `--shard K/N` and a name fit for an artifact (`mutants-2-of-4`).
pub fn mutants_shards(n: u32) -> String {
    let cells: Vec<serde_json::Value> = (1..=n)
        .map(|k| serde_json::json!({"shard": format!("{k}/{n}"), "name": format!("mutants-{k}-of-{n}")}))
        .collect();
    serde_json::json!({ "include": cells }).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root() -> std::path::PathBuf {
        crate::support::checkout::project_root()
    }

    /// The workflow `matrix` targets uses only actions that run on node24 (actionlint checks
    /// the rest in `cargo xtask test`), and a cell caches its finished kernels, not the whole
    /// cache with the source tree and build directories.
    #[test]
    fn the_workflow_runs_on_node24_and_caches_kernels_only() {
        let text = std::fs::read_to_string(root().join("docs/github-actions.yml")).unwrap();
        // The first majors on node24.
        let node24 = [("checkout", 5), ("cache", 5), ("upload-artifact", 6), ("download-artifact", 7)];
        let mut used = 0;
        for line in text.lines().filter_map(|l| l.trim().strip_prefix("- uses: actions/")) {
            let (name, major) = line.split_once("@v").unwrap_or_else(|| panic!("{line}: no major"));
            let major: u32 = major.parse().unwrap_or_else(|_| panic!("{line}: not a major"));
            let (_, first) = node24.iter().find(|(n, _)| *n == name).unwrap_or_else(|| panic!("{line}: unknown"));
            assert!(major >= *first, "actions/{line} runs on node20");
            used += 1;
        }
        assert!(used >= 7, "{used} actions found");
        let cached: Vec<&str> = text.lines().filter_map(|l| l.trim().strip_prefix("path: ~/.cache/")).collect();
        assert_eq!(cached, ["user-events-conformance/kernels/${{ matrix.arch }}"]);
    }

    #[test]
    fn debian_times_arches_times_profiles_by_default() {
        let cells = cells(&[], &[], "all", &[], &root()).unwrap();
        let names: Vec<&str> = cells.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "debian-x86_64-default",
                "debian-x86_64-debug",
                "debian-arm64-default",
                "debian-arm64-debug",
                "debian-s390x-default",
                "debian-s390x-debug",
                "debian-riscv64-default",
                "debian-riscv64-debug"
            ]
        );
        assert_eq!(cells[1].profile_args, "--profile debug");
        assert_eq!(cells[0].profile_args, "");
        assert_eq!(cells[0].kernel_args, "");
    }

    #[test]
    fn given_kernels_are_tarballs_or_trees() {
        let kernels = vec!["dl/linux-6.13.tar.xz".to_string(), "/src/linux".to_string()];
        let cells = cells(&kernels, &[], "arm64", &["default".to_string()], &root()).unwrap();
        let got: Vec<(&str, &str)> = cells.iter().map(|c| (c.name.as_str(), c.kernel_args.as_str())).collect();
        assert_eq!(
            got,
            [
                ("debian-arm64-default", ""),
                ("linux-6.13-arm64-default", "--kernel-tarball dl/linux-6.13.tar.xz"),
                ("linux-arm64-default", "--kernel-src /src/linux"),
            ]
        );
        let json: serde_json::Value =
            serde_json::from_str(&matrix(&kernels, &[], "arm64", &[], &root()).unwrap()).unwrap();
        assert_eq!(json["include"].as_array().unwrap().len(), 6);
        assert_eq!(json["include"][0]["arch"], "arm64");
    }

    #[test]
    fn debian_versions_are_cells_running_kernel_version() {
        let v = |t: &str| crate::kernel::debian::parse_kernel_version(t).unwrap();
        let versions = [v("7.3"), v("7.2=7.2.13-1")];
        let cells = cells(&[], &versions, "x86_64", &["default".to_string()], &root()).unwrap();
        let got: Vec<(&str, &str)> = cells.iter().map(|c| (c.name.as_str(), c.kernel_args.as_str())).collect();
        assert_eq!(
            got,
            [
                ("debian-x86_64-default", ""),
                ("debian-7.3-x86_64-default", "--kernel-version 7.3"),
                ("debian-7.2.13-1-x86_64-default", "--kernel-version 7.2=7.2.13-1"),
            ]
        );
        let e = super::cells(&[], &[v("7.3"), v("7.3")], "x86_64", &[], &root()).unwrap_err();
        assert!(e.to_string().contains("debian-7.3-x86_64-default"), "{e}");
    }

    #[test]
    fn mutants_shards_are_one_job_each() {
        assert_eq!(
            mutants_shards(3),
            r#"{"include":[{"name":"mutants-1-of-3","shard":"1/3"},{"name":"mutants-2-of-3","shard":"2/3"},{"name":"mutants-3-of-3","shard":"3/3"}]}"#
        );
        for cell in
            serde_json::from_str::<serde_json::Value>(&mutants_shards(5)).unwrap()["include"].as_array().unwrap()
        {
            assert!(cell["shard"].as_str().unwrap().parse::<crate::mutants::select::Shard>().is_ok());
        }
    }

    #[test]
    fn bad_input_is_exit_2() {
        let e = cells(&[], &[], "all", &["nosuch".to_string()], &root()).unwrap_err();
        assert_eq!(crate::support::exit::code_for(&e), 128);
        assert!(e.to_string().contains("nosuch.config"), "{e}");
        let e = cells(&[], &[], "sparc", &[], &root()).unwrap_err();
        assert_eq!(crate::support::exit::code_for(&e), 128);
        let e = cells(&["a/linux.tar.xz".into(), "b/linux.tar.gz".into()], &[], "x86_64", &[], &root()).unwrap_err();
        assert!(e.to_string().contains("linux-x86_64-default"), "{e}");
    }
}
