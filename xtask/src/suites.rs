//! The scenario language: `suites/<area>.yaml` files, their validation with `file:line:column`
//! diagnostics, `requires` against a kernel, and compilation into the agent's plan. Sans-IO
//! except the thin loaders at the end.
//!
//! A file is parsed twice by serde-saphyr: once into the typed model (serde reports syntax, type,
//! unknown-key, unknown-step and duplicate-key errors with their position), then into a tree of
//! spanned nodes that gives the position of every key and value to the checks that run after
//! deserializing (errno names, hex, names, references between steps).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};

use protocol::{Expect, Step, Value};
use serde::de::{Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_saphyr::{Location, MessageFormatter, Spanned};

/// A scenario's deadline when neither it nor its suite's `defaults` gives one.
pub const DEFAULT_DEADLINE_MS: u64 = 10_000;

/// One suite file.
#[derive(Debug, Clone, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Suite {
    /// Equals the file stem; plan names are `<suite>/<scenario>`.
    pub suite: String,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub defaults: Defaults,
    pub scenarios: Vec<ScenarioDef>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Defaults {
    #[serde(default)]
    pub deadline_ms: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScenarioDef {
    pub name: String,
    /// Catalogue item ids (`A15`).
    #[serde(default)]
    pub covers: Vec<String>,
    /// Upstream selftest assertions this scenario mirrors (`abi_test.c:enablement`).
    #[serde(default)]
    pub upstream: Vec<String>,
    #[serde(default)]
    pub requires: Requires,
    /// Why the scenario is expected to fail on the kernels we test.
    #[serde(default)]
    pub xfail: Option<String>,
    /// Text a kernel report (KASAN, WARNING, ...) attributed to this scenario must include: for
    /// a scenario that provokes a known kernel bug on purpose. It passes only when its steps
    /// pass and such a report appears; that report and the taint it brings do not fail it.
    #[serde(default)]
    pub expect_report: Option<String>,
    /// Runs in a boot of its own, after the shared boot: for a scenario that leaves the kernel
    /// in a state others cannot share (tens of thousands of events whose teardown takes
    /// minutes, memory a kernel bug corrupted).
    #[serde(default)]
    pub isolated: bool,
    #[serde(default)]
    pub deadline_ms: Option<u64>,
    /// Where the kernel disagreed with the catalogue.
    #[serde(default)]
    pub note: Option<String>,
    pub steps: Vec<Step>,
}

/// What a kernel must have for a scenario to run; otherwise it is skipped with the reason.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Requires {
    /// Comma-separated bounds, all of which must hold: `>=6.4`, `<6.4`, `>=6.4,<6.13`.
    #[serde(default)]
    pub kernel: Option<String>,
    /// `CONFIG_X` (built in or a module) or `CONFIG_X=value` (`=n` also holds when absent).
    #[serde(default)]
    pub config: Vec<String>,
}

// ---------------------------------------------------------------------------------------------
// Diagnostics

/// One error in a suite file. `line` and `column` are 1-based characters; 0 when unknown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    pub file: String,
    pub line: usize,
    pub column: usize,
    pub message: String,
    /// The offending source line (empty when unknown).
    pub source_line: String,
}

impl Diagnostic {
    fn at(file: &str, text: &str, line: usize, column: usize, message: impl Into<String>) -> Diagnostic {
        let source_line = line.checked_sub(1).and_then(|i| text.lines().nth(i)).unwrap_or("").to_string();
        Diagnostic { file: file.to_string(), line, column, message: message.into(), source_line }
    }

    fn whole_file(file: &str, message: impl Into<String>) -> Diagnostic {
        Diagnostic { file: file.to_string(), line: 0, column: 0, message: message.into(), source_line: String::new() }
    }

    /// The first line of the rendering: `file:line:column: message`.
    pub fn headline(&self) -> String {
        if self.line == 0 {
            format!("{}: {}", self.file, self.message)
        } else {
            format!("{}:{}:{}: {}", self.file, self.line, self.column, self.message)
        }
    }
}

/// `file:line:column: message`, then the source line with a caret under the column (rustc style).
impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.headline())?;
        if self.line == 0 || self.source_line.is_empty() {
            return Ok(());
        }
        let number = self.line.to_string();
        let pad = " ".repeat(number.len());
        // Tabs stay tabs so the caret lines up however the terminal expands them.
        let indent: String = self
            .source_line
            .chars()
            .take(self.column.saturating_sub(1))
            .map(|c| if c == '\t' { '\t' } else { ' ' })
            .collect();
        write!(f, "\n{pad} |\n{number} | {}\n{pad} | {indent}^", self.source_line)
    }
}

/// Every error found in one or more suite files, in file and position order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Errors(pub Vec<Diagnostic>);

impl fmt::Display for Errors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, d) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("\n\n")?;
            }
            write!(f, "{d}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Errors {}

// ---------------------------------------------------------------------------------------------
// The spanned tree: positions for the checks after deserializing

/// Any YAML node, with the position of every key and value.
#[derive(Debug)]
enum Node {
    Null,
    Bool,
    Int(i128),
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
            fn visit_i64<E>(self, v: i64) -> Result<Node, E> {
                Ok(Node::Int(v.into()))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Node, E> {
                Ok(Node::Int(v.into()))
            }
            fn visit_i128<E>(self, v: i128) -> Result<Node, E> {
                Ok(Node::Int(v))
            }
            fn visit_u128<E>(self, v: u128) -> Result<Node, E> {
                Ok(Node::Int(v as i128))
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

// ---------------------------------------------------------------------------------------------
// Parsing and validation

fn options() -> serde_saphyr::Options {
    // Snippets are rendered here, the same way for every error. Only `true`/`false` are
    // booleans: `set: no` is a mistake worth a message, not YAML 1.1's false.
    serde_saphyr::options! { with_snippet: false, strict_booleans: true }
}

/// Parses and validates one suite. `file` is the name shown in diagnostics; its stem must be
/// the suite's name.
pub fn parse(file: &str, text: &str) -> Result<Suite, Errors> {
    let suite: Suite =
        serde_saphyr::from_str_with_options(text, options()).map_err(|e| Errors(vec![from_serde(file, text, &e)]))?;
    let tree: Spanned<Node> =
        serde_saphyr::from_str_with_options(text, options()).map_err(|e| Errors(vec![from_serde(file, text, &e)]))?;
    let mut check = Checker { file, text, tree: &tree, out: Vec::new() };
    check.suite(&suite);
    let mut out = check.out;
    if out.is_empty() {
        Ok(suite)
    } else {
        out.sort_by_key(|d| (d.line, d.column));
        Err(Errors(out))
    }
}

fn from_serde(file: &str, text: &str, e: &serde_saphyr::Error) -> Diagnostic {
    // The user formatter's wording, without its `at line X, column Y` suffix.
    let message = serde_saphyr::UserMessageFormatter.format_message(e.without_snippet()).into_owned();
    let message = explain(&message);
    match e.location() {
        Some(loc) if loc.line() > 0 => Diagnostic::at(file, text, loc.line() as usize, loc.column() as usize, message),
        _ => Diagnostic::whole_file(file, message),
    }
}

/// Adds what a suite author needs to a few terse serde messages.
fn explain(message: &str) -> String {
    let ranges = [
        ("invalid u8", "0 to 255"),
        ("invalid u16", "0 to 65535"),
        ("invalid u32", "0 to 4294967295"),
        ("invalid u64", "0 to 18446744073709551615"),
        ("invalid i32", "-2147483648 to 2147483647"),
        ("invalid i64", "-9223372036854775808 to 9223372036854775807"),
    ];
    if let Some((_, range)) = ranges.iter().find(|(m, _)| *m == message) {
        return format!("{message}: expected an integer from {range}");
    }
    // The parser notices a missing `}` or `]` only at the next token, often a line later.
    for (close, what) in [('}', "{"), (']', "[")] {
        if message.ends_with(&format!("did not find expected ',' or '{close}'")) {
            return format!("{message}: is a `{what}` before here not closed?");
        }
    }
    if message == "data did not match any variant of untagged enum FieldValue" {
        return "a record's field takes an integer (from -9223372036854775808 to 18446744073709551615), \
                text, `self` or `{ bytes: HEX }`"
            .to_string();
    }
    if message == "expected end of mapping after enum variant value" {
        return format!("{message}: a step has one key, its kind (`register:`); start the next step with `- `");
    }
    message.to_string()
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
            self.expects(&base);
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
                    if !matches!(expect.parse(), Ok(protocol::Expected::Errno(_))) {
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
                Step::Measure { reps, .. } if *reps < 5 => {
                    self.error(
                        &at(&[Only, Key("reps")]),
                        format!("a figure is a median over at least 5 repetitions, not {reps}"),
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

    /// Checks every `expect` among a step's fields, whatever the step's kind.
    fn expects(&mut self, step: &[Seg]) {
        let mut path = step.to_vec();
        path.extend([Only, Key("expect")]);
        let text = match node_at(self.tree, &path) {
            Some(Node::Str(s)) => s.clone(),
            Some(Node::Int(n)) => n.to_string(),
            _ => return,
        };
        if let Err(e) = Expect(text.clone()).parse() {
            let hint = closest_errno(text.trim()).map_or(String::new(), |n| format!("; did you mean `{n}`?"));
            self.error(&path, format!("bad expect: {e}{hint}"));
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
        Node::Int(_) => Some("number"),
        Node::Float => Some("number"),
        Node::Bool => Some("boolean"),
        Node::Null => Some("null"),
        _ => None,
    }
}

/// The errno name a misspelling is closest to (at most two edits away).
fn closest_errno(word: &str) -> Option<&'static str> {
    if !word.starts_with('E') {
        return None;
    }
    protocol::ERRNOS.iter().map(|(n, _)| (edit_distance(word, n), *n)).filter(|(d, _)| *d <= 2).min().map(|(_, n)| n)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diag = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let next = (diag + usize::from(ca != *cb)).min(row[j] + 1).min(row[j + 1] + 1);
            diag = row[j + 1];
            row[j + 1] = next;
        }
    }
    row[b.len()]
}

// ---------------------------------------------------------------------------------------------
// Kernel requirements

/// A kernel version: the numbers at the start of a kernelrelease.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version(pub u32, pub u32, pub u32);

impl Version {
    /// `6.12.117` -> 6.12.117, `6.1.0-28-amd64` -> 6.1.0, `6.4-rc2` -> 6.4.0. A release
    /// candidate counts as its release: it has the release's ABI, which is what `requires` asks.
    pub fn from_release(release: &str) -> Option<Version> {
        let end = release.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(release.len());
        let mut parts = release[..end].split('.').filter(|p| !p.is_empty()).map(|p| p.parse::<u32>().ok());
        let major = parts.next()??;
        let minor = parts.next().unwrap_or(Some(0))?;
        let patch = parts.next().unwrap_or(Some(0))?;
        Some(Version(major, minor, patch))
    }

    fn parse_exact(text: &str) -> Option<Version> {
        let parts: Vec<&str> = text.split('.').collect();
        if parts.is_empty()
            || parts.len() > 3
            || parts.iter().any(|p| p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()))
        {
            return None;
        }
        let n = |i: usize| parts.get(i).map_or(Some(0), |p| p.parse().ok());
        Some(Version(n(0)?, n(1)?, n(2)?))
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.0, self.1, self.2)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cmp {
    Ge,
    Gt,
    Le,
    Lt,
}

/// `>=6.4,<6.13`: every bound must hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelRange(Vec<(Cmp, Version)>);

impl KernelRange {
    pub fn parse(text: &str) -> Result<KernelRange, String> {
        let mut bounds = Vec::new();
        for part in text.split(',') {
            let part = part.trim();
            let (cmp, rest) = [(">=", Cmp::Ge), ("<=", Cmp::Le), (">", Cmp::Gt), ("<", Cmp::Lt)]
                .into_iter()
                .find_map(|(op, cmp)| part.strip_prefix(op).map(|r| (cmp, r.trim())))
                .ok_or_else(|| format!("bad kernel range `{text}`: `{part}` does not start with >=, >, <= or <"))?;
            let version = Version::parse_exact(rest).ok_or_else(|| {
                format!("bad kernel range `{text}`: `{rest}` is not a version such as 6.4 or 6.12.117")
            })?;
            bounds.push((cmp, version));
        }
        Ok(KernelRange(bounds))
    }

    pub fn contains(&self, v: Version) -> bool {
        self.0.iter().all(|(cmp, bound)| match cmp {
            Cmp::Ge => v >= *bound,
            Cmp::Gt => v > *bound,
            Cmp::Le => v <= *bound,
            Cmp::Lt => v < *bound,
        })
    }
}

/// One `requires.config` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ConfigNeed {
    option: String,
    /// `None`: built in or a module.
    value: Option<String>,
}

impl ConfigNeed {
    fn parse(text: &str) -> Result<ConfigNeed, String> {
        let (option, value) = match text.split_once('=') {
            Some((o, v)) => (o.trim(), Some(v.trim().to_string())),
            None => (text.trim(), None),
        };
        let symbol = option.strip_prefix("CONFIG_").unwrap_or("");
        if symbol.is_empty() || !symbol.bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_') {
            return Err(format!("`{text}` is not a Kconfig option: write CONFIG_NAME or CONFIG_NAME=value"));
        }
        if value.as_deref() == Some("") {
            return Err(format!("`{text}` has no value after `=`"));
        }
        Ok(ConfigNeed { option: option.to_string(), value })
    }

    /// Why `config` does not meet this need, if it does not.
    fn unmet(&self, config: &BTreeMap<String, String>) -> Option<String> {
        let got = config.get(&self.option).map(String::as_str);
        let shown = got.map_or("absent".to_string(), |g| format!("`{g}`"));
        match self.value.as_deref() {
            None if matches!(got, Some("y" | "m")) => None,
            None => Some(format!("needs {} (y or m), the kernel has it {shown}", self.option)),
            Some("n") if matches!(got, None | Some("n")) => None,
            Some(want) if got == Some(want) => None,
            Some(want) => Some(format!("needs {}={want}, the kernel has it {shown}", self.option)),
        }
    }
}

/// The facts about one built kernel that `requires` is decided on.
#[derive(Debug, Clone, Copy)]
pub struct KernelFacts<'a> {
    /// `make kernelrelease`, e.g. `6.12.117`.
    pub release: &'a str,
    /// The kernel's `.config` (`kconfig::parse_config`).
    pub config: &'a BTreeMap<String, String>,
}

impl Requires {
    /// Why the scenario cannot run on this kernel (every unmet need), or `None` to run it.
    /// Entries are assumed valid (`parse` checked them); an invalid one counts as unmet.
    pub fn unmet(&self, kernel: &KernelFacts) -> Option<String> {
        let mut why = Vec::new();
        if let Some(range) = &self.kernel {
            match (KernelRange::parse(range), Version::from_release(kernel.release)) {
                (Err(e), _) => why.push(e),
                (_, None) => {
                    why.push(format!("needs kernel {range}, and kernelrelease `{}` has no version", kernel.release))
                }
                (Ok(r), Some(v)) if !r.contains(v) => {
                    why.push(format!("needs kernel {range}, this is {}", kernel.release))
                }
                _ => {}
            }
        }
        for option in &self.config {
            match ConfigNeed::parse(option) {
                Err(e) => why.push(e),
                Ok(need) => why.extend(need.unmet(kernel.config)),
            }
        }
        (!why.is_empty()).then(|| why.join("; "))
    }
}

// ---------------------------------------------------------------------------------------------
// Compilation

/// A scenario left out of a plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// `suite/scenario`.
    pub name: String,
    pub reason: String,
}

/// A plan for one kernel and what was left out of it.
#[derive(Debug, Clone, PartialEq)]
pub struct Compiled {
    pub plan: protocol::Plan,
    /// Scenarios marked `isolated`, each to run in a boot of its own, in order.
    pub isolated: Vec<protocol::Scenario>,
    pub skipped: Vec<Skipped>,
    pub marks: Marks,
}

/// What the suites expect of planned scenarios beyond their steps, by `suite/scenario`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Marks {
    /// Expected to fail: the reason.
    pub xfail: BTreeMap<String, String>,
    /// Expected to provoke a kernel report including this text.
    pub expect_report: BTreeMap<String, String>,
    /// What each scenario checks: its catalogue items and its `note:` (for the reports).
    pub about: BTreeMap<String, About>,
}

/// A scenario's catalogue items (id, then the catalogue's summary once the caller fills it in)
/// and its `note:`.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct About {
    pub covers: Vec<(String, String)>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// Compiles validated suites into one plan for one kernel, in file and scenario order.
/// Scenarios whose `requires` the kernel does not meet are skipped, not planned.
pub fn compile(suites: &[Suite], kernel: &KernelFacts, label: &str) -> Compiled {
    let mut plan = crate::empty_plan(label);
    let mut skipped = Vec::new();
    let mut marks = Marks::default();
    let mut isolated = Vec::new();
    for suite in suites {
        for s in &suite.scenarios {
            let name = format!("{}/{}", suite.suite, s.name);
            if let Some(reason) = s.requires.unmet(kernel) {
                skipped.push(Skipped { name, reason });
                continue;
            }
            if let Some(reason) = &s.xfail {
                marks.xfail.insert(name.clone(), reason.clone());
            }
            if let Some(text) = &s.expect_report {
                marks.expect_report.insert(name.clone(), text.clone());
            }
            if !s.covers.is_empty() || s.note.is_some() {
                let covers = s.covers.iter().map(|id| (id.clone(), String::new())).collect();
                marks.about.insert(name.clone(), About { covers, note: s.note.clone() });
            }
            let deadline_ms = s.deadline_ms.or(suite.defaults.deadline_ms).unwrap_or(DEFAULT_DEADLINE_MS);
            let scenario = protocol::Scenario { name, deadline_ms, steps: s.steps.clone() };
            if s.isolated {
                isolated.push(scenario);
            } else {
                plan.scenarios.push(scenario);
            }
        }
    }
    Compiled { plan, isolated, skipped, marks }
}

// ---------------------------------------------------------------------------------------------
// Files

/// Every `*.yaml` in `dir` (the checkout's `suites/`), sorted; none when there is no such folder.
pub fn files_in(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(e),
    };
    for entry in entries {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "yaml") && path.is_file() {
            out.push(path);
        }
    }
    out.sort();
    Ok(out)
}

/// How a path is named in diagnostics: relative to the checkout when inside it.
pub fn shown(path: &Path) -> String {
    let root = crate::project_root();
    path.strip_prefix(&root).unwrap_or(path).display().to_string()
}

/// Reads and validates one file.
pub fn load(path: &Path) -> Result<Suite, Errors> {
    let name = shown(path);
    let text = std::fs::read_to_string(path).map_err(|e| Errors(vec![Diagnostic::whole_file(&name, e.to_string())]))?;
    parse(&name, &text)
}

/// Reads and validates several files; every error of every file is reported. Two files may
/// not hold suites of one name (their plan names would collide).
pub fn load_all(paths: &[PathBuf]) -> Result<Vec<Suite>, Errors> {
    let mut suites = Vec::new();
    let mut errors = Vec::new();
    let mut names: BTreeMap<String, String> = BTreeMap::new();
    for path in paths {
        match load(path) {
            Ok(s) => {
                if let Some(other) = names.insert(s.suite.clone(), shown(path)) {
                    errors.push(Diagnostic::whole_file(
                        &shown(path),
                        format!("suite `{}` is also in {other}: scenario names would collide", s.suite),
                    ));
                }
                suites.push(s);
            }
            Err(Errors(mut e)) => errors.append(&mut e),
        }
    }
    if errors.is_empty() {
        Ok(suites)
    } else {
        Err(Errors(errors))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `suites/schema.json`, the editors' schema, follows the model (protocol's `schemars`
    /// feature gives the steps); `UPDATE_SCHEMA=1 cargo test -p xtask schema` rewrites it.
    #[test]
    fn schema_json_is_current() {
        let path = crate::project_root().join("suites/schema.json");
        let want = serde_json::to_string_pretty(&schemars::schema_for!(Suite)).unwrap() + "\n";
        if std::env::var_os("UPDATE_SCHEMA").is_some() {
            std::fs::write(&path, &want).unwrap();
        }
        let got = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            got == want,
            "{} is stale: run `UPDATE_SCHEMA=1 cargo test -p xtask schema_json_is_current`",
            path.display()
        );
    }

    fn fixture(path: &str) -> (String, String) {
        let name = format!("test_data/suites/{path}");
        let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(&name)).unwrap();
        (name, text)
    }

    /// The headlines (`file:line:column: message`) of a bad fixture's errors.
    fn headlines(bad: &str) -> Vec<String> {
        let (name, text) = fixture(&format!("bad/{bad}.yaml"));
        let errors = parse(&name, &text).expect_err(bad);
        errors.0.iter().map(Diagnostic::headline).collect()
    }

    #[test]
    fn serde_errors_point_at_the_key_or_value() {
        let cases = [
            (
                "syntax",
                "6:14: while parsing a flow mapping, did not find expected ',' or '}': \
                 is a `{` before here not closed?",
            ),
            (
                "unknown-step-key",
                "5:41: unknown field `wrod`, expected one of fd, format, word, bit, size, flags, index_as, expect_index, raw, expect",
            ),
            ("wrong-type", "6:36: invalid u8: expected an integer from 0 to 255"),
            ("duplicate-key", "5:25: duplicate mapping key `ms` is not allowed here"),
            (
                "record-value",
                "5:60: a record's field takes an integer (from -9223372036854775808 to 18446744073709551615), \
                 text, `self` or `{ bytes: HEX }`",
            ),
        ];
        for (bad, want) in cases {
            assert_eq!(headlines(bad), [format!("test_data/suites/bad/{bad}.yaml:{want}")]);
        }
        // The list of step kinds grows with the language: check its start and that it names them.
        let unknown = headlines("unknown-step");
        assert_eq!(unknown.len(), 1);
        assert!(
            unknown[0].starts_with(
                "test_data/suites/bad/unknown-step.yaml:5:9: unknown variant `regster`, expected one of exec, "
            ),
            "{unknown:?}"
        );
        assert!(unknown[0].contains(", register, ") && unknown[0].contains(", perf_read, "), "{unknown:?}");
    }

    #[test]
    fn checks_after_parsing_point_at_the_key_or_value() {
        let cases = [
            ("bad-errno", "7:19: bad expect: `EWHAT` is not `ok`, a number or an errno name"),
            ("bad-hex", "6:57: bad hex in `bytes`: `de zz`: `zz` is not hex"),
            ("duplicate-scenario", "7:11: duplicate scenario name `same` (first at line 3)"),
            (
                "suite-mismatch",
                "2:8: the suite is named `registration` but its file is `suite-mismatch`: they must be the same",
            ),
        ];
        for (bad, want) in cases {
            assert_eq!(headlines(bad), [format!("test_data/suites/bad/{bad}.yaml:{want}")]);
        }
        assert_eq!(
            headlines("misused-steps"),
            [
                "test_data/suites/bad/misused-steps.yaml:5:50: a figure is a median over at least 5 repetitions, not 4",
                "test_data/suites/bad/misused-steps.yaml:6:87: only an `isolated: true` scenario may leave its events to the reboot",
                "test_data/suites/bad/misused-steps.yaml:7:67: states the errno that ends the registrations",
                "test_data/suites/bad/misused-steps.yaml:8:17: `file` goes with `op: share_file`, and `share_file` needs a `file`",
            ]
        );
        assert_eq!(
            headlines("bad-records"),
            [
                "test_data/suites/bad/bad-records.yaml:5:91: bad hex in `bytes`: `0g`: `0g` is not hex",
                "test_data/suites/bad/bad-records.yaml:6:30: `x` is not `SYSTEM/NAME` (`user_events/NAME`)",
                "test_data/suites/bad/bad-records.yaml:6:43: `a/b` is not an instance name",
                "test_data/suites/bad/bad-records.yaml:7:20: perf_read takes `samples` (raw bytes) or `records` \
                 (decoded fields): one of them",
                "test_data/suites/bad/bad-records.yaml:8:20: perf_read takes `samples` (raw bytes) or `records` \
                 (decoded fields): one of them",
            ]
        );
    }

    #[test]
    fn every_error_of_a_file_is_reported_in_order() {
        let got = headlines("many");
        let want = [
            "3:26: deadline_ms must be more than 0",
            "5:11: scenario name `Bad Name` must be lowercase letters, digits, `_` and `-`, starting with a letter \
             or digit",
            "6:19: `a7` is not a catalogue item id (a capital letter and a number, such as A15)",
            "7:25: bad kernel range `>=6.x`: `6.x` is not a version such as 6.4 or 6.12.117",
            "7:43: `PERF_EVENTS` is not a Kconfig option: write CONFIG_NAME or CONFIG_NAME=value",
            "7:56: `CONFIG_X=` has no value after `=`",
            "8:12: xfail needs the reason the scenario fails",
            "9:12: a scenario needs at least one step",
            "12:29: the format is a YAML number, not text: quote it if the kernel should see those characters",
            "13:25: fd `ctl` is not open: no earlier `open` step names it (only `data` opens by itself)",
            "14:25: no earlier `register` step has `index_as: j`",
            "15:41: a write takes `index` or `index_value`, not both",
            "16:9: a write needs `index` (a name from an earlier `index_as`) or `index_value`",
            "17:36: an enable word has 64 bits: there is no bit 64",
            "18:46: bad expect: `-1`: a failing call is stated by its errno name, not -1",
            "20:47: bad expect: `EINVLA` is not `ok`, a number or an errno name; did you mean `EINVAL`?",
            "21:53: `arg: null` is YAML's null, which overrides nothing; for a NULL pointer write \
             `arg: null_pointer`, or drop the key",
        ];
        let want: Vec<String> = want.iter().map(|w| format!("test_data/suites/bad/many.yaml:{w}")).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn errors_show_the_line_and_a_caret() {
        let (name, text) = fixture("bad/bad-errno.yaml");
        let shown = parse(&name, &text).unwrap_err().to_string();
        assert_eq!(
            shown,
            "test_data/suites/bad/bad-errno.yaml:7:19: bad expect: `EWHAT` is not `ok`, a number or an errno name\n  \
             |\n7 |           expect: EWHAT\n  |                   ^"
        );
        // Tabs before the column stay tabs under it; files and whole-file errors have no snippet.
        let d = Diagnostic::at("f.yaml", "a:\n\tb: [x\n", 2, 3, "m");
        assert_eq!(d.to_string(), "f.yaml:2:3: m\n  |\n2 | \tb: [x\n  | \t ^");
        assert_eq!(Diagnostic::whole_file("f.yaml", "gone").to_string(), "f.yaml: gone");
        let empty = parse("empty.yaml", "").unwrap_err();
        assert_eq!(empty.0[0].headline(), "empty.yaml:1:1: unexpected end of file");
    }

    #[test]
    fn the_good_suite_parses_into_the_model() {
        let (name, text) = fixture("good/registration.yaml");
        let suite = parse(&name, &text).unwrap();
        assert_eq!(suite.suite, "registration");
        assert_eq!(suite.defaults.deadline_ms, Some(3000));
        let names: Vec<&str> = suite.scenarios.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["reg-basic", "reg-bad-size", "perf-only", "new-kernels-only"]);
        let basic = &suite.scenarios[0];
        assert_eq!(
            (basic.covers.as_slice(), basic.upstream.as_slice()),
            (&["A1".to_string(), "A15".into()][..], &["abi_test.c:enablement".to_string()][..])
        );
        let Step::Write { index, fields, fd, .. } = &basic.steps[2] else { panic!("{:?}", basic.steps[2]) };
        assert_eq!((index.as_deref(), fd.as_str()), (Some("i"), "data"));
        assert_eq!(fields, &[Value::U32(7), Value::Bytes("de ad".into())]);
        let Step::Delete { expect, .. } = &basic.steps[3] else { panic!() };
        assert_eq!(expect.parse(), Ok(protocol::Expected::Errno(16)));
        let perf = &suite.scenarios[2];
        assert_eq!(perf.requires.kernel.as_deref(), Some(">=6.4, <6.13"));
        assert_eq!(perf.requires.config, ["CONFIG_USER_EVENTS", "CONFIG_PERF_EVENTS"]);
    }

    #[test]
    fn expected_records_read_numbers_text_self_and_bytes() {
        use protocol::FieldValue::{Bytes, Signed, Text, Unsigned};
        let text = "suite: t\nscenarios:\n  - name: a\n    steps:\n      - trace_read: { event: user_events/x, \
                    records: [{ common_pid: self, a: 0xffffffffffffffff, b: -5, s: \"hi\", v: { bytes: \"0a\" } }] }\n";
        let suite = parse("t.yaml", text).unwrap();
        let Step::TraceRead { records, instance: None, .. } = &suite.scenarios[0].steps[0] else { panic!() };
        let want: protocol::Record = [
            ("common_pid", Text("self".into())),
            ("a", Unsigned(u64::MAX)),
            ("b", Signed(-5)),
            ("s", Text("hi".into())),
            ("v", Bytes { bytes: "0a".into() }),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        assert_eq!(records, &[want]);
        // The plan carries them through JSON unchanged.
        let json = serde_json::to_string(&suite.scenarios[0].steps).unwrap();
        assert_eq!(serde_json::from_str::<Vec<Step>>(&json).unwrap(), suite.scenarios[0].steps);
    }

    fn config(entries: &[(&str, &str)]) -> BTreeMap<String, String> {
        entries.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn requires_decide_run_or_skip() {
        let cfg = config(&[
            ("CONFIG_USER_EVENTS", "y"),
            ("CONFIG_LKDTM", "m"),
            ("CONFIG_PERF_EVENTS", "n"),
            ("CONFIG_HZ", "250"),
        ]);
        struct Case {
            comment: &'static str,
            kernel: Option<&'static str>,
            config: &'static [&'static str],
            release: &'static str,
            /// `None`: the scenario runs.
            skip: Option<&'static str>,
        }
        const fn case(
            comment: &'static str,
            kernel: Option<&'static str>,
            config: &'static [&'static str],
            release: &'static str,
            skip: Option<&'static str>,
        ) -> Case {
            Case { comment, kernel, config, release, skip }
        }
        let cases = [
            case("nothing required runs anywhere", None, &[], "6.12.117", None),
            case("a lower bound met", Some(">=6.4"), &[], "6.12.117", None),
            case("a lower bound met exactly, the patch level implied 0", Some(">=6.4"), &[], "6.4", None),
            case(
                "an older kernel is skipped",
                Some(">=6.4"),
                &[],
                "6.1.0-28-amd64",
                Some("needs kernel >=6.4, this is 6.1.0-28-amd64"),
            ),
            case(
                "an upper bound excludes its version",
                Some("<6.4"),
                &[],
                "6.4.0",
                Some("needs kernel <6.4, this is 6.4.0"),
            ),
            case("an upper bound met", Some("<6.4"), &[], "6.3.13", None),
            case("a window, spaces allowed", Some(">=6.4, <6.13"), &[], "6.12.117", None),
            case(
                "a window's upper end",
                Some(">=6.4,<6.13"),
                &[],
                "6.13.0",
                Some("needs kernel >=6.4,<6.13, this is 6.13.0"),
            ),
            case("patch levels compare as numbers, not text", Some(">=6.12.9"), &[], "6.12.117", None),
            case("a release candidate counts as its release", Some(">=6.13"), &[], "6.13.0-rc3", None),
            case("a local suffix is ignored", Some("<=6.12.117"), &[], "6.12.117-dirty", None),
            case("strict bounds", Some(">6.12,<6.12.118"), &[], "6.12.117", None),
            case(
                "a release without a version cannot be judged",
                Some(">=6.4"),
                &[],
                "linux-next",
                Some("needs kernel >=6.4, and kernelrelease `linux-next` has no version"),
            ),
            case("a built-in option", None, &["CONFIG_USER_EVENTS"], "6.12.117", None),
            case("a module counts as present", None, &["CONFIG_LKDTM"], "6.12.117", None),
            case(
                "an unset option is missing",
                None,
                &["CONFIG_PERF_EVENTS"],
                "6.12.117",
                Some("needs CONFIG_PERF_EVENTS (y or m), the kernel has it `n`"),
            ),
            case(
                "an absent option is missing",
                None,
                &["CONFIG_KPROBES"],
                "6.12.117",
                Some("needs CONFIG_KPROBES (y or m), the kernel has it absent"),
            ),
            case("an exact value", None, &["CONFIG_HZ=250"], "6.12.117", None),
            case(
                "a wrong value",
                None,
                &["CONFIG_LKDTM=y"],
                "6.12.117",
                Some("needs CONFIG_LKDTM=y, the kernel has it `m`"),
            ),
            case("=n holds when unset", None, &["CONFIG_PERF_EVENTS=n"], "6.12.117", None),
            case("=n holds when absent", None, &["CONFIG_KPROBES=n"], "6.12.117", None),
            case(
                "=n fails when set",
                None,
                &["CONFIG_USER_EVENTS=n"],
                "6.12.117",
                Some("needs CONFIG_USER_EVENTS=n, the kernel has it `y`"),
            ),
            case(
                "every unmet need is told",
                Some(">=7.0"),
                &["CONFIG_PERF_EVENTS", "CONFIG_USER_EVENTS"],
                "6.12.117",
                Some("needs kernel >=7.0, this is 6.12.117; needs CONFIG_PERF_EVENTS (y or m), the kernel has it `n`"),
            ),
        ];
        for c in cases {
            let requires = Requires {
                kernel: c.kernel.map(String::from),
                config: c.config.iter().map(|s| s.to_string()).collect(),
            };
            let facts = KernelFacts { release: c.release, config: &cfg };
            assert_eq!(requires.unmet(&facts).as_deref(), c.skip, "{}", c.comment);
        }
    }

    #[test]
    fn kernel_ranges_and_versions_parse() {
        let bad = [
            ("", "bad kernel range ``: `` does not start with >=, >, <= or <"),
            ("6.4", "bad kernel range `6.4`: `6.4` does not start with >=, >, <= or <"),
            ("=6.4", "bad kernel range `=6.4`: `=6.4` does not start with >=, >, <= or <"),
            (">=6.4,", "bad kernel range `>=6.4,`: `` does not start with >=, >, <= or <"),
            (">=6.4.1.2", "bad kernel range `>=6.4.1.2`: `6.4.1.2` is not a version such as 6.4 or 6.12.117"),
            (">=v6.4", "bad kernel range `>=v6.4`: `v6.4` is not a version such as 6.4 or 6.12.117"),
        ];
        for (text, want) in bad {
            assert_eq!(KernelRange::parse(text).unwrap_err(), want);
        }
        assert_eq!(Version::from_release("6.12.117"), Some(Version(6, 12, 117)));
        assert_eq!(Version::from_release("6"), Some(Version(6, 0, 0)));
        assert_eq!(Version::from_release("6.13-rc1"), Some(Version(6, 13, 0)));
        assert_eq!(Version::from_release(""), None);
    }

    #[test]
    fn compile_plans_names_deadlines_and_skips() {
        let (name, text) = fixture("good/registration.yaml");
        let mut suite = parse(&name, &text).unwrap();
        let cfg = config(&[("CONFIG_USER_EVENTS", "y"), ("CONFIG_PERF_EVENTS", "y")]);
        let facts = KernelFacts { release: "6.12.117", config: &cfg };
        let c = compile(std::slice::from_ref(&suite), &facts, "x86_64");
        assert_eq!(c.plan.label, "x86_64");
        assert_eq!(c.plan.version, protocol::PROTOCOL_VERSION);
        let planned: Vec<(&str, u64)> = c.plan.scenarios.iter().map(|s| (s.name.as_str(), s.deadline_ms)).collect();
        assert_eq!(
            planned,
            [("registration/reg-basic", 3000), ("registration/reg-bad-size", 500), ("registration/perf-only", 3000)]
        );
        assert_eq!(c.plan.scenarios[0].steps, suite.scenarios[0].steps);
        assert_eq!(
            c.skipped,
            [Skipped {
                name: "registration/new-kernels-only".into(),
                reason: "needs kernel >=6.13, this is 6.12.117".into()
            }]
        );
        assert_eq!(
            c.marks.xfail,
            BTreeMap::from([(
                "registration/reg-bad-size".to_string(),
                "6.12.117 returns E2BIG here, the catalogue says EINVAL".to_string()
            )])
        );

        // Without the suite's default, the built-in one; a skipped xfail scenario is not in the map.
        suite.defaults.deadline_ms = None;
        let cfg = config(&[]);
        let c = compile(&[suite], &KernelFacts { release: "6.1.0", config: &cfg }, "arm64");
        let planned: Vec<(&str, u64)> = c.plan.scenarios.iter().map(|s| (s.name.as_str(), s.deadline_ms)).collect();
        assert_eq!(planned, [("registration/reg-basic", DEFAULT_DEADLINE_MS), ("registration/reg-bad-size", 500)]);
        assert_eq!(c.skipped.len(), 2);
        assert_eq!(c.skipped[0].reason, "needs kernel >=6.4, <6.13, this is 6.1.0; needs CONFIG_USER_EVENTS (y or m), the kernel has it absent; needs CONFIG_PERF_EVENTS (y or m), the kernel has it absent");
        assert_eq!(c.marks.xfail.len(), 1);
    }

    #[test]
    fn two_files_may_not_hold_one_suite() {
        let dir = tempfile::tempdir().unwrap();
        let (_, text) = fixture("good/registration.yaml");
        let mut paths = Vec::new();
        for sub in ["a", "b"] {
            std::fs::create_dir(dir.path().join(sub)).unwrap();
            let p = dir.path().join(sub).join("registration.yaml");
            std::fs::write(&p, &text).unwrap();
            paths.push(p);
        }
        let e = load_all(&paths).unwrap_err();
        assert_eq!(e.0.len(), 1);
        assert!(e.0[0].message.starts_with("suite `registration` is also in "), "{e}");
        assert_eq!(load_all(&paths[..1]).unwrap().len(), 1);
        let missing = load_all(&[dir.path().join("none.yaml")]).unwrap_err();
        assert!(missing.0[0].message.contains("No such file"), "{missing}");
    }

    /// Tidy: every suite in the checkout validates (none at all is fine).
    #[test]
    fn repository_suites_validate() {
        let files = files_in(&crate::project_root().join("suites")).unwrap();
        if let Err(e) = load_all(&files) {
            panic!("{e}");
        }
        assert!(files_in(Path::new("/no/such/dir")).unwrap().is_empty());
    }
}
