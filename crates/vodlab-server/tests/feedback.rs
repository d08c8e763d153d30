//! The server feeds its prefetch controller: a recording controller over a
//! real socket sees the request, the helper's timed read, and ticks.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::io::AsRawFd;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use vodlab_prefetch::controller::{
    ChainState, PrefetchController, PrefetchDecision, RequestInfo, SessionState,
};
use vodlab_server::{Config, Server};

#[derive(Debug, Clone, PartialEq)]
enum Call {
    Request {
        session: String,
        offset: u64,
        length: u64,
        file_size: u64,
        bitrate_bps: Option<u64>,
        resident: bool,
        chain: bool,
    },
    Read(u64),
    Evicted(u64),
    Tick,
}

struct Recorder(Arc<Mutex<Vec<Call>>>);

impl PrefetchController for Recorder {
    fn on_request(
        &mut self,
        _now: Instant,
        req: &RequestInfo<'_>,
        _session: &mut SessionState,
        chain: Option<&mut ChainState>,
    ) -> PrefetchDecision {
        self.0.lock().unwrap().push(Call::Request {
            session: req.session.to_string(),
            offset: req.offset,
            length: req.length,
            file_size: req.file_size,
            bitrate_bps: req.bitrate_bps,
            resident: req.resident,
            chain: chain.is_some(),
        });
        if req.resident {
            PrefetchDecision::None
        } else {
            PrefetchDecision::Prefetch {
                offset: req.offset,
                len: 1 << 20,
            }
        }
    }
    fn on_read_complete(&mut self, _now: Instant, bytes: u64, duration: Duration) {
        assert!(duration > Duration::ZERO);
        self.0.lock().unwrap().push(Call::Read(bytes));
    }
    fn on_evicted(&mut self, _now: Instant, bytes: u64, _unused_for: Duration) {
        self.0.lock().unwrap().push(Call::Evicted(bytes));
    }
    fn on_tick(&mut self, _now: Instant) {
        self.0.lock().unwrap().push(Call::Tick);
    }
}

fn get(addr: std::net::SocketAddr, req: &str) -> String {
    let mut c = TcpStream::connect(addr).unwrap();
    c.write_all(req.as_bytes()).unwrap();
    let mut out = Vec::new();
    c.read_to_end(&mut out).unwrap();
    String::from_utf8_lossy(&out[..out.len().min(200)]).to_string()
}

fn drop_cache(path: &std::path::Path) {
    let f = std::fs::File::open(path).unwrap();
    f.sync_all().unwrap(); // DONTNEED drops clean pages only
                           // SAFETY: advisory call on an open descriptor
    unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_feeds_its_controller() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    std::fs::create_dir(dir.path().join("t1")).unwrap();
    let file = dir.path().join("t1").join("00000.m4s");
    std::fs::write(&file, vec![3u8; 3 << 20]).unwrap();
    drop_cache(&file);
    let calls = Arc::new(Mutex::new(Vec::new()));
    let cfg = Config {
        tick: Duration::from_millis(20),
        stats_interval: Duration::ZERO,
        ..Config::new(dir.path().to_path_buf())
    };
    let server = Server::start_with_controller(
        cfg,
        "127.0.0.1:0".parse().unwrap(),
        Box::new(Recorder(calls.clone())),
    )
    .await
    .unwrap();
    let addr = server.addr;
    let resp = tokio::task::spawn_blocking(move || {
        let a = get(addr, "GET /t1/00000.m4s HTTP/1.1\r\nHost: x\r\nRange: bytes=0-524287\r\nX-Vodlab-Session: 42\r\nCMCD-Object: br=3200\r\nConnection: close\r\n\r\n");
        // the prefetch brought the next range in: a hit
        let b = get(addr, "GET /t1/00000.m4s HTTP/1.1\r\nHost: x\r\nRange: bytes=524288-1048575\r\nConnection: close\r\n\r\n");
        (a, b)
    })
    .await
    .unwrap();
    assert!(resp.0.starts_with("HTTP/1.1 206"), "{}", resp.0);
    assert!(resp.1.starts_with("HTTP/1.1 206"), "{}", resp.1);
    // both connections closed (their sessions ended, the waste counted) and
    // the controller ticked twice (every 20 ms): polled, bounded, not a
    // guessed time
    let t0 = Instant::now();
    while server.state.stats().open_connections > 0
        || calls
            .lock()
            .unwrap()
            .iter()
            .filter(|c| **c == Call::Tick)
            .count()
            < 2
    {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "connections still open or fewer than 2 ticks: {:?}",
            calls.lock().unwrap()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let stats = server.state.stats();
    server.shutdown().await;
    let calls = calls.lock().unwrap().clone();
    let work: Vec<&Call> = calls.iter().filter(|c| **c != Call::Tick).collect();
    assert_eq!(
        work,
        [
            &Call::Request {
                session: "42".into(),
                offset: 0,
                length: 524_288,
                file_size: 3 << 20,
                bitrate_bps: Some(3_200_000),
                resident: false,
                chain: true,
            },
            &Call::Read(1 << 20),
            &Call::Request {
                session: "c2".into(),
                offset: 524_288,
                length: 524_288,
                file_size: 3 << 20,
                bitrate_bps: None,
                resident: true,
                chain: true,
            },
        ]
    );
    assert!(
        calls.iter().filter(|c| **c == Call::Tick).count() >= 2,
        "{calls:?}"
    );
    assert_eq!((stats.probe_hits, stats.probe_misses), (1, 1));
    // the first connection's prefetch: 1 MiB, 512 KiB requested by it
    assert_eq!(stats.wasted_prefetch_bytes, 512 << 10);
}

/// Reads one response with a Content-Length body; returns its status.
fn read_response(c: &mut TcpStream) -> u16 {
    let mut buf = Vec::new();
    let mut b = [0u8; 65536];
    loop {
        let n = c.read(&mut b).unwrap();
        assert!(n > 0, "closed early");
        buf.extend_from_slice(&b[..n]);
        let mut h = [httparse::EMPTY_HEADER; 32];
        let mut r = httparse::Response::new(&mut h);
        if let httparse::Status::Complete(len) = r.parse(&buf).unwrap() {
            let cl: usize = r
                .headers
                .iter()
                .find(|h| h.name.eq_ignore_ascii_case("content-length"))
                .map(|h| std::str::from_utf8(h.value).unwrap().parse().unwrap())
                .unwrap();
            let code = r.code.unwrap();
            while buf.len() < len + cl {
                let n = c.read(&mut b).unwrap();
                assert!(n > 0, "closed early");
                buf.extend_from_slice(&b[..n]);
            }
            return code;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_miss_on_a_prefetched_range_is_reported_as_an_eviction() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let file = dir.path().join("v.mp4");
    std::fs::write(&file, vec![5u8; 3 << 20]).unwrap();
    drop_cache(&file);
    let calls = Arc::new(Mutex::new(Vec::new()));
    let cfg = Config {
        stats_interval: Duration::ZERO,
        ..Config::new(dir.path().to_path_buf())
    };
    let server = Server::start_with_controller(
        cfg,
        "127.0.0.1:0".parse().unwrap(),
        Box::new(Recorder(calls.clone())),
    )
    .await
    .unwrap();
    let addr = server.addr;
    let f2 = file.clone();
    tokio::task::spawn_blocking(move || {
        let mut c = TcpStream::connect(addr).unwrap();
        c.write_all(b"GET /v.mp4 HTTP/1.1\r\nHost: x\r\nRange: bytes=0-4095\r\n\r\n")
            .unwrap();
        assert_eq!(read_response(&mut c), 206);
        // the kernel drops what the server prefetched; the session asks for it
        drop_cache(&f2);
        c.write_all(b"GET /v.mp4 HTTP/1.1\r\nHost: x\r\nRange: bytes=8192-16383\r\n\r\n")
            .unwrap();
        assert_eq!(read_response(&mut c), 206);
    })
    .await
    .unwrap();
    let stats = server.state.stats();
    server.shutdown().await;
    let calls = calls.lock().unwrap().clone();
    let work: Vec<&Call> = calls.iter().filter(|c| **c != Call::Tick).collect();
    assert_eq!(work.len(), 5, "{work:?}");
    assert_eq!(work[1], &Call::Read(1 << 20));
    assert_eq!(work[2], &Call::Evicted(8192), "{work:?}");
    assert!(
        matches!(
            work[3],
            Call::Request {
                offset: 8192,
                resident: false,
                chain: false,
                ..
            }
        ),
        "{work:?}"
    );
    assert_eq!(stats.prefetch_evictions, 1);
}
