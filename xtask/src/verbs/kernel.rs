//! `cargo xtask kernel`: configure and build (or fetch from the cache) each arch's kernel and
//! print its image (or `.config` with `--config-only`, metadata with `--json`).

use anyhow::Result;

use crate::cli::KernelArgs;
use crate::setup::provision::{ensure, Needs};

impl KernelArgs {
    pub fn run(self) -> Result<u8> {
        ensure(&Needs::kernel(&self))?;
        for b in &crate::kernel::build_all(&self.request()?)? {
            if self.json {
                println!("{}", serde_json::to_string(&b.metadata)?);
            } else if self.config_only {
                println!("{} {}", b.arch.name, b.config.display());
            } else {
                println!("{} {}", b.arch.name, b.image.display());
            }
        }
        Ok(0)
    }
}
