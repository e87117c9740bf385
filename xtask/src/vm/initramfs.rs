//! The initramfs: builds the guest agent and the guest clients for an arch and packs them, the
//! plan and any extra files into a deterministic newc cpio (sorted, fixed mtimes, uid 0, device
//! nodes without root).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::arch::{Arch, HelperTarget};
use crate::support::cmd::{cmd, sh};
use crate::support::exit::{error, Kind};

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

/// Builds the guest agent for `arch` (release, static: musl, or glibc where the arch has no
/// musl target) and returns the binary's path.
pub fn build_agent(arch: &Arch) -> Result<PathBuf> {
    let root = crate::support::checkout::project_root();
    let target = &arch.agent_target;
    let what = format!("the guest agent for {} ({})", arch.name, target.triple);
    once(format!("initramfs {}", target.triple), || {
        check_linker(target, &what)?;
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let sh = sh()?;
        sh.change_dir(&root);
        let triple = target.triple;
        let out = target_env(cmd!(sh, "{cargo} build --quiet --release -p initramfs --target {triple}"), target)
            .ignore_status()
            .output()
            .context("running cargo build for the guest agent")?;
        if !out.status.success() {
            let stderr = String::from_utf8_lossy(&out.stderr);
            let hint = build_hint(&stderr, target).map(|h| format!(" ({h})")).unwrap_or_default();
            return Err(error(Kind::Infra, format!("building {what}{hint}:\n{stderr}")));
        }
        let target_dir = std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| root.join("target"));
        Ok(target_dir.join(triple).join("release/ue-agent"))
    })
}

/// `build` once per process for each `key` (a package and target): the sources do not change
/// while a command runs, and each cargo call costs a fraction of a second even when it has
/// nothing to do (`validate` asks for the same agent and clients several times).
fn once(key: String, build: impl FnOnce() -> Result<PathBuf>) -> Result<PathBuf> {
    static BUILT: std::sync::Mutex<BTreeMap<String, PathBuf>> = std::sync::Mutex::new(BTreeMap::new());
    if let Some(p) = BUILT.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
        return Ok(p.clone());
    }
    let path = build()?;
    BUILT.lock().unwrap_or_else(|e| e.into_inner()).insert(key, path.clone());
    Ok(path)
}

/// A static-glibc target's cross linker must be there before cargo runs (its own error would
/// not name the package).
fn check_linker(target: &HelperTarget, what: &str) -> Result<()> {
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
    Ok(())
}

/// The linker and the static-glibc flags go into this cargo's environment only, as
/// `CARGO_TARGET_<TRIPLE>_RUSTFLAGS`/`_LINKER`: in a config file that the host build also
/// reads, `+crt-static` for the host triple breaks proc-macro builds.
fn target_env<'a>(cmd: xshell::Cmd<'a>, target: &HelperTarget) -> xshell::Cmd<'a> {
    // These would replace the per-target rustflags (and so drop +crt-static).
    let mut cmd = cmd.env_remove("RUSTFLAGS").env_remove("CARGO_ENCODED_RUSTFLAGS");
    let prefix = target.cargo_env_prefix();
    if !target.linker.is_empty() {
        cmd = cmd.env(format!("{prefix}LINKER"), target.linker);
    }
    if target.static_glibc {
        cmd = cmd.env(format!("{prefix}RUSTFLAGS"), "-C target-feature=+crt-static");
    }
    cmd
}

/// A guest client other than the agent: a static binary from the separate workspace
/// `initramfs/clients/` (its Cargo.toml says why it is separate), put at `guest_path`.
pub struct Client {
    /// The cargo package, whose binary has the same name.
    pub package: &'static str,
    pub guest_path: &'static str,
    /// Which of the arch's helper targets it is built for, or why the arch has none.
    pub target: fn(&Arch) -> Result<&HelperTarget, &'static str>,
}

pub const CLIENTS: &[Client] = &[
    // Microsoft's `tracepoint` crate, which does not build on musl.
    Client { package: "ue-tracepoint", guest_path: "/bin/ue-tracepoint", target: |a| Ok(&a.glibc_target) },
    // The 32-bit compat ioctl probe (catalogue M1).
    Client {
        package: "ue-compat32",
        guest_path: "/bin/ue-compat32",
        target: |a| a.compat32_target.as_ref().map_err(|why| *why),
    },
];

/// The clients that `steps` (a plan, a scenario, a list of steps) run: those whose guest path
/// its JSON names as a whole string, in any step at any depth. The one answer to "which clients
/// does this need", for packing, provisioning and skipping alike.
pub fn clients_run_by<T: serde::Serialize + ?Sized>(steps: &T) -> Vec<&'static Client> {
    let json = serde_json::to_string(steps).unwrap_or_default();
    CLIENTS.iter().filter(|c| json.contains(&format!("\"{}\"", c.guest_path))).collect()
}

/// The clients a plan runs (`clients_run_by`), built for `arch`, as extra initramfs files.
/// `all` takes every client the arch has a build of (the interactive shell).
pub fn clients_for(arch: &Arch, plan: &protocol::Plan, all: bool) -> Result<Vec<(String, Vec<u8>)>> {
    let mut files = Vec::new();
    let wanted: Vec<&Client> =
        if all { CLIENTS.iter().filter(|c| (c.target)(arch).is_ok()).collect() } else { clients_run_by(plan) };
    for client in wanted {
        files.push((client.guest_path.to_string(), build_client(arch, client)?));
    }
    Ok(files)
}

/// Builds one client for `arch` (release, static) and returns the binary.
///
/// The target directory is `target/clients`, apart from the project's: the clients' workspace
/// has its own profiles, so sharing host build-script outputs with it would rebuild them on
/// every switch.
pub fn build_client(arch: &Arch, client: &Client) -> Result<Vec<u8>> {
    let target = (client.target)(arch).map_err(|why| {
        // Plans never name such a client (`suites::compile` skips its scenarios); a hand-made one can.
        error(Kind::BadInput, format!("{} has no build for {}: {why}", client.package, arch.name))
    })?;
    let what = format!("{} for {} ({})", client.package, arch.name, target.triple);
    let path = once(format!("{} {}", client.package, target.triple), || {
        check_linker(target, &what)?;
        let root = crate::support::checkout::project_root();
        let target_dir = clients_target_dir();
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let sh = sh()?;
        sh.change_dir(&root);
        let manifest = root.join("initramfs/clients/Cargo.toml");
        let (package, triple) = (client.package, target.triple);
        let cmd = cmd!(
            sh,
            "{cargo} build --quiet --release --manifest-path {manifest} -p {package} --target {triple} --target-dir {target_dir}"
        );
        let out = target_env(cmd, target)
            .ignore_status()
            .output()
            .with_context(|| format!("running cargo build for {what}"))?;
        if !out.status.success() {
            let stderr = String::from_utf8_lossy(&out.stderr);
            let hint = build_hint(&stderr, target).map(|h| format!(" ({h})")).unwrap_or_default();
            return Err(error(Kind::Infra, format!("building {what}{hint}:\n{stderr}")));
        }
        Ok(target_dir.join(target.triple).join("release").join(client.package))
    })?;
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
    root.unwrap_or_else(|| crate::support::checkout::project_root().join("target")).join("clients")
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

/// What an ELF executable's headers say: its machine, byte order, and whether it asks for a
/// program interpreter (`PT_INTERP`, a dynamic loader).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ElfFacts {
    pub bits64: bool,
    pub big_endian: bool,
    pub machine: u16,
    pub interp: bool,
}

/// Reads the ELF header and program headers of a 32- or 64-bit file in either byte order;
/// `None` when it is not such an ELF file.
pub fn elf_facts(bytes: &[u8]) -> Option<ElfFacts> {
    if bytes.get(..4)? != b"\x7fELF" {
        return None;
    }
    let bits64 = match bytes.get(4)? {
        1 => false,
        2 => true,
        _ => return None,
    };
    let big_endian = match bytes.get(5)? {
        1 => false,
        2 => true,
        _ => return None,
    };
    let int = |o: usize, n: usize| -> Option<usize> {
        let b = bytes.get(o..o + n)?;
        let fold = |acc: u64, &x: &u8| (acc << 8) | u64::from(x);
        Some(if big_endian { b.iter().fold(0, fold) } else { b.iter().rev().fold(0, fold) } as usize)
    };
    let (phoff, phentsize, phnum) = if bits64 {
        (int(0x20, 8)?, int(0x36, 2)?, int(0x38, 2)?)
    } else {
        (int(0x1c, 4)?, int(0x2a, 2)?, int(0x2c, 2)?)
    };
    let mut interp = false;
    for i in 0..phnum {
        interp |= int(phoff + i * phentsize, 4)? == 3;
    }
    Some(ElfFacts { bits64, big_endian, machine: int(18, 2)? as u16, interp })
}

/// Whether an ELF executable asks for a program interpreter; `None` when it is not ELF.
fn elf_interpreter(bytes: &[u8]) -> Option<bool> {
    elf_facts(bytes).map(|f| f.interp)
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
        let compat = arm.compat32_target.as_ref().unwrap();
        let hint = build_hint("ld: cannot find -lc: No such file or directory", compat).unwrap();
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
        let client = Client { package: "ue-compat32", guest_path: "/bin/ue-compat32", target: |_| Ok(&ABSENT) };
        let err = build_client(&crate::arch::ARCHES[1], &client).unwrap_err();
        assert_eq!(crate::support::exit::code_for(&err), Kind::Infra.code());
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
        // The same static executable as a 64-bit big-endian s390x file (e_machine 22).
        let mut be = vec![0u8; 0x78];
        be[..6].copy_from_slice(b"\x7fELF\x02\x02");
        be[18..20].copy_from_slice(&22u16.to_be_bytes());
        be[0x20..0x28].copy_from_slice(&0x40u64.to_be_bytes());
        be[0x36..0x38].copy_from_slice(&0x38u16.to_be_bytes());
        be[0x38..0x3a].copy_from_slice(&1u16.to_be_bytes());
        be[0x40..0x44].copy_from_slice(&1u32.to_be_bytes());
        assert_eq!(elf_facts(&be), Some(ElfFacts { bits64: true, big_endian: true, machine: 22, interp: false }));
        be[0x40..0x44].copy_from_slice(&3u32.to_be_bytes());
        assert_eq!(elf_interpreter(&be), Some(true));
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
        if !crate::support::cmd::succeeds(cmd!(sh, "cpio --version")) {
            panic!("cpio is not installed: install the Debian package cpio (cargo xtask setup does)");
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.cpio");
        std::fs::write(&path, sample().to_newc()).unwrap();
        let listing =
            crate::support::cmd::text(cmd!(sh, "cpio -itv --quiet -F {path}").env("TZ", "UTC").env("LC_ALL", "C"))
                .unwrap();
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
