//! Kernel health from the serial console log: panics, oopses, BUGs, WARNs, sanitizer, lockdep,
//! hung-task and RCU-stall reports, each attributed to the scenario the guest agent was running
//! (from its `ue-agent: begin/end` kmsg markers). Sans-IO: takes the log text, returns data.

use serde::Serialize;

use crate::support::text::clean;

pub mod fingerprint;
mod report;

use report::{classify, Class, Ending, Report, Step, Trace, Trigger};
pub use report::{Finding, FindingKind};

/// How many lines after a `cut here` the report header may come (other CPUs can interleave).
const CUT_HERE_WINDOW: usize = 5;

/// One scenario as the console saw it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Span {
    pub index: usize,
    pub name: String,
    pub begin_line: usize,
    /// `None` when the scenario never ended on the console.
    pub end_line: Option<usize>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Scan {
    /// In log order.
    pub findings: Vec<Finding>,
    /// The scenarios in the order they began.
    pub timeline: Vec<Span>,
}

impl Scan {
    /// The scenario begun but never ended: the one running when the log stopped.
    pub fn last_begun(&self) -> Option<(usize, String)> {
        self.timeline.last().filter(|s| s.end_line.is_none()).map(|s| (s.index, s.name.clone()))
    }
}

/// Scans a console log for kernel reports.
pub fn scan(console: &str) -> Scan {
    let mut scanner = Scanner::default();
    for (i, raw) in console.lines().enumerate() {
        let line = clean(raw);
        scanner.feed(i + 1, message(&line));
    }
    scanner.close(false);
    scanner.scan
}

/// The last `lines` lines of the log, normalised (timestamps kept), trailing blank lines dropped.
pub fn tail(console: &str, lines: usize) -> Vec<String> {
    let mut out: Vec<String> =
        console.lines().rev().map(clean).skip_while(|l| l.trim().is_empty()).take(lines).collect();
    out.reverse();
    out
}

/// The printk message of a console line: without `[    1.234567]` and a `[    T1]` caller id.
fn message(line: &str) -> &str {
    let Some(rest) = bracketed(line, is_timestamp) else {
        return line;
    };
    let rest = bracketed(rest, is_caller).unwrap_or(rest);
    rest.strip_prefix(' ').unwrap_or(rest)
}

fn bracketed(s: &str, ok: fn(&str) -> bool) -> Option<&str> {
    let inner = s.strip_prefix('[')?;
    let close = inner.find(']')?;
    ok(inner[..close].trim_start()).then(|| &inner[close + 1..])
}

// Requires the dot so that arm64's `[0000000000000000] pgd=...` page-table lines stay intact.
fn is_timestamp(s: &str) -> bool {
    let digits = |p: &str| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit());
    s.split_once('.').is_some_and(|(a, b)| digits(a) && digits(b))
}

fn is_caller(s: &str) -> bool {
    let mut b = s.bytes();
    matches!(b.next(), Some(b'T' | b'C')) && s.len() > 1 && b.all(|c| c.is_ascii_digit())
}

#[derive(Default)]
struct Scanner {
    scan: Scan,
    open: Option<Report>,
    current: Option<(usize, String)>,
}

impl Scanner {
    fn feed(&mut self, line: usize, msg: &str) {
        match classify(msg) {
            Class::Begin(index, name) => {
                self.close(true);
                self.scan.timeline.push(Span { index, name: name.to_string(), begin_line: line, end_line: None });
                self.current = Some((index, name.to_string()));
            }
            Class::End(index) => {
                self.close(true);
                if self.current.as_ref().is_some_and(|(i, _)| *i == index) {
                    self.current = None;
                    if let Some(span) = self.scan.timeline.last_mut() {
                        span.end_line = Some(line);
                    }
                }
            }
            Class::CutHere => {
                self.close(true);
                let trigger = Trigger { kind: FindingKind::CutHere, ending: Ending::Marker, die_line: false };
                self.open = Some(Report::new(line, msg, trigger, self.current.clone()));
            }
            Class::Start(trigger) => {
                if let Some(report) = &mut self.open {
                    let kind = report.finding.kind;
                    if trigger.die_line && matches!(kind, FindingKind::Oops | FindingKind::Bug) && !report.absorbed_die
                    {
                        report.absorbed_die = true;
                        report.ending = Ending::Marker;
                        report.push(msg);
                        return;
                    }
                    if kind == FindingKind::CutHere && report.consumed <= CUT_HERE_WINDOW {
                        report.upgrade(line, msg, trigger, self.current.clone());
                        return;
                    }
                }
                self.close(true);
                self.open = Some(Report::new(line, msg, trigger, self.current.clone()));
            }
            Class::Other => {
                let Some(report) = &mut self.open else { return };
                match report.step(msg) {
                    Step::More => {}
                    Step::Ended | Step::EndedBefore => self.finish(true),
                }
            }
        }
    }

    /// Closes the open report because of a line that is not part of it (`interrupted`) or
    /// because the log ended. An arm64 trace ends at any unindented line, so an interruption
    /// there is its natural end.
    fn close(&mut self, interrupted: bool) {
        let natural = interrupted && self.open.as_ref().is_some_and(|r| r.trace == Trace::Plain);
        self.finish(natural);
    }

    fn finish(&mut self, ended: bool) {
        if let Some(mut report) = self.open.take() {
            report.finding.truncated = !ended || report.capped;
            self.scan.findings.push(report.into_finding());
        }
    }
}

#[cfg(test)]
mod tests;
