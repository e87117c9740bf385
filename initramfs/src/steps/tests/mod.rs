//! The dispatcher's tests: steps of every area run as a plan gives them, with the exact lines
//! they say.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use protocol::steps::{
    Barrier, CheckBit, CheckWord, Close, Delete, Dup2, Exec, FailNth, Fork, Memory, Mkdir, Open, ReadFile, Register,
    Repeat, Rmdir, SetWord, Sleep, Unregister, Write, WriteFile,
};
use protocol::{Addr, Expect, RawReg, RawUnreg, Step, Value};

use super::*;
use crate::steps::files::SHOWN_LINES;
use crate::steps::memory::KERNEL_ADDR;

fn run(steps: &[Step]) -> (i32, Vec<String>) {
    let mut out = Vec::new();
    let status = run_steps(steps, &mut out);
    (status, String::from_utf8(out).unwrap().lines().map(String::from).collect())
}

fn exec(argv: &[&str], expect_exit: i32) -> Step {
    Step::Exec(Exec { argv: argv.iter().map(|s| s.to_string()).collect(), expect_exit })
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
    assert_eq!(run(&[Step::Exec(Exec { argv: vec![], expect_exit: 0 })]).0, 1);
}

fn write_file(path: &Path, data: &str, create: bool, append: bool, expect: &str) -> Step {
    let path = path.display().to_string();
    Step::WriteFile(WriteFile {
        path,
        data: data.into(),
        bytes: None,
        create,
        append,
        expect: expect.parse().unwrap(),
        within_ms: 0,
    })
}

fn read_file(path: &Path, equals: Option<&str>, contains: &[&str], lacks: &[&str], expect: &str) -> Step {
    let strings = |l: &[&str]| l.iter().map(|s| s.to_string()).collect();
    Step::ReadFile(ReadFile {
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
        keep_match: None,
    })
}

#[test]
fn read_file_keeps_a_content_that_a_later_read_must_equal() {
    let path = temp_path("kept");
    fs::write(&path, "312\n").unwrap();
    let with = |keep: Option<&str>, kept: Option<&str>| {
        let mut step = read_file(&path, None, &[], &[], "ok");
        if let Step::ReadFile(ReadFile { keep_as, equals_kept, .. }) = &mut step {
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
    let step = |includes: &[&str], excludes: &[&str]| {
        Step::ReadFile(ReadFile {
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
            keep_match: None,
        })
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
    let mk = Step::Mkdir(Mkdir { path: d.clone(), expect: Expect::default() });
    assert_eq!(run(&[mk]).0, 0);
    let (status, lines) = run(&[Step::Mkdir(Mkdir { path: d.clone(), expect: "EEXIST".parse().unwrap() })]);
    assert_eq!((status, lines), (0, vec![format!("step 1: mkdir {d}: EEXIST (expected EEXIST)")]));
    let file = dir.join("bin");
    fs::write(&file, [1u8, 0, 0xff, 7]).unwrap();
    let head = |hex: &str| {
        Step::ReadFile(ReadFile {
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
            keep_match: None,
        })
    };
    assert_eq!(run(&[head("0100ff")]).0, 0);
    let (status, lines) = run(&[head("0200")]);
    assert_eq!(status, 1);
    assert!(lines[1].ends_with("starts with 0100ff07, not 0200"), "{lines:?}");
    let rm = Step::Rmdir(Rmdir { path: d.clone(), expect: "ENOTEMPTY".parse().unwrap() });
    assert_eq!(run(&[rm]).0, 0);
    fs::remove_file(&file).unwrap();
    assert_eq!(run(&[Step::Rmdir(Rmdir { path: d, expect: Expect::default() })]).0, 0);
}

#[test]
fn write_file_writes_without_truncating() {
    let path = temp_path("write");
    fs::write(&path, "0123456789").unwrap();
    let (status, lines) = run(&[write_file(&path, "ab\n", false, false, "ok"), Step::Sleep(Sleep { ms: 1 })]);
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
fn a_requires_step_runs_its_steps_only_when_the_host_found_it_met() {
    let requires = |unmet: Option<&str>| {
        Step::Requires(protocol::steps::Requires {
            kernel: None,
            config: vec!["CONFIG_X".into()],
            steps: if unmet.is_some() { vec![] } else { vec![Step::Sleep(Sleep { ms: 1 })] },
            unmet: unmet.map(String::from),
        })
    };
    let (status, lines) = run(&[requires(None)]);
    assert_eq!(
        (status, lines),
        (0, vec!["step 1: requires: met (CONFIG_X): 1 step(s)".into(), "step 1: step 1: sleep 1 ms".into()])
    );
    let (status, lines) = run(&[requires(Some("needs CONFIG_X (y or m), the kernel has it absent"))]);
    assert_eq!(
        (status, lines),
        (
            0,
            vec![
                "step 1: requires: not met (needs CONFIG_X (y or m), the kernel has it absent): its steps are left out"
                    .into()
            ]
        )
    );
}

#[test]
fn a_line_part_kept_stands_for_kept_name_in_later_steps() {
    let path = temp_path("keep-match");
    fs::write(&path, "user_events:ev\nuser_events_multi:mf.17\n").unwrap();
    let mut keep = read_file(&path, None, &[], &[], "ok");
    if let Step::ReadFile(r) = &mut keep {
        (r.keep_as, r.keep_match) = (Some("id".into()), Some("user_events_multi:mf.{value}".into()));
    }
    let target = temp_path("kept-17");
    let write = write_file(&temp_path("kept-{kept:id}"), "x", true, false, "ok");
    let (status, lines) = run(&[keep.clone(), write]);
    assert_eq!(status, 0, "{lines:?}");
    assert_eq!(lines[1], format!("step 1: read {}: kept as id: \"17\"", path.display()));
    assert_eq!(fs::read_to_string(&target).unwrap(), "x", "the path held {{kept:id}}");
    // A name nothing kept fails the step that uses it; a template no line matches fails the read.
    let (status, lines) = run(&[write_file(&temp_path("{kept:nope}"), "x", true, false, "ok")]);
    assert_eq!((status, lines), (1, vec!["step 1: {kept:nope}: nothing was kept as nope".into()]));
    fs::write(&path, "user_events:ev\n").unwrap();
    let (status, lines) = run(&[keep]);
    assert_eq!(status, 1);
    assert_eq!(
        lines.last().unwrap(),
        &format!("step 1: read {}: no line is `user_events_multi:mf.{{value}}`, nothing to keep as id", path.display())
    );
    fs::remove_file(&path).unwrap();
    fs::remove_file(&target).unwrap();
}

#[test]
fn write_file_writes_raw_bytes() {
    let path = temp_path("write-bytes");
    fs::write(&path, "0123456789").unwrap();
    let raw = |bytes: &[u8], expect: &str| {
        let Step::WriteFile(mut w) = write_file(&path, "", false, false, expect) else { unreachable!() };
        w.bytes = Some(bytes.to_vec());
        Step::WriteFile(w)
    };
    // A NUL and a byte that is not UTF-8 go out as given, all in one write(2).
    let (status, lines) = run(&[raw(&[0x61, 0x00, 0xff], "3")]);
    assert_eq!(status, 0, "{lines:?}");
    assert_eq!(lines, [format!("step 1: write bytes [61 00 ff] to {}: ok (expected 3)", path.display())]);
    assert_eq!(fs::read(&path).unwrap(), b"a\0\xff3456789");
    // UTF-8 bytes are shown as text, as `data` is.
    let (status, lines) = run(&[raw(b"u:", "ok")]);
    assert_eq!(
        (status, lines[0].as_str()),
        (0, format!("step 1: write \"u:\" to {}: ok (expected ok)", path.display()).as_str())
    );
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
        Step::SetWord(SetWord { word: "w".into(), value: 6 }),
        Step::CheckBit(CheckBit { word: "w".into(), bit: 2, set: true, within_ms: 0 }),
        Step::Write(Write {
            fd: protocol::DATA_FD.into(),
            index: None,
            index_value: Some(1),
            fields: vec![protocol::Value::Text("x".into())],
            vectored: true,
            offset: None,
            payload_from: None,
            expect: Expect::default(),
        }),
        Step::Close(Close { fd: protocol::DATA_FD.into() }),
        read_file(&path, Some("\u{1}\0\0\0x"), &[], &[], "5"),
    ];
    let mut out = Vec::new();
    let status = run_steps_in(&mut state, &steps, &mut out);
    assert_eq!(status, 0, "{}", String::from_utf8_lossy(&out));
    fs::remove_file(&path).unwrap();
}

// Helpers of the user_events tests and the concurrency tests.

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
    Step::Register(Register {
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
    })
}

mod concurrency;
mod user_events;
