//! The contract between host and guest: the compiled plan the guest agent runs, and the KTAP
//! lines it writes on the result channel. Sans-IO: types, encoders and a line parser only.

use serde::{Deserialize, Serialize};

/// Bumped when the plan or the result lines change incompatibly.
pub const PROTOCOL_VERSION: u32 = 1;
/// Where the host puts the plan in the initramfs.
pub const PLAN_PATH: &str = "/plan.json";
/// The virtio console port name the agent writes results to (`virtserialport,name=...`).
pub const RESULT_PORT: &str = "ue.results";
/// virtio-fs tags: the user's shared folder and the artifacts folder.
pub const SHARE_TAG: &str = "ue-share";
pub const ARTIFACTS_TAG: &str = "ue-artifacts";
/// Where the agent mounts the artifacts folder (or a tmpfs when there is no virtio-fs).
pub const ARTIFACTS_DIR: &str = "/artifacts";
/// Exit status of a scenario process that skipped (the kselftest convention).
pub const EXIT_SKIP: i32 = 4;

/// What the agent runs, compiled by the host (the guest never parses YAML).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Plan {
    pub version: u32,
    /// Free-form label for the logs (for example the arch).
    pub label: String,
    pub scenarios: Vec<Scenario>,
    /// Mount the user's virtio-fs share here, when the host shares one.
    #[serde(default)]
    pub share: Option<String>,
    /// Whether the artifacts folder comes over virtio-fs (else a tmpfs).
    #[serde(default)]
    pub artifacts_virtiofs: bool,
    /// Run an interactive shell on the console instead of (after) the scenarios.
    #[serde(default)]
    pub shell: bool,
}

/// One scenario: run in its own process group, killed at its deadline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// `suite/scenario`, unique in a plan.
    pub name: String,
    pub deadline_ms: u64,
    pub steps: Vec<Step>,
}

/// A step of a scenario. Each step that fails ends the scenario as failed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum Step {
    /// Runs a program (a path in the guest) and expects its exit status.
    Exec { argv: Vec<String>, expect_exit: i32 },
    /// Writes bytes to a file in one write(2). Without `create` the file must exist and is
    /// neither created nor truncated (tracefs control files, sysctls: O_TRUNC clears `trace`
    /// or every dynamic event); with it, an ordinary file is created or replaced.
    WriteFile {
        path: String,
        data: String,
        #[serde(default)]
        create: bool,
    },
    /// Triggers an LKDTM crash point (`PANIC`, `WARNING`, `BUG`, ...) through
    /// `/sys/kernel/debug/provoke-crash/DIRECT`.
    Lkdtm { point: String },
    /// Sleeps; a scenario that sleeps past its deadline is how the deadline is tested.
    Sleep { ms: u64 },
}

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
            ResultLine::Sentinel { total: 3, passed: 1, failed: 1, skipped: 1, timeout: 0 },
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
    fn plan_is_json_with_tagged_steps() {
        let plan = Plan {
            version: PROTOCOL_VERSION,
            label: "x86_64".into(),
            scenarios: vec![Scenario {
                name: "fault/warn".into(),
                deadline_ms: 1000,
                steps: vec![Step::Lkdtm { point: "WARNING".into() }, Step::Sleep { ms: 1 }],
            }],
            share: None,
            artifacts_virtiofs: false,
            shell: false,
        };
        let json = serde_json::to_string(&plan).unwrap();
        assert!(json.contains(r#"{"op":"lkdtm","point":"WARNING"}"#), "{json}");
        assert_eq!(serde_json::from_str::<Plan>(&json).unwrap(), plan);
    }
}
