//! The project's own checks (`cargo xtask test`) as a list of commands run in order, as kunit's
//! `run_checks.py` does. Provisioning comes first, so no later command can need a tool that is
//! not there yet; then the unit tests of both workspaces; then the real checks (kernel builds
//! and boots on every arch, `xtask/tests/real/`, a test target that plain `cargo test`
//! leaves out, so it stays fast). Each command ends with a PASSED or FAILED
//! line; the real checks print one such line per check.

use std::time::Instant;

use anyhow::Result;

use crate::cli::TestArgs;
use crate::setup::provision::Needs;
use crate::support::cmd::{cmd, sh};
use crate::support::exit::Kind;
use crate::support::progress::line;

/// What one command of the list does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Provisioning (what `cargo xtask setup` does) of what the commands after it need, in
    /// this process.
    Provision(Needs),
    /// A cargo command, run from the checkout's root.
    Cargo(Vec<String>),
}

/// One command of `cargo xtask test`.
#[derive(Debug, Clone)]
pub struct Command {
    pub name: &'static str,
    pub action: Action,
    /// What it needs from the host, in provisioning's terms (the unit tests run cpio, git and
    /// patch; the real checks everything).
    pub needs: Needs,
}

/// The commands of `cargo xtask test`, in the order they run. `--unit-only` keeps the unit
/// tests, which need nothing that provisioning installs.
pub fn commands(args: &TestArgs) -> Vec<Command> {
    let s = |v: &[&str]| v.iter().map(|a| a.to_string()).collect::<Vec<_>>();
    let root = crate::support::checkout::project_root();
    let clients = root.join("initramfs/clients/Cargo.toml").display().to_string();
    let clients_target = crate::vm::initramfs::clients_target_dir().display().to_string();
    let mut real = s(&["test", "--quiet", "-p", "xtask", "--test", "real", "--"]);
    if let Some(dir) = &args.cache_dir {
        real.extend(["--cache-dir".to_string(), dir.display().to_string()]);
    }
    let mut out = vec![
        Command {
            name: "provisioning (cargo xtask setup)",
            action: Action::Provision(Needs::tests()),
            needs: Needs::default(),
        },
        Command {
            name: "unit tests (cargo test --workspace)",
            action: Action::Cargo(s(&["test", "--workspace", "--quiet"])),
            needs: Needs { unit_tests: true, ..Needs::default() },
        },
        Command {
            name: "unit tests of the guest clients (initramfs/clients)",
            action: Action::Cargo(
                s(&["test", "--quiet", "--manifest-path"])
                    .into_iter()
                    .chain([clients, "--target-dir".into(), clients_target])
                    .collect(),
            ),
            needs: Needs::default(),
        },
        Command { name: "real checks (xtask/tests/real)", action: Action::Cargo(real), needs: Needs::tests() },
    ];
    if args.unit_only {
        // What plain `cargo test` runs, after provisioning the unit tests' few tools.
        out.retain(|c| c.name.starts_with("unit tests"));
        let unit = Needs { unit_tests: true, ..Needs::default() };
        out.insert(
            0,
            Command {
                name: "provisioning for the unit tests",
                action: Action::Provision(unit),
                needs: Needs::default(),
            },
        );
    }
    out
}

/// Runs `list` in order with `exec`, printing a PASSED or FAILED line for each command, and
/// returns the names of those that failed. A failed provisioning ends the list: nothing after
/// it can be trusted to find its tools.
pub fn run_list(list: &[Command], mut exec: impl FnMut(&Command) -> Result<()>) -> Vec<&'static str> {
    let mut failed = Vec::new();
    for c in list {
        let started = Instant::now();
        let result = exec(c);
        let secs = started.elapsed().as_secs_f64();
        match result {
            Ok(()) => line(format!("[PASSED] {} ({secs:.1} s)", c.name)),
            Err(e) => {
                line(format!("[FAILED] {} ({secs:.1} s): {e:#}", c.name));
                failed.push(c.name);
                if matches!(c.action, Action::Provision(_)) {
                    break;
                }
            }
        }
    }
    failed
}

/// `cargo xtask test`: the commands run in order, a line for each that failed; exit 1 when
/// one did.
pub fn run(args: &TestArgs) -> Result<u8> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let sh = sh()?;
    sh.change_dir(crate::support::checkout::project_root());
    let list = commands(args);
    let failed = run_list(&list, |c| match &c.action {
        Action::Provision(needs) => crate::setup::provision::provision_unless_skipped(needs, true),
        Action::Cargo(args) => cmd!(sh, "{cargo} {args...}").quiet().run().map_err(Into::into),
    });
    println!("cargo xtask test: {} of {} commands passed", list.len() - failed.len(), list.len());
    for f in &failed {
        eprintln!("FAILED: {f}");
    }
    Ok(if failed.is_empty() { 0 } else { Kind::TestFailed.code() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::setup::provision::{items, Probe};

    /// The programs on PATH that provisioning provides for `needs`.
    fn programs(needs: &Needs) -> Vec<String> {
        items(needs)
            .into_iter()
            .filter_map(|i| match i.probe {
                Probe::Program(p) => Some(p),
                Probe::Qemu(arch) => Some(arch.qemu_binary.to_string()),
                _ => None,
            })
            .collect()
    }

    /// The defect this order removes (the unit tests ran before provisioning and needed cpio),
    /// checked the way a fresh machine meets it: every program that provisioning installs is
    /// hidden from PATH until the provisioning command has run (it then "installs" them as
    /// stubs), and each command finds the programs it needs on the PATH of its moment.
    #[test]
    fn with_setups_tools_hidden_the_list_provisions_before_any_command_needs_one() {
        let dir = tempfile::tempdir().unwrap();
        let (hidden, installed) = (dir.path().join("hidden"), dir.path().join("installed"));
        std::fs::create_dir_all(&hidden).unwrap();
        std::fs::create_dir_all(&installed).unwrap();
        for p in programs(&Needs::tests()) {
            let stub = installed.join(&p);
            std::fs::write(&stub, "#!/bin/sh\n").unwrap();
            std::fs::set_permissions(&stub, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        }
        for unit_only in [false, true] {
            let list = commands(&TestArgs { unit_only, cache_dir: None });
            let mut path = hidden.clone();
            let failed = run_list(&list, |c| {
                if matches!(c.action, Action::Provision(_)) {
                    path = installed.clone();
                    return Ok(());
                }
                let lacking: Vec<String> = programs(&c.needs)
                    .into_iter()
                    .filter(|p| crate::vm::qemu::find_program(p, Some(path.as_os_str())).is_none())
                    .collect();
                anyhow::ensure!(lacking.is_empty(), "needs {}, not yet provisioned", lacking.join(", "));
                Ok(())
            });
            assert!(failed.is_empty(), "--unit-only {unit_only}: {failed:?}");
        }
        // The unit tests do need programs that provisioning installs (so the order matters) ...
        assert!(programs(&Needs { unit_tests: true, ..Needs::default() }).contains(&"cpio".to_string()));
        // ... and --unit-only is their provisioning and the two unit-test commands.
        let unit = commands(&TestArgs { unit_only: true, cache_dir: None });
        assert_eq!(unit.len(), 3, "{:?}", unit.iter().map(|c| c.name).collect::<Vec<_>>());
    }
}
