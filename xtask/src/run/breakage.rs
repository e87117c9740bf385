//! When an arch's kernel breaks (a crash, hang, oops or leftover the hygiene could not undo
//! ended a boot early): which scenario broke it, whether a fresh boot runs the rest, and when
//! the run stops spending boots on it and calls the rest collateral.

use std::time::Duration;

use crate::judging::verdict::BootResult;
use crate::vm::qemu::Ended;

/// How many resume boots an arch gets at most: each one follows a crash or hang that still
/// left scenarios to run.
pub const MAX_RESUMES: u32 = 8;

/// How long after an arch's first breakage (a boot that a crash, hang, oops or leftover the
/// hygiene could not undo ended early) a new resume boot may still start: so the verdict
/// comes within about 180 s of the breakage (one resume boot of the rest, ~40-70 s under
/// TCG, after the last start), however the kernel keeps breaking.
pub const RESUME_WINDOW: Duration = Duration::from_secs(110);

/// Fresh boots in a row that broke again, after which no further boot is spent on the kernel:
/// it keeps breaking itself whatever runs, and the rest are collateral.
pub const BROKEN_IN_A_ROW: u32 = 3;

/// An arch's first breakage: when, which scenario, and how.
pub struct Breakage {
    pub at: std::time::Instant,
    pub culprit: String,
    pub how: String,
}

/// Why no further boot is spent on an arch whose kernel broke, if that is so: it broke again
/// in [`BROKEN_IN_A_ROW`] fresh boots in a row, the [`RESUME_WINDOW`] after its first breakage
/// is over, or it had [`MAX_RESUMES`] resume boots already. `last` is how the latest boot broke.
pub fn stop_spending(broken_in_a_row: u32, since_first: Duration, resumes: u32, last: &str) -> Option<String> {
    if broken_in_a_row >= BROKEN_IN_A_ROW {
        Some(format!(
            "the kernel keeps breaking itself: {broken_in_a_row} fresh boots in a row broke too, so no further boot \
             was spent on it (the last at {last})"
        ))
    } else if since_first > RESUME_WINDOW {
        Some(format!(
            "{} s after the first breakage no further boot was started (the verdict is due within 180 s of it)",
            since_first.as_secs()
        ))
    } else if resumes >= MAX_RESUMES {
        Some(format!("{MAX_RESUMES} resume boots already"))
    } else {
        None
    }
}

/// The scenario a boot that ended early stopped at (the one running, or the last before the
/// kernel stopped being clean), and how, in a line: its last diagnostic and first finding.
pub fn stopped_at(result: &BootResult) -> Option<(String, String)> {
    use crate::judging::verdict::Status;
    let s = result.scenarios.iter().rev().find(|s| s.status != Status::NotRun)?;
    let mut how = format!("{} ({})", result.verdict.as_str(), s.status.as_str());
    if let Some(f) = s.findings.first() {
        how.push_str(&format!(": {}", f.describe()));
    }
    if let Some(d) = s.diagnostics.last() {
        how.push_str(&format!("; {d}"));
    }
    Some((s.name.clone(), how))
}

/// The scenarios a boot left unrun, as a plan for a fresh boot; `None` when there are none, or
/// when a fresh boot would not help: the kernel did not boot, the host failed, a signal stopped
/// the run, or the boot ran nothing at all (it would only break the same way again).
pub fn resume_plan(result: &BootResult, ended: &Ended, plan: &protocol::Plan) -> Option<protocol::Plan> {
    use crate::judging::verdict::{BootVerdict, Status};
    if matches!(result.verdict, BootVerdict::BootFailure(_) | BootVerdict::Interrupted)
        || matches!(ended, Ended::Failed { .. })
    {
        return None;
    }
    let unrun: Vec<&str> =
        result.scenarios.iter().filter(|s| s.status == Status::NotRun).map(|s| s.name.as_str()).collect();
    let progressed = result.scenarios.iter().any(|s| s.status != Status::NotRun);
    if unrun.is_empty() || !progressed {
        return None;
    }
    let scenarios = plan.scenarios.iter().filter(|s| unrun.contains(&s.name.as_str())).cloned().collect();
    Some(protocol::Plan { scenarios, ..plan.clone() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_broken_kernel_gets_boots_until_it_keeps_breaking_or_the_window_closes() {
        let s = Duration::from_secs;
        assert_eq!(stop_spending(0, s(5), 1, ""), None);
        assert_eq!(stop_spending(BROKEN_IN_A_ROW - 1, RESUME_WINDOW, 2, ""), None);
        let again = stop_spending(BROKEN_IN_A_ROW, s(30), 3, "t/x: timeout").unwrap();
        assert!(again.starts_with("the kernel keeps breaking itself: 3 fresh boots in a row"), "{again}");
        assert!(again.ends_with("(the last at t/x: timeout)"), "{again}");
        let late = stop_spending(1, RESUME_WINDOW + s(1), 2, "").unwrap();
        assert!(late.starts_with("111 s after the first breakage"), "{late}");
        assert_eq!(stop_spending(0, s(1), MAX_RESUMES, "").as_deref(), Some("8 resume boots already"));
    }
}
