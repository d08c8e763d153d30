//! Gathered writes under the `h2` crate.
//!
//! The h2 crate flushes its transport after every DATA frame it writes: a
//! frame whose payload is larger than a few hundred bytes is held as the
//! encoder's "next" frame, and the encoder has room for another frame only
//! after a `flush`, which ends with the transport's `poll_flush`. So a
//! buffered writer under it (tokio's `BufWriter`) emptied itself once per
//! frame, and a 100 MB response at the client's 16 KiB frames went out as
//! ~6,100 `writev` calls over TLS, each frame's 9-byte head cut into a TLS
//! record of its own after the 16 KiB one (`strace`, docs/benchmarks.md).
//!
//! [`Gather`] buffers what is written and defers a flush asked for right
//! after a write: it wakes its task and reports the flush done, so the
//! connection's task goes on to its next frames. A flush asked for with
//! nothing written since the last one (the h2 crate ran out of frames to
//! send: its poll ends with a flush) is a real one, as is every write that
//! no longer fits the buffer. Bytes therefore never wait for more than one
//! more poll of the connection's task, and frames leave in writes of up to
//! the buffer's size: over TLS, full 16 KiB records.
//!
//! The buffer is held only while bytes wait in it: a real flush that
//! empties it hands it back to the thread's pool of body buffers
//! ([`crate::body_pool`]), so an idle connection holds none (10,000
//! connections that each once sent a response would otherwise keep 2.5 GB).

use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::body_pool;

/// Bytes gathered before a write to the transport underneath: one of the
/// pool's body buffers.
pub const GATHER: usize = crate::body_pool::BODY_BUFFER;

/// A transport whose writes are gathered into a buffer and whose flushes
/// right after a write are deferred to the task's next poll.
pub struct Gather<T> {
    inner: T,
    buf: Vec<u8>,
    /// Bytes of `buf` already written to `inner`.
    pos: usize,
    cap: usize,
    /// Written since the last `poll_flush`.
    dirty: bool,
}

impl<T> Gather<T> {
    /// Gathers up to `cap` bytes before writing to `inner`.
    pub fn new(inner: T, cap: usize) -> Self {
        Self {
            inner,
            buf: Vec::new(),
            pos: 0,
            cap: cap.max(1),
            dirty: false,
        }
    }

    /// The wrapped transport.
    pub fn get_ref(&self) -> &T {
        &self.inner
    }

    /// Bytes gathered and not yet written underneath.
    pub fn pending(&self) -> usize {
        self.buf.len() - self.pos
    }
}

impl<T: AsyncWrite + Unpin> Gather<T> {
    /// Writes the gathered bytes to `inner` until none are left.
    fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.pos < self.buf.len() {
            match Pin::new(&mut self.inner).poll_write(cx, &self.buf[self.pos..]) {
                Poll::Ready(Ok(0)) => {
                    return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
                }
                Poll::Ready(Ok(n)) => self.pos += n,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
        self.buf.clear();
        self.pos = 0;
        Poll::Ready(Ok(()))
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Gather<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Gather<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.poll_write_vectored(cx, &[io::IoSlice::new(data)])
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let me = self.get_mut();
        let total: usize = bufs.iter().map(|b| b.len()).sum();
        if total == 0 {
            return Poll::Ready(Ok(0));
        }
        if me.buf.len() + total > me.cap {
            ready!(me.poll_drain(cx))?;
        }
        if total >= me.cap {
            // larger than the buffer (a large DATA frame): straight through,
            // the buffer being empty
            let r = Pin::new(&mut me.inner).poll_write_vectored(cx, bufs);
            if let Poll::Ready(Ok(n)) = &r {
                me.dirty |= *n > 0;
            }
            return r;
        }
        if me.buf.capacity() == 0 {
            me.buf = body_pool::take(me.cap);
        }
        for b in bufs {
            me.buf.extend_from_slice(b);
        }
        me.dirty = true;
        Poll::Ready(Ok(total))
    }

    fn is_write_vectored(&self) -> bool {
        // gathering takes the slices of a frame's head and payload at once
        true
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        if std::mem::take(&mut me.dirty) && me.pending() > 0 {
            // more frames may follow in this poll: flush on the next one
            cx.waker().wake_by_ref();
            return Poll::Ready(Ok(()));
        }
        ready!(me.poll_drain(cx))?;
        // nothing waits: the buffer goes back to the pool until the next write
        body_pool::give(std::mem::take(&mut me.buf));
        Pin::new(&mut me.inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        ready!(me.poll_drain(cx))?;
        Pin::new(&mut me.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::{Wake, Waker};

    /// Records each write's size and the flushes; accepts at most `max`
    /// bytes per write.
    #[derive(Default)]
    struct Rec {
        data: Vec<u8>,
        writes: Vec<usize>,
        flushes: usize,
        max: usize,
    }

    impl AsyncWrite for Rec {
        fn poll_write(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
            b: &[u8],
        ) -> Poll<io::Result<usize>> {
            let me = self.get_mut();
            let n = b.len().min(me.max);
            me.data.extend_from_slice(&b[..n]);
            me.writes.push(n);
            Poll::Ready(Ok(n))
        }
        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            self.get_mut().flushes += 1;
            Poll::Ready(Ok(()))
        }
        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    struct Count(AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
        fn wake_by_ref(self: &Arc<Self>) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A DATA frame as the h2 crate writes it: head and payload slices.
    fn frame(i: usize, len: usize) -> (Vec<u8>, Vec<u8>) {
        let head = vec![
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
        (head, vec![i as u8; len])
    }

    #[test]
    fn frames_flushed_one_by_one_leave_in_buffer_sized_writes() {
        let wakes = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(wakes.clone());
        let mut cx = Context::from_waker(&waker);
        let inner = Rec {
            max: usize::MAX,
            ..Rec::default()
        };
        let mut g = Gather::new(inner, 64 << 10);
        let mut want = Vec::new();
        // the h2 crate's pattern: a frame, a flush, the next frame, ...
        for i in 0..20 {
            let (h, p) = frame(i, 16_384);
            want.extend_from_slice(&h);
            want.extend_from_slice(&p);
            let bufs = [io::IoSlice::new(&h), io::IoSlice::new(&p)];
            let n = match Pin::new(&mut g).poll_write_vectored(&mut cx, &bufs) {
                Poll::Ready(Ok(n)) => n,
                other => panic!("{other:?}"),
            };
            assert_eq!(n, h.len() + p.len());
            assert!(matches!(
                Pin::new(&mut g).poll_flush(&mut cx),
                Poll::Ready(Ok(()))
            ));
        }
        assert_eq!(g.get_ref().flushes, 0, "every flush after a write waits");
        assert!(
            wakes.0.load(Ordering::Relaxed) >= 1,
            "a deferred flush wakes the task"
        );
        let early = g.get_ref().writes.clone();
        assert!(
            early.iter().all(|&w| w >= 3 * 16_393),
            "writes of whole buffers, not frames: {early:?}"
        );
        // the next poll's flush, with nothing written since: a real one
        assert!(matches!(
            Pin::new(&mut g).poll_flush(&mut cx),
            Poll::Ready(Ok(()))
        ));
        assert_eq!(g.get_ref().flushes, 1);
        assert_eq!(g.pending(), 0);
        assert_eq!(g.buf.capacity(), 0, "an empty buffer is not held");
        assert_eq!(g.get_ref().data, want, "every byte, in order");
        assert!(g.get_ref().writes.len() <= 20 / 3 + 1);
    }

    #[test]
    fn a_write_larger_than_the_buffer_goes_straight_through_after_what_was_gathered() {
        let waker = Waker::noop();
        let mut cx = Context::from_waker(waker);
        let inner = Rec {
            max: 10_000,
            ..Rec::default()
        };
        let mut g = Gather::new(inner, 4096);
        let small = vec![1u8; 100];
        let big = vec![2u8; 50_000];
        assert!(matches!(
            Pin::new(&mut g).poll_write(&mut cx, &small),
            Poll::Ready(Ok(100))
        ));
        assert!(g.get_ref().writes.is_empty(), "gathered");
        let n = match Pin::new(&mut g).poll_write(&mut cx, &big) {
            Poll::Ready(Ok(n)) => n,
            other => panic!("{other:?}"),
        };
        // the gathered 100 bytes first, then the large write's first part
        assert_eq!(g.get_ref().writes, vec![100, 10_000]);
        assert_eq!(n, 10_000);
        assert_eq!(&g.get_ref().data[..100], &small[..]);
        // a shutdown writes what is left
        let tail = vec![3u8; 10];
        assert!(matches!(
            Pin::new(&mut g).poll_write(&mut cx, &tail),
            Poll::Ready(Ok(10))
        ));
        assert!(matches!(
            Pin::new(&mut g).poll_shutdown(&mut cx),
            Poll::Ready(Ok(()))
        ));
        assert_eq!(g.get_ref().data.len(), 100 + 10_000 + 10);
    }
}
