//! The hygiene's tests, on a fake tracefs tree: what is undone, what the baseline check finds.

use super::*;

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ue-agent-hygiene-{}-{name}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn the_command_line_can_turn_it_off() {
    assert!(wanted("console=ttyS0 panic=-1"));
    assert!(!wanted("console=ttyS0 ue.hygiene=off panic=-1"));
    assert!(wanted("ue.hygiene=offx"));
}

#[test]
fn status_is_parsed() {
    let s = parse_status("eb_d2h # Used by ftrace\nfoo\n\nActive: 2\nBusy: 1\n");
    assert_eq!(s.events, ["eb_d2h # Used by ftrace", "foo"]);
    assert_eq!((s.active, s.busy), (Some(2), Some(1)));
    assert_eq!(parse_status("\nActive: 0\nBusy: 0\n"), Status { events: vec![], active: Some(0), busy: Some(0) });
}

#[test]
fn trigger_lines_become_their_removal() {
    let w = |s: &str| Some(TriggerRemoval::Write(s.into()));
    assert_eq!(trigger_removal("# Available triggers:"), None);
    assert_eq!(trigger_removal(""), None);
    assert_eq!(trigger_removal("traceon:unlimited"), w("!traceon"));
    assert_eq!(trigger_removal("traceoff:count=3 if a > 1"), w("!traceoff"));
    assert_eq!(trigger_removal("stacktrace:unlimited"), w("!stacktrace"));
    assert_eq!(
        trigger_removal("enable_event:user_events:ft_g8_dst:unlimited"),
        w("!enable_event:user_events:ft_g8_dst")
    );
    assert_eq!(trigger_removal("disable_hist:user_events:x:count=1"), w("!disable_hist:user_events:x"));
    assert_eq!(
        trigger_removal("hist:keys=a:vals=hitcount:sort=hitcount:size=2048 [active]"),
        Some(TriggerRemoval::Truncate)
    );
    assert_eq!(trigger_text("hist:keys=a:size=2048 [active]"), "hist:keys=a:size=2048");
}

#[test]
fn dynamic_lines_become_their_removal() {
    let cmd = |s: &str| Some(DynamicRemoval::Command(s.into()));
    assert_eq!(dynamic_removal("u:kp_k1 u32 a; s16 b"), Some(DynamicRemoval::User("kp_k1".into())));
    assert_eq!(dynamic_removal("u:bare"), Some(DynamicRemoval::User("bare".into())));
    // A tab is part of a user event's name (format/name-is-the-text-before-the-first-space):
    // split there, the delete missed the event and the check raced its own auto-delete.
    assert_eq!(dynamic_removal("u:fmt_b1\tx u32 a"), Some(DynamicRemoval::User("fmt_b1\tx".into())));
    assert_eq!(dynamic_removal("e:eprobes/kp_k1_probe user_events.kp_k1 a=$a:u32"), cmd("-:eprobes/kp_k1_probe"));
    assert_eq!(dynamic_removal("s:synthetic/kp_k5_lat\tu32 id; u64 lat"), cmd("-:synthetic/kp_k5_lat"));
    assert_eq!(dynamic_removal("r10:kprobes/r_foo foo"), cmd("-:kprobes/r_foo"));
    assert_eq!(dynamic_removal("  "), None);
}

#[test]
fn stats_and_labels() {
    assert_eq!(stats_entries("entries: 12\noverrun: 0\n"), Some(12));
    assert_eq!(stats_entries("nothing"), None);
    assert_eq!(event_label("user_events:eb_d2h"), "user event eb_d2h");
    assert_eq!(event_label("eprobes:kp_k3_probe"), "event eprobes:kp_k3_probe");
    assert_eq!(event_dir(Path::new("/t"), "user_events:x"), Path::new("/t/events/user_events/x"));
}

#[test]
fn a_clean_state_is_left_alone() {
    let dir = temp_dir("clean");
    let roots = fake_tree(&dir);
    let b = Baseline::take(&roots);
    assert_eq!(b.restore(), Cleanup::default());
    assert_eq!(fs::read_to_string(roots.tracefs.join("trace")).unwrap(), "# tracer: nop\n", "trace untouched");
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn leftovers_are_undone_and_named() {
    let dir = temp_dir("left");
    let roots = fake_tree(&dir);
    let t = roots.tracefs.clone();
    let b = Baseline::take(&roots);
    fs::write(t.join("set_event"), "user_events:ev_a\n").unwrap();
    fs::create_dir(t.join("instances/ue_x")).unwrap();
    fs::write(dir.join("sys/kernel/user_events_max"), "5\n").unwrap();
    fs::write(t.join("tracing_on"), "0\n").unwrap();
    fs::write(t.join("per_cpu/cpu1/stats"), "entries: 3\n").unwrap();
    let c = b.restore();
    assert_eq!(
        c.left,
        [
            "instance ue_x (removed)",
            "user event ev_a was enabled in ftrace (disabled)",
            "sysctl kernel.user_events_max 5 (restored to 32768)",
            "tracing_on 0 (restored to 1)",
        ]
    );
    assert_eq!(c.failed, Vec::<String>::new());
    assert_eq!(fs::read_to_string(t.join("set_event")).unwrap(), "");
    assert!(!t.join("instances/ue_x").exists());
    assert_eq!(fs::read_to_string(dir.join("sys/kernel/user_events_max")).unwrap(), "32768");
    assert_eq!(fs::read_to_string(t.join("trace")).unwrap(), "", "records cleared");
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn what_cannot_be_undone_is_a_failure() {
    let dir = temp_dir("failed");
    let roots = fake_tree(&dir);
    let t = roots.tracefs.clone();
    let b = Baseline::take(&roots);
    // A plain file takes neither the eprobe's removal (the command is appended as a line)
    // nor DIAG_IOCSDEL (ENOTTY, tried until the wait ends).
    fs::write(t.join("dynamic_events"), "u:ev_a u32 a\ne:eprobes/ev_p user_events.ev_a $a\n").unwrap();
    fs::write(t.join("user_events_status"), "ev_a\n\nActive: 1\nBusy: 0\n").unwrap();
    let c = b.restore();
    assert_eq!(c.left, ["dynamic event e:eprobes/ev_p (removed)"]);
    assert_eq!(
        c.failed,
        [
            "user event ev_a: DIAG_IOCSDEL: ENOTTY for 2 s",
            "dynamic event u:ev_a u32 a after cleanup",
            "dynamic event e:eprobes/ev_p user_events.ev_a $a after cleanup",
            "dynamic event -:eprobes/ev_p after cleanup",
            "user_events_status shows Active: 1 (ev_a) after cleanup",
        ]
    );
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn parts_missing_at_boot_are_not_watched() {
    let dir = temp_dir("empty");
    let roots = HygieneRoots::at(&dir.join("tracing"), &dir.join("sys"));
    let b = Baseline::take(&roots);
    assert_eq!(b.restore(), Cleanup::default());
    fs::remove_dir_all(&dir).unwrap();
}
