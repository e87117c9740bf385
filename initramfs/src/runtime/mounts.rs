//! The file systems the guest needs, mounted by PID 1: the fixed set first, then what the
//! plan asks for (the artifacts folder and the user's share).

use std::path::Path;

use protocol::Plan;

use crate::runtime::sys;

/// (source, target, fstype), in order: later targets live inside earlier ones.
const BASE: [(&str, &str, &str); 6] = [
    ("devtmpfs", "/dev", "devtmpfs"),
    ("proc", "/proc", "proc"),
    ("sysfs", "/sys", "sysfs"),
    ("tracefs", "/sys/kernel/tracing", "tracefs"),
    ("debugfs", "/sys/kernel/debug", "debugfs"),
    ("tmpfs", "/tmp", "tmpfs"),
];

/// Mounts the fixed set; a failure is reported on the console and the agent carries on, so a
/// kernel without (say) debugfs still runs the scenarios that do not need it.
pub fn mount_base() {
    for (source, target, fstype) in BASE {
        mount_one(source, target, fstype);
    }
}

/// Mounts what the plan asks for: `/artifacts` over virtio-fs or as a tmpfs, and the share.
pub fn mount_plan(plan: &Plan) {
    if plan.artifacts_virtiofs {
        mount_one(protocol::ARTIFACTS_TAG, protocol::ARTIFACTS_DIR, "virtiofs");
    } else {
        mount_one("tmpfs", protocol::ARTIFACTS_DIR, "tmpfs");
    }
    if let Some(share) = &plan.share {
        mount_one(protocol::SHARE_TAG, share, "virtiofs");
    }
}

fn mount_one(source: &str, target: &str, fstype: &str) -> bool {
    // On sysfs the mount points already exist (or cannot be made); mount reports either way.
    let _ = std::fs::create_dir_all(target);
    match sys::mount(source, Path::new(target), fstype) {
        Ok(()) => true,
        Err(e) => {
            sys::console(&format!("ue-agent: mount {target} failed: {}", sys::error_name(&e)));
            false
        }
    }
}
