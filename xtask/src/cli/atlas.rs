//! `atlas`'s flags: the kernels (Debian's default source, `--kernel-version`, `--kernel`), the
//! arches, the scenarios, the VM flags, and the list of explanations.

use std::path::PathBuf;

use clap::Args;

use super::{BudgetArgs, SelectArgs, VmArgs};

#[derive(Debug, Clone, Args)]
pub struct AtlasArgs {
    /// A Debian kernel series besides the default source (7.2, 7.3, ...; `X=DEBIAN_VERSION`
    /// pins an upload), fetched and built as `run --kernel-version X` does (repeatable).
    #[arg(long = "kernel-version", value_name = "X[=DEBIAN_VERSION]", value_parser = crate::kernel::debian::parse_kernel_version)]
    pub kernel_versions: Vec<crate::kernel::debian::KernelVersion>,
    /// A kernel besides Debian's default source: a tarball (`*.tar.*`) or a tree, as `matrix`
    /// takes them (repeatable).
    #[arg(long = "kernel", value_name = "TARBALL|DIR")]
    pub kernels: Vec<String>,
    /// Build the atlas from run folders made before (`[LABEL=]DIR`, repeatable: a `run`'s, or
    /// a `merge` of a fleet's matrix jobs for one kernel), in the kernels' order given, instead
    /// of running the kernels; the label defaults to the run's kernel (`debian-7.3`).
    #[arg(long = "from", value_name = "[LABEL=]DIR", conflicts_with_all = ["kernel_versions", "kernels", "list"])]
    pub from: Vec<String>,
    /// x86_64, arm64, s390x, riscv64, all, or a comma-separated list (x86_64,s390x).
    #[arg(long, default_value = "all")]
    pub arch: String,
    /// Suite files (YAML) to run (repeatable; default: every gating suites/*.yaml).
    #[arg(long = "suite", value_name = "FILE", num_args = 1..)]
    pub suites: Vec<PathBuf>,
    /// Only the scenarios whose `suite/scenario` name matches GLOB (`*`, `?`; repeatable);
    /// `!GLOB` leaves matching ones out.
    #[arg(long = "filter", value_name = "GLOB", allow_hyphen_values = true)]
    pub filters: Vec<String>,
    /// Print each kernel's plan per arch and whether its kernel is cached; build and boot
    /// nothing (a kernel not cached is only configured).
    #[arg(long)]
    pub list: bool,
    /// A profile from kernel-configs/profiles/ for every kernel (repeatable): `--profile
    /// faults` makes the atlas of the allocation-failure suite.
    #[arg(long = "profile", value_name = "NAME")]
    pub profiles: Vec<String>,
    /// The explanations of the differing cells (default: suites/atlas-explained.tsv).
    #[arg(long, value_name = "FILE")]
    pub explained: Option<PathBuf>,
    /// Parallel make jobs for a kernel not cached (default: the number of cores).
    #[arg(long, short = 'j')]
    pub jobs: Option<usize>,
    /// Cache directory for sources, build trees and built kernels.
    #[arg(long, env = "XTASK_CACHE_DIR")]
    pub cache_dir: Option<PathBuf>,
    #[command(flatten)]
    pub vm: VmArgs,
    #[command(flatten)]
    pub budget: BudgetArgs,
}

impl AtlasArgs {
    /// The scenarios chosen, as `run` takes them.
    pub fn select(&self) -> SelectArgs {
        SelectArgs { suites: self.suites.clone(), filters: self.filters.clone(), list: self.list, ..Default::default() }
    }
}
