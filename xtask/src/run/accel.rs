//! Which accelerator the boots use: `--accel` as asked, or for `auto` a trial boot under KVM
//! (never trusting access to /dev/kvm: nested virtualisation can hang the guest), its answer
//! cached per host.

use std::path::Path;
use std::time::Duration;

use anyhow::Result;
use serde::{Deserialize, Serialize};

use crate::kernel::build::Built;
use crate::support::progress::line;
use crate::vm::qemu::{self, Accel, AccelChoice, VmSpec};

/// The cached answer of the KVM trial boot.
#[derive(Debug, Serialize, Deserialize)]
struct Probe {
    key: String,
    kvm: bool,
    detail: String,
}

/// The accelerator `built`'s boots use: `--accel kvm`/`tcg` as asked; `auto` is TCG unless the
/// host's arch matches and a trial boot under KVM reaches /init (cached per QEMU, host kernel
/// and arch in `accel-probe.json`).
pub fn accel_for(built: &Built, agent: &Path, choice: AccelChoice, cache_dir: &Path) -> Result<Accel> {
    match choice {
        AccelChoice::Kvm => return Ok(Accel::Kvm),
        AccelChoice::Tcg => return Ok(Accel::Tcg),
        AccelChoice::Auto => {}
    }
    let host_machine = std::env::consts::ARCH;
    if host_machine != built.arch.uname_machine || !Path::new("/dev/kvm").exists() {
        return Ok(Accel::Tcg);
    }
    // Never trust access("/dev/kvm"): nested virtualisation can hang the guest. Boot once.
    let qemu = qemu::qemu_binary(built.arch, qemu::qemu_search_path().as_deref())?;
    let version = qemu::version(&qemu).unwrap_or_default();
    let host_kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let key = format!("{} | {} | {}", version, host_kernel.trim(), built.arch.name);
    let memo = cache_dir.join("accel-probe.json");
    if let Some(p) = std::fs::read(&memo).ok().and_then(|b| serde_json::from_slice::<Probe>(&b).ok()) {
        if p.key == key {
            return Ok(if p.kvm { Accel::Kvm } else { Accel::Tcg });
        }
    }
    line(format!("{}: probing KVM with a trial boot (once per host; the answer is cached)", built.arch.name));
    let scratch = tempfile::Builder::new().prefix("xtask-kvm-probe-").tempdir()?;
    let initrd = scratch.path().join("initramfs.cpio");
    let plan = protocol::Plan::empty("kvm-probe");
    crate::vm::initramfs::write(&initrd, agent, &plan, &[])?;
    let spec = VmSpec {
        arch: built.arch,
        kernel: built.image.clone(),
        initrd,
        workdir: scratch.path().to_path_buf(),
        logs: scratch.path().to_path_buf(),
        accel: Accel::Kvm,
        memory_mb: 256,
        cpus: 1,
        shares: vec![],
        sandbox: Default::default(),
        boot_timeout: Duration::from_secs(8),
        watchdog: Duration::from_secs(12),
        deadlines_ms: None,
        expected: Vec::new(),
        extra_cmdline: vec![],
        extra_qemu: vec![],
        stop_after_death: None,
    };
    let (kvm, detail) = match qemu::run(&spec, None) {
        Ok(vm) => match (&vm.ended, vm.boot) {
            (qemu::Ended::Exited { .. }, Some(boot)) => {
                (true, format!("booted to /init in {:.2} s", boot.as_secs_f64()))
            }
            (ended, None) => (false, format!("no boot to /init: QEMU {ended}")),
            (ended, Some(_)) => (false, format!("QEMU {ended}")),
        },
        Err(e) => (false, format!("{e:#}")),
    };
    line(format!("{}: KVM {} ({detail})", built.arch.name, if kvm { "works" } else { "does not work, using TCG" }));
    crate::support::files::write_atomic(&memo, &serde_json::to_vec_pretty(&Probe { key, kvm, detail })?)?;
    Ok(if kvm { Accel::Kvm } else { Accel::Tcg })
}
