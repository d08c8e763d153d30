//! dash.js 4.7.4's ABR as `--player-profile dashjs` runs it: the DYNAMIC
//! strategy with its default rules (`streaming.abr` defaults of
//! `src/core/Settings.js`; the rules in `src/streaming/rules/abr/`), without
//! I/O and with `now` passed in. Units: ms, bits, kbit/s.
//!
//! At each decision (dash.js's `AbrController.checkPlaybackQuality`, made
//! when the buffer is below its target):
//!
//! - **DYNAMIC**: BOLA is in charge above `stableBufferTime` (12 s) of
//!   buffer and hands back to the throughput rule below half of it (6 s).
//! - **ThroughputRule** (when BOLA is not in charge, the buffer is loaded
//!   and no abandonment is in force): the level for the *safe* throughput
//!   (sliding-window mean × 0.9, [`history`]) less the latency's share of a
//!   segment (`useDeadTimeLatency`).
//! - **BolaRule** ([`bola`]): BOLA-E scaled to `max(12 s, 10 s + 2 s ×
//!   levels)`; it may ask for a pause before the request.
//! - **InsufficientBufferRule** (from the third segment on): the level for
//!   `throughput × buffer / segment duration × 0.5` (throughput unscaled),
//!   level 0 when the buffer is empty (< 0.3 s).
//! - **SwitchHistoryRule** ([`switches`]): after a drop from a level it
//!   caps the choice below it for the next 8 decisions.
//! - The lowest level any active rule asks for wins (all have the same
//!   priority); no rule asking: no change. While an abandonment is in force
//!   (10 s, `abandonLoadTimeout`) only a lower level is taken.
//!
//! **AbandonRequestsRule** ([`DashJs::check_abandon`]): from 500 ms after
//! the first byte and 5 progress samples, with at most 12 s buffered, when
//! the mean of the progress samples (bits since the first byte / time since
//! it) would take more than 1.8 segment durations for the whole segment, and
//! the level for 0.9 × that rate is smaller than what is left, abandon to it
//! (once per segment); the same segment is then fetched at that level.
//!
//! The start: the level for `initialBitrate` 1000 kbit/s (no saved
//! bit rate: a fresh browser profile). The buffer target
//! ([`DashJs::buffer_target_ms`]) is 12 s, 30 s while the level is the top
//! one (`bufferTimeAtTopQuality`; the 60 s long-form target from 600 s of
//! content is not modelled); a full buffer is checked every 500 ms
//! ([`DashJs::schedule_wait_ms`]). DroppedFramesRule has no input here (vodlab
//! decodes nothing) and is left out.

pub mod bola;
pub mod history;
pub mod switches;
#[cfg(test)]
mod tests;

use bola::BolaState;
use history::ThroughputHistory;
use switches::SwitchHistory;

use super::{Context, Progress};
use crate::core::player::movie::Movie;

/// `streaming.buffer.stableBufferTime`, ms.
pub const STABLE_BUFFER_MS: f64 = 12_000.0;
/// `streaming.buffer.bufferTimeAtTopQuality`, ms.
pub const TOP_QUALITY_BUFFER_MS: f64 = 30_000.0;
/// `streaming.abr.bandwidthSafetyFactor`.
pub const SAFETY_FACTOR: f64 = 0.9;
/// dash.js's `DEFAULT_VIDEO_BITRATE` (`initialBitrate: -1`, nothing
/// saved), kbit/s.
pub const INITIAL_BITRATE_KBPS: f64 = 1000.0;
/// `INSUFFICIENT_BUFFER_SAFETY_FACTOR`.
pub const IBR_SAFETY_FACTOR: f64 = 0.5;
/// InsufficientBufferRule ignores the first segments (`SEGMENT_IGNORE_COUNT`).
pub const IBR_IGNORE_SEGMENTS: u32 = 2;
/// `streaming.buffer.stallThreshold`: less buffer is BUFFER_EMPTY, ms.
pub const STALL_THRESHOLD_MS: f64 = 300.0;
/// AbandonRequestsRule's `graceTimeThreshold`, ms.
pub const ABANDON_GRACE_MS: f64 = 500.0;
/// AbandonRequestsRule's `abandonMultiplier`.
pub const ABANDON_MULTIPLIER: f64 = 1.8;
/// AbandonRequestsRule's `minLengthToAverage` (progress samples).
pub const ABANDON_MIN_SAMPLES: usize = 5;
/// `streaming.abandonLoadTimeout`, ms.
pub const ABANDON_LOAD_TIMEOUT_MS: f64 = 10_000.0;
/// `streaming.scheduling.defaultTimeout`: a full buffer is checked again
/// after this, ms.
pub const SCHEDULE_TIMEOUT_MS: f64 = 500.0;
/// Fast switching replaces from this many segment durations ahead of the
/// playhead (`_prepareForFastQualitySwitch`'s `safeBufferLevel`).
pub const FAST_SWITCH_SEGMENTS: f64 = 1.5;

/// `AbrController.getQualityForBitrate`: the highest level whose bit rate
/// is at most `kbps`, after taking the latency's share of a segment off it
/// (a latency above a segment: level 0). NaN or nothing fits: level 0.
pub fn quality_for_bitrate(
    bitrates_kbps: &[f64],
    seg_ms: f64,
    kbps: f64,
    latency_ms: Option<f64>,
) -> usize {
    let mut b = kbps;
    if let Some(l) = latency_ms.filter(|l| *l != 0.0 && !l.is_nan()) {
        if l > seg_ms {
            return 0;
        }
        b *= 1.0 - l / seg_ms;
    }
    bitrates_kbps.iter().rposition(|r| b >= *r).unwrap_or(0)
}

/// A decision.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Decision {
    /// The level of the next request.
    pub quality: usize,
    /// BOLA's pause before it, ms.
    pub delay_ms: f64,
    /// The level changed (dash.js's `QUALITY_CHANGE_REQUESTED`: fast
    /// switching may replace buffered segments).
    pub changed: bool,
}

/// The progress samples of the download in flight (AbandonRequestsRule).
#[derive(Debug, Clone, Default)]
struct Flight {
    index: Option<usize>,
    sum_kbps: f64,
    samples: usize,
}

/// dash.js 4.7.4's rules with their state (see the module docs).
#[derive(Debug, Clone)]
pub struct DashJs {
    bitrates: Vec<f64>,
    seg_ms: f64,
    history: ThroughputHistory,
    use_bola: bool,
    bola: Option<BolaState>,
    ibr_ignore: u32,
    switches: SwitchHistory,
    quality: usize,
    abandon_until: Option<f64>,
    flight: Flight,
    abandoned: Vec<usize>,
}

impl DashJs {
    /// The rules for `movie`, at the start level.
    pub fn new(movie: &Movie) -> Self {
        let bitrates = movie.bitrates_kbps.clone();
        let seg_ms = movie.segment_duration_ms;
        let quality = quality_for_bitrate(&bitrates, seg_ms, INITIAL_BITRATE_KBPS, None);
        Self {
            bitrates,
            seg_ms,
            history: ThroughputHistory::new(),
            use_bola: false,
            bola: None,
            ibr_ignore: IBR_IGNORE_SEGMENTS,
            switches: SwitchHistory::new(),
            quality,
            abandon_until: None,
            flight: Flight::default(),
            abandoned: Vec::new(),
        }
    }

    /// The current level (dash.js's `getQualityFor`).
    pub fn quality(&self) -> usize {
        self.quality
    }

    /// BOLA is in charge (DYNAMIC).
    pub fn uses_bola(&self) -> bool {
        self.use_bola
    }

    /// BOLA's state, once BOLA was consulted.
    pub fn bola(&self) -> Option<&BolaState> {
        self.bola.as_ref()
    }

    /// The throughput history.
    pub fn history(&self) -> &ThroughputHistory {
        &self.history
    }

    /// The buffer level below which the next request leaves, ms: 30 s at
    /// the top level, else 12 s.
    pub fn buffer_target_ms(&self) -> f64 {
        if self.quality + 1 >= self.bitrates.len() {
            TOP_QUALITY_BUFFER_MS
        } else {
            STABLE_BUFFER_MS
        }
    }

    /// How long the player waits with `buffer_ms` buffered before its next
    /// request, ms: dash.js requests while the buffer is below its target,
    /// and with a full buffer checks again every 500 ms
    /// (`scheduling.defaultTimeout`), so the request leaves at the first
    /// check below the target.
    pub fn schedule_wait_ms(&self, buffer_ms: f64) -> f64 {
        let over = buffer_ms - self.buffer_target_ms();
        if over < 0.0 {
            0.0
        } else {
            ((over / SCHEDULE_TIMEOUT_MS).floor() + 1.0) * SCHEDULE_TIMEOUT_MS
        }
    }

    /// An abandonment is in force at `now_ms` (dash.js's `ABANDON_LOAD`).
    pub fn abandon_load(&self, now_ms: f64) -> bool {
        self.abandon_until.is_some_and(|t| now_ms < t)
    }

    /// A buffer level reaches the DYNAMIC strategy (dash.js's
    /// `BUFFER_LEVEL` metric, updated as the buffer changes): BOLA takes
    /// over above 12 s and hands back below 6 s.
    pub fn buffer_level(&mut self, buffer_ms: f64) {
        let stable = STABLE_BUFFER_MS;
        self.use_bola = buffer_ms > if self.use_bola { 0.5 * stable } else { stable };
    }

    fn set_quality(&mut self, q: usize) {
        self.quality = q;
        if let Some(b) = self.bola.as_mut() {
            b.quality_changed(q);
        }
    }

    /// One decision at `c.now_ms` with `c.buffer_ms` buffered.
    pub fn decide(&mut self, c: &Context) -> Decision {
        let (now, buffer) = (c.now_ms, c.buffer_ms);
        let old = self.quality;
        let top = self.bitrates.len() - 1;
        let stable = STABLE_BUFFER_MS;
        self.buffer_level(buffer);
        let abandon_load = self.abandon_load(now);
        let avg = self.history.average_throughput();
        let lat = self.history.average_latency();
        let empty = buffer < STALL_THRESHOLD_MS;
        let qfb = |kbps: f64| quality_for_bitrate(&self.bitrates, self.seg_ms, kbps, lat);
        let mut asks: [Option<usize>; 4] = [None; 4];
        let mut delay = 0.0;
        // BolaRule
        if self.use_bola && top > 0 {
            let (bitrates, seg) = (&self.bitrates, self.seg_ms);
            let b = self
                .bola
                .get_or_insert_with(|| BolaState::new(bitrates, seg, stable));
            if let Some(t) = avg {
                let (q, d) = b.decide(now, buffer, t * SAFETY_FACTOR, lat);
                asks[0] = Some(q);
                delay = d;
            }
        }
        // ThroughputRule
        if let Some(t) = avg {
            if !self.use_bola && !abandon_load && !empty {
                asks[1] = Some(qfb(t * SAFETY_FACTOR));
            }
        }
        // InsufficientBufferRule
        if self.ibr_ignore == 0 {
            asks[2] = Some(if empty {
                0
            } else {
                qfb(avg.unwrap_or(f64::NAN) * (buffer / self.seg_ms) * IBR_SAFETY_FACTOR)
            });
        }
        // SwitchHistoryRule
        asks[3] = self.switches.max_index();
        let new = asks.iter().flatten().copied().min().unwrap_or(old).min(top);
        self.switches.push(old, new);
        let changed = new != old && (!abandon_load || new < old);
        if changed {
            self.set_quality(new);
        }
        Decision {
            quality: self.quality,
            delay_ms: delay,
            changed,
        }
    }

    /// A media segment loaded: `index` at `quality`, requested at
    /// `request_ms`, its first byte after `ttfb_ms`, finished at
    /// `finish_ms`, `bits` received; `buffer_ms` buffered before it is
    /// appended, `after_ms` after; `stalled`: the buffer ran dry during the
    /// download; `etp`: the response's CMSD `etp` (kbit/s) and the weight
    /// it is blended with (`--honour-cmsd`, `--cmsd-etp-weight`), if any. Both buffer levels reach the DYNAMIC strategy (the lowest
    /// and the highest of the download: the buffer falls while it lasts).
    #[allow(clippy::too_many_arguments)]
    pub fn segment_loaded(
        &mut self,
        index: usize,
        quality: usize,
        request_ms: f64,
        ttfb_ms: f64,
        finish_ms: f64,
        bits: f64,
        buffer_ms: f64,
        after_ms: f64,
        stalled: bool,
        etp: Option<(f64, f64)>,
    ) {
        self.buffer_level(buffer_ms);
        self.buffer_level(after_ms);
        let transfer = finish_ms - request_ms - ttfb_ms;
        let (etp_kbps, weight) = etp.map_or((None, 0.0), |(e, w)| (Some(e), w));
        self.history
            .push_with_etp(ttfb_ms, transfer, bits, etp_kbps, weight);
        if let Some(b) = self.bola.as_mut() {
            if stalled {
                b.buffer_empty();
            }
            b.segment_loaded(index, quality, request_ms, finish_ms, buffer_ms);
        }
        self.ibr_ignore = self.ibr_ignore.saturating_sub(1);
        self.flight = Flight::default();
    }

    /// AbandonRequestsRule at one progress report of the download in
    /// flight (`pr`, `index`) with `buffer_ms` buffered: the lower level to
    /// abandon to.
    pub fn check_abandon(&mut self, index: usize, pr: &Progress, buffer_ms: f64) -> Option<usize> {
        if buffer_ms > STABLE_BUFFER_MS || self.abandoned.contains(&index) {
            return None;
        }
        if pr.downloaded_bits <= 0.0 {
            return None;
        }
        if self.flight.index != Some(index) {
            self.flight = Flight {
                index: Some(index),
                ..Flight::default()
            };
        }
        let since_first_byte = (pr.elapsed_ms - pr.ttfb_ms).round();
        if since_first_byte > 0.0 {
            self.flight.sum_kbps += (pr.downloaded_bits / since_first_byte).round();
            self.flight.samples += 1;
        }
        if self.flight.samples < ABANDON_MIN_SAMPLES
            || since_first_byte <= ABANDON_GRACE_MS
            || pr.downloaded_bits >= pr.size_bits
        {
            return None;
        }
        let measured = (self.flight.sum_kbps / self.flight.samples as f64).round();
        // seconds, to 2 decimals as dash.js's toFixed(2)
        let est_s = (pr.size_bits / measured / 1000.0 * 100.0).round() / 100.0;
        if est_s < self.seg_ms / 1000.0 * ABANDON_MULTIPLIER || pr.quality == 0 {
            return None;
        }
        let q = quality_for_bitrate(&self.bitrates, self.seg_ms, measured * SAFETY_FACTOR, None);
        let other = pr.size_bits * self.bitrates[q] / self.bitrates[self.quality];
        if pr.size_bits - pr.downloaded_bits > other {
            self.abandoned.push(index);
            Some(q)
        } else {
            None
        }
    }

    /// The download in flight was abandoned at `now_ms` for level
    /// `suggested`, `buffer_ms` buffered: the level changes, the switch
    /// history restarts with that drop, no up-switch for 10 s, and BOLA's
    /// placeholder is clamped.
    pub fn abandoned(&mut self, now_ms: f64, suggested: usize, buffer_ms: f64) {
        let old = self.quality;
        self.switches.reset();
        self.switches.push(old, suggested);
        self.set_quality(suggested);
        self.abandon_until = Some(now_ms + ABANDON_LOAD_TIMEOUT_MS);
        if let Some(b) = self.bola.as_mut() {
            b.abandoned(buffer_ms);
        }
        self.flight = Flight::default();
    }

    /// Heap bytes held.
    pub fn heap_bytes(&self) -> usize {
        self.bitrates.capacity() * std::mem::size_of::<f64>()
            + self.history.heap_bytes()
            + self.switches.heap_bytes()
            + self.bola.as_ref().map_or(0, |b| b.heap_bytes())
            + self.abandoned.capacity() * std::mem::size_of::<usize>()
    }
}
