//! The results history: every published run recorded in a database, so a scenario's behaviour
//! over many runs, kernels and arches can be asked for. Here: which store (`--history`, chosen
//! once per process), recording a run (never failing it), `import`, and the `history` verb's
//! answers; `rows` (a run model as rows, sans-IO), `schema` (the migrations), `store` (the one
//! trait of the backends and the SQL they share), `sqlite` (the default, beside the cache) and
//! `postgres`, `classify` (the classes and the flips, sans-IO), `findings` (a run's kernel reports
//! known from an earlier run or new, by fingerprint; sans-IO), `gate` (which failures a run re-runs
//! because their history flips, and the exit code after; sans-IO), `render` (text and JSON),
//! `checks` (the store's behaviour, checked alike on both backends), `dashboard` (the static
//! page: cells over the runs, first bad runs, figures' trends; sans-IO) with `stats` (the
//! Mann-Whitney U test), `kcidb` (the recorded runs as one KCIDB document; sans-IO).

pub mod checks;
pub mod classify;
pub mod dashboard;
pub mod findings;
pub mod gate;
pub mod kcidb;
pub mod postgres;
pub mod render;
pub mod rows;
pub mod schema;
pub mod sqlite;
pub mod stats;
pub mod store;

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use anyhow::Result;

use crate::cli::{DashboardArgs, FlakesArgs, KcidbArgs, Location, ShowArgs};
use crate::results::model::Run;
use crate::support::exit::{error, Kind};
use crate::support::progress::line;
use rows::Origin;
pub use store::Store;

/// The file of the default store, in the cache directory.
pub const FILE: &str = "history.sqlite";
/// The environment variable `--history` also reads (child runs inherit the choice through it).
pub const ENV: &str = "XTASK_HISTORY";

/// The store this process records into; off until `select` (library callers, unit tests).
static SELECTED: Mutex<Option<Location>> = Mutex::new(None);

/// Chooses the store once, from the command line: `--history`, else the default file in the
/// cache directory (`--cache-dir`, `XTASK_CACHE_DIR`, else the cache's default root).
pub fn select(flag: Option<Location>, cache_dir: Option<&Path>) {
    let chosen = match flag.unwrap_or_default() {
        Location::Default => Location::Sqlite(default_file(cache_dir)),
        other => other,
    };
    *SELECTED.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(chosen);
}

/// `<cache>/history.sqlite`.
pub fn default_file(cache_dir: Option<&Path>) -> PathBuf {
    let env = std::env::var_os("XTASK_CACHE_DIR").map(PathBuf::from);
    crate::kernel::cache::root(cache_dir.or(env.as_deref())).join(FILE)
}

/// The chosen store (`Off` when none was chosen).
pub fn selected() -> Location {
    SELECTED.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone().unwrap_or(Location::Off)
}

/// What a child run of this binary needs in its environment to record where this one does.
pub fn child_env() -> Option<(&'static str, String)> {
    selected().spelled().map(|s| (ENV, s))
}

/// Opens `location` (its tables migrated); `None` for `off`.
pub fn open(location: &Location) -> Result<Option<Store>> {
    let db: Box<dyn store::Db> = match location {
        Location::Off => return Ok(None),
        Location::Default => Box::new(sqlite::Sqlite::open(&default_file(None))?),
        Location::Sqlite(path) => Box::new(sqlite::Sqlite::open(path)?),
        Location::Postgres(url) => Box::new(postgres::Postgres::connect(url)?),
    };
    Store::open(db).map(Some)
}

/// `git rev-parse HEAD` of the project's checkout, else the tool's version.
pub fn project_commit() -> String {
    let root = crate::support::checkout::project_root();
    let head = crate::support::cmd::sh()
        .ok()
        .and_then(|sh| crate::support::cmd::text(xshell::cmd!(sh, "git -C {root} rev-parse HEAD").quiet()).ok())
        .filter(|h| h.len() >= 40);
    head.unwrap_or_else(|| concat!(env!("CARGO_PKG_VERSION"), " (commit ", env!("XTASK_GIT_COMMIT"), ")").to_string())
}

fn this_host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname").map_or_else(|_| "unknown".into(), |h| h.trim().to_string())
}

/// The rows of a run made here (`origin` says how).
pub fn rows_of(run: &Run, folder: &Path, origin: Origin) -> rows::Recorded {
    let profiles =
        crate::kernel::kconfig::profile_names(&crate::support::checkout::project_root().join("kernel-configs"));
    let host = this_host();
    let cx = rows::Context {
        project_commit: (origin != Origin::Import).then(project_commit),
        host: &host,
        recorded_at: jiff::Timestamp::now(),
        origin,
        folder: &folder.display().to_string(),
        profiles: &profiles,
    };
    rows::of_run(run, &cx)
}

/// Records a published run into the chosen store. Never fails the run: a store that cannot be
/// opened or written is a warning line, and the run goes on as if there were none.
pub fn record(folder: &Path, run: &Run, origin: Origin) {
    if let Some(said) = record_into(&selected(), folder, run, origin) {
        line(said);
    }
}

/// [`record`] into `location`: the line to print (`None` for `off`).
pub fn record_into(location: &Location, folder: &Path, run: &Run, origin: Origin) -> Option<String> {
    let recorded = rows_of(run, folder, origin);
    let result = open(location).and_then(|s| match s {
        None => Ok(None),
        Some(mut s) => s.record(&recorded).map(|_| Some(s.describe())),
    });
    match result {
        Ok(Some(store)) => Some(format!("history: run {} recorded in {store}", run.run_id)),
        Ok(None) => None,
        Err(e) => Some(format!("warning: history: run {} not recorded: {e:#}", run.run_id)),
    }
}

/// The classes of the run `run_id` recorded from this host in the chosen store, over the last
/// `window` outcomes of each cell; `None` with `--history off`.
pub fn classes_of(run_id: &str, window: usize) -> Result<Option<Vec<classify::Classed>>> {
    let Some(mut store) = open(&selected())? else { return Ok(None) };
    Ok(Some(classify::classify(&store.outcomes()?, run_id, &this_host(), window)))
}

/// What the chosen store says of each scenario on `arch` for the progress watchdog's crawl
/// rule: the median duration of its passing outcomes, for the scenarios `wanted` keeps (those
/// that report progress); `None` for the others, without a store (`--history off`), or when the
/// store cannot be read (the rule is then left out, never the run failed).
pub fn expected(
    arch: &str,
    names: &[&str],
    wanted: &dyn Fn(usize) -> bool,
) -> Vec<Option<crate::vm::progress::Expected>> {
    let mut store = None;
    let mut opened = false;
    names
        .iter()
        .enumerate()
        .map(|(i, name)| {
            if !wanted(i) {
                return None;
            }
            if !std::mem::replace(&mut opened, true) {
                store = open(&selected()).ok().flatten();
            }
            let durations = store.as_mut()?.passing_durations(name, arch).ok()?;
            let durations: Vec<f64> = durations.into_iter().map(|d| d as f64).collect();
            // Whole milliseconds: an even count's middle pair averaged, rounded down.
            let median_ms = stats::median(&durations)? as u64;
            Some(crate::vm::progress::Expected { median_ms, arch: arch.to_string() })
        })
        .collect()
}

/// Records in the chosen store what the gate's re-run made of run `run`'s failures (its
/// model's `rerun`). Never fails the run: a warning line.
pub fn record_rerun(run: &Run) {
    let Some(rerun) = &run.rerun else { return };
    let host = run.host.as_ref().map_or_else(this_host, |h| h.hostname.clone());
    let result = open(&selected()).and_then(|s| match s {
        None => Ok(()),
        Some(mut s) => s.record_rerun(&run.run_id, &host, rerun),
    });
    if let Err(e) = result {
        line(format!("warning: history: the re-run of run {} not recorded: {e:#}", run.run_id));
    }
}

/// The chosen store, or why there is none to read.
fn open_selected() -> Result<Store> {
    match open(&selected())? {
        Some(s) => Ok(s),
        None => Err(error(Kind::BadInput, "--history off: there is no history to read")),
    }
}

/// `history import DIR...`: each run folder (or folder of run folders) recorded; those already
/// there are left as they were.
pub fn import(dirs: &[PathBuf]) -> Result<u8> {
    let mut store = open_selected()?;
    let (mut fresh, mut known) = (0, 0);
    for dir in dirs {
        for (folder, run) in crate::results::compare::load_side(dir)? {
            let rows = rows_of(&run, &folder, Origin::Import);
            if store.record(&rows)? {
                fresh += 1;
                line(format!(
                    "history: {} ({} results, {} kernel report(s)) imported from {}",
                    run.run_id,
                    rows.results.len(),
                    rows.findings.len(),
                    folder.display()
                ));
            } else {
                known += 1;
                line(format!("history: {} is already recorded", run.run_id));
            }
        }
    }
    println!("{fresh} run(s) imported, {known} already recorded, into {}", store.describe());
    Ok(0)
}

/// `history` / `history show`: the classes of the latest run (or `--run`); exits 1 on a
/// regression.
pub fn show(args: &ShowArgs) -> Result<u8> {
    let mut store = open_selected()?;
    let runs = store.runs()?;
    let run = match &args.run {
        Some(id) => runs.iter().rev().find(|r| &r.run_id == id),
        None => runs.iter().max_by(|a, b| (&a.started_at, &a.run_id).cmp(&(&b.started_at, &b.run_id))),
    };
    let Some(run) = run else {
        let what = args.run.as_ref().map_or("no run is recorded".to_string(), |id| format!("no run {id} is recorded"));
        return Err(error(Kind::BadInput, format!("{}: {what}", store.describe())));
    };
    let outcomes = store.outcomes()?;
    let classed = classify::classify_rechecked(&outcomes, &store.rechecks()?, &run.run_id, &run.host, args.window);
    let marked = findings::mark(&store.findings()?, &run.run_id, &run.host);
    let described = store.describe();
    let shown = render::Shown {
        store: &described,
        run,
        runs_recorded: runs.len(),
        window: args.window,
        classed: &classed,
        findings: &marked,
    };
    if args.json {
        print!("{}", render::show_json(&shown));
    } else {
        print!("{}", render::show_text(&shown, args.verbose));
    }
    let regressed = classed.iter().any(|c| c.class == classify::Class::Regression);
    Ok(if regressed { Kind::TestFailed.code() } else { 0 })
}

/// `history flakes`: the scenarios that flipped, most flips first, those `keep` takes
/// (`--filter`).
pub fn flakes(args: &FlakesArgs, keep: &dyn Fn(&str) -> bool) -> Result<u8> {
    let mut store = open_selected()?;
    let runs = store.runs()?.len();
    let mut flaky = classify::flakes(&store.outcomes()?);
    flaky.retain(|f| keep(&f.scenario));
    let described = store.describe();
    if args.json {
        print!("{}", render::flakes_json(&described, runs, &flaky));
    } else {
        print!("{}", render::flakes_text(&described, runs, &flaky));
    }
    Ok(0)
}

/// `history dashboard`: the page of the chosen store written to `--out`/index.html
/// (`results/dashboard/` in the checkout).
pub fn dashboard(args: &DashboardArgs) -> Result<u8> {
    let mut store = open_selected()?;
    let html = dashboard_html(&mut store, args.window)?;
    let out = args.out.clone().unwrap_or_else(|| crate::support::checkout::default_results().join("dashboard"));
    std::fs::create_dir_all(&out).map_err(|e| error(Kind::Infra, format!("{}: {e}", out.display())))?;
    let index = out.join("index.html");
    std::fs::write(&index, html).map_err(|e| error(Kind::Infra, format!("{}: {e}", index.display())))?;
    println!("dashboard of {} written to {}", store.describe(), index.display());
    Ok(0)
}

/// `history kcidb`: the recorded runs (`--run`, else all) as one KCIDB document, to `--out` or
/// standard output.
pub fn kcidb(args: &KcidbArgs) -> Result<u8> {
    let mut store = open_selected()?;
    let runs = store.runs()?;
    let chosen =
        kcidb::chosen(&runs, &args.runs).map_err(|e| error(Kind::BadInput, format!("{}: {e}", store.describe())))?;
    let (outcomes, found, rechecks) = (store.outcomes()?, store.findings()?, store.rechecks()?);
    let held = kcidb::Held { outcomes: &outcomes, found: &found, rechecks: &rechecks };
    let doc = kcidb::render(&held, &chosen, args.window, args.base.as_deref())?;
    match &args.out {
        None => {
            use std::io::Write;
            std::io::stdout().write_all(&doc)?;
        }
        Some(path) => {
            crate::support::files::write_atomic(path, &doc)
                .map_err(|e| error(Kind::Infra, format!("{}: {e:#}", path.display())))?;
            let tests = serde_json::from_slice::<serde_json::Value>(&doc)?["tests"].as_array().map_or(0, Vec::len);
            println!(
                "KCIDB of {} run(s), {tests} test(s), from {} written to {}",
                chosen.len(),
                store.describe(),
                path.display()
            );
        }
    }
    Ok(0)
}

/// The dashboard of `store` as HTML.
pub fn dashboard_html(store: &mut Store, window: usize) -> Result<String> {
    let runs = store.runs()?;
    let (outcomes, rechecks, measured) = (store.outcomes()?, store.rechecks()?, store.measurements()?);
    let page = dashboard::page(&store.describe(), &runs, &outcomes, &rechecks, &measured, window);
    Ok(dashboard::html::render(&page))
}
