//! The lines no scenario executes, tracked: each coverage run writes every instrumented line of
//! the union of its arches (`coverage/lines.tsv`: file, line, function, count per arch, source
//! text), and `suites/unexecuted-lines.tsv` lists the lines known to stay unexecuted, each with
//! its reason, keyed by file, function and source text (not line numbers, so an unrelated edit
//! does not move them). [`check`] compares the two: a line neither executed nor listed, a
//! listed line executed now, a listed line the run should have executed (`executed_with` a
//! configuration or arch the run had) and a listed line no longer in the source are findings.
//! `cargo xtask coverage --unexecuted RUN` prints them and fails on them. Sans-IO.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{bail, Context, Result};

use crate::coverage::lcov::FileCov;

/// The run folder's file of instrumented lines, relative to the run folder.
pub const LINES_TSV: &str = "coverage/lines.tsv";
/// The tracked list, relative to the checkout.
pub const TRACKED: &str = "suites/unexecuted-lines.tsv";
/// Why a line stays unexecuted.
/// `counter`: gcov gives the line a count of 0 though it runs (the compiler moved its code
/// into an inlined function's lines or a neighbour's, and a line it leads to executes).
pub const REASONS: [&str; 7] = ["boot", "allocation", "config", "arch", "unreachable", "untested", "counter"];

/// One instrumented line of a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    pub file: String,
    pub line: u32,
    pub function: String,
    /// Its count on each arch of the run, in run order (`None`: not instrumented there).
    pub counts: Vec<Option<u64>>,
    /// The source text, whitespace runs made one space, trimmed.
    pub text: String,
}

impl Line {
    pub fn executed(&self) -> bool {
        self.counts.iter().any(|c| c.is_some_and(|c| c > 0))
    }

    fn key(&self) -> (&str, &str, &str) {
        (&self.file, &self.function, &self.text)
    }
}

/// The key text of a source line: whitespace runs as one space, trimmed.
pub fn key_text(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Every instrumented line of `file` over the arches (each arch's counts of it, in order), with
/// the function it lies in (the one starting last at or before it) and its text in `source`.
pub fn lines(file: &str, per_arch: &[&FileCov], source: &str) -> Vec<Line> {
    let text: Vec<&str> = source.lines().collect();
    let mut starts: BTreeMap<u32, &str> = BTreeMap::new();
    for cov in per_arch {
        for (name, (line, _)) in &cov.functions {
            starts.insert(*line, name);
        }
    }
    let numbers: BTreeSet<u32> = per_arch.iter().flat_map(|c| c.lines.keys().copied()).collect();
    numbers
        .into_iter()
        .map(|n| Line {
            file: file.to_string(),
            line: n,
            function: starts.range(..=n).next_back().map_or("", |(_, f)| *f).to_string(),
            counts: per_arch.iter().map(|c| c.lines.get(&n).copied()).collect(),
            text: key_text(text.get(n as usize - 1).copied().unwrap_or("")),
        })
        .collect()
}

/// `coverage/lines.tsv`: a header naming the arches, then one row per line.
pub fn lines_tsv(arches: &[&str], lines: &[Line]) -> String {
    let mut out = format!("# file\tline\tfunction\t{}\ttext\n", arches.join("\t"));
    for l in lines {
        let counts: Vec<String> = l.counts.iter().map(|c| c.map_or("-".into(), |c| c.to_string())).collect();
        out.push_str(&format!("{}\t{}\t{}\t{}\t{}\n", l.file, l.line, l.function, counts.join("\t"), l.text));
    }
    out
}

/// Reads [`lines_tsv`]'s output: the arches and the lines.
pub fn parse_lines_tsv(text: &str) -> Result<(Vec<String>, Vec<Line>)> {
    let mut rows = text.lines();
    let header = rows.next().context("lines.tsv: empty")?;
    let cols: Vec<&str> = header.trim_start_matches("# ").split('\t').collect();
    if cols.len() < 5 || cols[..3] != ["file", "line", "function"] || cols[cols.len() - 1] != "text" {
        bail!("lines.tsv: unexpected header `{header}`");
    }
    let arches: Vec<String> = cols[3..cols.len() - 1].iter().map(|s| s.to_string()).collect();
    let mut out = Vec::new();
    for (i, row) in rows.enumerate() {
        let f: Vec<&str> = row.splitn(4 + arches.len(), '\t').collect();
        if f.len() != 4 + arches.len() {
            bail!("lines.tsv line {}: {} fields", i + 2, f.len());
        }
        let counts = f[3..3 + arches.len()]
            .iter()
            .map(|c| if *c == "-" { Ok(None) } else { c.parse().map(Some) })
            .collect::<Result<Vec<_>, _>>()
            .with_context(|| format!("lines.tsv line {}", i + 2))?;
        out.push(Line {
            file: f[0].into(),
            line: f[1].parse().with_context(|| format!("lines.tsv line {}", i + 2))?,
            function: f[2].into(),
            counts,
            text: f[3 + arches.len()].into(),
        });
    }
    Ok((arches, out))
}

/// When a listed line is executed after all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExecutedWith {
    /// Never, on any kernel the project builds.
    Never,
    /// On a kernel with this option `y` (`config:CONFIG_FAULT_INJECTION`: `--profile faults`).
    Config(String),
    /// When the run includes this arch (`arch:s390x`).
    Arch(String),
    /// In some runs only, as a race goes (`sometimes`): neither required nor stale.
    Sometimes,
}

/// A row of the tracked list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Its line in the tracked file.
    pub at: usize,
    pub file: String,
    pub function: String,
    pub text: String,
    pub reason: String,
    pub executed_with: ExecutedWith,
    pub why: String,
}

impl Entry {
    fn key(&self) -> (&str, &str, &str) {
        (&self.file, &self.function, &self.text)
    }

    /// The row as the tracked file has it.
    pub fn row(&self) -> String {
        let with = match &self.executed_with {
            ExecutedWith::Never => "-".to_string(),
            ExecutedWith::Config(c) => format!("config:{c}"),
            ExecutedWith::Arch(a) => format!("arch:{a}"),
            ExecutedWith::Sometimes => "sometimes".to_string(),
        };
        format!("{}\t{}\t{}\t{}\t{with}\t{}", self.file, self.function, self.text, self.reason, self.why)
    }
}

/// Reads the tracked list: `#` comments, then rows of file, function, text, reason,
/// executed_with (`-`, `sometimes`, `config:CONFIG_X`, `arch:NAME`) and why, tab-separated.
pub fn parse_tracked(text: &str) -> Result<Vec<Entry>> {
    let mut out: Vec<Entry> = Vec::new();
    let mut seen = BTreeSet::new();
    for (i, row) in text.lines().enumerate() {
        let at = i + 1;
        if row.trim().is_empty() || row.starts_with('#') {
            continue;
        }
        let f: Vec<&str> = row.split('\t').collect();
        if f.len() != 6 {
            bail!("{TRACKED}:{at}: {} fields, expected 6 (file, function, text, reason, executed_with, why)", f.len());
        }
        if !REASONS.contains(&f[3]) {
            bail!("{TRACKED}:{at}: reason `{}` is not one of {REASONS:?}", f[3]);
        }
        let executed_with = match f[4].split_once(':') {
            None if f[4] == "-" => ExecutedWith::Never,
            None if f[4] == "sometimes" => ExecutedWith::Sometimes,
            Some(("config", c)) if c.starts_with("CONFIG_") => ExecutedWith::Config(c.into()),
            Some(("arch", a)) if crate::arch::ARCHES.iter().any(|x| x.name == a) => ExecutedWith::Arch(a.into()),
            _ => bail!(
                "{TRACKED}:{at}: executed_with `{}` is not `-`, `sometimes`, `config:CONFIG_X` or `arch:NAME`",
                f[4]
            ),
        };
        if f[5].trim().is_empty() {
            bail!("{TRACKED}:{at}: no why");
        }
        if key_text(f[2]) != f[2] {
            bail!("{TRACKED}:{at}: the text must be the line's text with whitespace runs as one space, trimmed");
        }
        if !seen.insert((f[0], f[1], f[2])) {
            bail!("{TRACKED}:{at}: listed twice (file, function, text)");
        }
        out.push(Entry {
            at,
            file: f[0].into(),
            function: f[1].into(),
            text: f[2].into(),
            reason: f[3].into(),
            executed_with,
            why: f[5].into(),
        });
    }
    Ok(out)
}

/// What a run had: its arches, and the options set (`y` or `m`) on any of its kernels.
#[derive(Debug, Clone, Default)]
pub struct RunFacts {
    pub arches: Vec<String>,
    pub configs: BTreeSet<String>,
    /// Only some scenarios ran (`--filter`, `--suite`): lines neither executed nor listed, and
    /// listed lines the run should have executed, are not findings then.
    pub partial: bool,
}

impl RunFacts {
    fn has(&self, with: &ExecutedWith) -> bool {
        match with {
            ExecutedWith::Never | ExecutedWith::Sometimes => false,
            ExecutedWith::Config(c) => self.configs.contains(c),
            ExecutedWith::Arch(a) => self.arches.contains(a),
        }
    }
}

/// The findings of [`check`].
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// Unexecuted, and no entry names them.
    pub unlisted: Vec<Line>,
    /// Entries whose `executed_with` the run had, with the lines still unexecuted.
    pub should_run: Vec<(Entry, Vec<u32>)>,
    /// Entries whose every line the run executed (listed as unexecuted: the list is stale).
    pub executed: Vec<Entry>,
    /// Entries that name no instrumented line of the run's sources.
    pub missing: Vec<Entry>,
    /// Unexecuted lines by reason, listed ones only.
    pub by_reason: BTreeMap<String, usize>,
}

impl Report {
    pub fn ok(&self) -> bool {
        self.unlisted.is_empty() && self.should_run.is_empty() && self.executed.is_empty() && self.missing.is_empty()
    }

    /// One line per finding.
    pub fn describe(&self) -> Vec<String> {
        let mut out = Vec::new();
        for l in &self.unlisted {
            out.push(format!(
                "unlisted: {}:{} {}(): `{}` is executed by no scenario and not in {TRACKED}",
                l.file, l.line, l.function, l.text
            ));
        }
        for (e, lines) in &self.should_run {
            out.push(format!(
                "not executed: {TRACKED}:{} {}(): `{}` (line {lines:?}) is listed as executed with {:?}, which this run had",
                e.at, e.function, e.text, e.executed_with
            ));
        }
        for e in &self.executed {
            out.push(format!(
                "executed now: {TRACKED}:{} {}(): `{}`: remove it from the list",
                e.at, e.function, e.text
            ));
        }
        for e in &self.missing {
            out.push(format!(
                "not in the source: {TRACKED}:{} {}(): `{}` names no instrumented line (the source changed?)",
                e.at, e.function, e.text
            ));
        }
        out
    }
}

/// Compares a run's lines of the files it instrumented with the tracked list (entries of other
/// files are not judged).
pub fn check(entries: &[Entry], lines: &[Line], facts: &RunFacts) -> Report {
    let files: BTreeSet<&str> = lines.iter().map(|l| l.file.as_str()).collect();
    let mut by_key: BTreeMap<(&str, &str, &str), Vec<&Line>> = BTreeMap::new();
    for l in lines {
        by_key.entry(l.key()).or_default().push(l);
    }
    let listed: BTreeMap<(&str, &str, &str), &Entry> = entries.iter().map(|e| (e.key(), e)).collect();
    let mut report = Report::default();
    for l in lines.iter().filter(|l| !l.executed()) {
        match listed.get(&l.key()) {
            Some(e) => *report.by_reason.entry(e.reason.clone()).or_default() += 1,
            None if !facts.partial => report.unlisted.push(l.clone()),
            None => {}
        }
    }
    for e in entries.iter().filter(|e| files.contains(e.file.as_str())) {
        let Some(found) = by_key.get(&e.key()) else {
            report.missing.push(e.clone());
            continue;
        };
        let idle: Vec<u32> = found.iter().filter(|l| !l.executed()).map(|l| l.line).collect();
        if facts.has(&e.executed_with) {
            if !idle.is_empty() && !facts.partial {
                report.should_run.push((e.clone(), idle));
            }
        } else if idle.is_empty() && e.executed_with != ExecutedWith::Sometimes {
            report.executed.push(e.clone());
        }
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: &str =
        "int f(void)\n{\n\tif (!p)\n\t\treturn -ENOMEM;\n\tgoto out;\n}\nint g(void)\n{\n\tgoto out;\n}\n";

    fn cov(hits: &[(u32, u64)]) -> FileCov {
        FileCov {
            path: "a.c".into(),
            lines: hits.iter().copied().collect(),
            functions: [("f".to_string(), (1, 1)), ("g".to_string(), (7, 1))].into(),
            ..FileCov::default()
        }
    }

    fn entry(function: &str, text: &str, reason: &str, with: ExecutedWith) -> Entry {
        Entry {
            at: 1,
            file: "a.c".into(),
            function: function.into(),
            text: text.into(),
            reason: reason.into(),
            executed_with: with,
            why: "because".into(),
        }
    }

    #[test]
    fn lines_carry_their_function_and_text_and_read_back() {
        let x86 = cov(&[(3, 2), (4, 0), (5, 1), (9, 0)]);
        let arm = cov(&[(3, 1), (4, 0), (9, 1)]);
        let ls = lines("a.c", &[&x86, &arm], SRC);
        let keys: Vec<(u32, &str, &str, bool)> =
            ls.iter().map(|l| (l.line, l.function.as_str(), l.text.as_str(), l.executed())).collect();
        assert_eq!(
            keys,
            [
                (3, "f", "if (!p)", true),
                (4, "f", "return -ENOMEM;", false),
                (5, "f", "goto out;", true),
                (9, "g", "goto out;", true)
            ]
        );
        assert_eq!(ls[2].counts, [Some(1), None]);
        let tsv = lines_tsv(&["x86_64", "arm64"], &ls);
        assert!(tsv.starts_with("# file\tline\tfunction\tx86_64\tarm64\ttext\na.c\t3\tf\t2\t1\tif (!p)\n"), "{tsv}");
        assert_eq!(parse_lines_tsv(&tsv).unwrap(), (vec!["x86_64".to_string(), "arm64".into()], ls));
    }

    #[test]
    fn unexecuted_lines_must_be_listed_and_listed_lines_unexecuted() {
        // f's `return -ENOMEM;` never runs; g's `goto out;` runs; f's `goto out;` does not.
        let ls = lines("a.c", &[&cov(&[(3, 2), (4, 0), (5, 0), (9, 1)])], SRC);
        let facts = RunFacts { arches: vec!["x86_64".into()], ..RunFacts::default() };
        let r = check(&[], &ls, &facts);
        assert_eq!(r.unlisted.iter().map(|l| l.line).collect::<Vec<_>>(), [4, 5]);
        assert!(!r.ok());
        assert!(r.describe()[0].starts_with("unlisted: a.c:4 f(): `return -ENOMEM;`"), "{:?}", r.describe());

        let faults = ExecutedWith::Config("CONFIG_FAULT_INJECTION".into());
        let list = [
            entry("f", "return -ENOMEM;", "allocation", faults.clone()),
            entry("f", "goto out;", "untested", ExecutedWith::Never),
            entry("g", "goto out;", "unreachable", ExecutedWith::Never),
            entry("h", "gone();", "unreachable", ExecutedWith::Never),
            entry("f", "if (!p)", "untested", ExecutedWith::Sometimes),
        ];
        let r = check(&list, &ls, &facts);
        assert!(r.unlisted.is_empty());
        // g's line runs: stale; f's `if (!p)` runs too, but only sometimes does.
        assert_eq!(r.executed.iter().map(|e| e.function.as_str()).collect::<Vec<_>>(), ["g"], "g's line runs");
        assert_eq!(r.missing.iter().map(|e| e.function.as_str()).collect::<Vec<_>>(), ["h"]);
        assert_eq!(r.by_reason, [("allocation".to_string(), 1), ("untested".into(), 1)].into());

        // On a kernel with fault injection the allocation failure must run.
        let with = RunFacts { configs: ["CONFIG_FAULT_INJECTION".to_string()].into(), ..facts.clone() };
        let r = check(&list[..2], &ls, &with);
        assert_eq!(r.should_run.len(), 1);
        assert_eq!(r.should_run[0].1, [4]);
        let ran = lines("a.c", &[&cov(&[(3, 2), (4, 1), (5, 0), (9, 1)])], SRC);
        assert!(check(&list[..2], &ran, &with).ok());
        // A partial run judges only what it executed.
        let partial = RunFacts { partial: true, ..with };
        let r = check(&list[..2], &lines("a.c", &[&cov(&[(3, 0), (4, 0), (5, 0), (9, 0)])], SRC), &partial);
        assert!(r.ok(), "{:?}", r.describe());
    }

    #[test]
    fn the_tracked_list_is_checked_when_read() {
        let ok = "# c\na.c\tf\treturn -ENOMEM;\tallocation\tconfig:CONFIG_FAILSLAB\twhy\n";
        let e = parse_tracked(ok).unwrap();
        assert_eq!(e[0].executed_with, ExecutedWith::Config("CONFIG_FAILSLAB".into()));
        assert_eq!(e[0].at, 2);
        assert_eq!(e[0].row(), ok.lines().nth(1).unwrap());
        for (bad, says) in [
            ("a.c\tf\tx;\tmaybe\t-\twhy", "reason `maybe`"),
            ("a.c\tf\tx;\tboot\tnow and then\twhy", "executed_with `now and then`"),
            ("a.c\tf\tx;\tboot\tarch:vax\twhy", "executed_with `arch:vax`"),
            ("a.c\tf\t x;\tboot\t-\twhy", "whitespace"),
            ("a.c\tf\tx;\tboot\t-", "5 fields"),
            ("a.c\tf\tx;\tboot\t-\twhy\na.c\tf\tx;\tboot\t-\twhy", "listed twice"),
        ] {
            let e = parse_tracked(bad).unwrap_err().to_string();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    /// The tracked list of the checkout reads, and names only the instrumented default source.
    #[test]
    fn the_checkout_list_reads() {
        let root = crate::support::checkout::project_root();
        let text = std::fs::read_to_string(root.join(TRACKED)).unwrap();
        let entries = parse_tracked(&text).unwrap();
        assert!(!entries.is_empty());
        assert!(entries.iter().all(|e| e.file == crate::kernel::gcov::DEFAULT_FILE));
    }
}
