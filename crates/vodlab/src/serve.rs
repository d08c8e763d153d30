//! `vodlab serve`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, ValueEnum};
use vodlab_server::config::{defaults, PaceDriver};
use vodlab_server::{Config, IoMode, PaceMode, PolicySpec, Server};

/// Arguments of `vodlab serve`. Every default is the server's
/// (`vodlab_server::config::defaults`).
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Directory to serve (e.g. a `vodlab fileset create` root).
    #[arg(long, value_name = "DIR")]
    pub root: PathBuf,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8080", value_name = "ADDR:PORT")]
    pub listen: SocketAddr,
    /// I/O mode: `vanilla` sendfile (page-cache reads on a thread pool, like
    /// nginx with aio threads) or `asap` (probe the page cache; on a miss
    /// prefetch serially per device, then sendfile).
    #[arg(long, value_enum, default_value_t = Io::from(Config::default().io))]
    pub io: Io,
    /// ASAP prefetch controller: `fixed:SIZE` (a size as everywhere,
    /// docs/units.md: fixed:4M = 4 MiB, fixed:4MB = 4×10^6 bytes), `fixed:SIZE,ref=KBPS` (square-root sizes
    /// around the bit rate KBPS), `auto[:key=value,...]` (thesis ch. 4's
    /// automatic size), or `first-grow:MAX` / `first-grow-sr:MAX` (thesis
    /// ch. 5's chain-aware sizes). See docs/serve.md.
    #[arg(long, value_name = "POLICY", default_value_t = PolicySpec::default(), value_parser = parse_policy)]
    pub prefetch_policy: PolicySpec,
    /// Alias of `--prefetch-policy fixed:SIZE` (kept for older scripts).
    #[arg(long, value_name = "SIZE", conflicts_with = "prefetch_policy", value_parser = parse_fixed)]
    pub prefetch: Option<PolicySpec>,
    /// SD-to-HD prefetch factor F (0 < F <= 1): the policy's `ref=KBPS`
    /// rate gets its size, the rate KBPS/5 (the thesis's SD) F times that,
    /// other rates log-linear in between; same as the policy key `scale=F`
    /// (`low=` sets another low rate). Needs `ref=` in the policy.
    #[arg(long, value_name = "F")]
    pub bitrate_scale: Option<f64>,
    /// With `--prefetch-policy auto`: write each adjust interval as a CSV
    /// row to this file (header first, flushed per row; columns in
    /// docs/serve.md).
    #[arg(long, value_name = "FILE.csv")]
    pub prefetch_log: Option<PathBuf>,
    /// Largest prefetch one connection may have queued or in progress (a
    /// size: 16M, 4MB, 4194304); a longer range is read window by window.
    #[arg(long, value_name = "SIZE", default_value_t = defaults::MAX_PREFETCH, value_parser = vodlab_units::parse_size)]
    pub max_prefetch: u64,
    /// Prefetch helper threads per storage device (1 = serialized, as in the thesis).
    #[arg(long, default_value_t = defaults::HELPERS_PER_DEVICE)]
    pub helpers: usize,
    /// Append one line per request to this file (format in docs/serve.md).
    #[arg(long, value_name = "FILE")]
    pub access_log: Option<PathBuf>,
    /// Write every input of the prefetch controller to this file, one JSON
    /// line each (ranges decided with the page cache's answers, reads
    /// completed, ticks, connections ended; docs/prefetch-events.md), for
    /// `vodlab simulate --replay-events` to replay decision for decision.
    /// --io asap only.
    #[arg(long, value_name = "FILE")]
    pub prefetch_events: Option<PathBuf>,
    /// Idle keep-alive timeout (a duration: 500ms, 1m; a bare number is
    /// seconds).
    #[arg(long, value_name = "DURATION", default_value_t = defaults::IDLE_TIMEOUT.as_secs_f64(), value_parser = vodlab_units::parse_seconds)]
    pub keepalive: f64,
    /// Time allowed for a complete request head (slowloris guard; a bare
    /// number is seconds).
    #[arg(long, value_name = "DURATION", default_value_t = defaults::HEADER_TIMEOUT.as_secs_f64(), value_parser = vodlab_units::parse_seconds)]
    pub header_timeout: f64,
    /// How long a response may make no progress (the client reads nothing)
    /// before the connection is closed (a bare number is seconds); a slow
    /// but reading client is never cut (see docs/serve.md).
    #[arg(long, value_name = "DURATION", default_value_t = defaults::SEND_TIMEOUT.as_secs_f64(), value_parser = vodlab_units::parse_seconds)]
    pub send_timeout: f64,
    /// Unsent bytes a response may queue in the kernel per connection
    /// (TCP_NOTSENT_LOWAT; a size; 0 = kernel default, up to
    /// the whole send buffer, 4 MiB on loopback). Bounds the kernel memory a
    /// slow reader pins; see docs/serve.md for the trade-off.
    #[arg(long, value_name = "SIZE", default_value_t = defaults::NOTSENT_LOWAT, value_parser = vodlab_units::parse_size)]
    pub notsent_lowat: u64,
    /// Most simultaneous connections; at the cap the connection waiting
    /// longest for a request head is shed for a new one.
    #[arg(long, default_value_t = defaults::MAX_CONNECTIONS)]
    pub max_connections: usize,
    /// Time between statistics lines on stderr (0 = none; a bare number
    /// is seconds).
    #[arg(long, value_name = "DURATION", default_value_t = defaults::STATS_INTERVAL.as_secs_f64(), value_parser = vodlab_units::parse_seconds)]
    pub stats_interval: f64,
    /// Worker threads (default: one per core).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Pace each response at K × its bit rate (0 = unpaced, the default).
    /// The bit rate comes from CMCD `br`, then --bitrates, then
    /// --default-bitrate; a response none of them rates is sent unpaced.
    #[arg(long, value_name = "K", default_value_t = defaults::PACE)]
    pub pace: f64,
    /// How to pace: `user` (the server's pacer releases chunks at their
    /// times) or `kernel` (SO_MAX_PACING_RATE, TCP's internal pacing).
    #[arg(long, value_enum, default_value_t = PaceModeArg::User)]
    pub pace_mode: PaceModeArg,
    /// Initial burst of a paced response, in playing time of content (0 =
    /// none; a bare number is seconds).
    #[arg(long, value_name = "DURATION", default_value_t = defaults::PACE_BURST, value_parser = vodlab_units::parse_seconds)]
    pub pace_burst: f64,
    /// Link capacity bursts may use beyond the paced rates, a rate
    /// (docs/units.md): bits/s ending in `bit` (`1Gbit`, `400kbit`, powers
    /// of 1000) or bytes/s as a size (`50M` = 50 MiB/s, `100MB/s`), counted
    /// on the wire (66 B of headers per segment, as htb counts). Default:
    /// unlimited.
    #[arg(long, value_name = "RATE", value_parser = parse_rate)]
    pub link_capacity: Option<u64>,
    /// Fixed chunk of user-mode pacing (a size, 64 B at least); default: per session r × 2.5 ms, clamped to 64 B … 64 KiB
    /// (125 B at 400 kbit/s, for ±5 % in every 100 ms window).
    #[arg(long, value_name = "SIZE", value_parser = vodlab_units::parse_size)]
    pub pace_chunk: Option<u64>,
    /// Where user-mode pacing's driver runs: `thread` (a dedicated thread
    /// with a µs-precise wait, the default), `rt[:PRIO]` (that thread under
    /// SCHED_FIFO, priority 1-99, default 10; needs root or CAP_SYS_NICE,
    /// else it logs the refusal and runs at normal priority) or `task` (a
    /// tokio task on the workers, woken by tokio's 1 ms timer).
    #[arg(long, value_name = "DRIVER", default_value_t = PaceDriver::default(), value_parser = parse_pace_driver)]
    pub pace_driver: PaceDriver,
    /// A wake-up of the user pacer's driver also sends the chunks due up
    /// to this much later, so sessions due close together share one
    /// wake-up (a chunk leaves at most that early), 0 to 1000 µs (a bare
    /// number is µs: 250, 250us, 1ms); 0 wakes once per due time.
    #[arg(long, value_name = "DURATION", default_value_t = defaults::PACE_COALESCE.as_micros() as u64, value_parser = vodlab_units::parse_micros)]
    pub pace_coalesce_us: u64,
    /// TCP_MAXSEG of the listening socket: accepted connections send
    /// segments of at most this many bytes less TCP options (137 gives
    /// 125 B with timestamps), 88 to 65535. Kernel-mode pacing spaces whole
    /// segments: ±5 % per 100 ms at 400 kbit/s needs ≤ 250 B. Applies to
    /// every connection. Default: the route's MSS.
    #[arg(long, value_name = "BYTES")]
    pub pace_mss: Option<u32>,
    /// Bit-rate catalog: TOML or JSON mapping paths or path prefixes to
    /// kbit/s, or a `vodlab gen` workload's catalog.json (docs/serve.md).
    #[arg(long, value_name = "FILE", visible_alias = "catalog")]
    pub bitrates: Option<PathBuf>,
    /// Bit rate (kbit/s) of responses neither CMCD nor --bitrates rates.
    #[arg(long, value_name = "KBPS")]
    pub default_bitrate: Option<f64>,
    /// Time compression k, for a load replayed k times faster (`vodlab run
    /// --time-compression K`): keep-alive and send timeouts, the controller
    /// tick, the pace burst and auto's interval and ramp / k; bit rates
    /// (--bitrates, --default-bitrate, the policy's ref=) x k; sizes
    /// unchanged (docs/serve.md). Default: $VODLAB_TIME_COMPRESSION (set by
    /// `vodlab box --time-compression`), else 1.
    #[arg(long, value_name = "K")]
    pub time_compression: Option<f64>,
    /// TLS and HTTP/2 (docs/serve.md).
    #[command(flatten)]
    pub proto: ProtoArgs,
}

/// TLS and HTTP/2 flags of `vodlab serve`. One port serves HTTP/1.1,
/// h2c (prior knowledge), and with a certificate TLS (h2 or http/1.1 by
/// ALPN).
#[derive(Debug, Args)]
pub struct ProtoArgs {
    /// PEM certificate chain: TLS on the listening port (with --tls-key).
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// PEM private key of --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// TLS with a certificate generated at start for localhost (rcgen).
    #[arg(long, conflicts_with = "tls_cert")]
    pub tls_self_signed: bool,
    /// Write the generated certificate (PEM) here, for a client's --ca.
    #[arg(long, value_name = "FILE", requires = "tls_self_signed")]
    pub tls_cert_out: Option<PathBuf>,
    /// Fixed maximum plaintext bytes per TLS record (512 B to 16K; default
    /// 16K, the protocol's maximum).
    #[arg(long, value_name = "SIZE", value_parser = vodlab_units::parse_size)]
    pub tls_record_size: Option<u64>,
    /// nghttpx's dynamic TLS record sizing: 1,300-byte records until
    /// --tls-dyn-warmup bytes were written, again after --tls-dyn-idle
    /// seconds without writes.
    #[arg(long, conflicts_with = "tls_record_size")]
    pub tls_dynamic_records: bool,
    /// Warm-up threshold of dynamic record sizing.
    #[arg(long, value_name = "SIZE", default_value_t = vodlab_server::tls::defaults::DYN_WARMUP, value_parser = vodlab_units::parse_size)]
    pub tls_dyn_warmup: u64,
    /// Idle time after which dynamic record sizing starts over (a bare
    /// number is seconds).
    #[arg(long, value_name = "DURATION", default_value_t = vodlab_server::tls::defaults::DYN_IDLE.as_secs_f64(), value_parser = vodlab_units::parse_seconds)]
    pub tls_dyn_idle: f64,
    /// Offer only http/1.1 in ALPN (no h2 over TLS).
    #[arg(long)]
    pub no_h2: bool,
    /// Refuse h2c by prior knowledge on the plain port (answered as HTTP/1.1).
    #[arg(long)]
    pub no_h2c: bool,
    /// HTTP/2 initial stream window advertised (a size).
    #[arg(long, value_name = "SIZE", default_value_t = vodlab_server::h2::defaults::STREAM_WINDOW as u64, value_parser = vodlab_units::parse_size)]
    pub h2_stream_window: u64,
    /// HTTP/2 connection window advertised.
    #[arg(long, value_name = "SIZE", default_value_t = vodlab_server::h2::defaults::CONNECTION_WINDOW as u64, value_parser = vodlab_units::parse_size)]
    pub h2_connection_window: u64,
    /// HTTP/2 SETTINGS_MAX_FRAME_SIZE advertised (16K to 16M-1).
    #[arg(long, value_name = "SIZE", default_value_t = vodlab_server::h2::defaults::MAX_FRAME_SIZE as u64, value_parser = vodlab_units::parse_size)]
    pub h2_max_frame_size: u64,
    /// HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS (`--h2-max-streams` is an
    /// older name).
    #[arg(long = "h2-max-concurrent-streams", alias = "h2-max-streams", value_name = "N", default_value_t = vodlab_server::h2::defaults::MAX_CONCURRENT_STREAMS)]
    pub h2_max_streams: u32,
    /// First ban (a bare number is ms: 500, 2s) of an address whose HTTP/2 connection was closed for
    /// a flood: its new connections are reset at accept; the ban doubles
    /// with each abuse remembered (up to 300 s), then 60 s of probation at
    /// 4 new connections/s. 0 turns the per-address penalty off (e.g.
    /// clients behind one NAT address).
    #[arg(long, value_name = "DURATION", default_value_t = vodlab_server::h2::defaults::ABUSE_BAN_MS, value_parser = vodlab_units::parse_millis)]
    pub h2_abuse_ban: u64,
    /// HTTP/2 SETTINGS_MAX_HEADER_LIST_SIZE (also bounds CONTINUATION).
    #[arg(long, value_name = "SIZE", default_value_t = vodlab_server::h2::defaults::MAX_HEADER_LIST as u64, value_parser = vodlab_units::parse_size)]
    pub h2_max_header_list: u64,
}

impl ProtoArgs {
    /// The TLS and HTTP/2 settings these flags give.
    pub fn settings(
        &self,
    ) -> anyhow::Result<(
        vodlab_server::tls::TlsSettings,
        vodlab_server::h2::H2Settings,
    )> {
        let u32_of = |name: &str, v: u64| {
            u32::try_from(v).with_context(|| format!("--{name} {v}: too large"))
        };
        let tls = vodlab_server::tls::TlsSettings {
            cert: self.tls_cert.clone(),
            key: self.tls_key.clone(),
            self_signed: self.tls_self_signed,
            self_signed_out: self.tls_cert_out.clone(),
            record_size: self.tls_record_size,
            dynamic_records: self.tls_dynamic_records,
            dyn_warmup: self.tls_dyn_warmup,
            dyn_idle: seconds("tls-dyn-idle", self.tls_dyn_idle)?,
            alpn_h2: !self.no_h2,
        };
        let h2 = vodlab_server::h2::H2Settings {
            h2c: !self.no_h2c,
            stream_window: u32_of("h2-stream-window", self.h2_stream_window)?,
            connection_window: u32_of("h2-connection-window", self.h2_connection_window)?,
            max_frame_size: u32_of("h2-max-frame-size", self.h2_max_frame_size)?,
            max_concurrent_streams: self.h2_max_streams,
            max_header_list_size: u32_of("h2-max-header-list", self.h2_max_header_list)?,
            abuse_ban_ms: self.h2_abuse_ban,
            abuse_max_ban_ms: vodlab_server::h2::defaults::ABUSE_MAX_BAN_MS.max(self.h2_abuse_ban),
            ..vodlab_server::h2::H2Settings::default()
        };
        Ok((tls, h2))
    }
}

fn parse_pace_driver(s: &str) -> Result<PaceDriver, String> {
    s.parse()
}

/// Pacing mechanisms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
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
fn parse_rate(s: &str) -> Result<u64, String> {
    let r = vodlab_units::parse_rate(s).map_err(|e| e.to_string())?;
    match r.bytes_per_s() {
        0 => Err(format!("`{}`: a rate of at least 1 byte/s", s.trim())),
        b => Ok(b),
    }
}

/// I/O modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
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

fn parse_policy(s: &str) -> Result<PolicySpec, String> {
    s.parse().map_err(|e| format!("{e}"))
}

fn parse_fixed(s: &str) -> Result<PolicySpec, String> {
    format!("fixed:{s}").parse().map_err(|e| format!("{e}"))
}

fn seconds(name: &str, v: f64) -> anyhow::Result<Duration> {
    Duration::try_from_secs_f64(v).with_context(|| format!("--{name} {v}: not a duration"))
}

impl ServeArgs {
    /// The prefetch policy, with `--bitrate-scale` applied.
    fn policy(&self) -> anyhow::Result<PolicySpec> {
        let mut p = self.prefetch.unwrap_or(self.prefetch_policy);
        let Some(f) = self.bitrate_scale else {
            return Ok(p);
        };
        let scaling = match &mut p {
            PolicySpec::Scaled(_, s) => s,
            PolicySpec::Auto(a) if a.scaling.is_some() => a.scaling.as_mut().expect("some"),
            _ => anyhow::bail!(
                "--bitrate-scale needs a reference bit rate in the policy (e.g. --prefetch-policy fixed:6M,ref=2095 or auto:ref=2095)"
            ),
        };
        *scaling = vodlab_prefetch::auto::Scaling::from_scale(scaling.reference_kbps, f, None)
            .map_err(|e| anyhow::anyhow!("--bitrate-scale {f}: {e}"))?;
        Ok(p)
    }

    /// The server configuration these arguments describe (validated).
    pub fn config(&self) -> anyhow::Result<Config> {
        let (tls, h2) = self.proto.settings()?;
        let cfg = Config {
            tls,
            h2,
            root: self.root.clone(),
            io: self.io.into(),
            prefetch_policy: self.policy()?,
            helpers_per_device: self.helpers,
            max_prefetch: self.max_prefetch,
            access_log: self.access_log.clone(),
            prefetch_events: self.prefetch_events.clone(),
            idle_timeout: seconds("keepalive", self.keepalive)?,
            header_timeout: seconds("header-timeout", self.header_timeout)?,
            send_timeout: seconds("send-timeout", self.send_timeout)?,
            notsent_lowat: self.notsent_lowat,
            max_connections: self.max_connections,
            stats_interval: seconds("stats-interval", self.stats_interval)?,
            pace: self.pace,
            pace_mode: self.pace_mode.into(),
            pace_burst: self.pace_burst,
            link_capacity: self.link_capacity,
            pace_chunk: self.pace_chunk,
            pace_driver: self.pace_driver,
            pace_coalesce: Duration::from_micros(self.pace_coalesce_us),
            pace_mss: self.pace_mss,
            bitrates: self.bitrates.clone(),
            default_bitrate_kbps: self.default_bitrate,
            ..Config::default()
        };
        cfg.validate()?;
        let k = crate::run::time_compression(self.time_compression)?.k();
        let cfg = cfg.compress_time(k)?;
        if self.prefetch_events.is_some() && cfg.io != vodlab_server::IoMode::Asap {
            anyhow::bail!("--prefetch-events needs --io asap (vanilla never prefetches)");
        }
        if self.prefetch_log.is_some() && !matches!(cfg.prefetch_policy, PolicySpec::Auto(_)) {
            anyhow::bail!("--prefetch-log needs --prefetch-policy auto[:...]");
        }
        Ok(cfg)
    }
}

pub fn run(a: ServeArgs) -> anyhow::Result<ExitCode> {
    let cfg = a.config()?;
    let policy = cfg.prefetch_policy;
    let mut rt = tokio::runtime::Builder::new_multi_thread();
    if let Some(n) = a.threads {
        rt.worker_threads(n.max(1));
    }
    let rt = rt.enable_all().build()?;
    rt.block_on(async {
        let server = Server::start(cfg, a.listen)
            .await
            .with_context(|| format!("serving {} on {}", a.root.display(), a.listen))?;
        let log_task = match &a.prefetch_log {
            Some(path) => Some(prefetch_log(path, server.state.clone())?),
            None => None,
        };
        let k = server.state.config().time_compression;
        if k != 1.0 {
            eprintln!("vodlab serve: time compression k = {k}: control intervals / k, bit rates x k");
        }
        let pacing = if a.pace > 0.0 {
            format!(
                ", paced {}x ({:?}, burst {} s, driver {})",
                a.pace, a.pace_mode, a.pace_burst, a.pace_driver
            )
        } else {
            String::new()
        };
        eprintln!(
            "vodlab serve: {} on {}://{} (io {:?}, prefetch policy {policy}, {} helper(s) per device{pacing}); stats at /vodlab/stats",
            a.root.display(),
            if a.proto.tls_cert.is_some() || a.proto.tls_self_signed { "http+https+h2" } else { "http+h2c" },
            server.addr,
            a.io,
            a.helpers
        );
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            _ = term.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
        if let Some(t) = log_task {
            t.abort();
        }
        eprintln!("vodlab serve: shutting down; finishing responses in flight");
        server.shutdown().await;
        eprintln!("vodlab serve: stopped");
        anyhow::Ok(())
    })?;
    Ok(ExitCode::SUCCESS)
}

/// `--prefetch-log`: creates the CSV (header) and a task that writes the
/// automatic size's new intervals every second.
fn prefetch_log(
    path: &std::path::Path,
    state: std::sync::Arc<vodlab_server::server::State>,
) -> anyhow::Result<tokio::task::JoinHandle<()>> {
    use vodlab_prefetch::autolog::IntervalCsv;
    let file = std::fs::File::create(path)
        .with_context(|| format!("--prefetch-log {}", path.display()))?;
    let mut csv = IntervalCsv::new(std::io::BufWriter::new(file))
        .with_context(|| format!("--prefetch-log {}", path.display()))?;
    let shown = path.display().to_string();
    Ok(tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        loop {
            tick.tick().await;
            let Some(view) = state.stats().prefetch_auto else {
                continue;
            };
            if let Err(e) = csv.write_new(&view) {
                eprintln!("vodlab serve: --prefetch-log {shown}: {e}; no more rows");
                return;
            }
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
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
}
