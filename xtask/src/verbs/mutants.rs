//! `cargo xtask mutants`: the mutants of a kernel C file (default
//! `kernel/trace/trace_events_user.c` of the default kernel source), selected by `--in-diff`
//! and `--shard`, listed as text or JSON. Running them is not built yet.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde_json::json;

use crate::flags::MutantsArgs;
use crate::kernel::source::{self, Spec};
use crate::mutants::find::{self, Operator};
use crate::mutants::select::{self, Shard};
use crate::support::exit::{error, Kind};

/// The default file, inside the kernel tree.
pub const DEFAULT_FILE: &str = "kernel/trace/trace_events_user.c";

impl MutantsArgs {
    pub fn run(self) -> Result<u8> {
        let shard = match &self.shard {
            Some(s) => Some(s.parse::<Shard>().map_err(|e| error(Kind::BadInput, e))?),
            None => None,
        };
        let (path, name) = match &self.file {
            Some(file) => (file.clone(), name_in_tree(file)),
            None => {
                let cache = crate::kernel::cache::root(self.cache_dir.as_deref());
                let ident = source::identify(&Spec::Debian, &cache)?;
                (source::pristine_root(&Spec::Debian, &ident, &cache)?.join(DEFAULT_FILE), DEFAULT_FILE.to_string())
            }
        };
        let text = std::fs::read_to_string(&path)
            .map_err(|e| error(Kind::BadInput, format!("--file {}: {e}", path.display())))?;
        let mut mutants = find::mutants(&name, &text)?;
        let total = mutants.len();
        if let Some(patch) = &self.in_diff {
            let diff = std::fs::read_to_string(patch)
                .map_err(|e| error(Kind::BadInput, format!("--in-diff {}: {e}", patch.display())))?;
            mutants = select::on_lines(mutants, &select::patch_lines(&diff, &name));
        }
        if let Some(shard) = shard {
            mutants.retain(|m| shard.takes(m));
        }
        if self.json {
            let list: Vec<_> = mutants
                .iter()
                .map(|m| {
                    let mut v = serde_json::to_value(m).expect("a mutant serialises");
                    v["diff"] = json!(m.diff(&text));
                    v
                })
                .collect();
            println!("{}", serde_json::to_string_pretty(&list).context("writing JSON")?);
            return Ok(0);
        }
        if self.list {
            for m in &mutants {
                println!("{}  {}:{}  {}  {}  {}", m.id, m.file, m.line, m.function, m.operator, m.change());
            }
        }
        let per_operator: Vec<String> = Operator::ALL
            .iter()
            .map(|op| format!("{op} {}", mutants.iter().filter(|m| m.operator == *op).count()))
            .collect();
        eprintln!(
            "{} mutants of {} ({} in the file): {}",
            mutants.len(),
            path.display(),
            total,
            per_operator.join(", ")
        );
        if !self.list {
            eprintln!("running mutants is not built yet: use --list or --json");
        }
        Ok(0)
    }
}

/// A file's path inside its kernel tree (the first ancestor with a Makefile and a Kconfig), or
/// as given when it is in none.
fn name_in_tree(file: &Path) -> String {
    let abs = file.canonicalize().unwrap_or_else(|_| file.to_path_buf());
    let root: Option<PathBuf> = abs
        .ancestors()
        .skip(1)
        .find(|d| d.join("Makefile").is_file() && d.join("Kconfig").is_file())
        .map(Path::to_path_buf);
    match root.and_then(|r| abs.strip_prefix(r).ok().map(Path::to_path_buf)) {
        Some(rel) => rel.to_string_lossy().into_owned(),
        None => file.to_string_lossy().into_owned(),
    }
}
