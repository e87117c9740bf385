//! The user_events steps' tests, one at a time on a state of their own: words, writes,
//! descriptors, ioctls.

use super::*;

#[test]
fn set_and_check_words() {
    let mut s = ScenarioState::default();
    let set = |w: &str, v| Step::SetWord(SetWord { word: w.into(), value: v });
    let word = |w: &str, v| Step::CheckWord(CheckWord { word: w.into(), value: v, or: vec![], within_ms: 0 });
    let bit = |b, set| Step::CheckBit(CheckBit { word: "w".into(), bit: b, set, within_ms: 0 });
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
    let (outcome, lines) =
        run1(&mut s, Step::CheckBit(CheckBit { word: "w".into(), bit: 5, set: true, within_ms: 2000 }));
    setter.join().unwrap();
    assert_eq!(outcome, StepOutcome::Pass, "{lines:?}");
    let waited: u64 = lines[0].split(" after ").nth(1).unwrap().split(' ').next().unwrap().parse().unwrap();
    assert!((15..2000).contains(&waited), "{lines:?}");
    assert!(lines[0].ends_with("ms, word 0x20 (expected set within 2000 ms)"), "{lines:?}");

    let start = Instant::now();
    let (outcome, lines) =
        run1(&mut s, Step::CheckBit(CheckBit { word: "w".into(), bit: 5, set: false, within_ms: 30 }));
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
    let write = |vectored, e: &str| {
        Step::Write(Write {
            fd: protocol::DATA_FD.into(),
            index: None,
            index_value: Some(7),
            fields: fields.clone(),
            vectored,
            offset: None,
            payload_from: None,
            expect: expect(e),
        })
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
    let named = Step::Write(Write {
        fd: protocol::DATA_FD.into(),
        index: Some("nope".into()),
        index_value: None,
        fields: vec![],
        vectored: false,
        offset: None,
        payload_from: None,
        expect: expect("ok"),
    });
    assert_eq!(run1(&mut s, named), (StepOutcome::Fail, vec!["write: no write index named nope".into()]));
    let none = Step::Write(Write {
        fd: protocol::DATA_FD.into(),
        index: None,
        index_value: None,
        fields: vec![],
        vectored: false,
        offset: None,
        payload_from: None,
        expect: expect("ok"),
    });
    assert_eq!(run1(&mut s, none).0, StepOutcome::Fail);
    fs::remove_file(&path).unwrap();
}

#[test]
fn pwrite_offsets_and_payloads_from_elsewhere() {
    let path = temp_file("pwrite", b"");
    let mut s = ScenarioState::with_data_path(path.clone());
    let write = |offset, from: Option<Addr>, vectored, e: &str| {
        Step::Write(Write {
            fd: protocol::DATA_FD.into(),
            index: None,
            index_value: Some(1),
            fields: vec![Value::U32(0x0a0b_0c0d)],
            vectored,
            offset,
            payload_from: from,
            expect: expect(e),
        })
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
    assert_eq!(run1(&mut s, Step::SetWord(SetWord { word: "w".into(), value: 0x0201 })).0, StepOutcome::Pass);
    let share = |file: Option<&std::path::Path>| {
        Step::Memory(Memory { op: protocol::MemoryOp::ShareFile, file: file.map(|f| f.display().to_string()) })
    };
    let (outcome, lines) = run1(&mut s, share(Some(&words)));
    assert_eq!(outcome, StepOutcome::Pass, "{lines:?}");
    // The page's bytes moved into the file, and stores through the words reach it.
    assert_eq!(&fs::read(&words).unwrap()[..8], &0x0201u64.to_ne_bytes());
    assert_eq!(run1(&mut s, Step::SetWord(SetWord { word: "w".into(), value: 0x0803 })).0, StepOutcome::Pass);
    assert_eq!(&fs::read(&words).unwrap()[..8], &0x0803u64.to_ne_bytes());
    assert_eq!(run1(&mut s, share(None)).0, StepOutcome::Fail, "share_file needs a file");
    fs::remove_file(&data).unwrap();
    fs::remove_file(&words).unwrap();
}

#[test]
fn named_fds_open_close_and_read_only_writes_fail() {
    let path = temp_file("fds", b"");
    let mut s = ScenarioState::default();
    let open = |name: &str, path: &str, read_only, e: &str| {
        Step::Open(Open { fd: name.into(), path: path.into(), read_only, expect: expect(e) })
    };
    let p = path.display().to_string();
    let (outcome, lines) = run1(&mut s, open("f", &p, true, "ok"));
    assert_eq!((outcome, lines), (StepOutcome::Pass, vec![format!("open {p} read-only as fd f: ok (expected ok)")]));
    let write = Step::Write(Write {
        fd: "f".into(),
        index: None,
        index_value: Some(0),
        fields: vec![],
        vectored: false,
        offset: None,
        payload_from: None,
        expect: expect("EBADF"),
    });
    let (outcome, lines) = run1(&mut s, write.clone());
    assert_eq!(outcome, StepOutcome::Pass, "{lines:?}");
    assert!(lines[0].ends_with(" on fd f: EBADF (expected EBADF)"), "{lines:?}");
    assert_eq!(run1(&mut s, Step::Close(Close { fd: "f".into() })), (StepOutcome::Pass, vec!["close fd f: ok".into()]));
    assert_eq!(
        run1(&mut s, Step::Close(Close { fd: "f".into() })),
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
fn dup2_keeps_the_same_file_at_a_number_under_a_name() {
    let path = temp_file("dup2", b"");
    let p = path.display().to_string();
    let mut s = ScenarioState::default();
    let open = Step::Open(Open { fd: "f".into(), path: p.clone(), read_only: false, expect: expect("ok") });
    assert_eq!(run1(&mut s, open).0, StepOutcome::Pass);
    let dup2 = |number, to: Option<&str>, e: &str| {
        Step::Dup2(Dup2 { fd: "f".into(), number, to: to.map(String::from), expect: expect(e) })
    };
    // A number far above what the test harness's threads open.
    let (outcome, lines) = run1(&mut s, dup2(987, Some("g"), "987"));
    assert_eq!(
        (outcome, lines),
        (StepOutcome::Pass, vec!["dup2 fd f onto 987: ok, returned 987 (expected 987)".into()])
    );
    // SAFETY: F_GETFD on the descriptor the step made.
    assert_eq!(unsafe { libc::fcntl(987, libc::F_GETFD) } & libc::FD_CLOEXEC, libc::FD_CLOEXEC);
    // The same open file: a write through either name moves one file position.
    let write = |fd: &str| {
        Step::Write(Write {
            fd: fd.into(),
            index: None,
            index_value: Some(7),
            fields: vec![],
            vectored: false,
            offset: None,
            payload_from: None,
            expect: expect("4"),
        })
    };
    assert_eq!(run1(&mut s, write("f")).0, StepOutcome::Pass);
    assert_eq!(run1(&mut s, write("g")).0, StepOutcome::Pass);
    assert_eq!(fs::read(&path).unwrap().len(), 8);
    // Onto the number a name holds: the kernel closed that descriptor, and the name goes.
    let (outcome, lines) = run1(&mut s, dup2(987, Some("k"), "987"));
    assert_eq!(outcome, StepOutcome::Pass);
    assert_eq!(lines[1], "dup2 fd f onto 987: fd g was 987: the kernel closed it, the name is gone");
    assert_eq!(run1(&mut s, Step::Close(Close { fd: "g".into() })).0, StepOutcome::Fail);
    let (outcome, lines) = run1(&mut s, dup2(-1, None, "EBADF"));
    assert_eq!((outcome, lines), (StepOutcome::Pass, vec!["dup2 fd f onto -1: EBADF (expected EBADF)".into()]));
    assert_eq!(run1(&mut s, Step::Close(Close { fd: "k".into() })).0, StepOutcome::Pass);
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

    let unreg = |e: &str| {
        Step::Unregister(Unregister {
            fd: protocol::DATA_FD.into(),
            word: Some("w".into()),
            bit: 3,
            raw: RawUnreg { reserved: Some(1), disable_addr: Some(Addr::WordOffset(4)), ..RawUnreg::default() },
            minor_faults: None,
            expect: expect(e),
        })
    };
    let (outcome, lines) = run1(&mut s, unreg("ENOTTY"));
    assert_eq!(outcome, StepOutcome::Pass, "{lines:?}");
    assert!(lines[0].starts_with("unregister word w bit 3 raw reserved=1 disable_addr=word+4 0x"), "{lines:?}");
    assert!(lines[0].ends_with(": ENOTTY (expected ENOTTY)"), "{lines:?}");
    assert_eq!(run1(&mut s, unreg("ok")).0, StepOutcome::Fail);

    let del = |e: &str| {
        Step::Delete(Delete {
            fd: protocol::DATA_FD.into(),
            name: "ev".into(),
            expect: expect(e),
            within_ms: 0,
            confirm: false,
            unterminated: false,
        })
    };
    assert_eq!(
        run1(&mut s, del("ENOTTY")),
        (StepOutcome::Pass, vec!["delete \"ev\": ENOTTY (expected ENOTTY)".into()])
    );
    assert_eq!(run1(&mut s, del("ok")), (StepOutcome::Fail, vec!["delete \"ev\": ENOTTY (expected ok)".into()]));
    assert_eq!(run1(&mut s, del("EBUSY")).0, StepOutcome::Fail);
    let Step::Delete(mut unterminated) = del("ENOTTY") else { unreachable!() };
    unterminated.unterminated = true;
    assert_eq!(
        run1(&mut s, Step::Delete(unterminated)),
        (StepOutcome::Pass, vec!["delete \"ev\" (unterminated, at a page's end): ENOTTY (expected ENOTTY)".into()])
    );
    fs::remove_file(&path).unwrap();
}

#[test]
fn bytes_at_a_page_end_run_into_a_hole() {
    let (page, at) = crate::steps::memory::at_page_end(b"abc").unwrap();
    assert_eq!((at + 3) % page.len() as u64, 0, "the bytes end the page");
    // SAFETY: reads the 3 bytes just placed.
    assert_eq!(unsafe { std::slice::from_raw_parts(at as *const u8, 3) }, b"abc");
    // The kernel's copy of a string from there runs into the hole: access(2) of it as a path is
    // EFAULT, as the DIAG_IOCSDEL of such a name is.
    // SAFETY: the kernel checks the user pointer; the call cannot touch our memory.
    let r = unsafe { libc::access(at as *const libc::c_char, libc::F_OK) };
    assert_eq!((r, std::io::Error::last_os_error().raw_os_error()), (-1, Some(libc::EFAULT)));
}

/// `ioctl` sends any command with any argument; an ordinary file knows none of
/// user_events' commands, so each is ENOTTY there.
#[test]
fn an_ioctl_sends_its_command_and_argument() {
    use protocol::steps::{DiagCmd, Ioctl, IoctlArg, IoctlCmd};
    let path = temp_file("ioctl", b"");
    let mut s = ScenarioState::with_data_path(path.clone());
    let ioctl = |cmd, arg, e: &str| Step::Ioctl(Ioctl { fd: protocol::DATA_FD.into(), cmd, arg, expect: expect(e) });
    assert_eq!(
        run1(&mut s, ioctl(IoctlCmd::Number(0x2a63), IoctlArg::Value(7), "ENOTTY")),
        (StepOutcome::Pass, vec!["ioctl fd data cmd 0x2a63 arg 0x7: ENOTTY (expected ENOTTY)".into()])
    );
    let del = crate::steps::uevents::DIAG_IOCSDEL;
    assert_eq!(
        run1(&mut s, ioctl(IoctlCmd::Named(DiagCmd::Del), IoctlArg::NullPointer, "EFAULT")),
        (
            StepOutcome::Fail,
            vec![format!("ioctl fd data cmd DIAG_IOCSDEL {del:#x} arg null_pointer: ENOTTY (expected EFAULT)")]
        )
    );
    let (outcome, lines) = run1(&mut s, ioctl(IoctlCmd::Number(0x2a63), IoctlArg::Bytes(vec![1, 0xab]), "ENOTTY"));
    assert_eq!(outcome, StepOutcome::Pass);
    assert_eq!(lines, ["ioctl fd data cmd 0x2a63 arg bytes 01ab: ENOTTY (expected ENOTTY)"]);
    let (outcome, lines) = run1(&mut s, ioctl(IoctlCmd::Number(0x2a63), IoctlArg::Unmapped, "ENOTTY"));
    assert!(outcome == StepOutcome::Pass && lines[0].contains(" arg unmapped 0x"), "{lines:?}");
    let nameless = Step::Ioctl(Ioctl {
        fd: "nope".into(),
        cmd: IoctlCmd::Number(1),
        arg: IoctlArg::default(),
        expect: Expect::Ok,
    });
    assert_eq!(run1(&mut s, nameless), (StepOutcome::Fail, vec!["ioctl fd nope cmd 0x1: no fd named nope".into()]));
    fs::remove_file(&path).unwrap();
}
