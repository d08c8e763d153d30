//! `vodlab serve`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, ValueEnum};
use vodlab_server::{Config, IoMode, Server};

/// Arguments of `vodlab serve`.
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
    #[arg(long, value_enum, default_value_t = Io::Asap)]
    pub io: Io,
    /// ASAP prefetch size in bytes (suffixes K, M, G: 4M).
    #[arg(long, default_value = "4M", value_parser = parse_size)]
    pub prefetch: u64,
    /// Prefetch helper threads per storage device (1 = serialized, as in the thesis).
    #[arg(long, default_value_t = 1)]
    pub helpers: usize,
    /// Append one line per request to this file (format in docs/serve.md).
    #[arg(long, value_name = "FILE")]
    pub access_log: Option<PathBuf>,
    /// Idle keep-alive timeout, seconds.
    #[arg(long, default_value_t = 60.0)]
    pub keepalive: f64,
    /// Time allowed for a complete request head, seconds (slowloris guard).
    #[arg(long, default_value_t = 10.0)]
    pub header_timeout: f64,
    /// Most simultaneous connections.
    #[arg(long, default_value_t = 10_000)]
    pub max_connections: usize,
    /// Seconds between statistics lines on stderr (0 = none).
    #[arg(long, default_value_t = 10.0)]
    pub stats_interval: f64,
    /// Worker threads (default: one per core).
    #[arg(long)]
    pub threads: Option<usize>,
}

/// I/O modes.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Io {
    /// sendfile on the blocking pool.
    Vanilla,
    /// Asynchronous serialized aggressive prefetching.
    Asap,
}

/// A size with K/M/G suffix (the box's parser), which must be > 0.
fn parse_size(s: &str) -> Result<u64, String> {
    match vodlab_lab::hwbox::parse_size(s)? {
        0 => Err(format!("`{s}` must be > 0")),
        v => Ok(v),
    }
}

pub fn run(a: ServeArgs) -> anyhow::Result<ExitCode> {
    let mut cfg = Config::new(a.root.clone());
    cfg.io = match a.io {
        Io::Vanilla => IoMode::Vanilla,
        Io::Asap => IoMode::Asap,
    };
    cfg.prefetch = a.prefetch;
    cfg.helpers_per_device = a.helpers;
    cfg.access_log = a.access_log.clone();
    cfg.idle_timeout = Duration::from_secs_f64(a.keepalive);
    cfg.header_timeout = Duration::from_secs_f64(a.header_timeout);
    cfg.max_connections = a.max_connections;
    cfg.stats_interval = Duration::from_secs_f64(a.stats_interval);
    let mut rt = tokio::runtime::Builder::new_multi_thread();
    if let Some(n) = a.threads {
        rt.worker_threads(n.max(1));
    }
    let rt = rt.enable_all().build()?;
    rt.block_on(async {
        let server = Server::start(cfg, a.listen)
            .await
            .with_context(|| format!("serving {} on {}", a.root.display(), a.listen))?;
        eprintln!(
            "vodlab serve: {} on http://{} (io {:?}, prefetch {} bytes, {} helper(s) per device); stats at /vodlab/stats",
            a.root.display(),
            server.addr,
            a.io,
            a.prefetch,
            a.helpers
        );
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            _ = term.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
        eprintln!("vodlab serve: shutting down; finishing responses in flight");
        server.shutdown().await;
        eprintln!("vodlab serve: stopped");
        anyhow::Ok(())
    })?;
    Ok(ExitCode::SUCCESS)
}
