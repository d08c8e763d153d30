//! A tiny in-process HTTP/1.1 server for tests: serves virtual files of given
//! sizes (with Range), with an injectable delay per path, and counts requests.
//! Not a product server (see `vodlab serve`); it exists so engine tests are
//! deterministic and need no external process.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// Behaviour of the test server.
#[derive(Debug, Default)]
pub struct TestServerConfig {
    /// Path to file size; other paths answer 404.
    pub files: HashMap<String, u64>,
    /// Path to a delay before the response header is sent.
    pub delays: HashMap<String, Duration>,
    /// Close the connection after every response.
    pub close_after_each: bool,
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
                    let mut tmp = [0u8; 4096];
                    loop {
                        // read one request header
                        let end = loop {
                            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                                break i + 4;
                            }
                            match sock.read(&mut tmp).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => buf.extend_from_slice(&tmp[..n]),
                            }
                        };
                        let head = String::from_utf8_lossy(&buf[..end]).to_string();
                        buf.drain(..end);
                        let mut lines = head.lines();
                        let path = lines
                            .next()
                            .and_then(|l| l.split_whitespace().nth(1))
                            .unwrap_or("/")
                            .to_string();
                        let header = |name: &str| {
                            head.lines()
                                .find_map(|l| {
                                    l.split_once(':')
                                        .filter(|(k, _)| k.eq_ignore_ascii_case(name))
                                })
                                .map(|(_, v)| v.trim().to_string())
                        };
                        let range = header("range");
                        seen.lock().expect("lock").push(Seen {
                            path: path.clone(),
                            range: range.clone(),
                            session: header("x-vodlab-session"),
                            at: t0.elapsed(),
                        });
                        if let Some(d) = cfg.delays.get(&path) {
                            tokio::time::sleep(*d).await;
                        }
                        let conn = if cfg.close_after_each {
                            "close"
                        } else {
                            "keep-alive"
                        };
                        let (status, body_len, extra) = match cfg.files.get(&path) {
                            None => ("404 Not Found", 0, String::new()),
                            Some(&size) => {
                                match range.as_deref().and_then(|r| r.strip_prefix("bytes=")) {
                                    Some(r) => {
                                        let (a, b) = r.split_once('-').unwrap_or(("0", ""));
                                        let a: u64 = a.parse().unwrap_or(0);
                                        let b: u64 = b.parse().unwrap_or(size - 1).min(size - 1);
                                        (
                                            "206 Partial Content",
                                            b - a + 1,
                                            format!("Content-Range: bytes {a}-{b}/{size}\r\n"),
                                        )
                                    }
                                    None => ("200 OK", size, String::new()),
                                }
                            }
                        };
                        let resp = format!(
                            "HTTP/1.1 {status}\r\nContent-Length: {body_len}\r\n{extra}Connection: {conn}\r\n\r\n"
                        );
                        if sock.write_all(resp.as_bytes()).await.is_err() {
                            return;
                        }
                        let chunk = vec![b'v'; 64 * 1024];
                        let mut left = body_len;
                        while left > 0 {
                            let n = left.min(chunk.len() as u64) as usize;
                            if sock.write_all(&chunk[..n]).await.is_err() {
                                return;
                            }
                            left -= n as u64;
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
