//! `cargo xtask validate`: the baseline and the patched kernel run on every arch asked for, then
//! compared (`run::validate`).

use anyhow::Result;

impl crate::cli::ValidateArgs {
    pub fn run(self) -> Result<u8> {
        crate::run::validate::validate(&self)
    }
}
