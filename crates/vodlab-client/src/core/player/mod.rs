//! Closed-loop adaptive players, without I/O.
//!
//! A [`Player`] plays one [`Movie`]: it picks each segment's level with an
//! ABR rule ([`abr`]), keeps a playout buffer ([`buffer`]) with a capacity
//! (it waits while the next segment would not fit), may abandon a download
//! that would arrive too late, and accounts QoE ([`qoe`]). Like
//! [`crate::core::driver::SessionDriver`] it never reads a clock or touches a
//! socket:
//!
//! - [`Player::poll_action`]`(now)`: the next thing to do — fetch segment
//!   *i* at level *q* (its size in bits and bytes), abandon the download in
//!   flight, wait until a time, or done;
//! - [`Player::handle`]`(now, event)`: what happened — the request was sent,
//!   bytes arrived (progress), the download completed or failed;
//! - [`Player::poll_timeout`]: when to call `poll_action` again if nothing
//!   happens (the end of a full-buffer wait).
//!
//! `now` is session time in ms as `f64` (a live executor passes the time
//! since the session started, in ms; [`sim`] passes its virtual clock): the
//! ABR formulas, Sabre's arithmetic and the oracle tests are in f64 ms, so
//! the player keeps them rather than [`crate::core::time::Time`]. One
//! download is in flight at a time. The virtual-time executor [`sim`] runs a
//! player over a Sabre bandwidth trace; `vodlab simulate --player` prints
//! its records.
//!
//! The session follows Sabre (github.com/UMass-LIDS/sabre, `09b03bb`): the
//! first segment at the lowest level, playback from its arrival, a
//! full-buffer wait before each later request until the buffer holds at
//! most `max_buffer − segment`, and after an abandonment a fresh decision
//! for the same segment (Sabre's behaviour at that commit; set
//! [`PlayerConfig::apply_abandon_suggestion`] to fetch the rule's suggested
//! level instead). docs/abr.md has the details.

pub mod abr;
pub mod buffer;
pub mod estimate;
pub mod movie;
pub mod profile;
pub mod qoe;
pub mod sim;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use serde::{Deserialize, Serialize};

pub use abr::{bolae, AbrParams, AbrRule};
pub use movie::Movie;
pub use profile::PlayerProfile;
pub use qoe::QoeSummary;

use abr::{Abr, Context, Progress};
use buffer::PlayoutBuffer;
use estimate::Ewma;

/// Errors of the player core: bad inputs (the key is named) and failed
/// sessions.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PlayerError {
    /// A document did not parse.
    #[error("{what}: {detail}")]
    Parse {
        /// What was parsed ("movie", "trace").
        what: &'static str,
        /// The parser's message.
        detail: String,
    },
    /// A value is out of range.
    #[error("{key}: {why}")]
    Invalid {
        /// The offending key.
        key: &'static str,
        /// Why.
        why: String,
    },
    /// A segment download failed; the session ended.
    #[error("segment {index} failed: {reason}")]
    SegmentFailed {
        /// The segment.
        index: usize,
        /// What the executor said.
        reason: String,
    },
}

/// Settings of a player. Defaults are Sabre's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PlayerConfig {
    /// The profile: `dashjs` and `hlsjs` replace the rule ([`Self::abr`]),
    /// the buffer capacity and the session's behaviour with dash.js
    /// 4.7.4's or hls.js 1.7.4's ([`profile`]).
    pub profile: PlayerProfile,
    /// The ABR rule.
    pub abr: AbrRule,
    /// Buffer capacity, ms (Sabre 25 s).
    pub max_buffer_ms: f64,
    /// Half-lives of the throughput EWMAs, ms (dash.js/Sabre 3 s and 8 s).
    pub half_life_ms: Vec<f64>,
    /// Check abandonment while downloading.
    pub abandon: bool,
    /// After an abandonment fetch the level the rule suggested (off:
    /// decide again, as Sabre at `09b03bb` does).
    pub apply_abandon_suggestion: bool,
    /// Abandonment is checked at a `Progress` only once this many bits
    /// arrived since the last check... (0: at every `Progress`; the
    /// simulator reports at Sabre's steps itself)
    pub abandon_check_min_bits: f64,
    /// ...and this many ms passed since it (since the request was sent for
    /// the first check). A live executor that reports every read sets
    /// Sabre's 12 000 bits and 50 ms here.
    pub abandon_check_min_ms: f64,
    /// Keep a [`SegmentRecord`] per download and abandoned attempt (off:
    /// only the levels played, 2 bytes a segment, for players run by the
    /// thousand; QoE and the P.1203 input need no more).
    pub keep_records: bool,
    /// Rule parameters.
    pub params: AbrParams,
    /// Weight of the server's CMSD `etp` in each throughput sample
    /// ([`estimate::blend_etp`]; dash.js's `etpWeightRatio`), 0 to 1; 0
    /// (the default): the server's estimate is not used. Only a download
    /// whose `etp` was reported ([`Player::report_server_etp`]) is mixed.
    pub etp_weight: f64,
}

impl Default for PlayerConfig {
    fn default() -> Self {
        Self {
            profile: PlayerProfile::Sabre,
            abr: AbrRule::Dynamic,
            max_buffer_ms: 25_000.0,
            half_life_ms: vec![3_000.0, 8_000.0],
            abandon: true,
            apply_abandon_suggestion: false,
            abandon_check_min_bits: 0.0,
            abandon_check_min_ms: 0.0,
            keep_records: true,
            params: AbrParams::default(),
            etp_weight: 0.0,
        }
    }
}

impl PlayerConfig {
    /// dash.js 4.7.4's player ([`PlayerProfile::Dashjs`]); the buffer
    /// capacity is reported as dash.js's 30 s top-level target (the
    /// profile's own targets decide when a request leaves).
    pub fn dashjs() -> Self {
        Self {
            profile: PlayerProfile::Dashjs,
            max_buffer_ms: abr::dashjs::TOP_QUALITY_BUFFER_MS,
            ..Self::default()
        }
    }

    /// hls.js 1.7.4's player ([`PlayerProfile::Hlsjs`]); the buffer
    /// capacity is reported as hls.js's `maxBufferLength`, 30 s (the
    /// profile's own target, `max(30 s, 60 MB / bit rate)` up to 600 s,
    /// decides when a request leaves), and abandonment is looked at every
    /// 100 ms as hls.js's `_abandonRulesCheck` timer does.
    pub fn hlsjs() -> Self {
        Self {
            profile: PlayerProfile::Hlsjs,
            max_buffer_ms: abr::hlsjs::MAX_BUFFER_LENGTH_MS,
            abandon_check_min_ms: abr::hlsjs::ABANDON_CHECK_MS,
            ..Self::default()
        }
    }

    /// Checks the settings against `movie`; errors name the key.
    pub fn validate(&self, movie: &Movie) -> Result<(), PlayerError> {
        if !(self.max_buffer_ms.is_finite() && self.max_buffer_ms >= movie.segment_duration_ms) {
            return Err(PlayerError::Invalid {
                key: "max_buffer_ms",
                why: format!(
                    "{} ms holds less than one {} ms segment",
                    self.max_buffer_ms, movie.segment_duration_ms
                ),
            });
        }
        if self.half_life_ms.is_empty()
            || self
                .half_life_ms
                .iter()
                .any(|h| !(h.is_finite() && *h > 0.0))
        {
            return Err(PlayerError::Invalid {
                key: "half_life_ms",
                why: "needs one or more positive half-lives".into(),
            });
        }
        if !(self.etp_weight.is_finite() && (0.0..=1.0).contains(&self.etp_weight)) {
            return Err(PlayerError::Invalid {
                key: "etp_weight",
                why: format!("{} is not between 0 and 1", self.etp_weight),
            });
        }
        for (key, v) in [
            ("abandon_check_min_bits", self.abandon_check_min_bits),
            ("abandon_check_min_ms", self.abandon_check_min_ms),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return Err(PlayerError::Invalid {
                    key,
                    why: format!("{v} is not a number ≥ 0"),
                });
            }
        }
        self.params.validate()
    }
}

/// What happened, told to [`Player::handle`].
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// The request of the fetch in flight left now (optional: by default it
    /// left when the fetch was polled).
    Sent,
    /// `received_bits` of the segment in flight have arrived in all.
    Progress {
        /// Bits received so far.
        received_bits: f64,
        /// The executor's own timing of the request; `None`: measured from
        /// `now` (elapsed since sent; time to first byte at the first
        /// progress).
        timing: Option<Timing>,
    },
    /// The segment in flight arrived whole.
    Completed {
        /// As in `Progress`.
        timing: Option<Timing>,
    },
    /// The segment in flight failed; the session ends.
    Failed {
        /// Why.
        reason: String,
    },
}

/// A request's timing as the executor measured it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Timing {
    /// Time since the request was sent, ms.
    pub elapsed_ms: f64,
    /// Time to first byte, ms.
    pub ttfb_ms: f64,
}

/// A player's state at a point in time ([`Player::state_at`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PlayerState {
    /// Media buffered, ms.
    pub buffer_ms: f64,
    /// Level of the segment at the playhead (the last one played during a
    /// stall); `None` before playback started.
    pub playhead: Option<usize>,
    /// Stall time so far, ms (start-up excluded).
    pub rebuffer_ms: f64,
    /// Playback has started (the first segment arrived).
    pub playing: bool,
}

/// What to do, from [`Player::poll_action`].
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Download segment `index` at `quality`; report progress and the end.
    Fetch {
        /// Segment.
        index: usize,
        /// Level.
        quality: usize,
        /// Size, bits.
        bits: f64,
        /// Size, bytes (bits / 8 rounded up).
        bytes: u64,
    },
    /// Cancel the download in flight (its bytes are thrown away).
    Abandon {
        /// Segment.
        index: usize,
        /// Level that was being fetched.
        quality: usize,
        /// The lower level the rule suggested.
        suggested: usize,
    },
    /// Nothing to do before `until` (the buffer is full).
    WaitUntil {
        /// Session time, ms.
        until: f64,
        /// `until − now` as computed by the player (an executor that keeps
        /// its own clock adds this, not the difference, to stay exact), ms.
        wait_ms: f64,
    },
    /// Every segment is downloaded; playback ends at `ends_at`.
    Done {
        /// Session time the last segment finishes playing, ms.
        ends_at: f64,
    },
}

/// One completed (or abandoned) download.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SegmentRecord {
    /// Segment.
    pub index: usize,
    /// Level.
    pub quality: usize,
    /// Nominal bit rate of the level, kbit/s.
    pub bitrate_kbps: f64,
    /// Throughput estimate the rule saw (none for segment 0), kbit/s.
    pub throughput_estimate_kbps: Option<f64>,
    /// Latency estimate the rule saw, ms.
    pub latency_estimate_ms: Option<f64>,
    /// Full-buffer wait just before the decision, ms.
    pub full_buffer_wait_ms: f64,
    /// Pause the rule asked for after deciding (BOLA-E), ms.
    pub abr_delay_ms: f64,
    /// Session time the request was sent, ms.
    pub download_start_ms: f64,
    /// Buffer level when it was sent, ms.
    pub buffer_ms_before: f64,
    /// Time to first byte, ms.
    pub ttfb_ms: f64,
    /// Request time, latency included, ms.
    pub download_ms: f64,
    /// Stall time during the request, ms.
    pub rebuffer_ms: f64,
    /// Bits received (the size, unless abandoned).
    pub downloaded_bits: f64,
    /// Abandoned: the level the rule suggested.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub abandoned_to: Option<usize>,
}

#[derive(Debug, Clone)]
struct Flight {
    index: usize,
    quality: usize,
    bits: f64,
    sent_at: f64,
    phase_start: f64,
    buffer_before: f64,
    wait_ms: f64,
    abr_delay_ms: f64,
    tput: Option<f64>,
    lat: Option<f64>,
    received: f64,
    timing: Option<Timing>,
    ttfb: Option<f64>,
    rebuffer_before: f64,
    /// Bits and elapsed ms at the last abandonment check.
    checked: (f64, f64),
    /// The server's CMSD `etp` for this download, kbit/s
    /// ([`Player::report_server_etp`]).
    etp: Option<f64>,
}

#[derive(Debug, Clone)]
enum State {
    Start,
    Idle,
    /// A pause the rule asked for (BOLA-E) before fetching `quality`.
    Delaying {
        until: f64,
        delay_ms: f64,
        since: f64,
        quality: usize,
        wait_ms: f64,
    },
    Waiting {
        until: f64,
        wait_ms: f64,
        since: f64,
    },
    Downloading(Flight),
    Done,
    Failed,
}

/// Times within this of a wait's end count as reached (float noise), ms.
const TIME_EPS_MS: f64 = 1e-9;
/// Idle gaps shorter than this are float noise of the executor's clock and
/// not played out, ms.
pub const GAP_EPS_MS: f64 = 1e-6;

/// One player (see the module docs).
#[derive(Debug, Clone)]
pub struct Player {
    movie: Arc<Movie>,
    cfg: PlayerConfig,
    abr: Abr,
    est: Ewma,
    buffer: PlayoutBuffer,
    state: State,
    clock: Option<f64>,
    next: usize,
    pending_abandon: Option<usize>,
    suggestion: Option<usize>,
    records: Vec<SegmentRecord>,
    abandoned: Vec<SegmentRecord>,
    played: Vec<u16>,
    abandoned_count: usize,
    error: Option<PlayerError>,
    first_ready_ms: Option<f64>,
    start_ms: Option<f64>,
    /// The highest bit rate a request may have, kbit/s
    /// ([`Player::cap_bitrate`]).
    cap_kbps: Option<f64>,
}

impl Player {
    /// A player of `movie` with `cfg` (validated here).
    pub fn new(movie: Arc<Movie>, cfg: PlayerConfig) -> Result<Self, PlayerError> {
        movie.validate()?;
        cfg.validate(&movie)?;
        Ok(Self {
            abr: match cfg.profile {
                PlayerProfile::Sabre => Abr::new(cfg.abr, cfg.params, &movie, cfg.max_buffer_ms),
                PlayerProfile::Dashjs => Abr::dashjs(&movie),
                PlayerProfile::Hlsjs => Abr::hlsjs(&movie),
            },
            est: Ewma::new(&cfg.half_life_ms, movie.segment_duration_ms),
            buffer: PlayoutBuffer::new(movie.segment_duration_ms),
            movie,
            cfg,
            state: State::Start,
            clock: None,
            next: 0,
            pending_abandon: None,
            suggestion: None,
            records: Vec::new(),
            abandoned: Vec::new(),
            played: Vec::new(),
            abandoned_count: 0,
            error: None,
            first_ready_ms: None,
            start_ms: None,
            cap_kbps: None,
        })
    }

    /// Caps the bit rate of the requests from now on at `kbps` (a server's
    /// CMSD `mb`), or lifts the cap (`None`): whatever the ABR rule (or an
    /// abandonment's suggestion) chooses, the request is for the highest
    /// level whose bit rate is at most the cap, the lowest level when none
    /// is. A request already in flight is not changed.
    pub fn cap_bitrate(&mut self, kbps: Option<f64>) {
        self.cap_kbps = kbps;
    }

    /// The server's estimated throughput to this player for the download in
    /// flight, kbit/s (CMSD-Dynamic `etp` of its response), or none: when
    /// the download completes, its throughput sample is mixed with it by
    /// the configured weight ([`PlayerConfig::etp_weight`],
    /// [`estimate::blend_etp`]) before it enters the estimate. Ignored
    /// when nothing is downloading.
    pub fn report_server_etp(&mut self, kbps: Option<f64>) {
        if let State::Downloading(f) = &mut self.state {
            f.etp = kbps;
        }
    }

    /// The cap [`Self::cap_bitrate`] set.
    pub fn bitrate_cap(&self) -> Option<f64> {
        self.cap_kbps
    }

    /// `quality` under the cap.
    fn capped(&self, quality: usize) -> usize {
        let Some(cap) = self.cap_kbps else {
            return quality;
        };
        let rates = &self.movie.bitrates_kbps;
        let top = rates.iter().rposition(|&b| b <= cap).unwrap_or(0);
        quality.min(top)
    }

    /// The movie.
    pub fn movie(&self) -> &Movie {
        &self.movie
    }

    /// The settings.
    pub fn config(&self) -> &PlayerConfig {
        &self.cfg
    }

    /// Buffer level, ms, as of the end of the last wait or download (the
    /// buffer is played out at the end of each phase).
    pub fn buffer_ms(&self) -> f64 {
        self.buffer.level_ms()
    }

    /// The player's state at `now` (session time, ms), for the CMCD of a
    /// request leaving then: the buffer played out to `now` (during a
    /// download or a wait the player plays it only at the phase's end; this
    /// plays a copy), the level at the playhead and the stall time so far.
    pub fn state_at(&self, now: f64) -> PlayerState {
        let since = match &self.state {
            State::Downloading(f) => Some(f.phase_start),
            State::Waiting { since, .. } | State::Delaying { since, .. } => Some(*since),
            State::Start | State::Idle => self.clock,
            State::Done | State::Failed => None,
        };
        let elapsed = since.map_or(0.0, |s| now - s);
        let mut buffer = std::borrow::Cow::Borrowed(&self.buffer);
        if elapsed > GAP_EPS_MS {
            buffer.to_mut().deplete(elapsed);
        }
        PlayerState {
            buffer_ms: buffer.level_ms(),
            playhead: buffer.playhead_level(),
            rebuffer_ms: buffer.rebuffer_ms(),
            playing: buffer.started(),
        }
    }

    /// The throughput estimate, kbit/s (the hlsjs profile: hls.js's own,
    /// its default before the first sample).
    pub fn throughput_estimate(&self) -> Option<f64> {
        match &self.abr {
            Abr::Hlsjs(h) => Some(h.estimate_kbps()),
            _ => self.est.throughput(),
        }
    }

    /// Levels of the segments downloaded so far, in play order.
    pub fn played(&self) -> &[u16] {
        &self.played
    }

    /// The viewer has every segment it came for and leaves at `now` (ms):
    /// what it holds is played out, as at the end of a title — it is
    /// downloaded, so without a stall — and counted in the session's time,
    /// so the QoE's played time and time-average bit rate cover the media
    /// the viewer watched, not only the time until its last download.
    pub fn leave(&mut self, now: f64) {
        self.advance(now);
        self.buffer.drain();
        self.state = State::Done;
    }

    /// Stall episodes so far as (media position, duration), ms: the
    /// source of the P.1203 input's `I23` and of the run's rendition
    /// timelines.
    pub fn stalls(&self) -> &[(f64, f64)] {
        self.buffer.stalls()
    }

    /// Session time playback started at (the first poll plus the start-up
    /// the buffer counted), ms; `None` before the first segment arrived.
    pub fn playback_start_ms(&self) -> Option<f64> {
        let start = self.start_ms?;
        self.buffer
            .started()
            .then(|| start + self.buffer.startup_ms())
    }

    /// Completed downloads, in order (empty unless
    /// [`PlayerConfig::keep_records`]).
    pub fn records(&self) -> &[SegmentRecord] {
        &self.records
    }

    /// Abandoned attempts, in order (empty unless
    /// [`PlayerConfig::keep_records`]).
    pub fn abandoned(&self) -> &[SegmentRecord] {
        &self.abandoned
    }

    /// Approximate memory this player holds, bytes: the struct and the
    /// capacity of its vectors (the movie is shared and not counted).
    pub fn memory_bytes(&self) -> usize {
        use std::mem::size_of;
        size_of::<Self>()
            + (self.records.capacity() + self.abandoned.capacity()) * size_of::<SegmentRecord>()
            + self.played.capacity() * size_of::<u16>()
            + self.buffer.heap_bytes()
            + self.est.heap_bytes()
            + self.abr.heap_bytes()
    }

    /// True once [`Action::Done`] was returned or the session failed.
    pub fn is_finished(&self) -> bool {
        matches!(self.state, State::Done | State::Failed)
    }

    /// Why the session failed, if it did.
    pub fn error(&self) -> Option<&PlayerError> {
        self.error.as_ref()
    }

    /// When `poll_action` must next be called if no event arrives.
    pub fn poll_timeout(&self) -> Option<f64> {
        match self.state {
            State::Waiting { until, .. } | State::Delaying { until, .. } => Some(until),
            State::Start | State::Idle => self.clock.or(Some(0.0)),
            _ => None,
        }
    }

    /// Plays the buffer out to `now` between phases (idle gaps longer than
    /// [`GAP_EPS_MS`]); during a wait or a download the buffer is played at
    /// the phase's end by the phase's own duration, so that an executor that
    /// times phases exactly (the simulator) gets exactly its arithmetic.
    fn advance(&mut self, now: f64) {
        match self.clock {
            None => {
                self.clock = Some(now);
                self.start_ms = Some(now);
            }
            Some(c) => {
                if matches!(self.state, State::Start | State::Idle) && now - c > GAP_EPS_MS {
                    self.buffer.deplete(now - c);
                }
                if now > c {
                    self.clock = Some(now);
                }
            }
        }
    }

    /// Ends a phase (wait or download) that began at `start` and lasted
    /// `duration` ms, at `now`.
    fn end_phase(&mut self, now: f64, duration: f64) {
        self.buffer.deplete(duration);
        self.clock = Some(self.clock.map_or(now, |c| c.max(now)));
    }

    /// The next action at `now`; `None`: nothing until an event or
    /// [`Self::poll_timeout`].
    pub fn poll_action(&mut self, now: f64) -> Option<Action> {
        self.advance(now);
        match &self.state {
            State::Start => {
                let q = self.abr.first_quality();
                Some(self.fetch(now, 0, q, 0.0, 0.0))
            }
            State::Idle => {
                if self.next >= self.movie.segments() {
                    let ends_at = now + self.buffer.level_ms();
                    self.buffer.drain();
                    self.state = State::Done;
                    return Some(Action::Done { ends_at });
                }
                let full = match &self.abr {
                    Abr::Dashjs(d) => d.schedule_wait_ms(self.buffer.level_ms()),
                    Abr::Hlsjs(h) => h.schedule_wait_ms(self.buffer.level_ms()),
                    _ => {
                        self.buffer.level_ms() + self.movie.segment_duration_ms
                            - self.cfg.max_buffer_ms
                    }
                };
                if full > 0.0 {
                    let until = now + full;
                    self.state = State::Waiting {
                        until,
                        wait_ms: full,
                        since: now,
                    };
                    return Some(Action::WaitUntil {
                        until,
                        wait_ms: full,
                    });
                }
                Some(self.decide_and_fetch(now, 0.0))
            }
            State::Waiting {
                until,
                wait_ms,
                since,
            } => {
                let (until, wait, since) = (*until, *wait_ms, *since);
                if now < until - TIME_EPS_MS {
                    return None;
                }
                let played = if (now - until).abs() <= GAP_EPS_MS {
                    wait
                } else {
                    now - since
                };
                self.end_phase(now, played);
                self.abr.report_delay(played);
                self.state = State::Idle;
                Some(self.decide_and_fetch(now, played))
            }
            State::Delaying {
                until,
                delay_ms,
                since,
                quality,
                wait_ms,
            } => {
                let (until, delay, since, q, wait) =
                    (*until, *delay_ms, *since, *quality, *wait_ms);
                if now < until - TIME_EPS_MS {
                    return None;
                }
                let played = if (now - until).abs() <= GAP_EPS_MS {
                    delay
                } else {
                    now - since
                };
                self.end_phase(now, played);
                let buf = self.buffer.level_ms();
                let a = self.fetch(now, self.next, q, wait, buf);
                if let State::Downloading(f) = &mut self.state {
                    f.abr_delay_ms = played;
                }
                Some(a)
            }
            State::Downloading(f) => {
                let suggested = self.pending_abandon.take()?;
                let f = f.clone();
                self.abandon(now, f, suggested)
            }
            State::Done | State::Failed => None,
        }
    }

    fn decide_and_fetch(&mut self, now: f64, wait_ms: f64) -> Action {
        let mut index = self.next;
        let browser = self.cfg.profile != PlayerProfile::Sabre;
        let mut changed = false;
        let (q, delay) = match self.suggestion.take() {
            // dash.js and hls.js refetch an abandoned segment at the
            // suggested level
            Some(q) if self.cfg.apply_abandon_suggestion || browser => (q, 0.0),
            _ => {
                let c = Context {
                    movie: &self.movie,
                    index,
                    buffer_ms: self.buffer.level_ms(),
                    throughput_kbps: self.est.throughput(),
                    latency_ms: self.est.latency(),
                    max_buffer_ms: self.cfg.max_buffer_ms,
                    now_ms: now,
                };
                match &mut self.abr {
                    Abr::Dashjs(d) => {
                        let x = d.decide(&c);
                        changed = x.changed && !d.abandon_load(now);
                        (x.quality, x.delay_ms)
                    }
                    abr => abr.decide(&c),
                }
            }
        };
        if changed {
            if let Some(i) = self.fast_switch_from(q) {
                index = i;
                self.next = i;
            }
        }
        if delay > 0.0 {
            let until = now + delay;
            self.state = State::Delaying {
                until,
                delay_ms: delay,
                since: now,
                quality: q,
                wait_ms,
            };
            return Action::WaitUntil {
                until,
                wait_ms: delay,
            };
        }
        self.fetch(now, index, q, wait_ms, self.buffer.level_ms())
    }

    /// dash.js's fast switching after a change to level `q`: the buffered
    /// segment 1.5 segment durations ahead of the playhead, when it is of
    /// a lower level and the buffer holds that much, and every later one
    /// are fetched again (the next request's index).
    fn fast_switch_from(&self, q: usize) -> Option<usize> {
        let seg = self.movie.segment_duration_ms;
        let safe = abr::dashjs::FAST_SWITCH_SEGMENTS * seg;
        if self.buffer.level_ms() < safe {
            return None;
        }
        let i = ((self.buffer.position_ms() + safe) / seg).floor() as usize;
        (i < self.played.len() && usize::from(self.played[i]) < q).then_some(i)
    }

    fn fetch(&mut self, now: f64, index: usize, quality: usize, wait_ms: f64, buf: f64) -> Action {
        let quality = self.capped(quality);
        let bits = self.movie.size_bits(index, quality);
        if let Abr::Hlsjs(h) = &mut self.abr {
            h.fragment_loading(index, quality);
        }
        self.state = State::Downloading(Flight {
            index,
            quality,
            bits,
            sent_at: now,
            phase_start: now,
            buffer_before: buf,
            wait_ms,
            abr_delay_ms: 0.0,
            tput: match &self.abr {
                Abr::Dashjs(d) => d.history().average_throughput(),
                Abr::Hlsjs(h) => Some(h.estimate_kbps()),
                _ => self.est.throughput(),
            },
            lat: match &self.abr {
                Abr::Dashjs(d) => d.history().average_latency(),
                Abr::Hlsjs(h) => Some(h.ttfb_estimate_ms()),
                _ => self.est.latency(),
            },
            received: 0.0,
            timing: None,
            ttfb: None,
            rebuffer_before: self.buffer.rebuffer_ms(),
            checked: (0.0, 0.0),
            etp: None,
        });
        Action::Fetch {
            index,
            quality,
            bits,
            bytes: (bits / 8.0).ceil() as u64,
        }
    }

    fn record(&self, f: &Flight, t: Timing, abandoned_to: Option<usize>) -> SegmentRecord {
        SegmentRecord {
            index: f.index,
            quality: f.quality,
            bitrate_kbps: self.movie.bitrates_kbps[f.quality],
            throughput_estimate_kbps: f.tput,
            latency_estimate_ms: f.lat,
            full_buffer_wait_ms: f.wait_ms,
            abr_delay_ms: f.abr_delay_ms,
            download_start_ms: f.sent_at,
            buffer_ms_before: f.buffer_before,
            ttfb_ms: t.ttfb_ms,
            download_ms: t.elapsed_ms,
            rebuffer_ms: self.buffer.rebuffer_ms() - f.rebuffer_before,
            downloaded_bits: f.received,
            abandoned_to,
        }
    }

    fn timing(f: &Flight, now: f64, given: Option<Timing>) -> Timing {
        given.unwrap_or_else(|| Timing {
            elapsed_ms: now - f.sent_at,
            ttfb_ms: f.ttfb.unwrap_or(now - f.sent_at),
        })
    }

    fn abandon(&mut self, now: f64, f: Flight, suggested: usize) -> Option<Action> {
        let t = f.timing.unwrap_or_else(|| Self::timing(&f, now, None));
        let played = f.timing.map_or(now - f.phase_start, |t| t.elapsed_ms);
        self.end_phase(now, played);
        let level = self.buffer.level_ms();
        self.abr
            .report_download(&self.movie, f.quality, Some(suggested), t.elapsed_ms, level);
        if let Abr::Dashjs(d) = &mut self.abr {
            d.abandoned(now, suggested, level);
        }
        self.abandoned_count += 1;
        if self.cfg.keep_records {
            let r = self.record(&f, t, Some(suggested));
            self.abandoned.push(r);
        }
        self.suggestion = Some(suggested);
        self.state = State::Idle;
        Some(Action::Abandon {
            index: f.index,
            quality: f.quality,
            suggested,
        })
    }

    /// Tells the player what happened at `now`.
    pub fn handle(&mut self, now: f64, event: Event) {
        self.advance(now);
        let State::Downloading(f) = &mut self.state else {
            return;
        };
        match event {
            Event::Sent => {
                f.sent_at = now;
            }
            Event::Progress {
                received_bits,
                timing,
            } => {
                if f.ttfb.is_none() && received_bits > 0.0 {
                    f.ttfb = Some(now - f.sent_at);
                }
                f.received = received_bits;
                let t = Self::timing(f, now, timing);
                f.timing = Some(t);
                // Sabre never abandons the first segment; dash.js and hls.js
                // may
                let first = f.index == 0 && self.cfg.profile == PlayerProfile::Sabre;
                if !self.cfg.abandon
                    || first
                    || received_bits >= f.bits
                    || self.pending_abandon.is_some()
                {
                    return;
                }
                if received_bits - f.checked.0 < self.cfg.abandon_check_min_bits
                    || t.elapsed_ms - f.checked.1 < self.cfg.abandon_check_min_ms
                {
                    return;
                }
                f.checked = (received_bits, t.elapsed_ms);
                let pr = Progress {
                    quality: f.quality,
                    size_bits: f.bits,
                    downloaded_bits: received_bits,
                    elapsed_ms: t.elapsed_ms,
                    ttfb_ms: t.ttfb_ms,
                };
                let buf = (f.buffer_before - t.elapsed_ms).max(0.0);
                let index = f.index;
                let lat = self.est.latency().unwrap_or(0.0);
                self.pending_abandon = match &mut self.abr {
                    Abr::Hlsjs(h) => h.check_abandon(now, index, &pr, buf),
                    abr => abr.check_abandon(&self.movie, index, &pr, buf, lat),
                };
            }
            Event::Completed { timing } => {
                let mut f = f.clone();
                // what arrived (a live executor's byte count), else the size
                let received = if f.received > 0.0 { f.received } else { f.bits };
                f.received = f.bits;
                let t = Self::timing(&f, now, timing);
                if f.index == 0 {
                    self.first_ready_ms = Some(t.elapsed_ms);
                }
                let played = timing.map_or(now - f.phase_start, |t| t.elapsed_ms);
                self.end_phase(now, played);
                let before = self.buffer.level_ms();
                let stalled =
                    self.buffer.rebuffer_ms() - f.rebuffer_before > buffer::STALL_NOISE_MS;
                let replacement = f.index < self.played.len();
                if replacement {
                    // fast switching: the segment replaces a buffered one
                    if self.buffer.replace(f.index, f.quality) {
                        self.played[f.index] = f.quality as u16;
                    }
                } else {
                    self.buffer.push(f.quality);
                }
                if let Abr::Dashjs(d) = &mut self.abr {
                    d.segment_loaded(
                        f.index,
                        f.quality,
                        f.sent_at,
                        t.ttfb_ms,
                        f.sent_at + t.elapsed_ms,
                        received,
                        before,
                        self.buffer.level_ms(),
                        stalled,
                        f.etp.map(|e| (e, self.cfg.etp_weight)),
                    );
                }
                if let Abr::Hlsjs(h) = &mut self.abr {
                    h.fragment_loaded(f.quality, t.ttfb_ms, t.elapsed_ms, received);
                }
                if f.index > 0 {
                    // Sabre tells the rule of every download but the first
                    let level = self.buffer.level_ms();
                    self.abr
                        .report_download(&self.movie, f.quality, None, t.elapsed_ms, level);
                }
                if !replacement {
                    self.played.push(f.quality as u16);
                }
                if self.cfg.keep_records {
                    let rec = self.record(&f, t, None);
                    self.records.push(rec);
                }
                let transfer = t.elapsed_ms - t.ttfb_ms;
                let sample = estimate::blend_etp(f.bits / transfer, f.etp, self.cfg.etp_weight);
                self.est.push(transfer, sample, t.ttfb_ms);
                self.pending_abandon = None;
                self.suggestion = None;
                self.next += 1;
                self.state = State::Idle;
            }
            Event::Failed { reason } => {
                self.error = Some(PlayerError::SegmentFailed {
                    index: f.index,
                    reason,
                });
                self.state = State::Failed;
            }
        }
    }

    /// The session's QoE so far (after [`Action::Done`]: the whole session,
    /// the final drain included).
    pub fn qoe(&self) -> QoeSummary {
        qoe::summarize(
            &self.movie,
            &self.played,
            self.abandoned_count,
            &self.buffer,
            self.first_ready_ms,
        )
    }

    /// The session's ITU-T P.1203 mode-0 input (see [`qoe::p1203_input`]).
    pub fn p1203_input(&self, opts: &qoe::P1203Options) -> serde_json::Value {
        qoe::p1203_input(&self.movie, &self.played, &self.buffer, opts)
    }
}
