//! The steps that run other steps: in a child (`fork`, collected by `wait`; `clone_vm`, whose
//! child shares the memory, in `clone_vm.rs`), in an exec'd agent (`exec_agent`), in threads
//! (`thread`, `threads`, their lines forwarded as they come), repeated (`repeat`, its lines
//! tallied), or watched (`kmemleak`, `kernel_log`).

use std::borrow::Cow;
use std::io::{self, Write};
use std::process::Command;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use protocol::steps::{CloneVm, ExecAgent, Fork, KernelLog, Kmemleak, Repeat, Requires, Thread, Wait};
use protocol::{Step, ThreadGroup, ITERATION, THREAD_INDEX};

use super::kmemleak;
use super::kmsg;
use super::leak;
use super::outcome::{wait_status, StepOutcome};
use super::state::Runner;
use super::state::ScenarioState;
use super::sync;
use super::tally::Tally;
use crate::runtime::sys;

/// The steps that run other steps: in a child (`fork`, collected by `wait`), in an exec'd
/// agent, in threads, repeated, or watched (`kmemleak`, `kernel_log`).
/// `run` runs nested steps (the dispatcher's `run_nested`, given so that this module does not
/// import the one that imports it).
pub(super) fn nesting_step(
    step: &Step,
    state: &mut ScenarioState,
    say: &mut dyn FnMut(&str),
    run: Runner,
) -> StepOutcome {
    match step {
        Step::Fork(Fork { name, steps }) => fork(name, steps, state, say, run),
        Step::CloneVm(CloneVm { steps, within_ms }) => super::clone_vm::clone_vm(steps, *within_ms, state, say, run),
        Step::Wait(Wait { name, expect_exit, within_ms }) => wait(name, *expect_exit, *within_ms, state, say),
        Step::ExecAgent(ExecAgent { steps, keep }) => exec_agent(steps, keep, state, say),
        Step::Thread(Thread { steps }) => {
            let code =
                std::thread::scope(|s| s.spawn(|| run(state, steps, &mut io::stdout(), "thread ")).join().unwrap_or(1));
            say(&format!("thread: its steps ended with status {code}"));
            StepOutcome::of_status(code)
        }
        Step::Threads(groups) => threads(groups, state, say, run),
        Step::Repeat(Repeat { count, steps, for_ms, leak_at_most: None }) => {
            repeat(0..*count, *for_ms, steps, state, say, run)
        }
        Step::Repeat(Repeat { count, steps, for_ms, leak_at_most: Some(each) }) => {
            leak::repeat_without_leaks(*count, *each, say, |range, say| repeat(range, *for_ms, steps, state, say, run))
        }
        Step::Requires(Requires { unmet: Some(why), .. }) => {
            say(&format!("requires: not met ({why}): its steps are left out"));
            StepOutcome::Pass
        }
        Step::Requires(Requires { steps, config, kernel, unmet: None }) => {
            let needs: Vec<&str> = kernel.iter().map(String::as_str).chain(config.iter().map(String::as_str)).collect();
            say(&format!("requires: met ({}): {} step(s)", needs.join(", "), steps.len()));
            in_place(steps, state, say, run)
        }
        Step::Kmemleak(Kmemleak { steps }) => kmemleak::watch(say, |say| in_place(steps, state, say, run)),
        Step::KernelLog(KernelLog { steps, expect, forbid, within_ms, since_boot }) => {
            let watch = kmsg::Watch { expect, forbid, within_ms: *within_ms, since_boot: *since_boot };
            kmsg::watch(&watch, say, |say| in_place(steps, state, say, run))
        }
        _ => unreachable!("not a step that runs steps"),
    }
}

/// `fork()`: the child runs `steps` on its copy of the state and exits with their status.
fn fork(name: &str, steps: &[Step], state: &mut ScenarioState, say: &mut dyn FnMut(&str), run: Runner) -> StepOutcome {
    if state.children.contains_key(name) {
        say(&format!("fork {name}: a child of that name is still running"));
        return StepOutcome::Fail;
    }
    // The barriers' shared page must exist before the fork for the child to share it.
    if let Err(e) = sync::prepare() {
        say(&format!("fork {name}: {e}"));
        return StepOutcome::Fail;
    }
    // Anything buffered would be written twice, once by each process.
    let _ = io::stdout().flush();
    // SAFETY: the scenario process is single-threaded here (thread steps join before
    // returning), so the child does not inherit a lock held by another thread.
    match unsafe { libc::fork() } {
        -1 => {
            say(&format!("fork {name}: {}", sys::error_name(&io::Error::last_os_error())));
            StepOutcome::Fail
        }
        0 => {
            let code = run(state, steps, &mut io::stdout(), &format!("fork {name} "));
            let _ = io::stdout().flush();
            // SAFETY: _exit skips the parent's atexit handlers and buffers, as a forked child must.
            unsafe { libc::_exit(code) }
        }
        pid => {
            say(&format!("fork {name}: child pid {pid}"));
            state.children.insert(name.to_string(), pid);
            StepOutcome::Pass
        }
    }
}

/// Collects a forked child and compares its exit status.
fn wait(
    name: &str,
    expect_exit: i32,
    within_ms: u64,
    state: &mut ScenarioState,
    say: &mut dyn FnMut(&str),
) -> StepOutcome {
    let Some(pid) = state.children.remove(name) else {
        say(&format!("wait {name}: no such child"));
        return StepOutcome::Fail;
    };
    let deadline = std::time::Instant::now() + Duration::from_millis(within_ms);
    loop {
        let mut status = 0;
        // SAFETY: waitpid writes only the status integer.
        let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if r == pid {
            let got = wait_status(status);
            let ok = libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == expect_exit;
            say(&format!("wait {name}: {got} (expected exit {expect_exit})"));
            return if ok { StepOutcome::Pass } else { StepOutcome::Fail };
        }
        if r < 0 {
            say(&format!("wait {name}: {}", sys::error_name(&io::Error::last_os_error())));
            return StepOutcome::Fail;
        }
        if std::time::Instant::now() > deadline {
            // SAFETY: kill has no memory-safety preconditions.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            say(&format!("wait {name}: still running after {within_ms} ms; killed it"));
            return StepOutcome::Fail;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// `Step::Threads`: every thread of every group started, their lines said as they come (each
/// after `thread G.T `), all joined.
fn threads(groups: &[ThreadGroup], state: &mut ScenarioState, say: &mut dyn FnMut(&str), run: Runner) -> StepOutcome {
    if let Err(e) = state.events.prepare_for_threads().and_then(|()| sync::prepare()) {
        say(&format!("threads: {e}"));
        return StepOutcome::Fail;
    }
    // Each thread's steps, with its index in place of `{thread}`, and its view of the state.
    let mut work = Vec::new();
    for (g, group) in groups.iter().enumerate() {
        for t in 0..group.count {
            match substitute(&group.steps, THREAD_INDEX, t) {
                Ok(steps) => work.push((format!("thread {g}.{t} "), steps, state.thread_view())),
                Err(e) => {
                    say(&format!("threads: group {g}: {e}"));
                    return StepOutcome::Fail;
                }
            }
        }
    }
    let total = work.len();
    let started = Instant::now();
    let (tx, rx) = mpsc::channel::<String>();
    let codes: Vec<i32> = std::thread::scope(|s| {
        let mut handles = Vec::new();
        for (nesting, steps, mut view) in work {
            let mut out = LineSender { tx: tx.clone(), pending: Vec::new() };
            let spawned = std::thread::Builder::new().name(nesting.trim().to_string()).spawn_scoped(s, move || {
                let code = run(&mut view, &steps, &mut out, &nesting);
                out.send_rest();
                code
            });
            match spawned {
                Ok(h) => handles.push(Some(h)),
                Err(e) => {
                    let _ = tx.send(format!("threads: cannot start a thread: {}", sys::error_name(&e)));
                    handles.push(None);
                }
            }
        }
        drop(tx);
        // Said as they come, so a thread that hangs shows where; ends when every thread is done.
        for line in rx {
            say(&line);
        }
        handles.into_iter().map(|h| h.map_or(1, |h| h.join().unwrap_or(1))).collect()
    });
    let failed = codes.iter().filter(|c| **c != 0 && **c != protocol::EXIT_SKIP).count();
    let skipped = codes.iter().filter(|c| **c == protocol::EXIT_SKIP).count();
    say(&format!(
        "threads: {} of {total} passed, {failed} failed, {skipped} skipped, in {} ms",
        total - failed - skipped,
        started.elapsed().as_millis()
    ));
    if failed > 0 {
        StepOutcome::Fail
    } else if skipped > 0 {
        StepOutcome::Skip
    } else {
        StepOutcome::Pass
    }
}

/// A thread's output: whole lines sent to the thread that says them.
struct LineSender {
    tx: mpsc::Sender<String>,
    pending: Vec<u8>,
}

impl LineSender {
    fn send_rest(&mut self) {
        if !self.pending.is_empty() {
            let _ = self.tx.send(String::from_utf8_lossy(&std::mem::take(&mut self.pending)).into_owned());
        }
    }
}

impl Write for LineSender {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.pending.extend_from_slice(buf);
        while let Some(end) = self.pending.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = self.pending.drain(..=end).collect();
            let _ = self.tx.send(String::from_utf8_lossy(&line[..end]).into_owned());
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Steps run once in the scenario's own state (`kmemleak`, `kernel_log`), their lines said as they come.
pub(super) fn in_place(
    steps: &[Step],
    state: &mut ScenarioState,
    say: &mut dyn FnMut(&str),
    run: Runner,
) -> StepOutcome {
    let mut lines = Vec::new();
    let code = run(state, steps, &mut lines, "");
    for line in String::from_utf8_lossy(&lines).lines() {
        say(line);
    }
    StepOutcome::of_status(code)
}

/// `Step::Repeat`: the steps once for each iteration number of `iterations`, each iteration's
/// lines kept; passing iterations' lines are tallied by kind (see [`Tally`]), a failing or
/// skipping iteration's said in full.
fn repeat(
    iterations: std::ops::Range<u32>,
    for_ms: u64,
    steps: &[Step],
    state: &mut ScenarioState,
    say: &mut dyn FnMut(&str),
    run: Runner,
) -> StepOutcome {
    let templated = serde_json::to_string(steps).is_ok_and(|j| j.contains(ITERATION));
    let started = Instant::now();
    let mut tally = Tally::default();
    let mut ran = 0;
    let (count, last) = (iterations.len(), iterations.end);
    for i in iterations {
        if for_ms > 0 && started.elapsed() >= Duration::from_millis(for_ms) {
            break;
        }
        ran += 1;
        let text = match one_pass(steps, templated, i, &format!("iteration {i} "), state, run) {
            Ok(text) => text,
            Err(Pass::Bad(e)) => {
                say(&format!("repeat: {e}"));
                return StepOutcome::Fail;
            }
            Err(Pass::Ended(code, text)) => {
                tally.say("repeat", say);
                let how = if code == protocol::EXIT_SKIP { "skipped" } else { "failed" };
                say(&format!("repeat: iteration {i} of {last} {how} after {} ms:", started.elapsed().as_millis()));
                text.lines().for_each(&mut *say);
                return StepOutcome::of_status(code);
            }
        };
        text.lines().for_each(|l| tally.add(l));
    }
    tally.say("repeat", say);
    let ms = started.elapsed().as_millis();
    if ran == count {
        say(&format!("repeat: all {count} iterations passed in {ms} ms"));
    } else {
        say(&format!("repeat: {ran} iterations (of at most {count}) passed in {ms} ms (for {for_ms} ms)"));
    }
    StepOutcome::Pass
}

/// Why a pass of a loop's steps ([`one_pass`]) did not pass: its steps could not be made, or
/// they ended with this status (not 0) and these lines.
pub(super) enum Pass {
    Bad(String),
    Ended(i32, String),
}

/// One pass of a loop's steps (`repeat`, `fail_each`), with `{iteration}` as `i` when
/// `templated`, each line after `nesting`: the lines they said when they all passed.
pub(super) fn one_pass(
    steps: &[Step],
    templated: bool,
    i: u32,
    nesting: &str,
    state: &mut ScenarioState,
    run: Runner,
) -> Result<String, Pass> {
    let body: Cow<[Step]> =
        if templated { Cow::Owned(substitute(steps, ITERATION, i).map_err(Pass::Bad)?) } else { Cow::Borrowed(steps) };
    let mut lines = Vec::new();
    let code = run(state, &body, &mut lines, nesting);
    let text = String::from_utf8_lossy(&lines).into_owned();
    if code == 0 {
        Ok(text)
    } else {
        Err(Pass::Ended(code, text))
    }
}

/// `steps` with `key` (`{thread}`, `{iteration}`) replaced by `value` in every text, except
/// inside a nested step that gives the key its own value (`threads` for `{thread}`, `repeat`
/// for `{iteration}`).
fn substitute(steps: &[Step], key: &str, value: u32) -> Result<Vec<Step>, String> {
    fn walk(v: &mut serde_json::Value, key: &str, with: &str, own: &str) {
        match v {
            serde_json::Value::String(s) if s.contains(key) => *s = s.replace(key, with),
            serde_json::Value::Array(items) => items.iter_mut().for_each(|x| walk(x, key, with, own)),
            serde_json::Value::Object(map) => {
                for (k, x) in map.iter_mut() {
                    if k != own {
                        walk(x, key, with, own);
                    }
                }
            }
            _ => {}
        }
    }
    let own = if key == THREAD_INDEX { "threads" } else { "repeat" };
    let mut json = serde_json::to_value(steps).map_err(|e| format!("steps as JSON: {e}"))?;
    walk(&mut json, key, &value.to_string(), own);
    serde_json::from_value(json).map_err(|e| format!("steps with {key} = {value}: {e}"))
}

/// The argument that makes the agent run steps given as JSON (see `main.rs`).
pub const STEPS_ARG: &str = "--steps";

/// The argument that hands a kept descriptor to the exec'd agent: `--fd NAME=NUMBER`.
pub const FD_ARG: &str = "--fd";

/// `execve()` of the agent itself with `steps` as JSON: the enablers this process had are
/// dropped by the exec, and the new image runs the steps with an empty state but for the
/// descriptors named in `keep`, which stay open across the exec and are handed over by name.
fn exec_agent(steps: &[Step], keep: &[String], state: &ScenarioState, say: &mut dyn FnMut(&str)) -> StepOutcome {
    use std::os::unix::process::CommandExt;
    let json = match serde_json::to_string(steps) {
        Ok(j) => j,
        Err(e) => {
            say(&format!("exec agent: {e}"));
            return StepOutcome::Fail;
        }
    };
    let mut command = Command::new("/proc/self/exe");
    command.arg0("ue-agent").arg(STEPS_ARG).arg(json);
    let mut kept = Vec::new();
    for name in keep {
        match state.events.inherit(name) {
            Ok(fd) => {
                command.arg(FD_ARG).arg(format!("{name}={fd}"));
                kept.push(format!("{name} ({fd})"));
            }
            Err(e) => {
                say(&format!("exec agent: keep fd {name}: {e}"));
                return StepOutcome::Fail;
            }
        }
    }
    let keeping = if kept.is_empty() { String::new() } else { format!(", keeping fd {}", kept.join(", ")) };
    say(&format!("exec agent: {} step(s) in a fresh image{keeping}", steps.len()));
    let _ = io::stdout().flush();
    // On success exec does not return: the new image's exit status is the scenario's.
    let e = command.exec();
    say(&format!("exec agent: {}", sys::error_name(&e)));
    StepOutcome::Fail
}
