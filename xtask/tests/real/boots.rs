//! The real boots of `cargo xtask test` on every arch: an empty plan and its sentinel, fault
//! injection, every suite, the hygiene between scenarios, the enable bit's branches, `exec`
//! and shares, then the checks of the other modules that boot (the atlas, the history's two runs and its re-run of failures that flip, debug profile, coverage, the
//! sandbox, signals, broken kernels, mutants, bisect) in the order they run.

use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result};
use protocol::steps::{Exec, Lkdtm, Sleep, WriteFile};
use protocol::Step;

use xtask::cli::{KernelArgs, TestArgs, VmArgs};
use xtask::judging::verdict::Status;
use xtask::support::cmd::{cmd, sh, stdout};

use crate::*;

/// Real boots on every arch: the empty plan, fault injection, a missing QEMU and Ctrl-C.
#[allow(clippy::too_many_lines)] // test code: the checks in the order they run
pub(crate) fn boot_checks(args: &TestArgs, base: &KernelArgs, outcomes: &mut Vec<Outcome>) -> Result<()> {
    let results = tempfile::Builder::new().prefix("xtask-test-results-").tempdir()?;
    let vm = test_vm(results.path());
    let opts = xtask::run::boot::Options::of(&vm, args.cache_dir.as_deref())?;
    for arch in xtask::arch::ARCHES {
        let kargs = KernelArgs { arch: arch.name.into(), ..base.clone() };
        let built = crate::kernels(&kargs)?;
        let boot = |plan: &protocol::Plan| xtask::run::boot::run_plan_on(&built, plan, &[], &opts);

        let started = Instant::now();
        let result = boot(&protocol::Plan::empty("empty")).and_then(|j| {
            let j = &j[0];
            let stream = xtask::judging::channel::read(&std::fs::read_to_string(
                j.boot.folder.file(xtask::judging::run_folder::RESULTS_LOG),
            )?);
            anyhow::ensure!(j.result().verdict.as_str() == "pass", "verdict {:?}", j.result().verdict);
            let sentinel = stream.sentinel.context("no sentinel on the result channel")?;
            anyhow::ensure!(sentinel.total == 0, "sentinel {sentinel:?}");
            Ok(())
        });
        record(outcomes, &format!("{}: an empty plan boots and the sentinel arrives", arch.name), started, result);

        let started = Instant::now();
        let mut plan = protocol::Plan::empty("faults");
        plan.scenarios = vec![
            as_user::scenario("fault/ok-before", 5_000, vec![Step::Sleep(Sleep { ms: 1 })]),
            as_user::scenario("fault/warn", 5_000, vec![Step::Lkdtm(Lkdtm { point: "WARNING".into() })]),
            as_user::scenario("fault/hang", 3_000, vec![Step::Sleep(Sleep { ms: 600_000 })]),
            as_user::scenario("fault/ok-after", 5_000, vec![Step::Sleep(Sleep { ms: 1 })]),
            as_user::scenario("fault/panic", 5_000, vec![Step::Lkdtm(Lkdtm { point: "PANIC".into() })]),
            as_user::scenario("fault/never", 5_000, vec![Step::Sleep(Sleep { ms: 1 })]),
        ];
        let result = boot(&plan).and_then(|j| {
            check_faults(j[0].result())?;
            // What the panic left unrun goes to a fresh boot of the same kernel.
            let resume = j.get(1).context("no resume boot after the panic")?;
            let name = resume.outcome.out_dir.file_name().map(|n| n.to_string_lossy().into_owned());
            anyhow::ensure!(name == Some(format!("{}.resume-1", arch.name)), "resume boot named {name:?}");
            let got: Vec<(&str, Status)> =
                resume.result().scenarios.iter().map(|s| (s.name.as_str(), s.status)).collect();
            anyhow::ensure!(got == [("fault/never", Status::Pass)], "resume boot ran {got:?}");
            Ok(())
        });
        record(
            outcomes,
            &format!("{}: WARN attributed, hang times out, panic named, the rest run in a resume boot", arch.name),
            started,
            result,
        );

        let started = Instant::now();
        let mut plan = protocol::Plan::empty("hang");
        plan.scenarios = vec![
            as_user::scenario("hang/sleeps", 2_000, vec![Step::Sleep(Sleep { ms: 600_000 })]),
            as_user::scenario("hang/next", 5_000, vec![Step::Sleep(Sleep { ms: 1 })]),
        ];
        let result = boot(&plan).and_then(|j| {
            let r = j[0].result();
            anyhow::ensure!(r.verdict.as_str() == "timeout", "verdict {:?}", r.verdict);
            let hang = &r.scenarios[0];
            anyhow::ensure!(hang.status == Status::Timeout, "hang/sleeps is {:?}", hang.status);
            let t = hang.time_ms.unwrap_or(0);
            anyhow::ensure!((2_000..4_000).contains(&t), "timed out after {t} ms, deadline 2000 ms");
            anyhow::ensure!(r.scenarios[1].status == Status::Pass, "hang/next is {:?}", r.scenarios[1].status);
            Ok(())
        });
        record(
            outcomes,
            &format!("{}: a hang gives a timeout verdict and the next scenario runs", arch.name),
            started,
            result,
        );
    }

    let started = Instant::now();
    let result = hygiene_check(&vm, base, args);
    record(outcomes, "x86_64: a failing scenario's leftovers are undone and reported against it", started, result);

    let started = Instant::now();
    let result = (|| {
        // The measuring suite too: it must keep working, though it never gates.
        let every = xtask::cli::SelectArgs { bench: true, ..Default::default() };
        let chosen = xtask::run::pipeline::choose(&every, results.path())?;
        let count: usize = chosen.suites.iter().map(|s| s.scenarios.len()).sum();
        anyhow::ensure!(count > 0, "suites/ holds no scenario");
        let built = crate::kernels(&KernelArgs { arch: "all".into(), ..base.clone() })?;
        let judged = xtask::run::pipeline::run(
            &chosen,
            &built,
            &xtask::run::boot::Options::of(&vm, args.cache_dir.as_deref())?,
        )?;
        let run = xtask::run::pipeline::publish(&judged, &built)?;
        let code = xtask::run::boot::exit_code(&judged);
        // Named here, since a CI log may keep only its tail.
        let failed: Vec<String> = run
            .iter()
            .flat_map(|r| &r.arches)
            .flat_map(|a| a.scenarios.iter().map(move |s| (a, s)))
            .filter(|(_, s)| s.status.is_failure())
            .map(|(a, s)| {
                let why = s.failing_step(1).join(" ");
                format!("{}/{}/{} {}: {why}", a.arch, s.suite, s.name, s.status.as_str())
            })
            .collect();
        anyhow::ensure!(
            code == 0,
            "the suites ended with exit code {code}; not passing: {}",
            if failed.is_empty() {
                "no scenario (a boot's own verdict, see above)".to_string()
            } else {
                failed.join("; ")
            }
        );
        Ok(())
    })();
    record(outcomes, "every suite in suites/ passes on every arch", started, result);

    let started = Instant::now();
    let result = atlas::default_and_7_3(results.path(), args.cache_dir.as_deref());
    record(outcomes, ATLAS, started, result);

    let started = Instant::now();
    let result = history::two_runs_then_classes(results.path(), args.cache_dir.as_deref());
    record(outcomes, history::TWO_RUNS, started, result);

    let started = Instant::now();
    let result = history::rerun_flaky_failures(results.path(), args.cache_dir.as_deref());
    record(outcomes, history::RERUN, started, result);

    let started = Instant::now();
    let result = enable_bit_branches(&vm, base, args, results.path());
    record(
        outcomes,
        "s390x, riscv64: enable-bits and registration pass scenario by scenario (xfail ones XFAIL); each bit of a 4-byte word at both alignments is written alone, its neighbours kept",
        started,
        result,
    );

    debug_profile(&opts, base, results.path(), outcomes);
    coverage::checks(&opts, base, results.path(), outcomes);

    let started = Instant::now();
    let result = exec_and_share(&vm, base, args, results.path());
    record(outcomes, "exec returns the binary's status; --share and artifacts cross virtio-fs", started, result);

    let started = Instant::now();
    let result = sandbox::symlink_escapes(results.path(), base, &vm, args.cache_dir.as_deref());
    record(outcomes, SANDBOX, started, result);
    let started = Instant::now();
    let result = sandbox::fallback(results.path());
    record(outcomes, SANDBOX_FALLBACK, started, result);

    let started = Instant::now();
    let result = as_user::missing_qemu(results.path());
    record(outcomes, "a missing QEMU binary fails naming its package", started, result);

    let started = Instant::now();
    let result = as_user::ctrl_c_leaves_nothing(results.path());
    record(outcomes, CTRL_C, started, result);

    let started = Instant::now();
    let result = as_user::sigterm_keeps_the_evidence(results.path());
    record(
        outcomes,
        "SIGTERM mid-boot keeps console.log and the partial KTAP, writes run.json `interrupted`, leaves no process",
        started,
        result,
    );

    let started = Instant::now();
    let result = as_user::hang_to_verdict(results.path());
    record(
        outcomes,
        "x86_64: a deadlocked ioctl (patched kernel) is a timeout with blocked-task evidence within 60 s, \
         the rest passes in a resume boot; --rerun-failed reruns exactly it",
        started,
        result,
    );

    let started = Instant::now();
    let result = broken::leak_and_oops(results.path());
    record(outcomes, LEAK_AND_OOPS, started, result);

    let started = Instant::now();
    let result = broken::breaks_every_boot(results.path());
    record(outcomes, EVERY_BOOT, started, result);

    let started = Instant::now();
    let result = broken::a_fill_that_crawls(results.path());
    record(outcomes, FILL_CRAWLS, started, result);

    let started = Instant::now();
    let result = mutants::fixed_mutants(results.path());
    record(outcomes, MUTANTS, started, result);

    let started = Instant::now();
    let result = git_tree::git_tree_validate_and_bisect(results.path(), args);
    record(outcomes, GIT_TREE, started, result);

    let started = Instant::now();
    let result = git_tree::git_bisect_run_from_the_tree(results.path(), args);
    record(outcomes, BISECT_RUN, started, result);

    let started = Instant::now();
    let result = as_user::filter_list(results.path());
    record(
        outcomes,
        "run --filter 'process/*' --list prints exactly the process scenarios, boots nothing",
        started,
        result,
    );

    let started = Instant::now();
    let result = as_user::never_calls_apt(base);
    record(
        outcomes,
        "with apt and dpkg hidden, as root and as nobody, verbs whose needs are present run and never call them; \
         setup --check names what nobody lacks and exits 129",
        started,
        result,
    );
    Ok(())
}

/// Between-scenario hygiene in a real guest: a scenario registers an event, enables it in
/// ftrace and fails on purpose; the next one needs `Active: 0` in user_events_status. The
/// first must fail with a `cleanup:` line naming the event, the second must pass.
fn hygiene_check(vm: &VmArgs, base: &KernelArgs, args: &TestArgs) -> Result<()> {
    let status = "/sys/kernel/tracing/user_events_status";
    let read = |equals: &str| -> Result<Step> {
        Ok(serde_json::from_value(serde_json::json!({ "read_file": { "path": status, "equals": equals } }))?)
    };
    let mut plan = protocol::Plan::empty("hygiene");
    plan.scenarios = vec![
        as_user::scenario(
            "hygiene/leaves-an-event-enabled",
            10_000,
            vec![
                serde_json::from_value(serde_json::json!({ "register": { "format": "hy_left u32 a", "word": "w" } }))?,
                Step::WriteFile(WriteFile {
                    path: "/sys/kernel/tracing/events/user_events/hy_left/enable".into(),
                    data: "1".into(),
                    bytes: None,
                    create: false,
                    append: false,
                    expect: Default::default(),
                    within_ms: 0,
                }),
                read("hy_left # Used by ftrace\n\nActive: 1\nBusy: 1\n")?,
                // Fails on purpose, with the event still enabled.
                read("deliberately wrong")?,
            ],
        ),
        as_user::scenario("hygiene/needs-active-0", 10_000, vec![read("\nActive: 0\nBusy: 0\n")?]),
    ];
    let built = crate::kernels(&KernelArgs { arch: "x86_64".into(), ..base.clone() })?;
    let judged = xtask::run::boot::run_plan_on(
        &built,
        &plan,
        &[],
        &xtask::run::boot::Options::of(vm, args.cache_dir.as_deref())?,
    )?;
    let r = judged[0].result();
    let got: Vec<(&str, Status)> = r.scenarios.iter().map(|s| (s.name.as_str(), s.status)).collect();
    let want = [("hygiene/leaves-an-event-enabled", Status::Fail), ("hygiene/needs-active-0", Status::Pass)];
    anyhow::ensure!(
        got == want,
        "statuses {got:?}: {:?}",
        r.scenarios.iter().map(|s| &s.diagnostics).collect::<Vec<_>>()
    );
    let first = &r.scenarios[0].diagnostics;
    anyhow::ensure!(
        first.iter().any(|d| d.contains("cleanup: user event hy_left was enabled in ftrace (disabled)")),
        "no cleanup line naming hy_left in {first:?}"
    );
    anyhow::ensure!(!first.iter().any(|d| d.contains("cleanup failed")), "the cleanup failed: {first:?}");
    Ok(())
}

/// The enable-bit and registration suites on the two arches the others cannot stand in for:
/// every planned scenario passes (the only skips are the two `requires` that split A10 by
/// address-space layout), and the register lines of the two every-bit scenarios show, for each
/// bit, the `align_addr_bit` branch that the address, the size and the byte order select: the
/// big-endian ones on s390x, the little-endian ones on riscv64.
fn enable_bit_branches(vm: &VmArgs, base: &KernelArgs, args: &TestArgs, results: &Path) -> Result<()> {
    let root = xtask::support::checkout::project_root();
    let select = xtask::cli::SelectArgs {
        suites: vec![root.join("suites/enable-bits.yaml"), root.join("suites/registration.yaml")],
        ..Default::default()
    };
    let chosen = xtask::run::pipeline::choose(&select, results)?;
    let built = crate::kernels(&KernelArgs { arch: "s390x,riscv64".into(), ..base.clone() })?;
    let judged =
        xtask::run::pipeline::run(&chosen, &built, &xtask::run::boot::Options::of(vm, args.cache_dir.as_deref())?)?;
    let every: Vec<String> =
        chosen.suites.iter().flat_map(|s| s.scenarios.iter().map(move |c| format!("{}/{}", s.suite, c.name))).collect();
    // Scenarios that assert what the code means where the kernel has a known bug: XFAIL.
    let xfail: Vec<String> = chosen
        .suites
        .iter()
        .flat_map(|s| s.scenarios.iter().filter(|c| c.xfail.is_some()).map(move |c| format!("{}/{}", s.suite, c.name)))
        .collect();
    for (arch, skipped, _big) in [
        ("s390x", "registration/kernel-enable-address-is-efault", true),
        ("riscv64", "registration/kernel-half-address-is-enomem-where-user-space-is-separate", false),
    ] {
        let j = judged.iter().find(|j| j.outcome.arch.name == arch).with_context(|| format!("no {arch} boot"))?;
        let r = j.result();
        let counted = j.counted();
        anyhow::ensure!(counted.verdict.as_str() == "pass", "{arch}: verdict {:?}", counted.verdict);
        let ran: Vec<&str> = r.scenarios.iter().map(|s| s.name.as_str()).collect();
        let want: Vec<&str> = every.iter().map(String::as_str).filter(|n| *n != skipped).collect();
        anyhow::ensure!(ran == want, "{arch}: planned {ran:?}, expected {want:?}");
        for (s, mark) in r.scenarios.iter().zip(&counted.marks) {
            // An xfail scenario fails as its mark says (an ordinary failure, forgiven); every
            // other scenario passes.
            let ok = if xfail.contains(&s.name) {
                s.status == Status::Fail && *mark == Some(xtask::judging::verdict::Expected::Xfail)
            } else {
                s.status == Status::Pass
            };
            anyhow::ensure!(ok, "{arch}: {} is {:?} (mark {mark:?}): {:?}", s.name, s.status, s.diagnostics);
        }
        // What the kernel wrote, read back from memory: for each bit N of a 4-byte word at an 8-
        // and at a 4-aligned address, the 8 bytes from the word hold the word with only bit N
        // taken from the all-ones pattern (the forced clear of unregister, or a disable) and the
        // next 4 bytes' a5a5a5a5 untouched: align_addr_bit()'s branch for the byte order picked
        // the right bit of the right long. A kernel that took another branch writes another bit.
        // The 8-aligned word is the value's lower half (a5a5a5a5 after it), the 4-aligned one
        // its upper half (a5a5a5a5 before it).
        let cleared = |aligned8: bool, bit: u32| {
            let word = !(1u32 << bit);
            if aligned8 {
                format!("0xa5a5a5a5{word:08x}")
            } else {
                format!("0x{word:08x}a5a5a5a5")
            }
        };
        for (scenario, aligned8) in [
            ("enable-bits/four-byte-word-8-aligned-every-bit-keeps-its-neighbours", true),
            ("enable-bits/four-byte-word-4-aligned-every-bit-keeps-its-neighbours", false),
        ] {
            let s =
                r.scenarios.iter().find(|s| s.name == scenario).with_context(|| format!("{arch}: no {scenario}"))?;
            for bit in 0..32u32 {
                let value = cleared(aligned8, bit);
                // `check word wN: V (expected V)`, or with the word's layout after its name.
                let read = |d: &String| {
                    (d.contains(&format!("check word w{bit}:")) || d.contains(&format!("check word w{bit} (")))
                        && d.contains(&format!(": {value} (expected {value})"))
                };
                anyhow::ensure!(
                    s.diagnostics.iter().any(read),
                    "{arch}: {scenario} never read w{bit} as {value}: bit {bit} alone cleared, its neighbours kept"
                );
            }
        }
    }
    Ok(())
}

fn check_faults(r: &xtask::judging::verdict::BootResult) -> Result<()> {
    use xtask::judging::console::FindingKind;
    let status: Vec<(&str, Status)> = r.scenarios.iter().map(|s| (s.name.as_str(), s.status)).collect();
    let want = [
        ("fault/ok-before", Status::Pass),
        ("fault/warn", Status::Fail),
        ("fault/hang", Status::Timeout),
        ("fault/ok-after", Status::Pass),
        ("fault/panic", Status::Crashed),
        ("fault/never", Status::NotRun),
    ];
    anyhow::ensure!(status == want, "statuses {status:?}");
    anyhow::ensure!(
        r.verdict == xtask::judging::verdict::BootVerdict::KernelPanic { scenario: Some("fault/panic".into()) },
        "verdict {:?}",
        r.verdict
    );
    let warn = &r.scenarios[1];
    anyhow::ensure!(
        warn.findings.iter().any(|f| f.kind == FindingKind::Warning && f.summary.contains("lkdtm")),
        "no lkdtm WARNING attributed to fault/warn: {:?}",
        warn.findings
    );
    anyhow::ensure!(r.scenarios[0].findings.is_empty() && r.scenarios[3].findings.is_empty(), "findings leaked");
    let hang = r.scenarios[2].time_ms.unwrap_or(0);
    anyhow::ensure!((3_000..5_000).contains(&hang), "fault/hang timed out after {hang} ms, deadline 3000 ms");
    anyhow::ensure!(
        r.scenarios[4].findings.iter().any(|f| f.kind == FindingKind::Panic),
        "the panic is not attributed to fault/panic"
    );
    anyhow::ensure!(!r.scenarios[5].console_tail.is_empty(), "fault/never has no console tail");
    Ok(())
}

/// `exec` on every arch, then one arm64 boot that runs a binary from a shared folder and
/// writes into the share and the artifacts folder.
fn exec_and_share(vm: &VmArgs, base: &KernelArgs, args: &TestArgs, scratch: &Path) -> Result<()> {
    let src = xtask::support::checkout::project_root().join("xtask/test_data/exit7.c");
    for arch in xtask::arch::ARCHES {
        let bin = scratch.join(format!("exit7-{}", arch.name));
        let (sh, cc) = (sh()?, arch.compiler());
        stdout(cmd!(sh, "{cc} -static -O2 -o {bin} {src}"))
            .with_context(|| format!("{cc} building {}", src.display()))?;
        let built = crate::kernels(&KernelArgs { arch: arch.name.into(), ..base.clone() })?;
        let cmd = [bin.display().to_string(), "one".into(), "two words".into()];
        let code = xtask::run::boot::exec(
            &built[0],
            &cmd,
            60,
            &xtask::run::boot::Options::of(vm, args.cache_dir.as_deref())?,
        )?;
        anyhow::ensure!(code == 7, "{}: exec returned {code}, expected 7", arch.name);
    }
    let share = tempfile::tempdir_in(scratch)?;
    std::fs::copy(scratch.join("exit7-arm64"), share.path().join("exit7"))?;
    let mut plan = protocol::Plan::empty("share");
    plan.scenarios = vec![as_user::scenario(
        "share/roundtrip",
        20_000,
        vec![
            Step::Exec(Exec { argv: vec!["/mnt/host/exit7".into(), "x".into()], expect_exit: 7 }),
            Step::WriteFile(WriteFile {
                path: "/mnt/host/from-guest.txt".into(),
                data: "written in the guest\n".into(),
                bytes: None,
                create: true,
                append: false,
                expect: Default::default(),
                within_ms: 0,
            }),
            Step::WriteFile(WriteFile {
                path: format!("{}/raw.dat", protocol::ARTIFACTS_DIR),
                data: "artifact bytes".into(),
                bytes: None,
                create: true,
                append: false,
                expect: Default::default(),
                within_ms: 0,
            }),
        ],
    )];
    let vm = VmArgs { share: Some(format!("{}:/mnt/host", share.path().display())), ..vm.clone() };
    let built = crate::kernels(&KernelArgs { arch: "arm64".into(), ..base.clone() })?;
    let judged = xtask::run::boot::run_plan_on(
        &built,
        &plan,
        &[],
        &xtask::run::boot::Options::of(&vm, args.cache_dir.as_deref())?,
    )?;
    let j = &judged[0];
    anyhow::ensure!(
        j.result().verdict.as_str() == "pass",
        "verdict {:?}: {:?}",
        j.result().verdict,
        j.result().scenarios
    );
    let written = std::fs::read_to_string(share.path().join("from-guest.txt"))?;
    anyhow::ensure!(written == "written in the guest\n", "share holds {written:?}");
    let artifact = std::fs::read_to_string(j.outcome.out_dir.join("artifacts/raw.dat"))?;
    anyhow::ensure!(artifact == "artifact bytes", "artifact holds {artifact:?}");
    Ok(())
}

/// The debug profile on `debug::ARCH`: its kernel built with the checkers on, the whole
/// gating plan run and judged on it, then a deliberately racy patch caught by `validate
/// --profile debug` through lockdep.
pub(crate) fn debug_profile(
    opts: &xtask::run::boot::Options,
    base: &KernelArgs,
    scratch: &Path,
    outcomes: &mut Vec<Outcome>,
) {
    let arch = debug::ARCH;
    let started = Instant::now();
    let built = debug::build(base);
    let result = built.as_ref().map(|_| ()).map_err(|e| anyhow::anyhow!("{e:#}"));
    record(
        outcomes,
        &format!(
            "{arch} (debug profile): the kernel builds with KASAN, lockdep, DEBUG_ATOMIC_SLEEP and hung-task detection"
        ),
        started,
        result,
    );
    let Ok(built) = built else { return };

    let started = Instant::now();
    let plain = crate::kernels(&KernelArgs { arch: arch.into(), ..base.clone() });
    let result = plain.and_then(|plain| debug::run_gating_plan(&built, &plain, opts, scratch));
    record(
        outcomes,
        &format!(
            "{arch} (debug profile): every gating scenario runs; K4 shows its KASAN use-after-free, \
             no other scenario or boot has a kernel finding"
        ),
        started,
        result,
    );

    let started = Instant::now();
    let result = as_user::racy_patch_under_debug(scratch, arch);
    record(
        outcomes,
        &format!(
            "{arch} (debug profile): validate --profile debug names exactly the scenarios a patch made racy \
             (event_mutex dropped), through lockdep, and exits 1"
        ),
        started,
        result,
    );
}
