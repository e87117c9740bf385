//! Build script: stamps the binary with the git commit it was built from, for `--version`
//! (`XTASK_GIT_COMMIT` in the environment wins; without git or a checkout it says so).

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).current_dir(env!("CARGO_MANIFEST_DIR")).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (out.status.success() && !text.is_empty()).then_some(text)
}

fn main() {
    println!("cargo:rerun-if-env-changed=XTASK_GIT_COMMIT");
    let commit = std::env::var("XTASK_GIT_COMMIT")
        .ok()
        .filter(|c| !c.is_empty())
        .or_else(|| git(&["rev-parse", "--short=12", "HEAD"]))
        .unwrap_or_else(|| "unknown (not built from a git checkout)".into());
    // Rebuilt when HEAD moves: HEAD itself (a checkout, a worktree's own HEAD), the branch it
    // names, and packed-refs (where a branch's ref may live instead). Only files that exist: cargo
    // reruns a build script whose watched file is missing every time, and so rebuilds the crate.
    println!("cargo:rerun-if-changed=build.rs");
    let mut watched = vec!["HEAD".to_string(), "packed-refs".to_string()];
    watched.extend(git(&["symbolic-ref", "-q", "HEAD"]));
    for name in watched {
        let path = git(&["rev-parse", "--path-format=absolute", "--git-path", &name]);
        if let Some(path) = path.filter(|p| std::path::Path::new(p).is_file()) {
            println!("cargo:rerun-if-changed={path}");
        }
    }
    println!("cargo:rustc-env=XTASK_GIT_COMMIT={commit}");
}
