//! The verbs of `cargo xtask`, one module each, every one an `impl cli::<Verb>Args { fn run }`
//! returning the exit code (rust-analyzer's xtask shape). Only `main.rs` calls them; they call
//! the phases below them. `prepare` is the start that the booting verbs share; `affected` is
//! `validate`'s coverage-first selection.

pub mod bench;
pub mod bisect;
pub mod boot;
pub mod check_suites;
pub mod compare;
pub mod coverage;
pub mod exec;
pub mod kernel;
pub mod matrix;
pub mod merge;
pub mod mutants;
pub mod mutants_run;
pub mod mutants_tce;
pub mod replay;
pub mod report;
pub mod run;
pub mod setup;
pub mod shell;
pub mod test;
pub mod upstream;
pub mod validate;
