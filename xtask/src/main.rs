//! `cargo xtask`: the host orchestrator of the user_events conformance suite. One module per
//! phase; this file only parses the command line and dispatches.

mod arch;
mod bench;
mod bisect;
mod boot;
mod cache;
mod checkout;
mod ci;
mod cmd;
mod console;
mod coverage;
mod debian;
mod exit;
mod files;
mod flags;
mod git;
mod hang;
mod initramfs;
mod kconfig;
mod kernel;
mod ktap;
mod pipeline;
mod progress;
mod qemu;
mod replay;
mod results;
mod run_folder;
mod select;
mod setup;
mod source;
mod suites;
mod test;
mod test_as_user;
mod test_debug;
mod timings;
mod upstream;
mod validate;
mod verdict;

use std::process::ExitCode;

use anyhow::Result;
use clap::Parser;

use crate::checkout::project_root;
use crate::exit::Kind;
use crate::flags::{Cmd, KernelArgs, Xtask};
use crate::pipeline::kernels;

fn main() -> ExitCode {
    timings::start();
    qemu::install_signal_handler();
    let args = match Xtask::try_parse() {
        Ok(a) => a,
        Err(e) => {
            let code = if e.use_stderr() { Kind::BadInput.code() } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    setup::skip(args.no_setup);
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
        Cmd::Setup { check, arch } => setup::verb(check, &arch),
        Cmd::Kernel(args) => {
            setup::ensure(&setup::Needs::kernel(&args))?;
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
        Cmd::Run(mut args) => {
            let chosen = pipeline::choose(&args.select, &args.vm.results_root())?;
            args.kernel = pipeline::rerun_arches(&chosen, args.kernel);
            setup::ensure(&setup::Needs::run(&args, &setup::clients_of_chosen(&chosen)))?;
            let opts = args.vm.options(args.kernel.cache_dir.as_deref())?;
            let built = kernels(&KernelArgs { config_only: args.select.list, ..args.kernel.clone() })?;
            if args.select.list {
                return pipeline::list_plans(&chosen, &built);
            }
            let judged = pipeline::run(&chosen, &built, &opts)?;
            let code = boot::exit_code(&judged);
            pipeline::publish(&judged, &built)?;
            // Into the suites' run folder (`<run-id>/<arch>` is each boot's out_dir); never gating.
            let run_dir = judged.first().and_then(|j| j.outcome.out_dir.parent());
            match run_dir {
                Some(dir) if args.upstream_selftests => {
                    let upstream = upstream::run(&built, &opts, dir)?;
                    Ok(if code != 0 { code } else { upstream })
                }
                _ => Ok(code),
            }
        }
        Cmd::Upstream(args) => {
            setup::ensure(&setup::Needs::upstream(&args))?;
            let opts = args.vm.options(args.kernel.cache_dir.as_deref())?;
            let built = kernels(&args.kernel)?;
            let run_dir = run_folder::new_run_dir(&opts.results)?;
            upstream::run(&built, &opts, &run_dir)
        }
        Cmd::CheckSuites(args) => {
            let files = if args.files.is_empty() { pipeline::suite_files()? } else { args.files };
            Ok(pipeline::check_suites(&files))
        }
        Cmd::Test(args) => test::run(&args),
        Cmd::Coverage { results } => {
            let suites = pipeline::load_suites(&pipeline::suite_files()?)?;
            coverage::verb(&suites, &results.unwrap_or_else(|| project_root().join("results")))
        }
        Cmd::Boot(args)
            if !args.select.suites.is_empty()
                || !args.select.filters.is_empty()
                || args.select.rerun_failed.is_some() =>
        {
            let chosen = pipeline::choose(&args.select, &args.vm.results_root())?;
            let kernel = pipeline::rerun_arches(&chosen, args.kernel.clone());
            let clients = setup::clients_of_chosen(&chosen);
            setup::ensure(&setup::Needs::boot(&kernel, &args.vm, args.select.list, &clients))?;
            let opts = args.vm.options(kernel.cache_dir.as_deref())?;
            let built = kernels(&KernelArgs { config_only: args.select.list, ..kernel })?;
            if args.select.list {
                return pipeline::list_plans(&chosen, &built);
            }
            pipeline::run_and_publish(&chosen, &built, &opts)
        }
        Cmd::Boot(args) => {
            let plan = match &args.plan {
                Some(path) => pipeline::read_plan(path)?,
                None => protocol::Plan::empty("boot"),
            };
            setup::ensure(&setup::Needs::boot(&args.kernel, &args.vm, false, &setup::clients_of_plan(&plan)))?;
            let opts = args.vm.options(args.kernel.cache_dir.as_deref())?;
            let built = kernels(&args.kernel)?;
            let results = boot::run_plan_on(&built, &plan, &[], &opts)?;
            pipeline::publish(&results, &built)?;
            Ok(boot::exit_code(&results))
        }
        Cmd::Exec(args) => {
            let kernel = args.kernel.single_arch("exec")?;
            setup::ensure(&setup::Needs::boot(&kernel, &args.vm, false, &[]))?;
            let opts = args.vm.options(args.kernel.cache_dir.as_deref())?;
            let built = kernels(&kernel)?;
            boot::exec(&built[0], &args.command, args.timeout, &opts)
        }
        Cmd::Report(args) => {
            let run = results::collect::load(&args.from, jiff::Timestamp::now())?;
            Ok(results::publish(&args.from, run, None)?.verdict.exit_code())
        }
        Cmd::Replay(args) => {
            let results = args.results.unwrap_or_else(|| project_root().join("results"));
            replay::replay(&args.run, args.arch.as_deref(), args.boot.as_deref(), &results)
        }
        Cmd::Compare(args) => {
            let r = &args.report;
            results::compare::run(&args.base, &args.current, r.out.as_deref(), r.fail_on_metrics, r.verbose)
        }
        Cmd::Validate(args) => validate::run(&args),
        Cmd::Bisect(args) => bisect::run(&args),
        Cmd::Matrix(args) => {
            let versions = &args.kernel_versions;
            println!("{}", ci::matrix(&args.kernels, versions, &args.arch, &args.profiles, &project_root())?);
            Ok(0)
        }
        Cmd::Merge(args) => {
            let out = match args.out {
                Some(out) => out,
                None => run_folder::new_run_dir(&project_root().join("results"))?,
            };
            Ok(results::merge::merge(&args.dirs, &out)?.verdict.exit_code())
        }
        Cmd::Bench(args) if args.what == "suites" => {
            let files: Vec<_> = pipeline::suite_files()?
                .into_iter()
                .filter(|f| f.file_stem().is_some_and(|s| pipeline::MEASURING_SUITES.iter().any(|m| s == *m)))
                .collect();
            let select = flags::SelectArgs { suites: files, filters: args.filters.clone(), ..Default::default() };
            let chosen = pipeline::choose(&select, &args.vm.results_root())?;
            let clients = setup::clients_of_chosen(&chosen);
            setup::ensure(&setup::Needs::boot(&args.kernel, &args.vm, false, &clients))?;
            let opts = args.vm.options(args.kernel.cache_dir.as_deref())?;
            let built = kernels(&args.kernel)?;
            let judged = pipeline::run(&chosen, &built, &opts)?;
            if let Some(run) = pipeline::publish(&judged, &built)? {
                bench::print_figures(&run);
            }
            Ok(boot::exit_code(&judged))
        }
        Cmd::Bench(args) => {
            setup::ensure(&setup::Needs::bench(&args))?;
            let built = kernels(&args.kernel)?;
            bench::boot(&built, args.runs.max(1), args.vm.accel)?;
            Ok(0)
        }
        Cmd::Shell(args) => {
            let kernel = args.kernel.single_arch("shell")?;
            setup::ensure(&setup::Needs::boot(&kernel, &args.vm, false, &setup::all_clients()))?;
            let opts = args.vm.options(args.kernel.cache_dir.as_deref())?;
            let built = kernels(&kernel)?;
            boot::shell(&built[0], &opts)
        }
    }
}
