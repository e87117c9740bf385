//! The tests of `kernel/debian.rs`.

use super::*;

#[test]
fn versions_parse_as_series_with_an_optional_pin() {
    let v = parse_kernel_version("7.3").unwrap();
    assert_eq!((v.series.as_str(), v.pin.as_deref(), v.package().as_str()), ("7.3", None, "linux-source-7.3"));
    assert_eq!(parse_kernel_version("linux-source-6.12").unwrap().series, "6.12");
    let pinned = parse_kernel_version("7.3=7.3.4-1~bpo13+1").unwrap();
    assert_eq!(pinned.pin.as_deref(), Some("7.3.4-1~bpo13+1"));
    assert_eq!(pinned.to_string(), "7.3=7.3.4-1~bpo13+1");
    let e = parse_kernel_version("7.3.4").unwrap_err();
    assert!(e.contains("give the series, `7.3`"), "{e}");
    for bad in ["7", "seven", "7.x", "", "7.3.", "6.12=", "6.12=6.1.1-1", "6.12=6.12.1 1"] {
        assert!(parse_kernel_version(bad).is_err(), "{bad:?} accepted");
    }
}

#[test]
fn missing_tools_name_their_package_or_the_alternative() {
    assert!(missing_tools(|_| true).is_ok());
    let e = missing_tools(|t| t != "dpkg-deb").unwrap_err();
    assert_eq!(e.to_string(), "--kernel-version needs `dpkg-deb` (Debian package dpkg)");
    assert_eq!(crate::support::exit::code_for(&e), Kind::Infra.code());
    let e = missing_tools(|t| t == "gpgv").unwrap_err().to_string();
    assert!(e.contains("needs apt and dpkg") && e.contains("--kernel-tarball"), "{e}");
    let e = missing_tools(|t| !t.starts_with("apt")).unwrap_err().to_string();
    assert_eq!(e, "--kernel-version needs `apt-get` (Debian package apt) and `apt-cache` (Debian package apt)");
}

#[test]
fn the_config_keeps_everything_under_its_root() {
    let root = Path::new("/c/debian/apt");
    let inherited = vec!["Acquire::Check-Valid-Until \"false\";".to_string()];
    let text = config_text(root, "amd64", &inherited);
    for line in text.lines().filter(|l| l.starts_with("Dir::")) {
        let value = line.split('"').nth(1).unwrap();
        assert!(value.is_empty() || value == "/dev/null" || value.starts_with("/c/debian/apt/"), "{line}");
    }
    for key in ["Dir::Etc::Parts", "Dir::Etc::SourceList", "Dir::Etc::SourceParts", "Dir::State ", "Dir::Cache "] {
        assert!(text.contains(key), "{key} missing:\n{text}");
    }
    assert!(text.contains("APT::Architectures { \"amd64\"; };"));
    assert!(text.ends_with("Acquire::Check-Valid-Until \"false\";\n"), "{text}");
    assert!(!text.contains("trusted=yes") && !text.contains("AllowInsecure"));
}

#[test]
fn only_network_settings_are_inherited_from_the_host() {
    let dump = "APT::Architecture \"amd64\";\n\
                Acquire::http::Proxy \"http://proxy:3128\";\n\
                Acquire::https::Proxy::deb.example \"DIRECT\";\n\
                Acquire::http::Timeout \"5\";\n\
                Acquire::Check-Valid-Until \"false\";\n\
                Acquire::Check-Date \"false\";\n\
                APT::Update::Post-Invoke:: \"rm -f /var/cache/apt/*.bin\";\n\
                Acquire::IndexTargets::deb::DEP-11::MetaKey \"x\";\n";
    assert_eq!(
        inherited_options(dump),
        [
            "Acquire::http::Proxy \"http://proxy:3128\";",
            "Acquire::https::Proxy::deb.example \"DIRECT\";",
            "Acquire::Check-Valid-Until \"false\";",
            "Acquire::Check-Date \"false\";"
        ]
    );
}

#[test]
fn sources_name_every_suite_signed_by_the_keyrings() {
    let keys = [PathBuf::from("/k/host.gpg"), PathBuf::from("/c/keyring.gpg")];
    let text = sources_list("http://mirror.example/debian", Some("http://mirror.example/debian-security"), &keys);
    let lines: Vec<&str> = text.lines().filter(|l| l.starts_with("deb ")).collect();
    assert_eq!(lines.len(), MAIN_SUITES.len() + SECURITY_SUITES.len());
    assert_eq!(lines[0], "deb [signed-by=/k/host.gpg,/c/keyring.gpg] http://mirror.example/debian bookworm main");
    assert!(lines.contains(
        &"deb [signed-by=/k/host.gpg,/c/keyring.gpg] http://mirror.example/debian-security bookworm-security main"
    ));
    for suite in ["trixie-backports", "sid", "bookworm-backports"] {
        assert!(lines.iter().any(|l| l.ends_with(&format!(" {suite} main"))), "{suite}");
    }
    let without = sources_list("http://m/debian", None, &keys[..1]);
    assert!(!without.contains("security"), "{without}");
}

#[test]
fn policy_gives_the_candidate_and_the_version_table() {
    let policy = "linux-source-7.2:\n  Installed: (none)\n  Candidate: 7.2.13-1\n  Version table:\n     \
                  7.2.13-1 500\n        500 http://m/debian sid/main amd64 Packages\n     \
                  7.2.12-1~bpo13+1 100\n        100 http://m/debian trixie-backports/main amd64 Packages\n";
    let (c, v) = parse_policy(policy);
    assert_eq!(c.as_deref(), Some("7.2.13-1"));
    assert_eq!(v, ["7.2.13-1", "7.2.12-1~bpo13+1"]);
    let installed = "linux-source-6.12:\n  Installed: 6.12.117-1~deb12u1\n  Candidate: 6.12.117-1~deb12u1\n  \
                     Version table:\n *** 6.12.117-1~deb12u1 500\n        500 http://m sec/main Packages\n        \
                     100 /var/lib/dpkg/status\n";
    assert_eq!(parse_policy(installed).1, ["6.12.117-1~deb12u1"]);
    assert_eq!(parse_policy(""), (None, vec![]), "an unknown package prints nothing");
    assert_eq!(parse_policy("x:\n  Installed: (none)\n  Candidate: (none)\n  Version table:\n").0, None);
}

#[test]
fn shipped_series_are_sorted_numerically() {
    let search = "linux-source-7.2 - Linux kernel source for version 7.2 with Debian patches\n\
                  linux-source-6.12 - Linux kernel source for version 6.12 with Debian patches\n\
                  linux-source-6.1 - Linux kernel source for version 6.1 with Debian patches\n\
                  linux-source-7.3 - Linux kernel source for version 7.3 with Debian patches\n\
                  linux-source-6.1 - again, from another suite\n";
    assert_eq!(shipped_series(search), ["6.1", "6.12", "7.2", "7.3"]);
}

#[test]
fn a_cached_package_is_found_without_apt_and_the_newest_wins() {
    let cache = tempfile::tempdir().unwrap();
    let put = |version: &str, at: &str, complete: bool| {
        let dir = package_dir(cache.path(), "linux-source-7.3", version);
        let tarball = dir.join("usr/src/linux-source-7.3.tar.xz");
        std::fs::create_dir_all(tarball.parent().unwrap()).unwrap();
        std::fs::write(&tarball, "x").unwrap();
        if complete {
            let p =
                Package { name: "linux-source-7.3".into(), version: version.into(), tarball, downloaded_at: at.into() };
            std::fs::write(dir.join(MARKER), serde_json::to_vec(&p).unwrap()).unwrap();
        }
    };
    assert_eq!(cached(cache.path(), "linux-source-7.3", None), None);
    put("7.3.4-1~bpo13+1", "2026-11-01T00:00:00Z", true);
    put("7.3.5-1~bpo13+1", "2026-11-20T00:00:00Z", true);
    put("7.3.6-1~bpo13+1", "2026-11-21T00:00:00Z", false);
    assert_eq!(cached(cache.path(), "linux-source-7.3", None).unwrap().version, "7.3.5-1~bpo13+1");
    let pinned = cached(cache.path(), "linux-source-7.3", Some("7.3.4-1~bpo13+1")).unwrap();
    assert_eq!(pinned.version, "7.3.4-1~bpo13+1");
    assert_eq!(cached(cache.path(), "linux-source-7.3", Some("7.3.6-1~bpo13+1")), None, "an unfinished one");
    assert_eq!(cached(cache.path(), "linux-source-7.2", None), None);
}
