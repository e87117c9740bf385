//! The steps that run steps: in a child process, in an exec'd agent, in threads, repeated, or
//! watched by the leak detector or the kernel log.

use serde::{Deserialize, Serialize};

use super::defaults::{one, ten_seconds};
use super::Step;

/// Forks: the child runs `steps` with a copy of everything the scenario made so far (fds,
/// enable words, indexes), then exits 0 if they all passed, 1 otherwise; the parent goes on
/// at once. `wait` collects it.
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fork {
    pub name: String,
    pub steps: Vec<Step>,
}

/// Runs `steps` in a child made by `clone(CLONE_VM | SIGCHLD)` on a stack of its own: a
/// process of its own (its own pid, its own copy of the descriptor table) that shares the
/// scenario's memory, as a vfork() child does, and with it the kernel's user_events state of
/// that memory (`user_event_mm`). The scenario waits for the child to end, as vfork's parent
/// does (at most `within_ms`, then kills it), and the step passes when the child's steps did.
/// What the child changes in memory (an enable word, a kept write index) the scenario sees
/// afterwards. Only the steps of [`CLONE_VM_STEPS`] run in the child: they use the
/// descriptors and words the scenario made and make no descriptor, thread or child (a
/// descriptor the child opened would be named in the shared memory but open only in its own
/// table). `data` and the words' page are made before the clone.
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CloneVm {
    pub steps: Vec<Step>,
    /// Kill the child (and fail) after this long.
    #[serde(default = "ten_seconds")]
    pub within_ms: u64,
}

/// The step kinds a `clone_vm` child may run.
pub const CLONE_VM_STEPS: &[&str] = &[
    "register",
    "unregister",
    "delete",
    "write",
    "ioctl",
    "set_word",
    "check_bit",
    "check_word",
    "write_file",
    "sleep",
];

/// Waits for a forked child and checks its exit status (0: all its steps passed).
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Wait {
    pub name: String,
    #[serde(default)]
    pub expect_exit: i32,
    /// Give up (and fail) after this long.
    #[serde(default = "ten_seconds")]
    pub within_ms: u64,
}

/// Replaces this process's image with a fresh agent (execve of itself) that runs `steps`
/// with an empty state; the scenario's result is theirs. Steps after this one never run.
/// The descriptors named in `keep` survive the exec: the new image starts with each under
/// the same name and number (the same open file, its write indexes included), the rest are
/// closed (every descriptor of the agent is close-on-exec).
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExecAgent {
    pub steps: Vec<Step>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub keep: Vec<String>,
}

/// Runs `steps` in a new thread (sharing memory and descriptors) and joins it; the step
/// passes when all of the thread's steps did.
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Thread {
    pub steps: Vec<Step>,
}

/// Runs `steps` `count` times, stopping at the first iteration that fails, or, with
/// `for_ms`, starting no iteration once that long has passed (the count is then a cap: for
/// a thread that must keep going while another works). In the steps, the text
/// `{iteration}` stands for the iteration's number (0, 1, ...; that of the innermost
/// `repeat`). The lines of passing iterations are not said one by one: each kind of line
/// (lines that differ only in their numbers) is said once, with how many times it came and
/// the range of each number that varied; a failing iteration's lines are said in full.
/// With `leak_at_most`, the kernel's unreclaimable slab memory (`SUnreclaim` in
/// /proc/meminfo, read once the kernel's deferred frees have settled, after the first half
/// of the iterations, a warm-up, and after rounds of the second half's length) may grow by
/// at most that many bytes per iteration of a round; the step fails when three rounds in a
/// row grew by more: a
/// kernel that leaks one small object an iteration fails (a correct one frees everything an
/// iteration made that it does not keep).
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Repeat {
    pub count: u32,
    pub steps: Vec<Step>,
    #[serde(default)]
    pub for_ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leak_at_most: Option<u32>,
}

/// Runs `steps` under the kernel's leak detector (`CONFIG_DEBUG_KMEMLEAK`, its control file
/// `/sys/kernel/debug/kmemleak`): before them two scans, whose suspects are then cleared
/// (they are not these steps'); after them a wait until what the steps allocated is older
/// than kmemleak's minimum age (5 s), and two scans with the task stacks left out (a stale
/// copy of a pointer there would hide a leak; kmemleak reports an object only when two
/// scans in a row find it unchanged). The step fails naming every object then found
/// unreferenced whose allocation's backtrace passes through a function of user_events (a
/// frame whose name has `user_event` in it): memory the kernel allocated for an event, an
/// enabler or a descriptor and no longer points to. It also fails when the steps left a page
/// pinned (`/proc/vmstat`: `nr_foll_pin_acquired` minus `nr_foll_pin_released` changed; the
/// kernel pins the enable word's page to write a bit, and nothing else in the guest pins).
/// Skips on a kernel without kmemleak.
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Kmemleak {
    pub steps: Vec<Step>,
}

/// Runs `steps` and reads what the kernel logged meanwhile (`/dev/kmsg`, from the step's
/// start, or from the oldest record still in the log buffer with `since_boot`): each line
/// of `expect` must be a whole message of it, and no line of `forbid` may be. A line is a
/// message's exact text, but that `{any}` stands for any text (a hashed
/// pointer, an address). The log is read for `within_ms` after the steps: until every
/// expected line has come when nothing is forbidden, else the whole time (a message from a
/// work item may come late). The agent's own `ue-agent:` markers are not the kernel's.
/// The lines said name each expected message found, or the missing one and the messages
/// that were logged, or the forbidden one that was.
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KernelLog {
    #[serde(default)]
    pub steps: Vec<Step>,
    #[serde(default)]
    pub expect: Vec<String>,
    #[serde(default)]
    pub forbid: Vec<String>,
    #[serde(default)]
    pub within_ms: u64,
    #[serde(default)]
    pub since_boot: bool,
}

/// Threads of a `threads` step that run the same steps.
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ThreadGroup {
    #[serde(default = "one")]
    pub count: u32,
    pub steps: Vec<Step>,
}

/// The text that stands for a thread's index in its group in a `threads` step's steps.
pub const THREAD_INDEX: &str = "{thread}";

/// The text that stands for the iteration's number in a `repeat` step's steps.
pub const ITERATION: &str = "{iteration}";

/// Runs `steps` only on a kernel that meets what it requires, as a scenario's `requires` says
/// it (`kernel`: comma-separated bounds such as `>=6.4`; `config`: `CONFIG_X`, built in or a
/// module, or `CONFIG_X=value`, where `=n` also holds when the option is absent). The host
/// decides it when it compiles the plan for a kernel: on one that does not meet it, the steps
/// are left out and the step says why, and passes; on one that does, they run in place (their
/// names are the scenario's).
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Requires {
    #[serde(default)]
    pub kernel: Option<String>,
    #[serde(default)]
    pub config: Vec<String>,
    pub steps: Vec<Step>,
    /// Set by the host for a kernel that does not meet it: why (the steps are then left out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schemars", schemars(skip))]
    pub unmet: Option<String>,
}
