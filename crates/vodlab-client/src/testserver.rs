//! A tiny in-process HTTP/1.1 server for tests: serves virtual files of given
//! sizes (with Range), with an injectable delay per path and optional pacing
//! of bodies (a burst, then a rate), and counts requests.
//! Not a product server (see `vodlab serve`); it exists so engine tests are
//! deterministic and need no external process.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use vodlab_http::server::{encode_response_head, parse_head, HeaderValue, ResponseHead};

/// Behaviour of the test server.
#[derive(Debug, Default)]
pub struct TestServerConfig {
    /// Path to file size; other paths answer 404.
    pub files: HashMap<String, u64>,
    /// Path to a delay before the response header is sent.
    pub delays: HashMap<String, Duration>,
    /// Close the connection after every response.
    pub close_after_each: bool,
    /// Pace every body: this burst, then this rate.
    pub pace: Option<TestPace>,
}

/// How the test server paces a body: `burst` bytes at once, then
/// `bytes_per_s` in slices every 10 ms (tokio timers: as steady as the
/// machine allows, not a reference pacer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TestPace {
    /// Bytes sent at once first.
    pub burst: u64,
    /// Rate afterwards, bytes per second.
    pub bytes_per_s: u64,
}

/// A request the server saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    /// Path.
    pub path: String,
    /// Range header, if any.
    pub range: Option<String>,
    /// X-Vodlab-Session header, if any.
    pub session: Option<String>,
    /// CMCD-Object and CMCD-Request headers, if any.
    pub cmcd: (Option<String>, Option<String>),
    /// Arrival, since the server started.
    pub at: Duration,
}

/// Handle to a running test server; it stops when dropped.
pub struct TestServer {
    /// Address it listens on.
    pub addr: SocketAddr,
    /// Requests seen, in arrival order.
    pub seen: Arc<Mutex<Vec<Seen>>>,
    /// Connections accepted.
    pub connections: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl TestServer {
    /// Starts on 127.0.0.1 with an ephemeral port.
    pub async fn start(cfg: TestServerConfig) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let seen = Arc::new(Mutex::new(Vec::new()));
        let connections = Arc::new(AtomicU64::new(0));
        let cfg = Arc::new(cfg);
        let (s2, c2) = (seen.clone(), connections.clone());
        let t0 = tokio::time::Instant::now();
        let task = tokio::spawn(async move {
            loop {
                let Ok((mut sock, _)) = listener.accept().await else {
                    continue;
                };
                c2.fetch_add(1, Ordering::Relaxed);
                let (cfg, seen) = (cfg.clone(), s2.clone());
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    let mut out = Vec::new();
                    let mut tmp = [0u8; 4096];
                    loop {
                        // read one request head (the codec's parser, as `vodlab serve`)
                        let head = loop {
                            match parse_head(&buf) {
                                Ok(Some(h)) => break h,
                                Ok(None) => {}
                                Err(_) => return,
                            }
                            match sock.read(&mut tmp).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => buf.extend_from_slice(&tmp[..n]),
                            }
                        };
                        buf.drain(..head.len);
                        let path = head.target.clone();
                        let range = head.header("range").map(str::to_string);
                        seen.lock().expect("lock").push(Seen {
                            path: path.clone(),
                            range: range.clone(),
                            session: head.header("x-vodlab-session").map(str::to_string),
                            cmcd: (
                                head.header("cmcd-object").map(str::to_string),
                                head.header("cmcd-request").map(str::to_string),
                            ),
                            at: t0.elapsed(),
                        });
                        if let Some(d) = cfg.delays.get(&path) {
                            tokio::time::sleep(*d).await;
                        }
                        let (resp, body_len) = response(&cfg, &path, range.as_deref());
                        out.clear();
                        encode_response_head(&resp, &mut out);
                        if sock.write_all(&out).await.is_err() {
                            return;
                        }
                        let chunk = vec![b'v'; 64 * 1024];
                        let mut left = body_len;
                        let paced_from = tokio::time::Instant::now();
                        let mut sent = 0u64;
                        while left > 0 {
                            let mut n = left.min(chunk.len() as u64) as usize;
                            if let Some(p) = cfg.pace.filter(|p| sent >= p.burst) {
                                // slice k leaves 10·k ms after the burst
                                let slice = (p.bytes_per_s / 100).max(1);
                                let k = (sent - p.burst) / slice + 1;
                                tokio::time::sleep_until(
                                    paced_from + Duration::from_millis(10 * k),
                                )
                                .await;
                                n = n.min(slice as usize);
                            } else if let Some(p) = cfg.pace {
                                n = n.min((p.burst - sent) as usize);
                            }
                            if sock.write_all(&chunk[..n]).await.is_err() {
                                return;
                            }
                            left -= n as u64;
                            sent += n as u64;
                        }
                        if cfg.close_after_each {
                            return;
                        }
                    }
                });
            }
        });
        Self {
            addr,
            seen,
            connections,
            task,
        }
    }
}

/// The response head to a request for `path` with an optional Range header
/// (`bytes=A-B` or `bytes=A-`), and the body length.
fn response(cfg: &TestServerConfig, path: &str, range: Option<&str>) -> (ResponseHead, u64) {
    let (status, body_len, content_range) = match cfg.files.get(path) {
        None => (404, 0, None),
        Some(&size) => match range.and_then(|r| r.strip_prefix("bytes=")) {
            Some(r) => {
                let (a, b) = r.split_once('-').unwrap_or(("0", ""));
                let a: u64 = a.parse().unwrap_or(0);
                let b: u64 = b.parse().unwrap_or(size - 1).min(size - 1);
                let cr = HeaderValue::Range {
                    first: a,
                    last: b,
                    size,
                };
                (206, b - a + 1, Some(cr))
            }
            None => (200, size, None),
        },
    };
    let mut head = ResponseHead::new(status).with("Content-Length", body_len);
    if let Some(cr) = content_range {
        head.push("Content-Range", cr);
    }
    let conn = if cfg.close_after_each {
        "close"
    } else {
        "keep-alive"
    };
    head.push("Connection", conn);
    (head, body_len)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heads_come_from_the_codec() {
        let mut cfg = TestServerConfig::default();
        cfg.files.insert("/a".into(), 1000);
        let mut out = Vec::new();
        let (h, n) = response(&cfg, "/a", Some("bytes=10-19"));
        encode_response_head(&h, &mut out);
        assert_eq!(n, 10);
        assert_eq!(
            out,
            b"HTTP/1.1 206 Partial Content\r\nContent-Length: 10\r\nContent-Range: bytes 10-19/1000\r\nConnection: keep-alive\r\n\r\n"
        );
        let (h, n) = response(&cfg, "/a", None);
        assert_eq!((h.status, n), (200, 1000));
        let (h, n) = response(&cfg, "/b", None);
        assert_eq!((h.status, n), (404, 0));
        cfg.close_after_each = true;
        let (h, _) = response(&cfg, "/a", Some("bytes=990-"));
        assert_eq!(
            h.get("content-range").map(HeaderValue::to_text).as_deref(),
            Some("bytes 990-999/1000")
        );
        assert_eq!(
            h.get("connection").map(HeaderValue::to_text).as_deref(),
            Some("close")
        );
    }
}
