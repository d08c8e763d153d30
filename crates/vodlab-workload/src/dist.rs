//! Probability distributions used by workload specifications.
//!
//! Every distribution is sampled by inverse transform from one uniform
//! variate, so a workload depends only on the seed and the order of draws.

use rand::Rng;
use serde::{Deserialize, Serialize};

use crate::error::Problems;

/// A one-dimensional distribution of non-negative values (seconds, fractions).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Distribution {
    /// Empirical CDF given as `(cumulative probability, value)` points,
    /// linearly interpolated between points.
    Empirical {
        /// `[p, value]` pairs; `p` non-decreasing in `[0, 1]`, last `p` = 1,
        /// values non-decreasing.
        points: Vec<[f64; 2]>,
        /// Value at `p = 0`; required when the first point has `p > 0`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        min: Option<f64>,
    },
    /// Always the same value.
    Constant {
        /// The value.
        value: f64,
    },
    /// Uniform between `min` and `max`.
    Uniform {
        /// Lower bound.
        min: f64,
        /// Upper bound.
        max: f64,
    },
    /// Exponential with the given mean, optionally clamped.
    Exponential {
        /// Mean of the unclamped distribution.
        mean: f64,
        /// Lower clamp.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        min: Option<f64>,
        /// Upper clamp.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max: Option<f64>,
    },
    /// Log-normal with the given median and shape `sigma`, optionally clamped.
    Lognormal {
        /// Median (`exp(mu)`).
        median: f64,
        /// Standard deviation of the underlying normal.
        sigma: f64,
        /// Lower clamp.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        min: Option<f64>,
        /// Upper clamp.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max: Option<f64>,
    },
}

impl Distribution {
    /// Checks the parameters, recording each problem under `path`.
    pub fn validate(&self, path: &str, problems: &mut Problems) {
        let finite_nonneg = |v: f64, key: &str, problems: &mut Problems| {
            if !v.is_finite() || v < 0.0 {
                problems.push(
                    format!("{path}.{key}"),
                    format!("must be a finite number >= 0, got {v}"),
                );
            }
        };
        match self {
            Distribution::Empirical { points, min } => {
                if points.is_empty() {
                    problems.push(format!("{path}.points"), "needs at least one point");
                    return;
                }
                let mut prev: Option<[f64; 2]> = None;
                for (i, &[p, v]) in points.iter().enumerate() {
                    let at = format!("{path}.points[{i}]");
                    if !(0.0..=1.0).contains(&p) {
                        problems.push(
                            at.clone(),
                            format!("cumulative probability {p} is outside [0, 1]"),
                        );
                    }
                    if !v.is_finite() || v < 0.0 {
                        problems.push(at.clone(), format!("value {v} must be finite and >= 0"));
                    }
                    if let Some([pp, pv]) = prev {
                        if p < pp {
                            problems.push(
                                at.clone(),
                                format!("CDF not monotone: probability {p} after {pp}"),
                            );
                        }
                        if v < pv {
                            problems.push(
                                at.clone(),
                                format!("CDF not monotone: value {v} after {pv}"),
                            );
                        }
                    }
                    prev = Some([p, v]);
                }
                let [last_p, _] = points[points.len() - 1];
                if (last_p - 1.0).abs() > 1e-9 {
                    problems.push(
                        format!("{path}.points[{}]", points.len() - 1),
                        format!("the last cumulative probability must be 1, got {last_p}"),
                    );
                }
                let [p0, v0] = points[0];
                match min {
                    Some(m) => {
                        finite_nonneg(*m, "min", problems);
                        if *m > v0 {
                            problems.push(
                                format!("{path}.min"),
                                format!("min {m} is above the first point's value {v0}"),
                            );
                        }
                    }
                    None if p0 > 0.0 => problems.push(
                        format!("{path}.min"),
                        format!(
                            "the first point has probability {p0} > 0; give `min`, the value at probability 0"
                        ),
                    ),
                    None => {}
                }
            }
            Distribution::Constant { value } => finite_nonneg(*value, "value", problems),
            Distribution::Uniform { min, max } => {
                finite_nonneg(*min, "min", problems);
                finite_nonneg(*max, "max", problems);
                if max < min {
                    problems.push(
                        format!("{path}.max"),
                        format!("max {max} is below min {min}"),
                    );
                }
            }
            Distribution::Exponential { mean, min, max } => {
                if !mean.is_finite() || *mean <= 0.0 {
                    problems.push(format!("{path}.mean"), format!("must be > 0, got {mean}"));
                }
                check_clamps(path, *min, *max, problems);
            }
            Distribution::Lognormal {
                median,
                sigma,
                min,
                max,
            } => {
                if !median.is_finite() || *median <= 0.0 {
                    problems.push(
                        format!("{path}.median"),
                        format!("must be > 0, got {median}"),
                    );
                }
                if !sigma.is_finite() || *sigma < 0.0 {
                    problems.push(
                        format!("{path}.sigma"),
                        format!("must be >= 0, got {sigma}"),
                    );
                }
                check_clamps(path, *min, *max, problems);
            }
        }
    }

    /// The value at cumulative probability `u` in `[0, 1)` (inverse CDF).
    pub fn quantile(&self, u: f64) -> f64 {
        let u = u.clamp(0.0, 1.0);
        match self {
            Distribution::Empirical { points, min } => empirical_quantile(points, *min, u),
            Distribution::Constant { value } => *value,
            Distribution::Uniform { min, max } => min + (max - min) * u,
            Distribution::Exponential { mean, min, max } => {
                let v = -mean * (1.0 - u).max(f64::MIN_POSITIVE).ln();
                clamp(v, *min, *max)
            }
            Distribution::Lognormal {
                median,
                sigma,
                min,
                max,
            } => {
                let z = standard_normal_quantile(u.clamp(1e-12, 1.0 - 1e-12));
                clamp(median * (sigma * z).exp(), *min, *max)
            }
        }
    }

    /// Draws one value.
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> f64 {
        self.quantile(rng.random::<f64>())
    }

    /// The median (quantile 0.5).
    pub fn median(&self) -> f64 {
        self.quantile(0.5)
    }

    /// The mean, exact for empirical, constant and uniform distributions and
    /// numerically integrated for the clamped analytic ones.
    pub fn mean(&self) -> f64 {
        match self {
            Distribution::Empirical { points, min } => {
                let mut sum = 0.0;
                let mut prev = [0.0, min.unwrap_or(points[0][1])];
                for &pt in points {
                    sum += (pt[0] - prev[0]) * (pt[1] + prev[1]) / 2.0;
                    prev = pt;
                }
                sum
            }
            Distribution::Constant { value } => *value,
            Distribution::Uniform { min, max } => (min + max) / 2.0,
            _ => {
                let n = 100_000;
                (0..n)
                    .map(|i| self.quantile((i as f64 + 0.5) / n as f64))
                    .sum::<f64>()
                    / n as f64
            }
        }
    }
}

fn check_clamps(path: &str, min: Option<f64>, max: Option<f64>, problems: &mut Problems) {
    if let (Some(lo), Some(hi)) = (min, max) {
        if hi < lo {
            problems.push(format!("{path}.max"), format!("max {hi} is below min {lo}"));
        }
    }
    for (key, v) in [("min", min), ("max", max)] {
        if let Some(v) = v {
            if !v.is_finite() || v < 0.0 {
                problems.push(
                    format!("{path}.{key}"),
                    format!("must be finite and >= 0, got {v}"),
                );
            }
        }
    }
}

fn clamp(v: f64, min: Option<f64>, max: Option<f64>) -> f64 {
    let v = min.map_or(v, |m| v.max(m));
    max.map_or(v, |m| v.min(m))
}

fn empirical_quantile(points: &[[f64; 2]], min: Option<f64>, u: f64) -> f64 {
    let mut prev = [0.0, min.unwrap_or(points[0][1])];
    for &pt in points {
        if u <= pt[0] {
            let span = pt[0] - prev[0];
            if span <= 0.0 {
                return pt[1];
            }
            return prev[1] + (pt[1] - prev[1]) * (u - prev[0]) / span;
        }
        prev = pt;
    }
    prev[1]
}

/// Acklam's rational approximation of the standard normal quantile
/// (relative error below 1.2e-9), refined by one Halley step.
fn standard_normal_quantile(p: f64) -> f64 {
    const A: [f64; 6] = [
        -3.969_683_028_665_376e1,
        2.209_460_984_245_205e2,
        -2.759_285_104_469_687e2,
        1.383_577_518_672_69e2,
        -3.066_479_806_614_716e1,
        2.506_628_277_459_239,
    ];
    const B: [f64; 5] = [
        -5.447_609_879_822_406e1,
        1.615_858_368_580_409e2,
        -1.556_989_798_598_866e2,
        6.680_131_188_771_972e1,
        -1.328_068_155_288_572e1,
    ];
    const C: [f64; 6] = [
        -7.784_894_002_430_293e-3,
        -3.223_964_580_411_365e-1,
        -2.400_758_277_161_838,
        -2.549_732_539_343_734,
        4.374_664_141_464_968,
        2.938_163_982_698_783,
    ];
    const D: [f64; 4] = [
        7.784_695_709_041_462e-3,
        3.224_671_290_700_398e-1,
        2.445_134_137_142_996,
        3.754_408_661_907_416,
    ];
    let lo = 0.02425;
    if p < lo {
        let q = (-2.0 * p.ln()).sqrt();
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    } else if p <= 1.0 - lo {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    } else {
        let q = (-2.0 * (1.0 - p).ln()).sqrt();
        -(((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    }
}

/// Inverse-CDF sampler over a finite set of weights (ranks, classes, mixes).
#[derive(Debug, Clone)]
pub struct WeightedIndex {
    cumulative: Vec<f64>,
}

impl WeightedIndex {
    /// Builds a sampler; weights must be finite, non-negative and not all zero.
    pub fn new(weights: impl IntoIterator<Item = f64>) -> Option<Self> {
        let mut total = 0.0;
        let mut cumulative = Vec::new();
        for w in weights {
            if !w.is_finite() || w < 0.0 {
                return None;
            }
            total += w;
            cumulative.push(total);
        }
        if total <= 0.0 {
            return None;
        }
        for c in &mut cumulative {
            *c /= total;
        }
        Some(Self { cumulative })
    }

    /// Zipf weights `rank^-alpha` for ranks `1..=n`.
    pub fn zipf(n: usize, alpha: f64) -> Option<Self> {
        Self::new((1..=n).map(|r| (r as f64).powf(-alpha)))
    }

    /// Number of outcomes.
    pub fn len(&self) -> usize {
        self.cumulative.len()
    }

    /// True when there are no outcomes (never, for a built sampler).
    pub fn is_empty(&self) -> bool {
        self.cumulative.is_empty()
    }

    /// Probability of outcome `i`.
    pub fn probability(&self, i: usize) -> f64 {
        let lo = if i == 0 { 0.0 } else { self.cumulative[i - 1] };
        self.cumulative[i] - lo
    }

    /// Draws an index.
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> usize {
        let u: f64 = rng.random();
        let i = self.cumulative.partition_point(|&c| c <= u);
        i.min(self.cumulative.len() - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    fn cdf() -> Distribution {
        Distribution::Empirical {
            points: vec![[0.5, 10.0], [1.0, 20.0]],
            min: Some(0.0),
        }
    }

    #[test]
    fn empirical_interpolates_linearly() {
        let d = cdf();
        assert_eq!(d.quantile(0.0), 0.0);
        assert_eq!(d.quantile(0.25), 5.0);
        assert_eq!(d.quantile(0.5), 10.0);
        assert_eq!(d.quantile(0.75), 15.0);
        assert_eq!(d.quantile(1.0), 20.0);
        assert!((d.mean() - 10.0).abs() < 1e-12);
    }

    #[test]
    fn empirical_sample_mean_matches_exact_mean() {
        let d = cdf();
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let n = 200_000;
        let m: f64 = (0..n).map(|_| d.sample(&mut rng)).sum::<f64>() / n as f64;
        assert!((m - d.mean()).abs() < 0.05, "{m}");
    }

    #[test]
    fn non_monotone_cdf_is_rejected_with_its_index() {
        let d = Distribution::Empirical {
            points: vec![[0.2, 10.0], [0.1, 20.0], [1.0, 5.0]],
            min: Some(0.0),
        };
        let mut p = Problems::default();
        d.validate("catalog.duration", &mut p);
        let text = p.to_string();
        assert!(
            text.contains(
                "catalog.duration.points[1]: CDF not monotone: probability 0.1 after 0.2"
            ),
            "{text}"
        );
        assert!(
            text.contains("catalog.duration.points[2]: CDF not monotone: value 5 after 20"),
            "{text}"
        );
    }

    #[test]
    fn missing_min_is_reported() {
        let d = Distribution::Empirical {
            points: vec![[0.2, 10.0], [1.0, 20.0]],
            min: None,
        };
        let mut p = Problems::default();
        d.validate("x", &mut p);
        assert!(p.to_string().contains("x.min"));
    }

    #[test]
    fn lognormal_median_holds() {
        let d = Distribution::Lognormal {
            median: 100.0,
            sigma: 1.0,
            min: None,
            max: None,
        };
        assert!((d.median() - 100.0).abs() < 1e-6);
        // mean of lognormal = median * exp(sigma^2 / 2)
        assert!((d.mean() / (100.0 * 0.5f64.exp()) - 1.0).abs() < 0.01);
    }

    #[test]
    fn weighted_index_frequencies() {
        let w = WeightedIndex::new([1.0, 3.0]).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let n = 100_000;
        let ones = (0..n).filter(|_| w.sample(&mut rng) == 1).count();
        assert!((ones as f64 / n as f64 - 0.75).abs() < 0.01);
        assert!(WeightedIndex::new([0.0, 0.0]).is_none());
        assert!(WeightedIndex::new([1.0, -1.0]).is_none());
    }
}
