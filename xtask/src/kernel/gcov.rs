//! A coverage kernel's build side: which objects get GCOV, and the notes files (`.gcno`) and
//! sources kept with the build, from which `coverage/gcov.rs` later reads each scenario's
//! counters.
//!
//! Per object, through make: `GCOV_PROFILE_<stem>.o=y` on make's command line, which Kbuild's
//! `scripts/Makefile.lib` reads exactly as a `GCOV_PROFILE_<stem>.o := y` line in the object's
//! Makefile. The private mirror stays untouched (a Makefile edit there would flip with every
//! switch between a normal and a coverage build sharing the mirror), and only the asked objects
//! are instrumented. `CONFIG_GCOV_PROFILE_FTRACE` instead instruments all of `kernel/trace/`
//! (the ring buffer, trace.c, every event file), which slows every traced write and makes each
//! scenario's snapshot many times larger; see BENCHMARKS.md. The one imprecision: an object of
//! the same file name in another directory is instrumented too; only the asked paths are read.

use std::path::Path;

use anyhow::{Context, Result};

use crate::support::exit::{error, Kind};

/// What `--coverage` instruments when no `--coverage-file` says otherwise.
pub const DEFAULT_FILE: &str = "kernel/trace/trace_events_user.c";
/// Where a build's cache entry keeps its `.gcno` files and sources, by path in the tree.
pub const STORE_DIR: &str = "gcov";

/// Checks the shape of a `--coverage-file`: a relative `.c` path inside the tree.
pub fn check_name(file: &str) -> Result<()> {
    let bad = file.starts_with('/')
        || !file.ends_with(".c")
        || file.split('/').any(|c| c.is_empty() || c == "." || c == "..")
        || file.contains(char::is_whitespace);
    if bad {
        return Err(error(
            Kind::BadInput,
            format!("--coverage-file {file}: expected a .c file relative to the kernel tree, such as {DEFAULT_FILE}"),
        ));
    }
    Ok(())
}

/// make's variables for these sources.
pub fn make_vars(files: &[String]) -> Vec<String> {
    files
        .iter()
        .map(|f| {
            let stem = f.rsplit('/').next().unwrap_or(f).trim_end_matches(".c");
            format!("GCOV_PROFILE_{stem}.o=y")
        })
        .collect()
}

/// Every file exists in the (mirrored) source tree.
pub fn check_sources(srctree: &Path, files: &[String]) -> Result<()> {
    for f in files {
        check_name(f)?;
        if !srctree.join(f).is_file() {
            return Err(error(Kind::BadInput, format!("--coverage-file {f}: no such file in {}", srctree.display())));
        }
    }
    Ok(())
}

/// Copies each file's `.gcno` (from the `O=` build directory) and its source (from the mirror,
/// which a later patch set may change) into `dest/gcov/<path>`; when the patches changed the
/// source, the pristine one too, as `<path>.orig` (what a patch's blind spots are found from).
pub fn keep(dest: &Path, build_dir: &Path, (srctree, pristine): (&Path, &Path), files: &[String]) -> Result<()> {
    for f in files {
        let stem = f.trim_end_matches(".c");
        let gcno = build_dir.join(format!("{stem}.gcno"));
        if !gcno.is_file() {
            return Err(error(
                Kind::CannotBuild,
                format!(
                    "coverage: the build made no {} : is {f} built into this kernel (its Kconfig option set)?",
                    gcno.display()
                ),
            ));
        }
        let to = dest.join(STORE_DIR).join(f);
        std::fs::create_dir_all(to.parent().context("a path with a parent")?)?;
        std::fs::copy(&gcno, to.with_extension("gcno")).with_context(|| format!("copying {}", gcno.display()))?;
        std::fs::copy(srctree.join(f), &to).with_context(|| format!("copying {}", srctree.join(f).display()))?;
        let orig = pristine.join(f);
        // A file the patches added has no pristine side: every line is new.
        let before = std::fs::read(&orig).unwrap_or_default();
        if before != std::fs::read(&to)? {
            std::fs::write(dest.join(STORE_DIR).join(format!("{f}.orig")), before)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_make_variables() {
        assert_eq!(
            make_vars(&[DEFAULT_FILE.into(), "kernel/trace/trace_events.c".into()]),
            ["GCOV_PROFILE_trace_events_user.o=y", "GCOV_PROFILE_trace_events.o=y"]
        );
        check_name(DEFAULT_FILE).unwrap();
        for bad in ["/abs/x.c", "kernel/trace/x.h", "../x.c", "kernel//x.c", "a b.c"] {
            let e = check_name(bad).unwrap_err().to_string();
            assert!(e.contains(&format!("--coverage-file {bad}")), "{e}");
        }
    }

    #[test]
    fn keeps_notes_and_sources_or_names_what_is_missing() {
        let t = tempfile::tempdir().unwrap();
        let (build, src, dest) = (t.path().join("b"), t.path().join("s"), t.path().join("d"));
        std::fs::create_dir_all(build.join("kernel/trace")).unwrap();
        std::fs::create_dir_all(src.join("kernel/trace")).unwrap();
        std::fs::write(src.join(DEFAULT_FILE), "int x;\n").unwrap();
        let files = [DEFAULT_FILE.to_string()];
        check_sources(&src, &files).unwrap();
        let e = check_sources(&src, &["kernel/trace/nope.c".into()]).unwrap_err().to_string();
        assert!(e.contains("no such file"), "{e}");
        let e = keep(&dest, &build, (&src, &src), &files).unwrap_err().to_string();
        assert!(e.contains("trace_events_user.gcno"), "{e}");
        std::fs::write(build.join("kernel/trace/trace_events_user.gcno"), "oncg").unwrap();
        keep(&dest, &build, (&src, &src), &files).unwrap();
        assert!(dest.join("gcov/kernel/trace/trace_events_user.gcno").is_file());
        assert_eq!(std::fs::read_to_string(dest.join("gcov").join(DEFAULT_FILE)).unwrap(), "int x;\n");
        let orig = dest.join("gcov/kernel/trace/trace_events_user.c.orig");
        assert!(!orig.exists(), "unpatched: no pristine copy");
        let pristine = t.path().join("p");
        std::fs::create_dir_all(pristine.join("kernel/trace")).unwrap();
        std::fs::write(pristine.join(DEFAULT_FILE), "int y;\n").unwrap();
        keep(&dest, &build, (&src, &pristine), &files).unwrap();
        assert_eq!(std::fs::read_to_string(orig).unwrap(), "int y;\n");
    }
}
