//! The kernel log's messages as the `kernel_log` step matches them: exact text, but that
//! [`KMSG_ANY`] stands for any text (a hashed pointer, an address).

/// The text that stands for any text (none too) in a `kernel_log` step's lines.
pub const KMSG_ANY: &str = "{any}";

/// Whether a kernel log message is `line` (`kernel_log`'s `expect` and `forbid`): the same text,
/// each [`KMSG_ANY`] in `line` matching any run of characters.
pub fn kmsg_matches(line: &str, message: &str) -> bool {
    let mut parts = line.split(KMSG_ANY);
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = message.strip_prefix(first) else { return false };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else { return rest.is_empty() };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kernel_log_line_is_exact_but_for_any() {
        assert!(kmsg_matches(
            "user_events: Unable to queue fault handler",
            "user_events: Unable to queue fault handler"
        ));
        assert!(!kmsg_matches(
            "user_events: Unable to queue fault handler",
            "user_events: Unable to queue fault handler!"
        ));
        assert!(!kmsg_matches("Unable to queue fault handler", "user_events: Unable to queue fault handler"));
        let fault = "user_events: Fault for mm: {any} @ {any} event: ev";
        assert!(kmsg_matches(fault, "user_events: Fault for mm: 0x00000000c0ffee00 @ 0x7f0012345000 event: ev"));
        assert!(!kmsg_matches(fault, "user_events: Fault for mm: 0x0 @ 0x1 event: ev2"));
        assert!(!kmsg_matches(fault, "user_events: Fault for mm: 0x0 event: ev"));
        assert!(kmsg_matches("{any}", ""));
        assert!(kmsg_matches("a{any}a", "aa"));
        assert!(!kmsg_matches("a{any}a", "a"), "the two ends do not share a character");
    }
}
