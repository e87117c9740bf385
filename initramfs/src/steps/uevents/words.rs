//! The enable words as `set_word`, `check_word` and `check_bit` see them: each word's width,
//! learned from the scenario's registrations before it runs, and loads and stores of one u64
//! or two u32s in the CPU's byte order (the module docs of `uevents.rs`).

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use protocol::steps::Register;
use protocol::Step;

use super::{numbered, UserEvents};
use crate::steps::outcome::{Done, StepOutcome};

impl UserEvents {
    /// Learns each named word's width from the first `register` step naming it, in step order
    /// and into every nested step (forks, `clone_vm` children, threads, repeats, ...), but not
    /// into an exec'd agent, which starts over with its own steps. Before any step runs, so a
    /// `set_word` ahead of the registration already sees the word as it will be.
    pub fn learn_widths(&self, steps: &[Step]) {
        for step in steps {
            match step {
                Step::Register(Register { word: Some(w), size, raw, .. }) => {
                    self.names().widths.entry(w.clone()).or_insert(raw.enable_size.unwrap_or(*size));
                }
                Step::ExecAgent(_) => {}
                _ => step.nested().into_iter().for_each(|inner| self.learn_widths(inner)),
            }
        }
    }

    /// A word's width as `set_word`/`check_word`/`check_bit` see it: 4 or 8 (the default for
    /// a word no registration names, and for registrations of other sizes, which fail).
    pub(super) fn width(&self, name: &str) -> u8 {
        let names = self.names();
        let learned = names
            .widths
            .get(name)
            .or_else(|| names.widths.iter().find(|(key, _)| key.contains('{') && numbered(key, name)).map(|(_, w)| w));
        if learned == Some(&4) {
            4
        } else {
            8
        }
    }

    /// The word's slot, 8-aligned, in the words page.
    pub(super) fn slot(&self, name: &str) -> Result<u64, String> {
        let mut names = self.names();
        if names.words_gone {
            return Err(format!("word {name}: the words page was unmapped"));
        }
        names.word(Some(name))
    }

    /// Reads a word as its width says (module docs).
    pub fn load(&self, name: &str) -> Result<u64, String> {
        let addr = self.slot(name)?;
        // SAFETY: an 8-aligned slot of the words page, which stays mapped while `self` lives
        // (only a `memory` step unmaps it, and no thread of `threads` may run one). The kernel
        // and other threads update it asynchronously, hence atomics.
        Ok(unsafe {
            if self.width(name) == 4 {
                let half = |at: u64| u64::from((*(at as *const AtomicU32)).load(Ordering::SeqCst));
                half(addr) | (half(addr + 4) << 32)
            } else {
                (*(addr as *const AtomicU64)).load(Ordering::SeqCst)
            }
        })
    }

    /// Stores a word as its width says (module docs).
    pub(super) fn store(&self, name: &str, value: u64) -> Result<(), String> {
        let addr = self.slot(name)?;
        // SAFETY: as in `load`.
        unsafe {
            if self.width(name) == 4 {
                (*(addr as *const AtomicU32)).store(value as u32, Ordering::SeqCst);
                (*((addr + 4) as *const AtomicU32)).store((value >> 32) as u32, Ordering::SeqCst);
            } else {
                (*(addr as *const AtomicU64)).store(value, Ordering::SeqCst);
            }
        }
        Ok(())
    }

    /// How a 4-byte word's value reads on a big-endian CPU, where it is not the slot's u64
    /// (module docs); nothing where the two views agree.
    pub(super) fn view(&self, name: &str) -> &'static str {
        if cfg!(target_endian = "big") && self.width(name) == 4 {
            " (4-byte: u32 at +0 | u32 at +4 << 32)"
        } else {
            ""
        }
    }
}

/// The steps on the words: `set_word`, `check_word` (polled), `check_bit` (polled).
impl UserEvents {
    pub fn set_word(&self, name: &str, value: u64, say: &mut dyn FnMut(&str)) -> Done {
        if self.names().words_read_only {
            return Err(format!("set word {name}: the words page is read-only"));
        }
        self.store(name, value)?;
        say(&format!("set word {name}{} = {value:#x}: ok", self.view(name)));
        Ok(StepOutcome::Pass)
    }

    pub fn check_word(&self, name: &str, value: u64, or: &[u64], within_ms: u64, say: &mut dyn FnMut(&str)) -> Done {
        let view = self.view(name);
        let start = Instant::now();
        let limit = Duration::from_millis(within_ms);
        let expected = std::iter::once(value).chain(or.iter().copied()).map(|v| format!("{v:#x}")).collect::<Vec<_>>();
        let expected = expected.join(" or ");
        loop {
            let seen = self.load(name)?;
            let waited = start.elapsed();
            if seen == value || waited >= limit {
                let line = if within_ms == 0 {
                    format!("check word {name}{view}: {seen:#x} (expected {expected})")
                } else {
                    let still = if seen == value { "" } else { "still " };
                    format!(
                        "check word {name}{view}: {still}{seen:#x} after {} ms (expected {expected} within {within_ms} ms)",
                        waited.as_millis()
                    )
                };
                say(&line);
                return Ok(StepOutcome::passed_if(seen == value || or.contains(&seen)));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    pub fn check_bit(&self, name: &str, bit: u8, set: bool, within_ms: u64, say: &mut dyn FnMut(&str)) -> Done {
        let what = format!("check word {name} bit {bit}");
        if bit >= 64 {
            return Err(format!("{what}: an enable word has bits 0..63"));
        }
        let state = |s: bool| if s { "set" } else { "clear" };
        let start = Instant::now();
        let limit = Duration::from_millis(within_ms);
        loop {
            let seen = self.load(name)?;
            let is_set = seen & (1 << bit) != 0;
            let waited = start.elapsed();
            if is_set == set || waited >= limit {
                let (outcome, still) =
                    if is_set == set { (StepOutcome::Pass, "") } else { (StepOutcome::Fail, "still ") };
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
                return Ok(outcome);
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}
