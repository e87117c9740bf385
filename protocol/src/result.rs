//! The result channel: the KTAP lines the agent writes on the `ue.results` port (`ResultLine`),
//! the figures scenarios measure (`Metric`), and the lines of a scenario's own output the host
//! reads back (a step's line, an `exec` step's exit status).

use serde::{Deserialize, Serialize};

use crate::EXIT_SKIP;

/// How a scenario ended, as the agent reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Pass,
    Fail,
    Skip,
    Timeout,
}

/// One line on the result channel. The stream is KTAP v1: a header, a plan line, one
/// result line per scenario, and `#` diagnostic lines; the `ue-` diagnostics frame each
/// scenario and end the stream, so the host can tell a crash from a clean end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResultLine {
    /// `KTAP version 1`
    Header,
    /// `1..N`
    Plan { count: usize },
    /// `# ue-begin INDEX NAME taint=T`
    Begin { index: usize, name: String, taint: u64 },
    /// `ok INDEX NAME # time_ms=D taint=T` and its `not ok`, `# SKIP`, `# TIMEOUT` forms.
    Result { index: usize, name: String, outcome: Outcome, time_ms: u64, taint: u64, reason: String },
    /// `# ue-end INDEX taint=T`
    End { index: usize, taint: u64 },
    /// `# ue-sentinel total=N passed=P failed=F skipped=S timeout=T`
    Sentinel { total: usize, passed: usize, failed: usize, skipped: usize, timeout: usize },
    /// Any other `# ...` line: a scenario's own output.
    Diag(String),
    /// `# ue-metric INDEX NAME value=V unit=U better=higher|lower samples=a,b,c`: a figure the
    /// scenario measured (the supervisor turns its child's `ue-metric NAME ...` lines into it).
    Metric { index: usize, metric: Metric },
    /// `# ue-abort after=INDEX REASON`: the agent gives up the rest of the plan after scenario
    /// INDEX (0: before any) because the kernel is no longer usable (a process stuck in the
    /// kernel, the supervisor itself blocked). It ends the stream in place of the sentinel; the
    /// host runs the scenarios after INDEX in a fresh boot.
    Abort { after: usize, reason: String },
    /// `# ue-gcov INDEX FILE PART/PARTS DATA`: a piece of scenario INDEX's GCOV counters
    /// (`crate::gcov`), on a coverage kernel only. Not a scenario's output: never a `Diag`.
    Gcov(crate::gcov::GcovFrame),
}

/// The median of samples, the mean of the middle two for an even count (NaN for none): a
/// figure's value, as the agent reports it and as the host pools repeats' samples.
pub fn median(samples: &[f64]) -> f64 {
    let mut s = samples.to_vec();
    s.sort_by(f64::total_cmp);
    match s.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => s[n / 2],
        n => (s[n / 2 - 1] + s[n / 2]) / 2.0,
    }
}

/// A measured figure: the median `value` of its `samples`. Values are finite (the parser
/// refuses NaN and infinities), which is what makes the `Eq` below sound.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Metric {
    /// `[A-Za-z0-9_.-]+`.
    pub name: String,
    pub value: f64,
    /// `events/s`, `ns`, `us`, `x` (a ratio); no spaces.
    pub unit: String,
    pub higher_is_better: bool,
    pub samples: Vec<f64>,
}

impl Eq for Metric {}

/// What a scenario prints on its output for the supervisor to report as a [`ResultLine::Metric`].
pub const METRIC_PREFIX: &str = "ue-metric ";

impl Metric {
    /// `NAME value=V unit=U better=higher samples=a,b,c` (f64 `Display` reads back exactly).
    pub fn body(&self) -> String {
        let samples: Vec<String> = self.samples.iter().map(f64::to_string).collect();
        let better = if self.higher_is_better { "higher" } else { "lower" };
        format!("{} value={} unit={} better={better} samples={}", self.name, self.value, self.unit, samples.join(","))
    }

    pub fn parse_body(text: &str) -> Option<Metric> {
        let f: Vec<&str> = text.split(' ').collect();
        let [name, value, unit, better, samples] = f[..] else { return None };
        let name_ok = |n: &str| !n.is_empty() && n.bytes().all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b));
        let number = |t: &str| t.parse::<f64>().ok().filter(|v| v.is_finite());
        let value = number(value.strip_prefix("value=")?)?;
        let unit = unit.strip_prefix("unit=")?;
        let higher_is_better = match better.strip_prefix("better=")? {
            "higher" => true,
            "lower" => false,
            _ => return None,
        };
        let samples = match samples.strip_prefix("samples=")? {
            "" => vec![],
            list => list.split(',').map(number).collect::<Option<Vec<f64>>>()?,
        };
        if !name_ok(name) || unit.is_empty() {
            return None;
        }
        Some(Metric { name: name.to_string(), value, unit: unit.to_string(), higher_is_better, samples })
    }

    /// A scenario's output line `ue-metric NAME ...`, if it is one.
    pub fn from_output(line: &str) -> Option<Metric> {
        Metric::parse_body(line.strip_prefix(METRIC_PREFIX)?)
    }
}

impl ResultLine {
    pub fn format(&self) -> String {
        match self {
            ResultLine::Header => "KTAP version 1".to_string(),
            ResultLine::Plan { count } => format!("1..{count}"),
            ResultLine::Begin { index, name, taint } => format!("# ue-begin {index} {name} taint={taint}"),
            ResultLine::Result { index, name, outcome, time_ms, taint, reason } => {
                let (ok, directive) = match outcome {
                    Outcome::Pass => ("ok", String::new()),
                    Outcome::Fail => ("not ok", String::new()),
                    Outcome::Skip => ("ok", format!("SKIP {reason}").trim_end().to_string() + " "),
                    Outcome::Timeout => ("not ok", "TIMEOUT ".to_string()),
                };
                format!("{ok} {index} {name} # {directive}time_ms={time_ms} taint={taint}")
            }
            ResultLine::End { index, taint } => format!("# ue-end {index} taint={taint}"),
            ResultLine::Sentinel { total, passed, failed, skipped, timeout } => format!(
                "# ue-sentinel total={total} passed={passed} failed={failed} skipped={skipped} timeout={timeout}"
            ),
            ResultLine::Diag(text) => format!("# {text}"),
            ResultLine::Metric { index, metric } => format!("# {METRIC_PREFIX}{index} {}", metric.body()),
            ResultLine::Abort { after, reason } => format!("# ue-abort after={after} {reason}"),
            ResultLine::Gcov(frame) => frame.format(),
        }
    }

    /// Parses one line (without its newline; a trailing `\r` is ignored). `None` for a line
    /// that is not part of the protocol.
    pub fn parse(line: &str) -> Option<ResultLine> {
        let line = line.trim_end_matches(['\r', '\n']);
        if line == "KTAP version 1" {
            return Some(ResultLine::Header);
        }
        if let Some(n) = line.strip_prefix("1..") {
            return n.parse().ok().map(|count| ResultLine::Plan { count });
        }
        if let Some(rest) = line.strip_prefix("# ue-begin ") {
            let mut it = rest.split(' ');
            let index = it.next()?.parse().ok()?;
            let name = it.next()?.to_string();
            let taint = kv(it.next()?, "taint")?;
            return Some(ResultLine::Begin { index, name, taint });
        }
        if let Some(rest) = line.strip_prefix("# ue-end ") {
            let mut it = rest.split(' ');
            let index = it.next()?.parse().ok()?;
            let taint = kv(it.next()?, "taint")?;
            return Some(ResultLine::End { index, taint });
        }
        if let Some(rest) = line.strip_prefix("# ue-sentinel ") {
            let f: Vec<&str> = rest.split(' ').collect();
            if f.len() != 5 {
                return None;
            }
            return Some(ResultLine::Sentinel {
                total: kv(f[0], "total")? as usize,
                passed: kv(f[1], "passed")? as usize,
                failed: kv(f[2], "failed")? as usize,
                skipped: kv(f[3], "skipped")? as usize,
                timeout: kv(f[4], "timeout")? as usize,
            });
        }
        if let Some(rest) = line.strip_prefix("# ue-abort ") {
            let (after, reason) = rest.split_once(' ').unwrap_or((rest, ""));
            if let Some(after) = kv(after, "after") {
                return Some(ResultLine::Abort { after: after as usize, reason: reason.to_string() });
            }
        }
        if let Some(rest) = line.strip_prefix("# ue-metric ") {
            let parsed = rest.split_once(' ').and_then(|(index, body)| Some((index.parse().ok()?, body)));
            if let Some(metric) = parsed.and_then(|(index, body)| Some((index, Metric::parse_body(body)?))) {
                return Some(ResultLine::Metric { index: metric.0, metric: metric.1 });
            }
        }
        if let Some(frame) = crate::gcov::GcovFrame::parse(line) {
            return Some(ResultLine::Gcov(frame));
        }
        if let Some(text) = line.strip_prefix("# ") {
            return Some(ResultLine::Diag(text.to_string()));
        }
        if line == "#" {
            return Some(ResultLine::Diag(String::new()));
        }
        let (ok, rest) = if let Some(r) = line.strip_prefix("not ok ") {
            (false, r)
        } else if let Some(r) = line.strip_prefix("ok ") {
            (true, r)
        } else {
            return None;
        };
        let (head, directive) = rest.split_once(" # ")?;
        let (index, name) = head.split_once(' ')?;
        let index = index.parse().ok()?;
        let words: Vec<&str> = directive.split(' ').collect();
        let n = words.len();
        if n < 2 {
            return None;
        }
        let time_ms = kv(words[n - 2], "time_ms")?;
        let taint = kv(words[n - 1], "taint")?;
        let (outcome, reason) = match (ok, words[0]) {
            (true, "SKIP") => (Outcome::Skip, words[1..n - 2].join(" ")),
            (false, "TIMEOUT") => (Outcome::Timeout, String::new()),
            (true, _) => (Outcome::Pass, String::new()),
            (false, _) => (Outcome::Fail, String::new()),
        };
        Some(ResultLine::Result { index, name: name.to_string(), outcome, time_ms, taint, reason })
    }
}

fn kv(word: &str, key: &str) -> Option<u64> {
    word.strip_prefix(key)?.strip_prefix('=')?.parse().ok()
}

/// A line a step writes on its scenario's output: `step N: TEXT`, after the nesting of the
/// steps that ran it (`fork NAME `, `thread `, `exec `; empty at the top). Steps number from 1
/// at each level.
pub fn step_line(nesting: &str, n: usize, text: &str) -> String {
    format!("{nesting}step {n}: {text}")
}

/// The text of top-level step `n`'s line, if `line` is one.
pub fn step_text(line: &str, n: usize) -> Option<&str> {
    line.strip_prefix("step ")?.strip_prefix(n.to_string().as_str())?.strip_prefix(": ")
}

/// How the program of an `exec` step ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitStatus {
    /// It exited with this status.
    Code(i32),
    /// This signal killed it.
    Signal(i32),
}

impl ExitStatus {
    /// As a shell gives it: the status, or 128 + the signal.
    pub fn shell_code(self) -> u8 {
        match self {
            ExitStatus::Code(c) => c as u8,
            ExitStatus::Signal(s) => 128u8.saturating_add(s as u8),
        }
    }
}

/// An `exec` step's line once its program ended, which `cargo xtask exec` reads the program's
/// status back from: `exec ARGV: exit 3 (expected 0)`, `exec ARGV: exit 4 (skip; expected 0)`
/// (the kselftest skip status when it was not the expected one), `exec ARGV: killed by signal 9
/// (expected exit 0)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecEnd {
    /// The argv, joined by spaces.
    pub command: String,
    pub status: ExitStatus,
    pub expect_exit: i32,
}

impl ExecEnd {
    pub fn line(&self) -> String {
        let (command, expect) = (&self.command, self.expect_exit);
        match self.status {
            ExitStatus::Code(code) if code == EXIT_SKIP && code != expect => {
                format!("exec {command}: exit {code} (skip; expected {expect})")
            }
            ExitStatus::Code(code) => format!("exec {command}: exit {code} (expected {expect})"),
            ExitStatus::Signal(signal) => format!("exec {command}: killed by signal {signal} (expected exit {expect})"),
        }
    }

    /// The line back; `None` for any other line (an `exec` that could not start, say).
    pub fn parse(line: &str) -> Option<ExecEnd> {
        let (command, end) = line.strip_prefix("exec ")?.rsplit_once(": ")?;
        let number = |t: &str| t.parse::<i32>().ok();
        let (status, expect_exit) = if let Some(rest) = end.strip_prefix("exit ") {
            let (code, rest) = rest.split_once(' ')?;
            let expect = rest.strip_prefix("(skip; expected ").or_else(|| rest.strip_prefix("(expected "))?;
            (ExitStatus::Code(number(code)?), number(expect.strip_suffix(')')?)?)
        } else {
            let (signal, rest) = end.strip_prefix("killed by signal ")?.split_once(' ')?;
            let expect = rest.strip_prefix("(expected exit ")?.strip_suffix(')')?;
            (ExitStatus::Signal(number(signal)?), number(expect)?)
        };
        Some(ExecEnd { command: command.to_string(), status, expect_exit })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_line_round_trips() {
        let lines = [
            ResultLine::Header,
            ResultLine::Plan { count: 3 },
            ResultLine::Begin { index: 1, name: "boot/empty".into(), taint: 0 },
            ResultLine::Diag("write returned 0".into()),
            ResultLine::Result {
                index: 1,
                name: "boot/empty".into(),
                outcome: Outcome::Pass,
                time_ms: 3,
                taint: 0,
                reason: String::new(),
            },
            ResultLine::Result {
                index: 2,
                name: "a/b".into(),
                outcome: Outcome::Skip,
                time_ms: 0,
                taint: 512,
                reason: "no perf".into(),
            },
            ResultLine::Result {
                index: 3,
                name: "a/c".into(),
                outcome: Outcome::Timeout,
                time_ms: 5000,
                taint: 0,
                reason: String::new(),
            },
            ResultLine::Result {
                index: 4,
                name: "a/d".into(),
                outcome: Outcome::Fail,
                time_ms: 1,
                taint: 0,
                reason: String::new(),
            },
            ResultLine::End { index: 1, taint: 512 },
            ResultLine::Metric {
                index: 2,
                metric: Metric {
                    name: "write_256_ftrace.ratio".into(),
                    value: 2.5,
                    unit: "x".into(),
                    higher_is_better: false,
                    samples: vec![2.25, 2.5, 0.1 + 0.2, 1e-9, 123456.789],
                },
            },
            ResultLine::Metric {
                index: 3,
                metric: Metric {
                    name: "n".into(),
                    value: 0.0,
                    unit: "ns".into(),
                    higher_is_better: true,
                    samples: vec![],
                },
            },
            ResultLine::Sentinel { total: 3, passed: 1, failed: 1, skipped: 1, timeout: 0 },
            ResultLine::Abort { after: 7, reason: "pid 80 is stuck in the kernel (D state)".into() },
            ResultLine::Abort { after: 0, reason: String::new() },
        ];
        for l in lines {
            let text = l.format();
            assert_eq!(ResultLine::parse(&text), Some(l.clone()), "{text}");
            assert_eq!(ResultLine::parse(&format!("{text}\r")), Some(l), "with CR");
        }
    }

    #[test]
    fn formats_are_ktap() {
        let skip = ResultLine::Result {
            index: 2,
            name: "a/b".into(),
            outcome: Outcome::Skip,
            time_ms: 0,
            taint: 0,
            reason: "no perf".into(),
        };
        assert_eq!(skip.format(), "ok 2 a/b # SKIP no perf time_ms=0 taint=0");
        assert_eq!(ResultLine::parse("[    1.234] random console"), None);
        assert_eq!(ResultLine::parse("ok 1 x"), None, "a result line without our fields is not ours");
    }

    #[test]
    fn metric_lines_parse_strictly() {
        let m =
            ResultLine::parse("# ue-metric 4 write_0_none value=125000 unit=events/s better=higher samples=1,2.5,3");
        let Some(ResultLine::Metric { index: 4, metric }) = m else { panic!("{m:?}") };
        assert_eq!((metric.name.as_str(), metric.value, metric.unit.as_str()), ("write_0_none", 125000.0, "events/s"));
        assert!(metric.higher_is_better);
        assert_eq!(metric.samples, [1.0, 2.5, 3.0]);
        assert_eq!(Metric::from_output(&format!("ue-metric {}", metric.body())), Some(metric));
        // Anything malformed is an ordinary diagnostic, never a figure.
        for bad in [
            "# ue-metric x name value=1 unit=ns better=lower samples=",
            "# ue-metric 1 a value=NaN unit=ns better=lower samples=",
            "# ue-metric 1 a value=inf unit=ns better=lower samples=",
            "# ue-metric 1 a value=1 unit=ns better=lower samples=1,,2",
            "# ue-metric 1 a value=1 unit=ns better=maybe samples=",
            "# ue-metric 1 a value=1 unit= better=lower samples=",
            "# ue-metric 1 a b value=1 unit=ns better=lower samples=",
            "# ue-metric 1 a/b value=1 unit=ns better=lower samples=",
            "# ue-metric 1 a unit=ns value=1 better=lower samples=",
        ] {
            assert_eq!(ResultLine::parse(bad), Some(ResultLine::Diag(bad[2..].to_string())), "{bad}");
        }
        assert_eq!(Metric::from_output("step 1: ue-metric a value=1 unit=ns better=lower samples="), None);
    }

    #[test]
    fn exec_ends_round_trip_and_give_shell_codes() {
        let end = |command: &str, status, expect_exit| ExecEnd { command: command.into(), status, expect_exit };
        let cases = [
            (end("/bin/t a b", ExitStatus::Code(3), 0), "exec /bin/t a b: exit 3 (expected 0)", 3),
            (end("/bin/t", ExitStatus::Code(0), 0), "exec /bin/t: exit 0 (expected 0)", 0),
            (end("/bin/t", ExitStatus::Code(4), 0), "exec /bin/t: exit 4 (skip; expected 0)", 4),
            (end("/bin/t", ExitStatus::Code(4), 4), "exec /bin/t: exit 4 (expected 4)", 4),
            (end("/bin/t: x", ExitStatus::Signal(9), 0), "exec /bin/t: x: killed by signal 9 (expected exit 0)", 137),
        ];
        for (e, line, code) in cases {
            assert_eq!(e.line(), line);
            assert_eq!(ExecEnd::parse(line), Some(e.clone()), "{line}");
            assert_eq!(e.status.shell_code(), code, "{line}");
        }
        for other in ["exec /bin/t: cannot start: ENOENT", "exec: empty argv", "exec /bin/t: exit x (expected 0)"] {
            assert_eq!(ExecEnd::parse(other), None, "{other}");
        }
        assert_eq!(step_line("fork c ", 2, "sleep 1 ms"), "fork c step 2: sleep 1 ms");
        assert_eq!(step_text("step 1: exec /x: exit 0 (expected 0)", 1), Some("exec /x: exit 0 (expected 0)"));
        assert_eq!(step_text("step 12: x", 1), None);
        assert_eq!(step_text("fork c step 1: x", 1), None, "a nested step is not a top-level one");
    }
}
