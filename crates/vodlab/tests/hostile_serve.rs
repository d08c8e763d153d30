//! `vodlab serve` under hostile clients (issue "Hostile clients, hostile
//! servers, hostile files"): request smuggling, RFC 9112 conformance,
//! slowloris at the connection cap, stalled readers, FIFOs in the root and
//! connections arriving during shutdown. Everything on loopback; every loop
//! bounded in count and time.

mod common;

use std::fs;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::io::AsRawFd;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{raise_nofile, Running};
use vodlab_server::IoMode;
use vodlab_testkit::wait_until;

/// What each test reads back from its server.
trait Stats {
    fn stats(&self) -> serde_json::Value;
}

impl Stats for Running {
    fn stats(&self) -> serde_json::Value {
        stats_at(self.addr)
    }
}

fn stats_at(addr: SocketAddr) -> serde_json::Value {
    let r = exchange(
        addr,
        b"GET /vodlab/stats HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(r.responses.len(), 1, "{:?}", r.text);
    serde_json::from_slice(&r.responses[0].body).unwrap()
}

fn root_with_files() -> tempfile::TempDir {
    let d = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let body: Vec<u8> = (0..10_000u32).map(|i| b'a' + (i % 26) as u8).collect();
    fs::write(d.path().join("v.mp4"), &body).unwrap();
    fs::write(d.path().join("small.txt"), b"small\n").unwrap();
    fs::create_dir(d.path().join("t1")).unwrap();
    fs::write(d.path().join("t1").join("00000.m4s"), &body[..1000]).unwrap();
    fs::write(d.path().join("big.bin"), vec![7u8; 64 << 20]).unwrap();
    fs::write(d.path().join("paced.bin"), vec![9u8; 8 << 20]).unwrap();
    d
}

/// One response read off the wire.
#[derive(Debug)]
struct Resp {
    status: u16,
    head: String,
    body: Vec<u8>,
}

impl Resp {
    fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case(name).then(|| v.trim())
        })
    }
}

/// Everything a connection received, split into responses (a HEAD-less
/// parser: every response here has a Content-Length).
struct Exchange {
    responses: Vec<Resp>,
    /// Whether the server closed the connection.
    closed: bool,
    text: String,
}

/// Sends `request` and reads until the server closes or is silent for 3 s.
fn exchange(addr: SocketAddr, request: &[u8]) -> Exchange {
    let mut c = TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    c.write_all(request).unwrap();
    let mut out = Vec::new();
    let mut b = [0u8; 65536];
    let closed = loop {
        match c.read(&mut b) {
            Ok(0) => break true,
            Ok(n) => out.extend_from_slice(&b[..n]),
            Err(e) if e.kind() == ErrorKind::ConnectionReset => break true,
            Err(_) => break false,
        }
    };
    let mut responses = Vec::new();
    let mut rest = &out[..];
    while let Some(end) = rest.windows(4).position(|w| w == b"\r\n\r\n") {
        let head = String::from_utf8_lossy(&rest[..end]).to_string();
        let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
        let mut r = Resp {
            status,
            head,
            body: Vec::new(),
        };
        let len: usize = r.header("content-length").map_or(0, |v| v.parse().unwrap());
        let body_end = (end + 4 + len).min(rest.len());
        r.body = rest[end + 4..body_end].to_vec();
        responses.push(r);
        rest = &rest[body_end..];
    }
    Exchange {
        responses,
        closed,
        text: String::from_utf8_lossy(&out).to_string(),
    }
}

fn statuses(e: &Exchange) -> Vec<u16> {
    e.responses.iter().map(|r| r.status).collect()
}

/// The request hidden in bodies: if it were parsed, a 200 with the
/// 10,000 bytes of /v.mp4 would appear.
const SMUGGLED: &str = "GET /v.mp4 HTTP/1.1\r\nHost: x\r\n\r\n";
/// A real pipelined request after a drained body: 1,000 bytes.
const NEXT: &str = "GET /t1/00000.m4s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";

#[test]
fn smuggled_bodies_are_never_parsed_as_requests() {
    let root = root_with_files();
    let s = Running::start(root.path(), |_| {});
    let n = SMUGGLED.len();
    // conflicting framing: 400 and close, nothing after it
    for (what, head) in [
        (
            "two Content-Lengths",
            format!("GET /t1/00000.m4s HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nContent-Length: {n}\r\n\r\n"),
        ),
        (
            "a Content-Length list that disagrees",
            format!("GET /t1/00000.m4s HTTP/1.1\r\nHost: x\r\nContent-Length: 0, {n}\r\n\r\n"),
        ),
        (
            "Content-Length with Transfer-Encoding",
            format!("POST /t1/00000.m4s HTTP/1.1\r\nHost: x\r\nContent-Length: {n}\r\nTransfer-Encoding: chunked\r\n\r\n"),
        ),
        (
            "an unknown Transfer-Encoding",
            "POST /t1/00000.m4s HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n".to_string(),
        ),
    ] {
        let e = exchange(s.addr, format!("{head}{SMUGGLED}{NEXT}").as_bytes());
        assert_eq!(statuses(&e), [400], "{what}: {}", e.text);
        assert_eq!(e.responses[0].header("connection"), Some("close"), "{what}");
        assert!(e.closed, "{what}");
    }
    // a body on a refused method is drained: the next real request is answered, the smuggled one never
    for method in ["POST", "OPTIONS", "PUT", "DELETE"] {
        let e = exchange(
            s.addr,
            format!("{method} /t1/00000.m4s HTTP/1.1\r\nHost: x\r\nContent-Length: {n}\r\n\r\n{SMUGGLED}{NEXT}").as_bytes(),
        );
        assert_eq!(statuses(&e), [405, 200], "{method}: {}", e.text);
        assert_eq!(
            e.responses[1].body.len(),
            1000,
            "{method}: the real request, not /v.mp4"
        );
        assert!(e.closed);
    }
    // a body in pieces (head first, body later) is drained the same way
    {
        let mut c = TcpStream::connect(s.addr).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
        c.write_all(
            format!("POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: {n}\r\n\r\n").as_bytes(),
        )
        .unwrap();
        // the server answers the head before it drains the body: once the
        // 405's head is here, the server surely had the head alone
        let mut first = Vec::new();
        let mut b = [0u8; 4096];
        while !first.windows(4).any(|w| w == b"\r\n\r\n") {
            match c.read(&mut b) {
                Ok(k) if k > 0 => first.extend_from_slice(&b[..k]),
                r => panic!(
                    "no answer to the head alone ({r:?}): {}",
                    String::from_utf8_lossy(&first)
                ),
            }
        }
        c.write_all(format!("{SMUGGLED}{NEXT}").as_bytes()).unwrap();
        let mut rest = Vec::new();
        let _ = c.read_to_end(&mut rest);
        first.extend_from_slice(&rest);
        let out = String::from_utf8_lossy(&first).to_string();
        assert_eq!(out.matches("HTTP/1.1 ").count(), 2, "{out}");
        assert!(out.starts_with("HTTP/1.1 405 "), "{out}");
        assert!(out.contains("Content-Length: 1000\r\n"), "{out}");
        assert!(!out.contains("Content-Length: 10000"), "{out}");
    }
    // a GET with a body: 413 and close, the body never parsed
    let e = exchange(
        s.addr,
        format!("GET /t1/00000.m4s HTTP/1.1\r\nHost: x\r\nContent-Length: {n}\r\n\r\n{SMUGGLED}")
            .as_bytes(),
    );
    assert_eq!(statuses(&e), [413], "{}", e.text);
    assert!(e.closed);
    // a chunked body carrying a request: refused and closed, not parsed
    let e = exchange(
        s.addr,
        format!("GET /t1/00000.m4s HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n{n:x}\r\n{SMUGGLED}\r\n0\r\n\r\n{NEXT}").as_bytes(),
    );
    assert_eq!(statuses(&e), [413], "{}", e.text);
    assert!(e.closed);
    // Expect: 100-continue on a refused method: the final answer, no 100, and close
    let e = exchange(
        s.addr,
        format!("POST /t1/00000.m4s HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: {n}\r\n\r\n{SMUGGLED}{NEXT}").as_bytes(),
    );
    assert_eq!(statuses(&e), [405], "{}", e.text);
    assert_eq!(e.responses[0].header("connection"), Some("close"));
    assert!(e.closed && !e.text.contains("100 Continue"));
    // a body longer than the server drains: answered and closed
    let big = 1 << 20;
    let mut req =
        format!("POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: {big}\r\n\r\n").into_bytes();
    req.extend(std::iter::repeat_n(b'x', 128 << 10));
    let e = exchange(s.addr, &req);
    assert_eq!(statuses(&e), [405], "{}", e.text);
    assert!(e.closed);
    // the server still serves
    let e = exchange(s.addr, NEXT.as_bytes());
    assert_eq!(statuses(&e), [200]);
}

#[test]
fn requests_follow_rfc_9112() {
    let root = root_with_files();
    let s = Running::start(root.path(), |_| {});
    // HTTP/1.1 without Host, or with two: 400 and close
    for head in [
        "GET /v.mp4 HTTP/1.1\r\n\r\n",
        "GET /v.mp4 HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
    ] {
        let e = exchange(s.addr, format!("{head}{NEXT}").as_bytes());
        assert_eq!(statuses(&e), [400], "{head:?}: {}", e.text);
        assert!(e.closed);
    }
    // HTTP/1.0 needs no Host
    let e = exchange(s.addr, b"GET /small.txt HTTP/1.0\r\n\r\n");
    assert_eq!(statuses(&e), [200]);
    assert_eq!(e.responses[0].body, b"small\n");
    // absolute form is served, the path taken from it
    let e = exchange(
        s.addr,
        b"GET http://example.com/t1/00000.m4s HTTP/1.1\r\nHost: example.com\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(statuses(&e), [200], "{}", e.text);
    assert_eq!(e.responses[0].body.len(), 1000);
    let e = exchange(
        s.addr,
        b"GET HTTP://example.com:80/small.txt?x=1 HTTP/1.1\r\nHost: example.com\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(
        (statuses(&e), e.responses[0].body.as_slice()),
        (vec![200], &b"small\n"[..])
    );
    // a file is not a directory
    for target in ["/small.txt/", "/t1/00000.m4s/", "/small.txt%2F"] {
        let e = exchange(
            s.addr,
            format!("GET {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes(),
        );
        assert_eq!(statuses(&e), [404], "{target}: {}", e.text);
    }
    let e = exchange(
        s.addr,
        b"GET /t1/ HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(statuses(&e), [403], "a directory stays 403");
}

/// The connection was closed by the server (EOF or reset), without blocking.
fn closed_by_peer(c: &mut TcpStream) -> bool {
    c.set_nonblocking(true).unwrap();
    let mut b = [0u8; 64];
    loop {
        match c.read(&mut b) {
            Ok(0) => return true,
            Ok(_) => continue, // an error answer (408-like) before the close
            Err(e) if e.kind() == ErrorKind::WouldBlock => return false,
            Err(_) => return true,
        }
    }
}

/// The done-when probe: `VODLAB_SLOWLORIS_CONNS` (default 10,000)
/// connections each dribbling one byte of a never-ending head every 500 ms
/// against a `vodlab serve` child with a 3 s header timeout and a cap of a
/// fortieth of that. The cap must be one the flood reaches: the dribblers
/// live about 3 s each, so at most rate x 3 s are open at once, and this
/// 2-core machine opens 150-200 a second with the file's other tests beside
/// it (10,000 in 50-67 s): 450-600 at once, under the tenth (1,000) this test
/// used before, which it then reached only when the opening ran fast. 250 is
/// reached down to 84 openings a second. A
/// dribbled byte must not extend the deadline: every dribbler is closed by
/// its deadline or shed earlier at the cap, and a benign client opening new
/// connections all the while is served.
/// Requests of the benign client in the slowloris test.
const BENIGN: usize = 40;

#[test]
fn slowloris_at_the_connection_cap_does_not_starve_new_clients() {
    let want: usize = std::env::var("VODLAB_SLOWLORIS_CONNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let limit = raise_nofile() as usize;
    // this process holds the dribblers; the child (same limit) their server ends
    let n = want.min(limit.saturating_sub(256));
    assert!(n >= 2_000, "descriptor limit {limit} too low for the test");
    let header_timeout = 3.0;
    let root = root_with_files();
    let port = common::free_port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_vodlab"))
        .args(["serve", "--root", root.path().to_str().unwrap()])
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .args(["--header-timeout", &header_timeout.to_string()])
        .args(["--max-connections", &(n / 40).to_string()])
        .args(["--stats-interval", "0", "--threads", "2"])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let t = Instant::now();
    while TcpStream::connect(addr).is_err() {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "vodlab serve did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let result = std::panic::catch_unwind(|| {
        // dribblers opened so far: the benign client starts once the flood has
        let flooding = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let begun = flooding.clone();
        // a benign client all the while: new connections, each must be served
        let benign = std::thread::spawn(move || {
            let mut served = 0;
            let mut worst = Duration::ZERO;
            let mut missed: Option<String> = None;
            common::wait_until("the flood begun", Duration::from_secs(150), || {
                begun.load(std::sync::atomic::Ordering::Relaxed) >= 100
            });
            for _ in 0..BENIGN {
                let t = Instant::now();
                let e = exchange(
                    addr,
                    b"GET /t1/00000.m4s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                );
                if statuses(&e) == [200] && e.responses[0].body.len() == 1000 {
                    served += 1;
                } else if missed.is_none() {
                    // what the first unserved request got, for the failure message
                    missed = Some(format!(
                        "statuses {:?}, closed {}, {} bytes in",
                        statuses(&e),
                        e.closed,
                        e.text.len()
                    ));
                }
                worst = worst.max(t.elapsed());
                std::thread::sleep(Duration::from_millis(250));
            }
            (served, worst, missed)
        });
        let mut dribblers: Vec<(TcpStream, Instant)> = Vec::with_capacity(n);
        let t_open = Instant::now();
        for _ in 0..n {
            let mut c = TcpStream::connect(addr).unwrap();
            let _ = c.write_all(b"GET /v.mp4 HTTP/1.1\r\nHost: x\r\nX-a: ");
            c.set_nonblocking(true).unwrap();
            dribblers.push((c, Instant::now()));
            flooding.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            // a bound on the load loop, not a figure under test: opening
            // 10,000 at the cap took 50 s on a 2-core CI machine (and over
            // 60 s once, with the suite's other sockets in TIME_WAIT)
            assert!(
                t_open.elapsed() < Duration::from_secs(150),
                "opening dribblers"
            );
        }
        let opened = t_open.elapsed();
        // dribble one byte every 500 ms until every deadline has passed (plus slack)
        let until = Instant::now() + Duration::from_secs_f64(header_timeout + 2.0);
        let mut rounds = 0;
        while Instant::now() < until && rounds < 100 {
            for (c, _) in dribblers.iter_mut() {
                let _ = c.write(b"a");
            }
            rounds += 1;
            std::thread::sleep(Duration::from_millis(500));
        }
        let (served, worst, missed) = benign.join().unwrap();
        let open: Vec<usize> = dribblers
            .iter_mut()
            .enumerate()
            .filter_map(|(i, (c, _))| (!closed_by_peer(c)).then_some(i))
            .collect();
        let st = stats_at(addr);
        (n, opened, served, worst, missed, open, st)
    });
    // SAFETY: signalling the child we started, by its PID
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    let _ = child.wait();
    let (n, opened, served, worst, missed, open, st) = match result {
        Ok(r) => r,
        Err(p) => std::panic::resume_unwind(p),
    };
    eprintln!(
        "{n} dribblers opened in {opened:?}; benign served {served}/{BENIGN} (worst {worst:?}); \
         still open {}; shed {}, header timeouts {}, refused {}",
        open.len(),
        st["shed"],
        st["header_timeouts"],
        st["refused_at_cap"]
    );
    assert_eq!(
        served, BENIGN,
        "the benign client was starved (first miss: {missed:?})"
    );
    // while 10,000 connects flood the accept queue a benign SYN may be dropped
    // and retried (1 s, then 3 s): bounded, never starved
    assert!(
        worst < Duration::from_secs(5),
        "benign request took {worst:?}"
    );
    assert!(
        open.is_empty(),
        "{} dribblers outlived the header deadline (first: {:?})",
        open.len(),
        open.first()
    );
    let closed = st["shed"].as_u64().unwrap() + st["header_timeouts"].as_u64().unwrap();
    assert!(closed >= n as u64, "{st}");
    assert!(
        st["shed"].as_u64().unwrap() >= 1,
        "the cap was reached: {st}"
    );
}

#[test]
fn a_stalled_reader_is_closed_but_a_paced_reader_is_not() {
    let root = root_with_files();
    let s = Running::start(root.path(), |c| {
        c.send_timeout = Duration::from_secs(1);
        c.io = IoMode::Vanilla;
    });
    let addr = s.addr;
    // stalled: asks for 64 MiB and reads nothing
    let mut stalled = TcpStream::connect(addr).unwrap();
    stalled
        .write_all(b"GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    // paced: 8 MiB at about 1.6 MB/s through a 64 KiB receive buffer, so the
    // transfer lasts several send timeouts while always making progress
    let paced = std::thread::spawn(move || {
        let mut c = TcpStream::connect(addr).unwrap();
        let sz: libc::c_int = 64 << 10;
        // SAFETY: an open socket and a live option value
        unsafe {
            libc::setsockopt(
                c.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVBUF,
                (&sz as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            );
        }
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        c.write_all(b"GET /paced.bin HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .unwrap();
        let t = Instant::now();
        let mut total = 0usize;
        let mut b = vec![0u8; 32 << 10];
        while t.elapsed() < Duration::from_secs(30) {
            match c.read(&mut b) {
                Ok(0) | Err(_) => break,
                Ok(k) => total += k,
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        (total, t.elapsed())
    });
    let (total, took) = paced.join().unwrap();
    assert!(total > 8 << 20, "the paced reader got everything: {total}");
    assert!(
        took > Duration::from_secs(2),
        "the paced transfer outlasted the send timeout: {took:?}"
    );
    // the stalled reader was closed after 1 s without progress
    let t = Instant::now();
    while s.stats()["send_timeouts"].as_u64() != Some(1) {
        assert!(t.elapsed() < Duration::from_secs(5), "{}", s.stats());
        std::thread::sleep(Duration::from_millis(100));
    }
    stalled
        .set_read_timeout(Some(Duration::from_secs(3)))
        .unwrap();
    let mut got = 0usize;
    let mut b = vec![0u8; 1 << 16];
    let ended = loop {
        match stalled.read(&mut b) {
            Ok(0) => break true,
            Ok(k) => got += k,
            Err(e) if e.kind() == ErrorKind::ConnectionReset => break true,
            Err(_) => break false,
        }
    };
    assert!(ended && got < 64 << 20, "stalled reader cut: {got} bytes");
    assert_eq!(
        s.stats()["send_timeouts"].as_u64(),
        Some(1),
        "only the stalled one"
    );
}

#[test]
fn a_fifo_in_the_root_is_refused_without_stalling_others() {
    let root = root_with_files();
    let fifo = root.path().join("fifo.mp4");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a live NUL-terminated path
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    for io in [IoMode::Asap, IoMode::Vanilla] {
        let s = Running::start(root.path(), |c| c.io = io);
        let addr = s.addr;
        // more FIFO requests than the server has worker threads
        let fifos: Vec<_> = (0..4)
            .map(|_| {
                std::thread::spawn(move || {
                    let t = Instant::now();
                    let e = exchange(
                        addr,
                        b"GET /fifo.mp4 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                    );
                    (statuses(&e), t.elapsed())
                })
            })
            .collect();
        let t = Instant::now();
        let e = exchange(
            addr,
            b"GET /v.mp4 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        );
        assert_eq!(statuses(&e), [200], "{io:?}");
        assert_eq!(e.responses[0].body.len(), 10_000);
        assert!(
            t.elapsed() < Duration::from_secs(2),
            "{io:?}: {:?}",
            t.elapsed()
        );
        for f in fifos {
            let (st, took) = f.join().unwrap();
            assert_eq!(st, [403], "{io:?}");
            assert!(took < Duration::from_secs(2), "{io:?}: {took:?}");
        }
    }
}

#[test]
fn connections_during_shutdown_are_refused_not_hung() {
    let root = root_with_files();
    let mut s = Running::start(root.path(), |_| {});
    let addr = s.addr;
    let read_all = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let done = read_all.clone();
    let (in_flight, started) = std::sync::mpsc::channel();
    // a response in flight keeps the server in its grace period
    let reader = std::thread::spawn(move || {
        let mut c = TcpStream::connect(addr).unwrap();
        c.write_all(b"GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut b = vec![0u8; 1 << 16];
        // the response has begun
        let mut total = c.read(&mut b).unwrap_or(0);
        let _ = in_flight.send(());
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(60) {
            if t.elapsed() < Duration::from_millis(1500) {
                std::thread::sleep(Duration::from_millis(50));
            }
            match c.read(&mut b) {
                Ok(0) | Err(_) => break,
                Ok(n) => total += n,
            }
        }
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        total
    });
    // a new client once shutdown has begun (the listener gone), the
    // response still in flight
    let probe = std::thread::spawn(move || {
        common::wait_until("shutdown begun", Duration::from_secs(10), || {
            !common::listening(addr.port())
        });
        let t = Instant::now();
        let r = TcpStream::connect_timeout(&addr, Duration::from_secs(2));
        let during_grace = !read_all.load(std::sync::atomic::Ordering::Relaxed);
        (
            r.map(|_| ()).map_err(|e| e.kind()),
            t.elapsed(),
            during_grace,
        )
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
    let (r, took, during_grace) = probe.join().unwrap();
    assert!(
        during_grace,
        "the probe came after the response in flight ended"
    );
    assert_eq!(r, Err(ErrorKind::ConnectionRefused), "during the grace");
    assert!(took < Duration::from_millis(500), "{took:?}");
    assert!(
        reader.join().unwrap() > 64 << 20,
        "the response in flight completed"
    );
}

#[test]
fn at_the_cap_an_idle_connection_is_shed_and_a_busy_one_is_not() {
    let root = root_with_files();
    let s = Running::start(root.path(), |c| c.max_connections = 1);
    // an idle keep-alive connection holds the only slot: a new client sheds it
    let mut idle = TcpStream::connect(s.addr).unwrap();
    idle.write_all(b"GET /small.txt HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut b = [0u8; 4096];
    idle.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    assert!(idle.read(&mut b).unwrap() > 0);
    let e = exchange(s.addr, NEXT.as_bytes());
    assert_eq!(statuses(&e), [200], "{}", e.text);
    assert!(
        matches!(idle.read(&mut b), Ok(0) | Err(_)),
        "the idle one was shed"
    );
    // a connection busy with a response (a reader that does not read) is not shed: 503 instead
    let mut busy = TcpStream::connect(s.addr).unwrap();
    busy.write_all(b"GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    // busy once its response has begun (a first read; then it reads no more)
    busy.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    assert!(busy.read(&mut b).unwrap() > 0, "the busy response began");
    let e = exchange(s.addr, NEXT.as_bytes());
    assert_eq!(statuses(&e), [503], "{}", e.text);
    assert_eq!(e.responses[0].header("retry-after"), Some("1"));
    drop(busy);
    // the slot comes back once the busy connection ends
    let t = Instant::now();
    loop {
        let e = exchange(s.addr, NEXT.as_bytes());
        if statuses(&e) == [200] {
            break;
        }
        assert!(t.elapsed() < Duration::from_secs(5), "{}", e.text);
        std::thread::sleep(Duration::from_millis(100));
    }
    // (with one slot, the stats request may meet the last connection still closing)
    let t = Instant::now();
    let st = loop {
        let e = exchange(
            s.addr,
            b"GET /vodlab/stats HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        );
        if statuses(&e) == [200] {
            break serde_json::from_slice::<serde_json::Value>(&e.responses[0].body).unwrap();
        }
        assert!(t.elapsed() < Duration::from_secs(5), "{}", e.text);
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(st["shed"].as_u64().unwrap() >= 1, "{st}");
    assert!(st["refused_at_cap"].as_u64().unwrap() >= 1, "{st}");
}

/// Sends a GET for `bytes=0-(len-1)` of `path` on a keep-alive connection
/// and reads the 206's body whole, `pause` after every read of at most
/// `chunk` bytes; returns the body's length.
fn get_range(c: &mut TcpStream, path: &str, len: usize, chunk: usize, pause: Duration) -> usize {
    // one write: `write!` makes several, and Nagle would hold the second
    // for the server's delayed ACK (40 ms a request)
    let req = format!(
        "GET {path} HTTP/1.1\r\nHost: x\r\nRange: bytes=0-{}\r\n\r\n",
        len - 1
    );
    c.write_all(req.as_bytes()).unwrap();
    let mut got = Vec::new();
    let mut b = vec![0u8; chunk];
    let head_end = loop {
        let k = c.read(&mut b).unwrap();
        assert!(k > 0, "closed before the head");
        got.extend_from_slice(&b[..k]);
        if let Some(i) = got.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
    };
    let head = String::from_utf8_lossy(&got[..head_end]).to_string();
    assert!(head.starts_with("HTTP/1.1 206"), "{head}");
    let mut body = got.len() - head_end;
    while body < len {
        std::thread::sleep(pause);
        let k = c.read(&mut b[..chunk.min(len - body)]).unwrap();
        assert!(k > 0, "closed mid-body at {body}");
        body += k;
    }
    body
}

/// The low-water mark follows the reader (docs/serve.md, "Kernel memory per
/// slow reader"): a reader held to 16 KiB every 20 ms (under 1 MB/s) never
/// gets it raised, whatever the kernel's delivery-rate sample says of its
/// reopened windows; a loopback reader that keeps up does; and when that
/// reader then stops reading, what the server has queued for it in the
/// kernel (what its `sendfile` calls accepted, less what waits in the
/// client's receive queue) is bounded by `notsent_lowat_max`, not by the
/// 4 MiB send buffer a socket without a mark fills.
#[test]
fn the_low_water_mark_is_raised_for_a_fast_reader_only_and_still_bounds_a_stall() {
    let root = root_with_files();
    let s = Running::start(root.path(), |c| {
        c.send_timeout = Duration::from_secs(30);
    });
    let defaults = vodlab_server::Config::default();
    let (floor, max) = (defaults.notsent_lowat, defaults.notsent_lowat_max);
    assert!(max > floor, "defaults: a mark that can be raised");
    let raised = |s: &Running| s.stats()["lowat_raised"].as_u64().unwrap();
    // slow: a 16 KiB receive buffer, 16 KiB read every 20 ms
    let slow = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    slow.set_recv_buffer_size(16 << 10).unwrap();
    slow.connect(&s.addr.into()).unwrap();
    let mut slow: TcpStream = slow.into();
    slow.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    for _ in 0..3 {
        let n = get_range(
            &mut slow,
            "/paced.bin",
            128 << 10,
            16 << 10,
            Duration::from_millis(20),
        );
        assert_eq!(n, 128 << 10);
    }
    assert_eq!(
        raised(&s),
        0,
        "a reader under 1 MB/s keeps the floor: {}",
        s.stats()
    );
    // fast: eight 4 MiB ranges read as they come (4 MiB, so that the
    // transfer and not this debug build's time per request sets the rate
    // the server sees between responses)
    let mut fast = TcpStream::connect(s.addr).unwrap();
    fast.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    for _ in 0..8 {
        let n = get_range(&mut fast, "/paced.bin", 4 << 20, 1 << 20, Duration::ZERO);
        assert_eq!(n, 4 << 20);
    }
    let r = raised(&s);
    // the first response has no rate yet
    assert!(
        (1..=7).contains(&r),
        "a loopback reader gets a raised mark: {r}"
    );
    // the fast reader stops reading in the middle of 64 MiB; before, every
    // body byte so far must be counted (the counter moves after a
    // `sendfile` returns, which can be after the client read the last byte)
    let b0 = (3 * (128 << 10) + 8 * (4 << 20)) as u64;
    wait_until(
        "every body byte so far counted",
        Duration::from_secs(5),
        || s.stats()["bytes"].as_u64().unwrap() == b0,
    );
    fast.write_all(b"GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    // stalled: the server's byte count unchanged for 500 ms (no event says
    // the kernel stopped taking bytes; this quiet time is the real-time part)
    let mut seen = (u64::MAX, Instant::now());
    wait_until(
        "the server to stop sending to the stalled reader",
        Duration::from_secs(10),
        || {
            let b = s.stats()["bytes"].as_u64().unwrap();
            if b != seen.0 {
                seen = (b, Instant::now());
            }
            seen.1.elapsed() >= Duration::from_millis(500)
        },
    );
    let b1 = seen.0;
    let mut queued: libc::c_int = 0;
    // SAFETY: FIONREAD writes one int
    let rc = unsafe { libc::ioctl(fast.as_raw_fd(), libc::FIONREAD, &mut queued) };
    assert_eq!(rc, 0);
    let accepted = b1 - b0;
    let pinned = accepted.saturating_sub(queued as u64);
    println!("stalled after a raised mark: accepted {accepted}, in the client's queue {queued}, server side {pinned}");
    assert!(
        accepted > queued as u64,
        "the server holds unsent bytes: {accepted} vs {queued}"
    );
    // the mark, plus what one `sendfile` step may write past it (a 64 KiB
    // segment), with room to spare
    assert!(
        pinned <= max + (128 << 10),
        "a stalled fast reader pins at most notsent_lowat_max: {pinned} > {max}"
    );
}
