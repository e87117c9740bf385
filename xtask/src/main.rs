//! `cargo xtask`: the host orchestrator of the user_events conformance suite. One module per
//! phase; this file only parses the command line and dispatches.

mod arch;
mod cache;
mod exit;
mod flags;
mod kconfig;
mod kernel;
mod progress;
mod setup;
mod source;
mod test;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Result;
use clap::Parser;

use crate::exit::{error, Kind};
use crate::flags::{Cmd, KernelArgs, Xtask};

fn main() -> ExitCode {
    let args = match Xtask::try_parse() {
        Ok(a) => a,
        Err(e) => {
            let code = if e.use_stderr() {
                Kind::BadInput.code()
            } else {
                0
            };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    match dispatch(args.command) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(exit::code_for(&e))
        }
    }
}

fn dispatch(cmd: Cmd) -> Result<u8> {
    match cmd {
        Cmd::Setup { check: true } => {
            let missing = setup::check()?;
            println!("{missing:#?}");
            Ok(0)
        }
        Cmd::Setup { check: false } => setup::run(true).map(|()| 0),
        Cmd::Kernel(args) => {
            setup::run(false)?;
            let built = kernels(&args)?;
            for b in &built {
                if args.json {
                    println!("{}", serde_json::to_string(&b.metadata)?);
                } else if args.config_only {
                    println!("{} {}", b.arch.name, b.config.display());
                } else {
                    println!("{} {}", b.arch.name, b.image.display());
                }
            }
            Ok(0)
        }
        Cmd::Run(args) => {
            setup::run(false)?;
            let built = kernels(&args)?;
            for b in &built {
                progress::line(format!(
                    "{}: kernel {} at {}",
                    b.arch.name,
                    b.metadata.kernelrelease,
                    b.image.display()
                ));
            }
            progress::line(
                "the kernels are built; booting them and running the suites is not implemented yet \
                 (the boot phase is the next issue), so nothing was tested",
            );
            Ok(0)
        }
        Cmd::Test(args) => test::run(&args),
    }
}

/// The checkout this xtask was built from.
pub fn project_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives in the workspace")
        .to_path_buf()
}

/// Builds or fetches the kernel for each requested arch.
pub fn kernels(args: &KernelArgs) -> Result<Vec<kernel::Built>> {
    let arches =
        arch::select(&args.arch).map_err(|e| error(Kind::BadInput, format!("--arch: {e}")))?;
    let cache_dir = cache::root(args.cache_dir.as_deref());
    let configs = project_root().join("kernel-configs");
    let src = &args.source;
    let mut out = Vec::new();

    if let Some(image) = &src.kernel_image {
        if arches.len() != 1 {
            return Err(error(
                Kind::BadInput,
                "--kernel-image needs a single --arch (x86_64 or arm64)",
            ));
        }
        let arch = arches[0];
        let fragments = kconfig::fragments_for(
            &configs,
            arch.fragment,
            &args.config.profiles,
            &args.config.fragments,
            &args.config.kconfig,
        )?;
        out.push(kernel::prebuilt(
            arch,
            image,
            src.kernel_config.as_deref(),
            &fragments,
            None,
        )?);
        return Ok(out);
    }

    let spec = match (&src.kernel_src, &src.kernel_tarball) {
        (Some(dir), _) => source::Spec::Tree(dir.clone()),
        (_, Some(t)) => source::Spec::Tarball(t.clone()),
        _ => source::Spec::Debian,
    };
    let identity = source::identify(&spec, &cache_dir)?;
    let patches = src
        .patches
        .iter()
        .map(|p| source::Patch::read(p))
        .collect::<Result<Vec<_>>>()?;
    let jobs = args
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    for arch in arches {
        let fragments = kconfig::fragments_for(
            &configs,
            arch.fragment,
            &args.config.profiles,
            &args.config.fragments,
            &args.config.kconfig,
        )?;
        let req = kernel::Request {
            arch,
            spec: &spec,
            source: &identity,
            patches: &patches,
            fragments: &fragments,
            jobs,
            cache_dir: &cache_dir,
            config_only: args.config_only,
        };
        out.push(kernel::build(&req)?);
    }
    Ok(out)
}
