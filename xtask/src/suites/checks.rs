//! The checks that run on a suite after it deserialized: names, catalogue ids, `requires`,
//! references between steps, hex, misused steps. Each error is placed with a tree of spanned
//! YAML nodes, parsed from the same text, that gives the position of every key and value.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::Path;

use protocol::steps::{
    Barrier, CheckBit, Close, Delete, Dup, ExecAgent, FailEach, FailEachFork, FailIn, FailNth, Fork, KernelLog,
    Kmemleak, Measure, Memory, Open, PerfRead, Pin, ReadFile, Register, RegisterUntil, Repeat, Stat, Thread, TraceRead,
    Unregister, Write,
};
use protocol::{Area, Step, Value};
use serde::de::{Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_saphyr::{Location, Spanned};

use super::diagnostics::{self, Diagnostic, Errors};
use super::model::Suite;
use super::requires::{ConfigNeed, KernelRange};

// ---------------------------------------------------------------------------------------------
// The spanned tree: positions for the checks after deserializing

/// Any YAML node, with the position of every key and value.
#[derive(Debug)]
enum Node {
    Null,
    Bool,
    Int,
    Float,
    Str(String),
    Seq(Vec<Spanned<Node>>),
    Map(Vec<(Spanned<Node>, Spanned<Node>)>),
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Any;
        impl<'de> Visitor<'de> for Any {
            type Value = Node;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any YAML node")
            }
            fn visit_unit<E>(self) -> Result<Node, E> {
                Ok(Node::Null)
            }
            fn visit_none<E>(self) -> Result<Node, E> {
                Ok(Node::Null)
            }
            fn visit_bool<E>(self, _: bool) -> Result<Node, E> {
                Ok(Node::Bool)
            }
            fn visit_i64<E>(self, _: i64) -> Result<Node, E> {
                Ok(Node::Int)
            }
            fn visit_u64<E>(self, _: u64) -> Result<Node, E> {
                Ok(Node::Int)
            }
            fn visit_i128<E>(self, _: i128) -> Result<Node, E> {
                Ok(Node::Int)
            }
            fn visit_u128<E>(self, _: u128) -> Result<Node, E> {
                Ok(Node::Int)
            }
            fn visit_f64<E>(self, _: f64) -> Result<Node, E> {
                Ok(Node::Float)
            }
            fn visit_str<E>(self, v: &str) -> Result<Node, E> {
                Ok(Node::Str(v.to_string()))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Node, A::Error> {
                let mut out = Vec::new();
                while let Some(item) = seq.next_element()? {
                    out.push(item);
                }
                Ok(Node::Seq(out))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Node, A::Error> {
                let mut out = Vec::new();
                while let Some(key) = map.next_key()? {
                    out.push((key, map.next_value()?));
                }
                Ok(Node::Map(out))
            }
        }
        d.deserialize_any(Any)
    }
}

/// A step of a path into the tree.
#[derive(Debug, Clone, Copy)]
enum Seg<'a> {
    Key(&'a str),
    Index(usize),
    /// The value of a map's first entry: a step's fields under its kind (`register:`).
    Only,
}

use Seg::{Index, Key, Only};

/// Where a path leads: the deepest node that exists along it (a whole-scenario position beats
/// none when an alias or merge hides the exact one).
fn locate(tree: &Spanned<Node>, path: &[Seg]) -> Location {
    let mut here = tree;
    for seg in path {
        let next = match (seg, &here.value) {
            (Key(k), Node::Map(entries)) => {
                entries.iter().find(|(key, _)| matches!(&key.value, Node::Str(s) if s == k)).map(|(_, v)| v)
            }
            (Index(i), Node::Seq(items)) => items.get(*i),
            (Only, Node::Map(entries)) => entries.first().map(|(_, v)| v),
            _ => None,
        };
        match next {
            Some(n) => here = n,
            None => break,
        }
    }
    here.referenced
}

/// The path `rest` under `base`: a field of a step, from the step's own path.
fn under(base: &[Seg<'static>], rest: &[Seg<'static>]) -> Vec<Seg<'static>> {
    let mut p = base.to_vec();
    p.extend_from_slice(rest);
    p
}

fn node_at<'t>(tree: &'t Spanned<Node>, path: &[Seg]) -> Option<&'t Node> {
    let mut here = tree;
    for seg in path {
        here = match (seg, &here.value) {
            (Key(k), Node::Map(entries)) => {
                &entries.iter().find(|(key, _)| matches!(&key.value, Node::Str(s) if s == k))?.1
            }
            (Index(i), Node::Seq(items)) => items.get(*i)?,
            (Only, Node::Map(entries)) => &entries.first()?.1,
            _ => return None,
        };
    }
    Some(&here.value)
}

/// Runs every check on a suite that deserialized from `text`; every error found, in position order.
pub(super) fn check(file: &str, text: &str, suite: &Suite) -> Result<(), Errors> {
    let tree: Spanned<Node> = serde_saphyr::from_str_with_options(text, diagnostics::options())
        .map_err(|e| Errors(vec![diagnostics::from_serde(file, text, &e)]))?;
    let mut check = Checker { file, text, tree: &tree, out: Vec::new() };
    check.suite(suite);
    let mut out = check.out;
    if out.is_empty() {
        Ok(())
    } else {
        out.sort_by_key(|d| (d.line, d.column));
        Err(Errors(out))
    }
}

struct Checker<'a> {
    file: &'a str,
    text: &'a str,
    tree: &'a Spanned<Node>,
    out: Vec<Diagnostic>,
}

impl Checker<'_> {
    fn error(&mut self, path: &[Seg], message: impl Into<String>) {
        let loc = locate(self.tree, path);
        self.out.push(Diagnostic::at(self.file, self.text, loc.line() as usize, loc.column() as usize, message));
    }

    fn suite(&mut self, suite: &Suite) {
        let stem = Path::new(self.file).file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        if suite.suite != stem {
            self.error(
                &[Key("suite")],
                format!("the suite is named `{}` but its file is `{stem}`: they must be the same", suite.suite),
            );
        } else if !is_name(&suite.suite) {
            self.error(&[Key("suite")], format!("suite name `{}` {NAME_RULE}", suite.suite));
        }
        if suite.defaults.deadline_ms == Some(0) {
            self.error(&[Key("defaults"), Key("deadline_ms")], "deadline_ms must be more than 0");
        }
        self.requires(&[Key("defaults")], &suite.defaults.requires);
        if suite.scenarios.is_empty() {
            self.error(&[Key("scenarios")], "a suite needs at least one scenario");
        }
        let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
        for (i, s) in suite.scenarios.iter().enumerate() {
            let at = |rest: &[Seg<'static>]| -> Vec<Seg<'static>> {
                let mut p = vec![Key("scenarios"), Index(i)];
                p.extend_from_slice(rest);
                p
            };
            if !is_name(&s.name) {
                self.error(&at(&[Key("name")]), format!("scenario name `{}` {NAME_RULE}", s.name));
            }
            if let Some(&first) = seen.get(s.name.as_str()) {
                let line = locate(self.tree, &[Key("scenarios"), Index(first), Key("name")]).line();
                self.error(&at(&[Key("name")]), format!("duplicate scenario name `{}` (first at line {line})", s.name));
            } else {
                seen.insert(&s.name, i);
            }
            for (k, id) in s.covers.iter().enumerate() {
                if !is_item_id(id) {
                    self.error(
                        &at(&[Key("covers"), Index(k)]),
                        format!("`{id}` is not a catalogue item id (a capital letter and a number, such as A15)"),
                    );
                }
            }
            self.requires(&at(&[]), &s.requires);
            if s.xfail.as_deref().is_some_and(|r| r.trim().is_empty()) {
                self.error(&at(&[Key("xfail")]), "xfail needs the reason the scenario fails");
            }
            if let Some(fix) = &s.fixed_by {
                if s.xfail.is_none() {
                    self.error(
                        &at(&[Key("fixed_by")]),
                        "fixed_by names the fix of the bug an xfail names: add the xfail",
                    );
                } else if !crate::support::checkout::project_root().join(fix).is_file() {
                    self.error(&at(&[Key("fixed_by")]), format!("fixed_by: no file {fix} in the checkout"));
                }
            }
            if s.intermittent && s.xfail.is_none() {
                self.error(&at(&[Key("intermittent")]), "intermittent qualifies the bug an xfail names: add the xfail");
            }
            if s.expect_report.as_deref().is_some_and(|r| r.trim().is_empty()) {
                self.error(
                    &at(&[Key("expect_report")]),
                    "expect_report needs the text the kernel's report must include",
                );
            }
            if s.xfail.is_some() && s.expect_report.is_some() {
                self.error(
                    &at(&[Key("expect_report")]),
                    "a scenario is either xfail or expects a kernel report, not both",
                );
            }
            if s.deadline_ms == Some(0) {
                self.error(&at(&[Key("deadline_ms")]), "deadline_ms must be more than 0");
            }
            if s.steps.is_empty() {
                self.error(&at(&[Key("steps")]), "a scenario needs at least one step");
            }
            let mut scope = Scope::fresh();
            let context = Context { isolated: s.isolated, in_threads: false, in_repeat: false };
            self.steps(&[Key("scenarios"), Index(i), Key("steps")], &s.steps, &mut scope, context);
        }
    }

    /// Checks a list of steps at `list` (its path in the tree), with the names made before it in
    /// `scope`, which it extends; nested steps are checked in the scope their step gives them.
    fn steps<'s>(&mut self, list: &[Seg<'static>], steps: &'s [Step], scope: &mut Scope<'s>, context: Context) {
        for (j, step) in steps.iter().enumerate() {
            let mut base = list.to_vec();
            base.push(Index(j));
            self.raw_nulls(&base);
            self.placeholders(&base, step, context);
            self.step(&base, step, scope, context);
            self.nested(&base, step, scope, context);
            if let Step::FailNth(FailNth { nth, .. }) = step {
                self.fail_nth(&base, *nth, steps.get(j + 1));
            }
            // A sweep arms its first step's call as a `fail_nth` would.
            if let Step::FailEach(FailEach { steps: inner, .. }) = step {
                let mut at = base.clone();
                at.extend_from_slice(&[Only, Key("steps")]);
                self.fail_nth(&at, 1, inner.first());
            }
        }
    }

    /// A `fail_nth` arms the first call of the step after it, on the same thread: that step must
    /// be one whose call the agent arms (`FAULT_TARGETS`), and N counts from 1.
    fn fail_nth(&mut self, base: &[Seg<'static>], nth: u32, next: Option<&Step>) {
        if nth == 0 {
            let mut at = base.to_vec();
            at.extend_from_slice(&[Only, Key("nth")]);
            self.error(&at, "`nth` counts fault-injection points from 1");
        }
        let kind = next.map(Step::kind);
        if !kind.as_deref().is_some_and(|k| FAULT_TARGETS.contains(&k)) {
            let what = kind.map_or("nothing".to_string(), |k| format!("`{k}`"));
            self.error(
                base,
                format!(
                    "`fail_nth` arms the next step's call, which must be one of {FAULT_TARGETS:?}; here it is {what}"
                ),
            );
        }
    }

    /// A `requires` (a scenario's, or the suite's defaults') under `base`: a kernel range that
    /// parses and config entries of the form `CONFIG_X[=value]`.
    fn requires(&mut self, base: &[Seg<'static>], requires: &crate::suites::model::Requires) {
        let at = |rest: &[Seg<'static>]| under(base, rest);
        if let Some(range) = &requires.kernel {
            if let Err(e) = KernelRange::parse(range) {
                self.error(&at(&[Key("requires"), Key("kernel")]), e);
            }
        }
        for (k, option) in requires.config.iter().enumerate() {
            if let Err(e) = ConfigNeed::parse(option) {
                self.error(&at(&[Key("requires"), Key("config"), Index(k)]), e);
            }
        }
    }

    /// The checks of one step, with the names made before it: those of every step, then those
    /// of its area.
    fn step<'s>(&mut self, base: &[Seg<'static>], step: &'s Step, scope: &mut Scope<'s>, context: Context) {
        self.fd_in_scope(base, step, scope);
        if context.in_threads {
            if let Some(kind) = step.whole_process_kind() {
                self.error(
                    base,
                    format!("`{kind}` acts on the whole process, so it cannot run in a thread of `threads`"),
                );
            }
        }
        match step.area() {
            Area::UserEvents | Area::Words => self.user_events_step(base, step, scope, context),
            Area::Files => self.files_step(base, step, scope),
            Area::Perf | Area::Trace => self.record_reads_step(base, step),
            Area::Measure => self.measure_step(base, step),
            Area::Nesting => self.nesting_step(base, step),
            Area::Sync => self.sync_step(base, step),
            Area::Program | Area::Faults | Area::Bpf => {}
        }
    }

    /// A step's `fd` must be open: `open` puts it in the scope, the others that name one use it.
    fn fd_in_scope<'s>(&mut self, base: &[Seg<'static>], step: &'s Step, scope: &mut Scope<'s>) {
        let used_fd = match step {
            Step::Open(Open { fd, .. }) => {
                scope.fds.insert(fd);
                None
            }
            Step::Dup(Dup { fd, to }) => {
                let used = (!scope.fds.contains(fd.as_str())).then_some(fd);
                scope.fds.insert(to);
                used
            }
            Step::Close(Close { fd })
            | Step::Register(Register { fd, .. })
            | Step::Unregister(Unregister { fd, .. })
            | Step::Delete(Delete { fd, .. })
            | Step::Write(Write { fd, .. }) => Some(fd),
            _ => None,
        };
        if let Some(fd) = used_fd.filter(|fd| !scope.fds.contains(fd.as_str())) {
            self.error(
                &under(base, &[Only, Key("fd")]),
                format!("fd `{fd}` is not open: no earlier `open` step names it (only `data` opens by itself)"),
            );
        }
    }

    /// The user_events steps: a format that YAML did not read as text, names that later steps
    /// refer to, `register_until`'s count, `memory`'s file, a bit that exists, a write's index
    /// and hex.
    fn user_events_step<'s>(&mut self, base: &[Seg<'static>], step: &'s Step, scope: &mut Scope<'s>, context: Context) {
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

    /// The files steps: a `stat`'s mode; `read_file`'s hex, what it compares with and the name
    /// it keeps the contents as.
    fn files_step<'s>(&mut self, base: &[Seg<'static>], step: &'s Step, scope: &mut Scope<'s>) {
        if let Step::Stat(Stat { mode: Some(mode), .. }) = step {
            if protocol::octal_mode(mode).is_none() {
                self.error(
                    &under(base, &[Only, Key("mode")]),
                    format!("mode {mode:?}: permission bits in octal, 3 or 4 digits 0-7 (\"0640\")"),
                );
            }
        }
        let Step::ReadFile(ReadFile { head_hex, equals, keep_as, equals_kept, .. }) = step else { return };
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
    fn record_reads_step(&mut self, base: &[Seg<'static>], step: &Step) {
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
    fn measure_step(&mut self, base: &[Seg<'static>], step: &Step) {
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
    fn nesting_step(&mut self, base: &[Seg<'static>], step: &Step) {
        let at = |rest: &[Seg<'static>]| under(base, rest);
        match step {
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
            Step::Kmemleak(Kmemleak { steps }) if steps.is_empty() => {
                self.error(&at(&[Only, Key("steps")]), "`kmemleak` needs at least one step to watch");
            }
            _ => {}
        }
    }

    /// `barrier` and `pin`: a barrier's name and parties, a CPU that can exist.
    fn sync_step(&mut self, base: &[Seg<'static>], step: &Step) {
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

    /// The steps inside a step, checked in the scope it gives them: a `fork` child and the
    /// threads of `threads` start from the names made so far (the threads' names are shared with
    /// the scenario, so they stay); `thread` and `repeat` run in the scenario's own state; an
    /// `exec_agent` image starts with nothing but `data`.
    fn nested<'s>(&mut self, base: &[Seg<'static>], step: &'s Step, scope: &mut Scope<'s>, context: Context) {
        let path = |rest: &[Seg<'static>]| -> Vec<Seg<'static>> {
            let mut p = base.to_vec();
            p.extend_from_slice(rest);
            p
        };
        match step {
            Step::Fork(Fork { steps, .. }) | Step::FailEachFork(FailEachFork { steps, .. }) => {
                self.steps(&path(&[Only, Key("steps")]), steps, &mut scope.clone(), context);
            }
            Step::Thread(Thread { steps })
            | Step::Kmemleak(Kmemleak { steps })
            | Step::KernelLog(KernelLog { steps, .. })
            | Step::FailIn(FailIn { steps, .. }) => self.steps(&path(&[Only, Key("steps")]), steps, scope, context),
            Step::Repeat(Repeat { steps, .. }) | Step::FailEach(FailEach { steps, .. }) => {
                let context = Context { in_repeat: true, ..context };
                self.steps(&path(&[Only, Key("steps")]), steps, scope, context);
            }
            Step::ExecAgent(ExecAgent { steps }) => {
                self.steps(&path(&[Only, Key("steps")]), steps, &mut Scope::fresh(), context);
            }
            Step::Threads(groups) => {
                let context = Context { in_threads: true, ..context };
                let mut made = scope.clone();
                for (g, group) in groups.iter().enumerate() {
                    let mut own = scope.clone();
                    self.steps(&path(&[Only, Index(g), Key("steps")]), &group.steps, &mut own, context);
                    made.fds.extend(own.fds);
                    made.indexes.extend(own.indexes);
                }
                *scope = made;
            }
            _ => {}
        }
    }

    /// `{thread}` and `{iteration}` only where a `threads` or a `repeat` step gives them a value:
    /// anywhere else the agent would send the text as it is.
    fn placeholders(&mut self, base: &[Seg<'static>], step: &Step, context: Context) {
        // A step that runs steps is looked at for its own fields only: its steps come in turn.
        let own = match step {
            Step::Fork(Fork { name, .. }) => name.clone(),
            Step::Thread(_)
            | Step::Threads(_)
            | Step::Repeat(_)
            | Step::Kmemleak(_)
            | Step::KernelLog(_)
            | Step::FailEachFork(_)
            | Step::FailIn(_)
            | Step::FailEach(_)
            | Step::ExecAgent(_) => String::new(),
            other => serde_json::to_string(other).unwrap_or_default(),
        };
        for (key, given, by) in [
            (protocol::THREAD_INDEX, context.in_threads, "threads"),
            (protocol::ITERATION, context.in_repeat, "repeat` or `fail_each"),
        ] {
            if own.contains(key) && !given {
                self.error(base, format!("`{key}` stands for a value only inside `{by}`, and this step is not"));
            }
        }
    }

    /// Checks the `bytes` of expected records (`trace_read`, `perf_read`).
    fn records(&mut self, path: &[Seg], records: &[protocol::Record]) {
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

    /// In `raw`, YAML's `null` is serde's `None`: the field is not overridden at all, which is
    /// never what someone who wrote `arg: null` meant (the NULL pointer is `null_pointer`).
    fn raw_nulls(&mut self, step: &[Seg]) {
        let mut path = step.to_vec();
        path.extend([Only, Key("raw")]);
        let Some(Node::Map(entries)) = node_at(self.tree, &path) else { return };
        let nulls: Vec<String> = entries
            .iter()
            .filter(|(_, v)| matches!(v.value, Node::Null))
            .filter_map(|(k, _)| if let Node::Str(k) = &k.value { Some(k.clone()) } else { None })
            .collect();
        for key in nulls {
            let mut at = path.clone();
            at.push(Key(&key));
            self.error(
                &at,
                format!(
                    "`{key}: null` is YAML's null, which overrides nothing; \
                     for a NULL pointer write `{key}: null_pointer`, or drop the key"
                ),
            );
        }
    }
}

/// The most threads a `threads` step starts.
const MAX_THREADS: u64 = 64;
/// The steps a `fail_nth` can arm: their first call is an `ioctl`, a `write(2)` or an
/// `openat(2)`.
const FAULT_TARGETS: [&str; 5] = ["register", "unregister", "delete", "write_file", "open"];

/// One past the highest CPU `pin` takes (`CPU_SETSIZE`).
const MAX_CPU: u32 = 1024;

/// The names the steps so far made, as written (`i{thread}` is a name like any other):
/// descriptors (`data` opens itself) and write indexes.
#[derive(Debug, Clone)]
struct Scope<'s> {
    fds: BTreeSet<&'s str>,
    indexes: BTreeSet<&'s str>,
    /// Names `read_file` kept contents as (`keep_as`).
    kept: BTreeSet<&'s str>,
}

impl Scope<'_> {
    fn fresh() -> Self {
        Scope { fds: BTreeSet::from([protocol::DATA_FD]), indexes: BTreeSet::new(), kept: BTreeSet::new() }
    }
}

/// Where a list of steps runs.
#[derive(Debug, Clone, Copy)]
struct Context {
    /// The scenario is `isolated: true`.
    isolated: bool,
    /// Inside `threads` (`{thread}` has a value; no whole-process steps).
    in_threads: bool,
    /// Inside `repeat` (`{iteration}` has a value).
    in_repeat: bool,
}

const NAME_RULE: &str = "must be lowercase letters, digits, `_` and `-`, starting with a letter or digit";

fn is_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
}

fn is_item_id(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_uppercase()) && {
        let rest = chars.as_str();
        !rest.is_empty() && rest.chars().all(|c| c.is_ascii_digit())
    }
}

/// What YAML made of a scalar the model reads as text, when that is not a string.
fn non_string(node: &Node) -> Option<&'static str> {
    match node {
        Node::Int => Some("number"),
        Node::Float => Some("number"),
        Node::Bool => Some("boolean"),
        Node::Null => Some("null"),
        _ => None,
    }
}
