//! The documentation's links, checked in plain `cargo test` without the network: every relative
//! link of README.md, ARCHITECTURE.md, CHANGELOG.md, BENCHMARKS.md and the book's chapters
//! (`docs/src/`) names a file that exists, and every `#anchor` a heading of its target (the
//! GitHub and mdBook slug); every chapter is in `docs/src/SUMMARY.md` and every entry there is a
//! chapter; every `{{#include ...}}` names a file. A chapter's links, and those of the files it
//! includes, stay inside the book (mdBook renders only `docs/src/`, so a link out of it is broken
//! in the HTML). http(s) and mailto links are not followed.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};

/// The Markdown files outside the book whose links are checked.
const TOP_LEVEL: &[&str] = &["README.md", "ARCHITECTURE.md", "CHANGELOG.md", "BENCHMARKS.md"];
/// The book's sources.
const BOOK: &str = "docs/src";

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("xtask lives in the workspace").to_path_buf()
}

/// Where the checks read files: the checkout, or an in-memory sample.
trait Files {
    /// A file's text, if it is one (a path relative to the checkout, `/`-separated).
    fn read(&self, path: &str) -> Option<String>;
    /// Whether a file or folder is there.
    fn exists(&self, path: &str) -> bool;
}

struct Checkout(PathBuf);

impl Files for Checkout {
    fn read(&self, path: &str) -> Option<String> {
        std::fs::read_to_string(self.0.join(path)).ok()
    }
    fn exists(&self, path: &str) -> bool {
        self.0.join(path).exists()
    }
}

/// Files by path; a folder exists when a file is under it.
struct Sample(BTreeMap<&'static str, &'static str>);

impl Files for Sample {
    fn read(&self, path: &str) -> Option<String> {
        self.0.get(path).map(|t| t.to_string())
    }
    fn exists(&self, path: &str) -> bool {
        self.0.keys().any(|k| *k == path || k.starts_with(&format!("{path}/")))
    }
}

#[test]
fn every_link_of_the_documentation_resolves() {
    let root = workspace();
    let mut docs: Vec<String> = TOP_LEVEL.iter().map(|s| s.to_string()).collect();
    let mut chapters = Vec::new();
    for entry in std::fs::read_dir(root.join(BOOK)).expect("docs/src exists").flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.ends_with(".md") {
            chapters.push(format!("{BOOK}/{name}"));
        }
    }
    chapters.sort();
    assert!(chapters.len() > 5, "only {chapters:?} in {BOOK}");
    docs.extend(chapters.iter().cloned());
    let problems = check(&Checkout(root), &docs, &chapters);
    assert!(problems.is_empty(), "broken documentation links:\n{}", problems.join("\n"));
}

/// The checks find what a broken page gets wrong, and a correct page passes.
#[test]
fn a_broken_link_is_reported() {
    let files = Sample(BTreeMap::from([
        (
            "README.md",
            "# Top\n\nSee [the intro](docs/src/intro.md#what-it-is-user_events-again), [gone](docs/src/gone.md), \
             [a bad anchor](docs/src/intro.md#nowhere), [here](#top), [code](xtask/), \
             [web](https://example.org/x.md) and `[not a link](nowhere.md)`.\n\n\
             ```\n[also not](nowhere.md)\n```\n",
        ),
        ("docs/src/SUMMARY.md", "# Summary\n\n- [Intro](intro.md)\n- [Missing](missing.md)\n"),
        (
            "docs/src/intro.md",
            "# Intro\n\n## What it is: `user_events`, again!\n\n{{#include ../../GONE.md}}\n\
             [same page](#what-it-is-user_events-again) [up](../../README.md#top)\n\
             ```\n{{#include ../../NOTES.md}}\n```\n",
        ),
        ("docs/src/orphan.md", "# Not in the summary\n"),
        ("NOTES.md", "# Notes\n\n[the intro](docs/src/intro.md) [fine from the book](intro.md)\n"),
        ("xtask/src/lib.rs", "//! a folder with a file\n"),
    ]));
    let chapters: Vec<String> =
        ["docs/src/SUMMARY.md", "docs/src/intro.md", "docs/src/orphan.md"].map(String::from).into();
    let mut docs = vec!["README.md".to_string()];
    docs.extend(chapters.iter().cloned());
    let problems = check(&files, &docs, &chapters);
    let want = [
        "README.md: [gone](docs/src/gone.md): no such file",
        "README.md: [a bad anchor](docs/src/intro.md#nowhere): no heading `nowhere` in docs/src/intro.md",
        "docs/src/SUMMARY.md: [Missing](missing.md): no such file",
        "docs/src/intro.md: [up](../../README.md#top): leaves the book, so the rendered page's link is \
         broken: include the file in a chapter (`{{#include}}`) and link that, or name its path in code",
        "docs/src/intro.md: {{#include ../../GONE.md}}: no such file",
        "docs/src/intro.md: [the intro](docs/src/intro.md) from NOTES.md: no such file",
        "docs/src/SUMMARY.md: docs/src/orphan.md is a chapter it does not list",
    ];
    assert_eq!(problems, want.map(String::from).to_vec());
}

#[test]
fn slugs_follow_github_and_mdbook() {
    assert_eq!(slug("What it is: `user_events`, again!"), "what-it-is-user_events-again");
    assert_eq!(
        slug("Comparing runs and validating patches: `compare`, `validate`"),
        "comparing-runs-and-validating-patches-compare-validate"
    );
    assert_eq!(slug("Reach: allocation failures (`--profile faults`)"), "reach-allocation-failures---profile-faults");
    assert_eq!(slug("A [linked](x.md) **bold** heading"), "a-linked-bold-heading");
    let headings = anchors("# A\n## A\n```\n# not a heading\n```\n### B\n");
    assert_eq!(headings, BTreeSet::from(["a".to_string(), "a-1".to_string(), "b".to_string()]));
}

/// Every problem of `docs` (checkout-relative paths); `chapters` are the book's pages, which
/// its `SUMMARY.md` must list.
fn check(files: &dyn Files, docs: &[String], chapters: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for doc in docs {
        let Some(text) = files.read(doc) else {
            out.push(format!("{doc}: missing"));
            continue;
        };
        let dir = parent(doc);
        let in_book = doc.starts_with(&format!("{BOOK}/"));
        for (label, target) in links(&text) {
            if let Some(problem) = link_problem(files, doc, &dir, &target, in_book) {
                out.push(format!("{doc}: [{label}]({target}): {problem}"));
            }
        }
        for include in includes(&text) {
            let Some(path) = join(&dir, &include).filter(|p| files.exists(p)) else {
                out.push(format!("{doc}: {{{{#include {include}}}}}: no such file"));
                continue;
            };
            // An included page's links are rendered from the chapter that includes it.
            let included = if path.ends_with(".md") { files.read(&path) } else { None };
            for (label, target) in links(&included.unwrap_or_default()) {
                if let Some(problem) = link_problem(files, doc, &dir, &target, in_book) {
                    out.push(format!("{doc}: [{label}]({target}) from {path}: {problem}"));
                }
            }
        }
    }
    let summary = format!("{BOOK}/SUMMARY.md");
    if let Some(text) = files.read(&summary) {
        let listed: BTreeSet<String> =
            links(&text).into_iter().filter_map(|(_, t)| join(BOOK, strip_anchor(&t))).collect();
        for chapter in chapters.iter().filter(|c| **c != summary && !listed.contains(*c)) {
            out.push(format!("{summary}: {chapter} is a chapter it does not list"));
        }
    } else if !chapters.is_empty() {
        out.push(format!("{summary}: missing"));
    }
    out
}

/// What is wrong with one link of `doc`, if anything; a chapter's (`in_book`) must also stay
/// inside the book, since mdBook renders only `docs/src/` and a link out of it is broken there.
fn link_problem(files: &dyn Files, doc: &str, dir: &str, target: &str, in_book: bool) -> Option<String> {
    if is_external(target) {
        return None;
    }
    let (path, anchor) = match target.split_once('#') {
        Some((p, a)) => (p, Some(a)),
        None => (target, None),
    };
    let Some(file) = (if path.is_empty() { Some(doc.to_string()) } else { join(dir, path) }) else {
        return Some("leaves the checkout".into());
    };
    if !files.exists(&file) {
        return Some("no such file".into());
    }
    if in_book && !file.starts_with(&format!("{BOOK}/")) {
        return Some(
            "leaves the book, so the rendered page's link is broken: include the file in a \
                     chapter (`{{#include}}`) and link that, or name its path in code"
                .into(),
        );
    }
    let anchor = anchor?;
    if !file.ends_with(".md") {
        return None;
    }
    let text = expand_includes(files, &file, &files.read(&file)?);
    (!anchors(&text).contains(anchor)).then(|| format!("no heading `{anchor}` in {file}"))
}

/// http(s), mailto and other links with a scheme.
fn is_external(target: &str) -> bool {
    let scheme_end = target.find(':');
    let first_slash = target.find(['/', '#']).unwrap_or(usize::MAX);
    scheme_end.is_some_and(|c| c < first_slash)
}

fn strip_anchor(target: &str) -> &str {
    target.split('#').next().unwrap_or("")
}

/// The folder a checkout-relative file is in (`""` at the top).
fn parent(path: &str) -> String {
    path.rsplit_once('/').map(|(d, _)| d.to_string()).unwrap_or_default()
}

/// `rel` resolved from the folder `dir`, `.` and `..` folded; `None` when it leaves the checkout.
fn join(dir: &str, rel: &str) -> Option<String> {
    let mut parts: Vec<String> = Vec::new();
    let joined = match rel.strip_prefix('/') {
        Some(from_top) => PathBuf::from(from_top),
        None => Path::new(dir).join(rel),
    };
    for c in joined.components() {
        match c {
            Component::Normal(p) => parts.push(p.to_string_lossy().into_owned()),
            Component::ParentDir => {
                parts.pop()?;
            }
            _ => {}
        }
    }
    Some(parts.join("/"))
}

/// Each line of `text`, `None` for a fence's marker lines and what they enclose.
fn outside_fences(text: &str) -> Vec<Option<&str>> {
    let mut fence: Option<String> = None;
    text.lines()
        .map(|line| {
            let trimmed = line.trim_start();
            if let Some(f) = &fence {
                if trimmed.starts_with(f.as_str()) {
                    fence = None;
                }
                return None;
            }
            if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
                fence = Some(trimmed.chars().take_while(|c| *c == '`' || *c == '~').collect());
                return None;
            }
            Some(line)
        })
        .collect()
}

/// The text with fenced code blocks and inline code spans blanked (same line count).
fn prose(text: &str) -> String {
    let mut out = String::new();
    for line in outside_fences(text) {
        out.push_str(&line.map(without_code_spans).unwrap_or_default());
        out.push('\n');
    }
    out
}

/// A line with each `code span` removed (backtick runs matched by length).
fn without_code_spans(line: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(start) = rest.find('`') {
        out.push_str(&rest[..start]);
        let run = rest[start..].chars().take_while(|c| *c == '`').count();
        let after = &rest[start + run..];
        let closer = "`".repeat(run);
        match after.find(&closer) {
            Some(end) => rest = &after[end + run..],
            None => {
                out.push_str(&rest[start..start + run]);
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// The `[label](target)` links and `[label]: target` definitions of a page's prose.
fn links(text: &str) -> Vec<(String, String)> {
    let text = prose(text);
    let mut out = Vec::new();
    for line in text.lines() {
        let trimmed = line.trim_start();
        if let Some(rest) = trimmed.strip_prefix('[') {
            if let Some((label, target)) = rest.split_once("]: ") {
                out.push((label.to_string(), first_word(target)));
                continue;
            }
        }
        let bytes = line.as_bytes();
        let mut i = 0;
        while let Some(open) = line[i..].find('[').map(|o| o + i) {
            let Some(close) = matching(bytes, open, b'[', b']') else { break };
            if bytes.get(close + 1) == Some(&b'(') {
                if let Some(end) = matching(bytes, close + 1, b'(', b')') {
                    let label = &line[open + 1..close];
                    out.push((label.to_string(), first_word(&line[close + 2..end])));
                    // A link inside the label (an image in a link) is checked too.
                    i = open + 1;
                    continue;
                }
            }
            i = open + 1;
        }
    }
    out
}

/// The destination of a link body: `<dest>` or the first word (a title may follow).
fn first_word(body: &str) -> String {
    let body = body.trim();
    if let Some(rest) = body.strip_prefix('<') {
        return rest.split('>').next().unwrap_or("").to_string();
    }
    body.split_whitespace().next().unwrap_or("").to_string()
}

/// The index of the bracket that closes the one at `open`.
fn matching(bytes: &[u8], open: usize, left: u8, right: u8) -> Option<usize> {
    let mut depth = 0;
    for (i, b) in bytes.iter().enumerate().skip(open) {
        if *b == left {
            depth += 1;
        } else if *b == right {
            depth -= 1;
            if depth == 0 {
                return Some(i);
            }
        }
    }
    None
}

/// The paths of `{{#include PATH}}` (and `PATH:anchor`, `PATH:10:20`) outside code.
fn includes(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    // mdBook expands includes inside code blocks too (a file shown as code), not in code spans.
    for line in text.lines().map(without_code_spans) {
        let mut rest = line.as_str();
        while let Some(start) = rest.find("{{#include ") {
            let after = &rest[start + "{{#include ".len()..];
            let Some(end) = after.find("}}") else { break };
            let path = after[..end].trim().split(':').next().unwrap_or("").to_string();
            out.push(path);
            rest = &after[end..];
        }
    }
    out
}

/// A page with each `{{#include}}` replaced by the file it names, as mdBook renders it.
fn expand_includes(files: &dyn Files, page: &str, text: &str) -> String {
    let dir = parent(page);
    let mut out = String::new();
    for line in text.lines() {
        let included = includes(line).into_iter().next().and_then(|p| files.read(&join(&dir, &p)?));
        out.push_str(included.as_deref().unwrap_or(line));
        out.push('\n');
    }
    out
}

/// The anchors of a page's ATX headings, a repeated one numbered (`a`, `a-1`), as GitHub does.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = BTreeSet::new();
    for line in outside_fences(text).into_iter().flatten() {
        let hashes = line.chars().take_while(|c| *c == '#').count();
        if !(1..=6).contains(&hashes) || !line[hashes..].starts_with(' ') {
            continue;
        }
        let base = slug(line[hashes..].trim().trim_end_matches('#').trim());
        let n = seen.entry(base.clone()).or_insert(0);
        out.insert(if *n == 0 { base.clone() } else { format!("{base}-{n}") });
        *n += 1;
    }
    out
}

/// A heading's anchor: link targets dropped (their text kept), lowercase, spaces to `-`, every
/// other character but letters, digits, `-` and `_` dropped.
fn slug(heading: &str) -> String {
    let bytes = heading.as_bytes();
    let mut text = String::new();
    let mut i = 0;
    while i < heading.len() {
        if bytes[i] == b']' && bytes.get(i + 1) == Some(&b'(') {
            if let Some(end) = matching(bytes, i + 1, b'(', b')') {
                i = end + 1;
                continue;
            }
        }
        let c = heading[i..].chars().next().unwrap();
        text.push(c);
        i += c.len_utf8();
    }
    text.to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}
