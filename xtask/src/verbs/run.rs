//! `cargo xtask run`: the main job. The chosen scenarios on each arch's kernel, the reports,
//! and with `--upstream-selftests` the kernel's own selftests into the same run folder.

use anyhow::Result;

use crate::cli::{KernelArgs, RunArgs};
use crate::run::pipeline::{choose, rerun_arches, Pipeline};
use crate::setup::provision::Needs;

impl RunArgs {
    pub fn run(mut self) -> Result<u8> {
        let chosen = choose(&self.select, &self.vm.results_root())?;
        self.kernel = rerun_arches(&chosen, self.kernel);
        let needs = Needs::run(&self, &chosen.clients());
        let kernel = KernelArgs { config_only: self.select.list, ..self.kernel.clone() };
        let mut p = Pipeline::prepare(chosen, &needs, &kernel, &self.vm)?;
        p.opts.fail_fast = self.fail_fast;
        if self.select.list {
            return p.list();
        }
        let mut ran = p.run()?;
        if !self.no_rerun_unstable {
            crate::run::recheck::recheck(&p, &mut ran)?;
        }
        let code = ran.exit_code(self.kernel.config.fail_on_blind_spots);
        // Into the suites' run folder; never gating.
        match &ran.dir {
            Some(dir) if self.upstream_selftests => {
                let upstream = crate::upstream::run(&p.built, &p.opts, dir)?;
                Ok(if code != 0 { code } else { upstream })
            }
            _ => Ok(code),
        }
    }
}
