//! BootRun boots into the run model: `assemble` takes the boots (judged live, or read back from
//! their records and logs by `run_folder::read_boot`) and the folder's provenance files
//! (`kernel-metadata.json`, `qemu-version.txt`, `skipped.json`, `host.json`); `load` does both
//! for `report --from`. `save_facts` writes the provenance files at the end of a live run.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};

use super::model::{
    self, ArchRun, Boot, Finding, Host, Kernel, Metric, PatchRef, Run, RunVerdict, Scenario, Status, Totals,
};
use crate::judging::run_folder::{self, BootDir, JudgedBoot};
use crate::judging::verdict::{self as judge, Expected};
use crate::support::exit::{error, Kind};

/// Writes what the logs alone do not say, beside them: each boot's kernel metadata and QEMU
/// version, and the host. Run right after the boots, on the machine that ran them.
pub fn save_facts(run_dir: &Path, boots: &[&JudgedBoot], built: &[crate::kernel::build::Built]) -> Result<()> {
    let mut versions: BTreeMap<String, Option<String>> = BTreeMap::new();
    for b in boots {
        let folder = &b.folder;
        if let Some(k) = built.iter().find(|k| k.arch.name == b.facts.arch) {
            let path = folder.file(run_folder::KERNEL_METADATA);
            std::fs::write(&path, serde_json::to_vec_pretty(&k.metadata)?)
                .with_context(|| format!("writing {}", path.display()))?;
        }
        let binary = b.facts.qemu_command.split_whitespace().next().unwrap_or_default().to_string();
        let version =
            versions.entry(binary.clone()).or_insert_with(|| crate::vm::qemu::version(Path::new(&binary))).clone();
        if let Some(v) = version {
            std::fs::write(folder.file(run_folder::QEMU_VERSION), format!("{v}\n"))?;
        }
    }
    std::fs::write(run_dir.join(run_folder::HOST), serde_json::to_vec_pretty(&this_host())?)?;
    Ok(())
}

fn this_host() -> Host {
    let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default().trim().to_string();
    let os = read("/etc/os-release")
        .lines()
        .find_map(|l| l.strip_prefix("PRETTY_NAME="))
        .map(|v| v.trim_matches('"').to_string())
        .unwrap_or_default();
    Host {
        hostname: read("/proc/sys/kernel/hostname"),
        kernel: read("/proc/sys/kernel/osrelease"),
        os,
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
    }
}

/// Reads a run folder into the model, judging each boot again from its logs. `generated_at` is
/// stamped into it (tests pin it).
pub fn load(run_dir: &Path, generated_at: jiff::Timestamp) -> Result<Run> {
    let bad = |m: String| error(Kind::BadInput, m);
    let real = run_dir.canonicalize().map_err(|e| bad(format!("{}: {e}", run_dir.display())))?;
    let folders = run_folder::boot_folders(&real)?;
    if folders.is_empty() {
        return Err(bad(format!(
            "{}: no boot folder with a verdict.json (<arch>/verdict.json): not a finished run folder",
            run_dir.display()
        )));
    }
    let boots = folders.into_iter().map(run_folder::read_boot).collect::<Result<Vec<_>>>()?;
    let timings = crate::support::timings::load(&real)
        .map_err(|e| bad(format!("{}: {e}", real.join(run_folder::TIMINGS).display())))?;
    assemble(&real, &boots.iter().collect::<Vec<_>>(), timings, generated_at)
}

/// The run model of judged boots (any order: they are put in the run's) and the run folder's
/// provenance files.
pub fn assemble(
    run_dir: &Path,
    boots: &[&JudgedBoot],
    timings: Vec<crate::support::timings::Phase>,
    generated_at: jiff::Timestamp,
) -> Result<Run> {
    let bad = |m: String| error(Kind::BadInput, m);
    let run_id = run_dir.file_name().map_or(String::new(), |n| n.to_string_lossy().into_owned());
    let arch_rank = |a: &str| crate::arch::ARCHES.iter().position(|x| x.name == a).unwrap_or(usize::MAX);
    let order = |b: &JudgedBoot| {
        let (arch, place) = b.folder.place().unwrap_or((b.facts.arch.as_str(), BootDir::Shared(1)));
        (arch_rank(arch), arch.to_string(), place)
    };
    let mut boots = boots.to_vec();
    boots.sort_by_key(|b| order(b));

    let mut arches: Vec<ArchRun> = Vec::new();
    for b in boots {
        let arch_name = b.folder.place().map_or(b.facts.arch.as_str(), |(a, _)| a).to_string();
        let (boot, scenarios, kernel) = boot_model(b)?;
        let arch = match arches.iter_mut().find(|a| a.arch == arch_name) {
            Some(a) => a,
            None => {
                arches.push(ArchRun {
                    arch: arch_name,
                    verdict: RunVerdict::pass(),
                    kernel: None,
                    boots: vec![],
                    scenarios: vec![],
                    totals: Totals::default(),
                });
                arches.last_mut().expect("just pushed")
            }
        };
        arch.verdict = arch.verdict.clone().worst(&boot.verdict);
        arch.kernel = arch.kernel.take().or(kernel);
        arch.boots.push(boot);
        // A resume boot's results take the place of the `not-run` entries of the boot that
        // handed them over.
        for s in scenarios {
            match arch.scenarios.iter_mut().find(|old| old.name == s.name && old.status == Status::NotRun) {
                Some(old) => *old = s,
                None => arch.scenarios.push(s),
            }
        }
    }
    for arch in &mut arches {
        for s in run_folder::read_skipped(&run_dir.join(&arch.arch))? {
            if arch.scenario(&s.name).is_none() {
                arch.scenarios.push(Scenario {
                    suite: suite_of(&s.name),
                    name: s.name,
                    boot: None,
                    status: Status::Skip,
                    judged: None,
                    reason: Some(s.reason),
                    duration_ms: None,
                    metrics: BTreeMap::new(),
                    log: vec![],
                    findings: vec![],
                    console_tail: vec![],
                    covers: vec![],
                    note: None,
                    description: None,
                    collateral_of: None,
                });
            }
        }
        arch.totals = Totals::of(&arch.scenarios);
    }
    let mut totals = Totals::default();
    let mut verdict = RunVerdict::pass();
    for a in &arches {
        totals.add(&a.totals);
        verdict = verdict.worst(&a.verdict);
    }
    let host_file = run_dir.join(run_folder::HOST);
    let host = match std::fs::read(&host_file) {
        Ok(bytes) => Some(serde_json::from_slice(&bytes).map_err(|e| bad(format!("{}: {e}", host_file.display())))?),
        Err(_) => None,
    };
    let coverage_file = run_dir.join(model::COVERAGE_SUMMARY);
    let coverage = match std::fs::read(&coverage_file) {
        Ok(bytes) => {
            Some(serde_json::from_slice(&bytes).map_err(|e| bad(format!("{}: {e}", coverage_file.display())))?)
        }
        Err(_) => None,
    };
    Ok(Run {
        schema_version: model::SCHEMA_VERSION,
        run_id,
        generated_at: generated_at.strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
        host,
        verdict,
        totals,
        arches,
        timings,
        coverage,
        rerun: None,
    })
}

fn suite_of(name: &str) -> String {
    name.split_once('/').map_or(String::new(), |(s, _)| s.to_string())
}

/// One judged boot in the model's words: the boot, its scenarios and its kernel.
fn boot_model(b: &JudgedBoot) -> Result<(Boot, Vec<Scenario>, Option<Kernel>)> {
    let (facts, j) = (&b.facts, &b.judgement);
    let ended_text = facts.ended.to_string();
    let mut scenarios: Vec<Scenario> = j
        .result
        .scenarios
        .iter()
        .zip(&j.counted.marks)
        .map(|(s, mark)| {
            let record = j.stream.record(s.index);
            let skip_reason = record.map(|r| r.reason.trim().to_string()).filter(|r| !r.is_empty());
            let mut scenario = scenario(s, *mark, &b.folder.name, skip_reason, &facts.marks());
            if let (Status::NotRun, Some(c)) = (scenario.status, &facts.collateral) {
                scenario.status = Status::Collateral;
                scenario.reason = Some(format!("not run: {} broke the kernel {}", c.culprit, c.why));
                scenario.collateral_of = Some(c.culprit.clone());
            }
            if let Some(a) = facts.about.get(&s.name) {
                scenario.covers.clone_from(&a.covers);
                scenario.note.clone_from(&a.note);
                scenario.description.clone_from(&a.description);
            }
            scenario.metrics = record.map(metrics).unwrap_or_default();
            scenario
        })
        .collect();
    // The judge gives every unfinished scenario the same console tail: keep it once, on the
    // first (the one that crashed or hung, else the first not run).
    let mut tail_kept = false;
    for s in &mut scenarios {
        if tail_kept {
            s.console_tail.clear();
        }
        tail_kept |= !s.console_tail.is_empty();
    }
    let qemu_version =
        std::fs::read_to_string(b.folder.file(run_folder::QEMU_VERSION)).ok().map(|s| s.trim().to_string());
    let rel = |f: &str| format!("{}/{f}", b.folder.name);
    let mut boot = Boot {
        name: b.folder.name.clone(),
        accel: facts.accel.clone(),
        qemu_version,
        qemu_command: facts.qemu_command.clone(),
        virtiofsd_sandbox: facts.virtiofsd_sandbox.map(|s| s.name().to_string()),
        verdict: RunVerdict::of(&j.counted.verdict),
        ended: ended_text,
        wall_ms: facts.wall_ms,
        boot_ms: facts.boot_ms,
        started_at: facts.started_at.clone(),
        findings: j.result.findings.iter().map(finding).collect(),
        problems: j.result.problems.clone(),
        console_log: rel(run_folder::CONSOLE_LOG),
        results_log: rel(run_folder::RESULTS_LOG),
    };
    super::symbols::attach(&b.folder.path, &mut boot, &mut scenarios);
    let kernel = kernel_metadata(&b.folder.path, &boot.qemu_command)?.map(|m| kernel(&m));
    Ok((boot, scenarios, kernel))
}

/// `kernel-metadata.json` in the boot folder, else the build cache's `metadata.json` beside the
/// image QEMU booted (runs saved before the copy was kept).
fn kernel_metadata(boot_dir: &Path, qemu_command: &str) -> Result<Option<crate::kernel::build::Metadata>> {
    let saved = boot_dir.join(run_folder::KERNEL_METADATA);
    let file = if saved.is_file() {
        saved
    } else {
        let mut words = qemu_command.split_whitespace();
        let image = words.by_ref().skip_while(|w| *w != "-kernel").nth(1);
        match image.map(|i| Path::new(i).with_file_name("metadata.json")).filter(|p| p.is_file()) {
            Some(p) => p,
            None => return Ok(None),
        }
    };
    let bytes = std::fs::read(&file).with_context(|| format!("reading {}", file.display()))?;
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| error(Kind::BadInput, format!("{}:{}:{}: {e}", file.display(), e.line(), e.column())))
}

fn kernel(m: &crate::kernel::build::Metadata) -> Kernel {
    Kernel {
        release: m.kernelrelease.clone(),
        source_kind: m.source.kind.clone(),
        source: m.source.label.clone(),
        source_id: m.source.id.clone(),
        git_commit: m.source.git_head.clone(),
        patches: m
            .patches
            .iter()
            .map(|p| PatchRef {
                name: p.path.file_name().map_or(String::new(), |n| n.to_string_lossy().into_owned()),
                sha256: p.sha256.clone(),
            })
            .collect(),
        config_hash: m.config.sha256.clone(),
        fragments: m.config.fragments.clone(),
        compiler: m.compiler.version.clone(),
        build_key: m.key.clone(),
        make_vars: m.make_vars.clone(),
        built_at: Some(m.built_at.clone()).filter(|t| !t.is_empty()),
        build_ms: (!m.durations.is_empty()).then(|| (m.durations.values().sum::<f64>() * 1000.0).round() as u64),
    }
}

/// The figures a scenario reported, by name (the last of a name wins; the reader flags repeats).
fn metrics(r: &crate::judging::channel::ScenarioRecord) -> BTreeMap<String, Metric> {
    r.metrics
        .iter()
        .map(|m| {
            let metric = Metric {
                value: m.value,
                unit: m.unit.clone(),
                higher_is_better: m.higher_is_better,
                samples: m.samples.clone(),
            };
            (m.name.clone(), metric)
        })
        .collect()
}

fn finding(f: &crate::judging::console::Finding) -> Finding {
    Finding {
        kind: f.kind.as_str().to_string(),
        summary: f.summary.clone(),
        console_line: f.line,
        excerpt: f.excerpt.clone(),
        truncated: f.truncated,
        fingerprint: f.fingerprint.clone(),
        fingerprint_hash: f.fingerprint_hash.clone(),
        frames: f.frames.iter().map(|x| model::Frame { frame: x.clone(), source: vec![] }).collect(),
    }
}

/// The model's status for a judged scenario and its xfail mark.
pub fn status_of(status: judge::Status, mark: Option<Expected>) -> (Status, Option<&'static str>) {
    match (mark, status) {
        (Some(Expected::Xfail), _) => (Status::Xfail, None),
        (Some(Expected::Xpass), _) => (Status::Xpass, None),
        (Some(Expected::Fixed), _) => (Status::Fixed, None),
        (None, judge::Status::Pass) => (Status::Pass, None),
        (None, judge::Status::Fail) => (Status::Fail, None),
        (None, judge::Status::Skip) => (Status::Skip, None),
        (None, judge::Status::Timeout) => (Status::Fail, Some("timeout")),
        (None, judge::Status::NotRun) => (Status::NotRun, None),
        (None, judge::Status::Crashed) => (Status::Error, Some("crashed")),
    }
}

fn scenario(
    s: &judge::ScenarioResult,
    mark: Option<Expected>,
    boot: &str,
    skip_reason: Option<String>,
    marks: &crate::judging::verdict::XfailMarks,
) -> Scenario {
    let (xfail, expect_report) = (marks.xfail, marks.expect_report);
    let (status, judged) = status_of(s.status, mark);
    let reason = match status {
        Status::Xfail => xfail.get(&s.name).cloned(),
        Status::Xpass => xfail.get(&s.name).map(|r| format!("marked xfail ({r}) but passed; remove the mark")),
        Status::Fixed => marks.fixed_by.get(&s.name).map(|fix| {
            let bug = xfail.get(&s.name).map_or(String::new(), |r| format!(" of the known bug ({r})"));
            format!("fixed: the kernel carries the fix{bug}: {fix}")
        }),
        Status::Skip => skip_reason,
        Status::NotRun | Status::Error | Status::Collateral => s.diagnostics.last().cloned(),
        Status::Fail if judged == Some("timeout") => Some(
            match s.diagnostics.iter().find(|d| d.ends_with("stuck in the kernel") || d.starts_with("the VM hung")) {
                Some(d) if d.starts_with("the VM hung") => d.clone(),
                Some(_) => "ran past its deadline, and SIGKILL could not end it: stuck in the kernel".to_string(),
                None => "ran past its deadline".to_string(),
            },
        ),
        Status::Pass => expect_report.get(&s.name).map(|t| format!("the expected kernel report ({t}) came")),
        Status::Fail => None,
    };
    let mut log = s.diagnostics.clone();
    if log.len() > model::LOG_LINES {
        let cut = log.len() - model::LOG_LINES;
        log.drain(..cut);
        log.insert(0, format!("({cut} earlier lines in the raw log)"));
    }
    Scenario {
        suite: suite_of(&s.name),
        name: s.name.clone(),
        boot: Some(boot.to_string()),
        status,
        judged: judged.map(String::from),
        reason,
        duration_ms: s.time_ms,
        metrics: BTreeMap::new(),
        log,
        findings: s.findings.iter().map(finding).collect(),
        console_tail: s.console_tail.clone(),
        covers: vec![],
        note: None,
        description: None,
        collateral_of: None,
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    fn copy_dir(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for e in std::fs::read_dir(from).unwrap() {
            let e = e.unwrap();
            if e.file_type().unwrap().is_dir() {
                copy_dir(&e.path(), &to.join(e.file_name()));
            } else {
                std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
            }
        }
    }

    /// A `ue-metric` line in a boot's results.ktap becomes its scenario's metric in the model.
    #[test]
    fn metric_lines_land_in_the_scenarios_metrics() {
        let dir = std::env::temp_dir().join(format!("xtask-collect-metrics-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        copy_dir(&super::super::tests::fixture_dir(), &dir);
        let ktap = dir.join("x86_64/results.ktap");
        let text = std::fs::read_to_string(&ktap).unwrap();
        let metric = "# ue-metric 1 write_0_none value=2.5 unit=events/s better=higher samples=1,2.5,3\n";
        let at = text.find("\nok 1 ").expect("scenario 1's result") + 1;
        std::fs::write(&ktap, format!("{}{metric}{}", &text[..at], &text[at..])).unwrap();
        let run = super::load(&dir, "2026-01-02T03:04:05Z".parse().unwrap()).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        let x86 = run.arch("x86_64").unwrap();
        let m = &x86.scenarios[0].metrics["write_0_none"];
        assert_eq!((m.value, m.unit.as_str(), m.higher_is_better), (2.5, "events/s", true));
        assert_eq!(m.samples, [1.0, 2.5, 3.0]);
        assert!(x86.scenarios[1..].iter().all(|s| s.metrics.is_empty()));
        assert!(x86.boots[0].problems.is_empty(), "{:?}", x86.boots[0].problems);
    }
}
