//! `cargo xtask mutants --run` on four fixed mutants of known outcome, run as a user would: a
//! coverage map of the `format` suite on x86_64, then the mutants of `trace_events_user.c` with
//! `test_data/patches/mutants-build-bug-on.patch` applied, chosen by id: one the `format` suite
//! kills, one that cannot build, one no `format` scenario reaches, and the tracked equivalent
//! one (run with an empty list: it survives; reported with its tracked entry keyed to the
//! patched file's text, [`keyed_to`]: Ignored). The
//! killed and the equivalent one run on the schemata kernel; the one that cannot build is left
//! out of it (it sits in a `BUILD_BUG_ON()`) and built on its own. The state file,
//! `mutants.json` (against the schema's requirements) and `summary.md`'s score line are checked.

use std::path::Path;

use anyhow::{Context, Result};
use serde_json::Value;

use crate::as_user::{run_folder, this_xtask};
use xtask::support::cmd::{cmd, sh};

/// `user_events_write_core`: `if (unlikely(i->count < user->min_size))` negated, so every
/// write of a full payload is EINVAL and short ones go through.
pub const KILLED: &str = "092dea4a69d0";
/// On the patch's `BUILD_BUG_ON(sizeof(u32) != 4)` in `user_reg_get`: `!=` to `==`.
pub const COMPILE_ERROR: &str = "7413157a7e89";
/// `set_max_user_events_sysctl`: `return ret;` to `return 0;`; only the `limits` suite writes
/// the sysctl.
pub const NO_COVERAGE: &str = "9fd52a3a9176";
/// `user_field_set_string`: `buf + pos` to `buf - pos` where `pos` is still 0 (listed in
/// mutants/equivalent.tsv).
pub const EQUIVALENT: &str = "d357b3111bbd";

/// Runs `cargo xtask ARGS` to its end; its exit code and its whole output.
fn xtask(args: &[String]) -> Result<(Option<i32>, String)> {
    let (sh, exe) = (sh()?, this_xtask()?);
    let out = cmd!(sh, "{exe} {args...}").ignore_status().output()?;
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    Ok((out.status.code(), text))
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// The four mutants' statuses in `mutants.json`, by id, and the report itself.
fn report(out: &Path) -> Result<(std::collections::BTreeMap<String, Value>, Value)> {
    let json: Value = serde_json::from_slice(&std::fs::read(out.join("mutants.json"))?)?;
    let errors = xtask::mutants::report::schema_errors(&json);
    anyhow::ensure!(errors.is_empty(), "mutants.json does not meet the schema: {errors:?}");
    let file = json["files"].as_object().and_then(|f| f.values().next()).context("mutants.json has no file")?;
    let by_id = file["mutants"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| (m["id"].as_str().unwrap_or_default().to_string(), m.clone()))
        .collect();
    Ok((by_id, json))
}

/// A mutant's status in `mutants.json`.
fn stryker(by_id: &std::collections::BTreeMap<String, Value>, id: &str) -> String {
    by_id.get(id).and_then(|m| m["status"].as_str()).unwrap_or("absent").to_string()
}

/// The tracked list's entry of [`EQUIVALENT`], its file digests replaced by that of `text` (the
/// file as the mutants saw it: `mutants.json`'s source). The tracked entry names the texts its
/// argument was made for, the pristine file's, and an entry applies to no other text; the
/// patch this check applies only adds a line in `user_reg_get`, so the argument holds for it.
fn keyed_to(text: &str) -> Result<String> {
    let root = xtask::support::checkout::project_root();
    let tracked = std::fs::read_to_string(root.join(xtask::mutating::equivalents::EQUIVALENT_LIST))?;
    let line = tracked
        .lines()
        .find(|l| l.starts_with(&format!("{EQUIVALENT}\t")))
        .with_context(|| format!("{EQUIVALENT} is not in {}", xtask::mutating::equivalents::EQUIVALENT_LIST))?;
    let mut cols: Vec<&str> = line.splitn(5, '\t').collect();
    anyhow::ensure!(cols.len() == 5, "the tracked entry of {EQUIVALENT} has {} columns, not 5: {line}", cols.len());
    let digest = xtask::support::files::sha256_hex(text);
    cols[2] = &digest[..xtask::mutants::equivalent::DIGEST_LEN];
    Ok(format!("{}\n", cols.join("\t")))
}

/// The check: the coverage map, the run with no equivalents listed, the report with the
/// tracked entry of the equivalent one keyed to the patched text.
pub fn fixed_mutants(scratch: &Path) -> Result<()> {
    let root = xtask::support::checkout::project_root();
    stale_equivalents_fail(scratch)?;
    let cov = scratch.join("mutants-coverage");
    let mut args = strings(&["run", "--arch", "x86_64", "--coverage", "--profile", crate::coverage::PROFILE]);
    args.extend(strings(&["--filter", "format/*", "--results"]));
    args.push(cov.display().to_string());
    let (code, log) = xtask(&args)?;
    anyhow::ensure!(code == Some(0), "the coverage run of format/* exited {code:?}:\n{log}");
    let map = run_folder(&cov).context("no coverage run folder")?;

    let out = scratch.join("mutants-out");
    let none = scratch.join("no-equivalents.tsv");
    std::fs::write(&none, "")?;
    let patch = root.join("xtask/test_data/patches/mutants-build-bug-on.patch");
    // The map's kernel is the coverage checks' (faults and GCOV); the mutants run on the default
    // kernel (`+default`), whose build directory the schemata kernel is an incremental build in.
    let mut common = strings(&["mutants", "--coverage-map"]);
    common.extend([format!("{}+default", map.display()), "--out".into(), out.display().to_string()]);
    common.extend(["--patch".to_string(), patch.display().to_string()]);
    for id in [KILLED, COMPILE_ERROR, NO_COVERAGE, EQUIVALENT] {
        common.extend(["--id".to_string(), id.to_string()]);
    }

    // Run with an empty equivalent list: the equivalent one is built and run too.
    let mut run = common.clone();
    run.extend(strings(&["--run", "--report", "--timeout", "5m", "--batch", "1", "--equivalent"]));
    run.push(none.display().to_string());
    let (code, log) = xtask(&run)?;
    anyhow::ensure!(code == Some(0), "mutants --run exited {code:?}:\n{log}");
    let state = xtask::mutants::plan::load_state(&xtask::mutants::plan::state_file(&out))?;
    let status = |id: &str| state.get(id).map(|r| r.outcome.name()).unwrap_or("not in the state file");
    let (by_id, json) = report(&out)?;

    use xtask::mutants::report::Outcome;
    let killed = state.get(KILLED).map(|r| &r.outcome);
    let Some(Outcome::Killed { by, evidence }) = killed else {
        anyhow::bail!("{KILLED}: {} (expected Killed)\n{log}", status(KILLED));
    };
    anyhow::ensure!(
        !by.is_empty() && by.iter().all(|s| s.starts_with("format/")) && evidence.contains("(expected"),
        "{KILLED}: killed by {by:?} with evidence `{evidence}`: expected format scenarios and a mismatch"
    );
    let Some(Outcome::CompileError { reason }) = state.get(COMPILE_ERROR).map(|r| &r.outcome) else {
        anyhow::bail!("{COMPILE_ERROR}: {} (expected CompileError)\n{log}", status(COMPILE_ERROR));
    };
    anyhow::ensure!(reason.contains("error"), "{COMPILE_ERROR}: the reason `{reason}` names no compiler error");
    anyhow::ensure!(
        state.get(EQUIVALENT).is_some_and(|r| r.outcome == Outcome::Survived),
        "{EQUIVALENT}: {} (expected Survived: it is equivalent)",
        status(EQUIVALENT)
    );
    anyhow::ensure!(!state.contains_key(NO_COVERAGE), "{NO_COVERAGE} was run, not decided without a build");
    // The schemata kernel served the two that ran; the one that cannot build had its own.
    let own = |id: &str| out.join("patches").join(format!("{id}.patch")).is_file();
    anyhow::ensure!(out.join("schemata.patch").is_file(), "no schemata.patch in {}", out.display());
    anyhow::ensure!(
        !own(KILLED) && !own(EQUIVALENT) && own(COMPILE_ERROR),
        "which mutants were built on their own: {KILLED} {}, {EQUIVALENT} {}, {COMPILE_ERROR} {} \
         (expected only {COMPILE_ERROR})",
        own(KILLED),
        own(EQUIVALENT),
        own(COMPILE_ERROR)
    );
    let killed_run = run_folder(&out.join("runs").join(KILLED)).context("no run folder of the killed mutant")?;
    let qemu = std::fs::read_to_string(killed_run.join("x86_64").join("qemu-command.txt"))?;
    let param = format!("{}=", xtask::mutants::schemata::PARAM);
    anyhow::ensure!(qemu.contains(&param), "{KILLED} did not boot with {param}N: {qemu}");
    let want =
        [(KILLED, "Killed"), (COMPILE_ERROR, "CompileError"), (NO_COVERAGE, "NoCoverage"), (EQUIVALENT, "Survived")];
    for (id, s) in want {
        let got = stryker(&by_id, id);
        anyhow::ensure!(got == s, "{id}: mutants.json says {got} (expected {s})");
    }
    anyhow::ensure!(by_id.len() == 4, "mutants.json has {} mutants, not the four asked for", by_id.len());

    batched_like_alone(&common, &none, &state, scratch)?;

    // The report again with the tracked entry: the kept Survived becomes Ignored, with the reason.
    let text = json["files"].as_object().and_then(|f| f.values().next()).and_then(|f| f["source"].as_str());
    let listed = scratch.join("equivalent-keyed-to-the-patched-text.tsv");
    std::fs::write(&listed, keyed_to(text.context("mutants.json has no source text")?)?)?;
    let mut again = common;
    again.extend(["--report".to_string(), "--equivalent".into(), listed.display().to_string()]);
    let (code, log) = xtask(&again)?;
    anyhow::ensure!(code == Some(0), "mutants --report exited {code:?}:\n{log}");
    let (by_id, _) = report(&out)?;
    let eq = by_id.get(EQUIVALENT).context("the equivalent mutant is not in mutants.json")?;
    let reason = eq["statusReason"].as_str().unwrap_or_default();
    anyhow::ensure!(
        eq["status"] == "Ignored" && reason.starts_with("equivalent: "),
        "{EQUIVALENT} with its tracked entry: {} `{reason}` (expected Ignored, equivalent: ...)",
        eq["status"]
    );
    anyhow::ensure!(stryker(&by_id, KILLED) == "Killed", "{KILLED} lost its kept result on the second report");
    let summary = std::fs::read_to_string(out.join("summary.md"))?;
    // The CompileError and the equivalent left out: 1 Killed of 2 with the NoCoverage one, of 1
    // without; none pending. The line as `xtask::mutants::summary::render` writes it.
    let want = "Score 50.0% (Killed + Timeout over all but CompileError, RuntimeError and equivalent), 100.0% \
                of the covered ones; 1 detected, 0 survived, 1 NoCoverage, 2 excluded, 0 not run yet.";
    let scores: Vec<&str> = summary.lines().filter(|l| l.starts_with("Score ")).collect();
    anyhow::ensure!(
        scores == [want],
        "summary.md's score line(s) {scores:?}, expected exactly [{want:?}] (1 Killed, 1 NoCoverage, the \
         CompileError and the equivalent excluded):\n{summary}"
    );
    Ok(())
}

/// The same mutants with `--batch 8` into another folder: the two the schemata kernel holds
/// run in one boot, each under its number switched at run time (no boot parameter), and end as
/// they did in boots of their own, killed by the same scenarios.
fn batched_like_alone(
    common: &[String],
    none: &Path,
    alone: &std::collections::BTreeMap<String, xtask::mutants::report::MutantResult>,
    scratch: &Path,
) -> Result<()> {
    let out = scratch.join("mutants-batched");
    let mut run: Vec<String> =
        common.iter().map(|a| if a.ends_with("mutants-out") { out.display().to_string() } else { a.clone() }).collect();
    run.extend(strings(&["--run", "--timeout", "5m", "--batch", "8", "--equivalent"]));
    run.push(none.display().to_string());
    let (code, log) = xtask(&run)?;
    anyhow::ensure!(code == Some(0), "mutants --run --batch 8 exited {code:?}:\n{log}");
    let state = xtask::mutants::plan::load_state(&xtask::mutants::plan::state_file(&out))?;
    for id in [KILLED, EQUIVALENT] {
        let (a, b) = (alone.get(id).map(|r| &r.outcome), state.get(id).map(|r| &r.outcome));
        let by = |o: Option<&xtask::mutants::report::Outcome>| match o {
            Some(xtask::mutants::report::Outcome::Killed { by, .. }) => by.clone(),
            _ => vec![],
        };
        anyhow::ensure!(
            a.map(|o| o.name()) == b.map(|o| o.name()) && by(a) == by(b),
            "{id}: {a:?} alone, {b:?} in a batch\n{log}"
        );
    }
    anyhow::ensure!(log.contains("2 in one boot"), "the two schemata mutants did not share a boot:\n{log}");
    let batches: Vec<_> = std::fs::read_dir(out.join("batches"))?.flatten().map(|e| e.path()).collect();
    anyhow::ensure!(batches.len() == 1, "batch folders {batches:?}, expected one");
    let batch = run_folder(&batches[0]).context("no batch run folder")?;
    let qemu = std::fs::read_to_string(batch.join("x86_64").join("qemu-command.txt"))?;
    let param = format!("{}=", xtask::mutants::schemata::PARAM);
    anyhow::ensure!(!qemu.contains(&param), "the batch booted with {param}N: {qemu}");
    Ok(())
}

/// `mutants --check-equivalents` on the default file: the tracked list applies whole (exit 0);
/// the same list with one entry made stale on purpose (its id changed to one no mutant has)
/// fails (exit 1), naming the entry's line.
fn stale_equivalents_fail(scratch: &Path) -> Result<()> {
    let root = xtask::support::checkout::project_root();
    let (code, log) = xtask(&strings(&["mutants", "--check-equivalents"]))?;
    anyhow::ensure!(code == Some(0), "mutants --check-equivalents on the tracked list exited {code:?}:\n{log}");
    let tracked = std::fs::read_to_string(root.join("mutants/equivalent.tsv"))?;
    let first = tracked.lines().position(|l| !l.starts_with('#') && !l.trim().is_empty()).context("an empty list")?;
    let stale: Vec<String> = tracked
        .lines()
        .enumerate()
        .map(|(n, l)| if n == first { format!("000000000000{}", &l[12..]) } else { l.to_string() })
        .collect();
    let path = scratch.join("stale-equivalents.tsv");
    std::fs::write(&path, stale.join("\n") + "\n")?;
    let mut args = strings(&["mutants", "--check-equivalents", "--equivalent"]);
    args.push(path.display().to_string());
    let (code, log) = xtask(&args)?;
    let named = format!("stale-equivalents.tsv:{}: 000000000000 is no mutant of this file", first + 1);
    anyhow::ensure!(
        code == Some(1) && log.contains(&named),
        "a list with a stale entry: exit {code:?} (expected 1) naming `{named}`:\n{log}"
    );
    Ok(())
}
