//! The server: accept loop, shared state, statistics, graceful shutdown.
//! Each connection runs as a state machine (`conn`), which plans every
//! response without I/O ([`crate::plan`]) and executes the plan with a
//! sendfile fast path.
//!
//! Own connection loop over the codec rather than hyper: hyper writes
//! bodies from user-space buffers, and the point of this server is
//! `sendfile(2)` straight from the page cache (and knowing, per request,
//! whether that page-cache read will block).

use std::io::{self, Write};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::net::TcpListener;
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};

use crate::bitrate::{BitrateCatalog, CatalogError};
pub use crate::config::{Config, IoMode};
use crate::files::Root;
use crate::limits::HeadQueue;
use crate::pacing::Pacing;
use crate::prefetch::{Helpers, Prober};
use vodlab_prefetch::{PrefetchController, PrefetchCore};

pub use crate::state::{kind_index, Counters, ResponseCounts, State, StatsView};

/// Why a server could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// An invalid setting.
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    /// The root, the access log or the listening socket.
    #[error(transparent)]
    Io(#[from] io::Error),
    /// The `--bitrates` catalog.
    #[error("bitrates: {0}")]
    Bitrates(#[from] CatalogError),
    /// The pacer's settings derived from the configuration.
    #[error("pacing: {0}")]
    Pacer(#[from] crate::pacer::PacerConfigError),
    /// The TLS certificate, key or settings.
    #[error("tls: {0}")]
    Tls(#[from] crate::tls::TlsError),
    /// The QUIC endpoint of `--h3`.
    #[error("h3: {0}")]
    H3(#[from] crate::h3::H3Error),
}

impl From<StartError> for io::Error {
    fn from(e: StartError) -> Self {
        match e {
            StartError::Io(e) => e,
            StartError::Config(c) => io::Error::new(io::ErrorKind::InvalidInput, c),
            e @ (StartError::Bitrates(_)
            | StartError::Pacer(_)
            | StartError::Tls(_)
            | StartError::H3(_)) => io::Error::new(io::ErrorKind::InvalidInput, e),
        }
    }
}

/// A running server.
pub struct Server {
    /// Bound address.
    pub addr: SocketAddr,
    /// Shared state (statistics).
    pub state: Arc<State>,
    shutdown: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
    driver: Option<tokio::task::JoinHandle<()>>,
    /// The QUIC endpoint's accept loop (`--h3`).
    h3: Option<tokio::task::JoinHandle<()>>,
    /// The UDP address HTTP/3 is served on (`--h3`).
    pub h3_addr: Option<SocketAddr>,
}

impl Server {
    /// Validates the configuration, binds and starts serving with the
    /// configured prefetch policy.
    pub async fn start(cfg: Config, listen: SocketAddr) -> Result<Self, StartError> {
        let controller = cfg.prefetch_policy.build();
        Self::start_with_controller(cfg, listen, controller).await
    }

    /// As [`Server::start`], with a given prefetch controller instead of the
    /// configured policy's (for controllers outside this crate, and tests).
    pub async fn start_with_controller(
        cfg: Config,
        listen: SocketAddr,
        controller: Box<dyn PrefetchController>,
    ) -> Result<Self, StartError> {
        cfg.validate()?;
        let root = Root::open(&cfg.root)?;
        let log = match &cfg.access_log {
            Some(p) => Some(Mutex::new(io::BufWriter::new(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(p)?,
            ))),
            None => None,
        };
        let mut core = PrefetchCore::new(controller);
        if let Some(p) = &cfg.prefetch_events {
            core.record(Instant::now(), events_sink(std::fs::File::create(p)?));
        }
        let bitrates = match &cfg.bitrates {
            Some(p) => Some(BitrateCatalog::load(p)?.time_compressed(cfg.time_compression)),
            None => None,
        };
        let pacing = Arc::new(Pacing::new(&cfg)?);
        // one rustls configuration (one generated certificate) for TCP and QUIC
        let tls_cfg = if cfg.tls.enabled() {
            Some(crate::tls::server_config(&cfg.tls)?)
        } else {
            None
        };
        let tls = tls_cfg.clone().map(tokio_rustls::TlsAcceptor::from);
        let counters = Counters::default();
        crate::limits::raise_nofile();
        let listener = bind(listen, cfg.reuse_port)?;
        if let Some(mss) = cfg.pace_mss {
            crate::pacing::set_listener_mss(&listener, mss)?;
        }
        let addr = listener.local_addr()?;
        // HTTP/3 on UDP, by default on the TCP port's number (validate()
        // made sure there is a certificate)
        let quic = match (&tls_cfg, cfg.h3.enabled) {
            (Some(t), true) => {
                let at = SocketAddr::new(addr.ip(), cfg.h3.port.unwrap_or(addr.port()));
                Some(crate::h3::endpoint(&cfg.h3, t, at)?)
            }
            _ => None,
        };
        let h3_addr = match &quic {
            Some(ep) => Some(ep.local_addr()?),
            None => None,
        };
        let driver = (cfg.paced() && cfg.pace_mode == crate::config::PaceMode::User)
            .then(|| tokio::spawn(crate::pacing::drive(pacing.clone(), counters.bytes.clone())));
        let state = Arc::new(State {
            penalty: Mutex::new(crate::penalty::PenaltyBox::new(cfg.h2.penalty())),
            conn_rate: (cfg.h2.abuse_conn_rate > 0)
                .then(|| Mutex::new(crate::conn_rate::ConnRate::new(cfg.h2.abuse_conn_rate))),
            syn_filter_wake: tokio::sync::Notify::new(),
            syn_filter_used: std::sync::atomic::AtomicBool::new(false),
            tls,
            alt_svc: h3_addr.map(|a| crate::h3::alt_svc(a.port())),
            pacing,
            bitrates,
            helpers: Helpers::new(cfg.helpers_per_device),
            prober: Prober::default(),
            prefetch: Mutex::new(core),
            heads: Mutex::new(HeadQueue::default()),
            root,
            counters,
            started: Instant::now(),
            log,
            date: Mutex::new((0, String::new())),
            last_error_log: AtomicU64::new(0),
            last_descriptor_log: Mutex::new((0, 0)),
            cfg,
        });
        let (tx, rx) = watch::channel(false);
        if state.cfg.h2.abuse_drop_syn && state.penalty.lock().expect("lock").enabled() {
            // a second descriptor of the listening socket: the filter is the socket's
            let fd = std::os::fd::AsFd::as_fd(&listener).try_clone_to_owned()?;
            tokio::spawn(syn_filter_loop(fd, state.clone(), rx.clone()));
        }
        let h3 = quic.map(|ep| tokio::spawn(crate::h3::accept_loop(ep, state.clone(), rx.clone())));
        let task = tokio::spawn(accept_loop(listener, state.clone(), rx));
        Ok(Self {
            addr,
            h3,
            h3_addr,
            state,
            shutdown: tx,
            task,
            driver,
        })
    }

    /// Stops accepting, lets responses in flight finish (up to the grace
    /// period), closes idle connections, and returns.
    pub async fn shutdown(self) {
        let _ = self.shutdown.send(true);
        let _ = self.task.await;
        if let Some(h) = self.h3 {
            let _ = h.await;
        }
        if let Some(d) = self.driver {
            // wait for the abort to drop the driver (which joins its thread)
            d.abort();
            let _ = d.await;
        }
        self.state.helpers.shutdown();
        if let Some(l) = &self.state.log {
            let _ = l.lock().expect("lock").flush();
        }
    }
}

/// Writes the prefetch core's events to `file`, one JSON line each, each
/// line flushed (a diagnostic: the writes happen under the core's lock).
/// After a write error no more lines are written.
fn events_sink(file: std::fs::File) -> Box<dyn FnMut(&vodlab_prefetch::events::Event) + Send> {
    let mut out = Some(io::LineWriter::new(file));
    Box::new(move |e| {
        if let Some(w) = out.as_mut() {
            let line = serde_json::to_string(e).expect("events serialize");
            if let Err(err) = writeln!(w, "{line}") {
                eprintln!("vodlab serve: prefetch events: {err}; no more events written");
                out = None;
            }
        }
    })
}

/// Listen backlog: the kernel caps it at `net.core.somaxconn`.
const BACKLOG: u32 = 4096;

/// The listening socket on `listen`; with `reuse_port` (`--workers`) it
/// sets SO_REUSEPORT, so the workers' sockets share the address and the
/// kernel spreads new connections over them.
fn bind(listen: SocketAddr, reuse_port: bool) -> std::io::Result<TcpListener> {
    let sock = if listen.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    sock.set_reuseaddr(true)?;
    if reuse_port {
        sock.set_reuseport(true)?;
    }
    sock.bind(listen)?;
    sock.listen(BACKLOG)
}

/// The periodic work: the prefetch controller's ticks and the statistics
/// lines. A task of its own, because the accept loop waits in `accept`.
async fn periodic(st: Arc<State>, mut stop: watch::Receiver<bool>) {
    let mut ticker = tokio::time::interval(if st.cfg.stats_interval.is_zero() {
        Duration::from_secs(3600)
    } else {
        st.cfg.stats_interval
    });
    ticker.tick().await;
    // the prefetch controller's clock: the server ticks it, it never reads one
    let mut control = tokio::time::interval(st.cfg.tick);
    control.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    control.tick().await;
    let mut last = (Instant::now(), 0u64);
    loop {
        tokio::select! {
            _ = stop.changed() => return,
            _ = control.tick(), if st.cfg.io == IoMode::Asap => {
                let devices = st.helpers.stats();
                let bytes = devices.iter().map(|d| d.bytes).sum();
                let busy: f64 = devices.iter().map(|d| d.busy_s).sum();
                let busy = Duration::try_from_secs_f64(busy).unwrap_or_default();
                st.prefetch.lock().expect("lock").tick_devices(Instant::now(), bytes, busy);
            }
            _ = ticker.tick(), if !st.cfg.stats_interval.is_zero() => {
                let s = st.stats();
                let dt = last.0.elapsed().as_secs_f64().max(1e-3);
                eprintln!(
                    "vodlab serve: {} req, {:.1} MB/s, {} open, probe {}/{} hit, {} evictions",
                    s.requests, (s.bytes - last.1) as f64 / dt / 1048576.0, s.open_connections,
                    s.probe_hits, s.probe_hits + s.probe_misses, s.prefetch_evictions
                );
                last = (Instant::now(), s.bytes);
                if let Some(l) = &st.log {
                    let _ = l.lock().expect("lock").flush();
                }
            }
        }
    }
}

/// How long a connection accepted at the cap waits for the permit of the
/// connection shed for it before it is answered 503.
const SHED_WAIT: Duration = Duration::from_secs(2);

/// Accepts connections. Below the cap each gets a permit and its task. At
/// the cap the connection that has waited longest for a request head is
/// shed (closed) to make room; when no permit frees within `SHED_WAIT`
/// (every connection busy with a response), the new one is answered 503
/// and closed. On shutdown the
/// listener is closed at once, so new clients see a refused connection.
async fn accept_loop(listener: TcpListener, st: Arc<State>, mut stop: watch::Receiver<bool>) {
    let permits = Arc::new(Semaphore::new(st.cfg.max_connections));
    let mut conns = tokio::task::JoinSet::new();
    let ticks = tokio::spawn(periodic(st.clone(), stop.clone()));
    loop {
        tokio::select! {
            _ = stop.changed() => break,
            accepted = listener.accept() => match accepted {
                Ok((sock, peer)) => {
                    let at = Instant::now();
                    if !crate::accept::admit(&st, &sock, peer.ip(), at) {
                        continue;
                    }
                    if st.syn_filter_used.load(std::sync::atomic::Ordering::Relaxed) {
                        // the handshake copied the listener's filter into the socket
                        let _ = crate::synfilter::detach(std::os::fd::AsRawFd::as_raw_fd(&sock));
                    }
                    let _ = sock.set_nodelay(true);
                    if st.cfg.notsent_lowat > 0 {
                        crate::lowat::set(
                            std::os::fd::AsRawFd::as_raw_fd(&sock),
                            st.cfg.notsent_lowat,
                        );
                    }
                    match permits.clone().try_acquire_owned() {
                        Ok(permit) => {
                            spawn_conn(&mut conns, sock, peer.ip(), &st, &stop, permit, at);
                        }
                        Err(_) => {
                            // shed the connection waiting longest for a head, then wait
                            // briefly for a permit: the victim's, or one freed by a
                            // connection between states (accepted but not yet reading
                            // its head, or closing) -- under a connect flood every
                            // permit can be in such hands for a moment, and refusing
                            // at once then turned a benign client away
                            let permits = permits.clone();
                            let st2 = st.clone();
                            let stop2 = stop.clone();
                            conns.spawn(async move {
                                match wait_for_slot(&st2, permits).await {
                                    Some(permit) => serve(sock, peer.ip(), st2, stop2, permit, at).await,
                                    None => refuse(sock, &st2),
                                }
                            });
                        }
                    }
                }
                Err(e) => {
                    // EMFILE and friends: back off instead of spinning
                    if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) {
                        st.accept_out_of_descriptors(&e);
                    } else {
                        st.log_error(&format_args!("accept: {e}"));
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
    // stop accepting at once: connections arriving during the grace are refused, not left hanging
    drop(listener);
    // graceful: connections see the stop flag between requests; wait for them
    let deadline = tokio::time::sleep(st.cfg.grace);
    tokio::pin!(deadline);
    loop {
        tokio::select! {
            r = conns.join_next() => if r.is_none() { break },
            _ = &mut deadline => { conns.abort_all(); while conns.join_next().await.is_some() {} break; }
        }
    }
    let _ = ticks.await;
}

/// Keeps the listening socket's SYN filter ([`crate::synfilter`]) equal
/// to the banned addresses: rebuilt when a ban begins (woken by
/// [`State::abused`]) or ends (a timer at the first end), detached when
/// none is banned. Ends with the server; a failing `setsockopt` is logged
/// and the penalty stays at accept.
async fn syn_filter_loop(
    fd: std::os::fd::OwnedFd,
    st: Arc<State>,
    mut stop: watch::Receiver<bool>,
) {
    use std::os::fd::AsRawFd;
    use std::sync::atomic::Ordering;
    let mut current: Vec<std::net::IpAddr> = Vec::new();
    loop {
        let (keys, next) = st.penalty.lock().expect("lock").banned_keys(Instant::now());
        let keys: Vec<_> = keys
            .into_iter()
            .take(crate::synfilter::MAX_ADDRESSES)
            .collect();
        if keys != current {
            let r = if keys.is_empty() {
                crate::synfilter::detach(fd.as_raw_fd())
            } else {
                st.syn_filter_used.store(true, Ordering::Relaxed);
                crate::synfilter::attach(fd.as_raw_fd(), &crate::synfilter::program(&keys))
            };
            match r {
                Ok(()) => {
                    let p = &st.counters.proto;
                    p.syn_filter_updates.fetch_add(1, Ordering::Relaxed);
                    p.syn_filter_addresses
                        .store(keys.len() as u64, Ordering::Relaxed);
                    current = keys;
                }
                Err(e) => {
                    st.log_error(&format_args!("SYN filter: {e}; bans stay at accept"));
                    return;
                }
            }
        }
        // a ban that ends in the same millisecond as `now` is re-read at once
        let until = next.map(|n| tokio::time::Instant::from(n + Duration::from_millis(1)));
        tokio::select! {
            _ = stop.changed() => return,
            _ = st.syn_filter_wake.notified() => {}
            _ = async { match until { Some(u) => tokio::time::sleep_until(u).await, None => std::future::pending().await } } => {}
        }
    }
}

/// At the cap: sheds the connection waiting longest for a head and waits
/// for a slot, shedding again every 100 ms while none frees (connections
/// accepted a moment ago enter the shedding queue only when they start
/// reading their head), for at most `SHED_WAIT`; `None` when no slot
/// freed (every connection busy with a response).
async fn wait_for_slot(st: &State, permits: Arc<Semaphore>) -> Option<OwnedSemaphorePermit> {
    let until = Instant::now() + SHED_WAIT;
    loop {
        if let Some(n) = st.heads.lock().expect("lock").shed_oldest() {
            n.notify_one();
        }
        let step = Duration::from_millis(100).min(until.saturating_duration_since(Instant::now()));
        match tokio::time::timeout(step, permits.clone().acquire_owned()).await {
            Ok(Ok(permit)) => return Some(permit),
            Ok(Err(_)) => return None,
            Err(_) if Instant::now() >= until => return None,
            Err(_) => {}
        }
    }
}

fn spawn_conn(
    conns: &mut tokio::task::JoinSet<()>,
    sock: tokio::net::TcpStream,
    peer: std::net::IpAddr,
    st: &Arc<State>,
    stop: &watch::Receiver<bool>,
    permit: OwnedSemaphorePermit,
    at: Instant,
) {
    let st2 = st.clone();
    let stop2 = stop.clone();
    conns.spawn(async move { serve(sock, peer, st2, stop2, permit, at).await });
}

async fn serve(
    sock: tokio::net::TcpStream,
    peer: std::net::IpAddr,
    st: Arc<State>,
    stop: watch::Receiver<bool>,
    permit: OwnedSemaphorePermit,
    at: Instant,
) {
    let id = st.counters.connections.fetch_add(1, Ordering::Relaxed) + 1;
    st.counters.open.fetch_add(1, Ordering::Relaxed);
    crate::accept::serve_conn(sock, peer, id, st.clone(), stop, at).await;
    st.counters.open.fetch_sub(1, Ordering::Relaxed);
    drop(permit);
}

/// Answers 503 without waiting (what the socket buffer takes) and closes.
fn refuse(sock: tokio::net::TcpStream, st: &State) {
    st.counters.refused_at_cap.fetch_add(1, Ordering::Relaxed);
    let _ = sock.try_write(
        b"HTTP/1.1 503 Service Unavailable\r\nServer: vodlab\r\nContent-Length: 0\r\nConnection: close\r\nRetry-After: 1\r\n\r\n",
    );
}
