//! Mutation testing of the kernel under test (`cargo xtask mutants`):
//!
//! - `mutant`: one mutant (its span, replacement, operator family and schema site), applied, as
//!   a diff, in a few words (sans-IO);
//! - `find`: mutation points of a kernel C file, parsed with tree-sitter's C grammar, each with
//!   a stable id (sans-IO);
//! - `select`: `--in-diff PATCH` and `--shard k/n` (sans-IO);
//! - `shards`: `campaign.json` (the file text, selection and shards a state file holds) and the
//!   merge of shard folders' results, refused on another text, a missing shard or two results
//!   of one mutant (sans-IO);
//! - `plan`: the scenarios covering each mutant from a coverage run, the resumable state file;
//! - `equivalent`: the tracked list of equivalent mutants, each keyed to the file text it was
//!   argued for, with its class and Kconfig conditions; what applies and what is stale (sans-IO);
//! - `batch`: several mutants in one boot, each a group of its covering scenarios under its
//!   number, the batch's run split per mutant and the outcomes it can vouch for (sans-IO);
//! - `classify`: a mutant's outcome from its build and its scenarios' run (sans-IO);
//! - `report`: the outcomes, the tracked equivalent list, `mutants.json` in Stryker's schema
//!   (sans-IO);
//! - `html`: `mutants.html`, each undetected mutant in its source context (sans-IO);
//! - `schemata`: one source holding every mutant behind the `trace_events_user.mutant=N` boot
//!   switch, so one kernel build serves them all, and the mutants a compiler error blames
//!   (sans-IO);
//! - `tce`: trivial compiler equivalence, each mutant's object compiled with the kernel build's
//!   own command line and compared with the original's and the others';
//! - `summary`: `summary.md`, the score with and without NoCoverage, per operator and function.

pub mod batch;
pub mod classify;
pub mod equivalent;
pub mod find;
pub mod html;
pub mod mutant;
pub mod plan;
pub mod report;
pub mod schemata;
pub mod select;
pub mod shards;
pub mod summary;
pub mod tce;
