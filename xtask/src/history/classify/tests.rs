//! The classifier's rules, one history per class.

use super::*;

fn kernel(release: &str) -> KernelId {
    KernelId {
        release: release.into(),
        source: "src".into(),
        source_id: format!("id-{release}"),
        patches: String::new(),
        config_hash: "cfg".into(),
        profile: "default".into(),
    }
}

/// Outcomes of runs `r1`, `r2`, ... in order: each run a list of (scenario, arch, release, status).
fn history(runs: &[&[(&str, &str, &str, &str)]]) -> Vec<Outcome> {
    let mut out = Vec::new();
    for (n, run) in runs.iter().enumerate() {
        for (scenario, arch, release, status) in *run {
            out.push(Outcome {
                run_id: format!("r{}", n + 1),
                host: "h".into(),
                started_at: format!("2026-01-01T00:00:{:02}Z", n + 1),
                scenario: (*scenario).into(),
                arch: (*arch).into(),
                kernel: kernel(release),
                build_key: None,
                status: (*status).into(),
                duration_ms: Some(10),
                reason: None,
            });
        }
    }
    out
}

/// The class of `scenario` on x86_64 6.12 in the last run, from its statuses in order.
fn class(statuses: &[&str]) -> Class {
    let runs: Vec<Vec<(&str, &str, &str, &str)>> =
        statuses.iter().map(|s| vec![("a/b", "x86_64", "6.12", *s)]).collect();
    let refs: Vec<&[(&str, &str, &str, &str)]> = runs.iter().map(Vec::as_slice).collect();
    let out = classify(&history(&refs), &format!("r{}", statuses.len()), "h", 10);
    assert_eq!(out.len(), 1, "{out:?}");
    out[0].class
}

#[test]
fn each_class_from_its_history() {
    assert_eq!(class(&["pass"]), Class::New);
    assert_eq!(class(&["skip", "fail"]), Class::New, "no verdict before");
    assert_eq!(class(&["pass", "pass", "fail"]), Class::Regression);
    assert_eq!(class(&["pass", "xpass"]), Class::Regression, "xpass is a failure");
    assert_eq!(class(&["pass", "skip", "error"]), Class::Regression, "a skip is passed over");
    assert_eq!(class(&["fail", "fail", "pass"]), Class::Fixed);
    assert_eq!(class(&["pass", "fail", "pass"]), Class::Fixed, "one regression, fixed now");
    assert_eq!(class(&["fail", "pass", "fail"]), Class::Unstable);
    assert_eq!(class(&["pass", "fail", "pass", "fail"]), Class::Unstable, "flips both ways: not a regression");
    assert_eq!(class(&["pass", "fail", "pass", "pass"]), Class::Unstable);
    assert_eq!(class(&["fail", "not-run"]), Class::PersistentFailure);
    assert_eq!(class(&["pass", "xfail"]), Class::Stable);
    assert_eq!(class(&["pass", "skip"]), Class::Skipped);
    assert_eq!(class(&["pass", "collateral"]), Class::Skipped);
}

#[test]
fn the_window_forgets_old_flips() {
    let mut statuses = vec!["pass", "fail", "pass"];
    statuses.extend(["pass"; 10]);
    statuses.push("fail");
    assert_eq!(class(&statuses), Class::Regression, "the old flips are out of a 10-outcome window");
}

#[test]
fn missing_cells_and_other_kernels() {
    let h = history(&[
        &[("a/b", "x86_64", "6.12", "pass"), ("a/c", "x86_64", "6.12", "pass"), ("a/d", "arm64", "6.12", "fail")],
        &[("a/b", "x86_64", "6.12", "fail"), ("a/b", "x86_64", "7.3", "pass")],
    ]);
    let out = classify(&h, "r2", "h", 10);
    let got: Vec<(&str, &str, &str, Class)> =
        out.iter().map(|c| (c.scenario.as_str(), c.arch.as_str(), c.kernel.release.as_str(), c.class)).collect();
    // a/d ran on arm64, which this run did not boot: not missing.
    assert_eq!(
        got,
        [
            ("a/b", "x86_64", "6.12", Class::Regression),
            ("a/b", "x86_64", "7.3", Class::New),
            ("a/c", "x86_64", "6.12", Class::Missing)
        ]
    );
    assert_eq!(out[0].window, ["pass", "fail"]);
    assert_eq!(out[2].status, None);
}

#[test]
fn an_older_run_is_classed_against_what_came_before_it() {
    let h = history(&[
        &[("a/b", "x86_64", "6.12", "pass")],
        &[("a/b", "x86_64", "6.12", "fail")],
        &[("a/b", "x86_64", "6.12", "fail")],
    ]);
    assert_eq!(classify(&h, "r2", "h", 10)[0].class, Class::Regression);
    assert_eq!(classify(&h, "r3", "h", 10)[0].class, Class::PersistentFailure);
    assert!(classify(&h, "nope", "h", 10).is_empty());
}

#[test]
fn flakes_count_flips_per_scenario_most_first() {
    let h = history(&[
        &[("a/b", "x86_64", "6.12", "pass"), ("a/c", "x86_64", "6.12", "pass"), ("a/c", "arm64", "6.12", "pass")],
        &[("a/b", "x86_64", "6.12", "fail"), ("a/c", "x86_64", "6.12", "fail"), ("a/c", "arm64", "6.12", "fail")],
        &[("a/b", "x86_64", "6.12", "fail"), ("a/c", "x86_64", "6.12", "pass"), ("a/c", "arm64", "6.12", "skip")],
        &[("a/d", "x86_64", "6.12", "pass")],
    ]);
    let f = flakes(&h);
    assert_eq!(f.iter().map(|x| (x.scenario.as_str(), x.flips)).collect::<Vec<_>>(), [("a/c", 3), ("a/b", 1)]);
    let c = &f[0].cells;
    assert_eq!((c[0].arch.as_str(), c[0].flips, c[0].runs, c[0].failed), ("x86_64", 2, 3, 1));
    assert_eq!((c[1].arch.as_str(), c[1].flips, c[1].runs), ("arm64", 1, 2), "the skip has no verdict");
}

/// A kernel of the 6.12 line with patches `patches` (a mutant, its fix).
fn patched(patches: &str) -> KernelId {
    KernelId { patches: patches.into(), ..kernel("6.12.117") }
}

#[test]
fn a_line_of_kernels_two_runs_then_a_mutant_then_the_fix() {
    let run = |n: usize, kernel: &KernelId, status: &str| Outcome {
        run_id: format!("r{n}"),
        host: "h".into(),
        started_at: format!("2026-01-01T00:00:{n:02}Z"),
        scenario: "a/b".into(),
        arch: "x86_64".into(),
        kernel: kernel.clone(),
        build_key: None,
        status: status.into(),
        duration_ms: Some(10),
        reason: None,
    };
    let (pristine, mutant, fix) = (kernel("6.12.117"), patched("m"), patched("f"));
    let h = vec![
        run(1, &pristine, "pass"),
        run(2, &pristine, "pass"),
        run(3, &mutant, "fail"),
        run(4, &fix, "pass"),
        run(5, &fix, "pass"),
        run(6, &mutant, "fail"),
    ];
    let classes: Vec<Class> = (1..=6).map(|n| classify(&h, &format!("r{n}"), "h", 10)[0].class).collect();
    assert_eq!(
        classes,
        [Class::New, Class::Stable, Class::Regression, Class::Fixed, Class::Stable, Class::Regression],
        "flips between kernels of a line are changes, not noise"
    );
    let c = &classify(&h, "r6", "h", 10)[0];
    assert_eq!(c.window, ["pass", "pass", "fail", "pass", "pass", "fail"], "the line's outcomes");
    assert_eq!(c.same_kernel, [true, true], "the mutant's own two");
    // Flips of one kernel are noise: the mutant passing between its failures is unstable.
    let noisy =
        vec![run(1, &pristine, "pass"), run(2, &mutant, "fail"), run(3, &mutant, "pass"), run(4, &mutant, "fail")];
    let c = &classify(&noisy, "r4", "h", 10)[0];
    assert_eq!((c.class, &c.same_kernel), (Class::Unstable, &vec![true, false, true]));
}

#[test]
fn a_kernels_line_is_its_series_and_profile() {
    let line = |release: &str, profile: &str| line_of(&KernelId { profile: profile.into(), ..kernel(release) });
    assert_eq!(line("6.12.117", "default"), ("6.12".to_string(), "default".to_string()));
    assert_eq!(line("6.13.0-rc1+", "debug"), ("6.13".to_string(), "debug".to_string()));
    assert_eq!(line("unknown", "unknown"), ("unknown".to_string(), "unknown".to_string()));
    assert_ne!(line("6.12.117", "default"), line("6.12.117", "default+mutant=3"), "a campaign's mutant");
}
