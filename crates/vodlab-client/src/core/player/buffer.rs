//! The playout buffer: segments waiting to play, the part of the head
//! segment already played, start-up and stalls.
//!
//! It follows Sabre's model: playback starts the moment the first segment
//! arrives (no start threshold) and resumes the moment a segment arrives
//! after a stall; time before the first segment is start-up, not
//! rebuffering. A stall *episode* is counted once it has lasted
//! [`STALL_NOISE_MS`] (Sabre also counts the ~1e-12 ms float residues of
//! exact drains; its README's `rebuffer_events_ignoring_float_noise` is this
//! count), and a stall that continues across abandoned attempts is one
//! episode.

use std::collections::VecDeque;

/// A stall shorter than this (ms) is float noise, not an episode.
pub const STALL_NOISE_MS: f64 = 1e-6;

/// The buffer and its playback bookkeeping.
#[derive(Debug, Clone)]
pub struct PlayoutBuffer {
    segment_ms: f64,
    contents: VecDeque<usize>,
    /// Media time already played of the head segment, ms.
    fcc: f64,
    started: bool,
    /// Segments played to the end.
    finished_segments: usize,
    /// Level of the last segment played to the end.
    last_played: Option<usize>,
    startup_ms: f64,
    rebuffer_ms: f64,
    rebuffer_events: u32,
    session_ms: f64,
    stalled: bool,
    stall_counted: bool,
    episode_ms: f64,
    /// Stall episodes: (media position ms, duration ms).
    stalls: Vec<(f64, f64)>,
}

impl PlayoutBuffer {
    /// An empty buffer of segments of `segment_ms`.
    pub fn new(segment_ms: f64) -> Self {
        Self {
            segment_ms,
            contents: VecDeque::new(),
            fcc: 0.0,
            started: false,
            finished_segments: 0,
            last_played: None,
            startup_ms: 0.0,
            rebuffer_ms: 0.0,
            rebuffer_events: 0,
            session_ms: 0.0,
            stalled: false,
            stall_counted: false,
            episode_ms: 0.0,
            stalls: Vec::new(),
        }
    }

    /// Media time buffered, ms (the unplayed part of the head included).
    pub fn level_ms(&self) -> f64 {
        self.segment_ms * self.contents.len() as f64 - self.fcc
    }

    /// True once the first segment has arrived.
    pub fn started(&self) -> bool {
        self.started
    }

    /// Level of the segment at the playhead: the head of the buffer, or
    /// the last segment played when it is empty (a stall); `None` before
    /// playback started.
    pub fn playhead_level(&self) -> Option<usize> {
        if !self.started {
            return None;
        }
        self.contents.front().copied().or(self.last_played)
    }

    /// Plays `time` ms (Sabre's `deplete_buffer`): the head's remainder,
    /// then whole segments; what is left once empty is a stall.
    pub fn deplete(&mut self, mut time: f64) {
        if time <= 0.0 {
            return;
        }
        self.session_ms += time;
        if !self.started {
            self.startup_ms += time;
            return;
        }
        if self.contents.is_empty() {
            self.stall(time);
            return;
        }
        if self.fcc > 0.0 {
            if time + self.fcc < self.segment_ms {
                self.fcc += time;
                return;
            }
            time -= self.segment_ms - self.fcc;
            self.last_played = self.contents.pop_front();
            self.finished_segments += 1;
            self.fcc = 0.0;
        }
        while time > 0.0 && !self.contents.is_empty() {
            if time >= self.segment_ms {
                self.last_played = self.contents.pop_front();
                self.finished_segments += 1;
                time -= self.segment_ms;
            } else {
                self.fcc = time;
                time = 0.0;
            }
        }
        if time > 0.0 {
            self.stall(time);
        }
    }

    fn stall(&mut self, time: f64) {
        self.rebuffer_ms += time;
        self.episode_ms += time;
        if !self.stalled {
            self.stalled = true;
            self.stalls
                .push((self.finished_segments as f64 * self.segment_ms, 0.0));
        }
        if let Some(s) = self.stalls.last_mut() {
            s.1 += time;
        }
        if !self.stall_counted && self.episode_ms >= STALL_NOISE_MS {
            self.stall_counted = true;
            self.rebuffer_events += 1;
        }
    }

    /// Media position of the playhead, ms (segments played to the end and
    /// the part of the head played).
    pub fn position_ms(&self) -> f64 {
        self.finished_segments as f64 * self.segment_ms + self.fcc
    }

    /// Replaces the level of buffered segment `index` (counted from the
    /// first segment of the session) with `level` (dash.js's fast
    /// switching); false when that segment is no longer (or not yet) in
    /// the buffer.
    pub fn replace(&mut self, index: usize, level: usize) -> bool {
        let Some(i) = index.checked_sub(self.finished_segments) else {
            return false;
        };
        match self.contents.get_mut(i) {
            Some(l) => {
                *l = level;
                true
            }
            None => false,
        }
    }

    /// Appends a downloaded segment at `level`; playback starts or resumes.
    pub fn push(&mut self, level: usize) {
        self.contents.push_back(level);
        self.started = true;
        self.end_episode();
    }

    fn end_episode(&mut self) {
        if self.stalled && !self.stall_counted {
            // float noise, not an episode (its time stays in the total)
            self.stalls.pop();
        }
        self.stalled = false;
        self.stall_counted = false;
        self.episode_ms = 0.0;
    }

    /// Plays out everything buffered (the end of the session).
    pub fn drain(&mut self) {
        let l = self.level_ms();
        self.deplete(l);
        self.contents.clear();
        self.fcc = 0.0;
        self.end_episode();
    }

    /// Heap bytes held (segment queue and stall list capacities).
    pub fn heap_bytes(&self) -> usize {
        self.contents.capacity() * std::mem::size_of::<usize>()
            + self.stalls.capacity() * std::mem::size_of::<(f64, f64)>()
    }

    /// Time before playback started, ms.
    pub fn startup_ms(&self) -> f64 {
        self.startup_ms
    }

    /// Total stall time, ms (float residues included).
    pub fn rebuffer_ms(&self) -> f64 {
        self.rebuffer_ms
    }

    /// Stall episodes of at least [`STALL_NOISE_MS`].
    pub fn rebuffer_events(&self) -> u32 {
        self.rebuffer_events
    }

    /// Session time so far (start-up, playback, stalls), ms.
    pub fn session_ms(&self) -> f64 {
        self.session_ms
    }

    /// Stall episodes as (media position, duration), ms.
    pub fn stalls(&self) -> &[(f64, f64)] {
        &self.stalls
    }
}
