//! Judging: a boot's logs (the kernel console and the result channel) and how its VM ended, into
//! one verdict per boot with every planned scenario accounted for. Its main type is
//! `run_folder::JudgedBoot` (a boot folder, its facts and its `verdict::Judgement`), which
//! `results/` turns into the run model.
//!
//! - `console`: sans-IO scan of the kernel log for panics, Oops, WARNINGs, sanitizer reports;
//! - `channel`: sans-IO, the result channel's events (KTAP v1 with `ue-` frames, parsed once
//!   by `vm::channel`) folded into per-scenario records;
//! - `verdict`: sans-IO, the verdict from both, xfail and xpass counted;
//! - `run_folder`: the run folder's layout and each boot's record (`verdict.json`), the one
//!   place a boot's logs are read to be judged (the result channel only for a recorded boot:
//!   a live one hands over the events its VM's run parsed).

pub mod channel;
pub mod console;
pub mod run_folder;
pub mod verdict;
