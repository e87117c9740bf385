//! `cargo xtask replay RUN`: a run's boots booted again exactly as they were recorded, judged
//! and reported as a new run (`run::replay`).

use anyhow::Result;

impl crate::cli::ReplayArgs {
    pub fn run(self) -> Result<u8> {
        let results = self.results.unwrap_or_else(crate::support::checkout::default_results);
        crate::run::replay::replay(&self.run, self.arch.as_deref(), self.boot.as_deref(), &results)
    }
}
