//! The documentation book (`docs/`), built by a pinned mdBook that `cargo xtask setup` installs
//! into the cache, and its rendered pages' links checked: `cargo xtask test` runs
//! [`check_book`] with the result consumers.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::support::cmd::{cmd, sh, StepLog};
use crate::support::exit::{error, Kind};

/// A Rust program the checks run, pinned, built by `cargo install` into its own folder in the
/// cache (`<cache>/tools/<crate>`) by `cargo xtask setup` as any user.
#[derive(Debug, PartialEq, Eq)]
pub struct CargoTool {
    /// The crate on the Rust registry.
    pub krate: &'static str,
    pub version: &'static str,
    /// Extra `cargo install` arguments.
    pub args: &'static [&'static str],
    /// What it is for, in the setup's words.
    pub why: &'static str,
}

/// mdBook, without its default features (the file watcher and web server a build never uses).
pub static MDBOOK: CargoTool = CargoTool {
    krate: "mdbook",
    version: "0.5.4",
    args: &["--no-default-features"],
    why: "building the documentation book (docs/) in cargo xtask test",
};

impl CargoTool {
    /// Its `cargo install --root`.
    pub fn root(&self) -> PathBuf {
        crate::kernel::cache::root(None).join("tools").join(self.krate)
    }

    /// The installed binary (named as the crate).
    pub fn binary(&self) -> PathBuf {
        self.root().join("bin").join(self.krate)
    }

    /// `mdbook 0.5.4`.
    pub fn label(&self) -> String {
        format!("{} {}", self.krate, self.version)
    }

    /// Whether the binary is there and says it is the pinned release.
    pub fn installed(&self) -> bool {
        let binary = self.binary();
        binary.is_file()
            && sh().is_ok_and(|sh| {
                cmd!(sh, "{binary} --version")
                    .quiet()
                    .ignore_stderr()
                    .read()
                    .is_ok_and(|v| v.split_whitespace().any(|w| w.trim_start_matches('v') == self.version))
            })
    }

    /// The command that installs it, as a person would type it.
    pub fn install_commands(&self) -> Vec<String> {
        vec![format!(
            "cargo install --locked --root {} {} {} --version {}",
            self.root().display(),
            self.args.join(" "),
            self.krate,
            self.version
        )]
    }

    /// Builds and installs the pinned release into its folder in the cache.
    pub fn install(&self, log: &mut StepLog) -> Result<()> {
        let (sh, root, args, krate, version) = (sh()?, self.root(), self.args, self.krate, self.version);
        let label = format!("setup: cargo install {} ({}; a few minutes on 2 cores)", self.label(), self.why);
        log.step(&label, cmd!(sh, "cargo install --locked --root {root} {args...} {krate} --version {version}"))
    }
}

/// Builds the book of `docs_dir` into `out` with the pinned mdBook; any warning or error it
/// prints fails the build, and so does a rendered link to a page or heading that is not there.
pub fn build_and_check(docs_dir: &Path, out: &Path) -> Result<()> {
    let binary = MDBOOK.binary();
    if !MDBOOK.installed() {
        return Err(error(
            Kind::Infra,
            format!("{} is not installed in {}: run `cargo xtask setup`", MDBOOK.label(), MDBOOK.root().display()),
        ));
    }
    let sh = sh()?;
    let output = cmd!(sh, "{binary} build {docs_dir} -d {out}").quiet().ignore_status().output()?;
    let said = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    let complaints: Vec<&str> = said.lines().filter(|l| l.contains("WARN") || l.contains("ERROR")).collect();
    anyhow::ensure!(
        output.status.success() && complaints.is_empty(),
        "mdbook build {} fails or complains:\n{}",
        docs_dir.display(),
        said.trim_end()
    );
    let broken = broken_links(out)?;
    anyhow::ensure!(broken.is_empty(), "the rendered book has broken links:\n{}", broken.join("\n"));
    Ok(())
}

/// Every relative `href` of the rendered pages under `root` whose file, or whose `#anchor` in
/// that page, is not there: `page.html: href`.
pub fn broken_links(root: &Path) -> Result<Vec<String>> {
    let mut pages = BTreeMap::new();
    for entry in walkdir(root)? {
        if entry.extension().is_some_and(|e| e == "html") {
            let text = std::fs::read_to_string(&entry).with_context(|| format!("reading {}", entry.display()))?;
            pages.insert(entry, text);
        }
    }
    let ids: BTreeMap<&PathBuf, BTreeSet<String>> = pages.iter().map(|(p, t)| (p, attributes(t, "id"))).collect();
    let mut out = Vec::new();
    for (page, text) in &pages {
        let dir = page.parent().unwrap_or(root);
        for href in attributes(text, "href") {
            // Links with a scheme leave the book; site-absolute ones (`/`, the 404 page's way
            // home) depend on where it is served.
            if href.contains(':') || href.starts_with('/') {
                continue;
            }
            let (path, anchor) = href.split_once('#').unwrap_or((href.as_str(), ""));
            let path = path.split('?').next().unwrap_or("");
            let target = if path.is_empty() { page.clone() } else { normalise(&dir.join(path)) };
            let found = if target.is_dir() { target.join("index.html").is_file() } else { target.is_file() };
            let anchor_ok = anchor.is_empty() || ids.get(&target).is_none_or(|set| set.contains(anchor));
            if !found || !anchor_ok {
                let rel = page.strip_prefix(root).unwrap_or(page);
                out.push(format!("{}: {href}", rel.display()));
            }
        }
    }
    Ok(out)
}

/// The values of `name="..."` attributes in an HTML text.
fn attributes(html: &str, name: &str) -> BTreeSet<String> {
    let marker = format!(" {name}=\"");
    let mut out = BTreeSet::new();
    let mut rest = html;
    while let Some(at) = rest.find(&marker) {
        let after = &rest[at + marker.len()..];
        let Some(end) = after.find('"') else { break };
        out.insert(after[..end].replace("&amp;", "&"));
        rest = &after[end..];
    }
    out
}

/// A path with `.` and `..` folded.
fn normalise(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// Every file under `root`.
fn walkdir(root: &Path) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let mut todo = vec![root.to_path_buf()];
    while let Some(dir) = todo.pop() {
        for entry in std::fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))? {
            let path = entry?.path();
            if path.is_dir() {
                todo.push(path);
            } else {
                out.push(path);
            }
        }
    }
    Ok(out)
}

/// The project's book builds cleanly and its links resolve; and, the negative control, a small
/// book with a link to a missing page and to a missing heading is caught.
pub fn check_book() -> Vec<(String, Result<()>)> {
    let root = crate::support::checkout::project_root();
    let out = root.join("target/real-checks/book");
    let built = build_and_check(&root.join("docs"), &out);
    let control = (|| -> Result<()> {
        let tmp = tempfile::tempdir()?;
        let src = tmp.path().join("src");
        std::fs::create_dir_all(&src)?;
        std::fs::write(tmp.path().join("book.toml"), "[book]\ntitle = \"control\"\n")?;
        std::fs::write(src.join("SUMMARY.md"), "# Summary\n\n- [One](one.md)\n")?;
        std::fs::write(src.join("one.md"), "# One\n\n[gone](gone.md) [here](one.md#nowhere) [fine](#one)\n")?;
        let err = build_and_check(tmp.path(), &tmp.path().join("book"))
            .err()
            .context("a book with broken links passed the check")?;
        let text = format!("{err:#}");
        for wanted in ["one.html: gone.html", "one.html: one.html#nowhere"] {
            anyhow::ensure!(text.contains(wanted), "the check missed {wanted}:\n{text}");
        }
        anyhow::ensure!(!text.contains("#one\n"), "a link to an existing heading was reported:\n{text}");
        Ok(())
    })();
    vec![
        (
            format!("mdbook builds the book (docs/) with no warning, every rendered link resolves ({})", out.display()),
            built,
        ),
        ("the book check catches a link to a missing page and to a missing heading".into(), control),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rendered_links_to_missing_pages_and_headings_are_found() {
        let tmp = tempfile::tempdir().unwrap();
        let (a, b) = (tmp.path().join("a.html"), tmp.path().join("sub/b.html"));
        std::fs::create_dir_all(b.parent().unwrap()).unwrap();
        std::fs::write(&a, r##"<h1 id="top">A</h1><a href="sub/b.html#x">b</a> <a href="c.html">c</a> <a href="#top">t</a> <a href="https://example.org/x.html">w</a>"##).unwrap();
        std::fs::write(
            &b,
            r##"<h2 id="y">B</h2><a href="../a.html#top">a</a> <a href="../a.html#gone">a</a> <a href="./">dir</a>"##,
        )
        .unwrap();
        let mut broken = broken_links(tmp.path()).unwrap();
        broken.sort();
        assert_eq!(broken, ["a.html: c.html", "a.html: sub/b.html#x", "sub/b.html: ../a.html#gone", "sub/b.html: ./"]);
    }
}
