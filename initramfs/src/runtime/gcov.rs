//! GCOV counters around each scenario on a coverage kernel (`plan.gcov`): zeroed before it
//! starts, read once the work it left to the kernel has finished, and sent on the result
//! channel as `# ue-gcov` frames (`protocol::gcov`).
//!
//! When is the scenario's work finished? Its processes have exited, but the kernel still runs
//! what they started on workqueues and after RCU grace periods: the enable-bit fault-in worker,
//! the mm put after exit, the deferred delete of an event whose last reference went. Nothing in
//! user space can flush those, but their effect is observable in the counters themselves: the
//! snapshot is read until [`QUIET_READS`] reads in a row, [`QUIET_GAP`] apart, are identical
//! (a grace period under TCG with HZ=1000 is about 20 ms, shorter than the quiet window), or
//! [`SETTLE_MAX`] has passed (then the frames say so in a `# gcov:` line).

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::thread;
use std::time::{Duration, Instant};

use protocol::gcov::{gcda_suffix, GcovFrame, GcovPlan, GCOV_ROOT};
use protocol::ResultLine;

/// The time between two reads of the counters while waiting for them to settle.
pub const QUIET_GAP: Duration = Duration::from_millis(15);
/// How many reads after the first must equal it: the counters were still for
/// `QUIET_READS * QUIET_GAP`.
pub const QUIET_READS: u32 = 2;
/// The longest wait for the counters to settle.
pub const SETTLE_MAX: Duration = Duration::from_secs(2);

/// The `.gcda` files of the plan's sources under debugfs, found once at the start.
pub struct Collector {
    root: PathBuf,
    files: Vec<(String, Result<PathBuf, String>)>,
    /// Time spent reading the counters and writing the frames, over every collect.
    pub spent: std::cell::Cell<(Duration, Duration)>,
}

impl Collector {
    pub fn new(plan: &GcovPlan) -> Collector {
        Collector::at(Path::new(GCOV_ROOT), plan)
    }

    pub fn at(root: &Path, plan: &GcovPlan) -> Collector {
        let mut all = Vec::new();
        walk(root, &mut all);
        let files = plan
            .files
            .iter()
            .map(|f| {
                let suffix = gcda_suffix(f);
                let found: Vec<&PathBuf> = all.iter().filter(|p| p.to_string_lossy().ends_with(&suffix)).collect();
                let path = match found[..] {
                    [one] => Ok(one.clone()),
                    [] => Err(format!("no *{suffix} under {} (was it built with GCOV?)", root.display())),
                    _ => Err(format!("{} files end in {suffix} under {}", found.len(), root.display())),
                };
                (f.clone(), path)
            })
            .collect();
        Collector { root: root.to_path_buf(), files, spent: Default::default() }
    }

    /// Zeroes every counter (`reset` takes any write).
    pub fn reset(&self) -> Result<(), String> {
        let reset = self.root.join("reset");
        fs::write(&reset, b"1")
            .map_err(|e| format!("writing {}: {}", reset.display(), crate::runtime::sys::error_name(&e)))
    }

    fn snapshot(&self) -> Vec<Result<Vec<u8>, String>> {
        let t = Instant::now();
        let snap = self.read_all();
        let (r, w) = self.spent.get();
        self.spent.set((r + t.elapsed(), w));
        snap
    }

    fn read_all(&self) -> Vec<Result<Vec<u8>, String>> {
        self.files
            .iter()
            .map(|(_, p)| match p {
                Ok(p) => {
                    fs::read(p).map_err(|e| format!("reading {}: {}", p.display(), crate::runtime::sys::error_name(&e)))
                }
                Err(e) => Err(e.clone()),
            })
            .collect()
    }

    /// Waits for the counters to settle, then writes scenario `index`'s frames. Returns how
    /// long the wait took and whether they settled.
    pub fn collect(
        &self,
        index: usize,
        out: &mut dyn Write,
        emit: fn(&mut dyn Write, &ResultLine),
    ) -> (Duration, bool) {
        let started = Instant::now();
        let mut last = self.snapshot();
        let mut same = 0;
        // Reads start QUIET_GAP apart (the time a read takes is part of the gap, not added to it).
        let mut read_at = started;
        let settled = loop {
            if same >= QUIET_READS {
                break true;
            }
            if started.elapsed() >= SETTLE_MAX {
                break false;
            }
            read_at += QUIET_GAP;
            thread::sleep(read_at.saturating_duration_since(Instant::now()));
            let now = self.snapshot();
            if now == last {
                same += 1;
            } else {
                same = 0;
                last = now;
            }
        };
        let sending = Instant::now();
        // Every frame in one write: under emulation each write to the result port costs a
        // notification of the device, about a millisecond.
        let mut frames: Vec<u8> = Vec::new();
        for ((file, _), data) in self.files.iter().zip(last) {
            match data {
                Ok(bytes) => {
                    for frame in GcovFrame::split(index, file, &bytes) {
                        emit(&mut frames, &ResultLine::Gcov(frame));
                    }
                }
                Err(why) => emit(&mut frames, &ResultLine::Gcov(GcovFrame::missing(index, file, &why))),
            }
        }
        // A failed write is said by the next `emit` to the same channel, which fails the same way.
        let _ = out.write_all(&frames).and_then(|()| out.flush());
        let (r, w) = self.spent.get();
        self.spent.set((r, w + sending.elapsed()));
        (started.elapsed(), settled)
    }
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let p = e.path();
        // Symbolic links point at the `.gcno` files of the build tree; not followed.
        match e.file_type() {
            Ok(t) if t.is_dir() => walk(&p, out),
            Ok(t) if t.is_file() && p.extension().is_some_and(|x| x == "gcda") => out.push(p),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_resets_and_sends_the_snapshot() {
        let root = std::env::temp_dir().join(format!("ue-gcov-{}", std::process::id()));
        let dir = root.join("root/build/x86_64/kernel/trace");
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("trace_events_user.gcda"), b"adcg*22B").unwrap();
        let plan =
            GcovPlan { files: vec!["kernel/trace/trace_events_user.c".into(), "kernel/trace/trace_events.c".into()] };
        let c = Collector::at(&root, &plan);
        c.reset().unwrap();
        assert_eq!(fs::read(root.join("reset")).unwrap(), b"1");
        let mut out = Vec::new();
        fn emit(out: &mut dyn Write, l: &ResultLine) {
            writeln!(out, "{}", l.format()).unwrap();
        }
        let (_, settled) = c.collect(7, &mut out, emit);
        assert!(settled);
        let text = String::from_utf8(out).unwrap();
        let frames: Vec<GcovFrame> = text.lines().map(|l| GcovFrame::parse(l).unwrap()).collect();
        let joined = protocol::gcov::assemble(&frames);
        assert_eq!(joined[&(7, "kernel/trace/trace_events_user.c".into())].as_ref().unwrap(), b"adcg*22B");
        let err = joined[&(7, "kernel/trace/trace_events.c".into())].as_ref().unwrap_err();
        assert!(err.contains("no */kernel/trace/trace_events.gcda"), "{err}");
        fs::remove_dir_all(&root).unwrap();
    }
}
