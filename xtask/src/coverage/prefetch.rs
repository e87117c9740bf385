//! A coverage boot's snapshots turned into counts while the boots still run: the boot's live
//! result lines are watched, each `.gcda` snapshot is assembled as its last `# ue-gcov` frame
//! arrives, and one background thread per boot, at the lowest CPU priority (so the guests keep
//! the processors and only idle time is used), runs gcov on it into a memo. `runs::read`, which
//! stays the source of truth (it takes every snapshot from the boot's channel as judged), takes
//! each snapshot's counts from the memo when it is there and runs gcov only for the rest.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Sender};
use std::sync::{LazyLock, Mutex};

use anyhow::{Context, Result};
use protocol::gcov::GcovFrame;
use protocol::ResultLine;

use crate::coverage::gcov::Gcov;
use crate::coverage::lcov::{self, FileCov};
use crate::kernel::build::Built;
use crate::kernel::gcov::STORE_DIR;

/// Counts already made: (source, the snapshot's bytes) to its counts.
type Memo = HashMap<(String, Vec<u8>), FileCov>;
static MEMO: LazyLock<Mutex<Memo>> = LazyLock::new(|| Mutex::new(HashMap::new()));
/// Set when `runs::read` starts: the threads then stop at their next snapshot, so no gcov runs
/// twice for one snapshot.
static STOP: AtomicBool = AtomicBool::new(false);

/// One boot's watcher: the frames of the snapshot being received, and the thread's queue.
pub struct Prefetch {
    tx: Sender<(String, Vec<u8>)>,
    partial: Mutex<Vec<GcovFrame>>,
}

impl Prefetch {
    /// A watcher for a boot of `built`; `None` when it is not a coverage kernel or its notes or
    /// gcov cannot be had (then `runs::read` says why).
    pub fn start(built: &Built) -> Option<Prefetch> {
        if built.metadata.gcov_files.is_empty() {
            return None;
        }
        let (gcov, notes) = notes_of(built).ok()?;
        STOP.store(false, Ordering::SeqCst);
        let (tx, rx) = mpsc::channel::<(String, Vec<u8>)>();
        std::thread::spawn(move || {
            // SAFETY: setpriority on this thread (Linux: PRIO_PROCESS with a thread id); the
            // gcov processes it starts inherit the nice value.
            unsafe { libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, 19) };
            for (file, bytes) in rx {
                if STOP.load(Ordering::SeqCst) {
                    break;
                }
                // A failure here is left to `runs::read`, which says it.
                if let Ok(c) = counts(&gcov, &notes, &file, &bytes, &file) {
                    MEMO.lock().unwrap_or_else(|e| e.into_inner()).insert((file, bytes), c);
                }
            }
        });
        Some(Prefetch { tx, partial: Mutex::new(Vec::new()) })
    }

    /// Feeds one live result line: a snapshot's last frame queues the snapshot.
    pub fn line(&self, line: &ResultLine) {
        let ResultLine::Gcov(frame) = line else { return };
        if frame.parts == 0 {
            return;
        }
        let mut partial = self.partial.lock().unwrap_or_else(|e| e.into_inner());
        if partial.first().is_some_and(|f| (f.index, &f.file) != (frame.index, &frame.file)) {
            partial.clear();
        }
        partial.push(frame.clone());
        if frame.part < frame.parts {
            return;
        }
        let whole = protocol::gcov::assemble(&partial);
        partial.clear();
        if let Some(Ok(bytes)) = whole.into_values().next() {
            let _ = self.tx.send((frame.file.clone(), bytes));
        }
    }
}

/// A coverage kernel's gcov (its compiler's) and its notes (`.gcno`) per source, each checked
/// against that gcov's version.
pub fn notes_of(k: &Built) -> Result<(Gcov, BTreeMap<String, PathBuf>)> {
    let store = k.image.parent().context("a cached kernel's folder")?;
    let gcov = Gcov::beside(&k.metadata.compiler.command, k.arch.compiler_package)?;
    let mut notes = BTreeMap::new();
    for f in &k.metadata.gcov_files {
        let gcno = store.join(STORE_DIR).join(f).with_extension("gcno");
        let bytes = std::fs::read(&gcno).with_context(|| format!("coverage: reading {}", gcno.display()))?;
        gcov.check(&gcno, &bytes)?;
        notes.insert(f.clone(), gcno);
    }
    Ok((gcov, notes))
}

/// One snapshot of `file` as counts: its version stamp checked (a mismatch names `what`), gcov's
/// JSON against the notes, read as lcov counts. The watchers and `runs::read` both use it.
pub fn counts(gcov: &Gcov, notes: &BTreeMap<String, PathBuf>, file: &str, bytes: &[u8], what: &str) -> Result<FileCov> {
    let gcno = notes.get(file).with_context(|| format!("coverage: {file} was not built with GCOV"))?;
    gcov.check(Path::new(what), bytes)?;
    lcov::from_gcov_json(&gcov.json(gcno, bytes)?, file)
}

/// Stops the threads at their next snapshot (`runs::read` converts what is left).
pub fn stop() {
    STOP.store(true, Ordering::SeqCst);
}

/// The counts of a snapshot made while the boots ran, if any (taken out of the memo).
pub fn take(file: &str, bytes: &[u8]) -> Option<FileCov> {
    MEMO.lock().unwrap_or_else(|e| e.into_inner()).remove(&(file.to_string(), bytes.to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_memo_gives_each_snapshot_back_once() {
        let counts = FileCov { path: "a.c".into(), lines: [(1, 2)].into(), ..FileCov::default() };
        MEMO.lock().unwrap().insert(("a.c".into(), b"snap".to_vec()), counts.clone());
        assert_eq!(take("a.c", b"other"), None);
        assert_eq!(take("a.c", b"snap"), Some(counts));
        assert_eq!(take("a.c", b"snap"), None);
    }
}
