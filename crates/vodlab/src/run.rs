//! `vodlab run`.

use std::io::{IsTerminal, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::{Args, ValueEnum};
use vodlab_client::{Arrivals, Live, LoadedWorkload, Results, RunConfig};

mod arrivals;
mod transport_args;
use arrivals::{arrivals, within};
// RATE_BOUNDS, TIME_COMPRESSION_ENV and the flag parsers had their last
// users outside `run` in capacity and box, now vodlab_lab's (which keeps
// its own copies: vodlab_lab::settings::bounds, hwbox::command)
#[allow(unused_imports)]
pub(crate) use arrivals::{
    compress_arrivals, time_compression, INTERVAL_BOUNDS, MAX_LATE_THRESHOLD_MS, MAX_RAMP,
    MAX_RUN_S, RATE_BOUNDS, TIME_COMPRESSION_ENV,
};
#[allow(unused_imports)]
pub(crate) use arrivals::{millis_arg, seconds_arg};
pub use transport_args::TransportArgs;

/// Arguments of `vodlab run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// A `vodlab gen` directory (all shards, client classes, ramps) or one
    /// session script (vodlab, httperf wsesslog or CloudSuite videosesslog).
    #[arg(required_unless_present = "timing_script")]
    pub workload: Option<PathBuf>,
    /// Server to load, `http://HOST:PORT`. Only loopback addresses unless
    /// --allow-remote.
    #[arg(long, value_name = "URL")]
    pub target: String,
    /// Aggregate session arrival rate, sessions per second (split evenly over
    /// the workload's shards, each with its own seeded schedule).
    #[arg(long, value_name = "SESSIONS_PER_S", required_unless_present_any = ["steps", "ramp_rate", "timing_script"])]
    pub rate: Option<f64>,
    /// Arrival process for --rate.
    #[arg(long, value_enum, default_value_t = ArrivalKind::Poisson)]
    pub arrivals: ArrivalKind,
    /// Poisson arrivals at stepped rates: `SECONDS:RATE,SECONDS:RATE,...`
    /// (the last step lasts until the sessions run out).
    #[arg(long, value_name = "STEPS", conflicts_with_all = ["rate", "ramp_rate"])]
    pub steps: Option<String>,
    /// Poisson arrivals at a rate ramped linearly: `FROM:TO:SECONDS`.
    #[arg(
        long = "ramp-rate",
        value_name = "FROM:TO:SECONDS",
        conflicts_with = "rate"
    )]
    pub ramp_rate: Option<String>,
    /// Results directory (results.json, summary.txt, requests.csv).
    #[arg(short = 'o', long = "out", alias = "output", value_name = "DIR")]
    pub output: Option<PathBuf>,
    /// Seed of the arrival schedules.
    #[arg(long, default_value_t = vodlab_client::config::DEFAULT_SEED)]
    pub seed: u64,
    /// Width of the per-interval series in results.json, seconds.
    #[arg(long, default_value_t = vodlab_client::config::DEFAULT_INTERVAL_S, value_name = "DURATION", value_parser = arrivals::seconds_arg)]
    pub interval: f64,
    /// Start at most this many sessions (spread over shards).
    #[arg(long)]
    pub sessions: Option<usize>,
    /// Stop after this long (seconds, or `10m`, `1h`; results marked
    /// incomplete).
    #[arg(long, value_name = "DURATION", value_parser = arrivals::seconds_arg)]
    pub duration: Option<f64>,
    /// Override the workload's per-shard ramp-up (sessions not measured).
    #[arg(long)]
    pub ramp_up: Option<usize>,
    /// Override the workload's per-shard ramp-down.
    #[arg(long)]
    pub ramp_down: Option<usize>,
    /// Do not emulate client access links (rate and delay).
    #[arg(long)]
    pub no_shaping: bool,
    /// Ignore pacing and think times: every request as soon as the previous completes.
    #[arg(long)]
    pub no_pacing: bool,
    /// Send no CMCD headers. By default a request of a session that knows
    /// its bit rate carries CMCD (CTA-5004: `CMCD-Object: br,d,ot`,
    /// `CMCD-Request: bl` from the session's playout buffer, `CMCD-Session:
    /// sid`), as dash.js and hls.js can send it, and a closed-loop player's
    /// requests carry its own state (also `tb`, `mtp`, `su`, `sf`, `st`);
    /// `vodlab serve` paces and sizes prefetches by it.
    #[arg(long)]
    pub no_cmcd: bool,
    /// What a paced request does when its slot has passed because the
    /// previous response was slow: `delay` (count the interval from the late
    /// send, httperf's and the thesis's rule), `burst` (catch up with the
    /// original schedule) or `skip` (wait for the next slot of the schedule).
    #[arg(long, default_value = "delay", value_name = "BEHAVIOUR")]
    pub late_pacing: vodlab_client::LatePacing,
    /// Also write requests.csv, one row per request.
    #[arg(long)]
    pub requests_csv: bool,
    /// A session start or request send later than this (ms) counts as late;
    /// more than 1 % late makes the results invalid.
    #[arg(long, default_value_t = vodlab_client::config::DEFAULT_LATE_THRESHOLD_MS as f64, value_name = "MS", value_parser = arrivals::millis_arg)]
    pub late_threshold_ms: f64,
    /// Fraction of requests whose bytes are checked against the content of a
    /// file set written by `vodlab fileset create` (a `vodlab gen` workload
    /// only); 0 turns the check off, e.g. for a server with other content.
    #[arg(long, default_value_t = 0.01, value_name = "FRACTION")]
    pub check_bytes: f64,
    /// Client buffer B of the playback latency: seconds of content (at the
    /// request's CMCD `br` or the session's `bitrate=`) that must arrive
    /// before playback could start (the pacing paper's 4 s).
    #[arg(long, default_value_t = vodlab_client::delivery::DEFAULT_PLAYBACK_BUFFER.as_secs_f64(), value_name = "DURATION", value_parser = arrivals::seconds_arg)]
    pub playback_buffer: f64,
    /// Paced target as a multiple K of the content's bit rate: each 100 ms
    /// window after the first B seconds is judged against K × bit rate (set
    /// it to the server's `--pace`).
    #[arg(long, default_value_t = vodlab_client::config::DEFAULT_PACE_TARGET, value_name = "K")]
    pub pace_target: f64,
    /// Run only shard I of N (I from 0) of the workload's sessions, as one of
    /// N processes whose results `vodlab merge` combines exactly. Session i of
    /// script shard k (of S) is number i*S+k; this process runs the numbers
    /// equal to I mod N, each at the offset it has in the one-process
    /// schedule (docs/scale-out.md). Give every process the same --rate,
    /// --seed and workload.
    #[arg(long, value_name = "I/N")]
    pub shard: Option<String>,
    /// Replay the workload's script shards as one script with one arrival
    /// process at --rate (their sessions in shard order), as a point of
    /// `vodlab capacity` does, instead of one schedule per script shard at
    /// rate / S. `capacity --client-processes N` gives it to its children.
    #[arg(long)]
    pub one_arrival_process: bool,
    /// Start at this wall-clock time (RFC 3339 in UTC, e.g.
    /// 2025-01-31T12:00:00Z, or Unix seconds): offset 0 of every schedule,
    /// shared by the processes of a split run. A time more than a second in
    /// the past is refused. Default: at once.
    #[arg(long, value_name = "RFC3339|UNIX_SECONDS")]
    pub start_at: Option<String>,
    /// Run only the sessions of this client class of the workload (e.g.
    /// 3.5mbit); the others keep their places in the schedule but are not
    /// started. For a lab host whose kernel shapes one class's link
    /// (`vodlab lab run --flow-down`, docs/lab.md); combines with --shard.
    #[arg(long, value_name = "CLASS")]
    pub only_class: Option<String>,
    /// Write checkpoint.json (the results so far, exact for `vodlab merge`)
    /// every this many seconds, so a process killed mid-run (SIGKILL, the
    /// OOM killer, a lost pod) leaves what it measured; removed when the run
    /// writes its results. 0: never. Default: 10 with --shard, else 0.
    #[arg(long, value_name = "DURATION", value_parser = arrivals::seconds_arg)]
    pub checkpoint: Option<f64>,
    /// Time compression k: replay the workload k times faster (pacing,
    /// think times, deadlines and link delays / k; session bit rates, CMCD
    /// `br`, `read_kbps` and link rates x k; --rate, --steps and
    /// --ramp-rate rates x k and their seconds / k; --duration and
    /// --playback-buffer / k). Bytes are unchanged; results.json is in
    /// wall-clock (compressed) time. Give the server and the emulated drive
    /// the same k. Default: $VODLAB_TIME_COMPRESSION (set by `vodlab box
    /// --time-compression`), else 1.
    #[arg(long, value_name = "K")]
    pub time_compression: Option<f64>,
    /// Exit with status 1 when the results are invalid (the client could
    /// not keep its schedule) or incomplete, besides the checks that always
    /// apply (no session succeeded; `--fail-on`).
    #[arg(long)]
    pub strict: bool,
    /// Skip the one connection `run` opens before its schedule to check
    /// that the server is there (a parent that checked already: capacity's
    /// client processes).
    #[arg(long, hide = true)]
    pub no_connect_check: bool,
    #[arg(long = "fail-on", value_name = "EXPR", value_parser = crate::exit::parse_rule, help = crate::exit::FAIL_ON_HELP)]
    pub fail_on: Vec<vodlab_client::thresholds::Rule>,
    /// Allow a target that is not a loopback address.
    #[arg(long)]
    pub allow_remote: bool,
    /// No live progress.
    #[arg(short, long)]
    pub quiet: bool,
    #[command(flatten)]
    pub transport: TransportArgs,
    /// Replay an h2load timing script instead of a workload: one request a
    /// line, `offset_ms<TAB>URI`; every client runs it (see --clients,
    /// --stagger).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["workload", "rate", "steps", "ramp_rate"])]
    pub timing_script: Option<PathBuf>,
    /// Clients replaying the timing script.
    #[arg(
        long,
        default_value_t = 1,
        requires = "timing_script",
        value_name = "N"
    )]
    pub clients: usize,
    /// Milliseconds between the starts of consecutive timing-script clients.
    #[arg(
        long,
        default_value_t = 0.0,
        requires = "timing_script",
        value_name = "MS"
    )]
    pub stagger: f64,
    #[command(flatten)]
    pub player: PlayerArgs,
}

/// Closed-loop players (`--player`): each session fetches its title's
/// manifest and picks renditions with an ABR rule instead of replaying its
/// script (docs/run.md "Closed-loop players").
#[derive(Debug, Args)]
pub struct PlayerArgs {
    /// Run every session as a closed-loop player reading `dash`
    /// (`/{title}/manifest.mpd`) or `hls` (`/{title}/master.m3u8`)
    /// manifests: arrivals, titles, client classes and viewing times come
    /// from the workload, renditions from the ABR rule.
    #[arg(long, value_name = "dash|hls", conflicts_with_all = ["timing_script", "requests_csv"])]
    pub player: Option<vodlab_client::player_run::PlayerKind>,
    /// ABR rule of the players: throughput, bola, bba, dynamic, bolae,
    /// dynamicdash (docs/abr.md).
    #[arg(
        long,
        default_value = "dynamic",
        value_name = "RULE",
        requires = "player"
    )]
    pub abr: vodlab_client::player::AbrRule,
    /// Player buffer capacity, seconds (docs/abr.md; Sabre's 25 s).
    #[arg(
        long,
        default_value_t = 25.0,
        value_name = "DURATION",
        value_parser = arrivals::seconds_arg,
        requires = "player"
    )]
    pub max_buffer: f64,
    /// Never abandon a segment download.
    #[arg(long, requires = "player")]
    pub no_abandon: bool,
    /// Play at most this many segments per session (default: the
    /// session's viewing time).
    #[arg(long, value_name = "N", requires = "player")]
    pub max_segments: Option<usize>,
    /// A player's request (manifest or segment) taking longer than this
    /// ends its session, seconds.
    #[arg(
        long,
        default_value_t = 30.0,
        value_name = "DURATION",
        value_parser = arrivals::seconds_arg,
        requires = "player"
    )]
    pub player_timeout: f64,
    /// Write each player session's ITU-T P.1203 mode-0 input to
    /// `OUTPUT/p1203/{session}.json`.
    #[arg(long, requires = "player")]
    pub p1203: bool,
    /// Keep the rendition timeline (every segment's request time, download
    /// time, rendition and buffer level after; every rebuffer) of the N
    /// sessions with the smallest ids in `players.timelines` of
    /// results.json and in the report; 0: none (docs/run.md "Rendition
    /// timelines"). E.g. `--player-timelines 20`.
    #[arg(long, value_name = "N", default_value_t = vodlab_client::player_run::DEFAULT_TIMELINES, requires = "player")]
    pub player_timelines: usize,
}

impl PlayerArgs {
    /// The players' settings, or `None` without `--player`.
    fn config(
        &self,
        out_dir: &Path,
    ) -> anyhow::Result<Option<vodlab_client::player_run::PlayerRun>> {
        use vodlab_client::player_run::PlayerRun;
        let Some(kind) = self.player else {
            return Ok(None);
        };
        anyhow::ensure!(
            self.max_buffer.is_finite() && (1.0..=3600.0).contains(&self.max_buffer),
            "--max-buffer must be between 1 and 3600 seconds, got {}",
            self.max_buffer
        );
        anyhow::ensure!(
            self.player_timeout.is_finite() && (0.1..=3600.0).contains(&self.player_timeout),
            "--player-timeout must be between 0.1 and 3600 seconds, got {}",
            self.player_timeout
        );
        let cfg = vodlab_client::player::PlayerConfig {
            abr: self.abr,
            max_buffer_ms: self.max_buffer * 1000.0,
            abandon: !self.no_abandon,
            ..Default::default()
        };
        let mut run = PlayerRun::new(kind, cfg);
        run.max_segments = self.max_segments;
        run.request_timeout = Duration::from_secs_f64(self.player_timeout);
        run.timelines = self.player_timelines;
        if self.p1203 {
            let d = out_dir.join("p1203");
            std::fs::create_dir_all(&d).with_context(|| format!("creating {}", d.display()))?;
            run.p1203_dir = Some(d);
        }
        run.validate().map_err(anyhow::Error::msg)?;
        Ok(Some(run))
    }
}

/// Arrival processes for a fixed rate.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ArrivalKind {
    /// Exponential gaps (the papers' choice).
    Poisson,
    /// Evenly spaced.
    Constant,
}

/// `http://HOST:PORT` → (`HOST:PORT` to connect to, the authority for
/// `Host`) ([`vodlab_client::config::parse_target`]).
pub(crate) fn parse_target(url: &str) -> anyhow::Result<(String, String)> {
    vodlab_client::config::parse_target(url).map_err(anyhow::Error::msg)
}

pub(crate) use vodlab_client::config::raise_nofile;

/// The timing script's workload and arrivals (`--timing-script`).
fn timing_workload(a: &RunArgs, file: &Path) -> anyhow::Result<(LoadedWorkload, Arrivals)> {
    anyhow::ensure!(
        (1..=1_000_000).contains(&a.clients),
        "--clients must be from 1 to 1000000, got {}",
        a.clients
    );
    within("--stagger", a.stagger, 0.0, MAX_RUN_S * 1e3)?;
    let text = std::fs::read_to_string(file)
        .with_context(|| format!("reading the timing script {}", file.display()))?;
    let session = vodlab_client::timing::parse(&text)
        .with_context(|| format!("timing script {}", file.display()))?;
    Ok(vodlab_client::timing::workload(
        file, &session, a.clients, a.stagger,
    ))
}

pub fn run(a: RunArgs) -> anyhow::Result<ExitCode> {
    let tc = time_compression(a.time_compression)?;
    if !tc.is_none() {
        anyhow::ensure!(
            a.timing_script.is_none() && a.player.player.is_none(),
            "--time-compression {}: not with --timing-script or --player (their times come from the file or the manifests)",
            tc.k()
        );
    }
    let (work, arrivals) = match &a.timing_script {
        Some(f) => timing_workload(&a, f)?,
        None => {
            let w = a.workload.as_deref().expect("clap requires a workload");
            let work = LoadedWorkload::open(w)
                .with_context(|| format!("loading the workload {}", w.display()))?;
            (work, compress_arrivals(arrivals(&a)?, tc))
        }
    };
    let source = a
        .timing_script
        .as_deref()
        .or(a.workload.as_deref())
        .expect("clap requires one")
        .to_path_buf();
    let transport = a.transport.config(&a.target)?;
    within(
        "--interval",
        a.interval,
        INTERVAL_BOUNDS.0,
        INTERVAL_BOUNDS.1,
    )?;
    let max_duration = match a.duration {
        Some(d) if d > 0.0 && d <= MAX_RUN_S => Some(Duration::from_secs_f64(tc.seconds(d))),
        Some(d) => bail!(
            "--duration must be a number of seconds > 0 and at most {MAX_RUN_S} (a week), got {d}"
        ),
        None => None,
    };
    let late_threshold_ms = within(
        "--late-threshold-ms",
        a.late_threshold_ms,
        0.0,
        MAX_LATE_THRESHOLD_MS,
    )?;
    for (flag, v) in [("--ramp-up", a.ramp_up), ("--ramp-down", a.ramp_down)] {
        if let Some(n) = v {
            anyhow::ensure!(n <= MAX_RAMP, "{flag} must be at most {MAX_RAMP}, got {n}");
        }
    }
    let (hostport, host) = parse_target(&a.target)?;
    check_rules(
        &a.fail_on,
        &work.classes.keys().cloned().collect::<Vec<_>>(),
    )?;
    let mut work = work;
    anyhow::ensure!(
        work.session_count() > 0,
        "{}: no sessions to run",
        source.display()
    );
    if let Some(n) = a.ramp_up {
        work.ramp_up = n;
    }
    if let Some(n) = a.ramp_down {
        work.ramp_down = n;
    }
    if a.one_arrival_process {
        vodlab_lab::procs::one_arrival_process(&mut work);
    }
    vodlab_lab::runner::compress_workload(&mut work, tc);
    let nofile = raise_nofile();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let addr: SocketAddr = rt
        .block_on(tokio::net::lookup_host(&hostport))
        .with_context(|| format!("resolving {hostport}"))?
        .next()
        .with_context(|| format!("{hostport} has no address"))?;
    if !a.allow_remote && !is_loopback(addr.ip()) {
        bail!("--target {} resolves to {}, not a loopback address; pass --allow-remote to load a remote server", a.target, addr.ip());
    }
    let mut cfg = RunConfig::new(addr, host, a.target.clone(), arrivals);
    cfg.seed = a.seed;
    cfg.transport = transport;
    cfg.interval_s = a.interval;
    cfg.shaping = !a.no_shaping;
    if let Some(c) = &a.only_class {
        anyhow::ensure!(
            work.classes.contains_key(c),
            "--only-class {c:?}: the workload's classes are {:?}",
            work.classes.keys().collect::<Vec<_>>()
        );
    }
    cfg.only_class = a.only_class.clone();
    cfg.pacing = !a.no_pacing;
    cfg.cmcd = !a.no_cmcd;
    cfg.max_sessions = a.sessions;
    cfg.late_pacing = a.late_pacing;
    cfg.max_duration = max_duration;
    cfg.late_threshold = Duration::from_secs_f64(late_threshold_ms / 1000.0);
    anyhow::ensure!(
        (0.0..=1.0).contains(&a.check_bytes),
        "--check-bytes must be between 0 and 1"
    );
    cfg.check_bytes = a.check_bytes;
    anyhow::ensure!(
        a.playback_buffer.is_finite() && (0.001..=3600.0).contains(&a.playback_buffer),
        "--playback-buffer must be between 0.001 and 3600 seconds"
    );
    cfg.playback_buffer = Duration::from_secs_f64(tc.seconds(a.playback_buffer));
    anyhow::ensure!(
        a.pace_target.is_finite() && (0.01..=1000.0).contains(&a.pace_target),
        "--pace-target must be between 0.01 and 1000"
    );
    cfg.pace_target = a.pace_target;
    cfg.shard = a
        .shard
        .as_deref()
        .map(vodlab_client::ShardSpec::parse)
        .transpose()?;
    cfg.start_at = a
        .start_at
        .as_deref()
        .map(|s| parse_start_at(s, std::time::SystemTime::now()))
        .transpose()?;
    let out_dir = a.output.clone().unwrap_or_else(|| {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        PathBuf::from(format!("results/run-{t}"))
    });
    std::fs::create_dir_all(&out_dir).with_context(|| format!("creating {}", out_dir.display()))?;
    if a.requests_csv {
        cfg.requests_csv = Some(out_dir.join("requests.csv"));
    }
    let every = a
        .checkpoint
        .unwrap_or(if cfg.shard.is_some() { 10.0 } else { 0.0 });
    anyhow::ensure!(
        every.is_finite() && (every == 0.0 || (0.1..=86_400.0).contains(&every)),
        "--checkpoint must be 0 (never) or between 0.1 and 86400 seconds, not {every}"
    );
    // a checkpoint of an earlier run in this directory is not this run's
    let stale = out_dir.join(vodlab_client::CHECKPOINT_FILE);
    if stale.exists() {
        std::fs::remove_file(&stale).with_context(|| format!("removing {}", stale.display()))?;
    }
    cfg.checkpoint = (every > 0.0).then(|| vodlab_client::CheckpointConfig {
        dir: out_dir.clone(),
        every: Duration::from_secs_f64(every),
    });
    cfg.player = a.player.config(&out_dir)?;
    // one connection before the schedule starts, after every check of the
    // flags (a usage error is 2 whatever the server): a server that is not
    // there is "could not run" (exit 3) at once, not a run of failures
    if !a.no_connect_check {
        reachable(&a.target, addr)?;
    }
    let total = a
        .sessions
        .map_or(work.session_count(), |n| n.min(work.session_count()));
    if !a.quiet {
        let part = cfg
            .shard
            .map_or_else(String::new, |s| format!(", running shard {s} of them"));
        eprintln!(
            "vodlab run: {} {} from {} ({} script shard(s){part}) against {} ({addr}, {}); open files limit {nofile}",
            total,
            cfg.player.as_ref().map_or_else(
                || "sessions".to_string(),
                |p| format!("{} players ({})", p.kind, p.config.abr)
            ),
            source.display(),
            work.shards.len(),
            a.target,
            cfg.transport.protocol
        );
        if !tc.is_none() {
            eprintln!(
                "vodlab run: time compression k = {}: the workload runs {} times faster (give the server and the drive the same k); results are in wall-clock time",
                tc.k(),
                tc.k()
            );
        }
        if let Some(at) = cfg.start_at {
            let wait = at
                .duration_since(std::time::SystemTime::now())
                .unwrap_or_default();
            eprintln!(
                "vodlab run: starting at {} (in {:.1} s)",
                humantime::format_rfc3339_millis(at),
                wait.as_secs_f64()
            );
        }
    }

    let live = Arc::new(Live::default());
    let (cancel_tx, cancel_rx) = tokio::sync::watch::channel(false);
    let progress = (!a.quiet).then(|| spawn_progress(live.clone(), total as u64));
    let work = Arc::new(work);
    // SIGINT (Ctrl-C) and SIGTERM (kill, a supervisor, a CI timeout) both
    // stop the run; the results so far are written, marked incomplete
    let mut term = {
        let _in_runtime = rt.enter();
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .context("installing the SIGTERM handler")?
    };
    let signalled = Arc::new(std::sync::atomic::AtomicU8::new(0));
    let seen = signalled.clone();
    let results = rt.block_on(async {
        tokio::spawn(async move {
            let name = tokio::select! {
                r = tokio::signal::ctrl_c() => r.ok().map(|_| "SIGINT"),
                r = term.recv() => r.map(|_| "SIGTERM"),
            };
            if let Some(name) = name {
                let code = if name == "SIGINT" {
                    crate::exit::INTERRUPTED
                } else {
                    crate::exit::TERMINATED
                };
                seen.store(code, Ordering::Relaxed);
                eprintln!("\nvodlab run: interrupted by {name}; writing the results so far");
                let _ = cancel_tx.send(true);
            }
        });
        vodlab_client::run_parts(work, cfg, live.clone(), cancel_rx).await
    })?;
    let (results, dump) = results;
    live.done.store(true, Ordering::Relaxed);
    if let Some(p) = progress {
        let _ = p.join();
    }
    write_results(&out_dir, &results)?;
    write_metrics(&out_dir, &dump)?;
    // the results are written: the last checkpoint is superseded
    let _ = std::fs::remove_file(out_dir.join(vodlab_client::CHECKPOINT_FILE));
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(results.table().as_bytes())?;
    writeln!(
        stdout,
        "  results: {}",
        out_dir.join("results.json").display()
    )?;
    rt.shutdown_timeout(Duration::from_millis(100));
    judge(
        &results,
        &a.fail_on,
        a.strict,
        signalled.load(Ordering::Relaxed),
    )
}

/// Opens (and closes) one TCP connection to `addr`: a server that is not
/// there is [`crate::exit::CouldNotRun`] (exit status 3) before anything
/// is measured.
pub(crate) fn reachable(target: &str, addr: SocketAddr) -> anyhow::Result<()> {
    std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(5))
        .map(drop)
        .map_err(|e| {
            crate::exit::could_not_run(format!(
                "--target {target}: cannot connect to {addr} ({e}); is the server running and listening there?"
            ))
        })
}

/// Checks `--fail-on` rules against the shape of a run's results before
/// the run. A rule under `classes` or `players` is checked only for its
/// section (the run decides which classes and players there are) and in
/// full after the run.
pub(crate) fn check_rules(
    rules: &[vodlab_client::thresholds::Rule],
    classes: &[String],
) -> anyhow::Result<()> {
    let shape = vodlab_client::results::shape(classes);
    vodlab_client::thresholds::check_before(rules, &shape, &["classes", "players"])?;
    Ok(())
}

/// The exit status of a run that wrote its results (README "Exit
/// statuses"): 130/143 when a signal stopped it; 3 when the server could
/// not be reached; 1 when no session succeeded, a `--fail-on` rule was
/// breached, or (`--strict`) the results are invalid or incomplete; else 0.
pub(crate) fn judge(
    results: &vodlab_client::Results,
    rules: &[vodlab_client::thresholds::Rule],
    strict: bool,
    signal: u8,
) -> anyhow::Result<ExitCode> {
    use crate::exit;
    let breaches = exit::judge("run", rules, results)?;
    if signal != 0 {
        return Ok(ExitCode::from(signal));
    }
    if results.stopped_by == vodlab_client::StopReason::ServerUnreachable {
        eprintln!("vodlab run: could not run: the server stopped accepting connections");
        return Ok(ExitCode::from(exit::COULD_NOT_RUN));
    }
    if results.no_session_succeeded() {
        eprintln!("vodlab run: failed: no session succeeded");
        return Ok(ExitCode::from(exit::CHECK_FAILED));
    }
    if !breaches.is_empty() || (strict && !(results.valid && results.complete)) {
        return Ok(ExitCode::from(exit::CHECK_FAILED));
    }
    Ok(ExitCode::from(exit::OK))
}

pub(crate) use vodlab_client::config::is_loopback;

pub(crate) fn write_results(dir: &Path, r: &Results) -> anyhow::Result<()> {
    let json = dir.join("results.json");
    let mut text = serde_json::to_string_pretty(r)?;
    text.push('\n');
    std::fs::write(&json, text).with_context(|| format!("writing {}", json.display()))?;
    let summary = dir.join("summary.txt");
    std::fs::write(&summary, r.table())
        .with_context(|| format!("writing {}", summary.display()))?;
    Ok(())
}

/// Writes `metrics.json`, the exact state `vodlab merge` combines.
pub(crate) fn write_metrics(dir: &Path, d: &vodlab_client::MetricsDump) -> anyhow::Result<()> {
    let p = dir.join("metrics.json");
    let mut text = serde_json::to_string(d)?;
    text.push('\n');
    std::fs::write(&p, text).with_context(|| format!("writing {}", p.display()))
}

/// Parses `--start-at`: RFC 3339 (UTC) or Unix seconds; refuses a time more
/// than a second before `now`, or more than a week after it.
pub(crate) fn parse_start_at(
    s: &str,
    now: std::time::SystemTime,
) -> anyhow::Result<std::time::SystemTime> {
    let t = if let Ok(secs) = s.trim().parse::<f64>() {
        anyhow::ensure!(
            secs.is_finite() && secs >= 0.0,
            "--start-at `{s}`: Unix seconds must be a number >= 0"
        );
        std::time::UNIX_EPOCH + Duration::from_secs_f64(secs)
    } else {
        humantime::parse_rfc3339_weak(s.trim()).with_context(|| {
            format!(
                "--start-at `{s}`: expected RFC 3339 in UTC (2025-01-31T12:00:00Z) or Unix seconds"
            )
        })?
    };
    if let Err(e) = t.duration_since(now) {
        let past = e.duration().as_secs_f64();
        anyhow::ensure!(
            past <= 1.0,
            "--start-at `{s}` is {past:.1} s in the past (at most 1 s is accepted; pick a time far enough ahead for every process to be ready)"
        );
    } else if let Ok(ahead) = t.duration_since(now) {
        anyhow::ensure!(
            ahead.as_secs_f64() <= MAX_RUN_S,
            "--start-at `{s}` is more than a week ahead"
        );
    }
    Ok(t)
}

/// Live progress on stderr: a status line on a terminal, a line every 10 s otherwise.
pub(crate) fn spawn_progress(live: Arc<Live>, total: u64) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let tty = std::io::stderr().is_terminal();
        let bar = indicatif::ProgressBar::new(total);
        if tty {
            bar.set_style(
                indicatif::ProgressStyle::with_template(
                    "{elapsed_precise} [{bar:30}] {pos}/{len} sessions started | {msg}",
                )
                .expect("template")
                .progress_chars("=> "),
            );
        } else {
            bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
        }
        let start = Instant::now();
        let (mut last_bytes, mut last_t, mut last_print) = (0u64, start, start);
        while !live.done.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(250));
            let now = Instant::now();
            if now.duration_since(last_t) < Duration::from_secs(1) {
                continue;
            }
            let bytes = live.bytes.load(Ordering::Relaxed);
            let rate =
                (bytes - last_bytes) as f64 / now.duration_since(last_t).as_secs_f64() / 1048576.0;
            last_bytes = bytes;
            last_t = now;
            let started = live.started.load(Ordering::Relaxed);
            let msg = format!(
                "{} active, {} done, {} failed, {:.1} MB/s",
                live.active.load(Ordering::Relaxed),
                live.completed.load(Ordering::Relaxed),
                live.failed.load(Ordering::Relaxed),
                rate
            );
            if tty {
                bar.set_position(started);
                bar.set_message(msg);
            } else if now.duration_since(last_print) >= Duration::from_secs(10) {
                last_print = now;
                eprintln!(
                    "[{:>6.0} s] {started}/{total} sessions started, {msg}",
                    now.duration_since(start).as_secs_f64()
                );
            }
        }
        bar.finish_and_clear();
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::UNIX_EPOCH;

    /// Durations take the unit grammar (docs/units.md); a bare number keeps
    /// its flag's unit and reaches the flag's bound check as written.
    #[test]
    fn duration_flags_take_the_unit_grammar() {
        assert_eq!(seconds_arg("500ms"), Ok(0.5));
        assert_eq!(seconds_arg("2m"), Ok(120.0));
        assert_eq!(seconds_arg("90"), Ok(90.0));
        assert_eq!(seconds_arg("1e300"), Ok(1e300), "bound checked later");
        assert!(seconds_arg("-1").is_ok_and(|x| x == -1.0));
        assert!(seconds_arg("5 parsecs").unwrap_err().contains("5 parsecs"));
        assert_eq!(millis_arg("1.5s"), Ok(1500.0));
        assert_eq!(millis_arg("250"), Ok(250.0));
        assert_eq!(millis_arg("250ms"), Ok(250.0));
        use clap::Parser;
        let cli = crate::cli::Cli::try_parse_from([
            "vodlab",
            "run",
            "w",
            "--target",
            "http://127.0.0.1:1",
            "--rate",
            "1",
            "--interval",
            "500ms",
            "--duration",
            "10m",
            "--late-threshold-ms",
            "0.1s",
        ])
        .unwrap();
        let crate::cli::Command::Run(a) = cli.command else {
            panic!("not run")
        };
        assert_eq!(
            (a.interval, a.duration, a.late_threshold_ms),
            (0.5, Some(600.0), 100.0)
        );
    }

    /// `vodlab run`'s defaults, as `--help` shows them, are the library's:
    /// a run with no flags gets the settings `RunConfig::new` gives.
    #[test]
    fn help_defaults_are_the_settings_a_run_gets() {
        use clap::Parser;
        let cli = crate::cli::Cli::try_parse_from([
            "vodlab",
            "run",
            "w",
            "--target",
            "http://127.0.0.1:1",
            "--rate",
            "1",
        ])
        .unwrap();
        let crate::cli::Command::Run(a) = cli.command else {
            panic!("not run")
        };
        let lib = RunConfig::new(
            "127.0.0.1:1".parse().unwrap(),
            "127.0.0.1".into(),
            "http://127.0.0.1:1".into(),
            Arrivals::Poisson { rate: 1.0 },
        );
        assert_eq!(a.seed, lib.seed);
        assert_eq!(a.interval, lib.interval_s);
        assert_eq!(
            Duration::from_secs_f64(a.late_threshold_ms / 1e3),
            lib.late_threshold
        );
        assert_eq!(a.late_pacing, lib.late_pacing);
        assert_eq!(
            Duration::from_secs_f64(a.playback_buffer),
            lib.playback_buffer
        );
        assert_eq!(a.pace_target, lib.pace_target);
        assert_eq!(!a.no_pacing, lib.pacing);
        assert_eq!(!a.no_shaping, lib.shaping);
        assert_eq!(!a.no_cmcd, lib.cmcd);
        // and --help prints them
        let help = crate::cli::Cli::try_parse_from(["vodlab", "run", "--help"])
            .unwrap_err()
            .to_string();
        for (flag, v) in [
            ("--interval", format!("{}", lib.interval_s)),
            ("--pace-target", format!("{}", lib.pace_target)),
            (
                "--playback-buffer",
                format!("{}", lib.playback_buffer.as_secs_f64()),
            ),
        ] {
            let at = help
                .find(&format!("{flag} <"))
                .unwrap_or_else(|| panic!("{flag}: {help}"));
            let rest = &help[at..];
            let next = rest[2..].find("\n      --").map_or(rest.len(), |i| i + 2);
            assert!(
                rest[..next].contains(&format!("[default: {v}]")),
                "{flag}: {}",
                &rest[..next]
            );
        }
    }

    #[test]
    fn arrivals_are_compressed_rates_up_lengths_down() {
        let tc = vodlab_workload::TimeCompression::new(10.0).unwrap();
        let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
        match compress_arrivals(Arrivals::Poisson { rate: 0.5 }, tc) {
            Arrivals::Poisson { rate } => assert!(close(rate, 5.0)),
            other => panic!("{other:?}"),
        }
        match compress_arrivals(Arrivals::Constant { rate: 2.0 }, tc) {
            Arrivals::Constant { rate } => assert!(close(rate, 20.0)),
            other => panic!("{other:?}"),
        }
        match compress_arrivals(
            Arrivals::Steps {
                steps: vec![(60.0, 1.0), (30.0, 4.0)],
            },
            tc,
        ) {
            Arrivals::Steps { steps } => {
                assert!(close(steps[0].0, 6.0) && close(steps[0].1, 10.0));
                assert!(close(steps[1].0, 3.0) && close(steps[1].1, 40.0));
            }
            other => panic!("{other:?}"),
        }
        match compress_arrivals(
            Arrivals::Ramp {
                from: 1.0,
                to: 3.0,
                over_s: 100.0,
            },
            tc,
        ) {
            Arrivals::Ramp { from, to, over_s } => {
                assert!(close(from, 10.0) && close(to, 30.0) && close(over_s, 10.0))
            }
            other => panic!("{other:?}"),
        }
        // sessions started over the same nominal window are the same number
        let one = vodlab_workload::TimeCompression::NONE;
        match compress_arrivals(Arrivals::Poisson { rate: 0.5 }, one) {
            Arrivals::Poisson { rate } => assert_eq!(rate, 0.5),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn time_compression_flag_is_checked_naming_it() {
        assert_eq!(time_compression(Some(4.0)).unwrap().k(), 4.0);
        let e = time_compression(Some(0.0)).unwrap_err().to_string();
        assert!(e.contains("--time-compression"), "{e}");
    }

    #[test]
    fn start_at_takes_rfc3339_or_unix_seconds_and_refuses_the_past() {
        let now = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let at = |s| parse_start_at(s, now);
        assert_eq!(
            at("1700000010.5").unwrap(),
            now + Duration::from_millis(10_500)
        );
        assert_eq!(
            at("2023-11-14T22:13:30Z").unwrap(),
            now + Duration::from_secs(10)
        );
        // just passed: accepted (the first sessions start late, and say so)
        assert!(at("1699999999.5").is_ok());
        let e = at("1699999990").unwrap_err().to_string();
        assert!(e.contains("in the past"), "{e}");
        assert!(at("tomorrow").is_err());
        assert!(at("1800000000").is_err(), "years ahead");
    }
}
