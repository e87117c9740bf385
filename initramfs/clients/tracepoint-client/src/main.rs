//! ue-tracepoint: Microsoft's `tracepoint` crate (LinuxTracepoints-Rust) as a guest client, so
//! scenarios can check that a real third-party user_events client works against the kernel.
//!
//! Each subcommand runs one sequence through the crate's public API (`TracepointState`,
//! `register`, `enabled()`, `write` with `EventDataDescriptor`, unregister on drop), prints one
//! line per check and exits 1 at the first mismatch, naming what differed (0: all held, 2: bad
//! usage). The expectations that describe the kernel's output (the `format` line, the `trace`
//! text) come from the command line, so the scenario states them:
//!
//! ```text
//! ue-tracepoint lifecycle --event "tpc_demo u32 count" --value 42 \
//!     --field "\tfield:u32 count;\toffset:8;\tsize:4;\tsigned:0;" --trace "tpc_demo: count=0x2a (42)"
//! ue-tracepoint persist --event "tpc_keep u32 count" --value 7
//! ```
//!
//! The event must have a single `u32` field: `--value` is written as one.

use std::collections::BTreeMap;
use std::ffi::{CStr, CString};
use std::mem::MaybeUninit;
use std::pin::Pin;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clients_common::{errno_name, last_errno, outcome};
use tracepoint::{EventDataDescriptor, TracepointState};

const TRACING: &str = "/sys/kernel/tracing";
/// `USER_EVENT_REG_PERSIST` (include/uapi/linux/user_events.h).
const USER_EVENT_REG_PERSIST: u16 = 1;
/// `DIAG_IOCSDEL = _IOW('*', 1, char *)` on a 64-bit build.
const DIAG_IOCSDEL: u32 = (1 << 30) | ((size_of::<usize>() as u32) << 16) | ((b'*' as u32) << 8) | 1;

/// A failed check: what was expected and what happened.
struct Mismatch(String);

type Checked = Result<(), Mismatch>;

fn say(text: &str) {
    println!("ue-tracepoint: {text}");
}

/// Prints a check that held, or returns the mismatch.
fn check(what: &str, held: bool, observed: impl std::fmt::Display, expected: impl std::fmt::Display) -> Checked {
    if held {
        say(&format!("{what}: {observed}: ok"));
        Ok(())
    } else {
        Err(Mismatch(format!("{what}: got {observed}, expected {expected}")))
    }
}

/// The command line: a subcommand and `--key value` pairs.
struct Args {
    command: String,
    options: BTreeMap<String, String>,
}

impl Args {
    fn parse(argv: &[String]) -> Result<Args, String> {
        let (command, rest) = argv.split_first().ok_or("no subcommand (lifecycle, persist)")?;
        let mut options = BTreeMap::new();
        let mut it = rest.iter();
        while let Some(key) = it.next() {
            let name = key.strip_prefix("--").ok_or_else(|| format!("`{key}`: expected --option value"))?;
            let value = it.next().ok_or_else(|| format!("--{name} needs a value"))?;
            options.insert(name.to_string(), value.clone());
        }
        Ok(Args { command: command.clone(), options })
    }

    fn get(&self, name: &str) -> Result<&str, String> {
        self.options.get(name).map(String::as_str).ok_or_else(|| format!("{}: --{name} is required", self.command))
    }

    fn value(&self) -> Result<u32, String> {
        self.get("value")?.parse().map_err(|_| format!("--value {}: not a u32", self.get("value").unwrap_or("")))
    }

    /// How long the enable bit may take to follow the enable file (default 2000 ms).
    fn within(&self) -> Result<Duration, String> {
        match self.options.get("within-ms") {
            None => Ok(Duration::from_millis(2000)),
            Some(v) => v.parse().map(Duration::from_millis).map_err(|_| format!("--within-ms {v}: not a number")),
        }
    }
}

/// The event's name: the text before the first space of its definition.
fn event_name(definition: &str) -> &str {
    definition.split(' ').next().unwrap_or(definition)
}

fn event_file(name: &str, file: &str) -> String {
    format!("{TRACING}/events/user_events/{name}/{file}")
}

/// One write(2) without O_TRUNC, as tracefs control files want.
fn write_control(path: &str, data: &str) -> Checked {
    use std::io::Write;
    let result = std::fs::OpenOptions::new().write(true).open(path).and_then(|mut f| f.write_all(data.as_bytes()));
    match result {
        Ok(()) => {
            say(&format!("wrote {data:?} to {path}"));
            Ok(())
        }
        Err(e) => Err(Mismatch(format!("writing {data:?} to {path}: {e}"))),
    }
}

fn read(path: &str) -> Result<String, Mismatch> {
    std::fs::read_to_string(path).map_err(|e| Mismatch(format!("reading {path}: {e}")))
}

/// Waits until `enabled()` equals `want`, up to `within`; says how long it took.
fn enabled_becomes(state: &TracepointState, want: bool, within: Duration) -> Checked {
    let started = Instant::now();
    while state.enabled() != want && started.elapsed() < within {
        std::thread::sleep(Duration::from_millis(1));
    }
    let got = state.enabled();
    check(
        "enabled()",
        got == want,
        format!("{got} after {} ms", started.elapsed().as_millis()),
        format!("{want} within {} ms", within.as_millis()),
    )
}

/// The crate's write of one u32 payload; slot 0 is the crate's own (the write index).
fn write_u32(state: &TracepointState, value: u32) -> i32 {
    let mut data = [EventDataDescriptor::zero(), EventDataDescriptor::from_value(&value)];
    state.write(&mut data)
}

fn cstring(text: &str) -> Result<CString, Mismatch> {
    CString::new(text).map_err(|_| Mismatch(format!("{text:?} contains a NUL")))
}

/// A heap slot for a `TracepointState` whose address stays the same across drop and reuse, so
/// a re-registration can show whether the dropped state's enabler is still there.
struct Slot(Box<MaybeUninit<TracepointState>>);

impl Slot {
    fn new() -> Slot {
        let mut slot = Slot(Box::new(MaybeUninit::uninit()));
        slot.0.write(TracepointState::new(0));
        slot
    }

    fn state(&self) -> Pin<&TracepointState> {
        // SAFETY: the slot always holds an initialised state (new, reset, forget_and_reset),
        // and the box never moves its contents.
        unsafe { Pin::new_unchecked(self.0.assume_init_ref()) }
    }

    /// Drops the state in place (its Drop unregisters) and puts a fresh one at the same address.
    fn drop_and_reset(&mut self) {
        // SAFETY: initialised, and re-initialised right after.
        unsafe { self.0.assume_init_drop() };
        self.0.write(TracepointState::new(0));
    }

    /// Puts a fresh state at the same address without dropping the old one, whose
    /// registration the kernel keeps until the process exits.
    fn forget_and_reset(&mut self) {
        self.0.write(TracepointState::new(0));
    }

    fn register(&self, definition: &CStr, flags: u16) -> i32 {
        // SAFETY: the state unregisters itself when dropped, and the slot outlives it.
        unsafe { self.state().register_with_flags(definition, flags) }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        // SAFETY: always initialised.
        unsafe { self.0.assume_init_drop() };
    }
}

/// Register, format, the enable bit following the enable file both ways, a write and its
/// trace line, unregister on drop (a re-registration at the same address is accepted) and,
/// as a control, a registration over a live one that was not dropped (EADDRINUSE).
fn lifecycle(args: &Args) -> Result<Checked, String> {
    let definition = args.get("event")?;
    let value = args.value()?;
    let field = args.get("field")?;
    let trace = args.get("trace")?;
    let within = args.within()?;
    Ok((|| {
        let name = event_name(definition);
        let c_definition = cstring(definition)?;
        let enable = event_file(name, "enable");
        let mut slot = Slot::new();

        let r = slot.register(&c_definition, 0);
        check(&format!("register({definition:?})"), r == 0, outcome(r), "ok")?;
        let format = read(&event_file(name, "format"))?;
        check(
            &format!("{name}/format has the line {field:?}"),
            format.lines().any(|l| l == field),
            "found",
            format!("it among:\n{format}"),
        )?;
        check("enabled() after register, nothing attached", !slot.state().enabled(), "false", "false")?;
        let r = write_u32(&slot.state(), value);
        check("write() while disabled (the crate answers EBADF itself)", r == libc::EBADF, outcome(r), "EBADF")?;

        write_control(&enable, "1")?;
        enabled_becomes(&slot.state(), true, within)?;
        let r = write_u32(&slot.state(), value);
        check(&format!("write({value}) while enabled"), r == 0, outcome(r), "ok")?;
        let text = read(&format!("{TRACING}/trace"))?;
        let suffix = format!(" {trace}");
        let lines: Vec<&str> = text.lines().filter(|l| l.ends_with(&suffix)).collect();
        check(
            &format!("trace has one line ending {suffix:?}"),
            lines.len() == 1,
            format!("{:?}", lines),
            format!("exactly one in:\n{text}"),
        )?;

        write_control(&enable, "0")?;
        enabled_becomes(&slot.state(), false, within)?;
        let r = write_u32(&slot.state(), value);
        check("write() after disabling", r == libc::EBADF, outcome(r), "EBADF")?;

        // Unregister on drop: the dropped state's enabler is gone, so a new state at the same
        // address registers (a live enabler there would make it EADDRINUSE), and, the event
        // being enabled, its bit is set at once.
        write_control(&enable, "1")?;
        enabled_becomes(&slot.state(), true, within)?;
        slot.drop_and_reset();
        say("dropped the TracepointState (its Drop unregisters)");
        let r = slot.register(&c_definition, 0);
        check("register again at the dropped state's address", r == 0, outcome(r), "ok (no enabler left there)")?;
        check("enabled() right after that register, the event enabled", slot.state().enabled(), "true", "true")?;

        // The control: the same again without the drop, so the first enabler is still there.
        slot.forget_and_reset();
        say("replaced the TracepointState without dropping it (its registration stays)");
        let r = slot.register(&c_definition, 0);
        check("register at the address of a live registration", r == libc::EADDRINUSE, outcome(r), "EADDRINUSE")?;
        write_control(&enable, "0")
    })())
}

/// A persistent registration outlives its process: registered with PERSIST, written while
/// enabled, dropped; while this process lives the crate's own `user_events_data` descriptor
/// (open for the process's lifetime) still references the event, so deleting it is EBUSY.
fn persist(args: &Args) -> Result<Checked, String> {
    let definition = args.get("event")?;
    let value = args.value()?;
    let within = args.within()?;
    Ok((|| {
        let name = event_name(definition);
        let c_definition = cstring(definition)?;
        let enable = event_file(name, "enable");
        let mut slot = Slot::new();
        let r = slot.register(&c_definition, USER_EVENT_REG_PERSIST);
        check(&format!("register({definition:?}, USER_EVENT_REG_PERSIST)"), r == 0, outcome(r), "ok")?;
        write_control(&enable, "1")?;
        enabled_becomes(&slot.state(), true, within)?;
        let r = write_u32(&slot.state(), value);
        check(&format!("write({value}) while enabled"), r == 0, outcome(r), "ok")?;
        write_control(&enable, "0")?;
        enabled_becomes(&slot.state(), false, within)?;
        slot.drop_and_reset();
        say("dropped the TracepointState (its Drop unregisters)");

        let data = c"/sys/kernel/tracing/user_events_data";
        let c_name = cstring(name)?;
        // SAFETY: NUL-terminated strings that outlive the calls.
        let errno = unsafe {
            let fd = libc::open(data.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC);
            if fd < 0 {
                return Err(Mismatch(format!("open {data:?}: {}", errno_name(last_errno()))));
            }
            let r = libc::ioctl(fd, DIAG_IOCSDEL as _, c_name.as_ptr());
            let errno = if r < 0 { last_errno() } else { 0 };
            libc::close(fd);
            errno
        };
        check(
            &format!("DIAG_IOCSDEL {name:?} on a descriptor of our own, the crate's still open"),
            errno == libc::EBUSY,
            outcome(errno),
            "EBUSY",
        )
    })())
}

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let result = Args::parse(&argv).and_then(|args| match args.command.as_str() {
        "lifecycle" => lifecycle(&args),
        "persist" => persist(&args),
        other => Err(format!("unknown subcommand `{other}` (lifecycle, persist)")),
    });
    match result {
        Err(usage) => {
            eprintln!("ue-tracepoint: {usage}");
            ExitCode::from(2)
        }
        Ok(Err(Mismatch(what))) => {
            say(&format!("FAIL: {what}"));
            ExitCode::from(1)
        }
        Ok(Ok(())) => {
            say("all checks held");
            ExitCode::SUCCESS
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Result<Args, String> {
        Args::parse(&list.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn options_are_pairs() {
        let a = args(&["lifecycle", "--event", "tpc_demo u32 count", "--value", "42"]).unwrap();
        assert_eq!(a.get("event").unwrap(), "tpc_demo u32 count");
        assert_eq!(a.value().unwrap(), 42);
        assert_eq!(a.within().unwrap(), Duration::from_millis(2000));
        assert!(a.get("field").unwrap_err().contains("--field is required"));
        assert!(args(&["lifecycle", "--value"]).err().unwrap().contains("--value needs a value"));
        assert!(args(&["lifecycle", "value"]).err().unwrap().contains("expected --option value"));
        assert_eq!(event_name("tpc_demo u32 count"), "tpc_demo");
    }

    #[test]
    fn delete_number_matches_the_header() {
        if size_of::<usize>() == 8 {
            assert_eq!(DIAG_IOCSDEL, 0x4008_2a01);
        }
    }
}
