//! KTAP v1 per arch, shaped as the kernel's own `tools/testing/kunit/kunit.py parse` expects:
//! one subtest per suite (and one `boot` subtest with a case per boot), a case per scenario.
//! Directives are spelled as kselftest's `ksft_test_result_skip`, `_xfail` and `_xpass` print
//! them: `ok N name # SKIP why`, `ok N name # XFAIL why`, `ok N name # XPASS why` (an unexpected
//! pass and a `fixed` one alike). As kselftest's exit code does, an unexpected pass still fails:
//! its suite's line is `not ok`.
//! Diagnostics go before each result line as `# ` lines, cleaned of control characters.

use std::fmt::Write;

use super::model::{Run, Status};
use super::text::clean;

/// One arch's KTAP; an arch the run does not have gives an empty plan.
pub fn render(run: &Run, arch: &str) -> Vec<u8> {
    let mut out = String::from("KTAP version 1\n");
    let Some(a) = run.arch(arch) else {
        out.push_str("1..0\n");
        return out.into_bytes();
    };
    let _ = writeln!(out, "# user_events conformance, run {}, arch {arch}", run.run_id);
    if let Some(k) = &a.kernel {
        let _ = writeln!(out, "# kernel {} ({}), config sha256 {}", k.release, clean(&k.source), k.config_hash);
    }
    let mut suites: Vec<&str> = Vec::new();
    for s in &a.scenarios {
        if !suites.contains(&s.suite.as_str()) {
            suites.push(&s.suite);
        }
    }
    let _ = writeln!(out, "1..{}", suites.len() + 1);

    // The boots' health first: a boot that failed explains everything after it.
    let _ = writeln!(out, "    KTAP version 1\n    # Subtest: boot\n    1..{}", a.boots.len());
    let mut boot_ok = true;
    for (i, b) in a.boots.iter().enumerate() {
        let (status, why) = b.health();
        let _ = writeln!(out, "    # {}", clean(&why).replace('\n', " "));
        let ok = status == Status::Pass;
        boot_ok &= ok;
        let _ = writeln!(out, "    {} {} {}", if ok { "ok" } else { "not ok" }, i + 1, name(&b.name));
    }
    let _ = writeln!(out, "{} 1 boot", if boot_ok { "ok" } else { "not ok" });

    for (n, suite) in suites.iter().enumerate() {
        let cases: Vec<_> = a.scenarios.iter().filter(|s| s.suite == *suite).collect();
        let _ = writeln!(out, "    KTAP version 1\n    # Subtest: {}\n    1..{}", name(suite), cases.len());
        let mut suite_ok = true;
        let mut all_skipped = true;
        for (i, s) in cases.iter().enumerate() {
            if s.status != Status::Pass {
                for l in s.log.iter().chain(&s.console_tail) {
                    let _ = writeln!(out, "    # {}", clean(l).replace('\n', " "));
                }
                for f in &s.findings {
                    let _ = writeln!(out, "    # kernel {}: {}", f.kind, clean(&f.summary));
                }
            }
            let reason = s.reason.as_deref().map(|r| clean(r).replace('\n', " ")).unwrap_or_default();
            let short = s.name.split_once('/').map_or(s.name.as_str(), |(_, n)| n);
            let time = s.duration_ms.map_or(String::new(), |t| format!(" time_ms={t}"));
            let (ok, directive) = match s.status {
                Status::Pass => (true, String::new()),
                Status::Skip => (true, format!(" # SKIP {reason}")),
                Status::Xfail => (true, format!(" # XFAIL {reason}")),
                Status::Xpass | Status::Fixed => (true, format!(" # XPASS {reason}")),
                Status::Fail => (false, String::new()),
                Status::NotRun => (false, " # not run".to_string()),
                // Not run because another scenario broke the kernel: a skip, with the culprit.
                Status::Collateral => (true, format!(" # SKIP {reason}")),
                Status::Error => (false, " # error: the kernel crashed".to_string()),
            };
            if s.status != Status::Skip {
                all_skipped = false;
            }
            // An unexpected pass fails the suite (kselftest's exit code), a fixed one does not.
            suite_ok &= ok && s.status != Status::Xpass;
            let directive = if directive.is_empty() && !time.is_empty() { format!(" #{time}") } else { directive };
            let _ = writeln!(
                out,
                "    {} {} {}{}",
                if ok { "ok" } else { "not ok" },
                i + 1,
                name(short),
                directive.trim_end()
            );
        }
        let skip = if all_skipped { " # SKIP every case skipped" } else { "" };
        let _ = writeln!(out, "{} {} {}{skip}", if suite_ok { "ok" } else { "not ok" }, n + 2, name(suite));
    }
    out.into_bytes()
}

/// A test name KTAP can carry: no `#`, no spaces, no control characters.
fn name(n: &str) -> String {
    clean(n).replace(['#', ' '], "_")
}

#[cfg(test)]
mod tests {
    use super::super::tests::{check_golden, fixture};
    use super::*;

    #[test]
    fn golden() {
        let run = fixture();
        check_golden("x86_64.ktap", &render(&run, "x86_64"));
        check_golden("arm64.ktap", &render(&run, "arm64"));
    }

    #[test]
    fn every_scenario_has_one_result_line_with_its_directive() {
        let run = fixture();
        let text = String::from_utf8(render(&run, "arm64")).unwrap();
        assert!(text.contains("    ok 1 needs-compat # SKIP"), "{text}");
        // kselftest's spelling: `ok N ... # XPASS`, `ok N ... # XFAIL`; the unexpected pass fails
        // its suite.
        let xpass = text.lines().position(|l| l.starts_with("    ok ") && l.contains(" # XPASS")).expect(&text);
        let suite_line = text.lines().skip(xpass).find(|l| !l.starts_with(' ')).unwrap();
        assert!(suite_line.starts_with("not ok "), "{text}");
        assert!(!text.lines().any(|l| l.starts_with("    not ok ") && l.contains("# X")), "{text}");
        assert_eq!(String::from_utf8(render(&run, "riscv64")).unwrap(), "KTAP version 1\n1..0\n");
    }
}
