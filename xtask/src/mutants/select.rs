//! Which mutants a run takes (sans-IO): `--in-diff PATCH` (those on lines the patch adds or
//! changes in the mutated file) and `--shard k/n` (a share chosen by id, so adding mutants
//! elsewhere does not move the others between shards).

use std::collections::BTreeSet;
use std::str::FromStr;

use crate::mutants::mutant::Mutant;

/// `--shard k/n`: the k-th of n shares, k in 1..=n.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    pub k: u64,
    pub n: u64,
}

impl FromStr for Shard {
    type Err = String;
    fn from_str(s: &str) -> Result<Shard, String> {
        let bad = || format!("--shard {s}: expected k/n with 1 <= k <= n, e.g. 1/4");
        let (k, n) = s.split_once('/').ok_or_else(bad)?;
        let (k, n) = (k.trim().parse::<u64>().map_err(|_| bad())?, n.trim().parse::<u64>().map_err(|_| bad())?);
        if k == 0 || n == 0 || k > n {
            return Err(bad());
        }
        Ok(Shard { k, n })
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.k, self.n)
    }
}

impl Shard {
    /// Whether the mutant is in this share: its id (hex) modulo n.
    pub fn takes(&self, m: &Mutant) -> bool {
        self.takes_id(&m.id)
    }

    /// Whether the mutant of this id is in this share.
    pub fn takes_id(&self, id: &str) -> bool {
        let head = u64::from_str_radix(&id[..id.len().min(15)], 16).unwrap_or(0);
        head % self.n == self.k - 1
    }
}

/// The lines (1-based, of the patched file) that a unified diff adds or changes in `file` (a
/// path inside the kernel tree, matched against `+++ b/<file>` after stripping one component).
pub fn patch_lines(patch: &str, file: &str) -> BTreeSet<u32> {
    let mut out = BTreeSet::new();
    let mut ours = false;
    let mut line = 0u32;
    let mut in_hunk = false;
    for text in patch.lines() {
        if let Some(target) = text.strip_prefix("+++ ") {
            let target = target.split('\t').next().unwrap_or_default().trim();
            let target = target.split_once('/').map_or(target, |(_, rest)| rest);
            ours = target == file || (file.ends_with(target) && !target.is_empty()) || target.ends_with(file);
            in_hunk = false;
        } else if let Some(header) = text.strip_prefix("@@ ") {
            // @@ -a,b +c,d @@: the new side starts at line c.
            let new = header.split_whitespace().find_map(|w| w.strip_prefix('+'));
            line = new.and_then(|n| n.split(',').next()).and_then(|n| n.parse().ok()).unwrap_or(0);
            in_hunk = ours;
        } else if in_hunk {
            if text.starts_with('+') {
                out.insert(line);
                line += 1;
            } else if text.starts_with(' ') || text.is_empty() {
                line += 1;
            } else if text.starts_with("diff ") {
                in_hunk = false;
            }
        }
    }
    out
}

/// Keeps the mutants with a line in `lines`.
pub fn on_lines(mutants: Vec<Mutant>, lines: &BTreeSet<u32>) -> Vec<Mutant> {
    mutants.into_iter().filter(|m| m.lines().any(|l| lines.contains(&l))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const PATCH: &str = "\
diff --git a/kernel/trace/other.c b/kernel/trace/other.c
--- a/kernel/trace/other.c
+++ b/kernel/trace/other.c
@@ -1,2 +1,3 @@
 a
+b
 c
diff --git a/kernel/trace/trace_events_user.c b/kernel/trace/trace_events_user.c
index 1..2 100644
--- a/kernel/trace/trace_events_user.c
+++ b/kernel/trace/trace_events_user.c
@@ -10,4 +10,5 @@ static int f(void)
 x
-y
+Y
+Z
 w
@@ -40,3 +41,3 @@
 p
-q
+Q
";

    #[test]
    fn lines_a_patch_adds_or_changes_in_one_file() {
        assert_eq!(patch_lines(PATCH, "kernel/trace/trace_events_user.c"), [11, 12, 42].into());
        assert_eq!(patch_lines(PATCH, "kernel/trace/other.c"), [2].into());
        assert!(patch_lines(PATCH, "kernel/trace/none.c").is_empty());
    }

    #[test]
    fn shards_split_the_mutants_without_overlap() {
        let ms = crate::mutants::find::mutants("a.c", "int f(int x) { return x + 1 < 2 && x != 3 ? 4 : 5; }").unwrap();
        assert!(ms.len() >= 8);
        let shards: Vec<Shard> = (1..=3).map(|k| format!("{k}/3").parse().unwrap()).collect();
        for m in &ms {
            assert_eq!(shards.iter().filter(|s| s.takes(m)).count(), 1, "{}", m.id);
        }
        assert!("0/3".parse::<Shard>().is_err() && "4/3".parse::<Shard>().is_err() && "x".parse::<Shard>().is_err());
        let lines = [1].into();
        assert_eq!(on_lines(ms.clone(), &lines).len(), ms.len());
        assert!(on_lines(ms, &[2].into()).is_empty());
    }
}
