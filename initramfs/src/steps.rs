//! Scenario child mode (`ue-agent --scenario INDEX`): runs one scenario's steps in order,
//! one line per step on stdout, and exits 0 (pass), 1 (a step failed) or EXIT_SKIP.

use std::fs::OpenOptions;
use std::io::{self, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use protocol::Step;

use crate::{supervisor, sys};

pub const LKDTM_DIRECT: &str = "/sys/kernel/debug/provoke-crash/DIRECT";

/// How a step ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Ok,
    Fail,
    /// A program exited with EXIT_SKIP when it was expected to succeed: the kselftest way of
    /// saying "this kernel cannot run me", so the scenario skips rather than fails.
    Skip,
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

/// Runs the steps until one does not succeed; the exit status for the scenario.
pub fn run_steps(steps: &[Step], out: &mut dyn Write) -> i32 {
    for (i, step) in steps.iter().enumerate() {
        let n = i + 1;
        let mut say = |text: &str| {
            let _ = writeln!(out, "step {n}: {text}");
            // Before a program or a crash point runs, everything said so far must be out.
            let _ = out.flush();
        };
        match run_step(step, &mut say) {
            Verdict::Ok => {}
            Verdict::Fail => return 1,
            Verdict::Skip => return protocol::EXIT_SKIP,
        }
    }
    0
}

fn run_step(step: &Step, say: &mut dyn FnMut(&str)) -> Verdict {
    match step {
        Step::Exec { argv, expect_exit } => exec(argv, *expect_exit, say),
        Step::WriteFile { path, data, create } => {
            let (verdict, text) = write_file(Path::new(path), data, *create);
            say(&text);
            verdict
        }
        Step::Lkdtm { point } => {
            // Said first: a PANIC or BUG may not let the write return.
            say(&format!("lkdtm {point}: triggering"));
            let (verdict, text) = write_file(Path::new(LKDTM_DIRECT), point, false);
            say(&format!("lkdtm {point}: returned: {text}"));
            verdict
        }
        Step::Sleep { ms } => {
            // Said first, so a scenario killed at its deadline shows where it was.
            say(&format!("sleep {ms} ms"));
            std::thread::sleep(Duration::from_millis(*ms));
            Verdict::Ok
        }
    }
}

/// Runs a program with the child's stdout and stderr, so its output lands in the scenario's.
fn exec(argv: &[String], expect: i32, say: &mut dyn FnMut(&str)) -> Verdict {
    let Some((program, args)) = argv.split_first() else {
        say("exec: empty argv");
        return Verdict::Fail;
    };
    let shown = argv.join(" ");
    match Command::new(program).args(args).status() {
        Err(e) => {
            say(&format!("exec {shown}: cannot start: {}", sys::error_name(&e)));
            Verdict::Fail
        }
        Ok(status) => match status.code() {
            Some(code) if code == expect => {
                say(&format!("exec {shown}: exit {code} (expected {expect})"));
                Verdict::Ok
            }
            Some(protocol::EXIT_SKIP) => {
                say(&format!("exec {shown}: exit {} (skip; expected {expect})", protocol::EXIT_SKIP));
                Verdict::Skip
            }
            Some(code) => {
                say(&format!("exec {shown}: exit {code} (expected {expect})"));
                Verdict::Fail
            }
            None => {
                let signal = status.signal().unwrap_or(0);
                say(&format!("exec {shown}: killed by signal {signal} (expected exit {expect})"));
                Verdict::Fail
            }
        },
    }
}

/// One write(2) of all of `data`, as tracefs control files want: no create, no truncate
/// (O_TRUNC has side effects there, clearing `trace` or every dynamic event), unless `create`.
fn write_file(path: &Path, data: &str, create: bool) -> (Verdict, String) {
    let what = format!("write {data:?} to {}", path.display());
    let mut file = match OpenOptions::new().write(true).create(create).truncate(create).open(path) {
        Ok(f) => f,
        Err(e) => return (Verdict::Fail, format!("{what}: open: {}", sys::error_name(&e))),
    };
    match file.write(data.as_bytes()) {
        Ok(n) if n == data.len() => (Verdict::Ok, format!("{what}: ok")),
        Ok(n) => (Verdict::Fail, format!("{what}: short write of {n} bytes")),
        Err(e) => (Verdict::Fail, format!("{what}: {}", sys::error_name(&e))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn run(steps: &[Step]) -> (i32, Vec<String>) {
        let mut out = Vec::new();
        let status = run_steps(steps, &mut out);
        (status, String::from_utf8(out).unwrap().lines().map(String::from).collect())
    }

    fn exec(argv: &[&str], expect_exit: i32) -> Step {
        Step::Exec { argv: argv.iter().map(|s| s.to_string()).collect(), expect_exit }
    }

    #[test]
    fn exec_compares_the_exit_status() {
        let (status, lines) = run(&[exec(&["/bin/true"], 0), exec(&["/bin/false"], 1)]);
        assert_eq!(status, 0, "{lines:?}");
        assert_eq!(
            lines,
            ["step 1: exec /bin/true: exit 0 (expected 0)", "step 2: exec /bin/false: exit 1 (expected 1)"]
        );

        let (status, lines) = run(&[exec(&["/bin/false"], 0), exec(&["/bin/true"], 0)]);
        assert_eq!(status, 1);
        assert_eq!(lines, ["step 1: exec /bin/false: exit 1 (expected 0)"], "stops at the first failure");
    }

    #[test]
    fn exec_failures_and_skips() {
        let (status, lines) = run(&[exec(&["/nonexistent/prog"], 0)]);
        assert_eq!((status, lines[0].as_str()), (1, "step 1: exec /nonexistent/prog: cannot start: ENOENT"));
        let (status, lines) = run(&[exec(&["/bin/sh", "-c", "exit 4"], 0)]);
        assert_eq!(status, protocol::EXIT_SKIP, "{lines:?}");
        let (status, lines) = run(&[exec(&["/bin/sh", "-c", "kill -9 $$"], 0)]);
        assert_eq!(status, 1);
        assert!(lines[0].ends_with("killed by signal 9 (expected exit 0)"), "{lines:?}");
        assert_eq!(run(&[Step::Exec { argv: vec![], expect_exit: 0 }]).0, 1);
    }

    #[test]
    fn write_file_writes_without_truncating() {
        let path = std::env::temp_dir().join(format!("ue-agent-step-{}", std::process::id()));
        fs::write(&path, "0123456789").unwrap();
        let step = Step::WriteFile { path: path.display().to_string(), data: "ab\n".into(), create: false };
        let (status, lines) = run(&[step, Step::Sleep { ms: 1 }]);
        assert_eq!(status, 0);
        assert_eq!(lines, [format!("step 1: write \"ab\\n\" to {}: ok", path.display()), "step 2: sleep 1 ms".into()]);
        assert_eq!(fs::read_to_string(&path).unwrap(), "ab\n3456789");
        fs::remove_file(&path).unwrap();

        let (status, lines) =
            run(&[Step::WriteFile { path: path.display().to_string(), data: "x".into(), create: false }]);
        assert_eq!(status, 1);
        assert!(lines[0].ends_with(": open: ENOENT"), "{lines:?}");

        let created = Step::WriteFile { path: path.display().to_string(), data: "new".into(), create: true };
        assert_eq!(run(std::slice::from_ref(&created)).0, 0);
        fs::write(&path, "longer old content").unwrap();
        assert_eq!(run(&[created]).0, 0);
        assert_eq!(fs::read_to_string(&path).unwrap(), "new", "create replaces the content");
        fs::remove_file(&path).unwrap();
    }

    #[test]
    fn write_errors_name_the_errno() {
        // A directory opens for writing with EISDIR.
        let step = Step::WriteFile { path: "/".into(), data: "x".into(), create: false };
        let (status, lines) = run(&[step]);
        assert_eq!(status, 1);
        assert_eq!(lines, ["step 1: write \"x\" to /: open: EISDIR"]);
    }
}
