//! What the threads and processes of one scenario synchronise with: named barriers in a page
//! shared across `fork` (`barrier`), and a thread pinned to one CPU (`pin`), which skips the
//! scenario on a guest without that CPU.

use std::fs;
use std::sync::atomic::{AtomicU32, AtomicU8, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::steps::memory::page_size;
use crate::steps::outcome::{errno, errno_text, StepOutcome};

/// The longest barrier name (its slot holds the bytes and a NUL).
pub const MAX_NAME: usize = protocol::MAX_BARRIER_NAME;

/// One barrier: 64 bytes of the shared page. `state` is 0 (free), 1 (being claimed: its name is
/// being written) or 2 (named). `count` is how many parties arrived, `parties` how many the first
/// one said must.
#[repr(C)]
struct Slot {
    state: AtomicU32,
    count: AtomicU32,
    parties: AtomicU32,
    name: [AtomicU8; MAX_NAME + 1],
}

const FREE: u32 = 0;
const CLAIMING: u32 = 1;
const NAMED: u32 = 2;

/// The shared page's address and its number of slots, mapped once per process image.
static TABLE: OnceLock<Result<(usize, usize), String>> = OnceLock::new();

/// Maps the barriers' page (MAP_SHARED, anonymous) unless this image already has it. A `fork`
/// calls it first, so parent and child see the same barriers.
pub fn prepare() -> Result<(), String> {
    table().map(|_| ())
}

fn table() -> Result<&'static [Slot], String> {
    let (addr, slots) = TABLE
        .get_or_init(|| {
            let len = page_size();
            // SAFETY: a new anonymous shared mapping; no existing memory is affected. It is never
            // unmapped: it lives as long as the process image.
            let ptr = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                )
            };
            if ptr == libc::MAP_FAILED {
                return Err(format!("barriers: mmap of a shared page: {}", errno_text(errno())));
            }
            Ok((ptr as usize, len / std::mem::size_of::<Slot>()))
        })
        .clone()?;
    // SAFETY: the page is mapped for the life of the image, zero-filled (every slot free), and
    // `Slot` is made of atomics only, for which any bytes are valid.
    Ok(unsafe { std::slice::from_raw_parts(addr as *const Slot, slots) })
}

impl Slot {
    fn has_name(&self, name: &[u8]) -> bool {
        self.name.iter().take(name.len()).zip(name).all(|(a, b)| a.load(Ordering::Relaxed) == *b)
            && self.name[name.len()].load(Ordering::Relaxed) == 0
    }
}

/// The slot of barrier `name`, claimed when no process or thread has named it yet. Slots are
/// claimed in order, and a slot being claimed is waited for before it is compared, so two
/// parties naming the same barrier at once find the same slot.
fn slot(name: &str) -> Result<&'static Slot, String> {
    let bytes = name.as_bytes();
    if bytes.is_empty() || bytes.len() > MAX_NAME || bytes.contains(&0) {
        return Err(format!("barrier {name:?}: a name has 1 to {MAX_NAME} bytes and no NUL"));
    }
    let slots = table()?;
    for slot in slots {
        loop {
            match slot.state.load(Ordering::Acquire) {
                FREE => {
                    if slot.state.compare_exchange(FREE, CLAIMING, Ordering::AcqRel, Ordering::Acquire).is_ok() {
                        for (cell, b) in slot.name.iter().zip(bytes.iter().chain(std::iter::once(&0))) {
                            cell.store(*b, Ordering::Relaxed);
                        }
                        slot.state.store(NAMED, Ordering::Release);
                        return Ok(slot);
                    }
                }
                CLAIMING => std::thread::yield_now(),
                _ if slot.has_name(bytes) => return Ok(slot),
                _ => break,
            }
        }
    }
    Err(format!("barrier {name}: no room for more than {} barriers in a scenario", slots.len()))
}

/// `futex(FUTEX_WAIT)` on a shared word while it holds `seen`, for at most `timeout`.
fn futex_wait(word: &AtomicU32, seen: u32, timeout: Duration) {
    let ts = libc::timespec { tv_sec: timeout.as_secs() as libc::time_t, tv_nsec: timeout.subsec_nanos() as _ };
    // SAFETY: the word is a live, aligned u32 in a shared mapping; the kernel only reads it and
    // the timespec. EAGAIN (it changed), EINTR and ETIMEDOUT all send the caller back to look.
    unsafe {
        libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAIT, seen, &ts as *const libc::timespec);
    }
}

fn futex_wake_all(word: &AtomicU32) {
    // SAFETY: as above; FUTEX_WAKE only reads the address.
    unsafe {
        libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE, i32::MAX);
    }
}

/// `Step::Barrier`: arrives at `name` and waits until `parties` have (futex wakeups, so every
/// waiter goes on at once), for at most `within_ms`. The barrier is met again and again: the
/// arrivals are counted on, and each `parties` of them release each other (so the same barrier
/// in a `repeat` meets once per iteration).
pub fn barrier(name: &str, parties: u32, within_ms: u64, say: &mut dyn FnMut(&str)) -> StepOutcome {
    let what = format!("barrier {name}");
    let slot = match slot(name) {
        Ok(s) => s,
        Err(e) => {
            say(&e);
            return StepOutcome::Fail;
        }
    };
    if let Err(other) = slot.parties.compare_exchange(0, parties, Ordering::AcqRel, Ordering::Acquire) {
        if other != parties {
            say(&format!("{what}: {parties} parties here, but {other} where it was first reached"));
            return StepOutcome::Fail;
        }
    }
    let started = Instant::now();
    let arrived = slot.count.fetch_add(1, Ordering::AcqRel) + 1;
    // This arrival's meeting: the arrivals numbered up to `target` meet.
    let meeting = arrived.div_ceil(parties);
    let target = meeting * parties;
    if arrived == target {
        futex_wake_all(&slot.count);
    }
    let limit = Duration::from_millis(within_ms);
    loop {
        let now = slot.count.load(Ordering::Acquire);
        let waited = started.elapsed();
        if now >= target {
            let nth = arrived - (meeting - 1) * parties;
            say(&format!(
                "{what}: meeting {meeting}: all {parties} arrived, this one as number {nth}, after {} ms",
                waited.as_millis()
            ));
            return StepOutcome::Pass;
        }
        if waited >= limit {
            let here = now - (meeting - 1) * parties;
            say(&format!("{what}: meeting {meeting}: only {here} of {parties} arrived within {within_ms} ms"));
            return StepOutcome::Fail;
        }
        futex_wait(&slot.count, now, (limit - waited).min(Duration::from_millis(100)));
    }
}

/// The CPUs a list such as `0-3,5` names (`/sys/devices/system/cpu/online`).
pub fn parse_cpu_list(text: &str) -> Result<Vec<u32>, String> {
    let mut cpus = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        let number = |s: &str| s.parse::<u32>().map_err(|_| format!("`{text}` is not a CPU list (at `{s}`)"));
        match part.split_once('-') {
            Some((a, b)) => cpus.extend(number(a)?..=number(b)?),
            None => cpus.push(number(part)?),
        }
    }
    Ok(cpus)
}

const ONLINE: &str = "/sys/devices/system/cpu/online";

/// `Step::Pin`: the calling thread on CPU `cpu` only; a skip, saying how many CPUs the scenario
/// needs, when that CPU is not online.
pub fn pin(cpu: u32, say: &mut dyn FnMut(&str)) -> StepOutcome {
    let what = format!("pin to CPU {cpu}");
    let online = match fs::read_to_string(ONLINE).map_err(|e| format!("{ONLINE}: {e}")).and_then(|t| parse_cpu_list(&t))
    {
        Ok(cpus) => cpus,
        Err(e) => {
            say(&format!("{what}: {e}"));
            return StepOutcome::Fail;
        }
    };
    if !online.contains(&cpu) {
        let shown: Vec<String> = online.iter().map(u32::to_string).collect();
        say(&format!(
            "{what}: the guest has {} CPU(s) online ({}); this scenario needs {} CPUs",
            online.len(),
            shown.join(","),
            cpu + 1
        ));
        return StepOutcome::Skip;
    }
    if cpu as usize >= libc::CPU_SETSIZE as usize {
        say(&format!("{what}: beyond the {} CPUs a cpu_set_t holds", libc::CPU_SETSIZE));
        return StepOutcome::Fail;
    }
    // SAFETY: a zeroed cpu_set_t is an empty set; CPU_SET writes within it (checked above), and
    // sched_setaffinity(0) only reads it, for the calling thread.
    let r = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu as usize, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if r != 0 {
        say(&format!("{what}: sched_setaffinity: {}", errno_text(errno())));
        return StepOutcome::Fail;
    }
    // SAFETY: no arguments; the CPU the thread runs on now, which the affinity just fixed.
    let now = unsafe { libc::sched_getcpu() };
    say(&format!("{what}: ok, running on CPU {now} ({} online)", online.len()));
    StepOutcome::passed_if(now == cpu as i32)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_barrier(name: &str, parties: u32, within_ms: u64) -> (StepOutcome, Vec<String>) {
        let mut lines = Vec::new();
        let outcome = barrier(name, parties, within_ms, &mut |l| lines.push(l.to_string()));
        (outcome, lines)
    }

    #[test]
    fn cpu_lists_parse() {
        assert_eq!(parse_cpu_list("0\n").unwrap(), [0]);
        assert_eq!(parse_cpu_list("0-3,5,7-8").unwrap(), [0, 1, 2, 3, 5, 7, 8]);
        assert_eq!(parse_cpu_list("").unwrap(), Vec::<u32>::new());
        assert_eq!(parse_cpu_list("0-x").unwrap_err(), "`0-x` is not a CPU list (at `x`)");
    }

    #[test]
    fn threads_meet_at_a_barrier() {
        let started = Instant::now();
        let outcomes: Vec<StepOutcome> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..3)
                .map(|i| {
                    s.spawn(move || {
                        std::thread::sleep(Duration::from_millis(20 * i));
                        run_barrier("test-three", 3, 5000).0
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert_eq!(outcomes, [StepOutcome::Pass; 3]);
        assert!(started.elapsed() >= Duration::from_millis(40), "nobody went on before the last arrived");
        // The next arrivals meet anew.
        let (outcome, lines) = run_barrier("test-three", 3, 30);
        assert_eq!(outcome, StepOutcome::Fail);
        assert_eq!(lines, ["barrier test-three: meeting 2: only 1 of 3 arrived within 30 ms"]);
    }

    #[test]
    fn a_barrier_meets_again_and_again() {
        let rounds = 50;
        let lines: Vec<Vec<String>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..2)
                .map(|_| {
                    s.spawn(move || {
                        let mut lines = Vec::new();
                        for _ in 0..rounds {
                            let outcome = barrier("test-again", 2, 5000, &mut |l| lines.push(l.to_string()));
                            assert_eq!(outcome, StepOutcome::Pass);
                        }
                        lines
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for mine in &lines {
            for (round, line) in mine.iter().enumerate() {
                assert!(
                    line.starts_with(&format!("barrier test-again: meeting {}: all 2 arrived", round + 1)),
                    "{line}"
                );
            }
        }
    }

    #[test]
    fn a_barrier_short_of_parties_times_out() {
        let started = Instant::now();
        let (outcome, lines) = run_barrier("test-alone", 2, 50);
        assert_eq!(outcome, StepOutcome::Fail);
        assert!(started.elapsed() >= Duration::from_millis(50));
        assert_eq!(lines, ["barrier test-alone: meeting 1: only 1 of 2 arrived within 50 ms"]);
        let (outcome, lines) = run_barrier("test-alone", 3, 50);
        assert_eq!(outcome, StepOutcome::Fail);
        assert_eq!(lines, ["barrier test-alone: 3 parties here, but 2 where it was first reached"]);
        assert_eq!(run_barrier(&"x".repeat(MAX_NAME + 1), 1, 0).0, StepOutcome::Fail);
        assert_eq!(run_barrier(&"x".repeat(MAX_NAME), 1, 0).0, StepOutcome::Pass);
    }

    #[test]
    fn a_forked_child_meets_its_parent() {
        prepare().unwrap();
        // SAFETY: the child only runs the barrier (atomics, futex) and _exits.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            let code = if barrier("test-fork", 2, 5000, &mut |_| {}) == StepOutcome::Pass { 0 } else { 1 };
            // SAFETY: the forked child leaves without running the test harness's exit path.
            unsafe { libc::_exit(code) };
        }
        assert!(pid > 0);
        let (outcome, lines) = run_barrier("test-fork", 2, 5000);
        let mut status = 0;
        // SAFETY: waitpid writes only the status.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        assert_eq!((outcome, libc::WEXITSTATUS(status)), (StepOutcome::Pass, 0), "{lines:?}");
    }

    #[test]
    fn pinning_to_an_absent_cpu_skips() {
        let mut lines = Vec::new();
        let outcome = pin(100_000, &mut |l| lines.push(l.to_string()));
        assert_eq!(outcome, StepOutcome::Skip, "{lines:?}");
        assert!(lines[0].starts_with("pin to CPU 100000: the guest has "), "{lines:?}");
        assert!(lines[0].ends_with("; this scenario needs 100001 CPUs"), "{lines:?}");
        // CPU 0 is online everywhere; pinning this test's thread to it is harmless.
        let handle = std::thread::spawn(|| {
            let mut lines = Vec::new();
            (pin(0, &mut |l| lines.push(l.to_string())), lines)
        });
        let (outcome, lines) = handle.join().unwrap();
        assert_eq!(outcome, StepOutcome::Pass, "{lines:?}");
        assert!(lines[0].starts_with("pin to CPU 0: ok, running on CPU 0 ("), "{lines:?}");
    }
}
