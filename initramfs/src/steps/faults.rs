//! `Step::FailNth`: the kernel's own fault injection armed for one call of a scenario's next
//! step (`/proc/thread-self/fail-nth`, Documentation/fault-injection/fault-injection.rst). Just
//! before that step, [`Fault::arm`] snapshots the state the `unchanged` check compares and arms
//! this thread; the first `ioctl`, `write(2)` or `openat(2)` the step makes on it runs inside [`around`],
//! which writes N to `fail-nth` right before the call and reads it back (0: the Nth point
//! failed) and disarms right after, so nothing else the agent does is failed. [`Fault::check`]
//! then says whether the fault was injected and whether the state reads as before. [`Sweep`]
//! arms the same file for each point of a `fail_each_fork` in turn. A leaf.

use std::cell::Cell;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::fd::{AsRawFd, RawFd};
use std::time::{Duration, Instant};

const FAIL_NTH: &str = "/proc/thread-self/fail-nth";
/// Without `N` here failslab counts only allocations that cannot sleep, and nearly every
/// allocation of user_events can (GFP_KERNEL, GFP_KERNEL_ACCOUNT). fail_page_alloc keeps its `Y`:
/// the pages a slab cache takes when it runs empty depend on what ran before, so counting them
/// would make N depend on the boot's history (a fresh boot's first multi-format registration
/// counted one more point than the same call late in the plan).
const IGNORE_GFP_WAIT: [&str; 1] = ["/sys/kernel/debug/failslab/ignore-gfp-wait"];
/// How long `unchanged` waits for the state to come back (a deferred delete).
const SETTLE: Duration = Duration::from_secs(2);
/// What `unchanged` compares, besides the enable words.
const STATE_FILES: [&str; 2] = ["/sys/kernel/tracing/user_events_status", "/sys/kernel/tracing/dynamic_events"];

/// The armed call of this thread: `fail-nth`'s descriptor and N; after the call, what
/// `fail-nth` read back (`Some(0)`: injected).
#[derive(Clone, Copy)]
struct Armed {
    fd: RawFd,
    nth: u32,
    left: Option<u32>,
}

thread_local! {
    static ARMED: Cell<Option<Armed>> = const { Cell::new(None) };
}

/// Runs one system call; when a `fail_nth` armed this thread and no call has used it yet, with
/// `fail-nth` set to N around it. Nothing between the two writes allocates in user space.
pub fn around<T>(call: impl FnOnce() -> T) -> T {
    let Some(armed) = ARMED.get().filter(|a| a.left.is_none()) else {
        return call();
    };
    set_nth(armed.fd, armed.nth);
    let result = call();
    let left = disarm(armed.fd);
    ARMED.set(Some(Armed { left: Some(left), ..armed }));
    result
}

/// Writes N to `fail-nth` (open as `fd`): the Nth fault-injection point from now fails.
fn set_nth(fd: RawFd, nth: u32) {
    let mut digits = [0u8; 10];
    let text = decimal(nth, &mut digits);
    // SAFETY: a write of a small buffer on a descriptor this module opened.
    unsafe { libc::write(fd, text.as_ptr().cast(), text.len()) };
}

/// Reads `fail-nth` back (0: the point failed; else how many points were still to come) and
/// disarms it. Nothing here allocates in user space.
fn disarm(fd: RawFd) -> u32 {
    let mut back = [0u8; 16];
    // SAFETY: reads and writes of small buffers on a descriptor this module opened.
    let n = unsafe { libc::pread(fd, back.as_mut_ptr().cast(), back.len(), 0) };
    // SAFETY: as above; 0 disarms whatever is left.
    unsafe { libc::write(fd, b"0".as_ptr().cast(), 1) };
    usize::try_from(n)
        .ok()
        .and_then(|n| std::str::from_utf8(&back[..n]).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(u32::MAX)
}

/// This thread's `fail-nth`, opened after failslab is told to count sleeping allocations too.
fn open_fail_nth() -> Result<File, String> {
    for path in IGNORE_GFP_WAIT {
        write(path, "N").map_err(|e| {
            format!("{path}: {e} (needs CONFIG_FAULT_INJECTION_DEBUG_FS and CONFIG_FAILSLAB: --profile faults)")
        })?;
    }
    OpenOptions::new()
        .read(true)
        .write(true)
        .open(FAIL_NTH)
        .map_err(|e| format!("{FAIL_NTH}: {e} (needs CONFIG_FAULT_INJECTION: --profile faults)"))
}

/// Back to failslab's default: allocations that can sleep are not counted.
fn stop_counting_sleeping() {
    for path in IGNORE_GFP_WAIT {
        let _ = write(path, "Y");
    }
}

/// This thread's `fail-nth` held open for a `fail_each_fork` sweep, with failslab counting
/// sleeping allocations until it is dropped.
pub struct Sweep {
    file: File,
}

impl Sweep {
    pub fn open() -> Result<Sweep, String> {
        Ok(Sweep { file: open_fail_nth()? })
    }

    /// The Nth fault-injection point this thread reaches from now on fails.
    pub fn arm(&self, nth: u32) {
        set_nth(self.file.as_raw_fd(), nth);
    }

    /// After the call: whether the point failed; disarmed either way. (Only the thread that
    /// armed it may call this: a forked child must not touch the descriptor.)
    pub fn injected(&self) -> bool {
        disarm(self.file.as_raw_fd()) == 0
    }
}

impl Drop for Sweep {
    fn drop(&mut self) {
        stop_counting_sleeping();
    }
}

/// failslab's debugfs folder: its attributes apply to every task unless `task-filter` is Y.
const FAILSLAB: &str = "/sys/kernel/debug/failslab";

/// failslab armed for every task for one failure, in the allocations whose call stack passes
/// through an address range (a function); disarmed on drop.
pub struct InFunction;

impl InFunction {
    pub fn arm(start: u64, end: u64) -> Result<InFunction, String> {
        let (start, end) = (start.to_string(), end.to_string());
        let attributes = [
            ("ignore-gfp-wait", "N"),
            ("task-filter", "N"),
            ("space", "0"),
            ("interval", "1"),
            ("stacktrace-depth", "32"),
            ("require-start", start.as_str()),
            ("require-end", end.as_str()),
            ("times", "1"),
            // Last: from here on it fails.
            ("probability", "100"),
        ];
        let armed = InFunction;
        for (name, value) in attributes {
            write(&format!("{FAILSLAB}/{name}"), value).map_err(|e| {
                format!(
                    "{FAILSLAB}/{name}: {e} (needs CONFIG_FAILSLAB and CONFIG_FAULT_INJECTION_STACKTRACE_FILTER: --profile faults)"
                )
            })?;
        }
        Ok(armed)
    }

    /// Whether the one failure came (`times` counted down to 0).
    pub fn fired(&self) -> bool {
        read(&format!("{FAILSLAB}/times")).is_ok_and(|t| t.trim() == "0")
    }
}

impl Drop for InFunction {
    fn drop(&mut self) {
        let end = u64::MAX.to_string();
        let defaults = [
            ("probability", "0"),
            ("times", "1"),
            ("require-start", "0"),
            ("require-end", end.as_str()),
            ("ignore-gfp-wait", "Y"),
        ];
        for (name, value) in defaults {
            let _ = write(&format!("{FAILSLAB}/{name}"), value);
        }
    }
}

/// `n` in decimal, in `buf`.
fn decimal(mut n: u32, buf: &mut [u8; 10]) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &buf[i..];
        }
    }
}

/// A `fail_nth` step, waiting for the next step.
#[derive(Debug, Clone)]
pub struct Fault {
    pub nth: u32,
    /// Whether the fault must come (`Some(true)`), must not (`Some(false)`), or either (a
    /// `fail_each` sweep, which reads [`last_injected`]).
    pub injected: Option<bool>,
    pub unchanged: bool,
    /// `in` and `not_in`: only points through one function count.
    pub stack: Option<StackFilter>,
}

/// A `fail_nth`'s `in` (and `not_in`): the functions' names and text ranges (`[start, end)`).
#[derive(Debug, Clone)]
pub struct StackFilter {
    pub within: (String, u64, u64),
    pub not_in: Option<(String, u64, u64)>,
}

/// The fault attributes whose points `fail-nth` counts: both get the stack filter.
const FILTERED: [&str; 2] = ["/sys/kernel/debug/failslab", "/sys/kernel/debug/fail_page_alloc"];

impl StackFilter {
    /// Writes the ranges into failslab's and fail_page_alloc's stack filter. Their
    /// `probability` stays 0, so no other task fails: only this thread's `fail-nth` counts
    /// through the filter (lib/fault-inject.c, should_fail_ex()).
    fn set(&self) -> Result<(), String> {
        let (_, start, end) = &self.within;
        let (reject_start, reject_end) = self.not_in.as_ref().map_or((0, 0), |(_, s, e)| (*s, *e));
        let values = [
            ("stacktrace-depth", "32".to_string()),
            ("reject-start", reject_start.to_string()),
            ("reject-end", reject_end.to_string()),
            ("require-start", start.to_string()),
            ("require-end", end.to_string()),
        ];
        for dir in FILTERED {
            for (name, value) in &values {
                write(&format!("{dir}/{name}"), value).map_err(|e| {
                    format!("{dir}/{name}: {e} (`in` needs CONFIG_FAULT_INJECTION_STACKTRACE_FILTER: --profile faults)")
                })?;
            }
        }
        Ok(())
    }

    /// Back to no filter: every point counts.
    fn clear() {
        let end = u64::MAX.to_string();
        for dir in FILTERED {
            for (name, value) in
                [("require-start", "0"), ("require-end", end.as_str()), ("reject-start", "0"), ("reject-end", "0")]
            {
                let _ = write(&format!("{dir}/{name}"), value);
            }
        }
    }

    /// ` through F` (` and not through G`), for the step's lines.
    fn describe(&self) -> String {
        let not = self.not_in.as_ref().map_or(String::new(), |(g, _, _)| format!(" and not through {g}()"));
        format!(" through {}(){not}", self.within.0)
    }
}

thread_local! {
    static LAST_INJECTED: Cell<Option<bool>> = const { Cell::new(None) };
}

/// Whether the last armed call's fault came (None: it made no call to arm).
pub fn last_injected() -> Option<bool> {
    LAST_INJECTED.get()
}

/// What was armed, and the state before the call.
pub struct Before {
    file: File,
    files: Vec<Result<String, String>>,
    words: Option<Vec<u8>>,
}

impl Fault {
    /// Arms this thread for the next step's first call, after reading the state it compares.
    pub fn arm(&self, words: Option<Vec<u8>>) -> Result<Before, String> {
        let file = open_fail_nth().map_err(|e| format!("fail_nth: {e}"))?;
        if let Some(stack) = &self.stack {
            stack.set().map_err(|e| {
                StackFilter::clear();
                stop_counting_sleeping();
                format!("fail_nth: {e}")
            })?;
        }
        let files = if self.unchanged { STATE_FILES.iter().map(|p| read(p)).collect() } else { Vec::new() };
        ARMED.set(Some(Armed { fd: file.as_raw_fd(), nth: self.nth, left: None }));
        Ok(Before { file, files, words })
    }

    /// After the step: disarms, says whether the fault came, and checks (true: as expected)
    /// it against `injected` and, with `unchanged`, the state against `before`'s (the words
    /// read with `words`), waiting up to [`SETTLE`] for it to come back.
    pub fn check(&self, before: Before, words: &dyn Fn() -> Option<Vec<u8>>, say: &mut dyn FnMut(&str)) -> bool {
        let armed = ARMED.take();
        stop_counting_sleeping();
        if self.stack.is_some() {
            StackFilter::clear();
        }
        drop(before.file);
        let nth = self.nth;
        let through = self.stack.as_ref().map_or(String::new(), StackFilter::describe);
        let mut ok = true;
        let left = armed.and_then(|a| a.left);
        LAST_INJECTED.set(left.map(|l| l == 0));
        match left {
            None => {
                say(&format!("fail_nth {nth}: the step made no ioctl, write(2) or openat(2) to fail"));
                ok = false;
            }
            Some(0) => {
                say(&format!("fail_nth {nth}: injected: the call's fault-injection point {nth}{through} failed"));
                if self.injected == Some(false) {
                    say(&format!("fail_nth {nth}: expected the call to reach fewer than {nth} points{through}"));
                    ok = false;
                }
            }
            Some(left) => {
                let reached = nth.saturating_sub(left);
                say(&format!(
                    "fail_nth {nth}: not injected: the call reached {reached} fault-injection points{through}"
                ));
                if self.injected == Some(true) {
                    ok = false;
                }
            }
        }
        if self.unchanged {
            // What a failed call leaves may go by itself (an event whose last reference the
            // failure dropped is deleted by a worker after an RCU grace period): poll a while.
            let started = Instant::now();
            let diffs = loop {
                let mut diffs = Vec::new();
                for (path, was) in STATE_FILES.iter().zip(&before.files) {
                    let now = read(path);
                    if &now != was {
                        diffs.push(format!("{path} changed: before {was:?}, after {now:?}"));
                    }
                }
                if let Some(diff) = words_diff(before.words.as_deref(), words().as_deref()) {
                    diffs.push(format!("the enable words changed: {diff}"));
                }
                if diffs.is_empty() || started.elapsed() >= SETTLE {
                    break diffs;
                }
                std::thread::sleep(Duration::from_millis(5));
            };
            let waited = started.elapsed().as_millis();
            for d in &diffs {
                say(&format!("fail_nth {nth}: {d} ({waited} ms after the call)"));
            }
            if diffs.is_empty() {
                say(&format!(
                    "fail_nth {nth}: user_events_status, dynamic_events and the enable words as before{}",
                    if waited >= 5 { format!(" (after {waited} ms)") } else { String::new() }
                ));
            } else {
                ok = false;
            }
        }
        ok
    }
}

/// The first 8-byte slot that differs, as `slot K: 0x.. -> 0x..`.
fn words_diff(before: Option<&[u8]>, after: Option<&[u8]>) -> Option<String> {
    match (before, after) {
        (Some(b), Some(a)) => b.chunks(8).zip(a.chunks(8)).enumerate().find(|(_, (x, y))| x != y).map(|(k, (x, y))| {
            let hex = |s: &[u8]| s.iter().map(|b| format!("{b:02x}")).collect::<String>();
            format!("slot {k}: {} -> {}", hex(x), hex(y))
        }),
        (None, None) => None,
        (b, a) => Some(format!("mapped before: {}, after: {}", b.is_some(), a.is_some())),
    }
}

fn read(path: &str) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| e.to_string())
}

fn write(path: &str, data: &str) -> Result<(), String> {
    let mut f = OpenOptions::new().write(true).open(path).map_err(|e| e.to_string())?;
    f.write_all(data.as_bytes()).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_written_in_decimal() {
        let mut buf = [0u8; 10];
        assert_eq!(decimal(0, &mut buf), b"0");
        assert_eq!(decimal(7, &mut buf), b"7");
        assert_eq!(decimal(u32::MAX, &mut buf), b"4294967295");
    }

    #[test]
    fn a_call_outside_an_armed_step_is_untouched() {
        assert_eq!(around(|| 5), 5);
        assert!(ARMED.get().is_none());
    }

    #[test]
    fn word_changes_name_the_slot() {
        let a = [0u8; 16];
        let mut b = a;
        b[9] = 1;
        assert_eq!(words_diff(Some(&a), Some(&b)).unwrap(), "slot 1: 0000000000000000 -> 0001000000000000");
        assert_eq!(words_diff(Some(&a), Some(&a)), None);
        assert_eq!(words_diff(None, Some(&a)).unwrap(), "mapped before: false, after: true");
    }
}
