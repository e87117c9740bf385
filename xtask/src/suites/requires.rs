//! `requires:`: kernel version ranges and Kconfig needs, parsed and decided against one built
//! kernel's release and `.config`.

use std::collections::BTreeMap;
use std::fmt;

use super::model::Requires;

/// A kernel version: the numbers at the start of a kernelrelease.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version(pub u32, pub u32, pub u32);

impl Version {
    /// `6.12.117` -> 6.12.117, `6.1.0-28-amd64` -> 6.1.0, `6.4-rc2` -> 6.4.0. A release
    /// candidate counts as its release: it has the release's ABI, which is what `requires` asks.
    pub fn from_release(release: &str) -> Option<Version> {
        let end = release.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(release.len());
        let mut parts = release[..end].split('.').filter(|p| !p.is_empty()).map(|p| p.parse::<u32>().ok());
        let major = parts.next()??;
        let minor = parts.next().unwrap_or(Some(0))?;
        let patch = parts.next().unwrap_or(Some(0))?;
        Some(Version(major, minor, patch))
    }

    fn parse_exact(text: &str) -> Option<Version> {
        let parts: Vec<&str> = text.split('.').collect();
        if parts.is_empty()
            || parts.len() > 3
            || parts.iter().any(|p| p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()))
        {
            return None;
        }
        let n = |i: usize| parts.get(i).map_or(Some(0), |p| p.parse().ok());
        Some(Version(n(0)?, n(1)?, n(2)?))
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.0, self.1, self.2)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cmp {
    Ge,
    Gt,
    Le,
    Lt,
}

/// `>=6.4,<6.13`: every bound must hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelRange(Vec<(Cmp, Version)>);

impl KernelRange {
    pub fn parse(text: &str) -> Result<KernelRange, String> {
        let mut bounds = Vec::new();
        for part in text.split(',') {
            let part = part.trim();
            let (cmp, rest) = [(">=", Cmp::Ge), ("<=", Cmp::Le), (">", Cmp::Gt), ("<", Cmp::Lt)]
                .into_iter()
                .find_map(|(op, cmp)| part.strip_prefix(op).map(|r| (cmp, r.trim())))
                .ok_or_else(|| format!("bad kernel range `{text}`: `{part}` does not start with >=, >, <= or <"))?;
            let version = Version::parse_exact(rest).ok_or_else(|| {
                format!("bad kernel range `{text}`: `{rest}` is not a version such as 6.4 or 6.12.117")
            })?;
            bounds.push((cmp, version));
        }
        Ok(KernelRange(bounds))
    }

    pub fn contains(&self, v: Version) -> bool {
        self.0.iter().all(|(cmp, bound)| match cmp {
            Cmp::Ge => v >= *bound,
            Cmp::Gt => v > *bound,
            Cmp::Le => v <= *bound,
            Cmp::Lt => v < *bound,
        })
    }
}

/// One `requires.config` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ConfigNeed {
    option: String,
    /// `None`: built in or a module.
    value: Option<String>,
}

impl ConfigNeed {
    pub(super) fn parse(text: &str) -> Result<ConfigNeed, String> {
        let (option, value) = match text.split_once('=') {
            Some((o, v)) => (o.trim(), Some(v.trim().to_string())),
            None => (text.trim(), None),
        };
        let symbol = option.strip_prefix("CONFIG_").unwrap_or("");
        if symbol.is_empty() || !symbol.bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_') {
            return Err(format!("`{text}` is not a Kconfig option: write CONFIG_NAME or CONFIG_NAME=value"));
        }
        if value.as_deref() == Some("") {
            return Err(format!("`{text}` has no value after `=`"));
        }
        Ok(ConfigNeed { option: option.to_string(), value })
    }

    /// Why `config` does not meet this need, if it does not.
    fn unmet(&self, config: &BTreeMap<String, String>) -> Option<String> {
        let got = config.get(&self.option).map(String::as_str);
        let shown = got.map_or("absent".to_string(), |g| format!("`{g}`"));
        match self.value.as_deref() {
            None if matches!(got, Some("y" | "m")) => None,
            None => Some(format!("needs {} (y or m), the kernel has it {shown}", self.option)),
            Some("n") if matches!(got, None | Some("n")) => None,
            Some(want) if got == Some(want) => None,
            Some(want) => Some(format!("needs {}={want}, the kernel has it {shown}", self.option)),
        }
    }
}

/// The facts about one built kernel that `requires` is decided on.
#[derive(Debug, Clone, Copy)]
pub struct KernelFacts<'a> {
    /// `make kernelrelease`, e.g. `6.12.117`.
    pub release: &'a str,
    /// The kernel's `.config` (`kconfig::parse_config`).
    pub config: &'a BTreeMap<String, String>,
}

/// Why `text` is not a `requires.config` entry (`CONFIG_X` or `CONFIG_X=value`), if it is not.
pub fn config_need_error(text: &str) -> Option<String> {
    ConfigNeed::parse(text).err()
}

impl Requires {
    /// Why the scenario cannot run on this kernel (every unmet need), or `None` to run it.
    /// Entries are assumed valid (`parse` checked them); an invalid one counts as unmet.
    pub fn unmet(&self, kernel: &KernelFacts) -> Option<String> {
        let mut why = Vec::new();
        if let Some(range) = &self.kernel {
            match (KernelRange::parse(range), Version::from_release(kernel.release)) {
                (Err(e), _) => why.push(e),
                (_, None) => {
                    why.push(format!("needs kernel {range}, and kernelrelease `{}` has no version", kernel.release))
                }
                (Ok(r), Some(v)) if !r.contains(v) => {
                    why.push(format!("needs kernel {range}, this is {}", kernel.release))
                }
                _ => {}
            }
        }
        for option in &self.config {
            match ConfigNeed::parse(option) {
                Err(e) => why.push(e),
                Ok(need) => why.extend(need.unmet(kernel.config)),
            }
        }
        (!why.is_empty()).then(|| why.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(entries: &[(&str, &str)]) -> BTreeMap<String, String> {
        entries.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    #[allow(clippy::too_many_lines)] // one case after another, each with its expected answer
    fn requires_decide_run_or_skip() {
        let cfg = config(&[
            ("CONFIG_USER_EVENTS", "y"),
            ("CONFIG_LKDTM", "m"),
            ("CONFIG_PERF_EVENTS", "n"),
            ("CONFIG_HZ", "250"),
        ]);
        struct Case {
            comment: &'static str,
            kernel: Option<&'static str>,
            config: &'static [&'static str],
            release: &'static str,
            /// `None`: the scenario runs.
            skip: Option<&'static str>,
        }
        const fn case(
            comment: &'static str,
            kernel: Option<&'static str>,
            config: &'static [&'static str],
            release: &'static str,
            skip: Option<&'static str>,
        ) -> Case {
            Case { comment, kernel, config, release, skip }
        }
        let cases = [
            case("nothing required runs anywhere", None, &[], "6.12.117", None),
            case("a lower bound met", Some(">=6.4"), &[], "6.12.117", None),
            case("a lower bound met exactly, the patch level implied 0", Some(">=6.4"), &[], "6.4", None),
            case(
                "an older kernel is skipped",
                Some(">=6.4"),
                &[],
                "6.1.0-28-amd64",
                Some("needs kernel >=6.4, this is 6.1.0-28-amd64"),
            ),
            case(
                "an upper bound excludes its version",
                Some("<6.4"),
                &[],
                "6.4.0",
                Some("needs kernel <6.4, this is 6.4.0"),
            ),
            case("an upper bound met", Some("<6.4"), &[], "6.3.13", None),
            case("a window, spaces allowed", Some(">=6.4, <6.13"), &[], "6.12.117", None),
            case(
                "a window's upper end",
                Some(">=6.4,<6.13"),
                &[],
                "6.13.0",
                Some("needs kernel >=6.4,<6.13, this is 6.13.0"),
            ),
            case("patch levels compare as numbers, not text", Some(">=6.12.9"), &[], "6.12.117", None),
            case("a release candidate counts as its release", Some(">=6.13"), &[], "6.13.0-rc3", None),
            case("a local suffix is ignored", Some("<=6.12.117"), &[], "6.12.117-dirty", None),
            case("strict bounds", Some(">6.12,<6.12.118"), &[], "6.12.117", None),
            case(
                "a release without a version cannot be judged",
                Some(">=6.4"),
                &[],
                "linux-next",
                Some("needs kernel >=6.4, and kernelrelease `linux-next` has no version"),
            ),
            case("a built-in option", None, &["CONFIG_USER_EVENTS"], "6.12.117", None),
            case("a module counts as present", None, &["CONFIG_LKDTM"], "6.12.117", None),
            case(
                "an unset option is missing",
                None,
                &["CONFIG_PERF_EVENTS"],
                "6.12.117",
                Some("needs CONFIG_PERF_EVENTS (y or m), the kernel has it `n`"),
            ),
            case(
                "an absent option is missing",
                None,
                &["CONFIG_KPROBES"],
                "6.12.117",
                Some("needs CONFIG_KPROBES (y or m), the kernel has it absent"),
            ),
            case("an exact value", None, &["CONFIG_HZ=250"], "6.12.117", None),
            case(
                "a wrong value",
                None,
                &["CONFIG_LKDTM=y"],
                "6.12.117",
                Some("needs CONFIG_LKDTM=y, the kernel has it `m`"),
            ),
            case("=n holds when unset", None, &["CONFIG_PERF_EVENTS=n"], "6.12.117", None),
            case("=n holds when absent", None, &["CONFIG_KPROBES=n"], "6.12.117", None),
            case(
                "=n fails when set",
                None,
                &["CONFIG_USER_EVENTS=n"],
                "6.12.117",
                Some("needs CONFIG_USER_EVENTS=n, the kernel has it `y`"),
            ),
            case(
                "every unmet need is told",
                Some(">=7.0"),
                &["CONFIG_PERF_EVENTS", "CONFIG_USER_EVENTS"],
                "6.12.117",
                Some("needs kernel >=7.0, this is 6.12.117; needs CONFIG_PERF_EVENTS (y or m), the kernel has it `n`"),
            ),
        ];
        for c in cases {
            let requires = Requires {
                kernel: c.kernel.map(String::from),
                config: c.config.iter().map(|s| s.to_string()).collect(),
            };
            let facts = KernelFacts { release: c.release, config: &cfg };
            assert_eq!(requires.unmet(&facts).as_deref(), c.skip, "{}", c.comment);
        }
    }

    #[test]
    fn kernel_ranges_and_versions_parse() {
        let bad = [
            ("", "bad kernel range ``: `` does not start with >=, >, <= or <"),
            ("6.4", "bad kernel range `6.4`: `6.4` does not start with >=, >, <= or <"),
            ("=6.4", "bad kernel range `=6.4`: `=6.4` does not start with >=, >, <= or <"),
            (">=6.4,", "bad kernel range `>=6.4,`: `` does not start with >=, >, <= or <"),
            (">=6.4.1.2", "bad kernel range `>=6.4.1.2`: `6.4.1.2` is not a version such as 6.4 or 6.12.117"),
            (">=v6.4", "bad kernel range `>=v6.4`: `v6.4` is not a version such as 6.4 or 6.12.117"),
        ];
        for (text, want) in bad {
            assert_eq!(KernelRange::parse(text).unwrap_err(), want);
        }
        assert_eq!(Version::from_release("6.12.117"), Some(Version(6, 12, 117)));
        assert_eq!(Version::from_release("6"), Some(Version(6, 0, 0)));
        assert_eq!(Version::from_release("6.13-rc1"), Some(Version(6, 13, 0)));
        assert_eq!(Version::from_release(""), None);
    }
}
