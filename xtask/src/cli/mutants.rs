//! `cargo xtask mutants`'s flags: which mutants, their coverage maps, the runs and reports.

use std::path::PathBuf;

use clap::Args;

use super::parse_duration;

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
    /// Fold shard folders into <out>/state.jsonl (repeatable): each the --out of a `--run
    /// --shard K/N` job (its campaign.json says which file text, selection and shards it
    /// holds), or a folder holding them (downloaded artifacts). Refused, naming the folder and
    /// the mutant or shard, when one is of another file text or selection, a shard is missing
    /// or a mutant has two results. Then --report renders the merged state.
    #[arg(long = "merge", value_name = "DIR", conflicts_with_all = ["run", "tce", "check_equivalents", "shard"])]
    pub merges: Vec<PathBuf>,
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
    /// Up to N mutants of the schemata kernel in one boot, each under its number in turn with
    /// the suites' hygiene between them; an outcome the batch cannot vouch for (a scenario
    /// never reached, a survival beside a kernel report between scenarios) runs again alone,
    /// as do mutants on several arches, or on a line the boot runs. 1: a boot each.
    #[arg(long, value_name = "N", default_value_t = 24, value_parser = clap::value_parser!(u32).range(1..=1000), requires = "run")]
    pub batch: u32,
    /// Mutate Debian's `linux-source-X` (as `run --kernel-version X`: `7.3`) instead of the
    /// default source: its file, its schemata kernel and every mutant's run.
    #[arg(long, value_name = "X", value_parser = crate::kernel::debian::parse_kernel_version, conflicts_with_all = ["file", "tce"])]
    pub kernel_version: Option<crate::kernel::debian::KernelVersion>,
    /// Cache directory for sources, build trees and built kernels.
    #[arg(long, env = "XTASK_CACHE_DIR")]
    pub cache_dir: Option<PathBuf>,
}
