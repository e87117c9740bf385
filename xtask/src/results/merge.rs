//! `merge`: per-job result folders (one CI matrix cell each) folded into one run folder whose
//! reports come from the same `collect` and renderers as any run. Each job's boot folders are
//! copied in under their arch's name; when two jobs bring the same arch (another profile or
//! kernel), each copy is named `<arch>-<cell>`, the cell being the profiles it was configured
//! with (`default` for none), then the kernel release, then a number, whichever first tells
//! them apart. `merged-from.json` records where every folder came from.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::Serialize;
use serde_json::Value;

use crate::judging::run_folder::{self, BootDir};
use crate::support::exit::{error, Kind};

/// One job's arch as found: the run folder, the arch, its boot folders (`x86_64`,
/// `x86_64.isolated-1`) and what tells it apart from the same arch of another job.
#[derive(Debug, Clone)]
struct Part {
    run_dir: PathBuf,
    arch: String,
    dirs: Vec<String>,
    profile: String,
    release: String,
}

#[derive(Debug, Serialize)]
struct Origin {
    /// The folder in the merged run.
    folder: String,
    arch: String,
    profile: String,
    kernel_release: String,
    /// The job's run folder it was copied from.
    from: String,
}

/// Every run folder under `dir` (itself, or below it, at most three levels down); links and
/// folders named `latest` are skipped, so `results/` with its `latest` link counts once.
pub fn find_runs(dir: &Path) -> Result<Vec<PathBuf>> {
    let meta = std::fs::metadata(dir).map_err(|e| error(Kind::BadInput, format!("{}: {e}", dir.display())))?;
    if !meta.is_dir() {
        return Err(error(Kind::BadInput, format!("{}: not a folder (merge takes result folders)", dir.display())));
    }
    let mut out = Vec::new();
    walk(dir, 0, &mut out);
    out.sort();
    if out.is_empty() {
        return Err(error(
            Kind::BadInput,
            format!("{}: no run folder in it (a folder with <arch>/verdict.json)", dir.display()),
        ));
    }
    Ok(out)
}

fn walk(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else { return };
    let subdirs: Vec<PathBuf> = rd
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()) && e.file_name() != run_folder::LATEST)
        .map(|e| e.path())
        .collect();
    if subdirs.iter().any(|d| d.join(run_folder::VERDICT).is_file()) {
        out.push(dir.to_path_buf());
    } else if depth < 3 {
        for d in subdirs {
            walk(&d, depth + 1, out);
        }
    }
}

/// The boot and skipped-only folders of a run folder, grouped by arch.
fn parts_of(run_dir: &Path) -> Result<Vec<Part>> {
    let mut by_arch: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for e in std::fs::read_dir(run_dir).with_context(|| format!("reading {}", run_dir.display()))?.flatten() {
        if !e.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let name = e.file_name().to_string_lossy().into_owned();
        let p = e.path();
        if !p.join(run_folder::VERDICT).is_file() && !p.join(run_folder::SKIPPED).is_file() {
            continue;
        }
        let Some(arch) = BootDir::parse(&name).map(|(a, _)| a.to_string()) else { continue };
        by_arch.entry(arch).or_default().push(name);
    }
    let mut parts = Vec::new();
    for (arch, mut dirs) in by_arch {
        dirs.sort();
        let (profile, release) = cell_of(run_dir, &arch, &dirs)?;
        parts.push(Part { run_dir: run_dir.to_path_buf(), arch, dirs, profile, release });
    }
    Ok(parts)
}

/// The profiles and kernel release of an arch from its boots' `kernel-metadata.json`.
fn cell_of(run_dir: &Path, arch: &str, dirs: &[String]) -> Result<(String, String)> {
    for d in dirs {
        let file = run_dir.join(d).join(run_folder::KERNEL_METADATA);
        let Ok(bytes) = std::fs::read(&file) else { continue };
        let v: Value = serde_json::from_slice(&bytes)
            .map_err(|e| error(Kind::BadInput, format!("{}:{}:{}: {e}", file.display(), e.line(), e.column())))?;
        let fragments = v.pointer("/config/fragments").and_then(Value::as_array).ok_or_else(|| {
            error(Kind::BadInput, format!("{}: field `config.fragments` is missing or not a list", file.display()))
        })?;
        let own = format!("{arch}.config");
        let profiles: Vec<&str> = fragments
            .iter()
            .filter_map(Value::as_str)
            .filter(|f| *f != "common.config" && *f != own)
            .map(|f| f.strip_suffix(".config").unwrap_or(f))
            .collect();
        let profile = if profiles.is_empty() { "default".to_string() } else { profiles.join("+") };
        let release = v.get("kernelrelease").and_then(Value::as_str).unwrap_or("unknown").to_string();
        return Ok((profile, release));
    }
    Ok(("default".to_string(), "unknown".to_string()))
}

/// The folder name of each part in the merged run (see the module doc).
fn labels(parts: &[Part]) -> Vec<String> {
    let count = |f: &dyn Fn(&Part) -> String, p: &Part| parts.iter().filter(|q| f(q) == f(p)).count();
    let by_arch = |p: &Part| p.arch.clone();
    let by_profile = |p: &Part| format!("{}-{}", p.arch, p.profile);
    let by_release = |p: &Part| format!("{}-{}-{}", p.arch, p.profile, p.release);
    let mut out: Vec<String> = parts
        .iter()
        .map(|p| {
            if count(&by_arch, p) == 1 {
                by_arch(p)
            } else if count(&by_profile, p) == 1 {
                by_profile(p)
            } else {
                by_release(p)
            }
        })
        .collect();
    // Still equal (the same cell twice): number them in input order.
    for i in 0..out.len() {
        let same: Vec<usize> = (0..out.len()).filter(|j| out[*j] == out[i]).collect();
        if same.len() > 1 {
            for (n, j) in same.into_iter().enumerate() {
                out[j] = format!("{}-{}", out[j], n + 1);
            }
        }
    }
    out
}

fn copy_dir(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to).with_context(|| format!("creating {}", to.display()))?;
    for e in std::fs::read_dir(from).with_context(|| format!("reading {}", from.display()))?.flatten() {
        let (src, dst) = (e.path(), to.join(e.file_name()));
        let t = e.file_type()?;
        if t.is_dir() {
            copy_dir(&src, &dst)?;
        } else if t.is_file() {
            std::fs::copy(&src, &dst).with_context(|| format!("copying {} to {}", src.display(), dst.display()))?;
        }
    }
    Ok(())
}

/// Folds the run folders found under `inputs` into `out` (a new, empty run folder) and writes
/// every report there. Returns the merged run.
pub fn merge(inputs: &[PathBuf], out: &Path) -> Result<super::model::Run> {
    if inputs.is_empty() {
        return Err(error(Kind::BadInput, "merge needs at least one result folder"));
    }
    let mut parts = Vec::new();
    for dir in inputs {
        for run in find_runs(dir)? {
            parts.extend(parts_of(&run)?);
        }
    }
    if out.exists() && std::fs::read_dir(out).map(|mut d| d.next().is_some()).unwrap_or(true) {
        return Err(error(Kind::BadInput, format!("--out {}: exists and is not empty", out.display())));
    }
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let mut origins = Vec::new();
    for (part, label) in parts.iter().zip(labels(&parts)) {
        for d in &part.dirs {
            let suffix = &d[part.arch.len()..];
            copy_dir(&part.run_dir.join(d), &out.join(format!("{label}{suffix}")))?;
        }
        origins.push(Origin {
            folder: label,
            arch: part.arch.clone(),
            profile: part.profile.clone(),
            kernel_release: part.release.clone(),
            from: part.run_dir.display().to_string(),
        });
    }
    if let Some(host) = parts.iter().map(|p| p.run_dir.join(run_folder::HOST)).find(|h| h.is_file()) {
        std::fs::copy(&host, out.join(run_folder::HOST))?;
    }
    let mut json = serde_json::to_vec_pretty(&origins)?;
    json.push(b'\n');
    std::fs::write(out.join("merged-from.json"), json)?;
    for o in &origins {
        crate::support::progress::line(format!(
            "{} <- {} ({}, {}, {})",
            o.folder, o.from, o.arch, o.profile, o.kernel_release
        ));
    }
    super::publish(out, super::collect::load(out, jiff::Timestamp::now())?, None)
}

#[cfg(test)]
mod tests {
    use super::super::tests::{copy_dir, fixture_dir};
    use super::*;

    fn part(arch: &str, profile: &str, release: &str) -> Part {
        Part {
            run_dir: PathBuf::new(),
            arch: arch.into(),
            dirs: vec![arch.into()],
            profile: profile.into(),
            release: release.into(),
        }
    }

    #[test]
    fn labels_tell_cells_apart_only_when_needed() {
        let parts = [
            part("x86_64", "default", "6.12"),
            part("x86_64", "debug", "6.12"),
            part("arm64", "default", "6.12"),
            part("riscv", "default", "6.12"),
            part("riscv", "default", "6.13"),
            part("s390", "default", "6.12"),
            part("s390", "default", "6.12"),
        ];
        assert_eq!(
            labels(&parts),
            [
                "x86_64-default",
                "x86_64-debug",
                "arm64",
                "riscv-default-6.12",
                "riscv-default-6.13",
                "s390-default-6.12-1",
                "s390-default-6.12-2"
            ]
        );
    }

    /// Two CI jobs: one ran both arches (the fixture, as an uploaded `results/` with its
    /// `latest` link), the other x86_64 with the debug profile.
    fn jobs(tmp: &Path) -> Vec<PathBuf> {
        let a = tmp.join("artifacts/results-debian-all-default");
        copy_dir(&fixture_dir(), &a.join("20260102-030405-00001"));
        std::os::unix::fs::symlink("20260102-030405-00001", a.join("latest")).unwrap();
        let b = tmp.join("artifacts/results-debian-x86_64-debug/20260102-040506-00002");
        copy_dir(&fixture_dir().join("x86_64"), &b.join("x86_64"));
        let meta = b.join("x86_64/kernel-metadata.json");
        let mut v: Value = serde_json::from_slice(&std::fs::read(&meta).unwrap()).unwrap();
        v["config"]["fragments"] = serde_json::json!(["common.config", "x86_64.config", "debug.config"]);
        std::fs::write(&meta, serde_json::to_vec(&v).unwrap()).unwrap();
        vec![tmp.join("artifacts")]
    }

    #[test]
    fn merge_folds_jobs_into_one_run_with_every_report() {
        let tmp = tempfile::tempdir().unwrap();
        let inputs = jobs(tmp.path());
        assert_eq!(find_runs(&inputs[0]).unwrap().len(), 2, "the latest link is not a second run");
        let out = tmp.path().join("merged");
        let run = merge(&inputs, &out).unwrap();
        let arches: Vec<&str> = run.arches.iter().map(|a| a.arch.as_str()).collect();
        assert_eq!(arches, ["arm64", "x86_64-debug", "x86_64-default"]);
        let original = super::super::tests::fixture();
        let x = original.arch("x86_64").unwrap();
        let merged = run.arch("x86_64-default").unwrap();
        assert_eq!(merged.boots.len(), 3, "the isolated boots came along");
        assert_eq!(
            merged.scenarios.iter().map(|s| s.status).collect::<Vec<_>>(),
            x.scenarios.iter().map(|s| s.status).collect::<Vec<_>>()
        );
        let debug = run.arch("x86_64-debug").unwrap();
        assert_eq!(debug.kernel.as_ref().unwrap().fragments.last().unwrap(), "debug.config");
        assert_eq!(run.totals.total(), original.totals.total() + debug.totals.total());
        assert_eq!(run.verdict, original.verdict);
        for f in [
            "run.json",
            "junit.xml",
            "x86_64-debug.ktap",
            "arm64.ktap",
            "kcidb.json",
            "summary.md",
            "report.html",
            "host.json",
        ] {
            assert!(out.join(f).is_file(), "{f} missing");
        }
        let from: Value = serde_json::from_slice(&std::fs::read(out.join("merged-from.json")).unwrap()).unwrap();
        assert_eq!(from.as_array().unwrap().len(), 3);
        // The merged folder is a run folder like any other.
        let again = super::super::collect::load(&out, jiff::Timestamp::now()).unwrap();
        assert_eq!(again.arches.len(), 3);
        // Into a folder that is not empty: bad input, nothing touched.
        let e = merge(&inputs, &out).unwrap_err();
        assert_eq!(crate::support::exit::code_for(&e), 128);
    }

    #[test]
    fn a_folder_without_runs_is_bad_input() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(tmp.path().join("a/b")).unwrap();
        let e = merge(&[tmp.path().join("a")], &tmp.path().join("out")).unwrap_err();
        assert_eq!(crate::support::exit::code_for(&e), 128);
        assert!(e.to_string().contains("no run folder"), "{e}");
        let e = merge(&[tmp.path().join("missing")], &tmp.path().join("out")).unwrap_err();
        assert_eq!(crate::support::exit::code_for(&e), 128);
    }
}
