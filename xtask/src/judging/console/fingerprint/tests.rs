//! Fingerprints of the console fixtures, and of edited copies: equal for the same crash on
//! another boot or arch, different for another call path.

use super::super::{scan, FindingKind};
use super::*;

const WARN: &str = include_str!("../../../../test_data/console/x86_64-warn.log");
const PANIC: &str = include_str!("../../../../test_data/console/x86_64-panic.log");
const KASAN: &str = include_str!("../../../../test_data/console/x86_64-kasan.log");
const HUNG: &str = include_str!("../../../../test_data/console/x86_64-hung-task.log");
const ARM64_OOPS: &str = include_str!("../../../../test_data/console/arm64-oops-panic.log");
const ARM64_REPORTS: &str = include_str!("../../../../test_data/console/arm64-reports.log");

fn prints(log: &str) -> Vec<(FindingKind, String)> {
    scan(log).findings.into_iter().map(|f| (f.kind, f.fingerprint)).collect()
}

fn one(log: &str) -> String {
    let found = scan(log).findings;
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_eq!(found[0].fingerprint_hash, hash(&found[0].fingerprint));
    found[0].fingerprint.clone()
}

#[test]
fn the_fixtures_fingerprints_skip_the_reporting_machinery() {
    assert_eq!(one(KASAN), "kasan:user_event_enabler_write<user_event_enabler_update<user_event_reg");
    // x86's WARN: the RIP's function first, the `? ` frames of the trap path left out.
    assert_eq!(one(WARN), "warning:user_events_write_core<user_events_write<vfs_write");
    assert_eq!(one(PANIC), "panic:lkdtm_PANIC<lkdtm_do_action<direct_entry");
    assert_eq!(one(HUNG), "hung-task:lkdtm_HUNG_TASK<lkdtm_do_action<direct_entry");
    assert_eq!(
        prints(ARM64_OOPS),
        [
            (FindingKind::Oops, "oops:lkdtm_ACCESS_NULL<lkdtm_do_action<direct_entry".to_string()),
            // No trace: the summary, numbers blurred.
            (FindingKind::Panic, "panic:Kernel panic - not syncing: Oops: Fatal exception".to_string()),
        ]
    );
    let arm64: Vec<String> = prints(ARM64_REPORTS).into_iter().map(|(_, f)| f).collect();
    assert_eq!(
        arm64,
        [
            // Its trace is past the excerpt's 60 lines: the frames come from every line.
            "lockdep:user_event_reg<user_events_ioctl<__arm64_sys_ioctl",
            "bug:lkdtm_BUG<lkdtm_do_action<direct_entry",
            "ubsan:lkdtm_ARRAY_BOUNDS<lkdtm_do_action<direct_entry",
            "bug:user_event_enabler_write<user_event_enabler_update<user_events_ioctl",
        ]
    );
}

#[test]
fn the_frames_keep_the_faulting_place_once_and_the_first_trace_only() {
    let f = &scan(KASAN).findings[0];
    assert_eq!(f.frames.first().map(String::as_str), Some("dump_stack_lvl+0x5d/0x80"));
    assert_eq!(f.frames.last().map(String::as_str), Some("entry_SYSCALL_64_after_hwframe+0x76/0x7e"));
    assert!(!f.frames.iter().any(|x| x.starts_with("kasan_save_stack")), "not the allocation's stack");
    assert!(!f.frames.iter().any(|x| x.starts_with("__virt_addr_valid")), "not a `? ` frame");
    let oops = &scan(ARM64_OOPS).findings[0];
    assert_eq!(oops.frames[..2], ["lkdtm_ACCESS_NULL+0x2c/0x58", "lkdtm_do_action+0x1c/0x38"]);
}

/// The KASAN fixture as another boot would print it: other times, addresses, pids, offsets.
fn another_boot(log: &str) -> String {
    log.replace("[    0.47", "[   12.87")
        .replace("ffff888004a1c2", "ffff888007f3e0")
        .replace("ue-probe/71", "ue-probe/4242")
        .replace("PID: 71", "PID: 4242")
        .replace("+0x3a2/0x3f0", "+0x3c6/0x420")
        .replace("+0x10d/0x1f0", "+0x12f/0x210")
        .replace("user_event_reg+0x1c4/0x300", "user_event_reg.constprop.0+0x1d0/0x310")
}

#[test]
fn the_same_crash_elsewhere_has_the_same_fingerprint() {
    let again = another_boot(KASAN);
    assert_ne!(again, KASAN);
    let (a, b) = (&scan(KASAN).findings[0], &scan(&again).findings[0]);
    assert_ne!(a.frames, b.frames);
    assert_eq!((&a.fingerprint, &a.fingerprint_hash), (&b.fingerprint, &b.fingerprint_hash));
    // arm64's BUG against the same BUG as x86 prints it: one fingerprint.
    let x86 = "[    1.0] ------------[ cut here ]------------\n\
        [    1.1] kernel BUG at drivers/misc/lkdtm/bugs.c:76!\n\
        [    1.2] Oops: invalid opcode: 0000 [#1] PREEMPT SMP NOPTI\n\
        [    1.3] CPU: 1 UID: 0 PID: 99 Comm: ue-agent Not tainted 6.12.117 #1\n\
        [    1.4] RIP: 0010:lkdtm_BUG+0x4/0x10\n\
        [    1.5] Call Trace:\n\
        [    1.6]  <TASK>\n\
        [    1.7]  ? __die_body+0x1a/0x60\n\
        [    1.8]  ? die+0x38/0x60\n\
        [    1.9]  ? do_trap+0xe0/0x110\n\
        [    2.0]  ? lkdtm_BUG+0x4/0x10\n\
        [    2.1]  lkdtm_do_action+0x18/0x40\n\
        [    2.2]  direct_entry+0xc9/0x130\n\
        [    2.3]  full_proxy_write+0x54/0x80\n\
        [    2.4]  </TASK>\n\
        [    2.5] ---[ end trace 0000000000000000 ]---\n";
    assert_eq!(one(x86), "bug:lkdtm_BUG<lkdtm_do_action<direct_entry");
}

#[test]
fn a_warning_on_arm64_is_the_same_warning_as_on_x86() {
    // arm64's WARN: its `pc`, then a trace that starts at the warning's function itself,
    // after the break handler's frames, with other offsets and lengths than x86's.
    let arm64 = "------------[ cut here ]------------\n\
        WARNING: CPU: 0 PID: 61 at kernel/trace/trace_events_user.c:2378 user_events_write_core+0x2c4/0x2f8\n\
        Modules linked in:\n\
        CPU: 0 UID: 0 PID: 61 Comm: ue-probe Not tainted 6.12.117 #1\n\
        Hardware name: linux,dummy-virt (DT)\n\
        pc : user_events_write_core+0x2c4/0x2f8\n\
        lr : user_events_write+0x3c/0x60\n\
        sp : ffff80008263bca0\n\
        Call trace:\n\
        \x20call_break_hook+0x2c/0x40\n\
        \x20brk_handler+0x20/0x80\n\
        \x20user_events_write_core+0x2c4/0x2f8\n\
        \x20user_events_write+0x3c/0x60\n\
        \x20vfs_write+0xd8/0x380\n\
        \x20ksys_write+0x70/0x108\n\
        ---[ end trace 0000000000000000 ]---\n";
    assert_eq!(one(arm64), one(WARN));
}

#[test]
fn another_call_path_has_another_fingerprint() {
    let other = KASAN.replace("user_event_enabler_update+0x10d/0x1f0", "user_event_mm_dup+0x10d/0x1f0");
    let (a, b) = (&scan(KASAN).findings[0], &scan(&other).findings[0]);
    assert_ne!(a.fingerprint, b.fingerprint);
    assert_ne!(a.fingerprint_hash, b.fingerprint_hash);
    // The same path reported as another kind is another crash.
    assert_ne!(fingerprint("kmsan", &a.frames, ""), a.fingerprint);
}

#[test]
fn frames_parse_and_machinery_is_named() {
    assert_eq!(split("el0_svc_common.constprop.0+0x40/0xe0"), Some(("el0_svc_common.constprop.0", (0x40, 0xe0))));
    assert_eq!(function("el0_svc_common.constprop.0+0x40/0xe0"), Some("el0_svc_common"));
    assert_eq!(function("foo_bar+0x1c/0x40 [user_events_test]"), Some("foo_bar"));
    assert_eq!(split("0x44a3b7"), None);
    assert_eq!(split("RIP: 0033:0x44a3b7"), None);
    for m in ["dump_stack_lvl", "__warn", "asm_exc_invalid_op", "kasan_report", "panic", "die", "__die_body"] {
        assert!(is_machinery(m), "{m}");
    }
    for f in ["user_event_reg", "diet", "panicky_driver", "vfs_write"] {
        assert!(!is_machinery(f), "{f}");
    }
    assert_eq!(
        fingerprint("panic", &[], "Kernel panic - not syncing: at 0xffff8880 pid 71"),
        "panic:Kernel panic - not syncing: at N pid N"
    );
    assert_eq!(hash("kasan:a<b").len(), 12);
    assert_eq!(hash("kasan:a<b"), hash("kasan:a<b"));
}
