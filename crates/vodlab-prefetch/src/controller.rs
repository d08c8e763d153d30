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

impl PrefetchDecision {
    /// The decision as `[offset, len]`, `None` when nothing is read.
    pub fn range(self) -> Option<[u64; 2]> {
        match self {
            PrefetchDecision::None => None,
            PrefetchDecision::Prefetch { offset, len } => Some([offset, len]),
        }
    }
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
        if self.prefetched.len() >= PREFETCH_RANGES {
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
    /// The controller itself, for a caller that knows its type (the core
    /// shows the automatic size's state in `/vodlab/stats` through it);
    /// `None` by default.
    fn as_any(&self) -> Option<&dyn std::any::Any> {
        None
    }
}

/// A fixed prefetch size: on a miss, `size` bytes from the request's
/// offset, never less than the request (but see [`policy_len`] for an
/// open-ended one); nothing on a hit. Ignores feedback.
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
        read_size(self.0, req)
    }

    fn on_read_complete(&mut self, _now: Instant, _bytes: u64, _duration: Duration) {}

    fn on_evicted(&mut self, _now: Instant, _bytes: u64, _unused_for: Duration) {}

    fn on_tick(&mut self, _now: Instant) {}
}

/// The bytes a size policy reads for `req` when its size is `size`: at least
/// the request, so that one read serves it; but for an open-ended request
/// (`bytes=A-`, which asks for the rest of the file) the policy's size, as
/// the thesis prefetches an open-ended stream p bytes at a time (First-Grow
/// does the same). Before this rule `fixed:4M` read an open-ended range in
/// pieces of `max_prefetch` (16 MiB) whatever its size.
pub fn policy_len(size: u64, req: &RequestInfo<'_>) -> u64 {
    if req.open_ended {
        size.max(1)
    } else {
        size.max(req.length)
    }
}

/// The decision of a size policy whose size for `req` is `size`: nothing
/// on a hit, else [`policy_len`] bytes from the request's offset. Fixed,
/// scaled and automatic sizes all decide so; they differ only in `size`.
pub fn read_size(size: u64, req: &RequestInfo<'_>) -> PrefetchDecision {
    if req.resident {
        return PrefetchDecision::None;
    }
    PrefetchDecision::Prefetch {
        offset: req.offset,
        len: policy_len(size, req),
    }
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

#[cfg(test)]
mod tests;
