//! The self-contained HTML report (`report.html`): inline CSS, inline SVG plots (`plots`) and
//! one inline script (the filter), nothing fetched. The answer first: each arch's outcomes as a
//! bar; each failure with the check that failed, links to its console and step logs, its log
//! and kernel reports; the skips and expected failures with their reasons in plain view (never
//! counted as passes); then the scenarios grouped by suite (passing suites folded) with a
//! filter, the metrics and the performance figures against their baselines, the boots and the
//! provenance. The page lives in the run folder, so the logs are linked by their relative paths.

mod findings;
mod plots;

use std::collections::BTreeMap;
use std::fmt::Write;

use super::model::{ArchRun, Run, Scenario, Status, Totals};
use super::text::esc;

const STYLE: &str = "body{font:14px/1.4 system-ui,sans-serif;margin:2em;color:#222}\
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:2px 8px;text-align:left}\
th{background:#eee}.pass,.fixed{background:#cfc}.fail,.xpass{background:#f99}.error,.not-run{background:#fc9}\
.skip,.xfail{background:#ffc}.none{color:#999}pre{background:#f6f6f6;padding:.5em;overflow-x:auto;font-size:12px}\
code{font-size:13px}h1 .verdict{padding:0 .3em}details{margin:.3em 0}summary{cursor:pointer}\
pre.check{background:#fdd;border-left:4px solid #d44;font-size:13px}td small{display:block;color:#555}";

/// The scenario filter: inline, so the page stays one self-contained file. A row stays when
/// its text holds the typed words; a suite with a match opens.
const FILTER_SCRIPT: &str = "<script>function filterRows(q){q=q.toLowerCase();\
document.querySelectorAll('details').forEach(function(d){var any=false;\
d.querySelectorAll('tr.row').forEach(function(r){var hit=r.textContent.toLowerCase().indexOf(q)>=0;\
r.style.display=hit?'':'none';any=any||hit;});if(q){d.open=any;}});}</script>\n";

/// The report: each section in turn, in one self-contained page.
pub fn render(run: &Run) -> Vec<u8> {
    let mut o = String::new();
    header(&mut o, run);
    patch_coverage(&mut o, run);
    rerun(&mut o, run);
    failures(&mut o, run);
    excused(&mut o, run);
    scenarios(&mut o, run);
    metrics(&mut o, run);
    coverage(&mut o, run);
    boots(&mut o, run);
    provenance(&mut o, run);
    let _ =
        writeln!(o, "<p><small>generated {} from the run's logs</small></p>\n</body></html>", esc(&run.generated_at));
    o.into_bytes()
}

/// The page's head, the verdict and each arch's outcomes as a bar.
fn header(o: &mut String, run: &Run) {
    let _ = write!(
        o,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>user_events conformance {}</title>\
         <style>{STYLE}</style></head><body>\n",
        esc(&run.run_id)
    );
    let v = if run.verdict.kind == "pass" { "pass" } else { "fail" };
    let _ = writeln!(
        o,
        "<h1>user_events conformance <span class=\"verdict {v}\">{}</span></h1>\n<p>run <code>{}</code>: {}</p>",
        esc(&run.verdict.kind),
        esc(&run.run_id),
        esc(&run.totals.describe())
    );
    o.push_str(&plots::outcomes(run));
    o.push('\n');
}

/// A patch's blind spots before anything else: the lines it adds that no scenario executed.
fn patch_coverage(o: &mut String, run: &Run) {
    if let Some(p) = run.coverage.as_ref().and_then(|c| c.patch.as_ref()) {
        let lines = p.describe();
        let _ = writeln!(o, "<h2>Patch coverage</h2>\n<p>{}</p>", esc(&lines[0]));
        if !p.blind_spots.is_empty() {
            o.push_str("<table><tr><th>blind spot</th><th>source</th></tr>\n");
            let index = run.coverage.as_ref().map_or("", |c| c.index.as_str());
            for b in &p.blind_spots {
                let _ = writeln!(
                    o,
                    "<tr><td><a href=\"{}#{}:{}\">{}:{}</a></td><td><code>{}</code></td></tr>",
                    esc(index),
                    esc(&b.file),
                    b.line,
                    esc(&b.file),
                    b.line,
                    esc(b.text.trim())
                );
            }
            o.push_str("</table>\n");
        }
    }
}

/// The answer first: each failure with its failing step, its log and the kernel's words.
/// The failures run again in a fresh boot because their history flips, and what each became;
/// the re-run's folder linked beside this one's.
fn rerun(o: &mut String, run: &Run) {
    let Some(r) = &run.rerun else { return };
    let folder = r.run_id.as_deref().map_or("no run folder".to_string(), |id| {
        format!("run <a href=\"../{0}/report.html\"><code>{0}</code></a>", esc(id))
    });
    let _ = writeln!(
        o,
        "<h2>Re-run in a fresh boot</h2>\n<p>These failures' history flips, so they ran again in a fresh boot of the \
         same kernel ({folder}): one that passed there is unstable and does not gate the run.</p>\n\
         <table><tr><th>arch</th><th>scenario</th><th>history</th><th>re-run</th><th>class</th></tr>"
    );
    for c in &r.scenarios {
        let _ = writeln!(
            o,
            "<tr><td>{}</td><td><code>{}</code></td><td>flips {} time(s) in {} run(s)</td><td>{}</td><td>{}</td></tr>",
            esc(&c.arch),
            esc(&c.scenario),
            c.flips,
            c.runs,
            esc(&c.rerun_status),
            esc(&c.class)
        );
    }
    o.push_str("</table>\n");
}

fn failures(o: &mut String, run: &Run) {
    let failing: Vec<_> = run
        .arches
        .iter()
        .flat_map(|a| a.scenarios.iter().filter(|s| s.status.is_failure()).map(move |s| (a, s)))
        .collect();
    if failing.is_empty() {
        o.push_str("<p>No failure.</p>\n");
    } else {
        let _ = writeln!(o, "<h2>Failures ({})</h2>", failing.len());
    }
    for (a, s) in failing {
        failure(o, a, s);
    }
}

/// One failure: its heading, reason, the catalogue items it checks, description and note, the
/// failed check, links to its boot's logs, then its log and kernel reports.
fn failure(o: &mut String, a: &ArchRun, s: &Scenario) {
    let _ = writeln!(
        o,
        "<h3 id=\"{}-{}\">{} <code>{}</code>: {}</h3>",
        esc(&a.arch),
        esc(&s.name.replace('/', "-")),
        esc(&a.arch),
        esc(&s.name),
        esc(s.judged.as_deref().unwrap_or(s.status.as_str()))
    );
    if let Some(r) = &s.reason {
        let _ = writeln!(o, "<p>{}</p>", esc(r));
    }
    for (id, summary) in &s.covers {
        let _ = writeln!(o, "<p class=\"covers\">checks <b>{}</b>: {}</p>", esc(id), esc(summary));
    }
    if let Some(d) = &s.description {
        let _ = writeln!(o, "<p class=\"about\">{}</p>", esc(d));
    }
    if let Some(n) = &s.note {
        let _ = writeln!(o, "<p class=\"note\">note: {}</p>", esc(n));
    }
    // The check that failed, got against expected, in the agent's words: the last line of
    // the last step (the agent stops there); the passing lines before it stay in the log.
    let step = s.failing_step(1);
    if let Some(check) = step.first() {
        // A scenario that hung or crashed the kernel ended in a step that never finished.
        let what = if s.status == Status::Error || s.judged.as_deref() == Some("timeout") {
            "the step running when it ended"
        } else {
            "failed check"
        };
        let _ = writeln!(o, "<p class=\"step\">{what}:</p>\n<pre class=\"check\">{}</pre>", esc(check));
    }
    if let Some(b) = a.boots.iter().find(|b| Some(&b.name) == s.boot.as_ref()) {
        let _ = writeln!(
            o,
            "<p class=\"logs\">logs of boot <code>{}</code>: <a href=\"{}\">console log</a> (the kernel's), \
             <a href=\"{}\">step log</a> (every step's line, KTAP)</p>",
            esc(&b.name),
            esc(&b.console_log),
            esc(&b.results_log)
        );
    }
    let mut text: Vec<String> = s.log.clone();
    for f in &s.findings {
        findings::finding_text(&mut text, f);
    }
    if !s.console_tail.is_empty() {
        text.push("--- console tail ---".into());
        text.extend(s.console_tail.iter().cloned());
    }
    // The whole log folded when the failing step already says what went wrong.
    let open = if step.is_empty() { " open" } else { "" };
    if text.is_empty() {
        return;
    }
    let _ = writeln!(
        o,
        "<details{open}><summary>log, kernel reports and console ({} lines)</summary><pre>{}</pre></details>",
        text.len(),
        esc(&text.join("\n"))
    );
}

/// What did not pass and is no failure, with why, where it cannot be missed.
fn excused(o: &mut String, run: &Run) {
    let excused: Vec<_> = run
        .arches
        .iter()
        .flat_map(|a| {
            a.scenarios
                .iter()
                .filter(|s| matches!(s.status, Status::Skip | Status::Xfail | Status::Fixed | Status::Collateral))
                .map(move |s| (a, s))
        })
        .collect();
    if !excused.is_empty() {
        let _ = writeln!(
            o,
            "<h2>Skipped and expected failures ({})</h2>\n<p>Not passes: a skip did not run here, an xfail failed as \
             its mark expects, a fixed one passed because the kernel carries its fix, a collateral one never ran because \
             another scenario broke the kernel first.</p>\n\
             <table><tr><th>arch</th><th>scenario</th><th>status</th><th>why</th></tr>",
            excused.len()
        );
        for (a, s) in excused {
            let _ = writeln!(
                o,
                "<tr><td>{}</td><td><code>{}</code></td><td class=\"{}\">{}</td><td>{}</td></tr>",
                esc(&a.arch),
                esc(&s.name),
                s.status.as_str(),
                s.status.as_str(),
                esc(s.reason.as_deref().unwrap_or("no reason recorded"))
            );
        }
        o.push_str("</table>\n");
    }
}

/// Every scenario, grouped by suite; a suite without failures stays folded.
fn scenarios(o: &mut String, run: &Run) {
    let _ = write!(
        o,
        "<h2>Scenarios</h2>\n<p><input id=\"filter\" placeholder=\"filter: name or status\" \
         oninput=\"filterRows(this.value)\"></p>\n"
    );
    let mut suites: Vec<&str> = Vec::new();
    for n in run.scenario_names() {
        let suite = n.split_once('/').map_or("", |(s, _)| s);
        if !suites.contains(&suite) {
            suites.push(suite);
        }
    }
    for suite in suites {
        suite_table(o, run, suite);
    }
    o.push_str(FILTER_SCRIPT);
}

/// One suite's scenarios: a row each, a column per arch.
fn suite_table(o: &mut String, run: &Run, suite: &str) {
    let names: Vec<&str> =
        run.scenario_names().into_iter().filter(|n| n.split_once('/').map_or("", |(s, _)| s) == suite).collect();
    let bad = names.iter().any(|n| run.arches.iter().any(|a| a.scenario(n).is_some_and(|s| s.status.is_failure())));
    let counts: Vec<String> = run
        .arches
        .iter()
        .map(|a| {
            let mine = Totals::of(names.iter().filter_map(|n| a.scenario(n)));
            format!("{}: {}", a.arch, mine.describe())
        })
        .collect();
    let _ = write!(
        o,
        "<details{}><summary><b>{}</b> ({})</summary>\n<table><tr><th>scenario</th>",
        if bad { " open" } else { "" },
        esc(suite),
        esc(&counts.join(", "))
    );
    for a in &run.arches {
        let _ = write!(o, "<th>{} ({})</th>", esc(&a.arch), esc(&a.verdict.kind));
    }
    o.push_str("</tr>\n");
    for n in names {
        let _ = write!(o, "<tr class=\"row\"><td><code>{}</code></td>", esc(n));
        for a in &run.arches {
            match a.scenario(n) {
                Some(s) => {
                    let time = s.duration_ms.map(|t| format!(" ({t} ms)")).unwrap_or_default();
                    // The reason in plain view, not a tooltip.
                    let why = s.reason.as_deref().map(|r| format!("<small>{}</small>", esc(r))).unwrap_or_default();
                    let status = s.status.as_str();
                    let _ = write!(o, "<td class=\"{status}\">{status}{time}{why}</td>");
                }
                None => o.push_str("<td class=\"none\">—</td>"),
            }
        }
        o.push_str("</tr>\n");
    }
    o.push_str("</table></details>\n");
}

/// Metrics: one bar chart per metric name, a bar per arch and scenario; the figures against
/// their baselines.
fn metrics(o: &mut String, run: &Run) {
    let mut metrics: BTreeMap<&str, Vec<plots::Bar>> = BTreeMap::new();
    for a in &run.arches {
        for s in &a.scenarios {
            for (name, m) in &s.metrics {
                let lo = m.samples.iter().copied().reduce(f64::min);
                let hi = m.samples.iter().copied().reduce(f64::max);
                let range = lo.zip(hi);
                metrics.entry(name).or_default().push((format!("{} {}", a.arch, s.name), m.value, &m.unit, range));
            }
        }
    }
    if !metrics.is_empty() {
        o.push_str("<h2>Metrics</h2>\n");
    }
    if let Some(svg) = plots::against_baselines(run) {
        let _ = writeln!(
            o,
            "<h3>Figures against their baselines</h3>\n<p>Each figure's cost per operation over its baseline's, \
             measured in the same step (1x: as cheap as the baseline).</p>\n{svg}"
        );
    }
    for (name, bars) in &metrics {
        let _ = writeln!(o, "<h3>{}</h3>\n{}", esc(name), plots::bars(bars));
    }
}

/// What the scenarios executed of the instrumented sources, per arch.
fn coverage(o: &mut String, run: &Run) {
    if let Some(c) = &run.coverage {
        let _ = writeln!(
            o,
            "<h2>Coverage</h2>\n<p>What the scenarios executed of {}: <a href=\"{}\">the annotated sources</a> \
             (each line's count per arch and the scenarios that executed it); lcov tracefiles per arch, per \
             scenario (<code>coverage/&lt;arch&gt;/&lt;suite&gt;/&lt;scenario&gt;.info</code>) and for all arches.</p>\n\
             <table><tr><th>arch</th><th>scenarios</th><th>lines</th><th>branches</th><th>functions</th><th>lines, branches without the boot</th><th>tracefile</th></tr>",
            esc(&c.files.join(", ")),
            esc(&c.index)
        );
        for r in &c.rows {
            let t = &r.totals;
            let _ = writeln!(
                o,
                "<tr><td>{}</td><td>{}</td><td>{}/{} ({:.1}%)</td><td>{}/{} ({:.1}%)</td><td>{}/{}</td><td>{}</td><td><a href=\"{}\">{}</a></td></tr>",
                esc(&r.arch),
                r.scenarios,
                t.lines_hit,
                t.lines_found,
                t.line_pct(),
                t.branches_hit,
                t.branches_found,
                t.branch_pct(),
                t.functions_hit,
                t.functions_found,
                r.scenarios_only.map_or("-".to_string(), |w| format!(
                    "{}/{} ({:.1}%), {}/{} ({:.1}%)",
                    w.lines_hit,
                    w.lines_found,
                    w.line_pct(),
                    w.branches_hit,
                    w.branches_found,
                    w.branch_pct()
                )),
                esc(&r.tracefile),
                esc(&r.tracefile)
            );
        }
        o.push_str("</table>\n");
        for p in &c.problems {
            let _ = writeln!(o, "<p>coverage: {}</p>", esc(p));
        }
    }
}

/// Each boot: its health, verdict, accelerator, QEMU, end and times.
fn boots(o: &mut String, run: &Run) {
    o.push_str("<h2>Boots</h2>\n<table><tr><th>boot</th><th>health</th><th>verdict</th><th>accel</th><th>QEMU</th><th>ended</th><th>VM</th><th>/init at</th></tr>\n");
    for b in run.arches.iter().flat_map(|a| &a.boots) {
        let (health, why) = b.health();
        let _ = writeln!(
            o,
            "<tr><td><code>{}</code></td><td class=\"{}\">{}<small>{}</small></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.1} s</td><td>{}</td></tr>",
            esc(&b.name),
            health.as_str(),
            health.as_str(),
            esc(&why),
            esc(&b.verdict.kind),
            esc(&b.accel),
            esc(b.qemu_version.as_deref().unwrap_or("not recorded")),
            esc(&b.ended),
            b.wall_ms as f64 / 1000.0,
            b.boot_ms.map_or("never".to_string(), |ms| format!("{:.2} s", ms as f64 / 1000.0))
        );
    }
    o.push_str("</table>\n");
}

/// Where everything came from: the host, each arch's kernel, each boot's QEMU command.
fn provenance(o: &mut String, run: &Run) {
    o.push_str("<h2>Provenance</h2>\n<table>\n");
    if let Some(h) = &run.host {
        let _ = writeln!(o, "<tr><th>host</th><td>{}</td></tr>", esc(&h.describe()));
    }
    for a in &run.arches {
        let Some(k) = &a.kernel else {
            let _ = writeln!(o, "<tr><th>{}</th><td>kernel metadata not recorded</td></tr>", esc(&a.arch));
            continue;
        };
        let patches: Vec<String> = k.patches.iter().map(|p| format!("{} ({})", p.name, &p.sha256)).collect();
        let _ = writeln!(
            o,
            "<tr><th>{}</th><td>{} from {}<br>source id <code>{}</code><br>patches: {}<br>config sha256 <code>{}</code> ({})<br>{}<br>build <code>{}</code></td></tr>",
            esc(&a.arch),
            esc(&k.release),
            esc(&k.source),
            esc(&k.source_id),
            esc(&if patches.is_empty() { "none".to_string() } else { patches.join(", ") }),
            esc(&k.config_hash),
            esc(&k.fragments.join(" + ")),
            esc(&k.compiler),
            esc(&k.build_key)
        );
        for b in &a.boots {
            let shared = b
                .virtiofsd_sandbox
                .as_deref()
                .map(|s| format!("<br>virtiofsd sandbox: {}", esc(s)))
                .unwrap_or_default();
            let _ =
                writeln!(o, "<tr><th>{}</th><td><code>{}</code>{shared}</td></tr>", esc(&b.name), esc(&b.qemu_command));
        }
    }
    o.push_str("</table>\n");
}

#[cfg(test)]
mod tests {
    use super::super::model::Metric;
    use super::super::tests::{check_golden, fixture};
    use super::*;

    #[test]
    fn golden() {
        check_golden("report.html", &render(&fixture()));
    }

    #[test]
    fn a_failure_names_its_catalogue_items_and_note() {
        let mut run = fixture();
        let s =
            run.arches[0].scenarios.iter_mut().find(|s| s.status.is_failure()).expect("the fixture fails somewhere");
        s.covers = vec![("A1".into(), "Unknown ioctl command -> errno `ENOTTY`.".into())];
        s.note = Some("6.12 answers EINVAL here".into());
        s.description = Some("An unknown command is refused".into());
        let html = String::from_utf8(render(&run)).unwrap();
        assert!(html.contains("<p class=\"covers\">checks <b>A1</b>: Unknown ioctl command -&gt; errno `ENOTTY`.</p>"));
        assert!(html.contains("<p class=\"note\">note: 6.12 answers EINVAL here</p>"));
        assert!(html.contains("<p class=\"about\">An unknown command is refused</p>"));
    }

    #[test]
    fn self_contained_and_plots_metrics_when_there_are_some() {
        let mut run = fixture();
        let html = String::from_utf8(render(&run)).unwrap();
        for external in ["<script src", "<link", " src=", "@import", "https://"] {
            assert!(!html.contains(external), "{external} in the report");
        }
        assert!(!html.contains("<h2>Metrics</h2>") && html.matches("<svg").count() == 1, "no metrics, no plot");
        run.arches[0].scenarios[0].metrics.insert(
            "write_throughput".into(),
            Metric { value: 125000.0, unit: "events/s".into(), higher_is_better: true, samples: vec![] },
        );
        let html = String::from_utf8(render(&run)).unwrap();
        assert!(html.contains("<h3>write_throughput</h3>\n<svg"), "the metric is plotted");
        assert_eq!(html.matches("http://").count(), html.matches("xmlns=\"http://www.w3.org/2000/svg\"").count());
        assert!(html.contains("125000 events/s"));
        assert!(!html.contains("<line"), "no samples, no whisker");
        let m = run.arches[0].scenarios[0].metrics.get_mut("write_throughput").unwrap();
        m.samples = vec![120000.0, 125000.0, 130000.0];
        let html = String::from_utf8(render(&run)).unwrap();
        assert!(html.contains("<title>samples 120000 to 130000</title></line>"), "the samples' range is drawn");
        assert!(!html.contains("against their baselines"), "no ratio, no baseline plot");
        run.arches[0].scenarios[0].metrics.insert(
            "write_256_ftrace.ratio".into(),
            Metric { value: 2.5, unit: "x".into(), higher_is_better: false, samples: vec![] },
        );
        let html = String::from_utf8(render(&run)).unwrap();
        let plot = html.split("<h3>Figures against their baselines</h3>").nth(1).expect("the baseline plot");
        let plot = &plot[..plot.find("</svg>").unwrap()];
        assert!(plot.contains("x86_64 write_256_ftrace</text>") && plot.contains(">2.50x</text>"), "{plot}");
        assert!(plot.contains("baseline (1x)"), "{plot}");
    }

    /// Skips and expected failures are no passes: their reasons stand in plain view (a section
    /// of their own, the scenario table's cells), never in a tooltip.
    #[test]
    fn skips_and_xfails_show_their_reasons_in_plain_view() {
        let run = fixture();
        let html = String::from_utf8(render(&run)).unwrap();
        assert!(!html.contains(" title=\""), "no reason hides in a tooltip");
        let excused = html.split("<h2>Skipped and expected failures (").nth(1).expect("the section");
        let excused = &excused[..excused.find("</table>").unwrap()];
        for a in &run.arches {
            for s in a
                .scenarios
                .iter()
                .filter(|s| matches!(s.status, Status::Skip | Status::Xfail | Status::Fixed | Status::Collateral))
            {
                let reason = esc(s.reason.as_deref().unwrap());
                assert!(
                    excused.contains(&format!("<code>{}</code>", s.name)) && excused.contains(&reason),
                    "{excused}"
                );
                assert!(html.contains(&format!("<small>{reason}</small>")), "{reason} in the table");
            }
        }
        // A suite's summary counts them apart from the passes.
        assert!(!html.contains(" ok)</summary>"), "no `n/m ok` that counts a skip as a pass");
        // Each arch's outcomes as one bar, skips in their own colour.
        let bars = &html[html.find("<svg").unwrap()..html.find("</svg>").unwrap()];
        assert!(bars.contains("<title>1 skip</title>") && bars.contains(">x86_64</text>"), "{bars}");
    }

    /// A failure names the check that failed, not the passing lines of its step, and links its
    /// boot's console and step logs (relative: the page is in the run folder).
    #[test]
    fn a_failure_names_the_failed_check_and_links_its_logs() {
        let mut run = fixture();
        let s = run.arches[0].scenarios.iter_mut().find(|s| s.status == Status::Fail).expect("a failure");
        s.log = vec![
            "step 1: fork brief0: pid 7".into(),
            "step 2: repeat: 40x wait brief0: exit 0 (expected exit 0)".into(),
            "step 2: repeat: iteration 7 of 50 failed after 2100 ms:".into(),
            "step 2: iteration 7 step 3: check word w: still 0x0 after 2000 ms".into(),
        ];
        let boot_name = s.boot.clone();
        let boot = run.arches[0].boots.iter().find(|b| Some(&b.name) == boot_name.as_ref()).unwrap().clone();
        let html = String::from_utf8(render(&run)).unwrap();
        assert!(
            html.contains(
                "<pre class=\"check\">step 2: iteration 7 step 3: check word w: still 0x0 after 2000 ms</pre>"
            ),
            "{html}"
        );
        assert!(!html.contains("<pre class=\"check\">step 2: repeat: 40x"), "a passing line is no failed check");
        assert!(html.contains(&format!("<a href=\"{}\">console log</a>", boot.console_log)), "{html}");
        assert!(html.contains(&format!("<a href=\"{}\">step log</a>", boot.results_log)), "{html}");
        assert_eq!(boot.console_log, format!("{}/console.log", boot.name), "relative to the run folder");
    }
}
