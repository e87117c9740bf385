//! The symbolizer's parsers on binutils' output, and the whole path on a small C program
//! built with and without debug info (skipped on a host without `cc` and binutils).

use std::path::Path;

use super::*;

#[test]
fn nm_text_symbols_and_the_frame_address_decode_stacktrace_takes() {
    let nm = "ffffffff81001000 0000000000000040 T user_event_reg\n\
              ffffffff81002000 0000000000000090 t helper\n\
              ffffffff81003000 0000000000000020 t helper\n\
              ffffffff82000000 D some_data\n\
              ffffffff81004000 W weak_one\n\
              garbage\n";
    let table = parse_nm(nm);
    assert_eq!(table.len(), 3, "{table:?}");
    assert_eq!(address("user_event_reg+0x1c/0x40", &table), Some(0xffff_ffff_8100_101c));
    // Two `helper`s: the one whose size is the frame's length.
    assert_eq!(address("helper+0x8/0x20", &table), Some(0xffff_ffff_8100_3008));
    assert_eq!(address("helper+0x8/0x99", &table), Some(0xffff_ffff_8100_2008), "else the first");
    assert_eq!(address("weak_one+0x0/0x10", &table), Some(0xffff_ffff_8100_4000));
    assert_eq!(address("some_data+0x0/0x8", &table), None, "not text");
    assert_eq!(address("missing+0x0/0x8", &table), None);
}

#[test]
fn addr2line_groups_follow_each_address_with_inlined_callers_and_no_place_without_dwarf() {
    let out = "0xffffffff8100101c\n\
               copy_word\n\
               /c/trees/abc/src/kernel/trace/trace_events_user.c:412\n\
               user_event_enabler_write\n\
               /c/trees/abc/src/kernel/trace/trace_events_user.c:470\n\
               0xffffffff81003008\n\
               ??\n\
               ??:0\n\
               0xffffffff81004000\n\
               print_report\n\
               report.c:?\n";
    assert_eq!(
        parse_addr2line(out),
        [
            (
                0xffff_ffff_8100_101c,
                vec![
                    "copy_word kernel/trace/trace_events_user.c:412".to_string(),
                    "user_event_enabler_write kernel/trace/trace_events_user.c:470".to_string(),
                ]
            ),
            (0xffff_ffff_8100_3008, vec![]),
            (0xffff_ffff_8100_4000, vec![]),
        ]
    );
}

/// `cc` on a tiny program: `-g` or not.
fn build(dir: &Path, debug: bool) -> Option<std::path::PathBuf> {
    let src = dir.join("p.c");
    std::fs::write(&src, "int twice(int x) { return x * 2; }\nint main(void) { return twice(3) - 6; }\n").ok()?;
    let out = dir.join(if debug { "with" } else { "without" });
    let status = Command::new("cc")
        .arg(if debug { "-g" } else { "-g0" })
        .args(["-O0", "-o"])
        .arg(&out)
        .arg(&src)
        .status()
        .ok()?;
    status.success().then_some(out)
}

#[test]
fn a_program_with_dwarf_resolves_and_one_without_says_so() {
    let tmp = tempfile::tempdir().unwrap();
    let (Some(with), Some(without)) = (build(tmp.path(), true), build(tmp.path(), false)) else {
        eprintln!("no cc: skipped");
        return;
    };
    assert!(has_debug_info(&with).unwrap());
    assert!(!has_debug_info(&without).unwrap());
    assert!(has_debug_info(&tmp.path().join("p.c")).is_err(), "not ELF");
    let Ok(symbols) = resolve(&with, "", &["twice+0x4/0x10".to_string(), "nowhere+0x0/0x1".to_string()]) else {
        eprintln!("no binutils: skipped");
        return;
    };
    let places = &symbols.frames["twice+0x4/0x10"];
    assert!(places[0].starts_with("twice ") && places[0].contains("p.c:1"), "{places:?}");
    assert!(!symbols.frames.contains_key("nowhere+0x0/0x1"));
}

#[test]
fn attach_fills_the_frames_it_knows() {
    let tmp = tempfile::tempdir().unwrap();
    let symbols = Symbols {
        vmlinux: "/k/vmlinux".into(),
        frames: BTreeMap::from([("f+0x1/0x2".to_string(), vec!["f a.c:3".to_string()])]),
    };
    std::fs::write(tmp.path().join(SYMBOLS), serde_json::to_vec(&symbols).unwrap()).unwrap();
    let frame = |f: &str| super::super::model::Frame { frame: f.into(), source: vec![] };
    let finding = Finding { frames: vec![frame("f+0x1/0x2"), frame("g+0x1/0x2")], ..Finding::default() };
    let mut run = super::super::tests::fixture();
    let boot = &mut run.arches[0].boots[0];
    boot.findings = vec![finding];
    attach(tmp.path(), boot, &mut []);
    assert_eq!(boot.findings[0].frames[0].source, ["f a.c:3"]);
    assert!(boot.findings[0].frames[1].source.is_empty());
}
