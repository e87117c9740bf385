//! The `clone_vm` step: a child made by `clone(CLONE_VM | SIGCHLD)` on a stack of its own runs
//! a few steps in the scenario's memory while the scenario waits, as vfork's parent does.
//!
//! The child shares the heap, the locks and the thread-local storage of the waiting scenario,
//! so the two never run agent code at once: the scenario only polls `waitpid` (no allocation,
//! no output, no errno written while the child runs) until the child has exited or is killed.
//! The child runs only the steps of `protocol::CLONE_VM_STEPS`, which make no descriptor,
//! thread or child; what it changes in memory stays for the scenario.

use std::io::{self, Write};
use std::time::{Duration, Instant};

use protocol::steps::CLONE_VM_STEPS;
use protocol::Step;

use super::outcome::{wait_status, StepOutcome};
use super::state::{Runner, ScenarioState};
use super::sync;

/// The child's stack (untouched pages cost nothing), and the guard page below it.
const STACK: usize = 8 << 20;

/// What the child runs, handed to it by address (the memory is shared).
struct Child<'a> {
    state: &'a mut ScenarioState,
    steps: &'a [Step],
    run: Runner,
}

/// The step kinds of `steps` a `clone_vm` child may not run (none of those it may runs steps).
pub fn refused(steps: &[Step]) -> Vec<String> {
    steps.iter().map(Step::kind).filter(|k| !CLONE_VM_STEPS.contains(&k.as_str())).collect()
}

/// `Step::CloneVm`: the child runs `steps` and exits with their status; the scenario waits for
/// it (at most `within_ms`, then kills it).
pub fn clone_vm(
    steps: &[Step],
    within_ms: u64,
    state: &mut ScenarioState,
    say: &mut dyn FnMut(&str),
    run: Runner,
) -> StepOutcome {
    let refused = refused(steps);
    if !refused.is_empty() {
        say(&format!("clone_vm: {refused:?} cannot run in a child that shares the scenario's memory"));
        return StepOutcome::Fail;
    }
    // Made now, so the child finds them rather than making them in the shared memory: the
    // `data` descriptor (a name the child opened would be open only in its own table), the
    // words' page, the barriers' page.
    if let Err(e) = state.events.prepare_for_threads().and_then(|()| sync::prepare()) {
        say(&format!("clone_vm: {e}"));
        return StepOutcome::Fail;
    }
    let _ = io::stdout().flush();
    // SAFETY: a fresh private mapping, unmapped below once the child is gone.
    let stack = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            STACK,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE | libc::MAP_STACK,
            -1,
            0,
        )
    };
    if stack == libc::MAP_FAILED {
        say(&format!("clone_vm: mmap of its stack: {}", io::Error::last_os_error()));
        return StepOutcome::Fail;
    }
    // SAFETY: the lowest page of the mapping just made becomes the guard page.
    unsafe { libc::mprotect(stack, super::memory::page_size(), libc::PROT_NONE) };
    let outcome = clone_and_wait(steps, within_ms, state, stack, say, run);
    // SAFETY: the mapping made above; the child that ran on it has been reaped.
    unsafe { libc::munmap(stack, STACK) };
    outcome
}

fn clone_and_wait(
    steps: &[Step],
    within_ms: u64,
    state: &mut ScenarioState,
    stack: *mut libc::c_void,
    say: &mut dyn FnMut(&str),
    run: Runner,
) -> StepOutcome {
    let mut child = Child { state, steps, run };
    // The top of the stack, 16-byte aligned (the stack grows down on every architecture the
    // agent is built for).
    let top = ((stack as usize + STACK) & !15) as *mut libc::c_void;
    let deadline = Instant::now() + Duration::from_millis(within_ms);
    // SAFETY: the child runs `child_main` on its own stack in the shared memory while this
    // thread only polls waitpid below, so the two never touch the heap or the agent's state at
    // once; `child` outlives the child, which is reaped before this function returns.
    let pid =
        unsafe { libc::clone(child_main, top, libc::CLONE_VM | libc::SIGCHLD, std::ptr::addr_of_mut!(child).cast()) };
    if pid < 0 {
        say(&format!("clone_vm: clone: {}", io::Error::last_os_error()));
        return StepOutcome::Fail;
    }
    let mut status = 0;
    let mut killed = false;
    loop {
        // SAFETY: waitpid writes only the status integer.
        let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if r == pid {
            break;
        }
        if r < 0 {
            say(&format!("clone_vm: waitpid: {}", io::Error::last_os_error()));
            return StepOutcome::Fail;
        }
        if Instant::now() > deadline && !killed {
            // SAFETY: kill has no memory-safety preconditions.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            killed = true;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let got = wait_status(status);
    if killed {
        say(&format!("clone_vm: child pid {pid} still running after {within_ms} ms; killed it ({got})"));
        return StepOutcome::Fail;
    }
    say(&format!("clone_vm: child pid {pid} shared the scenario's memory; {got}"));
    if libc::WIFEXITED(status) {
        StepOutcome::of_status(libc::WEXITSTATUS(status))
    } else {
        StepOutcome::Fail
    }
}

/// The child: runs the steps, then leaves with their status (`_exit`, which ends only this
/// process: it is not in the scenario's thread group).
extern "C" fn child_main(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the `Child` the parent made and keeps alive until this process is reaped.
    let child = unsafe { &mut *arg.cast::<Child<'_>>() };
    let code = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        (child.run)(child.state, child.steps, &mut io::stdout(), "clone_vm ")
    }))
    .unwrap_or(1);
    let _ = io::stdout().flush();
    // SAFETY: _exit skips atexit handlers and buffers, as a child sharing memory must.
    unsafe { libc::_exit(code) }
}
