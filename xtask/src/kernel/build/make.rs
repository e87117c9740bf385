//! `make` in a kernel build: its command lines (in the mirror, out of tree in the build
//! directory, with the arch's, the knobs' and the coverage build's variables), run with their
//! output in the build log and their progress counted, or captured.

use std::path::Path;
use std::process::Command;

use anyhow::Result;

use crate::kernel::knobs::shell_line;
use crate::support::progress::Task;

pub(super) struct Make<'a> {
    pub(super) srctree: &'a Path,
    pub(super) out: &'a Path,
    /// `ARCH=`, the knobs' and the coverage build's variables.
    pub(super) vars: Vec<String>,
}

impl Make<'_> {
    /// `make`'s arguments after the program name.
    fn args(&self, args: &[&str]) -> Vec<String> {
        let mut all = vec!["-C".to_string(), self.srctree.display().to_string(), format!("O={}", self.out.display())];
        all.extend(self.vars.iter().cloned());
        all.extend(args.iter().map(|a| a.to_string()));
        all
    }

    pub(super) fn command_line(&self, args: &[&str]) -> String {
        format!("make {}", shell_line(&self.args(args)))
    }

    pub(super) fn run(&self, args: &[&str], log: &mut std::fs::File, task: Option<&mut Task>) -> Result<()> {
        let mut make = Command::new("make");
        make.args(self.args(args));
        for var in crate::kernel::knobs::CLEARED_ENV {
            make.env_remove(var);
        }
        run_logged(make, log, task)
    }

    pub(super) fn capture(&self, args: &[&str]) -> Result<String> {
        let sh = crate::support::cmd::sh()?;
        let mut make = sh.cmd("make").args(self.args(args));
        for var in crate::kernel::knobs::CLEARED_ENV {
            make = make.env_remove(var);
        }
        Ok(String::from_utf8_lossy(&crate::support::cmd::stdout(make)?).into_owned())
    }
}

/// Runs a command with its output in the log (`cmd::run_logged`), feeding a progress task with
/// the count of make steps (`  CC      kernel/...` lines) and the latest one.
pub(super) fn run_logged(cmd: Command, log: &mut std::fs::File, mut task: Option<&mut Task>) -> Result<()> {
    let mut steps = 0u64;
    crate::support::cmd::run_logged(cmd, log, |text| {
        if let Some(task) = task.as_deref_mut() {
            if text.starts_with("  ") && text.split_whitespace().count() >= 2 {
                steps += 1;
                task.update(format!("{steps} steps, {}", text.trim()));
            }
        }
    })
}
