//! The scenario language: `suites/<area>.yaml` files, their validation with `file:line:column`
//! diagnostics, `requires` against a kernel, and compilation into the agent's plan. Sans-IO
//! except the thin loaders here.
//!
//! A file is parsed twice by serde-saphyr: once into the typed model (`model`; serde reports
//! syntax, type, bad-value, unknown-key, unknown-step and duplicate-key errors with their
//! position), then into a tree of spanned nodes that gives the position of every key and value
//! to the checks that run after deserializing (`checks`: names, hex, references between
//! steps). `diagnostics` renders both; `requires` decides a scenario per kernel; `compile`
//! makes the plan.

mod checks;
mod compile;
mod diagnostics;
mod model;
mod requires;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub use compile::{compile, skip_from_requires, About, Compiled, Marks};
pub use diagnostics::{Diagnostic, Errors};
pub use model::{Requires, Suite};
pub use requires::{config_need_error, KernelFacts, KernelRange, Version};

/// Parses and validates one suite. `file` is the name shown in diagnostics; its stem must be
/// the suite's name.
pub fn parse(file: &str, text: &str) -> Result<Suite, Errors> {
    let suite: Suite = serde_saphyr::from_str_with_options(text, diagnostics::options())
        .map_err(|e| Errors(vec![diagnostics::from_serde(file, text, &e)]))?;
    checks::check(file, text, &suite)?;
    Ok(suite)
}

/// Every `*.yaml` in `dir` (the checkout's `suites/`), sorted; none when there is no such folder.
pub fn files_in(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(e),
    };
    for entry in entries {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "yaml") && path.is_file() {
            out.push(path);
        }
    }
    out.sort();
    Ok(out)
}

/// How a path is named in diagnostics: relative to the checkout when inside it.
pub fn shown(path: &Path) -> String {
    let root = crate::support::checkout::project_root();
    path.strip_prefix(&root).unwrap_or(path).display().to_string()
}

/// Reads and validates one file.
pub fn load(path: &Path) -> Result<Suite, Errors> {
    let name = shown(path);
    let text = std::fs::read_to_string(path).map_err(|e| Errors(vec![Diagnostic::whole_file(&name, e.to_string())]))?;
    parse(&name, &text)
}

/// Reads and validates several files; every error of every file is reported. Two files may
/// not hold suites of one name (their plan names would collide).
pub fn load_all(paths: &[PathBuf]) -> Result<Vec<Suite>, Errors> {
    let mut suites = Vec::new();
    let mut errors = Vec::new();
    let mut names: BTreeMap<String, String> = BTreeMap::new();
    for path in paths {
        match load(path) {
            Ok(s) => {
                if let Some(other) = names.insert(s.suite.clone(), shown(path)) {
                    errors.push(Diagnostic::whole_file(
                        &shown(path),
                        format!("suite `{}` is also in {other}: scenario names would collide", s.suite),
                    ));
                }
                suites.push(s);
            }
            Err(Errors(mut e)) => errors.append(&mut e),
        }
    }
    if errors.is_empty() {
        Ok(suites)
    } else {
        Err(Errors(errors))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use compile::Skipped;
    use model::DEFAULT_DEADLINE_MS;
    use protocol::steps::{Delete, TraceRead, Write};
    use protocol::{Step, Value};

    fn fixture(path: &str) -> (String, String) {
        let name = format!("test_data/suites/{path}");
        let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(&name)).unwrap();
        (name, text)
    }

    /// The headlines (`file:line:column: message`) of a bad fixture's errors.
    fn headlines(bad: &str) -> Vec<String> {
        let (name, text) = fixture(&format!("bad/{bad}.yaml"));
        let errors = parse(&name, &text).expect_err(bad);
        errors.0.iter().map(Diagnostic::headline).collect()
    }

    #[test]
    fn serde_errors_point_at_the_key_or_value() {
        let cases = [
            (
                "syntax",
                "6:14: while parsing a flow mapping, did not find expected ',' or '}': \
                 is a `{` before here not closed?",
            ),
            (
                "unknown-step-key",
                "5:41: unknown field `wrod`, expected one of fd, format, word, bit, size, flags, index_as, expect_index, raw, minor_faults, expect",
            ),
            ("wrong-type", "6:36: invalid u8: expected an integer from 0 to 255"),
            // A bad `expect` stops the parse at its value, as any value of the wrong type does.
            ("bad-errno", "7:19: bad expect: `EWHAT` is not `ok`, a number or an errno name"),
            ("negative-expect", "5:46: bad expect: `-1`: a failing call is stated by its errno name, not -1"),
            (
                "misspelt-errno",
                "5:47: bad expect: `EINVLA` is not `ok`, a number or an errno name; did you mean `EINVAL`?",
            ),
            ("duplicate-key", "5:25: duplicate mapping key `ms` is not allowed here"),
            (
                "record-value",
                "5:60: a record's field takes an integer (from -9223372036854775808 to 18446744073709551615), \
                 text, `self` or `{ bytes: HEX }`",
            ),
        ];
        for (bad, want) in cases {
            assert_eq!(headlines(bad), [format!("test_data/suites/bad/{bad}.yaml:{want}")]);
        }
        // The list of step kinds grows with the language: check its start and that it names them.
        let unknown = headlines("unknown-step");
        assert_eq!(unknown.len(), 1);
        assert!(
            unknown[0].starts_with(
                "test_data/suites/bad/unknown-step.yaml:5:9: unknown variant `regster`, expected one of exec, "
            ),
            "{unknown:?}"
        );
        assert!(unknown[0].contains(", register, ") && unknown[0].contains(", perf_read, "), "{unknown:?}");
    }

    #[test]
    fn checks_after_parsing_point_at_the_key_or_value() {
        let cases = [
            ("bad-hex", "6:57: bad hex in `bytes`: `de zz`: `zz` is not hex"),
            ("duplicate-scenario", "7:11: duplicate scenario name `same` (first at line 3)"),
            (
                "suite-mismatch",
                "2:8: the suite is named `registration` but its file is `suite-mismatch`: they must be the same",
            ),
        ];
        for (bad, want) in cases {
            assert_eq!(headlines(bad), [format!("test_data/suites/bad/{bad}.yaml:{want}")]);
        }
        assert_eq!(
            headlines("misused-steps"),
            [
                "test_data/suites/bad/misused-steps.yaml:5:50: a figure is a median over at least 5 repetitions, not 4",
                "test_data/suites/bad/misused-steps.yaml:6:87: only an `isolated: true` scenario may leave its events to the reboot",
                "test_data/suites/bad/misused-steps.yaml:7:67: states the errno that ends the registrations",
                "test_data/suites/bad/misused-steps.yaml:8:17: `file` goes with `op: share_file`, and `share_file` needs a `file`",
                "test_data/suites/bad/misused-steps.yaml:9:67: mode \"0689\": permission bits in octal, 3 or 4 digits 0-7 (\"0640\")",
                "test_data/suites/bad/misused-steps.yaml:10:55: write_file takes `data` (text) or `bytes` (raw), not both",
                "test_data/suites/bad/misused-steps.yaml:11:21: write_file needs `data` (text) or `bytes` (raw)",
                "test_data/suites/bad/misused-steps.yaml:12:25: dup2 onto 1: 0, 1 and 2 carry the scenario's lines",
                "test_data/suites/bad/misused-steps.yaml:13:36: keep: fd `nope` is not open: no earlier `open` step names it (only `data` opens by itself)",
                "test_data/suites/bad/misused-steps.yaml:14:55: `keep_match` says what `keep_as` keeps: add the `keep_as`",
                "test_data/suites/bad/misused-steps.yaml:15:67: `keep_match` \"Linux\" needs `{value}` once, where the text to keep is",
                "test_data/suites/bad/misused-steps.yaml:16:9: `{kept:nope}`: no earlier `read_file` step has `keep_as: nope`",
                "test_data/suites/bad/misused-steps.yaml:17:48: 0 bytes: a buffer holds 1 to 65536 (for no buffer, give `value` or an address)",
                "test_data/suites/bad/misused-steps.yaml:18:22: fd `nope` is not open: no earlier `open` step names it (only `data` opens by itself)",
                "test_data/suites/bad/misused-steps.yaml:18:33: cmd 0x100000000: the kernel takes a 32-bit command, and would cut this one",
                "test_data/suites/bad/misused-steps.yaml:19:29: `open` cannot run in a `clone_vm` child, which shares the scenario's memory: \
                 only register, unregister, delete, write, ioctl, set_word, check_bit, check_word, write_file, sleep",
                "test_data/suites/bad/misused-steps.yaml:20:28: `clone_vm` needs at least one step",
            ]
        );
        assert_eq!(
            headlines("bad-records"),
            [
                "test_data/suites/bad/bad-records.yaml:5:91: bad hex in `bytes`: `0g`: `0g` is not hex",
                "test_data/suites/bad/bad-records.yaml:6:30: `x` is not `SYSTEM/NAME` (`user_events/NAME`)",
                "test_data/suites/bad/bad-records.yaml:6:43: `a/b` is not an instance name",
                "test_data/suites/bad/bad-records.yaml:7:20: perf_read takes `samples` (raw bytes) or `records` \
                 (decoded fields): one of them",
                "test_data/suites/bad/bad-records.yaml:8:20: perf_read takes `samples` (raw bytes) or `records` \
                 (decoded fields): one of them",
            ]
        );
    }

    #[test]
    fn fail_nth_must_arm_a_call() {
        let got = headlines("misused-fail-nth");
        let want: Vec<String> = [
            "7:26: `nth` counts fault-injection points from 1",
            "9:9: `fail_nth` arms the next step's call, which must be one of [\"register\", \"unregister\", \"delete\", \"write_file\", \"open\"]; here it is `sleep`",
            "11:33: `in`: `user_event parse` is not a kernel function's name",
            "13:37: `not_in` narrows an `in`: give the function `in` too",
            "15:9: `fail_nth` arms the next step's call, which must be one of [\"register\", \"unregister\", \"delete\", \"write_file\", \"open\"]; here it is nothing",
        ]
        .iter()
        .map(|w| format!("test_data/suites/bad/misused-fail-nth.yaml:{w}"))
        .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn nested_and_concurrent_steps_are_checked() {
        let got = headlines("misused-concurrency");
        let want: Vec<String> = [
            "5:9: `{thread}` stands for a value only inside `threads`, and this step is not",
            "7:20: a group needs at least one thread",
            "8:21: `fork` acts on the whole process, so it cannot run in a thread of `threads`",
            "9:39: no earlier `register` step has `index_as: i{thread}`",
            "10:26: `repeat` needs a count of at least 1",
            "10:36: `repeat` needs at least one step",
            "11:26: a barrier's name has 1 to 51 bytes",
            "11:39: a barrier needs at least one party",
            "12:21: CPU 5000: a thread can be pinned to CPUs 0 to 1023",
            "13:21: trace_read takes `records` (each record, in order) or `every` (what each record is): one of them",
            "14:68: `at_most` bounds the records of `every`; `records` counts them",
            "15:9: `{iteration}` stands for a value only inside `repeat` or `fail_each`, and this step is not",
            // In a fork child, inside a repeat: nested steps are checked too.
            "21:59: fd `g` is not open: no earlier `open` step names it (only `data` opens by itself)",
            "22:18: `threads` needs at least one group (`- { count: N, steps: [...] }`)",
        ]
        .iter()
        .map(|w| format!("test_data/suites/bad/misused-concurrency.yaml:{w}"))
        .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn fixed_by_needs_an_xfail_and_a_file_of_the_checkout() {
        let got = headlines("fixed-by");
        let want = [
            "4:15: fixed_by names the fix of the bug an xfail names: add the xfail",
            "8:15: fixed_by: no file patches/upstream/no-such.patch in the checkout",
        ];
        let want: Vec<String> = want.iter().map(|w| format!("test_data/suites/bad/fixed-by.yaml:{w}")).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn every_error_of_a_file_is_reported_in_order() {
        let got = headlines("many");
        let want = [
            "3:26: deadline_ms must be more than 0",
            "5:11: scenario name `Bad Name` must be lowercase letters, digits, `_` and `-`, starting with a letter \
             or digit",
            "6:19: `a7` is not a catalogue item id (a capital letter and a number, such as A15)",
            "7:25: bad kernel range `>=6.x`: `6.x` is not a version such as 6.4 or 6.12.117",
            "7:43: `PERF_EVENTS` is not a Kconfig option: write CONFIG_NAME or CONFIG_NAME=value",
            "7:56: `CONFIG_X=` has no value after `=`",
            "8:12: xfail needs the reason the scenario fails",
            "9:12: a scenario needs at least one step",
            "12:29: the format is a YAML number, not text: quote it if the kernel should see those characters",
            "13:25: fd `ctl` is not open: no earlier `open` step names it (only `data` opens by itself)",
            "14:25: no earlier `register` step has `index_as: j`",
            "15:41: a write takes `index` or `index_value`, not both",
            "16:9: a write needs `index` (a name from an earlier `index_as`) or `index_value`",
            "17:36: an enable word has 64 bits: there is no bit 64",
            "21:53: `arg: null` is YAML's null, which overrides nothing; for a NULL pointer write \
             `arg: null_pointer`, or drop the key",
        ];
        let want: Vec<String> = want.iter().map(|w| format!("test_data/suites/bad/many.yaml:{w}")).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn errors_show_the_line_and_a_caret() {
        let (name, text) = fixture("bad/bad-errno.yaml");
        let shown = parse(&name, &text).unwrap_err().to_string();
        assert_eq!(
            shown,
            "test_data/suites/bad/bad-errno.yaml:7:19: bad expect: `EWHAT` is not `ok`, a number or an errno name\n  \
             |\n7 |           expect: EWHAT\n  |                   ^"
        );
        // Tabs before the column stay tabs under it; files and whole-file errors have no snippet.
        let d = Diagnostic::at("f.yaml", "a:\n\tb: [x\n", 2, 3, "m");
        assert_eq!(d.to_string(), "f.yaml:2:3: m\n  |\n2 | \tb: [x\n  | \t ^");
        assert_eq!(Diagnostic::whole_file("f.yaml", "gone").to_string(), "f.yaml: gone");
        let empty = parse("empty.yaml", "").unwrap_err();
        assert_eq!(empty.0[0].headline(), "empty.yaml:1:1: unexpected end of file");
    }

    #[test]
    fn the_good_suite_parses_into_the_model() {
        let (name, text) = fixture("good/registration.yaml");
        let suite = parse(&name, &text).unwrap();
        assert_eq!(suite.suite, "registration");
        assert_eq!(suite.defaults.deadline_ms, Some(3000));
        let names: Vec<&str> = suite.scenarios.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["reg-basic", "reg-bad-size", "perf-only", "new-kernels-only"]);
        let basic = &suite.scenarios[0];
        assert_eq!(
            (basic.covers.as_slice(), basic.upstream.as_slice()),
            (&["A1".to_string(), "A15".into()][..], &["abi_test.c:enablement".to_string()][..])
        );
        let Step::Write(Write { index, fields, fd, .. }) = &basic.steps[2] else { panic!("{:?}", basic.steps[2]) };
        assert_eq!((index.as_deref(), fd.as_str()), (Some("i"), "data"));
        assert_eq!(fields, &[Value::U32(7), Value::Bytes("de ad".into())]);
        let Step::Delete(Delete { expect, .. }) = &basic.steps[3] else { panic!() };
        assert_eq!(*expect, protocol::Expect::Errno(16));
        let perf = &suite.scenarios[2];
        assert_eq!(perf.requires.kernel.as_deref(), Some(">=6.4, <6.13"));
        assert_eq!(perf.requires.config, ["CONFIG_USER_EVENTS", "CONFIG_PERF_EVENTS"]);
    }

    #[test]
    fn expected_records_read_numbers_text_self_and_bytes() {
        use protocol::FieldValue::{Bytes, Signed, Text, Unsigned};
        let text = "suite: t\nscenarios:\n  - name: a\n    steps:\n      - trace_read: { event: user_events/x, \
                    records: [{ common_pid: self, a: 0xffffffffffffffff, b: -5, s: \"hi\", v: { bytes: \"0a\" } }] }\n";
        let suite = parse("t.yaml", text).unwrap();
        let Step::TraceRead(TraceRead { records, instance: None, .. }) = &suite.scenarios[0].steps[0] else { panic!() };
        let want: protocol::Record = [
            ("common_pid", Text("self".into())),
            ("a", Unsigned(u64::MAX)),
            ("b", Signed(-5)),
            ("s", Text("hi".into())),
            ("v", Bytes { bytes: "0a".into() }),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        assert_eq!(records.as_deref(), Some(&[want][..]));
        // The plan carries them through JSON unchanged.
        let json = serde_json::to_string(&suite.scenarios[0].steps).unwrap();
        assert_eq!(serde_json::from_str::<Vec<Step>>(&json).unwrap(), suite.scenarios[0].steps);
    }

    fn config(entries: &[(&str, &str)]) -> BTreeMap<String, String> {
        entries.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn compile_plans_names_deadlines_and_skips() {
        let (name, text) = fixture("good/registration.yaml");
        let mut suite = parse(&name, &text).unwrap();
        let cfg = config(&[("CONFIG_USER_EVENTS", "y"), ("CONFIG_PERF_EVENTS", "y")]);
        let facts = KernelFacts { release: "6.12.117", config: &cfg };
        let c = compile(std::slice::from_ref(&suite), &facts, "x86_64");
        assert_eq!(c.plan.label, "x86_64");
        assert_eq!(c.plan.version, protocol::PROTOCOL_VERSION);
        let planned: Vec<(&str, u64)> = c.plan.scenarios.iter().map(|s| (s.name.as_str(), s.deadline_ms)).collect();
        assert_eq!(
            planned,
            [("registration/reg-basic", 3000), ("registration/reg-bad-size", 500), ("registration/perf-only", 3000)]
        );
        assert_eq!(c.plan.scenarios[0].steps, suite.scenarios[0].steps);
        assert_eq!(
            c.skipped,
            [Skipped {
                name: "registration/new-kernels-only".into(),
                reason: "needs kernel >=6.13, this is 6.12.117".into()
            }]
        );
        assert_eq!(
            c.marks.xfail,
            BTreeMap::from([(
                "registration/reg-bad-size".to_string(),
                "6.12.117 returns E2BIG here, the catalogue says EINVAL".to_string()
            )])
        );

        // Without the suite's default, the built-in one; a skipped xfail scenario is not in the map.
        suite.defaults.deadline_ms = None;
        let cfg = config(&[]);
        let c = compile(&[suite], &KernelFacts { release: "6.1.0", config: &cfg }, "arm64");
        let planned: Vec<(&str, u64)> = c.plan.scenarios.iter().map(|s| (s.name.as_str(), s.deadline_ms)).collect();
        assert_eq!(planned, [("registration/reg-basic", DEFAULT_DEADLINE_MS), ("registration/reg-bad-size", 500)]);
        assert_eq!(c.skipped.len(), 2);
        assert_eq!(c.skipped[0].reason, "needs kernel >=6.4, <6.13, this is 6.1.0; needs CONFIG_USER_EVENTS (y or m), the kernel has it absent; needs CONFIG_PERF_EVENTS (y or m), the kernel has it absent");
        assert_eq!(c.marks.xfail.len(), 1);
    }

    /// A scenario running a guest client that an arch has no build of is skipped there with
    /// the arch row's reason, besides any unmet `requires`; other arches plan it.
    #[test]
    fn a_client_without_a_build_for_the_arch_skips_its_scenarios() {
        let text = "suite: clients\ndescription: d\nscenarios:\n  - name: compat\n    requires: { config: [CONFIG_COMPAT] }\n    steps:\n      - exec: { argv: [/bin/ue-compat32, reg32=ENOTTY], expect_exit: 0 }\n  - name: native\n    steps:\n      - exec: { argv: [/bin/ue-tracepoint, lifecycle], expect_exit: 0 }\n";
        let suite = parse("clients.yaml", text).unwrap();
        let cfg = config(&[("CONFIG_COMPAT", "y")]);
        let facts = KernelFacts { release: "6.12.117", config: &cfg };
        for arch in ["x86_64", "arm64"] {
            let c = compile(std::slice::from_ref(&suite), &facts, arch);
            assert_eq!((c.plan.scenarios.len(), c.skipped.len()), (2, 0), "{arch}");
        }
        let c = compile(std::slice::from_ref(&suite), &facts, "s390x");
        let planned: Vec<&str> = c.plan.scenarios.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(planned, ["clients/native"]);
        let why = crate::arch::select("s390x").unwrap()[0].compat32_target.as_ref().unwrap_err();
        assert_eq!(
            c.skipped,
            [Skipped {
                name: "clients/compat".into(),
                reason: format!("runs /bin/ue-compat32, which has no build for s390x: {why}")
            }]
        );
        let none = config(&[]);
        let c = compile(&[suite], &KernelFacts { release: "6.12.117", config: &none }, "riscv64");
        assert!(c.skipped[0].reason.starts_with("needs CONFIG_COMPAT (y or m), the kernel has it absent; runs /bin/ue-compat32, which has no build for riscv64: "), "{}", c.skipped[0].reason);
    }

    /// The suite's `defaults.requires` holds for every scenario, on top of each one's own:
    /// the suite's reasons come first; a bad entry there is an error at its place.
    #[test]
    fn a_suite_wide_requires_applies_to_every_scenario() {
        let text = "suite: s\ndescription: d\ndefaults: { requires: { kernel: \">=6.12\", config: [CONFIG_FAILSLAB] } }\nscenarios:\n  - name: plain\n    steps:\n      - sleep: { ms: 1 }\n  - name: own\n    requires: { config: [CONFIG_KASAN] }\n    steps:\n      - sleep: { ms: 1 }\n";
        let suite = parse("s.yaml", text).unwrap();
        let both = config(&[("CONFIG_FAILSLAB", "y"), ("CONFIG_KASAN", "y")]);
        let c = compile(std::slice::from_ref(&suite), &KernelFacts { release: "6.12.117", config: &both }, "x86_64");
        assert_eq!((c.plan.scenarios.len(), c.skipped.len()), (2, 0));
        let failslab = config(&[("CONFIG_FAILSLAB", "y")]);
        let c =
            compile(std::slice::from_ref(&suite), &KernelFacts { release: "6.12.117", config: &failslab }, "x86_64");
        let planned: Vec<&str> = c.plan.scenarios.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(planned, ["s/plain"]);
        let none = config(&[]);
        let c = compile(&[suite], &KernelFacts { release: "6.1.0", config: &none }, "x86_64");
        assert_eq!(c.plan.scenarios.len(), 0);
        assert_eq!(c.skipped[1].reason, "needs kernel >=6.12, this is 6.1.0; needs CONFIG_FAILSLAB (y or m), the kernel has it absent; needs CONFIG_KASAN (y or m), the kernel has it absent");
        let bad = "suite: s\ndescription: d\ndefaults: { requires: { kernel: \"6.12\", config: [FAILSLAB] } }\nscenarios:\n  - name: plain\n    steps:\n      - sleep: { ms: 1 }\n";
        let errors = parse("s.yaml", bad).unwrap_err().to_string();
        assert!(
            errors.contains("s.yaml:3:33: bad kernel range")
                && errors.contains("s.yaml:3:50: `FAILSLAB` is not a Kconfig option"),
            "{errors}"
        );
    }

    /// A `requires` step, at any depth, is decided per kernel: met, its steps stay; unmet, the
    /// step keeps why and none of its steps. Bad input is placed at its field.
    #[test]
    fn a_requires_step_is_decided_per_kernel() {
        let text = "suite: s\ndescription: d\nscenarios:\n  - name: a\n    steps:\n      - requires: { config: [CONFIG_FAILSLAB], steps: [{ sleep: { ms: 1 } }] }\n      - fork: { name: c, steps: [{ requires: { kernel: \">=6.12\", steps: [{ sleep: { ms: 2 } }] } }] }\n";
        let suite = parse("s.yaml", text).unwrap();
        let decided = |release: &str, cfg: &[(&str, &str)]| -> Vec<Step> {
            let cfg = config(cfg);
            let c = compile(std::slice::from_ref(&suite), &KernelFacts { release, config: &cfg }, "x86_64");
            c.plan.scenarios[0].steps.clone()
        };
        let met = decided("6.12.117", &[("CONFIG_FAILSLAB", "y")]);
        assert_eq!(met, suite.scenarios[0].steps, "a kernel that meets both keeps every step");
        let unmet = decided("6.1.0", &[]);
        let Step::Requires(r) = &unmet[0] else { panic!("{unmet:?}") };
        assert_eq!(
            (r.unmet.as_deref(), r.steps.len()),
            (Some("needs CONFIG_FAILSLAB (y or m), the kernel has it absent"), 0)
        );
        let Step::Fork(f) = &unmet[1] else { panic!() };
        let Step::Requires(r) = &f.steps[0] else { panic!() };
        assert_eq!((r.unmet.as_deref(), r.steps.len()), (Some("needs kernel >=6.12, this is 6.1.0"), 0));
        let bad = "suite: s\ndescription: d\nscenarios:\n  - name: a\n    steps:\n      - requires: { config: [FAILSLAB], steps: [{ sleep: { ms: 1 } }] }\n      - requires: { steps: [], unmet: x }\n";
        let errors: Vec<String> = parse("s.yaml", bad).unwrap_err().0.iter().map(Diagnostic::headline).collect();
        assert_eq!(
            errors,
            [
                "s.yaml:6:30: `FAILSLAB` is not a Kconfig option: write CONFIG_NAME or CONFIG_NAME=value",
                "s.yaml:7:19: a `requires` step needs a `kernel` range or `config` options",
                "s.yaml:7:28: a `requires` step needs at least one step",
                "s.yaml:7:39: `unmet` is the host's: why a kernel does not meet the step",
            ]
        );
    }

    #[test]
    fn two_files_may_not_hold_one_suite() {
        let dir = tempfile::tempdir().unwrap();
        let (_, text) = fixture("good/registration.yaml");
        let mut paths = Vec::new();
        for sub in ["a", "b"] {
            std::fs::create_dir(dir.path().join(sub)).unwrap();
            let p = dir.path().join(sub).join("registration.yaml");
            std::fs::write(&p, &text).unwrap();
            paths.push(p);
        }
        let e = load_all(&paths).unwrap_err();
        assert_eq!(e.0.len(), 1);
        assert!(e.0[0].message.starts_with("suite `registration` is also in "), "{e}");
        assert_eq!(load_all(&paths[..1]).unwrap().len(), 1);
        let missing = load_all(&[dir.path().join("none.yaml")]).unwrap_err();
        assert!(missing.0[0].message.contains("No such file"), "{missing}");
    }

    /// Tidy: every suite in the checkout validates (none at all is fine).
    #[test]
    fn repository_suites_validate() {
        let files = files_in(&crate::support::checkout::project_root().join("suites")).unwrap();
        if let Err(e) = load_all(&files) {
            panic!("{e}");
        }
        assert!(files_in(Path::new("/no/such/dir")).unwrap().is_empty());
    }
}
