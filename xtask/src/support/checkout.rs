//! The checkout this xtask was built from: its root, where `suites/`, `kernel-configs/`,
//! `initramfs/` and the default `results/` live. A leaf.

use std::path::{Path, PathBuf};

/// The root of the checkout (the workspace holding `xtask/`).
pub fn project_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("xtask lives in the workspace").to_path_buf()
}

/// Where run folders go unless `--results` says otherwise: `results/` in the checkout.
pub fn default_results() -> PathBuf {
    project_root().join("results")
}
