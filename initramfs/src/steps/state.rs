//! The state a scenario's steps build up and share: what the user_events, perf and eBPF steps
//! made, and the children `fork` started. It lives as long as the scenario's process: a `fork`
//! child works on its copy, a `thread` borrows it, the threads of `threads` share its
//! user_events names, an `exec_agent` starts from an empty one.

use std::collections::HashMap;
use std::os::fd::OwnedFd;

use protocol::Step;

use crate::steps::bpf::Programs;
use crate::steps::perf::PerfEvents;
use crate::steps::uevents::UserEvents;

/// Everything one scenario's steps made, by the names the steps gave it.
#[derive(Default)]
pub struct ScenarioState {
    /// Descriptors, enable words, write indexes.
    pub events: UserEvents,
    /// Open perf events.
    pub perf: PerfEvents,
    /// Loaded eBPF programs, and raw tracepoint attachments (alive while open).
    pub bpf: Programs,
    pub bpf_links: Vec<OwnedFd>,
    /// Forked children, until a `wait` collects them.
    pub children: HashMap<String, libc::pid_t>,
    /// A thread of a `threads` step: steps that act on the whole process are refused.
    pub in_threads: bool,
    /// A `fail_nth` step waiting for the next step, whose first call it fails.
    pub fault: Option<crate::steps::faults::Fault>,
    /// File contents a `read_file` kept (`keep_as`), by name.
    pub kept: HashMap<String, String>,
}

// SAFETY: the pages and ring buffers are plain mappings owned by this state; a `thread` step
// lends the whole state to one thread at a time (the parent blocks in join), so nothing is
// shared racily.
unsafe impl Send for ScenarioState {}

impl ScenarioState {
    /// What a thread of a `threads` step works on: the same user_events names (descriptors,
    /// enable words, write indexes; shared, as threads share them) and a copy of the kept
    /// contents, none of the rest.
    pub fn thread_view(&self) -> ScenarioState {
        ScenarioState {
            events: self.events.clone(),
            kept: self.kept.clone(),
            in_threads: true,
            ..ScenarioState::default()
        }
    }

    /// A state whose `data` descriptor opens `data_path` instead of `user_events_data`.
    #[cfg(test)]
    pub fn with_data_path(data_path: std::path::PathBuf) -> ScenarioState {
        ScenarioState { events: UserEvents::with_data_path(data_path), ..ScenarioState::default() }
    }
}

/// Runs nested steps on a state, their lines after a nesting prefix, and gives their status:
/// the dispatcher's `run_nested`, handed to the steps that run steps (`nesting`, `sweeps`).
pub type Runner = fn(&mut ScenarioState, &[Step], &mut dyn std::io::Write, &str) -> i32;
