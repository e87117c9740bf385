//! `--kernel-version X`: Debian's `linux-source-X` package, fetched with a private apt
//! configuration in the cache (never the host's sources, state or package database), verified
//! against the Debian archive keyring, unpacked into the cache and built from like a tarball.
//!
//! The private configuration (`<cache>/debian/apt/apt.conf`) names its own sources list,
//! state, lists and archive folders, reads none of the host's `apt.conf.d` fragments (their
//! hooks clean the host's caches and refresh PackageKit) and inherits only the host's
//! network-facing settings: proxies and the validity checks. Its sources are the Debian archive
//! the host already uses ([`archive_uri`]) with the suites that carry
//! `linux-source-*` packages ([`MAIN_SUITES`], [`SECURITY_SUITES`]).
//!
//! Signatures are always checked: every source is `signed-by` the host's
//! `debian-archive-keyring`. `[trusted=yes]` or `Acquire::AllowInsecureRepositories` would
//! accept whatever a mirror or a network in the middle serves, and the tarball goes straight
//! into a kernel build. When a suite is signed by a key the host's keyring predates (sid moves
//! to new keys before an old stable's keyring learns them), the newest `debian-archive-keyring`
//! package is fetched from the suites that did verify and its keyrings are added: trust still
//! starts at the host's keyring.
//!
//! A package already downloaded is used with no network at all; the newest download of a
//! series wins unless a version is pinned (`7.3=7.3.4-1~bpo13+1`).

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::support::cmd::{cmd, sh, stdout, text, Cmd, Shell};
use crate::support::exit::{error, Kind};
use crate::support::progress;

/// Suites of the main Debian archive searched for `linux-source-*`: bookworm carries 6.1, its
/// backports 6.12, trixie-backports the newest stable series (7.3), sid the newest (7.2 today).
pub const MAIN_SUITES: &[&str] = &["bookworm", "bookworm-updates", "bookworm-backports", "trixie-backports", "sid"];
/// Suites of the security archive: bookworm-security carries the current 6.1 and 6.12 uploads.
pub const SECURITY_SUITES: &[&str] = &["bookworm-security"];
/// The keyring every private source is signed by, unless `XTASK_DEBIAN_KEYRING` names another.
pub const HOST_KEYRING: &str = "/usr/share/keyrings/debian-archive-keyring.gpg";

/// What `--kernel-version` asked for: a series (`7.3` is the package `linux-source-7.3`) and
/// optionally an exact Debian version of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelVersion {
    pub series: String,
    pub pin: Option<String>,
}

impl KernelVersion {
    pub fn package(&self) -> String {
        format!("linux-source-{}", self.series)
    }
}

impl std::fmt::Display for KernelVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.pin {
            Some(v) => write!(f, "{}={v}", self.series),
            None => f.write_str(&self.series),
        }
    }
}

/// Parses `7.3`, `linux-source-7.3` or `7.3=7.3.4-1~bpo13+1` (clap's value parser for
/// `--kernel-version`).
pub fn parse_kernel_version(text: &str) -> Result<KernelVersion, String> {
    let text = text.trim();
    let (series, pin) = match text.split_once('=') {
        Some((s, p)) => (s, Some(p)),
        None => (text, None),
    };
    let series = series.strip_prefix("linux-source-").unwrap_or(series);
    let parts: Vec<&str> = series.split('.').collect();
    let numeric = |p: &&str| !p.is_empty() && p.len() <= 3 && p.bytes().all(|b| b.is_ascii_digit());
    if parts.len() == 3 && parts.iter().all(numeric) {
        return Err(format!(
            "`{text}`: give the series, `{}.{}` (the package linux-source-{}.{}); pin an exact upload as \
             `{}.{}=<Debian version>`",
            parts[0], parts[1], parts[0], parts[1], parts[0], parts[1]
        ));
    }
    if parts.len() != 2 || !parts.iter().all(numeric) {
        return Err(format!("`{text}` is not a kernel series such as 6.12 or 7.3"));
    }
    let pin = match pin {
        None => None,
        Some(p) if is_debian_version(p) && p.starts_with(series) => Some(p.to_string()),
        Some(p) => {
            return Err(format!("`{text}`: `{p}` is not a Debian version of linux-source-{series} (e.g. {series}.4-1)"))
        }
    };
    Ok(KernelVersion { series: series.to_string(), pin })
}

fn is_debian_version(v: &str) -> bool {
    !v.is_empty() && v.bytes().all(|b| b.is_ascii_alphanumeric() || b".+~-:".contains(&b))
}

/// A downloaded and unpacked `linux-source-X` package.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Package {
    pub name: String,
    pub version: String,
    /// `usr/src/linux-source-X.tar.xz` inside the unpacked package, in the cache.
    pub tarball: PathBuf,
    /// When it was downloaded (RFC 3339).
    pub downloaded_at: String,
}

/// The private apt configuration's folder, `<cache>/debian/apt`.
pub fn apt_dir(cache_dir: &Path) -> PathBuf {
    cache_dir.join("debian/apt")
}

fn packages_dir(cache_dir: &Path) -> PathBuf {
    cache_dir.join("debian/packages")
}

/// The cache folder of one package version (apt's own escaping of an epoch's `:`).
fn package_dir(cache_dir: &Path, name: &str, version: &str) -> PathBuf {
    packages_dir(cache_dir).join(format!("{name}_{}", version.replace(':', "%3a")))
}

const MARKER: &str = "package.json";

/// The package for `wanted`: from the cache when it holds one (no network), else fetched.
pub fn fetch(wanted: &KernelVersion, cache_dir: &Path) -> Result<Package> {
    let name = wanted.package();
    if let Some(p) = cached(cache_dir, &name, wanted.pin.as_deref()) {
        progress::line(format!(
            "{name} {} from the cache (downloaded {}; no network; delete {} to fetch a newer upload)",
            p.version,
            p.downloaded_at,
            package_dir(cache_dir, &name, &p.version).display()
        ));
        return Ok(p);
    }
    check_tools()?;
    let _lock = crate::support::files::Lock::acquire(&cache_dir.join("debian/lock"))?;
    // Another invocation may have fetched it while we waited.
    if let Some(p) = cached(cache_dir, &name, wanted.pin.as_deref()) {
        return Ok(p);
    }
    let apt = PrivateApt::prepare(cache_dir)?;
    let started = Instant::now();
    let problems = apt.update()?;
    let policy = apt.run(cmd!(apt.sh, "apt-cache policy {name}"))?;
    let (candidate, versions) = parse_policy(&String::from_utf8_lossy(&policy));
    let version = match (&wanted.pin, candidate) {
        (Some(pin), _) if versions.contains(pin) => pin.clone(),
        (Some(pin), _) if !versions.is_empty() => {
            return Err(error(
                Kind::BadInput,
                format!("--kernel-version {wanted}: Debian has no {name} {pin}; it has {}", versions.join(", ")),
            ))
        }
        (None, Some(c)) => c,
        _ => return Err(apt.not_shipped(wanted, &problems)),
    };
    let package = apt.download_and_unpack(&name, &version)?;
    crate::support::timings::record(None, "debian-package", started.elapsed());
    Ok(package)
}

/// The newest download of `name` in the cache (or exactly `pin`), if any.
fn cached(cache_dir: &Path, name: &str, pin: Option<&str>) -> Option<Package> {
    let entries = std::fs::read_dir(packages_dir(cache_dir)).ok()?;
    let prefix = format!("{name}_");
    let mut found: Vec<Package> = entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .filter_map(|e| serde_json::from_slice::<Package>(&std::fs::read(e.path().join(MARKER)).ok()?).ok())
        .filter(|p| p.name == name && pin.is_none_or(|v| p.version == v) && p.tarball.is_file())
        .collect();
    found.sort_by(|a, b| a.downloaded_at.cmp(&b.downloaded_at));
    found.pop()
}

/// `apt-get`, `apt-cache` and `dpkg-deb`, or one line saying what to install instead.
fn check_tools() -> Result<()> {
    missing_tools(|tool| {
        std::env::var_os("PATH").is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()))
    })
}

fn missing_tools(on_path: impl Fn(&str) -> bool) -> Result<()> {
    let missing: Vec<(&str, &str)> = [("apt-get", "apt"), ("apt-cache", "apt"), ("dpkg-deb", "dpkg"), ("gpgv", "gpgv")]
        .into_iter()
        .filter(|(tool, _)| !on_path(tool))
        .collect();
    match missing.as_slice() {
        [] => Ok(()),
        m if m.iter().any(|(t, _)| *t == "apt-get") && m.iter().any(|(t, _)| *t == "dpkg-deb") => Err(error(
            Kind::Infra,
            "--kernel-version fetches Debian's linux-source package and needs apt and dpkg, which this host \
             lacks: pass --kernel-tarball FILE (e.g. a kernel.org tarball) or --kernel-src DIR instead",
        )),
        m => Err(error(
            Kind::Infra,
            format!(
                "--kernel-version needs {}",
                m.iter().map(|(t, p)| format!("`{t}` (Debian package {p})")).collect::<Vec<_>>().join(" and ")
            ),
        )),
    }
}

/// The private apt configuration in `<cache>/debian/apt`.
struct PrivateApt {
    sh: Shell,
    root: PathBuf,
    config: PathBuf,
    main_uri: String,
    security_uri: Option<String>,
}

impl PrivateApt {
    /// Writes the configuration, the sources list and the empty folders apt expects.
    fn prepare(cache_dir: &Path) -> Result<PrivateApt> {
        let root = apt_dir(cache_dir);
        let main_uri = archive_uri().ok_or_else(|| {
            error(
                Kind::Infra,
                "--kernel-version: found no Debian archive in this host's apt sources (/etc/apt/sources.list, \
                 /etc/apt/sources.list.d) to fetch linux-source from; pass --kernel-tarball FILE instead",
            )
        })?;
        let security_uri = security_uri();
        for dir in ["apt.conf.d", "preferences.d", "sources.list.d", "trusted.gpg.d", "state/lists/partial"] {
            std::fs::create_dir_all(root.join(dir))?;
        }
        std::fs::create_dir_all(root.join("cache/archives/partial"))?;
        let status = root.join("state/status");
        if !status.exists() {
            std::fs::write(&status, "")?;
        }
        let sh = sh()?;
        let arch = text(cmd!(sh, "dpkg --print-architecture"))
            .context("dpkg --print-architecture (install the Debian package dpkg)")?;
        let host = stdout(cmd!(sh, "apt-config dump")).unwrap_or_default();
        let inherited = inherited_options(&String::from_utf8_lossy(&host));
        let config = root.join("apt.conf");
        crate::support::files::write_atomic(&config, config_text(&root, &arch, &inherited).as_bytes())?;
        let apt = PrivateApt { sh, root, config, main_uri, security_uri };
        // A newer keyring fetched by an earlier call (from a verified suite) stays in use.
        let mut keyrings = vec![host_keyring()];
        keyrings.extend(Some(apt.fetched_keyring()).filter(|k| k.is_file()));
        apt.write_sources(&keyrings)?;
        Ok(apt)
    }

    fn fetched_keyring(&self) -> PathBuf {
        self.root.join("keyring/usr/share/keyrings/debian-archive-keyring.gpg")
    }

    fn write_sources(&self, keyrings: &[PathBuf]) -> Result<()> {
        let text = sources_list(&self.main_uri, self.security_uri.as_deref(), keyrings);
        crate::support::files::write_atomic(&self.root.join("sources.list"), text.as_bytes())
    }

    /// Runs an apt command under the private configuration; its stdout, or an error with stderr.
    fn run(&self, cmd: Cmd) -> Result<Vec<u8>> {
        stdout(cmd.env("APT_CONFIG", &self.config).env("DEBIAN_FRONTEND", "noninteractive").env("LC_ALL", "C"))
            .map_err(|e| error(Kind::Infra, format!("{e:#} (private apt configuration {})", self.config.display())))
    }

    /// `apt-get update`. A suite that fails (a mirror without backports) is tolerated: the
    /// package may be in another; a key the host's keyring lacks brings in the newer keyring.
    /// Returns apt's complaints (`E:`/`W:` lines), already shown.
    fn update(&self) -> Result<Vec<String>> {
        let task = progress::Task::start(format!("apt-get update (private configuration {})", self.config.display()));
        let mut problems = self.update_once()?;
        if problems.iter().any(|l| l.contains("NO_PUBKEY")) && !self.fetched_keyring().is_file() {
            let keyring = self.newer_keyring()?;
            self.write_sources(&[host_keyring(), keyring])?;
            problems = self.update_once()?;
        }
        task.finish(if problems.is_empty() { "lists fresh".to_string() } else { problems.join("; ") });
        Ok(problems)
    }

    /// One `apt-get update`; its `E:` and `W:` lines.
    fn update_once(&self) -> Result<Vec<String>> {
        // apt's complaints on stderr are the answer here, whatever its exit status.
        let out = cmd!(self.sh, "apt-get update -q")
            .env("APT_CONFIG", &self.config)
            .env("LC_ALL", "C")
            .ignore_status()
            .output()
            .context("running apt-get (install the Debian package apt)")?;
        let text = String::from_utf8_lossy(&out.stderr);
        let problems: Vec<String> = text
            .lines()
            .filter(|l| l.starts_with("E: ") || l.starts_with("W: "))
            // Root's apt fetches as `_apt`, which cannot enter a cache under /root: harmless.
            .filter(|l| !l.contains("unsandboxed"))
            .map(|l| l.to_string())
            .collect();
        Ok(problems)
    }

    /// The newest `debian-archive-keyring` from the suites the host's keyring verified,
    /// unpacked into `<cache>/debian/apt/keyring`; its merged keyring file.
    fn newer_keyring(&self) -> Result<PathBuf> {
        let policy = self.run(cmd!(self.sh, "apt-cache policy debian-archive-keyring"))?;
        let (candidate, _) = parse_policy(&String::from_utf8_lossy(&policy));
        let version = candidate.ok_or_else(|| {
            error(
                Kind::Infra,
                "--kernel-version: a suite is signed by a key this host's Debian keyring lacks, and no suite the \
                 host's keyring verifies offers debian-archive-keyring (update the host's debian-archive-keyring)",
            )
        })?;
        progress::line(format!(
            "a suite is signed by a key {} lacks: adding debian-archive-keyring {version}, fetched from a suite it verifies",
            host_keyring().display()
        ));
        let scratch = tempfile::Builder::new().prefix(".keyring-").tempdir_in(&self.root)?;
        let wanted = format!("debian-archive-keyring={version}");
        let into = self.sh.push_dir(scratch.path());
        self.run(cmd!(self.sh, "apt-get download -q {wanted}"))?;
        drop(into);
        let deb = only_deb(scratch.path())?;
        let dest = self.root.join("keyring");
        let _ = std::fs::remove_dir_all(&dest);
        stdout(cmd!(self.sh, "dpkg-deb -x {deb} {dest}"))?;
        let keyring = self.fetched_keyring();
        if !keyring.is_file() {
            return Err(error(Kind::Infra, format!("{} has no {}", deb.display(), keyring.display())));
        }
        Ok(keyring)
    }

    /// The error for a series Debian does not ship: the ones it does, from the private lists.
    /// With no series found at all and apt complaining, the fault is the network or the mirror.
    fn not_shipped(&self, wanted: &KernelVersion, problems: &[String]) -> anyhow::Error {
        let out = self
            .run(cmd!(self.sh, "apt-cache search --names-only ^linux-source-[0-9.]+$"))
            .map(|o| String::from_utf8_lossy(&o).into_owned())
            .unwrap_or_default();
        let shipped = shipped_series(&out);
        let suites: Vec<&str> = MAIN_SUITES
            .iter()
            .chain(if self.security_uri.is_some() { SECURITY_SUITES } else { &[] })
            .copied()
            .collect();
        if shipped.is_empty() && !problems.is_empty() {
            return error(
                Kind::Infra,
                format!(
                    "--kernel-version {wanted}: apt-get update with {} found no linux-source package: {}{}",
                    self.config.display(),
                    problems[0].trim_start_matches("W: ").trim_start_matches("E: "),
                    match problems.len() {
                        1 => String::new(),
                        n => format!(" (and {} more)", n - 1),
                    }
                ),
            );
        }
        let which = if shipped.is_empty() {
            format!("none at all (check the lists in {})", self.root.join("state/lists").display())
        } else {
            shipped.join(", ")
        };
        error(
            Kind::BadInput,
            format!(
                "--kernel-version {wanted}: Debian does not ship {} in {}; it ships {which}",
                wanted.package(),
                suites.join(", ")
            ),
        )
    }

    /// `apt-get download` (apt checks the hash against the signed index), then `dpkg-deb -x`
    /// into the cache; the `.deb` itself is not kept.
    fn download_and_unpack(&self, name: &str, version: &str) -> Result<Package> {
        let cache_dir = self.root.parent().and_then(Path::parent).context("apt dir has no cache dir")?;
        std::fs::create_dir_all(packages_dir(cache_dir))?;
        let scratch = tempfile::Builder::new().prefix(".download-").tempdir_in(packages_dir(cache_dir))?;
        let task = progress::Task::start(format!("downloading {name} {version}"));
        let t = Instant::now();
        let wanted = format!("{name}={version}");
        let into = self.sh.push_dir(scratch.path());
        self.run(cmd!(self.sh, "apt-get download -q {wanted}"))?;
        drop(into);
        let deb = only_deb(scratch.path())?;
        let size = std::fs::metadata(&deb)?.len();
        task.finish(format!("{:.0} MB in {:.1} s", size as f64 / 1e6, t.elapsed().as_secs_f64()));
        let task = progress::Task::start(format!("unpacking {}", deb.display()));
        let tree = scratch.path().join("tree");
        stdout(cmd!(self.sh, "dpkg-deb -x {deb} {tree}"))
            .map_err(|e| error(Kind::Infra, format!("dpkg-deb -x (Debian package dpkg): {e:#}")))?;
        std::fs::remove_file(&deb)?;
        let rel = format!("usr/src/{name}.tar.xz");
        if !tree.join(&rel).is_file() {
            return Err(error(Kind::Infra, format!("{name} {version} holds no {rel}")));
        }
        task.finish("unpacked");
        let dest = package_dir(cache_dir, name, version);
        let _ = std::fs::remove_dir_all(&dest);
        std::fs::rename(&tree, &dest).with_context(|| format!("moving the package to {}", dest.display()))?;
        let package = Package {
            name: name.to_string(),
            version: version.to_string(),
            tarball: dest.join(rel),
            downloaded_at: jiff::Timestamp::from_second(jiff::Timestamp::now().as_second())?.to_string(),
        };
        // The marker last: a folder without it is an interrupted download, never used.
        crate::support::files::write_atomic(&dest.join(MARKER), &serde_json::to_vec_pretty(&package)?)?;
        Ok(package)
    }
}

fn host_keyring() -> PathBuf {
    std::env::var_os("XTASK_DEBIAN_KEYRING").map_or_else(|| PathBuf::from(HOST_KEYRING), PathBuf::from)
}

fn only_deb(dir: &Path) -> Result<PathBuf> {
    std::fs::read_dir(dir)?
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "deb"))
        .with_context(|| format!("apt-get download left no .deb in {}", dir.display()))
}

/// The private `apt.conf`: every folder apt reads or writes is under `root`; the host's
/// configuration fragments are not read (`Dir::Etc::Parts` is ours, read after this file),
/// except `inherited` (proxies, validity checks).
pub fn config_text(root: &Path, arch: &str, inherited: &[String]) -> String {
    let r = root.display();
    let mut text = format!(
        "// Written by `cargo xtask` for --kernel-version: a private apt configuration that\n\
         // leaves the host's sources, state and caches alone. By hand:\n\
         //   APT_CONFIG={r}/apt.conf apt-cache policy linux-source-7.3\n\
         Dir::Etc::Main \"/dev/null\";\n\
         Dir::Etc::Parts \"{r}/apt.conf.d\";\n\
         Dir::Etc::SourceList \"{r}/sources.list\";\n\
         Dir::Etc::SourceParts \"{r}/sources.list.d\";\n\
         Dir::Etc::Preferences \"/dev/null\";\n\
         Dir::Etc::PreferencesParts \"{r}/preferences.d\";\n\
         Dir::Etc::Trusted \"/dev/null\";\n\
         Dir::Etc::TrustedParts \"{r}/trusted.gpg.d\";\n\
         Dir::State \"{r}/state\";\n\
         Dir::State::Lists \"{r}/state/lists\";\n\
         Dir::State::status \"{r}/state/status\";\n\
         Dir::Cache \"{r}/cache\";\n\
         Dir::Cache::Archives \"{r}/cache/archives\";\n\
         Dir::Cache::pkgcache \"\";\n\
         Dir::Cache::srcpkgcache \"\";\n\
         APT::Architecture \"{arch}\";\n\
         APT::Architectures {{ \"{arch}\"; }};\n\
         Acquire::Languages \"none\";\n\
         Acquire::GzipIndexes \"true\";\n"
    );
    if !inherited.is_empty() {
        text.push_str("// From the host's apt configuration (`apt-config dump`):\n");
        for line in inherited {
            text.push_str(line);
            text.push('\n');
        }
    }
    text
}

/// The host's settings the private configuration keeps, from `apt-config dump`: how to reach
/// the network (proxies) and whether Release files may be past their `Valid-Until` (a host
/// behind a frozen mirror turns that check off; signatures are checked regardless).
pub fn inherited_options(dump: &str) -> Vec<String> {
    dump.lines()
        .filter(|l| {
            let key = l.split_whitespace().next().unwrap_or("");
            let proxy = key.strip_prefix("Acquire::").is_some_and(|k| {
                let mut parts = k.split("::");
                matches!(parts.next(), Some("http" | "https" | "ftp")) && parts.next() == Some("Proxy")
            });
            proxy || key == "Acquire::Check-Valid-Until" || key == "Acquire::Check-Date"
        })
        .map(|l| l.trim().to_string())
        .collect()
}

/// The private sources list: each suite on its own line, every one `signed-by` `keyrings`.
pub fn sources_list(main_uri: &str, security_uri: Option<&str>, keyrings: &[PathBuf]) -> String {
    let signed_by = keyrings.iter().map(|k| k.display().to_string()).collect::<Vec<_>>().join(",");
    let mut text = String::from("# Written by `cargo xtask` for --kernel-version (see apt.conf beside it).\n");
    let lines = MAIN_SUITES
        .iter()
        .map(|s| (main_uri, s))
        .chain(security_uri.into_iter().flat_map(|u| SECURITY_SUITES.iter().map(move |s| (u, s))));
    for (uri, suite) in lines {
        text.push_str(&format!("deb [signed-by={signed_by}] {uri} {suite} main\n"));
    }
    text
}

/// `apt-cache policy PKG`: the candidate (`None` for `(none)` or an unknown package) and every
/// version in the version table.
pub fn parse_policy(text: &str) -> (Option<String>, Vec<String>) {
    let mut candidate = None;
    let mut versions = Vec::new();
    let mut in_table = false;
    for line in text.lines() {
        let t = line.trim();
        if let Some(c) = t.strip_prefix("Candidate:") {
            let c = c.trim();
            candidate = (c != "(none)" && !c.is_empty()).then(|| c.to_string());
        } else if t == "Version table:" {
            in_table = true;
        } else if in_table {
            // Version lines are indented 5 (`***` marks the installed one), origins 8.
            let indent = line.len() - line.trim_start().len();
            let t = t.strip_prefix("*** ").unwrap_or(t);
            if indent <= 6 {
                if let Some(v) = t.split_whitespace().next() {
                    versions.push(v.to_string());
                }
            }
        }
    }
    (candidate, versions)
}

/// The series `apt-cache search --names-only '^linux-source-[0-9.]+$'` found, oldest first.
pub fn shipped_series(search: &str) -> Vec<String> {
    let mut series: Vec<String> = search
        .lines()
        .filter_map(|l| l.split_whitespace().next()?.strip_prefix("linux-source-"))
        .filter(|s| parse_kernel_version(s).is_ok())
        .map(String::from)
        .collect();
    let key = |s: &String| s.split('.').map(|p| p.parse::<u32>().unwrap_or(0)).collect::<Vec<_>>();
    series.sort_by_key(key);
    series.dedup();
    series
}

/// The host's apt source files: `sources.list` and the one-line and deb822 files beside it.
pub fn apt_source_files() -> Vec<PathBuf> {
    let mut files = vec![PathBuf::from("/etc/apt/sources.list")];
    if let Ok(dir) = std::fs::read_dir("/etc/apt/sources.list.d") {
        files.extend(
            dir.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|e| e == "list" || e == "sources")),
        );
    }
    files
}

/// The Debian archive address this host already uses for bookworm, so the backports source
/// points at the same mirror (the project never names a registry host itself). On a Debian host
/// of another release, the archive of its own release (`--kernel-version` needs one either way).
pub fn archive_uri() -> Option<String> {
    archive_uri_serving(|suite| suite == "bookworm").or_else(|| {
        archive_uri_serving(|suite| {
            ["trixie", "forky", "sid", "stable", "testing", "unstable", "oldstable"].contains(&suite)
        })
    })
}

/// The host's Debian security archive (the source of a `*-security` suite), if it uses one.
pub fn security_uri() -> Option<String> {
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

#[cfg(test)]
mod tests;
