//! The fault-injection steps: the kernel's `fail-nth` armed for one call, swept over every point of
//! a call or of fork(), and failslab aimed at a kernel function.

use serde::{Deserialize, Serialize};

use super::defaults::{default_each_max, default_sweep_max, yes};
use super::Step;

/// Arms the kernel's own fault injection (`/proc/thread-self/fail-nth`, with failslab counting
/// sleeping allocations) for the first call of the next step (a `register`, `unregister` or
/// `delete`: its ioctl; a `write_file`: its write(2); an `open`: its openat(2)): the `nth`
/// fault-injection point (a slab allocation, or a page allocation that cannot sleep) that call
/// reaches fails. Afterwards the step checks that the fault was injected (`injected: false`:
/// that the call reached fewer than `nth` points) and, with `unchanged` (the default), that
/// `user_events_status`, `dynamic_events` and the scenario's enable words read exactly as
/// before the call. With `in: FUNCTION`, only the points whose call stack passes through that
/// kernel function count (failslab's and fail_page_alloc's stack filter, which the kernel applies
/// to `fail-nth` too), and with `not_in: FUNCTION` none that pass through that one: N then
/// counts the allocations of one function of the code, which do not move when code elsewhere
/// (tracefs, credentials, the generic parsers) allocates more or less between kernel versions.
/// Both must be text symbols of `/proc/kallsyms` (a function inlined everywhere is not). Needs
/// a kernel with CONFIG_FAULT_INJECTION, CONFIG_FAILSLAB and CONFIG_FAULT_INJECTION_DEBUG_FS
/// (`--profile faults`), and CONFIG_FAULT_INJECTION_STACKTRACE_FILTER for `in`.
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FailNth {
    pub nth: u32,
    #[serde(default = "yes")]
    pub injected: bool,
    #[serde(default = "yes")]
    pub unchanged: bool,
    #[serde(default, rename = "in", skip_serializing_if = "Option::is_none")]
    pub within: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_in: Option<String>,
}

/// Runs `steps` once for each fault-injection point of the first step's first call, in
/// turn: for n = 1, 2, ... that call's nth point fails (as `fail_nth` arms it), and every
/// step must pass as written (an `expect` such as `ok or ENOMEM` takes either outcome). Ends
/// at the first n the call no longer reaches, which must be at most `max`. `{iteration}`
/// in the steps is n (a new event name each time). For calls whose points move between
/// kernels or boots, where a `fail_nth` with one N would not hold. Needs `--profile faults`.
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FailEach {
    pub steps: Vec<Step>,
    #[serde(default = "default_each_max")]
    pub max: u32,
}

/// Forks once for each fault-injection point of fork() itself: for n = 1, 2, ... the nth
/// point the fork reaches fails (the kernel's `fail-nth`, as `fail_nth` arms it). A fork
/// that fails must fail with ENOMEM; a child that is born runs `steps` with a copy of the
/// scenario's state (as `fork`'s child) and must pass them (its lines are said only when
/// it fails). The sweep ends at the first n the fork no longer reaches, which must be at
/// most `max`. Needs the kernel's fault injection (`--profile faults`), as `fail_nth`.
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FailEachFork {
    pub steps: Vec<Step>,
    #[serde(default = "default_sweep_max")]
    pub max: u32,
}

/// Arms failslab for every task (a kworker too) while `steps` run: the next slab allocation
/// whose call stack passes through the kernel function `function` (its range by
/// `/proc/kallsyms`) fails, once. After the steps it waits up to `within_ms` for that
/// failure to have come (`injected: false`: checks that it did not), then disarms. Needs
/// `--profile faults` (CONFIG_FAULT_INJECTION_STACKTRACE_FILTER).
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FailIn {
    pub function: String,
    pub steps: Vec<Step>,
    #[serde(default = "yes")]
    pub injected: bool,
    #[serde(default)]
    pub within_ms: u64,
}
