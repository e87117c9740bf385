//! Provisioning: what a verb needs from the host (`Needs`, from the verb and its flags), checked
//! by capability (a program on PATH, a header the compiler finds, a static C library, a Rust
//! target, a file), so any Linux host that has the tools runs every verb and never calls apt.
//! On a Debian-like host as root what is missing is installed, one announced and verified step
//! at a time; anywhere else each missing piece is named with its Debian/Ubuntu and Fedora
//! package. `--no-setup` (`XTASK_NO_SETUP=1`) skips all of it.
//!
//! Here: what each verb needs (`Needs`) and when to provision; `items` (the pieces, their probes
//! and packages), `probe` (whether each is present), `install` (the report, the install),
//! `backports` (Debian 12's backports source).

mod backports;
mod install;
mod items;
mod probe;

use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::Result;

use crate::arch::{Arch, ARCHES};
use crate::cli::{BenchArgs, KernelArgs, RunArgs, UpstreamArgs, VmArgs};
use crate::support::exit::{error, Kind};
use crate::vm::initramfs::{clients_run_by, CLIENTS};

/// How much of a kernel a verb makes from source.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum KernelWork {
    /// None (`--kernel-image`, or no kernel at all).
    #[default]
    None,
    /// Configured and its options checked (`--config-only`, `--list`).
    Configure,
    /// Built.
    Build,
}

/// What a command needs from the host, derived from the verb and its flags.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Needs {
    /// The arches whose kernels are built or booted.
    pub arches: Vec<&'static Arch>,
    pub kernel: KernelWork,
    /// Debian's default source package (no `--kernel-src`, `--kernel-tarball`, `--kernel-version`
    /// or `--kernel-image`).
    pub default_source: bool,
    /// A source tarball is unpacked (the default source, `--kernel-tarball`, `--kernel-version`).
    pub tarball: bool,
    /// `--kernel-version`: `linux-source-X` downloaded with a private apt configuration.
    pub debian_download: bool,
    /// `--patch`.
    pub patch: bool,
    /// A `--kernel-src` that is a git work tree.
    pub git: bool,
    /// VMs boot: QEMU for each arch and the guest agent's Rust target.
    pub boot: bool,
    /// `--share`: virtiofsd is required (without it boots run, with artifacts left in the guest).
    pub virtiofsd: bool,
    /// The guest clients (`initramfs::CLIENTS`, by package) the plans run: their Rust targets,
    /// linkers and static C libraries.
    pub clients: Vec<&'static str>,
    /// Static C programs for the guest built with the arch's compiler (the upstream selftests,
    /// the bench's floor /init).
    pub static_c: bool,
    /// The result consumers `cargo xtask test` runs: kunit.py (python3), kcidb-io, lcov,
    /// actionlint on the GitHub Actions workflow, and mdBook for the book.
    pub consumers: bool,
    /// What `cargo test --workspace` itself runs: cpio, git, patch.
    pub unit_tests: bool,
    /// `--coverage`: each arch's gcov (it comes with the arch's compiler).
    pub coverage: bool,
    /// `LLVM=1` (`--llvm`, `--make-arg LLVM=1`, or a profile's `# make: LLVM=1`, as `kmsan`
    /// says): clang, lld and the LLVM binutils.
    pub llvm: bool,
    /// A headless browser (chromium) that renders the HTML report: `cargo xtask test` only, not
    /// `setup`, which leaves a few hundred megabytes a run never needs out.
    pub browser: bool,
    /// A PostgreSQL server's programs (`initdb`, `pg_ctl`), for the check that runs the
    /// history's store against a private server: `cargo xtask test` only, like the browser.
    pub postgres: bool,
}

impl Needs {
    /// Everything, for both arches: `cargo xtask setup` (a fresh machine, CI) and `cargo xtask test`.
    pub fn everything() -> Needs {
        Needs {
            arches: ARCHES.iter().collect(),
            kernel: KernelWork::Build,
            default_source: true,
            tarball: true,
            debian_download: false,
            patch: true,
            git: true,
            boot: true,
            virtiofsd: true,
            clients: CLIENTS.iter().map(|c| c.package).collect(),
            static_c: true,
            consumers: true,
            unit_tests: true,
            coverage: true,
            // Only `--profile kmsan` (or `--llvm`) builds with clang: provisioned when asked.
            llvm: false,
            browser: false,
            postgres: false,
        }
    }

    /// What `cargo xtask test` needs: everything, the browser its report check uses and the
    /// PostgreSQL server its history check starts.
    pub fn tests() -> Needs {
        Needs { browser: true, postgres: true, ..Needs::everything() }
    }

    /// The history's PostgreSQL check alone: a server's programs.
    pub fn postgres_server() -> Needs {
        Needs { postgres: true, ..Needs::default() }
    }

    /// `setup --arch A`: everything, for the arches asked for.
    pub fn everything_for(arch: &str) -> Result<Needs> {
        let arches = crate::arch::select(arch).map_err(|e| error(Kind::BadInput, format!("--arch: {e}")))?;
        Ok(Needs { arches, ..Needs::everything() })
    }

    /// Making (or fetching) the kernels of `kernel`'s flags, as `crate::kernel::build_all` does; nothing boots.
    pub fn kernel(args: &KernelArgs) -> Needs {
        // A bad --arch is reported by `crate::kernel::build_all`, as bad input.
        let arches = crate::arch::select(&args.arch).unwrap_or_default();
        let src = &args.source;
        if src.kernel_image.is_some() {
            return Needs { arches, ..Needs::default() };
        }
        let default_source = src.kernel_src.is_none() && src.kernel_tarball.is_none() && src.kernel_version.is_none();
        Needs {
            arches,
            kernel: if args.config_only { KernelWork::Configure } else { KernelWork::Build },
            default_source,
            tarball: src.kernel_src.is_none(),
            debian_download: src.kernel_version.is_some(),
            patch: !src.patches.is_empty(),
            git: src.kernel_src.as_ref().is_some_and(|d| d.join(".git").exists()),
            coverage: !args.config_only && !args.config.gcov_files().is_empty(),
            llvm: args.knobs.knobs().is_ok_and(|k| {
                let configs = crate::support::checkout::project_root().join("kernel-configs");
                k.with_profiles(&configs, &args.config.profiles()).is_ok_and(|k| k.llvm)
            }),
            ..Needs::default()
        }
    }

    /// And the kernels boot (`--share` makes virtiofsd required).
    pub fn booting(self, vm: Option<&VmArgs>) -> Needs {
        Needs { boot: true, virtiofsd: vm.is_some_and(|v| v.share.is_some()), ..self }
    }

    /// And the plans run these guest clients.
    pub fn with_clients(mut self, clients: &[&'static str]) -> Needs {
        for c in clients {
            if !self.clients.contains(c) {
                self.clients.push(c);
            }
        }
        self
    }

    /// `run`: the kernels; unless `--list`, the boots and the clients the chosen scenarios run;
    /// `--upstream-selftests` adds the static selftest build.
    pub fn run(args: &RunArgs, clients: &[&'static str]) -> Needs {
        let config_only = args.kernel.config_only || args.select.list;
        let kernel = Needs::kernel(&KernelArgs { config_only, ..args.kernel.clone() });
        if args.select.list {
            return kernel;
        }
        Needs { static_c: args.upstream_selftests, ..kernel.booting(Some(&args.vm)).with_clients(clients) }
    }

    /// `boot` (also with suites, `exec` and `shell`): the kernels and their boots, with the clients
    /// the plan runs; `--list` only configures.
    pub fn boot(kernel: &KernelArgs, vm: &VmArgs, list: bool, clients: &[&'static str]) -> Needs {
        if list {
            return Needs::kernel(&KernelArgs { config_only: true, ..kernel.clone() });
        }
        Needs::kernel(kernel).booting(Some(vm)).with_clients(clients)
    }

    /// `upstream`: the kernels, the selftests built static with each arch's compiler, the boots.
    pub fn upstream(args: &UpstreamArgs) -> Needs {
        Needs { static_c: true, ..Needs::kernel(&args.kernel).booting(Some(&args.vm)) }
    }

    /// `bench boot`: the kernels, the floor /init built static, the boots.
    pub fn bench(args: &BenchArgs) -> Needs {
        Needs { static_c: true, ..Needs::kernel(&args.kernel).booting(None) }
    }
}

/// The clients a plan runs: those whose guest path its JSON names, as `initramfs::clients_for`
/// picks them.
pub fn clients_of_plan(plan: &protocol::Plan) -> Vec<&'static str> {
    clients_run_by(plan).iter().map(|c| c.package).collect()
}

/// Every client (`shell` packs them all).
pub fn all_clients() -> Vec<&'static str> {
    CLIENTS.iter().map(|c| c.package).collect()
}

/// `--no-setup` / `XTASK_NO_SETUP`: the verbs skip provisioning (a missing tool then fails where
/// it is used, named with its package).
static SKIP: AtomicBool = AtomicBool::new(false);

/// Set once from the command line, before any verb runs.
pub fn skip(yes: bool) {
    SKIP.store(yes, Ordering::Relaxed);
}

/// What a verb calls first: checks what `needs` asks for and installs what is missing where it
/// can. Quiet when everything is present; nothing at all with `--no-setup`.
pub fn ensure(needs: &Needs) -> Result<()> {
    if SKIP.load(Ordering::Relaxed) {
        return Ok(());
    }
    provision(needs, false)
}

/// `cargo xtask test`'s provisioning of `needs` (skipped with `--no-setup`).
pub fn provision_unless_skipped(needs: &Needs, verbose: bool) -> Result<()> {
    if SKIP.load(Ordering::Relaxed) {
        return Ok(());
    }
    provision(needs, verbose)
}

pub use install::{provision, report, Hints};
pub use items::{fedora, items, Fedora, Item, Probe, Source};
pub use probe::{missing, postgres_bin};

#[cfg(test)]
mod tests;
