//! The connection's socket I/O, every wait bounded by the send timeout:
//! file bodies (`sendfile` on plain TCP; over TLS read into a buffer and
//! encrypted, as there is no kTLS here), whole buffers, the head held with
//! `MSG_MORE`, and the reset on close of a stalled reader.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use h2::SendStream;
use tokio::io::{AsyncWriteExt, Interest};
use tokio::net::TcpStream;

use crate::config::IoMode;
use crate::server::State;
use crate::transport::Transport;

/// Where a range executor ([`crate::asap`]) sends file bytes: an HTTP/1
/// connection's transport, or an HTTP/2 stream.
pub(crate) enum Sink<'a> {
    /// The connection's byte stream (sendfile on plain TCP).
    Conn(&'a mut Transport),
    /// An HTTP/2 stream's DATA, and the file bytes sent on it.
    H2(&'a mut SendStream<Bytes>, &'a mut u64),
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
        match self {
            Sink::Conn(t) => send_file(t, st, file, off, len).await,
            Sink::H2(out, sent) => {
                crate::h2::send_range(st, out, file, off, len, false, sent, false).await
            }
        }
    }

    /// Resolves when the client has gone away (`Ok(true)`: the socket's
    /// read side closed or errored, or the h2 stream was reset), or sent
    /// something else (`Ok(false)`: a pipelined request; an h2 stream never
    /// resolves so).
    pub(crate) async fn gone(&mut self) -> io::Result<bool> {
        match self {
            Sink::Conn(t) => {
                let r = t.tcp().ready(Interest::READABLE).await?;
                Ok(r.is_read_closed() || r.is_error())
            }
            Sink::H2(out, _) => match std::future::poll_fn(|cx| out.poll_reset(cx)).await {
                Ok(_) => Ok(true),
                Err(_) => Ok(true),
            },
        }
    }
}

/// Bytes read from a file per write over TLS (a user-space copy: no kTLS).
pub(crate) const TLS_BODY_CHUNK: usize = 256 << 10;

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
        write_all(sock, &buf, limit).await?;
        off += n as u64;
        st.counters.bytes.fetch_add(n as u64, Ordering::Relaxed);
    }
    Ok(())
}

/// Reads exactly `n` bytes at `off` (on the blocking pool when `blocking`).
pub(crate) async fn read_at(
    file: &Arc<File>,
    off: u64,
    n: usize,
    blocking: bool,
) -> io::Result<Vec<u8>> {
    let read = move |f: &File| {
        let mut buf = vec![0u8; n];
        f.read_exact_at(&mut buf, off).map(|()| buf).map_err(|e| {
            if e.kind() == io::ErrorKind::UnexpectedEof {
                io::Error::new(io::ErrorKind::UnexpectedEof, "file shorter than its size")
            } else {
                e
            }
        })
    };
    if blocking {
        let f = file.clone();
        tokio::task::spawn_blocking(move || read(&f))
            .await
            .expect("read task")
    } else {
        read(file)
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
                    // clear the readiness tokio cached, then wait for it again
                    let _ = sock.try_io(Interest::WRITABLE, || {
                        Err::<(), _>(io::Error::from(io::ErrorKind::WouldBlock))
                    });
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
