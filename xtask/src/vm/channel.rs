//! The result channel read once per boot: each line of `results.ktap` parsed, once, into an
//! [`Event`] (a `protocol::ResultLine` with its text, or a line that is no part of the
//! protocol), as the VM writes it. The boot hands each event to its listeners as it comes (the
//! watchdog, the live progress, coverage's prefetch, `validate`'s early stop) and keeps them
//! all for the judge and coverage. A log on disk (a recorded run read back) goes through the
//! same parser. Sans-IO.

use protocol::ResultLine;

use crate::support::text::clean;

/// One non-blank line of the result channel, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A protocol line, and its text as read (escapes and control characters stripped).
    Line(ResultLine, String),
    /// A line that is not part of the protocol (its text as read).
    Garbage(String),
}

impl Event {
    /// The protocol line, if this is one.
    pub fn line(&self) -> Option<&ResultLine> {
        match self {
            Event::Line(line, _) => Some(line),
            Event::Garbage(_) => None,
        }
    }
}

/// The one parser of the channel's lines: `None` for a blank line.
pub fn parse(raw: &str) -> Option<Event> {
    let text = clean(raw);
    if text.trim().is_empty() {
        return None;
    }
    Some(match ResultLine::parse(&text) {
        Some(line) => Event::Line(line, text),
        None => Event::Garbage(text),
    })
}

/// A whole capture (a recorded `results.ktap`), parsed line by line.
pub fn parse_all(text: &str) -> Vec<Event> {
    text.lines().filter_map(parse).collect()
}

/// Splits the log's bytes, as they are read, into whole lines parsed, keeping a cut line for
/// later.
#[derive(Debug, Default)]
pub struct Lines {
    partial: Vec<u8>,
}

impl Lines {
    /// The events of the whole lines read so far.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<Event> {
        self.partial.extend_from_slice(bytes);
        let Some(last) = self.partial.iter().rposition(|b| *b == b'\n') else { return vec![] };
        let whole: Vec<u8> = self.partial.drain(..=last).collect();
        parse_all(&String::from_utf8_lossy(&whole))
    }

    /// The log's last line when it has no newline (the stream was cut): read as a line, as a
    /// capture read whole reads it.
    pub fn finish(&mut self) -> Option<Event> {
        let rest = std::mem::take(&mut self.partial);
        parse(&String::from_utf8_lossy(&rest))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(text: &str) -> Event {
        Event::Line(ResultLine::parse(text).unwrap(), text.to_string())
    }

    #[test]
    fn lines_are_cut_only_at_newlines() {
        let mut l = Lines::default();
        assert_eq!(l.push(b"KTAP version 1\n# ue-beg"), vec![line("KTAP version 1")]);
        assert_eq!(l.push(b"in 1 a/b taint=0"), vec![]);
        assert_eq!(l.push(b"\n"), vec![line("# ue-begin 1 a/b taint=0")]);
        assert_eq!(l.push(b"ok 1 a/b # time_ms=2 taint=0"), vec![]);
        assert_eq!(l.finish(), Some(line("ok 1 a/b # time_ms=2 taint=0")));
        assert_eq!(l.finish(), None);
    }

    #[test]
    fn lines_are_cleaned_and_blank_ones_dropped() {
        let events = parse_all("KTAP version 1\r\n\x1b[0m1..1\r\nrandom noise\r\n\r\n  \n");
        assert_eq!(events, [line("KTAP version 1"), line("1..1"), Event::Garbage("random noise".into())]);
        assert_eq!(events[1].line(), Some(&ResultLine::Plan { count: 1 }));
        assert_eq!(events[2].line(), None);
    }
}
