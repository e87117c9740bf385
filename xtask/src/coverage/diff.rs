//! What a patch set changed in an instrumented source, by line of the patched file: the source
//! as built against the pristine one (both kept with a coverage kernel), compared by their
//! longest common subsequence of lines, so hunks that `patch` applied at an offset, or several
//! patches touching one file, still give the right lines; the same comparison seen from the old
//! file (`edits`), which is what a map of the baseline's coverage is read through; and the files a
//! patch names in its headers. Sans-IO.

use std::collections::BTreeSet;

/// The lines (1-based, in `new`) that `new` adds or changes against `old`.
pub fn changed_lines(old: &str, new: &str) -> BTreeSet<u32> {
    edits(old, new).iter().flat_map(|e| e.added.iter().copied()).collect()
}

/// One run of differing lines, from both sides: the old lines `removed` (1-based, an empty
/// range `at..at` for a pure insertion before old line `at`) gave way to the new lines `added`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edit {
    pub removed: std::ops::Range<u32>,
    pub added: Vec<u32>,
}

/// The edits that turn `old` into `new`, in order.
pub fn edits(old: &str, new: &str) -> Vec<Edit> {
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
    let mut out: Vec<Edit> = Vec::new();
    let (mut i, mut j) = (0, 0);
    let mut in_edit = false;
    while i < n || j < m {
        if i < n && j < m && a[i] == b[j] {
            i += 1;
            j += 1;
            in_edit = false;
            continue;
        }
        if !in_edit {
            let at = (head + i + 1) as u32;
            out.push(Edit { removed: at..at, added: vec![] });
            in_edit = true;
        }
        let e = out.last_mut().expect("an edit under way");
        if i < n && (j == m || lcs[at(i + 1, j)] >= lcs[at(i, j + 1)]) {
            e.removed.end += 1;
            i += 1;
        } else {
            e.added.push((head + j + 1) as u32);
            j += 1;
        }
    }
    out
}

/// The files (relative to the tree, as `patch -p1` reads them) a unified diff names in its
/// `--- a/X` / `+++ b/X` headers; both sides of a rename, neither of `/dev/null`.
pub fn patch_files(patch: &str) -> Vec<String> {
    let mut files: Vec<String> = Vec::new();
    let lines: Vec<&str> = patch.lines().collect();
    for pair in lines.windows(2) {
        let (Some(old), Some(new)) = (pair[0].strip_prefix("--- "), pair[1].strip_prefix("+++ ")) else { continue };
        for name in [old, new] {
            let name = name.split('\t').next().unwrap_or(name).trim();
            if name == "/dev/null" {
                continue;
            }
            let rel = name.split_once('/').map_or(name, |(_, rest)| rest).to_string();
            if !files.contains(&rel) {
                files.push(rel);
            }
        }
    }
    files
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

    #[test]
    fn edits_seen_from_the_old_file() {
        let old = "a\nb\nc\nd\ne\n";
        let e = |removed: std::ops::Range<u32>, added: &[u32]| Edit { removed, added: added.to_vec() };
        assert!(edits(old, old).is_empty());
        assert_eq!(edits(old, "a\nb\nX\nc\nd\ne\n"), [e(3..3, &[3])], "inserted before old line 3");
        assert_eq!(edits(old, "a\nB\nc\nd\nE\n"), [e(2..3, &[2]), e(5..6, &[5])], "two changed lines");
        assert_eq!(edits(old, "a\nc\nd\ne\n"), [e(2..3, &[])], "a removed line");
        assert_eq!(edits(old, "a\nb\nc\nd\ne\nf\n"), [e(6..6, &[6])], "appended");
        assert_eq!(edits(old, "a\nB1\nB2\nd\ne\n"), [e(2..4, &[2, 3])], "two lines for two");
        // blind-spot.patch's shape: a condition changed, a line added, a brace added.
        let before = "\tif (!user)\n\t\treturn -ENOMEM;\n\n";
        let after = "\tif (!user) {\n\t\tpr_warn();\n\t\treturn -ENOMEM;\n\t}\n\n";
        assert_eq!(edits(before, after), [e(1..2, &[1, 2]), e(3..3, &[4])]);
    }

    #[test]
    fn files_a_patch_names() {
        let text = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("test_data/patches/blind-spot.patch"),
        )
        .unwrap();
        assert_eq!(patch_files(&text), ["kernel/trace/trace_events_user.c"]);
        let git = "diff --git a/x/k.h b/x/k.h\nnew file mode 100644\n--- /dev/null\n+++ b/x/k.h\t2026\n@@ -0,0 +1 @@\n+int k;\n\
                   --- a/Kconfig\n+++ b/Kconfig\n@@ -1 +1 @@\n--- old\n+-- new\n";
        assert_eq!(patch_files(git), ["x/k.h", "Kconfig"], "a removed line that looks like a header is not one");
    }
}
