//! `cargo xtask shell`: an interactive console in the guest, every client packed.

use anyhow::Result;

use crate::cli::ShellArgs;
use crate::run::pipeline::prepare;
use crate::setup::provision::{all_clients, Needs};

impl ShellArgs {
    pub fn run(self) -> Result<u8> {
        let kernel = self.kernel.single_arch("shell")?;
        let p = prepare(&Needs::boot(&kernel, &self.vm, false, &all_clients()), &kernel, &self.vm)?;
        crate::run::boot::shell(&p.built[0], &p.opts)
    }
}
