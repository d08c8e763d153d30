//! The mechanical parts of a hard disk: the seek curve, zoned recording and
//! the platter's angular position. Times are model nanoseconds (`f64`),
//! addresses bytes.

use crate::profile::{HddParams, ZoneCurve};

/// Seek time as a function of distance: 0 within a track; settle + a·√x for
/// short seeks (`x` = distance / capacity ≤ `short`); linear from there to
/// the full stroke. `a` is fitted so that the mean over uniformly random
/// pairs of addresses equals the datasheet's average seek.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SeekCurve {
    /// Settle (track-to-track) time, ns.
    pub settle_ns: f64,
    /// Coefficient of √x, ns.
    pub sqrt_ns: f64,
    /// End of the short-seek part, fraction of the stroke.
    pub short: f64,
    /// Full-stroke seek, ns.
    pub full_ns: f64,
}

impl SeekCurve {
    /// Fits the √x coefficient to `average_seek_ms`; the error says why the
    /// average cannot be met with the other seek parameters.
    pub fn fit(h: &HddParams) -> Result<SeekCurve, String> {
        let settle_ns = h.track_to_track_ms * 1e6;
        let full_ns = h.full_stroke_ms * 1e6;
        let short = h.short_seek_fraction;
        if full_ns < settle_ns {
            return Err(format!(
                "full_stroke_ms ({}) is below track_to_track_ms ({})",
                h.full_stroke_ms, h.track_to_track_ms
            ));
        }
        let a_max = (full_ns - settle_ns) / short.sqrt();
        let curve = |a: f64| SeekCurve {
            settle_ns,
            sqrt_ns: a,
            short,
            full_ns,
        };
        let m0 = curve(0.0).mean_random_ns();
        let m1 = curve(a_max).mean_random_ns();
        let want = h.average_seek_ms * 1e6;
        if want < m0 - 1.0 || want > m1 + 1.0 {
            return Err(format!(
                "{} ms cannot be met with track_to_track_ms = {}, full_stroke_ms = {} and \
                 short_seek_fraction = {}: the mean over random pairs is between {:.2} and {:.2} ms",
                h.average_seek_ms,
                h.track_to_track_ms,
                h.full_stroke_ms,
                short,
                m0 / 1e6,
                m1 / 1e6
            ));
        }
        // The mean is linear in `a`.
        let a = if m1 > m0 {
            (a_max * (want - m0) / (m1 - m0)).clamp(0.0, a_max)
        } else {
            0.0
        };
        Ok(curve(a))
    }

    /// Seek time for a distance given as a fraction of the stroke (> 0).
    pub fn time_ns(&self, x: f64) -> f64 {
        let x = x.clamp(0.0, 1.0);
        if x <= self.short {
            self.settle_ns + self.sqrt_ns * x.sqrt()
        } else {
            let s0 = self.settle_ns + self.sqrt_ns * self.short.sqrt();
            s0 + (self.full_ns - s0) * (x - self.short) / (1.0 - self.short)
        }
    }

    /// Mean seek time over uniformly random pairs of positions (density of
    /// the distance: 2(1 − x)), by the midpoint rule.
    pub fn mean_random_ns(&self) -> f64 {
        const N: usize = 20_000;
        let h = 1.0 / N as f64;
        (0..N)
            .map(|i| {
                let x = (i as f64 + 0.5) * h;
                self.time_ns(x) * 2.0 * (1.0 - x) * h
            })
            .sum()
    }
}

/// Zoned recording: transfer rate as a function of the address, and the
/// "stream time" τ(a) it takes to read sequentially from address 0 to `a`.
/// The platter angle of address `a` is τ(a) modulo a revolution, so a
/// sequential read stays in phase with the platter (track and cylinder skew
/// are folded into the sustained rates).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Zones {
    /// Capacity, bytes.
    pub capacity: f64,
    /// Rate at address 0, bytes/ns.
    pub outer: f64,
    /// Rate at the last address, bytes/ns.
    pub inner: f64,
    /// Curve between them.
    pub curve: ZoneCurve,
}

impl Zones {
    /// From profile parameters.
    pub fn new(h: &HddParams) -> Zones {
        Zones {
            capacity: h.capacity_bytes as f64,
            outer: h.outer_mb_s * 1e-3,
            inner: h.inner_mb_s * 1e-3,
            curve: h.zone_curve,
        }
    }

    /// Media rate at address `a`, bytes/ns.
    pub fn rate(&self, a: f64) -> f64 {
        let f = (a / self.capacity).clamp(0.0, 1.0);
        match self.curve {
            ZoneCurve::Radial => {
                let d = self.outer * self.outer - self.inner * self.inner;
                (self.outer * self.outer - f * d).max(0.0).sqrt()
            }
            ZoneCurve::Linear => self.outer + f * (self.inner - self.outer),
        }
    }

    /// Stream time from address 0 to `a`, ns.
    pub fn tau(&self, a: f64) -> f64 {
        let c = self.capacity;
        let f = (a / c).clamp(0.0, 1.0);
        match self.curve {
            ZoneCurve::Radial => {
                // ∫ c·df / sqrt(o² − f·d) = 2c·f / (o + sqrt(o² − f·d)),
                // written without cancellation.
                let d = self.outer * self.outer - self.inner * self.inner;
                2.0 * c * f / (self.outer + (self.outer * self.outer - f * d).max(0.0).sqrt())
            }
            ZoneCurve::Linear => {
                let s = self.inner - self.outer;
                let u = f * s / self.outer;
                if u.abs() < 1e-12 {
                    c * f / self.outer
                } else {
                    c * f * u.ln_1p() / u / self.outer
                }
            }
        }
    }

    /// Time to transfer `[a, b)`, ns.
    pub fn transfer_ns(&self, a: u64, b: u64) -> f64 {
        (self.tau(b as f64) - self.tau(a as f64)).max(0.0)
    }
}
