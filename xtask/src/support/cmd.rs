//! External commands (git, rsync, patch, tar, make, apt, dpkg, cargo, rustup, compilers) through
//! xshell, the cargo-xtask idiom: `cmd!` builds a command from a shell (`sh()`), `stdout` runs it
//! and returns what it printed or an error naming the command, its exit status and its stderr.
//! Commands whose output is long (a kernel build, apt, rustup, cargo install) go to a log as it
//! comes (`run_logged`, `StepLog`), the terminal showing one progress line per step.
//! QEMU and virtiofsd are not run from here: `qemu.rs` spawns them in process groups of their
//! own, which xshell has no way to ask for.

use std::io::{BufRead, BufReader, Seek, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::support::exit::{error, Kind};
use crate::support::progress::Task;
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

/// A command as a person would type it: `make -C ... O=...`, not `Command`'s Debug quoting.
fn shown(cmd: &Command) -> String {
    std::iter::once(cmd.get_program()).chain(cmd.get_args()).map(|a| a.to_string_lossy()).collect::<Vec<_>>().join(" ")
}

/// Runs a command with stdout and stderr merged into `log` as they come (after a `$ command`
/// line), handing each line to `each` (a progress task's message); a failure names the command
/// and its exit status.
///
/// A `std::process::Command`, not xshell: xshell hands back a command's output only once it
/// has ended, and a kernel build's or apt's lines must reach the log and the spinner as they come.
pub fn run_logged(cmd: impl Into<Command>, log: &mut std::fs::File, mut each: impl FnMut(&str)) -> Result<()> {
    let mut cmd = cmd.into();
    let shown = shown(&cmd);
    writeln!(log, "$ {shown}")?;
    let (reader, writer) = std::io::pipe()?;
    cmd.stdout(writer.try_clone()?).stderr(writer).stdin(std::process::Stdio::null());
    let mut child = cmd.spawn().with_context(|| format!("starting {shown}"))?;
    // The command holds the pipe's write ends; only the child may keep them open.
    drop(cmd);
    for line in BufReader::new(reader).split(b'\n') {
        let line = line?;
        log.write_all(&line)?;
        log.write_all(b"\n")?;
        each(&String::from_utf8_lossy(&line));
    }
    let status = child.wait()?;
    if !status.success() {
        bail!("{shown} failed ({status})");
    }
    Ok(())
}

/// The log of host provisioning steps (apt, rustup, cargo install, pip): their output goes
/// there, created at the first step; the terminal shows one progress line per step, and a
/// failed step the log's last lines and its path.
pub struct StepLog {
    path: PathBuf,
    file: Option<std::fs::File>,
}

/// Lines of the log a failed step shows.
const TAIL_LINES: usize = 25;

impl StepLog {
    /// A log at `path`, created (with its folder) when the first step runs.
    pub fn new(path: PathBuf) -> StepLog {
        StepLog { path, file: None }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Runs one step: `label` on the progress line, its output in the log. A failure is the
    /// host's (exit 129): the step, the command's status, the log's tail and its path.
    pub fn step(&mut self, label: &str, cmd: impl Into<Command>) -> Result<()> {
        let file = match &mut self.file {
            Some(f) => f,
            None => {
                if let Some(dir) = self.path.parent() {
                    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
                }
                let f = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&self.path)
                    .with_context(|| format!("opening {}", self.path.display()))?;
                self.file.insert(f)
            }
        };
        writeln!(file, "==== {label} ====")?;
        let start = file.stream_position()?;
        let mut task = Task::start(label);
        task.update(format!("output in {}", self.path.display()));
        let mut lines = 0u64;
        let result = run_logged(cmd, file, |text| {
            lines += 1;
            if !text.trim().is_empty() {
                task.update(format!("{lines} lines of output, {}", text.trim()));
            }
        });
        match result {
            Ok(()) => {
                task.finish("done");
                Ok(())
            }
            Err(e) => {
                drop(task);
                let text = std::fs::read(&self.path).unwrap_or_default();
                let ours = String::from_utf8_lossy(text.get(start as usize..).unwrap_or_default()).into_owned();
                let all: Vec<&str> = ours.lines().collect();
                let tail = all[all.len().saturating_sub(TAIL_LINES)..].join("\n");
                Err(error(
                    Kind::Infra,
                    format!(
                        "setup: {label}: {e:#}\n==== the last lines of its output ====\n{tail}\n==== full log: {} ====",
                        self.path.display()
                    ),
                ))
            }
        }
    }
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

    /// A step's output goes to the log, not the terminal; a failed step's error carries the
    /// log's tail (its own lines only) and the log's path.
    #[test]
    fn steps_log_their_output_and_a_failure_shows_the_tail() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("logs/setup-1.log");
        let mut log = StepLog::new(path.clone());
        assert!(!path.exists(), "created at the first step");
        let sh = sh().unwrap();
        log.step("first", cmd!(sh, "sh -c 'echo one; echo two >&2'")).unwrap();
        let err = log.step("second", cmd!(sh, "sh -c 'seq 1 40; echo broken >&2; exit 4'")).unwrap_err();
        assert_eq!(crate::support::exit::code_for(&err), Kind::Infra.code());
        let msg = format!("{err:#}");
        assert!(
            msg.starts_with("setup: second: sh -c seq 1 40; echo broken >&2; exit 4 failed (exit status: 4)"),
            "{msg}"
        );
        assert!(msg.contains("\n40\nbroken\n") && !msg.contains("\n15\n") && !msg.contains("two"), "{msg}");
        assert!(msg.ends_with(&format!("full log: {} ====", path.display())), "{msg}");
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            text.starts_with("==== first ====\n$ sh -c echo one; echo two >&2\none\ntwo\n==== second ===="),
            "{text}"
        );
    }
}
