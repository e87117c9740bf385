//! The enable words steps: the words set and checked, and what is done to the page that holds them.

use serde::{Deserialize, Serialize};

use super::defaults::{one, ten_seconds};

/// Stores a value into an enable word (to pre-set bits the kernel must clear or keep), as
/// wide and in the byte order `check_word` reads it.
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SetWord {
    pub word: String,
    pub value: u64,
}

/// Checks one bit of an enable word, at once (`within_ms: 0`) or polling until the deadline.
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckBit {
    pub word: String,
    pub bit: u8,
    pub set: bool,
    #[serde(default)]
    pub within_ms: u64,
}

/// Checks a whole enable word, at once (`within_ms: 0`) or polling until it holds `value`
/// or the time is up. The value is read in the guest's native byte order and as wide as
/// the word: an 8-byte word (`size: 8`) is its u64; a 4-byte word is its own u32 as bits
/// 0..31 and the next 4 bytes' u32 as bits 32..63, so one value holds on little- and
/// big-endian arches alike.
/// `or`: other values that also pass (read once `value` is not seen within the time).
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckWord {
    pub word: String,
    pub value: u64,
    #[serde(default)]
    pub or: Vec<u64>,
    #[serde(default)]
    pub within_ms: u64,
}

/// Changes the page that holds the scenario's enable words: `dont_need` (madvise
/// MADV_DONTNEED: the next access faults in a zero page), `read_only`, `read_write`
/// (mprotect), `unmap` (munmap; the words keep their addresses but cannot be read),
/// `secret` (the page becomes `memfd_secret()` memory at the same address, with its
/// current bytes, CONFIG_SECRETMEM: the process reads and writes it and the kernel can
/// fault it in, but never pin it, so every kernel write of a bit there fails after a
/// fault-in that worked), or
/// `share_file`: the page becomes a MAP_SHARED mapping of `file` at the same address (the
/// file is created with the page's current bytes), so the kernel's bit updates land in
/// the file. `hold_page_faults` drops the page (as `dont_need`) and registers it with
/// userfaultfd (CONFIG_USERFAULTFD): every access to it then waits, the kernel's fault-in
/// worker's included, until `release_page_faults` lets them all go (the scenario's end
/// does too). `map_held_page` puts a zero page back in between without waking anyone: later
/// accesses find it, the ones waiting go on waiting. Until then no step may read or store a
/// word, since it would wait too.
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Memory {
    pub op: MemoryOp,
    #[serde(default)]
    pub file: Option<String>,
}

/// Waits until at least `at_least` accesses (the kernel's fault-in worker's, while the
/// scenario's own thread touches no word) wait on the words page held by `memory:
/// hold_page_faults`; fails when `within_ms` passes first.
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PageFaultsHeld {
    #[serde(default = "one")]
    pub at_least: u32,
    #[serde(default = "ten_seconds")]
    pub within_ms: u64,
}

/// What `memory` does to the enable words' page.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum MemoryOp {
    DontNeed,
    ReadOnly,
    ReadWrite,
    Unmap,
    Secret,
    ShareFile,
    HoldPageFaults,
    MapHeldPage,
    ReleasePageFaults,
}
