//! The suites' expected failures counted into a boot's verdict: each scenario's mark (an xfail
//! that failed as expected, an xpass whose mark must go, a known bug this kernel carries the
//! fix of) and the verdict that sets the exit code.

use std::collections::BTreeMap;

use serde::Serialize;

use super::{BootResult, BootVerdict, Status};

/// A scenario the suite expects to fail, as it turned out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Expected {
    /// It failed as expected: not a failure of the run.
    Xfail,
    /// It passed: the reason it was marked is gone, which is a failure until the mark goes.
    Xpass,
    /// It passed, and its mark names a known kernel bug and its fix (`fixed_by`): this kernel
    /// carries the fix. Not a failure.
    Fixed,
}

/// The suites' marks a boot is judged with, by `suite/scenario`.
#[derive(Debug, Clone, Copy)]
pub struct XfailMarks<'a> {
    /// Expected to fail: the reason.
    pub xfail: &'a BTreeMap<String, String>,
    /// Of those, the ones whose known kernel bug has a fix: the patch.
    pub fixed_by: &'a BTreeMap<String, String>,
    /// Of those, the ones whose bug shows only when a race goes its way: a pass is a pass.
    pub intermittent: &'a std::collections::BTreeSet<String>,
    /// Expected to provoke a kernel report including this text.
    pub expect_report: &'a BTreeMap<String, String>,
}

/// A boot's verdict once expected failures are counted, and each scenario's mark (parallel to
/// `result.scenarios`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WithXfail {
    pub verdict: BootVerdict,
    pub marks: Vec<Option<Expected>>,
}

/// Applies the suites' `xfail` marks (`suite/scenario` -> reason). Only an ordinary failure
/// is forgiven: a timeout, a crash, a kernel finding or a taint change in an xfail scenario is
/// still a failure, since the mark is about the ABI's answers, not about the kernel's health.
pub fn with_xfail(
    result: &BootResult,
    xfail: &BTreeMap<String, String>,
    fixed_by: &BTreeMap<String, String>,
    intermittent: &std::collections::BTreeSet<String>,
) -> WithXfail {
    let marks: Vec<Option<Expected>> = result
        .scenarios
        .iter()
        .map(|s| {
            if !xfail.contains_key(&s.name) {
                return None;
            }
            match s.status {
                Status::Pass if intermittent.contains(&s.name) => None,
                Status::Pass if fixed_by.contains_key(&s.name) => Some(Expected::Fixed),
                Status::Pass => Some(Expected::Xpass),
                Status::Fail if s.findings.is_empty() && s.taint_before == s.taint_after => Some(Expected::Xfail),
                _ => None,
            }
        })
        .collect();
    let mut verdict = result.verdict.clone();
    let only_xfails_failed = result.problems.is_empty()
        && result.findings.is_empty()
        && result
            .scenarios
            .iter()
            .zip(&marks)
            .all(|(s, m)| matches!(s.status, Status::Pass | Status::Skip) || *m == Some(Expected::Xfail));
    // A fixed known bug (`Expected::Fixed`) passed, and passing is not a failure.
    if verdict == BootVerdict::Fail && only_xfails_failed {
        verdict = BootVerdict::Pass;
    }
    if verdict == BootVerdict::Pass && marks.contains(&Some(Expected::Xpass)) {
        verdict = BootVerdict::Fail;
    }
    WithXfail { verdict, marks }
}
