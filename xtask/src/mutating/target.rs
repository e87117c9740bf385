//! The file mutated: `--file`, or `kernel/trace/trace_events_user.c` of the default kernel
//! source (or `--kernel-version`'s) with the `--patch`es applied; its path inside its kernel
//! tree.

use std::path::{Path, PathBuf};

use anyhow::Result;

use crate::cli::MutantsArgs;
use crate::kernel::source::{self, Spec};
use crate::support::exit::{error, Kind};

/// The default file, inside the kernel tree.
pub const DEFAULT_FILE: &str = "kernel/trace/trace_events_user.c";

/// The file mutated: where it was read, its path in the kernel tree, its text (the
/// `--patch`es applied), and those patches.
pub struct Target {
    pub path: PathBuf,
    pub name: String,
    pub text: String,
    pub patches: Vec<PathBuf>,
    /// The source's flags for the mutants' builds and runs (`--kernel-version X`), empty for
    /// the default source.
    pub source_args: Vec<String>,
}

impl Target {
    /// The file `--file` names, or the default kernel's with `--patch`es applied.
    pub fn of(args: &MutantsArgs) -> Result<Target> {
        let (path, name, source_args) = match &args.file {
            Some(file) => (file.clone(), name_in_tree(file), vec![]),
            None => {
                let cache = crate::kernel::cache::root(args.cache_dir.as_deref());
                let (spec, source_args) = match &args.kernel_version {
                    Some(v) => (
                        Spec::DebianVersion(crate::kernel::debian::fetch(v, &cache)?),
                        vec!["--kernel-version".to_string(), v.to_string()],
                    ),
                    None => (Spec::Debian, vec![]),
                };
                let ident = source::identify(&spec, &cache)?;
                let root = source::pristine_root(&spec, &ident, &cache)?;
                if !args.patches.is_empty() {
                    // Absolute: `patch -d` and the mutants' runs read them from elsewhere.
                    let patches: Vec<PathBuf> = args
                        .patches
                        .iter()
                        .map(|p| {
                            p.canonicalize().map_err(|e| error(Kind::BadInput, format!("--patch {}: {e}", p.display())))
                        })
                        .collect::<Result<_>>()?;
                    let changed = crate::coverage::map::change_texts(&root, &[], &patches, &[DEFAULT_FILE.into()])?;
                    let text = changed.into_iter().next().map(|c| c.new).unwrap_or_default();
                    return Ok(Target {
                        path: root.join(DEFAULT_FILE),
                        name: DEFAULT_FILE.into(),
                        text,
                        patches,
                        source_args,
                    });
                }
                (root.join(DEFAULT_FILE), DEFAULT_FILE.to_string(), source_args)
            }
        };
        let text = std::fs::read_to_string(&path)
            .map_err(|e| error(Kind::BadInput, format!("--file {}: {e}", path.display())))?;
        Ok(Target { path, name, text, patches: vec![], source_args })
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
