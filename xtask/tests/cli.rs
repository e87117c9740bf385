//! The xtask binary as a shell sees it, in plain `cargo test` (no kernel, no QEMU): `--version`
//! names the commit, a reader that closes stdout early ends the run quietly, and the installed
//! spelling `ue-conformance` works from another folder, takes a kernel tree there as its
//! source, and names a project folder that is gone.

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

fn installed() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_ue-conformance"));
    c.env("XTASK_NO_SETUP", "1").env_remove("UE_CONFORMANCE_HOME");
    c
}

/// From a folder outside the checkout, the installed spelling finds the suites, says its own
/// name, and exits 129 naming the project folder when `$UE_CONFORMANCE_HOME` points nowhere.
#[test]
fn the_installed_spelling_works_from_anywhere() {
    let elsewhere = tempfile::tempdir().unwrap();
    let out = installed().arg("--version").current_dir(elsewhere.path()).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("ue-conformance "), "{text}");
    let out = installed().arg("check-suites").current_dir(elsewhere.path()).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.contains("ok suites/registration.yaml"), "{text}");
    let gone = elsewhere.path().join("moved-away");
    let out = installed().arg("check-suites").env("UE_CONFORMANCE_HOME", &gone).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(129), "{stderr}");
    assert!(stderr.contains(&format!("{} ($UE_CONFORMANCE_HOME) is gone", gone.display())), "{stderr}");
}

/// Inside a kernel git tree with no source flag, the tree is the source (one line says so); a
/// `--cc` that does not exist then stops the build before anything runs (exit 129).
#[test]
fn a_kernel_tree_in_the_working_folder_is_the_source() {
    let tree = tempfile::tempdir().unwrap();
    std::fs::write(tree.path().join("Makefile"), "VERSION = 6\nPATCHLEVEL = 12\n").unwrap();
    std::fs::create_dir(tree.path().join("kernel")).unwrap();
    let git = Command::new("git").args(["init", "-q", "."]).current_dir(tree.path()).status().unwrap();
    assert!(git.success());
    let out = installed()
        .args(["kernel", "--arch", "x86_64", "--cc", "/nonexistent/gcc"])
        .current_dir(tree.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let here = tree.path().canonicalize().unwrap();
    assert!(
        stderr.contains(&format!("source: the kernel tree here, {} (as --kernel-src .)", here.display())),
        "{stderr}"
    );
    assert!(stderr.contains("`/nonexistent/gcc` (--cc / CC=)"), "{stderr}");
    assert_eq!(out.status.code(), Some(129), "{stderr}");
}
