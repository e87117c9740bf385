//! The supervisor: runs each scenario of the plan in a child process group under its deadline
//! and reports it on the result channel as KTAP lines (`protocol::ResultLine`).

use std::ffi::OsString;
use std::fs;
use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::thread;
use std::time::{Duration, Instant};

use protocol::{Marker, Outcome, Plan, ResultLine, Scenario};

use crate::runtime::hygiene::{self, Baseline, HygieneRoots};
use crate::runtime::stuck::{self, Guard, KILL_GRACE};
use crate::runtime::sys;
use between::{died, enter_group, say_costs, send_gcov, skip_the_rest, switch, tidy, HygieneCost};
use stream::{clean, diag};
pub use stream::{emit, read_taint, Counts};

/// How often the supervisor checks whether a scenario has exited.
const POLL: Duration = Duration::from_millis(10);
/// How long to wait for a scenario's last output after its group was killed; longer only if a
/// process escaped the group and still holds the pipe.
const DRAIN: Duration = Duration::from_millis(500);

/// Where the supervisor finds things; the guest uses [`Paths::guest`], tests point elsewhere.
#[derive(Debug, Clone)]
pub struct Paths {
    pub plan: PathBuf,
    /// `/proc/sys/kernel/tainted`.
    pub tainted: PathBuf,
    /// `/dev/kmsg`, where begin/end markers go so console messages can be attributed.
    pub kmsg: Option<PathBuf>,
    /// The program (and leading arguments) of a scenario child; the supervisor appends
    /// `--scenario INDEX --plan PLAN`.
    pub scenario_cmd: Vec<OsString>,
    /// Where the supervisor writes a plan of the one scenario a child runs, which the child is
    /// then given (`--scenario 1`): parsing the whole plan in every child cost 15-40 ms a
    /// scenario under TCG. `None`: the child gets the whole plan and the scenario's index.
    pub scenario_file: Option<PathBuf>,
    /// Reap every exited process between scenarios: only as PID 1, where orphans land.
    pub reap_orphans: bool,
    /// Where between-scenario hygiene looks (`hygiene.rs`); None leaves the system alone (a
    /// host must never have its own tracefs cleaned up; `ue.hygiene=off` on the guest's kernel
    /// command line).
    pub hygiene: Option<HygieneRoots>,
}

impl Paths {
    pub fn guest() -> Paths {
        Paths {
            plan: PathBuf::from(protocol::PLAN_PATH),
            tainted: PathBuf::from("/proc/sys/kernel/tainted"),
            kmsg: Some(PathBuf::from("/dev/kmsg")),
            scenario_cmd: vec!["/proc/self/exe".into()],
            scenario_file: Some(PathBuf::from("/tmp/ue-scenario.json")),
            reap_orphans: true,
            hygiene: hygiene::wanted(&fs::read_to_string("/proc/cmdline").unwrap_or_default())
                .then(HygieneRoots::guest),
        }
    }

    /// Running on a host for testing: no kmsg markers, no reaping of other threads' children.
    pub fn host(plan: PathBuf) -> Paths {
        Paths { plan, kmsg: None, scenario_file: None, reap_orphans: false, hygiene: None, ..Paths::guest() }
    }
}

/// Reads and checks the plan; the error is a one-line message naming the file.
pub fn load_plan(path: &Path) -> Result<Plan, String> {
    let text = fs::read(path).map_err(|e| format!("cannot read plan {}: {}", path.display(), sys::error_name(&e)))?;
    let plan: Plan = serde_json::from_slice(&text).map_err(|e| format!("cannot parse plan {}: {e}", path.display()))?;
    if plan.version != protocol::PROTOCOL_VERSION {
        return Err(format!(
            "plan {} has protocol version {}, this agent speaks {}",
            path.display(),
            plan.version,
            protocol::PROTOCOL_VERSION
        ));
    }
    Ok(plan)
}

/// The whole stream for a plan that could not be loaded: it ends cleanly with nothing run.
pub fn report_bad_plan(message: &str, out: &mut dyn Write) {
    emit(out, &ResultLine::Header);
    emit(out, &diag(message));
    emit(out, &ResultLine::Sentinel { total: 0, passed: 0, failed: 0, skipped: 0, timeout: 0 });
}

/// How long past its deadline a scenario (its kill, the evidence of a stuck process and its
/// cleanup) may take before the guard declares the supervisor blocked.
pub const GUARD_SLACK: Duration = Duration::from_secs(15);

/// Runs every scenario and writes the whole stream, header to sentinel. A scenario that leaves
/// a process stuck in the kernel ends the plan early: its result, then `ue-abort` in place of
/// the sentinel, so the host runs the rest in a fresh boot. `guard` (the guest's) ends the plan
/// the same way when the supervisor itself blocks.
pub fn run_plan(plan: &Plan, paths: &Paths, out: &mut dyn Write, guard: Option<&Guard>) -> Counts {
    emit(out, &ResultLine::Header);
    emit(out, &ResultLine::Plan { count: plan.scenarios.len() });
    let mut counts = Counts::default();
    // A coverage kernel's counters, zeroed before each scenario and sent after it, before the
    // hygiene (whose own deletes must not count as the scenario's).
    let gcov = plan.gcov.as_ref().map(crate::runtime::gcov::Collector::new);
    let mut gcov_wait = HygieneCost::default();
    // What the kernel's boot ran, before the agent's own reads (the baseline below reads the
    // status file and the sysctl) and before the first reset zeroes it.
    if let Some(g) = &gcov {
        g.collect(protocol::gcov::BOOT_INDEX, out, emit);
    }
    // The boot state each scenario must leave as it found it, and what restoring it cost.
    let baseline = paths.hygiene.as_ref().map(Baseline::take);
    let mut hygiene = HygieneCost::default();
    // Grouped plans: the value the switch holds (0 as booted), and the group a failure stopped.
    let (mut switched, mut stopped) = (0u32, None::<(u32, String)>);
    for (i, scenario) in plan.scenarios.iter().enumerate() {
        let index = i + 1;
        let name = scenario.name.clone();
        let group = plan.group_of(i);
        match enter_group(plan, i, (&mut switched, &stopped), &paths.tainted, out) {
            Ok(true) => {}
            Ok(false) => {
                counts.skipped += 1;
                continue;
            }
            Err(why) => {
                emit(out, &ResultLine::Abort { after: i, reason: why });
                return counts;
            }
        }
        if let Some(g) = guard {
            let budget = Duration::from_millis(scenario.deadline_ms) + KILL_GRACE + GUARD_SLACK;
            g.arm(budget, format!("scenario {index} {name}"), i);
        }
        let taint_before = read_taint(&paths.tainted);
        emit(out, &ResultLine::Begin { index, name: name.clone(), taint: taint_before });
        kmsg(paths, &Marker::Begin { index, name: &name }.line());
        if let Some(Err(e)) = gcov.as_ref().map(crate::runtime::gcov::Collector::reset) {
            emit(out, &diag(&format!("gcov: {e}")));
        }
        let ran = run_scenario(index, scenario, plan, paths, out);
        if let (Some(g), None) = (&gcov, &ran.stuck) {
            send_gcov(g, index, out, &mut gcov_wait);
        }
        let (mut outcome, time_ms, mut reason) = (ran.outcome, ran.time_ms, ran.reason);
        // A kernel that oopsed while the scenario ran may hold a lock or a reference forever
        // (the oopsing task died inside it): nothing after it can be trusted, so neither the
        // hygiene nor the next scenario runs on it.
        let mut broken = ran.stuck.or_else(|| died(taint_before, read_taint(&paths.tainted), &name));
        // The scenario's footprint is undone before its result, so what it left is reported
        // against it. Not after the last one: the reboot clears everything, and tearing down
        // what some leave (65k events) takes minutes. Not on a broken kernel: the boot ends.
        // What cannot be undone ends the boot too, once: every later scenario would otherwise
        // wait for the same leftover again and fail on it, so they run on a fresh boot instead.
        let expected = plan.expected_failures.contains(&name);
        let stops = plan.stop_at_first_failure && matches!(outcome, Outcome::Fail | Outcome::Timeout) && !expected;
        // A group ends at its last scenario or at the failure that stops it: the switch goes back
        // to 0 and the hygiene runs on the unswitched kernel, for the next group, not as a check
        // of this scenario (a boot of its own would have had no hygiene after it).
        let ends_group = group.is_some() && (stops || plan.group_of(i + 1) != group);
        if let (Some(b), None, true) = (&baseline, &broken, index < plan.scenarios.len()) {
            if ends_group {
                let groups = plan.groups.as_ref().expect("a grouped scenario");
                broken = switch(groups, 0).err().or_else(|| {
                    let (_, _, failed) = tidy(b, outcome, reason.clone(), out, &mut hygiene);
                    failed.map(|f| {
                        format!(
                            "the group ending at {name} left what cannot be undone ({f}): the rest need a fresh boot"
                        )
                    })
                });
                switched = 0;
            } else {
                let failed;
                (outcome, reason, failed) = tidy(b, outcome, reason, out, &mut hygiene);
                broken = failed.map(|f| format!("{name} left what cannot be undone ({f}): the rest need a fresh boot"));
            }
        }
        let taint = read_taint(&paths.tainted);
        emit(out, &ResultLine::Result { index, name, outcome, time_ms, taint, reason });
        counts.count(outcome);
        if let Some(why) = broken {
            // The kernel holds a process that SIGKILL cannot end, oopsed, or keeps what this
            // scenario left: whatever it holds (a lock, a reference) would block or fail every
            // later scenario. Give up this boot; the host runs the rest on a fresh one.
            emit(out, &ResultLine::End { index, taint });
            emit(out, &ResultLine::Abort { after: index, reason: why });
            return counts;
        }
        kmsg(paths, &Marker::End { index }.line());
        emit(out, &ResultLine::End { index, taint });
        if let Some(g) = guard {
            g.disarm();
        }
        if paths.reap_orphans {
            sys::reap_zombies();
        }
        // After the hygiene's verdict: a scenario it failed stops the plan too.
        if plan.stop_at_first_failure && matches!(outcome, Outcome::Fail | Outcome::Timeout) && !expected {
            match group {
                Some(g) => stopped = Some((g, plan.scenarios[i].name.clone())),
                None => {
                    skip_the_rest(plan, index, &paths.tainted, out, &mut counts);
                    break;
                }
            }
        }
    }
    say_costs(&hygiene, gcov.as_ref(), &gcov_wait);
    let Counts { passed, failed, skipped, timeout } = counts;
    emit(out, &ResultLine::Sentinel { total: plan.scenarios.len(), passed, failed, skipped, timeout });
    counts
}

/// How one scenario ran.
struct Ran {
    outcome: Outcome,
    time_ms: u64,
    /// The `# SKIP` reason.
    reason: String,
    /// Why the plan cannot go on: a process of the scenario did not die after SIGKILL.
    stuck: Option<String>,
}

/// One scenario, killed at its deadline. Its output lines become Diag lines. The supervisor
/// never waits unboundedly on a killed child: one that has not died within [`KILL_GRACE`] is
/// stuck in the kernel, reported with where it is (`/proc/<pid>/stack`) and the blocked tasks.
fn run_scenario(index: usize, scenario: &Scenario, plan: &Plan, paths: &Paths, out: &mut dyn Write) -> Ran {
    let start = Instant::now();
    let ran = |outcome, time_ms, reason: String| Ran { outcome, time_ms, reason, stuck: None };
    let (child, lines) = match spawn_scenario(index, scenario, plan, paths) {
        Ok(x) => x,
        Err(e) => {
            emit(out, &diag(&format!("cannot start scenario: {}", sys::error_name(&e))));
            return ran(Outcome::Fail, 0, String::new());
        }
    };
    let pid = child.id();
    let deadline = start + Duration::from_millis(scenario.deadline_ms);
    let mut forward = Forward { index, last: String::new() };
    let timed_out = watch(pid, deadline, &lines, &mut forward, out);
    let time_ms = start.elapsed().as_millis() as u64;
    // Whatever the scenario left behind in its group dies with it, so scenarios stay apart.
    sys::kill_group(pid);
    let stuck = survivors_of_kill(pid, &lines, &mut forward, out);
    if !stuck.is_empty() {
        let outcome = if timed_out { Outcome::Timeout } else { Outcome::Fail };
        let why = report_stuck(&stuck, index, scenario, timed_out, out);
        return Ran { outcome, time_ms, reason: String::new(), stuck: Some(why) };
    }
    // It has exited (a zombie until now), so this returns at once.
    let status = { child }.wait();
    let grace = Instant::now() + DRAIN;
    while let Some(left) = grace.checked_duration_since(Instant::now()) {
        match lines.recv_timeout(left) {
            Ok(line) => forward.line(line, out),
            Err(_) => break,
        }
    }
    if timed_out {
        emit(out, &diag(&format!("deadline of {} ms expired: killed the process group", scenario.deadline_ms)));
        return ran(Outcome::Timeout, time_ms, String::new());
    }
    let outcome = exit_outcome(status, out);
    let reason = if outcome == Outcome::Skip { clean(&forward.last) } else { String::new() };
    ran(outcome, time_ms, reason)
}

/// A scenario's output lines on their way to the result channel, the last one kept (a skip's
/// reason).
struct Forward {
    index: usize,
    last: String,
}

impl Forward {
    fn line(&mut self, line: String, out: &mut dyn Write) {
        // A figure the scenario measured travels as a metric line under this scenario's index.
        match protocol::Metric::from_output(&line) {
            Some(metric) => emit(out, &ResultLine::Metric { index: self.index, metric }),
            None => emit(out, &diag(&line)),
        }
        self.last = line;
    }
}

/// Forwards the scenario's lines until its child `pid` exits or the deadline comes: whether
/// the deadline came first.
fn watch(pid: u32, deadline: Instant, lines: &Receiver<String>, forward: &mut Forward, out: &mut dyn Write) -> bool {
    loop {
        if sys::has_exited(pid) {
            return false;
        }
        let now = Instant::now();
        if now >= deadline {
            return true;
        }
        let wait = (deadline - now).min(POLL);
        match lines.recv_timeout(wait) {
            Ok(line) => forward.line(line, out),
            Err(RecvTimeoutError::Timeout) => {}
            // The child closed its output but runs on.
            Err(RecvTimeoutError::Disconnected) => thread::sleep(wait),
        }
    }
}

/// After the kill of `pid`'s group: the processes of the group still alive [`KILL_GRACE`]
/// later (none once they all died), the lines they said meanwhile forwarded.
fn survivors_of_kill(pid: u32, lines: &Receiver<String>, forward: &mut Forward, out: &mut dyn Write) -> Vec<u32> {
    let gone_by = Instant::now() + KILL_GRACE;
    loop {
        let mut alive = if sys::has_exited(pid) { Vec::new() } else { vec![pid] };
        alive.extend(stuck::group_members(Path::new("/proc"), pid).into_iter().filter(|p| *p != pid));
        if alive.is_empty() || Instant::now() >= gone_by {
            return alive;
        }
        match lines.recv_timeout(POLL) {
            Ok(line) => forward.line(line, out),
            Err(_) => thread::sleep(POLL),
        }
    }
}

/// The processes that did not die after the kill, where they are stuck and the blocked tasks,
/// as Diag lines; why the plan cannot go on.
fn report_stuck(stuck: &[u32], index: usize, scenario: &Scenario, timed_out: bool, out: &mut dyn Write) -> String {
    let what = if timed_out {
        format!("deadline of {} ms expired: killed the process group", scenario.deadline_ms)
    } else {
        "the scenario ended: killed its process group".to_string()
    };
    let list = stuck.iter().map(u32::to_string).collect::<Vec<_>>().join(", ");
    emit(
        out,
        &diag(&format!("{what}, but pid {list} did not die within {} s: stuck in the kernel", KILL_GRACE.as_secs())),
    );
    for p in stuck {
        for l in stuck::describe(Path::new("/proc"), *p) {
            emit(out, &diag(&l));
        }
    }
    if let Err(e) = stuck::show_blocked_tasks() {
        emit(out, &diag(&e));
    }
    format!("pid {list} of scenario {index} is stuck in the kernel")
}

/// The outcome of a scenario child that exited by itself, from its exit status; a failure's
/// status said as a Diag line.
fn exit_outcome(status: io::Result<std::process::ExitStatus>, out: &mut dyn Write) -> Outcome {
    match status {
        Err(e) => {
            emit(out, &diag(&format!("cannot wait for the scenario: {}", sys::error_name(&e))));
            Outcome::Fail
        }
        Ok(s) => match (s.code(), s.signal()) {
            (Some(0), _) => Outcome::Pass,
            (Some(protocol::EXIT_SKIP), _) => Outcome::Skip,
            (Some(code), _) => {
                emit(out, &diag(&format!("exited with status {code}")));
                Outcome::Fail
            }
            (None, signal) => {
                emit(out, &diag(&format!("killed by signal {}", signal.unwrap_or(0))));
                Outcome::Fail
            }
        },
    }
}

/// Starts the scenario child in its own process group with stdout and stderr on one pipe (so
/// their lines keep their order), and a thread that turns the pipe into lines.
fn spawn_scenario(
    index: usize,
    scenario: &Scenario,
    plan: &Plan,
    paths: &Paths,
) -> io::Result<(std::process::Child, Receiver<String>)> {
    let (plan_arg, index_arg) = match &paths.scenario_file {
        Some(file) => {
            let one = Plan {
                version: plan.version,
                label: plan.label.clone(),
                scenarios: vec![scenario.clone()],
                share: plan.share.clone(),
                artifacts_virtiofs: plan.artifacts_virtiofs,
                shell: false,
                gcov: None,
                stop_at_first_failure: false,
                expected_failures: vec![],
                groups: None,
            };
            fs::write(file, serde_json::to_vec(&one).map_err(io::Error::other)?)?;
            (file, 1)
        }
        None => (&paths.plan, index),
    };
    let (reader, writer) = io::pipe()?;
    let mut cmd = Command::new(&paths.scenario_cmd[0]);
    cmd.args(&paths.scenario_cmd[1..])
        .arg("--scenario")
        .arg(index_arg.to_string())
        .arg("--plan")
        .arg(plan_arg)
        .stdin(Stdio::null())
        .stdout(writer.try_clone()?)
        .stderr(writer)
        .process_group(0);
    if let Some(kmsg) = &paths.kmsg {
        cmd.env(protocol::PROGRESS_KMSG_ENV, kmsg).env(protocol::PROGRESS_INDEX_ENV, index.to_string());
    }
    let child = cmd.spawn();
    // The Command holds our copies of the write end: drop them so the pipe can reach EOF.
    drop(cmd);
    let child = child?;
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let mut reader = BufReader::new(reader);
        let mut buf = Vec::new();
        loop {
            buf.clear();
            match reader.read_until(b'\n', &mut buf) {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    while buf.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
                        buf.pop();
                    }
                    if tx.send(String::from_utf8_lossy(&buf).into_owned()).is_err() {
                        break;
                    }
                }
            }
        }
    });
    Ok((child, rx))
}

/// The first virtio console port named `protocol::RESULT_PORT`: `/dev/vportNpM`. The host
/// names ports with a control message after the port appears, so the name may lag a little.
pub fn find_result_port(virtio_ports: &Path, dev: &Path, wait: Duration) -> Option<PathBuf> {
    let until = Instant::now() + wait;
    loop {
        if let Ok(entries) = fs::read_dir(virtio_ports) {
            let mut names: Vec<_> = entries.flatten().map(|e| e.file_name()).collect();
            names.sort();
            for port in names {
                let name = fs::read_to_string(virtio_ports.join(&port).join("name")).unwrap_or_default();
                let node = dev.join(&port);
                if name.trim_end() == protocol::RESULT_PORT && node.exists() {
                    return Some(node);
                }
            }
        }
        if Instant::now() >= until {
            return None;
        }
        thread::sleep(Duration::from_millis(50));
    }
}

/// A marker in the kernel log. The file is opened per message because /dev/kmsg rate-limits
/// writes per open file (10 per 5 s), which a long plan would exceed.
fn kmsg(paths: &Paths, msg: &str) {
    if let Some(path) = &paths.kmsg {
        if let Ok(mut f) = fs::OpenOptions::new().append(true).open(path) {
            let _ = f.write_all(format!("{msg}\n").as_bytes());
        }
    }
}

mod between;
mod stream;
#[cfg(test)]
mod tests;
