//! Every command-line flag of `cargo xtask`, declared in one place.
//!
//! tidy: long because it is the one place every verb's flags are declared (their help is the
//! `--help` text); splitting it by verb would scatter the shared groups (`KernelArgs`, `VmArgs`).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

pub mod reference;

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
    /// Fold per-job result folders (one matrix cell each) into one run folder and its reports.
    Merge(MergeArgs),
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

    /// `--timeout` of a verb that takes it.
    pub fn timeout(&self) -> Option<std::time::Duration> {
        match self {
            Cmd::Run(RunArgs { budget, .. })
            | Cmd::Boot(BootArgs { budget, .. })
            | Cmd::Validate(ValidateArgs { budget, .. })
            | Cmd::Bisect(BisectArgs { budget, .. }) => budget.timeout,
            _ => None,
        }
    }
}

impl SourceArgs {
    /// Whether no flag names a source (the default one is then used).
    pub fn is_default(&self) -> bool {
        self.kernel_src.is_none()
            && self.kernel_tarball.is_none()
            && self.kernel_version.is_none()
            && self.kernel_image.is_none()
            && self.git_commit.is_none()
    }
}

#[derive(Debug, Clone, Args)]
pub struct MutantsArgs {
    /// The kernel C file to mutate (default: kernel/trace/trace_events_user.c of the default
    /// kernel source, unpacked in the cache).
    #[arg(long, value_name = "PATH")]
    pub file: Option<PathBuf>,
    /// Print one line per mutant: id, file:line, function, operator, `orig -> repl`.
    #[arg(long)]
    pub list: bool,
    /// Print the mutants as JSON (each with its unified diff).
    #[arg(long, conflicts_with = "list")]
    pub json: bool,
    /// Keep only the mutants on lines this patch adds or changes in the file.
    #[arg(long, value_name = "PATCH")]
    pub in_diff: Option<PathBuf>,
    /// Keep the k-th of n deterministic shares (by mutant id), e.g. 2/4.
    #[arg(long, value_name = "K/N")]
    pub shard: Option<String>,
    /// Keep only the mutant of this id (repeatable); an id the file does not have is an error.
    #[arg(long = "id", value_name = "ID")]
    pub ids: Vec<String>,
    /// Mutate the default file as these patches leave it (repeatable, applied in order); each
    /// mutant's run builds the kernel with them and then the mutant's own diff.
    #[arg(long = "patch", value_name = "PATCH", conflicts_with = "file")]
    pub patches: Vec<PathBuf>,
    /// A `run --coverage` run folder: its per-scenario tracefiles say which scenarios execute
    /// each mutant's lines (none: NoCoverage, decided without a build). Repeatable: each map is
    /// a stage, run on its arches with its kernel's profiles (those it was built with, but
    /// `coverage`), or with the ones named after it (`RUN+debug`, `RUN+faults+kmemleak`,
    /// `RUN+default` for none); `@N` runs at most the N fastest of a mutant's covering
    /// scenarios there (`RUN+debug@10`: a slow kernel's stage). A mutant runs at the first
    /// stage whose map covers it, and a survivor again at each later one that covers it,
    /// until one kills it; NoCoverage is a mutant no map covers.
    #[arg(long, value_name = "RUN[+PROFILE...][@N]")]
    pub coverage_map: Vec<String>,
    /// Where the state file (`state.jsonl`, each finished mutant's result) and `mutants.json`
    /// go (default: results/mutants/ in the checkout).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// The list of equivalent mutants (default: the tracked mutants/equivalent.tsv: id, class,
    /// the file digests it was argued for, Kconfig conditions, reason). An entry applies only
    /// to a file text whose digest it names. An empty file runs the listed ones too.
    #[arg(long, value_name = "FILE")]
    pub equivalent: Option<PathBuf>,
    /// Trivial compiler equivalence: on each of these arches (`x86_64`, `x86_64,s390x`), the
    /// selected mutants' files compiled on their own with the default kernel build's command
    /// line (the kernel is built first if need be), stripped objects compared with the
    /// original's (Equivalent) and each other's (Duplicate); written to <out>/tce.json. A proof
    /// holds for that kernel's configuration only, so runs do not take it as equivalence.
    #[arg(long, value_name = "ARCHES", conflicts_with_all = ["run", "check_equivalents"])]
    pub tce: Option<String>,
    /// Check the equivalent list against the file, without building: exit 1 when an entry
    /// names no mutant of it or was argued for another text of it (each named with its line).
    #[arg(long, conflicts_with_all = ["run", "recheck_equivalents"])]
    pub check_equivalents: bool,
    /// With --run, build and boot every listed equivalent of the file as a mutant like any
    /// other (results in <out>/recheck/), then exit 1 when one is killed or timed out,
    /// or when a kernel it ran on does not meet its Kconfig conditions; an entry that names no
    /// mutant or another text of the file fails too.
    #[arg(long, requires = "run", conflicts_with = "ids")]
    pub recheck_equivalents: bool,
    /// Write <out>/mutants.json (Stryker's report schema) with what is known without running:
    /// results kept in the state file, the tracked equivalents, NoCoverage from
    /// --coverage-map; every other mutant Pending. Also <out>/summary.md (the scores) and
    /// <out>/mutants.html (each Survived and NoCoverage mutant in its source context).
    #[arg(long)]
    pub report: bool,
    /// Build and boot each planned mutant (needs --coverage-map): its diff as an extra
    /// --patch, only its covering scenarios run, each result kept in <out>/state.jsonl; a
    /// second run skips the finished ones.
    #[arg(long, requires = "coverage_map", conflicts_with_all = ["list", "json"])]
    pub run: bool,
    /// With --run, bound each mutant's run (build and boots; `90s`, `10m`): a mutant whose run
    /// is still going then is Timeout, unless a scenario had already failed (Killed).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, requires = "run")]
    pub timeout: Option<std::time::Duration>,
    /// With --run, the kernels' profiles from kernel-configs/profiles/ (repeatable), for every
    /// map not followed by its own (`RUN+debug`): `--profile debug` (KASAN, lockdep, UBSAN)
    /// kills mutants that only misuse memory or locks, `--profile kmemleak` those that leak.
    #[arg(long = "profile", value_name = "NAME", requires = "run")]
    pub profiles: Vec<String>,
    /// With --run, how many mutants run at the same time (each is one VM; a mutant built on
    /// its own waits for the other's build while the source mirror is synced).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=16), requires = "run")]
    pub parallel: u32,
    /// With --run, build each mutant's kernel on its own (an incremental build and relink per
    /// mutant) instead of booting one schemata kernel that holds them all.
    #[arg(long, requires = "run")]
    pub one_by_one: bool,
    /// Cache directory for sources, build trees and built kernels.
    #[arg(long, env = "XTASK_CACHE_DIR")]
    pub cache_dir: Option<PathBuf>,
}

#[derive(Debug, Clone, Args)]
pub struct SetupArgs {
    /// Only report what is missing (exit 129 when something is); change nothing.
    #[arg(long)]
    pub check: bool,
    /// x86_64, arm64, s390x, riscv64, all, or a comma-separated list (x86_64,s390x).
    #[arg(long, default_value = "all")]
    pub arch: String,
}

#[derive(Debug, Clone, Args)]
pub struct CoverageArgs {
    /// Where run folders are (default: results/ in the checkout).
    #[arg(long, value_name = "DIR")]
    pub results: Option<PathBuf>,
    /// Instead: check a coverage run's unexecuted lines against suites/unexecuted-lines.tsv (RUN:
    /// a run folder or a run id under --results; default the newest coverage run); exit 1 when
    /// a line is neither executed nor listed, or the list is stale.
    #[arg(long, value_name = "RUN", num_args = 0..=1, default_missing_value = "")]
    pub unexecuted: Option<PathBuf>,
    /// With --unexecuted: the run ran only some scenarios, so only listed lines it executed
    /// (and listed lines gone from the source) are findings.
    #[arg(long, requires = "unexecuted")]
    pub partial: bool,
    /// With --unexecuted: this list instead of suites/unexecuted-lines.tsv.
    #[arg(long, value_name = "FILE", requires = "unexecuted")]
    pub list: Option<PathBuf>,
}

#[derive(Debug, Clone, Args)]
pub struct KernelArgs {
    /// x86_64, arm64, s390x, riscv64, all, or a comma-separated list (x86_64,s390x). `exec`
    /// and `shell` boot the host's arch unless told otherwise.
    #[arg(long, default_value = crate::arch::DEFAULT)]
    pub arch: String,
    #[command(flatten)]
    pub source: SourceArgs,
    #[command(flatten)]
    pub config: ConfigArgs,
    #[command(flatten)]
    pub knobs: KnobArgs,
    /// Parallel make jobs (default: the number of cores).
    #[arg(long, short = 'j')]
    pub jobs: Option<usize>,
    /// Cache directory for sources, build trees and built kernels.
    #[arg(long, env = "XTASK_CACHE_DIR")]
    pub cache_dir: Option<PathBuf>,
    /// Stop after configuring and checking the options (nothing is built or cached).
    #[arg(long)]
    pub config_only: bool,
    /// Print each build's metadata.json path and contents summary as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// Build knobs as kernel engineers spell them (`kernel/knobs.rs`); each is in the cache key and
/// the build's provenance.
#[derive(Debug, Clone, Default, Args)]
pub struct KnobArgs {
    /// Build with clang and lld (`LLVM=1`); needs clang, lld and llvm.
    #[arg(long)]
    pub llvm: bool,
    /// The compiler (`CC=`), e.g. `gcc-14` or `clang-19`.
    #[arg(long, value_name = "CC")]
    pub cc: Option<String>,
    /// The toolchain prefix (`CROSS_COMPILE=`) instead of the arch's own.
    #[arg(long, value_name = "PREFIX")]
    pub cross_compile: Option<String>,
    /// Compile through ccache (`CC="ccache gcc"`) when it is installed.
    #[arg(long)]
    pub ccache: bool,
    /// An extra make variable, `KEY=VALUE` (repeatable, in order), e.g. `W=1`, `KCFLAGS=-g`;
    /// `LLVM=1`, `CC=...` and `CROSS_COMPILE=...` are the knobs above.
    #[arg(long = "make-arg", value_name = "KEY=VALUE", value_parser = crate::kernel::knobs::parse_make_arg)]
    pub make_args: Vec<(String, String)>,
}

impl KnobArgs {
    pub fn knobs(&self) -> anyhow::Result<crate::kernel::knobs::Knobs> {
        crate::kernel::knobs::Knobs::from_flags(
            self.llvm,
            self.cc.clone(),
            self.cross_compile.clone(),
            self.ccache,
            &self.make_args,
        )
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

/// How the VMs run.
#[derive(Debug, Clone, Args)]
pub struct VmArgs {
    /// auto probes KVM with a trial boot (cached) and falls back to TCG.
    #[arg(long, value_enum, default_value = "auto")]
    pub accel: crate::vm::qemu::AccelChoice,
    /// Share a host folder into the guest over virtio-fs: HOST_DIR[:GUEST_PATH] (default /share).
    #[arg(long, value_name = "HOST_DIR[:GUEST_PATH]")]
    pub share: Option<String>,
    /// How virtiofsd, which serves the guest's shared folders, is isolated from the host: the
    /// kernel under test is untrusted. auto is namespace where the host allows it, else chroot;
    /// none (unsandboxed, symlink escapes possible) only when named.
    #[arg(long, value_enum, default_value = "auto", value_name = "MODE")]
    pub virtiofsd_sandbox: crate::vm::virtiofsd::SandboxChoice,
    /// Virtual CPUs per VM (1 turns the SMP paths off).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub cpus: u32,
    /// VMs per arch for the shared scenarios: the plan is cut into this many parts of about
    /// equal size, booted side by side, and their results folded back into the arch's
    /// (`-j/--jobs` is make's).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub vms: u32,
    /// Memory per VM: MiB, or with a unit (`512M`, `1G`).
    #[arg(long, default_value = "512", value_parser = parse_memory)]
    pub memory: u32,
    /// Appended to the guest kernel's command line, e.g. "loglevel=8 ftrace_dump_on_oops"
    /// (repeatable; split as a shell would, quotes kept together: `dyndbg="file x.c +p"`).
    #[arg(long, value_name = "ARGS", allow_hyphen_values = true)]
    pub kernel_args: Vec<String>,
    /// Appended to QEMU's arguments, e.g. "-d guest_errors" (repeatable; split as a shell
    /// would: `--qemu-args "-append 'a b'"` passes `a b` as one argument).
    #[arg(long, value_name = "ARGS", allow_hyphen_values = true)]
    pub qemu_args: Vec<String>,
    /// Where run folders go (default: results/ in the checkout).
    #[arg(long, value_name = "DIR")]
    pub results: Option<PathBuf>,
}

impl KernelArgs {
    /// `shell` and `exec` run one VM: no `--arch` (or `all`) means the host's arch, when this tool
    /// has one of that kind; any other value must name exactly one arch.
    pub fn single_arch(&self, verb: &str) -> anyhow::Result<KernelArgs> {
        use crate::support::exit::{error, Kind};
        let names = || crate::arch::ARCHES.iter().map(|a| format!("--arch {}", a.name)).collect::<Vec<_>>().join(", ");
        if self.arch != "all" && self.arch != crate::arch::DEFAULT {
            let arches = crate::arch::select(&self.arch).map_err(|e| error(Kind::BadInput, format!("--arch: {e}")))?;
            if arches.len() != 1 {
                return Err(error(Kind::BadInput, format!("{verb} runs one VM: pass one of {}", names())));
            }
            return Ok(self.clone());
        }
        let host = crate::arch::ARCHES.iter().find(|a| a.uname_machine == std::env::consts::ARCH).ok_or_else(|| {
            error(
                Kind::BadInput,
                format!("{verb} runs one VM and this host's arch has none here: pass one of {}", names()),
            )
        })?;
        Ok(KernelArgs { arch: host.name.to_string(), ..self.clone() })
    }
}

impl VmArgs {
    /// `--kernel-args` and `--qemu-args`, each split into words as a shell would.
    pub fn split_args(&self) -> anyhow::Result<(Vec<String>, Vec<String>)> {
        Ok((shell_words(&self.kernel_args, "--kernel-args")?, shell_words(&self.qemu_args, "--qemu-args")?))
    }

    /// `--results`, else `results/` in the checkout.
    pub fn results_root(&self) -> PathBuf {
        self.results.clone().unwrap_or_else(crate::support::checkout::default_results)
    }
}

/// Each flag value split into words as a shell would, in order.
fn shell_words(values: &[String], flag: &str) -> anyhow::Result<Vec<String>> {
    let mut words = Vec::new();
    for v in values {
        let split = shlex::split(v).ok_or_else(|| {
            crate::support::exit::error(
                crate::support::exit::Kind::BadInput,
                format!("{flag} {v:?}: an unclosed quote or a trailing backslash"),
            )
        })?;
        words.extend(split);
    }
    Ok(words)
}

/// `--memory`: `512`, `512M`, `1G` (MiB as the unit when none is given).
pub fn parse_memory(text: &str) -> Result<u32, String> {
    let t = text.trim();
    let (digits, factor) = match t.char_indices().last() {
        Some((i, 'M' | 'm')) => (&t[..i], 1),
        Some((i, 'G' | 'g')) => (&t[..i], 1024),
        _ => (t, 1),
    };
    let n: u32 = digits.parse().map_err(|_| format!("`{text}` is not a size: write 512, 512M or 1G"))?;
    let mib = n.checked_mul(factor).ok_or_else(|| format!("`{text}` is too large"))?;
    if mib < 64 {
        return Err(format!("{mib} MiB is too little for the guest (at least 64M)"));
    }
    Ok(mib)
}

/// Which scenarios run.
#[derive(Debug, Clone, Default, Args)]
pub struct SelectArgs {
    /// Suite files (YAML) to run (repeatable; default: every suites/*.yaml).
    #[arg(long = "suite", value_name = "FILE", num_args = 1..)]
    pub suites: Vec<PathBuf>,
    /// Only the scenarios whose `suite/scenario` name matches GLOB (`*`, `?`; repeatable);
    /// `!GLOB` leaves matching ones out.
    #[arg(long = "filter", value_name = "GLOB", allow_hyphen_values = true)]
    pub filters: Vec<String>,
    /// Print the selected plan per arch (with skip reasons) and boot nothing.
    #[arg(long)]
    pub list: bool,
    /// Also run the measuring suites (suites/performance.yaml), which the default plan leaves
    /// out: their figures land in the results; they never gate.
    #[arg(long)]
    pub bench: bool,
    /// Only the failed, timed-out and not-run scenarios of a run, per arch (default: the latest).
    #[arg(long, value_name = "RUN", num_args = 0..=1, default_missing_value = "latest")]
    pub rerun_failed: Option<PathBuf>,
    /// Run the scenarios in the order of the `--filter`s that match them (a scenario takes the
    /// place of the first one), instead of the suites' order: `mutants --run` gives each
    /// mutant's covering scenarios fastest first, so a failure that kills it comes early.
    #[arg(long)]
    pub in_filter_order: bool,
}

#[derive(Debug, Clone, Args)]
pub struct ReplayArgs {
    /// The run folder (results/<run-id>, or results/latest).
    pub run: PathBuf,
    /// Replay only this arch's boots.
    #[arg(long)]
    pub arch: Option<String>,
    /// Replay only the boot folder of this name (x86_64, x86_64.resume-1, ...).
    #[arg(long)]
    pub boot: Option<String>,
    /// Where the new run folder goes (default: results/ in the checkout).
    #[arg(long, value_name = "DIR")]
    pub results: Option<PathBuf>,
}

#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub kernel: KernelArgs,
    #[command(flatten)]
    pub vm: VmArgs,
    #[command(flatten)]
    pub budget: BudgetArgs,
    #[command(flatten)]
    pub select: SelectArgs,
    /// After the suites, also run the kernel's own user_events selftests (not gating).
    #[arg(long)]
    pub upstream_selftests: bool,
    /// Stop each arch at its first failing scenario (an xfail does not count): the agent
    /// reports the rest of that boot as skipped, and no resume or isolated boot follows on
    /// that arch; a kernel that kills a task (Oops, fault, BUG) ends the VM 3 s later. What
    /// `mutants --run` uses: one failure is enough to kill a mutant.
    #[arg(long)]
    pub fail_fast: bool,
}

#[derive(Debug, Clone, Args)]
pub struct UpstreamArgs {
    #[command(flatten)]
    pub kernel: KernelArgs,
    #[command(flatten)]
    pub vm: VmArgs,
}

#[derive(Debug, Clone, Args)]
pub struct BootArgs {
    #[command(flatten)]
    pub kernel: KernelArgs,
    #[command(flatten)]
    pub vm: VmArgs,
    #[command(flatten)]
    pub budget: BudgetArgs,
    /// A compiled plan (JSON, the guest agent's input) instead of the empty plan.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["suites", "filters", "list", "rerun_failed"])]
    pub plan: Option<PathBuf>,
    /// Without `--suite`, `--filter` or `--rerun-failed`, boot boots the empty plan.
    #[command(flatten)]
    pub select: SelectArgs,
}

#[derive(Debug, Clone, Args)]
pub struct ReportArgs {
    /// The run folder: `results/<run-id>` (or `results/latest`).
    #[arg(long, value_name = "DIR")]
    pub from: PathBuf,
}

#[derive(Debug, Clone, Args)]
pub struct CompareArgs {
    /// The baseline: a run folder, its run.json, or a folder of run folders (repeats).
    #[arg(value_name = "BASE")]
    pub base: PathBuf,
    /// The run to judge, in the same forms.
    #[arg(value_name = "CURRENT")]
    pub current: PathBuf,
    #[command(flatten)]
    pub report: CompareReportArgs,
}

#[derive(Debug, Clone, Args)]
pub struct CompareReportArgs {
    /// Where compare.json and compare.md go (default: beside CURRENT).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Also exit 1 when a metric got worse beyond the measured noise.
    #[arg(long)]
    pub fail_on_metrics: bool,
    /// List every figure, not only those that moved beyond noise.
    #[arg(long)]
    pub verbose: bool,
}

#[derive(Debug, Clone, Args)]
pub struct ValidateArgs {
    #[command(flatten)]
    pub kernel: KernelArgs,
    #[command(flatten)]
    pub vm: VmArgs,
    #[command(flatten)]
    pub budget: BudgetArgs,
    #[command(flatten)]
    pub select: SelectArgs,
    /// The baseline: this commit of the --kernel-src git tree (the change is then what lies
    /// between it and --head, or the working tree).
    #[arg(long, value_name = "REF")]
    pub base: Option<String>,
    /// With --base: the commit to validate (default: HEAD plus the uncommitted changes).
    #[arg(long, value_name = "REF", requires = "base")]
    pub head: Option<String>,
    /// Run the baseline even when the same kernel, plan, agent and VM options ran before (by
    /// default those results are read back, and `--repeat` tops them up).
    #[arg(long)]
    pub fresh_baseline: bool,
    /// Runs of each side (repeats let compare tell a flaky scenario from a regression).
    #[arg(long, default_value_t = 1)]
    pub repeat: usize,
    /// Run only the scenarios that executed the changed lines on the baseline (read from its
    /// coverage map); refused, with the reason, when the map cannot judge the change.
    #[arg(long)]
    pub affected: bool,
    /// The baseline's coverage map: a coverage run (its folder, or a run id under --results) of
    /// the same kernel source and patches. Default: the newest such run under --results.
    #[arg(long, value_name = "RUN")]
    pub coverage_map: Option<PathBuf>,
    #[command(flatten)]
    pub report: CompareReportArgs,
}

#[derive(Debug, Clone, Args)]
pub struct BisectArgs {
    #[command(flatten)]
    pub kernel: KernelArgs,
    #[command(flatten)]
    pub vm: VmArgs,
    #[command(flatten)]
    pub budget: BudgetArgs,
    #[command(flatten)]
    pub select: SelectArgs,
    /// A commit where the selected scenarios pass.
    #[arg(long, value_name = "REF")]
    pub good: String,
    /// A commit where they fail.
    #[arg(long, value_name = "REF")]
    pub bad: String,
}

#[derive(Debug, Clone, Args)]
pub struct MatrixArgs {
    /// A kernel besides Debian's default source: a tarball (`*.tar.*`) or a tree (repeatable).
    #[arg(long = "kernel", value_name = "TARBALL|DIR")]
    pub kernels: Vec<String>,
    /// A Debian kernel series besides the default source, run with `--kernel-version X` (repeatable).
    #[arg(long = "kernel-version", value_name = "X", value_parser = crate::kernel::debian::parse_kernel_version)]
    pub kernel_versions: Vec<crate::kernel::debian::KernelVersion>,
    /// x86_64, arm64, s390x, riscv64, all, or a comma-separated list (x86_64,s390x).
    #[arg(long, default_value = "all")]
    pub arch: String,
    /// A profile (`default` or a name from kernel-configs/profiles/; repeatable; default: all).
    #[arg(long = "profile", value_name = "NAME")]
    pub profiles: Vec<String>,
}

#[derive(Debug, Clone, Args)]
pub struct MergeArgs {
    /// Result folders: run folders, or folders holding them (downloaded artifacts).
    #[arg(value_name = "DIR", required = true)]
    pub dirs: Vec<PathBuf>,
    /// The merged run folder (default: a new results/<run-id>).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

#[derive(Debug, Clone, Args)]
pub struct CheckSuitesArgs {
    /// Suite files (default: every suites/*.yaml in the checkout).
    #[arg(value_name = "FILES")]
    pub files: Vec<PathBuf>,
}

#[derive(Debug, Clone, Args)]
pub struct ExecArgs {
    #[command(flatten)]
    pub kernel: KernelArgs,
    #[command(flatten)]
    pub vm: VmArgs,
    /// Seconds the binary may run before it is killed.
    #[arg(long, default_value_t = 300)]
    pub timeout: u64,
    /// The static binary to run in the guest, then its arguments.
    #[arg(required = true, last = true, value_name = "BINARY [ARGS]")]
    pub command: Vec<String>,
}

#[derive(Debug, Clone, Args)]
pub struct ShellArgs {
    #[command(flatten)]
    pub kernel: KernelArgs,
    #[command(flatten)]
    pub vm: VmArgs,
}

#[derive(Debug, Clone, Args)]
pub struct BenchArgs {
    /// What to measure: `boot` (the agent's boot against a bare static C /init) or `suites`
    /// (the measuring suites, `suites/performance.yaml`, which the gating plan leaves out).
    #[arg(value_parser = ["boot", "suites"])]
    pub what: String,
    #[command(flatten)]
    pub kernel: KernelArgs,
    #[command(flatten)]
    pub vm: VmArgs,
    /// `bench boot`: boots of each kind per arch.
    #[arg(long, default_value_t = 7)]
    pub runs: usize,
    /// `bench suites`: only the measuring scenarios whose `suite/name` matches (repeatable).
    #[arg(long = "filter", value_name = "GLOB", allow_hyphen_values = true)]
    pub filters: Vec<String>,
}

#[derive(Debug, Clone, Default, Args)]
pub struct SourceArgs {
    /// A kernel tree (git checkout or unpacked tarball); never written to.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["kernel_tarball", "kernel_image"])]
    pub kernel_src: Option<PathBuf>,
    /// A kernel source tarball.
    #[arg(long, value_name = "FILE", conflicts_with = "kernel_image")]
    pub kernel_tarball: Option<PathBuf>,
    /// Debian's linux-source-X package (6.1, 6.12, 7.2, 7.3, ...), fetched with a private apt
    /// configuration in the cache and built like a tarball; `X=DEBIAN_VERSION` pins an upload.
    #[arg(
        long,
        value_name = "X[=DEBIAN_VERSION]",
        value_parser = crate::kernel::debian::parse_kernel_version,
        conflicts_with_all = ["kernel_src", "kernel_tarball", "kernel_image"]
    )]
    pub kernel_version: Option<crate::kernel::debian::KernelVersion>,
    /// A patch applied on a private copy of the source (repeatable, in order).
    #[arg(long = "patch", value_name = "FILE", conflicts_with = "kernel_image")]
    pub patches: Vec<PathBuf>,
    /// Use an already built kernel image instead of building one (needs a single --arch).
    #[arg(long, value_name = "FILE")]
    pub kernel_image: Option<PathBuf>,
    /// Set by `validate --base` and `bisect`, not a flag: build this commit of this git tree.
    #[arg(skip)]
    pub git_commit: Option<(PathBuf, String)>,
    /// The .config of --kernel-image (default: the .config beside it).
    #[arg(long, value_name = "FILE", requires = "kernel_image")]
    pub kernel_config: Option<PathBuf>,
}

#[derive(Debug, Clone, Default, Args)]
pub struct ConfigArgs {
    /// A named profile from kernel-configs/profiles/ (repeatable), e.g. `debug`.
    #[arg(long = "profile", value_name = "NAME")]
    pub profiles: Vec<String>,
    /// An extra Kconfig fragment file, merged after the profiles (repeatable).
    #[arg(long = "fragment", value_name = "FILE")]
    pub fragments: Vec<PathBuf>,
    /// One option, `CONFIG_X=value` or `CONFIG_X=n`, merged last (repeatable).
    #[arg(long = "kconfig", value_name = "CONFIG_X=VALUE")]
    pub kconfig: Vec<String>,
    /// A coverage kernel: GCOV on the `--coverage-file` sources (default
    /// kernel/trace/trace_events_user.c), each scenario's lines and branches written as lcov
    /// tracefiles into the run folder (`--profile coverage` does the same).
    #[arg(long)]
    pub coverage: bool,
    /// A kernel source file to build with GCOV (repeatable; implies --coverage).
    #[arg(long = "coverage-file", value_name = "PATH")]
    pub coverage_files: Vec<String>,
    /// With --patch (or validate's change): exit 2 when a line the patch adds or changes in an
    /// instrumented source compiles to code that no scenario executed on any arch (implies
    /// --coverage).
    #[arg(long)]
    pub fail_on_blind_spots: bool,
}

impl ConfigArgs {
    /// The sources a coverage kernel instruments; empty for a normal kernel.
    pub fn gcov_files(&self) -> Vec<String> {
        let on = self.coverage
            || self.fail_on_blind_spots
            || !self.coverage_files.is_empty()
            || self.profiles.iter().any(|p| p == COVERAGE);
        match (on, self.coverage_files.is_empty()) {
            (false, _) => vec![],
            (true, true) => vec![crate::kernel::gcov::DEFAULT_FILE.to_string()],
            (true, false) => {
                let mut files = self.coverage_files.clone();
                files.dedup();
                files
            }
        }
    }

    /// The profiles merged, with `coverage` (its Kconfig fragment) on a coverage kernel.
    pub fn profiles(&self) -> Vec<String> {
        let mut p = self.profiles.clone();
        if !self.gcov_files().is_empty() && !p.iter().any(|x| x == COVERAGE) {
            p.push(COVERAGE.to_string());
        }
        p
    }
}

/// The profile (kernel-configs/profiles/coverage.config) of a coverage kernel.
pub const COVERAGE: &str = "coverage";

#[derive(Debug, Clone, Args)]
pub struct TestArgs {
    /// Run only the fast unit tests (what plain `cargo test` runs).
    #[arg(long)]
    pub unit_only: bool,
    /// Cache directory for sources, build trees and built kernels.
    #[arg(long, env = "XTASK_CACHE_DIR")]
    pub cache_dir: Option<PathBuf>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

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
