//! The result stream's primitives, shared by the plan loop and what runs between scenarios:
//! a line written and flushed, a Diag made safe, the kernel's taint, the scenarios' counts.

use std::fs;
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use protocol::{Outcome, ResultLine};

use crate::runtime::sys;

/// How many scenarios ended which way.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    pub passed: usize,
    pub failed: usize,
    pub skipped: usize,
    pub timeout: usize,
}

impl Counts {
    /// One more scenario that ended with `outcome`.
    pub(super) fn count(&mut self, outcome: Outcome) {
        match outcome {
            Outcome::Pass => self.passed += 1,
            Outcome::Fail => self.failed += 1,
            Outcome::Skip => self.skipped += 1,
            Outcome::Timeout => self.timeout += 1,
        }
    }
}

/// The kernel's taint mask; 0 when unreadable (no /proc), which the host sees as untainted.
pub fn read_taint(path: &Path) -> u64 {
    fs::read_to_string(path).ok().and_then(|s| s.trim().parse().ok()).unwrap_or(0)
}

/// Writes one line and flushes it, so a crash loses nothing already reported.
pub fn emit(out: &mut dyn Write, line: &ResultLine) {
    static BROKEN: AtomicBool = AtomicBool::new(false);
    let text = format!("{}\n", line.format());
    if let Err(e) = out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        if !BROKEN.swap(true, Ordering::Relaxed) {
            sys::console(&format!("ue-agent: result channel write failed: {}", sys::error_name(&e)));
        }
    }
}

/// A Diag line that reads back as the same Diag: control characters are escaped, and text
/// that would parse as one of the agent's own lines (`ue-end 1 taint=0`) is marked as output.
pub(super) fn diag(text: &str) -> ResultLine {
    let text = clean(text);
    let line = ResultLine::Diag(text.clone());
    if ResultLine::parse(&line.format()).as_ref() == Some(&line) {
        line
    } else {
        ResultLine::Diag(format!("| {text}"))
    }
}

pub(super) fn clean(text: &str) -> String {
    let mut s = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() && c != '\t' {
            s.push_str(&format!("\\x{:02x}", c as u32));
        } else {
            s.push(c);
        }
    }
    s
}
