//! `cargo xtask history`: the recorded runs asked about: the latest run's classes (`show`, the
//! default; exits 1 on a regression), the scenarios that flip (`flakes`), run folders recorded
//! after the fact (`import`), the static page of it all (`dashboard`), KCIDB out of it (`kcidb`).

use anyhow::Result;

use crate::cli::{HistoryArgs, HistoryCmd};

impl HistoryArgs {
    pub fn run(self) -> Result<u8> {
        match self.command {
            None => crate::history::show(&self.show),
            Some(HistoryCmd::Show(a)) => crate::history::show(&a),
            Some(HistoryCmd::Flakes(a)) => {
                let keep = |name: &str| a.filter.as_deref().is_none_or(|g| crate::run::select::glob(g, name));
                crate::history::flakes(&a, &keep)
            }
            Some(HistoryCmd::Import(a)) => crate::history::import(&a.dirs),
            Some(HistoryCmd::Dashboard(a)) => crate::history::dashboard(&a),
            Some(HistoryCmd::Kcidb(a)) => crate::history::kcidb(&a),
        }
    }
}
