//! The history store over any SQL database: the one trait a backend implements (`Db`: a few
//! statements, parameters `$1`, `$2`... in order, plain values) and what is done with it, the
//! same SQL on both backends: the migrations, a run written in one transaction, the outcomes
//! read back in time order.

use anyhow::{bail, Context, Result};

use super::rows::{stamp, FindingRow, KernelId, Recorded, ResultRow, RunRow};
use super::schema::{self, MIGRATIONS, VERSION_TABLE};
use crate::results::model::{Rechecked, Rerun};

/// A value bound to a parameter or read from a column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    Null,
    Int(i64),
    Text(String),
}

impl Value {
    fn text(&self) -> String {
        match self {
            Value::Text(s) => s.clone(),
            Value::Int(n) => n.to_string(),
            Value::Null => String::new(),
        }
    }

    fn opt_text(&self) -> Option<String> {
        (*self != Value::Null).then(|| self.text())
    }

    fn int(&self) -> Option<i64> {
        match self {
            Value::Int(n) => Some(*n),
            Value::Text(s) => s.parse().ok(),
            Value::Null => None,
        }
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Value {
        Value::Text(s.to_string())
    }
}

impl From<&String> for Value {
    fn from(s: &String) -> Value {
        Value::Text(s.clone())
    }
}

impl From<Option<&String>> for Value {
    fn from(s: Option<&String>) -> Value {
        s.map_or(Value::Null, |s| Value::Text(s.clone()))
    }
}

impl From<Option<i64>> for Value {
    fn from(n: Option<i64>) -> Value {
        n.map_or(Value::Null, Value::Int)
    }
}

/// What a backend does: statements run as given, `$N` parameters bound in order.
pub trait Db {
    /// `sqlite` or `postgres`.
    fn backend(&self) -> &'static str;
    /// Where it is, for messages (a file, a server without the password).
    fn describe(&self) -> String;
    /// Statements without parameters, `;`-separated.
    fn batch(&mut self, sql: &str) -> Result<()>;
    fn exec(&mut self, sql: &str, params: &[Value]) -> Result<u64>;
    fn query(&mut self, sql: &str, params: &[Value]) -> Result<Vec<Vec<Value>>>;
    /// Starts a transaction that will write (SQLite takes the write lock now, so two writers
    /// wait for each other instead of failing at their first write).
    fn begin(&mut self) -> Result<()>;
}

/// One recorded outcome, with its run's time, as the classifier reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub run_id: String,
    pub host: String,
    pub started_at: String,
    pub scenario: String,
    pub arch: String,
    pub kernel: KernelId,
    /// The cache's key of its kernel's build (`None` when not recorded).
    pub build_key: Option<String>,
    pub status: String,
    pub duration_ms: Option<i64>,
    pub reason: Option<String>,
}

/// One recorded measured figure, with its run's time, as the dashboard reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct Measured {
    pub run_id: String,
    pub host: String,
    pub started_at: String,
    pub arch: String,
    pub scenario: String,
    pub release: String,
    pub profile: String,
    pub name: String,
    pub unit: String,
    pub higher_is_better: bool,
    pub value: f64,
    pub samples: Vec<f64>,
}

/// One recorded kernel report, with its run's time, as `history show` reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub run_id: String,
    pub host: String,
    pub started_at: String,
    pub row: FindingRow,
}

/// What the gate's re-run in a fresh boot made of one failure of a recorded run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recheck {
    pub run_id: String,
    pub host: String,
    /// The re-run's own run id (`None` when its boots left no run).
    pub rerun_run_id: Option<String>,
    pub row: Rechecked,
}

/// The history on one database.
pub struct Store {
    pub(super) db: Box<dyn Db>,
}

/// A point inside [`Store::record_with`]'s transaction, for the crash test.
pub type Pause<'a> = &'a dyn Fn();

impl Store {
    /// The store on `db`, its tables brought to this build's version.
    pub fn open(db: Box<dyn Db>) -> Result<Store> {
        let mut s = Store { db };
        s.migrate()?;
        Ok(s)
    }

    pub fn backend(&self) -> &'static str {
        self.db.backend()
    }

    pub fn describe(&self) -> String {
        format!("{} {}", self.db.backend(), self.db.describe())
    }

    /// The last migration applied (0 for a new database).
    pub fn version(&mut self) -> Result<u32> {
        self.db.batch(VERSION_TABLE)?;
        let rows = self.db.query("SELECT MAX(version) FROM schema_version", &[])?;
        let v = rows.first().and_then(|r| r.first()).and_then(Value::int).unwrap_or(0);
        u32::try_from(v).context("schema_version")
    }

    /// Applies the migrations the database lacks, each in its own transaction with its version
    /// row; refuses a database newer than this build.
    pub fn migrate(&mut self) -> Result<u32> {
        self.migrate_to(schema::current())
    }

    /// [`Store::migrate`] up to `target` (the tests stop halfway).
    pub fn migrate_to(&mut self, target: u32) -> Result<u32> {
        let mut at = self.version()?;
        if at > schema::current() {
            bail!(
                "{}: schema version {at}, newer than this build's {}: record with a newer build",
                self.describe(),
                schema::current()
            );
        }
        while at < target {
            let next = at + 1;
            self.transaction(|db| {
                // Another process may have migrated meanwhile: the version is read again
                // under the write lock.
                let rows =
                    db.query("SELECT COUNT(*) FROM schema_version WHERE version = $1", &[Value::Int(next.into())])?;
                if rows.first().and_then(|r| r.first()).and_then(Value::int).unwrap_or(0) == 0 {
                    db.batch(MIGRATIONS[next as usize - 1])
                        .with_context(|| format!("migration {next} of the history"))?;
                    let now = stamp(jiff::Timestamp::now());
                    db.exec(
                        "INSERT INTO schema_version (version, applied_at) VALUES ($1, $2)",
                        &[Value::Int(next.into()), now.as_str().into()],
                    )?;
                }
                Ok(())
            })?;
            at = next;
        }
        Ok(at)
    }

    /// Runs `body` in a transaction: committed when it returns `Ok`, rolled back otherwise.
    fn transaction(&mut self, body: impl FnOnce(&mut dyn Db) -> Result<()>) -> Result<()> {
        self.db.begin()?;
        match body(self.db.as_mut()) {
            Ok(()) => self.db.batch("COMMIT"),
            Err(e) => {
                let _ = self.db.batch("ROLLBACK");
                Err(e)
            }
        }
    }

    /// Records a run and its results in one transaction; `false` when the run (its id and
    /// host) is already there, which is left as it was.
    pub fn record(&mut self, r: &Recorded) -> Result<bool> {
        self.record_with(r, &|| {})
    }

    /// [`Store::record`], calling `pause` halfway through the results (the crash test kills
    /// the process there).
    pub fn record_with(&mut self, r: &Recorded, pause: Pause) -> Result<bool> {
        let mut fresh = false;
        self.transaction(|db| {
            let key = [Value::from(&r.run.run_id), Value::from(&r.run.host)];
            if !db.query("SELECT run_id FROM runs WHERE run_id = $1 AND host = $2", &key)?.is_empty() {
                return Ok(());
            }
            fresh = true;
            insert_run(db, &r.run)?;
            for (n, x) in r.results.iter().enumerate() {
                if n == r.results.len() / 2 {
                    pause();
                }
                let [release, source, source_id, patches, config_hash, profile] = kernel_values(&x.kernel);
                db.exec(
                    "INSERT INTO results (run_id, host, scenario, suite, arch, kernel_release, kernel_source, \
                     source_id, patches, config_hash, profile, status, duration_ms, reason, project_commit, \
                     recorded_at, build_key) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)",
                    &[
                        (&r.run.run_id).into(),
                        (&r.run.host).into(),
                        (&x.scenario).into(),
                        (&x.suite).into(),
                        (&x.arch).into(),
                        release,
                        source,
                        source_id,
                        patches,
                        config_hash,
                        profile,
                        (&x.status).into(),
                        x.duration_ms.into(),
                        x.reason.as_ref().into(),
                        r.run.project_commit.as_ref().into(),
                        (&r.run.recorded_at).into(),
                        x.build_key.as_ref().into(),
                    ],
                )
                .with_context(|| format!("{} {} of run {}", x.arch, x.scenario, r.run.run_id))?;
                insert_metrics(db, &r.run, x)?;
            }
            insert_findings(db, r)?;
            if let Some(rerun) = &r.rerun {
                insert_rechecks(db, &r.run.run_id, &r.run.host, rerun)?;
            }
            Ok(())
        })?;
        Ok(fresh)
    }

    /// Every run, oldest first.
    pub fn runs(&mut self) -> Result<Vec<RunRow>> {
        let rows = self.db.query(
            "SELECT run_id, host, started_at, project_commit, verdict, origin, folder, recorded_at FROM runs \
             ORDER BY started_at, run_id, host",
            &[],
        )?;
        Ok(rows
            .iter()
            .map(|r| RunRow {
                run_id: r[0].text(),
                host: r[1].text(),
                started_at: r[2].text(),
                project_commit: r[3].opt_text(),
                verdict: r[4].text(),
                origin: origin(&r[5].text()),
                folder: r[6].text(),
                recorded_at: r[7].text(),
            })
            .collect())
    }

    /// Every recorded outcome, its runs in time order.
    pub fn outcomes(&mut self) -> Result<Vec<Outcome>> {
        let rows = self.db.query(
            "SELECT r.run_id, r.host, u.started_at, r.scenario, r.arch, r.kernel_release, r.kernel_source, \
             r.source_id, r.patches, r.config_hash, r.profile, r.status, r.duration_ms, r.reason, r.build_key \
             FROM results r JOIN runs u ON u.run_id = r.run_id AND u.host = r.host \
             ORDER BY u.started_at, u.run_id, u.host, r.arch, r.scenario",
            &[],
        )?;
        Ok(rows
            .iter()
            .map(|r| Outcome {
                run_id: r[0].text(),
                host: r[1].text(),
                started_at: r[2].text(),
                scenario: r[3].text(),
                arch: r[4].text(),
                kernel: kernel_at(r, 5),
                status: r[11].text(),
                duration_ms: r[12].int(),
                reason: r[13].opt_text(),
                build_key: r[14].opt_text(),
            })
            .collect())
    }

    /// Every measured figure, its runs in time order.
    pub fn measurements(&mut self) -> Result<Vec<Measured>> {
        let rows = self.db.query(
            "SELECT m.run_id, m.host, u.started_at, m.arch, m.scenario, r.kernel_release, r.profile, m.name, \
             m.unit, m.higher_is_better, m.value, m.samples \
             FROM measurements m JOIN results r ON r.run_id = m.run_id AND r.host = m.host AND r.arch = m.arch \
             AND r.scenario = m.scenario JOIN runs u ON u.run_id = m.run_id AND u.host = m.host \
             ORDER BY u.started_at, u.run_id, u.host, m.arch, m.scenario, m.name",
            &[],
        )?;
        Ok(rows
            .iter()
            .map(|r| Measured {
                run_id: r[0].text(),
                host: r[1].text(),
                started_at: r[2].text(),
                arch: r[3].text(),
                scenario: r[4].text(),
                release: r[5].text(),
                profile: r[6].text(),
                name: r[7].text(),
                unit: r[8].text(),
                higher_is_better: r[9].int() == Some(1),
                value: r[10].text().parse().unwrap_or(f64::NAN),
                samples: r[11].text().split_whitespace().filter_map(|v| v.parse().ok()).collect(),
            })
            .collect())
    }

    /// The durations of `scenario`'s passing outcomes on `arch`, in no order.
    pub fn passing_durations(&mut self, scenario: &str, arch: &str) -> Result<Vec<u64>> {
        let rows = self.db.query(
            "SELECT duration_ms FROM results WHERE scenario = $1 AND arch = $2 AND status = 'pass' \
             AND duration_ms IS NOT NULL",
            &[Value::Text(scenario.into()), Value::Text(arch.into())],
        )?;
        Ok(rows.iter().filter_map(|r| r.first().and_then(Value::int)).filter_map(|d| u64::try_from(d).ok()).collect())
    }

    /// Every recorded kernel report, its runs in time order.
    pub fn findings(&mut self) -> Result<Vec<Found>> {
        let rows = self.db.query(
            "SELECT f.run_id, f.host, u.started_at, f.scenario, f.arch, f.kernel_release, f.kernel_source, \
             f.source_id, f.patches, f.config_hash, f.profile, f.kind, f.fingerprint, f.signature, f.summary \
             FROM findings f JOIN runs u ON u.run_id = f.run_id AND u.host = f.host \
             ORDER BY u.started_at, u.run_id, u.host, f.seq",
            &[],
        )?;
        Ok(rows
            .iter()
            .map(|r| Found {
                run_id: r[0].text(),
                host: r[1].text(),
                started_at: r[2].text(),
                row: FindingRow {
                    scenario: r[3].text(),
                    arch: r[4].text(),
                    kernel: kernel_at(r, 5),
                    kind: r[11].text(),
                    fingerprint: r[12].text(),
                    signature: r[13].text(),
                    summary: r[14].text(),
                },
            })
            .collect())
    }

    /// Records what the re-run of recorded run (`run_id`, `host`) made of its failures, in
    /// place of what an earlier re-run of it said.
    pub fn record_rerun(&mut self, run_id: &str, host: &str, rerun: &Rerun) -> Result<()> {
        self.transaction(|db| {
            let key = [Value::from(run_id), Value::from(host)];
            db.exec("DELETE FROM rechecks WHERE run_id = $1 AND host = $2", &key)?;
            insert_rechecks(db, run_id, host, rerun)
        })
    }

    /// Every recorded re-run of a failure, its runs in time order.
    pub fn rechecks(&mut self) -> Result<Vec<Recheck>> {
        let rows = self.db.query(
            "SELECT c.run_id, c.host, c.rerun_run_id, c.arch, c.scenario, c.flips, c.runs, c.rerun_status, c.class \
             FROM rechecks c JOIN runs u ON u.run_id = c.run_id AND u.host = c.host \
             ORDER BY u.started_at, u.run_id, u.host, c.arch, c.scenario",
            &[],
        )?;
        let count = |v: &Value| v.int().and_then(|n| usize::try_from(n).ok()).unwrap_or(0);
        Ok(rows
            .iter()
            .map(|r| Recheck {
                run_id: r[0].text(),
                host: r[1].text(),
                rerun_run_id: r[2].opt_text(),
                row: Rechecked {
                    arch: r[3].text(),
                    scenario: r[4].text(),
                    flips: count(&r[5]),
                    runs: count(&r[6]),
                    rerun_status: r[7].text(),
                    class: r[8].text(),
                },
            })
            .collect())
    }

    /// How many results rows there are (the crash test's check).
    pub fn count_results(&mut self) -> Result<i64> {
        let rows = self.db.query("SELECT COUNT(*) FROM results", &[])?;
        Ok(rows.first().and_then(|r| r.first()).and_then(Value::int).unwrap_or(0))
    }
}

/// A run's kernel reports, numbered in its order.
/// A kernel's identity as the `kernel_release` ... `profile` columns of `results` and
/// `findings` hold it, in that order.
fn kernel_values(k: &KernelId) -> [Value; 6] {
    [
        (&k.release).into(),
        (&k.source).into(),
        (&k.source_id).into(),
        (&k.patches).into(),
        (&k.config_hash).into(),
        (&k.profile).into(),
    ]
}

/// The kernel identity read back from a row's six columns from `at` on, as [`kernel_values`]
/// writes them.
fn kernel_at(r: &[Value], at: usize) -> KernelId {
    KernelId {
        release: r[at].text(),
        source: r[at + 1].text(),
        source_id: r[at + 2].text(),
        patches: r[at + 3].text(),
        config_hash: r[at + 4].text(),
        profile: r[at + 5].text(),
    }
}

fn insert_findings(db: &mut dyn Db, r: &Recorded) -> Result<()> {
    for (seq, f) in r.findings.iter().enumerate() {
        let [release, source, source_id, patches, config_hash, profile] = kernel_values(&f.kernel);
        db.exec(
            "INSERT INTO findings (run_id, host, seq, scenario, arch, kernel_release, kernel_source, source_id, \
             patches, config_hash, profile, kind, fingerprint, signature, summary) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)",
            &[
                (&r.run.run_id).into(),
                (&r.run.host).into(),
                Value::Int(i64::try_from(seq).unwrap_or(i64::MAX)),
                (&f.scenario).into(),
                (&f.arch).into(),
                release,
                source,
                source_id,
                patches,
                config_hash,
                profile,
                (&f.kind).into(),
                (&f.fingerprint).into(),
                (&f.signature).into(),
                (&f.summary).into(),
            ],
        )
        .with_context(|| format!("{} {} finding {seq} of run {}", f.arch, f.scenario, r.run.run_id))?;
    }
    Ok(())
}

/// A run's re-run of failures, a row per failure run again.
fn insert_rechecks(db: &mut dyn Db, run_id: &str, host: &str, rerun: &Rerun) -> Result<()> {
    let n = |v: usize| Value::Int(i64::try_from(v).unwrap_or(i64::MAX));
    for c in &rerun.scenarios {
        db.exec(
            "INSERT INTO rechecks (run_id, host, arch, scenario, rerun_run_id, rerun_status, class, flips, runs) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
            &[
                run_id.into(),
                host.into(),
                (&c.arch).into(),
                (&c.scenario).into(),
                rerun.run_id.as_ref().into(),
                (&c.rerun_status).into(),
                (&c.class).into(),
                n(c.flips),
                n(c.runs),
            ],
        )
        .with_context(|| format!("the re-run of {} {} of run {run_id}", c.arch, c.scenario))?;
    }
    Ok(())
}

/// The measured figures of one result, samples as space-separated numbers.
fn insert_metrics(db: &mut dyn Db, run: &RunRow, x: &ResultRow) -> Result<()> {
    for m in &x.metrics {
        let samples: Vec<String> = m.samples.iter().map(f64::to_string).collect();
        db.exec(
            "INSERT INTO measurements (run_id, host, arch, scenario, name, unit, higher_is_better, value, samples) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
            &[
                (&run.run_id).into(),
                (&run.host).into(),
                (&x.arch).into(),
                (&x.scenario).into(),
                (&m.name).into(),
                (&m.unit).into(),
                Value::Int(m.higher_is_better.into()),
                m.value.to_string().as_str().into(),
                samples.join(" ").as_str().into(),
            ],
        )
        .with_context(|| format!("{} {} {} of run {}", x.arch, x.scenario, m.name, run.run_id))?;
    }
    Ok(())
}

fn insert_run(db: &mut dyn Db, r: &RunRow) -> Result<()> {
    db.exec(
        "INSERT INTO runs (run_id, host, started_at, project_commit, verdict, origin, folder, recorded_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        &[
            (&r.run_id).into(),
            (&r.host).into(),
            (&r.started_at).into(),
            r.project_commit.as_ref().into(),
            (&r.verdict).into(),
            r.origin.into(),
            (&r.folder).into(),
            (&r.recorded_at).into(),
        ],
    )
    .with_context(|| format!("run {}", r.run_id))?;
    Ok(())
}

/// The `&'static str` of an origin read back.
fn origin(text: &str) -> &'static str {
    match text {
        "import" => "import",
        "merge" => "merge",
        _ => "run",
    }
}
