//! One selftest binary's boot reported: its cases and problems as `upstream.json` records them,
//! printed per case with the known failures of `suites/upstream-known.tsv`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Serialize;

use super::tap::{parse, CaseStatus, Parsed};
use crate::run::boot::BootRun;
use crate::support::progress::line;

/// One binary's run on one arch.
#[derive(Debug, Serialize)]
pub struct BinaryReport {
    pub name: String,
    /// The boot's verdict: pass, fail, kernel-panic, timeout, infra-error.
    verdict: String,
    /// The scenario's status as the agent saw it (the binary's exit status decides it).
    status: String,
    out_dir: PathBuf,
    /// The kernel it ran on, for the known-failure table.
    kernelrelease: String,
    #[serde(flatten)]
    pub parsed: Parsed,
}

/// One binary's boot as `upstream.json` records it: its cases, and what went wrong besides.
pub fn report(name: &str, kernelrelease: &str, j: &BootRun) -> BinaryReport {
    let s = j.result().scenarios.first();
    let diagnostics = s.map(|s| s.diagnostics.clone()).unwrap_or_default();
    let mut parsed = parse(&diagnostics);
    if let Some(s) = s {
        if !matches!(s.status, crate::judging::verdict::Status::Pass | crate::judging::verdict::Status::Fail) {
            parsed.problems.push(format!("the binary did not end normally: {}", s.status.as_str()));
        }
    }
    parsed.problems.extend(j.result().problems.iter().cloned());
    BinaryReport {
        name: name.to_string(),
        verdict: j.result().verdict.as_str().to_string(),
        status: s.map_or("not-run", |s| s.status.as_str()).to_string(),
        out_dir: j.outcome.out_dir.clone(),
        kernelrelease: kernelrelease.to_string(),
        parsed,
    }
}

/// `suites/upstream-known.tsv`: (binary, case, kernelrelease) -> the known reason for its failure.
/// A row's kernel column may list several releases, comma-separated: one key each.
pub fn known_failures(text: &str) -> BTreeMap<(String, String, String), String> {
    text.lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(|l| {
            let f: Vec<&str> = l.splitn(4, '\t').collect();
            (f.len() == 4).then_some(f)
        })
        .flat_map(|f| f[2].split(',').map(move |k| ((f[0].into(), f[1].into(), k.trim().into()), f[3].into())))
        .collect()
}

/// One binary's cases as progress lines, a failure's assertions (or last lines) below it and the
/// reason when it is a known failure on that kernel; its problems and the kernel's findings.
pub fn print(arch: &str, r: &BinaryReport, j: &BootRun) {
    let known = known_failures(
        &std::fs::read_to_string(crate::support::checkout::project_root().join("suites/upstream-known.tsv"))
            .unwrap_or_default(),
    );
    for c in &r.parsed.cases {
        let tag = match c.status {
            CaseStatus::Pass => "PASSED",
            CaseStatus::Fail => "FAILED",
            CaseStatus::Skip => "SKIPPED",
        };
        let why = c.reason.as_ref().map_or(String::new(), |r| format!(": {r}"));
        line(format!("[{tag}] {arch}/upstream/{}/{}{why}", r.name, c.name));
        if c.status == CaseStatus::Fail {
            // The assertions say why; without any, the case's last lines are the best guess.
            let shown = if c.assertions.is_empty() { &c.output } else { &c.assertions };
            for l in shown.iter().rev().take(8).collect::<Vec<_>>().into_iter().rev() {
                eprintln!("           | {l}");
            }
            let key = (r.name.clone(), c.name.clone(), r.kernelrelease.clone());
            if let Some(why) = known.get(&key) {
                eprintln!("           | known on {}: {why}", r.kernelrelease);
            }
        }
    }
    let totals = r.parsed.totals.as_deref().unwrap_or("no Totals line");
    let exit = r.parsed.exit.as_deref().unwrap_or("no exit status");
    line(format!("{arch}/upstream/{}: {totals}; {exit}; boot {}", r.name, r.verdict));
    for p in &r.parsed.problems {
        line(format!("{arch}/upstream/{}: problem: {p}", r.name));
    }
    for f in j.result().scenarios.iter().flat_map(|s| &s.findings).chain(&j.result().findings) {
        line(format!("{arch}/upstream/{}: kernel: {}", r.name, f.describe()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_failures_are_read_per_binary_case_and_kernel() {
        let text = std::fs::read_to_string(crate::support::checkout::project_root().join("suites/upstream-known.tsv"))
            .unwrap();
        let known = known_failures(&text);
        assert_eq!(known.len(), 9);
        for kernel in ["6.12.117", "6.12.118"] {
            assert!(known[&("abi_test".into(), "user.flags".into(), kernel.into())].contains("EBUSY"));
        }
        assert!(known[&("abi_test".into(), "user.forks".into(), "7.3.4".into())].contains("0011"));
    }
}
