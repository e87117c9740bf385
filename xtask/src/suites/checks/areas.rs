//! The checks of each area's steps beyond their types (`Checker::step` sends each step here by
//! its area): user_events (formats, words, indexes), files (`stat`'s mode, `read_file`'s hex and
//! kept contents), the records `perf_read` and `trace_read` compare, `measure`, the steps that
//! run steps, `barrier` and `pin`.

use protocol::steps::MAX_IOCTL_BYTES;
use protocol::steps::{
    Barrier, CheckBit, CloneVm, Ioctl, IoctlArg, IoctlCmd, KernelLog, Kmemleak, Measure, Memory, PerfRead, Pin,
    ReadFile, Register, RegisterUntil, Repeat, Stat, TraceRead, Write,
};
use protocol::{Step, Value};

use super::tree::{node_at, non_string, under, Seg};
use super::{Checker, Context, Scope};
use Seg::{Index, Key, Only};

/// The most threads a `threads` step starts.
const MAX_THREADS: u64 = 64;

/// One past the highest CPU `pin` takes (`CPU_SETSIZE`).
const MAX_CPU: u32 = 1024;

impl Checker<'_> {
    /// The user_events steps: a format that YAML did not read as text, names that later steps
    /// refer to, `register_until`'s count, `memory`'s file, a bit that exists, a write's index
    /// and hex.
    pub(super) fn user_events_step<'s>(
        &mut self,
        base: &[Seg<'static>],
        step: &'s Step,
        scope: &mut Scope<'s>,
        context: Context,
    ) {
        let at = |rest: &[Seg<'static>]| under(base, rest);
        match step {
            Step::Register(Register { index_as, .. }) => {
                if let Some(kind) = node_at(self.tree, &at(&[Only, Key("format")])).and_then(non_string) {
                    self.error(
                        &at(&[Only, Key("format")]),
                        format!(
                            "the format is a YAML {kind}, not text: quote it if the kernel should see those characters"
                        ),
                    );
                }
                if let Some(name) = index_as {
                    scope.indexes.insert(name);
                }
            }
            Step::RegisterUntil(RegisterUntil { hold_until_reboot: true, .. }) if !context.isolated => {
                self.error(
                    &at(&[Only, Key("hold_until_reboot")]),
                    "only an `isolated: true` scenario may leave its events to the reboot",
                );
            }
            Step::RegisterUntil(RegisterUntil { format, expect, .. }) => {
                if !format.contains("{i}") {
                    self.error(&at(&[Only, Key("format")]), "needs `{i}` where the count goes, so each event is new");
                }
                if !matches!(expect, protocol::Expect::Errno(_)) {
                    self.error(&at(&[Only, Key("expect")]), "states the errno that ends the registrations");
                }
            }
            Step::Memory(Memory { op, file }) if (*op == protocol::MemoryOp::ShareFile) != file.is_some() => {
                self.error(&at(&[Only]), "`file` goes with `op: share_file`, and `share_file` needs a `file`");
            }
            Step::Ioctl(Ioctl { cmd, arg, .. }) => {
                if let IoctlCmd::Number(n) = cmd {
                    if *n > u64::from(u32::MAX) {
                        self.error(
                            &at(&[Only, Key("cmd")]),
                            format!("cmd {n:#x}: the kernel takes a 32-bit command, and would cut this one"),
                        );
                    }
                }
                if let IoctlArg::Bytes(bytes) = arg {
                    if bytes.is_empty() || bytes.len() > MAX_IOCTL_BYTES {
                        self.error(
                            &at(&[Only, Key("arg"), Key("bytes")]),
                            format!(
                                "{} bytes: a buffer holds 1 to {MAX_IOCTL_BYTES} (for no buffer, give `value` or an address)",
                                bytes.len()
                            ),
                        );
                    }
                }
            }
            Step::CheckBit(CheckBit { bit, .. }) if *bit >= 64 => {
                self.error(&at(&[Only, Key("bit")]), format!("an enable word has 64 bits: there is no bit {bit}"));
            }
            Step::Write(Write { index, index_value, fields, .. }) => {
                match (index, index_value) {
                    (None, None) => self
                        .error(&at(&[]), "a write needs `index` (a name from an earlier `index_as`) or `index_value`"),
                    (Some(_), Some(_)) => {
                        self.error(&at(&[Only, Key("index_value")]), "a write takes `index` or `index_value`, not both")
                    }
                    (Some(name), None) if !scope.indexes.contains(name.as_str()) => self.error(
                        &at(&[Only, Key("index")]),
                        format!("no earlier `register` step has `index_as: {name}`"),
                    ),
                    _ => {}
                }
                for (k, field) in fields.iter().enumerate() {
                    if let (Value::Bytes(_), Err(e)) = (field, field.encode()) {
                        self.error(
                            &at(&[Only, Key("fields"), Index(k), Key("bytes")]),
                            format!("bad hex in `bytes`: {e}"),
                        );
                    }
                }
            }
            _ => {}
        }
    }

    /// The files steps: `write_file`'s `data` or `bytes`; a `stat`'s mode; `read_file`'s hex,
    /// what it compares with and the name it keeps the contents as.
    pub(super) fn files_step<'s>(&mut self, base: &[Seg<'static>], step: &'s Step, scope: &mut Scope<'s>) {
        if let Step::WriteFile(w) = step {
            let has_data = node_at(self.tree, &under(base, &[Only, Key("data")])).is_some();
            match (has_data, &w.bytes) {
                (true, Some(_)) => self.error(
                    &under(base, &[Only, Key("bytes")]),
                    "write_file takes `data` (text) or `bytes` (raw), not both",
                ),
                (false, None) => self.error(&under(base, &[Only]), "write_file needs `data` (text) or `bytes` (raw)"),
                _ => {}
            }
        }
        if let Step::Stat(Stat { mode: Some(mode), .. }) = step {
            if protocol::octal_mode(mode).is_none() {
                self.error(
                    &under(base, &[Only, Key("mode")]),
                    format!("mode {mode:?}: permission bits in octal, 3 or 4 digits 0-7 (\"0640\")"),
                );
            }
        }
        let Step::ReadFile(ReadFile { head_hex, equals, keep_as, equals_kept, keep_match, .. }) = step else { return };
        if let Some(template) = keep_match {
            if keep_as.is_none() {
                self.error(
                    &under(base, &[Only, Key("keep_match")]),
                    "`keep_match` says what `keep_as` keeps: add the `keep_as`",
                );
            } else if template.matches(protocol::steps::VALUE).count() != 1 {
                self.error(
                    &under(base, &[Only, Key("keep_match")]),
                    format!("`keep_match` {template:?} needs `{{value}}` once, where the text to keep is"),
                );
            }
        }
        let at = |rest: &[Seg<'static>]| under(base, rest);
        if let Some(Err(e)) = head_hex.as_deref().map(protocol::decode_hex) {
            self.error(&at(&[Only, Key("head_hex")]), format!("bad hex: {e}"));
        }
        match equals_kept {
            Some(_) if equals.is_some() => {
                self.error(&at(&[Only, Key("equals_kept")]), "read_file takes `equals` or `equals_kept`, not both")
            }
            Some(name) if !scope.kept.contains(name.as_str()) => self
                .error(&at(&[Only, Key("equals_kept")]), format!("no earlier `read_file` step has `keep_as: {name}`")),
            _ => {}
        }
        if let Some(name) = keep_as {
            scope.kept.insert(name);
        }
    }

    /// `perf_read` and `trace_read`: what the records are given as, and their hex.
    pub(super) fn record_reads_step(&mut self, base: &[Seg<'static>], step: &Step) {
        let at = |rest: &[Seg<'static>]| under(base, rest);
        match step {
            Step::PerfRead(PerfRead { samples, records, .. }) => {
                if samples.is_some() == records.is_some() {
                    self.error(
                        &at(&[Only]),
                        "perf_read takes `samples` (raw bytes) or `records` (decoded fields): one of them",
                    );
                }
                self.records(&at(&[Only, Key("records")]), records.as_deref().unwrap_or_default());
            }
            Step::TraceRead(TraceRead { event, instance, records, every, at_most }) => {
                let parts: Vec<&str> = event.split('/').collect();
                if parts.len() != 2 || parts.iter().any(|p| p.is_empty()) {
                    self.error(
                        &at(&[Only, Key("event")]),
                        format!("`{event}` is not `SYSTEM/NAME` (`user_events/NAME`)"),
                    );
                }
                if let Some(name) = instance.as_deref().filter(|n| n.is_empty() || n.contains('/') || *n == "..") {
                    self.error(&at(&[Only, Key("instance")]), format!("`{name}` is not an instance name"));
                }
                if records.is_some() == every.is_some() {
                    self.error(
                        &at(&[Only]),
                        "trace_read takes `records` (each record, in order) or `every` (what each record is): one of them",
                    );
                }
                if at_most.is_some() && every.is_none() {
                    self.error(
                        &at(&[Only, Key("at_most")]),
                        "`at_most` bounds the records of `every`; `records` counts them",
                    );
                }
                self.records(&at(&[Only, Key("records")]), records.as_deref().unwrap_or_default());
                if let Some(record) = every {
                    self.records(&at(&[Only]), std::slice::from_ref(record));
                }
            }
            _ => {}
        }
    }

    /// `measure`: enough repetitions for a median.
    pub(super) fn measure_step(&mut self, base: &[Seg<'static>], step: &Step) {
        let Step::Measure(Measure { reps, .. }) = step else { return };
        if *reps < protocol::MIN_REPS {
            self.error(
                &under(base, &[Only, Key("reps")]),
                format!("a figure is a median over at least {} repetitions, not {reps}", protocol::MIN_REPS),
            );
        }
    }

    /// The steps that run steps: `threads`' groups, `repeat`'s count, what `kernel_log` and
    /// `kmemleak` watch.
    pub(super) fn nesting_step(&mut self, base: &[Seg<'static>], step: &Step) {
        let at = |rest: &[Seg<'static>]| under(base, rest);
        match step {
            Step::Requires(r) => {
                if r.unmet.is_some() {
                    self.error(
                        &at(&[Only, Key("unmet")]),
                        "`unmet` is the host's: why a kernel does not meet the step",
                    );
                }
                if r.kernel.is_none() && r.config.is_empty() {
                    self.error(&at(&[Only]), "a `requires` step needs a `kernel` range or `config` options");
                }
                if r.steps.is_empty() {
                    self.error(&at(&[Only, Key("steps")]), "a `requires` step needs at least one step");
                }
                let need = crate::suites::model::Requires { kernel: r.kernel.clone(), config: r.config.clone() };
                self.requires(base, &need);
            }
            Step::Threads(groups) => {
                if groups.is_empty() {
                    self.error(&at(&[Only]), "`threads` needs at least one group (`- { count: N, steps: [...] }`)");
                }
                let total: u64 = groups.iter().map(|g| u64::from(g.count)).sum();
                if total > MAX_THREADS {
                    self.error(&at(&[Only]), format!("{total} threads: at most {MAX_THREADS} run at once"));
                }
                for (g, group) in groups.iter().enumerate() {
                    if group.count == 0 {
                        self.error(&at(&[Only, Index(g), Key("count")]), "a group needs at least one thread");
                    }
                    if group.steps.is_empty() {
                        self.error(&at(&[Only, Index(g), Key("steps")]), "a group's threads need at least one step");
                    }
                }
            }
            Step::Repeat(Repeat { count, steps, for_ms, leak_at_most }) => {
                if *count == 0 {
                    self.error(&at(&[Only, Key("count")]), "`repeat` needs a count of at least 1");
                }
                if leak_at_most.is_some() && *count < 2 {
                    self.error(
                        &at(&[Only, Key("leak_at_most")]),
                        "`leak_at_most` needs a count of at least 2 (the first iteration is a warm-up, not counted)",
                    );
                }
                if leak_at_most.is_some() && *for_ms > 0 {
                    self.error(
                        &at(&[Only, Key("leak_at_most")]),
                        "`leak_at_most` and `for_ms` do not go together: the allowance is per iteration, so the count must be known",
                    );
                }
                if steps.is_empty() {
                    self.error(&at(&[Only, Key("steps")]), "`repeat` needs at least one step");
                }
            }
            Step::KernelLog(KernelLog { expect, forbid, .. }) if expect.is_empty() && forbid.is_empty() => {
                self.error(&at(&[Only]), "`kernel_log` needs a line to `expect` or to `forbid`");
            }
            Step::KernelLog(KernelLog { expect, forbid, within_ms, since_boot, .. })
                if !forbid.is_empty() && *within_ms == 0 && expect.is_empty() && !since_boot =>
            {
                self.error(
                    &at(&[Only, Key("within_ms")]),
                    "`kernel_log` with only `forbid` needs `within_ms`: how long a late message is waited for",
                );
            }
            Step::CloneVm(CloneVm { steps, .. }) if steps.is_empty() => {
                self.error(&at(&[Only, Key("steps")]), "`clone_vm` needs at least one step");
            }
            Step::Kmemleak(Kmemleak { steps }) if steps.is_empty() => {
                self.error(&at(&[Only, Key("steps")]), "`kmemleak` needs at least one step to watch");
            }
            _ => {}
        }
    }

    /// `barrier` and `pin`: a barrier's name and parties, a CPU that can exist.
    pub(super) fn sync_step(&mut self, base: &[Seg<'static>], step: &Step) {
        let at = |rest: &[Seg<'static>]| under(base, rest);
        match step {
            Step::Barrier(Barrier { name, parties, .. }) => {
                if name.is_empty() || name.len() > protocol::MAX_BARRIER_NAME {
                    self.error(
                        &at(&[Only, Key("name")]),
                        format!("a barrier's name has 1 to {} bytes", protocol::MAX_BARRIER_NAME),
                    );
                }
                if *parties == 0 {
                    self.error(&at(&[Only, Key("parties")]), "a barrier needs at least one party");
                }
            }
            Step::Pin(Pin { cpu }) if *cpu >= MAX_CPU => {
                self.error(
                    &at(&[Only, Key("cpu")]),
                    format!("CPU {cpu}: a thread can be pinned to CPUs 0 to {}", MAX_CPU - 1),
                );
            }
            _ => {}
        }
    }

    /// Checks the `bytes` of expected records (`trace_read`, `perf_read`).
    pub(super) fn records(&mut self, path: &[Seg], records: &[protocol::Record]) {
        for (k, record) in records.iter().enumerate() {
            for (name, value) in record {
                if let protocol::FieldValue::Bytes { bytes } = value {
                    if let Err(e) = protocol::decode_hex(bytes) {
                        let mut at = path.to_vec();
                        at.extend([Index(k), Key(name), Key("bytes")]);
                        self.error(&at, format!("bad hex in `bytes`: {e}"));
                    }
                }
            }
        }
    }
}
