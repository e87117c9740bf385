//! The Markdown summary (`summary.md`, and `$GITHUB_STEP_SUMMARY` on GitHub Actions): the
//! verdict, a table per arch, what failed with its last log lines, the provenance, and the
//! arch-by-scenario matrix folded away.

use std::fmt::Write;

use super::model::{Run, Status};
use super::text::{cell, clean, number};

/// Log lines shown under each failure.
const SHOWN: usize = 12;

/// The summary: the verdict, then each section in turn.
pub fn render(run: &Run) -> Vec<u8> {
    let mut out = String::new();
    let icon = if run.verdict.kind == "pass" { "✅" } else { "❌" };
    let _ = writeln!(out, "## {icon} user_events conformance: {} (run `{}`)\n", run.verdict.kind, run.run_id);
    let _ = writeln!(out, "{}\n", run.totals.describe());
    patch_coverage(run, &mut out);
    arch_table(run, &mut out);
    coverage(run, &mut out);
    failures(run, &mut out);
    rerun(run, &mut out);
    fixed(run, &mut out);
    metrics(run, &mut out);
    provenance(run, &mut out);
    matrix(run, &mut out);
    out.into_bytes()
}

/// A patch's blind spots first: the lines it adds that no scenario executed.
fn patch_coverage(run: &Run, out: &mut String) {
    if let Some(p) = run.coverage.as_ref().and_then(|c| c.patch.as_ref()) {
        let lines = p.describe();
        let icon = if p.blind_spots.is_empty() { "✅" } else { "⚠️" };
        let _ = writeln!(out, "{icon} **Patch coverage:** {}\n", lines[0]);
        for b in &p.blind_spots {
            let _ = writeln!(out, "- blind spot `{}:{}`: `{}`", b.file, b.line, cell(b.text.trim()));
        }
        if !p.blind_spots.is_empty() {
            out.push('\n');
        }
    }
}

/// A row per arch: its kernel, verdict and counts by status.
fn arch_table(run: &Run, out: &mut String) {
    let _ = writeln!(
        out,
        "| arch | kernel | verdict | passed | failed | skipped | xfail | xpass | fixed | not run | errors |"
    );
    let _ = writeln!(out, "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for a in &run.arches {
        let kernel = a.kernel.as_ref().map_or("unknown".to_string(), |k| k.release.clone());
        let t = &a.totals;
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            a.arch, kernel, a.verdict.kind, t.pass, t.fail, t.skip, t.xfail, t.xpass, t.fixed, t.not_run, t.error
        );
    }
}

/// What the scenarios executed of the instrumented sources, a row per arch.
fn coverage(run: &Run, out: &mut String) {
    if let Some(c) = &run.coverage {
        let _ = writeln!(
            out,
            "\n### Coverage of {}\n",
            c.files.iter().map(|f| format!("`{f}`")).collect::<Vec<_>>().join(", ")
        );
        let _ = writeln!(
            out,
            "| arch | scenarios | lines | line % | branches | branch % | functions | line %, branch % without the boot |"
        );
        let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---:|");
        for r in &c.rows {
            let t = &r.totals;
            let arch = if r.arch == "all" { "all arches".to_string() } else { r.arch.clone() };
            let without =
                r.scenarios_only.map_or("-".to_string(), |w| format!("{:.1}%, {:.1}%", w.line_pct(), w.branch_pct()));
            let _ = writeln!(
                out,
                "| {arch} | {} | {}/{} | {:.1}% | {}/{} | {:.1}% | {}/{} | {without} |",
                r.scenarios,
                t.lines_hit,
                t.lines_found,
                t.line_pct(),
                t.branches_hit,
                t.branches_found,
                t.branch_pct(),
                t.functions_hit,
                t.functions_found
            );
        }
        let _ = writeln!(out, "\nAnnotated sources: `{}`; lcov tracefiles: `coverage/*.info`.", c.index);
    }
}

/// The boots that did not end well, then each failure with its last log lines and the
/// kernel's findings.
/// The failures run again in a fresh boot because their history flips, and what each became.
pub fn rerun(run: &Run, out: &mut String) {
    let Some(r) = &run.rerun else { return };
    let folder = r.run_id.as_deref().map_or("no run folder".to_string(), |id| format!("run `{id}`, beside this one"));
    let _ = writeln!(
        out,
        "\n### Re-run in a fresh boot\n\nThese failures' history flips, so they ran again in a fresh boot of the \
         same kernel ({folder}): one that passed there is unstable and does not gate the run.\n"
    );
    let _ = writeln!(out, "| arch | scenario | history | re-run | class |");
    let _ = writeln!(out, "|---|---|---|---|---|");
    for c in &r.scenarios {
        let class = if c.gates() { format!("**{}**", c.class) } else { c.class.clone() };
        let _ = writeln!(
            out,
            "| {} | `{}` | flips {} time(s) in {} run(s) | {} | {class} |",
            c.arch, c.scenario, c.flips, c.runs, c.rerun_status
        );
    }
}

fn failures(run: &Run, out: &mut String) {
    let failures: Vec<_> = run
        .arches
        .iter()
        .flat_map(|a| a.scenarios.iter().filter(|s| s.status.is_failure()).map(move |s| (a, s)))
        .collect();
    let boots: Vec<_> = run
        .arches
        .iter()
        .flat_map(|a| a.boots.iter())
        .filter_map(|b| match b.health() {
            (Status::Pass, _) => None,
            (s, why) => Some((b, s, why)),
        })
        .collect();
    if !failures.is_empty() || !boots.is_empty() {
        let _ = writeln!(out, "\n### Failures\n");
    }
    for (b, status, why) in &boots {
        let _ = writeln!(out, "- **{}** boot: {} — {}", b.name, status.as_str(), cell(why));
    }
    for (a, s) in &failures {
        let why = s.reason.as_deref().map(|r| format!(" — {}", cell(r))).unwrap_or_default();
        let _ =
            writeln!(out, "- **{}** `{}`: {}{why}", a.arch, s.name, s.judged.as_deref().unwrap_or(s.status.as_str()));
        let mut lines: Vec<String> = s.log.iter().rev().take(SHOWN).rev().map(|l| clean(l)).collect();
        for f in &s.findings {
            lines.push(format!("kernel {}: {}", f.kind, clean(&f.summary)));
        }
        if !lines.is_empty() {
            let _ = writeln!(
                out,
                "\n  ```\n{}\n  ```\n",
                lines.iter().map(|l| format!("  {}", l.replace("```", "'''"))).collect::<Vec<_>>().join("\n")
            );
        }
    }
}

/// The scenarios of known kernel bugs that this kernel fixes.
fn fixed(run: &Run, out: &mut String) {
    let fixed: Vec<_> = run
        .arches
        .iter()
        .flat_map(|a| a.scenarios.iter().filter(|s| s.status == Status::Fixed).map(move |s| (a, s)))
        .collect();
    if !fixed.is_empty() {
        let _ = writeln!(out, "\n### Known kernel bugs this kernel fixes\n");
    }
    for (a, s) in &fixed {
        let _ = writeln!(out, "- **{}** `{}`: {}", a.arch, s.name, cell(s.reason.as_deref().unwrap_or("fixed")));
    }
}

/// Where everything came from: the host, each arch's kernel, each boot's QEMU.
fn provenance(run: &Run, out: &mut String) {
    let _ = writeln!(out, "\n### Provenance\n");
    if let Some(h) = &run.host {
        let _ = writeln!(out, "- host: {}", cell(&h.describe()));
    }
    for a in &run.arches {
        match &a.kernel {
            Some(k) => {
                let patches = if k.patches.is_empty() {
                    "no patches".to_string()
                } else {
                    k.patches.iter().map(|p| format!("`{}`", p.name)).collect::<Vec<_>>().join(", ")
                };
                let _ = writeln!(
                    out,
                    "- {}: {} from {}, {patches}, config sha256 `{}`, {}, fragments {}",
                    a.arch,
                    k.release,
                    cell(&k.source),
                    short(&k.config_hash),
                    cell(&k.compiler),
                    k.fragments.join(" + ")
                );
            }
            None => {
                let _ = writeln!(out, "- {}: kernel metadata not recorded", a.arch);
            }
        }
        for b in &a.boots {
            let qemu = b.qemu_version.as_deref().unwrap_or("QEMU version not recorded");
            let shared = b.virtiofsd_sandbox.as_deref().map(|s| format!(", virtiofsd sandbox {s}")).unwrap_or_default();
            let _ = writeln!(
                out,
                "  - boot `{}`: {}, {}{shared}, {}, VM {:.1} s",
                b.name,
                cell(qemu),
                b.accel,
                b.ended,
                b.wall_ms as f64 / 1000.0
            );
        }
    }
}

/// The arch-by-scenario matrix, folded away, and when the summary was generated.
fn matrix(run: &Run, out: &mut String) {
    let names = run.scenario_names();
    let _ = writeln!(out, "\n<details><summary>All {} scenarios by arch</summary>\n", names.len());
    let header: Vec<&str> = run.arches.iter().map(|a| a.arch.as_str()).collect();
    let _ = writeln!(out, "| scenario | {} |", header.join(" | "));
    let _ = writeln!(out, "|---|{}", "---|".repeat(header.len()));
    for n in names {
        let cells: Vec<&str> = run.arches.iter().map(|a| a.scenario(n).map_or("—", |s| s.status.as_str())).collect();
        let _ = writeln!(out, "| `{n}` | {} |", cells.join(" | "));
    }
    let _ = writeln!(out, "\n</details>\n\n_generated {} from the run's logs_", run.generated_at);
}

/// The measured figures, a row per scenario and figure, a column per arch: the median and the
/// range of its samples. Nothing when no scenario measured anything.
fn metrics(run: &Run, out: &mut String) {
    let mut rows: Vec<(&str, &str, &str)> = vec![];
    for a in &run.arches {
        for s in &a.scenarios {
            for (name, m) in &s.metrics {
                if !rows.contains(&(s.name.as_str(), name.as_str(), m.unit.as_str())) {
                    rows.push((&s.name, name, &m.unit));
                }
            }
        }
    }
    if rows.is_empty() {
        return;
    }
    let arches: Vec<&str> = run.arches.iter().map(|a| a.arch.as_str()).collect();
    let _ = writeln!(
        out,
        "\n### Metrics\n\nMedian (min–max of the repetitions); `.ratio` is the cost against the figure's baseline.\n"
    );
    let _ = writeln!(out, "| scenario | figure | unit | {} |", arches.join(" | "));
    let _ = writeln!(out, "|---|---|---|{}", "---:|".repeat(arches.len()));
    for (scenario, name, unit) in rows {
        let cells: Vec<String> = run
            .arches
            .iter()
            .map(|a| match a.scenario(scenario).and_then(|s| s.metrics.get(name)) {
                None => "—".to_string(),
                Some(m) => {
                    let lo = m.samples.iter().copied().fold(f64::INFINITY, f64::min);
                    let hi = m.samples.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                    if m.samples.is_empty() {
                        number(m.value)
                    } else {
                        format!("{} ({}–{})", number(m.value), number(lo), number(hi))
                    }
                }
            })
            .collect();
        let _ = writeln!(out, "| `{scenario}` | {} | {} | {} |", cell(name), cell(unit), cells.join(" | "));
    }
}

fn short(hash: &str) -> &str {
    hash.get(..12).unwrap_or(hash)
}

#[cfg(test)]
mod tests {
    use super::super::tests::{check_golden, fixture};
    use super::*;

    #[test]
    fn golden() {
        check_golden("summary.md", &render(&fixture()));
    }

    #[test]
    fn a_rerun_round_names_each_failure_its_history_and_class() {
        let mut run = fixture();
        assert!(!String::from_utf8(render(&run)).unwrap().contains("Re-run"), "no re-run, no section");
        let c = |scenario: &str, status: &str, class: &str| super::super::model::Rechecked {
            arch: "x86_64".into(),
            scenario: scenario.into(),
            flips: 2,
            runs: 3,
            rerun_status: status.into(),
            class: class.into(),
        };
        let scenarios = vec![c("a/flaky", "pass", "unstable"), c("a/broken", "fail", "regression")];
        run.rerun = Some(super::super::model::Rerun { run_id: Some("20260101-000000-00001".into()), scenarios });
        let text = String::from_utf8(render(&run)).unwrap();
        assert!(text.contains("### Re-run in a fresh boot") && text.contains("run `20260101-000000-00001`"), "{text}");
        assert!(text.contains("| x86_64 | `a/flaky` | flips 2 time(s) in 3 run(s) | pass | unstable |"), "{text}");
        assert!(
            text.contains("| x86_64 | `a/broken` | flips 2 time(s) in 3 run(s) | fail | **regression** |"),
            "{text}"
        );
        let html = String::from_utf8(super::super::html::render(&run)).unwrap();
        assert!(
            html.contains("<h2>Re-run in a fresh boot</h2>") && html.contains("../20260101-000000-00001/report.html")
        );
        assert!(html.contains(
            "<td><code>a/flaky</code></td><td>flips 2 time(s) in 3 run(s)</td><td>pass</td><td>unstable</td>"
        ));
        let json = String::from_utf8(super::super::json::render(&run).unwrap()).unwrap();
        assert!(json.contains("\"rerun_status\": \"pass\"") && json.contains("\"class\": \"unstable\""), "{json}");
    }

    #[test]
    fn metrics_get_a_table_with_a_column_per_arch() {
        let mut run = fixture();
        assert!(!String::from_utf8(render(&run)).unwrap().contains("### Metrics"), "nothing measured, no table");
        let m = |value, samples: &[f64]| super::super::model::Metric {
            value,
            unit: "events/s".into(),
            higher_is_better: true,
            samples: samples.to_vec(),
        };
        run.arches[0].scenarios[0].metrics.insert("write_0_none".into(), m(125000.4, &[120000.0, 125000.4, 130000.0]));
        let first = run.arches[0].scenarios[0].name.clone();
        let other = run.arches[1].scenarios.iter_mut().find(|s| s.name == first).unwrap();
        other.metrics.insert("write_0_none".into(), m(2.5, &[]));
        let text = String::from_utf8(render(&run)).unwrap();
        let name = &run.arches[0].scenarios[0].name;
        assert!(
            text.contains(&format!("| `{name}` | write_0_none | events/s | 125000 (120000–130000) | 2.50 |")),
            "{text}"
        );
    }

    #[test]
    fn coverage_rows_and_a_patch_s_blind_spots_come_first() {
        use super::super::model::{BlindSpot, CoverageRow, CoverageSummary, CoverageTotals, PatchLines};
        let mut run = fixture();
        let totals = CoverageTotals {
            lines_found: 200,
            lines_hit: 150,
            branches_found: 100,
            branches_hit: 40,
            functions_found: 20,
            functions_hit: 18,
        };
        let row = |arch: &str| CoverageRow {
            arch: arch.into(),
            scenarios: 3,
            totals,
            scenarios_only: Some(CoverageTotals { lines_hit: 120, branches_hit: 30, ..totals }),
            tracefile: format!("coverage/{arch}.info"),
        };
        let blind =
            BlindSpot { file: "kernel/trace/trace_events_user.c".into(), line: 42, text: "\treturn -EPERM;".into() };
        run.coverage = Some(CoverageSummary {
            files: vec!["kernel/trace/trace_events_user.c".into()],
            rows: vec![row("x86_64"), row("all")],
            index: "coverage/index.html".into(),
            problems: vec![],
            patch: Some(PatchLines { changed: 3, executable: 2, executed: 1, blind_spots: vec![blind] }),
        });
        let text = String::from_utf8(render(&run)).unwrap();
        assert!(text.contains("| x86_64 | 3 | 150/200 | 75.0% | 40/100 | 40.0% | 18/20 | 60.0%, 30.0% |"), "{text}");
        assert!(text.contains("| all arches | 3 |"), "{text}");
        let spot = text.find("blind spot `kernel/trace/trace_events_user.c:42`: `return -EPERM;`").expect("listed");
        assert!(spot < text.find("| arch | kernel |").unwrap(), "before everything else: {text}");
        assert_eq!(run.blind_spots().len(), 1);
        let html = String::from_utf8(super::super::html::render(&run)).unwrap();
        let at = html.find("href=\"coverage/index.html#kernel/trace/trace_events_user.c:42\"").expect("linked");
        assert!(at < html.find("No failure").or_else(|| html.find("Failures")).unwrap(), "first in the page");
        assert!(html.contains("<a href=\"coverage/index.html\">the annotated sources</a>"));
        assert!(html.contains("<td>120/200 (60.0%), 30/100 (30.0%)</td>"), "the figures without the boot");
    }
}
