//! The result channel's events (`vm::channel`, each line parsed once as the boot read it)
//! folded into per-scenario records and checked for consistency. Sans-IO, and never panics: the
//! stream may be cut anywhere by a crash or a hang.

use std::collections::BTreeMap;

use protocol::gcov::GcovFrame;
use protocol::{Outcome, ResultLine};
use serde::Serialize;

use crate::vm::channel::Event;

/// One scenario's result, with what its `ue-begin` line said.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ScenarioRecord {
    pub index: usize,
    pub name: String,
    pub outcome: Outcome,
    pub time_ms: u64,
    /// From the scenario's `ue-begin`; `None` when its result came without one.
    pub taint_before: Option<u64>,
    /// From the result line.
    pub taint_after: u64,
    /// The `# SKIP` reason.
    pub reason: String,
    /// The `#` lines between its `ue-begin` and its result.
    pub diagnostics: Vec<String>,
    /// The figures it measured (`# ue-metric` lines), in stream order.
    pub metrics: Vec<protocol::Metric>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Sentinel {
    pub total: usize,
    pub passed: usize,
    pub failed: usize,
    pub skipped: usize,
    pub timeout: usize,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Stream {
    pub header_seen: bool,
    /// The `1..N` count.
    pub plan: Option<usize>,
    /// In stream order.
    pub scenarios: Vec<ScenarioRecord>,
    /// A scenario begun without a result: the stream was cut while it ran.
    pub running: Option<(usize, String)>,
    /// The running scenario's taint from its `ue-begin`, and its diagnostics so far.
    pub running_taint: Option<u64>,
    pub running_diagnostics: Vec<String>,
    /// Only present when the agent finished; its absence means a crash, a hang or a cut.
    pub sentinel: Option<Sentinel>,
    /// `ue-abort`: the agent gave up the plan after this scenario (0: before any), and why.
    pub aborted: Option<(usize, String)>,
    /// `#` lines outside any scenario: the agent's own.
    pub diagnostics: Vec<String>,
    /// Non-blank lines that are not part of the protocol.
    pub garbage: usize,
    /// Inconsistencies, one sentence each.
    pub problems: Vec<String>,
    /// A coverage kernel's `# ue-gcov` frames, in stream order (for `coverage/`, not the verdict).
    #[serde(skip)]
    pub gcov: Vec<GcovFrame>,
    /// The name each `ue-begin` line gave its index (the last, when one came twice).
    #[serde(skip)]
    pub begun: BTreeMap<usize, String>,
}

impl Stream {
    pub fn record(&self, index: usize) -> Option<&ScenarioRecord> {
        self.scenarios.iter().find(|r| r.index == index)
    }
}

struct Begun {
    index: usize,
    name: String,
    taint: u64,
    diagnostics: Vec<String>,
    metrics: Vec<protocol::Metric>,
}

/// Reads a result channel capture from its text (a recorded `results.ktap`), through the
/// channel's one parser.
pub fn read(text: &str) -> Stream {
    fold(crate::vm::channel::parse_all(text))
}

/// Folds a boot's channel events, in order.
pub fn fold(events: Vec<Event>) -> Stream {
    let mut r = Reader::default();
    let mut protocol_lines = 0;
    for event in events {
        let (parsed, line) = match event {
            Event::Line(parsed, line) => (parsed, line),
            Event::Garbage(_) => {
                r.s.garbage += 1;
                continue;
            }
        };
        protocol_lines += 1;
        if r.s.sentinel.is_some() || r.s.aborted.is_some() {
            r.s.problems.push(format!("protocol line after the end of the stream: {line}"));
        }
        if protocol_lines == 1 && parsed != ResultLine::Header {
            r.s.problems.push("the stream does not start with `KTAP version 1`".to_string());
        }
        r.line(parsed);
    }
    let mut s = r.s;
    if let Some(b) = r.begun {
        s.running = Some((b.index, b.name));
        s.running_taint = Some(b.taint);
        s.running_diagnostics = b.diagnostics;
    }
    s
}

/// The stream read so far, and the scenario begun and not yet ended at this point of it.
#[derive(Default)]
struct Reader {
    s: Stream,
    begun: Option<Begun>,
    last_begun: usize,
}

impl Reader {
    /// One protocol line, checked against those before it.
    fn line(&mut self, parsed: ResultLine) {
        let s = &mut self.s;
        match parsed {
            ResultLine::Header => {
                if s.header_seen {
                    s.problems.push("second `KTAP version 1` line".to_string());
                }
                s.header_seen = true;
            }
            ResultLine::Plan { count } => {
                if let Some(old) = s.plan {
                    s.problems.push(format!("second plan line 1..{count} after 1..{old}"));
                }
                s.plan = Some(count);
            }
            ResultLine::Begin { index, name, taint } => {
                s.begun.insert(index, name.clone());
                self.begin(index, name, taint)
            }
            ResultLine::Result { index, name, outcome, time_ms, taint, reason } => {
                self.result(index, name, outcome, time_ms, taint, reason)
            }
            ResultLine::End { index, .. } => {
                if self.begun.as_ref().is_some_and(|b| b.index == index) {
                    s.problems.push(format!("scenario {index} ended without a result"));
                } else if s.record(index).is_none() {
                    s.problems.push(format!("ue-end for scenario {index}, which has no result"));
                }
            }
            ResultLine::Sentinel { total, passed, failed, skipped, timeout } => {
                if s.sentinel.is_some() {
                    s.problems.push("second sentinel".to_string());
                }
                if let Some(b) = self.begun.take() {
                    s.problems.push(format!("sentinel while scenario {} ({}) still ran", b.index, b.name));
                }
                let sentinel = Sentinel { total, passed, failed, skipped, timeout };
                check_sentinel(s, &sentinel);
                s.sentinel = Some(sentinel);
            }
            ResultLine::Abort { after, reason } => {
                if s.sentinel.is_some() {
                    s.problems.push("ue-abort after the sentinel".to_string());
                }
                s.aborted = Some((after, reason));
            }
            ResultLine::Metric { index, metric } => match &mut self.begun {
                Some(b) if b.index == index => {
                    if b.metrics.iter().any(|m| m.name == metric.name) {
                        s.problems.push(format!("scenario {index} measured {} twice", metric.name));
                    }
                    b.metrics.push(metric);
                }
                _ => s.problems.push(format!("metric {} for scenario {index}, which is not running", metric.name)),
            },
            ResultLine::Diag(text) => match &mut self.begun {
                Some(b) => b.diagnostics.push(text),
                None => s.diagnostics.push(text),
            },
            // A coverage kernel's counters: read by `coverage/`, not part of the verdict.
            ResultLine::Gcov(frame) => s.gcov.push(frame),
        }
    }

    /// `ue-begin`: a scenario starts, in order, once, after the one before it ended.
    fn begin(&mut self, index: usize, name: String, taint: u64) {
        let s = &mut self.s;
        if let Some(b) = self.begun.take() {
            s.problems.push(format!("scenario {} ({}) began but has no result", b.index, b.name));
        }
        if s.record(index).is_some() || index <= self.last_begun {
            s.problems.push(format!("scenario {index} ({name}) began again"));
        } else if index != self.last_begun + 1 {
            let expected = self.last_begun + 1;
            s.problems.push(format!("scenario {index} ({name}) began out of order (expected {expected})"));
        }
        self.last_begun = self.last_begun.max(index);
        self.begun = Some(Begun { index, name, taint, diagnostics: Vec::new(), metrics: Vec::new() });
    }

    /// A scenario's result: recorded with what it said and measured since its `ue-begin`.
    fn result(&mut self, index: usize, name: String, outcome: Outcome, time_ms: u64, taint: u64, reason: String) {
        let s = &mut self.s;
        if s.record(index).is_some() {
            s.problems.push(format!("duplicate result for scenario {index} ({name})"));
        }
        self.last_begun = self.last_begun.max(index);
        let (taint_before, diagnostics, metrics) = match self.begun.take() {
            Some(b) if b.index == index => {
                if b.name != name {
                    s.problems.push(format!("scenario {index} began as {} but its result names {name}", b.name));
                }
                (Some(b.taint), b.diagnostics, b.metrics)
            }
            other => {
                if let Some(b) = other {
                    s.problems.push(format!("scenario {} ({}) began but has no result", b.index, b.name));
                }
                s.problems.push(format!("result for scenario {index} ({name}) without its ue-begin"));
                (None, Vec::new(), Vec::new())
            }
        };
        s.scenarios.push(ScenarioRecord {
            index,
            name,
            outcome,
            time_ms,
            taint_before,
            taint_after: taint,
            reason,
            diagnostics,
            metrics,
        });
    }
}

fn check_sentinel(s: &mut Stream, sentinel: &Sentinel) {
    let count = |o: Outcome| s.scenarios.iter().filter(|r| r.outcome == o).count();
    let counted = [
        ("total", sentinel.total, s.scenarios.len()),
        ("passed", sentinel.passed, count(Outcome::Pass)),
        ("failed", sentinel.failed, count(Outcome::Fail)),
        ("skipped", sentinel.skipped, count(Outcome::Skip)),
        ("timeout", sentinel.timeout, count(Outcome::Timeout)),
    ];
    let mut problems: Vec<String> = counted
        .iter()
        .filter(|(_, said, seen)| said != seen)
        .map(|(what, said, seen)| format!("the sentinel says {what}={said}, the stream has {seen}"))
        .collect();
    if let Some(plan) = s.plan {
        if plan != s.scenarios.len() {
            problems.push(format!("the plan announced {plan} scenarios, the stream has {} results", s.scenarios.len()));
        }
    }
    s.problems.extend(problems);
}

#[cfg(test)]
mod tests {
    use super::*;

    const PASS: &str = include_str!("../../test_data/ktap/pass.ktap");
    const FAIL: &str = include_str!("../../test_data/ktap/fail.ktap");
    const SKIP: &str = include_str!("../../test_data/ktap/skip.ktap");
    const TIMEOUT: &str = include_str!("../../test_data/ktap/timeout.ktap");
    const TRUNCATED: &str = include_str!("../../test_data/ktap/truncated.ktap");
    const BAD_SENTINEL: &str = include_str!("../../test_data/ktap/bad-sentinel.ktap");
    const WARN: &str = include_str!("../../test_data/ktap/warn.ktap");

    /// (index, name, outcome, taint_before, taint_after)
    type Expected<'a> = (usize, &'a str, Outcome, Option<u64>, u64);

    fn check(fixture: &str, expected: &[Expected], problems: &[&str]) -> Stream {
        let s = read(fixture);
        let got: Vec<Expected> =
            s.scenarios.iter().map(|r| (r.index, r.name.as_str(), r.outcome, r.taint_before, r.taint_after)).collect();
        assert_eq!(got, expected);
        assert_eq!(s.problems, problems);
        s
    }

    #[test]
    fn pass() {
        let s = check(
            PASS,
            &[
                (1, "abi/register", Outcome::Pass, Some(0), 0),
                (2, "abi/write", Outcome::Pass, Some(0), 0),
                (3, "abi/enable", Outcome::Pass, Some(0), 0),
            ],
            &[],
        );
        assert!(s.header_seen);
        assert_eq!(s.plan, Some(3));
        assert_eq!(s.running, None);
        assert_eq!(s.sentinel, Some(Sentinel { total: 3, passed: 3, failed: 0, skipped: 0, timeout: 0 }));
        assert_eq!(s.scenarios[0].diagnostics, ["registered \"ue_test u32 count\" at write index 0"]);
        assert_eq!(s.scenarios[0].time_ms, 14);
        assert_eq!(s.diagnostics, ["ue-agent 0.0.0, plan x86_64"]);
        assert_eq!(s.garbage, 0);
    }

    #[test]
    fn fail() {
        let s = check(
            FAIL,
            &[
                (1, "abi/register", Outcome::Pass, Some(0), 0),
                (2, "abi/write", Outcome::Fail, Some(0), 0),
                (3, "abi/enable", Outcome::Pass, Some(0), 0),
            ],
            &[],
        );
        assert_eq!(
            s.scenarios[1].diagnostics,
            [
                "step 2: exec /usr/libexec/ue/ue-probe write 8: exit status 139, expected 0",
                "ue-probe: killed by SIGSEGV"
            ]
        );
        assert_eq!(s.garbage, 1);
    }

    #[test]
    fn skip() {
        let s = check(
            SKIP,
            &[
                (1, "abi/register", Outcome::Pass, Some(0), 0),
                (2, "abi/write", Outcome::Pass, Some(0), 0),
                (3, "abi/enable", Outcome::Skip, Some(0), 0),
            ],
            &[],
        );
        assert_eq!(s.scenarios[2].reason, "no perf_event_open in this kernel");
    }

    #[test]
    fn timeout() {
        let s = check(
            TIMEOUT,
            &[
                (1, "abi/register", Outcome::Pass, Some(0), 0),
                (2, "abi/write", Outcome::Timeout, Some(0), 0),
                (3, "abi/enable", Outcome::Pass, Some(0), 0),
            ],
            &[],
        );
        assert_eq!(s.scenarios[1].time_ms, 5000);
        assert_eq!(s.sentinel.map(|x| x.timeout), Some(1));
    }

    #[test]
    fn truncated_after_begin() {
        let s = check(TRUNCATED, &[(1, "abi/register", Outcome::Pass, Some(0), 0)], &[]);
        assert_eq!(s.running, Some((2, "fault/panic".to_string())));
        assert_eq!(s.running_taint, Some(0));
        assert_eq!(s.running_diagnostics, ["step 1: lkdtm PANIC via /sys/kernel/debug/provoke-crash/DIRECT"]);
        assert_eq!((s.plan, s.sentinel), (Some(4), None));
    }

    #[test]
    fn bad_sentinel_counts() {
        check(
            BAD_SENTINEL,
            &[
                (1, "abi/register", Outcome::Pass, Some(0), 0),
                (2, "abi/write", Outcome::Fail, Some(0), 0),
                (3, "abi/enable", Outcome::Pass, Some(0), 0),
            ],
            &["the sentinel says passed=3, the stream has 2", "the sentinel says failed=0, the stream has 1"],
        );
    }

    #[test]
    fn taint_is_read_from_begin_and_result() {
        let s = check(
            WARN,
            &[
                (1, "abi/register", Outcome::Pass, Some(0), 0),
                (2, "abi/write", Outcome::Pass, Some(0), 512),
                (3, "abi/enable", Outcome::Pass, Some(512), 512),
            ],
            &[],
        );
        assert!(s.sentinel.is_some());
    }

    #[test]
    fn inconsistencies_are_problems() {
        let text = "\
1..3
KTAP version 1
# ue-begin 2 a/b taint=0
ok 2 a/b # time_ms=1 taint=0
ok 3 a/c # time_ms=1 taint=0
# ue-begin 2 a/b taint=0
ok 2 a/x # time_ms=1 taint=0
# ue-end 5 taint=0
# ue-sentinel total=3 passed=3 failed=0 skipped=0 timeout=0
ok 4 a/d # time_ms=1 taint=0
";
        let s = read(text);
        assert_eq!(
            s.problems,
            [
                "the stream does not start with `KTAP version 1`",
                "scenario 2 (a/b) began out of order (expected 1)",
                "result for scenario 3 (a/c) without its ue-begin",
                "scenario 2 (a/b) began again",
                "duplicate result for scenario 2 (a/x)",
                "scenario 2 began as a/b but its result names a/x",
                "ue-end for scenario 5, which has no result",
                "protocol line after the end of the stream: ok 4 a/d # time_ms=1 taint=0",
                "result for scenario 4 (a/d) without its ue-begin",
            ]
        );
        assert_eq!(s.scenarios.len(), 4);
        assert_eq!(s.scenarios[1].taint_before, None);
    }

    #[test]
    fn metrics_belong_to_the_running_scenario() {
        let text = "KTAP version 1\n1..2\n# ue-begin 1 perf/w taint=0\n# step 1: measured\n\
            # ue-metric 1 w value=10.5 unit=events/s better=higher samples=10,10.5,11\n\
            # ue-metric 1 w.ratio value=2 unit=x better=lower samples=2\n\
            # ue-metric 1 w.ratio value=2 unit=x better=lower samples=2\n\
            ok 1 perf/w # time_ms=5 taint=0\n# ue-end 1 taint=0\n\
            # ue-metric 2 stray value=1 unit=ns better=lower samples=\n\
            # ue-begin 2 perf/x taint=0\n# ue-metric 1 late value=1 unit=ns better=lower samples=\n\
            ok 2 perf/x # time_ms=5 taint=0\n# ue-end 2 taint=0\n\
            # ue-sentinel total=2 passed=2 failed=0 skipped=0 timeout=0\n";
        let s = read(text);
        let w = &s.scenarios[0];
        assert_eq!(w.diagnostics, ["step 1: measured"], "figures are not diagnostics");
        let names: Vec<&str> = w.metrics.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, ["w", "w.ratio", "w.ratio"]);
        assert_eq!((w.metrics[0].value, w.metrics[0].samples.len(), w.metrics[0].higher_is_better), (10.5, 3, true));
        assert!(s.scenarios[1].metrics.is_empty());
        assert_eq!(
            s.problems,
            [
                "scenario 1 measured w.ratio twice",
                "metric stray for scenario 2, which is not running",
                "metric late for scenario 1, which is not running"
            ]
        );
    }

    /// A coverage kernel's frames are kept for `coverage/`, with the names their indexes began as.
    #[test]
    fn frames_are_kept_with_the_scenarios_names() {
        let mut ktap = String::from("KTAP version 1\n1..2\n# ue-begin 1 s/one taint=0\n");
        for f in protocol::gcov::GcovFrame::split(1, "a.c", b"adcg*22B") {
            ktap.push_str(&(f.format() + "\n"));
        }
        ktap.push_str("ok 1 s/one # time_ms=1 taint=0\n# ue-end 1 taint=0\n");
        let s = read(&ktap);
        assert_eq!(s.begun[&1], "s/one");
        let snaps = protocol::gcov::assemble(&s.gcov);
        assert_eq!(snaps[&(1, "a.c".to_string())].as_ref().unwrap(), b"adcg*22B");
        assert!(s.scenarios[0].diagnostics.is_empty(), "frames are not diagnostics");
    }

    #[test]
    fn cr_ansi_and_garbage() {
        let s = read("KTAP version 1\r\n\x1b[0m1..1\r\nrandom noise\r\n\r\n# ue-begin 1 a/b taint=0\r\nok 1 a/b # time_ms=2 taint=0\r\n");
        assert_eq!((s.header_seen, s.plan, s.garbage), (true, Some(1), 1));
        assert_eq!(s.scenarios[0].outcome, Outcome::Pass);
        assert!(s.problems.is_empty(), "{:?}", s.problems);
    }

    #[test]
    fn every_prefix_parses_and_has_no_sentinel_before_the_last_line() {
        for fixture in [PASS, FAIL, SKIP, TIMEOUT, BAD_SENTINEL, WARN] {
            // The sentinel is the last line and its last count has one digit, so only the whole
            // line parses as a sentinel.
            let complete = fixture.trim_end().len();
            for (cut, _) in fixture.char_indices() {
                let s = read(&fixture[..cut]);
                if cut < complete {
                    assert_eq!(s.sentinel, None, "prefix of {cut} bytes");
                }
                assert!(s.scenarios.len() <= 3);
            }
            assert!(read(fixture).sentinel.is_some());
        }
    }

    #[test]
    fn scrambled_input_never_panics() {
        let lines: Vec<&str> =
            PASS.lines().chain(TIMEOUT.lines()).chain(["ok", "not ok 1", "# ue-begin x", "1..", "#"]).collect();
        // A fixed xorshift so that a failure reproduces.
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..300 {
            let mut text = String::new();
            for _ in 0..(x % 20) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let line = lines[(x % lines.len() as u64) as usize];
                let cut = (x >> 32) as usize % (line.len() + 1);
                text.push_str(if x & 1 == 0 { line } else { line.get(..cut).unwrap_or(line) });
                text.push('\n');
            }
            x ^= x << 13;
            let _ = read(&text);
        }
    }
}
