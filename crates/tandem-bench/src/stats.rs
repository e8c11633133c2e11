//! Statistics of repeated measurements: median, a distribution-free
//! confidence interval for it, and weighted least-squares line fits.

use serde::Serialize;

/// Level of the confidence intervals reported everywhere (Ben Fredj and
/// Renault quote intervals of at least 90%).
pub const CI_LEVEL: f64 = 0.90;

/// The spread (CI width relative to the median) above which a figure is
/// flagged as unreliable.
pub const WIDE_SPREAD: f64 = 0.20;

/// A summary of repeated measurements of one quantity.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Summary {
    /// Number of measurements.
    pub n: usize,
    pub median: f64,
    /// The 90% confidence interval of the median.
    pub lo: f64,
    pub hi: f64,
    pub min: f64,
    pub max: f64,
    pub mean: f64,
}

impl Summary {
    /// Summarises `values` (non-finite values are dropped); `None` if none
    /// is left.
    pub fn of(values: &[f64]) -> Option<Summary> {
        let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let (lo, hi) = median_ci_sorted(&v, CI_LEVEL);
        Some(Summary {
            n: v.len(),
            median: median_sorted(&v),
            lo,
            hi,
            min: v[0],
            max: v[v.len() - 1],
            mean: v.iter().sum::<f64>() / v.len() as f64,
        })
    }

    /// A single exact value (n = 1, no spread).
    pub fn exact(x: f64) -> Summary {
        Summary {
            n: 1,
            median: x,
            lo: x,
            hi: x,
            min: x,
            max: x,
            mean: x,
        }
    }

    /// Width of the confidence interval relative to the median's size.
    pub fn spread(&self) -> f64 {
        if self.median == 0.0 {
            if self.hi == self.lo {
                0.0
            } else {
                f64::INFINITY
            }
        } else {
            (self.hi - self.lo) / self.median.abs()
        }
    }

    pub fn is_wide(&self) -> bool {
        self.spread() > WIDE_SPREAD
    }
}

/// The median of sorted values (the mean of the middle two for an even count).
pub fn median_sorted(v: &[f64]) -> f64 {
    let n = v.len();
    assert!(n > 0, "median of nothing");
    if n % 2 == 1 {
        v[n / 2]
    } else {
        0.5 * (v[n / 2 - 1] + v[n / 2])
    }
}

/// P(X <= k) for X ~ Binomial(n, 1/2).
fn binomial_half_cdf(n: usize, k: usize) -> f64 {
    // Sum of C(n, i) / 2^n in logs to stay finite for large n.
    let ln2n = n as f64 * std::f64::consts::LN_2;
    let mut ln_c = 0.0f64; // ln C(n, 0)
    let mut total = 0.0;
    for i in 0..=k.min(n) {
        if i > 0 {
            ln_c += ((n - i + 1) as f64).ln() - (i as f64).ln();
        }
        total += (ln_c - ln2n).exp();
    }
    total.min(1.0)
}

/// A distribution-free confidence interval of the median of sorted values:
/// the order statistics x(j) and x(n+1-j) (1-based) with the largest j whose
/// coverage 1 - 2 P(B(n, 1/2) <= j-1) is at least `level`. With too few
/// values for that level it is the whole range.
pub fn median_ci_sorted(v: &[f64], level: f64) -> (f64, f64) {
    let n = v.len();
    assert!(n > 0, "confidence interval of nothing");
    let mut j = 1;
    while j < n.div_ceil(2) {
        let next = j + 1;
        let coverage = 1.0 - 2.0 * binomial_half_cdf(n, next - 1);
        if coverage >= level {
            j = next;
        } else {
            break;
        }
    }
    (v[j - 1], v[n - j])
}

/// A fitted straight line y = a + b x.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct LineFit {
    pub a: f64,
    pub b: f64,
    /// Coefficient of determination (weighted).
    pub r2: f64,
}

/// Weighted least squares of y = a + b x; `None` with fewer than two
/// distinct x.
pub fn fit_line(points: &[(f64, f64)], weights: &[f64]) -> Option<LineFit> {
    assert_eq!(points.len(), weights.len());
    let sw: f64 = weights.iter().sum();
    if points.len() < 2 || sw <= 0.0 {
        return None;
    }
    let mx = points
        .iter()
        .zip(weights)
        .map(|(p, w)| w * p.0)
        .sum::<f64>()
        / sw;
    let my = points
        .iter()
        .zip(weights)
        .map(|(p, w)| w * p.1)
        .sum::<f64>()
        / sw;
    let sxx: f64 = points
        .iter()
        .zip(weights)
        .map(|(p, w)| w * (p.0 - mx).powi(2))
        .sum();
    let sxy: f64 = points
        .iter()
        .zip(weights)
        .map(|(p, w)| w * (p.0 - mx) * (p.1 - my))
        .sum();
    if sxx <= 0.0 || !sxx.is_finite() {
        return None;
    }
    let b = sxy / sxx;
    let a = my - b * mx;
    let ss_tot: f64 = points
        .iter()
        .zip(weights)
        .map(|(p, w)| w * (p.1 - my).powi(2))
        .sum();
    let ss_res: f64 = points
        .iter()
        .zip(weights)
        .map(|(p, w)| w * (p.1 - a - b * p.0).powi(2))
        .sum();
    let r2 = if ss_tot > 0.0 {
        1.0 - ss_res / ss_tot
    } else {
        1.0
    };
    Some(LineFit { a, b, r2 })
}

/// Least squares minimising relative errors (weights 1/y^2): the right fit
/// for times spanning several decades, where small messages matter as much
/// as large ones.
pub fn fit_line_relative(points: &[(f64, f64)]) -> Option<LineFit> {
    let w: Vec<f64> = points
        .iter()
        .map(|p| if p.1 != 0.0 { 1.0 / (p.1 * p.1) } else { 0.0 })
        .collect();
    fit_line(points, &w)
}

/// The median of |predicted - measured| / measured (0 with no pairs).
pub fn median_relative_error(pairs: impl IntoIterator<Item = (f64, f64)>) -> f64 {
    let mut e: Vec<f64> = pairs
        .into_iter()
        .map(|(pred, meas)| ((pred - meas) / meas).abs())
        .collect();
    if e.is_empty() {
        return 0.0;
    }
    e.sort_by(f64::total_cmp);
    median_sorted(&e)
}

/// Largest |predicted - measured| / measured.
pub fn max_relative_error(pairs: impl IntoIterator<Item = (f64, f64)>) -> f64 {
    pairs
        .into_iter()
        .map(|(pred, meas)| ((pred - meas) / meas).abs())
        .fold(0.0, f64::max)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn median(values: &[f64]) -> f64 {
        let mut v = values.to_vec();
        v.sort_by(f64::total_cmp);
        median_sorted(&v)
    }

    #[test]
    fn median_odd_even() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        assert_eq!(median(&[7.0]), 7.0);
    }

    #[test]
    fn binomial_cdf_known_values() {
        // n = 10: P(X <= 1) = 11/1024, P(X <= 2) = 56/1024.
        assert!((binomial_half_cdf(10, 1) - 11.0 / 1024.0).abs() < 1e-12);
        assert!((binomial_half_cdf(10, 2) - 56.0 / 1024.0).abs() < 1e-12);
        assert!((binomial_half_cdf(10, 10) - 1.0).abs() < 1e-12);
    }

    #[test]
    fn median_ci_order_statistics() {
        let v: Vec<f64> = (1..=10).map(f64::from).collect();
        // n = 10: j = 2 covers 1 - 2*11/1024 = 97.9%, j = 3 covers
        // 1 - 2*56/1024 = 89.1% < 90%: the interval is [x(2), x(9)].
        assert_eq!(median_ci_sorted(&v, 0.90), (2.0, 9.0));
        // 80% allows j = 3.
        assert_eq!(median_ci_sorted(&v, 0.80), (3.0, 8.0));
        // Too few values: the whole range.
        assert_eq!(median_ci_sorted(&[1.0, 2.0, 3.0], 0.90), (1.0, 3.0));
        assert_eq!(median_ci_sorted(&[5.0], 0.90), (5.0, 5.0));
        // Large n: the interval narrows around the median.
        let v: Vec<f64> = (1..=1001).map(f64::from).collect();
        let (lo, hi) = median_ci_sorted(&v, 0.90);
        // Normal approximation: 501 -+ 1.645 * sqrt(1001)/2 = 501 -+ 26.
        assert!((470.0..=480.0).contains(&lo), "{lo}");
        assert!((522.0..=532.0).contains(&hi), "{hi}");
    }

    #[test]
    fn ci_covers_the_true_median_about_90_percent() {
        // Synthetic: samples of 15 from a skewed distribution with known
        // median; a deterministic generator, 2000 trials.
        let mut state = 12345u64;
        let mut uniform = || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((state >> 11) as f64 + 0.5) / (1u64 << 53) as f64
        };
        let true_median = std::f64::consts::LN_2; // of Exp(1)
        let mut covered = 0;
        for _ in 0..2000 {
            let xs: Vec<f64> = (0..15).map(|_| -uniform().ln()).collect();
            let s = Summary::of(&xs).unwrap();
            if s.lo <= true_median && true_median <= s.hi {
                covered += 1;
            }
        }
        // The interval is conservative (n = 15: 96.5% exact coverage).
        assert!(covered >= 1800, "covered {covered} of 2000");
    }

    #[test]
    fn summary_and_spread() {
        let s = Summary::of(&[10.0, 11.0, 9.0, 10.0, f64::NAN]).unwrap();
        assert_eq!(s.n, 4);
        assert_eq!(s.median, 10.0);
        assert_eq!((s.min, s.max), (9.0, 11.0));
        assert!((s.spread() - 0.2).abs() < 1e-12);
        assert!(!s.is_wide());
        let w = Summary::of(&[1.0, 2.0, 3.0]).unwrap();
        assert!(w.is_wide());
        assert!(Summary::of(&[]).is_none());
    }

    #[test]
    fn line_fit_exact_and_noisy() {
        // y = 5 + 2x exactly.
        let pts: Vec<(f64, f64)> = (0..10).map(|i| (i as f64, 5.0 + 2.0 * i as f64)).collect();
        let f = fit_line(&pts, &[1.0; 10]).unwrap();
        assert!((f.a - 5.0).abs() < 1e-9 && (f.b - 2.0).abs() < 1e-9);
        assert!((f.r2 - 1.0).abs() < 1e-12);
        // Hockney-like data over decades: l = 10 us, 1/b = 1 ns/byte with
        // +-3% alternating noise; the relative fit recovers both.
        let pts: Vec<(f64, f64)> = (0..22)
            .map(|k| {
                let m = (1u64 << k) as f64;
                let noise = if k % 2 == 0 { 1.03 } else { 0.97 };
                (m, (10e-6 + m * 1e-9) * noise)
            })
            .collect();
        let f = fit_line_relative(&pts).unwrap();
        assert!((f.a - 10e-6).abs() / 10e-6 < 0.05, "l = {}", f.a);
        assert!((f.b - 1e-9).abs() / 1e-9 < 0.05, "1/b = {}", f.b);
        let err = max_relative_error(pts.iter().map(|&(m, t)| (f.a + f.b * m, t)));
        assert!(err < 0.07, "{err}");
        assert!(fit_line(&[(1.0, 1.0)], &[1.0]).is_none());
        assert!(
            (median_relative_error([(11.0, 10.0), (5.0, 10.0), (10.0, 10.0)]) - 0.1).abs() < 1e-12
        );
        assert!(fit_line(&[(1.0, 1.0), (1.0, 2.0)], &[1.0, 1.0]).is_none());
    }
}
