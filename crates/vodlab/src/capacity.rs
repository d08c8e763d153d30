//! `vodlab capacity`: the highest session rate a server sustains, found by
//! stepping the rate up until the criterion trips and then bisecting; every
//! point is a real `vodlab run` (docs/experiments.md). The search, the point
//! runner and capacity.json are `vodlab_lab`'s; this module parses the
//! arguments and prints.

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, OnceLock};

use anyhow::{bail, Context};
use clap::Args;
use vodlab_client::Live;
use vodlab_lab::capacity::{add_viewer_figures, bitrate_mix, mix_words, rows};
use vodlab_lab::runner::unix_now;
use vodlab_lab::{
    CapacityFile, Criterion, Interrupter, Outcome, PointRunner, PointSettings, RunObserver, Search,
    SearchConfig, Step, Target, Verdict,
};

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
    #[arg(long, default_value_t = SearchDefaults::CAPACITY.start, value_name = "SESSIONS_PER_S")]
    pub start: f64,
    /// How the rate rises until a point fails: `xF` multiplies by F, `+D`
    /// adds D sessions/s (the thesis adds a fixed step).
    #[arg(long, default_value = "x2", value_name = "xF|+D")]
    pub step: String,
    /// What happens at the first failing rate: `bisect` (default: bisect
    /// between the last passing and the first failing rate down to
    /// --precision), or `additive[:START:STEP]` (the thesis's fixed
    /// increments: START, START+STEP, ... and stop at the first failing
    /// step, answering the last passing one; START and STEP replace --start
    /// and --step; plain `additive` takes --start and a `--step +D`).
    #[arg(
        long = "search",
        default_value = "bisect",
        value_name = "bisect|additive[:START:STEP]"
    )]
    pub search_mode: String,
    /// Bisect until the bracket is narrower than this fraction of the rate.
    #[arg(long, default_value_t = SearchDefaults::CAPACITY.precision, value_name = "FRACTION")]
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
    #[arg(long, default_value_t = SearchDefaults::CAPACITY.max_points)]
    pub max_points: usize,
    /// Seconds of arrivals per point: a point starts rate x window sessions
    /// (the first ones of the workload, the same for every point).
    #[arg(long, default_value_t = SearchDefaults::CAPACITY.window, value_name = "DURATION", value_parser = crate::run::seconds_arg)]
    pub window: f64,
    /// After the last arrival, wait at most this long for sessions to end;
    /// sessions still running then count as failed.
    #[arg(long, default_value_t = SearchDefaults::CAPACITY.drain, value_name = "DURATION", value_parser = crate::run::seconds_arg)]
    pub drain: f64,
    /// Pause between points, seconds (lets the server close connections).
    #[arg(long, default_value_t = 2.0, value_name = "DURATION", value_parser = crate::run::seconds_arg)]
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
    /// Client lateness threshold, ms (see `vodlab run --help`): a run with
    /// more than 1 % of its session starts or request sends later than this
    /// is INVALID, and an INVALID point ends the search (docs/experiments.md).
    #[arg(long, default_value_t = SearchDefaults::CAPACITY.late_threshold_ms, value_name = "MS", value_parser = crate::run::millis_arg)]
    pub late_threshold_ms: f64,
    /// Spread each point over N local client processes, so the client is
    /// not the bottleneck on a machine with more cores: each point runs as
    /// N `vodlab run --shard I/N --start-at T` processes (the same sessions
    /// at the same offsets as one process) writing points/NN-.../shard-I,
    /// merged exactly into the point's results.json. A point never gets
    /// more processes than sessions. 1: the load runs in this process.
    /// E.g. `--client-processes 4` on an 8-core client (docs/scale-out.md,
    /// "Spreading a point over processes").
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub client_processes: u32,
    /// Time compression k: every point runs k times faster (the workload's
    /// pacing, think times, deadlines and link delays / k, bit rates and
    /// link rates x k, the arrival rate x k for window / k, the drain / k),
    /// and its figures are converted back to nominal units (rates are
    /// sessions/s of nominal time, throughput / k, times x k). Give the
    /// server the same k (`vodlab serve --time-compression K`; compare and
    /// bench do, and mount their emulated drive with it). 1: nominal time.
    #[arg(long, default_value_t = 1.0, value_name = "K")]
    pub time_compression: f64,
    /// No live progress of each run.
    #[arg(short, long)]
    pub quiet: bool,
    /// Print the search settings this command would run with (JSON) and
    /// exit (for tests: `--help`'s defaults against what runs).
    #[arg(long, hide = true)]
    pub print_settings: bool,
    /// Fail (exit 1) when the result's figure compares so: PATH OP VALUE
    /// over capacity.json (`compare`: over each server's row of
    /// compare.json), e.g. `answer.capacity<10`,
    /// `at_capacity.mean_viewers<100`; OP is > >= < <= == !=; repeatable;
    /// checked before the search (a typo is a usage error), named on stderr
    /// when breached.
    #[arg(long = "fail-on", value_name = "EXPR", value_parser = crate::exit::parse_rule)]
    pub fail_on: Vec<vodlab_client::out::thresholds::Rule>,
    #[command(flatten)]
    pub transport: crate::run::TransportArgs,
}

/// The search settings a command runs with where its flag is not given:
/// the one source of `--help`'s defaults and of what runs (`capacity` and
/// `compare` take [`SearchDefaults::CAPACITY`]; `bench` its own).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct SearchDefaults {
    /// `--window`, s.
    pub window: f64,
    /// `--drain`, s.
    pub drain: f64,
    /// `--start`, sessions/s.
    pub start: f64,
    /// `--precision`.
    pub precision: f64,
    /// `--max-points`.
    pub max_points: usize,
    /// `--late-threshold-ms`.
    pub late_threshold_ms: f64,
}

impl SearchDefaults {
    /// `vodlab capacity` and `vodlab compare`.
    pub const CAPACITY: Self = Self {
        window: 60.0,
        drain: 120.0,
        start: 1.0,
        precision: 0.1,
        max_points: 12,
        late_threshold_ms: 10.0,
    };

    /// Sets each setting of `a` whose flag `given` says was not given.
    pub fn apply(&self, a: &mut SearchArgs, given: &dyn Fn(&str) -> bool) {
        if !given("--window") {
            a.window = self.window;
        }
        if !given("--drain") {
            a.drain = self.drain;
        }
        if !given("--start") {
            a.start = self.start;
        }
        if !given("--precision") {
            a.precision = self.precision;
        }
        if !given("--max-points") {
            a.max_points = self.max_points;
        }
        if !given("--late-threshold-ms") {
            a.late_threshold_ms = self.late_threshold_ms;
        }
    }

    /// The settings `a` runs with.
    pub fn of(a: &SearchArgs) -> Self {
        Self {
            window: a.window,
            drain: a.drain,
            start: a.start,
            precision: a.precision,
            max_points: a.max_points,
            late_threshold_ms: a.late_threshold_ms,
        }
    }
}

/// Bounds of the search flags, checked at parse time (docs/experiments.md).
pub mod bounds {
    pub(crate) use crate::run::{MAX_LATE_THRESHOLD_MS, RATE_BOUNDS};
    /// Highest `--step xF` factor.
    pub const MAX_STEP_FACTOR: f64 = 1_000.0;
    /// Bounds of `--precision`.
    pub const PRECISION: (f64, f64) = (0.001, 0.9);
    /// Most `--repeats`.
    pub const MAX_REPEATS: u64 = 100;
    /// Most `--client-processes`.
    pub use vodlab_lab::procs::MAX_CLIENT_PROCESSES;
    /// Most `--max-points`.
    pub const MAX_POINTS: u64 = 1_000;
    /// Bounds of `--window`, seconds (a day at most).
    pub const WINDOW_S: (f64, f64) = (0.1, 86_400.0);
    /// Longest `--drain`, seconds.
    pub const MAX_DRAIN_S: f64 = 86_400.0;
    /// Longest `--pause`, seconds.
    pub const MAX_PAUSE_S: f64 = 3_600.0;
}

/// `v` when it is a number in `lo..=hi`, else an error naming the flag and
/// the bound (NaN and infinities are outside every bound).
pub(crate) fn within(flag: &str, v: f64, lo: f64, hi: f64) -> anyhow::Result<f64> {
    if (lo..=hi).contains(&v) {
        Ok(v)
    } else {
        bail!("{flag} must be a number from {lo} to {hi}, got {v}")
    }
}

/// `v` when it is in `lo..=hi`, else an error naming the flag and the bound.
pub(crate) fn within_int(flag: &str, v: u64, lo: u64, hi: u64) -> anyhow::Result<u64> {
    if (lo..=hi).contains(&v) {
        Ok(v)
    } else {
        bail!("{flag} must be from {lo} to {hi}, got {v}")
    }
}

impl SearchArgs {
    /// The search settings these arguments describe; every number is
    /// checked against its bound ([`bounds`]) first.
    pub fn config(&self) -> anyhow::Result<SearchConfig> {
        use bounds::*;
        let (lo, hi) = RATE_BOUNDS;
        for (flag, v) in [
            ("--start", self.start),
            ("--min-rate", self.min_rate),
            ("--max-rate", self.max_rate),
        ] {
            within(flag, v, lo, hi).map_err(|e| {
                anyhow::anyhow!("{e} (and the rates need 0 < min rate <= start <= max rate)")
            })?;
        }
        within("--precision", self.precision, PRECISION.0, PRECISION.1)?;
        within_int("--repeats", self.repeats.into(), 1, MAX_REPEATS)?;
        within_int("--max-points", self.max_points as u64, 1, MAX_POINTS)?;
        within("--window", self.window, WINDOW_S.0, WINDOW_S.1)?;
        within("--drain", self.drain, 0.0, MAX_DRAIN_S)?;
        within("--pause", self.pause, 0.0, MAX_PAUSE_S)?;
        within("--check-bytes", self.check_bytes, 0.0, 1.0)?;
        within_int(
            "--client-processes",
            self.client_processes.into(),
            1,
            MAX_CLIENT_PROCESSES.into(),
        )?;
        within(
            "--late-threshold-ms",
            self.late_threshold_ms,
            0.0,
            MAX_LATE_THRESHOLD_MS,
        )?;
        vodlab_workload::TimeCompression::new(self.time_compression)?;
        let step = if let Some(f) = self.step.strip_prefix(['x', '*']) {
            let f: f64 = f
                .parse()
                .with_context(|| format!("--step `{}`: `{f}` is not a number", self.step))?;
            if !(f > 1.0 && f <= MAX_STEP_FACTOR) {
                bail!(
                    "--step `{}`: step x{f} must be > 1 and at most {MAX_STEP_FACTOR}",
                    self.step
                );
            }
            Step::Mul(f)
        } else if let Some(d) = self.step.strip_prefix('+') {
            let d: f64 = d
                .parse()
                .with_context(|| format!("--step `{}`: `{d}` is not a number", self.step))?;
            within(&format!("--step `{}`: the increment", self.step), d, lo, hi)?;
            Step::Add(d)
        } else {
            bail!(
                "--step `{}`: use xF (multiply, e.g. x2) or +D (add, e.g. +0.5)",
                self.step
            )
        };
        let (mode, start, step) =
            vodlab_lab::search::parse_mode(&self.search_mode, self.start, step)?;
        if let (Some((_, args)), Step::Add(d)) = (self.search_mode.split_once(':'), step) {
            let flag = format!("--search `{}`", self.search_mode);
            within(&format!("{flag}: START ({args})"), start, lo, hi)?;
            within(&format!("{flag}: STEP ({args})"), d, lo, hi)?;
        }
        let cfg = SearchConfig {
            mode,
            start,
            step,
            precision: self.precision,
            max_rate: self.max_rate,
            min_rate: self.min_rate,
            repeats: self.repeats,
            max_points: self.max_points,
            criterion: Criterion::parse(&self.criterion)?,
        };
        cfg.validate()?;
        Ok(cfg)
    }

    /// How every point is run.
    pub fn settings(&self) -> PointSettings {
        PointSettings {
            window_s: self.window,
            drain_s: self.drain,
            pause_s: self.pause,
            seed: self.seed,
            keep_ramps: self.keep_ramps,
            pacing: !self.no_pacing,
            shaping: !self.no_shaping,
            check_bytes: self.check_bytes,
            late_threshold_ms: self.late_threshold_ms,
            requests_csv: self.requests_csv,
            transport: Default::default(),
            client_processes: self.client_processes,
            client_exe: None,
            // checked by `config`
            time_compression: vodlab_workload::TimeCompression::new(self.time_compression)
                .unwrap_or_default(),
        }
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
    #[arg(short = 'o', long = "out", alias = "output", value_name = "DIR")]
    pub output: Option<PathBuf>,
    /// Allow a target that is not a loopback address.
    #[arg(long)]
    pub allow_remote: bool,
    #[command(flatten)]
    pub search: SearchArgs,
}

/// The process's one interrupter: Ctrl-C or SIGTERM stops the run in
/// progress (it writes its results) and every later one, in every runner,
/// so the servers, boxes and disk daemons a search started are stopped by
/// their guards rather than left running (SIGTERM's default action would
/// end the process without running them).
pub fn interrupter() -> Interrupter {
    static ONE: OnceLock<Interrupter> = OnceLock::new();
    ONE.get_or_init(|| {
        let i = Interrupter::new();
        let on_signal = i.clone();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a signal runtime");
            let got = rt.block_on(async {
                let mut term =
                    tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
                tokio::select! {
                    r = tokio::signal::ctrl_c() => r.map(|_| crate::exit::INTERRUPTED),
                    _ = term.recv() => Ok(crate::exit::TERMINATED),
                }
            });
            if let Ok(code) = got {
                SIGNALLED.store(code, std::sync::atomic::Ordering::Relaxed);
                eprintln!(
                    "\nvodlab: interrupted; finishing this run's results and ending the search"
                );
                on_signal.interrupt();
            }
        });
        i
    })
    .clone()
}

/// Resolves `target` (an http or https URL) and checks it is loopback unless allowed.
pub fn resolve_target(target: &str, allow_remote: bool) -> anyhow::Result<Target> {
    let (hostport, host) = crate::run::parse_target(target)?;
    let addr: SocketAddr = hostport
        .to_socket_addrs()
        .with_context(|| format!("resolving {hostport}"))?
        .next()
        .with_context(|| format!("{hostport} has no address"))?;
    if !allow_remote && !crate::run::is_loopback(addr.ip()) {
        bail!("--target {target} resolves to {}, not a loopback address; pass --allow-remote to load a remote server", addr.ip());
    }
    Ok(Target {
        addr,
        host,
        url: target.to_string(),
    })
}

/// A runner for `target` with these search arguments, writing under `out`.
pub fn runner(
    workload: &Path,
    target: &str,
    allow_remote: bool,
    args: &SearchArgs,
    out: &Path,
) -> anyhow::Result<PointRunner> {
    let t = resolve_target(target, allow_remote)?;
    let mut settings = args.settings();
    settings.transport = args.transport.config(target)?;
    if settings.client_processes > 1 {
        // the children are this very binary, `vodlab run --shard I/N`
        settings.client_exe = Some(
            std::env::current_exe().context("--client-processes: finding the vodlab executable")?,
        );
        eprintln!(
            "vodlab: each point runs as up to {n} client processes (`vodlab run --shard I/{n}`), their results merged",
            n = settings.client_processes
        );
    }
    crate::run::raise_nofile();
    Ok(PointRunner::new(workload, t, settings, out, interrupter())?)
}

/// Progress of each run on stderr (unless quiet) and one line per judged run.
pub struct Printer {
    /// Prefix of every line (the server's name in compare).
    pub label: String,
    /// Runs per rate.
    pub repeats: u32,
    /// No live progress.
    pub quiet: bool,
    progress: Option<std::thread::JoinHandle<()>>,
}

impl Printer {
    /// A printer for a search of `repeats` runs per rate.
    pub fn new(label: &str, args: &SearchArgs) -> Self {
        Self {
            label: label.to_string(),
            repeats: args.repeats,
            quiet: args.quiet,
            progress: None,
        }
    }
}

impl RunObserver for Printer {
    fn started(&mut self, live: &Arc<Live>, sessions: u64) {
        if !self.quiet {
            self.progress = Some(crate::run::spawn_progress(live.clone(), sessions));
        }
    }
    fn finished(&mut self) {
        if let Some(p) = self.progress.take() {
            let _ = p.join();
        }
    }
    fn judged(&mut self, rate: f64, repeat: u32, o: &Outcome, v: Verdict, why: Option<&str>) {
        print_point(&self.label, rate, repeat, self.repeats, o, v, why);
    }
}

/// One line per settled repetition on stderr.
pub fn print_point(
    label: &str,
    rate: f64,
    repeat: u32,
    repeats: u32,
    o: &Outcome,
    v: Verdict,
    why: Option<&str>,
) {
    eprintln!(
        "{label}rate {rate:.3}/s run {}/{repeats}: {} | {} sessions, {} failed, {} unfinished, {} stalled | {:.1} MB/s delivered | client {}",
        repeat + 1,
        match (v, why) {
            (Verdict::Pass, _) => "PASS".to_string(),
            (Verdict::Fail, Some(r)) => format!("FAIL ({r})"),
            (Verdict::Fail, None) => "FAIL".to_string(),
            (Verdict::Invalid, _) => "INVALID (neither pass nor fail: the load generator could not keep up)".to_string(),
        },
        o.measured_sessions,
        o.failed_sessions,
        o.unfinished_sessions,
        o.stalled_sessions,
        o.throughput_bytes_per_s / 1e6,
        if o.client_valid { "ok".to_string() } else { format!("INVALID: {}", o.client_invalid_reasons.join("; ")) },
    );
}

/// `12.3` or `12.3 ± 0.4`.
pub fn fmt_ci(c: Option<vodlab_lab::MeanCi>, digits: usize) -> String {
    match c {
        None => "-".into(),
        Some(c) => match c.half_width {
            Some(h) => format!("{:.*} ± {:.*}", digits, c.mean, digits, h),
            None => format!("{:.*}", digits, c.mean),
        },
    }
}

/// Records the bit-rate mix of the workload in `workload` in `file` and
/// rewrites `out/capacity.json` with it; a workload without a readable
/// catalog.json and stats.json (not made by `vodlab gen`) keeps the file as
/// it is, with a warning.
pub fn with_mix(
    mut file: CapacityFile,
    workload: &Path,
    out: &Path,
) -> anyhow::Result<CapacityFile> {
    match bitrate_mix(workload) {
        Ok(mix) => {
            file.bitrate_mix = mix;
            file.write(&out.join("capacity.json"))?;
        }
        Err(e) => eprintln!("vodlab: no bit-rate mix in capacity.json: {e}"),
    }
    Ok(file)
}

/// The answer in viewers' units: `at the highest failure-free rate, 12.0
/// new sessions/s without a failed session: 96 concurrent viewers on
/// average (peak 110), 0.41 Gbit/s delivered (bit rates by share of bytes:
/// ...)`; `None` when no point passed.
pub fn viewers_line(file: &CapacityFile) -> Option<String> {
    let v = file.at_capacity.as_ref()?;
    Some(format!(
        "in viewers: {}{}",
        v.sentence(),
        mix_suffix(&file.bitrate_mix)
    ))
}

/// ` (bit rates by share of bytes: ...)`, or nothing without a mix.
pub fn mix_suffix(mix: &[vodlab_lab::capacity::RepShare]) -> String {
    if mix.is_empty() {
        String::new()
    } else {
        format!(" ({})", mix_words(mix))
    }
}

/// The summary table and the answer in words.
pub fn table(file: &CapacityFile) -> String {
    let mut s = String::new();
    s += &format!(
        "{:>10}  {:>7}  {:>4}  {:>16}  {:>14}  {}\n",
        "rate/s", "verdict", "runs", "delivered MB/s", "failed %", "client"
    );
    for r in rows(&file.search) {
        s += &format!(
            "{:>10.3}  {:>7}  {:>4}  {:>16}  {:>14}  {}\n",
            r.rate,
            r.verdict.label(),
            r.runs,
            fmt_ci(r.delivered_mb_s, 1),
            fmt_ci(r.failed_pct, 2),
            if r.client_valid { "ok" } else { "INVALID" }
        );
    }
    s += &file.answer_line();
    s
}

pub fn run(a: CapacityArgs) -> anyhow::Result<ExitCode> {
    if a.search.print_settings {
        println!("{}", serde_json::to_string(&SearchDefaults::of(&a.search))?);
        return Ok(ExitCode::SUCCESS);
    }
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
    let mut runner = runner(&a.workload, &a.target, a.allow_remote, &a.search, &out)?;
    crate::run::reachable(&a.target, runner.addr())?;
    let mut search = Search::new(cfg)?;
    check_rules(
        &a.search.fail_on,
        runner.capacity_file(&search, None, None, 0.0),
    )?;
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
    let mut printer = Printer::new("", &a.search);
    let res: anyhow::Result<_> = runner.run_search(
        &mut search,
        &mut printer,
        || {
            if let Some((root, catalog)) = &cool {
                vodlab_fileset::cool(root, catalog)
                    .with_context(|| format!("cooling {}", root.display()))?;
            }
            Ok(())
        },
        |m, o| {
            add_viewer_figures(&mut o.extra, &m.results);
            Ok(())
        },
    );
    let stop = runner.stop_of(&res.as_ref().map_err(|e| format!("{e:#}")));
    let file = runner.write_capacity(&search, stop.as_ref(), None, started)?;
    runner.finish();
    let file = with_mix(file, &a.workload, &out)?;
    print!("{}", table(&file));
    if let Some(v) = viewers_line(&file) {
        println!("{v}");
    }
    println!("  results: {}", out.join("capacity.json").display());
    let breaches = crate::exit::judge("capacity", &a.search.fail_on, &file)?;
    if let Err(e) = res {
        eprintln!("vodlab capacity: stopped early: {e:#}");
        return Ok(ExitCode::from(stopped_early_status()));
    }
    Ok(crate::exit::of_breaches(&breaches))
}

/// The exit status of the signal that stopped the search: 130 for
/// SIGINT, 143 for SIGTERM (README "Exit statuses").
static SIGNALLED: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);

/// The exit status of a search that stopped early: 130 (SIGINT) or 143
/// (SIGTERM) when a signal stopped it, else 1.
pub fn stopped_early_status() -> u8 {
    if !interrupter().is_interrupted() {
        return crate::exit::CHECK_FAILED;
    }
    match SIGNALLED.load(std::sync::atomic::Ordering::Relaxed) {
        // a cancel from inside, not a signal
        0 => crate::exit::INTERRUPTED,
        code => code,
    }
}

/// Checks `--fail-on` rules against the shape of a capacity.json before
/// anything runs: a path that names no figure is a
/// usage error, not a wasted search.
pub fn check_rules(
    rules: &[vodlab_client::out::thresholds::Rule],
    mut shape: vodlab_lab::CapacityFile,
) -> anyhow::Result<()> {
    // the figures a finished search adds, present so their names are known
    shape
        .at_capacity
        .get_or_insert(vodlab_lab::capacity::Viewers {
            rate: 0.0,
            runs: 0,
            mean_active_sessions: Some(0.0),
            peak_active_sessions: Some(0),
            delivered_gbit_s: 0.0,
        });
    vodlab_client::out::thresholds::check_before(rules, &serde_json::to_value(shape)?, &[])?;
    Ok(())
}
