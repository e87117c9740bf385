//! The supervisor: runs each scenario of the plan in a child process group under its deadline
//! and reports it on the result channel as KTAP lines (`protocol::ResultLine`).
//! tidy: long because half of it is the plan loop's tests, which drive it through a fake guest
//! set up by this module's private helpers.

use std::ffi::OsString;
use std::fs;
use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::thread;
use std::time::{Duration, Instant};

use protocol::{Marker, Outcome, Plan, ResultLine, Scenario};

use crate::runtime::hygiene::{self, Baseline, HygieneRoots};
use crate::runtime::stuck::{self, Guard, KILL_GRACE};
use crate::runtime::sys;

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

/// How many scenarios ended which way.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    pub passed: usize,
    pub failed: usize,
    pub skipped: usize,
    pub timeout: usize,
}

impl Counts {
    /// One more scenario that ended with `outcome`.
    fn count(&mut self, outcome: Outcome) {
        match outcome {
            Outcome::Pass => self.passed += 1,
            Outcome::Fail => self.failed += 1,
            Outcome::Skip => self.skipped += 1,
            Outcome::Timeout => self.timeout += 1,
        }
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
    for (i, scenario) in plan.scenarios.iter().enumerate() {
        let index = i + 1;
        let name = scenario.name.clone();
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
        if let (Some(b), None) = (&baseline, &broken) {
            if index < plan.scenarios.len() {
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
        let unexpected = matches!(outcome, Outcome::Fail | Outcome::Timeout)
            && !plan.expected_failures.iter().any(|n| *n == plan.scenarios[i].name);
        if plan.stop_at_first_failure && unexpected {
            skip_the_rest(plan, index, paths, out, &mut counts);
            break;
        }
    }
    say_costs(&hygiene, gcov.as_ref(), &gcov_wait);
    let Counts { passed, failed, skipped, timeout } = counts;
    emit(out, &ResultLine::Sentinel { total: plan.scenarios.len(), passed, failed, skipped, timeout });
    counts
}

/// A coverage kernel's counters after scenario `index`, sent once they settle; the wait
/// added to `wait`.
fn send_gcov(g: &crate::runtime::gcov::Collector, index: usize, out: &mut dyn Write, wait: &mut HygieneCost) {
    let (took, settled) = g.collect(index, out, emit);
    wait.add(took);
    if !settled {
        emit(out, &diag(&format!("gcov: the counters still changed after {} ms", took.as_millis())));
    }
}

/// What the between-scenario hygiene and the coverage counters' collection cost, on the
/// console.
fn say_costs(hygiene: &HygieneCost, gcov: Option<&crate::runtime::gcov::Collector>, gcov_wait: &HygieneCost) {
    if hygiene.runs > 0 {
        sys::console(&format!(
            "ue-agent: between-scenario hygiene: {} runs, {} us in total, at most {} us",
            hygiene.runs,
            hygiene.total.as_micros(),
            hygiene.max.as_micros()
        ));
    }
    if let (Some(g), true) = (gcov, gcov_wait.runs > 0) {
        let (reading, sending) = g.spent.get();
        sys::console(&format!(
            "ue-agent: gcov counters settled and sent: {} runs, {} us in total, at most {} us; {} us reading, {} us sending",
            gcov_wait.runs,
            gcov_wait.total.as_micros(),
            gcov_wait.max.as_micros(),
            reading.as_micros(),
            sending.as_micros()
        ));
    }
}

/// A `stop_at_first_failure` plan after its first failure at `after`: every later scenario
/// reported as skipped, unrun.
fn skip_the_rest(plan: &Plan, after: usize, paths: &Paths, out: &mut dyn Write, counts: &mut Counts) {
    let reason = format!("not run: the plan stops at its first failure ({})", plan.scenarios[after - 1].name);
    for (index, s) in plan.scenarios.iter().enumerate().skip(after).map(|(i, s)| (i + 1, s)) {
        let (name, taint, reason) = (s.name.clone(), read_taint(&paths.tainted), reason.clone());
        emit(out, &ResultLine::Begin { index, name: name.clone(), taint });
        emit(out, &ResultLine::Result { index, name, outcome: Outcome::Skip, time_ms: 0, taint, reason });
        emit(out, &ResultLine::End { index, taint });
        counts.skipped += 1;
    }
}

/// What the between-scenario hygiene cost, for the console.
#[derive(Debug, Default)]
struct HygieneCost {
    runs: u32,
    total: Duration,
    max: Duration,
}

impl HygieneCost {
    /// One more run, which took `took`.
    fn add(&mut self, took: Duration) {
        self.runs += 1;
        self.total += took;
        self.max = self.max.max(took);
    }
}

/// Restores the baseline after a scenario: each thing it left becomes a `cleanup:` line, each
/// thing that could not be undone a `cleanup failed:` line and a failure of the scenario.
/// The kernel's taint bit for "died": an Oops or BUG happened (`TAINT_DIE`, `D`).
const TAINT_DIE: u64 = 1 << 7;

/// Why the boot cannot go on after scenario `name`: the kernel oopsed while it ran.
fn died(before: u64, after: u64, name: &str) -> Option<String> {
    (after & TAINT_DIE != 0 && before & TAINT_DIE == 0)
        .then(|| format!("the kernel oopsed while {name} ran (taint D): the rest need a fresh boot"))
}

/// Restores the boot's baseline after a scenario; what could not be restored fails it and
/// comes back as the first such item.
fn tidy(
    baseline: &Baseline,
    outcome: Outcome,
    reason: String,
    out: &mut dyn Write,
    cost: &mut HygieneCost,
) -> (Outcome, String, Option<String>) {
    let started = Instant::now();
    let c = baseline.restore();
    cost.add(started.elapsed());
    for item in &c.left {
        emit(out, &diag(&format!("cleanup: {item}")));
    }
    for item in &c.failed {
        emit(out, &diag(&format!("cleanup failed: {item}")));
    }
    let failed = c.failed.first().cloned();
    match outcome {
        Outcome::Pass | Outcome::Skip if failed.is_some() => (Outcome::Fail, String::new(), failed),
        _ => (outcome, reason, failed),
    }
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

/// The kernel's taint mask; 0 when unreadable (no /proc), which the host sees as untainted.
pub fn read_taint(path: &Path) -> u64 {
    fs::read_to_string(path).ok().and_then(|s| s.trim().parse().ok()).unwrap_or(0)
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

/// Writes one line and flushes it, so a crash loses nothing already reported.
pub fn emit(out: &mut dyn Write, line: &ResultLine) {
    static BROKEN: AtomicBool = AtomicBool::new(false);
    let text = format!("{}\n", line.format());
    if let Err(e) = out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        if !BROKEN.swap(true, Ordering::Relaxed) {
            sys::console(&format!("ue-agent: result channel write failed: {}", sys::error_name(&e)));
        }
    }
}

/// A Diag line that reads back as the same Diag: control characters are escaped, and text
/// that would parse as one of the agent's own lines (`ue-end 1 taint=0`) is marked as output.
fn diag(text: &str) -> ResultLine {
    let text = clean(text);
    let line = ResultLine::Diag(text.clone());
    if ResultLine::parse(&line.format()).as_ref() == Some(&line) {
        line
    } else {
        ResultLine::Diag(format!("| {text}"))
    }
}

fn clean(text: &str) -> String {
    let mut s = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() && c != '\t' {
            s.push_str(&format!("\\x{:02x}", c as u32));
        } else {
            s.push(c);
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use protocol::steps::Sleep;
    use protocol::Step;

    /// A scenario child that is a shell script: `$2` is the scenario index.
    const SCRIPT: &str = r#"
case "$2" in
  1) echo "hello"; echo "to stderr" >&2; exit 0 ;;
  2) echo "about to fail"; exit 3 ;;
  3) echo "no perf support"; exit 4 ;;
  4) sleep 30 & echo "grandchild $!"; sleep 30 ;;
  5) echo "ue-end 1 taint=0"; kill -9 $$ ;;
  6) echo "ue-metric m value=2 unit=ns better=lower samples=1,2,3"; echo "ue-metric 6 forged value=2 unit=ns better=lower samples="; exit 0 ;;
esac
"#;

    fn paths(dir: &Path) -> Paths {
        let tainted = dir.join("tainted");
        fs::write(&tainted, "512\n").unwrap();
        fs::write(dir.join("kmsg"), "").unwrap();
        Paths {
            plan: dir.join("plan.json"),
            tainted,
            kmsg: Some(dir.join("kmsg")),
            scenario_cmd: ["/bin/sh", "-c", SCRIPT, "sh"].map(OsString::from).to_vec(),
            scenario_file: None,
            reap_orphans: false,
            hygiene: None,
        }
    }

    /// A fake guest under `dir` with the hygiene on, whose scenario child is `script` (`$2` the
    /// scenario's index, `$4` the plan, in `dir`).
    fn with_hygiene(dir: &Path, script: &str) -> Paths {
        Paths {
            scenario_cmd: ["/bin/sh", "-c", script, "sh"].map(OsString::from).to_vec(),
            hygiene: Some(crate::runtime::hygiene::fake_tree(dir)),
            ..paths(dir)
        }
    }

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("ue-agent-test-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn scenario(name: &str, deadline_ms: u64) -> Scenario {
        Scenario { name: name.into(), deadline_ms, steps: vec![Step::Sleep(Sleep { ms: 1 })] }
    }

    fn plan(scenarios: Vec<Scenario>) -> Plan {
        Plan {
            version: protocol::PROTOCOL_VERSION,
            label: "test".into(),
            scenarios,
            share: None,
            artifacts_virtiofs: false,
            shell: false,
            gcov: None,
            stop_at_first_failure: false,
            expected_failures: vec![],
        }
    }

    /// Runs scenario `index` of SCRIPT alone; the parsed lines between Begin and Result.
    fn run_one(index: usize, deadline_ms: u64) -> (Outcome, u64, String, Vec<ResultLine>) {
        let dir = temp_dir(&format!("one{index}"));
        let mut out = Vec::new();
        let s = scenario("t/x", deadline_ms);
        let r = run_scenario(index, &s, &plan(vec![s.clone()]), &paths(&dir), &mut out);
        assert!(r.stuck.is_none());
        let r = (r.outcome, r.time_ms, r.reason);
        let lines = String::from_utf8(out).unwrap().lines().map(|l| ResultLine::parse(l).unwrap()).collect();
        fs::remove_dir_all(&dir).unwrap();
        (r.0, r.1, r.2, lines)
    }

    #[test]
    fn with_a_scenario_file_the_child_parses_only_its_scenario() {
        let dir = temp_dir("scenario-file");
        let file = dir.join("one.json");
        let mut p = paths(&dir);
        // `--scenario N --plan FILE` are $1..$4.
        p.scenario_cmd = ["/bin/sh", "-c", r#"echo "index $2"; cat "$4""#, "sh"].map(OsString::from).to_vec();
        p.scenario_file = Some(file.clone());
        let whole = plan(vec![scenario("t/a", 5000), scenario("t/b", 5000), scenario("t/c", 5000)]);
        let mut out = Vec::new();
        let r = run_scenario(2, &whole.scenarios[1], &whole, &p, &mut out);
        assert_eq!(r.outcome, Outcome::Pass);
        let lines: Vec<ResultLine> =
            String::from_utf8(out).unwrap().lines().map(|l| ResultLine::parse(l).unwrap()).collect();
        assert_eq!(diags(&lines)[0], "index 1");
        let one = load_plan(&file).unwrap();
        assert_eq!(one.scenarios.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(), ["t/b"]);
        assert_eq!((one.label.as_str(), one.version), (whole.label.as_str(), whole.version));
        fs::remove_dir_all(&dir).unwrap();
    }

    fn diags(lines: &[ResultLine]) -> Vec<&str> {
        lines
            .iter()
            .map(|l| match l {
                ResultLine::Diag(d) => d.as_str(),
                other => panic!("not a diag: {other:?}"),
            })
            .collect()
    }

    #[test]
    fn passing_scenario_forwards_stdout_and_stderr() {
        let (outcome, _, reason, lines) = run_one(1, 5000);
        assert_eq!(outcome, Outcome::Pass);
        assert_eq!(reason, "");
        assert_eq!(diags(&lines), ["hello", "to stderr"]);
    }

    #[test]
    fn failing_scenario_reports_its_status() {
        let (outcome, _, _, lines) = run_one(2, 5000);
        assert_eq!(outcome, Outcome::Fail);
        assert_eq!(diags(&lines), ["about to fail", "exited with status 3"]);
    }

    #[test]
    fn skipping_scenario_gives_its_last_line_as_reason() {
        let (outcome, _, reason, lines) = run_one(3, 5000);
        assert_eq!(outcome, Outcome::Skip);
        assert_eq!(reason, "no perf support");
        assert_eq!(diags(&lines), ["no perf support"]);
    }

    #[test]
    fn killed_scenario_fails_and_its_output_cannot_forge_frames() {
        let (outcome, _, _, lines) = run_one(5, 5000);
        assert_eq!(outcome, Outcome::Fail);
        assert_eq!(diags(&lines), ["| ue-end 1 taint=0", "killed by signal 9"]);
    }

    #[test]
    fn measured_figures_become_metric_lines_of_this_scenario() {
        let (outcome, _, _, lines) = run_one(6, 5000);
        assert_eq!(outcome, Outcome::Pass);
        let metric = protocol::Metric {
            name: "m".into(),
            value: 2.0,
            unit: "ns".into(),
            higher_is_better: false,
            samples: vec![1.0, 2.0, 3.0],
        };
        assert_eq!(lines[0], ResultLine::Metric { index: 6, metric });
        // A line that would read as another scenario's figure stays output, marked.
        assert_eq!(lines[1], ResultLine::Diag("| ue-metric 6 forged value=2 unit=ns better=lower samples=".into()));
    }

    #[test]
    fn deadline_kills_the_whole_group() {
        let start = Instant::now();
        let (outcome, time_ms, _, lines) = run_one(4, 300);
        let took = start.elapsed();
        assert_eq!(outcome, Outcome::Timeout);
        assert!((300..1500).contains(&time_ms), "time_ms={time_ms}");
        assert!(took < Duration::from_millis(2000), "took {took:?}");
        let d = diags(&lines);
        assert_eq!(d.len(), 2, "{d:?}");
        assert!(d[1].starts_with("deadline of 300 ms expired"), "{d:?}");
        let grandchild: u32 = d[0].strip_prefix("grandchild ").unwrap().parse().unwrap();
        // Dead means gone, or a zombie waiting for whoever adopted it.
        let dead = || match fs::read_to_string(format!("/proc/{grandchild}/stat")) {
            Err(_) => true,
            Ok(stat) => stat.rsplit_once(") ").is_some_and(|(_, rest)| rest.starts_with('Z')),
        };
        let until = Instant::now() + Duration::from_secs(2);
        while !dead() && Instant::now() < until {
            thread::sleep(Duration::from_millis(20));
        }
        assert!(dead(), "grandchild {grandchild} survived the deadline");
    }

    #[test]
    fn full_stream_for_a_small_plan() {
        let dir = temp_dir("stream");
        let p = paths(&dir);
        let plan = plan(vec![scenario("t/pass", 5000), scenario("t/fail", 5000), scenario("t/skip", 5000)]);
        let mut out = Vec::new();
        let counts = run_plan(&plan, &p, &mut out, None);
        assert_eq!(counts, Counts { passed: 1, failed: 1, skipped: 1, timeout: 0 });
        let text = String::from_utf8(out).unwrap();
        let mut lines: Vec<ResultLine> = text.lines().map(|l| ResultLine::parse(l).expect(l)).collect();
        for l in &mut lines {
            if let ResultLine::Result { time_ms, .. } = l {
                *time_ms = 0;
            }
        }
        let result = |index: usize, name: &str, outcome, reason: &str| ResultLine::Result {
            index,
            name: name.into(),
            outcome,
            time_ms: 0,
            taint: 512,
            reason: reason.into(),
        };
        let begin = |index: usize, name: &str| ResultLine::Begin { index, name: name.into(), taint: 512 };
        let d = |s: &str| ResultLine::Diag(s.into());
        let expected = vec![
            ResultLine::Header,
            ResultLine::Plan { count: 3 },
            begin(1, "t/pass"),
            d("hello"),
            d("to stderr"),
            result(1, "t/pass", Outcome::Pass, ""),
            ResultLine::End { index: 1, taint: 512 },
            begin(2, "t/fail"),
            d("about to fail"),
            d("exited with status 3"),
            result(2, "t/fail", Outcome::Fail, ""),
            ResultLine::End { index: 2, taint: 512 },
            begin(3, "t/skip"),
            d("no perf support"),
            result(3, "t/skip", Outcome::Skip, "no perf support"),
            ResultLine::End { index: 3, taint: 512 },
            ResultLine::Sentinel { total: 3, passed: 1, failed: 1, skipped: 1, timeout: 0 },
        ];
        assert_eq!(lines, expected, "{text}");
        let kmsg = fs::read_to_string(dir.join("kmsg")).unwrap();
        let markers: Vec<&str> = kmsg.lines().collect();
        assert_eq!(markers[..2], ["ue-agent: begin 1 t/pass", "ue-agent: end 1"]);
        assert_eq!(markers.len(), 6, "{kmsg}");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_plan_that_stops_at_its_first_failure_skips_the_rest() {
        let dir = temp_dir("stop-first");
        let p = paths(&dir);
        let names = ["t/pass", "t/fail", "t/skip"];
        let mut stopping = plan(names.iter().map(|n| scenario(n, 5000)).collect());
        stopping.stop_at_first_failure = true;
        let mut out = Vec::new();
        let counts = run_plan(&stopping, &p, &mut out, None);
        assert_eq!(counts, Counts { passed: 1, failed: 1, skipped: 1, timeout: 0 });
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.contains("not run: the plan stops at its first failure (t/fail)"),
            "the third is skipped unrun: {text}"
        );
        assert!(!text.contains("no perf support"), "{text}");
        // An expected failure does not stop it.
        stopping.expected_failures = vec!["t/fail".into()];
        let mut out = Vec::new();
        run_plan(&stopping, &p, &mut out, None);
        assert!(String::from_utf8(out).unwrap().contains("no perf support"));
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn cleanup_is_reported_against_the_scenario_that_left_it() {
        let dir = temp_dir("hygiene");
        // $4 is the plan, in the fake guest's directory.
        let script = r#"
d=$(dirname "$4")
case "$2" in
  1) echo 5 > "$d/sys/kernel/user_events_max"; exit 0 ;;
  2) printf 'ev\n\nActive: 1\nBusy: 0\n' > "$d/tracing/user_events_status"; echo "no perf"; exit 4 ;;
  3) echo 7 > "$d/sys/kernel/user_events_max"; exit 0 ;;
esac
"#;
        let p = with_hygiene(&dir, script);
        let plan = plan(vec![scenario("t/sysctl", 5000), scenario("t/status", 5000), scenario("t/never", 5000)]);
        let mut out = Vec::new();
        let counts = run_plan(&plan, &p, &mut out, None);
        assert_eq!(counts, Counts { passed: 1, failed: 1, skipped: 0, timeout: 0 });
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<ResultLine> = text.lines().map(|l| ResultLine::parse(l).expect(l)).collect();
        let of = |index: usize| -> (Vec<String>, Outcome) {
            let begin =
                lines.iter().position(|l| matches!(l, ResultLine::Begin { index: i, .. } if *i == index)).unwrap();
            let mut d = Vec::new();
            for l in &lines[begin + 1..] {
                match l {
                    ResultLine::Diag(s) => d.push(s.clone()),
                    ResultLine::Result { outcome, .. } => return (d, *outcome),
                    other => panic!("{other:?}"),
                }
            }
            panic!("no result for {index}: {text}")
        };
        let sysctl = ["cleanup: sysctl kernel.user_events_max 5 (restored to 32768)".to_string()];
        assert_eq!(of(1), (sysctl.to_vec(), Outcome::Pass), "{text}");
        let status = ["no perf", "cleanup failed: user_events_status shows Active: 1 (ev) after cleanup"];
        assert_eq!(of(2), (status.map(String::from).to_vec(), Outcome::Fail), "a skip whose cleanup failed fails");
        // The kernel keeps what t/status left: the boot ends there, once, rather than every
        // later scenario waiting for the same leftover and failing on it.
        let want = "t/status left what cannot be undone (user_events_status shows Active: 1 (ev) after cleanup): \
                    the rest need a fresh boot";
        assert_eq!(lines.last(), Some(&ResultLine::Abort { after: 2, reason: want.into() }), "{text}");
        assert!(!text.contains("t/never"), "{text}");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_last_scenarios_footprint_is_left_to_the_reboot() {
        let dir = temp_dir("hygiene-last");
        let script = r#"d=$(dirname "$4"); case "$2" in 1) echo 5 > "$d/sys/kernel/user_events_max" ;; 2) echo 7 > "$d/sys/kernel/user_events_max" ;; esac"#;
        let p = with_hygiene(&dir, script);
        let counts = run_plan(&plan(vec![scenario("t/a", 5000), scenario("t/last", 5000)]), &p, &mut Vec::new(), None);
        assert_eq!(counts, Counts { passed: 2, failed: 0, skipped: 0, timeout: 0 });
        assert_eq!(fs::read_to_string(dir.join("sys/kernel/user_events_max")).unwrap(), "7\n");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_kernel_that_oopsed_ends_the_boot_before_any_hygiene() {
        let dir = temp_dir("oops");
        // Scenario 2 "oopses": the taint gains D (128) on top of the boot's 512. Its leftover
        // sysctl must not be touched: the hygiene would take the locks the oops may hold.
        let script = r#"d=$(dirname "$4"); case "$2" in 2) echo 7 > "$d/sys/kernel/user_events_max"; echo 640 > "$d/tainted"; exit 1 ;; esac"#;
        let p = with_hygiene(&dir, script);
        let plan = plan(vec![scenario("t/a", 5000), scenario("t/oops", 5000), scenario("t/never", 5000)]);
        let mut out = Vec::new();
        let counts = run_plan(&plan, &p, &mut out, None);
        assert_eq!(counts, Counts { passed: 1, failed: 1, skipped: 0, timeout: 0 });
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<ResultLine> = text.lines().map(|l| ResultLine::parse(l).expect(l)).collect();
        let want = "the kernel oopsed while t/oops ran (taint D): the rest need a fresh boot";
        assert_eq!(lines.last(), Some(&ResultLine::Abort { after: 2, reason: want.into() }), "{text}");
        assert!(!text.contains("cleanup"), "no hygiene on an oopsed kernel: {text}");
        assert_eq!(fs::read_to_string(dir.join("sys/kernel/user_events_max")).unwrap(), "7\n");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn bad_plan_ends_the_stream_cleanly() {
        let dir = temp_dir("badplan");
        fs::write(dir.join("plan.json"), r#"{"version": 1}"#).unwrap();
        let err = load_plan(&dir.join("plan.json")).unwrap_err();
        assert!(err.starts_with("cannot parse plan "), "{err}");
        let err = load_plan(&dir.join("missing.json")).unwrap_err();
        assert!(err.ends_with(": ENOENT"), "{err}");
        let mut out = Vec::new();
        report_bad_plan(&err, &mut out);
        let lines: Vec<_> = String::from_utf8(out).unwrap().lines().map(|l| ResultLine::parse(l).unwrap()).collect();
        assert_eq!(
            lines,
            [
                ResultLine::Header,
                ResultLine::Diag(err),
                ResultLine::Sentinel { total: 0, passed: 0, failed: 0, skipped: 0, timeout: 0 }
            ]
        );
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn finds_the_named_result_port() {
        let dir = temp_dir("ports");
        let (sys, dev) = (dir.join("sys"), dir.join("dev"));
        for (port, name) in [("vport0p1", "other"), ("vport0p2", "ue.results\n")] {
            fs::create_dir_all(sys.join(port)).unwrap();
            fs::write(sys.join(port).join("name"), name).unwrap();
        }
        fs::create_dir_all(&dev).unwrap();
        assert_eq!(find_result_port(&sys, &dev, Duration::ZERO), None, "no device node yet");
        fs::write(dev.join("vport0p2"), "").unwrap();
        assert_eq!(find_result_port(&sys, &dev, Duration::ZERO), Some(dev.join("vport0p2")));
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn diag_text_is_made_safe() {
        assert_eq!(diag("plain"), ResultLine::Diag("plain".into()));
        assert_eq!(diag("a\x1bb\r"), ResultLine::Diag("a\\x1bb\\x0d".into()));
        assert_eq!(
            diag("ue-sentinel total=0 passed=0 failed=0 skipped=0 timeout=0").format().as_str(),
            "# | ue-sentinel total=0 passed=0 failed=0 skipped=0 timeout=0"
        );
        assert_eq!(diag("ue-begin garbage"), ResultLine::Diag("| ue-begin garbage".into()));
    }
}
