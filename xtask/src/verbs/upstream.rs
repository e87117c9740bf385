//! `cargo xtask upstream`: the kernel's own user_events selftests (`upstream/`), built from the
//! same tree as the kernel and run one binary per fresh boot, reported per test case beside our
//! results. Not gating: only an infrastructure failure changes the exit code.

use anyhow::Result;

use crate::setup::provision::Needs;

impl crate::cli::UpstreamArgs {
    /// `cargo xtask upstream`: the selftests on each kernel, into a new run folder.
    pub fn run(self) -> Result<u8> {
        let p = crate::run::pipeline::prepare(&Needs::upstream(&self), &self.kernel, &self.vm)?;
        let run_dir = crate::judging::run_folder::new_run_dir(&p.opts.results)?;
        crate::upstream::run(&p.built, &p.opts, &run_dir)
    }
}
