//! Per-architecture facts as data: one table row per supported guest arch.

use anyhow::{bail, Result};

/// Everything that differs between guest architectures, chosen at run time.
#[derive(Debug, PartialEq, Eq)]
pub struct Arch {
    /// The name users type (`--arch x86_64`) and the results use.
    pub name: &'static str,
    /// The kernel's `ARCH=` value.
    pub linux_arch: &'static str,
    /// The `CROSS_COMPILE=` prefix, empty for a native build.
    pub cross_compile: &'static str,
    /// The Debian package that provides `{cross_compile}gcc`.
    pub compiler_package: &'static str,
    /// The make target that produces the bootable image.
    pub image_target: &'static str,
    /// The image path relative to the build directory.
    pub image_path: &'static str,
    /// Programs the image target runs beyond the toolchain (the compressor the arch's fragment
    /// chooses for a self-decompressing image), each with its Debian package.
    pub image_tools: &'static [(&'static str, &'static str)],
    /// The per-arch fragment in `kernel-configs/`.
    pub fragment: &'static str,
    /// The QEMU system emulator and the Debian package that provides it.
    pub qemu_binary: &'static str,
    pub qemu_package: &'static str,
    /// The target the guest agent is built for: static musl where Rust ships a musl target with
    /// std for the arch, static glibc otherwise.
    pub agent_target: HelperTarget,
    /// Static glibc, for guest clients whose crates do not build on musl (the `tracepoint`
    /// crate: `libc::ioctl`'s request is a `c_int` there).
    pub glibc_target: HelperTarget,
    /// A 32-bit target this arch's kernel runs as compat processes (catalogue M1), or why there
    /// is none (the scenarios that run it are then skipped on this arch with that reason).
    pub compat32_target: Result<HelperTarget, &'static str>,
    /// QEMU machine (and its options), CPU under TCG, and the serial console's name.
    pub qemu_machine: &'static str,
    pub qemu_cpu_tcg: &'static str,
    pub console: &'static str,
    /// The suffix of the machine's virtio device models: `device` (virtio-mmio:
    /// `virtio-serial-device`, `vhost-user-fs-device`) or `ccw` (s390's channel I/O).
    pub virtio_bus: &'static str,
    /// QEMU arguments for the firmware the machine needs before the kernel (none: the kernel
    /// is loaded directly).
    pub qemu_firmware: &'static [&'static str],
    /// `e_machine` of the arch's ELF executables (`exec` checks a binary against it).
    pub elf_machine: u16,
    /// Most significant byte first (s390x): enable words, records and samples are read in
    /// the guest's own byte order.
    pub big_endian: bool,
    /// Where the image format puts its magic (`--kernel-image` tells arches apart with it).
    pub image_magic: (usize, &'static [u8]),
    /// Kernel command-line options this arch needs beyond the common ones.
    pub cmdline: &'static str,
    /// The guest architecture as `uname -m` and the C cross compiler prefix for static test
    /// binaries (the floor /init).
    pub uname_machine: &'static str,
}

/// A Rust target a guest client binary is built for, and what links it statically.
#[derive(Debug, PartialEq, Eq)]
pub struct HelperTarget {
    /// The Rust target triple (`rustup target add`).
    pub triple: &'static str,
    /// The linker cargo is told to use (`CARGO_TARGET_<TRIPLE>_LINKER`); empty: the target's
    /// default (the host `cc`).
    pub linker: &'static str,
    /// Link glibc statically (`-C target-feature=+crt-static`); musl targets are static anyway.
    pub static_glibc: bool,
    /// The Debian packages that provide the linker and the static C library.
    pub packages: &'static [&'static str],
}

impl HelperTarget {
    /// The `CARGO_TARGET_<TRIPLE>_` prefix of cargo's per-target environment variables.
    pub fn cargo_env_prefix(&self) -> String {
        format!("CARGO_TARGET_{}_", self.triple.to_uppercase().replace(['-', '.'], "_"))
    }
}

impl Arch {
    /// The C compiler the kernel build uses for this arch.
    pub fn compiler(&self) -> String {
        format!("{}gcc", self.cross_compile)
    }

    /// `ARCH=` and, when cross-compiling, `CROSS_COMPILE=` make arguments.
    pub fn make_vars(&self) -> Vec<String> {
        let mut vars = vec![format!("ARCH={}", self.linux_arch)];
        if !self.cross_compile.is_empty() {
            vars.push(format!("CROSS_COMPILE={}", self.cross_compile));
        }
        vars
    }
}

pub const ARCHES: &[Arch] = &[
    Arch {
        name: "x86_64",
        linux_arch: "x86",
        cross_compile: "",
        compiler_package: "gcc",
        image_target: "bzImage",
        image_path: "arch/x86/boot/bzImage",
        image_tools: &[("lz4", "lz4")],
        fragment: "x86_64.config",
        qemu_binary: "qemu-system-x86_64",
        qemu_package: "qemu-system-x86",
        agent_target: MUSL_X86_64,
        glibc_target: HelperTarget {
            triple: "x86_64-unknown-linux-gnu",
            linker: "",
            static_glibc: true,
            packages: &["gcc", "libc6-dev"],
        },
        // musl ships its C library and start files inside rust-std; rust-lld links it.
        compat32_target: Ok(HelperTarget {
            triple: "i686-unknown-linux-musl",
            linker: "rust-lld",
            static_glibc: false,
            packages: &[],
        }),
        // microvm boots fastest under TCG (no PCI, firmware is qboot). With acpi=off QEMU
        // lists the virtio-mmio devices on the kernel command line (auto-kernel-cmdline);
        // with ACPI on it describes them only in ACPI tables, which a tiny kernel lacks.
        qemu_machine: "microvm,acpi=off",
        qemu_cpu_tcg: "max",
        console: "ttyS0",
        virtio_bus: "device",
        qemu_firmware: &[],
        // Triple-fault reboot: microvm has no keyboard controller or ACPI to reset through.
        // no_timer_check: the boot-time check that the IO-APIC timer ticks within a short
        // delay fails when TCG's vCPU gets no host CPU for a moment (2 busy cores), and the
        // kernel panics "IO-APIC + timer doesn't work!" before /init (seen in a debug-profile
        // boot, load average 7); QEMU's timer does work.
        cmdline: "reboot=t no_timer_check",
        uname_machine: "x86_64",
        elf_machine: 62,
        big_endian: false,
        // The setup header's "HdrS" (Documentation/arch/x86/boot.rst).
        image_magic: (0x202, b"HdrS"),
    },
    Arch {
        name: "arm64",
        linux_arch: "arm64",
        cross_compile: "aarch64-linux-gnu-",
        compiler_package: "gcc-aarch64-linux-gnu",
        image_target: "Image",
        image_path: "arch/arm64/boot/Image",
        image_tools: &[],
        fragment: "arm64.config",
        qemu_binary: "qemu-system-aarch64",
        qemu_package: "qemu-system-arm",
        agent_target: MUSL_AARCH64,
        glibc_target: HelperTarget {
            triple: "aarch64-unknown-linux-gnu",
            linker: "aarch64-linux-gnu-gcc",
            static_glibc: true,
            packages: &["gcc-aarch64-linux-gnu", "libc6-dev-arm64-cross"],
        },
        // Static glibc rather than armv7-unknown-linux-musleabihf: that target's rust-std
        // answered HTTP 404 to `rustup target add` on this project's machines (Rust 1.95).
        compat32_target: Ok(HelperTarget {
            triple: "armv7-unknown-linux-gnueabihf",
            linker: "arm-linux-gnueabihf-gcc",
            static_glibc: true,
            packages: &["gcc-arm-linux-gnueabihf", "libc6-dev-armhf-cross"],
        }),
        qemu_machine: "virt",
        // Pointer authentication with QEMU's own cheap algorithm: the architected one is
        // slow under TCG (the KUnit qemu_config does the same).
        qemu_cpu_tcg: "max,pauth-impdef=on",
        console: "ttyAMA0",
        virtio_bus: "device",
        qemu_firmware: &[],
        // memfd_secret() (the `memory: secret` step) works only where the linear map can be
        // changed page by page (can_set_direct_map()): rodata=full. 6.12 defaults to it only
        // with CONFIG_RODATA_FULL_DEFAULT_ENABLED, an option later kernels dropped (full is
        // their default, and they warn that `full` is no longer a value, harmlessly).
        cmdline: "rodata=full",
        uname_machine: "aarch64",
        elf_machine: 183,
        big_endian: false,
        // The Image header's magic (Documentation/arch/arm64/booting.rst).
        image_magic: (0x38, b"ARM\x64"),
    },
    Arch {
        name: "s390x",
        linux_arch: "s390",
        cross_compile: "s390x-linux-gnu-",
        compiler_package: "gcc-s390x-linux-gnu",
        image_target: "bzImage",
        image_path: "arch/s390/boot/bzImage",
        image_tools: &[("lz4", "lz4")],
        fragment: "s390x.config",
        qemu_binary: "qemu-system-s390x",
        qemu_package: "qemu-system-s390x",
        // Rust has no s390x musl target with std (s390x-unknown-linux-musl is tier 3), so the
        // agent is static glibc like the tracepoint client.
        agent_target: GLIBC_S390X,
        glibc_target: GLIBC_S390X,
        compat32_target: Err("s390x runs 31-bit compat processes (CONFIG_COMPAT), but Rust has no 31-bit s390 target \
                              to build the compat32 client with"),
        // Channel I/O, no PCI: virtio devices are virtio-ccw; the kernel is loaded directly.
        qemu_machine: "s390-ccw-virtio",
        // TCG's own model (a z13-class subset): no host CPU to model.
        qemu_cpu_tcg: "qemu",
        // QEMU's first -serial is the SCLP VT220 console (`sclpconsole`), the kernel's ttysclp0.
        console: "ttysclp0",
        virtio_bus: "ccw",
        qemu_firmware: &[],
        cmdline: "",
        uname_machine: "s390x",
        elf_machine: 22,
        big_endian: true,
        // The entry point table QEMU's IPL code looks for (arch/s390/boot/head.S, EP_OFFSET).
        image_magic: (0x10008, b"S390EP"),
    },
    Arch {
        name: "riscv64",
        linux_arch: "riscv",
        cross_compile: "riscv64-linux-gnu-",
        compiler_package: "gcc-riscv64-linux-gnu",
        image_target: "Image",
        image_path: "arch/riscv/boot/Image",
        image_tools: &[],
        fragment: "riscv64.config",
        qemu_binary: "qemu-system-riscv64",
        qemu_package: "qemu-system-riscv",
        // Static glibc rather than riscv64gc-unknown-linux-musl: that target's rust-std is
        // `available = false` in Rust 1.95's channel manifest (`rustup target add` answers 404).
        agent_target: GLIBC_RISCV64,
        glibc_target: GLIBC_RISCV64,
        compat32_target: Err("riscv64 kernels can run 32-bit U-mode (CONFIG_COMPAT), but no RISC-V CPU in use \
                              implements it and Rust has no riscv32 Linux target with std to build the compat32 \
                              client with"),
        qemu_machine: "virt",
        qemu_cpu_tcg: "max",
        console: "ttyS0",
        virtio_bus: "device",
        // OpenSBI, which the kernel runs on in S-mode: QEMU's own copy (Debian's opensbi
        // package, a dependency of qemu-system-riscv).
        qemu_firmware: &["-bios", "default"],
        cmdline: "",
        uname_machine: "riscv64",
        elf_machine: 243,
        big_endian: false,
        // The Image header's magic2 (Documentation/arch/riscv/boot-image-header.rst).
        image_magic: (0x38, b"RSC\x05"),
    },
];

/// The agent's static musl targets: musl's C library and start files ship inside rust-std, and
/// rust-lld links them (no C cross toolchain needed).
const MUSL_X86_64: HelperTarget =
    HelperTarget { triple: "x86_64-unknown-linux-musl", linker: "", static_glibc: false, packages: &[] };
const MUSL_AARCH64: HelperTarget =
    HelperTarget { triple: "aarch64-unknown-linux-musl", linker: "rust-lld", static_glibc: false, packages: &[] };
const GLIBC_RISCV64: HelperTarget = HelperTarget {
    triple: "riscv64gc-unknown-linux-gnu",
    linker: "riscv64-linux-gnu-gcc",
    static_glibc: true,
    packages: &["gcc-riscv64-linux-gnu", "libc6-dev-riscv64-cross"],
};
const GLIBC_S390X: HelperTarget = HelperTarget {
    triple: "s390x-unknown-linux-gnu",
    linker: "s390x-linux-gnu-gcc",
    static_glibc: true,
    packages: &["gcc-s390x-linux-gnu", "libc6-dev-s390x-cross"],
};

/// What `--arch` means when it is not given (every verb but `setup` and `matrix`, which take
/// `all`): the two arches whose guests are fastest under TCG. On 2 cores `--arch all` takes
/// 2-3x as long as these two (BENCHMARKS.md), so the new arches are asked for by name.
pub const DEFAULT: &str = "x86_64,arm64";

/// Named sets of arches an `--arch` value may use besides single names: `all` is every row of
/// the table.
pub const SETS: &[(&str, &[&str])] = &[("all", &["x86_64", "arm64", "s390x", "riscv64"])];

/// Resolves an `--arch` value: a name (`x86_64`, `arm64`, `s390x`, `riscv64`, or an alias), a
/// set (`all`), or a comma-separated list of those. The arches come back once each, in table
/// order.
pub fn select(value: &str) -> Result<Vec<&'static Arch>> {
    let mut wanted: Vec<&str> = Vec::new();
    for part in value.split(',').map(str::trim) {
        if let Some((_, members)) = SETS.iter().find(|(name, _)| *name == part) {
            wanted.extend(members.iter());
            continue;
        }
        let canonical = match part {
            "x86_64" | "x86" | "amd64" => "x86_64",
            "arm64" | "aarch64" => "arm64",
            "s390x" | "s390" => "s390x",
            "riscv64" | "riscv" => "riscv64",
            other => bail!(
                "unknown architecture `{other}`: expected one of {}, {}, or a comma-separated list of them",
                ARCHES.iter().map(|a| a.name).collect::<Vec<_>>().join(", "),
                SETS.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
            ),
        };
        wanted.push(canonical);
    }
    Ok(ARCHES.iter().filter(|a| wanted.contains(&a.name)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aliases_sets_and_lists_resolve_to_the_table_rows() {
        let names = |v: &str| select(v).unwrap().iter().map(|a| a.name).collect::<Vec<_>>();
        assert_eq!(names("aarch64"), ["arm64"]);
        assert_eq!(names("amd64"), ["x86_64"]);
        assert_eq!(names("s390"), ["s390x"]);
        assert_eq!(names("riscv"), ["riscv64"]);
        assert_eq!(names("all"), ["x86_64", "arm64", "s390x", "riscv64"]);
        assert_eq!(select("all").unwrap().len(), ARCHES.len());
        // Lists come back in table order, each arch once.
        assert_eq!(names("riscv64,x86_64, s390x,amd64"), ["x86_64", "s390x", "riscv64"]);
        assert_eq!(names("all,s390x"), ["x86_64", "arm64", "s390x", "riscv64"]);
        assert_eq!(names(DEFAULT), ["x86_64", "arm64"]);
        let err = select("x86_64,ppc64").unwrap_err().to_string();
        assert_eq!(
            err,
            "unknown architecture `ppc64`: expected one of x86_64, arm64, s390x, riscv64, all, or a comma-separated \
             list of them"
        );
    }

    #[test]
    fn cross_builds_name_their_prefix() {
        let arm = select("arm64").unwrap()[0];
        assert_eq!(arm.compiler(), "aarch64-linux-gnu-gcc");
        assert_eq!(arm.make_vars(), ["ARCH=arm64", "CROSS_COMPILE=aarch64-linux-gnu-"]);
        assert_eq!(select("x86_64").unwrap()[0].make_vars(), ["ARCH=x86"]);
        assert_eq!(select("s390x").unwrap()[0].make_vars(), ["ARCH=s390", "CROSS_COMPILE=s390x-linux-gnu-"]);
        assert_eq!(select("riscv64").unwrap()[0].make_vars(), ["ARCH=riscv", "CROSS_COMPILE=riscv64-linux-gnu-"]);
    }

    #[test]
    fn helper_targets_name_their_cargo_variables() {
        let arm = select("arm64").unwrap()[0];
        assert_eq!(arm.glibc_target.cargo_env_prefix(), "CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_");
        let compat = arm.compat32_target.as_ref().unwrap();
        assert_eq!(compat.cargo_env_prefix(), "CARGO_TARGET_ARMV7_UNKNOWN_LINUX_GNUEABIHF_");
        for arch in ARCHES {
            if let Ok(t) = &arch.compat32_target {
                assert!(t.triple.starts_with("i686") || t.triple.starts_with("armv7"));
            }
            assert!(arch.glibc_target.triple.ends_with("-linux-gnu") && arch.glibc_target.static_glibc);
            // A static glibc target names the cross linker and the libc packages; musl needs none.
            for t in [&arch.agent_target, &arch.glibc_target] {
                assert_eq!(t.static_glibc, t.triple.ends_with("-gnu"), "{}", t.triple);
                assert_eq!(t.packages.len(), if t.static_glibc { 2 } else { 0 }, "{}", t.triple);
            }
        }
        // No Rust target to build a 31-bit s390 or a 32-bit RISC-V client: skipped, with why.
        for name in ["s390x", "riscv64"] {
            let why = select(name).unwrap()[0].compat32_target.as_ref().unwrap_err();
            assert!(why.contains("no") && why.contains("Rust"), "{why}");
        }
    }

    #[test]
    fn facts_that_differ_by_arch_are_rows_not_code() {
        let row = |n: &str| select(n).unwrap()[0];
        let s390 = row("s390x");
        assert!(s390.big_endian && ARCHES.iter().filter(|a| a.big_endian).count() == 1);
        assert_eq!((s390.virtio_bus, s390.console, s390.qemu_machine), ("ccw", "ttysclp0", "s390-ccw-virtio"));
        assert_eq!(row("riscv64").qemu_firmware, ["-bios", "default"]);
        let machines: Vec<u16> = ARCHES.iter().map(|a| a.elf_machine).collect();
        assert_eq!(machines, [62, 183, 22, 243]);
        assert_eq!(s390.agent_target.triple, "s390x-unknown-linux-gnu");
        assert_eq!(row("riscv64").agent_target.triple, "riscv64gc-unknown-linux-gnu");
    }
}
