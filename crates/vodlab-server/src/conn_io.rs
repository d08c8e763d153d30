//! The connection's socket I/O, every wait bounded by the send timeout:
//! file bodies (`sendfile` on plain TCP; over TLS read into a buffer and
//! encrypted, as there is no kTLS here), whole buffers, the head held with
//! `MSG_MORE`, and the reset on close of a stalled reader.

use std::fs::File;
use std::io;
use std::os::unix::io::{AsRawFd, RawFd};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use h2::{Reason, SendStream};
use tokio::io::{AsyncWriteExt, Interest};
use tokio::net::TcpStream;

use crate::body_pool::{self, BODY_BUFFER};
use crate::config::h2::defaults as h2_defaults;
use crate::config::IoMode;
use crate::prefetch::socket_closed;
use crate::server::State;
use crate::transport::Transport;

/// Where a range executor ([`crate::asap`]) sends file bytes: an HTTP/1
/// connection's transport, an HTTP/2 stream or an HTTP/3 stream.
pub(crate) enum Sink<'a> {
    /// The connection's byte stream (sendfile on plain TCP).
    Conn(&'a mut Transport),
    /// An HTTP/2 stream's DATA, the file bytes sent on it, and its
    /// connection's TCP socket.
    H2(&'a mut SendStream<Bytes>, &'a mut u64, RawFd),
    /// An HTTP/3 request stream, the file bytes sent on it, and its QUIC
    /// connection (no socket of its own: the UDP socket is the server's).
    H3(&'a mut H3Stream, &'a mut u64, &'a quinn::Connection),
}

impl Sink<'_> {
    /// Sends `len` bytes of the file from `off` (ASAP: the range is
    /// resident or prefetched, so an h2 stream reads it inline).
    pub(crate) async fn send_file(
        &mut self,
        st: &State,
        file: &Arc<File>,
        off: u64,
        len: u64,
    ) -> io::Result<()> {
        self.send_part(st, file, off, len, false).await
    }

    /// [`Sink::send_file`], reading on the blocking pool when `blocking`
    /// (an h2 or h3 stream; the connection sends with `sendfile`).
    async fn send_part(
        &mut self,
        st: &State,
        file: &Arc<File>,
        off: u64,
        len: u64,
        blocking: bool,
    ) -> io::Result<()> {
        match self {
            Sink::Conn(t) => send_file(t, st, file, off, len).await,
            Sink::H2(out, sent, _) => {
                send_range(st, out, file, off, len, false, sent, blocking).await
            }
            Sink::H3(out, sent, _) => h3_send_file(st, out, file, off, len, sent, blocking).await,
        }
    }

    /// Sends `len` bytes of `file` from `off` paced by the server's
    /// user-mode pacer: the stream is a pacer session (burst, chunk rule,
    /// link capacity as for HTTP/1.1) and each grant's bytes go out when the
    /// driver hands the grant over (no ASAP probe, as for a paced HTTP/1.1
    /// response). The h2 and h3 streams' paced bodies.
    pub(crate) async fn send_paced(
        &mut self,
        st: &State,
        file: &Arc<File>,
        rate: &crate::bitrate::ResponseRate,
        mut off: u64,
        len: u64,
    ) -> io::Result<()> {
        st.pacing.counters.paced.fetch_add(1, Ordering::Relaxed);
        let mut pacing = crate::pacing::register_stream(&st.pacing, len, rate)?;
        let end = off + len;
        let blocking = st.cfg.io == crate::config::IoMode::Vanilla;
        while off < end {
            let Some(n) = pacing.grants.recv().await else {
                return Err(io::Error::other("pacer driver stopped"));
            };
            let n = n.min(end - off);
            self.send_part(st, file, off, n, blocking).await?;
            off += n;
        }
        Ok(())
    }

    /// Whether the client has gone away already, without waiting: as
    /// [`Sink::gone`] would resolve `Ok(true)` now (the socket's read side
    /// closed or errored, `poll(2)` with `POLLRDHUP`; the h2 stream reset;
    /// the QUIC connection closed).
    pub(crate) fn gone_now(&mut self) -> bool {
        match self {
            Sink::Conn(t) => socket_closed(t.tcp().as_raw_fd()),
            // nothing of this stream waits for the waker (it runs here, not
            // parked): a later wait registers its own
            Sink::H2(out, _, fd) => {
                socket_closed(*fd)
                    || out
                        .poll_reset(&mut std::task::Context::from_waker(std::task::Waker::noop()))
                        .is_ready()
            }
            Sink::H3(_, _, quic) => quic.close_reason().is_some(),
        }
    }

    /// The client's TCP socket (for an h2 stream its connection's), which
    /// the prefetch helper watches ([`crate::prefetch::socket_closed`]);
    /// `None` for an h3 stream (QUIC has no socket per client).
    pub(crate) fn client_fd(&self) -> Option<RawFd> {
        match self {
            Sink::Conn(t) => Some(t.tcp().as_raw_fd()),
            Sink::H2(_, _, fd) => Some(*fd),
            Sink::H3(..) => None,
        }
    }

    /// Resolves when the client has gone away (`Ok(true)`: the socket's
    /// read side closed or errored, the h2 stream was reset, or the QUIC
    /// connection closed), or sent something else (`Ok(false)`: a
    /// pipelined request; an h2 or h3 stream never resolves so).
    pub(crate) async fn gone(&mut self) -> io::Result<bool> {
        match self {
            Sink::Conn(t) => {
                let r = t.tcp().ready(Interest::READABLE).await?;
                Ok(r.is_read_closed() || r.is_error())
            }
            Sink::H2(out, _, _) => match std::future::poll_fn(|cx| out.poll_reset(cx)).await {
                Ok(_) => Ok(true),
                Err(_) => Ok(true),
            },
            Sink::H3(_, _, quic) => {
                quic.closed().await;
                Ok(true)
            }
        }
    }
}

/// Bytes read from a file per write over TLS (a user-space copy: no kTLS).
pub(crate) const TLS_BODY_CHUNK: usize = BODY_BUFFER;

/// Sends `len` bytes of the file from `off`: with sendfile(2) on plain TCP
/// ([`send_file_plain`]), through a buffer over TLS ([`copy_file`]).
pub(crate) async fn send_file(
    sock: &mut Transport,
    st: &State,
    file: &Arc<File>,
    off: u64,
    len: u64,
) -> io::Result<()> {
    match sock.plain() {
        Some(s) => send_file_plain(s, st, file, off, len).await,
        None => copy_file(sock, st, file, off, len).await,
    }
}

/// Reads a range of the file and writes it to a buffered transport (TLS),
/// in [`TLS_BODY_CHUNK`] pieces. Vanilla reads on the blocking pool (the
/// read may wait for the disk); ASAP reads inline (the range was probed or
/// prefetched).
pub(crate) async fn copy_file(
    sock: &mut Transport,
    st: &State,
    file: &Arc<File>,
    mut off: u64,
    len: u64,
) -> io::Result<()> {
    let end = off + len;
    let limit = st.cfg.send_timeout;
    while off < end {
        let n = ((end - off) as usize).min(TLS_BODY_CHUNK);
        let buf = read_at(file, off, n, st.cfg.io == IoMode::Vanilla).await?;
        let w = write_all(sock, &buf, limit).await;
        body_pool::give(buf);
        w?;
        off += n as u64;
        st.counters.bytes.fetch_add(n as u64, Ordering::Relaxed);
    }
    Ok(())
}

/// Reads exactly `n` bytes at `off` into `buf` (emptied first) without
/// zeroing it (`pread` into the vector's spare capacity): the bodies of h2
/// and TLS responses are read this way, and zeroing each 256 KiB chunk
/// before overwriting it cost as much as the copy itself.
fn read_exact_uninit(f: &File, off: u64, n: usize, mut buf: Vec<u8>) -> io::Result<Vec<u8>> {
    buf.clear();
    buf.reserve_exact(n);
    let mut got = 0usize;
    while got < n {
        let spare = &mut buf.spare_capacity_mut()[..n - got];
        // SAFETY: pread writes at most `spare.len()` bytes into the
        // vector's allocated, unused capacity, which stays alive
        let r = unsafe {
            libc::pread(
                f.as_raw_fd(),
                spare.as_mut_ptr().cast(),
                spare.len(),
                (off + got as u64) as libc::off_t,
            )
        };
        match r {
            0 => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "file shorter than its size",
                ))
            }
            r if r > 0 => {
                got += r as usize;
                // SAFETY: the first `got` bytes were written by pread
                unsafe { buf.set_len(got) };
            }
            _ => {
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
        }
    }
    Ok(buf)
}

/// Reads exactly `n` bytes at `off` (on the blocking pool when `blocking`)
/// into a buffer from [`body_pool`]; hand it back with
/// [`body_pool::give`] or send it as [`body_pool::bytes`].
pub(crate) async fn read_at(
    file: &Arc<File>,
    off: u64,
    n: usize,
    blocking: bool,
) -> io::Result<Vec<u8>> {
    // taken here, on the worker thread whose pool the buffers return to
    let buf = body_pool::take(n);
    if blocking {
        let f = file.clone();
        tokio::task::spawn_blocking(move || read_exact_uninit(&f, off, n, buf))
            .await
            .expect("read task")
    } else {
        read_exact_uninit(file, off, n, buf)
    }
}

/// sendfile(2) from the file to the socket. Vanilla runs every call on the
/// blocking pool (the page-cache read may wait for the disk); ASAP calls it
/// inline, because the range was probed or prefetched.
pub(crate) async fn send_file_plain(
    sock: &mut TcpStream,
    st: &State,
    file: &Arc<File>,
    mut off: u64,
    len: u64,
) -> io::Result<()> {
    let end = off + len;
    let sfd = sock.as_raw_fd();
    while off < end {
        writable(sock, st.cfg.send_timeout).await?;
        let n = ((end - off) as usize).min(1 << 20);
        let res = if st.cfg.io == IoMode::Vanilla {
            let f = file.clone();
            let start = off;
            let r = tokio::task::spawn_blocking(move || sendfile(sfd, f.as_raw_fd(), start, n))
                .await
                .expect("sendfile task");
            match r {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    forget_writable_if_full(sock);
                    continue;
                }
                r => r,
            }
        } else {
            match sock.try_io(Interest::WRITABLE, || {
                sendfile(sfd, file.as_raw_fd(), off, n)
            }) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                r => r,
            }
        };
        match res {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "file shorter than its size",
                ))
            }
            Ok(k) => {
                off += k as u64;
                st.counters.bytes.fetch_add(k as u64, Ordering::Relaxed);
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// After a `sendfile` on the blocking pool met a full socket: clears the
/// writable readiness tokio cached, but only if the socket is still full
/// now. The check runs inside `try_io`, which clears only the readiness
/// event it saw before the call, so an event that arrived after the
/// blocking call's EAGAIN (the client drained the buffer meanwhile) is
/// kept. Clearing unconditionally lost that event: the socket stayed
/// writable with no further edge to report it, and the response stalled
/// until the send timeout (seen as single vanilla requests that never
/// finished on an emulated disk, whose reads widen the window).
pub(crate) fn forget_writable_if_full(sock: &TcpStream) {
    let fd = sock.as_raw_fd();
    let _ = sock.try_io(Interest::WRITABLE, || {
        let mut p = libc::pollfd {
            fd,
            events: libc::POLLOUT,
            revents: 0,
        };
        // SAFETY: one pollfd over a live descriptor, no wait
        let n = unsafe { libc::poll(&mut p, 1, 0) };
        if n == 1 && p.revents & libc::POLLOUT != 0 {
            Ok(())
        } else {
            Err(io::Error::from(io::ErrorKind::WouldBlock))
        }
    });
}

fn send_timeout() -> io::Error {
    io::Error::new(
        io::ErrorKind::TimedOut,
        "send timeout: the client read nothing",
    )
}

/// Waits until the socket takes bytes again, at most `limit`: every wait of
/// a response is bounded by the send timeout, and each byte the kernel
/// accepts starts a new wait, so the rule is "no progress for `limit`", not
/// a total time. (Linux reports a socket writable only once a third of its
/// send buffer is free, so one unit of progress is a real amount of data,
/// not a byte a reader trickles.)
pub(crate) async fn writable(sock: &TcpStream, limit: Duration) -> io::Result<()> {
    match tokio::time::timeout(limit, sock.writable()).await {
        Ok(r) => r,
        Err(_) => Err(send_timeout()),
    }
}

/// Writes all of `data`, each wait bounded by the send timeout (over TLS:
/// each write call, which returns once rustls took some bytes).
pub(crate) async fn write_all(
    sock: &mut Transport,
    mut data: &[u8],
    limit: Duration,
) -> io::Result<()> {
    if let Some(sock) = sock.plain() {
        while !data.is_empty() {
            writable(sock, limit).await?;
            match sock.try_write(data) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => data = &data[n..],
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
        }
        return Ok(());
    }
    while !data.is_empty() {
        match tokio::time::timeout(limit, sock.write(data)).await {
            Ok(Ok(0)) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(Ok(n)) => data = &data[n..],
            Ok(Err(e)) => return Err(e),
            Err(_) => return Err(send_timeout()),
        }
    }
    Ok(())
}

/// Pushes out what a buffered transport (TLS) holds, bounded by the send
/// timeout; nothing to do on plain TCP.
pub(crate) async fn flush(sock: &mut Transport, limit: Duration) -> io::Result<()> {
    if !sock.is_tls() {
        return Ok(());
    }
    match tokio::time::timeout(limit, sock.flush()).await {
        Ok(r) => r,
        Err(_) => Err(send_timeout()),
    }
}

/// Makes the coming close reset the connection (SO_LINGER 0): a stalled
/// reader's unsent data is dropped at once instead of staying queued in the
/// kernel.
pub(crate) fn reset_on_close(sock: &TcpStream) {
    let l = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: an open socket and a live option value of the right size
    unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&l as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        );
    }
}

/// Writes `data` with MSG_MORE, so the kernel holds it for the data that
/// follows (over TLS: an ordinary write, the TLS layer buffers).
pub(crate) async fn write_more(
    sock: &mut Transport,
    mut data: &[u8],
    limit: Duration,
) -> io::Result<()> {
    let Some(sock) = sock.plain() else {
        return write_all(sock, data, limit).await;
    };
    let fd = sock.as_raw_fd();
    while !data.is_empty() {
        writable(sock, limit).await?;
        let r = sock.try_io(Interest::WRITABLE, || {
            // SAFETY: a live buffer of the given length on an open socket
            let n = unsafe {
                libc::send(
                    fd,
                    data.as_ptr().cast(),
                    data.len(),
                    libc::MSG_MORE | libc::MSG_NOSIGNAL,
                )
            };
            if n < 0 {
                Err(io::Error::last_os_error())
            } else {
                Ok(n as usize)
            }
        });
        match r {
            Ok(n) => data = &data[n..],
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

fn sendfile(out: i32, inp: i32, off: u64, n: usize) -> io::Result<usize> {
    let mut o = off as libc::off_t;
    // SAFETY: both descriptors are open for the duration of the call; `o` is a live local
    let r = unsafe { libc::sendfile(out, inp, &mut o, n) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}

/// An h2 error as an I/O error (a connection's I/O error as itself).
pub(crate) fn h2_io(e: h2::Error) -> io::Error {
    if e.is_io() {
        e.into_io().unwrap_or_else(|| io::Error::other("h2"))
    } else {
        io::Error::new(io::ErrorKind::ConnectionAborted, e)
    }
}

/// Waits for window for up to `want` bytes, at most `limit` (the send
/// timeout: no window granted means a stalled reader).
pub(crate) async fn capacity(
    out: &mut SendStream<Bytes>,
    want: usize,
    limit: Duration,
) -> io::Result<usize> {
    out.reserve_capacity(want);
    loop {
        if out.capacity() > 0 {
            return Ok(out.capacity().min(want));
        }
        let r = tokio::time::timeout(limit, std::future::poll_fn(|cx| out.poll_capacity(cx))).await;
        match r {
            Err(_) => {
                out.send_reset(Reason::CANCEL);
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "send timeout: no window from the client",
                ));
            }
            Ok(None) => {
                return Err(io::Error::new(
                    io::ErrorKind::ConnectionAborted,
                    "the stream was closed",
                ))
            }
            Ok(Some(Err(e))) => return Err(h2_io(e)),
            Ok(Some(Ok(n))) if n > 0 => return Ok(n.min(want)),
            Ok(Some(Ok(_))) => {}
        }
    }
}

/// Sends a file range: reads what the window allows (at most
/// [`h2_defaults::BODY_CHUNK`], on the blocking pool when `blocking`) and
/// sends it, END_STREAM with the last bytes when `eos`.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn send_range(
    st: &State,
    out: &mut SendStream<Bytes>,
    file: &Arc<std::fs::File>,
    mut off: u64,
    len: u64,
    eos: bool,
    sent: &mut u64,
    blocking: bool,
) -> io::Result<()> {
    let end = off + len;
    let limit = st.cfg.send_timeout;
    while off < end {
        let want = ((end - off) as usize).min(h2_defaults::BODY_CHUNK);
        let n = capacity(out, want, limit).await?;
        let buf = read_at(file, off, n, blocking).await?;
        off += n as u64;
        out.send_data(body_pool::bytes(buf), eos && off == end)
            .map_err(h2_io)?;
        *sent += n as u64;
        st.counters.bytes.fetch_add(n as u64, Ordering::Relaxed);
    }
    Ok(())
}

/// The stream type of an HTTP/3 request on quinn.
pub(crate) type H3Stream = h3::server::RequestStream<h3_quinn::BidiStream<Bytes>, Bytes>;

/// Sends `len` bytes of the file from `off`, read a body chunk at a time
/// (on the blocking pool when `blocking`; inline for ASAP, whose range is
/// resident, and for a pacer's grant in ASAP mode, as HTTP/2 does).
pub(crate) async fn h3_send_file(
    st: &State,
    out: &mut H3Stream,
    file: &Arc<std::fs::File>,
    mut off: u64,
    len: u64,
    sent: &mut u64,
    blocking: bool,
) -> io::Result<()> {
    let end = off + len;
    while off < end {
        let n = ((end - off) as usize).min(h2_defaults::BODY_CHUNK);
        let buf = match read_at(file, off, n, blocking).await {
            Ok(b) => b,
            Err(e) => {
                st.log_error(&format_args!("h3 read: {e}"));
                return Err(e);
            }
        };
        h3_send(st, out, crate::body_pool::bytes(buf), Some(sent)).await?;
        off += n as u64;
    }
    Ok(())
}

/// Writes `data` to the stream within the send timeout; file bytes count in
/// `sent` and the byte counters.
pub(crate) async fn h3_send(
    st: &State,
    out: &mut H3Stream,
    data: Bytes,
    sent: Option<&mut u64>,
) -> io::Result<()> {
    let n = data.len() as u64;
    h3_timed(st.cfg.send_timeout, out.send_data(data)).await?;
    if let Some(s) = sent {
        *s += n;
        st.counters.bytes.fetch_add(n, Ordering::Relaxed);
        st.counters.proto.h3_bytes.fetch_add(n, Ordering::Relaxed);
    }
    Ok(())
}

/// `f` within `limit`: its error as `ConnectionAborted` (the stream or
/// connection failed), no progress for `limit` as `TimedOut`.
pub(crate) async fn h3_timed<E: std::fmt::Display>(
    limit: Duration,
    f: impl std::future::Future<Output = Result<(), E>>,
) -> io::Result<()> {
    match tokio::time::timeout(limit, f).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(io::Error::new(
            io::ErrorKind::ConnectionAborted,
            e.to_string(),
        )),
        Err(_) => Err(io::Error::new(
            io::ErrorKind::TimedOut,
            "send timeout: the client read nothing",
        )),
    }
}

#[cfg(test)]
mod read_tests {
    use super::*;

    #[test]
    fn uninit_reads_return_the_bytes_and_name_a_short_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        let data: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 251) as u8).collect();
        std::fs::write(&p, &data).unwrap();
        let f = File::open(&p).unwrap();
        assert_eq!(
            read_exact_uninit(&f, 1000, 262_144, Vec::new()).unwrap(),
            data[1000..263_144]
        );
        assert_eq!(
            read_exact_uninit(&f, 0, 0, Vec::new()).unwrap(),
            Vec::<u8>::new()
        );
        // a reused buffer's old bytes are gone
        let used = vec![9u8; 5000];
        assert_eq!(read_exact_uninit(&f, 10, 20, used).unwrap(), data[10..30]);
        let e = read_exact_uninit(&f, 299_000, 2000, Vec::new()).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
        assert!(e.to_string().contains("shorter"), "{e}");
    }

    #[test]
    fn body_buffers_come_back_when_their_bytes_are_dropped() {
        // a thread of its own: the pool is per thread
        std::thread::spawn(|| {
            assert_eq!(body_pool::kept(), 0);
            let mut a = body_pool::take(BODY_BUFFER);
            let ptr = a.as_ptr();
            assert!(a.capacity() == BODY_BUFFER && a.is_empty());
            a.extend_from_slice(&[7u8; 100]);
            let b = body_pool::bytes(a);
            let half = b.slice(..10);
            drop(b);
            assert_eq!(body_pool::kept(), 0, "a slice still holds it");
            drop(half);
            assert_eq!(body_pool::kept(), 1);
            let again = body_pool::take(100_000);
            assert_eq!(again.as_ptr(), ptr, "the same buffer reused");
            // small reads take buffers of their own, never kept
            let small = body_pool::take(1000);
            assert!(small.capacity() < BODY_BUFFER);
            drop(body_pool::bytes(small));
            // the pool keeps at most KEEP
            for _ in 0..body_pool::KEEP + 3 {
                body_pool::give(Vec::with_capacity(BODY_BUFFER));
            }
            assert_eq!(body_pool::kept(), body_pool::KEEP);
        })
        .join()
        .unwrap();
    }
}

#[cfg(test)]
mod readiness_tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    async fn full_pair() -> (TcpStream, TcpStream) {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let a = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
        let (b, _) = l.accept().await.unwrap();
        let chunk = vec![7u8; 1 << 16];
        // fill the socket (and the peer's receive buffer) until it refuses
        loop {
            match a.try_write(&chunk) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => panic!("{e}"),
            }
        }
        (a, b)
    }

    /// The lost wake-up: the peer drains everything after the blocking
    /// call's EAGAIN and tokio has seen the socket turn writable; the
    /// socket must still be reported writable afterwards (before the fix
    /// the readiness was cleared and the wait below ran into its limit).
    #[tokio::test]
    async fn a_writable_event_after_eagain_is_kept() {
        let (a, mut b) = full_pair().await;
        let mut sink = vec![0u8; 1 << 20];
        // drain until the writer side has room again, as a client would
        let drained = tokio::time::timeout(Duration::from_secs(10), async {
            loop {
                let n = b.read(&mut sink).await.unwrap();
                assert!(n > 0);
                if tokio::time::timeout(Duration::from_millis(1), a.writable())
                    .await
                    .is_ok()
                {
                    break;
                }
            }
        })
        .await;
        assert!(drained.is_ok(), "the writer never became writable");
        forget_writable_if_full(&a);
        let r = tokio::time::timeout(Duration::from_secs(5), a.writable()).await;
        assert!(r.is_ok(), "the writable event was lost");
    }

    /// A socket that is still full loses its stale readiness, so the next
    /// wait really waits for room: tokio saw it writable, then it was
    /// filled behind tokio's back (as a blocking-pool sendfile does).
    #[tokio::test]
    async fn a_full_socket_waits_again() {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let a = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
        let (_b, _) = l.accept().await.unwrap();
        a.writable().await.unwrap();
        let chunk = vec![7u8; 1 << 16];
        loop {
            // SAFETY: a send from a live buffer on a live descriptor
            let n = unsafe {
                libc::send(
                    a.as_raw_fd(),
                    chunk.as_ptr().cast(),
                    chunk.len(),
                    libc::MSG_DONTWAIT,
                )
            };
            if n < 0 {
                break;
            }
        }
        forget_writable_if_full(&a);
        let r = tokio::time::timeout(Duration::from_millis(200), a.writable()).await;
        assert!(r.is_err(), "a full socket was reported writable");
    }
}

/// Copies the bytes waiting in `fd`'s receive queue into `buf` without
/// taking them and without waiting (`recv` with `MSG_PEEK | MSG_DONTWAIT`):
/// `Ok(0)` at end of stream, `WouldBlock` when none wait. Unlike tokio's
/// `peek`, it does not need the reactor to have reported the socket
/// readable first, which a socket accepted a moment ago has not.
pub(crate) fn peek_now(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: a live descriptor and a writable buffer of the given length
    let n = unsafe {
        libc::recv(
            fd,
            buf.as_mut_ptr().cast(),
            buf.len(),
            libc::MSG_PEEK | libc::MSG_DONTWAIT,
        )
    };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// Whether bytes from the peer wait in `fd`'s receive queue, unread by
/// this server. A connection with such bytes is waiting on the server,
/// not on its client, so it is not shed as idle at the connection cap.
pub(crate) fn bytes_waiting(fd: RawFd) -> bool {
    matches!(peek_now(fd, &mut [0u8; 1]), Ok(n) if n > 0)
}

#[cfg(test)]
mod peek_tests {
    use super::*;
    use std::io::Write;

    /// The bytes a client sent are seen at once on the socket just
    /// accepted, before any reactor has watched it, and stay to be read.
    #[test]
    fn bytes_sent_before_the_accept_are_peeked_without_waiting() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut a = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (b, _) = l.accept().unwrap();
        let fd = b.as_raw_fd();
        assert!(!bytes_waiting(fd), "nothing sent yet");
        let e = peek_now(fd, &mut [0u8; 4]).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock, "{e}");
        a.write_all(b"GET / HTTP/1.1\r\n").unwrap();
        // loopback delivers within the write; allow a moment all the same
        let t = std::time::Instant::now();
        while !bytes_waiting(fd) && t.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(1));
        }
        let mut buf = [0u8; 4];
        assert_eq!(peek_now(fd, &mut buf).unwrap(), 4);
        assert_eq!(&buf, b"GET ");
        // peeking took nothing: the same bytes again, then the end once closed
        assert_eq!(peek_now(fd, &mut buf).unwrap(), 4);
        let mut all = [0u8; 64];
        let n = std::io::Read::read(&mut &b, &mut all).unwrap();
        assert_eq!(&all[..n], b"GET / HTTP/1.1\r\n");
        drop(a);
        let t = std::time::Instant::now();
        while peek_now(fd, &mut buf).is_err() && t.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(peek_now(fd, &mut buf).unwrap(), 0, "end of stream");
    }
}
