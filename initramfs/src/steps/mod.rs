//! The steps, one module per area, and their one dispatcher: `run_step` sends each step, by its
//! area (`Step::area`), to the module that runs it (`areas` for the leaf areas: `files`,
//! `uevents`, `perf`, `bpf`, `ringbuf`, `measure`, `sync`, `fuzz`; `nesting` for the steps that
//! run steps; `sweeps` for fault injection), which never call back but through `run_nested`. The
//! small steps run here: `exec`, `lkdtm`, `sleep`. Scenario child mode (`ue-agent --scenario
//! INDEX`) runs one scenario's steps in order, one line per step on stdout, and exits 0 (pass), 1
//! (a step failed) or EXIT_SKIP.

use std::borrow::Cow;
use std::collections::HashMap;
use std::io::{self, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use protocol::steps::{Exec, Lkdtm, Sleep};
use protocol::{Area, ExecEnd, ExitStatus, Expect, Step};

use crate::runtime::{supervisor, sys};
use files::Mode;
use outcome::StepOutcome;
use state::ScenarioState;

mod areas;
pub mod bpf;
mod clone_vm;
pub mod faults;
pub mod files;
pub mod format;
pub mod fuzz;
pub mod kallsyms;
pub mod kmemleak;
pub mod kmsg;
pub mod leak;
pub mod measure;
pub mod memory;
mod nesting;
pub use nesting::{FD_ARG, STEPS_ARG};
pub mod outcome;
pub mod perf;
pub mod ringbuf;
pub mod state;
mod sweeps;
pub mod sync;
mod tally;
pub mod uevents;
pub mod userfault;

const LKDTM_DIRECT: &str = "/sys/kernel/debug/provoke-crash/DIRECT";

/// A long step's progress on the kernel log ([`protocol::Marker::Progress`]), for the host's
/// watchdog; nothing when the supervisor named no kernel log (on a host).
pub fn progress_marker(done: u64, total: u64, elapsed_ms: u64) {
    use std::io::Write as _;
    let Some(path) = std::env::var_os(protocol::PROGRESS_KMSG_ENV) else { return };
    let index = std::env::var(protocol::PROGRESS_INDEX_ENV).ok().and_then(|i| i.parse().ok()).unwrap_or(0);
    if let Ok(mut f) = std::fs::OpenOptions::new().append(true).open(path) {
        let line = protocol::Marker::Progress { index, done, total, elapsed_ms }.line();
        let _ = f.write_all(format!("{line}\n").as_bytes());
    }
}

/// The child's main: its exit status.
pub fn child_main(plan: &Path, index: usize) -> i32 {
    let plan = match supervisor::load_plan(plan) {
        Ok(p) => p,
        Err(e) => {
            println!("{e}");
            return 1;
        }
    };
    let Some(scenario) = index.checked_sub(1).and_then(|i| plan.scenarios.get(i)) else {
        println!("no scenario {index} in a plan of {}", plan.scenarios.len());
        return 1;
    };
    run_steps(&scenario.steps, &mut io::stdout())
}

/// The exec'd agent's main: steps with a fresh state, their lines marked as after the exec.
pub fn run_nested_main(steps: &[Step], kept: &[(String, i32)]) -> i32 {
    let mut state = ScenarioState::default();
    for (name, fd) in kept {
        if let Err(e) = state.events.adopt(name, *fd) {
            println!("{}", protocol::step_line("exec ", 0, &format!("kept fd {name} ({fd}): {e}")));
            return 1;
        }
    }
    state.events.learn_widths(steps);
    run_nested(&mut state, steps, &mut io::stdout(), "exec ")
}

/// Runs the steps until one does not succeed; the exit status for the scenario.
pub fn run_steps(steps: &[Step], out: &mut dyn Write) -> i32 {
    run_steps_in(&mut ScenarioState::default(), steps, out)
}

/// [`run_steps`] with the scenario's state given.
pub fn run_steps_in(state: &mut ScenarioState, steps: &[Step], out: &mut dyn Write) -> i32 {
    state.events.learn_widths(steps);
    run_nested(state, steps, out, "")
}

/// Runs steps whose lines start with `nesting` (`fork child `, `thread `): nested steps of a
/// fork, a thread or an exec'd agent number their own steps from 1.
pub(super) fn run_nested(state: &mut ScenarioState, steps: &[Step], out: &mut dyn Write, nesting: &str) -> i32 {
    for (i, step) in steps.iter().enumerate() {
        let n = i + 1;
        let mut say = |text: &str| {
            let _ = writeln!(out, "{}", protocol::step_line(nesting, n, text));
            // Before a program or a crash point runs, everything said so far must be out.
            let _ = out.flush();
        };
        let step = match with_kept(step, &state.kept) {
            Ok(step) => step,
            Err(e) => {
                say(&e);
                return 1;
            }
        };
        let step = step.as_ref();
        // A `fail_nth` just before arms this step's first call.
        let fault = state.fault.take();
        let before = fault.as_ref().map(|f| f.arm(state.events.words_snapshot()));
        let mut outcome = match &before {
            Some(Err(e)) => {
                say(e);
                StepOutcome::Fail
            }
            _ => run_step(step, state, &mut say),
        };
        if let (Some(f), Some(Ok(b))) = (fault, before) {
            if !f.check(b, &|| state.events.words_snapshot(), &mut say) {
                outcome = StepOutcome::Fail;
            }
        }
        match outcome {
            StepOutcome::Pass => {}
            StepOutcome::Fail => return 1,
            StepOutcome::Skip => return protocol::EXIT_SKIP,
        }
    }
    0
}

/// A leaf step with each `{kept:NAME}` in its text replaced by the content kept under NAME
/// (without its trailing newline). A step that runs steps is left as it is: its steps are
/// replaced as they run, after the names their earlier steps keep.
fn with_kept<'s>(step: &'s Step, kept: &HashMap<String, String>) -> Result<Cow<'s, Step>, String> {
    fn walk(v: &mut serde_json::Value, kept: &HashMap<String, String>) -> Result<(), String> {
        match v {
            serde_json::Value::String(s) => {
                let known = |name: &str| kept.get(name).map(|t| t.trim_end_matches('\n').to_string());
                *s = protocol::steps::with_kept(s, &known)
                    .map_err(|name| format!("{{kept:{name}}}: nothing was kept as {name}"))?;
            }
            serde_json::Value::Array(items) => items.iter_mut().try_for_each(|x| walk(x, kept))?,
            serde_json::Value::Object(map) => map.values_mut().try_for_each(|x| walk(x, kept))?,
            _ => {}
        }
        Ok(())
    }
    if !step.nested().is_empty() {
        return Ok(Cow::Borrowed(step));
    }
    let mut json = serde_json::to_value(step).map_err(|e| format!("the step as JSON: {e}"))?;
    if !json.to_string().contains(protocol::steps::KEPT) {
        return Ok(Cow::Borrowed(step));
    }
    walk(&mut json, kept)?;
    serde_json::from_value(json).map(Cow::Owned).map_err(|e| format!("the step with its kept values: {e}"))
}

/// Runs one step: the dispatcher sends each area's steps, in one line per area, to the
/// function that takes them apart.
fn run_step(step: &Step, state: &mut ScenarioState, say: &mut dyn FnMut(&str)) -> StepOutcome {
    if state.in_threads {
        if let Some(kind) = step.whole_process_kind() {
            say(&format!("{kind}: not in a thread of `threads`: it acts on the whole process"));
            return StepOutcome::Fail;
        }
    }
    match step.area() {
        Area::Program => small_step(step, say),
        Area::Files => areas::files(step, &mut state.kept, say),
        Area::Nesting => nesting::nesting_step(step, state, say, run_nested),
        Area::Faults => sweeps::fault_step(step, state, say, run_nested),
        Area::Sync => areas::sync(step, say),
        Area::UserEvents | Area::Words => areas::user_events(step, &mut state.events, say),
        Area::Perf => areas::perf(step, &mut state.perf, say),
        Area::Bpf => areas::bpf(step, state, say),
        Area::Trace => areas::trace_read(step, say),
        Area::Measure => areas::measure(step, say),
    }
}

/// The small steps: `exec` (a program), `lkdtm` (a crash point), `sleep`.
fn small_step(step: &Step, say: &mut dyn FnMut(&str)) -> StepOutcome {
    match step {
        Step::Exec(Exec { argv, expect_exit }) => exec(argv, *expect_exit, say),
        Step::Lkdtm(Lkdtm { point }) => {
            // Said first: a PANIC or BUG may not let the write return.
            say(&format!("lkdtm {point}: triggering"));
            let mut text = String::new();
            let outcome = files::write_once(
                Path::new(LKDTM_DIRECT),
                point.as_bytes(),
                Mode::default(),
                &Expect::default(),
                &mut |t| {
                    text = t.to_string();
                },
            );
            say(&format!("lkdtm {point}: returned: {text}"));
            outcome
        }
        Step::Sleep(Sleep { ms }) => {
            // Said first, so a scenario killed at its deadline shows where it was.
            say(&format!("sleep {ms} ms"));
            std::thread::sleep(Duration::from_millis(*ms));
            StepOutcome::Pass
        }
        _ => unreachable!("not a small step"),
    }
}

/// Runs a program with the child's stdout and stderr, so its output lands in the scenario's;
/// its end is said as the protocol's [`ExecEnd`] line, which the host reads back.
fn exec(argv: &[String], expect: i32, say: &mut dyn FnMut(&str)) -> StepOutcome {
    let Some((program, args)) = argv.split_first() else {
        say("exec: empty argv");
        return StepOutcome::Fail;
    };
    let command = argv.join(" ");
    let status = match Command::new(program).args(args).status() {
        Err(e) => {
            say(&format!("exec {command}: cannot start: {}", sys::error_name(&e)));
            return StepOutcome::Fail;
        }
        Ok(status) => match status.code() {
            Some(code) => ExitStatus::Code(code),
            None => ExitStatus::Signal(status.signal().unwrap_or(0)),
        },
    };
    say(&ExecEnd { command, status, expect_exit: expect }.line());
    match status {
        ExitStatus::Code(code) if code == expect => StepOutcome::Pass,
        ExitStatus::Code(protocol::EXIT_SKIP) => StepOutcome::Skip,
        _ => StepOutcome::Fail,
    }
}

#[cfg(test)]
mod tests;
