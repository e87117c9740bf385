//! Results: one schema-versioned model per run (`model.rs`), made from judged boots and the run
//! folder's provenance (`collect.rs`), and rendered by pure functions, one file each:
//! `run.json`, JUnit XML, KTAP per arch, KCIDB v5 JSON, a Markdown summary and a
//! self-contained HTML report. `publish` is the only writer: the end of a live run and
//! `report --from` both call it.

pub mod atlas;
pub mod book;
pub mod collect;
pub mod compare;
pub mod html;
pub mod json;
pub mod junit;
pub mod kcidb;
pub mod ktap;
pub mod markdown;
pub mod merge;
pub mod model;
pub mod symbols;
pub mod text;
pub mod tools;

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::support::progress::line;
use model::Run;

/// One rendering: its file name in the run folder and its bytes.
pub struct Rendered {
    pub file: String,
    pub bytes: Vec<u8>,
}

/// The URL of a run folder, which KCIDB's log URLs start with: `$XTASK_RESULTS_URL/<run id>`
/// when that names where the run folders are published (a CI artifact store, a web server),
/// else the folder's own `file://` URL.
pub fn folder_url(run_dir: &Path, run_id: &str) -> String {
    match std::env::var("XTASK_RESULTS_URL").ok().filter(|u| !u.is_empty()) {
        Some(base) => format!("{}/{run_id}", base.trim_end_matches('/')),
        None => {
            let dir = run_dir.canonicalize().unwrap_or_else(|_| run_dir.to_path_buf());
            format!("file://{}", dir.display())
        }
    }
}

/// Every rendering of a run, in a fixed order; `url` is the run folder's (`folder_url`).
pub fn render_all(run: &Run, url: &str) -> Result<Vec<Rendered>> {
    let mut out = vec![
        Rendered { file: crate::judging::run_folder::RUN_JSON.into(), bytes: json::render(run)? },
        Rendered { file: "junit.xml".into(), bytes: junit::render(run)? },
    ];
    for arch in &run.arches {
        out.push(Rendered { file: format!("{}.ktap", arch.arch), bytes: ktap::render(run, &arch.arch) });
    }
    out.push(Rendered { file: "kcidb.json".into(), bytes: kcidb::render(run, url)? });
    out.push(Rendered { file: "summary.md".into(), bytes: markdown::render(run) });
    out.push(Rendered { file: "report.html".into(), bytes: html::render(run) });
    Ok(out)
}

/// Writes every rendering of `run` into `run_dir`, appends the Markdown summary to
/// `$GITHUB_STEP_SUMMARY` when that is set, and prints where they are and the totals.
///
/// `live` is when a live run began to make its reports: its phases (this rendering as
/// `render`) are then finished, printed, saved as `timings.json` and kept in `run.json`, which
/// is written last. `report --from` passes `None` and keeps the timings the run recorded.
pub fn publish(run_dir: &Path, mut run: Run, live: Option<std::time::Instant>) -> Result<Run> {
    let write = |file: &str, bytes: &[u8]| {
        let path = run_dir.join(file);
        crate::support::files::write_atomic(&path, bytes).with_context(|| format!("writing {}", path.display()))
    };
    let mut written: Vec<PathBuf> = Vec::new();
    for r in render_all(&run, &folder_url(run_dir, &run.run_id))? {
        if live.is_none() || r.file != crate::judging::run_folder::RUN_JSON {
            write(&r.file, &r.bytes)?;
        }
        written.push(run_dir.join(&r.file));
    }
    if let Some(summary) = std::env::var_os("GITHUB_STEP_SUMMARY").filter(|s| !s.is_empty()) {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&summary)
            .with_context(|| format!("opening $GITHUB_STEP_SUMMARY ({})", Path::new(&summary).display()))?;
        f.write_all(&markdown::render(&run))?;
        line(format!("summary appended to $GITHUB_STEP_SUMMARY ({})", Path::new(&summary).display()));
    }
    let names: Vec<String> =
        written.iter().filter_map(|p| Some(p.file_name()?.to_string_lossy().into_owned())).collect();
    line(format!("reports in {}: {}", run_dir.display(), names.join(", ")));
    for a in &run.arches {
        line(format!("{}: {} ({})", a.arch, a.totals.describe(), a.verdict.kind));
    }
    let verdict = crate::support::progress::tag(&run.verdict.kind.to_uppercase());
    line(format!("{verdict} run {}: {}", run.run_id, run.totals.describe()));
    if let Some(began) = live {
        run.timings = crate::support::timings::finish(run_dir, began.elapsed())?;
        write(crate::judging::run_folder::RUN_JSON, &json::render(&run)?)?;
    }
    Ok(run)
}

#[cfg(test)]
pub mod tests {
    use super::*;

    /// The fixture run folder: both arches, an isolated boot, every status.
    pub fn fixture_dir() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("test_data/results/run-fixture")
    }

    /// The fixture's model, stamped with a pinned time.
    pub fn fixture() -> Run {
        let pinned: jiff::Timestamp = "2026-01-02T03:04:05Z".parse().unwrap();
        collect::load(&fixture_dir(), pinned).unwrap()
    }

    /// Compares with `test_data/results/golden/<file>`; `UPDATE_EXPECT=1` rewrites it.
    pub fn check_golden(file: &str, actual: &[u8]) {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("test_data/results/golden").join(file);
        if std::env::var_os("UPDATE_EXPECT").is_some() {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, actual).unwrap();
            return;
        }
        let expected = std::fs::read(&path)
            .unwrap_or_else(|e| panic!("{}: {e} (create it with UPDATE_EXPECT=1 cargo test)", path.display()));
        if expected != actual {
            let (e, a) = (String::from_utf8_lossy(&expected), String::from_utf8_lossy(actual));
            let line =
                e.lines().zip(a.lines()).position(|(x, y)| x != y).unwrap_or(e.lines().count().min(a.lines().count()));
            panic!(
                "{} differs from the rendering at line {}:\n  golden: {:?}\n  actual: {:?}\n(UPDATE_EXPECT=1 cargo test rewrites it)",
                path.display(),
                line + 1,
                e.lines().nth(line),
                a.lines().nth(line)
            );
        }
    }

    #[test]
    fn every_rendering_is_a_pure_function_of_the_model() {
        let run = fixture();
        let a = render_all(&run, "https://ci.example/runs/x").unwrap();
        let b = render_all(&run, "https://ci.example/runs/x").unwrap();
        assert_eq!(a.iter().map(|r| &r.bytes).collect::<Vec<_>>(), b.iter().map(|r| &r.bytes).collect::<Vec<_>>());
        let files: Vec<&str> = a.iter().map(|r| r.file.as_str()).collect();
        assert_eq!(
            files,
            ["run.json", "junit.xml", "x86_64.ktap", "arm64.ktap", "kcidb.json", "summary.md", "report.html"]
        );
    }

    #[test]
    fn publish_writes_every_rendering_into_the_run_folder() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("20260102-030405-00001");
        copy_dir(&fixture_dir(), &dir);
        let run = publish(&dir, collect::load(&dir, jiff::Timestamp::now()).unwrap(), None).unwrap();
        assert_eq!(run.run_id, "20260102-030405-00001");
        for f in ["run.json", "junit.xml", "x86_64.ktap", "arm64.ktap", "kcidb.json", "summary.md", "report.html"] {
            assert!(dir.join(f).is_file(), "{f} missing");
            // Readable by a CI uploader or a web server running as another user.
            let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(dir.join(f)).unwrap().permissions());
            assert_eq!(mode & 0o044, 0o044, "{f}: mode {mode:o}");
        }
        // run.json reads back into the same model.
        let back: Run = serde_json::from_slice(&std::fs::read(dir.join("run.json")).unwrap()).unwrap();
        assert_eq!(back, run);
    }

    /// The live path: the model made from the boots as judged, published with the run's phases;
    /// `report --from` of the folder then gives the same model, the phases read back.
    #[test]
    fn a_live_publish_keeps_its_timings_and_reads_back_alike() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("20260102-030405-00001");
        copy_dir(&fixture_dir(), &dir);
        let boots: Vec<_> = crate::judging::run_folder::boot_folders(&dir)
            .unwrap()
            .into_iter()
            .map(|f| crate::judging::run_folder::read_boot(f).unwrap())
            .collect();
        let pinned: jiff::Timestamp = "2026-01-02T03:04:05Z".parse().unwrap();
        let live = collect::assemble(&dir, &boots.iter().collect::<Vec<_>>(), vec![], pinned).unwrap();
        let published = publish(&dir, live, Some(std::time::Instant::now())).unwrap();
        assert!(published.timings.iter().any(|p| p.phase == "render" && p.arch.is_none()), "{:?}", published.timings);
        assert!(dir.join(crate::judging::run_folder::TIMINGS).is_file());
        let written: Run = serde_json::from_slice(&std::fs::read(dir.join("run.json")).unwrap()).unwrap();
        assert_eq!(written, published);
        assert_eq!(collect::load(&dir, pinned).unwrap(), published);
    }

    pub fn copy_dir(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for e in std::fs::read_dir(from).unwrap().flatten() {
            let t = to.join(e.file_name());
            if e.path().is_dir() {
                copy_dir(&e.path(), &t);
            } else {
                std::fs::copy(e.path(), t).unwrap();
            }
        }
    }
}
