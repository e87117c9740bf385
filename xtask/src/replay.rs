//! `cargo xtask replay RUN`: boots exactly the kernel, initramfs and QEMU command line a run's
//! boot recorded (`verdict.json`'s `vm`), without the tool's planning, so a crash or hang can be
//! reproduced; the new run folder is judged against the recorded plan and marks.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::exit::{error, Kind};
use crate::progress::line;
use crate::qemu::{self, Accel, Share, VmSpec};

/// What a boot needs to be booted again, as `verdict.json` keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VmRecord {
    pub arch: String,
    pub kernel: PathBuf,
    pub initrd: PathBuf,
    pub accel: Accel,
    pub memory_mb: u32,
    pub cpus: u32,
    /// (virtio-fs tag, host folder).
    pub shares: Vec<(String, PathBuf)>,
    pub boot_timeout_ms: u64,
    pub watchdog_ms: u64,
    pub deadlines_ms: Option<Vec<u64>>,
    /// `--kernel-args` and `--qemu-args` of the run.
    #[serde(default)]
    pub extra_cmdline: Vec<String>,
    #[serde(default)]
    pub extra_qemu: Vec<String>,
}

impl VmRecord {
    pub fn of(spec: &VmSpec) -> VmRecord {
        let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        VmRecord {
            arch: spec.arch.name.to_string(),
            kernel: spec.kernel.clone(),
            initrd: spec.initrd.clone(),
            accel: spec.accel,
            memory_mb: spec.memory_mb,
            cpus: spec.cpus,
            shares: spec.shares.iter().map(|s| (s.tag.clone(), s.host_dir.clone())).collect(),
            boot_timeout_ms: ms(spec.boot_timeout),
            watchdog_ms: ms(spec.watchdog),
            deadlines_ms: spec.deadlines_ms.clone(),
            extra_cmdline: spec.extra_cmdline.clone(),
            extra_qemu: spec.extra_qemu.clone(),
        }
    }
}

/// The parts of a boot's `verdict.json` a replay reads.
#[derive(Debug, Deserialize)]
struct Recorded {
    vm: Option<VmRecord>,
    result: RecordedResult,
    #[serde(default)]
    xfail: BTreeMap<String, String>,
    #[serde(default)]
    expect_report: BTreeMap<String, String>,
    #[serde(default)]
    about: BTreeMap<String, crate::suites::About>,
}

#[derive(Debug, Deserialize)]
struct RecordedResult {
    scenarios: Vec<RecordedScenario>,
}

#[derive(Debug, Deserialize)]
struct RecordedScenario {
    name: String,
}

/// Boots each chosen boot of `run` again into a new run folder, judges and reports it; the exit
/// code is the new run's.
pub fn replay(run: &Path, arch: Option<&str>, boot: Option<&str>, results: &Path) -> Result<u8> {
    let bad = |m: String| error(Kind::BadInput, m);
    let entries = std::fs::read_dir(run).map_err(|e| bad(format!("{}: {e}", run.display())))?;
    let mut chosen: Vec<(String, PathBuf)> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let (a, _) = crate::boot::BootDir::parse(&name)?;
            let wanted = arch.is_none_or(|x| x == a) && boot.is_none_or(|b| b == name);
            (wanted && e.path().join("verdict.json").is_file()).then(|| (name.clone(), e.path()))
        })
        .collect();
    chosen.sort();
    if chosen.is_empty() {
        return Err(bad(format!(
            "{}: no boot folder with a verdict.json{}{}",
            run.display(),
            arch.map_or(String::new(), |a| format!(" for --arch {a}")),
            boot.map_or(String::new(), |b| format!(" named {b}"))
        )));
    }
    let run_dir = crate::boot::new_run_dir(results)?;
    let virtiofsd = crate::setup::virtiofsd();
    let mut judged = Vec::new();
    for (name, dir) in chosen {
        let file = dir.join("verdict.json");
        let recorded: Recorded = serde_json::from_slice(&std::fs::read(&file)?)
            .map_err(|e| bad(format!("{}:{}:{}: {e}", file.display(), e.line(), e.column())))?;
        let vm = recorded.vm.ok_or_else(|| {
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
        let artifacts = out_dir.join("artifacts");
        std::fs::create_dir_all(&artifacts)?;
        let scratch = tempfile::Builder::new().prefix(&format!("xtask-replay-{}-", arch.name)).tempdir()?;
        // The artifacts come back into the new run; a `--share` folder is the one recorded.
        let shares = vm
            .shares
            .iter()
            .map(|(tag, host)| {
                let host_dir = if tag == protocol::ARTIFACTS_TAG { artifacts.clone() } else { host.clone() };
                Share { tag: tag.clone(), host_dir }
            })
            .collect();
        let spec = VmSpec {
            arch,
            kernel: vm.kernel.clone(),
            initrd: vm.initrd.clone(),
            workdir: scratch.path().to_path_buf(),
            logs: out_dir.clone(),
            accel: vm.accel,
            memory_mb: vm.memory_mb,
            cpus: vm.cpus,
            shares,
            boot_timeout: Duration::from_millis(vm.boot_timeout_ms),
            watchdog: Duration::from_millis(vm.watchdog_ms),
            deadlines_ms: vm.deadlines_ms.clone(),
            extra_cmdline: vm.extra_cmdline.clone(),
            extra_qemu: vm.extra_qemu.clone(),
        };
        line(format!("{name}: replaying {} with {}", vm.kernel.display(), vm.initrd.display()));
        let xfail = recorded.xfail.keys().cloned().collect();
        let live = |l: &protocol::ResultLine| crate::boot::live_line(&name, l, &xfail);
        let ran = qemu::run_live(&spec, virtiofsd.as_deref(), &live)
            .with_context(|| format!("replaying {}", dir.display()))?;
        let mut plan = crate::empty_plan(&format!("replay of {name}"));
        plan.scenarios = recorded
            .result
            .scenarios
            .iter()
            .enumerate()
            .map(|(i, s)| protocol::Scenario {
                name: s.name.clone(),
                deadline_ms: vm.deadlines_ms.as_ref().and_then(|d| d.get(i).copied()).unwrap_or(0),
                steps: vec![],
            })
            .collect();
        let marks = crate::suites::Marks {
            xfail: recorded.xfail,
            expect_report: recorded.expect_report,
            about: recorded.about,
        };
        let outcome = crate::boot::Outcome {
            arch,
            accel: vm.accel,
            vm: ran,
            out_dir,
            artifacts_shared: spec.shares.iter().any(|s| s.tag == protocol::ARTIFACTS_TAG),
            spec,
        };
        judged.push(crate::boot::judge(outcome, &plan, marks)?);
        for kept in ["kernel-metadata.json", "qemu-version.txt"] {
            let _ = std::fs::copy(dir.join(kept), run_dir.join(&name).join(kept));
        }
    }
    for j in &judged {
        crate::boot::print_boot(j);
    }
    line(format!("results: {}", run_dir.display()));
    let model = crate::results::publish(&run_dir)?;
    Ok(model.verdict.exit_code().max(crate::boot::exit_code(&judged)))
}
