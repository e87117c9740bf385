//! The shape of the code, checked in plain `cargo test` (as rust-analyzer's `tidy.rs` does):
//!
//! - no import cycle between the modules of a crate (`xtask`'s library, `ue-agent`, `protocol`):
//!   a module is a file; `A -> B` when A names B as `crate::b`, `super::...` or, from a parent, as its
//!   child `b::`. Test code (`#[cfg(test)]` items) does not count, nor do re-exports (`pub use`:
//!   a facade that names what it re-exports, not code that uses it);
//! - no `.rs` file over [`MAX_LINES`] lines, product code and tests alike (split it by
//!   concern; a module's tests go beside it in `<module>/tests.rs`);
//! - every `.rs` file opens with a `//!` line saying what it is for;
//! - xtask's folders (and top-level files) import in one direction only, from the layers above
//!   to the layers below ([`XTASK_LAYERS`]); a new folder takes its place in that list.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Lines a file may have without a written reason.
const MAX_LINES: usize = 600;

/// The crates whose module graphs must be acyclic: (name, source folder, root file).
const CRATES: &[(&str, &str, &str)] = &[
    ("xtask", "xtask/src", "lib.rs"),
    ("ue-agent", "initramfs/src", "main.rs"),
    ("protocol", "protocol/src", "lib.rs"),
];

/// xtask's top-level folders and files, from the bottom up: each may import only those before
/// it. `main.rs` (the binary, which only dispatches to `verbs/`) is a crate of its own, and so
/// is each of `bin/` (the installed spelling of the same binary).
const XTASK_LAYERS: &[(&str, &str)] = &[
    ("support", "leaves: the checkout, commands, exit codes, files, progress, timings"),
    ("arch", "per-arch facts as data"),
    ("kernel", "source, Debian, git, kconfig, cache, build"),
    ("vm", "QEMU, the initramfs, the hang watchdog"),
    ("suites", "the scenario language and its plans"),
    ("cli", "the command line's vocabulary, the kernel flags lowered"),
    ("judging", "console, result channel, verdict, run-folder records"),
    ("results", "the run model, its renderers, compare, merge"),
    ("history", "every run recorded in a database; classes and flips over the runs"),
    ("coverage", "what the suites reach"),
    ("mutants", "mutation testing: mutants, selection, reports"),
    ("setup", "provisioning from what a verb needs; the project's own checks"),
    ("run", "one run: kernels, plans, boots, reports; the flows made of runs"),
    ("upstream", "the kernel's own selftests, booted in run's lanes"),
    ("mutating", "a mutation campaign: plans, child runs, TCE, reports"),
    ("verbs", "one module per verb, called only by main.rs"),
];

/// Folders whose `.rs` files the per-file rules cover.
const SOURCE_DIRS: &[&str] = &["xtask", "protocol", "initramfs"];

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("xtask lives in the workspace").to_path_buf()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().flatten().map(|e| e.path()).collect();
    entries.sort();
    for p in entries {
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if p.is_dir() {
            if name != "target" && !name.starts_with('.') {
                rust_files(&p, out);
            }
        } else if name.ends_with(".rs") {
            out.push(p);
        }
    }
}

#[test]
fn every_file_says_what_it_is_for_and_long_files_say_why() {
    let root = workspace();
    let mut files = Vec::new();
    for d in SOURCE_DIRS {
        rust_files(&root.join(d), &mut files);
    }
    assert!(files.len() > 50, "found only {} .rs files under {}", files.len(), root.display());
    let mut problems = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        let rel = f.strip_prefix(&root).unwrap().display().to_string();
        problems.extend(file_problems(&rel, &text));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// What the per-file rules find wrong with one file.
fn file_problems(rel: &str, text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    if !first.starts_with("//!") {
        out.push(format!("{rel}: does not open with a `//!` line saying what it is for"));
    }
    let lines = text.lines().count();
    if lines > MAX_LINES {
        out.push(format!("{rel}: {lines} lines, over {MAX_LINES}: split it by concern"));
    }
    out
}

#[test]
fn no_import_cycles_between_modules() {
    let root = workspace();
    let mut report = Vec::new();
    for (name, dir, main) in CRATES {
        let graph = Graph::of_crate(&root.join(dir), main);
        assert!(graph.modules.contains(""), "{name}: no crate root in {dir}");
        for (members, cycles) in graph.cycles() {
            let shown: Vec<String> = members.iter().map(|m| Graph::name(m)).collect();
            report.push(format!("{name}: {} modules on cycles: {}", members.len(), shown.join(", ")));
            for cycle in cycles {
                report.push(format!("  {}", graph.describe(&cycle)));
            }
        }
    }
    assert!(report.is_empty(), "import cycles between modules (a module is a file):\n{}", report.join("\n"));
}

#[test]
fn xtask_folders_import_downwards_only() {
    let root = workspace();
    let graph = Graph::of_crate(&root.join("xtask/src"), "lib.rs");
    let layer = |m: &str| -> Option<usize> {
        let top = m.split("::").next().unwrap_or("");
        XTASK_LAYERS.iter().position(|(name, _)| *name == top)
    };
    let mut problems = Vec::new();
    let binary = |m: &str| m == "main" || m.starts_with("bin::");
    for m in graph.modules.iter().filter(|m| !m.is_empty() && !binary(m)) {
        if layer(m).is_none() {
            problems.push(format!("{m}: its folder is not in XTASK_LAYERS; place it there"));
        }
    }
    for ((a, b), at) in &graph.edges {
        if a.is_empty() || binary(a) || b.is_empty() {
            continue;
        }
        let (Some(la), Some(lb)) = (layer(a), layer(b)) else { continue };
        if la < lb {
            problems.push(format!(
                "{a} -> {b} ({at}): {} imports {}, a layer above it",
                XTASK_LAYERS[la].0, XTASK_LAYERS[lb].0
            ));
        }
    }
    problems.sort();
    problems.dedup();
    assert!(problems.is_empty(), "folders importing upwards:\n{}", problems.join("\n"));
}

/// A crate's modules (`""` for the root, `results::collect`, ...) and who names whom, with the
/// first place each edge was seen (`file:line`).
struct Graph {
    modules: BTreeSet<String>,
    edges: BTreeMap<(String, String), String>,
}

impl Graph {
    fn of_crate(src: &Path, root_file: &str) -> Graph {
        let mut files = Vec::new();
        rust_files(src, &mut files);
        let module_of = |f: &Path| -> Option<String> {
            let rel = f.strip_prefix(src).unwrap();
            let parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
            let (last, dirs) = parts.split_last()?;
            let stem = last.strip_suffix(".rs")?;
            let mut path = dirs.to_vec();
            if dirs.is_empty() && stem == root_file.trim_end_matches(".rs") {
                return Some(String::new());
            }
            if stem != "mod" {
                path.push(stem.to_string());
            }
            Some(path.join("::"))
        };
        let mapped: Vec<(PathBuf, String)> = files.iter().filter_map(|f| Some((f.clone(), module_of(f)?))).collect();
        let modules: BTreeSet<String> = mapped.iter().map(|(_, m)| m.clone()).collect();
        let mut edges = BTreeMap::new();
        for (file, module) in &mapped {
            let text = std::fs::read_to_string(file).unwrap();
            let shown = file.strip_prefix(src.parent().unwrap().parent().unwrap_or(src)).unwrap_or(file);
            let code = without_reexports(&without_tests(&strip_comments_and_strings(&text)));
            for (line, path) in paths(&code, module, &modules) {
                let Some(target) = resolve(&path, &modules) else { continue };
                if target != *module {
                    edges.entry((module.clone(), target)).or_insert_with(|| format!("{}:{line}", shown.display()));
                }
            }
        }
        Graph { modules, edges }
    }

    /// Every strongly connected set of two or more modules, with shortest cycles through it
    /// until each of its modules is on one of them.
    fn cycles(&self) -> Vec<(BTreeSet<String>, Vec<Vec<String>>)> {
        let mut adjacent: BTreeMap<&str, Vec<&String>> = BTreeMap::new();
        for (a, b) in self.edges.keys() {
            adjacent.entry(a.as_str()).or_default().push(b);
        }
        let next = |m: &str| -> Vec<&String> { adjacent.get(m).cloned().unwrap_or_default() };
        let reaches = |from: &str, to: &str| -> Option<Vec<String>> {
            // Breadth first, so the cycle shown is a shortest one.
            let mut seen = BTreeMap::from([(from.to_string(), None::<String>)]);
            let mut queue = std::collections::VecDeque::from([from.to_string()]);
            while let Some(m) = queue.pop_front() {
                for n in next(&m) {
                    if !seen.contains_key(n) {
                        seen.insert(n.clone(), Some(m.clone()));
                        queue.push_back(n.clone());
                    }
                }
                if seen.contains_key(to) {
                    let mut path = vec![to.to_string()];
                    while let Some(Some(p)) = seen.get(path.last().unwrap()) {
                        path.push(p.clone());
                    }
                    path.reverse();
                    return Some(path);
                }
            }
            None
        };
        let mut done: BTreeSet<String> = BTreeSet::new();
        let mut out = Vec::new();
        for m in &self.modules {
            if done.contains(m) {
                continue;
            }
            // The modules on a cycle through m: those m reaches that reach m back.
            let component: BTreeSet<String> = self
                .modules
                .iter()
                .filter(|n| *n != m && reaches(m, n).is_some() && reaches(n, m).is_some())
                .cloned()
                .collect();
            if component.is_empty() {
                continue;
            }
            let mut members = component.clone();
            members.insert(m.clone());
            let mut covered: BTreeSet<String> = BTreeSet::new();
            let mut cycles = Vec::new();
            for start in &members {
                if covered.contains(start) {
                    continue;
                }
                // The shortest way out of `start` and back.
                let shortest = members
                    .iter()
                    .filter(|n| *n != start)
                    .filter_map(|n| {
                        let mut there = reaches(start, n)?;
                        there.extend(reaches(n, start)?.into_iter().skip(1));
                        Some(there)
                    })
                    .min_by_key(Vec::len)
                    .expect("a member of a cycle has one");
                covered.extend(shortest.iter().cloned());
                cycles.push(shortest);
            }
            done.extend(members.iter().cloned());
            out.push((members, cycles));
        }
        out
    }

    fn name(m: &str) -> String {
        if m.is_empty() {
            "(crate root)".to_string()
        } else {
            m.to_string()
        }
    }

    fn describe(&self, cycle: &[String]) -> String {
        let steps: Vec<String> = cycle
            .windows(2)
            .map(|w| {
                format!(
                    "{} -> {} ({})",
                    Graph::name(&w[0]),
                    Graph::name(&w[1]),
                    self.edges[&(w[0].clone(), w[1].clone())]
                )
            })
            .collect();
        steps.join(", ")
    }
}

/// The longest prefix of `path` that is a module.
fn resolve(path: &[String], modules: &BTreeSet<String>) -> Option<String> {
    (0..=path.len()).rev().map(|n| path[..n].join("::")).find(|m| modules.contains(m))
}

/// Every module path a file's code names, made absolute, with its line: `crate::a::b`,
/// `super::x` (relative to `module`), `self::x`, and the module's own children named bare
/// (`child::f`), brace groups (`crate::{a, b::c}`) expanded.
fn paths(code: &str, module: &str, modules: &BTreeSet<String>) -> Vec<(usize, Vec<String>)> {
    let here: Vec<String> = if module.is_empty() { vec![] } else { module.split("::").map(String::from).collect() };
    let children: BTreeSet<&str> = modules
        .iter()
        .filter_map(|m| {
            let rest = if module.is_empty() { Some(m.as_str()) } else { m.strip_prefix(module)?.strip_prefix("::") };
            rest.filter(|r| !r.is_empty() && !r.contains("::"))
        })
        .collect();
    let bytes = code.as_bytes();
    let ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if !ident(bytes[i]) || (i > 0 && (ident(bytes[i - 1]) || bytes[i - 1] == b':')) {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && ident(bytes[i]) {
            i += 1;
        }
        let word = &code[start..i];
        if !code[i..].starts_with("::") {
            continue;
        }
        let base: Option<Vec<String>> = match word {
            "crate" => Some(vec![]),
            "self" => Some(here.clone()),
            "super" => {
                // `super::super::...`
                let mut up = here.clone();
                up.pop();
                let mut j = i;
                while code[j..].starts_with("::super")
                    && !code[j + 7..].starts_with(|c: char| c == '_' || c.is_alphanumeric())
                {
                    up.pop();
                    j += 7;
                }
                i = j;
                Some(up)
            }
            w if children.contains(w) => Some(here.iter().cloned().chain([w.to_string()]).collect()),
            _ => None,
        };
        let Some(base) = base else { continue };
        let line = code[..start].matches('\n').count() + 1;
        let mut found = Vec::new();
        expand(code, i, base, &mut found);
        out.extend(found.into_iter().map(|p| (line, p)));
    }
    out
}

/// From `at` (just after a path's first segment), the rest of the path (`::a::b`) or of each
/// path in a brace group (`::{a, b::{c, d}}`), appended to `base`.
fn expand(code: &str, at: usize, base: Vec<String>, out: &mut Vec<Vec<String>>) {
    let mut path = base;
    let mut i = at;
    loop {
        let rest = &code[i..];
        let Some(after) = rest.strip_prefix("::") else { break };
        let after_ws = after.trim_start();
        i += 2 + (after.len() - after_ws.len());
        if after_ws.starts_with('{') {
            // Split the group at its top-level commas.
            let mut depth = 0;
            let mut item_start = i + 1;
            for (k, c) in code[i..].char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' | ',' if depth == 1 => {
                        let item = code[item_start..i + k].trim();
                        if !item.is_empty() && item != "self" && item != "*" {
                            let mut sub = String::from("::");
                            sub.push_str(item);
                            expand(&sub, 0, path.clone(), out);
                        } else if item == "self" || item == "*" {
                            out.push(path.clone());
                        }
                        item_start = i + k + 1;
                        if c == '}' {
                            return;
                        }
                    }
                    '}' => depth -= 1,
                    _ => {}
                }
            }
            return;
        }
        let len = after_ws.find(|c: char| !(c == '_' || c.is_alphanumeric())).unwrap_or(after_ws.len());
        if len == 0 {
            break;
        }
        path.push(after_ws[..len].to_string());
        i += len;
    }
    out.push(path);
}

/// The code without comments, string and char literals (their bytes become spaces, newlines
/// kept), so paths are only found in code.
fn strip_comments_and_strings(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = b.to_vec();
    let blank = |out: &mut Vec<u8>, from: usize, to: usize| {
        for x in &mut out[from..to.min(b.len())] {
            if *x != b'\n' {
                *x = b' ';
            }
        }
    };
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                let end = text[i..].find('\n').map_or(b.len(), |n| i + n);
                blank(&mut out, i, end);
                i = end;
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                let (mut depth, mut j) = (1, i + 2);
                while j < b.len() && depth > 0 {
                    if b[j] == b'/' && b.get(j + 1) == Some(&b'*') {
                        depth += 1;
                        j += 2;
                    } else if b[j] == b'*' && b.get(j + 1) == Some(&b'/') {
                        depth -= 1;
                        j += 2;
                    } else {
                        j += 1;
                    }
                }
                blank(&mut out, i, j);
                i = j;
            }
            b'r' if (b.get(i + 1) == Some(&b'"') || b.get(i + 1) == Some(&b'#'))
                && (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_')) =>
            {
                let hashes = b[i + 1..].iter().take_while(|&&c| c == b'#').count();
                if b.get(i + 1 + hashes) != Some(&b'"') {
                    i += 1;
                    continue;
                }
                let close = format!("\"{}", "#".repeat(hashes));
                let body = i + 2 + hashes;
                let end = text[body..].find(&close).map_or(b.len(), |n| body + n + close.len());
                blank(&mut out, i, end);
                i = end;
            }
            b'"' => {
                let mut j = i + 1;
                while j < b.len() && b[j] != b'"' {
                    j += if b[j] == b'\\' { 2 } else { 1 };
                }
                blank(&mut out, i, j + 1);
                i = j + 1;
            }
            b'\'' => {
                // A char literal ('x', '\n', '\u{..}'), not a lifetime ('a).
                let end = if b.get(i + 1) == Some(&b'\\') {
                    text[i + 3..].find('\'').map(|n| i + 3 + n + 1)
                } else {
                    let c = text[i + 1..].chars().next().map_or(1, char::len_utf8);
                    (b.get(i + 1 + c) == Some(&b'\'')).then_some(i + 2 + c)
                };
                match end {
                    Some(e) => {
                        blank(&mut out, i, e);
                        i = e;
                    }
                    None => i += 1,
                }
            }
            _ => i += 1,
        }
    }
    String::from_utf8(out).expect("only ASCII bytes were replaced")
}

/// The code without its `#[cfg(test)]` items (the `mod tests { ... }` blocks and test-only
/// functions and imports), blanked as above.
fn without_tests(code: &str) -> String {
    let mut out = code.as_bytes().to_vec();
    let mut from = 0;
    while let Some(n) = code[from..].find("#[cfg(test)]") {
        let at = from + n;
        // The item ends at its block's closing brace or at a `;` before any block opens.
        let mut depth = 0;
        let mut end = code.len();
        for (k, c) in code[at..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = at + k + 1;
                        break;
                    }
                }
                ';' if depth == 0 => {
                    end = at + k + 1;
                    break;
                }
                _ => {}
            }
        }
        for x in &mut out[at..end] {
            if *x != b'\n' {
                *x = b' ';
            }
        }
        from = end;
    }
    String::from_utf8(out).expect("only ASCII bytes were replaced")
}

/// The code without its re-exports (`pub use ...;`, `pub(crate) use ...;`), blanked as above.
fn without_reexports(code: &str) -> String {
    let mut out = code.as_bytes().to_vec();
    for prefix in ["pub use ", "pub(crate) use "] {
        let mut from = 0;
        while let Some(n) = code[from..].find(prefix) {
            let at = from + n;
            let end = code[at..].find(';').map_or(code.len(), |k| at + k + 1);
            if at == 0 || !code.as_bytes()[at - 1].is_ascii_alphanumeric() {
                for x in &mut out[at..end] {
                    if *x != b'\n' {
                        *x = b' ';
                    }
                }
            }
            from = end;
        }
    }
    String::from_utf8(out).expect("only ASCII bytes were replaced")
}

#[test]
fn the_checks_see_what_they_should() {
    let modules: BTreeSet<String> = ["", "a", "b", "r", "r::c", "r::d"].iter().map(|s| s.to_string()).collect();
    let code = strip_comments_and_strings(
        "use crate::{a::{self, X}, r::c};\n// crate::b::x\nlet s = \"super::b\"; let c = '\"'; f::<'a>(crate::b::y);\n\
         #[cfg(test)]\nmod tests { use crate::r::d; }\nsuper::super::a::z(); c::q(); r#\"crate::b\"#;\n",
    );
    let mut found: Vec<(usize, String)> = paths(&without_tests(&code), "r::c", &modules)
        .into_iter()
        .map(|(l, p)| (l, resolve(&p, &modules).unwrap()))
        .collect();
    found.dedup();
    let want = [(1, "a"), (1, "r::c"), (3, "b"), (6, "a")];
    assert_eq!(found, want.map(|(l, m)| (l, m.to_string())));
    // From the root, a child named bare is an edge to it.
    let root = paths("fn main() { boot::run(); std::boot::x(); }", "", &modules);
    assert!(root.is_empty(), "{root:?}");
    let root = paths("fn main() { r::c::run(); a::f(); }", "", &modules);
    let targets: Vec<String> = root.iter().map(|(_, p)| resolve(p, &modules).unwrap()).collect();
    assert_eq!(targets, ["r::c", "a"]);
    // A re-export is no edge; a use is.
    let facade = without_reexports("pub use a::{X, Y};\npub(crate) use r::c;\nuse b::Z;\n");
    let targets: Vec<String> =
        paths(&facade, "", &modules).iter().map(|(_, p)| resolve(p, &modules).unwrap()).collect();
    assert_eq!(targets, ["b"]);

    let long = format!("//! x\n{}", "\n".repeat(MAX_LINES + 1));
    assert_eq!(file_problems("f.rs", &long).len(), 1);
    assert!(file_problems("f.rs", &format!("//! x\n{}", "\n".repeat(MAX_LINES - 2))).is_empty());
    assert_eq!(file_problems("f.rs", "fn main() {}\n").len(), 1);

    let mut g = Graph { modules, edges: BTreeMap::new() };
    for (a, b) in [("a", "b"), ("b", "r::c"), ("r::c", "a"), ("r", "a")] {
        g.edges.insert((a.into(), b.into()), format!("{a}.rs:1"));
    }
    let cycles = g.cycles();
    assert_eq!(cycles.len(), 1);
    let (members, through) = &cycles[0];
    assert_eq!(members.iter().map(String::as_str).collect::<Vec<_>>(), ["a", "b", "r::c"]);
    assert_eq!(through.len(), 1);
    assert_eq!(g.describe(&through[0]), "a -> b (a.rs:1), b -> r::c (b.rs:1), r::c -> a (r::c.rs:1)");
}
