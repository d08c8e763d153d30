//! The access link's rates on any transport, as a poll-level wrapper: the
//! token buckets of [`crate::core::link`] applied to the reads and writes of the
//! TCP stream under TLS or HTTP/2, so every protocol meets the same
//! emulated link (TLS and HTTP/2 framing bytes count against it, as on a
//! real link).

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Sleep;

use crate::core::link::{LinkSpec, TokenBucket};
use crate::core::time::{Clock, Time};

/// Bytes a [`Shaped`] reads before it yields (returns `Pending` after
/// waking its task): the reader above it (the HTTP/2 connection, which reads
/// frames until the socket is empty) hands at most this much to the streams
/// before they consume it. Without it a fast sender filled megabytes of
/// frames per wake-up, which the allocator gave back to the kernel and
/// faulted in again (7,400 page faults and 2.5x h1's CPU time per 100 MB
/// over h2c, docs/benchmarks.md); with it the frames' buffers are reused
/// while still in the cache (a turn below glibc's 128 KiB trim threshold:
/// the freed frames never make a top chunk big enough to give back).
pub const READ_TURN: usize = 64 * 1024;

/// A transport whose reads and writes are paced by the link's buckets.
pub struct Shaped<T> {
    io: T,
    /// Bytes still to read in this turn (see [`READ_TURN`]).
    turn: usize,
    /// Set at the end of a turn instead of waking the task (see
    /// [`Shaped::yielding_to`]); reads stay `Pending` while it is set.
    yielded: Option<Arc<AtomicBool>>,
    down: Option<TokenBucket>,
    up: Option<TokenBucket>,
    /// The buckets' clock, on tokio's time (paused in tests); they count
    /// only spans, so its epoch is the wrapper's creation.
    clock: Clock,
    read_wait: Option<Pin<Box<Sleep>>>,
    write_wait: Option<Pin<Box<Sleep>>>,
}

impl<T> Shaped<T> {
    /// `io` shaped by `link`'s rates (unshaped directions pass through).
    pub fn new(io: T, link: &LinkSpec) -> Self {
        let clock = Clock::new(tokio::time::Instant::now().into_std());
        let now = Time::ZERO;
        Self {
            io,
            turn: READ_TURN,
            yielded: None,
            down: (link.down_bps > 0.0).then(|| TokenBucket::new(link.down_bps, now)),
            up: (link.up_bps > 0.0).then(|| TokenBucket::new(link.up_bps, now)),
            clock,
            read_wait: None,
            write_wait: None,
        }
    }

    /// Ends its turns by setting `flag` rather than by waking the task: the
    /// owner of `flag` (the session's HTTP/2 drivers, see
    /// [`super::SessionTransport::poll_drivers_yielding`]) clears it and
    /// polls again after the streams have consumed what was read. A wake
    /// of one's own task from inside its poll makes tokio's multi-threaded
    /// scheduler queue it and wake an idle worker, which steals it: a futex
    /// call and two context switches per turn (3,700 of them per 100 MB).
    pub fn yielding_to(mut self, flag: Arc<AtomicBool>) -> Self {
        self.yielded = Some(flag);
        self
    }

    /// The wrapped transport.
    pub fn get_ref(&self) -> &T {
        &self.io
    }
}

/// The time now on `clock`, read from tokio's clock (virtual when paused).
fn tokio_now(clock: &Clock) -> Time {
    clock.time_of(tokio::time::Instant::now().into_std())
}

/// Waits until `bucket` has tokens; `Ready(limit)` is the largest transfer
/// to issue now.
fn poll_tokens(
    clock: &Clock,
    bucket: &mut Option<TokenBucket>,
    wait: &mut Option<Pin<Box<Sleep>>>,
    cx: &mut Context<'_>,
) -> Poll<usize> {
    let Some(b) = bucket.as_mut() else {
        return Poll::Ready(usize::MAX);
    };
    loop {
        if let Some(s) = wait.as_mut() {
            ready!(s.as_mut().poll(cx));
            *wait = None;
        }
        let w = b.wait(tokio_now(clock));
        if w.is_zero() {
            return Poll::Ready(b.chunk());
        }
        *wait = Some(Box::pin(tokio::time::sleep(w)));
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Shaped<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        if let Some(f) = &me.yielded {
            if f.load(Ordering::Relaxed) {
                // this turn is over for every reader of the flag
                return Poll::Pending;
            }
        }
        if me.turn == 0 {
            // yield: the task runs again at once, after its other futures
            me.turn = READ_TURN;
            match &me.yielded {
                Some(f) => f.store(true, Ordering::Relaxed),
                None => cx.waker().wake_by_ref(),
            }
            return Poll::Pending;
        }
        let limit = ready!(poll_tokens(&me.clock, &mut me.down, &mut me.read_wait, cx));
        if limit >= buf.remaining() {
            let before = buf.filled().len();
            let r = Pin::new(&mut me.io).poll_read(cx, buf);
            let n = buf.filled().len() - before;
            me.count(n, &r);
            ready!(r)?;
            return Poll::Ready(Ok(()));
        }
        let mut sub = buf.take(limit);
        let r = Pin::new(&mut me.io).poll_read(cx, &mut sub);
        let n = sub.filled().len();
        me.count(n, &r);
        ready!(r)?;
        // SAFETY: the inner read initialised these `n` bytes of `buf`'s
        // unfilled part (`sub` is a view of it)
        unsafe { buf.assume_init(n) };
        buf.advance(n);
        Poll::Ready(Ok(()))
    }
}

impl<T> Shaped<T> {
    /// Counts a read of `n` bytes against the bucket and the turn (a read
    /// that found nothing ends the turn).
    fn count<R>(&mut self, n: usize, r: &Poll<R>) {
        if r.is_pending() {
            self.turn = READ_TURN;
            return;
        }
        self.turn = self.turn.saturating_sub(n);
        if let Some(b) = self.down.as_mut() {
            if n > 0 {
                b.consume(tokio_now(&self.clock), n);
            }
        }
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Shaped<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let me = self.get_mut();
        let limit = ready!(poll_tokens(&me.clock, &mut me.up, &mut me.write_wait, cx));
        let n = ready!(Pin::new(&mut me.io).poll_write(cx, &data[..data.len().min(limit)]))?;
        if let Some(b) = me.up.as_mut() {
            b.consume(tokio_now(&me.clock), n);
        }
        Poll::Ready(Ok(n))
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
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test(start_paused = true)]
    async fn reads_are_paced_to_the_link_rate() {
        // 8 Mbit/s = 1 MB/s: 200 kB take about 0.19 s of (paused, virtual) time
        // beyond the first bucket's 10 ms
        let (mut a, b) = tokio::io::duplex(1 << 20);
        let link = LinkSpec {
            down_bps: 8e6,
            ..Default::default()
        };
        let mut s = Shaped::new(b, &link);
        a.write_all(&vec![7u8; 200_000]).await.unwrap();
        drop(a);
        let t0 = tokio::time::Instant::now();
        let mut got = Vec::new();
        s.read_to_end(&mut got).await.unwrap();
        let secs = t0.elapsed().as_secs_f64();
        assert_eq!(got.len(), 200_000);
        assert!((0.17..0.22).contains(&secs), "{secs}");
    }

    /// A reader that counts how often it was polled.
    struct Counting<T> {
        io: T,
        polls: usize,
    }

    impl<T: AsyncRead + Unpin> AsyncRead for Counting<T> {
        fn poll_read(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &mut ReadBuf<'_>,
        ) -> Poll<io::Result<()>> {
            self.polls += 1;
            Pin::new(&mut self.io).poll_read(cx, buf)
        }
    }

    #[test]
    fn reads_yield_after_a_turn_and_lose_nothing() {
        let data: Vec<u8> = (0..3 * READ_TURN + 100).map(|i| i as u8).collect();
        let mut s = Shaped::new(
            Counting {
                io: &data[..],
                polls: 0,
            },
            &LinkSpec::default(),
        );
        let waker = futures_util::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        let (mut got, mut yields) = (Vec::new(), 0);
        let mut chunk = vec![0u8; 16 * 1024];
        loop {
            let mut buf = ReadBuf::new(&mut chunk);
            match Pin::new(&mut s).poll_read(&mut cx, &mut buf) {
                Poll::Pending => yields += 1,
                Poll::Ready(r) => {
                    r.unwrap();
                    if buf.filled().is_empty() {
                        break;
                    }
                    got.extend_from_slice(buf.filled());
                }
            }
        }
        assert_eq!(got, data);
        // a yield after each full turn: 3 turns of 64 KiB, then 100 bytes
        assert_eq!(yields, 3);
        // the yields did not touch the socket
        assert_eq!(s.get_ref().polls, got.len().div_ceil(16 * 1024) + 1);
    }

    #[test]
    fn a_turn_ends_on_the_flag_without_a_wake() {
        struct Wakes(std::sync::atomic::AtomicUsize);
        impl std::task::Wake for Wakes {
            fn wake(self: Arc<Self>) {
                self.0.fetch_add(1, Ordering::Relaxed);
            }
        }
        let wakes = Arc::new(Wakes(Default::default()));
        let waker = std::task::Waker::from(wakes.clone());
        let mut cx = Context::from_waker(&waker);
        let data: Vec<u8> = (0..2 * READ_TURN + 10).map(|i| i as u8).collect();
        let flag = Arc::new(AtomicBool::new(false));
        let mut s = Shaped::new(&data[..], &LinkSpec::default()).yielding_to(flag.clone());
        let (mut got, mut turns) = (Vec::new(), 0);
        let mut chunk = vec![0u8; 16 * 1024];
        loop {
            let mut buf = ReadBuf::new(&mut chunk);
            match Pin::new(&mut s).poll_read(&mut cx, &mut buf) {
                Poll::Pending => {
                    assert!(flag.load(Ordering::Relaxed), "a turn's end sets the flag");
                    // still Pending, reading nothing, until the owner clears it
                    let mut again = ReadBuf::new(&mut chunk);
                    assert!(Pin::new(&mut s).poll_read(&mut cx, &mut again).is_pending());
                    turns += 1;
                    flag.store(false, Ordering::Relaxed);
                }
                Poll::Ready(r) => {
                    r.unwrap();
                    if buf.filled().is_empty() {
                        break;
                    }
                    got.extend_from_slice(buf.filled());
                }
            }
        }
        assert_eq!(got, data);
        assert_eq!(turns, 2);
        assert_eq!(
            wakes.0.load(Ordering::Relaxed),
            0,
            "no wake of its own task"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn unshaped_is_a_pass_through() {
        let (mut a, b) = tokio::io::duplex(1 << 16);
        let mut s = Shaped::new(b, &LinkSpec::default());
        a.write_all(b"hello").await.unwrap();
        drop(a);
        let mut got = String::new();
        s.read_to_string(&mut got).await.unwrap();
        assert_eq!(got, "hello");
    }
}
