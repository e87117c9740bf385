//! How a step ends (`StepOutcome`) and the helpers every step area shares to get there: a call's
//! result said as `WHAT: GOT (expected E)` and checked against the step's `expect`, errno names,
//! the raw `ioctl`. It imports only `faults`, whose hook runs the `ioctl` a `fail_nth` armed.

use std::io;
use std::os::fd::RawFd;

use protocol::Expect;

/// How a step ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepOutcome {
    Pass,
    Fail,
    /// A program exited with EXIT_SKIP when it was expected to succeed: the kselftest way of
    /// saying "this kernel cannot run me", so the scenario skips rather than fails.
    Skip,
}

impl StepOutcome {
    /// `Pass` when `ok`, else `Fail`.
    pub fn passed_if(ok: bool) -> StepOutcome {
        if ok {
            StepOutcome::Pass
        } else {
            StepOutcome::Fail
        }
    }

    /// The end of nested steps from their exit status (`run_nested`'s): 0 passes,
    /// `EXIT_SKIP` skips, anything else fails.
    pub fn of_status(code: i32) -> StepOutcome {
        match code {
            0 => StepOutcome::Pass,
            c if c == protocol::EXIT_SKIP => StepOutcome::Skip,
            _ => StepOutcome::Fail,
        }
    }
}

/// A step's own end, or why it could not run at all (a missing name, a bad argument).
pub type Done = Result<StepOutcome, String>;

/// The step's end from a [`Done`]: why it could not run is said as its line, and it fails.
pub fn finish(done: Done, say: &mut dyn FnMut(&str)) -> StepOutcome {
    done.unwrap_or_else(|e| {
        say(&e);
        StepOutcome::Fail
    })
}

/// Says `WHAT: GOT (expected E)` and checks the call's result (`Ok(return value)` or
/// `Err(errno)`) against the expectation.
pub fn check_result(
    what: &str,
    got: &str,
    result: Result<i64, i32>,
    expect: &Expect,
    say: &mut dyn FnMut(&str),
) -> StepOutcome {
    say(&format!("{what}: {got} (expected {expect})"));
    StepOutcome::passed_if(expect.met_by(result))
}

/// The errno of the last failed call.
pub fn errno() -> i32 {
    io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// The protocol's name for an errno (what a plan would write as `expect`), else `errno N`.
pub fn errno_text(errno: i32) -> String {
    protocol::errno_name(errno).map(String::from).unwrap_or_else(|| format!("errno {errno}"))
}

/// How a call ended, for a step's line: `ok`, `ok, returned N`, or the errno.
pub fn result_text(result: Result<i64, i32>) -> String {
    match result {
        Ok(0) => "ok".to_string(),
        Ok(v) => format!("ok, returned {v}"),
        Err(e) => errno_text(e),
    }
}

/// `ioctl(fd, cmd, arg)`: Ok(return value) or Err(errno).
pub fn ioctl(fd: RawFd, cmd: u64, arg: u64) -> Result<i64, i32> {
    // SAFETY: the argument is a pointer into a live buffer or an address chosen to be invalid;
    // the kernel validates user pointers, so a bad one gives EFAULT, not memory corruption.
    // The request type differs between libcs (c_int on musl, c_ulong on glibc).
    crate::steps::faults::around(|| {
        let r = unsafe { libc::ioctl(fd, cmd as _, arg as usize as *mut libc::c_void) };
        if r >= 0 {
            Ok(i64::from(r))
        } else {
            Err(errno())
        }
    })
}

/// A child's end as waitpid() gave it: `exit N` or `killed by signal N`.
pub fn wait_status(status: i32) -> String {
    if libc::WIFEXITED(status) {
        format!("exit {}", libc::WEXITSTATUS(status))
    } else {
        format!("killed by signal {}", libc::WTERMSIG(status))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_are_said_and_checked() {
        let mut lines = Vec::new();
        let mut say = |l: &str| lines.push(l.to_string());
        assert_eq!(check_result("x", "EBUSY", Err(16), &Expect::Errno(16), &mut say), StepOutcome::Pass);
        assert_eq!(check_result("x", "ok", Ok(0), &Expect::Errno(16), &mut say), StepOutcome::Fail);
        assert_eq!(finish(Err("y: no such thing".into()), &mut say), StepOutcome::Fail);
        assert_eq!(lines, ["x: EBUSY (expected EBUSY)", "x: ok (expected EBUSY)", "y: no such thing"]);
    }

    #[test]
    fn unknown_errnos_are_numbered() {
        assert_eq!(errno_text(libc::ENOTTY), "ENOTTY");
        assert_eq!(errno_text(4000), "errno 4000");
        assert_eq!(result_text(Ok(3)), "ok, returned 3");
    }
}
