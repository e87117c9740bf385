//! The exit codes of `cargo xtask`, documented in one place, and the error kinds that map to them.
//!
//! They suit `git bisect run`, which calls 0 good, 125 "skip this commit", 1-127 bad, and
//! aborts the bisection on anything above 127: only a test failure may blame a commit, so bad
//! input and infrastructure failures (a flaky QEMU start, a missing tool) are >= 128.
//!
//! | code | meaning                                                              |
//! |------|----------------------------------------------------------------------|
//! | 0    | everything asked for was done and every test passed                  |
//! | 1    | a test failed                                                        |
//! | 2    | `--fail-on-blind-spots`: nothing failed, but the patch adds lines no scenario executed |
//! | 125  | the kernel cannot be built or configured (`git bisect run` skips it) |
//! | 128  | bad input or usage (a flag, a file, a fragment, a patch)             |
//! | 129  | infrastructure failure (a missing tool, provisioning, QEMU)          |
//! | 130  | interrupted (SIGINT, SIGTERM, SIGHUP); the run folder keeps what ran |
//! | 131  | `--timeout` expired: ended like an interrupt, the reports written      |

use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    TestFailed,
    BadInput,
    Infra,
    CannotBuild,
    Interrupted,
    /// `--timeout` expired; it aborts a bisection, like an interrupt (nothing was judged).
    TimedOut,
}

impl Kind {
    pub fn code(self) -> u8 {
        match self {
            Kind::TestFailed => 1,
            Kind::BadInput => 128,
            Kind::Infra => 129,
            Kind::CannotBuild => 125,
            Kind::Interrupted => 130,
            Kind::TimedOut => 131,
        }
    }
}

/// `--fail-on-blind-spots` when the patch adds executable lines no scenario executed and
/// nothing failed (`git bisect run` would call the commit bad: the flag is for gating, not bisecting).
pub const BLIND_SPOTS: u8 = 2;

/// An error that carries the exit code it should end the process with.
#[derive(Debug)]
pub struct Classified {
    pub kind: Kind,
    pub message: String,
}

impl fmt::Display for Classified {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Classified {}

/// Builds an error of the given kind; use with `return Err(...)` or `.map_err`.
pub fn error(kind: Kind, message: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(Classified { kind, message: message.into() })
}

/// The exit code for an error: the innermost classified cause wins, anything else is infrastructure.
pub fn code_for(err: &anyhow::Error) -> u8 {
    err.chain().filter_map(|e| e.downcast_ref::<Classified>()).last().map_or(Kind::Infra.code(), |c| c.kind.code())
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::Context;

    #[test]
    fn context_keeps_the_classified_code() {
        let err: anyhow::Result<()> = Err(error(Kind::CannotBuild, "make failed"));
        let err = err.context("building x86_64").unwrap_err();
        assert_eq!(code_for(&err), 125);
        assert_eq!(code_for(&anyhow::anyhow!("io")), 129);
        assert_eq!(code_for(&error(Kind::BadInput, "x")), 128);
        // `git bisect run`: 0 good, 1 bad, 125 skip, above 127 abort.
        let codes: Vec<u8> =
            [Kind::TestFailed, Kind::CannotBuild, Kind::BadInput, Kind::Infra, Kind::Interrupted, Kind::TimedOut]
                .iter()
                .map(|k| k.code())
                .collect();
        assert_eq!(codes, [1, 125, 128, 129, 130, 131]);
    }
}
