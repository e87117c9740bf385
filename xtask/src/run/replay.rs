//! `cargo xtask replay RUN`: boots exactly the kernel, initramfs and QEMU command line a run's
//! boot recorded (`verdict.json`'s `vm`), without the tool's planning, so a crash or hang can be
//! reproduced; the new run folder is judged against the recorded plan and marks.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};

use crate::arch::Arch;
use crate::judging::run_folder::{self, BootFolder, VmRecord};
use crate::run::boot::BootRun;
use crate::support::exit::{error, Kind};
use crate::support::progress::line;
use crate::vm::qemu::{self, VmSpec};
use crate::vm::virtiofsd::Share;

/// Boots each chosen boot of `run` again into a new run folder, judges and reports it; the exit
/// code is the new run's.
pub fn replay(run: &Path, arch: Option<&str>, boot: Option<&str>, results: &Path) -> Result<u8> {
    let mut chosen = run_folder::boot_folders(run)?;
    chosen.retain(|f| f.place().is_some_and(|(a, _)| arch.is_none_or(|x| x == a)) && boot.is_none_or(|b| b == f.name));
    if chosen.is_empty() {
        return Err(error(
            Kind::BadInput,
            format!(
                "{}: no boot folder with a verdict.json{}{}",
                run.display(),
                arch.map_or(String::new(), |a| format!(" for --arch {a}")),
                boot.map_or(String::new(), |b| format!(" named {b}"))
            ),
        ));
    }
    let run_dir = run_folder::new_run_dir(results)?;
    let virtiofsd = crate::vm::virtiofsd::binary();
    let mut judged = Vec::new();
    for recorded_in in chosen {
        judged.push(replay_boot(&recorded_in, &run_dir, virtiofsd.as_deref())?);
    }
    for j in &judged {
        crate::run::boot::print_boot(j);
    }
    line(format!("results: {}", run_dir.display()));
    let boots: Vec<&run_folder::JudgedBoot> = judged.iter().map(|j| &j.boot).collect();
    let model = crate::results::collect::assemble(&run_dir, &boots, vec![], jiff::Timestamp::now())?;
    let model = crate::results::publish(&run_dir, model, None)?;
    crate::history::record(&run_dir, &model, crate::history::rows::Origin::Run);
    Ok(model.verdict.exit_code().max(crate::run::boot::exit_code(&judged)))
}

/// One recorded boot booted again as it was recorded, into its folder of `run_dir`, and judged
/// against its recorded plan and marks; its kernel's metadata and QEMU version copied along.
fn replay_boot(recorded_in: &BootFolder, run_dir: &Path, virtiofsd: Option<&Path>) -> Result<BootRun> {
    let bad = |m: String| error(Kind::BadInput, m);
    let (name, file) = (recorded_in.name.clone(), recorded_in.file(run_folder::VERDICT));
    let (facts, scenarios) = run_folder::read_record(recorded_in)?;
    let vm = facts.vm.clone().ok_or_else(|| {
        bad(format!(
            "{}: no `vm` record (a run saved before replay existed): boot it with `cargo xtask boot`",
            file.display()
        ))
    })?;
    let arch = crate::arch::select(&vm.arch).map_err(|e| bad(format!("{}: arch: {e}", file.display())))?[0];
    for p in [&vm.kernel, &vm.initrd] {
        if !p.is_file() {
            return Err(bad(format!(
                "{}: {} is gone (the build cache was cleaned?): the boot cannot be replayed exactly",
                file.display(),
                p.display()
            )));
        }
    }
    let out_dir = run_dir.join(&name);
    let artifacts = out_dir.join(run_folder::ARTIFACTS);
    std::fs::create_dir_all(&artifacts)?;
    let scratch = tempfile::Builder::new().prefix(&format!("xtask-replay-{}-", arch.name)).tempdir()?;
    let spec = recorded_spec(&vm, arch, scratch.path(), &out_dir, &artifacts);
    line(format!("{name}: replaying {} with {}", vm.kernel.display(), vm.initrd.display()));
    let xfail = facts.xfail.keys().cloned().collect();
    let live = |l: &protocol::ResultLine| crate::run::boot::live_line(&name, l, &xfail);
    let ran =
        qemu::run_live(&spec, virtiofsd, &live).with_context(|| format!("replaying {}", recorded_in.path.display()))?;
    let mut plan = protocol::Plan::empty(&format!("replay of {name}"));
    plan.scenarios = scenarios
        .iter()
        .enumerate()
        .map(|(i, s)| protocol::Scenario {
            name: s.name.clone(),
            deadline_ms: vm.deadlines_ms.as_ref().and_then(|d| d.get(i).copied()).unwrap_or(0),
            steps: vec![],
        })
        .collect();
    let marks = crate::suites::Marks {
        xfail: facts.xfail,
        fixed_by: facts.fixed_by,
        intermittent: facts.intermittent,
        expect_report: facts.expect_report,
        about: facts.about,
    };
    let outcome = crate::run::boot::Outcome {
        arch,
        accel: vm.accel,
        vm: ran,
        out_dir,
        artifacts_shared: spec.shares.iter().any(|s| s.tag == protocol::ARTIFACTS_TAG),
        spec,
    };
    let judged = BootRun::judge(outcome, &plan, marks)?;
    for kept in [run_folder::KERNEL_METADATA, run_folder::QEMU_VERSION] {
        let _ = std::fs::copy(recorded_in.file(kept), run_dir.join(&name).join(kept));
    }
    Ok(judged)
}

/// The VM the record describes, its logs in `out_dir`, its scratch files in `workdir`. The
/// artifacts come back into the new run (`artifacts`); a `--share` folder is the one recorded.
fn recorded_spec(vm: &VmRecord, arch: &'static Arch, workdir: &Path, out_dir: &Path, artifacts: &Path) -> VmSpec {
    let shares = vm
        .shares
        .iter()
        .map(|(tag, host)| {
            let host_dir = if tag == protocol::ARTIFACTS_TAG { artifacts.to_path_buf() } else { host.clone() };
            Share { tag: tag.clone(), host_dir }
        })
        .collect();
    VmSpec {
        arch,
        kernel: vm.kernel.clone(),
        initrd: vm.initrd.clone(),
        workdir: workdir.to_path_buf(),
        logs: out_dir.to_path_buf(),
        accel: vm.accel,
        memory_mb: vm.memory_mb,
        cpus: vm.cpus,
        shares,
        sandbox: Default::default(),
        boot_timeout: Duration::from_millis(vm.boot_timeout_ms),
        watchdog: Duration::from_millis(vm.watchdog_ms),
        deadlines_ms: vm.deadlines_ms.clone(),
        // Only the stall rule: the crawl rule's medians are the history's at the run's time.
        expected: Vec::new(),
        extra_cmdline: vm.extra_cmdline.clone(),
        extra_qemu: vm.extra_qemu.clone(),
        stop_after_death: None,
    }
}
