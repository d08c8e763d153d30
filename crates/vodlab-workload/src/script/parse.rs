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
    Ok(Script {
        sessions: p.sessions,
    })
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
const KEYS: [&str; 12] = [
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
mod tests {
    use super::*;

    const FIGURE_5: &str = "\
# Session 1: 4 chunks stored in separate files, with pacing
#           after the first two requests
vid01/secs-0-9 timeout=10
vid01/secs-10-19 timeout=10
vid01/secs-20-29 timeout=10 pacing=10
vid01/secs-30-39 timeout=10 pacing=10

# Session 2: 3 chunks with range requests within the same file,
#           with no pacing
vid02 range=0-524287 timeout=10
vid02 range=524288-1048575 timeout=10
vid02 range=1048575-1572863 timeout=10

# Session 4: pause/rewind/skip forward
vid04/secs-0-9 timeout=10
vid04/secs-10-19 timeout=10 pacing=60 # pause for 60 seconds
vid04/secs-20-29 timeout=10
";

    #[test]
    fn systor_figure_5_parses() {
        let s = parse_script(FIGURE_5).unwrap();
        assert_eq!(s.sessions.len(), 3);
        assert_eq!(s.request_count(), 10);
        let r = &s.sessions[0].requests[2];
        assert_eq!(r.path, "vid01/secs-20-29");
        assert_eq!(r.timeout_s, Some(10.0));
        assert_eq!(r.wait, Wait::Pacing(10.0));
        assert_eq!(
            s.sessions[1].requests[1].range,
            Some(ByteRange {
                start: 524288,
                end: Some(1048575)
            })
        );
        assert_eq!(s.sessions[2].requests[1].wait, Wait::Pacing(60.0));
    }

    #[test]
    fn httperf_wsesslog_bursts_and_think() {
        let text = "# comment\n/foo.html think=2.0\n    /pict1.gif\n\t/pict2.gif\n/foo2.html method=POST contents='Post data with spaces'\n\n/x.html\n";
        let s = parse_script(text).unwrap();
        assert_eq!(s.sessions.len(), 2);
        let r = &s.sessions[0].requests;
        assert!(r[1].burst && r[2].burst && !r[3].burst);
        assert_eq!(r[3].wait, Wait::Think(2.0));
        assert_eq!(r[3].method, Method::Post);
        assert_eq!(r[3].body.as_deref(), Some("Post data with spaces"));
        assert_eq!(s.sessions[1].requests[0].wait, Wait::None);
    }

    #[test]
    fn cloudsuite_videosesslog() {
        let text = "session server=10.0.0.1 port=8080 ssl=off\n/video/a_240p.mp4 timeout=10 headers=\"Range: bytes=0-524287\" pace_time=10 size=524288\n/video/a_240p.mp4 timeout=10 headers='Range: bytes=524288-1048575\\r\\nX-A: b'\n";
        let s = parse_script(text).unwrap();
        let sess = &s.sessions[0];
        assert_eq!(sess.header.server.as_deref(), Some("10.0.0.1"));
        assert_eq!(sess.header.port, Some(8080));
        assert_eq!(sess.header.ssl, Some(false));
        // the Range header is the request's range (checked like `range=`), not a raw header
        let r0 = &sess.requests[0];
        assert!(r0.headers.is_empty(), "{:?}", r0.headers);
        assert_eq!(
            r0.range,
            Some(ByteRange {
                start: 0,
                end: Some(524287)
            })
        );
        assert_eq!(r0.size, Some(524288));
        assert_eq!(sess.requests[1].wait, Wait::Pacing(10.0));
        assert_eq!(sess.requests[1].headers, vec!["X-A: b"]);
        assert_eq!(
            sess.requests[1].range,
            Some(ByteRange {
                start: 524288,
                end: Some(1048575)
            })
        );
    }

    #[test]
    fn cloudsuite_make_zipf_lines_carry_their_range() {
        // exactly what CloudSuite's make_zipf.c writes
        let text = "/full-360p-00186.mp4 timeout=10 headers='Range: bytes=0-1310719'\n/full-360p-00186.mp4 timeout=10 headers='Range: bytes=1310720-2621439'\n/full-360p-00186.mp4 timeout=10 headers='Range: bytes=2621440-3932159'\n/full-360p-00186.mp4 timeout=10 pace_time=10 headers='Range: bytes=3932160-5242879'\n";
        let s = parse_script(text).unwrap();
        let r = &s.sessions[0].requests;
        assert_eq!(r.len(), 4);
        assert!(r.iter().all(|q| q.headers.is_empty() && q.range.is_some()));
        assert_eq!(
            r[3].range,
            Some(ByteRange {
                start: 3932160,
                end: Some(5242879)
            })
        );
        // open-ended, lower-case name; a multi-range stays a raw header
        let s = parse_script("/a headers='range: bytes=5-'\n/b headers='Range: bytes=0-1,5-9'\n")
            .unwrap();
        let r = &s.sessions[0].requests;
        assert_eq!(
            r[0].range,
            Some(ByteRange {
                start: 5,
                end: None
            })
        );
        assert_eq!(r[1].range, None);
        assert_eq!(r[1].headers, vec!["Range: bytes=0-1,5-9"]);
        // two ranges for one request are an error naming the line
        let e = parse_script("/a range=0-9 headers='Range: bytes=0-1'\n").unwrap_err();
        assert!(e.to_string().contains("two ranges"), "{e}");
    }

    #[test]
    fn vodlab_header_and_conn() {
        let text = "#@session id=7 class=10mbit title=t00001 rank=3 rep=sd bitrate=419430 request_s=10\n/a range=0- conn=1\n";
        let s = parse_script(text).unwrap();
        let h = &s.sessions[0].header;
        assert_eq!(h.id, Some(7));
        assert_eq!(h.class.as_deref(), Some("10mbit"));
        assert_eq!(h.rank, Some(3));
        assert_eq!(h.request_s, Some(10.0));
        assert_eq!(s.sessions[0].requests[0].conn, 1);
        assert_eq!(s.sessions[0].requests[0].range.unwrap().end, None);
    }

    fn error_of(text: &str) -> ParseError {
        parse_script(text).unwrap_err()
    }

    #[test]
    fn errors_name_line_and_column() {
        let e = error_of("/a\n/b timeout=10 colour=red\n");
        assert_eq!(
            (e.line, e.column, e.kind),
            (2, 15, ParseErrorKind::UnknownKey)
        );
        assert!(
            e.to_string()
                .starts_with("line 2, column 15: unknown key `colour`"),
            "{e}"
        );

        let e = error_of("/a range=10-5\n");
        assert_eq!((e.line, e.column, e.kind), (1, 4, ParseErrorKind::BadValue));

        let e = error_of("/a timeout=0\n");
        assert_eq!(e.kind, ParseErrorKind::BadValue);

        let e = error_of("/a timeout=1 timeout=2\n");
        assert_eq!((e.column, e.kind), (14, ParseErrorKind::DuplicateKey));

        let e = error_of("   /burst-first\n");
        assert_eq!(e.kind, ParseErrorKind::Misplaced);

        let e = error_of("/a contents='open\n");
        assert_eq!(e.kind, ParseErrorKind::UnterminatedQuote);

        let e = error_of("/a think=1\n/b pacing=2\n");
        assert_eq!((e.line, e.kind), (2, ParseErrorKind::DuplicateKey));

        let e = error_of("/a\n#@session id=1\n");
        assert_eq!((e.line, e.kind), (2, ParseErrorKind::Misplaced));

        let e = error_of("/a\n  /b pacing=1\n");
        assert_eq!((e.line, e.column), (2, 6));
    }

    #[test]
    fn quotes_and_backslashes_are_literal_outside_quotable_values() {
        // a path may hold an apostrophe (a valid URI character); only contents=,
        // headers= and cookie= values are quoted, as in httperf
        let s = parse_script("/it's/a\\b.mp4 timeout=1 contents='a b'\n").unwrap();
        let r = &s.sessions[0].requests[0];
        assert_eq!(r.path, "/it's/a\\b.mp4");
        assert_eq!(r.body.as_deref(), Some("a b"));
        let e = parse_script("/a cookie='x\\ny'\n").unwrap_err();
        assert_eq!(e.kind, ParseErrorKind::BadValue);
    }

    #[test]
    fn crlf_and_blank_lines() {
        let s = parse_script("/a\r\n\r\n\r\n/b\r\n").unwrap();
        assert_eq!(s.sessions.len(), 2);
        assert_eq!(s.sessions[1].requests[0].path, "/b");
    }
}
