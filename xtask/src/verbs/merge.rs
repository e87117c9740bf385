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
        let run = crate::results::merge::merge(&self.dirs, &out)?;
        crate::history::record(&out, &run, crate::history::rows::Origin::Merge);
        Ok(run.verdict.exit_code())
    }
}
