//! The HTML report's plots, inline SVG drawn from the run model: each arch's outcomes as one
//! stacked bar, one bar chart per metric (with the samples' range as a whisker), and the
//! performance figures against their baselines (the `.ratio` metrics, 1x marked).

use std::fmt::Write;

use super::super::model::{Run, Status};
use super::super::text::{esc, number};

/// A colour per status, in the families of the report's table cells (green for passes, yellow
/// and grey for what is excused, red and orange for failures), each its own.
fn colour(s: Status) -> &'static str {
    match s {
        Status::Pass => "#6c6",
        Status::Fixed => "#3a8a3a",
        Status::Skip => "#bbb",
        Status::Xfail => "#ec4",
        Status::Fail => "#d44",
        Status::Xpass => "#e7a",
        Status::NotRun => "#e93",
        Status::Error => "#a33",
        Status::Collateral => "#999",
    }
}

/// One stacked bar per arch: its scenarios by status, each part labelled with its count, and
/// a legend; skips and expected failures in their own colour, never with the passes.
pub fn outcomes(run: &Run) -> String {
    let (row, label_w, bar_w) = (24, 90, 480);
    let height = run.arches.len() * row + 26;
    // The legend: a swatch and `N status` per status the run has, about 7 px a character.
    let legend: Vec<(Status, String)> = Status::ALL
        .iter()
        .filter(|st| run.totals.get(**st) > 0)
        .map(|st| (*st, format!("{} {}", run.totals.get(*st), st.as_str())))
        .collect();
    let legend_w: usize = legend.iter().map(|(_, t)| 22 + 7 * t.len()).sum();
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{height}\" font-size=\"12\" \
         role=\"img\" aria-label=\"outcomes per arch\">",
        (label_w + bar_w).max(label_w + legend_w) + 10
    );
    for (i, a) in run.arches.iter().enumerate() {
        let y = i * row + 2;
        let _ = write!(s, "<text x=\"0\" y=\"{}\">{}</text>", y + 15, esc(&a.arch));
        let total = a.totals.total().max(1) as f64;
        let mut x = label_w as f64;
        for st in Status::ALL {
            let n = a.totals.get(st);
            if n == 0 {
                continue;
            }
            let w = n as f64 / total * bar_w as f64;
            let _ = write!(
                s,
                "<rect x=\"{x:.1}\" y=\"{y}\" width=\"{w:.1}\" height=\"{}\" fill=\"{}\"><title>{} {}</title></rect>",
                row - 4,
                colour(st),
                n,
                st.as_str()
            );
            if w >= 24.0 {
                let _ = write!(s, "<text x=\"{:.1}\" y=\"{}\">{n}</text>", x + 3.0, y + 15);
            }
            x += w;
        }
    }
    let legend_y = run.arches.len() * row + 18;
    let mut x = label_w;
    for (st, text) in legend {
        let _ = write!(
            s,
            "<rect x=\"{x}\" y=\"{}\" width=\"10\" height=\"10\" fill=\"{}\"/><text x=\"{}\" y=\"{legend_y}\">{text}</text>",
            legend_y - 9,
            colour(st),
            x + 13
        );
        x += 22 + 7 * text.len();
    }
    s.push_str("</svg>");
    s
}

/// Each `.ratio` metric (a figure's cost against its baseline, measured in the same step) as a
/// bar from 0, with the baseline's 1x drawn across; `None` when the run measured none.
pub fn against_baselines(run: &Run) -> Option<String> {
    let mut rows: Vec<(String, f64)> = Vec::new();
    for a in &run.arches {
        for sc in &a.scenarios {
            for (name, m) in &sc.metrics {
                if let Some(figure) = name.strip_suffix(".ratio") {
                    rows.push((format!("{} {figure}", a.arch), m.value));
                }
            }
        }
    }
    if rows.is_empty() {
        return None;
    }
    let max = rows.iter().map(|r| r.1).fold(1.0_f64, f64::max) * 1.1;
    let (row, label_w, bar_w) = (20, 260, 420);
    let height = rows.len() * row + 20;
    let x = |v: f64| label_w as f64 + v / max * bar_w as f64;
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{height}\" font-size=\"12\" \
         role=\"img\" aria-label=\"figures against their baselines\">",
        label_w + bar_w + 70
    );
    for (i, (label, ratio)) in rows.iter().enumerate() {
        let y = i * row + 16;
        let fill = if *ratio <= 1.0 { "#6c6" } else { "#58a" };
        let _ = write!(
            s,
            "<text x=\"0\" y=\"{}\">{}</text><rect x=\"{label_w}\" y=\"{y}\" width=\"{:.1}\" height=\"{}\" \
             fill=\"{fill}\"/><text x=\"{:.1}\" y=\"{}\">{:.2}x</text>",
            y + 12,
            esc(label),
            (x(*ratio) - label_w as f64).max(1.0),
            row - 5,
            x(*ratio) + 4.0,
            y + 12,
            ratio
        );
    }
    let one = x(1.0);
    let _ = write!(
        s,
        "<line x1=\"{one:.1}\" x2=\"{one:.1}\" y1=\"12\" y2=\"{height}\" stroke=\"#000\" stroke-dasharray=\"4 3\"/>\
         <text x=\"{:.1}\" y=\"10\">baseline (1x)</text></svg>",
        one - 30.0
    );
    Some(s)
}

/// A bar: its label, value, unit and the range of the samples behind it (drawn as a whisker).
pub type Bar<'a> = (String, f64, &'a str, Option<(f64, f64)>);

/// A horizontal bar chart: one labelled bar per value, scaled to the largest.
pub fn bars(bars: &[Bar]) -> String {
    let top = |b: &Bar| b.3.map_or(b.1, |(_, hi)| hi.max(b.1));
    let max = bars.iter().map(top).fold(0.0_f64, f64::max).max(f64::MIN_POSITIVE);
    let (row, label_w, bar_w) = (22, 320, 360);
    let height = bars.len() * row + 4;
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{height}\" font-size=\"12\">",
        label_w + bar_w + 120
    );
    for (i, (label, value, unit, range)) in bars.iter().enumerate() {
        let y = i * row + 2;
        let w = ((value / max) * bar_w as f64).max(1.0);
        let _ = write!(
            s,
            "<text x=\"0\" y=\"{}\">{}</text><rect x=\"{label_w}\" y=\"{y}\" width=\"{w:.1}\" height=\"{}\" fill=\"#58a\"/>\
             <text x=\"{:.1}\" y=\"{}\">{} {}</text>",
            y + 14,
            esc(label),
            row - 6,
            label_w as f64 + top(&bars[i]) / max * bar_w as f64 + 4.0,
            y + 14,
            number(*value),
            esc(unit)
        );
        if let Some((lo, hi)) = range {
            let x = |v: f64| label_w as f64 + (v / max) * bar_w as f64;
            let _ = write!(
                s,
                "<line x1=\"{:.1}\" x2=\"{:.1}\" y1=\"{}\" y2=\"{}\" stroke=\"#333\"><title>samples {} to {}</title></line>",
                x(*lo),
                x(*hi),
                y + (row - 6) / 2,
                y + (row - 6) / 2,
                number(*lo),
                number(*hi)
            );
        }
    }
    s.push_str("</svg>");
    s
}
