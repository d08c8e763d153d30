//! A point spread over local client processes (`--client-processes N`):
//! each point runs as N `vodlab run --shard I/N --start-at T` children of
//! the same binary, writing `points/NN-.../shard-I/`, and their results are
//! merged exactly (`vodlab_client::out::shard::merge`) into the point's
//! `results.json`.
//!
//! The children get the point's own schedule: the workload's script shards
//! as one arrival process (`vodlab run --one-arrival-process`, as
//! [`one_arrival_process`] does for an in-process point), the same rate,
//! seed, session cap and duration. With one script shard the split rule of
//! `vodlab_client::out::shard` gives child `I` the sessions `i ≡ I (mod N)` of
//! the one-process schedule, each at the offset it has there, so the N
//! children together run the sessions of the in-process point at the same
//! offsets from the shared start time.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use vodlab_client::io::transport::TransportConfig;
use vodlab_client::out::shard::{self, Part};
use vodlab_client::{Live, LoadedWorkload, MetricsDump, Results, ShardSpec, StopReason};

pub use crate::point::MAX_CLIENT_PROCESSES;
use crate::point::{Interrupter, PointSettings, RunnerError};

/// Extra time a child gets past the point's longest duration before it is
/// counted as hung and stopped: at least this, s.
pub const HANG_MARGIN_S: f64 = 10.0;
/// From SIGTERM to SIGKILL, s.
const KILL_GRACE: Duration = Duration::from_secs(5);
/// How often the running children's checkpoints are read for progress.
const PROGRESS_EVERY: Duration = Duration::from_secs(1);
/// How often the children are polled.
const POLL: Duration = Duration::from_millis(50);

/// Replaces the workload's script shards by one holding all their sessions
/// in shard order, so a run has one arrival process at its rate (each
/// script shard otherwise gets its own schedule at rate / S, and a point's
/// few sessions would start at once, one at offset 0 per shard). Used by a
/// point in process and by `vodlab run --one-arrival-process`, so both
/// number the sessions the same way.
pub fn one_arrival_process(work: &mut LoadedWorkload) {
    work.one_arrival_process();
}

/// How long before a spread point's start time its children are started:
/// 1 s plus 4 times the time this process took to load the workload, per
/// round of children the cores load side by side (`rounds` = N / cores,
/// rounded up), at most 60 s.
pub fn start_lead(load: Duration, rounds: f64) -> Duration {
    Duration::from_secs_f64((1.0 + 4.0 * load.as_secs_f64() * rounds.max(1.0)).min(60.0))
}

/// The child processes of a point: how many for `sessions` sessions
/// (never more processes than sessions, so no child runs none).
pub fn processes_for(settings: &PointSettings, sessions: usize) -> u32 {
    settings
        .client_processes
        .min(u32::try_from(sessions).unwrap_or(u32::MAX))
        .max(1)
}

/// One child's part of a point.
#[derive(Debug, Clone)]
pub struct ChildPoint<'a> {
    /// Workload path as the runner was given it.
    pub workload: &'a Path,
    /// Target URL.
    pub target: &'a str,
    /// The target is not a loopback address (`--allow-remote`).
    pub remote: bool,
    /// Arrival rate of the whole point, sessions/s.
    pub rate: f64,
    /// Seed of the point's schedule (settings seed + repetition).
    pub seed: u64,
    /// Sessions the whole point starts.
    pub sessions: usize,
    /// The point's duration cap, s.
    pub duration_s: f64,
    /// Which child.
    pub shard: ShardSpec,
    /// Shared start time, Unix seconds.
    pub start_at_unix_s: f64,
    /// The child's results directory.
    pub out: &'a Path,
}

/// The `vodlab` arguments of one child: the point's settings as `vodlab
/// run` flags (see `vodlab run --help`).
pub fn child_args(s: &PointSettings, p: &ChildPoint<'_>) -> Vec<OsString> {
    let mut a: Vec<OsString> = vec!["run".into(), p.workload.into()];
    let mut flag = |k: &str, v: String| {
        a.push(k.into());
        a.push(v.into());
    };
    // `{}` of an f64 writes the shortest text that reads back exactly
    flag("--target", p.target.to_string());
    flag("--rate", format!("{}", p.rate));
    flag("--arrivals", "poisson".into());
    flag("--seed", p.seed.to_string());
    flag("--sessions", p.sessions.to_string());
    flag("--duration", format!("{}", p.duration_s));
    flag("--interval", "1".into());
    flag("--check-bytes", format!("{}", s.check_bytes));
    flag("--late-threshold-ms", format!("{}", s.late_threshold_ms));
    flag("--shard", p.shard.to_string());
    flag("--start-at", format!("{:.6}", p.start_at_unix_s));
    if !s.keep_ramps {
        flag("--ramp-up", "0".into());
        flag("--ramp-down", "0".into());
    }
    transport_flags(&s.transport, &mut a);
    a.push("--one-arrival-process".into());
    // the search checked the target before its first point; a child's own
    // check would add a connection the server counts, in every point
    a.push("--no-connect-check".into());
    if !s.shaping {
        a.push("--no-shaping".into());
    }
    if !s.pacing {
        a.push("--no-pacing".into());
    }
    if s.requests_csv {
        a.push("--requests-csv".into());
    }
    if p.remote {
        a.push("--allow-remote".into());
    }
    a.push("--quiet".into());
    a.push("-o".into());
    a.push(p.out.into());
    a
}

/// `--protocol`, `--ca`, `--insecure` and the HTTP/2 flags of `t`.
fn transport_flags(t: &TransportConfig, a: &mut Vec<OsString>) {
    let mut flag = |k: &str, v: String| {
        a.push(k.into());
        a.push(v.into());
    };
    flag("--protocol", t.protocol.to_string());
    if let Some(ca) = &t.tls.ca {
        flag("--ca", ca.display().to_string());
    }
    // windows are 2^N - 1 bytes (`H2Settings::window_from_bits`)
    let bits = |w: u32| (u64::from(w) + 1).trailing_zeros().to_string();
    flag("--h2-window-bits", bits(t.h2.stream_window));
    flag("--h2-connection-window-bits", bits(t.h2.connection_window));
    flag("--h2-max-frame-size", t.h2.max_frame_size.to_string());
    flag(
        "--h2-max-concurrent-streams",
        t.h2.max_concurrent_streams.to_string(),
    );
    flag(
        "--h2-streams-per-connection",
        t.h2.streams_per_connection.to_string(),
    );
    if t.tls.insecure {
        a.push("--insecure".into());
    }
    if !t.source.is_empty() {
        let list: Vec<String> = t.source.iter().map(ToString::to_string).collect();
        a.push("--source-address".into());
        a.push(list.join(",").into());
    }
}

/// A spread point's merged results and the counts the search needs.
pub struct Spread {
    /// Merged, with the children's failures among its invalid reasons.
    pub results: Results,
    /// Sessions started, all children.
    pub started: u64,
    /// Sessions ended (completed or failed), all children.
    pub ended: u64,
    /// Body bytes of every completed request, all children.
    pub bytes: u64,
}

/// What the runner tells [`run_children`].
pub struct Children<'a> {
    /// The `vodlab` executable.
    pub exe: &'a Path,
    /// Each child's arguments and results directory.
    pub args: Vec<(ShardSpec, Vec<OsString>, PathBuf)>,
    /// A child still running this long after the start is hung.
    pub hang_after: Duration,
    /// Ctrl-C.
    pub interrupter: &'a Interrupter,
    /// Live progress: updated as children finish.
    pub live: &'a Live,
}

struct Kid {
    spec: ShardSpec,
    dir: PathBuf,
    child: Option<Child>,
    status: Option<ExitStatus>,
    /// What went wrong with the process (not with its results).
    trouble: Option<String>,
    /// What the live counters hold of it: `[started, completed, failed,
    /// requests, bytes]`.
    shown: [u64; 5],
}

fn signal(c: &Child, sig: i32) {
    // SAFETY: a plain kill(2) of a child this runner started, by its PID
    // (it is not reaped yet, so the PID is still ours)
    unsafe {
        libc::kill(c.id() as i32, sig);
    }
}

/// The last lines of a child's stderr, for messages.
fn stderr_tail(dir: &Path) -> String {
    let text = std::fs::read_to_string(dir.join("stderr.txt")).unwrap_or_default();
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(3)..].join(" | ")
}

fn read_json<T: serde::de::DeserializeOwned>(p: &Path) -> Result<T, String> {
    let text = std::fs::read(p).map_err(|e| format!("{}: {e}", p.display()))?;
    serde_json::from_slice(&text).map_err(|e| format!("{}: {e}", p.display()))
}

/// A child's results and metrics, `None` when it wrote neither. A child
/// that died after a checkpoint (`vodlab run --checkpoint`, every 10 s by
/// default with `--shard`) gives its last one, as `vodlab merge` reads it:
/// its `stopped_by` is `checkpoint`, which makes the merge incomplete.
fn read_part(dir: &Path) -> Result<Option<Part>, String> {
    let (r, m) = (dir.join("results.json"), dir.join("metrics.json"));
    if !r.exists() && !m.exists() {
        let c = dir.join(vodlab_client::CHECKPOINT_FILE);
        if !c.exists() {
            return Ok(None);
        }
        let c = vodlab_client::Checkpoint::read(&c)?;
        return Ok(Some(Part {
            label: format!(
                "{} (died; its checkpoint at {:.1} s)",
                dir.display(),
                c.results.duration_s
            ),
            results: c.results,
            dump: c.metrics,
        }));
    }
    let results: Results = read_json(&r)?;
    let dump: MetricsDump = read_json(&m)?;
    Ok(Some(Part {
        label: dir.display().to_string(),
        results,
        dump,
    }))
}

/// Starts the children, waits for them (stopping them on Ctrl-C and when
/// one hangs), and merges what they wrote. `Err` only when no child left
/// results to merge, or a child could not be started.
pub fn run_children(mut c: Children<'_>) -> Result<Spread, RunnerError> {
    let mut kids = Vec::with_capacity(c.args.len());
    for (spec, args, dir) in std::mem::take(&mut c.args) {
        let io = |source| RunnerError::Io {
            path: dir.clone(),
            source,
        };
        std::fs::create_dir_all(&dir).map_err(io)?;
        let err = std::fs::File::create(dir.join("stderr.txt")).map_err(io)?;
        let spawned = Command::new(c.exe)
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(err)
            .spawn();
        match spawned {
            Ok(child) => kids.push(Kid {
                spec,
                dir,
                child: Some(child),
                status: None,
                trouble: None,
                shown: [0; 5],
            }),
            Err(source) => {
                stop_all(&mut kids);
                return Err(RunnerError::ClientProcess(format!(
                    "starting shard {spec} ({}): {source}",
                    c.exe.display()
                )));
            }
        }
    }
    wait_all(&mut kids, &c);
    merge_children(&kids, c.interrupter.is_interrupted())
}

/// SIGKILL and reap every child still running (a failed start).
fn stop_all(kids: &mut [Kid]) {
    for k in kids {
        if let Some(mut ch) = k.child.take() {
            let _ = ch.kill();
            let _ = ch.wait();
        }
    }
}

fn wait_all(kids: &mut [Kid], c: &Children<'_>) {
    let t0 = Instant::now();
    let mut term_sent: Option<Instant> = None;
    let mut last_look = t0;
    loop {
        // progress from the running children's checkpoints, now and then
        if last_look.elapsed() >= PROGRESS_EVERY {
            last_look = Instant::now();
            for k in kids.iter_mut().filter(|k| k.child.is_some()) {
                let p = k.dir.join(vodlab_client::CHECKPOINT_FILE);
                if let Ok(cp) = vodlab_client::Checkpoint::read(&p) {
                    show(k, &cp.metrics, c.live);
                }
            }
        }
        for k in kids.iter_mut() {
            let Some(ch) = k.child.as_mut() else { continue };
            if let Ok(Some(st)) = ch.try_wait() {
                k.status = Some(st);
                k.child = None;
                if let Ok(d) = read_json::<MetricsDump>(&k.dir.join("metrics.json")) {
                    show(k, &d, c.live);
                }
                if !ran_to_results(st, &k.dir) && k.trouble.is_none() {
                    k.trouble = Some(format!(
                        "its process exited with {st}{}",
                        match stderr_tail(&k.dir) {
                            t if t.is_empty() => String::new(),
                            t => format!(": {t}"),
                        }
                    ));
                }
            }
        }
        if kids.iter().all(|k| k.child.is_none()) {
            return;
        }
        let now = Instant::now();
        match term_sent {
            None if c.interrupter.is_interrupted() => {
                kids.iter().filter_map(|k| k.child.as_ref()).for_each(|ch| {
                    signal(ch, libc::SIGTERM);
                });
                term_sent = Some(now);
            }
            None if now.duration_since(t0) > c.hang_after => {
                for k in kids.iter_mut() {
                    if let Some(ch) = &k.child {
                        k.trouble = Some(format!(
                            "its process (PID {}) was still running {:.0} s after it was started, past the point's duration and a margin, and was stopped",
                            ch.id(),
                            c.hang_after.as_secs_f64()
                        ));
                        signal(ch, libc::SIGTERM);
                    }
                }
                term_sent = Some(now);
            }
            Some(at) if now.duration_since(at) > KILL_GRACE => {
                for k in kids.iter_mut() {
                    if let Some(mut ch) = k.child.take() {
                        let pid = ch.id();
                        let _ = ch.kill();
                        k.status = ch.wait().ok();
                        k.trouble = Some(format!(
                            "its process (PID {pid}) did not stop within {} s of SIGTERM and was killed",
                            KILL_GRACE.as_secs()
                        ));
                    }
                }
            }
            _ => {}
        }
        std::thread::sleep(POLL);
    }
}

/// Brings the live counters to what `d` (a child's metrics so far, or
/// its final ones) says, replacing what was shown of that child before.
fn show(k: &mut Kid, d: &MetricsDump, live: &Live) {
    let mut now = [d.started_sessions, 0, 0, 0, 0];
    for b in &d.bins {
        now[1] += b[3];
        now[2] += b[4];
        now[3] += b[0];
        now[4] += b[1];
    }
    let counters = [
        &live.started,
        &live.completed,
        &live.failed,
        &live.requests,
        &live.bytes,
    ];
    for ((c, new), old) in counters.iter().zip(now).zip(k.shown) {
        if new >= old {
            c.fetch_add(new - old, Ordering::Relaxed);
        } else {
            c.fetch_sub(old - new, Ordering::Relaxed);
        }
    }
    k.shown = now;
    let ended = live.completed.load(Ordering::Relaxed) + live.failed.load(Ordering::Relaxed);
    live.active.store(
        live.started.load(Ordering::Relaxed).saturating_sub(ended),
        Ordering::Relaxed,
    );
}

/// Merges the children's results; `interrupted`: the search stopped them
/// (Ctrl-C), so an interrupted shard is no fault of its own.
fn merge_children(kids: &[Kid], interrupted: bool) -> Result<Spread, RunnerError> {
    let mut parts = Vec::new();
    let mut missing = Vec::new();
    let mut reasons = Vec::new();
    for k in kids {
        let name = format!("shard {} ({})", k.spec, k.dir.display());
        match read_part(&k.dir) {
            Ok(Some(p)) => {
                // a child stopped by a signal that was not ours
                if p.results.stopped_by == StopReason::Interrupted
                    && k.trouble.is_none()
                    && !interrupted
                {
                    reasons.push(format!("{name} was interrupted"));
                }
                parts.push(p)
            }
            Ok(None) => {
                missing.push(k.dir.display().to_string());
                reasons.push(format!("{name} wrote no results"));
            }
            Err(e) => reasons.push(format!("{name}: unreadable results: {e}")),
        }
        if let Some(t) = &k.trouble {
            reasons.push(format!("{name}: {t}"));
        }
    }
    if parts.is_empty() {
        return Err(RunnerError::ClientProcess(format!(
            "no client process left results: {}",
            reasons.join("; ")
        )));
    }
    let (mut started, mut ended, mut bytes) = (0, 0, 0);
    for p in &parts {
        started += p.dump.started_sessions;
        for b in &p.dump.bins {
            bytes += b[1];
            ended += b[3] + b[4];
        }
    }
    let mut results = shard::merge(&parts, &missing)
        .map_err(|e| RunnerError::ClientProcess(format!("merging the shards: {e}")))?;
    results.invalid_reasons.extend(reasons);
    results.valid = results.invalid_reasons.is_empty();
    Ok(Spread {
        results,
        started,
        ended,
        bytes,
    })
}

/// Joins the children's `requests.csv` files into `out` (one header, then
/// each child's rows; their times share the origin `T`), so the point has
/// the one file an in-process point writes (`vodlab report` reads it).
/// Children without the file are skipped.
pub fn join_requests_csv(dirs: &[PathBuf], out: &Path) -> std::io::Result<()> {
    use std::io::{BufRead, BufReader, BufWriter, Write};
    let mut w = BufWriter::new(std::fs::File::create(out)?);
    let mut header = false;
    for d in dirs {
        let Ok(f) = std::fs::File::open(d.join("requests.csv")) else {
            continue;
        };
        let mut r = BufReader::new(f);
        let mut first = String::new();
        r.read_line(&mut first)?;
        if !header {
            w.write_all(first.as_bytes())?;
            header = true;
        }
        std::io::copy(&mut r, &mut w)?;
    }
    w.flush()
}

#[cfg(test)]
mod tests;

/// True when `vodlab run` ended with its results written and a status that
/// says so (README "Exit statuses"): 0 passed, 1 a check failed (no
/// session succeeded: a failing point, not a broken client), 3 the server
/// stopped accepting connections mid-run, 130/143 interrupted (judged by
/// the results' `stopped_by`). Any other status, or one of these without
/// results, is the client process's own trouble: the point is INVALID.
fn ran_to_results(st: ExitStatus, dir: &Path) -> bool {
    st.success()
        || (matches!(st.code(), Some(1 | 3 | 130 | 143)) && dir.join("results.json").exists())
}
