//! hls.js 1.7.4's bandwidth estimator (`src/utils/ewma.ts`,
//! `src/utils/ewma-bandwidth-estimator.ts`), in its own units: weights and
//! half-lives in seconds, bandwidth in bit/s, TTFB in ms.
//!
//! - Each EWMA has `alpha = exp(ln 0.5 / halfLife)`; a sample of weight `w`
//!   and value `v` makes the estimate `v (1 − alpha^w) + alpha^w estimate`;
//!   read back it is divided by `1 − alpha^totalWeight` (zero-bias
//!   correction).
//! - Bandwidth: a fast (3 s) and a slow (9 s) EWMA (`abrEwmaFastVoD`,
//!   `abrEwmaSlowVoD`) of `bits / seconds`, each sample weighted by its
//!   duration in seconds (at least `min(50 ms, bytes / 100000)`); the
//!   estimate is the **smaller** of the two, the default estimate until the
//!   fast one has a weight of 0.001 s.
//! - TTFB: one EWMA with the slow half-life, a sample of `max(ttfb, 5)` ms
//!   weighted `√2 · exp(−s² / 2)` (`s` the TTFB in seconds); 100 ms until
//!   it has a weight of 0.001.

/// `EwmaBandWidthEstimator.minWeight_`: the weight before which the
/// default is returned.
pub const MIN_WEIGHT: f64 = 0.001;
/// `minDelayMs_`: the shortest duration a sample is given, ms (less for
/// under 5 MB: `bytes / 100000`).
pub const MIN_DELAY_MS: f64 = 50.0;
/// `defaultTTFB`, ms.
pub const DEFAULT_TTFB_MS: f64 = 100.0;

/// One exponentially weighted moving average (`EWMA`).
#[derive(Debug, Clone, PartialEq)]
pub struct Ewma {
    half_life: f64,
    alpha: f64,
    estimate: f64,
    total_weight: f64,
}

impl Ewma {
    /// An empty average with `half_life` (in the weights' unit).
    pub fn new(half_life: f64) -> Self {
        Self {
            half_life,
            alpha: if half_life > 0.0 {
                (0.5f64.ln() / half_life).exp()
            } else {
                0.0
            },
            estimate: 0.0,
            total_weight: 0.0,
        }
    }

    /// The half-life.
    pub fn half_life(&self) -> f64 {
        self.half_life
    }

    /// Adds `value` with `weight`.
    pub fn sample(&mut self, weight: f64, value: f64) {
        let adj = self.alpha.powf(weight);
        self.estimate = value * (1.0 - adj) + adj * self.estimate;
        self.total_weight += weight;
    }

    /// The sum of the weights so far.
    pub fn total_weight(&self) -> f64 {
        self.total_weight
    }

    /// The zero-bias-corrected average (`getEstimate`).
    pub fn estimate(&self) -> f64 {
        if self.alpha != 0.0 {
            let zero = 1.0 - self.alpha.powf(self.total_weight);
            if zero != 0.0 {
                return self.estimate / zero;
            }
        }
        self.estimate
    }
}

/// `EwmaBandWidthEstimator` (see the module docs).
#[derive(Debug, Clone, PartialEq)]
pub struct BandwidthEstimator {
    default_bps: f64,
    fast: Ewma,
    slow: Ewma,
    ttfb: Ewma,
}

impl BandwidthEstimator {
    /// An estimator with half-lives `slow_s` and `fast_s` seconds and
    /// `default_bps` until it has samples.
    pub fn new(slow_s: f64, fast_s: f64, default_bps: f64) -> Self {
        Self {
            default_bps,
            fast: Ewma::new(fast_s),
            slow: Ewma::new(slow_s),
            ttfb: Ewma::new(slow_s),
        }
    }

    /// A download of `bytes` that took `duration_ms` (`sample`); nothing for
    /// no bytes.
    pub fn sample(&mut self, duration_ms: f64, bytes: f64) {
        // `numBytes <= 0` (and NaN) is no sample
        if bytes.is_nan() || bytes <= 0.0 {
            return;
        }
        let min_delay = MIN_DELAY_MS.min(bytes / 100_000.0);
        let seconds = duration_ms.max(min_delay) / 1000.0;
        let bps = 8.0 * bytes / seconds;
        self.fast.sample(seconds, bps);
        self.slow.sample(seconds, bps);
    }

    /// A time to first byte, ms (`sampleTTFB`).
    pub fn sample_ttfb(&mut self, ttfb_ms: f64) {
        let s = ttfb_ms / 1000.0;
        let weight = std::f64::consts::SQRT_2 * (-(s * s) / 2.0).exp();
        self.ttfb.sample(weight, ttfb_ms.max(5.0));
    }

    /// The fast average has enough weight (`canEstimate`).
    pub fn can_estimate(&self) -> bool {
        self.fast.total_weight() >= MIN_WEIGHT
    }

    /// The estimate, bit/s: the smaller average, or the default.
    pub fn estimate_bps(&self) -> f64 {
        if self.can_estimate() {
            self.fast.estimate().min(self.slow.estimate())
        } else {
            self.default_bps
        }
    }

    /// The TTFB estimate, ms.
    pub fn estimate_ttfb_ms(&self) -> f64 {
        if self.ttfb.total_weight() >= MIN_WEIGHT {
            self.ttfb.estimate()
        } else {
            DEFAULT_TTFB_MS
        }
    }

    /// The default estimate, bit/s.
    pub fn default_bps(&self) -> f64 {
        self.default_bps
    }

    /// The fast and slow averages (zero-bias corrected), bit/s.
    pub fn averages_bps(&self) -> (f64, f64) {
        (self.fast.estimate(), self.slow.estimate())
    }
}
