//! The response head: what the decoder keeps of the status line and header
//! fields, how it derives framing and persistence from them, and the
//! decoder's error.

use std::mem::MaybeUninit;

use thiserror::Error;

/// Longest response head accepted (each head: an interim one or the final one).
pub const MAX_HEAD_BYTES: usize = 64 * 1024;
/// Most header fields accepted in one response head.
pub const MAX_HEADERS: usize = 256;

/// Why a response could not be decoded. After an error the connection's
/// framing is lost: close it.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DecodeError {
    /// Bytes that are not an HTTP/1 response: status line, header syntax,
    /// chunk size, chunk delimiters or trailers.
    #[error("malformed response: {0}")]
    Malformed(String),
    /// A head (or the trailer section) longer than [`MAX_HEAD_BYTES`], or
    /// more than [`MAX_HEADERS`] header fields.
    #[error("response head over {MAX_HEAD_BYTES} bytes or {MAX_HEADERS} header fields")]
    HeaderTooLarge,
    /// A Content-Length value that is not a decimal number (or overflows).
    #[error("invalid Content-Length `{0}`")]
    InvalidContentLength(String),
    /// Two Content-Length values that differ.
    #[error("conflicting Content-Length values {0} and {1}")]
    ConflictingContentLength(u64, u64),
    /// The connection closed before any byte of the response arrived (on a
    /// reused connection: the server had closed it; a retry is safe).
    #[error("connection closed before any byte of the response")]
    ClosedBeforeResponse,
    /// The connection closed inside a response head.
    #[error("connection closed inside the response head")]
    ClosedInHead,
    /// The connection closed inside the body.
    #[error(
        "connection closed after {got} body bytes of {}",
        match .expected { Some(n) => n.to_string(), None => "a chunked body".to_string() }
    )]
    ShortBody {
        /// Body bytes received.
        got: u64,
        /// The Content-Length; `None` for a chunked body.
        expected: Option<u64>,
    },
    /// A response vodlab does not decode: 101 Switching Protocols, a
    /// transfer coding other than chunked.
    #[error("unsupported response: {0}")]
    Unsupported(String),
}

/// HTTP version of a response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    /// `HTTP/1.0`.
    Http10,
    /// `HTTP/1.1`.
    Http11,
}

/// How the body of a response is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// No body by rule: a response to HEAD, a 204 or a 304 (whatever its
    /// Content-Length says).
    Empty,
    /// Exactly this many bytes (`Content-Length`).
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
    /// Neither: the body runs until the server closes the connection.
    UntilClose,
}

/// The final response head, with only the fields vodlab uses (no copy of
/// header names or values is kept).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResponseHead {
    /// Status code (200 to 999; never 1xx, those are skipped).
    pub status: u16,
    /// Version of the status line.
    pub version: Version,
    /// `Content-Length` as sent (also on HEAD, 204 and 304 responses, where
    /// it does not delimit a body).
    pub content_length: Option<u64>,
    /// `Content-Range: bytes first-last/total` (total `None` for `*`), when
    /// present and valid (see [`parse_content_range`]).
    pub content_range: Option<(u64, u64, Option<u64>)>,
    /// The connection may carry another request after this response:
    /// HTTP/1.1 unless `Connection: close`; HTTP/1.0 only with
    /// `Connection: keep-alive`; never after a close-delimited body, a
    /// message with both Content-Length and Transfer-Encoding, or an
    /// HTTP/1.0 message with Transfer-Encoding.
    pub keep_alive: bool,
    /// Bytes of all heads of this exchange: the skipped 1xx heads and the
    /// final one.
    pub header_bytes: u64,
    /// How the body is delimited.
    pub framing: Framing,
    /// 1xx interim responses (100 Continue, 103 Early Hints, ...) skipped
    /// before this one.
    pub interim: u32,
}

/// Parses `bytes first-last/total` (total may be `*`), the value of a
/// Content-Range header. `None` unless the unit is `bytes` (any case), the
/// positions are decimal digits, `first <= last`, and `last < total` when
/// the total is known. `bytes */total` (an unsatisfied range) gives `None`.
pub fn parse_content_range(v: &str) -> Option<(u64, u64, Option<u64>)> {
    content_range(v.as_bytes())
}

/// [`parse_content_range`] on bytes.
pub(crate) fn content_range(v: &[u8]) -> Option<(u64, u64, Option<u64>)> {
    let v = trim_ows(v);
    if v.len() < 6 || !v[..5].eq_ignore_ascii_case(b"bytes") || !matches!(v[5], b' ' | b'\t') {
        return None;
    }
    let (a, rest) = leading_digits(trim_ows(&v[6..]))?;
    let (b, rest) = leading_digits(rest.strip_prefix(b"-")?)?;
    let total = match rest.strip_prefix(b"/")? {
        b"*" => None,
        t => Some(parse_digits(t)?),
    };
    if a > b || total.is_some_and(|t| b >= t) {
        return None;
    }
    Some((a, b, total))
}

/// A number at the start of `s` (at least one digit) and what follows it.
fn leading_digits(s: &[u8]) -> Option<(u64, &[u8])> {
    let n = s.iter().take_while(|b| b.is_ascii_digit()).count();
    Some((parse_digits(&s[..n])?, &s[n..]))
}

/// Strict `1*DIGIT` into u64 (no sign, no space, no overflow).
pub(crate) fn parse_digits(s: &[u8]) -> Option<u64> {
    if s.is_empty() {
        return None;
    }
    let mut n = 0u64;
    for &c in s {
        if !c.is_ascii_digit() {
            return None;
        }
        n = n.checked_mul(10)?.checked_add(u64::from(c - b'0'))?;
    }
    Some(n)
}

fn trim_ows(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = s {
        s = rest;
    }
    s
}

/// A comma-separated list's non-empty elements, trimmed.
fn list(v: &[u8]) -> impl Iterator<Item = &[u8]> {
    v.split(|&b| b == b',')
        .map(trim_ows)
        .filter(|e| !e.is_empty())
}

/// Shows a header value in an error message.
fn show(v: &[u8]) -> String {
    String::from_utf8_lossy(&v[..v.len().min(64)]).into_owned()
}

/// One complete head parsed.
pub(crate) enum Parsed {
    /// The input does not hold a whole head yet.
    Partial,
    /// A 1xx interim head of this many bytes, to skip.
    Interim(usize),
    /// The final head: its length and fields (`header_bytes` and `interim`
    /// still to be filled by the caller), and its `CMSD-Dynamic` value.
    Final(usize, ResponseHead, Option<String>),
}

/// Parses one head at the start of `input`.
pub(crate) fn parse(input: &[u8], head_request: bool) -> Result<Parsed, DecodeError> {
    let buf = &input[..input.len().min(MAX_HEAD_BYTES)];
    let mut headers = [MaybeUninit::<httparse::Header<'_>>::uninit(); MAX_HEADERS];
    let mut resp = httparse::Response::new(&mut []);
    let n = match httparse::ParserConfig::default().parse_response_with_uninit_headers(
        &mut resp,
        buf,
        &mut headers,
    ) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) if input.len() >= MAX_HEAD_BYTES => {
            return Err(DecodeError::HeaderTooLarge)
        }
        Ok(httparse::Status::Partial) => return Ok(Parsed::Partial),
        Err(httparse::Error::TooManyHeaders) => return Err(DecodeError::HeaderTooLarge),
        Err(e) => return Err(DecodeError::Malformed(format!("bad response head: {e}"))),
    };
    let status = resp.code.unwrap_or(0);
    match status {
        101 => {
            return Err(DecodeError::Unsupported(
                "101 Switching Protocols (vodlab never asks for an upgrade)".into(),
            ))
        }
        100..=199 => return Ok(Parsed::Interim(n)),
        0..=99 => return Err(DecodeError::Malformed(format!("status code {status:03}"))),
        _ => {}
    }
    let version = if resp.version == Some(1) {
        Version::Http11
    } else {
        Version::Http10
    };
    let mut content_length: Option<u64> = None;
    let mut content_range = None;
    // transfer codings: seen at all, how many `chunked`, the first other one
    let mut te = false;
    let mut te_chunked = 0u32;
    let mut te_other: Option<&[u8]> = None;
    let mut conn_close = false;
    let mut conn_keep = false;
    let mut cmsd_dynamic: Option<String> = None;
    for h in resp.headers.iter() {
        let name = h.name.as_bytes();
        // dispatch on the length first: most fields are none of these
        match name.len() {
            14 if name.eq_ignore_ascii_case(b"content-length") => {
                // a list of identical values is one value (RFC 9110 §8.6)
                let value = trim_ows(h.value);
                let mut any = false;
                for e in value.split(|&b| b == b',').map(trim_ows) {
                    let l = parse_digits(e)
                        .ok_or_else(|| DecodeError::InvalidContentLength(show(value)))?;
                    any = true;
                    match content_length {
                        Some(prev) if prev != l => {
                            return Err(DecodeError::ConflictingContentLength(prev, l))
                        }
                        _ => content_length = Some(l),
                    }
                }
                if !any {
                    return Err(DecodeError::InvalidContentLength(show(value)));
                }
            }
            17 if name.eq_ignore_ascii_case(b"transfer-encoding") => {
                te = true;
                for coding in list(h.value) {
                    if coding.eq_ignore_ascii_case(b"chunked") {
                        te_chunked += 1;
                    } else {
                        te_other.get_or_insert(coding);
                    }
                }
            }
            10 if name.eq_ignore_ascii_case(b"connection") => {
                for token in list(h.value) {
                    if token.eq_ignore_ascii_case(b"close") {
                        conn_close = true;
                    } else if token.eq_ignore_ascii_case(b"keep-alive") {
                        conn_keep = true;
                    }
                }
            }
            13 if name.eq_ignore_ascii_case(b"content-range") => {
                content_range = self::content_range(h.value);
            }
            12 if name.eq_ignore_ascii_case(b"cmsd-dynamic") => {
                // field lines of a list combine with `,` (RFC 9110 §5.3)
                let v = String::from_utf8_lossy(trim_ows(h.value));
                match &mut cmsd_dynamic {
                    Some(prev) => {
                        prev.push(',');
                        prev.push_str(&v);
                    }
                    None => cmsd_dynamic = Some(v.into_owned()),
                }
            }
            _ => {}
        }
    }
    let mut keep_alive = !conn_close
        && match version {
            Version::Http11 => true,
            Version::Http10 => conn_keep,
        };
    if te && (content_length.is_some() || version == Version::Http10) {
        // RFC 9112 §6.1, §6.3: Transfer-Encoding wins; the framing is
        // suspect, so the connection is not reused
        keep_alive = false;
    }
    let framing = if head_request || status == 204 || status == 304 {
        Framing::Empty
    } else if te {
        if let Some(other) = te_other {
            return Err(DecodeError::Unsupported(format!(
                "transfer coding `{}` (only chunked is decoded)",
                show(other)
            )));
        }
        if te_chunked != 1 {
            return Err(DecodeError::Malformed(format!(
                "Transfer-Encoding must name chunked once, not {te_chunked} times"
            )));
        }
        Framing::Chunked
    } else if let Some(l) = content_length {
        Framing::Length(l)
    } else {
        keep_alive = false;
        Framing::UntilClose
    };
    Ok(Parsed::Final(
        n,
        ResponseHead {
            status,
            version,
            content_length,
            content_range,
            keep_alive,
            header_bytes: 0,
            framing,
            interim: 0,
        },
        cmsd_dynamic,
    ))
}
