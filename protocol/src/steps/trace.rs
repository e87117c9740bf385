//! Reading the trace ring buffer: `trace_read` and the records it, and `perf_read`, compare.

use serde::{Deserialize, Serialize};

/// Drains every CPU's `trace_pipe_raw` of the top tracing instance (or of
/// `instances/INSTANCE`), which consumes what it reads, decodes the records of `event`
/// (`user_events/NAME`) field by field with its `format` file, and compares them with
/// `records`, in order and in number, or, with `every`, each one with that record (however
/// many there are, at most `at_most`). Records of other events are dropped; lost events fail.
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TraceRead {
    pub event: String,
    #[serde(default)]
    pub instance: Option<String>,
    #[serde(default)]
    pub records: Option<Vec<Record>>,
    #[serde(default)]
    pub every: Option<Record>,
    #[serde(default)]
    pub at_most: Option<u64>,
}

/// An expected record: field name to value. Every field but the common ones (`common_*`) must
/// be named; fields not in the event's format are an error.
pub type Record = std::collections::BTreeMap<String, FieldValue>;

/// The text that, given for an integer field (`common_pid: self`), stands for the TID of the
/// thread running the step.
pub const SELF_TID: &str = "self";

/// The expected value of a decoded field: a number for an integer field (compared with the
/// value its size and sign give), text for a `char` array or string (compared up to its first
/// NUL), `self` for the step's TID, or `{ bytes: HEX }` for the exact bytes of any array,
/// string or struct field.
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged, deny_unknown_fields)]
pub enum FieldValue {
    Unsigned(u64),
    Signed(i64),
    Text(String),
    Bytes { bytes: String },
}
