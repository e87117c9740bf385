//! `repeat` with `leak_at_most`: the kernel's unreclaimable slab memory (`SUnreclaim`) read
//! after a warm-up and after each round of iterations, each time once the kernel's deferred
//! frees (RCU callbacks, work items) have settled, so a kernel that leaks a small object an
//! iteration fails the step.

use std::ops::Range;
use std::time::{Duration, Instant};

use crate::steps::outcome::StepOutcome;

const MEMINFO: &str = "/proc/meminfo";
/// How often the settling reads come.
const POLL: Duration = Duration::from_millis(20);
/// Settled: no new low for this long (an RCU grace period under TCG takes about 20 ms, and a
/// work item queued after one runs soon after).
const QUIET: Duration = Duration::from_millis(300);
/// The longest a settling read waits.
const LIMIT: Duration = Duration::from_secs(5);

/// `SUnreclaim` of a /proc/meminfo text, in bytes.
pub fn unreclaimable(meminfo: &str) -> Option<u64> {
    let rest = meminfo.lines().find_map(|l| l.strip_prefix("SUnreclaim:"))?;
    let kb = rest.trim().strip_suffix("kB")?.trim().parse::<u64>().ok()?;
    Some(kb * 1024)
}

/// The lowest `SUnreclaim` seen until none lower has come for `QUIET` (or `LIMIT` has passed).
fn settled() -> Result<u64, String> {
    let read = || {
        let text = std::fs::read_to_string(MEMINFO).map_err(|e| format!("reading {MEMINFO}: {e}"))?;
        unreclaimable(&text).ok_or_else(|| format!("{MEMINFO} has no `SUnreclaim: N kB` line"))
    };
    let started = Instant::now();
    let mut low = read()?;
    let mut since = Instant::now();
    while since.elapsed() < QUIET && started.elapsed() < LIMIT {
        std::thread::sleep(POLL);
        let now = read()?;
        if now < low {
            low = now;
            since = Instant::now();
        }
    }
    Ok(low)
}

/// Rounds a leak must show in, one after the other, before the step fails.
pub const ROUNDS: u32 = 3;

/// Runs the first half of the iterations as a warm-up, then rounds of the second half's
/// length (iteration numbers go on counting), reading the settled `SUnreclaim` before and
/// after each: the step passes at the first round that grew by at most `each` bytes an
/// iteration, and fails when [`ROUNDS`] rounds in a row each grew by more. A leak grows every
/// round by about the same amount; a correct kernel's figure swings by a few pages either way
/// (the slab allocator frees and keeps pages as it sees fit), and a swing over the allowance
/// three times running is what the rounds rule out.
///
/// The warm-up is as long as a round because the allocator keeps freed pages (per-CPU
/// partial slabs) at the high-water mark the iterations reach while frees are still pending
/// (an enabler is freed a grace period later): a round reaches the same mark, so only what is
/// never freed makes it grow; what a first iteration makes and keeps (a cache, a directory) is
/// not counted either.
pub fn repeat_without_leaks(
    count: u32,
    each: u32,
    say: &mut dyn FnMut(&str),
    mut run: impl FnMut(Range<u32>, &mut dyn FnMut(&str)) -> StepOutcome,
) -> StepOutcome {
    let warm = (count / 2).max(1).min(count);
    let first = run(0..warm, say);
    if first != StepOutcome::Pass || count < 2 {
        return first;
    }
    match rounds(count - warm, warm, each, say, &mut run) {
        Ok(outcome) => outcome,
        Err(e) => {
            say(&format!("leak_at_most: {e}"));
            StepOutcome::Fail
        }
    }
}

/// The rounds of `round` iterations after the `warm` ones; an error when `SUnreclaim` cannot
/// be read.
fn rounds(
    round: u32,
    warm: u32,
    each: u32,
    say: &mut dyn FnMut(&str),
    run: &mut impl FnMut(Range<u32>, &mut dyn FnMut(&str)) -> StepOutcome,
) -> Result<StepOutcome, String> {
    let allowed = u64::from(round) * u64::from(each);
    let mut before = settled()?;
    for r in 0..ROUNDS {
        let from = warm + r * round;
        let rest = run(from..from + round, say);
        if rest != StepOutcome::Pass {
            return Ok(rest);
        }
        let after = settled()?;
        let grew = after as i64 - before as i64;
        let over = grew > allowed as i64;
        say(&format!(
            "leak_at_most: round {} of at most {ROUNDS}: SUnreclaim {before} -> {after} bytes over {round} iterations: \
             {grew:+} bytes, {} the {allowed} allowed ({each} an iteration)",
            r + 1,
            if over { "more than" } else { "within" },
        ));
        if !over {
            return Ok(StepOutcome::Pass);
        }
        before = after;
    }
    say(&format!("leak_at_most: grew by more than allowed in each of {ROUNDS} rounds in a row"));
    Ok(StepOutcome::Fail)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sunreclaim_in_bytes() {
        let text = "MemTotal:         492104 kB\nSReclaimable:       3100 kB\nSUnreclaim:        10500 kB\n";
        assert_eq!(unreclaimable(text), Some(10500 * 1024));
        assert_eq!(unreclaimable("MemTotal: 1 kB\n"), None);
    }

    #[test]
    fn the_first_half_is_a_warm_up_and_the_rest_run_after_it() {
        let mut ranges = Vec::new();
        let mut said = Vec::new();
        let outcome = repeat_without_leaks(5, 64, &mut |l| said.push(l.to_string()), |r, _| {
            ranges.push(r);
            StepOutcome::Pass
        });
        // The host's /proc/meminfo is read for real: the host may grow by more than allowed, so
        // one round or more ran, each of the second half's length, numbered on.
        assert_eq!(ranges[..2], [0..2, 2..5]);
        assert!(ranges.len() <= 1 + ROUNDS as usize);
        assert!(ranges.windows(2).all(|w| w[0].end == w[1].start && w[1].len() == 3), "{ranges:?}");
        assert!(said.iter().any(|l| l.starts_with("leak_at_most: round 1 of at most 3: SUnreclaim ")), "{said:?}");
        // It fails only after every round ran; it passes at the first round within the allowance.
        if outcome == StepOutcome::Fail {
            assert_eq!(ranges.len(), 1 + ROUNDS as usize);
        }
        if ranges.len() < 1 + ROUNDS as usize {
            assert_eq!(outcome, StepOutcome::Pass);
        }
    }

    #[test]
    fn a_failing_warm_up_ends_it() {
        let mut calls = 0;
        let outcome = repeat_without_leaks(3, 64, &mut |_| {}, |_, _| {
            calls += 1;
            StepOutcome::Fail
        });
        assert_eq!((outcome, calls), (StepOutcome::Fail, 1));
    }
}
