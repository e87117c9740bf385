//! The build cache: where it lives and the content-addressed key of a kernel build (the atomic
//! writes and the lock it relies on are in `files.rs`).

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::kernel::kconfig::Fragment;
use crate::kernel::source::{Identity, Patch};
use crate::support::files::hex;

/// Bumped whenever the way a kernel is configured or built changes, so old entries miss.
pub const RECIPE_VERSION: u32 = 1;

/// The cache root: `--cache-dir`, else `$XDG_CACHE_HOME/user-events-conformance`, else
/// `~/.cache/user-events-conformance`. It lives outside the checkout so clean clones (CI) reuse it.
pub fn root(flag: Option<&Path>) -> PathBuf {
    if let Some(dir) = flag {
        return dir.to_path_buf();
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(|| PathBuf::from("/var/tmp"));
    base.join("user-events-conformance")
}

/// Everything a kernel build's output depends on.
pub struct KeyInputs<'a> {
    pub arch: &'a str,
    pub source: &'a Identity,
    pub patches: &'a [Patch],
    pub fragments: &'a [Fragment],
    pub compiler_version: &'a str,
    /// The sources built with GCOV (`kernel/gcov.rs`); empty for a normal build, whose key is
    /// then what it was before coverage existed.
    pub gcov_files: &'a [String],
    /// The build knobs' make variables (`knobs.rs`); empty for the default build, whose key is
    /// then what it was before knobs existed.
    pub knobs: &'a [String],
}

/// The content-addressed key: equal inputs give equal keys on any machine, and any change to
/// the source, a patch, a config line, the arch or the compiler gives a new one.
pub fn key(k: &KeyInputs) -> String {
    let mut h = Sha256::new();
    let mut field = |name: &str, value: &[u8]| {
        h.update(name.as_bytes());
        h.update((value.len() as u64).to_le_bytes());
        h.update(value);
    };
    field("recipe", RECIPE_VERSION.to_string().as_bytes());
    field("arch", k.arch.as_bytes());
    field("source", k.source.id.as_bytes());
    for p in k.patches {
        field("patch", p.sha256.as_bytes());
    }
    for f in k.fragments {
        field("fragment-name", f.name.as_bytes());
        field("fragment", f.text.as_bytes());
    }
    field("compiler", k.compiler_version.as_bytes());
    for f in k.gcov_files {
        field("gcov", f.as_bytes());
    }
    for v in k.knobs {
        field("make-var", v.as_bytes());
    }
    hex(&h.finalize())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ident(id: &str) -> Identity {
        Identity {
            kind: "tarball".into(),
            label: "t".into(),
            id: id.into(),
            location: "/x".into(),
            git_head: None,
            git_dirty: None,
            package_version: None,
        }
    }

    fn frag(text: &str) -> Fragment {
        Fragment { name: "common.config".into(), text: text.into() }
    }

    #[test]
    fn key_is_stable_and_sensitive_to_every_input() {
        let src = ident("aaaa");
        let frags = [frag("CONFIG_USER_EVENTS=y\nCONFIG_FTRACE=y\n")];
        let base = KeyInputs {
            arch: "arm64",
            source: &src,
            patches: &[],
            fragments: &frags,
            compiler_version: "gcc 12",
            gcov_files: &[],
            knobs: &[],
        };
        let k = key(&base);
        assert_eq!(k, key(&base), "same inputs, same key");
        assert_eq!(k.len(), 64);

        let changed_line = [frag("CONFIG_USER_EVENTS=y\n# CONFIG_FTRACE is not set\n")];
        assert_ne!(k, key(&KeyInputs { fragments: &changed_line, ..base }), "one config line");
        let patch = [Patch { path: "/p".into(), sha256: "bb".into() }];
        assert_ne!(k, key(&KeyInputs { patches: &patch, ..base }), "one patch");
        let dirty = ident("aaab");
        assert_ne!(k, key(&KeyInputs { source: &dirty, ..base }), "a dirty file changes the source id");
        assert_ne!(k, key(&KeyInputs { arch: "x86_64", ..base }), "arch");
        assert_ne!(k, key(&KeyInputs { compiler_version: "gcc 13", ..base }), "compiler");
        let gcov = ["kernel/trace/trace_events_user.c".to_string()];
        assert_ne!(k, key(&KeyInputs { gcov_files: &gcov, ..base }), "a coverage build");
        // Each build knob (kernel/knobs.rs) changes the key; so does its order.
        let x86 = crate::arch::select("x86_64").unwrap()[0];
        use crate::kernel::knobs::{one_of_each, Knobs};
        let knobs = one_of_each();
        let mut keys = std::collections::BTreeSet::from([k.clone()]);
        for knob in &knobs {
            let vars = knob.key_fields(x86);
            assert!(keys.insert(key(&KeyInputs { knobs: &vars, ..base })), "{knob:?} changes the key");
        }
        assert_eq!(key(&KeyInputs { knobs: &Knobs::default().key_fields(x86), ..base }), k, "no knob, no change");
        // A normal build's key is the one it had before coverage existed.
        assert_eq!(
            k, "8d7db24cc4a6fb6c7c0c2a1436178f8a33326cd27eea9dfb9ba7f658c3ee2560",
            "the key of a normal build is the one it had before coverage existed"
        );
        // Where a patch lives does not matter, only what it says.
        let moved = [Patch { path: "/elsewhere".into(), sha256: "bb".into() }];
        assert_eq!(key(&KeyInputs { patches: &patch, ..base }), key(&KeyInputs { patches: &moved, ..base }));
    }
}
