//! `mutants.html`: the score, then each mutant no scenario detected (Survived, then
//! NoCoverage) in its source context: the lines around it with its own marked, the change, its
//! diff and the scenarios that ran it; what a reviewer reads to write the missing check or the
//! equivalence reason. Sans-IO, from the same results as `mutants.json` and `summary.md`.

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::mutants::mutant::Mutant;
use crate::mutants::report::{MutantResult, Outcome};
use crate::mutants::summary;
use crate::results::text::esc;

/// Lines of source shown before and after a mutant's own.
const CONTEXT: u32 = 4;

const STYLE: &str = "body{font-family:sans-serif;margin:2em;max-width:70em}\
code,pre{font-family:monospace}pre{background:#f6f6f6;padding:.5em;overflow-x:auto}\
.src>span{display:block}.src .hit{background:#ffe0e0}.ln{color:#888;display:inline-block;width:4em}\
h3{margin-top:2em;border-top:1px solid #ccc;padding-top:.5em}";

/// The page for `file` (its text `source`).
pub fn render(file: &str, source: &str, mutants: &[Mutant], results: &BTreeMap<String, MutantResult>) -> String {
    let (all, _, _) = summary::tallies(mutants, results);
    let [score, covered, detected, survived, no_coverage, excluded, pending] = all.cells();
    let mut h = String::new();
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Mutants of {f}</title><style>{STYLE}</style>\
         </head><body>\n<h1>Mutants of <code>{f}</code></h1>\n<p>Score {score} (Killed + Timeout over all but \
         CompileError, RuntimeError and equivalent), {covered} of the covered ones; {detected} detected, \
         {survived} survived, {no_coverage} NoCoverage, {excluded} excluded, {pending} not run yet.</p>\n",
        f = esc(file),
    );
    let lines: Vec<&str> = source.lines().collect();
    for (title, wanted) in [("Survived", "Survived"), ("NoCoverage: no scenario executes these lines", "NoCoverage")] {
        let these: Vec<&Mutant> =
            mutants.iter().filter(|m| results.get(&m.id).is_some_and(|r| r.outcome.name() == wanted)).collect();
        let _ = writeln!(h, "<h2>{} ({})</h2>", esc(title), these.len());
        for m in these {
            mutant(&mut h, m, &lines, source, &results[&m.id]);
        }
    }
    h.push_str("</body></html>\n");
    h
}

/// One mutant's section.
fn mutant(h: &mut String, m: &Mutant, lines: &[&str], source: &str, r: &MutantResult) {
    let _ = writeln!(
        h,
        "<h3 id=\"{id}\"><code>{id}</code> {op} in <code>{func}</code>, line {line}</h3>\n<p><code>{change}</code></p>",
        id = esc(&m.id),
        op = m.operator,
        func = esc(&m.function),
        line = m.line,
        change = esc(&m.change()),
    );
    h.push_str("<pre class=\"src\">");
    let first = m.line.saturating_sub(CONTEXT).max(1);
    let last = (m.end_line + CONTEXT).min(lines.len() as u32);
    for n in first..=last {
        let class = if m.lines().contains(&n) { " class=\"hit\"" } else { "" };
        let text = lines.get(n as usize - 1).copied().unwrap_or_default();
        let _ = write!(h, "<span{class}><span class=\"ln\">{n}</span>{}</span>", esc(text));
    }
    h.push_str("</pre>\n");
    let _ = writeln!(h, "<details><summary>diff</summary><pre>{}</pre></details>", esc(&m.diff(source)));
    if let Outcome::Survived = r.outcome {
        let _ = writeln!(
            h,
            "<details><summary>{} covering scenario(s) passed</summary><p>{}</p></details>",
            r.covered_by.len(),
            r.covered_by.iter().map(|s| format!("<code>{}</code>", esc(s))).collect::<Vec<_>>().join(", ")
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: &str = "int f(int x)\n{\n\tif (x < 2)\n\t\treturn -EINVAL;\n\treturn x + 1;\n}\n";

    #[test]
    fn survivors_and_uncovered_mutants_in_their_source_context() {
        let ms = crate::mutants::find::mutants("kernel/x.c", SRC).unwrap();
        let boundary = ms.iter().find(|m| m.change() == "< -> <=").unwrap();
        let plus = ms.iter().find(|m| m.change() == "+ -> -").unwrap();
        let einval = ms.iter().find(|m| m.line == 4).unwrap();
        let result = |m: &Mutant, outcome| MutantResult {
            id: m.id.clone(),
            outcome,
            covered_by: vec!["abi/<ok>".into()],
            duration_ms: None,
            stage: None,
        };
        let results = BTreeMap::from([
            (boundary.id.clone(), result(boundary, Outcome::Survived)),
            (plus.id.clone(), result(plus, Outcome::NoCoverage)),
            (einval.id.clone(), result(einval, Outcome::Killed { by: vec!["abi/bad".into()], evidence: "x".into() })),
        ]);
        let page = render("kernel/x.c", SRC, &ms, &results);
        assert!(page.contains("<h2>Survived (1)</h2>"), "{page}");
        assert!(page.contains(&format!("<h3 id=\"{}\">", boundary.id)));
        // Its own line marked, escaped, with the lines around it.
        assert!(page.contains("<span class=\"hit\"><span class=\"ln\">3</span>\tif (x &lt; 2)</span>"), "{page}");
        assert!(page.contains("<span class=\"ln\">1</span>int f(int x)"));
        assert!(page.contains("<code>&lt; -&gt; &lt;=</code>"));
        assert!(page.contains("1 covering scenario(s) passed</summary><p><code>abi/&lt;ok&gt;</code>"));
        assert!(page.contains("<h2>NoCoverage: no scenario executes these lines (1)</h2>"));
        assert!(page.contains(&format!("<h3 id=\"{}\">", plus.id)));
        // A killed mutant is not shown.
        assert!(!page.contains(&format!("<h3 id=\"{}\">", einval.id)));
    }
}
