//! Where a scenario's threads and processes meet, and on which CPU they run.

use serde::{Deserialize, Serialize};

use super::defaults::ten_seconds;

/// Waits until `parties` threads or processes of the scenario have reached the barrier
/// `name` (this one included), for `within_ms` at most. Threads of `threads` and `fork`ed
/// children share the barriers (a shared page mapped before the first fork); an
/// `exec_agent` image has its own. A barrier meets again and again: each `parties`
/// arrivals release each other, so one in a `repeat` meets once per iteration.
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Barrier {
    pub name: String,
    pub parties: u32,
    #[serde(default = "ten_seconds")]
    pub within_ms: u64,
}

/// Pins the calling thread to one CPU (`sched_setaffinity`). On a guest without that CPU
/// online the scenario is skipped, saying how many CPUs it needs.
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pin {
    pub cpu: u32,
}

/// The longest name a barrier may have (in bytes).
pub const MAX_BARRIER_NAME: usize = 51;
