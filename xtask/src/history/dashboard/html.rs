//! The dashboard page as one static HTML file (inline CSS, inline SVG sparklines, no script,
//! nothing fetched), sans-IO.

use std::fmt::Write;

use super::{ArchPage, Cell, Page, Row, Trend, STRIP};
use crate::history::classify::failed;

const STYLE: &str = "body{font:13px/1.4 system-ui,sans-serif;margin:16px;color:#222}
h1{font-size:20px}h2{font-size:17px;margin-top:28px;border-bottom:1px solid #ccc}
table{border-collapse:collapse;margin:6px 0}td,th{border:1px solid #ddd;padding:3px 6px;vertical-align:top}
th{background:#f4f4f4;text-align:left}td.name{font-family:monospace;white-space:nowrap}
.sq{display:inline-block;width:9px;height:9px;margin-right:1px;border-radius:1px}
.pass{background:#2e9d46}.fail{background:#d23a3a}.skip{background:#bbb}.other{background:#e39b22}
.st{font-weight:600}.st.bad{color:#c02020}.st.good{color:#1f7a33}
.cls{font-size:11px;padding:0 4px;border-radius:3px;background:#eee;margin-left:4px}
.cls.regression{background:#f6c6c6}.cls.unstable{background:#fbe0a8}.cls.persistent-failure{background:#f0d0d0}
.cls.fixed{background:#cdeccf}.bad1{font-size:11px;color:#555}
.up{color:#1f7a33}.down{color:#c02020}summary{cursor:pointer;margin:6px 0}.muted{color:#777}";

/// A figure with four significant digits or so (`1234`, `12.35`, `0.001235`).
fn num(v: f64) -> String {
    let digits = if v == 0.0 || !v.is_finite() { 0 } else { (3 - v.abs().log10().floor() as i32).clamp(0, 9) };
    format!("{v:.0$}", usize::try_from(digits).unwrap_or(0))
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// The square's colour class of a status.
fn tone(status: &str) -> &'static str {
    match failed(status) {
        Some(true) => "fail",
        Some(false) => "pass",
        None if status == "skip" => "skip",
        None => "other",
    }
}

#[cfg(test)]
#[test]
fn figures_keep_four_digits() {
    assert_eq!(num(708.4), "708.4");
    assert_eq!(num(1234.6), "1235");
    assert_eq!(num(0.001_234_4), "0.001234");
    assert_eq!(num(0.0), "0");
}

fn cell_html(out: &mut String, c: &Cell) {
    let st = match failed(&c.status) {
        Some(true) => "bad",
        Some(false) => "good",
        None => "",
    };
    let _ = write!(out, "<span class=\"st {st}\">{}</span>", esc(&c.status));
    if let Some(class) = c.class {
        let _ = write!(out, "<span class=\"cls {0}\">{0}</span>", class.as_str());
    }
    out.push_str("<br>");
    for (status, run) in &c.strip {
        let _ = write!(out, "<span class=\"sq {}\" title=\"{} {}\"></span>", tone(status), esc(run), esc(status));
    }
    if let Some(b) = &c.first_bad {
        let since = if b.passed_before { "first bad" } else { "failing since" };
        let commit = b.commit.as_deref().map_or_else(|| "commit unknown".to_string(), |c| c.chars().take(12).collect());
        let _ = write!(
            out,
            "<div class=\"bad1\">{since}: {} at {}, {}</div>",
            esc(&b.run_id),
            esc(&b.started_at),
            esc(&commit)
        );
    }
}

fn table(out: &mut String, kernels: &[String], rows: &[Row]) {
    out.push_str("<table><tr><th>scenario</th>");
    for k in kernels {
        let _ = write!(out, "<th>{}</th>", esc(k));
    }
    out.push_str("</tr>\n");
    for r in rows {
        let _ = write!(out, "<tr><td class=\"name\">{}</td>", esc(&r.scenario));
        for c in &r.cells {
            out.push_str("<td>");
            match c {
                Some(c) => cell_html(out, c),
                None => out.push_str("<span class=\"muted\">-</span>"),
            }
            out.push_str("</td>");
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table>\n");
}

/// A figure's medians as a line with each run's min-max as a bar, the latest run a dot.
pub fn sparkline(t: &Trend) -> String {
    let (w, h, pad) = (180.0_f64, 34.0_f64, 3.0_f64);
    let lo = t.points.iter().map(|p| p.min).fold(f64::INFINITY, f64::min);
    let hi = t.points.iter().map(|p| p.max).fold(f64::NEG_INFINITY, f64::max);
    let span = if hi > lo { hi - lo } else { 1.0 };
    let n = t.points.len().max(2) as f64 - 1.0;
    let x = |i: usize| pad + (w - 2.0 * pad) * i as f64 / n;
    let y = |v: f64| h - pad - (h - 2.0 * pad) * (v - lo) / span;
    let mut svg = format!("<svg width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\">");
    for (i, p) in t.points.iter().enumerate() {
        let _ = write!(
            svg,
            "<line x1=\"{0:.1}\" x2=\"{0:.1}\" y1=\"{1:.1}\" y2=\"{2:.1}\" stroke=\"#9bb\" stroke-width=\"3\"/>",
            x(i),
            y(p.min),
            y(p.max)
        );
    }
    let line: Vec<String> =
        t.points.iter().enumerate().map(|(i, p)| format!("{:.1},{:.1}", x(i), y(p.median))).collect();
    let _ = write!(svg, "<polyline fill=\"none\" stroke=\"#246\" stroke-width=\"1.2\" points=\"{}\"/>", line.join(" "));
    if let Some(p) = t.points.last() {
        let _ = write!(
            svg,
            "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"2.5\" fill=\"#246\"/>",
            x(t.points.len() - 1),
            y(p.median)
        );
    }
    svg + "</svg>"
}

fn trends(out: &mut String, trends: &[Trend]) {
    if trends.is_empty() {
        out.push_str("<p class=\"muted\">No measured figures recorded on this arch.</p>\n");
        return;
    }
    out.push_str("<table><tr><th>scenario</th><th>figure</th><th>kernel</th><th>runs</th><th>latest median [min-max]</th><th>change</th></tr>\n");
    for t in trends {
        let last = t.points.last().expect("a trend has a point");
        let change = t.flag.as_ref().map_or_else(
            || "<span class=\"muted\">within noise</span>".to_string(),
            |f| {
                let (cls, word) = if f.better { ("up", "better") } else { ("down", "worse") };
                format!("<span class=\"{cls}\">x{:.3} {word} (p={:.1e})</span>", f.ratio, f.p)
            },
        );
        let _ = writeln!(
            out,
            "<tr><td class=\"name\">{}</td><td>{} ({}{})</td><td>{}</td><td>{}</td><td>{} [{}-{}]</td><td>{change}</td></tr>",
            esc(&t.scenario),
            esc(&t.name),
            esc(&t.unit),
            if t.higher_is_better { ", higher is better" } else { ", lower is better" },
            esc(&t.kernel),
            sparkline(t),
            num(last.median),
            num(last.min),
            num(last.max)
        );
    }
    out.push_str("</table>\n");
}

fn arch(out: &mut String, a: &ArchPage) {
    let _ = writeln!(out, "<h2 id=\"{0}\">{0}</h2>", esc(&a.arch));
    if a.rows.is_empty() {
        out.push_str("<p>Every scenario passes and keeps passing.</p>\n");
    } else {
        let _ = writeln!(out, "<h3>To look at ({})</h3>", a.rows.len());
        table(out, &a.kernels, &a.rows);
    }
    if !a.folded.is_empty() {
        let _ = writeln!(out, "<details><summary>{} scenario(s) pass and keep passing</summary>", a.folded.len());
        table(out, &a.kernels, &a.folded);
        out.push_str("</details>\n");
    }
    out.push_str("<h3>Performance trends</h3>\n");
    trends(out, &a.trends);
}

/// The page: a heading, a link per arch, then each arch's tables.
pub fn render(p: &Page) -> String {
    let mut out = format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>user_events conformance: \
         regression dashboard</title>\n<style>{STYLE}</style></head><body>\n<h1>Regression dashboard</h1>\n<p>{} \
         run(s) in {}. Each cell: the latest status, the class in its kernel's latest run, the last {STRIP} \
         outcomes (oldest first; green passed, red failed, grey skipped, amber the rest), and for a cell failing now the \
         run after its last pass. The {} run(s) of mutants' kernels (mutation campaigns) are left \
         out.</p>\n<p>",
        p.runs,
        esc(&p.store),
        p.mutant_runs
    );
    for a in &p.arches {
        let _ = write!(out, "<a href=\"#{0}\">{0}</a> ", esc(&a.arch));
    }
    out.push_str("</p>\n");
    for a in &p.arches {
        arch(&mut out, a);
    }
    out.push_str("</body></html>\n");
    out
}
