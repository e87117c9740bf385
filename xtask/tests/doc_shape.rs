//! The reference docs keep their shape, checked in plain `cargo test`: README.md stays a short
//! front page and BENCHMARKS.md a record of current figures (line caps), and no document of the
//! project narrates its own history in work-tracking terms (issue numbers, sessions).

use std::path::{Path, PathBuf};

/// Documents and the most lines each may have.
const CAPS: &[(&str, usize)] = &[("README.md", 150), ("BENCHMARKS.md", 300)];

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("xtask lives in the workspace").to_path_buf()
}

/// The project's Markdown documents: the top-level ones, the book's chapters, the suites' notes.
fn documents(root: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> =
        ["README.md", "BENCHMARKS.md", "ARCHITECTURE.md", "CHANGELOG.md"].iter().map(|d| root.join(d)).collect();
    for dir in ["docs/src", "suites", "results", "patches/upstream"] {
        let mut found: Vec<PathBuf> = std::fs::read_dir(root.join(dir))
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "md"))
            .collect();
        found.sort();
        out.extend(found);
    }
    out
}

/// What in `text` reads as work tracking rather than documentation: `issue 12`, `issue #12`,
/// `session`. One finding per line, `line N: ...`.
fn diary_words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let lower = line.to_lowercase();
        let words: Vec<&str> =
            lower.split(|c: char| !c.is_alphanumeric() && c != '#').filter(|w| !w.is_empty()).collect();
        let numbered_issue = words
            .windows(2)
            .any(|w| w[0].starts_with("issue") && w[1].trim_start_matches('#').chars().all(|c| c.is_ascii_digit()));
        if numbered_issue || words.iter().any(|w| w.starts_with("session")) {
            out.push(format!("line {}: {}", i + 1, line.trim()));
        }
    }
    out
}

#[test]
fn front_page_and_benchmarks_stay_short() {
    let root = workspace();
    for (doc, cap) in CAPS {
        let lines = std::fs::read_to_string(root.join(doc)).unwrap().lines().count();
        assert!(lines <= *cap, "{doc} has {lines} lines, over its {cap}: move detail into the book (docs/src/)");
    }
}

#[test]
fn no_document_narrates_work_tracking() {
    let root = workspace();
    let docs = documents(&root);
    assert!(docs.len() > 20, "found only {} documents", docs.len());
    let mut problems = Vec::new();
    for doc in docs {
        let text = std::fs::read_to_string(&doc).unwrap();
        for finding in diary_words(&text) {
            problems.push(format!("{}: {finding}", doc.strip_prefix(&root).unwrap().display()));
        }
    }
    assert!(problems.is_empty(), "documents that speak of issues or sessions:\n{}", problems.join("\n"));
}

#[test]
fn diary_words_are_found_and_ordinary_words_pass() {
    let text = "Fixed in issue 12.\nSee issue #7 there.\nA session of work.\nThe issues list.\nIssue a command.\n";
    assert_eq!(
        diary_words(text),
        ["line 1: Fixed in issue 12.", "line 2: See issue #7 there.", "line 3: A session of work."]
    );
}
