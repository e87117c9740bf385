//! The lines the agent writes to `/dev/kmsg` around each scenario, so that the host's console
//! scanner can attribute a kernel report to the scenario that was running:
//! `ue-agent: begin INDEX NAME` before it starts, `ue-agent: end INDEX` after its result; and,
//! inside a long step, `ue-agent: progress INDEX DONE of TOTAL in MS ms` (the scenario, the step's count so far,
//! the most it may count, the time since it began), so that the host can tell a slow
//! scenario that still moves from one that crawls or has stopped. A host that does not know
//! the progress line reads it as any other kernel message.

/// The environment variable naming the kernel log a scenario's process writes its progress
/// markers to: the supervisor sets it in the guest only (on a host there are none).
pub const PROGRESS_KMSG_ENV: &str = "UE_AGENT_KMSG";
/// The environment variable with the scenario's index in the plan, for its progress markers.
pub const PROGRESS_INDEX_ENV: &str = "UE_AGENT_INDEX";

const BEGIN: &str = "ue-agent: begin ";
const END: &str = "ue-agent: end ";
const PROGRESS: &str = "ue-agent: progress ";

/// One scenario marker on the kernel log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Marker<'a> {
    Begin {
        index: usize,
        name: &'a str,
    },
    End {
        index: usize,
    },
    /// A long step's progress in scenario `index`: `done` of at most `total`, `elapsed_ms`
    /// since the step began.
    Progress {
        index: usize,
        done: u64,
        total: u64,
        elapsed_ms: u64,
    },
}

impl<'a> Marker<'a> {
    /// The kernel log message, without the printk prefix the console adds.
    pub fn line(&self) -> String {
        match self {
            Marker::Begin { index, name } => format!("{BEGIN}{index} {name}"),
            Marker::End { index } => format!("{END}{index}"),
            Marker::Progress { index, done, total, elapsed_ms } => {
                format!("{PROGRESS}{index} {done} of {total} in {elapsed_ms} ms")
            }
        }
    }

    /// Whether a message starts as a marker does (well formed or not).
    pub fn is_marker(msg: &str) -> bool {
        msg.starts_with(BEGIN) || msg.starts_with(END) || msg.starts_with(PROGRESS)
    }

    /// The progress marker anywhere in a console line (after its printk prefix); `None` for
    /// any other line, a malformed progress marker included.
    pub fn find_progress(line: &str) -> Option<Marker<'static>> {
        let at = line.find(PROGRESS)?;
        let words: Vec<&str> = line[at + PROGRESS.len()..].split_whitespace().collect();
        match words[..] {
            [index, done, "of", total, "in", ms, "ms", ..] => Some(Marker::Progress {
                index: index.parse().ok()?,
                done: done.parse().ok()?,
                total: total.parse().ok()?,
                elapsed_ms: ms.parse().ok()?,
            }),
            _ => None,
        }
    }

    /// A marker back from a message (its printk prefix removed); `None` for anything else,
    /// a malformed marker included (a begin without a name, an index that is not a number).
    pub fn parse(msg: &'a str) -> Option<Marker<'a>> {
        if msg.starts_with(PROGRESS) {
            return Marker::find_progress(msg);
        }
        if let Some(rest) = msg.strip_prefix(BEGIN) {
            let (index, name) = rest.split_once(' ')?;
            let name = name.trim();
            return (!name.is_empty()).then_some(Marker::Begin { index: index.parse().ok()?, name });
        }
        let index = msg.strip_prefix(END)?.split(' ').next()?.parse().ok()?;
        Some(Marker::End { index })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_round_trip() {
        for m in [Marker::Begin { index: 3, name: "abi/reg-basic" }, Marker::End { index: 12 }] {
            assert_eq!(Marker::parse(&m.line()), Some(m));
            assert!(Marker::is_marker(&m.line()));
        }
        assert_eq!(Marker::Begin { index: 1, name: "a/b" }.line(), "ue-agent: begin 1 a/b");
        assert_eq!(Marker::End { index: 1 }.line(), "ue-agent: end 1");
        assert_eq!(Marker::parse("ue-agent: end 7 extra"), Some(Marker::End { index: 7 }));
        for malformed in ["ue-agent: begin 3", "ue-agent: begin x a/b", "ue-agent: begin 3  ", "ue-agent: end x"] {
            assert!(Marker::is_marker(malformed));
            assert_eq!(Marker::parse(malformed), None, "{malformed}");
        }
        assert!(!Marker::is_marker("ue-agent: plan x86_64: 3 scenarios"));
    }

    #[test]
    fn progress_round_trips_and_is_found_after_a_prefix() {
        let m = Marker::Progress { index: 2, done: 1024, total: 70000, elapsed_ms: 4100 };
        assert_eq!(m.line(), "ue-agent: progress 2 1024 of 70000 in 4100 ms");
        assert_eq!(Marker::parse(&m.line()), Some(m));
        assert!(Marker::is_marker(&m.line()));
        assert_eq!(Marker::find_progress(&format!("[   41.5] {}", m.line())), Some(m));
        for malformed in ["ue-agent: progress 3", "ue-agent: progress 1 x of 2 in 3 ms", "ue-agent: progress 1 1 of 2"]
        {
            assert!(Marker::is_marker(malformed));
            assert_eq!(Marker::parse(malformed), None, "{malformed}");
        }
        assert_eq!(Marker::find_progress("ue-agent: begin 1 a/b"), None);
    }
}
