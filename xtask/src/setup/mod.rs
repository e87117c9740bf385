//! Provisioning, the first step of every verb: what the verb needs from the host
//! (`provision::Needs`, from its flags) checked by capability and, on a Debian-like host as root,
//! installed; elsewhere named with its packages. What it hands on is a host where the verb's
//! tools are present, or an error naming each missing one.

pub mod provision;
