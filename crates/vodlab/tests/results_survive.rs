//! Results that survive (docs/results.md): a full disk leaves the previous
//! results.json byte for byte and this run's last checkpoint readable, and
//! says so with exit status 4; a SIGKILL at a random moment leaves a
//! checkpoint `vodlab merge` reads; a server stopped and started again on
//! its port mid-run gives refused and reset sessions, counted as the server
//! saw them, and the sessions after the restart succeed.
//!
//! The tests take one lock: each is timed against a live client, and two at
//! once on a small machine would blur the timings the third one relies on.

mod common;

use std::collections::HashMap;
use std::ffi::CString;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use common::restartable::Restartable;
use rand::{Rng, SeedableRng};
use vodlab_client::groundtruth::{GroundTruthServer, Site};

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn one_at_a_time() -> MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

/// `n` sessions of one request each, `/fI.bin` bytes 0-9999.
fn script_workload(dir: &Path, n: usize) -> PathBuf {
    let p = dir.join("s.vsl");
    let mut s = String::new();
    for i in 0..n {
        s.push_str(&format!("/f{i}.bin range=0-9999 timeout=5\n\n"));
    }
    std::fs::write(&p, s).unwrap();
    p
}

fn ground_truth(rt: &tokio::runtime::Runtime, n: usize) -> GroundTruthServer {
    rt.block_on(GroundTruthServer::start(Site {
        files: (0..n).map(|i| (format!("/f{i}.bin"), 10_000)).collect(),
        ..Site::default()
    }))
    .unwrap()
}

/// `vodlab run` of `w` against `target`: evenly spaced arrivals at `rate`,
/// no ramps, no shaping, no byte checks, quiet.
fn run_cmd(w: &Path, target: &str, rate: &str, out: &Path, extra: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_vodlab"));
    c.args(["run", w.to_str().unwrap(), "--target", target])
        .args([
            "--rate",
            rate,
            "--arrivals",
            "constant",
            "--ramp-up",
            "0",
            "--ramp-down",
            "0",
            "--quiet",
            "--check-bytes",
            "0",
            "--no-shaping",
        ])
        .arg("-o")
        .arg(out)
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

/// Waits for `child` at most `limit`; kills it (by its PID) and panics
/// past that.
fn wait_output(mut child: Child, limit: Duration) -> Output {
    let t0 = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if t0.elapsed() > limit {
            let _ = child.kill();
            let o = child.wait_with_output().unwrap();
            panic!(
                "vodlab run did not end within {limit:?}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    child.wait_with_output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn u(v: &serde_json::Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

/// The checkpoint in `dir` when it parses (a reader racing the writer
/// never sees a part of one: it is replaced atomically).
fn checkpoint(dir: &Path) -> Option<serde_json::Value> {
    let b = std::fs::read(dir.join(vodlab_client::CHECKPOINT_FILE)).ok()?;
    Some(serde_json::from_slice(&b).expect("checkpoint.json is whole JSON whenever it is there"))
}

/// Requests the ground-truth server answered whole, from `from` on.
fn served_whole(s: &GroundTruthServer, from: usize) -> u64 {
    s.served()
        .iter()
        .skip(from)
        .filter(|x| x.status == 206 && x.body_bytes == 10_000)
        .count() as u64
}

/// `vodlab merge` of a directory holding only `ckpt` (a copy): what a
/// killed run left, read back by vodlab; returns the merged results.json.
fn merge_checkpoint(ckpt: &Path, work: &Path) -> serde_json::Value {
    let shard = work.join("dead");
    std::fs::create_dir_all(&shard).unwrap();
    std::fs::copy(ckpt, shard.join(vodlab_client::CHECKPOINT_FILE)).unwrap();
    let merged = work.join("merged");
    let o = common::vodlab(&[
        "merge",
        shard.to_str().unwrap(),
        "-o",
        merged.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "merge: {}", text(&o.stderr));
    let m = common::results(&merged);
    assert_eq!(m["complete"], false);
    let reasons = m["merge"]["incomplete_reasons"].to_string();
    assert!(reasons.contains("died; its checkpoint"), "{reasons}");
    m
}

/// A tmpfs mounted for the test, unmounted when dropped (also when the
/// test fails: lazily if something still holds it).
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(dir: &Path, options: &str) -> Self {
        std::fs::create_dir_all(dir).unwrap();
        let c = |s: &[u8]| CString::new(s).unwrap();
        let (src, target, fstype, data) = (
            c(b"tmpfs"),
            c(dir.as_os_str().as_bytes()),
            c(b"tmpfs"),
            c(options.as_bytes()),
        );
        // SAFETY: valid C strings; mounts a tmpfs on a directory this test made
        let rc = unsafe {
            libc::mount(
                src.as_ptr(),
                target.as_ptr(),
                fstype.as_ptr(),
                0,
                data.as_ptr().cast(),
            )
        };
        assert_eq!(
            rc,
            0,
            "mount -t tmpfs -o {options} {}: {}",
            dir.display(),
            std::io::Error::last_os_error()
        );
        Self(dir.to_path_buf())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let p = CString::new(self.0.as_os_str().as_bytes()).unwrap();
        // SAFETY: unmounting the tmpfs this guard mounted
        unsafe {
            if libc::umount2(p.as_ptr(), 0) != 0 {
                libc::umount2(p.as_ptr(), libc::MNT_DETACH);
            }
        }
    }
}

/// Fills the file system of `file` and keeps it full (what a write frees
/// is taken again within milliseconds) until dropped.
struct Filler {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<u64>>,
}

impl Filler {
    fn fill(file: &Path) -> Self {
        let mut f = std::fs::File::create(file).unwrap();
        let (stop, done) = (Arc::new(AtomicBool::new(false)), std::sync::mpsc::channel());
        let halt = stop.clone();
        let thread = std::thread::spawn(move || {
            let chunk = [0xA5u8; 4096];
            let (mut bytes, mut full) = (0u64, false);
            while !halt.load(Ordering::Relaxed) {
                match f.write(&chunk) {
                    Ok(n) => bytes += n as u64,
                    Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => {
                        if !full {
                            full = true;
                            let _ = done.0.send(());
                        }
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    Err(e) => panic!("filling: {e}"),
                }
            }
            bytes
        });
        done.1
            .recv_timeout(Duration::from_secs(10))
            .expect("the file system filled up");
        Self {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Filler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A full disk at the end of a run: the results cannot be written. The run
/// names the file and "no space left on device", exits 4, prints its
/// summary anyway; the previous run's results.json, summary.txt and
/// metrics.json stay byte for byte, no temporary file is left, and this
/// run's last checkpoint (written before the disk filled) is whole and
/// read back by `vodlab merge`. Without root (no tmpfs), a directory the
/// run may not write stands for the full disk.
#[test]
fn a_full_disk_keeps_the_previous_results_and_the_last_checkpoint() {
    let _one = one_at_a_time();
    let t = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = ground_truth(&rt, 60);
    let url = format!("http://{}", server.addr);
    let w = script_workload(t.path(), 60);
    let root = unsafe { libc::geteuid() } == 0;
    let mnt = t.path().join("mnt");
    // 4 MiB: the first run's files take a few dozen KiB
    let _tmpfs = root.then(|| Tmpfs::mount(&mnt, "size=4m,mode=0755"));
    let out = mnt.join("out");

    // a previous run's results in the directory
    let o = wait_output(
        run_cmd(&w, &url, "50", &out, &["--sessions", "6"])
            .spawn()
            .unwrap(),
        Duration::from_secs(30),
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let files = ["results.json", "summary.txt", "metrics.json"];
    let before: HashMap<&str, Vec<u8>> = files
        .iter()
        .map(|f| (*f, std::fs::read(out.join(f)).unwrap()))
        .collect();
    let served_before = server.served().len();

    // 60 sessions at 20/s (3 s), a checkpoint every 0.1 s
    let child = run_cmd(&w, &url, "20", &out, &["--checkpoint", "0.1"])
        .spawn()
        .unwrap();
    let filler = if root {
        // the disk fills once this run has checkpointed 3 completed
        // requests, with 2.5 s of the run still to come
        common::wait_until(
            "a checkpoint with 3 completed requests",
            Duration::from_secs(20),
            || {
                checkpoint(&out)
                    .is_some_and(|c| common::interval_sum(&c["results"], "completed_requests") >= 3)
            },
        );
        Some(Filler::fill(&mnt.join("filler")))
    } else {
        common::wait_until("a checkpoint", Duration::from_secs(20), || {
            checkpoint(&out).is_some()
        });
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o555)).unwrap();
        None
    };
    let o = wait_output(child, Duration::from_secs(30));
    drop(filler);
    let (stderr, stdout) = (text(&o.stderr), text(&o.stdout));
    println!("the run's stderr:\n{stderr}");
    assert_eq!(o.status.code(), Some(4), "exit 4: not written\n{stderr}");
    let results = out.join("results.json");
    assert!(
        stderr.contains(&format!("writing {}", results.display())),
        "names the file: {stderr}"
    );
    let why = if root {
        "no space left on device"
    } else {
        "permission denied"
    };
    assert!(stderr.to_lowercase().contains(why), "{stderr}");
    assert!(
        stderr.contains("results.json is unchanged"),
        "says the old file stays: {stderr}"
    );
    let ckpt = out.join(vodlab_client::CHECKPOINT_FILE);
    assert!(
        stderr.contains(&format!("this run's last checkpoint is {}", ckpt.display())),
        "{stderr}"
    );
    if root {
        assert!(
            stderr.contains("could not write a checkpoint")
                && stderr.contains(&format!("writing {}", ckpt.display())),
            "the failed checkpoints were reported during the run: {stderr}"
        );
    }
    assert!(
        stdout.contains(&format!("run against {url}")),
        "the summary is printed though not written: {stdout}"
    );

    // the previous results, byte for byte; no temporary file left
    for f in files {
        assert!(
            std::fs::read(out.join(f)).unwrap() == before[f],
            "{f} changed"
        );
    }
    let mut names: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "checkpoint.json",
            "metrics.json",
            "results.json",
            "summary.txt"
        ]
    );

    // this run's last checkpoint, whole, read by vodlab; its figures are
    // no more than the server did in this run
    let c = vodlab_client::Checkpoint::read(&ckpt).expect("the checkpoint reads");
    assert_eq!(c.results.stopped_by, vodlab_client::StopReason::Checkpoint);
    let cv = checkpoint(&out).unwrap();
    let done = common::interval_sum(&cv["results"], "completed_requests");
    let truth = served_whole(&server, served_before);
    assert!(
        (3..=truth).contains(&done),
        "checkpoint: {done} completed, the server answered {truth} whole"
    );
    assert_eq!(u(&cv["results"]["completed_requests"]), done);
    let m = merge_checkpoint(&ckpt, t.path());
    assert_eq!(common::interval_sum(&m, "completed_requests"), done);
    if !root {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
}

/// SIGKILL at a seeded random moment after a run has written at least 5
/// checkpoints (every 0.1 s), 4 times: each time the checkpoint there is
/// whole JSON that `vodlab merge` reads, exactly (its completed requests are
/// the merged run's), and no more than the server answered.
/// `VODLAB_TEST_SEED=N` repeats a sequence.
#[test]
fn a_sigkill_at_a_random_moment_leaves_a_readable_checkpoint() {
    let _one = one_at_a_time();
    let seed: u64 = std::env::var("VODLAB_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    println!("seed {seed} (VODLAB_TEST_SEED={seed} repeats these kill times)");
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let t = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = ground_truth(&rt, 400);
    let url = format!("http://{}", server.addr);
    let w = script_workload(t.path(), 400);
    let mut partial_temps = 0;
    for round in 0..4 {
        let out = t.path().join(format!("kill{round}"));
        let served_before = server.served().len();
        // 400 sessions at 40/s: 10 s, never reached
        let child = run_cmd(&w, &url, "40", &out, &["--checkpoint", "0.1"])
            .spawn()
            .unwrap();
        common::wait_until(
            "a checkpoint at 0.5 s or later (5 written)",
            Duration::from_secs(20),
            || checkpoint(&out).is_some_and(|c| c["results"]["duration_s"].as_f64() >= Some(0.5)),
        );
        let delay = Duration::from_millis(rng.random_range(0..1000));
        std::thread::sleep(delay);
        // SAFETY: signalling the child this test started, by its PID
        unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
        let o = wait_output(child, Duration::from_secs(10));
        assert_eq!(o.status.code(), None, "killed by the signal");
        println!("round {round}: killed {delay:?} after the 5th checkpoint");
        assert!(!out.join("results.json").exists());
        partial_temps += usize::from(out.join(".checkpoint.json.tmp").exists());

        let ckpt = out.join(vodlab_client::CHECKPOINT_FILE);
        let c = vodlab_client::Checkpoint::read(&ckpt)
            .unwrap_or_else(|e| panic!("round {round} (seed {seed}): {e}"));
        assert_eq!(c.format, "vodlab-checkpoint");
        assert!(c.results.duration_s >= 0.5, "{}", c.results.duration_s);
        let cv = checkpoint(&out).unwrap();
        let done = common::interval_sum(&cv["results"], "completed_requests");
        let truth = served_whole(&server, served_before);
        assert!(
            done <= truth,
            "round {round}: the checkpoint has {done} completed, the server answered {truth}"
        );
        assert!(u(&cv["results"]["started_sessions"]) >= done);
        let m = merge_checkpoint(&ckpt, &t.path().join(format!("m{round}")));
        assert_eq!(common::interval_sum(&m, "completed_requests"), done);
        assert_eq!(
            u(&m["started_sessions"]),
            u(&cv["results"]["started_sessions"])
        );
    }
    println!("a kill left a partial temporary checkpoint in {partial_temps} of 4 rounds");
}

/// The server stops for 0.5 s mid-run and listens again on its port: the
/// sessions that arrived while it was down are counted `refused`, those it
/// cut off `reset`, exactly as the server saw them; the run completes and
/// every session after the restart succeeds.
///
/// 40 sessions at 10/s, evenly spaced, one request each whose answer takes
/// 0.2 s (10 writes 20 ms apart). The stop comes 50 ms after an arrival
/// (session 12's, or a later one's on a busy machine), between two
/// arrivals; the restart 0.5 s later, again between two: 5 arrivals meet no
/// listener and about 2 answers are in flight at the stop.
#[test]
fn a_server_restart_mid_run_is_classified_and_the_run_goes_on() {
    let _one = one_at_a_time();
    let t = tempfile::tempdir().unwrap();
    let n = 40;
    let w = script_workload(t.path(), n);
    let mut srv = Restartable::start(10_000, 10, Duration::from_millis(20));
    let target = format!("http://127.0.0.1:{}", srv.port);
    let out = t.path().join("out");
    let child = run_cmd(&w, &target, "10", &out, &[]).spawn().unwrap();
    common::wait_until("session 12's request", Duration::from_secs(20), || {
        srv.log().arrived.contains_key("/f12.bin")
    });
    let ms = Duration::from_millis;
    let newest = |srv: &Restartable| srv.log().arrived.values().max().copied().unwrap();
    // stop 50 ms after an arrival with none since (mid-way to the next): on
    // a busy machine whose sleep overshoots, 50 ms after a later one
    let (at, down) = loop {
        let a = newest(&srv);
        std::thread::sleep((a + ms(50)).saturating_duration_since(Instant::now()));
        let now = Instant::now();
        if newest(&srv) == a && now - a < ms(75) {
            srv.stop();
            break (a, now);
        }
    };
    let stop_took = down.elapsed();
    // listen again mid-way between two arrivals of the schedule (every
    // 100 ms from `at`), 0.5 s later or at the next such point
    let mut up_at = at + ms(550);
    let up = loop {
        std::thread::sleep(up_at.saturating_duration_since(Instant::now()));
        let now = Instant::now();
        if now - up_at < ms(25) {
            srv.start_again();
            break now;
        }
        up_at += ms(100);
    };
    // the arrivals of the schedule while nothing listened
    let expected_refused = ((up_at - at).as_millis() / 100) as u64;
    let o = wait_output(child, Duration::from_secs(30));
    let log = srv.log();
    println!(
        "stopped {:?} after an arrival (took {stop_took:?}), down {:?}; server: {} arrived, {} completed, {} reset mid-answer, {} reset before a request",
        down - at,
        up - down,
        log.arrived.len(),
        log.completed.len(),
        log.reset.len(),
        log.reset_before_request
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let r = common::results(&out);
    assert_eq!(r["complete"], true, "{r}");
    assert_eq!(r["stopped_by"], "finished");
    assert_eq!(u(&r["started_sessions"]), n as u64);

    // exactly what the server saw
    let refused = n as u64 - log.arrived.len() as u64 - log.reset_before_request;
    let reset = log.reset.len() as u64 + log.reset_before_request;
    let e = &r["errors"];
    assert_eq!(u(&e["refused"]), refused, "refused: {e}");
    assert_eq!(u(&e["reset"]), reset, "reset: {e}");
    let others: u64 = e
        .as_object()
        .unwrap()
        .iter()
        .filter(|(k, _)| *k != "refused" && *k != "reset")
        .map(|(_, v)| u(v))
        .sum();
    assert_eq!(others, 0, "no other error: {e}");
    assert_eq!(u(&r["failed_sessions"]), refused + reset);
    assert_eq!(
        u(&r["completed_requests"]),
        log.completed.len() as u64,
        "completed requests are the answers the server wrote whole"
    );
    assert_eq!(log.completed.len() as u64 + refused + reset, n as u64);
    // and what the test did: down from 50 ms after an arrival to 50 ms
    // after the last arrival it missed (one either way for the client's
    // own lateness); answers of 0.2 s or more every 100 ms: some in flight
    assert!(
        refused.abs_diff(expected_refused) <= 1,
        "refused {refused}, {expected_refused} arrivals while down"
    );
    assert!(reset >= 1, "an answer in flight was cut: {reset}");
    // every session that arrived after the restart succeeded, and some did
    let after: Vec<&String> = log
        .arrived
        .iter()
        .filter(|(_, t)| **t > up)
        .map(|(p, _)| p)
        .collect();
    assert!(
        after.len() >= 20,
        "{} sessions after the restart",
        after.len()
    );
    for p in after {
        assert!(log.completed.contains(p), "{p} after the restart failed");
    }
    // the summary names both kinds
    let summary = std::fs::read_to_string(out.join("summary.txt")).unwrap();
    assert!(
        summary.contains("connection refused") && summary.contains("connection reset"),
        "{summary}"
    );
}
