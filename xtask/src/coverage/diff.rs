//! What a patch set changed in an instrumented source, by line of the patched file: the source
//! as built against the pristine one (both kept with a coverage kernel), compared by their
//! longest common subsequence of lines, so hunks that `patch` applied at an offset, or several
//! patches touching one file, still give the right lines. Sans-IO.

use std::collections::BTreeSet;

/// The lines (1-based, in `new`) that `new` adds or changes against `old`.
pub fn changed_lines(old: &str, new: &str) -> BTreeSet<u32> {
    let a: Vec<&str> = old.lines().collect();
    let b: Vec<&str> = new.lines().collect();
    // The common head and tail cost nothing; only the middle is compared line by line.
    let head = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let tail = a[head..].iter().rev().zip(b[head..].iter().rev()).take_while(|(x, y)| x == y).count();
    let (a, b) = (&a[head..a.len() - tail], &b[head..b.len() - tail]);
    let (n, m) = (a.len(), b.len());
    // lcs[i][j]: the longest common subsequence of a[i..] and b[j..].
    let mut lcs = vec![0u32; (n + 1) * (m + 1)];
    let at = |i: usize, j: usize| i * (m + 1) + j;
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[at(i, j)] =
                if a[i] == b[j] { lcs[at(i + 1, j + 1)] + 1 } else { lcs[at(i + 1, j)].max(lcs[at(i, j + 1)]) };
        }
    }
    let mut out = BTreeSet::new();
    let (mut i, mut j) = (0, 0);
    while j < m {
        if i < n && a[i] == b[j] {
            i += 1;
            j += 1;
        } else if i < n && lcs[at(i + 1, j)] >= lcs[at(i, j + 1)] {
            i += 1;
        } else {
            out.insert((head + j + 1) as u32);
            j += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn added_and_changed_lines_of_the_new_file() {
        let old = "a\nb\nc\nd\ne\n";
        assert!(changed_lines(old, old).is_empty());
        assert_eq!(changed_lines(old, "a\nb\nX\nc\nd\ne\n"), [3].into(), "an added line");
        assert_eq!(changed_lines(old, "a\nB\nc\nd\nE\n"), [2, 5].into(), "two changed lines");
        assert!(changed_lines(old, "a\nc\nd\ne\n").is_empty(), "a removed line adds nothing");
        assert_eq!(changed_lines("", "x\ny\n"), [1, 2].into());
        // Repeated lines: two added lines, one of them the same as its neighbours.
        assert_eq!(changed_lines("}\n}\n}\n", "}\n}\nreturn 0;\n}\n}\n"), [3, 4].into());
        assert_eq!(changed_lines("x\ny\nz\n", "x\n1\ny\n2\nz\n3\n"), [2, 4, 6].into(), "hunks apart");
    }
}
