//! Provisioning, the first step of every verb: what the verb needs from the host
//! (`provision::Needs`, from its flags) checked by capability and, on a Debian-like host as root,
//! installed; elsewhere named with its packages. What it hands on is a host where the verb's
//! tools are present, or an error naming each missing one.
//!
//! - `provision`: `Needs`, probed, installed or named;
//! - `checks`: the project's own checks (`cargo xtask test`), a list of commands that starts
//!   with provisioning.

pub mod checks;
pub mod provision;
