//! A live `vodlab serve --io asap --prefetch-events FILE` records every
//! input of its prefetch controller; `vodlab simulate --prefetch
//! --replay-events FILE --policy SAME` feeds them to the simulator's
//! controller (the `vodlab-prefetch` crate both run) and must decide alike,
//! decision for decision, for every policy, `auto` (ticks, timed reads,
//! device totals) included. The page cache is real: the test drops the
//! file's pages (`POSIX_FADV_DONTNEED`) between ranges, so ranges miss, the
//! server prefetches, and prefetched ranges are found evicted.

mod common;

use std::fs::File;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::io::AsRawFd;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{free_port, wait_until};

/// The server process: asked to stop (SIGTERM, by its PID) on drop, so the
/// events file ends with whole lines; killed if it has not exited within
/// 20 s (a thread waits for the exit: no polling).
struct Serve(Option<Child>);

impl Drop for Serve {
    fn drop(&mut self) {
        let Some(mut child) = self.0.take() else {
            return;
        };
        let pid = child.id() as i32;
        // SAFETY: a signal to the child this test started
        unsafe { libc::kill(pid, libc::SIGTERM) };
        let (tx, rx) = std::sync::mpsc::channel();
        let waiter = std::thread::spawn(move || {
            let _ = child.wait();
            let _ = tx.send(());
        });
        if rx.recv_timeout(Duration::from_secs(20)).is_err() {
            // SAFETY: the same child, not yet reaped (its waiter still waits)
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        let _ = waiter.join();
    }
}

/// A viewer: one keep-alive connection (the server keeps a session's
/// prefetched ranges per connection).
struct Viewer {
    s: TcpStream,
    name: &'static str,
}

impl Viewer {
    fn new(port: u16, name: &'static str) -> Self {
        let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        Viewer { s, name }
    }

    /// GET `path` with `range`; returns the body's length.
    fn get(&mut self, path: &str, range: &str) -> usize {
        write!(
            self.s,
            "GET {path} HTTP/1.1\r\nHost: t\r\nRange: bytes={range}\r\n\
             X-Vodlab-Session: {}\r\nCMCD-Object: br=2000\r\n\r\n",
            self.name
        )
        .unwrap();
        let mut head = Vec::new();
        let mut b = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            self.s.read_exact(&mut b).unwrap();
            head.push(b[0]);
        }
        let head = String::from_utf8(head).unwrap();
        assert!(head.starts_with("HTTP/1.1 206"), "{range}: {head}");
        let len: usize = head
            .lines()
            .find_map(|l| {
                l.to_ascii_lowercase()
                    .strip_prefix("content-length:")
                    .map(|v| v.trim().parse().unwrap())
            })
            .expect("content-length");
        let mut body = vec![0u8; len];
        self.s.read_exact(&mut body).unwrap();
        len
    }
}

fn drop_pages(f: &File) {
    // SAFETY: advisory call on an open descriptor
    unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
}

/// Serves `root` with `policy`, plays the viewers for at least `secs`,
/// stops; the events are in `out`.
fn record(root: &Path, files: &[File], policy: &str, secs: f64, out: &Path) {
    let port = free_port();
    let child = Command::new(env!("CARGO_BIN_EXE_vodlab"))
        .args(["serve", "--io", "asap", "--root"])
        .arg(root)
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .args(["--prefetch-policy", policy, "--stats-interval", "0"])
        .arg("--prefetch-events")
        .arg(out)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let serve = Serve(Some(child));
    wait_until("serve listening", Duration::from_secs(20), || {
        TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    files.iter().for_each(drop_pages);
    let t0 = Instant::now();
    // two viewers reading their chains in 256 KiB ranges, pages dropped
    // now and then (misses, and prefetches evicted before use); an
    // open-ended viewer; long enough for the controller to be ticked
    let (mut a, mut b, mut c) = (
        Viewer::new(port, "viewer-a"),
        Viewer::new(port, "viewer-b"),
        Viewer::new(port, "viewer-c"),
    );
    let mut k = 0u64;
    while k < 24 || t0.elapsed() < Duration::from_secs_f64(secs) {
        let off = (k % 40) * (256 << 10);
        let n = a.get("/t1/a.mp4", &format!("{off}-{}", off + (256 << 10) - 1));
        assert_eq!(n, 256 << 10);
        let off = (k % 20) * (512 << 10);
        b.get("/t2/b.mp4", &format!("{off}-{}", off + (512 << 10) - 1));
        if k % 3 == 1 {
            files.iter().for_each(drop_pages);
        }
        if k % 8 == 0 {
            let from = (k % 16) << 20;
            let n = c.get("/c.mp4", &format!("{from}-"));
            assert_eq!(n as u64, (24 << 20) - from);
        }
        k += 1;
        std::thread::sleep(Duration::from_millis(40));
    }
    drop((a, b, c));
    // one more tick after the last range, and the three sessions' ends:
    // read off the events file (whole lines only), not a guessed time
    wait_until(
        "a tick after the last range and 3 session ends",
        Duration::from_secs(20),
        || {
            let text = std::fs::read_to_string(out).unwrap_or_default();
            let whole = &text[..text.rfind('\n').map_or(0, |i| i + 1)];
            let kinds: Vec<String> = whole
                .lines()
                .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
                .map(|e| e["event"].as_str().unwrap_or_default().to_string())
                .collect();
            let last_request = kinds.iter().rposition(|k| k == "request");
            let tick_after = kinds
                .iter()
                .rposition(|k| k == "tick")
                .is_some_and(|t| last_request.is_none_or(|r| t > r));
            tick_after && kinds.iter().filter(|k| *k == "session_end").count() >= 3
        },
    );
    drop(serve);
}

fn replay(events: &Path, policy: &str) -> (bool, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_vodlab"))
        .args(["simulate", "--prefetch", "--replay-events"])
        .arg(events)
        .args(["--policy", policy])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout).to_string() + &String::from_utf8_lossy(&o.stderr);
    (o.status.success(), text)
}

#[test]
fn a_live_servers_decisions_replay_alike_for_every_policy() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let root = dir.path().join("root");
    for d in ["t1", "t2"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    let mut files = Vec::new();
    for (p, n) in [("t1/a.mp4", 12u64), ("t2/b.mp4", 12), ("c.mp4", 24)] {
        let path = root.join(p);
        std::fs::write(&path, vec![7u8; (n << 20) as usize]).unwrap();
        let f = File::open(&path).unwrap();
        f.sync_all().unwrap(); // DONTNEED drops clean pages only
        files.push(f);
    }
    for policy in [
        "fixed:1M",
        "proportional:768K",
        "sqrt:1M",
        "auto:interval=1,ramp=0,busy=0,step=256K,start=1M,min=256K,max=8M",
        "first-grow:4M",
        "first-grow-sr:4M",
    ] {
        let events = dir.path().join("events.jsonl");
        // auto: 1 s intervals measured from the first tick, each needing
        // a full second (so every other tick), a new size at the tick after
        let secs = if policy.starts_with("auto") { 6.0 } else { 2.5 };
        record(&root, &files, policy, secs, &events);
        let text = std::fs::read_to_string(&events).unwrap();
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).expect("an event per line"))
            .collect();
        let count = |kind: &str| lines.iter().filter(|e| e["event"] == kind).count();
        assert!(
            count("request") >= 48,
            "{policy}: {} requests",
            count("request")
        );
        assert!(count("read_done") > 0, "{policy}: no prefetch read");
        assert!(count("tick") >= 2, "{policy}: {} ticks", count("tick"));
        assert!(count("session_end") > 0, "{policy}: no session ended");
        assert!(
            lines
                .iter()
                .any(|e| e["event"] == "tick" && e["device_bytes"].as_u64() > Some(0)),
            "{policy}: ticks without the devices' reads"
        );
        if policy.starts_with("fixed") {
            // a prefetched range dropped before use is reported as evicted
            assert!(
                lines.iter().any(|e| e["evicted"].as_u64() > Some(0)),
                "{policy}: no eviction seen"
            );
        }
        let (ok, out) = replay(&events, policy);
        assert!(ok, "{policy}: {out}");
        assert!(out.contains("every decision alike"), "{policy}: {out}");
        if policy.starts_with("auto") {
            // the replay can fail: a different size decides otherwise
            let (ok, out) = replay(&events, "fixed:3M");
            assert!(!ok && out.contains("decisions differ"), "{out}");
            // auto really moved on this server (its ticks fed it)
            let sizes: std::collections::BTreeSet<u64> = lines
                .iter()
                .filter(|e| e["event"] == "request" && e["offset"] == e["prefetch"][0])
                .filter_map(|e| e["prefetch"][1].as_u64())
                .collect();
            assert!(sizes.len() >= 2, "auto's size never moved: {sizes:?}");
        }
    }
    // a malformed file is named with its line
    let bad = dir.path().join("bad.jsonl");
    std::fs::write(
        &bad,
        "{\"event\":\"tick\",\"t_ns\":1}\n{\"event\":\"nope\"}\n",
    )
    .unwrap();
    let (ok, out) = replay(&bad, "fixed:1M");
    assert!(!ok && out.contains("line 2"), "{out}");
}
