//! BOLA-E (Spiteri, Sitaraman, Sparacio, MMSys 2018): BOLA with a
//! placeholder buffer, as dash.js's BolaRule and Sabre's `BolaEnh`
//! (`src/sabre.py` at `09b03bb`, BSD-2-Clause, © 2018 Kevin Spiteri).
//!
//! - Utilities `ln(bitrate/bitrate_0) + 1`; BOLA's buffer target is
//!   `max(10 s + 2 s × levels, max_buffer)`, `γp = (u_max − 1) / (target /
//!   10 s − 1)` and `V = 10 s / γp` (with the insufficient-buffer rule off:
//!   BOLA-basic's `γp − 1` and `V`).
//! - The first decision (or the first after DYNAMIC-DASH hands over) is
//!   from the unscaled throughput estimate, with a placeholder buffer seeded
//!   so that BOLA would agree; later decisions use buffer + placeholder, at
//!   most one level above the throughput's, then the insufficient-buffer
//!   cap (0.9 → 0.5).
//! - Full-buffer waits are added to the placeholder; after each download
//!   the placeholder is clamped to stay consistent with the level fetched.
//! - A decision may ask for a pause (the buffer + placeholder is above the
//!   level's maximum), which the player waits out before fetching.

use super::{quality_from_throughput, AbrParams, Context, Progress};
use crate::core::player::movie::Movie;

/// BOLA-E's minimum buffer, ms.
const MINIMUM_BUFFER_MS: f64 = 10_000.0;
/// BOLA-E's buffer per level, ms.
const MINIMUM_BUFFER_PER_LEVEL_MS: f64 = 2_000.0;

/// BOLA-E with its state.
#[derive(Debug, Clone)]
pub struct BolaE {
    p: AbrParams,
    utilities: Vec<f64>,
    gp: f64,
    vp: f64,
    startup: bool,
    placeholder: f64,
    last_quality: usize,
    ibr_safety: f64,
}

impl BolaE {
    /// BOLA-E for `movie` with a buffer of `max_buffer_ms`.
    pub fn new(p: AbrParams, movie: &Movie, max_buffer_ms: f64) -> Self {
        let b0 = movie.bitrates_kbps[0].ln();
        let utilities: Vec<f64> = movie
            .bitrates_kbps
            .iter()
            .map(|b| b.ln() + 1.0 - b0)
            .collect();
        let umax = utilities[utilities.len() - 1];
        let (gp, vp) = if !p.insufficient_buffer_rule {
            let gp = p.gamma_p - 1.0;
            (
                gp,
                (max_buffer_ms - movie.segment_duration_ms) / (umax + gp),
            )
        } else {
            let target = (MINIMUM_BUFFER_MS + MINIMUM_BUFFER_PER_LEVEL_MS * movie.levels() as f64)
                .max(max_buffer_ms);
            let gp = (umax - 1.0) / (target / MINIMUM_BUFFER_MS - 1.0);
            (gp, MINIMUM_BUFFER_MS / gp)
        };
        Self {
            p,
            utilities,
            gp,
            vp,
            startup: true,
            placeholder: 0.0,
            last_quality: 0,
            ibr_safety: p.ibr_safety_init,
        }
    }

    /// Capacity of the utilities vector.
    pub(crate) fn utilities_len(&self) -> usize {
        self.utilities.capacity()
    }

    /// γp and V, ms.
    pub fn gp_vp(&self) -> (f64, f64) {
        (self.gp, self.vp)
    }

    /// The placeholder buffer, ms.
    pub fn placeholder_ms(&self) -> f64 {
        self.placeholder
    }

    fn quality_from_buffer(&self, m: &Movie, level: f64) -> usize {
        let mut best = 0;
        let mut score = f64::NEG_INFINITY;
        for (q, b) in m.bitrates_kbps.iter().enumerate() {
            let s = (self.vp * (self.utilities[q] + self.gp) - level) / b;
            if s > score {
                best = q;
                score = s;
            }
        }
        best
    }

    /// The buffer level above which BOLA prefers `q` to every lower level.
    pub fn min_buffer_for_quality(&self, m: &Movie, q: usize) -> f64 {
        let (b, u) = (m.bitrates_kbps[q], self.utilities[q]);
        let mut level: f64 = 0.0;
        for k in 0..q {
            if self.utilities[k] < u {
                let (bk, uk) = (m.bitrates_kbps[k], self.utilities[k]);
                level = level.max(self.vp * (self.gp + (b * uk - bk * u) / (b - bk)));
            }
        }
        level
    }

    /// The buffer level above which BOLA would rather wait than fetch `q`.
    pub fn max_buffer_for_quality(&self, q: usize) -> f64 {
        self.vp * (self.utilities[q] + self.gp)
    }

    /// The level for the next segment and a pause before fetching it, ms.
    pub fn decide(&mut self, c: &Context) -> (usize, f64) {
        let m = c.movie;
        let level = c.buffer_ms;
        let lat = c.latency_ms.unwrap_or(0.0);
        let Some(tput) = c.throughput_kbps else {
            return (self.last_quality, 0.0);
        };
        if self.startup {
            self.startup = false;
            self.ibr_safety = self.p.ibr_safety_init;
            let q = quality_from_throughput(m, tput, lat);
            self.placeholder = (self.min_buffer_for_quality(m, q) - level).max(0.0);
            return (q, 0.0);
        }
        let mut q = self.quality_from_buffer(m, level + self.placeholder);
        let qt = quality_from_throughput(m, tput, lat);
        if q > self.last_quality && q > qt {
            q = self.last_quality.max(qt) + 1;
        }
        let max_level = self.max_buffer_for_quality(q);
        let mut delay = level + self.placeholder - max_level;
        if delay > 0.0 {
            if delay <= self.placeholder {
                self.placeholder -= delay;
                delay = 0.0;
            } else {
                delay -= self.placeholder;
                self.placeholder = 0.0;
            }
        } else {
            delay = 0.0;
        }
        if q == m.levels() - 1 {
            delay = 0.0;
        }
        if self.p.insufficient_buffer_rule {
            let safe = self.ibr_safety * (level - lat) * tput;
            self.ibr_safety = (self.ibr_safety * self.p.ibr_safety_init).max(self.p.ibr_safety_min);
            // the first level whose next one does not fit
            if let Some(k) = (0..q).find(|&k| m.bitrates_kbps[k + 1] * m.segment_duration_ms > safe)
            {
                q = k;
                delay = 0.0;
                let max_ph = (self.min_buffer_for_quality(m, q) - level).max(0.0);
                self.placeholder = self.placeholder.min(max_ph);
            }
        }
        (q, delay)
    }

    /// A full-buffer wait of `ms` went into the placeholder.
    pub fn report_delay(&mut self, ms: f64) {
        self.placeholder += ms;
    }

    /// A download of `quality` ended after `time_ms` (abandoned to
    /// `abandoned_to`, or completed); `level_ms` is the buffer now.
    pub fn report_download(
        &mut self,
        m: &Movie,
        quality: usize,
        abandoned_to: Option<usize>,
        time_ms: f64,
        level_ms: f64,
    ) {
        self.last_quality = quality;
        match abandoned_to {
            None => {
                let level_was = level_ms + time_ms;
                let max_eff = self.max_buffer_for_quality(quality);
                self.placeholder = self.placeholder.min((max_eff - level_was).max(0.0));
                if level_ms > 0.0 {
                    let min_eff = self.min_buffer_for_quality(m, quality);
                    self.placeholder = self.placeholder.max(min_eff - level_was);
                }
            }
            Some(a) => {
                let want = if a > 0 {
                    self.min_buffer_for_quality(m, a)
                } else {
                    MINIMUM_BUFFER_MS
                };
                self.placeholder = self.placeholder.min((want - level_ms).max(0.0));
            }
        }
    }

    /// BOLA-E's abandonment: scores after a new request's latency, with the
    /// placeholder.
    pub fn check_abandon(&self, m: &Movie, pr: &Progress, buffer_ms: f64) -> Option<usize> {
        let remain = pr.size_bits - pr.downloaded_bits;
        if pr.downloaded_bits <= 0.0 || remain <= 0.0 {
            return None;
        }
        let bl = (buffer_ms + self.placeholder - pr.ttfb_ms).max(0.0);
        let tp = pr.downloaded_bits / (pr.elapsed_ms - pr.ttfb_ms);
        let sz = remain - pr.ttfb_ms * tp;
        if sz <= 0.0 {
            return None;
        }
        let mut score = (self.vp * (self.gp + self.utilities[pr.quality]) - bl) / sz;
        let mut to = None;
        for q in 0..pr.quality {
            let other = pr.size_bits * m.bitrates_kbps[q] / m.bitrates_kbps[pr.quality];
            let s = (self.vp * (self.gp + self.utilities[q]) - bl) / other;
            if other < sz && s > score {
                score = s;
                to = Some(q);
            }
        }
        to
    }
}
