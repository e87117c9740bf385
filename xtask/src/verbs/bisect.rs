//! `cargo xtask bisect --kernel-src TREE --good REF --bad REF`: the commit that broke the
//! selected scenarios, `git bisect` in a private clone (`run::bisect`).

use anyhow::Result;

impl crate::cli::BisectArgs {
    pub fn run(self) -> Result<u8> {
        crate::run::bisect::bisect(&self)
    }
}
