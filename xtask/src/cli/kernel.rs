//! The kernel flags: `--arch`, the source (`--kernel-src`, `--kernel-tarball`,
//! `--kernel-version`, `--kernel-image`, `--patch`), the configuration (`--profile`,
//! `--fragment`, `--kconfig`, `--coverage`) and the build knobs (`--llvm`, `--cc`, ...); and the
//! one place they are lowered into the kernel phase's `kernel::Request` (`KernelArgs::request`).

use std::path::PathBuf;

use clap::Args;

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

impl KernelArgs {
    /// The kernel flags lowered into what the kernel phase builds (`kernel::build_all`): the
    /// arches, the source, the patches, the configuration, the knobs, the cache.
    pub fn request(&self) -> anyhow::Result<crate::kernel::Request> {
        use crate::kernel::request::Source;
        use crate::kernel::source::Spec;
        use crate::support::exit::{error, Kind};
        let arches = crate::arch::select(&self.arch).map_err(|e| error(Kind::BadInput, format!("--arch: {e}")))?;
        let src = &self.source;
        let source = match (&src.kernel_image, &src.git_commit) {
            (Some(image), _) => Source::Image { image: image.clone(), config: src.kernel_config.clone() },
            (None, Some((repo, commit))) => {
                Source::Build(Spec::GitCommit { repo: repo.clone(), commit: commit.clone() })
            }
            (None, None) => match (&src.kernel_src, &src.kernel_tarball, &src.kernel_version) {
                (Some(dir), _, _) => Source::Build(Spec::Tree(dir.clone())),
                (_, Some(t), _) => Source::Build(Spec::Tarball(t.clone())),
                (_, _, Some(v)) => Source::DebianVersion(v.clone()),
                _ => Source::Build(Spec::Debian),
            },
        };
        Ok(crate::kernel::Request {
            arches,
            source,
            patches: src.patches.clone(),
            profiles: self.config.profiles(),
            fragments: self.config.fragments.clone(),
            kconfig: self.config.kconfig.clone(),
            gcov_files: self.config.gcov_files(),
            // A prebuilt image is not built: its knobs are not read.
            knobs: if src.kernel_image.is_some() { Default::default() } else { self.knobs.knobs()? },
            jobs: self.jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())),
            cache_dir: crate::kernel::cache::root(self.cache_dir.as_deref()),
            config_only: self.config_only,
        })
    }
}
