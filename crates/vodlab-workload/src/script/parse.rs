//! Reader for vodlab session scripts, httperf wsesslog and CloudSuite
//! videosesslog files (one grammar accepts all three; see `docs/formats.md`).

use std::fmt;

use super::{ByteRange, Method, Request, Script, Session, SessionHeader, Wait};
use crate::limits::{MAX_BYTE, MAX_CONNECTIONS_PER_SESSION, MAX_SCRIPT_BITRATE_BPS, MAX_SECONDS};

/// What kind of mistake a parse error is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParseErrorKind {
    /// A `key=` the format does not define.
    UnknownKey,
    /// A key given twice on one line.
    DuplicateKey,
    /// A value that does not parse or is out of range.
    BadValue,
    /// A quoted value without its closing quote.
    UnterminatedQuote,
    /// A line or key in a place where it has no meaning.
    Misplaced,
    /// Bytes that are not UTF-8 text.
    InvalidUtf8,
}

/// A parse error with its 1-based line and column.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}line {line}, column {column}: {message}", file.as_deref().map(|f| format!("{f}: ")).unwrap_or_default())]
pub struct ParseError {
    /// File name, when known.
    pub file: Option<String>,
    /// 1-based line.
    pub line: usize,
    /// 1-based column (in characters).
    pub column: usize,
    /// Category.
    pub kind: ParseErrorKind,
    /// Human-readable explanation.
    pub message: String,
}

impl ParseError {
    /// Attaches a file name.
    pub fn in_file(mut self, file: impl Into<String>) -> Self {
        self.file = Some(file.into());
        self
    }
}

struct Token {
    column: usize,
    text: String,
}

/// 1-based line and column (in characters) of byte `offset` of `bytes`,
/// whose first `offset` bytes are valid UTF-8 (as `Utf8Error::valid_up_to`
/// guarantees).
pub fn utf8_position(bytes: &[u8], offset: usize) -> (usize, usize) {
    let before = &bytes[..offset.min(bytes.len())];
    let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
    let start = before
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1);
    let column = std::str::from_utf8(&before[start..]).map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

/// Parses a session script given as bytes: bytes that are not UTF-8 are an
/// error naming the line and column of the first bad byte.
pub fn parse_script_bytes(bytes: &[u8]) -> Result<Script, ParseError> {
    let text = std::str::from_utf8(bytes).map_err(|e| {
        let at = e.valid_up_to();
        let (line, column) = utf8_position(bytes, at);
        err(
            line,
            column,
            ParseErrorKind::InvalidUtf8,
            format!(
                "invalid UTF-8 (byte 0x{:02x}); a session script is UTF-8 text",
                bytes[at]
            ),
        )
    })?;
    parse_script(text)
}

/// Parses a session script in any of the accepted dialects.
pub fn parse_script(text: &str) -> Result<Script, ParseError> {
    let mut p = Parser::default();
    for (i, raw) in text.split('\n').enumerate() {
        let line = raw.strip_suffix('\r').unwrap_or(raw);
        p.line(i + 1, line)?;
    }
    p.end_session();
    p.sessions.shrink_to_fit();
    Ok(Script {
        sessions: p.sessions,
    })
}

/// Where a session lies in its script file: bytes `offset..offset + len`,
/// from its first line (header or request) to the end of its last. Parsing
/// those bytes alone gives the session back ([`parse_script`] of the slice
/// holds exactly it): a reader can keep a session's place instead of its
/// requests and read it again when it is needed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SessionSpan {
    /// First byte.
    pub offset: u64,
    /// Length in bytes.
    pub len: u64,
}

/// Parses a session script from a reader one line at a time, never holding
/// the whole text: `each` gets every session in file order with its
/// [`SessionSpan`], and may keep what it needs of it (a run keeps the
/// header and the span, and reads the requests again when the session
/// starts). Errors are those of [`parse_script`], with the same line and
/// column; a read error is an I/O error. Returns the number of sessions.
pub fn parse_script_stream<R: std::io::BufRead>(
    mut reader: R,
    mut each: impl FnMut(Session, SessionSpan),
) -> Result<usize, StreamError> {
    let mut p = Parser::default();
    let mut buf = Vec::new();
    let (mut offset, mut n, mut count) = (0u64, 0usize, 0usize);
    // the first byte of the session being parsed, once it has begun
    let mut start: Option<u64> = None;
    let mut emit = |p: &mut Parser, start: &mut Option<u64>, end: u64, count: &mut usize| {
        for s in p.sessions.drain(..) {
            let from = start.take().unwrap_or(end);
            each(
                s,
                SessionSpan {
                    offset: from,
                    len: end - from,
                },
            );
            *count += 1;
        }
    };
    loop {
        buf.clear();
        let read = reader
            .read_until(b'\n', &mut buf)
            .map_err(StreamError::Io)?;
        if read == 0 {
            break;
        }
        n += 1;
        let raw = match buf.strip_suffix(b"\n") {
            Some(r) => r,
            None => &buf[..],
        };
        let text = std::str::from_utf8(raw).map_err(|e| {
            let at = e.valid_up_to();
            let (_, column) = utf8_position(raw, at);
            StreamError::Parse(err(
                n,
                column,
                ParseErrorKind::InvalidUtf8,
                format!(
                    "invalid UTF-8 (byte 0x{:02x}); a session script is UTF-8 text",
                    raw[at]
                ),
            ))
        })?;
        let line = text.strip_suffix('\r').unwrap_or(text);
        p.line(n, line).map_err(StreamError::Parse)?;
        // a blank line ended the session before it: its end is this line's start
        emit(&mut p, &mut start, offset, &mut count);
        if start.is_none()
            && (p.current.header != SessionHeader::default() || !p.current.requests.is_empty())
        {
            start = Some(offset);
        }
        offset += read as u64;
    }
    p.end_session();
    emit(&mut p, &mut start, offset, &mut count);
    Ok(count)
}

/// Why [`parse_script_stream`] stopped.
#[derive(Debug, thiserror::Error)]
pub enum StreamError {
    /// The reader failed.
    #[error("{0}")]
    Io(std::io::Error),
    /// The script is malformed.
    #[error(transparent)]
    Parse(ParseError),
}

#[derive(Default)]
struct Parser {
    sessions: Vec<Session>,
    current: Session,
    /// Wait set by `think=` / `pace_time=` on the previous burst.
    pending: Option<(Wait, usize, usize, &'static str)>,
}

fn err(line: usize, column: usize, kind: ParseErrorKind, message: impl Into<String>) -> ParseError {
    ParseError {
        file: None,
        line,
        column,
        kind,
        message: message.into(),
    }
}

impl Parser {
    fn end_session(&mut self) {
        if !self.current.requests.is_empty() {
            // held for the whole run: no spare capacity (a 12-request
            // session's Vec had room for 16, a quarter of its memory)
            self.current.requests.shrink_to_fit();
            self.sessions.push(std::mem::take(&mut self.current));
        } else if self.current.header != SessionHeader::default() {
            // a header without requests is kept for the next session
            return;
        }
        self.pending = None;
    }

    fn line(&mut self, n: usize, line: &str) -> Result<(), ParseError> {
        if let Some(rest) = line.strip_prefix("#@") {
            return self.vodlab_header(n, rest);
        }
        let trimmed = line.trim_start();
        if trimmed.is_empty() {
            self.end_session();
            return Ok(());
        }
        if trimmed.starts_with('#') {
            return Ok(());
        }
        let burst = trimmed.len() != line.len();
        let tokens = tokenize(n, line, 0)?;
        if tokens.is_empty() {
            return Ok(());
        }
        if tokens[0].text == "session" && !burst {
            return self.cloudsuite_session(n, &tokens[1..]);
        }
        self.request(n, burst, &tokens)
    }

    fn vodlab_header(&mut self, n: usize, rest: &str) -> Result<(), ParseError> {
        let tokens = tokenize(n, rest, 2)?;
        let Some(first) = tokens.first() else {
            return Err(err(
                n,
                1,
                ParseErrorKind::BadValue,
                "empty `#@` line; expected `#@session key=value ...`",
            ));
        };
        if first.text != "session" {
            return Err(err(
                n,
                first.column,
                ParseErrorKind::UnknownKey,
                format!(
                    "unknown directive `#@{}`; the only one is `#@session`",
                    first.text
                ),
            ));
        }
        if !self.current.requests.is_empty() {
            return Err(err(
                n,
                1,
                ParseErrorKind::Misplaced,
                "a `#@session` header must come before the session's first request; separate sessions with a blank line",
            ));
        }
        let mut seen = Vec::new();
        for t in &tokens[1..] {
            let (key, value) = split_kv(n, t)?;
            check_dup(n, t.column, key, &mut seen)?;
            let h = &mut self.current.header;
            let col = t.column;
            match key {
                "id" => h.id = Some(num(n, col, key, value)?),
                "class" => h.class = Some(value.to_string()),
                "title" => h.title = Some(value.to_string()),
                "rank" => h.rank = Some(num(n, col, key, value)?),
                "rep" => h.rep = Some(value.to_string()),
                "bitrate" => {
                    h.bitrate_bps = Some(bounded(n, col, key, value, MAX_SCRIPT_BITRATE_BPS)?)
                }
                "request_s" => h.request_s = Some(seconds(n, col, key, value, false)?),
                "server" => h.server = Some(value.to_string()),
                "port" => h.port = Some(num(n, col, key, value)?),
                "ssl" => h.ssl = Some(on_off(n, col, value)?),
                _ => {
                    return Err(err(
                        n,
                        col,
                        ParseErrorKind::UnknownKey,
                        format!(
                            "unknown session key `{key}`; known: id, class, title, rank, rep, bitrate, request_s, server, port, ssl"
                        ),
                    ))
                }
            }
        }
        Ok(())
    }

    fn cloudsuite_session(&mut self, n: usize, tokens: &[Token]) -> Result<(), ParseError> {
        let mut seen = Vec::new();
        for t in tokens {
            let (key, value) = split_kv(n, t)?;
            check_dup(n, t.column, key, &mut seen)?;
            let h = &mut self.current.header;
            match key {
                "server" => h.server = Some(value.to_string()),
                "port" => h.port = Some(num(n, t.column, key, value)?),
                "ssl" => h.ssl = Some(on_off(n, t.column, value)?),
                _ => {
                    return Err(err(
                        n,
                        t.column,
                        ParseErrorKind::UnknownKey,
                        format!("unknown `session` key `{key}`; known: server, port, ssl"),
                    ))
                }
            }
        }
        Ok(())
    }

    fn request(&mut self, n: usize, burst: bool, tokens: &[Token]) -> Result<(), ParseError> {
        let path_tok = &tokens[0];
        if path_tok.text.contains('=') && path_tok.text.split('=').next().is_some_and(is_key) {
            return Err(err(
                n,
                path_tok.column,
                ParseErrorKind::Misplaced,
                format!(
                    "a request line starts with its path, not with `{}`",
                    path_tok.text
                ),
            ));
        }
        if burst && self.current.requests.is_empty() {
            return Err(err(
                n,
                1,
                ParseErrorKind::Misplaced,
                "an indented (burst) line needs a request before it in the same session",
            ));
        }
        if let Some(i) = path_tok.text.chars().position(|c| c.is_control()) {
            return Err(err(
                n,
                path_tok.column + i,
                ParseErrorKind::BadValue,
                "a control character in a request path",
            ));
        }
        let mut req = Request {
            path: path_tok.text.clone(),
            burst,
            ..Request::default()
        };
        let mut after: Option<(Wait, usize, &'static str)> = None;
        let mut pacing_col = 0;
        let mut stop_col = 0;
        let mut seen = Vec::new();
        for t in &tokens[1..] {
            let (key, value) = split_kv(n, t)?;
            check_dup(n, t.column, key, &mut seen)?;
            let col = t.column;
            match key {
                "range" => {
                    if req.range.is_some() {
                        return Err(err(
                            n,
                            col,
                            ParseErrorKind::DuplicateKey,
                            "two ranges for one request (`range=` and a Range header)",
                        ));
                    }
                    req.range = Some(range(n, col, value)?)
                }
                "timeout" => req.timeout_s = Some(seconds(n, col, key, value, true)?),
                "pacing" => {
                    if burst {
                        return Err(err(
                            n,
                            col,
                            ParseErrorKind::Misplaced,
                            "`pacing=` on a burst line: burst requests go with the previous request",
                        ));
                    }
                    req.wait = Wait::Pacing(seconds(n, col, key, value, false)?);
                    pacing_col = col;
                }
                "think" | "pace_time" => {
                    let s = seconds(n, col, key, value, false)?;
                    let (w, name) = if key == "think" {
                        (Wait::Think(s), "think")
                    } else {
                        (Wait::Pacing(s), "pace_time")
                    };
                    if let Some((_, _, other)) = after {
                        return Err(err(
                            n,
                            col,
                            ParseErrorKind::DuplicateKey,
                            format!("`{name}=` and `{other}=` on one burst"),
                        ));
                    }
                    after = Some((w, col, name));
                }
                "conn" => {
                    req.conn =
                        bounded(n, col, key, value, (MAX_CONNECTIONS_PER_SESSION - 1) as u64)?
                            as u32
                }
                "method" => {
                    req.method = Method::parse(value).ok_or_else(|| {
                        err(
                            n,
                            col,
                            ParseErrorKind::BadValue,
                            format!("unknown method `{value}`; use GET, HEAD, POST, PUT, DELETE, OPTIONS or TRACE"),
                        )
                    })?
                }
                "contents" => req.body = Some(unquote(n, col, value)?),
                "headers" => {
                    let v = unquote(n, col, value)?;
                    for h in v.split('\n') {
                        let h = h.trim_end_matches('\r');
                        if h.is_empty() {
                            continue;
                        }
                        if h.contains('\r') {
                            return Err(err(
                                n,
                                col,
                                ParseErrorKind::BadValue,
                                "a header line contains a bare carriage return",
                            ));
                        }
                        if !h.contains(':') {
                            return Err(err(
                                n,
                                col,
                                ParseErrorKind::BadValue,
                                format!("header `{h}` is not `Name: value`"),
                            ));
                        }
                        // a single byte range given as a header (CloudSuite's
                        // `headers='Range: bytes=A-B'`) is the request's range
                        if let Some(g) = range_header(h) {
                            check_range(n, col, &g)?;
                            if req.range.is_some() {
                                return Err(err(
                                    n,
                                    col,
                                    ParseErrorKind::DuplicateKey,
                                    "two ranges for one request (`range=` and a Range header, or two Range headers)",
                                ));
                            }
                            req.range = Some(g);
                            continue;
                        }
                        req.headers.push(h.to_string());
                    }
                }
                "cookie" => {
                    let v = unquote(n, col, value)?;
                    if v.contains(['\r', '\n']) {
                        return Err(err(n, col, ParseErrorKind::BadValue, "a cookie contains a line break"));
                    }
                    req.headers.push(format!("Cookie: {v}"));
                }
                "size" => req.size = Some(bounded(n, col, key, value, MAX_BYTE)?),
                "read_kbps" => {
                    let v = bounded(n, col, key, value, MAX_SCRIPT_BITRATE_BPS / 1000)?;
                    if v == 0 {
                        return Err(err(
                            n,
                            col,
                            ParseErrorKind::BadValue,
                            "`read_kbps=` must be at least 1",
                        ));
                    }
                    req.read_kbps = Some(v);
                }
                "detach" => match value {
                    "1" => req.detach = true,
                    "0" => req.detach = false,
                    _ => {
                        return Err(err(
                            n,
                            col,
                            ParseErrorKind::BadValue,
                            "`detach=` is 1 or 0",
                        ))
                    }
                },
                "stop_after" => {
                    let v = bounded(n, col, key, value, MAX_BYTE)?;
                    if v == 0 {
                        return Err(err(
                            n,
                            col,
                            ParseErrorKind::BadValue,
                            "`stop_after=` must be at least 1 byte",
                        ));
                    }
                    req.stop_after = Some(v);
                    stop_col = col;
                }
                "http" => match value {
                    "1.0" => req.http10 = true,
                    "1.1" => req.http10 = false,
                    _ => {
                        return Err(err(
                            n,
                            col,
                            ParseErrorKind::BadValue,
                            format!("unsupported HTTP version `{value}`; use 1.0 or 1.1"),
                        ))
                    }
                },
                _ => {
                    return Err(err(
                        n,
                        col,
                        ParseErrorKind::UnknownKey,
                        format!("unknown key `{key}`; known: {}", KEYS.join(", ")),
                    ))
                }
            }
        }
        if req.stop_after.is_some() && !matches!(req.range, Some(ByteRange { end: None, .. })) {
            return Err(err(
                n,
                stop_col,
                ParseErrorKind::Misplaced,
                "`stop_after=` needs an open-ended range (`range=A-`) on the same request",
            ));
        }
        if !burst {
            if let Some((w, line, col, name)) = self.pending.take() {
                if req.wait != Wait::None {
                    return Err(err(
                        n,
                        pacing_col,
                        ParseErrorKind::DuplicateKey,
                        format!(
                            "`pacing=` here conflicts with `{name}=` at line {line}, column {col}"
                        ),
                    ));
                }
                req.wait = w;
            }
        }
        if let Some((w, col, name)) = after {
            if self.pending.is_some() {
                return Err(err(
                    n,
                    col,
                    ParseErrorKind::DuplicateKey,
                    format!("a second `{name}=` on the same burst"),
                ));
            }
            self.pending = Some((w, n, col, name));
        }
        self.current.requests.push(req);
        Ok(())
    }
}

/// Every key a request line may carry.
const KEYS: [&str; 15] = [
    "range",
    "timeout",
    "pacing",
    "think",
    "pace_time",
    "conn",
    "method",
    "contents",
    "headers",
    "cookie",
    "size",
    "http",
    "stop_after",
    "read_kbps",
    "detach",
];

fn is_key(s: &str) -> bool {
    KEYS.contains(&s)
}

fn check_dup<'a>(
    n: usize,
    col: usize,
    key: &'a str,
    seen: &mut Vec<&'a str>,
) -> Result<(), ParseError> {
    if seen.contains(&key) {
        return Err(err(
            n,
            col,
            ParseErrorKind::DuplicateKey,
            format!("`{key}=` given twice"),
        ));
    }
    seen.push(key);
    Ok(())
}

fn split_kv(n: usize, t: &Token) -> Result<(&str, &str), ParseError> {
    t.text.split_once('=').ok_or_else(|| {
        err(
            n,
            t.column,
            ParseErrorKind::BadValue,
            format!("expected `key=value`, found `{}`", t.text),
        )
    })
}

fn num<T: std::str::FromStr>(n: usize, col: usize, key: &str, v: &str) -> Result<T, ParseError> {
    v.parse().map_err(|_| {
        err(
            n,
            col,
            ParseErrorKind::BadValue,
            format!("`{key}={v}`: expected a non-negative integer"),
        )
    })
}

/// A non-negative integer at most `max`.
fn bounded(n: usize, col: usize, key: &str, v: &str, max: u64) -> Result<u64, ParseError> {
    match v.parse::<u64>() {
        Ok(x) if x <= max => Ok(x),
        _ => Err(err(
            n,
            col,
            ParseErrorKind::BadValue,
            format!("`{key}={v}`: expected an integer from 0 to {max}"),
        )),
    }
}

/// Seconds, `> 0` (`positive`) or `>= 0`, and at most [`MAX_SECONDS`].
fn seconds(n: usize, col: usize, key: &str, v: &str, positive: bool) -> Result<f64, ParseError> {
    match v.parse::<f64>() {
        Ok(s) if s.is_finite() && (s > 0.0 || (!positive && s == 0.0)) && s <= MAX_SECONDS => Ok(s),
        _ => Err(err(
            n,
            col,
            ParseErrorKind::BadValue,
            format!(
                "`{key}={v}`: expected seconds as a number {} and at most {MAX_SECONDS}",
                if positive { "> 0" } else { ">= 0" }
            ),
        )),
    }
}

/// Both ends of a range at most [`MAX_BYTE`].
fn check_range(n: usize, col: usize, g: &ByteRange) -> Result<(), ParseError> {
    if g.start > MAX_BYTE || g.end.is_some_and(|e| e > MAX_BYTE) {
        return Err(err(
            n,
            col,
            ParseErrorKind::BadValue,
            format!("a byte range beyond the largest offset, {MAX_BYTE}"),
        ));
    }
    Ok(())
}

fn on_off(n: usize, col: usize, v: &str) -> Result<bool, ParseError> {
    match v {
        "on" => Ok(true),
        "off" => Ok(false),
        _ => Err(err(
            n,
            col,
            ParseErrorKind::BadValue,
            format!("`ssl={v}`: use on or off"),
        )),
    }
}

/// A `Range: bytes=A-B` or `Range: bytes=A-` header line as a byte range;
/// `None` for other headers and for range forms a request cannot be checked
/// against exactly (several ranges, suffix ranges), which stay raw headers.
fn range_header(line: &str) -> Option<ByteRange> {
    let (name, value) = line.split_once(':')?;
    if !name.trim().eq_ignore_ascii_case("range") {
        return None;
    }
    let spec = value.trim().strip_prefix("bytes=")?.trim();
    if spec.contains(',') {
        return None;
    }
    let (a, b) = spec.split_once('-')?;
    let start: u64 = a.trim().parse().ok()?;
    let end = match b.trim() {
        "" => None,
        e => Some(e.parse::<u64>().ok().filter(|&e| e >= start)?),
    };
    Some(ByteRange { start, end })
}

fn range(n: usize, col: usize, v: &str) -> Result<ByteRange, ParseError> {
    let bad = |why: &str| {
        err(
            n,
            col,
            ParseErrorKind::BadValue,
            format!("`range={v}`: {why}; expected `range=FIRST-LAST` or `range=FIRST-`"),
        )
    };
    let (a, b) = v.split_once('-').ok_or_else(|| bad("no `-`"))?;
    let start: u64 = a.parse().map_err(|_| bad("first byte is not a number"))?;
    let end = if b.is_empty() {
        None
    } else {
        let e: u64 = b.parse().map_err(|_| bad("last byte is not a number"))?;
        if e < start {
            return Err(bad("last byte is before the first"));
        }
        Some(e)
    };
    let g = ByteRange { start, end };
    check_range(n, col, &g)?;
    Ok(g)
}

/// Removes httperf-style quoting: `'...'`, `"..."` and backslash escapes
/// (`\n`, `\r`, `\t`, any other character literally).
fn unquote(n: usize, col: usize, v: &str) -> Result<String, ParseError> {
    let mut out = String::new();
    let (mut single, mut double, mut escaped) = (false, false, false);
    for ch in v.chars() {
        if escaped {
            out.push(match ch {
                'n' => '\n',
                'r' => '\r',
                't' => '\t',
                c => c,
            });
            escaped = false;
        } else if ch == '\\' {
            escaped = true;
        } else if ch == '\'' && !double {
            single = !single;
        } else if ch == '"' && !single {
            double = !double;
        } else {
            out.push(ch);
        }
    }
    if single || double || escaped {
        return Err(err(
            n,
            col,
            ParseErrorKind::UnterminatedQuote,
            "unterminated quote or escape in value",
        ));
    }
    Ok(out)
}

/// Splits a line into whitespace-separated tokens; a token starting with `#`
/// starts a comment. Only the values of `contents=`, `headers=` and `cookie=`
/// may be quoted (`'...'`, `"..."`) or use backslash escapes, as in httperf;
/// every other token (paths included) is taken literally up to whitespace.
/// `offset` is added to columns (for `#@` lines).
fn tokenize(n: usize, line: &str, offset: usize) -> Result<Vec<Token>, ParseError> {
    const QUOTABLE: [&str; 3] = ["contents=", "headers=", "cookie="];
    let mut tokens = Vec::new();
    let mut chars = line.char_indices().enumerate().peekable();
    while let Some((ci, (bi, ch))) = chars.next() {
        if ch.is_whitespace() {
            continue;
        }
        if ch == '#' {
            break;
        }
        let column = ci + 1 + offset;
        let quotable = QUOTABLE.iter().any(|k| line[bi..].starts_with(k));
        let mut text = String::new();
        text.push(ch);
        let (mut single, mut double, mut escaped) = (false, false, false);
        while let Some(&(_, (_, c))) = chars.peek() {
            if quotable {
                if escaped {
                    escaped = false;
                } else if c.is_whitespace() && !single && !double {
                    break;
                } else {
                    match c {
                        '\\' => escaped = true,
                        '\'' if !double => single = !single,
                        '"' if !single => double = !double,
                        _ => {}
                    }
                }
            } else if c.is_whitespace() {
                break;
            }
            text.push(c);
            chars.next();
        }
        if single || double || escaped {
            return Err(err(
                n,
                column,
                ParseErrorKind::UnterminatedQuote,
                "unterminated quote (line continuations are not supported)",
            ));
        }
        tokens.push(Token { column, text });
    }
    Ok(tokens)
}

impl fmt::Display for ParseErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ParseErrorKind::UnknownKey => "unknown key",
            ParseErrorKind::DuplicateKey => "duplicate key",
            ParseErrorKind::BadValue => "bad value",
            ParseErrorKind::UnterminatedQuote => "unterminated quote",
            ParseErrorKind::Misplaced => "misplaced",
            ParseErrorKind::InvalidUtf8 => "invalid UTF-8",
        })
    }
}

#[cfg(test)]
mod tests;
