//! Means with 95 % confidence intervals from the t-distribution, for points
//! repeated a few times (thesis practice: report mean and interval, not one run).

use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, StudentsT};

/// Mean of repeated measurements with a two-sided 95 % confidence interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MeanCi {
    /// Number of measurements.
    pub n: usize,
    /// Sample mean.
    pub mean: f64,
    /// Sample standard deviation (n - 1 in the denominator); 0 for one sample.
    pub sd: f64,
    /// Half width of the 95 % interval, `t(0.975, n-1) * sd / sqrt(n)`;
    /// `None` for a single measurement (no interval can be given).
    pub half_width: Option<f64>,
}

impl MeanCi {
    /// Lower end of the interval (the mean when there is none).
    pub fn low(&self) -> f64 {
        self.mean - self.half_width.unwrap_or(0.0)
    }
    /// Upper end of the interval (the mean when there is none).
    pub fn high(&self) -> f64 {
        self.mean + self.half_width.unwrap_or(0.0)
    }
}

/// Two-sided quantile of Student's t with `df` degrees of freedom at `level`
/// (0.95 gives t(0.975, df)).
pub fn t_quantile(level: f64, df: usize) -> f64 {
    assert!(df >= 1, "t needs at least one degree of freedom");
    assert!((0.0..1.0).contains(&level), "level must be in [0, 1)");
    let t = StudentsT::new(0.0, 1.0, df as f64).expect("df >= 1 is valid");
    t.inverse_cdf(0.5 + level / 2.0)
}

/// Mean and 95 % interval of `xs`; `None` when `xs` is empty.
pub fn mean_ci(xs: &[f64]) -> Option<MeanCi> {
    let n = xs.len();
    if n == 0 {
        return None;
    }
    let mean = xs.iter().sum::<f64>() / n as f64;
    if n == 1 {
        return Some(MeanCi {
            n,
            mean,
            sd: 0.0,
            half_width: None,
        });
    }
    let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    let sd = var.sqrt();
    Some(MeanCi {
        n,
        mean,
        sd,
        half_width: Some(t_quantile(0.95, n - 1) * sd / (n as f64).sqrt()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn t_quantiles_match_tables() {
        // two-sided 95 % values from any statistics table
        for (df, want) in [(1, 12.706), (2, 4.303), (4, 2.776), (9, 2.262), (29, 2.045)] {
            let got = t_quantile(0.95, df);
            assert!((got - want).abs() < 1e-3, "df {df}: {got} vs {want}");
        }
        assert!((t_quantile(0.95, 100_000) - 1.960).abs() < 1e-3);
    }

    #[test]
    fn interval_of_known_samples() {
        let ci = mean_ci(&[10.0, 12.0, 14.0]).unwrap();
        assert_eq!(ci.n, 3);
        assert!((ci.mean - 12.0).abs() < 1e-12);
        assert!((ci.sd - 2.0).abs() < 1e-12);
        // 4.303 * 2 / sqrt(3)
        assert!((ci.half_width.unwrap() - 4.9687).abs() < 1e-3);
        assert!(ci.low() < 12.0 && ci.high() > 12.0);
        let one = mean_ci(&[5.0]).unwrap();
        assert_eq!(one.half_width, None);
        assert_eq!((one.low(), one.high()), (5.0, 5.0));
        assert!(mean_ci(&[]).is_none());
        let same = mean_ci(&[3.0, 3.0, 3.0, 3.0]).unwrap();
        assert_eq!(same.half_width, Some(0.0));
    }

    #[test]
    fn coverage_is_near_95_percent() {
        // draws from a known normal (Box-Muller over a fixed LCG): the interval
        // of 5 samples must cover the true mean about 95 % of the time
        let mut s: u64 = 42;
        let mut uni = || {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 11) as f64 + 0.5) / (1u64 << 53) as f64
        };
        let (trials, mut covered) = (4000, 0);
        for _ in 0..trials {
            let xs: Vec<f64> = (0..5)
                .map(|_| {
                    let (u1, u2) = (uni(), uni());
                    100.0 + 7.0 * (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
                })
                .collect();
            let ci = mean_ci(&xs).unwrap();
            covered += usize::from(ci.low() <= 100.0 && 100.0 <= ci.high());
        }
        let p = covered as f64 / trials as f64;
        assert!((0.935..0.965).contains(&p), "coverage {p}");
    }
}
