//! The tracked list of equivalent mutants (`mutants/equivalent.tsv`): each entry's id, reason
//! class, the kernel file it was argued for (the file's digest), the Kconfig conditions it rests
//! on, and its reason; which entries apply to a given file, and what is stale. Sans-IO.
//!
//! An entry applies only to a file whose digest it names: an argument made against one text of
//! the file (its callers, its branches) says nothing of another, so on another kernel the
//! mutant runs like any other until `mutants --recheck-equivalents` has run it there and a
//! reviewer has added that file's digest.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{bail, Result};

use crate::suites::{config_need_error, KernelFacts, Requires};

/// Why a mutant cannot change what user space sees.
pub const CLASSES: &[(&str, &str)] = &[
    ("result-unread", "a value no caller reads (a ->release, an initcall's result)"),
    ("unreachable", "a branch or statement no path reaches"),
    ("same-outcome", "a different intermediate value that ends in the same result"),
    ("spare-space", "an allocation or size larger than what is ever read"),
    ("redundant", "an operation that has no effect where it stands"),
    ("unspecified-order", "a change only in an order the ABI leaves unspecified"),
];

/// How many hex digits of the file's SHA-256 an entry names.
pub const DIGEST_LEN: usize = 16;

/// One entry of the list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub id: String,
    pub class: String,
    /// The digests (first [`DIGEST_LEN`] hex digits of the SHA-256) of the file texts the
    /// argument was made for.
    pub files: Vec<String>,
    /// `CONFIG_X=y`-style conditions the argument rests on (`requires.config`'s form).
    pub conditions: Vec<String>,
    pub reason: String,
    /// 1-based line in the list.
    pub line: usize,
}

/// The list's header line, naming its columns.
pub const HEADER: &str = "# id\tclass\tfile digests\tconditions\treason";

/// Parses the list: `<id>\t<class>\t<digest>[,<digest>...]\t<conditions or ->\t<reason>`
/// lines, `#` comments and blank lines.
pub fn parse(text: &str) -> Result<Vec<Entry>> {
    let mut out: Vec<Entry> = vec![];
    let mut seen = BTreeSet::new();
    for (n, line) in text.lines().enumerate() {
        let n = n + 1;
        let line = line.trim_end();
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let cols: Vec<&str> = line.splitn(5, '\t').collect();
        let [id, class, files, conditions, reason] = cols[..] else {
            bail!(
                "line {n}: expected 5 tab-separated fields (id, class, file digests, conditions, reason), found {}",
                cols.len()
            );
        };
        if id.len() != 12 || !id.chars().all(|c| c.is_ascii_hexdigit()) {
            bail!("line {n}, id: `{id}` is not a mutant id (12 hex digits)");
        }
        if !CLASSES.iter().any(|(c, _)| *c == class) {
            let known: Vec<&str> = CLASSES.iter().map(|(c, _)| *c).collect();
            bail!("line {n}, class: `{class}` is not one of {}", known.join(", "));
        }
        let files: Vec<String> = files.split(',').map(|f| f.trim().to_string()).collect();
        if let Some(bad) = files.iter().find(|f| f.len() != DIGEST_LEN || !f.chars().all(|c| c.is_ascii_hexdigit())) {
            bail!("line {n}, file digests: `{bad}` is not {DIGEST_LEN} hex digits of a SHA-256");
        }
        let conditions: Vec<String> = if conditions.trim() == "-" {
            vec![]
        } else {
            conditions.split(',').map(|c| c.trim().to_string()).collect()
        };
        for c in &conditions {
            if let Some(e) = config_need_error(c) {
                bail!("line {n}, conditions: {e}");
            }
        }
        if reason.trim().is_empty() {
            bail!("line {n}, reason: mutant {id} has no reason");
        }
        if !seen.insert(id.to_string()) {
            bail!("line {n}, id: mutant {id} is listed twice");
        }
        out.push(Entry {
            id: id.into(),
            class: class.into(),
            files,
            conditions,
            reason: reason.trim().into(),
            line: n,
        });
    }
    Ok(out)
}

/// What the list says of one file's mutants.
#[derive(Debug, Default, PartialEq)]
pub struct Applied {
    /// The entries that apply: the id and its reason, as the plan takes them.
    pub equivalent: BTreeMap<String, String>,
    /// Entries argued for another text of the file: not applied.
    pub other_file: Vec<String>,
    /// Entries argued for this text whose id is no mutant of it: stale.
    pub no_mutant: Vec<String>,
    /// Entries argued only for other texts whose id is no mutant of this one: another
    /// version's entries, neither applied nor stale.
    pub elsewhere: Vec<String>,
}

impl Applied {
    /// One warning line per entry that does not apply, naming the list's line.
    pub fn warnings(&self, entries: &[Entry], list: &str) -> Vec<String> {
        let line = |id: &str| entries.iter().find(|e| e.id == id).map(|e| e.line).unwrap_or_default();
        let mut out = vec![];
        for id in &self.no_mutant {
            out.push(format!("{list}:{}: {id} is no mutant of this file: a stale entry", line(id)));
        }
        for id in &self.other_file {
            out.push(format!(
                "{list}:{}: {id} was argued for another text of this file: not applied (run `mutants --recheck-equivalents` on this one)",
                line(id)
            ));
        }
        out
    }

    pub fn is_stale(&self) -> bool {
        !self.no_mutant.is_empty() || !self.other_file.is_empty()
    }
}

/// The entries that apply to the file whose SHA-256 is `digest` and whose mutants are `ids`.
pub fn apply(entries: &[Entry], digest: &str, ids: &BTreeSet<&str>) -> Applied {
    let mut out = Applied::default();
    for e in entries {
        let here = e.files.iter().any(|f| digest.starts_with(f.as_str()));
        if !ids.contains(e.id.as_str()) {
            if here { &mut out.no_mutant } else { &mut out.elsewhere }.push(e.id.clone());
        } else if !here {
            out.other_file.push(e.id.clone());
        } else {
            out.equivalent.insert(e.id.clone(), e.reason.clone());
        }
    }
    out
}

/// The conditions of `entry` the kernel does not meet, said as `requires` says them.
pub fn unmet(entry: &Entry, release: &str, config: &BTreeMap<String, String>) -> Option<String> {
    let requires = Requires { kernel: None, config: entry.conditions.clone() };
    requires.unmet(&KernelFacts { release, config })
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIST: &str = "# id\tclass\tfile digests\tconditions\treason\n\
        0123456789ab\tresult-unread\t00112233445566aa\t-\tthe VFS ignores ->release's value\n\
        ba9876543210\tredundant\t00112233445566aa,ffeeddccbbaa9988\tCONFIG_INIT_STACK_ALL_ZERO=y\tthe stack is zeroed\n";

    #[test]
    fn an_entry_names_its_class_files_and_conditions() {
        let list = parse(LIST).unwrap();
        assert_eq!(list.len(), 2);
        assert_eq!(list[1].files, ["00112233445566aa", "ffeeddccbbaa9988"]);
        assert_eq!(list[1].conditions, ["CONFIG_INIT_STACK_ALL_ZERO=y"]);
        assert_eq!(list[1].line, 3);
        let bad = |text: &str, says: &str| {
            let e = parse(text).unwrap_err().to_string();
            assert!(e.contains(says), "{e}");
        };
        bad("0123456789ab\tresult-unread\t00112233445566aa\t-\n", "5 tab-separated fields");
        bad("0123456789ab\tunknowable\t00112233445566aa\t-\tr\n", "line 1, class");
        bad("0123456789ab\tredundant\t0011\t-\tr\n", "line 1, file digests");
        bad("0123456789ab\tredundant\t00112233445566aa\tHIGHMEM\tr\n", "line 1, conditions");
        bad("0123456789ab\tredundant\t00112233445566aa\t-\t \n", "found 4");
        bad("xyz\tredundant\t00112233445566aa\t-\tr\n", "not a mutant id");
        bad(&format!("{LIST}0123456789ab\tredundant\t00112233445566aa\t-\tr\n"), "listed twice");
    }

    #[test]
    fn an_entry_applies_only_to_the_file_it_was_argued_for() {
        let list = parse(LIST).unwrap();
        let ids = BTreeSet::from(["0123456789ab", "ba9876543210"]);
        let same = apply(&list, "00112233445566aa0000", &ids);
        assert_eq!(same.equivalent.len(), 2);
        assert!(!same.is_stale());
        let other = apply(&list, "ffeeddccbbaa99880000", &ids);
        assert_eq!(other.equivalent.keys().collect::<Vec<_>>(), ["ba9876543210"]);
        assert_eq!(other.other_file, ["0123456789ab"]);
        assert!(other.is_stale());
        let gone = apply(&list, "00112233445566aa0000", &BTreeSet::from(["0123456789ab"]));
        assert_eq!(gone.no_mutant, ["ba9876543210"]);
        let warnings = gone.warnings(&list, "mutants/equivalent.tsv");
        assert_eq!(warnings, ["mutants/equivalent.tsv:3: ba9876543210 is no mutant of this file: a stale entry"]);
        // Another version's entry: no mutant of this text, argued for another one.
        let newer = apply(&list, "99999999999999990000", &BTreeSet::from(["ba9876543210"]));
        assert_eq!(
            (newer.elsewhere.as_slice(), newer.other_file.as_slice()),
            (&["0123456789ab".to_string()][..], &["ba9876543210".to_string()][..])
        );
        let only_other = apply(&list[..1], "99999999999999990000", &BTreeSet::new());
        assert!(!only_other.is_stale() && only_other.warnings(&list, "l").is_empty(), "{only_other:?}");
    }

    #[test]
    fn conditions_are_checked_against_the_kernels_config() {
        let list = parse(LIST).unwrap();
        let zeroed = BTreeMap::from([("CONFIG_INIT_STACK_ALL_ZERO".to_string(), "y".to_string())]);
        assert_eq!(unmet(&list[1], "6.12.117", &zeroed), None);
        assert!(unmet(&list[1], "6.12.117", &BTreeMap::new()).unwrap().contains("CONFIG_INIT_STACK_ALL_ZERO"));
        assert_eq!(unmet(&list[0], "6.12.117", &BTreeMap::new()), None, "no conditions");
    }

    #[test]
    fn the_tracked_list_parses() {
        let tracked =
            std::fs::read_to_string(crate::support::checkout::project_root().join("mutants/equivalent.tsv")).unwrap();
        let list = parse(&tracked).unwrap();
        assert!(!list.is_empty());
    }
}
