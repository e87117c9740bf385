//! The real checks of `cargo xtask test` (a test target with its own harness that plain
//! `cargo test` leaves out, so it stays fast; `cargo xtask test` runs it after
//! provisioning): kernel builds for every arch (cached across runs), the dropped-option gate,
//! the result consumers, real boots with fault injection, hygiene, `exec` and shares
//! (`boots.rs`), the debug profile (`debug.rs`), a coverage run (`coverage.rs`), virtiofsd's
//! sandbox (`sandbox.rs`), kernels that break themselves (`broken.rs`), the atlas of two kernels
//! (`atlas.rs`), the results history on PostgreSQL and two recorded runs (`history.rs`), and the checks that run
//! the xtask binary as a user would (`as_user.rs`, `git_tree.rs`). Each check prints a PASSED or FAILED line; the exit code is 1 when any failed.

mod as_user;
mod atlas;
mod boots;
mod broken;
mod coverage;
mod debug;
mod git_tree;
mod history;
mod mutants;
mod sandbox;

use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result};
use clap::Parser;

use xtask::cli::{ConfigArgs, KernelArgs, SourceArgs, TestArgs, VmArgs};
use xtask::support::exit::{self, Kind};
use xtask::support::progress::top_line;
use xtask::vm::qemu::AccelChoice;

/// The real checks' command line: what `cargo xtask test` passes after `--`.
#[derive(Parser)]
struct Cli {
    /// Cache directory for sources, build trees and built kernels.
    #[arg(long, env = "XTASK_CACHE_DIR")]
    cache_dir: Option<std::path::PathBuf>,
    /// Only this group of checks: `coverage`, `consumers` (kunit.py and kcidb-io read the
    /// renderings of the results fixture; no kernel), or `broken` (kernels that break
    /// themselves: culprit, collateral, bound), `signals` (Ctrl-C mid-boot), `git-tree` (`validate` and
    /// `bisect` of the test git tree, then `git bisect run ue-conformance` from inside it), `mutants` (`mutants --run` on four fixed mutants), or `sandbox`
    /// (virtiofsd's sandbox against a guest's planted symlinks), or `atlas` (the atlas of the
    /// default source and 7.3 on x86_64), or `history` (the store on a private PostgreSQL
    /// server; two small runs recorded, then their classes; a failure whose
    /// history flips re-run before it gates), or `debug` (the debug profile on x86_64: its
    /// kernel, the gating plan judged, `validate --profile debug` of a racy patch).
    #[arg(long, value_parser = ["coverage", "consumers", "broken", "signals", "git-tree", "mutants", "sandbox", "atlas", "history", "debug"])]
    only: Option<String>,
}

/// The check of `git bisect run` with the installed spelling, from the kernel tree.
const GIT_TREE: &str =
    "x86_64: a git tree's breaking commit: validate --base HEAD~2 names the broken scenario and exits 1, bisect finds the commit";
const BISECT_RUN: &str =
    "x86_64: `git bisect run ue-conformance run --arch x86_64 --filter ...` from a kernel git tree \
     (the tree the default source) names the breaking commit; the tree is left as it was";

const SANDBOX: &str = "x86_64: a guest plants symlinks and `..` paths to a host file in its share: it cannot read or \
     overwrite the file, the namespace (auto) and chroot sandboxes keep the daemon's own view inside the share and \
     are recorded in the boot, and unsandboxed (none) the daemon's view reaches the file";

const SANDBOX_FALLBACK: &str = "virtiofsd on a host that refuses namespaces runs in chroot, its log keeping the \
     refusal; refused both, the boot fails naming each refusal and `--virtiofsd-sandbox none`";

const CTRL_C: &str = "Ctrl-C during a boot leaves no QEMU or virtiofsd behind";
const LEAK_AND_OOPS: &str = "x86_64: an event the hygiene cannot delete, then an oops holding event_mutex (patched \
     kernel): each culprit fails with its evidence and ends its boot, every other scenario passes on a fresh boot, \
     within 180 s";
const MUTANTS: &str = "x86_64: mutants --run on four fixed mutants with a format/* coverage map: one Killed by \
     format scenarios with a mismatch, one CompileError, one NoCoverage, the listed equivalent Survived (Ignored with \
     the tracked list); mutants.json meets the schema; with --batch 8 the two the schemata kernel holds share one \
     boot, switched at run time, and end as they did alone";
const EVERY_BOOT: &str = "x86_64: a kernel that oopses on every boot: three broken fresh boots in a row, then the \
     rest are collateral of the first culprit (run.json, KTAP, JUnit), within 180 s";

const FILL_STOPS: &str = "x86_64: the fill of 65k events (deadline 600 s) on a kernel that stops it half way: the \
     progress markers stop and the host ends the scenario (judged timeout) 30 s after the last one, within 180 s";

const FILL_CRAWLS: &str = "x86_64: the same fill on a kernel that slows each registration by 10 ms: it passes \
     unpatched (recorded in a private history), and patched its markers keep coming at a hundredth of the rate, so the \
     host ends it as crawling against the history's median, within 180 s instead of its 600 s deadline";

const ATLAS: &str =
    "x86_64: atlas of the default source and --kernel-version 7.3, faults and coverage profiles, on faults/* and format/*: \
     two kernel columns, every row a status on both, every difference explained (exit 0), atlas.json, atlas.html, \
     kcidb.json and each kernel's run folder";

/// The kernels of `args`, as the verbs make them: the flags lowered, then the kernel phase.
pub fn kernels(args: &KernelArgs) -> Result<Vec<xtask::kernel::build::Built>> {
    xtask::kernel::build_all(&args.request()?)
}

struct Outcome {
    name: String,
    error: Option<String>,
}

fn main() -> std::process::ExitCode {
    xtask::support::timings::start();
    xtask::vm::children::install_signal_handler();
    // Each check's inner progress, in this process and in the xtask processes it starts, is
    // indented under the check's verdict: the planted failures of negative controls are not
    // top-level FAILED lines. Set before any thread starts.
    std::env::set_var(xtask::support::progress::NESTED_ENV, "1");
    let cli = Cli::parse();
    let args = TestArgs { unit_only: false, cache_dir: cli.cache_dir };
    let result = match cli.only.as_deref() {
        Some("coverage") => only_coverage(&args),
        Some("consumers") => {
            let mut outcomes = Vec::new();
            for (name, result) in xtask::results::tools::check_consumers() {
                record(&mut outcomes, &format!("results: {name}"), Instant::now(), result);
            }
            Ok(summary(&outcomes))
        }
        Some("signals") => only(&[(CTRL_C, &as_user::ctrl_c_leaves_nothing)]),
        Some("broken") => only(&[
            (LEAK_AND_OOPS, &broken::leak_and_oops),
            (EVERY_BOOT, &broken::breaks_every_boot),
            (FILL_STOPS, &broken::a_fill_that_stops),
            (FILL_CRAWLS, &broken::a_fill_that_crawls),
        ]),
        Some("sandbox") => {
            only(&[(SANDBOX, &|scratch| sandbox_check(scratch, &args)), (SANDBOX_FALLBACK, &sandbox::fallback)])
        }
        Some("mutants") => only(&[(MUTANTS, &mutants::fixed_mutants)]),
        Some("atlas") => only(&[(ATLAS, &|scratch| atlas::default_and_7_3(scratch, args.cache_dir.as_deref()))]),
        Some("history") => only(&[
            (history::POSTGRES, &history::postgres_store),
            (history::TWO_RUNS, &|scratch| history::two_runs_then_classes(scratch, args.cache_dir.as_deref())),
            (history::RERUN, &|scratch| history::rerun_flaky_failures(scratch, args.cache_dir.as_deref())),
        ]),
        Some("debug") => only_debug(&args),
        Some("git-tree") => only(&[
            (GIT_TREE, &|scratch| git_tree::git_tree_validate_and_bisect(scratch, &args)),
            (BISECT_RUN, &|scratch| git_tree::git_bisect_run_from_the_tree(scratch, &args)),
        ]),
        _ => run(&args),
    };
    match result {
        Ok(code) => std::process::ExitCode::from(code),
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::from(exit::code_for(&e))
        }
    }
}

/// A group of checks alone (`--only`), sharing one scratch folder.
/// A named check run in a scratch folder.
type Check<'a> = (&'a str, &'a dyn Fn(&Path) -> Result<()>);

fn only(checks: &[Check]) -> Result<u8> {
    let scratch = tempfile::tempdir()?;
    let mut outcomes = Vec::new();
    for (name, check) in checks {
        let started = Instant::now();
        record(&mut outcomes, name, started, check(scratch.path()));
    }
    Ok(summary(&outcomes))
}

#[allow(clippy::too_many_lines)] // test code: the checks in the order they run
fn run(args: &TestArgs) -> Result<u8> {
    let root = xtask::support::checkout::project_root();
    let mut outcomes = Vec::new();
    let base = base_kernel("all", args);

    for arch in xtask::arch::ARCHES {
        let started = Instant::now();
        let args = KernelArgs { arch: arch.name.into(), ..base.clone() };
        let result = crate::kernels(&args).and_then(|built| {
            let b = &built[0];
            anyhow::ensure!(b.image.is_file(), "no image at {}", b.image.display());
            let eff = &b.metadata.config.effective;
            anyhow::ensure!(
                eff.get("CONFIG_USER_EVENTS").map(String::as_str) == Some("y"),
                "CONFIG_USER_EVENTS is {:?} in {}",
                eff.get("CONFIG_USER_EVENTS"),
                b.config.display()
            );
            anyhow::ensure!(
                b.metadata.config.missing.is_empty(),
                "missing options recorded: {:?}",
                b.metadata.config.missing
            );
            anyhow::ensure!(
                b.metadata.kernelrelease.starts_with("6.12"),
                "kernelrelease {:?} is not 6.12",
                b.metadata.kernelrelease
            );
            let repro = b.image.with_file_name("reproducer.sh");
            anyhow::ensure!(repro.is_file(), "no reproducer.sh beside {}", b.image.display());
            Ok(())
        });
        record(&mut outcomes, &format!("{}: kernel builds with every requested option", arch.name), started, result);

        let started = Instant::now();
        let result = crate::kernels(&args).and_then(|built| {
            anyhow::ensure!(built[0].cache_hit, "the second identical request ran make (cache miss)");
            Ok(())
        });
        record(&mut outcomes, &format!("{}: an identical request is a cache hit", arch.name), started, result);
    }

    let started = Instant::now();
    let dropping = KernelArgs {
        arch: "arm64".into(),
        config_only: true,
        config: ConfigArgs {
            fragments: vec![root.join("xtask/test_data/arm64-without-ftrace.config")],
            ..ConfigArgs::default()
        },
        ..base.clone()
    };
    let result = match crate::kernels(&dropping) {
        Ok(_) => Err(anyhow::anyhow!("the configuration was accepted although CONFIG_USER_EVENTS cannot be set")),
        Err(e) => {
            let msg = format!("{e:#}");
            let code = exit::code_for(&e);
            if code == Kind::CannotBuild.code()
                && msg.contains("CONFIG_USER_EVENTS: asked for `y`")
                && msg.contains("unmet: depends on FTRACE [FTRACE=n]")
            {
                Ok(())
            } else {
                Err(anyhow::anyhow!("wrong failure (exit code {code}): {msg}"))
            }
        }
    };
    record(&mut outcomes, "arm64: a fragment that drops CONFIG_USER_EVENTS fails naming FTRACE", started, result);

    // The renderings read by their real consumers: the kernel's kunit.py (from the source the
    // builds above unpacked) and kcidb-io (installed by setup).
    for (name, result) in xtask::results::tools::check_consumers() {
        record(&mut outcomes, &format!("results: {name}"), Instant::now(), result);
    }

    // The debug profile configures on every arch; debug::ARCH's is built and run below.
    for arch in xtask::arch::ARCHES.iter().filter(|a| a.name != debug::ARCH) {
        let started = Instant::now();
        let debug = KernelArgs {
            arch: arch.name.into(),
            config_only: true,
            config: ConfigArgs { profiles: vec!["debug".into()], ..ConfigArgs::default() },
            ..base.clone()
        };
        let result = crate::kernels(&debug).and_then(|b| {
            let eff = &b[0].metadata.config.effective;
            anyhow::ensure!(
                eff.get("CONFIG_KASAN").map(String::as_str) == Some("y"),
                "KASAN is {:?}",
                eff.get("CONFIG_KASAN")
            );
            Ok(())
        });
        record(
            &mut outcomes,
            &format!("{}: the debug profile configures with every option", arch.name),
            started,
            result,
        );
    }

    let started = Instant::now();
    let result = other_debian_version_configures(&base);
    record(
        &mut outcomes,
        "arm64: --kernel-version 7.3 fetches Debian's linux-source-7.3 (private apt) and configures with every option",
        started,
        result,
    );

    let started = Instant::now();
    let scratch = tempfile::tempdir()?;
    record(&mut outcomes, history::POSTGRES, started, history::postgres_store(scratch.path()));

    boots::boot_checks(args, &base, &mut outcomes)?;
    Ok(summary(&outcomes))
}

/// A Debian version other than the default, as far as `--config-only`: `linux-source-7.3`
/// fetched with the private apt configuration (or found in the cache, with no network), its
/// tarball unpacked, configured for arm64 with every requested option present.
fn other_debian_version_configures(base: &KernelArgs) -> Result<()> {
    let version = xtask::kernel::debian::parse_kernel_version("7.3").map_err(anyhow::Error::msg)?;
    let args = KernelArgs {
        arch: "arm64".into(),
        config_only: true,
        source: SourceArgs { kernel_version: Some(version), ..SourceArgs::default() },
        ..base.clone()
    };
    let built = crate::kernels(&args)?;
    let m = &built[0].metadata;
    // This request's identity (a cache hit's metadata holds the one of the build that made it).
    let source = &built[0].source.as_ref().context("no source recorded")?.identity;
    anyhow::ensure!(source.kind == "debian-package", "source kind {:?}", source.kind);
    let version = source.package_version.as_deref().unwrap_or("");
    anyhow::ensure!(version.starts_with("7.3."), "package version {version:?} is not 7.3");
    anyhow::ensure!(m.kernelrelease.starts_with("7.3."), "kernelrelease {:?} is not 7.3", m.kernelrelease);
    anyhow::ensure!(m.config.missing.is_empty(), "missing options: {:?}", m.config.missing);
    let user_events = m.config.effective.get("CONFIG_USER_EVENTS").map(String::as_str);
    anyhow::ensure!(user_events == Some("y"), "CONFIG_USER_EVENTS is {user_events:?}");
    Ok(())
}

/// The VM flags of the real checks' boots (2 vCPUs, 512 MiB, the accelerator probed), their run
/// folders under `results`.
fn test_vm(results: &Path) -> VmArgs {
    VmArgs {
        accel: AccelChoice::Auto,
        share: None,
        cpus: 2,
        vms: 1,
        memory: 512,
        kernel_args: vec![],
        qemu_args: vec![],
        results: Some(results.to_path_buf()),
        virtiofsd_sandbox: Default::default(),
    }
}

/// The default kernel of `arch` (from the default source, in the test's cache).
fn base_kernel(arch: &str, args: &TestArgs) -> KernelArgs {
    KernelArgs {
        arch: arch.into(),
        source: SourceArgs::default(),
        config: ConfigArgs::default(),
        knobs: Default::default(),
        jobs: None,
        cache_dir: args.cache_dir.clone(),
        config_only: false,
        json: false,
    }
}

/// `--only sandbox`: the virtiofsd sandbox check alone.
fn sandbox_check(scratch: &Path, args: &TestArgs) -> Result<()> {
    let base = base_kernel("x86_64", args);
    sandbox::symlink_escapes(scratch, &base, &test_vm(scratch), args.cache_dir.as_deref())
}

/// `--only debug`: the debug profile's checks alone.
fn only_debug(args: &TestArgs) -> Result<u8> {
    let scratch = tempfile::tempdir()?;
    let opts = xtask::run::boot::Options::of(&test_vm(scratch.path()), args.cache_dir.as_deref())?;
    let mut outcomes = Vec::new();
    boots::debug_profile(&opts, &base_kernel("x86_64", args), scratch.path(), &mut outcomes);
    Ok(summary(&outcomes))
}

/// `--only coverage`: the coverage checks alone.
fn only_coverage(args: &TestArgs) -> Result<u8> {
    let results = tempfile::Builder::new().prefix("xtask-test-results-").tempdir()?;
    let vm = test_vm(results.path());
    let opts = xtask::run::boot::Options::of(&vm, args.cache_dir.as_deref())?;
    let base = base_kernel(coverage::ARCH, args);
    let mut outcomes = Vec::new();
    coverage::checks(&opts, &base, results.path(), &mut outcomes);
    Ok(summary(&outcomes))
}

fn record(outcomes: &mut Vec<Outcome>, name: &str, started: Instant, result: Result<()>) {
    let secs = started.elapsed().as_secs_f64();
    match &result {
        Ok(()) => top_line(format!("[PASSED] {name} ({secs:.1} s)")),
        Err(e) => top_line(format!("[FAILED] {name} ({secs:.1} s): {e:#}")),
    }
    outcomes.push(Outcome { name: name.to_string(), error: result.err().map(|e| format!("{e:#}")) });
}

fn summary(outcomes: &[Outcome]) -> u8 {
    let failed: Vec<&Outcome> = outcomes.iter().filter(|o| o.error.is_some()).collect();
    for f in &failed {
        eprintln!("FAILED: {}\n  {}", f.name, f.error.as_deref().unwrap_or_default().replace('\n', "\n  "));
    }
    println!("{} passed, {} failed", outcomes.len() - failed.len(), failed.len());
    if failed.is_empty() {
        0
    } else {
        Kind::TestFailed.code()
    }
}
