//! Frame-rate limits of an HTTP/2 connection, beside the h2 crate's own.
//!
//! The h2 crate bounds memory against most floods (one SETTINGS or PING
//! acknowledgement pending at a time, then it stops reading; a budget for
//! small DATA frames; CONTINUATION and header-list limits; reset-stream
//! limits) but not the CPU a client makes the server spend on a stream of
//! cheap frames. [`FrameMeter`] watches the frame headers the client sends
//! (it reads the bytes as they pass to the h2 crate, without I/O and with
//! `now` passed in) and reports a [`Flood`] when a kind of frame arrives
//! faster than its limit per second: non-ACK SETTINGS, non-ACK PING,
//! WINDOW_UPDATE, small DATA frames (under [`SMALL_DATA`] bytes without
//! END_STREAM) and RST_STREAM (rapid reset). The connection then ends
//! with GOAWAY `ENHANCE_YOUR_CALM` (`crate::h2`).
//!
//! WINDOW_UPDATE frames are limited by what the client has received: a
//! reader sends them as it consumes DATA, at most two per DATA frame (its
//! stream's and the connection's), so the meter also follows the frames
//! the server writes and each DATA frame sent earns the client two
//! WINDOW_UPDATEs ([`EARNED_PER_DATA`]), each HEADERS frame it sends one
//! (a window raised as a stream opens). Only the WINDOW_UPDATEs beyond
//! those earned count against the per-second limit: a reader at any speed
//! and window size is never cut, and one that sends WINDOW_UPDATEs for
//! data it never got is cut after the limit (at 200,000/s the server read
//! a fifth of a second of them per connection, and a reconnecting attacker
//! took half the server's CPU: `docs/benchmarks.md`).

use std::fmt;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::Notify;

/// DATA payloads below this many bytes (without END_STREAM) count as small.
pub const SMALL_DATA: u32 = 256;

/// WINDOW_UPDATE frames a client earns per DATA frame the server sends.
pub const EARNED_PER_DATA: u32 = 2;

/// Most earned WINDOW_UPDATEs a client may hold unspent.
pub const EARNED_CAP: u32 = 1 << 16;

/// The client's connection preface (RFC 9113 §3.4).
pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// A kind of frame sent too often.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flood {
    /// SETTINGS without ACK.
    Settings,
    /// PING without ACK.
    Ping,
    /// WINDOW_UPDATE.
    WindowUpdate,
    /// Small or empty DATA frames.
    SmallData,
    /// RST_STREAM (rapid reset).
    Reset,
    /// A header block (HEADERS and its CONTINUATIONs) longer than
    /// [`FloodLimits::header_block`] bytes.
    HeaderBlock,
}

impl fmt::Display for Flood {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Flood::Settings => "SETTINGS flood",
            Flood::Ping => "PING flood",
            Flood::WindowUpdate => "WINDOW_UPDATE flood",
            Flood::SmallData => "small DATA flood",
            Flood::Reset => "RST_STREAM flood (rapid reset)",
            Flood::HeaderBlock => "CONTINUATION flood (header block too long)",
        })
    }
}

/// Most frames of each kind per second (0 = no limit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FloodLimits {
    /// SETTINGS frames without ACK.
    pub settings: u32,
    /// PING frames without ACK.
    pub pings: u32,
    /// WINDOW_UPDATE frames beyond those earned by the DATA and HEADERS
    /// frames exchanged (see the module's notes).
    pub window_updates: u32,
    /// Small DATA frames.
    pub small_data: u32,
    /// RST_STREAM frames.
    pub resets: u32,
    /// Most bytes of one header block as sent (HEADERS and CONTINUATION
    /// payloads, not per second; 0 = no limit). The meter ends the
    /// connection before the h2 crate decodes a block past it: an endless
    /// CONTINUATION stream otherwise has the crate decode a few frames of
    /// HPACK literals per connection (~0.3 ms each on this machine).
    pub header_block: u32,
}

/// Frames of the current one-second window.
#[derive(Debug, Default, Clone, Copy)]
struct Window {
    settings: u32,
    pings: u32,
    window_updates: u32,
    small_data: u32,
    resets: u32,
}

/// Follows frame headers through a byte stream (after an optional
/// preface), skipping payloads.
#[derive(Debug)]
struct Follower {
    /// Preface bytes still to skip.
    preface: usize,
    head: [u8; 9],
    have: usize,
    /// Payload bytes of the current frame still to skip.
    skip: u64,
}

impl Follower {
    fn new(preface: usize) -> Self {
        Self {
            preface,
            head: [0; 9],
            have: 0,
            skip: 0,
        }
    }

    /// Calls `each(type, flags, length)` for every frame header completed
    /// by `data`, stopping at its first error.
    fn feed<E>(
        &mut self,
        mut data: &[u8],
        mut each: impl FnMut(u8, u8, u32) -> Result<(), E>,
    ) -> Result<(), E> {
        let skip = self.preface.min(data.len());
        self.preface -= skip;
        data = &data[skip..];
        while !data.is_empty() {
            if self.skip > 0 {
                let k = (self.skip.min(data.len() as u64)) as usize;
                self.skip -= k as u64;
                data = &data[k..];
                continue;
            }
            let h: [u8; 9] = if self.have == 0 && data.len() >= 9 {
                // the usual case: a whole header in this read, no copy
                let h = data[..9].try_into().expect("9 bytes");
                data = &data[9..];
                h
            } else {
                let k = (9 - self.have).min(data.len());
                self.head[self.have..self.have + k].copy_from_slice(&data[..k]);
                self.have += k;
                data = &data[k..];
                if self.have < 9 {
                    return Ok(());
                }
                self.have = 0;
                self.head
            };
            let len = u32::from_be_bytes([0, h[0], h[1], h[2]]);
            self.skip = u64::from(len);
            each(h[3], h[4], len)?;
        }
        Ok(())
    }
}

/// Follows the client's frame headers through the byte stream and counts
/// the frames of the limited kinds per one-second window; follows the
/// server's frames for the WINDOW_UPDATEs they earn.
#[derive(Debug)]
pub struct FrameMeter {
    limits: FloodLimits,
    incoming: Follower,
    outgoing: Follower,
    window_start: Option<Instant>,
    counts: Window,
    /// WINDOW_UPDATEs earned and not yet sent.
    earned: u32,
    /// Bytes of the header block being received, if one is open
    /// (HEADERS or PUSH_PROMISE without END_HEADERS).
    block: Option<u64>,
    /// Type of the last frame whose header was read (255 before any).
    pub last_kind: u8,
    /// Whether a CONTINUATION frame has been seen on the connection.
    pub saw_continuation: bool,
}

impl FrameMeter {
    /// A meter for a connection whose bytes start with the client preface.
    pub fn new(limits: FloodLimits) -> Self {
        Self {
            limits,
            incoming: Follower::new(PREFACE.len()),
            outgoing: Follower::new(0),
            window_start: None,
            counts: Window::default(),
            earned: 0,
            block: None,
            last_kind: 255,
            saw_continuation: false,
        }
    }

    /// Feeds bytes the client sent at `now`; the first limit exceeded, if any.
    pub fn feed(&mut self, data: &[u8], now: Instant) -> Result<(), Flood> {
        let mut incoming = std::mem::replace(&mut self.incoming, Follower::new(0));
        let r = incoming.feed(data, |kind, flags, len| self.frame(kind, flags, len, now));
        self.incoming = incoming;
        r
    }

    /// Feeds bytes the server wrote (its frames, no preface): each DATA
    /// frame earns the client [`EARNED_PER_DATA`] WINDOW_UPDATEs.
    pub fn sent(&mut self, data: &[u8]) {
        let earned = &mut self.earned;
        let _ = self.outgoing.feed(data, |kind, _, _| {
            if kind == 0x0 {
                *earned = earned.saturating_add(EARNED_PER_DATA).min(EARNED_CAP);
            }
            Ok::<(), ()>(())
        });
    }

    fn frame(&mut self, kind: u8, flags: u8, len: u32, now: Instant) -> Result<(), Flood> {
        self.last_kind = kind;
        self.saw_continuation |= kind == 0x9;
        const END_HEADERS: u8 = 0x4;
        if kind == 0x1 || kind == 0x5 || (kind == 0x9 && self.block.is_some()) {
            let n = self.block.unwrap_or(0) + u64::from(len);
            let max = self.limits.header_block;
            if max > 0 && n > u64::from(max) {
                return Err(Flood::HeaderBlock);
            }
            self.block = (flags & END_HEADERS == 0).then_some(n);
        }
        match self.window_start {
            Some(t) if now.saturating_duration_since(t) < Duration::from_secs(1) => {}
            _ => {
                self.window_start = Some(now);
                self.counts = Window::default();
            }
        }
        let l = self.limits;
        let c = &mut self.counts;
        let over = |n: &mut u32, max: u32| {
            *n += 1;
            max > 0 && *n > max
        };
        const ACK: u8 = 0x1;
        const END_STREAM: u8 = 0x1;
        match kind {
            0x0 if flags & END_STREAM == 0
                && len < SMALL_DATA
                && over(&mut c.small_data, l.small_data) =>
            {
                return Err(Flood::SmallData)
            }
            // a stream opened may raise its window once
            0x1 => self.earned = self.earned.saturating_add(1).min(EARNED_CAP),
            0x3 if over(&mut c.resets, l.resets) => return Err(Flood::Reset),
            0x4 if flags & ACK == 0 && over(&mut c.settings, l.settings) => {
                return Err(Flood::Settings)
            }
            0x6 if flags & ACK == 0 && over(&mut c.pings, l.pings) => return Err(Flood::Ping),
            0x8 if self.earned > 0 => self.earned -= 1,
            0x8 if over(&mut c.window_updates, l.window_updates) => {
                return Err(Flood::WindowUpdate)
            }
            _ => {}
        }
        Ok(())
    }
}

/// Where a metered stream reports a flood: the first one, and a wake-up
/// for the connection's task; and the last frames read, which name the
/// abuse behind an h2-crate GOAWAY `ENHANCE_YOUR_CALM` (the crate does not
/// hand its debug data to the server).
#[derive(Debug, Default)]
pub struct FloodSignal {
    /// The flood seen, if any.
    pub seen: Mutex<Option<Flood>>,
    /// Notified once when it is seen.
    pub notify: Notify,
    /// `(last frame type, CONTINUATION seen)` as of the last read.
    pub last: Mutex<(u8, bool)>,
}

/// Which abuse an `ENHANCE_YOUR_CALM` the h2 crate raised was about, from
/// the last frame the client sent: CONTINUATION (or HEADERS after some) →
/// `continuation_flood`, RST_STREAM → `rapid_reset`, DATA →
/// `small_data_flood`, anything else → `local_error_resets` (too many
/// streams reset for the client's errors).
pub fn calm_cause(last_kind: u8, saw_continuation: bool) -> &'static str {
    match last_kind {
        0x9 => "continuation_flood",
        0x1 if saw_continuation => "continuation_flood",
        0x3 => "rapid_reset",
        0x0 => "small_data_flood",
        _ => "local_error_resets",
    }
}

/// A byte stream whose incoming bytes pass a [`FrameMeter`]. After a flood
/// it reads nothing more (the connection's task sends GOAWAY and closes).
pub struct Metered<T> {
    inner: T,
    meter: FrameMeter,
    signal: Arc<FloodSignal>,
    stopped: bool,
}

impl<T> Metered<T> {
    /// Wraps `inner`.
    pub fn new(inner: T, limits: FloodLimits, signal: Arc<FloodSignal>) -> Self {
        Self {
            inner,
            meter: FrameMeter::new(limits),
            signal,
            stopped: false,
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Metered<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        if me.stopped {
            // the connection's task was notified and closes the connection
            return Poll::Pending;
        }
        let before = buf.filled().len();
        let r = Pin::new(&mut me.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = &r {
            let new = &buf.filled()[before..];
            let fed = me.meter.feed(new, Instant::now());
            *me.signal.last.lock().expect("lock") = (me.meter.last_kind, me.meter.saw_continuation);
            if let Err(f) = fed {
                me.stopped = true;
                *me.signal.seen.lock().expect("lock") = Some(f);
                me.signal.notify.notify_one();
                // the bytes of this read are not handed on
                buf.set_filled(before);
                return Poll::Pending;
            }
        }
        r
    }
}

impl<T: AsyncRead + AsyncWrite + Unpin> AsyncWrite for Metered<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let me = self.get_mut();
        let r = Pin::new(&mut me.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = &r {
            me.meter.sent(&buf[..*n]);
        }
        r
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let me = self.get_mut();
        let r = Pin::new(&mut me.inner).poll_write_vectored(cx, bufs);
        if let Poll::Ready(Ok(n)) = &r {
            let mut left = *n;
            for b in bufs {
                if left == 0 {
                    break;
                }
                let k = left.min(b.len());
                me.meter.sent(&b[..k]);
                left -= k;
            }
        }
        r
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    /// Shuts the write side, then reads and drops what the peer sent that
    /// is already here (at most [`DRAIN_ON_CLOSE`] bytes, never waiting):
    /// the h2 crate shuts down after a connection error's GOAWAY, and a
    /// socket closed with unread input sends a reset instead of a FIN, which
    /// can destroy the GOAWAY in the peer's receive queue before it reads it
    /// (seen with an oversized frame, whose payload the codec never reads).
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        std::task::ready!(Pin::new(&mut me.inner).poll_shutdown(cx))?;
        let mut scratch = [0u8; 4096];
        let mut drained = 0;
        while drained < DRAIN_ON_CLOSE {
            let mut buf = ReadBuf::new(&mut scratch);
            match Pin::new(&mut me.inner).poll_read(cx, &mut buf) {
                Poll::Ready(Ok(())) if !buf.filled().is_empty() => drained += buf.filled().len(),
                _ => break,
            }
        }
        Poll::Ready(Ok(()))
    }
}

/// Most input [`Metered`] reads and drops when its connection shuts down.
const DRAIN_ON_CLOSE: usize = 256 << 10;

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(kind: u8, flags: u8, payload: &[u8]) -> Vec<u8> {
        let n = payload.len() as u32;
        let mut v = vec![
            (n >> 16) as u8,
            (n >> 8) as u8,
            n as u8,
            kind,
            flags,
            0,
            0,
            0,
            1,
        ];
        v.extend_from_slice(payload);
        v
    }

    const LIMITS: FloodLimits = FloodLimits {
        settings: 10,
        pings: 10,
        window_updates: 100,
        small_data: 100,
        resets: 50,
        header_block: 4096,
    };

    #[test]
    fn a_flood_is_seen_within_a_second_and_not_across_seconds() {
        let t0 = Instant::now();
        let mut m = FrameMeter::new(LIMITS);
        m.feed(PREFACE, t0).unwrap();
        let settings = frame(0x4, 0, &[0; 6]);
        for _ in 0..10 {
            m.feed(&settings, t0).unwrap();
        }
        // ACKs and other frames do not count
        m.feed(&frame(0x4, 1, &[]), t0).unwrap();
        m.feed(&frame(0x1, 0x4, &[0x82; 20]), t0).unwrap();
        assert_eq!(m.feed(&settings, t0), Err(Flood::Settings));
        // a new window
        let mut m = FrameMeter::new(LIMITS);
        m.feed(PREFACE, t0).unwrap();
        for i in 0..30 {
            let now = t0 + Duration::from_millis(100 * i);
            m.feed(&settings, now).unwrap();
        }
    }

    #[test]
    fn frames_split_across_reads_are_followed() {
        let t0 = Instant::now();
        let mut m = FrameMeter::new(LIMITS);
        let mut bytes = PREFACE.to_vec();
        // a big DATA frame with a PING-looking payload must not count as pings
        bytes.extend(frame(0x0, 0, &[6u8; 4000]));
        for _ in 0..11 {
            bytes.extend(frame(0x6, 0, &[0; 8]));
        }
        let mut r = Ok(());
        for chunk in bytes.chunks(7) {
            r = m.feed(chunk, t0);
            if r.is_err() {
                break;
            }
        }
        assert_eq!(r, Err(Flood::Ping));
    }

    #[test]
    fn a_header_block_past_its_limit_is_a_flood() {
        let t0 = Instant::now();
        let run = |frames: &[Vec<u8>]| {
            let mut m = FrameMeter::new(LIMITS);
            m.feed(PREFACE, t0).unwrap();
            frames.iter().map(|f| m.feed(f, t0)).find_map(Result::err)
        };
        let cont = frame(0x9, 0, &[0x40; 1000]);
        let last = frame(0x9, 0x4, &[0x40; 1000]);
        // HEADERS of 1,000 bytes, then CONTINUATIONs: cut past 4,096 bytes
        let mut fs = vec![frame(0x1, 0, &[0x82; 1000])];
        fs.extend(std::iter::repeat_n(cont.clone(), 3));
        assert_eq!(run(&fs), None, "4,000 bytes");
        fs.push(cont.clone());
        assert_eq!(run(&fs), Some(Flood::HeaderBlock));
        // END_HEADERS closes a block: many blocks under the limit are fine
        let mut fs = Vec::new();
        for _ in 0..50 {
            fs.push(frame(0x1, 0, &[0x82; 1000]));
            fs.extend([cont.clone(), last.clone()]);
        }
        assert_eq!(run(&fs), None);
        let off = FloodLimits {
            header_block: 0,
            ..LIMITS
        };
        let mut m = FrameMeter::new(off);
        m.feed(PREFACE, t0).unwrap();
        m.feed(&frame(0x1, 0, &[0x82; 1000]), t0).unwrap();
        for _ in 0..100 {
            m.feed(&cont, t0).unwrap();
        }
    }

    #[test]
    fn window_updates_are_earned_by_the_data_sent() {
        let t0 = Instant::now();
        let mut m = FrameMeter::new(LIMITS);
        m.feed(PREFACE, t0).unwrap();
        let wu = frame(0x8, 0, &[0, 0, 0, 1]);
        // 10,000 DATA frames of 16 KiB sent, in writes that split their heads
        let data = frame(0x0, 0, &[7u8; 16384]);
        let mut out = Vec::new();
        for _ in 0..10_000 {
            out.extend_from_slice(&data);
        }
        for chunk in out.chunks(5000) {
            m.sent(chunk);
        }
        // a reader acknowledges each on its stream and the connection, in one
        // second, far over the unearned limit of 100/s
        for i in 0..20_000 {
            m.feed(&wu, t0).unwrap_or_else(|f| panic!("{f} at {i}"));
        }
        // then only the unearned limit is left
        let cut = (0..1000).map(|_| m.feed(&wu, t0)).position(|r| r.is_err());
        assert_eq!(cut, Some(LIMITS.window_updates as usize));
        // a HEADERS from the client earns one; server HEADERS and SETTINGS earn none
        let mut m = FrameMeter::new(LIMITS);
        m.feed(PREFACE, t0).unwrap();
        m.sent(&frame(0x1, 0x4, &[0x88]));
        m.sent(&frame(0x4, 0, &[]));
        m.feed(&frame(0x1, 0x5, &[0x82]), t0).unwrap();
        let cut = (0..1000).map(|_| m.feed(&wu, t0)).position(|r| r.is_err());
        assert_eq!(cut, Some(LIMITS.window_updates as usize + 1));
    }

    #[test]
    fn small_data_resets_and_window_updates_have_limits() {
        let t0 = Instant::now();
        let run = |f: Vec<u8>, n: usize| {
            let mut m = FrameMeter::new(LIMITS);
            m.feed(PREFACE, t0).unwrap();
            (0..n).map(|_| m.feed(&f, t0)).find_map(Result::err)
        };
        assert_eq!(run(frame(0x0, 0, &[1; 10]), 101), Some(Flood::SmallData));
        assert_eq!(run(frame(0x0, 1, &[1; 10]), 500), None, "END_STREAM");
        assert_eq!(run(frame(0x0, 0, &[1; 300]), 500), None, "not small");
        assert_eq!(run(frame(0x3, 0, &[0; 4]), 51), Some(Flood::Reset));
        assert_eq!(
            run(frame(0x8, 0, &[0, 0, 0, 1]), 101),
            Some(Flood::WindowUpdate)
        );
        assert_eq!(run(frame(0x8, 0, &[0, 0, 0, 1]), 100), None);
        assert_eq!(calm_cause(0x9, true), "continuation_flood");
        assert_eq!(calm_cause(0x1, true), "continuation_flood");
        assert_eq!(calm_cause(0x1, false), "local_error_resets");
        assert_eq!(calm_cause(0x3, false), "rapid_reset");
        assert_eq!(calm_cause(0x0, false), "small_data_flood");
        let off = FloodLimits {
            settings: 0,
            ..LIMITS
        };
        let mut m = FrameMeter::new(off);
        m.feed(PREFACE, t0).unwrap();
        for _ in 0..1000 {
            m.feed(&frame(0x4, 0, &[]), t0).unwrap();
        }
    }
}
