//! Memory for malformed input: anonymous pages, and the addresses a step may hand the kernel in
//! place of a valid pointer (`Addr`: NULL, the kernel half, an unmapped hole, a read-only or a
//! never-touched page, an offset from a word, a literal), resolved and said as resolved.

use std::fs::OpenOptions;
use std::io::Write;
use std::os::fd::{AsRawFd, FromRawFd};

use protocol::Addr;

use crate::steps::outcome::{errno, errno_text};

/// A kernel-half address that is canonical, so `access_ok` rather than the CPU rejects it.
pub const KERNEL_ADDR: u64 = if cfg!(target_arch = "aarch64") { 0xffff_0000_1000_0000 } else { 0xffff_ffff_8000_0000 };

pub fn page_size() -> usize {
    // SAFETY: sysconf has no memory effects.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if n > 0 {
        n as usize
    } else {
        4096
    }
}

/// One anonymous private page, unmapped on drop.
pub struct Page {
    ptr: *mut libc::c_void,
    len: usize,
}

impl Page {
    pub fn map(prot: libc::c_int) -> Result<Page, String> {
        let len = page_size();
        // SAFETY: a new anonymous mapping; no existing memory is affected.
        let ptr =
            unsafe { libc::mmap(std::ptr::null_mut(), len, prot, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0) };
        if ptr == libc::MAP_FAILED {
            return Err(format!("mmap: {}", errno_text(errno())));
        }
        Ok(Page { ptr, len })
    }

    /// A page away from where the kernel puts the process's other mappings: half-way between
    /// address 0 and an ordinary mapping's address, as a hint. The kernel hands out new mappings
    /// top-down from just below the mmap base, so once this page is unmapped its hole is not
    /// reused by the allocator's next mapping. The words page needs that: a `memory: unmap`
    /// scenario leaves the kernel's asynchronous fault-in worker pending on the old address,
    /// and if a new mapping (a malloc group, a buffer) landed there the worker would set the
    /// enable bit inside it (seen as SIGSEGV in `memory/an-unmapped-page-does-not-stop-enabling`).
    pub fn map_apart(prot: libc::c_int) -> Result<Page, String> {
        let probe = Page::map(libc::PROT_NONE)?;
        let len = page_size();
        let hint = (probe.addr() / 2) & !(len as u64 - 1);
        drop(probe);
        // SAFETY: a new anonymous mapping at a hint (no MAP_FIXED): no existing memory is affected.
        let ptr =
            unsafe { libc::mmap(hint as *mut libc::c_void, len, prot, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0) };
        if ptr == libc::MAP_FAILED {
            return Err(format!("mmap: {}", errno_text(errno())));
        }
        Ok(Page { ptr, len })
    }

    pub fn addr(&self) -> u64 {
        self.ptr as u64
    }

    pub fn ptr(&self) -> *mut libc::c_void {
        self.ptr
    }

    pub fn len(&self) -> usize {
        self.len
    }
}

impl Drop for Page {
    fn drop(&mut self) {
        // SAFETY: the mapping is ours and nothing refers to it past the owner of the Page.
        unsafe { libc::munmap(self.ptr, self.len) };
    }
}

/// A page whose last bytes are `bytes` and after which nothing is mapped (two pages mapped, the
/// second unmapped again), and the address of those bytes: a string that runs into a hole.
pub fn at_page_end(bytes: &[u8]) -> Result<(Page, u64), String> {
    let len = page_size();
    if bytes.len() > len {
        return Err(format!("{} bytes do not fit in a page", bytes.len()));
    }
    let prot = libc::PROT_READ | libc::PROT_WRITE;
    // SAFETY: a new anonymous mapping; no existing memory is affected.
    let ptr =
        unsafe { libc::mmap(std::ptr::null_mut(), 2 * len, prot, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0) };
    if ptr == libc::MAP_FAILED {
        return Err(format!("mmap: {}", errno_text(errno())));
    }
    let page = Page { ptr, len };
    // SAFETY: the second page of the mapping just made, which nothing refers to.
    unsafe { libc::munmap(ptr.cast::<u8>().add(len).cast(), len) };
    let at = page.addr() + (len - bytes.len()) as u64;
    // SAFETY: `at` and the `bytes.len()` bytes after it lie in the first page, mapped writable.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), at as *mut u8, bytes.len()) };
    Ok((page, at))
}

/// An address resolved for a struct field: known now, or the unmapped hole, which is made
/// only right before the call so no other mapping can land on it in between.
#[derive(Debug, Clone, Copy)]
pub enum Slot {
    At(u64),
    Hole,
}

impl Slot {
    pub fn or_hole(self, hole: u64) -> u64 {
        match self {
            Slot::At(a) => a,
            Slot::Hole => hole,
        }
    }
}

/// An address that was mapped a moment ago and is not now. It stays unmapped only until the
/// next mapping (the kernel hands the same hole out again), so callers resolve it last and do
/// not allocate before the system call that uses it.
pub fn hole() -> Result<u64, String> {
    let page = Page::map(libc::PROT_READ)?;
    let addr = page.addr();
    drop(page);
    Ok(addr)
}

/// A [`hole`] when one of `slots` asks for it, else 0 (no mapping made).
pub fn hole_for(slots: &[Option<Slot>]) -> Result<u64, String> {
    if slots.iter().any(|s| matches!(s, Some(Slot::Hole))) {
        hole()
    } else {
        Ok(0)
    }
}

/// `kernel 0xffffffff80000000`, `word+4 0x7f..`: an address as asked and as resolved.
pub fn addr_text(addr: &Addr, value: u64) -> String {
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

/// The fresh and read-only pages a scenario handed the kernel: mapped until it ends. Every
/// `read_only` of a scenario is one page (it only has to be unwritable; a page per step would
/// grow the agent's own mappings in a `repeat`), every `fresh` a new one (it must be untouched).
#[derive(Default)]
pub struct Scratch {
    kept: Vec<Page>,
    read_only: Option<u64>,
}

impl Scratch {
    /// Resolves an address; `word` is the step's enable word for `WordOffset`.
    pub fn resolve(&mut self, addr: &Addr, word: u64) -> Result<Slot, String> {
        Ok(Slot::At(match addr {
            Addr::NullPointer => 0,
            Addr::Kernel => KERNEL_ADDR,
            Addr::Unmapped => return Ok(Slot::Hole),
            Addr::ReadOnly => match self.read_only {
                Some(a) => a,
                None => {
                    let a = self.keep(libc::PROT_READ)?;
                    *self.read_only.insert(a)
                }
            },
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

    /// One address resolved at once, the hole included.
    #[cfg(test)]
    fn resolve_now(&mut self, addr: &Addr, word: u64) -> Result<u64, String> {
        Ok(match self.resolve(addr, word)? {
            Slot::At(a) => a,
            Slot::Hole => hole()?,
        })
    }
}

/// Replaces `page` in place (MAP_FIXED, same address and length) with a MAP_SHARED mapping of
/// `path`, created or truncated with the page's current bytes.
pub fn share_file(page: &Page, path: &str) -> Result<(), String> {
    // SAFETY: the page is mapped, readable and `len` bytes long while `page` lives.
    let bytes = unsafe { std::slice::from_raw_parts(page.ptr as *const u8, page.len) };
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
        .and_then(|mut f| f.write_all(bytes).map(|()| f))
        .map_err(|e| format!("{path}: {}", e.raw_os_error().map_or_else(|| e.to_string(), errno_text)))?;
    file.flush().map_err(|e| format!("{path}: {e}"))?;
    map_shared_over(page, &file, path)
}

/// Maps `file` (at least a page long) MAP_SHARED over `page`, at the same address.
fn map_shared_over(page: &Page, file: &std::fs::File, what: &str) -> Result<(), String> {
    // SAFETY: MAP_FIXED over our own page only; the caller made the file as long as the page.
    let got = unsafe {
        libc::mmap(
            page.ptr,
            page.len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_FIXED,
            file.as_raw_fd(),
            0,
        )
    };
    if got != page.ptr {
        return Err(format!("mmap MAP_SHARED|MAP_FIXED of {what}: {}", errno_text(errno())));
    }
    Ok(())
}

/// `memfd_secret(2)`'s number: 447 on every arch the project builds (x86_64's table and
/// the generic one of arm64 and riscv64, s390x's), which the libc crate does not name for
/// every target.
const SYS_MEMFD_SECRET: libc::c_long = 447;

/// Replaces `page` in place (MAP_FIXED, same address and length) with `memfd_secret()`
/// memory holding the page's current bytes: this process reads and writes it, the kernel can
/// fault it in, but get_user_pages() never pins it.
pub fn secret(page: &Page) -> Result<(), String> {
    // SAFETY: the page is mapped, readable and `len` bytes long while `page` lives.
    let bytes = unsafe { std::slice::from_raw_parts(page.ptr as *const u8, page.len) }.to_vec();
    // SAFETY: memfd_secret takes one flags argument and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(SYS_MEMFD_SECRET, 0) };
    if fd < 0 {
        let e = errno();
        let hint = if e == libc::ENOSYS {
            " (a kernel without CONFIG_SECRETMEM, or booted with secretmem.enable=0)"
        } else {
            ""
        };
        return Err(format!("memfd_secret: {}{hint}", errno_text(e)));
    }
    // SAFETY: a descriptor just returned to us, owned from here on.
    let file = unsafe { std::fs::File::from_raw_fd(fd as libc::c_int) };
    file.set_len(page.len as u64).map_err(|e| format!("ftruncate of the memfd_secret descriptor: {e}"))?;
    map_shared_over(page, &file, "the memfd_secret descriptor")?;
    // SAFETY: the page is mapped again, writable and `len` bytes long.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), page.ptr as *mut u8, page.len) };
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `secret` keeps the page's address and bytes and leaves it writable here; a kernel
    /// without secret memory (the host's may be one) is named with what it lacks.
    #[test]
    fn a_secret_page_keeps_its_address_and_bytes() {
        let page = Page::map(libc::PROT_READ | libc::PROT_WRITE).unwrap();
        // SAFETY: the page is mapped and writable.
        unsafe { std::ptr::write_volatile(page.ptr as *mut u64, 0xa5a5_0001) };
        match secret(&page) {
            Ok(()) => {
                // SAFETY: mapped again at the same address by `secret`.
                unsafe {
                    assert_eq!(std::ptr::read_volatile(page.ptr as *const u64), 0xa5a5_0001);
                    std::ptr::write_volatile(page.ptr as *mut u64, 2);
                    assert_eq!(std::ptr::read_volatile(page.ptr as *const u64), 2);
                }
            }
            Err(e) => assert!(e.starts_with("memfd_secret: ENOSYS") && e.contains("CONFIG_SECRETMEM"), "{e}"),
        }
    }

    /// The words page sits far below the other mappings, and its hole is not the next mapping.
    #[test]
    fn a_page_apart_is_not_reused_once_unmapped() {
        let rw = libc::PROT_READ | libc::PROT_WRITE;
        let apart = Page::map_apart(rw).unwrap();
        let ordinary = Page::map(rw).unwrap();
        let at = apart.addr();
        assert!(at <= ordinary.addr() / 2 + page_size() as u64, "{at:#x} vs {:#x}", ordinary.addr());
        drop(apart);
        // One mapping only: `addresses_resolve` (run in parallel) needs its own hole to stay one.
        assert_ne!(Page::map(rw).unwrap().addr(), at, "a new mapping took the hole");
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
    fn addresses_resolve() {
        let mut s = Scratch::default();
        let page = Page::map(libc::PROT_READ | libc::PROT_WRITE).unwrap();
        let w = page.addr() + 8;
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

        assert_eq!(s.resolve_now(&Addr::ReadOnly, w).unwrap(), read_only, "one read-only page a scenario");

        let fresh = s.resolve_now(&Addr::Fresh, w).unwrap();
        assert_ne!(fresh, read_only);
        assert_ne!(s.resolve_now(&Addr::Fresh, w).unwrap(), fresh, "a new fresh page each time");
        assert_eq!(fresh % page_size() as u64, 0);
        assert_eq!(kernel_write_errno(fresh), 0, "fresh pages are writable");
        assert_eq!(addr_text(&Addr::WordOffset(-8), 0x10), "word-8 0x10");
    }
}
