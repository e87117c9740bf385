//! `cargo xtask run`: the main job. The chosen scenarios on each arch's kernel, the reports,
//! and with `--upstream-selftests` the kernel's own selftests into the same run folder.

use anyhow::Result;

use crate::cli::{KernelArgs, RunArgs};
use crate::run::{boot, pipeline};
use crate::setup::provision::{clients_of_chosen, Needs};
use crate::verbs::prepare::prepare;

impl RunArgs {
    pub fn run(mut self) -> Result<u8> {
        let chosen = pipeline::choose(&self.select, &self.vm.results_root())?;
        self.kernel = pipeline::rerun_arches(&chosen, self.kernel);
        let needs = Needs::run(&self, &clients_of_chosen(&chosen));
        let kernel = KernelArgs { config_only: self.select.list, ..self.kernel.clone() };
        let mut p = prepare(&needs, &kernel, &self.vm)?;
        p.opts.fail_fast = self.fail_fast;
        if self.select.list {
            return pipeline::list_plans(&chosen, &p.built);
        }
        let judged = pipeline::run(&chosen, &p.built, &p.opts)?;
        let mut code = boot::exit_code(&judged);
        let run = pipeline::publish(&judged, &p.built)?;
        if code == 0
            && self.kernel.config.fail_on_blind_spots
            && run.as_ref().is_some_and(|r| !r.blind_spots().is_empty())
        {
            crate::support::progress::line("--fail-on-blind-spots: the patch adds lines no scenario executed");
            code = crate::support::exit::BLIND_SPOTS;
        }
        // Into the suites' run folder (`<run-id>/<arch>` is each boot's out_dir); never gating.
        let run_dir = judged.first().and_then(|j| j.outcome.out_dir.parent());
        match run_dir {
            Some(dir) if self.upstream_selftests => {
                let upstream = crate::verbs::upstream::run(&p.built, &p.opts, dir)?;
                Ok(if code != 0 { code } else { upstream })
            }
            _ => Ok(code),
        }
    }
}
