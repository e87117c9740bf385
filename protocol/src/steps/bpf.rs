//! The eBPF steps: counting programs loaded, attached and counted.

use serde::{Deserialize, Serialize};

use crate::expect::Expect;

/// Loads an eBPF program under `name`: `tracepoint` or `raw_tracepoint` type, GPL. It adds
/// one to its own counter (a one-slot array map that `bpf_count` reads) each time it runs;
/// with `ctx_read` it first loads the 8 bytes at that offset of its context (a tracepoint
/// record), which the kernel checks against the event's size at attach time.
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BpfProg {
    pub name: String,
    pub kind: BpfKind,
    #[serde(default)]
    pub ctx_read: Option<u32>,
    #[serde(default)]
    pub expect: Expect,
}

/// `ioctl(perf, PERF_EVENT_IOC_SET_BPF, prog)`: attaches a loaded program to a perf event.
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BpfAttach {
    pub prog: String,
    pub perf: String,
    #[serde(default)]
    pub expect: Expect,
}

/// `bpf(BPF_RAW_TRACEPOINT_OPEN)` of a raw_tracepoint program on the tracepoint `tracepoint`.
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BpfRawTracepoint {
    pub prog: String,
    pub tracepoint: String,
    #[serde(default)]
    pub expect: Expect,
}

/// Checks how many times a program has run (its counter).
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BpfCount {
    pub prog: String,
    pub equals: u64,
}

/// The eBPF program types `bpf_prog` loads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum BpfKind {
    /// `BPF_PROG_TYPE_TRACEPOINT`: attached to a perf tracepoint event with `bpf_attach`.
    Tracepoint,
    /// `BPF_PROG_TYPE_RAW_TRACEPOINT`: attached by name with `bpf_raw_tracepoint`.
    RawTracepoint,
}
