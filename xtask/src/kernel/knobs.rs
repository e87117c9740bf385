//! Build knobs as kernel engineers spell them: `LLVM=1` (clang and lld), `CC=`,
//! `CROSS_COMPILE=`, ccache, and extra make variables (`--make-arg KEY=VALUE`). They become
//! make command-line variables, so they are in the build's cache key, its provenance (the make
//! command lines, `metadata.json`, `reproducer.sh`) and nothing else: make's environment is
//! cleared of the variables Kbuild would otherwise pick up from the shell unseen.

use anyhow::Result;

use crate::arch::Arch;
use crate::support::exit::{error, Kind};

/// The knobs of one build, from the flags.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Knobs {
    /// `LLVM=1`: clang, lld and the LLVM binutils instead of the GNU ones.
    pub llvm: bool,
    /// `CC=`: the compiler (with `LLVM=1`, instead of `clang`).
    pub cc: Option<String>,
    /// `CROSS_COMPILE=`: the toolchain prefix, instead of the arch's own.
    pub cross_compile: Option<String>,
    /// Compile through ccache (only when it is installed; `resolve` says when it is not).
    pub ccache: bool,
    /// Extra `KEY=VALUE` make variables, in order (`KCFLAGS=-Wno-error`, `W=1`, ...).
    pub make_args: Vec<(String, String)>,
}

/// Variables Kbuild reads from the environment: make runs without them, so a knob is only ever
/// what a flag says (and so is in the cache key).
pub const CLEARED_ENV: &[&str] =
    &["LLVM", "LLVM_IAS", "CROSS_COMPILE", "KCFLAGS", "KCPPFLAGS", "KAFLAGS", "KBUILD_EXTRA_SYMBOLS"];

/// A `--make-arg KEY=VALUE`: KEY a make variable name; `LLVM`, `CC` and `CROSS_COMPILE` are
/// taken as their own knobs, `ARCH` and `O` belong to the tool.
pub fn parse_make_arg(text: &str) -> Result<(String, String), String> {
    let (key, value) = text.split_once('=').ok_or_else(|| format!("`{text}`: write KEY=VALUE, e.g. W=1"))?;
    // Kbuild's per-object variables have a dot: `CFLAGS_trace_events_user.o`.
    let valid = key.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.');
    if !valid {
        return Err(format!("`{key}` is not a make variable name"));
    }
    if matches!(key, "ARCH" | "O" | "-C") {
        return Err(format!("{key}= is set by the tool (from --arch and the build cache)"));
    }
    Ok((key.to_string(), value.to_string()))
}

impl Knobs {
    /// The knobs from the flags: `--make-arg LLVM=1`, `CC=...` and `CROSS_COMPILE=...` become
    /// their own knobs (the same build as `--llvm`, `--cc`, `--cross-compile`).
    pub fn from_flags(
        llvm: bool,
        cc: Option<String>,
        cross_compile: Option<String>,
        ccache: bool,
        make_args: &[(String, String)],
    ) -> Result<Knobs> {
        let mut k = Knobs { llvm, cc, cross_compile, ccache, make_args: vec![] };
        for (key, value) in make_args {
            match key.as_str() {
                "LLVM" if value == "1" => k.llvm = true,
                "LLVM" if value.is_empty() || value == "0" => k.llvm = false,
                "LLVM" => {
                    return Err(error(
                        Kind::BadInput,
                        format!("--make-arg LLVM={value}: only LLVM=1 is supported (clang and lld from PATH)"),
                    ))
                }
                "CC" => k.cc = Some(value.clone()),
                "CROSS_COMPILE" => k.cross_compile = Some(value.clone()),
                _ => k.make_args.push((key.clone(), value.clone())),
            }
        }
        Ok(k)
    }

    /// The default build: no knob at all (its cache key is the one it had before knobs).
    pub fn is_default(&self) -> bool {
        *self == Knobs::default()
    }

    /// These knobs with what the profiles' `# make: KEY=VALUE` lines add (`kmsan.config` says
    /// `# make: LLVM=1`: KMSAN is clang's), after the flags' own; a bad line is bad input naming
    /// the file and line.
    pub fn with_profiles(self, configs_dir: &std::path::Path, profiles: &[String]) -> Result<Knobs> {
        let mut args = self.make_args.clone();
        for p in profiles {
            let path = configs_dir.join("profiles").join(format!("{p}.config"));
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            for (i, line) in text.lines().enumerate() {
                let Some(arg) = line.strip_prefix("# make:") else { continue };
                let arg = parse_make_arg(arg.trim())
                    .map_err(|e| error(Kind::BadInput, format!("{}:{}: # make: {e}", path.display(), i + 1)))?;
                args.push(arg);
            }
        }
        if args.len() == self.make_args.len() {
            return Ok(self);
        }
        Knobs::from_flags(self.llvm, self.cc, self.cross_compile, self.ccache, &args)
    }

    /// The toolchain prefix make is given: `--cross-compile`, else the arch's.
    fn prefix<'a>(&'a self, arch: &'a Arch) -> &'a str {
        self.cross_compile.as_deref().unwrap_or(arch.cross_compile)
    }

    /// The compiler the build uses, whose `--version` goes into the key.
    pub fn compiler(&self, arch: &Arch) -> String {
        match (&self.cc, self.llvm) {
            (Some(cc), _) => cc.clone(),
            (None, true) => "clang".to_string(),
            (None, false) => format!("{}gcc", self.prefix(arch)),
        }
    }

    /// The make variables: `ARCH=`, `CROSS_COMPILE=` (when there is a prefix), `LLVM=1`, `CC=`
    /// (with ccache in front), then the extra ones in order. Each is one argument (no shell).
    pub fn make_vars(&self, arch: &Arch) -> Vec<String> {
        let mut vars = vec![format!("ARCH={}", arch.linux_arch)];
        if !self.prefix(arch).is_empty() {
            vars.push(format!("CROSS_COMPILE={}", self.prefix(arch)));
        }
        if self.llvm {
            vars.push("LLVM=1".to_string());
        }
        if self.ccache {
            vars.push(format!("CC=ccache {}", self.compiler(arch)));
        } else if let Some(cc) = &self.cc {
            vars.push(format!("CC={cc}"));
        }
        vars.extend(self.make_args.iter().map(|(k, v)| format!("{k}={v}")));
        vars
    }

    /// What the cache key adds for these knobs: nothing for the default build.
    pub fn key_fields(&self, arch: &Arch) -> Vec<String> {
        if self.is_default() {
            return vec![];
        }
        self.make_vars(arch)
    }

    /// What selects the persistent build directory besides the fragments: the toolchain (an
    /// LLVM build shares no object with a GCC one), not ccache or extra variables, which
    /// rebuild incrementally in the same directory.
    pub fn toolchain_id(&self) -> String {
        format!("llvm={} cc={:?} cross={:?}", self.llvm, self.cc, self.cross_compile)
    }

    /// Checks the toolchain the knobs need, naming the package of what is missing (exit 129),
    /// and drops ccache, saying so, when it is not installed.
    pub fn resolve(self, arches: &[&Arch]) -> Result<Knobs> {
        self.resolve_with(arches, on_path)
    }

    fn resolve_with(mut self, arches: &[&Arch], on_path: impl Fn(&str) -> bool) -> Result<Knobs> {
        let mut missing = Vec::new();
        if self.llvm {
            for (tool, package) in LLVM_TOOLS {
                if !on_path(tool) {
                    missing.push(format!("`{tool}` (package {package})"));
                }
            }
        }
        if let Some(cc) = &self.cc {
            let program = cc.split_whitespace().next().unwrap_or_default();
            if !on_path(program) {
                missing.push(format!("`{program}` (--cc / CC=)"));
            }
        }
        if self.cross_compile.is_some() && self.cc.is_none() && !self.llvm {
            for arch in arches {
                let gcc = self.compiler(arch);
                if !on_path(&gcc) {
                    missing.push(format!("`{gcc}` (--cross-compile / CROSS_COMPILE=)"));
                }
            }
        }
        if !missing.is_empty() {
            let what = if self.llvm { "LLVM=1 needs clang, lld and the LLVM binutils: " } else { "" };
            return Err(error(Kind::Infra, format!("{what}not found on PATH: {}", missing.join(", "))));
        }
        if self.ccache && !on_path("ccache") {
            crate::support::progress::line("--ccache: ccache is not installed (package ccache): building without it");
            self.ccache = false;
        }
        Ok(self)
    }
}

/// What `LLVM=1` runs, and the Debian/Fedora package of each.
pub const LLVM_TOOLS: &[(&str, &str)] =
    &[("clang", "clang"), ("ld.lld", "lld"), ("llvm-ar", "llvm"), ("llvm-nm", "llvm"), ("llvm-objcopy", "llvm")];

fn on_path(program: &str) -> bool {
    if program.contains('/') {
        return std::path::Path::new(program).is_file();
    }
    std::env::var_os("PATH").is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
}

/// One command line as a shell reads it back: a word with anything but `A-Za-z0-9_-./=:,+@%`
/// in single quotes (`'KCFLAGS=-O2 -g'`), the rest as they are (`ARCH=x86`).
pub fn shell_line(words: &[String]) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "_-./=:,+@%".contains(c);
    let quote = |w: &String| {
        if !w.is_empty() && w.chars().all(safe) {
            w.clone()
        } else {
            format!("'{}'", w.replace('\'', "'\\''"))
        }
    };
    words.iter().map(quote).collect::<Vec<_>>().join(" ")
}

/// Each knob set alone, and two orders of two make variables (for the tests of the cache key).
#[cfg(test)]
pub fn one_of_each() -> Vec<Knobs> {
    let vars = |v: &[(&str, &str)]| v.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    vec![
        Knobs { llvm: true, ..Knobs::default() },
        Knobs { cc: Some("gcc-14".into()), ..Knobs::default() },
        Knobs { cross_compile: Some("x86_64-linux-gnu-".into()), ..Knobs::default() },
        Knobs { ccache: true, ..Knobs::default() },
        Knobs { make_args: vars(&[("W", "1")]), ..Knobs::default() },
        Knobs { make_args: vars(&[("W", "1"), ("KCFLAGS", "-g")]), ..Knobs::default() },
        Knobs { make_args: vars(&[("KCFLAGS", "-g"), ("W", "1")]), ..Knobs::default() },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arch(name: &str) -> &'static Arch {
        crate::arch::select(name).unwrap()[0]
    }

    #[test]
    fn make_args_parse_and_fold_into_knobs() {
        assert_eq!(parse_make_arg("W=1"), Ok(("W".into(), "1".into())));
        assert_eq!(parse_make_arg("KCFLAGS=-O2 -g"), Ok(("KCFLAGS".into(), "-O2 -g".into())));
        assert!(parse_make_arg("W").unwrap_err().contains("KEY=VALUE"));
        assert!(parse_make_arg("A B=1").unwrap_err().contains("not a make variable"));
        assert!(parse_make_arg(".o=1").unwrap_err().contains("not a make variable"));
        let per_object = ("CFLAGS_trace_events_user.o".to_string(), "-g".to_string());
        assert_eq!(parse_make_arg("CFLAGS_trace_events_user.o=-g"), Ok(per_object));
        assert!(parse_make_arg("ARCH=arm").unwrap_err().contains("set by the tool"));
        let args = [("LLVM".into(), "1".into()), ("CC".into(), "clang-19".into()), ("W".into(), "1".into())];
        let k = Knobs::from_flags(false, None, None, false, &args).unwrap();
        assert!(k.llvm);
        assert_eq!((k.cc.as_deref(), k.make_args.len()), (Some("clang-19"), 1));
        assert!(Knobs::from_flags(false, None, None, false, &[("LLVM".into(), "-19".into())]).is_err());
    }

    #[test]
    fn a_profile_can_ask_for_a_make_variable() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("profiles")).unwrap();
        let write =
            |name: &str, text: &str| std::fs::write(dir.path().join(format!("profiles/{name}.config")), text).unwrap();
        write("clang", "# KMSAN is clang's\n# make: LLVM=1\nCONFIG_KMSAN=y\n");
        write("plain", "CONFIG_X=y\n");
        write("bad", "CONFIG_X=y\n# make: ARCH=arm\n");
        let k = Knobs::default().with_profiles(dir.path(), &["plain".into(), "clang".into()]).unwrap();
        assert!(k.llvm && k.make_args.is_empty(), "{k:?}");
        assert_eq!(Knobs::default().with_profiles(dir.path(), &["plain".into()]).unwrap(), Knobs::default());
        let e = Knobs::default().with_profiles(dir.path(), &["bad".into()]).unwrap_err().to_string();
        assert!(e.contains("bad.config:2: # make: ARCH= is set by the tool"), "{e}");
    }

    #[test]
    fn make_variables_as_kernel_engineers_spell_them() {
        let (x86, arm) = (arch("x86_64"), arch("arm64"));
        assert_eq!(Knobs::default().make_vars(arm), arm.make_vars(), "no knob: the arch's variables");
        assert_eq!(Knobs::default().make_vars(x86), ["ARCH=x86"]);
        let llvm = Knobs { llvm: true, ..Knobs::default() };
        assert_eq!(llvm.make_vars(arm), ["ARCH=arm64", "CROSS_COMPILE=aarch64-linux-gnu-", "LLVM=1"]);
        assert_eq!(llvm.compiler(x86), "clang");
        let cached = Knobs { ccache: true, ..Knobs::default() };
        assert_eq!(cached.make_vars(arm).last().unwrap(), "CC=ccache aarch64-linux-gnu-gcc");
        let both = Knobs { llvm: true, ccache: true, ..Knobs::default() };
        assert_eq!(both.make_vars(x86), ["ARCH=x86", "LLVM=1", "CC=ccache clang"]);
        let cross = Knobs { cross_compile: Some("/opt/t/bin/aarch64-none-linux-gnu-".into()), ..Knobs::default() };
        assert_eq!(cross.compiler(arm), "/opt/t/bin/aarch64-none-linux-gnu-gcc");
        assert_eq!(cross.make_vars(arm)[1], "CROSS_COMPILE=/opt/t/bin/aarch64-none-linux-gnu-");
        let extra = Knobs { make_args: vec![("KCFLAGS".into(), "-O2 -g".into())], ..Knobs::default() };
        assert_eq!(shell_line(&extra.make_vars(x86)), "ARCH=x86 'KCFLAGS=-O2 -g'");
        let odd = ["CC=it's".to_string(), String::new()];
        assert_eq!(shell_line(&odd), "'CC=it'\\''s' ''");
        assert_eq!(shlex::split(&shell_line(&odd)).unwrap(), odd, "a shell reads the words back");
    }

    #[test]
    fn every_knob_changes_the_key_fields_and_the_default_adds_none() {
        let x86 = arch("x86_64");
        assert!(Knobs::default().key_fields(x86).is_empty());
        let all = one_of_each();
        let fields: std::collections::BTreeSet<Vec<String>> = all.iter().map(|k| k.key_fields(x86)).collect();
        assert_eq!(fields.len(), all.len(), "each knob gives its own key fields");
        assert!(fields.iter().all(|f| !f.is_empty()));
    }

    #[test]
    fn a_missing_llvm_toolchain_is_named_with_its_packages() {
        let x86 = arch("x86_64");
        let k = Knobs { llvm: true, cc: Some("/nonexistent/clang".into()), ..Knobs::default() };
        let none = |_: &str| false;
        let err = k.clone().resolve_with(&[x86], none).unwrap_err();
        let msg = format!("{err:#}");
        for needle in
            ["`clang` (package clang)", "`ld.lld` (package lld)", "`llvm-ar` (package llvm)", "/nonexistent/clang"]
        {
            assert!(msg.contains(needle), "{needle}: {msg}");
        }
        assert_eq!(crate::support::exit::code_for(&err), 129);
        let ccache = Knobs { ccache: true, ..Knobs::default() }.resolve_with(&[x86], none).unwrap();
        assert!(!ccache.ccache, "an absent ccache is dropped");
        let all = |_: &str| true;
        assert!(k.resolve_with(&[x86], all).unwrap().llvm);
    }
}
