//! What one exchange produced: the server's answer, or why it failed
//! (counted by type, never by message text). No I/O: the session driver and
//! the executors share these.

use std::io;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Why a request failed, counted by type (never by message text).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// Connection refused.
    Refused,
    /// Connection reset or broken pipe.
    Reset,
    /// The request did not complete within its timeout.
    Timeout,
    /// A status other than the expected 200/206.
    BadStatus,
    /// The connection closed before the body was complete.
    ShortBody,
    /// Malformed response (status line, headers, chunking).
    BadResponse,
    /// Content-Range, length or bytes differ from what was asked for.
    ContentMismatch,
    /// The client ran out of file descriptors (EMFILE/ENFILE).
    Descriptors,
    /// The client ran out of local ports (EADDRNOTAVAIL).
    Ports,
    /// Any other I/O error.
    Other,
}

impl ErrorKind {
    /// Every kind, in report order.
    pub const ALL: [ErrorKind; 10] = [
        ErrorKind::Refused,
        ErrorKind::Reset,
        ErrorKind::Timeout,
        ErrorKind::BadStatus,
        ErrorKind::ShortBody,
        ErrorKind::BadResponse,
        ErrorKind::ContentMismatch,
        ErrorKind::Descriptors,
        ErrorKind::Ports,
        ErrorKind::Other,
    ];

    /// Snake-case name used in results.
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::Refused => "refused",
            ErrorKind::Reset => "reset",
            ErrorKind::Timeout => "timeout",
            ErrorKind::BadStatus => "bad_status",
            ErrorKind::ShortBody => "short_body",
            ErrorKind::BadResponse => "bad_response",
            ErrorKind::ContentMismatch => "content_mismatch",
            ErrorKind::Descriptors => "descriptors",
            ErrorKind::Ports => "ports",
            ErrorKind::Other => "other",
        }
    }

    /// The kind in words, for summaries and reports.
    pub fn describe(self) -> &'static str {
        match self {
            ErrorKind::Refused => "connection refused",
            ErrorKind::Reset => "connection reset",
            ErrorKind::Timeout => "deadline missed",
            ErrorKind::BadStatus => "bad status",
            ErrorKind::ShortBody => "body cut short",
            ErrorKind::BadResponse => "malformed response",
            ErrorKind::ContentMismatch => "wrong content",
            ErrorKind::Descriptors => "client out of descriptors",
            ErrorKind::Ports => "client out of local ports",
            ErrorKind::Other => "other error",
        }
    }

    /// The words for a name in results (`bad_status`), or the name itself
    /// when it is none of [`ErrorKind::ALL`].
    pub fn describe_name(name: &str) -> &str {
        Self::ALL
            .iter()
            .find(|k| k.name() == name)
            .map_or(name, |k| k.describe())
    }

    /// True for errors that mean the client, not the server, failed.
    pub fn is_client_side(self) -> bool {
        matches!(self, ErrorKind::Descriptors | ErrorKind::Ports)
    }

    /// Classifies an I/O error.
    pub fn from_io(e: &io::Error) -> Self {
        match e.raw_os_error() {
            Some(libc::EMFILE) | Some(libc::ENFILE) => return ErrorKind::Descriptors,
            Some(libc::EADDRNOTAVAIL) => return ErrorKind::Ports,
            _ => {}
        }
        match e.kind() {
            io::ErrorKind::ConnectionRefused => ErrorKind::Refused,
            io::ErrorKind::ConnectionReset
            | io::ErrorKind::BrokenPipe
            | io::ErrorKind::ConnectionAborted => ErrorKind::Reset,
            io::ErrorKind::UnexpectedEof => ErrorKind::ShortBody,
            io::ErrorKind::TimedOut => ErrorKind::Timeout,
            _ => ErrorKind::Other,
        }
    }
}

/// A failed exchange.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// Type.
    pub kind: ErrorKind,
    /// True when nothing of the response arrived on a reused connection
    /// (the server had closed it): the caller may reconnect and retry.
    pub retryable: bool,
    /// The request never reached the server: it went out as QUIC 0-RTT
    /// that the server rejected. Its retry is not the one a request is
    /// allowed (the transport sends no 0-RTT again after a rejection, so
    /// this happens at most once a connection of a viewer).
    pub unsent: bool,
    /// Detail for logs and requests.csv.
    pub detail: String,
}

impl Failure {
    /// A failure that may not be retried.
    pub fn new(kind: ErrorKind, detail: impl Into<String>) -> Self {
        Self {
            kind,
            retryable: false,
            unsent: false,
            detail: detail.into(),
        }
    }
}

/// How a response body is read (script keys `stop_after=` and `read_kbps=`,
/// thesis ch. 5's clients): at most `stop_after` body bytes, after which the
/// connection is closed (HTTP/1.1) or the stream reset (HTTP/2), no faster
/// than `read_kbps` (the reads are spaced, so TCP's flow control paces the
/// server).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReadLimits {
    /// Stop after this many body bytes.
    pub stop_after: Option<u64>,
    /// Read at most this fast, kbit/s.
    pub read_kbps: Option<u64>,
}

impl ReadLimits {
    /// How long after the request was sent the reader may have taken
    /// `body` bytes (`None`: no read rate). The executor adds it to its own
    /// send time.
    pub fn due_after(&self, body: u64) -> Option<Duration> {
        let r = self.read_kbps.filter(|r| *r > 0)?;
        Some(Duration::from_secs_f64(
            body as f64 * 8.0 / (r as f64 * 1000.0),
        ))
    }

    /// Whether the body is complete for the reader.
    pub fn done(&self, body: u64) -> bool {
        self.stop_after.is_some_and(|n| body >= n)
    }
}

/// What the server answered.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Response {
    /// Status code.
    pub status: u16,
    /// Body bytes received.
    pub body_bytes: u64,
    /// Header bytes received.
    pub header_bytes: u64,
    /// Content-Range as (first, last, total) when present.
    pub content_range: Option<(u64, u64, Option<u64>)>,
    /// Time from send to the first response byte.
    pub ttfb: Duration,
    /// The connection may be reused.
    pub keep_alive: bool,
    /// The `CMSD-Dynamic` header's value (CTA-5006), when sent.
    pub cmsd_dynamic: Option<String>,
}
