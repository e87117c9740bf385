//! Picking scenarios: `--filter GLOB` on `suite/scenario` names (repeatable; `!GLOB` excludes)
//! and `--rerun-failed [RUN]` (the failed, timed-out and not-run scenarios of a run, per arch),
//! applied to each arch's compiled plan; `--list` prints what was picked.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::Result;

use crate::support::exit::{error, Kind};

/// Which scenarios a command runs. The default picks every one.
#[derive(Debug, Clone, Default)]
pub struct Selection {
    include: Vec<String>,
    exclude: Vec<String>,
    /// `--rerun-failed`: per arch, the names to run again, and the run they came from.
    rerun: Option<(PathBuf, BTreeMap<String, BTreeSet<String>>)>,
    /// `validate` with a coverage map: per arch, the scenarios that run first (the ones that
    /// executed the changed lines), in their order, and whether they are the only ones
    /// (`--affected`).
    first: BTreeMap<String, Vec<String>>,
    only_first: bool,
    /// `--in-filter-order`: on every arch, a scenario comes at the place of the first
    /// `--filter` it matches.
    in_filter_order: bool,
}

impl Selection {
    /// From the flags; `results` is where `--rerun-failed latest` (or a bare run id) is looked up.
    pub fn new(filters: &[String], rerun_failed: Option<&Path>, results: &Path) -> Result<Selection> {
        let mut sel = Selection::default();
        for f in filters {
            let (list, glob) = match f.strip_prefix('!') {
                Some(g) => (&mut sel.exclude, g),
                None => (&mut sel.include, f.as_str()),
            };
            if glob.is_empty() {
                return Err(error(Kind::BadInput, format!("--filter `{f}`: an empty pattern")));
            }
            list.push(glob.to_string());
        }
        if let Some(run) = rerun_failed {
            let dir = if run.exists() { run.to_path_buf() } else { results.join(run) };
            let file = dir.join(crate::judging::run_folder::RUN_JSON);
            let model = crate::results::compare::read_run_json(&file)
                .map_err(|e| error(Kind::BadInput, format!("--rerun-failed {}: {e:#}", run.display())))?;
            let failed = model
                .arches
                .iter()
                .map(|a| {
                    let names = a.scenarios.iter().filter(|s| s.status.is_failure()).map(|s| s.name.clone());
                    (a.arch.clone(), names.collect())
                })
                .collect();
            sel.rerun = Some((dir, failed));
        }
        Ok(sel)
    }

    /// Only these scenarios per arch, of run folder `dir`: what `--rerun-failed` picks, narrowed
    /// (`run`'s re-run of the failures whose history flips).
    pub fn rerunning(dir: PathBuf, by_arch: BTreeMap<String, BTreeSet<String>>) -> Selection {
        Selection { rerun: Some((dir, by_arch)), ..Selection::default() }
    }

    /// Whether `arch` runs scenario `name` (`suite/scenario`).
    pub fn wants(&self, arch: &str, name: &str) -> bool {
        let included = self.include.is_empty() || self.include.iter().any(|g| glob(g, name));
        let excluded = self.exclude.iter().any(|g| glob(g, name));
        let rerun = self.rerun.as_ref().is_none_or(|(_, by_arch)| by_arch.get(arch).is_some_and(|s| s.contains(name)));
        included && !excluded && rerun && (!self.only_first || self.is_first(arch, name))
    }

    /// Puts these scenarios (per arch, in this order) first in each plan, or with `only` runs
    /// only them.
    pub fn put_first(&mut self, by_arch: BTreeMap<String, Vec<String>>, only: bool) {
        self.first = by_arch;
        self.only_first = only;
    }

    /// Whether scenario `name` runs first on `arch`.
    pub fn is_first(&self, arch: &str, name: &str) -> bool {
        self.rank(arch, name) != usize::MAX
    }

    /// Where scenario `name` comes in `arch`'s plan: its place among the first ones, or
    /// `usize::MAX` for the rest (which keep their order).
    pub fn rank(&self, arch: &str, name: &str) -> usize {
        let first = self.first.get(arch).and_then(|s| s.iter().position(|n| n == name));
        let by_filter = || self.include.iter().position(|g| glob(g, name)).filter(|_| self.in_filter_order);
        first.or_else(by_filter).unwrap_or(usize::MAX)
    }

    /// `--in-filter-order`.
    pub fn in_filter_order(mut self, on: bool) -> Selection {
        self.in_filter_order = on;
        self
    }

    /// Whether anything narrows the choice.
    pub fn narrows(&self) -> bool {
        !self.include.is_empty() || !self.exclude.is_empty() || self.rerun.is_some() || self.only_first
    }

    /// What picked the scenarios, for messages: `--filter 'process/*'`, `--rerun-failed RUN`.
    pub fn describe(&self) -> String {
        let mut parts: Vec<String> = self.include.iter().map(|g| format!("--filter '{g}'")).collect();
        parts.extend(self.exclude.iter().map(|g| format!("--filter '!{g}'")));
        if let Some((dir, _)) = &self.rerun {
            parts.push(format!("--rerun-failed {}", dir.display()));
        }
        if self.only_first {
            parts.push("--affected".into());
        }
        parts.join(" ")
    }

    /// The failed scenarios `--rerun-failed` found, over every arch.
    /// `--rerun-failed`: the arches that have something to rerun.
    pub fn rerun_arches(&self) -> Option<Vec<&str>> {
        self.rerun
            .as_ref()
            .map(|(_, by_arch)| by_arch.iter().filter(|(_, s)| !s.is_empty()).map(|(a, _)| a.as_str()).collect())
    }

    pub fn rerun_count(&self) -> Option<usize> {
        self.rerun.as_ref().map(|(_, by_arch)| by_arch.values().map(BTreeSet::len).sum())
    }
}

/// Shell-style glob over the whole text: `*` any run of characters (`/` included), `?` one
/// character, anything else itself.
pub fn glob(pattern: &str, text: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    // Iterative matching with one backtrack point for the last `*`.
    let (mut pi, mut ti, mut star, mut mark) = (0, 0, None, 0);
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ti;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ti = mark;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_filter_order_puts_each_scenario_at_its_first_filter() {
        let filters: Vec<String> = ["b/slow", "a/*", "!a/skip"].iter().map(|s| s.to_string()).collect();
        let sel = Selection::new(&filters, None, Path::new("/nowhere")).unwrap();
        assert_eq!(sel.rank("x86_64", "a/one"), usize::MAX, "the suites' order without the flag");
        let sel = sel.in_filter_order(true);
        assert_eq!(sel.rank("x86_64", "b/slow"), 0);
        assert_eq!(sel.rank("s390x", "a/one"), 1, "on every arch");
        assert_eq!(sel.rank("x86_64", "c/other"), usize::MAX);
    }

    #[test]
    fn globs_match_whole_names() {
        assert!(glob("process/*", "process/fork-copies-bits"));
        assert!(!glob("process/*", "processes/x"));
        assert!(glob("*fork*", "process/fork-copies-bits"));
        assert!(glob("a/?", "a/b"));
        assert!(!glob("a/?", "a/bc"));
        assert!(glob("*", ""));
        assert!(glob("a*b*c", "a-x-b-y-c"));
        assert!(!glob("a*b*c", "a-x-b-y"));
        assert!(glob("limits/the-count-drops-when-an-event-goes", "limits/the-count-drops-when-an-event-goes"));
    }

    #[test]
    fn filters_include_then_exclude() {
        let dir = tempfile::tempdir().unwrap();
        let f = |v: &[&str]| Selection::new(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>(), None, dir.path());
        let all = f(&[]).unwrap();
        assert!(all.wants("x86_64", "a/b") && !all.narrows());
        let s = f(&["process/*", "writes/*", "!*/fork-*"]).unwrap();
        assert!(s.wants("x86_64", "process/exec-clears") && s.wants("arm64", "writes/x"));
        assert!(!s.wants("x86_64", "process/fork-copies") && !s.wants("x86_64", "limits/x"));
        assert_eq!(s.describe(), "--filter 'process/*' --filter 'writes/*' --filter '!*/fork-*'");
        let only_out = f(&["!perf*"]).unwrap();
        assert!(only_out.wants("x86_64", "registration/a") && !only_out.wants("x86_64", "performance/b"));
        assert_eq!(crate::support::exit::code_for(&f(&["!"]).unwrap_err()), 128);
    }

    #[test]
    fn rerun_failed_reads_a_run_per_arch() {
        let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("test_data/results/golden");
        let s = Selection::new(&[], Some(&fixture), Path::new("/nonexistent")).unwrap();
        let model = crate::results::compare::read_run_json(&fixture.join("run.json")).unwrap();
        for a in &model.arches {
            for sc in &a.scenarios {
                assert_eq!(s.wants(&a.arch, &sc.name), sc.status.is_failure(), "{} {}", a.arch, sc.name);
            }
        }
        assert!(s.rerun_count().unwrap() > 0);
        // The arches with a failure, which `run --rerun-failed` boots when --arch is not given.
        let failing: Vec<&str> = model
            .arches
            .iter()
            .filter(|a| a.scenarios.iter().any(|sc| sc.status.is_failure()))
            .map(|a| a.arch.as_str())
            .collect();
        let mut got = s.rerun_arches().unwrap();
        got.sort_unstable();
        let mut want = failing.clone();
        want.sort_unstable();
        assert_eq!(got, want);
        assert_eq!(Selection::new(&[], None, Path::new("/nonexistent")).unwrap().rerun_arches(), None);
        let err = Selection::new(&[], Some(Path::new("no-such-run")), Path::new("/nonexistent")).unwrap_err();
        assert_eq!(crate::support::exit::code_for(&err), 128);
        assert!(err.to_string().starts_with("--rerun-failed no-such-run: "), "{err}");
    }

    #[test]
    fn the_affected_scenarios_run_first_or_alone_per_arch() {
        let mut s = Selection::new(&["registration/*".into()], None, Path::new("/nonexistent")).unwrap();
        let first = [("x86_64".to_string(), vec!["registration/c".to_string(), "registration/a".to_string()])].into();
        s.put_first(first, false);
        assert_eq!((s.rank("x86_64", "registration/c"), s.rank("x86_64", "registration/a")), (0, 1));
        assert_eq!(s.rank("x86_64", "registration/b"), usize::MAX);
        assert!(s.is_first("x86_64", "registration/a") && !s.is_first("arm64", "registration/a"));
        assert!(s.wants("x86_64", "registration/b"), "first, not alone");
        assert!(!s.wants("x86_64", "process/a"), "--filter still applies");
        let mut alone = Selection::default();
        assert!(!alone.narrows());
        alone.put_first([("x86_64".to_string(), vec!["registration/a".to_string()])].into(), true);
        assert!(alone.wants("x86_64", "registration/a") && !alone.wants("x86_64", "registration/b"));
        assert!(!alone.wants("arm64", "registration/a"), "per arch");
        assert!(alone.narrows());
        assert_eq!(alone.describe(), "--affected");
    }
}
