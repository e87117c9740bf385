//! A baseline's coverage map: the per-scenario tracefiles of an earlier coverage run of the same
//! kernel source and patches (`<run>/coverage/<arch>/<suite>/<scenario>.info`), per arch. A run
//! named with `--coverage-map RUN` is used as it is (each arch checked against the baseline);
//! otherwise the newest run under the results folder whose coverage kernel of that arch was built
//! from the baseline's source identity and patches. Also the change's texts: the files it touches,
//! as the baseline and as the patched side build them (the patches applied to copies of the
//! pristine files), which `affected` reads through the map.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::coverage::affected::Change;
use crate::coverage::runs::{ArchData, DIR};
use crate::judging::run_folder::{KERNEL_METADATA, LATEST};
use crate::kernel::build::{Built, Metadata};
use crate::support::exit::{error, Kind};

/// One arch's map: the run it comes from, the sources its kernel instrumented, each scenario's
/// counts.
#[derive(Debug)]
pub struct ArchMap {
    pub run: PathBuf,
    pub files: Vec<String>,
    pub data: ArchData,
}

/// Whether a coverage kernel was built from the baseline kernel's source and patches; why not.
fn same_source(map: &Metadata, base: &Metadata) -> Result<(), String> {
    let digests = |m: &Metadata| m.patches.iter().map(|p| p.sha256.clone()).collect::<Vec<_>>();
    if map.gcov_files.is_empty() {
        Err("its kernel was not built for coverage".into())
    } else if map.source.id != base.source.id {
        Err(format!("its kernel was built from {}, the baseline from {}", map.source.label, base.source.label))
    } else if digests(map) != digests(base) {
        Err(format!(
            "its kernel had {} patch(es), the baseline {}, not the same",
            map.patches.len(),
            base.patches.len()
        ))
    } else {
        Ok(())
    }
}

/// `--coverage-map RUN` (a run folder, or a run id under `results`), else the newest matching run
/// under `results`: per baseline kernel, its arch's map, or why there is none.
pub fn find(
    results: &Path,
    explicit: Option<&Path>,
    base: &[Built],
) -> Result<BTreeMap<&'static str, Result<ArchMap, String>>> {
    let candidates: Vec<PathBuf> = match explicit {
        Some(run) => {
            let dir = if run.exists() { run.to_path_buf() } else { results.join(run) };
            if !dir.join(DIR).is_dir() {
                return Err(error(
                    Kind::BadInput,
                    format!("--coverage-map {}: {} holds no coverage run", run.display(), dir.display()),
                ));
            }
            vec![dir]
        }
        None => {
            let mut runs: Vec<PathBuf> =
                std::fs::read_dir(results).map(|d| d.flatten().map(|e| e.path()).collect()).unwrap_or_default();
            runs.retain(|p| p.file_name().is_some_and(|n| n != LATEST) && p.join(DIR).is_dir());
            // Run folders are named by their start time: the newest sorts last.
            runs.sort();
            runs.reverse();
            runs
        }
    };
    let mut out = BTreeMap::new();
    for b in base {
        let arch = b.arch.name;
        let mut why = format!("no coverage run of {arch} under {}", results.display());
        let mut found = None;
        for run in &candidates {
            let meta = run.join(arch).join(KERNEL_METADATA);
            let Some(m) = std::fs::read(&meta).ok().and_then(|t| serde_json::from_slice::<Metadata>(&t).ok()) else {
                why = format!("{} has no {arch} kernel", run.display());
                continue;
            };
            match same_source(&m, &b.metadata) {
                Ok(()) => {
                    found = Some(ArchMap { run: run.clone(), files: m.gcov_files, data: read_arch(run, arch)? });
                    break;
                }
                Err(e) if explicit.is_some() => why = format!("{}: {e}", run.display()),
                Err(_) => {
                    why = format!(
                        "no coverage run of {arch} built from the baseline's source and patches under {}",
                        results.display()
                    )
                }
            }
        }
        out.insert(arch, found.ok_or(why));
    }
    Ok(out)
}

/// Every scenario's tracefile of one arch of a run (lines and functions: what `affected` reads).
fn read_arch(run: &Path, arch: &str) -> Result<ArchData> {
    let root = run.join(DIR).join(arch);
    let mut data = ArchData::new();
    let mut dirs = vec![root.clone()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))?.flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            let Some(name) = path.strip_prefix(&root).ok().and_then(|r| r.to_str()?.strip_suffix(".info")) else {
                continue;
            };
            let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
            let files = crate::coverage::lcov::parse_lines(&text).with_context(|| path.display().to_string())?;
            data.insert(name.to_string(), files.into_iter().map(|f| (f.path.clone(), f)).collect());
        }
    }
    Ok(data)
}

/// The files a change touches, as each side builds them: copies of the pristine files that any
/// patch of either side names, each side's patches applied in order.
pub fn change_texts(pristine: &Path, base: &[PathBuf], head: &[PathBuf], files: &[String]) -> Result<Vec<Change>> {
    let mut named = Vec::new();
    for p in base.iter().chain(head) {
        let text = std::fs::read_to_string(p).map_err(|e| error(Kind::BadInput, format!("{}: {e}", p.display())))?;
        named.extend(crate::coverage::diff::patch_files(&text));
    }
    let scratch = tempfile::Builder::new().prefix("xtask-change-").tempdir()?;
    let side = |name: &str, patches: &[PathBuf]| -> Result<BTreeMap<String, String>> {
        let dir = scratch.path().join(name);
        for f in &named {
            let (from, to) = (pristine.join(f), dir.join(f));
            std::fs::create_dir_all(to.parent().context("a file has a folder")?)?;
            if from.is_file() && !to.is_file() {
                std::fs::copy(&from, &to).with_context(|| format!("copying {}", from.display()))?;
            }
        }
        let sh = crate::support::cmd::sh()?;
        for p in patches {
            let out =
                crate::support::cmd::cmd!(sh, "patch -p1 --batch --forward --no-backup-if-mismatch -d {dir} -i {p}")
                    .ignore_status()
                    .output()
                    .context("running patch (install the Debian package `patch`)")?;
            if !out.status.success() {
                return Err(crate::kernel::source::patch_error(p, &String::from_utf8_lossy(&out.stdout)));
            }
        }
        Ok(files.iter().map(|f| (f.clone(), std::fs::read_to_string(dir.join(f)).unwrap_or_default())).collect())
    };
    let (mut old, mut new) = (side("base", base)?, side("head", head)?);
    Ok(files
        .iter()
        .map(|f| Change {
            file: f.clone(),
            old: old.remove(f).unwrap_or_default(),
            new: new.remove(f).unwrap_or_default(),
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "kernel/trace/x.c";

    fn metadata(id: &str, gcov: &[&str]) -> Metadata {
        serde_json::from_value(serde_json::json!({
            "schema": 1, "arch": "x86_64", "key": "k",
            "source": { "kind": "debian-package", "label": format!("source {id}"), "id": id, "location": "/src" },
            "patches": [], "kernelrelease": "6.12.117",
            "compiler": { "command": "gcc", "version": "12" },
            "config": { "sha256": "", "fragments": [], "requested": {}, "effective": {}, "missing": [] },
            "make_commands": [], "durations": {}, "built_at": "", "host": "", "image": "bzImage",
            "gcov_files": gcov,
        }))
        .unwrap()
    }

    /// A run folder with an x86_64 kernel built from source `id`, and one scenario's tracefile.
    fn coverage_run(results: &Path, name: &str, id: &str) {
        let run = results.join(name);
        std::fs::create_dir_all(run.join("x86_64")).unwrap();
        let m = serde_json::to_vec(&metadata(id, &[FILE])).unwrap();
        std::fs::write(run.join("x86_64").join(KERNEL_METADATA), m).unwrap();
        let cov = crate::coverage::lcov::FileCov { path: FILE.into(), lines: [(3, 1)].into(), ..Default::default() };
        std::fs::create_dir_all(run.join("coverage/x86_64/s")).unwrap();
        std::fs::write(run.join("coverage/x86_64/s/one.info"), crate::coverage::lcov::tracefile("s/one", &[&cov]))
            .unwrap();
    }

    fn built(id: &str) -> Built {
        Built {
            arch: crate::arch::select("x86_64").unwrap()[0],
            image: "/k/bzImage".into(),
            config: "/k/config".into(),
            metadata: metadata(id, &[]),
            cache_hit: true,
            source: None,
        }
    }

    #[test]
    fn the_newest_run_of_the_same_source_is_the_map() {
        let t = tempfile::tempdir().unwrap();
        let results = t.path();
        coverage_run(results, "20261125-100000-00001", "abc");
        coverage_run(results, "20261125-110000-00002", "other");
        std::os::unix::fs::symlink("20261125-110000-00002", results.join(LATEST)).unwrap();
        let found = find(results, None, &[built("abc")]).unwrap();
        let m = found["x86_64"].as_ref().unwrap();
        assert!(m.run.ends_with("20261125-100000-00001"), "{}", m.run.display());
        assert_eq!(m.files, [FILE]);
        assert_eq!(m.data["s/one"][FILE].lines, [(3, 1)].into());
        let none = find(results, None, &[built("new")]).unwrap();
        assert!(none["x86_64"].as_ref().unwrap_err().starts_with("no coverage run of x86_64 built from the baseline"));
        let named = find(results, Some(Path::new("20261125-110000-00002")), &[built("abc")]).unwrap();
        let why = named["x86_64"].as_ref().unwrap_err();
        assert!(why.ends_with("its kernel was built from source other, the baseline from source abc"), "{why}");
        let e = find(results, Some(Path::new("nope")), &[built("abc")]).unwrap_err();
        assert_eq!(crate::support::exit::code_for(&e), 128, "{e}");
    }

    #[test]
    fn the_change_as_each_side_builds_it() {
        let t = tempfile::tempdir().unwrap();
        let pristine = t.path().join("src");
        std::fs::create_dir_all(pristine.join("kernel/trace")).unwrap();
        std::fs::write(pristine.join(FILE), "a\nb\nc\n").unwrap();
        let write = |name: &str, text: &str| {
            let p = t.path().join(name);
            std::fs::write(&p, text).unwrap();
            p
        };
        let fix = write("fix.patch", &format!("--- a/{FILE}\n+++ b/{FILE}\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n"));
        let more = write("more.patch", &format!("--- a/{FILE}\n+++ b/{FILE}\n@@ -1,3 +1,4 @@\n a\n B\n+D\n c\n"));
        // The baseline carries fix.patch; the change is more.patch on top of it.
        let c = change_texts(&pristine, std::slice::from_ref(&fix), &[fix.clone(), more], &[FILE.into()]).unwrap();
        assert_eq!((c[0].old.as_str(), c[0].new.as_str()), ("a\nB\nc\n", "a\nB\nD\nc\n"));
        assert_eq!(
            std::fs::read_to_string(pristine.join(FILE)).unwrap(),
            "a\nb\nc\n",
            "the pristine file is untouched"
        );
        let bad = write("bad.patch", &format!("--- a/{FILE}\n+++ b/{FILE}\n@@ -1,2 +1,2 @@\n x\n-y\n+z\n"));
        let e = change_texts(&pristine, &[], &[bad], &[FILE.into()]).unwrap_err();
        assert!(e.to_string().contains("does not apply"), "{e}");
    }
}
