//! Scenario child mode (`ue-agent --scenario INDEX`): runs one scenario's steps in order,
//! one line per step on stdout, and exits 0 (pass), 1 (a step failed) or EXIT_SKIP.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use protocol::{Expect, Expected, Step};

use crate::uevents::{self, judge, State};
use crate::{supervisor, sys};

pub const LKDTM_DIRECT: &str = "/sys/kernel/debug/provoke-crash/DIRECT";

/// How many lines of a file a failed `read_file` shows.
const SHOWN_LINES: usize = 20;

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

/// The exec'd agent's main: steps with a fresh state, their lines marked as after the exec.
pub fn run_nested_main(steps: &[Step]) -> i32 {
    run_nested(&mut State::new(), steps, &mut io::stdout(), "exec ")
}

/// Runs the steps until one does not succeed; the exit status for the scenario.
pub fn run_steps(steps: &[Step], out: &mut dyn Write) -> i32 {
    run_steps_in(&mut State::new(), steps, out)
}

/// [`run_steps`] with the scenario's user_events state given.
pub fn run_steps_in(state: &mut State, steps: &[Step], out: &mut dyn Write) -> i32 {
    run_nested(state, steps, out, "")
}

/// Runs steps whose lines start with `prefix` (`fork child `, `thread `): nested steps of a
/// fork, a thread or an exec'd agent number their own steps from 1.
fn run_nested(state: &mut State, steps: &[Step], out: &mut dyn Write, prefix: &str) -> i32 {
    for (i, step) in steps.iter().enumerate() {
        let n = i + 1;
        let mut say = |text: &str| {
            let _ = writeln!(out, "{prefix}step {n}: {text}");
            // Before a program or a crash point runs, everything said so far must be out.
            let _ = out.flush();
        };
        match run_step(step, state, &mut say) {
            Verdict::Ok => {}
            Verdict::Fail => return 1,
            Verdict::Skip => return protocol::EXIT_SKIP,
        }
    }
    0
}

fn expectation(step: &Step) -> Option<&Expect> {
    match step {
        Step::WriteFile { expect, .. }
        | Step::ReadFile { expect, .. }
        | Step::Open { expect, .. }
        | Step::Register { expect, .. }
        | Step::Unregister { expect, .. }
        | Step::Delete { expect, .. }
        | Step::Write { expect, .. }
        | Step::PerfOpen { expect, .. }
        | Step::PerfControl { expect, .. }
        | Step::PerfFilter { expect, .. }
        | Step::Mkdir { expect, .. }
        | Step::Rmdir { expect, .. }
        | Step::RegisterUntil { expect, .. }
        | Step::BpfProg { expect, .. }
        | Step::BpfAttach { expect, .. }
        | Step::BpfRawTracepoint { expect, .. } => Some(expect),
        _ => None,
    }
}

fn run_step(step: &Step, state: &mut State, say: &mut dyn FnMut(&str)) -> Verdict {
    // Checked before the call, which may have side effects.
    if let Some(Err(e)) = expectation(step).map(Expect::parse) {
        say(&format!("bad expectation: {e}"));
        return Verdict::Fail;
    }
    match step {
        Step::Exec { argv, expect_exit } => exec(argv, *expect_exit, say),
        Step::WriteFile { path, data, create, append, expect } => {
            write_file(Path::new(path), data, Mode { create: *create, append: *append }, expect, say)
        }
        Step::ReadFile { path, equals, contains, lacks, includes, excludes, head_hex, expect, within_ms } => {
            let head = match head_hex.as_deref().map(protocol::decode_hex).transpose() {
                Ok(h) => h,
                Err(e) => {
                    say(&format!("read {path}: head_hex {e}"));
                    return Verdict::Fail;
                }
            };
            let checks =
                Checks { equals: equals.as_deref(), contains, lacks, includes, excludes, head: head.as_deref() };
            // Retry quietly until the deadline, then once more saying why it failed.
            let deadline = std::time::Instant::now() + Duration::from_millis(*within_ms);
            let started = std::time::Instant::now();
            while std::time::Instant::now() < deadline {
                if read_file(Path::new(path), &checks, expect, &mut |_| {}) == Verdict::Ok {
                    break;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            let verdict = read_file(Path::new(path), &checks, expect, say);
            if *within_ms > 0 {
                say(&format!(
                    "read {path}: settled after {} ms (allowed {within_ms} ms)",
                    started.elapsed().as_millis()
                ));
            }
            verdict
        }
        Step::Fork { name, steps } => fork(name, steps, state, say),
        Step::Fuzz { seed, iterations } => crate::fuzz::run(*seed, *iterations, say),
        Step::Credentials { uid, gid, keep_caps } => crate::perf::credentials(*uid, *gid, keep_caps, say),
        Step::PerfOpen { name, event, disabled, expect } => {
            crate::perf::open(state, name, event, *disabled, expect, say)
        }
        Step::PerfControl { name, action, expect } => crate::perf::control(state, name, *action, expect, say),
        Step::PerfFilter { name, filter, expect } => crate::perf::filter(state, name, filter, expect, say),
        Step::PerfRead { name, samples, records } => {
            crate::perf::read(state, name, samples.as_deref(), records.as_deref(), say)
        }
        Step::Mkdir { path, expect } => dir_call("mkdir", path, expect, say),
        Step::Rmdir { path, expect } => dir_call("rmdir", path, expect, say),
        Step::BpfProg { name, kind, ctx_read, expect } => crate::bpf::load(state, name, *kind, *ctx_read, expect, say),
        Step::BpfAttach { prog, perf, expect } => crate::bpf::attach(state, prog, perf, expect, say),
        Step::BpfRawTracepoint { prog, tracepoint, expect } => {
            crate::bpf::raw_tracepoint(state, prog, tracepoint, expect, say)
        }
        Step::BpfCount { prog, equals } => crate::bpf::count(state, prog, *equals, say),
        Step::Wait { name, expect_exit, within_ms } => wait(name, *expect_exit, *within_ms, state, say),
        Step::ExecAgent { steps } => exec_agent(steps, say),
        Step::Thread { steps } => {
            let code = std::thread::scope(|s| {
                s.spawn(|| run_nested(state, steps, &mut io::stdout(), "thread ")).join().unwrap_or(1)
            });
            say(&format!("thread: its steps ended with status {code}"));
            match code {
                0 => Verdict::Ok,
                c if c == protocol::EXIT_SKIP => Verdict::Skip,
                _ => Verdict::Fail,
            }
        }
        Step::Lkdtm { point } => {
            // Said first: a PANIC or BUG may not let the write return.
            say(&format!("lkdtm {point}: triggering"));
            let mut text = String::new();
            let verdict = write_file(Path::new(LKDTM_DIRECT), point, Mode::default(), &Expect::default(), &mut |t| {
                text = t.to_string();
            });
            say(&format!("lkdtm {point}: returned: {text}"));
            verdict
        }
        Step::Sleep { ms } => {
            // Said first, so a scenario killed at its deadline shows where it was.
            say(&format!("sleep {ms} ms"));
            std::thread::sleep(Duration::from_millis(*ms));
            Verdict::Ok
        }
        Step::Open { .. }
        | Step::Close { .. }
        | Step::Register { .. }
        | Step::Unregister { .. }
        | Step::Delete { .. }
        | Step::Memory { .. }
        | Step::SetWord { .. }
        | Step::CheckBit { .. }
        | Step::CheckWord { .. }
        | Step::RegisterUntil { .. }
        | Step::Write { .. } => state.run(step, say),
        Step::TraceRead { event, instance, records } => {
            crate::ringbuf::read_step(event, instance.as_deref(), records, say)
        }
        Step::Measure { name, what, payload, consumers, vectored, enablers, reps, duration_ms } => {
            let req = crate::measure::Request {
                name,
                what: *what,
                payload: *payload,
                consumers: *consumers,
                vectored: *vectored,
                enablers: *enablers,
                reps: *reps,
                duration: Duration::from_millis(*duration_ms),
            };
            crate::measure::run(&req, say)
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

/// How `write_file` opens.
#[derive(Debug, Default, Clone, Copy)]
struct Mode {
    create: bool,
    append: bool,
}

/// One write(2) of all of `data`, as tracefs control files want: no create, no truncate
/// (O_TRUNC has side effects there, clearing `trace` or every dynamic event), unless `create`,
/// which creates or replaces an ordinary file (or, with `append`, creates or appends).
fn write_file(path: &Path, data: &str, mode: Mode, expect: &Expect, say: &mut dyn FnMut(&str)) -> Verdict {
    let mut what = format!("write {data:?} to {}", path.display());
    for (on, word) in [(mode.create, " (create)"), (mode.append, " (append)")] {
        if on {
            what.push_str(word);
        }
    }
    let opened = OpenOptions::new()
        .write(true)
        .append(mode.append)
        .create(mode.create)
        .truncate(mode.create && !mode.append)
        .open(path);
    let (result, got) = match opened {
        Err(e) => match e.raw_os_error() {
            Some(errno) => (Err(errno), format!("open: {}", uevents::errno_text(errno))),
            None => {
                say(&format!("{what}: open: {e}"));
                return Verdict::Fail;
            }
        },
        Ok(mut file) => match file.write(data.as_bytes()) {
            Ok(n) if n == data.len() => (Ok(n as i64), "ok".to_string()),
            Ok(n) => (Ok(n as i64), format!("short write of {n} of {} bytes", data.len())),
            Err(e) => {
                let errno = e.raw_os_error().unwrap_or(0);
                (Err(errno), uevents::errno_text(errno))
            }
        },
    };
    let verdict = judge(&what, &got, result, expect, say);
    // `ok` means the whole of `data`; a count states a short write explicitly.
    if expect.parse() == Ok(Expected::Ok) && result != Ok(data.len() as i64) {
        return Verdict::Fail;
    }
    verdict
}

/// `fork()`: the child runs `steps` on its copy of the state and exits with their status.
fn fork(name: &str, steps: &[Step], state: &mut State, say: &mut dyn FnMut(&str)) -> Verdict {
    if state.children.contains_key(name) {
        say(&format!("fork {name}: a child of that name is still running"));
        return Verdict::Fail;
    }
    // Anything buffered would be written twice, once by each process.
    let _ = io::stdout().flush();
    // SAFETY: the scenario process is single-threaded here (thread steps join before
    // returning), so the child does not inherit a lock held by another thread.
    match unsafe { libc::fork() } {
        -1 => {
            say(&format!("fork {name}: {}", sys::error_name(&io::Error::last_os_error())));
            Verdict::Fail
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
            Verdict::Ok
        }
    }
}

/// Collects a forked child and compares its exit status.
fn wait(name: &str, expect_exit: i32, within_ms: u64, state: &mut State, say: &mut dyn FnMut(&str)) -> Verdict {
    let Some(pid) = state.children.remove(name) else {
        say(&format!("wait {name}: no such child"));
        return Verdict::Fail;
    };
    let deadline = std::time::Instant::now() + Duration::from_millis(within_ms);
    loop {
        let mut status = 0;
        // SAFETY: waitpid writes only the status integer.
        let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if r == pid {
            let got = if libc::WIFEXITED(status) {
                format!("exit {}", libc::WEXITSTATUS(status))
            } else {
                format!("killed by signal {}", libc::WTERMSIG(status))
            };
            let ok = libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == expect_exit;
            say(&format!("wait {name}: {got} (expected exit {expect_exit})"));
            return if ok { Verdict::Ok } else { Verdict::Fail };
        }
        if r < 0 {
            say(&format!("wait {name}: {}", sys::error_name(&io::Error::last_os_error())));
            return Verdict::Fail;
        }
        if std::time::Instant::now() > deadline {
            // SAFETY: kill has no memory-safety preconditions.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            say(&format!("wait {name}: still running after {within_ms} ms; killed it"));
            return Verdict::Fail;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// The argument that makes the agent run steps given as JSON (see `main.rs`).
pub const STEPS_ARG: &str = "--steps";

/// `execve()` of the agent itself with `steps` as JSON: the enablers this process had are
/// dropped by the exec, and the new image runs the steps with an empty state.
fn exec_agent(steps: &[Step], say: &mut dyn FnMut(&str)) -> Verdict {
    use std::os::unix::process::CommandExt;
    let json = match serde_json::to_string(steps) {
        Ok(j) => j,
        Err(e) => {
            say(&format!("exec agent: {e}"));
            return Verdict::Fail;
        }
    };
    say(&format!("exec agent: {} step(s) in a fresh image", steps.len()));
    let _ = io::stdout().flush();
    // On success exec does not return: the new image's exit status is the scenario's.
    let e = Command::new("/proc/self/exe").arg0("ue-agent").arg(STEPS_ARG).arg(json).exec();
    say(&format!("exec agent: {}", sys::error_name(&e)));
    Verdict::Fail
}

/// `mkdir(2)` or `rmdir(2)` of `path` (mode 0755).
fn dir_call(call: &str, path: &str, expect: &Expect, say: &mut dyn FnMut(&str)) -> Verdict {
    let done = if call == "mkdir" { std::fs::create_dir(path) } else { std::fs::remove_dir(path) };
    let result = done.map(|()| 0).map_err(|e| e.raw_os_error().unwrap_or(0));
    let got = match result {
        Ok(_) => "ok".to_string(),
        Err(errno) => uevents::errno_text(errno),
    };
    judge(&format!("{call} {path}"), &got, result, expect, say)
}

/// What a read file must hold (see `Step::ReadFile`).
struct Checks<'a> {
    head: Option<&'a [u8]>,
    equals: Option<&'a str>,
    contains: &'a [String],
    lacks: &'a [String],
    includes: &'a [String],
    excludes: &'a [String],
}

/// Reads a whole file (tracefs files until read returns 0) and compares it.
fn read_file(path: &Path, checks: &Checks, expect: &Expect, say: &mut dyn FnMut(&str)) -> Verdict {
    let what = format!("read {}", path.display());
    let mut content = Vec::new();
    let read = File::open(path).map_err(|e| ("open: ", e)).and_then(|mut f| {
        // Reads of 64 KiB until read returns 0, retrying EINTR: `events/header_page` and
        // `header_event` answer only a first read, which read_to_end's 32-byte probe would cut.
        let mut buf = vec![0u8; 64 << 10];
        loop {
            match f.read(&mut buf) {
                Ok(0) => return Ok(content.len()),
                Ok(n) => content.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(("", e)),
            }
        }
    });
    let result = match read {
        Ok(n) => Ok(n as i64),
        Err((call, e)) => match e.raw_os_error() {
            Some(errno) => {
                return judge(&what, &format!("{call}{}", uevents::errno_text(errno)), Err(errno), expect, say);
            }
            None => {
                say(&format!("{what}: {call}{e}"));
                return Verdict::Fail;
            }
        },
    };
    let text = String::from_utf8_lossy(&content);
    let lines: Vec<&str> = text.lines().map(str::trim_end).collect();
    let got = format!("{} bytes, {} lines", content.len(), lines.len());
    if judge(&what, &got, result, expect, say) == Verdict::Fail {
        return Verdict::Fail;
    }
    let mut failed = false;
    if let Some(want) = checks.head {
        if !content.starts_with(want) {
            let seen: String = content.iter().take(want.len().max(8)).map(|b| format!("{b:02x}")).collect();
            say(&format!(
                "{what}: starts with {seen}, not {}",
                want.iter().map(|b| format!("{b:02x}")).collect::<String>()
            ));
            failed = true;
        }
    }
    if let Some(want) = checks.equals {
        if content != want.as_bytes() {
            say(&format!("{what}: content is not the expected {want:?}"));
            failed = true;
        }
    }
    for want in checks.includes {
        if !text.contains(want.as_str()) {
            say(&format!("{what}: does not include {want:?}"));
            failed = true;
        }
    }
    for unwanted in checks.excludes {
        if text.contains(unwanted.as_str()) {
            say(&format!("{what}: includes {unwanted:?}"));
            failed = true;
        }
    }
    for want in checks.contains {
        if !lines.contains(&want.trim_end()) {
            say(&format!("{what}: no line {want:?}"));
            failed = true;
        }
    }
    for unwanted in checks.lacks {
        if lines.contains(&unwanted.trim_end()) {
            say(&format!("{what}: has line {unwanted:?}"));
            failed = true;
        }
    }
    if !failed {
        return Verdict::Ok;
    }
    say(&format!("{what}: first {} of {} lines:", lines.len().min(SHOWN_LINES), lines.len()));
    for line in text.lines().take(SHOWN_LINES) {
        say(&format!("| {line}"));
    }
    Verdict::Fail
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

    fn write_file(path: &Path, data: &str, create: bool, append: bool, expect: &str) -> Step {
        let path = path.display().to_string();
        Step::WriteFile { path, data: data.into(), create, append, expect: Expect(expect.into()) }
    }

    fn read_file(path: &Path, equals: Option<&str>, contains: &[&str], lacks: &[&str], expect: &str) -> Step {
        let strings = |l: &[&str]| l.iter().map(|s| s.to_string()).collect();
        Step::ReadFile {
            path: path.display().to_string(),
            equals: equals.map(String::from),
            contains: strings(contains),
            lacks: strings(lacks),
            includes: vec![],
            excludes: vec![],
            head_hex: None,
            expect: Expect(expect.into()),
            within_ms: 0,
        }
    }

    #[test]
    fn read_file_includes_and_excludes_text_anywhere() {
        let path = temp_path("includes");
        fs::write(&path, "  ue-agent-12  [000] .....  1.234: ev: a=5 b=6\n").unwrap();
        let step = |includes: &[&str], excludes: &[&str]| Step::ReadFile {
            path: path.display().to_string(),
            equals: None,
            contains: vec![],
            lacks: vec![],
            includes: includes.iter().map(|s| s.to_string()).collect(),
            excludes: excludes.iter().map(|s| s.to_string()).collect(),
            head_hex: None,
            expect: Expect::default(),
            within_ms: 0,
        };
        assert_eq!(run(&[step(&["ev: a=5 b=6"], &["a=7"])]).0, 0);
        let (status, lines) = run(&[step(&["a=7"], &[])]);
        assert_eq!(status, 1);
        assert!(lines.iter().any(|l| l.contains("does not include \"a=7\"")), "{lines:?}");
        let (status, lines) = run(&[step(&[], &["b=6"])]);
        assert_eq!(status, 1);
        assert!(lines.iter().any(|l| l.contains("includes \"b=6\"")), "{lines:?}");
        fs::remove_file(&path).unwrap();
    }

    fn temp_path(name: &str) -> std::path::PathBuf {
        std::env::temp_dir().join(format!("ue-agent-step-{}-{name}", std::process::id()))
    }

    #[test]
    fn mkdir_rmdir_and_head_hex() {
        let dir = temp_path("dir");
        let d = dir.display().to_string();
        let mk = Step::Mkdir { path: d.clone(), expect: Expect::default() };
        assert_eq!(run(&[mk]).0, 0);
        let (status, lines) = run(&[Step::Mkdir { path: d.clone(), expect: Expect("EEXIST".into()) }]);
        assert_eq!((status, lines), (0, vec![format!("step 1: mkdir {d}: EEXIST (expected EEXIST)")]));
        let file = dir.join("bin");
        fs::write(&file, [1u8, 0, 0xff, 7]).unwrap();
        let head = |hex: &str| Step::ReadFile {
            path: file.display().to_string(),
            equals: None,
            contains: vec![],
            lacks: vec![],
            includes: vec![],
            excludes: vec![],
            head_hex: Some(hex.into()),
            expect: Expect::default(),
            within_ms: 0,
        };
        assert_eq!(run(&[head("0100ff")]).0, 0);
        let (status, lines) = run(&[head("0200")]);
        assert_eq!(status, 1);
        assert!(lines[1].ends_with("starts with 0100ff07, not 0200"), "{lines:?}");
        let rm = Step::Rmdir { path: d.clone(), expect: Expect("ENOTEMPTY".into()) };
        assert_eq!(run(&[rm]).0, 0);
        fs::remove_file(&file).unwrap();
        assert_eq!(run(&[Step::Rmdir { path: d, expect: Expect::default() }]).0, 0);
    }

    #[test]
    fn write_file_writes_without_truncating() {
        let path = temp_path("write");
        fs::write(&path, "0123456789").unwrap();
        let (status, lines) = run(&[write_file(&path, "ab\n", false, false, "ok"), Step::Sleep { ms: 1 }]);
        assert_eq!(status, 0);
        assert_eq!(
            lines,
            [format!("step 1: write \"ab\\n\" to {}: ok (expected ok)", path.display()), "step 2: sleep 1 ms".into()]
        );
        assert_eq!(fs::read_to_string(&path).unwrap(), "ab\n3456789");
        fs::remove_file(&path).unwrap();

        let (status, lines) = run(&[write_file(&path, "x", false, false, "ok")]);
        assert_eq!(status, 1);
        assert!(lines[0].ends_with(": open: ENOENT (expected ok)"), "{lines:?}");
        let (status, lines) = run(&[write_file(&path, "x", false, false, "ENOENT")]);
        assert_eq!(status, 0, "{lines:?}");

        let created = write_file(&path, "new", true, false, "ok");
        assert_eq!(run(std::slice::from_ref(&created)).0, 0);
        fs::write(&path, "longer old content").unwrap();
        assert_eq!(run(&[created]).0, 0);
        assert_eq!(fs::read_to_string(&path).unwrap(), "new", "create replaces the content");
        fs::remove_file(&path).unwrap();
    }

    #[test]
    fn write_file_appends_and_counts() {
        let path = temp_path("append");
        fs::write(&path, "one\n").unwrap();
        let (status, lines) = run(&[write_file(&path, "two\n", false, true, "4")]);
        assert_eq!(status, 0, "{lines:?}");
        assert_eq!(lines, [format!("step 1: write \"two\\n\" to {} (append): ok (expected 4)", path.display())]);
        assert_eq!(run(&[write_file(&path, "3\n", true, true, "ok")]).0, 0, "create with append keeps the content");
        assert_eq!(fs::read_to_string(&path).unwrap(), "one\ntwo\n3\n");
        assert_eq!(run(&[write_file(&path, "x", false, true, "2")]).0, 1, "a count is exact");
        assert_eq!(run(&[write_file(&path, "x", false, true, "EINVAL")]).0, 1, "success is not an errno");
        fs::remove_file(&path).unwrap();
    }

    #[test]
    fn write_errors_name_the_errno() {
        // A directory opens for writing with EISDIR.
        let (status, lines) = run(&[write_file(Path::new("/"), "x", false, false, "ok")]);
        assert_eq!(status, 1);
        assert_eq!(lines, ["step 1: write \"x\" to /: open: EISDIR (expected ok)"]);
        let (status, lines) = run(&[write_file(Path::new("/"), "x", false, false, "EWHAT")]);
        assert_eq!(status, 1);
        assert_eq!(lines, ["step 1: bad expectation: `EWHAT` is not `ok`, a number or an errno name"]);
    }

    #[test]
    fn read_file_compares_whole_content_and_lines() {
        let path = temp_path("read");
        fs::write(&path, "name: ev\nfield:u32 a;  \n\tprint fmt\n").unwrap();
        let whole = "name: ev\nfield:u32 a;  \n\tprint fmt\n";
        let (status, lines) = run(&[read_file(&path, Some(whole), &["field:u32 a;", "name: ev  "], &["u32 a"], "ok")]);
        assert_eq!(status, 0, "{lines:?}");
        assert_eq!(lines, [format!("step 1: read {}: 35 bytes, 3 lines (expected ok)", path.display())]);
        assert_eq!(run(&[read_file(&path, None, &["\tprint fmt"], &[], "35")]).0, 0);

        let (status, lines) = run(&[read_file(&path, Some("name: ev\n"), &["name"], &["name: ev"], "ok")]);
        assert_eq!(status, 1);
        let p = path.display();
        assert_eq!(
            lines,
            [
                format!("step 1: read {p}: 35 bytes, 3 lines (expected ok)"),
                format!("step 1: read {p}: content is not the expected \"name: ev\\n\""),
                format!("step 1: read {p}: no line \"name\""),
                format!("step 1: read {p}: has line \"name: ev\""),
                format!("step 1: read {p}: first 3 of 3 lines:"),
                "step 1: | name: ev".into(),
                "step 1: | field:u32 a;  ".into(),
                "step 1: | \tprint fmt".into(),
            ]
        );
        fs::remove_file(&path).unwrap();

        let (status, lines) = run(&[read_file(&path, None, &[], &[], "ENOENT")]);
        assert_eq!((status, lines), (0, vec![format!("step 1: read {p}: open: ENOENT (expected ENOENT)")]));
        assert_eq!(run(&[read_file(&path, None, &[], &[], "ok")]).0, 1);
        let (status, lines) = run(&[read_file(Path::new("/"), None, &[], &[], "EISDIR")]);
        assert_eq!((status, lines), (0, vec!["step 1: read /: EISDIR (expected EISDIR)".into()]));
    }

    #[test]
    fn a_long_mismatch_shows_the_first_lines() {
        let path = temp_path("long");
        let content: String = (0..50).map(|i| format!("line {i}\n")).collect();
        fs::write(&path, &content).unwrap();
        let (status, lines) = run(&[read_file(&path, None, &["line 50"], &[], "ok")]);
        assert_eq!(status, 1);
        assert_eq!(lines.len(), 3 + SHOWN_LINES, "{lines:?}");
        assert!(lines[2].ends_with("first 20 of 50 lines:"), "{lines:?}");
        assert_eq!(lines.last().unwrap(), "step 1: | line 19");
        fs::remove_file(&path).unwrap();
    }

    /// The user_events steps keep their state across steps of one scenario.
    #[test]
    fn user_events_steps_share_the_scenario_state() {
        let path = temp_path("state");
        fs::write(&path, "").unwrap();
        let mut state = State::with_data_path(path.clone());
        let steps = [
            Step::SetWord { word: "w".into(), value: 6 },
            Step::CheckBit { word: "w".into(), bit: 2, set: true, within_ms: 0 },
            Step::Write {
                fd: protocol::DATA_FD.into(),
                index: None,
                index_value: Some(1),
                fields: vec![protocol::Value::Text("x".into())],
                vectored: true,
                offset: None,
                payload_from: None,
                expect: Expect::default(),
            },
            Step::Close { fd: protocol::DATA_FD.into() },
            read_file(&path, Some("\u{1}\0\0\0x"), &[], &[], "5"),
        ];
        let mut out = Vec::new();
        let status = run_steps_in(&mut state, &steps, &mut out);
        assert_eq!(status, 0, "{}", String::from_utf8_lossy(&out));
        fs::remove_file(&path).unwrap();
    }
}
