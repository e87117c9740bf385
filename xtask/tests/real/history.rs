//! The real checks of the results history: the store's checks on a private PostgreSQL server
//! (Debian's programs, provisioned by `setup`; a cluster of our own in a temp folder, on a Unix
//! socket only, run as an unprivileged user, never the system's service), and two small runs
//! recorded, then their classes shown.

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result};

use xtask::cli::Location;
use xtask::history::store::Db;

pub const POSTGRES: &str = "history: the store's checks (migrations, a run's write and read-back, a writer that dies \
     mid-transaction, the classes, the measured figures, the kernel reports known or new) on a private PostgreSQL server, and \
     `history import` then `history --json` through its postgres:// URL (a later copy of the run: its report known), \
     `history dashboard` of it, and `history kcidb` (valid for kcidb-io, the run's own test ids)";

pub const TWO_RUNS: &str = "x86_64: two runs of registration/* recorded into a fresh history, then `history` classes \
     the second against the first (nothing new, no regression, exit 0), `history flakes` lists none, `history kcidb` \
     gives both runs' scenario tests, valid for kcidb-io, under the ids of each run's own kcidb.json; then a mutant \
     (delete-busy-errno.patch) makes the scenarios it fails regressions, its own among them (exit 1), and its fix makes \
     exactly those fixed, nothing else moving";

/// The uid and gid the server runs as when the check runs as root (`initdb` refuses root).
const NOBODY: u32 = 65534;

/// A private PostgreSQL cluster: its folder, programs and socket; stopped when dropped.
struct Server {
    dir: tempfile::TempDir,
    bin: PathBuf,
}

impl Server {
    /// `initdb` (superuser `ue`, trust on the socket) and `pg_ctl start` in a fresh folder,
    /// listening on no TCP address, its socket in the folder.
    fn start() -> Result<Server> {
        xtask::setup::provision::ensure(&xtask::setup::provision::Needs::postgres_server())?;
        let bin = xtask::setup::provision::postgres_bin().context("no initdb/pg_ctl after provisioning")?;
        let dir = tempfile::Builder::new().prefix("ue-pg-").tempdir_in(std::env::temp_dir())?;
        if as_root() {
            std::os::unix::fs::chown(dir.path(), Some(NOBODY), Some(NOBODY))?;
        }
        let server = Server { dir, bin };
        let data = server.data();
        server.run("initdb", &["-D", &data, "-U", "ue", "--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync"])?;
        let options = format!("-c listen_addresses='' -k {}", server.socket_dir());
        let log = server.dir.path().join("server.log").display().to_string();
        server.run("pg_ctl", &["-D", &data, "-l", &log, "-w", "-t", "60", "-o", &options, "start"])?;
        Ok(server)
    }

    fn data(&self) -> String {
        self.dir.path().join("data").display().to_string()
    }

    fn socket_dir(&self) -> String {
        self.dir.path().display().to_string()
    }

    /// A server program, as the unprivileged user when this runs as root.
    fn run(&self, program: &str, args: &[&str]) -> Result<()> {
        let exe = self.bin.join(program);
        let mut cmd = if as_root() {
            let mut c = Command::new("setpriv");
            c.args(["--reuid", &NOBODY.to_string(), "--regid", &NOBODY.to_string(), "--clear-groups"]).arg(&exe);
            c
        } else {
            Command::new(&exe)
        };
        let out = cmd.args(args).current_dir(self.dir.path()).output().with_context(|| format!("{program}"))?;
        anyhow::ensure!(
            out.status.success(),
            "{program} {args:?}: {}\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        Ok(())
    }

    /// The URL of database `db` on the socket.
    fn url(&self, db: &str) -> String {
        let host: String = self.socket_dir().replace('/', "%2F");
        format!("postgresql://ue@{host}/{db}")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.run("pg_ctl", &["-D", &self.data(), "-m", "immediate", "-w", "stop"]);
    }
}

fn as_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// The store's checks on a fresh private server, each in a database of its own; then the
/// verbs through the server's URL.
pub fn postgres_store(scratch: &Path) -> Result<()> {
    let server = Server::start()?;
    let admin = postgres::Client::connect(&server.url("postgres"), postgres::NoTls).context("the admin connection")?;
    let admin = RefCell::new(admin);
    let made = RefCell::new(BTreeSet::new());
    let connect = |name: &str| -> Result<Box<dyn Db>> {
        if made.borrow_mut().insert(name.to_string()) {
            admin.borrow_mut().batch_execute(&format!("CREATE DATABASE \"{name}\""))?;
        }
        Ok(Box::new(xtask::history::postgres::Postgres::connect(&server.url(name))?))
    };
    xtask::history::checks::all(&connect)?;
    admin.borrow_mut().batch_execute("CREATE DATABASE cli")?;
    let url = server.url("cli");
    let store = xtask::history::open(&Location::Postgres(url.clone()))?.context("no store")?;
    anyhow::ensure!(store.backend() == "postgres", "{}", store.describe());
    let root = xtask::support::checkout::project_root();
    let golden = root.join("xtask/test_data/results/golden/run.json");
    let xtask = crate::as_user::this_xtask()?;
    let import = Command::new(&xtask).args(["--history", &url, "history", "import"]).arg(&golden).output()?;
    anyhow::ensure!(import.status.success(), "history import: {}", String::from_utf8_lossy(&import.stderr));
    let show = Command::new(&xtask).args(["--history", &url, "history", "--json"]).output()?;
    anyhow::ensure!(show.status.code() == Some(0), "history --json exited {}", show.status);
    let doc: serde_json::Value = serde_json::from_slice(&show.stdout).context("history --json")?;
    anyhow::ensure!(doc["runs_recorded"] == 1 && doc["run"]["run_id"] == "run-fixture", "{doc}");
    anyhow::ensure!(doc["counts"] == serde_json::json!({"new": 9, "skipped": 3}), "counts {}", doc["counts"]);
    let findings = doc["findings"].as_array().context("history --json: findings")?;
    anyhow::ensure!(
        findings.len() == 1 && findings[0]["mark"] == "new" && findings[0]["scenario"] == "fault/panic",
        "the fixture's kernel report: {findings:?}"
    );
    // The same run again, later: its report is known, first seen in the fixture's run.
    let again = later_copy(&golden, scratch)?;
    let import = Command::new(&xtask).args(["--history", &url, "history", "import"]).arg(&again).output()?;
    anyhow::ensure!(import.status.success(), "history import: {}", String::from_utf8_lossy(&import.stderr));
    let show = Command::new(&xtask).args(["--history", &url, "history", "--json"]).output()?;
    let doc: serde_json::Value = serde_json::from_slice(&show.stdout).context("history --json")?;
    anyhow::ensure!(doc["run"]["run_id"] == "run-fixture-later", "{}", doc["run"]);
    let f = &doc["findings"][0];
    anyhow::ensure!(
        f["mark"] == "known"
            && f["first_run"] == "run-fixture"
            && f["signature"] == "panic:lkdtm_PANIC<lkdtm_do_action<direct_entry",
        "the later run's report: {f}"
    );
    let text = Command::new(&xtask).args(["--history", &url, "history"]).output()?;
    let said = String::from_utf8_lossy(&text.stdout);
    anyhow::ensure!(said.contains("known (first in run run-fixture, 1 earlier run(s))"), "history: {said}");
    let out = scratch.join("dashboard");
    let dash = Command::new(&xtask).args(["--history", &url, "history", "dashboard", "--out"]).arg(&out).output()?;
    anyhow::ensure!(dash.status.success(), "history dashboard: {}", String::from_utf8_lossy(&dash.stderr));
    let page = std::fs::read_to_string(out.join("index.html")).context("the dashboard's index.html")?;
    anyhow::ensure!(page.contains("<h2 id=\"x86_64\">") && page.contains("hazards/slow-write"), "the page: {page}");
    // KCIDB out of the server's history: valid, and the fixture's tests under the ids the
    // run's own document gives them.
    let doc = history_kcidb(&xtask, &url, &["--run", "run-fixture"], scratch)?;
    let run: xtask::results::model::Run = serde_json::from_slice(&std::fs::read(&golden)?)?;
    same_test_ids(&doc, &[run])?;
    Ok(())
}

/// `history kcidb --out` through `history`, its document validated by kcidb-io and returned.
fn history_kcidb(xtask: &Path, history: &str, extra: &[&str], scratch: &Path) -> Result<serde_json::Value> {
    let out = scratch.join("history-kcidb.json");
    let said = Command::new(xtask)
        .args(["--history", history, "history", "kcidb"])
        .args(extra)
        .arg("--out")
        .arg(&out)
        .output()?;
    anyhow::ensure!(said.status.success(), "history kcidb: {}", String::from_utf8_lossy(&said.stderr));
    let bytes = std::fs::read(&out).with_context(|| format!("{}", out.display()))?;
    xtask::results::tools::kcidb_validate(&bytes).context("history kcidb")?;
    Ok(serde_json::from_slice(&bytes)?)
}

/// The tests of the history's KCIDB document are exactly the scenario tests of `runs`' own
/// KCIDB documents: the same ids, builds, paths and statuses.
fn same_test_ids(doc: &serde_json::Value, runs: &[xtask::results::model::Run]) -> Result<()> {
    let key = |t: &serde_json::Value| {
        ["id", "build_id", "path", "status"].map(|f| t[f].as_str().unwrap_or_default().to_string())
    };
    let mine: BTreeSet<[String; 4]> = doc["tests"].as_array().context("tests")?.iter().map(key).collect();
    let mut own = BTreeSet::new();
    for run in runs {
        let d: serde_json::Value = serde_json::from_slice(&xtask::results::kcidb::render(run, "file:///r")?)?;
        let scenarios = d["tests"].as_array().context("tests")?.iter().filter(|t| t["path"] != "user_events.boot");
        own.extend(scenarios.map(key));
    }
    anyhow::ensure!(!mine.is_empty() && mine == own, "the history's KCIDB tests {mine:?}\nthe runs' own {own:?}");
    Ok(())
}

/// Whether `file` is under the `latest` link (the same run as a folder beside it).
fn entry_is_latest(file: &Path) -> bool {
    file.parent().and_then(Path::file_name).is_some_and(|n| n == xtask::judging::run_folder::LATEST)
}

/// The golden run.json as a later run: another id, its boots a year later.
fn later_copy(golden: &Path, scratch: &Path) -> Result<PathBuf> {
    let mut run: serde_json::Value = serde_json::from_slice(&std::fs::read(golden)?)?;
    run["run_id"] = "run-fixture-later".into();
    run["generated_at"] = "2027-01-02T03:04:05Z".into();
    for boot in run["arches"]
        .as_array_mut()
        .context("arches")?
        .iter_mut()
        .flat_map(|a| a["boots"].as_array_mut().map(|b| b.iter_mut().collect::<Vec<_>>()).unwrap_or_default())
    {
        if boot.get("started_at").is_some() {
            boot["started_at"] = "2027-01-02T03:00:00Z".into();
        }
    }
    let path = scratch.join("run-fixture-later.json");
    std::fs::write(&path, serde_json::to_vec_pretty(&run)?)?;
    Ok(path)
}

/// `xtask --history sqlite:... run --arch x86_64 --filter registration/*` twice, then
/// `history --json` and `history flakes --json` on what they recorded.
pub fn two_runs_then_classes(scratch: &Path, cache_dir: Option<&Path>) -> Result<()> {
    let file = scratch.join("two-runs.sqlite");
    let history = format!("sqlite:{}", file.display());
    let results = scratch.join("two-runs-results");
    let xtask = crate::as_user::this_xtask()?;
    let with = |args: &[&str]| {
        let mut c = Command::new(&xtask);
        c.arg("--history").arg(&history).args(args);
        c
    };
    for n in 1..=2 {
        let mut run = with(&["run", "--arch", "x86_64", "--filter", "registration/*"]);
        run.arg("--results").arg(&results);
        if let Some(dir) = cache_dir {
            run.arg("--cache-dir").arg(dir);
        }
        let out = run.output()?;
        let said = String::from_utf8_lossy(&out.stderr);
        anyhow::ensure!(out.status.code() == Some(0), "run {n} exited {}: {said}", out.status);
        anyhow::ensure!(said.contains("history: run ") && said.contains(" recorded in sqlite "), "run {n}: {said}");
    }
    let show = with(&["history", "--json"]).output()?;
    let doc: serde_json::Value = serde_json::from_slice(&show.stdout).context("history --json")?;
    anyhow::ensure!(show.status.code() == Some(0), "history exited {}: {}", show.status, doc["counts"]);
    anyhow::ensure!(doc["runs_recorded"] == 2, "{} runs recorded", doc["runs_recorded"]);
    let counts = doc["counts"].as_object().context("no counts")?;
    anyhow::ensure!(counts.get("stable").and_then(serde_json::Value::as_u64).unwrap_or(0) > 3, "counts {counts:?}");
    for class in ["new", "regression", "missing"] {
        anyhow::ensure!(!counts.contains_key(class), "a class {class} between two runs of one kernel: {counts:?}");
    }
    let flakes = with(&["history", "flakes", "--json"]).output()?;
    let doc: serde_json::Value = serde_json::from_slice(&flakes.stdout).context("history flakes --json")?;
    anyhow::ensure!(doc["scenarios"] == serde_json::json!([]), "flakes: {}", doc["scenarios"]);
    // KCIDB out of the history: both real runs, under the ids of their own documents.
    let doc = history_kcidb(&xtask, &history, &[], scratch)?;
    let mut runs = Vec::new();
    for entry in std::fs::read_dir(&results)? {
        let file = entry?.path().join("run.json");
        if file.is_file() && !entry_is_latest(&file) {
            runs.push(serde_json::from_slice(&std::fs::read(&file)?)?);
        }
    }
    anyhow::ensure!(runs.len() == 2, "{} run folders in {}", runs.len(), results.display());
    same_test_ids(&doc, &runs)?;
    // Then a mutant (EBUSY made EAGAIN), then its fix (a third kernel of the 6.12 line). The
    // mutant fails `delete-busy-and-missing`, and any scenario whose event the hygiene still
    // finds busy (its EAGAIN is no EBUSY to wait on: which ones is a race): each failure is a
    // regression, nothing else moves; after the fix exactly those are fixed.
    let patches = xtask::support::checkout::project_root().join("xtask/test_data/patches");
    let (mutant, fix) = (patches.join("delete-busy-errno.patch"), patches.join("delete-busy-errno-fix.patch"));
    let broken = "registration/delete-busy-and-missing";
    let mut regressed: Vec<String> = Vec::new();
    for (patches, code, class) in [(vec![&mutant], 1, "regression"), (vec![&mutant, &fix], 0, "fixed")] {
        let mut run = with(&["run", "--arch", "x86_64", "--filter", "registration/*", "--no-rerun-unstable"]);
        run.arg("--results").arg(&results);
        for p in &patches {
            run.arg("--patch").arg(p);
        }
        if let Some(dir) = cache_dir {
            run.arg("--cache-dir").arg(dir);
        }
        let out = run.output()?;
        let said = String::from_utf8_lossy(&out.stderr);
        anyhow::ensure!(out.status.code() == Some(code), "{class} run exited {}: {said}", out.status);
        let show = with(&["history", "--json"]).output()?;
        let doc: serde_json::Value = serde_json::from_slice(&show.stdout).context("history --json")?;
        anyhow::ensure!(show.status.code() == Some(code), "history after the {class} run exited {}", show.status);
        let cells = doc["cells"].as_array().context("cells")?;
        let moved: Vec<(String, String)> = cells
            .iter()
            .filter(|c| c["class"] != "stable" && c["class"] != "skipped")
            .map(|c| (c["scenario"].as_str().unwrap_or("").to_string(), c["class"].as_str().unwrap_or("").to_string()))
            .collect();
        anyhow::ensure!(moved.iter().all(|(_, c)| c == class), "after the {class} run: {moved:?}");
        let names: Vec<String> = moved.into_iter().map(|(n, _)| n).collect();
        if class == "regression" {
            anyhow::ensure!(names.iter().any(|n| n == broken), "{broken} is no regression: {names:?}");
            regressed = names;
        } else {
            anyhow::ensure!(names == regressed, "fixed {names:?}, where {regressed:?} regressed");
        }
    }
    Ok(())
}

pub const RERUN: &str = "x86_64: `run` re-runs a failure whose history flips in a fresh boot before it gates: with no \
     history both failures of xtask/test_data/suites/rerun gate at once (exit 1); with a passing run planted between, the \
     one that fails on every boot is re-run and is a regression (exit 1), the one that passes in the second boot of its \
     shared folder is unstable (alone: exit 0), each named in the progress lines, summary.md, report.html and run.json, and \
     remembered: `history` gives each the re-run's class; --no-rerun-unstable gates it at once";

/// One `run` of the rerun suite with a fresh share into `results`: its exit code, stderr and
/// the first run's model (`results/latest/run.json`).
struct Rerun<'a> {
    xtask: PathBuf,
    history: String,
    results: PathBuf,
    share: PathBuf,
    cache_dir: Option<&'a Path>,
}

impl Rerun<'_> {
    fn run(&self, extra: &[&str]) -> Result<(Option<i32>, String, serde_json::Value)> {
        // Each run's first boot finds the share empty, its second finds one `x` there.
        let _ = std::fs::remove_file(self.share.join("boots"));
        let suite = xtask::support::checkout::project_root().join("xtask/test_data/suites/rerun/rerun.yaml");
        let mut c = Command::new(&self.xtask);
        c.arg("--history").arg(&self.history).args(["run", "--arch", "x86_64", "--suite"]).arg(&suite);
        c.arg("--share").arg(&self.share).arg("--results").arg(&self.results).args(extra);
        if let Some(dir) = self.cache_dir {
            c.arg("--cache-dir").arg(dir);
        }
        let out = c.output()?;
        let said = String::from_utf8_lossy(&out.stderr).into_owned();
        let file = self.results.join("latest/run.json");
        let model = serde_json::from_slice(&std::fs::read(&file).with_context(|| format!("{}", file.display()))?)?;
        Ok((out.status.code(), said, model))
    }
}

/// The rerun suite run four times (six boots) into a private history, a passing run planted
/// by `history import` after the first.
pub fn rerun_flaky_failures(scratch: &Path, cache_dir: Option<&Path>) -> Result<()> {
    let share = scratch.join("rerun-share");
    std::fs::create_dir_all(&share)?;
    let r = Rerun {
        xtask: crate::as_user::this_xtask()?,
        history: format!("sqlite:{}", scratch.join("rerun.sqlite").display()),
        results: scratch.join("rerun-results"),
        share,
        cache_dir,
    };
    let (always, second) = ("rerun/always-fails", "rerun/passes-in-the-second-boot");
    // No history: both gate at once, nothing re-run.
    let (code, said, first) = r.run(&[])?;
    anyhow::ensure!(code == Some(1) && !said.contains("[RERUN]"), "no history: exit {code:?}: {said}");
    anyhow::ensure!(first.get("rerun").is_none(), "no history: {}", first["rerun"]);
    // A run where both passed, recorded after the first: each cell now flips on a failure.
    let mut planted = first.clone();
    planted["run_id"] = "planted-pass".into();
    let now = jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
    for arch in planted["arches"].as_array_mut().context("arches")? {
        for boot in arch["boots"].as_array_mut().context("boots")? {
            boot["started_at"] = now.clone().into();
        }
        for s in arch["scenarios"].as_array_mut().context("scenarios")? {
            s["status"] = "pass".into();
        }
    }
    let folder = scratch.join("rerun-planted");
    std::fs::create_dir_all(&folder)?;
    std::fs::write(folder.join("run.json"), serde_json::to_vec_pretty(&planted)?)?;
    let import =
        Command::new(&r.xtask).arg("--history").arg(&r.history).args(["history", "import"]).arg(&folder).output()?;
    anyhow::ensure!(import.status.success(), "history import: {}", String::from_utf8_lossy(&import.stderr));
    std::thread::sleep(std::time::Duration::from_secs(1));
    // Both re-run: one fails again (a regression, exit 1), the other passes (unstable).
    let (code, said, both) = r.run(&[])?;
    anyhow::ensure!(code == Some(1), "both: exit {code:?}: {said}");
    for (name, class) in [(always, "REGRESSION"), (second, "UNSTABLE")] {
        let want = format!("[{class}] x86_64 {name}: its history flips 2 time(s) in 3 run(s)");
        anyhow::ensure!(
            said.contains(&format!("[RERUN] x86_64 {name}: failed")) && said.contains(&want),
            "{want}: {said}"
        );
    }
    let classes = |model: &serde_json::Value| -> Vec<(String, String, String)> {
        let rows = model["rerun"]["scenarios"].as_array().cloned().unwrap_or_default();
        let text = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_string();
        rows.iter().map(|s| (text(&s["scenario"]), text(&s["rerun_status"]), text(&s["class"]))).collect()
    };
    let want = |n: &str, s: &str, c: &str| (n.to_string(), s.to_string(), c.to_string());
    anyhow::ensure!(
        classes(&both) == [want(always, "fail", "regression"), want(second, "pass", "unstable")],
        "run.json's rerun: {}",
        both["rerun"]
    );
    let rerun_id = both["rerun"]["run_id"].as_str().context("the re-run's run id")?;
    anyhow::ensure!(r.results.join(rerun_id).join("run.json").is_file(), "no re-run folder {rerun_id}");
    let run_id = both["run_id"].as_str().context("run_id")?;
    let summary = std::fs::read_to_string(r.results.join(run_id).join("summary.md"))?;
    anyhow::ensure!(summary.contains("### Re-run in a fresh boot") && summary.contains(rerun_id), "{summary}");
    let page = std::fs::read_to_string(r.results.join(run_id).join("report.html"))?;
    anyhow::ensure!(page.contains(&format!("../{rerun_id}/report.html")), "report.html links no re-run");
    // The history remembers the re-run: `history` gives each the class the gate gave it.
    let show = Command::new(&r.xtask)
        .arg("--history")
        .arg(&r.history)
        .args(["history", "--json", "--run", run_id])
        .output()?;
    let doc: serde_json::Value = serde_json::from_slice(&show.stdout).context("history --json")?;
    let cells = doc["cells"].as_array().context("history --json: cells")?;
    for (name, again, class) in [(always, "fail", "regression"), (second, "pass", "unstable")] {
        let cell = cells.iter().find(|c| c["scenario"] == name).with_context(|| format!("no cell {name}"))?;
        anyhow::ensure!(cell["class"] == class && cell["rerun"] == again, "history's {name}: {cell}");
    }
    anyhow::ensure!(show.status.code() == Some(1), "history of a run with a regression exited {}", show.status);
    // The one that passes on its re-run alone: unstable, exit 0.
    let (code, said, alone) = r.run(&["--filter", second])?;
    anyhow::ensure!(code == Some(0) && said.contains("[UNSTABLE] x86_64 rerun/passes"), "alone: exit {code:?}: {said}");
    anyhow::ensure!(classes(&alone) == [want(second, "pass", "unstable")], "alone: {}", alone["rerun"]);
    // Without the re-run: it gates at once.
    let (code, said, _) = r.run(&["--filter", second, "--no-rerun-unstable"])?;
    anyhow::ensure!(code == Some(1) && !said.contains("[RERUN]"), "--no-rerun-unstable: exit {code:?}: {said}");
    Ok(())
}
