//! ue-agent, the guest side of the conformance suite: as /init (PID 1) it mounts the file
//! systems, runs the plan's scenarios under a supervisor that reports KTAP on a virtio port,
//! optionally opens a shell, and reboots; `--scenario N` is the child that runs one scenario.

mod runtime;
mod steps;

use std::fs::OpenOptions;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use runtime::{mounts, shell, stuck, supervisor, sys};

use supervisor::Paths;
use sys::console;

const USAGE: &str = "\
usage: ue-agent [--plan PATH] [--results PATH|-]   run a plan (as /init, or on a host for testing)
       ue-agent --scenario INDEX [--plan PATH]      run one scenario's steps (the supervisor's child)
       ue-agent --steps JSON                        run steps given as JSON (an exec_agent step)";

/// How long PID 1 waits for the host to name the result port.
const PORT_WAIT: Duration = Duration::from_secs(5);

#[derive(Debug, PartialEq)]
enum Mode {
    Agent {
        plan: PathBuf,
        results: Option<PathBuf>,
    },
    Scenario {
        plan: PathBuf,
        index: usize,
    },
    /// Steps as JSON, and the descriptors an `exec_agent` kept, by name.
    Steps {
        json: String,
        kept: Vec<(String, i32)>,
    },
}

fn parse_args(args: &[String]) -> Result<Mode, String> {
    let mut plan = PathBuf::from(protocol::PLAN_PATH);
    let mut results = None;
    let mut scenario = None;
    if args.first().map(String::as_str) == Some(steps::STEPS_ARG) {
        let [_, json, rest @ ..] = args else {
            return Err(format!("{} takes one JSON argument, then `{} NAME=NUMBER`s", steps::STEPS_ARG, steps::FD_ARG));
        };
        let kept = rest.chunks(2).map(kept_fd).collect::<Result<_, _>>()?;
        return Ok(Mode::Steps { json: json.clone(), kept });
    }
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--plan" => plan = PathBuf::from(value()?),
            "--results" => results = Some(PathBuf::from(value()?)),
            "--scenario" => {
                let v = value()?;
                scenario = Some(v.parse::<usize>().map_err(|_| format!("--scenario {v}: not an index"))?);
            }
            other => return Err(format!("unknown argument {other}")),
        }
    }
    match (scenario, results) {
        (Some(index), None) => Ok(Mode::Scenario { plan, index }),
        (Some(_), Some(_)) => Err("--scenario and --results do not go together".into()),
        (None, results) => Ok(Mode::Agent { plan, results }),
    }
}

/// One `--fd NAME=NUMBER` pair of the arguments after `--steps JSON`.
fn kept_fd(pair: &[String]) -> Result<(String, i32), String> {
    let [flag, value] = pair else { return Err(format!("{} needs NAME=NUMBER", steps::FD_ARG)) };
    let kept = value.split_once('=').and_then(|(name, n)| Some((name.to_string(), n.parse().ok()?)));
    match kept {
        Some(kept) if flag == steps::FD_ARG => Ok(kept),
        _ => Err(format!("{flag} {value}: not `{} NAME=NUMBER`", steps::FD_ARG)),
    }
}

fn main() {
    if std::process::id() == 1 {
        init();
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    let code = match parse_args(&args) {
        Ok(Mode::Scenario { plan, index }) => steps::child_main(&plan, index),
        Ok(Mode::Steps { json, kept }) => match serde_json::from_str::<Vec<protocol::Step>>(&json) {
            Ok(list) => steps::run_nested_main(&list, &kept),
            Err(e) => {
                println!("exec agent: bad steps: {e}");
                1
            }
        },
        Ok(Mode::Agent { plan, results }) => host_agent(plan, results),
        Err(e) => {
            console(&format!("ue-agent: {e}\n{USAGE}"));
            2
        }
    };
    std::process::exit(code);
}

/// PID 1: whatever happens, end with a reboot, since init returning panics the kernel.
fn init() -> ! {
    // The kernel starts init without PATH; Exec steps and `run` may name programs bare.
    if std::env::var_os("PATH").is_none() {
        std::env::set_var("PATH", "/bin:/sbin:/usr/bin:/usr/sbin");
    }
    if std::panic::catch_unwind(guest).is_err() {
        console("ue-agent: panicked; rebooting");
    }
    sys::reboot()
}

fn guest() {
    mounts::mount_base();
    let Some(port) = supervisor::find_result_port(Path::new("/sys/class/virtio-ports"), Path::new("/dev"), PORT_WAIT)
    else {
        console(&format!("ue-agent: no virtio console port named {}; rebooting", protocol::RESULT_PORT));
        return;
    };
    let mut out = match OpenOptions::new().write(true).open(&port) {
        Ok(f) => f,
        Err(e) => {
            console(&format!("ue-agent: cannot open {}: {}; rebooting", port.display(), sys::error_name(&e)));
            return;
        }
    };
    let paths = Paths::guest();
    let plan = match supervisor::load_plan(&paths.plan) {
        Ok(plan) => plan,
        Err(e) => {
            console(&format!("ue-agent: {e}"));
            supervisor::report_bad_plan(&e, &mut out);
            return;
        }
    };
    mounts::mount_plan(&plan);
    console(&format!(
        "ue-agent: plan {}: {} scenarios, results on {}",
        plan.label,
        plan.scenarios.len(),
        port.display()
    ));
    // The guard writes on its own handle of the port, so a supervisor blocked in the kernel
    // cannot keep it from reporting.
    let guard = out.try_clone().ok().map(stuck::Guard::start);
    let c = supervisor::run_plan(&plan, &paths, &mut out, guard.as_ref());
    console(&format!(
        "ue-agent: done: {} passed, {} failed, {} skipped, {} timed out",
        c.passed, c.failed, c.skipped, c.timeout
    ));
    if plan.shell {
        shell::run(&mut io::stdin().lock(), &mut io::stdout(), true);
    }
}

/// Not PID 1 (a host, for testing): no mounts, no reboot; results on a file, stdout (`-`) or
/// the result port. Exits 0 when nothing failed, 1 when something did, 2 for a bad plan.
fn host_agent(plan_path: PathBuf, results: Option<PathBuf>) -> i32 {
    let mut out: Box<dyn Write> = match results {
        Some(p) if p.as_os_str() == "-" => Box::new(io::stdout()),
        Some(p) => match OpenOptions::new().write(true).create(true).truncate(true).open(&p) {
            Ok(f) => Box::new(f),
            Err(e) => {
                console(&format!("ue-agent: cannot open {}: {}", p.display(), sys::error_name(&e)));
                return 2;
            }
        },
        None => {
            let ports = Path::new("/sys/class/virtio-ports");
            match supervisor::find_result_port(ports, Path::new("/dev"), Duration::ZERO) {
                Some(port) => match OpenOptions::new().write(true).open(&port) {
                    Ok(f) => Box::new(f),
                    Err(e) => {
                        console(&format!("ue-agent: cannot open {}: {}", port.display(), sys::error_name(&e)));
                        return 2;
                    }
                },
                None => {
                    console(&format!("ue-agent: no virtio port {}; use --results", protocol::RESULT_PORT));
                    return 2;
                }
            }
        }
    };
    let paths = Paths::host(plan_path);
    let plan = match supervisor::load_plan(&paths.plan) {
        Ok(plan) => plan,
        Err(e) => {
            console(&format!("ue-agent: {e}"));
            supervisor::report_bad_plan(&e, &mut out);
            return 2;
        }
    };
    let c = supervisor::run_plan(&plan, &paths, &mut out, None);
    if plan.shell {
        shell::run(&mut io::stdin().lock(), &mut io::stdout(), false);
    }
    i32::from(c.failed + c.timeout > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Mode, String> {
        parse_args(&args.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn arguments() {
        let default_plan = PathBuf::from(protocol::PLAN_PATH);
        assert_eq!(parse(&[]), Ok(Mode::Agent { plan: default_plan.clone(), results: None }));
        assert_eq!(parse(&["--scenario", "3"]), Ok(Mode::Scenario { plan: default_plan, index: 3 }));
        assert_eq!(
            parse(&["--scenario", "1", "--plan", "/p.json"]),
            Ok(Mode::Scenario { plan: "/p.json".into(), index: 1 })
        );
        assert_eq!(
            parse(&["--plan", "p", "--results", "-"]),
            Ok(Mode::Agent { plan: "p".into(), results: Some("-".into()) })
        );
        assert!(parse(&["--scenario", "x"]).is_err());
        assert!(parse(&["--plan"]).is_err());
        assert!(parse(&["single"]).is_err());
    }
}
