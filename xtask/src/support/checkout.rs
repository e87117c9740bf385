//! The checkout this xtask was built from: its root, where `suites/`, `kernel-configs/`,
//! `initramfs/` and the default `results/` live. A leaf.
//!
//! `cargo xtask` runs inside the checkout; an installed binary (`cargo install --path xtask
//! --locked --bin ue-conformance`) runs anywhere and finds the checkout it was built from, its
//! path recorded at build time, or `$UE_CONFORMANCE_HOME` when that is set (a moved checkout).
//! Paths the user passes (`--patch`, `--suite`, `--results`, ...) stay relative to the working
//! folder: nothing here changes it.

use std::path::{Path, PathBuf};

/// The environment variable that names the project's folder, overriding the recorded one.
pub const HOME_VAR: &str = "UE_CONFORMANCE_HOME";

/// What the project's folder must hold for the verbs to work.
const MUST_HOLD: &[&str] = &["suites", "kernel-configs", "initramfs", "patches"];

/// The root of the checkout (the workspace holding `xtask/`): `$UE_CONFORMANCE_HOME`, else the
/// folder this binary was built from.
pub fn project_root() -> PathBuf {
    match std::env::var_os(HOME_VAR).filter(|v| !v.is_empty()) {
        Some(home) => PathBuf::from(home),
        None => built_from(),
    }
}

/// The checkout recorded at build time.
fn built_from() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("xtask lives in the workspace").to_path_buf()
}

/// Whether the project's folder holds its data; the message says which folder, what it lacks
/// and how to point at another one.
pub fn check_root() -> Result<(), String> {
    check(&project_root(), std::env::var_os(HOME_VAR).is_some_and(|v| !v.is_empty()))
}

fn check(root: &Path, from_env: bool) -> Result<(), String> {
    let lacking: Vec<&str> = MUST_HOLD.iter().copied().filter(|d| !root.join(d).is_dir()).collect();
    if lacking.is_empty() {
        return Ok(());
    }
    let whence = if from_env {
        format!("${HOME_VAR}")
    } else {
        format!("the checkout this binary was built from (set ${HOME_VAR} to where it is now)")
    };
    let what = if root.is_dir() { format!("lacks {}", lacking.join(", ")) } else { "is gone".to_string() };
    Err(format!(
        "the project folder {} ({whence}) {what}: the suites, kernel configs and guest agent sources live \
         there; reinstall with `cargo install --path xtask --locked --bin ue-conformance` from a checkout",
        root.display()
    ))
}

/// Where run folders go unless `--results` says otherwise: `results/` in the checkout.
pub fn default_results() -> PathBuf {
    project_root().join("results")
}

/// A tracked file generated from the code (the editors' schema, the command-line reference)
/// must read `want`: with `update_var` set the test rewrites it instead, and a stale file fails
/// naming the command that renews it (`test`, the test's name).
#[cfg(test)]
pub fn assert_generated_current(relative: &str, want: &str, update_var: &str, test: &str) {
    let path = project_root().join(relative);
    if std::env::var_os(update_var).is_some() {
        std::fs::write(&path, want).unwrap();
    }
    let got = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(got == want, "{} is stale: run `{update_var}=1 cargo test -p xtask {test}`", path.display());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_project_folder_is_checked_and_named() {
        assert_eq!(check(&built_from(), false), Ok(()));
        let gone = Path::new("/nonexistent/ue-conformance-checkout");
        let err = check(gone, false).unwrap_err();
        assert!(err.contains("/nonexistent/ue-conformance-checkout") && err.contains("is gone"), "{err}");
        assert!(err.contains("set $UE_CONFORMANCE_HOME"), "{err}");
        let empty = tempfile::tempdir().unwrap();
        let err = check(empty.path(), true).unwrap_err();
        assert!(err.contains("($UE_CONFORMANCE_HOME) lacks suites, kernel-configs, initramfs, patches"), "{err}");
    }
}
