//! Provisioning: checks for every host tool the project needs and, on Debian as root,
//! installs what is missing, one announced and verified step at a time.

use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result};

use crate::arch::ARCHES;
use crate::exit::{error, Kind};
use crate::progress::line;

/// Debian packages the build and boot phases need, with what each is for.
const PACKAGES: &[(&str, &str)] = &[
    ("gcc", "the x86_64 kernel build"),
    ("libc6-dev", "static x86_64 glibc binaries (ue-tracepoint, the floor /init)"),
    ("gcc-aarch64-linux-gnu", "the arm64 kernel cross build"),
    ("libc6-dev-arm64-cross", "static arm64 test binaries (the floor /init, upstream selftests, ue-tracepoint)"),
    ("gcc-arm-linux-gnueabihf", "the 32-bit arm compat probe (ue-compat32)"),
    ("libc6-dev-armhf-cross", "the 32-bit arm compat probe (ue-compat32)"),
    ("make", "the kernel build"),
    ("flex", "the kernel build (kconfig, dtc)"),
    ("bison", "the kernel build (kconfig, dtc)"),
    ("bc", "the kernel build (timeconst)"),
    ("libelf-dev", "the kernel build (objtool)"),
    ("libssl-dev", "the kernel build (sign-file, certs)"),
    ("cpio", "initramfs tooling"),
    ("xz-utils", "unpacking the kernel source tarball"),
    ("rsync", "the private source mirror"),
    ("patch", "--patch"),
    ("git", "kernel git trees"),
    ("python3", "the kernel's kunit.py parser"),
    ("python3-venv", "the virtualenv of the kcidb-io schema validator"),
    (crate::source::DEBIAN_PACKAGE, "the default kernel source"),
    ("libseccomp-dev", "building virtiofsd"),
    ("libcap-ng-dev", "building virtiofsd"),
    ("pkg-config", "building virtiofsd"),
];

/// What is missing on this host.
#[derive(Debug, Default)]
pub struct Missing {
    pub backports_source: bool,
    /// Packages to take from bookworm-backports (QEMU, to match the preinstalled qemu-utils 10).
    pub backports_packages: Vec<String>,
    pub packages: Vec<String>,
    pub rust_targets: Vec<String>,
    pub virtiofsd: bool,
    /// The `kcidb-io` virtualenv that validates the KCIDB report (`results::tools`).
    pub kcidb_io: bool,
}

impl Missing {
    fn is_empty(&self) -> bool {
        !self.backports_source
            && self.backports_packages.is_empty()
            && self.packages.is_empty()
            && self.rust_targets.is_empty()
            && !self.virtiofsd
            && !self.kcidb_io
    }

    fn needs_root(&self) -> bool {
        self.backports_source || !self.backports_packages.is_empty() || !self.packages.is_empty()
    }
}

#[derive(Debug)]
struct Host {
    debian_like: bool,
    codename: String,
    root: bool,
}

fn host() -> Host {
    let os = std::fs::read_to_string("/etc/os-release").unwrap_or_default();
    let field = |name: &str| {
        os.lines()
            .find_map(|l| l.strip_prefix(&format!("{name}=")))
            .map(|v| v.trim_matches('"').to_string())
            .unwrap_or_default()
    };
    let debian_like = field("ID") == "debian" || field("ID") == "ubuntu" || field("ID_LIKE").contains("debian");
    // The effective uid is the second field of the `Uid:` line.
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let euid = status.lines().find_map(|l| l.strip_prefix("Uid:")).and_then(|l| l.split_whitespace().nth(1));
    Host { debian_like, codename: field("VERSION_CODENAME"), root: euid == Some("0") }
}

fn qemu_packages() -> Vec<&'static str> {
    ARCHES.iter().map(|a| a.qemu_package).collect()
}

/// Checks everything without changing anything.
pub fn check() -> Result<Missing> {
    let host = host();
    let mut missing = Missing::default();
    let on_bookworm = host.codename == "bookworm";
    if on_bookworm && !backports_configured() {
        missing.backports_source = true;
    }
    let all: Vec<&str> = PACKAGES.iter().map(|p| p.0).chain(qemu_packages()).collect();
    let installed = installed_packages(&all);
    for pkg in qemu_packages() {
        if !installed.contains(&pkg.to_string()) {
            if on_bookworm {
                missing.backports_packages.push(pkg.to_string());
            } else {
                missing.packages.push(pkg.to_string());
            }
        }
    }
    for (pkg, _) in PACKAGES {
        if !installed.contains(&pkg.to_string()) {
            missing.packages.push(pkg.to_string());
        }
    }
    let targets = Command::new("rustup").args(["target", "list", "--installed"]).output();
    let targets = match targets {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).into_owned(),
        _ => {
            return Err(error(
                Kind::Infra,
                "`rustup` not found: the guest binaries need rustup to add their Rust targets (see README)",
            ))
        }
    };
    for target in rust_targets() {
        if !targets.lines().any(|l| l.trim() == target) {
            missing.rust_targets.push(target.to_string());
        }
    }
    missing.virtiofsd = virtiofsd().is_none();
    missing.kcidb_io = !crate::results::tools::kcidb_installed();
    Ok(missing)
}

/// Every Rust target the guest binaries need: the agent's (musl), the static-glibc clients'
/// and the 32-bit compat probe's, for each arch.
fn rust_targets() -> Vec<&'static str> {
    ARCHES.iter().flat_map(|a| [a.rust_target, a.glibc_target.triple, a.compat32_target.triple]).collect()
}

/// `dpkg-query` in one call; a host without dpkg has nothing installed as far as we know.
fn installed_packages(names: &[&str]) -> Vec<String> {
    let out = Command::new("dpkg-query").args(["-W", "-f=${Package} ${db:Status-Status}\\n"]).args(names).output();
    let Ok(out) = out else { return Vec::new() };
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.strip_suffix(" installed"))
        .map(|p| p.split(':').next().unwrap_or(p).to_string())
        .collect()
}

fn apt_source_files() -> Vec<PathBuf> {
    let mut files = vec![PathBuf::from("/etc/apt/sources.list")];
    if let Ok(dir) = std::fs::read_dir("/etc/apt/sources.list.d") {
        files.extend(
            dir.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|e| e == "list" || e == "sources")),
        );
    }
    files
}

fn backports_configured() -> bool {
    apt_source_files().iter().any(|f| {
        std::fs::read_to_string(f).unwrap_or_default().lines().any(|l| {
            let l = l.trim();
            !l.starts_with('#') && l.contains("bookworm-backports")
        })
    })
}

/// The Debian archive address this host already uses for bookworm, so the backports source
/// points at the same mirror (the project never names a registry host itself). On a Debian host
/// of another release, the archive of its own release (`--kernel-version` needs one either way).
pub fn debian_archive_uri() -> Option<String> {
    archive_uri_serving(|suite| suite == "bookworm").or_else(|| {
        archive_uri_serving(|suite| {
            ["trixie", "forky", "sid", "stable", "testing", "unstable", "oldstable"].contains(&suite)
        })
    })
}

/// The host's Debian security archive (the source of a `*-security` suite), if it uses one.
pub fn debian_security_uri() -> Option<String> {
    archive_uri_serving(|suite| suite.ends_with("-security"))
}

/// The URI of the host's first apt source (one-line or deb822) with a suite `serves` accepts.
fn archive_uri_serving(serves: impl Fn(&str) -> bool) -> Option<String> {
    for f in apt_source_files() {
        let text = std::fs::read_to_string(&f).unwrap_or_default();
        if f.extension().is_some_and(|e| e == "sources") {
            for stanza in text.split("\n\n") {
                let get = |k: &str| stanza.lines().find_map(|l| l.strip_prefix(k)).map(|v| v.trim().to_string());
                let suites = get("Suites:").unwrap_or_default();
                if suites.split_whitespace().any(&serves) {
                    return get("URIs:").and_then(|u| u.split_whitespace().next().map(String::from));
                }
            }
        } else {
            for l in text.lines() {
                let words: Vec<&str> = l.split_whitespace().filter(|w| !w.starts_with('[')).collect();
                if words.len() >= 3 && words[0] == "deb" && serves(words[2]) {
                    return Some(words[1].to_string());
                }
            }
        }
    }
    None
}

/// The virtiofsd binary: on PATH, or where `cargo install` puts it.
pub fn virtiofsd() -> Option<PathBuf> {
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")));
    let mut candidates: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).map(|d| d.join("virtiofsd")).collect())
        .unwrap_or_default();
    candidates.extend(cargo_home.map(|h| h.join("bin/virtiofsd")));
    candidates.push("/usr/libexec/virtiofsd".into());
    candidates.into_iter().find(|c| Command::new(c).arg("--version").output().is_ok_and(|o| o.status.success()))
}

const BACKPORTS_FILE: &str = "/etc/apt/sources.list.d/user-events-conformance-backports.sources";

/// The commands that install what is missing, as a person would type them.
fn commands(missing: &Missing) -> Vec<String> {
    let mut cmds = Vec::new();
    if missing.backports_source {
        cmds.push(format!(
            "printf 'Types: deb\\nURIs: <your Debian mirror>\\nSuites: bookworm-backports\\nComponents: main\\n' | sudo tee {BACKPORTS_FILE}"
        ));
    }
    if missing.needs_root() {
        cmds.push("sudo apt-get update".into());
    }
    if !missing.backports_packages.is_empty() {
        cmds.push(format!(
            "sudo apt-get install -y --no-install-recommends -t bookworm-backports {}",
            missing.backports_packages.join(" ")
        ));
    }
    if !missing.packages.is_empty() {
        cmds.push(format!("sudo apt-get install -y --no-install-recommends {}", missing.packages.join(" ")));
    }
    if !missing.rust_targets.is_empty() {
        cmds.push(format!("rustup target add {}", missing.rust_targets.join(" ")));
    }
    if missing.virtiofsd {
        cmds.push("cargo install virtiofsd --locked".into());
    }
    if missing.kcidb_io {
        cmds.extend(crate::results::tools::kcidb_install_commands());
    }
    cmds
}

/// Checks, installs what is missing when it can, and verifies. Quiet when all is present.
pub fn run(verbose: bool) -> Result<()> {
    let started = Instant::now();
    let missing = check()?;
    if missing.is_empty() {
        if verbose {
            line(format!(
                "setup: everything present ({} packages, {} rust targets, virtiofsd, kcidb-io) in {:.2} s",
                PACKAGES.len() + ARCHES.len(),
                rust_targets().len(),
                started.elapsed().as_secs_f64()
            ));
        }
        return Ok(());
    }
    let host = host();
    if missing.needs_root() && !(host.root && host.debian_like) {
        let why = if host.debian_like { "not running as root" } else { "this is not a Debian-like system" };
        return Err(error(
            Kind::Infra,
            format!(
                "setup: missing host tools and {why}, so nothing was installed. Run:\n  {}\n(on a non-Debian system, install the equivalents of these packages)",
                commands(&missing).join("\n  ")
            ),
        ));
    }

    if missing.backports_source {
        let uri = debian_archive_uri().ok_or_else(|| {
            error(
                Kind::Infra,
                "setup: cannot find this host's Debian archive for bookworm in /etc/apt to add bookworm-backports",
            )
        })?;
        line(format!("setup: adding the bookworm-backports apt source ({BACKPORTS_FILE})"));
        let text = format!(
            "Types: deb\nURIs: {uri}\nSuites: bookworm-backports\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n"
        );
        std::fs::write(BACKPORTS_FILE, text).with_context(|| format!("writing {BACKPORTS_FILE}"))?;
    }
    if missing.needs_root() {
        line("setup: apt-get update");
        apt(&["update", "-q"])?;
    }
    if !missing.backports_packages.is_empty() {
        line(format!("setup: installing from bookworm-backports: {}", missing.backports_packages.join(" ")));
        let mut args = vec!["install", "-y", "-q", "--no-install-recommends", "-t", "bookworm-backports"];
        args.extend(missing.backports_packages.iter().map(String::as_str));
        apt(&args)?;
    }
    if !missing.packages.is_empty() {
        line(format!("setup: installing {}", missing.packages.join(" ")));
        let mut args = vec!["install", "-y", "-q", "--no-install-recommends"];
        args.extend(missing.packages.iter().map(String::as_str));
        apt(&args)?;
    }
    if !missing.rust_targets.is_empty() {
        line(format!("setup: rustup target add {}", missing.rust_targets.join(" ")));
        status(Command::new("rustup").arg("target").arg("add").args(&missing.rust_targets))?;
    }
    if missing.virtiofsd {
        line("setup: cargo install virtiofsd --locked (a few minutes on 2 cores)");
        status(Command::new("cargo").args(["install", "virtiofsd", "--locked", "--quiet"]))?;
    }
    if missing.kcidb_io {
        line(format!(
            "setup: installing kcidb-io {} (the KCIDB schema validator) into {}",
            crate::results::tools::KCIDB_IO_VERSION,
            crate::results::tools::kcidb_venv().display()
        ));
        crate::results::tools::install_kcidb()?;
    }

    let after = check()?;
    if !after.is_empty() {
        return Err(error(
            Kind::Infra,
            format!("setup: still missing after installing; run by hand:\n  {}", commands(&after).join("\n  ")),
        ));
    }
    line(format!("setup: verified, everything present ({:.0} s)", started.elapsed().as_secs_f64()));
    Ok(())
}

fn apt(args: &[&str]) -> Result<()> {
    status(Command::new("apt-get").args(args).env("DEBIAN_FRONTEND", "noninteractive"))
}

fn status(cmd: &mut Command) -> Result<()> {
    let st = cmd.status().with_context(|| format!("running {cmd:?}"))?;
    if !st.success() {
        return Err(error(Kind::Infra, format!("setup: {cmd:?} failed ({st})")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_for_a_bare_host_list_every_step() {
        let missing = Missing {
            backports_source: true,
            backports_packages: vec!["qemu-system-x86".into()],
            packages: vec!["flex".into(), "linux-source-6.12".into()],
            rust_targets: vec!["aarch64-unknown-linux-musl".into()],
            virtiofsd: true,
            kcidb_io: true,
        };
        let cmds = commands(&missing);
        assert_eq!(cmds.len(), 8, "{cmds:#?}");
        assert!(cmds[2].ends_with("-t bookworm-backports qemu-system-x86"));
        assert_eq!(cmds[3], "sudo apt-get install -y --no-install-recommends flex linux-source-6.12");
        assert_eq!(cmds[4], "rustup target add aarch64-unknown-linux-musl");
        assert_eq!(cmds[5], "cargo install virtiofsd --locked");
        assert!(cmds[6].starts_with("python3 -m venv ") && cmds[7].ends_with("pip install --quiet kcidb-io==141"));
        assert!(Missing::default().is_empty());
    }

    /// The guest clients' linkers and static C libraries are installed by setup, and their
    /// Rust targets are checked.
    #[test]
    fn every_helper_target_is_provisioned() {
        let packages: Vec<&str> = PACKAGES.iter().map(|p| p.0).collect();
        for arch in ARCHES {
            for target in [&arch.glibc_target, &arch.compat32_target] {
                for pkg in target.packages {
                    assert!(packages.contains(pkg), "{pkg} ({}) is not in PACKAGES", target.triple);
                }
                assert!(rust_targets().contains(&target.triple), "{}", target.triple);
            }
        }
        assert_eq!(
            rust_targets(),
            [
                "x86_64-unknown-linux-musl",
                "x86_64-unknown-linux-gnu",
                "i686-unknown-linux-musl",
                "aarch64-unknown-linux-musl",
                "aarch64-unknown-linux-gnu",
                "armv7-unknown-linux-gnueabihf"
            ]
        );
    }
}
