//! The words page as a whole: `memory` steps on it (MADV_DONTNEED, mprotect, munmap, a shared
//! file, page faults held with userfaultfd), `page_faults_held`, and the snapshot `fail_nth`'s
//! `unchanged` check compares.

use std::sync::Arc;
use std::time::Duration;

use crate::steps::memory;
use crate::steps::outcome::{errno, errno_text, Done, StepOutcome};
use crate::steps::userfault::Held;

use super::UserEvents;

impl UserEvents {
    /// `Step::PageFaultsHeld`: waits (the names unlocked) until at least `at_least` accesses
    /// wait on the held words page.
    pub fn page_faults_held(&self, at_least: u32, within_ms: u64, say: &mut dyn FnMut(&str)) -> Done {
        let held =
            self.names().held.clone().ok_or("page_faults_held: no page faults are held (memory: hold_page_faults)")?;
        let seen = held.wait(at_least, Duration::from_millis(within_ms));
        let verdict = if seen >= at_least { "ok" } else { "too few" };
        say(&format!(
            "page_faults_held: {seen} access(es) waiting on the words page within {within_ms} ms \
             (expected at least {at_least}): {verdict}"
        ));
        Ok(if seen >= at_least { StepOutcome::Pass } else { StepOutcome::Fail })
    }

    /// The enable words' page as it reads now (`None` before it is mapped or after `memory:
    /// unmap`), for `fail_nth`'s `unchanged` check.
    pub fn words_snapshot(&self) -> Option<Vec<u8>> {
        let names = self.names();
        let page = names.words.as_ref().filter(|_| !names.words_gone)?;
        let mut bytes = vec![0u8; page.len()];
        // SAFETY: the page is mapped and readable (it is never made write-only); other threads
        // change words through atomics, and a torn copy would only show as a difference.
        unsafe { std::ptr::copy_nonoverlapping(page.ptr() as *const u8, bytes.as_mut_ptr(), page.len()) };
        Some(bytes)
    }

    /// `Step::Memory` on the words page.
    pub fn memory(&self, op: protocol::MemoryOp, file: Option<&str>, say: &mut dyn FnMut(&str)) -> Done {
        use protocol::MemoryOp;
        // Held throughout: no thread looks a word up while its page changes.
        let mut names = self.names();
        if names.words.is_none() {
            names.word(None)?;
        }
        let page = names.words.as_ref().expect("mapped above");
        let what = format!("memory {op:?} on the words page {:#x}", page.addr()).to_lowercase();
        if (op == MemoryOp::ShareFile) != file.is_some() {
            return Err(format!("{what}: `file` goes with `share_file` and only with it"));
        }
        match op {
            MemoryOp::HoldPageFaults => {
                let held = Held::hold(page.addr(), page.len() as u64).map_err(|e| format!("{what}: {e}"))?;
                names.held = Some(Arc::new(held));
                say(&format!("{what}: dropped, and every access to it now waits: ok"));
                return Ok(StepOutcome::Pass);
            }
            MemoryOp::MapHeldPage => {
                let held = names.held.as_ref().ok_or_else(|| format!("{what}: no page faults are held"))?;
                held.map_page().map_err(|e| format!("{what}: {e}"))?;
                say(&format!("{what}: a zero page mapped, the {} access(es) seen still waiting: ok", held.seen()));
                return Ok(StepOutcome::Pass);
            }
            MemoryOp::ReleasePageFaults => {
                let held = names.held.take().ok_or_else(|| format!("{what}: no page faults are held"))?;
                held.release().map_err(|e| format!("{what}: {e}"))?;
                say(&format!("{what}: the {} access(es) seen waiting let go: ok", held.seen()));
                return Ok(StepOutcome::Pass);
            }
            _ => {}
        }
        if op == MemoryOp::Secret {
            return memory::secret(page).map_err(|e| format!("{what}: {e}")).map(|()| {
                say(&format!("{what}: now memfd_secret memory with the same bytes: ok"));
                StepOutcome::Pass
            });
        }
        if let Some(path) = file {
            return memory::share_file(page, path).map(|()| {
                say(&format!("{what}: now MAP_SHARED from {path}: ok"));
                StepOutcome::Pass
            });
        }
        // SAFETY: these calls change only the words page, which this state owns; after an unmap
        // `words_gone` stops every later access through `cell`, and the page is not unmapped twice.
        let r = unsafe {
            match op {
                MemoryOp::DontNeed => libc::madvise(page.ptr(), page.len(), libc::MADV_DONTNEED),
                MemoryOp::ReadOnly => libc::mprotect(page.ptr(), page.len(), libc::PROT_READ),
                MemoryOp::ReadWrite => libc::mprotect(page.ptr(), page.len(), libc::PROT_READ | libc::PROT_WRITE),
                MemoryOp::Unmap => libc::munmap(page.ptr(), page.len()),
                MemoryOp::ShareFile
                | MemoryOp::Secret
                | MemoryOp::HoldPageFaults
                | MemoryOp::MapHeldPage
                | MemoryOp::ReleasePageFaults => {
                    unreachable!("handled above")
                }
            }
        };
        if r != 0 {
            say(&format!("{what}: {}", errno_text(errno())));
            return Ok(StepOutcome::Fail);
        }
        match op {
            MemoryOp::Unmap => {
                // Gone already: keep its address for later steps, but never unmap it again.
                let page = names.words.take().expect("mapped above");
                names.unmapped_base = Some(page.addr());
                std::mem::forget(page);
                names.words_gone = true;
            }
            MemoryOp::ReadOnly => names.words_read_only = true,
            MemoryOp::ReadWrite => names.words_read_only = false,
            _ => {}
        }
        say(&format!("{what}: ok"));
        Ok(StepOutcome::Pass)
    }
}
