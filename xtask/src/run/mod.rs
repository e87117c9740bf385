//! One run, in order: the kernels built or fetched, the scenarios chosen and compiled into a
//! plan per kernel, the boots in one lane per arch (each judged as its VM ends), then the
//! reports. Its main type is `boot::BootRun` (a boot's outcome with its `JudgedBoot`), which
//! `pipeline::publish` hands to `results/`. `validate`, `bisect` and `test` run their sides
//! through the same steps.
//!
//! - `pipeline`: the steps of a run, from the flags to the published reports;
//! - `select`: `--filter` globs and `--rerun-failed`;
//! - `boot`: the boots of a plan (shared, isolated, resume), `exec` and `shell`;
//! - `accel`: KVM or TCG, KVM probed once with a trial boot;
//! - `breakage`: a kernel that broke: the culprit, a fresh boot for the rest or collateral.

pub mod accel;
pub mod bench;
pub mod bisect;
pub mod boot;
pub mod breakage;
pub mod pipeline;
pub mod replay;
pub mod select;
pub mod validate;
