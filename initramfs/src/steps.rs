//! The one dispatcher of steps: each step of a scenario runs here or in the module of its area
//! (`files`, `uevents`, `perf`, `bpf`, `ringbuf`, `fuzz`, `measure`, `sync`), which never call
//! back. The steps that run other steps live here: `fork`, `wait`, `thread`, `threads`,
//! `repeat`, `exec_agent`; and the small ones: `exec`, `lkdtm`, `sleep`. Scenario child mode
//! (`ue-agent --scenario INDEX`) runs one scenario's steps in order, one line per step on stdout,
//! and exits 0 (pass), 1 (a step failed) or EXIT_SKIP.

use std::borrow::Cow;
use std::io::{self, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Command;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use protocol::{ExecEnd, ExitStatus, Expect, Step, ThreadGroup, ITERATION, THREAD_INDEX};

use crate::files::{self, Mode};
use crate::outcome::StepOutcome;
use crate::state::ScenarioState;
use crate::{faults, fuzz, kmemleak, kmsg, leak, supervisor, sync, sys};

mod areas;

const LKDTM_DIRECT: &str = "/sys/kernel/debug/provoke-crash/DIRECT";

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
pub fn run_nested_main(steps: &[Step]) -> i32 {
    let mut state = ScenarioState::default();
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
fn run_nested(state: &mut ScenarioState, steps: &[Step], out: &mut dyn Write, nesting: &str) -> i32 {
    for (i, step) in steps.iter().enumerate() {
        let n = i + 1;
        let mut say = |text: &str| {
            let _ = writeln!(out, "{}", protocol::step_line(nesting, n, text));
            // Before a program or a crash point runs, everything said so far must be out.
            let _ = out.flush();
        };
        // A `fail_nth` just before arms this step's first call.
        let fault = state.fault.take();
        let before = fault.map(|f| f.arm(state.events.words_snapshot()));
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

/// Runs one step: the dispatcher sends each area's steps, in one line per area, to the
/// function that takes them apart.
fn run_step(step: &Step, state: &mut ScenarioState, say: &mut dyn FnMut(&str)) -> StepOutcome {
    if state.in_threads {
        if let Some(kind) = step.whole_process_kind() {
            say(&format!("{kind}: not in a thread of `threads`: it acts on the whole process"));
            return StepOutcome::Fail;
        }
    }
    match step {
        Step::Exec { .. } | Step::Lkdtm { .. } | Step::Sleep { .. } => small_step(step, say),
        Step::WriteFile { .. }
        | Step::ReadFile { .. }
        | Step::Stat { .. }
        | Step::Mkdir { .. }
        | Step::Rmdir { .. } => areas::files(step, &mut state.kept, say),
        Step::Fork { .. }
        | Step::Wait { .. }
        | Step::ExecAgent { .. }
        | Step::Thread { .. }
        | Step::Threads(_)
        | Step::Repeat { .. }
        | Step::Kmemleak { .. }
        | Step::KernelLog { .. } => nesting_step(step, state, say),
        Step::FailNth { .. } | Step::FailEach { .. } | Step::FailEachFork { .. } | Step::FailIn { .. } => {
            fault_step(step, state, say)
        }
        Step::Barrier { .. } | Step::Pin { .. } => areas::sync(step, say),
        Step::Open { .. }
        | Step::Close { .. }
        | Step::Dup { .. }
        | Step::Register { .. }
        | Step::Unregister { .. }
        | Step::Delete { .. }
        | Step::SetWord { .. }
        | Step::Memory { .. }
        | Step::PageFaultsHeld { .. }
        | Step::CheckBit { .. }
        | Step::CheckWord { .. }
        | Step::Write { .. }
        | Step::RegisterUntil { .. } => areas::user_events(step, &mut state.events, say),
        Step::Fuzz { seed, iterations } => fuzz::run(*seed, *iterations, say),
        Step::Credentials { .. }
        | Step::PerfOpen { .. }
        | Step::PerfControl { .. }
        | Step::PerfFilter { .. }
        | Step::PerfRead { .. } => areas::perf(step, &mut state.perf, say),
        Step::BpfProg { .. } | Step::BpfAttach { .. } | Step::BpfRawTracepoint { .. } | Step::BpfCount { .. } => {
            areas::bpf(step, state, say)
        }
        Step::TraceRead { .. } => areas::trace_read(step, say),
        Step::Measure { .. } => areas::measure(step, say),
    }
}

/// The small steps: `exec` (a program), `lkdtm` (a crash point), `sleep`.
fn small_step(step: &Step, say: &mut dyn FnMut(&str)) -> StepOutcome {
    match step {
        Step::Exec { argv, expect_exit } => exec(argv, *expect_exit, say),
        Step::Lkdtm { point } => {
            // Said first: a PANIC or BUG may not let the write return.
            say(&format!("lkdtm {point}: triggering"));
            let mut text = String::new();
            let outcome =
                files::write_once(Path::new(LKDTM_DIRECT), point, Mode::default(), &Expect::default(), &mut |t| {
                    text = t.to_string();
                });
            say(&format!("lkdtm {point}: returned: {text}"));
            outcome
        }
        Step::Sleep { ms } => {
            // Said first, so a scenario killed at its deadline shows where it was.
            say(&format!("sleep {ms} ms"));
            std::thread::sleep(Duration::from_millis(*ms));
            StepOutcome::Pass
        }
        _ => unreachable!("not a small step"),
    }
}

/// The steps that run other steps: in a child (`fork`, collected by `wait`), in an exec'd
/// agent, in threads, repeated, or watched (`kmemleak`, `kernel_log`).
fn nesting_step(step: &Step, state: &mut ScenarioState, say: &mut dyn FnMut(&str)) -> StepOutcome {
    match step {
        Step::Fork { name, steps } => fork(name, steps, state, say),
        Step::Wait { name, expect_exit, within_ms } => wait(name, *expect_exit, *within_ms, state, say),
        Step::ExecAgent { steps } => exec_agent(steps, say),
        Step::Thread { steps } => {
            let code = std::thread::scope(|s| {
                s.spawn(|| run_nested(state, steps, &mut io::stdout(), "thread ")).join().unwrap_or(1)
            });
            say(&format!("thread: its steps ended with status {code}"));
            StepOutcome::of_status(code)
        }
        Step::Threads(groups) => threads(groups, state, say),
        Step::Repeat { count, steps, for_ms, leak_at_most: None } => repeat(0..*count, *for_ms, steps, state, say),
        Step::Repeat { count, steps, for_ms, leak_at_most: Some(each) } => {
            leak::repeat_without_leaks(*count, *each, say, |range, say| repeat(range, *for_ms, steps, state, say))
        }
        Step::Kmemleak { steps } => kmemleak::watch(say, |say| in_place(steps, state, say)),
        Step::KernelLog { steps, expect, forbid, within_ms, since_boot } => {
            let watch = kmsg::Watch { expect, forbid, within_ms: *within_ms, since_boot: *since_boot };
            kmsg::watch(&watch, say, |say| in_place(steps, state, say))
        }
        _ => unreachable!("not a step that runs steps"),
    }
}

/// The fault-injection steps: `fail_nth` (armed for the next step), `fail_each`,
/// `fail_each_fork`, `fail_in`.
fn fault_step(step: &Step, state: &mut ScenarioState, say: &mut dyn FnMut(&str)) -> StepOutcome {
    match step {
        Step::FailNth { nth, injected, unchanged } => {
            say(&format!(
                "fail_nth {nth}: the next step's first call fails at its fault-injection point {nth}{}",
                if *injected { "" } else { " (if it reaches it)" }
            ));
            state.fault = Some(faults::Fault { nth: *nth, injected: Some(*injected), unchanged: *unchanged });
            StepOutcome::Pass
        }
        Step::FailEach { steps, max } => fail_each(steps, *max, state, say),
        Step::FailEachFork { steps, max } => fail_each_fork(steps, *max, state, say),
        Step::FailIn { function, steps, injected, within_ms } => {
            fail_in(function, steps, *injected, *within_ms, state, say)
        }
        _ => unreachable!("not a fault-injection step"),
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

/// `fork()`: the child runs `steps` on its copy of the state and exits with their status.
fn fork(name: &str, steps: &[Step], state: &mut ScenarioState, say: &mut dyn FnMut(&str)) -> StepOutcome {
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
            let code = run_nested(state, steps, &mut io::stdout(), &format!("fork {name} "));
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

/// `fail_each_fork`: a fork for each of fork()'s own fault-injection points in turn, until
/// the fork no longer reaches the point armed.
fn fail_each_fork(steps: &[Step], max: u32, state: &mut ScenarioState, say: &mut dyn FnMut(&str)) -> StepOutcome {
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
            let code = run_nested(state, steps, &mut lines, &format!("fail_each_fork {nth}: child "));
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
fn fail_each(steps: &[Step], max: u32, state: &mut ScenarioState, say: &mut dyn FnMut(&str)) -> StepOutcome {
    let mut tally = Tally::default();
    for nth in 1..=max {
        state.fault = Some(faults::Fault { nth, injected: None, unchanged: false });
        let text = match one_pass(steps, true, nth, &format!("point {nth} "), state) {
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

/// `fail_in`: the next slab allocation through kernel function `function` fails, for any task,
/// while `steps` run; then whether it came (within `within_ms` after them) is checked.
fn fail_in(
    function: &str,
    steps: &[Step],
    injected: bool,
    within_ms: u64,
    state: &mut ScenarioState,
    say: &mut dyn FnMut(&str),
) -> StepOutcome {
    let what = format!("fail_in {function}");
    let range = crate::kallsyms::read().and_then(|k| {
        crate::kallsyms::function_range(&k, function)
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
    let outcome = in_place(steps, state, say);
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

/// A child's end as waitpid() gave it: `exit N` or `killed by signal N`.
fn wait_status(status: i32) -> String {
    if libc::WIFEXITED(status) {
        format!("exit {}", libc::WEXITSTATUS(status))
    } else {
        format!("killed by signal {}", libc::WTERMSIG(status))
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
fn threads(groups: &[ThreadGroup], state: &mut ScenarioState, say: &mut dyn FnMut(&str)) -> StepOutcome {
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
                let code = run_nested(&mut view, &steps, &mut out, &nesting);
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
fn in_place(steps: &[Step], state: &mut ScenarioState, say: &mut dyn FnMut(&str)) -> StepOutcome {
    let mut lines = Vec::new();
    let code = run_nested(state, steps, &mut lines, "");
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
        let text = match one_pass(steps, templated, i, &format!("iteration {i} "), state) {
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
enum Pass {
    Bad(String),
    Ended(i32, String),
}

/// One pass of a loop's steps (`repeat`, `fail_each`), with `{iteration}` as `i` when
/// `templated`, each line after `nesting`: the lines they said when they all passed.
fn one_pass(steps: &[Step], templated: bool, i: u32, nesting: &str, state: &mut ScenarioState) -> Result<String, Pass> {
    let body: Cow<[Step]> =
        if templated { Cow::Owned(substitute(steps, ITERATION, i).map_err(Pass::Bad)?) } else { Cow::Borrowed(steps) };
    let mut lines = Vec::new();
    let code = run_nested(state, &body, &mut lines, nesting);
    let text = String::from_utf8_lossy(&lines).into_owned();
    if code == 0 {
        Ok(text)
    } else {
        Err(Pass::Ended(code, text))
    }
}

/// Lines counted by kind: two lines are of one kind when they differ only in their numbers
/// (iteration numbers, times, retries, counts). Each kind is said once, with how many lines it
/// stands for, as its first line with each number that varied shown as its range
/// (`after [0..12] ms and [0..9] retries`), in the order the kinds first came.
#[derive(Default)]
struct Tally {
    kinds: Vec<Kind>,
}

struct Kind {
    /// The line with each run of digits as `#`.
    shape: String,
    first: String,
    count: u64,
    /// The smallest and largest value of each run of digits.
    ranges: Vec<(u64, u64)>,
}

/// At most this many kinds of line are said; the rest are counted.
const TALLY_KINDS: usize = 20;

/// The runs of digits in a line: (start, end) byte offsets.
fn digit_runs(line: &str) -> Vec<(usize, usize)> {
    let bytes = line.as_bytes();
    let mut runs = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i].is_ascii_digit() {
            let start = i;
            while i < bytes.len() && bytes[i].is_ascii_digit() {
                i += 1;
            }
            runs.push((start, i));
        } else {
            i += 1;
        }
    }
    runs
}

impl Tally {
    fn add(&mut self, line: &str) {
        let runs = digit_runs(line);
        let mut shape = String::with_capacity(line.len());
        let mut at = 0;
        for (a, b) in &runs {
            shape.push_str(&line[at..*a]);
            shape.push('#');
            at = *b;
        }
        shape.push_str(&line[at..]);
        let values: Vec<u64> = runs.iter().map(|(a, b)| line[*a..*b].parse().unwrap_or(u64::MAX)).collect();
        match self.kinds.iter_mut().find(|k| k.shape == shape) {
            Some(kind) => {
                kind.count += 1;
                for (range, v) in kind.ranges.iter_mut().zip(values) {
                    *range = (range.0.min(v), range.1.max(v));
                }
            }
            None => self.kinds.push(Kind {
                shape,
                first: line.to_string(),
                count: 1,
                ranges: values.iter().map(|v| (*v, *v)).collect(),
            }),
        }
    }

    /// Says each kind's line, after `step: ` (the step that tallied: `repeat`, `fail_each`).
    fn say(&self, step: &str, say: &mut dyn FnMut(&str)) {
        for kind in self.kinds.iter().take(TALLY_KINDS) {
            let mut text = String::new();
            let mut at = 0;
            for ((a, b), (lo, hi)) in digit_runs(&kind.first).into_iter().zip(&kind.ranges) {
                text.push_str(&kind.first[at..a]);
                if lo == hi {
                    text.push_str(&kind.first[a..b]);
                } else {
                    text.push_str(&format!("[{lo}..{hi}]"));
                }
                at = b;
            }
            text.push_str(&kind.first[at..]);
            say(&format!("{step}: {}x {text}", kind.count));
        }
        if self.kinds.len() > TALLY_KINDS {
            let rest: u64 = self.kinds[TALLY_KINDS..].iter().map(|k| k.count).sum();
            say(&format!("{step}: and {rest} lines of {} other kinds", self.kinds.len() - TALLY_KINDS));
        }
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

/// `execve()` of the agent itself with `steps` as JSON: the enablers this process had are
/// dropped by the exec, and the new image runs the steps with an empty state.
fn exec_agent(steps: &[Step], say: &mut dyn FnMut(&str)) -> StepOutcome {
    use std::os::unix::process::CommandExt;
    let json = match serde_json::to_string(steps) {
        Ok(j) => j,
        Err(e) => {
            say(&format!("exec agent: {e}"));
            return StepOutcome::Fail;
        }
    };
    say(&format!("exec agent: {} step(s) in a fresh image", steps.len()));
    let _ = io::stdout().flush();
    // On success exec does not return: the new image's exit status is the scenario's.
    let e = Command::new("/proc/self/exe").arg0("ue-agent").arg(STEPS_ARG).arg(json).exec();
    say(&format!("exec agent: {}", sys::error_name(&e)));
    StepOutcome::Fail
}

#[cfg(test)]
mod tests;
