//! `vodlab serve` with real clients: curl and Debian's httperf, plus raw
//! sockets for the hostile cases (traversal, slowloris, disconnects).

mod common;

use std::fs;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::Command;
use std::time::{Duration, Instant};

use common::{require, Running};
use vodlab_server::IoMode;

/// What each test reads back from its server.
trait Stats {
    fn stats(&self) -> serde_json::Value;
}

impl Stats for Running {
    fn stats(&self) -> serde_json::Value {
        serde_json::from_str(&curl(&["-s", &self.url("/vodlab/stats")]).1).unwrap()
    }
}

/// (headers, body) of a curl call; `-i`-style parsing by curl's own `-D`.
fn curl(args: &[&str]) -> (String, String) {
    let bin = require("curl", "curl");
    let dir = tempfile::tempdir().unwrap();
    let h = dir.path().join("h");
    let out = Command::new(bin)
        .args(["-sS", "-D", h.to_str().unwrap()])
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "curl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (
        fs::read_to_string(&h).unwrap_or_default(),
        String::from_utf8_lossy(&out.stdout).to_string(),
    )
}

fn status(headers: &str) -> u16 {
    headers.split_whitespace().nth(1).unwrap().parse().unwrap()
}

fn header<'a>(headers: &'a str, name: &str) -> Option<&'a str> {
    headers.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

fn root_with_files() -> tempfile::TempDir {
    let d = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let body: String = (0..10_000)
        .map(|i| char::from(b'a' + (i % 26) as u8))
        .collect();
    fs::write(d.path().join("v.mp4"), &body).unwrap();
    fs::create_dir(d.path().join("t1")).unwrap();
    fs::write(d.path().join("t1").join("00000.m4s"), &body[..1000]).unwrap();
    fs::write(d.path().join("big.bin"), vec![7u8; 64 << 20]).unwrap();
    d
}

#[test]
fn range_requests_follow_rfc_9110() {
    let root = root_with_files();
    let s = Running::start(root.path(), |_| {});
    let full: String = fs::read_to_string(root.path().join("v.mp4")).unwrap();
    let u = s.url("/v.mp4");

    let (h, b) = curl(&[&u]);
    assert_eq!(status(&h), 200);
    assert_eq!(header(&h, "content-type"), Some("video/mp4"));
    assert_eq!(header(&h, "accept-ranges"), Some("bytes"));
    assert_eq!(b, full);

    let (h, b) = curl(&["-r", "0-499", &u]);
    assert_eq!(status(&h), 206);
    assert_eq!(header(&h, "content-range"), Some("bytes 0-499/10000"));
    assert_eq!(b, full[..500]);

    let (h, b) = curl(&["-r", "9500-", &u]);
    assert_eq!((status(&h), b.as_str()), (206, &full[9500..]));

    let (h, b) = curl(&["-r", "-500", &u]);
    assert_eq!(header(&h, "content-range"), Some("bytes 9500-9999/10000"));
    assert_eq!(b, full[9500..]);

    let (h, _) = curl(&["-r", "20000-", &u]);
    assert_eq!(status(&h), 416);
    assert_eq!(header(&h, "content-range"), Some("bytes */10000"));

    // overlapping ranges merge into one
    let (h, b) = curl(&["-r", "0-99,50-199", &u]);
    assert_eq!(header(&h, "content-range"), Some("bytes 0-199/10000"));
    assert_eq!(b, full[..200]);

    // two ranges: multipart/byteranges
    let (h, b) = curl(&["-r", "0-9,100-109", &u]);
    assert_eq!(status(&h), 206);
    let ct = header(&h, "content-type").unwrap();
    let boundary = ct.split("boundary=").nth(1).unwrap();
    assert!(b.contains(&format!("--{boundary}\r\nContent-Type: video/mp4\r\nContent-Range: bytes 0-9/10000\r\n\r\n{}\r\n", &full[..10])), "{b}");
    assert!(b.contains(&format!(
        "Content-Range: bytes 100-109/10000\r\n\r\n{}\r\n",
        &full[100..110]
    )));
    assert!(b.ends_with(&format!("--{boundary}--\r\n")));
    assert_eq!(
        header(&h, "content-length")
            .unwrap()
            .parse::<usize>()
            .unwrap(),
        b.len()
    );

    // If-Range: the range applies only when the validator matches
    let etag = header(&h, "etag").unwrap().to_string();
    let (h, b) = curl(&["-r", "0-9", "-H", &format!("If-Range: {etag}"), &u]);
    assert_eq!((status(&h), b.len()), (206, 10));
    let (h, b) = curl(&["-r", "0-9", "-H", "If-Range: \"stale\"", &u]);
    assert_eq!((status(&h), b.len()), (200, 10_000));
    let lm = header(&h, "last-modified").unwrap().to_string();
    let (h, _) = curl(&["-r", "0-9", "-H", &format!("If-Range: {lm}"), &u]);
    assert_eq!(status(&h), 206);

    // HEAD: headers only
    let (h, b) = curl(&["-I", &u]);
    assert_eq!(
        (
            status(&h),
            header(&h, "content-length"),
            b.contains("abcdefghij")
        ),
        (200, Some("10000"), false)
    );
    assert_eq!(status(&curl(&[&s.url("/t1/00000.m4s")]).0), 200);
    assert_eq!(
        header(&curl(&[&s.url("/t1/00000.m4s")]).0, "content-type"),
        Some("video/iso.segment")
    );
    assert_eq!(status(&curl(&[&s.url("/missing")]).0), 404);
    assert_eq!(status(&curl(&["-X", "POST", &u]).0), 405);
}

fn raw(addr: SocketAddr, request: &[u8]) -> String {
    let mut c = TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    c.write_all(request).unwrap();
    let mut out = Vec::new();
    let _ = c.read_to_end(&mut out);
    String::from_utf8_lossy(&out).to_string()
}

#[test]
fn paths_cannot_leave_the_root() {
    let outside = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    fs::write(outside.path().join("secret"), "secret").unwrap();
    let root = root_with_files();
    std::os::unix::fs::symlink(outside.path().join("secret"), root.path().join("link")).unwrap();
    let s = Running::start(root.path(), |_| {});
    let name = outside.path().file_name().unwrap().to_str().unwrap();
    for target in [
        format!("/../{name}/secret"),
        format!("/%2e%2e/{name}/secret"),
        format!("/t1/%2E%2E%2F..%2F{name}/secret"),
        "/link".to_string(),
        "/..%5c..%5csecret".to_string(),
    ] {
        let resp = raw(
            s.addr,
            format!("GET {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes(),
        );
        assert!(
            !resp.contains("secret\n") && !resp.ends_with("secret"),
            "{target}: {resp}"
        );
        let code: u16 = resp.split_whitespace().nth(1).unwrap().parse().unwrap();
        assert!(code == 400 || code == 404, "{target}: {resp}");
    }
}

#[test]
fn pipelined_requests_are_answered_in_order() {
    let root = root_with_files();
    let s = Running::start(root.path(), |_| {});
    let resp = raw(
        s.addr,
        b"GET /t1/00000.m4s HTTP/1.1\r\nHost: x\r\nRange: bytes=0-4\r\n\r\nGET /t1/00000.m4s HTTP/1.1\r\nHost: x\r\nRange: bytes=5-9\r\nConnection: close\r\n\r\n",
    );
    let first = resp.find("bytes 0-4/1000").unwrap();
    let second = resp.find("bytes 5-9/1000").unwrap();
    assert!(first < second, "{resp}");
    assert!(resp.ends_with("fghij"), "{resp}");
}

#[test]
fn slowloris_connections_time_out_while_others_are_served() {
    let root = root_with_files();
    let s = Running::start(root.path(), |c| {
        c.header_timeout = Duration::from_millis(800)
    });
    let mut idle: Vec<TcpStream> = (0..200)
        .map(|_| {
            let mut c = TcpStream::connect(s.addr).unwrap();
            c.write_all(b"GET /v.mp4 HTTP/1.1\r\nHost: x\r\nX-Slow: ")
                .unwrap();
            c
        })
        .collect();
    // a well-behaved client is served meanwhile
    let t = Instant::now();
    let (h, _) = curl(&["-r", "0-9", &s.url("/v.mp4")]);
    assert_eq!(status(&h), 206);
    assert!(t.elapsed() < Duration::from_millis(700));
    // the 800 ms header timeout runs in real time; wait for the server to
    // count it for every slow head (bounded as the fixed 1.2 s wait and the
    // 2 s read timeout were), not a guessed time
    common::wait_until("200 header timeouts", Duration::from_millis(3200), || {
        s.server().state.stats().header_timeouts >= 200
    });
    for c in idle.iter_mut() {
        c.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let mut b = [0u8; 16];
        assert_eq!(
            c.read(&mut b).unwrap_or(0),
            0,
            "a slow head must be dropped"
        );
    }
    assert!(s.stats()["header_timeouts"].as_u64().unwrap() >= 200);
}

#[test]
fn a_client_that_disconnects_mid_response_does_not_hurt_others() {
    let root = root_with_files();
    for io in [IoMode::Asap, IoMode::Vanilla] {
        let s = Running::start(root.path(), |c| c.io = io);
        for _ in 0..5 {
            let mut c = TcpStream::connect(s.addr).unwrap();
            c.write_all(b"GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n")
                .unwrap();
            let mut b = vec![0u8; 100_000];
            let _ = c.read(&mut b).unwrap();
            drop(c);
        }
        let (h, b) = curl(&["-r", "0-99", &s.url("/v.mp4")]);
        assert_eq!((status(&h), b.len()), (206, 100));
        // the server notices a hang-up when its next write fails: wait for it
        common::wait_until("an aborted response", Duration::from_secs(10), || {
            s.server().state.stats().aborted >= 1
        });
        assert!(s.stats()["aborted"].as_u64().unwrap() >= 1, "{io:?}");
    }
}

#[test]
fn graceful_shutdown_finishes_responses_in_flight() {
    let root = root_with_files();
    let mut s = Running::start(root.path(), |_| {});
    let addr = s.addr;
    let (in_flight, started) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut c = TcpStream::connect(addr).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        c.write_all(b"GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        let mut b = vec![0u8; 1 << 16];
        // the response has begun ...
        let mut total = c.read(&mut b).unwrap();
        in_flight.send(()).unwrap();
        // ... and shutdown begins before the rest is read (its listener closed)
        common::wait_until("shutdown begun", Duration::from_secs(10), || {
            !common::listening(addr.port())
        });
        loop {
            match c.read(&mut b) {
                Ok(0) | Err(_) => break,
                Ok(n) => total += n,
            }
        }
        total
    });
    started
        .recv_timeout(Duration::from_secs(10))
        .expect("the response began");
    assert!(
        common::listening(addr.port()),
        "seen listening before shutdown"
    );
    let server = s.server.take().unwrap();
    s.rt.block_on(server.shutdown());
    let got = reader.join().unwrap();
    assert!(
        got > 64 << 20,
        "the response in flight completed: {got} bytes"
    );
    assert!(
        TcpStream::connect(addr).is_err(),
        "no new connections after shutdown"
    );
}

#[test]
fn httperf_is_served_and_the_access_log_joins_sessions() {
    let httperf = require("httperf", "httperf");
    let root = root_with_files();
    let log = root.path().join("access.log");
    let s = Running::start(root.path(), |c| c.access_log = Some(log.clone()));
    let out = Command::new(httperf)
        .args([
            "--server",
            "127.0.0.1",
            "--port",
            &s.addr.port().to_string(),
            "--uri",
            "/t1/00000.m4s",
        ])
        .args(["--num-conns", "20", "--num-calls", "10", "--rate", "100"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("Total: connections 20 requests 200 replies 200"),
        "{text}"
    );
    assert!(text.contains("2xx=200"), "{text}");
    let stats = s.stats();
    assert_eq!(stats["requests"].as_u64().unwrap(), 200);
    curl(&[
        "-H",
        "X-Vodlab-Session: 42",
        "-r",
        "10-19",
        &s.url("/v.mp4"),
    ]);
    drop(s); // flushes the log
    let text = fs::read_to_string(&log).unwrap();
    assert!(text.lines().count() >= 201);
    let last = text.lines().last().unwrap();
    let f: Vec<&str> = last.split(' ').collect();
    // time conn session path offset length status bytes service_us cache
    assert_eq!(
        &f[2..8],
        &["42", "/v.mp4", "10", "10", "206", "10"],
        "{last}"
    );
    assert!(f[9] == "hit" || f[9] == "miss", "{last}");
}

#[test]
fn errors_keep_their_status_and_head_answers_have_no_body() {
    let root = root_with_files();
    let s = Running::start(root.path(), |_| {});
    // a directory is not served: 403, not 404
    assert_eq!(status(&curl(&[&s.url("/t1")]).0), 403);
    assert_eq!(status(&curl(&[&s.url("/t1/missing.m4s")]).0), 404);
    // HEAD of an error: the head only, so the next pipelined response follows it directly
    let resp = raw(
        s.addr,
        b"HEAD /missing HTTP/1.1\r\nHost: x\r\n\r\nGET /t1/00000.m4s HTTP/1.1\r\nHost: x\r\nRange: bytes=0-4\r\nConnection: close\r\n\r\n",
    );
    assert!(resp.starts_with("HTTP/1.1 404 Not Found\r\n"), "{resp}");
    let second = resp.find("\r\n\r\n").unwrap() + 4;
    assert!(
        resp[second..].starts_with("HTTP/1.1 206 Partial Content\r\n"),
        "{resp}"
    );
    assert!(resp.ends_with("abcde"), "{resp}");
    let st = s.stats();
    assert_eq!(st["responses"]["error"].as_u64(), Some(3), "{st}");
    assert_eq!(st["responses"]["range"].as_u64(), Some(1), "{st}");
    assert_eq!(st["errors"].as_u64(), Some(3), "{st}");
    assert_eq!(st["prefetch_policy"].as_str(), Some("fixed:4M"));
    assert_eq!(st["prefetch_bytes"].as_u64(), Some(4 << 20));
}

/// Waits for a `vodlab serve` child to answer on `port`.
fn wait_listening(port: u16) {
    let t = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "vodlab serve did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn the_prefetch_policy_is_chosen_on_the_command_line() {
    let root = root_with_files();
    let bad = common::vodlab(&[
        "serve",
        "--root",
        root.path().to_str().unwrap(),
        "--prefetch-policy",
        "adaptive",
    ]);
    assert!(!bad.status.success());
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(err.contains("unknown policy `adaptive`"), "{err}");
    for (flag, value, want) in [
        ("--prefetch-policy", "fixed:2M", "fixed:2M"),
        ("--prefetch", "512K", "fixed:512K"),
    ] {
        let port = common::free_port();
        let mut child = Command::new(env!("CARGO_BIN_EXE_vodlab"))
            .args(["serve", "--root", root.path().to_str().unwrap()])
            .args(["--listen", &format!("127.0.0.1:{port}"), flag, value])
            .args(["--stats-interval", "0"])
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        wait_listening(port);
        let (_, body) = curl(&[&format!("http://127.0.0.1:{port}/vodlab/stats")]);
        let st: serde_json::Value = serde_json::from_str(&body).unwrap();
        // SAFETY: signalling the child we started, by its PID
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let _ = child.wait();
        assert_eq!(st["prefetch_policy"].as_str(), Some(want), "{flag} {value}");
    }
}
