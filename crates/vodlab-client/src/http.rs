//! A small HTTP/1.1 client connection built for load generation.
//!
//! Why not hyper: the engine needs to pace every read (token bucket), keep a
//! small receive buffer, time the first byte, count and check body bytes, and
//! allocate nothing per request; a connection loop over `httparse` does that
//! directly. Supports persistent connections, Content-Length, chunked and
//! close-delimited bodies, HEAD and 1xx/204/304 without bodies.

use std::io;
use std::net::SocketAddr;
use std::time::Instant;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

use crate::link::{LinkSpec, TokenBucket};

pub use crate::exchange::{ErrorKind, Failure, Response};

/// A request to send.
#[derive(Debug, Clone, Copy)]
pub struct Outgoing<'a> {
    /// Method token.
    pub method: &'a str,
    /// Path.
    pub path: &'a str,
    /// Range header value (`bytes=...`).
    pub range: Option<&'a str>,
    /// Extra header lines.
    pub headers: &'a [String],
    /// Body.
    pub body: Option<&'a str>,
    /// Session id for `X-Vodlab-Session`.
    pub session: u64,
    /// Send HTTP/1.0.
    pub http10: bool,
}

const MAX_HEADER: usize = 64 * 1024;
const BUF: usize = 64 * 1024;

/// One persistent connection with its link emulation.
pub struct Connection {
    stream: TcpStream,
    buf: Vec<u8>,
    /// Valid bytes at the start of `buf` not yet consumed.
    filled: usize,
    down: Option<TokenBucket>,
    up: Option<TokenBucket>,
    /// Requests completed on this connection.
    pub uses: u64,
    host: String,
}

impl Connection {
    /// Connects to `addr` with the link's receive buffer.
    pub async fn connect(addr: SocketAddr, host: &str, link: &LinkSpec) -> Result<Self, Failure> {
        let io = |e: io::Error| Failure::new(ErrorKind::from_io(&e), format!("connect: {e}"));
        let socket = if addr.is_ipv4() {
            TcpSocket::new_v4()
        } else {
            TcpSocket::new_v6()
        }
        .map_err(io)?;
        if let Some(n) = link.recv_buffer() {
            socket.set_recv_buffer_size(n).map_err(io)?;
        }
        let stream = socket.connect(addr).await.map_err(io)?;
        stream.set_nodelay(true).map_err(io)?;
        let now = Instant::now();
        // a shaped link never reads more than one bucket's worth at a time
        let down = (link.down_bps > 0.0).then(|| TokenBucket::new(link.down_bps, now));
        let size = down
            .as_ref()
            .map_or(BUF, |b| (2 * b.chunk()).clamp(8 * 1024, BUF));
        Ok(Self {
            stream,
            buf: vec![0; size],
            filled: 0,
            down,
            up: (link.up_bps > 0.0).then(|| TokenBucket::new(link.up_bps, now)),
            uses: 0,
            host: host.to_string(),
        })
    }

    async fn shaped_read(&mut self, at: usize) -> io::Result<usize> {
        let mut limit = self.buf.len() - at;
        if let Some(b) = self.down.as_mut() {
            let w = b.wait(Instant::now());
            if !w.is_zero() {
                tokio::time::sleep(w).await;
            }
            limit = limit.min(b.chunk());
        }
        let n = self.stream.read(&mut self.buf[at..at + limit]).await?;
        if let Some(b) = self.down.as_mut() {
            b.consume(Instant::now(), n);
        }
        Ok(n)
    }

    /// Sends a request and reads the whole response. `sink` sees every body
    /// byte with its offset in the body (for content checks).
    pub async fn exchange(
        &mut self,
        req: &Outgoing<'_>,
        sink: &mut (dyn FnMut(u64, &[u8]) + Send),
    ) -> Result<Response, Failure> {
        let reused = self.uses > 0;
        let mut head = String::with_capacity(256);
        head.push_str(req.method);
        head.push(' ');
        if !req.path.starts_with('/') {
            head.push('/');
        }
        head.push_str(req.path);
        head.push_str(if req.http10 {
            " HTTP/1.0\r\nHost: "
        } else {
            " HTTP/1.1\r\nHost: "
        });
        head.push_str(&self.host);
        head.push_str("\r\nUser-Agent: vodlab/");
        head.push_str(env!("CARGO_PKG_VERSION"));
        head.push_str("\r\nX-Vodlab-Session: ");
        head.push_str(&req.session.to_string());
        if req.http10 {
            head.push_str("\r\nConnection: keep-alive");
        }
        if let Some(r) = req.range {
            head.push_str("\r\nRange: ");
            head.push_str(r);
        }
        for h in req.headers {
            head.push_str("\r\n");
            head.push_str(h);
        }
        if let Some(b) = req.body {
            head.push_str("\r\nContent-Length: ");
            head.push_str(&b.len().to_string());
        }
        head.push_str("\r\n\r\n");
        if let Some(b) = req.body {
            head.push_str(b);
        }
        if let Some(up) = self.up.as_mut() {
            up.consume(Instant::now(), head.len());
            let w = up.wait(Instant::now());
            if !w.is_zero() {
                tokio::time::sleep(w).await;
            }
        }
        let sent = Instant::now();
        if let Err(e) = self.stream.write_all(head.as_bytes()).await {
            let mut f = Failure::new(ErrorKind::from_io(&e), format!("send: {e}"));
            f.retryable = reused;
            return Err(f);
        }

        // headers
        let mut ttfb = None;
        let (status, header_len, body_kind, keep_alive, content_range) = loop {
            let mut headers = [httparse::EMPTY_HEADER; 48];
            let mut resp = httparse::Response::new(&mut headers);
            match resp.parse(&self.buf[..self.filled]) {
                Ok(httparse::Status::Complete(n)) => {
                    let status = resp.code.unwrap_or(0);
                    let v11 = resp.version == Some(1);
                    let mut len = None;
                    let mut chunked = false;
                    let mut close = !v11;
                    let mut range = None;
                    for h in resp.headers.iter() {
                        let name = h.name;
                        let val = std::str::from_utf8(h.value).unwrap_or("").trim();
                        if name.eq_ignore_ascii_case("content-length") {
                            len = Some(val.parse::<u64>().map_err(|_| {
                                Failure::new(
                                    ErrorKind::BadResponse,
                                    format!("bad Content-Length `{val}`"),
                                )
                            })?);
                        } else if name.eq_ignore_ascii_case("transfer-encoding") {
                            chunked = val.to_ascii_lowercase().contains("chunked");
                        } else if name.eq_ignore_ascii_case("connection") {
                            let v = val.to_ascii_lowercase();
                            if v.contains("close") {
                                close = true;
                            } else if v.contains("keep-alive") {
                                close = false;
                            }
                        } else if name.eq_ignore_ascii_case("content-range") {
                            range = parse_content_range(val);
                        }
                    }
                    let no_body = req.method == "HEAD"
                        || status == 204
                        || status == 304
                        || (100..200).contains(&status);
                    let kind = if no_body {
                        Body::Length(0)
                    } else if chunked {
                        Body::Chunked
                    } else if let Some(l) = len {
                        Body::Length(l)
                    } else {
                        close = true;
                        Body::UntilClose
                    };
                    break (status, n, kind, !close, range);
                }
                Ok(httparse::Status::Partial) => {
                    if self.filled >= MAX_HEADER {
                        return Err(Failure::new(
                            ErrorKind::BadResponse,
                            "response header over 64 KiB",
                        ));
                    }
                    if self.filled == self.buf.len() {
                        self.buf.resize((2 * self.buf.len()).min(MAX_HEADER), 0);
                    }
                    let at = self.filled;
                    match self.shaped_read(at).await {
                        Ok(0) => {
                            let mut f = Failure::new(
                                if self.filled == 0 {
                                    ErrorKind::Reset
                                } else {
                                    ErrorKind::ShortBody
                                },
                                "connection closed before the response header",
                            );
                            f.retryable = reused && self.filled == 0;
                            return Err(f);
                        }
                        Ok(n) => {
                            ttfb.get_or_insert_with(|| sent.elapsed());
                            self.filled += n;
                        }
                        Err(e) => {
                            let mut f = Failure::new(ErrorKind::from_io(&e), format!("read: {e}"));
                            f.retryable = reused && self.filled == 0;
                            return Err(f);
                        }
                    }
                }
                Err(e) => {
                    return Err(Failure::new(
                        ErrorKind::BadResponse,
                        format!("bad response header: {e}"),
                    ))
                }
            }
        };
        let ttfb = ttfb.unwrap_or_else(|| sent.elapsed());
        // shift the leftover body bytes to the front
        self.buf.copy_within(header_len..self.filled, 0);
        self.filled -= header_len;

        let body_bytes = match body_kind {
            Body::Length(n) => self.read_exact_body(n, 0, sink).await?,
            Body::UntilClose => self.read_until_close(sink).await?,
            Body::Chunked => self.read_chunked(sink).await?,
        };
        self.uses += 1;
        Ok(Response {
            status,
            body_bytes,
            header_bytes: header_len as u64,
            content_range,
            ttfb,
            keep_alive,
        })
    }

    /// Consumes `n` body bytes starting at body offset `base`.
    async fn read_exact_body(
        &mut self,
        n: u64,
        base: u64,
        sink: &mut (dyn FnMut(u64, &[u8]) + Send),
    ) -> Result<u64, Failure> {
        let mut got = 0u64;
        loop {
            let take = (self.filled as u64).min(n - got) as usize;
            if take > 0 {
                sink(base + got, &self.buf[..take]);
                self.buf.copy_within(take..self.filled, 0);
                self.filled -= take;
                got += take as u64;
            }
            if got == n {
                return Ok(got);
            }
            match self.shaped_read(0).await {
                Ok(0) => {
                    return Err(Failure::new(
                        ErrorKind::ShortBody,
                        format!("connection closed after {got} of {n} body bytes"),
                    ))
                }
                Ok(k) => self.filled = k,
                Err(e) => {
                    return Err(Failure::new(
                        ErrorKind::from_io(&e),
                        format!("read body: {e}"),
                    ))
                }
            }
        }
    }

    async fn read_until_close(
        &mut self,
        sink: &mut (dyn FnMut(u64, &[u8]) + Send),
    ) -> Result<u64, Failure> {
        let mut got = 0u64;
        loop {
            if self.filled > 0 {
                sink(got, &self.buf[..self.filled]);
                got += self.filled as u64;
                self.filled = 0;
            }
            match self.shaped_read(0).await {
                Ok(0) => return Ok(got),
                Ok(k) => self.filled = k,
                Err(e) => {
                    return Err(Failure::new(
                        ErrorKind::from_io(&e),
                        format!("read body: {e}"),
                    ))
                }
            }
        }
    }

    async fn fill_line(&mut self) -> Result<usize, Failure> {
        loop {
            if let Some(i) = self.buf[..self.filled]
                .windows(2)
                .position(|w| w == b"\r\n")
            {
                return Ok(i);
            }
            if self.filled >= 4096 {
                return Err(Failure::new(
                    ErrorKind::BadResponse,
                    "chunk-size line too long",
                ));
            }
            if self.filled == self.buf.len() {
                self.buf.resize(2 * self.buf.len(), 0);
            }
            let at = self.filled;
            match self.shaped_read(at).await {
                Ok(0) => {
                    return Err(Failure::new(
                        ErrorKind::ShortBody,
                        "connection closed inside a chunked body",
                    ))
                }
                Ok(k) => self.filled += k,
                Err(e) => {
                    return Err(Failure::new(
                        ErrorKind::from_io(&e),
                        format!("read chunk: {e}"),
                    ))
                }
            }
        }
    }

    async fn read_chunked(
        &mut self,
        sink: &mut (dyn FnMut(u64, &[u8]) + Send),
    ) -> Result<u64, Failure> {
        let mut total = 0u64;
        loop {
            let i = self.fill_line().await?;
            let line = std::str::from_utf8(&self.buf[..i]).unwrap_or("");
            let hex = line.split(';').next().unwrap_or("").trim();
            let size = u64::from_str_radix(hex, 16).map_err(|_| {
                Failure::new(ErrorKind::BadResponse, format!("bad chunk size `{hex}`"))
            })?;
            self.buf.copy_within(i + 2..self.filled, 0);
            self.filled -= i + 2;
            if size == 0 {
                // trailers until an empty line
                loop {
                    let j = self.fill_line().await?;
                    self.buf.copy_within(j + 2..self.filled, 0);
                    self.filled -= j + 2;
                    if j == 0 {
                        return Ok(total);
                    }
                }
            }
            total += self.read_exact_body(size, total, sink).await?;
            let j = self.fill_line().await?;
            if j != 0 {
                return Err(Failure::new(
                    ErrorKind::BadResponse,
                    "chunk not followed by CRLF",
                ));
            }
            self.buf.copy_within(2..self.filled, 0);
            self.filled -= 2;
        }
    }
}

enum Body {
    Length(u64),
    Chunked,
    UntilClose,
}

/// Parses `bytes A-B/T` (T may be `*`).
pub fn parse_content_range(v: &str) -> Option<(u64, u64, Option<u64>)> {
    let rest = v.strip_prefix("bytes")?.trim_start();
    let (range, total) = rest.split_once('/')?;
    let (a, b) = range.trim().split_once('-')?;
    let total = match total.trim() {
        "*" => None,
        t => Some(t.parse().ok()?),
    };
    Some((a.parse().ok()?, b.parse().ok()?, total))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_range_parses() {
        assert_eq!(
            parse_content_range("bytes 0-99/1000"),
            Some((0, 99, Some(1000)))
        );
        assert_eq!(parse_content_range("bytes 5-9/*"), Some((5, 9, None)));
        assert_eq!(parse_content_range("items 0-1/2"), None);
    }

    #[test]
    fn errors_are_classified_by_errno() {
        let e = io::Error::from_raw_os_error(libc::EMFILE);
        assert_eq!(ErrorKind::from_io(&e), ErrorKind::Descriptors);
        let e = io::Error::from_raw_os_error(libc::EADDRNOTAVAIL);
        assert_eq!(ErrorKind::from_io(&e), ErrorKind::Ports);
        let e = io::Error::from(io::ErrorKind::ConnectionRefused);
        assert_eq!(ErrorKind::from_io(&e), ErrorKind::Refused);
    }
}
