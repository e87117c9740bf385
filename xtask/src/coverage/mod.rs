//! Coverage: what the suites reach. Today the ABI catalogue's items against the suites'
//! `covers:` (`catalogue::Report`, printed by `cargo xtask coverage`).

pub mod catalogue;
