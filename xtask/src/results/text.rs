//! Text the reports share: what a report may carry (`clean`), a Markdown table cell (`cell`),
//! HTML text (`esc`) and a figure with the decimals its size deserves (`number`).

/// Characters a report must not carry: ANSI escapes and control characters other than tab
/// and newline (`support::text::strip_control`, the console scanner's own stripper).
pub fn clean(text: &str) -> String {
    crate::support::text::strip_control(text, &['\t', '\n'])
}

/// Text for one Markdown table cell or list item: one line, no pipes (`summary.md`,
/// `compare.md`).
pub fn cell(s: &str) -> String {
    clean(s).replace('\n', " ").replace('|', "\\|")
}

/// Text for HTML, cleaned, its markup characters escaped (in text and in quoted attributes).
pub fn esc(s: &str) -> String {
    clean(s).replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// A figure with as many decimals as its size deserves.
pub fn number(v: f64) -> String {
    match v.abs() {
        a if a >= 1000.0 => format!("{v:.0}"),
        a if a >= 10.0 => format!("{v:.1}"),
        a if a >= 1.0 => format!("{v:.2}"),
        _ => format!("{v:.4}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clean_strips_ansi_and_control_characters() {
        assert_eq!(clean("a\x1b[31mred\x1b[0m\x01b\tc\nd\x1b]0;title\x07e\r"), "aredb\tc\nde");
        assert_eq!(clean("x\x1b(By\x1b]2;t\x1b\\z"), "xyz", "charset selection, OSC ended by ST");
        assert_eq!(cell("a|b\nc"), "a\\|b c");
        assert_eq!([number(1234.5), number(12.34), number(1.234), number(0.01234)], ["1234", "12.3", "1.23", "0.0123"]);
    }
}
