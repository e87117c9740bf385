//! `cargo xtask upstream`: the kernel's own user_events selftests, built from the same tree as
//! the kernel and run one binary per fresh boot, reported per test case beside our results.
//! Not gating: only an infrastructure failure changes the exit code.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::Serialize;

use crate::kernel::build::Built;
use crate::run::boot::{self, BootRun, Job};
use crate::support::cmd::cmd;
use crate::support::exit::{error, Kind};
use crate::support::progress::{line, Task};

const SELFTEST_DIR: &str = "tools/testing/selftests/user_events";
/// The deadline when the selftests' `settings` file names none.
const DEFAULT_TIMEOUT_S: u64 = 120;

/// The selftest binaries built for one kernel.
pub struct Binaries {
    pub names: Vec<String>,
    pub dir: PathBuf,
    pub timeout_s: u64,
}

/// Builds `tools/testing/selftests/user_events` statically from the kernel's own mirror tree,
/// against that tree's UAPI headers; everything written goes under the cache, never the tree.
pub fn build(built: &Built) -> Result<Binaries> {
    let arch = built.arch;
    let src = built.source.as_ref().ok_or_else(|| {
        error(Kind::BadInput, "upstream selftests need the kernel's source: not available with --kernel-image")
    })?;
    let (mirror, _lock) = crate::kernel::build::source_tree(src)?;
    let dir = mirror.join(SELFTEST_DIR);
    let makefile = std::fs::read_to_string(dir.join("Makefile")).map_err(|e| {
        error(Kind::CannotBuild, format!("{}: {e} (this kernel has no user_events selftests)", dir.display()))
    })?;
    let names = test_programs(&makefile);
    let settings = std::fs::read_to_string(dir.join("settings")).unwrap_or_default();
    let timeout_s = settings_timeout(&settings).unwrap_or(DEFAULT_TIMEOUT_S);

    let out = src.cache_dir.join("selftests").join(format!("{}-{}", arch.name, &built.metadata.key[..24]));
    let (objtree, headers, bin) = (out.join("obj"), out.join("headers"), out.join("bin"));
    std::fs::create_dir_all(&bin)?;
    let log_path = out.join("build.log");
    let mut log = String::new();
    let task = Task::start(format!("{}: building the upstream user_events selftests", arch.name));
    // O= keeps fixdep, unifdef and usr/ out of the (hard-linked) mirror.
    let sh = crate::support::cmd::sh()?;
    let (o, vars, hdr_path) = (format!("O={}", objtree.display()), arch.make_vars(), &headers);
    let hdr = cmd!(sh, "make -C {mirror} {o} {vars...} INSTALL_HDR_PATH={hdr_path} headers_install");
    let cross = Some(format!("CROSS_COMPILE={}", arch.cross_compile)).filter(|_| !arch.cross_compile.is_empty());
    // lib.mk reads KHDR_INCLUDES (default: the tree's own usr/include) and USERLDFLAGS.
    let khdr = format!("KHDR_INCLUDES=-isystem {}", headers.join("include").display());
    let output = &bin;
    let tests = cmd!(sh, "make -C {dir} OUTPUT={output} {cross...} {khdr} USERLDFLAGS=-static");
    // Captured whole, not streamed: the log is written once each make ends.
    for cmd in [hdr, tests] {
        let shown = cmd.to_string();
        log.push_str(&format!("$ {shown}\n"));
        let run = cmd.ignore_status().output().with_context(|| format!("starting {shown}"))?;
        log.push_str(&String::from_utf8_lossy(&run.stdout));
        log.push_str(&String::from_utf8_lossy(&run.stderr));
        std::fs::write(&log_path, &log)?;
        if !run.status.success() {
            drop(task);
            return Err(error(
                Kind::CannotBuild,
                format!(
                    "{}: building the upstream selftests failed ({})\n==== first errors ====\n{}\n==== full log: {} ====",
                    arch.name,
                    run.status,
                    first_errors(&log),
                    log_path.display()
                ),
            ));
        }
    }
    task.finish(format!("{} ({})", names.join(" "), bin.display()));
    Ok(Binaries { names, dir: bin, timeout_s })
}

/// `TEST_GEN_PROGS = a b` (and `+=` lines) from a selftest Makefile.
fn test_programs(makefile: &str) -> Vec<String> {
    let mut names = Vec::new();
    for l in makefile.lines() {
        let Some(rest) = l.strip_prefix("TEST_GEN_PROGS") else { continue };
        let rest = rest.trim_start();
        let Some(value) = ["+=", ":=", "="].iter().find_map(|op| rest.strip_prefix(op)) else { continue };
        if !rest.starts_with("+=") {
            names.clear();
        }
        names.extend(value.split_whitespace().map(str::to_string));
    }
    names
}

fn settings_timeout(settings: &str) -> Option<u64> {
    settings.lines().find_map(|l| l.trim().strip_prefix("timeout=")?.trim().parse().ok())
}

/// The compiler's error lines, or the log's tail when there are none.
fn first_errors(log: &str) -> String {
    let errors: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("error:") || l.contains("Error ") || l.contains("undefined reference"))
        .take(12)
        .collect();
    if errors.is_empty() {
        log.lines().rev().take(12).collect::<Vec<_>>().into_iter().rev().collect::<Vec<_>>().join("\n")
    } else {
        errors.join("\n")
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CaseStatus {
    Pass,
    Fail,
    Skip,
}

/// One kselftest test case.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Case {
    pub name: String,
    pub status: CaseStatus,
    /// The SKIP reason, or why a case without a result line counts as failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// `file.c:LINE:case:Expected ...` lines and the harness's "terminated" lines.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub assertions: Vec<String>,
    /// The case's own `#` lines (without the `#  RUN` and `#  OK/FAIL` markers).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub output: Vec<String>,
}

/// A selftest binary's TAP output, read back.
#[derive(Debug, Default, PartialEq, Eq, Serialize)]
pub struct Parsed {
    pub plan: Option<usize>,
    pub cases: Vec<Case>,
    /// The harness's `# Totals: pass:.. fail:..` line.
    pub totals: Option<String>,
    /// The agent's `step 1: exec ...: exit N (expected 0)` line.
    pub exit: Option<String>,
    pub problems: Vec<String>,
}

/// Parses kselftest_harness TAP (as the scenario's diagnostic lines). Lines between two
/// results belong to the later one; a `#  RUN` with no result means the stream ended in it.
pub fn parse(lines: &[String]) -> Parsed {
    let mut p = Parsed::default();
    let mut pending: Vec<String> = Vec::new();
    let mut running: Option<String> = None;
    for raw in lines {
        let l = raw.trim_end();
        if l.starts_with("step ") && l.contains(": exec ") {
            p.exit = Some(l.split_once(": ").map_or(l, |(_, r)| r).to_string());
        } else if l.starts_with("TAP version") || l.starts_with("KTAP version") {
        } else if let Some(n) = l.strip_prefix("1..") {
            p.plan = n.trim().parse().ok();
        } else if let Some(t) = l.strip_prefix("# Totals:") {
            p.totals = Some(t.trim().to_string());
        } else if let Some((ok, rest)) = result_line(l) {
            let (name, directive) = match rest.split_once(" # ") {
                Some((n, d)) => (n.trim(), Some(d.trim())),
                None => (rest.trim(), None),
            };
            let skip = directive.and_then(|d| d.strip_prefix("SKIP").or_else(|| d.strip_prefix("skip")));
            let status = match (ok, skip) {
                (_, Some(_)) => CaseStatus::Skip,
                (true, None) => CaseStatus::Pass,
                (false, None) => CaseStatus::Fail,
            };
            let reason = skip.map(|r| r.trim().to_string()).filter(|r| !r.is_empty());
            p.cases.push(case(name.to_string(), status, reason, std::mem::take(&mut pending)));
            running = None;
        } else {
            let text = l.strip_prefix('#').map_or(l, |t| t.strip_prefix(' ').unwrap_or(t));
            if let Some(name) = text.strip_prefix(" RUN ") {
                // Output before a RUN belongs to no case (the harness's preamble).
                pending.clear();
                running = Some(name.trim().trim_end_matches("...").trim().to_string());
            } else if !text.is_empty() {
                pending.push(text.to_string());
            }
        }
    }
    if let Some(name) = running {
        let why = "no result line: the output ended while it ran (crash, deadline or kernel panic)";
        p.cases.push(case(name, CaseStatus::Fail, Some(why.to_string()), pending));
    }
    if let Some(n) = p.plan.filter(|n| *n != p.cases.len()) {
        p.problems.push(format!("planned {n} test(s), {} reported", p.cases.len()));
    }
    if p.plan.is_none() {
        p.problems.push("no TAP plan line (1..N): the binary printed no kselftest output".to_string());
    }
    p
}

/// `ok 3 name...` / `not ok 3 name...` -> (ok, "name...").
fn result_line(l: &str) -> Option<(bool, &str)> {
    let (ok, rest) = match l.strip_prefix("not ok ") {
        Some(r) => (false, r),
        None => (true, l.strip_prefix("ok ")?),
    };
    let (num, name) = rest.split_once(' ').unwrap_or((rest, ""));
    num.parse::<u32>().ok()?;
    Some((ok, name))
}

fn case(name: String, status: CaseStatus, reason: Option<String>, lines: Vec<String>) -> Case {
    // The harness's own markers say nothing the status does not.
    let output: Vec<String> = lines
        .into_iter()
        .filter(|t| {
            let w = t.trim_start();
            !(w.starts_with("OK ") || w.starts_with("FAIL ") || w.starts_with("SKIP ") || w.starts_with("XFAIL "))
        })
        .collect();
    let assertions =
        output.iter().filter(|t| is_assertion(t) || t.contains("Test terminated")).cloned().collect::<Vec<_>>();
    let output = if status == CaseStatus::Pass { Vec::new() } else { output };
    Case { name, status, reason, assertions, output }
}

/// `abi_test.c:123:case:Expected ...`: a C file, a line number, then the message.
fn is_assertion(t: &str) -> bool {
    let mut parts = t.splitn(3, ':');
    let (Some(file), Some(num)) = (parts.next(), parts.next()) else { return false };
    file.ends_with(".c") && !num.is_empty() && num.bytes().all(|b| b.is_ascii_digit())
}

/// One binary's run on one arch.
#[derive(Debug, Serialize)]
struct BinaryReport {
    name: String,
    /// The boot's verdict: pass, fail, kernel-panic, timeout, infra-error.
    verdict: String,
    /// The scenario's status as the agent saw it (the binary's exit status decides it).
    status: String,
    out_dir: PathBuf,
    /// The kernel it ran on, for the known-failure table.
    kernelrelease: String,
    #[serde(flatten)]
    parsed: Parsed,
}

impl crate::flags::UpstreamArgs {
    /// `cargo xtask upstream`: the selftests on each kernel, into a new run folder.
    pub fn run(self) -> Result<u8> {
        use crate::setup::provision::Needs;
        let p = crate::verbs::prepare::prepare(&Needs::upstream(&self), &self.kernel, &self.vm)?;
        let run_dir = crate::judging::run_folder::new_run_dir(&p.opts.results)?;
        run(&p.built, &p.opts, &run_dir)
    }
}

/// Runs every selftest binary of every kernel, each in its own boot, and writes
/// `<run_dir>/<arch>/upstream.json`. Returns 0, or 3 when a boot had an infrastructure error.
pub fn run(built: &[Built], opts: &boot::Options, run_dir: &Path) -> Result<u8> {
    let mut binaries = Vec::new();
    for b in built {
        binaries.push(build(b)?);
    }
    let mut reports: BTreeMap<&str, Vec<BinaryReport>> = BTreeMap::new();
    let mut code = 0;
    // Each binary in a fresh boot: the selftests leave events and enablements behind.
    let rounds = binaries.iter().map(|b| b.names.len()).max().unwrap_or(0);
    for round in 0..rounds {
        let mut jobs = Vec::new();
        let mut plans = Vec::new();
        for (b, bins) in built.iter().zip(&binaries) {
            let Some(name) = bins.names.get(round) else { continue };
            let bytes = std::fs::read(bins.dir.join(name))
                .with_context(|| format!("reading the built selftest {}", bins.dir.join(name).display()))?;
            let guest = format!("/bin/{name}");
            let mut plan = protocol::Plan::empty("upstream");
            plan.scenarios.push(protocol::Scenario {
                name: format!("upstream/{name}"),
                deadline_ms: bins.timeout_s * 1000,
                steps: vec![protocol::Step::Exec(protocol::steps::Exec { argv: vec![guest.clone()], expect_exit: 0 })],
            });
            let out_dir = run_dir.join(b.arch.name).join("upstream").join(name);
            jobs.push(Job {
                built: b,
                plan: plan.clone(),
                extra: vec![(guest, bytes)],
                out_dir,
                xfail: Default::default(),
            });
            plans.push((name.clone(), plan));
        }
        let outcomes = boot::run_all(jobs, opts)?;
        for (outcome, (name, plan)) in outcomes.into_iter().zip(plans) {
            let judged = BootRun::judge(outcome, &plan, Default::default())?;
            if matches!(judged.result().verdict, crate::judging::verdict::BootVerdict::InfraError(_)) {
                code = Kind::Infra.code();
            }
            let release = built
                .iter()
                .find(|b| b.arch.name == judged.outcome.arch.name)
                .map_or(String::new(), |b| b.metadata.kernelrelease.clone());
            let report = report(&name, &release, &judged);
            print(judged.outcome.arch.name, &report, &judged);
            reports.entry(judged.outcome.arch.name).or_default().push(report);
        }
    }
    for b in built {
        let arch = b.arch.name;
        let bins = reports.remove(arch).unwrap_or_default();
        let count = |s: CaseStatus| bins.iter().flat_map(|r| &r.parsed.cases).filter(|c| c.status == s).count();
        let (pass, fail, skip) = (count(CaseStatus::Pass), count(CaseStatus::Fail), count(CaseStatus::Skip));
        line(format!(
            "{arch}: upstream selftests on {}: {pass} passed, {fail} failed, {skip} skipped (not gating)",
            b.metadata.kernelrelease
        ));
        let record = serde_json::json!({
            "schema": 1,
            "arch": arch,
            "kernelrelease": b.metadata.kernelrelease,
            "source": b.metadata.source.label,
            "selftests": SELFTEST_DIR,
            "totals": { "pass": pass, "fail": fail, "skip": skip },
            "binaries": bins,
        });
        let path = run_dir.join(arch).join("upstream.json");
        std::fs::create_dir_all(run_dir.join(arch))?;
        std::fs::write(&path, serde_json::to_vec_pretty(&record)?)?;
    }
    line(format!("upstream results: {}", run_dir.display()));
    Ok(code)
}

fn report(name: &str, kernelrelease: &str, j: &BootRun) -> BinaryReport {
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
pub fn known_failures(text: &str) -> BTreeMap<(String, String, String), String> {
    text.lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(|l| {
            let f: Vec<&str> = l.splitn(4, '\t').collect();
            (f.len() == 4).then(|| ((f[0].into(), f[1].into(), f[2].into()), f[3].into()))
        })
        .collect()
}

fn print(arch: &str, r: &BinaryReport, j: &BootRun) {
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
        assert_eq!(known.len(), 3);
        assert!(known[&("abi_test".into(), "user.flags".into(), "6.12.117".into())].contains("EBUSY"));
    }

    fn lines(text: &str) -> Vec<String> {
        text.lines().map(str::to_string).collect()
    }

    const OUTPUT: &str = "\
TAP version 13
1..4
# Starting 4 tests from 1 test cases.
#  RUN           user.enablement ...
#            OK  user.enablement
ok 1 user.enablement
#  RUN           user.clear ...
# abi_test.c:310:clear:Expected 0 (0) == ioctl(self->data_fd, DIAG_IOCSDEL, \"__abi_event\") (-1)
# clear: Test terminated by assertion
#          FAIL  user.clear
not ok 2 user.clear
#  RUN           user.fork ...
#      SKIP      madvise not supported
#            OK  user.fork
ok 3 user.fork # SKIP madvise not supported
#  RUN           user.perf_write ...
#            OK  user.perf_write
ok 4 user.perf_write
# FAILED: 3 / 4 tests passed.
# Totals: pass:2 fail:1 xfail:0 xpass:0 skip:1 error:0
step 1: exec /bin/abi_test: exit 1 (expected 0)
";

    #[test]
    fn kselftest_output_becomes_cases() {
        let p = parse(&lines(OUTPUT));
        assert_eq!(p.plan, Some(4));
        let got: Vec<_> = p.cases.iter().map(|c| (c.name.as_str(), c.status)).collect();
        assert_eq!(
            got,
            [
                ("user.enablement", CaseStatus::Pass),
                ("user.clear", CaseStatus::Fail),
                ("user.fork", CaseStatus::Skip),
                ("user.perf_write", CaseStatus::Pass)
            ]
        );
        assert_eq!(
            p.cases[1].assertions,
            [
                "abi_test.c:310:clear:Expected 0 (0) == ioctl(self->data_fd, DIAG_IOCSDEL, \"__abi_event\") (-1)",
                "clear: Test terminated by assertion"
            ]
        );
        assert_eq!(p.cases[2].reason.as_deref(), Some("madvise not supported"));
        assert!(p.cases[0].assertions.is_empty() && p.cases[0].output.is_empty());
        assert_eq!(p.totals.as_deref(), Some("pass:2 fail:1 xfail:0 xpass:0 skip:1 error:0"));
        assert_eq!(p.exit.as_deref(), Some("exec /bin/abi_test: exit 1 (expected 0)"));
        assert!(p.problems.is_empty(), "{:?}", p.problems);
    }

    #[test]
    fn a_truncated_stream_fails_the_running_case() {
        let cut: String = OUTPUT.lines().take(9).map(|l| format!("{l}\n")).collect();
        let p = parse(&lines(&cut));
        assert_eq!(p.cases.len(), 2);
        assert_eq!(p.cases[1].name, "user.clear");
        assert_eq!(p.cases[1].status, CaseStatus::Fail);
        assert!(p.cases[1].reason.as_deref().unwrap().starts_with("no result line"));
        assert_eq!(p.cases[1].assertions.len(), 2);
        assert_eq!(p.totals, None);
        assert_eq!(p.problems, ["planned 4 test(s), 2 reported"]);
        assert_eq!(parse(&[]).problems.len(), 1, "no output at all is a problem");
    }

    #[test]
    fn makefile_and_settings_are_read() {
        let mk = "CFLAGS += -Wall\nTEST_GEN_PROGS = ftrace_test dyn_test\nTEST_GEN_PROGS += perf_test abi_test\n";
        assert_eq!(test_programs(mk), ["ftrace_test", "dyn_test", "perf_test", "abi_test"]);
        assert_eq!(settings_timeout("timeout=90\n"), Some(90));
        assert_eq!(settings_timeout(""), None);
        assert!(is_assertion("dyn_test.c:12:basic:Expected 0 (0) == x (1)"));
        assert!(!is_assertion("Starting 4 tests from 1 test cases."));
    }
}
