//! Every command-line flag of `cargo xtask` (clap derive), one file per family of verbs: the
//! command and its verbs here, the kernel flags and their lowering into build requests
//! (`kernel`), the VM flags (`vm`), the booting verbs' (`boot`), a change's (`change`: validate,
//! bisect, compare), the run folders' and CI's (`folders`; `matrix`, the
//! GitHub Actions matrix made of `run` flags), the project's (`project`), mutation testing's
//! (`mutants`), `atlas`'s, the results history's (`history`); `reference` renders their `--help` into the book's `docs/src/cli.md`.

use clap::{Args, Parser, Subcommand};

mod atlas;
mod boot;
mod change;
mod folders;
mod history;
mod kernel;
pub mod matrix;
mod mutants;
mod project;
pub mod reference;
mod vm;

pub use atlas::AtlasArgs;
pub use boot::{BenchArgs, BootArgs, ExecArgs, RunArgs, SelectArgs, ShellArgs, UpstreamArgs};
pub use change::{BisectArgs, CompareArgs, CompareReportArgs, ValidateArgs};
pub use folders::{CoverageArgs, MatrixArgs, MergeArgs, ReplayArgs, ReportArgs};
pub use history::{
    parse_location, DashboardArgs, FlakesArgs, HistoryArgs, HistoryCmd, ImportArgs, KcidbArgs, Location, ShowArgs,
    WINDOW,
};
pub use kernel::{ConfigArgs, KernelArgs, KnobArgs, SourceArgs, COVERAGE};
pub use mutants::MutantsArgs;
pub use project::{CheckSuitesArgs, SetupArgs, TestArgs};
pub use vm::{parse_memory, VmArgs};

#[derive(Debug, Parser)]
#[command(
    name = "cargo xtask",
    // The commit is stamped by build.rs (`git rev-parse`, or `XTASK_GIT_COMMIT`).
    version = concat!(env!("CARGO_PKG_VERSION"), " (commit ", env!("XTASK_GIT_COMMIT"), ")"),
    about = "Build CONFIG_USER_EVENTS kernels and run the user_events conformance suites under QEMU",
    after_help = "Exit codes (safe for `git bisect run`): 0 passed, 1 a test failed, 125 the kernel cannot be \
                  built (bisect skips the commit), 128 bad input or usage, 129 infrastructure failure, \
                  130 interrupted, 131 --timeout expired (128 and up abort a bisection instead of blaming a commit)."
)]
pub struct Xtask {
    #[command(subcommand)]
    pub command: Cmd,
    /// Skip the provisioning every verb starts with (for hosts and CI images prepared in
    /// advance); a missing tool then fails where it is used. `setup` itself still runs.
    #[arg(long, global = true, env = "XTASK_NO_SETUP", value_parser = clap::builder::FalseyValueParser::new())]
    pub no_setup: bool,
    /// Where each run is recorded, and where `history` reads: `off`, `sqlite:PATH` or
    /// `postgres://USER@HOST/DB` (default: `history.sqlite` in the cache directory). Recording
    /// never fails a run: a store it cannot write is a warning.
    #[arg(long, global = true, value_name = "URL", env = "XTASK_HISTORY", value_parser = parse_location)]
    pub history: Option<Location>,
}

#[derive(Debug, Subcommand)]
pub enum Cmd {
    /// Check the host for everything (QEMU, compilers, static C libraries, kernel source, rust
    /// targets, virtiofsd, kcidb-io); on Debian as root install what is missing.
    Setup(SetupArgs),
    /// Configure and build (or fetch from the cache) the kernel for each arch; print the image paths.
    Kernel(KernelArgs),
    /// The main job: build the kernels, boot them and run the suites.
    Run(RunArgs),
    /// The kernel's own user_events selftests, one boot per binary, per test case (not gating).
    Upstream(UpstreamArgs),
    /// Boot each kernel once with the guest agent and run suites or a compiled plan (default: empty).
    Boot(BootArgs),
    /// Validate suite files without booting (default: every suites/*.yaml).
    CheckSuites(CheckSuitesArgs),
    /// Run a static binary in the guest and return its exit code.
    Exec(ExecArgs),
    /// An interactive console in the guest (tracefs is mounted); Ctrl-A x quits.
    Shell(ShellArgs),
    /// The catalogue's behaviours against the suites: covering scenarios, excuses, last results.
    Coverage(CoverageArgs),
    /// Re-render a run folder's reports (run.json, junit.xml, <arch>.ktap, kcidb.json, summary.md,
    /// report.html) from its saved logs, without booting; exits as the run would have.
    Report(ReportArgs),
    /// Boot a run's boot again exactly as it was (the same kernel, initramfs and QEMU command
    /// line, no planning), to reproduce a crash or hang; judged and reported as a new run.
    Replay(ReplayArgs),
    /// Classify two runs per arch and scenario (fixed, regressed, new, removed, still failing,
    /// flaky) and judge metric changes against the runs' own noise; exits 1 on a regression.
    Compare(CompareArgs),
    /// Build and run the baseline and the patched kernel on every arch, then compare them.
    Validate(ValidateArgs),
    /// Find the commit of a git kernel tree that broke the selected scenarios (`git bisect` in
    /// a private clone; each step an incremental build; unbuildable commits skipped).
    Bisect(BisectArgs),
    /// Print the GitHub Actions matrix (kernels x arches x profiles) as JSON.
    Matrix(MatrixArgs),
    /// Run the gating suites on several kernels (Debian's default source, each
    /// `--kernel-version`, each `--kernel`) and arches, one kernel after the other, and map
    /// which scenarios behave differently where and why; exits 1 on an unexplained difference
    /// or a stale explanation.
    Atlas(AtlasArgs),
    /// Fold per-job result folders (one matrix cell each) into one run folder and its reports.
    Merge(MergeArgs),
    /// The recorded runs: the latest run's scenarios classed against their history (regression,
    /// fixed, unstable, persistent failure, new, missing; exits 1 on a regression), the
    /// scenarios that flip (`flakes`), run folders recorded after the fact (`import`).
    History(HistoryArgs),
    /// Benchmarks: `boot` times the agent's empty-plan boot against a bare static C /init.
    Bench(BenchArgs),
    /// Mutation testing of the kernel under test: the mutants of a kernel C file (default
    /// kernel/trace/trace_events_user.c of the default source), listed (`--list`, `--json`).
    Mutants(MutantsArgs),
    /// The project's tests: unit tests, then real kernel builds and checks on all four arches.
    Test(TestArgs),
}

impl Cmd {
    /// The kernel flags of a verb that builds or boots a kernel.
    pub fn kernel_mut(&mut self) -> Option<&mut KernelArgs> {
        match self {
            Cmd::Kernel(k) => Some(k),
            Cmd::Run(RunArgs { kernel, .. })
            | Cmd::Upstream(UpstreamArgs { kernel, .. })
            | Cmd::Boot(BootArgs { kernel, .. })
            | Cmd::Validate(ValidateArgs { kernel, .. })
            | Cmd::Bisect(BisectArgs { kernel, .. })
            | Cmd::Exec(ExecArgs { kernel, .. })
            | Cmd::Shell(ShellArgs { kernel, .. })
            | Cmd::Bench(BenchArgs { kernel, .. }) => Some(kernel),
            _ => None,
        }
    }

    /// `--cache-dir` of a verb that takes it: its kernel flags', or its own.
    pub fn cache_dir(&mut self) -> Option<std::path::PathBuf> {
        match self {
            Cmd::Atlas(a) => a.cache_dir.clone(),
            Cmd::Mutants(m) => m.cache_dir.clone(),
            _ => self.kernel_mut().and_then(|k| k.cache_dir.clone()),
        }
    }

    /// `--timeout` of a verb that takes it.
    pub fn timeout(&self) -> Option<std::time::Duration> {
        match self {
            Cmd::Run(RunArgs { budget, .. })
            | Cmd::Boot(BootArgs { budget, .. })
            | Cmd::Validate(ValidateArgs { budget, .. })
            | Cmd::Bisect(BisectArgs { budget, .. })
            | Cmd::Atlas(AtlasArgs { budget, .. }) => budget.timeout,
            _ => None,
        }
    }
}

/// `--timeout`: how long a whole run may take.
#[derive(Debug, Clone, Default, Args)]
pub struct BudgetArgs {
    /// Bound the whole run (`90s`, `20m`, `1h30m`; a bare number is seconds): when it expires
    /// the boots are killed, the reports written, and the command exits 131.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub timeout: Option<std::time::Duration>,
}

/// `--timeout`: `90`, `90s`, `20m`, `1h30m`, `2h` (humantime-style, or ISO 8601 `PT20M`).
pub fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    let t = text.trim();
    let parsed = match t.parse::<u64>() {
        Ok(secs) => std::time::Duration::from_secs(secs),
        Err(_) => t
            .parse::<jiff::SignedDuration>()
            .ok()
            .and_then(|d| std::time::Duration::try_from(d).ok())
            .ok_or_else(|| format!("`{text}` is not a duration: write 90s, 20m or 1h30m"))?,
    };
    if parsed.is_zero() {
        return Err(format!("`{text}`: the timeout must be longer than zero"));
    }
    Ok(parsed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;
    use std::path::PathBuf;

    #[test]
    fn flags_are_consistent() {
        Xtask::command().debug_assert();
    }

    #[test]
    fn mutants_flags() {
        let r = Xtask::try_parse_from(["x", "mutants", "--list", "--shard", "2/4", "--in-diff", "p.patch"]);
        let Cmd::Mutants(m) = r.unwrap().command else { panic!() };
        assert_eq!((m.list, m.shard.as_deref(), m.in_diff), (true, Some("2/4"), Some(PathBuf::from("p.patch"))));
        assert!(Xtask::try_parse_from(["x", "mutants", "--run"]).is_err(), "--run needs --coverage-map");
        assert!(Xtask::try_parse_from(["x", "mutants", "--list", "--json"]).is_err());
        assert!(Xtask::try_parse_from(["x", "mutants", "--run", "--coverage-map", "r", "--report"]).is_ok());
    }

    #[test]
    fn source_flags_conflict() {
        let r = Xtask::try_parse_from(["x", "kernel", "--kernel-src", "a", "--kernel-tarball", "b"]);
        assert!(r.is_err());
        let r = Xtask::try_parse_from(["x", "run", "--kernel-version", "7.3", "--patch", "p", "--arch", "arm64"]);
        let Cmd::Run(r) = r.unwrap().command else { panic!() };
        assert_eq!(r.kernel.source.kernel_version.map(|v| v.package()).as_deref(), Some("linux-source-7.3"));
        for other in [["--kernel-src", "d"], ["--kernel-tarball", "t"], ["--kernel-image", "i"]] {
            let r = Xtask::try_parse_from(["x", "kernel", "--kernel-version", "6.1", other[0], other[1]]);
            assert!(r.is_err(), "--kernel-version with {}", other[0]);
        }
        let e = Xtask::try_parse_from(["x", "kernel", "--kernel-version", "6.12.117"]).unwrap_err();
        assert!(e.to_string().contains("give the series, `6.12`"), "{e}");
        let r = Xtask::try_parse_from(["x", "kernel", "--kernel-config", "c"]);
        assert!(r.is_err(), "--kernel-config needs --kernel-image");
        let r = Xtask::try_parse_from(["x", "kernel", "--patch", "a.patch", "--patch", "b.patch", "--arch", "arm64"]);
        let Cmd::Kernel(k) = r.unwrap().command else { panic!() };
        assert_eq!(k.source.patches.len(), 2);
        let r = Xtask::try_parse_from(["x", "exec", "--arch", "arm64", "--", "./t", "-v", "--x"]).unwrap();
        let Cmd::Exec(e) = r.command else { panic!() };
        assert_eq!(e.command, ["./t", "-v", "--x"]);
    }

    #[test]
    fn vm_knobs() {
        assert_eq!(parse_memory("512"), Ok(512));
        assert_eq!(parse_memory("512M"), Ok(512));
        assert_eq!(parse_memory("1G"), Ok(1024));
        assert_eq!(parse_memory("2g"), Ok(2048));
        assert!(parse_memory("1T").unwrap_err().contains("not a size"));
        assert!(parse_memory("32M").unwrap_err().contains("too little"));
        let r = Xtask::try_parse_from(["x", "run", "--memory", "1G", "--kernel-args", "loglevel=8 nokaslr"]).unwrap();
        let Cmd::Run(r) = r.command else { panic!() };
        assert_eq!(
            (r.vm.memory, r.vm.cpus, r.vm.kernel_args.as_slice()),
            (1024, 2, &["loglevel=8 nokaslr".into()][..])
        );
        let r = Xtask::try_parse_from(["x", "boot", "--qemu-args", "-d guest_errors", "--cpus", "1"]).unwrap();
        let Cmd::Boot(b) = r.command else { panic!() };
        assert_eq!((b.vm.qemu_args.as_slice(), b.vm.cpus), (&["-d guest_errors".into()][..], 1));
        assert!(Xtask::try_parse_from(["x", "run", "--cpus", "0"]).is_err());
    }

    #[test]
    fn vm_args_are_shell_quoted_and_repeatable() {
        let args = [
            "x",
            "run",
            "--kernel-args",
            "loglevel=8 dyndbg=\"file trace_events_user.c +p\"",
            "--kernel-args",
            "nokaslr",
            "--qemu-args",
            "-d guest_errors",
            "--qemu-args",
            "-D '/tmp/qemu log.txt'",
        ];
        let Cmd::Run(r) = Xtask::try_parse_from(args).unwrap().command else { panic!() };
        let (kernel, qemu) = r.vm.split_args().unwrap();
        assert_eq!(kernel, ["loglevel=8", "dyndbg=file trace_events_user.c +p", "nokaslr"]);
        assert_eq!(qemu, ["-d", "guest_errors", "-D", "/tmp/qemu log.txt"]);
        let Cmd::Run(r) = Xtask::try_parse_from(["x", "run", "--qemu-args", "-name 'x"]).unwrap().command else {
            panic!()
        };
        let err = r.vm.split_args().unwrap_err();
        assert!(err.to_string().contains("--qemu-args \"-name 'x\": an unclosed quote"), "{err}");
        assert_eq!(crate::support::exit::code_for(&err), 128);
    }

    #[test]
    fn timeouts_parse_like_humans_write_them() {
        use std::time::Duration;
        assert_eq!(parse_duration("20m"), Ok(Duration::from_secs(1200)));
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("90"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("2h"), Ok(Duration::from_secs(7200)));
        assert_eq!(parse_duration("PT20M"), Ok(Duration::from_secs(1200)));
        assert!(parse_duration("soon").unwrap_err().contains("not a duration"));
        assert!(parse_duration("-5m").is_err());
        assert!(parse_duration("0s").unwrap_err().contains("longer than zero"));
        let Cmd::Run(r) = Xtask::try_parse_from(["x", "run", "--timeout", "20m"]).unwrap().command else { panic!() };
        assert_eq!(r.budget.timeout, Some(Duration::from_secs(1200)));
        assert!(Xtask::try_parse_from(["x", "run", "--timeout", "never"]).is_err());
        let Cmd::Exec(e) = Xtask::try_parse_from(["x", "exec", "--timeout", "30", "--", "t"]).unwrap().command else {
            panic!()
        };
        assert_eq!(e.timeout, 30, "exec's --timeout is still its program's seconds");
    }

    #[test]
    fn kernel_flags_lower_into_one_request() {
        use crate::kernel::request::Source;
        let args = ["x", "kernel", "--kernel-version", "7.3", "--patch", "p.patch", "--coverage", "--arch", "arm64"];
        let Cmd::Kernel(k) = Xtask::try_parse_from(args).unwrap().command else { panic!() };
        let r = k.request().unwrap();
        assert!(matches!(&r.source, Source::DebianVersion(v) if v.package() == "linux-source-7.3"));
        assert_eq!((r.arches.len(), r.patches.len()), (1, 1));
        assert_eq!(r.gcov_files, [crate::kernel::gcov::DEFAULT_FILE]);
        assert_eq!(r.profiles, [COVERAGE]);
        let args = ["x", "kernel", "--kernel-image", "bzImage", "--arch", "x86_64", "--make-arg", "LLVM=2"];
        let Cmd::Kernel(k) = Xtask::try_parse_from(args).unwrap().command else { panic!() };
        let r = k.request().unwrap();
        assert!(matches!(r.source, Source::Image { .. }), "an image's knobs are not read");
        let Cmd::Kernel(k) = Xtask::try_parse_from(["x", "kernel", "--arch", "sparc"]).unwrap().command else {
            panic!()
        };
        assert_eq!(crate::support::exit::code_for(&k.request().unwrap_err()), 128);
    }

    #[test]
    fn build_knobs_parse() {
        let args = ["x", "kernel", "--llvm", "--ccache", "--make-arg", "W=1", "--make-arg", "KCFLAGS=-O2 -g"];
        let Cmd::Kernel(k) = Xtask::try_parse_from(args).unwrap().command else { panic!() };
        let knobs = k.knobs.knobs().unwrap();
        assert!(knobs.llvm && knobs.ccache);
        assert_eq!(knobs.make_args, [("W".into(), "1".into()), ("KCFLAGS".into(), "-O2 -g".into())]);
        let args = ["x", "run", "--cc", "gcc-14", "--cross-compile", "x86_64-linux-gnu-", "--make-arg", "LLVM=1"];
        let Cmd::Run(r) = Xtask::try_parse_from(args).unwrap().command else { panic!() };
        let knobs = r.kernel.knobs.knobs().unwrap();
        assert_eq!(
            (knobs.llvm, knobs.cc.as_deref(), knobs.cross_compile.as_deref()),
            (true, Some("gcc-14"), Some("x86_64-linux-gnu-"))
        );
        assert!(Xtask::try_parse_from(["x", "kernel", "--make-arg", "ARCH=arm"]).is_err());
    }

    #[test]
    fn suites_are_files_and_exclude_a_plan() {
        let r = Xtask::try_parse_from(["x", "boot", "--suite", "a.yaml", "b.yaml", "--suite", "c.yaml"]).unwrap();
        let Cmd::Boot(b) = r.command else { panic!() };
        assert_eq!(b.select.suites, [PathBuf::from("a.yaml"), "b.yaml".into(), "c.yaml".into()]);
        assert!(Xtask::try_parse_from(["x", "boot", "--suite", "a.yaml", "--plan", "p.json"]).is_err());
        assert!(Xtask::try_parse_from(["x", "boot", "--filter", "a/*", "--plan", "p.json"]).is_err());
        let r = Xtask::try_parse_from(["x", "run", "--filter", "process/*", "--filter", "!*/fork*", "--list"]).unwrap();
        let Cmd::Run(r) = r.command else { panic!() };
        assert_eq!((r.select.filters.len(), r.select.list, r.select.rerun_failed), (2, true, None));
        let r = Xtask::try_parse_from(["x", "run", "--rerun-failed"]).unwrap();
        let Cmd::Run(r) = r.command else { panic!() };
        assert_eq!(r.select.rerun_failed, Some(PathBuf::from("latest")));
        let r = Xtask::try_parse_from(["x", "validate", "--patch", "p", "--rerun-failed", "results/x"]).unwrap();
        let Cmd::Validate(v) = r.command else { panic!() };
        assert_eq!(v.select.rerun_failed, Some(PathBuf::from("results/x")));
        let r = Xtask::try_parse_from(["x", "check-suites"]).unwrap();
        let Cmd::CheckSuites(c) = r.command else { panic!() };
        assert!(c.files.is_empty());
        let r = Xtask::try_parse_from(["x", "run", "--upstream-selftests", "--arch", "arm64"]).unwrap();
        let Cmd::Run(r) = r.command else { panic!() };
        assert!(r.upstream_selftests);
        assert!(Xtask::try_parse_from(["x", "upstream", "--arch", "x86_64", "--patch", "p"]).is_ok());
        let r = Xtask::try_parse_from(["x", "report", "--from", "results/latest"]).unwrap();
        let Cmd::Report(r) = r.command else { panic!() };
        assert_eq!(r.from, PathBuf::from("results/latest"));
        assert!(Xtask::try_parse_from(["x", "report"]).is_err(), "--from is required");
    }

    #[test]
    fn bench_suites_takes_filters_and_vm_knobs() {
        let r = Xtask::try_parse_from(["x", "bench", "suites", "--filter", "performance/reg*", "--cpus", "1"]).unwrap();
        let Cmd::Bench(b) = r.command else { panic!("not bench") };
        assert_eq!((b.what.as_str(), b.filters.len(), b.vm.cpus), ("suites", 1, 1));
        assert!(Xtask::try_parse_from(["x", "bench", "nosuch"]).is_err());
    }

    #[test]
    fn atlas_flags_name_kernels_and_scenarios() {
        let args = ["x", "atlas", "--kernel-version", "7.3", "--kernel", "l.tar.xz", "--arch", "arm64"];
        let args = [&args[..], &["--filter", "format/*", "--timeout", "2h", "--memory", "1G"]].concat();
        let Cmd::Atlas(a) = Xtask::try_parse_from(args).unwrap().command else { panic!() };
        assert_eq!((a.kernel_versions.len(), a.kernels.len(), a.arch.as_str()), (1, 1, "arm64"));
        assert_eq!((a.select().filters, a.vm.memory), (vec!["format/*".to_string()], 1024));
        assert_eq!(Cmd::Atlas(a).timeout(), Some(std::time::Duration::from_secs(7200)));
        let Cmd::Atlas(a) = Xtask::try_parse_from(["x", "atlas", "--list"]).unwrap().command else { panic!() };
        assert!(a.select().list && a.arch == "all" && a.kernel_versions.is_empty());
        let kernels =
            matrix::kernel_choices(&a.kernels, &[crate::kernel::debian::parse_kernel_version("7.2").unwrap()]);
        let kernels = kernels.unwrap();
        assert_eq!(kernels.iter().map(|k| k.label.as_str()).collect::<Vec<_>>(), ["debian", "debian-7.2"]);
        assert!(kernels[0].source.is_default() && kernels[1].source.kernel_version.is_some());
        let k = matrix::kernel_choices(&["a/linux.tar.xz".into(), "/src/linux".into()], &[]).unwrap();
        assert_eq!(k[1].source.kernel_tarball.as_deref(), Some(std::path::Path::new("a/linux.tar.xz")));
        assert_eq!(k[2].source.kernel_src.as_deref(), Some(std::path::Path::new("/src/linux")));
    }

    #[test]
    fn compare_validate_matrix_merge() {
        let r = Xtask::try_parse_from(["x", "compare", "a", "b", "--out", "o", "--fail-on-metrics"]).unwrap();
        let Cmd::Compare(c) = r.command else { panic!() };
        assert_eq!((c.base, c.current, c.report.out), ("a".into(), "b".into(), Some("o".into())));
        assert!(c.report.fail_on_metrics);
        assert!(Xtask::try_parse_from(["x", "compare", "a"]).is_err(), "two sides");
        let args = ["x", "validate", "--patch", "p", "--arch", "x86_64", "--suite", "s.yaml", "--profile", "debug"];
        let Cmd::Validate(v) = Xtask::try_parse_from(args).unwrap().command else { panic!() };
        assert_eq!((v.kernel.source.patches.len(), v.select.suites.len()), (1, 1));
        assert_eq!(v.kernel.config.profiles, ["debug"]);
        assert_eq!(v.repeat, 1);
        let r = Xtask::try_parse_from(["x", "matrix", "--kernel", "l.tar.xz", "--profile", "debug"]).unwrap();
        let Cmd::Matrix(m) = r.command else { panic!() };
        assert_eq!((m.kernels.len(), m.arch.as_str()), (1, "all"));
        assert!(Xtask::try_parse_from(["x", "merge"]).is_err(), "at least one folder");
        let Cmd::Merge(m) = Xtask::try_parse_from(["x", "merge", "a", "b"]).unwrap().command else { panic!() };
        assert_eq!(m.dirs.len(), 2);
    }
}
