//! `cargo xtask boot`: each kernel booted once with the guest agent, running chosen suites
//! (`--suite`, `--filter`, `--rerun-failed`) or a compiled plan (default: the empty plan).

use anyhow::Result;

use crate::cli::{BootArgs, KernelArgs};
use crate::run::boot;
use crate::run::pipeline::{self, Pipeline};
use crate::setup::provision::{clients_of_plan, Needs};

impl BootArgs {
    pub fn run(self) -> Result<u8> {
        let s = &self.select;
        if !s.suites.is_empty() || !s.filters.is_empty() || s.rerun_failed.is_some() {
            let chosen = pipeline::choose(s, &self.vm.results_root())?;
            let kernel = pipeline::rerun_arches(&chosen, self.kernel.clone());
            let needs = Needs::boot(&kernel, &self.vm, s.list, &chosen.clients());
            let p = Pipeline::prepare(chosen, &needs, &KernelArgs { config_only: s.list, ..kernel }, &self.vm)?;
            return if s.list { p.list() } else { p.run().map(|ran| ran.code) };
        }
        let plan = match &self.plan {
            Some(path) => pipeline::read_plan(path)?,
            None => protocol::Plan::empty("boot"),
        };
        let needs = Needs::boot(&self.kernel, &self.vm, false, &clients_of_plan(&plan));
        let p = pipeline::prepare(&needs, &self.kernel, &self.vm)?;
        let results = boot::run_plan_on(&p.built, &plan, &[], &p.opts)?;
        pipeline::publish(&results, &p.built)?;
        Ok(boot::exit_code(&results))
    }
}
