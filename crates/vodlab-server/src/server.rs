//! The server: accept loop, shared state, statistics, graceful shutdown.
//! Each connection runs as a state machine (`conn`), which plans every
//! response without I/O ([`crate::plan`]) and executes the plan with a
//! sendfile fast path.
//!
//! Own connection loop over the codec rather than hyper: hyper writes
//! bodies from user-space buffers, and the point of this server is
//! `sendfile(2)` straight from the page cache (and knowing, per request,
//! whether that page-cache read will block).

use std::fs::File;
use std::io::{self, Write};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::Serialize;
use tokio::net::TcpListener;
use tokio::sync::{watch, Notify, OwnedSemaphorePermit, Semaphore};

use crate::bitrate::{BitrateCatalog, CatalogError};
pub use crate::config::{Config, IoMode};
use crate::files::Root;
use crate::limits::HeadQueue;
use crate::pacing::{Pacing, PacingStats};
use crate::plan::ResponseKind;
use crate::prefetch::{DeviceStats, Helpers, Prober};
use vodlab_prefetch::{PrefetchController, PrefetchCore};

/// Counters (lock-free).
#[derive(Debug, Default)]
pub struct Counters {
    /// Requests answered.
    pub requests: AtomicU64,
    /// Body bytes sent (shared with the pacer's driver, which writes paced
    /// bodies itself).
    pub bytes: Arc<AtomicU64>,
    /// Connections accepted.
    pub connections: AtomicU64,
    /// Connections open now.
    pub open: AtomicU64,
    /// Probes that found the range in the page cache.
    pub probe_hits: AtomicU64,
    /// Probes that did not.
    pub probe_misses: AtomicU64,
    /// Misses on ranges this server had prefetched (evicted before use).
    pub prefetch_evictions: AtomicU64,
    /// Sum of prefetch-to-eviction times, µs.
    pub eviction_time_us: AtomicU64,
    /// Prefetched bytes no request of the connection used before it closed.
    pub wasted_prefetch_bytes: AtomicU64,
    /// Bytes of the ranges sent in asap mode (Table 4.1's "requested").
    pub requested_bytes: AtomicU64,
    /// Bytes of requests that missed inside their session's prefetches
    /// (Table 4.1's "evicted").
    pub prefetch_evicted_bytes: AtomicU64,
    /// Bytes of requests found resident outside their session's prefetches.
    pub probed_hit_bytes: AtomicU64,
    /// Requests refused with 4xx/5xx.
    pub errors: AtomicU64,
    /// Clients that went away mid-response.
    pub aborted: AtomicU64,
    /// Connections closed for a slow or missing request head.
    pub header_timeouts: AtomicU64,
    /// Connections closed because their response made no progress for the
    /// send timeout (stalled readers).
    pub send_timeouts: AtomicU64,
    /// Connections waiting for a head that were shed, at the connection
    /// cap, to make room for a new one.
    pub shed: AtomicU64,
    /// Connections answered 503 and closed at the cap (none to shed).
    pub refused_at_cap: AtomicU64,
    /// Responses by kind, indexed by [`kind_index`].
    pub kinds: [AtomicU64; 6],
    /// TLS and HTTP/2 counters.
    pub proto: crate::proto_stats::ProtoCounters,
}

/// The slot of a response kind in [`Counters::kinds`].
pub fn kind_index(k: ResponseKind) -> usize {
    match k {
        ResponseKind::Full => 0,
        ResponseKind::Range => 1,
        ResponseKind::Multipart => 2,
        ResponseKind::Unsatisfiable => 3,
        ResponseKind::Stats => 4,
        ResponseKind::Error => 5,
    }
}

/// Responses by kind (the statistics' `responses`).
#[derive(Debug, Clone, Default, Serialize)]
pub struct ResponseCounts {
    /// 200 with the whole file.
    pub full: u64,
    /// 206 with one range.
    pub range: u64,
    /// 206 multipart.
    pub multipart: u64,
    /// 416.
    pub unsatisfiable: u64,
    /// The statistics page.
    pub stats: u64,
    /// Other errors (4xx, 5xx).
    pub error: u64,
}

/// The JSON of `GET /vodlab/stats`.
#[derive(Debug, Clone, Serialize)]
pub struct StatsView {
    /// I/O mode.
    pub io: IoMode,
    /// The prefetch policy (`fixed:4M`).
    pub prefetch_policy: String,
    /// Prefetch size of a fixed policy, bytes (0 for others).
    pub prefetch_bytes: u64,
    /// Seconds since start.
    pub uptime_s: f64,
    /// Requests answered.
    pub requests: u64,
    /// Body bytes sent.
    pub bytes: u64,
    /// Mean bytes per second since start.
    pub throughput_bytes_per_s: f64,
    /// Connections accepted / open now.
    pub connections: u64,
    /// Open now.
    pub open_connections: u64,
    /// Page-cache probe hits.
    pub probe_hits: u64,
    /// Page-cache probe misses.
    pub probe_misses: u64,
    /// Probes answered by preadv2 because cachestat(2) was not allowed.
    pub probe_fallbacks: u64,
    /// Prefetched ranges evicted before they were sent.
    pub prefetch_evictions: u64,
    /// Mean time from prefetch to eviction, ms.
    pub mean_prefetch_to_eviction_ms: f64,
    /// Prefetched bytes never requested before the connection closed.
    pub wasted_prefetch_bytes: u64,
    /// Queued prefetches dropped unread because their connection had gone
    /// (the sum of the devices' `cancelled`).
    pub prefetch_cancelled: u64,
    /// Prefetch reads stopped part-way because their connection went away
    /// (the sum of the devices' `stopped`).
    pub prefetch_stopped: u64,
    /// Error responses.
    pub errors: u64,
    /// Responses cut by the client.
    pub aborted: u64,
    /// Slow or missing heads.
    pub header_timeouts: u64,
    /// Stalled readers closed by the send timeout.
    pub send_timeouts: u64,
    /// Connections waiting for a head shed at the connection cap.
    pub shed: u64,
    /// Connections answered 503 at the cap.
    pub refused_at_cap: u64,
    /// Responses by kind.
    pub responses: ResponseCounts,
    /// Per storage device.
    pub devices: Vec<DeviceStats>,
    /// Paced responses (`--pace`).
    pub pacing: PacingStats,
    /// The automatic prefetch size (`--prefetch-policy auto`; absent otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefetch_auto: Option<vodlab_prefetch::auto::AutoView>,
    /// Table 4.1's accounting (asap mode, once a range was requested).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub table_4_1: Option<crate::table41::Table41>,
    /// TLS handshakes, ALPN, record sizing.
    pub tls: crate::proto_stats::TlsStats,
    /// HTTP/2 connections, streams and the abuse limits that fired.
    pub h2: crate::proto_stats::H2Stats,
}

/// Shared server state.
pub struct State {
    pub(crate) cfg: Config,
    pub(crate) root: Root,
    /// Counters.
    pub counters: Counters,
    pub(crate) helpers: Helpers,
    pub(crate) prober: Prober,
    pub(crate) prefetch: Mutex<PrefetchCore>,
    /// Connections waiting for a request head, oldest first (shed at the cap).
    pub(crate) heads: Mutex<HeadQueue<Arc<Notify>>>,
    started: Instant,
    pub(crate) log: Option<Mutex<io::BufWriter<File>>>,
    date: Mutex<(u64, String)>,
    last_error_log: AtomicU64,
    /// The pacer and its counters.
    pub(crate) pacing: Arc<Pacing>,
    /// The `--bitrates` catalog.
    pub(crate) bitrates: Option<BitrateCatalog>,
    /// The TLS acceptor (`--tls-cert`/`--tls-self-signed`).
    pub(crate) tls: Option<tokio_rustls::TlsAcceptor>,
    /// Addresses closed for abuse, refused at accept (`crate::penalty`).
    pub(crate) penalty: Mutex<crate::penalty::PenaltyBox>,
}

impl State {
    /// The Date header value, formatted once per second.
    pub(crate) fn date(&self) -> String {
        let now = SystemTime::now();
        let secs = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let mut d = self.date.lock().expect("lock");
        if d.0 != secs {
            *d = (secs, httpdate::fmt_http_date(now));
        }
        d.1.clone()
    }

    /// Logs a server-side error on stderr, at most once per second.
    pub(crate) fn log_error(&self, what: &dyn std::fmt::Display) {
        let secs = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        if self.last_error_log.swap(secs, Ordering::Relaxed) != secs {
            eprintln!("vodlab serve: {what}");
        }
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// Statistics now.
    pub fn stats(&self) -> StatsView {
        let c = &self.counters;
        let up = self.started.elapsed().as_secs_f64();
        let ev = c.prefetch_evictions.load(Ordering::Relaxed);
        let k = |i: usize| c.kinds[i].load(Ordering::Relaxed);
        let devices = self.helpers.stats();
        let (tls, h2) = c.proto.view();
        let table_4_1 = match self.cfg.io {
            IoMode::Asap => crate::table41::Table41Counts {
                requested: c.requested_bytes.load(Ordering::Relaxed),
                device: devices.iter().map(|d| d.bytes).sum(),
                evicted: c.prefetch_evicted_bytes.load(Ordering::Relaxed),
                wasted: c.wasted_prefetch_bytes.load(Ordering::Relaxed),
                probed_hits: c.probed_hit_bytes.load(Ordering::Relaxed),
            }
            .table(),
            IoMode::Vanilla => None,
        };
        StatsView {
            table_4_1,
            tls,
            h2,
            prefetch_cancelled: devices.iter().map(|d| d.cancelled).sum(),
            prefetch_stopped: devices.iter().map(|d| d.stopped).sum(),
            io: self.cfg.io,
            prefetch_policy: self.cfg.prefetch_policy.to_string(),
            prefetch_bytes: self.cfg.prefetch_policy.fixed_bytes().unwrap_or(0),
            uptime_s: up,
            requests: c.requests.load(Ordering::Relaxed),
            bytes: c.bytes.load(Ordering::Relaxed),
            throughput_bytes_per_s: c.bytes.load(Ordering::Relaxed) as f64 / up.max(1e-3),
            connections: c.connections.load(Ordering::Relaxed),
            open_connections: c.open.load(Ordering::Relaxed),
            probe_hits: c.probe_hits.load(Ordering::Relaxed),
            probe_misses: c.probe_misses.load(Ordering::Relaxed),
            probe_fallbacks: self.prober.fallbacks.load(Ordering::Relaxed),
            prefetch_evictions: ev,
            mean_prefetch_to_eviction_ms: if ev > 0 {
                c.eviction_time_us.load(Ordering::Relaxed) as f64 / ev as f64 / 1e3
            } else {
                0.0
            },
            wasted_prefetch_bytes: c.wasted_prefetch_bytes.load(Ordering::Relaxed),
            errors: c.errors.load(Ordering::Relaxed),
            aborted: c.aborted.load(Ordering::Relaxed),
            header_timeouts: c.header_timeouts.load(Ordering::Relaxed),
            send_timeouts: c.send_timeouts.load(Ordering::Relaxed),
            shed: c.shed.load(Ordering::Relaxed),
            refused_at_cap: c.refused_at_cap.load(Ordering::Relaxed),
            responses: ResponseCounts {
                full: k(0),
                range: k(1),
                multipart: k(2),
                unsatisfiable: k(3),
                stats: k(4),
                error: k(5),
            },
            devices,
            pacing: self.pacing.stats(),
            prefetch_auto: self.prefetch.lock().expect("lock").auto_view(),
        }
    }
}

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
}

impl From<StartError> for io::Error {
    fn from(e: StartError) -> Self {
        match e {
            StartError::Io(e) => e,
            StartError::Config(c) => io::Error::new(io::ErrorKind::InvalidInput, c),
            e @ (StartError::Bitrates(_) | StartError::Pacer(_) | StartError::Tls(_)) => {
                io::Error::new(io::ErrorKind::InvalidInput, e)
            }
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
        let tls = if cfg.tls.enabled() {
            Some(tokio_rustls::TlsAcceptor::from(crate::tls::server_config(
                &cfg.tls,
            )?))
        } else {
            None
        };
        let counters = Counters::default();
        let listener = TcpListener::bind(listen).await?;
        if let Some(mss) = cfg.pace_mss {
            crate::pacing::set_listener_mss(&listener, mss)?;
        }
        let addr = listener.local_addr()?;
        let driver = (cfg.paced() && cfg.pace_mode == crate::config::PaceMode::User)
            .then(|| tokio::spawn(crate::pacing::drive(pacing.clone(), counters.bytes.clone())));
        let state = Arc::new(State {
            penalty: Mutex::new(crate::penalty::PenaltyBox::new(cfg.h2.penalty())),
            tls,
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
            cfg,
        });
        let (tx, rx) = watch::channel(false);
        let task = tokio::spawn(accept_loop(listener, state.clone(), rx));
        Ok(Self {
            addr,
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
                    let _ = sock.set_nodelay(true);
                    if st.cfg.notsent_lowat > 0 {
                        set_notsent_lowat(&sock, st.cfg.notsent_lowat);
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
                    st.log_error(&format_args!("accept: {e}"));
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

/// Caps the unsent bytes the kernel queues for the socket
/// (`TCP_NOTSENT_LOWAT`): a write stops, and the socket reports not
/// writable, while more than `bytes` are queued but not yet sent, so a
/// reader that stalls pins what is in flight plus `bytes` of kernel memory
/// instead of a whole send buffer (4 MiB on loopback). Best effort: a
/// failure leaves the kernel's default.
fn set_notsent_lowat(sock: &tokio::net::TcpStream, bytes: u64) {
    use std::os::unix::io::AsRawFd;
    let v = bytes.min(i32::MAX as u64) as libc::c_int;
    // SAFETY: an open socket and a live option value of the right size
    unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_NOTSENT_LOWAT,
            (&v as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
}
