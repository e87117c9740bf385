//! A run model as the history's rows (sans-IO): one `RunRow`, and one `ResultRow` per arch and
//! scenario with its kernel's identity (release, source digest, patches, config digest,
//! profile), status, duration and reason.

use serde::Serialize;

use crate::judging::console::fingerprint;
use crate::results::model::{Finding, Kernel, Rerun, Run};

/// What the history keeps of a kernel: the parts that make two kernels the same one.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct KernelId {
    /// `uname -r`.
    pub release: String,
    /// The source in words (`Debian linux-source-6.12 ...`, a path, a commit).
    pub source: String,
    /// The digest that changes whenever the source's content does.
    pub source_id: String,
    /// The patches' sha256, in order, joined with `,` (empty without patches).
    pub patches: String,
    /// sha256 of the final `.config`.
    pub config_hash: String,
    /// The profiles the kernel was configured with, joined with `+` (`default` without one);
    /// `+mutant=N` when the kernel booted with one mutant of a mutation campaign switched on.
    pub profile: String,
}

impl KernelId {
    /// A run folder without kernel metadata: every part `unknown`.
    pub fn unknown() -> KernelId {
        let u = || "unknown".to_string();
        KernelId { release: u(), source: u(), source_id: u(), patches: String::new(), config_hash: u(), profile: u() }
    }

    /// `profiles` are the names of kernel-configs/profiles/ (a fragment `debug.config` is
    /// the `debug` profile).
    pub fn of(k: &Kernel, profiles: &[String]) -> KernelId {
        let chosen: Vec<&str> = k
            .fragments
            .iter()
            .filter_map(|f| f.strip_suffix(".config"))
            .filter(|stem| profiles.iter().any(|p| p == stem))
            .collect();
        KernelId {
            release: k.release.clone(),
            source: k.source.clone(),
            source_id: k.source_id.clone(),
            patches: k.patches.iter().map(|p| p.sha256.as_str()).collect::<Vec<_>>().join(","),
            config_hash: k.config_hash.clone(),
            profile: if chosen.is_empty() { "default".into() } else { chosen.join("+") },
        }
    }

    /// `6.12.117 (default, config 210b2efd)`, with `+2 patches` when it has some.
    pub fn describe(&self) -> String {
        let short = |s: &str| s.chars().take(8).collect::<String>();
        let patches = match self.patches.split(',').filter(|p| !p.is_empty()).count() {
            0 => String::new(),
            n => format!(", +{n} patch(es)"),
        };
        format!("{} ({}{patches}, config {})", self.release, self.profile, short(&self.config_hash))
    }
}

/// Where a run came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Origin {
    /// Recorded by the run itself (`run`, `validate`, `bisect`, `atlas`, `mutants`' child runs).
    Run,
    /// `history import`.
    Import,
    /// `merge`'s folded run.
    Merge,
}

impl Origin {
    pub fn as_str(self) -> &'static str {
        match self {
            Origin::Run => "run",
            Origin::Import => "import",
            Origin::Merge => "merge",
        }
    }
}

/// One run of the `runs` table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RunRow {
    pub run_id: String,
    pub host: String,
    /// When the run started (RFC 3339, UTC, to the second): its first boot, else its model's time.
    pub started_at: String,
    /// `git rev-parse HEAD` of the project's checkout, else the tool's version; `None` for an
    /// imported run (which does not say what made it).
    pub project_commit: Option<String>,
    pub verdict: String,
    pub origin: &'static str,
    /// The run folder, as it was when recorded.
    pub folder: String,
    pub recorded_at: String,
}

/// One scenario on one arch of one run: the `results` table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ResultRow {
    /// `suite/name`.
    pub scenario: String,
    pub suite: String,
    pub arch: String,
    pub kernel: KernelId,
    /// The cache's key of the kernel's build (`None` without kernel metadata).
    pub build_key: Option<String>,
    /// The model's status (`pass`, `fail`, `skip`, ...).
    pub status: String,
    pub duration_ms: Option<i64>,
    pub reason: Option<String>,
    /// Its measured figures (the model's `metrics`), by name.
    pub metrics: Vec<MetricRow>,
}

/// One measured figure of a result, with the samples behind it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MetricRow {
    pub name: String,
    pub unit: String,
    pub higher_is_better: bool,
    pub value: f64,
    pub samples: Vec<f64>,
}

/// One kernel report of a run: the `findings` table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FindingRow {
    /// The scenario it happened in; empty outside any scenario (boot, teardown).
    pub scenario: String,
    pub arch: String,
    pub kernel: KernelId,
    /// `kasan`, `warning`, ...
    pub kind: String,
    /// The fingerprint's short hash (`judging::console::fingerprint`).
    pub fingerprint: String,
    /// The fingerprint's text: `kasan:f<g<h`.
    pub signature: String,
    /// The report's header line.
    pub summary: String,
}

/// A run as the history records it.
#[derive(Debug, Clone, PartialEq)]
pub struct Recorded {
    pub run: RunRow,
    pub results: Vec<ResultRow>,
    /// Its kernel reports, in the run's order (arch, then boot, then scenario).
    pub findings: Vec<FindingRow>,
    /// What the gate's re-run in a fresh boot made of its failures (the model's `rerun`).
    pub rerun: Option<Rerun>,
}

/// What the run model does not say: the checkout's commit, this host, the time, the origin,
/// the folder, the profile names.
pub struct Context<'a> {
    pub project_commit: Option<String>,
    /// This machine's name, for a run model without a host.
    pub host: &'a str,
    pub recorded_at: jiff::Timestamp,
    pub origin: Origin,
    pub folder: &'a str,
    pub profiles: &'a [String],
}

/// RFC 3339 to the second in UTC, so that text order is time order in both databases.
pub fn stamp(t: jiff::Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// The run's start: its earliest boot's `started_at`, else the model's `generated_at`.
fn started(run: &Run) -> String {
    let parse = |s: &str| s.parse::<jiff::Timestamp>().ok();
    let first = run.arches.iter().flat_map(|a| &a.boots).filter_map(|b| b.started_at.as_deref().and_then(parse)).min();
    first.or_else(|| parse(&run.generated_at)).map_or_else(|| run.generated_at.clone(), stamp)
}

/// The rows of `run`.
pub fn of_run(run: &Run, cx: &Context) -> Recorded {
    let host = run.host.as_ref().map_or(cx.host, |h| h.hostname.as_str());
    let row = RunRow {
        run_id: run.run_id.clone(),
        host: host.to_string(),
        started_at: started(run),
        project_commit: cx.project_commit.clone(),
        verdict: run.verdict.kind.clone(),
        origin: cx.origin.as_str(),
        folder: cx.folder.to_string(),
        recorded_at: stamp(cx.recorded_at),
    };
    let mut results = Vec::new();
    let mut findings = Vec::new();
    for a in &run.arches {
        let mut kernel = a.kernel.as_ref().map_or_else(KernelId::unknown, |k| KernelId::of(k, cx.profiles));
        // A schemata kernel is one build for every mutant of a stage, each switched on at boot:
        // each mutant is a kernel of its own, not flips of one.
        if let Some(n) = a.boots.iter().find_map(|b| mutant_of(&b.qemu_command)) {
            kernel.profile = format!("{}+mutant={n}", kernel.profile);
        }
        let found = a.boots.iter().flat_map(|b| b.findings.iter().map(|f| ("", f)));
        let found = found.chain(a.scenarios.iter().flat_map(|s| s.findings.iter().map(|f| (s.name.as_str(), f))));
        findings.extend(found.map(|(scenario, f)| finding_row(scenario, &a.arch, &kernel, f)));
        for s in &a.scenarios {
            results.push(ResultRow {
                scenario: s.name.clone(),
                suite: s.suite.clone(),
                arch: a.arch.clone(),
                kernel: kernel.clone(),
                build_key: a.kernel.as_ref().map(|k| k.build_key.clone()),
                status: s.status.as_str().to_string(),
                duration_ms: s.duration_ms.map(|d| i64::try_from(d).unwrap_or(i64::MAX)),
                reason: s.reason.clone(),
                metrics: s
                    .metrics
                    .iter()
                    .map(|(name, m)| MetricRow {
                        name: name.clone(),
                        unit: m.unit.clone(),
                        higher_is_better: m.higher_is_better,
                        value: m.value,
                        samples: m.samples.clone(),
                    })
                    .collect(),
            });
        }
    }
    Recorded { run: row, results, findings, rerun: run.rerun.clone() }
}

/// A finding's row; a run recorded before fingerprints gets its fingerprint from its excerpt.
fn finding_row(scenario: &str, arch: &str, kernel: &KernelId, f: &Finding) -> FindingRow {
    let (signature, hash) = if f.fingerprint.is_empty() {
        let text = fingerprint::fingerprint(&f.kind, &fingerprint::frames_of(&f.excerpt), &f.summary);
        let hash = fingerprint::hash(&text);
        (text, hash)
    } else {
        (f.fingerprint.clone(), f.fingerprint_hash.clone())
    };
    FindingRow {
        scenario: scenario.to_string(),
        arch: arch.to_string(),
        kernel: kernel.clone(),
        kind: f.kind.clone(),
        fingerprint: hash,
        signature,
        summary: f.summary.clone(),
    }
}

/// The kernel parameter that switches a schemata kernel's mutant on (`mutants::schemata::PARAM`,
/// a layer above this one; a test keeps the two the same).
const MUTANT_PARAM: &str = "trace_events_user.mutant";

/// The mutant a QEMU command line switches on (`trace_events_user.mutant=N` in its kernel
/// arguments).
fn mutant_of(qemu_command: &str) -> Option<&str> {
    let prefix = format!("{MUTANT_PARAM}=");
    qemu_command
        .split(|c: char| c.is_whitespace() || c == '"' || c == '\'')
        .find_map(|w| w.strip_prefix(prefix.as_str()))
        .filter(|n| !n.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn golden() -> Run {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/test_data/results/golden/run.json");
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    #[test]
    fn a_run_becomes_one_row_per_arch_and_scenario() {
        let run = golden();
        let cx = Context {
            project_commit: Some("abc".into()),
            host: "here",
            recorded_at: "2026-11-27T10:00:00.5Z".parse().unwrap(),
            origin: Origin::Import,
            folder: "results/x",
            profiles: &["debug".to_string()],
        };
        let r = of_run(&run, &cx);
        let n: usize = run.arches.iter().map(|a| a.scenarios.len()).sum();
        assert_eq!(r.results.len(), n);
        assert_eq!(r.run.recorded_at, "2026-11-27T10:00:00Z");
        assert_eq!(r.run.origin, "import");
        assert_eq!(r.run.host, run.host.as_ref().unwrap().hostname, "the model's host wins");
        let x = r.results.iter().find(|x| x.arch == "x86_64").unwrap();
        assert_eq!(x.kernel.release, "6.12.117");
        assert_eq!(x.kernel.profile, "default");
        assert_eq!(x.kernel.patches.len(), 64, "one patch's sha256");
        assert!(x.kernel.describe().starts_with("6.12.117 (default, +1 patch(es), config 210b2efd"));
        // Its one kernel report, keyed as its outcomes are; a run saved before fingerprints
        // gets the same one from its excerpt.
        let f = &r.findings[..];
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!((f[0].scenario.as_str(), f[0].arch.as_str(), f[0].kind.as_str()), ("fault/panic", "arm64", "panic"));
        assert_eq!(f[0].signature, "panic:lkdtm_PANIC<lkdtm_do_action<direct_entry");
        let mut old = run.clone();
        for x in old.arches.iter_mut().flat_map(|a| a.scenarios.iter_mut()).flat_map(|s| s.findings.iter_mut()) {
            (x.fingerprint, x.fingerprint_hash, x.frames) = (String::new(), String::new(), vec![]);
        }
        assert_eq!(of_run(&old, &cx).findings, r.findings);
        // A mutant's boot: a kernel of its own.
        let mut run = run;
        let boot = &mut run.arches[0].boots[0];
        boot.qemu_command = format!("{} -append \"console=ttyS0 trace_events_user.mutant=17\"", boot.qemu_command);
        let r = of_run(&run, &cx);
        assert!(r.results[0].kernel.profile.ends_with("+mutant=17"), "{}", r.results[0].kernel.profile);
    }

    #[test]
    fn the_mutant_parameter_is_the_campaigns() {
        assert_eq!(MUTANT_PARAM, crate::mutants::schemata::PARAM);
        assert_eq!(mutant_of("qemu -append 'a trace_events_user.mutant=3 b'"), Some("3"));
        assert_eq!(mutant_of("qemu -append 'a b'"), None);
    }

    #[test]
    fn profiles_come_from_the_fragments() {
        let mut k = golden().arches[0].kernel.clone().unwrap();
        k.fragments = vec!["common.config".into(), "x86_64.config".into(), "debug.config".into()];
        let profiles = ["debug".to_string(), "faults".to_string()];
        assert_eq!(KernelId::of(&k, &profiles).profile, "debug");
        k.fragments.push("faults.config".into());
        assert_eq!(KernelId::of(&k, &profiles).profile, "debug+faults");
    }
}
