//! One session's task: its driver's actions executed over the run's
//! transport ([`crate::io::transport`]), its figures reported in batches.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use std::future::{poll_fn, Future};
use std::task::Poll;

use futures_util::future::BoxFuture;
use futures_util::FutureExt;
use tokio::sync::mpsc;
use vodlab_workload::content;
use vodlab_workload::script::Session;

use super::collect::session_id;
use super::{secs, us, Ctx, Report, BATCH, DELIVERY_BATCH};
use crate::core::delivery::DeliveryOut;
use crate::core::driver::{
    Action, DriverConfig, Event, RequestRecord, SessionDriver, SessionOutcome,
};
use crate::core::exchange::{ErrorKind, Failure};
use crate::core::link::LinkSpec;
use crate::core::time::{Clock, Time};
use crate::io::http::{Outgoing, SHAPED_READ_INTERVAL};
use crate::io::transport::{Conn, SessionTransport};
use crate::out::metrics::{RequestSample, SampleDone, SessionSample};

/// HTTP/2 read turns (64 KiB each, `transport::shaped::READ_TURN`) a
/// session reads in one wake-up, its streams consuming each before the
/// next, before it lets the worker's other tasks run (1 MiB).
const H2_TURNS_PER_WAKE: usize = 16;

/// A session's reports, sent in batches; what is left is sent when the
/// session ends or is aborted (dropped), so an interrupted run keeps it.
pub(super) struct Batch {
    tx: mpsc::UnboundedSender<Report>,
    shard: u32,
    index: u32,
    samples: Vec<RequestSample>,
    delivery: DeliveryOut,
}

impl Batch {
    fn push(&mut self, s: RequestSample) {
        self.samples.push(s);
        if self.samples.len() >= BATCH {
            self.flush();
        }
    }

    /// Takes the driver's delivery figures, reporting them when many.
    fn take_delivery(&mut self, d: &mut SessionDriver<'_>) {
        if d.delivery_pending() > 0 {
            d.take_delivery(&mut self.delivery);
            if self.delivery.len() >= DELIVERY_BATCH {
                self.flush();
            }
        }
    }

    fn flush(&mut self) {
        if !self.samples.is_empty() || !self.delivery.is_empty() {
            let samples = std::mem::take(&mut self.samples);
            let delivery = std::mem::take(&mut self.delivery);
            let _ = self.tx.send(Report::Requests {
                shard: self.shard,
                index: self.index,
                samples,
                delivery,
            });
        }
    }
}

impl Drop for Batch {
    fn drop(&mut self) {
        self.flush();
    }
}

type Step<'a> = BoxFuture<'a, (usize, Option<Conn>, Event)>;

/// The session's driver, shared by its loop and the reads of its exchanges
/// (one task: the lock is never contended).
type Shared<'s> = Mutex<SessionDriver<'s>>;

fn lock<'a, 's>(d: &'a Shared<'s>) -> MutexGuard<'a, SessionDriver<'s>> {
    d.lock().unwrap_or_else(|e| e.into_inner())
}

/// Where an exchange reports delivery figures that pile up during one long
/// response (the session loop only wakes when it completes).
struct Reporter<'a> {
    tx: &'a mpsc::UnboundedSender<Report>,
    shard: u32,
    index: u32,
}

pub(super) async fn run_session(
    ctx: Arc<Ctx>,
    shard: usize,
    index: usize,
    tx: mpsc::UnboundedSender<Report>,
) {
    let work = ctx.work.clone();
    let whole = match work.session(shard, index) {
        Ok(w) => w,
        Err(e) => return unreadable(&ctx, shard, index, &e, &tx),
    };
    let session: &Session = &whole;
    let link = if ctx.cfg.shaping {
        let class = session.header.class.as_deref().unwrap_or("default");
        work.classes.get(class).copied().unwrap_or_default()
    } else {
        LinkSpec::default()
    };
    let id = session_id(session, shard, index);
    // the driver sees the run's clock; timers go back to instants
    let clock: Clock = ctx.clock;
    let start = clock.now();
    ctx.live.session_started();
    let mut batch = Batch {
        tx: tx.clone(),
        shard: shard as u32,
        index: index as u32,
        samples: Vec::new(),
        delivery: DeliveryOut::default(),
    };
    let reporter = Reporter {
        tx: &tx,
        shard: shard as u32,
        index: index as u32,
    };
    let dcfg = DriverConfig {
        pacing: ctx.cfg.pacing,
        late_pacing: ctx.cfg.late_pacing,
        // under h3 the delay is the QUIC link's, datagram by datagram
        link_delay: if ctx.cfg.transport.protocol.is_h3() {
            std::time::Duration::ZERO
        } else {
            link.delay
        },
        playback_buffer: ctx.cfg.playback_buffer,
        pace_target: ctx.cfg.pace_target,
        epoch: Some(Time::ZERO),
        ..DriverConfig::default()
    };
    let shared: Shared<'_> = Mutex::new(SessionDriver::new(
        session,
        Some(&work.file_sizes),
        dcfg,
        start,
    ));
    let n = lock(&shared).connections();
    let transport = ctx
        .connector
        .session(n)
        .for_session(ctx.cfg.seed, shard, index);
    let mut conns: Vec<Option<Conn>> = (0..n).map(|_| None).collect();
    // what is in flight on each connection; dropping it abandons the exchange
    // (a session has few connections: polling each slot on a wake is cheaper
    // than a FuturesUnordered with its per-future task and abort handle)
    let mut steps: Vec<Option<Step<'_>>> = (0..n).map(|_| None).collect();
    let mut timer = Box::pin(tokio::time::sleep_until(clock.instant_of(start).into()));
    let mut armed: Option<Time> = None;
    let mut done: Vec<(usize, Option<Conn>, Event)> = Vec::with_capacity(n);
    loop {
        let now = clock.now();
        // the guard lives in this block only: never across an await
        let wake = {
            let mut driver = lock(&shared);
            while let Some(action) = driver.poll_action(now) {
                match action {
                    Action::Connect { conn } => {
                        conns[conn] = None;
                        let ctx = &ctx;
                        let (link, transport, tx) = (&link, &transport, &tx);
                        let fut = async move {
                            match transport.connect(conn, link).await {
                                Ok((mut c, opened)) => {
                                    if let Conn::H1(h) = &mut c {
                                        // a shaped body in a few batched reads, not one
                                        // per bucket chunk (a receive buffer left small
                                        // only costs reads)
                                        let _ = h.batch_reads_tcp(
                                            SHAPED_READ_INTERVAL,
                                            ctx.cfg.kernel_down,
                                        );
                                    }
                                    ctx.refused_streak.store(0, Ordering::Relaxed);
                                    ctx.last_connect_ok_us
                                        .store(ctx.us(Instant::now()), Ordering::Relaxed);
                                    if opened.new_connection {
                                        let _ = tx.send(Report::Opened(opened));
                                    }
                                    (conn, Some(c), Event::Connected { conn })
                                }
                                Err(failure) => {
                                    if failure.kind == ErrorKind::Refused {
                                        ctx.refused_streak.fetch_add(1, Ordering::Relaxed);
                                    }
                                    (conn, None, Event::ConnectFailed { conn, failure })
                                }
                            }
                        }
                        .boxed();
                        steps[conn] = Some(fut);
                    }
                    Action::Send { conn, request } => {
                        let Some(c) = conns[conn].take() else {
                            // the driver only sends on connections it saw open
                            driver.handle(
                                now,
                                Event::Failed {
                                    conn,
                                    failure: Failure::new(ErrorKind::Other, "no open connection"),
                                },
                            );
                            continue;
                        };
                        let (shared, reporter, tr) = (&shared, &reporter, &transport);
                        let fut =
                            exchange(&ctx, tr, c, conn, id, session, request, shared, reporter);
                        steps[conn] = Some(fut.boxed());
                    }
                    Action::Close { conn } => {
                        steps[conn] = None;
                        conns[conn] = None;
                    }
                    Action::Record(r) => {
                        if let Ok(d) = &r.result {
                            ctx.live.requests.fetch_add(1, Ordering::Relaxed);
                            ctx.live.bytes.fetch_add(d.bytes, Ordering::Relaxed);
                        }
                        batch.push(sample(&r));
                    }
                    Action::Finished(o) => {
                        drop(steps);
                        for f in transport.quic_figures() {
                            let _ = tx.send(Report::Quic(f));
                        }
                        if let Some(c) = transport.link_counts() {
                            let _ = tx.send(Report::QuicLink(c));
                        }
                        batch.take_delivery(&mut driver);
                        batch.flush();
                        finish(&ctx, &batch, o);
                        return;
                    }
                }
            }
            batch.take_delivery(&mut driver);
            driver.poll_timeout()
        };
        let busy = steps.iter().any(Option::is_some);
        if !busy {
            // waiting on its timer only (a paced session between requests):
            // what it has to report goes now, so an idle session holds no
            // samples (up to BATCH of them were held for its whole life)
            batch.flush();
        }
        if !busy && wake.is_none() {
            // cannot happen with a correct driver; never spin
            debug_assert!(false, "session driver stalled");
            ctx.live.active.fetch_sub(1, Ordering::Relaxed);
            return;
        }
        // one timer per session, moved only when the driver's wake-up changes
        if let Some(t) = wake {
            if armed != Some(t) {
                timer.as_mut().reset(clock.instant_of(t).into());
                armed = Some(t);
            }
        }
        // every step that completed in this wake-up (with HTTP/2 one read
        // may complete several streams), or none when the timer fired
        done.clear();
        poll_fn(|cx| {
            // the HTTP/2 connections' frames first: they may complete a step
            let _ = transport.poll_drivers_yielding(cx);
            let mut turns = 0;
            loop {
                for slot in steps.iter_mut() {
                    if let Some(f) = slot.as_mut() {
                        if let Poll::Ready(out) = f.as_mut().poll(cx) {
                            *slot = None;
                            done.push(out);
                        }
                    }
                }
                // and again after them: requests the steps just queued leave
                // in this wake-up instead of the next, and a connection that
                // ended a read turn reads its next one now that the streams
                // consumed the last (no self-wake: see `Shaped::yielding_to`)
                let more = transport.poll_drivers_yielding(cx);
                turns += 1;
                if more && (!done.is_empty() || turns == H2_TURNS_PER_WAKE) {
                    cx.waker().wake_by_ref();
                }
                if !more || !done.is_empty() || turns == H2_TURNS_PER_WAKE {
                    break;
                }
            }
            if !done.is_empty() {
                return Poll::Ready(());
            }
            if wake.is_some() && timer.as_mut().poll(cx).is_ready() {
                armed = None;
                return Poll::Ready(());
            }
            Poll::Pending
        })
        .await;
        if !done.is_empty() {
            let mut driver = lock(&shared);
            let now = clock.now();
            for (conn, c, ev) in done.drain(..) {
                conns[conn] = c;
                driver.handle(now, ev);
            }
        }
    }
}

/// Sends request `j` on `c` and reads its answer, checking a sample of body
/// bytes against the file set's content and telling the driver when body
/// bytes arrive.
#[allow(clippy::too_many_arguments)]
async fn exchange(
    ctx: &Ctx,
    transport: &SessionTransport<'_>,
    mut c: Conn,
    conn: usize,
    session_id: u64,
    session: &Session,
    j: usize,
    shared: &Shared<'_>,
    reporter: &Reporter<'_>,
) -> (usize, Option<Conn>, Event) {
    let r = &session.requests[j];
    let range = r.range.map(|g| g.header_value());
    // CMCD when the session knows its bit rate and the script wrote none
    let with_cmcd: Option<Vec<String>> = match session.header.bitrate_bps {
        Some(bps) if ctx.cfg.cmcd && bps > 0 && !crate::core::cmcd::present(&r.headers) => {
            let mut h = r.headers.clone();
            h.extend(
                crate::core::cmcd::Cmcd {
                    bitrate_bps: bps,
                    duration_s: session.header.request_s,
                    object_type: "v",
                    buffer_s: lock(shared).buffer_s(ctx.clock.now()),
                    session: session_id,
                }
                .headers(),
            );
            Some(h)
        }
        _ => None,
    };
    let out = Outgoing {
        method: r.method.as_str(),
        path: &r.path,
        range: range.as_deref(),
        headers: with_cmcd.as_deref().unwrap_or(&r.headers),
        body: r.body.as_deref(),
        session: session_id,
        http10: r.http10,
    };
    let checked = match (
        ctx.work.content_seed,
        sampled(ctx.cfg.check_bytes, session_id, &r.path, r.range),
    ) {
        (Some(seed), true) => Some((
            seed,
            content::file_key(&r.path),
            r.range.map_or(0, |g| g.start),
        )),
        _ => None,
    };
    let mut bad_byte: Option<u64> = None;
    let mut sink = |at: u64, data: &[u8]| {
        if let (Some((seed, key, base)), None) = (checked, bad_byte) {
            if let Err(off) = content::check(seed, key, base + at, data) {
                bad_byte = Some(off);
            }
        }
    };
    // per read: one uncontended lock and the driver's O(1) meters
    let mut arrived = |at: Instant, bytes: u64| {
        let mut d = lock(shared);
        d.handle(ctx.clock.time_of(at), Event::Body { conn, bytes });
        if d.delivery_pending() >= DELIVERY_BATCH {
            let mut delivery = DeliveryOut::default();
            d.take_delivery(&mut delivery);
            let _ = reporter.tx.send(Report::Requests {
                shard: reporter.shard,
                index: reporter.index,
                samples: Vec::new(),
                delivery,
            });
        }
    };
    let limits = crate::core::exchange::ReadLimits {
        stop_after: r.stop_after,
        read_kbps: r.read_kbps,
    };
    match transport
        .exchange_limited(&mut c, &out, limits, &mut sink, &mut arrived)
        .await
    {
        // the status is judged before the content: a 404 page or a 500's
        // body is not "wrong content" but a bad status, which the driver's
        // check names (a wrong server root must not read as corruption)
        Ok(response) if bad_byte.is_some() && matches!(response.status, 200 | 206) => {
            let off = bad_byte.unwrap_or(0);
            let failure = Failure::new(
                ErrorKind::ContentMismatch,
                format!("wrong content at byte {off} of {}", r.path),
            );
            (conn, None, Event::Failed { conn, failure })
        }
        Ok(response) => {
            let keep = response.keep_alive.then_some(c);
            (conn, keep, Event::Response { conn, response })
        }
        Err(failure) => (conn, None, Event::Failed { conn, failure }),
    }
}

fn sample(r: &RequestRecord) -> RequestSample {
    RequestSample {
        request: r.request as u32,
        scheduled_s: secs(r.scheduled),
        sent_s: secs(r.issued),
        send_lateness_us: r.send_lateness.map(|d| d.as_micros() as u64),
        outcome: match &r.result {
            Ok(d) => Ok(SampleDone {
                done_us: us(d.done),
                response_us: d.done.saturating_duration_since(r.issued).as_micros() as u64,
                ttfb_us: d.ttfb.as_micros() as u64,
                from_schedule_us: d.done.saturating_duration_since(r.scheduled).as_micros() as u64,
                bytes: d.bytes,
                status: d.status,
                playback: d.playback,
            }),
            Err(f) => Err(f.kind),
        },
    }
}

/// Prints the first failure of each kind with its detail (the results
/// count failures by kind only; without this an `other` error, e.g. a TLS
/// certificate the client refuses, would say nothing about its cause).
fn first_of_kind(batch: &Batch, request: usize, f: &Failure) {
    static SEEN: std::sync::Mutex<Vec<ErrorKind>> = std::sync::Mutex::new(Vec::new());
    let mut seen = SEEN.lock().unwrap_or_else(|e| e.into_inner());
    if !seen.contains(&f.kind) {
        seen.push(f.kind);
        eprintln!(
            "vodlab: first `{}` failure (session {} of shard {}, request {request}): {}",
            f.kind.name(),
            batch.index,
            batch.shard,
            f.detail
        );
    }
}

fn finish(ctx: &Ctx, batch: &Batch, o: SessionOutcome) {
    ctx.live.active.fetch_sub(1, Ordering::Relaxed);
    if let Some((request, f)) = &o.failure {
        first_of_kind(batch, *request, f);
    }
    if o.failure.is_some() {
        ctx.live.failed.fetch_add(1, Ordering::Relaxed);
    } else {
        ctx.live.completed.fetch_add(1, Ordering::Relaxed);
    }
    let _ = batch.tx.send(Report::Session {
        shard: batch.shard,
        index: batch.index,
        sample: SessionSample {
            start_s: secs(o.start),
            end_s: secs(o.end),
            failure: o.failure.as_ref().map(|(_, f)| f.kind),
            skipped: o.skipped as u64,
            viewer: o.viewer,
            reconnects: u64::from(o.reconnects),
            server_closes: u64::from(o.server_closes),
        },
    });
}

/// Whether this request's bytes are checked: a deterministic sample of
/// `fraction` of (session, path, range) keys.
fn sampled(
    fraction: f64,
    session: u64,
    path: &str,
    range: Option<vodlab_workload::script::ByteRange>,
) -> bool {
    if fraction <= 0.0 {
        return false;
    }
    if fraction >= 1.0 {
        return true;
    }
    let h = content::file_key(path)
        ^ session.wrapping_mul(0x9e37_79b9_7f4a_7c15)
        ^ range.map_or(0, |g| g.start).rotate_left(29);
    let h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9) ^ (h >> 31);
    (h % 1_000_000) < (fraction * 1_000_000.0) as u64
}

/// A session whose script cannot be read again (the file was rewritten
/// during the run) fails at its start, its requests unsent; the first such
/// error is said on stderr.
pub(super) fn unreadable(
    ctx: &Ctx,
    shard: usize,
    index: usize,
    e: &crate::load::LoadError,
    tx: &mpsc::UnboundedSender<Report>,
) {
    static SAID: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if !SAID.swap(true, Ordering::Relaxed) {
        eprintln!("vodlab: session {index} of script shard {shard} fails: {e}");
    }
    ctx.live.failed.fetch_add(1, Ordering::Relaxed);
    let t = ctx.secs(Instant::now());
    let _ = tx.send(Report::Session {
        shard: shard as u32,
        index: index as u32,
        sample: SessionSample {
            start_s: t,
            end_s: t,
            failure: Some(ErrorKind::Other),
            skipped: 0,
            viewer: None,
            reconnects: 0,
            server_closes: 0,
        },
    });
}
