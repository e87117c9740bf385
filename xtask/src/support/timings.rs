//! Per-phase wall times of one invocation: the kernels (and, per arch on a cache miss, source,
//! configure and build), then per boot initramfs, boot (QEMU start to /init), scenarios (/init
//! to QEMU's exit) and judge, then render. Phases record themselves as they run; at the end of
//! a run they are handed to the run's reports (`results::publish`): the table is printed, and
//! they are saved as `timings.json` in the run folder and kept in the run model (`run.json`).

use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The file in a run folder that holds the run's phases.
pub const TIMINGS: &str = "timings.json";

/// One phase of one invocation; `arch` is `None` for phases of the whole run, and the boot's
/// folder name (`x86_64`, `x86_64.isolated-1`) for phases of a boot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Phase {
    pub arch: Option<String>,
    pub phase: String,
    pub ms: u64,
}

static PHASES: Mutex<Vec<Phase>> = Mutex::new(Vec::new());

std::thread_local! {
    /// Phases this thread records for a later run while another run is under way (`hold`).
    static HELD: std::cell::RefCell<Option<Vec<Phase>>> = const { std::cell::RefCell::new(None) };
}

/// Records a phase (phases of boots running in parallel record from their threads).
pub fn record(arch: Option<&str>, phase: &str, took: Duration) {
    let p = Phase { arch: arch.map(String::from), phase: phase.to_string(), ms: took.as_millis() as u64 };
    let p = HELD.with(|h| match h.borrow_mut().as_mut() {
        Some(held) => {
            held.push(p);
            None
        }
        None => Some(p),
    });
    PHASES.lock().unwrap_or_else(|e| e.into_inner()).extend(p);
}

/// From now on, what this thread records belongs to the next run, not to the one that other
/// threads are running (`validate` builds the patched kernels while the baseline boots).
pub fn hold() {
    HELD.with(|h| *h.borrow_mut() = Some(Vec::new()));
}

/// Hands what this thread held to the next run, which began at `began`.
pub fn release(began: std::time::Instant) {
    let held = HELD.with(|h| h.borrow_mut().take()).unwrap_or_default();
    PHASES.lock().unwrap_or_else(|e| e.into_inner()).extend(held);
    *START.lock().unwrap_or_else(|e| e.into_inner()) = Some(began);
}

/// When the current run began: the invocation's start, then the end of the previous run (so
/// `validate`'s patched side does not count the baseline's phases and time as its own).
static START: Mutex<Option<std::time::Instant>> = Mutex::new(None);

/// Marks the start of the invocation (the `total` line).
pub fn start() {
    START.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert_with(std::time::Instant::now);
}

/// The end of a run: `render` and `total` recorded, the table printed and `timings.json` saved;
/// the phases are returned for the run model. What was recorded is handed to this run, and the
/// next run of the invocation starts counting afresh.
pub fn finish(run_dir: &Path, render: Duration) -> anyhow::Result<Vec<Phase>> {
    record(None, "render", render);
    let began = START.lock().unwrap_or_else(|e| e.into_inner()).replace(std::time::Instant::now());
    if let Some(t) = began {
        record(None, "total", t.elapsed());
    }
    let phases = std::mem::take(&mut *PHASES.lock().unwrap_or_else(|e| e.into_inner()));
    for line in table(&phases).lines() {
        crate::support::progress::line(format!("timings: {line}"));
    }
    save(run_dir, &phases)?;
    Ok(phases)
}

/// The table printed at the end of a run: a line per phase, a column per boot.
pub fn table(phases: &[Phase]) -> String {
    let mut columns: Vec<&str> = vec![];
    let mut rows: Vec<&str> = vec![];
    for p in phases {
        let c = p.arch.as_deref().unwrap_or("run");
        if !columns.contains(&c) {
            columns.push(c);
        }
        if !rows.contains(&p.phase.as_str()) {
            rows.push(&p.phase);
        }
    }
    let width = columns.iter().map(|c| c.len()).max().unwrap_or(0).max(8);
    let mut out = format!("{:<12}", "phase");
    for c in &columns {
        out.push_str(&format!(" {c:>width$}"));
    }
    for r in rows {
        out.push_str(&format!("\n{r:<12}"));
        for c in &columns {
            let ms: Option<u64> = phases
                .iter()
                .filter(|p| p.phase == r && p.arch.as_deref().unwrap_or("run") == *c)
                .map(|p| p.ms)
                .reduce(|a, b| a + b);
            let cell = ms.map_or("-".to_string(), |ms| format!("{:.1} s", ms as f64 / 1000.0));
            out.push_str(&format!(" {cell:>width$}"));
        }
    }
    out
}

pub fn save(run_dir: &Path, phases: &[Phase]) -> anyhow::Result<()> {
    crate::support::files::write_atomic(&run_dir.join(TIMINGS), &serde_json::to_vec_pretty(phases)?)
}

/// `timings.json` of a run folder; empty when the run did not record one.
pub fn load(run_dir: &Path) -> anyhow::Result<Vec<Phase>> {
    match std::fs::read(run_dir.join(TIMINGS)) {
        Ok(bytes) => Ok(serde_json::from_slice(&bytes)?),
        Err(_) => Ok(vec![]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(arch: Option<&str>, phase: &str, ms: u64) -> Phase {
        Phase { arch: arch.map(String::from), phase: phase.into(), ms }
    }

    #[test]
    fn held_phases_wait_for_the_next_run() {
        let has = |phase: &str| PHASES.lock().unwrap().iter().any(|p| p.phase == phase);
        hold();
        record(Some("x86_64"), "held-build-test", Duration::from_millis(5));
        assert!(!has("held-build-test"), "held while another run is under way");
        std::thread::spawn(|| record(None, "other-thread-test", Duration::ZERO)).join().unwrap();
        assert!(has("other-thread-test"), "other threads record for the current run");
        release(std::time::Instant::now());
        assert!(has("held-build-test"), "handed to the next run");
        PHASES.lock().unwrap().retain(|p| !p.phase.ends_with("-test"));
    }

    #[test]
    fn the_table_has_a_column_per_boot_and_sums_repeats() {
        let phases = [
            p(None, "kernels", 120),
            p(Some("x86_64"), "initramfs", 1500),
            p(Some("arm64"), "initramfs", 900),
            p(Some("x86_64"), "boot", 3000),
            p(Some("x86_64"), "boot", 500),
            p(None, "render", 40),
        ];
        let t = table(&phases);
        let lines: Vec<&str> = t.lines().map(str::trim_end).collect();
        assert_eq!(lines[0], "phase             run   x86_64    arm64");
        assert_eq!(lines[1], "kernels         0.1 s        -        -");
        assert_eq!(lines[2], "initramfs           -    1.5 s    0.9 s");
        assert_eq!(lines[3], "boot                -    3.5 s        -");
        assert_eq!(lines[4], "render          0.0 s        -        -");
    }

    #[test]
    fn saved_timings_read_back() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(load(dir.path()).unwrap(), []);
        let phases = vec![p(Some("arm64"), "scenarios", 31_000)];
        save(dir.path(), &phases).unwrap();
        assert_eq!(load(dir.path()).unwrap(), phases);
    }
}
