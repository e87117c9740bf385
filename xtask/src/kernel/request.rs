//! The kernel phase's front door: a `Request` (the kernel flags as `cli::kernel` lowers them:
//! the arches, the source, the patches, the configuration, the knobs) made into a built (or
//! cached, or prebuilt) kernel per arch by `build_all`.

use std::path::PathBuf;

use anyhow::Result;

use crate::arch::Arch;
use crate::kernel::build::{self, Built, Job};
use crate::kernel::debian::{self, KernelVersion};
use crate::kernel::knobs::Knobs;
use crate::kernel::{kconfig, source};
use crate::support::checkout::project_root;
use crate::support::exit::{error, Kind};
use crate::support::timings;

/// Every kernel a command needs, one per arch.
#[derive(Debug, Clone)]
pub struct Request {
    pub arches: Vec<&'static Arch>,
    pub source: Source,
    /// Applied in order on the private mirror.
    pub patches: Vec<PathBuf>,
    /// The profiles from kernel-configs/profiles/ (with `coverage` on a coverage kernel).
    pub profiles: Vec<String>,
    /// Kconfig fragment files merged after the profiles.
    pub fragments: Vec<PathBuf>,
    /// `CONFIG_X=value` lines merged last.
    pub kconfig: Vec<String>,
    /// The sources built with GCOV (names checked); empty for a normal kernel.
    pub gcov_files: Vec<String>,
    /// As asked; resolved against the arches' tools when the kernels are built.
    pub knobs: Knobs,
    pub jobs: usize,
    pub cache_dir: PathBuf,
    /// Stop after configuring and checking the options.
    pub config_only: bool,
}

/// Where a request's kernels come from.
#[derive(Debug, Clone)]
pub enum Source {
    /// A source built here.
    Build(source::Spec),
    /// A Debian `linux-source-X` package, fetched into the cache before it is built.
    DebianVersion(KernelVersion),
    /// A kernel image the user built (one arch), with its `.config` if named.
    Image { image: PathBuf, config: Option<PathBuf> },
}

/// Builds or fetches the kernel for each requested arch.
pub fn build_all(req: &Request) -> Result<Vec<Built>> {
    check(req)?;
    let configs = project_root().join("kernel-configs");
    let fragments_for =
        |arch: &Arch| kconfig::fragments_for(&configs, arch.fragment, &req.profiles, &req.fragments, &req.kconfig);
    let spec = match &req.source {
        Source::Image { image, config } => {
            let arch = req.arches[0];
            return Ok(vec![build::prebuilt(arch, image, config.as_deref(), &fragments_for(arch)?, None)?]);
        }
        Source::Build(spec) => spec.clone(),
        Source::DebianVersion(v) => source::Spec::DebianVersion(debian::fetch(v, &req.cache_dir)?),
    };
    let knobs = req.knobs.clone().with_profiles(&configs, &req.profiles)?.resolve(&req.arches)?;
    let identity = source::identify(&spec, &req.cache_dir)?;
    let patches = req.patches.iter().map(|p| source::Patch::read(p)).collect::<Result<Vec<_>>>()?;
    let started = std::time::Instant::now();
    let mut out = Vec::new();
    for &arch in &req.arches {
        let fragments = fragments_for(arch)?;
        let job = Job {
            arch,
            spec: &spec,
            source: &identity,
            patches: &patches,
            fragments: &fragments,
            jobs: req.jobs,
            cache_dir: &req.cache_dir,
            config_only: req.config_only,
            gcov_files: &req.gcov_files,
            knobs: &knobs,
        };
        out.push(build::build(&job)?);
    }
    timings::record(None, "kernels", started.elapsed());
    Ok(out)
}

/// A request's consistency, before anything is fetched or built: the GCOV sources' names, and
/// one arch for a prebuilt image, which cannot be a coverage kernel.
fn check(req: &Request) -> Result<()> {
    for f in &req.gcov_files {
        crate::kernel::gcov::check_name(f)?;
    }
    if let Source::Image { .. } = req.source {
        if req.arches.len() != 1 {
            return Err(error(
                Kind::BadInput,
                "--kernel-image needs a single --arch (x86_64, arm64, s390x or riscv64)",
            ));
        }
        if !req.gcov_files.is_empty() {
            return Err(error(
                Kind::BadInput,
                "--coverage needs a kernel built here (its .gcno notes): it cannot take --kernel-image",
            ));
        }
    }
    Ok(())
}
