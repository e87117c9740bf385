//! The results history's flags: the global `--history URL` (where runs are recorded and read
//! back) and the `history` verb's (`show`, the default; `flakes`; `import`).

use std::path::PathBuf;

use clap::{Args, Subcommand};

/// How many of a cell's latest outcomes the classes look at for flips, by default (`history`,
/// and `run`'s re-run of failures whose history flips).
pub const WINDOW: usize = 10;

/// Where the history is kept (`--history`): the default SQLite file beside the cache, another
/// SQLite file, a PostgreSQL database, or nowhere.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Location {
    /// `<cache>/history.sqlite`.
    #[default]
    Default,
    /// `off`: nothing is recorded (and `history` has nothing to read).
    Off,
    /// `sqlite:PATH`.
    Sqlite(PathBuf),
    /// `postgres://...` or `postgresql://...`, as the `postgres` crate parses it.
    Postgres(String),
}

impl Location {
    /// How `--history` spells it back (`XTASK_HISTORY` for child runs); `None` for the default.
    pub fn spelled(&self) -> Option<String> {
        match self {
            Location::Default => None,
            Location::Off => Some("off".into()),
            Location::Sqlite(p) => Some(format!("sqlite:{}", p.display())),
            Location::Postgres(url) => Some(url.clone()),
        }
    }
}

/// `--history`'s value: `off`, `sqlite:PATH`, `postgres://...` (or `postgresql://`), `default`.
pub fn parse_location(text: &str) -> Result<Location, String> {
    let t = text.trim();
    if t == "off" {
        return Ok(Location::Off);
    }
    if t == "default" || t.is_empty() {
        return Ok(Location::Default);
    }
    if let Some(path) = t.strip_prefix("sqlite:") {
        let path = path.strip_prefix("//").unwrap_or(path);
        if path.is_empty() {
            return Err("`sqlite:` needs a file: sqlite:PATH".into());
        }
        return Ok(Location::Sqlite(PathBuf::from(path)));
    }
    if t.starts_with("postgres://") || t.starts_with("postgresql://") {
        return Ok(Location::Postgres(t.to_string()));
    }
    Err(format!("`{text}` is not a history: write off, sqlite:PATH or postgres://USER@HOST/DB"))
}

#[derive(Debug, Clone, Args)]
pub struct HistoryArgs {
    #[command(subcommand)]
    pub command: Option<HistoryCmd>,
    #[command(flatten)]
    pub show: ShowArgs,
}

#[derive(Debug, Clone, Subcommand)]
pub enum HistoryCmd {
    /// The classes of the latest run's scenarios against the history (the default); exits 1
    /// on a regression.
    Show(ShowArgs),
    /// Scenarios whose outcome flipped between pass and fail, with the kernels and arches where
    /// it did, most flips first.
    Flakes(FlakesArgs),
    /// Record existing run folders (their run.json, else their logs judged again).
    Import(ImportArgs),
    /// A static HTML page of the history: per arch, scenario x kernel with the last outcomes,
    /// the class and the first bad run; the measured figures' trends, flagged beyond the noise.
    Dashboard(DashboardArgs),
    /// The recorded runs as one KCIDB v5.3 document (the ids each run's own kcidb.json has),
    /// each test with its class against the runs before it, its re-run and its kernel
    /// reports known or new.
    Kcidb(KcidbArgs),
}

#[derive(Debug, Clone, Default, Args)]
pub struct ShowArgs {
    /// The run to classify (its run id; default: the latest recorded).
    #[arg(long, value_name = "RUN_ID")]
    pub run: Option<String>,
    /// How many of a cell's latest outcomes are looked at for flips.
    #[arg(long, default_value_t = WINDOW)]
    pub window: usize,
    /// Print every class, stable ones too (default: only what changed or failed).
    #[arg(long, short)]
    pub verbose: bool,
    /// JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, Default, Args)]
pub struct FlakesArgs {
    /// Only scenarios matching GLOB (`*`, `?`).
    #[arg(long = "filter", value_name = "GLOB")]
    pub filter: Option<String>,
    /// JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, Args)]
pub struct DashboardArgs {
    /// The folder to write (its index.html; default: results/dashboard in the checkout).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// How many of a cell's latest outcomes the classes look at for flips.
    #[arg(long, default_value_t = WINDOW)]
    pub window: usize,
}

#[derive(Debug, Clone, Args)]
pub struct KcidbArgs {
    /// Only this run (its run id; repeat for more; default: every recorded run).
    #[arg(long = "run", value_name = "RUN_ID")]
    pub runs: Vec<String>,
    /// Write the document here (default: standard output).
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// The URL the run folders are published under: each test's `log_url` is
    /// `<URL>/<run id>/<arch>/console.log` (default: no log URLs).
    #[arg(long, value_name = "URL")]
    pub base: Option<String>,
    /// How many of a cell's latest outcomes the classes look at for flips.
    #[arg(long, default_value_t = WINDOW)]
    pub window: usize,
}

#[derive(Debug, Clone, Args)]
pub struct ImportArgs {
    /// Run folders (results/<run-id>).
    #[arg(value_name = "DIR", required = true)]
    pub dirs: Vec<PathBuf>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_parse() {
        assert_eq!(parse_location("off"), Ok(Location::Off));
        assert_eq!(parse_location("sqlite:/tmp/h.db"), Ok(Location::Sqlite("/tmp/h.db".into())));
        assert_eq!(parse_location("sqlite:///tmp/h.db"), Ok(Location::Sqlite("/tmp/h.db".into())));
        let pg = "postgres://me@%2Frun%2Fpg/history";
        assert_eq!(parse_location(pg), Ok(Location::Postgres(pg.into())));
        assert_eq!(parse_location("default"), Ok(Location::Default));
        assert!(parse_location("mysql://x").unwrap_err().contains("not a history"));
        assert!(parse_location("sqlite:").is_err());
        for l in [Location::Off, Location::Sqlite("a b".into()), Location::Postgres(pg.into())] {
            assert_eq!(parse_location(&l.spelled().unwrap()), Ok(l));
        }
    }
}
