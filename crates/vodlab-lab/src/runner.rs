//! The point runner: one capacity point is one real load run (the
//! `vodlab run` engine) at a rate for a window of arrivals, then a drain; its
//! results.json goes to `points/NN-rate-R-run-K/` and its [`Outcome`] to the
//! search. Argument parsing, progress display and printing belong to the
//! caller ([`RunObserver`]).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use vodlab_client::{Arrivals, Live, LoadedWorkload, Results, RunConfig, StopReason};
use vodlab_workload::TimeCompression;

use crate::capacity::{CapacityFile, CapacityMeta, Stop};
use crate::files::FileError;
pub use crate::point::{Interrupter, PointSettings, RunnerError};
use crate::search::{Answer, Outcome, RunExtra, Search, Verdict};

/// Where the load goes.
#[derive(Debug, Clone)]
pub struct Target {
    /// Resolved address.
    pub addr: SocketAddr,
    /// `Host` header value.
    pub host: String,
    /// The URL as given (recorded in the files).
    pub url: String,
}

/// The workload replayed `tc` times faster: every session compressed
/// ([`TimeCompression::session`]: pacing, think times and deadlines / k,
/// bit rates × k) and every client link's rates × k, delay / k.
pub fn compress_workload(work: &mut LoadedWorkload, tc: TimeCompression) {
    work.compress(tc);
}

/// What the caller sees of each run (progress, one line per settled run).
pub trait RunObserver {
    /// A run of `sessions` sessions started; `live` counts as it goes.
    fn started(&mut self, _live: &Arc<Live>, _sessions: u64) {}
    /// The run ended (its results are written).
    fn finished(&mut self) {}
    /// Repetition `repeat` at `rate` was judged.
    fn judged(&mut self, _rate: f64, _repeat: u32, _o: &Outcome, _v: Verdict, _why: Option<&str>) {}
}

/// What a command sees of a search beyond its runs: notices of its set-up
/// and progress (the binary prints them on stderr).
pub trait SearchObserver: RunObserver {
    /// A notice, one or more whole lines.
    fn note(&mut self, _line: &str) {}
}

/// An observer that shows nothing.
pub struct Quiet;
impl RunObserver for Quiet {}
impl SearchObserver for Quiet {}

/// One finished run: what the search needs and the full results.
pub struct Measured {
    /// For the search.
    pub outcome: Outcome,
    /// Everything.
    pub results: Results,
}

/// One point's results, however it ran.
struct Ran {
    results: Results,
    /// Sessions started.
    started: u64,
    /// Sessions ended (completed or failed).
    ended: u64,
    /// Body bytes of every completed request.
    bytes: u64,
    /// Stopped by Ctrl-C.
    interrupted: bool,
    /// Stopped because the server stopped answering.
    unreachable: bool,
}

/// Runs one point after another against one target.
pub struct PointRunner {
    rt: tokio::runtime::Runtime,
    work: Arc<LoadedWorkload>,
    /// The workload as given (for the client processes).
    workload: PathBuf,
    /// How long before a spread point's start its children are started.
    lead: Duration,
    base: RunConfig,
    settings: PointSettings,
    out: PathBuf,
    interrupter: Interrupter,
    runs: usize,
    vodlab_stats: bool,
    /// Where `/vodlab/stats` is fetched: the target, or a proxy's backend.
    stats_addr: SocketAddr,
}

impl PointRunner {
    /// Loads the workload (its shards as one script with one arrival
    /// process) and prepares the runtime; files go under `out`.
    pub fn new(
        workload: &Path,
        target: Target,
        settings: PointSettings,
        out: &Path,
        interrupter: Interrupter,
    ) -> Result<Self, RunnerError> {
        settings.validate()?;
        let t_load = Instant::now();
        let mut work = LoadedWorkload::open(workload).map_err(|source| RunnerError::Workload {
            path: workload.to_path_buf(),
            source,
        })?;
        if work.session_count() == 0 {
            return Err(RunnerError::NoSessions(workload.to_path_buf()));
        }
        if !settings.keep_ramps {
            work.ramp_up = 0;
            work.ramp_down = 0;
        }
        // one arrival process at the point's rate: with per-shard processes a
        // point's few sessions would all start at once (each shard's first
        // session starts at t = 0)
        crate::procs::one_arrival_process(&mut work);
        compress_workload(&mut work, settings.time_compression);
        // children load the workload too, side by side (N of them on the
        // machine's cores): start them well before the point's start time
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
        let rounds = (f64::from(settings.client_processes) / cores)
            .ceil()
            .max(1.0);
        let lead = crate::procs::start_lead(t_load.elapsed(), rounds);
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .map_err(RunnerError::Runtime)?;
        let mut base = RunConfig::new(
            target.addr,
            target.host,
            target.url,
            Arrivals::Poisson { rate: 1.0 },
        );
        base.shaping = settings.shaping;
        base.pacing = settings.pacing;
        base.check_bytes = settings.check_bytes;
        base.transport = settings.transport.clone();
        base.late_threshold = Duration::from_secs_f64(settings.late_threshold_ms.max(0.0) / 1e3);
        base.interval_s = 1.0;
        std::fs::create_dir_all(out).map_err(|source| RunnerError::Io {
            path: out.to_path_buf(),
            source,
        })?;
        let vodlab_stats = fetch_vodlab_stats(target.addr).is_some();
        Ok(Self {
            rt,
            work: Arc::new(work),
            workload: std::path::absolute(workload).unwrap_or_else(|_| workload.to_path_buf()),
            lead,
            base,
            settings,
            out: out.to_path_buf(),
            interrupter,
            runs: 0,
            vodlab_stats,
            stats_addr: target.addr,
        })
    }

    /// Fetches the server statistics from `addr` instead of the target (the
    /// `vodlab serve` behind a proxy such as nghttpx, whose TLS frontend
    /// the plain-HTTP fetch cannot pass); gives whether a `vodlab serve`
    /// answers there (else no statistics are recorded).
    pub fn stats_from(&mut self, addr: SocketAddr) -> bool {
        self.stats_addr = addr;
        self.vodlab_stats = fetch_vodlab_stats(addr).is_some();
        self.vodlab_stats
    }

    /// The address the points load.
    pub fn addr(&self) -> SocketAddr {
        self.base.addr
    }

    /// The workload's name.
    pub fn workload_name(&self) -> &str {
        &self.work.name
    }

    /// The output directory.
    pub fn out(&self) -> &Path {
        &self.out
    }

    /// The target is a `vodlab serve` (its statistics are recorded per run).
    pub fn is_vodlab_serve(&self) -> bool {
        self.vodlab_stats
    }

    /// Sessions a point at `rate` starts.
    pub fn sessions_at(&self, rate: f64) -> usize {
        ((rate * self.settings.window_s).ceil() as usize).clamp(1, self.work.session_count())
    }

    /// Runs one point: `rate` sessions/s for the window, then the drain.
    pub fn measure(
        &mut self,
        rate: f64,
        repeat: u32,
        obs: &mut dyn RunObserver,
    ) -> Result<Measured, RunnerError> {
        if self.interrupter.is_interrupted() {
            return Err(RunnerError::Interrupted);
        }
        if self.runs > 0 && self.settings.pause_s > 0.0 {
            std::thread::sleep(Duration::from_secs_f64(self.settings.pause_s));
        }
        self.runs += 1;
        let n = self.sessions_at(rate);
        let seed = self.settings.seed + u64::from(repeat);
        // nominal rate and times in, wall-clock ones out (k = 1: the same)
        let tc = self.settings.time_compression;
        let duration = Duration::from_secs_f64(tc.seconds(n as f64 / rate + self.settings.drain_s));
        let rel = format!("points/{:02}-rate-{rate:.4}-run-{}", self.runs, repeat + 1);
        let dir = self.out.join(&rel);
        std::fs::create_dir_all(&dir).map_err(|source| RunnerError::Io {
            path: dir.clone(),
            source,
        })?;
        let live = Arc::new(Live::default());
        live.total.store(n as u64, Ordering::Relaxed);
        obs.started(&live, n as u64);
        let stats_before = self
            .vodlab_stats
            .then(|| fetch_vodlab_stats(self.stats_addr))
            .flatten();
        let t = Instant::now();
        let processes = crate::procs::processes_for(&self.settings, n);
        let ran = if processes > 1 {
            self.run_spread(rate, seed, n, duration, processes, &dir, &live)
        } else {
            self.run_here(tc.rate(rate), seed, n, duration, &dir, &live)
        };
        let wall = t.elapsed().as_secs_f64();
        live.done.store(true, Ordering::Relaxed);
        obs.finished();
        let Ran {
            results,
            started,
            ended,
            bytes,
            interrupted,
            unreachable,
        } = ran?;
        write_results(&dir, &results)?;
        if interrupted {
            return Err(RunnerError::InterruptedRun(dir));
        }
        if unreachable {
            return Err(RunnerError::ServerUnreachable {
                target: self.base.target.clone(),
                dir,
            });
        }
        let unfinished = started.saturating_sub(ended);
        let stats_after = stats_before
            .is_some()
            .then(|| fetch_vodlab_stats(self.stats_addr))
            .flatten();
        let (server_stats_before, server_stats_after) = match (stats_before, stats_after) {
            (Some(b), Some(a)) => (Some(b), Some(a)),
            _ => (None, None),
        };
        let outcome = Outcome {
            measured_sessions: results.measured_sessions,
            failed_sessions: results.failed_sessions,
            unfinished_sessions: unfinished,
            stalled_sessions: results.stalled_sessions,
            p95_startup_s: tc.nominal_seconds(results.startup_delay_s.p95),
            throughput_bytes_per_s: tc.nominal_rate(results.throughput_bytes_per_s),
            client_valid: results.valid,
            client_invalid_reasons: results.invalid_reasons.clone(),
            extra: RunExtra {
                sessions: Some(n as u64),
                wall_s: Some(wall),
                delivered_bytes: Some(bytes),
                response_p99_ms: Some(tc.nominal_seconds(results.response_time_ms.p99)),
                results: Some(rel),
                server_stats_before,
                server_stats_after,
                ..Default::default()
            },
        };
        Ok(Measured { outcome, results })
    }

    /// A point in this process: one `vodlab_client::run`.
    fn run_here(
        &self,
        rate: f64,
        seed: u64,
        n: usize,
        duration: Duration,
        dir: &Path,
        live: &Arc<Live>,
    ) -> Result<Ran, RunnerError> {
        let mut cfg = self.base.clone();
        cfg.arrivals = Arrivals::Poisson { rate };
        cfg.seed = seed;
        cfg.max_sessions = Some(n);
        cfg.max_duration = Some(duration);
        if self.settings.requests_csv {
            cfg.requests_csv = Some(dir.join("requests.csv"));
        }
        let cancel = self.interrupter.subscribe();
        let results = self
            .rt
            .block_on(vodlab_client::run(
                self.work.clone(),
                cfg,
                live.clone(),
                cancel,
            ))
            .map_err(RunnerError::Client)?;
        let ended = live.completed.load(Ordering::Relaxed) + live.failed.load(Ordering::Relaxed);
        Ok(Ran {
            interrupted: results.stopped_by == StopReason::Interrupted,
            unreachable: results.stopped_by == StopReason::ServerUnreachable,
            started: live.started.load(Ordering::Relaxed),
            ended,
            bytes: live.bytes.load(Ordering::Relaxed),
            results,
        })
    }

    /// A point spread over `processes` children (`vodlab run --shard I/N`
    /// into `dir/shard-I`), merged.
    #[allow(clippy::too_many_arguments)]
    fn run_spread(
        &self,
        rate: f64,
        seed: u64,
        n: usize,
        duration: Duration,
        processes: u32,
        dir: &Path,
        live: &Arc<Live>,
    ) -> Result<Ran, RunnerError> {
        use crate::procs::{child_args, run_children, ChildPoint, Children};
        let exe = self
            .settings
            .client_exe
            .as_deref()
            .ok_or_else(|| RunnerError::Settings("client_exe is not set".into()))?;
        let start_at_unix_s = unix_now() + self.lead.as_secs_f64();
        let remote = !self.base.addr.ip().is_loopback();
        let args: Vec<(vodlab_client::ShardSpec, Vec<std::ffi::OsString>, PathBuf)> = (0
            ..processes)
            .map(|index| {
                let shard = vodlab_client::ShardSpec {
                    index,
                    count: processes,
                };
                let out = dir.join(format!("shard-{index}"));
                let a = child_args(
                    &self.settings,
                    &ChildPoint {
                        workload: &self.workload,
                        target: &self.base.target,
                        remote,
                        rate,
                        seed,
                        sessions: n,
                        duration_s: duration.as_secs_f64(),
                        shard,
                        start_at_unix_s,
                        out: &out,
                    },
                );
                (shard, a, out)
            })
            .collect();
        let shard_dirs: Vec<PathBuf> = args.iter().map(|(_, _, d)| d.clone()).collect();
        let margin = Duration::from_secs_f64(
            (duration.as_secs_f64() * 0.1).max(crate::procs::HANG_MARGIN_S),
        );
        let spread = run_children(Children {
            exe,
            args,
            hang_after: self.lead + duration + margin,
            interrupter: &self.interrupter,
            live,
        })?;
        if self.settings.requests_csv {
            let out = dir.join("requests.csv");
            crate::procs::join_requests_csv(&shard_dirs, &out)
                .map_err(|source| RunnerError::Io { path: out, source })?;
        }
        let unreachable = spread.results.merge.as_ref().is_some_and(|m| {
            m.starts
                .iter()
                .any(|s| s.stopped_by == StopReason::ServerUnreachable)
        });
        Ok(Ran {
            interrupted: self.interrupter.is_interrupted(),
            unreachable,
            started: spread.started,
            ended: spread.ended,
            bytes: spread.bytes,
            results: spread.results,
        })
    }

    /// Runs a whole search: `before_each` runs before every run (cooling,
    /// counters), `after_each` adds figures to its outcome; `obs` sees
    /// progress and every verdict. Stops at the first error, keeping the
    /// points so far in `search`.
    pub fn run_search<E: From<RunnerError>>(
        &mut self,
        search: &mut Search,
        obs: &mut dyn RunObserver,
        mut before_each: impl FnMut() -> Result<(), E>,
        mut after_each: impl FnMut(&Measured, &mut Outcome) -> Result<(), E>,
    ) -> Result<Answer, E> {
        while let Some(rate) = search.next_rate() {
            let repeat = search.next_repeat();
            before_each()?;
            let m = self.measure(rate, repeat, obs)?;
            let mut o = m.outcome.clone();
            after_each(&m, &mut o)?;
            let (v, why) = search.judge(&o);
            obs.judged(rate, repeat, &o, v, why.as_deref());
            search.record(rate, o);
        }
        Ok(search.answer())
    }

    /// How a search that ended with `res` stopped early, if it did.
    pub fn stop_of<T, E: std::fmt::Display>(&self, res: &Result<T, E>) -> Option<Stop> {
        match res {
            Ok(_) => None,
            Err(e) if self.interrupter.is_interrupted() => Some(Stop::Interrupted(e.to_string())),
            Err(e) => Some(Stop::Error(e.to_string())),
        }
    }

    /// Writes `capacity.json` of `search` into the output directory and
    /// returns it; `stop` says why the search stopped early, `server` is a
    /// label (compare and bench), `started` the Unix time it began.
    pub fn write_capacity(
        &self,
        search: &Search,
        stop: Option<&Stop>,
        server: Option<String>,
        started: f64,
    ) -> Result<CapacityFile, FileError> {
        let file = self.capacity_file(search, stop, server, started);
        file.write(&self.out.join("capacity.json"))?;
        Ok(file)
    }

    /// `capacity.json` of `search` as it stands, not written (before a
    /// search: the shape `--fail-on` rules are checked against).
    pub fn capacity_file(
        &self,
        search: &Search,
        stop: Option<&Stop>,
        server: Option<String>,
        started: f64,
    ) -> CapacityFile {
        let meta = CapacityMeta {
            workload: self.work.name.clone(),
            target: self.base.target.clone(),
            server,
            window_s: self.settings.window_s,
            drain_s: self.settings.drain_s,
            pacing: self.settings.pacing,
            shaping: self.settings.shaping,
            late_threshold_ms: Some(self.settings.late_threshold_ms),
            time_compression: (!self.settings.time_compression.is_none())
                .then(|| self.settings.time_compression.k()),
            client_processes: Some(self.settings.client_processes),
            started_at_unix_s: started,
        };
        CapacityFile::new(search, stop, meta, unix_now())
    }

    /// Shuts the runtime down.
    pub fn finish(self) {
        self.rt.shutdown_timeout(Duration::from_millis(200));
    }
}

/// Writes results.json and summary.txt of a run into `dir`, each
/// atomically ([`vodlab_client::out::atomic::write`]).
pub fn write_results(dir: &Path, r: &Results) -> Result<(), RunnerError> {
    r.write(dir).map_err(|e| match e {
        vodlab_client::out::results::WriteError::Write(w) => RunnerError::File(w.into()),
        vodlab_client::out::results::WriteError::Json(source) => RunnerError::Io {
            path: dir.join("results.json"),
            source: source.into(),
        },
    })
}

/// `GET /vodlab/stats` from a `vodlab serve` (`None` for other servers, on
/// any error, or when it does not answer within 2 s). The request and the
/// response go through the shared HTTP/1 codec (`vodlab_http::client`).
pub fn fetch_vodlab_stats(addr: SocketAddr) -> Option<serde_json::Value> {
    use std::io::Write;
    use vodlab_http::client::{encode_request, RequestHead};
    let mut req = Vec::new();
    encode_request(
        &RequestHead {
            method: "GET",
            target: "/vodlab/stats",
            host: "vodlab",
            http10: false,
            range: None,
            headers: &["Connection: close".to_string()],
            session: None,
            body: None,
        },
        &mut req,
    )
    .ok()?;
    let mut s = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    s.set_write_timeout(Some(Duration::from_secs(2))).ok()?;
    s.write_all(&req).ok()?;
    read_stats_response(&mut s)
}

/// Reads one `/vodlab/stats` response from `r` to its end through the
/// client codec; its JSON body when the status is 200 and the body is
/// whole, valid JSON of at most 1 MiB.
fn read_stats_response(r: &mut impl std::io::Read) -> Option<serde_json::Value> {
    use vodlab_http::client::{Decoded, ResponseDecoder};
    const MAX_BODY: usize = 1 << 20;
    let mut dec = ResponseDecoder::new(false);
    let mut body = Vec::new();
    let mut pending: Vec<u8> = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    loop {
        let n = r.read(&mut buf).ok()?;
        if n == 0 {
            dec.eof().ok()?;
            break;
        }
        pending.extend_from_slice(&buf[..n]);
        let p = dec
            .feed(&pending, &mut |_, b: &[u8]| body.extend_from_slice(b))
            .ok()?;
        pending.drain(..p.consumed);
        if body.len() > MAX_BODY {
            return None;
        }
        if p.state == Decoded::Complete {
            break;
        }
    }
    if dec.head()?.status != 200 {
        return None;
    }
    serde_json::from_slice(&body).ok()
}

/// Now, Unix seconds (for the files' timestamps).
pub fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

#[cfg(test)]
mod tests;
