//! The Mann-Whitney U test (two-sided, normal approximation with ties and continuity
//! corrected), sans-IO: whether a measured figure's latest samples differ from its earlier
//! ones beyond their noise.

/// The test's answer for two samples.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct UTest {
    /// U of the first sample (how many of its pairs with the second it wins, ties a half).
    pub u: f64,
    /// The standard normal score of `u` (continuity corrected).
    pub z: f64,
    /// The two-sided p-value.
    pub p: f64,
}

/// The ranks of `values` (1-based, ties given their mean rank) and the tie term
/// `sum(t^3 - t)` over the groups of equal values.
fn ranks(values: &[f64]) -> (Vec<f64>, f64) {
    let mut order: Vec<usize> = (0..values.len()).collect();
    order.sort_by(|&a, &b| values[a].total_cmp(&values[b]));
    let mut out = vec![0.0; values.len()];
    let mut ties = 0.0;
    let mut i = 0;
    while i < order.len() {
        let mut j = i;
        while j + 1 < order.len() && values[order[j + 1]] == values[order[i]] {
            j += 1;
        }
        let mean = (i + j) as f64 / 2.0 + 1.0;
        for &k in &order[i..=j] {
            out[k] = mean;
        }
        let t = (j - i + 1) as f64;
        ties += t * t * t - t;
        i = j + 1;
    }
    (out, ties)
}

/// The complementary error function (Numerical Recipes' `erfcc`, relative error < 1.2e-7).
fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98 + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let r = t * poly.exp();
    if x >= 0.0 {
        r
    } else {
        2.0 - r
    }
}

/// The two-sided Mann-Whitney U test of `a` against `b`; `None` when either is empty or every
/// value is the same (no spread to judge by).
pub fn mann_whitney(a: &[f64], b: &[f64]) -> Option<UTest> {
    if a.is_empty() || b.is_empty() {
        return None;
    }
    let (n1, n2) = (a.len() as f64, b.len() as f64);
    let all: Vec<f64> = a.iter().chain(b).copied().collect();
    let (r, ties) = ranks(&all);
    let r1: f64 = r[..a.len()].iter().sum();
    let u = r1 - n1 * (n1 + 1.0) / 2.0;
    let n = n1 + n2;
    let var = n1 * n2 / 12.0 * ((n + 1.0) - ties / (n * (n - 1.0)));
    if var <= 0.0 {
        return None;
    }
    let diff = u - n1 * n2 / 2.0;
    let z = (diff.abs() - 0.5).max(0.0).copysign(diff) / var.sqrt();
    let p = erfc(z.abs() / std::f64::consts::SQRT_2).min(1.0);
    Some(UTest { u, z, p })
}

/// The median of `values` (`None` when empty).
pub fn median(values: &[f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    Some(if v.len() % 2 == 1 { v[m] } else { (v[m - 1] + v[m]) / 2.0 })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, eps: f64) -> bool {
        (a - b).abs() < eps
    }

    #[test]
    fn separated_samples_match_scipy() {
        // scipy.stats.mannwhitneyu([1..5], [6..10], method="asymptotic"): U=0, p=0.01219.
        let t = mann_whitney(&[1.0, 2.0, 3.0, 4.0, 5.0], &[6.0, 7.0, 8.0, 9.0, 10.0]).unwrap();
        assert_eq!(t.u, 0.0);
        assert!(close(t.z, -2.5067, 1e-3), "{t:?}");
        assert!(close(t.p, 0.01219, 1e-4), "{t:?}");
        let back = mann_whitney(&[6.0, 7.0, 8.0, 9.0, 10.0], &[1.0, 2.0, 3.0, 4.0, 5.0]).unwrap();
        assert_eq!(back.u, 25.0);
        assert!(close(back.p, t.p, 1e-12), "two-sided: the same p either way");
    }

    #[test]
    fn ties_are_corrected() {
        // By hand: U=3, two groups of three ties (48), var=16/12*(9-48/56), z=-4.5/3.295,
        // p=0.1720 (what scipy's asymptotic method gives).
        let t = mann_whitney(&[1.0, 2.0, 2.0, 3.0], &[2.0, 3.0, 3.0, 4.0]).unwrap();
        assert_eq!(t.u, 3.0);
        assert!(close(t.z, -1.3657, 1e-3), "{t:?}");
        assert!(close(t.p, 0.1720, 1e-3), "{t:?}");
        let (r, ties) = ranks(&[1.0, 2.0, 2.0, 3.0]);
        assert_eq!(r, vec![1.0, 2.5, 2.5, 4.0]);
        assert_eq!(ties, 6.0);
    }

    #[test]
    fn same_samples_give_no_evidence() {
        let t = mann_whitney(&[1.0, 2.0, 3.0], &[1.0, 2.0, 3.0]).unwrap();
        assert_eq!(t.u, 4.5);
        assert!(close(t.p, 1.0, 1e-9), "{t:?}");
        assert_eq!(mann_whitney(&[], &[1.0]), None);
        assert_eq!(mann_whitney(&[2.0, 2.0], &[2.0]), None, "no spread");
    }

    #[test]
    fn erfc_and_median() {
        assert!(close(erfc(0.0), 1.0, 1e-7));
        assert!(close(erfc(1.0), 0.157_299_2, 1e-6));
        assert!(close(erfc(-1.0), 1.842_700_8, 1e-6));
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&[]), None);
        // The crawl rule's durations: one, and an even count of whole milliseconds.
        assert_eq!(median(&[52_000.0]), Some(52_000.0));
        assert_eq!(median(&[40.0, 10.0, 20.0, 30.0]), Some(25.0));
    }
}
