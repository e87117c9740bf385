//! End-to-end on the host: the real `ue-agent` binary runs a plan (re-executing itself as the
//! scenario child) and its result stream parses back as the expected KTAP.

use std::fs;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use protocol::steps::{
    CheckBit, CheckWord, Exec, ExecAgent, Fork, Open, ReadFile, Register, SetWord, Sleep, Thread, Wait, Write,
    WriteFile,
};
use protocol::{Expect, Outcome, Plan, ResultLine, Scenario, Step, Value};

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ue-agent-e2e-{}-{name}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    dir
}

fn exec(argv: &[&str], expect_exit: i32) -> Step {
    Step::Exec(Exec { argv: argv.iter().map(|s| s.to_string()).collect(), expect_exit })
}

/// The diagnostic lines of a result stream, in order.
fn diags(lines: &[ResultLine]) -> Vec<&str> {
    lines
        .iter()
        .filter_map(|l| match l {
            ResultLine::Diag(d) => Some(d.as_str()),
            _ => None,
        })
        .collect()
}

fn agent(plan: &std::path::Path) -> (i32, Vec<ResultLine>) {
    let out = Command::new(env!("CARGO_BIN_EXE_ue-agent"))
        .args(["--plan", plan.to_str().unwrap(), "--results", "-"])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let lines = text.lines().map(|l| ResultLine::parse(l).unwrap_or_else(|| panic!("not KTAP: {l}"))).collect();
    (out.status.code().unwrap(), lines)
}

#[test]
fn runs_a_plan_end_to_end() {
    let dir = temp_dir("plan");
    let target = dir.join("target");
    fs::write(&target, "").unwrap();
    let scenario = |name: &str, deadline_ms, steps| Scenario { name: name.into(), deadline_ms, steps };
    let plan = Plan {
        version: protocol::PROTOCOL_VERSION,
        label: "host".into(),
        scenarios: vec![
            scenario(
                "e2e/pass",
                5000,
                vec![
                    exec(&["/bin/true"], 0),
                    exec(&["/bin/false"], 1),
                    Step::WriteFile(WriteFile {
                        path: target.display().to_string(),
                        data: "written".into(),
                        bytes: None,
                        create: false,
                        append: false,
                        expect: Expect::default(),
                        within_ms: 0,
                    }),
                ],
            ),
            scenario("e2e/fail", 5000, vec![exec(&["/bin/false"], 0)]),
            scenario("e2e/timeout", 300, vec![Step::Sleep(Sleep { ms: 30_000 })]),
            scenario("e2e/skip", 5000, vec![exec(&["/bin/sh", "-c", "echo no feature; exit 4"], 0)]),
        ],
        share: None,
        artifacts_virtiofs: false,
        shell: false,
        gcov: None,
        stop_at_first_failure: false,
        expected_failures: vec![],
        groups: None,
    };
    fs::write(dir.join("plan.json"), serde_json::to_string(&plan).unwrap()).unwrap();
    let start = Instant::now();
    let (code, lines) = agent(&dir.join("plan.json"));
    assert!(start.elapsed() < Duration::from_secs(5), "took {:?}", start.elapsed());
    assert_eq!(code, 1, "a failure and a timeout: {lines:#?}");
    assert_eq!(fs::read_to_string(&target).unwrap(), "written");

    assert_eq!(lines[..2], [ResultLine::Header, ResultLine::Plan { count: 4 }]);
    let results: Vec<(String, Outcome, String)> = lines
        .iter()
        .filter_map(|l| match l {
            ResultLine::Result { name, outcome, reason, .. } => Some((name.clone(), *outcome, reason.clone())),
            _ => None,
        })
        .collect();
    let expected = [
        ("e2e/pass", Outcome::Pass, ""),
        ("e2e/fail", Outcome::Fail, ""),
        ("e2e/timeout", Outcome::Timeout, ""),
        ("e2e/skip", Outcome::Skip, "step 1: exec /bin/sh -c echo no feature; exit 4: exit 4 (skip; expected 0)"),
    ];
    assert_eq!(results, expected.map(|(n, o, r)| (n.to_string(), o, r.to_string())));
    let diags = diags(&lines);
    assert!(diags.contains(&"step 1: exec /bin/false: exit 1 (expected 0)"), "{diags:#?}");
    assert!(diags.contains(&"exited with status 1"), "{diags:#?}");
    assert!(diags.contains(&"step 1: sleep 30000 ms"), "{diags:#?}");
    assert!(diags.contains(&"no feature"), "{diags:#?}");
    assert_eq!(lines.last(), Some(&ResultLine::Sentinel { total: 4, passed: 1, failed: 1, skipped: 1, timeout: 1 }));
    fs::remove_dir_all(&dir).unwrap();
}

/// The user_events steps in the real child, against an ordinary file (the host has no
/// user_events): state carries across steps, and an ioctl's errno meets the expectation.
#[test]
fn user_events_steps_run_in_the_child() {
    let dir = temp_dir("uevents");
    let file = dir.join("file");
    fs::write(&file, "").unwrap();
    let path = file.display().to_string();
    let open = Step::Open(Open { fd: "f".into(), path: path.clone(), read_only: false, expect: Expect::default() });
    let register = |expect: &str| {
        Step::Register(Register {
            fd: "f".into(),
            format: "ev u32 a".into(),
            word: Some("w".into()),
            bit: 0,
            size: 4,
            flags: 0,
            index_as: None,
            expect_index: None,
            raw: Default::default(),
            minor_faults: None,
            expect: expect.parse().unwrap(),
        })
    };
    let steps = vec![
        open.clone(),
        register("ENOTTY"),
        Step::SetWord(SetWord { word: "w".into(), value: 1 }),
        Step::CheckBit(CheckBit { word: "w".into(), bit: 0, set: true, within_ms: 10 }),
        Step::Write(Write {
            fd: "f".into(),
            index: None,
            index_value: Some(0x6968_6968),
            fields: vec![Value::Text("\nline".into())],
            vectored: false,
            offset: None,
            payload_from: None,
            expect: Expect::Value(9),
        }),
        Step::ReadFile(ReadFile {
            path: path.clone(),
            equals: None,
            contains: vec!["hihi".into(), "line".into()],
            lacks: vec![],
            includes: vec!["hi\nline".into()],
            excludes: vec![],
            head_hex: None,
            expect: Expect::default(),
            within_ms: 0,
            keep_as: None,
            equals_kept: None,
            keep_match: None,
        }),
    ];
    let scenario = |name: &str, steps| Scenario { name: name.into(), deadline_ms: 5000, steps };
    let plan = Plan {
        version: protocol::PROTOCOL_VERSION,
        label: "host".into(),
        scenarios: vec![scenario("ue/pass", steps), scenario("ue/fail", vec![open, register("ok")])],
        share: None,
        artifacts_virtiofs: false,
        shell: false,
        gcov: None,
        stop_at_first_failure: false,
        expected_failures: vec![],
        groups: None,
    };
    fs::write(dir.join("plan.json"), serde_json::to_string(&plan).unwrap()).unwrap();
    let (code, lines) = agent(&dir.join("plan.json"));
    assert_eq!(code, 1, "{lines:#?}");
    assert_eq!(lines.last(), Some(&ResultLine::Sentinel { total: 2, passed: 1, failed: 1, skipped: 0, timeout: 0 }));
    let diags = diags(&lines);
    assert!(
        diags.contains(&"step 2: register \"ev u32 a\" word w bit 0 size 4 on fd f: ENOTTY (expected ok)"),
        "{diags:#?}"
    );
    let check = diags.iter().find(|d| d.starts_with("step 4: check word w bit 0: set after ")).expect("step 4");
    assert!(check.ends_with(" ms, word 0x1 (expected set within 10 ms)"), "{check}");
    fs::remove_dir_all(&dir).unwrap();
}

/// fork/wait, thread and exec_agent in the real child: a forked child works on a copy of the
/// state and its status is collected, a thread shares it, and an exec'd agent starts fresh.
#[test]
fn fork_thread_and_exec_agent_steps() {
    let dir = temp_dir("fork");
    let marker = dir.join("from-child");
    let write = |path: &std::path::Path, data: &str| {
        Step::WriteFile(WriteFile {
            path: path.display().to_string(),
            data: data.into(),
            bytes: None,
            create: true,
            append: false,
            expect: Expect::default(),
            within_ms: 0,
        })
    };
    let read = |path: &std::path::Path, equals: &str| {
        Step::ReadFile(ReadFile {
            path: path.display().to_string(),
            equals: Some(equals.into()),
            contains: vec![],
            lacks: vec![],
            includes: vec![],
            excludes: vec![],
            head_hex: None,
            expect: Expect::default(),
            within_ms: 0,
            keep_as: None,
            equals_kept: None,
            keep_match: None,
        })
    };
    let steps = vec![
        Step::SetWord(SetWord { word: "w".into(), value: 1 }),
        Step::Fork(Fork {
            name: "c".into(),
            steps: vec![
                Step::CheckWord(CheckWord { word: "w".into(), value: 1, or: vec![], within_ms: 0 }),
                Step::SetWord(SetWord { word: "w".into(), value: 2 }),
                write(&marker, "child"),
            ],
        }),
        Step::Wait(Wait { name: "c".into(), expect_exit: 0, within_ms: 5000 }),
        // The child's store went to its own copy.
        Step::CheckWord(CheckWord { word: "w".into(), value: 1, or: vec![], within_ms: 0 }),
        read(&marker, "child"),
        Step::Fork(Fork {
            name: "bad".into(),
            steps: vec![Step::CheckWord(CheckWord { word: "w".into(), value: 9, or: vec![], within_ms: 0 })],
        }),
        Step::Wait(Wait { name: "bad".into(), expect_exit: 1, within_ms: 5000 }),
        Step::Thread(Thread { steps: vec![Step::SetWord(SetWord { word: "w".into(), value: 3 })] }),
        Step::CheckWord(CheckWord { word: "w".into(), value: 3, or: vec![], within_ms: 0 }),
        Step::ExecAgent(ExecAgent { steps: vec![write(&dir.join("after-exec"), "fresh")], keep: vec![] }),
    ];
    let plan = Plan {
        version: protocol::PROTOCOL_VERSION,
        label: "host".into(),
        scenarios: vec![Scenario { name: "proc/fork".into(), deadline_ms: 10_000, steps }],
        share: None,
        artifacts_virtiofs: false,
        shell: false,
        gcov: None,
        stop_at_first_failure: false,
        expected_failures: vec![],
        groups: None,
    };
    fs::write(dir.join("plan.json"), serde_json::to_string(&plan).unwrap()).unwrap();
    let (code, lines) = agent(&dir.join("plan.json"));
    assert_eq!(code, 0, "{lines:#?}");
    assert_eq!(fs::read_to_string(dir.join("after-exec")).unwrap(), "fresh");
    let diags = diags(&lines);
    assert!(diags.contains(&"fork c step 2: set word w = 0x2: ok"), "{diags:#?}");
    assert!(diags.contains(&"step 7: wait bad: exit 1 (expected exit 1)"), "{diags:#?}");
    assert!(diags.iter().any(|d| d.starts_with("exec step 1: write \"fresh\"")), "{diags:#?}");
    fs::remove_dir_all(&dir).unwrap();
}

/// An exec'd agent starts with the descriptors `keep` names, under their names and numbers:
/// the same open file, so its writes go on from the old image's file position.
#[test]
fn exec_agent_keeps_the_named_descriptors() {
    let dir = temp_dir("keep");
    let file = dir.join("kept");
    fs::write(&file, "").unwrap();
    let write = |fd: &str, index: u32| {
        Step::Write(Write {
            fd: fd.into(),
            index: None,
            index_value: Some(index),
            fields: vec![],
            vectored: false,
            offset: None,
            payload_from: None,
            expect: "4".parse().unwrap(),
        })
    };
    let open = Step::Open(Open {
        fd: "out".into(),
        path: file.display().to_string(),
        read_only: false,
        expect: Expect::default(),
    });
    let exec = |keep: &[&str]| {
        Step::ExecAgent(ExecAgent { steps: vec![write("out", 2)], keep: keep.iter().map(|k| k.to_string()).collect() })
    };
    let plan = |steps| Plan {
        version: protocol::PROTOCOL_VERSION,
        label: "host".into(),
        scenarios: vec![Scenario { name: "proc/keep".into(), deadline_ms: 10_000, steps }],
        share: None,
        artifacts_virtiofs: false,
        shell: false,
        gcov: None,
        stop_at_first_failure: false,
        expected_failures: vec![],
        groups: None,
    };
    fs::write(
        dir.join("plan.json"),
        serde_json::to_string(&plan(vec![open.clone(), write("out", 1), exec(&["out"])])).unwrap(),
    )
    .unwrap();
    let (code, lines) = agent(&dir.join("plan.json"));
    assert_eq!(code, 0, "{lines:#?}");
    let bytes: Vec<u8> = [1u32, 2].iter().flat_map(|v| v.to_ne_bytes()).collect();
    assert_eq!(fs::read(&file).unwrap(), bytes, "the exec'd image wrote on after the old one");
    let said = diags(&lines);
    assert!(
        said.iter().any(|d| d.starts_with("step 3: exec agent: 1 step(s) in a fresh image, keeping fd out (")),
        "{said:#?}"
    );
    // Without `keep`, the name is not open in the new image.
    fs::write(dir.join("plan.json"), serde_json::to_string(&plan(vec![open, exec(&[])])).unwrap()).unwrap();
    let (code, lines) = agent(&dir.join("plan.json"));
    assert_eq!(code, 1, "{lines:#?}");
    assert!(diags(&lines).iter().any(|d| d.ends_with("on fd out: no fd named out")), "{lines:#?}");
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_bad_plan_is_reported_and_ends_the_stream() {
    let dir = temp_dir("bad");
    fs::write(dir.join("plan.json"), "{not json").unwrap();
    let (code, lines) = agent(&dir.join("plan.json"));
    assert_eq!(code, 2);
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert!(matches!(&lines[1], ResultLine::Diag(d) if d.starts_with("cannot parse plan ")), "{lines:?}");
    assert_eq!(lines[2], ResultLine::Sentinel { total: 0, passed: 0, failed: 0, skipped: 0, timeout: 0 });
    fs::remove_dir_all(&dir).unwrap();
}
