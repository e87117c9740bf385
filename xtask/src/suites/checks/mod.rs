//! The checks that run on a suite after it deserialized: names, catalogue ids, `requires`,
//! references between steps, hex, misused steps. Each error is placed with a tree of spanned
//! YAML nodes, parsed from the same text, that gives the position of every key and value.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use protocol::steps::{
    CloneVm, Close, Delete, Dup, Dup2, ExecAgent, FailEach, FailEachFork, FailIn, FailNth, Fork, Ioctl, KernelLog,
    Kmemleak, Open, Register, Repeat, Thread, Unregister, Write, CLONE_VM_STEPS,
};
use protocol::{Area, Step};
use serde_saphyr::Spanned;

use super::diagnostics::{self, Diagnostic, Errors};
use super::model::Suite;
use super::requires::{ConfigNeed, KernelRange};

mod areas;
mod tree;

use tree::{locate, node_at, under, Node, Seg};
use Seg::{Index, Key, Only};

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
            let context = Context { isolated: s.isolated, in_threads: false, in_repeat: false, in_clone_vm: false };
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
            self.kept_refs(&base, step, scope);
            self.step(&base, step, scope, context);
            self.nested(&base, step, scope, context);
            if let Step::FailNth(FailNth { nth, within, not_in, .. }) = step {
                self.fail_nth(&base, *nth, steps.get(j + 1));
                self.stack_filter(&base, within.as_deref(), not_in.as_deref());
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

    /// A `fail_nth`'s `in` and `not_in` name kernel functions (C identifiers); `not_in` only
    /// narrows an `in`.
    fn stack_filter(&mut self, base: &[Seg<'static>], within: Option<&str>, not_in: Option<&str>) {
        let c_name = |f: &str| {
            f.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && f.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        };
        for (key, name) in [("in", within), ("not_in", not_in)] {
            if let Some(name) = name.filter(|f| !c_name(f)) {
                self.error(
                    &under(base, &[Only, Key(key)]),
                    format!("`{key}`: `{name}` is not a kernel function's name"),
                );
            }
        }
        if not_in.is_some() && within.is_none() {
            self.error(&under(base, &[Only, Key("not_in")]), "`not_in` narrows an `in`: give the function `in` too");
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
        if context.in_clone_vm && !CLONE_VM_STEPS.contains(&step.kind().as_str()) {
            self.error(
                base,
                format!(
                    "`{}` cannot run in a `clone_vm` child, which shares the scenario's memory: only {}",
                    step.kind(),
                    CLONE_VM_STEPS.join(", ")
                ),
            );
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
            Step::Dup2(Dup2 { fd, number, to, .. }) => {
                if (0..=2).contains(number) {
                    self.error(
                        &under(base, &[Only, Key("number")]),
                        format!("dup2 onto {number}: 0, 1 and 2 carry the scenario's lines"),
                    );
                }
                let used = (!scope.fds.contains(fd.as_str())).then_some(fd);
                scope.fds.extend(to.as_deref());
                used
            }
            Step::Close(Close { fd })
            | Step::Register(Register { fd, .. })
            | Step::Unregister(Unregister { fd, .. })
            | Step::Delete(Delete { fd, .. })
            | Step::Write(Write { fd, .. })
            | Step::Ioctl(Ioctl { fd, .. }) => Some(fd),
            _ => None,
        };
        if let Some(fd) = used_fd.filter(|fd| !scope.fds.contains(fd.as_str())) {
            self.error(
                &under(base, &[Only, Key("fd")]),
                format!("fd `{fd}` is not open: no earlier `open` step names it (only `data` opens by itself)"),
            );
        }
    }

    /// The steps inside a step, checked in the scope it gives them: a `fork` child and the
    /// threads of `threads` start from the names made so far (the threads' names are shared with
    /// the scenario, so they stay); `thread` and `repeat` run in the scenario's own state; an
    /// `exec_agent` image starts with nothing but `data` and the descriptors it keeps.
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
            | Step::FailIn(FailIn { steps, .. })
            | Step::Requires(protocol::steps::Requires { steps, .. }) => {
                self.steps(&path(&[Only, Key("steps")]), steps, scope, context)
            }
            // The child's memory is the scenario's: what it names stays named.
            Step::CloneVm(CloneVm { steps, .. }) => {
                let context = Context { in_clone_vm: true, ..context };
                self.steps(&path(&[Only, Key("steps")]), steps, scope, context);
            }
            Step::Repeat(Repeat { steps, .. }) | Step::FailEach(FailEach { steps, .. }) => {
                let context = Context { in_repeat: true, ..context };
                self.steps(&path(&[Only, Key("steps")]), steps, scope, context);
            }
            Step::ExecAgent(ExecAgent { steps, keep }) => {
                let mut image = Scope::fresh();
                for (k, name) in keep.iter().enumerate() {
                    if !scope.fds.contains(name.as_str()) {
                        self.error(
                            &path(&[Only, Key("keep"), Index(k)]),
                            format!("keep: fd `{name}` is not open: no earlier `open` step names it (only `data` opens by itself)"),
                        );
                    }
                    image.fds.insert(name);
                }
                self.steps(&path(&[Only, Key("steps")]), steps, &mut image, context);
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

    /// `{kept:NAME}` in a leaf step's text only after a `read_file` that keeps a content under
    /// NAME (a step that runs steps is looked at through its steps).
    fn kept_refs(&mut self, base: &[Seg<'static>], step: &Step, scope: &Scope) {
        if !step.nested().is_empty() {
            return;
        }
        let text = serde_json::to_string(step).unwrap_or_default();
        for name in protocol::steps::kept_names(&text) {
            if !scope.kept.contains(name) {
                self.error(base, format!("`{{kept:{name}}}`: no earlier `read_file` step has `keep_as: {name}`"));
            }
        }
    }

    /// `{thread}` and `{iteration}` only where a `threads` or a `repeat` step gives them a value:
    /// anywhere else the agent would send the text as it is.
    fn placeholders(&mut self, base: &[Seg<'static>], step: &Step, context: Context) {
        // A step that runs steps is looked at for its own fields only: its steps come in turn.
        let own = match step {
            Step::Fork(Fork { name, .. }) => name.clone(),
            Step::Thread(_)
            | Step::CloneVm(_)
            | Step::Threads(_)
            | Step::Repeat(_)
            | Step::Kmemleak(_)
            | Step::KernelLog(_)
            | Step::FailEachFork(_)
            | Step::FailIn(_)
            | Step::FailEach(_)
            | Step::ExecAgent(_)
            | Step::Requires(_) => String::new(),
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

/// The steps a `fail_nth` can arm: their first call is an `ioctl`, a `write(2)` or an
/// `openat(2)`.
const FAULT_TARGETS: [&str; 5] = ["register", "unregister", "delete", "write_file", "open"];

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
    /// Inside `clone_vm` (only the steps of `CLONE_VM_STEPS`).
    in_clone_vm: bool,
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
