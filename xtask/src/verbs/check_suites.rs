//! `cargo xtask check-suites`: suite files validated without booting (default: every
//! `suites/*.yaml`), each error with its file, line and column.

use anyhow::Result;

use crate::cli::CheckSuitesArgs;
use crate::run::pipeline;

impl CheckSuitesArgs {
    pub fn run(self) -> Result<u8> {
        let files = if self.files.is_empty() { pipeline::suite_files()? } else { self.files };
        Ok(pipeline::check_suites(&files))
    }
}
