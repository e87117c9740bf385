//! `cargo xtask mutants`: the mutants of a kernel C file (default
//! `kernel/trace/trace_events_user.c` of the default kernel source), selected by `--in-diff`
//! and `--shard`, listed as text or JSON; with `--coverage-map RUN` each one's covering
//! scenarios (or NoCoverage); `--run` builds and boots the planned ones; `--tce` compares
//! their objects; `--merge` folds shard folders' results into one state; `--report` writes what
//! is known into `mutants.json`. The campaign is
//! `mutating/`, the mutants themselves `mutants/`.

use anyhow::Result;

use crate::cli::MutantsArgs;

impl MutantsArgs {
    pub fn run(self) -> Result<u8> {
        crate::mutating::run(&self)
    }
}
