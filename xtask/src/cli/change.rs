//! A change's flags: `validate` (a baseline against the patched kernel), `bisect` (the commit
//! that broke the selected scenarios) and `compare` (two runs).

use std::path::PathBuf;

use clap::Args;

use super::{BudgetArgs, KernelArgs, SelectArgs, VmArgs};

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
