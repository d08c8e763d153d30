//! `vodlab serve --io asap` against prefetch abuse (issue "Hostile clients,
//! hostile servers, hostile files"): clients asking for big uncached files
//! and hanging up must not make the helper read for nobody, and an
//! open-ended range (`Range: bytes=0-`, what a `<video>` element sends) on
//! an uncached file must start before its whole prefetch is read. Files are
//! written to the real disk (not tmpfs) and dropped from the page cache.

mod common;

use std::fs;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::os::unix::io::AsRawFd;
use std::path::Path;
use std::time::{Duration, Instant};

use common::Running;

/// This binary's tests one at a time: each judges the prefetch helper by its
/// device reads and the page cache, which another test's cold reads and
/// hung-up clients running beside it disturb (one CI run saw the second
/// range of `a_short_range_completes_with_its_read_ahead` miss). This
/// machine's kernel also pages out memory DAMON finds idle (docs/disk.md),
/// which can drop a just-read page at a 5 s aggregation boundary: each
/// test's requests follow each other within milliseconds to make that rare.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
use vodlab_server::server::StatsView;

/// What each test reads back from its server.
trait Stats {
    fn stats(&self) -> StatsView;
}

impl Stats for Running {
    fn stats(&self) -> StatsView {
        self.server().state.stats()
    }
}

/// Writes a file and drops it from the page cache.
fn cold_file(path: &Path, len: usize) {
    fs::write(path, vec![0x5au8; len]).unwrap();
    cool(path);
}

fn cool(path: &Path) {
    // DONTNEED drops clean pages only
    fs::File::open(path).unwrap().sync_all().unwrap();
    drop_cached_from(path, 0);
}

fn helper_bytes(s: &StatsView) -> u64 {
    s.devices.iter().map(|d| d.bytes).sum()
}

/// Drops the (clean) page-cache pages of `path` from `from` on; past a
/// prefetch, so a range there surely misses (the kernel's own read-ahead
/// may have added them).
fn drop_cached_from(path: &Path, from: i64) {
    let f = fs::File::open(path).unwrap();
    // SAFETY: advisory call on an open descriptor
    unsafe { libc::posix_fadvise(f.as_raw_fd(), from, 0, libc::POSIX_FADV_DONTNEED) };
}

/// Asks for `bytes=a-b` on `c` and reads the 206 response; returns its body.
fn get_range(c: &mut TcpStream, path: &str, a: u64, b: u64) -> Vec<u8> {
    write!(
        c,
        "GET {path} HTTP/1.1\r\nHost: x\r\nRange: bytes={a}-{b}\r\n\r\n"
    )
    .unwrap();
    let want = (b - a + 1) as usize;
    let mut buf = Vec::new();
    let mut tmp = [0u8; 65536];
    loop {
        let n = c.read(&mut tmp).unwrap();
        assert!(n > 0, "connection closed");
        buf.extend_from_slice(&tmp[..n]);
        if let Some(h) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            assert!(buf.starts_with(b"HTTP/1.1 206"));
            if buf.len() - h - 4 == want {
                return buf.split_off(h + 4);
            }
        }
    }
}

/// Four clients ask for uncached 32 MiB files and hang up at once: their
/// prefetches are dropped from the queue or stopped at the next piece, so
/// the helper reads a few MiB instead of 128 (before: every byte of every
/// file, for nobody), and a victim asking for an uncached file right after
/// them is served without waiting behind their reads (the probe:
/// its time to first byte went from 2 to 201 ms). The victim is judged by
/// what the helper had read when its response was complete, not by a
/// clock: less than one abandoned prefetch (16 MiB) besides its own file.
#[test]
fn clients_hanging_up_cancel_their_prefetches() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    for i in 0..4 {
        cold_file(&dir.path().join(format!("big{i}.mp4")), 32 << 20);
    }
    let victim_len = 1usize << 20;
    cold_file(&dir.path().join("victim.mp4"), victim_len);
    let srv = Running::start(dir.path(), |_| {});
    for i in 0..4 {
        let mut c = TcpStream::connect(srv.addr).unwrap();
        write!(c, "GET /big{i}.mp4 HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        // hang up without reading
        drop(c);
    }
    let (ttfb, resp) = timed(
        srv.addr,
        "GET /victim.mp4 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    let read_for_victim = helper_bytes(&srv.stats());
    assert!(
        resp.starts_with(b"HTTP/1.1 200"),
        "victim: {:?}",
        &resp[..resp.len().min(200)]
    );
    assert!(resp.ends_with(&[0x5a; 64]) && resp.len() > victim_len);
    eprintln!("victim: time to first byte {ttfb:?}, the helper had read {read_for_victim} bytes");
    assert!(
        read_for_victim < (16 << 20) + victim_len as u64,
        "the victim waited while the helper read {read_for_victim} bytes for clients that had gone"
    );
    // wait until every prefetch is accounted for (read, dropped or stopped)
    let deadline = Instant::now() + Duration::from_secs(20);
    let s = loop {
        let s = srv.stats();
        let settled = s.devices.iter().all(|d| d.queue_length == 0)
            && s.aborted + s.requests >= 4
            && s.prefetch_cancelled + s.prefetch_stopped >= 4;
        if settled || Instant::now() > deadline {
            break s;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(s.probe_misses, 5, "files not cooled? {s:?}");
    assert_eq!(
        s.prefetch_cancelled + s.prefetch_stopped,
        4,
        "every prefetch of a client gone is dropped or stopped: {s:?}"
    );
    // a few pieces at most: far below one file (16 MiB per prefetch, 128 MiB asked)
    assert!(
        helper_bytes(&s) < (16 << 20) + victim_len as u64,
        "the helper read {} bytes for clients that had gone: {s:?}",
        helper_bytes(&s)
    );
    // and the server still serves
    let mut c = TcpStream::connect(srv.addr).unwrap();
    c.write_all(
        b"GET /big0.mp4 HTTP/1.1\r\nHost: x\r\nRange: bytes=0-99\r\nConnection: close\r\n\r\n",
    )
    .unwrap();
    let mut out = Vec::new();
    c.read_to_end(&mut out).unwrap();
    assert!(
        out.starts_with(b"HTTP/1.1 206"),
        "{:?}",
        String::from_utf8_lossy(&out)
    );
    assert!(out.ends_with(&[0x5a; 100]));
}

/// `vodlab serve --io asap` as a child process, so that its disk reads are
/// its own (`/proc/PID/io`'s `read_bytes`: bytes it had the block layer
/// read), killed by its PID on drop.
struct Served {
    child: std::process::Child,
    addr: SocketAddr,
    /// The server's executable, held in the page cache: this VM drops
    /// clean pages on its own (DAMON page-out, virtio-mem), and the server
    /// faulting its code back in counted in its `read_bytes` (292 KiB
    /// once in CI, over the 256 KiB this test allows for read-ahead).
    _code: vodlab_testkit::ResidentPin,
}

/// Reads `path` into the page cache and pins it there (a few tries: the
/// machine may drop a page between the read and the pin).
fn pinned_in_cache(path: &Path) -> vodlab_testkit::ResidentPin {
    let len = fs::metadata(path).unwrap().len();
    for _ in 0..5 {
        let _ = fs::read(path).unwrap();
        if let Ok(pin) = vodlab_testkit::pin_resident(path, 0, len) {
            return pin;
        }
    }
    panic!("{} would not stay in the page cache", path.display())
}

impl Served {
    fn start(root: &Path) -> Self {
        let code = pinned_in_cache(Path::new(env!("CARGO_BIN_EXE_vodlab")));
        let port = common::free_port();
        let child = std::process::Command::new(env!("CARGO_BIN_EXE_vodlab"))
            .args(["serve", "--io", "asap", "--root", root.to_str().unwrap()])
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .args(["--stats-interval", "0", "--threads", "2"])
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let served = Self {
            child,
            addr,
            _code: code,
        };
        common::wait_until("vodlab serve listening", Duration::from_secs(10), || {
            common::listening(port)
        });
        served
    }

    /// Bytes the server had read from block devices so far.
    fn disk_read_bytes(&self) -> u64 {
        let io = fs::read_to_string(format!("/proc/{}/io", self.child.id())).unwrap();
        io.lines()
            .find_map(|l| l.strip_prefix("read_bytes: "))
            .expect("read_bytes in /proc/PID/io")
            .trim()
            .parse()
            .unwrap()
    }

    fn stats(&self) -> serde_json::Value {
        let mut c = TcpStream::connect(self.addr).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        c.write_all(b"GET /vodlab/stats HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .unwrap();
        let mut out = Vec::new();
        c.read_to_end(&mut out).unwrap();
        let body = out.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
        serde_json::from_slice(&out[body..]).unwrap()
    }

    /// Waits until `ended` prefetches in all were dropped or stopped for
    /// clients gone (a prefetch read in full for a client gone never
    /// counts: the wait runs out).
    fn wait_ended(&self, ended: u64) {
        let t0 = Instant::now();
        loop {
            let s = self.stats();
            let n =
                s["prefetch_cancelled"].as_u64().unwrap() + s["prefetch_stopped"].as_u64().unwrap();
            assert!(n <= ended, "more prefetches than clients: {s}");
            if n == ended {
                return;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(30),
                "{ended} prefetches of clients gone not all dropped or stopped: {s}"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Hangs up (`hang_up`), waits until `ended` prefetches in all were
    /// dropped or stopped, and returns what the disk read meanwhile.
    fn after_hang_up(&self, ended: u64, hang_up: impl FnOnce()) -> u64 {
        let disk0 = self.disk_read_bytes();
        hang_up();
        self.wait_ended(ended);
        self.disk_read_bytes() - disk0
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn helper_bytes_json(s: &serde_json::Value) -> u64 {
    s["devices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["bytes"].as_u64().unwrap())
        .sum()
}

/// An HTTP/2 frame.
fn h2_frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut f = (payload.len() as u32).to_be_bytes()[1..].to_vec();
    f.extend_from_slice(&[kind, flags]);
    f.extend_from_slice(&stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// An h2c connection's preface and SETTINGS, and a GET of each path on
/// streams 1, 3, 5, ... (HPACK: `:method GET` and `:scheme http` from the
/// static table, `:path` and `:authority` literal, not indexed).
fn h2_gets(paths: &[String]) -> Vec<u8> {
    let mut out = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    out.extend(h2_frame(4, 0, 0, &[]));
    for (i, path) in paths.iter().enumerate() {
        let mut block = vec![0x82, 0x86, 0x04, path.len() as u8];
        block.extend_from_slice(path.as_bytes());
        block.extend_from_slice(&[0x01, 1, b'x']);
        // END_STREAM | END_HEADERS
        out.extend(h2_frame(1, 0x5, 2 * i as u32 + 1, &block));
    }
    out
}

/// Reads frames until the first DATA frame with bytes (acking the
/// server's SETTINGS on the way).
fn h2_until_data(c: &mut TcpStream) {
    loop {
        let mut h = [0u8; 9];
        c.read_exact(&mut h).unwrap();
        let len = u32::from_be_bytes([0, h[0], h[1], h[2]]) as usize;
        let mut p = vec![0u8; len];
        c.read_exact(&mut p).unwrap();
        match (h[3], h[4]) {
            (0, _) if len > 0 => return,
            (4, flags) if flags & 1 == 0 => c.write_all(&h2_frame(4, 1, 0, &[])).unwrap(),
            (7, _) => panic!("GOAWAY: {p:?}"),
            _ => {}
        }
    }
}

/// The probe ("Reliability, round two", item 3) and its variants
/// against a `vodlab serve` child: clients ask for uncached 256 MiB files
/// (four, written for real and dropped from the page cache before each
/// case; 16 MiB prefetches) and leave: right after the request, as their
/// first bytes arrive (one at a time, so that no other prefetch runs after
/// a hang-up), over HTTP/2 by RST_STREAM on an open connection or by
/// closing it. Judged by the server's own disk reads (`/proc/PID/io`):
/// - the helper's `bytes` in the statistics within 256 KiB of the disk's
///   reads in each case (the server's other reads: file metadata);
/// - what the disk read from just before each hang-up until the
///   prefetches it abandoned ended, at most 1 MiB (a piece) per prefetch
///   abandoned, summed over the case;
/// - the probe's own case (hung up right after the request) at most 4 MiB
///   in all. (A case whose clients first take bytes is not bounded in all:
///   a client's own delay between its first byte and its hang-up, on a
///   loaded machine, is time it was there for its prefetch to be read.)
///
/// Before, the helper read through the request's descriptor with the
/// kernel's read-ahead on (8 MiB on this VM's disk), which read on past
/// each piece: the disk read 8 MiB where the helper counted 2.5 for the
/// clients leaving as their first bytes arrived, 3.5 for 1.1 over HTTP/2;
/// and on a loaded machine one of those four clients once had its whole
/// 16 MiB prefetch read. Now the helper reads through a descriptor of its
/// own with read-ahead off and watches the client's socket itself, and a
/// client gone before its prefetch was queued gets none.
#[test]
fn clients_leaving_cost_the_disk_a_piece_at_most() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let paths: Vec<String> = (0..4).map(|i| format!("/big{i}.mp4")).collect();
    for p in &paths {
        cold_file(&dir.path().join(&p[1..]), 256 << 20);
    }
    let srv = Served::start(dir.path());
    let get = |p: &str| format!("GET {p} HTTP/1.1\r\nHost: x\r\n\r\n");
    let connect = || {
        let c = TcpStream::connect(srv.addr).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        // as browsers do: else Nagle may hold the RST_STREAMs back until
        // the server's delayed ACK of the SETTINGS ACK (up to 40 ms)
        c.set_nodelay(true).unwrap();
        c
    };
    // each case: the files cooled, then (disk, helper) marks
    let start = || {
        for p in &paths {
            cool(&dir.path().join(&p[1..]));
        }
        (srv.disk_read_bytes(), helper_bytes_json(&srv.stats()))
    };
    // a case's figures 2 s after its hang-ups (as the probe
    // waited): (case, prefetches it abandoned, disk bytes read after the
    // hang-ups, disk and helper bytes since its start, statistics)
    let mut rows = Vec::new();
    let mut done = |case, abandoned: u64, after: u64, (disk0, helper0): (u64, u64)| {
        std::thread::sleep(Duration::from_secs(2));
        let s = srv.stats();
        let disk = srv.disk_read_bytes() - disk0;
        let helper = helper_bytes_json(&s) - helper0;
        eprintln!(
            "{case}: the disk read {disk} bytes ({after} after the hang-up), the helper counted {helper}"
        );
        rows.push((case, abandoned, after, disk, helper, s));
    };
    let mut ended = 0;

    let marks = start();
    // nothing sent yet: what the disk reads from here is for nobody
    let disk0 = srv.disk_read_bytes();
    for p in &paths {
        connect().write_all(get(p).as_bytes()).unwrap();
    }
    ended += 4;
    srv.wait_ended(ended);
    let after = srv.disk_read_bytes() - disk0;
    done("HTTP/1.1, hung up right after the request", 4, after, marks);

    // one client at a time, so that no other prefetch runs after a hang-up
    let marks = start();
    let mut after = 0;
    for p in &paths {
        let mut c = connect();
        c.write_all(get(p).as_bytes()).unwrap();
        assert_eq!(c.read(&mut [0u8; 1]).unwrap(), 1);
        ended += 1;
        after += srv.after_hang_up(ended, || drop(c));
    }
    done(
        "HTTP/1.1, hung up as the first bytes arrived",
        4,
        after,
        marks,
    );

    // the first stream prefetches; the others, waiting for the connection's
    // session, find their streams reset
    let marks = start();
    let mut c = connect();
    c.write_all(&h2_gets(&paths)).unwrap();
    h2_until_data(&mut c);
    ended += 4;
    let resets: Vec<u8> = (0..4)
        .flat_map(|i| h2_frame(3, 0, 2 * i + 1, &8u32.to_be_bytes())) // CANCEL
        .collect();
    let after = srv.after_hang_up(ended, || c.write_all(&resets).unwrap());
    // open until judged: the resets cancel, not the close
    done(
        "HTTP/2, RST_STREAM as the first DATA arrived",
        4,
        after,
        marks,
    );
    drop(c);

    // the streams still waiting for the session never ask for a read
    let marks = start();
    let mut c = connect();
    c.write_all(&h2_gets(&paths)).unwrap();
    h2_until_data(&mut c);
    ended += 1;
    let after = srv.after_hang_up(ended, || drop(c));
    done(
        "HTTP/2, connection closed as the first DATA arrived",
        1,
        after,
        marks,
    );

    // judged once every case's figures are printed
    srv.wait_ended(ended);
    for (case, abandoned, after, disk, helper, s) in &rows {
        assert_eq!(s["probe_hits"], 0, "{case}: files not cooled? {s}");
        assert!(
            disk.abs_diff(*helper) <= 256 << 10,
            "{case}: the helper counted {helper} bytes, the disk read {disk} (read-ahead on, \
             or a temp dir on tmpfs, where read_bytes counts nothing?): {s}"
        );
        assert!(
            *after <= abandoned << 20,
            "{case}: the disk read {after} bytes for {abandoned} prefetches of clients gone: {s}"
        );
    }
    let (case, _, _, disk, _, _) = &rows[0];
    assert!(*disk <= 4 << 20, "{case}: the disk read {disk} bytes");
}

/// Sends `req`, returns the time to the first byte of the response and the
/// whole response.
fn timed(addr: SocketAddr, req: &str) -> (Duration, Vec<u8>) {
    let mut c = TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let t0 = Instant::now();
    c.write_all(req.as_bytes()).unwrap();
    let mut out = vec![0u8; 1 << 20];
    let n = c.read(&mut out).unwrap();
    let ttfb = t0.elapsed();
    out.truncate(n);
    let mut rest = Vec::new();
    c.read_to_end(&mut rest).unwrap();
    out.extend_from_slice(&rest);
    let _ = c.shutdown(Shutdown::Both);
    (ttfb, out)
}

/// `Range: bytes=0-` on an uncached 48 MiB file with one 48 MiB prefetch:
/// the first bytes leave after the helper's first piece, not after the
/// whole read (before: the time to first byte was the whole prefetch's).
/// Measured against the helper's own time for that read in the same run,
/// so a slow or busy machine scales both.
#[test]
fn an_open_ended_range_starts_before_its_prefetch_is_read() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let len = 48usize << 20;
    cold_file(&dir.path().join("movie.mp4"), len);
    // an open-ended range is prefetched in the policy's size: 48 MiB here
    let srv = Running::start(dir.path(), |c| {
        c.max_prefetch = 48 << 20;
        c.prefetch_policy = vodlab_server::PolicySpec::Fixed(48 << 20);
    });
    let (ttfb, resp) = timed(
        srv.addr,
        "GET /movie.mp4 HTTP/1.1\r\nHost: x\r\nRange: bytes=0-\r\nConnection: close\r\n\r\n",
    );
    let text = String::from_utf8_lossy(&resp[..resp.len().min(300)]).to_string();
    assert!(text.starts_with("HTTP/1.1 206"), "{text}");
    let head = resp.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    assert_eq!(resp.len() - head, len, "the whole file after the head");
    let s = srv.stats();
    assert_eq!(s.probe_misses, 1, "file not cooled? {s:?}");
    let d = &s.devices[0];
    assert_eq!((d.reads, d.bytes), (1, len as u64), "{s:?}");
    let read = Duration::from_secs_f64(d.mean_ms_per_read / 1e3);
    assert!(
        ttfb * 2 < read,
        "time to first byte {ttfb:?}, the whole prefetch took {read:?}"
    );
}

/// A range inside a longer prefetch still completes only when the prefetch
/// has: the client's next request, even on another connection sent the
/// moment the first response is complete, finds the read-ahead in the cache.
#[test]
fn a_short_range_completes_with_its_read_ahead() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    cold_file(&dir.path().join("seg.mp4"), 8 << 20);
    let srv = Running::start(dir.path(), |_| {});
    for (a, b) in [(0, 262_143), (262_144, 4_194_303)] {
        let mut c = TcpStream::connect(srv.addr).unwrap();
        write!(
            c,
            "GET /seg.mp4 HTTP/1.1\r\nHost: x\r\nRange: bytes={a}-{b}\r\n\r\n"
        )
        .unwrap();
        let mut buf = Vec::new();
        let mut tmp = [0u8; 65536];
        let want = b - a + 1;
        loop {
            let n = c.read(&mut tmp).unwrap();
            assert!(n > 0);
            buf.extend_from_slice(&tmp[..n]);
            if let Some(h) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                if buf.len() - h - 4 == want {
                    break;
                }
            }
        }
    }
    let s = srv.stats();
    // the first range missed and read 4 MiB ahead; the second found them
    assert_eq!((s.probe_misses, s.probe_hits), (1, 1), "{s:?}");
    assert_eq!(helper_bytes(&s), 4 << 20);
}

/// A range that reaches past its session's prefetch misses the page cache
/// for its unprefetched tail, not because the prefetch was evicted: no
/// eviction is counted (before: every such range was, 1-3 ms after its
/// prefetch, which also fired `auto`'s eviction jump in an HD run whose
/// 2.5 MB ranges straddle 4 MiB prefetches).
#[test]
fn a_range_past_its_prefetch_is_no_eviction() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    cold_file(&dir.path().join("hd.mp4"), 8 << 20);
    let srv = Running::start(dir.path(), |_| {});
    // one connection, one session: [0, 2.5 MB) then [2.5, 5 MB)
    let mut c = TcpStream::connect(srv.addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    for (a, b) in [(0u64, 2_499_999u64), (2_500_000, 4_999_999)] {
        if a > 0 {
            // past the 4 MiB prefetch: the second range's tail must miss
            drop_cached_from(&dir.path().join("hd.mp4"), 4 << 20);
        }
        get_range(&mut c, "/hd.mp4", a, b);
    }
    let s = srv.stats();
    assert_eq!(
        s.probe_misses, 2,
        "the second range's tail was cached: {s:?}"
    );
    assert_eq!(s.prefetch_evictions, 0, "{s:?}");
}

/// The same session's 2.5 MB ranges of a 6 MiB file against the default
/// 4 MiB prefetch: the second range starts inside the first prefetch, so
/// its resident head is sent at once and its prefetch starts where the
/// first one ended, at 4 MiB: the helper reads each byte of the file once
/// (6 MiB), and the third range is a hit. Before, the second prefetch
/// started at the range's offset and read [2.5 MB, 6 MiB) again from
/// there (7.5 MiB in all): in ch4's HD runs the re-read head, idle in the
/// page cache while the prefetch queued, was often evicted and read from
/// the drive twice (the 4 MiB dip).
#[test]
fn a_range_past_its_prefetch_prefetches_from_where_it_ended() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    cold_file(&dir.path().join("hd.mp4"), 6 << 20);
    let srv = Running::start(dir.path(), |_| {});
    let mut c = TcpStream::connect(srv.addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    for (a, b) in [
        (0u64, 2_499_999u64),
        (2_500_000, 4_999_999),
        (5_000_000, (6 << 20) - 1),
    ] {
        if a == 2_500_000 {
            // past the first 4 MiB prefetch: the second range must miss
            drop_cached_from(&dir.path().join("hd.mp4"), 4 << 20);
        }
        let body = get_range(&mut c, "/hd.mp4", a, b);
        assert!(body.iter().all(|&x| x == 0x5a));
    }
    let s = srv.stats();
    assert_eq!(helper_bytes(&s), 6 << 20, "a byte was read twice: {s:?}");
    assert_eq!(s.probe_misses, 2, "{s:?}");
}
