//! External commands (git, rsync, patch, tar, make, apt, dpkg, cargo, rustup, compilers) through
//! xshell, the cargo-xtask idiom: `cmd!` builds a command from a shell (`sh()`), `stdout` runs it
//! and returns what it printed or an error naming the command, its exit status and its stderr.
//! QEMU and virtiofsd are not run from here: `qemu.rs` spawns them in process groups of their
//! own, which xshell has no way to ask for.

use anyhow::{bail, Context, Result};

use crate::support::exit::{error, Kind};
pub use xshell::{cmd, Cmd, Shell};

/// A shell for building commands: the process's environment and working directory.
pub fn sh() -> Result<Shell> {
    Shell::new().context("reading the current directory")
}

/// Runs a command (stdin empty, stdout and stderr captured) and returns its stdout; a failure
/// names the command, its exit status and its stderr.
pub fn stdout(cmd: Cmd) -> Result<Vec<u8>> {
    let shown = cmd.to_string();
    let out = cmd.ignore_status().output().with_context(|| format!("running `{shown}`"))?;
    if !out.status.success() {
        bail!("`{shown}` failed ({}): {}", out.status, String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(out.stdout)
}

/// `stdout` as text, trimmed.
pub fn text(cmd: Cmd) -> Result<String> {
    Ok(String::from_utf8_lossy(&stdout(cmd)?).trim().to_string())
}

/// Runs a host provisioning step (`apt-get install`, `rustup target add`) with its output on the
/// terminal as it comes; a failure is the host's (exit 129), naming the command.
pub fn install(cmd: Cmd) -> Result<()> {
    cmd.quiet().run().map_err(|e| error(Kind::Infra, format!("setup: {e}")))
}

/// Whether a command runs and exits 0 (a capability probe: `cc --version`), its output dropped.
pub fn succeeds(cmd: Cmd) -> bool {
    cmd.quiet().ignore_stdout().ignore_stderr().run().is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_name_the_command_its_status_and_its_stderr() {
        let sh = sh().unwrap();
        assert_eq!(text(cmd!(sh, "sh -c 'echo out; echo err >&2'")).unwrap(), "out");
        let err = stdout(cmd!(sh, "sh -c 'echo why >&2; exit 3'")).unwrap_err().to_string();
        assert_eq!(err, "`sh -c \"echo why >&2; exit 3\"` failed (exit status: 3): why");
        let missing = stdout(cmd!(sh, "no-such-program-here")).unwrap_err();
        assert_eq!(format!("{missing:#}"), "running `no-such-program-here`: command not found: `no-such-program-here`");
        assert!(succeeds(cmd!(sh, "true")) && !succeeds(cmd!(sh, "false")) && !succeeds(cmd!(sh, "no-such-program")));
    }
}
