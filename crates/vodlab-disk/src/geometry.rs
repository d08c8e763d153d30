//! The mechanical parts of a hard disk: the seek curve, zoned recording and
//! the platter's angular position. Times are model nanoseconds (`f64`),
//! addresses bytes.
//!
//! Nothing here knows drive profiles: [`SeekCurve::fit`] and [`Zones::new`],
//! which build these from a profile's `[hdd]` parameters, are in
//! [`crate::profile`] with the parameters they read.

use serde::{Deserialize, Serialize};

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

/// How the transfer rate falls from the outer (low addresses) to the inner
/// (high addresses) tracks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum ZoneCurve {
    /// Constant linear bit density: the rate is proportional to the radius
    /// and the capacity under a radius grows with its square, so
    /// `rate(f) = sqrt(outer² − f·(outer² − inner²))` for the address
    /// fraction `f`.
    #[default]
    Radial,
    /// `rate(f) = outer + f·(inner − outer)`.
    Linear,
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
