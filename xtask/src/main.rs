//! `cargo xtask`: the host orchestrator of the user_events conformance suite. This file only
//! parses the command line and dispatches to the verb's `run` (one module per verb in `verbs/`).

use std::process::ExitCode;

use clap::Parser;

use xtask::flags::{Cmd, Xtask};
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
            xtask::vm::qemu::abandon_children();
            std::process::exit(0);
        }
        default(info);
    }));
}

fn main() -> ExitCode {
    xtask::support::timings::start();
    xtask::vm::qemu::install_signal_handler();
    end_quietly_when_stdout_closes();
    let args = match Xtask::try_parse() {
        Ok(a) => a,
        Err(e) => {
            let code = if e.use_stderr() { Kind::BadInput.code() } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    xtask::setup::provision::skip(args.no_setup);
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
        Cmd::Merge(v) => v.run(),
        Cmd::Bench(v) => v.run(),
        Cmd::Mutants(v) => v.run(),
        Cmd::Test(v) => v.run(),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(exit::code_for(&e))
        }
    }
}
