//! The perf steps: credentials, and perf events opened, controlled, filtered and read.

use serde::{Deserialize, Serialize};

use super::trace::Record;
use crate::expect::Expect;
use crate::value::Value;

/// Becomes another user: clears the supplementary groups, sets real, effective and saved
/// gid and uid, and keeps only the capabilities named in `keep_caps` (`CAP_PERFMON`,
/// `CAP_SYS_ADMIN`, ...; none by default). Descriptors opened before stay open.
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Credentials {
    pub uid: u32,
    #[serde(default)]
    pub gid: Option<u32>,
    #[serde(default)]
    pub keep_caps: Vec<String>,
}

/// `perf_event_open(PERF_TYPE_TRACEPOINT)` on `event` (`user_events/NAME`, its `id` file
/// read from tracefs) for this process on any CPU, sampling every record with
/// PERF_SAMPLE_RAW into a ring buffer; kept under `name`.
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PerfOpen {
    pub name: String,
    pub event: String,
    #[serde(default)]
    pub disabled: bool,
    #[serde(default)]
    pub expect: Expect,
}

/// `PERF_EVENT_IOC_ENABLE` / `PERF_EVENT_IOC_DISABLE`, or closes and unmaps the event.
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PerfControl {
    pub name: String,
    pub action: PerfAction,
    #[serde(default)]
    pub expect: Expect,
}

/// `PERF_EVENT_IOC_SET_FILTER` with an ftrace filter expression.
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PerfFilter {
    pub name: String,
    pub filter: String,
    #[serde(default)]
    pub expect: Expect,
}

/// Drains the ring buffer and compares the samples, in order, in one of two forms.
/// `samples`: each one's raw data must be an 8-byte trace entry of this event's type
/// followed by exactly the given fields' bytes (then only alignment padding). `records`:
/// each one is decoded field by field with the event's `format` file and compared as
/// `trace_read` does. `ip_in`: each sample's instruction pointer (PERF_SAMPLE_IP, which
/// a tracepoint takes from the registers its probe fetched) must lie in one of these
/// kernel functions, by `/proc/kallsyms` (a compiler's `.isra.0`-style suffix ignored).
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PerfRead {
    pub name: String,
    #[serde(default)]
    pub samples: Option<Vec<Vec<Value>>>,
    #[serde(default)]
    pub records: Option<Vec<Record>>,
    #[serde(default)]
    pub ip_in: Option<Vec<String>>,
}

/// What `perf_control` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum PerfAction {
    Enable,
    Disable,
    Close,
}
