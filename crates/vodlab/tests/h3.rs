//! HTTP/3 over QUIC: `vodlab run --protocol h3` and `vodlab serve --h3`
//! against each other and against third-party HTTP/3 peers: Debian's
//! ngtcp2 example programs (`gtlsclient`, `gtlsserver`: ngtcp2 with
//! nghttp3, package `ngtcp2-client`/`ngtcp2-server`) and aioquic (PyPI, in
//! the test venv; scripts/h3probe/h3get.py). Ground truth: the files'
//! bytes (a `vodlab fileset create` set, whose every byte `--check-bytes 1`
//! verifies) and the ranges the scripts ask for.

mod common;
mod h3common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{free_port, pin_resident, require, udp_bound, vodlab, wait_until};
use h3common::{
    check_against_files, h3get, localhost_cert, rows, run_h3, serve_h3, serve_h3_with_cert, stats,
    workload, Peer,
};

#[test]
fn run_h3_against_serve_h3_gets_every_byte_of_every_range() {
    let t = tempfile::tempdir().unwrap();
    // one file per title, 0.5 MB range requests (20 MB of files)
    let (w, root) = workload(t.path(), "youtube-2011-unchunked", 3, 2);
    let log = t.path().join("access.log");
    let (mut serve, port, ca) = serve_h3(t.path(), &root, &["--access-log", log.to_str().unwrap()]);
    let out = t.path().join("out");
    let r = run_h3(&w, &out, port, &ca);
    let rows = rows(&out);
    check_against_files(&rows, &root, &r);
    assert!(
        rows.values().all(|v| !v.1.is_empty()),
        "range requests only"
    );
    // one QUIC connection per session, each a full handshake (no 0-RTT)
    let sessions = r["scheduled_sessions"].as_u64().unwrap();
    assert_eq!(r["transport"]["connections"], sessions, "{r}");
    assert_eq!(r["transport"]["tls_handshakes"], sessions);
    assert_eq!(r["transport"]["tls_resumed"], 0);
    let (reqs, bytes) = (
        r["completed_requests"].as_u64().unwrap(),
        r["completed_bytes"].as_u64().unwrap(),
    );
    check_quic_figures(&r["transport"]["quic"], sessions, reqs, bytes);
    // summary.txt prints the same figures
    let summary = std::fs::read_to_string(out.join("summary.txt")).unwrap();
    let line = format!(
        "QUIC: {} packets sent, 0 lost (0 bytes, 0 of {sessions} connections), 0 congestion events",
        r["transport"]["quic"]["packets_sent"]
    );
    assert!(summary.contains(&line), "{line} in {summary}");
    // the server's h3 counters say the same
    let st = stats(port, &ca);
    assert_eq!(st["h3"]["requests"], reqs, "{st}");
    assert_eq!(st["h3"]["bytes"], bytes, "{st}");
    assert_eq!(
        st["h3"]["connections"],
        sessions + 1,
        "the run's and its reachability check's: {st}"
    );
    assert_eq!(st["h3"]["aborted"], 0);
    assert_eq!(
        st["h3"]["open_connections"], 0,
        "the run's connections closed: {st}"
    );
    // the access log (written at shutdown at the latest): one line per h3
    // request with its range and bytes sent
    assert!(serve.stop(), "vodlab serve exits cleanly on SIGTERM");
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<Vec<&str>> = text
        .lines()
        .map(|l| l.split(' ').collect::<Vec<_>>())
        .filter(|f| f[3] != "/vodlab/stats")
        .collect();
    assert_eq!(lines.len() as u64, reqs, "{text}");
    let mut logged: Vec<(String, String, u64)> = lines
        .iter()
        .map(|f| {
            let (off, len): (u64, u64) = (f[4].parse().unwrap(), f[5].parse().unwrap());
            (
                f[3].to_string(),
                format!("{off}-{}", off + len - 1),
                f[7].parse().unwrap(),
            )
        })
        .collect();
    let mut sent: Vec<(String, String, u64)> = rows
        .values()
        .map(|v| (v.0.clone(), v.1.clone(), v.3))
        .collect();
    logged.sort();
    sent.sort();
    assert_eq!(
        logged, sent,
        "access log (path, range, bytes sent) = the client's rows"
    );
}

/// QUIC's figures of a loopback run (`transport.quic`) against what they
/// must be: nothing lost (so no congestion event, and the window never
/// below quinn's initial 12,000 bytes: 10 × 1200, CUBIC's and NewReno's
/// default), one connection per session, a STREAM frame per request at
/// least, the datagrams received carrying the response bodies (`bytes`)
/// with bounded overhead, and a loopback RTT.
fn check_quic_figures(q: &serde_json::Value, connections: u64, requests: u64, bytes: u64) {
    let n = |k: &str| q[k].as_u64().unwrap_or_else(|| panic!("quic.{k}: {q}"));
    eprintln!("transport.quic: {q}");
    assert_eq!(n("connections"), connections, "{q}");
    for k in [
        "packets_lost",
        "lost_bytes",
        "congestion_events",
        "connections_with_loss",
    ] {
        assert_eq!(n(k), 0, "{k} on loopback: {q}");
    }
    assert!(n("stream_frames_sent") >= requests, "{q}");
    assert!(n("packets_sent") >= requests.max(2 * connections), "{q}");
    let got = n("bytes_received");
    assert!(
        got >= bytes && got <= bytes + bytes / 10 + 20_000 * connections,
        "{got} bytes received for {bytes} of bodies: {q}"
    );
    assert!(n("datagrams_received") * 1500 >= got, "{q}");
    let cwnd = &q["cwnd_bytes"];
    assert_eq!(cwnd["count"], connections, "{q}");
    assert!(cwnd["min"].as_f64().unwrap() >= 11_990.0, "{q}");
    let rtt = &q["rtt_ms"];
    assert_eq!(rtt["count"], connections, "{q}");
    assert!(rtt["min"].as_f64().unwrap() > 0.0, "{q}");
    assert!(rtt["max"].as_f64().unwrap() < 200.0, "{q}");
}

#[test]
fn third_party_h3_clients_fetch_files_and_ranges_from_serve_h3() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("root");
    std::fs::create_dir(&root).unwrap();
    let data: Vec<u8> = (0..3_000_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    std::fs::write(root.join("v.mp4"), &data).unwrap();
    let (mut serve, port, ca) = serve_h3(t.path(), &root, &["--h3-max-concurrent-streams", "4"]);
    // h1/h2 responses advertise h3 on the same port number
    let curl = Command::new(require("curl", "curl"))
        .args([
            "-s",
            "-o",
            "/dev/null",
            "-D",
            "-",
            "--cacert",
            ca.to_str().unwrap(),
        ])
        .arg(format!("https://localhost:{port}/v.mp4"))
        .output()
        .unwrap();
    let head = String::from_utf8_lossy(&curl.stdout).to_ascii_lowercase();
    assert!(head.contains(&format!("alt-svc: h3=\":{port}\"")), "{head}");
    // aioquic: a range, byte for byte, with its Content-Range; no Alt-Svc on h3 itself
    let got = t.path().join("range.bin");
    let j = h3get(port, "/v.mp4", &got, &ca, &["--range", "1000-200999"]);
    assert_eq!(
        (j["status"].as_u64(), j["alpn"].as_str()),
        (Some(206), Some("h3")),
        "{j}"
    );
    assert_eq!(j["headers"]["content-range"], "bytes 1000-200999/3000000");
    assert!(j["headers"].get("alt-svc").is_none(), "{j}");
    assert!(
        std::fs::read(&got).unwrap() == data[1000..201_000],
        "range bytes"
    );
    // a suffix range and a range past the end (416)
    let j = h3get(port, "/v.mp4", &got, &ca, &["--range", "-100"]);
    assert_eq!(j["status"], 206);
    assert!(std::fs::read(&got).unwrap() == data[data.len() - 100..]);
    let j = h3get(port, "/v.mp4", &got, &ca, &["--range", "5000000-"]);
    assert_eq!(j["status"], 416, "{j}");
    let j = h3get(port, "/missing.mp4", &got, &ca, &[]);
    assert_eq!(j["status"], 404, "{j}");
    // many streams at once on one connection, over the server's credit of 4:
    // QUIC makes the client wait for credit; every one is answered
    let j = h3get(
        port,
        "/v.mp4",
        &got,
        &ca,
        &["--range", "0-9999", "--streams", "40"],
    );
    assert_eq!(
        (j["answered"].as_u64(), j["status"].as_u64()),
        (Some(40), Some(206)),
        "{j}"
    );
    // ngtcp2's h3 client (nghttp3; the example checks no certificate): the
    // whole file, byte for byte
    let gtls = require("gtlsclient", "ngtcp2-client");
    let dl = t.path().join("dl");
    std::fs::create_dir(&dl).unwrap();
    let o = Command::new(gtls)
        .args(["-q", "--exit-on-all-streams-close", "--timeout=10s"])
        .arg(format!("--download={}", dl.display()))
        .args([
            "localhost",
            &port.to_string(),
            &format!("https://localhost:{port}/v.mp4"),
        ])
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "gtlsclient: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        std::fs::read(dl.join("v.mp4")).unwrap() == data,
        "gtlsclient's bytes"
    );
    let st = stats(port, &ca);
    // 4 single GETs (aioquic) + 40 streams + gtlsclient's, each GET set
    // on a connection of its own
    assert_eq!(st["h3"]["requests"], 45, "{st}");
    assert_eq!(st["h3"]["connections"], 6, "{st}");
    assert_eq!(
        st["h3"]["bytes"],
        200_000 + 100 + 40 * 10_000 + 3_000_000,
        "file bytes only: {st}"
    );
    assert!(serve.stop(), "vodlab serve exits cleanly on SIGTERM");
}

#[test]
fn run_h3_against_ngtcp2_server() {
    let gtls = require("gtlsserver", "ngtcp2-server");
    let t = tempfile::tempdir().unwrap();
    // chunk files requested whole (ngtcp2's example server has no ranges)
    let (w, root) = workload(t.path(), "youtube-2011", 3, 2);
    let (cert, key) = localhost_cert(t.path());
    let port = free_port();
    let child = Command::new(gtls)
        .args([
            "-q",
            "-d",
            root.to_str().unwrap(),
            "127.0.0.1",
            &port.to_string(),
        ])
        .arg(&key)
        .arg(&cert)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start gtlsserver");
    let mut server = Peer(child);
    wait_until("gtlsserver on UDP", Duration::from_secs(10), || {
        udp_bound(port)
    });
    let out = t.path().join("out");
    let r = run_h3(&w, &out, port, &cert);
    let rows = rows(&out);
    check_against_files(&rows, &root, &r);
    assert!(
        rows.values().all(|v| v.1.is_empty()),
        "whole-file requests only"
    );
    // QUIC's figures hold against another server's QUIC stack too
    check_quic_figures(
        &r["transport"]["quic"],
        r["scheduled_sessions"].as_u64().unwrap(),
        r["completed_requests"].as_u64().unwrap(),
        r["completed_bytes"].as_u64().unwrap(),
    );
    assert!(
        matches!(server.0.try_wait(), Ok(None)),
        "gtlsserver still up after the run"
    );
    // it dies by the signal (no handler): not a success status
    let _ = server.stop();
}

#[test]
fn h3_refuses_what_it_cannot_do_with_a_clear_error() {
    let t = tempfile::tempdir().unwrap();
    // serve --h3 without TLS
    let o = vodlab(&[
        "serve",
        "--root",
        t.path().to_str().unwrap(),
        "--listen",
        "127.0.0.1:0",
        "--h3",
    ]);
    assert!(!o.status.success());
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("HTTP/3 needs TLS"), "{e}");
    // a Retry threshold of 0 (--h3-retry is the flag for "always")
    let o = vodlab(&[
        "serve",
        "--root",
        t.path().to_str().unwrap(),
        "--listen",
        "127.0.0.1:0",
        "--tls-self-signed",
        "--h3",
        "--h3-retry-above",
        "0",
    ]);
    assert!(!o.status.success());
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains("h3.retry_above") && e.contains("--h3-retry"),
        "{e}"
    );
    // run --protocol h3 needs an https:// target
    std::fs::write(t.path().join("s.vsl"), "#@session id=0\n/a\n").unwrap();
    let s = t.path().join("s.vsl");
    let o = vodlab(&[
        "run",
        s.to_str().unwrap(),
        "--target",
        "http://127.0.0.1:9",
        "--protocol",
        "h3",
        "--rate",
        "1",
    ]);
    assert_eq!(o.status.code(), Some(2), "a usage error");
    assert!(String::from_utf8_lossy(&o.stderr).contains("needs an https:// target"));
    // a server without HTTP/3 there: could not run (3), naming QUIC
    let port = free_port();
    let o = vodlab(&[
        "run",
        s.to_str().unwrap(),
        "--target",
        &format!("https://127.0.0.1:{port}"),
        "--protocol",
        "h3",
        "--insecure",
        "--rate",
        "1",
        "-o",
        t.path().join("o").to_str().unwrap(),
    ]);
    assert_eq!(
        o.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(String::from_utf8_lossy(&o.stderr).contains("no HTTP/3 (QUIC) connection"));
}

/// A file of `len` position-dependent bytes at `path`.
fn varied_file(path: &Path, len: u32) -> Vec<u8> {
    let data: Vec<u8> = (0..len)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    std::fs::write(path, &data).unwrap();
    data
}

/// The h2 pacing test's ground truth over HTTP/3 (h2_serve.rs,
/// `h2_streams_are_paced_by_the_user_mode_pacer`): 3,000,000 bytes at
/// 8 Mbit/s (1 MB/s) × K 1.5 with no burst take 2.0 s from request to the
/// stream's end at aioquic, within the same 1.8-3.0 s, and are the file's
/// bytes; the pacer counted the response and its grants (64 KiB at most
/// each); unpaced, the same download is far faster.
#[test]
fn h3_streams_are_paced_by_the_user_mode_pacer() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("root");
    std::fs::create_dir(&root).unwrap();
    let data = varied_file(&root.join("seg.m4s"), 3_000_000);
    let got = t.path().join("got.bin");
    let (mut serve, port, ca) = serve_h3(
        t.path(),
        &root,
        &[
            "--pace",
            "1.5",
            "--pace-burst",
            "0",
            "--default-bitrate",
            "8000",
        ],
    );
    let j = h3get(port, "/seg.m4s", &got, &ca, &["--timeout", "20"]);
    assert_eq!(j["status"], 200, "{j}");
    assert!(std::fs::read(&got).unwrap() == data, "the file's bytes");
    let took = j["elapsed_s"].as_f64().unwrap();
    eprintln!("paced h3 response: {took:.3} s (2.0 s at the paced rate)");
    assert!((1.8..3.0).contains(&took), "{took:.2} s, paced 2.0 s");
    let st = stats(port, &ca);
    assert_eq!(st["pacing"]["paced_responses"], 1, "{st}");
    assert!(
        st["pacing"]["grants"].as_u64().unwrap() >= 3_000_000 / 65_536,
        "{st}"
    );
    assert_eq!(st["h3"]["bytes"], 3_000_000, "{st}");
    assert!(serve.stop(), "vodlab serve exits cleanly on SIGTERM");
    // unpaced, the same download is far faster
    let (mut serve, port, ca) = serve_h3(t.path(), &root, &[]);
    let j = h3get(port, "/seg.m4s", &got, &ca, &[]);
    assert_eq!(j["bytes"], 3_000_000, "{j}");
    let took = j["elapsed_s"].as_f64().unwrap();
    eprintln!("unpaced h3 response: {took:.3} s");
    assert!(took < 1.5, "unpaced: {took:.2} s");
    let st = stats(port, &ca);
    assert_eq!(st["pacing"]["paced_responses"], 0, "{st}");
    assert!(serve.stop());
}

/// Drops the (clean) page-cache pages of `path`.
fn cool(path: &Path) {
    use std::os::unix::io::AsRawFd;
    let f = std::fs::File::open(path).unwrap();
    f.sync_all().unwrap();
    // SAFETY: an open descriptor, advice only
    let r = unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    assert_eq!(r, 0, "posix_fadvise");
}

/// The prefetch helper's bytes read, over every device.
fn helper_bytes(st: &serde_json::Value) -> u64 {
    st["devices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["bytes"].as_u64().unwrap())
        .sum()
}

/// ASAP over HTTP/3 as over HTTP/1.1 and HTTP/2 (hostile_prefetch.rs,
/// `a_short_range_completes_with_its_read_ahead`; h2_serve.rs checks h2
/// streams are probed): a range of an uncached file (on the real disk,
/// dropped from the page cache) misses, and the helper reads the 4 MiB
/// prefetch for it; the next range inside that prefetch, from another
/// aioquic connection right after the first completed, hits and reads
/// nothing more. The statistics and the access log's cache column say so;
/// both ranges arrive byte for byte. With `--io vanilla` nothing is probed.
/// The test pins the prefetched pages once it has seen them all resident
/// (this VM drops page-cache pages when it gives memory back: see
/// `pin_resident`), and tries again, at most 3 times, when some were gone
/// before it looked.
#[test]
fn h3_ranges_are_probed_and_prefetched_by_asap() {
    let t = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let root = t.path().join("root");
    std::fs::create_dir(&root).unwrap();
    let data = varied_file(&root.join("seg.mp4"), 8 << 20);
    let got = t.path().join("got.bin");
    // One try: a fresh server, the two ranges; `None` when the pages the
    // first range's prefetch read were no longer all resident when the test
    // looked, before asking for the second (dropped by the VM, see
    // `pin_resident`: the premise failed, not the server). Otherwise they
    // stay pinned until the second range has been answered.
    let attempt = |n: usize| -> Option<(serde_json::Value, String)> {
        cool(&root.join("seg.mp4"));
        let log = t.path().join(format!("access-{n}.log"));
        let (mut serve, port, ca) =
            serve_h3(t.path(), &root, &["--access-log", log.to_str().unwrap()]);
        let mut pin = None;
        for (a, b) in [(0usize, 262_143usize), (262_144, 4_194_303)] {
            let j = h3get(
                port,
                "/seg.mp4",
                &got,
                &ca,
                &["--range", &format!("{a}-{b}")],
            );
            assert_eq!(j["status"], 206, "{j}");
            assert!(std::fs::read(&got).unwrap() == data[a..=b], "{a}-{b}");
            if a == 0 {
                // the first response ends before its prefetch does (it needs
                // 256 KiB of the 4 MiB): the second range is asked for once
                // the helper's read is done (its statistics are the signal;
                // at most 10 s), so a busy machine cannot make it miss
                wait_until("the helper read the 4 MiB", Duration::from_secs(10), || {
                    helper_bytes(&stats(port, &ca)) >= 4 << 20
                });
                match pin_resident(&root.join("seg.mp4"), 262_144, 4_194_304 - 262_144) {
                    Ok(p) => pin = Some(p),
                    Err(missing) => {
                        eprintln!("try {n}: {missing} prefetched pages gone before the second range; trying again");
                        assert!(serve.stop());
                        return None;
                    }
                }
            }
        }
        let st = stats(port, &ca);
        assert!(serve.stop());
        drop(pin);
        Some((st, std::fs::read_to_string(&log).unwrap()))
    };
    let (st, text) = (1..=3).find_map(attempt).expect(
        "in 3 tries the prefetched pages were never all resident when the test looked: \
         did the helper read the 4 MiB after the first range?",
    );
    assert_eq!(
        (st["probe_misses"].as_u64(), st["probe_hits"].as_u64()),
        (Some(1), Some(1)),
        "the first range missed and read 4 MiB ahead, the second found them: {st}"
    );
    assert_eq!(helper_bytes(&st), 4 << 20, "{st}");
    let cache: Vec<&str> = text
        .lines()
        .filter(|l| l.contains(" /seg.mp4 "))
        .map(|l| l.split(' ').nth(9).unwrap())
        .collect();
    assert_eq!(cache, ["miss", "hit"], "{text}");
    // vanilla: plain reads, no probe, no helper
    cool(&root.join("seg.mp4"));
    let (mut serve, port, ca) = serve_h3(t.path(), &root, &["--io", "vanilla"]);
    let j = h3get(port, "/seg.mp4", &got, &ca, &["--range", "0-262143"]);
    assert_eq!(j["bytes"], 262_144, "{j}");
    let st = stats(port, &ca);
    assert_eq!(
        (st["probe_misses"].as_u64(), helper_bytes(&st)),
        (Some(0), 0),
        "{st}"
    );
    assert!(serve.stop());
}

/// `--h3-0rtt` against servers whose answer the test sets. One viewer asks
/// for /a and /b, waits 4 s (the server's 1 s idle timeout ends its QUIC
/// connection), then /c and /d on a second connection, which resumes the
/// first one's session ticket:
/// - `serve --h3-0rtt`: the second connection sends 0-RTT and the server
///   accepts it (1 of 2 connections, accepted on 1);
/// - `serve` without it: its tickets allow no early data, so no 0-RTT is
///   sent (0 of 2);
/// - the server replaced by another process between the two (same port and
///   certificate, `--h3-0rtt`, but not the ticket's issuer): the 0-RTT is
///   sent and rejected, /c is sent again on a third connection, with a
///   full handshake, and the session succeeds (1 of 3, accepted on 0); the
///   new server answered /c and /d only.
///
/// Every response is whole (the files' sizes summed), every run passes.
#[test]
fn h3_0rtt_is_sent_on_resumed_connections_and_accepted_or_refused_as_the_server_says() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("root");
    std::fs::create_dir(&root).unwrap();
    let mut total = 0u64;
    for (name, len) in [
        ("a", 200_000),
        ("b", 300_000),
        ("c", 400_000),
        ("d", 500_000),
    ] {
        varied_file(&root.join(format!("{name}.bin")), len);
        total += u64::from(len);
    }
    let script = t.path().join("s.vsl");
    std::fs::write(
        &script,
        "#@session id=0\n/a.bin timeout=20\n/b.bin timeout=20 pacing=0.01\n\
         /c.bin timeout=20 pacing=4\n/d.bin timeout=20 pacing=0.01\n",
    )
    .unwrap();
    let (cert, key) = localhost_cert(t.path());
    let run = |port: u16, out: &Path| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_vodlab"));
        c.args([
            "run",
            script.to_str().unwrap(),
            "--protocol",
            "h3",
            "--h3-0rtt",
        ])
        .args(["--target", &format!("https://127.0.0.1:{port}")])
        .arg("--ca")
        .arg(&cert)
        .args([
            "--rate",
            "100",
            "--arrivals",
            "constant",
            "--check-bytes",
            "0",
        ])
        .args(["--quiet", "-o", out.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
        c
    };
    let check = |out: &Path, o: &std::process::Output, conns: u64, sent: u64, accepted: u64| {
        assert!(o.status.success(), "{o:?}");
        let r = common::results(out);
        assert_eq!(r["failed_sessions"], 0, "{r}");
        assert_eq!(r["completed_requests"], 4, "{r}");
        assert_eq!(r["completed_bytes"].as_u64(), Some(total), "{r}");
        let q = &r["transport"]["quic"];
        assert_eq!(r["transport"]["connections"].as_u64(), Some(conns), "{r}");
        assert_eq!(
            (
                q["zero_rtt_attempted"].as_u64(),
                q["zero_rtt_accepted"].as_u64()
            ),
            (Some(sent), Some(accepted)),
            "{q}"
        );
        let text = String::from_utf8_lossy(&o.stdout);
        assert_eq!(text.contains("QUIC 0-RTT: sent on"), sent > 0, "{text}");
    };
    // accepted
    let port = free_port();
    let mut s = serve_h3_with_cert(
        &root,
        port,
        &cert,
        &key,
        &["--h3-0rtt", "--h3-idle-timeout", "1"],
    );
    let out = t.path().join("accepted");
    let o = run(port, &out).output().unwrap();
    check(&out, &o, 2, 1, 1);
    let st = stats(port, &cert);
    assert_eq!(st["h3"]["requests"], 4, "{st}");
    assert!(s.stop());
    // the server's tickets allow no early data
    let port = free_port();
    let mut s = serve_h3_with_cert(&root, port, &cert, &key, &["--h3-idle-timeout", "1"]);
    let out = t.path().join("no-early-data");
    let o = run(port, &out).output().unwrap();
    check(&out, &o, 2, 0, 0);
    assert!(s.stop());
    // another server process (not the ticket's issuer) rejects the 0-RTT
    let port = free_port();
    let mut first = serve_h3_with_cert(
        &root,
        port,
        &cert,
        &key,
        &["--h3-0rtt", "--h3-idle-timeout", "1"],
    );
    let out = t.path().join("rejected");
    let client = run(port, &out).spawn().unwrap();
    // /a and /b answered, and their connection timed out idle: the
    // server has nothing left in flight and stops at once
    wait_until(
        "/a and /b answered, their connection closed",
        Duration::from_secs(3),
        || {
            let st = stats(port, &cert);
            st["h3"]["requests"] == 2 && st["h3"]["open_connections"] == 0
        },
    );
    assert!(first.stop());
    let mut second = serve_h3_with_cert(&root, port, &cert, &key, &["--h3-0rtt"]);
    let o = client.wait_with_output().unwrap();
    check(&out, &o, 3, 1, 0);
    let st = stats(port, &cert);
    assert_eq!(
        st["h3"]["requests"], 2,
        "the new server answered /c and /d: {st}"
    );
    assert!(second.stop());
}
