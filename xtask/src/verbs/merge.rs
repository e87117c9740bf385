//! `cargo xtask merge`: per-job run folders (one matrix cell each) folded into one run folder
//! and its reports.

use anyhow::Result;

use crate::cli::MergeArgs;

impl MergeArgs {
    pub fn run(self) -> Result<u8> {
        let out = match self.out {
            Some(out) => out,
            None => crate::judging::run_folder::new_run_dir(&crate::support::checkout::default_results())?,
        };
        Ok(crate::results::merge::merge(&self.dirs, &out)?.verdict.exit_code())
    }
}
