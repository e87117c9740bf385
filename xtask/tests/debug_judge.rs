//! The unit tests of the debug-profile judge (`real/debug.rs`'s `judge`), in plain `cargo test`:
//! the real checks' own target has no test harness, so they live here.

// `build` and `run_gating_plan` are the real checks' (tests/real/main.rs); only `judge` is tested here.
#[allow(dead_code)]
#[path = "real/debug.rs"]
mod debug;

mod tests {
    use super::debug::judge;
    use std::collections::{BTreeMap, BTreeSet};
    use xtask::results::model::{Finding, Status};

    const UAF: &str = "KASAN: slab-use-after-free";

    /// The results fixture's model (both arches, an isolated boot, every status), without its
    /// boot that an oops ended (`broken/`), which a debug run never plans.
    fn fixture() -> xtask::results::model::Run {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("test_data/results/run-fixture");
        let mut run = xtask::results::collect::load(&dir, "2026-01-02T03:04:05Z".parse().unwrap()).unwrap();
        for a in &mut run.arches {
            a.scenarios.retain(|s| !s.name.starts_with("broken/"));
        }
        run
    }

    fn finding(kind: &str, summary: &str) -> Finding {
        Finding { kind: kind.into(), summary: summary.into(), console_line: 1, ..Finding::default() }
    }

    /// The fixture's x86_64 made into a clean debug run: `hazards/slow-write` expects a KASAN
    /// report and shows it, `abi/write` is an xfail, the skipped `abi/enable` is gone.
    fn clean() -> (xtask::results::model::Run, BTreeMap<String, String>) {
        let mut run = fixture();
        let a = run.arches.iter_mut().find(|a| a.arch == "x86_64").unwrap();
        a.scenarios.retain(|s| s.name != "abi/enable");
        let hz = a.scenarios.iter_mut().find(|s| s.name == "hazards/slow-write").unwrap();
        hz.status = Status::Pass;
        hz.findings = vec![finding("kasan", "BUG: KASAN: slab-use-after-free in trace_event_probe_cleanup+0xb1/0xf2")];
        let expect = BTreeMap::from([("hazards/slow-write".to_string(), UAF.to_string())]);
        (run, expect)
    }

    fn problems(run: &xtask::results::model::Run, expect: &BTreeMap<String, String>) -> String {
        let must = [("hazards/slow-write", UAF)];
        judge(run, "x86_64", expect, &must, &BTreeSet::new()).map_or_else(|e| format!("{e:#}"), |()| "ok".into())
    }

    #[test]
    fn a_skip_the_default_profile_makes_too_is_an_arch_variant_not_a_problem() {
        let mut run = fixture();
        let a = run.arches.iter_mut().find(|a| a.arch == "x86_64").unwrap();
        let hz = a.scenarios.iter_mut().find(|s| s.name == "hazards/slow-write").unwrap();
        hz.status = Status::Pass;
        hz.findings = vec![finding("kasan", "BUG: KASAN: slab-use-after-free in trace_event_probe_cleanup+0xb1/0xf2")];
        let expect = BTreeMap::from([("hazards/slow-write".to_string(), UAF.to_string())]);
        let must = [("hazards/slow-write", UAF)];
        let anyway = BTreeSet::from(["abi/enable".to_string()]);
        assert!(judge(&run, "x86_64", &expect, &must, &anyway).is_ok());
        let e = judge(&run, "x86_64", &expect, &must, &BTreeSet::new()).unwrap_err();
        assert!(format!("{e:#}").contains("abi/enable: skipped"), "{e:#}");
    }

    #[test]
    fn a_clean_debug_run_passes() {
        let (run, expect) = clean();
        assert_eq!(problems(&run, &expect), "ok");
    }

    #[test]
    fn a_skip_a_failure_and_a_missing_expectation_are_each_named() {
        let run = fixture();
        assert_eq!(
            problems(&run, &BTreeMap::new()),
            "3 problem(s):\n  \
             hazards/slow-write: expected to report \"KASAN: slab-use-after-free\", the suites say None\n  \
             abi/enable: skipped (no perf_event_open in this kernel)\n  \
             hazards/slow-write: fail (timeout): the VM hung while this scenario ran: the watchdog fired \
             (killed after 90000 ms) []"
        );
    }

    #[test]
    fn a_finding_anywhere_else_fails_the_run() {
        let (mut run, expect) = clean();
        let a = run.arches.iter_mut().find(|a| a.arch == "x86_64").unwrap();
        a.scenarios[0].findings = vec![finding("lockdep", "WARNING: possible circular locking dependency detected")];
        let hz = a.scenarios.iter_mut().find(|s| s.name == "hazards/slow-write").unwrap();
        hz.findings.push(finding("ubsan", "UBSAN: array-index-out-of-bounds in kernel/trace/x.c:1:2"));
        a.boots[0].findings = vec![finding("kasan", "BUG: KASAN: wild-memory-access in do_raw_spin_lock+0x130/0x1de")];
        assert_eq!(
            problems(&run, &expect),
            "3 problem(s):\n  \
             abi/register: kernel findings [\"WARNING: possible circular locking dependency detected\"]\n  \
             hazards/slow-write: expected only \"KASAN: slab-use-after-free\" reports, got \
             [\"BUG: KASAN: slab-use-after-free in trace_event_probe_cleanup+0xb1/0xf2\", \
             \"UBSAN: array-index-out-of-bounds in kernel/trace/x.c:1:2\"]\n  \
             boot x86_64: a finding outside the scenarios: BUG: KASAN: wild-memory-access in do_raw_spin_lock+0x130/0x1de"
        );
    }

    #[test]
    fn the_must_report_scenario_cannot_go_missing() {
        let (mut run, expect) = clean();
        run.arches
            .iter_mut()
            .find(|a| a.arch == "x86_64")
            .unwrap()
            .scenarios
            .retain(|s| s.name != "hazards/slow-write");
        assert_eq!(problems(&run, &expect), "1 problem(s):\n  hazards/slow-write: not in the run");
    }
}
