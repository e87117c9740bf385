//! Mutant schemata (sans-IO): one source file holding every mutant behind a runtime switch, so
//! one kernel build serves all mutants, mutant N being chosen at boot by
//! `trace_events_user.mutant=N` (0, the default, runs the original code).
//!
//! Each site (the expression or statement around a mutation, see `mutant::Site`) becomes
//! `(ue_mutant == A ? <A applied> : ue_mutant == B ? <B applied> : <the original>)` or, for a
//! statement, `{ if (ue_mutant != A) <the original> }`. A mutated branch is the site's
//! original text with one change, since when mutant A is active no other is; the original
//! branch recurses into the sites nested in it.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};

use super::find;
use super::mutant::{Mutant, SiteKind};

/// The C variable holding the active mutant's number.
pub const SWITCH: &str = "ue_mutant";

/// The kernel parameter that sets it: `module_param_named(mutant, ...)` in built-in code is
/// `<KBUILD_MODNAME>.mutant` on the command line.
pub const PARAM: &str = "trace_events_user.mutant";

/// The declaration inserted after the file's last top-level `#include`. `moduleparam.h` is
/// included in case the file does not already pull it in (it has include guards).
const DECLARATION: &str = "\
/* Mutant schemata (cargo xtask mutants): mutant N is active when ue_mutant == N. */
#include <linux/moduleparam.h>
static int ue_mutant;
module_param_named(mutant, ue_mutant, int, 0644);
";

/// The schemata source and where each mutant is in it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Schemata {
    pub text: String,
    /// Mutant id -> its number N (from 1), for the mutants included.
    pub numbers: Vec<(String, u32)>,
    /// N -> byte range in `text` of its own mutated branch (for a statement mutant, of its
    /// `ue_mutant != N` test).
    pub spans: Vec<(u32, usize, usize)>,
    /// The numbers of one site's mutants -> byte range in `text` of that site's whole schema.
    pub sites: Vec<(Vec<u32>, usize, usize)>,
}

/// One site with the mutants it switches between and the sites nested in it.
struct Group<'m> {
    start: usize,
    end: usize,
    kind: SiteKind,
    mutants: Vec<(u32, &'m Mutant)>,
    /// Indices of the maximal sites strictly inside this one, in source order.
    inner: Vec<usize>,
}

/// The schemata of `source` for `mutants` (those without `schema_ok`, or whose site partially
/// overlaps an earlier one, are left out).
pub fn schemata(source: &str, mutants: &[&Mutant]) -> Schemata {
    let (groups, top) = nest(mutants);
    let mut numbers: Vec<(String, u32)> =
        groups.iter().flat_map(|g| g.mutants.iter().map(|(n, m)| (m.id.clone(), *n))).collect();
    numbers.sort_by_key(|(_, n)| *n);
    let mut w = Writer { src: source, groups: &groups, out: Schemata { numbers, ..Schemata::default() } };
    let insert_at = after_last_include(source);
    let mut inserted = false;
    let mut cursor = 0;
    // Sites are inside function bodies and the insertion point is at file scope, so it falls
    // in one of the gaps between top-level sites.
    let ends = top.iter().map(|&i| (groups[i].start, Some(i))).chain([(source.len(), None)]);
    for (gap_end, site) in ends {
        if !inserted && insert_at <= gap_end {
            let at = insert_at.max(cursor);
            w.out.text += &source[cursor..at];
            w.out.text += DECLARATION;
            cursor = at;
            inserted = true;
        }
        w.out.text += &source[cursor..gap_end];
        if let Some(i) = site {
            w.emit(i);
            cursor = groups[i].end;
        }
    }
    w.out
}

/// Groups the usable mutants by site, numbers them in the order given, and nests the sites:
/// returns the groups and the indices of the top-level ones.
fn nest<'m>(mutants: &[&'m Mutant]) -> (Vec<Group<'m>>, Vec<usize>) {
    // Keyed by (start, reversed end) so outer sites come first (same start: longer first) and
    // a site's container is already placed when it comes.
    let mut by_site: BTreeMap<(usize, Reverse<usize>), Vec<usize>> = BTreeMap::new();
    for (k, m) in mutants.iter().enumerate() {
        if m.schema_ok && m.site.start <= m.start_byte && m.end_byte <= m.site.end {
            by_site.entry((m.site.start, Reverse(m.site.end))).or_default().push(k);
        }
    }
    let mut groups: Vec<Group> = Vec::new();
    let mut top = Vec::new();
    // The chain of sites containing the current position, outermost first.
    let mut open: Vec<usize> = Vec::new();
    for ((start, Reverse(end)), ks) in by_site {
        while open.last().is_some_and(|&o| groups[o].end <= start) {
            open.pop();
        }
        // Starting inside a site but ending after it: not a tree, leave it out.
        if open.last().is_some_and(|&o| end > groups[o].end) {
            continue;
        }
        let index = groups.len();
        match open.last() {
            Some(&parent) => groups[parent].inner.push(index),
            None => top.push(index),
        }
        // The mutants of a site agree on its kind; should they not, the first decides.
        let kind = mutants[ks[0]].site.kind;
        let ms = ks.into_iter().filter(|&k| mutants[k].site.kind == kind).map(|k| (k as u32, mutants[k])).collect();
        groups.push(Group { start, end, kind, mutants: ms, inner: Vec::new() });
        open.push(index);
    }
    // Number the included mutants from 1 in the caller's order (the slot holds the index so far).
    let included: BTreeSet<u32> = groups.iter().flat_map(|g| g.mutants.iter().map(|&(k, _)| k)).collect();
    let number: BTreeMap<u32, u32> = included.into_iter().zip(1..).collect();
    for g in &mut groups {
        for (n, _) in &mut g.mutants {
            *n = number[n];
        }
    }
    (groups, top)
}

struct Writer<'a, 'm> {
    src: &'a str,
    groups: &'a [Group<'m>],
    out: Schemata,
}

impl Writer<'_, '_> {
    /// Appends site `i`'s schema to the text.
    fn emit(&mut self, i: usize) {
        let g = &self.groups[i];
        let start = self.out.text.len();
        match g.kind {
            SiteKind::Expr => {
                self.out.text.push('(');
                for &(n, m) in &g.mutants {
                    self.out.text += &format!("{SWITCH} == {n} ? ");
                    let branch = self.out.text.len();
                    self.out.text += &self.src[g.start..m.start_byte];
                    self.out.text += &m.replacement;
                    self.out.text += &self.src[m.end_byte..g.end];
                    self.out.spans.push((n, branch, self.out.text.len()));
                    self.out.text += " : ";
                }
                self.original(i);
                self.out.text.push(')');
            }
            SiteKind::Stmt => {
                // The braces keep `if (c) f(x); else g();` one statement before the `else`.
                self.out.text += "{ if (";
                for (k, &(n, _)) in g.mutants.iter().enumerate() {
                    if k > 0 {
                        self.out.text += " && ";
                    }
                    let test = self.out.text.len();
                    self.out.text += &format!("{SWITCH} != {n}");
                    self.out.spans.push((n, test, self.out.text.len()));
                }
                self.out.text += ") ";
                self.original(i);
                self.out.text += " }";
            }
        }
        let ns = g.mutants.iter().map(|&(n, _)| n).collect();
        self.out.sites.push((ns, start, self.out.text.len()));
    }

    /// Appends site `i`'s original text with its inner sites' schemata in it.
    fn original(&mut self, i: usize) {
        let g = &self.groups[i];
        let mut cursor = g.start;
        for &inner in &g.inner {
            self.out.text += &self.src[cursor..self.groups[inner].start];
            self.emit(inner);
            cursor = self.groups[inner].end;
        }
        self.out.text += &self.src[cursor..g.end];
    }
}

/// The byte offset just after the line of the last `#include` at file scope (not inside an
/// `#if`, which could leave the declaration out), or 0 when there is none.
fn after_last_include(source: &str) -> usize {
    let Ok(tree) = find::parse(source) else { return 0 };
    let root = tree.root_node();
    let mut cursor = root.walk();
    let Some(include) = root.children(&mut cursor).filter(|c| c.kind() == "preproc_include").last() else {
        return 0;
    };
    let end = include.end_byte();
    if source[..end].ends_with('\n') {
        end
    } else {
        source[end..].find('\n').map_or(source.len(), |i| end + i + 1)
    }
}

/// The mutants to drop for compiler errors at `text_positions` (1-based line, 1-based byte
/// column in `s.text`): a position in a mutant's own mutated branch blames that mutant; one
/// elsewhere in sites blames every mutant of the innermost such site (the `?:` or `if` around
/// them did not compile); one outside every site blames none.
pub fn culprits(s: &Schemata, text_positions: &[(u32, u32)]) -> BTreeSet<u32> {
    let line_starts: Vec<usize> = [0].into_iter().chain(s.text.match_indices('\n').map(|(i, _)| i + 1)).collect();
    let mut out = BTreeSet::new();
    for &(line, column) in text_positions {
        let Some(&line_start) = line_starts.get((line as usize).wrapping_sub(1)) else { continue };
        let at = line_start + (column as usize).saturating_sub(1);
        if let Some(&(n, _, _)) = s.spans.iter().find(|&&(_, a, b)| a <= at && at < b) {
            out.insert(n);
        } else if let Some((ns, _, _)) =
            s.sites.iter().filter(|(_, a, b)| *a <= at && at < *b).min_by_key(|(_, a, b)| b - a)
        {
            out.extend(ns);
        }
    }
    out
}

/// A unified diff replacing the whole of `file` (`before` becomes `after`), for `patch -p1` in
/// the kernel tree: the schemata source as one more `--patch`.
pub fn whole_file_diff(file: &str, before: &str, after: &str) -> String {
    let count = |t: &str| t.split_inclusive('\n').count();
    let mut out = format!("--- a/{file}\n+++ b/{file}\n@@ -1,{} +1,{} @@\n", count(before), count(after));
    for (sign, text) in [('-', before), ('+', after)] {
        for line in text.split_inclusive('\n') {
            out.push(sign);
            out.push_str(line);
            if !line.ends_with('\n') {
                out.push_str("\n\\ No newline at end of file\n");
            }
        }
    }
    out
}

/// Where in `text` (the schemata of `file`) a build log's compiler errors are: the position of
/// each `error:` in `file`, and of the notes that follow it there (`in expansion of macro`: an
/// error inside a header's macro names the use in `file` in a note). gcc counts columns with
/// tabs expanded to 8 (its default `-fdiagnostics-column-unit=display`); they come back as
/// 1-based byte columns.
pub fn error_positions(log: &str, file: &str, text: &str) -> Vec<(u32, u32)> {
    let lines: Vec<&str> = text.lines().collect();
    let name = format!("{file}:");
    let mut in_error = false;
    let mut out = Vec::new();
    for l in log.lines() {
        if l.contains(": warning:") {
            in_error = false;
            continue;
        }
        let error = l.contains(": error:");
        in_error |= error;
        if !(error || in_error && l.contains(": note:")) {
            continue;
        }
        let Some(at) = l.find(&name).filter(|&i| i == 0 || l[..i].ends_with('/')) else { continue };
        let mut nums = l[at + name.len()..].splitn(3, ':');
        let (Some(Ok(line)), Some(Ok(column))) =
            (nums.next().map(str::parse::<u32>), nums.next().map(str::parse::<u32>))
        else {
            continue;
        };
        let source_line = lines.get((line as usize).wrapping_sub(1)).copied().unwrap_or("");
        out.push((line, byte_column(source_line, column)));
    }
    out
}

/// The 1-based byte column of 1-based display column `display` in `line` (tabs to 8).
fn byte_column(line: &str, display: u32) -> u32 {
    let mut col = 1;
    for (i, c) in line.char_indices() {
        if col >= display {
            return i as u32 + 1;
        }
        col += if c == '\t' { 8 - (col - 1) % 8 } else { 1 };
    }
    line.len() as u32 + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str = "#include <linux/x.h>\n";

    fn build(src: &str) -> (Vec<Mutant>, Schemata) {
        let ms = find::mutants("kernel/x.c", src).unwrap();
        let refs: Vec<&Mutant> = ms.iter().collect();
        let s = schemata(src, &refs);
        (ms, s)
    }

    /// The text without the declaration, for comparing with hand-written expectations.
    fn body(s: &Schemata) -> String {
        s.text.replacen(DECLARATION, "", 1).strip_prefix(HEADER).unwrap().to_string()
    }

    /// The schemata with every mutant off, written back as plain C: each `ue_mutant == N ? X :`
    /// choice and each `if (ue_mutant != N)` guard removed with the brackets around them.
    fn all_off(s: &Schemata) -> String {
        let mut cut: Vec<(usize, usize)> = Vec::new();
        let span = |n: u32| s.spans.iter().find(|&&(m, _, _)| m == n).map(|&(_, a, b)| (a, b)).unwrap();
        for (ns, a, b) in &s.sites {
            if s.text[*a..].starts_with("{ if (") {
                let (_, last) = span(*ns.last().unwrap());
                cut.extend([(*a, last + ") ".len()), (b - " }".len(), *b)]);
            } else {
                cut.extend([(*a, a + 1), (b - 1, *b)]);
                for &n in ns {
                    let (x, y) = span(n);
                    cut.push((x - format!("{SWITCH} == {n} ? ").len(), y + " : ".len()));
                }
            }
        }
        let at = s.text.find(DECLARATION).unwrap();
        cut.push((at, at + DECLARATION.len()));
        cut.sort();
        let (mut out, mut cursor) = (String::new(), 0);
        for (a, b) in cut {
            // Cuts inside an earlier cut (a mutated branch holds no schema) are already gone.
            if a >= cursor {
                out += &s.text[cursor..a];
                cursor = b;
            }
        }
        out + &s.text[cursor..]
    }

    #[test]
    fn nested_sites_choose_at_run_time_and_fall_back_to_the_original() {
        let src = format!("{HEADER}\nstatic int f(int x)\n{{\n\tif (x < 3)\n\t\treturn x + 1;\n\treturn 0;\n}}\n");
        let (ms, s) = build(&src);
        assert_eq!(ms.len(), 10);
        assert_eq!(
            body(&s),
            "\nstatic int f(int x)\n{\n\
             \tif (ue_mutant == 1 ? (!(x < 3)) : ((ue_mutant == 2 ? x <= 3 : x < (ue_mutant == 3 ? 2 : ue_mutant == 4 ? 4 : 3))))\n\
             \t\treturn (ue_mutant == 5 ? 0 : ue_mutant == 6 ? x - 1 : x + (ue_mutant == 7 ? 0 : ue_mutant == 8 ? 2 : 1));\n\
             \treturn (ue_mutant == 9 ? 1 : ue_mutant == 10 ? -EINVAL : 0);\n}\n"
        );
        let numbers: Vec<u32> = s.numbers.iter().map(|&(_, n)| n).collect();
        assert_eq!(numbers, (1..=10).collect::<Vec<_>>());
        assert_eq!(s.numbers[0].0, ms[0].id);
        // Each span is its mutant applied to its site.
        for (m, &(n, a, b)) in ms.iter().zip(&s.spans) {
            assert_eq!(n, s.numbers.iter().find(|(id, _)| *id == m.id).unwrap().1);
            let site = &src[m.site.start..m.site.end];
            let start = m.start_byte - m.site.start;
            let applied = format!("{}{}{}", &site[..start], m.replacement, &site[start + m.original.len()..]);
            assert_eq!(&s.text[a..b], applied);
        }
        assert_eq!(all_off(&s), src);
    }

    #[test]
    fn the_declaration_follows_the_last_include_at_file_scope() {
        let src =
            "#include <a.h>\n#include \"b.h\"\n#ifdef C\n#include <c.h>\n#endif\n\nint f(void)\n{\n\treturn 2;\n}\n";
        let (_, s) = build(src);
        assert!(s.text.starts_with(&format!("#include <a.h>\n#include \"b.h\"\n{DECLARATION}#ifdef C\n")));
        assert_eq!(all_off(&s), src);
        // Every span and site moved with the insertion.
        assert_eq!(&s.text[s.spans[0].1..s.spans[0].2], "1");
        assert_eq!(
            &s.text[s.sites[0].1..s.sites[0].2],
            "(ue_mutant == 1 ? 1 : ue_mutant == 2 ? 3 : ue_mutant == 3 ? 0 : 2)"
        );
        // No include at all: the declaration comes first.
        let (_, s) = build("int f(void)\n{\n\treturn 2;\n}\n");
        assert!(s.text.starts_with(DECLARATION));
    }

    #[test]
    fn a_removed_call_is_guarded_in_braces_that_keep_the_else() {
        let src = format!("{HEADER}void f(int x)\n{{\n\tif (x)\n\t\tkfree(x);\n\telse\n\t\tg(x);\n}}\n");
        let (ms, s) = build(&src);
        assert_eq!(ms.iter().filter(|m| m.site.kind == SiteKind::Stmt).count(), 2);
        assert_eq!(
            body(&s),
            "void f(int x)\n{\n\tif (ue_mutant == 1 ? (!(x)) : (x))\n\
             \t\t{ if (ue_mutant != 2) kfree(x); }\n\telse\n\t\t{ if (ue_mutant != 3) g(x); }\n}\n"
        );
        assert_eq!(all_off(&s), src);
        // Two statement mutants on one statement: both must be off for it to run.
        let mut twin = ms[1].clone();
        twin.id = "twin".into();
        let s = schemata(&src, &[&ms[1], &twin]);
        assert!(s.text.contains("{ if (ue_mutant != 1 && ue_mutant != 2) kfree(x); }"), "{}", s.text);
        assert_eq!(all_off(&s), src);
    }

    #[test]
    fn the_arguments_of_a_removed_call_hold_their_own_schemata() {
        let src = format!("{HEADER}void f(int x)\n{{\n\tg(x + 1);\n}}\n");
        let (_, s) = build(&src);
        assert_eq!(
            body(&s),
            "void f(int x)\n{\n\t{ if (ue_mutant != 1) g((ue_mutant == 2 ? x - 1 : x + (ue_mutant == 3 ? 0 : ue_mutant == 4 ? 2 : 1))); }\n}\n"
        );
        assert_eq!(all_off(&s), src);
    }

    #[test]
    fn constants_c_needs_at_compile_time_are_left_out() {
        let src = format!(
            "{HEADER}int f(int x)\n{{\n\tchar buf[8];\n\n\tswitch (x) {{\n\tcase 3:\n\t\treturn x > 2;\n\t}}\n\treturn 0;\n}}\n"
        );
        let (ms, s) = build(&src);
        let left_out: Vec<String> = ms.iter().filter(|m| !m.schema_ok).map(|m| m.change()).collect();
        assert_eq!(left_out, ["8 -> 7", "8 -> 9", "3 -> 2", "3 -> 4"]);
        assert_eq!(s.numbers.len(), ms.len() - 4);
        assert!(ms.iter().filter(|m| !m.schema_ok).all(|m| !s.numbers.iter().any(|(id, _)| *id == m.id)));
        assert!(
            s.text.contains("\tchar buf[8];\n\n\tswitch (x) {\n\tcase 3:\n\t\treturn (ue_mutant == 1 ? 0 : "),
            "{}",
            s.text
        );
        assert_eq!(all_off(&s), src);
    }

    #[test]
    fn a_site_crossing_another_is_left_out() {
        let src = format!("{HEADER}int f(int x)\n{{\n\treturn x + 1;\n}}\n");
        let (ms, _) = build(&src);
        // The `+` mutant made to claim `+ 1;`, which crosses the returned expression's end.
        let mut crossing =
            ms.iter().find(|m| m.operator == crate::mutants::mutant::Operator::Arithmetic).unwrap().clone();
        crossing.id = "crossing".into();
        crossing.site =
            crate::mutants::mutant::Site { start: crossing.start_byte, end: crossing.site.end + 1, ..crossing.site };
        let mut with: Vec<&Mutant> = ms.iter().collect();
        with.push(&crossing);
        let s = schemata(&src, &with);
        assert_eq!(s.numbers.len(), ms.len());
        assert!(!s.numbers.iter().any(|(id, _)| id == "crossing"));
        assert_eq!(all_off(&s), src);
    }

    #[test]
    fn compiler_errors_blame_a_branch_or_else_the_innermost_site() {
        let src = format!("{HEADER}int f(int x)\n{{\n\treturn x + 1;\n}}\n");
        let (_, s) = build(&src);
        let line = s.text.lines().position(|l| l.starts_with("\treturn")).unwrap() as u32 + 1;
        let text = s.text.lines().nth(line as usize - 1).unwrap();
        assert_eq!(text, "\treturn (ue_mutant == 1 ? 0 : ue_mutant == 2 ? x - 1 : x + (ue_mutant == 3 ? 0 : ue_mutant == 4 ? 2 : 1));");
        let column = |needle: &str| text.find(needle).unwrap() as u32 + 1;
        // In mutant 2's branch `x - 1`.
        assert_eq!(culprits(&s, &[(line, column("- 1"))]), BTreeSet::from([2]));
        // On the outer `?:` itself, or in the fallback outside the inner site: the outer site's.
        assert_eq!(culprits(&s, &[(line, column("? 0 :"))]), BTreeSet::from([1, 2]));
        assert_eq!(culprits(&s, &[(line, column("x + ("))]), BTreeSet::from([1, 2]));
        // On the inner site's `?:`: the inner site's only.
        assert_eq!(culprits(&s, &[(line, column("ue_mutant == 4"))]), BTreeSet::from([3, 4]));
        // Outside any site, or not in the text: nobody; several positions: the union.
        assert_eq!(culprits(&s, &[(line, 2), (1, 1), (999, 1), (0, 1)]), BTreeSet::new());
        assert_eq!(culprits(&s, &[(line, column("- 1")), (line, column("2 : 1"))]), BTreeSet::from([2, 4]));
    }

    /// The number of `ERROR` and `MISSING` nodes tree-sitter finds in `text`, by their text.
    fn parse_errors(text: &str) -> BTreeMap<String, usize> {
        fn walk(node: tree_sitter::Node, text: &str, out: &mut BTreeMap<String, usize>) {
            if node.is_error() || node.is_missing() {
                *out.entry(format!("{} {:?}", node.kind(), &text[node.byte_range()])).or_default() += 1;
            }
            let mut cursor = node.walk();
            for child in node.children(&mut cursor) {
                walk(child, text, out);
            }
        }
        let mut out = BTreeMap::new();
        walk(find::parse(text).unwrap().root_node(), text, &mut out);
        out
    }

    /// On the kernel file under test, when the test-data cache has it:
    /// `cargo test -p xtask --lib real_file -- --ignored --nocapture`.
    #[test]
    #[ignore = "needs the kernel tree in the test-data cache"]
    fn real_file() {
        let path =
            "/root/.cache/user-events-conformance/test-data/git-585a4a074597aefa/kernel/trace/trace_events_user.c";
        let Ok(src) = std::fs::read_to_string(path) else { return };
        let (ms, s) = build(&src);
        let excluded: Vec<String> = ms
            .iter()
            .filter(|m| !m.schema_ok)
            .map(|m| format!("{}:{} {} {}", m.line, m.column, m.operator, m.change()))
            .collect();
        eprintln!("{} mutants: {} included, {} excluded: {excluded:#?}", ms.len(), s.numbers.len(), excluded.len());
        assert_eq!(s.numbers.len() + excluded.len(), ms.len());
        assert_eq!(all_off(&s), src);
        // tree-sitter's own confusions (`__user`, type names as macro arguments) come back where
        // the text around them is copied into mutated branches, but no new kind of error.
        let (before, after) = (parse_errors(&src), parse_errors(&s.text));
        let count = |e: &BTreeMap<String, usize>| e.values().sum::<usize>();
        eprintln!("tree-sitter errors: {} in the source, {} in the schemata", count(&before), count(&after));
        let new: Vec<&String> = after.keys().filter(|e| !before.contains_key(*e)).collect();
        assert!(new.is_empty(), "{new:?}");
    }

    #[test]
    fn a_whole_file_diff_applies_with_patch() {
        let d = whole_file_diff("k/a.c", "one\ntwo\n", "one\n2\nthree");
        assert_eq!(
            d,
            "--- a/k/a.c\n+++ b/k/a.c\n@@ -1,2 +1,3 @@\n-one\n-two\n+one\n+2\n+three\n\\ No newline at end of file\n"
        );
    }

    #[test]
    fn compiler_errors_become_byte_positions_in_the_schemata() {
        let text = "int a;\n\tx = (ue_mutant == 1 ? 2 : 3);\n";
        let log = "\
  CC      kernel/trace/trace_events_user.o
/c/k/t/u.c:2:17: warning: unused [-Wunused]
/c/k/t/u.c:2:18: note: not this one
In file included from x.h:1:
include/linux/bits.h:7:3: error: bad
/c/k/t/u.c:2:13: note: in expansion of macro 'BIT'
/c/k/t/u.c:1:1: error: other
make[4]: *** Error 1";
        // Display column 13 is the `(` after the tab (8 columns) and `x = `: byte 6.
        assert_eq!(error_positions(log, "t/u.c", text), [(2, 6), (1, 1)]);
        assert!(error_positions(log, "u.c", text).len() == 2, "a bare name matches after a slash");
        assert!(error_positions(log, "k/u.c", text).is_empty(), "not a different path");
    }
}
