//! Page faults held on the words page with userfaultfd(2), for races that need the kernel's
//! fault-in worker in flight: `memory: hold_page_faults` drops the page and makes every access to
//! it wait, `page_faults_held` waits until so many accesses wait, `memory: map_held_page` puts a
//! zero page back while they keep waiting, and `memory: release_page_faults` lets them all go.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::steps::outcome::{errno, errno_text};

const UFFD_API: u64 = 0xaa;
const UFFD_EVENT_PAGEFAULT: u8 = 0x12;
const UFFDIO_REGISTER_MODE_MISSING: u64 = 1;

/// `_IOC(dir, 0xaa, nr, size)`, the generic encoding (x86_64, arm64, s390x and riscv64 share it).
const fn uffdio(dir: u64, nr: u64, size: u64) -> u64 {
    (dir << 30) | (size << 16) | (0xaa << 8) | nr
}
const UFFDIO_API: u64 = uffdio(3, 0x3f, 24);
const UFFDIO_REGISTER: u64 = uffdio(3, 0x00, 32);
const UFFDIO_UNREGISTER: u64 = uffdio(2, 0x01, 16);
const UFFDIO_WAKE: u64 = uffdio(2, 0x02, 16);
const UFFDIO_ZEROPAGE: u64 = uffdio(3, 0x04, 32);
/// `uffdio_zeropage.mode`: map the page but wake nobody.
const UFFDIO_ZEROPAGE_MODE_DONTWAKE: u64 = 1;
/// sizeof(struct uffd_msg).
const MSG_SIZE: usize = 32;

/// One page whose missing-page faults wait until [`Held::release`].
pub struct Held {
    fd: OwnedFd,
    start: u64,
    len: u64,
    /// The accesses seen waiting so far.
    seen: Mutex<u32>,
    /// (a page mapped there, everyone let go)
    state: Mutex<(bool, bool)>,
}

fn ioctl(fd: &OwnedFd, request: u64, arg: &mut [u64]) -> Result<(), String> {
    // SAFETY: each caller passes an array as long as the struct its request's encoding names, and
    // the kernel reads and writes within that size.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), request as _, arg.as_mut_ptr()) };
    if r < 0 {
        Err(errno_text(errno()))
    } else {
        Ok(())
    }
}

impl Held {
    /// Drops the page's contents (MADV_DONTNEED: its entries become missing) and registers it
    /// with a new userfaultfd in missing mode, kernel-mode faults included (the agent is root).
    pub fn hold(start: u64, len: u64) -> Result<Held, String> {
        // SAFETY: the words page is the caller's own mapping of `len` bytes at `start`.
        if unsafe { libc::madvise(start as *mut libc::c_void, len as usize, libc::MADV_DONTNEED) } != 0 {
            return Err(format!("madvise(MADV_DONTNEED): {}", errno_text(errno())));
        }
        // SAFETY: userfaultfd(2) takes flags only and returns a new descriptor.
        let raw = unsafe { libc::syscall(libc::SYS_userfaultfd, libc::O_CLOEXEC | libc::O_NONBLOCK) };
        if raw < 0 {
            let e = errno();
            let hint = if e == libc::ENOSYS { " (a kernel without CONFIG_USERFAULTFD)" } else { "" };
            return Err(format!("userfaultfd: {}{hint}", errno_text(e)));
        }
        // SAFETY: a descriptor the call above just returned, owned by nothing else.
        let fd = unsafe { OwnedFd::from_raw_fd(raw as i32) };
        let mut api = [UFFD_API, 0, 0];
        ioctl(&fd, UFFDIO_API, &mut api).map_err(|e| format!("UFFDIO_API: {e}"))?;
        let mut register = [start, len, UFFDIO_REGISTER_MODE_MISSING, 0];
        ioctl(&fd, UFFDIO_REGISTER, &mut register).map_err(|e| format!("UFFDIO_REGISTER {start:#x}: {e}"))?;
        Ok(Held { fd, start, len, seen: Mutex::new(0), state: Mutex::new((false, false)) })
    }

    /// The accesses seen waiting so far.
    pub fn seen(&self) -> u32 {
        *self.seen.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Reads the fault messages that came, until `at_least` accesses were seen waiting or
    /// `within` is over. Returns the count seen.
    pub fn wait(&self, at_least: u32, within: Duration) -> u32 {
        let deadline = Instant::now() + within;
        loop {
            let seen = self.read_messages();
            if seen >= at_least || Instant::now() >= deadline {
                return seen;
            }
            let mut pfd = libc::pollfd { fd: self.fd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
            // SAFETY: one pollfd, on our own descriptor.
            unsafe { libc::poll(&mut pfd, 1, 10) };
        }
    }

    fn read_messages(&self) -> u32 {
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        let mut buf = [0u8; MSG_SIZE * 8];
        loop {
            // SAFETY: reads into our own buffer, on our own non-blocking descriptor.
            let n = unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
            if n <= 0 {
                return *seen;
            }
            *seen += buf[..n as usize].chunks_exact(MSG_SIZE).filter(|m| m[0] == UFFD_EVENT_PAGEFAULT).count() as u32;
        }
    }

    /// Maps a zero page in place of the missing one without waking anyone: new accesses find
    /// the page, the ones already waiting go on waiting.
    pub fn map_page(&self) -> Result<(), String> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if state.0 {
            return Err("the page is mapped already".into());
        }
        let mut zero = [self.start, self.len, UFFDIO_ZEROPAGE_MODE_DONTWAKE, 0];
        ioctl(&self.fd, UFFDIO_ZEROPAGE, &mut zero).map_err(|e| format!("UFFDIO_ZEROPAGE {:#x}: {e}", self.start))?;
        state.0 = true;
        Ok(())
    }

    /// Maps a zero page there (unless [`Held::map_page`] did), wakes every access that waits
    /// on it, and unregisters the page. Idempotent.
    pub fn release(&self) -> Result<(), String> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if state.1 {
            return Ok(());
        }
        if !state.0 {
            let mut zero = [self.start, self.len, 0, 0];
            ioctl(&self.fd, UFFDIO_ZEROPAGE, &mut zero)
                .map_err(|e| format!("UFFDIO_ZEROPAGE {:#x}: {e}", self.start))?;
            state.0 = true;
        }
        let mut range = [self.start, self.len];
        ioctl(&self.fd, UFFDIO_WAKE, &mut range).map_err(|e| format!("UFFDIO_WAKE: {e}"))?;
        let mut range = [self.start, self.len];
        ioctl(&self.fd, UFFDIO_UNREGISTER, &mut range).map_err(|e| format!("UFFDIO_UNREGISTER: {e}"))?;
        state.1 = true;
        Ok(())
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let _ = self.release();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_requests_match_the_uapi_header() {
        // From <linux/userfaultfd.h> as the C compiler encodes them on x86_64.
        assert_eq!(UFFDIO_API, 0xc018_aa3f);
        assert_eq!(UFFDIO_REGISTER, 0xc020_aa00);
        assert_eq!(UFFDIO_UNREGISTER, 0x8010_aa01);
        assert_eq!(UFFDIO_WAKE, 0x8010_aa02);
        assert_eq!(UFFDIO_ZEROPAGE, 0xc020_aa04);
    }

    #[test]
    fn a_held_access_waits_through_map_page_until_release() {
        let page = crate::steps::memory::Page::map(libc::PROT_READ | libc::PROT_WRITE).unwrap();
        let addr = page.addr();
        // SAFETY: the page is ours, mapped read-write.
        unsafe { (addr as *mut u64).write_volatile(7) };
        let held = Held::hold(addr, page.len() as u64).expect("userfaultfd on the test host (root)");
        let reader = std::thread::spawn(move || {
            // SAFETY: the page stays mapped until the thread is joined; the read waits on it.
            unsafe { (addr as *const u64).read_volatile() }
        });
        assert_eq!(held.wait(1, Duration::from_secs(10)), 1, "the reader's access waits");
        held.map_page().unwrap();
        std::thread::sleep(Duration::from_millis(100));
        assert!(!reader.is_finished(), "map_page wakes nobody");
        assert!(held.map_page().is_err(), "mapped once");
        held.release().unwrap();
        assert_eq!(reader.join().unwrap(), 0, "the page came back as a zero page");
        held.release().unwrap();
        // SAFETY: as above; the page is a plain zero page now.
        assert_eq!(unsafe { (addr as *const u64).read_volatile() }, 0);
    }
}
