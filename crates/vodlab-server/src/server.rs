//! The server: accept loop, connection loop, responses with a sendfile fast
//! path, vanilla and ASAP I/O, statistics, access log, graceful shutdown.
//!
//! Own connection loop over `httparse` rather than hyper: hyper writes bodies
//! from user-space buffers, and the point of this server is `sendfile(2)`
//! straight from the page cache (and knowing, per request, whether that
//! page-cache read will block).

use std::fs::File;
use std::io::{self, Write};
use std::net::SocketAddr;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::Serialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt, Interest};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Semaphore};

use crate::prefetch::{
    prefetch_range, DeviceStats, Fixed, Helpers, PrefetchPolicy, PrefetchRequest, Prober,
};
use crate::range::{self, Resolved};
use crate::request::{content_type, inside_root, resolve_target};
use vodlab_http::server::{parse_head, Head, Reject, MAX_HEAD};

/// How file data reaches the socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum IoMode {
    /// sendfile, each call on the blocking thread pool (it may read the disk).
    Vanilla,
    /// probe the page cache; on a miss prefetch serially per device first.
    Asap,
}

/// Server settings.
#[derive(Debug, Clone)]
pub struct Config {
    /// Directory served.
    pub root: PathBuf,
    /// I/O mode.
    pub io: IoMode,
    /// Prefetch size for ASAP (fixed policy).
    pub prefetch: u64,
    /// Prefetch helper threads per device.
    pub helpers_per_device: usize,
    /// Longest wait for a complete request head.
    pub header_timeout: Duration,
    /// Longest idle time between requests on a persistent connection.
    pub idle_timeout: Duration,
    /// Most simultaneous connections.
    pub max_connections: usize,
    /// How long shutdown waits for responses in flight.
    pub grace: Duration,
    /// Access log file.
    pub access_log: Option<PathBuf>,
    /// Seconds between statistics log lines on stderr (0 = none).
    pub stats_interval: Duration,
}

impl Config {
    /// Defaults for a root.
    pub fn new(root: PathBuf) -> Self {
        Self {
            root,
            io: IoMode::Asap,
            prefetch: 4 << 20,
            helpers_per_device: 1,
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            max_connections: 10_000,
            grace: Duration::from_secs(30),
            access_log: None,
            stats_interval: Duration::from_secs(10),
        }
    }
}

/// Counters (lock-free).
#[derive(Debug, Default)]
pub struct Counters {
    /// Requests answered.
    pub requests: AtomicU64,
    /// Body bytes sent.
    pub bytes: AtomicU64,
    /// Connections accepted.
    pub connections: AtomicU64,
    /// Connections open now.
    pub open: AtomicU64,
    /// Probes that found the range in the page cache.
    pub probe_hits: AtomicU64,
    /// Probes that did not.
    pub probe_misses: AtomicU64,
    /// Misses on ranges this server had prefetched (evicted before use).
    pub prefetch_evictions: AtomicU64,
    /// Sum of prefetch-to-eviction times, µs.
    pub eviction_time_us: AtomicU64,
    /// Prefetched bytes no request of the connection used before it closed.
    pub wasted_prefetch_bytes: AtomicU64,
    /// Requests refused with 4xx/5xx.
    pub errors: AtomicU64,
    /// Clients that went away mid-response.
    pub aborted: AtomicU64,
    /// Connections closed for a slow or missing request head.
    pub header_timeouts: AtomicU64,
}

/// The JSON of `GET /vodlab/stats`.
#[derive(Debug, Clone, Serialize)]
pub struct StatsView {
    /// I/O mode.
    pub io: IoMode,
    /// Prefetch size, bytes.
    pub prefetch_bytes: u64,
    /// Seconds since start.
    pub uptime_s: f64,
    /// Requests answered.
    pub requests: u64,
    /// Body bytes sent.
    pub bytes: u64,
    /// Mean bytes per second since start.
    pub throughput_bytes_per_s: f64,
    /// Connections accepted / open now.
    pub connections: u64,
    /// Open now.
    pub open_connections: u64,
    /// Page-cache probe hits.
    pub probe_hits: u64,
    /// Page-cache probe misses.
    pub probe_misses: u64,
    /// Probes answered by preadv2 because cachestat(2) was not allowed.
    pub probe_fallbacks: u64,
    /// Prefetched ranges evicted before they were sent.
    pub prefetch_evictions: u64,
    /// Mean time from prefetch to eviction, ms.
    pub mean_prefetch_to_eviction_ms: f64,
    /// Prefetched bytes never requested before the connection closed.
    pub wasted_prefetch_bytes: u64,
    /// Error responses.
    pub errors: u64,
    /// Responses cut by the client.
    pub aborted: u64,
    /// Slow or missing heads.
    pub header_timeouts: u64,
    /// Per storage device.
    pub devices: Vec<DeviceStats>,
}

/// Shared server state.
pub struct State {
    cfg: Config,
    canonical_root: PathBuf,
    /// Counters.
    pub counters: Counters,
    helpers: Helpers,
    prober: Prober,
    policy: Box<dyn PrefetchPolicy>,
    started: Instant,
    log: Option<Mutex<io::BufWriter<File>>>,
    root_fd: File,
    no_openat2: std::sync::atomic::AtomicBool,
    date: Mutex<(u64, String)>,
}

impl State {
    /// The Date header value, formatted once per second.
    fn date(&self) -> String {
        let now = SystemTime::now();
        let secs = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let mut d = self.date.lock().expect("lock");
        if d.0 != secs {
            *d = (secs, httpdate::fmt_http_date(now));
        }
        d.1.clone()
    }
}

impl State {
    /// Statistics now.
    pub fn stats(&self) -> StatsView {
        let c = &self.counters;
        let up = self.started.elapsed().as_secs_f64();
        let ev = c.prefetch_evictions.load(Ordering::Relaxed);
        StatsView {
            io: self.cfg.io,
            prefetch_bytes: self.cfg.prefetch,
            uptime_s: up,
            requests: c.requests.load(Ordering::Relaxed),
            bytes: c.bytes.load(Ordering::Relaxed),
            throughput_bytes_per_s: c.bytes.load(Ordering::Relaxed) as f64 / up.max(1e-3),
            connections: c.connections.load(Ordering::Relaxed),
            open_connections: c.open.load(Ordering::Relaxed),
            probe_hits: c.probe_hits.load(Ordering::Relaxed),
            probe_misses: c.probe_misses.load(Ordering::Relaxed),
            probe_fallbacks: self.prober.fallbacks.load(Ordering::Relaxed),
            prefetch_evictions: ev,
            mean_prefetch_to_eviction_ms: if ev > 0 {
                c.eviction_time_us.load(Ordering::Relaxed) as f64 / ev as f64 / 1e3
            } else {
                0.0
            },
            wasted_prefetch_bytes: c.wasted_prefetch_bytes.load(Ordering::Relaxed),
            errors: c.errors.load(Ordering::Relaxed),
            aborted: c.aborted.load(Ordering::Relaxed),
            header_timeouts: c.header_timeouts.load(Ordering::Relaxed),
            devices: self.helpers.stats(),
        }
    }
}

/// A running server.
pub struct Server {
    /// Bound address.
    pub addr: SocketAddr,
    /// Shared state (statistics).
    pub state: Arc<State>,
    shutdown: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Server {
    /// Binds and starts serving.
    pub async fn start(cfg: Config, listen: SocketAddr) -> io::Result<Self> {
        let canonical_root = std::fs::canonicalize(&cfg.root)?;
        let root_fd = File::open(&canonical_root)?;
        if !canonical_root.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::NotADirectory,
                format!("{} is not a directory", cfg.root.display()),
            ));
        }
        let log = match &cfg.access_log {
            Some(p) => Some(Mutex::new(io::BufWriter::new(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(p)?,
            ))),
            None => None,
        };
        let listener = TcpListener::bind(listen).await?;
        let addr = listener.local_addr()?;
        let state = Arc::new(State {
            helpers: Helpers::new(cfg.helpers_per_device),
            prober: Prober::default(),
            policy: Box::new(Fixed(cfg.prefetch)),
            canonical_root,
            counters: Counters::default(),
            started: Instant::now(),
            log,
            root_fd,
            no_openat2: Default::default(),
            date: Mutex::new((0, String::new())),
            cfg,
        });
        let (tx, rx) = watch::channel(false);
        let task = tokio::spawn(accept_loop(listener, state.clone(), rx));
        Ok(Self {
            addr,
            state,
            shutdown: tx,
            task,
        })
    }

    /// Stops accepting, lets responses in flight finish (up to the grace
    /// period), closes idle connections, and returns.
    pub async fn shutdown(self) {
        let _ = self.shutdown.send(true);
        let _ = self.task.await;
        self.state.helpers.shutdown();
        if let Some(l) = &self.state.log {
            let _ = l.lock().expect("lock").flush();
        }
    }
}

async fn accept_loop(listener: TcpListener, st: Arc<State>, mut stop: watch::Receiver<bool>) {
    let permits = Arc::new(Semaphore::new(st.cfg.max_connections));
    let mut conns = tokio::task::JoinSet::new();
    let mut ticker = tokio::time::interval(if st.cfg.stats_interval.is_zero() {
        Duration::from_secs(3600)
    } else {
        st.cfg.stats_interval
    });
    ticker.tick().await;
    let mut last = (Instant::now(), 0u64);
    loop {
        tokio::select! {
            _ = stop.changed() => break,
            _ = ticker.tick(), if !st.cfg.stats_interval.is_zero() => {
                let s = st.stats();
                let dt = last.0.elapsed().as_secs_f64().max(1e-3);
                eprintln!(
                    "vodlab serve: {} req, {:.1} MB/s, {} open, probe {}/{} hit, {} evictions",
                    s.requests, (s.bytes - last.1) as f64 / dt / 1048576.0, s.open_connections,
                    s.probe_hits, s.probe_hits + s.probe_misses, s.prefetch_evictions
                );
                last = (Instant::now(), s.bytes);
                if let Some(l) = &st.log {
                    let _ = l.lock().expect("lock").flush();
                }
            }
            permit = permits.clone().acquire_owned() => {
                let permit = permit.expect("semaphore open");
                let accepted = tokio::select! {
                    r = listener.accept() => r,
                    _ = stop.changed() => break,
                };
                match accepted {
                    Ok((sock, peer)) => {
                        let _ = sock.set_nodelay(true);
                        let id = st.counters.connections.fetch_add(1, Ordering::Relaxed) + 1;
                        let st2 = st.clone();
                        let stop2 = stop.clone();
                        conns.spawn(async move {
                            st2.counters.open.fetch_add(1, Ordering::Relaxed);
                            connection(sock, peer, id, &st2, stop2).await;
                            st2.counters.open.fetch_sub(1, Ordering::Relaxed);
                            drop(permit);
                        });
                    }
                    Err(e) => {
                        // EMFILE and friends: back off instead of spinning
                        eprintln!("vodlab serve: accept: {e}");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                }
            }
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
    // graceful: connections see the stop flag between requests; wait for them
    let deadline = tokio::time::sleep(st.cfg.grace);
    tokio::pin!(deadline);
    loop {
        tokio::select! {
            r = conns.join_next() => if r.is_none() { break },
            _ = &mut deadline => { conns.abort_all(); while conns.join_next().await.is_some() {} break; }
        }
    }
}

/// Prefetched ranges of one connection, for eviction and waste accounting.
#[derive(Default)]
struct Prefetched {
    /// (file key, start, end exclusive, when, bytes of it requested)
    ranges: Vec<(u64, u64, u64, Instant, u64)>,
}

async fn connection(
    mut sock: TcpStream,
    _peer: SocketAddr,
    id: u64,
    st: &State,
    stop: watch::Receiver<bool>,
) {
    let mut buf: Vec<u8> = Vec::with_capacity(4096);
    let mut pf = Prefetched::default();
    let mut first = true;
    loop {
        if *stop.borrow() {
            break;
        }
        // wait for a request: the idle timeout until its first byte, then the header timeout
        let head = loop {
            match parse_head(&buf) {
                Ok(Some(h)) => break Ok(h),
                Ok(None) => {}
                Err(r) => break Err(r),
            }
            let limit = if buf.is_empty() && !first {
                st.cfg.idle_timeout
            } else {
                st.cfg.header_timeout
            };
            let mut tmp = [0u8; 4096];
            let mut stop2 = stop.clone();
            let read = tokio::select! {
                r = tokio::time::timeout(limit, sock.read(&mut tmp)) => r,
                _ = stop2.changed(), if buf.is_empty() => { finish(&mut pf, st); return; }
            };
            match read {
                Ok(Ok(0)) | Ok(Err(_)) => {
                    finish(&mut pf, st);
                    return;
                }
                Ok(Ok(n)) => buf.extend_from_slice(&tmp[..n]),
                Err(_) => {
                    if !buf.is_empty() || first {
                        st.counters.header_timeouts.fetch_add(1, Ordering::Relaxed);
                    }
                    finish(&mut pf, st);
                    return;
                }
            }
            if buf.len() > MAX_HEAD + 4096 {
                break Err(Reject::TooLarge);
            }
        };
        first = false;
        let head = match head {
            Ok(h) => h,
            Err(r) => {
                let (code, text) = match r {
                    Reject::BadRequest => (400, "Bad Request"),
                    Reject::TooLarge => (431, "Request Header Fields Too Large"),
                    Reject::Version => (505, "HTTP Version Not Supported"),
                };
                let _ = simple(&mut sock, code, text, false, None).await;
                st.counters.errors.fetch_add(1, Ordering::Relaxed);
                break;
            }
        };
        buf.drain(..head.len);
        let t0 = Instant::now();
        let keep = head.keep_alive() && !*stop.borrow();
        let outcome = respond(&mut sock, &head, keep, id, st, &mut pf).await;
        st.counters.requests.fetch_add(1, Ordering::Relaxed);
        log_line(st, id, &head, &outcome, t0.elapsed());
        match outcome.result {
            Ok(()) if keep && outcome.keep => {}
            Ok(()) => break,
            Err(_) => {
                st.counters.aborted.fetch_add(1, Ordering::Relaxed);
                break;
            }
        }
    }
    let _ = sock.shutdown().await;
    finish(&mut pf, st);
}

fn finish(pf: &mut Prefetched, st: &State) {
    let wasted: u64 = pf
        .ranges
        .drain(..)
        .map(|(_, a, b, _, used)| (b - a).saturating_sub(used))
        .sum();
    st.counters
        .wasted_prefetch_bytes
        .fetch_add(wasted, Ordering::Relaxed);
}

struct Outcome {
    status: u16,
    offset: u64,
    len: u64,
    sent: u64,
    cache: &'static str,
    keep: bool,
    result: io::Result<()>,
}

impl Outcome {
    fn new(status: u16) -> Self {
        Self {
            status,
            offset: 0,
            len: 0,
            sent: 0,
            cache: "-",
            keep: true,
            result: Ok(()),
        }
    }
}

async fn simple(
    sock: &mut TcpStream,
    code: u16,
    text: &str,
    keep: bool,
    extra: Option<&str>,
) -> io::Result<()> {
    let body = format!("{code} {text}\n");
    let head = format!(
        "HTTP/1.1 {code} {text}\r\nServer: vodlab\r\nDate: {}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\n{}{}\r\n",
        httpdate::fmt_http_date(SystemTime::now()),
        body.len(),
        extra.unwrap_or(""),
        if keep { "" } else { "Connection: close\r\n" }
    );
    sock.write_all(head.as_bytes()).await?;
    sock.write_all(body.as_bytes()).await
}

fn etag(meta: &std::fs::Metadata) -> String {
    let mtime = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_secs());
    format!("\"{:x}-{:x}\"", meta.len(), mtime)
}

async fn respond(
    sock: &mut TcpStream,
    head: &Head,
    keep: bool,
    conn: u64,
    st: &State,
    pf: &mut Prefetched,
) -> Outcome {
    let is_head = head.method == "HEAD";
    if head.method != "GET" && !is_head {
        let mut o = Outcome::new(405);
        st.counters.errors.fetch_add(1, Ordering::Relaxed);
        o.result = simple(
            sock,
            405,
            "Method Not Allowed",
            keep,
            Some("Allow: GET, HEAD\r\n"),
        )
        .await;
        return o;
    }
    if head.header("content-length").is_some_and(|v| v != "0")
        || head.header("transfer-encoding").is_some()
    {
        let mut o = Outcome::new(413);
        o.keep = false;
        st.counters.errors.fetch_add(1, Ordering::Relaxed);
        o.result = simple(sock, 413, "Content Too Large", false, None).await;
        return o;
    }
    if head.target == "/vodlab/stats" {
        let body = serde_json::to_string_pretty(&st.stats()).expect("stats serialize") + "\n";
        let mut o = Outcome::new(200);
        let h = format!(
            "HTTP/1.1 200 OK\r\nServer: vodlab\r\nContent-Type: application/json\r\nContent-Length: {}\r\nCache-Control: no-store\r\n{}\r\n",
            body.len(),
            if keep { "" } else { "Connection: close\r\n" }
        );
        o.result = async {
            sock.write_all(h.as_bytes()).await?;
            if !is_head {
                sock.write_all(body.as_bytes()).await?;
            }
            Ok(())
        }
        .await;
        return o;
    }
    let not_found = |o: &mut Outcome| {
        o.status = 404;
        st.counters.errors.fetch_add(1, Ordering::Relaxed);
    };
    let Some(path) = resolve_target(&st.cfg.root, &head.target) else {
        let mut o = Outcome::new(400);
        st.counters.errors.fetch_add(1, Ordering::Relaxed);
        o.result = simple(sock, 400, "Bad Request", keep, None).await;
        return o;
    };
    let file = match open_beneath(st, &path) {
        Some(f) => f,
        None => {
            let mut o = Outcome::new(404);
            not_found(&mut o);
            o.result = simple(sock, 404, "Not Found", keep, None).await;
            return o;
        }
    };
    let meta = match file.metadata() {
        Ok(m) if m.is_file() => m,
        _ => {
            let mut o = Outcome::new(404);
            not_found(&mut o);
            o.result = simple(sock, 404, "Not Found", keep, None).await;
            return o;
        }
    };
    let size = meta.len();
    let tag = etag(&meta);
    let modified = meta.modified().ok();
    let last_modified = modified.map(httpdate::fmt_http_date).unwrap_or_default();
    // If-Range: the range applies only when the validator matches (strong ETag or exact date)
    let range_ok = match head.header("if-range") {
        None => true,
        Some(v) if v.starts_with('"') => v == tag,
        Some(v) => match (httpdate::parse_http_date(v), modified) {
            (Ok(d), Some(m)) => {
                let secs = |t: SystemTime| t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
                secs(d) == secs(m)
            }
            _ => false,
        },
    };
    let resolved = match head
        .header("range")
        .filter(|_| range_ok)
        .and_then(range::parse)
    {
        Some(specs) => range::resolve(&specs, size),
        None => Resolved::Full,
    };
    let ctype = content_type(&path);
    let common = format!(
        "Server: vodlab\r\nDate: {}\r\nLast-Modified: {last_modified}\r\nETag: {tag}\r\nAccept-Ranges: bytes\r\n{}",
        st.date(),
        if keep { "" } else { "Connection: close\r\n" }
    );
    let file = Arc::new(file);
    let key = file_key(&meta);
    match resolved {
        Resolved::Unsatisfiable => {
            let mut o = Outcome::new(416);
            st.counters.errors.fetch_add(1, Ordering::Relaxed);
            let h = format!("HTTP/1.1 416 Range Not Satisfiable\r\n{common}Content-Range: bytes */{size}\r\nContent-Length: 0\r\n\r\n");
            o.result = sock.write_all(h.as_bytes()).await;
            o
        }
        Resolved::Full | Resolved::Single(..) => {
            let (status, a, len, extra) = match resolved {
                Resolved::Single(a, b) => (
                    206,
                    a,
                    b - a + 1,
                    format!("Content-Range: bytes {a}-{b}/{size}\r\n"),
                ),
                _ => (200, 0, size, String::new()),
            };
            let text = if status == 206 {
                "Partial Content"
            } else {
                "OK"
            };
            let h = format!("HTTP/1.1 {status} {text}\r\n{common}Content-Type: {ctype}\r\nContent-Length: {len}\r\n{extra}\r\n");
            let mut o = Outcome::new(status);
            o.offset = a;
            o.len = len;
            o.result = async {
                if is_head {
                    return sock.write_all(h.as_bytes()).await;
                }
                // the header goes out with the first body bytes (MSG_MORE), as nginx's TCP_NOPUSH does
                write_more(sock, h.as_bytes()).await?;
                {
                    o.cache = prepare(st, &file, key, a, len, size, pf).await;
                    send_file(sock, st, &file, a, len).await?;
                    o.sent = len;
                }
                Ok(())
            }
            .await;
            o
        }
        Resolved::Multi(ranges) => {
            let boundary = format!("vodlab{:016x}", key ^ conn.rotate_left(32));
            let part_head = |a: u64, b: u64| {
                format!("--{boundary}\r\nContent-Type: {ctype}\r\nContent-Range: bytes {a}-{b}/{size}\r\n\r\n")
            };
            let closing = format!("--{boundary}--\r\n");
            let total: u64 = ranges
                .iter()
                .map(|&(a, b)| part_head(a, b).len() as u64 + (b - a + 1) + 2)
                .sum::<u64>()
                + closing.len() as u64;
            let h = format!("HTTP/1.1 206 Partial Content\r\n{common}Content-Type: multipart/byteranges; boundary={boundary}\r\nContent-Length: {total}\r\n\r\n");
            let mut o = Outcome::new(206);
            o.offset = ranges[0].0;
            o.len = ranges.iter().map(|(a, b)| b - a + 1).sum();
            o.result = async {
                sock.write_all(h.as_bytes()).await?;
                if is_head {
                    return Ok(());
                }
                for &(a, b) in &ranges {
                    sock.write_all(part_head(a, b).as_bytes()).await?;
                    o.cache = prepare(st, &file, key, a, b - a + 1, size, pf).await;
                    send_file(sock, st, &file, a, b - a + 1).await?;
                    sock.write_all(b"\r\n").await?;
                    o.sent += b - a + 1;
                }
                sock.write_all(closing.as_bytes()).await
            }
            .await;
            o
        }
    }
}

fn file_key(meta: &std::fs::Metadata) -> u64 {
    use std::os::unix::fs::MetadataExt;
    meta.dev().rotate_left(32) ^ meta.ino()
}

/// Opens `path` (under the root) so that neither `..` nor a symlink can
/// leave the root: openat2(RESOLVE_BENEATH) relative to the root directory,
/// one syscall; where the kernel lacks it, open and check the canonical path.
fn open_beneath(st: &State, path: &Path) -> Option<File> {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::io::FromRawFd;
    if !st.no_openat2.load(Ordering::Relaxed) {
        let rel = path.strip_prefix(&st.cfg.root).ok()?;
        let c = std::ffi::CString::new(rel.as_os_str().as_bytes()).ok()?;
        #[repr(C)]
        struct OpenHow {
            flags: u64,
            mode: u64,
            resolve: u64,
        }
        let how = OpenHow {
            flags: (libc::O_RDONLY | libc::O_CLOEXEC) as u64,
            mode: 0,
            resolve: libc::RESOLVE_BENEATH | libc::RESOLVE_NO_MAGICLINKS,
        };
        // SAFETY: openat2 reads the path and `how`, both live; on success we own the fd
        let fd = unsafe {
            libc::syscall(
                libc::SYS_openat2,
                st.root_fd.as_raw_fd(),
                c.as_ptr(),
                &how as *const OpenHow,
                std::mem::size_of::<OpenHow>(),
            )
        };
        if fd >= 0 {
            // SAFETY: a fresh descriptor owned by nobody else
            return Some(unsafe { File::from_raw_fd(fd as i32) });
        }
        let err = io::Error::last_os_error().raw_os_error();
        if err != Some(libc::ENOSYS) && err != Some(libc::EPERM) {
            return None; // ENOENT, EXDEV (escape attempt), ELOOP ...
        }
        st.no_openat2.store(true, Ordering::Relaxed);
    }
    let f = File::open(path).ok()?;
    inside_root(&st.canonical_root, path).then_some(f)
}

/// In ASAP mode: probe, and on a miss prefetch through the device's helper.
/// Returns "hit", "miss" or "-" (vanilla).
async fn prepare(
    st: &State,
    file: &Arc<File>,
    key: u64,
    a: u64,
    len: u64,
    size: u64,
    pf: &mut Prefetched,
) -> &'static str {
    if st.cfg.io != IoMode::Asap {
        return "-";
    }
    // account requested bytes against this connection's prefetches
    let end = a + len;
    let mut earlier: Option<Instant> = None;
    for r in pf.ranges.iter_mut().filter(|r| r.0 == key) {
        let overlap = end.min(r.2).saturating_sub(a.max(r.1));
        if overlap > 0 {
            r.4 += overlap;
            earlier = Some(r.3);
        }
    }
    if st.prober.resident(file, a, len) {
        st.counters.probe_hits.fetch_add(1, Ordering::Relaxed);
        return "hit";
    }
    st.counters.probe_misses.fetch_add(1, Ordering::Relaxed);
    if let Some(t) = earlier {
        st.counters
            .prefetch_evictions
            .fetch_add(1, Ordering::Relaxed);
        st.counters
            .eviction_time_us
            .fetch_add(t.elapsed().as_micros() as u64, Ordering::Relaxed);
    }
    let req = PrefetchRequest {
        offset: a,
        len,
        file_size: size,
    };
    let (off, n) = prefetch_range(st.policy.as_ref(), &req);
    let _ = st.helpers.prefetch(file.clone(), off, n).await;
    pf.ranges
        .retain(|r| r.3.elapsed() < Duration::from_secs(600));
    if pf.ranges.len() > 64 {
        let old = pf.ranges.remove(0);
        st.counters
            .wasted_prefetch_bytes
            .fetch_add((old.2 - old.1).saturating_sub(old.4), Ordering::Relaxed);
    }
    pf.ranges
        .push((key, off, off + n, Instant::now(), len.min(n)));
    "miss"
}

/// sendfile(2) from the file to the socket. Vanilla runs every call on the
/// blocking pool (the page-cache read may wait for the disk); ASAP calls it
/// inline, because the range was probed or prefetched.
async fn send_file(
    sock: &mut TcpStream,
    st: &State,
    file: &Arc<File>,
    mut off: u64,
    len: u64,
) -> io::Result<()> {
    let end = off + len;
    let sfd = sock.as_raw_fd();
    while off < end {
        sock.writable().await?;
        let n = ((end - off) as usize).min(1 << 20);
        let res = if st.cfg.io == IoMode::Vanilla {
            let f = file.clone();
            let start = off;
            let r = tokio::task::spawn_blocking(move || sendfile(sfd, f.as_raw_fd(), start, n))
                .await
                .expect("sendfile task");
            match r {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    // clear the readiness tokio cached, then wait for it again
                    let _ = sock.try_io(Interest::WRITABLE, || {
                        Err::<(), _>(io::Error::from(io::ErrorKind::WouldBlock))
                    });
                    continue;
                }
                r => r,
            }
        } else {
            match sock.try_io(Interest::WRITABLE, || {
                sendfile(sfd, file.as_raw_fd(), off, n)
            }) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                r => r,
            }
        };
        match res {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "file shorter than its size",
                ))
            }
            Ok(k) => {
                off += k as u64;
                st.counters.bytes.fetch_add(k as u64, Ordering::Relaxed);
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Writes `data` with MSG_MORE, so the kernel holds it for the data that follows.
async fn write_more(sock: &mut TcpStream, mut data: &[u8]) -> io::Result<()> {
    let fd = sock.as_raw_fd();
    while !data.is_empty() {
        sock.writable().await?;
        let r = sock.try_io(Interest::WRITABLE, || {
            // SAFETY: a live buffer of the given length on an open socket
            let n = unsafe {
                libc::send(
                    fd,
                    data.as_ptr().cast(),
                    data.len(),
                    libc::MSG_MORE | libc::MSG_NOSIGNAL,
                )
            };
            if n < 0 {
                Err(io::Error::last_os_error())
            } else {
                Ok(n as usize)
            }
        });
        match r {
            Ok(n) => data = &data[n..],
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

fn sendfile(out: i32, inp: i32, off: u64, n: usize) -> io::Result<usize> {
    let mut o = off as libc::off_t;
    // SAFETY: both descriptors are open for the duration of the call; `o` is a live local
    let r = unsafe { libc::sendfile(out, inp, &mut o, n) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}

fn log_line(st: &State, conn: u64, head: &Head, o: &Outcome, took: Duration) {
    let Some(log) = &st.log else { return };
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    let session = head
        .header("x-vodlab-session")
        .filter(|s| !s.is_empty() && !s.contains(char::is_whitespace))
        .map_or_else(|| format!("c{conn}"), str::to_string);
    let path = head.target.split('?').next().unwrap_or("");
    let line = format!(
        "{now:.6} {conn} {session} {path} {} {} {} {} {} {}\n",
        o.offset,
        o.len,
        o.status,
        o.sent,
        took.as_micros(),
        o.cache
    );
    let _ = log.lock().expect("lock").write_all(line.as_bytes());
}
