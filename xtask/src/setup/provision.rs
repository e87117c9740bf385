//! Provisioning: what a verb needs from the host (`Needs`, from the verb and its flags), checked
//! by capability (a program on PATH, a header the compiler finds, a static C library, a Rust
//! target, a file), so any Linux host that has the tools runs every verb and never calls apt.
//! On a Debian-like host as root what is missing is installed, one announced and verified step
//! at a time; anywhere else each missing piece is named with its Debian/Ubuntu and Fedora
//! package. `--no-setup` (`XTASK_NO_SETUP=1`) skips all of it.

mod backports;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use std::time::Instant;

use anyhow::Result;

use crate::arch::{Arch, ARCHES};
use crate::cli::{BenchArgs, KernelArgs, RunArgs, UpstreamArgs, VmArgs};
use crate::results::book::{CargoTool, MDBOOK};
use crate::results::tools::{PyTool, ACTIONLINT, KCIDB_IO};
use crate::support::cmd::{cmd, sh, succeeds, text, StepLog};
use crate::support::exit::{error, Kind};
use crate::support::progress::line;
use crate::vm::initramfs::{clients_run_by, CLIENTS};
use backports::{add_backports_source, backports_configured, BACKPORTS_FILE};

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
    /// A headless browser (chromium) that renders the HTML report: `cargo xtask test` only, not
    /// `setup`, which leaves a few hundred megabytes a run never needs out.
    pub browser: bool,
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
            browser: false,
        }
    }

    /// What `cargo xtask test` needs: everything, and the browser its report check uses.
    pub fn tests() -> Needs {
        Needs { browser: true, ..Needs::everything() }
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

/// How to tell a piece is there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Probe {
    /// An executable on PATH.
    Program(String),
    /// The arch's QEMU, in `XTASK_QEMU_DIR` or on PATH (as `qemu.rs` looks for it).
    Qemu(&'static Arch),
    /// A header the compiler finds (`cc -E`).
    Header {
        cc: String,
        header: &'static str,
    },
    /// `cc -print-file-name=libc.a` names a real file.
    StaticLibc {
        cc: String,
    },
    /// The Rust toolchain has the target's standard library.
    RustTarget(&'static str),
    File(PathBuf),
    Virtiofsd,
    /// A pinned Python package in its virtualenv.
    Venv(&'static PyTool),
    /// A pinned Rust program in its folder in the cache.
    Cargo(&'static CargoTool),
}

/// Where a piece comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A distribution package, by its Debian/Ubuntu name ([`fedora`] gives Fedora's).
    Package(&'static str),
    /// `rustup target add`.
    RustTarget(&'static str),
    /// `cargo install virtiofsd` (Fedora packages it).
    Virtiofsd,
    /// Its virtualenv in the cache.
    Venv(&'static PyTool),
    /// `cargo install --root` into its folder in the cache.
    Cargo(&'static CargoTool),
}

/// One piece a command needs: what it is (as a person names it), what for, how it is checked
/// and where it comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    pub what: String,
    pub why: String,
    pub probe: Probe,
    pub source: Source,
}

/// Fedora's name for a Debian package, or why there is none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fedora {
    Package(&'static str),
    NotPackaged(&'static str),
}

const CROSS_LIBC: &str = "not packaged (Fedora's cross compilers build kernels only); use --arch x86_64, \
                          leave the client scenarios out (--filter '!clients/*'), or a Debian container";

/// The Fedora package for each Debian package this project names.
pub fn fedora(debian: &'static str) -> Fedora {
    match debian {
        "libc6-dev" => Fedora::Package("glibc-static"),
        "xz-utils" => Fedora::Package("xz"),
        "libelf-dev" => Fedora::Package("elfutils-libelf-devel"),
        "libssl-dev" => Fedora::Package("openssl-devel"),
        "qemu-system-x86" => Fedora::Package("qemu-system-x86"),
        "qemu-system-arm" => Fedora::Package("qemu-system-aarch64"),
        "gcc-aarch64-linux-gnu" => Fedora::Package("gcc-aarch64-linux-gnu"),
        "qemu-system-s390x" => Fedora::Package("qemu-system-s390x"),
        "qemu-system-riscv" => Fedora::Package("qemu-system-riscv"),
        "gcc-s390x-linux-gnu" => Fedora::Package("gcc-s390x-linux-gnu"),
        "gcc-riscv64-linux-gnu" => Fedora::Package("gcc-riscv64-linux-gnu"),
        "libc6-dev-arm64-cross" | "libc6-dev-armhf-cross" | "libc6-dev-riscv64-cross" => {
            Fedora::NotPackaged(CROSS_LIBC)
        }
        "libc6-dev-s390x-cross" => Fedora::NotPackaged(
            "not packaged (Fedora's cross compilers build kernels only), and s390x's guest agent itself is static \
             glibc: leave s390x out (--arch x86_64,arm64,riscv64) or use a Debian container",
        ),
        "gcc-arm-linux-gnueabihf" => Fedora::NotPackaged(
            "not packaged (gcc-arm-linux-gnu has another prefix and no C library); use --arch x86_64, \
             leave the client scenarios out (--filter '!clients/*'), or a Debian container",
        ),
        "apt" => Fedora::NotPackaged("not usable; download linux-source-X yourself and pass --kernel-tarball"),
        "dpkg" => Fedora::Package("dpkg"),
        "python3-venv" => Fedora::Package("python3"),
        "libseccomp-dev" => Fedora::Package("libseccomp-devel"),
        "libcap-ng-dev" => Fedora::Package("libcap-ng-devel"),
        "pkg-config" => Fedora::Package("pkgconf-pkg-config"),
        p if p == crate::kernel::source::DEBIAN_PACKAGE => {
            Fedora::NotPackaged("not packaged; pass --kernel-src DIR, --kernel-tarball FILE or --kernel-image FILE")
        }
        // gcc make flex bison bc cpio rsync patch git python3 tar: the same name.
        same => Fedora::Package(same),
    }
}

/// What a Rust target a guest binary is built for needs: the target itself and, for static
/// glibc, the linker cargo uses (the target's own, or the host `cc`) and that linker's libc.a.
fn target_needs(t: &crate::arch::HelperTarget, why: String) -> Vec<(String, String, Probe, Source)> {
    let mut v = vec![(
        format!("rust target {}", t.triple),
        why.clone(),
        Probe::RustTarget(t.triple),
        Source::RustTarget(t.triple),
    )];
    if t.static_glibc {
        let cc = if t.linker.is_empty() { "cc" } else { t.linker };
        v.push((cc.into(), why.clone(), Probe::Program(cc.into()), Source::Package(t.packages[0])));
        v.push((
            format!("static glibc for {cc} (libc.a)"),
            why,
            Probe::StaticLibc { cc: cc.into() },
            Source::Package(t.packages[1]),
        ));
    }
    v
}

/// Every piece `needs` asks for, each once (the first reason wins).
pub fn items(n: &Needs) -> Vec<Item> {
    let mut v = Items::default();
    kernel_build_items(n, &mut v);
    source_items(n, &mut v);
    guest_items(n, &mut v);
    host_tool_items(n, &mut v);
    v.0
}

/// The items found so far, each once: the first reason for a piece wins.
#[derive(Default)]
struct Items(Vec<Item>);

impl Items {
    fn add(&mut self, what: String, why: String, probe: Probe, source: Source) {
        if !self.0.iter().any(|i| i.what == what) {
            self.0.push(Item { what, why, probe, source });
        }
    }
}

/// A program found on the `PATH`.
fn program(name: &str) -> Probe {
    Probe::Program(name.to_string())
}

/// What configuring and building a kernel takes: the compilers, the build tools, the
/// compression of the images and the headers of the build's host programs.
fn kernel_build_items(n: &Needs, v: &mut Items) {
    let mut add = |what: String, why: String, probe: Probe, source: Source| v.add(what, why, probe, source);
    if n.kernel != KernelWork::None {
        let kb = "the kernel build";
        add("gcc".into(), format!("host programs of {kb}"), program("gcc"), Source::Package("gcc"));
        for arch in &n.arches {
            let cc = arch.compiler();
            let why = format!("the {} kernel build", arch.name);
            add(cc.clone(), why, Probe::Program(cc), Source::Package(arch.compiler_package));
        }
        for (tool, why) in
            [("make", kb), ("flex", "kconfig"), ("bison", "kconfig"), ("rsync", "the private source mirror")]
        {
            add(tool.into(), why.into(), program(tool), Source::Package(tool_package(tool)));
        }
        if n.kernel == KernelWork::Build {
            add("bc".into(), format!("timeconst in {kb}"), program("bc"), Source::Package("bc"));
            for arch in &n.arches {
                for (tool, package) in arch.image_tools {
                    let why = format!("the {} kernel image's compression", arch.name);
                    add((*tool).into(), why, program(tool), Source::Package(package));
                }
            }
            let header = |h: &'static str| Probe::Header { cc: "gcc".into(), header: h };
            add("gelf.h".into(), format!("objtool in {kb}"), header("gelf.h"), Source::Package("libelf-dev"));
            let why = format!("sign-file in {kb}");
            add("openssl/evp.h".into(), why, header("openssl/evp.h"), Source::Package("libssl-dev"));
        }
    }
}

/// What getting the kernel source takes: unpacking a tarball, the default source's package,
/// the private apt of `--kernel-version`, `--patch` and a git tree.
fn source_items(n: &Needs, v: &mut Items) {
    let mut add = |what: String, why: String, probe: Probe, source: Source| v.add(what, why, probe, source);
    if n.tarball {
        for tool in ["tar", "xz"] {
            add(tool.into(), "unpacking the kernel source".into(), program(tool), Source::Package(tool_package(tool)));
        }
    }
    if n.default_source {
        let path = crate::kernel::source::DEBIAN_TARBALL;
        let why = "the default kernel source (--kernel-src, --kernel-tarball or --kernel-image do without)";
        add(path.into(), why.into(), Probe::File(path.into()), Source::Package(crate::kernel::source::DEBIAN_PACKAGE));
    }
    if n.debian_download {
        for (tool, pkg) in [("apt-get", "apt"), ("dpkg-deb", "dpkg")] {
            add(
                tool.into(),
                "--kernel-version (a private apt configuration)".into(),
                program(tool),
                Source::Package(pkg),
            );
        }
    }
    if n.patch {
        add("patch".into(), "--patch".into(), program("patch"), Source::Package("patch"));
    }
    if n.git {
        add("git".into(), "a git --kernel-src".into(), program("git"), Source::Package("git"));
    }
}

/// What booting takes: QEMU, the guest agent's target, virtio-fs, and the targets of the
/// guest clients the plans run.
fn guest_items(n: &Needs, v: &mut Items) {
    let mut add = |what: String, why: String, probe: Probe, source: Source| v.add(what, why, probe, source);
    if n.boot {
        for arch in &n.arches {
            // With `XTASK_QEMU_DIR` the user brings their own QEMU: no package would put it
            // there, so a missing one is `qemu.rs`'s error (naming the binary and the package).
            if std::env::var_os("XTASK_QEMU_DIR").is_none() {
                let why = format!("booting {}", arch.name);
                add(arch.qemu_binary.into(), why, Probe::Qemu(arch), Source::Package(arch.qemu_package));
            }
            for (what, why, probe, source) in
                target_needs(&arch.agent_target, format!("the guest agent for {}", arch.name))
            {
                add(what, why, probe, source);
            }
        }
    }
    if n.virtiofsd {
        add("virtiofsd".into(), "--share (virtio-fs)".into(), Probe::Virtiofsd, Source::Virtiofsd);
    }
    for arch in &n.arches {
        for client in CLIENTS.iter().filter(|c| n.clients.contains(&c.package)) {
            // An arch without a build of this client skips the scenarios that run it.
            let Ok(t) = (client.target)(arch) else { continue };
            for (what, why, probe, source) in target_needs(t, format!("{} for {}", client.package, arch.name)) {
                add(what, why, probe, source);
            }
        }
    }
}

/// The host's tools around a run: static C programs, gcov for a coverage kernel, the
/// reports' consumers, a browser and the unit tests' programs.
fn host_tool_items(n: &Needs, v: &mut Items) {
    let mut add = |what: String, why: String, probe: Probe, source: Source| v.add(what, why, probe, source);
    if n.static_c {
        for arch in &n.arches {
            let cc = arch.compiler();
            let why = format!("static C programs for {} (upstream selftests, the bench floor)", arch.name);
            add(cc.clone(), why.clone(), Probe::Program(cc.clone()), Source::Package(arch.compiler_package));
            let libc = arch.glibc_target.packages[1];
            add(format!("static glibc for {cc} (libc.a)"), why, Probe::StaticLibc { cc }, Source::Package(libc));
        }
    }
    if n.coverage {
        for arch in &n.arches {
            let cc = arch.compiler();
            let gcov = format!("{}gcov", cc.strip_suffix("gcc").unwrap_or(""));
            let why = format!("reading the {} coverage kernel's counters", arch.name);
            add(gcov.clone(), why, Probe::Program(gcov), Source::Package(arch.compiler_package));
        }
    }
    if n.consumers {
        add("python3".into(), "the kernel's kunit.py".into(), program("python3"), Source::Package("python3"));
        let why = "the coverage tracefiles' reader (lcov --summary)";
        add("lcov".into(), why.into(), program("lcov"), Source::Package("lcov"));
        for tool in [&KCIDB_IO, &ACTIONLINT] {
            add(tool.label(), tool.why.into(), Probe::Venv(tool), Source::Venv(tool));
        }
        add(MDBOOK.label(), MDBOOK.why.into(), Probe::Cargo(&MDBOOK), Source::Cargo(&MDBOOK));
    }
    if n.browser {
        let why = "rendering report.html headless in cargo xtask test";
        add("chromium".into(), why.into(), program("chromium"), Source::Package("chromium"));
    }
    if n.unit_tests {
        for tool in ["cpio", "git", "patch"] {
            add(tool.into(), "cargo test --workspace".into(), program(tool), Source::Package(tool));
        }
    }
}

/// The Debian package of a build tool (its own name but for xz).
fn tool_package(tool: &'static str) -> &'static str {
    if tool == "xz" {
        "xz-utils"
    } else {
        tool
    }
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

/// The pieces of `items` this host lacks.
pub fn missing(items: &[Item]) -> Vec<Item> {
    let sysroot = OnceLock::new();
    items.iter().filter(|i| !present(&i.probe, &sysroot)).cloned().collect()
}

fn present(probe: &Probe, sysroot: &OnceLock<Option<PathBuf>>) -> bool {
    match probe {
        Probe::Program(name) => on_path(name).is_some(),
        Probe::Qemu(arch) => crate::vm::qemu::qemu_binary(arch, crate::vm::qemu::qemu_search_path().as_deref()).is_ok(),
        Probe::Header { cc, header } => compiler_finds(cc, header),
        Probe::StaticLibc { cc } => static_libc(cc).is_some(),
        Probe::RustTarget(t) => sysroot
            .get_or_init(rust_sysroot)
            .as_ref()
            .is_some_and(|s| s.join("lib/rustlib").join(t).join("lib").is_dir()),
        Probe::File(path) => path.is_file(),
        Probe::Virtiofsd => crate::vm::virtiofsd::binary().is_some(),
        Probe::Venv(tool) => tool.installed(),
        Probe::Cargo(tool) => tool.installed(),
    }
}

fn on_path(name: &str) -> Option<PathBuf> {
    crate::vm::qemu::find_program(name, std::env::var_os("PATH").as_deref())
}

/// Whether `cc` preprocesses `#include <header>`.
fn compiler_finds(cc: &str, header: &str) -> bool {
    let Ok(sh) = sh() else { return false };
    succeeds(cmd!(sh, "{cc} -E -x c - -o /dev/null").stdin(format!("#include <{header}>\n")))
}

/// The static C library `cc` links with `-static`: `-print-file-name` answers the bare name
/// when it has none.
fn static_libc(cc: &str) -> Option<PathBuf> {
    let sh = sh().ok()?;
    let path = PathBuf::from(text(cmd!(sh, "{cc} -print-file-name=libc.a")).ok()?);
    (path.is_absolute() && path.is_file()).then_some(path)
}

/// The sysroot of the Rust toolchain this checkout builds with.
fn rust_sysroot() -> Option<PathBuf> {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let sh = sh().ok()?;
    // In the checkout, so its rust-toolchain file (if any) picks the toolchain.
    sh.change_dir(crate::support::checkout::project_root());
    text(cmd!(sh, "{rustc} --print sysroot")).ok().map(PathBuf::from)
}

/// Whether `python3 -m venv` can make the tools' virtualenvs (Debian splits it into python3-venv).
fn venv_works() -> bool {
    sh().is_ok_and(|sh| succeeds(cmd!(sh, "python3 -c 'import ensurepip, venv'")))
}

/// Whether `cargo install virtiofsd` finds the C libraries it links.
fn virtiofsd_builds() -> bool {
    sh().is_ok_and(|sh| succeeds(cmd!(sh, "pkg-config --exists libseccomp libcap-ng")))
}

#[derive(Debug)]
struct Host {
    debian_like: bool,
    codename: String,
    root: bool,
    apt: bool,
}

fn host() -> Host {
    let os = std::fs::read_to_string("/etc/os-release").unwrap_or_default();
    let field = |name: &str| {
        os.lines()
            .find_map(|l| l.strip_prefix(&format!("{name}=")))
            .map(|v| v.trim_matches('"').to_string())
            .unwrap_or_default()
    };
    let debian_like = field("ID") == "debian" || field("ID") == "ubuntu" || field("ID_LIKE").contains("debian");
    // The effective uid is the second field of the `Uid:` line.
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let euid = status.lines().find_map(|l| l.strip_prefix("Uid:")).and_then(|l| l.split_whitespace().nth(1));
    Host {
        debian_like,
        codename: field("VERSION_CODENAME"),
        root: euid == Some("0"),
        apt: on_path("apt-get").is_some(),
    }
}

/// What the install hints depend on besides the missing pieces.
#[derive(Debug, Clone, Default)]
pub struct Hints {
    /// Debian 12: QEMU comes from bookworm-backports; `Some(true)` when its apt source exists.
    pub bookworm_backports: Option<bool>,
}

impl Hints {
    pub fn here() -> Hints {
        let bookworm = host().codename == "bookworm";
        Hints { bookworm_backports: bookworm.then(backports_configured) }
    }
}

fn qemu_packages() -> Vec<&'static str> {
    ARCHES.iter().map(|a| a.qemu_package).collect()
}

/// Where a piece comes from, for its line in the report.
fn origin(source: &Source) -> String {
    match source {
        Source::Package(deb) => match fedora(deb) {
            Fedora::Package(f) => format!("Debian/Ubuntu {deb}, Fedora {f}"),
            Fedora::NotPackaged(why) => format!("Debian/Ubuntu {deb}; Fedora: {why}"),
        },
        Source::RustTarget(t) => format!("rustup target add {t}"),
        Source::Virtiofsd => "Fedora virtiofsd; elsewhere cargo install virtiofsd --locked \
                              (Debian/Ubuntu: with libseccomp-dev libcap-ng-dev pkg-config)"
            .into(),
        Source::Venv(_) => "a virtualenv in the cache, made by `cargo xtask setup` as any user \
                          (Debian/Ubuntu: needs python3-venv)"
            .into(),
        Source::Cargo(_) => "cargo install into the cache, by `cargo xtask setup` as any user".into(),
    }
}

/// The missing pieces, one line each with its Debian/Ubuntu and Fedora package, then the
/// commands that install them.
pub fn report(missing: &[Item], hints: &Hints) -> String {
    let mut out: Vec<String> =
        missing.iter().map(|i| format!("  {} ({}): {}", i.what, i.why, origin(&i.source))).collect();
    out.push("to install them:".into());
    out.extend(commands(missing, hints).into_iter().map(|c| format!("  {c}")));
    out.push("or, on a host prepared another way, skip provisioning with --no-setup (XTASK_NO_SETUP=1)".into());
    out.join("\n")
}

/// Debian packages: QEMU from bookworm-backports on Debian 12, the rest from the release.
fn debian_packages(missing: &[Item], bookworm: bool) -> (Vec<&'static str>, Vec<&'static str>) {
    let mut backports = Vec::new();
    let mut release = Vec::new();
    for item in missing {
        if let Source::Package(p) = item.source {
            let list = if bookworm && qemu_packages().contains(&p) { &mut backports } else { &mut release };
            if !list.contains(&p) {
                list.push(p);
            }
        }
    }
    (backports, release)
}

/// The commands that install what is missing, as a person would type them.
fn commands(missing: &[Item], hints: &Hints) -> Vec<String> {
    let mut cmds = Vec::new();
    let (backports, release) = debian_packages(missing, hints.bookworm_backports.is_some());
    if !backports.is_empty() && hints.bookworm_backports == Some(false) {
        cmds.push(format!(
            "Debian 12: printf 'Types: deb\\nURIs: <your Debian mirror>\\nSuites: bookworm-backports\\nComponents: main\\n' | sudo tee {BACKPORTS_FILE}"
        ));
    }
    if !backports.is_empty() || !release.is_empty() {
        cmds.push("Debian/Ubuntu: sudo apt-get update".into());
    }
    if !backports.is_empty() {
        cmds.push(format!(
            "Debian 12: sudo apt-get install -y --no-install-recommends -t bookworm-backports {}",
            backports.join(" ")
        ));
    }
    if !release.is_empty() {
        cmds.push(format!("Debian/Ubuntu: sudo apt-get install -y --no-install-recommends {}", release.join(" ")));
    }
    let mut fedora_pkgs: Vec<&str> = Vec::new();
    for item in missing {
        let f = match item.source {
            Source::Package(p) => fedora(p),
            Source::Virtiofsd => Fedora::Package("virtiofsd"),
            _ => continue,
        };
        if let Fedora::Package(f) = f {
            if !fedora_pkgs.contains(&f) {
                fedora_pkgs.push(f);
            }
        }
    }
    if !fedora_pkgs.is_empty() {
        cmds.push(format!("Fedora: sudo dnf install {}", fedora_pkgs.join(" ")));
    }
    let targets: Vec<&str> =
        missing.iter().filter_map(|i| if let Source::RustTarget(t) = i.source { Some(t) } else { None }).collect();
    if !targets.is_empty() {
        cmds.push(format!("rustup target add {}", targets.join(" ")));
    }
    if missing.iter().any(|i| i.source == Source::Virtiofsd) {
        cmds.push("Debian/Ubuntu: cargo install virtiofsd --locked".into());
    }
    for item in missing {
        match item.source {
            Source::Venv(tool) => cmds.extend(tool.install_commands()),
            Source::Cargo(tool) => cmds.extend(tool.install_commands()),
            _ => {}
        }
    }
    cmds
}

/// Checks, installs what is missing when it can, and verifies.
pub fn provision(needs: &Needs, verbose: bool) -> Result<()> {
    let started = Instant::now();
    let items = items(needs);
    let missing = missing(&items);
    let arches: Vec<&str> = needs.arches.iter().map(|a| a.name).collect();
    if missing.is_empty() {
        if verbose {
            line(format!(
                "setup: everything present ({} pieces for {}) in {:.2} s",
                items.len(),
                arches.join(", "),
                started.elapsed().as_secs_f64()
            ));
        }
        return Ok(());
    }
    let host = host();
    let wanted = wanted_packages(&missing);
    let rust_targets: Vec<&str> =
        missing.iter().filter_map(|i| if let Source::RustTarget(t) = i.source { Some(t) } else { None }).collect();
    let no_rustup = !rust_targets.is_empty() && on_path("rustup").is_none();
    let can_apt = host.root && host.debian_like && host.apt;
    if (!wanted.is_empty() && !can_apt) || no_rustup {
        return Err(cannot_install(&host, no_rustup, &missing, wanted, &arches));
    }
    install(&host, &missing, &wanted, &rust_targets)?;
    let after = self::missing(&items);
    if !after.is_empty() {
        return Err(error(
            Kind::Infra,
            format!("setup: still missing after installing:\n{}", report(&after, &Hints::here())),
        ));
    }
    line(format!("setup: verified, everything present ({:.0} s)", started.elapsed().as_secs_f64()));
    Ok(())
}

/// The distribution packages to install: the missing pieces' own, and what the user-level
/// steps need (virtiofsd's build, a Python venv).
fn wanted_packages(missing: &[Item]) -> Vec<Item> {
    let mut wanted: Vec<Item> = missing.iter().filter(|i| matches!(i.source, Source::Package(_))).cloned().collect();
    let prerequisite = |what: &str, pkg: &'static str| Item {
        what: what.into(),
        why: "installing the pieces above".into(),
        probe: Probe::Program(what.into()),
        source: Source::Package(pkg),
    };
    if missing.iter().any(|i| i.source == Source::Virtiofsd) && !virtiofsd_builds() {
        for pkg in ["libseccomp-dev", "libcap-ng-dev", "pkg-config"] {
            wanted.push(prerequisite(pkg, pkg));
        }
    }
    if missing.iter().any(|i| matches!(i.source, Source::Venv(_))) && !venv_works() {
        wanted.push(prerequisite("python3-venv", "python3-venv"));
    }
    wanted
}

/// Why nothing was installed on this host, with every missing piece and its packages.
fn cannot_install(host: &Host, no_rustup: bool, missing: &[Item], wanted: Vec<Item>, arches: &[&str]) -> anyhow::Error {
    let why = if no_rustup {
        "rustup is not on PATH to add the Rust targets"
    } else if !host.debian_like {
        "this is not a Debian-like system"
    } else if !host.root {
        "not running as root"
    } else {
        "apt-get is not on PATH"
    };
    let mut all = missing.to_vec();
    all.extend(wanted.into_iter().filter(|w| !missing.contains(w)));
    error(
        Kind::Infra,
        format!(
            "setup: this command ({}) needs what this host lacks, and {why}, so nothing was installed:\n{}",
            arches.join(", "),
            report(&all, &Hints::here())
        ),
    )
}

/// Installs, one announced and logged step at a time: the Debian packages (QEMU from
/// bookworm-backports on Debian 12, its source added if need be), the Rust targets, virtiofsd,
/// the Python tools, the Rust tools.
fn install(host: &Host, missing: &[Item], wanted: &[Item], rust_targets: &[&str]) -> Result<()> {
    let bookworm = host.codename == "bookworm";
    let (backports, release) = debian_packages(wanted, bookworm);
    let mut log = StepLog::new(log_path());
    line(format!("setup: installing what is missing; the tools' output goes to {}", log.path().display()));
    if !backports.is_empty() && !backports_configured() {
        add_backports_source()?;
    }
    let sh = sh()?;
    let apt = |args: &[&str]| {
        let mut all = vec!["-q"];
        all.extend(args);
        cmd!(sh, "apt-get {all...}").env("DEBIAN_FRONTEND", "noninteractive")
    };
    if !backports.is_empty() || !release.is_empty() {
        log.step("setup: apt-get update", apt(&["update"]))?;
    }
    if !backports.is_empty() {
        let mut args = vec!["install", "-y", "--no-install-recommends", "-t", "bookworm-backports"];
        args.extend(&backports);
        log.step(&format!("setup: installing from bookworm-backports: {}", backports.join(" ")), apt(&args))?;
    }
    if !release.is_empty() {
        let mut args = vec!["install", "-y", "--no-install-recommends"];
        args.extend(&release);
        log.step(&format!("setup: installing {}", release.join(" ")), apt(&args))?;
    }
    if !rust_targets.is_empty() {
        let label = format!("setup: rustup target add {}", rust_targets.join(" "));
        log.step(&label, cmd!(sh, "rustup target add {rust_targets...}"))?;
    }
    if missing.iter().any(|i| i.source == Source::Virtiofsd) {
        let label = "setup: cargo install virtiofsd --locked (a few minutes on 2 cores)";
        log.step(label, cmd!(sh, "cargo install virtiofsd --locked"))?;
    }
    for item in missing {
        match item.source {
            Source::Venv(tool) => tool.install(&mut log)?,
            Source::Cargo(tool) => tool.install(&mut log)?,
            _ => {}
        }
    }
    Ok(())
}

/// Where this setup's tools write: `<cache>/logs/setup-<date>-<time>.log`.
fn log_path() -> PathBuf {
    let stamp = jiff::Zoned::now().strftime("%Y%m%d-%H%M%S").to_string();
    crate::kernel::cache::root(None).join("logs").join(format!("setup-{stamp}.log"))
}

#[cfg(test)]
mod tests;
