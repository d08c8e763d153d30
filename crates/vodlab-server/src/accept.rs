//! What an accepted connection speaks, from its first bytes (peeked, not
//! read): a TLS ClientHello (record type 22) → the TLS handshake, then
//! `h2` or HTTP/1.1 by ALPN; the HTTP/2 client preface (`PRI * HTTP/2.0`)
//! → h2c by prior knowledge; anything else → HTTP/1.1. One port serves all
//! four. The wait for the first bytes and the handshake count against the
//! header timeout from the accept, and a connection waiting there can be
//! shed at the connection cap like one waiting for its head.

use std::net::IpAddr;
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::net::TcpStream;
use tokio::sync::{watch, Notify};

use crate::server::State;
use crate::transport::{Tls, Transport};

/// The protocol of a connection, from its first bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sniffed {
    /// A TLS handshake record.
    Tls,
    /// The HTTP/2 client preface.
    H2c,
    /// HTTP/1.x (or garbage, which the HTTP/1 parser answers).
    H1,
}

/// Classifies the first bytes; `None` while they could still be the h2
/// preface's beginning.
pub fn sniff(first: &[u8]) -> Option<Sniffed> {
    const PRI: &[u8] = b"PRI * HTTP/2.0";
    match first.first() {
        None => None,
        Some(0x16) => Some(Sniffed::Tls),
        Some(_) => {
            let n = first.len().min(PRI.len());
            if first[..n] != PRI[..n] {
                Some(Sniffed::H1)
            } else if n == PRI.len() {
                Some(Sniffed::H2c)
            } else {
                None
            }
        }
    }
}

/// Why a connection ended before a protocol ran.
enum Early {
    Closed,
    Timeout,
    Shed,
}

/// Peeks until the protocol is known.
async fn peek_protocol(sock: &TcpStream) -> Result<Sniffed, Early> {
    let mut buf = [0u8; 16];
    loop {
        sock.readable().await.map_err(|_| Early::Closed)?;
        let n = match sock.peek(&mut buf).await {
            Ok(0) | Err(_) => return Err(Early::Closed),
            Ok(n) => n,
        };
        if let Some(s) = sniff(&buf[..n]) {
            return Ok(s);
        }
        // a prefix of the preface: more bytes are on their way
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// Whether a connection just accepted from `peer` is served: not when
/// its address is banned or over its probation rate
/// ([`crate::penalty`]), nor when it is over `--conn-rate-per-address`
/// ([`crate::conn_rate`], which also bans it); such a connection is reset
/// (`SO_LINGER` 0: no FIN handshake, no TIME_WAIT) and counted here. Costs
/// an atomic load while no address is remembered and no rate is set.
pub(crate) fn admit(st: &State, sock: &TcpStream, peer: IpAddr, now: Instant) -> bool {
    let p = &st.counters.proto;
    if p.penalty_addresses.load(Ordering::Relaxed) != 0 {
        let verdict = {
            let mut b = st.penalty.lock().expect("lock");
            let v = b.admit(peer, now);
            p.penalty_addresses.store(b.len() as u64, Ordering::Relaxed);
            v
        };
        match verdict {
            crate::penalty::Admit::Yes => {}
            crate::penalty::Admit::Banned => {
                p.refused_banned.fetch_add(1, Ordering::Relaxed);
                crate::conn_io::reset_on_close(sock);
                return false;
            }
            crate::penalty::Admit::Throttled => {
                // over its probation rate: abuse again, so the ban comes
                // back (doubled) and the SYN filter with it, instead of
                // an accept and a reset per attempt while it keeps on
                p.refused_throttled.fetch_add(1, Ordering::Relaxed);
                st.abused(
                    peer,
                    &format_args!(
                        "{peer}: over its probation rate of {} new connections a second",
                        st.cfg.h2.abuse_probation_per_s
                    ),
                );
                crate::conn_io::reset_on_close(sock);
                return false;
            }
        }
    }
    // a banned address was refused above, so its excess does not escalate
    // its ban again
    if let Some(rate) = &st.conn_rate {
        if !rate.lock().expect("lock").admit(peer, now) {
            p.conn_rate_exceeded.fetch_add(1, Ordering::Relaxed);
            st.abused(
                peer,
                &format_args!(
                    "{peer}: over {} new connections a second",
                    st.cfg.h2.abuse_conn_rate
                ),
            );
            crate::conn_io::reset_on_close(sock);
            return false;
        }
    }
    true
}

/// Serves one accepted connection in whatever it speaks.
pub(crate) async fn serve_conn(
    sock: TcpStream,
    peer: IpAddr,
    id: u64,
    st: Arc<State>,
    stop: watch::Receiver<bool>,
    at: Instant,
) {
    let deadline = tokio::time::Instant::from(at + st.cfg.header_timeout);
    // bytes already here are sniffed at once: such a connection waits on
    // this server, not on its client, and must not enter the shedding
    // queue. Through tokio its first peek waited for the reactor to report
    // the new socket readable, and under a connect flood at the cap the
    // connections accepted meanwhile shed a benign client whose request
    // had long arrived (a CI run: 1 of 40 lost, `hostile_serve`).
    let mut first16 = [0u8; 16];
    let now = match crate::conn_io::peek_now(sock.as_raw_fd(), &mut first16) {
        Ok(n) if n > 0 => sniff(&first16[..n]),
        _ => None,
    };
    let kind = match now {
        Some(k) => Ok(k),
        None => {
            let shed = Arc::new(Notify::new());
            let ticket = st.heads.lock().expect("lock").enter(shed.clone());
            let first = tokio::select! {
                r = tokio::time::timeout_at(deadline, peek_protocol(&sock)) => r.unwrap_or(Err(Early::Timeout)),
                _ = shed.notified() => Err(Early::Shed),
            };
            let kept = st.heads.lock().expect("lock").leave(ticket);
            match first {
                Ok(_) if !kept => Err(Early::Shed),
                r => r,
            }
        }
    };
    let kind = match kind {
        Ok(k) => k,
        Err(e) => {
            let c = &st.counters;
            match e {
                Early::Timeout => c.header_timeouts.fetch_add(1, Ordering::Relaxed),
                Early::Shed => c.shed.fetch_add(1, Ordering::Relaxed),
                Early::Closed => 0,
            };
            return;
        }
    };
    match (kind, &st.tls) {
        (Sniffed::Tls, Some(acceptor)) => {
            let p = &st.counters.proto;
            let hs = tokio::time::timeout_at(deadline, acceptor.accept(sock)).await;
            let io = match hs {
                Ok(Ok(io)) => io,
                Ok(Err(e)) => {
                    p.tls_failures.fetch_add(1, Ordering::Relaxed);
                    st.log_error(&format_args!("TLS handshake: {e}"));
                    return;
                }
                Err(_) => {
                    p.tls_failures.fetch_add(1, Ordering::Relaxed);
                    st.counters.header_timeouts.fetch_add(1, Ordering::Relaxed);
                    return;
                }
            };
            p.tls_handshakes.fetch_add(1, Ordering::Relaxed);
            let h2 = io.get_ref().1.alpn_protocol() == Some(b"h2");
            let t = Transport::Tls(Box::new(Tls {
                io,
                sizer: st.cfg.tls.sizer(Instant::now()),
                small_writes: Some(p.small_record_writes.clone()),
            }));
            if h2 {
                p.alpn_h2.fetch_add(1, Ordering::Relaxed);
                p.h2_connections.fetch_add(1, Ordering::Relaxed);
                // its frames are gathered into full TLS records (`crate::h2::Gather`)
                crate::h2::serve(t, peer, id, st, stop, at).await;
            } else {
                p.alpn_http11.fetch_add(1, Ordering::Relaxed);
                crate::conn::run(t, id, &st, stop, at).await;
            }
        }
        (Sniffed::H2c, _) if st.cfg.h2.h2c => {
            st.counters
                .proto
                .h2c_connections
                .fetch_add(1, Ordering::Relaxed);
            crate::h2::serve(Transport::Plain(sock), peer, id, st, stop, at).await;
        }
        _ => crate::conn::run(Transport::Plain(sock), id, &st, stop, at).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_bytes_name_the_protocol() {
        assert_eq!(sniff(b""), None);
        assert_eq!(sniff(&[0x16, 3, 1]), Some(Sniffed::Tls));
        assert_eq!(sniff(b"GET / HTTP/1.1\r\n"), Some(Sniffed::H1));
        assert_eq!(sniff(b"PRI * HTTP/2.0\r\n"), Some(Sniffed::H2c));
        assert_eq!(sniff(b"PRI *"), None, "could still be the preface");
        assert_eq!(sniff(b"PRI / HTTP/1.1"), Some(Sniffed::H1));
        assert_eq!(sniff(b"P"), None);
        assert_eq!(sniff(b"POST / HTTP/1.1"), Some(Sniffed::H1));
    }
}
