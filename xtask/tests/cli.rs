//! The xtask binary as a shell sees it, in plain `cargo test` (no kernel, no QEMU): `--version`
//! names the commit, and a reader that closes stdout early ends the run quietly.

use std::process::{Command, Stdio};

fn xtask() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_xtask"));
    c.env("XTASK_NO_SETUP", "1");
    c
}

#[test]
fn version_names_the_version_and_the_commit() {
    let out = xtask().arg("--version").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with(&format!("cargo xtask {} (commit ", env!("CARGO_PKG_VERSION"))), "{text}");
    assert!(text.trim_end().ends_with(')'), "{text}");
}

/// `cargo xtask coverage | head -1`, with the reader gone before the first line: the write
/// fails with EPIPE, which ends the process with 0 and no panic message.
#[test]
fn a_closed_stdout_ends_quietly() {
    let results = tempfile::tempdir().unwrap();
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = xtask()
        .args(["coverage", "--results"])
        .arg(results.path())
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}
