//! A boot with its verdict (`BootRun`): judged from the channel its VM's run read and its
//! console log, its record written, its summary printed, and the exit code of a set of boots.

use std::time::Duration;

use anyhow::Result;

use super::Outcome;
use crate::judging::run_folder::{BootFacts, BootFolder, JudgedBoot, VmRecord};
use crate::judging::verdict::{BootResult, WithXfail};
use crate::results::model::RunVerdict;
use crate::suites::Marks;
use crate::support::exit::Kind;
use crate::support::progress::line;
use crate::vm::children;

/// A boot with its verdict.
#[derive(Debug)]
pub struct BootRun {
    pub outcome: Outcome,
    /// Its folder, record and judgement, as the reports take them.
    pub boot: JudgedBoot,
    /// The resume boot that runs what this one left unrun (`x86_64.resume-1`).
    pub resumed_in: Option<String>,
}

impl BootRun {
    /// Judges a finished boot from its logs with the plan's marks, writes its record
    /// (`verdict.json`) beside them and times it (the `judge` phase).
    pub fn judge(mut outcome: Outcome, plan: &protocol::Plan, marks: Marks) -> Result<BootRun> {
        let started = std::time::Instant::now();
        let ms = |d: Duration| d.as_millis() as u64;
        let facts = BootFacts {
            arch: outcome.arch.name.to_string(),
            accel: outcome.accel.name().to_string(),
            qemu_command: outcome.vm.command_line.clone(),
            ended: outcome.vm.ended.clone(),
            wall_ms: ms(outcome.vm.wall),
            boot_ms: outcome.vm.boot.map(ms),
            // The boot ended just now, `wall` after QEMU started.
            started_at: jiff::Timestamp::now()
                .checked_sub(jiff::SignedDuration::from_millis(ms(outcome.vm.wall) as i64))
                .ok()
                .map(|t| t.round(jiff::Unit::Second).unwrap_or(t).to_string()),
            artifacts_shared: outcome.artifacts_shared,
            virtiofsd_sandbox: outcome.vm.sandbox,
            vm: Some(VmRecord::of(&outcome.spec)),
            xfail: marks.xfail,
            fixed_by: marks.fixed_by,
            intermittent: marks.intermittent,
            expect_report: marks.expect_report,
            about: marks.about,
            collateral: None,
        };
        let planned: Vec<String> = plan.scenarios.iter().map(|s| s.name.clone()).collect();
        // The channel as the VM's run read it, handed on to the judge.
        let channel = std::mem::take(&mut outcome.vm.channel);
        let boot = JudgedBoot::judge_read(BootFolder::at(outcome.out_dir.clone()), facts, &planned, channel)?;
        boot.write_record()?;
        crate::support::timings::record(Some(&boot.folder.name), "judge", started.elapsed());
        Ok(BootRun { outcome, boot, resumed_in: None })
    }

    /// The boot's result, every planned scenario accounted for.
    pub fn result(&self) -> &BootResult {
        &self.boot.judgement.result
    }

    /// The result with the plan's expected failures counted (the verdict that sets the exit code).
    pub fn counted(&self) -> &WithXfail {
        &self.boot.judgement.counted
    }
}

pub fn print_boot(j: &BootRun) {
    use crate::judging::verdict::{Expected, Status};
    let arch = j.outcome.arch.name;
    let (result, counted, facts) = (j.result(), j.counted(), &j.boot.facts);
    for (s, mark) in result.scenarios.iter().zip(&counted.marks) {
        if s.status == Status::NotRun && (j.resumed_in.is_some() || facts.collateral.is_some()) {
            continue;
        }
        // Passes and skips were shown live; the summary names what needs a look.
        if mark.is_none() && matches!(s.status, Status::Pass | Status::Skip) {
            continue;
        }
        let tag = match (mark, s.status) {
            (Some(Expected::Xfail), _) => "XFAIL",
            (Some(Expected::Xpass), _) => "XPASS",
            (Some(Expected::Fixed), _) => "FIXED",
            (None, Status::Pass) => "PASSED",
            (None, Status::Fail) => "FAILED",
            (None, Status::Skip) => "SKIPPED",
            (None, Status::Timeout) => "TIMEOUT",
            (None, Status::NotRun) => "NOT RUN",
            (None, Status::Crashed) => "CRASHED",
        };
        let ms = s.time_ms.map_or(String::new(), |t| format!(" ({t} ms)"));
        let why = match (mark, facts.xfail.get(&s.name), facts.expect_report.get(&s.name)) {
            (Some(Expected::Xfail), Some(r), _) => format!(": {r}"),
            (Some(Expected::Xpass), Some(r), _) => format!(": marked xfail ({r}) but passed; remove the mark"),
            (Some(Expected::Fixed), Some(r), _) => {
                format!(": the kernel carries the fix of the known bug ({r}): {}", facts.fixed_by[&s.name])
            }
            (None, _, Some(text)) if s.status == Status::Pass => format!(": the expected kernel report ({text}) came"),
            _ => String::new(),
        };
        line(format!("{} {arch}/{}{ms}{why}", crate::support::progress::tag(tag), s.name));
        if s.status != Status::Pass && s.status != Status::Skip {
            for d in s.diagnostics.iter().rev().take(8).collect::<Vec<_>>().into_iter().rev() {
                eprintln!("           | {d}");
            }
            for f in &s.findings {
                eprintln!("           | kernel: {}", f.describe());
            }
        }
    }
    for f in &result.findings {
        line(format!("{arch}: kernel report outside the scenarios: {}", f.describe()));
    }
    for p in &result.problems {
        line(format!("{arch}: problem: {p}"));
    }
    if let Some(c) = &facts.collateral {
        let unrun = result.scenarios.iter().filter(|s| s.status == Status::NotRun).count();
        line(format!("{arch}: {unrun} scenario(s) not run, collateral of {} {}", c.culprit, c.why));
    }
    if let Some(next) = &j.resumed_in {
        let unrun = result.scenarios.iter().filter(|s| s.status == Status::NotRun).count();
        line(format!("{arch}: {unrun} scenario(s) not run in this boot ran in {next}"));
    }
    let boot = j.outcome.vm.boot.map_or("never".to_string(), |b| format!("{:.2} s", b.as_secs_f64()));
    let count = |e: Expected| counted.marks.iter().filter(|m| **m == Some(e)).count();
    let expected = match (count(Expected::Xfail), count(Expected::Xpass), count(Expected::Fixed)) {
        (0, 0, 0) => String::new(),
        (f, p, 0) => format!(", {f} xfail, {p} xpass"),
        (f, p, x) => format!(", {f} xfail, {p} xpass, {x} fixed"),
    };
    // `x86_64`, or `x86_64.isolated-1` for a scenario's own boot.
    let boot_name = j.outcome.out_dir.file_name().map_or(arch.into(), |n| n.to_string_lossy().into_owned());
    line(format!(
        "{boot_name}: verdict {} ({} scenario(s){expected}, /init reached at {boot}, VM {:.2} s, {})",
        counted.verdict.as_str(),
        result.scenarios.len(),
        j.outcome.vm.wall.as_secs_f64(),
        j.outcome.accel.name()
    ));
}

/// The process exit code for a set of boots (see `exit.rs`).
pub fn exit_code(judged: &[BootRun]) -> u8 {
    // A timeout, then an interrupt, wins: the run did not finish, whatever it found so far.
    if children::timed_out() {
        return Kind::TimedOut.code();
    }
    if children::interrupted() {
        return Kind::Interrupted.code();
    }
    // The run model's mapping, so a run and `report --from` of it exit alike.
    judged.iter().map(|j| RunVerdict::of(&j.counted().verdict).exit_code()).max().unwrap_or(0)
}
