//! HTTP/3 exchanges over QUIC: quinn for QUIC (rustls, ALPN `h3`,
//! connection migration off) and hyperium's `h3` over it (`h3-quinn`).
//! 0-RTT is off unless asked for (`--h3-0rtt`, [`connect`]): then a
//! connection that can resume a session ticket carries its first requests
//! before the handshake completes. As with HTTP/2, the
//! logical connections of a group share one QUIC connection, each carrying
//! one request stream at a time; body bytes go to the same `sink` and
//! `arrived` callbacks as HTTP/1.1's and HTTP/2's, and the h3 connection's
//! own future (its control stream, GOAWAY) is one of the session's
//! drivers, polled by the session's task like an HTTP/2 connection's.
//!
//! QUIC's own figures of each connection (packets sent and lost,
//! congestion events, RTT, congestion window: [`figures`]) are taken from
//! quinn's statistics when the session ends (`transport.quic` in the
//! results).
//!
//! The in-process link (the class's rates and delay, `--link-loss`,
//! `--link-jitter`) is a wrapper of the endpoint's UDP socket
//! ([`super::quic_link`]); without one the endpoint is quinn's own
//! ([`endpoint`]).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes};
use h3::client::SendRequest;
use h3::error::{Code, StreamError};
use quinn::crypto::rustls::QuicClientConfig;
use rustls::ClientConfig;

use super::h2::{hand_over, head_fields, request, Driver};
use super::QuicFigures;
use crate::core::exchange::{ErrorKind, Failure, ReadLimits, Response};
use crate::io::http::Outgoing;

/// The ALPN protocol of HTTP/3 (RFC 9114 §3.1).
pub const ALPN: &[u8] = b"h3";

/// One open HTTP/3 connection, shared by the logical connections of its
/// group.
#[derive(Clone)]
pub struct H3Handle {
    send: SendRequest<h3_quinn::OpenStreams, Bytes>,
    /// False once the connection ended (closed, GOAWAY, error).
    alive: Arc<AtomicBool>,
    /// Requests completed on it.
    uses: Arc<AtomicU64>,
    /// The QUIC connection under it (for its statistics).
    quic: quinn::Connection,
    /// Its 0-RTT: whether it was attempted, and accepted.
    early: Arc<Early>,
}

/// A connection's 0-RTT, as quinn reports it.
#[derive(Debug, Default)]
pub struct Early {
    /// The connection sent 0-RTT (a session ticket with early data was
    /// at hand, and 0-RTT was asked for).
    pub attempted: bool,
    /// The server accepted it (known once the handshake completed).
    accepted: AtomicBool,
    /// The handshake completed: `accepted` is final.
    settled: AtomicBool,
}

impl Early {
    /// Whether the server accepted the connection's 0-RTT.
    pub fn accepted(&self) -> bool {
        self.accepted.load(Ordering::Relaxed)
    }

    /// The server refused the connection's 0-RTT (the ticket was not its,
    /// or it no longer takes early data).
    pub fn rejected(&self) -> bool {
        self.attempted && self.settled.load(Ordering::Relaxed) && !self.accepted()
    }

    /// 0-RTT was sent and not (yet) known to be accepted: a request that
    /// fails on such a connection before its response may never have
    /// reached the server.
    fn unconfirmed(&self) -> bool {
        self.attempted && !self.accepted()
    }
}

impl H3Handle {
    /// Whether new streams may still open on it.
    pub fn is_alive(&self) -> bool {
        self.alive.load(Ordering::Relaxed)
    }

    /// The QUIC connection it runs on.
    pub fn quic(&self) -> &quinn::Connection {
        &self.quic
    }

    /// Its 0-RTT.
    pub fn early(&self) -> &Early {
        &self.early
    }
}

/// QUIC's figures of `h`'s connection as quinn counts them now (the
/// client's side).
pub fn figures(h: &H3Handle) -> QuicFigures {
    let s = h.quic.stats();
    QuicFigures {
        zero_rtt_attempted: h.early.attempted,
        zero_rtt_accepted: h.early.attempted && h.early.accepted(),
        packets_sent: s.path.sent_packets,
        packets_lost: s.path.lost_packets,
        lost_bytes: s.path.lost_bytes,
        congestion_events: s.path.congestion_events,
        datagrams_received: s.udp_rx.datagrams,
        bytes_received: s.udp_rx.bytes,
        stream_frames_sent: s.frame_tx.stream,
        rtt: s.path.rtt,
        cwnd: s.path.cwnd,
    }
}

/// A client endpoint (one UDP socket) for connections to `peer`: bound to
/// the unspecified address of `peer`'s family, an ephemeral port.
pub fn endpoint(peer: SocketAddr) -> Result<quinn::Endpoint, Failure> {
    let bind: SocketAddr = if peer.is_ipv4() {
        (std::net::Ipv4Addr::UNSPECIFIED, 0).into()
    } else {
        (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
    };
    quinn::Endpoint::client(bind)
        .map_err(|e| Failure::new(ErrorKind::from_io(&e), format!("udp socket for QUIC: {e}")))
}

/// The QUIC client configuration over `tls` (which offers ALPN `h3`, and
/// early data when the run asks for 0-RTT).
pub fn client_config(tls: Arc<ClientConfig>) -> Result<quinn::ClientConfig, Failure> {
    let crypto = QuicClientConfig::try_from(tls)
        .map_err(|e| Failure::new(ErrorKind::Other, format!("tls for QUIC: {e}")))?;
    Ok(quinn::ClientConfig::new(Arc::new(crypto)))
}

/// Opens a QUIC connection to `addr` (certificate checked against
/// `server_name`) and HTTP/3's SETTINGS: the handle, the connection's
/// [`Driver`] (the caller polls it) and the time until the connection could
/// carry a request.
///
/// Without `zero_rtt` (or without a session ticket that allows early data)
/// the handshake is awaited in full, and that time is the handshake's. With
/// it, when quinn has such a ticket, the connection is used at once: the
/// SETTINGS and the first requests go out as 0-RTT, and the time is ~0.
/// The driver learns at the handshake's end whether the server accepted
/// them ([`Early`]). If not, quinn has dropped what was sent (the h3
/// control stream with it): the driver closes the connection, so that its
/// requests fail at once and retryable, and the session sends them again
/// on a new connection, which does not try 0-RTT again
/// ([`Early::rejected`]).
pub async fn connect(
    ep: &quinn::Endpoint,
    cfg: quinn::ClientConfig,
    addr: SocketAddr,
    server_name: &str,
    zero_rtt: bool,
) -> Result<(H3Handle, Driver, Duration), Failure> {
    let t = Instant::now();
    let connecting = ep
        .connect_with(cfg, addr, server_name)
        .map_err(|e| Failure::new(ErrorKind::Other, format!("quic connect: {e}")))?;
    let (quic, accepted) = if zero_rtt {
        match connecting.into_0rtt() {
            Ok((quic, accepted)) => (quic, Some(accepted)),
            Err(connecting) => (connecting.await.map_err(|e| quic_failure(&e))?, None),
        }
    } else {
        (connecting.await.map_err(|e| quic_failure(&e))?, None)
    };
    let handshake = t.elapsed();
    // the ALPN of a 0-RTT connection is the resumed session's (h3: the
    // ticket came from a connection that negotiated it)
    let alpn = quic
        .handshake_data()
        .and_then(|d| d.downcast::<quinn::crypto::rustls::HandshakeData>().ok())
        .and_then(|d| d.protocol);
    if accepted.is_none() && alpn.as_deref() != Some(ALPN) {
        return Err(Failure::new(
            ErrorKind::BadResponse,
            "the server did not negotiate ALPN `h3`",
        ));
    }
    let (mut conn, send) = h3::client::new(h3_quinn::Connection::new(quic.clone()))
        .await
        .map_err(|e| Failure::new(ErrorKind::BadResponse, format!("h3 handshake: {e}")))?;
    let alive = Arc::new(AtomicBool::new(true));
    let early = Arc::new(Early {
        attempted: accepted.is_some(),
        ..Early::default()
    });
    let (flag, e, quic_) = (alive.clone(), early.clone(), quic.clone());
    let driver: Driver = Box::pin(async move {
        let settle = async {
            if let Some(accepted) = accepted {
                let ok = accepted.await;
                e.accepted.store(ok, Ordering::Relaxed);
                e.settled.store(true, Ordering::Relaxed);
                if !ok {
                    // what was sent is gone, the h3 session with it: no
                    // new stream on it, and the streams open fail now
                    flag.store(false, Ordering::Relaxed);
                    // H3_NO_ERROR (0x100): nothing the server did wrong
                    quic_.close(quinn::VarInt::from_u32(0x100), b"0-RTT rejected");
                }
            }
        };
        let close = async {
            let _ = std::future::poll_fn(|cx| conn.poll_close(cx)).await;
        };
        tokio::join!(settle, close);
        flag.store(false, Ordering::Relaxed);
    });
    Ok((
        H3Handle {
            send,
            alive,
            uses: Arc::new(AtomicU64::new(0)),
            quic,
            early,
        },
        driver,
        handshake,
    ))
}

/// The failure of a QUIC handshake.
fn quic_failure(e: &quinn::ConnectionError) -> Failure {
    use quinn::ConnectionError as C;
    let kind = match e {
        C::TimedOut => ErrorKind::Timeout,
        C::ConnectionClosed(c) if c.error_code == quinn::TransportErrorCode::CONNECTION_REFUSED => {
            ErrorKind::Refused
        }
        C::Reset | C::ConnectionClosed(_) | C::ApplicationClosed(_) => ErrorKind::Reset,
        _ => ErrorKind::Other,
    };
    let text = format!("quic handshake: {e}");
    Failure::new(kind, text)
}

/// Sends `req` as a request stream of `h` and reads its response within
/// `limits`, as [`super::h2::exchange_limited`] does: `sink` sees every
/// body byte with its offset, `arrived(at, n)` every chunk QUIC handed
/// over; a body cut by `stop_after` asks the server to stop sending
/// (STOP_SENDING H3_REQUEST_CANCELLED); `read_kbps` spaces the reads (and
/// QUIC's flow control, credited as bytes are read, paces the server).
/// Time to first byte is the arrival of the response's HEADERS.
pub async fn exchange_limited(
    h: &H3Handle,
    req: &Outgoing<'_>,
    limits: ReadLimits,
    authority: &str,
    sink: &mut (dyn FnMut(u64, &[u8]) + Send),
    arrived: &mut (dyn FnMut(Instant, u64) + Send),
) -> Result<Response, Failure> {
    let reused = h.uses.load(Ordering::Relaxed) > 0;
    // a request on a connection whose 0-RTT was not confirmed may have
    // been dropped with it: safe to send again on a new connection
    let early = h.early.unconfirmed();
    let head = request(req, "https", authority)?;
    let fail = |e: StreamError, what: &str, before_response: bool| {
        let gone = connection_gone(&e);
        if gone {
            h.alive.store(false, Ordering::Relaxed);
        }
        let mut f = h3_failure(&e, what);
        f.retryable = ((reused && gone) || early) && before_response;
        // rejected 0-RTT: the request never reached the server
        f.unsent = h.early.rejected() && before_response;
        f
    };
    let body = req.body.map(|b| Bytes::copy_from_slice(b.as_bytes()));
    let mut send = h.send.clone();
    let sent = Instant::now();
    let mut stream = send
        .send_request(head)
        .await
        .map_err(|e| fail(e, "send", true))?;
    if let Some(b) = body {
        stream
            .send_data(b)
            .await
            .map_err(|e| fail(e, "send", true))?;
    }
    match stream.finish().await {
        // the server answered before our FIN went out and stopped the
        // request side with H3_NO_ERROR (RFC 9114 section 4.1): the
        // response is still there to read
        Err(h3::error::StreamError::RemoteTerminate { code, .. })
            if code == h3::error::Code::H3_NO_ERROR => {}
        r => r.map_err(|e| fail(e, "send", true))?,
    }
    let resp = stream
        .recv_response()
        .await
        .map_err(|e| fail(e, "read", true))?;
    let ttfb = sent.elapsed();
    let head = head_fields(&resp);
    let mut got = 0u64;
    let mut stopped = false;
    loop {
        if limits.done(got) {
            stopped = true;
            break;
        }
        let chunk = match stream.recv_data().await {
            Ok(Some(mut buf)) => buf.copy_to_bytes(buf.remaining()),
            Ok(None) => break,
            Err(e) => {
                let mut f = fail(e, "read", false);
                if f.kind == ErrorKind::Reset {
                    f.kind = ErrorKind::ShortBody;
                }
                return Err(f);
            }
        };
        let (take, at) = hand_over(&limits, sent, Instant::now(), got, &chunk, sink).await;
        got += take;
        arrived(at, take);
    }
    if stopped {
        stream.stop_sending(Code::H3_REQUEST_CANCELLED);
    }
    let r = head.response(req.method, got, stopped, ttfb)?;
    h.uses.fetch_add(1, Ordering::Relaxed);
    Ok(r)
}

/// Whether the error ended the connection (or the server is going away), so
/// no new stream may open on it.
fn connection_gone(e: &StreamError) -> bool {
    matches!(
        e,
        StreamError::ConnectionError { .. } | StreamError::RemoteClosing { .. }
    )
}

/// The failure an `h3` stream error means.
fn h3_failure(e: &StreamError, what: &str) -> Failure {
    let kind = match e {
        StreamError::ConnectionError { .. }
        | StreamError::RemoteClosing { .. }
        | StreamError::RemoteTerminate { .. } => ErrorKind::Reset,
        StreamError::StreamError { .. } | StreamError::HeaderTooBig { .. } => {
            ErrorKind::BadResponse
        }
        _ => ErrorKind::Other,
    };
    Failure::new(kind, format!("{what}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_endpoint_binds_the_peers_family() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let v4 = endpoint("127.0.0.1:443".parse().unwrap()).unwrap();
            assert!(v4.local_addr().unwrap().is_ipv4());
            assert_ne!(v4.local_addr().unwrap().port(), 0);
        });
    }
}
