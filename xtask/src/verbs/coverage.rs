//! `cargo xtask coverage`: the catalogue's behaviours against the suites' `covers:`, the
//! excuses and the last results; with `--unexecuted`, a coverage run's unexecuted lines against
//! the tracked list (`coverage::tracked`).

use anyhow::Result;

use crate::run::pipeline;

impl crate::cli::CoverageArgs {
    pub fn run(self) -> Result<u8> {
        let results = self.results.clone().unwrap_or_else(crate::support::checkout::default_results);
        if let Some(run) = &self.unexecuted {
            return crate::coverage::tracked::check(&results, run, self.list.as_deref(), self.partial);
        }
        let suites = pipeline::load_suites(&pipeline::suite_files()?)?;
        crate::coverage::catalogue::print_report(&suites, &results)
    }
}
