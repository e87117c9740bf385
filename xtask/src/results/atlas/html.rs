//! `atlas.html`: one static page, inline CSS, nothing fetched. The counts first, then the
//! kernels (each linking its run's report), then per arch a table of scenario x kernel: the
//! rows that differ anywhere in full, each differing cell outlined and numbered, its
//! explanation on hover and in the footnotes under the table (an unexplained one in red); the
//! uniform rows folded, summarised by status.

use std::collections::BTreeMap;
use std::fmt::Write;

use super::explained::{Explanation, Judged};
use super::render::{against, describe_row, Counts};
use super::Grid;
use crate::results::text::esc;

const STYLE: &str = "body{font:14px/1.4 system-ui,sans-serif;margin:2em;color:#222;max-width:90em}\
table{border-collapse:collapse;margin:.5em 0 1em}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;\
vertical-align:top}th{background:#eee}.pass,.fixed{background:#cfc}.fail,.xpass{background:#f99}\
.error,.not-run,.missing,.collateral{background:#fc9}.skip,.xfail{background:#ffc}\
td.differs{outline:3px solid #36c;outline-offset:-3px;font-weight:600}\
td.unexplained{outline:3px solid #d00;outline-offset:-3px}sup{color:#36c;line-height:0}td.unexplained sup{color:#d00}\
ol.notes li{margin:.2em 0}ol.notes .unexplained{color:#b00;font-weight:600}summary{cursor:pointer}\
td.nw{white-space:nowrap}.counts span{display:inline-block;margin-right:1.5em}.bad{color:#b00;font-weight:600}code{font-size:13px}";

/// The page.
pub fn render(grid: &Grid, judged: &Judged, generated_at: &str) -> Vec<u8> {
    let c = Counts::of(grid, judged);
    let mut o = String::new();
    let _ = write!(
        o,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>user_events atlas: {} kernel(s) x \
         {} arch(es)</title><style>{STYLE}</style></head><body>\n<h1>user_events regression atlas</h1>\n",
        grid.kernels.len(),
        grid.arches.len()
    );
    let verdict = if judged.passes() { "" } else { " class=\"bad\"" };
    let _ = write!(
        o,
        "<p class=\"counts\"><span>{} scenario(s)</span><span>{} uniform</span><span>{} differing</span>\
         <span>{} differing cell(s): {} explained</span><span{verdict}>{} unexplained</span>\
         <span{verdict}>{} stale explanation(s)</span></p>\n<p>Generated {}. A cell differs when its status is \
         not that of the same arch on the next older kernel, or not the one most arches of its kernel have; \
         each needs an explanation: a <code>requires</code> skip, or a row of <code>{}</code>.</p>\n",
        c.rows,
        c.uniform,
        c.differing_rows,
        c.differing_cells,
        c.explained,
        c.unexplained,
        c.stale,
        esc(generated_at),
        super::explained::LIST
    );
    kernels(&mut o, grid);
    for a in 0..grid.arches.len() {
        arch_table(&mut o, grid, judged, a);
    }
    if !judged.stale.is_empty() {
        o.push_str("<h2 class=\"bad\">Stale explanations</h2>\n<ul>\n");
        for l in &judged.stale {
            let _ = writeln!(o, "<li><code>{}:{}</code>: {}</li>", esc(&l.file), l.line, esc(&describe_row(l)));
        }
        o.push_str("</ul>\n");
    }
    o.push_str("</body></html>\n");
    o.into_bytes()
}

fn kernels(o: &mut String, grid: &Grid) {
    o.push_str(
        "<h2>Kernels</h2>\n<table><tr><th>kernel</th><th>release</th><th>source</th><th>flags</th>\
                <th>arches</th><th>run</th></tr>\n",
    );
    for k in &grid.kernels {
        let arches: Vec<String> = k.arches.iter().map(|a| format!("{} {}", a.arch, a.verdict)).collect();
        let run = match (&k.run_dir, &k.run_id) {
            (Some(dir), id) => {
                format!("<a href=\"{}/report.html\">{}</a>", esc(dir), esc(id.as_deref().unwrap_or(dir)))
            }
            (None, _) => "nothing booted".into(),
        };
        let flags = match k.flags.as_str() {
            "" => "(Debian's default source)".to_string(),
            flags => format!("<code>{}</code>", esc(flags)),
        };
        let _ = writeln!(
            o,
            "<tr><td class=\"nw\">{}</td><td class=\"nw\">{}</td><td>{}</td><td class=\"nw\">{flags}</td>\
             <td class=\"nw\">{}</td><td class=\"nw\">{run}</td></tr>",
            esc(&k.label),
            esc(k.release.as_deref().unwrap_or("")),
            esc(k.source.as_deref().unwrap_or("")),
            esc(&arches.join(", "))
        );
    }
    o.push_str("</table>\n");
}

/// A differing cell's footnote: its number, its explanation, the neighbours it differs from.
type Note<'a> = (usize, Option<&'a Explanation>, Vec<String>);

/// One arch's table: the rows that differ anywhere, their differing cells numbered, the notes
/// under it, the uniform rows folded.
fn arch_table(o: &mut String, grid: &Grid, judged: &Judged, a: usize) {
    let arch = &grid.arches[a];
    let _ = writeln!(o, "<h2>{}</h2>", esc(arch));
    let notes: BTreeMap<(usize, usize), Note> = judged
        .cells
        .iter()
        .filter(|(d, _)| d.arch == a)
        .enumerate()
        .map(|(n, (d, e))| ((d.row, d.kernel), (n + 1, e.as_ref(), against(grid, d))))
        .collect();
    let head: String = grid.kernels.iter().map(|k| format!("<th>{}</th>", esc(&k.title()))).collect();
    let (differing, uniform): (Vec<usize>, Vec<usize>) = (0..grid.rows.len()).partition(|r| !grid.rows[*r].uniform());
    if differing.is_empty() {
        o.push_str("<p>Every row is uniform: the same status on every kernel and arch.</p>\n");
    } else {
        let _ = writeln!(o, "<table><tr><th>scenario</th>{head}</tr>");
        for r in &differing {
            let _ = write!(o, "<tr><td>{}</td>", esc(&grid.rows[*r].scenario));
            for k in 0..grid.kernels.len() {
                let cell = grid.cell(*r, k, a);
                let status = cell.status.as_str();
                match notes.get(&(*r, k)) {
                    Some((n, e, _)) => {
                        let (class, title) = match e {
                            Some(e) => ("differs", e.describe()),
                            None => ("differs unexplained", "unexplained".to_string()),
                        };
                        let _ = write!(
                            o,
                            "<td class=\"{status} {class}\" title=\"{}\">{status}<sup>{n}</sup></td>",
                            esc(&title)
                        );
                    }
                    None => {
                        let title =
                            cell.reason.as_deref().map(|r| format!(" title=\"{}\"", esc(r))).unwrap_or_default();
                        let _ = write!(o, "<td class=\"{status}\"{title}>{status}</td>");
                    }
                }
            }
            o.push_str("</tr>\n");
        }
        o.push_str("</table>\n");
    }
    if !notes.is_empty() {
        o.push_str("<ol class=\"notes\">\n");
        let mut sorted: Vec<_> = notes.iter().collect();
        sorted.sort_by_key(|(_, (n, _, _))| *n);
        for ((r, k), (n, e, against)) in sorted {
            let what = match e {
                Some(e) => esc(&e.describe()),
                None => "<span class=\"unexplained\">unexplained</span>".to_string(),
            };
            let _ = writeln!(
                o,
                "<li value=\"{n}\"><b>{}</b> on {}: {} (against {}): {what}</li>",
                esc(&grid.rows[*r].scenario),
                esc(&grid.kernels[*k].title()),
                grid.cell(*r, *k, a).status.as_str(),
                esc(&against.join(", "))
            );
        }
        o.push_str("</ol>\n");
    }
    uniform_rows(o, grid, &uniform, a, &head);
}

/// The uniform rows, folded under a line that counts them by status.
fn uniform_rows(o: &mut String, grid: &Grid, rows: &[usize], a: usize, head: &str) {
    if rows.is_empty() {
        return;
    }
    let mut by_status: BTreeMap<&str, usize> = BTreeMap::new();
    for r in rows {
        *by_status.entry(grid.cell(*r, 0, a).status.as_str()).or_default() += 1;
    }
    let counts: Vec<String> = by_status.iter().map(|(s, n)| format!("{n} {s}")).collect();
    let _ = writeln!(
        o,
        "<details><summary>{} uniform row(s), the same on every kernel and arch: {}</summary>\n\
         <table><tr><th>scenario</th>{head}</tr>",
        rows.len(),
        counts.join(", ")
    );
    for r in rows {
        let cell = grid.cell(*r, 0, a);
        let status = cell.status.as_str();
        let title = cell.reason.as_deref().map(|r| format!(" title=\"{}\"", esc(r))).unwrap_or_default();
        let cells: String =
            (0..grid.kernels.len()).map(|_| format!("<td class=\"{status}\"{title}>{status}</td>")).collect();
        let _ = writeln!(o, "<tr><td>{}</td>{cells}</tr>", esc(&grid.rows[*r].scenario));
    }
    o.push_str("</table></details>\n");
}
