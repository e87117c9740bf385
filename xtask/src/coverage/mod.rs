//! Coverage: what the suites reach. The ABI catalogue's items against the suites' `covers:`
//! (`catalogue::Report`, printed by `cargo xtask coverage`), and on a coverage kernel
//! (`--coverage`) the kernel lines and branches each scenario executes:
//!
//! - `gcov`: the host's gcov of the kernel's compiler, its version checked against the data;
//! - `lcov`: counts from gcov's JSON, merged, written and read as lcov tracefiles (sans-IO);
//! - `diff`: the lines a patch set added or changed in a source (sans-IO);
//! - `annotate`: the annotated sources page (sans-IO);
//! - `affected`: the scenarios a change can affect, read through a baseline's map (sans-IO);
//! - `map`: that map (an earlier coverage run of the baseline) found and read, the change's texts;
//! - `prefetch`: each boot's snapshots converted as they arrive, at the lowest priority;
//! - `runs`: a run's `# ue-gcov` frames into its `coverage/` folder and summary;
//! - `unexecuted`: a run's instrumented lines against the tracked list of unexecuted ones (sans-IO);
//! - `tracked`: that check on a run folder (`coverage --unexecuted`), read and reported.

pub mod affected;
pub mod annotate;
pub mod catalogue;
pub mod diff;
pub mod gcov;
pub mod lcov;
pub mod map;
pub mod prefetch;
pub mod runs;
pub mod tracked;
pub mod unexecuted;
