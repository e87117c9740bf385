//! The flags of the verbs over run folders and CI: `report`, `replay`, `merge`, `matrix` and
//! `coverage`.

use std::path::PathBuf;

use clap::Args;

#[derive(Debug, Clone, Args)]
pub struct ReportArgs {
    /// The run folder: `results/<run-id>` (or `results/latest`).
    #[arg(long, value_name = "DIR")]
    pub from: PathBuf,
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
pub struct MergeArgs {
    /// Result folders: run folders, or folders holding them (downloaded artifacts).
    #[arg(value_name = "DIR", required = true)]
    pub dirs: Vec<PathBuf>,
    /// The merged run folder (default: a new results/<run-id>).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
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
    /// Instead: the jobs of a mutation campaign split in N shards, `{"include": [{"shard":
    /// "1/N", "name": "mutants-1-of-N"}, ...]}`, each for `mutants --run --shard`.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=256),
          conflicts_with_all = ["kernels", "kernel_versions", "profiles"])]
    pub mutants_shards: Option<u32>,
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
