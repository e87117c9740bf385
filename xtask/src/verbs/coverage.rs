//! `cargo xtask coverage`: the catalogue's behaviours against the suites' `covers:`, the
//! excuses and the last results.

use anyhow::Result;

use crate::flags::CoverageArgs;
use crate::run::pipeline;

impl CoverageArgs {
    pub fn run(self) -> Result<u8> {
        let suites = pipeline::load_suites(&pipeline::suite_files()?)?;
        let results = self.results.unwrap_or_else(crate::support::checkout::default_results);
        crate::coverage::catalogue::print_report(&suites, &results)
    }
}
