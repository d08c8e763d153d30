//! The response planner: from a parsed request head and a file's metadata
//! to a [`ResponsePlan`] (status, header fields, and which bytes of the file
//! form the body), without I/O. The executor (`conn`) opens the file, asks
//! the planner, encodes the head with the codec and sends the body with
//! `sendfile`; an HTTP/2 front end would share the same plan.
//!
//! Two steps, because only the second needs the file: [`route`] decides
//! what needs no file at all (405, 413, 400, the statistics page), [`plan`]
//! the rest (If-Range, Range resolution, 200/206/416, multipart bodies,
//! HEAD). Errors are planned by [`plan_error`].

use std::path::{Path, PathBuf};

use vodlab_http::server::{encode_response_head, reason, Head, HeaderValue, ResponseHead};

use crate::error::ServeError;
use crate::range::{self, Resolved};
use crate::request::resolve_target;

/// The target of the statistics page.
pub const STATS_PATH: &str = "/vodlab/stats";

/// What kind of file a path names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// A regular file (served).
    Regular,
    /// A directory (403).
    Directory,
    /// A device, socket or fifo (403).
    Other,
}

/// What the planner needs to know about a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileMeta {
    /// Size in bytes.
    pub size: u64,
    /// Modification time, Unix seconds, when known.
    pub mtime: Option<u64>,
    /// Regular file or not.
    pub kind: FileKind,
    /// Identity of the file (device and inode), seeds the multipart boundary.
    pub key: u64,
    /// Content-Type (from the extension).
    pub content_type: &'static str,
}

impl FileMeta {
    /// The strong validator: `"size-mtime"` in hex.
    pub fn etag(&self) -> String {
        format!("\"{:x}-{:x}\"", self.size, self.mtime.unwrap_or(0))
    }

    /// Last-Modified as an HTTP date (empty when the time is unknown).
    pub fn last_modified(&self) -> String {
        self.mtime
            .map(|s| {
                httpdate::fmt_http_date(std::time::UNIX_EPOCH + std::time::Duration::from_secs(s))
            })
            .unwrap_or_default()
    }
}

/// Per-response facts from outside the request and the file.
#[derive(Debug, Clone, Copy)]
pub struct PlanCtx<'a> {
    /// Whether the connection may stay open after this response (the
    /// request asked for it and the server is not shutting down).
    pub keep_alive: bool,
    /// The Date header value (formatted by the caller, once per second).
    pub date: &'a str,
    /// Connection number (seeds the multipart boundary).
    pub conn: u64,
}

/// A byte range of the file: `len` bytes from `offset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ByteRange {
    /// First byte.
    pub offset: u64,
    /// Number of bytes.
    pub len: u64,
}

/// One part of a `multipart/byteranges` body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    /// The part's head (`--boundary`, Content-Type, Content-Range, blank line).
    pub head: Vec<u8>,
    /// The file bytes that follow it (then CRLF).
    pub range: ByteRange,
}

/// The body of a response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Body {
    /// No body (HEAD, 416).
    None,
    /// Bytes held in memory (error texts, statistics).
    Bytes(Vec<u8>),
    /// One range of the file.
    File(ByteRange),
    /// Several ranges of the file, each with its part head, then the closing
    /// delimiter.
    Multipart {
        /// The parts in order.
        parts: Vec<Part>,
        /// `--boundary--\r\n`.
        closing: Vec<u8>,
    },
}

impl Body {
    /// Bytes on the wire.
    pub fn wire_len(&self) -> u64 {
        match self {
            Body::None => 0,
            Body::Bytes(b) => b.len() as u64,
            Body::File(r) => r.len,
            Body::Multipart { parts, closing } => {
                parts
                    .iter()
                    .map(|p| p.head.len() as u64 + p.range.len + 2)
                    .sum::<u64>()
                    + closing.len() as u64
            }
        }
    }
}

/// What a response is, for statistics and the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResponseKind {
    /// 200 with the whole file.
    Full,
    /// 206 with one range.
    Range,
    /// 206 with a multipart body.
    Multipart,
    /// 416.
    Unsatisfiable,
    /// The statistics page.
    Stats,
    /// A refusal (4xx, 5xx) from a [`ServeError`].
    Error,
}

impl ResponseKind {
    /// Whether the response counts as an error in the statistics.
    pub fn is_error(self) -> bool {
        matches!(self, ResponseKind::Unsatisfiable | ResponseKind::Error)
    }
}

/// A planned response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResponsePlan {
    /// Status and header fields.
    pub head: ResponseHead,
    /// Body to send after the head.
    pub body: Body,
    /// Kind of response.
    pub kind: ResponseKind,
    /// Whether the connection stays open after it.
    pub keep_alive: bool,
    /// First byte of the file the response covers (the log's offset).
    pub offset: u64,
    /// File bytes it covers (the log's length; also for HEAD).
    pub length: u64,
}

impl ResponsePlan {
    /// The status code.
    pub fn status(&self) -> u16 {
        self.head.status
    }
}

/// The first decision, without the file.
#[derive(Debug)]
pub enum Route {
    /// Refused before touching the file system.
    Refuse(ServeError),
    /// The statistics page.
    Stats,
    /// A file under the root.
    File(PathBuf),
}

/// Routes a request: method, body, the statistics page, the path.
pub fn route(head: &Head, root: &Path) -> Route {
    if head.method != "GET" && head.method != "HEAD" {
        return Route::Refuse(ServeError::Method);
    }
    if head.header("content-length").is_some_and(|v| v != "0")
        || head.header("transfer-encoding").is_some()
    {
        return Route::Refuse(ServeError::Body);
    }
    if head.target == STATS_PATH {
        return Route::Stats;
    }
    match resolve_target(root, &head.target) {
        Some(p) => Route::File(p),
        None => Route::Refuse(ServeError::Target),
    }
}

fn common(h: &mut ResponseHead, ctx: &PlanCtx) {
    h.push("Server", "vodlab");
    h.push("Date", ctx.date.to_string());
}

fn connection(h: &mut ResponseHead, keep: bool) {
    if !keep {
        h.push("Connection", "close");
    }
}

/// Plans the answer to an error: a short text body (none for HEAD), `Allow`
/// on 405, and `Connection: close` when the request's framing is not to be
/// trusted.
pub fn plan_error(err: &ServeError, is_head: bool, ctx: &PlanCtx) -> ResponsePlan {
    let status = err.status();
    let keep = ctx.keep_alive && !err.closes();
    let mut body = Vec::with_capacity(40);
    vodlab_http::server::write_u64(&mut body, u64::from(status));
    body.push(b' ');
    body.extend_from_slice(reason(status).as_bytes());
    body.push(b'\n');
    let mut h = ResponseHead::new(status);
    common(&mut h, ctx);
    h.push("Content-Type", "text/plain; charset=utf-8");
    h.push("Content-Length", body.len() as u64);
    if matches!(err, ServeError::Method) {
        h.push("Allow", "GET, HEAD");
    }
    connection(&mut h, keep);
    ResponsePlan {
        head: h,
        body: if is_head {
            Body::None
        } else {
            Body::Bytes(body)
        },
        kind: ResponseKind::Error,
        keep_alive: keep,
        offset: 0,
        length: 0,
    }
}

/// Plans the statistics page around its JSON text.
pub fn plan_stats(json: String, is_head: bool, ctx: &PlanCtx) -> ResponsePlan {
    let mut h = ResponseHead::new(200);
    h.push("Server", "vodlab");
    h.push("Content-Type", "application/json");
    h.push("Content-Length", json.len() as u64);
    h.push("Cache-Control", "no-store");
    connection(&mut h, ctx.keep_alive);
    ResponsePlan {
        head: h,
        body: if is_head {
            Body::None
        } else {
            Body::Bytes(json.into_bytes())
        },
        kind: ResponseKind::Stats,
        keep_alive: ctx.keep_alive,
        offset: 0,
        length: 0,
    }
}

/// Whether `If-Range` (absent, a strong ETag, or an HTTP date equal to the
/// modification time to the second) lets the Range header apply.
pub fn if_range_holds(head: &Head, file: &FileMeta) -> bool {
    match head.header("if-range") {
        None => true,
        Some(v) if v.starts_with('"') => v == file.etag(),
        Some(v) => match (httpdate::parse_http_date(v), file.mtime) {
            (Ok(d), Some(m)) => d
                .duration_since(std::time::UNIX_EPOCH)
                .is_ok_and(|d| d.as_secs() == m),
            _ => false,
        },
    }
}

/// How the request's ranges apply to the file: If-Range, then the Range
/// header (a malformed one is ignored: the whole file).
pub fn resolve_ranges(head: &Head, file: &FileMeta) -> Resolved {
    match head
        .header("range")
        .filter(|_| if_range_holds(head, file))
        .and_then(range::parse)
    {
        Some(specs) => range::resolve(&specs, file.size),
        None => Resolved::Full,
    }
}

/// Plans the answer with a file: an error for anything but a regular file,
/// else 200, 206 (one range or multipart) or 416. HEAD gets the same head
/// and no body.
pub fn plan(head: &Head, file: &FileMeta, ctx: &PlanCtx) -> ResponsePlan {
    let is_head = head.method == "HEAD";
    if file.kind != FileKind::Regular {
        return plan_error(&ServeError::NotRegular, is_head, ctx);
    }
    if names_a_directory(&head.target) {
        // `/file.txt/`: a file is not a directory
        return plan_error(&ServeError::NotFound, is_head, ctx);
    }
    let size = file.size;
    let mut h = ResponseHead::new(200);
    common(&mut h, ctx);
    h.push("Last-Modified", file.last_modified());
    h.push("ETag", file.etag());
    h.push("Accept-Ranges", "bytes");
    connection(&mut h, ctx.keep_alive);
    let (kind, body, offset, length) = match resolve_ranges(head, file) {
        Resolved::Unsatisfiable => {
            h.status = 416;
            h.push("Content-Range", HeaderValue::Unsatisfied { size });
            h.push("Content-Length", 0u64);
            (ResponseKind::Unsatisfiable, Body::None, 0, 0)
        }
        Resolved::Full => {
            h.push("Content-Type", file.content_type);
            h.push("Content-Length", size);
            let r = ByteRange {
                offset: 0,
                len: size,
            };
            (ResponseKind::Full, Body::File(r), 0, size)
        }
        Resolved::Single(a, b) => {
            h.status = 206;
            h.push("Content-Type", file.content_type);
            h.push("Content-Length", b - a + 1);
            h.push(
                "Content-Range",
                HeaderValue::Range {
                    first: a,
                    last: b,
                    size,
                },
            );
            let r = ByteRange {
                offset: a,
                len: b - a + 1,
            };
            (ResponseKind::Range, Body::File(r), a, b - a + 1)
        }
        Resolved::Multi(ranges) => {
            h.status = 206;
            let boundary = format!("vodlab{:016x}", file.key ^ ctx.conn.rotate_left(32));
            let parts: Vec<Part> = ranges
                .iter()
                .map(|&(a, b)| {
                    let mut ph = Vec::with_capacity(96);
                    ph.extend_from_slice(b"--");
                    ph.extend_from_slice(boundary.as_bytes());
                    ph.extend_from_slice(b"\r\nContent-Type: ");
                    ph.extend_from_slice(file.content_type.as_bytes());
                    ph.extend_from_slice(b"\r\nContent-Range: ");
                    HeaderValue::Range {
                        first: a,
                        last: b,
                        size,
                    }
                    .write(&mut ph);
                    ph.extend_from_slice(b"\r\n\r\n");
                    Part {
                        head: ph,
                        range: ByteRange {
                            offset: a,
                            len: b - a + 1,
                        },
                    }
                })
                .collect();
            let closing = format!("--{boundary}--\r\n").into_bytes();
            let body = Body::Multipart { parts, closing };
            h.push(
                "Content-Type",
                format!("multipart/byteranges; boundary={boundary}"),
            );
            h.push("Content-Length", body.wire_len());
            let covered = ranges.iter().map(|(a, b)| b - a + 1).sum();
            (ResponseKind::Multipart, body, ranges[0].0, covered)
        }
    };
    ResponsePlan {
        head: h,
        body: if is_head { Body::None } else { body },
        kind,
        keep_alive: ctx.keep_alive,
        offset,
        length,
    }
}

/// Whether a target's path ends in a slash (also percent-encoded).
pub fn names_a_directory(target: &str) -> bool {
    let path = target.split(['?', '#']).next().unwrap_or("");
    path.ends_with('/') || path.len() >= 3 && path[path.len() - 3..].eq_ignore_ascii_case("%2f")
}

/// Encodes the plan's head into `out` (appended; the caller reuses it).
pub fn encode_head(plan: &ResponsePlan, out: &mut Vec<u8>) {
    encode_response_head(&plan.head, out);
}

/// The plan's head as an HTTP/2 or HTTP/3 response: connection-specific fields
/// (`Connection`, `Keep-Alive`, `Transfer-Encoding`) are dropped (RFC 9113
/// §8.2.2).
pub(crate) fn to_response(p: &ResponsePlan) -> http::Response<()> {
    let mut r = http::Response::builder().status(p.head.status);
    for (name, value) in &p.head.headers {
        if name.eq_ignore_ascii_case("connection")
            || name.eq_ignore_ascii_case("keep-alive")
            || name.eq_ignore_ascii_case("transfer-encoding")
        {
            continue;
        }
        let mut v = Vec::new();
        value.write(&mut v);
        r = r.header(name.to_ascii_lowercase(), v);
    }
    r.body(()).expect("a valid response head")
}

#[cfg(test)]
mod tests;
