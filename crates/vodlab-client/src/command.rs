//! `vodlab run` as a library call: [`run`] checks its [`RunSettings`],
//! loads the workload (or an h2load timing script), builds the
//! [`RunConfig`], runs it and writes the results into its directory. What
//! the caller shows (the plan, live progress) and how it stops the run (a
//! signal) go through a [`RunObserver`].

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use vodlab_workload::TimeCompression;

use crate::settings::{
    compress_arrivals, parse_start_at, within, RunSettings, SettingsError, INTERVAL_BOUNDS,
    MAX_LATE_THRESHOLD_MS, MAX_RAMP, MAX_RUN_S,
};
use crate::{Arrivals, Live, LoadedWorkload, Results, RunConfig};

/// Why `vodlab run` could not run, or could not write its results.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// A flag is unusable.
    #[error(transparent)]
    Settings(#[from] SettingsError),
    /// The workload could not be loaded.
    #[error("loading the workload {}", path.display())]
    Load {
        /// The workload given.
        path: PathBuf,
        /// Why.
        #[source]
        source: crate::load::LoadError,
    },
    /// The timing script could not be read.
    #[error("reading the timing script {}", path.display())]
    ReadTimingScript {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The timing script is malformed.
    #[error("timing script {}", path.display())]
    TimingScript {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: crate::timing::TimingError,
    },
    /// A `--fail-on` rule names nothing the results will have.
    #[error(transparent)]
    Rule(#[from] crate::out::thresholds::RuleError),
    /// The target's host name did not resolve.
    #[error("resolving {hostport}")]
    Resolve {
        /// `HOST:PORT`.
        hostport: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A file or directory of the results could not be made or removed.
    #[error("{action} {}", path.display())]
    File {
        /// `creating`, `removing`.
        action: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The measurement could not happen at all (the server is not there):
    /// exit status 3 for the binary.
    #[error("{0}")]
    CouldNotRun(String),
    /// The observer could not let the run start.
    #[error("{0}")]
    Observer(#[source] std::io::Error),
    /// The runtime or the run failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// The results could not be written.
    #[error(transparent)]
    Write(#[from] crate::out::results::WriteError),
    /// The run ended but a file of its results could not be written (no
    /// space left on the device, say): the file keeps its previous
    /// content, and the run's last checkpoint, if it wrote one, stays.
    #[error("the run ended but its results could not be written: {source}{}", checkpoint.as_ref().map_or_else(String::new, |c| format!("; this run's last checkpoint is {}", c.display())))]
    NotWritten {
        /// What the run measured (the caller can still show it).
        results: Box<Results>,
        /// This run's last checkpoint, when it is there.
        checkpoint: Option<PathBuf>,
        /// Why.
        #[source]
        source: crate::out::results::WriteError,
    },
}

/// A [`SettingsError::Flag`] as a [`RunError`].
fn flag(msg: String) -> RunError {
    RunError::Settings(SettingsError::Flag(msg))
}

/// Stops a started run: the results so far are written, marked
/// incomplete (as Ctrl-C does).
#[derive(Debug, Clone)]
pub struct Stop(Arc<tokio::sync::watch::Sender<bool>>);

impl Stop {
    /// Stops the run.
    pub fn stop(&self) {
        let _ = self.0.send(true);
    }
}

/// What a run is about to do, once every flag is checked and the server
/// answered.
#[derive(Debug)]
pub struct Plan<'a> {
    /// The workload or timing script given.
    pub source: &'a Path,
    /// The workload, as it will run.
    pub work: &'a LoadedWorkload,
    /// The run's settings.
    pub config: &'a RunConfig,
    /// Sessions it will start at most (`--sessions` or the workload's).
    pub sessions: u64,
    /// The open files limit, raised.
    pub nofile: u64,
    /// What the run holds at its peak, at least (not worked out for
    /// players).
    pub need: Option<crate::io::engine::DescriptorNeed>,
    /// The time compression.
    pub time_compression: TimeCompression,
}

/// What the caller sees of a run and how it can stop it.
pub trait RunObserver {
    /// Everything is checked: what the run will do.
    fn ready(&mut self, _plan: &Plan<'_>) {}
    /// The run starts: `live` counts as it goes; `stop` ends it early.
    /// An error refuses the start.
    fn started(&mut self, _live: &Arc<Live>, _sessions: u64, _stop: &Stop) -> std::io::Result<()> {
        Ok(())
    }
    /// The run ended; its results are about to be written.
    fn finished(&mut self) {}
}

/// An observer that shows nothing and never stops the run.
pub struct Quiet;
impl RunObserver for Quiet {}

/// A finished run: its results, written into `dir`.
#[derive(Debug)]
pub struct Ran {
    /// The results.
    pub results: Results,
    /// The results directory (results.json, summary.txt, metrics.json).
    pub dir: PathBuf,
}

/// The timing script's workload and arrivals (`--timing-script`).
fn timing_workload(a: &RunSettings, file: &Path) -> Result<(LoadedWorkload, Arrivals), RunError> {
    if !(1..=1_000_000).contains(&a.clients) {
        return Err(flag(format!(
            "--clients must be from 1 to 1000000, got {}",
            a.clients
        )));
    }
    within("--stagger", a.stagger, 0.0, MAX_RUN_S * 1e3)?;
    let text = std::fs::read_to_string(file).map_err(|source| RunError::ReadTimingScript {
        path: file.into(),
        source,
    })?;
    let session = crate::timing::parse(&text).map_err(|source| RunError::TimingScript {
        path: file.into(),
        source,
    })?;
    Ok(crate::timing::workload(
        file, &session, a.clients, a.stagger,
    ))
}

/// Checks `--fail-on` rules against the shape of a run's results before
/// the run. A rule under `classes` or `players` is checked only for its
/// section (the run decides which classes and players there are) and in
/// full after the run.
pub fn check_rules(
    rules: &[crate::out::thresholds::Rule],
    classes: &[String],
) -> Result<(), crate::out::thresholds::RuleError> {
    let shape = crate::out::results::shape(classes);
    crate::out::thresholds::check_before(rules, &shape, &["classes", "players"])
}

/// Opens (and closes) one TCP connection to `addr`: a server that is not
/// there is [`RunError::CouldNotRun`] before anything is measured.
pub fn reachable(target: &str, addr: SocketAddr) -> Result<(), RunError> {
    std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(5))
        .map(drop)
        .map_err(|e| {
            RunError::CouldNotRun(format!(
                "--target {target}: cannot connect to {addr} ({e}); is the server running and listening there?"
            ))
        })
}

/// [`reachable`] for HTTP/3: one QUIC handshake and HTTP/3's SETTINGS with
/// the run's TLS settings (UDP has no connection to open without them).
pub fn quic_reachable(
    rt: &tokio::runtime::Runtime,
    target: &str,
    addr: SocketAddr,
    host: &str,
    t: &crate::io::transport::TransportConfig,
) -> Result<(), RunError> {
    let c = crate::io::transport::Connector::new(addr, host, t).map_err(SettingsError::from)?;
    let failed = |why: String| {
        RunError::CouldNotRun(format!(
            "--target {target}: no HTTP/3 (QUIC) connection to {addr} ({why}); \
             is the server serving h3 on that UDP port?"
        ))
    };
    rt.block_on(async {
        let s = c.session(1);
        let link = crate::core::link::LinkSpec::default();
        match tokio::time::timeout(Duration::from_secs(5), s.connect(0, &link)).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(f)) => Err(failed(f.detail)),
            Err(_) => Err(failed("no answer within 5 s".into())),
        }
    })
}

/// `vodlab run`: checks the settings, loads the workload, runs it and
/// writes results.json, summary.txt and metrics.json into the results
/// directory (`--out`, else `results/run-UNIX_SECONDS`).
pub fn run(a: &RunSettings, observer: &mut impl RunObserver) -> Result<Ran, RunError> {
    let tc = TimeCompression::from_flag_or_env(a.time_compression).map_err(SettingsError::from)?;
    if !tc.is_none() && (a.timing_script.is_some() || a.player.player.is_some()) {
        return Err(flag(format!(
            "--time-compression {}: not with --timing-script or --player (their times come from the file or the manifests)",
            tc.k()
        )));
    }
    let (mut work, arrivals) = match &a.timing_script {
        Some(f) => timing_workload(a, f)?,
        None => {
            let w = a.workload.as_deref().expect("clap requires a workload");
            let work = LoadedWorkload::open(w).map_err(|source| RunError::Load {
                path: w.into(),
                source,
            })?;
            (work, compress_arrivals(a.arrivals()?, tc))
        }
    };
    let source = a
        .timing_script
        .as_deref()
        .or(a.workload.as_deref())
        .expect("clap requires one");
    let transport = a.transport.config(&a.target)?;
    within(
        "--interval",
        a.interval,
        INTERVAL_BOUNDS.0,
        INTERVAL_BOUNDS.1,
    )?;
    let max_duration = match a.duration {
        Some(d) if d > 0.0 && d <= MAX_RUN_S => Some(Duration::from_secs_f64(tc.seconds(d))),
        Some(d) => {
            return Err(flag(format!(
            "--duration must be a number of seconds > 0 and at most {MAX_RUN_S} (a week), got {d}"
        )))
        }
        None => None,
    };
    let late_threshold_ms = within(
        "--late-threshold-ms",
        a.late_threshold_ms,
        0.0,
        MAX_LATE_THRESHOLD_MS,
    )?;
    for (f, v) in [("--ramp-up", a.ramp_up), ("--ramp-down", a.ramp_down)] {
        if let Some(n) = v.filter(|n| *n > MAX_RAMP) {
            return Err(flag(format!("{f} must be at most {MAX_RAMP}, got {n}")));
        }
    }
    let (hostport, host) = crate::config::parse_target(&a.target).map_err(flag)?;
    check_rules(
        &a.fail_on,
        &work.classes.keys().cloned().collect::<Vec<_>>(),
    )?;
    if work.session_count() == 0 {
        return Err(flag(format!("{}: no sessions to run", source.display())));
    }
    if let Some(n) = a.ramp_up {
        work.ramp_up = n;
    }
    if let Some(n) = a.ramp_down {
        work.ramp_down = n;
    }
    if a.one_arrival_process {
        work.one_arrival_process();
    }
    work.compress(tc);
    let nofile = crate::config::raise_nofile();
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if let Some(n) = a.threads {
        builder.worker_threads(usize::from(n));
    }
    let rt = builder.enable_all().build()?;
    let addr: SocketAddr = rt
        .block_on(tokio::net::lookup_host(&hostport))
        .map_err(|source| RunError::Resolve {
            hostport: hostport.clone(),
            source,
        })?
        .next()
        .ok_or_else(|| flag(format!("{hostport} has no address")))?;
    if !a.allow_remote && !crate::config::is_loopback(addr.ip()) {
        return Err(flag(format!("--target {} resolves to {}, not a loopback address; pass --allow-remote to load a remote server", a.target, addr.ip())));
    }
    let mut cfg = RunConfig::new(addr, host, a.target.clone(), arrivals);
    cfg.seed = a.seed;
    cfg.transport = transport;
    cfg.interval_s = a.interval;
    cfg.shaping = !a.no_shaping;
    if a.no_shaping {
        // set by `vodlab lab run --flow-down` for its client commands
        cfg.kernel_shaping = std::env::var("VODLAB_LAB_FLOW_DOWN")
            .ok()
            .filter(|r| !r.is_empty());
        if let Some(r) = &cfg.kernel_shaping {
            cfg.kernel_down = Some(vodlab_units::parse_rate(r).map_err(|e| {
                flag(format!(
                    "VODLAB_LAB_FLOW_DOWN={r:?} (set by `vodlab lab run --flow-down`): {e}"
                ))
            })?);
        }
    }
    if let Some(c) = &a.only_class {
        if !work.classes.contains_key(c) {
            return Err(flag(format!(
                "--only-class {c:?}: the workload's classes are {:?}",
                work.classes.keys().collect::<Vec<_>>()
            )));
        }
    }
    cfg.only_class = a.only_class.clone();
    cfg.pacing = !a.no_pacing;
    cfg.cmcd = !a.no_cmcd;
    cfg.max_sessions = a.sessions;
    cfg.late_pacing = a.late_pacing;
    cfg.max_duration = max_duration;
    cfg.late_threshold = Duration::from_secs_f64(late_threshold_ms / 1000.0);
    if !(0.0..=1.0).contains(&a.check_bytes) {
        return Err(flag("--check-bytes must be between 0 and 1".into()));
    }
    cfg.check_bytes = a.check_bytes;
    if !(a.playback_buffer.is_finite() && (0.001..=3600.0).contains(&a.playback_buffer)) {
        return Err(flag(
            "--playback-buffer must be between 0.001 and 3600 seconds".into(),
        ));
    }
    cfg.playback_buffer = Duration::from_secs_f64(tc.seconds(a.playback_buffer));
    if !(a.pace_target.is_finite() && (0.01..=1000.0).contains(&a.pace_target)) {
        return Err(flag("--pace-target must be between 0.01 and 1000".into()));
    }
    cfg.pace_target = a.pace_target;
    cfg.shard = a
        .shard
        .as_deref()
        .map(crate::ShardSpec::parse)
        .transpose()
        .map_err(SettingsError::from)?;
    cfg.start_at = a
        .start_at
        .as_deref()
        .map(|s| parse_start_at(s, SystemTime::now()))
        .transpose()?;
    let out_dir = a.output.clone().unwrap_or_else(|| {
        let t = SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        PathBuf::from(format!("results/run-{t}"))
    });
    std::fs::create_dir_all(&out_dir).map_err(|source| RunError::File {
        action: "creating",
        path: out_dir.clone(),
        source,
    })?;
    if a.requests_csv {
        cfg.requests_csv = Some(out_dir.join("requests.csv"));
    }
    let every = a
        .checkpoint
        .unwrap_or(if cfg.shard.is_some() { 10.0 } else { 0.0 });
    if !(every.is_finite() && (every == 0.0 || (0.1..=86_400.0).contains(&every))) {
        return Err(flag(format!(
            "--checkpoint must be 0 (never) or between 0.1 and 86400 seconds, not {every}"
        )));
    }
    // a checkpoint of an earlier run in this directory is not this run's
    let stale = out_dir.join(crate::CHECKPOINT_FILE);
    if stale.exists() {
        std::fs::remove_file(&stale).map_err(|source| RunError::File {
            action: "removing",
            path: stale.clone(),
            source,
        })?;
    }
    cfg.checkpoint = (every > 0.0).then(|| crate::CheckpointConfig {
        dir: out_dir.clone(),
        every: Duration::from_secs_f64(every),
    });
    cfg.player = a.player.config(&out_dir)?;
    if let Some(ip) = cfg
        .transport
        .source
        .iter()
        .find(|ip| ip.is_ipv4() != addr.is_ipv4())
    {
        return Err(flag(format!(
            "--source-address {ip}: not of the target's address family ({addr})"
        )));
    }
    for ip in &cfg.transport.source {
        // an address of this host binds; another fails every connect later
        std::net::TcpListener::bind(SocketAddr::new(*ip, 0)).map_err(|e| {
            flag(format!(
                "--source-address {ip}: not an address of this host ({e})"
            ))
        })?;
    }
    // sessions beyond the descriptor limit would fail one by one: say so
    // before starting, with the processes that hold them
    let need = cfg
        .player
        .is_none()
        .then(|| crate::io::engine::descriptor_need(&cfg, &work));
    if let Some(m) = need.and_then(|n| n.refusal(nofile, cfg.shard.map_or(1, |s| s.count.into()))) {
        return Err(flag(m));
    }
    // one connection before the schedule starts, after every check of the
    // flags (a usage error is 2 whatever the server): a server that is not
    // there is "could not run" (exit 3) at once, not a run of failures
    if !a.no_connect_check {
        if cfg.transport.protocol.is_h3() {
            quic_reachable(&rt, &a.target, addr, &cfg.host, &cfg.transport)?;
        } else {
            reachable(&a.target, addr)?;
        }
    }
    let total = a
        .sessions
        .map_or(work.session_count(), |n| n.min(work.session_count())) as u64;
    observer.ready(&Plan {
        source,
        work: &work,
        config: &cfg,
        sessions: total,
        nofile,
        need,
        time_compression: tc,
    });

    let live = Arc::new(Live::default());
    let (cancel_tx, cancel_rx) = tokio::sync::watch::channel(false);
    let stop = Stop(Arc::new(cancel_tx));
    observer
        .started(&live, total, &stop)
        .map_err(RunError::Observer)?;
    let work = Arc::new(work);
    let (results, dump) = rt.block_on(crate::run_parts(work, cfg, live.clone(), cancel_rx))?;
    live.done.store(true, Ordering::Relaxed);
    observer.finished();
    // each file is replaced atomically; the checkpoint goes only once all
    // three are written, so a failure here (a full disk) leaves it
    if let Err(source) = results.write(&out_dir).and_then(|()| dump.write(&out_dir)) {
        let ckpt = out_dir.join(crate::CHECKPOINT_FILE);
        rt.shutdown_timeout(Duration::from_millis(100));
        return Err(RunError::NotWritten {
            results: Box::new(results),
            checkpoint: ckpt.exists().then_some(ckpt),
            source,
        });
    }
    // the results are written: the last checkpoint is superseded
    let _ = std::fs::remove_file(out_dir.join(crate::CHECKPOINT_FILE));
    rt.shutdown_timeout(Duration::from_millis(100));
    Ok(Ran {
        results,
        dir: out_dir,
    })
}
