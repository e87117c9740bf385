//! `cargo xtask report --from DIR`: a run folder's reports rendered again from its saved logs,
//! without booting; the exit code is the run's.

use anyhow::Result;

use crate::cli::ReportArgs;
use crate::results;

impl ReportArgs {
    pub fn run(self) -> Result<u8> {
        let run = results::collect::load(&self.from, jiff::Timestamp::now())?;
        Ok(results::publish(&self.from, run, None)?.verdict.exit_code())
    }
}
