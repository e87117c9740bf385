//! Mutation points found by parsing C with tree-sitter's C grammar (sans-IO): PIT's default
//! operator families adapted to C, inside function bodies only, never in comments, macro
//! definitions, preprocessor conditions, unparsed (`ERROR`) regions or on lines that log.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{Context, Result};
use tree_sitter::{Node, Parser, Tree};

use super::mutant::{Mutant, Operator, Site, SiteKind};

/// Prefixes of the calls whose lines are never mutated: logging and assertions (a debug
/// kernel's checks of the caller's locking or context: removing one changes nothing a correct
/// kernel does, since it only ever fires on a bug, so each would be an equivalent mutant).
const NEVER_MUTATED: &[&str] = &[
    "pr_",
    "printk",
    "WARN",
    "BUG",
    "dev_err",
    "dev_warn",
    "dev_info",
    "dev_dbg",
    "lockdep_assert",
    "mmap_assert",
    "RCU_LOCKDEP_WARN",
    "VM_WARN",
    "VM_BUG",
    "might_",
];

/// Whether a call's lines are never mutated (see [`NEVER_MUTATED`]).
fn logs(name: &str) -> bool {
    NEVER_MUTATED.iter().any(|p| name.starts_with(p))
}

/// Subtrees never entered: comments, macro definitions, preprocessor conditions and calls, and
/// what the parser could not make sense of (macros it does not know can confuse it).
const SKIPPED: &[&str] =
    &["comment", "preproc_def", "preproc_function_def", "preproc_call", "preproc_include", "ERROR"];

/// `source` parsed with tree-sitter's C grammar.
pub fn parse(source: &str) -> Result<Tree> {
    let mut parser = Parser::new();
    parser.set_language(&tree_sitter_c::LANGUAGE.into()).context("loading tree-sitter's C grammar")?;
    parser.parse(source, None).context("tree-sitter could not parse the source")
}

/// Every mutant of `source`, in source order; `file` is its path inside the kernel tree.
pub fn mutants(file: &str, source: &str) -> Result<Vec<Mutant>> {
    let tree = parse(source)?;
    let mut found = Finder { src: source, file, function: String::new(), out: Vec::new(), logging: BTreeSet::new() };
    found.functions(tree.root_node());
    let logging = found.logging;
    let mut out: Vec<Mutant> = found.out.into_iter().filter(|m| !m.lines().any(|l| logging.contains(&l))).collect();
    out.sort_by_key(|m| (m.start_byte, m.end_byte, m.operator, m.replacement.clone()));
    // Two families can make the same change (`return 1;`: Constant and ReturnValue both give
    // `return 0;`): the first family keeps it.
    let mut seen = BTreeSet::new();
    out.retain(|m| seen.insert((m.start_byte, m.end_byte, m.replacement.clone())));
    assign_ids(&mut out);
    Ok(out)
}

/// The id: the first 12 hex digits of the digest of what the mutant is and its occurrence.
fn assign_ids(mutants: &mut [Mutant]) {
    let mut seen: BTreeMap<(String, String, Operator, String, String), usize> = BTreeMap::new();
    for m in mutants.iter_mut() {
        let key = (m.file.clone(), m.function.clone(), m.operator, m.original.clone(), m.replacement.clone());
        let n = seen.entry(key).or_default();
        let text = format!("{}\0{}\0{}\0{}\0{}\0{}", m.file, m.function, m.operator, m.original, m.replacement, n);
        m.id = crate::support::files::sha256_hex(text)[..12].to_string();
        *n += 1;
    }
}

struct Finder<'a> {
    src: &'a str,
    file: &'a str,
    function: String,
    out: Vec<Mutant>,
    /// Lines spanned by a logging call.
    logging: BTreeSet<u32>,
}

impl<'a> Finder<'a> {
    fn text(&self, node: Node) -> &'a str {
        &self.src[node.byte_range()]
    }

    /// Walks to the function definitions; their bodies are where mutants are.
    fn functions(&mut self, node: Node) {
        if SKIPPED.contains(&node.kind()) {
            return;
        }
        if node.kind() == "function_definition" {
            if let (Some(name), Some(body)) = (function_name(node, self.src), node.child_by_field_name("body")) {
                self.function = name;
                self.body(body);
            }
            return;
        }
        let mut cursor = node.walk();
        for child in node.children(&mut cursor) {
            self.functions(child);
        }
    }

    fn body(&mut self, node: Node) {
        if SKIPPED.contains(&node.kind()) {
            return;
        }
        match node.kind() {
            "binary_expression" => self.binary(node),
            "number_literal" => self.constant(node),
            "if_statement" => {
                if let Some(cond) = node.child_by_field_name("condition") {
                    let text = self.text(cond);
                    if let Some(inner) = text.strip_prefix('(').and_then(|t| t.strip_suffix(')')) {
                        self.push(cond, Operator::NegateCondition, format!("(!({inner}))"), cond, SiteKind::Expr);
                    }
                }
            }
            "expression_statement" => self.call_statement(node),
            "return_statement" => self.return_value(node),
            "call_expression" => {
                let name = node.child_by_field_name("function").map(|f| self.text(f)).unwrap_or_default();
                if logs(name) {
                    let (a, b) = (node.start_position().row as u32 + 1, node.end_position().row as u32 + 1);
                    self.logging.extend(a..=b);
                    return;
                }
            }
            // The condition of `#if`/`#elif` is the preprocessor's, not C's.
            "preproc_if" | "preproc_elif" => {
                let cond = node.child_by_field_name("condition").map(|c| c.id());
                let mut cursor = node.walk();
                for child in node.children(&mut cursor).filter(|c| Some(c.id()) != cond) {
                    self.body(child);
                }
                return;
            }
            _ => {}
        }
        let mut cursor = node.walk();
        for child in node.children(&mut cursor) {
            self.body(child);
        }
    }

    fn binary(&mut self, node: Node) {
        let Some(op) = node.child_by_field_name("operator") else { return };
        let (operator, repl) = match self.text(op) {
            "<" => (Operator::Boundary, "<="),
            "<=" => (Operator::Boundary, "<"),
            ">" => (Operator::Boundary, ">="),
            ">=" => (Operator::Boundary, ">"),
            "==" => (Operator::Equality, "!="),
            "!=" => (Operator::Equality, "=="),
            "&&" => (Operator::Logical, "||"),
            "||" => (Operator::Logical, "&&"),
            "+" => (Operator::Arithmetic, "-"),
            "-" => (Operator::Arithmetic, "+"),
            "&" => (Operator::Bitwise, "|"),
            "|" => (Operator::Bitwise, "&"),
            "<<" => (Operator::Bitwise, ">>"),
            ">>" => (Operator::Bitwise, "<<"),
            _ => return,
        };
        self.push(op, operator, repl.to_string(), node, SiteKind::Expr);
    }

    fn constant(&mut self, node: Node) {
        let Some((value, radix, prefix, suffix)) = parse_int(self.text(node)) else { return };
        let write = |v: u128| match radix {
            16 => format!("{prefix}{v:x}{suffix}"),
            8 if v != 0 => format!("0{v:o}{suffix}"),
            _ => format!("{v}{suffix}"),
        };
        if let Some(up) = value.checked_add(1) {
            self.push(node, Operator::Constant, write(up), node, SiteKind::Expr);
        }
        if let Some(down) = value.checked_sub(1) {
            self.push(node, Operator::Constant, write(down), node, SiteKind::Expr);
        }
    }

    fn call_statement(&mut self, node: Node) {
        let Some(expr) = node.named_child(0) else { return };
        if expr.kind() != "call_expression" || node.named_child_count() != 1 || !self.text(node).ends_with(';') {
            return;
        }
        self.push(node, Operator::RemoveCall, ";".to_string(), node, SiteKind::Stmt);
    }

    fn return_value(&mut self, node: Node) {
        let Some(expr) = node.named_child(0) else { return };
        if expr.kind() == "comment" {
            return;
        }
        let repl = match self.text(expr) {
            "0" => "-EINVAL",
            "true" => "false",
            "false" => "true",
            "NULL" => return,
            _ => "0",
        };
        self.push(expr, Operator::ReturnValue, repl.to_string(), expr, SiteKind::Expr);
    }

    /// Records the mutant replacing `node` by `replacement`; `site` is the node its schema wraps.
    fn push(&mut self, node: Node, operator: Operator, replacement: String, site: Node, kind: SiteKind) {
        let (start, end) = (node.start_position(), node.end_position());
        self.out.push(Mutant {
            id: String::new(),
            file: self.file.to_string(),
            function: self.function.clone(),
            operator,
            line: start.row as u32 + 1,
            column: start.column as u32 + 1,
            end_line: end.row as u32 + 1,
            end_column: end.column as u32 + 1,
            start_byte: node.start_byte(),
            end_byte: node.end_byte(),
            original: self.text(node).to_string(),
            replacement,
            site: Site { start: site.start_byte(), end: site.end_byte(), kind },
            schema_ok: schema_ok(site, kind, self.src),
        });
    }
}

/// Ancestors whose contents C evaluates at compile time (array sizes, enumerators, bit-field
/// widths, `sizeof`...) or, for brace initialisers, may have to: a runtime `?:` is no constant.
const CONSTANT_CONTEXTS: &[&str] = &[
    "array_declarator",
    "abstract_array_declarator",
    "enumerator",
    "bitfield_clause",
    "static_assert_declaration",
    "sizeof_expression",
    "alignof_expression",
    "offsetof_expression",
    "initializer_list",
    "attribute_specifier",
    "gnu_asm_expression",
];

/// Macros whose arguments must be constant expressions or are checked for being one (`min()`
/// and friends compare signedness at compile time), or are turned into text.
const CONSTANT_MACROS: &[&str] = &[
    "BUILD_BUG_ON",
    "BUILD_BUG_ON_MSG",
    "BUILD_BUG_ON_ZERO",
    "static_assert",
    "_Static_assert",
    "BIT",
    "GENMASK",
    "__builtin_constant_p",
    "__builtin_choose_expr",
    "DECLARE_BITMAP",
    "ARRAY_SIZE",
    "FIELD_SIZEOF",
    "sizeof_field",
    "__stringify",
    "min",
    "max",
    "min_t",
    "max_t",
    "clamp",
    "struct_size",
];

/// Whether a call statement is a macro that declares something (`LIST_HEAD(x);`,
/// `guard(mutex)(&m);`): inside a schema's `if` it would not compile or would declare in a
/// scope of its own, with errors then reported where the name is used, far from the site.
fn declares(call: Node, src: &str) -> bool {
    let Some(mut callee) = call.child_by_field_name("function") else { return false };
    // `guard(mutex)(&m)` calls what `guard(mutex)` gives.
    while callee.kind() == "call_expression" {
        match callee.child_by_field_name("function") {
            Some(f) => callee = f,
            None => return false,
        }
    }
    let name = &src[callee.byte_range()];
    matches!(name, "guard" | "scoped_guard" | "CLASS" | "LIST_HEAD" | "HLIST_HEAD" | "LLIST_HEAD")
        || name.starts_with("DEFINE_")
        || name.starts_with("DECLARE_")
}

/// Whether a schema may wrap `site` (see `Mutant::schema_ok`): none of its ancestors, up to
/// the function definition, needs a constant, and a statement site declares nothing.
fn schema_ok(site: Node, kind: SiteKind, src: &str) -> bool {
    if kind == SiteKind::Stmt && site.named_child(0).is_some_and(|call| declares(call, src)) {
        return false;
    }
    // The last operand of `?:` cannot be an assignment or a comma expression unparenthesised.
    if kind == SiteKind::Expr && matches!(site.kind(), "assignment_expression" | "comma_expression") {
        return false;
    }
    let mut node = site;
    while let Some(parent) = node.parent() {
        match parent.kind() {
            "function_definition" => break,
            // The label (`case 3:`, `case 1 ... 3:`) ends at the colon; the statements after it
            // are ordinary code.
            "case_statement" => {
                let mut cursor = parent.walk();
                let colon = parent.children(&mut cursor).find(|c| c.kind() == ":");
                if colon.is_none_or(|c| site.end_byte() <= c.start_byte()) {
                    return false;
                }
            }
            kind if CONSTANT_CONTEXTS.contains(&kind) => return false,
            "declaration" => {
                let mut cursor = parent.walk();
                let is_static = parent
                    .children(&mut cursor)
                    .any(|c| c.kind() == "storage_class_specifier" && &src[c.byte_range()] == "static");
                if is_static {
                    return false;
                }
            }
            "call_expression" => {
                let callee = parent.child_by_field_name("function").map(|f| &src[f.byte_range()]);
                if callee.is_some_and(|name| CONSTANT_MACROS.contains(&name)) {
                    return false;
                }
            }
            _ => {}
        }
        node = parent;
    }
    true
}

/// The name a function definition declares, through pointer and parenthesised declarators.
fn function_name(def: Node, src: &str) -> Option<String> {
    let mut node = def.child_by_field_name("declarator")?;
    loop {
        if node.kind() == "identifier" {
            return Some(src[node.byte_range()].to_string());
        }
        node = node.child_by_field_name("declarator").or_else(|| node.named_child(0))?;
    }
}

/// An integer literal's value, radix, prefix and suffix (`0x1fUL` -> (31, 16, "0x", "UL")).
fn parse_int(text: &str) -> Option<(u128, u32, &str, &str)> {
    let digits_end = text.find(['u', 'U', 'l', 'L']).unwrap_or(text.len());
    let (body, suffix) = text.split_at(digits_end);
    let (radix, prefix, digits) = if let Some(h) = body.strip_prefix("0x").or_else(|| body.strip_prefix("0X")) {
        (16, &body[..2], h)
    } else if body.len() > 1 && body.starts_with('0') {
        (8, "0", &body[1..])
    } else {
        (10, "", body)
    };
    let value = u128::from_str_radix(digits, radix).ok()?;
    Some((value, radix, prefix, suffix))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Also the source of `mutant`'s tests.
    pub(crate) const SRC: &str = "\
/* if (a < b) in a comment */
#define MAX(a, b) ((a) > (b) ? (a) : (b))
static int table[4] = { 1, 2 };

static int check(int x, int y)
{
\tif (x < y && y != 0)
\t\treturn -EINVAL;
\tpr_warn(\"x=%d\\n\", x + 1);
\tWARN_ON_ONCE(x == 3);
\tlockdep_assert_held(&lock); might_sleep();
\tkfree(x);
\treturn x << 0x1f;
}

static bool *ptr(int z)
{
\treturn NULL;
}

static int one(void)
{
\treturn 1;
}
";

    fn summary(ms: &[Mutant]) -> Vec<String> {
        ms.iter().map(|m| format!("{}:{} {} {} {}", m.line, m.column, m.function, m.operator, m.change())).collect()
    }

    #[test]
    fn finds_each_family_inside_functions_only() {
        let ms = mutants("lib/x.c", SRC).unwrap();
        let check: Vec<Mutant> = ms.iter().filter(|m| m.function == "check").cloned().collect();
        assert_eq!(
            summary(&check),
            [
                "7:5 check NegateCondition (x < y && y != 0) -> (!(x < y && y != 0))",
                "7:8 check Boundary < -> <=",
                "7:12 check Logical && -> ||",
                "7:17 check Equality != -> ==",
                "7:20 check Constant 0 -> 1",
                "8:10 check ReturnValue -EINVAL -> 0",
                "12:2 check RemoveCall kfree(x); -> ;",
                "13:9 check ReturnValue x << 0x1f -> 0",
                "13:11 check Bitwise << -> >>",
                "13:14 check Constant 0x1f -> 0x1e",
                "13:14 check Constant 0x1f -> 0x20",
            ]
        );
        // Comments, the macro's definition, file-scope initialisers, the logging and assertion lines and
        // `return NULL` give none; `return 1;` to `return 0;` is one mutant, not two.
        let one: Vec<String> = summary(&ms).into_iter().filter(|s| s.contains(" one ")).collect();
        assert_eq!(one, ["23:9 one Constant 1 -> 0", "23:9 one Constant 1 -> 2"]);
        assert!(ms.iter().all(|m| m.function == "check" || m.function == "one"));
    }

    #[test]
    fn ids_are_stable_against_edits_elsewhere_and_distinct() {
        let ms = mutants("lib/x.c", SRC).unwrap();
        let ids: BTreeSet<&str> = ms.iter().map(|m| m.id.as_str()).collect();
        assert_eq!(ids.len(), ms.len());
        let edited = SRC.replace(
            "static bool *ptr(int z)",
            "static int other(int q)\n{\n\treturn q + 1;\n}\n\nstatic bool *ptr(int z)",
        );
        let again = mutants("lib/x.c", &edited).unwrap();
        for m in &ms {
            let same = again.iter().find(|n| n.id == m.id).expect("the id survives an unrelated edit");
            assert_eq!((same.operator, &same.original, &same.function), (m.operator, &m.original, &m.function));
        }
        assert_eq!(again.len(), ms.len() + 4, "the new function's own mutants");
    }

    #[test]
    fn sites_are_the_nodes_a_schema_wraps() {
        let ms = mutants("lib/x.c", SRC).unwrap();
        let sites: Vec<String> = ms
            .iter()
            .filter(|m| m.function == "check")
            .map(|m| format!("{} {:?} {}", m.operator, m.site.kind, &SRC[m.site.start..m.site.end]))
            .collect();
        assert_eq!(
            sites,
            [
                "NegateCondition Expr (x < y && y != 0)",
                "Boundary Expr x < y",
                "Logical Expr x < y && y != 0",
                "Equality Expr y != 0",
                "Constant Expr 0",
                "ReturnValue Expr -EINVAL",
                "RemoveCall Stmt kfree(x);",
                "ReturnValue Expr x << 0x1f",
                "Bitwise Expr x << 0x1f",
                "Constant Expr 0x1f",
                "Constant Expr 0x1f",
            ]
        );
        assert!(ms.iter().all(|m| m.schema_ok && m.site.start <= m.start_byte && m.end_byte <= m.site.end));
    }

    #[test]
    fn schemata_stay_out_of_constant_expressions_and_declarations() {
        let src = "\
int f(int x)
{
\tstatic int s = 1;
\tint a[2 + 3];
\tint v[] = { 4 };
\tenum { E = 5 };
\tstruct { int b : 6; } bf;
\tBUILD_BUG_ON(E > 7);
\tLIST_HEAD(l);
\tswitch (x) {
\tcase 8:
\t\tg(x + 9);
\t}
\treturn min(x, 10) - sizeof(x & 11);
}
";
        let ms = mutants("lib/x.c", src).unwrap();
        let ok = |want: bool| -> BTreeSet<String> {
            ms.iter().filter(|m| m.schema_ok == want).map(|m| m.original.clone()).collect()
        };
        // Left out: the static initialiser, the array size, the brace initialiser, the
        // enumerator, the bit-field width, BUILD_BUG_ON's argument, the declaring macro, the
        // case label, min's and sizeof's arguments.
        let left_out = ["1", "2", "+", "3", "4", "5", "6", ">", "7", "LIST_HEAD(l);", "8", "10", "&", "11"];
        assert_eq!(ok(false), left_out.into_iter().map(String::from).collect());
        // Kept: the case's statements, the returned expression and its own operator, and the
        // BUILD_BUG_ON statement as a whole (skipping it at run time still checks it).
        let kept = ["BUILD_BUG_ON(E > 7);", "g(x + 9);", "+", "9", "min(x, 10) - sizeof(x & 11)", "-"];
        assert_eq!(ok(true), kept.into_iter().map(String::from).collect());
    }

    #[test]
    fn integer_literals() {
        assert_eq!(parse_int("0x1fUL"), Some((31, 16, "0x", "UL")));
        assert_eq!(parse_int("017"), Some((15, 8, "0", "")));
        assert_eq!(parse_int("0"), Some((0, 10, "", "")));
        assert_eq!(parse_int("1.5"), None);
    }
}
