//! The request encoder: one request head (and body) appended to a caller's
//! buffer, validated against header injection first.

use std::fmt;

use thiserror::Error;

/// The `User-Agent` every vodlab request carries: `vodlab/<version>`.
pub const USER_AGENT: &str = concat!("vodlab/", env!("CARGO_PKG_VERSION"));

/// One request to encode. Borrowed from the caller: encoding copies these
/// bytes into the output buffer and allocates nothing else.
#[derive(Debug, Clone, Copy)]
pub struct RequestHead<'a> {
    /// Method token (`GET`, `HEAD`, ...).
    pub method: &'a str,
    /// Request target. A target that does not start with `/` gets one
    /// prepended, except `*` and absolute-form targets (`scheme://...`).
    pub target: &'a str,
    /// `Host` header value.
    pub host: &'a str,
    /// Send `HTTP/1.0` (with `Connection: keep-alive`) instead of `HTTP/1.1`.
    pub http10: bool,
    /// `Range` header value, e.g. `bytes=0-99`.
    pub range: Option<&'a str>,
    /// Extra header lines, each a whole `Name: value` without line break.
    pub headers: &'a [String],
    /// Session id sent as `X-Vodlab-Session`.
    pub session: Option<u64>,
    /// Request body; sent with `Content-Length`.
    pub body: Option<&'a [u8]>,
}

/// The part of a request that an [`EncodeError`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// The method.
    Method,
    /// The request target.
    Target,
    /// The `Host` value.
    Host,
    /// The `Range` value.
    Range,
    /// The extra header line with this index in [`RequestHead::headers`].
    Header(usize),
}

impl fmt::Display for Part {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Part::Method => f.write_str("method"),
            Part::Target => f.write_str("target"),
            Part::Host => f.write_str("Host value"),
            Part::Range => f.write_str("Range value"),
            Part::Header(i) => write!(f, "extra header line {i}"),
        }
    }
}

/// Why a request could not be encoded. Nothing was written to the output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum EncodeError {
    /// CR or LF inside a field: it would start a new header line or end
    /// the head (header injection), so the request is refused.
    #[error("the request's {part} contains a CR or LF byte (header injection refused)")]
    LineBreak {
        /// Where.
        part: Part,
    },
    /// Another byte that cannot appear in this part (a control byte, or a
    /// space in the method or target, which would split the request line).
    #[error("the request's {part} contains the forbidden byte 0x{byte:02x}")]
    ForbiddenByte {
        /// Where.
        part: Part,
        /// The byte.
        byte: u8,
    },
    /// An empty method or target, or a method that is not a token.
    #[error("the request's {part} is empty or not a valid token")]
    Invalid {
        /// Where.
        part: Part,
    },
    /// An extra header line that is not `Name: value` with a token name.
    #[error("{part} is not `Name: value` with a token name")]
    MalformedHeader {
        /// Where.
        part: Part,
    },
}

/// RFC 9110 `tchar`.
pub(crate) fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// Checks a field value: no CR/LF, no control byte other than HTAB; with
/// `no_space`, no SP or HTAB either (request-line parts).
fn check(part: Part, s: &str, no_space: bool) -> Result<(), EncodeError> {
    for &b in s.as_bytes() {
        match b {
            b'\r' | b'\n' => return Err(EncodeError::LineBreak { part }),
            b' ' | b'\t' if no_space => return Err(EncodeError::ForbiddenByte { part, byte: b }),
            b'\t' => {}
            0..=0x1f | 0x7f => return Err(EncodeError::ForbiddenByte { part, byte: b }),
            _ => {}
        }
    }
    Ok(())
}

fn validate(req: &RequestHead<'_>) -> Result<(), EncodeError> {
    check(Part::Method, req.method, true)?;
    if req.method.is_empty() || !req.method.bytes().all(is_tchar) {
        return Err(EncodeError::Invalid { part: Part::Method });
    }
    check(Part::Target, req.target, true)?;
    check(Part::Host, req.host, true)?;
    if let Some(r) = req.range {
        check(Part::Range, r, false)?;
    }
    for (i, h) in req.headers.iter().enumerate() {
        let part = Part::Header(i);
        check(part, h, false)?;
        match h.split_once(':') {
            Some((name, _)) if !name.is_empty() && name.bytes().all(is_tchar) => {}
            _ => return Err(EncodeError::MalformedHeader { part }),
        }
    }
    Ok(())
}

/// Appends `n` in decimal.
fn push_u64(out: &mut Vec<u8>, n: u64) {
    let mut buf = itoa::Buffer::new();
    out.extend_from_slice(buf.format(n).as_bytes());
}

/// Encodes `req` and appends it (head, then body) to `out`.
///
/// The head is, in this order: the request line, `Host`, `User-Agent:
/// vodlab/<version>`, `X-Vodlab-Session` (when `session` is set),
/// `Connection: keep-alive` (HTTP/1.0 only), `Range` (when set), the extra
/// lines as given, `Content-Length` (when there is a body), an empty line.
///
/// Every field is checked first: a CR or LF anywhere (header injection),
/// a control byte, a space in the method, target or host, a method that is
/// not a token or an extra line that is not `Name: value` is refused with
/// an [`EncodeError`] and `out` is left unchanged. Allocates nothing but
/// the growth of `out`.
pub fn encode_request(req: &RequestHead<'_>, out: &mut Vec<u8>) -> Result<(), EncodeError> {
    validate(req)?;
    let extra: usize = req.headers.iter().map(|h| h.len() + 2).sum();
    out.reserve(
        req.method.len()
            + req.target.len()
            + req.host.len()
            + req.range.map_or(0, str::len)
            + req.body.map_or(0, <[u8]>::len)
            + extra
            + 160,
    );
    out.extend_from_slice(req.method.as_bytes());
    out.push(b' ');
    let t = req.target;
    if !t.starts_with('/') && t != "*" && !t.contains("://") {
        out.push(b'/');
    }
    out.extend_from_slice(t.as_bytes());
    out.extend_from_slice(if req.http10 {
        b" HTTP/1.0\r\nHost: "
    } else {
        b" HTTP/1.1\r\nHost: "
    });
    out.extend_from_slice(req.host.as_bytes());
    out.extend_from_slice(b"\r\nUser-Agent: ");
    out.extend_from_slice(USER_AGENT.as_bytes());
    if let Some(s) = req.session {
        out.extend_from_slice(b"\r\nX-Vodlab-Session: ");
        push_u64(out, s);
    }
    if req.http10 {
        out.extend_from_slice(b"\r\nConnection: keep-alive");
    }
    if let Some(r) = req.range {
        out.extend_from_slice(b"\r\nRange: ");
        out.extend_from_slice(r.as_bytes());
    }
    for h in req.headers {
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(h.as_bytes());
    }
    if let Some(b) = req.body {
        out.extend_from_slice(b"\r\nContent-Length: ");
        push_u64(out, b.len() as u64);
    }
    out.extend_from_slice(b"\r\n\r\n");
    if let Some(b) = req.body {
        out.extend_from_slice(b);
    }
    Ok(())
}
