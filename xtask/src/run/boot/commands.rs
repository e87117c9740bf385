//! The one-VM commands: `exec` (a static binary run in the guest, its exit status read back
//! from the agent's line) and `shell` (the agent's shell on the terminal).

use std::path::Path;

use anyhow::Result;

use super::{run_plan_on, vm_spec, BootRun, Guest, Options};
use crate::kernel::build::Built;
use crate::run::accel::accel_for;
use crate::support::exit::{error, Kind};
use crate::support::progress::line;
use crate::vm::qemu;

/// `cargo xtask exec`: runs a static binary in the guest and returns its exit status.
pub fn exec(built: &Built, command: &[String], timeout_s: u64, opts: &Options) -> Result<u8> {
    let host_path = Path::new(&command[0]);
    let bytes = std::fs::read(host_path).map_err(|e| error(Kind::BadInput, format!("{}: {e}", host_path.display())))?;
    let arch = built.arch;
    let order = |big: bool| if big { "big-endian" } else { "little-endian" };
    match crate::vm::initramfs::elf_facts(&bytes) {
        Some(f) if f.bits64 && f.big_endian == arch.big_endian && f.machine == arch.elf_machine && !f.interp => {}
        None => return Err(error(Kind::BadInput, format!("{}: not an ELF executable", host_path.display()))),
        Some(f) if !f.bits64 || f.machine != arch.elf_machine || f.big_endian != arch.big_endian => {
            return Err(error(
                Kind::BadInput,
                format!(
                    "{}: a {}-bit {} ELF executable for machine {}, not {} (64-bit {}, machine {})",
                    host_path.display(),
                    if f.bits64 { 64 } else { 32 },
                    order(f.big_endian),
                    f.machine,
                    arch.name,
                    order(arch.big_endian),
                    arch.elf_machine
                ),
            ))
        }
        Some(_) => {
            return Err(error(
                Kind::BadInput,
                format!("{}: dynamically linked; the guest has no libraries, so build it static", host_path.display()),
            ))
        }
    }
    let name = host_path.file_name().unwrap_or_default().to_string_lossy().into_owned();
    let guest = format!("/bin/{name}");
    let mut argv = vec![guest.clone()];
    argv.extend(command[1..].iter().cloned());
    let mut plan = protocol::Plan::empty("exec");
    plan.scenarios.push(protocol::Scenario {
        name: format!("exec/{}", name.replace(char::is_whitespace, "_")),
        deadline_ms: timeout_s * 1000,
        steps: vec![protocol::Step::Exec(protocol::steps::Exec { argv, expect_exit: 0 })],
    });
    let judged = run_plan_on(std::slice::from_ref(built), &plan, &[(guest, bytes)], opts)?;
    // A signal before the VM started leaves no boot to read a status from.
    match judged.first() {
        Some(j) => exec_status(j),
        None => Err(error(Kind::Interrupted, "interrupted before the VM booted: the program did not run")),
    }
}

/// `cargo xtask shell`: the agent's interactive shell on the terminal.
pub fn shell(built: &Built, opts: &Options) -> Result<u8> {
    let agent = crate::vm::initramfs::build_agent(built.arch)?;
    let accel = accel_for(built, &agent, opts.accel, &opts.cache_dir)?;
    let scratch = tempfile::Builder::new().prefix("xtask-shell-").tempdir()?;
    let mut plan = protocol::Plan::empty("shell");
    plan.shell = true;
    let clients = crate::vm::initramfs::clients_for(built.arch, &plan, true)?;
    let virtiofsd = crate::vm::virtiofsd::binary();
    let guest = Guest {
        built,
        agent: &agent,
        accel,
        extra: &clients,
        artifacts: None,
        work: scratch.path(),
        logs: scratch.path(),
    };
    let spec = vm_spec(&guest, &mut plan, virtiofsd.as_deref(), opts)?;
    line(format!(
        "{}: shell on {} ({}); type `help`, `exit` ends it, Ctrl-A x kills QEMU",
        built.arch.name,
        built.metadata.kernelrelease,
        accel.name()
    ));
    qemu::interactive(&spec, virtiofsd.as_deref())?;
    Ok(0)
}

/// The exit status of `exec`'s program, from the agent's line for its step (the protocol's
/// `ExecEnd`), with the program's output printed.
fn exec_status(j: &BootRun) -> Result<u8> {
    use crate::judging::verdict::Status;
    let Some(s) = j.result().scenarios.first() else {
        return Err(error(Kind::Infra, "the exec scenario has no result"));
    };
    let mut code = None;
    for d in &s.diagnostics {
        match protocol::step_text(d, 1).and_then(protocol::ExecEnd::parse) {
            Some(end) => code = Some(end.status.shell_code()),
            None if code.is_none() => println!("{d}"),
            None => {}
        }
    }
    match (s.status, code) {
        (Status::Timeout, _) => Ok(124),
        (Status::Crashed | Status::NotRun, _) => Err(error(
            Kind::Infra,
            format!("the guest did not finish the program: verdict {}", j.result().verdict.as_str()),
        )),
        (_, Some(c)) => Ok(c),
        (_, None) => Err(error(Kind::Infra, "the agent did not report the program's exit status")),
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn elf_checks_find_machine_and_interpreter() {
        let own = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        let f = crate::vm::initramfs::elf_facts(&own).unwrap();
        let host = crate::arch::ARCHES.iter().find(|a| a.uname_machine == std::env::consts::ARCH).unwrap();
        assert_eq!((f.machine, f.big_endian, f.bits64), (host.elf_machine, host.big_endian, true));
        assert!(f.interp, "the test binary is dynamically linked");
        assert_eq!(crate::vm::initramfs::elf_facts(b"#!/bin/sh\n"), None);
    }
}
