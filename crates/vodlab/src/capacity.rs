//! `vodlab capacity`: the highest session rate a server sustains, found by
//! stepping the rate up until the criterion trips and then bisecting; every
//! point is a real `vodlab run` (docs/experiments.md).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::Args;
use serde::Serialize;
use vodlab_client::{Arrivals, Live, LoadedWorkload, Results, RunConfig, StopReason};
use vodlab_lab::{Answer, Criterion, Ending, Outcome, Search, SearchConfig, Step};

/// How each point is run and how the search proceeds (shared by
/// `capacity`, `compare` and `bench`).
#[derive(Debug, Clone, Args)]
pub struct SearchArgs {
    /// When a point passes: `none` (no failed session, the thesis's rule),
    /// `failed:PCT` (at most PCT % failed), or
    /// `qoe:STALLED_PCT:P95_STARTUP_S` (at most STALLED_PCT % of sessions
    /// stall or fail and the p95 start-up delay is at most P95_STARTUP_S).
    #[arg(long, default_value = "none", value_name = "RULE")]
    pub criterion: String,
    /// First rate tried, sessions/s.
    #[arg(long, default_value_t = 1.0, value_name = "SESSIONS_PER_S")]
    pub start: f64,
    /// How the rate rises until a point fails: `xF` multiplies by F, `+D`
    /// adds D sessions/s (the thesis adds a fixed step).
    #[arg(long, default_value = "x2", value_name = "xF|+D")]
    pub step: String,
    /// Bisect until the bracket is narrower than this fraction of the rate.
    #[arg(long, default_value_t = 0.1, value_name = "FRACTION")]
    pub precision: f64,
    /// Highest rate to try, sessions/s.
    #[arg(long, default_value_t = 1000.0)]
    pub max_rate: f64,
    /// Lowest rate to try, sessions/s.
    #[arg(long, default_value_t = 0.01)]
    pub min_rate: f64,
    /// Runs per rate (a rate passes only if all pass); with 2 or more the
    /// summary gives means with 95 % confidence intervals.
    #[arg(long, default_value_t = 1)]
    pub repeats: u32,
    /// Stop after this many rates.
    #[arg(long, default_value_t = 12)]
    pub max_points: usize,
    /// Seconds of arrivals per point: a point starts rate x window sessions
    /// (the first ones of the workload, the same for every point).
    #[arg(long, default_value_t = 60.0, value_name = "SECONDS")]
    pub window: f64,
    /// After the last arrival, wait at most this long for sessions to end;
    /// sessions still running then count as failed.
    #[arg(long, default_value_t = 120.0, value_name = "SECONDS")]
    pub drain: f64,
    /// Pause between points, seconds (lets the server close connections).
    #[arg(long, default_value_t = 2.0, value_name = "SECONDS")]
    pub pause: f64,
    /// Keep the workload's ramp-up/ramp-down sessions out of the measurement
    /// (default: every session of a point is measured). A point replays the
    /// shards as one script with one arrival process, so the ramps apply
    /// once, at its start and end.
    #[arg(long)]
    pub keep_ramps: bool,
    /// Do not emulate client access links.
    #[arg(long)]
    pub no_shaping: bool,
    /// Ignore pacing: every request as soon as the previous completes.
    #[arg(long)]
    pub no_pacing: bool,
    /// Fraction of responses whose bytes are checked against the file set.
    #[arg(long, default_value_t = 0.01, value_name = "FRACTION")]
    pub check_bytes: f64,
    /// Write requests.csv for every run (per-request figures in the report).
    #[arg(long)]
    pub requests_csv: bool,
    /// Seed of the arrival schedules (repetition k uses seed + k).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Client lateness threshold, ms (see `vodlab run --help`).
    #[arg(long, default_value_t = 10.0, value_name = "MS")]
    pub late_threshold_ms: f64,
    /// No live progress of each run.
    #[arg(short, long)]
    pub quiet: bool,
}

impl SearchArgs {
    /// The search settings these arguments describe.
    pub fn config(&self) -> anyhow::Result<SearchConfig> {
        let step = if let Some(f) = self.step.strip_prefix(['x', '*']) {
            Step::Mul(
                f.parse()
                    .with_context(|| format!("--step `{}`: `{f}` is not a number", self.step))?,
            )
        } else if let Some(d) = self.step.strip_prefix('+') {
            Step::Add(
                d.parse()
                    .with_context(|| format!("--step `{}`: `{d}` is not a number", self.step))?,
            )
        } else {
            bail!(
                "--step `{}`: use xF (multiply, e.g. x2) or +D (add, e.g. +0.5)",
                self.step
            )
        };
        let cfg = SearchConfig {
            start: self.start,
            step,
            precision: self.precision,
            max_rate: self.max_rate,
            min_rate: self.min_rate,
            repeats: self.repeats,
            max_points: self.max_points,
            criterion: Criterion::parse(&self.criterion)?,
        };
        cfg.validate()?;
        anyhow::ensure!(self.window > 0.0, "--window must be > 0");
        anyhow::ensure!(self.drain >= 0.0, "--drain must be >= 0");
        anyhow::ensure!(
            (0.0..=1.0).contains(&self.check_bytes),
            "--check-bytes must be between 0 and 1"
        );
        Ok(cfg)
    }
}

/// Arguments of `vodlab capacity`.
#[derive(Debug, Args)]
pub struct CapacityArgs {
    /// A `vodlab gen` directory or a session script.
    pub workload: PathBuf,
    /// Server to load, `http://HOST:PORT` (loopback unless --allow-remote).
    #[arg(long, value_name = "URL")]
    pub target: String,
    /// Cool this file set (drop it from the page cache) before every run, so
    /// each point starts cold (the server must run on this machine).
    #[arg(long, value_name = "FILESET_ROOT")]
    pub cool: Option<PathBuf>,
    /// Output directory: capacity.json and points/NN-.../results.json.
    #[arg(short, long, value_name = "DIR")]
    pub output: Option<PathBuf>,
    /// Allow a target that is not a loopback address.
    #[arg(long)]
    pub allow_remote: bool,
    #[command(flatten)]
    pub search: SearchArgs,
}

/// Set by Ctrl-C: the current run stops and writes its results, the search ends.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// Runs one point (one `vodlab run`) after another against one target.
pub struct PointRunner {
    rt: tokio::runtime::Runtime,
    work: Arc<LoadedWorkload>,
    base: RunConfig,
    args: SearchArgs,
    /// Output directory.
    pub out: PathBuf,
    cancel: tokio::sync::watch::Receiver<bool>,
    runs: usize,
    vodlab_stats: bool,
}

/// One finished run: what the search needs and the full results.
pub struct Measured {
    /// For the search.
    pub outcome: Outcome,
    /// Everything.
    pub results: Results,
}

impl PointRunner {
    /// Loads the workload and prepares the runtime; `target` is an http URL.
    pub fn new(
        workload: &Path,
        target: &str,
        allow_remote: bool,
        args: &SearchArgs,
        out: &Path,
    ) -> anyhow::Result<Self> {
        let (hostport, host) = crate::run::parse_target(target)?;
        let mut work = LoadedWorkload::open(workload)
            .with_context(|| format!("loading the workload {}", workload.display()))?;
        anyhow::ensure!(
            work.session_count() > 0,
            "{}: no sessions",
            workload.display()
        );
        if !args.keep_ramps {
            work.ramp_up = 0;
            work.ramp_down = 0;
        }
        // one arrival process at the point's rate: with per-shard processes a
        // point's few sessions would all start at once (each shard's first
        // session starts at t = 0)
        if work.shards.len() > 1 {
            let mut shards = std::mem::take(&mut work.shards).into_iter();
            let mut one = shards.next().expect("more than one shard");
            for s in shards {
                one.sessions.extend(s.sessions);
            }
            work.shards = vec![one];
        }
        crate::run::raise_nofile();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()?;
        let addr: SocketAddr = rt
            .block_on(tokio::net::lookup_host(&hostport))
            .with_context(|| format!("resolving {hostport}"))?
            .next()
            .with_context(|| format!("{hostport} has no address"))?;
        if !allow_remote && !crate::run::is_loopback(addr.ip()) {
            bail!("--target {target} resolves to {}, not a loopback address; pass --allow-remote to load a remote server", addr.ip());
        }
        let mut base = RunConfig::new(
            addr,
            host,
            target.to_string(),
            Arrivals::Poisson { rate: 1.0 },
        );
        base.shaping = !args.no_shaping;
        base.pacing = !args.no_pacing;
        base.check_bytes = args.check_bytes;
        base.late_threshold = Duration::from_secs_f64(args.late_threshold_ms / 1000.0);
        base.interval_s = 1.0;
        let (tx, cancel) = tokio::sync::watch::channel(false);
        rt.spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                eprintln!(
                    "\nvodlab: interrupted; finishing this run's results and ending the search"
                );
                INTERRUPTED.store(true, Ordering::SeqCst);
                let _ = tx.send(true);
            }
        });
        std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
        let vodlab_stats = fetch_stats(addr).is_some();
        Ok(Self {
            rt,
            work: Arc::new(work),
            base,
            args: args.clone(),
            out: out.to_path_buf(),
            cancel,
            runs: 0,
            vodlab_stats,
        })
    }

    /// The workload's name.
    pub fn workload_name(&self) -> &str {
        &self.work.name
    }

    /// Sessions a point at `rate` starts.
    pub fn sessions_at(&self, rate: f64) -> usize {
        ((rate * self.args.window).ceil() as usize).clamp(1, self.work.session_count())
    }

    /// Runs one point: `rate` sessions/s for the window, then the drain.
    pub fn measure(&mut self, rate: f64, repeat: u32) -> anyhow::Result<Measured> {
        if INTERRUPTED.load(Ordering::SeqCst) {
            bail!("interrupted");
        }
        if self.runs > 0 && self.args.pause > 0.0 {
            std::thread::sleep(Duration::from_secs_f64(self.args.pause));
        }
        self.runs += 1;
        let n = self.sessions_at(rate);
        let mut cfg = self.base.clone();
        cfg.arrivals = Arrivals::Poisson { rate };
        cfg.seed = self.args.seed + u64::from(repeat);
        cfg.max_sessions = Some(n);
        cfg.max_duration = Some(Duration::from_secs_f64(n as f64 / rate + self.args.drain));
        let dir = self.out.join("points").join(format!(
            "{:02}-rate-{rate:.4}-run-{}",
            self.runs,
            repeat + 1
        ));
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        if self.args.requests_csv {
            cfg.requests_csv = Some(dir.join("requests.csv"));
        }
        let live = Arc::new(Live::default());
        let progress =
            (!self.args.quiet).then(|| crate::run::spawn_progress(live.clone(), n as u64));
        let stats_before = self.vodlab_stats.then(|| fetch_stats(cfg.addr)).flatten();
        let t = Instant::now();
        let results = self.rt.block_on(vodlab_client::run(
            self.work.clone(),
            cfg,
            live.clone(),
            self.cancel.clone(),
        ))?;
        let wall = t.elapsed().as_secs_f64();
        live.done.store(true, Ordering::Relaxed);
        if let Some(p) = progress {
            let _ = p.join();
        }
        crate::run::write_results(&dir, &results)?;
        if results.stopped_by == StopReason::Interrupted {
            bail!(
                "interrupted (this run's partial results are in {})",
                dir.display()
            );
        }
        if results.stopped_by == StopReason::ServerUnreachable {
            bail!(
                "the server stopped answering ({}); results so far are in {}",
                self.base.target,
                dir.display()
            );
        }
        let ended = live.completed.load(Ordering::Relaxed) + live.failed.load(Ordering::Relaxed);
        let unfinished = live.started.load(Ordering::Relaxed).saturating_sub(ended);
        let mut extra = serde_json::Map::new();
        extra.insert("sessions".into(), (n as u64).into());
        extra.insert("wall_s".into(), wall.into());
        extra.insert(
            "delivered_bytes".into(),
            live.bytes.load(Ordering::Relaxed).into(),
        );
        extra.insert(
            "response_p99_ms".into(),
            results.response_time_ms.p99.into(),
        );
        extra.insert(
            "results".into(),
            dir.strip_prefix(&self.out)
                .unwrap_or(&dir)
                .display()
                .to_string()
                .into(),
        );
        if let (Some(before), Some(after)) = (
            stats_before,
            self.vodlab_stats
                .then(|| fetch_stats(self.base.addr))
                .flatten(),
        ) {
            extra.insert("server_stats_before".into(), before);
            extra.insert("server_stats_after".into(), after);
        }
        let outcome = Outcome {
            measured_sessions: results.measured_sessions,
            failed_sessions: results.failed_sessions,
            unfinished_sessions: unfinished,
            stalled_sessions: results.stalled_sessions,
            p95_startup_s: results.startup_delay_s.p95,
            throughput_bytes_per_s: results.throughput_bytes_per_s,
            client_valid: results.valid,
            client_invalid_reasons: results.invalid_reasons.clone(),
            extra,
        };
        Ok(Measured { outcome, results })
    }

    /// Writes `capacity.json` of `search` into the output directory; `res`
    /// is how the search ended, `server` a label for compare and bench.
    pub fn write_capacity(
        &self,
        search: &Search,
        res: &anyhow::Result<Answer>,
        server: Option<String>,
        started: f64,
    ) -> anyhow::Result<()> {
        let file = CapacityFile {
            format: "vodlab-capacity",
            version: 1,
            complete: res.is_ok(),
            error: res.as_ref().err().map(|e| format!("{e:#}")),
            workload: self.work.name.clone(),
            target: self.base.target.clone(),
            server,
            criterion: search.config.criterion.to_string(),
            window_s: self.args.window,
            drain_s: self.args.drain,
            pacing: !self.args.no_pacing,
            shaping: !self.args.no_shaping,
            search,
            answer: search.answer(),
            rows: rows(search),
            started_at_unix_s: started,
            duration_s: unix_now() - started,
        };
        let p = self.out.join("capacity.json");
        let mut text = serde_json::to_string_pretty(&file)?;
        text.push('\n');
        std::fs::write(&p, text).with_context(|| format!("writing {}", p.display()))
    }

    /// Shuts the runtime down.
    pub fn finish(self) {
        self.rt.shutdown_timeout(Duration::from_millis(200));
    }
}

/// GET /vodlab/stats from a `vodlab serve` (None for other servers).
pub fn fetch_stats(addr: SocketAddr) -> Option<serde_json::Value> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    s.write_all(b"GET /vodlab/stats HTTP/1.1\r\nHost: vodlab\r\nConnection: close\r\n\r\n")
        .ok()?;
    let mut buf = Vec::new();
    s.take(1 << 20).read_to_end(&mut buf).ok()?;
    let text = String::from_utf8_lossy(&buf);
    let (head, body) = text.split_once("\r\n\r\n")?;
    if !head.starts_with("HTTP/1.1 200") {
        return None;
    }
    serde_json::from_str(body).ok()
}

/// One line per settled repetition on stderr.
pub fn print_point(
    label: &str,
    rate: f64,
    repeat: u32,
    repeats: u32,
    o: &Outcome,
    verdict: &Result<(), String>,
) {
    eprintln!(
        "{label}rate {rate:.3}/s run {}/{repeats}: {} | {} sessions, {} failed, {} unfinished, {} stalled | {:.1} MB/s delivered | client {}",
        repeat + 1,
        match verdict {
            Ok(()) => "PASS".to_string(),
            Err(r) => format!("FAIL ({r})"),
        },
        o.measured_sessions,
        o.failed_sessions,
        o.unfinished_sessions,
        o.stalled_sessions,
        o.throughput_bytes_per_s / 1e6,
        if o.client_valid { "ok".to_string() } else { format!("INVALID: {}", o.client_invalid_reasons.join("; ")) },
    );
}

/// capacity.json.
#[derive(Debug, Serialize)]
pub struct CapacityFile<'a> {
    /// `"vodlab-capacity"`.
    pub format: &'static str,
    /// 1.
    pub version: u32,
    /// The search ran to its end (not interrupted or cut by an error).
    pub complete: bool,
    /// Why it did not, if it did not.
    pub error: Option<String>,
    /// Workload name.
    pub workload: String,
    /// Target URL.
    pub target: String,
    /// Server label (compare/bench) or null.
    pub server: Option<String>,
    /// The rule, in words.
    pub criterion: String,
    /// Seconds of arrivals per point.
    pub window_s: f64,
    /// Drain limit per point.
    pub drain_s: f64,
    /// Pacing was on.
    pub pacing: bool,
    /// Link emulation was on.
    pub shaping: bool,
    /// Settings and every point with its runs.
    pub search: &'a Search,
    /// The answer.
    pub answer: Answer,
    /// Summary rows, one per point.
    pub rows: Vec<Row>,
    /// Wall-clock start, Unix seconds.
    pub started_at_unix_s: f64,
    /// Length of the whole search, s.
    pub duration_s: f64,
}

/// A point's summary (means with 95 % intervals over its runs).
#[derive(Debug, Serialize)]
pub struct Row {
    /// Offered sessions/s.
    pub rate: f64,
    /// Passed the criterion.
    pub passed: bool,
    /// Why not.
    pub reason: Option<String>,
    /// Runs.
    pub runs: usize,
    /// Delivered MB/s (10^6 bytes).
    pub delivered_mb_s: Option<vodlab_lab::MeanCi>,
    /// Failed or unfinished sessions, percent.
    pub failed_pct: Option<vodlab_lab::MeanCi>,
    /// Every run's client was healthy.
    pub client_valid: bool,
}

/// Summary rows of a search.
pub fn rows(search: &Search) -> Vec<Row> {
    search
        .points
        .iter()
        .map(|p| Row {
            rate: p.rate,
            passed: p.passed,
            reason: p.reason.clone(),
            runs: p.runs.len(),
            delivered_mb_s: p.throughput().map(|c| scale_ci(c, 1e-6)),
            failed_pct: p.failed_pct(),
            client_valid: p.client_valid(),
        })
        .collect()
}

/// Scales a mean and interval by `k`.
pub fn scale_ci(c: vodlab_lab::MeanCi, k: f64) -> vodlab_lab::MeanCi {
    vodlab_lab::MeanCi {
        n: c.n,
        mean: c.mean * k,
        sd: c.sd * k,
        half_width: c.half_width.map(|h| h * k),
    }
}

/// `12.3` or `12.3 +- 0.4`.
pub fn fmt_ci(c: Option<vodlab_lab::MeanCi>, digits: usize) -> String {
    match c {
        None => "-".into(),
        Some(c) => match c.half_width {
            Some(h) => format!("{:.*} ± {:.*}", digits, c.mean, digits, h),
            None => format!("{:.*}", digits, c.mean),
        },
    }
}

/// The summary table and the answer in words.
pub fn table(search: &Search, answer: &Answer) -> String {
    let mut s = String::new();
    s += &format!(
        "{:>10}  {:>7}  {:>4}  {:>16}  {:>14}  {}\n",
        "rate/s", "verdict", "runs", "delivered MB/s", "failed %", "client"
    );
    for r in rows(search) {
        s += &format!(
            "{:>10.3}  {:>7}  {:>4}  {:>16}  {:>14}  {}\n",
            r.rate,
            if r.passed { "pass" } else { "FAIL" },
            r.runs,
            fmt_ci(r.delivered_mb_s, 1),
            fmt_ci(r.failed_pct, 2),
            if r.client_valid { "ok" } else { "INVALID" }
        );
    }
    s += &answer_line(&search.config.criterion, answer);
    s
}

/// The answer in one sentence.
pub fn answer_line(criterion: &Criterion, a: &Answer) -> String {
    let ending = match a.ending {
        Some(Ending::Converged) => "converged",
        Some(Ending::AboveMaxRate) => {
            "capacity is at least the maximum rate tried (raise --max-rate)"
        }
        Some(Ending::BelowMinRate) => "even the lowest rate failed (lower --min-rate)",
        Some(Ending::OutOfPoints) => "out of points before converging (raise --max-points)",
        None => "search stopped early",
    };
    let mono = if a.non_monotone {
        "; WARNING: a rate passed above one that failed (noisy; try --repeats)"
    } else {
        ""
    };
    match (a.capacity, a.lowest_failed) {
        (Some(c), Some(f)) => format!(
            "capacity ({criterion}): {c:.3} sessions/s (failed at {f:.3}); {ending}{mono}\n"
        ),
        (Some(c), None) => {
            format!("capacity ({criterion}): at least {c:.3} sessions/s; {ending}\n")
        }
        (None, Some(f)) => format!("capacity ({criterion}): below {f:.3} sessions/s; {ending}\n"),
        (None, None) => format!("capacity: no point measured; {ending}\n"),
    }
}

/// Now, Unix seconds.
pub fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// Runs a whole search with `before_each` called before every run (cooling,
/// counters) and `after_each` adding figures to the outcome.
pub fn search_with(
    runner: &mut PointRunner,
    search: &mut Search,
    label: &str,
    mut before_each: impl FnMut() -> anyhow::Result<()>,
    mut after_each: impl FnMut(&Measured, &mut Outcome) -> anyhow::Result<()>,
) -> anyhow::Result<Answer> {
    let repeats = search.config.repeats;
    let criterion = search.config.criterion;
    search.run(|rate, repeat| {
        before_each()?;
        let m = runner.measure(rate, repeat)?;
        let mut o = m.outcome.clone();
        after_each(&m, &mut o)?;
        print_point(label, rate, repeat, repeats, &o, &criterion.judge(&o));
        Ok(o)
    })
}

pub fn run(a: CapacityArgs) -> anyhow::Result<ExitCode> {
    let cfg = a.search.config()?;
    let out = a
        .output
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("results/capacity-{}", unix_now() as u64)));
    let cool = match &a.cool {
        Some(root) => {
            let (_, catalog) = crate::fileset::load(&a.workload)
                .context("--cool needs a `vodlab gen` workload directory")?;
            Some((root.clone(), catalog))
        }
        None => None,
    };
    let mut runner = PointRunner::new(&a.workload, &a.target, a.allow_remote, &a.search, &out)?;
    let mut search = Search::new(cfg)?;
    eprintln!(
        "vodlab capacity: {} against {}; criterion: {}; {} s of arrivals per point, drain {} s; output {}",
        runner.workload_name(),
        a.target,
        search.config.criterion,
        a.search.window,
        a.search.drain,
        out.display()
    );
    let started = unix_now();
    let res = search_with(
        &mut runner,
        &mut search,
        "",
        || {
            if let Some((root, catalog)) = &cool {
                vodlab_fileset::cool(root, catalog)
                    .with_context(|| format!("cooling {}", root.display()))?;
            }
            Ok(())
        },
        |_, _| Ok(()),
    );
    let answer = search.answer();
    runner.write_capacity(&search, &res, None, started)?;
    runner.finish();
    print!("{}", table(&search, &answer));
    println!("  results: {}", out.join("capacity.json").display());
    if let Err(e) = res {
        eprintln!("vodlab capacity: stopped early: {e:#}");
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}
