//! The user_events steps of a scenario: named descriptors, enable words in the scenario's own
//! memory, kept write indexes, the raw ioctls (`DIAG_IOCSREG`, `DIAG_IOCSUNREG`, `DIAG_IOCSDEL`)
//! and event writes. All state lives as long as the scenario child process.
//!
//! Enable words are 8-byte slots of one private anonymous page. Bits are numbered in the slot's
//! u64 value: a size-4 registration at the slot's address owns its low 4 bytes on a
//! little-endian CPU, which are bits 0..31 of the u64.

use std::collections::HashMap;
use std::fs::OpenOptions;
use std::io;
use std::os::fd::{AsRawFd, IntoRawFd, OwnedFd, RawFd};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use protocol::{Addr, Expect, RawReg, RawUnreg, Step, Value};

use crate::steps::Verdict;

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
const WRITE_INDEX_AT: usize = 24;
pub const USER_UNREG_SIZE: usize = 16;

/// A kernel-half address that is canonical, so `access_ok` rather than the CPU rejects it.
const KERNEL_ADDR: u64 = if cfg!(target_arch = "aarch64") { 0xffff_0000_1000_0000 } else { 0xffff_ffff_8000_0000 };

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

    /// Rewrites the first 28 bytes in place, without allocating (see [`State::hole`]).
    fn write_to(&self, buf: &mut [u8]) {
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

pub fn errno() -> i32 {
    io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// The protocol's name for an errno (what a plan would write as `expect`), else `errno N`.
pub fn errno_text(errno: i32) -> String {
    protocol::errno_name(errno).map(String::from).unwrap_or_else(|| format!("errno {errno}"))
}

/// How a call ended, for a step's line: `ok`, `ok, returned N`, or the errno.
pub fn result_text(result: Result<i64, i32>) -> String {
    match result {
        Ok(0) => "ok".to_string(),
        Ok(v) => format!("ok, returned {v}"),
        Err(e) => errno_text(e),
    }
}

/// Says `WHAT: GOT (expected E)` and judges the result against the expectation.
pub fn judge(what: &str, got: &str, result: Result<i64, i32>, expect: &Expect, say: &mut dyn FnMut(&str)) -> Verdict {
    say(&format!("{what}: {got} (expected {})", expect.0));
    if expect.met_by(result) {
        Verdict::Ok
    } else {
        Verdict::Fail
    }
}

fn page_size() -> usize {
    // SAFETY: sysconf has no memory effects.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if n > 0 {
        n as usize
    } else {
        4096
    }
}

/// One anonymous private page, unmapped on drop.
struct Page {
    addr: *mut libc::c_void,
    len: usize,
}

impl Page {
    fn map(prot: libc::c_int) -> Result<Page, String> {
        let len = page_size();
        // SAFETY: a new anonymous mapping; no existing memory is affected.
        let addr =
            unsafe { libc::mmap(std::ptr::null_mut(), len, prot, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0) };
        if addr == libc::MAP_FAILED {
            return Err(format!("mmap: {}", errno_text(errno())));
        }
        Ok(Page { addr, len })
    }

    fn addr(&self) -> u64 {
        self.addr as u64
    }
}

impl Drop for Page {
    fn drop(&mut self) {
        // SAFETY: the mapping is ours and nothing refers to it past the State that owns it.
        unsafe { libc::munmap(self.addr, self.len) };
    }
}

/// An address resolved for a struct field: known now, or the unmapped hole, which is made
/// only right before the ioctl so no other mapping can land on it in between.
#[derive(Debug, Clone, Copy)]
enum Slot {
    At(u64),
    Hole,
}

impl Slot {
    fn or_hole(self, hole: u64) -> u64 {
        match self {
            Slot::At(a) => a,
            Slot::Hole => hole,
        }
    }
}

/// `kernel 0xffffffff80000000`, `word+4 0x7f..`: an override as asked and as resolved.
fn addr_text(addr: &Addr, value: u64) -> String {
    match addr {
        Addr::NullPointer => "null_pointer".to_string(),
        Addr::Kernel => format!("kernel {value:#x}"),
        Addr::Unmapped => format!("unmapped {value:#x}"),
        Addr::ReadOnly => format!("read_only {value:#x}"),
        Addr::Fresh => format!("fresh {value:#x}"),
        Addr::WordOffset(n) => format!("word{n:+} {value:#x}"),
        Addr::Value(_) => format!("{value:#x}"),
    }
}

/// The first bytes of a payload in hex, one group per part.
fn hex_parts(parts: &[Vec<u8>]) -> String {
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

/// Per-scenario state of the user_events steps.
pub struct State {
    /// Where the `data` descriptor is opened on first use (tests point it at an ordinary file).
    data_path: PathBuf,
    fds: HashMap<String, OwnedFd>,
    /// The enable words' page, mapped on first use, and each word's offset in it.
    words: Option<Page>,
    slots: HashMap<String, usize>,
    next_slot: usize,
    indexes: HashMap<String, u32>,
    /// Fresh and read-only pages handed to the kernel: mapped until the scenario ends.
    kept: Vec<Page>,
    /// Forked children by name, until a `wait` collects them.
    pub children: HashMap<String, libc::pid_t>,
    /// Open perf events by name.
    pub perf: HashMap<String, crate::perf::PerfEvent>,
    /// Loaded eBPF programs by name, and raw tracepoint attachments (alive while open).
    pub bpf: HashMap<String, crate::bpf::Prog>,
    pub bpf_links: Vec<OwnedFd>,
    /// Descriptors `register_until` opened, kept open until the scenario ends.
    kept_files: Vec<OwnedFd>,
    /// After `memory: unmap` the words keep their addresses but must not be touched, and the
    /// page is not unmapped again; after `read_only` they must not be stored to.
    words_gone: bool,
    words_read_only: bool,
    unmapped_base: Option<u64>,
}

// SAFETY: the pages are plain anonymous mappings owned by this state; a `thread` step lends the
// whole state to one thread at a time (the parent blocks in join), so nothing is shared racily.
unsafe impl Send for State {}

impl Default for State {
    fn default() -> Self {
        State::new()
    }
}

impl State {
    pub fn new() -> State {
        State::with_data_path(protocol::USER_EVENTS_DATA.into())
    }

    pub fn with_data_path(data_path: PathBuf) -> State {
        State {
            data_path,
            fds: HashMap::new(),
            words: None,
            slots: HashMap::new(),
            next_slot: 0,
            children: HashMap::new(),
            perf: HashMap::new(),
            bpf: HashMap::new(),
            bpf_links: Vec::new(),
            kept_files: Vec::new(),
            words_gone: false,
            words_read_only: false,
            unmapped_base: None,
            indexes: HashMap::new(),
            kept: Vec::new(),
        }
    }

    /// Runs one of the user_events steps.
    pub fn run(&mut self, step: &Step, say: &mut dyn FnMut(&str)) -> Verdict {
        let done = match step {
            Step::Open { fd, path, read_only, expect } => self.open(fd, path, *read_only, expect, say),
            Step::Close { fd } => self.close(fd, say),
            Step::Register { fd, format, word, bit, size, flags, index_as, expect_index, raw, expect } => {
                let reg = Reg {
                    fd,
                    format,
                    word: word.as_deref(),
                    bit: *bit,
                    size: *size,
                    flags: *flags,
                    index_as: index_as.as_deref(),
                    expect_index: *expect_index,
                    raw,
                };
                self.register(&reg, expect, say)
            }
            Step::Unregister { fd, word, bit, raw, expect } => {
                self.unregister(fd, word.as_deref(), *bit, raw, expect, say)
            }
            Step::Delete { fd, name, expect, within_ms } => self.delete(fd, name, expect, *within_ms, say),
            Step::SetWord { word, value } => self.set_word(word, *value, say),
            Step::Memory { op, file } => self.memory(*op, file.as_deref(), say),
            Step::CheckBit { word, bit, set, within_ms } => self.check_bit(word, *bit, *set, *within_ms, say),
            Step::CheckWord { word, value } => self.check_word(word, *value, say),
            Step::Write { fd, index, index_value, fields, vectored, offset, payload_from, expect } => {
                let payload = Payload {
                    index: index.as_deref(),
                    index_value: *index_value,
                    fields,
                    vectored: *vectored,
                    offset: *offset,
                    from: payload_from.as_ref(),
                };
                self.write(fd, &payload, expect, say)
            }
            Step::RegisterUntil { format, max, expect, hold_until_reboot } => {
                let done = self.register_until(format, *max, expect, say);
                if *hold_until_reboot {
                    hold_descriptors_until_reboot(say);
                }
                done
            }
            other => Err(format!("not a user_events step: {other:?}")),
        };
        done.unwrap_or_else(|e| {
            say(&e);
            Verdict::Fail
        })
    }

    /// The descriptor under `name`; `data` is opened on `user_events_data` on first use.
    fn fd(&mut self, name: &str) -> Result<RawFd, String> {
        if let Some(fd) = self.fds.get(name) {
            return Ok(fd.as_raw_fd());
        }
        if name != protocol::DATA_FD {
            return Err(format!("no fd named {name}"));
        }
        let file = OpenOptions::new().read(true).write(true).open(&self.data_path).map_err(|e| {
            let why = e.raw_os_error().map_or_else(|| e.to_string(), errno_text);
            format!("cannot open {} as fd {name}: {why}", self.data_path.display())
        })?;
        let fd = OwnedFd::from(file);
        let raw = fd.as_raw_fd();
        self.fds.insert(name.to_string(), fd);
        Ok(raw)
    }

    /// The address of enable word `name`, made (zeroed, 8-byte aligned) on first use;
    /// `None` gives a new private scratch word.
    pub fn word(&mut self, name: Option<&str>) -> Result<u64, String> {
        if let Some(&offset) = name.and_then(|n| self.slots.get(n)) {
            let base = self.words.as_ref().map(Page::addr).or(self.unmapped_base).unwrap_or(0);
            return Ok(base + offset as u64);
        }
        if self.words_gone {
            return Err("the words page was unmapped: no new words".into());
        }
        if self.words.is_none() {
            self.words = Some(Page::map(libc::PROT_READ | libc::PROT_WRITE)?);
        }
        let page = self.words.as_ref().expect("just mapped");
        if self.next_slot + 8 > page.len {
            return Err(format!("no room for more than {} enable words", page.len / 8));
        }
        let offset = self.next_slot;
        self.next_slot += 8;
        if let Some(n) = name {
            self.slots.insert(n.to_string(), offset);
        }
        Ok(page.addr() + offset as u64)
    }

    /// `Step::Memory` on the words page.
    fn memory(&mut self, op: protocol::MemoryOp, file: Option<&str>, say: &mut dyn FnMut(&str)) -> Done {
        use protocol::MemoryOp;
        if self.words.is_none() {
            self.word(None)?;
        }
        let page = self.words.as_ref().expect("mapped above");
        let what = format!("memory {op:?} on the words page {:#x}", page.addr()).to_lowercase();
        if (op == MemoryOp::ShareFile) != file.is_some() {
            return Err(format!("{what}: `file` goes with `share_file` and only with it"));
        }
        if let Some(path) = file {
            return share_file(page, path).map(|()| {
                say(&format!("{what}: now MAP_SHARED from {path}: ok"));
                Verdict::Ok
            });
        }
        // SAFETY: these calls change only the words page, which this state owns; after an unmap
        // `words_gone` stops every later access through `cell`, and the page is not unmapped twice.
        let r = unsafe {
            match op {
                MemoryOp::DontNeed => libc::madvise(page.addr, page.len, libc::MADV_DONTNEED),
                MemoryOp::ReadOnly => libc::mprotect(page.addr, page.len, libc::PROT_READ),
                MemoryOp::ReadWrite => libc::mprotect(page.addr, page.len, libc::PROT_READ | libc::PROT_WRITE),
                MemoryOp::Unmap => libc::munmap(page.addr, page.len),
                MemoryOp::ShareFile => unreachable!("handled above"),
            }
        };
        if r != 0 {
            say(&format!("{what}: {}", errno_text(errno())));
            return Ok(Verdict::Fail);
        }
        match op {
            MemoryOp::Unmap => {
                // Gone already: keep its address for later steps, but never unmap it again.
                let page = self.words.take().expect("mapped above");
                self.unmapped_base = Some(page.addr());
                std::mem::forget(page);
                self.words_gone = true;
            }
            MemoryOp::ReadOnly => self.words_read_only = true,
            MemoryOp::ReadWrite => self.words_read_only = false,
            MemoryOp::DontNeed | MemoryOp::ShareFile => {}
        }
        say(&format!("{what}: ok"));
        Ok(Verdict::Ok)
    }

    fn cell(&mut self, name: &str) -> Result<&AtomicU64, String> {
        if self.words_gone {
            return Err(format!("word {name}: the words page was unmapped"));
        }
        let addr = self.word(Some(name))?;
        // SAFETY: an 8-aligned slot of the words page, which stays mapped while `self` lives.
        // The kernel updates it asynchronously, hence atomics.
        Ok(unsafe { &*(addr as *const AtomicU64) })
    }

    /// Resolves an override address; `word` is the step's enable word for `WordOffset`.
    fn resolve(&mut self, addr: &Addr, word: u64) -> Result<Slot, String> {
        Ok(Slot::At(match addr {
            Addr::NullPointer => 0,
            Addr::Kernel => KERNEL_ADDR,
            Addr::Unmapped => return Ok(Slot::Hole),
            Addr::ReadOnly => self.keep(libc::PROT_READ)?,
            Addr::Fresh => self.keep(libc::PROT_READ | libc::PROT_WRITE)?,
            Addr::WordOffset(n) => word.wrapping_add_signed(*n),
            Addr::Value(v) => *v,
        }))
    }

    fn keep(&mut self, prot: libc::c_int) -> Result<u64, String> {
        let page = Page::map(prot)?;
        let addr = page.addr();
        self.kept.push(page);
        Ok(addr)
    }

    /// An address that was mapped a moment ago and is not now. It stays unmapped only until
    /// the next mapping (the kernel hands the same hole out again), so callers resolve it last
    /// and do not allocate before the system call that uses it.
    fn hole() -> Result<u64, String> {
        let page = Page::map(libc::PROT_READ)?;
        let addr = page.addr();
        drop(page);
        Ok(addr)
    }

    /// One address resolved at once, the hole included.
    #[cfg(test)]
    fn resolve_now(&mut self, addr: &Addr, word: u64) -> Result<u64, String> {
        let slot = self.resolve(addr, word)?;
        Ok(match slot {
            Slot::At(a) => a,
            Slot::Hole => State::hole()?,
        })
    }

    fn open(&mut self, name: &str, path: &str, read_only: bool, expect: &Expect, say: &mut dyn FnMut(&str)) -> Done {
        let mode = if read_only { "read-only" } else { "read-write" };
        let what = format!("open {path} {mode} as fd {name}");
        let result = match OpenOptions::new().read(true).write(!read_only).open(path) {
            Ok(file) => {
                // A name opened again replaces (and closes) the earlier descriptor.
                self.fds.insert(name.to_string(), OwnedFd::from(file));
                Ok(0)
            }
            Err(e) => Err(e.raw_os_error().ok_or_else(|| format!("{what}: {e}"))?),
        };
        Ok(judge(&what, &result_text(result), result, expect, say))
    }

    fn close(&mut self, name: &str, say: &mut dyn FnMut(&str)) -> Done {
        let fd = self.fds.remove(name).ok_or_else(|| format!("close fd {name}: no such fd"))?;
        // SAFETY: the descriptor is ours and is no longer kept anywhere.
        let r = unsafe { libc::close(fd.into_raw_fd()) };
        let result = if r == 0 { Ok(0) } else { Err(errno()) };
        say(&format!("close fd {name}: {}", result_text(result)));
        Ok(if r == 0 { Verdict::Ok } else { Verdict::Fail })
    }

    fn register(&mut self, r: &Reg<'_>, expect: &Expect, say: &mut dyn FnMut(&str)) -> Done {
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
        let fd = self.fd(r.fd).map_err(|e| format!("{what}: {e}"))?;
        let word = self.word(r.word)?;
        let raw = r.raw;
        let mut name = r.format.as_bytes().to_vec();
        name.push(0);
        let enable = match &raw.enable_addr {
            Some(a) => self.resolve(a, word)?,
            None => Slot::At(word),
        };
        let name_args = match &raw.name_args {
            Some(a) => self.resolve(a, word)?,
            None => Slot::At(name.as_ptr() as u64),
        };
        let arg = raw.arg.as_ref().map(|a| self.resolve(a, word)).transpose()?;
        let mut reg = UserReg {
            size: raw.size.unwrap_or(USER_REG_SIZE as u32),
            enable_bit: raw.enable_bit.unwrap_or(r.bit),
            enable_size: raw.enable_size.unwrap_or(r.size),
            flags: raw.flags.unwrap_or(r.flags),
            enable_addr: 0,
            name_args: 0,
        };
        let mut buf = reg.encode(&raw.tail);
        let cmd = raw.cmd.unwrap_or(DIAG_IOCSREG);
        let hole = if [Some(enable), Some(name_args), arg].iter().any(|s| matches!(s, Some(Slot::Hole))) {
            State::hole()?
        } else {
            0
        };
        // From here to the ioctl nothing allocates: the hole must stay a hole.
        reg.enable_addr = enable.or_hole(hole);
        reg.name_args = name_args.or_hole(hole);
        reg.write_to(&mut buf);
        let arg = arg.map_or(buf.as_mut_ptr() as u64, |a| a.or_hole(hole));
        let result = ioctl(fd, cmd, arg);

        what.push_str(&raw_reg_text(raw, &reg, arg));
        let got = match result {
            Ok(v) if raw.arg.is_some() => format!("{} (struct not passed, no write_index)", result_text(Ok(v))),
            Ok(v) => {
                let index = u32::from_ne_bytes(buf[WRITE_INDEX_AT..USER_REG_SIZE].try_into().expect("4 bytes"));
                let mut got = format!("{}, write_index {index}", result_text(Ok(v)));
                if let Some(n) = r.index_as {
                    self.indexes.insert(n.to_string(), index);
                    got.push_str(&format!(" as {n}"));
                }
                if let Some(want) = r.expect_index.filter(|&w| w != index) {
                    say(&format!("{what}: {got}, but write_index {want} was expected"));
                    return Ok(Verdict::Fail);
                }
                got
            }
            Err(e) => errno_text(e),
        };
        Ok(judge(&what, &got, result, expect, say))
    }

    fn unregister(
        &mut self,
        fd: &str,
        word: Option<&str>,
        bit: u8,
        raw: &RawUnreg,
        expect: &Expect,
        say: &mut dyn FnMut(&str),
    ) -> Done {
        let mut what = "unregister".to_string();
        if let Some(w) = word {
            what.push_str(&format!(" word {w}"));
        }
        what.push_str(&format!(" bit {bit}"));
        if fd != protocol::DATA_FD {
            what.push_str(&format!(" on fd {fd}"));
        }
        let fd = self.fd(fd).map_err(|e| format!("{what}: {e}"))?;
        let word = self.word(word)?;
        let disable = match &raw.disable_addr {
            Some(a) => self.resolve(a, word)?,
            None => Slot::At(word),
        };
        let mut unreg = UserUnreg {
            size: raw.size.unwrap_or(USER_UNREG_SIZE as u32),
            disable_bit: bit,
            reserved: raw.reserved.unwrap_or(0),
            reserved2: raw.reserved2.unwrap_or(0),
            disable_addr: 0,
        };
        let cmd = raw.cmd.unwrap_or(DIAG_IOCSUNREG);
        let hole = if matches!(disable, Slot::Hole) { State::hole()? } else { 0 };
        unreg.disable_addr = disable.or_hole(hole);
        let mut buf = unreg.encode();
        let result = ioctl(fd, cmd, buf.as_mut_ptr() as u64);

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
        if !parts.is_empty() {
            what.push_str(&format!(" raw {}", parts.join(" ")));
        }
        Ok(judge(&what, &result_text(result), result, expect, say))
    }

    fn delete(&mut self, fd: &str, name: &str, expect: &Expect, within_ms: u64, say: &mut dyn FnMut(&str)) -> Done {
        let mut what = format!("delete {name:?}");
        if fd != protocol::DATA_FD {
            what.push_str(&format!(" on fd {fd}"));
        }
        let fd = self.fd(fd).map_err(|e| format!("{what}: {e}"))?;
        let mut text = name.as_bytes().to_vec();
        text.push(0);
        let started = std::time::Instant::now();
        let mut result = ioctl(fd, DIAG_IOCSDEL, text.as_ptr() as u64);
        while !expect.met_by(result) && started.elapsed() < Duration::from_millis(within_ms) {
            std::thread::sleep(Duration::from_millis(1));
            result = ioctl(fd, DIAG_IOCSDEL, text.as_ptr() as u64);
        }
        if within_ms > 0 {
            what.push_str(&format!(" after {} ms", started.elapsed().as_millis()));
        }
        Ok(judge(&what, &result_text(result), result, expect, say))
    }

    fn set_word(&mut self, name: &str, value: u64, say: &mut dyn FnMut(&str)) -> Done {
        if self.words_read_only {
            return Err(format!("set word {name}: the words page is read-only"));
        }
        self.cell(name)?.store(value, Ordering::SeqCst);
        say(&format!("set word {name} = {value:#x}: ok"));
        Ok(Verdict::Ok)
    }

    fn check_word(&mut self, name: &str, value: u64, say: &mut dyn FnMut(&str)) -> Done {
        let seen = self.cell(name)?.load(Ordering::SeqCst);
        say(&format!("check word {name}: {seen:#x} (expected {value:#x})"));
        Ok(if seen == value { Verdict::Ok } else { Verdict::Fail })
    }

    fn check_bit(&mut self, name: &str, bit: u8, set: bool, within_ms: u64, say: &mut dyn FnMut(&str)) -> Done {
        let what = format!("check word {name} bit {bit}");
        if bit >= 64 {
            return Err(format!("{what}: an enable word has bits 0..63"));
        }
        let state = |s: bool| if s { "set" } else { "clear" };
        let cell = self.cell(name)?;
        let start = Instant::now();
        let limit = Duration::from_millis(within_ms);
        loop {
            let seen = cell.load(Ordering::SeqCst);
            let is_set = seen & (1 << bit) != 0;
            let waited = start.elapsed();
            if is_set == set || waited >= limit {
                let (verdict, still) = if is_set == set { (Verdict::Ok, "") } else { (Verdict::Fail, "still ") };
                let line = if within_ms == 0 {
                    format!("{what}: {}, word {seen:#x} (expected {})", state(is_set), state(set))
                } else {
                    format!(
                        "{what}: {still}{} after {} ms, word {seen:#x} (expected {} within {within_ms} ms)",
                        state(is_set),
                        waited.as_millis(),
                        state(set)
                    )
                };
                say(&line);
                return Ok(verdict);
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// `Step::RegisterUntil`: registrations of `format` with `{i}` counting up until one fails.
    ///
    /// Each registration is unregistered at once: the event lives on through the file's reference
    /// to it, and the process's enabler list stays short (the kernel walks that whole list on
    /// every registration to refuse a reused address and bit). Every [`EVENTS_PER_FILE`] events
    /// a new descriptor is opened, because the kernel copies a file's whole reference array for
    /// each new event. Both costs are quadratic, and tens of thousands of events under TCG
    /// would otherwise take many minutes.
    fn register_until(&mut self, format: &str, max: u32, expect: &Expect, say: &mut dyn FnMut(&str)) -> Done {
        const EVENTS_PER_FILE: u32 = 256;
        let what = format!("register {format:?} for {{i}} from 0 until a failure (at most {max})");
        if !format.contains("{i}") {
            return Err(format!("{what}: the format has no {{i}}"));
        }
        let word = self.word(None)?;
        let mut files: Vec<OwnedFd> = Vec::new();
        let started = Instant::now();
        for i in 0..max {
            if i % EVENTS_PER_FILE == 0 {
                let file = OpenOptions::new().read(true).write(true).open(&self.data_path).map_err(|e| {
                    let why = e.raw_os_error().map_or_else(|| e.to_string(), errno_text);
                    format!("{what}: opening {} after {i} events: {why}", self.data_path.display())
                })?;
                files.push(OwnedFd::from(file));
            }
            let fd = files.last().expect("opened above").as_raw_fd();
            if let Err(e) = register_bit0(fd, &format.replace("{i}", &i.to_string()), word) {
                let got = format!(
                    "{i} events registered on {} files in {} ms, then {}",
                    files.len(),
                    started.elapsed().as_millis(),
                    errno_text(e)
                );
                // The files stay open until the scenario's process exits, so the events do too.
                self.kept_files.extend(files);
                return Ok(judge(&what, &got, Err(e), expect, say));
            }
            if let Err(e) = unregister_bit0(fd, word) {
                return Err(format!("{what}: unregistering event {i}: {}", errno_text(e)));
            }
        }
        say(&format!("{what}: all {max} registered in {} ms, none failed", started.elapsed().as_millis()));
        self.kept_files.extend(files);
        Ok(Verdict::Fail)
    }

    fn write(&mut self, fd: &str, p: &Payload<'_>, expect: &Expect, say: &mut dyn FnMut(&str)) -> Done {
        // A payload from elsewhere always goes as a second iovec after the index.
        let vectored = p.vectored || p.from.is_some();
        let call = match (vectored, p.offset.is_some()) {
            (false, false) => "write",
            (true, false) => "writev",
            (false, true) => "pwrite",
            (true, true) => "pwritev",
        };
        let (index, index_shown) = match (p.index, p.index_value) {
            (Some(n), None) => {
                let i = *self.indexes.get(n).ok_or_else(|| format!("{call}: no write index named {n}"))?;
                (i, format!("{n}={i}"))
            }
            (None, Some(v)) => (v, v.to_string()),
            (None, None) => return Err(format!("{call}: needs `index` or `index_value`")),
            (Some(_), Some(_)) => return Err(format!("{call}: `index` and `index_value` both given")),
        };
        let mut parts = vec![index.to_ne_bytes().to_vec()];
        for field in p.fields {
            parts.push(field.encode().map_err(|e| format!("{call}: {e}"))?);
        }
        let total: usize = parts.iter().map(Vec::len).sum();
        let mut what = format!("{call} index {index_shown} + {} fields", p.fields.len());
        if p.vectored && p.from.is_none() {
            what.push_str(&format!(" in {} iovecs", parts.len()));
        }
        let from = p.from.map(|at| self.resolve(at, 0).map(|slot| (at, slot))).transpose()?;
        if let Some((at, slot)) = from {
            let len = total - 4;
            let shown = match slot {
                Slot::At(a) => addr_text(at, a),
                Slot::Hole => "unmapped".to_string(),
            };
            what.push_str(&format!(" (4 + {len} bytes, the {len} from {shown})"));
        } else {
            what.push_str(&format!(" ({total} bytes: {})", hex_parts(&parts)));
        }
        if let Some(off) = p.offset {
            what.push_str(&format!(" at offset {off}"));
        }
        if fd != protocol::DATA_FD {
            what.push_str(&format!(" on fd {fd}"));
        }
        let fd = self.fd(fd).map_err(|e| format!("{what}: {e}"))?;
        let mut iov: Vec<libc::iovec> = Vec::with_capacity(parts.len() + 1);
        if vectored {
            iov.extend(parts.iter().map(|b| libc::iovec { iov_base: b.as_ptr() as *mut _, iov_len: b.len() }));
        }
        if let Some((_, slot)) = from {
            let len = total - 4;
            let base = match slot {
                Slot::At(a) => a,
                Slot::Hole => State::hole()?,
            };
            iov.truncate(1);
            // From here to the call nothing allocates (the hole must stay a hole): the capacity
            // was reserved above.
            iov.push(libc::iovec { iov_base: base as *mut _, iov_len: len });
        }
        let buf = if iov.is_empty() { parts.concat() } else { vec![] };
        // SAFETY: every iovec points into `parts` (alive across the call) or at an address chosen
        // to be checked by the kernel (EFAULT, not corruption); `buf` is valid for its length.
        let n = unsafe {
            match (iov.is_empty(), p.offset) {
                (false, None) => libc::writev(fd, iov.as_ptr(), iov.len() as libc::c_int),
                (false, Some(off)) => libc::pwritev(fd, iov.as_ptr(), iov.len() as libc::c_int, off),
                (true, None) => libc::write(fd, buf.as_ptr().cast(), buf.len()),
                (true, Some(off)) => libc::pwrite(fd, buf.as_ptr().cast(), buf.len(), off),
            }
        };
        let result = if n >= 0 { Ok(n as i64) } else { Err(errno()) };
        let got = match result {
            Ok(n) => format!("ok, {n} bytes"),
            Err(e) => errno_text(e),
        };
        Ok(judge(&what, &got, result, expect, say))
    }
}

/// A step's own end, or why it could not run (said as the step's line; the step fails).
type Done = Result<Verdict, String>;

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
fn hold_descriptors_until_reboot(say: &mut dyn FnMut(&str)) {
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

/// Replaces `page` in place (MAP_FIXED, same address and length) with a MAP_SHARED mapping of
/// `path`, created or truncated with the page's current bytes.
fn share_file(page: &Page, path: &str) -> Result<(), String> {
    use std::io::Write as _;
    // SAFETY: the page is mapped, readable and `len` bytes long while `page` lives.
    let bytes = unsafe { std::slice::from_raw_parts(page.addr as *const u8, page.len) };
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
        .and_then(|mut f| f.write_all(bytes).map(|()| f))
        .map_err(|e| format!("{path}: {}", e.raw_os_error().map_or_else(|| e.to_string(), errno_text)))?;
    file.flush().map_err(|e| format!("{path}: {e}"))?;
    // SAFETY: MAP_FIXED over our own page only; the file is as long as the mapping.
    let got = unsafe {
        libc::mmap(
            page.addr,
            page.len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_FIXED,
            file.as_raw_fd(),
            0,
        )
    };
    if got != page.addr {
        return Err(format!("mmap MAP_SHARED|MAP_FIXED of {path}: {}", errno_text(errno())));
    }
    Ok(())
}

struct Reg<'a> {
    fd: &'a str,
    format: &'a str,
    word: Option<&'a str>,
    bit: u8,
    size: u8,
    flags: u16,
    index_as: Option<&'a str>,
    expect_index: Option<u32>,
    raw: &'a RawReg,
}

struct Payload<'a> {
    index: Option<&'a str>,
    index_value: Option<u32>,
    fields: &'a [Value],
    vectored: bool,
    offset: Option<i64>,
    from: Option<&'a Addr>,
}

/// ` raw size=40 enable_addr=kernel 0x...`: the overrides as sent, empty when there are none.
fn raw_reg_text(raw: &RawReg, reg: &UserReg, arg: u64) -> String {
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

/// `ioctl(fd, cmd, arg)`: Ok(return value) or Err(errno).
pub fn ioctl(fd: RawFd, cmd: u64, arg: u64) -> Result<i64, i32> {
    // SAFETY: the argument is a pointer into a live buffer or an address chosen to be invalid;
    // the kernel validates user pointers, so a bad one gives EFAULT, not memory corruption.
    // The request type differs between libcs (c_int on musl, c_ulong on glibc).
    let r = unsafe { libc::ioctl(fd, cmd as _, arg as usize as *mut libc::c_void) };
    if r >= 0 {
        Ok(i64::from(r))
    } else {
        Err(errno())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    use protocol::Expect;

    fn temp_file(name: &str, content: &[u8]) -> PathBuf {
        let path = std::env::temp_dir().join(format!("ue-agent-uevents-{}-{name}", std::process::id()));
        fs::write(&path, content).unwrap();
        path
    }

    fn run(state: &mut State, step: Step) -> (Verdict, Vec<String>) {
        let mut lines = Vec::new();
        let verdict = state.run(&step, &mut |l: &str| lines.push(l.to_string()));
        (verdict, lines)
    }

    fn expect(e: &str) -> Expect {
        Expect(e.into())
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
            expect: expect(e),
        }
    }

    /// Whether the kernel can write to `addr` from user space (read(2) into it).
    fn kernel_write_errno(addr: u64) -> i32 {
        let mut fds = [0; 2];
        // SAFETY: a pipe; the read targets `addr`, which the kernel checks.
        unsafe {
            assert_eq!(libc::pipe(fds.as_mut_ptr()), 0);
            assert_eq!(libc::write(fds[1], b"x".as_ptr().cast(), 1), 1);
            let r = libc::read(fds[0], addr as *mut libc::c_void, 1);
            let e = if r < 0 { errno() } else { 0 };
            libc::close(fds[0]);
            libc::close(fds[1]);
            e
        }
    }

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
        let mut s = State::new();
        let mut lines = Vec::new();
        let mut say = |l: &str| lines.push(l.to_string());
        s.set_word("w", 5, &mut say).unwrap();
        assert_eq!(s.memory(MemoryOp::DontNeed, None, &mut say).unwrap(), Verdict::Ok);
        assert_eq!(s.cell("w").unwrap().load(Ordering::SeqCst), 0, "MADV_DONTNEED gives a zero page back");
        assert_eq!(s.memory(MemoryOp::ReadOnly, None, &mut say).unwrap(), Verdict::Ok);
        assert!(s.set_word("w", 1, &mut say).is_err(), "no store to a read-only page");
        assert_eq!(s.memory(MemoryOp::ReadWrite, None, &mut say).unwrap(), Verdict::Ok);
        s.set_word("w", 1, &mut say).unwrap();
        let addr = s.word(Some("w")).unwrap();
        assert_eq!(s.memory(MemoryOp::Unmap, None, &mut say).unwrap(), Verdict::Ok);
        assert_eq!(s.word(Some("w")).unwrap(), addr, "the word keeps its address");
        assert!(s.cell("w").is_err(), "but cannot be read");
        assert!(s.word(Some("new")).is_err());
    }

    #[test]
    fn words_get_distinct_aligned_slots() {
        let mut s = State::new();
        let a = s.word(Some("a")).unwrap();
        let b = s.word(Some("b")).unwrap();
        let scratch = s.word(None).unwrap();
        assert_eq!(s.word(Some("a")).unwrap(), a, "a name keeps its slot");
        assert_eq!(b, a + 8);
        assert_eq!(scratch, b + 8, "a scratch word takes a slot of its own");
        assert_eq!(a % 8, 0);
        assert_eq!(s.word(None).unwrap(), scratch + 8, "each scratch word is new");
    }

    #[test]
    fn addresses_resolve() {
        let mut s = State::new();
        let w = s.word(Some("w")).unwrap();
        assert_eq!(s.resolve_now(&Addr::WordOffset(4), w).unwrap(), w + 4);
        assert_eq!(s.resolve_now(&Addr::WordOffset(-8), w).unwrap(), w - 8);
        assert_eq!(s.resolve_now(&Addr::NullPointer, w).unwrap(), 0);
        assert_eq!(s.resolve_now(&Addr::Value(0x1234), w).unwrap(), 0x1234);
        assert_eq!(kernel_write_errno(w), 0, "the word is writable");

        let kernel = s.resolve_now(&Addr::Kernel, w).unwrap();
        assert!(kernel >= 0xffff_0000_0000_0000);
        assert_eq!(kernel_write_errno(kernel), libc::EFAULT);

        let unmapped = s.resolve_now(&Addr::Unmapped, w).unwrap();
        let mut vec = [0u8; 1];
        // SAFETY: mincore only reports on the range; ENOMEM means it is not mapped.
        let r = unsafe { libc::mincore(unmapped as *mut libc::c_void, 1, vec.as_mut_ptr()) };
        assert_eq!((r, errno()), (-1, libc::ENOMEM), "{unmapped:#x} is unmapped");
        assert_eq!(kernel_write_errno(unmapped), libc::EFAULT);

        let read_only = s.resolve_now(&Addr::ReadOnly, w).unwrap();
        assert_eq!(kernel_write_errno(read_only), libc::EFAULT, "read-only");
        // SAFETY: the page is mapped readable and kept by `s`.
        assert_eq!(unsafe { std::ptr::read_volatile(read_only as *const u8) }, 0);

        let fresh = s.resolve_now(&Addr::Fresh, w).unwrap();
        assert_ne!(fresh, read_only);
        assert_eq!(fresh % page_size() as u64, 0);
        assert_eq!(kernel_write_errno(fresh), 0, "fresh pages are writable");
    }

    #[test]
    fn set_and_check_words() {
        let mut s = State::new();
        let set = |w: &str, v| Step::SetWord { word: w.into(), value: v };
        let word = |w: &str, v| Step::CheckWord { word: w.into(), value: v };
        let bit = |b, set| Step::CheckBit { word: "w".into(), bit: b, set, within_ms: 0 };
        assert_eq!(run(&mut s, word("w", 0)), (Verdict::Ok, vec!["check word w: 0x0 (expected 0x0)".into()]));
        assert_eq!(run(&mut s, set("w", 0x8000_0001)).1, ["set word w = 0x80000001: ok"]);
        assert_eq!(run(&mut s, word("w", 0x8000_0001)).0, Verdict::Ok);
        assert_eq!(run(&mut s, word("v", 0)).0, Verdict::Ok, "another word is untouched");
        assert_eq!(
            run(&mut s, bit(31, true)),
            (Verdict::Ok, vec!["check word w bit 31: set, word 0x80000001 (expected set)".into()])
        );
        assert_eq!(run(&mut s, bit(0, true)).0, Verdict::Ok);
        assert_eq!(run(&mut s, bit(1, false)).0, Verdict::Ok);
        assert_eq!(
            run(&mut s, bit(1, true)),
            (Verdict::Fail, vec!["check word w bit 1: clear, word 0x80000001 (expected set)".into()])
        );
        assert_eq!(run(&mut s, word("w", 1)).0, Verdict::Fail);
        assert_eq!(run(&mut s, bit(64, true)).0, Verdict::Fail);
    }

    #[test]
    fn check_bit_polls_until_the_bit_changes() {
        let mut s = State::new();
        let addr = s.word(Some("w")).unwrap() as usize;
        let setter = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            // SAFETY: the word stays mapped: the State outlives the join below.
            unsafe { &*(addr as *const AtomicU64) }.fetch_or(1 << 5, Ordering::SeqCst);
        });
        let (verdict, lines) = run(&mut s, Step::CheckBit { word: "w".into(), bit: 5, set: true, within_ms: 2000 });
        setter.join().unwrap();
        assert_eq!(verdict, Verdict::Ok, "{lines:?}");
        let waited: u64 = lines[0].split(" after ").nth(1).unwrap().split(' ').next().unwrap().parse().unwrap();
        assert!((15..2000).contains(&waited), "{lines:?}");
        assert!(lines[0].ends_with("ms, word 0x20 (expected set within 2000 ms)"), "{lines:?}");

        let start = Instant::now();
        let (verdict, lines) = run(&mut s, Step::CheckBit { word: "w".into(), bit: 5, set: false, within_ms: 30 });
        assert_eq!(verdict, Verdict::Fail, "{lines:?}");
        assert!(start.elapsed() >= Duration::from_millis(30));
        assert!(lines[0].starts_with("check word w bit 5: still set after "), "{lines:?}");
        assert!(lines[0].ends_with("(expected clear within 30 ms)"), "{lines:?}");
    }

    #[test]
    fn writes_index_then_fields_plain_and_vectored() {
        let path = temp_file("write", b"");
        let mut s = State::with_data_path(path.clone());
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
        let (verdict, lines) = run(&mut s, write(false, "ok"));
        assert_eq!(verdict, Verdict::Ok, "{lines:?}");
        assert_eq!(
            lines,
            ["write index 7 + 3 fields (15 bytes: 07000000 04030201 686900 08000300): ok, 15 bytes (expected ok)"]
        );
        let (verdict, lines) = run(&mut s, write(true, "15"));
        assert_eq!(verdict, Verdict::Ok, "{lines:?}");
        assert!(lines[0].starts_with("writev index 7 + 3 fields in 4 iovecs (15 bytes: "), "{lines:?}");
        assert_eq!(run(&mut s, write(false, "14")).0, Verdict::Fail, "a number is the exact count");
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
        assert_eq!(run(&mut s, named), (Verdict::Fail, vec!["write: no write index named nope".into()]));
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
        assert_eq!(run(&mut s, none).0, Verdict::Fail);
        fs::remove_file(&path).unwrap();
    }

    #[test]
    fn pwrite_offsets_and_payloads_from_elsewhere() {
        let path = temp_file("pwrite", b"");
        let mut s = State::with_data_path(path.clone());
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
        let (verdict, lines) = run(&mut s, write(Some(8), None, false, "8"));
        assert_eq!(verdict, Verdict::Ok, "{lines:?}");
        assert!(
            lines[0].starts_with("pwrite index 1 + 1 fields (8 bytes: 01000000 0d0c0b0a) at offset 8:"),
            "{lines:?}"
        );
        let (verdict, lines) = run(&mut s, write(Some(0), None, true, "8"));
        assert_eq!(verdict, Verdict::Ok, "{lines:?}");
        assert!(lines[0].starts_with("pwritev index 1 + 1 fields in 2 iovecs"), "{lines:?}");
        assert_eq!(fs::read(&path).unwrap(), [[1, 0, 0, 0, 13, 12, 11, 10]; 2].concat());

        // From an unmapped page an ordinary file takes the index only (a short write; user_events
        // refuses the whole call); from a fresh page: zeros.
        let (verdict, lines) = run(&mut s, write(None, Some(Addr::Unmapped), false, "4"));
        assert_eq!(verdict, Verdict::Ok, "{lines:?}");
        assert!(
            lines[0].starts_with("writev index 1 + 1 fields (4 + 4 bytes, the 4 from unmapped): ok, 4"),
            "{lines:?}"
        );
        let (verdict, lines) = run(&mut s, write(None, Some(Addr::Fresh), false, "8"));
        assert_eq!(verdict, Verdict::Ok, "{lines:?}");
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
        let mut s = State::with_data_path(data.clone());
        assert_eq!(run(&mut s, Step::SetWord { word: "w".into(), value: 0x0201 }).0, Verdict::Ok);
        let share = |file: Option<&std::path::Path>| Step::Memory {
            op: protocol::MemoryOp::ShareFile,
            file: file.map(|f| f.display().to_string()),
        };
        let (verdict, lines) = run(&mut s, share(Some(&words)));
        assert_eq!(verdict, Verdict::Ok, "{lines:?}");
        // The page's bytes moved into the file, and stores through the words reach it.
        assert_eq!(&fs::read(&words).unwrap()[..8], &0x0201u64.to_ne_bytes());
        assert_eq!(run(&mut s, Step::SetWord { word: "w".into(), value: 0x0803 }).0, Verdict::Ok);
        assert_eq!(&fs::read(&words).unwrap()[..8], &0x0803u64.to_ne_bytes());
        assert_eq!(run(&mut s, share(None)).0, Verdict::Fail, "share_file needs a file");
        fs::remove_file(&data).unwrap();
        fs::remove_file(&words).unwrap();
    }

    #[test]
    fn named_fds_open_close_and_read_only_writes_fail() {
        let path = temp_file("fds", b"");
        let mut s = State::new();
        let open = |name: &str, path: &str, read_only, e: &str| Step::Open {
            fd: name.into(),
            path: path.into(),
            read_only,
            expect: expect(e),
        };
        let p = path.display().to_string();
        let (verdict, lines) = run(&mut s, open("f", &p, true, "ok"));
        assert_eq!((verdict, lines), (Verdict::Ok, vec![format!("open {p} read-only as fd f: ok (expected ok)")]));
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
        let (verdict, lines) = run(&mut s, write.clone());
        assert_eq!(verdict, Verdict::Ok, "{lines:?}");
        assert!(lines[0].ends_with(" on fd f: EBADF (expected EBADF)"), "{lines:?}");
        assert_eq!(run(&mut s, Step::Close { fd: "f".into() }), (Verdict::Ok, vec!["close fd f: ok".into()]));
        assert_eq!(run(&mut s, Step::Close { fd: "f".into() }), (Verdict::Fail, vec!["close fd f: no such fd".into()]));
        assert_eq!(run(&mut s, write).1, ["write index 0 + 0 fields (4 bytes: 00000000) on fd f: no fd named f"]);

        let (verdict, lines) = run(&mut s, open("g", "/nonexistent/x", false, "ENOENT"));
        assert_eq!(
            (verdict, lines[0].as_str()),
            (Verdict::Ok, "open /nonexistent/x read-write as fd g: ENOENT (expected ENOENT)")
        );
        assert_eq!(run(&mut s, open("g", "/nonexistent/x", false, "ok")).0, Verdict::Fail);
        assert_eq!(run(&mut s, open("g", &p, false, "EACCES")).0, Verdict::Fail);
        fs::remove_file(&path).unwrap();
    }

    #[test]
    fn the_data_fd_opens_lazily_and_its_failure_fails_the_step() {
        let mut s = State::with_data_path("/nonexistent/user_events_data".into());
        let (verdict, lines) = run(&mut s, register(Some("w"), RawReg::default(), "ok"));
        assert_eq!(verdict, Verdict::Fail);
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
        let mut s = State::with_data_path(path.clone());
        let (verdict, lines) = run(&mut s, register(Some("w"), RawReg::default(), "ENOTTY"));
        assert_eq!(
            (verdict, lines),
            (Verdict::Ok, vec!["register \"ev u32 a\" word w bit 0 size 4: ENOTTY (expected ENOTTY)".into()])
        );
        let (verdict, lines) = run(&mut s, register(None, RawReg::default(), "ok"));
        assert_eq!(
            (verdict, lines),
            (Verdict::Fail, vec!["register \"ev u32 a\" bit 0 size 4: ENOTTY (expected ok)".into()])
        );

        let raw = RawReg {
            cmd: Some(0x1234),
            size: Some(40),
            enable_addr: Some(Addr::Kernel),
            name_args: Some(Addr::Unmapped),
            tail: vec![0; 12],
            ..RawReg::default()
        };
        let (verdict, lines) = run(&mut s, register(Some("w"), raw, "ENOTTY"));
        assert_eq!(verdict, Verdict::Ok, "{lines:?}");
        let want = format!("raw cmd=0x1234 size=40 enable_addr=kernel {KERNEL_ADDR:#x} name_args=unmapped 0x");
        assert!(lines[0].contains(&want), "{lines:?}");
        assert!(lines[0].ends_with(" tail=000000000000000000000000: ENOTTY (expected ENOTTY)"), "{lines:?}");

        let unreg = |e: &str| Step::Unregister {
            fd: protocol::DATA_FD.into(),
            word: Some("w".into()),
            bit: 3,
            raw: RawUnreg { reserved: Some(1), disable_addr: Some(Addr::WordOffset(4)), ..RawUnreg::default() },
            expect: expect(e),
        };
        let (verdict, lines) = run(&mut s, unreg("ENOTTY"));
        assert_eq!(verdict, Verdict::Ok, "{lines:?}");
        assert!(lines[0].starts_with("unregister word w bit 3 raw reserved=1 disable_addr=word+4 0x"), "{lines:?}");
        assert!(lines[0].ends_with(": ENOTTY (expected ENOTTY)"), "{lines:?}");
        assert_eq!(run(&mut s, unreg("ok")).0, Verdict::Fail);

        let del =
            |e: &str| Step::Delete { fd: protocol::DATA_FD.into(), name: "ev".into(), expect: expect(e), within_ms: 0 };
        assert_eq!(run(&mut s, del("ENOTTY")), (Verdict::Ok, vec!["delete \"ev\": ENOTTY (expected ENOTTY)".into()]));
        assert_eq!(run(&mut s, del("ok")), (Verdict::Fail, vec!["delete \"ev\": ENOTTY (expected ok)".into()]));
        assert_eq!(run(&mut s, del("EBUSY")).0, Verdict::Fail);
        fs::remove_file(&path).unwrap();
    }

    #[test]
    fn unknown_errnos_are_numbered() {
        assert_eq!(errno_text(libc::ENOTTY), "ENOTTY");
        assert_eq!(errno_text(4000), "errno 4000");
        assert_eq!(result_text(Ok(3)), "ok, returned 3");
    }
}
