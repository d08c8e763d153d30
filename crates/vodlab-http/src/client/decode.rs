//! The push-based response decoder.

use super::encode::is_tchar;
use super::head::{self, DecodeError, Framing, Parsed, ResponseHead, MAX_HEAD_BYTES};

/// Longest chunk-size line accepted (size, extensions and CRLF).
pub const MAX_CHUNK_LINE: usize = 4096;

/// Whether a response is complete.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decoded {
    /// More bytes are needed (or, for a close-delimited body, the end of
    /// the stream: call [`ResponseDecoder::eof`]).
    NeedMore,
    /// The response is complete.
    Complete,
}

/// What one [`ResponseDecoder::feed`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    /// Bytes of the input used; the rest must be fed again.
    pub consumed: usize,
    /// Whether the response is complete.
    pub state: Decoded,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    Head,
    Length { remaining: u64 },
    UntilClose,
    ChunkSize,
    ChunkData { remaining: u64 },
    ChunkEnd,
    Trailers { bytes: usize },
    Done,
    Failed(DecodeError),
}

/// Decodes one response, pushed in as it arrives. Make one per request.
///
/// # The feed contract
///
/// Call [`feed`](Self::feed) with the bytes received and not yet consumed.
/// It consumes (reports in [`Progress::consumed`]) only what it could use
/// whole: an incomplete head, chunk-size line, chunk delimiter or trailer
/// line is not consumed, and the caller must pass those same bytes again at
/// the start of the next `feed`, with more appended. Body bytes are handed
/// to the `body` callback with their offset in the body, straight from the
/// input (no copy), and consumed. Once [`Decoded::Complete`] is returned,
/// bytes past the end of this response are not consumed: they belong to the
/// next response on the connection (pipelining). When the connection reaches
/// end of stream call [`eof`](Self::eof).
///
/// `1xx` interim heads are skipped (counted in [`ResponseHead::interim`]).
/// After an error, the decoder returns that error again.
#[derive(Debug, Clone)]
pub struct ResponseDecoder {
    head_request: bool,
    state: State,
    head: Option<ResponseHead>,
    body_bytes: u64,
    received_any: bool,
    interim: u32,
    interim_bytes: u64,
    /// Bytes of the current head already seen without its end: a retry
    /// runs the head parser only once a blank line may have arrived.
    head_seen: usize,
    /// The final head's `CMSD-Dynamic` value (its field lines joined).
    cmsd_dynamic: Option<String>,
}

impl ResponseDecoder {
    /// A decoder for the response to one request; `head_request` when that
    /// request was a HEAD (its response has no body).
    pub fn new(head_request: bool) -> Self {
        Self {
            head_request,
            state: State::Head,
            head: None,
            body_bytes: 0,
            received_any: false,
            interim: 0,
            interim_bytes: 0,
            head_seen: 0,
            cmsd_dynamic: None,
        }
    }

    /// The final response head, once it has been decoded.
    pub fn head(&self) -> Option<&ResponseHead> {
        self.head.as_ref()
    }

    /// The final head's `CMSD-Dynamic` value (CTA-5006), the one field
    /// kept as text: parse it with `vodlab_cmcd::cmsd::CmsdDynamic`.
    pub fn cmsd_dynamic(&self) -> Option<&str> {
        self.cmsd_dynamic.as_deref()
    }

    /// Body bytes decoded so far.
    pub fn body_bytes(&self) -> u64 {
        self.body_bytes
    }

    /// Whether any byte of this response (an interim head included) was fed.
    pub fn received_any(&self) -> bool {
        self.received_any
    }

    /// Whether the response is complete.
    pub fn is_complete(&self) -> bool {
        self.state == State::Done
    }

    /// Decodes from `input` (see the contract on [`ResponseDecoder`]),
    /// passing body bytes to `body(offset_in_body, bytes)`.
    pub fn feed<F>(&mut self, input: &[u8], body: &mut F) -> Result<Progress, DecodeError>
    where
        F: FnMut(u64, &[u8]) + ?Sized,
    {
        match &self.state {
            State::Failed(e) => return Err(e.clone()),
            State::Done => {}
            _ => self.received_any |= !input.is_empty(),
        }
        self.step(input, body).inspect_err(|e| {
            self.state = State::Failed(e.clone());
        })
    }

    /// The connection reached end of stream. Completes a close-delimited
    /// body; after a complete response it does nothing; otherwise it says
    /// where the response was cut.
    pub fn eof(&mut self) -> Result<(), DecodeError> {
        let err = match &self.state {
            State::Done => return Ok(()),
            State::UntilClose => {
                self.state = State::Done;
                return Ok(());
            }
            State::Failed(e) => return Err(e.clone()),
            State::Head if !self.received_any => DecodeError::ClosedBeforeResponse,
            State::Head => DecodeError::ClosedInHead,
            State::Length { remaining } => DecodeError::ShortBody {
                got: self.body_bytes,
                expected: Some(self.body_bytes + remaining),
            },
            State::ChunkSize
            | State::ChunkData { .. }
            | State::ChunkEnd
            | State::Trailers { .. } => DecodeError::ShortBody {
                got: self.body_bytes,
                expected: None,
            },
        };
        self.state = State::Failed(err.clone());
        Err(err)
    }

    fn step<F>(&mut self, input: &[u8], body: &mut F) -> Result<Progress, DecodeError>
    where
        F: FnMut(u64, &[u8]) + ?Sized,
    {
        let mut pos = 0;
        let need = |consumed| {
            Ok(Progress {
                consumed,
                state: Decoded::NeedMore,
            })
        };
        loop {
            let rest = &input[pos..];
            match self.state {
                State::Head if self.head_seen > 0 && !may_end_head(rest, self.head_seen) => {
                    if rest.len() >= MAX_HEAD_BYTES {
                        return Err(DecodeError::HeaderTooLarge);
                    }
                    self.head_seen = rest.len();
                    return need(pos);
                }
                State::Head => match head::parse(rest, self.head_request)? {
                    Parsed::Partial => {
                        self.head_seen = rest.len();
                        return need(pos);
                    }
                    Parsed::Interim(n) => {
                        self.head_seen = 0;
                        pos += n;
                        self.interim = self.interim.saturating_add(1);
                        self.interim_bytes += n as u64;
                    }
                    Parsed::Final(n, mut h, cmsd) => {
                        self.cmsd_dynamic = cmsd;
                        pos += n;
                        h.header_bytes = self.interim_bytes + n as u64;
                        h.interim = self.interim;
                        self.state = match h.framing {
                            Framing::Empty => State::Done,
                            Framing::Length(l) => State::Length { remaining: l },
                            Framing::Chunked => State::ChunkSize,
                            Framing::UntilClose => State::UntilClose,
                        };
                        self.head = Some(h);
                    }
                },
                State::Length { remaining } | State::ChunkData { remaining } => {
                    let chunked = matches!(self.state, State::ChunkData { .. });
                    if remaining == 0 {
                        self.state = if chunked {
                            State::ChunkEnd
                        } else {
                            State::Done
                        };
                        continue;
                    }
                    if rest.is_empty() {
                        return need(pos);
                    }
                    let take = remaining.min(rest.len() as u64) as usize;
                    body(self.body_bytes, &rest[..take]);
                    self.body_bytes += take as u64;
                    pos += take;
                    let remaining = remaining - take as u64;
                    self.state = if chunked {
                        State::ChunkData { remaining }
                    } else {
                        State::Length { remaining }
                    };
                }
                State::UntilClose => {
                    if !rest.is_empty() {
                        body(self.body_bytes, rest);
                        self.body_bytes += rest.len() as u64;
                    }
                    return need(input.len());
                }
                State::ChunkSize => {
                    let Some(len) = line(rest, MAX_CHUNK_LINE)? else {
                        if rest.len() >= MAX_CHUNK_LINE {
                            return Err(DecodeError::Malformed(format!(
                                "chunk-size line over {MAX_CHUNK_LINE} bytes"
                            )));
                        }
                        return need(pos);
                    };
                    let size = chunk_size(&rest[..len - 2])?;
                    pos += len;
                    self.state = if size == 0 {
                        State::Trailers { bytes: 0 }
                    } else {
                        State::ChunkData { remaining: size }
                    };
                }
                State::ChunkEnd => match rest {
                    [b'\r', b'\n', ..] => {
                        pos += 2;
                        self.state = State::ChunkSize;
                    }
                    [] | [b'\r'] => return need(pos),
                    _ => {
                        return Err(DecodeError::Malformed(
                            "chunk data not followed by CRLF".into(),
                        ))
                    }
                },
                State::Trailers { bytes } => {
                    let limit = MAX_HEAD_BYTES - bytes;
                    let Some(len) = line(rest, limit)? else {
                        if rest.len() >= limit {
                            return Err(DecodeError::HeaderTooLarge);
                        }
                        return need(pos);
                    };
                    pos += len;
                    if len == 2 {
                        self.state = State::Done;
                    } else {
                        trailer(&rest[..len - 2])?;
                        self.state = State::Trailers { bytes: bytes + len };
                    }
                }
                State::Done => {
                    return Ok(Progress {
                        consumed: pos,
                        state: Decoded::Complete,
                    })
                }
                State::Failed(ref e) => return Err(e.clone()),
            }
        }
    }
}

/// Whether `rest`, of which the first `seen` bytes were a head without its
/// end, may now hold the end of that head: an LF after them that ends an
/// empty line. (The head's last byte is an LF the parser has not seen.)
fn may_end_head(rest: &[u8], seen: usize) -> bool {
    let from = seen.min(rest.len());
    rest[from..].iter().enumerate().any(|(i, &b)| {
        b == b'\n' && i + from > 0 && {
            let before = &rest[..i + from];
            before.ends_with(b"\n") || before.ends_with(b"\n\r")
        }
    })
}

/// Length (with its CRLF) of the line at the start of `rest`, looking at
/// most `limit` bytes ahead; `None` if no line end is there yet.
fn line(rest: &[u8], limit: usize) -> Result<Option<usize>, DecodeError> {
    let window = &rest[..rest.len().min(limit)];
    match window.iter().position(|&b| b == b'\n') {
        Some(i) if i > 0 && window[i - 1] == b'\r' => Ok(Some(i + 1)),
        Some(_) => Err(DecodeError::Malformed(
            "line ends in a bare LF inside a chunked body".into(),
        )),
        None => Ok(None),
    }
}

/// No control byte other than HTAB (CR and LF included).
fn clean(s: &[u8]) -> bool {
    s.iter().all(|&b| b == b'\t' || (b >= 0x20 && b != 0x7f))
}

fn show(s: &[u8]) -> String {
    String::from_utf8_lossy(&s[..s.len().min(64)]).into_owned()
}

/// `1*HEXDIG [BWS ";" chunk-ext]`, without its CRLF.
fn chunk_size(line: &[u8]) -> Result<u64, DecodeError> {
    let bad = || DecodeError::Malformed(format!("bad chunk-size line `{}`", show(line)));
    let digits = line.iter().take_while(|b| b.is_ascii_hexdigit()).count();
    if digits == 0 {
        return Err(bad());
    }
    let mut size = 0u64;
    for &c in &line[..digits] {
        let d = (c as char).to_digit(16).unwrap_or(0);
        size = size
            .checked_mul(16)
            .and_then(|s| s.checked_add(u64::from(d)))
            .ok_or_else(|| {
                DecodeError::Malformed(format!("chunk size `{}` over 64 bits", show(line)))
            })?;
    }
    let mut rest = &line[digits..];
    while let [b' ' | b'\t', r @ ..] = rest {
        rest = r;
    }
    match rest {
        [] => Ok(size),
        [b';', ext @ ..] if clean(ext) => Ok(size),
        _ => Err(bad()),
    }
}

/// A trailer field line, without its CRLF: `token ":" value`.
fn trailer(line: &[u8]) -> Result<(), DecodeError> {
    match line.iter().position(|&b| b == b':') {
        Some(i) if i > 0 && line[..i].iter().all(|&b| is_tchar(b)) && clean(&line[i + 1..]) => {
            Ok(())
        }
        _ => Err(DecodeError::Malformed(format!(
            "bad trailer field `{}`",
            show(line)
        ))),
    }
}
