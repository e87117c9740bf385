//! What a campaign shows and writes: the selection listed (`--list`, `--json`) and counted, and
//! `--report`'s `mutants.json` (Stryker's schema), `summary.md` and `mutants.html`.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};
use serde_json::json;

use super::target::Target;
use crate::cli::MutantsArgs;
use crate::mutants::mutant::{Mutant, Operator};
use crate::mutants::plan::Step;
use crate::mutants::report;

/// The selection as `--json` or `--list` asks, then counted by operator and by planned step
/// on stderr.
pub fn show(
    args: &MutantsArgs,
    target: &Target,
    mutants: &[Mutant],
    steps: &BTreeMap<String, Step>,
    total: usize,
) -> Result<()> {
    if args.json {
        print_json(target, mutants, steps)?;
    } else if args.list {
        for m in mutants {
            let planned = steps.get(&m.id).map(|s| format!("  [{}]", describe(s))).unwrap_or_default();
            println!("{}  {}:{}  {}  {}  {}{planned}", m.id, m.file, m.line, m.function, m.operator, m.change());
        }
    }
    let per_operator: Vec<String> = Operator::ALL
        .iter()
        .map(|op| format!("{op} {}", mutants.iter().filter(|m| m.operator == *op).count()))
        .collect();
    eprintln!(
        "{} mutants of {} ({total} in the file): {}",
        mutants.len(),
        target.path.display(),
        per_operator.join(", ")
    );
    if !steps.is_empty() {
        let mut tally: BTreeMap<String, usize> = BTreeMap::new();
        for s in steps.values() {
            *tally.entry(describe(s).split(':').next().unwrap_or_default().to_string()).or_default() += 1;
        }
        let tally: Vec<String> = tally.iter().map(|(k, n)| format!("{k} {n}")).collect();
        eprintln!("planned: {}", tally.join(", "));
    }
    Ok(())
}

/// `--report`: what is decided of the selected mutants, as Stryker's `mutants.json`,
/// `summary.md` and `mutants.html` in `out`.
pub fn write_report(target: &Target, mutants: &[Mutant], steps: &BTreeMap<String, Step>, out: &Path) -> Result<()> {
    let results = steps
        .iter()
        .filter_map(|(id, s)| match s {
            Step::Decided(r) => Some((id.clone(), r.clone())),
            Step::Run { .. } => None,
        })
        .collect();
    let json = report::stryker_json(&target.name, &target.text, mutants, &results);
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let path = out.join("mutants.json");
    std::fs::write(&path, serde_json::to_string_pretty(&json)?)
        .with_context(|| format!("writing {}", path.display()))?;
    let summary = out.join("summary.md");
    let page = crate::mutants::summary::render(&target.name, mutants, &results);
    std::fs::write(&summary, page).with_context(|| format!("writing {}", summary.display()))?;
    let html = out.join("mutants.html");
    let page = crate::mutants::html::render(&target.name, &target.text, mutants, &results);
    std::fs::write(&html, page).with_context(|| format!("writing {}", html.display()))?;
    eprintln!("wrote {}, {} and {}", path.display(), summary.display(), html.display());
    Ok(())
}

/// A step in a few words: `NoCoverage`, `Equivalent`, `Killed` (done earlier), `run: 3
/// scenarios on x86_64`.
fn describe(step: &Step) -> String {
    match step {
        Step::Decided(r) => r.outcome.name().to_string(),
        Step::Run { scenarios } if scenarios.is_empty() => "to run".to_string(),
        Step::Run { scenarios } => {
            let per_arch: Vec<String> = scenarios.iter().map(|(a, s)| format!("{} on {a}", s.len())).collect();
            format!("to run: {}", per_arch.join(", "))
        }
    }
}

fn print_json(target: &Target, mutants: &[Mutant], steps: &BTreeMap<String, Step>) -> Result<()> {
    let list: Vec<_> = mutants
        .iter()
        .map(|m| {
            let mut v = serde_json::to_value(m).expect("a mutant serialises");
            v["diff"] = json!(m.diff(&target.text));
            match steps.get(&m.id) {
                Some(Step::Decided(r)) => v["result"] = serde_json::to_value(r).expect("a result serialises"),
                Some(Step::Run { scenarios }) if !scenarios.is_empty() => v["scenarios"] = json!(scenarios),
                _ => {}
            }
            v
        })
        .collect();
    println!("{}", serde_json::to_string_pretty(&list).context("writing JSON")?);
    Ok(())
}
