//! Frame-aligned reads under the `h2` crate's frame reader.
//!
//! The `h2` crate reads the socket into a small buffer (tokio-util's
//! `FramedRead`, 8 KiB to start) and moves every frame cut by a read to
//! the front of its buffer or into a new one before the rest arrives; with
//! nginx's 8 KiB DATA frames (8,201 bytes with the header) nearly every
//! frame is cut, so the client copied its body bytes twice (the kernel's
//! copy and this one, 12 % of its CPU time at 512 KiB responses,
//! docs/benchmarks.md). [`FrameReads`] reads the socket in large pieces into
//! its own buffer and hands the reader above whole frames only, so the frame
//! reader finds no cut frame to move: one copy out of a large buffer
//! replaces a move of nearly every frame and seven of eight reads.
//!
//! A frame larger than what the reader asked for (or than this buffer)
//! passes through in pieces, as without it. Server-to-client bytes of an
//! HTTP/2 connection are frames from the first byte (RFC 9113 §3.4: the
//! server's preface is a SETTINGS frame), so the framing is known throughout.

use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Bytes read from the socket at a time.
pub const READ_BUFFER: usize = 64 * 1024;

/// HTTP/2 frame header length (RFC 9113 §4.1).
const HEADER: usize = 9;

/// A transport whose reads end on HTTP/2 frame boundaries where they can.
pub struct FrameReads<T> {
    io: T,
    buf: Box<[u8]>,
    start: usize,
    end: usize,
    /// Bytes of a frame passed through in pieces still to come before the
    /// next frame header.
    passing: usize,
}

impl<T> FrameReads<T> {
    /// `io` read through a [`READ_BUFFER`]-byte buffer.
    pub fn new(io: T) -> Self {
        Self {
            io,
            buf: vec![0u8; READ_BUFFER].into_boxed_slice(),
            start: 0,
            end: 0,
            passing: 0,
        }
    }

    /// The wrapped transport.
    pub fn get_ref(&self) -> &T {
        &self.io
    }
}

/// How many bytes at the front of `data` to hand to a reader with `room`
/// bytes of space, and how many of the last frame handed are still to come
/// (nonzero when a frame is cut). `None`: wait for more bytes.
///
/// Whole frames that fit go first. A frame alone that does not fit the
/// reader's room but fits this buffer (`cap`) goes as its 9-byte header
/// only: the `h2` crate's reader (tokio-util's length-delimited codec)
/// then reserves room for exactly that frame — copying the 9 bytes if its
/// buffer is still shared with frames handed up, not a cut frame's
/// kilobytes — and the next read brings the rest whole. A frame larger
/// than `cap` passes in pieces of the room.
fn take(data: &[u8], room: usize, cap: usize) -> Option<(usize, usize)> {
    let mut n = 0;
    while data.len() - n >= HEADER {
        let h = &data[n..];
        let len = HEADER + (usize::from(h[0]) << 16 | usize::from(h[1]) << 8 | usize::from(h[2]));
        if n + len > room || len > cap {
            // it does not fit: whole frames first
            if n > 0 {
                return Some((n, 0));
            }
            if len <= cap && room >= HEADER {
                return Some((HEADER, len - HEADER));
            }
            let give = data.len().min(room);
            return Some((give, len - give));
        }
        if n + len > data.len() {
            break;
        }
        n += len;
    }
    (n > 0).then_some((n, 0))
}

impl<T: AsyncRead + Unpin> AsyncRead for FrameReads<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        if out.remaining() == 0 {
            return Poll::Ready(Ok(()));
        }
        loop {
            let avail = &me.buf[me.start..me.end];
            if me.passing > 0 && !avail.is_empty() {
                // the rest of a frame handed in pieces
                let give = avail.len().min(me.passing).min(out.remaining());
                out.put_slice(&avail[..give]);
                me.start += give;
                me.passing -= give;
                return Poll::Ready(Ok(()));
            }
            if me.passing == 0 {
                if let Some((give, rest)) = take(avail, out.remaining(), me.buf.len()) {
                    out.put_slice(&avail[..give]);
                    me.start += give;
                    me.passing = rest;
                    return Poll::Ready(Ok(()));
                }
            }
            // more bytes needed: the cut frame at the front moves once per
            // large read, not once per frame
            if me.start > 0 {
                me.buf.copy_within(me.start..me.end, 0);
                me.end -= me.start;
                me.start = 0;
            }
            // never full here: a frame that fits the buffer is whole once
            // moved to the front, and a larger one passes in pieces
            debug_assert!(me.end < me.buf.len());
            let mut rb = ReadBuf::new(&mut me.buf[me.end..]);
            ready!(Pin::new(&mut me.io).poll_read(cx, &mut rb))?;
            let n = rb.filled().len();
            if n == 0 {
                // end of stream: what is left goes as it is
                let avail = &me.buf[me.start..me.end];
                let give = avail.len().min(out.remaining());
                out.put_slice(&avail[..give]);
                me.start += give;
                return Poll::Ready(Ok(()));
            }
            me.end += n;
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

    /// Reads everything through `FrameReads` with `room`-byte reads from a
    /// source that gives at most `piece` bytes a read; returns the bytes
    /// and each read's length.
    fn read_all(data: &[u8], room: usize, piece: usize) -> (Vec<u8>, Vec<usize>) {
        struct Pieces<'a>(&'a [u8], usize);
        impl AsyncRead for Pieces<'_> {
            fn poll_read(
                mut self: Pin<&mut Self>,
                _: &mut Context<'_>,
                buf: &mut ReadBuf<'_>,
            ) -> Poll<io::Result<()>> {
                let n = self.0.len().min(self.1).min(buf.remaining());
                buf.put_slice(&self.0[..n]);
                self.0 = &self.0[n..];
                Poll::Ready(Ok(()))
            }
        }
        let mut r = FrameReads::new(Pieces(data, piece));
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

    #[test]
    fn reads_end_on_frame_boundaries() {
        // nginx's 8 KiB DATA frames (8,201 bytes with the header) arriving
        // in 5,000-byte pieces, read with 20,000 bytes of room: a frame is
        // handed over once whole, never cut
        let data: Vec<u8> = (0..10).flat_map(|i| frame(8192, i)).collect();
        let (got, reads) = read_all(&data, 20_000, 5_000);
        assert_eq!(got, data);
        assert!(reads.iter().all(|n| n % 8201 == 0), "{reads:?}");
        // arriving faster than read: two whole frames a read
        let (got, reads) = read_all(&data, 20_000, 1 << 20);
        assert_eq!(got, data);
        assert!(reads.iter().all(|n| n % 8201 == 0), "{reads:?}");
        assert_eq!(reads[0], 2 * 8201);
        assert!(reads.len() < 10, "{reads:?}");
    }

    #[test]
    fn a_frame_larger_than_the_room_goes_in_pieces() {
        // 100 KiB frames: larger than the reader's room and this buffer
        let mut data = frame(100 * 1024, 7);
        data.extend(frame(10, 8));
        data.extend(frame(100 * 1024, 9));
        let (got, reads) = read_all(&data, 16 * 1024, 64 * 1024);
        assert_eq!(got, data);
        assert!(reads.iter().all(|n| *n <= 16 * 1024));
        // the small frame after the first big one starts a read of its own
        let mut at = 0;
        let starts: Vec<usize> = reads
            .iter()
            .map(|n| {
                let s = at;
                at += n;
                s
            })
            .collect();
        assert!(starts.contains(&(HEADER + 100 * 1024)), "{starts:?}");
    }

    #[test]
    fn a_stream_cut_mid_frame_hands_over_what_came() {
        let mut data = frame(100, 1);
        data.extend(&frame(100, 2)[..50]);
        let (got, _) = read_all(&data, 4096, 4096);
        assert_eq!(got, data);
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
}
