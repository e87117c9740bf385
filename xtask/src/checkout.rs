//! The checkout this xtask was built from: its root, where `suites/`, `kernel-configs/`,
//! `initramfs/` and the default `results/` live. A leaf.

use std::path::{Path, PathBuf};

/// The root of the checkout (the workspace holding `xtask/`).
pub fn project_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("xtask lives in the workspace").to_path_buf()
}
