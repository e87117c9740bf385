//! The clocks a `measure` step times with: the kernel clock's tick, a clock fine enough for one
//! operation (the TSC where the kernel's clock is jiffies), and repetitions timed over whole ticks.

use std::time::{Duration, Instant};

/// The clock's resolution: the smallest step between readings seen (x86_64 under TCG has no
/// usable TSC and falls back to jiffies, 4 ms; arm64's generic timer gives tens of ns).
pub fn clock_tick() -> Duration {
    (0..3)
        .map(|_| {
            let a = Instant::now();
            loop {
                let b = Instant::now();
                if b != a {
                    return b - a;
                }
            }
        })
        .min()
        .expect("three readings")
}

/// A clock fine enough to time one operation. Where the kernel's clock is coarse on x86_64
/// (jiffies, because under TCG the kernel cannot calibrate the TSC), it is the time-stamp
/// counter, which still counts, scaled by a rate measured against the kernel's clock over ten
/// whole ticks; elsewhere it is the kernel's clock itself.
#[derive(Debug, Clone, Copy)]
pub struct FineClock {
    ns_per_count: f64,
    /// Whether it counts with the TSC (else the kernel's clock).
    pub tsc: bool,
}

impl FineClock {
    pub fn new(tick: Duration) -> FineClock {
        if !(cfg!(target_arch = "x86_64") && tick > Duration::from_micros(1)) {
            return FineClock { ns_per_count: 1.0, tsc: false };
        }
        let edge = |after: Instant| loop {
            let now = Instant::now();
            if now != after {
                return now;
            }
        };
        let a = edge(Instant::now());
        let c0 = tsc();
        let mut b = a;
        while b - a < tick * 10 {
            b = edge(b);
        }
        let c1 = tsc();
        FineClock { ns_per_count: (b - a).as_nanos() as f64 / c1.wrapping_sub(c0).max(1) as f64, tsc: true }
    }

    /// Nanoseconds since an arbitrary start.
    pub fn now_ns(&self) -> f64 {
        if self.tsc {
            tsc() as f64 * self.ns_per_count
        } else {
            static EPOCH: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
            EPOCH.get_or_init(Instant::now).elapsed().as_nanos() as f64
        }
    }
}

#[cfg(target_arch = "x86_64")]
fn tsc() -> u64 {
    // SAFETY: RDTSC has no preconditions (user space may run it unless CR4.TSD is set, which
    // Linux does not do by default).
    unsafe { std::arch::x86_64::_rdtsc() }
}

#[cfg(not(target_arch = "x86_64"))]
fn tsc() -> u64 {
    0
}

/// Times repetitions of an operation so that a coarse clock does not matter: each starts right
/// after the clock ticks and ends right after it ticks again past `duration`, with the clock
/// read only between batches of operations sized to a small part of a tick.
#[derive(Debug, Clone, Copy)]
pub struct Timer {
    pub tick: Duration,
}

impl Timer {
    /// How long a batch of operations should take: short against a tick and the repetition,
    /// long against a clock read (a system call when the clock is jiffies).
    fn batch_time(&self) -> Duration {
        (self.tick / 32).max(Duration::from_micros(100))
    }

    /// One repetition: the mean cost per operation in ns.
    pub fn run(&self, duration: Duration, mut op: impl FnMut() -> Result<(), String>) -> Result<f64, String> {
        let t0 = {
            let a = Instant::now();
            loop {
                let b = Instant::now();
                if b != a {
                    break b;
                }
            }
        };
        let (mut done, mut batch) = (0u64, 1u64);
        let mut sized = false;
        let mut past: Option<Instant> = None;
        loop {
            for _ in 0..batch {
                op()?;
            }
            done += batch;
            let now = Instant::now();
            let elapsed = now - t0;
            match past {
                // The first tick past the duration ends the repetition.
                Some(p) if now != p => return Ok(elapsed.as_nanos() as f64 / done as f64),
                Some(_) => {}
                None if elapsed >= duration => past = Some(now),
                None => {}
            }
            if !sized {
                if elapsed >= self.tick.max(self.batch_time()) {
                    // A rate is known: batches of about `batch_time` from now on.
                    let per_op = elapsed.as_nanos() as f64 / done as f64;
                    batch = ((self.batch_time().as_nanos() as f64 / per_op) as u64).max(1);
                    sized = true;
                } else if elapsed.is_zero() || elapsed < self.batch_time() {
                    batch *= 2;
                }
            }
        }
    }
}
