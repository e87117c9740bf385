//! `cargo xtask setup [--check] [--arch A]`: explicit, so `--no-setup` does not apply. With
//! `--check` it changes nothing and exits 129 when something is missing.

use anyhow::Result;

use crate::cli::SetupArgs;
use crate::setup::provision::{items, missing, provision, report, Hints, Needs};
use crate::support::exit::Kind;

impl SetupArgs {
    pub fn run(self) -> Result<u8> {
        let needs = Needs::everything_for(&self.arch)?;
        if !self.check {
            return provision(&needs, true).map(|()| 0);
        }
        let items = items(&needs);
        let missing = missing(&items);
        let arches: Vec<&str> = needs.arches.iter().map(|a| a.name).collect();
        if missing.is_empty() {
            println!("setup --check: all {} pieces present ({})", items.len(), arches.join(", "));
            return Ok(0);
        }
        println!(
            "setup --check: {} of {} pieces missing ({}):\n{}",
            missing.len(),
            items.len(),
            arches.join(", "),
            report(&missing, &Hints::here())
        );
        Ok(Kind::Infra.code())
    }
}
