//! The perf consumer of a measured event: a tracepoint event's ring buffer, drained after every
//! write as a consumer that keeps up would.

use std::os::fd::OwnedFd;
use std::sync::atomic::{fence, Ordering};

use crate::steps::outcome::errno_text;

/// Data pages of the perf ring buffer (a 4096-byte sample fits many times over).
const PERF_PAGES: usize = 64;

/// A perf tracepoint event on the measured event, its ring buffer drained after every write
/// as a consumer that keeps up would.
pub(super) struct Ring {
    _fd: OwnedFd,
    base: *mut u8,
    len: usize,
    drained: std::cell::Cell<u64>,
}

impl Ring {
    pub(super) fn open(event: &str) -> Result<Ring, String> {
        let id_path = format!("/sys/kernel/tracing/events/user_events/{event}/id");
        let id: u64 = std::fs::read_to_string(&id_path)
            .map_err(|e| format!("{id_path}: {}", crate::runtime::sys::error_name(&e)))?
            .trim()
            .parse()
            .map_err(|_| format!("{id_path}: not an id"))?;
        use crate::steps::perf::RingError;
        match crate::steps::perf::open_ring(id, false, PERF_PAGES) {
            Ok((fd, base, len, _)) => Ok(Ring { _fd: fd, base, len, drained: std::cell::Cell::new(0) }),
            Err(RingError::Open(e)) => Err(format!("perf_event_open on {event}: {}", errno_text(e))),
            Err(RingError::Map(e)) => Err(format!("mmap of the perf ring: {}", errno_text(e))),
        }
    }

    /// Consumes everything written so far (data_tail = data_head).
    pub(super) fn drain(&self) {
        // SAFETY: the first page is the kernel's perf_event_mmap_page: data_head at 1024,
        // data_tail at 1032.
        unsafe {
            let head = std::ptr::read_volatile(self.base.add(1024).cast::<u64>());
            fence(Ordering::Acquire);
            let tail_ptr = self.base.add(1032).cast::<u64>();
            self.drained.set(self.drained.get() + head.saturating_sub(std::ptr::read_volatile(tail_ptr)));
            fence(Ordering::Release);
            std::ptr::write_volatile(tail_ptr, head);
        }
    }

    /// Bytes of samples consumed so far.
    pub(super) fn drained(&self) -> u64 {
        self.drained.get()
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: mapped in `open` with this length, unmapped only here.
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}
