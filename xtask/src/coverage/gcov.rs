//! The host's `gcov`: the one that comes with the compiler that built the kernel
//! (`aarch64-linux-gnu-gcov` beside `aarch64-linux-gnu-gcc`, `gcov` beside `gcc`), its version
//! checked against the stamp in the build's `.gcno` and the guest's `.gcda` (gcov misreads
//! counters of another gcc's layout: `GCOV_COUNTERS` and the record formats change between
//! releases), and its JSON intermediate output for one snapshot.

use std::path::Path;

use anyhow::{Context, Result};

use crate::support::cmd::{cmd, sh, stdout};
use crate::support::exit::{error, Kind};

/// A `.gcno`/`.gcda` header's version stamp (gcc's `GCOV_VERSION`: `B22*` is 12.2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stamp {
    pub text: String,
    pub major: u32,
    pub minor: u32,
}

impl std::fmt::Display for Stamp {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "gcc {}.{} (stamp {})", self.major, self.minor, self.text)
    }
}

/// The stamp of a `.gcno` or `.gcda` in either byte order (the compiler writes the notes in the
/// host's order, the kernel writes the data in the guest's: s390x is big-endian).
pub fn stamp(bytes: &[u8]) -> Option<Stamp> {
    let magic = bytes.get(0..4)?;
    let version = bytes.get(4..8)?;
    let chars: Vec<u8> = match magic {
        b"gcno" | b"gcda" => version.to_vec(),
        b"oncg" | b"adcg" => version.iter().rev().copied().collect(),
        _ => return None,
    };
    let text = String::from_utf8(chars.clone()).ok()?;
    let digit = |c: u8| c.checked_sub(b'0').filter(|d| *d < 10).map(u32::from);
    let major = u32::from(chars[0].checked_sub(b'A')?) * 10 + digit(chars[1])?;
    let minor = digit(chars[2])?;
    Some(Stamp { text, major, minor })
}

/// `gcov (Debian 12.2.0-14+deb12u1) 12.2.0` to (12, 2).
pub fn version_of(first_line: &str) -> Option<(u32, u32)> {
    let last = first_line.split_whitespace().last()?;
    let mut it = last.split('.');
    Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
}

/// The gcov to read a kernel's data with.
#[derive(Debug, Clone)]
pub struct Gcov {
    pub command: String,
    /// Its `--version` line.
    pub banner: String,
    pub version: (u32, u32),
}

impl Gcov {
    /// The gcov beside `compiler` (`aarch64-linux-gnu-gcc`), which comes in the compiler's
    /// package (`package`, named when it is missing).
    pub fn beside(compiler: &str, package: &str) -> Result<Gcov> {
        let command = match compiler.strip_suffix("gcc") {
            Some(prefix) => format!("{prefix}gcov"),
            None => "gcov".to_string(),
        };
        let sh = sh()?;
        let banner = stdout(cmd!(sh, "{command} --version")).map_err(|e| {
            error(
                Kind::Infra,
                format!("coverage: `{command}` does not run ({e:#}); it comes with the Debian package {package}"),
            )
        })?;
        let banner = String::from_utf8_lossy(&banner).lines().next().unwrap_or("").to_string();
        let version = version_of(&banner).ok_or_else(|| {
            error(Kind::Infra, format!("coverage: cannot read a version in `{command} --version`: {banner}"))
        })?;
        Ok(Gcov { command, banner, version })
    }

    /// Fails, naming both versions, when `file`'s stamp is not this gcov's.
    pub fn check(&self, file: &Path, bytes: &[u8]) -> Result<()> {
        let Some(s) = stamp(bytes) else {
            return Err(error(Kind::Infra, format!("coverage: {} is not a gcov notes or data file", file.display())));
        };
        if (s.major, s.minor) != self.version {
            return Err(error(
                Kind::Infra,
                format!(
                    "coverage: {} was written by {s}, but `{}` is gcov {}.{} ({}): gcov reads only its own \
                     gcc's layout (GCOV_COUNTERS and records differ); build the kernel with the gcc this gcov \
                     comes with, or put that gcc's gcov first on PATH",
                    file.display(),
                    self.command,
                    self.version.0,
                    self.version.1,
                    self.banner
                ),
            ));
        }
        Ok(())
    }

    /// gcov's JSON intermediate format of one snapshot: `gcda` against the notes `gcno`.
    pub fn json(&self, gcno: &Path, gcda: &[u8]) -> Result<String> {
        let dir = tempfile::tempdir()?;
        let stem = gcno.file_stem().context("a .gcno with a name")?.to_string_lossy().into_owned();
        std::fs::copy(gcno, dir.path().join(format!("{stem}.gcno")))
            .with_context(|| format!("copying {}", gcno.display()))?;
        let data = format!("{stem}.gcda");
        std::fs::write(dir.path().join(&data), gcda)?;
        let sh = sh()?;
        sh.change_dir(dir.path());
        let command = &self.command;
        let out = stdout(cmd!(sh, "{command} --json-format --stdout --branch-probabilities --branch-counts {data}"))
            .map_err(|e| error(Kind::Infra, format!("coverage: {e:#}")))?;
        Ok(String::from_utf8_lossy(&out).into_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data() -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("test_data/gcov")
    }

    #[test]
    fn stamps_in_both_byte_orders() {
        let le = std::fs::read(data().join("demo.gcno")).unwrap();
        let s = stamp(&le).unwrap();
        assert_eq!((s.major, s.minor, s.text.as_str()), (12, 2, "B22*"));
        // The same header as a big-endian guest writes it.
        let be = [b"gcda".as_slice(), b"B22*"].concat();
        assert_eq!(stamp(&be), Some(s.clone()));
        assert_eq!(stamp(&[b"adcg".as_slice(), b"*74A"].concat()).map(|s| (s.major, s.minor)), Some((4, 7)));
        assert_eq!(stamp(b"ELF\x7f1234"), None);
        assert_eq!(version_of("gcov (Debian 12.2.0-14+deb12u1) 12.2.0"), Some((12, 2)));
        assert_eq!(version_of("gcov (GCC) 14.1.1 20240507 (Red Hat 14.1.1-1)"), Some((14, 1)));
        assert_eq!(version_of("gcov"), None);
    }

    #[test]
    fn a_version_mismatch_names_both_versions() {
        let g = Gcov { command: "gcov".into(), banner: "gcov (Debian 13.1.0-1) 13.1.0".into(), version: (13, 1) };
        let file = data().join("demo.gcno");
        let err = g.check(&file, &std::fs::read(&file).unwrap()).unwrap_err().to_string();
        assert!(err.contains("written by gcc 12.2 (stamp B22*)") && err.contains("is gcov 13.1"), "{err}");
        assert_eq!(crate::support::exit::code_for(&g.check(&file, b"nonsense").unwrap_err()), 129);
    }

    /// The host's own gcov (it comes with gcc, which every build needs) on the fixture.
    #[test]
    fn host_gcov_reads_the_fixture() {
        let g = Gcov::beside("gcc", "gcc").unwrap();
        let gcda = std::fs::read(data().join("demo-3.gcda")).unwrap();
        if g.version != (12, 2) {
            eprintln!("the fixture is gcc 12.2's; this host's gcov is {:?}: only the mismatch is checked", g.version);
            assert!(g.check(&data().join("demo-3.gcda"), &gcda).is_err());
            return;
        }
        g.check(&data().join("demo-3.gcda"), &gcda).unwrap();
        let json = g.json(&data().join("demo.gcno"), &gcda).unwrap();
        let f = crate::coverage::lcov::from_gcov_json(&json, "demo.c").unwrap();
        let want = crate::coverage::lcov::from_gcov_json(
            &std::fs::read_to_string(data().join("demo-3.json")).unwrap(),
            "demo.c",
        )
        .unwrap();
        assert_eq!(f, want);
    }
}
