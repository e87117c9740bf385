//! `cargo xtask exec`: a static binary run in the guest; its exit status is the verb's.

use anyhow::Result;

use crate::cli::ExecArgs;
use crate::run::pipeline::prepare;
use crate::setup::provision::Needs;

impl ExecArgs {
    pub fn run(self) -> Result<u8> {
        let kernel = self.kernel.single_arch("exec")?;
        let p = prepare(&Needs::boot(&kernel, &self.vm, false, &[]), &kernel, &self.vm)?;
        crate::run::boot::exec(&p.built[0], &self.command, self.timeout, &p.opts)
    }
}
