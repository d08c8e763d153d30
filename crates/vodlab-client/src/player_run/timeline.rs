//! Rendition timelines of a sample of player sessions (`vodlab run
//! --player ... --player-timelines N`, `players.timelines` of
//! `results.json`): what each sampled player fetched, when, at which
//! rendition, how full its buffer was after, and when it stalled.
//!
//! The sample is the `N` smallest session ids of the workload (default
//! [`DEFAULT_TIMELINES`]); shards of one run each keep their own `N`
//! smallest and `vodlab merge` keeps the `N` smallest of the union, which
//! are the run's `N` smallest. Only sampled players keep their per-download
//! records ([`crate::core::player::PlayerConfig::keep_records`]); a timeline
//! holds at most [`MAX_TIMELINE_SEGMENTS`] segments and
//! [`MAX_TIMELINE_EVENTS`] abandoned attempts and rebuffers each (more set
//! `truncated`), so the whole sample is bounded whatever the run's length.
//!
//! The data are the player core's own: its [`SegmentRecord`]s, its
//! buffer level after each download ([`crate::core::player::Player::buffer_ms`])
//! and its stall list ([`crate::core::player::Player::stalls`], the source of the
//! P.1203 input's `I23`). Times are session times: seconds since the
//! session started, its manifest fetch included.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::PlayerSessionOutcome;
use crate::core::player::SegmentRecord;

/// Sessions sampled when `--player-timelines` is not given.
pub const DEFAULT_TIMELINES: usize = 8;
/// Most sessions `--player-timelines` may sample.
pub const MAX_TIMELINES: usize = 1000;
/// Most segments a timeline holds (the first ones).
pub const MAX_TIMELINE_SEGMENTS: usize = 1000;
/// Most abandoned attempts, and most rebuffers, a timeline holds.
pub const MAX_TIMELINE_EVENTS: usize = 200;

/// Rounds to microseconds of a value in seconds (or to µs of ms values
/// given as ms with `1e3`).
fn round(v: f64, per_unit: f64) -> f64 {
    (v * per_unit).round() / per_unit
}

/// One downloaded (played) segment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TimelineSegment {
    /// Segment number (0-based).
    pub index: usize,
    /// Its media time in the title, s.
    pub media_s: f64,
    /// When its request was sent, session time, s.
    pub start_s: f64,
    /// Request to last byte, ms.
    pub download_ms: f64,
    /// Rendition (0: the lowest bit rate).
    pub level: usize,
    /// The rendition's nominal bit rate, kbit/s.
    pub bitrate_kbps: f64,
    /// Buffer level once it arrived, s.
    pub buffer_after_s: f64,
}

/// One abandoned download attempt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TimelineAbandoned {
    /// Segment number.
    pub index: usize,
    /// When its request was sent, session time, s.
    pub start_s: f64,
    /// Until it was abandoned, ms.
    pub download_ms: f64,
    /// Rendition abandoned.
    pub level: usize,
    /// Its nominal bit rate, kbit/s.
    pub bitrate_kbps: f64,
    /// Rendition the rule suggested instead.
    pub suggested_level: Option<usize>,
}

/// One rebuffer (stall) episode after playback started.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TimelineRebuffer {
    /// When playback stopped, session time, s.
    pub start_s: f64,
    /// How long, ms.
    pub duration_ms: f64,
    /// Media time it stopped at, s.
    pub media_s: f64,
}

/// The rendition timeline of one sampled session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionTimeline {
    /// Session id (the script's `#@session id=`).
    pub session: u64,
    /// Client class.
    pub class: String,
    /// Title played.
    pub title: String,
    /// Manifest (and playlists) fetch and parse time, ms.
    pub manifest_ms: f64,
    /// Start-up delay (first segment request to playback start), ms;
    /// `None` when playback never started.
    pub startup_delay_ms: Option<f64>,
    /// Playback start, session time, s.
    pub playback_start_s: Option<f64>,
    /// Why the session failed (its `players.errors` name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Segments downloaded, in order.
    pub segments: Vec<TimelineSegment>,
    /// Abandoned attempts, in order.
    #[serde(default)]
    pub abandoned: Vec<TimelineAbandoned>,
    /// Rebuffers, in order.
    pub rebuffers: Vec<TimelineRebuffer>,
    /// True when a cap ([`MAX_TIMELINE_SEGMENTS`],
    /// [`MAX_TIMELINE_EVENTS`]) left events out.
    #[serde(default)]
    pub truncated: bool,
}

/// Collects one sampled session's timeline as it plays (held by the
/// executor only for sampled sessions).
#[derive(Debug, Clone, PartialEq)]
pub struct TimelineRecorder {
    t: SessionTimeline,
}

impl TimelineRecorder {
    /// An empty timeline of session `session`.
    pub fn new(session: u64, class: &str, title: &str) -> Self {
        Self {
            t: SessionTimeline {
                session,
                class: class.to_string(),
                title: title.to_string(),
                manifest_ms: 0.0,
                startup_delay_ms: None,
                playback_start_s: None,
                error: None,
                segments: Vec::new(),
                abandoned: Vec::new(),
                rebuffers: Vec::new(),
                truncated: false,
            },
        }
    }

    /// A download completed: its record (`download_start_ms` in session
    /// time) and the buffer level just after, ms; `segment_ms` is the
    /// movie's segment duration.
    pub fn segment(&mut self, rec: &SegmentRecord, buffer_after_ms: f64, segment_ms: f64) {
        if self.t.segments.len() >= MAX_TIMELINE_SEGMENTS {
            self.t.truncated = true;
            return;
        }
        self.t.segments.push(TimelineSegment {
            index: rec.index,
            media_s: round(rec.index as f64 * segment_ms / 1e3, 1e6),
            start_s: round(rec.download_start_ms / 1e3, 1e6),
            download_ms: round(rec.download_ms, 1e3),
            level: rec.quality,
            bitrate_kbps: rec.bitrate_kbps,
            buffer_after_s: round(buffer_after_ms / 1e3, 1e6),
        });
    }

    /// The player ended: its abandoned attempts, its stall episodes
    /// (media position, duration; ms) and when playback started (session
    /// time, ms).
    pub fn player_end(
        &mut self,
        abandoned: &[SegmentRecord],
        stalls: &[(f64, f64)],
        playback_start_ms: Option<f64>,
    ) {
        let t = &mut self.t;
        if abandoned.len() > MAX_TIMELINE_EVENTS || stalls.len() > MAX_TIMELINE_EVENTS {
            t.truncated = true;
        }
        t.abandoned = abandoned
            .iter()
            .take(MAX_TIMELINE_EVENTS)
            .map(|r| TimelineAbandoned {
                index: r.index,
                start_s: round(r.download_start_ms / 1e3, 1e6),
                download_ms: round(r.download_ms, 1e3),
                level: r.quality,
                bitrate_kbps: r.bitrate_kbps,
                suggested_level: r.abandoned_to,
            })
            .collect();
        t.playback_start_s = playback_start_ms.map(|s| round(s / 1e3, 1e6));
        t.rebuffers = playback_start_ms
            .map(|s| rebuffers_of(stalls, s))
            .unwrap_or_default();
    }

    /// The finished timeline, with the session's outcome (manifest time,
    /// start-up, error).
    pub fn finish(mut self, o: &PlayerSessionOutcome) -> SessionTimeline {
        self.t.manifest_ms = round(o.manifest_ms, 1e3);
        self.t.startup_delay_ms = o
            .qoe
            .as_ref()
            .filter(|_| self.t.playback_start_s.is_some())
            .map(|q| round(q.startup_delay_ms, 1e3));
        self.t.error = o.error.as_ref().map(|e| e.name().to_string());
        self.t
    }
}

/// Stall episodes (media position, duration; ms) as session-time
/// intervals: playback runs continuously from `playback_start_ms` except
/// during stalls, so a stall at media position `p` begins at
/// `playback_start_ms + p + the earlier stalls' time`. At most
/// [`MAX_TIMELINE_EVENTS`].
pub fn rebuffers_of(stalls: &[(f64, f64)], playback_start_ms: f64) -> Vec<TimelineRebuffer> {
    let mut before = 0.0;
    stalls
        .iter()
        .take(MAX_TIMELINE_EVENTS)
        .map(|&(pos, dur)| {
            let r = TimelineRebuffer {
                start_s: round((playback_start_ms + pos + before) / 1e3, 1e6),
                duration_ms: round(dur, 1e3),
                media_s: round(pos / 1e3, 1e6),
            };
            before += dur;
            r
        })
        .collect()
}

/// The `n` smallest distinct ids of `ids` (memory: `n` ids).
pub fn smallest_ids(ids: impl IntoIterator<Item = u64>, n: usize) -> BTreeSet<u64> {
    let mut set = BTreeSet::new();
    if n == 0 {
        return set;
    }
    for id in ids {
        if set.len() < n {
            set.insert(id);
        } else if set.last().is_some_and(|&l| id < l) && set.insert(id) {
            set.pop_last();
        }
    }
    set
}

/// Adds `t` to a sample of at most `n` timelines, keeping the `n` smallest
/// session ids; a session already there keeps its first timeline (a run
/// plays each session once; this keeps a merge of overlapping parts
/// deterministic).
pub fn keep_smallest(sample: &mut BTreeMap<u64, SessionTimeline>, t: SessionTimeline, n: usize) {
    if n == 0 || sample.contains_key(&t.session) {
        return;
    }
    if sample.len() >= n && sample.last_key_value().is_some_and(|(&k, _)| t.session > k) {
        return;
    }
    sample.insert(t.session, t);
    while sample.len() > n {
        sample.pop_last();
    }
}

#[cfg(test)]
mod tests;
