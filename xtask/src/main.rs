//! `cargo xtask` (and the installed `ue-conformance`, `src/bin/`): the host orchestrator of the
//! user_events conformance suite. This file only parses the command line and dispatches to the
//! verb's `run` (one module per verb in `verbs/`).

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches};

use xtask::cli::{Cmd, Xtask};
use xtask::support::exit::{self, Kind};

/// A reader that stops reading (`cargo xtask run --list | head -1`) closes our stdout, and
/// `println!` panics on the broken pipe. That is no failure of ours: end as `head` expects, the
/// children killed and exit 0, without a panic message (ripgrep does the same). Any other panic
/// keeps the default report.
fn end_quietly_when_stdout_closes() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or_default();
        if message.starts_with("failed printing to stdout") && message.contains("Broken pipe") {
            xtask::vm::children::abandon_children();
            std::process::exit(0);
        }
        default(info);
    }));
}

/// The name the usage shows: `cargo xtask` for the `xtask` binary, else the binary's own.
fn program_name() -> String {
    let bin = std::env::args_os().next().map(std::path::PathBuf::from);
    let name = bin.as_deref().and_then(|p| p.file_name()).map(|n| n.to_string_lossy().into_owned());
    match name.as_deref() {
        None | Some("xtask") => "cargo xtask".to_string(),
        Some(other) => other.to_string(),
    }
}

/// Inside a kernel git tree, with no source flag, the tree is the source (`--kernel-src .`).
fn default_source_here(command: &mut Cmd) {
    let Some(kernel) = command.kernel_mut() else { return };
    if !kernel.source.is_default() {
        return;
    }
    let Ok(here) = std::env::current_dir() else { return };
    if xtask::kernel::git::kernel_tree(&here) {
        xtask::support::progress::line(format!("source: the kernel tree here, {} (as --kernel-src .)", here.display()));
        kernel.source.kernel_src = Some(here);
    }
}

pub fn main() -> ExitCode {
    xtask::support::timings::start();
    xtask::vm::children::install_signal_handler();
    end_quietly_when_stdout_closes();
    // clap takes a `&'static str` name; one small string for the process's life.
    let name: &'static str = Box::leak(program_name().into_boxed_str());
    let parsed = Xtask::command().name(name).bin_name(name).try_get_matches().and_then(|m| Xtask::from_arg_matches(&m));
    let mut args = match parsed {
        Ok(a) => a,
        Err(e) => {
            let code = if e.use_stderr() { Kind::BadInput.code() } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    if let Err(e) = xtask::support::checkout::check_root() {
        eprintln!("error: {e}");
        return ExitCode::from(Kind::Infra.code());
    }
    xtask::setup::provision::skip(args.no_setup);
    xtask::history::select(args.history.clone(), args.command.cache_dir().as_deref());
    default_source_here(&mut args.command);
    if let Some(limit) = args.command.timeout() {
        xtask::vm::children::start_deadline(limit);
    }
    let result = match args.command {
        Cmd::Setup(v) => v.run(),
        Cmd::Kernel(v) => v.run(),
        Cmd::Run(v) => v.run(),
        Cmd::Upstream(v) => v.run(),
        Cmd::Boot(v) => v.run(),
        Cmd::CheckSuites(v) => v.run(),
        Cmd::Exec(v) => v.run(),
        Cmd::Shell(v) => v.run(),
        Cmd::Coverage(v) => v.run(),
        Cmd::Report(v) => v.run(),
        Cmd::Replay(v) => v.run(),
        Cmd::Compare(v) => v.run(),
        Cmd::Validate(v) => v.run(),
        Cmd::Bisect(v) => v.run(),
        Cmd::Matrix(v) => v.run(),
        Cmd::Atlas(v) => v.run(),
        Cmd::Merge(v) => v.run(),
        Cmd::History(v) => v.run(),
        Cmd::Bench(v) => v.run(),
        Cmd::Mutants(v) => v.run(),
        Cmd::Test(v) => v.run(),
    };
    let timed_out = xtask::vm::children::timed_out();
    match result {
        Ok(code) if timed_out => ExitCode::from(code.max(Kind::TimedOut.code())),
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("error: {e:#}");
            let code = if timed_out { Kind::TimedOut.code() } else { exit::code_for(&e) };
            ExitCode::from(code)
        }
    }
}
