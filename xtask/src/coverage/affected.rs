//! Which scenarios a change can affect, read from a map of the baseline's coverage (each
//! scenario's counts on one arch): the change is seen from the baseline's side of the diff
//! (`diff::edits`), and a scenario is affected when it executed a line the change removes or
//! rewrites; where the change replaces no executable line (lines added, or a declaration
//! rewritten), when it executed the executable line just before the change or the one just after
//! it in the same function (its closing `}` in column 0, kernel style, ends it). What the
//! map cannot judge is refused with the reason: a file that is not an instrumented `.c`
//! (a header, Kconfig, a Makefile), a preprocessor line (a macro reaches wherever it is used), or
//! a change outside every function (a declaration, a table, a new function), or lines no
//! scenario ran (nothing reaches them, or only the boot does). Sans-IO.

use std::collections::{BTreeMap, BTreeSet};

use crate::coverage::diff;
use crate::coverage::lcov::FileCov;
use crate::coverage::runs::{ArchData, BOOT};

/// One changed file: the baseline's text and the patched one.
#[derive(Debug, Clone)]
pub struct Change {
    pub file: String,
    pub old: String,
    pub new: String,
}

/// What the map says about a change on one arch.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Affected {
    /// The scenarios that executed one of `lines`.
    pub scenarios: BTreeSet<String>,
    /// The baseline's lines the change was read through, per file.
    pub lines: BTreeMap<String, BTreeSet<u32>>,
}

/// Every file the change touches must be an instrumented `.c` source of the map.
pub fn judge_files(touched: &[String], instrumented: &[String]) -> Result<(), String> {
    for f in touched {
        if instrumented.contains(f) {
            continue;
        }
        let name = f.rsplit('/').next().unwrap_or(f);
        let what = if f.ends_with(".h") {
            "a header, which reaches every file that includes it"
        } else if name.starts_with("Kconfig") || name.ends_with(".config") {
            "a Kconfig file, which changes what is built"
        } else if name == "Makefile" || name == "Kbuild" || name.ends_with(".mk") {
            "a Makefile, which changes how it is built"
        } else if f.ends_with(".c") {
            "a .c file the map's coverage kernel did not instrument"
        } else {
            "not a .c file the map instruments"
        };
        return Err(format!("the change touches {f}: {what} (the map counts {})", instrumented.join(", ")));
    }
    Ok(())
}

/// Whether a line of C holds code: not blank, not only a comment.
fn is_code(text: &str) -> bool {
    let t = text.trim();
    !(t.is_empty() || t == "*" || ["//", "/*", "*/", "* "].iter().any(|p| t.starts_with(p)))
}

/// Whether any scenario of the map ran `line` of `file` (`boot`: or the boot).
fn ran(data: &ArchData, file: &str, line: u32, boot: bool) -> bool {
    data.iter()
        .filter(|(name, _)| boot || *name != BOOT)
        .any(|(_, files)| files.get(file).is_some_and(|c| c.lines.get(&line) > Some(&0)))
}

/// The scenarios of one arch's map that the changes can affect, or why the map cannot say. A
/// change whose lines no scenario ran is refused too: code that only the boot runs (the group
/// and its system names are made at boot; the map's `boot` entry) affects every scenario, and
/// for code nothing reaches, which scenarios depend on it is unknown.
pub fn affected(data: &ArchData, changes: &[Change]) -> Result<Affected, String> {
    let mut out = Affected::default();
    for c in changes {
        let mut executable = BTreeSet::new();
        let mut starts: BTreeMap<u32, &str> = BTreeMap::new();
        let mut counted = false;
        for cov in data.values().filter_map(|files| files.get(&c.file)) {
            counted = true;
            executable.extend(cov.lines.keys().copied());
            starts.extend(cov.functions.iter().map(|(name, (line, _))| (*line, name.as_str())));
        }
        if !counted {
            return Err(format!("the map has no counts of {}", c.file));
        }
        // The function a line is in: the one that starts last at or before it.
        let function = |line: u32| starts.range(..=line).next_back().map(|(l, n)| (*l, *n));
        let (old, new): (Vec<&str>, Vec<&str>) = (c.old.lines().collect(), c.new.lines().collect());
        let mut targets = BTreeSet::new();
        for e in diff::edits(&c.old, &c.new) {
            let removed: Vec<(u32, &str)> = e.removed.clone().map(|l| (l, old[l as usize - 1])).collect();
            let added: Vec<(u32, &str)> = e.added.iter().map(|&l| (l, new[l as usize - 1])).collect();
            for (side, lines) in [("baseline", &removed), ("patched", &added)] {
                if let Some((l, text)) = lines.iter().find(|(_, t)| t.trim_start().starts_with('#')) {
                    return Err(format!(
                        "{}:{l} ({side}): `{}` is a preprocessor line: a macro or condition reaches wherever it is \
                         used, which line counts cannot show",
                        c.file,
                        text.trim()
                    ));
                }
            }
            // Code in place of executable lines runs where they ran; other code where its
            // neighbours do.
            let replaced: Vec<u32> = removed.iter().map(|(l, _)| *l).filter(|l| executable.contains(l)).collect();
            let code = added.iter().chain(&removed).any(|(_, t)| is_code(t));
            if !replaced.is_empty() || !code {
                targets.extend(replaced);
                continue;
            }
            let before = executable.range(..e.removed.start).next_back().copied();
            let after = executable.range(e.removed.end..).next().copied();
            let (Some(before), after) = (before, after) else {
                return Err(format!(
                    "{}:{}: the change lies outside every function the map counts",
                    c.file, e.removed.start
                ));
            };
            // Inside `before`'s function: before the `}` in column 0 that closes it (kernel style).
            let close =
                old.iter().skip(before as usize).position(|t| t.starts_with('}')).map(|i| before + 1 + i as u32);
            let inside = function(before).is_some() && close.is_some_and(|c| e.removed.end <= c);
            if !inside {
                let name = |l: Option<u32>| {
                    l.and_then(function).map_or("the file's end".to_string(), |(_, n)| format!("{n}()"))
                };
                return Err(format!(
                    "{}:{}: the change lies between functions (after {}, before {}): a declaration, an initializer \
                     or a new function reaches code the map cannot point to",
                    c.file,
                    e.removed.start,
                    name(Some(before)),
                    name(after)
                ));
            }
            targets.insert(before);
            if let Some(after) = after.filter(|a| function(*a) == function(before)) {
                targets.insert(after);
            }
        }
        for (scenario, files) in data.iter().filter(|(name, _)| *name != BOOT) {
            if files.get(&c.file).is_some_and(|cov: &FileCov| targets.iter().any(|l| cov.lines.get(l) > Some(&0))) {
                out.scenarios.insert(scenario.clone());
            }
        }
        if !targets.is_empty() && !targets.iter().any(|l| ran(data, &c.file, *l, false)) {
            let lines: Vec<String> = targets.iter().map(u32::to_string).collect();
            let why = if targets.iter().any(|l| ran(data, &c.file, *l, true)) {
                "only the boot runs them, and every scenario depends on what the boot made"
            } else {
                "nothing reaches them, so which scenarios depend on them is unknown"
            };
            return Err(format!("{}:{}: no scenario of the map ran these lines: {why}", c.file, lines.join(",")));
        }
        if !targets.is_empty() {
            out.lines.entry(c.file.clone()).or_default().extend(targets);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lines 1-6 are a(), 8 a table, 10-15 b(); the counts of four scenarios.
    const SOURCE: &str =
        "static int a(int x)\n{\n\tif (x)\n\t\treturn 1;\n\treturn 0;\n}\n\nstatic int table[] = { 1, 2 };\n\n\
                          static int b(void)\n{\n\tint y;\n\ty = a(2);\n\treturn y;\n}\n";
    const FILE: &str = "kernel/trace/trace_events_user.c";

    fn map() -> ArchData {
        let executable = [1, 3, 4, 5, 10, 13, 14];
        let cov = |hit: &[u32]| FileCov {
            path: FILE.into(),
            lines: executable.iter().map(|l| (*l, u64::from(hit.contains(l)))).collect(),
            functions: [("a".to_string(), (1, u64::from(hit.contains(&1)))), ("b".into(), (10, 0))].into(),
            ..FileCov::default()
        };
        [
            ("s/zero", cov(&[1, 3, 5])),
            ("s/one", cov(&[1, 3, 4])),
            ("s/b", cov(&[1, 3, 4, 10, 13, 14])),
            ("s/none", cov(&[])),
        ]
        .into_iter()
        .map(|(s, c)| (s.to_string(), [(FILE.to_string(), c)].into()))
        .collect()
    }

    fn change(new: &str) -> Result<Affected, String> {
        affected(&map(), &[Change { file: FILE.into(), old: SOURCE.into(), new: new.into() }])
    }

    fn names(a: &Affected) -> Vec<&str> {
        a.scenarios.iter().map(String::as_str).collect()
    }

    #[test]
    fn a_rewritten_line_selects_the_scenarios_that_ran_it() {
        let a = change(&SOURCE.replace("return 1;", "return 2;")).unwrap();
        assert_eq!(names(&a), ["s/b", "s/one"]);
        assert_eq!(a.lines[FILE], [4].into());
        let a = change(&SOURCE.replace("return 0;", "return -1;")).unwrap();
        assert_eq!(names(&a), ["s/zero"], "a line only one scenario runs");
        assert!(change(SOURCE).unwrap().scenarios.is_empty(), "no change");
        let comment = SOURCE.replace("\treturn 0;\n", "\t/* zero */\n\treturn 0;\n");
        assert!(change(&comment).unwrap().scenarios.is_empty(), "a comment changes nothing");
    }

    #[test]
    fn added_lines_select_by_their_neighbours_in_the_function() {
        // Between lines 4 and 5 of a(): 4 (s/one, s/b) before, 5 (s/zero) after.
        let a = change(&SOURCE.replace("\treturn 0;\n", "\tpr_info(\"x\");\n\treturn 0;\n")).unwrap();
        assert_eq!(names(&a), ["s/b", "s/one", "s/zero"]);
        // A declaration rewritten in b(): line 10 before, 13 after.
        let a = change(&SOURCE.replace("int y;", "int y = 0;")).unwrap();
        assert_eq!(names(&a), ["s/b"]);
        assert_eq!(a.lines[FILE], [10, 13].into());
        // Appended at the end of b(), before its closing brace: only line 14 is before it.
        let a = change(&SOURCE.replace("\treturn y;\n}", "\treturn y;\n\ty++;\n}")).unwrap();
        assert_eq!((names(&a), &a.lines[FILE]), (vec!["s/b"], &[14].into()));
    }

    #[test]
    fn what_the_map_cannot_judge_is_refused_with_the_reason() {
        let e = change(&SOURCE.replace("{ 1, 2 }", "{ 1, 3 }")).unwrap_err();
        assert!(e.contains(":8: the change lies between functions (after a(), before b())"), "{e}");
        let e = change(&SOURCE.replace("\treturn 0;\n", "#define Z 0\n\treturn 0;\n")).unwrap_err();
        assert!(e.contains(":5 (patched): `#define Z 0` is a preprocessor line"), "{e}");
        let e = change(&format!("static int c;\n{SOURCE}")).unwrap_err();
        assert!(e.contains(":1: the change lies outside every function"), "{e}");
        let e = change(&format!("{SOURCE}static int d(void) {{ return 0; }}\n")).unwrap_err();
        assert!(e.contains("after b(), before the file's end"), "{e}");
        let other =
            affected(&map(), &[Change { file: "kernel/trace/trace_events.c".into(), old: "".into(), new: "x".into() }]);
        assert_eq!(other.unwrap_err(), "the map has no counts of kernel/trace/trace_events.c");
    }

    #[test]
    fn the_boot_is_never_selected_and_boot_only_lines_are_refused() {
        let mut data = map();
        let boot = data["s/b"].clone();
        data.insert(BOOT.to_string(), boot);
        let run = |data: &ArchData, new: &str| {
            affected(data, &[Change { file: FILE.into(), old: SOURCE.into(), new: new.into() }])
        };
        // Line 4: the boot, s/one and s/b ran it; only the scenarios are selected.
        assert_eq!(names(&run(&data, &SOURCE.replace("return 1;", "return 2;")).unwrap()), ["s/b", "s/one"]);
        // Line 14: the boot and s/b ran it; without s/b only the boot does.
        data.remove("s/b");
        let e = run(&data, &SOURCE.replace("return y;", "return -y;")).unwrap_err();
        assert!(e.ends_with(":14: no scenario of the map ran these lines: only the boot runs them, and every scenario depends on what the boot made"), "{e}");
        data.remove(BOOT);
        let e = run(&data, &SOURCE.replace("return y;", "return -y;")).unwrap_err();
        assert!(e.ends_with("nothing reaches them, so which scenarios depend on them is unknown"), "{e}");
    }

    #[test]
    fn files_outside_the_map_are_refused_by_kind() {
        let files = [FILE.to_string()];
        judge_files(&[FILE.into()], &files).unwrap();
        for (f, why) in [
            ("include/linux/user_events.h", "a header"),
            ("kernel/trace/Kconfig", "a Kconfig file"),
            ("kernel/trace/Makefile", "a Makefile"),
            ("kernel/trace/trace_events.c", "a .c file the map's coverage kernel did not instrument"),
            ("Documentation/trace/user_events.rst", "not a .c file"),
        ] {
            let e = judge_files(&[FILE.into(), f.into()], &files).unwrap_err();
            assert!(e.starts_with(&format!("the change touches {f}: {why}")), "{e}");
        }
    }
}
