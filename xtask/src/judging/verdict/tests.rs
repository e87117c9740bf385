//! The verdict's tests: captured and hand-made consoles and result channels, each boot's
//! verdict and every scenario's status, expected failures and reports.

use super::*;
use crate::judging::channel;

const PASS_LOG: &str = include_str!("../../../test_data/console/x86_64-pass.log");
const FAIL_LOG: &str = include_str!("../../../test_data/console/x86_64-fail.log");
const WARN_LOG: &str = include_str!("../../../test_data/console/x86_64-warn.log");
const PANIC_LOG: &str = include_str!("../../../test_data/console/x86_64-panic.log");
const ARM64_OOPS_LOG: &str = include_str!("../../../test_data/console/arm64-oops-panic.log");
const KASAN_LOG: &str = include_str!("../../../test_data/console/x86_64-kasan.log");
const HUNG_LOG: &str = include_str!("../../../test_data/console/x86_64-hung-task.log");
const TRUNCATED_LOG: &str = include_str!("../../../test_data/console/x86_64-truncated.log");
const PASS: &str = include_str!("../../../test_data/ktap/pass.ktap");
const FAIL: &str = include_str!("../../../test_data/ktap/fail.ktap");
const SKIP: &str = include_str!("../../../test_data/ktap/skip.ktap");
const TIMEOUT: &str = include_str!("../../../test_data/ktap/timeout.ktap");
const TRUNCATED: &str = include_str!("../../../test_data/ktap/truncated.ktap");
const BAD_SENTINEL: &str = include_str!("../../../test_data/ktap/bad-sentinel.ktap");
const WARN: &str = include_str!("../../../test_data/ktap/warn.ktap");
// Captured from a real arm64 boot of the 6.12.117 kernel (`cargo xtask boot --plan`).
const CAPTURED_FAULTS_LOG: &str = include_str!("../../../test_data/console/captured-arm64-faults.log");
const CAPTURED_FAULTS: &str = include_str!("../../../test_data/ktap/captured-arm64-faults.ktap");

const ABI: [&str; 3] = ["abi/register", "abi/write", "abi/enable"];
const EXITED: HostEnd = HostEnd::Exited { code: Some(0) };

fn plan(names: &[&str]) -> Vec<String> {
    names.iter().map(|s| s.to_string()).collect()
}

fn run(names: &[&str], ktap: &str, log: &str, end: &HostEnd) -> BootResult {
    decide(&plan(names), &BTreeMap::new(), &channel::read(ktap), &console::scan(log), log, end)
}

/// Checks the verdict string and every scenario's status.
fn check(result: &BootResult, verdict: &str, statuses: &[Status]) {
    let got: Vec<Status> = result.scenarios.iter().map(|r| r.status).collect();
    assert_eq!((result.verdict.as_str(), got.as_slice()), (verdict, statuses), "{result:#?}");
}

use Status::*;

#[test]
fn captured_arm64_fault_injection_boot() {
    let names = ["fault/ok-before", "fault/warn", "fault/hang", "fault/ok-after", "fault/panic", "fault/never"];
    let r = run(&names, CAPTURED_FAULTS, CAPTURED_FAULTS_LOG, &EXITED);
    check(&r, "kernel-panic", &[Pass, Fail, Timeout, Pass, Crashed, NotRun]);
    assert_eq!(r.verdict, BootVerdict::KernelPanic { scenario: Some("fault/panic".into()) });
    let warn = &r.scenarios[1].findings;
    assert_eq!(warn.len(), 1);
    assert_eq!(warn[0].kind, FindingKind::Warning);
    assert!(warn[0].summary.contains("drivers/misc/lkdtm/bugs.c"), "{}", warn[0].summary);
    assert_eq!(r.scenarios[2].time_ms, Some(3001));
    assert_eq!(r.scenarios[4].findings[0].kind, FindingKind::Panic);
    assert!(!r.scenarios[5].console_tail.is_empty());
    assert!(r.findings.is_empty() && r.problems.is_empty(), "{:?} {:?}", r.findings, r.problems);
}

#[test]
fn clean_boot_passes() {
    let r = run(&ABI, PASS, PASS_LOG, &EXITED);
    check(&r, "pass", &[Pass, Pass, Pass]);
    assert!(r.problems.is_empty() && r.findings.is_empty());
    assert!(r.scenarios.iter().all(|s| s.console_tail.is_empty()));
    assert_eq!(r.scenarios[0].diagnostics, ["registered \"ue_test u32 count\" at write index 0"]);
    assert_eq!((r.scenarios[2].time_ms, r.scenarios[2].taint_after), (Some(18), Some(0)));
}

#[test]
fn failing_scenario_fails_the_boot() {
    let r = run(&ABI, FAIL, FAIL_LOG, &EXITED);
    check(&r, "fail", &[Pass, Fail, Pass]);
    assert!(r.scenarios[1].findings.is_empty(), "a user segfault is not a kernel finding");
}

#[test]
fn skip_passes_and_timeout_outcome_times_out() {
    check(&run(&ABI, SKIP, PASS_LOG, &EXITED), "pass", &[Pass, Pass, Skip]);
    check(&run(&ABI, TIMEOUT, PASS_LOG, &EXITED), "timeout", &[Pass, Timeout, Pass]);
}

#[test]
fn warn_and_taint_turn_a_pass_into_a_fail() {
    let r = run(&ABI, WARN, WARN_LOG, &EXITED);
    check(&r, "fail", &[Pass, Fail, Pass]);
    let s = &r.scenarios[1];
    assert_eq!(s.findings.len(), 1);
    assert_eq!(
        s.diagnostics,
        [
            "kernel WARNING at kernel/trace/trace_events_user.c:2378 user_events_write_core+0x2c5/0x2f0: see findings",
            "taint changed 0 -> 512",
        ]
    );
    assert!(s.console_tail.is_empty());
    // Scenario 3 began tainted and stayed so: not its doing.
    assert!(r.scenarios[2].diagnostics.is_empty());

    // Either signal alone is enough.
    check(&run(&ABI, PASS, WARN_LOG, &EXITED), "fail", &[Pass, Fail, Pass]);
    check(&run(&ABI, WARN, PASS_LOG, &EXITED), "fail", &[Pass, Fail, Pass]);
}

#[test]
fn kasan_fails_its_scenario() {
    let r = run(&ABI, PASS, KASAN_LOG, &EXITED);
    check(&r, "fail", &[Pass, Pass, Fail]);
    assert_eq!(
        r.scenarios[2].diagnostics,
        ["kernel BUG: KASAN: slab-use-after-free in user_event_enabler_write+0x3a2/0x3f0: see findings"]
    );
}

#[test]
fn an_expected_report_passes_its_scenario_and_only_it() {
    let expect = |text: &str| BTreeMap::from([("abi/enable".to_string(), text.to_string())]);
    let with = |text: &str, log: &str| {
        decide(&plan(&ABI), &expect(text), &channel::read(PASS), &console::scan(log), log, &EXITED)
    };
    let r = with("KASAN: slab-use-after-free", KASAN_LOG);
    check(&r, "pass", &[Pass, Pass, Pass]);
    assert_eq!(
        r.scenarios[2].diagnostics.last().unwrap(),
        "the expected kernel report including `KASAN: slab-use-after-free` came"
    );
    // Another report than the one expected still fails it.
    check(&with("KASAN: double-free", KASAN_LOG), "fail", &[Pass, Pass, Fail]);
    // No report at all: the bug did not fire, which is a failure to look at.
    let r = with("KASAN: slab-use-after-free", PASS_LOG);
    check(&r, "fail", &[Pass, Pass, Fail]);
    assert_eq!(
        r.scenarios[2].diagnostics,
        ["expected a kernel report including `KASAN: slab-use-after-free`; none came during the scenario"]
    );
}

#[test]
fn lkdtm_panic_in_scenario_2_of_4() {
    let names = ["abi/register", "fault/panic", "abi/write", "abi/enable"];
    for end in [EXITED, HostEnd::WatchdogFired { after_ms: 30_000, reason: "r".into() }] {
        let r = run(&names, TRUNCATED, PANIC_LOG, &end);
        check(&r, "kernel-panic", &[Pass, Crashed, NotRun, NotRun]);
        assert_eq!(r.verdict, BootVerdict::KernelPanic { scenario: Some("fault/panic".to_string()) });
        let crashed = &r.scenarios[1];
        assert_eq!(
            crashed.diagnostics,
            [
                "step 1: lkdtm PANIC via /sys/kernel/debug/provoke-crash/DIRECT",
                "the kernel crashed while this scenario ran (console line 30)",
                "kernel panic - not syncing: dumptest: see findings",
            ]
        );
        assert_eq!(crashed.console_tail.len(), TAIL_LINES);
        assert_eq!(
            crashed.console_tail.last().unwrap(),
            "[    0.453398] ---[ end Kernel panic - not syncing: dumptest ]---"
        );
        assert_eq!(r.scenarios[2].diagnostics, ["not run: the kernel crashed during scenario 2 (fault/panic)"]);
        assert_eq!(r.scenarios[3].console_tail, crashed.console_tail);
        assert!(r.scenarios[0].console_tail.is_empty());
        assert!(r.problems.is_empty(), "{:?}", r.problems);
    }
}

#[test]
fn arm64_oops_then_panic() {
    let ktap = "KTAP version 1\n1..2\n# ue-begin 1 abi/register taint=0\nok 1 abi/register # time_ms=21 taint=0\n\
                # ue-end 1 taint=0\n# ue-begin 2 fault/null-deref taint=0\n";
    let r = run(&["abi/register", "fault/null-deref"], ktap, ARM64_OOPS_LOG, &EXITED);
    check(&r, "kernel-panic", &[Pass, Crashed]);
    assert_eq!(r.verdict, BootVerdict::KernelPanic { scenario: Some("fault/null-deref".to_string()) });
    let kinds: Vec<_> = r.scenarios[1].findings.iter().map(|f| (f.kind, f.line)).collect();
    assert_eq!(kinds, [(FindingKind::Oops, 27), (FindingKind::Panic, 74)]);
}

#[test]
fn hung_task_with_the_watchdog_is_a_timeout() {
    let names = ["abi/register", "fault/hung-task", "abi/enable"];
    let ktap = "KTAP version 1\n1..3\n# ue-begin 1 abi/register taint=0\nok 1 abi/register # time_ms=14 taint=0\n\
                # ue-end 1 taint=0\n# ue-begin 2 fault/hung-task taint=0\n";
    let r = run(&names, ktap, HUNG_LOG, &HostEnd::WatchdogFired { after_ms: 60_000, reason: "r".into() });
    check(&r, "timeout", &[Pass, Timeout, NotRun]);
    let hung = &r.scenarios[1];
    assert_eq!(hung.findings[0].kind, FindingKind::HungTask);
    assert_eq!(
        hung.diagnostics,
        [
            "the VM hung while this scenario ran: r (killed after 60000 ms)",
            "kernel INFO: task ue-agent:59 blocked for more than 10 seconds.: see findings",
        ]
    );
    assert_eq!(hung.console_tail.last().unwrap(), "[   15.361267]  </TASK>");
    assert_eq!(r.scenarios[2].diagnostics, ["not run: the VM hung: r"]);

    // The console alone names the hung scenario when the Begin line never reached the host.
    let ktap = "KTAP version 1\n1..3\n# ue-begin 1 abi/register taint=0\nok 1 abi/register # time_ms=14 taint=0\n";
    let r = run(&names, ktap, HUNG_LOG, &HostEnd::WatchdogFired { after_ms: 60_000, reason: "r".into() });
    check(&r, "timeout", &[Pass, Timeout, NotRun]);
}

#[test]
fn truncated_oops_in_init_is_a_kernel_panic() {
    let names = ["abi/register", "abi/fork", "abi/enable"];
    let ktap = "KTAP version 1\n1..3\n# ue-begin 1 abi/register taint=0\nok 1 abi/register # time_ms=14 taint=0\n\
                # ue-end 1 taint=0\n# ue-begin 2 abi/fork taint=0\n";
    let r = run(&names, ktap, TRUNCATED_LOG, &HostEnd::WatchdogFired { after_ms: 60_000, reason: "r".into() });
    check(&r, "kernel-panic", &[Pass, Crashed, NotRun]);
    assert_eq!(r.verdict, BootVerdict::KernelPanic { scenario: Some("abi/fork".to_string()) });
    assert_eq!(r.scenarios[1].console_tail.last().unwrap(), "[    0.453447] RDX: 00000000000");
}

#[test]
fn agent_gone_without_sentinel_is_an_infra_error() {
    let r = run(&ABI, &PASS[..PASS.find("# ue-begin 2").unwrap()], PASS_LOG, &HostEnd::Exited { code: Some(1) });
    check(&r, "infra-error", &[Pass, NotRun, NotRun]);
    assert_eq!(
        r.verdict,
        BootVerdict::InfraError(
            "the agent ended without its sentinel: QEMU exited with code 1 after 1 of 3 results".into()
        )
    );
    assert_eq!(r.scenarios[1].diagnostics, ["not run: the agent ended without its sentinel"]);

    let r = run(&ABI, "", "", &HostEnd::Exited { code: None });
    check(&r, "infra-error", &[NotRun, NotRun, NotRun]);
    assert_eq!(
        r.verdict.clone(),
        BootVerdict::InfraError(
            "the agent ended without its sentinel: QEMU was killed by a signal after 0 of 3 results; \
             the result channel was empty"
                .into()
        )
    );

    let ktap = &PASS[..PASS.find("ok 2").unwrap()];
    let r = run(&ABI, ktap, PASS_LOG, &EXITED);
    check(&r, "infra-error", &[Pass, Crashed, NotRun]);
}

#[test]
fn a_stuck_scenario_ends_the_boot_with_its_timeout_and_the_rest_unrun() {
    let names = ["abi/register", "abi/stuck", "abi/enable"];
    let ktap = "KTAP version 1\n1..3\n# ue-begin 1 abi/register taint=0\nok 1 abi/register # time_ms=14 taint=0\n\
                # ue-end 1 taint=0\n# ue-begin 2 abi/stuck taint=0\n\
                # pid 80 (ue-agent) task 80: state D (disk sleep), wchan msleep\n\
                not ok 2 abi/stuck # TIMEOUT time_ms=10002 taint=0\n# ue-end 2 taint=0\n\
                # ue-abort after=2 pid 80 of scenario 2 is stuck in the kernel\n";
    let r = run(&names, ktap, PASS_LOG, &EXITED);
    check(&r, "timeout", &[Pass, Timeout, NotRun]);
    assert_eq!(r.scenarios[1].diagnostics[0], "pid 80 (ue-agent) task 80: state D (disk sleep), wchan msleep");
    assert_eq!(
        r.scenarios[2].diagnostics,
        ["not run: the agent gave up the boot after scenario 2: pid 80 of scenario 2 is stuck in the kernel"]
    );
    // The guard's abort comes while the scenario still runs.
    let ktap =
        "KTAP version 1\n1..3\n# ue-begin 1 abi/register taint=0\n# ue-abort after=0 the supervisor was blocked\n";
    let r = run(&names, ktap, PASS_LOG, &EXITED);
    check(&r, "timeout", &[Timeout, NotRun, NotRun]);
    assert_eq!(r.scenarios[0].diagnostics, ["the agent gave up the boot: the supervisor was blocked"]);
}

#[test]
fn a_kernel_that_never_reaches_init_is_a_boot_failure() {
    let log = "[    0.1] Linux version 6.12\n[    0.5] Kernel panic - not syncing: No working init found.  Try passing init= option to kernel.\n";
    let r = run(&ABI, "", log, &EXITED);
    check(&r, "boot-failure", &[NotRun, NotRun, NotRun]);
    assert_eq!(
        r.verdict,
        BootVerdict::BootFailure(
            "Kernel panic - not syncing: No working init found.  Try passing init= option to kernel.".into()
        )
    );
    assert!(r.scenarios[0].diagnostics[0].starts_with("not run: the kernel did not boot: Kernel panic"));
    let r = run(&ABI, "", "[    0.1] Linux version 6.12\n", &HostEnd::NoBoot { reason: "no /init in 60 s".into() });
    assert_eq!(r.verdict, BootVerdict::BootFailure("no /init in 60 s".into()));
}

#[test]
fn an_interrupted_boot_says_so() {
    let ktap = &PASS[..PASS.find("ok 2").unwrap()];
    let r =
        run(&ABI, ktap, PASS_LOG, &HostEnd::Interrupted { after_ms: 900, reason: "interrupted by a signal".into() });
    check(&r, "interrupted", &[Pass, NotRun, NotRun]);
    assert_eq!(r.scenarios[1].diagnostics.last().unwrap(), "interrupted by a signal while it ran");
    assert_eq!(r.scenarios[2].diagnostics, ["not run: the run was interrupted by a signal"]);
    // `--timeout`: the same end, saying why.
    let reason = "the run's --timeout of 20m expired".to_string();
    let r = run(&ABI, ktap, PASS_LOG, &HostEnd::Interrupted { after_ms: 900, reason });
    check(&r, "interrupted", &[Pass, NotRun, NotRun]);
    assert_eq!(r.scenarios[1].diagnostics.last().unwrap(), "the run's --timeout of 20m expired while it ran");
    assert_eq!(r.scenarios[2].diagnostics, ["not run: the run's --timeout of 20m expired"]);
}

#[test]
fn host_infra_error_wins() {
    let r = run(&ABI, "", "", &HostEnd::InfraError("qemu-system-aarch64: not found".into()));
    check(&r, "infra-error", &[NotRun, NotRun, NotRun]);
    assert_eq!(r.scenarios[0].diagnostics, ["not run: qemu-system-aarch64: not found"]);
    // Even over a panic.
    let r = run(&ABI, TRUNCATED, PANIC_LOG, &HostEnd::InfraError("lost the result channel".into()));
    assert_eq!(r.verdict.as_str(), "infra-error");
}

#[test]
fn plan_mismatch_and_bad_sentinel_fail() {
    let r = run(&["abi/register", "abi/read", "abi/enable"], PASS, PASS_LOG, &EXITED);
    check(&r, "fail", &[Pass, Pass, Pass]);
    assert_eq!(
        r.problems,
        [
            "the plan says scenario 2 is abi/read, the result channel says abi/write",
            "the plan says scenario 2 is abi/read, the console says abi/write",
        ]
    );
    let r = run(&ABI, BAD_SENTINEL, PASS_LOG, &EXITED);
    check(&r, "fail", &[Pass, Fail, Pass]);
    assert_eq!(r.problems.len(), 2);
    let r = run(&ABI[..2], PASS, PASS_LOG, &EXITED);
    assert_eq!(r.verdict.as_str(), "fail");
    assert_eq!(r.problems[0], "the plan has 2 scenarios, the result channel announced 3");
}

#[test]
fn boot_findings_and_poweroff_hangs_fail() {
    let log = PASS_LOG.replacen(
        "[    0.236712] Serial",
        "[    0.200000] BUG: scheduling while atomic: swapper/0/1/0x00000002\n[    0.236712] Serial",
        1,
    );
    let r = run(&ABI, PASS, &log, &EXITED);
    check(&r, "fail", &[Pass, Pass, Pass]);
    assert_eq!(r.findings.len(), 1);
    assert_eq!(r.findings[0].scenario, None);

    let r = run(&ABI, PASS, PASS_LOG, &HostEnd::WatchdogFired { after_ms: 5, reason: "r".into() });
    check(&r, "fail", &[Pass, Pass, Pass]);
    assert_eq!(r.problems, ["the VM did not power off after the sentinel: the watchdog fired after 5 ms"]);
}

#[test]
fn missing_result_with_sentinel_is_a_problem() {
    let ktap = PASS.replace("ok 3 abi/enable # time_ms=18 taint=0\n", "");
    let r = run(&ABI, &ktap, PASS_LOG, &EXITED);
    check(&r, "fail", &[Pass, Pass, NotRun]);
    assert!(r.problems.contains(&"scenario 3 (abi/enable) has no result although the stream has its sentinel".into()));
    assert_eq!(r.scenarios[2].console_tail.len(), TAIL_LINES.min(PASS_LOG.lines().count()));
}

#[test]
fn xfail_forgives_plain_failures_and_xpass_fails() {
    let marked = |names: &[&str]| -> BTreeMap<String, String> {
        names.iter().map(|n| (n.to_string(), "known kernel bug".to_string())).collect()
    };
    let none = std::collections::BTreeSet::new();
    let failing = run(&ABI, FAIL, FAIL_LOG, &EXITED);
    assert_eq!(failing.verdict, BootVerdict::Fail);

    let x = with_xfail(&failing, &marked(&[]), &BTreeMap::new(), &none);
    assert_eq!((x.verdict, x.marks), (BootVerdict::Fail, vec![None, None, None]), "no marks change nothing");

    let x = with_xfail(&failing, &marked(&["abi/write"]), &BTreeMap::new(), &none);
    assert_eq!((x.verdict, x.marks), (BootVerdict::Pass, vec![None, Some(Expected::Xfail), None]));

    let x = with_xfail(&failing, &marked(&["abi/write", "abi/register"]), &BTreeMap::new(), &none);
    assert_eq!(x.verdict, BootVerdict::Fail, "an xpass fails the boot");
    assert_eq!(x.marks, [Some(Expected::Xpass), Some(Expected::Xfail), None]);

    let x = with_xfail(&run(&ABI, PASS, PASS_LOG, &EXITED), &marked(&["abi/enable"]), &BTreeMap::new(), &none);
    assert_eq!((x.verdict, x.marks), (BootVerdict::Fail, vec![None, None, Some(Expected::Xpass)]));

    // A known bug whose fix (`fixed_by`) this kernel carries: the pass is `fixed`, not a failure;
    // the same bug still failing is an xfail as before.
    let fix = BTreeMap::from([("abi/enable".to_string(), "patches/upstream/0001-x.patch".to_string())]);
    let x = with_xfail(&run(&ABI, PASS, PASS_LOG, &EXITED), &marked(&["abi/enable"]), &fix, &none);
    assert_eq!((x.verdict, x.marks), (BootVerdict::Pass, vec![None, None, Some(Expected::Fixed)]));
    let fix = BTreeMap::from([("abi/write".to_string(), "patches/upstream/0001-x.patch".to_string())]);
    let x = with_xfail(&failing, &marked(&["abi/write"]), &fix, &none);
    assert_eq!((x.verdict, x.marks), (BootVerdict::Pass, vec![None, Some(Expected::Xfail), None]));

    // An intermittent bug (a race): a pass says nothing about the fix, so it is a plain pass;
    // a failure is still the xfail.
    let fix = BTreeMap::from([("abi/enable".to_string(), "patches/upstream/0001-x.patch".to_string())]);
    let racy = std::collections::BTreeSet::from(["abi/enable".to_string(), "abi/write".to_string()]);
    let x = with_xfail(&run(&ABI, PASS, PASS_LOG, &EXITED), &marked(&["abi/enable"]), &fix, &racy);
    assert_eq!((x.verdict, x.marks), (BootVerdict::Pass, vec![None, None, None]));
    let x = with_xfail(&failing, &marked(&["abi/write"]), &BTreeMap::new(), &racy);
    assert_eq!((x.verdict, x.marks), (BootVerdict::Pass, vec![None, Some(Expected::Xfail), None]));

    // A WARNING and a taint change are the kernel's health, which no mark excuses.
    let warned = run(&ABI, WARN, WARN_LOG, &EXITED);
    let x = with_xfail(&warned, &marked(&["abi/write"]), &BTreeMap::new(), &none);
    assert_eq!((x.verdict, x.marks), (BootVerdict::Fail, vec![None, None, None]));

    // Nor a timeout or a crash.
    let x = with_xfail(&run(&ABI, TIMEOUT, PASS_LOG, &EXITED), &marked(&["abi/write"]), &BTreeMap::new(), &none);
    assert_eq!((x.verdict, x.marks), (BootVerdict::Timeout, vec![None, None, None]));
    let names = ["abi/register", "fault/panic", "abi/write", "abi/enable"];
    let x = with_xfail(
        &run(&names, TRUNCATED, PANIC_LOG, &EXITED),
        &marked(&["fault/panic", "abi/write"]),
        &BTreeMap::new(),
        &none,
    );
    assert_eq!(x.verdict.as_str(), "kernel-panic");
    assert_eq!(x.marks, [None, None, None, None]);

    // A boot-level problem stays a failure even when every failing scenario is marked.
    let mismatched = run(&ABI[..2], FAIL, FAIL_LOG, &EXITED);
    let x = with_xfail(&mismatched, &marked(&["abi/write"]), &BTreeMap::new(), &none);
    assert_eq!((x.verdict, x.marks), (BootVerdict::Fail, vec![None, Some(Expected::Xfail)]));
}

#[test]
fn serializes_with_stable_names() {
    let r = run(&["abi/register", "fault/panic", "abi/write", "abi/enable"], TRUNCATED, PANIC_LOG, &EXITED);
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["verdict"], serde_json::json!({"kind": "kernel-panic", "detail": {"scenario": "fault/panic"}}));
    assert_eq!(json["scenarios"][1]["status"], "crashed");
    assert_eq!(json["scenarios"][2]["status"], "not-run");
    assert_eq!(json["scenarios"][1]["findings"][0]["kind"], "panic");
    assert_eq!(serde_json::to_value(BootVerdict::Pass).unwrap(), serde_json::json!({"kind": "pass"}));
    let statuses = [Pass, Fail, Skip, Timeout, NotRun, Crashed];
    for s in statuses {
        assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
    }
}
