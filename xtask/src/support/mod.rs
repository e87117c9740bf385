//! Leaves that every phase uses and that use no phase: the checkout's paths, external commands,
//! the exit codes and error kinds, file helpers, progress lines, plain text and per-phase timings.

pub mod checkout;
pub mod cmd;
pub mod exit;
pub mod files;
pub mod progress;
pub mod text;
pub mod timings;
