//! [`PrefetchCore`]: what a server (or the simulator, or a replay) holds
//! around a prefetch controller, and the decision made for a range before
//! it is sent. Pure: the page cache is asked through a probe the caller
//! passes in, and time is the `now` of every call.
//!
//! A range is decided in two steps, so that a live server probes the page
//! cache outside the core's lock:
//! 1. [`prepare`] (per connection, no lock): accounts the range to the
//!    session, finds its overlap with the session's prefetches, probes the
//!    range and, when it misses, the overlap: a prefetched part gone from
//!    the page cache is an eviction; a resident prefetched part at the
//!    range's start is its *resident head*, sent at once while the rest is
//!    read;
//! 2. [`PrefetchCore::decide`] (under the lock): reports the eviction,
//!    accounts the range to its chain, asks the controller and places the
//!    window after the resident head ([`place_after_head`]).
//!
//! Every input the controller's decisions depend on passes through
//! [`PrefetchCore::decide`], [`PrefetchCore::read_done`],
//! [`PrefetchCore::tick_devices`] (or [`PrefetchCore::tick`]) and
//! [`PrefetchCore::end_session`]; with a recorder set
//! ([`PrefetchCore::record`]) each call is written down as an
//! [`Event`], and [`crate::replay::replay`] feeds such a stream to a fresh
//! core and compares decision for decision.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::controller::{
    place_after_head, ChainState, PrefetchController, PrefetchDecision, PrefetchedOverlap,
    RequestInfo, SessionState,
};
use crate::events::Event;

/// Most chains remembered; beyond it the chain table starts afresh.
pub const MAX_CHAINS: usize = 65_536;

/// A range about to be sent, as the server knows it before probing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ask<'a> {
    /// The connection (the recorded stream's key for the session state).
    pub conn: u64,
    /// The session: the client's `X-Vodlab-Session`, else `cN` for
    /// connection N.
    pub session: &'a str,
    /// The file.
    pub file: u64,
    /// First byte.
    pub offset: u64,
    /// Bytes.
    pub length: u64,
    /// File size.
    pub file_size: u64,
    /// The content's bit rate, bits/s, when known (CMCD `br`, the catalog
    /// or the server's default).
    pub bitrate_bps: Option<u64>,
    /// The request was open-ended (`Range: bytes=A-`).
    pub open_ended: bool,
    /// The rest of an open-ended range asked again at its frontier (see
    /// [`prepare_continuation`]): not accounted to its session or chain
    /// again.
    pub continuation: bool,
}

/// What [`prepare`] found: the session's overlap with the range and the
/// page cache's answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Probed {
    /// Whether the whole range was in the page cache.
    pub resident: bool,
    /// The range's overlap with the session's earlier prefetches.
    pub overlap: Option<PrefetchedOverlap>,
    /// When the range missed and overlaps: whether that overlap was still
    /// in the page cache.
    pub overlap_resident: Option<bool>,
}

impl Probed {
    /// The prefetched part of the range found gone from the page cache
    /// (an eviction), if any. A range reaching past its session's prefetch
    /// misses for the part never prefetched; only a prefetched part gone
    /// from the page cache is an eviction (counting the whole range's miss
    /// made every second 2.5 MB HD range after a 4 MiB prefetch look
    /// evicted 1–3 ms later).
    pub fn evicted(&self) -> Option<PrefetchedOverlap> {
        self.overlap
            .filter(|_| self.overlap_resident == Some(false))
    }

    /// The bytes at the start of the range `[offset, offset + len)` known
    /// to be resident: the session's prefetch, confirmed by the probe,
    /// starting at the range's first byte (0 when none).
    pub fn head(&self, offset: u64, len: u64) -> u64 {
        match self.overlap {
            Some(o) if self.overlap_resident == Some(true) && o.start == offset => {
                (o.end - offset).min(len)
            }
            _ => 0,
        }
    }

    /// The probe's answers in the order [`prepare`] asked them (what a
    /// recorded event keeps).
    pub fn answers(&self) -> Vec<bool> {
        std::iter::once(self.resident)
            .chain(self.overlap_resident)
            .collect()
    }
}

/// Step 1 of a decision (see the module note): accounts `[offset, offset +
/// len)` of `file` to the session and probes the page cache through
/// `probe(offset, len) -> resident`, first the range, then (on a miss) its
/// overlap with the session's prefetches.
pub fn prepare(
    session: &mut SessionState,
    file: u64,
    offset: u64,
    len: u64,
    mut probe: impl FnMut(u64, u64) -> bool,
) -> Probed {
    let overlap = session.account(file, offset, len);
    let resident = probe(offset, len);
    let overlap_resident = overlap
        .filter(|_| !resident)
        .map(|o| probe(o.start, o.end - o.start));
    Probed {
        resident,
        overlap,
        overlap_resident,
    }
}

/// Step 1 for the rest of an open-ended range asked again at its frontier
/// `offset`: probes `[offset, offset + len)` only. The range was accounted
/// to the session when it was asked, and its overlap with the session's
/// earlier prefetches (and any eviction of them) was reported then; doing
/// it again at every frontier would credit the same prefetches as used and
/// report the same eviction once per frontier.
pub fn prepare_continuation(
    offset: u64,
    len: u64,
    mut probe: impl FnMut(u64, u64) -> bool,
) -> Probed {
    Probed {
        resident: probe(offset, len),
        overlap: None,
        overlap_resident: None,
    }
}

/// What [`PrefetchCore::decide`] found and decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decided {
    /// The controller's decision, placed after the resident head.
    pub decision: PrefetchDecision,
    /// Bytes at the start of the range known to be resident.
    pub head: u64,
    /// An eviction the controller was told about: bytes and time since the
    /// prefetch.
    pub evicted: Option<(u64, Duration)>,
}

/// What [`PrefetchCore::before_send`] found and decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BeforeSend {
    /// The controller's decision.
    pub decision: PrefetchDecision,
    /// An eviction it was told about: bytes and time since the prefetch.
    pub evicted: Option<(u64, Duration)>,
}

/// Where recorded events go: a callback and the time they count from.
struct Recorder {
    epoch: Instant,
    sink: Box<dyn FnMut(&Event) + Send>,
}

/// A controller with the per-chain states, as the server holds it (behind
/// one lock). Pure: it sequences the feedback calls in the order the server
/// makes them, so that order is tested without sockets.
pub struct PrefetchCore {
    controller: Box<dyn PrefetchController>,
    chains: HashMap<String, ChainState>,
    /// The devices' totals at the last [`PrefetchCore::tick_devices`]:
    /// bytes and time spent reading.
    devices_seen: (u64, Duration),
    recorder: Option<Recorder>,
}

impl PrefetchCore {
    /// Wraps a controller.
    pub fn new(controller: Box<dyn PrefetchController>) -> Self {
        Self {
            controller,
            chains: HashMap::new(),
            devices_seen: (0, Duration::ZERO),
            recorder: None,
        }
    }

    /// Records every call from now on as an [`Event`] handed to `sink`,
    /// with times counted from `epoch` (the server's start).
    pub fn record(&mut self, epoch: Instant, sink: Box<dyn FnMut(&Event) + Send>) {
        self.recorder = Some(Recorder { epoch, sink });
    }

    fn emit(&mut self, event: impl FnOnce(u64) -> Event, now: Instant) {
        if let Some(r) = self.recorder.as_mut() {
            let t = now.saturating_duration_since(r.epoch).as_nanos() as u64;
            (r.sink)(&event(t));
        }
    }

    /// Step 2 of a decision (see the module note), under the lock: the
    /// range `ask` that [`prepare`] probed (`probed`), in `chain` (the
    /// chain's name: the file's directory, `None` at the root).
    pub fn decide(
        &mut self,
        now: Instant,
        ask: &Ask<'_>,
        probed: &Probed,
        session: &mut SessionState,
        chain: Option<&str>,
    ) -> Decided {
        let req = RequestInfo {
            session: ask.session,
            file: ask.file,
            offset: ask.offset,
            length: ask.length,
            file_size: ask.file_size,
            bitrate_bps: ask.bitrate_bps,
            resident: probed.resident,
            open_ended: ask.open_ended,
        };
        let head = probed.head(ask.offset, ask.length);
        // a continuation's range was accounted to its chain when asked
        let chain = if ask.continuation { None } else { chain };
        let b = self.before_send(now, &req, session, chain, probed.evicted(), head);
        let decided = Decided {
            decision: b.decision,
            head,
            evicted: b.evicted,
        };
        self.emit(
            |t_ns| Event::Request {
                t_ns,
                conn: ask.conn,
                session: ask.session.to_string(),
                file: ask.file,
                offset: ask.offset,
                length: ask.length,
                file_size: ask.file_size,
                bitrate_bps: ask.bitrate_bps,
                open_ended: ask.open_ended,
                continuation: ask.continuation,
                chain: chain.map(str::to_string),
                probes: probed.answers(),
                prefetch: decided.decision.range(),
                head: decided.head,
                evicted: decided.evicted.map(|(b, _)| b),
            },
            now,
        );
        decided
    }

    /// The lower-level decision [`PrefetchCore::decide`] makes: when the
    /// range missed the page cache although the session had prefetched
    /// part of it (`overlap`, from [`SessionState::account`]), reports an
    /// eviction; then accounts the request to its chain (`chain`: the
    /// chain's name, if any), asks the controller, and places its window
    /// after the range's `resident_head` ([`place_after_head`]). Not
    /// recorded.
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

    /// A prefetch of `[start, start + len)` of `file` for connection
    /// `conn` completed: the helper read `bytes` in `duration`. The
    /// controller hears of it and the session remembers the range, with
    /// `used` bytes of it the request that caused it. Returns the bytes of
    /// ranges the session forgot unused (wasted).
    #[allow(clippy::too_many_arguments)]
    pub fn read_done(
        &mut self,
        now: Instant,
        conn: u64,
        session: &mut SessionState,
        file: u64,
        start: u64,
        len: u64,
        used: u64,
        bytes: u64,
        duration: Duration,
    ) -> u64 {
        self.controller.on_read_complete(now, bytes, duration);
        let wasted = session.record_prefetch(now, file, start, len, used);
        self.emit(
            |t_ns| Event::ReadDone {
                t_ns,
                conn,
                file,
                start,
                len,
                used,
                bytes,
                duration_ns: duration.as_nanos() as u64,
            },
            now,
        );
        wasted
    }

    /// A prefetch read completed, without a session to remember it (tests
    /// and controllers' unit checks). Not recorded.
    pub fn read_complete(&mut self, now: Instant, bytes: u64, duration: Duration) {
        self.controller.on_read_complete(now, bytes, duration);
    }

    /// The periodic tick of a server that does not know its devices.
    pub fn tick(&mut self, now: Instant) {
        self.controller.on_tick(now);
        self.emit(
            |t_ns| Event::Tick {
                t_ns,
                device_bytes: None,
                device_busy_ns: None,
            },
            now,
        );
    }

    /// The periodic tick with the devices' totals now (bytes the helpers
    /// read and time they spent reading, since the start): first tells the
    /// controller what they read since the last call
    /// ([`PrefetchController::on_device_reads`]), then ticks.
    pub fn tick_devices(&mut self, now: Instant, bytes: u64, busy: Duration) {
        let (b0, s0) = self.devices_seen;
        let (db, ds) = (bytes.saturating_sub(b0), busy.saturating_sub(s0));
        self.devices_seen = (bytes, busy);
        if db > 0 || !ds.is_zero() {
            self.controller.on_device_reads(now, db, ds);
        }
        self.controller.on_tick(now);
        self.emit(
            |t_ns| Event::Tick {
                t_ns,
                device_bytes: Some(bytes),
                device_busy_ns: Some(busy.as_nanos() as u64),
            },
            now,
        );
    }

    /// Connection `conn` ended: its session forgets every range. Returns
    /// the bytes prefetched and never requested.
    pub fn end_session(&mut self, now: Instant, conn: u64, session: &mut SessionState) -> u64 {
        self.emit(|t_ns| Event::SessionEnd { t_ns, conn }, now);
        session.finish()
    }

    /// The state of a chain, if known.
    pub fn chain(&self, name: &str) -> Option<&ChainState> {
        self.chains.get(name)
    }

    /// The controller's automatic-size state, if it is the automatic size.
    pub fn auto_view(&self) -> Option<crate::auto::AutoView> {
        self.controller
            .as_any()
            .and_then(|a| a.downcast_ref::<crate::auto::Auto>())
            .map(crate::auto::Auto::view)
    }
}
