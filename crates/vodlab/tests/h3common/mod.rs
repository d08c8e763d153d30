//! Helpers of the HTTP/3 tests (h3, h3_link): `vodlab serve --h3` with a
//! generated certificate, `vodlab run --protocol h3`, workloads whose
//! files `vodlab fileset create` wrote (every byte verifiable), and the
//! checks of a run's rows against the files on disk.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::common::{self, free_port, require, results, udp_bound, vodlab_ok, wait_until};

/// A child process stopped by SIGTERM (by its PID) on drop.
pub struct Peer(pub Child);

impl Peer {
    /// Stops it (SIGTERM) and waits; true when it exited successfully.
    pub fn stop(&mut self) -> bool {
        // SAFETY: signalling the child we started, by its PID
        unsafe { libc::kill(self.0.id() as i32, libc::SIGTERM) };
        self.0.wait().is_ok_and(|s| s.success())
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            self.stop();
        }
    }
}

/// A workload of `preset` (unpaced) in `dir/w` with its files written by
/// `vodlab fileset create` (verifiable content) in `dir/root`.
pub fn workload(dir: &Path, preset: &str, sessions: u32, titles: u32) -> (PathBuf, PathBuf) {
    let spec =
        vodlab_ok(&["gen", "--show-preset", preset]).replace("pacing_s = 10.0", "pacing_s = 0.0");
    std::fs::write(dir.join("spec.toml"), spec).unwrap();
    let w = dir.join("w");
    let root = dir.join("root");
    let (s, t) = (sessions.to_string(), titles.to_string());
    let p = |p: &Path| p.to_str().unwrap().to_string();
    vodlab_ok(&[
        "gen",
        "--spec",
        &p(&dir.join("spec.toml")),
        "--sessions",
        &s,
        "--titles",
        &t,
        "--shards",
        "1",
        "--seed",
        "5",
        "-o",
        &p(&w),
    ]);
    vodlab_ok(&["fileset", "create", &p(&w), "--root", &p(&root)]);
    (w, root)
}

/// `vodlab serve --h3` with a generated certificate (written to
/// `dir/ca.pem`) on a free port (TCP and UDP), with `extra` flags; waits
/// for both listeners.
pub fn serve_h3(dir: &Path, root: &Path, extra: &[&str]) -> (Peer, u16, PathBuf) {
    let port = free_port();
    let ca = dir.join("ca.pem");
    let child = Command::new(env!("CARGO_BIN_EXE_vodlab"))
        .args(["serve", "--root", root.to_str().unwrap()])
        .args([
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--stats-interval",
            "0",
        ])
        .args([
            "--tls-self-signed",
            "--tls-cert-out",
            ca.to_str().unwrap(),
            "--h3",
        ])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start vodlab serve");
    let mut peer = Peer(child);
    wait_until(
        "vodlab serve --h3 on TCP and UDP",
        Duration::from_secs(10),
        || {
            if let Ok(Some(st)) = peer.0.try_wait() {
                panic!("vodlab serve exited at start: {st}");
            }
            common::listening(port) && udp_bound(port)
        },
    );
    (peer, port, ca)
}

/// The server's statistics page (over HTTPS, with curl).
pub fn stats(port: u16, ca: &Path) -> serde_json::Value {
    let curl = require("curl", "curl");
    let o = Command::new(curl)
        .args(["-s", "--cacert", ca.to_str().unwrap()])
        .arg(format!("https://localhost:{port}/vodlab/stats"))
        .output()
        .unwrap();
    assert!(o.status.success(), "curl stats: {o:?}");
    serde_json::from_slice(&o.stdout).expect("stats JSON")
}

/// `vodlab run --protocol h3` of `w` against `port`, every byte checked,
/// without the classes' links.
pub fn run_h3(w: &Path, out: &Path, port: u16, ca: &Path) -> serde_json::Value {
    run_h3_with(w, out, port, ca, &["--no-shaping"])
}

/// [`run_h3`] with `extra` flags instead of `--no-shaping`.
pub fn run_h3_with(
    w: &Path,
    out: &Path,
    port: u16,
    ca: &Path,
    extra: &[&str],
) -> serde_json::Value {
    let target = format!("https://localhost:{port}");
    let mut args = vec![
        "run",
        w.to_str().unwrap(),
        "--target",
        &target,
        "--protocol",
        "h3",
        "--ca",
        ca.to_str().unwrap(),
        "--rate",
        "1000",
        "--arrivals",
        "constant",
        "--no-pacing",
        "--check-bytes",
        "1",
        "--requests-csv",
        "--quiet",
        "-o",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    vodlab_ok(&args);
    let r = results(out);
    assert_eq!(r["protocol"], "h3", "{r}");
    assert_eq!(r["failed_sessions"], 0, "{r}");
    for (kind, n) in r["errors"].as_object().unwrap() {
        assert_eq!(n, 0, "errors.{kind}: {r}");
    }
    r
}

/// requests.csv: `(session, request) -> (path, range, status, bytes)`.
pub type Rows = BTreeMap<(u64, u64), (String, String, u16, u64)>;

pub fn rows(out: &Path) -> Rows {
    let text = std::fs::read_to_string(out.join("requests.csv")).expect("requests.csv");
    text.lines()
        .skip(1)
        .map(|line| {
            let f: Vec<&str> = line.split(',').collect();
            assert_eq!(f[15], "", "request failed: {line}");
            (
                (f[0].parse().unwrap(), f[3].parse().unwrap()),
                (
                    f[4].into(),
                    f[5].into(),
                    f[12].parse().unwrap(),
                    f[11].parse().unwrap(),
                ),
            )
        })
        .collect()
}

/// The bytes a request for `range` (`A-B`, or empty: the whole file) of a
/// file of `size` bytes must get.
pub fn expected_bytes(range: &str, size: u64) -> u64 {
    match range.split_once('-') {
        None => size,
        Some((a, b)) => {
            let a: u64 = a.parse().unwrap();
            let b: u64 = b.parse::<u64>().unwrap().min(size - 1);
            b - a + 1
        }
    }
}

/// Every row got its range's bytes (206) or the whole file (200), as the
/// files on disk say; the sum is `completed_bytes`.
pub fn check_against_files(rows: &Rows, root: &Path, r: &serde_json::Value) {
    assert!(!rows.is_empty());
    let mut total = 0;
    for ((s, i), (path, range, status, bytes)) in rows {
        let size = std::fs::metadata(root.join(path.trim_start_matches('/')))
            .unwrap()
            .len();
        let want = expected_bytes(range, size);
        assert_eq!(*bytes, want, "session {s} request {i}: {path} {range}");
        assert_eq!(
            *status,
            if range.is_empty() { 200 } else { 206 },
            "{path} {range}"
        );
        total += want;
    }
    assert_eq!(r["completed_bytes"], total);
    assert_eq!(r["completed_requests"], rows.len());
}
