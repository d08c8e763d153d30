//! The server's shared state: the configuration, the counters and their
//! statistics view, the pacer, the prefetch helpers and core, the root,
//! the access log. Every connection holds it (`Arc<State>`); it knows no
//! connection, so the front ends depend on it and never the reverse.

use crate::bitrate::BitrateCatalog;
use crate::config::{Config, IoMode};
use crate::files::Root;
use crate::limits::HeadQueue;
use crate::pacing::{Pacing, PacingStats};
use crate::plan::ResponseKind;
use crate::prefetch::{DeviceStats, Helpers, Prober};
use serde::Serialize;
use std::fs::File;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::Notify;
use vodlab_prefetch::PrefetchCore;

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
    /// Next-object prefetches queued (CMCD `nor`, `--prefetch-next-object`).
    pub next_object_prefetches: AtomicU64,
    /// Bytes those prefetches were queued to read.
    pub next_object_bytes: AtomicU64,
    /// `nor` targets found resident already (nothing read).
    pub next_object_resident: AtomicU64,
    /// `nor` targets refused: not under the root, not a regular file, or
    /// not found.
    pub next_object_refused: AtomicU64,
    /// Requests refused with 4xx/5xx.
    pub errors: AtomicU64,
    /// Of those, 4xx: the request refused (malformed, missing, forbidden,
    /// not a regular file).
    pub refused: AtomicU64,
    /// Of those, 5xx: the server's own trouble (logged on stderr).
    pub server_errors: AtomicU64,
    /// Clients that went away mid-response.
    pub aborted: AtomicU64,
    /// Connections closed for a slow or missing request head.
    pub header_timeouts: AtomicU64,
    /// Connections closed because their response made no progress for the
    /// send timeout (stalled readers).
    pub send_timeouts: AtomicU64,
    /// HTTP/1.1 file responses sent with the socket's low-water mark raised
    /// above `notsent_lowat` for a fast peer (`crate::lowat`).
    pub lowat_raised: AtomicU64,
    /// Connections waiting for a head that were shed, at the connection
    /// cap, to make room for a new one.
    pub shed: AtomicU64,
    /// Connections answered 503 and closed at the cap (none to shed).
    pub refused_at_cap: AtomicU64,
    /// Accepts that failed because the process was out of descriptors
    /// (EMFILE, ENFILE): the connection waits in the listen backlog.
    pub accept_descriptor_errors: AtomicU64,
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
    /// Next-object prefetches queued (CMCD `nor`; `--prefetch-next-object`).
    pub next_object_prefetches: u64,
    /// Bytes the next-object prefetches were queued to read (also in the
    /// devices' `bytes` once read).
    pub next_object_prefetch_bytes: u64,
    /// `nor` targets already resident (not read).
    pub next_object_resident: u64,
    /// `nor` targets refused (outside the root, not a file, not found).
    pub next_object_refused: u64,
    /// Queued prefetches dropped unread because their connection had gone
    /// (the sum of the devices' `cancelled`).
    pub prefetch_cancelled: u64,
    /// Prefetch reads stopped part-way because their connection went away
    /// (the sum of the devices' `stopped`).
    pub prefetch_stopped: u64,
    /// Error responses (4xx and 5xx).
    pub errors: u64,
    /// Error responses 4xx: refusals (a missing file, one not regular, ...).
    pub refused: u64,
    /// Error responses 5xx: the server's own trouble.
    pub server_errors: u64,
    /// Times the root was opened again because its path came to name
    /// another directory (`crate::files::Root::reopens`).
    pub root_reopens: u64,
    /// Responses cut by the client.
    pub aborted: u64,
    /// Slow or missing heads.
    pub header_timeouts: u64,
    /// Stalled readers closed by the send timeout.
    pub send_timeouts: u64,
    /// HTTP/1.1 file responses sent with the low-water mark raised for a
    /// fast peer.
    pub lowat_raised: u64,
    /// Connections waiting for a head shed at the connection cap.
    pub shed: u64,
    /// Connections answered 503 at the cap.
    pub refused_at_cap: u64,
    /// Accepts refused by the kernel for want of descriptors (EMFILE,
    /// ENFILE); logged once per statistics interval.
    pub accept_descriptor_errors: u64,
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
    /// HTTP/3 connections, requests and bytes (zeros without `--h3`).
    pub h3: crate::proto_stats::H3Stats,
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
    pub(crate) started: Instant,
    pub(crate) log: Option<Mutex<io::BufWriter<File>>>,
    pub(crate) date: Mutex<(u64, String)>,
    pub(crate) last_error_log: AtomicU64,
    /// When the last out-of-descriptors line was logged, Unix seconds, and
    /// the count it reported.
    pub(crate) last_descriptor_log: Mutex<(u64, u64)>,
    /// The pacer and its counters.
    pub(crate) pacing: Arc<Pacing>,
    /// The `--bitrates` catalog.
    pub(crate) bitrates: Option<BitrateCatalog>,
    /// The TLS acceptor (`--tls-cert`/`--tls-self-signed`).
    pub(crate) tls: Option<tokio_rustls::TlsAcceptor>,
    /// The `Alt-Svc` value the TCP front ends send (`--h3`), if any.
    pub(crate) alt_svc: Option<String>,
    /// Addresses closed for abuse, refused at accept (`crate::penalty`).
    pub(crate) penalty: Mutex<crate::penalty::PenaltyBox>,
    /// Per-address connection rates (`--conn-rate-per-address`), if limited.
    pub(crate) conn_rate: Option<Mutex<crate::conn_rate::ConnRate>>,
    /// Wakes the SYN filter's task when a ban begins.
    pub(crate) syn_filter_wake: tokio::sync::Notify,
    /// Set once a SYN filter has been attached: accepted sockets may
    /// carry it from then on, and the accept path detaches it.
    pub(crate) syn_filter_used: std::sync::atomic::AtomicBool,
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

    /// Counts an accept that failed for want of descriptors and, at most
    /// once per statistics interval (at least a second), says so on
    /// stderr with the count since the last line and this process's limit.
    pub(crate) fn accept_out_of_descriptors(&self, e: &io::Error) {
        let n = self
            .counters
            .accept_descriptor_errors
            .fetch_add(1, Ordering::Relaxed)
            + 1;
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let every = self.cfg.stats_interval.as_secs().max(1);
        let mut last = self.last_descriptor_log.lock().expect("lock");
        if last.0 != 0 && now < last.0 + every {
            return;
        }
        let since = n - last.1;
        *last = (now, n);
        drop(last);
        eprintln!(
            "vodlab serve: accept: out of file descriptors ({e}) {since} time(s) since the last report, {n} in all; new connections wait in the listen backlog. This process may hold {} descriptors (RLIMIT_NOFILE): lower --max-connections below it, or spread the connections over processes with --workers N",
            crate::limits::nofile()
        );
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
            h3: c.proto.h3_view(),
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
            next_object_prefetches: c.next_object_prefetches.load(Ordering::Relaxed),
            next_object_prefetch_bytes: c.next_object_bytes.load(Ordering::Relaxed),
            next_object_resident: c.next_object_resident.load(Ordering::Relaxed),
            next_object_refused: c.next_object_refused.load(Ordering::Relaxed),
            errors: c.errors.load(Ordering::Relaxed),
            refused: c.refused.load(Ordering::Relaxed),
            server_errors: c.server_errors.load(Ordering::Relaxed),
            root_reopens: self.root.reopens(),
            aborted: c.aborted.load(Ordering::Relaxed),
            header_timeouts: c.header_timeouts.load(Ordering::Relaxed),
            send_timeouts: c.send_timeouts.load(Ordering::Relaxed),
            lowat_raised: c.lowat_raised.load(Ordering::Relaxed),
            shed: c.shed.load(Ordering::Relaxed),
            refused_at_cap: c.refused_at_cap.load(Ordering::Relaxed),
            accept_descriptor_errors: c.accept_descriptor_errors.load(Ordering::Relaxed),
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

impl State {
    /// Notes that the connection from `peer` was closed for abuse and logs
    /// `what` (at most a line a second, [`State::log_error`]) with the ban
    /// the address got ([`crate::penalty`]), counted in `h2.abuse_bans`.
    pub(crate) fn abused(&self, peer: std::net::IpAddr, what: &dyn std::fmt::Display) {
        let st = self;
        let now = Instant::now();
        let got = {
            let mut b = st.penalty.lock().expect("lock");
            let g = b.abuse(peer, now);
            st.counters
                .proto
                .penalty_addresses
                .store(b.len() as u64, Ordering::Relaxed);
            g
        };
        match got {
            Some(g) => {
                st.counters.proto.abuse_bans.fetch_add(1, Ordering::Relaxed);
                st.syn_filter_wake.notify_one();
                st.log_error(&format_args!(
                    "{what}; {peer} banned {:.1} s (abuse {} remembered{})",
                    g.ban.as_secs_f64(),
                    g.strikes,
                    if g.evicted {
                        ", table full: the oldest evicted"
                    } else {
                        ""
                    }
                ));
            }
            None => st.log_error(what),
        }
    }
}
