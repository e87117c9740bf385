//! The eBPF steps: load a counting program (hand-assembled bytecode, no compiler needed),
//! attach it to a perf tracepoint event or a raw tracepoint, and read how often it ran.
//!
//! Every program is `count[0] += 1; return 0`, optionally preceded by an 8-byte load from its
//! context at a given offset (the kernel records the largest context offset a tracepoint
//! program reads and refuses the attach when it is past the event's record).

use std::collections::HashMap;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use protocol::{BpfKind, Expect};

use crate::steps::outcome::{check_result, errno, errno_text, ioctl, result_text, StepOutcome};
use crate::steps::perf::PerfEvents;

const BPF_MAP_CREATE: libc::c_long = 0;
const BPF_MAP_LOOKUP_ELEM: libc::c_long = 1;
const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_RAW_TRACEPOINT_OPEN: libc::c_long = 17;
const BPF_MAP_TYPE_ARRAY: u32 = 2;
const BPF_PROG_TYPE_TRACEPOINT: u32 = 5;
const BPF_PROG_TYPE_RAW_TRACEPOINT: u32 = 17;
/// `_IOW('$', 8, __u32)`.
const PERF_EVENT_IOC_SET_BPF: u64 = 0x4004_2408;

/// A scenario's loaded programs, by name.
pub type Programs = HashMap<String, Prog>;

/// A loaded program and the map it counts in.
pub struct Prog {
    fd: OwnedFd,
    map: OwnedFd,
    kind: BpfKind,
}

/// One 8-byte eBPF instruction: opcode, dst and src registers, offset, immediate, in the
/// CPU's byte order. `struct bpf_insn`'s `dst_reg:4, src_reg:4` bit-fields fill their byte from
/// the least significant bit on little-endian CPUs and from the most significant on big-endian.
fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> [u8; 8] {
    let mut b = [0u8; 8];
    b[0] = code;
    b[1] = if cfg!(target_endian = "big") { (dst << 4) | (src & 0xf) } else { (src << 4) | (dst & 0xf) };
    b[2..4].copy_from_slice(&off.to_ne_bytes());
    b[4..8].copy_from_slice(&imm.to_ne_bytes());
    b
}

/// The program text: `[r6 = *(u64 *)(ctx + ctx_read);] key = 0; v = lookup(map, &key);
/// if v { atomic *v += 1 } return 0`.
pub fn program(map_fd: RawFd, ctx_read: Option<u32>) -> Vec<u8> {
    // Opcodes (class | size | mode / class | op | source).
    const LDX_DW: u8 = 0x79; // BPF_LDX | BPF_MEM | BPF_DW
    const ST_W: u8 = 0x62; // BPF_ST | BPF_MEM | BPF_W
    const MOV64_X: u8 = 0xbf;
    const ADD64_K: u8 = 0x07;
    const LD_IMM64: u8 = 0x18; // BPF_LD | BPF_IMM | BPF_DW, two slots
    const CALL: u8 = 0x85;
    const JEQ_K: u8 = 0x15;
    const MOV64_K: u8 = 0xb7;
    const ATOMIC_DW: u8 = 0xdb; // BPF_STX | BPF_ATOMIC | BPF_DW
    const EXIT: u8 = 0x95;
    const PSEUDO_MAP_FD: u8 = 1;
    const ADD: i32 = 0x00;
    const MAP_LOOKUP_ELEM: i32 = 1;

    let mut code: Vec<[u8; 8]> = Vec::new();
    if let Some(off) = ctx_read {
        code.push(insn(LDX_DW, 6, 1, off as i16, 0));
    }
    code.extend([
        insn(ST_W, 10, 0, -4, 0),
        insn(MOV64_X, 2, 10, 0, 0),
        insn(ADD64_K, 2, 0, 0, -4),
        insn(LD_IMM64, 1, PSEUDO_MAP_FD, 0, map_fd),
        insn(0, 0, 0, 0, 0),
        insn(CALL, 0, 0, 0, MAP_LOOKUP_ELEM),
        insn(JEQ_K, 0, 0, 2, 0),
        insn(MOV64_K, 1, 0, 0, 1),
        insn(ATOMIC_DW, 0, 1, 0, ADD),
        insn(MOV64_K, 0, 0, 0, 0),
        insn(EXIT, 0, 0, 0, 0),
    ]);
    code.concat()
}

/// `bpf(cmd, attr)` with a zero-padded attribute block: Ok(return value) or Err(errno).
fn bpf(cmd: libc::c_long, attr: &[u8]) -> Result<i64, i32> {
    let mut buf = [0u8; 128];
    buf[..attr.len()].copy_from_slice(attr);
    // SAFETY: `buf` is a valid, large enough `union bpf_attr`; pointers inside it point at
    // buffers the caller keeps alive across the call.
    let r = unsafe { libc::syscall(libc::SYS_bpf, cmd, buf.as_mut_ptr(), buf.len() as libc::c_uint) };
    if r < 0 {
        Err(errno())
    } else {
        Ok(r)
    }
}

fn fields(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

/// Creates the one-slot u64 array the program counts in.
fn counter_map() -> Result<OwnedFd, String> {
    let attr = fields(&[
        &BPF_MAP_TYPE_ARRAY.to_ne_bytes(),
        &4u32.to_ne_bytes(), // key_size
        &8u32.to_ne_bytes(), // value_size
        &1u32.to_ne_bytes(), // max_entries
    ]);
    match bpf(BPF_MAP_CREATE, &attr) {
        // SAFETY: a new descriptor that nothing else owns.
        Ok(fd) => Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) }),
        Err(e) => Err(format!("BPF_MAP_CREATE (array, 1 u64): {}", errno_text(e))),
    }
}

/// `Step::BpfProg`.
pub fn load(
    progs: &mut Programs,
    name: &str,
    kind: BpfKind,
    ctx_read: Option<u32>,
    expect: &Expect,
    say: &mut dyn FnMut(&str),
) -> StepOutcome {
    let kind_name = match kind {
        BpfKind::Tracepoint => "tracepoint",
        BpfKind::RawTracepoint => "raw_tracepoint",
    };
    let mut what = format!("bpf load {kind_name} program {name}");
    if let Some(off) = ctx_read {
        what.push_str(&format!(" reading ctx+{off}"));
    }
    let map = match counter_map() {
        Ok(m) => m,
        Err(e) => {
            say(&format!("{what}: {e}"));
            return StepOutcome::Fail;
        }
    };
    let text = program(map.as_raw_fd(), ctx_read);
    let license = b"GPL\0";
    let mut log = vec![0u8; 4096];
    let prog_type = match kind {
        BpfKind::Tracepoint => BPF_PROG_TYPE_TRACEPOINT,
        BpfKind::RawTracepoint => BPF_PROG_TYPE_RAW_TRACEPOINT,
    };
    let attr = fields(&[
        &prog_type.to_ne_bytes(),
        &((text.len() / 8) as u32).to_ne_bytes(), // insn_cnt
        &(text.as_ptr() as u64).to_ne_bytes(),    // insns
        &(license.as_ptr() as u64).to_ne_bytes(), // license
        &1u32.to_ne_bytes(),                      // log_level
        &(log.len() as u32).to_ne_bytes(),        // log_size
        &(log.as_mut_ptr() as u64).to_ne_bytes(), // log_buf
    ]);
    let result = bpf(BPF_PROG_LOAD, &attr);
    let got = match result {
        Ok(_) => "ok".to_string(),
        Err(e) => errno_text(e),
    };
    let outcome = check_result(&what, &got, result, expect, say);
    if let Err(e) = result {
        // The verifier's reasons, for a refusal that was not expected (or to show why it was).
        let text = String::from_utf8_lossy(&log);
        for line in text.trim_end_matches('\0').lines().filter(|l| !l.is_empty()).take(12) {
            say(&format!("{what}: verifier ({}): {line}", errno_text(e)));
        }
    }
    if let Ok(fd) = result {
        // SAFETY: a new descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
        progs.insert(name.to_string(), Prog { fd, map, kind });
    }
    outcome
}

/// `Step::BpfAttach`: PERF_EVENT_IOC_SET_BPF.
pub fn attach(
    progs: &Programs,
    events: &PerfEvents,
    prog: &str,
    perf: &str,
    expect: &Expect,
    say: &mut dyn FnMut(&str),
) -> StepOutcome {
    let what = format!("bpf attach {prog} to perf event {perf}");
    let Some(p) = progs.get(prog) else {
        say(&format!("{what}: no program named {prog}"));
        return StepOutcome::Fail;
    };
    let Some(event) = events.get(perf) else {
        say(&format!("{what}: no perf event named {perf}"));
        return StepOutcome::Fail;
    };
    let result = ioctl(event.fd.as_raw_fd(), PERF_EVENT_IOC_SET_BPF, p.fd.as_raw_fd() as u64);
    check_result(&what, &result_text(result), result, expect, say)
}

/// `Step::BpfRawTracepoint`: BPF_RAW_TRACEPOINT_OPEN; the link descriptor is kept.
pub fn raw_tracepoint(
    progs: &Programs,
    links: &mut Vec<OwnedFd>,
    prog: &str,
    tracepoint: &str,
    expect: &Expect,
    say: &mut dyn FnMut(&str),
) -> StepOutcome {
    let what = format!("bpf raw tracepoint open {tracepoint:?} with {prog}");
    let Some(p) = progs.get(prog) else {
        say(&format!("{what}: no program named {prog}"));
        return StepOutcome::Fail;
    };
    let mut name = tracepoint.as_bytes().to_vec();
    name.push(0);
    let attr = fields(&[&(name.as_ptr() as u64).to_ne_bytes(), &(p.fd.as_raw_fd() as u32).to_ne_bytes()]);
    let result = bpf(BPF_RAW_TRACEPOINT_OPEN, &attr);
    let got = match result {
        Ok(_) => "ok".to_string(),
        Err(e) => errno_text(e),
    };
    if let Ok(fd) = result {
        // SAFETY: a new descriptor that nothing else owns; the attachment lives while it is open.
        links.push(unsafe { OwnedFd::from_raw_fd(fd as i32) });
    }
    check_result(&what, &got, result, expect, say)
}

/// `Step::BpfCount`: the program's counter must equal `equals`.
pub fn count(progs: &Programs, prog: &str, equals: u64, say: &mut dyn FnMut(&str)) -> StepOutcome {
    let what = format!("bpf count of {prog}");
    let Some(p) = progs.get(prog) else {
        say(&format!("{what}: no program named {prog}"));
        return StepOutcome::Fail;
    };
    let key = 0u32;
    let mut value = 0u64;
    let attr = fields(&[
        &(p.map.as_raw_fd() as u32).to_ne_bytes(),
        &0u32.to_ne_bytes(), // padding before the 8-aligned key pointer
        &(&key as *const u32 as u64).to_ne_bytes(),
        &(&mut value as *mut u64 as u64).to_ne_bytes(),
    ]);
    if let Err(e) = bpf(BPF_MAP_LOOKUP_ELEM, &attr) {
        say(&format!("{what}: BPF_MAP_LOOKUP_ELEM: {}", errno_text(e)));
        return StepOutcome::Fail;
    }
    let kind = match p.kind {
        BpfKind::Tracepoint => "tracepoint",
        BpfKind::RawTracepoint => "raw_tracepoint",
    };
    say(&format!("{what} ({kind}): ran {value} times (expected {equals})"));
    if value == equals {
        StepOutcome::Pass
    } else {
        StepOutcome::Fail
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instructions_encode_registers_offset_and_immediate() {
        assert_eq!(insn(0x62, 10, 0, -4, 0), [0x62, 0x0a, 0xfc, 0xff, 0, 0, 0, 0]);
        assert_eq!(insn(0x18, 1, 1, 0, 7), [0x18, 0x11, 0, 0, 7, 0, 0, 0]);
        assert_eq!(insn(0xdb, 0, 1, 0, 0), [0xdb, 0x10, 0, 0, 0, 0, 0, 0]);
    }

    #[test]
    fn the_program_counts_and_optionally_reads_its_context_first() {
        let plain = program(3, None);
        assert_eq!(plain.len(), 11 * 8);
        assert_eq!(&plain[plain.len() - 8..], &insn(0x95, 0, 0, 0, 0));
        let reading = program(3, Some(40));
        assert_eq!(&reading[..8], &insn(0x79, 6, 1, 40, 0));
        assert_eq!(&reading[8..], &plain[..]);
        // The map descriptor sits in the first slot of the 16-byte load.
        assert_eq!(&plain[3 * 8 + 4..3 * 8 + 8], &3i32.to_le_bytes());
        // The branch skips the two increment instructions.
        assert_eq!(plain[6 * 8 + 2], 2);
    }
}
