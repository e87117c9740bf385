//! The kernel's own user_events selftests built for a kernel: `tools/testing/selftests/user_events`
//! of its mirror tree, static, against that tree's UAPI headers, everything written under the
//! cache; the test programs and their deadline read from the folder's Makefile and `settings`.

use std::path::PathBuf;

use anyhow::{Context, Result};

use crate::kernel::build::Built;
use crate::support::cmd::cmd;
use crate::support::exit::{error, Kind};
use crate::support::progress::Task;

/// The selftests' folder in the kernel tree.
pub const SELFTEST_DIR: &str = "tools/testing/selftests/user_events";
/// The deadline when the selftests' `settings` file names none.
const DEFAULT_TIMEOUT_S: u64 = 120;

/// The selftest binaries built for one kernel.
pub struct Binaries {
    pub names: Vec<String>,
    pub dir: PathBuf,
    pub timeout_s: u64,
}

/// Builds `tools/testing/selftests/user_events` statically from the kernel's own mirror tree,
/// against that tree's UAPI headers; everything written goes under the cache, never the tree.
pub fn build(built: &Built) -> Result<Binaries> {
    let arch = built.arch;
    let src = built.source.as_ref().ok_or_else(|| {
        error(Kind::BadInput, "upstream selftests need the kernel's source: not available with --kernel-image")
    })?;
    let (mirror, _lock) = crate::kernel::build::source_tree(src)?;
    let dir = mirror.join(SELFTEST_DIR);
    let makefile = std::fs::read_to_string(dir.join("Makefile")).map_err(|e| {
        error(Kind::CannotBuild, format!("{}: {e} (this kernel has no user_events selftests)", dir.display()))
    })?;
    let names = test_programs(&makefile);
    let settings = std::fs::read_to_string(dir.join("settings")).unwrap_or_default();
    let timeout_s = settings_timeout(&settings).unwrap_or(DEFAULT_TIMEOUT_S);

    let out = src.cache_dir.join("selftests").join(format!("{}-{}", arch.name, &built.metadata.key[..24]));
    let (objtree, headers, bin) = (out.join("obj"), out.join("headers"), out.join("bin"));
    std::fs::create_dir_all(&bin)?;
    let log_path = out.join("build.log");
    let mut log = String::new();
    let task = Task::start(format!("{}: building the upstream user_events selftests", arch.name));
    // O= keeps fixdep, unifdef and usr/ out of the (hard-linked) mirror.
    let sh = crate::support::cmd::sh()?;
    let (o, vars, hdr_path) = (format!("O={}", objtree.display()), arch.make_vars(), &headers);
    let hdr = cmd!(sh, "make -C {mirror} {o} {vars...} INSTALL_HDR_PATH={hdr_path} headers_install");
    let cross = Some(format!("CROSS_COMPILE={}", arch.cross_compile)).filter(|_| !arch.cross_compile.is_empty());
    // lib.mk reads KHDR_INCLUDES (default: the tree's own usr/include) and USERLDFLAGS.
    let khdr = format!("KHDR_INCLUDES=-isystem {}", headers.join("include").display());
    let output = &bin;
    let tests = cmd!(sh, "make -C {dir} OUTPUT={output} {cross...} {khdr} USERLDFLAGS=-static");
    // Captured whole, not streamed: the log is written once each make ends.
    for cmd in [hdr, tests] {
        let shown = cmd.to_string();
        log.push_str(&format!("$ {shown}\n"));
        let run = cmd.ignore_status().output().with_context(|| format!("starting {shown}"))?;
        log.push_str(&String::from_utf8_lossy(&run.stdout));
        log.push_str(&String::from_utf8_lossy(&run.stderr));
        std::fs::write(&log_path, &log)?;
        if !run.status.success() {
            drop(task);
            return Err(error(
                Kind::CannotBuild,
                format!(
                    "{}: building the upstream selftests failed ({})\n==== first errors ====\n{}\n==== full log: {} ====",
                    arch.name,
                    run.status,
                    first_errors(&log),
                    log_path.display()
                ),
            ));
        }
    }
    task.finish(format!("{} ({})", names.join(" "), bin.display()));
    Ok(Binaries { names, dir: bin, timeout_s })
}

/// `TEST_GEN_PROGS = a b` (and `+=` lines) from a selftest Makefile.
fn test_programs(makefile: &str) -> Vec<String> {
    let mut names = Vec::new();
    for l in makefile.lines() {
        let Some(rest) = l.strip_prefix("TEST_GEN_PROGS") else { continue };
        let rest = rest.trim_start();
        let Some(value) = ["+=", ":=", "="].iter().find_map(|op| rest.strip_prefix(op)) else { continue };
        if !rest.starts_with("+=") {
            names.clear();
        }
        names.extend(value.split_whitespace().map(str::to_string));
    }
    names
}

fn settings_timeout(settings: &str) -> Option<u64> {
    settings.lines().find_map(|l| l.trim().strip_prefix("timeout=")?.trim().parse().ok())
}

/// The compiler's error lines, or the log's tail when there are none.
fn first_errors(log: &str) -> String {
    let errors: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("error:") || l.contains("Error ") || l.contains("undefined reference"))
        .take(12)
        .collect();
    if errors.is_empty() {
        log.lines().rev().take(12).collect::<Vec<_>>().into_iter().rev().collect::<Vec<_>>().join("\n")
    } else {
        errors.join("\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn makefile_and_settings_are_read() {
        let mk = "CFLAGS += -Wall\nTEST_GEN_PROGS = ftrace_test dyn_test\nTEST_GEN_PROGS += perf_test abi_test\n";
        assert_eq!(test_programs(mk), ["ftrace_test", "dyn_test", "perf_test", "abi_test"]);
        assert_eq!(settings_timeout("timeout=90\n"), Some(90));
        assert_eq!(settings_timeout(""), None);
    }
}
