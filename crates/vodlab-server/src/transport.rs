//! The byte stream a connection runs over: plain TCP or TLS over TCP.
//! Both are `AsyncRead + AsyncWrite` (the HTTP/1 connection and the h2
//! crate use them as such); plain TCP also lends its socket to the
//! `sendfile` fast path, TLS bodies go through buffers (no kTLS here). A
//! TLS write is cut to the dynamic record size when that is on
//! ([`crate::tls::RecordSizer`]).

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;

use crate::tls::RecordSizer;

/// A TLS stream and its record sizing.
pub(crate) struct Tls {
    pub(crate) io: TlsStream<TcpStream>,
    pub(crate) sizer: Option<RecordSizer>,
    /// Where small-record writes are counted (the server's statistics).
    pub(crate) small_writes: Option<Arc<AtomicU64>>,
}

/// A connection's byte stream.
pub(crate) enum Transport {
    /// Plain TCP (HTTP/1.1 with sendfile, or h2c).
    Plain(TcpStream),
    /// TLS over TCP.
    Tls(Box<Tls>),
}

impl Transport {
    /// The TCP socket underneath (socket options, readiness).
    pub(crate) fn tcp(&self) -> &TcpStream {
        match self {
            Transport::Plain(s) => s,
            Transport::Tls(t) => t.io.get_ref().0,
        }
    }

    /// The plain socket, when there is no TLS (the sendfile path).
    pub(crate) fn plain(&mut self) -> Option<&mut TcpStream> {
        match self {
            Transport::Plain(s) => Some(s),
            Transport::Tls(_) => None,
        }
    }

    /// Whether the stream is TLS.
    pub(crate) fn is_tls(&self) -> bool {
        matches!(self, Transport::Tls(_))
    }
}

impl AsyncRead for Transport {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Transport::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Transport::Tls(t) => Pin::new(&mut t.io).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Transport {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Transport::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Transport::Tls(t) => {
                let Some(sizer) = &mut t.sizer else {
                    return Pin::new(&mut t.io).poll_write(cx, buf);
                };
                // one write of at most the current limit: rustls makes it its own record(s)
                let now = Instant::now();
                let limit = sizer.limit(now);
                let part = &buf[..buf.len().min(limit)];
                let r = Pin::new(&mut t.io).poll_write(cx, part);
                if let Poll::Ready(Ok(n)) = &r {
                    let before = sizer.small_writes;
                    sizer.wrote(*n, now);
                    if let Some(c) = &t.small_writes {
                        c.fetch_add(sizer.small_writes - before, Ordering::Relaxed);
                    }
                }
                r
            }
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Transport::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            t @ Transport::Tls(_) => {
                // through poll_write, so that record sizing applies
                let first = bufs.iter().find(|b| !b.is_empty()).map_or(&[][..], |b| b);
                Pin::new(t).poll_write(cx, first)
            }
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Transport::Plain(s) => s.is_write_vectored(),
            Transport::Tls(_) => false,
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Transport::Plain(s) => Pin::new(s).poll_flush(cx),
            Transport::Tls(t) => Pin::new(&mut t.io).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Transport::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Transport::Tls(t) => Pin::new(&mut t.io).poll_shutdown(cx),
        }
    }
}
