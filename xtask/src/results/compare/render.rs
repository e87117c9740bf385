//! A comparison as text for the terminal (`render_text`) and as `compare.md`
//! (`render_markdown`).

use std::fmt::Write;

use super::{describe, Class, Comparison, Entry, MetricChange, MetricVerdict, SideInfo, MIN_RUNS, NOISE_FACTOR};
use crate::results::text::{cell, clean};

fn sides_line(side: &SideInfo) -> String {
    let ids: Vec<&str> = side.runs.iter().map(|r| r.run_id.as_str()).collect();
    let repeats = if ids.len() > 1 { format!(" ({} repeats)", ids.len()) } else { String::new() };
    format!("{}{repeats}", ids.join(", "))
}

fn metric_line(m: &MetricChange) -> String {
    let pct = m.change_pct.map_or(String::new(), |p| format!(" ({p:+.1}%)"));
    let noise = match m.verdict {
        MetricVerdict::Unmeasured => format!("{} and {} samples: noise not measured", m.base.n, m.current.n),
        MetricVerdict::Better | MetricVerdict::Worse if !m.confirmed => format!(
            "noise threshold {} {}; unconfirmed: fewer than {MIN_RUNS} runs a side, so run-to-run noise is not in it",
            num(m.threshold),
            m.unit
        ),
        _ => format!("noise threshold {} {}", num(m.threshold), m.unit),
    };
    format!(
        "{} {} {}: {} -> {} {}{pct}, {}; {noise}",
        m.arch,
        m.scenario,
        m.metric,
        num(m.base.median),
        num(m.current.median),
        m.unit,
        m.verdict.as_str()
    )
}

fn num(x: f64) -> String {
    if x != 0.0 && (x.abs() >= 1e6 || x.abs() < 1e-3) {
        format!("{x:.3e}")
    } else {
        format!("{}", (x * 1000.0).round() / 1000.0)
    }
}

/// The report for a terminal, the answer first: the outcome line, then per arch the counts and
/// every entry that is not `unchanged` (regressions, fixes, flaky and new first), then the
/// figures that moved beyond noise and one line counting the rest (`verbose`: every figure).
pub fn render_text(c: &Comparison, verbose: bool) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "base:    {}", sides_line(&c.base));
    let _ = writeln!(out, "current: {}", sides_line(&c.current));
    let mut arches: Vec<&str> = Vec::new();
    for e in &c.entries {
        if !arches.contains(&e.arch.as_str()) {
            arches.push(&e.arch);
        }
    }
    for arch in arches {
        let mine: Vec<&Entry> = c.entries.iter().filter(|e| e.arch == arch).collect();
        let counts: Vec<String> = Class::ALL
            .iter()
            .filter_map(|k| {
                let n = mine.iter().filter(|e| e.class == *k).count();
                (n > 0).then(|| format!("{n} {}", k.as_str()))
            })
            .collect();
        let _ = writeln!(out, "\n{arch}: {}", counts.join(", "));
        for side in [&c.base, &c.current] {
            if let Some(k) = side.kernels.get(arch) {
                let which = if std::ptr::eq(side, &c.base) { "base" } else { "current" };
                let _ = writeln!(out, "  {which} kernel: {k}");
            }
        }
        let rank = |k: Class| TEXT_ORDER.iter().position(|o| *o == k).unwrap_or(TEXT_ORDER.len());
        let mut changed: Vec<&&Entry> = mine.iter().filter(|e| e.class != Class::Unchanged).collect();
        changed.sort_by_key(|e| rank(e.class));
        for e in changed {
            let _ = writeln!(
                out,
                "  {:<14} {}: {} -> {}",
                e.class.as_str().to_uppercase(),
                e.scenario,
                describe(&e.base),
                describe(&e.current)
            );
            if let Some(n) = &e.note {
                let _ = writeln!(out, "  {:<14}   {}", "", clean(n).replace('\n', " "));
            }
        }
    }
    if !c.metrics.is_empty() {
        let moved: Vec<&MetricChange> = c
            .metrics
            .iter()
            .filter(|m| verbose || matches!(m.verdict, MetricVerdict::Better | MetricVerdict::Worse))
            .collect();
        let count = |v: MetricVerdict| c.metrics.iter().filter(|m| m.verdict == v).count();
        let _ = writeln!(
            out,
            "\nmetrics: {} figure(s) within noise, {} worse and {} better beyond noise ({} confirmed by repeats), \
             {} unmeasured{}",
            count(MetricVerdict::WithinNoise),
            count(MetricVerdict::Worse),
            count(MetricVerdict::Better),
            c.metrics
                .iter()
                .filter(|m| m.confirmed && matches!(m.verdict, MetricVerdict::Better | MetricVerdict::Worse))
                .count(),
            count(MetricVerdict::Unmeasured),
            if verbose { "" } else { " (--verbose lists every figure)" }
        );
        if !moved.is_empty() {
            let _ =
                writeln!(out, "  (a change counts beyond {NOISE_FACTOR} x the larger side's MAD-sigma, IQRs apart)");
        }
        for m in moved {
            let _ = writeln!(out, "  {}", metric_line(m));
        }
    }
    let r = c.regressions();
    let verdict = format!(
        "{}: {r} regressed, {} flaky, {} fixed, {} metric(s) worse beyond noise ({} confirmed by repeats)",
        if r > 0 { "REGRESSED" } else { "NO REGRESSION" },
        c.counts.get("flaky").copied().unwrap_or(0),
        c.counts.get("fixed").copied().unwrap_or(0),
        c.worse_metrics(),
        c.confirmed_worse_metrics()
    );
    let verdict = match c.counts.get("collateral").copied().unwrap_or(0) {
        0 => verdict,
        n => format!("{verdict}; {n} not run because another scenario broke the kernel (collateral, not judged)"),
    };
    // The answer first, and again last, where a terminal leaves the eye.
    let _ = writeln!(out, "\n{verdict}");
    format!("{verdict}\n{out}")
}

/// The order the text report lists a changed scenario in: what a developer acts on first.
const TEXT_ORDER: [Class; 6] =
    [Class::Regressed, Class::Fixed, Class::Flaky, Class::New, Class::StillFailing, Class::Removed];

/// `compare.md`: the same report as Markdown tables.
pub fn render_markdown(c: &Comparison) -> Vec<u8> {
    let mut out = String::new();
    let r = c.regressions();
    let icon = if r > 0 { "❌" } else { "✅" };
    let _ = writeln!(out, "## {icon} user_events comparison: {r} regressed\n");
    let _ = writeln!(out, "- base: {}", sides_line(&c.base));
    let _ = writeln!(out, "- current: {}\n", sides_line(&c.current));
    let _ = writeln!(out, "| arch | base kernel | current kernel | {} |", Class::ALL.map(|k| k.as_str()).join(" | "));
    let _ = writeln!(out, "|---|---|---|{}", "---:|".repeat(Class::ALL.len()));
    let mut arches: Vec<&str> = Vec::new();
    for e in &c.entries {
        if !arches.contains(&e.arch.as_str()) {
            arches.push(&e.arch);
        }
    }
    for arch in &arches {
        let n: Vec<String> = Class::ALL
            .iter()
            .map(|k| c.entries.iter().filter(|e| e.arch == *arch && e.class == *k).count().to_string())
            .collect();
        let k = |s: &SideInfo| cell(s.kernels.get(*arch).map_or("—", |k| k.as_str()));
        let _ = writeln!(out, "| {arch} | {} | {} | {} |", k(&c.base), k(&c.current), n.join(" | "));
    }
    let changed: Vec<&Entry> = c.entries.iter().filter(|e| e.class != Class::Unchanged).collect();
    if !changed.is_empty() {
        let _ = writeln!(out, "\n| class | arch | scenario | base | current | note |");
        let _ = writeln!(out, "|---|---|---|---|---|---|");
        for e in changed {
            let _ = writeln!(
                out,
                "| {} | {} | `{}` | {} | {} | {} |",
                e.class.as_str(),
                e.arch,
                e.scenario,
                describe(&e.base),
                describe(&e.current),
                e.note.as_deref().map(cell).unwrap_or_default()
            );
        }
    }
    if !c.metrics.is_empty() {
        let _ = writeln!(out, "\n| arch | scenario | metric | base median | current median | change | verdict |");
        let _ = writeln!(out, "|---|---|---|---:|---:|---:|---|");
        for m in &c.metrics {
            let _ = writeln!(
                out,
                "| {} | `{}` | {} ({}) | {} | {} | {} | {} |",
                m.arch,
                m.scenario,
                m.metric,
                m.unit,
                num(m.base.median),
                num(m.current.median),
                m.change_pct.map_or("—".to_string(), |p| format!("{p:+.1}%")),
                match m.verdict {
                    MetricVerdict::Better | MetricVerdict::Worse if !m.confirmed => {
                        format!("{} (unconfirmed: one run a side)", m.verdict.as_str())
                    }
                    v => v.as_str().to_string(),
                }
            );
        }
    }
    out.into_bytes()
}
