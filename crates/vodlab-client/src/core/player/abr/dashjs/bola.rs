//! dash.js 4.7.4's `BolaRule` (BOLA-E with a placeholder buffer), in ms and
//! kbit/s.
//!
//! - Utilities `ln(bitrate) − ln(bitrate_0) + 1`; BOLA's buffer is
//!   `max(stableBufferTime, 10 s + 2 s × levels)` (22 s for six levels and
//!   the 12 s default, so BOLA is scaled to more buffer than dash.js keeps),
//!   `γp = (u_max − 1) / (buffer / 10 s − 1)`, `Vp = 10 s / γp`.
//! - STARTUP (the first decisions after the DYNAMIC strategy hands over):
//!   the level for the safe throughput, the placeholder seeded so that BOLA
//!   would agree; STEADY once a segment loaded under BOLA and the buffer
//!   holds one.
//! - STEADY: the placeholder grows by the time since the last segment
//!   finished (or the last decision); the level maximises
//!   `(Vp (u + γp) − (buffer + placeholder)) / bitrate` (ties to the higher),
//!   never more than one step above the last level unless the throughput's
//!   level allows it; a buffer above the level's maximum eats the
//!   placeholder, then asks for a pause (not at the top level).
//! - Each loaded segment: placeholder × 0.99, clamped to the last level's
//!   maximum minus the buffer at its request; a replacement (fast switching)
//!   adds its duration. An abandonment clamps it to the minimum buffer of the
//!   new level; a stall zeroes it.

use super::quality_for_bitrate;

/// BOLA never pauses below this buffer (`MINIMUM_BUFFER_S`), ms.
pub const MINIMUM_BUFFER_MS: f64 = 10_000.0;
/// Extra BOLA buffer per level (`MINIMUM_BUFFER_PER_BITRATE_LEVEL_S`), ms.
pub const MINIMUM_BUFFER_PER_LEVEL_MS: f64 = 2_000.0;
/// The placeholder's decay per segment (`PLACEHOLDER_BUFFER_DECAY`).
pub const PLACEHOLDER_DECAY: f64 = 0.99;

/// BOLA's state for one media type.
#[derive(Debug, Clone)]
pub struct BolaState {
    bitrates: Vec<f64>,
    seg_ms: f64,
    utilities: Vec<f64>,
    gp: f64,
    vp: f64,
    steady: bool,
    placeholder_ms: f64,
    last_quality: usize,
    abr_quality: usize,
    most_advanced: Option<usize>,
    last_segment_ms: Option<f64>,
    last_finish_ms: Option<f64>,
    last_call_ms: Option<f64>,
}

impl BolaState {
    /// The initial state for `bitrates_kbps` (at least two levels) with
    /// `stable_buffer_ms` and segments of `seg_ms`.
    pub fn new(bitrates_kbps: &[f64], seg_ms: f64, stable_buffer_ms: f64) -> Self {
        let b0 = bitrates_kbps[0].ln();
        let utilities: Vec<f64> = bitrates_kbps.iter().map(|b| b.ln() - b0 + 1.0).collect();
        let umax = utilities.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let buffer = stable_buffer_ms
            .max(MINIMUM_BUFFER_MS + MINIMUM_BUFFER_PER_LEVEL_MS * bitrates_kbps.len() as f64);
        let gp = (umax - 1.0) / (buffer / MINIMUM_BUFFER_MS - 1.0);
        Self {
            bitrates: bitrates_kbps.to_vec(),
            seg_ms,
            utilities,
            gp,
            vp: MINIMUM_BUFFER_MS / gp,
            steady: false,
            placeholder_ms: 0.0,
            last_quality: 0,
            abr_quality: 0,
            most_advanced: None,
            last_segment_ms: None,
            last_finish_ms: None,
            last_call_ms: None,
        }
    }

    /// γp.
    pub fn gp(&self) -> f64 {
        self.gp
    }

    /// Vp, ms per unit of utility.
    pub fn vp(&self) -> f64 {
        self.vp
    }

    /// The placeholder buffer, ms.
    pub fn placeholder_ms(&self) -> f64 {
        self.placeholder_ms
    }

    /// In the STEADY state.
    pub fn is_steady(&self) -> bool {
        self.steady
    }

    /// `getQualityFromBufferLevel`.
    pub fn quality_from_buffer(&self, buffer_ms: f64) -> usize {
        let mut best = 0;
        let mut score = f64::NAN;
        for (i, b) in self.bitrates.iter().enumerate() {
            let s = (self.vp * (self.utilities[i] + self.gp) - buffer_ms) / b;
            if score.is_nan() || s >= score {
                score = s;
                best = i;
            }
        }
        best
    }

    /// `maxBufferLevelForQuality`, ms.
    pub fn max_buffer_for(&self, q: usize) -> f64 {
        self.vp * (self.utilities[q] + self.gp)
    }

    /// `minBufferLevelForQuality`, ms.
    pub fn min_buffer_for(&self, q: usize) -> f64 {
        let (qb, qu) = (self.bitrates[q], self.utilities[q]);
        let mut min: f64 = 0.0;
        for i in (0..q).rev() {
            if self.utilities[i] < qu {
                let (ib, iu) = (self.bitrates[i], self.utilities[i]);
                let level = self.vp * (self.gp + (qb * iu - ib * qu) / (qb - ib));
                min = min.max(level);
            }
        }
        min
    }

    /// One decision at `now_ms` with `buffer_ms` buffered, the safe
    /// throughput and the latency: the level and the pause asked for, ms.
    pub fn decide(
        &mut self,
        now_ms: f64,
        buffer_ms: f64,
        safe_kbps: f64,
        latency_ms: Option<f64>,
    ) -> (usize, f64) {
        let qt = quality_for_bitrate(&self.bitrates, self.seg_ms, safe_kbps, latency_ms);
        if !self.steady {
            self.placeholder_ms = (self.min_buffer_for(qt) - buffer_ms).max(0.0);
            self.last_quality = qt;
            if self.last_segment_ms.is_some_and(|d| buffer_ms >= d) {
                self.steady = true;
            }
            return (qt, 0.0);
        }
        // updatePlaceholderBuffer
        if let Some(f) = self.last_finish_ms {
            self.placeholder_ms += (now_ms - f).max(0.0);
        } else if let Some(c) = self.last_call_ms {
            self.placeholder_ms += (now_ms - c).max(0.0);
        }
        self.last_call_ms = Some(now_ms);
        self.last_finish_ms = None;
        let mut q = self.quality_from_buffer(buffer_ms + self.placeholder_ms);
        if q > self.last_quality && q > qt {
            q = qt.max(self.last_quality);
        }
        let mut delay = (buffer_ms + self.placeholder_ms - self.max_buffer_for(q)).max(0.0);
        if delay <= self.placeholder_ms {
            self.placeholder_ms -= delay;
            delay = 0.0;
        } else {
            delay -= self.placeholder_ms;
            self.placeholder_ms = 0.0;
            if q + 1 >= self.bitrates.len() {
                delay = 0.0;
            }
        }
        self.last_quality = q;
        (q, delay)
    }

    /// A media segment `index` of level `quality` loaded: requested at
    /// `request_ms`, finished at `finish_ms`, with `buffer_ms` buffered
    /// then (before it is appended).
    pub fn segment_loaded(
        &mut self,
        index: usize,
        quality: usize,
        request_ms: f64,
        finish_ms: f64,
        buffer_ms: f64,
    ) {
        let replacement = match self.most_advanced {
            Some(m) if index <= m => true,
            _ => {
                self.most_advanced = Some(index);
                false
            }
        };
        self.last_segment_ms = Some(self.seg_ms);
        self.last_quality = quality;
        self.last_finish_ms = Some(finish_ms);
        // checkNewSegment
        self.placeholder_ms *= PLACEHOLDER_DECAY;
        let at_request = buffer_ms + (finish_ms - request_ms);
        let max_placeholder = (self.max_buffer_for(quality) - at_request).max(0.0);
        self.placeholder_ms = self.placeholder_ms.min(max_placeholder);
        if replacement {
            self.placeholder_ms += self.seg_ms;
        }
    }

    /// The ABR's level changed (`QUALITY_CHANGE_REQUESTED`).
    pub fn quality_changed(&mut self, q: usize) {
        self.abr_quality = q;
    }

    /// A download was abandoned with `buffer_ms` buffered.
    pub fn abandoned(&mut self, buffer_ms: f64) {
        let want = if self.abr_quality > 0 {
            self.min_buffer_for(self.abr_quality)
        } else {
            MINIMUM_BUFFER_MS
        };
        self.placeholder_ms = self.placeholder_ms.min((want - buffer_ms).max(0.0));
    }

    /// The buffer ran dry (`BUFFER_EMPTY`).
    pub fn buffer_empty(&mut self) {
        if self.steady {
            self.placeholder_ms = 0.0;
        }
    }

    /// Heap bytes held.
    pub fn heap_bytes(&self) -> usize {
        (self.bitrates.capacity() + self.utilities.capacity()) * std::mem::size_of::<f64>()
    }
}
