//! bookworm-backports as an apt source of the host, which Debian 12's QEMU comes from: whether
//! the host has it, and adding it (a file of our own, said with how to take it back).

use anyhow::{Context, Result};

use crate::support::exit::{error, Kind};
use crate::support::progress::line;

pub(super) const BACKPORTS_FILE: &str = "/etc/apt/sources.list.d/user-events-conformance-backports.sources";

/// The host's apt sources have bookworm-backports.
pub(super) fn backports_configured() -> bool {
    crate::kernel::debian::apt_source_files().iter().any(|f| {
        std::fs::read_to_string(f).unwrap_or_default().lines().any(|l| {
            let l = l.trim();
            !l.starts_with('#') && l.contains("bookworm-backports")
        })
    })
}

/// Adds bookworm-backports to the host's apt sources (Debian 12's QEMU comes from there), from
/// the Debian archive the host already uses, and says which file it wrote and how to take it
/// back: the host's apt configuration is the user's, not ours.
pub(super) fn add_backports_source() -> Result<()> {
    let uri = crate::kernel::debian::archive_uri().ok_or_else(|| {
        error(
            Kind::Infra,
            "setup: cannot find this host's Debian archive for bookworm in /etc/apt to add bookworm-backports",
        )
    })?;
    std::fs::write(BACKPORTS_FILE, backports_source(&uri)).with_context(|| format!("writing {BACKPORTS_FILE}"))?;
    line(backports_notice());
    Ok(())
}

/// The deb822 source for bookworm-backports from `uri`.
pub(super) fn backports_source(uri: &str) -> String {
    format!(
        "# Added by `cargo xtask setup` (user_events conformance suite) for QEMU from bookworm-backports.\n\
         # To remove: sudo rm {BACKPORTS_FILE} && sudo apt-get update\n\
         Types: deb\nURIs: {uri}\nSuites: bookworm-backports\nComponents: main\n\
         Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n"
    )
}

/// What the user is told when the source is added.
pub(super) fn backports_notice() -> String {
    format!(
        "setup: added a host apt source, bookworm-backports (Debian 12's QEMU comes from there): {BACKPORTS_FILE}\n  \
         packages installed from it stay when it is removed; to remove it: sudo rm {BACKPORTS_FILE} && sudo apt-get update"
    )
}
