//! Whether a piece is present, by capability: a program on PATH, a header the compiler finds,
//! a static C library, a Rust target's standard library, a file, a working virtualenv.

use std::path::PathBuf;
use std::sync::OnceLock;

use super::items::{Item, Probe};
use crate::support::cmd::{cmd, sh, succeeds, text};

/// The pieces of `items` this host lacks.
pub fn missing(items: &[Item]) -> Vec<Item> {
    let sysroot = OnceLock::new();
    items.iter().filter(|i| !present(&i.probe, &sysroot)).cloned().collect()
}

pub(super) fn present(probe: &Probe, sysroot: &OnceLock<Option<PathBuf>>) -> bool {
    match probe {
        Probe::Program(name) => on_path(name).is_some(),
        Probe::Qemu(arch) => crate::vm::qemu::qemu_binary(arch, crate::vm::qemu::qemu_search_path().as_deref()).is_ok(),
        Probe::Header { cc, header } => compiler_finds(cc, header),
        Probe::StaticLibc { cc } => static_libc(cc).is_some(),
        Probe::RustTarget(t) => sysroot
            .get_or_init(rust_sysroot)
            .as_ref()
            .is_some_and(|s| s.join("lib/rustlib").join(t).join("lib").is_dir()),
        Probe::File(path) => path.is_file(),
        Probe::Virtiofsd => crate::vm::virtiofsd::binary().is_some(),
        Probe::Venv(tool) => tool.installed(),
        Probe::Cargo(tool) => tool.installed(),
        Probe::PostgresServer => postgres_bin().is_some(),
    }
}

/// The folder of a PostgreSQL server's programs: `initdb` and `pg_ctl` on PATH, else Debian's
/// `/usr/lib/postgresql/<major>/bin` (the newest major).
pub fn postgres_bin() -> Option<PathBuf> {
    if let (Some(initdb), Some(_)) = (on_path("initdb"), on_path("pg_ctl")) {
        return initdb.parent().map(std::path::Path::to_path_buf);
    }
    let mut majors: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .flatten()
        .filter_map(|e| Some((e.file_name().to_str()?.parse().ok()?, e.path().join("bin"))))
        .filter(|(_, bin): &(u32, PathBuf)| bin.join("initdb").is_file() && bin.join("pg_ctl").is_file())
        .collect();
    majors.sort();
    majors.pop().map(|(_, bin)| bin)
}

pub(super) fn on_path(name: &str) -> Option<PathBuf> {
    crate::vm::qemu::find_program(name, std::env::var_os("PATH").as_deref())
}

/// Whether `cc` preprocesses `#include <header>`.
fn compiler_finds(cc: &str, header: &str) -> bool {
    let Ok(sh) = sh() else { return false };
    succeeds(cmd!(sh, "{cc} -E -x c - -o /dev/null").stdin(format!("#include <{header}>\n")))
}

/// The static C library `cc` links with `-static`: `-print-file-name` answers the bare name
/// when it has none.
fn static_libc(cc: &str) -> Option<PathBuf> {
    let sh = sh().ok()?;
    let path = PathBuf::from(text(cmd!(sh, "{cc} -print-file-name=libc.a")).ok()?);
    (path.is_absolute() && path.is_file()).then_some(path)
}

/// The sysroot of the Rust toolchain this checkout builds with.
fn rust_sysroot() -> Option<PathBuf> {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let sh = sh().ok()?;
    // In the checkout, so its rust-toolchain file (if any) picks the toolchain.
    sh.change_dir(crate::support::checkout::project_root());
    text(cmd!(sh, "{rustc} --print sysroot")).ok().map(PathBuf::from)
}

/// Whether `python3 -m venv` can make the tools' virtualenvs (Debian splits it into python3-venv).
pub(super) fn venv_works() -> bool {
    sh().is_ok_and(|sh| succeeds(cmd!(sh, "python3 -c 'import ensurepip, venv'")))
}

/// Whether `cargo install virtiofsd` finds the C libraries it links.
pub(super) fn virtiofsd_builds() -> bool {
    sh().is_ok_and(|sh| succeeds(cmd!(sh, "pkg-config --exists libseccomp libcap-ng")))
}
