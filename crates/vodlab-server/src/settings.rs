//! The settings of `vodlab serve` (its flags, deriving clap's `Args` with
//! the `cli` feature) and their conversion into a checked [`Config`]:
//! [`ServeArgs::config`]. [`crate::config`] stays a leaf of values; this
//! module reads flags' words (durations, sizes, policies, the
//! time-compression variable) into it.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use thiserror::Error;

#[cfg(feature = "cli")]
use crate::config::defaults;
use crate::config::{ConfigError, PaceDriver};
use crate::{Config, IoMode, PaceMode, PolicySpec};

mod proto;
pub use proto::ProtoArgs;

/// Why the flags of `vodlab serve` give no configuration.
#[derive(Debug, Error)]
pub enum SettingsError {
    /// A size flag does not fit the 32 bits its setting has.
    #[error("--{name} {value}: too large")]
    TooLarge {
        /// The flag, without `--`.
        name: &'static str,
        /// The value given.
        value: u64,
        /// The conversion's error.
        #[source]
        source: std::num::TryFromIntError,
    },
    /// A duration flag is no duration (negative, not finite).
    #[error("--{name} {value}: not a duration")]
    NotADuration {
        /// The flag, without `--`.
        name: &'static str,
        /// The value given.
        value: f64,
        /// The conversion's error.
        #[source]
        source: std::time::TryFromFloatSecsError,
    },
    /// `--bitrate-scale` with a policy that has no reference bit rate.
    #[error("--bitrate-scale needs a reference bit rate in the policy (e.g. --prefetch-policy fixed:6M,ref=2095 or auto:ref=2095)")]
    BitrateScaleNeedsRef,
    /// `--bitrate-scale` out of its range.
    #[error("--bitrate-scale {factor}: {why}")]
    BitrateScale {
        /// The factor given.
        factor: f64,
        /// Why it was refused.
        why: String,
    },
    /// The configuration is invalid (the text names the setting).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The time-compression factor is out of range.
    #[error(transparent)]
    TimeCompression(#[from] vodlab_workload::TimeCompressionSettingError),
    /// `--prefetch-events` with `--io vanilla`.
    #[error("--prefetch-events needs --io asap (vanilla never prefetches)")]
    PrefetchEventsNeedAsap,
    /// `--prefetch-next-object` with `--io vanilla`.
    #[error("--prefetch-next-object needs --io asap (vanilla never prefetches)")]
    NextObjectNeedsAsap,
    /// `--prefetch-log` with a policy other than `auto`.
    #[error("--prefetch-log needs --prefetch-policy auto[:...]")]
    PrefetchLogNeedsAuto,
}

/// Arguments of `vodlab serve`. Every default is the server's
/// (`crate::config::defaults`).
#[derive(Debug)]
#[cfg_attr(feature = "cli", derive(clap::Args))]
pub struct ServeArgs {
    /// Directory to serve (e.g. a `vodlab fileset create` root). It may be
    /// replaced while the server runs (re-created, renamed over, a symlink
    /// retargeted): the new tree is served within 100 ms, without a restart.
    #[cfg_attr(feature = "cli", arg(long, value_name = "DIR"))]
    pub root: PathBuf,
    /// Address to listen on.
    #[cfg_attr(
        feature = "cli",
        arg(long, default_value = "127.0.0.1:8080", value_name = "ADDR:PORT")
    )]
    pub listen: SocketAddr,
    /// I/O mode: `vanilla` sendfile (page-cache reads on a thread pool, like
    /// nginx with aio threads) or `asap` (probe the page cache; on a miss
    /// prefetch serially per device, then sendfile).
    #[cfg_attr(feature = "cli", arg(long, value_enum, default_value_t = Io::from(Config::default().io)))]
    pub io: Io,
    /// ASAP prefetch controller: `fixed:SIZE` (a size as everywhere,
    /// docs/units.md: fixed:4M = 4 MiB, fixed:4MB = 4×10^6 bytes), `fixed:SIZE,ref=KBPS` (square-root sizes
    /// around the bit rate KBPS), `auto[:key=value,...]` (thesis ch. 4's
    /// automatic size), or `first-grow:MAX` / `first-grow-sr:MAX` (thesis
    /// ch. 5's chain-aware sizes). See docs/serve.md.
    #[cfg_attr(feature = "cli", arg(long, value_name = "POLICY", default_value_t = PolicySpec::default(), value_parser = parse_policy))]
    pub prefetch_policy: PolicySpec,
    /// Alias of `--prefetch-policy fixed:SIZE` (kept for older scripts).
    #[cfg_attr(feature = "cli", arg(long, value_name = "SIZE", conflicts_with = "prefetch_policy", value_parser = parse_fixed))]
    pub prefetch: Option<PolicySpec>,
    /// SD-to-HD prefetch factor F (0 < F <= 1): the policy's `ref=KBPS`
    /// rate gets its size, the rate KBPS/5 (the thesis's SD) F times that,
    /// other rates log-linear in between; same as the policy key `scale=F`
    /// (`low=` sets another low rate). Needs `ref=` in the policy.
    #[cfg_attr(feature = "cli", arg(long, value_name = "F"))]
    pub bitrate_scale: Option<f64>,
    /// With `--prefetch-policy auto`: write each adjust interval as a CSV
    /// row to this file (header first, flushed per row; columns in
    /// docs/serve.md).
    #[cfg_attr(feature = "cli", arg(long, value_name = "FILE.csv"))]
    pub prefetch_log: Option<PathBuf>,
    /// Largest prefetch one connection may have queued or in progress (a
    /// size: 16M, 4MB, 4194304); a longer range is read window by window.
    #[cfg_attr(feature = "cli", arg(long, value_name = "SIZE", default_value_t = defaults::MAX_PREFETCH, value_parser = vodlab_units::parse_size))]
    pub max_prefetch: u64,
    /// Next-object prefetch (--io asap): when a request's CMCD names the
    /// next object (`nor`, a URL relative to the request's; `nrr` its byte
    /// range), read that object's first SIZE bytes (default 4M; or its
    /// `nrr` range, at most SIZE) into the page cache on the device's
    /// helper, unless resident, before the player asks for it. Composes with
    /// any --prefetch-policy (which sizes the current object's prefetch);
    /// counted as `next_object_prefetches` in the statistics
    /// (docs/serve.md). `--prefetch-next-object=SIZE` sets the size.
    #[cfg_attr(feature = "cli", arg(long, value_name = "SIZE", num_args = 0..=1, require_equals = true, default_missing_value = "4M", value_parser = vodlab_units::parse_size))]
    pub prefetch_next_object: Option<u64>,
    /// Prefetch helper threads per storage device (1 = serialized, as in the thesis).
    #[cfg_attr(feature = "cli", arg(long, default_value_t = defaults::HELPERS_PER_DEVICE))]
    pub helpers: usize,
    /// Append one line per request to this file (format in docs/serve.md).
    #[cfg_attr(feature = "cli", arg(long, value_name = "FILE"))]
    pub access_log: Option<PathBuf>,
    /// Write every input of the prefetch controller to this file, one JSON
    /// line each (ranges decided with the page cache's answers, reads
    /// completed, ticks, connections ended; docs/prefetch-events.md), for
    /// `vodlab simulate --replay-events` to replay decision for decision.
    /// --io asap only.
    #[cfg_attr(feature = "cli", arg(long, value_name = "FILE"))]
    pub prefetch_events: Option<PathBuf>,
    /// Idle keep-alive timeout (a duration: 500ms, 1m; a bare number is
    /// seconds).
    #[cfg_attr(feature = "cli", arg(long, value_name = "DURATION", default_value_t = defaults::IDLE_TIMEOUT.as_secs_f64(), value_parser = vodlab_units::parse_seconds))]
    pub keepalive: f64,
    /// Time allowed for a complete request head (slowloris guard; a bare
    /// number is seconds).
    #[cfg_attr(feature = "cli", arg(long, value_name = "DURATION", default_value_t = defaults::HEADER_TIMEOUT.as_secs_f64(), value_parser = vodlab_units::parse_seconds))]
    pub header_timeout: f64,
    /// How long a response may make no progress (the client reads nothing)
    /// before the connection is closed (a bare number is seconds); a slow
    /// but reading client is never cut (see docs/serve.md).
    #[cfg_attr(feature = "cli", arg(long, value_name = "DURATION", default_value_t = defaults::SEND_TIMEOUT.as_secs_f64(), value_parser = vodlab_units::parse_seconds))]
    pub send_timeout: f64,
    /// Unsent bytes a response may queue in the kernel per connection
    /// (TCP_NOTSENT_LOWAT; a size; 0 = kernel default, up to
    /// the whole send buffer, 4 MiB on loopback). Bounds the kernel memory a
    /// slow reader pins; see docs/serve.md for the trade-off.
    #[cfg_attr(feature = "cli", arg(long, value_name = "SIZE", default_value_t = defaults::NOTSENT_LOWAT, value_parser = vodlab_units::parse_size))]
    pub notsent_lowat: u64,
    /// Most the low-water mark is raised to for a connection whose peer
    /// reads fast: what its measured read rate drains in 4 ms, between
    /// --notsent-lowat and this (a size; at or below --notsent-lowat the
    /// mark stays fixed). See docs/serve.md.
    #[cfg_attr(feature = "cli", arg(long, value_name = "SIZE", default_value_t = defaults::NOTSENT_LOWAT_MAX, value_parser = vodlab_units::parse_size))]
    pub notsent_lowat_max: u64,
    /// Most simultaneous connections; at the cap the connection waiting
    /// longest for a request head is shed for a new one.
    #[cfg_attr(feature = "cli", arg(long, default_value_t = defaults::MAX_CONNECTIONS))]
    pub max_connections: usize,
    /// Time between statistics lines on stderr (0 = none; a bare number
    /// is seconds).
    #[cfg_attr(feature = "cli", arg(long, value_name = "DURATION", default_value_t = defaults::STATS_INTERVAL.as_secs_f64(), value_parser = vodlab_units::parse_seconds))]
    pub stats_interval: f64,
    /// Worker threads (default: one per core).
    #[cfg_attr(feature = "cli", arg(long))]
    pub threads: Option<usize>,
    /// Run N server processes (workers) sharing --listen with SO_REUSEPORT,
    /// each with its own runtime and descriptor limit, so together they hold
    /// more connections than one process may (docs/serve.md, "Workers").
    /// The parent starts them, forwards SIGINT/SIGTERM, restarts a worker
    /// that dies (reporting it) and writes their merged statistics to
    /// --stats-file (default: workers.json in --workers-dir).
    #[cfg_attr(feature = "cli", arg(long, value_name = "N"))]
    pub workers: Option<u32>,
    /// Where the workers write their statistics (worker-I.json) and their
    /// parent the merged ones (workers.json). Default: a new directory
    /// under the system's temporary directory, named on stderr.
    #[cfg_attr(feature = "cli", arg(long, value_name = "DIR", requires = "workers"))]
    pub workers_dir: Option<PathBuf>,
    /// Set SO_REUSEPORT on the listening socket, so other processes
    /// listening with it share the address (--workers sets it on each
    /// worker).
    #[cfg_attr(feature = "cli", arg(long))]
    pub reuse_port: bool,
    /// Write the statistics (the JSON of /vodlab/stats) to FILE every
    /// second, replaced atomically; with --workers, their merged statistics.
    #[cfg_attr(feature = "cli", arg(long, value_name = "FILE"))]
    pub stats_file: Option<PathBuf>,
    /// Pace each response at K × its bit rate (0 = unpaced, the default).
    /// The bit rate comes from CMCD `br`, then --bitrates, then
    /// --default-bitrate; a response none of them rates is sent unpaced.
    #[cfg_attr(feature = "cli", arg(long, value_name = "K", default_value_t = defaults::PACE))]
    pub pace: f64,
    /// What multiple of its bit rate a paced response gets: `fixed` (K =
    /// --pace), `fixed:K` (sets K), `cmcd` (the client's CMCD `rtp` when
    /// sent, else K) or `sammy` (Sammy's rule: 3x the ladder's top bit
    /// rate, CMCD `tb`, with an empty buffer falling linearly with CMCD `bl`
    /// to 1.5x at 12 s; `sammy:EMPTY,FULL,SECONDS` sets the three). A
    /// policy other than `fixed` paces without --pace.
    #[cfg_attr(
        feature = "cli",
        arg(long, value_name = "POLICY", default_value = "fixed")
    )]
    pub pace_policy: crate::pacer::PolicyArg,
    /// How to pace: `user` (the server's pacer releases chunks at their
    /// times) or `kernel` (SO_MAX_PACING_RATE, TCP's internal pacing).
    #[cfg_attr(feature = "cli", arg(long, value_enum, default_value_t = PaceModeArg::User))]
    pub pace_mode: PaceModeArg,
    /// Initial burst of a paced response, in playing time of content (0 =
    /// none; a bare number is seconds).
    #[cfg_attr(feature = "cli", arg(long, value_name = "DURATION", default_value_t = defaults::PACE_BURST, value_parser = vodlab_units::parse_seconds))]
    pub pace_burst: f64,
    /// Link capacity bursts may use beyond the paced rates, a rate
    /// (docs/units.md): bits/s ending in `bit` (`1Gbit`, `400kbit`, powers
    /// of 1000) or bytes/s as a size (`50M` = 50 MiB/s, `100MB/s`), counted
    /// on the wire (66 B of headers per segment, as htb counts). Default:
    /// unlimited.
    #[cfg_attr(feature = "cli", arg(long, value_name = "RATE", value_parser = parse_rate))]
    pub link_capacity: Option<u64>,
    /// Fixed chunk of user-mode pacing (a size, 64 B at least); default: per session r × 2.5 ms, clamped to 64 B … 64 KiB
    /// (125 B at 400 kbit/s, for ±5 % in every 100 ms window).
    #[cfg_attr(feature = "cli", arg(long, value_name = "SIZE", value_parser = vodlab_units::parse_size))]
    pub pace_chunk: Option<u64>,
    /// Where user-mode pacing's driver runs: `thread` (a dedicated thread
    /// with a µs-precise wait, the default), `rt[:PRIO]` (that thread under
    /// SCHED_FIFO, priority 1-99, default 10; needs root or CAP_SYS_NICE,
    /// else it logs the refusal and runs at normal priority) or `task` (a
    /// tokio task on the workers, woken by tokio's 1 ms timer).
    #[cfg_attr(feature = "cli", arg(long, value_name = "DRIVER", default_value_t = PaceDriver::default(), value_parser = parse_pace_driver))]
    pub pace_driver: PaceDriver,
    /// A wake-up of the user pacer's driver also sends the chunks due up
    /// to this much later, so sessions due close together share one
    /// wake-up (a chunk leaves at most that early), 0 to 1000 µs (a bare
    /// number is µs: 250, 250us, 1ms); 0 wakes once per due time.
    #[cfg_attr(feature = "cli", arg(long, value_name = "DURATION", default_value_t = defaults::PACE_COALESCE.as_micros() as u64, value_parser = vodlab_units::parse_micros))]
    pub pace_coalesce_us: u64,
    /// TCP_MAXSEG of the listening socket: accepted connections send
    /// segments of at most this many bytes less TCP options (137 gives
    /// 125 B with timestamps), 88 to 65535. Kernel-mode pacing spaces whole
    /// segments: ±5 % per 100 ms at 400 kbit/s needs ≤ 250 B. Applies to
    /// every connection. Default: the route's MSS.
    #[cfg_attr(feature = "cli", arg(long, value_name = "BYTES"))]
    pub pace_mss: Option<u32>,
    /// Bit-rate catalog: TOML or JSON mapping paths or path prefixes to
    /// kbit/s, or a `vodlab gen` workload's catalog.json (docs/serve.md).
    #[cfg_attr(
        feature = "cli",
        arg(long, value_name = "FILE", visible_alias = "catalog")
    )]
    pub bitrates: Option<PathBuf>,
    /// Bit rate (kbit/s) of responses neither CMCD nor --bitrates rates.
    #[cfg_attr(feature = "cli", arg(long, value_name = "KBPS"))]
    pub default_bitrate: Option<f64>,
    /// Time compression k, for a load replayed k times faster (`vodlab run
    /// --time-compression K`): keep-alive and send timeouts, the controller
    /// tick, the pace burst and auto's interval and ramp / k; bit rates
    /// (--bitrates, --default-bitrate, the policy's ref=) x k; sizes
    /// unchanged (docs/serve.md). Default: $VODLAB_TIME_COMPRESSION (set by
    /// `vodlab box --time-compression`), else 1.
    #[cfg_attr(feature = "cli", arg(long, value_name = "K"))]
    pub time_compression: Option<f64>,
    /// Write CMSD (CTA-5006) on every response with a file (200, 206):
    /// `CMSD-Static` (ot, d, br, st=v) and `CMSD-Dynamic` (this server's
    /// name with etp, rd and, with --cmsd-mb, mb) (docs/cmcd.md).
    #[cfg_attr(feature = "cli", arg(long))]
    pub cmsd: bool,
    /// The server name of the CMSD-Dynamic hop (with --cmsd).
    #[cfg_attr(
        feature = "cli",
        arg(long, value_name = "NAME", default_value = crate::cmsd::DEFAULT_NAME)
    )]
    pub cmsd_name: String,
    /// CMSD-Dynamic `mb`: the maximum bit rate (kbit/s) the server suggests
    /// players request, sent on every response (with
    /// --cmsd-load-connections, only under load). Multiplied by
    /// --time-compression. Default: not sent.
    #[cfg_attr(feature = "cli", arg(long, value_name = "KBPS", requires = "cmsd"))]
    pub cmsd_mb: Option<u64>,
    /// Send --cmsd-mb only while more than N connections are open.
    #[cfg_attr(feature = "cli", arg(long, value_name = "N", requires = "cmsd_mb"))]
    pub cmsd_load_connections: Option<u64>,
    /// TLS and HTTP/2 (docs/serve.md).
    #[cfg_attr(feature = "cli", command(flatten))]
    pub proto: ProtoArgs,
}

/// `--pace-driver`: `thread`, `rt[:PRIO]` or `task`.
pub fn parse_pace_driver(s: &str) -> Result<PaceDriver, String> {
    s.parse()
}

/// Pacing mechanisms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
pub enum PaceModeArg {
    /// The server's pacer.
    User,
    /// SO_MAX_PACING_RATE on the socket.
    Kernel,
}

impl From<PaceModeArg> for PaceMode {
    fn from(m: PaceModeArg) -> Self {
        match m {
            PaceModeArg::User => PaceMode::User,
            PaceModeArg::Kernel => PaceMode::Kernel,
        }
    }
}

/// A rate in bytes/s ([`vodlab_units::parse_rate`]: `400kbit`, `1Gbit`,
/// `50M` = 50 MiB/s, `100MB/s`); at least 1 B/s.
pub fn parse_rate(s: &str) -> Result<u64, String> {
    let r = vodlab_units::parse_rate(s).map_err(|e| e.to_string())?;
    match r.bytes_per_s() {
        0 => Err(format!("`{}`: a rate of at least 1 byte/s", s.trim())),
        b => Ok(b),
    }
}

/// I/O modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
pub enum Io {
    /// sendfile on the blocking pool.
    Vanilla,
    /// Asynchronous serialized aggressive prefetching.
    Asap,
}

impl From<IoMode> for Io {
    fn from(m: IoMode) -> Self {
        match m {
            IoMode::Vanilla => Io::Vanilla,
            IoMode::Asap => Io::Asap,
        }
    }
}

impl From<Io> for IoMode {
    fn from(m: Io) -> Self {
        match m {
            Io::Vanilla => IoMode::Vanilla,
            Io::Asap => IoMode::Asap,
        }
    }
}

/// `--prefetch-policy`: a policy of the one grammar (docs/serve.md).
pub fn parse_policy(s: &str) -> Result<PolicySpec, String> {
    s.parse().map_err(|e| format!("{e}"))
}

/// `--prefetch SIZE`: the policy `fixed:SIZE`.
pub fn parse_fixed(s: &str) -> Result<PolicySpec, String> {
    format!("fixed:{s}").parse().map_err(|e| format!("{e}"))
}

fn seconds(name: &'static str, value: f64) -> Result<Duration, SettingsError> {
    Duration::try_from_secs_f64(value).map_err(|source| SettingsError::NotADuration {
        name,
        value,
        source,
    })
}

impl ServeArgs {
    /// The prefetch policy, with `--bitrate-scale` applied.
    fn policy(&self) -> Result<PolicySpec, SettingsError> {
        let mut p = self.prefetch.unwrap_or(self.prefetch_policy);
        let Some(f) = self.bitrate_scale else {
            return Ok(p);
        };
        let scaling = match &mut p {
            PolicySpec::Scaled(_, s) => s,
            PolicySpec::Auto(a) if a.scaling.is_some() => a.scaling.as_mut().expect("some"),
            _ => return Err(SettingsError::BitrateScaleNeedsRef),
        };
        *scaling = vodlab_prefetch::auto::Scaling::from_scale(scaling.reference_kbps, f, None)
            .map_err(|e| SettingsError::BitrateScale {
                factor: f,
                why: e.to_string(),
            })?;
        Ok(p)
    }

    /// The server configuration these arguments describe (validated).
    pub fn config(&self) -> Result<Config, SettingsError> {
        let (tls, h2) = self.proto.settings()?;
        let cfg = Config {
            tls,
            h2,
            h3: self.proto.h3_settings()?,
            root: self.root.clone(),
            io: self.io.into(),
            prefetch_policy: self.policy()?,
            helpers_per_device: self.helpers,
            next_object_bytes: self.prefetch_next_object,
            max_prefetch: self.max_prefetch,
            access_log: self.access_log.clone(),
            prefetch_events: self.prefetch_events.clone(),
            idle_timeout: seconds("keepalive", self.keepalive)?,
            header_timeout: seconds("header-timeout", self.header_timeout)?,
            send_timeout: seconds("send-timeout", self.send_timeout)?,
            notsent_lowat: self.notsent_lowat,
            notsent_lowat_max: self.notsent_lowat_max,
            max_connections: self.max_connections,
            stats_interval: seconds("stats-interval", self.stats_interval)?,
            reuse_port: self.reuse_port,
            // `fixed:K` sets K
            pace: self.pace_policy.k.unwrap_or(self.pace),
            pace_policy: self.pace_policy.policy,
            pace_mode: self.pace_mode.into(),
            pace_burst: self.pace_burst,
            link_capacity: self.link_capacity,
            pace_chunk: self.pace_chunk,
            pace_driver: self.pace_driver,
            pace_coalesce: Duration::from_micros(self.pace_coalesce_us),
            pace_mss: self.pace_mss,
            bitrates: self.bitrates.clone(),
            default_bitrate_kbps: self.default_bitrate,
            cmsd: self.cmsd.then(|| crate::cmsd::CmsdSettings {
                name: self.cmsd_name.clone(),
                mb_kbps: self.cmsd_mb,
                load_connections: self.cmsd_load_connections,
            }),
            ..Config::default()
        };
        cfg.validate()?;
        let k = vodlab_workload::TimeCompression::from_flag_or_env(self.time_compression)?.k();
        let cfg = cfg.compress_time(k)?;
        if self.prefetch_events.is_some() && cfg.io != IoMode::Asap {
            return Err(SettingsError::PrefetchEventsNeedAsap);
        }
        if self.prefetch_next_object.is_some() && cfg.io != IoMode::Asap {
            return Err(SettingsError::NextObjectNeedsAsap);
        }
        if self.prefetch_log.is_some() && !matches!(cfg.prefetch_policy, PolicySpec::Auto(_)) {
            return Err(SettingsError::PrefetchLogNeedsAuto);
        }
        Ok(cfg)
    }
}

#[cfg(all(test, feature = "cli"))]
mod tests {
    use super::*;
    use crate::config::PaceDriver;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        serve: ServeArgs,
    }

    fn parse(args: &[&str]) -> Result<Config, String> {
        let cli = Cli::try_parse_from(["serve", "--root", "/srv"].iter().chain(args))
            .map_err(|e| e.to_string())?;
        cli.serve.config().map_err(|e| e.to_string())
    }

    #[test]
    fn defaults_are_the_servers() {
        let c = parse(&[]).unwrap();
        assert_eq!(c, Config::new(PathBuf::from("/srv")));
    }

    #[test]
    fn next_object_prefetch_flag() {
        assert_eq!(parse(&[]).unwrap().next_object_bytes, None);
        let c = parse(&["--prefetch-next-object"]).unwrap();
        assert_eq!(c.next_object_bytes, Some(4 << 20));
        let c = parse(&[
            "--prefetch-next-object=1M",
            "--prefetch-policy",
            "first-grow:8M",
        ])
        .unwrap();
        assert_eq!(c.next_object_bytes, Some(1 << 20));
        let e = parse(&["--prefetch-next-object", "--io", "vanilla"]).unwrap_err();
        assert!(e.contains("needs --io asap"), "{e}");
        assert!(parse(&["--prefetch-next-object=4Q"]).is_err());
    }

    #[test]
    fn prefetch_policy_and_its_alias() {
        let c = parse(&["--prefetch-policy", "fixed:2M"]).unwrap();
        assert_eq!(c.prefetch_policy, PolicySpec::Fixed(2 << 20));
        let c = parse(&["--prefetch", "512K"]).unwrap();
        assert_eq!(c.prefetch_policy, PolicySpec::Fixed(512 << 10));
        let c = parse(&["--prefetch=1G"]).unwrap();
        assert_eq!(c.prefetch_policy, PolicySpec::Fixed(1 << 30));
        let c = parse(&["--prefetch-policy", "auto:interval=60"]).unwrap();
        assert!(matches!(c.prefetch_policy, PolicySpec::Auto(a) if a.interval.as_secs() == 60));
        let e = parse(&["--prefetch-policy", "auto:busy=7"]).unwrap_err();
        assert!(e.contains("busy"), "{e}");
        let e = parse(&["--prefetch-policy", "lru"]).unwrap_err();
        assert!(e.contains("unknown policy `lru`"), "{e}");
        let c = parse(&["--catalog", "catalog.json"]).unwrap();
        assert_eq!(c.bitrates, Some(PathBuf::from("catalog.json")));
        let e = parse(&["--prefetch-policy", "fixed:4Q"]).unwrap_err();
        assert!(
            e.contains("`4Q`: not a size") && e.contains("4M = 4MiB"),
            "{e}"
        );
        // one grammar: 4M binary, 4MB decimal (docs/units.md)
        let c = parse(&["--prefetch-policy", "fixed:4MB"]).unwrap();
        assert_eq!(c.prefetch_policy, PolicySpec::Fixed(4_000_000));
        let c = parse(&["--prefetch-policy", "auto:interval=2m,ramp=500ms"]).unwrap();
        assert!(matches!(c.prefetch_policy, PolicySpec::Auto(a)
            if a.interval.as_secs() == 120 && a.ramp.as_millis() == 500));
        assert!(parse(&["--prefetch", "0"]).is_err());
        assert!(parse(&["--prefetch", "1M", "--prefetch-policy", "fixed:2M"]).is_err());
    }

    #[test]
    fn prefetch_log_needs_auto() {
        let c = parse(&["--prefetch-policy", "auto", "--prefetch-log", "a.csv"]).unwrap();
        assert!(matches!(c.prefetch_policy, PolicySpec::Auto(_)));
        let e = parse(&["--prefetch-policy", "fixed:4M", "--prefetch-log", "a.csv"]).unwrap_err();
        assert!(e.contains("--prefetch-log needs"), "{e}");
    }

    #[test]
    fn bitrate_scale_flag() {
        let c = parse(&[
            "--prefetch-policy",
            "fixed:6M,ref=2095",
            "--bitrate-scale",
            "0.45",
        ])
        .unwrap();
        let PolicySpec::Scaled(n, s) = c.prefetch_policy else {
            panic!("{:?}", c.prefetch_policy)
        };
        let sd = s.size(n as f64, Some(419_000));
        assert!((sd - 0.45 * (6 << 20) as f64).abs() < 1.0, "{sd}");
        let c = parse(&["--prefetch-policy", "auto:ref=2095", "--bitrate-scale", "1"]).unwrap();
        assert!(
            matches!(c.prefetch_policy, PolicySpec::Auto(a) if a.scaling.unwrap().exponent == 0.0)
        );
        let e = parse(&["--prefetch-policy", "fixed:6M", "--bitrate-scale", "0.45"]).unwrap_err();
        assert!(e.contains("reference bit rate"), "{e}");
        let e = parse(&[
            "--prefetch-policy",
            "fixed:6M,ref=2095",
            "--bitrate-scale",
            "2",
        ])
        .unwrap_err();
        assert!(e.contains("scale:"), "{e}");
    }

    #[test]
    fn pacing_flags() {
        let c = parse(&[]).unwrap();
        assert!(!c.paced());
        let c = parse(&[
            "--pace",
            "1.5",
            "--pace-mode",
            "kernel",
            "--pace-burst",
            "0",
            "--link-capacity",
            "1Gbit",
            "--pace-chunk",
            "8K",
            "--default-bitrate",
            "400",
            "--bitrates",
            "rates.toml",
        ])
        .unwrap();
        assert_eq!(c.pace, 1.5);
        assert_eq!(c.pace_mode, PaceMode::Kernel);
        assert_eq!(c.pace_burst, 0.0);
        assert_eq!(c.link_capacity, Some(125_000_000));
        assert_eq!(c.pace_chunk, Some(8192));
        assert_eq!(c.pace_driver, PaceDriver::Thread);
        assert_eq!(c.pace_mss, None);
        let d = parse(&["--pace-driver", "rt:20", "--pace-mss", "137"]).unwrap();
        assert_eq!((d.pace_driver, d.pace_mss), (PaceDriver::Rt(20), Some(137)));
        assert_eq!(
            parse(&["--pace-driver", "rt"]).unwrap().pace_driver,
            PaceDriver::Rt(10)
        );
        assert_eq!(
            parse(&["--pace-driver", "task"]).unwrap().pace_driver,
            PaceDriver::Task
        );
        assert!(parse(&["--pace-driver", "rt:100"]).is_err());
        assert!(parse(&["--pace-mss", "40"])
            .unwrap_err()
            .contains("pace_mss"));
        assert_eq!(
            parse(&["--pace-coalesce-us", "250"]).unwrap().pace_coalesce,
            Duration::from_micros(250)
        );
        assert!(parse(&["--pace-coalesce-us", "1001"])
            .unwrap_err()
            .contains("pace_coalesce"));
        assert_eq!(c.default_bitrate_kbps, Some(400.0));
        assert_eq!(c.bitrates, Some(PathBuf::from("rates.toml")));
        assert_eq!(parse_rate("400kbit"), Ok(50_000));
        assert_eq!(parse_rate("50M"), Ok(50 << 20));
        assert_eq!(parse_rate("1000"), Ok(1000));
        assert!(parse_rate("0bit").is_err());
    }

    #[test]
    fn invalid_settings_are_refused() {
        assert!(parse(&["--helpers", "0"])
            .unwrap_err()
            .contains("helpers_per_device"));
        assert!(parse(&["--keepalive", "-1"]).is_err());
        assert!(parse(&["--send-timeout", "0"])
            .unwrap_err()
            .contains("send_timeout"));
        assert_eq!(
            parse(&["--send-timeout", "2.5"]).unwrap().send_timeout,
            Duration::from_millis(2500)
        );
        assert_eq!(
            parse(&["--max-prefetch", "2M"]).unwrap().max_prefetch,
            2 * 1024 * 1024
        );
        assert!(parse(&["--max-prefetch", "2"])
            .unwrap_err()
            .contains("max_prefetch"));
        assert!(parse(&["--pace=-1"]).unwrap_err().contains("pace"));
        assert!(parse(&["--pace-burst=-1"])
            .unwrap_err()
            .contains("--pace-burst"));
        assert!(parse(&["--pace-chunk", "63"])
            .unwrap_err()
            .contains("pace_chunk"));
        assert!(parse(&["--default-bitrate", "0"])
            .unwrap_err()
            .contains("default_bitrate_kbps"));
        assert!(parse(&["--link-capacity", "fast"]).is_err());
        let e = parse(&["--keepalive", "5x"]).unwrap_err();
        assert!(
            e.contains("`5x`: not a duration") && e.contains("500ms"),
            "{e}"
        );
        let c = parse(&[
            "--keepalive",
            "2m",
            "--header-timeout",
            "500ms",
            "--stats-interval",
            "0",
            "--pace-coalesce-us",
            "1ms",
            "--h2-abuse-ban",
            "2s",
        ])
        .unwrap();
        assert_eq!(
            (c.idle_timeout, c.header_timeout, c.stats_interval),
            (
                Duration::from_secs(120),
                Duration::from_millis(500),
                Duration::ZERO
            )
        );
        assert_eq!(c.pace_coalesce, Duration::from_millis(1));
        assert_eq!(c.h2.abuse_ban_ms, 2000);
        assert_eq!(
            parse(&["--h2-abuse-ban", "250"]).unwrap().h2.abuse_ban_ms,
            250
        );
        assert_eq!(
            parse(&["--link-capacity", "100MB/s"])
                .unwrap()
                .link_capacity,
            Some(100_000_000)
        );
        let e = parse(&["--link-capacity", "400kbps"]).unwrap_err();
        assert!(e.contains("ambiguous") && e.contains("400kbit"), "{e}");
        let c = parse(&["--io", "vanilla", "--keepalive", "5"]).unwrap();
        assert_eq!(
            (c.io, c.idle_timeout),
            (IoMode::Vanilla, Duration::from_secs(5))
        );
    }

    #[test]
    fn cmsd_flags() {
        assert_eq!(parse(&[]).unwrap().cmsd, None);
        let c = parse(&["--cmsd"]).unwrap().cmsd.unwrap();
        assert_eq!(c, crate::cmsd::CmsdSettings::default());
        let c = parse(&[
            "--cmsd",
            "--cmsd-name",
            "edge-1",
            "--cmsd-mb",
            "1500",
            "--cmsd-load-connections",
            "4",
        ])
        .unwrap()
        .cmsd
        .unwrap();
        assert_eq!(
            (c.name.as_str(), c.mb_kbps, c.load_connections),
            ("edge-1", Some(1500), Some(4))
        );
        assert!(parse(&["--cmsd-mb", "1500"]).is_err(), "needs --cmsd");
        assert!(parse(&["--cmsd", "--cmsd-load-connections", "4"]).is_err());
        assert!(parse(&["--cmsd", "--cmsd-mb", "0"])
            .unwrap_err()
            .contains("cmsd"));
        assert!(parse(&["--cmsd", "--cmsd-name", ""])
            .unwrap_err()
            .contains("cmsd"));
        // mb is a bit rate: multiplied by the time compression
        let c = parse(&["--cmsd", "--cmsd-mb", "1500", "--time-compression", "4"]).unwrap();
        assert_eq!(c.cmsd.unwrap().mb_kbps, Some(6000));
    }
}
