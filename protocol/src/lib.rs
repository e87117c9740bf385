//! The contract between host and guest: the compiled plan the guest agent runs, and the KTAP
//! lines it writes on the result channel. Sans-IO: types, encoders and a line parser only.

use serde::{Deserialize, Serialize};

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

/// What the agent runs, compiled by the host (the guest never parses YAML).
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Plan {
    pub version: u32,
    /// Free-form label for the logs (for example the arch).
    pub label: String,
    pub scenarios: Vec<Scenario>,
    /// Mount the user's virtio-fs share here, when the host shares one.
    #[serde(default)]
    pub share: Option<String>,
    /// Whether the artifacts folder comes over virtio-fs (else a tmpfs).
    #[serde(default)]
    pub artifacts_virtiofs: bool,
    /// Run an interactive shell on the console instead of (after) the scenarios.
    #[serde(default)]
    pub shell: bool,
}

/// One scenario: run in its own process group, killed at its deadline.
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// `suite/scenario`, unique in a plan.
    pub name: String,
    pub deadline_ms: u64,
    pub steps: Vec<Step>,
}

/// A step of a scenario. Each step that fails ends the scenario as failed. Externally tagged,
/// so a step reads in YAML as `- register: { format: "ev u32 a", word: w, expect: ok }`.
/// Names (`fd`, `word`, `index_as`) refer to objects earlier steps of the scenario made.
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Step {
    /// Runs a program (a path in the guest) and expects its exit status.
    Exec {
        argv: Vec<String>,
        expect_exit: i32,
    },
    /// Writes bytes to a file in one write(2). Without `create` the file must exist and is
    /// neither created nor truncated (tracefs control files, sysctls: O_TRUNC clears `trace`
    /// or every dynamic event); with it, an ordinary file is created or replaced. `append`
    /// opens with O_APPEND (the `>>` that `dynamic_events` wants).
    WriteFile {
        path: String,
        data: String,
        #[serde(default)]
        create: bool,
        #[serde(default)]
        append: bool,
        #[serde(default)]
        expect: Expect,
    },
    /// Reads a whole file and compares it: exactly (`equals`), lines it must hold (`contains`)
    /// and must not hold (`lacks`), each compared as a whole line, and text it must and must
    /// not include anywhere (`includes`, `excludes`: for lines with timestamps and pids).
    ReadFile {
        path: String,
        #[serde(default)]
        equals: Option<String>,
        #[serde(default)]
        contains: Vec<String>,
        #[serde(default)]
        lacks: Vec<String>,
        /// Text that must occur somewhere (in any line, or across lines).
        #[serde(default)]
        includes: Vec<String>,
        /// Text that must not occur anywhere.
        #[serde(default)]
        excludes: Vec<String>,
        /// The file's first bytes, in hex (`"01000000"`), for binary files.
        #[serde(default)]
        head_hex: Option<String>,
        #[serde(default)]
        expect: Expect,
        /// Retry every millisecond until the expectation and every check hold, up to this long
        /// (for effects the kernel applies asynchronously, such as auto-delete).
        #[serde(default)]
        within_ms: u64,
    },
    /// Triggers an LKDTM crash point (`PANIC`, `WARNING`, `BUG`, ...) through
    /// `/sys/kernel/debug/provoke-crash/DIRECT`.
    Lkdtm {
        point: String,
    },
    /// Sleeps; a scenario that sleeps past its deadline is how the deadline is tested.
    Sleep {
        ms: u64,
    },
    /// Opens a file and keeps the descriptor under a name. The name `data` is opened on
    /// `/sys/kernel/tracing/user_events_data` (read-write) by the first step that uses it.
    Open {
        fd: String,
        path: String,
        #[serde(default)]
        read_only: bool,
        #[serde(default)]
        expect: Expect,
    },
    Close {
        fd: String,
    },
    /// `ioctl(fd, DIAG_IOCSREG, &struct user_reg)`. `word` names an enable word in the
    /// scenario's memory (made on first use, zeroed, 8-byte aligned); `raw` overrides any
    /// field of the struct as sent, for malformed input. On success the returned
    /// `write_index` is kept under `index_as`.
    Register {
        #[serde(default = "data_fd")]
        fd: String,
        format: String,
        #[serde(default)]
        word: Option<String>,
        #[serde(default)]
        bit: u8,
        #[serde(default = "four")]
        size: u8,
        #[serde(default)]
        flags: u16,
        #[serde(default)]
        index_as: Option<String>,
        /// On success, the `write_index` the kernel must have returned.
        #[serde(default)]
        expect_index: Option<u32>,
        #[serde(default)]
        raw: RawReg,
        #[serde(default)]
        expect: Expect,
    },
    /// `ioctl(fd, DIAG_IOCSUNREG, &struct user_unreg)` for `word`'s address and `bit`.
    Unregister {
        #[serde(default = "data_fd")]
        fd: String,
        #[serde(default)]
        word: Option<String>,
        #[serde(default)]
        bit: u8,
        #[serde(default)]
        raw: RawUnreg,
        #[serde(default)]
        expect: Expect,
    },
    /// `ioctl(fd, DIAG_IOCSDEL, name)`. With `within_ms`, retried every millisecond while the
    /// result differs from `expect` (references dropped at exit or unregister go away only
    /// after an RCU grace period).
    Delete {
        #[serde(default = "data_fd")]
        fd: String,
        name: String,
        #[serde(default)]
        expect: Expect,
        #[serde(default)]
        within_ms: u64,
    },
    /// Changes the page that holds the scenario's enable words: `dont_need` (madvise
    /// MADV_DONTNEED: the next access faults in a zero page), `read_only`, `read_write`
    /// (mprotect), `unmap` (munmap; the words keep their addresses but cannot be read), or
    /// `share_file`: the page becomes a MAP_SHARED mapping of `file` at the same address (the
    /// file is created with the page's current bytes), so the kernel's bit updates land in
    /// the file.
    Memory {
        op: MemoryOp,
        #[serde(default)]
        file: Option<String>,
    },
    /// Stores a value into an enable word (to pre-set bits the kernel must clear or keep).
    SetWord {
        word: String,
        value: u64,
    },
    /// Checks one bit of an enable word, at once (`within_ms: 0`) or polling until the deadline.
    CheckBit {
        word: String,
        bit: u8,
        set: bool,
        #[serde(default)]
        within_ms: u64,
    },
    /// Checks a whole enable word (8 bytes, little-endian in memory as the CPU stores it).
    CheckWord {
        word: String,
        value: u64,
    },
    /// Forks: the child runs `steps` with a copy of everything the scenario made so far (fds,
    /// enable words, indexes), then exits 0 if they all passed, 1 otherwise; the parent goes on
    /// at once. `wait` collects it.
    Fork {
        name: String,
        steps: Vec<Step>,
    },
    /// Waits for a forked child and checks its exit status (0: all its steps passed).
    Wait {
        name: String,
        #[serde(default)]
        expect_exit: i32,
        /// Give up (and fail) after this long.
        #[serde(default = "ten_seconds")]
        within_ms: u64,
    },
    /// Replaces this process's image with a fresh agent (execve of itself) that runs `steps`
    /// with an empty state; the scenario's result is theirs. Steps after this one never run.
    ExecAgent {
        steps: Vec<Step>,
    },
    /// Runs `steps` in a new thread (sharing memory and descriptors) and joins it; the step
    /// passes when all of the thread's steps did.
    Thread {
        steps: Vec<Step>,
    },
    /// A bounded, seeded stream of random registrations, writes, enables, unregisters and
    /// deletes on its own `user_events_data` descriptor; fails if any call ends in an errno the
    /// ABI does not document. Kernel health is judged from the console as for every step.
    Fuzz {
        seed: u64,
        iterations: u32,
    },
    /// Becomes another user: clears the supplementary groups, sets real, effective and saved
    /// gid and uid, and keeps only the capabilities named in `keep_caps` (`CAP_PERFMON`,
    /// `CAP_SYS_ADMIN`, ...; none by default). Descriptors opened before stay open.
    Credentials {
        uid: u32,
        #[serde(default)]
        gid: Option<u32>,
        #[serde(default)]
        keep_caps: Vec<String>,
    },
    /// `perf_event_open(PERF_TYPE_TRACEPOINT)` on `event` (`user_events/NAME`, its `id` file
    /// read from tracefs) for this process on any CPU, sampling every record with
    /// PERF_SAMPLE_RAW into a ring buffer; kept under `name`.
    PerfOpen {
        name: String,
        event: String,
        #[serde(default)]
        disabled: bool,
        #[serde(default)]
        expect: Expect,
    },
    /// `PERF_EVENT_IOC_ENABLE` / `PERF_EVENT_IOC_DISABLE`, or closes and unmaps the event.
    PerfControl {
        name: String,
        action: PerfAction,
        #[serde(default)]
        expect: Expect,
    },
    /// `PERF_EVENT_IOC_SET_FILTER` with an ftrace filter expression.
    PerfFilter {
        name: String,
        filter: String,
        #[serde(default)]
        expect: Expect,
    },
    /// Drains the ring buffer and compares the samples, in order, in one of two forms.
    /// `samples`: each one's raw data must be an 8-byte trace entry of this event's type
    /// followed by exactly the given fields' bytes (then only alignment padding). `records`:
    /// each one is decoded field by field with the event's `format` file and compared as
    /// `trace_read` does.
    PerfRead {
        name: String,
        #[serde(default)]
        samples: Option<Vec<Vec<Value>>>,
        #[serde(default)]
        records: Option<Vec<Record>>,
    },
    /// Makes a directory (a tracing instance under `/sys/kernel/tracing/instances/`).
    Mkdir {
        path: String,
        #[serde(default)]
        expect: Expect,
    },
    /// Removes a directory (a tracing instance; `EBUSY` while one of its events is in use).
    Rmdir {
        path: String,
        #[serde(default)]
        expect: Expect,
    },
    /// Registers `format` with `{i}` replaced by 0, 1, 2, ... until one registration fails,
    /// which must fail as `expect` says (an errno); reaching `max` registrations without a
    /// failure fails the step. Each registration is unregistered at once and the events are
    /// spread over fresh `user_events_data` descriptors, which keep them alive until the
    /// scenario's process exits (they are not persistent).
    RegisterUntil {
        format: String,
        max: u32,
        expect: Expect,
        /// Leave the events to the reboot: a holder process in a session of its own keeps the
        /// descriptors open after the scenario ends, so the kernel never tears the events down
        /// (which for tens of thousands takes minutes and holds up the reboot). Only for an
        /// `isolated` scenario, the last in its boot.
        #[serde(default)]
        hold_until_reboot: bool,
    },
    /// Loads an eBPF program under `name`: `tracepoint` or `raw_tracepoint` type, GPL. It adds
    /// one to its own counter (a one-slot array map that `bpf_count` reads) each time it runs;
    /// with `ctx_read` it first loads the 8 bytes at that offset of its context (a tracepoint
    /// record), which the kernel checks against the event's size at attach time.
    BpfProg {
        name: String,
        kind: BpfKind,
        #[serde(default)]
        ctx_read: Option<u32>,
        #[serde(default)]
        expect: Expect,
    },
    /// `ioctl(perf, PERF_EVENT_IOC_SET_BPF, prog)`: attaches a loaded program to a perf event.
    BpfAttach {
        prog: String,
        perf: String,
        #[serde(default)]
        expect: Expect,
    },
    /// `bpf(BPF_RAW_TRACEPOINT_OPEN)` of a raw_tracepoint program on the tracepoint `tracepoint`.
    BpfRawTracepoint {
        prog: String,
        tracepoint: String,
        #[serde(default)]
        expect: Expect,
    },
    /// Checks how many times a program has run (its counter).
    BpfCount {
        prog: String,
        equals: u64,
    },
    /// `write()` (or `writev()` with one iovec per field when `vectored`) of the write index
    /// (`index`: a name from `index_as`, or `index_value`) followed by the fields.
    Write {
        #[serde(default = "data_fd")]
        fd: String,
        #[serde(default)]
        index: Option<String>,
        #[serde(default)]
        index_value: Option<u32>,
        #[serde(default)]
        fields: Vec<Value>,
        #[serde(default)]
        vectored: bool,
        /// `pwrite()` / `pwritev()` at this file offset instead of `write()` / `writev()`.
        #[serde(default)]
        offset: Option<i64>,
        /// Take the payload after the index from this address instead of the fields' bytes
        /// (as many bytes as the fields encode to): `unmapped`, `kernel`, `null_pointer`, or
        /// `fresh` / `read_only`, a never-touched page of zeros the write must fault in.
        #[serde(default)]
        payload_from: Option<Addr>,
        #[serde(default)]
        expect: Expect,
    },
    /// Drains every CPU's `trace_pipe_raw` of the top tracing instance (or of
    /// `instances/INSTANCE`), which consumes what it reads, decodes the records of `event`
    /// (`user_events/NAME`) field by field with its `format` file, and compares them with
    /// `records`, in order and in number. Records of other events are dropped; lost events fail.
    TraceRead {
        event: String,
        #[serde(default)]
        instance: Option<String>,
        records: Vec<Record>,
    },
    /// Measures one figure (`what`) and reports it as a `ue-metric` line under `name`: the
    /// median of `reps` repetitions (at least 5) of `duration_ms` each, with the samples, and
    /// beside it `NAME.ratio`, the cost relative to the figure's baseline measured in the same
    /// step (interleaved with it). The step fails only when measuring fails or a sanity check
    /// does not hold (a rate of zero, a write the kernel refused); figures are never judged.
    Measure {
        name: String,
        what: MeasureKind,
        /// Payload bytes after the write index (`write`, `null_write`).
        #[serde(default)]
        payload: u32,
        /// What listens to the event while `write` runs.
        #[serde(default)]
        consumers: Consumers,
        /// `writev()` with the index and the payload in two iovecs instead of `write()`.
        #[serde(default)]
        vectored: bool,
        /// Enablers (enable bits registered in the process) while `fork` runs.
        #[serde(default)]
        enablers: u32,
        #[serde(default = "five")]
        reps: u32,
        /// The time of one repetition (for the latency kinds: a bound on it).
        #[serde(default = "one_hundred")]
        duration_ms: u64,
    },
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

fn data_fd() -> String {
    DATA_FD.to_string()
}

fn four() -> u8 {
    4
}

fn ten_seconds() -> u64 {
    10_000
}

fn five() -> u32 {
    5
}

fn one_hundred() -> u64 {
    100
}

/// What `memory` does to the enable words' page.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum MemoryOp {
    DontNeed,
    ReadOnly,
    ReadWrite,
    Unmap,
    ShareFile,
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

/// What `perf_control` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum PerfAction {
    Enable,
    Disable,
    Close,
}

/// The descriptor name opened on `user_events_data` on first use.
pub const DATA_FD: &str = "data";
pub const USER_EVENTS_DATA: &str = "/sys/kernel/tracing/user_events_data";

/// Overrides of `struct user_reg` fields as sent to the kernel (unset fields keep the
/// values the step's other fields give).
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawReg {
    /// The ioctl command number (default `DIAG_IOCSREG`).
    #[serde(default)]
    pub cmd: Option<u64>,
    /// The `size` field (default 28).
    #[serde(default)]
    pub size: Option<u32>,
    #[serde(default)]
    pub enable_bit: Option<u8>,
    #[serde(default)]
    pub enable_size: Option<u8>,
    #[serde(default)]
    pub flags: Option<u16>,
    #[serde(default)]
    pub enable_addr: Option<Addr>,
    #[serde(default)]
    pub name_args: Option<Addr>,
    /// Bytes sent after the 28-byte struct (the kernel accepts a larger `size` only when
    /// they are zero).
    #[serde(default)]
    pub tail: Vec<u8>,
    /// Pass this pointer as the ioctl argument instead of the struct.
    #[serde(default)]
    pub arg: Option<Addr>,
}

/// Overrides of `struct user_unreg` fields.
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawUnreg {
    #[serde(default)]
    pub cmd: Option<u64>,
    #[serde(default)]
    pub size: Option<u32>,
    #[serde(default)]
    pub reserved: Option<u8>,
    #[serde(default)]
    pub reserved2: Option<u16>,
    #[serde(default)]
    pub disable_addr: Option<Addr>,
}

/// A user address for malformed input.
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Addr {
    /// Address 0 (`null_pointer` in YAML, where a bare `null` means "not given").
    NullPointer,
    /// An address in the kernel half (fails `access_ok`).
    Kernel,
    /// A page that was mapped and unmapped again.
    Unmapped,
    /// A mapped, read-only page.
    ReadOnly,
    /// A fresh anonymous page never touched (registration must fault it in).
    Fresh,
    /// The step's enable word plus a byte offset (misalignment).
    WordOffset(i64),
    /// A literal address.
    Value(u64),
}

/// One field of a written payload. Integers are stored little-endian in the guest's byte
/// order; `text` is the raw bytes, `cstr` adds a NUL, `bytes` is hex, `loc` is a
/// `__data_loc`/`__rel_loc` word (`size << 16 | offset`).
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Value {
    U8(u8),
    U16(u16),
    U32(u32),
    U64(u64),
    S8(i8),
    S16(i16),
    S32(i32),
    S64(i64),
    Text(String),
    Cstr(String),
    Bytes(String),
    Loc { offset: u16, size: u16 },
}

impl Value {
    /// The bytes this field contributes to a payload.
    pub fn encode(&self) -> Result<Vec<u8>, String> {
        Ok(match self {
            Value::U8(v) => v.to_le_bytes().to_vec(),
            Value::U16(v) => v.to_le_bytes().to_vec(),
            Value::U32(v) => v.to_le_bytes().to_vec(),
            Value::U64(v) => v.to_le_bytes().to_vec(),
            Value::S8(v) => v.to_le_bytes().to_vec(),
            Value::S16(v) => v.to_le_bytes().to_vec(),
            Value::S32(v) => v.to_le_bytes().to_vec(),
            Value::S64(v) => v.to_le_bytes().to_vec(),
            Value::Text(t) => t.as_bytes().to_vec(),
            Value::Cstr(t) => t.bytes().chain(std::iter::once(0)).collect(),
            Value::Bytes(hex) => decode_hex(hex)?,
            Value::Loc { offset, size } => ((u32::from(*size) << 16) | u32::from(*offset)).to_le_bytes().to_vec(),
        })
    }
}

/// Decodes hex digits, ignoring spaces (`"de ad be ef"`).
pub fn decode_hex(text: &str) -> Result<Vec<u8>, String> {
    let digits: Vec<u8> = text.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    if !digits.len().is_multiple_of(2) {
        return Err(format!("`{text}`: an odd number of hex digits"));
    }
    digits
        .chunks(2)
        .map(|pair| {
            let s = std::str::from_utf8(pair).map_err(|_| format!("`{text}`: not hex"))?;
            u8::from_str_radix(s, 16).map_err(|_| format!("`{text}`: `{s}` is not hex"))
        })
        .collect()
}

/// What a call must return: `ok` (success, the default), an errno name (`EINVAL`: the call
/// fails with that errno), or an exact non-negative return value (`0`, `28`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Expect(pub String);

/// Editors offer `ok` and the errno names, and accept a number (YAML reads `0` as one).
#[cfg(feature = "schemars")]
impl schemars::JsonSchema for Expect {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Expect".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let names: Vec<&str> = std::iter::once("ok").chain(ERRNOS.iter().map(|(n, _)| *n)).collect();
        schemars::json_schema!({
            "description": "`ok` (the default), an errno name, or an exact non-negative return value",
            "anyOf": [
                { "enum": names },
                { "type": "integer", "minimum": 0 },
                { "type": "string", "pattern": "^[0-9]+$" }
            ]
        })
    }
}

impl Default for Expect {
    fn default() -> Self {
        Expect("ok".to_string())
    }
}

/// A parsed [`Expect`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expected {
    Ok,
    Errno(i32),
    Value(i64),
}

impl Expect {
    pub fn parse(&self) -> Result<Expected, String> {
        let text = self.0.trim();
        if text == "ok" {
            return Ok(Expected::Ok);
        }
        if let Ok(v) = text.parse::<i64>() {
            return if v >= 0 {
                Ok(Expected::Value(v))
            } else {
                Err(format!("`{text}`: a failing call is stated by its errno name, not {v}"))
            };
        }
        errno_number(text)
            .map(Expected::Errno)
            .ok_or_else(|| format!("`{text}` is not `ok`, a number or an errno name"))
    }

    /// Whether a call's result (`Ok(return value)` or `Err(errno)`) meets the expectation.
    pub fn met_by(&self, result: Result<i64, i32>) -> bool {
        match (self.parse(), result) {
            (Ok(Expected::Ok), Ok(_)) => true,
            (Ok(Expected::Value(want)), Ok(got)) => want == got,
            (Ok(Expected::Errno(want)), Err(got)) => want == got,
            _ => false,
        }
    }
}

/// errno names and numbers; x86_64 and arm64 share the asm-generic numbering for all of them.
pub const ERRNOS: &[(&str, i32)] = &[
    ("EPERM", 1),
    ("ENOENT", 2),
    ("ESRCH", 3),
    ("EINTR", 4),
    ("EIO", 5),
    ("ENXIO", 6),
    ("E2BIG", 7),
    ("ENOEXEC", 8),
    ("EBADF", 9),
    ("ECHILD", 10),
    ("EAGAIN", 11),
    ("ENOMEM", 12),
    ("EACCES", 13),
    ("EFAULT", 14),
    ("EBUSY", 16),
    ("EEXIST", 17),
    ("EXDEV", 18),
    ("ENODEV", 19),
    ("ENOTDIR", 20),
    ("EISDIR", 21),
    ("EINVAL", 22),
    ("ENFILE", 23),
    ("EMFILE", 24),
    ("ENOTTY", 25),
    ("EFBIG", 27),
    ("ENOSPC", 28),
    ("ESPIPE", 29),
    ("EROFS", 30),
    ("EMLINK", 31),
    ("EPIPE", 32),
    ("EDOM", 33),
    ("ERANGE", 34),
    ("ENAMETOOLONG", 36),
    ("ENOSYS", 38),
    ("ENOTEMPTY", 39),
    ("EOVERFLOW", 75),
    ("EILSEQ", 84),
    ("EOPNOTSUPP", 95),
    ("EADDRINUSE", 98),
];

pub fn errno_number(name: &str) -> Option<i32> {
    ERRNOS.iter().find(|(n, _)| *n == name).map(|(_, v)| *v)
}

pub fn errno_name(number: i32) -> Option<&'static str> {
    ERRNOS.iter().find(|(_, v)| *v == number).map(|(n, _)| *n)
}

/// How a scenario ended, as the agent reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Pass,
    Fail,
    Skip,
    Timeout,
}

/// One line on the result channel. The stream is KTAP v1: a header, a plan line, one
/// result line per scenario, and `#` diagnostic lines; the `ue-` diagnostics frame each
/// scenario and end the stream, so the host can tell a crash from a clean end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResultLine {
    /// `KTAP version 1`
    Header,
    /// `1..N`
    Plan { count: usize },
    /// `# ue-begin INDEX NAME taint=T`
    Begin { index: usize, name: String, taint: u64 },
    /// `ok INDEX NAME # time_ms=D taint=T` and its `not ok`, `# SKIP`, `# TIMEOUT` forms.
    Result { index: usize, name: String, outcome: Outcome, time_ms: u64, taint: u64, reason: String },
    /// `# ue-end INDEX taint=T`
    End { index: usize, taint: u64 },
    /// `# ue-sentinel total=N passed=P failed=F skipped=S timeout=T`
    Sentinel { total: usize, passed: usize, failed: usize, skipped: usize, timeout: usize },
    /// Any other `# ...` line: a scenario's own output.
    Diag(String),
    /// `# ue-metric INDEX NAME value=V unit=U better=higher|lower samples=a,b,c`: a figure the
    /// scenario measured (the supervisor turns its child's `ue-metric NAME ...` lines into it).
    Metric { index: usize, metric: Metric },
    /// `# ue-abort after=INDEX REASON`: the agent gives up the rest of the plan after scenario
    /// INDEX (0: before any) because the kernel is no longer usable (a process stuck in the
    /// kernel, the supervisor itself blocked). It ends the stream in place of the sentinel; the
    /// host runs the scenarios after INDEX in a fresh boot.
    Abort { after: usize, reason: String },
}

/// A measured figure: the median `value` of its `samples`. Values are finite (the parser
/// refuses NaN and infinities), which is what makes the `Eq` below sound.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Metric {
    /// `[A-Za-z0-9_.-]+`.
    pub name: String,
    pub value: f64,
    /// `events/s`, `ns`, `us`, `x` (a ratio); no spaces.
    pub unit: String,
    pub higher_is_better: bool,
    pub samples: Vec<f64>,
}

impl Eq for Metric {}

/// What a scenario prints on its output for the supervisor to report as a [`ResultLine::Metric`].
pub const METRIC_PREFIX: &str = "ue-metric ";

impl Metric {
    /// `NAME value=V unit=U better=higher samples=a,b,c` (f64 `Display` reads back exactly).
    pub fn body(&self) -> String {
        let samples: Vec<String> = self.samples.iter().map(f64::to_string).collect();
        let better = if self.higher_is_better { "higher" } else { "lower" };
        format!("{} value={} unit={} better={better} samples={}", self.name, self.value, self.unit, samples.join(","))
    }

    pub fn parse_body(text: &str) -> Option<Metric> {
        let f: Vec<&str> = text.split(' ').collect();
        let [name, value, unit, better, samples] = f[..] else { return None };
        let name_ok = |n: &str| !n.is_empty() && n.bytes().all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b));
        let number = |t: &str| t.parse::<f64>().ok().filter(|v| v.is_finite());
        let value = number(value.strip_prefix("value=")?)?;
        let unit = unit.strip_prefix("unit=")?;
        let higher_is_better = match better.strip_prefix("better=")? {
            "higher" => true,
            "lower" => false,
            _ => return None,
        };
        let samples = match samples.strip_prefix("samples=")? {
            "" => vec![],
            list => list.split(',').map(number).collect::<Option<Vec<f64>>>()?,
        };
        if !name_ok(name) || unit.is_empty() {
            return None;
        }
        Some(Metric { name: name.to_string(), value, unit: unit.to_string(), higher_is_better, samples })
    }

    /// A scenario's output line `ue-metric NAME ...`, if it is one.
    pub fn from_output(line: &str) -> Option<Metric> {
        Metric::parse_body(line.strip_prefix(METRIC_PREFIX)?)
    }
}

impl ResultLine {
    pub fn format(&self) -> String {
        match self {
            ResultLine::Header => "KTAP version 1".to_string(),
            ResultLine::Plan { count } => format!("1..{count}"),
            ResultLine::Begin { index, name, taint } => format!("# ue-begin {index} {name} taint={taint}"),
            ResultLine::Result { index, name, outcome, time_ms, taint, reason } => {
                let (ok, directive) = match outcome {
                    Outcome::Pass => ("ok", String::new()),
                    Outcome::Fail => ("not ok", String::new()),
                    Outcome::Skip => ("ok", format!("SKIP {reason}").trim_end().to_string() + " "),
                    Outcome::Timeout => ("not ok", "TIMEOUT ".to_string()),
                };
                format!("{ok} {index} {name} # {directive}time_ms={time_ms} taint={taint}")
            }
            ResultLine::End { index, taint } => format!("# ue-end {index} taint={taint}"),
            ResultLine::Sentinel { total, passed, failed, skipped, timeout } => format!(
                "# ue-sentinel total={total} passed={passed} failed={failed} skipped={skipped} timeout={timeout}"
            ),
            ResultLine::Diag(text) => format!("# {text}"),
            ResultLine::Metric { index, metric } => format!("# {METRIC_PREFIX}{index} {}", metric.body()),
            ResultLine::Abort { after, reason } => format!("# ue-abort after={after} {reason}"),
        }
    }

    /// Parses one line (without its newline; a trailing `\r` is ignored). `None` for a line
    /// that is not part of the protocol.
    pub fn parse(line: &str) -> Option<ResultLine> {
        let line = line.trim_end_matches(['\r', '\n']);
        if line == "KTAP version 1" {
            return Some(ResultLine::Header);
        }
        if let Some(n) = line.strip_prefix("1..") {
            return n.parse().ok().map(|count| ResultLine::Plan { count });
        }
        if let Some(rest) = line.strip_prefix("# ue-begin ") {
            let mut it = rest.split(' ');
            let index = it.next()?.parse().ok()?;
            let name = it.next()?.to_string();
            let taint = kv(it.next()?, "taint")?;
            return Some(ResultLine::Begin { index, name, taint });
        }
        if let Some(rest) = line.strip_prefix("# ue-end ") {
            let mut it = rest.split(' ');
            let index = it.next()?.parse().ok()?;
            let taint = kv(it.next()?, "taint")?;
            return Some(ResultLine::End { index, taint });
        }
        if let Some(rest) = line.strip_prefix("# ue-sentinel ") {
            let f: Vec<&str> = rest.split(' ').collect();
            if f.len() != 5 {
                return None;
            }
            return Some(ResultLine::Sentinel {
                total: kv(f[0], "total")? as usize,
                passed: kv(f[1], "passed")? as usize,
                failed: kv(f[2], "failed")? as usize,
                skipped: kv(f[3], "skipped")? as usize,
                timeout: kv(f[4], "timeout")? as usize,
            });
        }
        if let Some(rest) = line.strip_prefix("# ue-abort ") {
            let (after, reason) = rest.split_once(' ').unwrap_or((rest, ""));
            if let Some(after) = kv(after, "after") {
                return Some(ResultLine::Abort { after: after as usize, reason: reason.to_string() });
            }
        }
        if let Some(rest) = line.strip_prefix("# ue-metric ") {
            let parsed = rest.split_once(' ').and_then(|(index, body)| Some((index.parse().ok()?, body)));
            if let Some(metric) = parsed.and_then(|(index, body)| Some((index, Metric::parse_body(body)?))) {
                return Some(ResultLine::Metric { index: metric.0, metric: metric.1 });
            }
        }
        if let Some(text) = line.strip_prefix("# ") {
            return Some(ResultLine::Diag(text.to_string()));
        }
        if line == "#" {
            return Some(ResultLine::Diag(String::new()));
        }
        let (ok, rest) = if let Some(r) = line.strip_prefix("not ok ") {
            (false, r)
        } else if let Some(r) = line.strip_prefix("ok ") {
            (true, r)
        } else {
            return None;
        };
        let (head, directive) = rest.split_once(" # ")?;
        let (index, name) = head.split_once(' ')?;
        let index = index.parse().ok()?;
        let words: Vec<&str> = directive.split(' ').collect();
        let n = words.len();
        if n < 2 {
            return None;
        }
        let time_ms = kv(words[n - 2], "time_ms")?;
        let taint = kv(words[n - 1], "taint")?;
        let (outcome, reason) = match (ok, words[0]) {
            (true, "SKIP") => (Outcome::Skip, words[1..n - 2].join(" ")),
            (false, "TIMEOUT") => (Outcome::Timeout, String::new()),
            (true, _) => (Outcome::Pass, String::new()),
            (false, _) => (Outcome::Fail, String::new()),
        };
        Some(ResultLine::Result { index, name: name.to_string(), outcome, time_ms, taint, reason })
    }
}

fn kv(word: &str, key: &str) -> Option<u64> {
    word.strip_prefix(key)?.strip_prefix('=')?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expectations_parse_and_match() {
        assert!(Expect::default().met_by(Ok(3)));
        assert!(!Expect::default().met_by(Err(22)));
        assert!(Expect("EINVAL".into()).met_by(Err(22)));
        assert!(!Expect("EINVAL".into()).met_by(Err(7)));
        assert!(!Expect("EINVAL".into()).met_by(Ok(0)));
        assert!(Expect("28".into()).met_by(Ok(28)));
        assert!(!Expect("28".into()).met_by(Ok(27)));
        assert!(Expect("-1".into()).parse().unwrap_err().contains("errno name"));
        assert!(Expect("EWHAT".into()).parse().is_err());
        assert_eq!(errno_name(98), Some("EADDRINUSE"));
    }

    #[test]
    fn values_encode_little_endian() {
        assert_eq!(Value::U32(0x0102_0304).encode().unwrap(), [4, 3, 2, 1]);
        assert_eq!(Value::S16(-2).encode().unwrap(), [0xfe, 0xff]);
        assert_eq!(Value::Cstr("ab".into()).encode().unwrap(), [b'a', b'b', 0]);
        assert_eq!(Value::Loc { offset: 12, size: 3 }.encode().unwrap(), [12, 0, 3, 0]);
        assert_eq!(Value::Bytes("de ad".into()).encode().unwrap(), [0xde, 0xad]);
        assert!(Value::Bytes("abc".into()).encode().is_err());
    }

    #[test]
    fn register_steps_take_defaults() {
        let step: Step = serde_json::from_str(r#"{"register":{"format":"ev u32 a","word":"w"}}"#).unwrap();
        let Step::Register { fd, size, bit, expect, raw, .. } = step else { panic!() };
        assert_eq!((fd.as_str(), size, bit, expect.0.as_str()), ("data", 4, 0, "ok"));
        assert_eq!(raw, RawReg::default());
        let bad = serde_json::from_str::<Step>(r#"{"register":{"format":"x","wrod":"w"}}"#);
        assert!(bad.unwrap_err().to_string().contains("wrod"));
    }

    #[test]
    fn every_line_round_trips() {
        let lines = [
            ResultLine::Header,
            ResultLine::Plan { count: 3 },
            ResultLine::Begin { index: 1, name: "boot/empty".into(), taint: 0 },
            ResultLine::Diag("write returned 0".into()),
            ResultLine::Result {
                index: 1,
                name: "boot/empty".into(),
                outcome: Outcome::Pass,
                time_ms: 3,
                taint: 0,
                reason: String::new(),
            },
            ResultLine::Result {
                index: 2,
                name: "a/b".into(),
                outcome: Outcome::Skip,
                time_ms: 0,
                taint: 512,
                reason: "no perf".into(),
            },
            ResultLine::Result {
                index: 3,
                name: "a/c".into(),
                outcome: Outcome::Timeout,
                time_ms: 5000,
                taint: 0,
                reason: String::new(),
            },
            ResultLine::Result {
                index: 4,
                name: "a/d".into(),
                outcome: Outcome::Fail,
                time_ms: 1,
                taint: 0,
                reason: String::new(),
            },
            ResultLine::End { index: 1, taint: 512 },
            ResultLine::Metric {
                index: 2,
                metric: Metric {
                    name: "write_256_ftrace.ratio".into(),
                    value: 2.5,
                    unit: "x".into(),
                    higher_is_better: false,
                    samples: vec![2.25, 2.5, 0.1 + 0.2, 1e-9, 123456.789],
                },
            },
            ResultLine::Metric {
                index: 3,
                metric: Metric {
                    name: "n".into(),
                    value: 0.0,
                    unit: "ns".into(),
                    higher_is_better: true,
                    samples: vec![],
                },
            },
            ResultLine::Sentinel { total: 3, passed: 1, failed: 1, skipped: 1, timeout: 0 },
            ResultLine::Abort { after: 7, reason: "pid 80 is stuck in the kernel (D state)".into() },
            ResultLine::Abort { after: 0, reason: String::new() },
        ];
        for l in lines {
            let text = l.format();
            assert_eq!(ResultLine::parse(&text), Some(l.clone()), "{text}");
            assert_eq!(ResultLine::parse(&format!("{text}\r")), Some(l), "with CR");
        }
    }

    #[test]
    fn formats_are_ktap() {
        let skip = ResultLine::Result {
            index: 2,
            name: "a/b".into(),
            outcome: Outcome::Skip,
            time_ms: 0,
            taint: 0,
            reason: "no perf".into(),
        };
        assert_eq!(skip.format(), "ok 2 a/b # SKIP no perf time_ms=0 taint=0");
        assert_eq!(ResultLine::parse("[    1.234] random console"), None);
        assert_eq!(ResultLine::parse("ok 1 x"), None, "a result line without our fields is not ours");
    }

    #[test]
    fn metric_lines_parse_strictly() {
        let m =
            ResultLine::parse("# ue-metric 4 write_0_none value=125000 unit=events/s better=higher samples=1,2.5,3");
        let Some(ResultLine::Metric { index: 4, metric }) = m else { panic!("{m:?}") };
        assert_eq!((metric.name.as_str(), metric.value, metric.unit.as_str()), ("write_0_none", 125000.0, "events/s"));
        assert!(metric.higher_is_better);
        assert_eq!(metric.samples, [1.0, 2.5, 3.0]);
        assert_eq!(Metric::from_output(&format!("ue-metric {}", metric.body())), Some(metric));
        // Anything malformed is an ordinary diagnostic, never a figure.
        for bad in [
            "# ue-metric x name value=1 unit=ns better=lower samples=",
            "# ue-metric 1 a value=NaN unit=ns better=lower samples=",
            "# ue-metric 1 a value=inf unit=ns better=lower samples=",
            "# ue-metric 1 a value=1 unit=ns better=lower samples=1,,2",
            "# ue-metric 1 a value=1 unit=ns better=maybe samples=",
            "# ue-metric 1 a value=1 unit= better=lower samples=",
            "# ue-metric 1 a b value=1 unit=ns better=lower samples=",
            "# ue-metric 1 a/b value=1 unit=ns better=lower samples=",
            "# ue-metric 1 a unit=ns value=1 better=lower samples=",
        ] {
            assert_eq!(ResultLine::parse(bad), Some(ResultLine::Diag(bad[2..].to_string())), "{bad}");
        }
        assert_eq!(Metric::from_output("step 1: ue-metric a value=1 unit=ns better=lower samples="), None);
    }

    #[test]
    fn measure_steps_take_defaults() {
        let step: Step = serde_json::from_str(r#"{"measure":{"name":"w","what":"write"}}"#).unwrap();
        let Step::Measure { what, payload, consumers, vectored, enablers, reps, duration_ms, .. } = step else {
            panic!()
        };
        assert_eq!((what, payload, consumers, vectored, enablers), (MeasureKind::Write, 0, Consumers::None, false, 0));
        assert_eq!((reps, duration_ms), (5, 100));
        let step = serde_json::from_str::<Step>(r#"{"measure":{"name":"w","what":"write","consumers":"ftrace_perf"}}"#);
        assert!(matches!(step, Ok(Step::Measure { consumers: Consumers::FtracePerf, .. })));
    }

    #[test]
    fn plan_is_json_with_tagged_steps() {
        let plan = Plan {
            version: PROTOCOL_VERSION,
            label: "x86_64".into(),
            scenarios: vec![Scenario {
                name: "fault/warn".into(),
                deadline_ms: 1000,
                steps: vec![Step::Lkdtm { point: "WARNING".into() }, Step::Sleep { ms: 1 }],
            }],
            share: None,
            artifacts_virtiofs: false,
            shell: false,
        };
        let json = serde_json::to_string(&plan).unwrap();
        assert!(json.contains(r#"{"lkdtm":{"point":"WARNING"}}"#), "{json}");
        assert_eq!(serde_json::from_str::<Plan>(&json).unwrap(), plan);
    }
}
