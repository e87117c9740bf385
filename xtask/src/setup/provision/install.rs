//! What is missing installed, or named: the host (root, Debian-like, apt), the report of the
//! missing pieces with their packages and commands, and the install itself, one announced and
//! verified step at a time, logged under the cache.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Result;

use super::backports::{add_backports_source, backports_configured, BACKPORTS_FILE};
use super::items::{fedora, items, Fedora, Item, Probe, Source};
use super::probe::{missing, on_path, venv_works, virtiofsd_builds};
use super::Needs;
use crate::arch::ARCHES;
use crate::support::cmd::{cmd, sh, StepLog};
use crate::support::exit::{error, Kind};
use crate::support::progress::line;

#[derive(Debug)]
struct Host {
    debian_like: bool,
    codename: String,
    root: bool,
    apt: bool,
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
    Host {
        debian_like,
        codename: field("VERSION_CODENAME"),
        root: euid == Some("0"),
        apt: on_path("apt-get").is_some(),
    }
}

/// What the install hints depend on besides the missing pieces.
#[derive(Debug, Clone, Default)]
pub struct Hints {
    /// Debian 12: QEMU comes from bookworm-backports; `Some(true)` when its apt source exists.
    pub bookworm_backports: Option<bool>,
}

impl Hints {
    pub fn here() -> Hints {
        let bookworm = host().codename == "bookworm";
        Hints { bookworm_backports: bookworm.then(backports_configured) }
    }
}

fn qemu_packages() -> Vec<&'static str> {
    ARCHES.iter().map(|a| a.qemu_package).collect()
}

/// Where a piece comes from, for its line in the report.
fn origin(source: &Source) -> String {
    match source {
        Source::Package(deb) => match fedora(deb) {
            Fedora::Package(f) => format!("Debian/Ubuntu {deb}, Fedora {f}"),
            Fedora::NotPackaged(why) => format!("Debian/Ubuntu {deb}; Fedora: {why}"),
        },
        Source::RustTarget(t) => format!("rustup target add {t}"),
        Source::Virtiofsd => "Fedora virtiofsd; elsewhere cargo install virtiofsd --locked \
                              (Debian/Ubuntu: with libseccomp-dev libcap-ng-dev pkg-config)"
            .into(),
        Source::Venv(_) => "a virtualenv in the cache, made by `cargo xtask setup` as any user \
                          (Debian/Ubuntu: needs python3-venv)"
            .into(),
        Source::Cargo(_) => "cargo install into the cache, by `cargo xtask setup` as any user".into(),
    }
}

/// The missing pieces, one line each with its Debian/Ubuntu and Fedora package, then the
/// commands that install them.
pub fn report(missing: &[Item], hints: &Hints) -> String {
    let mut out: Vec<String> =
        missing.iter().map(|i| format!("  {} ({}): {}", i.what, i.why, origin(&i.source))).collect();
    out.push("to install them:".into());
    out.extend(commands(missing, hints).into_iter().map(|c| format!("  {c}")));
    out.push("or, on a host prepared another way, skip provisioning with --no-setup (XTASK_NO_SETUP=1)".into());
    out.join("\n")
}

/// Debian packages: QEMU from bookworm-backports on Debian 12, the rest from the release.
fn debian_packages(missing: &[Item], bookworm: bool) -> (Vec<&'static str>, Vec<&'static str>) {
    let mut backports = Vec::new();
    let mut release = Vec::new();
    for item in missing {
        if let Source::Package(p) = item.source {
            let list = if bookworm && qemu_packages().contains(&p) { &mut backports } else { &mut release };
            if !list.contains(&p) {
                list.push(p);
            }
        }
    }
    (backports, release)
}

/// The commands that install what is missing, as a person would type them.
pub(super) fn commands(missing: &[Item], hints: &Hints) -> Vec<String> {
    let mut cmds = Vec::new();
    let (backports, release) = debian_packages(missing, hints.bookworm_backports.is_some());
    if !backports.is_empty() && hints.bookworm_backports == Some(false) {
        cmds.push(format!(
            "Debian 12: printf 'Types: deb\\nURIs: <your Debian mirror>\\nSuites: bookworm-backports\\nComponents: main\\n' | sudo tee {BACKPORTS_FILE}"
        ));
    }
    if !backports.is_empty() || !release.is_empty() {
        cmds.push("Debian/Ubuntu: sudo apt-get update".into());
    }
    if !backports.is_empty() {
        cmds.push(format!(
            "Debian 12: sudo apt-get install -y --no-install-recommends -t bookworm-backports {}",
            backports.join(" ")
        ));
    }
    if !release.is_empty() {
        cmds.push(format!("Debian/Ubuntu: sudo apt-get install -y --no-install-recommends {}", release.join(" ")));
    }
    let mut fedora_pkgs: Vec<&str> = Vec::new();
    for item in missing {
        let f = match item.source {
            Source::Package(p) => fedora(p),
            Source::Virtiofsd => Fedora::Package("virtiofsd"),
            _ => continue,
        };
        if let Fedora::Package(f) = f {
            if !fedora_pkgs.contains(&f) {
                fedora_pkgs.push(f);
            }
        }
    }
    if !fedora_pkgs.is_empty() {
        cmds.push(format!("Fedora: sudo dnf install {}", fedora_pkgs.join(" ")));
    }
    let targets: Vec<&str> =
        missing.iter().filter_map(|i| if let Source::RustTarget(t) = i.source { Some(t) } else { None }).collect();
    if !targets.is_empty() {
        cmds.push(format!("rustup target add {}", targets.join(" ")));
    }
    if missing.iter().any(|i| i.source == Source::Virtiofsd) {
        cmds.push("Debian/Ubuntu: cargo install virtiofsd --locked".into());
    }
    for item in missing {
        match item.source {
            Source::Venv(tool) => cmds.extend(tool.install_commands()),
            Source::Cargo(tool) => cmds.extend(tool.install_commands()),
            _ => {}
        }
    }
    cmds
}

/// Checks, installs what is missing when it can, and verifies.
pub fn provision(needs: &Needs, verbose: bool) -> Result<()> {
    let started = Instant::now();
    let items = items(needs);
    let missing = missing(&items);
    let arches: Vec<&str> = needs.arches.iter().map(|a| a.name).collect();
    if missing.is_empty() {
        if verbose {
            line(format!(
                "setup: everything present ({} pieces for {}) in {:.2} s",
                items.len(),
                arches.join(", "),
                started.elapsed().as_secs_f64()
            ));
        }
        return Ok(());
    }
    let host = host();
    let wanted = wanted_packages(&missing);
    let rust_targets: Vec<&str> =
        missing.iter().filter_map(|i| if let Source::RustTarget(t) = i.source { Some(t) } else { None }).collect();
    let no_rustup = !rust_targets.is_empty() && on_path("rustup").is_none();
    let can_apt = host.root && host.debian_like && host.apt;
    if (!wanted.is_empty() && !can_apt) || no_rustup {
        return Err(cannot_install(&host, no_rustup, &missing, wanted, &arches));
    }
    install(&host, &missing, &wanted, &rust_targets)?;
    let after = self::missing(&items);
    if !after.is_empty() {
        return Err(error(
            Kind::Infra,
            format!("setup: still missing after installing:\n{}", report(&after, &Hints::here())),
        ));
    }
    line(format!("setup: verified, everything present ({:.0} s)", started.elapsed().as_secs_f64()));
    Ok(())
}

/// The distribution packages to install: the missing pieces' own, and what the user-level
/// steps need (virtiofsd's build, a Python venv).
fn wanted_packages(missing: &[Item]) -> Vec<Item> {
    let mut wanted: Vec<Item> = missing.iter().filter(|i| matches!(i.source, Source::Package(_))).cloned().collect();
    let prerequisite = |what: &str, pkg: &'static str| Item {
        what: what.into(),
        why: "installing the pieces above".into(),
        probe: Probe::Program(what.into()),
        source: Source::Package(pkg),
    };
    if missing.iter().any(|i| i.source == Source::Virtiofsd) && !virtiofsd_builds() {
        for pkg in ["libseccomp-dev", "libcap-ng-dev", "pkg-config"] {
            wanted.push(prerequisite(pkg, pkg));
        }
    }
    if missing.iter().any(|i| matches!(i.source, Source::Venv(_))) && !venv_works() {
        wanted.push(prerequisite("python3-venv", "python3-venv"));
    }
    wanted
}

/// Why nothing was installed on this host, with every missing piece and its packages.
fn cannot_install(host: &Host, no_rustup: bool, missing: &[Item], wanted: Vec<Item>, arches: &[&str]) -> anyhow::Error {
    let why = if no_rustup {
        "rustup is not on PATH to add the Rust targets"
    } else if !host.debian_like {
        "this is not a Debian-like system"
    } else if !host.root {
        "not running as root"
    } else {
        "apt-get is not on PATH"
    };
    let mut all = missing.to_vec();
    all.extend(wanted.into_iter().filter(|w| !missing.contains(w)));
    error(
        Kind::Infra,
        format!(
            "setup: this command ({}) needs what this host lacks, and {why}, so nothing was installed:\n{}",
            arches.join(", "),
            report(&all, &Hints::here())
        ),
    )
}

/// Installs, one announced and logged step at a time: the Debian packages (QEMU from
/// bookworm-backports on Debian 12, its source added if need be), the Rust targets, virtiofsd,
/// the Python tools, the Rust tools.
fn install(host: &Host, missing: &[Item], wanted: &[Item], rust_targets: &[&str]) -> Result<()> {
    let bookworm = host.codename == "bookworm";
    let (backports, release) = debian_packages(wanted, bookworm);
    let mut log = StepLog::new(log_path());
    line(format!("setup: installing what is missing; the tools' output goes to {}", log.path().display()));
    if !backports.is_empty() && !backports_configured() {
        add_backports_source()?;
    }
    let sh = sh()?;
    let apt = |args: &[&str]| {
        let mut all = vec!["-q"];
        all.extend(args);
        cmd!(sh, "apt-get {all...}").env("DEBIAN_FRONTEND", "noninteractive")
    };
    if !backports.is_empty() || !release.is_empty() {
        log.step("setup: apt-get update", apt(&["update"]))?;
    }
    if !backports.is_empty() {
        let mut args = vec!["install", "-y", "--no-install-recommends", "-t", "bookworm-backports"];
        args.extend(&backports);
        log.step(&format!("setup: installing from bookworm-backports: {}", backports.join(" ")), apt(&args))?;
    }
    if !release.is_empty() {
        let mut args = vec!["install", "-y", "--no-install-recommends"];
        args.extend(&release);
        log.step(&format!("setup: installing {}", release.join(" ")), apt(&args))?;
    }
    if !rust_targets.is_empty() {
        let label = format!("setup: rustup target add {}", rust_targets.join(" "));
        log.step(&label, cmd!(sh, "rustup target add {rust_targets...}"))?;
    }
    if missing.iter().any(|i| i.source == Source::Virtiofsd) {
        let label = "setup: cargo install virtiofsd --locked (a few minutes on 2 cores)";
        log.step(label, cmd!(sh, "cargo install virtiofsd --locked"))?;
    }
    for item in missing {
        match item.source {
            Source::Venv(tool) => tool.install(&mut log)?,
            Source::Cargo(tool) => tool.install(&mut log)?,
            _ => {}
        }
    }
    Ok(())
}

/// Where this setup's tools write: `<cache>/logs/setup-<date>-<time>.log`.
fn log_path() -> PathBuf {
    let stamp = jiff::Zoned::now().strftime("%Y%m%d-%H%M%S").to_string();
    crate::kernel::cache::root(None).join("logs").join(format!("setup-{stamp}.log"))
}
