//! JUnit XML (quick-junit): one `<testsuite>` per arch, one `<testcase>` per scenario plus one
//! per boot for its health outside the scenarios. A failed check is a `<failure>`; what kept a
//! check from completing (not run, the kernel crashed, an infrastructure verdict) is an
//! `<error>`; skips and expected failures are `<skipped>`. quick-junit's `XmlString` strips
//! ANSI escapes and control characters from everything, console excerpts included.

use std::time::Duration;

use anyhow::Result;
use quick_junit::{NonSuccessKind, Property, Report, TestCase, TestCaseStatus, TestSuite};

use super::model::{Boot, Finding, Run, Scenario, Status};

pub fn render(run: &Run) -> Result<Vec<u8>> {
    let mut report = Report::new(format!("user_events conformance {}", run.run_id));
    if let Ok(t) = chrono::DateTime::parse_from_rfc3339(&run.generated_at) {
        report.set_timestamp(t);
    }
    let mut wall = 0;
    for arch in &run.arches {
        let mut suite = TestSuite::new(arch.arch.as_str());
        suite.add_property(Property::new("verdict", arch.verdict.kind.as_str()));
        if let Some(k) = &arch.kernel {
            suite.add_property(Property::new("kernel.release", k.release.as_str()));
            suite.add_property(Property::new("kernel.source", k.source.as_str()));
            suite.add_property(Property::new("kernel.config_sha256", k.config_hash.as_str()));
            suite.add_property(Property::new("kernel.compiler", k.compiler.as_str()));
            for p in &k.patches {
                suite.add_property(Property::new("kernel.patch", format!("{} {}", p.name, p.sha256)));
            }
        }
        for b in &arch.boots {
            suite.add_property(Property::new(format!("boot.{}.accel", b.name), b.accel.as_str()));
            if let Some(v) = &b.qemu_version {
                suite.add_property(Property::new(format!("boot.{}.qemu_version", b.name), v.as_str()));
            }
            suite.add_test_case(boot_case(&arch.arch, b));
        }
        for s in &arch.scenarios {
            suite.add_test_case(case(&arch.arch, s));
        }
        let ms: u64 = arch.boots.iter().map(|b| b.wall_ms).sum();
        wall += ms;
        suite.set_time(Duration::from_millis(ms));
        report.add_test_suite(suite);
    }
    report.set_time(Duration::from_millis(wall));
    Ok(report.to_string()?.into_bytes())
}

fn case(arch: &str, s: &Scenario) -> TestCase {
    let non_success = |kind, ty: &str, message: &str| {
        let mut st = TestCaseStatus::non_success(kind);
        st.set_type(ty).set_message(message).set_description(details(s));
        st
    };
    let last = s.log.last().map_or("", String::as_str);
    let reason = s.reason.as_deref().unwrap_or(last);
    let status = match s.status {
        Status::Pass => TestCaseStatus::success(),
        // A known kernel bug's fix is in this kernel: a pass, its reason in the output.
        Status::Fixed => TestCaseStatus::success(),
        Status::Fail if s.judged.as_deref() == Some("timeout") => {
            non_success(NonSuccessKind::Failure, "timeout", "the scenario ran past its deadline")
        }
        Status::Fail => {
            non_success(NonSuccessKind::Failure, "check failed", if reason.is_empty() { "failed" } else { reason })
        }
        Status::Xpass => non_success(NonSuccessKind::Failure, "xpass", reason),
        Status::NotRun => non_success(NonSuccessKind::Error, "not run", reason),
        Status::Error => non_success(NonSuccessKind::Error, "kernel crashed", reason),
        Status::Skip | Status::Xfail | Status::Collateral => {
            let mut st = TestCaseStatus::skipped();
            let word = match s.status {
                Status::Xfail => "expected failure",
                Status::Collateral => "collateral",
                _ => "skipped",
            };
            st.set_type(word).set_message(s.reason.as_deref().unwrap_or(word));
            st
        }
    };
    let mut tc = TestCase::new(s.name.as_str(), status);
    tc.set_classname(format!("{arch}.{}", s.suite));
    if let Some(ms) = s.duration_ms {
        tc.set_time(Duration::from_millis(ms));
    }
    if s.status == Status::Pass && !s.log.is_empty() {
        tc.set_system_out(s.log.join("\n"));
    }
    if let (Status::Fixed, Some(reason)) = (s.status, &s.reason) {
        tc.set_system_out(reason.clone());
    }
    // Figures as properties: `metric.NAME` = `VALUE UNIT`, the samples beside it.
    for (name, m) in &s.metrics {
        tc.add_property(Property::new(format!("metric.{name}"), format!("{} {}", m.value, m.unit)));
        let samples: Vec<String> = m.samples.iter().map(f64::to_string).collect();
        tc.add_property(Property::new(format!("metric.{name}.samples"), samples.join(",")));
    }
    tc
}

/// The scenario's log, its kernel reports and the console tail, as one text.
fn details(s: &Scenario) -> String {
    let mut out = s.log.join("\n");
    for f in &s.findings {
        out.push_str(&format!("\n\n{}", finding_text(f)));
    }
    if !s.console_tail.is_empty() {
        out.push_str("\n\nconsole tail:\n");
        out.push_str(&s.console_tail.join("\n"));
    }
    out
}

/// A kernel report with where it stands in console.log, then its excerpt.
fn finding_text(f: &Finding) -> String {
    format!("kernel {} (console.log line {}):\n{}", f.kind, f.console_line, f.excerpt.join("\n"))
}

/// `boot:<name>`: the boot's health outside the scenarios.
fn boot_case(arch: &str, b: &Boot) -> TestCase {
    let status = match b.health() {
        (Status::Pass, _) => TestCaseStatus::success(),
        (st, why) => {
            let kind = if st == Status::Error { NonSuccessKind::Error } else { NonSuccessKind::Failure };
            let mut s = TestCaseStatus::non_success(kind);
            let mut text = b.problems.join("\n");
            for f in &b.findings {
                text.push_str(&format!("\n{}", finding_text(f)));
            }
            s.set_type(b.verdict.kind.as_str()).set_message(why).set_description(text.trim_start());
            s
        }
    };
    let mut tc = TestCase::new(format!("boot:{}", b.name), status);
    tc.set_classname(format!("{arch}.boot"));
    tc.set_time(Duration::from_millis(b.wall_ms));
    tc.set_system_out(format!("{}\nQEMU {}: {}", b.ended, b.accel, b.qemu_command));
    tc
}

#[cfg(test)]
mod tests {
    use super::super::tests::{check_golden, fixture};
    use super::*;

    #[test]
    fn golden() {
        check_golden("junit.xml", &render(&fixture()).unwrap());
    }

    /// Parsed back by quick-junit's own reader: one suite per arch, failures and errors where
    /// the model says, and no control characters anywhere.
    #[test]
    fn parses_back_with_failures_and_errors_in_place() {
        let run = fixture();
        let xml = String::from_utf8(render(&run).unwrap()).unwrap();
        assert!(!xml.contains('\x1b'), "an ANSI escape survived");
        assert!(!xml.chars().any(|c| c.is_control() && c != '\n' && c != '\t' && c != '\r'));
        let back = Report::deserialize_from_str(&xml).unwrap();
        let names: Vec<&str> = back.test_suites.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["x86_64", "arm64"]);
        for (suite, arch) in back.test_suites.iter().zip(&run.arches) {
            assert_eq!(suite.test_cases.len(), arch.scenarios.len() + arch.boots.len());
            let kind_of = |name: &str| {
                let tc = suite.test_cases.iter().find(|t| t.name.as_str() == name).unwrap();
                match &tc.status {
                    TestCaseStatus::Success { .. } => "success",
                    TestCaseStatus::NonSuccess { kind: NonSuccessKind::Failure, .. } => "failure",
                    TestCaseStatus::NonSuccess { kind: NonSuccessKind::Error, .. } => "error",
                    TestCaseStatus::Skipped { .. } => "skipped",
                }
            };
            for s in &arch.scenarios {
                let want = match s.status {
                    Status::Pass | Status::Fixed => "success",
                    Status::Fail | Status::Xpass => "failure",
                    Status::NotRun | Status::Error => "error",
                    Status::Skip | Status::Xfail | Status::Collateral => "skipped",
                };
                assert_eq!(kind_of(&s.name), want, "{}/{}", arch.arch, s.name);
            }
        }
    }
}
