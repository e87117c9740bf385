//! The SQLite store: the shared store checks on temp files, a writer killed mid-transaction,
//! and the results fixtures imported.

use std::path::Path;

use super::*;
use crate::history::rows::Origin;
use crate::history::store::Store;
use crate::history::{checks, classify};

#[test]
fn the_store_checks_pass_on_sqlite_files() {
    let dir = tempfile::tempdir().unwrap();
    let connect = |name: &str| -> Result<Box<dyn Db>> { Ok(Box::new(Sqlite::open(&dir.path().join(name))?)) };
    checks::all(&connect).unwrap();
}

#[test]
fn a_database_in_memory_is_migrated_to_the_last_version() {
    let mut s = Store::open(Box::new(Sqlite::memory().unwrap())).unwrap();
    assert_eq!(s.version().unwrap(), crate::history::schema::current());
    assert!(s.describe().ends_with("in memory"));
    assert!(s.record(&checks::sample("r1", 1, &[("a/b", "pass")])).unwrap());
}

/// Set in the child of [`a_writer_killed_mid_transaction_leaves_no_half_run`]: the database
/// it writes and dies in.
const CHILD_ENV: &str = "XTASK_HISTORY_CRASH_CHILD";

/// The child's part: starts recording a run, says so halfway through its results, and waits
/// there to be killed. Does nothing in a normal test run.
#[test]
fn crash_child_writes_until_killed() {
    let Some(path) = std::env::var_os(CHILD_ENV) else { return };
    let mut s = Store::open(Box::new(Sqlite::open(Path::new(&path)).unwrap())).unwrap();
    let run = checks::sample("killed", 2, &[("a/b", "pass"), ("a/c", "pass"), ("a/d", "fail"), ("a/e", "pass")]);
    let _ = s.record_with(&run, &|| {
        println!("HALFWAY");
        std::thread::sleep(std::time::Duration::from_secs(60));
    });
    panic!("the child was not killed");
}

#[test]
fn a_writer_killed_mid_transaction_leaves_no_half_run() {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("history.sqlite");
    let mut s = Store::open(Box::new(Sqlite::open(&path).unwrap())).unwrap();
    s.record(&checks::sample("before", 1, &[("a/b", "pass")])).unwrap();
    drop(s);
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "history::sqlite::tests::crash_child_writes_until_killed", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, &path)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let out = std::io::BufReader::new(child.stdout.take().unwrap());
    let halfway = out.lines().map_while(std::result::Result::ok).any(|l| l.contains("HALFWAY"));
    assert!(halfway, "the child never reached the middle of its write");
    child.kill().unwrap(); // SIGKILL: no destructor, no rollback of its own.
    child.wait().unwrap();
    let mut s = Store::open(Box::new(Sqlite::open(&path).unwrap())).unwrap();
    let runs: Vec<String> = s.runs().unwrap().into_iter().map(|r| r.run_id).collect();
    assert_eq!(runs, ["before"], "the killed run left a row");
    assert_eq!(s.count_results().unwrap(), 1, "the killed run left results");
    assert!(s.record(&checks::sample("after", 3, &[("a/b", "fail")])).unwrap(), "the database is writable after");
    let classed = classify::classify(&s.outcomes().unwrap(), "after", "builder", 10);
    assert_eq!(classed[0].class, classify::Class::Regression);
}

#[test]
fn the_results_fixtures_import() {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("test_data/results");
    let mut s = Store::open(Box::new(Sqlite::memory().unwrap())).unwrap();
    // The golden run.json is the fixture folder's model: one run (its id and host), recorded
    // once, whether read from its run.json or judged again from its logs.
    for (side, fresh) in [(data.join("golden/run.json"), true), (data.join("run-fixture"), false)] {
        for (folder, run) in crate::results::compare::load_side(&side).unwrap() {
            let rows = crate::history::rows_of(&run, &folder, Origin::Import);
            assert!(!rows.results.is_empty(), "{}", folder.display());
            assert_eq!(s.record(&rows).unwrap(), fresh, "{}", folder.display());
        }
    }
    let runs = s.runs().unwrap();
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert!(runs.iter().all(|r| r.project_commit.is_none() && r.origin == "import"));
    let golden: crate::results::model::Run =
        serde_json::from_str(&std::fs::read_to_string(data.join("golden/run.json")).unwrap()).unwrap();
    let n: usize = golden.arches.iter().map(|a| a.scenarios.len()).sum();
    let outcomes = s.outcomes().unwrap();
    assert_eq!(outcomes.iter().filter(|o| o.run_id == golden.run_id).count(), n);
    // Each status of the fixture kept as the model said it.
    for a in &golden.arches {
        for sc in &a.scenarios {
            let o = outcomes.iter().find(|o| o.run_id == golden.run_id && o.arch == a.arch && o.scenario == sc.name);
            assert_eq!(o.map(|o| o.status.as_str()), Some(sc.status.as_str()), "{} {}", a.arch, sc.name);
        }
    }
}

#[test]
fn recording_warns_instead_of_failing() {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("test_data/results/golden/run.json");
    let run: crate::results::model::Run = serde_json::from_str(&std::fs::read_to_string(&data).unwrap()).unwrap();
    let record = |l: &crate::cli::Location| crate::history::record_into(l, Path::new("r"), &run, Origin::Run);
    let dir = tempfile::tempdir().unwrap();
    // A file where its folder should be: the store cannot be made.
    std::fs::write(dir.path().join("file"), "").unwrap();
    let said = record(&crate::cli::Location::Sqlite(dir.path().join("file/h.sqlite"))).unwrap();
    assert!(said.starts_with("warning: history: run run-fixture not recorded: creating "), "{said}");
    assert_eq!(record(&crate::cli::Location::Off), None);
    let said = record(&crate::cli::Location::Sqlite(dir.path().join("h.sqlite"))).unwrap();
    assert!(said.starts_with("history: run run-fixture recorded in sqlite "), "{said}");
    let mut s = Store::open(Box::new(Sqlite::open(&dir.path().join("h.sqlite")).unwrap())).unwrap();
    let runs = s.runs().unwrap();
    assert_eq!((runs.len(), runs[0].origin), (1, "run"));
    assert!(runs[0].project_commit.is_some(), "a run made here names the project's commit");
}
