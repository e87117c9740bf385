//! The tests of the steps for concurrency: threads, repeat, barriers, polling words, retried
//! writes; and the steps that need a state of the kernel (confirmed deletes, fault injection).

use super::*;

fn group(count: u32, steps: Vec<Step>) -> protocol::ThreadGroup {
    protocol::ThreadGroup { count, steps }
}

fn barrier(name: &str, parties: u32) -> Step {
    Step::Barrier(Barrier { name: name.into(), parties, within_ms: 5000 })
}

/// Threads share the scenario's words (and so does the scenario after them), each gets its
/// index for `{thread}`, and their lines come with their group and index.
#[test]
fn threads_share_words_and_get_their_index() {
    let mut s = ScenarioState::default();
    let set = |w: &str, v| Step::SetWord(SetWord { word: w.into(), value: v });
    let check = |w: &str, v| Step::CheckWord(CheckWord { word: w.into(), value: v, or: vec![], within_ms: 0 });
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
    let check = |v| Step::CheckWord(CheckWord { word: "w".into(), value: v, or: vec![], within_ms: 0 });
    let (outcome, lines) = run1(&mut s, Step::Threads(vec![group(2, vec![check(0)]), group(1, vec![check(1)])]));
    assert_eq!(outcome, StepOutcome::Fail);
    assert!(lines.contains(&"thread 1.0 step 1: check word w: 0x0 (expected 0x1)".to_string()), "{lines:?}");
    assert!(lines.last().unwrap().starts_with("threads: 2 of 3 passed, 1 failed, 0 skipped"), "{lines:?}");
    let skip = exec(&["/bin/sh", "-c", "exit 4"], 0);
    let (outcome, lines) = run1(&mut s, Step::Threads(vec![group(1, vec![check(0)]), group(1, vec![skip])]));
    assert_eq!(outcome, StepOutcome::Skip, "{lines:?}");
    // Steps that act on the whole process are refused in a thread.
    let fork = Step::Fork(Fork { name: "c".into(), steps: vec![] });
    let (outcome, lines) = run1(&mut s, Step::Threads(vec![group(1, vec![fork])]));
    assert_eq!(outcome, StepOutcome::Fail);
    assert_eq!(lines[0], "thread 0.0 step 1: fork: not in a thread of `threads`: it acts on the whole process");
}

/// A descriptor opened before the threads is theirs to use and to close, as in one process.
#[test]
fn threads_share_descriptors() {
    let path = temp_file("threads-fds", b"");
    let mut s = ScenarioState::with_data_path(path.clone());
    let write = |e: &str| {
        Step::Write(Write {
            fd: protocol::DATA_FD.into(),
            index: None,
            index_value: Some(5),
            fields: vec![Value::U8(1)],
            vectored: false,
            offset: None,
            payload_from: None,
            expect: expect(e),
        })
    };
    let (outcome, lines) = run1(&mut s, Step::Threads(vec![group(4, vec![write("5")])]));
    assert_eq!(outcome, StepOutcome::Pass, "{lines:?}");
    assert_eq!(fs::read(&path).unwrap(), [5, 0, 0, 0, 1].repeat(4), "one file, four writes");
    let close = Step::Close(Close { fd: protocol::DATA_FD.into() });
    assert_eq!(run1(&mut s, Step::Threads(vec![group(1, vec![close.clone()])])).0, StepOutcome::Pass);
    assert_eq!(run1(&mut s, close), (StepOutcome::Fail, vec!["close fd data: no such fd".into()]));
    fs::remove_file(&path).unwrap();
}

#[test]
fn repeat_tallies_the_lines_of_passing_iterations() {
    let mut s = ScenarioState::default();
    let body = vec![
        Step::SetWord(SetWord { word: "w{iteration}".into(), value: 1 }),
        Step::CheckWord(CheckWord { word: "w{iteration}".into(), value: 1, or: vec![], within_ms: 0 }),
    ];
    let (outcome, lines) = run1(&mut s, Step::Repeat(Repeat { count: 30, steps: body, for_ms: 0, leak_at_most: None }));
    assert_eq!(outcome, StepOutcome::Pass, "{lines:?}");
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert_eq!(lines[0], "repeat: 30x iteration [0..29] step 1: set word w[0..29] = 0x1: ok");
    assert_eq!(lines[1], "repeat: 30x iteration [0..29] step 2: check word w[0..29]: 0x1 (expected 0x1)");
    assert!(lines[2].starts_with("repeat: all 30 iterations passed in "), "{lines:?}");
    assert_eq!(
        run1(&mut s, Step::CheckWord(CheckWord { word: "w29".into(), value: 1, or: vec![], within_ms: 0 })).0,
        StepOutcome::Pass
    );

    // The first failing iteration is said in full, after the tally of those before it.
    let body = vec![
        Step::SetWord(SetWord { word: "x".into(), value: 0 }),
        Step::CheckWord(CheckWord { word: "w{iteration}".into(), value: 1, or: vec![], within_ms: 0 }),
    ];
    let (outcome, lines) = run1(&mut s, Step::Repeat(Repeat { count: 50, steps: body, for_ms: 0, leak_at_most: None }));
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
    let inner = Step::Repeat(Repeat {
        count: 2,
        steps: vec![Step::SetWord(SetWord { word: "r{iteration}".into(), value: 1 })],
        for_ms: 0,
        leak_at_most: None,
    });
    let step = Step::Repeat(Repeat {
        count: 3,
        steps: vec![
            Step::Threads(vec![group(
                2,
                vec![Step::SetWord(SetWord { word: "o{iteration}t{thread}".into(), value: 2 })],
            )]),
            inner,
        ],
        for_ms: 0,
        leak_at_most: None,
    });
    let (outcome, lines) = run1(&mut s, step);
    assert_eq!(outcome, StepOutcome::Pass, "{lines:?}");
    for (w, v) in [("o0t0", 2), ("o2t1", 2), ("r0", 1), ("r1", 1), ("r2", 0)] {
        assert_eq!(
            run1(&mut s, Step::CheckWord(CheckWord { word: w.into(), value: v, or: vec![], within_ms: 0 })).0,
            StepOutcome::Pass,
            "{w}"
        );
    }
}

#[test]
fn repeat_for_a_time_caps_the_count() {
    let mut s = ScenarioState::default();
    let body = vec![Step::Sleep(Sleep { ms: 5 })];
    let started = Instant::now();
    let (outcome, lines) =
        run1(&mut s, Step::Repeat(Repeat { count: 1000, steps: body, for_ms: 30, leak_at_most: None }));
    assert_eq!(outcome, StepOutcome::Pass, "{lines:?}");
    assert!(started.elapsed() < Duration::from_millis(1000), "stopped by the time, not the count");
    let last = lines.last().unwrap();
    assert!(last.starts_with("repeat: ") && last.ends_with(" ms (for 30 ms)"), "{lines:?}");
    assert!(last.contains(" iterations (of at most 1000) passed in "), "{lines:?}");
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
    let (outcome, lines) =
        run1(&mut s, Step::CheckWord(CheckWord { word: "w".into(), value: 0x30, or: vec![], within_ms: 2000 }));
    setter.join().unwrap();
    assert_eq!(outcome, StepOutcome::Pass, "{lines:?}");
    assert!(lines[0].starts_with("check word w: 0x30 after "), "{lines:?}");
    assert!(lines[0].ends_with(" ms (expected 0x30 within 2000 ms)"), "{lines:?}");
    let (outcome, lines) =
        run1(&mut s, Step::CheckWord(CheckWord { word: "w".into(), value: 1, or: vec![], within_ms: 20 }));
    assert_eq!(outcome, StepOutcome::Fail);
    assert!(lines[0].starts_with("check word w: still 0x30 after "), "{lines:?}");
    // `or`: another value that passes once `value` has not come.
    let (outcome, lines) =
        run1(&mut s, Step::CheckWord(CheckWord { word: "w".into(), value: 3, or: vec![0x30], within_ms: 0 }));
    assert_eq!((outcome, lines[0].as_str()), (StepOutcome::Pass, "check word w: 0x30 (expected 0x3 or 0x30)"));
    let (outcome, _) =
        run1(&mut s, Step::CheckWord(CheckWord { word: "w".into(), value: 3, or: vec![0, 1], within_ms: 0 }));
    assert_eq!(outcome, StepOutcome::Fail);
}

#[test]
fn write_file_retries_within_its_time() {
    let dir = temp_path("retry-dir");
    let path = dir.join("f");
    let write = |within_ms| {
        Step::WriteFile(WriteFile {
            path: path.display().to_string(),
            data: "x".into(),
            bytes: None,
            create: false,
            append: true,
            expect: Expect::default(),
            within_ms,
        })
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
    let write = |e: &str| {
        Step::Write(Write {
            fd: protocol::DATA_FD.into(),
            index: None,
            index_value: Some(1),
            fields: vec![],
            vectored: false,
            offset: None,
            payload_from: None,
            expect: expect(e),
        })
    };
    let (outcome, lines) = run1(&mut s, write("4 or EBADF"));
    assert_eq!(outcome, StepOutcome::Pass);
    assert!(lines[0].ends_with(": ok, 4 bytes (expected 4 or EBADF)"), "{lines:?}");
    assert_eq!(run1(&mut s, write("5 or EBADF")).0, StepOutcome::Fail);
    fs::remove_file(&path).unwrap();
}

#[test]
fn a_delete_is_confirmed_by_the_event_folder() {
    use crate::steps::uevents::confirm;
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
    let armed = Step::FailNth(FailNth { nth: 2, injected: true, unchanged: true, within: None, not_in: None });
    let (status, lines) = run(&[armed, write_file(&path, "x", true, false, "ok")]);
    assert_eq!(status, 1, "{lines:?}");
    assert_eq!(lines[0], "step 1: fail_nth 2: the next step's first call fails at its fault-injection point 2");
    assert!(lines[1].starts_with("step 2: fail_nth: /sys/kernel/debug/failslab/ignore-gfp-wait: "), "{lines:?}");
    assert!(lines[1].ends_with("(needs CONFIG_FAULT_INJECTION_DEBUG_FS and CONFIG_FAILSLAB: --profile faults)"));
    assert!(!path.exists(), "the armed step did not run");
}

/// A `clone_vm` child runs in the scenario's memory: what it stores the scenario sees after it,
/// its descriptor table is its own copy (the `data` made before it), and only the steps that
/// make nothing run in it.
#[test]
fn a_clone_vm_child_shares_the_memory_and_is_waited_for() {
    use protocol::steps::CloneVm;
    let path = temp_file("clone-vm", b"");
    let mut s = ScenarioState::with_data_path(path.clone());
    let set = Step::SetWord(SetWord { word: "w".into(), value: 7 });
    let write = Step::Write(Write {
        fd: protocol::DATA_FD.into(),
        index: None,
        index_value: Some(3),
        fields: vec![Value::U8(9)],
        vectored: false,
        offset: None,
        payload_from: None,
        expect: expect("5"),
    });
    let clone = |steps| Step::CloneVm(CloneVm { steps, within_ms: 10_000 });
    let (outcome, lines) = run1(&mut s, clone(vec![set, write]));
    assert_eq!(outcome, StepOutcome::Pass, "{lines:?}");
    assert!(lines[0].starts_with("clone_vm: child pid ") && lines[0].ends_with("; exit 0"), "{lines:?}");
    let check = Step::CheckWord(CheckWord { word: "w".into(), value: 7, or: vec![], within_ms: 0 });
    assert_eq!(run1(&mut s, check).0, StepOutcome::Pass, "the child's store is the scenario's");
    assert_eq!(fs::read(&path).unwrap(), [3, 0, 0, 0, 9], "the child wrote on the scenario's data");
    let wrong = Step::CheckWord(CheckWord { word: "w".into(), value: 8, or: vec![], within_ms: 0 });
    let (outcome, lines) = run1(&mut s, clone(vec![wrong]));
    assert!(outcome == StepOutcome::Fail && lines[0].ends_with("; exit 1"), "{lines:?}");
    let (outcome, lines) = run1(&mut s, clone(vec![Step::Close(Close { fd: protocol::DATA_FD.into() })]));
    assert_eq!(outcome, StepOutcome::Fail);
    assert_eq!(lines, ["clone_vm: [\"close\"] cannot run in a child that shares the scenario's memory"]);
    let slow = clone(vec![Step::Sleep(Sleep { ms: 5_000 })]);
    let Step::CloneVm(mut slow) = slow else { unreachable!() };
    slow.within_ms = 50;
    let (outcome, lines) = run1(&mut s, Step::CloneVm(slow));
    assert!(outcome == StepOutcome::Fail && lines[0].contains("still running after 50 ms; killed it"), "{lines:?}");
    fs::remove_file(&path).unwrap();
}
