//! The initramfs: builds the guest agent and the guest clients for an arch and packs them, the
//! plan and any extra files into a deterministic newc cpio (sorted, fixed mtimes, uid 0, device
//! nodes without root).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::arch::{Arch, HelperTarget};
use crate::cmd::{cmd, sh};
use crate::exit::{error, Kind};

/// One file system object in the archive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node {
    Dir,
    File { data: Vec<u8>, executable: bool },
    CharDev { major: u32, minor: u32 },
}

/// An archive under construction: path (without leading `/`) to node. Parents are implied.
#[derive(Debug, Default, Clone)]
pub struct Archive {
    nodes: BTreeMap<String, Node>,
}

impl Archive {
    /// The skeleton every boot needs: mount points and `/dev/console`, which the kernel opens
    /// for init's stdio before anything mounts devtmpfs.
    pub fn base() -> Archive {
        let mut a = Archive::default();
        for dir in ["dev", "proc", "sys", "tmp", "bin", "artifacts", "share"] {
            a.add(dir, Node::Dir);
        }
        a.add("dev/console", Node::CharDev { major: 5, minor: 1 });
        a.add("dev/null", Node::CharDev { major: 1, minor: 3 });
        a
    }

    pub fn add(&mut self, path: &str, node: Node) {
        let path = path.trim_start_matches('/').to_string();
        let mut parent = Path::new(&path).parent();
        while let Some(p) = parent.filter(|p| !p.as_os_str().is_empty()) {
            self.nodes.entry(p.to_string_lossy().into_owned()).or_insert(Node::Dir);
            parent = p.parent();
        }
        self.nodes.insert(path, node);
    }

    /// The newc ("070701") encoding. Entries are sorted by path, parents before children;
    /// inode numbers count up from 1 and every mtime is 0, so equal inputs give equal bytes.
    pub fn to_newc(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for (ino, (path, node)) in self.nodes.iter().enumerate() {
            let (mode, data, rdev, nlink): (u32, &[u8], (u32, u32), u32) = match node {
                Node::Dir => (0o040755, &[], (0, 0), 2),
                Node::File { data, executable: true } => (0o100755, data, (0, 0), 1),
                Node::File { data, executable: false } => (0o100644, data, (0, 0), 1),
                Node::CharDev { major, minor } => (0o020600, &[], (*major, *minor), 1),
            };
            header(&mut out, ino as u32 + 1, mode, nlink, data.len() as u32, rdev, path);
            out.extend_from_slice(data);
            pad4(&mut out);
        }
        header(&mut out, 0, 0, 1, 0, (0, 0), "TRAILER!!!");
        out
    }
}

fn header(out: &mut Vec<u8>, ino: u32, mode: u32, nlink: u32, size: u32, rdev: (u32, u32), name: &str) {
    let fields = [ino, mode, 0, 0, nlink, 0, size, 0, 0, rdev.0, rdev.1, name.len() as u32 + 1, 0];
    out.extend_from_slice(b"070701");
    for f in fields {
        out.extend_from_slice(format!("{f:08x}").as_bytes());
    }
    out.extend_from_slice(name.as_bytes());
    out.push(0);
    pad4(out);
}

fn pad4(out: &mut Vec<u8>) {
    while !out.len().is_multiple_of(4) {
        out.push(0);
    }
}

/// Builds the guest agent for `arch` (release, static musl) and returns the binary's path.
pub fn build_agent(arch: &Arch) -> Result<PathBuf> {
    let root = crate::checkout::project_root();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let sh = sh()?;
    sh.change_dir(&root);
    let target = arch.rust_target;
    let out = cmd!(sh, "{cargo} build --quiet --release -p initramfs --target {target}")
        .ignore_status()
        .output()
        .context("running cargo build for the guest agent")?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let hint = if stderr.contains("may not be installed") || stderr.contains("can't find crate for `std`") {
            format!(" (the rust target is missing: rustup target add {})", arch.rust_target)
        } else {
            String::new()
        };
        return Err(error(Kind::Infra, format!("building the guest agent for {}{hint}:\n{stderr}", arch.name)));
    }
    let target_dir = std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| root.join("target"));
    Ok(target_dir.join(arch.rust_target).join("release/ue-agent"))
}

/// A guest client other than the agent: a static binary from the separate workspace
/// `initramfs/clients/` (its Cargo.toml says why it is separate), put at `guest_path`.
pub struct Client {
    /// The cargo package, whose binary has the same name.
    pub package: &'static str,
    pub guest_path: &'static str,
    /// Which of the arch's helper targets it is built for.
    pub target: fn(&Arch) -> &HelperTarget,
}

pub const CLIENTS: &[Client] = &[
    // Microsoft's `tracepoint` crate, which does not build on musl.
    Client { package: "ue-tracepoint", guest_path: "/bin/ue-tracepoint", target: |a| &a.glibc_target },
    // The 32-bit compat ioctl probe (catalogue M1).
    Client { package: "ue-compat32", guest_path: "/bin/ue-compat32", target: |a| &a.compat32_target },
];

/// The clients a plan runs (its JSON names their guest path, in any step at any depth), built
/// for `arch`, as extra initramfs files. `all` takes every client (the interactive shell).
pub fn clients_for(arch: &Arch, plan: &protocol::Plan, all: bool) -> Result<Vec<(String, Vec<u8>)>> {
    let json = serde_json::to_string(plan)?;
    let mut files = Vec::new();
    for client in CLIENTS.iter().filter(|c| all || json.contains(&format!("\"{}\"", c.guest_path))) {
        files.push((client.guest_path.to_string(), build_client(arch, client)?));
    }
    Ok(files)
}

/// Builds one client for `arch` (release, static) and returns the binary.
///
/// The static-glibc flags and the linker go into this cargo's environment only, as
/// `CARGO_TARGET_<TRIPLE>_RUSTFLAGS`/`_LINKER`: in a config file that the host build also
/// reads, `+crt-static` for the host triple breaks proc-macro builds. The target directory is
/// `target/clients`, apart from the project's: the clients' workspace has its own profiles, so
/// sharing host build-script outputs with it would rebuild them on every switch.
pub fn build_client(arch: &Arch, client: &Client) -> Result<Vec<u8>> {
    let target = (client.target)(arch);
    let what = format!("{} for {} ({})", client.package, arch.name, target.triple);
    if !target.linker.is_empty()
        && target.linker != "rust-lld"
        && sh()?.cmd(target.linker).arg("--version").ignore_status().output().is_err()
    {
        return Err(error(
            Kind::Infra,
            format!(
                "building {what}: the linker {} is missing; install the Debian packages {} (`cargo xtask setup` does)",
                target.linker,
                target.packages.join(" ")
            ),
        ));
    }
    let root = crate::checkout::project_root();
    let target_dir = clients_target_dir();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let sh = sh()?;
    sh.change_dir(&root);
    let manifest = root.join("initramfs/clients/Cargo.toml");
    let (package, triple) = (client.package, target.triple);
    let mut cmd = cmd!(
        sh,
        "{cargo} build --quiet --release --manifest-path {manifest} -p {package} --target {triple} --target-dir {target_dir}"
    )
    // These would replace the per-target rustflags (and so drop +crt-static).
    .env_remove("RUSTFLAGS")
    .env_remove("CARGO_ENCODED_RUSTFLAGS");
    let prefix = target.cargo_env_prefix();
    if !target.linker.is_empty() {
        cmd = cmd.env(format!("{prefix}LINKER"), target.linker);
    }
    if target.static_glibc {
        cmd = cmd.env(format!("{prefix}RUSTFLAGS"), "-C target-feature=+crt-static");
    }
    let out = cmd.ignore_status().output().with_context(|| format!("running cargo build for {what}"))?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let hint = build_hint(&stderr, target).map(|h| format!(" ({h})")).unwrap_or_default();
        return Err(error(Kind::Infra, format!("building {what}{hint}:\n{stderr}")));
    }
    let path = target_dir.join(target.triple).join("release").join(client.package);
    let bytes = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
    if elf_interpreter(&bytes) != Some(false) {
        return Err(error(
            Kind::Infra,
            format!("building {what}: {} is not a static ELF executable, so the guest cannot run it", path.display()),
        ));
    }
    Ok(bytes)
}

/// `target/clients` (under `CARGO_TARGET_DIR` when set): the clients' own target directory.
pub fn clients_target_dir() -> PathBuf {
    let root = std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from);
    root.unwrap_or_else(|| crate::checkout::project_root().join("target")).join("clients")
}

/// What a failed client build lacks, from cargo's and the linker's messages.
fn build_hint(stderr: &str, target: &HelperTarget) -> Option<String> {
    if stderr.contains("may not be installed") || stderr.contains("can't find crate for `std`") {
        Some(format!("the rust target is missing: rustup target add {} (`cargo xtask setup` does)", target.triple))
    } else if stderr.contains("cannot find -lc") || stderr.contains("crt1.o") || stderr.contains("crti.o") {
        Some(format!(
            "the static C library is missing: install the Debian packages {} (`cargo xtask setup` does)",
            target.packages.join(" ")
        ))
    } else {
        None
    }
}

/// Whether an ELF executable (32- or 64-bit, little-endian) asks for a program interpreter
/// (`PT_INTERP`, a dynamic loader); `None` when it is not such an ELF file.
fn elf_interpreter(bytes: &[u8]) -> Option<bool> {
    if bytes.get(..4)? != b"\x7fELF" || *bytes.get(5)? != 1 {
        return None;
    }
    let u16_at = |o: usize| Some(u16::from_le_bytes(bytes.get(o..o + 2)?.try_into().ok()?) as usize);
    let u32_at = |o: usize| Some(u32::from_le_bytes(bytes.get(o..o + 4)?.try_into().ok()?) as usize);
    let (phoff, phentsize, phnum) = match bytes.get(4)? {
        1 => (u32_at(0x1c)?, u16_at(0x2a)?, u16_at(0x2c)?),
        2 => (u64::from_le_bytes(bytes.get(0x20..0x28)?.try_into().ok()?) as usize, u16_at(0x36)?, u16_at(0x38)?),
        _ => return None,
    };
    let mut interp = false;
    for i in 0..phnum {
        interp |= u32_at(phoff + i * phentsize)? == 3;
    }
    Some(interp)
}

/// Writes the initramfs for one boot: the agent as `/init`, the plan, and extra files.
pub fn write(dest: &Path, agent: &Path, plan: &protocol::Plan, extra: &[(String, Vec<u8>)]) -> Result<()> {
    let mut archive = Archive::base();
    let agent_bytes = std::fs::read(agent).with_context(|| format!("reading the guest agent {}", agent.display()))?;
    archive.add("init", Node::File { data: agent_bytes, executable: true });
    archive.add(protocol::PLAN_PATH, Node::File { data: serde_json::to_vec(plan)?, executable: false });
    for (path, data) in extra {
        archive.add(path, Node::File { data: data.clone(), executable: true });
    }
    std::fs::write(dest, archive.to_newc()).with_context(|| format!("writing {}", dest.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Archive {
        let mut a = Archive::base();
        a.add("/init", Node::File { data: b"#!agent".to_vec(), executable: true });
        a.add("plan.json", Node::File { data: b"{}".to_vec(), executable: false });
        a.add("bin/tool/deep", Node::File { data: vec![1, 2, 3], executable: true });
        a
    }

    #[test]
    fn missing_pieces_are_named() {
        let arm = &crate::arch::ARCHES[1];
        let hint = build_hint("error[E0463]: can't find crate for `std`", &arm.glibc_target).unwrap();
        assert_eq!(
            hint,
            "the rust target is missing: rustup target add aarch64-unknown-linux-gnu (`cargo xtask setup` does)"
        );
        let hint = build_hint("ld: cannot find -lc: No such file or directory", &arm.compat32_target).unwrap();
        assert!(hint.contains("gcc-arm-linux-gnueabihf libc6-dev-armhf-cross"), "{hint}");
        assert_eq!(build_hint("error: mismatched types", &arm.glibc_target), None);
    }

    #[test]
    fn a_missing_linker_is_named_with_its_packages_before_cargo_runs() {
        static ABSENT: HelperTarget = HelperTarget {
            triple: "armv7-unknown-linux-gnueabihf",
            linker: "no-such-linker-gcc",
            static_glibc: true,
            packages: &["gcc-no-such", "libc6-dev-no-such"],
        };
        let client = Client { package: "ue-compat32", guest_path: "/bin/ue-compat32", target: |_| &ABSENT };
        let err = build_client(&crate::arch::ARCHES[1], &client).unwrap_err();
        assert_eq!(crate::exit::code_for(&err), Kind::Infra.code());
        assert_eq!(
            err.to_string(),
            "building ue-compat32 for arm64 (armv7-unknown-linux-gnueabihf): the linker no-such-linker-gcc is missing; \
             install the Debian packages gcc-no-such libc6-dev-no-such (`cargo xtask setup` does)"
        );
    }

    /// The ELF files this test binary's own host tools give: a dynamic executable, and headers
    /// cut down to a static 32-bit one.
    #[test]
    fn static_and_dynamic_executables_are_told_apart() {
        let exe = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        assert_eq!(elf_interpreter(&exe), Some(true), "a cargo test binary is dynamically linked");
        // A 32-bit header with one PT_LOAD program header and no PT_INTERP.
        let mut elf32 = vec![0u8; 0x54];
        elf32[..6].copy_from_slice(b"\x7fELF\x01\x01");
        elf32[0x1c..0x20].copy_from_slice(&0x34u32.to_le_bytes());
        elf32[0x2a..0x2c].copy_from_slice(&0x20u16.to_le_bytes());
        elf32[0x2c..0x2e].copy_from_slice(&1u16.to_le_bytes());
        elf32[0x34..0x38].copy_from_slice(&1u32.to_le_bytes());
        assert_eq!(elf_interpreter(&elf32), Some(false));
        elf32[0x34..0x38].copy_from_slice(&3u32.to_le_bytes());
        assert_eq!(elf_interpreter(&elf32), Some(true));
        assert_eq!(elf_interpreter(b"#!/bin/sh\n"), None);
    }

    #[test]
    fn same_inputs_give_the_same_bytes_whatever_the_insertion_order() {
        let mut b = Archive::default();
        b.add("bin/tool/deep", Node::File { data: vec![1, 2, 3], executable: true });
        b.add("plan.json", Node::File { data: b"{}".to_vec(), executable: false });
        b.add("init", Node::File { data: b"#!agent".to_vec(), executable: true });
        for (p, n) in Archive::base().nodes {
            b.add(&p, n);
        }
        assert_eq!(sample().to_newc(), b.to_newc());
        assert_eq!(sample().to_newc(), sample().to_newc());
    }

    /// Lists the archive with the system's cpio, the same reader the kernel's format follows.
    #[test]
    fn cpio_reads_it_back_with_parents_first_and_device_nodes() {
        let sh = sh().unwrap();
        if !crate::cmd::succeeds(cmd!(sh, "cpio --version")) {
            panic!("cpio is not installed: install the Debian package cpio (cargo xtask setup does)");
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.cpio");
        std::fs::write(&path, sample().to_newc()).unwrap();
        let listing =
            crate::cmd::text(cmd!(sh, "cpio -itv --quiet -F {path}").env("TZ", "UTC").env("LC_ALL", "C")).unwrap();
        let names: Vec<&str> = listing.lines().map(|l| l.rsplit(' ').next().unwrap()).collect();
        assert_eq!(
            names,
            [
                "artifacts",
                "bin",
                "bin/tool",
                "bin/tool/deep",
                "dev",
                "dev/console",
                "dev/null",
                "init",
                "plan.json",
                "proc",
                "share",
                "sys",
                "tmp"
            ]
        );
        let console = listing.lines().find(|l| l.ends_with("dev/console")).unwrap();
        assert!(console.starts_with("crw-------") && console.contains("5,"), "{console}");
        let init = listing.lines().find(|l| l.ends_with(" init")).unwrap();
        assert!(init.starts_with("-rwxr-xr-x") && init.contains(" root ") && init.contains("1970"), "{init}");
    }
}
