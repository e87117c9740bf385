//! The result model of one run (`results/<run-id>/run.json`): provenance, then per arch the
//! boots and every scenario with its status, duration, metrics, log excerpt and kernel
//! findings. Every renderer reads this and nothing else; `compare` and `merge` read it back.
//!
//! Versioning: `schema_version` grows by one on any change a reader could trip on (a field
//! removed, renamed or retyped, a status added). New optional fields do not bump it; readers
//! ignore fields they do not know.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

mod finding;
pub use finding::{Finding, Frame};

/// The `schema_version` this build writes and reads.
pub const SCHEMA_VERSION: u32 = 1;
/// Where a coverage run keeps its figures, relative to the run folder.
pub const COVERAGE_SUMMARY: &str = "coverage/summary.json";

/// One run: every arch that booted, from one source.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Run {
    pub schema_version: u32,
    /// The run folder's name, `YYYYMMDD-HHMMSS-<pid>`.
    pub run_id: String,
    /// When this model was derived from the logs (RFC 3339, UTC).
    pub generated_at: String,
    /// The machine that ran QEMU; `None` for runs saved before it was recorded.
    pub host: Option<Host>,
    /// The worst arch verdict.
    pub verdict: RunVerdict,
    pub totals: Totals,
    pub arches: Vec<ArchRun>,
    /// How long each phase of the invocation that made the run took (`timings.json`); empty
    /// for runs saved before it was recorded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub timings: Vec<crate::support::timings::Phase>,
    /// A coverage run's figures (`coverage/summary.json`, written by `coverage/`); `None` for
    /// a normal run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coverage: Option<CoverageSummary>,
    /// The failures `run` ran again in a fresh boot because their history flips, and what
    /// each became; `None` when none was (no failure, no flips, `--history off`,
    /// `--no-rerun-unstable`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rerun: Option<Rerun>,
}

/// The re-run round of a run: its own run folder, and each failure it ran again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rerun {
    /// The re-run's run id, a run folder beside this one (`None` when its boots left none).
    pub run_id: Option<String>,
    pub scenarios: Vec<Rechecked>,
}

/// A failure run again: its history's flips in how many runs, the re-run's status, and its
/// class: `unstable` (passed on the re-run: does not gate) or `regression` (gates).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rechecked {
    pub arch: String,
    pub scenario: String,
    /// The cell's flips (pass to fail and fail to pass) in the history's window, this run's
    /// failure counted.
    pub flips: usize,
    /// The runs of the window that had a verdict, this one counted.
    pub runs: usize,
    /// The scenario's status in the re-run (`not-run` when the re-run has none).
    pub rerun_status: String,
    /// `unstable` or `regression`.
    pub class: String,
}

impl Rechecked {
    /// Whether it still gates the run.
    pub fn gates(&self) -> bool {
        self.class != "unstable"
    }

    /// `x86_64 a/b: flips 2 times in 3 runs; the re-run: pass -> unstable (does not gate)`.
    pub fn describe(&self) -> String {
        let gate = if self.gates() { "gates" } else { "does not gate" };
        format!(
            "{} {}: its history flips {} time(s) in {} run(s); re-run in a fresh boot: {} -> {} ({gate})",
            self.arch, self.scenario, self.flips, self.runs, self.rerun_status, self.class
        )
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Host {
    pub hostname: String,
    /// `uname -r` of the host.
    pub kernel: String,
    /// `PRETTY_NAME` of `/etc/os-release`.
    pub os: String,
    pub cpus: usize,
}

impl Host {
    /// `name (OS, Linux 6.1.0, 2 CPUs)`, as the reports show it.
    pub fn describe(&self) -> String {
        format!("{} ({}, Linux {}, {} CPUs)", self.hostname, self.os, self.kernel, self.cpus)
    }
}

/// One arch: its kernel, its boots (the shared one and any `isolated` ones) and its scenarios.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArchRun {
    /// `x86_64`, `arm64`.
    pub arch: String,
    /// The worst verdict of its boots, expected failures counted.
    pub verdict: RunVerdict,
    /// `None` when the run folder has no kernel metadata and the image's cache entry is gone.
    pub kernel: Option<Kernel>,
    pub boots: Vec<Boot>,
    /// Planned scenarios in boot order (the shared boot, then isolated boots), then those left
    /// out of the plan because the kernel does not meet their `requires`.
    pub scenarios: Vec<Scenario>,
    pub totals: Totals,
}

/// Where the kernel came from and how it was built (the build cache's `metadata.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Kernel {
    /// `uname -r` of the built kernel.
    pub release: String,
    /// `debian-package`, `tarball`, `git-tree`, `tree` or `prebuilt`.
    pub source_kind: String,
    /// The source in words: `Debian linux-source-6.12 6.12.117-1~deb12u1`, a path, a commit.
    pub source: String,
    /// The digest that changes whenever the source's content does.
    pub source_id: String,
    /// The git commit when the source is a git tree.
    pub git_commit: Option<String>,
    /// Applied in order.
    pub patches: Vec<PatchRef>,
    /// sha256 of the final `.config`.
    pub config_hash: String,
    /// The fragments merged into the configuration, in order.
    pub fragments: Vec<String>,
    /// Compiler name and version (`gcc (Debian 12.2.0-14) 12.2.0`).
    pub compiler: String,
    /// The build cache key.
    pub build_key: String,
    /// The build knobs' make variables (`LLVM=1`, `CC=ccache gcc`, `--make-arg`s); absent
    /// for a build without knobs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub make_vars: Vec<String>,
    /// When the build finished (RFC 3339; a cache hit's is the original build's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub built_at: Option<String>,
    /// How long the source, configure, build and install phases took together.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build_ms: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PatchRef {
    pub name: String,
    pub sha256: String,
}

/// One QEMU boot and what the host saw of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Boot {
    /// The boot's folder in the run: `x86_64` or `x86_64.isolated-1`.
    pub name: String,
    /// `kvm` or `tcg`.
    pub accel: String,
    /// The first line of `qemu-system-* --version`; `None` when it was not recorded.
    pub qemu_version: Option<String>,
    /// The full QEMU command line.
    pub qemu_command: String,
    /// The sandbox of the virtiofsd serving the guest's folders (`namespace`, `chroot`,
    /// `none`); absent when the boot shared none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub virtiofsd_sandbox: Option<String>,
    pub verdict: RunVerdict,
    /// How QEMU ended: `exited with code 0`, `killed after 60000 ms: ...`.
    pub ended: String,
    pub wall_ms: u64,
    /// When `/init` started; `None` when it never did.
    pub boot_ms: Option<u64>,
    /// When QEMU started (RFC 3339); `None` for boots recorded before it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    /// Kernel reports outside any scenario (boot, between scenarios, teardown).
    pub findings: Vec<Finding>,
    /// Inconsistencies between the plan, the result channel and the console.
    pub problems: Vec<String>,
    /// The raw logs, relative to the run folder.
    pub console_log: String,
    pub results_log: String,
}

impl Boot {
    /// The boot's health outside its scenarios, and why: `error` for an infrastructure
    /// verdict, `fail` for kernel reports or inconsistencies outside any scenario, else `pass`.
    /// (A crash inside a scenario is that scenario's `error`.)
    pub fn health(&self) -> (Status, String) {
        if self.verdict.kind == "infra-error" {
            let detail = self.verdict.detail.as_deref().unwrap_or("unknown");
            return (Status::Error, format!("infrastructure failure: {detail}"));
        }
        let mut why = Vec::new();
        if !self.findings.is_empty() {
            why.push(format!(
                "{} kernel report(s) outside the scenarios: {}",
                self.findings.len(),
                self.findings[0].summary
            ));
        }
        if !self.problems.is_empty() {
            why.push(format!("{} problem(s): {}", self.problems.len(), self.problems[0]));
        }
        if why.is_empty() {
            (Status::Pass, format!("{}, no kernel report outside the scenarios", self.ended))
        } else {
            (Status::Fail, why.join("; "))
        }
    }
}

/// A boot's (or an arch's, or a run's) verdict: the worst thing that happened.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunVerdict {
    /// `pass`, `fail`, `timeout`, `kernel-panic`, `boot-failure`, `interrupted` or
    /// `infra-error`, in increasing severity.
    pub kind: String,
    /// The scenario a panic happened in, or what went wrong with the infrastructure.
    pub detail: Option<String>,
}

impl RunVerdict {
    pub fn pass() -> Self {
        RunVerdict { kind: "pass".into(), detail: None }
    }

    /// A boot's verdict in the model's words (and with it the exit code, [`RunVerdict::exit_code`]).
    pub fn of(v: &crate::judging::verdict::BootVerdict) -> RunVerdict {
        use crate::judging::verdict::BootVerdict;
        let detail = match v {
            BootVerdict::KernelPanic { scenario } => scenario.clone(),
            BootVerdict::InfraError(e) | BootVerdict::BootFailure(e) => Some(e.clone()),
            BootVerdict::Pass | BootVerdict::Fail | BootVerdict::Timeout | BootVerdict::Interrupted => None,
        };
        RunVerdict { kind: v.as_str().to_string(), detail }
    }

    pub fn severity(&self) -> u8 {
        match self.kind.as_str() {
            "pass" => 0,
            "fail" => 1,
            "timeout" => 2,
            "kernel-panic" => 3,
            "boot-failure" => 4,
            "interrupted" => 5,
            _ => 6,
        }
    }

    /// The process exit code this verdict asks for (see `exit.rs`).
    pub fn exit_code(&self) -> u8 {
        match self.severity() {
            0 => 0,
            1..=4 => crate::support::exit::Kind::TestFailed.code(),
            5 => crate::support::exit::Kind::Interrupted.code(),
            _ => crate::support::exit::Kind::Infra.code(),
        }
    }

    /// The worse of the two (the first on a tie).
    pub fn worst(self, other: &RunVerdict) -> RunVerdict {
        if other.severity() > self.severity() {
            other.clone()
        } else {
            self
        }
    }
}

/// One scenario on one arch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Scenario {
    /// `suite/scenario`.
    pub name: String,
    pub suite: String,
    /// The boot it ran in; `None` when it was left out of the plan.
    pub boot: Option<String>,
    pub status: Status,
    /// The judge's own word when it says more than `status`: `timeout` (a `fail`), `crashed`
    /// (an `error`: the kernel died while it ran).
    pub judged: Option<String>,
    /// Why: the skip reason, the xfail mark's reason, why it was not run.
    pub reason: Option<String>,
    pub duration_ms: Option<u64>,
    /// Measured figures by name (throughput and the like); empty for pure conformance checks.
    pub metrics: BTreeMap<String, Metric>,
    /// The scenario's diagnostics (the agent's step lines, then the host's explanations), at
    /// most [`LOG_LINES`] of them.
    pub log: Vec<String>,
    /// Kernel reports attributed to this scenario.
    pub findings: Vec<Finding>,
    /// The end of the console, for a scenario that did not finish.
    pub console_tail: Vec<String>,
    /// The catalogue items it checks: (id, the catalogue's summary).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub covers: Vec<(String, String)>,
    /// Its `note:`: where the kernel disagreed with the catalogue, or what it depends on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Its `description:`: what it checks and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// For a `collateral` scenario: the scenario that broke the kernel before it could run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collateral_of: Option<String>,
}

impl Scenario {
    /// The last lines, at most `max`, of the step that ended the scenario (the last step the
    /// agent reported), without the file contents it quoted (`step N: | ...`). The agent stops
    /// at the first step that fails, at every level (a fork's, a thread's, an iteration's), so
    /// the check that failed is the last of them: `failing_step(1)`, where a `repeat` or a `fork`
    /// step's earlier lines are the passing ones before it.
    pub fn failing_step(&self, max: usize) -> Vec<&str> {
        let step =
            |l: &str| l.strip_prefix("step ")?.split_once(':').map(|(n, rest)| (n.to_string(), rest.to_string()));
        let Some((last, _)) = self.log.iter().rev().find_map(|l| step(l)) else { return vec![] };
        let lines: Vec<&str> = self
            .log
            .iter()
            .filter(|l| step(l).is_some_and(|(n, rest)| n == last && !rest.starts_with(" | ")))
            .map(String::as_str)
            .collect();
        lines[lines.len().saturating_sub(max)..].to_vec()
    }
}

/// The most diagnostics lines a scenario keeps in the model (the raw log has them all).
pub const LOG_LINES: usize = 200;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    Pass,
    /// The check failed (including a scenario that ran past its deadline).
    Fail,
    /// Not applicable to this kernel (the agent's skip, or `requires` not met).
    Skip,
    /// Failed as its `xfail` mark expects: not a failure of the run.
    Xfail,
    /// Marked `xfail` but passed: a failure of the run until the mark goes.
    Xpass,
    /// Marked `xfail` for a known kernel bug with a fix (`fixed_by`), and passed: the kernel
    /// carries the fix. An expected pass, not a failure.
    Fixed,
    /// Never started: the boot ended before it (crash, hang, lost result channel).
    NotRun,
    /// Started but did not complete: the kernel crashed while it ran.
    Error,
    /// Never started because another scenario broke the kernel (`collateral_of` names it) and
    /// the run stopped spending boots on it: not a failure of its own; the culprit's is.
    Collateral,
}

impl Status {
    pub const ALL: [Status; 9] = [
        Status::Pass,
        Status::Fail,
        Status::Skip,
        Status::Xfail,
        Status::Xpass,
        Status::Fixed,
        Status::NotRun,
        Status::Error,
        Status::Collateral,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pass => "pass",
            Status::Fail => "fail",
            Status::Skip => "skip",
            Status::Xfail => "xfail",
            Status::Xpass => "xpass",
            Status::Fixed => "fixed",
            Status::NotRun => "not-run",
            Status::Error => "error",
            Status::Collateral => "collateral",
        }
    }

    /// Whether it makes the run fail.
    pub fn is_failure(self) -> bool {
        match self {
            Status::Pass | Status::Skip | Status::Xfail | Status::Fixed | Status::Collateral => false,
            Status::Fail | Status::Xpass | Status::NotRun | Status::Error => true,
        }
    }
}

/// A measured figure; `samples` are the repetitions behind `value`, so a comparison can judge
/// a change against the run's own noise.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Metric {
    pub value: f64,
    /// `events/s`, `MiB/s`, `ns`.
    pub unit: String,
    /// Whether a larger value is better (throughput) or worse (latency).
    pub higher_is_better: bool,
    #[serde(default)]
    pub samples: Vec<f64>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// How many scenarios ended in each status.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Totals {
    pub pass: usize,
    pub fail: usize,
    pub skip: usize,
    pub xfail: usize,
    pub xpass: usize,
    /// Known kernel bugs this kernel carries the fix of (left out of `run.json` when none).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub fixed: usize,
    pub not_run: usize,
    pub error: usize,
    /// Not run because another scenario broke the kernel (left out of `run.json` when none).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub collateral: usize,
}

impl Totals {
    pub fn of<'a>(statuses: impl IntoIterator<Item = &'a Scenario>) -> Totals {
        let mut t = Totals::default();
        for s in statuses {
            *t.get_mut(s.status) += 1;
        }
        t
    }

    pub fn get(&self, s: Status) -> usize {
        match s {
            Status::Pass => self.pass,
            Status::Fail => self.fail,
            Status::Skip => self.skip,
            Status::Xfail => self.xfail,
            Status::Xpass => self.xpass,
            Status::Fixed => self.fixed,
            Status::NotRun => self.not_run,
            Status::Error => self.error,
            Status::Collateral => self.collateral,
        }
    }

    fn get_mut(&mut self, s: Status) -> &mut usize {
        match s {
            Status::Pass => &mut self.pass,
            Status::Fail => &mut self.fail,
            Status::Skip => &mut self.skip,
            Status::Xfail => &mut self.xfail,
            Status::Xpass => &mut self.xpass,
            Status::Fixed => &mut self.fixed,
            Status::NotRun => &mut self.not_run,
            Status::Error => &mut self.error,
            Status::Collateral => &mut self.collateral,
        }
    }

    pub fn add(&mut self, other: &Totals) {
        for s in Status::ALL {
            *self.get_mut(s) += other.get(s);
        }
    }

    pub fn total(&self) -> usize {
        Status::ALL.iter().map(|s| self.get(*s)).sum()
    }

    /// `12 passed, 1 failed, 2 skipped` (zero counts left out, except passed).
    pub fn describe(&self) -> String {
        let words = [
            (Status::Pass, "passed"),
            (Status::Fail, "failed"),
            (Status::Skip, "skipped"),
            (Status::Xfail, "xfail"),
            (Status::Xpass, "xpass"),
            (Status::Fixed, "fixed"),
            (Status::NotRun, "not run"),
            (Status::Error, "errors"),
            (Status::Collateral, "not run as collateral"),
        ];
        words
            .iter()
            .filter(|(s, _)| *s == Status::Pass || self.get(*s) > 0)
            .map(|(s, w)| format!("{} {w}", self.get(*s)))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

impl Run {
    /// Every scenario name of every arch, in first-seen order (the rows of a matrix).
    pub fn scenario_names(&self) -> Vec<&str> {
        let mut seen = std::collections::BTreeSet::new();
        let mut out = Vec::new();
        for a in &self.arches {
            for s in &a.scenarios {
                if seen.insert(s.name.as_str()) {
                    out.push(s.name.as_str());
                }
            }
        }
        out
    }

    pub fn arch(&self, name: &str) -> Option<&ArchRun> {
        self.arches.iter().find(|a| a.arch == name)
    }
}

impl ArchRun {
    pub fn scenario(&self, name: &str) -> Option<&Scenario> {
        self.scenarios.iter().find(|s| s.name == name)
    }
}

mod coverage;

pub use coverage::{BlindSpot, CoverageRow, CoverageSummary, CoverageTotals, PatchLines};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_failing_step_is_the_last_one_without_its_quoted_contents() {
        let log = [
            "step 1: register \"a u32 x\" word w1 bit 0 size 4: ok, write_index 0 (expected 0)",
            "step 3: read /sys/kernel/tracing/available_events: 7572 bytes (expected ok)",
            "step 3: read /sys/kernel/tracing/available_events: does not include \"user_events_multi:a.\"",
            "step 3: | user_events_multx:a.1",
            "exited with status 1",
        ];
        let s = Scenario {
            name: "a/b".into(),
            suite: "a".into(),
            boot: None,
            status: Status::Fail,
            judged: None,
            reason: None,
            duration_ms: None,
            metrics: BTreeMap::new(),
            log: log.iter().map(|l| l.to_string()).collect(),
            findings: vec![],
            console_tail: vec![],
            covers: vec![],
            note: None,
            description: None,
            collateral_of: None,
        };
        assert_eq!(s.failing_step(4), [log[1], log[2]]);
        assert_eq!(s.failing_step(1), [log[2]], "the check that failed");
        // A fork storm in a `repeat`: the passing waits come first, the failed check last.
        let storm = [
            "step 2: repeat: 40x wait brief0: exit 0 (expected exit 0)",
            "step 2: repeat: iteration 7 of 50 failed after 2100 ms:",
            "step 2: iteration 7 step 3: wait brief0: exit 0 (expected exit 0)",
            "step 2: iteration 7 step 4: check word w: still 0x0 after 2000 ms",
        ];
        let s = Scenario { log: storm.iter().map(|l| l.to_string()).collect(), ..s };
        assert_eq!(s.failing_step(1), [storm[3]]);
        assert!(Scenario { log: vec!["no steps".into()], ..s }.failing_step(4).is_empty());
    }
}
