//! The project's own verbs' flags: `setup`, `check-suites` and `test`.

use std::path::PathBuf;

use clap::Args;

#[derive(Debug, Clone, Args)]
pub struct SetupArgs {
    /// Only report what is missing (exit 129 when something is); change nothing.
    #[arg(long)]
    pub check: bool,
    /// x86_64, arm64, s390x, riscv64, all, or a comma-separated list (x86_64,s390x).
    #[arg(long, default_value = "all")]
    pub arch: String,
}

#[derive(Debug, Clone, Args)]
pub struct CheckSuitesArgs {
    /// Suite files (default: every suites/*.yaml in the checkout).
    #[arg(value_name = "FILES")]
    pub files: Vec<PathBuf>,
}

#[derive(Debug, Clone, Args)]
pub struct TestArgs {
    /// Run only the fast unit tests (what plain `cargo test` runs).
    #[arg(long)]
    pub unit_only: bool,
    /// Cache directory for sources, build trees and built kernels.
    #[arg(long, env = "XTASK_CACHE_DIR")]
    pub cache_dir: Option<PathBuf>,
}
