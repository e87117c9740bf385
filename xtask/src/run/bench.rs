//! Benchmarks (`cargo xtask bench`): `suites`, the measuring suites run and their figures
//! printed as a table; `boot`, the agent's boot-to-sentinel time against the floor, a bare
//! static C /init that reboots at once, booted side by side on the same kernels.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Result;

use protocol::median;

use crate::arch::Arch;
use crate::cli::{BenchArgs, SelectArgs};
use crate::kernel::build::Built;
use crate::results::text::number;
use crate::run::pipeline::{self, Pipeline};
use crate::setup::provision::{ensure, Needs};
use crate::support::exit::{error, Kind};
use crate::support::progress::line;
use crate::vm::initramfs::{Archive, Node};
use crate::vm::qemu::AccelChoice;
use crate::vm::qemu::{self, Accel, VmSpec};

/// `bench suites`: the measuring suites (those `--filter` keeps) run, their figures printed.
pub fn suites(args: &BenchArgs) -> Result<u8> {
    let files: Vec<_> = pipeline::suite_files()?
        .into_iter()
        .filter(|f| f.file_stem().is_some_and(|s| pipeline::MEASURING_SUITES.iter().any(|m| s == *m)))
        .collect();
    let select = SelectArgs { suites: files, filters: args.filters.clone(), ..Default::default() };
    let chosen = pipeline::choose(&select, &args.vm.results_root())?;
    let needs = Needs::boot(&args.kernel, &args.vm, false, &chosen.clients());
    let ran = Pipeline::prepare(chosen, &needs, &args.kernel, &args.vm)?.run()?;
    if let Some(run) = &ran.model {
        print_figures(run);
    }
    Ok(ran.code)
}

/// `bench boot`: the kernels built, then the floor and the agent booted `--runs` times each.
pub fn boots(args: &BenchArgs) -> Result<u8> {
    ensure(&Needs::bench(args))?;
    let built = crate::kernel::build_all(&args.kernel.request()?)?;
    boot(&built, args.runs.max(1), args.vm.accel)?;
    Ok(0)
}

/// Compiles `initramfs/floor/init.c` statically for an arch.
pub fn build_floor(arch: &Arch, out: &Path) -> Result<PathBuf> {
    let src = crate::support::checkout::project_root().join("initramfs/floor/init.c");
    let bin = out.join(format!("floor-{}", arch.name));
    let cc = arch.compiler();
    let sh = crate::support::cmd::sh()?;
    if let Err(e) = crate::support::cmd::stdout(crate::support::cmd::cmd!(sh, "{cc} -static -Os -o {bin} {src}")) {
        return Err(error(
            Kind::Infra,
            format!(
                "{cc} -static failed for {}: the static C library comes from libc6-dev / libc6-dev-arm64-cross ({e:#})",
                src.display()
            ),
        ));
    }
    Ok(bin)
}

/// One arch's figures, in seconds.
#[derive(Debug)]
pub struct BootBench {
    pub arch: &'static str,
    pub floor: Vec<f64>,
    pub agent: Vec<f64>,
}

impl BootBench {
    pub fn overhead_pct(&self) -> f64 {
        (median(&self.agent) / median(&self.floor) - 1.0) * 100.0
    }
}

/// Boots the floor and the agent's empty plan `runs` times each, alternating, per arch.
pub fn boot(built: &[Built], runs: usize, accel: AccelChoice) -> Result<Vec<BootBench>> {
    let scratch = tempfile::Builder::new().prefix("xtask-bench-").tempdir()?;
    let mut out = Vec::new();
    for b in built {
        let accel = match accel {
            AccelChoice::Kvm => Accel::Kvm,
            _ => Accel::Tcg,
        };
        let floor_bin = build_floor(b.arch, scratch.path())?;
        let mut floor = Archive::base();
        floor.add("init", Node::File { data: std::fs::read(&floor_bin)?, executable: true });
        let floor_cpio = scratch.path().join(format!("floor-{}.cpio", b.arch.name));
        std::fs::write(&floor_cpio, floor.to_newc())?;
        let agent = crate::vm::initramfs::build_agent(b.arch)?;
        let agent_cpio = scratch.path().join(format!("agent-{}.cpio", b.arch.name));
        crate::vm::initramfs::write(&agent_cpio, &agent, &protocol::Plan::empty("bench"), &[])?;

        let mut result = BootBench { arch: b.arch.name, floor: vec![], agent: vec![] };
        for i in 0..runs {
            for (which, cpio) in [("floor", &floor_cpio), ("agent", &agent_cpio)] {
                let spec = VmSpec {
                    arch: b.arch,
                    kernel: b.image.clone(),
                    initrd: cpio.clone(),
                    workdir: scratch.path().join(format!("{}-{which}-{i}", b.arch.name)),
                    logs: scratch.path().join(format!("{}-{which}-{i}", b.arch.name)),
                    accel,
                    memory_mb: 512,
                    cpus: 1,
                    shares: vec![],
                    sandbox: Default::default(),
                    boot_timeout: Duration::from_secs(60),
                    watchdog: Duration::from_secs(90),
                    deadlines_ms: None,
                    expected: Vec::new(),
                    extra_cmdline: vec![],
                    extra_qemu: vec![],
                    stop_after_death: None,
                };
                let vm = qemu::run(&spec, None)?;
                if !matches!(vm.ended, qemu::Ended::Exited { .. }) || vm.boot.is_none() {
                    return Err(error(
                        Kind::Infra,
                        format!("{} {which} boot did not end cleanly: QEMU {}", b.arch.name, vm.ended),
                    ));
                }
                if which == "agent" {
                    if crate::judging::channel::fold(vm.channel).sentinel.is_none() {
                        return Err(error(
                            Kind::Infra,
                            format!("{} agent boot ended without its sentinel", b.arch.name),
                        ));
                    }
                    result.agent.push(vm.wall.as_secs_f64());
                } else {
                    result.floor.push(vm.wall.as_secs_f64());
                }
            }
        }
        line(format!(
            "{}: floor median {:.3} s, agent median {:.3} s, overhead {:+.1}% over {runs} runs each ({})",
            result.arch,
            median(&result.floor),
            median(&result.agent),
            result.overhead_pct(),
            accel.name()
        ));
        out.push(result);
    }
    Ok(out)
}

/// `bench suites`: every figure of a run, per arch and scenario, as a table on stdout
/// (median of the samples, their range, the unit). `compare` judges them against another run.
pub fn print_figures(run: &crate::results::model::Run) {
    let mut rows = vec![["arch".to_string(), "scenario".into(), "figure".into(), "median".into(), "range".into()]];
    for arch in &run.arches {
        for s in &arch.scenarios {
            for (name, m) in &s.metrics {
                let (lo, hi) = m.samples.iter().fold((f64::MAX, f64::MIN), |(lo, hi), v| (lo.min(*v), hi.max(*v)));
                let range = if m.samples.is_empty() { String::new() } else { format!("{}-{}", number(lo), number(hi)) };
                rows.push([
                    arch.arch.clone(),
                    s.name.clone(),
                    name.clone(),
                    format!("{} {}", number(m.value), m.unit),
                    range,
                ]);
            }
        }
    }
    if rows.len() == 1 {
        println!("no figures: no measuring scenario ran");
        return;
    }
    let widths: Vec<usize> = (0..5).map(|c| rows.iter().map(|r| r[c].len()).max().unwrap_or(0)).collect();
    for r in rows {
        let cells: Vec<String> = r.iter().zip(&widths).map(|(c, w)| format!("{c:<w$}")).collect();
        println!("{}", cells.join("  ").trim_end());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_and_overheads() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        let b = BootBench { arch: "x", floor: vec![1.0, 1.0, 9.0], agent: vec![1.05, 1.05, 0.5] };
        assert!((b.overhead_pct() - 5.0).abs() < 1e-9);
    }
}
