//! A run folder back into the model: each boot's `verdict.json` gives the plan, the marks and
//! how QEMU ended; its `console.log` and `results.ktap` are judged again by the same sans-IO
//! judge the boot used; `kernel-metadata.json`, `qemu-version.txt`, `skipped.json` and the run's
//! `host.json` give the provenance. `save_facts` writes those extra files at the end of a run.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::model::{
    self, ArchRun, Boot, Finding, Host, Kernel, Metric, PatchRef, Run, Scenario, Status, Totals, Verdict,
};
use crate::exit::{error, Kind};
use crate::verdict::{self as judge, Expected, HostEnd};

/// A scenario left out of an arch's plan (`requires` not met), as `skipped.json` lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Skipped {
    pub name: String,
    pub reason: String,
}

/// Writes what the logs alone do not say, beside them: each boot's kernel metadata and QEMU
/// version, and the host. Run right after the boots, on the machine that ran them.
pub fn save_facts(judged: &[crate::boot::Judged], built: &[crate::kernel::Built]) -> Result<()> {
    let mut versions: BTreeMap<String, Option<String>> = BTreeMap::new();
    for j in judged {
        let dir = &j.outcome.out_dir;
        if let Some(b) = built.iter().find(|b| b.arch.name == j.outcome.arch.name) {
            let path = dir.join("kernel-metadata.json");
            std::fs::write(&path, serde_json::to_vec_pretty(&b.metadata)?)
                .with_context(|| format!("writing {}", path.display()))?;
        }
        let binary = j.outcome.vm.command_line.split_whitespace().next().unwrap_or_default().to_string();
        let version =
            versions.entry(binary.clone()).or_insert_with(|| crate::qemu::version(Path::new(&binary))).clone();
        if let Some(v) = version {
            std::fs::write(dir.join("qemu-version.txt"), format!("{v}\n"))?;
        }
    }
    if let Some(run_dir) = judged.first().and_then(|j| j.outcome.out_dir.parent()) {
        std::fs::write(run_dir.join("host.json"), serde_json::to_vec_pretty(&this_host())?)?;
    }
    Ok(())
}

/// Writes `<run>/<arch>/skipped.json`: the scenarios the arch's plan left out.
pub fn save_skipped(arch_dir: &Path, skipped: &[Skipped]) -> Result<()> {
    std::fs::create_dir_all(arch_dir)?;
    let path = arch_dir.join("skipped.json");
    std::fs::write(&path, serde_json::to_vec_pretty(skipped)?).with_context(|| format!("writing {}", path.display()))
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

/// One boot folder: `<arch>`, `<arch>.vm-<k>` (a part of the shared boot, `--vms`) or
/// `<arch>.isolated-<n>`.
struct BootDir {
    arch: String,
    /// Its rank among the arch's boots.
    order: crate::boot::BootDir,
    name: String,
    path: PathBuf,
}

/// Reads a run folder into the model. `generated_at` is stamped into it (tests pin it).
pub fn load(run_dir: &Path, generated_at: jiff::Timestamp) -> Result<Run> {
    let bad = |m: String| error(Kind::BadInput, m);
    let real = run_dir.canonicalize().map_err(|e| bad(format!("{}: {e}", run_dir.display())))?;
    let run_id = real.file_name().map_or(String::new(), |n| n.to_string_lossy().into_owned());
    let mut boots = Vec::new();
    let mut skipped_dirs = Vec::new();
    let entries = std::fs::read_dir(&real).map_err(|e| bad(format!("{}: {e}", run_dir.display())))?;
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let path = e.path();
        if !path.is_dir() {
            continue;
        }
        let Some((arch, order)) = crate::boot::BootDir::parse(&name).map(|(a, o)| (a.to_string(), o)) else {
            continue;
        };
        if path.join("verdict.json").is_file() {
            boots.push(BootDir { arch, order, name, path });
        } else if path.join("skipped.json").is_file() {
            skipped_dirs.push((arch, path));
        }
    }
    if boots.is_empty() {
        return Err(bad(format!(
            "{}: no boot folder with a verdict.json (<arch>/verdict.json): not a finished run folder",
            run_dir.display()
        )));
    }
    let arch_rank = |a: &str| crate::arch::ARCHES.iter().position(|x| x.name == a).unwrap_or(usize::MAX);
    boots.sort_by(|a, b| (arch_rank(&a.arch), &a.arch, a.order).cmp(&(arch_rank(&b.arch), &b.arch, b.order)));

    let mut arches: Vec<ArchRun> = Vec::new();
    for b in &boots {
        let (boot, scenarios, kernel) = load_boot(b)?;
        let arch = match arches.iter_mut().find(|a| a.arch == b.arch) {
            Some(a) => a,
            None => {
                arches.push(ArchRun {
                    arch: b.arch.clone(),
                    verdict: Verdict::pass(),
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
        let file = real.join(&arch.arch).join("skipped.json");
        for s in read_skipped(&file)? {
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
                });
            }
        }
        arch.totals = Totals::of(&arch.scenarios);
    }
    let mut totals = Totals::default();
    let mut verdict = Verdict::pass();
    for a in &arches {
        totals.add(&a.totals);
        verdict = verdict.worst(&a.verdict);
    }
    let host = match std::fs::read(real.join("host.json")) {
        Ok(bytes) => Some(
            serde_json::from_slice(&bytes).map_err(|e| bad(format!("{}: {e}", real.join("host.json").display())))?,
        ),
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
        timings: crate::timings::load(&real)
            .map_err(|e| bad(format!("{}: {e}", real.join(crate::timings::FILE).display())))?,
    })
}

fn read_skipped(file: &Path) -> Result<Vec<Skipped>> {
    match std::fs::read(file) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map_err(|e| error(Kind::BadInput, format!("{}:{}:{}: {e}", file.display(), e.line(), e.column()))),
        Err(_) => Ok(vec![]),
    }
}

fn suite_of(name: &str) -> String {
    name.split_once('/').map_or(String::new(), |(s, _)| s.to_string())
}

/// A field of `verdict.json`, or an error naming the file and the field.
fn field<'a>(v: &'a Value, file: &Path, path: &[&str]) -> Result<&'a Value> {
    let mut at = v;
    for p in path {
        at = at.get(p).ok_or_else(|| {
            error(Kind::BadInput, format!("{}: field `{}` is missing", file.display(), path.join(".")))
        })?;
    }
    Ok(at)
}

fn string_map(v: &Value, file: &Path, name: &str) -> Result<BTreeMap<String, String>> {
    match v.get(name) {
        None | Some(Value::Null) => Ok(BTreeMap::new()),
        Some(m) => serde_json::from_value(m.clone())
            .map_err(|e| error(Kind::BadInput, format!("{}: field `{name}`: {e}", file.display()))),
    }
}

fn load_boot(b: &BootDir) -> Result<(Boot, Vec<Scenario>, Option<Kernel>)> {
    let file = b.path.join("verdict.json");
    let bytes = std::fs::read(&file).with_context(|| format!("reading {}", file.display()))?;
    let v: Value = serde_json::from_slice(&bytes)
        .map_err(|e| error(Kind::BadInput, format!("{}:{}:{}: {e}", file.display(), e.line(), e.column())))?;
    let planned: Vec<String> = field(&v, &file, &["result", "scenarios"])?
        .as_array()
        .ok_or_else(|| error(Kind::BadInput, format!("{}: field `result.scenarios` is not a list", file.display())))?
        .iter()
        .map(|s| {
            s.get("name").and_then(Value::as_str).map(String::from).ok_or_else(|| {
                error(Kind::BadInput, format!("{}: field `result.scenarios[].name` is missing", file.display()))
            })
        })
        .collect::<Result<_>>()?;
    let xfail = string_map(&v, &file, "xfail")?;
    let expect_report = string_map(&v, &file, "expect_report")?;
    let about: BTreeMap<String, crate::suites::About> = match v.get("about") {
        None | Some(Value::Null) => BTreeMap::new(),
        Some(m) => serde_json::from_value(m.clone())
            .map_err(|e| error(Kind::BadInput, format!("{}: field `about`: {e}", file.display())))?,
    };
    let ended: crate::qemu::Ended = serde_json::from_value(field(&v, &file, &["ended"])?.clone())
        .map_err(|e| error(Kind::BadInput, format!("{}: field `ended`: {e}", file.display())))?;
    let end = HostEnd::of(&ended);
    let ended_text = match &ended {
        crate::qemu::Ended::Exited { code } => {
            code.map_or("killed by a signal".to_string(), |c| format!("exited with code {c}"))
        }
        crate::qemu::Ended::Killed { after_ms, reason, .. } => format!("killed after {after_ms} ms: {reason}"),
        crate::qemu::Ended::Failed { error } => format!("failed on the host: {error}"),
    };
    let read_log = |name: &str| -> Result<String> {
        let p = b.path.join(name);
        let bytes = std::fs::read(&p).map_err(|e| error(Kind::BadInput, format!("{}: {e}", p.display())))?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    };
    let console = read_log("console.log")?;
    let results = read_log("results.ktap")?;
    let stream = crate::ktap::read(&results);
    let result = judge::decide(&planned, &expect_report, &stream, &crate::console::scan(&console), &console, &end);
    let counted = judge::with_xfail(&result, &xfail);

    let mut scenarios: Vec<Scenario> = result
        .scenarios
        .iter()
        .zip(&counted.marks)
        .map(|(s, mark)| {
            let skip_reason = stream.record(s.index).map(|r| r.reason.trim().to_string()).filter(|r| !r.is_empty());
            let mut scenario = scenario(s, *mark, &b.name, skip_reason, &xfail, &expect_report);
            if let Some(a) = about.get(&s.name) {
                scenario.covers.clone_from(&a.covers);
                scenario.note.clone_from(&a.note);
            }
            scenario.metrics = stream.record(s.index).map(metrics).unwrap_or_default();
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
    let text = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
    let qemu_version = std::fs::read_to_string(b.path.join("qemu-version.txt")).ok().map(|s| s.trim().to_string());
    let rel = |f: &str| format!("{}/{f}", b.name);
    let boot = Boot {
        name: b.name.clone(),
        accel: text("accel"),
        qemu_version,
        qemu_command: text("qemu_command"),
        verdict: verdict(&counted.verdict),
        ended: ended_text,
        wall_ms: v.get("wall_ms").and_then(Value::as_u64).unwrap_or(0),
        boot_ms: v.get("boot_ms").and_then(Value::as_u64),
        findings: result.findings.iter().map(finding).collect(),
        problems: result.problems.clone(),
        console_log: rel("console.log"),
        results_log: rel("results.ktap"),
    };
    let kernel = kernel_metadata(&b.path, &boot.qemu_command)?.map(|m| kernel(&m));
    Ok((boot, scenarios, kernel))
}

/// `kernel-metadata.json` in the boot folder, else the build cache's `metadata.json` beside the
/// image QEMU booted (runs saved before the copy was kept).
fn kernel_metadata(boot_dir: &Path, qemu_command: &str) -> Result<Option<crate::kernel::Metadata>> {
    let saved = boot_dir.join("kernel-metadata.json");
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

fn kernel(m: &crate::kernel::Metadata) -> Kernel {
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
    }
}

/// The figures a scenario reported, by name (the last of a name wins; the reader flags repeats).
fn metrics(r: &crate::ktap::ScenarioRecord) -> BTreeMap<String, Metric> {
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

/// The model's verdict for a judged one (and with it the exit code, `Verdict::exit_code`).
pub fn verdict(v: &judge::Verdict) -> Verdict {
    let detail = match v {
        judge::Verdict::KernelPanic { scenario } => scenario.clone(),
        judge::Verdict::InfraError(e) | judge::Verdict::BootFailure(e) => Some(e.clone()),
        judge::Verdict::Pass | judge::Verdict::Fail | judge::Verdict::Timeout | judge::Verdict::Interrupted => None,
    };
    Verdict { kind: v.as_str().to_string(), detail }
}

fn finding(f: &crate::console::Finding) -> Finding {
    Finding {
        kind: f.kind.as_str().to_string(),
        summary: f.summary.clone(),
        console_line: f.line,
        excerpt: f.excerpt.clone(),
        truncated: f.truncated,
    }
}

/// The model's status for a judged scenario and its xfail mark.
pub fn status_of(status: judge::Status, mark: Option<Expected>) -> (Status, Option<&'static str>) {
    match (mark, status) {
        (Some(Expected::Xfail), _) => (Status::Xfail, None),
        (Some(Expected::Xpass), _) => (Status::Xpass, None),
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
    xfail: &BTreeMap<String, String>,
    expect_report: &BTreeMap<String, String>,
) -> Scenario {
    let (status, judged) = status_of(s.status, mark);
    let reason = match status {
        Status::Xfail => xfail.get(&s.name).cloned(),
        Status::Xpass => xfail.get(&s.name).map(|r| format!("marked xfail ({r}) but passed; remove the mark")),
        Status::Skip => skip_reason,
        Status::NotRun | Status::Error => s.diagnostics.last().cloned(),
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
