//! `vodlab serve --workers N`: N server processes of this binary sharing
//! the listen address with SO_REUSEPORT (the kernel spreads new
//! connections over their sockets), each with its own runtime and its own
//! descriptor limit. The parent starts them, restarts one that dies
//! (saying so; at most [`MAX_RESTARTS`] in [`RESTART_WINDOW`], then it
//! gives that worker up), forwards SIGINT/SIGTERM, and merges their
//! statistics: each worker writes its `/vodlab/stats` JSON to
//! `worker-I.json` every second (`--stats-file`); the parent sums them
//! into `workers.json` (or `--stats-file`) and prints the statistics line.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use serde_json::{Map, Value};

use super::ServeArgs;

/// Most workers.
pub const MAX_WORKERS: u32 = 256;
/// Restarts of one worker allowed within [`RESTART_WINDOW`].
pub const MAX_RESTARTS: usize = 5;
/// The window of [`MAX_RESTARTS`].
pub const RESTART_WINDOW: Duration = Duration::from_secs(60);
/// How long the workers get to start listening.
const READY_WITHIN: Duration = Duration::from_secs(30);
/// From the SIGTERM the parent forwards to a SIGKILL.
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

/// A worker's arguments: the parent's `serve` arguments without
/// [`PARENT_ONLY`], then `--reuse-port`, its own statistics file and no
/// statistics lines of its own.
pub(crate) fn worker_args(argv: &[OsString], stats: &Path) -> Vec<OsString> {
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
pub(crate) fn sum_stats(stats: &[&Value]) -> Value {
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
    fn spawn(&mut self, exe: &Path, argv: &[OsString]) -> anyhow::Result<()> {
        let _ = std::fs::remove_file(&self.stats);
        // a process group of its own: a terminal's Ctrl-C reaches the
        // parent only, which stops the workers (no restart race)
        let child = Command::new(exe)
            .args(worker_args(argv, &self.stats))
            .stdin(Stdio::null())
            .process_group(0)
            .spawn()
            .with_context(|| format!("starting worker {} ({})", self.index, exe.display()))?;
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

fn signal(c: &Child, sig: i32) {
    // SAFETY: kill(2) of a child this process started and has not reaped
    unsafe {
        libc::kill(c.id() as i32, sig);
    }
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

/// `vodlab serve --workers N`.
pub fn run(a: &ServeArgs, n: u32) -> anyhow::Result<ExitCode> {
    if !(1..=MAX_WORKERS).contains(&n) {
        anyhow::bail!("--workers must be from 1 to {MAX_WORKERS}, got {n}");
    }
    if a.listen.port() == 0 {
        anyhow::bail!(
            "--workers needs a fixed --listen port: with port 0 each worker would listen on a port of its own"
        );
    }
    for (set, flag) in [
        (a.access_log.is_some(), "--access-log"),
        (a.prefetch_log.is_some(), "--prefetch-log"),
        (a.prefetch_events.is_some(), "--prefetch-events"),
    ] {
        if set {
            anyhow::bail!("{flag} with --workers: the workers would write one file over each other; run them as separate `vodlab serve --reuse-port` processes with a file each");
        }
    }
    if a.proto.h3.is_some() {
        anyhow::bail!(
            "--h3 with --workers: the workers' QUIC sockets would not share the UDP port (QUIC needs each connection's packets at one process); run one `vodlab serve --h3` beside them"
        );
    }
    // every flag checked once, before any worker starts
    a.config()?;
    let dir = match &a.workers_dir {
        Some(d) => d.clone(),
        None => std::env::temp_dir().join(format!("vodlab-serve-{}", std::process::id())),
    };
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let out = a
        .stats_file
        .clone()
        .unwrap_or_else(|| dir.join("workers.json"));
    let exe = std::env::current_exe().context("finding this vodlab executable")?;
    let argv: Vec<OsString> = std::env::args_os().skip(1).collect();
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [libc::SIGINT, libc::SIGTERM] {
        signal_hook_flag(sig, stop.clone())?;
    }
    let mut workers: Vec<Worker> = (0..n)
        .map(|index| Worker {
            index,
            stats: dir.join(format!("worker-{index}.json")),
            child: None,
            starts: Vec::new(),
            restarts: 0,
            given_up: false,
        })
        .collect();
    for w in &mut workers {
        if let Err(e) = w.spawn(&exe, &argv) {
            stop_all(&mut workers);
            return Err(e);
        }
    }
    // ready when every worker has written its first statistics (it writes
    // them once it listens)
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
            stop_all(&mut workers);
            anyhow::bail!("worker {i} exited before it was listening (its error is above)");
        }
        if t0.elapsed() > READY_WITHIN || stop.load(Ordering::Relaxed) {
            stop_all(&mut workers);
            anyhow::bail!(
                "the workers were not all listening within {} s",
                READY_WITHIN.as_secs()
            );
        }
        std::thread::sleep(POLL);
    }
    let pids: Vec<String> = workers
        .iter()
        .filter_map(|w| w.pid().map(|p| p.to_string()))
        .collect();
    let listen = a.listen.to_string();
    eprintln!(
        "vodlab serve: {n} workers on http://{listen} (SO_REUSEPORT; PIDs {}); merged statistics in {}",
        pids.join(", "),
        out.display()
    );
    let every = Duration::from_secs_f64(a.stats_interval.max(0.0));
    let (mut last_line, mut last_write) = (Instant::now(), Instant::now());
    let mut last_bytes = 0u64;
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(POLL);
        for w in workers.iter_mut() {
            let Some(c) = w.child.as_mut() else { continue };
            let Ok(Some(st)) = c.try_wait() else { continue };
            let pid = c.id();
            w.child = None;
            if stop.load(Ordering::Relaxed) {
                break;
            }
            let now = Instant::now();
            w.starts.retain(|t| now.duration_since(*t) < RESTART_WINDOW);
            if w.starts.len() >= MAX_RESTARTS {
                w.given_up = true;
                eprintln!(
                    "vodlab serve: worker {} (PID {pid}) exited ({st}), its {} start in {} s; not restarting it",
                    w.index,
                    w.starts.len(),
                    RESTART_WINDOW.as_secs()
                );
                continue;
            }
            eprintln!(
                "vodlab serve: worker {} (PID {pid}) exited ({st}); restarting it",
                w.index
            );
            w.restarts += 1;
            if let Err(e) = w.spawn(&exe, &argv) {
                w.given_up = true;
                eprintln!("vodlab serve: {e:#}");
            }
        }
        if workers.iter().all(|w| w.child.is_none()) {
            let _ = crate::serve::write_json(&out, &merged(&workers, &listen));
            anyhow::bail!("every worker has exited and none could be restarted");
        }
        if last_write.elapsed() >= Duration::from_secs(1) {
            last_write = Instant::now();
            let m = merged(&workers, &listen);
            if let Err(e) = crate::serve::write_json(&out, &m) {
                eprintln!("vodlab serve: writing {}: {e}", out.display());
            }
            if !every.is_zero() && last_line.elapsed() >= every {
                let t = &m["total"];
                let num = |k: &str| t[k].as_u64().unwrap_or(0);
                let dt = last_line.elapsed().as_secs_f64();
                last_line = Instant::now();
                eprintln!(
                    "vodlab serve: {} of {n} workers: {} req, {:.1} MB/s, {} open, {} accept descriptor errors",
                    m["alive"],
                    num("requests"),
                    num("bytes").saturating_sub(last_bytes) as f64 / dt / 1048576.0,
                    num("open_connections"),
                    num("accept_descriptor_errors"),
                );
                last_bytes = num("bytes");
            }
        }
    }
    eprintln!("vodlab serve: stopping {n} workers (SIGTERM); they finish responses in flight");
    let m = merged(&workers, &listen);
    let _ = crate::serve::write_json(&out, &m);
    let clean = stop_all(&mut workers);
    eprintln!("vodlab serve: stopped");
    Ok(if clean {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// SIGTERM to every worker, then waits (SIGKILL after [`STOP_WITHIN`]).
/// True when every one stopped by itself.
fn stop_all(workers: &mut [Worker]) -> bool {
    for c in workers.iter().filter_map(|w| w.child.as_ref()) {
        signal(c, libc::SIGTERM);
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
                eprintln!(
                    "vodlab serve: worker {} (PID {}) did not stop within {} s of SIGTERM; killed",
                    w.index,
                    c.id(),
                    STOP_WITHIN.as_secs()
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

/// Sets `flag` when `sig` arrives (a thread waiting on a tokio signal
/// stream: no work in the handler itself).
fn signal_hook_flag(sig: i32, flag: Arc<AtomicBool>) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let mut s = {
        let _in = rt.enter();
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::from_raw(sig))
            .with_context(|| format!("installing the handler of signal {sig}"))?
    };
    std::thread::spawn(move || {
        rt.block_on(async move {
            while s.recv().await.is_some() {
                flag.store(true, Ordering::Relaxed);
            }
        })
    });
    Ok(())
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
