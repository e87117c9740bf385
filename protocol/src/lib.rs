//! The contract between host and guest, shared by both sides. Sans-IO: types, encoders and line
//! parsers only. `plan`: what the agent runs; `steps`: the step kinds, one file per area;
//! `expect`: what a call must return; `result`: the KTAP lines of the result channel and the
//! step lines the host reads back; `markers`: the kernel-log lines that frame each scenario;
//! `gcov`: the coverage counters a coverage kernel's scenarios send back; `value`: the payload
//! fields a step writes or compares.

pub mod expect;
pub mod gcov;
pub mod kmsg;
pub mod markers;
pub mod plan;
pub mod result;
pub mod steps;
pub mod value;

pub use expect::{closest_errno, errno_name, errno_number, Expect, ERRNOS};
pub use kmsg::{kmsg_matches, KMSG_ANY};
pub use markers::{Marker, PROGRESS_INDEX_ENV, PROGRESS_KMSG_ENV};
pub use plan::{Groups, Plan, Scenario};
pub use result::{median, step_line, step_text, ExecEnd, ExitStatus, Metric, Outcome, ResultLine, METRIC_PREFIX};
pub use steps::{
    octal_mode, Addr, Area, BpfKind, Consumers, FieldValue, MeasureKind, MemoryOp, PerfAction, RawReg, RawUnreg,
    Record, Step, ThreadGroup, DATA_FD, ITERATION, MAX_BARRIER_NAME, MIN_REPS, SELF_TID, THREAD_INDEX,
    USER_EVENTS_DATA,
};
pub use value::{decode_hex, Value};

/// Bumped when the plan or the result lines change incompatibly.
pub const PROTOCOL_VERSION: u32 = 1;
/// Where the host puts the plan in the initramfs.
pub const PLAN_PATH: &str = "/plan.json";
/// The virtio console port name the agent writes results to (`virtserialport,name=...`).
pub const RESULT_PORT: &str = "ue.results";
/// virtio-fs tags: the user's shared folder and the artifacts folder.
pub const SHARE_TAG: &str = "ue-share";
pub const ARTIFACTS_TAG: &str = "ue-artifacts";
/// Where the agent mounts the artifacts folder (or a tmpfs when there is no virtio-fs).
pub const ARTIFACTS_DIR: &str = "/artifacts";
/// Exit status of a scenario process that skipped (the kselftest convention).
pub const EXIT_SKIP: i32 = 4;
