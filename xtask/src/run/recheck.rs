//! `run`'s gate with the history: once a run with failures is recorded, the failures whose
//! history flips (`history::gate`) run again, once, in a fresh boot of the same kernels (the
//! `--rerun-failed` selection narrowed to them). One that passes there is `unstable` and does
//! not gate; one that fails again is a regression. The re-run has a run folder of its own,
//! named in the first run's `run.json` (`rerun`), `summary.md` and `report.html`; its outcomes are
//! recorded in the history as the first run's rechecks (its cells take the re-run's class), not
//! as a run of their own; `results/latest` stays the first run.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};

use crate::cli::WINDOW;
use crate::history::gate;
use crate::judging::run_folder;
use crate::results::model::{Rerun, Run};
use crate::run::pipeline::{self, Chosen, Pipeline, Ran};
use crate::run::select::Selection;
use crate::support::exit::Kind;
use crate::support::progress::{line, tag};

/// After `ran` (recorded in the chosen history), its failures whose history flips re-run in a
/// fresh boot, `ran`'s code and model (its `rerun`; `run.json`, `summary.md`, `report.html`)
/// updated with what they became. Nothing happens when the run did not fail by its scenarios
/// or was interrupted, with `--history off`, or when no failure's history flips; a history
/// that cannot be read is a warning, and every failure gates. A signal during the re-run ends
/// the command as interrupted.
pub fn recheck(p: &Pipeline, ran: &mut Ran) -> Result<()> {
    if ran.code != Kind::TestFailed.code() || crate::vm::children::interrupted() {
        return Ok(());
    }
    let (Some(dir), Some(model)) = (ran.dir.clone(), ran.model.as_mut()) else { return Ok(()) };
    let classed = match crate::history::classes_of(&model.run_id, WINDOW) {
        Ok(Some(c)) => c,
        Ok(None) => return Ok(()),
        Err(e) => {
            line(format!("warning: history: not read, so every failure gates: {e:#}"));
            return Ok(());
        }
    };
    let suspects = gate::suspects(&classed, &gate::forgivable(model));
    if suspects.is_empty() {
        return Ok(());
    }
    let mut by_arch: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for s in &suspects {
        line(format!(
            "{} {} {}: failed, and its history flips {} time(s) in {} run(s): re-run in a fresh boot",
            tag("RERUN"),
            s.arch,
            s.scenario,
            s.flips,
            s.runs
        ));
        by_arch.entry(s.arch.clone()).or_default().insert(s.scenario.clone());
    }
    let again = rerun(p, &dir, by_arch);
    // A pass counts only from a re-run whose boots ended sound.
    let statuses: BTreeMap<(String, String), String> = again
        .iter()
        .filter(|r| gate::sound(r))
        .flat_map(|r| &r.arches)
        .flat_map(|a| a.scenarios.iter().map(|s| ((a.arch.clone(), s.name.clone()), s.status.as_str().to_string())))
        .collect();
    let rechecked = gate::decide(&suspects, &statuses);
    for r in &rechecked {
        let said = if r.gates() { "REGRESSION" } else { "UNSTABLE" };
        line(format!("{} {}", tag(said), r.describe()));
    }
    let failures: Vec<(String, String)> = model
        .arches
        .iter()
        .flat_map(|a| a.scenarios.iter().filter(|s| s.status.is_failure()).map(|s| (a.arch.clone(), s.name.clone())))
        .collect();
    ran.code = gate::code(ran.code, &failures, &rechecked);
    if crate::vm::children::interrupted() && !crate::vm::children::timed_out() {
        // A signal during the re-run ends the command as interrupted (`--timeout` main says).
        ran.code = Kind::Interrupted.code();
    }
    if ran.code == 0 {
        line("every failure passed on its re-run: unstable, not gating (exit 0)");
    }
    model.rerun = Some(Rerun { run_id: again.map(|r| r.run_id), scenarios: rechecked });
    crate::history::record_rerun(model);
    rewrite(&dir, model)
}

/// The re-run round: the scenarios of `by_arch` on the pipeline's kernels, a fresh boot per
/// arch, published into a run folder of its own but not recorded; `results/latest` pointed back
/// at `first`. A re-run that cannot boot is a warning and leaves no model (every failure gates).
fn rerun(p: &Pipeline, first: &Path, by_arch: BTreeMap<String, BTreeSet<String>>) -> Option<Run> {
    let chosen = Chosen {
        suites: p.chosen.suites.clone(),
        select: Selection::rerunning(first.to_path_buf(), by_arch),
        catalogue: p.chosen.catalogue.clone(),
        batch: None,
    };
    let again =
        pipeline::run(&chosen, &p.built, &p.opts).and_then(|judged| pipeline::publish_as(&judged, &p.built, false));
    if let (Some(results), Some(id)) = (first.parent(), first.file_name()) {
        let latest = results.join(run_folder::LATEST);
        let _ = std::fs::remove_file(&latest);
        let _ = std::os::unix::fs::symlink(id, &latest);
    }
    match again {
        Ok(run) => run,
        Err(e) => {
            line(format!("warning: the re-run did not run, so every failure gates: {e:#}"));
            None
        }
    }
}

/// The first run's `run.json`, `summary.md` and `report.html` written again with its re-run; the re-run's
/// section appended to `$GITHUB_STEP_SUMMARY` when that is set.
fn rewrite(dir: &Path, model: &Run) -> Result<()> {
    let url = crate::results::folder_url(dir, &model.run_id);
    for r in crate::results::render_all(model, &url)? {
        if [run_folder::RUN_JSON, "summary.md", "report.html"].contains(&r.file.as_str()) {
            let path = dir.join(&r.file);
            crate::support::files::write_atomic(&path, &r.bytes)
                .with_context(|| format!("writing {}", path.display()))?;
        }
    }
    if let Some(summary) = std::env::var_os("GITHUB_STEP_SUMMARY").filter(|s| !s.is_empty()) {
        let mut section = String::new();
        crate::results::markdown::rerun(model, &mut section);
        let mut f = std::fs::OpenOptions::new().create(true).append(true).open(&summary)?;
        f.write_all(section.as_bytes())?;
    }
    Ok(())
}
