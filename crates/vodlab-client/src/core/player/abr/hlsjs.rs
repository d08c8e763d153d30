//! hls.js 1.7.4's ABR and buffer as `--player-profile hlsjs` runs them:
//! `src/controller/abr-controller.ts` and the loading loop of
//! `stream-controller.ts` with the defaults of `src/config.ts`, without I/O
//! and with `now` passed in. Units: ms and kbit/s at the interface; hls.js's
//! own (seconds, bit/s) inside, so the formulas read as in its source.
//!
//! - **Estimate** ([`estimator`]): the smaller of two EWMAs of each
//!   fragment's `bits / (load time − min(TTFB, TTFB estimate))` with
//!   half-lives of 3 s and 9 s of download time; 500 kbit/s
//!   (`abrEwmaDefaultEstimate`) until the first sample, raised to the first
//!   listed level's bit rate (at most 5 Mbit/s) when that is higher.
//! - **Start level** (`startLevel` undefined, hls.js's default; no bitrate
//!   test: that needs `startLevel: -1`): `firstAutoLevel`, the highest level
//!   whose bit rate is at most the estimate and that would load within
//!   `maxStarvationDelay` (4 s; a level's playlist not yet loaded costs one
//!   more TTFB, its fragment duration counts as 1 s before any is known).
//! - **Next level** (`getNextABRAutoLevel`, at every fragment): from the top
//!   down, the first level whose bit rate is at most 0.95 × the estimate
//!   (`abrBandWidthFactor`; 0.7 × for a level above the last loaded one,
//!   `abrBandWidthUpFactor`) and whose fragment, at that rate, loads
//!   (TTFB estimate + bits / rate, + one more TTFB for a level whose
//!   playlist is not loaded) before the buffer runs out; failing that,
//!   within the buffer + `min(fragment duration, maxStarvationDelay)`;
//!   failing that level 0 (or the load level when it is level 0).
//! - **Emergency switch-down** (`_abandonRulesCheck`, every 100 ms while a
//!   fragment above level 0 loads, from half its duration on): when the rest
//!   of the fragment at its own rate would take longer than the buffer
//!   lasts, the highest lower level whose fragment would load within
//!   `min(buffer, duration + TTFB)` (level 0 if none) is taken for the next
//!   fragment if it loads sooner than the current one finishes (and in under
//!   10 durations): a partial sample goes into the estimate, the estimator
//!   is reset to that level's bit rate when 0.7 × the estimate is above it,
//!   and the in-flight request is aborted — at once when finishing it would
//!   take over twice as long, else after the new level's load time if it is
//!   still loading — but only when that level is above 0. An abort sends the
//!   player to level 0 (`findBestLevel` at level 0's bit rate) with the
//!   estimator reset to level 0's bit rate; the same fragment is loaded
//!   again there.
//! - **Buffer** (`doTickIdle`): a fragment is requested while the buffer is
//!   below `getMaxBufferLength(level)` = `min(max(8 × maxBufferSize /
//!   bit rate, maxBufferLength), maxMaxBufferLength)` — 60 MB, 30 s, 600 s:
//!   83 s at 5.8 Mbit/s, 274 s at 1.75 Mbit/s — for the level it would load;
//!   a full buffer is looked at again every 100 ms tick.
//!
//! Not modelled: the bitrate test (`startLevel: -1`), level load errors and
//! their penalties, codec tiers, frame rates and HDR (one codec set here),
//! `capLevelToPlayerSize` (off by default), live playlists, playlist load
//! times (vodlab's players load every playlist at the start; hls.js loads a
//! level's when it first switches to it, which only its one-TTFB switch cost
//! stands for), the transmuxer's time and `abrMaxWithRealBitrate` (off).

pub mod estimator;
#[cfg(test)]
mod tests;

use estimator::BandwidthEstimator;

use super::{Context, Progress};
use crate::core::player::movie::Movie;

/// `abrEwmaFastVoD`, s.
pub const EWMA_FAST_S: f64 = 3.0;
/// `abrEwmaSlowVoD`, s.
pub const EWMA_SLOW_S: f64 = 9.0;
/// `abrEwmaDefaultEstimate`, bit/s.
pub const DEFAULT_ESTIMATE_BPS: f64 = 500_000.0;
/// `abrEwmaDefaultEstimateMax`: the first listed level's bit rate raises
/// the default estimate up to this, bit/s.
pub const DEFAULT_ESTIMATE_MAX_BPS: f64 = 5_000_000.0;
/// `abrBandWidthFactor`: the share of the estimate a level at or below
/// the last loaded one may use.
pub const BANDWIDTH_FACTOR: f64 = 0.95;
/// `abrBandWidthUpFactor`: the share for a level above it.
pub const BANDWIDTH_UP_FACTOR: f64 = 0.7;
/// `maxStarvationDelay`, s.
pub const MAX_STARVATION_DELAY_S: f64 = 4.0;
/// `maxLoadingDelay`, s: only used by the bitrate test (`startLevel: -1`),
/// which hls.js's default does not run; kept for the record.
pub const MAX_LOADING_DELAY_S: f64 = 4.0;
/// `maxBufferLength`, ms.
pub const MAX_BUFFER_LENGTH_MS: f64 = 30_000.0;
/// `maxMaxBufferLength`, ms.
pub const MAX_MAX_BUFFER_LENGTH_MS: f64 = 600_000.0;
/// `maxBufferSize`, bytes.
pub const MAX_BUFFER_SIZE_BYTES: f64 = 60_000_000.0;
/// The stream controller's tick (`TICK_INTERVAL`): a full buffer is looked
/// at again after this, ms.
pub const TICK_MS: f64 = 100.0;
/// `_abandonRulesCheck` runs this often while a fragment loads, ms.
pub const ABANDON_CHECK_MS: f64 = 100.0;
/// `lastLevelLoadSec`: a playlist's load time after its first byte, s
/// (vodlab's players have every playlist before they start; a playlist of
/// a few hundred bytes takes no time after its first byte).
pub const LAST_LEVEL_LOAD_S: f64 = 0.0;

/// The emergency decision taken for the fragment in flight.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Emergency {
    index: usize,
    /// Abort then (session ms), if still loading; `None`: nothing pending
    /// (the check timer is cleared either way).
    abort_at: Option<f64>,
    /// The level chosen.
    level: usize,
}

/// hls.js 1.7.4's ABR state (see the module docs).
#[derive(Debug, Clone)]
pub struct HlsJs {
    /// Level bit rates (`maxBitrate`, the playlist's `BANDWIDTH`), bit/s.
    bitrates: Vec<f64>,
    /// Fragment duration, s.
    frag_s: f64,
    /// `averagetargetduration` of a loaded playlist, s.
    avg_frag_s: f64,
    est: BandwidthEstimator,
    /// `lastLoadedFragLevel`.
    last_loaded: Option<usize>,
    /// `hls.loadLevel`.
    load_level: Option<usize>,
    /// `_nextAutoLevel` set from outside the ABR (an emergency): it wins
    /// until a fragment of that level has loaded.
    forced: Option<usize>,
    /// Levels whose playlist hls.js would have loaded (`levels[i].details`).
    details: Vec<bool>,
    /// A fragment has started loading (`fragCurrent` and its duration are
    /// known).
    frag_seen: bool,
    /// `hls.firstLevel`: the first level listed (vodlab's playlists list
    /// the lowest first).
    first_level: usize,
    emergency: Option<Emergency>,
}

/// `getMaxBufferLength` for a level of `kbps`, ms.
pub fn max_buffer_length_ms(kbps: f64) -> f64 {
    let by_size = 8.0 * MAX_BUFFER_SIZE_BYTES / (kbps * 1000.0) * 1000.0;
    by_size.clamp(MAX_BUFFER_LENGTH_MS, MAX_MAX_BUFFER_LENGTH_MS)
}

impl HlsJs {
    /// The state for `movie` before anything loaded.
    pub fn new(movie: &Movie) -> Self {
        let bitrates: Vec<f64> = movie.bitrates_kbps.iter().map(|k| k * 1000.0).collect();
        let first_level = 0;
        // level-controller: the default estimate is raised to the first
        // listed level's bit rate (at most 5 Mbit/s)
        let start = bitrates[first_level].min(DEFAULT_ESTIMATE_MAX_BPS);
        let default = DEFAULT_ESTIMATE_BPS.max(start);
        let n = movie.segments().max(1) as f64;
        Self {
            details: vec![false; bitrates.len()],
            bitrates,
            frag_s: movie.segment_duration_ms / 1000.0,
            avg_frag_s: movie.duration_ms() / n / 1000.0,
            est: BandwidthEstimator::new(EWMA_SLOW_S, EWMA_FAST_S, default),
            last_loaded: None,
            load_level: None,
            forced: None,
            frag_seen: false,
            first_level,
            emergency: None,
        }
    }

    /// The bandwidth estimate (`hls.bandwidthEstimate`), kbit/s.
    pub fn estimate_kbps(&self) -> f64 {
        self.est.estimate_bps() / 1000.0
    }

    /// The TTFB estimate (`hls.ttfbEstimate`), ms.
    pub fn ttfb_estimate_ms(&self) -> f64 {
        self.est.estimate_ttfb_ms()
    }

    /// The estimator.
    pub fn estimator(&self) -> &BandwidthEstimator {
        &self.est
    }

    /// The level forced by an emergency switch-down for the next fragment.
    pub fn forced_level(&self) -> Option<usize> {
        self.forced
    }

    /// `lastLoadedFragLevel`.
    pub fn last_loaded(&self) -> Option<usize> {
        self.last_loaded
    }

    fn top(&self) -> usize {
        self.bitrates.len() - 1
    }

    fn reset_estimator(&mut self, default_bps: f64) {
        self.est = BandwidthEstimator::new(EWMA_SLOW_S, EWMA_FAST_S, default_bps);
    }

    /// `getTimeToLoadFrag`, s.
    fn time_to_load(ttfb_s: f64, bps: f64, bits: f64, switch: bool) -> f64 {
        let load = ttfb_s + bits / bps;
        let playlist = if switch {
            ttfb_s + LAST_LEVEL_LOAD_S
        } else {
            0.0
        };
        load + playlist
    }

    /// `findBestLevel` over levels `0..=max_level`, s and bit/s.
    fn find_best(
        &self,
        bw: f64,
        max_level: usize,
        starvation_s: f64,
        max_starvation_s: f64,
        factor: f64,
        up_factor: f64,
    ) -> Option<usize> {
        if self.bitrates.len() == 1 {
            return Some(0);
        }
        let max_fetch = starvation_s + max_starvation_s;
        let base = self.last_loaded.unwrap_or(self.first_level);
        let first_selection = self.load_level.is_none() || self.last_loaded.is_none();
        // the start tier's lowest bit rate is a floor for the first choice
        let bw = if first_selection {
            bw.max(self.bitrates[0])
        } else {
            bw
        };
        let current_frag_s = if self.frag_seen { self.frag_s } else { 0.0 };
        let ttfb_s = self.est.estimate_ttfb_ms() / 1000.0;
        (0..=max_level.min(self.top())).rev().find(|&i| {
            let avg_s = if self.details[i] {
                self.avg_frag_s
            } else if current_frag_s > 0.0 {
                current_frag_s
            } else {
                1.0
            };
            let adjusted = if i > base { up_factor } else { factor } * bw;
            let bitrate = self.bitrates[i];
            let fetch = Self::time_to_load(ttfb_s, adjusted, bitrate * avg_s, !self.details[i]);
            adjusted >= bitrate && (fetch <= ttfb_s || !fetch.is_finite() || fetch < max_fetch)
        })
    }

    /// `firstAutoLevel` with `buffer_ms` buffered: the level of the first
    /// fragment (and of any before the estimator has a sample).
    pub fn start_level(&self, buffer_ms: f64) -> usize {
        let starvation = buffer_ms.max(0.0) / 1000.0;
        let bw = self.est.estimate_bps();
        self.find_best(
            bw,
            self.top(),
            starvation / 2.0,
            MAX_STARVATION_DELAY_S,
            1.0,
            1.0,
        )
        .unwrap_or(self.first_level.min(self.top()))
    }

    /// `hls.nextAutoLevel` with `buffer_ms` buffered (no side effects): the
    /// forced level, the start level before a fragment loaded, else
    /// `getNextABRAutoLevel`.
    pub fn next_level(&self, buffer_ms: f64) -> usize {
        if let Some(f) = self.forced {
            return f;
        }
        if !self.est.can_estimate() || self.last_loaded.is_none() {
            return self.start_level(buffer_ms);
        }
        let top = self.top();
        if top == 0 {
            return 0;
        }
        let bw = self.est.estimate_bps();
        let starvation = buffer_ms.max(0.0) / 1000.0;
        if starvation > 0.0 {
            if let Some(l) = self.find_best(
                bw,
                top,
                starvation,
                0.0,
                BANDWIDTH_FACTOR,
                BANDWIDTH_UP_FACTOR,
            ) {
                return l;
            }
        }
        let max_starvation = if self.frag_seen {
            self.frag_s.min(MAX_STARVATION_DELAY_S)
        } else {
            MAX_STARVATION_DELAY_S
        };
        if let Some(l) = self.find_best(
            bw,
            top,
            starvation,
            max_starvation,
            BANDWIDTH_FACTOR,
            BANDWIDTH_UP_FACTOR,
        ) {
            return l;
        }
        let load = self.load_level.unwrap_or(0);
        if self.bitrates[0] < self.bitrates[load] {
            0
        } else {
            load
        }
    }

    /// The decision for the next fragment (`c.buffer_ms` buffered).
    pub fn decide(&mut self, c: &Context) -> usize {
        self.next_level(c.buffer_ms)
    }

    /// The buffer level below which the next fragment is requested when it
    /// would be of `level`, ms.
    pub fn buffer_target_ms(&self, level: usize) -> f64 {
        max_buffer_length_ms(self.bitrates[level] / 1000.0)
    }

    /// How long the player waits with `buffer_ms` buffered before its next
    /// request, ms: none below the target of the level it would load, else
    /// to the first 100 ms tick that finds the buffer below it.
    pub fn schedule_wait_ms(&self, buffer_ms: f64) -> f64 {
        let target = self.buffer_target_ms(self.next_level(buffer_ms));
        let over = buffer_ms - target;
        if over < 0.0 {
            0.0
        } else {
            ((over / TICK_MS).floor() + 1.0) * TICK_MS
        }
    }

    /// Fragment `index` of `level` starts loading (`FRAG_LOADING`; the
    /// level is the load level and its playlist is loaded).
    pub fn fragment_loading(&mut self, index: usize, level: usize) {
        let _ = index;
        self.load_level = Some(level);
        self.details[level] = true;
        self.frag_seen = true;
        self.emergency = None;
    }

    /// A fragment of `level` loaded: its time to first byte and load time
    /// (request to last byte), ms, and its size, bits (`FRAG_LOADED`, then
    /// `FRAG_BUFFERED`'s bandwidth sample: the load time less the smaller
    /// of the TTFB and the TTFB estimate, which already has this TTFB).
    pub fn fragment_loaded(&mut self, level: usize, ttfb_ms: f64, load_ms: f64, bits: f64) {
        self.est.sample_ttfb(ttfb_ms);
        if self.forced == Some(level) {
            self.forced = None;
        }
        self.last_loaded = Some(level);
        let processing = load_ms - ttfb_ms.min(self.est.estimate_ttfb_ms());
        self.est.sample(processing, bits / 8.0);
        self.emergency = None;
    }

    /// `_abandonRulesCheck` at `now_ms` for fragment `index` in flight
    /// (`pr`), `buffer_ms` buffered: the level to abort to, when hls.js
    /// aborts the request now (see the module docs; an emergency that only
    /// forces the next fragment's level returns `None` and shows in
    /// [`Self::forced_level`]). The player calls it at most every
    /// [`ABANDON_CHECK_MS`].
    pub fn check_abandon(
        &mut self,
        now_ms: f64,
        index: usize,
        pr: &Progress,
        buffer_ms: f64,
    ) -> Option<usize> {
        let level = pr.quality;
        let buffer_s = buffer_ms.max(0.0) / 1000.0;
        if let Some(e) = self.emergency.filter(|e| e.index == index) {
            // an emergency was declared: the check timer is gone, only its
            // deferred abort remains
            return match e.abort_at {
                Some(at) if now_ms >= at && pr.downloaded_bits < pr.size_bits => {
                    self.emergency = Some(Emergency {
                        abort_at: None,
                        ..e
                    });
                    self.abort_and_switch(e.level, buffer_s)
                }
                _ => None,
            };
        }
        if pr.downloaded_bits >= pr.size_bits || level == 0 {
            // complete or the lowest level: the timer stops, the forced
            // level is dropped
            self.forced = None;
            return None;
        }
        let frag_s = self.frag_s;
        let time_loading = pr.elapsed_ms;
        let ttfb_estimate = self.est.estimate_ttfb_ms();
        if time_loading <= ttfb_estimate.max(1000.0 * frag_s / 2.0) {
            return None;
        }
        let loaded_first_byte = pr.downloaded_bits > 0.0;
        let ttfb = pr.ttfb_ms;
        let bw_estimate = self.est.estimate_bps();
        let loaded_bytes = pr.downloaded_bits / 8.0;
        let expected_bytes = loaded_bytes.max((frag_s * self.bitrates[level] / 8.0).round());
        let mut streaming = if loaded_first_byte {
            time_loading - ttfb
        } else {
            time_loading
        };
        if streaming < 1.0 && loaded_first_byte {
            // hls.js's own mix of units (s against ms) kept as it is
            streaming = time_loading.min(loaded_bytes * 8.0 / bw_estimate);
        }
        let load_rate = if loaded_first_byte {
            loaded_bytes * 1000.0 / streaming
        } else {
            0.0
        };
        let ttfb_s = ttfb_estimate / 1000.0;
        let frag_loaded_delay = if load_rate > 0.0 {
            (expected_bytes - loaded_bytes) / load_rate
        } else {
            expected_bytes * 8.0 / bw_estimate + ttfb_s
        };
        if frag_loaded_delay <= buffer_s {
            return None;
        }
        let bwe = if load_rate > 0.0 {
            load_rate * 8.0
        } else {
            bw_estimate
        };
        let mut next = level - 1;
        let mut next_delay = f64::INFINITY;
        while next > 0 {
            next_delay = Self::time_to_load(
                ttfb_s,
                bwe,
                frag_s * self.bitrates[next],
                !self.details[next],
            );
            if next_delay < buffer_s.min(frag_s + ttfb_s) {
                break;
            }
            next -= 1;
        }
        if next_delay >= frag_loaded_delay || next_delay > frag_s * 10.0 {
            return None;
        }
        if loaded_first_byte {
            self.est
                .sample(time_loading - ttfb_estimate.min(ttfb), loaded_bytes);
        } else {
            self.est.sample_ttfb(time_loading);
        }
        let next_bitrate = self.bitrates[next];
        if self.est.estimate_bps() * BANDWIDTH_UP_FACTOR > next_bitrate {
            self.reset_estimator(next_bitrate);
        }
        if let Some(b) = self.find_best(next_bitrate, next, 0.0, buffer_s, 1.0, 1.0) {
            next = b;
        }
        let blocking = self.forced.is_some_and(|f| f != level);
        self.forced = Some(next);
        self.load_level = Some(next);
        self.details[next] = true;
        if blocking || frag_loaded_delay > next_delay * 2.0 {
            self.emergency = Some(Emergency {
                index,
                abort_at: None,
                level: next,
            });
            self.abort_and_switch(next, buffer_s)
        } else {
            self.emergency = Some(Emergency {
                index,
                abort_at: Some(now_ms + next_delay * 1000.0),
                level: next,
            });
            None
        }
    }

    /// `abortAndSwitch` (the fragment still loading): above level 0 the
    /// request is aborted and the player goes to the level
    /// `findBestLevel` finds at level 0's bit rate (level 0) with the
    /// estimator reset to its bit rate.
    fn abort_and_switch(&mut self, level: usize, buffer_s: f64) -> Option<usize> {
        if level == 0 {
            return None;
        }
        let lowest = self
            .find_best(self.bitrates[0], level, 0.0, buffer_s, 1.0, 1.0)
            .unwrap_or(0);
        self.forced = Some(lowest);
        self.load_level = Some(lowest);
        self.details[lowest] = true;
        self.reset_estimator(self.bitrates[lowest]);
        Some(lowest)
    }

    /// Heap bytes held.
    pub fn heap_bytes(&self) -> usize {
        self.bitrates.capacity() * std::mem::size_of::<f64>() + self.details.capacity()
    }
}
