//! Diagnostics of suite files: `file:line:column: message` with the source line and a caret
//! (rustc style), and serde-saphyr's errors turned into them with a word for the suite author.

use std::fmt;

use serde_saphyr::MessageFormatter;

/// One error in a suite file. `line` and `column` are 1-based characters; 0 when unknown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    pub file: String,
    pub line: usize,
    pub column: usize,
    pub message: String,
    /// The offending source line (empty when unknown).
    pub source_line: String,
}

impl Diagnostic {
    pub(super) fn at(file: &str, text: &str, line: usize, column: usize, message: impl Into<String>) -> Diagnostic {
        let source_line = line.checked_sub(1).and_then(|i| text.lines().nth(i)).unwrap_or("").to_string();
        Diagnostic { file: file.to_string(), line, column, message: message.into(), source_line }
    }

    pub(super) fn whole_file(file: &str, message: impl Into<String>) -> Diagnostic {
        Diagnostic { file: file.to_string(), line: 0, column: 0, message: message.into(), source_line: String::new() }
    }

    /// The first line of the rendering: `file:line:column: message`.
    pub fn headline(&self) -> String {
        if self.line == 0 {
            format!("{}: {}", self.file, self.message)
        } else {
            format!("{}:{}:{}: {}", self.file, self.line, self.column, self.message)
        }
    }
}

/// `file:line:column: message`, then the source line with a caret under the column (rustc style).
impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.headline())?;
        if self.line == 0 || self.source_line.is_empty() {
            return Ok(());
        }
        let number = self.line.to_string();
        let pad = " ".repeat(number.len());
        // Tabs stay tabs so the caret lines up however the terminal expands them.
        let indent: String = self
            .source_line
            .chars()
            .take(self.column.saturating_sub(1))
            .map(|c| if c == '\t' { '\t' } else { ' ' })
            .collect();
        write!(f, "\n{pad} |\n{number} | {}\n{pad} | {indent}^", self.source_line)
    }
}

/// Every error found in one or more suite files, in file and position order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Errors(pub Vec<Diagnostic>);

impl fmt::Display for Errors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, d) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("\n\n")?;
            }
            write!(f, "{d}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Errors {}

pub(super) fn options() -> serde_saphyr::Options {
    // Snippets are rendered here, the same way for every error. Only `true`/`false` are
    // booleans: `set: no` is a mistake worth a message, not YAML 1.1's false.
    serde_saphyr::options! { with_snippet: false, strict_booleans: true }
}

pub(super) fn from_serde(file: &str, text: &str, e: &serde_saphyr::Error) -> Diagnostic {
    // The user formatter's wording, without its `at line X, column Y` suffix.
    let message = serde_saphyr::UserMessageFormatter.format_message(e.without_snippet()).into_owned();
    let message = explain(&message);
    match e.location() {
        Some(loc) if loc.line() > 0 => Diagnostic::at(file, text, loc.line() as usize, loc.column() as usize, message),
        _ => Diagnostic::whole_file(file, message),
    }
}

/// Adds what a suite author needs to a few terse serde messages.
fn explain(message: &str) -> String {
    let ranges = [
        ("invalid u8", "0 to 255"),
        ("invalid u16", "0 to 65535"),
        ("invalid u32", "0 to 4294967295"),
        ("invalid u64", "0 to 18446744073709551615"),
        ("invalid i32", "-2147483648 to 2147483647"),
        ("invalid i64", "-9223372036854775808 to 9223372036854775807"),
    ];
    if let Some((_, range)) = ranges.iter().find(|(m, _)| *m == message) {
        return format!("{message}: expected an integer from {range}");
    }
    // The parser notices a missing `}` or `]` only at the next token, often a line later.
    for (close, what) in [('}', "{"), (']', "[")] {
        if message.ends_with(&format!("did not find expected ',' or '{close}'")) {
            return format!("{message}: is a `{what}` before here not closed?");
        }
    }
    if message == "data did not match any variant of untagged enum FieldValue" {
        return "a record's field takes an integer (from -9223372036854775808 to 18446744073709551615), \
                text, `self` or `{ bytes: HEX }`"
            .to_string();
    }
    if message == "expected end of mapping after enum variant value" {
        return format!("{message}: a step has one key, its kind (`register:`); start the next step with `- `");
    }
    message.to_string()
}
