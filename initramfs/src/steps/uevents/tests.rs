//! The user_events steps' unit tests: struct encodings, the words page, word widths, the
//! `align_addr_bit()` branch a register line names, and the minor faults counted over an ioctl.

use super::*;
use protocol::steps::{ExecAgent, Fork, Register, Repeat, SetWord, Thread};
use protocol::Step;

#[test]
fn ioctl_numbers_match_the_uapi_on_lp64() {
    if cfg!(target_pointer_width = "64") {
        assert_eq!((DIAG_IOCSREG, DIAG_IOCSDEL, DIAG_IOCSUNREG), (0xC008_2A00, 0x4008_2A01, 0x4008_2A02));
    }
}

#[test]
fn user_reg_encodes_packed() {
    let reg = UserReg {
        size: 28,
        enable_bit: 31,
        enable_size: 4,
        flags: 2,
        enable_addr: 0x1122_3344_5566_7788,
        name_args: 0x0102_0304_0506_0708,
    };
    #[rustfmt::skip]
    let want: [u8; 28] = [
        28, 0, 0, 0, 31, 4, 2, 0,
        0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11,
        0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01,
        0, 0, 0, 0,
    ];
    if cfg!(target_endian = "little") {
        assert_eq!(reg.encode(&[]), want);
        let with_tail = reg.encode(&[0, 9]);
        assert_eq!((with_tail.len(), &with_tail[..28], &with_tail[28..]), (30, &want[..], &[0u8, 9][..]));
    }
    let unreg = UserUnreg { size: 16, disable_bit: 5, reserved: 1, reserved2: 0x0203, disable_addr: 0xa0b0 };
    if cfg!(target_endian = "little") {
        assert_eq!(unreg.encode(), [16, 0, 0, 0, 5, 1, 3, 2, 0xb0, 0xa0, 0, 0, 0, 0, 0, 0]);
    }
}

#[test]
fn memory_ops_change_the_words_page() {
    use protocol::MemoryOp;
    let s = UserEvents::new();
    let mut lines = Vec::new();
    let mut say = |l: &str| lines.push(l.to_string());
    s.set_word("w", 5, &mut say).unwrap();
    assert_eq!(s.memory(MemoryOp::DontNeed, None, &mut say).unwrap(), StepOutcome::Pass);
    assert_eq!(s.load("w").unwrap(), 0, "MADV_DONTNEED gives a zero page back");
    assert_eq!(s.memory(MemoryOp::ReadOnly, None, &mut say).unwrap(), StepOutcome::Pass);
    assert!(s.set_word("w", 1, &mut say).is_err(), "no store to a read-only page");
    assert_eq!(s.memory(MemoryOp::ReadWrite, None, &mut say).unwrap(), StepOutcome::Pass);
    s.set_word("w", 1, &mut say).unwrap();
    let addr = s.word(Some("w")).unwrap();
    assert_eq!(s.memory(MemoryOp::Unmap, None, &mut say).unwrap(), StepOutcome::Pass);
    assert_eq!(s.word(Some("w")).unwrap(), addr, "the word keeps its address");
    assert!(s.load("w").is_err(), "but cannot be read");
    assert!(s.word(Some("new")).is_err());
}

#[test]
fn words_get_distinct_aligned_slots() {
    let s = UserEvents::new();
    let a = s.word(Some("a")).unwrap();
    let b = s.word(Some("b")).unwrap();
    let scratch = s.word(None).unwrap();
    assert_eq!(s.word(Some("a")).unwrap(), a, "a name keeps its slot");
    assert_eq!(b, a + 8);
    assert_eq!(scratch, b + 8, "a scratch word takes a slot of its own");
    assert_eq!(a % 8, 0);
    assert_eq!(s.word(None).unwrap(), scratch + 8, "each scratch word is new");
}

/// A 4-byte word is two native u32s (the registered one as bits 0..31), an 8-byte word one
/// native u64, whatever the CPU's byte order; the width comes from the first registration
/// naming the word, also inside forks, threads and repeats, even when a `set_word` comes first.
#[test]
fn words_are_as_wide_as_their_first_registration() {
    let reg = |w: &str, size: u8| {
        Step::Register(Register {
            fd: protocol::DATA_FD.into(),
            format: "x u32 a".into(),
            word: Some(w.into()),
            bit: 0,
            size,
            flags: 0,
            index_as: None,
            expect_index: None,
            raw: RawReg::default(),
            minor_faults: None,
            expect: Expect::default(),
        })
    };
    let s = UserEvents::new();
    s.learn_widths(&[
        Step::SetWord(SetWord { word: "four".into(), value: 0 }),
        reg("four", 4),
        reg("four", 8),
        Step::Fork(Fork { name: "c".into(), steps: vec![reg("eight", 8)] }),
        Step::Thread(Thread { steps: vec![reg("t", 4)] }),
        Step::Threads(vec![protocol::ThreadGroup { count: 2, steps: vec![reg("w{thread}", 4)] }]),
        Step::Repeat(Repeat { count: 2, steps: vec![reg("r{iteration}x", 4)], for_ms: 0, leak_at_most: None }),
        Step::ExecAgent(ExecAgent { steps: vec![reg("fresh", 8)], keep: vec![] }),
        Step::CloneVm(protocol::steps::CloneVm { steps: vec![reg("shared", 4)], within_ms: 10_000 }),
    ]);
    assert_eq!((s.width("four"), s.width("eight"), s.width("t")), (4, 8, 4));
    assert_eq!(s.width("shared"), 4, "a clone_vm child's registration names the process's word");
    assert_eq!((s.width("w0"), s.width("w17"), s.width("r3x")), (4, 4, 4), "placeholders stand for numbers");
    assert_eq!((s.width("w"), s.width("wx"), s.width("r3")), (8, 8, 8));
    assert_eq!(s.width("fresh"), 8, "an exec'd agent learns its own");
    assert_eq!(s.width("unnamed"), 8);
    let native = |s: &UserEvents, w: &str| {
        let a = s.word(Some(w)).unwrap();
        // SAFETY: an 8-aligned slot of the words page, mapped while `s` lives.
        unsafe { (*(a as *const u32), *((a + 4) as *const u32), *(a as *const u64)) }
    };
    let mut say = |_: &str| {};
    s.set_word("four", 0x0000_0008_a5a5_a5a5, &mut say).unwrap();
    assert_eq!((native(&s, "four").0, native(&s, "four").1), (0xa5a5_a5a5, 8));
    assert_eq!(s.load("four").unwrap(), 0x0000_0008_a5a5_a5a5);
    s.set_word("eight", 1 << 40, &mut say).unwrap();
    assert_eq!(native(&s, "eight").2, 1 << 40);
}

#[test]
fn the_align_addr_bit_branch_follows_address_size_and_byte_order() {
    let path = |addr, size, big| align_addr_bit_path(addr, size, 5, big).unwrap();
    assert_eq!(
        path(0x1000, 4, true),
        "enable addr % 8 = 0, 4 bytes, big-endian: align_addr_bit aligned, 32-on-64 big-endian, bit += 32: \
         bit 37 of the long"
    );
    assert_eq!(
        path(0x1004, 4, true),
        "enable addr % 8 = 4, 4 bytes, big-endian: align_addr_bit unaligned, address - 4, bit as is: bit 5 of the long"
    );
    assert!(path(0x1000, 4, false).ends_with("aligned, as is: bit 5 of the long"));
    assert!(path(0x1004, 4, false).ends_with("unaligned, address - 4, bit += 32: bit 37 of the long"));
    assert!(path(0x1000, 8, true).ends_with("8 bytes, big-endian: align_addr_bit aligned, as is: bit 5 of the long"));
    // Refused by the kernel before it gets there.
    assert_eq!(align_addr_bit_path(0x1002, 4, 0, true), None);
    assert_eq!(align_addr_bit_path(0x1004, 8, 0, false), None);
}

/// `minor_faults` counts the thread's minor faults during the ioctl alone: none for an ioctl
/// an ordinary file refuses (ENOTTY), so 0 passes and any other count fails, saying both.
#[test]
fn minor_faults_are_counted_over_the_ioctl_alone() {
    let path = std::env::temp_dir().join(format!("ue-agent-minflt-{}", std::process::id()));
    std::fs::write(&path, b"").unwrap();
    let s = UserEvents::with_data_path(path.clone());
    let enotty: Expect = "ENOTTY".parse().unwrap();
    let raw = RawReg::default();
    let reg = |minor_faults| Reg {
        fd: protocol::DATA_FD,
        format: "ev u32 a",
        word: Some("w"),
        bit: 0,
        size: 4,
        flags: 0,
        index_as: None,
        expect_index: None,
        raw: &raw,
        minor_faults: Some(minor_faults),
    };
    let mut lines = Vec::new();
    let mut say = |l: &str| lines.push(l.to_string());
    assert_eq!(s.register(&reg(0), &enotty, &mut say).unwrap(), StepOutcome::Pass);
    assert_eq!(s.register(&reg(10), &enotty, &mut say).unwrap(), StepOutcome::Fail);
    let raw_unreg = RawUnreg::default();
    let unreg = |minor_faults| Unreg {
        fd: protocol::DATA_FD,
        word: Some("w"),
        bit: 0,
        raw: &raw_unreg,
        minor_faults: Some(minor_faults),
    };
    assert_eq!(s.unregister(&unreg(0), &enotty, &mut say).unwrap(), StepOutcome::Pass);
    assert_eq!(s.unregister(&unreg(1), &enotty, &mut say).unwrap(), StepOutcome::Fail);
    let _ = std::fs::remove_file(path);
    let reg_line = "register \"ev u32 a\" word w bit 0 size 4, 0 minor page fault(s) during the call";
    assert_eq!(lines[0], format!("{reg_line}: ENOTTY (expected ENOTTY)"));
    assert_eq!(lines[1], format!("{reg_line}, 10 expected"));
    assert_eq!(lines[3], "unregister word w bit 0, 0 minor page fault(s) during the call, 1 expected");
}

/// `dup` names a second descriptor of the same open file: closing the first leaves the copy
/// usable; a name that is not open cannot be duplicated.
#[test]
fn a_dup_outlives_the_name_it_copies() {
    let path = std::env::temp_dir().join(format!("ue-agent-dup-{}", std::process::id()));
    std::fs::write(&path, b"").unwrap();
    let s = UserEvents::with_data_path(path.clone());
    let mut lines = Vec::new();
    let mut say = |l: &str| lines.push(l.to_string());
    assert_eq!(s.dup(protocol::DATA_FD, "copy", &mut say).unwrap(), StepOutcome::Pass);
    assert_eq!(s.close(protocol::DATA_FD, &mut say).unwrap(), StepOutcome::Pass);
    let enotty: Expect = "ENOTTY".parse().unwrap();
    let raw = RawUnreg::default();
    let unreg = Unreg { fd: "copy", word: Some("w"), bit: 0, raw: &raw, minor_faults: None };
    assert_eq!(s.unregister(&unreg, &enotty, &mut say).unwrap(), StepOutcome::Pass);
    assert_eq!(s.dup("nope", "other", &mut say).unwrap_err(), "dup fd nope as other: no fd named nope");
    let _ = std::fs::remove_file(path);
    assert_eq!(lines[..2], ["dup fd data as copy: ok", "close fd data: ok"]);
    assert!(lines[2].starts_with("unregister word w bit 0 on fd copy"), "{lines:?}");
}
