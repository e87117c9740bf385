//! A kselftest binary's TAP output read back (sans-IO): its test cases with their status,
//! SKIP reasons, assertion lines and output, the harness's totals and the agent's exit line.

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CaseStatus {
    Pass,
    Fail,
    Skip,
}

/// One kselftest test case.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Case {
    pub name: String,
    pub status: CaseStatus,
    /// The SKIP reason, or why a case without a result line counts as failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// `file.c:LINE:case:Expected ...` lines and the harness's "terminated" lines.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub assertions: Vec<String>,
    /// The case's own `#` lines (without the `#  RUN` and `#  OK/FAIL` markers).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub output: Vec<String>,
}

/// A selftest binary's TAP output, read back.
#[derive(Debug, Default, PartialEq, Eq, Serialize)]
pub struct Parsed {
    pub plan: Option<usize>,
    pub cases: Vec<Case>,
    /// The harness's `# Totals: pass:.. fail:..` line.
    pub totals: Option<String>,
    /// The agent's `step 1: exec ...: exit N (expected 0)` line.
    pub exit: Option<String>,
    pub problems: Vec<String>,
}

/// Parses kselftest_harness TAP (as the scenario's diagnostic lines). Lines between two
/// results belong to the later one; a `#  RUN` with no result means the stream ended in it.
pub fn parse(lines: &[String]) -> Parsed {
    let mut p = Parsed::default();
    let mut pending: Vec<String> = Vec::new();
    let mut running: Option<String> = None;
    for raw in lines {
        let l = raw.trim_end();
        if l.starts_with("step ") && l.contains(": exec ") {
            p.exit = Some(l.split_once(": ").map_or(l, |(_, r)| r).to_string());
        } else if l.starts_with("TAP version") || l.starts_with("KTAP version") {
        } else if let Some(n) = l.strip_prefix("1..") {
            p.plan = n.trim().parse().ok();
        } else if let Some(t) = l.strip_prefix("# Totals:") {
            p.totals = Some(t.trim().to_string());
        } else if let Some((ok, rest)) = result_line(l) {
            let (name, directive) = match rest.split_once(" # ") {
                Some((n, d)) => (n.trim(), Some(d.trim())),
                None => (rest.trim(), None),
            };
            let skip = directive.and_then(|d| d.strip_prefix("SKIP").or_else(|| d.strip_prefix("skip")));
            let status = match (ok, skip) {
                (_, Some(_)) => CaseStatus::Skip,
                (true, None) => CaseStatus::Pass,
                (false, None) => CaseStatus::Fail,
            };
            let reason = skip.map(|r| r.trim().to_string()).filter(|r| !r.is_empty());
            p.cases.push(case(name.to_string(), status, reason, std::mem::take(&mut pending)));
            running = None;
        } else {
            let text = l.strip_prefix('#').map_or(l, |t| t.strip_prefix(' ').unwrap_or(t));
            if let Some(name) = text.strip_prefix(" RUN ") {
                // Output before a RUN belongs to no case (the harness's preamble).
                pending.clear();
                running = Some(name.trim().trim_end_matches("...").trim().to_string());
            } else if !text.is_empty() {
                pending.push(text.to_string());
            }
        }
    }
    if let Some(name) = running {
        let why = "no result line: the output ended while it ran (crash, deadline or kernel panic)";
        p.cases.push(case(name, CaseStatus::Fail, Some(why.to_string()), pending));
    }
    if let Some(n) = p.plan.filter(|n| *n != p.cases.len()) {
        p.problems.push(format!("planned {n} test(s), {} reported", p.cases.len()));
    }
    if p.plan.is_none() {
        p.problems.push("no TAP plan line (1..N): the binary printed no kselftest output".to_string());
    }
    p
}

/// `ok 3 name...` / `not ok 3 name...` -> (ok, "name...").
fn result_line(l: &str) -> Option<(bool, &str)> {
    let (ok, rest) = match l.strip_prefix("not ok ") {
        Some(r) => (false, r),
        None => (true, l.strip_prefix("ok ")?),
    };
    let (num, name) = rest.split_once(' ').unwrap_or((rest, ""));
    num.parse::<u32>().ok()?;
    Some((ok, name))
}

fn case(name: String, status: CaseStatus, reason: Option<String>, lines: Vec<String>) -> Case {
    // The harness's own markers say nothing the status does not.
    let output: Vec<String> = lines
        .into_iter()
        .filter(|t| {
            let w = t.trim_start();
            !(w.starts_with("OK ") || w.starts_with("FAIL ") || w.starts_with("SKIP ") || w.starts_with("XFAIL "))
        })
        .collect();
    let assertions =
        output.iter().filter(|t| is_assertion(t) || t.contains("Test terminated")).cloned().collect::<Vec<_>>();
    let output = if status == CaseStatus::Pass { Vec::new() } else { output };
    Case { name, status, reason, assertions, output }
}

/// `abi_test.c:123:case:Expected ...`: a C file, a line number, then the message.
fn is_assertion(t: &str) -> bool {
    let mut parts = t.splitn(3, ':');
    let (Some(file), Some(num)) = (parts.next(), parts.next()) else { return false };
    file.ends_with(".c") && !num.is_empty() && num.bytes().all(|b| b.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(text: &str) -> Vec<String> {
        text.lines().map(str::to_string).collect()
    }

    const OUTPUT: &str = "\
TAP version 13
1..4
# Starting 4 tests from 1 test cases.
#  RUN           user.enablement ...
#            OK  user.enablement
ok 1 user.enablement
#  RUN           user.clear ...
# abi_test.c:310:clear:Expected 0 (0) == ioctl(self->data_fd, DIAG_IOCSDEL, \"__abi_event\") (-1)
# clear: Test terminated by assertion
#          FAIL  user.clear
not ok 2 user.clear
#  RUN           user.fork ...
#      SKIP      madvise not supported
#            OK  user.fork
ok 3 user.fork # SKIP madvise not supported
#  RUN           user.perf_write ...
#            OK  user.perf_write
ok 4 user.perf_write
# FAILED: 3 / 4 tests passed.
# Totals: pass:2 fail:1 xfail:0 xpass:0 skip:1 error:0
step 1: exec /bin/abi_test: exit 1 (expected 0)
";

    #[test]
    fn kselftest_output_becomes_cases() {
        let p = parse(&lines(OUTPUT));
        assert_eq!(p.plan, Some(4));
        let got: Vec<_> = p.cases.iter().map(|c| (c.name.as_str(), c.status)).collect();
        assert_eq!(
            got,
            [
                ("user.enablement", CaseStatus::Pass),
                ("user.clear", CaseStatus::Fail),
                ("user.fork", CaseStatus::Skip),
                ("user.perf_write", CaseStatus::Pass)
            ]
        );
        assert_eq!(
            p.cases[1].assertions,
            [
                "abi_test.c:310:clear:Expected 0 (0) == ioctl(self->data_fd, DIAG_IOCSDEL, \"__abi_event\") (-1)",
                "clear: Test terminated by assertion"
            ]
        );
        assert_eq!(p.cases[2].reason.as_deref(), Some("madvise not supported"));
        assert!(p.cases[0].assertions.is_empty() && p.cases[0].output.is_empty());
        assert_eq!(p.totals.as_deref(), Some("pass:2 fail:1 xfail:0 xpass:0 skip:1 error:0"));
        assert_eq!(p.exit.as_deref(), Some("exec /bin/abi_test: exit 1 (expected 0)"));
        assert!(p.problems.is_empty(), "{:?}", p.problems);
    }

    #[test]
    fn a_truncated_stream_fails_the_running_case() {
        let cut: String = OUTPUT.lines().take(9).map(|l| format!("{l}\n")).collect();
        let p = parse(&lines(&cut));
        assert_eq!(p.cases.len(), 2);
        assert_eq!(p.cases[1].name, "user.clear");
        assert_eq!(p.cases[1].status, CaseStatus::Fail);
        assert!(p.cases[1].reason.as_deref().unwrap().starts_with("no result line"));
        assert_eq!(p.cases[1].assertions.len(), 2);
        assert_eq!(p.totals, None);
        assert_eq!(p.problems, ["planned 4 test(s), 2 reported"]);
        assert_eq!(parse(&[]).problems.len(), 1, "no output at all is a problem");
    }

    #[test]
    fn assertion_lines_name_a_c_file_and_line() {
        assert!(is_assertion("dyn_test.c:12:basic:Expected 0 (0) == x (1)"));
        assert!(!is_assertion("Starting 4 tests from 1 test cases."));
    }
}
