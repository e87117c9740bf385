//! A coverage run's counters turned into its files: each boot's `# ue-gcov` frames (its result
//! channel as the boot read it, `judging::channel::Stream::gcov`) read per scenario with the
//! host's gcov against the `.gcno` kept with the kernel, then, in `<run>/coverage/`: `<arch>/<suite>/<scenario>.info` per scenario,
//! `<arch>.info` per arch (its scenarios summed), `all.info` over the arches, `index.html`
//! (the annotated sources), `lines.tsv` (every instrumented line: function, count per arch,
//! text; what `coverage --unexecuted` checks) and `summary.json` (the figures the reports show).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use protocol::gcov::BOOT_INDEX;

use crate::coverage::gcov::Gcov;
use crate::coverage::lcov::{self, FileCov, Totals};
use crate::coverage::{annotate, prefetch, unexecuted};
use crate::judging::run_folder::JudgedBoot;
use crate::kernel::build::Built;
use crate::kernel::gcov::STORE_DIR;
use crate::results::model::{BlindSpot, CoverageRow, CoverageSummary, PatchLines, COVERAGE_SUMMARY};

/// The folder of a run's coverage files.
pub const DIR: &str = "coverage";

/// The boot's counters in an [`ArchData`], beside the scenarios': what ran before the first
/// scenario (`<arch>/boot.info`).
pub use protocol::gcov::BOOT_NAME as BOOT;

/// One arch's counters: scenario (`suite/name`, or [`BOOT`]) to source to its counts.
pub type ArchData = BTreeMap<String, BTreeMap<String, FileCov>>;

/// Everything a coverage run measured, per arch in run order.
pub struct RunData {
    pub files: Vec<String>,
    pub arches: Vec<(String, ArchData)>,
    /// Each source's text, as the kernel was built from it.
    pub sources: BTreeMap<String, String>,
    /// With patches: each source's added or changed lines.
    pub changed: BTreeMap<String, BTreeSet<u32>>,
    pub problems: Vec<String>,
}

/// Reads every coverage kernel's boots; `None` when no kernel of the run was built for coverage.
pub fn read(boots: &[&JudgedBoot], built: &[Built]) -> Result<Option<RunData>> {
    let kernels: Vec<&Built> = built.iter().filter(|b| !b.metadata.gcov_files.is_empty()).collect();
    let Some(first) = kernels.first() else { return Ok(None) };
    let mut data = RunData {
        files: first.metadata.gcov_files.clone(),
        arches: vec![],
        sources: BTreeMap::new(),
        changed: BTreeMap::new(),
        problems: vec![],
    };
    // What the boots' watchers did not convert yet is converted here, once.
    prefetch::stop();
    for k in kernels {
        let arch = k.arch.name;
        let store = k.image.parent().context("a cached kernel's folder")?;
        let (gcov, notes) = prefetch::notes_of(k)?;
        for f in &k.metadata.gcov_files {
            let src = store.join(STORE_DIR).join(f);
            if !data.sources.contains_key(f) {
                let text = std::fs::read_to_string(&src).with_context(|| format!("reading {}", src.display()))?;
                // The pristine source, kept when the patches changed this one.
                let orig = store.join(STORE_DIR).join(format!("{f}.orig"));
                if let Ok(before) = std::fs::read_to_string(&orig) {
                    data.changed.insert(f.clone(), crate::coverage::diff::changed_lines(&before, &text));
                }
                data.sources.insert(f.clone(), text);
            }
        }
        let mut per_scenario: ArchData = BTreeMap::new();
        let mine = boots.iter().filter(|b| b.folder.place().map_or(b.facts.arch.as_str(), |(a, _)| a) == arch);
        for b in mine {
            // The channel as the boot read it: its scenarios' names and their frames.
            let (names, snapshots) = (&b.judgement.stream.begun, protocol::gcov::assemble(&b.judgement.stream.gcov));
            let jobs: Vec<(String, String, Vec<u8>)> = snapshots
                .into_iter()
                .filter_map(|((index, file), bytes)| {
                    let name = match names.get(&index) {
                        Some(n) => n.clone(),
                        None if index == BOOT_INDEX => BOOT.to_string(),
                        None => format!("#{index}"),
                    };
                    match bytes {
                        Ok(bytes) => Some((name, file, bytes)),
                        Err(why) => {
                            data.problems.push(format!("{arch}: {name}: no counters for {file}: {why}"));
                            None
                        }
                    }
                })
                .collect();
            for (name, file, mut cov) in convert(&gcov, &notes, jobs)? {
                cov.drop_assertion_branches(data.sources.get(&file).map_or("", String::as_str));
                match per_scenario.entry(name).or_default().entry(file.clone()) {
                    std::collections::btree_map::Entry::Vacant(v) => {
                        v.insert(cov);
                    }
                    std::collections::btree_map::Entry::Occupied(mut o) => o.get_mut().merge(&cov),
                }
            }
        }
        data.arches.push((arch.to_string(), per_scenario));
    }
    Ok(Some(data))
}

/// gcov on every snapshot, on every CPU.
fn convert(
    gcov: &Gcov,
    notes: &BTreeMap<String, PathBuf>,
    jobs: Vec<(String, String, Vec<u8>)>,
) -> Result<Vec<(String, String, FileCov)>> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).max(1);
    let chunk = jobs.len().div_ceil(threads).max(1);
    std::thread::scope(|s| {
        let handles: Vec<_> = jobs
            .chunks(chunk)
            .map(|part| {
                s.spawn(move || -> Result<Vec<(String, String, FileCov)>> {
                    let mut out = Vec::new();
                    for (name, file, bytes) in part {
                        let counts = match prefetch::take(file, bytes) {
                            Some(c) => c,
                            None => {
                                let what = format!("the guest's {file} data ({name})");
                                prefetch::counts(gcov, notes, file, bytes, &what)?
                            }
                        };
                        out.push((name.clone(), file.clone(), counts));
                    }
                    Ok(out)
                })
            })
            .collect();
        let mut all = Vec::new();
        for h in handles {
            all.extend(h.join().map_err(|_| anyhow::anyhow!("a gcov thread panicked"))??);
        }
        Ok(all)
    })
}

/// Sums an arch's scenarios per source.
pub fn arch_total(files: &[String], data: &ArchData) -> Vec<FileCov> {
    files
        .iter()
        .map(|f| {
            let mut total = FileCov { path: f.clone(), ..FileCov::default() };
            for per_file in data.values() {
                if let Some(c) = per_file.get(f) {
                    total.merge(c);
                }
            }
            total
        })
        .collect()
}

fn totals(files: &[FileCov]) -> Totals {
    let mut t = Totals::default();
    for f in files {
        t.add(&f.totals());
    }
    t
}

fn row(arch: &str, scenarios: usize, (totals, scenarios_only): (Totals, Totals), tracefile: String) -> CoverageRow {
    CoverageRow { arch: arch.to_string(), scenarios, totals, scenarios_only: Some(scenarios_only), tracefile }
}

/// An arch's scenarios summed per source without the boot's counters.
fn scenarios_total(files: &[String], data: &ArchData) -> Vec<FileCov> {
    let mut without = data.clone();
    without.remove(BOOT);
    arch_total(files, &without)
}

/// The patch's changed lines against every arch's counts: a blind spot is executable on some
/// arch and executed on none.
fn patch_lines(data: &RunData, arch_totals: &[(&str, Vec<FileCov>)]) -> PatchLines {
    let mut p = PatchLines { changed: 0, executable: 0, executed: 0, blind_spots: vec![] };
    for (i, f) in data.files.iter().enumerate() {
        let text: Vec<&str> = data.sources.get(f).map_or(vec![], |t| t.lines().collect());
        for &line in data.changed.get(f).into_iter().flatten() {
            p.changed += 1;
            let counts: Vec<u64> = arch_totals.iter().filter_map(|(_, t)| t[i].lines.get(&line).copied()).collect();
            if counts.is_empty() {
                continue;
            }
            p.executable += 1;
            if counts.iter().any(|c| *c > 0) {
                p.executed += 1;
            } else {
                let text = text.get(line as usize - 1).unwrap_or(&"").to_string();
                p.blind_spots.push(BlindSpot { file: f.clone(), line, text });
            }
        }
    }
    p
}

/// A scenario's tracefile, relative to the run folder.
pub fn scenario_tracefile(arch: &str, scenario: &str) -> String {
    format!("{DIR}/{arch}/{scenario}.info")
}

/// Writes the run's coverage files and returns its summary.
pub fn write(run_dir: &Path, data: &RunData) -> Result<CoverageSummary> {
    let write = |rel: &str, text: &str| -> Result<()> {
        let path = run_dir.join(rel);
        std::fs::create_dir_all(path.parent().context("a path with a parent")?)?;
        crate::support::files::write_atomic(&path, text.as_bytes())
            .with_context(|| format!("writing {}", path.display()))
    };
    let mut rows = Vec::new();
    let mut union: Vec<FileCov> =
        data.files.iter().map(|f| FileCov { path: f.clone(), ..FileCov::default() }).collect();
    let mut union_without: Vec<FileCov> = union.clone();
    let mut arch_totals = Vec::new();
    for (arch, per) in &data.arches {
        for (scenario, files) in per {
            let list: Vec<&FileCov> = data.files.iter().filter_map(|f| files.get(f)).collect();
            write(&scenario_tracefile(arch, scenario), &lcov::tracefile(scenario, &list))?;
        }
        let total = arch_total(&data.files, per);
        for (u, t) in union.iter_mut().zip(&total) {
            u.merge(t);
        }
        let rel = format!("{DIR}/{arch}.info");
        write(&rel, &lcov::tracefile(arch, &total.iter().collect::<Vec<_>>()))?;
        let without = scenarios_total(&data.files, per);
        for (u, t) in union_without.iter_mut().zip(&without) {
            u.merge(t);
        }
        let figures = (totals(&total), totals(&without));
        rows.push(row(arch, per.keys().filter(|s| *s != BOOT).count(), figures, rel));
        arch_totals.push((arch.as_str(), total));
    }
    let rel = format!("{DIR}/all.info");
    write(&rel, &lcov::tracefile("all", &union.iter().collect::<Vec<_>>()))?;
    let scenarios: BTreeSet<&String> = data.arches.iter().flat_map(|(_, p)| p.keys()).filter(|s| *s != BOOT).collect();
    rows.push(row("all", scenarios.len(), (totals(&union), totals(&union_without)), rel));

    let summary_rows: Vec<(String, String)> = rows.iter().map(|r| (r.arch.clone(), r.totals.describe())).collect();
    let mut sources = Vec::new();
    for (i, f) in data.files.iter().enumerate() {
        let mut by_line: BTreeMap<u32, BTreeSet<&str>> = BTreeMap::new();
        for (_, per) in &data.arches {
            for (scenario, files) in per {
                for line in files.get(f).into_iter().flat_map(FileCov::hit_lines) {
                    by_line.entry(line).or_default().insert(scenario.as_str());
                }
            }
        }
        sources.push(annotate::Source {
            path: f,
            text: data.sources.get(f).map_or("", String::as_str),
            arches: arch_totals.iter().map(|(a, t)| (*a, &t[i])).collect(),
            scenarios: by_line,
        });
    }
    let arch_names: Vec<&str> = arch_totals.iter().map(|(a, _)| *a).collect();
    let mut all_lines = Vec::new();
    for (i, f) in data.files.iter().enumerate() {
        let per: Vec<&FileCov> = arch_totals.iter().map(|(_, t)| &t[i]).collect();
        all_lines.extend(unexecuted::lines(f, &per, data.sources.get(f).map_or("", String::as_str)));
    }
    write(unexecuted::LINES_TSV, &unexecuted::lines_tsv(&arch_names, &all_lines))?;
    let index = format!("{DIR}/index.html");
    write(&index, &annotate::page("Coverage of the scenarios", &summary_rows, &sources))?;
    let patch = (!data.changed.is_empty()).then(|| patch_lines(data, &arch_totals));
    let summary = CoverageSummary { files: data.files.clone(), rows, index, problems: data.problems.clone(), patch };
    write(COVERAGE_SUMMARY, &serde_json::to_string_pretty(&summary)?)?;
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cov(lines: &[(u32, u64)]) -> FileCov {
        FileCov { path: "a.c".into(), lines: lines.iter().copied().collect(), ..FileCov::default() }
    }

    #[test]
    fn files_per_scenario_per_arch_and_the_union() {
        let files = vec!["a.c".to_string()];
        let mut x86: ArchData = BTreeMap::new();
        x86.entry("s/one".into()).or_default().insert("a.c".into(), cov(&[(1, 1), (2, 0), (3, 0)]));
        x86.entry("s/two".into()).or_default().insert("a.c".into(), cov(&[(1, 1), (2, 3), (3, 0)]));
        let mut arm: ArchData = BTreeMap::new();
        arm.entry("s/one".into()).or_default().insert("a.c".into(), cov(&[(1, 1), (2, 0), (3, 2)]));
        let data = RunData {
            files: files.clone(),
            arches: vec![("x86_64".into(), x86), ("arm64".into(), arm)],
            sources: [("a.c".to_string(), "a\nb\nc\n".to_string())].into(),
            changed: BTreeMap::new(),
            problems: vec![],
        };
        let dir = tempfile::tempdir().unwrap();
        let s = write(dir.path(), &data).unwrap();
        let hits: Vec<(String, u64, u64)> =
            s.rows.iter().map(|r| (r.arch.clone(), r.totals.lines_hit, r.totals.lines_found)).collect();
        assert_eq!(hits, [("x86_64".into(), 2, 3), ("arm64".into(), 2, 3), ("all".into(), 3, 3)]);
        let two = std::fs::read_to_string(dir.path().join("coverage/x86_64/s/two.info")).unwrap();
        assert!(two.contains("DA:2,3\n") && two.starts_with("TN:s_two\nSF:a.c\n"), "{two}");
        let all =
            lcov::parse_tracefile(&std::fs::read_to_string(dir.path().join("coverage/all.info")).unwrap()).unwrap();
        assert_eq!(all[0].lines, [(1, 3), (2, 3), (3, 2)].into());
        let html = std::fs::read_to_string(dir.path().join("coverage/index.html")).unwrap();
        assert!(html.contains("s/one, s/two"), "line 1's scenarios");
        let tsv = std::fs::read_to_string(dir.path().join(unexecuted::LINES_TSV)).unwrap();
        assert_eq!(tsv.lines().nth(2), Some("a.c\t2\t\t3\t0\tb"), "line 2: 3 on x86_64, 0 on arm64");
        let back: CoverageSummary =
            serde_json::from_slice(&std::fs::read(dir.path().join(COVERAGE_SUMMARY)).unwrap()).unwrap();
        assert_eq!(back, s);
        assert_eq!(s.patch, None, "no patch, no patch lines");
    }

    #[test]
    fn a_patch_line_no_scenario_executed_is_a_blind_spot() {
        let mut x86: ArchData = BTreeMap::new();
        // Line 2 ran; line 3 is executable and never ran; line 4 compiles to nothing.
        x86.entry("s/one".into()).or_default().insert("a.c".into(), cov(&[(1, 1), (2, 4), (3, 0)]));
        let data = RunData {
            files: vec!["a.c".into()],
            arches: vec![("x86_64".into(), x86)],
            sources: [("a.c".to_string(), "a\nnew_ran();\n\tnew_never();\n/* new */\n".to_string())].into(),
            changed: [("a.c".to_string(), [2, 3, 4].into())].into(),
            problems: vec![],
        };
        let dir = tempfile::tempdir().unwrap();
        let p = write(dir.path(), &data).unwrap().patch.unwrap();
        assert_eq!((p.changed, p.executable, p.executed), (3, 2, 1));
        assert_eq!(p.blind_spots, [BlindSpot { file: "a.c".into(), line: 3, text: "\tnew_never();".into() }]);
        assert_eq!(p.describe()[1], "blind spot a.c:3: new_never();");
    }
}
