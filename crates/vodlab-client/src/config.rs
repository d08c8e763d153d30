//! Settings of a run and its live counters.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::time::Duration;

use crate::core::driver::LatePacing;
use crate::core::schedule::Arrivals;

/// Run settings.
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// Server address.
    pub addr: SocketAddr,
    /// Host header value.
    pub host: String,
    /// The URL as given (for results).
    pub target: String,
    /// Aggregate session arrivals (split evenly over shards).
    pub arrivals: Arrivals,
    /// Seed of the arrival schedules.
    pub seed: u64,
    /// Width of the per-interval series, seconds.
    pub interval_s: f64,
    /// A session start or request send later than this is "late".
    pub late_threshold: Duration,
    /// Emulate client access links (rate, delay) from the workload's classes.
    pub shaping: bool,
    /// The per-connection rate the network lab's kernel shapes to
    /// (`VODLAB_LAB_FLOW_DOWN`), recorded in the results; only with
    /// `shaping` off.
    pub kernel_shaping: Option<String>,
    /// [`Self::kernel_shaping`] parsed: HTTP/1.1 bodies are then read in
    /// batches the kernel gathers (`SO_RCVLOWAT`, see
    /// [`crate::io::http::Connection::batch_reads_tcp`]).
    pub kernel_down: Option<vodlab_units::Rate>,
    /// Apply pacing and think times (off: every request as soon as possible).
    pub pacing: bool,
    /// What a paced request does when its slot has passed.
    pub late_pacing: LatePacing,
    /// Stop after starting this many sessions.
    pub max_sessions: Option<usize>,
    /// Hard stop after this long.
    pub max_duration: Option<Duration>,
    /// Write one CSV row per request here.
    pub requests_csv: Option<PathBuf>,
    /// Stop when connections are refused for this long with no success.
    pub unreachable_after: Duration,
    /// Fraction of requests whose body bytes are checked against the file
    /// set's content (needs a `vodlab gen` workload and a file set written by
    /// `vodlab fileset create`); 0 disables.
    pub check_bytes: f64,
    /// Client buffer `B` of the playback latency (the paper's 4 s).
    pub playback_buffer: Duration,
    /// Paced target rate as a multiple `K` of the content's bit rate, for
    /// the rate-window deviation.
    pub pace_target: f64,
    /// Run only this shard of the workload's sessions (`--shard I/N`; the
    /// split rule is in [`crate::out::shard`]).
    pub shard: Option<crate::out::shard::ShardSpec>,
    /// Wall-clock time of offset 0 of every schedule (`--start-at`): the run
    /// waits until then. `None`: at once.
    pub start_at: Option<std::time::SystemTime>,
    /// Protocol, TLS and HTTP/2 settings (`--protocol`; h1 by default).
    pub transport: crate::io::transport::TransportConfig,
    /// Run every session as a closed-loop player (`--player`) instead of
    /// replaying its script; `None`: replay.
    pub player: Option<crate::player_run::PlayerRun>,
    /// Send CMCD (CTA-5004) headers with requests whose session knows its
    /// bit rate, and with every closed-loop player's request (from the
    /// player's state), as dash.js and hls.js can (`--no-cmcd` turns it off).
    pub cmcd: bool,
    /// Run only the sessions of this client class (`--only-class`), e.g.
    /// on a lab host whose kernel shapes that class's link; the others are
    /// skipped, keeping their places in the schedule.
    pub only_class: Option<String>,
    /// Write `checkpoint.json` (the results so far) into this directory at
    /// this period, so a process killed mid-run leaves what it measured.
    pub checkpoint: Option<crate::io::engine::CheckpointConfig>,
}

/// Default seed of the arrival schedules.
pub const DEFAULT_SEED: u64 = 1;
/// Default width of the per-interval series, seconds.
pub const DEFAULT_INTERVAL_S: f64 = 5.0;
/// Default lateness threshold of a session start or request send, ms.
pub const DEFAULT_LATE_THRESHOLD_MS: u64 = 10;
/// Default paced target, a multiple of the content's bit rate.
pub const DEFAULT_PACE_TARGET: f64 = 1.0;

impl RunConfig {
    /// Defaults for a target and a rate (the `DEFAULT_` constants of this
    /// module, which `vodlab run --help` shows too).
    pub fn new(addr: SocketAddr, host: String, target: String, arrivals: Arrivals) -> Self {
        Self {
            addr,
            host,
            target,
            arrivals,
            seed: DEFAULT_SEED,
            interval_s: DEFAULT_INTERVAL_S,
            late_threshold: Duration::from_millis(DEFAULT_LATE_THRESHOLD_MS),
            shaping: true,
            kernel_shaping: None,
            kernel_down: None,
            pacing: true,
            late_pacing: LatePacing::Delay,
            max_sessions: None,
            max_duration: None,
            requests_csv: None,
            unreachable_after: Duration::from_secs(3),
            check_bytes: 0.0,
            playback_buffer: crate::core::delivery::DEFAULT_PLAYBACK_BUFFER,
            pace_target: DEFAULT_PACE_TARGET,
            shard: None,
            start_at: None,
            transport: crate::io::transport::TransportConfig::default(),
            player: None,
            cmcd: true,
            only_class: None,
            checkpoint: None,
        }
    }
}

/// Live counters for a progress display (read without locks).
#[derive(Debug, Default)]
pub struct Live {
    /// Sessions started.
    pub started: AtomicU64,
    /// Sessions running.
    pub active: AtomicU64,
    /// Most sessions running at once since the monitor last sampled (a
    /// session shorter than the sampling tick still counts).
    pub active_peak: AtomicU64,
    /// Sessions ended without failure.
    pub completed: AtomicU64,
    /// Sessions failed.
    pub failed: AtomicU64,
    /// Requests completed.
    pub requests: AtomicU64,
    /// Body bytes of completed requests.
    pub bytes: AtomicU64,
    /// Sessions scheduled in total.
    pub total: AtomicU64,
    /// Set when the run is over.
    pub done: AtomicBool,
}

impl Live {
    /// A session began: counts it as started and active, and raises the
    /// peak of active sessions.
    pub fn session_started(&self) {
        use std::sync::atomic::Ordering::Relaxed;
        self.started.fetch_add(1, Relaxed);
        let now = self.active.fetch_add(1, Relaxed) + 1;
        self.active_peak.fetch_max(now, Relaxed);
    }

    /// The most sessions active at once since the last call (the peak is
    /// then reset to the number active now).
    pub fn take_active_peak(&self) -> u64 {
        use std::sync::atomic::Ordering::Relaxed;
        let now = self.active.load(Relaxed);
        self.active_peak.swap(now, Relaxed).max(now)
    }
}

/// Reads a `--target` URL, `http://HOST[:PORT]` or `https://HOST[:PORT]`
/// (no path: paths come from the session scripts): returns `HOST:PORT` to
/// connect to (80 or 443 when no port is given) and the authority as
/// written, for `Host`. The error names the URL and what is wrong.
pub fn parse_target(url: &str) -> Result<(String, String), String> {
    let (rest, port) = if let Some(r) = url.strip_prefix("http://") {
        (r, 80)
    } else if let Some(r) = url.strip_prefix("https://") {
        (r, 443)
    } else {
        return Err(format!(
            "--target `{url}`: only http:// and https:// URLs are supported"
        ));
    };
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
    if !path.is_empty() {
        return Err(format!(
            "--target `{url}`: give only scheme, host and port; paths come from the session scripts"
        ));
    }
    let hostport = if authority
        .rsplit_once(':')
        .is_some_and(|(_, p)| p.chars().all(|c| c.is_ascii_digit()))
        && !authority.ends_with(']')
    {
        authority.to_string()
    } else {
        format!("{authority}:{port}")
    };
    Ok((hostport, authority.to_string()))
}

/// Whether `ip` is a loopback address (an IPv4-mapped one included): the
/// only targets vodlab loads without `--allow-remote`.
pub fn is_loopback(ip: std::net::IpAddr) -> bool {
    match ip {
        std::net::IpAddr::V4(v) => v.is_loopback(),
        std::net::IpAddr::V6(v) => {
            v.is_loopback() || v.to_ipv4_mapped().is_some_and(|m| m.is_loopback())
        }
    }
}

/// Raises the open-file limit to its hard maximum (a load generator needs
/// a descriptor per connection).
pub fn raise_nofile() -> u64 {
    // SAFETY: plain syscalls on a local struct
    unsafe {
        let mut r = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) == 0 {
            if r.rlim_cur < r.rlim_max {
                r.rlim_cur = r.rlim_max;
                libc::setrlimit(libc::RLIMIT_NOFILE, &r);
            }
            return r.rlim_cur;
        }
    }
    0
}
