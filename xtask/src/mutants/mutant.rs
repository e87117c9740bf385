//! A mutant: a span of a kernel C file, what replaces it, the operator family it is of and the
//! syntax node a schema wraps; applied to the source, as a diff `patch -p1` takes, in a few
//! words (sans-IO). `find` finds them.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A family of mutations (the report's `mutatorName`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Operator {
    /// `<` <-> `<=`, `>` <-> `>=`.
    Boundary,
    /// `==` <-> `!=`.
    Equality,
    /// `if (x)` -> `if (!(x))`.
    NegateCondition,
    /// `&&` <-> `||`.
    Logical,
    /// `+` <-> `-` (binary).
    Arithmetic,
    /// `&` <-> `|`, `<<` <-> `>>` (binary).
    Bitwise,
    /// An integer literal `n` -> `n + 1`, `n - 1` (written as literals in the same base).
    Constant,
    /// A statement that is only a call, removed (`f(x);` -> `;`).
    RemoveCall,
    /// `return e;` -> `return 0;`, and `return 0;` -> `return -EINVAL;`, `true` <-> `false`.
    ReturnValue,
}

impl Operator {
    pub const ALL: [Operator; 9] = [
        Operator::Boundary,
        Operator::Equality,
        Operator::NegateCondition,
        Operator::Logical,
        Operator::Arithmetic,
        Operator::Bitwise,
        Operator::Constant,
        Operator::RemoveCall,
        Operator::ReturnValue,
    ];
}

impl fmt::Display for Operator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// One mutant: a span of the source and what replaces it (read back from `--json`, without
/// its byte offsets and schema site).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mutant {
    /// Stable: a digest of the file, function, operator, original and replacement text and the
    /// occurrence of that same mutation within the function, so edits elsewhere keep it.
    pub id: String,
    /// The path inside the kernel tree (`kernel/trace/trace_events_user.c`).
    pub file: String,
    pub function: String,
    pub operator: Operator,
    /// 1-based; columns count bytes, the end is exclusive.
    pub line: u32,
    pub column: u32,
    pub end_line: u32,
    pub end_column: u32,
    #[serde(skip)]
    pub start_byte: usize,
    #[serde(skip)]
    pub end_byte: usize,
    pub original: String,
    pub replacement: String,
    /// The syntax node a mutant schema wraps (see `schemata`): it contains the span.
    #[serde(skip)]
    pub site: Site,
    /// Whether the site can take a runtime `?:` or `if`: false where C needs a constant
    /// expression (a `case` label, an array size, a static initialiser...) or where a schema
    /// would change what the code declares.
    #[serde(skip)]
    pub schema_ok: bool,
}

/// The syntax node around a mutant that a schema replaces by a runtime choice.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Site {
    /// Byte range in the source.
    pub start: usize,
    pub end: usize,
    pub kind: SiteKind,
}

/// What a site is, so how a schema chooses at run time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SiteKind {
    /// An expression: `(ue_mutant == N ? mutated : original)`.
    #[default]
    Expr,
    /// A statement: `{ if (ue_mutant != N) original }`.
    Stmt,
}

impl Mutant {
    /// The source with this mutant applied.
    pub fn apply(&self, source: &str) -> String {
        format!("{}{}{}", &source[..self.start_byte], self.replacement, &source[self.end_byte..])
    }

    /// The lines (1-based) the mutant's span covers.
    pub fn lines(&self) -> std::ops::RangeInclusive<u32> {
        self.line..=self.end_line
    }

    /// A unified diff with three lines of context that `patch -p1` applies in the kernel tree.
    pub fn diff(&self, source: &str) -> String {
        let lines: Vec<&str> = source.split_inclusive('\n').collect();
        let (first, last) = (self.line as usize - 1, self.end_line as usize - 1);
        let line_start = source[..self.start_byte].rfind('\n').map_or(0, |i| i + 1);
        let line_end = source[self.end_byte..].find('\n').map_or(source.len(), |i| self.end_byte + i + 1);
        let new_text =
            format!("{}{}{}", &source[line_start..self.start_byte], self.replacement, &source[self.end_byte..line_end]);
        let new_lines: Vec<&str> = new_text.split_inclusive('\n').collect();
        let before = first.saturating_sub(3);
        let after = (last + 4).min(lines.len());
        let mut out = format!("--- a/{0}\n+++ b/{0}\n", self.file);
        let old_count = after - before;
        let new_count = old_count - (last - first + 1) + new_lines.len();
        out += &format!("@@ -{},{} +{},{} @@ {}\n", before + 1, old_count, before + 1, new_count, self.function);
        let mut push = |prefix: char, line: &str| {
            out.push(prefix);
            out.push_str(line);
            if !line.ends_with('\n') {
                out.push_str("\n\\ No newline at end of file\n");
            }
        };
        lines[before..first].iter().for_each(|l| push(' ', l));
        lines[first..=last].iter().for_each(|l| push('-', l));
        new_lines.iter().for_each(|l| push('+', l));
        lines[last + 1..after].iter().for_each(|l| push(' ', l));
        out
    }

    /// `orig -> repl` on one line, whitespace runs folded, long texts shortened.
    pub fn change(&self) -> String {
        format!("{} -> {}", one_line(&self.original), one_line(&self.replacement))
    }
}

fn one_line(text: &str) -> String {
    let folded = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if folded.chars().count() > 60 {
        format!("{}...", folded.chars().take(57).collect::<String>())
    } else {
        folded
    }
}

#[cfg(test)]
mod tests {
    use crate::mutants::find::{self, tests::SRC};

    #[test]
    fn the_diff_applies_with_patch() {
        let ms = find::mutants("lib/x.c", SRC).unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("lib")).unwrap();
        for m in &ms {
            std::fs::write(dir.path().join("lib/x.c"), SRC).unwrap();
            let out = std::process::Command::new("patch")
                .args(["-p1", "--silent", "--no-backup-if-mismatch"])
                .current_dir(dir.path())
                .stdin(std::process::Stdio::piped())
                .spawn()
                .and_then(|mut c| {
                    use std::io::Write;
                    c.stdin.take().unwrap().write_all(m.diff(SRC).as_bytes())?;
                    c.wait()
                });
            let Ok(status) = out else { return }; // no patch(1) on this host
            assert!(status.success(), "{}", m.diff(SRC));
            assert_eq!(std::fs::read_to_string(dir.path().join("lib/x.c")).unwrap(), m.apply(SRC));
        }
    }
}
