//! `cargo xtask matrix`: the GitHub Actions matrix (kernels x arches x profiles) as JSON
//! (`cli::matrix`).

use anyhow::Result;

impl crate::cli::MatrixArgs {
    pub fn run(self) -> Result<u8> {
        let root = crate::support::checkout::project_root();
        println!(
            "{}",
            crate::cli::matrix::matrix(&self.kernels, &self.kernel_versions, &self.arch, &self.profiles, &root)?
        );
        Ok(0)
    }
}
