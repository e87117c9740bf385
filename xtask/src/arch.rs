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
}
