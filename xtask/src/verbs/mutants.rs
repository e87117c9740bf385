//! `cargo xtask mutants`: the mutants of a kernel C file (default
//! `kernel/trace/trace_events_user.c` of the default kernel source), selected by `--in-diff`
//! and `--shard`, listed as text or JSON; with `--coverage-map RUN` each one's covering
//! scenarios (or NoCoverage); `--run` builds and boots the planned ones (`mutants_run`);
//! `--report` writes what is known into `mutants.json`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde_json::json;

use crate::cli::MutantsArgs;
use crate::kernel::source::{self, Spec};
use crate::mutants::equivalent;
use crate::mutants::find::{self, Mutant, Operator};
use crate::mutants::plan::{self, Stage, Step};
use crate::mutants::report;
use crate::mutants::select::{self, Shard};
use crate::support::exit::{error, Kind};

/// The default file, inside the kernel tree.
pub const DEFAULT_FILE: &str = "kernel/trace/trace_events_user.c";

/// The tracked list of equivalent mutants, in the checkout.
pub const EQUIVALENT_LIST: &str = "mutants/equivalent.tsv";

/// The file mutated: where it was read, its path in the kernel tree, its text (the
/// `--patch`es applied), and those patches.
struct Target {
    path: PathBuf,
    name: String,
    text: String,
    patches: Vec<PathBuf>,
}

impl MutantsArgs {
    pub fn run(self) -> Result<u8> {
        let shard = match &self.shard {
            Some(s) => Some(s.parse::<Shard>().map_err(|e| error(Kind::BadInput, e))?),
            None => None,
        };
        let target = self.target()?;
        let mutants = find::mutants(&target.name, &target.text)?;
        let total = mutants.len();
        let list = self.equivalent_list(&target)?;
        self.warn_of_entries(&list);
        if self.check_equivalents {
            return Ok(check_equivalents(&list));
        }
        let mutants = self.select(mutants, &target, &list, shard)?;
        if let Some(arches) = &self.tce {
            return crate::verbs::mutants_tce::run(
                arches,
                &target.name,
                &target.text,
                &target.patches,
                &mutants,
                &list.applied.equivalent,
                &self.out_dir(),
                self.cache_dir.as_deref(),
            );
        }
        let out = self.out_dir();
        let (mut steps, stages) = self.plan(&target, &mutants, &out, &list)?;
        self.show(&target, &mutants, &steps, total)?;
        let mut code = 0;
        if self.run {
            code = self.run_stages(&target, &mutants, &stages, &out, &list)?;
            // What this run decided; the tracked list still wins over a result kept from
            // before the mutant was listed (as in the plan).
            for (id, r) in plan::load_state(&plan::state_file(&out))? {
                if let Some(step) = steps.get_mut(&id).filter(|s| !plan::is_equivalent(s)) {
                    *step = Step::Decided(r);
                }
            }
        }
        if self.recheck_equivalents {
            let cache = crate::kernel::cache::root(self.cache_dir.as_deref());
            code = code.max(recheck_verdict(&list, &mutants, &out, &cache)?);
        }
        if self.report {
            write_report(&target, &mutants, &steps, &out)?;
        }
        if !self.list && !self.json && !self.report && !self.run {
            eprintln!("nothing asked: use --list, --json, --report or --run");
        }
        Ok(code)
    }

    /// The equivalent list's entries that do not apply to this file: each named when they are
    /// few or asked for, else counted.
    fn warn_of_entries(&self, list: &EquivalentList) {
        let warnings = list.applied.warnings(&list.entries, &list.path);
        if warnings.len() <= 3 || self.check_equivalents || self.recheck_equivalents {
            warnings.iter().for_each(|w| eprintln!("warning: {w}"));
        } else {
            eprintln!(
                "warning: {}: {} of {} entries do not apply to this file (`--check-equivalents` names them): those mutants run",
                list.path,
                warnings.len(),
                list.entries.len()
            );
        }
    }

    /// The mutants asked for: the listed equivalents with `--recheck-equivalents`, then those
    /// on the lines of `--in-diff`, of `--shard` and with an `--id`.
    fn select(
        &self,
        mut mutants: Vec<Mutant>,
        target: &Target,
        list: &EquivalentList,
        shard: Option<Shard>,
    ) -> Result<Vec<Mutant>> {
        // Rechecked: every listed mutant, those trivial compiler equivalence proved too (its
        // proof holds for the one kernel configuration it compiled with).
        let tce_proven = crate::verbs::mutants_tce::proven(&self.base_out(), &list.digest);
        if self.recheck_equivalents {
            mutants.retain(|m| list.applied.equivalent.contains_key(&m.id));
            let proven = list.applied.equivalent.keys().filter(|id| tce_proven.contains_key(*id)).count();
            eprintln!(
                "recheck: {proven} of the listed equivalents are also proven by TCE ({}), for its kernel's configuration",
                mutants_tce_file(&self.base_out())
            );
        }
        if let Some(patch) = &self.in_diff {
            let diff = std::fs::read_to_string(patch)
                .map_err(|e| error(Kind::BadInput, format!("--in-diff {}: {e}", patch.display())))?;
            mutants = select::on_lines(mutants, &select::patch_lines(&diff, &target.name));
        }
        if let Some(shard) = shard {
            mutants.retain(|m| shard.takes(m));
        }
        if !self.ids.is_empty() {
            if let Some(unknown) = self.ids.iter().find(|id| !mutants.iter().any(|m| m.id == **id)) {
                return Err(error(Kind::BadInput, format!("--id {unknown}: no such mutant of {}", target.name)));
            }
            mutants.retain(|m| self.ids.contains(&m.id));
        }
        Ok(mutants)
    }

    /// The selection as `--json` or `--list` asks, then counted by operator and by planned step
    /// on stderr.
    fn show(&self, target: &Target, mutants: &[Mutant], steps: &BTreeMap<String, Step>, total: usize) -> Result<()> {
        if self.json {
            print_json(target, mutants, steps)?;
        } else if self.list {
            for m in mutants {
                let planned = steps.get(&m.id).map(|s| format!("  [{}]", describe(s))).unwrap_or_default();
                println!("{}  {}:{}  {}  {}  {}{planned}", m.id, m.file, m.line, m.function, m.operator, m.change());
            }
        }
        let per_operator: Vec<String> = Operator::ALL
            .iter()
            .map(|op| format!("{op} {}", mutants.iter().filter(|m| m.operator == *op).count()))
            .collect();
        eprintln!(
            "{} mutants of {} ({total} in the file): {}",
            mutants.len(),
            target.path.display(),
            per_operator.join(", ")
        );
        if !steps.is_empty() {
            let mut tally: BTreeMap<String, usize> = BTreeMap::new();
            for s in steps.values() {
                *tally.entry(describe(s).split(':').next().unwrap_or_default().to_string()).or_default() += 1;
            }
            let tally: Vec<String> = tally.iter().map(|(k, n)| format!("{k} {n}")).collect();
            eprintln!("planned: {}", tally.join(", "));
        }
        Ok(())
    }

    /// `--run`: each stage's mutants still to run, on the stage's kernels (one schemata kernel
    /// per stage and arch unless `--one-by-one`); the exit code of the last stage that ran any.
    fn run_stages(
        &self,
        target: &Target,
        mutants: &[Mutant],
        stages: &[Stage],
        out: &Path,
        list: &EquivalentList,
    ) -> Result<u8> {
        let mut code = 0;
        let cache = crate::kernel::cache::root(self.cache_dir.as_deref());
        // Every mutant of the file, whatever was selected: one schemata kernel per stage
        // serves every shard and every resumed run.
        let all = find::mutants(&target.name, &target.text)?;
        for (k, stage) in stages.iter().enumerate() {
            // Read again at each stage: the earlier ones appended to the state file. A
            // `Run` is a mutant with no result yet or a survivor of an earlier stage.
            let kept = self.kept(out, list)?;
            let todo: BTreeMap<String, Step> = plan_stage(mutants, stages, k, &kept)
                .into_iter()
                .filter(|(_, step)| matches!(step, Step::Run { .. }))
                .collect();
            if todo.is_empty() {
                continue;
            }
            crate::support::progress::line(format!(
                "mutants: stage {} of {}, {}: {} mutants",
                k + 1,
                stages.len(),
                stage.label,
                todo.len()
            ));
            let arches: BTreeSet<&str> = todo
                .values()
                .filter_map(|s| match s {
                    Step::Run { scenarios } => Some(scenarios.keys().map(String::as_str)),
                    Step::Decided(_) => None,
                })
                .flatten()
                .collect();
            let kernels = crate::verbs::mutants_run::Kernels {
                base: &target.patches,
                profiles: &stage.profiles,
                schemata: None,
                cache: &cache,
            };
            let schemata = if self.one_by_one {
                None
            } else {
                let arches: Vec<&str> = arches.into_iter().collect();
                Some(crate::verbs::mutants_run::schemata_kernel(
                    &all,
                    &target.name,
                    &target.text,
                    &kernels,
                    &arches,
                    out,
                )?)
            };
            let label = (stages.len() > 1).then_some(stage.label.as_str());
            code = crate::verbs::mutants_run::run_all(
                mutants,
                &target.text,
                crate::verbs::mutants_run::Kernels { schemata: schemata.as_ref(), ..kernels },
                &todo,
                (out, label),
                self.timeout,
                self.parallel as usize,
            )?;
        }
        Ok(code)
    }

    fn target(&self) -> Result<Target> {
        let (path, name) = match &self.file {
            Some(file) => (file.clone(), name_in_tree(file)),
            None => {
                let cache = crate::kernel::cache::root(self.cache_dir.as_deref());
                let ident = source::identify(&Spec::Debian, &cache)?;
                let root = source::pristine_root(&Spec::Debian, &ident, &cache)?;
                if !self.patches.is_empty() {
                    // Absolute: `patch -d` and the mutants' runs read them from elsewhere.
                    let patches: Vec<PathBuf> = self
                        .patches
                        .iter()
                        .map(|p| {
                            p.canonicalize().map_err(|e| error(Kind::BadInput, format!("--patch {}: {e}", p.display())))
                        })
                        .collect::<Result<_>>()?;
                    let changed = crate::coverage::map::change_texts(&root, &[], &patches, &[DEFAULT_FILE.into()])?;
                    let text = changed.into_iter().next().map(|c| c.new).unwrap_or_default();
                    return Ok(Target { path: root.join(DEFAULT_FILE), name: DEFAULT_FILE.into(), text, patches });
                }
                (root.join(DEFAULT_FILE), DEFAULT_FILE.to_string())
            }
        };
        let text = std::fs::read_to_string(&path)
            .map_err(|e| error(Kind::BadInput, format!("--file {}: {e}", path.display())))?;
        Ok(Target { path, name, text, patches: vec![] })
    }

    /// Each mutant's step when there is something to plan from (coverage maps, a state file,
    /// the equivalent list's entries; empty otherwise), and the stages of `--coverage-map`.
    fn plan(
        &self,
        target: &Target,
        mutants: &[Mutant],
        out: &Path,
        list: &EquivalentList,
    ) -> Result<(BTreeMap<String, Step>, Vec<Stage>)> {
        let stages =
            self.coverage_map.iter().map(|spec| self.stage(spec, &target.name)).collect::<Result<Vec<Stage>>>()?;
        let kept = self.kept(out, list)?;
        let mut per_stage: Vec<_> = (0..stages.len()).map(|k| plan_stage(mutants, &stages, k, &kept)).collect();
        if stages.is_empty() {
            let (equivalent, done) = &kept;
            if equivalent.is_empty() && done.is_empty() {
                return Ok((BTreeMap::new(), stages));
            }
            per_stage.push(plan::plan(mutants, None, equivalent, done));
        }
        Ok((plan::first_covering(per_stage).into_iter().collect(), stages))
    }

    /// `--out`, default results/mutants/.
    fn base_out(&self) -> PathBuf {
        self.out.clone().unwrap_or_else(|| crate::support::checkout::default_results().join("mutants"))
    }

    /// Where results go: `--out` (default results/mutants/), and its `recheck/` with
    /// `--recheck-equivalents` (the listed mutants' own state file, not the run's).
    fn out_dir(&self) -> PathBuf {
        let out = self.base_out();
        if self.recheck_equivalents {
            out.join("recheck")
        } else {
            out
        }
    }

    /// The equivalent list (`--equivalent` or the tracked one) and what of it applies to the
    /// file's text and mutants.
    fn equivalent_list(&self, target: &Target) -> Result<EquivalentList> {
        let path =
            self.equivalent.clone().unwrap_or_else(|| crate::support::checkout::project_root().join(EQUIVALENT_LIST));
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if self.equivalent.is_some() => {
                return Err(error(Kind::BadInput, format!("--equivalent {}: {e}", path.display())))
            }
            Err(_) => String::new(),
        };
        let shown = if self.equivalent.is_some() { path.display().to_string() } else { EQUIVALENT_LIST.to_string() };
        let entries =
            equivalent::parse(&text).map_err(|e| error(Kind::BadInput, format!("{}: {e:#}", path.display())))?;
        // The whole file's mutants, whatever was selected: an entry is stale only when the file has no such mutant.
        let all = find::mutants(&target.name, &target.text)?;
        let ids: BTreeSet<&str> = all.iter().map(|m| m.id.as_str()).collect();
        let digest = crate::support::files::sha256_hex(&target.text);
        let applied = equivalent::apply(&entries, &digest, &ids);
        Ok(EquivalentList { path: shown, entries, applied, digest })
    }

    /// The equivalents that apply (none when rechecking them) and the state file's results.
    fn kept(&self, out: &Path, list: &EquivalentList) -> Result<Kept> {
        // Not TCE's proofs: each holds for the one configuration it compiled with (a removed
        // rcu_read_unlock() compiles to nothing without lockdep and preemption, yet the debug
        // kernel's lockdep tells it apart).
        let equivalent = if self.recheck_equivalents { BTreeMap::new() } else { list.applied.equivalent.clone() };
        Ok((equivalent, plan::load_state(&plan::state_file(out))?))
    }

    /// The stage of one `--coverage-map RUN[+PROFILE...][@N]`: the map (without the scenarios
    /// the suites mark `xfail`), its profiles and its cap.
    fn stage(&self, spec: &str, file: &str) -> Result<Stage> {
        let StageSpec { run, profiles, cap } = split_stage(spec)?;
        let mut map = plan::read_coverage_map(&run, file).map_err(|e| error(Kind::BadInput, format!("{e:#}")))?;
        plan::leave_out(&mut map, &xfail_marked()?);
        let profiles = match profiles {
            Some(p) => p,
            None if !self.profiles.is_empty() => self.profiles.clone(),
            None => map_profiles(&run),
        };
        Ok(Stage::new(&run, map, profiles, cap))
    }
}

/// The equivalent list as read, and what of it applies to the file mutated.
struct EquivalentList {
    /// As shown in messages: the tracked list's path in the checkout, or `--equivalent`.
    path: String,
    entries: Vec<equivalent::Entry>,
    applied: equivalent::Applied,
    /// The SHA-256 of the file's text.
    digest: String,
}

/// Where `--tce` keeps its findings, as said.
fn mutants_tce_file(out: &Path) -> String {
    out.join(crate::verbs::mutants_tce::TCE_JSON).display().to_string()
}

/// `--check-equivalents`: 0 when every entry applies to the file, 1 when one is stale.
fn check_equivalents(list: &EquivalentList) -> u8 {
    let prefix = &list.digest[..equivalent::DIGEST_LEN];
    if list.applied.is_stale() {
        eprintln!(
            "{}: {} of {} entries do not apply to this file (digest {prefix})",
            list.path,
            list.applied.no_mutant.len() + list.applied.other_file.len(),
            list.entries.len()
        );
        1
    } else {
        eprintln!("{}: all {} entries apply to this file (digest {prefix})", list.path, list.entries.len());
        0
    }
}

/// After `--recheck-equivalents` ran the listed mutants: 1 when one was detected (Killed,
/// Timeout), ran on a kernel that does not meet its conditions, or the list is stale; each said.
fn recheck_verdict(list: &EquivalentList, mutants: &[Mutant], out: &Path, cache: &Path) -> Result<u8> {
    let state = plan::load_state(&plan::state_file(out))?;
    let mut wrong = vec![];
    let mut confirmed = 0;
    for m in mutants {
        let Some(entry) = list.entries.iter().find(|e| e.id == m.id) else { continue };
        let at = format!("{}:{}: {}", list.path, entry.line, m.id);
        match state.get(&m.id).map(|r| &r.outcome) {
            Some(o @ (report::Outcome::Killed { .. } | report::Outcome::Timeout { .. })) => {
                let why = match o {
                    report::Outcome::Killed { by, evidence } => format!("killed by {}: {evidence}", by.join(", ")),
                    report::Outcome::Timeout { reason } => format!("timed out: {reason}"),
                    _ => unreachable!(),
                };
                wrong.push(format!("{at} is listed as equivalent but was {why}"));
                continue;
            }
            Some(report::Outcome::CompileError { reason }) => {
                wrong.push(format!("{at} does not build: {reason}"));
                continue;
            }
            _ => {}
        }
        let mut met = true;
        for (release, config) in run_kernels(&out.join("runs").join(&m.id), cache) {
            if let Some(why) = equivalent::unmet(entry, &release, &config) {
                wrong.push(format!(
                    "{at}: its argument rests on {}, and the kernel it ran on {why}",
                    entry.conditions.join(", ")
                ));
                met = false;
            }
        }
        confirmed += usize::from(met);
    }
    for w in list.applied.warnings(&list.entries, &list.path) {
        wrong.push(w);
    }
    for w in &wrong {
        eprintln!("recheck: {w}");
    }
    eprintln!(
        "recheck: {confirmed} of {} listed equivalents confirmed (survived or not covered, their conditions met), {} finding(s)",
        list.entries.len(),
        wrong.len()
    );
    Ok(u8::from(!wrong.is_empty()))
}

/// The release and `.config` of each kernel a mutant's newest run booted.
fn run_kernels(results: &Path, cache: &Path) -> Vec<(String, BTreeMap<String, String>)> {
    crate::verbs::mutants_run::booted_kernels(results, cache)
        .into_iter()
        .filter_map(|(meta, entry)| {
            let release = meta["kernelrelease"].as_str()?.to_string();
            let text = std::fs::read_to_string(entry.join("config")).ok()?;
            Some((release, crate::kernel::kconfig::parse_config(&text)))
        })
        .collect()
}

/// The tracked equivalents and the state file's results, as [`MutantsArgs::kept`] reads them.
type Kept = (BTreeMap<String, String>, BTreeMap<String, report::MutantResult>);

/// Stage `k`'s plan: what the tracked list and the state file decide (but a survivor of an
/// earlier stage, which goes on), and for the rest the scenarios of the stage's map that cover
/// each mutant, cut to the stage's cap.
fn plan_stage(mutants: &[Mutant], stages: &[Stage], k: usize, (equivalent, done): &Kept) -> Vec<(String, Step)> {
    let labels: Vec<&str> = stages.iter().map(|s| s.label.as_str()).collect();
    let mut done = done.clone();
    done.retain(|_, r| !plan::goes_on(Some(r), k, &labels));
    let planned = plan::plan(mutants, Some(&stages[k].map), equivalent, &done);
    planned.into_iter().map(|(id, step)| (id, stages[k].capped(step))).collect()
}

/// A `--coverage-map` argument: the run folder, the profiles named (`+debug+kmemleak`;
/// `+default`: none) and the cap on each mutant's scenarios there (`@N`). A folder whose own
/// name has a `+` or an `@` is taken whole when it exists.
#[derive(Debug, PartialEq)]
struct StageSpec {
    run: PathBuf,
    profiles: Option<Vec<String>>,
    cap: Option<usize>,
}

fn split_stage(spec: &str) -> Result<StageSpec> {
    let whole = |run: &str| StageSpec { run: PathBuf::from(run), profiles: None, cap: None };
    if Path::new(spec).exists() {
        return Ok(whole(spec));
    }
    let (rest, cap) = match spec.rsplit_once('@') {
        Some((rest, n)) => {
            let n = n.parse::<usize>().ok().filter(|n| *n > 0).ok_or_else(|| {
                error(Kind::BadInput, format!("--coverage-map {spec}: `@{n}` is not a number of scenarios (1 or more)"))
            })?;
            (rest, Some(n))
        }
        None => (spec, None),
    };
    Ok(match rest.split_once('+') {
        Some((run, named)) => {
            let named = named.split('+').filter(|p| !p.is_empty() && *p != "default").map(str::to_string).collect();
            StageSpec { profiles: Some(named), cap, ..whole(run) }
        }
        None => StageSpec { cap, ..whole(rest) },
    })
}

/// The profiles the kernel of a coverage run was built with: the fragments its
/// `kernel-metadata.json` lists that are profiles, but `coverage` (the map's own instrument).
fn map_profiles(run: &Path) -> Vec<String> {
    let known = crate::kernel::kconfig::profile_names(&crate::support::checkout::project_root().join("kernel-configs"));
    let arches = std::fs::read_dir(run).into_iter().flatten().flatten();
    for arch in arches {
        let Ok(text) = std::fs::read_to_string(arch.path().join("kernel-metadata.json")) else { continue };
        let Ok(meta) = serde_json::from_str::<serde_json::Value>(&text) else { continue };
        let fragments = meta["config"]["fragments"].as_array().cloned().unwrap_or_default();
        return fragments
            .iter()
            .filter_map(|f| f.as_str()?.strip_suffix(".config").map(str::to_string))
            .filter(|p| p != "coverage" && known.contains(p))
            .collect();
    }
    vec![]
}

/// The scenarios (`suite/name`) left out of every map: those the checkout's suites mark
/// `xfail` (one expected to fail cannot kill a mutant, and an intermittent one that passed in
/// the map's run may fail and end the mutant's boot early: the fork storm's leftover event
/// did), and those of a `health_only` suite (the fuzz suite accepts any documented errno, so
/// what it alone detects is no measure of the suites' exact checks).
fn xfail_marked() -> Result<std::collections::BTreeSet<String>> {
    let suites = crate::run::pipeline::load_suites(&crate::run::pipeline::suite_files()?)?;
    Ok(suites
        .iter()
        .flat_map(|s| {
            s.scenarios
                .iter()
                .filter(|d| d.xfail.is_some() || s.health_only)
                .map(move |d| format!("{}/{}", s.suite, d.name))
        })
        .collect())
}

/// `--report`: what is decided of the selected mutants, as Stryker's `mutants.json`,
/// `summary.md` and `mutants.html` in `out`.
fn write_report(target: &Target, mutants: &[Mutant], steps: &BTreeMap<String, Step>, out: &Path) -> Result<()> {
    let results = steps
        .iter()
        .filter_map(|(id, s)| match s {
            Step::Decided(r) => Some((id.clone(), r.clone())),
            Step::Run { .. } => None,
        })
        .collect();
    let json = report::stryker_json(&target.name, &target.text, mutants, &results);
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let path = out.join("mutants.json");
    std::fs::write(&path, serde_json::to_string_pretty(&json)?)
        .with_context(|| format!("writing {}", path.display()))?;
    let summary = out.join("summary.md");
    let page = crate::mutants::summary::render(&target.name, mutants, &results);
    std::fs::write(&summary, page).with_context(|| format!("writing {}", summary.display()))?;
    let html = out.join("mutants.html");
    let page = crate::mutants::html::render(&target.name, &target.text, mutants, &results);
    std::fs::write(&html, page).with_context(|| format!("writing {}", html.display()))?;
    eprintln!("wrote {}, {} and {}", path.display(), summary.display(), html.display());
    Ok(())
}

/// A step in a few words: `NoCoverage`, `Equivalent`, `Killed` (done earlier), `run: 3
/// scenarios on x86_64`.
fn describe(step: &Step) -> String {
    match step {
        Step::Decided(r) => r.outcome.name().to_string(),
        Step::Run { scenarios } if scenarios.is_empty() => "to run".to_string(),
        Step::Run { scenarios } => {
            let per_arch: Vec<String> = scenarios.iter().map(|(a, s)| format!("{} on {a}", s.len())).collect();
            format!("to run: {}", per_arch.join(", "))
        }
    }
}

fn print_json(target: &Target, mutants: &[Mutant], steps: &BTreeMap<String, Step>) -> Result<()> {
    let list: Vec<_> = mutants
        .iter()
        .map(|m| {
            let mut v = serde_json::to_value(m).expect("a mutant serialises");
            v["diff"] = json!(m.diff(&target.text));
            match steps.get(&m.id) {
                Some(Step::Decided(r)) => v["result"] = serde_json::to_value(r).expect("a result serialises"),
                Some(Step::Run { scenarios }) if !scenarios.is_empty() => v["scenarios"] = json!(scenarios),
                _ => {}
            }
            v
        })
        .collect();
    println!("{}", serde_json::to_string_pretty(&list).context("writing JSON")?);
    Ok(())
}

/// A file's path inside its kernel tree (the first ancestor with a Makefile and a Kconfig), or
/// as given when it is in none.
fn name_in_tree(file: &Path) -> String {
    let abs = file.canonicalize().unwrap_or_else(|_| file.to_path_buf());
    let root: Option<PathBuf> = abs
        .ancestors()
        .skip(1)
        .find(|d| d.join("Makefile").is_file() && d.join("Kconfig").is_file())
        .map(Path::to_path_buf);
    match root.and_then(|r| abs.strip_prefix(r).ok().map(Path::to_path_buf)) {
        Some(rel) => rel.to_string_lossy().into_owned(),
        None => file.to_string_lossy().into_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stage_names_its_profiles_after_the_map() {
        let spec = |run: &str, profiles: Option<&[&str]>, cap| StageSpec {
            run: PathBuf::from(run),
            profiles: profiles.map(|p| p.iter().map(|s| s.to_string()).collect()),
            cap,
        };
        assert_eq!(split_stage("/no/such/run").unwrap(), spec("/no/such/run", None, None));
        assert_eq!(split_stage("/no/run+debug").unwrap(), spec("/no/run", Some(&["debug"]), None));
        assert_eq!(
            split_stage("/no/run+faults+kmemleak").unwrap(),
            spec("/no/run", Some(&["faults", "kmemleak"]), None)
        );
        assert_eq!(split_stage("/no/run+default").unwrap(), spec("/no/run", Some(&[]), None));
        assert_eq!(split_stage("/no/run+debug@10").unwrap(), spec("/no/run", Some(&["debug"]), Some(10)));
        assert_eq!(split_stage("/no/run@3").unwrap(), spec("/no/run", None, Some(3)));
        assert!(split_stage("/no/run+debug@ten").is_err());
        assert!(split_stage("/no/run@0").is_err());
        let dir = tempfile::tempdir().unwrap();
        let odd = dir.path().join("a+b@2");
        std::fs::create_dir(&odd).unwrap();
        assert_eq!(
            split_stage(odd.to_str().unwrap()).unwrap(),
            spec(odd.to_str().unwrap(), None, None),
            "an existing folder is taken whole"
        );
    }

    #[test]
    fn a_maps_profiles_are_those_its_kernel_was_built_with_but_coverage() {
        let run = tempfile::tempdir().unwrap();
        assert!(map_profiles(run.path()).is_empty(), "no metadata: the default kernel");
        std::fs::create_dir(run.path().join("x86_64")).unwrap();
        let meta = serde_json::json!({"config": {"fragments":
            ["common.config", "x86_64.config", "coverage.config", "faults.config", "kmemleak.config", "mine.config"]}});
        std::fs::write(run.path().join("x86_64/kernel-metadata.json"), meta.to_string()).unwrap();
        assert_eq!(map_profiles(run.path()), ["faults", "kmemleak"], "not a user's fragment either");
    }
}
