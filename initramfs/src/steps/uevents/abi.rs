//! The user_events ABI as the ioctls send it: the `DIAG_IOCS*` command numbers, `struct
//! user_reg` and `struct user_unreg` packed in the CPU's byte order, and the text that shows a
//! `raw` override or a payload.

use protocol::RawReg;

use crate::steps::memory::addr_text;

/// `_IOC(dir, '*', nr, size)`. The uapi header passes the pointer type to `_IOWR`/`_IOW`, so the
/// size bits hold sizeof(pointer), not the struct's size.
const fn diag_ioc(dir: u64, nr: u64) -> u64 {
    (dir << 30) | ((std::mem::size_of::<usize>() as u64) << 16) | (0x2a << 8) | nr
}

pub const DIAG_IOCSREG: u64 = diag_ioc(3, 0);

pub const DIAG_IOCSDEL: u64 = diag_ioc(1, 1);

pub const DIAG_IOCSUNREG: u64 = diag_ioc(1, 2);

/// sizeof(struct user_reg) and where the kernel puts the write index.
pub const USER_REG_SIZE: usize = 28;

pub(super) const WRITE_INDEX_AT: usize = 24;

pub const USER_UNREG_SIZE: usize = 16;

/// The fields of `struct user_reg` as sent (`write_index` is the kernel's output and goes out as 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UserReg {
    pub size: u32,
    pub enable_bit: u8,
    pub enable_size: u8,
    pub flags: u16,
    pub enable_addr: u64,
    pub name_args: u64,
}

impl UserReg {
    /// The packed 28 bytes followed by `tail`.
    pub fn encode(&self, tail: &[u8]) -> Vec<u8> {
        let mut buf = vec![0; USER_REG_SIZE + tail.len()];
        buf[USER_REG_SIZE..].copy_from_slice(tail);
        self.write_to(&mut buf);
        buf
    }

    /// Rewrites the first 28 bytes in place, without allocating (see [`memory::hole`]).
    pub(super) fn write_to(&self, buf: &mut [u8]) {
        buf[0..4].copy_from_slice(&self.size.to_ne_bytes());
        buf[4] = self.enable_bit;
        buf[5] = self.enable_size;
        buf[6..8].copy_from_slice(&self.flags.to_ne_bytes());
        buf[8..16].copy_from_slice(&self.enable_addr.to_ne_bytes());
        buf[16..24].copy_from_slice(&self.name_args.to_ne_bytes());
        buf[WRITE_INDEX_AT..USER_REG_SIZE].copy_from_slice(&0u32.to_ne_bytes());
    }
}

/// The fields of `struct user_unreg`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UserUnreg {
    pub size: u32,
    pub disable_bit: u8,
    pub reserved: u8,
    pub reserved2: u16,
    pub disable_addr: u64,
}

impl UserUnreg {
    pub fn encode(&self) -> [u8; USER_UNREG_SIZE] {
        let mut buf = [0; USER_UNREG_SIZE];
        buf[0..4].copy_from_slice(&self.size.to_ne_bytes());
        buf[4] = self.disable_bit;
        buf[5] = self.reserved;
        buf[6..8].copy_from_slice(&self.reserved2.to_ne_bytes());
        buf[8..16].copy_from_slice(&self.disable_addr.to_ne_bytes());
        buf
    }
}

/// Zeros after `buf` up to `size` (at most 64 KiB are sent): what a `size` larger than the
/// struct and its tail makes the kernel read is ours, not the heap beyond.
pub(super) fn pad_to(buf: &mut Vec<u8>, size: u32) {
    if (size as usize) > buf.len() && size <= 1 << 16 {
        buf.resize(size as usize, 0);
    }
}

/// The first bytes of a payload in hex, one group per part.
pub(super) fn hex_parts(parts: &[Vec<u8>]) -> String {
    const CAP: usize = 64;
    let mut text = String::new();
    let mut shown = 0;
    for part in parts {
        if !text.is_empty() {
            text.push(' ');
        }
        for b in part {
            if shown == CAP {
                text.push_str("...");
                return text;
            }
            text.push_str(&format!("{b:02x}"));
            shown += 1;
        }
    }
    text
}

/// ` raw size=40 enable_addr=kernel 0x...`: the overrides as sent, empty when there are none.
pub(super) fn raw_reg_text(raw: &RawReg, reg: &UserReg, arg: u64) -> String {
    let mut parts = Vec::new();
    if let Some(c) = raw.cmd {
        parts.push(format!("cmd={c:#x}"));
    }
    if let Some(s) = raw.size {
        parts.push(format!("size={s}"));
    }
    if let Some(v) = raw.enable_bit {
        parts.push(format!("enable_bit={v}"));
    }
    if let Some(v) = raw.enable_size {
        parts.push(format!("enable_size={v}"));
    }
    if let Some(v) = raw.flags {
        parts.push(format!("flags={v:#x}"));
    }
    if let Some(a) = &raw.enable_addr {
        parts.push(format!("enable_addr={}", addr_text(a, reg.enable_addr)));
    }
    if let Some(a) = &raw.name_args {
        parts.push(format!("name_args={}", addr_text(a, reg.name_args)));
    }
    if !raw.tail.is_empty() {
        parts.push(format!("tail={}", hex_parts(std::slice::from_ref(&raw.tail))));
    }
    if let Some(a) = &raw.arg {
        parts.push(format!("arg={}", addr_text(a, arg)));
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!(" raw {}", parts.join(" "))
    }
}
