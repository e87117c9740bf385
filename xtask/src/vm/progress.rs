//! The progress rule, sans-IO: a long step's progress markers (`ue-agent: progress`, from the
//! console) with the times they came, and the history's median duration of the scenario, in;
//! whether the scenario has stopped making progress or crawls, out. The scenario's deadline
//! stays the absolute cap; this ends a scenario that will not make it long before it.

use std::time::{Duration, Instant};

/// How long a scenario that has reported progress may go without another marker. A healthy
/// `register_until` writes one every 1-3 s under TCG with four arches' VMs on two cores (the
/// fill's 64 markers in 45-200 s): ten times that still leaves room for a slow host, and a
/// kernel that went 30 s without 1024 registrations has stopped, or as good as.
pub const STALL: Duration = Duration::from_secs(30);
/// How much slower than the history's median a projected duration may be before the scenario
/// crawls. Load alone (four arches' VMs on two cores) made passing fills in this machine's
/// history take up to 3.4 times their median (s390x: 230 s against 68 s; riscv64 240 s against
/// 77 s), so 3 would end healthy fills; a kernel that crawls is 50 times slower and more.
pub const CRAWL_FACTOR: u64 = 5;
/// Projections below this never crawl: a scenario this short is left to its deadline, as a
/// median of a few seconds times three would end a healthy scenario on a busy host.
pub const CRAWL_FLOOR: Duration = Duration::from_secs(60);

/// The latest progress marker of the running scenario, and when the host read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mark {
    pub done: u64,
    pub total: u64,
    pub elapsed_ms: u64,
    pub at: Instant,
}

/// What the history says of a scenario: the median duration of its passing outcomes on `arch`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expected {
    pub median_ms: u64,
    pub arch: String,
}

/// Before this much of the step has passed, its rate says nothing: on a healthy kernel the
/// step's start and a hiccup of the host made the first markers project 1.3-2.3 times the
/// fill's real time (286 ms for the first 1024, 697 ms for the third, 100-250 ms for the
/// others), and a second lost in a few seconds weighs little after twenty. A kernel that
/// crawls (1024 in 41 s) is past it at its first marker.
pub const CRAWL_AFTER: Duration = Duration::from_secs(20);

/// Why the scenario is ended at `now`, or `None` while it makes progress at a credible rate:
/// no marker for [`STALL`] since `last`; or, once the step has run [`CRAWL_AFTER`], a projected
/// duration (its elapsed time times `total / done`) above both [`CRAWL_FACTOR`] times the
/// history's median and [`CRAWL_FLOOR`].
pub fn judge(last: &Mark, expected: Option<&Expected>, now: Instant) -> Option<String> {
    let measured = format!("{} of at most {} in {} s", last.done, last.total, secs(last.elapsed_ms));
    let silent = now.saturating_duration_since(last.at);
    if silent > STALL {
        return Some(format!(
            "no progress marker for {} s after {measured} (a stall bound of {} s): stalled",
            silent.as_secs(),
            STALL.as_secs()
        ));
    }
    let expected = expected?;
    let projected = projected_ms(last)?;
    let bound = expected.median_ms.saturating_mul(CRAWL_FACTOR).max(CRAWL_FLOOR.as_millis() as u64);
    let long_enough = last.elapsed_ms >= CRAWL_AFTER.as_millis() as u64;
    (long_enough && projected > bound).then(|| {
        format!(
            "{measured}, {} s at that rate; its median on {} in the history is {} s: crawling",
            secs(projected),
            expected.arch,
            secs(expected.median_ms)
        )
    })
}

/// The step's whole time at its rate so far; `None` before it has done anything.
fn projected_ms(m: &Mark) -> Option<u64> {
    (m.done > 0).then(|| (u128::from(m.elapsed_ms) * u128::from(m.total) / u128::from(m.done)) as u64)
}

/// Whole seconds, to the nearest.
fn secs(ms: u64) -> u64 {
    ms.saturating_add(500) / 1000
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOTAL: u64 = 70_000;

    fn mark(t0: Instant, done: u64, elapsed_ms: u64) -> Mark {
        Mark { done, total: TOTAL, elapsed_ms, at: t0 + Duration::from_millis(elapsed_ms) }
    }

    fn history(median_s: u64) -> Expected {
        Expected { median_ms: median_s * 1000, arch: "x86_64".into() }
    }

    /// The markers of a fill that takes `whole_s` for `TOTAL`, its first 1024 taking `start`
    /// times as long as the others, each judged as it comes and just before the next: the
    /// first verdict, if any.
    fn fill_from(whole_s: u64, start: u64, expected: Option<&Expected>) -> Option<String> {
        let t0 = Instant::now();
        let chunks = TOTAL / 1024;
        let per = whole_s * 1000 / (chunks + start - 1);
        let at = |k: u64| (k + start - 1) * per;
        (1..=chunks).find_map(|k| {
            let m = mark(t0, k * 1024, at(k));
            let next = t0 + Duration::from_millis(at(k + 1));
            judge(&m, expected, m.at).or_else(|| judge(&m, expected, next))
        })
    }

    fn fill(whole_s: u64, expected: Option<&Expected>) -> Option<String> {
        fill_from(whole_s, 1, expected)
    }

    #[test]
    fn a_healthy_fill_and_one_at_half_the_historys_rate_are_not_ended() {
        let h = history(52);
        assert_eq!(fill(52, Some(&h)), None);
        assert_eq!(fill(104, Some(&h)), None, "under load, at half the rate");
        assert_eq!(fill(150, Some(&h)), None, "three times the median");
        // s390x's slowest passing fill against its median, with four arches booting at once.
        assert_eq!(fill(230, Some(&history(68))), None);
        assert_eq!(fill(255, Some(&h)), None, "just under five times the median");
        // Without a history only a stall ends it, however slow the rate.
        assert_eq!(fill(1500, None), None);
        // The floor: a short median times three is no bound under a minute.
        assert_eq!(fill(55, Some(&history(5))), None);
        // A slow start (the first 1024 three times as long as the rest, as measured on a
        // healthy kernel) under load at a quarter of x86_64's recorded rate: the first
        // markers project past the bound, and are too early to count.
        assert_eq!(fill_from(40, 3, Some(&history(10))), None);
        assert_eq!(fill_from(40, 10, Some(&history(10))), None, "a start of 5 s");
    }

    #[test]
    fn a_crawling_fill_is_ended_at_its_first_marker_with_what_was_measured() {
        let t0 = Instant::now();
        let m = mark(t0, 1024, 41_000);
        let why = judge(&m, Some(&history(52)), m.at).unwrap();
        assert_eq!(
            why,
            "1024 of at most 70000 in 41 s, 2803 s at that rate; its median on x86_64 in the history is 52 s: crawling"
        );
        // A slow fill is ended once it has run long enough for its rate to count.
        let why = fill(300, Some(&history(52))).unwrap();
        assert!(why.starts_with("5120 of at most 70000 in 22 s") && why.ends_with("crawling"), "{why}");
        // The same rate with no history goes on.
        assert_eq!(judge(&m, None, m.at), None);
        // Early markers are noise: a hiccup of 3 s at the second projects 102 s, and counts for
        // nothing.
        assert_eq!(judge(&mark(t0, 2048, 3_000), Some(&history(10)), t0), None);
    }

    #[test]
    fn silence_after_a_marker_is_a_stall_history_or_not() {
        let t0 = Instant::now();
        let m = mark(t0, 5120, 4_000);
        for h in [None, Some(history(52))] {
            assert_eq!(judge(&m, h.as_ref(), m.at + STALL), None);
            let why = judge(&m, h.as_ref(), m.at + STALL + Duration::from_secs(1)).unwrap();
            assert_eq!(
                why,
                "no progress marker for 31 s after 5120 of at most 70000 in 4 s (a stall bound of 30 s): stalled"
            );
        }
    }
}
