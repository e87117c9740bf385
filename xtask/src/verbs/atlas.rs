//! `cargo xtask atlas`: the gating suites on Debian's default source, each `--kernel-version`
//! and each `--kernel`, one kernel after the other on the chosen arches, then the map of what
//! differs between them and why (`run::atlas`; the grid in `results::atlas`).

use anyhow::Result;

use crate::cli::matrix::kernel_choices;

impl crate::cli::AtlasArgs {
    pub fn run(self) -> Result<u8> {
        if !self.from.is_empty() {
            return crate::run::atlas::from_folders(&self);
        }
        let kernels = kernel_choices(&self.kernels, &self.kernel_versions)?;
        crate::run::atlas::run(&self, &kernels)
    }
}
