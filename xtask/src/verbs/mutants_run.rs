//! `cargo xtask mutants --run`: each planned mutant in turn, its diff an extra `--patch` on
//! the default kernel (the private mirror makes it an incremental build of one object and a
//! relink), only its covering scenarios booted (`cargo xtask run --filter`), the judged run
//! classified and appended to the state file before the next, so an interrupted run resumes.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::Parser;

use crate::flags::{Cmd, RunArgs, Xtask};
use crate::mutants::classify;
use crate::mutants::find::Mutant;
use crate::mutants::plan::{self, Step};
use crate::mutants::report::{MutantResult, Outcome};
use crate::support::exit::{code_for, error, Kind};

/// The `run` command line of one mutant: its patch, the arches of its covering scenarios and
/// their union as filters (each arch runs the union: a superset of its own), its own results
/// folder.
pub fn run_argv(patch: &Path, scenarios: &BTreeMap<String, Vec<String>>, results: &Path) -> Vec<String> {
    let arches: Vec<&str> = scenarios.keys().map(String::as_str).collect();
    let all: BTreeSet<&String> = scenarios.values().flatten().collect();
    let mut argv = vec!["xtask".to_string(), "run".into(), "--arch".into(), arches.join(",")];
    argv.extend(["--patch".to_string(), patch.display().to_string()]);
    argv.extend(["--results".to_string(), results.display().to_string()]);
    for s in all {
        argv.extend(["--filter".to_string(), s.clone()]);
    }
    argv
}

/// Runs every mutant whose step is `Run`, in order, each result appended to the state file
/// (only outcomes of runs: NoCoverage and the equivalents are decided afresh each time, from
/// the map and the list as they are then).
pub fn run_all(mutants: &[Mutant], source: &str, steps: &BTreeMap<String, Step>, out: &Path) -> Result<u8> {
    let state = plan::state_file(out);
    std::fs::create_dir_all(out.join("patches")).with_context(|| format!("creating {}", out.display()))?;
    let todo: Vec<&Mutant> = mutants.iter().filter(|m| matches!(steps.get(&m.id), Some(Step::Run { .. }))).collect();
    for (n, m) in todo.iter().enumerate() {
        let Some(Step::Run { scenarios }) = steps.get(&m.id) else { continue };
        crate::support::progress::line(format!(
            "mutant {}/{}: {} {}:{} {}",
            n + 1,
            todo.len(),
            m.id,
            m.file,
            m.line,
            m.change()
        ));
        let patch = out.join("patches").join(format!("{}.patch", m.id));
        std::fs::write(&patch, m.diff(source)).with_context(|| format!("writing {}", patch.display()))?;
        let results = out.join("runs").join(&m.id);
        let argv = run_argv(&patch, scenarios, &results);
        let Cmd::Run(args) = Xtask::try_parse_from(&argv).context("the mutant's run command line")?.command else {
            unreachable!("run_argv builds a `run` command line")
        };
        let started = std::time::Instant::now();
        let outcome = run_one(args, &results)?;
        let covered_by: BTreeSet<String> = scenarios.values().flatten().cloned().collect();
        let result = MutantResult {
            id: m.id.clone(),
            outcome,
            covered_by: covered_by.into_iter().collect(),
            duration_ms: Some(started.elapsed().as_millis() as u64),
        };
        crate::support::progress::line(format!("mutant {}: {}", m.id, result.outcome.name()));
        plan::append_state(&state, &result)?;
    }
    Ok(0)
}

/// One mutant's outcome; an infrastructure failure or an interrupt is the run's error, not the
/// mutant's outcome, so it is not recorded and the mutant runs again next time.
fn run_one(args: RunArgs, results: &Path) -> Result<Outcome> {
    match args.run() {
        Ok(code) if code == Kind::Interrupted.code() => Err(error(Kind::Interrupted, "interrupted")),
        Ok(code) if code == Kind::Infra.code() => Err(error(
            Kind::Infra,
            format!("the mutant's run failed for a reason of the infrastructure; see {}", results.display()),
        )),
        Ok(_) => {
            let run_json: PathBuf =
                results.join(crate::judging::run_folder::LATEST).join(crate::judging::run_folder::RUN_JSON);
            let run = crate::results::compare::read_run_json(&run_json)?;
            Ok(classify::classify(&run))
        }
        Err(e) if code_for(&e) == Kind::CannotBuild.code() => Ok(classify::compile_error(&format!("{e:#}"))),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mutants_run_command_line_parses_as_run() {
        let scenarios = BTreeMap::from([
            ("x86_64".to_string(), vec!["abi/a".to_string(), "abi/b".to_string()]),
            ("s390x".to_string(), vec!["abi/b".to_string(), "endian/c".to_string()]),
        ]);
        let argv = run_argv(Path::new("/o/patches/abc.patch"), &scenarios, Path::new("/o/runs/abc"));
        let Cmd::Run(args) = Xtask::try_parse_from(&argv).unwrap().command else { panic!() };
        assert_eq!(args.kernel.arch, "s390x,x86_64");
        assert_eq!(args.kernel.source.patches, [PathBuf::from("/o/patches/abc.patch")]);
        assert_eq!(args.select.filters, ["abi/a", "abi/b", "endian/c"]);
        assert_eq!(args.vm.results, Some(PathBuf::from("/o/runs/abc")));
    }
}
