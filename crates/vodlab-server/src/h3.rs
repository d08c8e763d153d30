//! HTTP/3 over QUIC (`vodlab serve --h3`): quinn's endpoint on a UDP port
//! beside the TCP listener, hyperium's `h3` over it (`h3-quinn`), TLS 1.3
//! from the TCP listener's certificate with ALPN `h3` and 0-RTT off.
//!
//! Each request stream's head is turned into the codec's [`Head`] and
//! answered through the same prelude as HTTP/1.1 and HTTP/2
//! ([`crate::prepare`]: route, open, plan, CMCD, CMSD): ranges, If-Range,
//! HEAD, 404/416, the statistics page, the access log and the response
//! counters are shared; the head goes out through HTTP/2's conversion
//! ([`crate::plan::to_response`], which drops the connection-specific
//! fields HTTP/3 forbids as HTTP/2 does). File bodies go out as HTTP/2's
//! do ([`send`]): paced by the server's user-mode pacer (`--pace`; each
//! grant's bytes are offered to the QUIC stream when the pacer releases
//! them, and quinn's own pacer spaces the packets within its congestion
//! window), through the ASAP range executor (probe, prefetch controller,
//! one session per QUIC connection shared by its streams), or read on the
//! blocking pool (`--io vanilla`). The next-object prefetch is the
//! shared prelude's. A client going away is the QUIC connection closing
//! (there is no TCP socket the prefetch helper could watch; a stream the
//! client stops is noticed at the next write). Limits: `--h3-max-concurrent-streams` (QUIC stream
//! credit), `--h3-idle-timeout` (QUIC's idle timeout), `--keepalive`
//! (no request stream open so long: the connection is closed with
//! H3_NO_ERROR, whatever PINGs keep QUIC alive), a cap on open
//! connections (`--h3-max-connections`, beyond which new ones are
//! refused before any state is kept), the header timeout for a stream's
//! head, the send timeout for every write, and quinn's own: the
//! anti-amplification limit before an address is validated (three times
//! the bytes received, RFC 9000 §8.1) and a Retry round trip that
//! validates an address before its connection exists: for every one with
//! `--h3-retry`, else once `--h3-retry-above` handshakes are in progress
//! (a flood of Initials from spoofed addresses then keeps no more state).

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use h3::server::RequestResolver;
use quinn::crypto::rustls::QuicServerConfig;
use tokio::sync::watch;

use vodlab_prefetch::SessionState;

use crate::access::{log_line, CacheOutcome};
use crate::config::PaceMode;
use crate::h2::to_head;
use crate::prepare::{prepare, FrontEnd};
use crate::proto_stats::ProtoCounters;
use crate::state::State;

mod send;

pub use crate::config::h3::{defaults, H3Settings};

/// The ALPN protocol of HTTP/3 (RFC 9114 §3.1).
pub const ALPN: &[u8] = b"h3";

/// Unidirectional streams a client may open: HTTP/3's control stream and
/// QPACK's two, with room for GREASE streams (RFC 9114 §6.2.3).
const MAX_UNI_STREAMS: u32 = 16;

/// Why the QUIC endpoint could not start.
#[derive(Debug, thiserror::Error)]
pub enum H3Error {
    /// The TLS configuration has no cipher suite QUIC's Initial packets
    /// can use (TLS_AES_128_GCM_SHA256).
    #[error("tls for QUIC: {0}")]
    Crypto(#[from] quinn::crypto::rustls::NoInitialCipherSuite),
    /// The idle timeout does not fit QUIC's encoding.
    #[error("h3.idle_timeout: {0}")]
    IdleTimeout(#[from] quinn::VarIntBoundsExceeded),
    /// The UDP socket could not be bound.
    #[error("udp {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// The QUIC server configuration: `tls` (the TCP listener's, with its
/// certificate) with ALPN `h3`, no record-size cap (QUIC frames the
/// handshake itself) and early data only with `s.zero_rtt` (quinn takes
/// all or nothing: `u32::MAX` or 0); the stream credit and idle timeout of
/// `s`; migration off.
pub fn server_config(
    s: &H3Settings,
    tls: &rustls::ServerConfig,
) -> Result<quinn::ServerConfig, H3Error> {
    let mut tls = tls.clone();
    tls.alpn_protocols = vec![ALPN.to_vec()];
    tls.max_fragment_size = None;
    tls.max_early_data_size = if s.zero_rtt { u32::MAX } else { 0 };
    let crypto = QuicServerConfig::try_from(tls)?;
    let mut sc = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    let mut t = quinn::TransportConfig::default();
    t.max_concurrent_bidi_streams(quinn::VarInt::from_u32(s.max_concurrent_streams));
    t.max_concurrent_uni_streams(quinn::VarInt::from_u32(MAX_UNI_STREAMS));
    t.max_idle_timeout(Some(quinn::IdleTimeout::try_from(s.idle_timeout)?));
    sc.transport_config(Arc::new(t));
    sc.migration(false);
    Ok(sc)
}

/// Binds the QUIC endpoint on `addr` (UDP).
pub fn endpoint(
    s: &H3Settings,
    tls: &rustls::ServerConfig,
    addr: SocketAddr,
) -> Result<quinn::Endpoint, H3Error> {
    let sc = server_config(s, tls)?;
    quinn::Endpoint::server(sc, addr).map_err(|source| H3Error::Bind { addr, source })
}

/// The `Alt-Svc` value that advertises HTTP/3 on UDP `port` (RFC 7838).
pub fn alt_svc(port: u16) -> String {
    format!("h3=\":{port}\"; ma=86400")
}

/// Accepts QUIC connections until `stop`, then lets the connections finish
/// their requests (up to the grace period) and closes the endpoint.
pub(crate) async fn accept_loop(
    ep: quinn::Endpoint,
    st: Arc<State>,
    mut stop: watch::Receiver<bool>,
) {
    let mut conns = tokio::task::JoinSet::new();
    let p = &st.counters.proto;
    loop {
        tokio::select! {
            _ = stop.changed() => break,
            incoming = ep.accept() => {
                let Some(incoming) = incoming else { break };
                if p.h3_open.load(Ordering::Relaxed) >= st.cfg.h3.max_connections as u64 {
                    p.h3_refused.fetch_add(1, Ordering::Relaxed);
                    incoming.refuse();
                    continue;
                }
                let loaded = p.h3_handshaking.load(Ordering::Relaxed) >= st.cfg.h3.retry_above as u64;
                if (st.cfg.h3.retry || loaded)
                    && !incoming.remote_address_validated()
                    && incoming.may_retry()
                {
                    p.h3_retries.fetch_add(1, Ordering::Relaxed);
                    let _ = incoming.retry();
                    continue;
                }
                let open = Gauge::up(st.clone(), |p| &p.h3_open);
                let handshaking = Gauge::up(st.clone(), |p| &p.h3_handshaking);
                let stop = stop.clone();
                conns.spawn(async move {
                    connection(incoming, &open.0, handshaking, stop).await;
                });
            }
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
    // no new connections; those open got the stop and send GOAWAY
    ep.set_server_config(None);
    let deadline = tokio::time::sleep(st.cfg.grace);
    tokio::pin!(deadline);
    loop {
        tokio::select! {
            r = conns.join_next() => if r.is_none() { break },
            _ = &mut deadline => { conns.abort_all(); while conns.join_next().await.is_some() {} break; }
        }
    }
    ep.close(quinn::VarInt::from_u32(0x100), b"shutdown");
    let _ = tokio::time::timeout(std::time::Duration::from_secs(1), ep.wait_idle()).await;
}

/// A gauge of the statistics (`h3_open`, `h3_handshaking`,
/// `h3_open_streams`) raised while this lives: lowered on drop, so a task
/// aborted at shutdown, or a stream's task dropped with its connection,
/// still takes itself off.
struct Gauge(Arc<State>, fn(&ProtoCounters) -> &AtomicU64);

impl Gauge {
    /// Raises the gauge `which` of `st`.
    fn up(st: Arc<State>, which: fn(&ProtoCounters) -> &AtomicU64) -> Self {
        which(&st.counters.proto).fetch_add(1, Ordering::Relaxed);
        Self(st, which)
    }
}

impl Drop for Gauge {
    fn drop(&mut self) {
        (self.1)(&self.0.counters.proto).fetch_sub(1, Ordering::Relaxed);
    }
}

/// One QUIC connection: the handshake (within the header timeout; counted
/// in `h3_handshaking` until it ends), then its request streams, each a
/// task of the connection's set (dropped with it), sharing the
/// connection's prefetch session as an HTTP/2 connection's streams do.
async fn connection(
    incoming: quinn::Incoming,
    st: &Arc<State>,
    handshaking: Gauge,
    mut stop: watch::Receiver<bool>,
) {
    let p = &st.counters.proto;
    let handshake = tokio::time::timeout(st.cfg.header_timeout, incoming).await;
    drop(handshaking);
    let quic = match handshake {
        Ok(Ok(c)) => c,
        Ok(Err(_)) => {
            p.h3_handshake_failures.fetch_add(1, Ordering::Relaxed);
            return;
        }
        Err(_) => {
            p.h3_handshake_failures.fetch_add(1, Ordering::Relaxed);
            st.counters.header_timeouts.fetch_add(1, Ordering::Relaxed);
            return;
        }
    };
    let id = st.counters.connections.fetch_add(1, Ordering::Relaxed) + 1;
    p.h3_connections.fetch_add(1, Ordering::Relaxed);
    st.counters.open.fetch_add(1, Ordering::Relaxed);
    let session = Arc::new(tokio::sync::Mutex::new(SessionState::default()));
    let built = h3::server::builder()
        .max_field_section_size(u64::from(st.cfg.h2.max_header_list_size))
        .build::<_, Bytes>(h3_quinn::Connection::new(quic.clone()))
        .await;
    if let Ok(mut conn) = built {
        let mut streams = tokio::task::JoinSet::new();
        let mut closing = false;
        // no request stream open for the idle timeout: closed, as an idle
        // HTTP/1.1 or HTTP/2 connection is (QUIC's own idle timeout counts
        // packets, and a client's PINGs would hold its slot for ever)
        let idle = tokio::time::sleep(st.cfg.idle_timeout);
        tokio::pin!(idle);
        loop {
            tokio::select! {
                _ = stop.changed(), if !closing => {
                    closing = true;
                    // GOAWAY: the streams accepted finish, no new ones
                    let _ = conn.shutdown(0).await;
                }
                r = conn.accept() => match r {
                    Ok(Some(resolver)) => {
                        p.h3_streams.fetch_add(1, Ordering::Relaxed);
                        let open = Gauge::up(st.clone(), |p| &p.h3_open_streams);
                        let session = session.clone();
                        let quic = quic.clone();
                        streams.spawn(async move {
                            request(&open.0, (id, &quic), &session, resolver).await
                        });
                    }
                    Ok(None) | Err(_) => break,
                },
                Some(_) = streams.join_next(), if !streams.is_empty() => {
                    if streams.is_empty() {
                        idle.as_mut().reset(tokio::time::Instant::now() + st.cfg.idle_timeout);
                    }
                }
                _ = &mut idle, if streams.is_empty() && !closing => {
                    p.h3_idle_closed.fetch_add(1, Ordering::Relaxed);
                    break;
                }
            }
        }
        // the streams still sending end with the connection
        while streams.join_next().await.is_some() {}
    }
    quic.close(quinn::VarInt::from_u32(0x100), b"");
    // QUIC's figures of the server's side, final but for the close itself
    let q = quic.stats();
    for (c, v) in [
        (&p.h3_packets_sent, q.path.sent_packets),
        (&p.h3_packets_lost, q.path.lost_packets),
        (&p.h3_lost_bytes, q.path.lost_bytes),
        (&p.h3_congestion_events, q.path.congestion_events),
        (&p.h3_datagrams_sent, q.udp_tx.datagrams),
        (&p.h3_udp_bytes_sent, q.udp_tx.bytes),
    ] {
        c.fetch_add(v, Ordering::Relaxed);
    }
    crate::asap::end_session(st, id, &mut *session.lock().await);
    st.counters.open.fetch_sub(1, Ordering::Relaxed);
}

/// Answers one request stream: its head (within the header timeout), the
/// shared prelude ([`crate::prepare`]: route, open, plan, bit rate,
/// pacing), then the response ([`send::respond`]).
async fn request(
    st: &State,
    (conn, quic): (u64, &quinn::Connection),
    session: &tokio::sync::Mutex<SessionState>,
    resolver: RequestResolver<h3_quinn::Connection, Bytes>,
) {
    let (req, mut stream) =
        match tokio::time::timeout(st.cfg.header_timeout, resolver.resolve_request()).await {
            Ok(Ok(r)) => r,
            Ok(Err(_)) => {
                st.counters
                    .proto
                    .h3_stream_errors
                    .fetch_add(1, Ordering::Relaxed);
                return;
            }
            Err(_) => {
                st.counters.header_timeouts.fetch_add(1, Ordering::Relaxed);
                return;
            }
        };
    let t0 = Instant::now();
    let head = to_head(&req);
    drop(req);
    let fe = FrontEnd {
        conn,
        keep_alive: true,
        // kernel-mode pacing is per TCP socket: not for a QUIC stream
        can_pace: st.cfg.pace_mode == PaceMode::User,
        arrived: t0,
        alt_svc: false,
    };
    let prep = prepare(st, &head, fe);
    let p = &prep.plan;
    let mut sent = 0u64;
    let mut cache = CacheOutcome::None;
    let sc = send::StreamCtx {
        st,
        conn,
        quic,
        session,
        head: &head,
        file: prep.file_ctx(&head),
        pace: prep.pace,
    };
    let res = send::respond(&sc, &mut stream, p, &mut sent, &mut cache).await;
    crate::asap::prefetch_next_objects(st, &prep.next);
    let c = &st.counters;
    c.requests.fetch_add(1, Ordering::Relaxed);
    c.proto.h3_requests.fetch_add(1, Ordering::Relaxed);
    log_line(st, conn, &head, p, (sent, cache), t0.elapsed(), &prep.cmcd);
    // the request side is not read further: a client still sending is
    // asked to stop with H3_NO_ERROR (RFC 9114 §4.1; dropped unread, quinn
    // would stop it with code 0, not an HTTP/3 code, and an h3 client
    // whose FIN was not out yet takes that for a failure). Nothing is sent
    // when the client's request side has ended, as it usually has.
    let Err(e) = res else {
        stream.stop_sending(h3::error::Code::H3_NO_ERROR);
        return;
    };
    c.proto.h3_aborted.fetch_add(1, Ordering::Relaxed);
    if e.kind() == io::ErrorKind::TimedOut {
        c.send_timeouts.fetch_add(1, Ordering::Relaxed);
        stream.stop_stream(h3::error::Code::H3_REQUEST_CANCELLED);
        stream.stop_sending(h3::error::Code::H3_REQUEST_CANCELLED);
    } else {
        c.aborted.fetch_add(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_quic_config_is_the_tcp_certificate_with_alpn_h3() {
        let tls = crate::tls::TlsSettings {
            self_signed: true,
            record_size: Some(4096),
            ..Default::default()
        };
        let tcp = crate::tls::server_config(&tls).unwrap();
        assert!(server_config(&H3Settings::default(), &tcp).is_ok());
        // the TCP config is not changed by the copy
        assert_eq!(tcp.alpn_protocols, crate::tls::alpn(&tls));
        assert_eq!(alt_svc(8443), "h3=\":8443\"; ma=86400");
    }
}
