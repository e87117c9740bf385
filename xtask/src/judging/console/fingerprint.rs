//! A finding's fingerprint (sans-IO): its kind and the first meaningful frames of its call
//! trace, `kasan:user_event_enabler_write<user_event_enabler_update<user_event_reg`, and a short
//! hash of that text, equal for the same crash on any boot, arch or address, so the history
//! can tell a crash it saw before from a new one.
//!
//! The rule, line by line through the report:
//!
//! - the faulting place comes first when the report prints one before its trace: x86's
//!   `RIP: 0010:func+0x../0x..`, arm64's and riscv's `pc : func+0x..`, `epc : func+0x..`
//!   (a user-space `RIP: 0033:0x44a3b7` names no function and is not one);
//! - then the frames of the report's first call trace (`Call Trace:` / `Call trace:`) up to its
//!   first line that is neither a frame nor a `<IRQ>`/`<TASK>` marker: the later stacks of a
//!   report (KASAN's `Allocated by task`, `Freed by task`) are not its call path;
//! - a frame is the first word shaped `func+0xoff/0xlen`; the function keeps its name only:
//!   no offset, no length, no ` [module]`, no compiler suffix (`.constprop.0`, `.isra.0`,
//!   `.cold`, `.part.0`), which differ between builds and arches;
//! - unreliable frames (`? func+0x..`, powerpc's `(unreliable)`) are left out, and so is the
//!   reporting machinery, which is the same for every report of a kind: [`MACHINERY`] names
//!   it (stack dumpers, the sanitizers' reporters, the WARN/BUG trap path, die/oops/panic,
//!   lockdep's own checks, the `might_sleep` checks, the lock primitives and the scheduler
//!   a blocked task sits in);
//! - the same function twice in a row counts once (the fault's place and the trace's first
//!   frame are one on arm64), and the first [`FRAMES`] left make the fingerprint;
//! - a report without any such frame (a bare panic line) falls back to its summary, every run
//!   of digits turned into `N`, so addresses, pids and times do not split it.
//!
//! Symbolization (file and line) is never part of it: the same crash on a kernel built without
//! debug info has the same fingerprint.

use sha2::{Digest, Sha256};

/// How many meaningful frames make a fingerprint.
pub const FRAMES: usize = 3;
/// How many frames a finding keeps for its report (and its symbolization).
pub const KEPT_FRAMES: usize = 32;

/// The reporting machinery: a frame whose function is one of these, or starts with one that
/// ends in `*`, is not part of the crash's call path.
pub const MACHINERY: &[&str] = &[
    // Stack dumps and the sanitizers' reporters.
    "dump_stack*",
    "show_stack*",
    "dump_backtrace*",
    "show_regs*",
    "print_report*",
    "print_address_description*",
    "kasan_*",
    "__kasan_*",
    "kmsan_*",
    "__kmsan_*",
    "__msan_*",
    "__asan_*",
    "kfence_*",
    "__kfence_*",
    "__ubsan_*",
    "ubsan_*",
    "check_memory_region*",
    // WARN and BUG: the trap and its handlers (x86, arm64, riscv).
    "__warn*",
    "warn_slowpath*",
    "report_bug*",
    "handle_bug*",
    "fixup_bug*",
    "do_error_trap*",
    "do_trap*",
    "exc_*",
    "asm_exc_*",
    "bug_handler*",
    "call_break_hook*",
    "brk_handler*",
    "do_debug_exception*",
    "el1_dbg*",
    "el1h_64_sync*",
    "el1_abort*",
    "do_mem_abort*",
    "do_trap_break*",
    "handle_exception*",
    // Death.
    "__die*",
    "die",
    "die_kernel_fault*",
    "oops_*",
    "panic",
    "nmi_panic*",
    "nmi_cpu_backtrace*",
    // Lockdep and might_sleep.
    "lockdep_*",
    "print_circular_bug*",
    "print_usage_bug*",
    "check_noncircular*",
    "check_prev_add*",
    "check_prevs_add*",
    "validate_chain*",
    "__lock_acquire*",
    "lock_acquire*",
    "lock_release*",
    "mark_lock*",
    "__might_resched*",
    "__might_sleep*",
    "___might_sleep*",
    "__might_fault*",
    // Lock primitives and the scheduler a blocked task sits in.
    "__mutex_lock*",
    "mutex_lock*",
    "_raw_spin_*",
    "_raw_read_*",
    "_raw_write_*",
    "down_read*",
    "down_write*",
    "__schedule*",
    "schedule*",
];

/// What a finding's call trace says, as the scanner collects it line by line.
#[derive(Debug, Clone, Default)]
pub(super) struct Stack {
    /// The faulting place, printed before the trace.
    pc: Option<String>,
    state: State,
    /// The reliable frames of the first trace, as printed (`func+0xoff/0xlen`).
    frames: Vec<String>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum State {
    #[default]
    Before,
    /// Inside the first trace; `true` once a frame was seen.
    In(bool),
    Done,
}

impl Stack {
    pub(super) fn feed(&mut self, msg: &str) {
        let t = msg.trim();
        match self.state {
            State::Before => {
                if t == "Call Trace:" || t == "Call trace:" {
                    self.state = State::In(false);
                } else if self.pc.is_none() {
                    self.pc = pc_of(t).map(str::to_string);
                }
            }
            State::In(seen) => {
                if t.starts_with('<') && t.ends_with('>') && !t.contains(' ') {
                    return;
                }
                match frame_of(t) {
                    Some((token, reliable)) => {
                        if reliable && self.frames.len() < KEPT_FRAMES {
                            self.frames.push(token.to_string());
                        }
                        self.state = State::In(true);
                    }
                    None if seen => self.state = State::Done,
                    None => {}
                }
            }
            State::Done => {}
        }
    }

    /// The faulting place then the trace's reliable frames, a frame repeated in a row once.
    pub(super) fn frames(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for f in self.pc.iter().chain(&self.frames) {
            if out.last() != Some(f) && out.len() < KEPT_FRAMES {
                out.push(f.clone());
            }
        }
        out
    }
}

/// The frames of a report's lines (an excerpt read back), as the scanner collects them.
pub fn frames_of(lines: &[String]) -> Vec<String> {
    let mut stack = Stack::default();
    for l in lines {
        stack.feed(l);
    }
    stack.frames()
}

/// The fingerprint's text of a finding: its kind, then its first meaningful functions joined
/// with `<` (callee first); the normalised summary when it has none.
/// `kind` is the finding's kind's name (`FindingKind::as_str`).
pub fn fingerprint(kind: &str, frames: &[String], summary: &str) -> String {
    let mut funcs: Vec<&str> = Vec::new();
    for f in frames {
        let Some(func) = function(f) else { continue };
        if is_machinery(func) || funcs.last() == Some(&func) {
            continue;
        }
        funcs.push(func);
        if funcs.len() == FRAMES {
            break;
        }
    }
    if funcs.is_empty() {
        return format!("{kind}:{}", normalise(summary));
    }
    format!("{kind}:{}", funcs.join("<"))
}

/// A short stable hash of a fingerprint's text: the first 12 hex digits of its sha256.
pub fn hash(fingerprint: &str) -> String {
    let digest = Sha256::digest(fingerprint.as_bytes());
    digest.iter().take(6).map(|b| format!("{b:02x}")).collect()
}

/// Whether a function is reporting machinery ([`MACHINERY`]).
pub fn is_machinery(func: &str) -> bool {
    MACHINERY.iter().any(|m| match m.strip_suffix('*') {
        Some(prefix) => func.starts_with(prefix),
        None => func == *m,
    })
}

/// The function of a frame `func.suffix+0xoff/0xlen [module]`: its name alone.
pub fn function(frame: &str) -> Option<&str> {
    let (name, _) = split(frame)?;
    Some(name.split('.').next().unwrap_or(name))
}

/// A frame's symbol (with its compiler suffix), offset and length: `func+0x1c/0x40`.
pub fn split(frame: &str) -> Option<(&str, (u64, u64))> {
    let (name, rest) = frame.split_once("+0x")?;
    let (off, len) = rest.split_once("/0x")?;
    let len = len.split(|c: char| !c.is_ascii_hexdigit()).next()?;
    let valid = !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.');
    let off = u64::from_str_radix(off, 16).ok()?;
    let len = u64::from_str_radix(len, 16).ok()?;
    valid.then_some((name, (off, len)))
}

/// The faulting place of a register dump line, when it names a kernel function.
fn pc_of(t: &str) -> Option<&str> {
    let rest = t
        .strip_prefix("RIP: ")
        .and_then(|r| r.split_once(':').map(|(_, f)| f))
        .or_else(|| t.strip_prefix("pc : "))
        .or_else(|| t.strip_prefix("epc : "))?;
    let word = rest.split_whitespace().next()?;
    split(word).map(|_| word)
}

/// A trace line's frame word and whether it is reliable; `None` for a line that is no frame.
fn frame_of(t: &str) -> Option<(&str, bool)> {
    let (t, unsure) = match t.strip_prefix("? ") {
        Some(rest) => (rest, true),
        None => (t, false),
    };
    let word = t.split_whitespace().find(|w| split(w).is_some())?;
    Some((word, !unsure && !t.ends_with("(unreliable)")))
}

/// A summary with its numbers blurred: a word of hex digits with a digit in it (`0x` or not)
/// is `N`, and so is every run of digits in another word.
fn normalise(summary: &str) -> String {
    let mut out = String::with_capacity(summary.len());
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String| {
        let bare = word.strip_prefix("0x").unwrap_or(word);
        if !bare.is_empty() && bare.bytes().all(|b| b.is_ascii_hexdigit()) && bare.bytes().any(|b| b.is_ascii_digit()) {
            out.push('N');
        } else {
            let mut in_digits = false;
            for c in word.chars() {
                if c.is_ascii_digit() {
                    if !in_digits {
                        out.push('N');
                    }
                    in_digits = true;
                } else {
                    in_digits = false;
                    out.push(c);
                }
            }
        }
        word.clear();
    };
    for c in summary.chars() {
        if c.is_ascii_alphanumeric() {
            word.push(c);
        } else {
            flush(&mut word, &mut out);
            out.push(c);
        }
    }
    flush(&mut word, &mut out);
    out
}

#[cfg(test)]
mod tests;
