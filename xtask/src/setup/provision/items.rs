//! What a set of needs asks of the host, piece by piece (`Item`): what it is, what for, how
//! its presence is probed and where it comes from (a Debian package and its Fedora name, a
//! Rust target, virtiofsd, a Python virtualenv).

use std::path::PathBuf;

use super::{KernelWork, Needs};
use crate::arch::Arch;
use crate::results::book::{CargoTool, MDBOOK};
use crate::results::tools::{PyTool, ACTIONLINT, KCIDB_IO};
use crate::vm::initramfs::CLIENTS;

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
    /// A PostgreSQL server's `initdb` and `pg_ctl`, which Debian keeps off PATH in
    /// `/usr/lib/postgresql/<major>/bin`.
    PostgresServer,
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
        "postgresql" => Fedora::Package("postgresql-server"),
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
            // A crash's frames resolved to source lines when the build has debug info.
            for tool in ["nm", "addr2line"] {
                let why = "a kernel report's frames to source lines".to_string();
                add(tool.into(), why, program(tool), Source::Package("binutils"));
            }
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
    if n.llvm {
        for (tool, package) in crate::kernel::knobs::LLVM_TOOLS {
            add(
                tool.to_string(),
                "an LLVM=1 kernel build (clang, lld)".into(),
                program(tool),
                Source::Package(package),
            );
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
    if n.postgres {
        let why = "the history store's check against a private PostgreSQL server (cargo xtask test)";
        add(
            "PostgreSQL server (initdb, pg_ctl)".into(),
            why.into(),
            Probe::PostgresServer,
            Source::Package("postgresql"),
        );
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
