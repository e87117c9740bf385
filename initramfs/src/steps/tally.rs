//! Lines counted by kind, for the loops that run steps many times (`repeat`, `fail_each`): a
//! passing pass's lines said once per kind, with the range of each number that varied.

/// Lines counted by kind: two lines are of one kind when they differ only in their numbers
/// (iteration numbers, times, retries, counts). Each kind is said once, with how many lines it
/// stands for, as its first line with each number that varied shown as its range
/// (`after [0..12] ms and [0..9] retries`), in the order the kinds first came.
#[derive(Default)]
pub(super) struct Tally {
    kinds: Vec<Kind>,
}

struct Kind {
    /// The line with each run of digits as `#`.
    shape: String,
    first: String,
    count: u64,
    /// The smallest and largest value of each run of digits.
    ranges: Vec<(u64, u64)>,
}

/// At most this many kinds of line are said; the rest are counted.
const TALLY_KINDS: usize = 20;

/// The runs of digits in a line: (start, end) byte offsets.
fn digit_runs(line: &str) -> Vec<(usize, usize)> {
    let bytes = line.as_bytes();
    let mut runs = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i].is_ascii_digit() {
            let start = i;
            while i < bytes.len() && bytes[i].is_ascii_digit() {
                i += 1;
            }
            runs.push((start, i));
        } else {
            i += 1;
        }
    }
    runs
}

impl Tally {
    pub(super) fn add(&mut self, line: &str) {
        let runs = digit_runs(line);
        let mut shape = String::with_capacity(line.len());
        let mut at = 0;
        for (a, b) in &runs {
            shape.push_str(&line[at..*a]);
            shape.push('#');
            at = *b;
        }
        shape.push_str(&line[at..]);
        let values: Vec<u64> = runs.iter().map(|(a, b)| line[*a..*b].parse().unwrap_or(u64::MAX)).collect();
        match self.kinds.iter_mut().find(|k| k.shape == shape) {
            Some(kind) => {
                kind.count += 1;
                for (range, v) in kind.ranges.iter_mut().zip(values) {
                    *range = (range.0.min(v), range.1.max(v));
                }
            }
            None => self.kinds.push(Kind {
                shape,
                first: line.to_string(),
                count: 1,
                ranges: values.iter().map(|v| (*v, *v)).collect(),
            }),
        }
    }

    /// Says each kind's line, after `step: ` (the step that tallied: `repeat`, `fail_each`).
    pub(super) fn say(&self, step: &str, say: &mut dyn FnMut(&str)) {
        for kind in self.kinds.iter().take(TALLY_KINDS) {
            let mut text = String::new();
            let mut at = 0;
            for ((a, b), (lo, hi)) in digit_runs(&kind.first).into_iter().zip(&kind.ranges) {
                text.push_str(&kind.first[at..a]);
                if lo == hi {
                    text.push_str(&kind.first[a..b]);
                } else {
                    text.push_str(&format!("[{lo}..{hi}]"));
                }
                at = b;
            }
            text.push_str(&kind.first[at..]);
            say(&format!("{step}: {}x {text}", kind.count));
        }
        if self.kinds.len() > TALLY_KINDS {
            let rest: u64 = self.kinds[TALLY_KINDS..].iter().map(|k| k.count).sum();
            say(&format!("{step}: and {rest} lines of {} other kinds", self.kinds.len() - TALLY_KINDS));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tally_kinds_differ_in_more_than_digits() {
        let mut t = Tally::default();
        for line in ["a 1 ms, 7: ok", "a 22 ms, 7: ok", "a 3 ms, 7: EBADF", "a 4 ms, 7: ok"] {
            t.add(line);
        }
        let mut lines = Vec::new();
        t.say("repeat", &mut |l: &str| lines.push(l.to_string()));
        assert_eq!(lines, ["repeat: 3x a [1..22] ms, 7: ok", "repeat: 1x a 3 ms, 7: EBADF"]);
        let mut many = Tally::default();
        for i in 0..25 {
            many.add(&format!("kind {} line", "x".repeat(i)));
        }
        many.add("kind  line");
        let mut lines = Vec::new();
        many.say("repeat", &mut |l: &str| lines.push(l.to_string()));
        assert_eq!(lines.len(), TALLY_KINDS + 1);
        assert_eq!(lines[0], "repeat: 2x kind  line");
        assert_eq!(lines[TALLY_KINDS], "repeat: and 5 lines of 5 other kinds");
    }
}
