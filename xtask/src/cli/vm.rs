//! The VM flags (`--accel`, `--share`, `--cpus`, `--vms`, `--memory`, `--kernel-args`,
//! `--qemu-args`, `--results`) of every verb that boots.

use std::path::PathBuf;

use clap::Args;

/// How the VMs run.
#[derive(Debug, Clone, Args)]
pub struct VmArgs {
    /// auto probes KVM with a trial boot (cached) and falls back to TCG.
    #[arg(long, value_enum, default_value = "auto")]
    pub accel: crate::vm::qemu::AccelChoice,
    /// Share a host folder into the guest over virtio-fs: HOST_DIR[:GUEST_PATH] (default /share).
    #[arg(long, value_name = "HOST_DIR[:GUEST_PATH]")]
    pub share: Option<String>,
    /// How virtiofsd, which serves the guest's shared folders, is isolated from the host: the
    /// kernel under test is untrusted. auto is namespace where the host allows it, else chroot;
    /// none (unsandboxed, symlink escapes possible) only when named.
    #[arg(long, value_enum, default_value = "auto", value_name = "MODE")]
    pub virtiofsd_sandbox: crate::vm::virtiofsd::SandboxChoice,
    /// Virtual CPUs per VM (1 turns the SMP paths off).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub cpus: u32,
    /// VMs per arch for the shared scenarios: the plan is cut into this many parts of about
    /// equal size, booted side by side, and their results folded back into the arch's
    /// (`-j/--jobs` is make's).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub vms: u32,
    /// Memory per VM: MiB, or with a unit (`512M`, `1G`).
    #[arg(long, default_value = "512", value_parser = parse_memory)]
    pub memory: u32,
    /// Appended to the guest kernel's command line, e.g. "loglevel=8 ftrace_dump_on_oops"
    /// (repeatable; split as a shell would, quotes kept together: `dyndbg="file x.c +p"`).
    #[arg(long, value_name = "ARGS", allow_hyphen_values = true)]
    pub kernel_args: Vec<String>,
    /// Appended to QEMU's arguments, e.g. "-d guest_errors" (repeatable; split as a shell
    /// would: `--qemu-args "-append 'a b'"` passes `a b` as one argument).
    #[arg(long, value_name = "ARGS", allow_hyphen_values = true)]
    pub qemu_args: Vec<String>,
    /// Where run folders go (default: results/ in the checkout).
    #[arg(long, value_name = "DIR")]
    pub results: Option<PathBuf>,
}

impl VmArgs {
    /// `--kernel-args` and `--qemu-args`, each split into words as a shell would.
    pub fn split_args(&self) -> anyhow::Result<(Vec<String>, Vec<String>)> {
        Ok((shell_words(&self.kernel_args, "--kernel-args")?, shell_words(&self.qemu_args, "--qemu-args")?))
    }

    /// `--results`, else `results/` in the checkout.
    pub fn results_root(&self) -> PathBuf {
        self.results.clone().unwrap_or_else(crate::support::checkout::default_results)
    }
}

/// Each flag value split into words as a shell would, in order.
fn shell_words(values: &[String], flag: &str) -> anyhow::Result<Vec<String>> {
    let mut words = Vec::new();
    for v in values {
        let split = shlex::split(v).ok_or_else(|| {
            crate::support::exit::error(
                crate::support::exit::Kind::BadInput,
                format!("{flag} {v:?}: an unclosed quote or a trailing backslash"),
            )
        })?;
        words.extend(split);
    }
    Ok(words)
}

/// `--memory`: `512`, `512M`, `1G` (MiB as the unit when none is given).
pub fn parse_memory(text: &str) -> Result<u32, String> {
    let t = text.trim();
    let (digits, factor) = match t.char_indices().last() {
        Some((i, 'M' | 'm')) => (&t[..i], 1),
        Some((i, 'G' | 'g')) => (&t[..i], 1024),
        _ => (t, 1),
    };
    let n: u32 = digits.parse().map_err(|_| format!("`{text}` is not a size: write 512, 512M or 1G"))?;
    let mib = n.checked_mul(factor).ok_or_else(|| format!("`{text}` is too large"))?;
    if mib < 64 {
        return Err(format!("{mib} MiB is too little for the guest (at least 64M)"));
    }
    Ok(mib)
}
