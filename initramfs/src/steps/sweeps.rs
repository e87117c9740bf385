//! The fault-injection steps: `fail_nth` armed for the next step, and the sweeps that run
//! steps once per fault-injection point (`fail_each`, `fail_each_fork`) or with failslab aimed
//! at a kernel function (`fail_in`).

use std::io::{self, Write};
use std::time::{Duration, Instant};

use protocol::steps::{FailEach, FailEachFork, FailIn, FailNth};
use protocol::Step;

use super::faults;
use super::nesting::{in_place, one_pass, Pass};
use super::outcome::wait_status;
use super::outcome::StepOutcome;
use super::state::Runner;
use super::state::ScenarioState;
use super::sync;
use super::tally::Tally;
use crate::runtime::sys;

/// The fault-injection steps: `fail_nth` (armed for the next step), `fail_each`,
/// `fail_each_fork`, `fail_in`.
pub(super) fn fault_step(
    step: &Step,
    state: &mut ScenarioState,
    say: &mut dyn FnMut(&str),
    run: Runner,
) -> StepOutcome {
    match step {
        Step::FailNth(FailNth { nth, injected, unchanged, within, not_in }) => {
            let stack = match stack_filter(within.as_deref(), not_in.as_deref()) {
                Ok(stack) => stack,
                Err(e) => {
                    say(&format!("fail_nth {nth}: {e}"));
                    return StepOutcome::Fail;
                }
            };
            let through = match (within, not_in) {
                (Some(f), Some(g)) => format!(" through {f}() and not through {g}()"),
                (Some(f), None) => format!(" through {f}()"),
                _ => String::new(),
            };
            say(&format!(
                "fail_nth {nth}: the next step's first call fails at its fault-injection point {nth}{through}{}",
                if *injected { "" } else { " (if it reaches it)" }
            ));
            state.fault = Some(faults::Fault { nth: *nth, injected: Some(*injected), unchanged: *unchanged, stack });
            StepOutcome::Pass
        }
        Step::FailEach(FailEach { steps, max }) => fail_each(steps, *max, state, say, run),
        Step::FailEachFork(FailEachFork { steps, max }) => fail_each_fork(steps, *max, state, say, run),
        Step::FailIn(FailIn { function, steps, injected, within_ms }) => {
            fail_in(function, steps, *injected, *within_ms, state, say, run)
        }
        _ => unreachable!("not a fault-injection step"),
    }
}

/// `fail_each_fork`: a fork for each of fork()'s own fault-injection points in turn, until
/// the fork no longer reaches the point armed.
fn fail_each_fork(
    steps: &[Step],
    max: u32,
    state: &mut ScenarioState,
    say: &mut dyn FnMut(&str),
    run: Runner,
) -> StepOutcome {
    let sweep = match faults::Sweep::open() {
        Ok(s) => s,
        Err(e) => {
            say(&format!("fail_each_fork: {e}"));
            return StepOutcome::Fail;
        }
    };
    if let Err(e) = sync::prepare() {
        say(&format!("fail_each_fork: {e}"));
        return StepOutcome::Fail;
    }
    let (mut failed, mut born) = (0u32, Vec::new());
    for nth in 1..=max {
        let _ = io::stdout().flush();
        sweep.arm(nth);
        // SAFETY: as in `fork`: the scenario process is single-threaded here.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            // The child's own fail-nth starts at 0; it never touches the parent's descriptor.
            let mut lines = Vec::new();
            let code = run(state, steps, &mut lines, &format!("fail_each_fork {nth}: child "));
            if code != 0 {
                let _ = io::stdout().write_all(&lines);
            }
            let _ = io::stdout().flush();
            // SAFETY: as in `fork`.
            unsafe { libc::_exit(code) }
        }
        let errno = io::Error::last_os_error();
        let injected = sweep.injected();
        if pid < 0 {
            if errno.raw_os_error() != Some(libc::ENOMEM) || !injected {
                let how = if injected { "injected" } else { "not injected" };
                say(&format!("fail_each_fork {nth}: fork: {} ({how}; expected ENOMEM)", sys::error_name(&errno)));
                return StepOutcome::Fail;
            }
            failed += 1;
            continue;
        }
        let mut status = 0;
        // SAFETY: waits for the child just forked.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        if !(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0) {
            say(&format!("fail_each_fork {nth}: the child's steps failed ({})", wait_status(status)));
            return StepOutcome::Fail;
        }
        if !injected {
            let failed_at = if born.is_empty() { String::new() } else { format!(", point(s) {born:?} failed quietly") };
            say(&format!(
                "fail_each_fork: fork reaches {} fault-injection points: {failed} failed it with ENOMEM{failed_at}; \
                 each of {} children passed its steps",
                nth - 1,
                born.len() + 1
            ));
            return StepOutcome::Pass;
        }
        born.push(nth);
    }
    say(&format!("fail_each_fork: fork still reached point {max} (max {max})"));
    StepOutcome::Fail
}

/// `fail_each`: the steps once for each fault-injection point of the first step's first call,
/// until it no longer reaches the point armed; each pass's lines tallied as `repeat`'s are.
fn fail_each(
    steps: &[Step],
    max: u32,
    state: &mut ScenarioState,
    say: &mut dyn FnMut(&str),
    run: Runner,
) -> StepOutcome {
    let mut tally = Tally::default();
    for nth in 1..=max {
        state.fault = Some(faults::Fault { nth, injected: None, unchanged: false, stack: None });
        let text = match one_pass(steps, true, nth, &format!("point {nth} "), state, run) {
            Ok(text) => text,
            Err(Pass::Bad(e)) => {
                say(&format!("fail_each: {e}"));
                return StepOutcome::Fail;
            }
            Err(Pass::Ended(code, text)) => {
                tally.say("fail_each", say);
                say(&format!("fail_each: with point {nth} failed, the steps did not pass:"));
                text.lines().for_each(&mut *say);
                return StepOutcome::of_status(code);
            }
        };
        text.lines().for_each(|l| tally.add(l));
        if faults::last_injected() != Some(true) {
            tally.say("fail_each", say);
            say(&format!(
                "fail_each: the first call reaches {} fault-injection points; with each failed, the steps passed",
                nth - 1
            ));
            return StepOutcome::Pass;
        }
    }
    tally.say("fail_each", say);
    say(&format!("fail_each: the first call still reached point {max} (max {max})"));
    StepOutcome::Fail
}

/// A `fail_nth`'s `in` and `not_in` as text ranges of `/proc/kallsyms` (None without `in`).
fn stack_filter(within: Option<&str>, not_in: Option<&str>) -> Result<Option<faults::StackFilter>, String> {
    let Some(within) = within else {
        return match not_in {
            Some(_) => Err("`not_in` needs `in`".into()),
            None => Ok(None),
        };
    };
    let kallsyms = crate::steps::kallsyms::read()?;
    let range = |name: &str| {
        crate::steps::kallsyms::function_range(&kallsyms, name)
            .map(|(start, end)| (name.to_string(), start, end))
            .ok_or_else(|| format!("no text symbol {name} in /proc/kallsyms (inlined into its callers?)"))
    };
    Ok(Some(faults::StackFilter { within: range(within)?, not_in: not_in.map(range).transpose()? }))
}

/// `fail_in`: the next slab allocation through kernel function `function` fails, for any task,
/// while `steps` run; then whether it came (within `within_ms` after them) is checked.
fn fail_in(
    function: &str,
    steps: &[Step],
    injected: bool,
    within_ms: u64,
    state: &mut ScenarioState,
    say: &mut dyn FnMut(&str),
    run: Runner,
) -> StepOutcome {
    let what = format!("fail_in {function}");
    let range = crate::steps::kallsyms::read().and_then(|k| {
        crate::steps::kallsyms::function_range(&k, function)
            .ok_or_else(|| format!("no text symbol {function} in /proc/kallsyms (inlined into its callers?)"))
    });
    let (start, end) = match range {
        Ok(r) => r,
        Err(e) => {
            say(&format!("{what}: {e}"));
            return StepOutcome::Fail;
        }
    };
    let armed = match faults::InFunction::arm(start, end) {
        Ok(a) => a,
        Err(e) => {
            say(&format!("{what}: {e}"));
            return StepOutcome::Fail;
        }
    };
    say(&format!("{what}: armed: the next slab allocation with [{start:#x}, {end:#x}) on its stack fails"));
    let outcome = in_place(steps, state, say, run);
    let started = Instant::now();
    while !armed.fired() && started.elapsed() < Duration::from_millis(within_ms) {
        std::thread::sleep(Duration::from_millis(1));
    }
    let fired = armed.fired();
    drop(armed);
    let waited = started.elapsed().as_millis();
    say(&format!(
        "{what}: {} ({waited} ms after the steps; expected {})",
        if fired { "injected" } else { "not injected" },
        if injected { "injected" } else { "not injected" }
    ));
    if fired == injected {
        outcome
    } else {
        StepOutcome::Fail
    }
}
