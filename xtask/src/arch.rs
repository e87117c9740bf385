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
    /// The per-arch fragment in `kernel-configs/`.
    pub fragment: &'static str,
    /// The QEMU system emulator and the Debian package that provides it.
    pub qemu_binary: &'static str,
    pub qemu_package: &'static str,
    /// The Rust target the guest agent is built for.
    pub rust_target: &'static str,
    /// Static glibc, for guest clients whose crates do not build on musl (the `tracepoint`
    /// crate: `libc::ioctl`'s request is a `c_int` there).
    pub glibc_target: HelperTarget,
    /// A 32-bit target this arch's kernel runs as compat processes (catalogue M1).
    pub compat32_target: HelperTarget,
    /// QEMU machine (and its options), CPU under TCG, and the serial console's name.
    pub qemu_machine: &'static str,
    pub qemu_cpu_tcg: &'static str,
    pub console: &'static str,
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
        fragment: "x86_64.config",
        qemu_binary: "qemu-system-x86_64",
        qemu_package: "qemu-system-x86",
        rust_target: "x86_64-unknown-linux-musl",
        glibc_target: HelperTarget {
            triple: "x86_64-unknown-linux-gnu",
            linker: "",
            static_glibc: true,
            packages: &["gcc", "libc6-dev"],
        },
        // musl ships its C library and start files inside rust-std; rust-lld links it.
        compat32_target: HelperTarget {
            triple: "i686-unknown-linux-musl",
            linker: "rust-lld",
            static_glibc: false,
            packages: &[],
        },
        // microvm boots fastest under TCG (no PCI, firmware is qboot). With acpi=off QEMU
        // lists the virtio-mmio devices on the kernel command line (auto-kernel-cmdline);
        // with ACPI on it describes them only in ACPI tables, which a tiny kernel lacks.
        qemu_machine: "microvm,acpi=off",
        qemu_cpu_tcg: "max",
        console: "ttyS0",
        // Triple-fault reboot: microvm has no keyboard controller or ACPI to reset through.
        cmdline: "reboot=t",
        uname_machine: "x86_64",
    },
    Arch {
        name: "arm64",
        linux_arch: "arm64",
        cross_compile: "aarch64-linux-gnu-",
        compiler_package: "gcc-aarch64-linux-gnu",
        image_target: "Image",
        image_path: "arch/arm64/boot/Image",
        fragment: "arm64.config",
        qemu_binary: "qemu-system-aarch64",
        qemu_package: "qemu-system-arm",
        rust_target: "aarch64-unknown-linux-musl",
        glibc_target: HelperTarget {
            triple: "aarch64-unknown-linux-gnu",
            linker: "aarch64-linux-gnu-gcc",
            static_glibc: true,
            packages: &["gcc-aarch64-linux-gnu", "libc6-dev-arm64-cross"],
        },
        // Static glibc rather than armv7-unknown-linux-musleabihf: that target's rust-std
        // answered HTTP 404 to `rustup target add` on this project's machines (Rust 1.95).
        compat32_target: HelperTarget {
            triple: "armv7-unknown-linux-gnueabihf",
            linker: "arm-linux-gnueabihf-gcc",
            static_glibc: true,
            packages: &["gcc-arm-linux-gnueabihf", "libc6-dev-armhf-cross"],
        },
        qemu_machine: "virt",
        // Pointer authentication with QEMU's own cheap algorithm: the architected one is
        // slow under TCG (the KUnit qemu_config does the same).
        qemu_cpu_tcg: "max,pauth-impdef=on",
        console: "ttyAMA0",
        cmdline: "",
        uname_machine: "aarch64",
    },
];

/// Resolves an `--arch` value (`x86_64`, `arm64`, their aliases, or `all`).
pub fn select(name: &str) -> Result<Vec<&'static Arch>> {
    let canonical = match name {
        "all" => return Ok(ARCHES.iter().collect()),
        "x86_64" | "x86" | "amd64" => "x86_64",
        "arm64" | "aarch64" => "arm64",
        other => bail!(
            "unknown architecture `{other}`: expected one of {}, or all",
            ARCHES.iter().map(|a| a.name).collect::<Vec<_>>().join(", ")
        ),
    };
    Ok(ARCHES.iter().filter(|a| a.name == canonical).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aliases_resolve_to_the_table_rows() {
        assert_eq!(select("aarch64").unwrap()[0].name, "arm64");
        assert_eq!(select("amd64").unwrap()[0].name, "x86_64");
        assert_eq!(select("all").unwrap().len(), ARCHES.len());
        let err = select("riscv64").unwrap_err().to_string();
        assert!(err.contains("riscv64") && err.contains("x86_64, arm64"), "{err}");
    }

    #[test]
    fn cross_builds_name_their_prefix() {
        let arm = select("arm64").unwrap()[0];
        assert_eq!(arm.compiler(), "aarch64-linux-gnu-gcc");
        assert_eq!(arm.make_vars(), ["ARCH=arm64", "CROSS_COMPILE=aarch64-linux-gnu-"]);
        assert_eq!(select("x86_64").unwrap()[0].make_vars(), ["ARCH=x86"]);
    }

    #[test]
    fn helper_targets_name_their_cargo_variables() {
        let arm = select("arm64").unwrap()[0];
        assert_eq!(arm.glibc_target.cargo_env_prefix(), "CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_");
        assert_eq!(arm.compat32_target.cargo_env_prefix(), "CARGO_TARGET_ARMV7_UNKNOWN_LINUX_GNUEABIHF_");
        for arch in ARCHES {
            assert!(
                arch.compat32_target.triple.starts_with("i686") || arch.compat32_target.triple.starts_with("armv7")
            );
            assert!(arch.glibc_target.triple.ends_with("-linux-gnu") && arch.glibc_target.static_glibc);
        }
    }
}
