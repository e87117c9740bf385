//! The dispatcher's tests: steps of every area run as a plan gives them, with the exact lines
//! they say.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use protocol::{Addr, Expect, RawReg, RawUnreg, Step, Value};

use super::*;
use crate::files::SHOWN_LINES;
use crate::memory::KERNEL_ADDR;

fn run(steps: &[Step]) -> (i32, Vec<String>) {
    let mut out = Vec::new();
    let status = run_steps(steps, &mut out);
    (status, String::from_utf8(out).unwrap().lines().map(String::from).collect())
}

fn exec(argv: &[&str], expect_exit: i32) -> Step {
    Step::Exec { argv: argv.iter().map(|s| s.to_string()).collect(), expect_exit }
}

#[test]
fn exec_compares_the_exit_status() {
    let (status, lines) = run(&[exec(&["/bin/true"], 0), exec(&["/bin/false"], 1)]);
    assert_eq!(status, 0, "{lines:?}");
    assert_eq!(lines, ["step 1: exec /bin/true: exit 0 (expected 0)", "step 2: exec /bin/false: exit 1 (expected 1)"]);

    let (status, lines) = run(&[exec(&["/bin/false"], 0), exec(&["/bin/true"], 0)]);
    assert_eq!(status, 1);
    assert_eq!(lines, ["step 1: exec /bin/false: exit 1 (expected 0)"], "stops at the first failure");
}

#[test]
fn exec_failures_and_skips() {
    let (status, lines) = run(&[exec(&["/nonexistent/prog"], 0)]);
    assert_eq!((status, lines[0].as_str()), (1, "step 1: exec /nonexistent/prog: cannot start: ENOENT"));
    let (status, lines) = run(&[exec(&["/bin/sh", "-c", "exit 4"], 0)]);
    assert_eq!(status, protocol::EXIT_SKIP, "{lines:?}");
    let (status, lines) = run(&[exec(&["/bin/sh", "-c", "kill -9 $$"], 0)]);
    assert_eq!(status, 1);
    assert!(lines[0].ends_with("killed by signal 9 (expected exit 0)"), "{lines:?}");
    assert_eq!(run(&[Step::Exec { argv: vec![], expect_exit: 0 }]).0, 1);
}

fn write_file(path: &Path, data: &str, create: bool, append: bool, expect: &str) -> Step {
    let path = path.display().to_string();
    Step::WriteFile { path, data: data.into(), create, append, expect: expect.parse().unwrap(), within_ms: 0 }
}

fn read_file(path: &Path, equals: Option<&str>, contains: &[&str], lacks: &[&str], expect: &str) -> Step {
    let strings = |l: &[&str]| l.iter().map(|s| s.to_string()).collect();
    Step::ReadFile {
        path: path.display().to_string(),
        equals: equals.map(String::from),
        contains: strings(contains),
        lacks: strings(lacks),
        includes: vec![],
        excludes: vec![],
        head_hex: None,
        expect: expect.parse().unwrap(),
        within_ms: 0,
        keep_as: None,
        equals_kept: None,
    }
}

#[test]
fn read_file_keeps_a_content_that_a_later_read_must_equal() {
    let path = temp_path("kept");
    fs::write(&path, "312\n").unwrap();
    let with = |keep: Option<&str>, kept: Option<&str>| {
        let mut step = read_file(&path, None, &[], &[], "ok");
        if let Step::ReadFile { keep_as, equals_kept, .. } = &mut step {
            (*keep_as, *equals_kept) = (keep.map(String::from), kept.map(String::from));
        }
        step
    };
    let (keep, same) = (with(Some("id"), None), with(None, Some("id")));
    let (status, lines) = run(&[keep.clone(), same.clone()]);
    assert_eq!(status, 0, "{lines:?}");
    assert!(lines[1].ends_with("kept as id: \"312\\n\""), "{lines:?}");
    let change = write_file(&path, "313\n", false, false, "ok");
    let (status, lines) = run(&[keep, change, same.clone()]);
    assert_eq!(status, 1);
    assert!(lines.iter().any(|l| l.ends_with("content is not the expected \"312\\n\"")), "{lines:?}");
    let (status, lines) = run(&[same]);
    assert_eq!((status, lines.last().unwrap().ends_with("nothing was kept as id")), (1, true), "{lines:?}");
    fs::remove_file(&path).unwrap();
}

#[test]
fn read_file_includes_and_excludes_text_anywhere() {
    let path = temp_path("includes");
    fs::write(&path, "  ue-agent-12  [000] .....  1.234: ev: a=5 b=6\n").unwrap();
    let step = |includes: &[&str], excludes: &[&str]| Step::ReadFile {
        path: path.display().to_string(),
        equals: None,
        contains: vec![],
        lacks: vec![],
        includes: includes.iter().map(|s| s.to_string()).collect(),
        excludes: excludes.iter().map(|s| s.to_string()).collect(),
        head_hex: None,
        expect: Expect::default(),
        within_ms: 0,
        keep_as: None,
        equals_kept: None,
    };
    assert_eq!(run(&[step(&["ev: a=5 b=6"], &["a=7"])]).0, 0);
    let (status, lines) = run(&[step(&["a=7"], &[])]);
    assert_eq!(status, 1);
    assert!(lines.iter().any(|l| l.contains("does not include \"a=7\"")), "{lines:?}");
    let (status, lines) = run(&[step(&[], &["b=6"])]);
    assert_eq!(status, 1);
    assert!(lines.iter().any(|l| l.contains("includes \"b=6\"")), "{lines:?}");
    fs::remove_file(&path).unwrap();
}

fn temp_path(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("ue-agent-step-{}-{name}", std::process::id()))
}

#[test]
fn mkdir_rmdir_and_head_hex() {
    let dir = temp_path("dir");
    let d = dir.display().to_string();
    let mk = Step::Mkdir { path: d.clone(), expect: Expect::default() };
    assert_eq!(run(&[mk]).0, 0);
    let (status, lines) = run(&[Step::Mkdir { path: d.clone(), expect: "EEXIST".parse().unwrap() }]);
    assert_eq!((status, lines), (0, vec![format!("step 1: mkdir {d}: EEXIST (expected EEXIST)")]));
    let file = dir.join("bin");
    fs::write(&file, [1u8, 0, 0xff, 7]).unwrap();
    let head = |hex: &str| Step::ReadFile {
        path: file.display().to_string(),
        equals: None,
        contains: vec![],
        lacks: vec![],
        includes: vec![],
        excludes: vec![],
        head_hex: Some(hex.into()),
        expect: Expect::default(),
        within_ms: 0,
        keep_as: None,
        equals_kept: None,
    };
    assert_eq!(run(&[head("0100ff")]).0, 0);
    let (status, lines) = run(&[head("0200")]);
    assert_eq!(status, 1);
    assert!(lines[1].ends_with("starts with 0100ff07, not 0200"), "{lines:?}");
    let rm = Step::Rmdir { path: d.clone(), expect: "ENOTEMPTY".parse().unwrap() };
    assert_eq!(run(&[rm]).0, 0);
    fs::remove_file(&file).unwrap();
    assert_eq!(run(&[Step::Rmdir { path: d, expect: Expect::default() }]).0, 0);
}

#[test]
fn write_file_writes_without_truncating() {
    let path = temp_path("write");
    fs::write(&path, "0123456789").unwrap();
    let (status, lines) = run(&[write_file(&path, "ab\n", false, false, "ok"), Step::Sleep { ms: 1 }]);
    assert_eq!(status, 0);
    assert_eq!(
        lines,
        [format!("step 1: write \"ab\\n\" to {}: ok (expected ok)", path.display()), "step 2: sleep 1 ms".into()]
    );
    assert_eq!(fs::read_to_string(&path).unwrap(), "ab\n3456789");
    fs::remove_file(&path).unwrap();

    let (status, lines) = run(&[write_file(&path, "x", false, false, "ok")]);
    assert_eq!(status, 1);
    assert!(lines[0].ends_with(": open: ENOENT (expected ok)"), "{lines:?}");
    let (status, lines) = run(&[write_file(&path, "x", false, false, "ENOENT")]);
    assert_eq!(status, 0, "{lines:?}");

    let created = write_file(&path, "new", true, false, "ok");
    assert_eq!(run(std::slice::from_ref(&created)).0, 0);
    fs::write(&path, "longer old content").unwrap();
    assert_eq!(run(&[created]).0, 0);
    assert_eq!(fs::read_to_string(&path).unwrap(), "new", "create replaces the content");
    fs::remove_file(&path).unwrap();
}

#[test]
fn write_file_appends_and_counts() {
    let path = temp_path("append");
    fs::write(&path, "one\n").unwrap();
    let (status, lines) = run(&[write_file(&path, "two\n", false, true, "4")]);
    assert_eq!(status, 0, "{lines:?}");
    assert_eq!(lines, [format!("step 1: write \"two\\n\" to {} (append): ok (expected 4)", path.display())]);
    assert_eq!(run(&[write_file(&path, "3\n", true, true, "ok")]).0, 0, "create with append keeps the content");
    assert_eq!(fs::read_to_string(&path).unwrap(), "one\ntwo\n3\n");
    assert_eq!(run(&[write_file(&path, "x", false, true, "2")]).0, 1, "a count is exact");
    assert_eq!(run(&[write_file(&path, "x", false, true, "EINVAL")]).0, 1, "success is not an errno");
    fs::remove_file(&path).unwrap();
}

#[test]
fn write_errors_name_the_errno() {
    // A directory opens for writing with EISDIR.
    let (status, lines) = run(&[write_file(Path::new("/"), "x", false, false, "ok")]);
    assert_eq!(status, 1);
    assert_eq!(lines, ["step 1: write \"x\" to /: open: EISDIR (expected ok)"]);
}

#[test]
fn read_file_compares_whole_content_and_lines() {
    let path = temp_path("read");
    fs::write(&path, "name: ev\nfield:u32 a;  \n\tprint fmt\n").unwrap();
    let whole = "name: ev\nfield:u32 a;  \n\tprint fmt\n";
    let (status, lines) = run(&[read_file(&path, Some(whole), &["field:u32 a;", "name: ev  "], &["u32 a"], "ok")]);
    assert_eq!(status, 0, "{lines:?}");
    assert_eq!(lines, [format!("step 1: read {}: 35 bytes, 3 lines (expected ok)", path.display())]);
    assert_eq!(run(&[read_file(&path, None, &["\tprint fmt"], &[], "35")]).0, 0);

    let (status, lines) = run(&[read_file(&path, Some("name: ev\n"), &["name"], &["name: ev"], "ok")]);
    assert_eq!(status, 1);
    let p = path.display();
    assert_eq!(
        lines,
        [
            format!("step 1: read {p}: 35 bytes, 3 lines (expected ok)"),
            format!("step 1: read {p}: content is not the expected \"name: ev\\n\""),
            format!("step 1: read {p}: no line \"name\""),
            format!("step 1: read {p}: has line \"name: ev\""),
            format!("step 1: read {p}: first 3 of 3 lines:"),
            "step 1: | name: ev".into(),
            "step 1: | field:u32 a;  ".into(),
            "step 1: | \tprint fmt".into(),
        ]
    );
    fs::remove_file(&path).unwrap();

    let (status, lines) = run(&[read_file(&path, None, &[], &[], "ENOENT")]);
    assert_eq!((status, lines), (0, vec![format!("step 1: read {p}: open: ENOENT (expected ENOENT)")]));
    assert_eq!(run(&[read_file(&path, None, &[], &[], "ok")]).0, 1);
    let (status, lines) = run(&[read_file(Path::new("/"), None, &[], &[], "EISDIR")]);
    assert_eq!((status, lines), (0, vec!["step 1: read /: EISDIR (expected EISDIR)".into()]));
}

#[test]
fn a_long_mismatch_shows_the_first_lines() {
    let path = temp_path("long");
    let content: String = (0..50).map(|i| format!("line {i}\n")).collect();
    fs::write(&path, &content).unwrap();
    let (status, lines) = run(&[read_file(&path, None, &["line 50"], &[], "ok")]);
    assert_eq!(status, 1);
    assert_eq!(lines.len(), 3 + SHOWN_LINES, "{lines:?}");
    assert!(lines[2].ends_with("first 20 of 50 lines:"), "{lines:?}");
    assert_eq!(lines.last().unwrap(), "step 1: | line 19");
    fs::remove_file(&path).unwrap();
}

/// The user_events steps keep their state across steps of one scenario.
#[test]
fn user_events_steps_share_the_scenario_state() {
    let path = temp_path("state");
    fs::write(&path, "").unwrap();
    let mut state = ScenarioState::with_data_path(path.clone());
    let steps = [
        Step::SetWord { word: "w".into(), value: 6 },
        Step::CheckBit { word: "w".into(), bit: 2, set: true, within_ms: 0 },
        Step::Write {
            fd: protocol::DATA_FD.into(),
            index: None,
            index_value: Some(1),
            fields: vec![protocol::Value::Text("x".into())],
            vectored: true,
            offset: None,
            payload_from: None,
            expect: Expect::default(),
        },
        Step::Close { fd: protocol::DATA_FD.into() },
        read_file(&path, Some("\u{1}\0\0\0x"), &[], &[], "5"),
    ];
    let mut out = Vec::new();
    let status = run_steps_in(&mut state, &steps, &mut out);
    assert_eq!(status, 0, "{}", String::from_utf8_lossy(&out));
    fs::remove_file(&path).unwrap();
}

// The user_events steps, one at a time on a state of their own.

fn temp_file(name: &str, content: &[u8]) -> PathBuf {
    let path = std::env::temp_dir().join(format!("ue-agent-uevents-{}-{name}", std::process::id()));
    fs::write(&path, content).unwrap();
    path
}

fn run1(state: &mut ScenarioState, step: Step) -> (StepOutcome, Vec<String>) {
    let mut lines = Vec::new();
    let outcome = run_step(&step, state, &mut |l: &str| lines.push(l.to_string()));
    (outcome, lines)
}

fn expect(e: &str) -> Expect {
    e.parse().unwrap()
}

fn register(word: Option<&str>, raw: RawReg, e: &str) -> Step {
    Step::Register {
        fd: protocol::DATA_FD.into(),
        format: "ev u32 a".into(),
        word: word.map(String::from),
        bit: 0,
        size: 4,
        flags: 0,
        index_as: Some("i".into()),
        expect_index: None,
        raw,
        minor_faults: None,
        expect: expect(e),
    }
}

#[test]
fn set_and_check_words() {
    let mut s = ScenarioState::default();
    let set = |w: &str, v| Step::SetWord { word: w.into(), value: v };
    let word = |w: &str, v| Step::CheckWord { word: w.into(), value: v, or: vec![], within_ms: 0 };
    let bit = |b, set| Step::CheckBit { word: "w".into(), bit: b, set, within_ms: 0 };
    assert_eq!(run1(&mut s, word("w", 0)), (StepOutcome::Pass, vec!["check word w: 0x0 (expected 0x0)".into()]));
    assert_eq!(run1(&mut s, set("w", 0x8000_0001)).1, ["set word w = 0x80000001: ok"]);
    assert_eq!(run1(&mut s, word("w", 0x8000_0001)).0, StepOutcome::Pass);
    assert_eq!(run1(&mut s, word("v", 0)).0, StepOutcome::Pass, "another word is untouched");
    assert_eq!(
        run1(&mut s, bit(31, true)),
        (StepOutcome::Pass, vec!["check word w bit 31: set, word 0x80000001 (expected set)".into()])
    );
    assert_eq!(run1(&mut s, bit(0, true)).0, StepOutcome::Pass);
    assert_eq!(run1(&mut s, bit(1, false)).0, StepOutcome::Pass);
    assert_eq!(
        run1(&mut s, bit(1, true)),
        (StepOutcome::Fail, vec!["check word w bit 1: clear, word 0x80000001 (expected set)".into()])
    );
    assert_eq!(run1(&mut s, word("w", 1)).0, StepOutcome::Fail);
    assert_eq!(run1(&mut s, bit(64, true)).0, StepOutcome::Fail);
}

#[test]
fn check_bit_polls_until_the_bit_changes() {
    let mut s = ScenarioState::default();
    let addr = s.events.word(Some("w")).unwrap() as usize;
    let setter = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(20));
        // SAFETY: the word stays mapped: the State outlives the join below.
        unsafe { &*(addr as *const AtomicU64) }.fetch_or(1 << 5, Ordering::SeqCst);
    });
    let (outcome, lines) = run1(&mut s, Step::CheckBit { word: "w".into(), bit: 5, set: true, within_ms: 2000 });
    setter.join().unwrap();
    assert_eq!(outcome, StepOutcome::Pass, "{lines:?}");
    let waited: u64 = lines[0].split(" after ").nth(1).unwrap().split(' ').next().unwrap().parse().unwrap();
    assert!((15..2000).contains(&waited), "{lines:?}");
    assert!(lines[0].ends_with("ms, word 0x20 (expected set within 2000 ms)"), "{lines:?}");

    let start = Instant::now();
    let (outcome, lines) = run1(&mut s, Step::CheckBit { word: "w".into(), bit: 5, set: false, within_ms: 30 });
    assert_eq!(outcome, StepOutcome::Fail, "{lines:?}");
    assert!(start.elapsed() >= Duration::from_millis(30));
    assert!(lines[0].starts_with("check word w bit 5: still set after "), "{lines:?}");
    assert!(lines[0].ends_with("(expected clear within 30 ms)"), "{lines:?}");
}

#[test]
fn writes_index_then_fields_plain_and_vectored() {
    let path = temp_file("write", b"");
    let mut s = ScenarioState::with_data_path(path.clone());
    let fields = vec![Value::U32(0x0102_0304), Value::Cstr("hi".into()), Value::Loc { offset: 8, size: 3 }];
    let write = |vectored, e: &str| Step::Write {
        fd: protocol::DATA_FD.into(),
        index: None,
        index_value: Some(7),
        fields: fields.clone(),
        vectored,
        offset: None,
        payload_from: None,
        expect: expect(e),
    };
    let (outcome, lines) = run1(&mut s, write(false, "ok"));
    assert_eq!(outcome, StepOutcome::Pass, "{lines:?}");
    assert_eq!(
        lines,
        ["write index 7 + 3 fields (15 bytes: 07000000 04030201 686900 08000300): ok, 15 bytes (expected ok)"]
    );
    let (outcome, lines) = run1(&mut s, write(true, "15"));
    assert_eq!(outcome, StepOutcome::Pass, "{lines:?}");
    assert!(lines[0].starts_with("writev index 7 + 3 fields in 4 iovecs (15 bytes: "), "{lines:?}");
    assert_eq!(run1(&mut s, write(false, "14")).0, StepOutcome::Fail, "a number is the exact count");
    let once: Vec<u8> = [7, 0, 0, 0, 4, 3, 2, 1, b'h', b'i', 0, 8, 0, 3, 0].to_vec();
    assert_eq!(fs::read(&path).unwrap(), [once.clone(), once.clone(), once].concat());

    // A named index must exist; an index is required.
    let named = Step::Write {
        fd: protocol::DATA_FD.into(),
        index: Some("nope".into()),
        index_value: None,
        fields: vec![],
        vectored: false,
        offset: None,
        payload_from: None,
        expect: expect("ok"),
    };
    assert_eq!(run1(&mut s, named), (StepOutcome::Fail, vec!["write: no write index named nope".into()]));
    let none = Step::Write {
        fd: protocol::DATA_FD.into(),
        index: None,
        index_value: None,
        fields: vec![],
        vectored: false,
        offset: None,
        payload_from: None,
        expect: expect("ok"),
    };
    assert_eq!(run1(&mut s, none).0, StepOutcome::Fail);
    fs::remove_file(&path).unwrap();
}

#[test]
fn pwrite_offsets_and_payloads_from_elsewhere() {
    let path = temp_file("pwrite", b"");
    let mut s = ScenarioState::with_data_path(path.clone());
    let write = |offset, from: Option<Addr>, vectored, e: &str| Step::Write {
        fd: protocol::DATA_FD.into(),
        index: None,
        index_value: Some(1),
        fields: vec![Value::U32(0x0a0b_0c0d)],
        vectored,
        offset,
        payload_from: from,
        expect: expect(e),
    };
    let (outcome, lines) = run1(&mut s, write(Some(8), None, false, "8"));
    assert_eq!(outcome, StepOutcome::Pass, "{lines:?}");
    assert!(lines[0].starts_with("pwrite index 1 + 1 fields (8 bytes: 01000000 0d0c0b0a) at offset 8:"), "{lines:?}");
    let (outcome, lines) = run1(&mut s, write(Some(0), None, true, "8"));
    assert_eq!(outcome, StepOutcome::Pass, "{lines:?}");
    assert!(lines[0].starts_with("pwritev index 1 + 1 fields in 2 iovecs"), "{lines:?}");
    assert_eq!(fs::read(&path).unwrap(), [[1, 0, 0, 0, 13, 12, 11, 10]; 2].concat());

    // From an unmapped page an ordinary file takes the index only (a short write; user_events
    // refuses the whole call); from a fresh page: zeros.
    let (outcome, lines) = run1(&mut s, write(None, Some(Addr::Unmapped), false, "4"));
    assert_eq!(outcome, StepOutcome::Pass, "{lines:?}");
    assert!(lines[0].starts_with("writev index 1 + 1 fields (4 + 4 bytes, the 4 from unmapped): ok, 4"), "{lines:?}");
    let (outcome, lines) = run1(&mut s, write(None, Some(Addr::Fresh), false, "8"));
    assert_eq!(outcome, StepOutcome::Pass, "{lines:?}");
    let content = fs::read(&path).unwrap();
    // pwrite and pwritev left the file position at 0: the index went to 0..4, then the next
    // index and four zeros to 4..12.
    assert_eq!(content, [1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 13, 12, 11, 10]);
    fs::remove_file(&path).unwrap();
}

#[test]
fn a_shared_file_mapping_carries_the_words() {
    let data = temp_file("share-data", b"");
    let words = temp_file("share-words", b"");
    let mut s = ScenarioState::with_data_path(data.clone());
    assert_eq!(run1(&mut s, Step::SetWord { word: "w".into(), value: 0x0201 }).0, StepOutcome::Pass);
    let share = |file: Option<&std::path::Path>| Step::Memory {
        op: protocol::MemoryOp::ShareFile,
        file: file.map(|f| f.display().to_string()),
    };
    let (outcome, lines) = run1(&mut s, share(Some(&words)));
    assert_eq!(outcome, StepOutcome::Pass, "{lines:?}");
    // The page's bytes moved into the file, and stores through the words reach it.
    assert_eq!(&fs::read(&words).unwrap()[..8], &0x0201u64.to_ne_bytes());
    assert_eq!(run1(&mut s, Step::SetWord { word: "w".into(), value: 0x0803 }).0, StepOutcome::Pass);
    assert_eq!(&fs::read(&words).unwrap()[..8], &0x0803u64.to_ne_bytes());
    assert_eq!(run1(&mut s, share(None)).0, StepOutcome::Fail, "share_file needs a file");
    fs::remove_file(&data).unwrap();
    fs::remove_file(&words).unwrap();
}

#[test]
fn named_fds_open_close_and_read_only_writes_fail() {
    let path = temp_file("fds", b"");
    let mut s = ScenarioState::default();
    let open = |name: &str, path: &str, read_only, e: &str| Step::Open {
        fd: name.into(),
        path: path.into(),
        read_only,
        expect: expect(e),
    };
    let p = path.display().to_string();
    let (outcome, lines) = run1(&mut s, open("f", &p, true, "ok"));
    assert_eq!((outcome, lines), (StepOutcome::Pass, vec![format!("open {p} read-only as fd f: ok (expected ok)")]));
    let write = Step::Write {
        fd: "f".into(),
        index: None,
        index_value: Some(0),
        fields: vec![],
        vectored: false,
        offset: None,
        payload_from: None,
        expect: expect("EBADF"),
    };
    let (outcome, lines) = run1(&mut s, write.clone());
    assert_eq!(outcome, StepOutcome::Pass, "{lines:?}");
    assert!(lines[0].ends_with(" on fd f: EBADF (expected EBADF)"), "{lines:?}");
    assert_eq!(run1(&mut s, Step::Close { fd: "f".into() }), (StepOutcome::Pass, vec!["close fd f: ok".into()]));
    assert_eq!(
        run1(&mut s, Step::Close { fd: "f".into() }),
        (StepOutcome::Fail, vec!["close fd f: no such fd".into()])
    );
    assert_eq!(run1(&mut s, write).1, ["write index 0 + 0 fields (4 bytes: 00000000) on fd f: no fd named f"]);

    let (outcome, lines) = run1(&mut s, open("g", "/nonexistent/x", false, "ENOENT"));
    assert_eq!(
        (outcome, lines[0].as_str()),
        (StepOutcome::Pass, "open /nonexistent/x read-write as fd g: ENOENT (expected ENOENT)")
    );
    assert_eq!(run1(&mut s, open("g", "/nonexistent/x", false, "ok")).0, StepOutcome::Fail);
    assert_eq!(run1(&mut s, open("g", &p, false, "EACCES")).0, StepOutcome::Fail);
    fs::remove_file(&path).unwrap();
}

#[test]
fn the_data_fd_opens_lazily_and_its_failure_fails_the_step() {
    let mut s = ScenarioState::with_data_path("/nonexistent/user_events_data".into());
    let (outcome, lines) = run1(&mut s, register(Some("w"), RawReg::default(), "ok"));
    assert_eq!(outcome, StepOutcome::Fail);
    assert_eq!(
        lines,
        ["register \"ev u32 a\" word w bit 0 size 4: cannot open /nonexistent/user_events_data as fd data: ENOENT"]
    );
}

/// Without user_events, an ordinary file answers every one of our ioctls with ENOTTY: that
/// is enough to show the errno reaches the expectation, both ways.
#[test]
fn ioctls_on_another_file_give_enotty() {
    let path = temp_file("ioctl", b"");
    let mut s = ScenarioState::with_data_path(path.clone());
    let (outcome, lines) = run1(&mut s, register(Some("w"), RawReg::default(), "ENOTTY"));
    assert_eq!(
        (outcome, lines),
        (StepOutcome::Pass, vec!["register \"ev u32 a\" word w bit 0 size 4: ENOTTY (expected ENOTTY)".into()])
    );
    let (outcome, lines) = run1(&mut s, register(None, RawReg::default(), "ok"));
    assert_eq!(
        (outcome, lines),
        (StepOutcome::Fail, vec!["register \"ev u32 a\" bit 0 size 4: ENOTTY (expected ok)".into()])
    );

    let raw = RawReg {
        cmd: Some(0x1234),
        size: Some(40),
        enable_addr: Some(Addr::Kernel),
        name_args: Some(Addr::Unmapped),
        tail: vec![0; 12],
        ..RawReg::default()
    };
    let (outcome, lines) = run1(&mut s, register(Some("w"), raw, "ENOTTY"));
    assert_eq!(outcome, StepOutcome::Pass, "{lines:?}");
    let want = format!("raw cmd=0x1234 size=40 enable_addr=kernel {KERNEL_ADDR:#x} name_args=unmapped 0x");
    assert!(lines[0].contains(&want), "{lines:?}");
    assert!(lines[0].ends_with(" tail=000000000000000000000000: ENOTTY (expected ENOTTY)"), "{lines:?}");

    let unreg = |e: &str| Step::Unregister {
        fd: protocol::DATA_FD.into(),
        word: Some("w".into()),
        bit: 3,
        raw: RawUnreg { reserved: Some(1), disable_addr: Some(Addr::WordOffset(4)), ..RawUnreg::default() },
        minor_faults: None,
        expect: expect(e),
    };
    let (outcome, lines) = run1(&mut s, unreg("ENOTTY"));
    assert_eq!(outcome, StepOutcome::Pass, "{lines:?}");
    assert!(lines[0].starts_with("unregister word w bit 3 raw reserved=1 disable_addr=word+4 0x"), "{lines:?}");
    assert!(lines[0].ends_with(": ENOTTY (expected ENOTTY)"), "{lines:?}");
    assert_eq!(run1(&mut s, unreg("ok")).0, StepOutcome::Fail);

    let del = |e: &str| Step::Delete {
        fd: protocol::DATA_FD.into(),
        name: "ev".into(),
        expect: expect(e),
        within_ms: 0,
        confirm: false,
    };
    assert_eq!(
        run1(&mut s, del("ENOTTY")),
        (StepOutcome::Pass, vec!["delete \"ev\": ENOTTY (expected ENOTTY)".into()])
    );
    assert_eq!(run1(&mut s, del("ok")), (StepOutcome::Fail, vec!["delete \"ev\": ENOTTY (expected ok)".into()]));
    assert_eq!(run1(&mut s, del("EBUSY")).0, StepOutcome::Fail);
    fs::remove_file(&path).unwrap();
}

// The steps for concurrency: threads, repeat, barriers, polling words, retried writes.

fn group(count: u32, steps: Vec<Step>) -> protocol::ThreadGroup {
    protocol::ThreadGroup { count, steps }
}

fn barrier(name: &str, parties: u32) -> Step {
    Step::Barrier { name: name.into(), parties, within_ms: 5000 }
}

/// Threads share the scenario's words (and so does the scenario after them), each gets its
/// index for `{thread}`, and their lines come with their group and index.
#[test]
fn threads_share_words_and_get_their_index() {
    let mut s = ScenarioState::default();
    let set = |w: &str, v| Step::SetWord { word: w.into(), value: v };
    let check = |w: &str, v| Step::CheckWord { word: w.into(), value: v, or: vec![], within_ms: 0 };
    assert_eq!(run1(&mut s, set("shared", 7)).0, StepOutcome::Pass);
    let step = Step::Threads(vec![
        group(3, vec![barrier("t-share", 4), check("shared", 7), barrier("t-checked", 4), set("w{thread}", 100)]),
        group(1, vec![barrier("t-share", 4), barrier("t-checked", 4), set("shared", 8)]),
    ]);
    let (outcome, lines) = run1(&mut s, step);
    assert_eq!(outcome, StepOutcome::Pass, "{lines:?}");
    // Each thread made its own word, in one page with the scenario's.
    for w in ["w0", "w1", "w2"] {
        assert_eq!(run1(&mut s, check(w, 100)).0, StepOutcome::Pass, "{w}");
    }
    assert_eq!(run1(&mut s, check("shared", 8)).0, StepOutcome::Pass);
    let addrs: std::collections::BTreeSet<u64> =
        ["shared", "w0", "w1", "w2"].iter().map(|w| s.events.word(Some(w)).unwrap()).collect();
    assert_eq!(addrs.len(), 4, "distinct slots");
    assert!(lines.iter().any(|l| l == "thread 0.2 step 4: set word w2 = 0x64: ok"), "{lines:?}");
    assert!(lines.iter().any(|l| l == "thread 1.0 step 3: set word shared = 0x8: ok"), "{lines:?}");
    assert!(lines.last().unwrap().starts_with("threads: 4 of 4 passed, 0 failed, 0 skipped, in "), "{lines:?}");
}

#[test]
fn a_failing_or_skipping_thread_decides_the_step() {
    let mut s = ScenarioState::default();
    let check = |v| Step::CheckWord { word: "w".into(), value: v, or: vec![], within_ms: 0 };
    let (outcome, lines) = run1(&mut s, Step::Threads(vec![group(2, vec![check(0)]), group(1, vec![check(1)])]));
    assert_eq!(outcome, StepOutcome::Fail);
    assert!(lines.contains(&"thread 1.0 step 1: check word w: 0x0 (expected 0x1)".to_string()), "{lines:?}");
    assert!(lines.last().unwrap().starts_with("threads: 2 of 3 passed, 1 failed, 0 skipped"), "{lines:?}");
    let skip = exec(&["/bin/sh", "-c", "exit 4"], 0);
    let (outcome, lines) = run1(&mut s, Step::Threads(vec![group(1, vec![check(0)]), group(1, vec![skip])]));
    assert_eq!(outcome, StepOutcome::Skip, "{lines:?}");
    // Steps that act on the whole process are refused in a thread.
    let fork = Step::Fork { name: "c".into(), steps: vec![] };
    let (outcome, lines) = run1(&mut s, Step::Threads(vec![group(1, vec![fork])]));
    assert_eq!(outcome, StepOutcome::Fail);
    assert_eq!(lines[0], "thread 0.0 step 1: fork: not in a thread of `threads`: it acts on the whole process");
}

/// A descriptor opened before the threads is theirs to use and to close, as in one process.
#[test]
fn threads_share_descriptors() {
    let path = temp_file("threads-fds", b"");
    let mut s = ScenarioState::with_data_path(path.clone());
    let write = |e: &str| Step::Write {
        fd: protocol::DATA_FD.into(),
        index: None,
        index_value: Some(5),
        fields: vec![Value::U8(1)],
        vectored: false,
        offset: None,
        payload_from: None,
        expect: expect(e),
    };
    let (outcome, lines) = run1(&mut s, Step::Threads(vec![group(4, vec![write("5")])]));
    assert_eq!(outcome, StepOutcome::Pass, "{lines:?}");
    assert_eq!(fs::read(&path).unwrap(), [5, 0, 0, 0, 1].repeat(4), "one file, four writes");
    let close = Step::Close { fd: protocol::DATA_FD.into() };
    assert_eq!(run1(&mut s, Step::Threads(vec![group(1, vec![close.clone()])])).0, StepOutcome::Pass);
    assert_eq!(run1(&mut s, close), (StepOutcome::Fail, vec!["close fd data: no such fd".into()]));
    fs::remove_file(&path).unwrap();
}

#[test]
fn repeat_tallies_the_lines_of_passing_iterations() {
    let mut s = ScenarioState::default();
    let body = vec![
        Step::SetWord { word: "w{iteration}".into(), value: 1 },
        Step::CheckWord { word: "w{iteration}".into(), value: 1, or: vec![], within_ms: 0 },
    ];
    let (outcome, lines) = run1(&mut s, Step::Repeat { count: 30, steps: body, for_ms: 0, leak_at_most: None });
    assert_eq!(outcome, StepOutcome::Pass, "{lines:?}");
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert_eq!(lines[0], "repeat: 30x iteration [0..29] step 1: set word w[0..29] = 0x1: ok");
    assert_eq!(lines[1], "repeat: 30x iteration [0..29] step 2: check word w[0..29]: 0x1 (expected 0x1)");
    assert!(lines[2].starts_with("repeat: all 30 iterations passed in "), "{lines:?}");
    assert_eq!(
        run1(&mut s, Step::CheckWord { word: "w29".into(), value: 1, or: vec![], within_ms: 0 }).0,
        StepOutcome::Pass
    );

    // The first failing iteration is said in full, after the tally of those before it.
    let body = vec![
        Step::SetWord { word: "x".into(), value: 0 },
        Step::CheckWord { word: "w{iteration}".into(), value: 1, or: vec![], within_ms: 0 },
    ];
    let (outcome, lines) = run1(&mut s, Step::Repeat { count: 50, steps: body, for_ms: 0, leak_at_most: None });
    assert_eq!(outcome, StepOutcome::Fail);
    assert_eq!(
        lines[..2],
        [
            "repeat: 30x iteration [0..29] step 1: set word x = 0x0: ok",
            "repeat: 30x iteration [0..29] step 2: check word w[0..29]: 0x1 (expected 0x1)"
        ]
    );
    assert!(lines[2].starts_with("repeat: iteration 30 of 50 failed after "), "{lines:?}");
    assert_eq!(
        lines[3..],
        ["iteration 30 step 1: set word x = 0x0: ok", "iteration 30 step 2: check word w30: 0x0 (expected 0x1)"]
    );
}

#[test]
fn the_innermost_repeat_and_threads_give_the_index() {
    let mut s = ScenarioState::default();
    let inner = Step::Repeat {
        count: 2,
        steps: vec![Step::SetWord { word: "r{iteration}".into(), value: 1 }],
        for_ms: 0,
        leak_at_most: None,
    };
    let step = Step::Repeat {
        count: 3,
        steps: vec![
            Step::Threads(vec![group(2, vec![Step::SetWord { word: "o{iteration}t{thread}".into(), value: 2 }])]),
            inner,
        ],
        for_ms: 0,
        leak_at_most: None,
    };
    let (outcome, lines) = run1(&mut s, step);
    assert_eq!(outcome, StepOutcome::Pass, "{lines:?}");
    for (w, v) in [("o0t0", 2), ("o2t1", 2), ("r0", 1), ("r1", 1), ("r2", 0)] {
        assert_eq!(
            run1(&mut s, Step::CheckWord { word: w.into(), value: v, or: vec![], within_ms: 0 }).0,
            StepOutcome::Pass,
            "{w}"
        );
    }
}

#[test]
fn repeat_for_a_time_caps_the_count() {
    let mut s = ScenarioState::default();
    let body = vec![Step::Sleep { ms: 5 }];
    let started = Instant::now();
    let (outcome, lines) = run1(&mut s, Step::Repeat { count: 1000, steps: body, for_ms: 30, leak_at_most: None });
    assert_eq!(outcome, StepOutcome::Pass, "{lines:?}");
    assert!(started.elapsed() < Duration::from_millis(1000), "stopped by the time, not the count");
    let last = lines.last().unwrap();
    assert!(last.starts_with("repeat: ") && last.ends_with(" ms (for 30 ms)"), "{lines:?}");
    assert!(last.contains(" iterations (of at most 1000) passed in "), "{lines:?}");
}

#[test]
fn tally_kinds_differ_in_more_than_digits() {
    let mut t = Tally::default();
    for line in ["a 1 ms, 7: ok", "a 22 ms, 7: ok", "a 3 ms, 7: EBADF", "a 4 ms, 7: ok"] {
        t.add(line);
    }
    let mut lines = Vec::new();
    t.say("repeat", &mut |l: &str| lines.push(l.to_string()));
    assert_eq!(lines, ["repeat: 3x a [1..22] ms, 7: ok", "repeat: 1x a 3 ms, 7: EBADF"]);
    let mut many = Tally::default();
    for i in 0..25 {
        many.add(&format!("kind {} line", "x".repeat(i)));
    }
    many.add("kind  line");
    let mut lines = Vec::new();
    many.say("repeat", &mut |l: &str| lines.push(l.to_string()));
    assert_eq!(lines.len(), TALLY_KINDS + 1);
    assert_eq!(lines[0], "repeat: 2x kind  line");
    assert_eq!(lines[TALLY_KINDS], "repeat: and 5 lines of 5 other kinds");
}

#[test]
fn check_word_polls_until_the_value() {
    let mut s = ScenarioState::default();
    let addr = s.events.word(Some("w")).unwrap() as usize;
    let setter = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(20));
        // SAFETY: the word stays mapped: the state outlives the join below.
        unsafe { &*(addr as *const AtomicU64) }.store(0x30, Ordering::SeqCst);
    });
    let (outcome, lines) = run1(&mut s, Step::CheckWord { word: "w".into(), value: 0x30, or: vec![], within_ms: 2000 });
    setter.join().unwrap();
    assert_eq!(outcome, StepOutcome::Pass, "{lines:?}");
    assert!(lines[0].starts_with("check word w: 0x30 after "), "{lines:?}");
    assert!(lines[0].ends_with(" ms (expected 0x30 within 2000 ms)"), "{lines:?}");
    let (outcome, lines) = run1(&mut s, Step::CheckWord { word: "w".into(), value: 1, or: vec![], within_ms: 20 });
    assert_eq!(outcome, StepOutcome::Fail);
    assert!(lines[0].starts_with("check word w: still 0x30 after "), "{lines:?}");
    // `or`: another value that passes once `value` has not come.
    let (outcome, lines) = run1(&mut s, Step::CheckWord { word: "w".into(), value: 3, or: vec![0x30], within_ms: 0 });
    assert_eq!((outcome, lines[0].as_str()), (StepOutcome::Pass, "check word w: 0x30 (expected 0x3 or 0x30)"));
    let (outcome, _) = run1(&mut s, Step::CheckWord { word: "w".into(), value: 3, or: vec![0, 1], within_ms: 0 });
    assert_eq!(outcome, StepOutcome::Fail);
}

#[test]
fn write_file_retries_within_its_time() {
    let dir = temp_path("retry-dir");
    let path = dir.join("f");
    let write = |within_ms| Step::WriteFile {
        path: path.display().to_string(),
        data: "x".into(),
        create: false,
        append: true,
        expect: Expect::default(),
        within_ms,
    };
    // The file appears 30 ms later: ENOENT until then, each attempt unsaid but the last.
    fs::create_dir_all(&dir).unwrap();
    let maker = {
        let path = path.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(30));
            fs::write(&path, "").unwrap();
        })
    };
    let (outcome, lines) = run1(&mut ScenarioState::default(), write(5000));
    maker.join().unwrap();
    assert_eq!(outcome, StepOutcome::Pass, "{lines:?}");
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert_eq!(lines[0], format!("write \"x\" to {} (append): ok (expected ok)", path.display()));
    let retries: u64 = lines[1].split(": ").nth(1).unwrap().split(' ').next().unwrap().parse().unwrap();
    assert!(retries >= 5, "{lines:?}");
    assert_eq!(fs::read_to_string(&path).unwrap(), "x", "written once");
    fs::remove_file(&path).unwrap();
    let (outcome, lines) = run1(&mut ScenarioState::default(), write(20));
    assert_eq!(outcome, StepOutcome::Fail);
    assert!(lines[0].ends_with("(append): open: ENOENT (expected ok)"), "{lines:?}");
    assert!(lines[1].ends_with(" ms (allowed 20 ms)"), "{lines:?}");
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn several_expectations_accept_any() {
    let path = temp_file("any-of", b"");
    let mut s = ScenarioState::with_data_path(path.clone());
    let write = |e: &str| Step::Write {
        fd: protocol::DATA_FD.into(),
        index: None,
        index_value: Some(1),
        fields: vec![],
        vectored: false,
        offset: None,
        payload_from: None,
        expect: expect(e),
    };
    let (outcome, lines) = run1(&mut s, write("4 or EBADF"));
    assert_eq!(outcome, StepOutcome::Pass);
    assert!(lines[0].ends_with(": ok, 4 bytes (expected 4 or EBADF)"), "{lines:?}");
    assert_eq!(run1(&mut s, write("5 or EBADF")).0, StepOutcome::Fail);
    fs::remove_file(&path).unwrap();
}

#[test]
fn a_delete_is_confirmed_by_the_event_folder() {
    use crate::uevents::confirm;
    assert_eq!(confirm(Ok(0), false).unwrap(), (true, "is gone after ok, as it should".into()));
    assert_eq!(confirm(Err(libc::EBUSY), true).unwrap(), (true, "is still there after EBUSY, as it should".into()));
    assert!(confirm(Err(libc::ENOENT), false).unwrap().0);
    assert_eq!(confirm(Ok(0), true).unwrap(), (false, "is still there after ok, but it should be gone".into()));
    assert_eq!(
        confirm(Err(libc::EBUSY), false).unwrap(),
        (false, "is gone after EBUSY, but it should be there".into())
    );
    assert_eq!(confirm(Err(libc::EPERM), true).unwrap_err(), "confirm: a result of EPERM says nothing about the event");
}

/// On a kernel without fault injection (this host's), `fail_nth` fails the step it arms,
/// naming what it needs, and the armed step does not run.
#[test]
fn fail_nth_without_fault_injection_names_the_profile() {
    if Path::new("/sys/kernel/debug/failslab").exists() {
        return;
    }
    let path = std::env::temp_dir().join(format!("ue-agent-fail-nth-{}", std::process::id()));
    let armed = Step::FailNth { nth: 2, injected: true, unchanged: true };
    let (status, lines) = run(&[armed, write_file(&path, "x", true, false, "ok")]);
    assert_eq!(status, 1, "{lines:?}");
    assert_eq!(lines[0], "step 1: fail_nth 2: the next step's first call fails at its fault-injection point 2");
    assert!(lines[1].starts_with("step 2: fail_nth: /sys/kernel/debug/failslab/ignore-gfp-wait: "), "{lines:?}");
    assert!(lines[1].ends_with("(needs CONFIG_FAULT_INJECTION_DEBUG_FS and CONFIG_FAILSLAB: --profile faults)"));
    assert!(!path.exists(), "the armed step did not run");
}
