//! The transports a session's connections run over: HTTP/1.1 on TCP
//! (`h1`), HTTP/2 with prior knowledge on TCP (`h2c`), HTTP/1.1 over TLS
//! (`https`), HTTP/2 over TLS chosen by ALPN (`h2`) and HTTP/3 over QUIC
//! (`h3`, [`h3`]).
//!
//! The session driver sees logical connections only; this module maps them
//! onto real ones. With HTTP/1.1 each logical connection is a TCP (or TLS)
//! connection; with HTTP/2 the logical connections of a group
//! ([`H2Settings::streams_per_connection`], default: all of a session's)
//! share one connection, each carrying one stream at a time. Every
//! protocol reads through the same link emulation ([`Shaped`], or
//! [`crate::io::http::Connection`]'s own buckets for plain h1), so the same
//! seeded schedule meets the same link under every TCP protocol. HTTP/3
//! meets it datagram by datagram ([`quic_link`]: the class's rates and
//! delay, with `--link-loss` and `--link-jitter`), which TCP's shaping of
//! reads and writes cannot do (it drops nothing).

pub mod frames;
pub mod h2;
pub mod h3;
pub mod quic_link;
pub mod shaped;
pub mod tls;

use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::pki_types::ServerName;
use rustls::ClientConfig;
use serde::{Deserialize, Serialize};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

use crate::core::exchange::{ErrorKind, Failure, ReadLimits, Response};
use crate::core::link::datagrams::{default_queue_bytes, session_seed, DirectionSpec};
use crate::core::link::LinkSpec;
pub use crate::io::http::tcp_connect;
use crate::io::http::{Connection, Outgoing};
pub use frames::FrameReads;
pub use h2::{H2Handle, H2Settings};
pub use h3::H3Handle;
pub use quic_link::LinkCounts;
pub use shaped::Shaped;
pub use tls::TlsOptions;

/// The protocol of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Protocol {
    /// HTTP/1.1 over TCP.
    #[default]
    H1,
    /// HTTP/2 over TCP with prior knowledge (RFC 9113 §3.3).
    H2c,
    /// HTTP/1.1 over TLS (ALPN `http/1.1`).
    Https,
    /// HTTP/2 over TLS (ALPN `h2`).
    H2,
    /// HTTP/3 over QUIC (ALPN `h3`).
    H3,
}

impl Protocol {
    /// Every TCP protocol, in the BBC's order (the experiments and
    /// `compare` run these; HTTP/3 is [`Protocol::H3`]).
    pub const ALL: [Protocol; 4] = [Protocol::H1, Protocol::H2c, Protocol::Https, Protocol::H2];

    /// Every protocol `--protocol` names.
    pub const NAMED: [Protocol; 5] = [
        Protocol::H1,
        Protocol::H2c,
        Protocol::Https,
        Protocol::H2,
        Protocol::H3,
    ];

    /// Its name on the command line and in results.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::H1 => "h1",
            Protocol::H2c => "h2c",
            Protocol::Https => "https",
            Protocol::H2 => "h2",
            Protocol::H3 => "h3",
        }
    }

    /// Runs over TLS (HTTP/3: TLS 1.3 inside QUIC).
    pub fn is_tls(self) -> bool {
        matches!(self, Protocol::Https | Protocol::H2 | Protocol::H3)
    }

    /// Speaks HTTP/3 (QUIC).
    pub fn is_h3(self) -> bool {
        self == Protocol::H3
    }

    /// Carries a session's logical connections as streams of shared
    /// connections (HTTP/2 and HTTP/3).
    pub fn multiplexed(self) -> bool {
        self.is_h2() || self.is_h3()
    }

    /// Speaks HTTP/2.
    pub fn is_h2(self) -> bool {
        matches!(self, Protocol::H2c | Protocol::H2)
    }

    /// The URL scheme of its requests.
    pub fn scheme(self) -> &'static str {
        if self.is_tls() {
            "https"
        } else {
            "http"
        }
    }

    /// The ALPN protocol offered (TLS only).
    fn alpn(self) -> &'static [u8] {
        match self {
            Protocol::H2c | Protocol::H2 => b"h2",
            Protocol::H3 => h3::ALPN,
            Protocol::H1 | Protocol::Https => b"http/1.1",
        }
    }
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Protocol {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Protocol::NAMED
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| format!("unknown protocol `{s}` (expected h1, h2c, https, h2 or h3)"))
    }
}

/// Why a run's transport could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    /// The `--ca` file could not be used.
    #[error("--ca {}: {detail}", path.display())]
    Ca {
        /// The file.
        path: PathBuf,
        /// What was wrong.
        detail: String,
    },
    /// Another TLS setting was refused.
    #[error("tls: {0}")]
    Tls(String),
    /// An HTTP/2 setting is out of bounds.
    #[error("{0}")]
    H2(String),
    /// A setting of the in-process QUIC link is out of bounds, or given
    /// to a protocol it cannot apply to.
    #[error("{0}")]
    Link(String),
}

/// Loss and jitter of the in-process QUIC link (`--link-loss`,
/// `--link-jitter`): both directions of every h3 session's link, beside
/// its class's rates and delay.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LinkImpairment {
    /// Probability of losing a datagram, parts per million (20,000 = 2 %).
    pub loss_ppm: u32,
    /// Largest extra one-way delay per datagram (uniform in `[0, jitter]`).
    pub jitter: Duration,
}

impl LinkImpairment {
    /// Most loss accepted: 50 % (beyond it a QUIC handshake rarely ends).
    pub const MAX_LOSS_PPM: u32 = 500_000;
    /// Most jitter accepted.
    pub const MAX_JITTER: Duration = Duration::from_secs(10);

    /// True when it adds nothing.
    pub fn is_none(&self) -> bool {
        self.loss_ppm == 0 && self.jitter.is_zero()
    }

    /// The loss probability.
    pub fn loss(&self) -> f64 {
        f64::from(self.loss_ppm) / 1e6
    }
}

/// Transport settings of a run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TransportConfig {
    /// Protocol.
    pub protocol: Protocol,
    /// Certificate checks (TLS protocols only).
    pub tls: TlsOptions,
    /// HTTP/2 settings (h2c and h2 only).
    pub h2: H2Settings,
    /// Local addresses connections are opened from, in turn
    /// (`--source-address`); empty: the kernel's choice.
    pub source: Vec<std::net::IpAddr>,
    /// Loss and jitter of the in-process QUIC link (h3 only).
    pub link: LinkImpairment,
    /// Send 0-RTT on QUIC connections that can resume a session ticket
    /// with early data (`--h3-0rtt`, h3 only).
    pub h3_0rtt: bool,
}

impl TransportConfig {
    /// Checks the settings, naming the one at fault.
    pub fn validate(&self) -> Result<(), TransportError> {
        self.h2.validate().map_err(TransportError::H2)?;
        let l = &self.link;
        if l.loss_ppm > LinkImpairment::MAX_LOSS_PPM {
            return Err(TransportError::Link(format!(
                "--link-loss must be from 0 to 50 (%), got {}",
                l.loss() * 100.0
            )));
        }
        if l.jitter > LinkImpairment::MAX_JITTER {
            return Err(TransportError::Link(format!(
                "--link-jitter must be at most 10 s, got {:?}",
                l.jitter
            )));
        }
        if !l.is_none() && !self.protocol.is_h3() {
            return Err(TransportError::Link(format!(
                "--link-loss and --link-jitter apply to QUIC's datagrams (--protocol h3), not to \
                 {}: the in-process TCP shaping paces reads and writes and cannot drop a packet; \
                 for loss under TCP use the network lab's --loss-down/--loss-up (docs/run.md, \
                 \"Loss: h3 against h2\")",
                self.protocol
            )));
        }
        if self.h3_0rtt && !self.protocol.is_h3() {
            return Err(TransportError::Link(format!(
                "--h3-0rtt is QUIC's 0-RTT (--protocol h3), not {}'s",
                self.protocol
            )));
        }
        if self.tls.insecure && self.tls.ca.is_some() {
            return Err(TransportError::Tls(
                "--ca and --insecure exclude each other".into(),
            ));
        }
        Ok(())
    }
}

/// What a run's connections share: the target, the protocol and the TLS
/// configuration (built once; each viewer copies it with its own tickets).
pub struct Connector {
    addr: SocketAddr,
    host: String,
    cfg: TransportConfig,
    tls: Option<(ClientConfig, ServerName<'static>)>,
    /// Connections opened so far: the next source address's turn.
    next_source: std::sync::atomic::AtomicUsize,
}

impl Connector {
    /// Sets up the transport of a run against `addr` (`host`: the Host
    /// header and TLS server name).
    pub fn new(
        addr: SocketAddr,
        host: &str,
        cfg: &TransportConfig,
    ) -> Result<Self, TransportError> {
        cfg.validate()?;
        let tls = if cfg.protocol.is_tls() {
            let mut c = tls::client_config(&cfg.tls, &[cfg.protocol.alpn()])?;
            c.enable_early_data = cfg.h3_0rtt;
            Some((c, tls::server_name(host)?))
        } else {
            None
        };
        Ok(Self {
            addr,
            host: host.to_string(),
            cfg: cfg.clone(),
            tls,
            next_source: std::sync::atomic::AtomicUsize::new(0),
        })
    }

    /// The source address of the next connection (round robin over
    /// [`TransportConfig::source`]).
    fn source(&self) -> Option<std::net::IpAddr> {
        let n = self.cfg.source.len();
        (n > 0).then(|| self.cfg.source[self.next_source.fetch_add(1, Ordering::Relaxed) % n])
    }

    /// The protocol.
    pub fn protocol(&self) -> Protocol {
        self.cfg.protocol
    }

    /// The transport of one session (viewer).
    pub fn session(&self, connections: usize) -> SessionTransport<'_> {
        let groups = if self.cfg.protocol.multiplexed() {
            connections
                .max(1)
                .div_ceil(match self.cfg.h2.streams_per_connection {
                    0 => connections.max(1),
                    n => n,
                })
        } else {
            0
        };
        SessionTransport {
            c: self,
            tls: self.tls.as_ref().map(|(c, _)| tls::per_viewer(c)),
            groups: (0..groups).map(|_| tokio::sync::Mutex::new(None)).collect(),
            quic: std::sync::Mutex::new(None),
            quic_conns: std::sync::Mutex::new(Vec::new()),
            quic_link: std::sync::Mutex::new(None),
            link_seed: (0, 0, 0),
            drivers: std::sync::Mutex::new(Vec::new()),
            yielded: Arc::new(AtomicBool::new(false)),
        }
    }
}

/// A TLS handshake failure's text, with a hint for the mistake test set-ups
/// make most: a self-signed certificate made as a CA (`openssl req -x509`
/// marks it `CA:TRUE`), which rustls, like browsers, refuses as a server's.
fn handshake_detail(e: &std::io::Error) -> String {
    let text = format!("tls handshake: {e}");
    if text.contains("CaUsedAsEndEntity") {
        format!(
            "{text} (the server's certificate is a CA certificate, basicConstraints CA:TRUE; \
             make it with `-addext basicConstraints=critical,CA:FALSE`, or use --insecure)"
        )
    } else {
        text
    }
}

/// One QUIC connection's figures as quinn counted them (the client's side:
/// packets it sent and lost, datagrams it received).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QuicFigures {
    /// QUIC packets the client sent (ACKs and requests; the responses
    /// are the server's packets).
    pub packets_sent: u64,
    /// Of those, declared lost by the client's loss detection.
    pub packets_lost: u64,
    /// Bytes of the packets declared lost.
    pub lost_bytes: u64,
    /// Congestion events (a loss or ECN mark that reduced the window).
    pub congestion_events: u64,
    /// UDP datagrams received.
    pub datagrams_received: u64,
    /// Bytes of those datagrams (QUIC headers, frames and the responses'
    /// bytes).
    pub bytes_received: u64,
    /// STREAM frames sent (each request stream's HEADERS and FIN take at
    /// least one).
    pub stream_frames_sent: u64,
    /// Smoothed round-trip time at the end.
    pub rtt: Duration,
    /// The client's congestion window at the end, bytes.
    pub cwnd: u64,
    /// The connection sent 0-RTT (`--h3-0rtt` with a session ticket that
    /// allows early data).
    pub zero_rtt_attempted: bool,
    /// The server accepted that 0-RTT.
    pub zero_rtt_accepted: bool,
}

impl QuicFigures {
    /// The summed counts, in `crate::out::quic::QuicMetrics::sums`'s order.
    pub(crate) fn counts(&self) -> [u64; 9] {
        [
            self.packets_sent,
            self.packets_lost,
            self.lost_bytes,
            self.congestion_events,
            self.datagrams_received,
            self.bytes_received,
            self.stream_frames_sent,
            u64::from(self.zero_rtt_attempted),
            u64::from(self.zero_rtt_accepted),
        ]
    }
}

/// What opening a connection cost, for the results.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Opened {
    /// A new TCP connection was opened (false: a stream of an open HTTP/2
    /// connection).
    pub new_connection: bool,
    /// The TLS handshake's duration, when there was one.
    pub tls_handshake: Option<Duration>,
    /// The TLS session was resumed from a ticket.
    pub resumed: bool,
}

/// One session's connections: its TLS ticket store and its HTTP/2
/// connections (one per group of logical connections).
pub struct SessionTransport<'a> {
    c: &'a Connector,
    tls: Option<Arc<ClientConfig>>,
    groups: Vec<tokio::sync::Mutex<Option<Multiplexed>>>,
    /// The session's QUIC endpoint (one UDP socket), opened at its first
    /// HTTP/3 connection, with the QUIC client configuration.
    quic: std::sync::Mutex<Option<(quinn::Endpoint, quinn::ClientConfig)>>,
    /// The QUIC connections the session opened, for their figures at its
    /// end ([`Self::quic_figures`]).
    quic_conns: std::sync::Mutex<Vec<h3::H3Handle>>,
    /// The in-process link of the session's QUIC endpoint, when it has one.
    quic_link: std::sync::Mutex<Option<Arc<quic_link::LinkSocket>>>,
    /// The session whose link this is: the run's seed, its shard and index
    /// ([`Self::for_session`]), the seeds of its link's draws.
    link_seed: (u64, u64, u64),
    /// The HTTP/2 connections' frame drivers, polled by the session's task.
    drivers: std::sync::Mutex<Vec<h2::Driver>>,
    /// Set when an HTTP/2 connection's read turn ended ([`Shaped::yielding_to`]).
    yielded: Arc<AtomicBool>,
}

/// A logical connection, ready for its next exchange.
pub enum Conn {
    /// HTTP/1.1 over TCP (the link's buckets inside).
    H1(Connection<TcpStream>),
    /// HTTP/1.1 over TLS over a shaped TCP stream.
    Https(Box<Connection<TlsStream<Shaped<TcpStream>>>>),
    /// A stream slot of an HTTP/2 connection.
    H2(H2Handle),
    /// A stream slot of an HTTP/3 connection.
    H3(H3Handle),
}

/// An open connection that carries a group's logical connections.
#[derive(Clone)]
enum Multiplexed {
    H2(H2Handle),
    H3(H3Handle),
}

impl Multiplexed {
    fn is_alive(&self) -> bool {
        match self {
            Multiplexed::H2(h) => h.is_alive(),
            Multiplexed::H3(h) => h.is_alive(),
        }
    }

    fn conn(self) -> Conn {
        match self {
            Multiplexed::H2(h) => Conn::H2(h),
            Multiplexed::H3(h) => Conn::H3(h),
        }
    }
}

impl SessionTransport<'_> {
    /// A TLS connection over a [`Shaped`] TCP stream (whose read turns end
    /// on the session's flag when `yielding`: HTTP/2, polled by
    /// [`Self::poll_drivers_yielding`]).
    async fn tls_connect(
        &self,
        link: &LinkSpec,
        yielding: bool,
    ) -> Result<(TlsStream<Shaped<TcpStream>>, Opened), Failure> {
        let (Some(cfg), Some((_, name))) = (&self.tls, &self.c.tls) else {
            return Err(Failure::new(ErrorKind::Other, "TLS is not configured"));
        };
        let tcp = tcp_connect(self.c.addr, self.c.source(), link).await?;
        let mut shaped = Shaped::new(tcp, link);
        if yielding {
            shaped = shaped.yielding_to(self.yielded.clone());
        }
        let t = Instant::now();
        let s = TlsConnector::from(cfg.clone())
            .connect(name.clone(), shaped)
            .await
            .map_err(|e| Failure::new(ErrorKind::from_io(&e), handshake_detail(&e)))?;
        let opened = Opened {
            new_connection: true,
            tls_handshake: Some(t.elapsed()),
            resumed: s.get_ref().1.handshake_kind() == Some(rustls::HandshakeKind::Resumed),
        };
        let want = self.c.cfg.protocol.alpn();
        if s.get_ref().1.alpn_protocol() != Some(want) {
            return Err(Failure::new(
                ErrorKind::BadResponse,
                format!(
                    "the server did not negotiate ALPN `{}`",
                    String::from_utf8_lossy(want)
                ),
            ));
        }
        Ok((s, opened))
    }

    /// Opens logical connection `conn` of the session (with HTTP/2: a slot
    /// on its group's connection, opening that when it is not open).
    pub async fn connect(&self, conn: usize, link: &LinkSpec) -> Result<(Conn, Opened), Failure> {
        let host = &self.c.host;
        match self.c.cfg.protocol {
            Protocol::H1 => {
                let tcp = tcp_connect(self.c.addr, self.c.source(), link).await?;
                let opened = Opened {
                    new_connection: true,
                    ..Opened::default()
                };
                Ok((Conn::H1(Connection::new(tcp, host, link)), opened))
            }
            Protocol::Https => {
                let (s, opened) = self.tls_connect(link, false).await?;
                // the buckets are under TLS, in `Shaped`
                let c = Connection::new(s, host, &LinkSpec::default());
                Ok((Conn::Https(Box::new(c)), opened))
            }
            Protocol::H2c | Protocol::H2 => {
                let g = self.c.cfg.h2.group_of(conn).min(self.groups.len() - 1);
                // a group's first connect opens it; the others wait and share it
                let mut slot = self.groups[g].lock().await;
                if let Some(h) = slot.as_ref().filter(|h| h.is_alive()) {
                    return Ok((h.clone().conn(), Opened::default()));
                }
                let ((h, driver), opened) = if self.c.cfg.protocol == Protocol::H2 {
                    let (s, opened) = self.tls_connect(link, true).await?;
                    (
                        h2::handshake(FrameReads::new(s), &self.c.cfg.h2).await?,
                        opened,
                    )
                } else {
                    let tcp = tcp_connect(self.c.addr, self.c.source(), link).await?;
                    let opened = Opened {
                        new_connection: true,
                        ..Opened::default()
                    };
                    (
                        h2::handshake(
                            FrameReads::new(tokio::io::BufReader::with_capacity(
                                frames::READ_BUFFER,
                                Shaped::new(tcp, link).yielding_to(self.yielded.clone()),
                            )),
                            &self.c.cfg.h2,
                        )
                        .await?,
                        opened,
                    )
                };
                self.drivers
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(driver);
                *slot = Some(Multiplexed::H2(h.clone()));
                Ok((Conn::H2(h), opened))
            }
            Protocol::H3 => {
                let g = self.c.cfg.h2.group_of(conn).min(self.groups.len() - 1);
                let mut slot = self.groups[g].lock().await;
                if let Some(h) = slot.as_ref().filter(|h| h.is_alive()) {
                    return Ok((h.clone().conn(), Opened::default()));
                }
                let (ep, cfg) = self.quic_endpoint(link)?;
                let Some((_, name)) = &self.c.tls else {
                    return Err(Failure::new(ErrorKind::Other, "TLS is not configured"));
                };
                // 0-RTT unless the server refused it on an earlier
                // connection of this viewer (its tickets are not the server's)
                let zero_rtt = self.c.cfg.h3_0rtt
                    && !self
                        .quic_conns
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .iter()
                        .any(|h| h.early().rejected());
                let (h, driver, took) =
                    h3::connect(&ep, cfg, self.c.addr, &name.to_str(), zero_rtt).await?;
                self.quic_conns
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(h.clone());
                self.drivers
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(driver);
                *slot = Some(Multiplexed::H3(h.clone()));
                let opened = Opened {
                    new_connection: true,
                    tls_handshake: Some(took),
                    resumed: false,
                };
                Ok((Conn::H3(h), opened))
            }
        }
    }

    /// QUIC's figures of every QUIC connection the session opened, as quinn
    /// counts them now (empty for the TCP protocols).
    pub fn quic_figures(&self) -> Vec<QuicFigures> {
        let conns = self.quic_conns.lock().unwrap_or_else(|e| e.into_inner());
        conns.iter().map(h3::figures).collect()
    }

    /// The counts of the session's in-process QUIC link now (`None`
    /// without one).
    pub fn link_counts(&self) -> Option<quic_link::LinkCounts> {
        let l = self.quic_link.lock().unwrap_or_else(|e| e.into_inner());
        l.as_ref().map(|l| l.counts())
    }

    /// The transport of session `index` of `shard` in a run of `run_seed`:
    /// its in-process QUIC link draws its loss and jitter from seeds of
    /// these ([`crate::core::link::datagrams::session_seed`]).
    pub fn for_session(mut self, run_seed: u64, shard: usize, index: usize) -> Self {
        self.link_seed = (run_seed, shard as u64, index as u64);
        self
    }

    /// The two directions of the session's QUIC link under `link` (`None`
    /// when it has nothing to emulate: quinn's own socket is used).
    fn link_directions(&self, link: &LinkSpec) -> Option<(DirectionSpec, DirectionSpec)> {
        let imp = &self.c.cfg.link;
        if link.is_unlimited() && imp.is_none() {
            return None;
        }
        let (run, shard, index) = self.link_seed;
        let dir = |rate_bps: f64, d: u64| DirectionSpec {
            rate_bps,
            delay: link.delay,
            jitter: imp.jitter,
            loss: imp.loss(),
            queue_bytes: default_queue_bytes(rate_bps),
            seed: session_seed(run, shard, index, d),
        };
        Some((dir(link.up_bps, 0), dir(link.down_bps, 1)))
    }

    /// The session's QUIC endpoint and client configuration, made at the
    /// first call (through the in-process link when `link` or
    /// `--link-loss`/`--link-jitter` asks for one).
    fn quic_endpoint(
        &self,
        link: &LinkSpec,
    ) -> Result<(quinn::Endpoint, quinn::ClientConfig), Failure> {
        let mut q = self.quic.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(q) = q.as_ref() {
            return Ok(q.clone());
        }
        let Some(tls) = &self.tls else {
            return Err(Failure::new(ErrorKind::Other, "TLS is not configured"));
        };
        let ep = match self.link_directions(link) {
            None => h3::endpoint(self.c.addr)?,
            Some((up, down)) => {
                let (ep, sock) = quic_link::endpoint(self.c.addr, up, down).map_err(|e| {
                    Failure::new(ErrorKind::from_io(&e), format!("udp socket for QUIC: {e}"))
                })?;
                *self.quic_link.lock().unwrap_or_else(|e| e.into_inner()) = Some(sock);
                ep
            }
        };
        let made = (ep, h3::client_config(tls.clone())?);
        *q = Some(made.clone());
        Ok(made)
    }

    /// Polls the session's HTTP/2 connections (their frames move only while
    /// this is polled; the session's task calls it on every wake-up), and
    /// drops those that ended. Always `Pending`; when a connection ended a
    /// read turn with bytes perhaps still waiting, the task is woken to
    /// read on (see [`Self::poll_drivers_yielding`] for the cheaper way).
    pub fn poll_drivers(&self, cx: &mut std::task::Context<'_>) -> std::task::Poll<()> {
        if self.poll_drivers_yielding(cx) {
            cx.waker().wake_by_ref();
        }
        std::task::Poll::Pending
    }

    /// [`Self::poll_drivers`] without the wake: true when a connection
    /// ended a read turn ([`shaped::READ_TURN`] bytes) rather than finding
    /// the socket empty, so its socket has no waker registered and the
    /// caller must poll again soon — after letting the streams consume what
    /// was read (the turn bounds the frames held at a time) — or wake its
    /// task. A session's task does so in a loop within one wake-up.
    pub fn poll_drivers_yielding(&self, cx: &mut std::task::Context<'_>) -> bool {
        let mut d = self.drivers.lock().unwrap_or_else(|e| e.into_inner());
        if d.is_empty() {
            return false;
        }
        self.yielded.store(false, Ordering::Relaxed);
        d.retain_mut(|f| f.as_mut().poll(cx).is_pending());
        self.yielded.swap(false, Ordering::Relaxed)
    }

    /// Sends a request on `c` and reads its answer (see
    /// [`Connection::exchange_timed`]).
    pub async fn exchange(
        &self,
        c: &mut Conn,
        req: &Outgoing<'_>,
        sink: &mut (dyn FnMut(u64, &[u8]) + Send),
        arrived: &mut (dyn FnMut(Instant, u64) + Send),
    ) -> Result<Response, Failure> {
        self.exchange_limited(c, req, ReadLimits::default(), sink, arrived)
            .await
    }

    /// [`Self::exchange`] reading the body within `limits` (`stop_after=`,
    /// `read_kbps=`); an HTTP/1.1 response cut short comes back with
    /// `keep_alive` false, so the caller closes that connection.
    pub async fn exchange_limited(
        &self,
        c: &mut Conn,
        req: &Outgoing<'_>,
        limits: ReadLimits,
        sink: &mut (dyn FnMut(u64, &[u8]) + Send),
        arrived: &mut (dyn FnMut(Instant, u64) + Send),
    ) -> Result<Response, Failure> {
        match c {
            Conn::H1(c) => c.exchange_limited(req, limits, sink, arrived).await,
            Conn::Https(c) => c.exchange_limited(req, limits, sink, arrived).await,
            Conn::H2(h) => {
                let scheme = self.c.cfg.protocol.scheme();
                h2::exchange_limited(h, req, limits, scheme, &self.c.host, sink, arrived).await
            }
            Conn::H3(h) => h3::exchange_limited(h, req, limits, &self.c.host, sink, arrived).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protocols_parse_and_print_their_names() {
        for p in Protocol::NAMED {
            assert_eq!(p.name().parse::<Protocol>().unwrap(), p);
            assert_eq!(serde_json::to_string(&p).unwrap(), format!("\"{p}\""));
        }
        assert!("http3".parse::<Protocol>().unwrap_err().contains("http3"));
        assert!(Protocol::H2.is_tls() && Protocol::H2.is_h2());
        assert!(!Protocol::H2c.is_tls() && Protocol::H2c.is_h2());
        assert!(Protocol::Https.is_tls() && !Protocol::Https.is_h2());
        assert!(Protocol::H3.is_tls() && Protocol::H3.is_h3() && !Protocol::H3.is_h2());
        assert_eq!(Protocol::H3.scheme(), "https");
        assert_eq!(Protocol::H3.alpn(), b"h3");
    }

    #[test]
    fn ca_and_insecure_exclude_each_other() {
        let cfg = TransportConfig {
            protocol: Protocol::H2,
            tls: TlsOptions {
                ca: Some("x.pem".into()),
                insecure: true,
            },
            h2: H2Settings::default(),
            source: vec![],
            link: LinkImpairment::default(),
            h3_0rtt: false,
        };
        assert!(cfg
            .validate()
            .unwrap_err()
            .to_string()
            .contains("--insecure"));
    }
}
