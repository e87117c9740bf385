//! The readable view of a coverage run: each instrumented source, line by line, with its count
//! per arch, its branches taken, and the scenarios that executed it (`coverage/index.html`,
//! linked from `report.html`). Sans-IO: a page from the counts.

use std::collections::{BTreeMap, BTreeSet};

use crate::coverage::lcov::FileCov;

/// Scenarios named on a line; a line more of them executed shows their number (and the first
/// ones): the rarely executed lines are the ones whose scenarios matter.
pub const NAMED: usize = 6;

/// What the page shows for one source.
pub struct Source<'a> {
    pub path: &'a str,
    pub text: &'a str,
    /// Per arch, in order: that arch's counts (summed over its scenarios).
    pub arches: Vec<(&'a str, &'a FileCov)>,
    /// Line to the scenarios (`suite/name`) that executed it on some arch.
    pub scenarios: BTreeMap<u32, BTreeSet<&'a str>>,
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// The page: a summary table (`summary_rows`: arch, description) then every source.
pub fn page(title: &str, summary_rows: &[(String, String)], sources: &[Source]) -> String {
    let mut h = String::new();
    h.push_str("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>");
    h.push_str(&esc(title));
    h.push_str(
        "</title><style>\
body{font-family:sans-serif;margin:1em}table.src{border-collapse:collapse;font:12px monospace}\
table.src td{padding:0 .5em;white-space:pre;vertical-align:top}td.n{color:#888;text-align:right}\
td.c{text-align:right}tr.hit td.code{background:#dfd}tr.miss td.code{background:#fcc}\
tr.miss td.c{color:#c00;font-weight:bold}td.s{font-family:sans-serif;font-size:11px;color:#335;white-space:normal}\
td.b{color:#a60}table.sum td,table.sum th{padding:.2em .8em;text-align:left}\
</style></head><body>\n",
    );
    h.push_str(&format!("<h1>{}</h1>\n<table class=\"sum\">\n", esc(title)));
    for (arch, text) in summary_rows {
        h.push_str(&format!("<tr><th>{}</th><td>{}</td></tr>\n", esc(arch), esc(text)));
    }
    h.push_str(
        "</table>\n<p>Each line: its number, its count on each arch (blank: not executable there), \
        the branches taken of those it has (all arches), the scenarios that executed it, the source. \
        Red: executable and never executed on any arch.</p>\n",
    );
    for s in sources {
        h.push_str(&format!("<h2 id=\"{0}\">{0}</h2>\n<table class=\"src\">\n<tr><th>line</th>", esc(s.path)));
        for (arch, _) in &s.arches {
            h.push_str(&format!("<th>{}</th>", esc(arch)));
        }
        h.push_str("<th>branches</th><th>scenarios</th><th>source</th></tr>\n");
        for (i, text) in s.text.lines().enumerate() {
            let n = i as u32 + 1;
            let counts: Vec<Option<u64>> = s.arches.iter().map(|(_, f)| f.lines.get(&n).copied()).collect();
            let executable = counts.iter().any(Option::is_some);
            let hit = counts.iter().any(|c| c.is_some_and(|c| c > 0));
            let class = match (executable, hit) {
                (false, _) => "",
                (true, true) => " class=\"hit\"",
                (true, false) => " class=\"miss\"",
            };
            h.push_str(&format!("<tr{class} id=\"{}:{n}\"><td class=\"n\">{n}</td>", esc(s.path)));
            for c in &counts {
                h.push_str(&format!("<td class=\"c\">{}</td>", c.map_or(String::new(), |c| c.to_string())));
            }
            let mut branches: BTreeMap<u32, bool> = BTreeMap::new();
            for (_, f) in &s.arches {
                for ((_, b), taken) in f.branches.range((n, 0)..(n + 1, 0)) {
                    *branches.entry(*b).or_default() |= taken.is_some_and(|t| t > 0);
                }
            }
            let b = if branches.is_empty() {
                String::new()
            } else {
                format!("{}/{}", branches.values().filter(|t| **t).count(), branches.len())
            };
            h.push_str(&format!("<td class=\"b\">{b}</td><td class=\"s\">"));
            if let Some(names) = s.scenarios.get(&n) {
                let shown: Vec<String> = names.iter().take(NAMED).map(|x| esc(x)).collect();
                if names.len() > NAMED {
                    h.push_str(&format!("{} scenarios: {}, ...", names.len(), shown.join(", ")));
                } else {
                    h.push_str(&shown.join(", "));
                }
            }
            h.push_str(&format!("</td><td class=\"code\">{}</td></tr>\n", esc(text)));
        }
        h.push_str("</table>\n");
    }
    h.push_str("</body></html>\n");
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_show_counts_branches_and_scenarios() {
        let mut f = FileCov { path: "a.c".into(), ..FileCov::default() };
        f.lines.insert(2, 5);
        f.lines.insert(3, 0);
        f.branches.insert((2, 0), Some(5));
        f.branches.insert((2, 1), Some(0));
        let mut scenarios = BTreeMap::new();
        let many: Vec<String> = (0..8).map(|i| format!("s/n{i}")).collect();
        scenarios.insert(2, many.iter().map(String::as_str).collect());
        let src =
            Source { path: "a.c", text: "int x;\nif (a < b)\n\treturn;\n", arches: vec![("x86_64", &f)], scenarios };
        let html = page("coverage", &[("x86_64".into(), "lines 1/2".into())], &[src]);
        assert!(
            html.contains(
                "<tr class=\"hit\" id=\"a.c:2\"><td class=\"n\">2</td><td class=\"c\">5</td><td class=\"b\">1/2</td>"
            ),
            "{html}"
        );
        assert!(html.contains("8 scenarios: s/n0, s/n1"), "{html}");
        assert!(html.contains("if (a &lt; b)"));
        assert!(html.contains("<tr class=\"miss\" id=\"a.c:3\">"));
        assert!(html.contains("<tr id=\"a.c:1\"><td class=\"n\">1</td><td class=\"c\"></td>"));
    }
}
