//! Line, branch and function coverage of kernel source files as lcov counts it: built from
//! gcov's JSON intermediate format (`gcov --json-format`), merged (summed) over scenarios,
//! boots and arches, written as lcov tracefiles (`TN`, `SF`, `FN`/`FNDA`/`FNF`/`FNH`, `DA`,
//! `BRDA`/`BRF`/`BRH`, `LF`/`LH`, the lcov 1.x format Debian's `lcov` and `genhtml` read) and
//! summed up. Sans-IO.

use std::collections::BTreeMap;

use anyhow::{bail, Context, Result};
use serde::Deserialize;

/// Found and hit, for lines, branches and functions (the run model's type, so a run's
/// coverage rows carry exactly what is summed here).
pub use crate::results::model::CoverageTotals as Totals;

/// The kernel's lock and RCU assertions. With `CONFIG_PROVE_LOCKING` and `CONFIG_PROVE_RCU` (the
/// debug profile) each expands to a `WARN_ON(debug_locks && !held)` whose branches only a locking
/// bug takes (6 on a `lockdep_assert_held()` line, 10 on an `rcu_dereference_sched()` one);
/// without them the same lines have none. Their branches are not counted, as geninfo leaves out
/// the branches of a line `lcov_excl_br_line` matches, so the debug kernel's branch figure
/// measures the code's own branches, as the other kernels' does.
pub const ASSERTIONS: &[&str] = &["lockdep_assert", "lockdep_is_held", "rcu_dereference"];

/// One source file's counts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FileCov {
    /// The path relative to the kernel tree (`kernel/trace/trace_events_user.c`).
    pub path: String,
    /// Executable line to its count.
    pub lines: BTreeMap<u32, u64>,
    /// (line, branch number on that line) to how often it was taken; `None` when its line never
    /// ran (lcov's `-`).
    pub branches: BTreeMap<(u32, u32), Option<u64>>,
    /// Function name to (first line, count).
    pub functions: BTreeMap<String, (u32, u64)>,
}

impl FileCov {
    pub fn totals(&self) -> Totals {
        Totals {
            lines_found: self.lines.len() as u64,
            lines_hit: self.lines.values().filter(|c| **c > 0).count() as u64,
            branches_found: self.branches.len() as u64,
            branches_hit: self.branches.values().filter(|c| c.is_some_and(|c| c > 0)).count() as u64,
            functions_found: self.functions.len() as u64,
            functions_hit: self.functions.values().filter(|(_, c)| *c > 0).count() as u64,
        }
    }

    /// Adds another run's counts of the same file: counts sum, a branch is `-` only while no
    /// side ran its line, lines and branches only one side has are kept (arches compile some
    /// lines and branches differently).
    pub fn merge(&mut self, other: &FileCov) {
        for (line, c) in &other.lines {
            *self.lines.entry(*line).or_default() += c;
        }
        for (k, c) in &other.branches {
            let e = self.branches.entry(*k).or_default();
            *e = match (*e, *c) {
                (None, None) => None,
                (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
            };
        }
        for (name, (line, c)) in &other.functions {
            self.functions.entry(name.clone()).or_insert((*line, 0)).1 += c;
        }
    }

    /// Drops the branches of lines that hold one of the kernel's lock or RCU assertions
    /// ([`ASSERTIONS`]; `text` is the source): what geninfo's `lcov_excl_br_line` does for lines
    /// that match it. Returns how many were dropped.
    pub fn drop_assertion_branches(&mut self, text: &str) -> usize {
        let lines: Vec<&str> = text.lines().collect();
        let asserts = |line: u32| {
            let t = lines.get(line as usize - 1).unwrap_or(&"");
            ASSERTIONS.iter().any(|a| t.contains(a))
        };
        let before = self.branches.len();
        self.branches.retain(|(line, _), _| !asserts(*line));
        before - self.branches.len()
    }

    /// Lines executed at least once.
    pub fn hit_lines(&self) -> impl Iterator<Item = u32> + '_ {
        self.lines.iter().filter(|(_, c)| **c > 0).map(|(l, _)| *l)
    }
}

#[derive(Deserialize)]
struct GcovJson {
    files: Vec<JsonFile>,
}

#[derive(Deserialize)]
struct JsonFile {
    file: String,
    #[serde(default)]
    functions: Vec<JsonFunction>,
    #[serde(default)]
    lines: Vec<JsonLine>,
}

#[derive(Deserialize)]
struct JsonFunction {
    name: String,
    start_line: u32,
    execution_count: u64,
}

#[derive(Deserialize)]
struct JsonLine {
    line_number: u32,
    count: u64,
    #[serde(default)]
    branches: Vec<JsonBranch>,
}

#[derive(Deserialize)]
struct JsonBranch {
    count: u64,
}

/// The file of gcov's JSON (one `.gcda`: the source and the headers inlined into it) whose
/// path ends in `source` (the build records the mirror's absolute path), as `source`.
pub fn from_gcov_json(json: &str, source: &str) -> Result<FileCov> {
    let parsed: GcovJson = serde_json::from_str(json).context("reading gcov's JSON output")?;
    let suffix = format!("/{source}");
    let Some(f) = parsed.files.into_iter().find(|f| f.file == source || f.file.ends_with(&suffix)) else {
        bail!("gcov's JSON output has no file ending in {source}");
    };
    let mut out = FileCov { path: source.to_string(), ..FileCov::default() };
    for l in &f.lines {
        // A line shared by two functions (a macro-made one) appears once per function.
        *out.lines.entry(l.line_number).or_default() += l.count;
    }
    for l in &f.lines {
        let base = out.branches.range((l.line_number, 0)..(l.line_number + 1, 0)).count() as u32;
        for (i, b) in l.branches.iter().enumerate() {
            let taken = (out.lines[&l.line_number] > 0).then_some(b.count);
            out.branches.insert((l.line_number, base + i as u32), taken);
        }
    }
    for func in &f.functions {
        out.functions.entry(func.name.clone()).or_insert((func.start_line, 0)).1 += func.execution_count;
    }
    Ok(out)
}

/// An lcov tracefile of these files under test name `test` (`[A-Za-z0-9_]`, as lcov wants).
pub fn tracefile(test: &str, files: &[&FileCov]) -> String {
    let tn: String = test.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect();
    let mut s = String::new();
    for f in files {
        let t = f.totals();
        s.push_str(&format!("TN:{tn}\nSF:{}\n", f.path));
        let mut by_line: Vec<(&String, &(u32, u64))> = f.functions.iter().collect();
        by_line.sort_by_key(|(name, (line, _))| (*line, (*name).clone()));
        for (name, (line, _)) in &by_line {
            s.push_str(&format!("FN:{line},{name}\n"));
        }
        for (name, (_, count)) in &by_line {
            s.push_str(&format!("FNDA:{count},{name}\n"));
        }
        s.push_str(&format!("FNF:{}\nFNH:{}\n", t.functions_found, t.functions_hit));
        for ((line, n), taken) in &f.branches {
            let taken = taken.map_or("-".to_string(), |c| c.to_string());
            s.push_str(&format!("BRDA:{line},0,{n},{taken}\n"));
        }
        s.push_str(&format!("BRF:{}\nBRH:{}\n", t.branches_found, t.branches_hit));
        for (line, count) in &f.lines {
            s.push_str(&format!("DA:{line},{count}\n"));
        }
        s.push_str(&format!("LF:{}\nLH:{}\nend_of_record\n", t.lines_found, t.lines_hit));
    }
    s
}

/// Reads a tracefile's line and function counts back, leaving out its branches: what a map of
/// scenarios needs, read several times faster than [`parse_tracefile`] (a map holds hundreds).
pub fn parse_lines(text: &str) -> Result<Vec<FileCov>> {
    let mut out = Vec::new();
    let mut cur: Option<FileCov> = None;
    for (n, line) in text.lines().enumerate() {
        let bad = || anyhow::anyhow!("tracefile line {}: {line}", n + 1);
        if let Some(v) = line.strip_prefix("DA:") {
            let (l, c) = v.split_once(',').ok_or_else(bad)?;
            let c = c.split(',').next().unwrap_or(c);
            let f = cur.as_mut().ok_or_else(bad)?;
            f.lines.insert(l.parse().map_err(|_| bad())?, c.parse().map_err(|_| bad())?);
        } else if let Some(v) = line.strip_prefix("FN:") {
            let (l, name) = v.split_once(',').ok_or_else(bad)?;
            let f = cur.as_mut().ok_or_else(bad)?;
            f.functions.insert(name.to_string(), (l.parse().map_err(|_| bad())?, 0));
        } else if let Some(v) = line.strip_prefix("FNDA:") {
            let (c, name) = v.split_once(',').ok_or_else(bad)?;
            let f = cur.as_mut().ok_or_else(bad)?;
            f.functions.entry(name.to_string()).or_default().1 = c.parse().map_err(|_| bad())?;
        } else if let Some(path) = line.strip_prefix("SF:") {
            cur = Some(FileCov { path: path.to_string(), ..FileCov::default() });
        } else if line == "end_of_record" {
            out.extend(cur.take());
        }
    }
    Ok(out)
}

/// Reads a tracefile back (the records this module writes; `TN` is not kept).
pub fn parse_tracefile(text: &str) -> Result<Vec<FileCov>> {
    let mut out = Vec::new();
    let mut cur: Option<FileCov> = None;
    let mut fn_lines: BTreeMap<String, u32> = BTreeMap::new();
    for (n, line) in text.lines().enumerate() {
        let bad = || anyhow::anyhow!("tracefile line {}: {line}", n + 1);
        let (key, value) = line.split_once(':').unwrap_or((line, ""));
        let nums = |v: &str| -> Option<Vec<u64>> { v.split(',').map(|x| x.parse().ok()).collect() };
        match key {
            "SF" => cur = Some(FileCov { path: value.to_string(), ..FileCov::default() }),
            "end_of_record" => out.extend(cur.take()),
            "TN" | "FNF" | "FNH" | "BRF" | "BRH" | "LF" | "LH" => {}
            _ => {
                let f = cur.as_mut().ok_or_else(bad)?;
                match key {
                    "FN" => {
                        let (l, name) = value.split_once(',').ok_or_else(bad)?;
                        fn_lines.insert(name.to_string(), l.parse().map_err(|_| bad())?);
                    }
                    "FNDA" => {
                        let (c, name) = value.split_once(',').ok_or_else(bad)?;
                        let line = fn_lines.get(name).copied().unwrap_or(0);
                        f.functions.insert(name.to_string(), (line, c.parse().map_err(|_| bad())?));
                    }
                    "DA" => {
                        let v = nums(value).filter(|v| v.len() >= 2).ok_or_else(bad)?;
                        f.lines.insert(v[0] as u32, v[1]);
                    }
                    "BRDA" => {
                        let p: Vec<&str> = value.split(',').collect();
                        let [l, _, b, t] = p[..] else { return Err(bad()) };
                        let taken = if t == "-" { None } else { Some(t.parse().map_err(|_| bad())?) };
                        f.branches.insert((l.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?), taken);
                    }
                    _ => return Err(bad()),
                }
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> String {
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("test_data/gcov").join(name);
        std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
    }

    #[test]
    fn branches_of_lock_and_rcu_assertions_are_dropped() {
        let text = "a();\n\tlockdep_assert_held(&event_mutex);\n\tif (x)\n\tp = rcu_dereference_sched(t->f);\n";
        let mut f = FileCov::default();
        for (line, n) in [(1, 0), (2, 0), (2, 1), (3, 0), (3, 1), (4, 0)] {
            f.branches.insert((line, n), Some(1));
        }
        assert_eq!(f.drop_assertion_branches(text), 3);
        assert_eq!(f.branches.keys().copied().collect::<Vec<_>>(), [(1, 0), (3, 0), (3, 1)]);
    }

    #[test]
    fn gcov_json_becomes_lines_branches_and_functions() {
        let f = from_gcov_json(&fixture("demo-3.json"), "demo.c").unwrap();
        assert_eq!(f.lines[&12], 4, "the loop's line ran 4 times");
        assert_eq!(f.lines[&4], 0, "del() never ran");
        assert_eq!(f.functions["del"], (2, 0));
        assert_eq!(f.functions["reg"], (9, 1));
        assert_eq!(f.branches[&(4, 0)], None, "a branch of a line that never ran is `-`");
        assert_eq!(f.branches[&(12, 0)], Some(3));
        let t = f.totals();
        assert_eq!((t.functions_found, t.functions_hit), (3, 2));
        assert!(t.lines_hit < t.lines_found && t.branches_hit < t.branches_found);
        let err = from_gcov_json(&fixture("demo-3.json"), "kernel/trace/trace_events_user.c").unwrap_err();
        assert!(err.to_string().contains("no file ending in kernel/trace/trace_events_user.c"));
    }

    #[test]
    fn tracefiles_round_trip_and_merge_sums() {
        let three = from_gcov_json(&fixture("demo-3.json"), "demo.c").unwrap();
        let seven = from_gcov_json(&fixture("demo-7.json"), "demo.c").unwrap();
        let text = tracefile("demo/three", &[&three]);
        assert!(text.starts_with("TN:demo_three\nSF:demo.c\nFN:2,del\n"), "{text}");
        assert!(text.contains("\nBRDA:4,0,0,-\n") && text.contains("\nDA:12,4\n"), "{text}");
        assert!(text.ends_with("end_of_record\n"));
        assert_eq!(parse_tracefile(&text).unwrap(), vec![three.clone()]);
        let lines_only = FileCov { branches: BTreeMap::new(), ..three.clone() };
        assert_eq!(parse_lines(&text).unwrap(), vec![lines_only], "lines and functions, no branches");

        let mut all = three.clone();
        all.merge(&seven);
        assert_eq!(all.functions["del"].1, 1, "the second run called del()");
        assert_eq!(all.lines[&4], 1);
        let line4: Vec<Option<u64>> = [0, 1].iter().map(|b| all.branches[&(4, *b)]).collect();
        assert_eq!(line4.iter().flatten().sum::<u64>(), 1, "ran once now, one way: {line4:?}");
        assert!(line4.iter().all(Option::is_some), "no longer `-`");
        let (a, b, m) = (three.totals(), seven.totals(), all.totals());
        assert!(m.lines_hit > a.lines_hit.max(b.lines_hit), "{a:?} {b:?} {m:?}");
        assert_eq!(m.lines_found, a.lines_found);
        // Merging is order-free.
        let mut other = seven.clone();
        other.merge(&three);
        assert_eq!(other, all);
    }
}
