//! ue-compat32: a 32-bit user_events client for catalogue item M1 (compat processes on a 64-bit
//! kernel get ENOTTY for every user_events ioctl: `user_data_fops` has no `.compat_ioctl`).
//!
//! Built for i686 (x86_64 guests) and armv7 (arm64 guests), static. It opens
//! `user_events_data` and makes the calls named on its command line, in order, each with a
//! valid-looking argument, and compares each result with the expectation given beside it:
//!
//! ```text
//! ue-compat32 reg32=ENOTTY unreg32=ENOTTY del32=ENOTTY reg64=ENOTTY unreg64=ENOTTY del64=ENOTTY write=ENOENT
//! ```
//!
//! `reg32`, `unreg32`, `del32` use the command numbers a 32-bit build computes
//! (`_IOWR('*', 0, sizeof(struct user_reg *))` with 4-byte pointers); `reg64`, `unreg64`,
//! `del64` the numbers of a 64-bit build (8-byte pointers). `write` is a control: a 4-byte
//! write of index 0 on the same descriptor, a file operation that needs no compat handler.
//! Expectations are `ok` or an errno name. One line per call; exit 0 when every call ended as
//! expected, 1 at the first that did not (naming both), 2 for bad usage.

use std::ffi::CStr;
use std::process::ExitCode;
use std::sync::atomic::AtomicU32;

use clients_common::{errno_from_name, last_errno, outcome};

const DATA: &CStr = c"/sys/kernel/tracing/user_events_data";
/// The event a successful registration would create; the scenario checks it never appears.
const EVENT: &CStr = c"compat32_probe u32 a";
const EVENT_NAME: &CStr = c"compat32_probe";

const IOC_WRITE: u32 = 1;
const IOC_READ: u32 = 2;
const DIAG_IOC_MAGIC: u32 = b'*' as u32;

/// The asm-generic `_IOC()` encoding, which i386, x86_64, arm and arm64 all use.
const fn ioc(dir: u32, nr: u32, size: u32) -> u32 {
    (dir << 30) | (size << 16) | (DIAG_IOC_MAGIC << 8) | nr
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ioctl {
    /// `DIAG_IOCSREG = _IOWR('*', 0, struct user_reg *)`
    Reg,
    /// `DIAG_IOCSDEL = _IOW('*', 1, char *)`
    Del,
    /// `DIAG_IOCSUNREG = _IOW('*', 2, struct user_unreg *)`
    Unreg,
}

impl Ioctl {
    /// The command number as a build with `pointer_bytes`-byte pointers computes it.
    const fn number(self, pointer_bytes: u32) -> u32 {
        match self {
            Ioctl::Reg => ioc(IOC_READ | IOC_WRITE, 0, pointer_bytes),
            Ioctl::Del => ioc(IOC_WRITE, 1, pointer_bytes),
            Ioctl::Unreg => ioc(IOC_WRITE, 2, pointer_bytes),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Ioctl::Reg => "DIAG_IOCSREG",
            Ioctl::Del => "DIAG_IOCSDEL",
            Ioctl::Unreg => "DIAG_IOCSUNREG",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Call {
    Ioctl(Ioctl, u32),
    Write,
}

impl Call {
    fn parse(name: &str) -> Option<Call> {
        Some(match name {
            "reg32" => Call::Ioctl(Ioctl::Reg, 4),
            "unreg32" => Call::Ioctl(Ioctl::Unreg, 4),
            "del32" => Call::Ioctl(Ioctl::Del, 4),
            "reg64" => Call::Ioctl(Ioctl::Reg, 8),
            "unreg64" => Call::Ioctl(Ioctl::Unreg, 8),
            "del64" => Call::Ioctl(Ioctl::Del, 8),
            "write" => Call::Write,
            _ => return None,
        })
    }
}

/// `struct user_reg` (include/uapi/linux/user_events.h): packed, 28 bytes on every ABI.
#[repr(C, packed)]
struct UserReg {
    size: u32,
    enable_bit: u8,
    enable_size: u8,
    flags: u16,
    enable_addr: u64,
    name_args: u64,
    write_index: u32,
}

/// `struct user_unreg`: packed, 16 bytes.
#[repr(C, packed)]
struct UserUnreg {
    size: u32,
    disable_bit: u8,
    reserved: u8,
    reserved2: u16,
    disable_addr: u64,
}

/// One expectation from the command line: `reg32=ENOTTY`; the errno is 0 for `ok`.
fn parse_arg(arg: &str) -> Result<(Call, i32), String> {
    let (call, expect) = arg.split_once('=').ok_or_else(|| format!("`{arg}`: expected CALL=EXPECT"))?;
    let call = Call::parse(call).ok_or_else(|| {
        format!("`{arg}`: unknown call `{call}` (reg32, unreg32, del32, reg64, unreg64, del64, write)")
    })?;
    let errno = match expect {
        "ok" => 0,
        name => errno_from_name(name).ok_or_else(|| format!("`{arg}`: unknown errno name `{name}`"))?,
    };
    Ok((call, errno))
}

/// Makes one call and returns its errno (0 for success) and a description of what was sent.
fn make(fd: i32, call: Call, word: *mut u32) -> (i32, String) {
    match call {
        Call::Ioctl(which, pointer_bytes) => {
            let cmd = which.number(pointer_bytes);
            let mut reg = UserReg {
                size: size_of::<UserReg>() as u32,
                enable_bit: 0,
                enable_size: 4,
                flags: 0,
                enable_addr: word as usize as u64,
                name_args: EVENT.as_ptr() as usize as u64,
                write_index: 0,
            };
            let unreg = UserUnreg {
                size: size_of::<UserUnreg>() as u32,
                disable_bit: 0,
                reserved: 0,
                reserved2: 0,
                disable_addr: word as usize as u64,
            };
            let (arg, shown): (*mut libc::c_void, String) = match which {
                Ioctl::Reg => (
                    (&raw mut reg).cast(),
                    format!("struct user_reg {{ size 28, enable_size 4, bit 0, name_args {EVENT:?} }}"),
                ),
                Ioctl::Unreg => ((&raw const unreg).cast_mut().cast(), "struct user_unreg { size 16, bit 0 }".into()),
                Ioctl::Del => (EVENT_NAME.as_ptr().cast_mut().cast(), format!("{EVENT_NAME:?}")),
            };
            // SAFETY: `arg` points at a live value of the type the command expects; the
            // command number is passed through as the kernel would receive it from any caller.
            let r = unsafe { libc::ioctl(fd, cmd as _, arg) };
            let errno = if r < 0 { last_errno() } else { 0 };
            (errno, format!("ioctl({}={cmd:#010x}, {shown})", which.name()))
        }
        Call::Write => {
            let index = 0u32.to_ne_bytes();
            // SAFETY: a 4-byte buffer that outlives the call.
            let r = unsafe { libc::write(fd, index.as_ptr().cast(), index.len()) };
            let errno = if r < 0 { last_errno() } else { 0 };
            (errno, "write(index 0, 4 bytes)".into())
        }
    }
}

fn machine() -> String {
    // SAFETY: uname fills the zeroed struct; the field is NUL-terminated.
    unsafe {
        let mut u: libc::utsname = std::mem::zeroed();
        if libc::uname(&mut u) != 0 {
            return "?".into();
        }
        CStr::from_ptr(u.machine.as_ptr()).to_string_lossy().into_owned()
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let plan: Result<Vec<(Call, i32)>, String> = args.iter().map(|a| parse_arg(a)).collect();
    let plan = match plan {
        Ok(p) if !p.is_empty() => p,
        Ok(_) => {
            eprintln!("ue-compat32: usage: ue-compat32 CALL=EXPECT... (CALL: reg32 unreg32 del32 reg64 unreg64 del64 write; EXPECT: ok or an errno name)");
            return ExitCode::from(2);
        }
        Err(e) => {
            eprintln!("ue-compat32: {e}");
            return ExitCode::from(2);
        }
    };
    let bits = usize::BITS;
    println!("ue-compat32: a {bits}-bit process, uname machine {}", machine());
    if bits != 32 {
        println!("ue-compat32: FAIL: built for {bits}-bit pointers, so it cannot test the compat path");
        return ExitCode::from(1);
    }
    // SAFETY: a NUL-terminated path.
    let fd = unsafe { libc::open(DATA.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
    if fd < 0 {
        println!("ue-compat32: FAIL: open {DATA:?}: {}", outcome(last_errno()));
        return ExitCode::from(1);
    }
    // The enable word a registration would name (the kernel writes it: an atomic, not a plain u32).
    let word = AtomicU32::new(0);
    for (call, expect) in plan {
        let (errno, shown) = make(fd, call, word.as_ptr());
        let verdict = if errno == expect { "as expected" } else { "MISMATCH" };
        println!("ue-compat32: {shown} -> {} (expected {}): {verdict}", outcome(errno), outcome(expect));
        if errno != expect {
            return ExitCode::from(1);
        }
    }
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The numbers from include/uapi/linux/user_events.h as each pointer width computes them.
    #[test]
    fn command_numbers_follow_the_pointer_size() {
        assert_eq!(Ioctl::Reg.number(4), 0xc004_2a00);
        assert_eq!(Ioctl::Reg.number(8), 0xc008_2a00);
        assert_eq!(Ioctl::Del.number(4), 0x4004_2a01);
        assert_eq!(Ioctl::Del.number(8), 0x4008_2a01);
        assert_eq!(Ioctl::Unreg.number(4), 0x4004_2a02);
        assert_eq!(Ioctl::Unreg.number(8), 0x4008_2a02);
        assert_eq!(size_of::<UserReg>(), 28);
        assert_eq!(size_of::<UserUnreg>(), 16);
    }

    #[test]
    fn arguments_name_a_call_and_an_expectation() {
        assert_eq!(parse_arg("reg32=ENOTTY"), Ok((Call::Ioctl(Ioctl::Reg, 4), libc::ENOTTY)));
        assert_eq!(parse_arg("del64=ok"), Ok((Call::Ioctl(Ioctl::Del, 8), 0)));
        assert_eq!(parse_arg("write=ENOENT"), Ok((Call::Write, libc::ENOENT)));
        assert!(parse_arg("reg32").unwrap_err().contains("CALL=EXPECT"));
        assert!(parse_arg("reg16=ok").unwrap_err().contains("unknown call `reg16`"));
        assert!(parse_arg("reg32=ENOPE").unwrap_err().contains("unknown errno name `ENOPE`"));
    }
}
