//! The VM phase: the guest's initramfs (the agent as /init, the plan, the clients), QEMU and
//! virtiofsd spawned in their own process groups, and the host's progress watchdog. Its main
//! type is `qemu::Ended` (how a VM ended, with its logs in the boot folder), which `judging/`
//! turns into a verdict.
//!
//! - `initramfs`: the agent and clients built, and the cpio packed;
//! - `qemu`: the only place that spawns QEMU (and, through `virtiofsd`, its daemons); command
//!   lines, kill reasons;
//! - `virtiofsd`: the shared folders' daemons, sandboxed (namespace, else chroot);
//! - `children`: the child process groups, killed on drop, on a signal or at `--timeout`;
//! - `channel`: sans-IO, the result channel's lines parsed once per boot into events;
//! - `hang`: sans-IO, when a silent guest counts as hung;
//! - `progress`: sans-IO, when a long step's progress markers say it stalled or crawls.

pub mod channel;
pub mod children;
pub mod hang;
pub mod initramfs;
pub mod progress;
pub mod qemu;
pub mod virtiofsd;
