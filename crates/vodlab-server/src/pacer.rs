//! A pacer without I/O: server-side pacing with intelligent bursting, after
//! Ma, Bartoš and Bhatia, *Scalability of HTTP Pacing with Intelligent
//! Bursting* (line numbers \[Mnnn] point into that paper's text).
//!
//! One [`Pacer`] per worker holds every paced response ("session") in one
//! timer heap ordered by the next absolute send time \[M47]; there is no
//! sleeping task per session. The worker asks [`Pacer::next_wakeup`] when
//! to wake, takes every due release with [`Pacer::poll_ready`]`(now)`,
//! writes at most the granted bytes (sendfile) and reports what the socket
//! took with [`Pacer::on_sent`]`(now, id, written)`. The pacer never reads a
//! clock: `now` is always passed in, so tests run in virtual time.
//!
//! ## Pacing \[M47]
//!
//! The paper's rule is T_send(i) = T_now + δ_pace(i) − k_i with
//! δ_pace(i) = c / r_i, where c is the chunk size, r_i the session's rate
//! and k_i "overhead (processing latency and catch-up adjustments)". Here
//! r_i = K × the response's bit rate (K is [`PacerConfig::pace_factor`];
//! the paper's r_i = s_i / d_i is K = 1), capped by a CMCD `rtp` if the
//! client sent one.
//!
//! The schedule is a grid of *paced slots*: slot j of a session registered
//! at t₀ falls at t₀ + j·c/r and entitles the session to c more bytes
//! (slot 0 at t₀: the first chunk goes at once). Grid times are computed
//! from the slot index, never accumulated, so rounding does not drift and
//! a server that wakes late (processing latency, the paper's k_i) sends on
//! the same grid: bytes sent by t never exceed c·(⌊(t−t₀)·r/c⌋ + 1) plus
//! bursts, i.e. sent(t) tracks r·(t−t₀) within one chunk. A release made
//! late covers every slot fired since the previous one in one grant (up to
//! [`PacerConfig::burst_chunk`]), so a late wake-up costs one write and the
//! session is back on the line at once: with small chunks (128 B at
//! 400 kbit/s is one slot every 2.56 ms, and a timer wakes on a 1 ms grid)
//! releasing one chunk per wake-up would leave the session behind by the
//! slots that fired together. Without bursts a
//! 1 MB file at 400 kbit/s ends at 20 s − c/r ("just under 20 s", \[M91])
//! and its first 4 s of content are out at 4 s − c/r ("just under 4 s",
//! \[M74]).
//!
//! ## Catch-up after short or refused writes \[M49]
//!
//! A write the socket takes only partly (or not at all) leaves a *deficit*:
//! bytes the grid granted but the socket did not take. The paper shortens
//! later pacing delays rather than growing the chunk, because the TCP
//! window is the likely limit (\[M59], footnote 3). So while a deficit is
//! carried the session is also released between its slots, in chunks of at
//! most c, no oftener than every c/(r·s) (s =
//! [`PacerConfig::catch_up_speed`]); in the paper's terms the next send is
//! at T_now + c/r − k with k = min(c/r − c/(r·s), lag). The deficit is
//! capped at c + r·[`PacerConfig::catch_up`] bytes: a longer stall is
//! forgiven, so a session never owes (and never bursts) more than that
//! bounded catch-up. A session whose writes keep being refused is tried at
//! its slots and every c/(r·s) in between; it is one heap entry among the
//! others and does not hold them back.
//!
//! ## Intelligent bursting \[M51, M53]
//!
//! - Initial burst: B seconds of content ([`PacerConfig::buffer`], the
//!   paper's 4 s = 200 KB \[M66, M91]) beyond the grid, so with K = 1 the
//!   1 MB file ends about 16 s. When the client reports its buffer (CMCD
//!   `bl`, [`SessionParams::client_buffer`]) the burst only tops it up to
//!   B. (Interpretation: `bl` is what the client already holds.)
//! - Low-buffer bursts: the pacer estimates each client's buffer as content
//!   sent minus content played, playout starting once B seconds have been
//!   sent (or from a reported `bl`, [`Pacer::on_client_buffer`]), stalling
//!   when the estimate reaches zero. When a playing session's estimate falls
//!   under [`PacerConfig::low_buffer`], it gets a burst back up to B.
//! - Budget: bytes beyond the grid (bursts and catch-up) use only spare
//!   capacity \[M53]. Spare rate = `link_capacity` − Σ r_i of the live
//!   sessions (paced rates are reserved first). With
//!   [`PacerConfig::header_bytes`] set, both sides count link bytes: a
//!   session reserves r_i × (1 + H / min(c, MSS)) and an extra release of
//!   b bytes costs b × (1 + H / min(b, MSS)), since small chunks go as
//!   small segments, each with its headers. A server-wide token bucket
//!   fills at the spare rate up to a depth of `link_capacity` ×
//!   [`PacerConfig::burst_window`] (at least one chunk); every extra release
//!   takes its bytes from the bucket (bytes a short write did not use are
//!   refunded) and waits when the bucket is short. It is shared evenly: a
//!   session that got b extra bytes gets its next extra release no sooner
//!   than b / (spare / n), n the number of sessions wanting extra bytes. So
//!   for any interval of length Δ, extra bytes written ≤ depth + ∫ spare,
//!   and paced releases never wait for the bucket: no paced session misses
//!   its grid because of a burst. Without `link_capacity` the bucket is
//!   unlimited.
//!
//! ## The heap
//!
//! Entries are (time, sequence number, slot, generation); equal times come
//! out in the order they were queued. A session has at most one live entry.
//! [`Pacer::remove`] and a changed schedule ([`Pacer::on_client_buffer`])
//! leave the old entry in the heap (lazy deletion): it is recognised as
//! stale by its sequence number and dropped when it reaches the top; the
//! heap is rebuilt when stale entries outnumber live ones. Session slots
//! are reused with a new generation, so a stale [`SessionId`] never
//! reaches a new session.

mod config;
mod policy;
mod session;

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::{Duration, Instant};

use thiserror::Error;

pub use config::{defaults, PacerConfig, PacerConfigError};
pub use policy::{PacePolicy, PolicyArg, Reports, SammyRule};
use session::{Session, State};

/// A paced session's handle (a slot and its generation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SessionId {
    slot: u32,
    gen: u32,
}

/// What a session is paced by, given at [`Pacer::register`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SessionParams {
    /// The content's bit rate in bytes per second (a catalog's, CMCD `br`,
    /// or file size over duration \[M47]).
    pub bitrate: f64,
    /// Bytes of the response body to pace.
    pub total: u64,
    /// Chunk size for this session (default and maximum:
    /// [`PacerConfig::chunk_size`]).
    pub chunk: Option<u64>,
    /// Seconds of content the client already holds (CMCD `bl`), if sent.
    pub client_buffer: Option<f64>,
    /// Most bytes per second the client asked for (CMCD `rtp`), if sent:
    /// caps the paced rate and the session's share of bursts.
    pub max_rate: Option<u64>,
    /// This session's pace factor, where the pace policy
    /// ([`PacePolicy`]) gives it one (default [`PacerConfig::pace_factor`]).
    pub factor: Option<f64>,
}

impl SessionParams {
    /// A session of `total` bytes at `bitrate` bytes per second.
    pub fn new(bitrate: f64, total: u64) -> Self {
        Self {
            bitrate,
            total,
            chunk: None,
            client_buffer: None,
            max_rate: None,
            factor: None,
        }
    }
}

/// Why a release was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// A slot of the session's paced grid (never waits for the budget).
    Paced,
    /// Between slots, to make up a deficit left by short writes (from the
    /// burst budget).
    CatchUp,
    /// An initial or low-buffer burst (from the burst budget).
    Burst,
}

/// A release: the session may write up to `bytes` now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grant {
    /// The session.
    pub id: SessionId,
    /// Most bytes to write (≤ what is left to send; ≤ the chunk size, but
    /// a paced release made late covers every slot fired since the last
    /// one: up to [`PacerConfig::burst_chunk`]; a burst up to the burst
    /// chunk).
    pub bytes: u64,
    /// Why.
    pub kind: Kind,
    /// When the release was due (the heap time; `now − due` is lateness).
    pub due: Instant,
}

/// What [`Pacer::on_sent`] did with the session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sent {
    /// Queued again for this time.
    Scheduled(Instant),
    /// Every byte was sent; the session is gone from the pacer.
    Done,
}

/// A misuse of the pacer's API (a server bug, not a client's doing).
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum PacerError {
    /// The id names no live session (finished or removed).
    #[error("unknown pacing session")]
    Unknown,
    /// `on_sent` for a session that holds no grant.
    #[error("pacing session has no outstanding grant")]
    NotGranted,
    /// More bytes written than granted.
    #[error("{written} bytes written, {granted} granted")]
    Overrun {
        /// Bytes reported written.
        written: u64,
        /// Bytes granted.
        granted: u64,
    },
    /// Bad session parameters.
    #[error("session {key}: {why}")]
    Params {
        /// The parameter.
        key: &'static str,
        /// What is wrong.
        why: &'static str,
    },
}

/// Counters since the pacer was made.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PacerStats {
    /// Bytes written on paced slots.
    pub paced_bytes: u64,
    /// Bytes written by catch-up releases.
    pub catch_up_bytes: u64,
    /// Bytes written by bursts.
    pub burst_bytes: u64,
    /// Releases handed out.
    pub releases: u64,
    /// Extra releases that found the budget short and waited.
    pub budget_waits: u64,
    /// Stale heap entries dropped (lazy deletion).
    pub stale_dropped: u64,
}

/// The pacer: see the module documentation.
#[derive(Debug)]
pub struct Pacer {
    cfg: PacerConfig,
    slots: Vec<Option<Session>>,
    gens: Vec<u32>,
    free: Vec<u32>,
    heap: BinaryHeap<Reverse<(Instant, u64, u32, u32)>>,
    seq: u64,
    live: usize,
    stale: usize,
    /// Σ reserved link rate over live sessions (r × wire factor).
    reserved: u64,
    /// Sessions wanting bytes beyond the grid.
    n_extra: usize,
    tokens: f64,
    depth: f64,
    refilled: Option<Instant>,
    stats: PacerStats,
}

impl Pacer {
    /// A pacer with these settings.
    pub fn new(cfg: PacerConfig) -> Result<Self, PacerConfigError> {
        cfg.validate()?;
        let depth = cfg.link_capacity.map_or(f64::INFINITY, |l| {
            // at least the link bytes of the largest release
            let largest = [cfg.chunk_size, cfg.burst_chunk]
                .map(|b| b as f64 * cfg.wire_factor(b))
                .into_iter()
                .fold(0.0, f64::max);
            (l as f64 * cfg.burst_window).max(largest)
        });
        Ok(Self {
            cfg,
            slots: Vec::new(),
            gens: Vec::new(),
            free: Vec::new(),
            heap: BinaryHeap::new(),
            seq: 0,
            live: 0,
            stale: 0,
            reserved: 0,
            n_extra: 0,
            tokens: depth,
            depth,
            refilled: None,
            stats: PacerStats::default(),
        })
    }

    /// The settings.
    pub fn config(&self) -> &PacerConfig {
        &self.cfg
    }

    /// Live sessions.
    pub fn len(&self) -> usize {
        self.live
    }

    /// No live sessions.
    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// Counters.
    pub fn stats(&self) -> PacerStats {
        self.stats
    }

    /// The link rate the live sessions reserve (bytes/s): Σ r, each times
    /// its wire factor when [`PacerConfig::header_bytes`] is set.
    pub fn reserved_rate(&self) -> u64 {
        self.reserved
    }

    /// Spare rate for bursts and catch-up (bytes/s; infinite without
    /// `link_capacity`).
    pub fn spare_rate(&self) -> f64 {
        self.cfg
            .link_capacity
            .map_or(f64::INFINITY, |l| l.saturating_sub(self.reserved) as f64)
    }

    /// The paced rate r a session with these parameters gets (bytes/s).
    pub fn rate_for(&self, p: &SessionParams) -> u64 {
        let k = p.factor.unwrap_or(self.cfg.pace_factor);
        let r = (k * p.bitrate).round().max(1.0) as u64;
        p.max_rate.map_or(r, |m| r.min(m.max(1)))
    }

    /// Adds a session at `now`; its first chunk is due at once, its initial
    /// burst (if bursting) follows as the budget allows.
    pub fn register(&mut self, now: Instant, p: SessionParams) -> Result<SessionId, PacerError> {
        let bad = |key, why| Err(PacerError::Params { key, why });
        if !(p.bitrate.is_finite() && p.bitrate > 0.0) {
            return bad("bitrate", "must be > 0");
        }
        if p.total == 0 {
            return bad("total", "must be > 0");
        }
        if p.factor.is_some_and(|k| !(k.is_finite() && k > 0.0)) {
            return bad("factor", "must be > 0");
        }
        if p.chunk == Some(0) {
            return bad("chunk", "must be > 0");
        }
        if p.client_buffer
            .is_some_and(|b| !(b.is_finite() && b >= 0.0))
        {
            return bad("client_buffer", "must be >= 0");
        }
        self.refill(now);
        let rate = self.rate_for(&p);
        let chunk = p
            .chunk
            .unwrap_or(self.cfg.chunk_size)
            .min(self.cfg.chunk_size);
        let catch_up = (rate as f64 * self.cfg.catch_up).round() as u64;
        let (played_base, play_clock) = match p.client_buffer {
            Some(bl) => (-bl, Some(now)),
            None => (0.0, None),
        };
        let burst_owed = if self.cfg.burst {
            let have = p.client_buffer.unwrap_or(0.0);
            ((self.cfg.buffer - have).max(0.0) * p.bitrate) as u64
        } else {
            0
        };
        let reserved = (rate as f64 * self.cfg.wire_factor(chunk)).round() as u64;
        let mut s = Session {
            gen: 0,
            state: State::Queued(0),
            rate,
            reserved,
            bitrate: p.bitrate,
            chunk,
            max_rate: p.max_rate,
            start: now,
            next_slot: 0,
            paced_due: 0,
            owed: 0,
            owed_cap: chunk.saturating_add(catch_up),
            burst_owed,
            sent: 0,
            total: p.total,
            next_extra: now,
            extra_active: false,
            played_base,
            play_clock,
        };
        s.clamp();
        let slot = match self.free.pop() {
            Some(slot) => slot,
            None => {
                self.slots.push(None);
                self.gens.push(0);
                (self.slots.len() - 1) as u32
            }
        };
        let gen = self.gens[slot as usize];
        s.gen = gen;
        self.slots[slot as usize] = Some(s);
        self.live += 1;
        self.reserved += reserved;
        self.set_extra(slot);
        self.push(slot, now);
        Ok(SessionId { slot, gen })
    }

    /// When the earliest queued release is due (`None`: nothing queued).
    /// Drops stale entries from the top first, so the time is exact.
    pub fn next_wakeup(&mut self) -> Option<Instant> {
        while let Some(&Reverse((at, seq, slot, gen))) = self.heap.peek() {
            if self.is_live_entry(seq, slot, gen) {
                return Some(at);
            }
            self.heap.pop();
            self.drop_stale();
        }
        None
    }

    /// The next release due at `now`, earliest first (equal times in the
    /// order queued); `None` when none is due. The session then holds the
    /// grant and is out of the heap until [`Pacer::on_sent`].
    pub fn poll_ready(&mut self, now: Instant) -> Option<Grant> {
        while let Some(&Reverse((due, seq, slot, gen))) = self.heap.peek() {
            if due > now {
                return None;
            }
            self.heap.pop();
            if !self.is_live_entry(seq, slot, gen) {
                self.drop_stale();
                continue;
            }
            if let Some(g) = self.release(now, due, slot) {
                self.stats.releases += 1;
                return Some(g);
            }
        }
        None
    }

    /// Reports what the socket took of the session's grant (`written` ≤
    /// granted; 0 for a refused write, `EAGAIN`). Returns when it is due
    /// next, or [`Sent::Done`] once every byte is out (the session is then
    /// gone).
    pub fn on_sent(
        &mut self,
        now: Instant,
        id: SessionId,
        written: u64,
    ) -> Result<Sent, PacerError> {
        self.refill(now);
        let speed = self.cfg.catch_up_speed;
        let s = self.session_mut(id)?;
        let State::Granted { bytes, kind } = s.state else {
            return Err(PacerError::NotGranted);
        };
        if written > bytes {
            return Err(PacerError::Overrun {
                written,
                granted: bytes,
            });
        }
        s.sent += written;
        match kind {
            Kind::Paced => s.owed -= written.min(s.owed),
            Kind::CatchUp | Kind::Burst => {
                let from_owed = written.min(s.owed);
                s.owed -= from_owed;
                s.burst_owed -= (written - from_owed).min(s.burst_owed);
            }
        }
        if written < bytes {
            // Short or refused: the socket is full; retry between slots no
            // sooner than the catch-up gap.
            s.next_extra = s.next_extra.max(now + s.catch_up_gap(speed));
        }
        let done = s.sent == s.total;
        match kind {
            Kind::Paced => self.stats.paced_bytes += written,
            Kind::CatchUp => self.stats.catch_up_bytes += written,
            Kind::Burst => self.stats.burst_bytes += written,
        }
        if kind != Kind::Paced {
            let f = self.cfg.wire_factor(bytes);
            self.tokens = (self.tokens + (bytes - written) as f64 * f).min(self.depth);
        }
        if done {
            self.free_slot(id.slot);
            return Ok(Sent::Done);
        }
        self.check_buffer(now, id.slot);
        let s = self.slots[id.slot as usize].as_mut().expect("live");
        s.clamp();
        self.set_extra(id.slot);
        Ok(Sent::Scheduled(self.push(id.slot, now)))
    }

    /// The client reported its buffer (CMCD `bl`, seconds of content) at
    /// `now`: the playout estimate is re-anchored to it, and a burst is
    /// queued if it is under [`PacerConfig::low_buffer`].
    pub fn on_client_buffer(
        &mut self,
        now: Instant,
        id: SessionId,
        buffer: f64,
    ) -> Result<(), PacerError> {
        if !(buffer.is_finite() && buffer >= 0.0) {
            return Err(PacerError::Params {
                key: "client_buffer",
                why: "must be >= 0",
            });
        }
        let s = self.session_mut(id)?;
        s.played_base = s.sent as f64 / s.bitrate - buffer;
        s.play_clock = Some(now);
        let before = s.burst_owed;
        self.check_buffer(now, id.slot);
        let s = self.slots[id.slot as usize].as_mut().expect("live");
        if s.burst_owed != before {
            s.clamp();
            self.set_extra(id.slot);
            if let State::Queued(_) = self.slots[id.slot as usize].as_ref().expect("live").state {
                // The old entry goes stale; queue at the new time.
                self.stale += 1;
                self.push(id.slot, now);
            }
        }
        Ok(())
    }

    /// The estimated client buffer of a session at `now` (seconds of
    /// content: sent minus played).
    pub fn client_buffer(&mut self, now: Instant, id: SessionId) -> Result<f64, PacerError> {
        Ok(self.session_mut(id)?.buffer(now))
    }

    /// Bytes sent so far by a session.
    pub fn sent(&self, id: SessionId) -> Result<u64, PacerError> {
        self.session(id).map(|s| s.sent)
    }

    /// A session's paced rate r (bytes/s).
    pub fn rate(&self, id: SessionId) -> Result<u64, PacerError> {
        self.session(id).map(|s| s.rate)
    }

    /// Removes a session (client gone, response aborted). Its heap entry,
    /// if any, is dropped lazily. Returns whether it was live.
    pub fn remove(&mut self, now: Instant, id: SessionId) -> bool {
        if self.session(id).is_err() {
            return false;
        }
        self.refill(now);
        if let Some(State::Queued(_)) = self.slots[id.slot as usize].as_ref().map(|s| s.state) {
            self.stale += 1;
        }
        self.free_slot(id.slot);
        self.maybe_compact();
        true
    }

    fn session(&self, id: SessionId) -> Result<&Session, PacerError> {
        match self.slots.get(id.slot as usize) {
            Some(Some(s)) if s.gen == id.gen => Ok(s),
            _ => Err(PacerError::Unknown),
        }
    }

    fn session_mut(&mut self, id: SessionId) -> Result<&mut Session, PacerError> {
        match self.slots.get_mut(id.slot as usize) {
            Some(Some(s)) if s.gen == id.gen => Ok(s),
            _ => Err(PacerError::Unknown),
        }
    }

    fn is_live_entry(&self, seq: u64, slot: u32, gen: u32) -> bool {
        matches!(
            self.slots.get(slot as usize),
            Some(Some(s)) if s.gen == gen && matches!(s.state, State::Queued(q) if q == seq)
        )
    }

    fn drop_stale(&mut self) {
        self.stale = self.stale.saturating_sub(1);
        self.stats.stale_dropped += 1;
    }

    fn maybe_compact(&mut self) {
        if self.stale > 1024 && self.stale > self.live {
            let heap = std::mem::take(&mut self.heap);
            let mut kept = heap.into_vec();
            kept.retain(|&Reverse((_, seq, slot, gen))| self.is_live_entry(seq, slot, gen));
            self.stats.stale_dropped += self.stale as u64;
            self.heap = BinaryHeap::from(kept);
            self.stale = 0;
        }
    }

    fn free_slot(&mut self, slot: u32) {
        let s = self.slots[slot as usize].take().expect("live");
        if s.extra_active {
            self.n_extra -= 1;
        }
        self.reserved -= s.reserved;
        self.live -= 1;
        self.gens[slot as usize] = self.gens[slot as usize].wrapping_add(1);
        self.free.push(slot);
    }

    fn refill(&mut self, now: Instant) {
        if let Some(last) = self.refilled {
            let dt = now.saturating_duration_since(last).as_secs_f64();
            let spare = self.spare_rate();
            if spare.is_finite() {
                self.tokens = (self.tokens + spare * dt).min(self.depth);
            }
        }
        self.refilled = Some(self.refilled.map_or(now, |l| l.max(now)));
    }

    fn set_extra(&mut self, slot: u32) {
        let s = self.slots[slot as usize].as_mut().expect("live");
        let want = s.wants_extra();
        if want != s.extra_active {
            s.extra_active = want;
            if want {
                self.n_extra += 1;
            } else {
                self.n_extra -= 1;
            }
        }
    }

    /// Low-buffer check: a playing session under `low_buffer` gets a burst
    /// back up to `buffer`; playout starts once `buffer` seconds are sent.
    fn check_buffer(&mut self, now: Instant, slot: u32) {
        let (burst, target, low) = (self.cfg.burst, self.cfg.buffer, self.cfg.low_buffer);
        let s = self.slots[slot as usize].as_mut().expect("live");
        let level = s.buffer(now);
        if s.play_clock.is_none() {
            if level >= target || s.sent == s.total {
                s.play_clock = Some(now);
            }
            return;
        }
        if burst && level < low && s.burst_owed == 0 {
            s.burst_owed = ((target - level) * s.bitrate) as u64;
        }
    }

    /// Queues a session at its next time; returns it.
    fn push(&mut self, slot: u32, now: Instant) -> Instant {
        let s = self.slots[slot as usize].as_mut().expect("live");
        let mut at = s.slot_time(s.next_slot);
        if s.paced_due > 0 && s.owed > 0 {
            at = now;
        }
        if s.wants_extra() {
            at = at.min(s.next_extra.max(now));
        }
        let at = at.max(now);
        self.seq += 1;
        s.state = State::Queued(self.seq);
        self.heap.push(Reverse((at, self.seq, slot, s.gen)));
        at
    }

    /// Decides what a popped session may send at `now` (`None`: requeued).
    fn release(&mut self, now: Instant, due: Instant, slot: u32) -> Option<Grant> {
        self.refill(now);
        let spare = self.spare_rate();
        let n_extra = self.n_extra.max(1);
        let speed = self.cfg.catch_up_speed;
        let s = self.slots[slot as usize].as_mut().expect("live");
        s.fire_slots(now);
        let id = SessionId { slot, gen: s.gen };
        let left = s.remaining();
        if s.paced_due > 0 && s.owed > 0 {
            // every slot fired since the last paced release, in one write
            // (at most a burst chunk: a driver stalled for long sends the
            // rest as catch-up)
            let batch = s.paced_due.min(s.chunk.max(self.cfg.burst_chunk));
            s.paced_due = 0;
            let bytes = batch.min(s.owed).min(left);
            s.state = State::Granted {
                bytes,
                kind: Kind::Paced,
            };
            return Some(Grant {
                id,
                bytes,
                kind: Kind::Paced,
                due,
            });
        }
        s.paced_due = 0;
        if s.wants_extra() && s.next_extra <= now {
            // catch-up in chunks (it keeps the paced grid's accuracy); a
            // pure burst in burst chunks
            let piece = if s.owed > 0 {
                s.chunk
            } else {
                s.chunk.max(self.cfg.burst_chunk)
            };
            let want = piece.min(s.owed + s.burst_owed).min(left);
            // link bytes of the release, headers included
            let cost = want as f64 * self.cfg.wire_factor(want);
            if self.tokens >= cost {
                self.tokens -= cost;
                let kind = if s.owed > 0 {
                    Kind::CatchUp
                } else {
                    Kind::Burst
                };
                // Even share of the spare rate, capped by CMCD rtp; catch-up
                // no faster than the catch-up speed.
                let mut share = spare / n_extra as f64;
                if let Some(m) = s.max_rate {
                    share = share.min(m as f64);
                }
                let mut gap = if !share.is_finite() {
                    Duration::ZERO
                } else if share > 0.0 {
                    Duration::from_secs_f64(cost / share)
                } else {
                    // no spare rate (the paced sessions fill the link): this
                    // release spent what the bucket held; the next no sooner
                    // than the next slot
                    s.slot_time(s.next_slot).saturating_duration_since(now)
                };
                if kind == Kind::CatchUp {
                    gap = gap.max(s.catch_up_gap(speed));
                }
                s.next_extra = now + gap;
                s.state = State::Granted { bytes: want, kind };
                return Some(Grant {
                    id,
                    bytes: want,
                    kind,
                    due,
                });
            }
            self.stats.budget_waits += 1;
            s.next_extra = if spare > 0.0 {
                now + Duration::from_secs_f64(((cost - self.tokens) / spare).max(1e-6))
            } else {
                // No spare rate: try again at the next slot.
                s.slot_time(s.next_slot)
            };
        }
        self.push(slot, now);
        None
    }
}
