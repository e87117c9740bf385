//! The plan loop's tests, driven through a fake guest: scenario children that are shell
//! scripts, a fake tracefs for the hygiene.

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
        groups: None,
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
        let begin = lines.iter().position(|l| matches!(l, ResultLine::Begin { index: i, .. } if *i == index)).unwrap();
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

#[test]
fn a_grouped_plan_switches_per_group_and_a_failure_skips_only_the_rest_of_its_group() {
    let dir = temp_dir("groups");
    let script = r#"
d=$(dirname "$4")
echo "$2=$(cat "$d/switch") max=$(cat "$d/sys/kernel/user_events_max")" >> "$d/seen"
case "$2" in
  2) echo 5 > "$d/sys/kernel/user_events_max"; exit 3 ;;
  *) exit 0 ;;
esac
"#;
    let p = with_hygiene(&dir, script);
    fs::write(dir.join("switch"), "0").unwrap();
    let names = ["t/a@m7", "t/b@m7", "t/c@m7", "t/a@m9", "t/c@m9"];
    let mut grouped = plan(names.iter().map(|n| scenario(n, 5000)).collect());
    grouped.stop_at_first_failure = true;
    let of = names.iter().map(|n| (n.to_string(), if n.ends_with("m7") { 7 } else { 9 })).collect();
    grouped.groups = Some(protocol::Groups { switch: dir.join("switch").display().to_string(), of });
    let mut out = Vec::new();
    let counts = run_plan(&grouped, &p, &mut out, None);
    let text = String::from_utf8(out).unwrap();
    assert_eq!(counts, Counts { passed: 3, failed: 1, skipped: 1, timeout: 0 }, "{text}");
    // Group 7 stops at t/b; its sysctl is undone on the unswitched kernel before group 9.
    let seen = fs::read_to_string(dir.join("seen")).unwrap();
    assert_eq!(seen, "1=7 max=32768\n2=7 max=32768\n4=9 max=32768\n5=9 max=32768\n", "{text}");
    assert!(text.contains("not run: its group stops at its first failure (t/b@m7)"), "{text}");
    assert!(text.contains("cleanup: sysctl kernel.user_events_max 5 (restored to 32768)"), "{text}");
    assert!(!text.contains("ue-abort"), "{text}");
    // A switch that cannot be written ends the boot before the group's first scenario.
    fs::remove_file(dir.join("seen")).unwrap();
    grouped.groups.as_mut().unwrap().switch = dir.join("no/such/switch").display().to_string();
    let mut out = Vec::new();
    let counts = run_plan(&grouped, &p, &mut out, None);
    let text = String::from_utf8(out).unwrap();
    assert_eq!(counts, Counts::default(), "{text}");
    assert!(text.lines().last().unwrap().contains("cannot write 7 to"), "{text}");
    fs::remove_dir_all(&dir).unwrap();
}
