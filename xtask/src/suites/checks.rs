//! The checks that run on a suite after it deserialized: names, catalogue ids, `requires`,
//! references between steps, hex, misused steps. Each error is placed with a tree of spanned
//! YAML nodes, parsed from the same text, that gives the position of every key and value.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::Path;

use protocol::{Step, Value};
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
            if let Some(range) = &s.requires.kernel {
                if let Err(e) = KernelRange::parse(range) {
                    self.error(&at(&[Key("requires"), Key("kernel")]), e);
                }
            }
            for (k, option) in s.requires.config.iter().enumerate() {
                if let Err(e) = ConfigNeed::parse(option) {
                    self.error(&at(&[Key("requires"), Key("config"), Index(k)]), e);
                }
            }
            if s.xfail.as_deref().is_some_and(|r| r.trim().is_empty()) {
                self.error(&at(&[Key("xfail")]), "xfail needs the reason the scenario fails");
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
            self.steps(i, &s.steps, s.isolated);
        }
    }

    fn steps(&mut self, scenario: usize, steps: &[Step], scenario_isolated: bool) {
        // Names earlier steps made: descriptors (`data` opens itself) and write indexes.
        let mut fds: BTreeSet<&str> = BTreeSet::from([protocol::DATA_FD]);
        let mut indexes: BTreeSet<&str> = BTreeSet::new();
        for (j, step) in steps.iter().enumerate() {
            let base = [Key("scenarios"), Index(scenario), Key("steps"), Index(j)];
            let at = |rest: &[Seg<'static>]| -> Vec<Seg<'static>> {
                let mut p = base.to_vec();
                p.extend_from_slice(rest);
                p
            };
            self.raw_nulls(&base);
            let used_fd = match step {
                Step::Open { fd, .. } => {
                    fds.insert(fd);
                    None
                }
                Step::Close { fd }
                | Step::Register { fd, .. }
                | Step::Unregister { fd, .. }
                | Step::Delete { fd, .. }
                | Step::Write { fd, .. } => Some(fd),
                _ => None,
            };
            if let Some(fd) = used_fd.filter(|fd| !fds.contains(fd.as_str())) {
                self.error(
                    &at(&[Only, Key("fd")]),
                    format!("fd `{fd}` is not open: no earlier `open` step names it (only `data` opens by itself)"),
                );
            }
            match step {
                Step::Register { index_as, .. } => {
                    if let Some(kind) = node_at(self.tree, &at(&[Only, Key("format")])).and_then(non_string) {
                        self.error(
                            &at(&[Only, Key("format")]),
                            format!("the format is a YAML {kind}, not text: quote it if the kernel should see those characters"),
                        );
                    }
                    if let Some(name) = index_as {
                        indexes.insert(name);
                    }
                }
                Step::RegisterUntil { hold_until_reboot: true, .. } if !scenario_isolated => {
                    self.error(
                        &at(&[Only, Key("hold_until_reboot")]),
                        "only an `isolated: true` scenario may leave its events to the reboot",
                    );
                }
                Step::RegisterUntil { format, expect, .. } => {
                    if !format.contains("{i}") {
                        self.error(
                            &at(&[Only, Key("format")]),
                            "needs `{i}` where the count goes, so each event is new",
                        );
                    }
                    if !matches!(expect, protocol::Expect::Errno(_)) {
                        self.error(&at(&[Only, Key("expect")]), "states the errno that ends the registrations");
                    }
                }
                Step::Memory { op, file } if (*op == protocol::MemoryOp::ShareFile) != file.is_some() => {
                    self.error(&at(&[Only]), "`file` goes with `op: share_file`, and `share_file` needs a `file`");
                }
                Step::ReadFile { head_hex: Some(hex), .. } => {
                    if let Err(e) = protocol::decode_hex(hex) {
                        self.error(&at(&[Only, Key("head_hex")]), format!("bad hex: {e}"));
                    }
                }
                Step::Measure { reps, .. } if *reps < protocol::MIN_REPS => {
                    self.error(
                        &at(&[Only, Key("reps")]),
                        format!("a figure is a median over at least {} repetitions, not {reps}", protocol::MIN_REPS),
                    );
                }
                Step::CheckBit { bit, .. } if *bit >= 64 => {
                    self.error(&at(&[Only, Key("bit")]), format!("an enable word has 64 bits: there is no bit {bit}"));
                }
                Step::Write { index, index_value, fields, .. } => {
                    match (index, index_value) {
                        (None, None) => self.error(
                            &at(&[]),
                            "a write needs `index` (a name from an earlier `index_as`) or `index_value`",
                        ),
                        (Some(_), Some(_)) => self.error(
                            &at(&[Only, Key("index_value")]),
                            "a write takes `index` or `index_value`, not both",
                        ),
                        (Some(name), None) if !indexes.contains(name.as_str()) => self.error(
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
                Step::PerfRead { samples, records, .. } => {
                    if samples.is_some() == records.is_some() {
                        self.error(
                            &at(&[Only]),
                            "perf_read takes `samples` (raw bytes) or `records` (decoded fields): one of them",
                        );
                    }
                    self.records(&at(&[Only, Key("records")]), records.as_deref().unwrap_or_default());
                }
                Step::TraceRead { event, instance, records } => {
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
                    self.records(&at(&[Only, Key("records")]), records);
                }
                _ => {}
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
