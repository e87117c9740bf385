//! The history's tables as ordered migrations, one SQL text each, the same on SQLite and
//! PostgreSQL; the database keeps the last one applied in `schema_version`.
//!
//! A migration is never edited once released: a change is a new one at the end of the list.

/// The table that says how far the migrations went (one row per migration applied).
pub const VERSION_TABLE: &str = "CREATE TABLE IF NOT EXISTS schema_version (
    version BIGINT NOT NULL PRIMARY KEY,
    applied_at TEXT NOT NULL
)";

/// The migrations in order: migration N (1-based) takes the database from version N-1 to N.
pub const MIGRATIONS: &[&str] = &[
    // 1: the runs and their results.
    "CREATE TABLE runs (
        run_id TEXT NOT NULL,
        host TEXT NOT NULL,
        started_at TEXT NOT NULL,
        project_commit TEXT,
        verdict TEXT NOT NULL,
        origin TEXT NOT NULL,
        folder TEXT NOT NULL,
        recorded_at TEXT NOT NULL,
        PRIMARY KEY (run_id, host)
    );
    CREATE TABLE results (
        run_id TEXT NOT NULL,
        host TEXT NOT NULL,
        scenario TEXT NOT NULL,
        suite TEXT NOT NULL,
        arch TEXT NOT NULL,
        kernel_release TEXT NOT NULL,
        kernel_source TEXT NOT NULL,
        source_id TEXT NOT NULL,
        patches TEXT NOT NULL,
        config_hash TEXT NOT NULL,
        profile TEXT NOT NULL,
        status TEXT NOT NULL,
        duration_ms BIGINT,
        reason TEXT,
        project_commit TEXT,
        recorded_at TEXT NOT NULL,
        PRIMARY KEY (run_id, host, arch, scenario),
        FOREIGN KEY (run_id, host) REFERENCES runs (run_id, host)
    )",
    // 2: what the classes and the flakes read: a cell's outcomes, runs in time order.
    "CREATE INDEX results_by_cell ON results (scenario, arch, kernel_release, source_id, config_hash);
    CREATE INDEX runs_by_time ON runs (started_at, run_id)",
    // 3: the measured figures of a result, with their samples (space-separated numbers).
    "CREATE TABLE measurements (
        run_id TEXT NOT NULL,
        host TEXT NOT NULL,
        arch TEXT NOT NULL,
        scenario TEXT NOT NULL,
        name TEXT NOT NULL,
        unit TEXT NOT NULL,
        higher_is_better BIGINT NOT NULL,
        value TEXT NOT NULL,
        samples TEXT NOT NULL,
        PRIMARY KEY (run_id, host, arch, scenario, name),
        FOREIGN KEY (run_id, host, arch, scenario) REFERENCES results (run_id, host, arch, scenario)
    )",
    // 4: the kernel reports of a run, keyed as its outcomes are, with their fingerprints (the
    // scenario is empty for a report outside any scenario; `seq` orders a run's reports).
    "CREATE TABLE findings (
        run_id TEXT NOT NULL,
        host TEXT NOT NULL,
        seq BIGINT NOT NULL,
        scenario TEXT NOT NULL,
        arch TEXT NOT NULL,
        kernel_release TEXT NOT NULL,
        kernel_source TEXT NOT NULL,
        source_id TEXT NOT NULL,
        patches TEXT NOT NULL,
        config_hash TEXT NOT NULL,
        profile TEXT NOT NULL,
        kind TEXT NOT NULL,
        fingerprint TEXT NOT NULL,
        signature TEXT NOT NULL,
        summary TEXT NOT NULL,
        PRIMARY KEY (run_id, host, seq),
        FOREIGN KEY (run_id, host) REFERENCES runs (run_id, host)
    );
    CREATE INDEX findings_by_fingerprint ON findings (fingerprint)",
    // 5: a result's build (the cache's build key, so KCIDB out of the history names the build
    // as the run's own KCIDB did; NULL for a run without kernel metadata, or recorded before),
    // and what the gate's re-run in a fresh boot made of a run's failures (`run`'s recheck).
    "ALTER TABLE results ADD COLUMN build_key TEXT;
    CREATE TABLE rechecks (
        run_id TEXT NOT NULL,
        host TEXT NOT NULL,
        arch TEXT NOT NULL,
        scenario TEXT NOT NULL,
        rerun_run_id TEXT,
        rerun_status TEXT NOT NULL,
        class TEXT NOT NULL,
        flips BIGINT NOT NULL,
        runs BIGINT NOT NULL,
        PRIMARY KEY (run_id, host, arch, scenario),
        FOREIGN KEY (run_id, host, arch, scenario) REFERENCES results (run_id, host, arch, scenario)
    )",
];

/// The version this build writes and reads.
pub fn current() -> u32 {
    u32::try_from(MIGRATIONS.len()).expect("a few migrations")
}
