//! Server settings: one serde struct with defaults ([`Config::default`],
//! taken from [`defaults`], which the CLI reads too) and [`Config::validate`].

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// The default of every setting, in one place (the CLI's defaults are these).
pub mod defaults {
    use std::time::Duration;

    // the prefetch settings' defaults are the prefetch crate's
    pub use vodlab_prefetch::defaults::*;

    /// Prefetch helper threads per storage device (1 = serialized).
    pub const HELPERS_PER_DEVICE: usize = 1;
    /// Longest wait for a complete request head.
    pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
    /// Longest idle time between requests on a persistent connection.
    pub const IDLE_TIMEOUT: Duration = Duration::from_secs(60);
    /// Longest time a response may make no progress (the kernel accepts no
    /// byte of it) before the connection is closed.
    pub const SEND_TIMEOUT: Duration = Duration::from_secs(60);
    /// Unsent bytes a response socket may hold in the kernel
    /// (`TCP_NOTSENT_LOWAT`, 256 KiB): bounds the kernel memory a slow
    /// reader pins to what is in flight plus this.
    pub const NOTSENT_LOWAT: u64 = 256 << 10;
    /// Largest `notsent_lowat` [`super::Config::validate`] accepts (64 MiB).
    pub const MAX_NOTSENT_LOWAT: u64 = 64 << 20;
    /// Most the low-water mark is raised to for a connection whose peer
    /// reads fast (1 MiB): a whole 1 MiB segment in one `sendfile`, and a
    /// quarter of the 4 MiB a socket without a mark may pin.
    pub const NOTSENT_LOWAT_MAX: u64 = 1 << 20;
    /// The low-water mark of a fast connection is what its delivery rate
    /// drains in this time (4 ms; the socket wakes the server when half is
    /// left, so 2 ms of data covers the wake-up): `crate::lowat`.
    pub const NOTSENT_LOWAT_TIME: Duration = Duration::from_millis(4);
    /// Most simultaneous connections.
    pub const MAX_CONNECTIONS: usize = 10_000;
    /// How long shutdown waits for responses in flight.
    pub const GRACE: Duration = Duration::from_secs(30);
    /// Time between statistics lines on stderr.
    pub const STATS_INTERVAL: Duration = Duration::from_secs(10);
    /// Most prefetch helper threads per device [`super::Config::validate`] accepts.
    pub const MAX_HELPERS_PER_DEVICE: usize = 64;
    /// Pace factor K (0 = responses are not paced, the default).
    pub const PACE: f64 = 0.0;
    /// Largest pace factor [`super::Config::validate`] accepts.
    pub const MAX_PACE: f64 = 1000.0;
    /// Initial burst of a paced response, seconds of content (the paper's
    /// 4 s client buffer; 0 = no bursts).
    pub const PACE_BURST: f64 = 4.0;
    /// The per-session chunk rule: c = r × this, clamped to
    /// [`MIN_PACE_CHUNK`, `MAX_PACE_CHUNK`]. The grid alone puts a 100 ms
    /// window within ±c = ±2.5 % of r·100 ms; the other half of the ±5 %
    /// is left to timer and scheduling jitter (docs/serve.md, "Chunk rule").
    pub const PACE_CHUNK_TIME: std::time::Duration = std::time::Duration::from_micros(2500);
    /// Smallest chunk of the chunk rule (64 B: 2.5 ms of 200 kbit/s).
    pub const MIN_PACE_CHUNK: u64 = 64;
    /// Largest chunk of the chunk rule (64 KiB, one loopback/TSO segment).
    pub const MAX_PACE_CHUNK: u64 = 64 << 10;
    /// How far past a wake-up the user pacer's driver releases grants
    /// (`pace_coalesce`): sessions due within it share the wake-up. 250 µs
    /// moves a 100 ms window by 0.25 % at most; measured at 100 sessions of
    /// 400 kbit/s it cut the driver's wake-ups 8-fold and raised the share
    /// of windows within ±5 % (docs/experiments.md, "The driver's
    /// wake-ups").
    pub const PACE_COALESCE: Duration = Duration::from_micros(250);
    /// Largest `pace_coalesce`: a chunk sent up to 1 ms early moves a
    /// 100 ms window by 1 % at most, and stays below the chunk rule's
    /// 2.5 ms period (a longer lead would also send a session's next slot
    /// in the same wake-up).
    pub const MAX_PACE_COALESCE: Duration = Duration::from_millis(1);
}

/// How file data reaches the socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IoMode {
    /// sendfile, each call on the blocking thread pool (it may read the disk).
    Vanilla,
    /// probe the page cache; on a miss prefetch serially per device first.
    Asap,
}

/// How paced responses are paced (`--pace-mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PaceMode {
    /// The server's pacer ([`crate::pacer`]) releases chunks of c bytes at
    /// their times; one driver task for the whole server hands the grants
    /// to the connections.
    #[default]
    User,
    /// `SO_MAX_PACING_RATE` on the socket and plain sendfile: TCP's
    /// internal pacing (no `fq` qdisc needed since Linux 4.13).
    Kernel,
}

pub use vodlab_prefetch::PolicySpec;
pub mod h2;
pub mod h3;
mod timescale;
pub mod tls;
pub use timescale::MAX_TIME_COMPRESSION;
mod pace_driver;
pub use pace_driver::{
    PaceDriver, DEFAULT_RT_PRIORITY, MAX_PACE_MSS, MAX_RT_PRIORITY, MIN_PACE_MSS,
};

/// A size in bytes, in vodlab's one grammar ([`vodlab_units::parse_size`]:
/// `4096`, `256k`, `4M` = 4 MiB, `1.5G`, `4MB` = 4×10^6); the error names
/// the input and shows the grammar.
pub fn parse_size(s: &str) -> Result<u64, String> {
    vodlab_units::parse_size(s).map_err(|e| e.to_string())
}

/// An invalid setting.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum ConfigError {
    /// `--prefetch-policy` could not be read or does not fit.
    #[error(transparent)]
    Policy(#[from] vodlab_prefetch::PolicyError),
    /// A setting out of its range.
    #[error("{field}: {why}")]
    Range {
        /// The setting.
        field: &'static str,
        /// Its allowed range.
        why: &'static str,
    },
}

pub(crate) use vodlab_prefetch::secs;

/// Server settings (durations in seconds in serialized form).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Directory served.
    pub root: PathBuf,
    /// I/O mode.
    pub io: IoMode,
    /// Prefetch controller in ASAP mode (`fixed:4M`).
    pub prefetch_policy: PolicySpec,
    /// Most bytes one prefetch reads; a connection has at most one prefetch
    /// queued or being read, so this bounds what one connection can make the
    /// helpers read ahead of what it sends.
    pub max_prefetch: u64,
    /// Prefetch helper threads per device (1 = serialized).
    pub helpers_per_device: usize,
    /// Next-object prefetch (asap mode; `None`: off): a request whose CMCD
    /// names the next object (`nor`, with `nrr` its range) makes the server
    /// read that object's first this many bytes (or its `nrr` range, at
    /// most this many) into the page cache on the device's helper
    /// (`vodlab_prefetch::next_object`).
    pub next_object_bytes: Option<u64>,
    /// Longest wait for a complete request head.
    #[serde(with = "secs")]
    pub header_timeout: Duration,
    /// Longest idle time between requests on a persistent connection.
    #[serde(with = "secs")]
    pub idle_timeout: Duration,
    /// Longest time a response may make no progress (no byte accepted by
    /// the socket) before the connection is closed.
    #[serde(with = "secs")]
    pub send_timeout: Duration,
    /// Unsent bytes a connection's socket may queue in the kernel
    /// (`TCP_NOTSENT_LOWAT`; 0 = the kernel's default, i.e. up to the
    /// whole send buffer). The mark of a connection whose peer reads
    /// fast is raised up to `notsent_lowat_max` (`crate::lowat`).
    pub notsent_lowat: u64,
    /// Most the low-water mark is raised to for a connection whose peer
    /// reads fast enough to drain at least twice `notsent_lowat` in
    /// [`defaults::NOTSENT_LOWAT_TIME`] (the mark moves in powers of two);
    /// at or below `notsent_lowat` the mark stays fixed.
    pub notsent_lowat_max: u64,
    /// Most simultaneous connections (at the cap, the connection waiting
    /// longest for a request head is shed for a new one).
    pub max_connections: usize,
    /// How long shutdown waits for responses in flight.
    #[serde(with = "secs")]
    pub grace: Duration,
    /// Access log file.
    pub access_log: Option<PathBuf>,
    /// Every input of the prefetch controller, as JSON lines
    /// (`vodlab_prefetch::events`; asap mode): what a replay of the same
    /// policy must decide alike. Written line by line; truncated at start.
    pub prefetch_events: Option<PathBuf>,
    /// Time between statistics log lines on stderr (0 = none).
    #[serde(with = "secs")]
    pub stats_interval: Duration,
    /// Set SO_REUSEPORT on the listening socket, so several server
    /// processes share the address (`vodlab serve --workers`).
    pub reuse_port: bool,
    /// Time between the prefetch controller's ticks.
    #[serde(with = "secs")]
    pub tick: Duration,
    /// Pace factor K: a response with a known bit rate is sent at K × that
    /// rate (0 = unpaced, the default).
    pub pace: f64,
    /// What multiple of its bit rate each paced response gets (`fixed`: K;
    /// `cmcd`, `sammy`: from the client's reports). A policy other than
    /// `fixed` paces even with `pace` 0 (K then 1 where it falls back).
    #[serde(default)]
    pub pace_policy: crate::pacer::PacePolicy,
    /// How paced responses are paced.
    pub pace_mode: PaceMode,
    /// Initial burst of a paced response in seconds of content (0 = none;
    /// a CMCD `bl` tops the client's buffer up to this instead).
    pub pace_burst: f64,
    /// Server-wide bytes/s that bursts and catch-up may use beyond the sum
    /// of the paced rates (`None`: unlimited; user mode only).
    pub link_capacity: Option<u64>,
    /// Fixed chunk size of user-mode pacing in bytes (`None`: the
    /// per-session rule c = clamp(r × 5 ms, 1460 B, 64 KiB)).
    pub pace_chunk: Option<u64>,
    /// Where the user-mode pacer's driver runs: a tokio task, a dedicated
    /// thread (the default) or that thread under `SCHED_FIFO`.
    pub pace_driver: PaceDriver,
    /// A wake-up of the user pacer's driver also releases the grants due up
    /// to this much later, so sessions due close together share one
    /// wake-up (a chunk leaves at most this early; 0 = none).
    #[serde(with = "secs")]
    pub pace_coalesce: Duration,
    /// `TCP_MAXSEG` of the listening socket, so every accepted connection
    /// sends segments of at most this many bytes (`None`: the route's MSS).
    /// For kernel-mode pacing, whose lumps are segments: ±5 % per 100 ms at
    /// 400 kbit/s needs segments of ≤ 250 B (docs/serve.md).
    pub pace_mss: Option<u32>,
    /// Bit-rate catalog (TOML or JSON; docs/serve.md), consulted when the
    /// request carries no CMCD `br`.
    pub bitrates: Option<PathBuf>,
    /// Bit rate (kbit/s) of a response neither CMCD nor the catalog rates.
    pub default_bitrate_kbps: Option<f64>,
    /// Time compression k the settings were compressed for
    /// ([`Config::compress_time`]); the `bitrates` catalog's rates are
    /// multiplied by it when loaded. 1: nominal time.
    pub time_compression: f64,
    /// CMSD on responses with a file (`serve --cmsd`, `[cmsd]`; docs/cmcd.md);
    /// `None`: off.
    pub cmsd: Option<crate::cmsd::CmsdSettings>,
    // --- TLS and HTTP/2 (crate::tls, crate::h2) ---
    /// TLS: certificate, record sizing, ALPN (`[tls]`).
    pub tls: tls::TlsSettings,
    /// HTTP/2: windows, frame size, streams, abuse limits (`[h2]`).
    pub h2: h2::H2Settings,
    /// HTTP/3 over QUIC beside the TCP listener (`[h3]`, crate::h3).
    pub h3: h3::H3Settings,
    // --- end of TLS and HTTP/2 ---
}

impl Default for Config {
    fn default() -> Self {
        Self {
            root: PathBuf::from("."),
            io: IoMode::Asap,
            prefetch_policy: PolicySpec::default(),
            max_prefetch: defaults::MAX_PREFETCH,
            helpers_per_device: defaults::HELPERS_PER_DEVICE,
            next_object_bytes: None,
            header_timeout: defaults::HEADER_TIMEOUT,
            idle_timeout: defaults::IDLE_TIMEOUT,
            send_timeout: defaults::SEND_TIMEOUT,
            notsent_lowat: defaults::NOTSENT_LOWAT,
            notsent_lowat_max: defaults::NOTSENT_LOWAT_MAX,
            max_connections: defaults::MAX_CONNECTIONS,
            grace: defaults::GRACE,
            access_log: None,
            prefetch_events: None,
            stats_interval: defaults::STATS_INTERVAL,
            reuse_port: false,
            tick: defaults::TICK,
            pace: defaults::PACE,
            pace_policy: crate::pacer::PacePolicy::Fixed,
            pace_mode: PaceMode::User,
            pace_burst: defaults::PACE_BURST,
            link_capacity: None,
            pace_chunk: None,
            pace_driver: PaceDriver::default(),
            pace_coalesce: defaults::PACE_COALESCE,
            pace_mss: None,
            bitrates: None,
            default_bitrate_kbps: None,
            time_compression: 1.0,
            cmsd: None,
            // TLS and HTTP/2
            tls: tls::TlsSettings::default(),
            h2: h2::H2Settings::default(),
            h3: h3::H3Settings::default(),
        }
    }
}

impl Config {
    /// Defaults for a root.
    pub fn new(root: PathBuf) -> Self {
        Self {
            root,
            ..Self::default()
        }
    }

    /// Checks every setting's range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let range = |ok: bool, field, why| {
            if ok {
                Ok(())
            } else {
                Err(ConfigError::Range { field, why })
            }
        };
        range(
            !self.root.as_os_str().is_empty(),
            "root",
            "must not be empty",
        )?;
        if let Some(c) = &self.cmsd {
            c.validate()
                .map_err(|why| ConfigError::Range { field: "cmsd", why })?;
        }
        range(
            (1..=defaults::MAX_HELPERS_PER_DEVICE).contains(&self.helpers_per_device),
            "helpers_per_device",
            "must be 1 to 64",
        )?;
        range(
            (4096..=defaults::MAX_PREFETCH_LIMIT).contains(&self.max_prefetch),
            "max_prefetch",
            "must be 4 KiB to 1 GiB",
        )?;
        range(
            !self.header_timeout.is_zero(),
            "header_timeout",
            "must be > 0",
        )?;
        range(!self.idle_timeout.is_zero(), "idle_timeout", "must be > 0")?;
        range(!self.send_timeout.is_zero(), "send_timeout", "must be > 0")?;
        range(
            self.notsent_lowat == 0
                || (4096..=defaults::MAX_NOTSENT_LOWAT).contains(&self.notsent_lowat),
            "notsent_lowat",
            "must be 0 (off) or 4 KiB to 64 MiB",
        )?;
        range(
            self.notsent_lowat_max <= defaults::MAX_NOTSENT_LOWAT,
            "notsent_lowat_max",
            "must be at most 64 MiB",
        )?;
        range(self.max_connections > 0, "max_connections", "must be > 0")?;
        range(!self.tick.is_zero(), "tick", "must be > 0")?;
        range(
            self.pace.is_finite() && (0.0..=defaults::MAX_PACE).contains(&self.pace),
            "pace",
            "must be 0 (off) to 1000",
        )?;
        range(
            self.pace_burst.is_finite() && (0.0..=3600.0).contains(&self.pace_burst),
            "pace_burst",
            "must be 0 to 3600 s",
        )?;
        range(
            self.link_capacity != Some(0),
            "link_capacity",
            "must be > 0 when set",
        )?;
        range(
            self.pace_chunk.is_none_or(|c| {
                (crate::pacer::defaults::MIN_CHUNK_SIZE..=crate::pacer::defaults::MAX_CHUNK_SIZE)
                    .contains(&c)
            }),
            "pace_chunk",
            "must be 64 B to 16 MiB",
        )?;
        range(
            self.pace_mss
                .is_none_or(|m| (MIN_PACE_MSS..=MAX_PACE_MSS).contains(&m)),
            "pace_mss",
            "must be 88 to 65535 B",
        )?;
        range(
            self.pace_coalesce <= defaults::MAX_PACE_COALESCE,
            "pace_coalesce",
            "must be 0 to 1 ms",
        )?;
        range(
            self.default_bitrate_kbps
                .is_none_or(|b| b.is_finite() && b > 0.0 && b <= defaults::MAX_BITRATE_KBPS),
            "default_bitrate_kbps",
            "must be > 0 and at most 1e9 kbit/s",
        )?;
        range(
            self.bitrates
                .as_ref()
                .is_none_or(|p| !p.as_os_str().is_empty()),
            "bitrates",
            "must not be empty",
        )?;
        range(
            timescale::valid_k(self.time_compression),
            "time_compression",
            "must be a finite number > 0 and at most 1000",
        )?;
        self.pace_policy
            .validate()
            .map_err(|why| ConfigError::Range {
                field: "pace_policy",
                why,
            })?;
        // TLS and HTTP/2 (their messages name `tls.*`, `h2.*`)
        self.tls.validate()?;
        self.h2.validate()?;
        self.h3.validate(self.tls.enabled())?;
        // the policy's own parameters (auto's, scaling's): the message names the key
        self.prefetch_policy.validate().map_err(|why| {
            ConfigError::Policy(vodlab_prefetch::PolicyError {
                given: self.prefetch_policy.to_string(),
                why,
            })
        })
    }

    /// Whether responses are paced at all (`pace` > 0, or a pace policy
    /// other than `fixed`).
    pub fn paced(&self) -> bool {
        self.pace > 0.0 || self.pace_policy != crate::pacer::PacePolicy::Fixed
    }

    /// K where the pace policy falls back to it: `pace`, or 1 when `pace`
    /// is 0 (a non-`fixed` policy pacing on its own).
    pub fn pace_factor(&self) -> f64 {
        if self.pace > 0.0 {
            self.pace
        } else {
            1.0
        }
    }

    /// The user-mode pacer's settings these give: K, the burst as the
    /// client buffer B (low-buffer bursts below B/4), the link capacity,
    /// and the chunk (`pace_chunk`, else the chunk rule's largest).
    pub fn pacer_config(&self) -> crate::pacer::PacerConfig {
        crate::pacer::PacerConfig {
            pace_factor: self.pace_factor(),
            chunk_size: self.pace_chunk.unwrap_or(defaults::MAX_PACE_CHUNK),
            burst: self.pace_burst > 0.0,
            buffer: self.pace_burst,
            low_buffer: self.pace_burst / 4.0,
            link_capacity: self.link_capacity,
            ..crate::pacer::PacerConfig::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_parse_with_suffixes_and_refuse_the_rest() {
        assert_eq!("fixed:4M".parse(), Ok(PolicySpec::Fixed(4 << 20)));
        for (text, sr) in [("first-grow:16M", false), ("first-grow-sr:16M", true)] {
            let p: PolicySpec = text.parse().unwrap();
            assert_eq!(p, PolicySpec::first_grow(16 << 20, sr));
            assert_eq!(p.to_string(), text);
        }
        assert!("first-grow".parse::<PolicySpec>().is_err());
        assert!("first-grow:0".parse::<PolicySpec>().is_err());
        assert_eq!("fixed:512k".parse(), Ok(PolicySpec::Fixed(512 << 10)));
        assert_eq!("fixed:1G".parse(), Ok(PolicySpec::Fixed(1 << 30)));
        assert_eq!("fixed:1.5M".parse(), Ok(PolicySpec::Fixed(3 << 19)));
        assert_eq!("fixed:1000".parse(), Ok(PolicySpec::Fixed(1000)));
        for bad in [
            "fixed",
            "fixed:",
            "fixed:0",
            "fixed:4X",
            "fixed:-1M",
            "auto:1",
            "",
            "fixed:4 M B",
        ] {
            let e = bad.parse::<PolicySpec>().unwrap_err();
            assert!(e.to_string().starts_with("prefetch policy"), "{bad}: {e}");
        }
        assert!("lru:1"
            .parse::<PolicySpec>()
            .unwrap_err()
            .to_string()
            .contains("known: fixed:SIZE"));
        for p in [
            PolicySpec::Fixed(4 << 20),
            PolicySpec::Fixed(1000),
            PolicySpec::Fixed(3 << 30),
        ] {
            assert_eq!(p.to_string().parse::<PolicySpec>(), Ok(p));
        }
        assert_eq!(PolicySpec::default().to_string(), "fixed:4M");
    }

    #[test]
    fn config_round_trips_and_fills_defaults() {
        let c: Config = serde_json::from_str(
            r#"{"root": "/srv", "prefetch_policy": "fixed:2M", "header_timeout": 0.5}"#,
        )
        .unwrap();
        assert_eq!(c.root, PathBuf::from("/srv"));
        assert_eq!(c.prefetch_policy, PolicySpec::Fixed(2 << 20));
        assert_eq!(c.header_timeout, Duration::from_millis(500));
        assert_eq!(c.idle_timeout, defaults::IDLE_TIMEOUT);
        assert_eq!(c.io, IoMode::Asap);
        let back: Config = serde_json::from_str(&serde_json::to_string(&c).unwrap()).unwrap();
        assert_eq!(back, c);
        assert!(serde_json::from_str::<Config>(r#"{"prefetch": 1}"#).is_err());
        assert!(serde_json::from_str::<Config>(r#"{"prefetch_policy": "fixed:0"}"#).is_err());
        assert!(serde_json::from_str::<Config>(r#"{"grace": -1}"#).is_err());
    }

    #[test]
    fn pacing_settings_are_checked_and_map_to_the_pacer() {
        let c = Config::default();
        assert!(!c.paced());
        c.pacer_config().validate().unwrap();
        let field = |f: fn(&mut Config)| {
            let mut c = Config::default();
            f(&mut c);
            match c.validate() {
                Err(ConfigError::Range { field, .. }) => field,
                other => panic!("{other:?}"),
            }
        };
        assert_eq!(field(|c| c.pace = -1.0), "pace");
        assert_eq!(field(|c| c.pace = f64::NAN), "pace");
        assert_eq!(field(|c| c.pace_burst = -0.5), "pace_burst");
        assert_eq!(field(|c| c.link_capacity = Some(0)), "link_capacity");
        assert_eq!(field(|c| c.pace_chunk = Some(63)), "pace_chunk");
        assert_eq!(
            field(|c| c.default_bitrate_kbps = Some(0.0)),
            "default_bitrate_kbps"
        );
        let c = Config {
            pace: 1.5,
            pace_burst: 0.0,
            link_capacity: Some(1000),
            ..Config::default()
        };
        let p = c.pacer_config();
        assert_eq!(
            (p.pace_factor, p.burst, p.link_capacity),
            (1.5, false, Some(1000))
        );
        p.validate().unwrap();
        let c: Config = serde_json::from_str(r#"{"pace": 1, "pace_mode": "kernel"}"#).unwrap();
        assert_eq!(
            (c.pace, c.pace_mode, c.pace_burst),
            (1.0, PaceMode::Kernel, 4.0)
        );
    }

    #[test]
    fn validate_names_the_bad_setting() {
        assert_eq!(Config::default().validate(), Ok(()));
        let field = |c: Config| match c.validate() {
            Err(ConfigError::Range { field, .. }) => field,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            field(Config {
                helpers_per_device: 0,
                ..Config::default()
            }),
            "helpers_per_device"
        );
        for bad in [0, 4095, (1 << 30) + 1] {
            assert_eq!(
                field(Config {
                    max_prefetch: bad,
                    ..Config::default()
                }),
                "max_prefetch"
            );
        }
        assert_eq!(
            field(Config {
                max_connections: 0,
                ..Config::default()
            }),
            "max_connections"
        );
        assert_eq!(
            field(Config {
                header_timeout: Duration::ZERO,
                ..Config::default()
            }),
            "header_timeout"
        );
        assert_eq!(
            field(Config {
                send_timeout: Duration::ZERO,
                ..Config::default()
            }),
            "send_timeout"
        );
        // the policy's parameters: the message names the policy and the key
        let bad = |p| {
            Config {
                prefetch_policy: p,
                ..Config::default()
            }
            .validate()
            .unwrap_err()
            .to_string()
        };
        assert!(bad(PolicySpec::Fixed(0)).contains("fixed size must be > 0"));
        let auto = vodlab_prefetch::auto::AutoConfig {
            busy: 2.0,
            ..Default::default()
        };
        assert!(bad(PolicySpec::Auto(auto)).contains("busy: must be 0 to 1"));
        assert_eq!(
            field(Config {
                root: PathBuf::new(),
                ..Config::default()
            }),
            "root"
        );
    }
}
