//! The run folder, `results/<run-id>/`: its layout, file by file, and the boot record
//! (`verdict.json`) the live run writes and `report --from`, `replay`, `merge` and `coverage`
//! read back. Every file name of the folder is a constant here.
//!
//! ```text
//! results/latest -> <run-id>         the newest run (new_run_dir)
//! results/<run-id>/
//!   host.json timings.json           the machine that ran it, the invocation's phases
//!   run.json junit.xml <arch>.ktap kcidb.json summary.md report.html   (results::publish)
//!   <arch>/ <arch>.vm-2/ <arch>.isolated-1/ <arch>.resume-1/           one boot each (BootDir)
//!     console.log results.ktap qemu-command.txt qemu-stderr.log verdict.json
//!     kernel-metadata.json qemu-version.txt artifacts/
//!   <arch>/skipped.json              what the arch's plan left out (requires not met)
//!   <arch>/upstream/<binary>/        a boot per upstream selftest (not in the run model)
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::judging::verdict::{BootResult, BootVerdict, Expected, Judgement, XfailMarks};
use crate::support::exit::{error, Kind};
use crate::vm::channel::Event;
use crate::vm::qemu::{Accel, Ended, VmSpec};

/// The link in the results folder to the newest run.
pub const LATEST: &str = "latest";
/// The machine that ran the boots (`results::model::Host`).
pub const HOST: &str = "host.json";
/// The invocation's phases (`timings::Phase`).
pub use crate::support::timings::TIMINGS;
/// The run model (`results::model::Run`), the first of the reports `results::publish` writes.
pub const RUN_JSON: &str = "run.json";
/// A boot's record: [`BootFacts`] and the judgement.
pub const VERDICT: &str = "verdict.json";
/// A boot's logs, as the VM wrote them (`qemu.rs` writes them, so it names them): the serial
/// console, the result channel (KTAP with `ue-` frames) and QEMU's command line.
pub use crate::vm::qemu::{COMMAND_FILE as QEMU_COMMAND, CONSOLE_LOG, RESULTS_LOG};
/// The first line of `qemu-system-* --version`.
pub const QEMU_VERSION: &str = "qemu-version.txt";
/// The kernel's build provenance (`kernel::Metadata`).
pub const KERNEL_METADATA: &str = "kernel-metadata.json";
/// What the guest left in `/artifacts` (over virtio-fs).
pub const ARTIFACTS: &str = "artifacts";
/// The scenarios an arch's plan left out (in the arch's first boot folder).
pub const SKIPPED: &str = "skipped.json";
/// The boot's findings' frames resolved to source lines (`results::symbols`), when its kernel
/// had debug info.
pub const SYMBOLS: &str = "symbols.json";

/// A new `results/<run-id>/` folder, with `results/latest` pointing at it.
pub fn new_run_dir(results: &Path) -> Result<PathBuf> {
    let stamp = jiff::Zoned::now().strftime("%Y%m%d-%H%M%S").to_string();
    let id = format!("{stamp}-{:05}", std::process::id() % 100_000);
    let dir = results.join(&id);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let latest = results.join(LATEST);
    let _ = std::fs::remove_file(&latest);
    let _ = std::os::unix::fs::symlink(&id, &latest);
    Ok(dir)
}

/// A boot's place among its arch's boots, as its folder names it; the order is the run's:
/// the shared boot's parts, then the isolated scenarios' boots, then the resume boots.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum BootDir {
    /// Part `k` (from 1) of the arch's shared plan: `x86_64`, `x86_64.vm-2` (`--vms`).
    Shared(u32),
    /// A scenario marked `isolated`, in a boot of its own: `x86_64.isolated-1`.
    Isolated(u32),
    /// The scenarios a crash or hang left unrun, in a fresh boot: `x86_64.resume-1`.
    Resume(u32),
}

impl BootDir {
    /// The arch and place of a boot folder's name; `None` for a name that is no boot folder's.
    pub fn parse(name: &str) -> Option<(&str, BootDir)> {
        let Some((arch, rest)) = name.split_once('.') else { return Some((name, BootDir::Shared(1))) };
        let (kind, n) = rest.split_once('-')?;
        let n = n.parse().ok()?;
        let place = match kind {
            "vm" => BootDir::Shared(n),
            "isolated" => BootDir::Isolated(n),
            "resume" => BootDir::Resume(n),
            _ => return None,
        };
        Some((arch, place))
    }

    pub fn name(self, arch: &str) -> String {
        match self {
            BootDir::Shared(1) => arch.to_string(),
            BootDir::Shared(k) => format!("{arch}.vm-{k}"),
            BootDir::Isolated(n) => format!("{arch}.isolated-{n}"),
            BootDir::Resume(n) => format!("{arch}.resume-{n}"),
        }
    }
}

/// One boot's folder: its logs, artifacts and record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BootFolder {
    pub path: PathBuf,
    /// The folder's name, which names the boot in reports and phases (`x86_64.isolated-1`).
    pub name: String,
}

impl BootFolder {
    pub fn at(path: PathBuf) -> BootFolder {
        let name = path.file_name().map_or(String::new(), |n| n.to_string_lossy().into_owned());
        BootFolder { path, name }
    }

    /// The arch and place its name gives; `None` for a folder outside a run's layout (an
    /// upstream selftest's boot).
    pub fn place(&self) -> Option<(&str, BootDir)> {
        BootDir::parse(&self.name)
    }

    pub fn file(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }
}

/// The boot folders of a run that hold a record, in the run's order: arches in the tool's
/// order (unknown arches after, by name), then each arch's boots by place.
pub fn boot_folders(run_dir: &Path) -> Result<Vec<BootFolder>> {
    let entries =
        std::fs::read_dir(run_dir).map_err(|e| error(Kind::BadInput, format!("{}: {e}", run_dir.display())))?;
    let mut found: Vec<BootFolder> = entries
        .flatten()
        .map(|e| BootFolder::at(e.path()))
        .filter(|f| f.place().is_some() && f.path.is_dir() && f.file(VERDICT).is_file())
        .collect();
    let arch_rank = |a: &str| crate::arch::ARCHES.iter().position(|x| x.name == a).unwrap_or(usize::MAX);
    let key = |f: &BootFolder| {
        let (arch, place) = BootDir::parse(&f.name).expect("kept only boot folders");
        (arch_rank(arch), arch.to_string(), place)
    };
    found.sort_by_key(key);
    Ok(found)
}

/// What a boot needs to be booted again (`replay`), as its record keeps it.
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

/// What a boot was and how it ended: everything a judge needs besides the plan's names and
/// the logs. The part of `verdict.json` read back as written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BootFacts {
    pub arch: String,
    /// `kvm` or `tcg`.
    pub accel: String,
    pub qemu_command: String,
    pub ended: Ended,
    pub wall_ms: u64,
    /// When `/init` started; `None` when it never did.
    pub boot_ms: Option<u64>,
    /// When QEMU started (RFC 3339, UTC); `None` in records saved before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    /// Whether the artifacts folder came back from the guest over virtio-fs.
    #[serde(default)]
    pub artifacts_shared: bool,
    /// The sandbox virtiofsd ran in (`namespace`, `chroot`, `none`); `None` when the boot shared
    /// no folder, or was recorded before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub virtiofsd_sandbox: Option<crate::vm::virtiofsd::Sandbox>,
    /// `None` in records saved before `replay` existed.
    #[serde(default)]
    pub vm: Option<VmRecord>,
    /// The suites' expected failures: scenario -> reason.
    #[serde(default)]
    pub xfail: BTreeMap<String, String>,
    /// Of the xfail scenarios, those whose known kernel bug has a fix: scenario -> the patch.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub fixed_by: BTreeMap<String, String>,
    /// Of the xfail scenarios, those whose bug shows only when a race goes its way.
    #[serde(default, skip_serializing_if = "std::collections::BTreeSet::is_empty")]
    pub intermittent: std::collections::BTreeSet<String>,
    /// Scenarios that must provoke a kernel report including the text.
    #[serde(default)]
    pub expect_report: BTreeMap<String, String>,
    /// Each scenario's catalogue items and note, for the reports.
    #[serde(default)]
    pub about: BTreeMap<String, crate::suites::About>,
    /// Set when the run stopped spending boots on this kernel after this boot: its unrun
    /// scenarios are collateral of the scenario that broke the kernel.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collateral: Option<Collateral>,
}

/// Why a boot's unrun scenarios were never run: which scenario broke the kernel first, and
/// why no further boot was spent on them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Collateral {
    /// The scenario whose run broke (or dirtied) the kernel first, `suite/name`.
    pub culprit: String,
    /// How it broke it (the boot's verdict and evidence), and why the run stopped there.
    pub why: String,
}

impl BootFacts {
    /// The suites' marks this boot is judged with.
    pub fn marks(&self) -> XfailMarks<'_> {
        XfailMarks {
            xfail: &self.xfail,
            fixed_by: &self.fixed_by,
            intermittent: &self.intermittent,
            expect_report: &self.expect_report,
        }
    }
}

/// A boot with its judgement: what the live run hands to the reports, and what reading a boot
/// folder back gives.
#[derive(Debug, Clone)]
pub struct JudgedBoot {
    pub folder: BootFolder,
    pub facts: BootFacts,
    pub judgement: Judgement,
}

/// `verdict.json` as written: the facts, then the judgement (whole, for people and tools).
#[derive(Serialize)]
struct Written<'a> {
    #[serde(flatten)]
    facts: &'a BootFacts,
    result: &'a BootResult,
    /// Each scenario's xfail mark, by name.
    xfail_marks: BTreeMap<&'a str, Expected>,
    /// The verdict with expected failures counted: the one that sets the exit code.
    verdict_with_xfail: &'a BootVerdict,
}

/// `verdict.json` as read: the facts and, from the recorded judgement, the plan's scenario
/// names and their recorded statuses. A reader judges the logs again.
#[derive(Deserialize)]
struct Read {
    #[serde(flatten)]
    facts: BootFacts,
    result: RecordedResult,
}

#[derive(Deserialize)]
struct RecordedResult {
    scenarios: Vec<RecordedScenario>,
}

/// A scenario as a record names it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct RecordedScenario {
    pub name: String,
    /// Its status when the boot was judged (`pass`, `fail`, ...); `None` in hand-made records.
    #[serde(default)]
    pub status: Option<String>,
}

/// Reads a boot's record: its facts and the plan's scenarios as recorded.
pub fn read_record(folder: &BootFolder) -> Result<(BootFacts, Vec<RecordedScenario>)> {
    let file = folder.file(VERDICT);
    let bytes = std::fs::read(&file).map_err(|e| error(Kind::BadInput, format!("{}: {e}", file.display())))?;
    let read: Read = serde_json::from_slice(&bytes)
        .map_err(|e| error(Kind::BadInput, format!("{}:{}:{}: {e}", file.display(), e.line(), e.column())))?;
    Ok((read.facts, read.result.scenarios))
}

/// A recorded boot read back and judged again from its logs (`report --from`).
pub fn read_boot(folder: BootFolder) -> Result<JudgedBoot> {
    let (facts, scenarios) = read_record(&folder)?;
    let planned: Vec<String> = scenarios.into_iter().map(|s| s.name).collect();
    JudgedBoot::judge(folder, facts, &planned)
}

impl JudgedBoot {
    /// Judges a recorded boot from its folder's logs, `planned` being the plan's scenario names
    /// in order: its `results.ktap` read back through the channel's one parser.
    pub fn judge(folder: BootFolder, facts: BootFacts, planned: &[String]) -> Result<JudgedBoot> {
        let (console, results) = (read_log(&folder, CONSOLE_LOG)?, read_log(&folder, RESULTS_LOG)?);
        let channel = crate::vm::channel::parse_all(&results);
        Ok(JudgedBoot::judged(folder, facts, planned, &console, channel))
    }

    /// Judges a boot whose result channel its VM's run read (each line parsed once, as it came);
    /// with [`JudgedBoot::judge`], the one place a boot's console log is read for a verdict.
    pub fn judge_read(
        folder: BootFolder,
        facts: BootFacts,
        planned: &[String],
        channel: Vec<Event>,
    ) -> Result<JudgedBoot> {
        let console = read_log(&folder, CONSOLE_LOG)?;
        Ok(JudgedBoot::judged(folder, facts, planned, &console, channel))
    }

    fn judged(
        folder: BootFolder,
        facts: BootFacts,
        planned: &[String],
        console: &str,
        channel: Vec<Event>,
    ) -> JudgedBoot {
        let stream = crate::judging::channel::fold(channel);
        let judgement = Judgement::of(planned, &facts.marks(), console, stream, &facts.ended);
        JudgedBoot { folder, facts, judgement }
    }

    /// Writes `verdict.json` into the boot's folder.
    pub fn write_record(&self) -> Result<()> {
        let (result, counted) = (&self.judgement.result, &self.judgement.counted);
        let xfail_marks =
            result.scenarios.iter().zip(&counted.marks).filter_map(|(s, m)| Some((s.name.as_str(), (*m)?)));
        let written = Written {
            facts: &self.facts,
            result,
            xfail_marks: xfail_marks.collect(),
            verdict_with_xfail: &counted.verdict,
        };
        crate::support::files::write_atomic(&self.folder.file(VERDICT), &serde_json::to_vec_pretty(&written)?)
    }
}

/// A log of a boot's folder, as text.
fn read_log(folder: &BootFolder, name: &str) -> Result<String> {
    let p = folder.file(name);
    let bytes = std::fs::read(&p).map_err(|e| error(Kind::BadInput, format!("{}: {e}", p.display())))?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// A scenario left out of an arch's plan (`requires` not met), as `skipped.json` lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Skipped {
    pub name: String,
    pub reason: String,
}

/// Writes `<run>/<arch>/skipped.json`: the scenarios the arch's plan left out.
pub fn save_skipped(arch_dir: &Path, skipped: &[Skipped]) -> Result<()> {
    std::fs::create_dir_all(arch_dir)?;
    let path = arch_dir.join(SKIPPED);
    std::fs::write(&path, serde_json::to_vec_pretty(skipped)?).with_context(|| format!("writing {}", path.display()))
}

/// `<run>/<arch>/skipped.json`; empty when the arch skipped nothing.
pub fn read_skipped(arch_dir: &Path) -> Result<Vec<Skipped>> {
    let file = arch_dir.join(SKIPPED);
    match std::fs::read(&file) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map_err(|e| error(Kind::BadInput, format!("{}:{}:{}: {e}", file.display(), e.line(), e.column()))),
        Err(_) => Ok(vec![]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boot_folders_name_their_place() {
        assert_eq!(BootDir::parse("x86_64"), Some(("x86_64", BootDir::Shared(1))));
        assert_eq!(BootDir::parse("x86_64.vm-3"), Some(("x86_64", BootDir::Shared(3))));
        assert_eq!(BootDir::parse("arm64.isolated-2"), Some(("arm64", BootDir::Isolated(2))));
        assert_eq!(BootDir::parse("arm64.resume-1"), Some(("arm64", BootDir::Resume(1))));
        assert_eq!(BootDir::parse("arm64.other"), None);
        assert_eq!(BootDir::parse("arm64.vm-x"), None);
        for name in ["x86_64", "x86_64.vm-3", "arm64.isolated-2", "arm64.resume-1"] {
            let (arch, place) = BootDir::parse(name).unwrap();
            assert_eq!(place.name(arch), name);
        }
        assert!(BootDir::Shared(2) < BootDir::Isolated(1) && BootDir::Isolated(9) < BootDir::Resume(1));
    }

    /// The fixture's boots come back in the run's order; a record reads back as written, and a
    /// hand-made one (names only) reads too.
    #[test]
    fn records_read_back_as_written() {
        let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("test_data/results/run-fixture");
        let names: Vec<String> = boot_folders(&fixture).unwrap().into_iter().map(|f| f.name).collect();
        assert_eq!(names, ["x86_64", "x86_64.isolated-1", "x86_64.isolated-2", "arm64"]);

        let tmp = tempfile::tempdir().unwrap();
        let folder = BootFolder::at(tmp.path().join("arm64.resume-2"));
        crate::results::tests::copy_dir(&fixture.join("x86_64"), &folder.path);
        let (facts, scenarios) = read_record(&folder).unwrap();
        assert_eq!(scenarios[1], RecordedScenario { name: "abi/write".into(), status: None });
        let planned: Vec<String> = scenarios.iter().map(|s| s.name.clone()).collect();
        let boot = JudgedBoot::judge(folder.clone(), facts.clone(), &planned).unwrap();
        boot.write_record().unwrap();
        let again = read_boot(folder.clone()).unwrap();
        assert_eq!(again.facts, facts);
        assert_eq!(again.judgement.result, boot.judgement.result);
        let (_, recorded) = read_record(&folder).unwrap();
        assert_eq!(recorded[1].status.as_deref(), Some(boot.judgement.result.scenarios[1].status.as_str()));
        assert_eq!(folder.place(), Some(("arm64", BootDir::Resume(2))));
    }

    #[test]
    fn a_bad_record_names_the_file_and_the_field() {
        let tmp = tempfile::tempdir().unwrap();
        let folder = BootFolder::at(tmp.path().join("x86_64"));
        std::fs::create_dir_all(&folder.path).unwrap();
        std::fs::write(folder.file(VERDICT), r#"{"arch": "x86_64", "result": {"scenarios": []}}"#).unwrap();
        let err = read_record(&folder).unwrap_err();
        assert_eq!(crate::support::exit::code_for(&err), 128);
        let msg = err.to_string();
        assert!(
            msg.starts_with(&folder.file(VERDICT).display().to_string()) && msg.contains("missing field `accel`"),
            "{msg}"
        );
    }
}
