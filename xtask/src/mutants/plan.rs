//! What running each mutant takes: the scenarios that execute its lines, per arch, from a
//! coverage run's per-scenario tracefiles (`<run>/coverage/<arch>/<suite>/<scenario>.info`,
//! `--coverage-map RUN`); none means NoCoverage without a build. A mutant on a line gcov gives
//! no counter of its own (a `return x;`, a declaration merged into a neighbour's code) is
//! covered where the counted lines just before and after it in its function are. The state
//! file keeps each finished mutant's result (one JSON line each, appended as it ends), so a
//! second run skips them.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::coverage::lcov;
use crate::coverage::runs::BOOT;
use crate::mutants::mutant::Mutant;
use crate::mutants::report::{MutantResult, Outcome};

/// One arch's coverage of the mutated file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ArchMap {
    /// The lines gcov counts (has a `DA` record for), in any scenario.
    pub counted: BTreeSet<u32>,
    /// The first line of each function (`FN` records).
    pub functions: BTreeSet<u32>,
    /// Per scenario (`suite/name`), the lines it executed.
    pub scenarios: BTreeMap<String, BTreeSet<u32>>,
    /// Per scenario, how long it took in the map's run (ms), where the run says.
    pub durations: BTreeMap<String, u64>,
}

impl ArchMap {
    /// The counted lines that stand for a mutant: its own, or when gcov counts none of them,
    /// the counted lines just before and after it inside its function; with none after it (a
    /// function's last `return x;`), the function's first counted line too, since the line
    /// before may sit in a branch that returns early and is never taken.
    pub fn lines_of(&self, m: &Mutant) -> Vec<u32> {
        let own: Vec<u32> = m.lines().filter(|l| self.counted.contains(l)).collect();
        if !own.is_empty() {
            return own;
        }
        let start = self.functions.range(..=m.line).next_back().copied().unwrap_or(0);
        let end = self.functions.range(m.line + 1..).next().copied().unwrap_or(u32::MAX);
        let before = self.counted.range(start..m.line).next_back().copied();
        let after = self.counted.range(m.end_line + 1..end).next().copied();
        let entry = if after.is_none() { self.counted.range(start..m.line).next().copied() } else { None };
        let mut out: Vec<u32> = entry.into_iter().chain(before).chain(after).collect();
        out.dedup();
        out
    }
}

/// Per arch, the coverage of the mutated file.
pub type CoverageMap = BTreeMap<String, ArchMap>;

/// Reads the per-scenario tracefiles of a coverage run for `file` (a path in the kernel tree).
pub fn read_coverage_map(run_dir: &Path, file: &str) -> Result<CoverageMap> {
    let dir = run_dir.join(crate::coverage::runs::DIR);
    let mut map = CoverageMap::new();
    let arches = std::fs::read_dir(&dir).with_context(|| {
        format!("--coverage-map: {} has no coverage folder (a `run --coverage` makes one)", run_dir.display())
    })?;
    for arch in arches.flatten().filter(|e| e.path().is_dir()) {
        let arch_name = arch.file_name().to_string_lossy().into_owned();
        let arch_map = map.entry(arch_name).or_default();
        let mut stack = vec![arch.path()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d)?.flatten() {
                let p = e.path();
                if p.is_dir() {
                    stack.push(p);
                } else if p.extension().is_some_and(|x| x == "info") {
                    let rel = p.strip_prefix(arch.path()).expect("below the arch folder").with_extension("");
                    let text = std::fs::read_to_string(&p).with_context(|| format!("reading {}", p.display()))?;
                    let files = lcov::parse_lines(&text).with_context(|| p.display().to_string())?;
                    let mut hit = BTreeSet::new();
                    for f in files.iter().filter(|f| f.path == file) {
                        arch_map.counted.extend(f.lines.keys());
                        arch_map.functions.extend(f.functions.values().map(|(line, _)| *line));
                        hit.extend(f.hit_lines());
                    }
                    arch_map.scenarios.insert(rel.to_string_lossy().into_owned(), hit);
                }
            }
        }
    }
    from_the_run(&mut map, run_dir)?;
    Ok(map)
}

/// What the map's `run.json` adds: each scenario's duration, and leaves out the scenarios the
/// run judged `xfail` on an arch: one expected to fail tells nothing about a mutant (its
/// failure is expected either way), and what it leaves behind can end the boot early
/// (`fork-storms-while-the-event-toggles` leaves an event it cannot delete), turning every
/// scenario after it into collateral.
fn from_the_run(map: &mut CoverageMap, run_dir: &Path) -> Result<()> {
    let run_json = run_dir.join(crate::judging::run_folder::RUN_JSON);
    if !run_json.exists() {
        return Ok(());
    }
    let run = crate::results::compare::read_run_json(&run_json)?;
    for arch in &run.arches {
        let Some(arch_map) = map.get_mut(&arch.arch) else { continue };
        for s in &arch.scenarios {
            if s.status == crate::results::model::Status::Xfail {
                arch_map.scenarios.remove(&s.name);
            } else if let Some(ms) = s.duration_ms {
                arch_map.durations.insert(s.name.clone(), ms);
            }
        }
    }
    Ok(())
}

/// Leaves `names` (`suite/name`) out of every arch's map.
pub fn leave_out(map: &mut CoverageMap, names: &BTreeSet<String>) {
    for arch in map.values_mut() {
        arch.scenarios.retain(|s, _| !names.contains(s));
    }
}

/// What a mutant needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Decided without a build: finished in an earlier run, listed as equivalent, or covered by
    /// no scenario.
    Decided(MutantResult),
    /// Build it and run these scenarios on these arches.
    Run { scenarios: BTreeMap<String, Vec<String>> },
}

/// Whether a plan's step is the tracked list's verdict (Equivalent).
pub fn is_equivalent(step: &Step) -> bool {
    matches!(step, Step::Decided(r) if matches!(r.outcome, Outcome::Equivalent { .. }))
}

/// Each mutant's step, in the mutants' order. Without a coverage map nothing is NoCoverage:
/// what is not decided is a `Run` with no scenarios known.
pub fn plan(
    mutants: &[Mutant],
    coverage: Option<&CoverageMap>,
    equivalent: &BTreeMap<String, String>,
    done: &BTreeMap<String, MutantResult>,
) -> Vec<(String, Step)> {
    mutants
        .iter()
        .map(|m| {
            let decided = |outcome| {
                Step::Decided(MutantResult {
                    id: m.id.clone(),
                    outcome,
                    covered_by: vec![],
                    duration_ms: None,
                    stage: None,
                })
            };
            // The tracked list wins over a result kept from before the mutant was listed.
            let step = if let Some(reason) = equivalent.get(&m.id) {
                decided(Outcome::Equivalent { reason: reason.clone() })
            } else if let Some(r) = done.get(&m.id) {
                Step::Decided(r.clone())
            } else if let Some(coverage) = coverage {
                let scenarios: BTreeMap<String, Vec<String>> = coverage
                    .iter()
                    .map(|(arch, map)| {
                        let stand_for = map.lines_of(m);
                        let runs = |lines: &BTreeSet<u32>| stand_for.iter().any(|l| lines.contains(l));
                        let scenarios = map.scenarios.iter().filter(|(s, _)| *s != BOOT);
                        let mut hit: Vec<String> =
                            scenarios.clone().filter(|(_, lines)| runs(lines)).map(|(s, _)| s.clone()).collect();
                        // Code only the boot runs makes what every scenario stands on.
                        if hit.is_empty() && map.scenarios.get(BOOT).is_some_and(runs) {
                            hit = scenarios.map(|(s, _)| s.clone()).collect();
                        }
                        // Fastest first (as PIT orders a mutant's tests): the first failure
                        // kills, so a quick one saves the slow ones' time. Unknown ones last.
                        hit.sort_by_key(|s| map.durations.get(s).copied().unwrap_or(u64::MAX));
                        (arch.clone(), hit)
                    })
                    .filter(|(_, s)| !s.is_empty())
                    .collect();
                if scenarios.is_empty() {
                    decided(Outcome::NoCoverage)
                } else {
                    Step::Run { scenarios }
                }
            } else {
                Step::Run { scenarios: BTreeMap::new() }
            };
            (m.id.clone(), step)
        })
        .collect()
}

/// One stage of a run: a coverage map, and the profiles its mutants' kernels are built with.
#[derive(Debug, Clone)]
pub struct Stage {
    /// Said in the state file and the progress lines: `x86_64 faults+kmemleak, map RUN_ID`.
    pub label: String,
    pub map: CoverageMap,
    pub profiles: Vec<String>,
    /// At most this many of a mutant's covering scenarios run at this stage (the fastest).
    pub cap: Option<usize>,
}

impl Stage {
    /// A label from the map's arches, the profiles, the cap and the map's folder name.
    pub fn new(run_dir: &Path, map: CoverageMap, profiles: Vec<String>, cap: Option<usize>) -> Stage {
        let arches: Vec<&str> = map.keys().map(String::as_str).collect();
        let folder = run_dir.canonicalize().unwrap_or_else(|_| run_dir.to_path_buf());
        let folder = folder.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
        let kernel = if profiles.is_empty() { "default".to_string() } else { profiles.join("+") };
        let capped = cap.map(|n| format!(", the {n} fastest scenarios")).unwrap_or_default();
        Stage { label: format!("{} {kernel}{capped}, map {folder}", arches.join(",")), map, profiles, cap }
    }

    /// A plan's covering scenarios cut to the stage's cap (they come fastest first).
    pub fn capped(&self, mut step: Step) -> Step {
        if let (Step::Run { scenarios }, Some(n)) = (&mut step, self.cap) {
            scenarios.values_mut().for_each(|s| s.truncate(n));
        }
        step
    }
}

/// Whether a mutant with the kept result `kept` runs at stage `k` (of these labels): when
/// nothing is kept, or it survived an earlier stage (a result from before stages, or from a
/// stage not among these, is final).
pub fn goes_on(kept: Option<&MutantResult>, k: usize, labels: &[&str]) -> bool {
    match kept {
        None => true,
        Some(r) if r.outcome == Outcome::Survived => {
            r.stage.as_deref().and_then(|s| labels.iter().position(|l| *l == s)).is_some_and(|j| j < k)
        }
        Some(_) => false,
    }
}

/// The plan over several stages: a mutant not decided runs at the first stage whose map
/// covers it; NoCoverage when none does. `per_stage` holds each stage's [`plan`], in order.
pub fn first_covering(per_stage: Vec<Vec<(String, Step)>>) -> Vec<(String, Step)> {
    let mut stages = per_stage.into_iter();
    let Some(first) = stages.next() else { return vec![] };
    let rest: Vec<BTreeMap<String, Step>> = stages.map(|p| p.into_iter().collect()).collect();
    first
        .into_iter()
        .map(|(id, step)| {
            let no_coverage = |s: &Step| matches!(s, Step::Decided(r) if r.outcome == Outcome::NoCoverage);
            let step = if no_coverage(&step) {
                rest.iter().filter_map(|p| p.get(&id)).find(|s| !no_coverage(s)).cloned().unwrap_or(step)
            } else {
                step
            };
            (id, step)
        })
        .collect()
}

/// The state file of a mutants run: `<results>/state.jsonl`.
pub fn state_file(results: &Path) -> PathBuf {
    results.join("state.jsonl")
}

/// The results kept so far; a last line cut short by an interrupt is ignored (that mutant runs
/// again), a later result of the same id wins.
pub fn load_state(path: &Path) -> Result<BTreeMap<String, MutantResult>> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let mut out = BTreeMap::new();
    for (n, line) in lines.iter().enumerate() {
        match serde_json::from_str::<MutantResult>(line) {
            Ok(r) => {
                out.insert(r.id.clone(), r);
            }
            Err(_) if n + 1 == lines.len() && !text.ends_with('\n') => {}
            Err(e) => return Err(e).with_context(|| format!("{} line {}", path.display(), n + 1)),
        }
    }
    Ok(out)
}

/// Appends one finished mutant's result, flushed to disk before the next mutant starts.
pub fn append_state(path: &Path, result: &MutantResult) -> Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("opening {}", path.display()))?;
    writeln!(f, "{}", serde_json::to_string(result)?)?;
    f.sync_data()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: &str = "int f(int x)\n{\n\tif (x < 2)\n\t\treturn -EINVAL;\n\treturn x + 1;\n}\n";

    fn tracefile(lines: &[u32]) -> String {
        let mut f = lcov::FileCov { path: "kernel/x.c".into(), ..Default::default() };
        f.lines = (1..=6).map(|l| (l, u64::from(lines.contains(&l)))).collect();
        lcov::tracefile("t", &[&f])
    }

    #[test]
    fn the_covering_scenarios_per_arch_from_a_coverage_run() {
        let run = tempfile::tempdir().unwrap();
        let write = |rel: &str, text: &str| {
            let p = run.path().join("coverage").join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        };
        write("x86_64/abi/bad-args.info", &tracefile(&[3, 4]));
        write("x86_64/abi/ok.info", &tracefile(&[3, 5]));
        write("s390x/abi/ok.info", &tracefile(&[3]));
        write("x86_64.info", &tracefile(&[3, 4, 5])); // the arch's sum: not a scenario
        let map = read_coverage_map(run.path(), "kernel/x.c").unwrap();
        assert_eq!(map["x86_64"].scenarios.keys().collect::<Vec<_>>(), ["abi/bad-args", "abi/ok"]);
        assert_eq!(map["s390x"].scenarios["abi/ok"], [3].into());
        assert_eq!(map["x86_64"].counted, (1..=6).collect());

        let ms = crate::mutants::find::mutants("kernel/x.c", SRC).unwrap();
        let (ret_einval, ret_x) =
            (&ms.iter().find(|m| m.line == 4).unwrap().id, &ms.iter().find(|m| m.line == 5).unwrap().id);
        let mut equivalent = BTreeMap::new();
        let negate = ms.iter().find(|m| m.change().starts_with("(x < 2)")).unwrap();
        equivalent.insert(negate.id.clone(), "a reviewer's reason".to_string());
        let done_result = MutantResult {
            id: ret_x.clone(),
            outcome: Outcome::Survived,
            covered_by: vec!["abi/ok".into()],
            duration_ms: Some(9),
            stage: None,
        };
        let done = BTreeMap::from([(ret_x.clone(), done_result.clone())]);
        let mut done = done;
        done.insert(
            negate.id.clone(),
            MutantResult {
                id: negate.id.clone(),
                outcome: Outcome::Survived,
                covered_by: vec![],
                duration_ms: None,
                stage: None,
            },
        );
        let steps: BTreeMap<String, Step> = plan(&ms, Some(&map), &equivalent, &done).into_iter().collect();
        assert_eq!(steps.len(), ms.len());
        assert_eq!(
            steps[ret_einval],
            Step::Run { scenarios: BTreeMap::from([("x86_64".to_string(), vec!["abi/bad-args".to_string()])]) }
        );
        assert_eq!(steps[ret_x], Step::Decided(done_result), "finished earlier: skipped");
        let Step::Decided(eq) = &steps[&negate.id] else { panic!() };
        assert_eq!(
            eq.outcome,
            Outcome::Equivalent { reason: "a reviewer's reason".into() },
            "the list wins over a kept Survived"
        );
        let boundary = ms.iter().find(|m| m.original == "<").unwrap();
        let Step::Run { scenarios } = &steps[&boundary.id] else { panic!() };
        assert_eq!(scenarios["s390x"], ["abi/ok"], "line 3 runs on s390x too");
        assert!(read_coverage_map(&run.path().join("nothing"), "kernel/x.c").is_err());
    }

    #[test]
    fn scenarios_the_map_run_expected_to_fail_are_left_out() {
        let run = tempfile::tempdir().unwrap();
        let model = crate::results::tests::fixture();
        let xfail = model
            .arches
            .iter()
            .flat_map(|a| a.scenarios.iter().map(move |s| (a.arch.clone(), s)))
            .find(|(_, s)| s.status == crate::results::model::Status::Xfail)
            .map(|(arch, s)| (arch, s.name.clone()))
            .expect("the fixture has an xfail scenario");
        std::fs::write(run.path().join("run.json"), serde_json::to_string(&model).unwrap()).unwrap();
        for name in [xfail.1.as_str(), "abi/ok"] {
            let p = run.path().join("coverage").join(&xfail.0).join(format!("{name}.info"));
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, tracefile(&[3])).unwrap();
        }
        let mut map = read_coverage_map(run.path(), "kernel/x.c").unwrap();
        assert_eq!(map[&xfail.0].scenarios.keys().collect::<Vec<_>>(), ["abi/ok"]);
        // What the suites mark xfail goes too, even when it passed in the map's run.
        leave_out(&mut map, &["abi/ok".to_string()].into());
        assert!(map[&xfail.0].scenarios.is_empty());
    }

    #[test]
    fn nothing_covered_is_no_coverage_without_a_build() {
        let ms = crate::mutants::find::mutants("kernel/x.c", SRC).unwrap();
        let arch = ArchMap {
            counted: (1..=6).collect(),
            functions: [1].into(),
            scenarios: BTreeMap::from([("a/b".to_string(), BTreeSet::from([1]))]),
            durations: BTreeMap::new(),
        };
        let map = CoverageMap::from([("x86_64".to_string(), arch)]);
        for (_, step) in plan(&ms, Some(&map), &BTreeMap::new(), &BTreeMap::new()) {
            let Step::Decided(r) = step else { panic!("{step:?}") };
            assert_eq!(r.outcome, Outcome::NoCoverage);
        }
        for (_, step) in plan(&ms, None, &BTreeMap::new(), &BTreeMap::new()) {
            assert_eq!(step, Step::Run { scenarios: BTreeMap::new() }, "no map: unknown, not NoCoverage");
        }
    }

    #[test]
    fn the_tracked_list_wins_over_a_kept_result() {
        let ms = crate::mutants::find::mutants("kernel/x.c", SRC).unwrap();
        let id = ms[0].id.clone();
        let survived = MutantResult {
            id: id.clone(),
            outcome: Outcome::Survived,
            covered_by: vec![],
            duration_ms: None,
            stage: None,
        };
        let listed = BTreeMap::from([(id.clone(), "no caller reads it".to_string())]);
        let planned = plan(&ms, None, &listed, &BTreeMap::from([(id.clone(), survived)]));
        let (_, step) = planned.iter().find(|(i, _)| *i == id).unwrap();
        assert!(is_equivalent(step), "{step:?}");
        assert!(!is_equivalent(&Step::Run { scenarios: BTreeMap::new() }));
    }

    #[test]
    fn code_only_the_boot_runs_is_run_against_every_scenario() {
        let ms = crate::mutants::find::mutants("kernel/x.c", SRC).unwrap();
        let arch = ArchMap {
            counted: (1..=6).collect(),
            functions: [1].into(),
            scenarios: BTreeMap::from([
                (BOOT.to_string(), BTreeSet::from([1, 3, 4])),
                ("a/b".to_string(), BTreeSet::from([1, 3])),
                ("a/c".to_string(), BTreeSet::from([1])),
            ]),
            durations: BTreeMap::new(),
        };
        let map = CoverageMap::from([("x86_64".to_string(), arch)]);
        let steps: BTreeMap<String, Step> =
            plan(&ms, Some(&map), &BTreeMap::new(), &BTreeMap::new()).into_iter().collect();
        let scenarios_of = |line: u32| match &steps[&ms.iter().find(|m| m.line == line).unwrap().id] {
            Step::Run { scenarios } => scenarios["x86_64"].clone(),
            other => panic!("{other:?}"),
        };
        assert_eq!(scenarios_of(4), ["a/b", "a/c"], "only the boot runs line 4: every scenario, not the boot");
        assert_eq!(scenarios_of(3), ["a/b"], "a scenario runs line 3: that one");
        let Step::Decided(r) = &steps[&ms.iter().find(|m| m.line == 5).unwrap().id] else { panic!() };
        assert_eq!(r.outcome, Outcome::NoCoverage);
    }

    #[test]
    fn a_line_gcov_does_not_count_is_covered_through_its_neighbours_in_the_function() {
        // Line 4 (`return -EINVAL;`) has no counter; f() starts at 1, g() at 8.
        let src = "int f(int x)\n{\n\tif (x < 2)\n\t\treturn -EINVAL;\n\treturn x + 1;\n}\n\nint g(void)\n{\n\treturn 7;\n}\n";
        let ms = crate::mutants::find::mutants("kernel/x.c", src).unwrap();
        let einval = ms.iter().find(|m| m.line == 4).unwrap();
        let seven = ms.iter().find(|m| m.line == 10).unwrap();
        let arch = ArchMap {
            counted: [1, 3, 5, 8].into(),
            functions: [1, 8].into(),
            scenarios: BTreeMap::from([
                ("s/reaches-3".to_string(), BTreeSet::from([1, 3])),
                ("s/reaches-5".to_string(), BTreeSet::from([1, 3, 5])),
                ("s/only-g".to_string(), BTreeSet::from([8])),
            ]),
            durations: BTreeMap::new(),
        };
        assert_eq!(arch.lines_of(einval), [3, 5], "the counted lines before and after, inside f()");
        assert_eq!(arch.lines_of(seven), [8], "nothing after it in g(): the line before, g()'s first");
        // `return true;` at the end of h() (16), after a branch (13-14) no scenario takes.
        let src = "int f(int x)\n{\n\tif (x < 2)\n\t\treturn -EINVAL;\n\treturn x + 1;\n}\n\nint g(void)\n{\n\treturn 7;\n}\n\nbool h(int y)\n{\n\tif (y)\n\t\tgo(y);\n\treturn true;\n}\n";
        let hs = crate::mutants::find::mutants("kernel/x.c", src).unwrap();
        let last = hs.iter().find(|m| m.line == 17 && m.function == "h").expect("h's return");
        let h =
            ArchMap { counted: [1, 3, 5, 8, 13, 15, 16].into(), functions: [1, 8, 13].into(), ..ArchMap::default() };
        assert_eq!(h.lines_of(last), [13, 16], "the branch's line, and h()'s entry, which every call runs");
        let map = CoverageMap::from([("x86_64".to_string(), arch)]);
        let steps: BTreeMap<String, Step> =
            plan(&ms, Some(&map), &BTreeMap::new(), &BTreeMap::new()).into_iter().collect();
        let Step::Run { scenarios } = &steps[&einval.id] else { panic!() };
        assert_eq!(scenarios["x86_64"], ["s/reaches-3", "s/reaches-5"]);
        let Step::Run { scenarios } = &steps[&seven.id] else { panic!() };
        assert_eq!(scenarios["x86_64"], ["s/only-g"]);
    }

    #[test]
    fn a_mutants_scenarios_come_fastest_first() {
        let ms = crate::mutants::find::mutants("kernel/x.c", SRC).unwrap();
        let arch = ArchMap {
            counted: (1..=6).collect(),
            functions: [1].into(),
            scenarios: ["s/slow", "s/fast", "s/unknown", "s/mid"]
                .iter()
                .map(|s| (s.to_string(), BTreeSet::from([3])))
                .collect(),
            durations: BTreeMap::from([("s/slow".into(), 900), ("s/fast".into(), 5), ("s/mid".into(), 40)]),
        };
        let map = CoverageMap::from([("x86_64".to_string(), arch)]);
        let steps: BTreeMap<String, Step> =
            plan(&ms, Some(&map), &BTreeMap::new(), &BTreeMap::new()).into_iter().collect();
        let Step::Run { scenarios } = &steps[&ms.iter().find(|m| m.line == 3).unwrap().id] else { panic!() };
        assert_eq!(scenarios["x86_64"], ["s/fast", "s/mid", "s/slow", "s/unknown"]);
        let capped = Stage::new(Path::new("/r"), map, vec!["debug".into()], Some(2));
        assert_eq!(capped.label, "x86_64 debug, the 2 fastest scenarios, map r");
        let Step::Run { scenarios } = capped.capped(Step::Run { scenarios: scenarios.clone() }) else { panic!() };
        assert_eq!(scenarios["x86_64"], ["s/fast", "s/mid"], "a capped stage runs the fastest");
    }

    #[test]
    fn a_survivor_goes_on_to_the_later_stages_and_nothing_else_does() {
        let labels = ["x86_64 faults, map a", "x86_64 kmemleak, map b", "x86_64 debug, map a"];
        let r = |outcome, stage: Option<&str>| MutantResult {
            id: "aaaaaaaaaaaa".into(),
            outcome,
            covered_by: vec![],
            duration_ms: None,
            stage: stage.map(str::to_string),
        };
        assert!(goes_on(None, 0, &labels), "nothing kept: runs at the first stage");
        let survived_first = r(Outcome::Survived, Some(labels[0]));
        assert!(!goes_on(Some(&survived_first), 0, &labels), "not again at its own stage");
        assert!(goes_on(Some(&survived_first), 1, &labels));
        assert!(goes_on(Some(&survived_first), 2, &labels));
        let survived_second = r(Outcome::Survived, Some(labels[1]));
        assert!(!goes_on(Some(&survived_second), 1, &labels));
        assert!(goes_on(Some(&survived_second), 2, &labels));
        let killed = r(Outcome::Killed { by: vec![], evidence: String::new() }, Some(labels[0]));
        assert!(!goes_on(Some(&killed), 2, &labels), "a killed mutant is done");
        assert!(!goes_on(Some(&r(Outcome::Survived, None)), 2, &labels), "a result from before stages is final");
        assert!(!goes_on(Some(&r(Outcome::Survived, Some("gone"))), 2, &labels), "so is one of a stage not given");
    }

    #[test]
    fn a_mutant_runs_at_the_first_stage_that_covers_it() {
        let run = |arch: &str| Step::Run { scenarios: BTreeMap::from([(arch.to_string(), vec!["s/a".to_string()])]) };
        let decided = |outcome| {
            Step::Decided(MutantResult { id: "x".into(), outcome, covered_by: vec![], duration_ms: None, stage: None })
        };
        let first = vec![("m1".to_string(), run("x86_64")), ("m2".into(), decided(Outcome::NoCoverage))];
        let second = vec![("m1".to_string(), run("s390x")), ("m2".into(), run("s390x"))];
        let third = vec![("m1".to_string(), decided(Outcome::NoCoverage)), ("m2".into(), decided(Outcome::NoCoverage))];
        let plan: BTreeMap<String, Step> = first_covering(vec![first, second, third.clone()]).into_iter().collect();
        assert_eq!(plan["m1"], run("x86_64"));
        assert_eq!(plan["m2"], run("s390x"), "NoCoverage on x86_64, covered on s390x");
        let plan: BTreeMap<String, Step> = first_covering(vec![third]).into_iter().collect();
        assert_eq!(plan["m2"], decided(Outcome::NoCoverage), "no stage covers it");
    }

    #[test]
    fn the_state_resumes_and_survives_a_torn_last_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = state_file(dir.path());
        assert!(load_state(&path).unwrap().is_empty());
        let r = |id: &str, outcome| MutantResult {
            id: id.into(),
            outcome,
            covered_by: vec![],
            duration_ms: None,
            stage: None,
        };
        append_state(&path, &r("aaaaaaaaaaaa", Outcome::NoCoverage)).unwrap();
        append_state(&path, &r("bbbbbbbbbbbb", Outcome::Survived)).unwrap();
        append_state(&path, &r("aaaaaaaaaaaa", Outcome::Timeout { reason: "hang".into() })).unwrap();
        let mut f = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
        write!(f, "{{\"id\":\"cccc").unwrap();
        let state = load_state(&path).unwrap();
        assert_eq!(state.len(), 2);
        assert_eq!(state["aaaaaaaaaaaa"].outcome, Outcome::Timeout { reason: "hang".into() }, "the later result wins");
        std::fs::write(&path, "not json\n{}\n").unwrap();
        assert!(load_state(&path).is_err(), "a damaged line in the middle is an error, not a silent rerun");
    }
}
