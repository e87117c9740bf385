//! The booting verbs' flags: which scenarios run (`SelectArgs`), and `run`, `upstream`,
//! `boot`, `exec`, `shell`, `bench`.

use std::path::PathBuf;

use clap::Args;

use super::{BudgetArgs, KernelArgs, VmArgs};

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
    /// Mutants in one boot (what `mutants --run` writes): each mutant's covering scenarios as a
    /// group, renamed `<scenario>@<mutant id>`, under its number in the schemata kernel.
    #[arg(long, value_name = "FILE", hide = true)]
    pub mutant_batch: Option<PathBuf>,
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
    /// Gate on every failure at once. By default a failure whose history (`--history`) flips
    /// between pass and fail in its last 10 runs is run again in a fresh boot of the same
    /// kernel: passing there it is `unstable` and does not gate; failing again it is a
    /// regression.
    #[arg(long)]
    pub no_rerun_unstable: bool,
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
