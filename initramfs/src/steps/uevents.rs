//! The user_events steps of a scenario: the raw ioctls (`DIAG_IOCSREG`, `DIAG_IOCSUNREG`,
//! `DIAG_IOCSDEL`) on named descriptors, enable words in the scenario's own memory, kept write
//! indexes, and event writes. All state lives as long as the scenario child process, and the
//! threads of a `threads` step share it as threads of one process share descriptors and memory:
//! the names are behind a lock held only to look them up, never across a system call.
//!
//! Enable words are 8-byte slots of one private anonymous page. A word is as wide as the first
//! `register` step of the scenario that names it (4 bytes unless it says `size: 8`), and
//! `set_word`, `check_word` and `check_bit` see its slot the way such a registration does,
//! whatever the CPU's byte order: an 8-byte word is the slot's native u64; a 4-byte word is the
//! native u32 at the slot's address as bits 0..31 and the native u32 after it (the neighbour a
//! registration at `word_offset: 4` owns) as bits 32..63. On a little-endian CPU both views are
//! the slot's u64; on a big-endian one they differ, and bit N of a 4-byte word is bit N of the
//! u32 the kernel was given.

use std::collections::HashMap;
use std::fs::OpenOptions;
use std::os::fd::{AsRawFd, IntoRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use protocol::{Addr, Expect, RawReg, RawUnreg, Value};

use crate::runtime::sys;
use crate::steps::memory::{self, addr_text, Page, Scratch, Slot};
use crate::steps::outcome::{check_result, errno, errno_text, ioctl, result_text, Done, StepOutcome};
use crate::steps::userfault::Held;

mod abi;
mod fds;
mod ioctl;
mod page;
mod words;
mod writes;

use abi::{hex_parts, pad_to, raw_reg_text, WRITE_INDEX_AT};
pub use abi::{UserReg, UserUnreg, DIAG_IOCSDEL, DIAG_IOCSREG, DIAG_IOCSUNREG, USER_REG_SIZE, USER_UNREG_SIZE};

/// What the user_events steps of one scenario made: named descriptors, the enable words,
/// write indexes, and the memory handed to the kernel. A clone shares all of it (a thread's view).
#[derive(Clone)]
pub struct UserEvents {
    /// Where the `data` descriptor is opened on first use (tests point it at an ordinary file).
    data_path: PathBuf,
    names: Arc<Mutex<Names>>,
}

/// The named objects, shared by the threads of a scenario.
struct Names {
    /// Page faults held on the words page (`memory: hold_page_faults`); before `words`, so a
    /// scenario's end releases them before the page goes.
    held: Option<Arc<Held>>,
    fds: HashMap<String, OwnedFd>,
    /// The enable words' page, mapped on first use, and each word's offset in it.
    words: Option<Page>,
    slots: HashMap<String, usize>,
    next_slot: usize,
    /// Each named word's width (4 or 8), from the first `register` naming it (`learn_widths`);
    /// a name may hold `{thread}` or `{iteration}`, which stand for any number.
    widths: HashMap<String, u8>,
    indexes: HashMap<String, u32>,
    /// Fresh and read-only pages handed to the kernel.
    scratch: Scratch,
    /// Descriptors `register_until` opened, kept open until the scenario ends.
    kept_files: Vec<OwnedFd>,
    /// After `memory: unmap` the words keep their addresses but must not be touched, and the
    /// page is not unmapped again; after `read_only` they must not be stored to.
    words_gone: bool,
    words_read_only: bool,
    unmapped_base: Option<u64>,
}

// SAFETY: the words page and the scratch pages are plain mappings owned here; the kernel and the
// scenario's threads access the words through atomics only.
unsafe impl Send for Names {}

impl Default for UserEvents {
    fn default() -> Self {
        UserEvents::new()
    }
}

impl UserEvents {
    pub fn new() -> UserEvents {
        UserEvents::with_data_path(protocol::USER_EVENTS_DATA.into())
    }

    pub fn with_data_path(data_path: PathBuf) -> UserEvents {
        let names = Names {
            held: None,
            fds: HashMap::new(),
            words: None,
            slots: HashMap::new(),
            next_slot: 0,
            widths: HashMap::new(),
            indexes: HashMap::new(),
            scratch: Scratch::default(),
            kept_files: Vec::new(),
            words_gone: false,
            words_read_only: false,
            unmapped_base: None,
        };
        UserEvents { data_path, names: Arc::new(Mutex::new(names)) }
    }

    /// The names, locked; a thread that panicked while holding them left nothing half-made that
    /// matters (each insert is one call), so a poisoned lock is taken as is.
    fn names(&self) -> MutexGuard<'_, Names> {
        self.names.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Makes what the threads of a `threads` step must find already made, so they share it
    /// rather than each making its own: the words page, and the `data` descriptor (a failure to
    /// open it is left for the step that uses it to say).
    pub fn prepare_for_threads(&self) -> Result<(), String> {
        let mut names = self.names();
        if names.words.is_none() && !names.words_gone {
            names.words = Some(Page::map_apart(libc::PROT_READ | libc::PROT_WRITE)?);
        }
        let _ = names.fd(protocol::DATA_FD, &self.data_path);
        Ok(())
    }

    /// The descriptor under `name`; `data` is opened on `user_events_data` on first use.
    fn fd(&self, name: &str) -> Result<RawFd, String> {
        self.names().fd(name, &self.data_path)
    }

    /// The address of enable word `name`, made (zeroed, 8-byte aligned) on first use;
    /// `None` gives a new private scratch word.
    pub fn word(&self, name: Option<&str>) -> Result<u64, String> {
        self.names().word(name)
    }

    pub fn register(&self, r: &Reg<'_>, expect: &Expect, say: &mut dyn FnMut(&str)) -> Done {
        let mut what = format!("register {:?}", r.format);
        if let Some(w) = r.word {
            what.push_str(&format!(" word {w}"));
        }
        what.push_str(&format!(" bit {} size {}", r.bit, r.size));
        if r.flags != 0 {
            what.push_str(&format!(" flags {:#x}", r.flags));
        }
        if r.fd != protocol::DATA_FD {
            what.push_str(&format!(" on fd {}", r.fd));
        }
        let mut names = self.names();
        let fd = names.fd(r.fd, &self.data_path).map_err(|e| format!("{what}: {e}"))?;
        let word = names.word(r.word)?;
        let raw = r.raw;
        let mut name = r.format.as_bytes().to_vec();
        name.push(0);
        let enable = match &raw.enable_addr {
            Some(a) => names.scratch.resolve(a, word)?,
            None => Slot::At(word),
        };
        let name_args = match &raw.name_args {
            Some(a) => names.scratch.resolve(a, word)?,
            None => Slot::At(name.as_ptr() as u64),
        };
        let arg = raw.arg.as_ref().map(|a| names.scratch.resolve(a, word)).transpose()?;
        drop(names);
        let mut reg = UserReg {
            size: raw.size.unwrap_or(USER_REG_SIZE as u32),
            enable_bit: raw.enable_bit.unwrap_or(r.bit),
            enable_size: raw.enable_size.unwrap_or(r.size),
            flags: raw.flags.unwrap_or(r.flags),
            enable_addr: 0,
            name_args: 0,
        };
        let mut buf = reg.encode(&raw.tail);
        pad_to(&mut buf, reg.size);
        let cmd = raw.cmd.unwrap_or(DIAG_IOCSREG);
        let hole = memory::hole_for(&[Some(enable), Some(name_args), arg])?;
        // From here to the ioctl nothing allocates: the hole must stay a hole.
        reg.enable_addr = enable.or_hole(hole);
        reg.name_args = name_args.or_hole(hole);
        reg.write_to(&mut buf);
        let arg = arg.map_or(buf.as_mut_ptr() as u64, |a| a.or_hole(hole));
        let (result, faults) = ioctl_counting_faults(fd, cmd, arg);

        what.push_str(&raw_reg_text(raw, &reg, arg));
        if let Some(failed) = minor_faults_differ(&mut what, r.minor_faults, faults, say) {
            return Ok(failed);
        }
        let got = match result {
            Ok(v) if raw.arg.is_some() => format!("{} (struct not passed, no write_index)", result_text(Ok(v))),
            Ok(v) => {
                let index = u32::from_ne_bytes(buf[WRITE_INDEX_AT..USER_REG_SIZE].try_into().expect("4 bytes"));
                let mut got = format!("{}, write_index {index}", result_text(Ok(v)));
                if let Some(n) = r.index_as {
                    self.names().indexes.insert(n.to_string(), index);
                    got.push_str(&format!(" as {n}"));
                }
                if let Some(want) = r.expect_index.filter(|&w| w != index) {
                    say(&format!("{what}: {got}, but write_index {want} was expected"));
                    return Ok(StepOutcome::Fail);
                }
                let big = cfg!(target_endian = "big");
                if let Some(path) = align_addr_bit_path(reg.enable_addr, reg.enable_size, reg.enable_bit, big) {
                    got.push_str(&format!(" [{path}]"));
                }
                got
            }
            Err(e) => errno_text(e),
        };
        Ok(check_result(&what, &got, result, expect, say))
    }

    pub fn unregister(&self, u: &Unreg<'_>, expect: &Expect, say: &mut dyn FnMut(&str)) -> Done {
        let Unreg { fd, word, bit, raw, minor_faults } = *u;
        let mut what = "unregister".to_string();
        if let Some(w) = word {
            what.push_str(&format!(" word {w}"));
        }
        what.push_str(&format!(" bit {bit}"));
        if fd != protocol::DATA_FD {
            what.push_str(&format!(" on fd {fd}"));
        }
        let mut names = self.names();
        let fd = names.fd(fd, &self.data_path).map_err(|e| format!("{what}: {e}"))?;
        let word = names.word(word)?;
        let disable = match &raw.disable_addr {
            Some(a) => names.scratch.resolve(a, word)?,
            None => Slot::At(word),
        };
        let arg = raw.arg.as_ref().map(|a| names.scratch.resolve(a, word)).transpose()?;
        drop(names);
        let mut unreg = UserUnreg {
            size: raw.size.unwrap_or(USER_UNREG_SIZE as u32),
            disable_bit: bit,
            reserved: raw.reserved.unwrap_or(0),
            reserved2: raw.reserved2.unwrap_or(0),
            disable_addr: 0,
        };
        let cmd = raw.cmd.unwrap_or(DIAG_IOCSUNREG);
        let mut buf = unreg.encode().to_vec();
        buf.extend_from_slice(&raw.tail);
        pad_to(&mut buf, unreg.size);
        let hole = memory::hole_for(&[Some(disable), arg])?;
        // From here to the ioctl nothing allocates: the hole must stay a hole.
        unreg.disable_addr = disable.or_hole(hole);
        buf[..USER_UNREG_SIZE].copy_from_slice(&unreg.encode());
        let arg = arg.map_or(buf.as_mut_ptr() as u64, |a| a.or_hole(hole));
        let (result, faults) = ioctl_counting_faults(fd, cmd, arg);

        let mut parts = Vec::new();
        if let Some(c) = raw.cmd {
            parts.push(format!("cmd={c:#x}"));
        }
        if let Some(s) = raw.size {
            parts.push(format!("size={s}"));
        }
        if let Some(v) = raw.reserved {
            parts.push(format!("reserved={v}"));
        }
        if let Some(v) = raw.reserved2 {
            parts.push(format!("reserved2={v}"));
        }
        if let Some(a) = &raw.disable_addr {
            parts.push(format!("disable_addr={}", addr_text(a, unreg.disable_addr)));
        }
        if !raw.tail.is_empty() {
            parts.push(format!("tail={}", hex_parts(std::slice::from_ref(&raw.tail))));
        }
        if let Some(a) = &raw.arg {
            parts.push(format!("arg={} (struct not passed)", addr_text(a, arg)));
        }
        if !parts.is_empty() {
            what.push_str(&format!(" raw {}", parts.join(" ")));
        }
        if let Some(failed) = minor_faults_differ(&mut what, minor_faults, faults, say) {
            return Ok(failed);
        }
        Ok(check_result(&what, &result_text(result), result, expect, say))
    }

    /// `Step::Delete`; `confirm` then checks the event's folder against the result.
    pub fn delete(&self, d: &Del<'_>, expect: &Expect, say: &mut dyn FnMut(&str)) -> Done {
        let mut what = format!("delete {:?}", d.name);
        if d.fd != protocol::DATA_FD {
            what.push_str(&format!(" on fd {}", d.fd));
        }
        let fd = self.fd(d.fd).map_err(|e| format!("{what}: {e}"))?;
        let mut text = d.name.as_bytes().to_vec();
        text.push(0);
        let mut arg = text.as_ptr() as u64;
        // Kept until the calls are done: the page the unterminated name ends.
        let _page = if d.unterminated {
            what.push_str(" (unterminated, at a page's end)");
            let (page, at) = memory::at_page_end(d.name.as_bytes()).map_err(|e| format!("{what}: {e}"))?;
            arg = at;
            Some(page)
        } else {
            None
        };
        let started = std::time::Instant::now();
        let mut result = ioctl(fd, DIAG_IOCSDEL, arg);
        let mut retries = 0;
        while !expect.met_by(result) && started.elapsed() < Duration::from_millis(d.within_ms) {
            std::thread::sleep(Duration::from_millis(1));
            result = ioctl(fd, DIAG_IOCSDEL, arg);
            retries += 1;
        }
        if d.within_ms > 0 {
            what.push_str(&format!(" after {} ms and {retries} retries", started.elapsed().as_millis()));
        }
        let outcome = check_result(&what, &result_text(result), result, expect, say);
        if !d.confirm || outcome != StepOutcome::Pass {
            return Ok(outcome);
        }
        let folder = Path::new(EVENTS_DIR).join(d.name);
        let exists = folder.exists();
        let (agrees, line) = confirm(result, exists).map_err(|e| format!("{what}: {e}"))?;
        say(&format!("{what}: {} {line}", folder.display()));
        Ok(StepOutcome::passed_if(agrees))
    }
}

impl Names {
    fn fd(&mut self, name: &str, data_path: &Path) -> Result<RawFd, String> {
        if let Some(fd) = self.fds.get(name) {
            return Ok(fd.as_raw_fd());
        }
        if name != protocol::DATA_FD {
            return Err(format!("no fd named {name}"));
        }
        let file = OpenOptions::new().read(true).write(true).open(data_path).map_err(|e| {
            let why = e.raw_os_error().map_or_else(|| e.to_string(), errno_text);
            format!("cannot open {} as fd {name}: {why}", data_path.display())
        })?;
        let fd = OwnedFd::from(file);
        let raw = fd.as_raw_fd();
        self.fds.insert(name.to_string(), fd);
        Ok(raw)
    }

    fn word(&mut self, name: Option<&str>) -> Result<u64, String> {
        if let Some(&offset) = name.and_then(|n| self.slots.get(n)) {
            let base = self.words.as_ref().map(Page::addr).or(self.unmapped_base).unwrap_or(0);
            return Ok(base + offset as u64);
        }
        if self.words_gone {
            return Err("the words page was unmapped: no new words".into());
        }
        if self.words.is_none() {
            self.words = Some(Page::map_apart(libc::PROT_READ | libc::PROT_WRITE)?);
        }
        let page = self.words.as_ref().expect("just mapped");
        if self.next_slot + 8 > page.len() {
            return Err(format!("no room for more than {} enable words", page.len() / 8));
        }
        let offset = self.next_slot;
        self.next_slot += 8;
        if let Some(n) = name {
            self.slots.insert(n.to_string(), offset);
        }
        Ok(page.addr() + offset as u64)
    }
}

/// Whether `name` is `pattern` with each `{thread}` and `{iteration}` standing for a number.
fn numbered(pattern: &str, name: &str) -> bool {
    let (mut p, mut n) = (pattern, name);
    loop {
        let next = [protocol::THREAD_INDEX, protocol::ITERATION]
            .iter()
            .filter_map(|k| p.find(k).map(|at| (at, k.len())))
            .min();
        let Some((at, len)) = next else { return p == n };
        let Some(rest) = n.strip_prefix(&p[..at]) else { return false };
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return false;
        }
        (p, n) = (&p[at + len..], &rest[digits..]);
    }
}

/// Which branch of the kernel's `align_addr_bit()` (kernel/trace/trace_events_user.c, 6.4 to
/// 6.12 at least: a `static inline`, so no probe can see it run) an accepted enabler takes on
/// a 64-bit CPU of this byte order, and the bit of the aligned `long` that `set_bit`/`clear_bit`
/// then update: derived from the address, the size and the byte order, which are shown with it.
/// The scenario's `check_word`/`check_bit` steps are what prove the kernel did it.
pub fn align_addr_bit_path(addr: u64, size: u8, bit: u8, big: bool) -> Option<String> {
    let order = if big { "big-endian" } else { "little-endian" };
    let head = format!("enable addr % 8 = {}, {size} bytes, {order}: align_addr_bit", addr % 8);
    let bit = u32::from(bit);
    Some(match (size, addr % 8, big) {
        (8, 0, _) => format!("{head} aligned, as is: bit {bit} of the long"),
        (4, 0, true) => format!("{head} aligned, 32-on-64 big-endian, bit += 32: bit {} of the long", bit + 32),
        (4, 0, false) => format!("{head} aligned, as is: bit {bit} of the long"),
        (4, 4, false) => format!("{head} unaligned, address - 4, bit += 32: bit {} of the long", bit + 32),
        (4, 4, true) => format!("{head} unaligned, address - 4, bit as is: bit {bit} of the long"),
        _ => return None,
    })
}

/// A plain `DIAG_IOCSREG` of `format` on bit 0 of the 4-byte word at `addr`: the write index,
/// or the errno (EINVAL for a format with a NUL).
pub fn register_bit0(fd: RawFd, format: &str, addr: u64) -> Result<u32, i32> {
    let name = std::ffi::CString::new(format).map_err(|_| libc::EINVAL)?;
    let reg = UserReg {
        size: USER_REG_SIZE as u32,
        enable_bit: 0,
        enable_size: 4,
        flags: 0,
        enable_addr: addr,
        name_args: name.as_ptr() as u64,
    };
    let mut buf = reg.encode(&[]);
    ioctl(fd, DIAG_IOCSREG, buf.as_mut_ptr() as u64)?;
    Ok(u32::from_ne_bytes(buf[WRITE_INDEX_AT..USER_REG_SIZE].try_into().expect("4 bytes")))
}

/// A plain `DIAG_IOCSUNREG` of bit 0 of the word at `addr`.
pub fn unregister_bit0(fd: RawFd, addr: u64) -> Result<(), i32> {
    let unreg =
        UserUnreg { size: USER_UNREG_SIZE as u32, disable_bit: 0, reserved: 0, reserved2: 0, disable_addr: addr };
    ioctl(fd, DIAG_IOCSUNREG, unreg.encode().as_ptr() as u64).map(|_| ())
}

/// Forks a holder that leaves the scenario's process group (a session of its own) and sleeps
/// until the reboot with copies of every descriptor this process has, so their files are
/// never released.
pub fn hold_descriptors_until_reboot(say: &mut dyn FnMut(&str)) {
    // SAFETY: the child only calls async-signal-safe functions (setsid, pause) before it dies
    // with the VM.
    match unsafe { libc::fork() } {
        0 => unsafe {
            libc::setsid();
            loop {
                libc::pause();
            }
        },
        -1 => say(&format!("hold until reboot: fork: {}", errno_text(errno()))),
        pid => say(&format!("hold until reboot: pid {pid} keeps the descriptors open in a session of its own")),
    }
}

/// A `register` step's fields.
pub struct Reg<'a> {
    pub fd: &'a str,
    pub format: &'a str,
    pub word: Option<&'a str>,
    pub bit: u8,
    pub size: u8,
    pub flags: u16,
    pub index_as: Option<&'a str>,
    pub expect_index: Option<u32>,
    pub raw: &'a RawReg,
    pub minor_faults: Option<u64>,
}

/// The ioctl, and the calling thread's minor page faults during it (the kernel's fault-ins
/// of an enable word count there).
fn ioctl_counting_faults(fd: RawFd, cmd: u64, arg: u64) -> (Result<i64, i32>, u64) {
    let before = sys::thread_minor_faults();
    let result = ioctl(fd, cmd, arg);
    (result, sys::thread_minor_faults() - before)
}

/// With `minor_faults` wanted: says the ioctl's count on `what`, and a failed step when it
/// is not the wanted one.
fn minor_faults_differ(
    what: &mut String,
    want: Option<u64>,
    faults: u64,
    say: &mut dyn FnMut(&str),
) -> Option<StepOutcome> {
    let want = want?;
    what.push_str(&format!(", {faults} minor page fault(s) during the call"));
    if faults == want {
        return None;
    }
    say(&format!("{what}, {want} expected"));
    Some(StepOutcome::Fail)
}

/// An `unregister` step's fields.
pub struct Unreg<'a> {
    pub fd: &'a str,
    pub word: Option<&'a str>,
    pub bit: u8,
    pub raw: &'a RawUnreg,
    pub minor_faults: Option<u64>,
}

/// A `delete` step's fields.
pub struct Del<'a> {
    pub fd: &'a str,
    pub name: &'a str,
    pub within_ms: u64,
    pub confirm: bool,
    /// The name's bytes without a NUL, at the end of a page an unmapped page follows.
    pub unterminated: bool,
}

/// Where the single-format user events' folders are.
const EVENTS_DIR: &str = "/sys/kernel/tracing/events/user_events";

/// Whether an event's folder agrees with a delete's result (gone after `0`, as the removal is
/// synchronous, or `ENOENT`; there after `EBUSY`), and the line that says so. Other results say
/// nothing about the folder.
pub fn confirm(result: Result<i64, i32>, exists: bool) -> Result<(bool, String), String> {
    let want = match result {
        Ok(0) => false,
        Err(libc::ENOENT) => false,
        Err(libc::EBUSY) => true,
        other => return Err(format!("confirm: a result of {} says nothing about the event", result_text(other))),
    };
    let state = |there: bool| if there { "is still there" } else { "is gone" };
    let line = if exists == want {
        format!("{} after {}, as it should", state(exists), result_text(result))
    } else {
        format!(
            "{} after {}, but it should be {}",
            state(exists),
            result_text(result),
            if want { "there" } else { "gone" }
        )
    };
    Ok((exists == want, line))
}

/// A `write` step's fields.
pub struct Payload<'a> {
    pub index: Option<&'a str>,
    pub index_value: Option<u32>,
    pub fields: &'a [Value],
    pub vectored: bool,
    pub offset: Option<i64>,
    pub from: Option<&'a Addr>,
}

#[cfg(test)]
mod tests;
