//! The small steps: a program run, a crash point, a pause.

use serde::{Deserialize, Serialize};

/// Runs a program (a path in the guest) and expects its exit status.
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Exec {
    pub argv: Vec<String>,
    pub expect_exit: i32,
}

/// Triggers an LKDTM crash point (`PANIC`, `WARNING`, `BUG`, ...) through
/// `/sys/kernel/debug/provoke-crash/DIRECT`.
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Lkdtm {
    pub point: String,
}

/// Sleeps; a scenario that sleeps past its deadline is how the deadline is tested.
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sleep {
    pub ms: u64,
}
