//! A ground-truth HTTP/1.1 and HTTP/2 (h2c, prior knowledge) server for
//! tests: every response is scripted
//! by the test ([`Behaviour`], per path), the bytes are the workload's
//! verifiable content (`vodlab_workload::content`) unless told otherwise,
//! and the server writes down what it did with each request ([`Served`]:
//! when it arrived, when the head and the last byte went, how many body
//! bytes, how it ended). A test runs `vodlab run` against it and asserts
//! that every figure vodlab prints equals what the server did.
//!
//! Not a product server and not fast; it exists so that the figures of
//! `results.json` and `requests.csv` have something exact to be checked
//! against. Tokio timers make its delays exact to about a millisecond on
//! an idle machine; tests allow for scheduling noise, never for a
//! different behaviour.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use vodlab_http::server::parse_head;
use vodlab_workload::content;

mod h2c;

/// What the server does with a request for one path. The default is a
/// correct, immediate answer: 206 for a range, 200 for the whole file.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Behaviour {
    /// Answer with this status instead (with a short text body, as a
    /// server's error page).
    pub status: Option<u16>,
    /// Wait this long before the response head.
    pub head_delay: Duration,
    /// After this many body bytes, wait (offset, pause).
    pub pause_at: Option<(u64, Duration)>,
    /// The body byte at this offset (from the start of the body) is wrong.
    pub wrong_byte_at: Option<u64>,
    /// After this many body bytes, close the connection (FIN).
    pub close_after: Option<u64>,
    /// After this many body bytes, reset the connection (RST).
    pub reset_after: Option<u64>,
    /// After this many body bytes, send nothing more and keep the
    /// connection open (a server that hangs).
    pub stall_after: Option<u64>,
    /// Send the body at this many bytes per second (in 10 ms slices).
    pub rate: Option<u64>,
    /// Send `100 Continue` before the real head (HTTP/1.1 only).
    pub informational_first: bool,
    /// Send the head, then close (no body at all).
    pub close_after_head: bool,
    /// Extra response header fields (name, value), on every answer to the
    /// path, e.g. a scripted `CMSD-Dynamic`.
    pub headers: Vec<(String, String)>,
}

/// What the server did with one request.
#[derive(Debug, Clone, PartialEq)]
pub struct Served {
    /// Request path (without the query).
    pub path: String,
    /// Request target as sent: the path and its query.
    pub target: String,
    /// First byte of the range asked for (0 without a range).
    pub range_start: u64,
    /// Connection number (accept order, from 0).
    pub conn: u64,
    /// When the request head was complete.
    pub arrived: Instant,
    /// When the final response head was written (`None`: never).
    pub head_at: Option<Instant>,
    /// When the last byte it sent was written.
    pub done_at: Option<Instant>,
    /// Body bytes written.
    pub body_bytes: u64,
    /// Status of the final head.
    pub status: u16,
    /// The CMCD the request carried (headers and query), as `vodlab serve`
    /// reads it.
    pub cmcd: vodlab_cmcd::Cmcd,
}

/// A running ground-truth server; it stops when dropped.
pub struct GroundTruthServer {
    /// Address it listens on.
    pub addr: SocketAddr,
    /// Everything it served, in arrival order.
    pub served: Arc<Mutex<Vec<Served>>>,
    /// When it started (the test's time origin).
    pub started: Instant,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for GroundTruthServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// What the server holds and how it behaves.
#[derive(Debug, Clone, Default)]
pub struct Site {
    /// Seed of the synthetic content (the workload's, so that
    /// `--check-bytes` accepts it).
    pub seed: u64,
    /// Paths (with the leading `/`) of synthetic files, and their sizes.
    pub files: HashMap<String, u64>,
    /// Paths of files with fixed bytes (manifests, playlists).
    pub texts: HashMap<String, Vec<u8>>,
    /// Paths that do not answer normally. A key `*SUFFIX` scripts every
    /// path that ends with `SUFFIX` and has no exact entry.
    pub behaviours: HashMap<String, Behaviour>,
}

impl Site {
    fn behaviour(&self, path: &str) -> Behaviour {
        self.behaviours
            .get(path)
            .or_else(|| {
                self.behaviours
                    .iter()
                    .find(|(k, _)| k.strip_prefix('*').is_some_and(|sfx| path.ends_with(sfx)))
                    .map(|(_, b)| b)
            })
            .cloned()
            .unwrap_or_default()
    }

    /// The size of a path and the bytes of `len` of it from `at`.
    fn size(&self, path: &str) -> Option<u64> {
        self.files
            .get(path)
            .copied()
            .or_else(|| self.texts.get(path).map(|t| t.len() as u64))
    }

    fn fill(&self, path: &str, at: u64, buf: &mut [u8]) {
        match self.texts.get(path) {
            Some(t) => buf.copy_from_slice(&t[at as usize..at as usize + buf.len()]),
            None => content::fill(self.seed, content::file_key(path), at, buf),
        }
    }
}

impl GroundTruthServer {
    /// Starts on 127.0.0.1 with an ephemeral port, serving `site`; paths
    /// it does not hold answer 404.
    pub async fn start(site: Site) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let served = Arc::new(Mutex::new(Vec::new()));
        let setup = Arc::new(site);
        let log = served.clone();
        let task = tokio::spawn(async move {
            let mut n = 0u64;
            while let Ok((sock, _)) = listener.accept().await {
                let (setup, log) = (setup.clone(), log.clone());
                let conn = n;
                n += 1;
                tokio::spawn(async move {
                    let _ = serve_conn(sock, conn, setup, log).await;
                });
            }
        });
        Ok(Self {
            addr,
            served,
            started: Instant::now(),
            task,
        })
    }

    /// A copy of what it served so far.
    pub fn served(&self) -> Vec<Served> {
        self.served
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

const H2_PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

fn record(log: &Mutex<Vec<Served>>, s: Served) -> usize {
    let mut l = log.lock().unwrap_or_else(|e| e.into_inner());
    l.push(s);
    l.len() - 1
}

fn update(log: &Mutex<Vec<Served>>, i: usize, f: impl FnOnce(&mut Served)) {
    let mut l = log.lock().unwrap_or_else(|e| e.into_inner());
    f(&mut l[i]);
}

/// The status, the first byte and the body length of the answer to a
/// request for a file of `size` (`None`: not held) with a Range header.
fn plan(b: &Behaviour, size: Option<u64>, range: Option<&str>) -> (u16, u64, u64) {
    match (b.status, size) {
        (Some(s), _) => (s, 0, 0),
        (None, None) => (404, 0, 0),
        (None, Some(size)) => match range {
            Some(r) => match parse_range(r, size) {
                Some((a, z)) => (206, a, z - a + 1),
                None => (416, 0, 0),
            },
            None => (200, 0, size),
        },
    }
}

/// What to do next with a response body: the behaviour's decisions in
/// order, without I/O or a clock, so that the HTTP/1.1 and HTTP/2
/// executors do exactly the same thing and the order is tested on values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// Send up to `len` body bytes from offset `at` (of the body), then
    /// [`Body::advance`] by what went.
    Send { at: u64, len: u64 },
    /// Wait this long (a scripted pause, or the gap between paced slices).
    Wait(Duration),
    /// End the response here, short or not (HTTP/1.1: FIN; HTTP/2:
    /// END_STREAM).
    Close,
    /// Reset (HTTP/1.1: RST; HTTP/2: RST_STREAM).
    Reset,
    /// Send nothing more, until the client goes away.
    Stall,
    /// The whole body is sent.
    Done,
}

/// A response body's progress under a [`Behaviour`].
struct Body<'b> {
    b: &'b Behaviour,
    len: u64,
    sent: u64,
    /// Bytes per send: 10 ms of `rate`, else 64 KiB.
    slice: u64,
    paused: bool,
    /// A paced slice went out: the next step is the 10 ms gap.
    gap_due: bool,
}

impl<'b> Body<'b> {
    fn new(b: &'b Behaviour, len: u64) -> Self {
        Body {
            b,
            len,
            sent: 0,
            slice: b.rate.map_or(64 * 1024, |r| (r / 100).max(1)),
            paused: false,
            gap_due: false,
        }
    }

    /// The next step.
    fn next(&mut self) -> Step {
        let (b, sent) = (self.b, self.sent);
        if std::mem::take(&mut self.gap_due) {
            return Step::Wait(Duration::from_millis(10));
        }
        if let Some((at, pause)) = b.pause_at {
            if at == sent && !self.paused {
                self.paused = true;
                return Step::Wait(pause);
            }
        }
        if b.close_after == Some(sent) {
            return Step::Close;
        }
        if b.reset_after == Some(sent) {
            return Step::Reset;
        }
        if b.stall_after == Some(sent) {
            return Step::Stall;
        }
        if sent >= self.len {
            return Step::Done;
        }
        // up to the next offset where a behaviour acts
        let stop = [
            b.pause_at.map(|p| p.0),
            b.close_after,
            b.reset_after,
            b.stall_after,
        ]
        .into_iter()
        .flatten()
        .filter(|&at| at > sent)
        .fold(self.len, u64::min);
        Step::Send {
            at: sent,
            len: (stop - sent).min(self.slice),
        }
    }

    /// True once every body byte went.
    fn done(&self) -> bool {
        self.sent >= self.len
    }

    /// `n` bytes of the [`Step::Send`] went.
    fn advance(&mut self, n: u64) {
        self.sent += n;
        self.gap_due = self.b.rate.is_some() && self.sent < self.len;
    }

    /// Damages `data`, the body from offset `at`, where the behaviour says.
    fn corrupt(&self, at: u64, data: &mut [u8]) {
        if let Some(w) = self.b.wrong_byte_at {
            if (at..at + data.len() as u64).contains(&w) {
                data[(w - at) as usize] ^= 0xff;
            }
        }
    }
}

/// `bytes=A-B` or `bytes=A-`, clamped to the file.
fn parse_range(v: &str, size: u64) -> Option<(u64, u64)> {
    let spec = v.trim().strip_prefix("bytes=")?;
    let (a, b) = spec.split_once('-')?;
    let a: u64 = a.trim().parse().ok()?;
    let b: u64 = match b.trim() {
        "" => size.checked_sub(1)?,
        b => b.parse::<u64>().ok()?.min(size.checked_sub(1)?),
    };
    (a <= b).then_some((a, b))
}

async fn serve_conn(
    mut sock: TcpStream,
    conn: u64,
    setup: Arc<Site>,
    log: Arc<Mutex<Vec<Served>>>,
) -> std::io::Result<()> {
    sock.set_nodelay(true)?;
    // HTTP/2 with prior knowledge (h2c) starts with the connection preface
    let mut preface = [0u8; 24];
    let mut seen = 0;
    while seen < preface.len() {
        let n = sock.peek(&mut preface).await?;
        if n == 0 || n == seen || !H2_PREFACE.starts_with(&preface[..n]) {
            break;
        }
        seen = n;
    }
    if preface == *H2_PREFACE {
        return h2c::serve(sock, conn, setup, log).await;
    }
    let (setup, log): (&Site, &Mutex<Vec<Served>>) = (&setup, &log);
    let mut buf = Vec::with_capacity(4096);
    loop {
        // read one request head (the codec's parser, as `vodlab serve`)
        let head = loop {
            match parse_head(&buf) {
                Ok(Some(h)) => break h,
                Ok(None) => {}
                Err(e) => return Err(std::io::Error::other(format!("{e:?}"))),
            }
            let mut chunk = [0u8; 4096];
            let n = sock.read(&mut chunk).await?;
            if n == 0 {
                return Ok(());
            }
            buf.extend_from_slice(&chunk[..n]);
        };
        buf.drain(..head.len);
        let arrived = Instant::now();
        let path = head.target.split('?').next().unwrap_or("").to_string();
        let range_hdr = head.header("range").map(str::to_string);
        let b = setup.behaviour(&path);
        let size = setup.size(&path);
        let (status, start, len) = plan(&b, size, range_hdr.as_deref());
        let cmcd = vodlab_cmcd::Cmcd::from_request(&head.target, |n| head.header(n));
        let i = record(
            log,
            Served {
                path: path.clone(),
                target: head.target.clone(),
                range_start: start,
                conn,
                arrived,
                head_at: None,
                done_at: None,
                body_bytes: 0,
                status,
                cmcd,
            },
        );
        if !b.head_delay.is_zero() {
            tokio::time::sleep(b.head_delay).await;
        }
        if b.informational_first {
            sock.write_all(b"HTTP/1.1 100 Continue\r\n\r\n").await?;
        }
        let page = format!("status {status}\n");
        let body_len = if matches!(status, 200 | 206) {
            len
        } else {
            page.len() as u64
        };
        let mut h = format!("HTTP/1.1 {status} X\r\nContent-Length: {body_len}\r\n");
        if status == 206 {
            let total = size.unwrap_or(0);
            h.push_str(&format!(
                "Content-Range: bytes {start}-{}/{total}\r\n",
                start + len - 1
            ));
        }
        for (n, v) in &b.headers {
            h.push_str(&format!("{n}: {v}\r\n"));
        }
        h.push_str("\r\n");
        sock.write_all(h.as_bytes()).await?;
        let now = Instant::now();
        update(log, i, |s| {
            s.head_at = Some(now);
            s.done_at = Some(now);
        });
        if b.close_after_head {
            sock.shutdown().await?;
            return Ok(());
        }
        if !matches!(status, 200 | 206) {
            sock.write_all(page.as_bytes()).await?;
            let now = Instant::now();
            update(log, i, |s| {
                s.done_at = Some(now);
                s.body_bytes = body_len;
            });
            continue;
        }
        let mut body = Body::new(&b, len);
        let mut data = Vec::new();
        loop {
            match body.next() {
                Step::Send { at, len: n } => {
                    data.resize(n as usize, 0);
                    setup.fill(&path, start + at, &mut data);
                    body.corrupt(at, &mut data);
                    sock.write_all(&data).await?;
                    body.advance(n);
                    let now = Instant::now();
                    update(log, i, |s| {
                        s.done_at = Some(now);
                        s.body_bytes = at + n;
                    });
                }
                Step::Wait(d) => tokio::time::sleep(d).await,
                Step::Close => {
                    sock.shutdown().await?;
                    return Ok(());
                }
                Step::Reset => {
                    // a zero linger never blocks: close sends RST at once
                    #[allow(deprecated)]
                    sock.set_linger(Some(Duration::ZERO))?;
                    return Ok(());
                }
                Step::Stall => {
                    // hang until the client gives up and closes
                    let mut sink = [0u8; 1024];
                    while sock.read(&mut sink).await? > 0 {}
                    return Ok(());
                }
                Step::Done => break,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{parse_range, Behaviour, Body, Step};
    use std::time::Duration;

    /// The steps of a body sent at most `max` bytes at a time.
    fn steps(b: &Behaviour, len: u64, max: u64) -> Vec<Step> {
        let mut body = Body::new(b, len);
        let mut out = Vec::new();
        loop {
            let mut s = body.next();
            if let Step::Send { at, len } = s {
                s = Step::Send {
                    at,
                    len: len.min(max),
                };
                body.advance(len.min(max));
            }
            out.push(s);
            if matches!(s, Step::Done | Step::Close | Step::Reset | Step::Stall) {
                return out;
            }
        }
    }

    #[test]
    fn a_body_stops_where_its_behaviour_acts() {
        let d = Behaviour::default;
        let send = |at, len| Step::Send { at, len };
        assert_eq!(
            steps(&d(), 100_000, u64::MAX),
            vec![send(0, 65_536), send(65_536, 34_464), Step::Done]
        );
        let pause = Behaviour {
            pause_at: Some((40_000, Duration::from_millis(300))),
            ..d()
        };
        assert_eq!(
            steps(&pause, 100_000, u64::MAX),
            vec![
                send(0, 40_000),
                Step::Wait(Duration::from_millis(300)),
                send(40_000, 60_000),
                Step::Done
            ]
        );
        let close = Behaviour {
            close_after: Some(50_000),
            ..d()
        };
        assert_eq!(
            steps(&close, 100_000, u64::MAX),
            vec![send(0, 50_000), Step::Close]
        );
        let at_end = Behaviour {
            close_after: Some(10),
            ..d()
        };
        assert_eq!(steps(&at_end, 10, u64::MAX), vec![send(0, 10), Step::Close]);
        let reset = Behaviour {
            reset_after: Some(0),
            ..d()
        };
        assert_eq!(steps(&reset, 10, u64::MAX), vec![Step::Reset]);
        let stall = Behaviour {
            stall_after: Some(4),
            ..d()
        };
        assert_eq!(
            steps(&stall, 10, 3),
            vec![send(0, 3), send(3, 1), Step::Stall]
        );
        // 200 kB/s: 2,000-byte slices 10 ms apart, no gap after the last
        let rate = Behaviour {
            rate: Some(200_000),
            ..d()
        };
        let s = steps(&rate, 5_000, u64::MAX);
        let gap = Step::Wait(Duration::from_millis(10));
        assert_eq!(
            s,
            vec![
                send(0, 2_000),
                gap,
                send(2_000, 2_000),
                gap,
                send(4_000, 1_000),
                Step::Done
            ]
        );
    }

    #[test]
    fn the_wrong_byte_is_the_one_scripted() {
        let b = Behaviour {
            wrong_byte_at: Some(5),
            ..Behaviour::default()
        };
        let body = Body::new(&b, 10);
        let mut d = [0u8; 4];
        body.corrupt(0, &mut d);
        assert_eq!(d, [0; 4]);
        body.corrupt(4, &mut d);
        assert_eq!(d, [0, 0xff, 0, 0]);
    }

    #[test]
    fn ranges_clamp_to_the_file() {
        assert_eq!(parse_range("bytes=0-99", 1000), Some((0, 99)));
        assert_eq!(parse_range("bytes=900-", 1000), Some((900, 999)));
        assert_eq!(parse_range("bytes=900-5000", 1000), Some((900, 999)));
        assert_eq!(parse_range("bytes=1000-", 1000), None);
        assert_eq!(parse_range("items=0-1", 1000), None);
    }
}
