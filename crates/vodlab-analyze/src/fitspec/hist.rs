//! Quantiles in bounded memory for the spec fit.

use std::collections::BTreeMap;

use vodlab_workload::dist::Distribution;

/// Log-binned histogram (200 bins per decade, about 1.2 % wide) with the
/// exact minimum and maximum: quantiles in bounded memory.
#[derive(Debug, Clone, Default)]
pub(super) struct LogHist {
    bins: BTreeMap<i32, u64>,
    zeros: u64,
    pub(super) n: u64,
    min: f64,
    max: f64,
}

const BINS_PER_DECADE: f64 = 200.0;

impl LogHist {
    pub(super) fn add(&mut self, v: f64) {
        if !v.is_finite() || v < 0.0 {
            return;
        }
        if self.n == 0 {
            self.min = v;
            self.max = v;
        }
        self.min = self.min.min(v);
        self.max = self.max.max(v);
        self.n += 1;
        if v == 0.0 {
            self.zeros += 1;
        } else {
            *self
                .bins
                .entry((v.log10() * BINS_PER_DECADE).floor() as i32)
                .or_default() += 1;
        }
    }

    /// The q-quantile (bin centre, clamped to the exact extremes).
    pub(super) fn quantile(&self, q: f64) -> f64 {
        if self.n == 0 {
            return 0.0;
        }
        let want = (q.clamp(0.0, 1.0) * self.n as f64).ceil().max(1.0) as u64;
        if want <= self.zeros {
            return 0.0;
        }
        let mut seen = self.zeros;
        for (b, c) in &self.bins {
            seen += c;
            if seen >= want {
                let v = 10f64.powf((*b as f64 + 0.5) / BINS_PER_DECADE);
                return v.clamp(self.min, self.max);
            }
        }
        self.max
    }

    /// An empirical CDF of 20 points (p = 0.05, 0.10, ..., 1) with
    /// `min`, values clamped to `[lo, hi]` and made non-decreasing.
    pub(super) fn cdf(&self, lo: f64, hi: f64) -> Distribution {
        let mut points = Vec::with_capacity(20);
        let mut last = self.min.clamp(lo, hi);
        for i in 1..=20 {
            let p = i as f64 / 20.0;
            let v = if i == 20 { self.max } else { self.quantile(p) };
            let v = v.clamp(lo, hi).max(last);
            last = v;
            points.push([p, round_sig(v)]);
        }
        let min = round_sig(self.min.clamp(lo, hi)).min(points[0][1]);
        Distribution::Empirical {
            points,
            min: Some(min),
        }
    }
}

/// Rounds to 6 significant digits (a readable spec), never upwards past a
/// bound that matters here (the callers clamp afterwards).
pub(super) fn round_sig(v: f64) -> f64 {
    if v == 0.0 || !v.is_finite() {
        return v;
    }
    // through the decimal text, so the spec shows 0.776464, not 0.7764639999
    format!("{v:.5e}").parse().unwrap_or(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_quantiles_are_within_a_bin() {
        let mut h = LogHist::default();
        for i in 1..=1000 {
            h.add(i as f64);
        }
        let m = h.quantile(0.5);
        assert!((m / 500.0 - 1.0).abs() < 0.015, "{m}");
        assert_eq!(h.quantile(1.0), 1000.0);
        let Distribution::Empirical { points, min } = h.cdf(0.0, 1e9) else {
            panic!()
        };
        assert_eq!(min, Some(1.0));
        assert_eq!(points.len(), 20);
        assert_eq!(points[19], [1.0, 1000.0]);
        assert!(points.windows(2).all(|w| w[0][1] <= w[1][1]));
    }
}
