//! The agent's runtime, around the steps: PID 1's plan loop and the scenario processes it
//! supervises (`supervisor`), the kernel's state undone and checked between scenarios
//! (`hygiene`), stuck tasks found (`stuck`), file systems (`mounts`), the console shell
//! (`shell`), system call wrappers (`sys`), and a coverage kernel's counters (`gcov`).

pub mod gcov;
pub mod hygiene;
pub mod mounts;
pub mod shell;
pub mod stuck;
pub mod supervisor;
pub mod sys;
