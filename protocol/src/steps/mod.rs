//! The step vocabulary: the `Step` enum, one variant per step kind, whose arguments are the
//! types of one file per area (`files`, `user_events`, `words`, `nesting`, `faults`, `sync`,
//! `perf`, `bpf`, `trace`, `measure`, `program`), each with the docs the schema and the suites'
//! editors show. [`Step::area`] is the one list of which area a step kind is in: the agent's
//! dispatcher and the suites' checker both go by it.

use serde::{Deserialize, Serialize};

pub mod bpf;
pub mod faults;
pub mod files;
pub mod measure;
pub mod nesting;
pub mod perf;
pub mod program;
pub mod sync;
pub mod trace;
pub mod user_events;
pub mod words;

pub use bpf::*;
pub use faults::*;
pub use files::*;
pub use measure::*;
pub use nesting::*;
pub use perf::*;
pub use program::*;
pub use sync::*;
pub use trace::*;
pub use user_events::*;
pub use words::*;

/// A step of a scenario. Each step that fails ends the scenario as failed. Externally tagged,
/// so a step reads in YAML as `- register: { format: "ev u32 a", word: w, expect: ok }`.
/// Names (`fd`, `word`, `index_as`) refer to objects earlier steps of the scenario made.
/// Each variant's arguments are a type of its area's file, which says what the step does.
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Step {
    // program.rs
    Exec(Exec),
    Lkdtm(Lkdtm),
    Sleep(Sleep),
    // files.rs
    WriteFile(WriteFile),
    ReadFile(ReadFile),
    Stat(Stat),
    Mkdir(Mkdir),
    Rmdir(Rmdir),
    // user_events.rs
    Open(Open),
    Close(Close),
    Dup(Dup),
    Dup2(Dup2),
    Register(Register),
    Unregister(Unregister),
    Delete(Delete),
    Ioctl(Ioctl),
    RegisterUntil(RegisterUntil),
    Write(Write),
    Fuzz(Fuzz),
    // words.rs
    SetWord(SetWord),
    CheckBit(CheckBit),
    CheckWord(CheckWord),
    Memory(Memory),
    PageFaultsHeld(PageFaultsHeld),
    // nesting.rs
    Fork(Fork),
    CloneVm(CloneVm),
    Wait(Wait),
    ExecAgent(ExecAgent),
    Thread(Thread),
    /// Starts every thread of every group at once and joins them all: each group is `count`
    /// threads running the same `steps`, in which the text `{thread}` stands for the thread's
    /// index in its group (0, 1, ...). The threads share the scenario's descriptors, enable
    /// words and write indexes with each other and with the scenario, as threads of one process
    /// do (not its perf events, eBPF programs or forked children). The step passes when every
    /// thread's steps passed, and skips when one skipped and none failed. No `fork`, `clone_vm`,
    /// `fail_each_fork`, `exec_agent`, `memory` or `credentials` inside: they act on the whole
    /// process.
    Threads(Vec<ThreadGroup>),
    Repeat(Repeat),
    Kmemleak(Kmemleak),
    KernelLog(KernelLog),
    Requires(Requires),
    // faults.rs
    FailNth(FailNth),
    FailEach(FailEach),
    FailEachFork(FailEachFork),
    FailIn(FailIn),
    // sync.rs
    Barrier(Barrier),
    Pin(Pin),
    // perf.rs
    Credentials(Credentials),
    PerfOpen(PerfOpen),
    PerfControl(PerfControl),
    PerfFilter(PerfFilter),
    PerfRead(PerfRead),
    // bpf.rs
    BpfProg(BpfProg),
    BpfAttach(BpfAttach),
    BpfRawTracepoint(BpfRawTracepoint),
    BpfCount(BpfCount),
    // trace.rs
    TraceRead(TraceRead),
    // measure.rs
    Measure(Measure),
}

/// The area of a step kind: the file of this folder its arguments are in, the agent's module
/// that runs it, the checker's function that checks it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Area {
    Program,
    Files,
    UserEvents,
    Words,
    Nesting,
    Faults,
    Sync,
    Perf,
    Bpf,
    Trace,
    Measure,
}

/// The one list of the steps that run steps, for [`Step::nested`] and [`Step::nested_mut`]
/// (`iter` or `iter_mut` over a `threads` step's groups; the bindings borrow as `$step` does).
macro_rules! nested_lists {
    ($step:expr, $iter:ident) => {
        match $step {
            Step::Fork(Fork { steps, .. })
            | Step::CloneVm(CloneVm { steps, .. })
            | Step::FailEachFork(FailEachFork { steps, .. })
            | Step::FailEach(FailEach { steps, .. })
            | Step::FailIn(FailIn { steps, .. })
            | Step::ExecAgent(ExecAgent { steps, .. })
            | Step::Thread(Thread { steps })
            | Step::Repeat(Repeat { steps, .. })
            | Step::Kmemleak(Kmemleak { steps })
            | Step::KernelLog(KernelLog { steps, .. })
            | Step::Requires(Requires { steps, .. }) => vec![steps],
            Step::Threads(groups) => groups.$iter().map(|ThreadGroup { steps, .. }| steps).collect(),
            _ => vec![],
        }
    };
}

impl Step {
    /// The area this step kind is in.
    pub fn area(&self) -> Area {
        match self {
            Step::Exec(_) | Step::Lkdtm(_) | Step::Sleep(_) => Area::Program,
            Step::WriteFile(_) | Step::ReadFile(_) | Step::Stat(_) | Step::Mkdir(_) | Step::Rmdir(_) => Area::Files,
            Step::Open(_)
            | Step::Close(_)
            | Step::Dup(_)
            | Step::Dup2(_)
            | Step::Register(_)
            | Step::Unregister(_)
            | Step::Delete(_)
            | Step::Ioctl(_)
            | Step::RegisterUntil(_)
            | Step::Write(_)
            | Step::Fuzz(_) => Area::UserEvents,
            Step::SetWord(_) | Step::CheckBit(_) | Step::CheckWord(_) | Step::Memory(_) | Step::PageFaultsHeld(_) => {
                Area::Words
            }
            Step::Fork(_)
            | Step::CloneVm(_)
            | Step::Wait(_)
            | Step::ExecAgent(_)
            | Step::Thread(_)
            | Step::Threads(_)
            | Step::Repeat(_)
            | Step::Kmemleak(_)
            | Step::KernelLog(_)
            | Step::Requires(_) => Area::Nesting,
            Step::FailNth(_) | Step::FailEach(_) | Step::FailEachFork(_) | Step::FailIn(_) => Area::Faults,
            Step::Barrier(_) | Step::Pin(_) => Area::Sync,
            Step::Credentials(_)
            | Step::PerfOpen(_)
            | Step::PerfControl(_)
            | Step::PerfFilter(_)
            | Step::PerfRead(_) => Area::Perf,
            Step::BpfProg(_) | Step::BpfAttach(_) | Step::BpfRawTracepoint(_) | Step::BpfCount(_) => Area::Bpf,
            Step::TraceRead(_) => Area::Trace,
            Step::Measure(_) => Area::Measure,
        }
    }

    /// The step kind's name, as the YAML and the JSON plan name it (`write_file`).
    pub fn kind(&self) -> String {
        match serde_json::to_value(self) {
            Ok(serde_json::Value::Object(m)) => m.keys().next().cloned().unwrap_or_default(),
            Ok(serde_json::Value::String(s)) => s,
            _ => String::new(),
        }
    }

    /// The lists of steps this step runs (none for a leaf step), to read a plan's steps at any
    /// depth.
    pub fn nested(&self) -> Vec<&Vec<Step>> {
        nested_lists!(self, iter)
    }

    /// The lists of steps this step runs (none for a leaf step), to walk a plan's steps at any
    /// depth.
    pub fn nested_mut(&mut self) -> Vec<&mut Vec<Step>> {
        nested_lists!(self, iter_mut)
    }

    /// The step kind's name when the step acts on the whole process (its memory map, its
    /// credentials, a fork or an exec of it), which a thread of `threads` must not do: the
    /// suites refuse it and the agent fails it.
    pub fn whole_process_kind(&self) -> Option<&'static str> {
        match self {
            Step::Fork(_) => Some("fork"),
            Step::CloneVm(_) => Some("clone_vm"),
            Step::FailEachFork(_) => Some("fail_each_fork"),
            Step::ExecAgent(_) => Some("exec_agent"),
            Step::Memory(_) => Some("memory"),
            Step::Credentials(_) => Some("credentials"),
            _ => None,
        }
    }
}

/// The defaults of the steps' fields that are not their type's.
mod defaults {
    pub(super) fn data_fd() -> String {
        super::DATA_FD.to_string()
    }

    pub(super) fn four() -> u8 {
        4
    }

    pub(super) fn yes() -> bool {
        true
    }

    pub(super) fn ten_seconds() -> u64 {
        10_000
    }

    pub(super) fn one() -> u32 {
        1
    }

    pub(super) fn five() -> u32 {
        5
    }

    pub(super) fn one_hundred() -> u64 {
        100
    }

    /// The most points a `fail_each` tries unless it says otherwise.
    pub(super) fn default_each_max() -> u32 {
        200
    }

    /// The most forks a `fail_each_fork` makes unless it says otherwise.
    pub(super) fn default_sweep_max() -> u32 {
        2000
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expect::Expect;

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
        let Step::Register(Register { fd, size, bit, expect, raw, .. }) = step else { panic!() };
        assert_eq!((fd.as_str(), size, bit, expect), ("data", 4, 0, Expect::Ok));
        assert_eq!(raw, RawReg::default());
        let bad = serde_json::from_str::<Step>(r#"{"register":{"format":"x","wrod":"w"}}"#);
        assert!(bad.unwrap_err().to_string().contains("wrod"));
    }

    #[test]
    fn an_ioctl_takes_a_number_or_a_name_and_an_argument() {
        let step: Step = serde_json::from_str(r#"{"ioctl":{"cmd":10851}}"#).unwrap();
        let Step::Ioctl(Ioctl { fd, cmd, arg, expect }) = step else { panic!() };
        assert_eq!((fd.as_str(), cmd, arg, expect), ("data", IoctlCmd::Number(10851), IoctlArg::Value(0), Expect::Ok));
        let step: Step =
            serde_json::from_str(r#"{"ioctl":{"fd":"s","cmd":"DIAG_IOCSDEL","arg":"null_pointer","expect":"EFAULT"}}"#)
                .unwrap();
        let Step::Ioctl(Ioctl { cmd, arg, .. }) = step else { panic!() };
        assert_eq!((cmd, arg), (IoctlCmd::Named(DiagCmd::Del), IoctlArg::NullPointer));
        let step: Step = serde_json::from_str(r#"{"ioctl":{"cmd":1,"arg":{"bytes":[1,2]}}}"#).unwrap();
        assert!(matches!(step, Step::Ioctl(Ioctl { arg: IoctlArg::Bytes(b), .. }) if b == [1, 2]));
        assert!(serde_json::from_str::<Step>(r#"{"ioctl":{"cmd":"DIAG_IOCSNOPE"}}"#).is_err());
    }

    #[test]
    fn a_clone_vm_child_runs_steps_and_acts_on_the_whole_process() {
        let mut step: Step = serde_json::from_str(r#"{"clone_vm":{"steps":[{"sleep":{"ms":1}}]}}"#).unwrap();
        assert_eq!((step.area(), step.whole_process_kind()), (Area::Nesting, Some("clone_vm")));
        assert_eq!(step.nested_mut().len(), 1);
        let Step::CloneVm(CloneVm { within_ms, .. }) = step else { panic!() };
        assert_eq!(within_ms, 10_000);
    }

    #[test]
    fn measure_steps_take_defaults() {
        let step: Step = serde_json::from_str(r#"{"measure":{"name":"w","what":"write"}}"#).unwrap();
        let Step::Measure(Measure { what, payload, consumers, vectored, enablers, reps, duration_ms, .. }) = step
        else {
            panic!()
        };
        assert_eq!((what, payload, consumers, vectored, enablers), (MeasureKind::Write, 0, Consumers::None, false, 0));
        assert_eq!((reps, duration_ms), (5, 100));
        let step = serde_json::from_str::<Step>(r#"{"measure":{"name":"w","what":"write","consumers":"ftrace_perf"}}"#);
        assert!(matches!(step, Ok(Step::Measure(Measure { consumers: Consumers::FtracePerf, .. }))));
    }
}
