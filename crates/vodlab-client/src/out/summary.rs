//! The microsecond histogram every figure is kept in, and its percentile
//! summary: the leaf that the run's metrics ([`crate::out::metrics`]), the
//! players' aggregate and the QUIC figures share.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Microsecond histogram up to one hour, 3 significant digits.
pub fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("valid bounds")
}

/// Records `us` microseconds, clamped into range.
pub fn record(h: &mut Histogram<u64>, us: u64) {
    let _ = h.record(us.clamp(1, 3_600_000_000));
}

/// Percentile summary of a histogram, in milliseconds (or seconds where named).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Samples.
    pub count: u64,
    /// Smallest.
    pub min: f64,
    /// Mean.
    pub mean: f64,
    /// 25th percentile.
    pub p25: f64,
    /// Median.
    pub p50: f64,
    /// 75th percentile.
    pub p75: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 95th percentile.
    pub p95: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
    /// Largest.
    pub max: f64,
    /// Interquartile range p75 - p25 (as the BBC study reports).
    pub iqr: f64,
}

impl Summary {
    /// Summarises a microsecond histogram, dividing values by `scale`
    /// (1000 for milliseconds, 1e6 for seconds).
    pub fn of(h: &Histogram<u64>, scale: f64) -> Self {
        if h.is_empty() {
            return Self::default();
        }
        let q = |p: f64| h.value_at_quantile(p) as f64 / scale;
        Self {
            count: h.len(),
            min: h.min() as f64 / scale,
            mean: h.mean() / scale,
            p25: q(0.25),
            p50: q(0.50),
            p75: q(0.75),
            p90: q(0.90),
            p95: q(0.95),
            p99: q(0.99),
            p999: q(0.999),
            max: h.max() as f64 / scale,
            iqr: q(0.75) - q(0.25),
        }
    }
}
