//! `cargo xtask test`: the project's own checks, provisioning first, then the unit tests and
//! the real checks (`setup::checks`).

use anyhow::Result;

impl crate::cli::TestArgs {
    pub fn run(self) -> Result<u8> {
        crate::setup::checks::run(&self)
    }
}
