//! The host's progress watchdog, sans-IO: fed the result channel's lines as they arrive and the
//! plan's deadlines, it says when the guest counts as hung (no progress within the running
//! scenario's deadline plus a grace), long before the whole-boot watchdog would; and, fed the
//! progress markers of a long step, when the running scenario stalls or crawls (`progress`).

use std::time::{Duration, Instant};

use protocol::ResultLine;

use crate::vm::progress::{Expected, Mark};

/// What the agent may take past a scenario's deadline before it reports on its own: the kill
/// grace for a stuck process, the evidence, the cleanup and its guard (the agent's
/// `KILL_GRACE` + `GUARD_SLACK`, 17 s), and a margin for the host.
pub const SCENARIO_GRACE: Duration = Duration::from_secs(30);
/// Between two scenarios (reaping, taint, the next `ue-begin`).
pub const BETWEEN: Duration = Duration::from_secs(30);
/// From the sentinel or `ue-abort` to QEMU's exit (virtio-fs syncs, the reboot).
pub const TO_EXIT: Duration = Duration::from_secs(20);

#[derive(Debug, Clone, PartialEq, Eq)]
enum Phase {
    /// Before the stream's first line: the boot timeout and the agent's start cover it.
    Starting,
    Running {
        index: usize,
        name: String,
    },
    Between {
        after: usize,
    },
    Ended,
}

/// The watchdog's view of one boot.
#[derive(Debug, Clone)]
pub struct Watch {
    deadlines_ms: Vec<u64>,
    startup: Duration,
    phase: Phase,
    since: Instant,
    /// The history's median for scenario `i + 1` at `[i]`, where it has one.
    expected: Vec<Option<Expected>>,
    /// The running scenario's latest progress marker.
    mark: Option<Mark>,
}

impl Watch {
    /// `deadlines_ms[i]` is scenario `i + 1`'s; `startup` bounds the time from QEMU's start to
    /// the stream's first line.
    pub fn new(deadlines_ms: Vec<u64>, startup: Duration, now: Instant) -> Watch {
        Watch { deadlines_ms, startup, phase: Phase::Starting, since: now, expected: Vec::new(), mark: None }
    }

    /// The history's medians, scenario by scenario as the deadlines are, for the crawl rule.
    pub fn with_expected(mut self, expected: Vec<Option<Expected>>) -> Watch {
        self.expected = expected;
        self
    }

    /// A progress marker of scenario `index` came on the console at `now`: kept while that
    /// scenario runs, dropped otherwise (a late line of one that ended).
    pub fn progress(&mut self, index: usize, done: u64, total: u64, elapsed_ms: u64, now: Instant) {
        if matches!(&self.phase, Phase::Running { index: running, .. } if *running == index) {
            self.mark = Some(Mark { done, total, elapsed_ms, at: now });
        }
    }

    /// A line arrived on the result channel.
    pub fn feed(&mut self, line: &ResultLine, now: Instant) {
        let phase = match line {
            ResultLine::Begin { index, name, .. } => Phase::Running { index: *index, name: name.clone() },
            ResultLine::End { index, .. } => Phase::Between { after: *index },
            ResultLine::Sentinel { .. } | ResultLine::Abort { .. } => Phase::Ended,
            ResultLine::Header | ResultLine::Plan { .. } => Phase::Between { after: 0 },
            // Output and results inside a scenario do not extend its budget.
            ResultLine::Result { .. } | ResultLine::Diag(_) | ResultLine::Metric { .. } | ResultLine::Gcov(_) => return,
        };
        if phase != self.phase {
            self.phase = phase;
            self.since = now;
            self.mark = None;
        }
    }

    /// Why the guest counts as hung at `now`, if it does.
    pub fn overdue(&self, now: Instant) -> Option<String> {
        let waited = now.saturating_duration_since(self.since);
        let (budget, what) = match &self.phase {
            Phase::Starting => (self.startup, "before the agent's first line on the result channel".to_string()),
            Phase::Running { index, name } => {
                let expected = self.expected.get(index - 1).and_then(Option::as_ref);
                if let Some(why) = self.mark.as_ref().and_then(|m| crate::vm::progress::judge(m, expected, now)) {
                    return Some(format!("scenario {index} ({name}) ended by its progress: {why}"));
                }
                let deadline = Duration::from_millis(self.deadlines_ms.get(index - 1).copied().unwrap_or(0));
                let what = format!(
                    "while scenario {index} ({name}) ran, {} s past its deadline of {} ms",
                    (waited.saturating_sub(deadline)).as_secs(),
                    deadline.as_millis()
                );
                (deadline + SCENARIO_GRACE, what)
            }
            Phase::Between { after: 0 } => (BETWEEN, "before the first scenario began".to_string()),
            Phase::Between { after } => (BETWEEN, format!("after scenario {after} ended")),
            Phase::Ended => (TO_EXIT, "after the end of the result stream (the VM did not power off)".to_string()),
        };
        (waited > budget).then(|| format!("no progress on the result channel for {} s {what}", waited.as_secs()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn begin(index: usize) -> ResultLine {
        ResultLine::Begin { index, name: format!("s/{index}"), taint: 0 }
    }

    #[test]
    fn a_running_scenario_gets_its_deadline_and_the_grace() {
        let t0 = Instant::now();
        let mut w = Watch::new(vec![10_000, 2_000], Duration::from_secs(60), t0);
        assert_eq!(w.overdue(t0 + Duration::from_secs(59)), None);
        assert!(w.overdue(t0 + Duration::from_secs(61)).unwrap().contains("before the agent's first line"));
        w.feed(&ResultLine::Header, t0);
        w.feed(&begin(1), t0);
        // Output does not extend the budget.
        w.feed(&ResultLine::Diag("x".into()), t0 + Duration::from_secs(30));
        assert_eq!(w.overdue(t0 + Duration::from_secs(39)), None);
        let why = w.overdue(t0 + Duration::from_secs(41)).unwrap();
        assert_eq!(
            why,
            "no progress on the result channel for 41 s while scenario 1 (s/1) ran, 31 s past its deadline of 10000 ms"
        );
        w.feed(&ResultLine::End { index: 1, taint: 0 }, t0 + Duration::from_secs(12));
        assert!(w.overdue(t0 + Duration::from_secs(43)).unwrap().ends_with("after scenario 1 ended"));
        w.feed(&begin(2), t0 + Duration::from_secs(13));
        assert_eq!(w.overdue(t0 + Duration::from_secs(44)), None);
        assert!(w.overdue(t0 + Duration::from_secs(46)).is_some());
        w.feed(&ResultLine::Abort { after: 2, reason: String::new() }, t0 + Duration::from_secs(14));
        assert_eq!(w.overdue(t0 + Duration::from_secs(33)), None);
        assert!(w.overdue(t0 + Duration::from_secs(35)).unwrap().contains("did not power off"));
    }

    /// Progress markers end the running scenario long before its deadline when they stop or
    /// crawl; a marker of another scenario, or after it ended, counts for nothing.
    #[test]
    fn progress_markers_end_a_scenario_that_stalls_or_crawls() {
        let s = Duration::from_secs;
        let t0 = Instant::now();
        let expected = Expected { median_ms: 52_000, arch: "x86_64".into() };
        let mut w = Watch::new(vec![600_000, 600_000], s(60), t0).with_expected(vec![Some(expected), None]);
        w.feed(&ResultLine::Header, t0);
        w.feed(&begin(1), t0);
        w.progress(2, 1024, 70_000, 41_000, t0 + s(41));
        assert_eq!(w.overdue(t0 + s(41)), None, "another scenario's marker");
        w.progress(1, 1024, 70_000, 1_000, t0 + s(1));
        assert_eq!(w.overdue(t0 + s(31)), None);
        let why = w.overdue(t0 + s(32)).unwrap();
        assert!(why.starts_with("scenario 1 (s/1) ended by its progress: no progress marker for 31 s"), "{why}");
        w.progress(1, 2048, 70_000, 41_000, t0 + s(41));
        let why = w.overdue(t0 + s(41)).unwrap();
        assert!(why.ends_with("its median on x86_64 in the history is 52 s: crawling"), "{why}");
        // The next scenario starts without a mark; one with no history only stalls.
        w.feed(&ResultLine::End { index: 1, taint: 0 }, t0 + s(42));
        w.progress(1, 3072, 70_000, 42_000, t0 + s(42));
        w.feed(&begin(2), t0 + s(42));
        assert_eq!(w.overdue(t0 + s(100)), None);
        w.progress(2, 1024, 70_000, 41_000, t0 + s(100));
        assert_eq!(w.overdue(t0 + s(130)), None);
        assert!(w.overdue(t0 + s(131)).unwrap().ends_with("stalled"));
    }
}
