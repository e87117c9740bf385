//! The `measure` step: one figure of a user_events operation's cost, and its baseline.

use serde::{Deserialize, Serialize};

/// The fewest repetitions a `measure` figure may have: a figure is a median over at least this
/// many samples (the suites' checks refuse fewer, the agent too).
pub const MIN_REPS: u32 = 5;

use super::defaults::{five, one_hundred};

/// Measures one figure (`what`) and reports it as a `ue-metric` line under `name`: the
/// median of `reps` repetitions (at least 5) of `duration_ms` each, with the samples, and
/// beside it `NAME.ratio`, the cost relative to the figure's baseline measured in the same
/// step (interleaved with it). The step fails only when measuring fails or a sanity check
/// does not hold (a rate of zero, a write the kernel refused); figures are never judged.
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Measure {
    pub name: String,
    pub what: MeasureKind,
    /// Payload bytes after the write index (`write`, `null_write`).
    #[serde(default)]
    pub payload: u32,
    /// What listens to the event while `write` runs.
    #[serde(default)]
    pub consumers: Consumers,
    /// `writev()` with the index and the payload in two iovecs instead of `write()`.
    #[serde(default)]
    pub vectored: bool,
    /// Enablers (enable bits registered in the process) while `fork` runs.
    #[serde(default)]
    pub enablers: u32,
    #[serde(default = "five")]
    pub reps: u32,
    /// The time of one repetition (for the latency kinds: a bound on it).
    #[serde(default = "one_hundred")]
    pub duration_ms: u64,
}

/// What a `measure` step measures, and its baseline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum MeasureKind {
    /// Write throughput of a registered event (events/s); baseline `null_write` of the same
    /// payload and form.
    Write,
    /// `write()`/`writev()` of the same bytes to `/dev/null` (events/s); baseline `syscall`.
    NullWrite,
    /// A trivial system call, `getppid()` (calls/s); the baseline of baselines, no ratio.
    Syscall,
    /// The disabled path: one check of a clear enable bit (ns per check); baseline `syscall`.
    EnableCheck,
    /// Registering a new event and unregistering it (us each); baseline `syscall`.
    Register,
    /// From writing `1` to the event's ftrace `enable` file to the bit seen set (us, timed one
    /// by one; the disable that follows each is untimed and only said); baseline `syscall`.
    EnablePropagation,
    /// `fork()` of a child that exits at once, waited for, with `enablers` enable bits
    /// registered in the process (us per fork); baseline: the same fork before registering.
    Fork,
}

/// Consumers attached to the measured event.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Consumers {
    #[default]
    None,
    /// The event's ftrace `enable` file set (the top trace buffer records it).
    Ftrace,
    /// A perf tracepoint event sampling every record into a ring buffer the agent drains.
    Perf,
    FtracePerf,
}
