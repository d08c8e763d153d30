//! Session scripts: the extended wsesslog format of SYSTOR 2012 Figure 5,
//! plus httperf `--wsesslog` and CloudSuite videosesslog input, and export to
//! httperf, CloudSuite and h2load.
//!
//! The in-memory model is normalised: every wait is stored on the request it
//! delays, as either [`Wait::Pacing`] (from the start of the previous request)
//! or [`Wait::Think`] (from the end of the previous burst), whatever syntax
//! the file used. `docs/formats.md` documents the text format.

pub mod export;
mod parse;
mod write;

pub use parse::{
    parse_script, parse_script_bytes, parse_script_stream, utf8_position, ParseError,
    ParseErrorKind, SessionSpan, StreamError,
};
pub use write::{
    export_cloudsuite, export_h2load, export_httperf, write_vodlab, write_vodlab_session,
    ExportReport,
};

/// A parsed session script: sessions in file order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Script {
    /// The sessions.
    pub sessions: Vec<Session>,
}

impl Script {
    /// Total number of requests.
    pub fn request_count(&self) -> usize {
        self.sessions.iter().map(|s| s.requests.len()).sum()
    }
}

/// One viewing session: a sequence of requests over persistent connections.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Session {
    /// Optional attributes (vodlab `#@session` header or CloudSuite `session` line).
    pub header: SessionHeader,
    /// Requests in order.
    pub requests: Vec<Request>,
}

/// Session attributes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SessionHeader {
    /// Session id (unique within a workload).
    pub id: Option<u64>,
    /// Client class name.
    pub class: Option<String>,
    /// Title name.
    pub title: Option<String>,
    /// Popularity rank of the title (1 = most popular).
    pub rank: Option<u32>,
    /// Representation name.
    pub rep: Option<String>,
    /// Bit rate of the representation in bit/s, for playout-buffer accounting.
    pub bitrate_bps: Option<u64>,
    /// Seconds of content per request, for playout-buffer accounting.
    pub request_s: Option<f64>,
    /// Server host for this session (CloudSuite `server=`).
    pub server: Option<String>,
    /// Server port for this session (CloudSuite `port=`).
    pub port: Option<u16>,
    /// TLS on or off for this session (CloudSuite `ssl=`).
    pub ssl: Option<bool>,
}

/// An HTTP method.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Method {
    /// GET (the default).
    #[default]
    Get,
    /// HEAD.
    Head,
    /// POST.
    Post,
    /// PUT.
    Put,
    /// DELETE.
    Delete,
    /// OPTIONS.
    Options,
    /// TRACE.
    Trace,
}

impl Method {
    /// Every method, in httperf's order.
    pub const ALL: [Method; 7] = [
        Method::Delete,
        Method::Get,
        Method::Head,
        Method::Options,
        Method::Post,
        Method::Put,
        Method::Trace,
    ];

    /// The method token.
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Head => "HEAD",
            Method::Post => "POST",
            Method::Put => "PUT",
            Method::Delete => "DELETE",
            Method::Options => "OPTIONS",
            Method::Trace => "TRACE",
        }
    }

    /// Parses a method token (upper case, as httperf requires).
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.as_str() == s)
    }
}

/// A byte range: `start-end` (inclusive) or open-ended `start-`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ByteRange {
    /// First byte.
    pub start: u64,
    /// Last byte, inclusive; `None` for an open-ended range.
    pub end: Option<u64>,
}

impl ByteRange {
    /// Number of bytes, when bounded.
    pub fn len(&self) -> Option<u64> {
        self.end
            .map(|e| e.saturating_sub(self.start).saturating_add(1))
    }

    /// True for the impossible empty range (never produced by the parser).
    pub fn is_empty(&self) -> bool {
        self.len() == Some(0)
    }

    /// The value of an HTTP `Range` header.
    pub fn header_value(&self) -> String {
        match self.end {
            Some(e) => format!("bytes={}-{}", self.start, e),
            None => format!("bytes={}-", self.start),
        }
    }
}

/// How long to wait before sending a request (or burst).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub enum Wait {
    /// Send as soon as the previous burst's responses are complete.
    #[default]
    None,
    /// Send no earlier than this many seconds after the start of the previous
    /// request, and not before its response is complete (SYSTOR `pacing=`,
    /// CloudSuite `pace_time=`).
    Pacing(f64),
    /// Send this many seconds after the previous burst completed (httperf `think=`).
    Think(f64),
}

/// One request line.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Request {
    /// Path (or path and query) as written.
    pub path: String,
    /// Method.
    pub method: Method,
    /// Byte range, sent as a `Range` header.
    pub range: Option<ByteRange>,
    /// Per-request deadline in seconds.
    pub timeout_s: Option<f64>,
    /// Wait before this request; ignored on burst members.
    pub wait: Wait,
    /// Sent together with the previous request (an indented burst line),
    /// without waiting for its response.
    pub burst: bool,
    /// Index of the session's connection this request uses (0 = first).
    pub conn: u32,
    /// Extra header lines, `Name: value`.
    pub headers: Vec<String>,
    /// Request body.
    pub body: Option<String>,
    /// Expected response size in bytes (CloudSuite `size=`).
    pub size: Option<u64>,
    /// Send as HTTP/1.0 instead of HTTP/1.1 (httperf `http=1.0`).
    pub http10: bool,
    /// On an open-ended range (`range=A-`): the client reads this many bytes
    /// of the body and then closes the connection (`stop_after=N`), as the
    /// Netflix clients of thesis chapter 5 end open-ended requests [T1375].
    pub stop_after: Option<u64>,
    /// Read the response body at most this fast, kbit/s (`read_kbps=R`): the
    /// client paces its reads (TCP flow control paces the server), as players
    /// that pace open-ended requests do [T1716].
    pub read_kbps: Option<u64>,
    /// The session does not wait for this response (`detach=1`): the next
    /// burst is due by its own wait, counted as if this request had
    /// completed at once, and the session ends once it completes. A player
    /// reading audio beside its video does this (thesis ch. 5: a paced
    /// open-ended audio read lasts minutes while video chunks are fetched).
    /// A later request on the same connection still waits for it.
    pub detach: bool,
}

impl Request {
    /// A GET for `path`, every option at its default.
    pub fn get(path: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            ..Self::default()
        }
    }
}
