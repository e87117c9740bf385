//! A kernel report in the run model: its console excerpt, fingerprint and frames (with source
//! lines when the kernel had debug info).

use serde::{Deserialize, Serialize};

/// One kernel report found on the console.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    /// `panic`, `oops`, `bug`, `warning`, `kasan`, ...
    pub kind: String,
    /// The header line (`WARNING: CPU: 0 PID: 58 at kernel/trace/... func+0x1c/0x40`).
    pub summary: String,
    /// 1-based line of the header in the boot's `console.log`.
    pub console_line: usize,
    /// The report's lines, timestamps removed.
    pub excerpt: Vec<String>,
    /// The excerpt stops before the report's end.
    pub truncated: bool,
    /// Its kind and first meaningful functions (`kasan:f<g<h`, `judging::console::fingerprint`):
    /// the same crash on another boot, arch or address has the same one. Absent from runs
    /// recorded before fingerprints.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub fingerprint: String,
    /// A short stable hash of `fingerprint` (12 hex digits).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub fingerprint_hash: String,
    /// The faulting place and the reliable frames of its call trace, each with its source
    /// lines when the kernel had debug info (`results::symbols`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub frames: Vec<Frame>,
}

/// One frame of a finding's call trace.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Frame {
    /// As the kernel printed it: `func+0xoff/0xlen`.
    pub frame: String,
    /// Where it is, innermost inlined function first (`func file:line`); empty when the
    /// kernel's `vmlinux` had no debug info.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub source: Vec<String>,
}
