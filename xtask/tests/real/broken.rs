//! Kernels that keep breaking themselves (issue 20), run as a user would: a kernel patched
//! with `user-events-faults.patch` that leaks an event the hygiene cannot delete, oopses with
//! `event_mutex` held, or oopses a few seconds into every boot, or stops a long fill half way.
//! The culprit is named, the rest runs on fresh boots or is reported as its collateral, and the
//! verdict comes in bounded time.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use crate::as_user::{run_folder, spawn_xtask, wait_for};
use xtask::support::progress::line;

/// The bound the issue sets: a complete verdict within this long of the first breakage (here
/// measured from the start of the boots, which is earlier).
const BOUND: Duration = Duration::from_secs(180);

/// One `boot` of a fault suite on the patched x86_64 kernel (its build is not timed: the
/// clock starts when the first boot does): its exit code, wall time, run.json and run folder.
fn boot(
    scratch: &Path,
    suite: &str,
    extra: &[&str],
    tag: &str,
) -> Result<(Option<i32>, Duration, serde_json::Value, std::path::PathBuf)> {
    let root = xtask::support::checkout::project_root();
    let patch = root.join("xtask/test_data/patches/user-events-faults.patch").display().to_string();
    let suite = root.join("xtask/test_data/suites/broken").join(suite).display().to_string();
    let results = tempfile::tempdir_in(scratch)?.keep();
    let marker = format!("XTASK_TEST_MARKER=broken-{tag}-{}", std::process::id());
    let log = scratch.join(format!("broken-{tag}.log"));
    let mut args = vec!["boot", "--arch", "x86_64", "--patch", &patch, "--suite", &suite];
    args.extend_from_slice(extra);
    let mut child = spawn_xtask(&args, &results, &log, &marker)?;
    // The patched kernel builds first (incremental); the clock starts with the first boot.
    let started = wait_for("the first boot", Duration::from_secs(1800), || {
        let booting = run_folder(&results).is_some_and(|r| {
            r.join("x86_64/results.ktap").is_file() || r.join("x86_64.isolated-1/results.ktap").is_file()
        });
        if !booting && child.try_wait()?.is_some() {
            anyhow::bail!("xtask ended first:\n{}", std::fs::read_to_string(&log).unwrap_or_default());
        }
        Ok(booting.then(Instant::now))
    })?;
    let status = wait_for("xtask's exit", BOUND + Duration::from_secs(120), || Ok(child.try_wait()?))?;
    let took = started.elapsed();
    let run = run_folder(&results).context("no run folder")?;
    let model = serde_json::from_slice(&std::fs::read(run.join("run.json"))?)
        .with_context(|| std::fs::read_to_string(&log).unwrap_or_default())?;
    Ok((status.code(), took, model, run))
}

/// (name, status, boot) of every scenario in run.json's first arch.
fn statuses(model: &serde_json::Value) -> Vec<(String, String, String)> {
    let text = |s: &serde_json::Value, k: &str| s[k].as_str().unwrap_or("-").to_string();
    model["arches"][0]["scenarios"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|s| (text(s, "name"), text(s, "status"), text(s, "boot")))
        .collect()
}

fn log_of<'a>(model: &'a serde_json::Value, name: &str) -> Vec<&'a str> {
    let scenarios = model["arches"][0]["scenarios"].as_array().into_iter().flatten();
    scenarios
        .filter(|s| s["name"] == name)
        .flat_map(|s| s["log"].as_array().into_iter().flatten().filter_map(|l| l.as_str()))
        .collect()
}

/// A leak the hygiene cannot undo, then an oops holding `event_mutex`: each culprit fails
/// with its evidence and ends its boot at once; every other scenario passes on a fresh boot.
pub fn leak_and_oops(scratch: &Path) -> Result<()> {
    let (code, took, model, _) = boot(scratch, "broken.yaml", &[], "shapes")?;
    line(format!("a leak and an oops: verdict after {:.1} s of boots", took.as_secs_f64()));
    let want = [
        ("broken/before", "pass", "x86_64"),
        ("broken/leaks", "fail", "x86_64"),
        ("broken/after-the-leak", "pass", "x86_64.resume-1"),
        ("broken/oopses", "fail", "x86_64.resume-1"),
        ("broken/after-the-oops-registers", "pass", "x86_64.resume-2"),
        ("broken/after-the-oops-deletes", "pass", "x86_64.resume-2"),
    ];
    let got = statuses(&model);
    let want: Vec<(String, String, String)> =
        want.iter().map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string())).collect();
    anyhow::ensure!(got == want, "statuses {got:?}");
    let leak = log_of(&model, "broken/leaks");
    anyhow::ensure!(
        leak.iter().any(|l| l.contains("cleanup failed: user event ue_fault_leak: DIAG_IOCSDEL: EBUSY"))
            && leak.iter().any(|l| l.contains("broken/leaks left what cannot be undone")),
        "no leftover evidence for the leak: {leak:?}"
    );
    // The oopsing task dies holding the group's reg_mutex, so its exit blocks in
    // user_events_release: the agent ends the boot as stuck (or, had it exited, as oopsed).
    let oops = log_of(&model, "broken/oopses");
    anyhow::ensure!(
        oops.iter().any(|l| l.contains("kernel NULL pointer dereference"))
            && oops.iter().any(|l| l.contains("the agent gave up the boot")),
        "no oops evidence: {oops:?}"
    );
    anyhow::ensure!(code == Some(1), "exit {code:?}, expected 1");
    anyhow::ensure!(took < BOUND, "the verdict took {:.1} s", took.as_secs_f64());
    Ok(())
}

/// A kernel that oopses a few seconds into every boot: after three fresh boots in a row that
/// broke too, the run stops spending boots; the rest are collateral of the first culprit, in
/// run.json, KTAP and JUnit, and the verdict comes within the bound.
pub fn breaks_every_boot(scratch: &Path) -> Result<()> {
    let args = ["--kernel-args", "user_events_fault_oops_s=4"];
    let (code, took, model, run) = boot(scratch, "every-boot.yaml", &args, "every-boot")?;
    line(format!("a kernel that oopses on every boot: verdict after {:.1} s of boots", took.as_secs_f64()));
    let got = statuses(&model);
    let boots: std::collections::BTreeSet<&str> = got.iter().map(|(_, _, b)| b.as_str()).collect();
    let want_boots = ["x86_64", "x86_64.resume-1", "x86_64.resume-2", "x86_64.resume-3"];
    anyhow::ensure!(boots.iter().eq(want_boots.iter()), "boots {boots:?}: {got:?}");
    let collateral: Vec<&serde_json::Value> = model["arches"][0]["scenarios"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|s| s["status"] == "collateral")
        .collect();
    anyhow::ensure!(!collateral.is_empty(), "nothing collateral: {got:?}");
    let first_failed = got.iter().find(|(_, s, _)| s != "pass").map(|(n, _, _)| n.clone()).context("no culprit")?;
    for s in &collateral {
        anyhow::ensure!(
            s["collateral_of"] == first_failed.as_str(),
            "{} is collateral of {}",
            s["name"],
            s["collateral_of"]
        );
        let reason = s["reason"].as_str().unwrap_or_default();
        anyhow::ensure!(reason.contains("keeps breaking itself"), "reason {reason}");
    }
    let name = collateral[0]["name"].as_str().unwrap_or_default();
    let short = name.split_once('/').map_or(name, |(_, n)| n);
    let ktap = std::fs::read_to_string(run.join("x86_64.ktap"))?;
    anyhow::ensure!(
        ktap.lines().map(str::trim_start).any(|l| l.starts_with("ok ")
            && l.contains(&format!(" {short} # SKIP not run: {first_failed} broke the kernel"))),
        "the KTAP does not skip {name} as collateral of {first_failed}:\n{ktap}"
    );
    let junit = std::fs::read_to_string(run.join("junit.xml"))?;
    anyhow::ensure!(junit.contains("type=\"collateral\""), "no collateral test case in junit.xml");
    anyhow::ensure!(code == Some(1), "exit {code:?}, expected 1");
    anyhow::ensure!(took < BOUND, "the verdict took {:.1} s", took.as_secs_f64());
    Ok(())
}

/// The fill of 65k events (a deadline of 600 s) on a kernel that stops it half way: its
/// progress markers stop, and the host ends the scenario 30 s after the last one, as a deadline
/// overrun, with what was measured; not at the deadline. Without a history (`--history off`):
/// the stall needs none.
pub fn a_fill_that_stops(scratch: &Path) -> Result<()> {
    let (code, took, model, _) =
        boot(scratch, "stalls.yaml", &["--history", "off", "--filter", "stalls/fill-stops"], "stalls")?;
    line(format!("a fill the kernel stops: verdict after {:.1} s of boots", took.as_secs_f64()));
    let got = statuses(&model);
    let want = [("stalls/fill-stops".to_string(), "fail".to_string(), "x86_64".to_string())];
    anyhow::ensure!(got == want, "statuses {got:?}");
    let judged = &model["arches"][0]["scenarios"][0]["judged"];
    anyhow::ensure!(judged == "timeout", "judged {judged}, expected timeout (as a deadline overrun)");
    let log = log_of(&model, "stalls/fill-stops");
    anyhow::ensure!(
        log.iter().any(|l| l.contains("ended by its progress: no progress marker for")
            && l.contains("of at most 70000 in")
            && l.contains(": stalled")),
        "no stall verdict: {log:?}"
    );
    anyhow::ensure!(code == Some(1), "exit {code:?}, expected 1");
    anyhow::ensure!(took < BOUND, "the verdict took {:.1} s", took.as_secs_f64());
    Ok(())
}

/// The fill of `stalls/fill-crawls` passes on the unpatched kernel, recorded into a private
/// history; on the patched kernel each registration takes 10 ms more, so the fill keeps its
/// markers coming (no stall) at a hundredth of its rate: the host ends it by its projected
/// duration against that history's median, long before its 600 s deadline.
pub fn a_fill_that_crawls(scratch: &Path) -> Result<()> {
    let history = format!("sqlite:{}", scratch.join("crawl.sqlite").display());
    let root = xtask::support::checkout::project_root();
    let suite = root.join("xtask/test_data/suites/broken/stalls.yaml");
    let xtask = crate::as_user::this_xtask()?;
    let pristine = std::process::Command::new(&xtask)
        .args(["--history", &history, "boot", "--arch", "x86_64", "--filter", "stalls/fill-crawls", "--suite"])
        .arg(&suite)
        .arg("--results")
        .arg(scratch.join("crawl-pristine"))
        .output()?;
    let said = String::from_utf8_lossy(&pristine.stderr);
    anyhow::ensure!(pristine.status.success(), "the fill on the unpatched kernel: {}: {said}", pristine.status);
    let extra = ["--history", history.as_str(), "--filter", "stalls/fill-crawls"];
    let (code, took, model, _) = boot(scratch, "stalls.yaml", &extra, "crawls")?;
    line(format!("a fill the kernel slows: verdict after {:.1} s of boots", took.as_secs_f64()));
    let got = statuses(&model);
    let want = [("stalls/fill-crawls".to_string(), "fail".to_string(), "x86_64.isolated-1".to_string())];
    anyhow::ensure!(got == want, "statuses {got:?}");
    let log = log_of(&model, "stalls/fill-crawls");
    anyhow::ensure!(
        log.iter().any(|l| l.contains("ended by its progress:")
            && l.contains("its median on x86_64 in the history is")
            && l.contains(": crawling")),
        "no crawl verdict: {log:?}"
    );
    anyhow::ensure!(code == Some(1), "exit {code:?}, expected 1");
    anyhow::ensure!(took < BOUND, "the verdict took {:.1} s", took.as_secs_f64());
    Ok(())
}
