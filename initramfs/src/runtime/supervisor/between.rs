//! Between a grouped or ungrouped plan's scenarios: the hygiene and what it cost, a coverage
//! kernel's counters, the skipped scenarios of a stopped plan or group, a group's switch, and
//! whether a scenario left the kernel dead.

use std::fs;
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use protocol::{Outcome, Plan, ResultLine, Scenario};

use super::stream::{diag, emit, read_taint, Counts};
use crate::runtime::hygiene::Baseline;
use crate::runtime::sys;

/// A coverage kernel's counters after scenario `index`, sent once they settle; the wait
/// added to `wait`.
pub(super) fn send_gcov(
    g: &crate::runtime::gcov::Collector,
    index: usize,
    out: &mut dyn Write,
    wait: &mut HygieneCost,
) {
    let (took, settled) = g.collect(index, out, emit);
    wait.add(took);
    if !settled {
        emit(out, &diag(&format!("gcov: the counters still changed after {} ms", took.as_millis())));
    }
}

/// What the between-scenario hygiene and the coverage counters' collection cost, on the
/// console.
pub(super) fn say_costs(
    hygiene: &HygieneCost,
    gcov: Option<&crate::runtime::gcov::Collector>,
    gcov_wait: &HygieneCost,
) {
    if hygiene.runs > 0 {
        sys::console(&format!(
            "ue-agent: between-scenario hygiene: {} runs, {} us in total, at most {} us",
            hygiene.runs,
            hygiene.total.as_micros(),
            hygiene.max.as_micros()
        ));
    }
    if let (Some(g), true) = (gcov, gcov_wait.runs > 0) {
        let (reading, sending) = g.spent.get();
        sys::console(&format!(
            "ue-agent: gcov counters settled and sent: {} runs, {} us in total, at most {} us; {} us reading, {} us sending",
            gcov_wait.runs,
            gcov_wait.total.as_micros(),
            gcov_wait.max.as_micros(),
            reading.as_micros(),
            sending.as_micros()
        ));
    }
}

/// A `stop_at_first_failure` plan after its first failure at `after`: every later scenario
/// reported as skipped, unrun.
pub(super) fn skip_the_rest(plan: &Plan, after: usize, tainted: &Path, out: &mut dyn Write, counts: &mut Counts) {
    let reason = format!("not run: the plan stops at its first failure ({})", plan.scenarios[after - 1].name);
    for (index, s) in plan.scenarios.iter().enumerate().skip(after).map(|(i, s)| (i + 1, s)) {
        skip_one(index, s, &reason, tainted, out);
        counts.skipped += 1;
    }
}

/// Scenario `index` reported as skipped, unrun, for `reason`.
pub(super) fn skip_one(index: usize, s: &Scenario, reason: &str, tainted: &Path, out: &mut dyn Write) {
    let (name, taint, reason) = (s.name.clone(), read_taint(tainted), reason.to_string());
    emit(out, &ResultLine::Begin { index, name: name.clone(), taint });
    emit(out, &ResultLine::Result { index, name, outcome: Outcome::Skip, time_ms: 0, taint, reason });
    emit(out, &ResultLine::End { index, taint });
}

/// A grouped plan's switch set to `value`; why not, as the reason the boot ends.
pub(super) fn switch(groups: &protocol::Groups, value: u32) -> Result<(), String> {
    fs::write(&groups.switch, value.to_string())
        .map_err(|e| format!("cannot write {value} to {}: {}", groups.switch, sys::error_name(&e)))
}

/// What the between-scenario hygiene cost, for the console.
#[derive(Debug, Default)]
pub(super) struct HygieneCost {
    runs: u32,
    total: Duration,
    max: Duration,
}

impl HygieneCost {
    /// One more run, which took `took`.
    fn add(&mut self, took: Duration) {
        self.runs += 1;
        self.total += took;
        self.max = self.max.max(took);
    }
}

/// The kernel's taint bit for "died": an Oops or BUG happened (`TAINT_DIE`, `D`).
pub(super) const TAINT_DIE: u64 = 1 << 7;

/// Why the boot cannot go on after scenario `name`: the kernel oopsed while it ran.
pub(super) fn died(before: u64, after: u64, name: &str) -> Option<String> {
    (after & TAINT_DIE != 0 && before & TAINT_DIE == 0)
        .then(|| format!("the kernel oopsed while {name} ran (taint D): the rest need a fresh boot"))
}

/// Restores the boot's baseline after a scenario: each thing it left becomes a `cleanup:` line,
/// each thing that could not be undone a `cleanup failed:` line; what could not be restored
/// fails it and comes back as the first such item.
pub(super) fn tidy(
    baseline: &Baseline,
    outcome: Outcome,
    reason: String,
    out: &mut dyn Write,
    cost: &mut HygieneCost,
) -> (Outcome, String, Option<String>) {
    let started = Instant::now();
    let c = baseline.restore();
    cost.add(started.elapsed());
    for item in &c.left {
        emit(out, &diag(&format!("cleanup: {item}")));
    }
    for item in &c.failed {
        emit(out, &diag(&format!("cleanup failed: {item}")));
    }
    let failed = c.failed.first().cloned();
    match outcome {
        Outcome::Pass | Outcome::Skip if failed.is_some() => (Outcome::Fail, String::new(), failed),
        _ => (outcome, reason, failed),
    }
}

/// Before scenario `i` of a plan: whether it runs (false: its group stopped at a failure, and
/// it is reported skipped), a grouped one with the switch (`switched`) set to its group's
/// value; why the boot ends when the switch cannot be set.
pub(super) fn enter_group(
    plan: &Plan,
    i: usize,
    (switched, stopped): (&mut u32, &Option<(u32, String)>),
    tainted: &Path,
    out: &mut dyn Write,
) -> Result<bool, String> {
    let (Some(g), Some(groups)) = (plan.group_of(i), &plan.groups) else { return Ok(true) };
    if let Some((_, by)) = stopped.as_ref().filter(|(stop, _)| *stop == g) {
        skip_one(
            i + 1,
            &plan.scenarios[i],
            &format!("not run: its group stops at its first failure ({by})"),
            tainted,
            out,
        );
        return Ok(false);
    }
    if g != *switched {
        switch(groups, g)?;
        *switched = g;
    }
    Ok(true)
}
