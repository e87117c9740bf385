//! One run, in order: the host provisioned and the kernels built or fetched, the scenarios
//! chosen and compiled into a plan per kernel, the boots in one lane per arch (each judged as
//! its VM ends), then the reports. Its main types are `pipeline::Pipeline` (a run's parts,
//! prepared, then run into its folder and model) and `boot::BootRun` (a boot's outcome with
//! its `JudgedBoot`), which `pipeline::publish` hands to `results/`. The flows made of runs
//! run theirs through the same steps.
//!
//! - `pipeline`: the steps of a run, from the flags to the published reports and the model;
//! - `select`: `--filter` globs and `--rerun-failed`;
//! - `recheck`: a run's failures whose history flips, run again once before they gate;
//! - `boot`: the boots of a plan (shared, isolated, resume), `exec` and `shell`;
//! - `accel`: KVM or TCG, KVM probed once with a trial boot;
//! - `breakage`: a kernel that broke: the culprit, a fresh boot for the rest or collateral;
//! - `validate`: a baseline and a patched side, remembered, ordered by coverage, compared;
//! - `bisect`: `git bisect` of a kernel tree, a run per step;
//! - `bench`: the measuring suites' figures, the agent's boot against the floor;
//! - `replay`: a run's recorded boots booted again as they were;
//! - `atlas`: a run per kernel, then the grid of what differs between them and why.

pub mod accel;
pub mod atlas;
pub mod bench;
pub mod bisect;
pub mod boot;
pub mod breakage;
pub mod pipeline;
pub mod recheck;
pub mod replay;
pub mod select;
pub mod validate;
