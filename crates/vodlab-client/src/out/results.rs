//! `results.json` (schema in `docs/results.schema.json`) and the summary table.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::core::exchange::ErrorKind;
use crate::core::schedule::Arrivals;
use crate::out::metrics::{ClassMetrics, RunMetrics, Summary};

/// Why the run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// Every session ran to its end.
    Finished,
    /// Ctrl-C (or a cancel request).
    Interrupted,
    /// The duration cap passed.
    Duration,
    /// Connections were refused with no success for a while: the server is gone.
    ServerUnreachable,
    /// A merged run lacks a shard's results (it died or never ran).
    ShardMissing,
    /// A checkpoint written while the run was still going (the process
    /// ended before its results; `vodlab merge` uses it for a dead shard).
    Checkpoint,
}

impl StopReason {
    /// Why the run ended, in words.
    pub fn describe(self) -> &'static str {
        match self {
            StopReason::Finished => "every session ran",
            StopReason::Interrupted => "interrupted",
            StopReason::Duration => "the --duration cap passed",
            StopReason::ServerUnreachable => "the server could not be reached",
            StopReason::ShardMissing => "a shard's results are missing",
            StopReason::Checkpoint => "a checkpoint of a run still going",
        }
    }
}

/// `n` and the noun, singular for one (`1 session`, `2 sessions`).
pub fn count(n: u64, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// Per-class (or overall) figures of measured sessions.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ClassResults {
    /// Measured sessions.
    pub measured_sessions: u64,
    /// Measured sessions that failed.
    pub failed_sessions: u64,
    /// Percent of measured sessions that failed.
    pub failed_sessions_pct: f64,
    /// Completed requests of measured sessions.
    pub requests: u64,
    /// Body bytes of those.
    pub bytes: u64,
    /// Send to last byte, ms.
    pub response_time_ms: Summary,
    /// Its distribution, `[quantile, ms]` pairs.
    pub response_time_cdf_ms: Vec<[f64; 2]>,
    /// Send to first byte, ms.
    pub ttfb_ms: Summary,
    /// Scheduled send time to last byte, ms (free of coordinated omission).
    pub latency_from_schedule_ms: Summary,
    /// Session start to playback start, s.
    pub startup_delay_s: Summary,
    /// Measured sessions with at least one stall.
    pub stalled_sessions: u64,
    /// Stalls.
    pub stalls: u64,
    /// Total stall time, s.
    pub stall_time_s: f64,
    /// Playback latency (the pacing paper's): issue — the connection attempt
    /// on a new connection — to the first `B` seconds of content, s.
    #[serde(default)]
    pub playback_latency_s: Summary,
    /// Download time: issue to last byte, s (the response time in seconds).
    #[serde(default)]
    pub download_time_s: Summary,
    /// Completed requests whose bit rate was unknown (no playback latency).
    #[serde(default)]
    pub requests_without_bitrate: u64,
    /// Completed requests holding less than `B` seconds of content (no
    /// playback latency).
    #[serde(default)]
    pub requests_shorter_than_buffer: u64,
}

impl ClassResults {
    fn of(m: &ClassMetrics) -> Self {
        Self {
            measured_sessions: m.sessions,
            failed_sessions: m.failed,
            failed_sessions_pct: pct(m.failed, m.sessions),
            requests: m.requests,
            bytes: m.bytes,
            response_time_ms: Summary::of(&m.response, 1e3),
            response_time_cdf_ms: crate::out::metrics::cdf(&m.response, 1e3),
            ttfb_ms: Summary::of(&m.ttfb, 1e3),
            latency_from_schedule_ms: Summary::of(&m.from_schedule, 1e3),
            startup_delay_s: Summary::of(&m.startup, 1e6),
            stalled_sessions: m.stalled_sessions,
            stalls: m.stalls,
            stall_time_s: m.stall_us as f64 / 1e6,
            playback_latency_s: Summary::of(&m.playback, 1e6),
            download_time_s: Summary::of(&m.response, 1e6),
            requests_without_bitrate: m.playback_no_bitrate,
            requests_shorter_than_buffer: m.playback_short,
        }
    }
}

fn pct(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        100.0 * a as f64 / b as f64
    }
}

/// Health of the load generator itself.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Health {
    /// Lateness above this counts as late, ms.
    pub late_threshold_ms: f64,
    /// Session starts later than the threshold.
    pub late_session_starts: u64,
    /// Request sends later than the threshold.
    pub late_request_sends: u64,
    /// Session start lateness, ms.
    pub start_lateness_ms: Summary,
    /// Request send lateness (vs. the pacing target), ms.
    pub send_lateness_ms: Summary,
    /// Highest CPU use of the client process in any interval, percent of one core.
    pub max_cpu_pct: f64,
    /// CPU cores available to the process.
    pub cpus: usize,
    /// Errors that mean the client ran out of descriptors.
    pub descriptor_errors: u64,
    /// Errors that mean the client ran out of local ports.
    pub port_errors: u64,
    /// Most concurrent sessions.
    pub peak_active_sessions: u64,
    /// Peak resident memory of the client process, MiB.
    pub peak_rss_mb: f64,
}

/// One row of the per-interval series.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Interval {
    /// Interval start, s from the run start.
    pub t_s: f64,
    /// Bytes of requests completed in the interval per second.
    pub throughput_bytes_per_s: f64,
    /// Requests completed.
    pub completed_requests: u64,
    /// Most sessions active at once in the interval (the monitor's samples,
    /// at most 1 s apart, each filed in the intervals its window covers:
    /// [`Monitor::sample`]).
    pub active_sessions: u64,
    /// Sessions started.
    pub started: u64,
    /// Sessions that ended without failure.
    pub completed: u64,
    /// Sessions that failed.
    pub failed: u64,
    /// Client CPU, percent of one core.
    pub cpu_pct: f64,
}

/// Deviation of delivered rate windows from the paced target, as fractions
/// (`(delivered − target) / target`; −1 is a window with no bytes).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Deviation {
    /// Smallest.
    pub min: f64,
    /// 5th percentile.
    pub p5: f64,
    /// Median.
    pub p50: f64,
    /// 95th percentile.
    pub p95: f64,
    /// Largest (clamped at 999, a ratio of 1000).
    pub max: f64,
}

/// The figures that judge a pacing server (Ma, Bartoš, Bhatia): playback
/// latency, download time, rate windows against the paced target, and the
/// aggregate rate over time. See `docs/run.md`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Delivery {
    /// Client buffer `B`, s (`--playback-buffer`).
    pub playback_buffer_s: f64,
    /// Paced target as a multiple of the bit rate (`--pace-target`).
    pub pace_target: f64,
    /// Width of the rate windows, s.
    pub rate_window_s: f64,
    /// Playback latency of measured sessions' requests, s.
    pub playback_latency_s: Summary,
    /// Its distribution, `[quantile, s]` pairs (the paper's sorted latencies).
    pub playback_latency_cdf_s: Vec<[f64; 2]>,
    /// Download time (issue to last byte) of the same requests, s.
    pub download_time_s: Summary,
    /// Completed requests with no known bit rate (no playback latency, no
    /// rate windows).
    pub requests_without_bitrate: u64,
    /// Completed requests holding less than `B` seconds of content.
    pub requests_shorter_than_buffer: u64,
    /// Full rate windows after the first `B` seconds of measured responses.
    pub rate_windows: u64,
    /// Those delivering within ±5 % of the target.
    pub rate_windows_within_5pct: u64,
    /// The same in percent of `rate_windows`.
    pub rate_windows_within_5pct_pct: f64,
    /// Deviation from the target across all those windows.
    pub rate_deviation: Deviation,
    /// Width of a point of the aggregate series, s (100 ms, coarsened to
    /// keep at most 2,000 points).
    pub aggregate_window_s: f64,
    /// Body bytes of all sessions over time: `[window start s, Mbit/s]`.
    pub aggregate_mbit_per_s: Vec<[f64; 2]>,
}

/// Most points of the aggregate series in results.
pub const MAX_AGGREGATE_POINTS: usize = 2000;

/// Builds [`Delivery`] from merged metrics.
pub fn delivery(sh: &RunMetrics, overall: &ClassMetrics, buffer_s: f64, k: f64) -> Delivery {
    let w = crate::core::delivery::RATE_WINDOW.as_secs_f64();
    let h = &sh.rate_ratio;
    let dev = |v: u64| v as f64 / 1000.0 - 1.0;
    let rate_deviation = if h.is_empty() {
        Deviation::default()
    } else {
        Deviation {
            min: dev(h.min()),
            p5: dev(h.value_at_quantile(0.05)),
            p50: dev(h.value_at_quantile(0.50)),
            p95: dev(h.value_at_quantile(0.95)),
            max: dev(h.max()),
        }
    };
    let per = sh.delivered.len().div_ceil(MAX_AGGREGATE_POINTS).max(1);
    let width = w * per as f64;
    let aggregate_mbit_per_s = sh
        .delivered
        .chunks(per)
        .enumerate()
        .map(|(i, c)| {
            let bytes: u64 = c.iter().sum();
            [i as f64 * width, bytes as f64 * 8.0 / width / 1e6]
        })
        .collect();
    Delivery {
        playback_buffer_s: buffer_s,
        pace_target: k,
        rate_window_s: w,
        playback_latency_s: Summary::of(&overall.playback, 1e6),
        playback_latency_cdf_s: crate::out::metrics::cdf(&overall.playback, 1e6),
        download_time_s: Summary::of(&overall.response, 1e6),
        requests_without_bitrate: overall.playback_no_bitrate,
        requests_shorter_than_buffer: overall.playback_short,
        rate_windows: sh.rate_windows,
        rate_windows_within_5pct: sh.rate_windows_within,
        rate_windows_within_5pct_pct: pct(sh.rate_windows_within, sh.rate_windows),
        rate_deviation,
        aggregate_window_s: width,
        aggregate_mbit_per_s,
    }
}

/// Everything `results.json` holds.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Results {
    /// `"vodlab-results"`.
    pub format: String,
    /// Schema version (1).
    pub version: u32,
    /// The run ended by itself (not interrupted, capped or cut by a dead server).
    pub complete: bool,
    /// The load generator kept up: the figures can be trusted.
    pub valid: bool,
    /// Why `valid` is false.
    pub invalid_reasons: Vec<String>,
    /// Why the run ended.
    pub stopped_by: StopReason,
    /// Target URL.
    pub target: String,
    /// Workload name.
    pub workload: String,
    /// Arrival process.
    pub arrivals: Arrivals,
    /// Seed of the arrival schedule.
    pub seed: u64,
    /// Link emulation on.
    pub shaping: bool,
    /// Who shaped the access links ([`ShapingMode`]). Absent in results
    /// written before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shaping_mode: Option<ShapingMode>,
    /// With `shaping_mode` `kernel`: the per-connection rate the network
    /// lab's kernel shaped to (`VODLAB_LAB_FLOW_DOWN`, e.g. `2mbit`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_shaping_rate: Option<String>,
    /// Pacing on.
    pub pacing: bool,
    /// Wall-clock start, Unix seconds.
    pub started_at_unix_s: f64,
    /// Run length, s.
    pub duration_s: f64,
    /// Sessions the run was to start.
    pub scheduled_sessions: u64,
    /// Sessions started.
    pub started_sessions: u64,
    /// Sessions outside the ramps.
    pub measured_sessions: u64,
    /// Measured sessions that failed (a request missed its deadline or errored).
    pub failed_sessions: u64,
    /// Percent of measured sessions that failed.
    pub failed_sessions_pct: f64,
    /// Requests skipped because their session failed.
    pub skipped_requests: u64,
    /// The steady-state window `[from, to]`, s: first measured session start
    /// to last measured session end.
    pub measured_window_s: [f64; 2],
    /// Requests (of any session) completed inside the window.
    pub completed_requests: u64,
    /// Their body bytes.
    pub completed_bytes: u64,
    /// `completed_bytes / window length`.
    pub throughput_bytes_per_s: f64,
    /// The same in Mbit/s.
    pub throughput_mbit_per_s: f64,
    /// Response time (send to last byte) of measured sessions' requests, ms.
    pub response_time_ms: Summary,
    /// Time to first byte, ms.
    pub ttfb_ms: Summary,
    /// From the scheduled send time to the last byte, ms (no coordinated omission).
    pub latency_from_schedule_ms: Summary,
    /// Start-up delay of measured sessions, s.
    pub startup_delay_s: Summary,
    /// Measured sessions with a stall.
    pub stalled_sessions: u64,
    /// Stalls in measured sessions.
    pub stalls: u64,
    /// Total stall time, s.
    pub stall_time_s: f64,
    /// The same figures per client class.
    pub classes: BTreeMap<String, ClassResults>,
    /// Failed requests by type (each failed session counts its first error).
    pub errors: BTreeMap<String, u64>,
    /// Persistent connections the server closed while idle, reopened.
    pub reconnects: u64,
    /// Responses after which the server closed the connection.
    pub server_closes: u64,
    /// Generator health.
    pub health: Health,
    /// Width of the interval series, s.
    pub interval_s: f64,
    /// Per-interval series.
    pub intervals: Vec<Interval>,
    /// The figures that judge a pacing server (absent from older files).
    #[serde(default)]
    pub delivery: Delivery,
    /// The shard of a split run this process ran (`--shard I/N`; absent
    /// otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<ShardRecord>,
    /// How a merged run was put together (`vodlab merge`; absent otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merge: Option<MergeInfo>,
    /// The protocol of the run (`h1` in files from before HTTP/2 and TLS).
    #[serde(default)]
    pub protocol: crate::io::transport::Protocol,
    /// Connections opened and TLS handshakes (zeros in older files).
    #[serde(default)]
    pub transport: TransportResults,
    /// Closed-loop players' QoE (`vodlab run --player`; absent otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub players: Option<crate::player_run::PlayersResults>,
}

/// What `results.json` says about the shard a process ran.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShardRecord {
    /// This process's index.
    pub index: u32,
    /// Processes in all.
    pub count: u32,
    /// The split rule ([`SPLIT_RULE`](crate::out::shard::SPLIT_RULE)).
    pub rule: String,
    /// Wall-clock time of the run's origin (offset 0 of every schedule),
    /// Unix seconds: `--start-at` when given.
    pub origin_unix_s: f64,
    /// Wall-clock time the process actually began its schedule, Unix seconds.
    pub actual_start_unix_s: f64,
}

/// One shard's line in a merged run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShardStart {
    /// Index (none: a run without `--shard`).
    pub index: Option<u32>,
    /// Directory.
    pub dir: String,
    /// Offset 0 of its schedule, Unix seconds.
    pub origin_unix_s: f64,
    /// When it actually began, Unix seconds.
    pub actual_start_unix_s: f64,
    /// Why it stopped.
    pub stopped_by: StopReason,
    /// Its own verdicts.
    pub complete: bool,
    /// Its own verdicts.
    pub valid: bool,
}

/// What `vodlab merge` adds to a merged `results.json`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct MergeInfo {
    /// Shards the run was split into.
    pub shards: u32,
    /// Indices of the shards merged.
    pub merged: Vec<u32>,
    /// Indices of the shards with no results (dead or never run).
    pub missing: Vec<u32>,
    /// Directories given that held no results.
    pub missing_dirs: Vec<String>,
    /// Why the merged run is incomplete, shard by shard.
    pub incomplete_reasons: Vec<String>,
    /// Shards that were invalid on their own, with their reasons.
    pub invalid_shards: Vec<String>,
    /// Largest minus smallest actual start, s.
    pub start_skew_s: f64,
    /// Largest minus smallest origin (schedule offset 0), s: 0 with
    /// `--start-at`; otherwise the series are aligned to the nearest bin.
    pub origin_skew_s: f64,
    /// Each shard merged.
    pub starts: Vec<ShardStart>,
}

/// The connections a run opened and their TLS handshakes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TransportResults {
    /// TCP connections opened (with HTTP/2 a session's logical connections
    /// share one: streams are not counted).
    pub connections: u64,
    /// TLS handshakes completed.
    pub tls_handshakes: u64,
    /// Of those, resumed from a session ticket of the same viewer.
    pub tls_resumed: u64,
    /// Handshake time (TCP connect excluded), ms.
    pub tls_handshake_ms: Summary,
    /// QUIC's own figures per connection (`--protocol h3` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quic: Option<crate::out::quic::QuicResults>,
    /// The in-process QUIC link's counts (`--protocol h3` with a link:
    /// a class rate or delay, `--link-loss` or `--link-jitter`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quic_link: Option<crate::out::quic_link::QuicLinkResults>,
}

impl TransportResults {
    /// From a run's metrics.
    pub fn of(t: &crate::out::metrics::TransportMetrics) -> Self {
        Self {
            connections: t.connections,
            tls_handshakes: t.tls_handshakes,
            tls_resumed: t.tls_resumed,
            tls_handshake_ms: Summary::of(&t.tls_handshake, 1e3),
            quic: crate::out::quic::QuicResults::of(&t.quic),
            quic_link: crate::out::quic_link::QuicLinkResults::of(&t.quic_link),
        }
    }
}

/// Peak resident memory of this process, MiB (0 when unknown).
pub fn peak_rss_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

/// What a run was, apart from its measurements.
#[derive(Debug, Clone)]
pub struct RunInfo {
    /// Target URL.
    pub target: String,
    /// Workload name.
    pub workload: String,
    /// Arrival process.
    pub arrivals: Arrivals,
    /// Seed of the arrival schedule.
    pub seed: u64,
    /// Link emulation on.
    pub shaping: bool,
    /// With link emulation off: the rate the network lab's kernel shapes
    /// each connection to (`vodlab lab run --flow-down`, seen in
    /// `VODLAB_LAB_FLOW_DOWN`), if any.
    pub kernel_shaping: Option<String>,
    /// Pacing on.
    pub pacing: bool,
    /// Width of the interval series, s.
    pub interval_s: f64,
    /// A start or send later than this is late.
    pub late_threshold: Duration,
    /// Sessions the run was to start.
    pub scheduled_sessions: u64,
    /// Sessions started.
    pub started_sessions: u64,
    /// Wall-clock start, Unix seconds.
    pub started_unix: f64,
    /// Run length, s.
    pub duration_s: f64,
    /// Why the run ended.
    pub stopped_by: StopReason,
    /// Client buffer `B` of the playback latency, s.
    pub playback_buffer_s: f64,
    /// Paced target as a multiple of the bit rate.
    pub pace_target: f64,
}

/// What the run's monitor sampled: per interval, the most active sessions
/// and the client's CPU.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Monitor {
    /// Most active sessions per interval.
    pub active_peak: Vec<u64>,
    /// Highest client CPU per interval, percent of one core.
    pub cpu_pct: Vec<f64>,
    /// Most active sessions at any sample.
    pub peak_active: u64,
    /// CPU cores of the client (none: this process's).
    pub cpus: Option<usize>,
    /// Peak resident memory of the client, MiB (none: this process's).
    pub peak_rss_mb: Option<f64>,
}

impl Monitor {
    /// One sample: `active` sessions at most and `cpu_pct` of the client's
    /// CPU over the window `(from_s, to_s]` since the previous sample
    /// (seconds from the run's start), taken every `tick_s` into intervals
    /// of `interval_s` (`tick_s` ≤ `interval_s`). The window counts in
    /// every interval from the one holding `from_s` to the one holding
    /// `to_s − tick_s / 2` (a sample taken a little after an interval's end
    /// belongs to that interval), or `to_s` itself for the `last` sample.
    /// Consecutive windows therefore leave no interval out, however the
    /// samples drift: each starts in the interval where the previous one
    /// ended or the one after it.
    #[allow(clippy::too_many_arguments)]
    pub fn sample(
        &mut self,
        from_s: f64,
        to_s: f64,
        tick_s: f64,
        interval_s: f64,
        active: u64,
        cpu_pct: f64,
        last: bool,
    ) {
        let idx = |t: f64| (t.max(0.0) / interval_s) as usize;
        let first = idx(from_s);
        let end = if last { to_s } else { to_s - tick_s / 2.0 };
        let upto = idx(end).max(first);
        if self.active_peak.len() <= upto {
            self.active_peak.resize(upto + 1, 0);
            self.cpu_pct.resize(upto + 1, 0.0);
        }
        for i in first..=upto {
            self.active_peak[i] = self.active_peak[i].max(active);
            self.cpu_pct[i] = self.cpu_pct[i].max(cpu_pct);
        }
        self.peak_active = self.peak_active.max(active);
    }
}

/// Who shaped a run's access links.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ShapingMode {
    /// `vodlab run`'s own link emulation (token buckets per session, from
    /// the client classes): HTTP/1.1 bodies read in batches of up to
    /// 500 ms of the link, other protocols chunk by chunk.
    InProcess,
    /// `--no-shaping` inside the network lab's per-connection htb classes
    /// (`vodlab lab run --flow-down`): the client does not shape; it reads
    /// HTTP/1.1 bodies in batches of up to 500 ms of the lab's rate that the
    /// kernel gathers (`SO_RCVLOWAT`), other protocols as bytes arrive.
    Kernel,
    /// No shaping that vodlab knows of (`--no-shaping` outside the lab).
    Off,
}

impl ShapingMode {
    /// The mode of a run with link emulation on or off, in a lab that
    /// shapes each connection or not.
    pub fn of(emulated: bool, kernel: bool) -> Self {
        match (emulated, kernel) {
            (true, _) => Self::InProcess,
            (false, true) => Self::Kernel,
            (false, false) => Self::Off,
        }
    }
}

/// A `results.json` of a run that measured nothing: the shape every run's
/// results have (`players`, `shard` and `merge` are absent), for checking
/// `--fail-on` rules before a run, with the client classes given.
pub fn shape(classes: &[String]) -> serde_json::Value {
    let info = RunInfo {
        target: String::new(),
        workload: String::new(),
        arrivals: Arrivals::Constant { rate: 1.0 },
        seed: 0,
        shaping: false,
        kernel_shaping: None,
        pacing: false,
        interval_s: 1.0,
        late_threshold: Duration::ZERO,
        scheduled_sessions: 0,
        started_sessions: 0,
        started_unix: 0.0,
        duration_s: 0.0,
        stopped_by: StopReason::Finished,
        playback_buffer_s: 4.0,
        pace_target: 1.0,
    };
    let mut metrics = RunMetrics::new(0);
    for c in classes {
        metrics.classes.insert(c.clone(), Default::default());
    }
    let r = assemble(&info, &metrics, &Monitor::default());
    serde_json::to_value(r).unwrap_or_default()
}

/// Builds `results.json` from a run's merged metrics.
pub fn assemble(info: &RunInfo, sh: &RunMetrics, mon: &Monitor) -> Results {
    let duration_s = info.duration_s;
    let reason = info.stopped_by;
    let mut overall = ClassMetrics::default();
    for m in sh.classes.values() {
        overall.merge(m);
    }
    let (from, to) = match (sh.measured_from, sh.measured_to) {
        (Some(a), Some(b)) if b > a => (a, b),
        _ => (0.0, duration_s.max(1e-3)),
    };
    // count the completions of every bin the window touches (so none inside it is
    // lost to the 100 ms binning) and divide by the exact window length
    let w = sh.bins.width_s;
    let (req, bytes) = sh
        .bins
        .completed_between((from / w).floor() * w, (to / w).ceil() * w);
    let window = (to - from).max(1e-3);
    let tput = bytes / window;
    let cpus = mon
        .cpus
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let max_cpu = mon.cpu_pct.iter().copied().fold(0.0, f64::max);
    let health = Health {
        late_threshold_ms: info.late_threshold.as_secs_f64() * 1e3,
        late_session_starts: sh.late_starts,
        late_request_sends: sh.late_sends,
        start_lateness_ms: Summary::of(&sh.start_lateness, 1e3),
        send_lateness_ms: Summary::of(&sh.send_lateness, 1e3),
        max_cpu_pct: max_cpu,
        cpus,
        descriptor_errors: sh.errors.get(ErrorKind::Descriptors),
        port_errors: sh.errors.get(ErrorKind::Ports),
        peak_active_sessions: mon.peak_active,
        peak_rss_mb: mon.peak_rss_mb.unwrap_or_else(peak_rss_mb),
    };
    let mut invalid = Vec::new();
    let starts = sh.start_lateness.len().max(1);
    let sends = sh.send_lateness.len().max(1);
    if sh.late_starts * 100 > starts {
        invalid.push(format!(
            "{} of {} session starts were more than {} ms behind schedule",
            sh.late_starts, starts, health.late_threshold_ms
        ));
    }
    if sh.late_sends * 100 > sends {
        invalid.push(format!(
            "{} of {} request sends were more than {} ms behind their pacing",
            sh.late_sends, sends, health.late_threshold_ms
        ));
    }
    if health.descriptor_errors > 0 {
        invalid.push(format!(
            "the client ran out of file descriptors {} times (EMFILE: more connections than this process may hold, its RLIMIT_NOFILE); spread the sessions over processes with --client-processes N (or --shard), each under the limit",
            health.descriptor_errors
        ));
    }
    if health.port_errors > 0 {
        invalid.push(format!(
            "the client ran out of local ports {} times (widen net.ipv4.ip_local_port_range or use more client addresses)",
            health.port_errors
        ));
    }
    if max_cpu >= 95.0 * cpus as f64 {
        invalid.push(format!(
            "the client saturated its CPU ({max_cpu:.0} % of {cpus} core(s)): it may have delayed requests"
        ));
    }
    if overall.sessions == 0 {
        invalid.push(match reason {
            StopReason::Finished => {
                "no session was measured: every session fell in a ramp-up or ramp-down".into()
            }
            r => format!(
                "no measured session ended before the run stopped ({})",
                r.describe()
            ),
        });
    }
    let width = info.interval_s;
    let per = (width / sh.bins.width_s).round().max(1.0) as usize;
    let n_int = sh.bins.bins.len().div_ceil(per).max(mon.active_peak.len());
    let intervals = (0..n_int)
        .map(|i| {
            let chunk = sh.bins.bins.iter().skip(i * per).take(per);
            let (mut r, mut b, mut st, mut c, mut f) = (0, 0, 0, 0, 0);
            for x in chunk {
                r += x.completed_requests;
                b += x.completed_bytes;
                st += x.started;
                c += x.completed;
                f += x.failed;
            }
            Interval {
                t_s: i as f64 * width,
                throughput_bytes_per_s: b as f64 / width,
                completed_requests: r,
                active_sessions: mon.active_peak.get(i).copied().unwrap_or(0),
                started: st,
                completed: c,
                failed: f,
                cpu_pct: mon.cpu_pct.get(i).copied().unwrap_or(0.0),
            }
        })
        .collect();
    let o = ClassResults::of(&overall);
    let delivery = delivery(sh, &overall, info.playback_buffer_s, info.pace_target);
    Results {
        format: "vodlab-results".into(),
        version: 1,
        complete: reason == StopReason::Finished,
        valid: invalid.is_empty(),
        invalid_reasons: invalid,
        stopped_by: reason,
        target: info.target.clone(),
        workload: info.workload.clone(),
        arrivals: info.arrivals.clone(),
        seed: info.seed,
        shaping: info.shaping,
        shaping_mode: Some(ShapingMode::of(info.shaping, info.kernel_shaping.is_some())),
        kernel_shaping_rate: if info.shaping {
            None
        } else {
            info.kernel_shaping.clone()
        },
        pacing: info.pacing,
        started_at_unix_s: info.started_unix,
        duration_s,
        scheduled_sessions: info.scheduled_sessions,
        started_sessions: info.started_sessions,
        measured_sessions: o.measured_sessions,
        failed_sessions: o.failed_sessions,
        failed_sessions_pct: o.failed_sessions_pct,
        skipped_requests: sh.skipped_requests,
        measured_window_s: [from, to],
        completed_requests: req.round() as u64,
        completed_bytes: bytes.round() as u64,
        throughput_bytes_per_s: tput,
        throughput_mbit_per_s: tput * 8.0 / 1e6,
        response_time_ms: o.response_time_ms,
        ttfb_ms: o.ttfb_ms,
        latency_from_schedule_ms: o.latency_from_schedule_ms,
        startup_delay_s: o.startup_delay_s,
        stalled_sessions: o.stalled_sessions,
        stalls: o.stalls,
        stall_time_s: o.stall_time_s,
        classes: sh
            .classes
            .iter()
            .map(|(k, m)| (k.clone(), ClassResults::of(m)))
            .collect(),
        errors: ErrorKind::ALL
            .iter()
            .map(|k| (k.name().to_string(), sh.errors.get(*k)))
            .collect(),
        reconnects: sh.reconnects,
        server_closes: sh.server_closes,
        health,
        interval_s: width,
        intervals,
        delivery,
        shard: None,
        merge: None,
        protocol: crate::io::transport::Protocol::default(),
        players: None,
        transport: TransportResults::of(&sh.transport),
    }
}

/// Why results could not be written.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// The results could not be serialised.
    #[error("{0}")]
    Json(#[from] serde_json::Error),
    /// A file could not be written (it keeps its previous content unless
    /// the error says otherwise).
    #[error("{0}")]
    Write(#[from] crate::out::atomic::AtomicWriteError),
}

/// Writes `text` to `path` atomically ([`crate::out::atomic::write`]).
pub(crate) fn write_file(path: std::path::PathBuf, text: &str) -> Result<(), WriteError> {
    Ok(crate::out::atomic::write(&path, text.as_bytes())?)
}

impl Results {
    /// Writes `results.json` and `summary.txt` (its [`Results::table`])
    /// into `dir`.
    pub fn write(&self, dir: &std::path::Path) -> Result<(), WriteError> {
        let mut text = serde_json::to_string_pretty(self)?;
        text.push('\n');
        write_file(dir.join("results.json"), &text)?;
        write_file(dir.join("summary.txt"), &self.table())
    }

    /// A warning line for a run whose figures must not be read as an
    /// answer (incomplete, invalid, or no session succeeded); `None` for a
    /// complete, valid run. Summaries and reports put it first.
    pub fn banner(&self) -> Option<String> {
        let mut why = Vec::new();
        if !self.complete {
            why.push(format!(
                "INCOMPLETE: the run stopped early ({}); the figures cover only part of it",
                self.stopped_by.describe()
            ));
        }
        if !self.valid {
            why.push(format!(
                "INVALID: {}",
                if self.invalid_reasons.is_empty() {
                    "see invalid_reasons".to_string()
                } else {
                    self.invalid_reasons.join("; ")
                }
            ));
        }
        if self.no_session_succeeded() {
            why.push(format!(
                "NO SESSION SUCCEEDED: {} of {} failed",
                self.failed_total(),
                count(self.started_sessions, "started session")
            ));
        }
        (!why.is_empty()).then(|| format!("!! {}", why.join("\n!! ")))
    }

    /// Sessions (measured or not) that failed, from the interval series.
    pub fn failed_total(&self) -> u64 {
        self.intervals.iter().map(|i| i.failed).sum()
    }

    /// True when sessions started and none ran to its end without a
    /// failure (ramps included): the run measured nothing but failure.
    pub fn no_session_succeeded(&self) -> bool {
        let completed: u64 = self.intervals.iter().map(|i| i.completed).sum();
        self.started_sessions > 0 && completed == 0 && self.failed_total() > 0
    }

    /// A human-readable summary table.
    pub fn table(&self) -> String {
        let mut s = String::new();
        if let Some(b) = self.banner() {
            let _ = writeln!(s, "{b}");
        }
        let state = match (self.complete, self.valid) {
            (true, true) => "complete, valid".to_string(),
            (c, v) => format!(
                "{}, {}",
                if c { "complete" } else { "INCOMPLETE" },
                if v { "valid" } else { "INVALID" }
            ),
        };
        let _ = writeln!(
            s,
            "run against {} ({state}; stopped: {})",
            self.target,
            self.stopped_by.describe()
        );
        for r in &self.invalid_reasons {
            let _ = writeln!(s, "  invalid: {r}");
        }
        if let Some(sh) = &self.shard {
            let _ = writeln!(
                s,
                "  shard {}/{} of a split run (origin {:.3}, began {:+.1} ms after it)",
                sh.index,
                sh.count,
                sh.origin_unix_s,
                (sh.actual_start_unix_s - sh.origin_unix_s) * 1e3
            );
        }
        if let Some(m) = &self.merge {
            let _ = writeln!(
                s,
                "  merged {} of {} shard(s); start skew {:.1} ms",
                m.merged.len().max(m.starts.len()),
                m.shards,
                m.start_skew_s * 1e3
            );
            for r in &m.incomplete_reasons {
                let _ = writeln!(s, "  incomplete: {r}");
            }
        }
        let _ = writeln!(
            s,
            "  sessions: {} started, {} measured, {} failed ({:.2} %), {} skipped",
            self.started_sessions,
            self.measured_sessions,
            self.failed_sessions,
            self.failed_sessions_pct,
            count(self.skipped_requests, "request")
        );
        let _ = writeln!(
            s,
            "  throughput: {:.2} MiB/s ({:.1} Mbit/s) over {:.1}-{:.1} s, {}, {}",
            self.throughput_bytes_per_s / 1048576.0,
            self.throughput_mbit_per_s,
            self.measured_window_s[0],
            self.measured_window_s[1],
            count(self.completed_requests, "request"),
            count(self.completed_bytes, "byte")
        );
        let row = |s: &mut String, name: &str, m: &Summary| {
            let _ = writeln!(
                s,
                "  {name:<26} p25 {:>9.2}  p50 {:>9.2}  p75 {:>9.2}  p99 {:>9.2}  max {:>9.2}  IQR {:>9.2}",
                m.p25, m.p50, m.p75, m.p99, m.max, m.iqr
            );
        };
        row(&mut s, "response time (ms)", &self.response_time_ms);
        row(&mut s, "time to first byte (ms)", &self.ttfb_ms);
        row(
            &mut s,
            "latency from schedule (ms)",
            &self.latency_from_schedule_ms,
        );
        row(&mut s, "start-up delay (s)", &self.startup_delay_s);
        let d = &self.delivery;
        if d.playback_latency_s.count > 0 || d.rate_windows > 0 {
            row(&mut s, "playback latency (s)", &d.playback_latency_s);
            row(&mut s, "download time (s)", &d.download_time_s);
            let _ = writeln!(
                s,
                "  pacing: {} windows of {:.0} ms, {:.1} % within ±5 % of {}× the bit rate; deviation p5 {:+.3} p50 {:+.3} p95 {:+.3}",
                d.rate_windows,
                d.rate_window_s * 1e3,
                d.rate_windows_within_5pct_pct,
                d.pace_target,
                d.rate_deviation.p5,
                d.rate_deviation.p50,
                d.rate_deviation.p95
            );
        }
        let _ = writeln!(
            s,
            "  stalls: {} in {}, {:.1} s in all",
            self.stalls,
            count(self.stalled_sessions, "session"),
            self.stall_time_s
        );
        for (name, c) in &self.classes {
            let _ = writeln!(
                s,
                "  class {name:<12} {}, {} failed, response p50 {:.1} ms p99 {:.1} ms, {}",
                count(c.measured_sessions, "session"),
                c.failed_sessions,
                c.response_time_ms.p50,
                c.response_time_ms.p99,
                count(c.stalls, "stall")
            );
        }
        let errs: Vec<String> = self
            .errors
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(k, n)| format!("{} {n}", crate::core::exchange::ErrorKind::describe_name(k)))
            .collect();
        let _ = writeln!(
            s,
            "  errors: {}; reconnects {}",
            if errs.is_empty() {
                "none".into()
            } else {
                errs.join(", ")
            },
            self.reconnects
        );
        let t = &self.transport;
        let _ = write!(
            s,
            "  protocol {}: {} connections",
            self.protocol, t.connections
        );
        if t.tls_handshakes > 0 {
            let _ = write!(
                s,
                ", {} TLS handshakes ({} resumed), handshake median {:.2} ms p99 {:.2} ms",
                t.tls_handshakes, t.tls_resumed, t.tls_handshake_ms.p50, t.tls_handshake_ms.p99
            );
        }
        s.push('\n');
        if let Some(q) = &t.quic {
            let _ = writeln!(
                s,
                "  QUIC: {} packets sent, {} lost ({} bytes, {} of {} connections), {} congestion events; RTT median {:.2} ms, cwnd median {:.0} bytes",
                q.packets_sent,
                q.packets_lost,
                q.lost_bytes,
                q.connections_with_loss,
                q.connections,
                q.congestion_events,
                q.rtt_ms.p50,
                q.cwnd_bytes.p50
            );
            if q.zero_rtt_attempted > 0 {
                let _ = writeln!(
                    s,
                    "  QUIC 0-RTT: sent on {} of {} connections, accepted on {}",
                    q.zero_rtt_attempted, q.connections, q.zero_rtt_accepted
                );
            }
        }
        if let Some(l) = &t.quic_link {
            let _ = writeln!(
                s,
                "  QUIC link: down {} datagrams passed, {} lost, {} queue-dropped; up {} passed, {} lost, {} queue-dropped ({} sessions)",
                l.down.passed_datagrams,
                l.down.lost_datagrams,
                l.down.queue_dropped_datagrams,
                l.up.passed_datagrams,
                l.up.lost_datagrams,
                l.up.queue_dropped_datagrams,
                l.links
            );
        }
        let h = &self.health;
        let _ = writeln!(
            s,
            "  client: start lateness p99 {:.2} ms, send lateness p99 {:.2} ms, CPU max {:.0} % of {}, peak {} at once, {:.0} MiB RSS",
            h.start_lateness_ms.p99,
            h.send_lateness_ms.p99,
            h.max_cpu_pct,
            count(h.cpus as u64, "core"),
            count(h.peak_active_sessions, "session"),
            h.peak_rss_mb
        );
        if let Some(p) = &self.players {
            s.push_str(&p.table());
        }
        s
    }
}

#[cfg(test)]
mod monitor_tests {
    use super::Monitor;

    /// Samples every `step` seconds from 0 to `until`, the n-th with `active(n)`.
    fn run(
        step: f64,
        tick: f64,
        interval: f64,
        until: f64,
        active: impl Fn(usize) -> u64,
    ) -> Monitor {
        let mut m = Monitor::default();
        let (mut from, mut n) = (0.0, 1);
        while from < until {
            let to = (n as f64 * step).min(until);
            m.sample(from, to, tick, interval, active(n), 1.0, to >= until);
            from = to;
            n += 1;
        }
        m
    }

    #[test]
    fn drifting_samples_leave_no_interval_empty() {
        // a sleep-driven monitor drifts by 1-70 ms a tick: the filing of
        // the old rule (the interval holding the sample's time) skipped one
        for drift in [0.001, 0.013, 0.07] {
            let m = run(1.0 + drift, 1.0, 1.0, 40.0, |_| 3);
            // (the last sample, at 40.0 s, opens interval 40 too)
            assert!(m.active_peak.len() >= 40, "drift {drift}");
            assert!(
                m.active_peak[..40].iter().all(|&a| a == 3),
                "drift {drift}: {:?}",
                m.active_peak
            );
        }
    }

    #[test]
    fn a_sample_on_the_grid_counts_in_the_interval_it_closes() {
        // the n-th sample, 2 ms after n s, saw n sessions: interval n-1's
        let mut m = Monitor::default();
        let mut from = 0.0;
        for n in 1..=10u64 {
            let to = n as f64 + 0.002;
            m.sample(from, to, 1.0, 1.0, n, n as f64, false);
            from = to;
        }
        // window n, (n − 1 + 0.002, n + 0.002], lies in interval n − 1
        // but for 2 ms: it counts there alone
        assert_eq!(m.active_peak[..10], [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
        assert_eq!(m.peak_active, 10);
    }

    #[test]
    fn a_missed_tick_fills_both_intervals_and_longer_intervals_take_the_max() {
        let mut m = Monitor::default();
        m.sample(0.0, 1.0, 1.0, 1.0, 4, 10.0, false);
        // the monitor was late: one window over two ticks
        m.sample(1.0, 3.0, 1.0, 1.0, 7, 20.0, false);
        assert_eq!(m.active_peak, vec![4, 7, 7]);
        assert_eq!(m.cpu_pct, vec![10.0, 20.0, 20.0]);
        // 5 s intervals sampled every second
        let m = run(1.0, 1.0, 5.0, 12.0, |n| n as u64);
        assert_eq!(m.active_peak, vec![5, 10, 12]);
    }
}
