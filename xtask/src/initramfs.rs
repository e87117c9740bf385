//! The initramfs: builds the guest agent for an arch and packs it, the plan and any extra
//! files into a deterministic newc cpio (sorted, fixed mtimes, uid 0, device nodes without root).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result};

use crate::arch::Arch;
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
    let root = crate::project_root();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(&cargo)
        .args(["build", "--quiet", "--release", "-p", "initramfs", "--target", arch.rust_target])
        .current_dir(&root)
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
        if Command::new("cpio").arg("--version").output().is_err() {
            panic!("cpio is not installed: install the Debian package cpio (cargo xtask setup does)");
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.cpio");
        std::fs::write(&path, sample().to_newc()).unwrap();
        let out = Command::new("cpio")
            .args(["-itv", "--quiet", "-F"])
            .arg(&path)
            .env("TZ", "UTC")
            .env("LC_ALL", "C")
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let listing = String::from_utf8_lossy(&out.stdout);
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
