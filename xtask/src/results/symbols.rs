//! A finding's frames resolved to source lines, as the kernel's `scripts/decode_stacktrace.sh`
//! does: the symbol's address from `nm` (the one whose size is the frame's `/0xlen` when the
//! name is not unique) plus the frame's offset, then `addr2line -a -f -i` on the kernel's
//! `vmlinux` for the file, line and inlined callers. Only when that `vmlinux` has DWARF (a
//! `.debug_info` section); without it the frames stay `func+0xoff/0xlen` and the run says
//! `no debug info` once. binutils' programs are used, the arch's cross ones first
//! (`aarch64-linux-gnu-addr2line`), for a host `addr2line` may not read another arch's ELF.
//!
//! `save` writes each boot's `symbols.json` at the end of a live run (it knows the kernels);
//! `attach` reads it back into the model, so `report --from` shows the same. Symbolization
//! never fails a run and never changes a fingerprint.

use std::collections::BTreeMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use super::model::{Boot, Finding, Scenario};
use crate::judging::console::fingerprint;
use crate::judging::run_folder::{JudgedBoot, SYMBOLS};
use crate::kernel::build::Built;

/// A boot's `symbols.json`: each frame as printed, to where it is in the source.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Symbols {
    /// The `vmlinux` the frames were resolved with.
    pub vmlinux: String,
    /// `func+0xoff/0xlen` to its places, innermost inlined function first: `func file:line`.
    pub frames: BTreeMap<String, Vec<String>>,
}

/// What became of a kernel's frames.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Resolved into the boots' `symbols.json`.
    Resolved(PathBuf),
    /// The `vmlinux` has no `.debug_info`.
    NoDebugInfo(PathBuf),
}

/// At the end of a live run: the frames of each boot's findings resolved with its kernel's
/// `vmlinux` into the boot folder's `symbols.json`. What happened, as lines to print (a
/// kernel without debug info said once); problems are lines too, never errors.
pub fn save(boots: &[&JudgedBoot], built: &[Built]) -> Vec<String> {
    let mut said: Vec<String> = Vec::new();
    let mut checked: BTreeMap<PathBuf, bool> = BTreeMap::new();
    for b in boots {
        let frames = frames_of(b);
        let Some(k) = built.iter().find(|k| k.arch.name == b.facts.arch) else { continue };
        let Some(vmlinux) = k.image.parent().map(|d| d.join("vmlinux")).filter(|p| p.is_file()) else { continue };
        if frames.is_empty() {
            continue;
        }
        let debug = *checked.entry(vmlinux.clone()).or_insert_with(|| has_debug_info(&vmlinux).unwrap_or(false));
        if !debug {
            let line = format!(
                "symbols {}: no debug info in {}: frames kept as function+offset",
                k.arch.name,
                vmlinux.display()
            );
            if !said.contains(&line) {
                said.push(line);
            }
            continue;
        }
        let result = resolve(&vmlinux, k.arch.cross_compile, &frames).and_then(|symbols| {
            let path = b.folder.file(SYMBOLS);
            crate::support::files::write_atomic(&path, &serde_json::to_vec_pretty(&symbols)?)
                .with_context(|| format!("writing {}", path.display()))
        });
        if let Err(e) = result {
            said.push(format!("symbols {}: frames not resolved: {e:#}", k.arch.name));
        }
    }
    said
}

/// Every frame of a boot's findings, each once.
fn frames_of(b: &JudgedBoot) -> Vec<String> {
    let r = &b.judgement.result;
    let mut out: Vec<String> =
        r.findings.iter().chain(r.scenarios.iter().flat_map(|s| &s.findings)).flat_map(|f| f.frames.clone()).collect();
    out.sort();
    out.dedup();
    out
}

/// The boot folder's `symbols.json` into its findings' frames (nothing when there is none).
pub fn attach(folder: &Path, boot: &mut Boot, scenarios: &mut [Scenario]) {
    let Ok(bytes) = std::fs::read(folder.join(SYMBOLS)) else { return };
    let Ok(symbols) = serde_json::from_slice::<Symbols>(&bytes) else { return };
    let findings = boot.findings.iter_mut().chain(scenarios.iter_mut().flat_map(|s| s.findings.iter_mut()));
    for f in findings {
        fill(f, &symbols);
    }
}

fn fill(f: &mut Finding, symbols: &Symbols) {
    for frame in &mut f.frames {
        if let Some(places) = symbols.frames.get(&frame.frame) {
            frame.source.clone_from(places);
        }
    }
}

/// Whether an ELF file has a `.debug_info` section (its section headers read, not the file).
pub fn has_debug_info(path: &Path) -> Result<bool> {
    Ok(section_names(path)?.iter().any(|n| n == ".debug_info"))
}

/// The section names of an ELF file (32 or 64 bits, either byte order).
fn section_names(path: &Path) -> Result<Vec<String>> {
    let mut f = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let mut head = [0u8; 64];
    f.read_exact(&mut head).with_context(|| format!("{}: too short for ELF", path.display()))?;
    let elf = Elf::of(&head).with_context(|| format!("{}: not an ELF file", path.display()))?;
    let (offset, entry, count, names_index) = elf.sections(&head);
    let mut table = vec![0u8; entry * count];
    f.seek(SeekFrom::Start(offset))?;
    f.read_exact(&mut table)?;
    let header = |i: usize| table.get(i * entry..(i + 1) * entry);
    let Some((strings_at, strings_len)) = header(names_index).map(|h| elf.section(h)) else {
        bail!("{}: no section name table", path.display());
    };
    let mut strings = vec![0u8; usize::try_from(strings_len)?];
    f.seek(SeekFrom::Start(strings_at))?;
    f.read_exact(&mut strings)?;
    Ok((0..count)
        .filter_map(header)
        .map(|h| {
            let at = usize::try_from(elf.word(&h[0..4])).unwrap_or(usize::MAX);
            let name = strings.get(at..).unwrap_or_default();
            let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
            String::from_utf8_lossy(&name[..end]).into_owned()
        })
        .collect())
}

/// An ELF file's class and byte order.
struct Elf {
    wide: bool,
    little: bool,
}

impl Elf {
    fn of(head: &[u8; 64]) -> Option<Elf> {
        (head[..4] == *b"\x7fELF").then_some(Elf { wide: head[4] == 2, little: head[5] == 1 })
    }

    fn word(&self, b: &[u8]) -> u64 {
        let mut v = 0u64;
        for i in 0..b.len() {
            let byte = if self.little { b[b.len() - 1 - i] } else { b[i] };
            v = (v << 8) | u64::from(byte);
        }
        v
    }

    /// The section header table: its offset, entry size, count and the names' section.
    fn sections(&self, h: &[u8]) -> (u64, usize, usize, usize) {
        let n = |r: std::ops::Range<usize>| usize::try_from(self.word(&h[r])).unwrap_or(0);
        if self.wide {
            (self.word(&h[0x28..0x30]), n(0x3a..0x3c), n(0x3c..0x3e), n(0x3e..0x40))
        } else {
            (self.word(&h[0x20..0x24]), n(0x2e..0x30), n(0x30..0x32), n(0x32..0x34))
        }
    }

    /// A section header's file offset and size.
    fn section(&self, h: &[u8]) -> (u64, u64) {
        if self.wide {
            (self.word(&h[0x18..0x20]), self.word(&h[0x20..0x28]))
        } else {
            (self.word(&h[0x10..0x14]), self.word(&h[0x14..0x18]))
        }
    }
}

/// The frames resolved with `nm` and `addr2line` (the arch's cross binutils when there are).
pub fn resolve(vmlinux: &Path, cross: &str, frames: &[String]) -> Result<Symbols> {
    let tool = |name: &str| {
        let crossed = format!("{cross}{name}");
        let path = std::env::var_os("PATH");
        if !cross.is_empty() && crate::vm::qemu::find_program(&crossed, path.as_deref()).is_some() {
            crossed
        } else {
            name.to_string()
        }
    };
    let nm = output(Command::new(tool("nm")).arg("-S").arg("--defined-only").arg(vmlinux))?;
    let table = parse_nm(&nm);
    let addresses: Vec<(String, u64)> =
        frames.iter().filter_map(|f| address(f, &table).map(|a| (f.clone(), a))).collect();
    let mut symbols = Symbols { vmlinux: vmlinux.display().to_string(), frames: BTreeMap::new() };
    if addresses.is_empty() {
        return Ok(symbols);
    }
    let mut cmd = Command::new(tool("addr2line"));
    cmd.args(["-a", "-f", "-i", "-e"]).arg(vmlinux);
    cmd.args(addresses.iter().map(|(_, a)| format!("{a:#x}")));
    let places = parse_addr2line(&output(&mut cmd)?);
    for (frame, address) in addresses {
        if let Some((_, lines)) = places.iter().find(|(a, _)| *a == address).filter(|(_, l)| !l.is_empty()) {
            symbols.frames.insert(frame, lines.clone());
        }
    }
    Ok(symbols)
}

fn output(cmd: &mut Command) -> Result<String> {
    let shown = format!("{cmd:?}");
    let out = cmd.output().with_context(|| format!("running {shown} (binutils)"))?;
    if !out.status.success() {
        bail!("{shown}: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `nm -S` text symbols: each name's (address, size) in the order listed.
pub fn parse_nm(text: &str) -> BTreeMap<String, Vec<(u64, Option<u64>)>> {
    let mut out: BTreeMap<String, Vec<(u64, Option<u64>)>> = BTreeMap::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let (addr, size, kind, name) = match f.as_slice() {
            [a, s, k, n] => (a, Some(s), k, n),
            [a, k, n] => (a, None, k, n),
            _ => continue,
        };
        if !matches!(*kind, "t" | "T" | "w" | "W") {
            continue;
        }
        let Ok(addr) = u64::from_str_radix(addr, 16) else { continue };
        let size = size.and_then(|s| u64::from_str_radix(s, 16).ok());
        out.entry((*name).to_string()).or_default().push((addr, size));
    }
    out
}

/// A frame's address: its symbol's (the one of its length when several share the name) plus
/// its offset.
pub fn address(frame: &str, table: &BTreeMap<String, Vec<(u64, Option<u64>)>>) -> Option<u64> {
    let (name, (offset, len)) = fingerprint::split(frame)?;
    let candidates = table.get(name)?;
    let (base, _) = candidates.iter().find(|(_, size)| *size == Some(len)).or_else(|| candidates.first())?;
    base.checked_add(offset)
}

/// `addr2line -a -f -i` output: per address, its places (`func file:line`), innermost first.
pub fn parse_addr2line(text: &str) -> Vec<(u64, Vec<String>)> {
    let mut out: Vec<(u64, Vec<String>)> = Vec::new();
    let mut function: Option<&str> = None;
    for line in text.lines().map(str::trim) {
        if let Some(hex) = line.strip_prefix("0x").filter(|h| h.bytes().all(|b| b.is_ascii_hexdigit())) {
            if let Ok(a) = u64::from_str_radix(hex, 16) {
                out.push((a, Vec::new()));
                function = None;
                continue;
            }
        }
        match function.take() {
            None => function = Some(line),
            // A frame outside the objects with DWARF: `??` and `??:0`, or a file without a
            // line (`report.c:?`): no place.
            Some(func) if func == "??" || line.starts_with("??:") || line.ends_with(":?") => {}
            Some(func) => {
                if let Some((_, places)) = out.last_mut() {
                    places.push(format!("{func} {}", short_path(line)));
                }
            }
        }
    }
    out
}

/// A source path without the build's own prefix: what follows the private mirror's `src/`.
fn short_path(place: &str) -> &str {
    match place.find("/trees/").and_then(|at| place[at..].find("/src/").map(|s| at + s + 5)) {
        Some(start) => &place[start..],
        None => place,
    }
}

#[cfg(test)]
mod tests;
