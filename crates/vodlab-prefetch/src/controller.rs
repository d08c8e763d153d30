//! Prefetch controllers: how much to prefetch, decided from what the server
//! reports. Stateful but pure: no I/O, no clock reads (every call gets
//! `now`), so the same objects run in `vodlab serve` and, later, in a
//! trace-driven simulator stepping virtual time.
//!
//! The server (ASAP mode) feeds a controller:
//! - [`PrefetchController::on_request`] for every range it is about to
//!   send, after probing the page cache ([`RequestInfo::resident`]), with
//!   the session's and the chain's state, which the server keeps and the
//!   controller may update; a [`PrefetchDecision::Prefetch`] is read by the
//!   device's helper before the range is sent;
//! - [`PrefetchController::on_read_complete`] with each prefetch read the
//!   helper timed (bytes, duration);
//! - [`PrefetchController::on_evicted`] when a range this session had
//!   prefetched is no longer resident when it is requested. This is an
//!   approximation of eviction: the server cannot watch the page cache, so
//!   it notices evictions only when a later request of the same session
//!   misses on a range it prefetched; `bytes` is the overlap of that
//!   request with the prefetched range and `unused_for` the time since the
//!   prefetch. Prefetched data evicted and never requested again is not
//!   reported (it shows in the statistics' `wasted_prefetch_bytes`);
//! - [`PrefetchController::on_tick`] periodically (`Config::tick`, 1 s).

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Identity of a file (device and inode).
pub type FileKey = u64;

/// A request range as the controller sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestInfo<'a> {
    /// The session: the client's `X-Vodlab-Session`, else `cN` for connection N.
    pub session: &'a str,
    /// The file.
    pub file: FileKey,
    /// First byte requested.
    pub offset: u64,
    /// Bytes requested.
    pub length: u64,
    /// File size.
    pub file_size: u64,
    /// The content's bit rate when the client told it (CMCD `br`), bits/s.
    pub bitrate_bps: Option<u64>,
    /// Whether the whole range was in the page cache when probed.
    pub resident: bool,
    /// The request was open-ended (`Range: bytes=A-`): the client reads
    /// until it closes (thesis ch. 5's open-ended form).
    pub open_ended: bool,
}

/// What to do before sending a range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrefetchDecision {
    /// Send at once.
    None,
    /// Read `len` bytes from `offset` into the page cache first (clipped by
    /// the server at the end of the file).
    Prefetch {
        /// First byte.
        offset: u64,
        /// Bytes.
        len: u64,
    },
}

/// A range prefetched for a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PrefetchedRange {
    /// The file.
    pub file: FileKey,
    /// First byte.
    pub start: u64,
    /// End (exclusive).
    pub end: u64,
    /// When the prefetch completed.
    pub at: Instant,
    /// Bytes of it the session has requested since.
    pub used: u64,
}

/// How long a prefetched range is remembered for eviction accounting.
pub const PREFETCH_MEMORY: Duration = Duration::from_secs(600);
/// Most prefetched ranges remembered per session; the oldest beyond it are
/// dropped and their unrequested bytes counted as wasted.
pub const PREFETCH_RANGES: usize = 64;

/// What the server keeps per session (today: per connection, since one
/// connection carries one session; a session spread over several
/// connections has one state per connection).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionState {
    /// Ranges requested so far.
    pub requests: u64,
    /// Bytes requested so far.
    pub bytes_requested: u64,
    /// The last range requested: file and end (exclusive).
    pub last: Option<(FileKey, u64)>,
    /// Ranges prefetched for this session, oldest first.
    pub prefetched: Vec<PrefetchedRange>,
}

/// A request that found data this session had prefetched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PrefetchedOverlap {
    /// When the (latest overlapping) prefetch completed.
    pub at: Instant,
    /// Bytes of the request inside prefetched ranges.
    pub bytes: u64,
    /// Where those bytes are: from the first to the end of the last (an
    /// extent; with two disjoint prefetched ranges it spans the gap).
    pub start: u64,
    /// End (exclusive) of that extent.
    pub end: u64,
}

impl SessionState {
    /// Records a requested range: counts it, and credits its overlap with
    /// earlier prefetches as used. Returns the overlap, if any.
    pub fn account(&mut self, file: FileKey, offset: u64, len: u64) -> Option<PrefetchedOverlap> {
        self.requests += 1;
        self.bytes_requested += len;
        self.last = Some((file, offset + len));
        let end = offset + len;
        let mut found: Option<PrefetchedOverlap> = None;
        for r in self.prefetched.iter_mut().filter(|r| r.file == file) {
            let (lo, hi) = (offset.max(r.start), end.min(r.end));
            let overlap = hi.saturating_sub(lo);
            if overlap > 0 {
                r.used += overlap;
                found = Some(match found {
                    None => PrefetchedOverlap {
                        at: r.at,
                        bytes: overlap,
                        start: lo,
                        end: hi,
                    },
                    Some(f) => PrefetchedOverlap {
                        at: r.at,
                        bytes: f.bytes + overlap,
                        start: f.start.min(lo),
                        end: f.end.max(hi),
                    },
                });
            }
        }
        found
    }

    /// Remembers a completed prefetch of `[offset, offset + len)` of which
    /// `used` bytes are the request that caused it. Forgets ranges older
    /// than [`PREFETCH_MEMORY`] and, beyond [`PREFETCH_RANGES`], the oldest
    /// one. Returns the bytes of dropped ranges never requested (wasted).
    pub fn record_prefetch(
        &mut self,
        now: Instant,
        file: FileKey,
        offset: u64,
        len: u64,
        used: u64,
    ) -> u64 {
        self.prefetched
            .retain(|r| now.saturating_duration_since(r.at) < PREFETCH_MEMORY);
        let mut wasted = 0;
        if self.prefetched.len() > PREFETCH_RANGES {
            let old = self.prefetched.remove(0);
            wasted = (old.end - old.start).saturating_sub(old.used);
        }
        self.prefetched.push(PrefetchedRange {
            file,
            start: offset,
            end: offset + len,
            at: now,
            used,
        });
        wasted
    }

    /// The session ended: forgets every range and returns the bytes
    /// prefetched and never requested.
    pub fn finish(&mut self) -> u64 {
        self.prefetched
            .drain(..)
            .map(|r| (r.end - r.start).saturating_sub(r.used))
            .sum()
    }
}

/// What the server keeps per chain: the files of one directory (the
/// segments of a chunked title, `t00042/00017.m4s`), across sessions.
/// Files at the root belong to no chain.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChainState {
    /// Ranges requested in the chain.
    pub requests: u64,
    /// Bytes requested in the chain.
    pub bytes_requested: u64,
    /// The file of the last request.
    pub last_file: Option<FileKey>,
    /// When the chain was last requested.
    pub last_at: Option<Instant>,
}

impl ChainState {
    /// Records a request in the chain.
    pub fn account(&mut self, now: Instant, file: FileKey, len: u64) {
        self.requests += 1;
        self.bytes_requested += len;
        self.last_file = Some(file);
        self.last_at = Some(now);
    }
}

/// A prefetch controller. Called by the server under a lock, so calls are
/// short and never block.
pub trait PrefetchController: Send {
    /// A range is about to be sent: prefetch first, or not.
    fn on_request(
        &mut self,
        now: Instant,
        req: &RequestInfo<'_>,
        session: &mut SessionState,
        chain: Option<&mut ChainState>,
    ) -> PrefetchDecision;
    /// A prefetch read completed: `bytes` read in `duration`.
    fn on_read_complete(&mut self, now: Instant, bytes: u64, duration: Duration);
    /// Prefetched data was found evicted `unused_for` after its prefetch,
    /// `bytes` of it needed by a request (see the module note).
    fn on_evicted(&mut self, now: Instant, bytes: u64, unused_for: Duration);
    /// Periodic tick.
    fn on_tick(&mut self, now: Instant);
    /// What the devices' helpers read since the last call, in all: bytes
    /// and time spent reading, reads of connections that went away
    /// included (which never reach `on_read_complete`). Called before each
    /// tick by a server that knows its devices.
    fn on_device_reads(&mut self, _now: Instant, _bytes: u64, _busy: Duration) {}
    /// The automatic size's state (`prefetch_auto` in `/vodlab/stats`);
    /// `None` for other controllers.
    fn auto_view(&self) -> Option<crate::auto::AutoView> {
        None
    }
}

/// A fixed prefetch size: on a miss, `size` bytes from the request's
/// offset, never less than the request; nothing on a hit. Ignores feedback.
/// (The server then moves the window past a head of the range the session
/// already has resident: [`place_after_head`].)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fixed(pub u64);

impl PrefetchController for Fixed {
    fn on_request(
        &mut self,
        _now: Instant,
        req: &RequestInfo<'_>,
        _session: &mut SessionState,
        _chain: Option<&mut ChainState>,
    ) -> PrefetchDecision {
        if req.resident {
            return PrefetchDecision::None;
        }
        PrefetchDecision::Prefetch {
            offset: req.offset,
            len: self.0.max(req.length),
        }
    }

    fn on_read_complete(&mut self, _now: Instant, _bytes: u64, _duration: Duration) {}

    fn on_evicted(&mut self, _now: Instant, _bytes: u64, _unused_for: Duration) {}

    fn on_tick(&mut self, _now: Instant) {}
}

/// The range a decision reads, clipped at the end of the file; `None` when
/// nothing is to be read.
pub fn clip(decision: PrefetchDecision, file_size: u64) -> Option<(u64, u64)> {
    match decision {
        PrefetchDecision::None => None,
        PrefetchDecision::Prefetch { offset, len } => {
            let n = len.min(file_size.saturating_sub(offset));
            (n > 0).then_some((offset, n))
        }
    }
}

/// Places a window that starts at the request's offset after the range's
/// first `resident_head` bytes, which are already in the page cache (the
/// tail of the session's previous prefetch): a window that is just the
/// request shrinks to the request's missing part; any other keeps its
/// length (one reaching past the request: the drive reads `len` new bytes
/// in one run from the first byte missing; one shorter than the request,
/// as `first-grow` asks under an open-ended range: the next `len` bytes).
/// The resident head is sent while the helper reads.
///
/// Without it a window of p bytes that ends inside a range (a 4 MiB
/// prefetch and 2.5 MiB HD ranges) made every later range miss: its
/// prefetch started at the range's offset, re-read the resident head
/// (1.5 MiB of its 4 MiB) and so read only 2.5 MiB of new data per
/// repositioning, and the range waited in the helper's queue with its head
/// sitting idle in the page cache, where under memory pressure it was
/// evicted and read from the drive again (the drive read 1.35x the
/// delivered bytes at 4 MiB in ch4's HD sweep, 0.79x at 2 MiB).
///
/// Decisions that start elsewhere, and heads that cover the whole range
/// (the probe raced with the page cache), are left alone.
pub fn place_after_head(
    decision: PrefetchDecision,
    req: &RequestInfo<'_>,
    resident_head: u64,
) -> PrefetchDecision {
    match decision {
        PrefetchDecision::Prefetch { offset, len }
            if offset == req.offset && resident_head > 0 && resident_head < req.length =>
        {
            PrefetchDecision::Prefetch {
                offset: offset + resident_head,
                len: if len == req.length {
                    len - resident_head
                } else {
                    len
                },
            }
        }
        d => d,
    }
}

/// Most chains remembered; beyond it the chain table starts afresh.
pub const MAX_CHAINS: usize = 65_536;

/// A controller with the per-chain states, as the server holds it (behind
/// one lock). Pure: it sequences the feedback calls in the order the server
/// makes them, so that order is tested without sockets.
pub struct PrefetchCore {
    controller: Box<dyn PrefetchController>,
    chains: HashMap<String, ChainState>,
    /// The devices' totals at the last [`PrefetchCore::tick_devices`]:
    /// bytes and seconds spent reading.
    devices_seen: (u64, f64),
}

/// What [`PrefetchCore::before_send`] found and decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BeforeSend {
    /// The controller's decision.
    pub decision: PrefetchDecision,
    /// An eviction it was told about: bytes and time since the prefetch.
    pub evicted: Option<(u64, Duration)>,
}

impl PrefetchCore {
    /// Wraps a controller.
    pub fn new(controller: Box<dyn PrefetchController>) -> Self {
        Self {
            controller,
            chains: HashMap::new(),
            devices_seen: (0, 0.0),
        }
    }

    /// Before sending a range: when it missed the page cache although the
    /// session had prefetched part of it (`overlap`, from
    /// [`SessionState::account`]), reports an eviction; then accounts the
    /// request to its chain (`chain`: the chain's name, if any), asks the
    /// controller, and places its window after the range's `resident_head`
    /// ([`place_after_head`]): the first bytes of the range the server
    /// knows are in the page cache (the end of the session's previous
    /// prefetch, confirmed by a probe), 0 when none.
    pub fn before_send(
        &mut self,
        now: Instant,
        req: &RequestInfo<'_>,
        session: &mut SessionState,
        chain: Option<&str>,
        overlap: Option<PrefetchedOverlap>,
        resident_head: u64,
    ) -> BeforeSend {
        let evicted = match overlap {
            Some(o) if !req.resident => {
                let unused = now.saturating_duration_since(o.at);
                self.controller.on_evicted(now, o.bytes, unused);
                Some((o.bytes, unused))
            }
            _ => None,
        };
        let chain = chain.map(|name| {
            if !self.chains.contains_key(name) {
                if self.chains.len() >= MAX_CHAINS {
                    self.chains.clear();
                }
                self.chains.insert(name.to_string(), ChainState::default());
            }
            let c = self.chains.get_mut(name).expect("inserted");
            c.account(now, req.file, req.length);
            c
        });
        let decision = self.controller.on_request(now, req, session, chain);
        let decision = place_after_head(decision, req, resident_head);
        BeforeSend { decision, evicted }
    }

    /// A prefetch read completed.
    pub fn read_complete(&mut self, now: Instant, bytes: u64, duration: Duration) {
        self.controller.on_read_complete(now, bytes, duration);
    }

    /// The periodic tick.
    pub fn tick(&mut self, now: Instant) {
        self.controller.on_tick(now);
    }

    /// The periodic tick with the devices' statistics now: first tells the
    /// controller what the helpers read since the last call
    /// ([`PrefetchController::on_device_reads`]), then ticks.
    pub fn tick_devices(&mut self, now: Instant, devices: &[crate::prefetch::DeviceStats]) {
        let bytes: u64 = devices.iter().map(|d| d.bytes).sum();
        let busy: f64 = devices.iter().map(|d| d.busy_s).sum();
        let (b0, s0) = self.devices_seen;
        let (db, ds) = (bytes.saturating_sub(b0), (busy - s0).max(0.0));
        self.devices_seen = (bytes, busy);
        if db > 0 || ds > 0.0 {
            let busy = Duration::try_from_secs_f64(ds).unwrap_or(Duration::ZERO);
            self.controller.on_device_reads(now, db, busy);
        }
        self.controller.on_tick(now);
    }

    /// The state of a chain, if known.
    pub fn chain(&self, name: &str) -> Option<&ChainState> {
        self.chains.get(name)
    }

    /// The controller's automatic-size state, if it has one.
    pub fn auto_view(&self) -> Option<crate::auto::AutoView> {
        self.controller.auto_view()
    }
}

impl crate::config::PolicySpec {
    /// A fresh controller for this policy.
    pub fn build(&self) -> Box<dyn PrefetchController> {
        use crate::config::PolicySpec;
        match *self {
            PolicySpec::Fixed(n) => Box::new(Fixed(n)),
            PolicySpec::Scaled(size, scaling) => Box::new(crate::auto::Scaled { size, scaling }),
            PolicySpec::Auto(cfg) => Box::new(crate::auto::Auto::new(cfg)),
            PolicySpec::FirstGrow { max, square_root } => {
                Box::new(crate::chainpf::FirstGrow::new(max, square_root))
            }
        }
    }
}

#[cfg(test)]
mod tests;
