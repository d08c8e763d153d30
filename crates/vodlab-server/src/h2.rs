//! HTTP/2 with the `h2` crate: ALPN `h2` over TLS and h2c by prior
//! knowledge on the plain port. Each stream's request is turned into the
//! codec's [`Head`] and answered through the same prelude as HTTP/1.1
//! (`prepare`: route, open, plan, bit rate, pacing): ranges, If-Range,
//! HEAD, 404/416, the statistics page, the access log and the counters are
//! shared.
//!
//! Bodies are read from the file into buffers and sent as DATA as the
//! client's flow-control windows allow; the h2 crate cuts them into frames
//! of the client's `SETTINGS_MAX_FRAME_SIZE`. `vanilla` reads on the
//! blocking pool; `asap` runs the same range executor as HTTP/1.1
//! (`asap`: probe, prefetch controller, one prefetch at a time per
//! connection, bytes sent as they are read) with the stream as its sink, and
//! the connection's streams share one session (they take turns at the
//! executor, as one HTTP/1.1 connection's requests do). Every wait for
//! window is bounded by the send timeout (a stalled reader's stream is
//! reset and counted). Paced responses (`--pace`, user mode) register the
//! stream with the server's pacer, whose driver hands the stream its grants
//! ([`crate::pacing`]); kernel-mode pacing is per socket and not applied to
//! h2 streams.
//!
//! Abuse limits: the h2 crate's (`max_pending_accept_reset_streams` and
//! `max_local_error_reset_streams` against rapid reset, the header list and
//! CONTINUATION limits, the small-DATA budget, one pending SETTINGS/PING
//! acknowledgement) and a frame-rate meter of our own ([`crate::flood`]);
//! every one that fires closes the connection with GOAWAY and is counted in
//! [`crate::proto_stats::ProtoCounters`] and logged.

use std::future::Future;
use std::io;
use std::os::unix::io::{AsRawFd, RawFd};
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::stream::{FuturesUnordered, StreamExt};
use h2::server::SendResponse;
use h2::{Reason, SendStream};
use tokio::sync::watch;
use vodlab_http::server::Head;

use crate::access::{log_line, CacheOutcome};
use crate::asap::{FileCtx, RangeIo};
use crate::bitrate::ResponseRate;
use crate::config::{IoMode, PaceMode};
use crate::conn_io::{capacity, h2_io, send_range, Sink};
use crate::flood::{Flood, FloodSignal, Metered};
use crate::plan::to_response;
use crate::plan::{Body, ResponsePlan};
use crate::prepare::{prepare, FrontEnd};
use crate::request::chain_of;
use crate::server::State;
use crate::transport::Transport;
use vodlab_prefetch::SessionState;

mod gather;
pub use crate::config::h2::{defaults, H2Settings};
pub use gather::{Gather, GATHER};

/// Which limit closed a connection: `None` unless the h2 crate sent a
/// GOAWAY; `protocol_error` unless its reason is `ENHANCE_YOUR_CALM`; for
/// that one the debug data when the error carries it, else the last frame
/// the client sent ([`crate::flood::calm_cause`]).
fn classify(e: &h2::Error, last: (u8, bool)) -> Option<&'static str> {
    if !(e.is_go_away() && e.is_library()) {
        return None;
    }
    if e.reason() != Some(Reason::ENHANCE_YOUR_CALM) {
        return Some("protocol_error");
    }
    let s = e.to_string();
    Some(if s.contains("too_many_resets") {
        "rapid_reset"
    } else if s.contains("too_many_internal_resets") {
        "local_error_resets"
    } else if s.contains("too_many_continuations") || s.contains("header_list") {
        "continuation_flood"
    } else if s.contains("too_many_data_frames") {
        "small_data_flood"
    } else {
        crate::flood::calm_cause(last.0, last.1)
    })
}

/// Serves one HTTP/2 connection (the preface not yet read) to its end.
pub(crate) async fn serve(
    io: Transport,
    peer: std::net::IpAddr,
    id: u64,
    st: Arc<State>,
    mut stop: watch::Receiver<bool>,
    accepted: Instant,
) {
    // the prefetch helper watches it for the client leaving; open until
    // the streams (and their prefetches) are dropped, below
    let client = io.tcp().as_raw_fd();
    let cfg = &st.cfg.h2;
    let signal = Arc::new(FloodSignal::default());
    // the h2 crate flushes after each DATA frame: gather its frames into
    // large writes (full TLS records, few syscalls), see `gather`
    let io = Metered::new(Gather::new(io, GATHER), cfg.flood_limits(), signal.clone());
    let hs = cfg.builder().handshake::<_, Bytes>(io);
    let deadline = accepted + st.cfg.header_timeout;
    let mut conn = match tokio::time::timeout_at(deadline.into(), hs).await {
        Ok(Ok(c)) => c,
        Ok(Err(e)) => {
            note_error(&st, peer, id, &e, &signal);
            return;
        }
        Err(_) => {
            st.counters.header_timeouts.fetch_add(1, Ordering::Relaxed);
            return;
        }
    };
    // the streams run in this task, not each in its own: a stream's
    // `send_data` wakes the connection and the connection's frames written
    // wake the stream for more, and as separate tasks on the multi-thread
    // runtime each of those wakes was a futex call and a thread switch
    // (~4,000 per 100 MB, docs/benchmarks.md)
    let mut streams: FuturesUnordered<Pin<Box<dyn Future<Output = ()> + Send>>> =
        FuturesUnordered::new();
    let session = Arc::new(tokio::sync::Mutex::new(SessionState::default()));
    let idle = tokio::time::sleep(st.cfg.idle_timeout);
    tokio::pin!(idle);
    // after GOAWAY: how long the connection may take to finish
    let mut closing: Option<tokio::time::Instant> = None;
    let far = tokio::time::Instant::now() + Duration::from_secs(86_400 * 365);
    // without streams the connection waits like an HTTP/1.1 connection waiting
    // for a head: sheddable at the connection cap (`crate::limits::HeadQueue`)
    let shed = Arc::new(tokio::sync::Notify::new());
    let mut ticket: Option<u64> = None;
    loop {
        let until = closing.unwrap_or(far);
        let sheddable = streams.is_empty() && closing.is_none();
        match (sheddable, ticket) {
            (true, None) => ticket = Some(st.heads.lock().expect("lock").enter(shed.clone())),
            (false, Some(t)) => {
                ticket = None;
                if !st.heads.lock().expect("lock").leave(t) && closing.is_none() {
                    // shed as a stream began: it is answered, then the connection closes
                    st.counters.shed.fetch_add(1, Ordering::Relaxed);
                    conn.graceful_shutdown();
                    closing = Some(tokio::time::Instant::now() + st.cfg.send_timeout);
                }
            }
            _ => {}
        }
        tokio::select! {
            _ = shed.notified(), if ticket.is_some() => {
                ticket = None;
                st.counters.shed.fetch_add(1, Ordering::Relaxed);
                conn.graceful_shutdown();
                closing = Some(tokio::time::Instant::now() + Duration::from_secs(1));
            }
            r = conn.accept() => match r {
                Some(Ok((req, resp))) => {
                    st.counters.proto.h2_streams.fetch_add(1, Ordering::Relaxed);
                    let st2 = st.clone();
                    let session = session.clone();
                    streams.push(Box::pin(async move {
                        stream(&st2, (id, client), &session, req, resp).await
                    }));
                }
                Some(Err(e)) => {
                    note_error(&st, peer, id, &e, &signal);
                    break;
                }
                None => break,
            },
            Some(()) = streams.next(), if !streams.is_empty() => {
                if streams.is_empty() {
                    idle.as_mut().reset(tokio::time::Instant::now() + st.cfg.idle_timeout);
                }
            }
            _ = signal.notify.notified() => {
                let f = signal.seen.lock().expect("lock").unwrap_or(Flood::Settings);
                let p = &st.counters.proto;
                match f {
                    Flood::Settings => &p.settings_flood,
                    Flood::Ping => &p.ping_flood,
                    Flood::WindowUpdate => &p.window_update_flood,
                    Flood::SmallData => &p.small_data_flood,
                    Flood::Reset => &p.rapid_reset,
                    Flood::HeaderBlock => &p.continuation_flood,
                }
                .fetch_add(1, Ordering::Relaxed);
                st.abused(
                    peer,
                    &format_args!("h2 connection {id}: {f}: GOAWAY ENHANCE_YOUR_CALM"),
                );
                conn.abrupt_shutdown(Reason::ENHANCE_YOUR_CALM);
                streams.clear();
                closing = Some(tokio::time::Instant::now() + Duration::from_secs(1));
            }
            _ = &mut idle, if streams.is_empty() && closing.is_none() => {
                st.counters.proto.h2_idle_closed.fetch_add(1, Ordering::Relaxed);
                conn.graceful_shutdown();
                closing = Some(tokio::time::Instant::now() + st.cfg.send_timeout);
            }
            _ = stop.changed(), if closing.is_none() => {
                conn.graceful_shutdown();
                closing = Some(tokio::time::Instant::now() + st.cfg.grace);
            }
            _ = tokio::time::sleep_until(until), if closing.is_some() => break,
        }
    }
    if let Some(t) = ticket {
        st.heads.lock().expect("lock").leave(t);
    }
    // the streams left end here (their futures dropped)
    streams.clear();
    crate::asap::end_session(&st, id, &mut *session.lock().await);
}

fn note_error(st: &State, peer: std::net::IpAddr, id: u64, e: &h2::Error, signal: &FloodSignal) {
    let p = &st.counters.proto;
    let last = *signal.last.lock().expect("lock");
    match classify(e, last) {
        Some(kind) => {
            match kind {
                "rapid_reset" => &p.rapid_reset,
                "local_error_resets" => &p.local_error_resets,
                "continuation_flood" => &p.continuation_flood,
                "small_data_flood" => &p.small_data_flood,
                _ => &p.h2_protocol_errors,
            }
            .fetch_add(1, Ordering::Relaxed);
            let what = format_args!("h2 connection {id}: {kind}: {e}");
            if kind == "protocol_error" {
                st.log_error(&what);
            } else {
                // a flood the h2 crate stopped (ENHANCE_YOUR_CALM)
                st.abused(peer, &what);
            }
        }
        None if e.is_io() => {}
        None => {
            if e.reason().is_some_and(|r| r != Reason::NO_ERROR) && !e.is_remote() {
                p.h2_protocol_errors.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// The request as the codec's head: method, `:path` as the target, the
/// header fields in lower case, `:authority` as `host`.
pub(crate) fn to_head<B>(req: &http::Request<B>) -> Head {
    let mut headers: Vec<(String, String)> = req
        .headers()
        .iter()
        .map(|(k, v)| {
            (
                k.as_str().to_string(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect();
    if let Some(a) = req.uri().authority() {
        if !headers.iter().any(|(k, _)| k == "host") {
            headers.push(("host".into(), a.to_string()));
        }
    }
    Head {
        method: req.method().as_str().to_string(),
        target: req
            .uri()
            .path_and_query()
            .map_or_else(|| "/".to_string(), |p| p.as_str().to_string()),
        http11: true,
        headers,
        len: 0,
    }
}

/// What a stream's body sender needs besides the stream.
struct StreamCtx<'a> {
    st: &'a State,
    conn: u64,
    /// The connection's TCP socket.
    client: RawFd,
    session: &'a tokio::sync::Mutex<SessionState>,
    head: &'a Head,
    /// The response's file, with the request's bit rate.
    file: Option<FileCtx<'a>>,
    /// The rate a paced file body is sent at (user-mode pacing).
    pace: Option<ResponseRate>,
}

/// Answers one stream: the shared prelude ([`crate::prepare`]: route,
/// open, plan, rates), then the response on the stream.
async fn stream(
    st: &State,
    (conn, client): (u64, RawFd),
    session: &tokio::sync::Mutex<SessionState>,
    req: http::Request<h2::RecvStream>,
    mut resp: SendResponse<Bytes>,
) {
    let t0 = Instant::now();
    let head = to_head(&req);
    drop(req);
    let fe = FrontEnd {
        conn,
        keep_alive: true,
        // kernel-mode pacing is per socket: not for a stream
        can_pace: st.cfg.pace_mode == PaceMode::User,
        arrived: t0,
        alt_svc: true,
    };
    let prep = prepare(st, &head, fe);
    let p = &prep.plan;
    let mut sent = 0u64;
    let mut cache = CacheOutcome::None;
    let eos = matches!(p.body, Body::None);
    let sc = StreamCtx {
        st,
        conn,
        client,
        session,
        head: &head,
        file: prep.file_ctx(&head),
        pace: prep.pace,
    };
    let res = match resp.send_response(to_response(p), eos) {
        Ok(mut out) => send_body(&sc, &mut out, p, &mut sent, &mut cache).await,
        Err(e) => Err(h2_io(e)),
    };
    crate::asap::prefetch_next_objects(st, &prep.next);
    st.counters.requests.fetch_add(1, Ordering::Relaxed);
    log_line(st, conn, &head, p, (sent, cache), t0.elapsed(), &prep.cmcd);
    if let Err(e) = res {
        let c = &st.counters;
        if e.kind() == io::ErrorKind::TimedOut {
            c.proto.h2_send_timeouts.fetch_add(1, Ordering::Relaxed);
            c.send_timeouts.fetch_add(1, Ordering::Relaxed);
        } else {
            c.proto.h2_client_resets.fetch_add(1, Ordering::Relaxed);
            c.aborted.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Sends the plan's body on the stream, then END_STREAM.
async fn send_body(
    sc: &StreamCtx<'_>,
    out: &mut SendStream<Bytes>,
    p: &ResponsePlan,
    sent: &mut u64,
    cache: &mut CacheOutcome,
) -> io::Result<()> {
    let limit = sc.st.cfg.send_timeout;
    match &p.body {
        Body::None => Ok(()),
        Body::Bytes(b) => send_bytes(out, Bytes::from(b.clone()), true, limit).await,
        Body::File(r) if sc.pace.is_some() => {
            let (Some(f), Some(rate)) = (&sc.file, &sc.pace) else {
                return Err(io::Error::other("a paced body without a file or rate"));
            };
            Sink::H2(out, sent, sc.client)
                .send_paced(sc.st, f.file, rate, r.offset, r.len)
                .await?;
            send_bytes(out, Bytes::new(), true, limit).await
        }
        Body::File(r) => {
            *cache = send_file_part(sc, out, r.offset, r.len, sent).await?;
            send_bytes(out, Bytes::new(), true, limit).await
        }
        Body::Multipart { parts, closing } => {
            for part in parts {
                send_bytes(out, Bytes::from(part.head.clone()), false, limit).await?;
                let r = part.range;
                *cache = send_file_part(sc, out, r.offset, r.len, sent).await?;
                send_bytes(out, Bytes::from_static(b"\r\n"), false, limit).await?;
            }
            send_bytes(out, Bytes::from(closing.clone()), true, limit).await
        }
    }
}

/// Sends one range of the response's file: through the ASAP executor (the
/// connection's session, taken in turn by its streams) or, in vanilla
/// mode, read on the blocking pool.
async fn send_file_part(
    sc: &StreamCtx<'_>,
    out: &mut SendStream<Bytes>,
    off: u64,
    len: u64,
    sent: &mut u64,
) -> io::Result<CacheOutcome> {
    let Some(info) = &sc.file else {
        return Err(io::Error::other("a file body without a file"));
    };
    if sc.st.cfg.io != IoMode::Asap {
        send_range(sc.st, out, info.file, off, len, false, sent, true).await?;
        return Ok(CacheOutcome::None);
    }
    let mut session = sc.session.lock().await;
    let mut io = RangeIo {
        sink: Sink::H2(out, sent, sc.client),
        st: sc.st,
        session: &mut session,
        conn: sc.conn,
    };
    let (cache, res) = io
        .send_range(info, off, len, chain_of(&sc.head.target))
        .await;
    res.map(|()| cache)
}

async fn send_bytes(
    out: &mut SendStream<Bytes>,
    mut data: Bytes,
    eos: bool,
    limit: Duration,
) -> io::Result<()> {
    if data.is_empty() {
        return out.send_data(data, eos).map_err(h2_io);
    }
    while !data.is_empty() {
        let n = capacity(out, data.len(), limit).await?;
        let part = data.split_to(n);
        out.send_data(part, eos && data.is_empty()).map_err(h2_io)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{self, PlanCtx};

    #[test]
    fn requests_become_heads_and_plans_become_h2_heads() {
        let req = http::Request::builder()
            .method("GET")
            .uri("https://example:8443/v/seg.m4s?x=1")
            .header("range", "bytes=0-9")
            .body(())
            .unwrap();
        let h = to_head(&req);
        assert_eq!(
            (h.method.as_str(), h.target.as_str()),
            ("GET", "/v/seg.m4s?x=1")
        );
        assert_eq!(h.header("range"), Some("bytes=0-9"));
        assert_eq!(h.header("host"), Some("example:8443"));
        let ctx = PlanCtx {
            keep_alive: false,
            date: "Sun, 22 Nov 2026 13:00:00 GMT",
            conn: 1,
        };
        let p = plan::plan_error(&crate::error::ServeError::NotFound, false, &ctx);
        let r = to_response(&p);
        assert_eq!(r.status(), 404);
        assert!(
            r.headers().get("connection").is_none(),
            "no Connection in h2"
        );
        let Body::Bytes(b) = &p.body else {
            panic!("an error text")
        };
        assert_eq!(r.headers()["content-length"], b.len().to_string().as_str());
    }
}
