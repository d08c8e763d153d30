//! Real peers read what vodlab writes: scripts exported to httperf's wsesslog
//! and to h2load timing scripts replay against nginx on loopback, and every
//! path a generated session asks for is a file of the generated catalog.
//!
//! Needs nginx, httperf and h2load (Debian: nginx-light, httperf,
//! nghttp2-client); `.ci/run` installs them.

mod common;

use std::fs;
use std::path::Path;
use std::process::Command;

use common::{require, vodlab_ok, Nginx};
use vodlab_workload::output::read_workload_scripts;

/// A small unpaced workload plus sparse files for its catalog.
fn workload(dir: &Path, preset: &str, sessions: u32) -> (std::path::PathBuf, std::path::PathBuf) {
    common::unpaced_workload(dir, preset, sessions, 300, 1, 4)
}

fn field(text: &str, after: &str) -> u64 {
    let i = text
        .find(after)
        .unwrap_or_else(|| panic!("`{after}` not in:\n{text}"))
        + after.len();
    text[i..]
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no number after `{after}` in:\n{text}"))
}

#[test]
fn httperf_replays_an_exported_workload_against_nginx() {
    let httperf = require("httperf", "httperf");
    let t = tempfile::tempdir().unwrap();
    let (w, root) = workload(t.path(), "youtube-2011", 20);
    let scripts = read_workload_scripts(&w).unwrap();
    let expected: usize = scripts.iter().map(|(_, s)| s.request_count()).sum();
    let out_dir = t.path().join("httperf");
    vodlab_ok(&[
        "script",
        "export",
        w.to_str().unwrap(),
        "--to",
        "httperf",
        "-o",
        out_dir.to_str().unwrap(),
    ]);
    let log = out_dir.join("shard-00.wsesslog");
    let nginx = Nginx::start(&root);
    let out = Command::new(httperf)
        .args(["--server", "127.0.0.1", "--port", &nginx.port.to_string()])
        .arg(format!("--wsesslog=20,0,{}", log.display()))
        .args(["--rate", "20", "--timeout", "10"])
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    assert_eq!(field(&text, "Total: connections "), 20, "{text}");
    assert_eq!(field(&text, " requests ") as usize, expected, "{text}");
    assert_eq!(field(&text, " replies ") as usize, expected, "{text}");
    assert_eq!(
        field(&text, " 2xx=") as usize,
        expected,
        "every path is in the catalog:\n{text}"
    );
    assert_eq!(field(&text, "Errors: total "), 0, "{text}");
}

#[test]
fn h2load_replays_an_exported_session_against_nginx() {
    let h2load = require("h2load", "nghttp2-client");
    let t = tempfile::tempdir().unwrap();
    let (w, root) = workload(t.path(), "youtube-2011-2mb", 5);
    let scripts = read_workload_scripts(&w).unwrap();
    let session = &scripts[0].1.sessions[2];
    let id = session.header.id.unwrap();
    let timing = t.path().join("timing.txt");
    vodlab_ok(&[
        "script",
        "export",
        w.to_str().unwrap(),
        "--to",
        "h2load",
        "--session",
        &id.to_string(),
        "-o",
        timing.to_str().unwrap(),
    ]);
    assert_eq!(
        fs::read_to_string(&timing).unwrap().lines().count(),
        session.requests.len()
    );
    let nginx = Nginx::start(&root);
    let out = Command::new(h2load)
        .args(["--h1", "-c", "1"])
        .arg(format!("--timing-script-file={}", timing.display()))
        .arg(format!("--base-uri=http://127.0.0.1:{}", nginx.port))
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    let n = session.requests.len() as u64;
    let numbers = |prefix: &str| -> Vec<u64> {
        let line = text
            .lines()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no `{prefix}` in:\n{text}"));
        line.split(|c: char| !c.is_ascii_digit())
            .filter_map(|x| x.parse().ok())
            .collect()
    };
    // requests: N total, N started, N done, N succeeded, 0 failed, 0 errored, 0 timeout
    assert_eq!(numbers("requests:")[..7], [n, n, n, n, 0, 0, 0], "{text}");
    // status codes: N 2xx, 0 3xx, 0 4xx, 0 5xx
    assert_eq!(
        numbers("status codes:"),
        vec![n, 2, 0, 3, 0, 4, 0, 5],
        "{text}"
    );
}

/// `uri bytes` of every logged request, sorted.
fn logged(path: &Path) -> Vec<(String, u64)> {
    let text = fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut v: Vec<(String, u64)> = text
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            assert_eq!(f[1], "200", "{l}");
            (f[0].to_string(), f[2].parse().unwrap())
        })
        .collect();
    v.sort();
    v
}

#[test]
fn httperf_and_vodlab_run_issue_the_same_requests() {
    let httperf = require("httperf", "httperf");
    let t = tempfile::tempdir().unwrap();
    let (w, root) = workload(t.path(), "youtube-2011", 24);
    let expected: usize = read_workload_scripts(&w)
        .unwrap()
        .iter()
        .map(|(_, s)| s.request_count())
        .sum();

    // httperf replays the exported wsesslog
    let out_dir = t.path().join("httperf");
    vodlab_ok(&[
        "script",
        "export",
        w.to_str().unwrap(),
        "--to",
        "httperf",
        "-o",
        out_dir.to_str().unwrap(),
    ]);
    let log_a = t.path().join("httperf.log");
    {
        let nginx = Nginx::start_logged(&root, Some(&log_a));
        let out = Command::new(&httperf)
            .args(["--server", "127.0.0.1", "--port", &nginx.port.to_string()])
            .arg(format!(
                "--wsesslog=24,0,{}",
                out_dir.join("shard-00.wsesslog").display()
            ))
            .args(["--rate", "24", "--timeout", "10"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    // vodlab run replays the workload itself
    let log_b = t.path().join("vodlab.log");
    let results = t.path().join("results");
    {
        let nginx = Nginx::start_logged(&root, Some(&log_b));
        vodlab_ok(&[
            "run",
            w.to_str().unwrap(),
            "--target",
            &format!("http://127.0.0.1:{}", nginx.port),
            "--rate",
            "24",
            "--no-shaping",
            "--check-bytes",
            "0",
            "--quiet",
            "-o",
            results.to_str().unwrap(),
        ]);
    }
    let (a, b) = (logged(&log_a), logged(&log_b));
    assert_eq!(a.len(), expected);
    assert_eq!(a.len(), b.len(), "request counts differ");
    assert_eq!(
        a.iter().map(|x| x.1).sum::<u64>(),
        b.iter().map(|x| x.1).sum::<u64>(),
        "byte counts differ"
    );
    assert!(a == b, "the same requests, path for path");

    let r: serde_json::Value = common::results(&results);
    assert_eq!(r["complete"], true);
    assert_eq!(r["failed_sessions"], 0);
    assert_eq!(r["started_sessions"], 24);
}

/// CloudSuite's own generator (`make_zipf.c`) gives ranges as headers:
/// `/full-360p-00186.mp4 timeout=10 headers='Range: bytes=0-1310719'`, with
/// `pace_time=` after the first three. nginx answers those with 206, which
/// the client must expect (every session failed with `bad_status` before).
#[test]
fn a_cloudsuite_videosesslog_replays_against_nginx_without_failures() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("root");
    fs::create_dir_all(&root).unwrap();
    let chunk = 131_072u64; // 128 KiB per request keeps the test short
    let mut text = String::new();
    let sessions = 40;
    for s in 0..sessions {
        let name = format!("full-360p-{:05}.mp4", s % 7);
        fs::write(root.join(&name), vec![9u8; (6 * chunk) as usize]).unwrap();
        for k in 0..6u64 {
            let (a, b) = (k * chunk, (k + 1) * chunk - 1);
            let pace = if k >= 3 { " pace_time=0" } else { "" };
            text.push_str(&format!(
                "/{name} timeout=10{pace} headers='Range: bytes={a}-{b}'\n"
            ));
        }
        text.push('\n');
    }
    let script = t.path().join("cs.videosesslog");
    fs::write(&script, &text).unwrap();
    let check = vodlab_ok(&["script", "check", script.to_str().unwrap()]);
    assert!(
        check.contains(&format!("{} range", sessions * 6)),
        "script check counts the header ranges: {check}"
    );
    let nginx = Nginx::start(&root);
    let out = t.path().join("out");
    vodlab_ok(&[
        "run",
        script.to_str().unwrap(),
        "--target",
        &format!("http://127.0.0.1:{}", nginx.port),
        "--rate",
        "50",
        "--no-shaping",
        "--quiet",
        "-o",
        out.to_str().unwrap(),
    ]);
    let r = common::results(&out);
    assert_eq!(r["started_sessions"], sessions, "{r}");
    assert!(r["measured_sessions"].as_u64().unwrap() > 0, "{r}");
    assert_eq!(r["failed_sessions"], 0, "{r}");
    assert_eq!(r["errors"]["bad_status"], 0, "{r}");
    // every byte of every range arrived
    assert_eq!(
        r["classes"]["default"]["bytes"].as_u64().unwrap(),
        r["measured_sessions"].as_u64().unwrap() * 6 * chunk,
        "{r}"
    );
    assert!(r["completed_bytes"].as_u64().unwrap() > 0, "{r}");
}
