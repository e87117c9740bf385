//! `cargo xtask compare BASE CURRENT`: two runs classified per arch and scenario, metrics
//! against their own noise; exits 1 on a regression.

use anyhow::Result;

use crate::cli::CompareArgs;

impl CompareArgs {
    pub fn run(self) -> Result<u8> {
        let r = &self.report;
        crate::results::compare::run(&self.base, &self.current, r.out.as_deref(), r.fail_on_metrics, r.verbose)
    }
}
