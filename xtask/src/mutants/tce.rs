//! Trivial compiler equivalence (TCE, Papadakis et al., ICSE 2015): the mutated file compiled
//! on its own with the kernel build's own command line for it (kbuild's saved `.o.cmd`), its
//! object stripped of debug information and compared with the original's and with the other
//! mutants'. An object identical to the original's proves the mutant equivalent for that
//! compiler, configuration and arch (only: a removed `rcu_read_unlock()` is identical without
//! lockdep and preemption, and the debug kernel's lockdep still tells it apart); one identical to another mutant's makes it a duplicate of
//! that one. The command line's rewriting is sans-IO; [`Compiler::object`] runs it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

/// A mutant's stripped object, or the compiler's first error, by mutant id.
pub type Objects = Vec<(String, std::result::Result<Vec<u8>, String>)>;

/// What TCE found for one mutant on one arch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "tce", rename_all = "kebab-case")]
pub enum Finding {
    /// The stripped object equals the original's.
    Equivalent,
    /// The stripped object equals this mutant's (the first by id with that object).
    Duplicate { of: String },
    /// The object differs from the original's and every earlier mutant's.
    Differs,
    /// The mutated file does not compile on its own.
    CompileError { reason: String },
}

/// `<out>/tce.json`: per arch, the file's digest the objects were compiled from and each
/// mutant's finding.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// The SHA-256 of the file's text.
    pub digest: String,
    /// Arch to mutant id to finding.
    pub arches: BTreeMap<String, BTreeMap<String, Finding>>,
}

impl Record {
    /// The mutants TCE proved equivalent on every arch it ran on, with the proof said in words.
    pub fn proven(&self) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        let Some((_, findings)) = self.arches.iter().next() else { return out };
        for (id, f) in findings {
            if *f != Finding::Equivalent {
                continue;
            }
            let all: Vec<&str> = self
                .arches
                .iter()
                .filter(|(_, fs)| fs.get(id) == Some(&Finding::Equivalent))
                .map(|(a, _)| a.as_str())
                .collect();
            if all.len() == self.arches.len() {
                out.insert(
                    id.clone(),
                    format!(
                        "TCE: the object compiled from the mutated file equals the original's on {}",
                        all.join(", ")
                    ),
                );
            }
        }
        out
    }
}

/// kbuild's saved command for `object` (`kernel/trace/trace_events_user.o`) from its `.cmd`
/// file: the `savedcmd_<object> := ...` line (`cmd_<object>` in older kernels).
pub fn saved_command(cmd_file: &str, object: &str) -> Result<String> {
    for key in [format!("savedcmd_{object} := "), format!("cmd_{object} := ")] {
        if let Some(line) = cmd_file.lines().find_map(|l| l.strip_prefix(key.as_str())) {
            return Ok(line.to_string());
        }
    }
    bail!("no saved command for {object}")
}

/// The command with the source `rel` (its path in the tree, the argument that ends with it)
/// replaced by `src`, the object by `obj` and the dependency file dropped; quoted includes
/// still found in the original's folder, and `__FILE__` spelled as in the tree. Also returns
/// the compiler (the first word).
pub fn rewrite(command: &str, rel: &str, src: &Path, obj: &Path, build_dir: &Path) -> Result<(String, String)> {
    let words: Vec<&str> = command.split_whitespace().collect();
    let compiler = words.first().context("an empty command")?.to_string();
    let at =
        words.iter().rposition(|w| w.ends_with(rel)).with_context(|| format!("no source `{rel}` in the command"))?;
    let srctree = words[at].strip_suffix(rel).unwrap_or_default();
    let srctree = if Path::new(srctree).is_absolute() { PathBuf::from(srctree) } else { build_dir.join(srctree) };
    let folder = srctree.join(Path::new(rel).parent().unwrap_or(Path::new("")));
    let tmp = src.parent().and_then(|p| p.ancestors().nth(Path::new(rel).components().count() - 1));
    let mut out: Vec<String> = Vec::new();
    let mut k = 0;
    while k < words.len() {
        let w = words[k];
        if k == at {
            out.push(src.display().to_string());
        } else if w == "-o" && k + 1 < words.len() {
            out.push("-o".into());
            out.push(obj.display().to_string());
            k += 1;
        } else if w.starts_with("-Wp,-MMD,") || w.starts_with("-Wp,-MD,") {
            // The dependency file is kbuild's, not ours.
        } else {
            out.push(w.to_string());
        }
        k += 1;
    }
    out.insert(1, format!("-I{}", folder.display()));
    if let Some(tmp) = tmp {
        out.insert(1, format!("-fmacro-prefix-map={}/=", tmp.display()));
    }
    Ok((out.join(" "), compiler))
}

/// The objcopy beside a compiler (`s390x-linux-gnu-gcc` -> `s390x-linux-gnu-objcopy`).
pub fn objcopy_for(compiler: &str) -> String {
    match compiler.strip_suffix("gcc") {
        Some(prefix) => format!("{prefix}objcopy"),
        None => "objcopy".to_string(),
    }
}

/// A file compiled as the kernel build compiles it, from a folder of its own.
pub struct Compiler {
    pub command: String,
    pub build_dir: PathBuf,
    /// The file's path in the tree.
    pub rel: String,
}

impl Compiler {
    /// From a build folder: the saved command of `rel`'s object.
    pub fn of(build_dir: &Path, rel: &str) -> Result<Compiler> {
        let object = format!("{}.o", rel.strip_suffix(".c").unwrap_or(rel));
        let path = Path::new(&object);
        let cmd_file = build_dir
            .join(path.parent().unwrap_or(Path::new("")))
            .join(format!(".{}.cmd", path.file_name().unwrap_or_default().to_string_lossy()));
        let text = std::fs::read_to_string(&cmd_file).with_context(|| format!("reading {}", cmd_file.display()))?;
        Ok(Compiler { command: saved_command(&text, &object)?, build_dir: build_dir.to_path_buf(), rel: rel.into() })
    }

    /// `text` compiled in `scratch` (a folder of this worker's), its object stripped of debug
    /// information and the compiler's comment; the stripped bytes, or the compiler's first error.
    pub fn object(&self, text: &str, scratch: &Path) -> Result<std::result::Result<Vec<u8>, String>> {
        let src = scratch.join(&self.rel);
        std::fs::create_dir_all(src.parent().context("a file in a folder")?)?;
        std::fs::write(&src, text)?;
        let obj = scratch.join("out.o");
        let stripped = scratch.join("stripped.o");
        let _ = std::fs::remove_file(&obj);
        let (command, compiler) = rewrite(&self.command, &self.rel, &src, &obj, &self.build_dir)?;
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(&command)
            .current_dir(&self.build_dir)
            .output()
            .with_context(|| format!("running {compiler}"))?;
        if !out.status.success() {
            let said = String::from_utf8_lossy(&out.stderr);
            let first = said.lines().find(|l| l.contains("error")).unwrap_or("the compiler failed").to_string();
            return Ok(Err(first));
        }
        let objcopy = objcopy_for(&compiler);
        let status = std::process::Command::new(&objcopy)
            .args(["--strip-debug", "--remove-section=.comment"])
            .arg(&obj)
            .arg(&stripped)
            .status()
            .with_context(|| format!("running {objcopy}"))?;
        if !status.success() {
            bail!("{objcopy} could not strip {}", obj.display());
        }
        Ok(Ok(std::fs::read(&stripped)?))
    }
}

/// The findings of mutants whose stripped objects are given (in id order), against the
/// original's object.
pub fn judge(original: &[u8], objects: &Objects) -> BTreeMap<String, Finding> {
    let mut seen: Vec<(&[u8], &str)> = vec![];
    let mut out = BTreeMap::new();
    for (id, obj) in objects {
        let finding = match obj {
            Err(reason) => Finding::CompileError { reason: reason.clone() },
            Ok(bytes) if bytes.as_slice() == original => Finding::Equivalent,
            Ok(bytes) => match seen.iter().find(|(b, _)| *b == bytes.as_slice()) {
                Some((_, first)) => Finding::Duplicate { of: first.to_string() },
                None => {
                    seen.push((bytes, id));
                    Finding::Differs
                }
            },
        };
        out.insert(id.clone(), finding);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const CMD: &str = "savedcmd_kernel/trace/trace_events_user.o := gcc -Wp,-MMD,kernel/trace/.trace_events_user.o.d -nostdinc -I../src/arch/x86/include -O2 -fmacro-prefix-map=../src/= -c -o kernel/trace/trace_events_user.o ../src/kernel/trace/trace_events_user.c\n\nsource_kernel/trace/trace_events_user.o := ../src/kernel/trace/trace_events_user.c\n";

    #[test]
    fn the_saved_command_compiles_our_copy_into_our_object() {
        let command = saved_command(CMD, "kernel/trace/trace_events_user.o").unwrap();
        assert!(command.starts_with("gcc -Wp,-MMD,"));
        let rel = "kernel/trace/trace_events_user.c";
        let (cmd, compiler) = rewrite(
            &command,
            rel,
            Path::new("/tmp/w1/kernel/trace/trace_events_user.c"),
            Path::new("/tmp/w1/out.o"),
            Path::new("/cache/build/x86_64-a-b"),
        )
        .unwrap();
        assert_eq!(compiler, "gcc");
        assert_eq!(
            cmd,
            "gcc -fmacro-prefix-map=/tmp/w1/= -I/cache/build/x86_64-a-b/../src/kernel/trace -nostdinc \
             -I../src/arch/x86/include -O2 -fmacro-prefix-map=../src/= -c -o /tmp/w1/out.o \
             /tmp/w1/kernel/trace/trace_events_user.c"
        );
        assert!(saved_command("nothing here", "kernel/trace/trace_events_user.o").is_err());
        assert_eq!(objcopy_for("s390x-linux-gnu-gcc"), "s390x-linux-gnu-objcopy");
        assert_eq!(objcopy_for("gcc"), "objcopy");
    }

    #[test]
    fn an_object_like_the_originals_is_equivalent_and_like_anothers_a_duplicate() {
        let objects = vec![
            ("a".to_string(), Ok(b"orig".to_vec())),
            ("b".to_string(), Ok(b"one".to_vec())),
            ("c".to_string(), Ok(b"one".to_vec())),
            ("d".to_string(), Err("error: bad".to_string())),
            ("e".to_string(), Ok(b"two".to_vec())),
        ];
        let found = judge(b"orig", &objects);
        assert_eq!(found["a"], Finding::Equivalent);
        assert_eq!(found["b"], Finding::Differs);
        assert_eq!(found["c"], Finding::Duplicate { of: "b".into() });
        assert_eq!(found["d"], Finding::CompileError { reason: "error: bad".into() });
        assert_eq!(found["e"], Finding::Differs);
        let record = Record {
            digest: "d".into(),
            arches: BTreeMap::from([("x86_64".to_string(), found.clone()), ("s390x".to_string(), found)]),
        };
        assert_eq!(record.proven().keys().collect::<Vec<_>>(), ["a"]);
    }
}
