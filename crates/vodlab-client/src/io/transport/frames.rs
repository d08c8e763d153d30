//! Frame-aligned reads under the `h2` crate's frame reader.
//!
//! The `h2` crate reads the socket into a buffer of its own (tokio-util's
//! `FramedRead`, 8 KiB to start, a `BytesMut` whose frames are split off as
//! they are decoded) and, when a frame it has only part of does not fit
//! that buffer, moves the part into a new buffer before the rest arrives;
//! with nginx's 8 KiB DATA frames (8,201 bytes with the header) nearly every
//! frame was cut, so the client copied its body bytes twice (12 % of its CPU
//! time at 512 KiB responses, docs/benchmarks.md). [`FrameReads`] looks at
//! the frame headers before the reader above sees them and hands it a
//! frame's bytes only when the whole frame fits the reader's free room:
//! otherwise the 9-byte header alone, so the reader reserves room for
//! exactly that frame (moving 9 bytes, not a cut frame's kilobytes), and
//! the next reads bring the rest straight into that room.
//!
//! It reads from a buffered source ([`AsyncBufRead`]): the plaintext
//! records of a TLS stream (so body bytes are copied once, from rustls's
//! record to the frame reader, as over HTTP/1.1 — not through a buffer of
//! ours in between), or a [`tokio::io::BufReader`] over TCP (large reads,
//! and a frame larger than that buffer read straight into the reader's
//! room: with a large SETTINGS_MAX_FRAME_SIZE the payload is copied once,
//! by the kernel). Server-to-client bytes of an HTTP/2 connection are
//! frames from the first byte (RFC 9113 §3.4: the server's preface is a
//! SETTINGS frame), so the framing is known throughout.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncBufRead, AsyncRead, AsyncWrite, ReadBuf};

/// Bytes a [`tokio::io::BufReader`] under an h2c connection reads from the
/// socket at a time.
pub const READ_BUFFER: usize = 64 * 1024;

/// HTTP/2 frame header length (RFC 9113 §4.1).
const HEADER: usize = 9;

/// A transport whose reads hand the reader above whole frames, or a frame's
/// header alone when the frame does not fit the reader's room.
pub struct FrameReads<T> {
    io: T,
    /// The next frame's header bytes taken from `io`.
    hdr: [u8; HEADER],
    /// How many of `hdr` are taken.
    hlen: usize,
    /// How many of `hdr` are handed up (a reader with less room than a
    /// header gets it in parts).
    hsent: usize,
    /// Bytes of the current frame (its header handed up) still to hand.
    passing: usize,
    /// An error met after bytes were handed in the same read: returned by
    /// the next read.
    err: Option<io::Error>,
}

impl<T> FrameReads<T> {
    /// Frame-aligned reads from `io`.
    pub fn new(io: T) -> Self {
        Self {
            io,
            hdr: [0; HEADER],
            hlen: 0,
            hsent: 0,
            passing: 0,
            err: None,
        }
    }

    /// The wrapped transport.
    pub fn get_ref(&self) -> &T {
        &self.io
    }
}

/// A frame's whole length (header included) from its header.
fn frame_len(h: &[u8; HEADER]) -> usize {
    HEADER + (usize::from(h[0]) << 16 | usize::from(h[1]) << 8 | usize::from(h[2]))
}

impl<T: AsyncBufRead + AsyncRead + Unpin> AsyncRead for FrameReads<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        if let Some(e) = me.err.take() {
            return Poll::Ready(Err(e));
        }
        let start = out.filled().len();
        // what a read that met `Pending` or an error returns: the bytes
        // handed so far, if any (an error then waits for the next read)
        let stop = |me: &mut Self, out: &ReadBuf<'_>, r: Poll<io::Result<()>>| {
            if out.filled().len() == start {
                return r;
            }
            if let Poll::Ready(Err(e)) = r {
                me.err = Some(e);
            }
            Poll::Ready(Ok(()))
        };
        loop {
            let room = out.remaining();
            if room == 0 {
                return Poll::Ready(Ok(()));
            }
            if me.passing > 0 {
                // the rest of a frame whose header went up: straight into
                // the room reserved for it
                let mut sub = out.take(me.passing.min(room));
                match Pin::new(&mut me.io).poll_read(cx, &mut sub) {
                    Poll::Ready(Ok(())) => {}
                    r => return stop(me, out, r),
                }
                let n = sub.filled().len();
                if n == 0 {
                    return Poll::Ready(Ok(())); // end of stream
                }
                // SAFETY: the inner read initialised these `n` bytes of
                // `out`'s unfilled part (`sub` is a view of it)
                unsafe { out.assume_init(n) };
                out.advance(n);
                me.passing -= n;
                continue;
            }
            if me.hlen == 0 {
                // whole frames that fit the room and lie in the buffered
                // chunk go up in one copy (small frames: no step per frame)
                let chunk = match Pin::new(&mut me.io).poll_fill_buf(cx) {
                    Poll::Ready(Ok(c)) => c,
                    Poll::Ready(Err(e)) => return stop(me, out, Poll::Ready(Err(e))),
                    Poll::Pending => return stop(me, out, Poll::Pending),
                };
                let mut n = 0;
                while chunk.len() - n >= HEADER {
                    let len = frame_len(chunk[n..n + HEADER].try_into().expect("9 bytes"));
                    if n + len > chunk.len().min(room) {
                        break;
                    }
                    n += len;
                }
                if n > 0 {
                    out.put_slice(&chunk[..n]);
                    Pin::new(&mut me.io).consume(n);
                    continue;
                }
                if chunk.is_empty() {
                    return Poll::Ready(Ok(())); // end of stream at a frame's start
                }
                // else the next frame's header from this chunk (one poll of
                // the source per step: a source's `Pending` ends the read)
                let k = chunk.len().min(HEADER);
                me.hdr[..k].copy_from_slice(&chunk[..k]);
                me.hlen = k;
                Pin::new(&mut me.io).consume(k);
            }
            // a frame starts: take its header (it may span buffered chunks)
            while me.hlen < HEADER {
                let chunk = match Pin::new(&mut me.io).poll_fill_buf(cx) {
                    Poll::Ready(Ok(c)) => c,
                    Poll::Ready(Err(e)) => return stop(me, out, Poll::Ready(Err(e))),
                    Poll::Pending => return stop(me, out, Poll::Pending),
                };
                if chunk.is_empty() {
                    // end of stream inside a header: what came goes as it is
                    let give = (me.hlen - me.hsent).min(room);
                    out.put_slice(&me.hdr[me.hsent..me.hsent + give]);
                    me.hsent += give;
                    return Poll::Ready(Ok(()));
                }
                let k = chunk.len().min(HEADER - me.hlen);
                me.hdr[me.hlen..me.hlen + k].copy_from_slice(&chunk[..k]);
                me.hlen += k;
                Pin::new(&mut me.io).consume(k);
            }
            let len = frame_len(&me.hdr);
            let fits = me.hsent == 0 && len <= room;
            if !fits && out.filled().len() > start {
                // whole frames first: this one starts the next read
                return Poll::Ready(Ok(()));
            }
            // the header (or, with less room than 9 bytes, part of it)
            let give = (HEADER - me.hsent).min(room);
            out.put_slice(&me.hdr[me.hsent..me.hsent + give]);
            me.hsent += give;
            if me.hsent < HEADER {
                return Poll::Ready(Ok(()));
            }
            me.hlen = 0;
            me.hsent = 0;
            me.passing = len - HEADER;
            if !fits {
                // the header alone: the reader reserves room for the frame
                return Poll::Ready(Ok(()));
            }
        }
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for FrameReads<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, data)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn frame(len: usize, fill: u8) -> Vec<u8> {
        let mut f = vec![
            (len >> 16) as u8,
            (len >> 8) as u8,
            len as u8,
            0,
            0,
            0,
            0,
            0,
            1,
        ];
        f.extend(std::iter::repeat_n(fill, len));
        f
    }

    /// A buffered source giving at most `piece` bytes a chunk (a TLS
    /// record's plaintext, or what one socket read brought), `Pending`
    /// before every other chunk when `stall`.
    struct Pieces<'a> {
        data: &'a [u8],
        piece: usize,
        stall: bool,
        stalled: bool,
        /// Bytes handed by `poll_read` (not through `fill_buf`).
        direct: usize,
    }

    impl<'a> Pieces<'a> {
        fn new(data: &'a [u8], piece: usize, stall: bool) -> Self {
            Self {
                data,
                piece,
                stall,
                stalled: false,
                direct: 0,
            }
        }
        fn poll_stall(&mut self, cx: &mut Context<'_>) -> Poll<()> {
            if self.stall && !self.stalled {
                self.stalled = true;
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            self.stalled = false;
            Poll::Ready(())
        }
    }

    impl AsyncBufRead for Pieces<'_> {
        fn poll_fill_buf(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<&[u8]>> {
            let me = self.get_mut();
            std::task::ready!(me.poll_stall(cx));
            let n = me.data.len().min(me.piece);
            Poll::Ready(Ok(&me.data[..n]))
        }
        fn consume(mut self: Pin<&mut Self>, amt: usize) {
            self.data = &self.data[amt..];
        }
    }

    impl AsyncRead for Pieces<'_> {
        fn poll_read(
            self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &mut ReadBuf<'_>,
        ) -> Poll<io::Result<()>> {
            let me = self.get_mut();
            std::task::ready!(me.poll_stall(cx));
            let n = me.data.len().min(me.piece).min(buf.remaining());
            buf.put_slice(&me.data[..n]);
            me.data = &me.data[n..];
            me.direct += n;
            Poll::Ready(Ok(()))
        }
    }

    /// Reads everything through `FrameReads` with `room`-byte reads;
    /// returns the bytes and each read's length.
    fn read_all(data: &[u8], room: usize, piece: usize) -> (Vec<u8>, Vec<usize>) {
        let mut r = FrameReads::new(Pieces::new(data, piece, false));
        let waker = futures_util::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        let (mut got, mut reads) = (Vec::new(), Vec::new());
        let mut space = vec![0u8; room];
        loop {
            let mut b = ReadBuf::new(&mut space);
            match Pin::new(&mut r).poll_read(&mut cx, &mut b) {
                Poll::Ready(Ok(())) if b.filled().is_empty() => break,
                Poll::Ready(Ok(())) => {
                    reads.push(b.filled().len());
                    got.extend_from_slice(b.filled());
                }
                other => panic!("{other:?}"),
            }
        }
        (got, reads)
    }

    /// The `h2` crate's frame reader as tokio-util's `FramedRead` and
    /// `LengthDelimitedCodec` drive its buffer: `cap` bytes of room from
    /// the frame at the front, a new 8 KiB buffer when it is full, and a
    /// reservation for the whole frame once its header is in, which moves
    /// the frame's bytes already read into a new buffer when they do not
    /// fit. Returns the frames read and the bytes moved.
    fn h2_reader(mut r: FrameReads<Pieces<'_>>) -> (Vec<u8>, usize) {
        let waker = futures_util::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        let (mut frames, mut moved) = (Vec::new(), 0);
        // the buffer: `pending` bytes of an undecoded frame, room `cap - len`
        let (mut pending, mut cap) = (Vec::new(), 8192usize);
        loop {
            // decode every whole frame; reserve for a partial one
            while pending.len() >= HEADER {
                let len = frame_len(pending[..HEADER].try_into().unwrap());
                if pending.len() >= len {
                    frames.extend(pending.drain(..len));
                    cap -= len;
                    continue;
                }
                if cap < len {
                    moved += pending.len();
                    cap = len.max(8192);
                }
                break;
            }
            if cap == pending.len() {
                moved += pending.len();
                cap = 8192usize.max(pending.len() + 1);
            }
            let mut space = vec![0u8; cap - pending.len()];
            let mut b = ReadBuf::new(&mut space);
            match Pin::new(&mut r).poll_read(&mut cx, &mut b) {
                Poll::Ready(Ok(())) if b.filled().is_empty() => break,
                Poll::Ready(Ok(())) => pending.extend_from_slice(b.filled()),
                Poll::Pending => {}
                Poll::Ready(Err(e)) => panic!("{e}"),
            }
        }
        frames.extend(pending);
        (frames, moved)
    }

    #[test]
    fn reads_end_on_frame_boundaries() {
        // nginx's 8 KiB DATA frames (8,201 bytes with the header) arriving
        // in 5,000-byte pieces, read with 20,000 bytes of room: two whole
        // frames fit, and the third starts the next read
        let data: Vec<u8> = (0..10).flat_map(|i| frame(8192, i)).collect();
        let (got, reads) = read_all(&data, 20_000, 5_000);
        assert_eq!(got, data);
        let mut at = 0;
        for n in &reads {
            // a read ends inside a frame only when the frame fitted its room
            at += n;
            assert!(at % 8201 == 0 || at % 8201 < 20_000, "{reads:?}");
        }
        // arriving faster than read: two whole frames a read
        let (got, reads) = read_all(&data, 20_000, 1 << 20);
        assert_eq!(got, data);
        assert!(reads.iter().all(|n| n % 8201 == 0), "{reads:?}");
        assert_eq!(reads[0], 2 * 8201);
        assert!(reads.len() < 10, "{reads:?}");
    }

    #[test]
    fn a_frame_past_the_room_goes_as_its_header_then_whole() {
        // nginx's 8,201-byte frames into an 8 KiB buffer (tokio-util's
        // first size): the header alone, so the reader reserves for the
        // frame, then the payload in one read; never a cut payload
        let data: Vec<u8> = (0..4).flat_map(|i| frame(8192, i)).collect();
        let (got, reads) = read_all(&data, 8192, 1 << 20);
        assert_eq!(got, data);
        assert_eq!(reads, [9, 8192, 9, 8192, 9, 8192, 9, 8192]);
        // with room for a frame and a half: whole frames, one a read
        let (got, reads) = read_all(&data, 12_000, 1 << 20);
        assert_eq!(got, data);
        assert_eq!(reads, [8201; 4]);
    }

    #[test]
    fn a_large_frames_payload_is_read_straight_into_the_room() {
        // 1 MiB frames (a client advertising a large SETTINGS_MAX_FRAME_SIZE)
        let data: Vec<u8> = (0..3).flat_map(|i| frame(1 << 20, i)).collect();
        let mut r = FrameReads::new(Pieces::new(&data, 256 * 1024, false));
        let waker = futures_util::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        let mut space = vec![0u8; 2 << 20];
        let mut b = ReadBuf::new(&mut space[..8192]);
        assert!(Pin::new(&mut r).poll_read(&mut cx, &mut b).is_ready());
        assert_eq!(b.filled().len(), HEADER, "the header alone");
        let mut b = ReadBuf::new(&mut space);
        assert!(Pin::new(&mut r).poll_read(&mut cx, &mut b).is_ready());
        // the payload, read by the source's own reads, not through
        // `fill_buf`, and the next frame does not start in the same read
        assert_eq!(b.filled().len(), 1 << 20);
        assert_eq!(r.get_ref().direct, 1 << 20);
    }

    #[test]
    fn a_stream_cut_mid_frame_hands_over_what_came() {
        let mut data = frame(100, 1);
        data.extend(&frame(100, 2)[..50]);
        let (got, _) = read_all(&data, 4096, 4096);
        assert_eq!(got, data);
        // and inside a header
        let mut data = frame(100, 1);
        data.extend(&frame(100, 2)[..5]);
        let (got, _) = read_all(&data, 4096, 4096);
        assert_eq!(got, data);
    }

    #[test]
    fn less_room_than_a_header_gets_it_in_parts() {
        let data: Vec<u8> = (0..3).flat_map(|i| frame(20, i)).collect();
        let (got, reads) = read_all(&data, 4, 7);
        assert_eq!(got, data);
        assert!(reads.iter().all(|n| *n <= 4), "{reads:?}");
    }

    proptest! {
        /// Under the `h2` crate's reader, every byte arrives in order and
        /// no frame's payload is moved between buffers: only headers (and
        /// a frame cut by the end of the stream) are, whatever the frame
        /// sizes, the source's chunks (records split anywhere, headers
        /// included) and its stalls.
        #[test]
        fn the_h2_reader_never_moves_a_payload(
            sizes in proptest::collection::vec(0usize..40_000, 1..40),
            piece in 1usize..70_000,
            stall in any::<bool>(),
        ) {
            let data: Vec<u8> = sizes
                .iter()
                .enumerate()
                .flat_map(|(i, n)| frame(*n, i as u8))
                .collect();
            let (got, moved) = h2_reader(FrameReads::new(Pieces::new(&data, piece, stall)));
            prop_assert!(got == data, "bytes in order");
            prop_assert!(moved <= HEADER * sizes.len(), "moved {} bytes", moved);
        }
    }
}
