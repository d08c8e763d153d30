//! `vodlab serve --workers N` as a library: N server processes sharing the
//! listen address with `SO_REUSEPORT` (the kernel spreads new connections
//! over their sockets), each with its own runtime and its own descriptor
//! limit. [`Workers::prepare`] checks the flags and makes the directory;
//! [`Workers::run`] starts the children, restarts one that dies (at most
//! [`MAX_RESTARTS`] in [`RESTART_WINDOW`], then it gives that worker up),
//! and merges their statistics until `stop` is set: each worker writes its
//! `/vodlab/stats` JSON to `worker-I.json` every second (`--stats-file`);
//! the merge ([`sum_stats`]) reaches the [`WorkersObserver`] every second,
//! which writes it to [`Workers::out`]. Signals and printing are the
//! caller's (the binary forwards SIGINT/SIGTERM by setting `stop`).

use std::ffi::OsString;
use std::fmt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Map, Value};
use thiserror::Error;

use crate::settings::{ServeArgs, SettingsError};

/// Most workers.
pub const MAX_WORKERS: u32 = 256;
/// Restarts of one worker allowed within [`RESTART_WINDOW`].
pub const MAX_RESTARTS: usize = 5;
/// The window of [`MAX_RESTARTS`].
pub const RESTART_WINDOW: Duration = Duration::from_secs(60);
/// How long the workers get to start listening.
const READY_WITHIN: Duration = Duration::from_secs(30);
/// From the SIGTERM at the end to a SIGKILL.
const STOP_WITHIN: Duration = Duration::from_secs(40);
const POLL: Duration = Duration::from_millis(100);

/// Flags of the parent's command line a worker does not get (`(flag,
/// takes a value)`): the parent spreads, writes the merged statistics and
/// prints the statistics line.
const PARENT_ONLY: [(&str, bool); 4] = [
    ("--workers", true),
    ("--workers-dir", true),
    ("--stats-file", true),
    ("--stats-interval", true),
];

/// Why the workers could not be started or kept.
#[derive(Debug, Error)]
pub enum WorkersError {
    /// `--workers` out of range.
    #[error("--workers must be from 1 to {MAX_WORKERS}, got {0}")]
    Count(u32),
    /// Port 0 would give each worker a port of its own.
    #[error("--workers needs a fixed --listen port: with port 0 each worker would listen on a port of its own")]
    PortZero,
    /// A flag naming one output file, which N workers would share.
    #[error("{0} with --workers: the workers would write one file over each other; run them as separate `vodlab serve --reuse-port` processes with a file each")]
    SharedFile(&'static str),
    /// `--h3`: QUIC needs each connection's datagrams at one process.
    #[error("--h3 with --workers: the workers' QUIC sockets would not share the UDP port (QUIC needs each connection's packets at one process); run one `vodlab serve --h3` beside them")]
    H3,
    /// The serve flags themselves.
    #[error(transparent)]
    Settings(#[from] SettingsError),
    /// The workers' directory could not be made.
    #[error("creating {}: {source}", path.display())]
    Dir {
        /// The directory.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A worker process could not be started.
    #[error("starting worker {index} ({}): {source}", exe.display())]
    Spawn {
        /// The worker's index.
        index: u32,
        /// The executable.
        exe: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A worker exited before it listened.
    #[error("worker {0} exited before it was listening (its error is above)")]
    ExitedEarly(u32),
    /// Not every worker listened in time (or `stop` came first).
    #[error("the workers were not all listening within {} s", READY_WITHIN.as_secs())]
    NotReady,
    /// Every worker exited and none could be restarted.
    #[error("every worker has exited and none could be restarted")]
    AllExited,
}

/// What the supervisor tells its caller while it runs (each one a line
/// for the user; `Display` words it).
#[derive(Debug)]
pub enum WorkersEvent {
    /// Every worker listens.
    Listening {
        /// Their PIDs.
        pids: Vec<u32>,
        /// The listen address.
        listen: String,
        /// The merged statistics file.
        out: PathBuf,
    },
    /// A worker exited; it is restarted unless `given_up`.
    Exited {
        /// The worker's index.
        index: u32,
        /// Its PID.
        pid: u32,
        /// How it ended.
        status: ExitStatus,
        /// Its starts within [`RESTART_WINDOW`] when it was given up.
        given_up: Option<usize>,
    },
    /// A restart failed: the worker is given up.
    RestartFailed(WorkersError),
    /// The statistics line, every `--stats-interval`.
    Stats {
        /// Workers alive.
        alive: u64,
        /// Workers started.
        n: u32,
        /// Requests so far, all workers.
        requests: u64,
        /// MB/s since the last line.
        mb_per_s: f64,
        /// Open connections.
        open: u64,
        /// Accepts that failed for want of a descriptor.
        accept_descriptor_errors: u64,
    },
    /// `stop` was set: the workers (this many) get SIGTERM.
    Stopping(u32),
    /// A worker did not stop within 40 s of SIGTERM and was killed.
    Killed {
        /// The worker's index.
        index: u32,
        /// Its PID.
        pid: u32,
    },
}

/// What the supervisor reports to (the binary prints and writes files).
pub trait WorkersObserver {
    /// An event, worded by its `Display`.
    fn event(&mut self, workers: &Workers, e: &WorkersEvent);
    /// The merged statistics, every second and at the end: the caller
    /// writes them to [`Workers::out`].
    fn merged(&mut self, workers: &Workers, merged: &Value);
}

/// The workers of one `vodlab serve --workers N`, checked and ready to
/// run.
#[derive(Debug)]
pub struct Workers {
    /// How many.
    pub n: u32,
    /// The directory of their statistics files.
    pub dir: PathBuf,
    /// The merged statistics file (`--stats-file`, else
    /// `DIR/workers.json`).
    pub out: PathBuf,
    /// The listen address, as the user gave it.
    pub listen: String,
    /// The statistics line's interval (zero: none).
    pub stats_every: Duration,
}

impl Workers {
    /// Checks the flags for `--workers` (every serve flag once, before any
    /// worker starts) and makes the directory of the workers' files
    /// (`--workers-dir`, else a temporary one named for this process).
    pub fn prepare(a: &ServeArgs, n: u32) -> Result<Self, WorkersError> {
        if !(1..=MAX_WORKERS).contains(&n) {
            return Err(WorkersError::Count(n));
        }
        if a.listen.port() == 0 {
            return Err(WorkersError::PortZero);
        }
        for (set, flag) in [
            (a.access_log.is_some(), "--access-log"),
            (a.prefetch_log.is_some(), "--prefetch-log"),
            (a.prefetch_events.is_some(), "--prefetch-events"),
        ] {
            if set {
                return Err(WorkersError::SharedFile(flag));
            }
        }
        if a.proto.h3.is_some() {
            return Err(WorkersError::H3);
        }
        a.config()?;
        let dir = match &a.workers_dir {
            Some(d) => d.clone(),
            None => std::env::temp_dir().join(format!("vodlab-serve-{}", std::process::id())),
        };
        std::fs::create_dir_all(&dir).map_err(|source| WorkersError::Dir {
            path: dir.clone(),
            source,
        })?;
        let out = a
            .stats_file
            .clone()
            .unwrap_or_else(|| dir.join("workers.json"));
        Ok(Self {
            n,
            dir,
            out,
            listen: a.listen.to_string(),
            stats_every: Duration::from_secs_f64(a.stats_interval.max(0.0)),
        })
    }

    /// Runs the workers: `exe` with the parent's `serve` arguments `argv`
    /// (without the program name; [`worker_args`] adapts them), until
    /// `stop` is set. True when every worker stopped by itself at the end.
    pub fn run(
        &self,
        exe: &Path,
        argv: &[OsString],
        stop: &AtomicBool,
        obs: &mut impl WorkersObserver,
    ) -> Result<bool, WorkersError> {
        let mut workers: Vec<Worker> = (0..self.n)
            .map(|index| Worker {
                index,
                stats: self.dir.join(format!("worker-{index}.json")),
                child: None,
                starts: Vec::new(),
                restarts: 0,
                given_up: false,
            })
            .collect();
        for w in &mut workers {
            if let Err(e) = w.spawn(exe, argv) {
                stop_all(&mut workers, self, obs);
                return Err(e);
            }
        }
        // ready when every worker has written its first statistics (it
        // writes them once it listens)
        let t0 = Instant::now();
        while !workers.iter().all(|w| w.stats.exists()) {
            let mut dead = None;
            for w in workers.iter_mut() {
                if let Some(c) = w.child.as_mut() {
                    if let Ok(Some(_)) = c.try_wait() {
                        // reaped: never signalled again (its PID may be reused)
                        w.child = None;
                        dead = Some(w.index);
                    }
                }
            }
            if let Some(i) = dead {
                stop_all(&mut workers, self, obs);
                return Err(WorkersError::ExitedEarly(i));
            }
            if t0.elapsed() > READY_WITHIN || stop.load(Ordering::Relaxed) {
                stop_all(&mut workers, self, obs);
                return Err(WorkersError::NotReady);
            }
            std::thread::sleep(POLL);
        }
        let pids = workers.iter().filter_map(Worker::pid).collect();
        let (listen, out) = (self.listen.clone(), self.out.clone());
        obs.event(self, &WorkersEvent::Listening { pids, listen, out });
        let (mut last_line, mut last_write) = (Instant::now(), Instant::now());
        let mut last_bytes = 0u64;
        while !stop.load(Ordering::Relaxed) {
            std::thread::sleep(POLL);
            for w in workers.iter_mut() {
                let Some(c) = w.child.as_mut() else { continue };
                let Ok(Some(status)) = c.try_wait() else {
                    continue;
                };
                let pid = c.id();
                w.child = None;
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let given_up = give_up(&mut w.starts, Instant::now());
                obs.event(
                    self,
                    &WorkersEvent::Exited {
                        index: w.index,
                        pid,
                        status,
                        given_up,
                    },
                );
                if given_up.is_some() {
                    w.given_up = true;
                    continue;
                }
                w.restarts += 1;
                if let Err(e) = w.spawn(exe, argv) {
                    w.given_up = true;
                    obs.event(self, &WorkersEvent::RestartFailed(e));
                }
            }
            if workers.iter().all(|w| w.child.is_none()) {
                obs.merged(self, &merged(&workers, &self.listen));
                return Err(WorkersError::AllExited);
            }
            if last_write.elapsed() >= Duration::from_secs(1) {
                last_write = Instant::now();
                let m = merged(&workers, &self.listen);
                obs.merged(self, &m);
                if !self.stats_every.is_zero() && last_line.elapsed() >= self.stats_every {
                    let t = &m["total"];
                    let num = |k: &str| t[k].as_u64().unwrap_or(0);
                    let dt = last_line.elapsed().as_secs_f64();
                    last_line = Instant::now();
                    obs.event(
                        self,
                        &WorkersEvent::Stats {
                            alive: m["alive"].as_u64().unwrap_or(0),
                            n: self.n,
                            requests: num("requests"),
                            mb_per_s: num("bytes").saturating_sub(last_bytes) as f64
                                / dt
                                / 1048576.0,
                            open: num("open_connections"),
                            accept_descriptor_errors: num("accept_descriptor_errors"),
                        },
                    );
                    last_bytes = num("bytes");
                }
            }
        }
        obs.event(self, &WorkersEvent::Stopping(self.n));
        obs.merged(self, &merged(&workers, &self.listen));
        Ok(stop_all(&mut workers, self, obs))
    }
}

impl fmt::Display for WorkersEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Listening { pids, listen, out } => {
                let p: Vec<String> = pids.iter().map(u32::to_string).collect();
                write!(
                    f,
                    "{} workers on http://{listen} (SO_REUSEPORT; PIDs {}); merged statistics in {}",
                    p.len(),
                    p.join(", "),
                    out.display()
                )
            }
            Self::Exited {
                index,
                pid,
                status,
                given_up: Some(starts),
            } => write!(
                f,
                "worker {index} (PID {pid}) exited ({status}), its {starts} start in {} s; not restarting it",
                RESTART_WINDOW.as_secs()
            ),
            Self::Exited {
                index, pid, status, ..
            } => write!(f, "worker {index} (PID {pid}) exited ({status}); restarting it"),
            Self::RestartFailed(e) => write!(f, "{e}; given up"),
            Self::Stats {
                alive,
                n,
                requests,
                mb_per_s,
                open,
                accept_descriptor_errors,
            } => write!(
                f,
                "{alive} of {n} workers: {requests} req, {mb_per_s:.1} MB/s, {open} open, {accept_descriptor_errors} accept descriptor errors"
            ),
            Self::Stopping(n) => write!(
                f,
                "stopping {n} workers (SIGTERM); they finish responses in flight"
            ),
            Self::Killed { index, pid } => write!(
                f,
                "worker {index} (PID {pid}) did not stop within {} s of SIGTERM; killed",
                STOP_WITHIN.as_secs()
            ),
        }
    }
}

/// A worker's arguments: the parent's `serve` arguments without
/// [`PARENT_ONLY`], then `--reuse-port`, its own statistics file and no
/// statistics lines of its own.
pub fn worker_args(argv: &[OsString], stats: &Path) -> Vec<OsString> {
    let mut a = Vec::with_capacity(argv.len() + 6);
    let mut it = argv.iter();
    while let Some(arg) = it.next() {
        let s = arg.to_string_lossy();
        if let Some((flag, takes)) = PARENT_ONLY
            .iter()
            .find(|(f, _)| s == *f || s.starts_with(&format!("{f}=")))
        {
            if *takes && s == *flag {
                it.next();
            }
            continue;
        }
        a.push(arg.clone());
    }
    a.push("--reuse-port".into());
    a.push("--stats-file".into());
    a.push(stats.into());
    a.push("--stats-interval".into());
    a.push("0".into());
    a
}

/// Sums the workers' statistics: each integer field of their JSON (the
/// counters: requests, bytes, connections, open connections, errors,
/// accept_descriptor_errors, ...) and `throughput_bytes_per_s` summed over
/// the workers that wrote statistics, `uptime_s` their largest; the rest
/// (per-device, per-policy detail) stays per worker. A restarted worker
/// counts from zero again.
pub fn sum_stats(stats: &[&Value]) -> Value {
    let mut total = Map::new();
    for s in stats {
        let Some(obj) = s.as_object() else { continue };
        for (k, v) in obj {
            if let Some(n) = v.as_u64() {
                let t = total.get(k).and_then(Value::as_u64).unwrap_or(0);
                total.insert(k.clone(), Value::from(t + n));
            } else if k == "throughput_bytes_per_s" {
                let t = total.get(k).and_then(Value::as_f64).unwrap_or(0.0);
                total.insert(k.clone(), Value::from(t + v.as_f64().unwrap_or(0.0)));
            } else if k == "uptime_s" {
                let t = total.get(k).and_then(Value::as_f64).unwrap_or(0.0);
                total.insert(k.clone(), Value::from(t.max(v.as_f64().unwrap_or(0.0))));
            }
        }
    }
    Value::Object(total)
}

struct Worker {
    index: u32,
    stats: PathBuf,
    child: Option<Child>,
    /// When it was (re)started, the last [`MAX_RESTARTS`] times.
    starts: Vec<Instant>,
    restarts: u64,
    given_up: bool,
}

impl Worker {
    fn spawn(&mut self, exe: &Path, argv: &[OsString]) -> Result<(), WorkersError> {
        let _ = std::fs::remove_file(&self.stats);
        // a process group of its own: a terminal's Ctrl-C reaches the
        // parent only, which stops the workers (no restart race)
        let child = Command::new(exe)
            .args(worker_args(argv, &self.stats))
            .stdin(Stdio::null())
            .process_group(0)
            .spawn()
            .map_err(|source| WorkersError::Spawn {
                index: self.index,
                exe: exe.to_path_buf(),
                source,
            })?;
        self.child = Some(child);
        self.starts.push(Instant::now());
        Ok(())
    }

    fn read_stats(&self) -> Option<Value> {
        serde_json::from_slice(&std::fs::read(&self.stats).ok()?).ok()
    }

    fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }
}

/// After a worker exited at `now`: forgets its starts older than
/// [`RESTART_WINDOW`] and, when [`MAX_RESTARTS`] or more are left, gives
/// it up (the count of those starts); else it may be restarted (`None`).
fn give_up(starts: &mut Vec<Instant>, now: Instant) -> Option<usize> {
    starts.retain(|t| now.duration_since(*t) < RESTART_WINDOW);
    (starts.len() >= MAX_RESTARTS).then_some(starts.len())
}

/// The merged statistics file's content.
fn merged(workers: &[Worker], listen: &str) -> Value {
    let per: Vec<(u32, Option<Value>)> =
        workers.iter().map(|w| (w.index, w.read_stats())).collect();
    let alive: Vec<&Value> = workers
        .iter()
        .zip(&per)
        .filter(|(w, _)| w.child.is_some())
        .filter_map(|(_, (_, s))| s.as_ref())
        .collect();
    let list: Vec<Value> = workers
        .iter()
        .zip(&per)
        .map(|(w, (i, s))| {
            serde_json::json!({
                "index": i,
                "pid": w.pid(),
                "alive": w.child.is_some(),
                "restarts": w.restarts,
                "given_up": w.given_up,
                "stats": s,
            })
        })
        .collect();
    serde_json::json!({
        "listen": listen,
        "workers": workers.len(),
        "alive": workers.iter().filter(|w| w.child.is_some()).count(),
        "restarts": workers.iter().map(|w| w.restarts).sum::<u64>(),
        "total": sum_stats(&alive),
        "per_worker": list,
    })
}

/// SIGTERM to every worker, then waits (SIGKILL after [`STOP_WITHIN`]).
/// True when every one stopped by itself.
fn stop_all(workers: &mut [Worker], ws: &Workers, obs: &mut impl WorkersObserver) -> bool {
    for c in workers.iter().filter_map(|w| w.child.as_ref()) {
        // SAFETY: kill(2) of a child this process started and has not reaped
        unsafe {
            libc::kill(c.id() as i32, libc::SIGTERM);
        }
    }
    let t0 = Instant::now();
    let mut clean = true;
    for w in workers.iter_mut() {
        let Some(mut c) = w.child.take() else {
            continue;
        };
        loop {
            if let Ok(Some(_)) = c.try_wait() {
                break;
            }
            if t0.elapsed() > STOP_WITHIN {
                obs.event(
                    ws,
                    &WorkersEvent::Killed {
                        index: w.index,
                        pid: c.id(),
                    },
                );
                let _ = c.kill();
                let _ = c.wait();
                clean = false;
                break;
            }
            std::thread::sleep(POLL);
        }
    }
    clean
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worker_gets_the_serve_flags_without_the_parents() {
        let argv: Vec<OsString> = [
            "serve",
            "--root",
            "/srv",
            "--workers",
            "4",
            "--listen",
            "127.0.0.1:8080",
            "--stats-interval=5",
            "--workers-dir",
            "/tmp/w",
            "--stats-file",
            "x.json",
        ]
        .iter()
        .map(OsString::from)
        .collect();
        let a = worker_args(&argv, Path::new("/tmp/w/worker-2.json"));
        let a: Vec<&str> = a.iter().map(|s| s.to_str().unwrap()).collect();
        assert_eq!(
            a,
            [
                "serve",
                "--root",
                "/srv",
                "--listen",
                "127.0.0.1:8080",
                "--reuse-port",
                "--stats-file",
                "/tmp/w/worker-2.json",
                "--stats-interval",
                "0"
            ]
        );
    }

    #[test]
    fn a_worker_is_given_up_at_five_starts_within_the_window() {
        let t0 = Instant::now();
        let s = Duration::from_secs(1);
        // four starts within a minute: restarted
        let mut starts: Vec<Instant> = (0..4).map(|i| t0 + s * i).collect();
        assert_eq!(give_up(&mut starts, t0 + s * 10), None);
        // the fifth: given up
        starts.push(t0 + s * 10);
        assert_eq!(give_up(&mut starts, t0 + s * 11), Some(5));
        // the same five, the first a minute old when it exits: restarted
        let mut starts: Vec<Instant> = (0..5).map(|i| t0 + s * i).collect();
        assert_eq!(give_up(&mut starts, t0 + RESTART_WINDOW), None);
        assert_eq!(starts.len(), 4, "the start a minute ago is forgotten");
    }

    #[test]
    fn counters_are_summed_and_the_rest_stays_per_worker() {
        let a = serde_json::json!({"requests": 3, "bytes": 100, "uptime_s": 5.0,
            "throughput_bytes_per_s": 20.0, "io": "asap", "mean_prefetch_to_eviction_ms": 7.5,
            "accept_descriptor_errors": 2});
        let b = serde_json::json!({"requests": 4, "bytes": 50, "uptime_s": 9.0,
            "throughput_bytes_per_s": 5.5, "io": "asap", "mean_prefetch_to_eviction_ms": 1.0,
            "accept_descriptor_errors": 0});
        let t = sum_stats(&[&a, &b]);
        assert_eq!(t["requests"], 7);
        assert_eq!(t["bytes"], 150);
        assert_eq!(t["accept_descriptor_errors"], 2);
        assert_eq!(t["uptime_s"], 9.0);
        assert_eq!(t["throughput_bytes_per_s"], 25.5);
        assert!(t.get("io").is_none() && t.get("mean_prefetch_to_eviction_ms").is_none());
        assert_eq!(sum_stats(&[]), serde_json::json!({}));
    }
}
