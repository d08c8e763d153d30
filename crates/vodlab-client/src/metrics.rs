//! Bounded, mergeable statistics: HdrHistograms and fixed-width time bins,
//! never a sample per request.

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use serde::Serialize;

use crate::http::ErrorKind;

/// Microsecond histogram up to one hour, 3 significant digits.
pub fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("valid bounds")
}

/// Records `us` microseconds, clamped into range.
pub fn record(h: &mut Histogram<u64>, us: u64) {
    let _ = h.record(us.clamp(1, 3_600_000_000));
}

/// Percentile summary of a histogram, in milliseconds (or seconds where named).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
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

/// Quantiles at which [`cdf`] samples a distribution.
const CDF_QUANTILES: [f64; 56] = {
    let mut q = [0.0; 56];
    let mut i = 0;
    while i <= 50 {
        q[i] = i as f64 / 50.0;
        i += 1;
    }
    // a finer tail: 0.99, 0.995, 0.999, 0.9999, then the max again for a flat end
    q[50] = 0.99;
    q[51] = 0.995;
    q[52] = 0.999;
    q[53] = 0.9999;
    q[54] = 1.0;
    q[55] = 1.0;
    q
};

/// The distribution as `[quantile, value]` pairs (value divided by `scale`),
/// 2 % apart plus a finer tail: enough to draw a CDF, bounded in size.
pub fn cdf(h: &Histogram<u64>, scale: f64) -> Vec<[f64; 2]> {
    if h.is_empty() {
        return Vec::new();
    }
    let mut out: Vec<[f64; 2]> = Vec::with_capacity(CDF_QUANTILES.len());
    let mut qs = CDF_QUANTILES.to_vec();
    qs.sort_by(f64::total_cmp);
    qs.dedup();
    for q in qs {
        let v = if q == 0.0 {
            h.min()
        } else {
            h.value_at_quantile(q)
        } as f64
            / scale;
        out.push([q, v]);
    }
    out
}

/// Figures for one client class (or all of them).
#[derive(Debug, Clone)]
pub struct ClassMetrics {
    /// Send to last byte, µs (measured sessions).
    pub response: Histogram<u64>,
    /// Send to first byte, µs.
    pub ttfb: Histogram<u64>,
    /// Scheduled send time to last byte, µs (no coordinated omission).
    pub from_schedule: Histogram<u64>,
    /// Session start to playback start, µs.
    pub startup: Histogram<u64>,
    /// Measured sessions.
    pub sessions: u64,
    /// Measured sessions that failed.
    pub failed: u64,
    /// Measured sessions with at least one stall.
    pub stalled_sessions: u64,
    /// Stalls in measured sessions.
    pub stalls: u64,
    /// Stall time in measured sessions, seconds.
    pub stall_s: f64,
    /// Completed requests of measured sessions.
    pub requests: u64,
    /// Body bytes of those requests.
    pub bytes: u64,
}

impl Default for ClassMetrics {
    fn default() -> Self {
        Self {
            response: histogram(),
            ttfb: histogram(),
            from_schedule: histogram(),
            startup: histogram(),
            sessions: 0,
            failed: 0,
            stalled_sessions: 0,
            stalls: 0,
            stall_s: 0.0,
            requests: 0,
            bytes: 0,
        }
    }
}

impl ClassMetrics {
    /// Adds another's figures.
    pub fn merge(&mut self, o: &ClassMetrics) {
        self.response.add(&o.response).expect("same bounds");
        self.ttfb.add(&o.ttfb).expect("same bounds");
        self.from_schedule
            .add(&o.from_schedule)
            .expect("same bounds");
        self.startup.add(&o.startup).expect("same bounds");
        self.sessions += o.sessions;
        self.failed += o.failed;
        self.stalled_sessions += o.stalled_sessions;
        self.stalls += o.stalls;
        self.stall_s += o.stall_s;
        self.requests += o.requests;
        self.bytes += o.bytes;
    }
}

/// Counters per fixed-width time bin (all sessions, ramps included).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Bin {
    /// Requests completed in the bin.
    pub completed_requests: u64,
    /// Body bytes of requests completed in the bin.
    pub completed_bytes: u64,
    /// Sessions started.
    pub started: u64,
    /// Sessions that ended successfully.
    pub completed: u64,
    /// Sessions that failed.
    pub failed: u64,
}

/// Time-binned counters with a fixed bin width.
#[derive(Debug, Clone)]
pub struct Bins {
    /// Width of a bin in seconds.
    pub width_s: f64,
    /// The bins, from the run start.
    pub bins: Vec<Bin>,
}

impl Bins {
    /// Empty series.
    pub fn new(width_s: f64) -> Self {
        Self {
            width_s,
            bins: Vec::new(),
        }
    }

    /// The bin holding time `t_s`.
    pub fn at(&mut self, t_s: f64) -> &mut Bin {
        let i = (t_s.max(0.0) / self.width_s) as usize;
        if self.bins.len() <= i {
            self.bins.resize(i + 1, Bin::default());
        }
        &mut self.bins[i]
    }

    /// Requests and bytes completed within `[from, to)`, pro-rating the edge bins.
    pub fn completed_between(&self, from: f64, to: f64) -> (f64, f64) {
        let (mut req, mut bytes) = (0.0, 0.0);
        for (i, b) in self.bins.iter().enumerate() {
            let lo = i as f64 * self.width_s;
            let hi = lo + self.width_s;
            let overlap = (hi.min(to) - lo.max(from)).max(0.0) / self.width_s;
            req += b.completed_requests as f64 * overlap;
            bytes += b.completed_bytes as f64 * overlap;
        }
        (req, bytes)
    }
}

/// Error counts by type.
#[derive(Debug, Clone, Default)]
pub struct Errors(pub BTreeMap<ErrorKind, u64>);

impl Errors {
    /// Counts one.
    pub fn add(&mut self, k: ErrorKind) {
        *self.0.entry(k).or_default() += 1;
    }

    /// Count of one kind.
    pub fn get(&self, k: ErrorKind) -> u64 {
        self.0.get(&k).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bins_prorate_edges() {
        let mut b = Bins::new(1.0);
        b.at(0.5).completed_bytes = 100;
        b.at(1.5).completed_bytes = 100;
        b.at(2.5).completed_bytes = 100;
        let (_, bytes) = b.completed_between(0.5, 2.5);
        assert!((bytes - 200.0).abs() < 1e-9);
    }

    #[test]
    fn summary_quartiles() {
        let mut h = histogram();
        for v in 1..=1000u64 {
            record(&mut h, v * 1000);
        }
        let s = Summary::of(&h, 1000.0);
        assert!((s.p50 - 500.0).abs() < 1.0, "{s:?}");
        assert!((s.iqr - 500.0).abs() < 2.0, "{s:?}");
    }
}
