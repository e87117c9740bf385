//! The verbs of `cargo xtask`, one module each, every one an `impl cli::<Verb>Args { fn run }`
//! returning the exit code (rust-analyzer's xtask shape): it parses and calls. Only `main.rs`
//! calls them; their work is in the phases below them (a booting verb's in `run::pipeline`,
//! `validate`'s and `bisect`'s in `run/`).

pub mod atlas;
pub mod bench;
pub mod bisect;
pub mod boot;
pub mod check_suites;
pub mod compare;
pub mod coverage;
pub mod exec;
pub mod history;
pub mod kernel;
pub mod matrix;
pub mod merge;
pub mod mutants;
pub mod replay;
pub mod report;
pub mod run;
pub mod setup;
pub mod shell;
pub mod test;
pub mod upstream;
pub mod validate;
