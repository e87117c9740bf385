//! The `fuzz` step: a bounded, seeded stream of random registrations (format strings and
//! `struct user_reg` fields), writes (sizes, indexes, payloads), enables, unregisters and
//! deletes. Every call must end in success or a documented errno; the kernel's health (no
//! WARN, Oops or taint change) is judged by the host from the console, as for every scenario.

use std::fs::OpenOptions;
use std::io::Write;
use std::os::fd::{AsRawFd, RawFd};

use crate::steps::outcome::{errno, errno_text, ioctl, StepOutcome};
use crate::steps::uevents::{UserReg, DIAG_IOCSDEL, DIAG_IOCSREG, DIAG_IOCSUNREG, USER_REG_SIZE};

/// The errnos the ABI documents for these calls (abi-catalogue.md sections a, b, e, f).
const DOCUMENTED: &[&str] =
    &["EINVAL", "E2BIG", "EFAULT", "ENOMEM", "EADDRINUSE", "ENOENT", "EBADF", "EBUSY", "EMFILE", "ENOTTY", "EPERM"];

/// xorshift64*: small, seeded, the same sequence on every arch.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len() as u64) as usize]
    }
}

const TYPES: &[&str] = &[
    "u8",
    "s8",
    "u16",
    "s16",
    "u32",
    "s32",
    "u64",
    "s64",
    "int",
    "unsigned int",
    "short",
    "unsigned short",
    "char",
    "unsigned char",
    "char[4]",
    "char[20]",
    "char[0x10]",
    "unsigned char[3]",
    "__data_loc char[]",
    "__rel_loc char[]",
    "__data_loc u32[]",
    "struct s 8",
    "struct s 0",
    "long",
    "bool",
    "u32[4]",
    "char[0]",
    "char[2000]",
    "char[]",
    "struct s",
];
/// Event names are `fz_0` .. `fz_{NAMES-1}`, so registrations collide and cleanup is bounded.
const NAMES: u64 = 24;
const SEPARATORS: &[&str] = &[";", "; ", ";;", " ; ", ";\t"];

/// A random format string: mostly valid, sometimes not (types, separators, names, colons).
pub fn format(rng: &mut Rng) -> String {
    let mut s = format!("fz_{}", rng.below(NAMES));
    if rng.below(20) == 0 {
        s.push_str(":flag");
    }
    let fields = rng.below(5);
    for i in 0..fields {
        s.push_str(if i == 0 { " " } else { rng.pick(SEPARATORS) });
        s.push_str(rng.pick(TYPES));
        if rng.below(15) != 0 {
            s.push(' ');
            s.push((b'a' + rng.below(6) as u8) as char);
        }
    }
    s
}

/// A call made and what it returned: its description, and the result or the errno.
type Call = (String, Result<i64, i32>);

/// Runs `iterations` random calls; fails on any undocumented errno.
pub fn run(seed: u64, iterations: u32, say: &mut dyn FnMut(&str)) -> StepOutcome {
    let what = format!("fuzz seed {seed}, {iterations} calls");
    let data = match OpenOptions::new().read(true).write(true).open(protocol::USER_EVENTS_DATA) {
        Ok(f) => f,
        Err(e) => {
            say(&format!("{what}: open {}: {}", protocol::USER_EVENTS_DATA, crate::runtime::sys::error_name(&e)));
            return StepOutcome::Fail;
        }
    };
    let fd = data.as_raw_fd();
    let mut rng = Rng::new(seed);
    // Enable words live in one page so random addresses can be valid, misaligned or shared.
    let mut words = vec![0u64; 64];
    let mut counts: std::collections::BTreeMap<String, u32> = Default::default();
    let mut violations = Vec::new();
    let mut enabled: Vec<String> = Vec::new();
    for i in 0..iterations {
        let (call, result) = match rng.below(10) {
            0..=3 => random_register(fd, &mut rng, &mut words, &mut enabled),
            4..=7 => random_write(fd, &mut rng),
            8 => random_unregister(fd, &mut rng, &words),
            _ => random_delete(fd, &mut rng),
        };
        let label = match result {
            Ok(_) => "ok".to_string(),
            Err(e) => errno_text(e),
        };
        if result.is_err() && !DOCUMENTED.contains(&label.as_str()) {
            violations.push(format!("call {i}: {call}: {label}"));
        }
        *counts.entry(label).or_default() += 1;
    }
    for path in &enabled {
        let _ = OpenOptions::new().write(true).open(path).and_then(|mut f| f.write_all(b"0"));
    }
    // PERSIST registrations outlive the scenario: delete every name the fuzz can make, from a
    // fresh descriptor once ours (and its references) is gone. Unregisters and this process's
    // enablers drop their references only after an RCU grace period, hence the retries.
    unregister_every_word(fd, &words);
    drop(data);
    let left = cleanup();
    if !left.is_empty() {
        say(&format!("{what}: could not delete {}", left.join(", ")));
        violations.push(format!("persistent events left behind: {}", left.join(", ")));
    }
    let summary: Vec<String> = counts.iter().map(|(k, v)| format!("{k} {v}")).collect();
    say(&format!("{what}: {}; {} enable(s)", summary.join(", "), enabled.len()));
    for v in violations.iter().take(20) {
        say(&format!("{what}: undocumented result: {v}"));
    }
    drop(words);
    if violations.is_empty() {
        StepOutcome::Pass
    } else {
        StepOutcome::Fail
    }
}

/// A random registration: a random format, its enable word in `words` (or an address beside
/// it, or a bad one), random sizes and flags; now and then its event enabled in ftrace, its
/// `enable` file's path added to `enabled`.
fn random_register(fd: RawFd, rng: &mut Rng, words: &mut [u64], enabled: &mut Vec<String>) -> Call {
    let fmt = format(rng);
    let name = std::ffi::CString::new(fmt.clone()).expect("no NUL in generated formats");
    let slot = rng.below(words.len() as u64) as usize;
    let base = words.as_mut_ptr() as u64 + 8 * slot as u64;
    let enable_addr = match rng.below(12) {
        0 => base + 1 + rng.below(3),
        1 => 0,
        2 => u64::MAX - 7,
        _ => base,
    };
    let reg = UserReg {
        size: match rng.below(16) {
            0 => rng.below(64) as u32,
            1 => 4097,
            _ => USER_REG_SIZE as u32,
        },
        enable_bit: if rng.below(10) == 0 { rng.below(256) as u8 } else { rng.below(32) as u8 },
        enable_size: *[4u8, 8, 4, 8, 4, 0, 1, 16].get(rng.below(8) as usize).unwrap_or(&4),
        flags: if rng.below(10) == 0 { rng.below(8) as u16 } else { 0 },
        enable_addr,
        name_args: if rng.below(25) == 0 { 0 } else { name.as_ptr() as u64 },
    };
    let tail: Vec<u8> = (0..rng.below(3) * 4).map(|_| (rng.below(4) == 0) as u8).collect();
    let mut buf = reg.encode(&tail);
    let r = ioctl(fd, DIAG_IOCSREG, buf.as_mut_ptr() as u64);
    if r.is_ok() && rng.below(3) == 0 {
        // Attach ftrace now and then, so writes reach the validators.
        let event = fmt.split([' ', ':']).next().unwrap_or("").to_string();
        let path = format!("/sys/kernel/tracing/events/user_events/{event}/enable");
        if OpenOptions::new().write(true).open(&path).and_then(|mut f| f.write_all(b"1")).is_ok() {
            enabled.push(path);
        }
    }
    (format!("register {fmt:?} size {} enable {}/{}", reg.size, reg.enable_size, reg.enable_bit), r)
}

/// A random write: a random payload of a random length, led by a small (or any) write index.
fn random_write(fd: RawFd, rng: &mut Rng) -> Call {
    let index = if rng.below(8) == 0 { rng.below(u32::MAX as u64) as u32 } else { rng.below(6) as u32 };
    let len = match rng.below(6) {
        0 => rng.below(4) as usize,
        1 => rng.below(5000) as usize,
        _ => 4 + rng.below(64) as usize,
    };
    let mut payload: Vec<u8> = (0..len).map(|_| rng.below(256) as u8).collect();
    let n = payload.len().min(4);
    payload[..n].copy_from_slice(&index.to_ne_bytes()[..n]);
    // SAFETY: writes from a live buffer of `len` bytes.
    let r = unsafe { libc::write(fd, payload.as_ptr().cast(), payload.len()) };
    let r = if r >= 0 { Ok(r as i64) } else { Err(errno()) };
    (format!("write index {index} {len} bytes"), r)
}

/// A random unregister: a word of `words` and a random bit of it.
fn random_unregister(fd: RawFd, rng: &mut Rng, words: &[u64]) -> Call {
    let slot = rng.below(words.len() as u64) as usize;
    let mut unreg = [0u8; 16];
    unreg[0..4].copy_from_slice(&16u32.to_ne_bytes());
    unreg[4] = rng.below(32) as u8;
    unreg[8..16].copy_from_slice(&(words.as_ptr() as u64 + 8 * slot as u64).to_ne_bytes());
    let r = ioctl(fd, DIAG_IOCSUNREG, unreg.as_mut_ptr() as u64);
    (format!("unregister word {slot} bit {}", unreg[4]), r)
}

/// A random delete: one of the names the fuzz can make.
fn random_delete(fd: RawFd, rng: &mut Rng) -> Call {
    let name = std::ffi::CString::new(format!("fz_{}", rng.below(NAMES))).expect("no NUL");
    let r = ioctl(fd, DIAG_IOCSDEL, name.as_ptr() as u64);
    (format!("delete {name:?}"), r)
}

/// Every enabler sits on a word slot (other addresses fail to register): each bit of each
/// word of `words` unregistered.
fn unregister_every_word(fd: RawFd, words: &[u64]) {
    for slot in 0..words.len() {
        for bit in 0..64u8 {
            let mut unreg = [0u8; 16];
            unreg[0..4].copy_from_slice(&16u32.to_ne_bytes());
            unreg[4] = bit;
            unreg[8..16].copy_from_slice(&(words.as_ptr() as u64 + 8 * slot as u64).to_ne_bytes());
            let _ = ioctl(fd, DIAG_IOCSUNREG, unreg.as_mut_ptr() as u64);
        }
    }
}

/// Deletes every `fz_N` event; returns the names still there after two seconds.
fn cleanup() -> Vec<String> {
    let Ok(data) = OpenOptions::new().read(true).write(true).open(protocol::USER_EVENTS_DATA) else {
        return vec!["(cannot open user_events_data)".into()];
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    let mut left = Vec::new();
    for n in 0..NAMES {
        let name = std::ffi::CString::new(format!("fz_{n}")).expect("no NUL");
        loop {
            match ioctl(data.as_raw_fd(), DIAG_IOCSDEL, name.as_ptr() as u64) {
                // ENOENT: none (left) of that name; success deletes one of possibly several.
                Err(e) if e == libc::ENOENT => break,
                Ok(_) => continue,
                Err(_) if std::time::Instant::now() < deadline => {
                    std::thread::sleep(std::time::Duration::from_millis(2));
                }
                Err(_) => {
                    left.push(format!("fz_{n}"));
                    break;
                }
            }
        }
    }
    left
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sequence_is_seeded() {
        let a: Vec<u64> = (0..5)
            .map({
                let mut r = Rng::new(7);
                move |_| r.next()
            })
            .collect();
        let b: Vec<u64> = (0..5)
            .map({
                let mut r = Rng::new(7);
                move |_| r.next()
            })
            .collect();
        assert_eq!(a, b);
        assert_ne!(Rng::new(8).next(), Rng::new(7).next());
    }

    #[test]
    fn formats_start_with_a_fuzz_name() {
        let mut r = Rng::new(1);
        for _ in 0..200 {
            let f = format(&mut r);
            assert!(f.starts_with("fz_"), "{f}");
            assert!(!f.contains('\0'));
        }
    }
}
