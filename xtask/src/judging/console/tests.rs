//! The console scanner against real logs of each arch and hand-made reports.

use super::report::{CUT_HERE, MAX_EXCERPT};
use super::FindingKind::*;
use super::*;

/// (kind, line, scenario index, truncated)
type Expected = (FindingKind, usize, Option<usize>, bool);

fn check(fixture: &str, expected: &[Expected]) -> Scan {
    let scan = scan(fixture);
    let got: Vec<Expected> =
        scan.findings.iter().map(|f| (f.kind, f.line, f.scenario.as_ref().map(|s| s.0), f.truncated)).collect();
    assert_eq!(got, expected, "{:#?}", scan.findings);
    for f in &scan.findings {
        assert!(!f.excerpt.is_empty() && f.excerpt.len() <= MAX_EXCERPT, "{f:?}");
        assert!(f.excerpt.contains(&f.summary), "the excerpt holds the header: {f:?}");
    }
    scan
}

const PASS: &str = include_str!("../../../test_data/console/x86_64-pass.log");
const FAIL: &str = include_str!("../../../test_data/console/x86_64-fail.log");
const WARN: &str = include_str!("../../../test_data/console/x86_64-warn.log");
const PANIC: &str = include_str!("../../../test_data/console/x86_64-panic.log");
const ARM64_OOPS: &str = include_str!("../../../test_data/console/arm64-oops-panic.log");
const KASAN: &str = include_str!("../../../test_data/console/x86_64-kasan.log");
/// A real `--profile kmsan` boot with `xtask/test_data/patches/kmsan-uninit-read.patch`.
const KMSAN: &str = include_str!("../../../test_data/console/x86_64-kmsan.log");
const HUNG: &str = include_str!("../../../test_data/console/x86_64-hung-task.log");
const TRUNCATED: &str = include_str!("../../../test_data/console/x86_64-truncated.log");
const ANSI: &str = include_str!("../../../test_data/console/x86_64-ansi-crlf.log");
const X86_REPORTS: &str = include_str!("../../../test_data/console/x86_64-reports.log");
const ARM64_REPORTS: &str = include_str!("../../../test_data/console/arm64-reports.log");

fn names(scan: &Scan) -> Vec<(usize, &str, usize, Option<usize>)> {
    scan.timeline.iter().map(|s| (s.index, s.name.as_str(), s.begin_line, s.end_line)).collect()
}

#[test]
fn clean_boots_have_no_findings_and_a_closed_timeline() {
    let scan = check(PASS, &[]);
    assert_eq!(
        names(&scan),
        [(1, "abi/register", 26, Some(27)), (2, "abi/write", 28, Some(29)), (3, "abi/enable", 30, Some(31))]
    );
    assert_eq!(scan.last_begun(), None);
    // A user-space segfault and its `Code:` line are not kernel findings.
    check(FAIL, &[]);
}

#[test]
fn warn_merges_with_its_cut_here_and_belongs_to_scenario_2() {
    let scan = check(WARN, &[(Warning, 30, Some(2), false)]);
    let f = &scan.findings[0];
    assert_eq!(
        f.summary,
        "WARNING: CPU: 1 PID: 58 at kernel/trace/trace_events_user.c:2378 user_events_write_core+0x2c5/0x2f0"
    );
    assert_eq!(f.scenario, Some((2, "abi/write".to_string())));
    assert_eq!(f.excerpt.first().map(String::as_str), Some(CUT_HERE));
    assert_eq!(f.excerpt.last().map(String::as_str), Some("---[ end trace 0000000000000000 ]---"));
    assert_eq!(f.excerpt.len(), 40);
    assert_eq!(f.excerpt[17], " <TASK>", "timestamps go, indentation stays");
    assert_eq!((f.pid, f.comm.as_deref(), f.taint_flags.as_deref()), (Some(58), Some("ue-probe"), Some("")));
    assert_eq!(f.describe(), "WARNING at kernel/trace/trace_events_user.c:2378 user_events_write_core+0x2c5/0x2f0");
}

#[test]
fn lkdtm_panic_in_scenario_2_of_4() {
    let scan = check(PANIC, &[(Panic, 30, Some(2), false)]);
    let f = &scan.findings[0];
    assert_eq!(f.summary, "Kernel panic - not syncing: dumptest");
    assert_eq!(f.excerpt.len(), 28);
    assert_eq!(f.excerpt.last().unwrap(), "---[ end Kernel panic - not syncing: dumptest ]---");
    assert_eq!(scan.last_begun(), Some((2, "fault/panic".to_string())));
    assert_eq!(f.pid, Some(58));
}

#[test]
fn arm64_oops_then_panic() {
    let scan = check(ARM64_OOPS, &[(Oops, 27, Some(2), false), (Panic, 74, Some(2), false)]);
    let oops = &scan.findings[0];
    assert_eq!(oops.summary, "Unable to handle kernel NULL pointer dereference at virtual address 0000000000000000");
    assert_eq!(oops.excerpt.len(), 47, "from the fault line through `end trace`, `Internal error` included");
    assert!(oops
        .excerpt
        .contains(&"[0000000000000000] pgd=0800000041c6f403, p4d=0800000041c6f403, pud=0000000000000000".to_string()));
    assert!(oops.excerpt.contains(&"pc : lkdtm_ACCESS_NULL+0x2c/0x58".to_string()));
    assert_eq!((oops.pid, oops.comm.as_deref()), (Some(61), Some("ue-agent")));
    let panic = &scan.findings[1];
    assert_eq!(panic.summary, "Kernel panic - not syncing: Oops: Fatal exception");
    assert_eq!(panic.excerpt.len(), 6);
    assert_eq!((panic.pid, panic.taint_flags.as_deref()), (None, None), "no stack dump after an oops");
}

#[test]
fn kasan_report_is_capped_and_ends_at_its_rule() {
    let scan = check(KASAN, &[(Kasan, 32, Some(3), true)]);
    let f = &scan.findings[0];
    assert_eq!(f.summary, "BUG: KASAN: slab-use-after-free in user_event_enabler_write+0x3a2/0x3f0");
    assert_eq!(f.excerpt.len(), MAX_EXCERPT);
    assert_eq!(f.excerpt[2], "", "blank report lines stay");
    assert_eq!((f.pid, f.comm.as_deref(), f.taint_flags.as_deref()), (Some(71), Some("ue-probe"), Some("")));
    assert_eq!(names(&scan)[2], (3, "abi/enable", 30, Some(113)));
}

#[test]
fn kmsan_report_ends_at_its_rule_and_names_its_scenario() {
    let scan = check(KMSAN, &[(Kmsan, 6, Some(1), false), (Kmsan, 29, Some(2), false), (Kmsan, 50, Some(2), true)]);
    let f = &scan.findings[0];
    assert_eq!(f.summary, "BUG: KMSAN: uninit-value in user_events_ioctl+0x221e/0x3240");
    assert!(f.excerpt.contains(&"Uninit was created at:".to_string()), "{f:?}");
    assert_eq!(f.excerpt.len(), 19, "from the header through the closing rule: {f:?}");
    assert_eq!(f.excerpt.last().map(String::as_str), Some("====================================================="));
    assert_eq!((f.pid, f.comm.as_deref()), (Some(40), Some("exe")));
}

#[test]
fn hung_task_while_the_log_stops() {
    let scan = check(HUNG, &[(HungTask, 30, Some(2), false)]);
    let f = &scan.findings[0];
    assert_eq!(f.excerpt.len(), 24, "through `</TASK>`");
    assert_eq!((f.pid, f.comm.as_deref(), f.taint_flags.as_deref()), (Some(59), Some("ue-agent"), Some("")));
    assert_eq!(scan.last_begun(), Some((2, "fault/hung-task".to_string())));
}

#[test]
fn truncated_oops_in_init() {
    let scan = check(TRUNCATED, &[(Oops, 29, Some(2), true)]);
    let f = &scan.findings[0];
    assert_eq!(f.excerpt.len(), 12);
    assert_eq!(f.excerpt[4], "Oops: Oops: 0000 [#1] PREEMPT SMP NOPTI", "the die line joins the fault report");
    assert_eq!(f.excerpt.last().unwrap(), "RDX: 00000000000");
    assert_eq!((f.pid, f.comm.as_deref()), (Some(1), Some("ue-agent")));
    assert_eq!(scan.last_begun(), Some((2, "abi/fork".to_string())));
}

#[test]
fn ansi_escapes_and_crlf_are_normalised() {
    let scan = check(ANSI, &[(Warning, 15, Some(1), false)]);
    let f = &scan.findings[0];
    assert_eq!(f.excerpt[0], CUT_HERE, "the escapes before the cut-here line are gone");
    assert!(f.excerpt.iter().all(|l| !l.contains(['\r', '\x1b'])));
    assert_eq!(names(&scan), [(1, "fault/warn", 12, Some(56)), (2, "abi/register", 58, Some(59))]);
    assert_eq!(
        tail(ANSI, 3),
        [
            "  ok 2 abi/register (15 ms)",
            "[    0.481640] ue-agent: sentinel written, powering off",
            "[    0.493851] reboot: Power down"
        ]
    );
    assert_eq!(tail(ANSI, 1000).len(), 62, "the empty line the final escape leaves is dropped");
    assert_eq!(tail(ANSI, 1000)[0], "SeaBIOS (version 1.16.3-debian-1.16.3-2)");
}

#[test]
fn x86_reports_with_caller_ids() {
    let scan = check(
        X86_REPORTS,
        &[
            (Bug, 10, Some(1), false),
            (RcuStall, 53, Some(1), false),
            (Kfence, 86, Some(2), false),
            (CutHere, 115, None, true),
        ],
    );
    let [lockup, rcu, kfence, cut] = &scan.findings[..] else { unreachable!() };
    assert_eq!(lockup.summary, "watchdog: BUG: soft lockup - CPU#1 stuck for 22s! [ue-agent:57]");
    assert_eq!((lockup.excerpt.len(), lockup.pid, lockup.taint_flags.as_deref()), (43, Some(57), Some("")));
    assert_eq!(
        rcu.excerpt[1],
        "rcu: \t1-....: (20999 ticks this GP) idle=b7c4/1/0x4000000000000000 softirq=1406/1406 fqs=5208"
    );
    assert_eq!(rcu.taint_flags.as_deref(), Some("G             L"));
    assert_eq!((kfence.excerpt.len(), kfence.pid, kfence.comm.as_deref()), (25, Some(60), Some("ue-probe")));
    assert_eq!(cut.excerpt, [CUT_HERE]);
    assert_eq!(scan.last_begun(), None);
}

#[test]
fn arm64_reports_without_timestamps() {
    let scan = check(
        ARM64_REPORTS,
        &[
            (Lockdep, 15, Some(1), true),
            (Bug, 103, Some(2), false),
            (Ubsan, 144, Some(3), false),
            (Bug, 172, Some(4), false),
        ],
    );
    let [lockdep, bug, ubsan, sleep] = &scan.findings[..] else { unreachable!() };
    assert_eq!(lockdep.summary, "WARNING: possible circular locking dependency detected");
    assert_eq!(lockdep.excerpt.len(), MAX_EXCERPT);
    assert_eq!(
        (lockdep.pid, lockdep.comm.as_deref(), lockdep.taint_flags.as_deref()),
        (Some(64), Some("ue-probe"), Some("")),
        "read past the excerpt cap"
    );
    assert_eq!(bug.summary, "kernel BUG at drivers/misc/lkdtm/bugs.c:76!");
    assert_eq!((bug.excerpt.len(), bug.excerpt[0].as_str()), (36, CUT_HERE));
    assert_eq!(bug.excerpt[2], "Internal error: Oops - BUG: 00000000f2000800 [#1] PREEMPT SMP");
    assert_eq!(ubsan.summary, "UBSAN: array-index-out-of-bounds in drivers/misc/lkdtm/bugs.c:376:16");
    assert_eq!((ubsan.excerpt.len(), ubsan.taint_flags.as_deref()), (25, Some("G      D")));
    assert_eq!(ubsan.excerpt.last().unwrap(), "---[ end trace ]---");
    assert_eq!((sleep.excerpt.len(), sleep.pid), (25, Some(67)), "the arm64 trace ends at the next unindented line");
    assert_eq!(sleep.excerpt.last().unwrap(), " el0t_64_sync+0x190/0x198");
}

#[test]
fn one_line_reports_are_classified() {
    let cases: &[(&str, Option<FindingKind>)] = &[
        ("[    1.000000] Kernel panic - not syncing: VFS: Unable to mount root fs", Some(Panic)),
        ("Oops: 0002 [#1] SMP", Some(Oops)),
        ("[    2.5] BUG: unable to handle page fault for address: ffffffffc0000000", Some(Oops)),
        (
            "Oops: general protection fault, probably for non-canonical address 0xdead000000000100: 0000 [#1]",
            Some(Oops),
        ),
        ("BUG: scheduling while atomic: ue-probe/70/0x00000002", Some(Bug)),
        ("BUG: KFENCE: use-after-free read in f+0x1/0x2", Some(Kfence)),
        ("BUG kmalloc-64 (Not tainted): Right Redzone overwritten", Some(Bug)),
        ("WARNING: inconsistent lock state", Some(Lockdep)),
        ("WARNING: suspicious RCU usage", Some(Lockdep)),
        ("rcu: INFO: rcu_sched detected stalls on CPUs/tasks:", Some(RcuStall)),
        ("INFO: task kworker/0:1:12 blocked for more than 120 seconds.", Some(HungTask)),
        ("lkdtm: FAIL: survived array bounds overflow!", None),
        ("ue-probe[58]: segfault at 0 ip 0000000000401a2c sp 00007ffd2c9e1e40 error 4", None),
        ("    BUG: indented text is not a report header", None),
    ];
    for (line, kind) in cases {
        let scan = scan(line);
        assert_eq!(scan.findings.first().map(|f| f.kind), *kind, "{line}");
    }
    let hung = scan("INFO: task kworker/0:1:12 blocked for more than 120 seconds.");
    assert_eq!((hung.findings[0].pid, hung.findings[0].comm.as_deref()), (Some(12), Some("kworker/0:1")));
}

#[test]
fn cut_here_followed_by_unrelated_lines_stays_a_cut_here() {
    let log = "------------[ cut here ]------------\na\nb\nc\nd\ne\nf\nWARNING: CPU: 0 PID: 1 at x.c:1 f+0x1/0x2\n";
    let scan = scan(log);
    let kinds: Vec<_> = scan.findings.iter().map(|f| (f.kind, f.line)).collect();
    assert_eq!(kinds, [(CutHere, 1), (Warning, 8)]);
}

#[test]
fn attribution_follows_begin_and_end() {
    let log = "\
BUG: scheduling while atomic: a/1/0x2
ue-agent: begin 1 a/b
BUG: scheduling while atomic: a/2/0x2
ue-agent: end 1
BUG: scheduling while atomic: a/3/0x2
ue-agent: begin 2 a/c
ue-agent: end 7
BUG: scheduling while atomic: a/4/0x2
ue-agent: begin 3 a/d
";
    let scan = scan(log);
    let got: Vec<_> = scan.findings.iter().map(|f| f.scenario.clone()).collect();
    assert_eq!(got, [None, Some((1, "a/b".into())), None, Some((2, "a/c".into()))], "a stray end closes nothing");
    assert_eq!(scan.last_begun(), Some((3, "a/d".to_string())));
}

#[test]
fn timestamps_are_stripped() {
    assert_eq!(message("[    1.234567] hi"), "hi");
    assert_eq!(message("[   12.000001][    T1] hi"), "hi");
    assert_eq!(message("[0000000000000000] pgd=0"), "[0000000000000000] pgd=0");
    assert_eq!(message("no stamp"), "no stamp");
    assert_eq!(message("[    1.234567]"), "");
}

#[test]
fn tail_of_short_and_empty_logs() {
    assert_eq!(tail("", 5), Vec::<String>::new());
    assert_eq!(tail("a\nb\n\n\n", 5), ["a", "b"]);
    assert_eq!(tail(PANIC, 2).last().unwrap(), "[    0.453398] ---[ end Kernel panic - not syncing: dumptest ]---");
}
