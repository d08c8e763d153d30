//! HTTP/2 exchanges with the `h2` crate: one connection per group of a
//! session's logical connections, each logical connection a stream at a
//! time; body bytes handed to the same `sink` and `arrived` callbacks as
//! HTTP/1.1's, and the receive window released as they are consumed.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use futures_util::FutureExt;
use h2::client::SendRequest;
use http::{HeaderName, HeaderValue, Method, Request};
use tokio::io::{AsyncRead, AsyncWrite};
use vodlab_http::client::{parse_content_range, USER_AGENT};

use crate::core::exchange::{ErrorKind, Failure, ReadLimits, Response};
use crate::io::http::Outgoing;

/// HTTP/2 settings, named and defaulted as h2load's options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct H2Settings {
    /// Initial stream window, bytes (h2load `-w 30`: 2^30 - 1).
    pub stream_window: u32,
    /// Connection window, bytes (h2load `-W 30`: 2^30 - 1).
    pub connection_window: u32,
    /// Largest DATA frame the client accepts (SETTINGS_MAX_FRAME_SIZE;
    /// h2load's 16 KiB).
    pub max_frame_size: u32,
    /// SETTINGS_MAX_CONCURRENT_STREAMS the client advertises (h2load's 100).
    pub max_concurrent_streams: u32,
    /// Logical connections of a session carried by one HTTP/2 connection
    /// (0: all of them, the default: a session's parallel connections
    /// become streams of one connection).
    pub streams_per_connection: usize,
}

/// Largest flow-control window (RFC 9113 §6.9.1).
pub const MAX_WINDOW: u32 = (1 << 31) - 1;

impl Default for H2Settings {
    fn default() -> Self {
        Self {
            stream_window: (1 << 30) - 1,
            connection_window: (1 << 30) - 1,
            max_frame_size: 16_384,
            max_concurrent_streams: 100,
            streams_per_connection: 0,
        }
    }
}

impl H2Settings {
    /// Window sizes as h2load's `-w`/`-W` bit counts: `2^bits - 1`
    /// (`bits` from 0 to 30).
    pub fn window_from_bits(bits: u32) -> Option<u32> {
        (bits <= 30).then(|| (1u32 << bits) - 1)
    }

    /// Checks every value against RFC 9113's bounds, naming the setting.
    pub fn validate(&self) -> Result<(), String> {
        if !(1..=MAX_WINDOW).contains(&self.stream_window) {
            return Err(format!(
                "h2 stream window must be 1..={MAX_WINDOW}, got {}",
                self.stream_window
            ));
        }
        if !(65_535..=MAX_WINDOW).contains(&self.connection_window) {
            return Err(format!(
                "h2 connection window must be 65535..={MAX_WINDOW}, got {}",
                self.connection_window
            ));
        }
        if !(16_384..=16_777_215).contains(&self.max_frame_size) {
            return Err(format!(
                "h2 max frame size must be 16384..=16777215, got {}",
                self.max_frame_size
            ));
        }
        if self.max_concurrent_streams == 0 {
            return Err("h2 max concurrent streams must be at least 1".into());
        }
        Ok(())
    }

    /// The physical connection that carries logical connection `conn`.
    pub fn group_of(&self, conn: usize) -> usize {
        match self.streams_per_connection {
            0 => 0,
            n => conn / n,
        }
    }
}

/// One open HTTP/2 connection, shared by the logical connections of its group.
#[derive(Clone)]
pub struct H2Handle {
    send: SendRequest<Bytes>,
    /// False once the connection's task ended (closed, GOAWAY, error).
    alive: Arc<AtomicBool>,
    /// Requests completed on it (a failure before any byte on a used
    /// connection may be retried, as on HTTP/1.1).
    uses: Arc<AtomicU64>,
}

impl H2Handle {
    /// Whether new streams may still open on it.
    pub fn is_alive(&self) -> bool {
        self.alive.load(Ordering::Relaxed)
    }
}

/// The future that drives an HTTP/2 connection's frames (reads, writes,
/// flow control); it ends when the connection closes.
pub type Driver = futures_util::future::BoxFuture<'static, ()>;

/// The HTTP/2 preface and SETTINGS exchange over `io`: the connection's
/// handle and its [`Driver`], which the caller must poll — the session's
/// own task does (see [`super::SessionTransport::poll_drivers`]), so a
/// DATA frame wakes no other task on its way to the stream that reads it.
pub async fn handshake<T>(io: T, s: &H2Settings) -> Result<(H2Handle, Driver), Failure>
where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (send, conn) = h2::client::Builder::new()
        .initial_window_size(s.stream_window)
        .initial_connection_window_size(s.connection_window)
        .max_frame_size(s.max_frame_size)
        .max_concurrent_streams(s.max_concurrent_streams)
        .handshake::<_, Bytes>(io)
        .await
        .map_err(|e| h2_failure(&e, false, "h2 handshake"))?;
    let alive = Arc::new(AtomicBool::new(true));
    let flag = alive.clone();
    let driver = Box::pin(async move {
        let _ = conn.await;
        flag.store(false, Ordering::Relaxed);
    });
    Ok((
        H2Handle {
            send,
            alive,
            uses: Arc::new(AtomicU64::new(0)),
        },
        driver,
    ))
}

/// Hop-by-hop headers HTTP/2 forbids (RFC 9113 §8.2.2); `Host` becomes
/// `:authority`.
const DROPPED: [&str; 7] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "upgrade",
    "host",
    "te",
];

/// The request's head as an `http` request (HTTP/2 and HTTP/3): hop-by-hop
/// fields dropped, `Host` as the authority.
pub(crate) fn request(
    req: &Outgoing<'_>,
    scheme: &str,
    authority: &str,
) -> Result<Request<()>, Failure> {
    let bad = |e: String| Failure::new(ErrorKind::Other, format!("request not sent: {e}"));
    let method = Method::from_bytes(req.method.as_bytes()).map_err(|e| bad(e.to_string()))?;
    let mut b = Request::builder()
        .method(method)
        .uri(format!("{scheme}://{authority}{}", req.path))
        .header(http::header::USER_AGENT, USER_AGENT)
        .header("x-vodlab-session", req.session);
    if let Some(r) = req.range {
        b = b.header(http::header::RANGE, r);
    }
    for line in req.headers {
        let Some((name, value)) = line.split_once(':') else {
            return Err(bad(format!("header line `{line}` has no colon")));
        };
        let name =
            HeaderName::from_bytes(name.trim().as_bytes()).map_err(|e| bad(e.to_string()))?;
        if DROPPED.contains(&name.as_str()) {
            continue;
        }
        let value = HeaderValue::from_str(value.trim()).map_err(|e| bad(e.to_string()))?;
        b = b.header(name, value);
    }
    b.body(()).map_err(|e| bad(e.to_string()))
}

/// Sends `req` as a stream of `h` and reads its whole response, like
/// [`crate::io::http::Connection::exchange_timed`]: `sink` sees every body
/// byte with its offset, `arrived(at, n)` every DATA frame's body bytes.
/// Time to first byte is the arrival of the response HEADERS.
pub async fn exchange(
    h: &H2Handle,
    req: &Outgoing<'_>,
    scheme: &str,
    authority: &str,
    sink: &mut (dyn FnMut(u64, &[u8]) + Send),
    arrived: &mut (dyn FnMut(Instant, u64) + Send),
) -> Result<Response, Failure> {
    exchange_limited(
        h,
        req,
        ReadLimits::default(),
        scheme,
        authority,
        sink,
        arrived,
    )
    .await
}

/// [`exchange`] reading the body within `limits`: a body cut by
/// `stop_after` resets its stream (dropping it sends RST_STREAM CANCEL);
/// `read_kbps` spaces the reads, and the window is released only as bytes
/// are read, so the server is paced by flow control.
pub async fn exchange_limited(
    h: &H2Handle,
    req: &Outgoing<'_>,
    limits: ReadLimits,
    scheme: &str,
    authority: &str,
    sink: &mut (dyn FnMut(u64, &[u8]) + Send),
    arrived: &mut (dyn FnMut(Instant, u64) + Send),
) -> Result<Response, Failure> {
    let reused = h.uses.load(Ordering::Relaxed) > 0;
    let head = request(req, scheme, authority)?;
    // a connection the server went away from (GOAWAY) or that broke takes
    // no new streams: the retry opens a new one
    let fail = |e: h2::Error, what: &str| {
        if e.is_go_away() || e.is_io() {
            h.alive.store(false, Ordering::Relaxed);
        }
        h2_failure(&e, reused, what)
    };
    let body = req.body.map(|b| Bytes::copy_from_slice(b.as_bytes()));
    // waits for a stream slot under the server's SETTINGS_MAX_CONCURRENT_STREAMS
    let mut send = h.send.clone().ready().await.map_err(|e| fail(e, "send"))?;
    let sent = Instant::now();
    let (fut, mut stream) = send
        .send_request(head, body.is_none())
        .map_err(|e| fail(e, "send"))?;
    if let Some(b) = body {
        stream.send_data(b, true).map_err(|e| fail(e, "send"))?;
    }
    let resp = fut.await.map_err(|e| fail(e, "read"))?;
    let ttfb = sent.elapsed();
    let head = head_fields(&resp);
    let mut body = resp.into_body();
    let mut got = 0u64;
    let mut stopped = false;
    let fail_read = |e: h2::Error| {
        if e.is_go_away() || e.is_io() {
            h.alive.store(false, Ordering::Relaxed);
        }
        let mut f = h2_failure(&e, false, "read");
        if f.kind == ErrorKind::Reset {
            f.kind = ErrorKind::ShortBody;
        }
        f
    };
    // body bytes consumed but not yet given back to the flow-control
    // windows: released once per wake-up (every DATA frame already
    // received is taken first), and always before waiting for more, so a
    // small window never stalls on bytes held here
    let mut unreleased = 0usize;
    let paced = limits.read_kbps.is_some_and(|r| r > 0);
    'body: loop {
        if limits.done(got) {
            stopped = true;
            break;
        }
        if unreleased > 0 {
            let _ = body.flow_control().release_capacity(unreleased);
            unreleased = 0;
        }
        let Some(chunk) = body.data().await else {
            break;
        };
        let mut chunk = chunk.map_err(fail_read)?;
        // the frames this wake-up found: one `arrived` for all of them
        // (they arrived together), one clock read, one release
        let mut batch = 0u64;
        let mut at = Instant::now();
        loop {
            let n = chunk.len();
            // the window opens only once the reader took them (one frame at
            // a time under read_kbps)
            let take;
            (take, at) = hand_over(&limits, sent, at, got, &chunk, sink).await;
            got += take;
            batch += take;
            unreleased += n;
            if paced || limits.done(got) {
                break;
            }
            match body.data().now_or_never() {
                Some(Some(c)) => chunk = c.map_err(fail_read)?,
                Some(None) => {
                    arrived(at, batch);
                    break 'body;
                }
                None => break,
            }
        }
        arrived(at, batch);
    }
    if unreleased > 0 {
        // the stream may be over, but the connection's window is shared
        let _ = body.flow_control().release_capacity(unreleased);
    }
    let r = head.response(req.method, got, stopped, ttfb)?;
    h.uses.fetch_add(1, Ordering::Relaxed);
    Ok(r)
}

/// What the results take from a response head (HTTP/2 and HTTP/3 alike).
pub(crate) struct HeadFields {
    /// Status code.
    pub(crate) status: u16,
    /// The parsed Content-Range.
    pub(crate) content_range: Option<(u64, u64, Option<u64>)>,
    /// Every CMSD-Dynamic field line, joined.
    pub(crate) cmsd_dynamic: Option<String>,
    /// Content-Length.
    pub(crate) length: Option<u64>,
    /// The size the head would have had on HTTP/1.1.
    pub(crate) header_bytes: u64,
}

/// Hands the reader what it takes of `chunk`, which starts `got` bytes
/// into a body whose request left at `sent` and arrived at `at`: all of it,
/// or up to `ReadLimits::stop_after`, and with `read_kbps` no earlier than
/// that rate allows (waiting until then). Returns the bytes taken and when
/// the reader had them.
pub(crate) async fn hand_over(
    limits: &ReadLimits,
    sent: Instant,
    mut at: Instant,
    got: u64,
    chunk: &[u8],
    sink: &mut (dyn FnMut(u64, &[u8]) + Send),
) -> (u64, Instant) {
    let n = chunk.len();
    let take = limits
        .stop_after
        .map_or(n, |s| (s.saturating_sub(got) as usize).min(n));
    if let Some(due) = limits.due_after(got + take as u64).map(|d| sent + d) {
        if due > at {
            tokio::time::sleep(due - at).await;
            at = Instant::now();
        }
    }
    sink(got, &chunk[..take]);
    (take as u64, at)
}

impl HeadFields {
    /// The response of a multiplexed exchange (h2, h3) whose body ended
    /// after `got` bytes (`stopped`: the reader stopped taking them): a
    /// body shorter than its Content-Length is a failure, unless the
    /// request was a HEAD or the reader stopped.
    pub(crate) fn response(
        self,
        method: &str,
        got: u64,
        stopped: bool,
        ttfb: std::time::Duration,
    ) -> Result<Response, Failure> {
        if let Some(want) = self.length {
            if method != "HEAD" && got != want && !stopped {
                return Err(Failure::new(
                    ErrorKind::ShortBody,
                    format!("stream ended after {got} of {want} body bytes"),
                ));
            }
        }
        Ok(Response {
            status: self.status,
            body_bytes: got,
            header_bytes: self.header_bytes,
            content_range: self.content_range,
            ttfb,
            keep_alive: true,
            cmsd_dynamic: self.cmsd_dynamic,
        })
    }
}

/// The head's fields the results use.
pub(crate) fn head_fields<T>(resp: &http::Response<T>) -> HeadFields {
    let h = resp.headers();
    // every field line of the list, joined (RFC 9110 §5.3)
    let cmsd: Vec<&str> = h
        .get_all(vodlab_cmcd::cmsd::DYNAMIC)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    HeadFields {
        status: resp.status().as_u16(),
        content_range: h
            .get(http::header::CONTENT_RANGE)
            .and_then(|v| v.to_str().ok())
            .and_then(parse_content_range),
        cmsd_dynamic: (!cmsd.is_empty()).then(|| cmsd.join(",")),
        length: h
            .get(http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok()),
        // the size these headers would have had on HTTP/1.1 (HPACK's and
        // QPACK's wire sizes are not exposed), so header figures stay
        // comparable across protocols
        header_bytes: 17
            + h.iter()
                .map(|(n, v)| n.as_str().len() + v.len() + 4)
                .sum::<usize>() as u64
            + 2,
    }
}

/// The failure an `h2` error means: I/O errors by errno, a stream the
/// server refused or a connection it went away from before answering may be
/// retried on a used connection, as a close of an idle HTTP/1.1 connection.
fn h2_failure(e: &h2::Error, reused: bool, what: &str) -> Failure {
    if let Some(io) = e.get_io() {
        let mut f = Failure::new(ErrorKind::from_io(io), format!("{what}: {e}"));
        f.retryable = reused;
        return f;
    }
    let refused = e.reason() == Some(h2::Reason::REFUSED_STREAM);
    let kind = if e.is_go_away() || refused || e.is_reset() {
        ErrorKind::Reset
    } else {
        ErrorKind::BadResponse
    };
    let mut f = Failure::new(kind, format!("{what}: {e}"));
    f.retryable = reused && (refused || e.is_go_away());
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_h2loads_and_valid() {
        let s = H2Settings::default();
        assert_eq!(Some(s.stream_window), H2Settings::window_from_bits(30));
        assert_eq!(s.max_frame_size, 16_384);
        assert!(s.validate().is_ok());
        assert_eq!(H2Settings::window_from_bits(31), None);
        let bad = H2Settings {
            max_frame_size: 1000,
            ..s
        };
        assert!(bad.validate().unwrap_err().contains("frame size"));
    }

    #[test]
    fn groups_put_a_sessions_connections_on_one_unless_told() {
        let all = H2Settings::default();
        assert_eq!((all.group_of(0), all.group_of(5)), (0, 0));
        let two = H2Settings {
            streams_per_connection: 2,
            ..all
        };
        assert_eq!(
            (0..5).map(|c| two.group_of(c)).collect::<Vec<_>>(),
            [0, 0, 1, 1, 2]
        );
    }

    #[test]
    fn requests_drop_hop_by_hop_headers_and_keep_the_rest() {
        let headers = [
            "Connection: close".to_string(),
            "Accept: */*".to_string(),
            "Host: other".to_string(),
        ];
        let out = Outgoing {
            method: "GET",
            path: "/v/seg1.m4s",
            range: Some("bytes=0-99"),
            headers: &headers,
            body: None,
            session: 42,
            http10: false,
        };
        let r = request(&out, "https", "localhost:8443").unwrap();
        assert_eq!(r.uri().to_string(), "https://localhost:8443/v/seg1.m4s");
        assert_eq!(r.headers()["range"], "bytes=0-99");
        assert_eq!(r.headers()["x-vodlab-session"], "42");
        assert_eq!(r.headers()["accept"], "*/*");
        assert!(r.headers().get("connection").is_none());
        assert!(r.headers().get("host").is_none());
    }

    /// An in-process h2 server over a pipe answering every request with
    /// `body` in DATA frames of `frame` bytes, with `window` as the
    /// client's stream and connection windows; the client's handle.
    async fn pair(body: Vec<u8>, frame: usize, window: u32) -> H2Handle {
        let (a, b) = tokio::io::duplex(1 << 20);
        tokio::spawn(async move {
            let mut conn = h2::server::handshake(b).await.unwrap();
            while let Some(Ok((_req, mut resp))) = conn.accept().await {
                let body = body.clone();
                tokio::spawn(async move {
                    let head = http::Response::builder()
                        .status(200)
                        .header("content-length", body.len())
                        .body(())
                        .unwrap();
                    let mut tx = resp.send_response(head, false).unwrap();
                    for piece in body.chunks(frame) {
                        tx.reserve_capacity(piece.len());
                        // wait for window: the client must release it
                        while tx.capacity() < piece.len() {
                            match std::future::poll_fn(|cx| tx.poll_capacity(cx)).await {
                                Some(Ok(_)) => {}
                                _ => return,
                            }
                        }
                        if tx.send_data(Bytes::copy_from_slice(piece), false).is_err() {
                            return;
                        }
                    }
                    let _ = tx.send_data(Bytes::new(), true);
                });
            }
        });
        let s = H2Settings {
            stream_window: window,
            connection_window: window.max(65_535),
            ..H2Settings::default()
        };
        let (h, driver) = handshake(a, &s).await.unwrap();
        tokio::spawn(driver);
        h
    }

    fn get(path: &str) -> Outgoing<'_> {
        Outgoing {
            method: "GET",
            path,
            range: None,
            headers: &[],
            body: None,
            session: 1,
            http10: false,
        }
    }

    #[tokio::test]
    async fn batched_reads_release_the_window_and_count_every_byte() {
        // 1 MiB through a 64 KiB window in 16 KiB frames: the client must
        // give the window back as it reads, or this stalls (timeout)
        let body: Vec<u8> = (0..1u32 << 20).map(|i| (i % 251) as u8).collect();
        let h = pair(body.clone(), 16_384, 65_535).await;
        let mut got = Vec::new();
        let mut calls = 0;
        for _ in 0..3 {
            got.clear();
            let mut arrived_total = 0u64;
            let r = tokio::time::timeout(
                std::time::Duration::from_secs(20),
                exchange(
                    &h,
                    &get("/f"),
                    "http",
                    "x",
                    &mut |at, d| {
                        assert_eq!(at as usize, got.len());
                        got.extend_from_slice(d)
                    },
                    &mut |_, n| {
                        arrived_total += n;
                        calls += 1;
                    },
                ),
            )
            .await
            .expect("not stalled on flow control")
            .unwrap();
            assert_eq!(r.body_bytes, body.len() as u64);
            assert_eq!(arrived_total, body.len() as u64);
            assert!(got == body, "bytes in order");
        }
        assert!(calls > 0);
        // stop_after cuts the body where asked, counted once
        let mut n = 0u64;
        let mut arrived_cut = 0u64;
        let r = exchange_limited(
            &h,
            &get("/f"),
            ReadLimits {
                stop_after: Some(100_000),
                read_kbps: None,
            },
            "http",
            "x",
            &mut |_, d| n += d.len() as u64,
            &mut |_, b| arrived_cut += b,
        )
        .await
        .unwrap();
        assert_eq!((r.body_bytes, n, arrived_cut), (100_000, 100_000, 100_000));
        // and the connection still serves whole bodies after the cut stream
        let mut m = 0u64;
        let r = exchange(
            &h,
            &get("/f"),
            "http",
            "x",
            &mut |_, d| m += d.len() as u64,
            &mut |_, _| {},
        )
        .await
        .unwrap();
        assert_eq!((r.body_bytes, m), (body.len() as u64, body.len() as u64));
    }
}
