//! One run, in order: the host provisioned and the kernels built or fetched (`prepare`), the
//! plan (the suites chosen and compiled per kernel), the boots (each judged as its VM ends),
//! then the reports, the run's model returned. `Pipeline` holds a run's parts and goes through
//! these steps; `validate`, `bisect` and `bench` run their sides through the same steps.

use std::path::{Path, PathBuf};

use anyhow::Result;

use crate::cli::{KernelArgs, SelectArgs, VmArgs};
use crate::coverage::catalogue as coverage;
use crate::judging::run_folder;
use crate::kernel::{build as kernel, kconfig};
use crate::run::{boot, select};
use crate::setup::provision::{ensure, Needs};
use crate::support::checkout::project_root;
use crate::support::exit::{error, Kind};
use crate::support::progress;
use crate::{results, suites};

/// What a booting verb works with once prepared: its kernels and the boots' options.
pub struct Prepared {
    pub built: Vec<kernel::Built>,
    pub opts: boot::Options,
}

/// The preparation every booting verb starts with, once: the host provisioned for `needs`, the
/// VM flags resolved into the boots' options (a bad `--share` fails before anything builds),
/// then the kernels built or fetched.
pub fn prepare(needs: &Needs, kernel: &KernelArgs, vm: &VmArgs) -> Result<Prepared> {
    ensure(needs)?;
    let opts = boot::Options::of(vm, kernel.cache_dir.as_deref())?;
    let built = crate::kernel::build_all(&kernel.request()?)?;
    Ok(Prepared { built, opts })
}

/// One run's parts: the scenarios chosen, the kernels they run on, the boots' options. Made by
/// `prepare` (or by hand when a verb builds its kernels otherwise, as `bisect` and `validate`
/// do), then listed (`--list`) or run.
pub struct Pipeline {
    pub chosen: Chosen,
    pub built: Vec<kernel::Built>,
    pub opts: boot::Options,
}

/// What a run left: its folder and model (none when nothing booted), and the exit code of its
/// boots.
pub struct Ran {
    pub dir: Option<PathBuf>,
    pub model: Option<results::model::Run>,
    pub code: u8,
}

impl Pipeline {
    /// The chosen scenarios' run prepared: `needs` provisioned, the VM options, the kernels.
    pub fn prepare(chosen: Chosen, needs: &Needs, kernel: &KernelArgs, vm: &VmArgs) -> Result<Pipeline> {
        let Prepared { built, opts } = prepare(needs, kernel, vm)?;
        Ok(Pipeline { chosen, built, opts })
    }

    /// `--list`: each kernel's plan, nothing boots.
    pub fn list(&self) -> Result<u8> {
        list_plans(&self.chosen, &self.built)
    }

    /// The plan, the boots and the reports: the run's folder, model and exit code.
    pub fn run(&self) -> Result<Ran> {
        let judged = run(&self.chosen, &self.built, &self.opts)?;
        let model = publish(&judged, &self.built)?;
        Ok(Ran { dir: run_dir(&judged).map(Path::to_path_buf), model, code: boot::exit_code(&judged) })
    }
}

impl Ran {
    /// The run's exit code, `BLIND_SPOTS` with `--fail-on-blind-spots` when it passed but its
    /// patch adds lines no scenario executed.
    pub fn exit_code(&self, fail_on_blind_spots: bool) -> u8 {
        blind_spots_code(self.code, fail_on_blind_spots, self.model.as_ref(), "")
    }
}

/// `code`, or `BLIND_SPOTS` (said on a line that starts with `who`) when `on`
/// (`--fail-on-blind-spots`), `code` is a pass and the run's patch adds lines no scenario
/// executed.
pub fn blind_spots_code(code: u8, on: bool, run: Option<&results::model::Run>, who: &str) -> u8 {
    if code == 0 && on && run.is_some_and(|r| !r.blind_spots().is_empty()) {
        progress::line(format!("{who}--fail-on-blind-spots: the patch adds lines no scenario executed"));
        return crate::support::exit::BLIND_SPOTS;
    }
    code
}

/// The run folder the boots wrote into (`<run-id>/<arch>` is each boot's `out_dir`).
pub fn run_dir(judged: &[boot::BootRun]) -> Option<&Path> {
    judged.first().and_then(|j| j.outcome.out_dir.parent())
}

/// Every `suites/*.yaml` of the checkout.
pub fn suite_files() -> Result<Vec<PathBuf>> {
    let dir = project_root().join("suites");
    suites::files_in(&dir).map_err(|e| error(Kind::BadInput, format!("{}: {e}", dir.display())))
}

/// Loads and validates suites; every error of every file ends the command as bad input (128).
pub fn load_suites(files: &[PathBuf]) -> Result<Vec<suites::Suite>> {
    suites::load_all(files).map_err(|e| error(Kind::BadInput, format!("invalid suite files:\n{e}")))
}

/// `cargo xtask check-suites`: one line per good file, every error of the bad ones.
pub fn check_suites(files: &[PathBuf]) -> u8 {
    if files.is_empty() {
        println!("no suite files (suites/*.yaml) to check");
        return 0;
    }
    let mut bad = 0;
    for file in files {
        match suites::load_all(std::slice::from_ref(file)) {
            Ok(s) => println!("ok {}: {} scenarios", suites::shown(file), s[0].scenarios.len()),
            Err(e) => {
                bad += 1;
                eprintln!("{e}\n");
            }
        }
    }
    // Two good files may still clash on their suite name.
    if bad == 0 {
        if let Err(e) = suites::load_all(files) {
            eprintln!("{e}");
            bad += 1;
        }
    }
    if bad == 0 {
        0
    } else {
        eprintln!("{bad} of {} suite file(s) have errors", files.len());
        Kind::BadInput.code()
    }
}

/// The suites a command runs and which of their scenarios: `--suite` files (default: every
/// suites/*.yaml), `--filter`, `--rerun-failed`.
pub struct Chosen {
    pub suites: Vec<suites::Suite>,
    pub select: select::Selection,
    /// The catalogue's summary of each item (`suites/catalogue.tsv`), for the reports.
    pub catalogue: std::collections::BTreeMap<String, String>,
    /// `--mutant-batch`: the plan is the batch's groups.
    pub batch: Option<crate::mutants::batch::Batch>,
}

impl Chosen {
    /// The guest clients the chosen scenarios run on any arch (a scenario names a client by its
    /// guest path in a step), for provisioning.
    pub fn clients(&self) -> Vec<&'static str> {
        let mut out = Vec::new();
        for suite in &self.suites {
            for scenario in &suite.scenarios {
                let name = format!("{}/{}", suite.suite, scenario.name);
                if !crate::arch::ARCHES.iter().any(|a| self.select.wants(a.name, &name)) {
                    continue;
                }
                for c in crate::vm::initramfs::clients_run_by(&scenario.steps) {
                    if !out.contains(&c.package) {
                        out.push(c.package);
                    }
                }
            }
        }
        out
    }
}

/// `--rerun-failed` without `--arch`: the arches of the run that have something to rerun (the
/// default pair would leave out an `--arch all` run's s390x and riscv64 failures).
pub fn rerun_arches(chosen: &Chosen, kernel: KernelArgs) -> KernelArgs {
    match chosen.select.rerun_arches() {
        Some(arches) if kernel.arch == crate::arch::DEFAULT && !arches.is_empty() => {
            KernelArgs { arch: arches.join(","), ..kernel }
        }
        _ => kernel,
    }
}

/// Suites that measure rather than judge: out of the default (gating) plan; `--bench` or
/// `--suite suites/performance.yaml` runs them.
pub const MEASURING_SUITES: &[&str] = &["performance"];

pub fn choose(args: &SelectArgs, results: &Path) -> Result<Chosen> {
    let files = if args.suites.is_empty() {
        let all = suite_files()?;
        let measuring = |f: &PathBuf| f.file_stem().is_some_and(|s| MEASURING_SUITES.iter().any(|m| s == *m));
        if args.bench {
            all
        } else {
            all.into_iter().filter(|f| !measuring(f)).collect()
        }
    } else {
        args.suites.clone()
    };
    let suites = load_suites(&files)?;
    let select = select::Selection::new(&args.filters, args.rerun_failed.as_deref(), results)?
        .in_filter_order(args.in_filter_order);
    let catalogue = coverage::load(&project_root())
        .map(|(items, _)| items.into_iter().map(|i| (i.id, i.summary)).collect())
        .unwrap_or_default();
    let batch = match &args.mutant_batch {
        None => None,
        Some(f) => {
            let text = std::fs::read(f).map_err(|e| error(Kind::BadInput, format!("{}: {e}", f.display())))?;
            let batch =
                serde_json::from_slice(&text).map_err(|e| error(Kind::BadInput, format!("{}: {e}", f.display())))?;
            Some(batch)
        }
    };
    Ok(Chosen { suites, select, catalogue, batch })
}

/// The suites compiled against one kernel (its release and `.config`), narrowed to the chosen
/// scenarios.
pub fn compile_for(chosen: &Chosen, b: &kernel::Built) -> Result<suites::Compiled> {
    let text = std::fs::read_to_string(&b.config)
        .map_err(|e| error(Kind::Infra, format!("{}: reading the kernel's .config: {e}", b.config.display())))?;
    let config = kconfig::parse_config(&text);
    let facts = suites::KernelFacts { release: &b.metadata.kernelrelease, config: &config };
    let mut compiled = suites::compile(&chosen.suites, &facts, b.arch.name);
    // The catalogue's words for each item a scenario covers, for the reports.
    for about in compiled.marks.about.values_mut() {
        for (id, summary) in &mut about.covers {
            if let Some(words) = chosen.catalogue.get(id) {
                summary.clone_from(words);
            }
        }
    }
    // A coverage kernel's scenarios are framed by GCOV resets and reads.
    compiled.plan.gcov = gcov_plan(b);
    let arch = b.arch.name;
    compiled.plan.scenarios.retain(|s| chosen.select.wants(arch, &s.name));
    compiled.isolated.retain(|s| chosen.select.wants(arch, &s.name));
    // The scenarios that ran the changed lines first, in their order (a stable sort keeps the
    // rest in theirs).
    compiled.plan.scenarios.sort_by_key(|s| chosen.select.rank(arch, &s.name));
    compiled.isolated.sort_by_key(|s| chosen.select.rank(arch, &s.name));
    compiled.skipped.retain(|s| chosen.select.wants(arch, &s.name));
    Ok(match &chosen.batch {
        Some(batch) => batch.expand(compiled),
        None => compiled,
    })
}

/// What the agent collects on this kernel: its GCOV sources, if it was built for coverage.
pub fn gcov_plan(b: &kernel::Built) -> Option<protocol::gcov::GcovPlan> {
    let files = &b.metadata.gcov_files;
    (!files.is_empty()).then(|| protocol::gcov::GcovPlan { files: files.clone() })
}

/// `--list`: each arch's selected plan (isolated scenarios marked) and what it skips and why;
/// nothing boots.
pub fn list_plans(chosen: &Chosen, built: &[kernel::Built]) -> Result<u8> {
    let mut any = false;
    for b in built {
        let c = compile_for(chosen, b)?;
        let arch = b.arch.name;
        println!(
            "{arch}: {}: {} scenario(s), {} isolated, {} skipped",
            b.metadata.kernelrelease,
            c.plan.scenarios.len() + c.isolated.len(),
            c.isolated.len(),
            c.skipped.len()
        );
        for s in &c.plan.scenarios {
            println!("{arch} {}", s.name);
        }
        for s in &c.isolated {
            println!("{arch} {} [isolated: a boot of its own]", s.name);
        }
        for s in &c.skipped {
            println!("{arch} {} [skipped: {}]", s.name, s.reason);
        }
        any |= !c.plan.scenarios.is_empty() || !c.isolated.is_empty() || !c.skipped.is_empty();
    }
    if !any && chosen.select.narrows() {
        return Err(nothing_selected(chosen));
    }
    Ok(0)
}

fn nothing_selected(chosen: &Chosen) -> anyhow::Error {
    let total: usize = chosen.suites.iter().map(|s| s.scenarios.len()).sum();
    error(Kind::BadInput, format!("{} selects none of the {total} scenario(s) of the suites", chosen.select.describe()))
}

/// The plan and the boots: the suites compiled against each kernel (what is skipped and why
/// printed and kept), then every plan booted and each boot judged. The boots' `out_dir` is
/// `results/<run-id>/<arch>`. With `--rerun-failed` on a run that has no failure, nothing
/// boots and the list is empty.
pub fn run(chosen: &Chosen, built: &[kernel::Built], opts: &boot::Options) -> Result<Vec<boot::BootRun>> {
    if chosen.select.rerun_count() == Some(0) {
        progress::line(format!(
            "{}: that run has no failed, timed-out or not-run scenario: nothing to rerun",
            chosen.select.describe()
        ));
        return Ok(vec![]);
    }
    let boots = plan_boots(chosen, built, opts.vms)?;
    if boots.plans.is_empty() {
        if chosen.select.narrows() && boots.skipped.is_empty() {
            return Err(nothing_selected(chosen));
        }
        progress::line("every selected scenario is skipped on every kernel: nothing to boot");
        return Ok(vec![]);
    }
    let judged = boot::run_plans(boots.plans, &[], opts)?;
    if let Some(run_dir) = run_dir(&judged) {
        save_skipped(run_dir, built, &boots.skipped)?;
    }
    Ok(judged)
}

/// The boots the chosen suites need on these kernels, and what each kernel's plan leaves out.
pub struct Boots<'a> {
    pub plans: Vec<boot::PlanFor<'a>>,
    pub skipped: Vec<(&'static str, run_folder::Skipped)>,
}

/// Compiles the chosen suites for each kernel: its shared plan cut into `vms` parts (`--vms`),
/// a boot per isolated scenario, and the skipped scenarios (printed as they are found).
pub fn plan_boots<'a>(chosen: &Chosen, built: &'a [kernel::Built], vms: usize) -> Result<Boots<'a>> {
    let mut plans = Vec::new();
    let mut isolated = Vec::new();
    let mut skipped = Vec::new();
    for b in built {
        let compiled = compile_for(chosen, b)?;
        for s in &compiled.skipped {
            progress::line(format!("{} {}/{}: {}", progress::tag("SKIPPED"), b.arch.name, s.name, s.reason));
            let s = run_folder::Skipped { name: s.name.clone(), reason: s.reason.clone() };
            skipped.push((b.arch.name, s));
        }
        for (n, scenario) in compiled.isolated.into_iter().enumerate() {
            let mut plan = protocol::Plan::empty(b.arch.name);
            plan.gcov = gcov_plan(b);
            plan.scenarios.push(scenario);
            let dir = run_folder::BootDir::Isolated(n as u32 + 1).name(b.arch.name);
            isolated.push(boot::PlanFor { built: b, plan, marks: compiled.marks.clone(), dir });
        }
        // No shared boot when every planned scenario of this kernel is isolated, or when the
        // selection left this arch nothing.
        let nothing_here = compiled.plan.scenarios.is_empty()
            && (chosen.select.narrows() || isolated.iter().any(|p| p.built.arch.name == b.arch.name));
        if !nothing_here {
            for (k, plan) in boot::split_plan(compiled.plan, vms).into_iter().enumerate() {
                let dir = boot::shared_dir(b.arch.name, k + 1);
                plans.push(boot::PlanFor { built: b, plan, marks: compiled.marks.clone(), dir });
            }
        }
    }
    plans.extend(isolated);
    Ok(Boots { plans, skipped })
}

/// What each arch's plan left out, for the run's reports (`<run>/<arch>/skipped.json`).
pub fn save_skipped(
    run_dir: &Path,
    built: &[kernel::Built],
    skipped: &[(&'static str, run_folder::Skipped)],
) -> Result<()> {
    for b in built {
        let mine: Vec<_> = skipped.iter().filter(|(a, _)| *a == b.arch.name).map(|(_, s)| s.clone()).collect();
        run_folder::save_skipped(&run_dir.join(b.arch.name), &mine)?;
    }
    Ok(())
}

/// The reports: the run's provenance recorded beside its logs, the model made from the boots as
/// judged (not judged again), and every report written into the run folder with the
/// invocation's timings; then the run recorded in the history (`--history`). The run's model,
/// `None` when nothing booted.
pub fn publish(judged: &[boot::BootRun], built: &[kernel::Built]) -> Result<Option<results::model::Run>> {
    publish_as(judged, built, true)
}

/// [`publish`], the run recorded in the history only when `record` (a re-run round is not: its
/// verdicts are in the run it re-ran).
pub fn publish_as(
    judged: &[boot::BootRun],
    built: &[kernel::Built],
    record: bool,
) -> Result<Option<results::model::Run>> {
    let Some(run_dir) = run_dir(judged) else { return Ok(None) };
    let began = std::time::Instant::now();
    let boots: Vec<&run_folder::JudgedBoot> = judged.iter().map(|j| &j.boot).collect();
    results::collect::save_facts(run_dir, &boots, built)?;
    for said in results::symbols::save(&boots, built) {
        progress::line(said);
    }
    // A coverage run's tracefiles and figures, before the model that shows them.
    if let Some(data) = crate::coverage::runs::read(&boots, built)? {
        let summary = crate::coverage::runs::write(run_dir, &data)?;
        for r in &summary.rows {
            progress::line(format!("coverage {}: {}", r.arch, r.totals.describe()));
        }
        for p in &summary.problems {
            progress::line(format!("coverage: {p}"));
        }
        for l in summary.patch.iter().flat_map(|p| p.describe()) {
            progress::line(l);
        }
    }
    let run = results::collect::assemble(run_dir, &boots, vec![], jiff::Timestamp::now())?;
    let run = results::publish(run_dir, run, Some(began))?;
    if record {
        crate::history::record(run_dir, &run, crate::history::rows::Origin::Run);
    }
    Ok(Some(run))
}

/// `boot --plan FILE`: a compiled plan (the agent's JSON input), its version and names checked.
pub fn read_plan(path: &Path) -> Result<protocol::Plan> {
    let text =
        std::fs::read_to_string(path).map_err(|e| error(Kind::BadInput, format!("--plan {}: {e}", path.display())))?;
    let plan: protocol::Plan = serde_json::from_str(&text)
        .map_err(|e| error(Kind::BadInput, format!("--plan {}:{}:{}: {e}", path.display(), e.line(), e.column())))?;
    if plan.version != protocol::PROTOCOL_VERSION {
        return Err(error(
            Kind::BadInput,
            format!(
                "--plan {}: version {} but this agent speaks {}",
                path.display(),
                plan.version,
                protocol::PROTOCOL_VERSION
            ),
        ));
    }
    if let Some(bad) = plan.scenarios.iter().find(|s| s.name.is_empty() || s.name.contains(char::is_whitespace)) {
        return Err(error(
            Kind::BadInput,
            format!("--plan {}: scenario name `{}` is empty or has spaces", path.display(), bad.name),
        ));
    }
    Ok(plan)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clients_come_from_the_chosen_scenarios() {
        let results = tempfile::tempdir().unwrap();
        let chose = |filter: &str| {
            let select = SelectArgs { filters: vec![filter.into()], ..Default::default() };
            choose(&select, results.path()).unwrap().clients()
        };
        assert_eq!(chose("clients/*"), ["ue-tracepoint", "ue-compat32"]);
        assert!(chose("process/*").is_empty());
        assert!(chose("!clients/*").is_empty());
    }

    #[test]
    fn check_suites_exits_2_on_any_bad_file() {
        let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("test_data/suites");
        let good = data.join("good/registration.yaml");
        assert_eq!(check_suites(std::slice::from_ref(&good)), 0);
        assert_eq!(check_suites(&[good.clone(), data.join("bad/bad-hex.yaml")]), 128);
        assert_eq!(check_suites(&[good.clone(), good]), 128, "one suite name in two files");
        assert_eq!(check_suites(&[]), 0);
    }
}
