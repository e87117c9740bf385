//! `coverage --unexecuted`: a coverage run's unexecuted lines (its `lines.tsv`) read and checked
//! against the tracked list of unexecuted ones (`unexecuted`, sans-IO), with what the run had
//! (its arches, its kernels' options), and the report printed.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::coverage::unexecuted::{self, Report, RunFacts};
use crate::judging::run_folder::{KERNEL_METADATA, LATEST};
use crate::kernel::build::Metadata;
use crate::support::exit::{error, Kind};

/// `coverage --unexecuted [RUN]`: the run's unexecuted lines against `list` (default the tracked
/// `suites/unexecuted-lines.tsv`), printed; exit 1 when a line is neither executed nor listed,
/// or the list is stale.
pub fn check(results: &Path, run: &Path, list: Option<&Path>, partial: bool) -> Result<u8> {
    let run = find_run(results, run)?;
    let root = crate::support::checkout::project_root();
    let list = list.map_or_else(|| root.join(unexecuted::TRACKED), Path::to_path_buf);
    let (facts, lines, report) = check_run(&run, &list, partial)?;
    print!("{}", describe(&run, &facts, &lines, &report));
    Ok(if report.ok() { 0 } else { 1 })
}

/// `RUN` (a folder, or a run id under `results`), or the newest run with a `coverage/lines.tsv`.
fn find_run(results: &Path, run: &Path) -> Result<PathBuf> {
    if !run.as_os_str().is_empty() {
        let dir = if run.exists() { run.to_path_buf() } else { results.join(run) };
        if !dir.join(unexecuted::LINES_TSV).is_file() {
            return Err(error(
                Kind::BadInput,
                format!("--unexecuted {}: {} has no {}", run.display(), dir.display(), unexecuted::LINES_TSV),
            ));
        }
        return Ok(dir);
    }
    let mut runs: Vec<PathBuf> =
        std::fs::read_dir(results).map(|d| d.flatten().map(|e| e.path()).collect()).unwrap_or_default();
    runs.retain(|p| p.file_name().is_some_and(|n| n != LATEST) && p.join(unexecuted::LINES_TSV).is_file());
    runs.sort();
    runs.pop().ok_or_else(|| {
        error(Kind::BadInput, format!("no coverage run with {} under {}", unexecuted::LINES_TSV, results.display()))
    })
}

/// A run folder's lines against the list at `list`: what the run had, its lines, the findings.
pub fn check_run(run: &Path, list: &Path, partial: bool) -> Result<(RunFacts, Vec<unexecuted::Line>, Report)> {
    let text = std::fs::read_to_string(run.join(unexecuted::LINES_TSV))
        .with_context(|| format!("reading {}", run.join(unexecuted::LINES_TSV).display()))?;
    let (arches, lines) = unexecuted::parse_lines_tsv(&text)?;
    let mut facts = RunFacts { arches: arches.clone(), partial, ..RunFacts::default() };
    for arch in &arches {
        let meta = run.join(arch).join(KERNEL_METADATA);
        let m: Metadata =
            serde_json::from_slice(&std::fs::read(&meta).with_context(|| format!("reading {}", meta.display()))?)
                .with_context(|| format!("reading {}", meta.display()))?;
        facts.configs.extend(m.config.effective.into_iter().filter(|(_, v)| v == "y" || v == "m").map(|(k, _)| k));
    }
    let tracked = std::fs::read_to_string(list).with_context(|| format!("reading {}", list.display()))?;
    let report = unexecuted::check(&unexecuted::parse_tracked(&tracked)?, &lines, &facts);
    Ok((facts, lines, report))
}

/// The report: what the run had, its figures, the listed lines by reason, the findings.
pub fn describe(run: &Path, facts: &RunFacts, lines: &[unexecuted::Line], report: &Report) -> String {
    let idle = lines.iter().filter(|l| !l.executed()).count();
    let faults = if facts.configs.contains("CONFIG_FAULT_INJECTION") { "with" } else { "without" };
    let mut out = format!(
        "{}: arches {} ({faults} CONFIG_FAULT_INJECTION{}): {} of {} instrumented lines executed, {idle} not\n",
        run.display(),
        facts.arches.join(", "),
        if facts.partial { "; a partial run" } else { "" },
        lines.len() - idle,
        lines.len(),
    );
    for (reason, n) in &report.by_reason {
        out.push_str(&format!("  listed, {reason}: {n}\n"));
    }
    for d in report.describe() {
        out.push_str(&format!("{d}\n"));
    }
    if report.unlisted.is_empty() {
        out.push_str(if report.ok() { "ok: every unexecuted line is listed, and the list is current\n" } else { "" });
    } else {
        out.push_str(&format!("rows to list ({}: reason and why to fill in):\n", unexecuted::TRACKED));
        for l in &report.unlisted {
            out.push_str(&format!("{}\t{}\t{}\t?\t-\t?\n", l.file, l.function, l.text));
        }
    }
    out
}
