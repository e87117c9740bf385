//! `cargo xtask matrix`: the GitHub Actions matrix (kernels x arches x profiles) as JSON
//! (`cli::matrix`), or with `--mutants-shards N` a mutation campaign's shard jobs.

use anyhow::Result;

impl crate::cli::MatrixArgs {
    pub fn run(self) -> Result<u8> {
        if let Some(n) = self.mutants_shards {
            println!("{}", crate::cli::matrix::mutants_shards(n));
            return Ok(0);
        }
        let root = crate::support::checkout::project_root();
        println!(
            "{}",
            crate::cli::matrix::matrix(&self.kernels, &self.kernel_versions, &self.arch, &self.profiles, &root)?
        );
        Ok(0)
    }
}
