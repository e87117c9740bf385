//! The store's behaviour, checked alike on every backend: the unit tests run these on SQLite
//! files, the real checks (`xtask/tests/real/`) on a private PostgreSQL server. Each check has a
//! database of its own, which `connect` makes on its first call for a name and opens again on
//! later ones.

use anyhow::{ensure, Context, Result};

use super::classify::{classify, Class};
use super::findings::mark;
use super::rows::{FindingRow, KernelId, MetricRow, Recorded, ResultRow, RunRow};
use super::schema;
use super::store::{Db, Store, Value};
use crate::results::model::{Rechecked, Rerun};

/// Opens (making it on first use) the database of this name.
pub type Connect<'a> = &'a dyn Fn(&str) -> Result<Box<dyn Db>>;

type Check = fn(Connect) -> Result<()>;

/// Every check, in order; the first failure, named.
pub fn all(connect: Connect) -> Result<()> {
    let checks: [(&str, Check); 6] = [
        ("migrations", migrations),
        ("record", record_and_read_back),
        ("measurements", measurements_read_back),
        ("abandoned", abandoned_write_leaves_nothing),
        ("classes", classes_in_time_order),
        ("findings", findings_known_or_new),
    ];
    for (name, check) in checks {
        check(connect).with_context(|| format!("history store check `{name}`"))?;
    }
    Ok(())
}

/// A small run: `n` results of `status`, started at second `second`.
pub fn sample(run_id: &str, second: u32, statuses: &[(&str, &str)]) -> Recorded {
    let kernel = KernelId {
        release: "6.12.117".into(),
        source: "Debian linux-source-6.12".into(),
        source_id: "585a4a07".into(),
        patches: String::new(),
        config_hash: "210b2efd".into(),
        profile: "default".into(),
    };
    Recorded {
        run: RunRow {
            run_id: run_id.into(),
            host: "builder".into(),
            started_at: format!("2026-01-01T00:00:{second:02}Z"),
            project_commit: Some("0123456789abcdef0123456789abcdef01234567".into()),
            verdict: "pass".into(),
            origin: "run",
            folder: format!("results/{run_id}"),
            recorded_at: "2026-01-02T00:00:00Z".into(),
        },
        results: statuses
            .iter()
            .map(|(scenario, status)| ResultRow {
                scenario: (*scenario).into(),
                suite: scenario.split('/').next().unwrap_or_default().into(),
                arch: "x86_64".into(),
                kernel: kernel.clone(),
                build_key: Some("x86_64-5c1e0e5d".into()),
                status: (*status).into(),
                duration_ms: (*status != "skip").then_some(1200),
                reason: (*status == "skip").then(|| "requires CONFIG_X".to_string()),
                metrics: Vec::new(),
            })
            .collect(),
        findings: Vec::new(),
        rerun: None,
    }
}

fn migrations(connect: Connect) -> Result<()> {
    let mut s = Store::open(connect("migrations")?)?;
    ensure!(s.version()? == schema::current(), "a new database is at version {}", s.version()?);
    // Opened again: nothing to do, still the same version, one row per migration.
    let mut again = Store::open(connect("migrations")?)?;
    ensure!(again.version()? == schema::current(), "reopened at version {}", again.version()?);
    // A database halfway (version 1) is brought up to date in order.
    let mut half = Store { db: connect("halfway")? };
    ensure!(half.migrate_to(1)? == 1, "not at version 1");
    // A run as version 1 wrote it: its run, and a result without the later columns.
    let r0 = sample("r0", 0, &[("a/b", "pass")]);
    let run = &r0.run;
    half.db.exec(
        "INSERT INTO runs (run_id, host, started_at, project_commit, verdict, origin, folder, recorded_at) \
         VALUES ($1, $2, $3, NULL, $4, $5, $6, $7)",
        &[
            (&run.run_id).into(),
            (&run.host).into(),
            (&run.started_at).into(),
            (&run.verdict).into(),
            run.origin.into(),
            (&run.folder).into(),
            (&run.recorded_at).into(),
        ],
    )?;
    half.db.exec(
        "INSERT INTO results (run_id, host, scenario, suite, arch, kernel_release, kernel_source, source_id, patches, \
         config_hash, profile, status, recorded_at) VALUES ($1, $2, 'a/b', 'a', 'x86_64', '6.12', 's', 'i', '', 'c', \
         'default', 'pass', $3)",
        &[(&run.run_id).into(), (&run.host).into(), (&run.recorded_at).into()],
    )?;
    ensure!(half.migrate()? == schema::current(), "not migrated to the end");
    ensure!(half.count_results()? == 1, "a migration lost a row");
    let old = half.outcomes()?;
    ensure!(old.len() == 1 && old[0].build_key.is_none(), "the old row read back: {old:?}");
    // A database newer than this build is refused, not written.
    let mut db = connect("migrations")?;
    db.exec(
        "INSERT INTO schema_version (version, applied_at) VALUES ($1, $2)",
        &[Value::Int(i64::from(schema::current()) + 1), "2099-01-01T00:00:00Z".into()],
    )?;
    let newer = Store::open(db).err().map(|e| format!("{e:#}")).unwrap_or_default();
    ensure!(newer.contains("newer than this build"), "a newer database was opened: {newer:?}");
    Ok(())
}

fn record_and_read_back(connect: Connect) -> Result<()> {
    let mut s = Store::open(connect("record")?)?;
    let run = sample("20260101-000001-1", 1, &[("a/b", "pass"), ("a/c", "skip"), ("b/d", "fail")]);
    ensure!(s.record(&run)?, "the first write says it was already there");
    ensure!(!s.record(&run)?, "the second write of a run recorded it again");
    let runs = s.runs()?;
    ensure!(runs == [run.run.clone()], "runs read back: {runs:?}");
    let got = s.outcomes()?;
    ensure!(got.len() == 3, "{} outcomes", got.len());
    let skip = got.iter().find(|o| o.scenario == "a/c").context("a/c")?;
    ensure!(skip.duration_ms.is_none() && skip.reason.as_deref() == Some("requires CONFIG_X"), "{skip:?}");
    let fail = got.iter().find(|o| o.scenario == "b/d").context("b/d")?;
    ensure!(fail.duration_ms == Some(1200) && fail.kernel == run.results[0].kernel, "{fail:?}");
    let mut imported = sample("20260101-000002-1", 2, &[("a/b", "pass")]);
    imported.run.project_commit = None;
    imported.run.origin = "import";
    s.record(&imported)?;
    let back = s.runs()?;
    ensure!(back.last() == Some(&imported.run), "an import without a commit: {back:?}");
    // The crawl rule's durations: passing outcomes only, of one scenario on one arch.
    let passed = s.passing_durations("a/b", "x86_64")?;
    ensure!(passed == [1200, 1200], "a/b's passing durations: {passed:?}");
    ensure!(s.passing_durations("b/d", "x86_64")?.is_empty(), "a failure counted as a pass");
    ensure!(s.passing_durations("a/b", "arm64")?.is_empty(), "another arch's passes counted");
    ensure!(fail.build_key.as_deref() == Some("x86_64-5c1e0e5d"), "the build key read back: {fail:?}");
    // The gate's re-run of b/d, recorded after the run; a later re-run of it replaces it.
    let again = |status: &str, class: &str| Rerun {
        run_id: Some("20260101-000001-2".into()),
        scenarios: vec![Rechecked {
            arch: "x86_64".into(),
            scenario: "b/d".into(),
            flips: 2,
            runs: 3,
            rerun_status: status.into(),
            class: class.into(),
        }],
    };
    s.record_rerun(&run.run.run_id, &run.run.host, &again("pass", "unstable"))?;
    s.record_rerun(&run.run.run_id, &run.run.host, &again("fail", "regression"))?;
    let back = s.rechecks()?;
    ensure!(
        back.len() == 1
            && back[0].row == again("fail", "regression").scenarios[0]
            && back[0].rerun_run_id.as_deref() == Some("20260101-000001-2"),
        "the re-run read back: {back:?}"
    );
    Ok(())
}

fn measurements_read_back(connect: Connect) -> Result<()> {
    let mut s = Store::open(connect("measurements")?)?;
    let mut run = sample("m1", 1, &[("perf/write", "pass"), ("a/b", "pass")]);
    run.results[0].metrics = vec![MetricRow {
        name: "write_rate".into(),
        unit: "events/s".into(),
        higher_is_better: true,
        value: 1234.5,
        samples: vec![1200.25, 1234.5, 1300.0],
    }];
    s.record(&run)?;
    let got = s.measurements()?;
    ensure!(got.len() == 1, "{} measurements", got.len());
    let m = &got[0];
    ensure!(
        m.scenario == "perf/write" && m.name == "write_rate" && m.higher_is_better && m.release == "6.12.117",
        "{m:?}"
    );
    ensure!(m.value == 1234.5 && m.samples == [1200.25, 1234.5, 1300.0], "samples read back: {m:?}");
    Ok(())
}

fn abandoned_write_leaves_nothing(connect: Connect) -> Result<()> {
    let run = sample("r1", 1, &[("a/b", "pass"), ("a/c", "pass"), ("a/d", "pass"), ("a/e", "pass")]);
    drop(Store::open(connect("abandoned")?)?);
    // The connection goes away halfway through the run's results, as it does when the process
    // dies: the database rolls the transaction back.
    let mut dying = Store::open(Box::new(Dying { db: Some(connect("abandoned")?), writes_left: 3 }))?;
    let died = dying.record(&run).err().map(|e| format!("{e:#}")).unwrap_or_default();
    ensure!(died.contains("the connection died"), "the writer did not die: {died:?}");
    let mut s = Store::open(connect("abandoned")?)?;
    ensure!(s.runs()?.is_empty() && s.count_results()? == 0, "a half run was left: {:?}", s.runs()?);
    ensure!(s.record(&run)?, "the run could not be recorded after");
    ensure!(s.count_results()? == 4, "{} results", s.count_results()?);
    Ok(())
}

fn classes_in_time_order(connect: Connect) -> Result<()> {
    let mut s = Store::open(connect("classes")?)?;
    // Recorded out of order: the store orders them by when they started.
    s.record(&sample("r3", 3, &[("a/b", "fail"), ("a/c", "pass")]))?;
    s.record(&sample("r1", 1, &[("a/b", "pass"), ("a/c", "fail"), ("a/d", "pass")]))?;
    s.record(&sample("r2", 2, &[("a/b", "pass"), ("a/c", "fail"), ("a/d", "pass")]))?;
    let classed = classify(&s.outcomes()?, "r3", "builder", 10);
    let got: Vec<(&str, Class)> = classed.iter().map(|c| (c.scenario.as_str(), c.class)).collect();
    ensure!(got == [("a/b", Class::Regression), ("a/c", Class::Fixed), ("a/d", Class::Missing)], "classes: {got:?}");
    Ok(())
}

/// A run with kernel reports: `(scenario, fingerprint)`, empty scenario outside any.
fn with_findings(run_id: &str, second: u32, found: &[(&str, &str)]) -> Recorded {
    let mut run = sample(run_id, second, &[("a/b", "fail"), ("a/c", "pass")]);
    let kernel = run.results[0].kernel.clone();
    run.findings = found
        .iter()
        .map(|(scenario, print)| FindingRow {
            scenario: (*scenario).into(),
            arch: "x86_64".into(),
            kernel: kernel.clone(),
            kind: "kasan".into(),
            fingerprint: (*print).into(),
            signature: format!("kasan:{print}<g<h"),
            summary: "BUG: KASAN: slab-use-after-free in f+0x1c/0x40".into(),
        })
        .collect();
    run
}

fn findings_known_or_new(connect: Connect) -> Result<()> {
    let mut s = Store::open(connect("findings")?)?;
    let second = with_findings("f2", 2, &[("a/b", "aaa"), ("", "ccc"), ("a/b", "bbb")]);
    s.record(&second)?;
    s.record(&with_findings("f1", 1, &[("a/c", "aaa")]))?;
    s.record(&with_findings("f3", 3, &[("a/b", "bbb")]))?;
    let all = s.findings()?;
    ensure!(all.len() == 5, "{} findings read back", all.len());
    let back: Vec<&FindingRow> = all.iter().filter(|f| f.run_id == "f2").map(|f| &f.row).collect();
    ensure!(back == second.findings.iter().collect::<Vec<_>>(), "f2's findings in its order: {back:?}");
    let f2 = mark(&all, "f2", "builder");
    let marked: Vec<(&str, &str, Option<&str>)> =
        f2.iter().map(|m| (m.fingerprint.as_str(), m.mark, m.first_run.as_deref())).collect();
    ensure!(
        marked == [("aaa", "known", Some("f1")), ("ccc", "new", None), ("bbb", "new", None)],
        "f2 against the runs before it: {marked:?}"
    );
    let last = mark(&all, "f3", "builder");
    ensure!(last.len() == 1 && last[0].mark == "known" && last[0].first_run.as_deref() == Some("f2"), "{last:?}");
    Ok(())
}

/// A connection that closes itself (without a rollback) at its write after `writes_left`.
struct Dying {
    db: Option<Box<dyn Db>>,
    writes_left: usize,
}

impl Dying {
    fn db(&mut self) -> Result<&mut Box<dyn Db>> {
        self.db.as_mut().context("the connection is closed")
    }
}

impl Db for Dying {
    fn backend(&self) -> &'static str {
        self.db.as_ref().map_or("closed", |d| d.backend())
    }

    fn describe(&self) -> String {
        self.db.as_ref().map_or_else(|| "closed".into(), |d| d.describe())
    }

    fn batch(&mut self, sql: &str) -> Result<()> {
        self.db()?.batch(sql)
    }

    fn exec(&mut self, sql: &str, params: &[Value]) -> Result<u64> {
        if self.writes_left == 0 {
            self.db = None;
            anyhow::bail!("the connection died");
        }
        self.writes_left -= 1;
        self.db()?.exec(sql, params)
    }

    fn query(&mut self, sql: &str, params: &[Value]) -> Result<Vec<Vec<Value>>> {
        self.db()?.query(sql, params)
    }

    fn begin(&mut self) -> Result<()> {
        self.db()?.begin()
    }
}
