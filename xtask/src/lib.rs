//! The host orchestrator of the user_events conformance suite, as a library: one folder per
//! phase, imported in one direction only (`xtask/tests/tidy.rs` checks it), from the leaves up:
//!
//! - `support/`: leaves every phase uses (the checkout, external commands, exit codes, files,
//!   progress lines, phase timings);
//! - `arch.rs`: per-arch facts as a data table;
//! - `kernel/`: a kernel source made into a built, checked kernel (`kernel::build_all` of a
//!   `kernel::Request`, into `kernel::build::Built`);
//! - `vm/`: QEMU, the guest's initramfs and the host's hang watchdog (`vm::qemu::Ended`);
//! - `suites/`: the scenario language, compiled into a plan per kernel;
//! - `cli/`: the command line's vocabulary (clap) for the layers above, and the kernel flags
//!   lowered into build requests;
//! - `judging/`: a boot's logs into a verdict, and the run folder's records (`JudgedBoot`);
//! - `results/`: the one run model, its renderers, `compare` and `merge`;
//! - `coverage/`: what the suites cover;
//! - `mutants/`: mutation testing of the kernel under test: mutants, selection, reports;
//! - `setup/`: provisioning, from what a verb needs; the project's own checks;
//! - `run/`: one run in order (`pipeline::Pipeline`): provisioning and kernels, plans, boots in
//!   lanes, reports; and the flows made of runs (`validate`, `bisect`, `bench`, `replay`);
//! - `upstream/`: the kernel's own user_events selftests, built and booted one binary a boot;
//! - `mutating/`: a mutation campaign: the mutants planned, run as child runs, TCE, reports;
//! - `verbs/`: one module per `cargo xtask` verb, parse and call, called only by `main.rs`.

pub mod arch;
pub mod cli;
pub mod coverage;
pub mod history;
pub mod judging;
pub mod kernel;
pub mod mutants;
pub mod mutating;
pub mod results;
pub mod run;
pub mod setup;
pub mod suites;
pub mod support;
pub mod upstream;
pub mod verbs;
pub mod vm;
