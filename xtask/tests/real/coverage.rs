//! Coverage runs in `cargo xtask test`: the [`ARCH`] kernel built with `--coverage`, three
//! scenarios run on it, and their lcov tracefiles read by Debian's `lcov --summary` and checked
//! against what the scenarios do: the one that deletes an event executes
//! `user_events_ioctl_del()`, the one that never deletes does not, and the one whose enable bit
//! is written by the kernel's fault-in worker (a workqueue) executes that worker; then a patch
//! that adds a line no scenario runs (`test_data/patches/blind-spot.patch`) gets that line
//! named as a blind spot first in the summary, and `--fail-on-blind-spots` exits 2; and
//! `validate --affected` reads a one-line change (`test_data/patches/delete-busy-errno.patch`)
//! through that run's coverage as the baseline's map. The run's `coverage/lines.tsv` agrees with
//! its figures, and `suites/unexecuted-lines.tsv` is checked against it as a partial run: each
//! entry names a line of the source as built, and none is executed by the three scenarios.

use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result};

use xtask::cli::{ConfigArgs, KernelArgs, SelectArgs};
use xtask::coverage::lcov;
use xtask::kernel::build::Built;
use xtask::kernel::gcov::DEFAULT_FILE;
use xtask::support::cmd::{cmd, sh, stdout};

use crate::{record, Outcome};

pub const ARCH: &str = "x86_64";
/// Deletes an event with `DIAG_IOCSDEL` (and gets EBUSY and ENOENT).
pub const DELETES: &str = "registration/delete-busy-and-missing";
/// Registers and checks its bit; never deletes (its event goes away by itself after it ends).
pub const NEVER_DELETES: &str = "registration/success-returns-zero-and-clears-the-bit";
/// Its bits come back through `user_event_enabler_fault_fixup()`, run on a workqueue.
pub const FAULTS_IN: &str = "memory/a-dropped-page-is-faulted-back-in";

/// The profile the coverage kernel adds to GCOV: fault injection, as the mutants' main stage
/// has it (`docs/src/mutants.md`). The atlas check's 6.12 kernel is this one: one build serves
/// both.
pub const PROFILE: &str = "faults";

/// The coverage kernel of [`ARCH`] ([`PROFILE`] and GCOV): the notes kept with it, a cache
/// entry of its own.
pub fn build(base: &KernelArgs) -> Result<Vec<Built>> {
    let args = KernelArgs {
        arch: ARCH.into(),
        config: ConfigArgs { coverage: true, profiles: vec![PROFILE.into()], ..ConfigArgs::default() },
        ..base.clone()
    };
    let built = crate::kernels(&args)?;
    let b = built.first().context("no kernel built")?;
    let gcov = b.metadata.config.effective.get("CONFIG_GCOV_KERNEL").map(String::as_str);
    anyhow::ensure!(gcov == Some("y"), "CONFIG_GCOV_KERNEL is {gcov:?}");
    anyhow::ensure!(b.metadata.gcov_files == [DEFAULT_FILE], "gcov files {:?}", b.metadata.gcov_files);
    let gcno = b.image.with_file_name("gcov").join("kernel/trace/trace_events_user.gcno");
    anyhow::ensure!(gcno.is_file(), "no {}", gcno.display());
    let plain = crate::kernels(&KernelArgs { arch: ARCH.into(), ..base.clone() })?;
    let p = plain.first().context("no default kernel")?;
    anyhow::ensure!(p.metadata.key != b.metadata.key, "the coverage kernel has the default kernel's cache key");
    anyhow::ensure!(p.metadata.gcov_files.is_empty(), "the default kernel has gcov files");
    let plain_gcov = p.metadata.config.effective.get("CONFIG_GCOV_KERNEL");
    anyhow::ensure!(plain_gcov.is_none(), "the default kernel requests CONFIG_GCOV_KERNEL ({plain_gcov:?})");
    Ok(built)
}

/// `lcov --summary` of a tracefile, branches included: (lines hit, found), (branches hit, found).
fn lcov_summary(file: &Path) -> Result<((u64, u64), (u64, u64))> {
    let sh = sh()?;
    let out = stdout(cmd!(sh, "lcov --rc lcov_branch_coverage=1 --summary {file}"))?;
    // lcov prints its summary on stdout or stderr depending on the version: the command's
    // stdout, then its whole output again on failure to find the lines.
    let text = String::from_utf8_lossy(&out).into_owned();
    let text = if text.contains("lines") {
        text
    } else {
        let o =
            sh.cmd("lcov").args(["--rc", "lcov_branch_coverage=1", "--summary"]).arg(file).ignore_status().output()?;
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    // `  lines......: 41.2% (420 of 1019 lines)`
    let figure = |what: &str| -> Result<(u64, u64)> {
        let line =
            text.lines().find(|l| l.trim_start().starts_with(what)).with_context(|| format!("no {what} in {text}"))?;
        let inner = line.split('(').nth(1).context("no (h of f)")?;
        let w: Vec<&str> = inner.split_whitespace().collect();
        Ok((w[0].parse()?, w[2].parse()?))
    };
    Ok((figure("lines")?, figure("branches")?))
}

/// Runs [`DELETES`], [`NEVER_DELETES`] and [`FAULTS_IN`] on the coverage kernel and checks the
/// run's tracefiles.
pub fn run_and_check(built: &[Built], opts: &xtask::run::boot::Options, results: &Path) -> Result<()> {
    let select =
        SelectArgs { filters: vec![DELETES.into(), NEVER_DELETES.into(), FAULTS_IN.into()], ..Default::default() };
    let chosen = xtask::run::pipeline::choose(&select, results)?;
    let judged = xtask::run::pipeline::run(&chosen, built, opts)?;
    let run = xtask::run::pipeline::publish(&judged, built)?.context("nothing booted")?;
    let run_dir = judged.first().and_then(|j| j.outcome.out_dir.parent()).context("no run folder")?;
    anyhow::ensure!(run.verdict.kind == "pass", "the run's verdict is {}", run.verdict.kind);
    let c = run.coverage.as_ref().context("run.json has no coverage")?;
    anyhow::ensure!(c.problems.is_empty(), "coverage problems: {:?}", c.problems);
    let rows: Vec<&str> = c.rows.iter().map(|r| r.arch.as_str()).collect();
    anyhow::ensure!(rows == [ARCH, "all"], "coverage rows {rows:?}");
    for r in &c.rows {
        anyhow::ensure!(r.scenarios == 3, "{}: {} scenarios counted", r.arch, r.scenarios);
        let (lines, branches) = lcov_summary(&run_dir.join(&r.tracefile))?;
        anyhow::ensure!(
            lines == (r.totals.lines_hit, r.totals.lines_found)
                && branches == (r.totals.branches_hit, r.totals.branches_found),
            "{}: lcov reads lines {lines:?} branches {branches:?}, the run says {}",
            r.tracefile,
            r.totals.describe()
        );
        anyhow::ensure!(r.totals.lines_hit > 100 && r.totals.branches_hit > 0, "{}: {}", r.arch, r.totals.describe());
    }
    let calls = |scenario: &str, function: &str| -> Result<u64> {
        let file = run_dir.join(xtask::coverage::runs::scenario_tracefile(ARCH, scenario));
        lcov_summary(&file)?;
        let text = std::fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
        let f = lcov::parse_tracefile(&text)?;
        let f = f
            .iter()
            .find(|f| f.path == DEFAULT_FILE)
            .with_context(|| format!("{}: no {DEFAULT_FILE}", file.display()))?;
        Ok(f.functions.get(function).with_context(|| format!("{}: no function {function}", file.display()))?.1)
    };
    let del = "user_events_ioctl_del";
    let (deletes, never) = (calls(DELETES, del)?, calls(NEVER_DELETES, del)?);
    anyhow::ensure!(deletes >= 3, "{DELETES} called {del}() {deletes} times (3 deletes)");
    anyhow::ensure!(never == 0, "{NEVER_DELETES} called {del}() {never} times");
    let fixup = "user_event_enabler_fault_fixup";
    let worker = calls(FAULTS_IN, fixup)?;
    anyhow::ensure!(worker > 0, "{FAULTS_IN}: the fault-in worker {fixup}() was not counted");
    // The tracked list of unexecuted lines against this (partial) run: every entry still names
    // an instrumented line of the source as built, and none of the three scenarios executes one.
    let root = xtask::support::checkout::project_root();
    let list = root.join(xtask::coverage::unexecuted::TRACKED);
    let (_, lines, report) = xtask::coverage::tracked::check_run(run_dir, &list, true)?;
    let hit = lines.iter().filter(|l| l.executed()).count() as u64;
    let all = c.rows.last().context("no union row")?;
    anyhow::ensure!(
        (hit, lines.len() as u64) == (all.totals.lines_hit, all.totals.lines_found),
        "lines.tsv: {hit} of {} executed, the run says {}",
        lines.len(),
        all.totals.describe()
    );
    anyhow::ensure!(report.ok(), "{}", report.describe().join("\n"));
    // Negative control: the list with a row made stale on purpose (a line of the delete ioctl,
    // which DELETES executes) fails the same check, naming the row.
    let stale_line = lines
        .iter()
        .find(|l| l.function == del && l.executed())
        .with_context(|| format!("lines.tsv: no executed line of {del}()"))?;
    let mut stale = std::fs::read_to_string(&list)?;
    stale.push_str(&format!(
        "{}\t{}\t{}\tuntested\t-\tmade stale on purpose by the real coverage check\n",
        stale_line.file, stale_line.function, stale_line.text
    ));
    let stale_list = run_dir.join("unexecuted-lines.stale.tsv");
    std::fs::write(&stale_list, stale)?;
    let (_, _, stale_report) = xtask::coverage::tracked::check_run(run_dir, &stale_list, true)?;
    let said = stale_report.describe().join("\n");
    anyhow::ensure!(
        !stale_report.ok() && said.contains(&stale_line.text),
        "a row for `{}`, which {DELETES} executes, was not found stale:\n{said}",
        stale_line.text
    );
    let html = std::fs::read_to_string(run_dir.join(&c.index))?;
    anyhow::ensure!(html.contains(DELETES), "{} does not name {DELETES}", c.index);
    let report = std::fs::read_to_string(run_dir.join("report.html"))?;
    anyhow::ensure!(report.contains(&c.index), "report.html does not link {}", c.index);
    Ok(())
}

/// `run --patch blind-spot.patch --fail-on-blind-spots` on [`ARCH`] with the three scenarios:
/// exit 2, and the patch's `pr_warn()` line, which only a failed allocation reaches, named first.
pub fn blind_spot(results: &Path) -> Result<()> {
    let root = xtask::support::checkout::project_root();
    let patch = root.join("xtask/test_data/patches/blind-spot.patch");
    let results = results.join("blind-spot");
    let argv = [
        "xtask".to_string(),
        "run".into(),
        "--arch".into(),
        ARCH.into(),
        "--patch".into(),
        patch.display().to_string(),
        "--fail-on-blind-spots".into(),
        "--profile".into(),
        PROFILE.into(),
        "--results".into(),
        results.display().to_string(),
        "--filter".into(),
        DELETES.into(),
        "--filter".into(),
        NEVER_DELETES.into(),
        "--filter".into(),
        FAULTS_IN.into(),
    ];
    let cli = <xtask::cli::Xtask as clap::Parser>::try_parse_from(argv)?;
    let xtask::cli::Cmd::Run(args) = cli.command else { anyhow::bail!("not a run") };
    let code = args.run()?;
    anyhow::ensure!(code == xtask::support::exit::BLIND_SPOTS, "exit code {code}, expected 2");
    let run_dir = std::fs::read_dir(&results)?
        .flatten()
        .map(|e| e.path())
        .find(|p| p.join("run.json").is_file())
        .context("no run folder")?;
    let run = xtask::results::compare::read_run_json(&run_dir.join("run.json"))?;
    let spots = run.blind_spots();
    let pr_warn = spots.iter().find(|b| b.text.contains("pr_warn(\"user_events: no memory"));
    let b = pr_warn.with_context(|| format!("the pr_warn line is not a blind spot: {spots:?}"))?;
    anyhow::ensure!(b.file == DEFAULT_FILE && b.line == 2163, "blind spot at {}:{}", b.file, b.line);
    anyhow::ensure!(spots.len() == 1, "more blind spots than the one line: {spots:?}");
    let md = std::fs::read_to_string(run_dir.join("summary.md"))?;
    let at = md.find(&format!("blind spot `{DEFAULT_FILE}:2163`")).context("summary.md does not name it")?;
    anyhow::ensure!(at < md.find("| arch |").unwrap_or(usize::MAX), "summary.md does not name it first");
    Ok(())
}

/// `validate --affected --patch delete-busy-errno.patch` on [`ARCH`] with the three scenarios,
/// the coverage run of [`run_and_check`] in `results` as the baseline's map (found by its
/// source): the one-line change (EAGAIN for EBUSY) is read through the map, only [`DELETES`] runs,
/// it is named as the first regression before the comparison, and validate exits 1. Then a
/// change to a header is refused with the reason (exit 128) before anything is built.
pub fn affected(results: &Path) -> Result<()> {
    let root = xtask::support::checkout::project_root();
    let patch = root.join("xtask/test_data/patches/delete-busy-errno.patch");
    let (sh, xtask) = (sh()?, crate::as_user::this_xtask()?);
    // The patched side is the default kernel's (an incremental build); the map is the coverage
    // kernel's run, found by its source.
    let select = ["--arch", ARCH, "--filter", DELETES, "--filter", NEVER_DELETES, "--filter", FAULTS_IN];
    let out = cmd!(sh, "{xtask} validate --affected --patch {patch} {select...} --results {results}")
        .ignore_status()
        .output()?;
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    anyhow::ensure!(out.status.code() == Some(1), "validate exited {:?}:\n{text}", out.status.code());
    let map = format!("validate: {ARCH}: coverage map {}", results.display());
    anyhow::ensure!(text.contains(&map), "validate did not read the map in {}:\n{text}", results.display());
    anyhow::ensure!(text.contains("1 of 3 planned scenario(s) ran the baseline lines"), "not 1 of 3 chosen:\n{text}");
    let named = format!("validate: first regression: {ARCH}/{DELETES} passed on the baseline and fails now");
    let at = text.find(&named).with_context(|| format!("no `{named}`:\n{text}"))?;
    anyhow::ensure!(at < text.find("validate: comparing").unwrap_or(0), "named after the comparison:\n{text}");
    let regressed: Vec<&str> = text.lines().filter(|l| l.trim_start().starts_with("REGRESSED ")).collect();
    anyhow::ensure!(regressed.len() == 1 && regressed[0].contains(DELETES), "regressed: {regressed:?}\n{text}");
    let patched = text
        .lines()
        .find_map(|l| l.split_once("validate: comparing ")?.1.split_once(" with ")?.1.strip_suffix(" (patched)"))
        .with_context(|| format!("validate did not name the patched run:\n{text}"))?;
    let run = xtask::results::compare::read_run_json(&Path::new(patched).join("run.json"))?;
    let a = run.arch(ARCH).context("no x86_64 in the patched run")?;
    let ran: Vec<(&str, &str)> = a.scenarios.iter().map(|s| (s.name.as_str(), s.status.as_str())).collect();
    anyhow::ensure!(ran == [(DELETES, "fail")], "the patched side ran {ran:?}");
    anyhow::ensure!(a.boots.len() == 1, "boots {:?}", a.boots.iter().map(|b| &b.name).collect::<Vec<_>>());

    let scratch = tempfile::tempdir_in(results)?;
    let header = scratch.path().join("header.patch");
    let h = "include/linux/user_events.h";
    std::fs::write(&header, format!("--- a/{h}\n+++ b/{h}\n@@ -1,1 +1,2 @@\n /* x */\n+/* y */\n"))?;
    let out = cmd!(sh, "{xtask} validate --affected --patch {header} {select...} --results {results}")
        .ignore_status()
        .output()?;
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    anyhow::ensure!(out.status.code() == Some(128), "validate exited {:?}:\n{text}", out.status.code());
    let why = format!("validate --affected: the change touches {h}: a header");
    anyhow::ensure!(text.contains(&why) && !text.contains("booting"), "no `{why}` before any boot:\n{text}");
    Ok(())
}

/// The coverage checks, each recorded: the build, the run and its tracefiles, a blind spot,
/// `validate --affected`.
pub(crate) fn checks(opts: &xtask::run::boot::Options, base: &KernelArgs, scratch: &Path, outcomes: &mut Vec<Outcome>) {
    let arch = ARCH;
    let started = Instant::now();
    let built = build(base);
    let result = built.as_ref().map(|_| ()).map_err(|e| anyhow::anyhow!("{e:#}"));
    record(
        outcomes,
        &format!("{arch} (coverage): the kernel builds with GCOV on trace_events_user.c, under a cache key of its own"),
        started,
        result,
    );
    let Ok(built) = built else { return };
    let started = Instant::now();
    let result = run_and_check(&built, opts, scratch);
    record(
        outcomes,
        &format!(
            "{arch} (coverage): lcov --summary reads the tracefiles; a deleting scenario covers user_events_ioctl_del(), \
             one that never deletes does not, the fault-in worker is counted; lines.tsv agrees, and the tracked \
             unexecuted lines name lines of the source that none of them runs"
        ),
        started,
        result,
    );
    let started = Instant::now();
    let result = blind_spot(scratch);
    record(
        outcomes,
        &format!("{arch} (coverage): a patch's line no scenario runs is named first as a blind spot; --fail-on-blind-spots exits 2"),
        started,
        result,
    );
    let started = Instant::now();
    let result = affected(scratch);
    record(
        outcomes,
        &format!(
            "{arch} (coverage): validate --affected runs only the scenario that ran the changed line and names its \
             regression first; a header change is refused"
        ),
        started,
        result,
    );
}
