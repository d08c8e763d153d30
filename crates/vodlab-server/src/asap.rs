//! ASAP executor of one file range: probe, ask the controller, prefetch
//! through the device's helper, and send each byte once it is in the page
//! cache, so `sendfile` never waits for the disk on a runtime thread.
//!
//! - **Bytes go out as they are read.** The helper reads a prefetch in
//!   pieces (the first [`FIRST_PIECE`] bytes, then [`PIECE`]s) and
//!   publishes its progress after each; the connection sends what is
//!   resident and waits for the next piece. The time to the first byte of
//!   an uncached range is the first piece's read, not the whole prefetch's;
//!   the disk still reads each prefetch as one serialized run of big reads
//!   (ASAP's point), only the socket is fed while it does.
//! - **A response never completes before its prefetch.** When a prefetch
//!   reaches past the range (read-ahead the controller asked for), the
//!   range's last [`HOLD`] bytes wait for the whole read, so a client's next
//!   request finds the read-ahead resident and the controller has heard of
//!   the read (`on_read_complete`) before that request, as before.
//! - **A resident head goes out at once, and the prefetch starts after
//!   it.** A range that starts inside its session's previous prefetch
//!   (still resident) but reaches past it sends that head while the helper
//!   reads, and the window starts at the head's end
//!   (`controller::place_after_head`), so the drive reads only new bytes.
//! - **One prefetch per connection, at most `max_prefetch` bytes.** A
//!   decision is clipped to `Config::max_prefetch`; a range larger than
//!   that is read in prefetches of that size, the next queued when the
//!   previous one is read (so the disk works while the socket drains), never
//!   two at once. The helpers' queues hold at most one prefetch per
//!   connection.
//! - **A connection that goes away cancels its prefetch.** A client gone
//!   before its prefetch is queued (it hung up right after the request)
//!   gets none. While it waits for a read the connection watches its
//!   socket: a client that closes it (FIN or reset, as nginx takes a
//!   client's EOF while it waits for an upstream) ends the response, and
//!   the prefetch is dropped from the queue unread or stopped after the
//!   piece being read (`cancelled`, `stopped` in the device statistics;
//!   the helper watches the socket too, and reads with the kernel's
//!   read-ahead off, so nothing reads on for it). So does a client that
//!   goes away mid-send.
//! - **The sink is a connection, an HTTP/2 stream or an HTTP/3 stream**
//!   (`Sink`): bytes go out with sendfile (plain TCP), through TLS, or as
//!   DATA on an h2 or h3 stream; for an h2 stream, "went away" is the
//!   client's RST_STREAM, for an h3 stream its QUIC connection closing
//!   (the helper has no socket of its own to watch for it).

use std::fs::File;
use std::io;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use vodlab_http::server::Head;

use crate::access::CacheOutcome;
use crate::conn_io::Sink;
use crate::plan::FileKind;
use crate::prefetch::{Lost, Pending, ReadReport};
#[cfg(doc)]
use crate::prefetch::{FIRST_PIECE, PIECE};
use crate::server::State;
use vodlab_prefetch::controller::{clip, PrefetchDecision, SessionState};
use vodlab_prefetch::core::{prepare, prepare_continuation, Ask};
use vodlab_prefetch::next_object::{self, NextRead};

/// Bytes at the end of a range held back until a prefetch reaching past
/// the range is complete.
pub const HOLD: u64 = 4096;

/// The file a range is sent from.
pub(crate) struct FileCtx<'a> {
    pub(crate) file: &'a Arc<File>,
    pub(crate) key: u64,
    pub(crate) size: u64,
    pub(crate) head: &'a Head,
    /// The request's bit rate, bits/s (`crate::prepare` decides it once).
    pub(crate) bitrate_bps: Option<u64>,
}

/// What a connection lends the executor of a range.
pub(crate) struct RangeIo<'a, 'b> {
    pub(crate) sink: Sink<'a>,
    pub(crate) st: &'b State,
    pub(crate) session: &'a mut SessionState,
    pub(crate) conn: u64,
}

/// The prefetch of a connection in flight.
struct Flight {
    pending: Pending,
    start: u64,
    len: u64,
}

impl RangeIo<'_, '_> {
    /// Sends `[off, off + len)` of the file in ASAP mode (see the module
    /// note). Returns the probe's outcome and how sending went.
    pub(crate) async fn send_range(
        &mut self,
        f: &FileCtx<'_>,
        off: u64,
        len: u64,
        chain: &str,
    ) -> (CacheOutcome, io::Result<()>) {
        let (resident, head, decision) = self.decide(f, off, len, chain, false);
        let cache = if resident {
            CacheOutcome::Hit
        } else {
            CacheOutcome::Miss
        };
        let ready = if resident { off + len } else { off + head };
        let open = f
            .head
            .header("range")
            .is_some_and(crate::request::open_ended_range);
        let chain = open.then_some(chain);
        (
            cache,
            self.stream(f, off, len, ready, decision, chain).await,
        )
    }

    /// The next read of a range being sent, from `from` (not known to be
    /// resident) to the range's `end`: for an open-ended range (`chain` is
    /// `Some`) the controller decides it, as a continuation of the stream
    /// at its frontier (thesis ch. 5: an open-ended stream is prefetched p
    /// bytes at a time); otherwise, and when the controller reads nothing,
    /// the next `max_prefetch` bytes. `Err(n)`: `[from, from + n)` is
    /// resident already.
    fn next_read(
        &mut self,
        f: &FileCtx<'_>,
        from: u64,
        end: u64,
        chain: Option<&str>,
        watch: bool,
    ) -> Result<Flight, u64> {
        let bound = self.st.cfg.max_prefetch;
        if let Some(chain) = chain {
            let (resident, _, decision) = self.decide(f, from, end - from, chain, true);
            if resident {
                return Err(end - from);
            }
            if let Some((o, n)) = clip(decision, f.size).filter(|&(o, _)| o == from) {
                return Ok(self.start(f, o, n.min(bound), watch));
            }
        }
        let n = (end - from).min(bound);
        if self.st.prober.resident(f.file, from, n) {
            Err(n)
        } else {
            Ok(self.start(f, from, n, watch))
        }
    }

    /// Accounts the range to the session, probes, and asks the controller.
    /// Returns whether the range is resident, the bytes at its start known
    /// to be resident (its session's prefetch), and the decision. A
    /// `continuation` (the rest of an open-ended range, asked again at its
    /// frontier) is only probed: not accounted to the session, its chain or
    /// the requested-bytes counters again, and its overlap with earlier
    /// prefetches not reported again
    /// ([`vodlab_prefetch::core::prepare_continuation`]).
    fn decide(
        &mut self,
        f: &FileCtx<'_>,
        a: u64,
        len: u64,
        chain: &str,
        continuation: bool,
    ) -> (bool, u64, PrefetchDecision) {
        let st = self.st;
        let probe = |o, n| st.prober.resident(f.file, o, n);
        let probed = if continuation {
            prepare_continuation(a, len, probe)
        } else {
            prepare(self.session, f.key, a, len, probe)
        };
        let resident = probed.resident;
        let c = &st.counters;
        if !continuation {
            c.requested_bytes.fetch_add(len, Ordering::Relaxed);
            if resident {
                c.probe_hits.fetch_add(1, Ordering::Relaxed);
                let own = probed.overlap.map_or(0, |o| o.bytes).min(len);
                c.probed_hit_bytes.fetch_add(len - own, Ordering::Relaxed);
            } else {
                c.probe_misses.fetch_add(1, Ordering::Relaxed);
            }
        }
        let session: std::borrow::Cow<'_, str> = match f.head.header("x-vodlab-session") {
            Some(s) if !s.is_empty() => s.into(),
            _ => format!("c{}", self.conn).into(),
        };
        let ask = Ask {
            conn: self.conn,
            session: &session,
            file: f.key,
            offset: a,
            length: len,
            file_size: f.size,
            bitrate_bps: f.bitrate_bps,
            open_ended: f
                .head
                .header("range")
                .is_some_and(crate::request::open_ended_range),
            continuation,
        };
        let chain = (!chain.is_empty()).then_some(chain);
        let d = st.prefetch.lock().expect("lock").decide(
            Instant::now(),
            &ask,
            &probed,
            self.session,
            chain,
        );
        if let Some((bytes, unused)) = d.evicted {
            c.prefetch_evictions.fetch_add(1, Ordering::Relaxed);
            c.prefetch_evicted_bytes.fetch_add(bytes, Ordering::Relaxed);
            c.eviction_time_us
                .fetch_add(unused.as_micros() as u64, Ordering::Relaxed);
        }
        (resident, d.head, d.decision)
    }

    /// Queues a prefetch, its client's socket watched by the helper while
    /// the connection takes the client's end of sending as its going away
    /// (`watch`: no pipelined request seen).
    fn start(&self, f: &FileCtx<'_>, start: u64, len: u64, watch: bool) -> Flight {
        let client = if watch { self.sink.client_fd() } else { None };
        Flight {
            pending: self.st.helpers.prefetch(f.file.clone(), start, len, client),
            start,
            len,
        }
    }

    /// A prefetch read is over: the controller hears of it, the session
    /// remembers it (with the bytes of `[off, end)` it covers as used).
    fn finished(&mut self, f: &FileCtx<'_>, fl: &Flight, report: ReadReport, off: u64, end: u64) {
        let used = end.min(fl.start + fl.len).saturating_sub(off.max(fl.start));
        let wasted = self.st.prefetch.lock().expect("lock").read_done(
            Instant::now(),
            self.conn,
            self.session,
            f.key,
            fl.start,
            fl.len,
            used,
            report.bytes,
            report.duration,
        );
        self.st
            .counters
            .wasted_prefetch_bytes
            .fetch_add(wasted, Ordering::Relaxed);
    }

    /// Sends the range as its bytes become resident, with at most one
    /// prefetch of at most `max_prefetch` bytes in flight; `[off, ready)` is
    /// known to be resident and goes out at once.
    async fn stream(
        &mut self,
        f: &FileCtx<'_>,
        off: u64,
        len: u64,
        ready: u64,
        decision: PrefetchDecision,
        open_chain: Option<&str>,
    ) -> io::Result<()> {
        let st = self.st;
        let bound = st.cfg.max_prefetch;
        let end = off + len;
        let mut pos = off;
        // bytes from `pos` known to be in the page cache end here
        let mut ready = ready.clamp(off, end);
        let mut flight = match clip(decision, f.size) {
            // a client that hung up right after its request: nothing queued for it
            Some(_) if self.sink.gone_now() => {
                st.helpers.gone_before_queued(f.file);
                return Err(gone_while_read());
            }
            Some((o, n)) => Some(self.start(f, o, n.min(bound), true)),
            None => None,
        };
        // watch the socket for the client going away while it waits, until
        // it sends something else (a pipelined request); so does the helper
        let mut watch_gone = true;
        loop {
            if let Some(fl) = &flight {
                let pr = fl.pending.progress();
                if pr.client_gone {
                    // the helper saw the socket close before this task did
                    return Err(gone_while_read());
                }
                if fl.start <= ready {
                    ready = ready.max(fl.start + pr.read);
                }
                if let Some(report) = pr.done {
                    let fl = flight.take().expect("in flight");
                    self.finished(f, &fl, report, off, end);
                }
            }
            if pos >= end && flight.is_none() {
                return Ok(());
            }
            // a response does not complete before a prefetch reaching past it
            let limit = match &flight {
                Some(fl) if fl.start + fl.len > end => end.saturating_sub(HOLD).max(pos),
                _ => end,
            };
            let avail = ready.min(limit);
            if avail > pos {
                if flight.is_none() && ready < end {
                    // the next part of a large range: read while this one is sent
                    match self.next_read(f, ready, end, open_chain, watch_gone) {
                        Ok(fl) => flight = Some(fl),
                        Err(n) => ready += n,
                    }
                }
                // on an error the flight is dropped: its prefetch is cancelled
                self.sink.send_file(st, f.file, pos, avail - pos).await?;
                pos = avail;
                continue;
            }
            match &mut flight {
                Some(fl) => {
                    let sink = &mut self.sink;
                    tokio::select! {
                        r = fl.pending.changed() => if let Err(Lost) = r {
                            // the helper is gone (shutdown): what is not read is read by sendfile
                            flight = None;
                            ready = end;
                        },
                        r = sink.gone(), if watch_gone => match r {
                            Ok(true) => return Err(gone_while_read()),
                            Ok(false) => {
                                watch_gone = false;
                                fl.pending.unwatch_client();
                            }
                            Err(e) => return Err(e),
                        },
                    }
                }
                None => match self.next_read(f, pos, end, open_chain, watch_gone) {
                    Ok(fl) => flight = Some(fl),
                    Err(n) => ready = pos + n,
                },
            }
        }
    }
}

/// The error of a range whose client went away before it was read.
fn gone_while_read() -> io::Error {
    io::Error::new(
        io::ErrorKind::ConnectionAborted,
        "the client went away while its range was read",
    )
}

/// A next object a request's CMCD names (`nor`, with `nrr`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NextObject {
    /// Its path under the root (routed as a request target would be), or
    /// `None` when the reference leaves the root or is not a path.
    pub(crate) path: Option<PathBuf>,
    /// The range `nrr` gives, `(offset, end)`.
    pub(crate) range: Option<(u64, Option<u64>)>,
}

/// Prefetches the next objects a request's CMCD named
/// (`--prefetch-next-object`; [`crate::prepare::next_objects`] resolved
/// them): opens each under the root as a request would, decides its read
/// ([`vodlab_prefetch::next_object::decide`]: its first
/// `next_object_bytes`, or its `nrr` range, unless resident) and queues it
/// on the device's helper, behind the reads queued for responses, not
/// waited for by anyone.
pub(crate) fn prefetch_next_objects(st: &State, next: &[NextObject]) {
    let Some(cap) = st.cfg.next_object_bytes else {
        return;
    };
    let c = &st.counters;
    for n in next {
        let opened = n.path.as_ref().and_then(|p| st.root.open_file(p).ok());
        let Some((file, meta)) = opened.filter(|(_, m)| m.kind == FileKind::Regular) else {
            c.next_object_refused.fetch_add(1, Ordering::Relaxed);
            continue;
        };
        match next_object::decide(meta.size, n.range, cap, |o, l| {
            st.prober.resident(&file, o, l)
        }) {
            NextRead::Read { offset, len } => {
                c.next_object_prefetches.fetch_add(1, Ordering::Relaxed);
                c.next_object_bytes.fetch_add(len, Ordering::Relaxed);
                st.helpers.prefetch_detached(Arc::new(file), offset, len);
            }
            NextRead::Resident => {
                c.next_object_resident.fetch_add(1, Ordering::Relaxed);
            }
            NextRead::Nothing => {}
        }
    }
}

/// The connection `conn` ended: its session's prefetched ranges never
/// requested are counted as wasted (and the prefetch core hears of the
/// end when the session had ranges decided by it).
pub(crate) fn end_session(st: &State, conn: u64, session: &mut SessionState) {
    let wasted = if session.requests > 0 {
        st.prefetch
            .lock()
            .expect("lock")
            .end_session(Instant::now(), conn, session)
    } else {
        session.finish()
    };
    st.counters
        .wasted_prefetch_bytes
        .fetch_add(wasted, Ordering::Relaxed);
}
