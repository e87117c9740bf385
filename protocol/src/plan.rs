//! The plan: what the host compiles from the suites and the guest agent runs (`/plan.json`),
//! scenario by scenario and step by step. The YAML suites deserialize into these same types.
//! tidy: long because it is the whole step vocabulary, one enum whose variants carry the
//! documentation the schema and the suites' editors show.

use serde::{Deserialize, Serialize};

use crate::expect::Expect;
use crate::value::Value;

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
    /// On a coverage kernel: reset the GCOV counters before each scenario and send them after
    /// it (`crate::gcov`). Absent otherwise, so a normal plan's JSON is as before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gcov: Option<crate::gcov::GcovPlan>,
    /// `run --fail-fast`: after the first scenario that fails or times out (other than those
    /// in `expected_failures`), the agent runs no more and reports the rest as skipped. Absent
    /// otherwise, so a normal plan's JSON is as before.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stop_at_first_failure: bool,
    /// The scenarios expected to fail (`xfail`), which do not stop a `stop_at_first_failure` plan.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub expected_failures: Vec<String>,
}

impl Plan {
    /// A plan with no scenarios, at this protocol's version: the agent boots, reports its
    /// sentinel and powers off. Scenarios and options are added to it.
    pub fn empty(label: &str) -> Plan {
        Plan {
            version: crate::PROTOCOL_VERSION,
            label: label.into(),
            scenarios: vec![],
            share: None,
            artifacts_virtiofs: false,
            shell: false,
            gcov: None,
            stop_at_first_failure: false,
            expected_failures: vec![],
        }
    }
}

/// The fewest repetitions a `measure` figure may have: a figure is a median over at least this
/// many samples (the suites' checks refuse fewer, the agent too).
pub const MIN_REPS: u32 = 5;

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
        /// While the result differs from `expect`, write again every millisecond, up to this
        /// long (for a state the kernel reaches asynchronously, such as a `-:` delete that is
        /// `EBUSY` until an RCU-deferred put has run). Only the attempt that counts is said,
        /// with the number of retries.
        #[serde(default)]
        within_ms: u64,
    },
    /// Reads a whole file and compares it: exactly (`equals`), lines it must hold (`contains`)
    /// and must not hold (`lacks`), each compared as a whole line (`{any}` in one stands for
    /// any text: a timestamp, a pid), and text it must and must not include anywhere
    /// (`includes`, `excludes`).
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
        /// Keeps the content read (once every check holds) under this name, for a later
        /// `equals_kept` of the same scenario (an event's `id` before the event is deleted).
        #[serde(default)]
        keep_as: Option<String>,
        /// The content must be exactly the one kept under this name (as `equals`).
        #[serde(default)]
        equals_kept: Option<String>,
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
    /// Arms the kernel's own fault injection (`/proc/thread-self/fail-nth`, with failslab
    /// counting sleeping allocations) for the first call of the next step (a `register`,
    /// `unregister`, `delete` or `write_file`): the `nth` fault-injection point (a slab
    /// allocation, or a page allocation that cannot sleep) that call reaches fails. Afterwards
    /// the step checks that the fault was injected (`injected: false`: that the call reached
    /// fewer than `nth` points) and, with `unchanged` (the default), that `user_events_status`,
    /// `dynamic_events` and the scenario's enable words read exactly as before the call. Needs
    /// a kernel with CONFIG_FAULT_INJECTION, CONFIG_FAILSLAB and
    /// CONFIG_FAULT_INJECTION_DEBUG_FS (`--profile faults`).
    FailNth {
        nth: u32,
        #[serde(default = "yes")]
        injected: bool,
        #[serde(default = "yes")]
        unchanged: bool,
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
    /// dup(2) of the descriptor named `fd` (`data` opens by itself first), kept under the name
    /// `to` (close-on-exec, as every descriptor of the agent): the same open file, so one
    /// file's write indexes and references, whichever name a step uses. Closing one name
    /// leaves the other open.
    Dup {
        #[serde(default = "data_fd")]
        fd: String,
        to: String,
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
        /// Exactly this many minor page faults counted to the calling thread during the
        /// ioctl (`getrusage(RUSAGE_THREAD)`): the kernel's fault-ins of the enable word
        /// (`fixup_user_fault()` in the caller's context) count there.
        #[serde(default)]
        minor_faults: Option<u64>,
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
        /// As `register`'s: the minor page faults of the calling thread during the ioctl.
        #[serde(default)]
        minor_faults: Option<u64>,
        #[serde(default)]
        expect: Expect,
    },
    /// `ioctl(fd, DIAG_IOCSDEL, name)`. With `within_ms`, retried every millisecond while the
    /// result differs from `expect` (references dropped at exit or unregister go away only
    /// after an RCU grace period); the retries are counted and said.
    Delete {
        #[serde(default = "data_fd")]
        fd: String,
        name: String,
        #[serde(default)]
        expect: Expect,
        #[serde(default)]
        within_ms: u64,
        /// Then check that the event's folder, `events/user_events/NAME`, agrees with the
        /// result: gone after `0` (the removal is synchronous) or `ENOENT`, still there after
        /// `EBUSY`. For a persistent single-format event, which nothing else removes.
        #[serde(default)]
        confirm: bool,
    },
    /// Changes the page that holds the scenario's enable words: `dont_need` (madvise
    /// MADV_DONTNEED: the next access faults in a zero page), `read_only`, `read_write`
    /// (mprotect), `unmap` (munmap; the words keep their addresses but cannot be read),
    /// `secret` (the page becomes `memfd_secret()` memory at the same address, with its
    /// current bytes, CONFIG_SECRETMEM: the process reads and writes it and the kernel can
    /// fault it in, but never pin it, so every kernel write of a bit there fails after a
    /// fault-in that worked), or
    /// `share_file`: the page becomes a MAP_SHARED mapping of `file` at the same address (the
    /// file is created with the page's current bytes), so the kernel's bit updates land in
    /// the file. `hold_page_faults` drops the page (as `dont_need`) and registers it with
    /// userfaultfd (CONFIG_USERFAULTFD): every access to it then waits, the kernel's fault-in
    /// worker's included, until `release_page_faults` lets them all go (the scenario's end
    /// does too). `map_held_page` puts a zero page back in between without waking anyone: later
    /// accesses find it, the ones waiting go on waiting. Until then no step may read or store a
    /// word, since it would wait too.
    Memory {
        op: MemoryOp,
        #[serde(default)]
        file: Option<String>,
    },
    /// Waits until at least `at_least` accesses (the kernel's fault-in worker's, while the
    /// scenario's own thread touches no word) wait on the words page held by `memory:
    /// hold_page_faults`; fails when `within_ms` passes first.
    PageFaultsHeld {
        #[serde(default = "one")]
        at_least: u32,
        #[serde(default = "ten_seconds")]
        within_ms: u64,
    },
    /// Stores a value into an enable word (to pre-set bits the kernel must clear or keep), as
    /// wide and in the byte order `check_word` reads it.
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
    /// Checks a whole enable word, at once (`within_ms: 0`) or polling until it holds `value`
    /// or the time is up. The value is read in the guest's native byte order and as wide as
    /// the word: an 8-byte word (`size: 8`) is its u64; a 4-byte word is its own u32 as bits
    /// 0..31 and the next 4 bytes' u32 as bits 32..63, so one value holds on little- and
    /// big-endian arches alike.
    /// `or`: other values that also pass (read once `value` is not seen within the time).
    CheckWord {
        word: String,
        value: u64,
        #[serde(default)]
        or: Vec<u64>,
        #[serde(default)]
        within_ms: u64,
    },
    /// Forks: the child runs `steps` with a copy of everything the scenario made so far (fds,
    /// enable words, indexes), then exits 0 if they all passed, 1 otherwise; the parent goes on
    /// at once. `wait` collects it.
    Fork {
        name: String,
        steps: Vec<Step>,
    },
    /// Forks once for each fault-injection point of fork() itself: for n = 1, 2, ... the nth
    /// point the fork reaches fails (the kernel's `fail-nth`, as `fail_nth` arms it). A fork
    /// that fails must fail with ENOMEM; a child that is born runs `steps` with a copy of the
    /// scenario's state (as `fork`'s child) and must pass them (its lines are said only when
    /// it fails). The sweep ends at the first n the fork no longer reaches, which must be at
    /// most `max`. Needs the kernel's fault injection (`--profile faults`), as `fail_nth`.
    FailEachFork {
        steps: Vec<Step>,
        #[serde(default = "default_sweep_max")]
        max: u32,
    },
    /// Runs `steps` once for each fault-injection point of the first step's first call, in
    /// turn: for n = 1, 2, ... that call's nth point fails (as `fail_nth` arms it), and every
    /// step must pass as written (an `expect` such as `ok or ENOMEM` takes either outcome). Ends
    /// at the first n the call no longer reaches, which must be at most `max`. `{iteration}`
    /// in the steps is n (a new event name each time). For calls whose points move between
    /// kernels or boots, where a `fail_nth` with one N would not hold. Needs `--profile faults`.
    FailEach {
        steps: Vec<Step>,
        #[serde(default = "default_each_max")]
        max: u32,
    },
    /// Arms failslab for every task (a kworker too) while `steps` run: the next slab allocation
    /// whose call stack passes through the kernel function `function` (its range by
    /// `/proc/kallsyms`) fails, once. After the steps it waits up to `within_ms` for that
    /// failure to have come (`injected: false`: checks that it did not), then disarms. Needs
    /// `--profile faults` (CONFIG_FAULT_INJECTION_STACKTRACE_FILTER).
    FailIn {
        function: String,
        steps: Vec<Step>,
        #[serde(default = "yes")]
        injected: bool,
        #[serde(default)]
        within_ms: u64,
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
    /// Starts every thread of every group at once and joins them all: each group is `count`
    /// threads running the same `steps`, in which the text `{thread}` stands for the thread's
    /// index in its group (0, 1, ...). The threads share the scenario's descriptors, enable
    /// words and write indexes with each other and with the scenario, as threads of one process
    /// do (not its perf events, eBPF programs or forked children). The step passes when every
    /// thread's steps passed, and skips when one skipped and none failed. No `fork`,
    /// `exec_agent`, `memory` or `credentials` inside: they act on the whole process.
    Threads(Vec<ThreadGroup>),
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
    Repeat {
        count: u32,
        steps: Vec<Step>,
        #[serde(default)]
        for_ms: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        leak_at_most: Option<u32>,
    },
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
    Kmemleak {
        steps: Vec<Step>,
    },
    /// Runs `steps` and reads what the kernel logged meanwhile (`/dev/kmsg`, from the step's
    /// start, or from the oldest record still in the log buffer with `since_boot`): each line
    /// of `expect` must be a whole message of it, and no line of `forbid` may be. A line is a
    /// message's exact text, but that `{any}` stands for any text (a hashed
    /// pointer, an address). The log is read for `within_ms` after the steps: until every
    /// expected line has come when nothing is forbidden, else the whole time (a message from a
    /// work item may come late). The agent's own `ue-agent:` markers are not the kernel's.
    /// The lines said name each expected message found, or the missing one and the messages
    /// that were logged, or the forbidden one that was.
    KernelLog {
        #[serde(default)]
        steps: Vec<Step>,
        #[serde(default)]
        expect: Vec<String>,
        #[serde(default)]
        forbid: Vec<String>,
        #[serde(default)]
        within_ms: u64,
        #[serde(default)]
        since_boot: bool,
    },
    /// Waits until `parties` threads or processes of the scenario have reached the barrier
    /// `name` (this one included), for `within_ms` at most. Threads of `threads` and `fork`ed
    /// children share the barriers (a shared page mapped before the first fork); an
    /// `exec_agent` image has its own. A barrier meets again and again: each `parties`
    /// arrivals release each other, so one in a `repeat` meets once per iteration.
    Barrier {
        name: String,
        parties: u32,
        #[serde(default = "ten_seconds")]
        within_ms: u64,
    },
    /// Pins the calling thread to one CPU (`sched_setaffinity`). On a guest without that CPU
    /// online the scenario is skipped, saying how many CPUs it needs.
    Pin {
        cpu: u32,
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
    /// `trace_read` does. `ip_in`: each sample's instruction pointer (PERF_SAMPLE_IP, which
    /// a tracepoint takes from the registers its probe fetched) must lie in one of these
    /// kernel functions, by `/proc/kallsyms` (a compiler's `.isra.0`-style suffix ignored).
    PerfRead {
        name: String,
        #[serde(default)]
        samples: Option<Vec<Vec<Value>>>,
        #[serde(default)]
        records: Option<Vec<Record>>,
        #[serde(default)]
        ip_in: Option<Vec<String>>,
    },
    /// stat(2) of a path (links followed), checking what is given: `mode`, the permission
    /// bits in octal as text (`"0640"`), and the owner's `uid` and `gid`. `expect` judges the
    /// stat call itself (`ENOENT` for a path that must not exist).
    Stat {
        path: String,
        #[serde(default)]
        mode: Option<String>,
        #[serde(default)]
        uid: Option<u32>,
        #[serde(default)]
        gid: Option<u32>,
        #[serde(default)]
        expect: Expect,
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
    /// `records`, in order and in number, or, with `every`, each one with that record (however
    /// many there are, at most `at_most`). Records of other events are dropped; lost events fail.
    TraceRead {
        event: String,
        #[serde(default)]
        instance: Option<String>,
        #[serde(default)]
        records: Option<Vec<Record>>,
        #[serde(default)]
        every: Option<Record>,
        #[serde(default)]
        at_most: Option<u64>,
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

/// Threads of a `threads` step that run the same steps.
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ThreadGroup {
    #[serde(default = "one")]
    pub count: u32,
    pub steps: Vec<Step>,
}

/// The longest name a barrier may have (in bytes).
pub const MAX_BARRIER_NAME: usize = 51;

/// The text that stands for a thread's index in its group in a `threads` step's steps.
pub const THREAD_INDEX: &str = "{thread}";
/// The text that stands for the iteration's number in a `repeat` step's steps.
pub const ITERATION: &str = "{iteration}";
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

/// A `stat` step's `mode`: permission bits as 3 or 4 octal digits (`"640"`, `"0640"`), or
/// `None` for any other text. The host checks suites with it, the agent reads the value.
pub fn octal_mode(text: &str) -> Option<u32> {
    let digits = (3..=4).contains(&text.len()) && text.bytes().all(|b| (b'0'..=b'7').contains(&b));
    digits.then(|| u32::from_str_radix(text, 8).expect("octal digits"))
}

fn data_fd() -> String {
    DATA_FD.to_string()
}

fn four() -> u8 {
    4
}

fn yes() -> bool {
    true
}

fn ten_seconds() -> u64 {
    10_000
}

fn one() -> u32 {
    1
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
    Secret,
    ShareFile,
    HoldPageFaults,
    MapHeldPage,
    ReleasePageFaults,
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
    /// they are zero); zeros follow them up to `size` (at most 64 KiB are sent).
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
    /// Bytes sent after the 16-byte struct (the kernel accepts a larger `size` only when
    /// they are zero); zeros follow them up to `size` (at most 64 KiB are sent).
    #[serde(default)]
    pub tail: Vec<u8>,
    /// Pass this pointer as the ioctl argument instead of the struct.
    #[serde(default)]
    pub arg: Option<Addr>,
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

/// The most points a `fail_each` tries unless it says otherwise.
fn default_each_max() -> u32 {
    200
}

/// The most forks a `fail_each_fork` makes unless it says otherwise.
fn default_sweep_max() -> u32 {
    2000
}

impl Step {
    /// The step kind's name when the step acts on the whole process (its memory map, its
    /// credentials, a fork or an exec of it), which a thread of `threads` must not do: the
    /// suites refuse it and the agent fails it.
    pub fn whole_process_kind(&self) -> Option<&'static str> {
        match self {
            Step::Fork { .. } => Some("fork"),
            Step::FailEachFork { .. } => Some("fail_each_fork"),
            Step::ExecAgent { .. } => Some("exec_agent"),
            Step::Memory { .. } => Some("memory"),
            Step::Credentials { .. } => Some("credentials"),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mode_is_three_or_four_octal_digits() {
        assert_eq!(
            (octal_mode("0640"), octal_mode("640"), octal_mode("7777")),
            (Some(0o640), Some(0o640), Some(0o7777))
        );
        for bad in ["08", "0689", "64", "00640", "", "rw-"] {
            assert_eq!(octal_mode(bad), None, "{bad}");
        }
    }

    #[test]
    fn register_steps_take_defaults() {
        let step: Step = serde_json::from_str(r#"{"register":{"format":"ev u32 a","word":"w"}}"#).unwrap();
        let Step::Register { fd, size, bit, expect, raw, .. } = step else { panic!() };
        assert_eq!((fd.as_str(), size, bit, expect), ("data", 4, 0, Expect::Ok));
        assert_eq!(raw, RawReg::default());
        let bad = serde_json::from_str::<Step>(r#"{"register":{"format":"x","wrod":"w"}}"#);
        assert!(bad.unwrap_err().to_string().contains("wrod"));
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
            version: crate::PROTOCOL_VERSION,
            label: "x86_64".into(),
            scenarios: vec![Scenario {
                name: "fault/warn".into(),
                deadline_ms: 1000,
                steps: vec![
                    Step::Lkdtm { point: "WARNING".into() },
                    Step::Sleep { ms: 1 },
                    Step::Mkdir { path: "/x".into(), expect: Expect::Value(0) },
                ],
            }],
            share: None,
            artifacts_virtiofs: false,
            shell: false,
            gcov: None,
            stop_at_first_failure: false,
            expected_failures: vec![],
        };
        let json = serde_json::to_string(&plan).unwrap();
        assert!(!json.contains("gcov"), "a normal plan's JSON is as before coverage: {json}");
        assert!(json.contains(r#"{"lkdtm":{"point":"WARNING"}}"#), "{json}");
        assert!(json.contains(r#"{"mkdir":{"path":"/x","expect":"0"}}"#), "an expectation is its text: {json}");
        assert_eq!(serde_json::from_str::<Plan>(&json).unwrap(), plan);
    }
}
