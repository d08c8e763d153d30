//! Server side of the HTTP/1 codec: the request-head parser and the
//! response-head encoder. Pure: bytes in, a request or a typed rejection
//! out; a typed head in, bytes out.

use std::borrow::Cow;

/// Largest request head (request line and headers).
pub const MAX_HEAD: usize = 16 * 1024;
/// Most header fields.
pub const MAX_HEADERS: usize = 64;

/// A parsed request head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    /// Method.
    pub method: String,
    /// Request target as sent.
    pub target: String,
    /// HTTP/1.1 (else 1.0).
    pub http11: bool,
    /// Header fields, names lower-cased.
    pub headers: Vec<(String, String)>,
    /// Bytes the head took.
    pub len: usize,
}

impl Head {
    /// First value of a header (name in lower case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// Whether the connection stays open after the response.
    pub fn keep_alive(&self) -> bool {
        let conn = self.header("connection").map(|v| v.to_ascii_lowercase());
        match conn.as_deref() {
            Some(v) if v.contains("close") => false,
            Some(v) if v.contains("keep-alive") => true,
            _ => self.http11,
        }
    }
}

/// Why a head was rejected (the status to answer with).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reject {
    /// 400.
    BadRequest,
    /// 431: head too large or too many fields.
    TooLarge,
    /// 505.
    Version,
}

impl Reject {
    /// The status code to answer with.
    pub fn status(self) -> u16 {
        match self {
            Reject::BadRequest => 400,
            Reject::TooLarge => 431,
            Reject::Version => 505,
        }
    }
}

/// Parses a request head from the start of `buf`: `Ok(None)` when more
/// bytes are needed.
pub fn parse_head(buf: &[u8]) -> Result<Option<Head>, Reject> {
    let mut fields = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut fields);
    match req.parse(buf) {
        Ok(httparse::Status::Complete(len)) => {
            let http11 = match req.version {
                Some(1) => true,
                Some(0) => false,
                _ => return Err(Reject::Version),
            };
            let headers = req
                .headers
                .iter()
                .map(|h| {
                    (
                        h.name.to_ascii_lowercase(),
                        String::from_utf8_lossy(h.value).trim().to_string(),
                    )
                })
                .collect();
            Ok(Some(Head {
                method: req.method.unwrap_or("").to_string(),
                target: req.path.unwrap_or("").to_string(),
                http11,
                headers,
                len,
            }))
        }
        Ok(httparse::Status::Partial) if buf.len() >= MAX_HEAD => Err(Reject::TooLarge),
        Ok(httparse::Status::Partial) => Ok(None),
        Err(httparse::Error::TooManyHeaders) => Err(Reject::TooLarge),
        Err(httparse::Error::Version) => Err(Reject::Version),
        Err(_) => Err(Reject::BadRequest),
    }
}

/// How a request's body is delimited (RFC 9112 section 6.3), as
/// [`check_request`] found it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyFraming {
    /// No body: neither `Content-Length` nor `Transfer-Encoding`.
    None,
    /// `Content-Length: N` (one value, or repeated identical values).
    Length(u64),
    /// `Transfer-Encoding: chunked` (the only coding accepted; its length is
    /// unknown until the last chunk).
    Chunked,
}

impl BodyFraming {
    /// Whether a body follows the head (`Content-Length: 0` has none).
    pub fn has_body(self) -> bool {
        !matches!(self, BodyFraming::None | BodyFraming::Length(0))
    }
}

/// Checks what a server must check before trusting a parsed head, and
/// brings its target to origin form:
///
/// - HTTP/1.1 without `Host`, or with more than one `Host` field → 400
///   (RFC 9112 section 3.2);
/// - `Content-Length` values that differ (in one field as a list, or over
///   several fields) or are not decimal numbers → 400; `Content-Length`
///   together with `Transfer-Encoding` → 400; a `Transfer-Encoding` other
///   than exactly `chunked`, or any on HTTP/1.0 → 400 (section 6.3, the
///   request-smuggling rules: the server answers and closes);
/// - an absolute-form target (`http://host/path?q`) becomes its origin form
///   (`/path?q`; `/` when it has no path), section 3.2.2.
///
/// Returns how the body is delimited; the caller must read and discard it
/// (or close) before it reads the next head.
pub fn check_request(head: &mut Head) -> Result<BodyFraming, Reject> {
    let hosts = head.headers.iter().filter(|(k, _)| k == "host").count();
    if hosts > 1 || (hosts == 0 && head.http11) {
        return Err(Reject::BadRequest);
    }
    let mut length: Option<u64> = None;
    let mut te: Option<&str> = None;
    for (k, v) in &head.headers {
        match k.as_str() {
            "content-length" => {
                for item in v.split(',') {
                    let item = item.trim();
                    if item.is_empty()
                        || item.len() > 19
                        || !item.bytes().all(|b| b.is_ascii_digit())
                    {
                        return Err(Reject::BadRequest);
                    }
                    let n: u64 = item.parse().map_err(|_| Reject::BadRequest)?;
                    if length.is_some_and(|l| l != n) {
                        return Err(Reject::BadRequest);
                    }
                    length = Some(n);
                }
            }
            "transfer-encoding" => {
                if te.is_some() {
                    return Err(Reject::BadRequest);
                }
                te = Some(v.as_str());
            }
            _ => {}
        }
    }
    let framing = match (length, te) {
        (Some(_), Some(_)) => return Err(Reject::BadRequest),
        (None, Some(t)) if head.http11 && t.trim().eq_ignore_ascii_case("chunked") => {
            BodyFraming::Chunked
        }
        (None, Some(_)) => return Err(Reject::BadRequest),
        (Some(n), None) => BodyFraming::Length(n),
        (None, None) => BodyFraming::None,
    };
    if let Some(origin) = origin_form(&head.target) {
        head.target = origin;
    }
    Ok(framing)
}

/// The origin form of an absolute-form target (`http://host:80/a?b` →
/// `/a?b`, `https://host` → `/`); `None` for any other form. An empty
/// authority is not absolute form.
pub fn origin_form(target: &str) -> Option<String> {
    // compared as bytes: a target may have a multi-byte character across
    // byte 7 or 8 (slicing the str there panicked; found by `cargo fuzz`)
    let b = target.as_bytes();
    let scheme_len = if b.len() >= 7 && b[..7].eq_ignore_ascii_case(b"http://") {
        7
    } else if b.len() >= 8 && b[..8].eq_ignore_ascii_case(b"https://") {
        8
    } else {
        return None;
    };
    let rest = &target[scheme_len..];
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    if end == 0 {
        return None;
    }
    let tail = &rest[end..];
    Some(match tail.as_bytes().first() {
        Some(b'/') => tail.to_string(),
        Some(_) => format!("/{tail}"),
        None => "/".to_string(),
    })
}

/// The reason phrase of a status code (RFC 9110 section 15); `""` for codes
/// without one here (the phrase is optional on the wire).
pub fn reason(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        101 => "Switching Protocols",
        200 => "OK",
        201 => "Created",
        204 => "No Content",
        206 => "Partial Content",
        301 => "Moved Permanently",
        302 => "Found",
        304 => "Not Modified",
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        413 => "Content Too Large",
        416 => "Range Not Satisfiable",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        503 => "Service Unavailable",
        505 => "HTTP Version Not Supported",
        _ => "",
    }
}

/// A header value, kept typed so numbers and ranges are written without an
/// intermediate `String`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeaderValue {
    /// Text written as is (must not contain CR or LF).
    Text(Cow<'static, str>),
    /// A decimal number (Content-Length).
    Number(u64),
    /// `bytes A-B/SIZE` (Content-Range of a 206 or of a multipart part).
    Range {
        /// First byte.
        first: u64,
        /// Last byte (inclusive).
        last: u64,
        /// Complete length.
        size: u64,
    },
    /// `bytes */SIZE` (Content-Range of a 416).
    Unsatisfied {
        /// Complete length.
        size: u64,
    },
}

impl From<&'static str> for HeaderValue {
    fn from(s: &'static str) -> Self {
        HeaderValue::Text(Cow::Borrowed(s))
    }
}

impl From<String> for HeaderValue {
    fn from(s: String) -> Self {
        HeaderValue::Text(Cow::Owned(s))
    }
}

impl From<u64> for HeaderValue {
    fn from(n: u64) -> Self {
        HeaderValue::Number(n)
    }
}

impl HeaderValue {
    /// Appends the value's bytes to `out`.
    pub fn write(&self, out: &mut Vec<u8>) {
        match self {
            HeaderValue::Text(t) => out.extend_from_slice(t.as_bytes()),
            HeaderValue::Number(n) => write_u64(out, *n),
            HeaderValue::Range { first, last, size } => {
                out.extend_from_slice(b"bytes ");
                write_u64(out, *first);
                out.push(b'-');
                write_u64(out, *last);
                out.push(b'/');
                write_u64(out, *size);
            }
            HeaderValue::Unsatisfied { size } => {
                out.extend_from_slice(b"bytes */");
                write_u64(out, *size);
            }
        }
    }

    /// The value as text (allocates; for tests and logs).
    pub fn to_text(&self) -> String {
        let mut v = Vec::new();
        self.write(&mut v);
        String::from_utf8_lossy(&v).into_owned()
    }
}

/// A response head: status (the reason phrase derives from it) and header
/// fields in the order they are written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResponseHead {
    /// Status code.
    pub status: u16,
    /// Header fields (names as written).
    pub headers: Vec<(Cow<'static, str>, HeaderValue)>,
}

impl ResponseHead {
    /// A head with a status and no fields.
    pub fn new(status: u16) -> Self {
        Self {
            status,
            headers: Vec::with_capacity(12),
        }
    }

    /// Appends a field.
    pub fn push(&mut self, name: impl Into<Cow<'static, str>>, value: impl Into<HeaderValue>) {
        self.headers.push((name.into(), value.into()));
    }

    /// Appends a field (builder style).
    pub fn with(
        mut self,
        name: impl Into<Cow<'static, str>>,
        value: impl Into<HeaderValue>,
    ) -> Self {
        self.push(name, value);
        self
    }

    /// First value of a field, by case-insensitive name.
    pub fn get(&self, name: &str) -> Option<&HeaderValue> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v)
    }

    /// The reason phrase of the status.
    pub fn reason(&self) -> &'static str {
        reason(self.status)
    }
}

/// Appends the HTTP/1.1 encoding of `head` (status line, fields, blank line)
/// to `out`. The caller reuses `out` across responses (clear it first); no
/// per-field allocation.
pub fn encode_response_head(head: &ResponseHead, out: &mut Vec<u8>) {
    out.extend_from_slice(b"HTTP/1.1 ");
    write_u64(out, u64::from(head.status));
    out.push(b' ');
    out.extend_from_slice(head.reason().as_bytes());
    out.extend_from_slice(b"\r\n");
    for (name, value) in &head.headers {
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b": ");
        value.write(out);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
}

/// Appends the decimal digits of `n`.
pub fn write_u64(out: &mut Vec<u8>, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[i..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heads_parse_with_limits() {
        let h = parse_head(b"GET /a HTTP/1.1\r\nHost: x\r\nRange: bytes=0-1\r\n\r\nGET /b")
            .unwrap()
            .unwrap();
        assert_eq!(h.method, "GET");
        assert_eq!(h.target, "/a");
        assert_eq!(h.header("range"), Some("bytes=0-1"));
        assert!(h.keep_alive());
        assert_eq!(h.len, 46);
        assert_eq!(parse_head(b"GET /a HTTP/1.1\r\nHost:"), Ok(None));
        assert_eq!(parse_head(b"GET /a FTP/1.1\r\n\r\n"), Err(Reject::Version));
        let many: String = (0..70).map(|i| format!("X-{i}: y\r\n")).collect();
        assert_eq!(
            parse_head(format!("GET / HTTP/1.1\r\n{many}\r\n").as_bytes()),
            Err(Reject::TooLarge)
        );
        let big = format!("GET /{} HTTP/1.1\r\n", "a".repeat(MAX_HEAD));
        assert_eq!(parse_head(big.as_bytes()), Err(Reject::TooLarge));
        let h10 = parse_head(b"GET / HTTP/1.0\r\n\r\n").unwrap().unwrap();
        assert!(!h10.keep_alive());
        let h10k = parse_head(b"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n")
            .unwrap()
            .unwrap();
        assert!(h10k.keep_alive());
        let close = parse_head(b"GET / HTTP/1.1\r\nConnection: close\r\n\r\n")
            .unwrap()
            .unwrap();
        assert!(!close.keep_alive());
        assert_eq!(
            parse_head(b"\x01\x02 / HTTP/1.1\r\n\r\n"),
            Err(Reject::BadRequest)
        );
        assert_eq!(
            [Reject::BadRequest, Reject::TooLarge, Reject::Version].map(Reject::status),
            [400, 431, 505]
        );
    }

    fn checked(text: &str) -> (Result<BodyFraming, Reject>, String) {
        let mut h = parse_head(text.as_bytes()).unwrap().unwrap();
        let r = check_request(&mut h);
        (r, h.target)
    }

    #[test]
    fn framing_follows_rfc_9112_section_6_3() {
        let f = |extra: &str| checked(&format!("GET /a HTTP/1.1\r\nHost: x\r\n{extra}\r\n")).0;
        assert_eq!(f(""), Ok(BodyFraming::None));
        assert_eq!(f("Content-Length: 0\r\n"), Ok(BodyFraming::Length(0)));
        assert_eq!(f("Content-Length: 12\r\n"), Ok(BodyFraming::Length(12)));
        // identical repeats are one length
        assert_eq!(
            f("Content-Length: 5\r\nContent-Length: 5\r\n"),
            Ok(BodyFraming::Length(5))
        );
        assert_eq!(f("Content-Length: 5, 5\r\n"), Ok(BodyFraming::Length(5)));
        assert_eq!(
            f("Transfer-Encoding: chunked\r\n"),
            Ok(BodyFraming::Chunked)
        );
        assert_eq!(
            f("Transfer-Encoding: Chunked \r\n"),
            Ok(BodyFraming::Chunked)
        );
        for bad in [
            "Content-Length: 0\r\nContent-Length: 40\r\n",
            "Content-Length: 40\r\nContent-Length: 0\r\n",
            "Content-Length: 5, 6\r\n",
            "Content-Length: -1\r\n",
            "Content-Length: +5\r\n",
            "Content-Length: 0x10\r\n",
            "Content-Length: \r\n",
            "Content-Length: 99999999999999999999\r\n",
            "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n",
            "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n",
            "Transfer-Encoding: gzip\r\n",
            "Transfer-Encoding: gzip, chunked\r\n",
            "Transfer-Encoding: chunked, chunked\r\n",
            "Transfer-Encoding: xchunked\r\n",
            "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n",
        ] {
            assert_eq!(f(bad), Err(Reject::BadRequest), "{bad:?}");
        }
        // Transfer-Encoding on HTTP/1.0 cannot be trusted
        assert_eq!(
            checked("POST /a HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n").0,
            Err(Reject::BadRequest)
        );
        assert!(!BodyFraming::None.has_body() && !BodyFraming::Length(0).has_body());
        assert!(BodyFraming::Length(1).has_body() && BodyFraming::Chunked.has_body());
    }

    #[test]
    fn host_is_required_once_and_absolute_targets_are_served() {
        assert_eq!(
            checked("GET /a HTTP/1.1\r\n\r\n").0,
            Err(Reject::BadRequest)
        );
        assert_eq!(
            checked("GET /a HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n").0,
            Err(Reject::BadRequest)
        );
        assert_eq!(
            checked("GET /a HTTP/1.1\r\nHost: x\r\nhost: x\r\n\r\n").0,
            Err(Reject::BadRequest)
        );
        // HTTP/1.0 needs none
        assert_eq!(
            checked("GET /a HTTP/1.0\r\n\r\n"),
            (Ok(BodyFraming::None), "/a".to_string())
        );
        for (target, origin) in [
            ("http://example.com/v.mp4?x=1", "/v.mp4?x=1"),
            ("HTTP://example.com:8080/t1/a.m4s", "/t1/a.m4s"),
            ("https://h", "/"),
            ("http://h?q", "/?q"),
            ("/plain", "/plain"),
            ("*", "*"),
            ("http:///nohost", "http:///nohost"),
            // a multi-byte character across bytes 7 and 8 (a panic before;
            // cargo fuzz's request_head found it)
            ("`\u{2001}\u{a001}\u{2000}", "`\u{2001}\u{a001}\u{2000}"),
            ("http:/\u{e9}x", "http:/\u{e9}x"),
        ] {
            let (r, t) = checked(&format!("GET {target} HTTP/1.1\r\nHost: x\r\n\r\n"));
            assert_eq!((r, t.as_str()), (Ok(BodyFraming::None), origin), "{target}");
        }
    }

    #[test]
    fn response_heads_encode_exactly() {
        let h = ResponseHead::new(206)
            .with("Server", "vodlab")
            .with("Content-Length", 500u64)
            .with(
                "Content-Range",
                HeaderValue::Range {
                    first: 0,
                    last: 499,
                    size: 10_000,
                },
            );
        let mut out = b"junk".to_vec();
        out.clear();
        encode_response_head(&h, &mut out);
        assert_eq!(
            out,
            b"HTTP/1.1 206 Partial Content\r\nServer: vodlab\r\nContent-Length: 500\r\nContent-Range: bytes 0-499/10000\r\n\r\n"
        );
        // appends: a reused buffer holds two heads back to back
        let mut two = Vec::new();
        encode_response_head(&ResponseHead::new(404), &mut two);
        encode_response_head(
            &ResponseHead::new(416).with("Content-Range", HeaderValue::Unsatisfied { size: 7 }),
            &mut two,
        );
        assert_eq!(
            two,
            b"HTTP/1.1 404 Not Found\r\n\r\nHTTP/1.1 416 Range Not Satisfiable\r\nContent-Range: bytes */7\r\n\r\n"
        );
        assert_eq!(
            h.get("content-range").map(HeaderValue::to_text).as_deref(),
            Some("bytes 0-499/10000")
        );
        let mut n = Vec::new();
        for v in [0u64, 9, 10, 1234567890, u64::MAX] {
            n.clear();
            write_u64(&mut n, v);
            assert_eq!(n, v.to_string().as_bytes());
        }
    }
}

#[cfg(test)]
mod roundtrip {
    use super::*;
    use proptest::prelude::*;

    fn value() -> impl Strategy<Value = HeaderValue> {
        prop_oneof![
            "[ -~]{0,40}".prop_map(|s| HeaderValue::Text(Cow::Owned(s.trim().to_string()))),
            any::<u64>().prop_map(HeaderValue::Number),
            (any::<u64>(), any::<u64>(), any::<u64>()).prop_map(|(a, b, s)| HeaderValue::Range {
                first: a.min(b),
                last: a.max(b),
                size: s
            }),
            any::<u64>().prop_map(|size| HeaderValue::Unsatisfied { size }),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1000))]
        /// Any head encoded and parsed back with httparse gives the same
        /// status, reason and fields in order.
        #[test]
        fn encoded_heads_parse_back(
            status in 100u16..600,
            fields in proptest::collection::vec(("[A-Za-z][A-Za-z0-9-]{0,20}", value()), 0..MAX_HEADERS),
        ) {
            let mut h = ResponseHead::new(status);
            for (k, v) in &fields {
                h.push(k.clone(), v.clone());
            }
            let mut out = Vec::new();
            encode_response_head(&h, &mut out);
            let mut parsed = [httparse::EMPTY_HEADER; MAX_HEADERS];
            let mut resp = httparse::Response::new(&mut parsed);
            let st = resp.parse(&out).unwrap();
            prop_assert_eq!(st, httparse::Status::Complete(out.len()));
            prop_assert_eq!(resp.code, Some(status));
            prop_assert_eq!(resp.reason, Some(reason(status)));
            prop_assert_eq!(resp.headers.len(), fields.len());
            for (p, (k, v)) in resp.headers.iter().zip(&fields) {
                prop_assert_eq!(p.name, k.as_str());
                prop_assert_eq!(std::str::from_utf8(p.value).unwrap(), v.to_text());
            }
        }
    }
}
