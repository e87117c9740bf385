//! `cargo xtask bench`: `suites` (the measuring suites' figures as a table) or `boot` (the
//! agent's empty-plan boot against a bare static C /init), `run::bench`.

use anyhow::Result;

impl crate::cli::BenchArgs {
    pub fn run(self) -> Result<u8> {
        match self.what.as_str() {
            "suites" => crate::run::bench::suites(&self),
            _ => crate::run::bench::boots(&self),
        }
    }
}
