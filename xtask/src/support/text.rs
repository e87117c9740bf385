//! Text as the guest sends it, made plain: ANSI escape sequences and control characters
//! stripped, for the console scanner, the result channel's reader and the reports.

/// Strips ANSI escape sequences (CSI, OSC and other string sequences, two-byte escapes, lone
/// ESC) and control characters other than tab, `\r` included. Serial captures carry firmware
/// screen resets and CRLF line ends.
pub fn clean(line: &str) -> String {
    strip_control(line, &['\t'])
}

/// Strips ANSI escape sequences, as [`clean`] does, and every control character but those in
/// `keep`: the one stripper for console lines and for the text the reports carry.
pub fn strip_control(text: &str, keep: &[char]) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            match chars.peek().copied() {
                Some('[') => {
                    chars.next();
                    while let Some(&n) = chars.peek() {
                        if ('\x20'..='\x3f').contains(&n) {
                            chars.next();
                        } else {
                            if ('\x40'..='\x7e').contains(&n) {
                                chars.next();
                            }
                            break;
                        }
                    }
                }
                Some(']' | 'P' | 'X' | '^' | '_') => {
                    chars.next();
                    while let Some(n) = chars.next() {
                        if n == '\x07' {
                            break;
                        }
                        if n == '\x1b' {
                            if chars.peek() == Some(&'\\') {
                                chars.next();
                            }
                            break;
                        }
                    }
                }
                Some(n) if ('\x21'..='\x2f').contains(&n) => {
                    while chars.peek().is_some_and(|m| ('\x20'..='\x2f').contains(m)) {
                        chars.next();
                    }
                    if chars.peek().is_some_and(|m| ('\x30'..='\x7e').contains(m)) {
                        chars.next();
                    }
                }
                Some(n) if ('\x30'..='\x7e').contains(&n) => {
                    chars.next();
                }
                _ => {}
            }
            continue;
        }
        if c.is_control() && !keep.contains(&c) {
            continue;
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_and_controls_are_stripped() {
        assert_eq!(clean("\x1bc\x1b[?7l\x1b[2J\x1b[0mSeaBIOS"), "SeaBIOS");
        assert_eq!(clean("\x1b]0;title\x07a\x1b]2;t\x1b\\b"), "ab");
        assert_eq!(clean("a\x1b(Bb\x1b"), "ab", "charset selection and a lone ESC at the end");
        assert_eq!(clean("x\r\x07\x00y\tz\r"), "xy\tz");
    }
}
