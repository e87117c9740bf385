//! A metric on both sides: every repeat's samples pooled per arch, scenario and figure, their
//! median, MAD and quartiles, and the change judged against the noise the runs measured.

use serde::{Deserialize, Serialize};

use crate::results::model::{Metric, Run};

/// Fewest samples per side for a metric's noise to count as measured.
pub const MIN_SAMPLES: usize = 3;
/// Fewest runs per side for a metric's change to be confirmed (and able to gate).
pub const MIN_RUNS: usize = 2;
/// How many noise widths (robust standard deviations) a change of medians must exceed.
pub const NOISE_FACTOR: f64 = 3.0;
/// MAD to standard deviation for normally distributed samples.
const MAD_TO_SIGMA: f64 = 1.4826;
/// A metric's samples on one side, summarised.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    pub n: usize,
    pub median: f64,
    /// Median absolute deviation from the median.
    pub mad: f64,
    pub q1: f64,
    pub q3: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MetricVerdict {
    Better,
    Worse,
    WithinNoise,
    /// Fewer than [`MIN_SAMPLES`] samples on a side: no noise to judge against.
    Unmeasured,
}

impl MetricVerdict {
    pub fn as_str(self) -> &'static str {
        match self {
            MetricVerdict::Better => "better",
            MetricVerdict::Worse => "worse",
            MetricVerdict::WithinNoise => "within noise",
            MetricVerdict::Unmeasured => "unmeasured",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MetricChange {
    pub arch: String,
    pub scenario: String,
    pub metric: String,
    pub unit: String,
    pub higher_is_better: bool,
    pub base: Stats,
    pub current: Stats,
    /// (current median - base median) / base median, in percent; `None` when the base is 0.
    pub change_pct: Option<f64>,
    /// The noise width the change was held against: NOISE_FACTOR x 1.4826 x the larger MAD.
    pub threshold: f64,
    pub verdict: MetricVerdict,
    /// Each side pooled at least [`MIN_RUNS`] runs, so the noise includes the run-to-run
    /// variation (host load under TCG moves whole runs); only a confirmed `worse` can gate.
    pub confirmed: bool,
}

/// (arch, scenario, metric) -> (unit, higher_is_better, pooled samples, runs), in first-seen order.
/// The last number is how many runs it came from.
type Pooled = Vec<((String, String, String), (String, bool, Vec<f64>, usize))>;

fn pool(runs: &[Run]) -> Pooled {
    let mut out: Pooled = Vec::new();
    for r in runs {
        for a in &r.arches {
            for s in &a.scenarios {
                for (name, m) in &s.metrics {
                    let key = (a.arch.clone(), s.name.clone(), name.clone());
                    let samples = samples_of(m);
                    match out.iter_mut().find(|(k, _)| *k == key) {
                        Some((_, (_, _, v, runs))) => {
                            v.extend(samples);
                            *runs += 1;
                        }
                        None => out.push((key, (m.unit.clone(), m.higher_is_better, samples, 1))),
                    }
                }
            }
        }
    }
    out
}

fn samples_of(m: &Metric) -> Vec<f64> {
    let finite: Vec<f64> = m.samples.iter().copied().filter(|x| x.is_finite()).collect();
    if finite.is_empty() {
        vec![m.value]
    } else {
        finite
    }
}

pub(super) fn metrics(base: &[Run], current: &[Run]) -> Vec<MetricChange> {
    let b = pool(base);
    let mut out = Vec::new();
    for ((arch, scenario, metric), (unit, higher, cs, cruns)) in pool(current) {
        let Some((_, (_, _, bs, bruns))) =
            b.iter().find(|(k, _)| *k == (arch.clone(), scenario.clone(), metric.clone()))
        else {
            continue;
        };
        let (bst, cst) = (stats(bs), stats(&cs));
        let threshold = NOISE_FACTOR * MAD_TO_SIGMA * bst.mad.max(cst.mad);
        let delta = cst.median - bst.median;
        let verdict = if bst.n < MIN_SAMPLES || cst.n < MIN_SAMPLES {
            MetricVerdict::Unmeasured
        } else if delta.abs() > threshold && (bst.q3 < cst.q1 || cst.q3 < bst.q1) {
            if (delta > 0.0) == higher {
                MetricVerdict::Better
            } else {
                MetricVerdict::Worse
            }
        } else {
            MetricVerdict::WithinNoise
        };
        let change_pct = (bst.median != 0.0).then(|| delta / bst.median.abs() * 100.0);
        out.push(MetricChange {
            arch,
            scenario,
            metric,
            unit,
            higher_is_better: higher,
            base: bst,
            current: cst,
            change_pct,
            threshold,
            verdict,
            confirmed: *bruns >= MIN_RUNS && cruns >= MIN_RUNS,
        });
    }
    out
}

/// The `q`-quantile of sorted samples, linearly interpolated (R's type 7, numpy's default).
fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let pos = q * (sorted.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
}

pub fn stats(samples: &[f64]) -> Stats {
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    // The median is the figures' own (`protocol::median`, what the agent reports); the quartiles
    // interpolate the same way.
    let median = protocol::median(&sorted);
    let dev: Vec<f64> = sorted.iter().map(|x| (x - median).abs()).collect();
    Stats {
        n: sorted.len(),
        median,
        mad: protocol::median(&dev),
        q1: quantile(&sorted, 0.25),
        q3: quantile(&sorted, 0.75),
    }
}
