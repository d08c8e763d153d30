//! dash.js 4.7.4's `ThroughputHistory` with its default
//! `movingAverageMethod: "slidingWindow"` (VOD): the arithmetic mean of the
//! last 4 throughput samples, the window widened by one for each of the
//! last steps that changed the throughput by a factor of 1.3 or more; the
//! latency is the mean of the last 4 latencies. Samples are whole ms as
//! dash.js's `Date` arithmetic gives them (`|| 1`: never 0); a segment that
//! loaded in under 50 ms (`cacheLoadThresholds.video`) counts as a cache
//! hit and is dropped once real samples exist.

use std::collections::VecDeque;

/// Samples kept (`MAX_MEASUREMENTS_TO_KEEP`).
pub const MAX_MEASUREMENTS: usize = 20;
/// Throughput samples averaged for VOD (`AVERAGE_THROUGHPUT_SAMPLE_AMOUNT_VOD`).
pub const THROUGHPUT_SAMPLES: usize = 4;
/// Latency samples averaged (`AVERAGE_LATENCY_SAMPLE_AMOUNT`).
pub const LATENCY_SAMPLES: usize = 4;
/// A step up or down by this factor widens the window
/// (`THROUGHPUT_INCREASE_SCALE`, `THROUGHPUT_DECREASE_SCALE`).
pub const THROUGHPUT_SCALE: f64 = 1.3;
/// Downloads shorter than this are cache hits (`cacheLoadThresholds.video`), ms.
pub const CACHE_LOAD_THRESHOLD_MS: f64 = 50.0;

/// The sliding-window throughput and latency history of one media type.
#[derive(Debug, Clone, Default)]
pub struct ThroughputHistory {
    throughput: VecDeque<f64>,
    latency: VecDeque<f64>,
    has_cached: bool,
}

/// `x || 1` on a whole number of ms.
fn whole_ms(x: f64) -> f64 {
    let r = x.round();
    if r == 0.0 || r.is_nan() {
        1.0
    } else {
        r
    }
}

impl ThroughputHistory {
    /// An empty history.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one media segment's download: time to first byte (dash.js's
    /// latency, `tresponse − trequest`), transfer time after it
    /// (`tfinish − tresponse`, the measure with `useDeadTimeLatency`), both
    /// ms, and the bits received. The sample is `round(bits / transfer)`
    /// kbit/s.
    pub fn push(&mut self, ttfb_ms: f64, transfer_ms: f64, bits: f64) {
        self.push_with_etp(ttfb_ms, transfer_ms, bits, None, 0.0);
    }

    /// [`Self::push`] with the server's CMSD `etp` (kbit/s) of the response
    /// blended into the sample as dash.js 4.7.4's `ThroughputHistory.push`
    /// does when `streaming.cmsd.abr.etpWeightRatio` `weight` is in
    /// (0, 1]: `round(bits / transfer) × (1 − weight) + etp × weight`, not
    /// rounded again ([`crate::core::player::estimate::blend_etp`]).
    pub fn push_with_etp(
        &mut self,
        ttfb_ms: f64,
        transfer_ms: f64,
        bits: f64,
        etp_kbps: Option<f64>,
        weight: f64,
    ) {
        let latency = whole_ms(ttfb_ms);
        let download = whole_ms(transfer_ms);
        let throughput =
            crate::core::player::estimate::blend_etp((bits / download).round(), etp_kbps, weight);
        if download < CACHE_LOAD_THRESHOLD_MS {
            if !self.throughput.is_empty() && !self.has_cached {
                return;
            }
            self.has_cached = true;
        } else if self.has_cached {
            self.throughput.clear();
            self.latency.clear();
            self.has_cached = false;
        }
        self.throughput.push_back(throughput);
        if self.throughput.len() > MAX_MEASUREMENTS {
            self.throughput.pop_front();
        }
        self.latency.push_back(latency);
        if self.latency.len() > MAX_MEASUREMENTS {
            self.latency.pop_front();
        }
    }

    /// Throughput samples held, oldest first, kbit/s.
    pub fn samples(&self) -> impl Iterator<Item = f64> + '_ {
        self.throughput.iter().copied()
    }

    fn throughput_window(&self) -> usize {
        let a = &self.throughput;
        let mut n = THROUGHPUT_SAMPLES;
        if n >= a.len() {
            return a.len();
        }
        for i in 1..THROUGHPUT_SAMPLES {
            let ratio = a[a.len() - i] / a[a.len() - i - 1];
            if ratio >= THROUGHPUT_SCALE || ratio <= 1.0 / THROUGHPUT_SCALE {
                n += 1;
                if n == a.len() {
                    break;
                }
            }
        }
        n
    }

    /// `getAverageThroughput`: the mean over the window, kbit/s; `None`
    /// (dash.js's NaN) before the first sample.
    pub fn average_throughput(&self) -> Option<f64> {
        let n = self.throughput_window();
        (n > 0).then(|| self.throughput.iter().rev().take(n).sum::<f64>() / n as f64)
    }

    /// `getAverageLatency`: the mean of the last 4 latencies, ms.
    pub fn average_latency(&self) -> Option<f64> {
        let n = LATENCY_SAMPLES.min(self.latency.len());
        (n > 0).then(|| self.latency.iter().rev().take(n).sum::<f64>() / n as f64)
    }

    /// Heap bytes held.
    pub fn heap_bytes(&self) -> usize {
        (self.throughput.capacity() + self.latency.capacity()) * std::mem::size_of::<f64>()
    }
}
