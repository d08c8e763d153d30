//! A small HTTP/1.1 client connection built for load generation: the
//! shared codec (`vodlab_http::client`: request encoder, push response
//! decoder) over any `AsyncRead + AsyncWrite` transport, with the access
//! link's rate emulation on reads and writes.
//!
//! Why not hyper: the engine needs to pace every read (token bucket), keep a
//! small receive buffer, time the first byte, count and check body bytes, and
//! allocate nothing per request. Supports persistent connections,
//! Content-Length, chunked and close-delimited bodies, HEAD, 204/304, and
//! 1xx interim responses before the answer (skipped).

use std::io;
use std::net::SocketAddr;
use std::time::Instant;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use vodlab_http::client::{
    encode_request, DecodeError, Decoded, RequestHead, ResponseDecoder, MAX_HEAD_BYTES,
};

use crate::core::link::{LinkSpec, TokenBucket};
use crate::core::time::Clock;

pub use crate::core::exchange::{ErrorKind, Failure, ReadLimits, Response};

/// A request to send.
#[derive(Debug, Clone, Copy)]
pub struct Outgoing<'a> {
    /// Method token.
    pub method: &'a str,
    /// Path.
    pub path: &'a str,
    /// Range header value (`bytes=...`).
    pub range: Option<&'a str>,
    /// Extra header lines.
    pub headers: &'a [String],
    /// Body.
    pub body: Option<&'a str>,
    /// Session id for `X-Vodlab-Session`.
    pub session: u64,
    /// Send HTTP/1.0.
    pub http10: bool,
}

/// An HTTP/1.1 connection on an emulated downlink reads a body in batches
/// of about this much of the link's time ([`Connection::batch_reads`]),
/// players and scripted sessions alike: each batch ends when the bucket's
/// chunk-by-chunk reads would have ended it, and the exchange still sees
/// one progress report per chunk, dated as those reads. A player's 25 KB
/// segment on a 120 kbit/s link takes 5 reads (a head chunk, 4 batches)
/// instead of 18; a scripted 16 KiB range at 2 Mbit/s takes 2 instead of 8.
pub const SHAPED_READ_INTERVAL: std::time::Duration = std::time::Duration::from_millis(500);

/// A batched read that waits at least this long frees the connection's
/// read buffer while it waits (when nothing in it is unread).
const KEEP_BUFFER_WAIT: std::time::Duration = std::time::Duration::from_millis(100);

/// The largest batch of a TCP connection's batched reads
/// ([`Connection::<TcpStream>::batch_reads_tcp`]), whole bucket chunks.
pub const MAX_BATCH: usize = 32 * 1024;

/// The socket receive buffer asked for under batched reads (the kernel
/// doubles it): see [`Connection::<TcpStream>::batch_reads_tcp`].
pub const BATCH_RCVBUF: usize = 128 * 1024;

/// Largest read buffer of an unshaped connection.
const BUF: usize = 64 * 1024;
/// An unshaped connection's first read buffer: it doubles up to [`BUF`]
/// each time a read fills it, so a connection that only ever carries small
/// responses (a player at a low bit rate waiting on a full buffer) does not
/// hold 64 KiB.
const FIRST_BUF: usize = 8 * 1024;
/// A response head may grow the buffer to this (the codec's head limit).
const MAX_BUF: usize = MAX_HEAD_BYTES + BUF;

/// One persistent connection with its link emulation, over any transport
/// (`TcpStream`, TLS, or a scripted mock in tests).
pub struct Connection<T = TcpStream> {
    io: T,
    /// The read buffer: allocated (`size` bytes) when an exchange begins and
    /// released when one ends with nothing unread, so a connection waiting
    /// between paced requests holds none (10,000 idle connections held
    /// 5-64 KiB each, most of the client's memory).
    buf: Vec<u8>,
    /// The read buffer's size: what it starts at, grown by reads that fill it.
    size: usize,
    /// Unconsumed bytes are `buf[start..]`; what was read is the vector's
    /// length, its capacity the buffer's size (reads fill the spare
    /// capacity: a buffer is never zeroed).
    start: usize,
    /// Reused request encoding buffer.
    out: Vec<u8>,
    down: Option<TokenBucket>,
    up: Option<TokenBucket>,
    /// The buckets' clock (they count only spans: its epoch is the
    /// connection's opening).
    clock: Clock,
    /// Requests completed on this connection.
    pub uses: u64,
    host: String,
    /// Batched shaped reads ([`Self::batch_reads`]): at most this many
    /// bytes (whole bucket chunks) per read once a body's length is known.
    batch: Option<usize>,
    /// The last shaped read took several chunks: when it began waiting, to
    /// date its chunks (see [`Self::date_arrivals`]).
    batched_since: Option<Instant>,
    /// A downlink the kernel shapes ([`Connection::<TcpStream>::batch_reads_tcp`]
    /// with a kernel rate): reads wait in the kernel for a batch. Boxed: a
    /// connection of another kind pays one pointer for it.
    kernel: Option<Box<KernelLink>>,
}

/// A TCP connection whose downlink the kernel shapes at a known rate (the
/// network lab's htb class per connection): a body is read in batches of
/// about [`SHAPED_READ_INTERVAL`] of the link, the socket's `SO_RCVLOWAT`
/// set to the batch (or the rest of the body) so the reader wakes once per
/// batch instead of once per packet, and the batch's bytes are dated back
/// from the read at the link's rate ([`Connection::date_arrivals`]), as an
/// emulated link's batches are.
#[derive(Debug, Clone, Copy)]
struct KernelLink {
    fd: std::os::fd::RawFd,
    bytes_per_s: f64,
    /// Dating step: 10 ms of the link, at least one 1,460-byte segment (an
    /// emulated link's bucket chunk).
    chunk: usize,
    /// The largest batch, whole chunks, at most [`MAX_BATCH`].
    piece: usize,
    /// The socket's `SO_RCVLOWAT` now (1: the kernel's default).
    lowat: usize,
}

impl KernelLink {
    fn new(fd: std::os::fd::RawFd, bytes_per_s: f64, interval: std::time::Duration) -> Self {
        let chunk = crate::core::link::chunk_bytes(bytes_per_s) as usize;
        let piece = capped_batch(
            crate::core::link::whole_chunks(bytes_per_s, chunk, interval),
            chunk,
        );
        Self {
            fd,
            bytes_per_s,
            chunk,
            piece,
            lowat: 1,
        }
    }

    /// Sets the socket's `SO_RCVLOWAT` to `lowat` unless it is there already.
    fn mark(&mut self, lowat: usize) -> std::io::Result<()> {
        if lowat != self.lowat {
            set_int_option(self.fd, libc::SOL_SOCKET, libc::SO_RCVLOWAT, lowat as i32)?;
            self.lowat = lowat;
        }
        Ok(())
    }

    /// The low-water mark for a read into `room` bytes while the body has
    /// `want` bytes to come (`None`: a head, or a body of unknown length,
    /// read as it arrives).
    fn lowat_for(&self, want: Option<u64>, room: usize) -> usize {
        match want {
            Some(w) if w > 0 => (w.min(self.piece as u64) as usize).min(room).max(1),
            _ => 1,
        }
    }
}

/// `piece` cut to whole `chunk`s of at most [`MAX_BATCH`] bytes (at least one).
fn capped_batch(piece: usize, chunk: usize) -> usize {
    let chunk = chunk.max(1);
    piece.min((MAX_BATCH / chunk).max(1) * chunk)
}

/// Opens a TCP connection with the link's receive buffer (for HTTP/1.1
/// here, and under TLS by [`crate::io::transport`]).
/// `source`: the local address to connect from (`--source-address`), its
/// port chosen at connect time (`IP_BIND_ADDRESS_NO_PORT`), so each source
/// address has the whole ephemeral port range towards the target.
pub async fn tcp_connect(
    addr: SocketAddr,
    source: Option<std::net::IpAddr>,
    link: &LinkSpec,
) -> Result<TcpStream, Failure> {
    let io = |e: std::io::Error| Failure::new(ErrorKind::from_io(&e), format!("connect: {e}"));
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()
    } else {
        TcpSocket::new_v6()
    }
    .map_err(io)?;
    if let Some(n) = link.recv_buffer() {
        socket.set_recv_buffer_size(n).map_err(io)?;
    }
    if let Some(ip) = source {
        bind_no_port(&socket).map_err(io)?;
        socket.bind(SocketAddr::new(ip, 0)).map_err(io)?;
    }
    let stream = socket.connect(addr).await.map_err(io)?;
    stream.set_nodelay(true).map_err(io)?;
    Ok(stream)
}

/// Sets `IP_BIND_ADDRESS_NO_PORT`: a bind to port 0 leaves the port to
/// connect, which needs only the 4-tuple to be unique.
fn bind_no_port(socket: &TcpSocket) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    set_int_option(
        socket.as_raw_fd(),
        libc::IPPROTO_IP,
        libc::IP_BIND_ADDRESS_NO_PORT,
        1,
    )
}

/// `setsockopt(fd, level, name, &value)` for an int-valued option.
fn set_int_option(
    fd: std::os::fd::RawFd,
    level: libc::c_int,
    name: libc::c_int,
    value: libc::c_int,
) -> std::io::Result<()> {
    // SAFETY: setsockopt on an open socket with a local int of the size given
    let r = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

impl Connection<TcpStream> {
    /// Connects to `addr` with the link's receive buffer.
    pub async fn connect(addr: SocketAddr, host: &str, link: &LinkSpec) -> Result<Self, Failure> {
        let stream = tcp_connect(addr, None, link).await?;
        Ok(Self::new(stream, host, link))
    }

    /// [`Connection::batch_reads`] with batches of at most [`MAX_BATCH`]
    /// bytes and a socket receive buffer of [`BATCH_RCVBUF`], so the sender
    /// keeps the socket filled while the reader waits between batches.
    ///
    /// Without an emulated downlink and with `kernel` (the rate the network
    /// lab's kernel shapes this connection to, `VODLAB_LAB_FLOW_DOWN`) the
    /// kernel gathers the batches instead: see [`KernelLink`]. A body then
    /// takes one wake-up and one read per batch instead of one per packet
    /// (a 16 KiB range at 2 Mbit/s through htb: 2 reads instead of 12), at
    /// the cost of two `setsockopt` calls per response (the mark up after
    /// the head, down before the next head).
    ///
    /// Measured on loopback (test
    /// `a_one_megabit_class_receives_half_a_megabyte_in_about_four_seconds`,
    /// 512 KiB at 1 Mbit/s, 4.19 s ideal): with a buffer of twice the
    /// batch (32 KiB, as a chunk-by-chunk reader's small one) the socket
    /// held 48 KiB and the sender refilled it only once it was read empty,
    /// so every other batch came short and the body took 5.11 s; with
    /// 64 KiB, 4.52 s; with 128 KiB and batches of 16 or 32 KiB, 4.17 s.
    /// (The window is then limited by the window scale the handshake chose
    /// with the small buffer, not by the buffer's memory, and reopens after
    /// every read.) The cost is kernel memory: up to about 64 KiB per
    /// connection while a body waits unread, not process memory.
    pub fn batch_reads_tcp(
        &mut self,
        interval: std::time::Duration,
        kernel: Option<vodlab_units::Rate>,
    ) -> std::io::Result<()> {
        use std::os::fd::AsRawFd;
        match (self.down.as_ref(), kernel.filter(|r| r.bits_per_s() > 0)) {
            (Some(b), _) => {
                // the batch capped before the buffer is sized from it
                self.set_batch(capped_batch(b.piece(interval), b.chunk()));
            }
            (None, Some(rate)) => {
                let k = KernelLink::new(self.io.as_raw_fd(), rate.bytes_per_s_f64(), interval);
                self.size = self.size.max(k.piece).min(BUF);
                self.kernel = Some(Box::new(k));
            }
            (None, None) => return Ok(()),
        }
        set_int_option(
            self.io.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            BATCH_RCVBUF as libc::c_int,
        )
    }
}

impl<T: AsyncRead + AsyncWrite + Unpin> Connection<T> {
    /// A connection over an open transport, shaped by `link`'s rates.
    pub fn new(io: T, host: &str, link: &LinkSpec) -> Self {
        let clock = Clock::new(Instant::now());
        let now = clock.now();
        // a shaped link never reads more than one bucket's worth at a time
        let down = (link.down_bps > 0.0).then(|| TokenBucket::new(link.down_bps, now));
        let size = down
            .as_ref()
            .map_or(FIRST_BUF, |b| (2 * b.chunk()).clamp(4 * 1024, BUF));
        Self {
            io,
            buf: Vec::new(),
            size,
            start: 0,
            out: Vec::with_capacity(256),
            down,
            up: (link.up_bps > 0.0).then(|| TokenBucket::new(link.up_bps, now)),
            clock,
            uses: 0,
            host: host.to_string(),
            batch: None,
            batched_since: None,
            kernel: None,
        }
    }

    /// Reads a shaped body in batches of about `interval` of the link's
    /// bytes (whole bucket chunks, [`TokenBucket::piece`]) instead of one
    /// chunk per read, for a client that holds thousands of slow
    /// connections (the players: one read per 97 ms chunk of a 120 kbit/s
    /// link was most of their CPU). Each batch is read when the
    /// chunk-by-chunk reads would have read its last chunk
    /// ([`TokenBucket::wait_for`]), so a response ends at the same moment;
    /// the `arrived` callback of an exchange still sees one call per chunk,
    /// dated when that chunk would have been read (at most `interval`
    /// earlier, never before the batch began waiting). Heads and bodies of
    /// unknown length are read chunk by chunk. No effect without a shaped
    /// downlink.
    ///
    /// Returns the batch size in bytes (`None`: no shaped downlink). The
    /// transport must be able to hold a batch while the reader waits (see
    /// [`Connection::<TcpStream>::batch_reads_tcp`]).
    pub fn batch_reads(&mut self, interval: std::time::Duration) -> Option<usize> {
        let piece = self.down.as_ref()?.piece(interval);
        self.set_batch(piece);
        Some(piece)
    }

    /// Reads batches of at most `piece` bytes.
    fn set_batch(&mut self, piece: usize) {
        self.batch = Some(piece);
        // a batch is read into an emptied buffer (a head is read chunk by
        // chunk, and its bytes are consumed before the body's batches)
        self.size = self.size.max(piece).min(BUF);
    }

    /// `want`: bytes the response still has to deliver, when known.
    async fn shaped_read(&mut self, want: Option<u64>) -> io::Result<usize> {
        let mut limit = self.buf.capacity() - self.buf.len();
        self.batched_since = None;
        if let Some(b) = self.down.as_mut() {
            let chunk = b.chunk();
            let mut n = chunk;
            let mut batched = false;
            if let (Some(piece), Some(w)) = (self.batch, want) {
                batched = true;
                // whole chunks that fit, the body's end
                let room = (limit / chunk).max(1) * chunk;
                n = piece.min(room).min(w.max(1) as usize).max(chunk.min(limit));
                if n > chunk {
                    self.batched_since = Some(Instant::now());
                }
            }
            let w = b.wait_for(self.clock.now(), n);
            if !w.is_zero() {
                // a batching reader holds no buffer through a long wait
                // (most of a slow download): nothing is unread between
                // batches; a short wait keeps it (a 16 KiB range at 2 Mbit/s
                // waits 56 ms: freeing and taking 30 KB again for it was
                // half of the shaped client's malloc time)
                let free = batched && self.start == self.buf.len() && w >= KEEP_BUFFER_WAIT;
                if free {
                    self.release_buffer();
                }
                tokio::time::sleep(w).await;
                if free {
                    self.take_buffer();
                }
            }
            // (a buffer taken again after the wait has its usual size)
            limit = limit.min(n).min(self.buf.capacity() - self.buf.len());
        } else if let Some(k) = self.kernel.as_deref_mut() {
            let lowat = k.lowat_for(want, limit);
            match k.mark(lowat) {
                Ok(()) if lowat > 1 => self.batched_since = Some(Instant::now()),
                Ok(()) => {}
                // reads as they come, undated: what an unshaped reader does
                Err(_) => self.kernel = None,
            }
        }
        // into the spare capacity, uninitialised (zeroing a 30 KB batch
        // buffer per exchange was 6 % of a shaped client's cycles)
        let n = (&mut self.io)
            .take(limit as u64)
            .read_buf(&mut self.buf)
            .await?;
        match self.down.as_mut() {
            Some(b) => b.consume(self.clock.now(), n),
            // the read filled what there was: more was probably waiting
            None if n == limit && self.buf.capacity() < BUF => {
                let grown = (2 * self.buf.capacity()).min(BUF);
                self.buf.reserve_exact(grown - self.buf.len());
                self.size = self.size.max(grown);
            }
            None => {}
        }
        Ok(n)
    }

    /// Makes room after `end` for a read: moves unconsumed bytes to the
    /// front, or grows the buffer while a head is incomplete.
    fn make_room(&mut self) {
        if self.buf.len() < self.buf.capacity() {
            return;
        }
        if self.start > 0 {
            self.buf.drain(..self.start);
            self.start = 0;
        } else if self.buf.capacity() < MAX_BUF {
            let n = (2 * self.buf.capacity()).min(MAX_BUF);
            self.buf.reserve_exact(n - self.buf.len());
        }
    }

    /// The read buffer for an exchange: allocated if the connection was
    /// idle.
    fn take_buffer(&mut self) {
        if self.buf.capacity() == 0 {
            debug_assert_eq!(self.start, 0);
            self.buf = Vec::with_capacity(self.size);
        }
    }

    /// Releases the read buffer when nothing in it is unread (bytes beyond
    /// the response stay for the next one).
    fn release_buffer(&mut self) {
        if self.start == self.buf.len() {
            self.start = 0;
            self.buf = Vec::new();
        }
    }

    /// Tells `arrived` of `n` body bytes read at `at`: one call, or after a
    /// batched read ([`Self::batch_reads`]) one per chunk, each dated when
    /// the chunk-by-chunk reads would have read it (a chunk's time apart,
    /// ending at `at`, none before the batch began waiting). Under a
    /// kernel-shaped link ([`KernelLink`]) the chunks are dated the same
    /// way at the link's rate: exact while the link is what limits the
    /// body, earlier than they came (by at most the batch) when the server
    /// was slower than the link.
    fn date_arrivals(&self, at: Instant, n: u64, arrived: &mut (dyn FnMut(Instant, u64) + Send)) {
        let Some(since) = self.batched_since else {
            return arrived(at, n);
        };
        let (chunk, rate) = match (self.down.as_ref(), self.kernel.as_ref()) {
            (Some(b), _) => (b.chunk(), b.bytes_per_s()),
            (None, Some(k)) => (k.chunk, k.bytes_per_s),
            (None, None) => return arrived(at, n),
        };
        let chunk = chunk.max(1) as u64;
        let m = n.div_ceil(chunk);
        let step = chunk as f64 / rate;
        for j in 0..m {
            let back = std::time::Duration::from_secs_f64((m - 1 - j) as f64 * step);
            let t = at.checked_sub(back).map_or(since, |t| t.max(since));
            let bytes = if j == 0 { n - (m - 1) * chunk } else { chunk };
            arrived(t, bytes);
        }
    }

    /// Bytes of read buffer this connection holds now (0 while idle).
    pub fn buffer_held(&self) -> usize {
        self.buf.capacity()
    }

    /// Sends a request and reads the whole response. `sink` sees every body
    /// byte with its offset in the body (for content checks).
    pub async fn exchange(
        &mut self,
        req: &Outgoing<'_>,
        sink: &mut (dyn FnMut(u64, &[u8]) + Send),
    ) -> Result<Response, Failure> {
        self.exchange_timed(req, sink, &mut |_, _| {}).await
    }

    /// [`Self::exchange`], also telling `arrived(at, n)` after every read
    /// that carried body bytes: `n` body bytes, read at `at` (one clock read
    /// per socket read; the delivery meters' input).
    pub async fn exchange_timed(
        &mut self,
        req: &Outgoing<'_>,
        sink: &mut (dyn FnMut(u64, &[u8]) + Send),
        arrived: &mut (dyn FnMut(Instant, u64) + Send),
    ) -> Result<Response, Failure> {
        self.exchange_limited(req, ReadLimits::default(), sink, arrived)
            .await
    }

    /// [`Self::exchange_timed`] reading the body within `limits`; a
    /// response cut by `stop_after` comes back with `keep_alive` false (the
    /// rest of it is still on the connection, which must be closed).
    pub async fn exchange_limited(
        &mut self,
        req: &Outgoing<'_>,
        limits: ReadLimits,
        sink: &mut (dyn FnMut(u64, &[u8]) + Send),
        arrived: &mut (dyn FnMut(Instant, u64) + Send),
    ) -> Result<Response, Failure> {
        let reused = self.uses > 0;
        self.out.clear();
        encode_request(
            &RequestHead {
                method: req.method,
                target: req.path,
                host: &self.host,
                http10: req.http10,
                range: req.range,
                headers: req.headers,
                session: Some(req.session),
                body: req.body.map(str::as_bytes),
            },
            &mut self.out,
        )
        .map_err(|e| Failure::new(ErrorKind::Other, format!("request not sent: {e}")))?;
        if let Some(up) = self.up.as_mut() {
            up.consume(self.clock.now(), self.out.len());
            let w = up.wait(self.clock.now());
            if !w.is_zero() {
                tokio::time::sleep(w).await;
            }
        }
        let sent = Instant::now();
        let written = async {
            self.io.write_all(&self.out).await?;
            self.io.flush().await
        };
        if let Err(e) = written.await {
            let mut f = Failure::new(ErrorKind::from_io(&e), format!("send: {e}"));
            f.retryable = reused;
            return Err(f);
        }

        self.take_buffer();
        let mut dec = ResponseDecoder::new(req.method == "HEAD");
        let mut stopped = false;
        let mut ttfb = None;
        let mut read_at = sent;
        let mut reported = 0u64;
        loop {
            if self.start < self.buf.len() {
                let p = dec
                    .feed(&self.buf[self.start..], sink)
                    .map_err(|e| decode_failure(e, false))?;
                let mut body = dec.body_bytes();
                if let Some(n) = limits.stop_after {
                    body = body.min(n);
                }
                if body > reported {
                    // read_kbps: these bytes are the reader's no earlier
                    // than their share of the rate allows
                    if let Some(due) = limits.due_after(body).map(|d| sent + d) {
                        let now = Instant::now();
                        if due > now {
                            tokio::time::sleep(due - now).await;
                            read_at = Instant::now();
                        }
                    }
                    self.date_arrivals(read_at, body - reported, arrived);
                    reported = body;
                }
                self.start += p.consumed;
                if self.start == self.buf.len() {
                    self.start = 0;
                    self.buf.clear();
                }
                if p.state == Decoded::Complete {
                    break;
                }
                if limits.done(body) && dec.head().is_some() {
                    // the rest of the body stays unread: the caller closes
                    stopped = true;
                    break;
                }
            }
            self.make_room();
            // the bytes still to come, when the head said (read_kbps and
            // stop_after pace or cut the body: chunk by chunk there)
            let want = match dec.head() {
                Some(h) if limits.read_kbps.is_none() && limits.stop_after.is_none() => {
                    match h.framing {
                        vodlab_http::client::Framing::Length(l) => {
                            Some(l.saturating_sub(dec.body_bytes()))
                        }
                        _ => None,
                    }
                }
                _ => None,
            };
            match self.shaped_read(want).await {
                Ok(0) => match dec.eof() {
                    Ok(()) => break,
                    Err(e) => return Err(decode_failure(e, reused)),
                },
                Ok(_) => {
                    // (the read grew `buf` itself)
                    read_at = Instant::now();
                    ttfb.get_or_insert_with(|| read_at.saturating_duration_since(sent));
                }
                Err(e) => {
                    let mut f = Failure::new(ErrorKind::from_io(&e), format!("read: {e}"));
                    f.retryable = reused && !dec.received_any() && self.start == self.buf.len();
                    return Err(f);
                }
            }
        }
        let head = *dec
            .head()
            .ok_or_else(|| Failure::new(ErrorKind::BadResponse, "response ended without a head"))?;
        self.uses += 1;
        self.release_buffer();
        Ok(Response {
            status: head.status,
            body_bytes: if stopped { reported } else { dec.body_bytes() },
            header_bytes: head.header_bytes,
            content_range: head.content_range,
            ttfb: ttfb.unwrap_or_else(|| sent.elapsed()),
            // bytes beyond the response on a connection that closes are discarded with it
            keep_alive: head.keep_alive && !stopped,
            cmsd_dynamic: dec.cmsd_dynamic().map(str::to_owned),
        })
    }
}

/// The failure a decoding error means (`reused`: a close before any byte
/// may be retried on a new connection).
fn decode_failure(e: DecodeError, reused: bool) -> Failure {
    let kind = match &e {
        DecodeError::ClosedBeforeResponse => ErrorKind::Reset,
        DecodeError::ClosedInHead | DecodeError::ShortBody { .. } => ErrorKind::ShortBody,
        _ => ErrorKind::BadResponse,
    };
    let mut f = Failure::new(kind, e.to_string());
    f.retryable = reused && matches!(e, DecodeError::ClosedBeforeResponse);
    f
}

pub use vodlab_http::client::parse_content_range;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_range_parses() {
        assert_eq!(
            parse_content_range("bytes 0-99/1000"),
            Some((0, 99, Some(1000)))
        );
        assert_eq!(parse_content_range("bytes 5-9/*"), Some((5, 9, None)));
        assert_eq!(parse_content_range("items 0-1/2"), None);
    }

    /// `GET /f`, the request every exchange of these tests sends.
    fn get_f() -> Outgoing<'static> {
        Outgoing {
            method: "GET",
            path: "/f",
            range: None,
            headers: &[],
            body: None,
            session: 1,
            http10: false,
        }
    }

    /// Serves `responses` (each a body length) on the far end of a duplex
    /// pipe and returns what the connection's buffer size was after each.
    async fn buffer_sizes_after(bodies: &[usize]) -> Vec<usize> {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let (near, mut far) = tokio::io::duplex(1 << 20);
        let n = bodies.len();
        let lens = bodies.to_vec();
        let server = tokio::spawn(async move {
            let mut req = [0u8; 4096];
            for len in lens {
                let _ = far.read(&mut req).await.unwrap();
                let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {len}\r\n\r\n");
                far.write_all(head.as_bytes()).await.unwrap();
                far.write_all(&vec![7u8; len]).await.unwrap();
            }
        });
        let mut c = Connection::new(near, "h", &LinkSpec::default());
        assert_eq!(c.size, FIRST_BUF);
        assert_eq!(c.buffer_held(), 0, "a new connection holds no buffer");
        let mut sizes = Vec::new();
        for _ in 0..n {
            let req = get_f();
            let mut got = 0u64;
            let r = c
                .exchange(&req, &mut |_, b: &[u8]| {
                    assert!(b.iter().all(|&x| x == 7));
                    got += b.len() as u64;
                })
                .await
                .unwrap();
            assert_eq!(r.status, 200);
            assert_eq!(got, r.body_bytes);
            // idle between exchanges: the buffer is released, its size kept
            assert_eq!(c.buffer_held(), 0);
            sizes.push(c.size);
        }
        server.await.unwrap();
        sizes
    }

    /// A transport that counts its reads.
    struct CountReads<T> {
        io: T,
        reads: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    }

    impl<T: AsyncRead + Unpin> AsyncRead for CountReads<T> {
        fn poll_read(
            mut self: std::pin::Pin<&mut Self>,
            cx: &mut std::task::Context<'_>,
            buf: &mut tokio::io::ReadBuf<'_>,
        ) -> std::task::Poll<io::Result<()>> {
            let r = std::pin::Pin::new(&mut self.io).poll_read(cx, buf);
            if r.is_ready() {
                self.reads
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            r
        }
    }

    impl<T: AsyncWrite + Unpin> AsyncWrite for CountReads<T> {
        fn poll_write(
            mut self: std::pin::Pin<&mut Self>,
            cx: &mut std::task::Context<'_>,
            b: &[u8],
        ) -> std::task::Poll<io::Result<usize>> {
            std::pin::Pin::new(&mut self.io).poll_write(cx, b)
        }
        fn poll_flush(
            mut self: std::pin::Pin<&mut Self>,
            cx: &mut std::task::Context<'_>,
        ) -> std::task::Poll<io::Result<()>> {
            std::pin::Pin::new(&mut self.io).poll_flush(cx)
        }
        fn poll_shutdown(
            mut self: std::pin::Pin<&mut Self>,
            cx: &mut std::task::Context<'_>,
        ) -> std::task::Poll<io::Result<()>> {
            std::pin::Pin::new(&mut self.io).poll_shutdown(cx)
        }
    }

    /// One 60,000-byte response over a 1.2 Mbit/s shaped link (150 kB/s,
    /// 1,500-byte chunks), batched at `batch` or not: (socket reads, the
    /// exchange's wall time s, the `arrived` calls).
    async fn shaped_body(batch: Option<std::time::Duration>) -> (usize, f64, Vec<(f64, u64)>) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        const LEN: usize = 60_000;
        let (near, mut far) = tokio::io::duplex(1 << 20);
        let server = tokio::spawn(async move {
            let mut req = [0u8; 4096];
            let _ = far.read(&mut req).await.unwrap();
            let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {LEN}\r\n\r\n");
            far.write_all(head.as_bytes()).await.unwrap();
            far.write_all(&vec![7u8; LEN]).await.unwrap();
            far
        });
        let reads = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let io = CountReads {
            io: near,
            reads: reads.clone(),
        };
        let link = LinkSpec {
            down_bps: 1.2e6,
            ..Default::default()
        };
        let mut c = Connection::new(io, "h", &link);
        if let Some(b) = batch {
            c.batch_reads(b);
        }
        let req = get_f();
        let t0 = Instant::now();
        let mut calls = Vec::new();
        let mut got = 0u64;
        let r = c
            .exchange_timed(
                &req,
                &mut |_, b: &[u8]| got += b.len() as u64,
                &mut |at, n| calls.push((at.saturating_duration_since(t0).as_secs_f64(), n)),
            )
            .await
            .unwrap();
        let secs = t0.elapsed().as_secs_f64();
        assert_eq!((r.status, r.body_bytes, got), (200, LEN as u64, LEN as u64));
        assert_eq!(calls.iter().map(|c| c.1).sum::<u64>(), LEN as u64);
        assert!(calls.windows(2).all(|w| w[0].0 <= w[1].0), "{calls:?}");
        drop(server.await.unwrap());
        (
            reads.load(std::sync::atomic::Ordering::Relaxed),
            secs,
            calls,
        )
    }

    #[tokio::test]
    async fn batched_shaped_reads_end_as_chunk_by_chunk_reads_with_fewer_reads() {
        // the link's pace: all but the first (free) chunk of head and body
        let ideal = (60_000.0 + 42.0 - 1_500.0) / 150_000.0;
        let (one_reads, one_s, one_calls) = shaped_body(None).await;
        // 50 ms of 150 kB/s: batches of 5 chunks (7,500 bytes)
        let (reads, secs, calls) = shaped_body(Some(std::time::Duration::from_millis(50))).await;
        assert!(one_reads >= 40, "chunk by chunk: {one_reads} reads");
        assert!(reads <= 11, "batched: {reads} reads");
        // the same end, at the link's pace (timers on a shared box: 40 ms)
        for s in [one_s, secs] {
            assert!((s - ideal).abs() < 0.04, "{s} s against {ideal} s");
        }
        // the reader still hears of every chunk, spread over the batches
        assert!(calls.len() >= 40, "{} arrival calls", calls.len());
        assert!(calls.len() + 2 >= one_calls.len());
        let first_half = calls
            .iter()
            .filter(|c| c.0 < ideal / 2.0)
            .map(|c| c.1)
            .sum::<u64>();
        assert!(
            (25_000..35_000).contains(&first_half),
            "{first_half} bytes dated in the first half"
        );
    }

    /// A kernel-shaped link (the lab's htb class) as the test scripts it: a
    /// server that writes a 16 KiB body in eight 2 KiB pieces 20 ms apart
    /// on loopback, twice on one connection, to a reader told the link is
    /// 2 Mbit/s. The reader must wake for the head at once and for the
    /// body only when the last piece is there (one batch), and date the
    /// body's chunks at the link's rate.
    #[tokio::test]
    async fn a_kernel_shaped_body_is_read_in_one_batch_after_an_immediate_head() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        const LEN: usize = 16 * 1024;
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let server = tokio::spawn(async move {
            let (mut s, _) = l.accept().await.unwrap();
            let mut last_pieces = Vec::new();
            for _ in 0..2 {
                let mut req = [0u8; 4096];
                let _ = s.read(&mut req).await.unwrap();
                let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {LEN}\r\n\r\n");
                s.write_all(head.as_bytes()).await.unwrap();
                let mut last = Instant::now();
                for _ in 0..8 {
                    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                    last = Instant::now();
                    s.write_all(&[7u8; LEN / 8]).await.unwrap();
                }
                last_pieces.push(last);
            }
            last_pieces
        });
        let mut c = Connection::connect(addr, "h", &LinkSpec::default())
            .await
            .unwrap();
        let rate = vodlab_units::Rate::from_bits_per_s(2_000_000);
        c.batch_reads_tcp(SHAPED_READ_INTERVAL, Some(rate)).unwrap();
        let req = get_f();
        let mut runs = Vec::new();
        for _ in 0..2 {
            let sent = Instant::now();
            // (date given, wall time of the call, bytes)
            let mut calls: Vec<(Instant, Instant, u64)> = Vec::new();
            let r = c
                .exchange_timed(&req, &mut |_, _| {}, &mut |at, n| {
                    calls.push((at, Instant::now(), n))
                })
                .await
                .unwrap();
            assert_eq!((r.status, r.body_bytes), (200, LEN as u64));
            runs.push((sent, r.ttfb, calls));
        }
        let last_pieces = server.await.unwrap();
        for ((sent, ttfb, calls), last) in runs.into_iter().zip(last_pieces) {
            assert_eq!(calls.iter().map(|c| c.2).sum::<u64>(), LEN as u64);
            // the head at once (SO_RCVLOWAT back at 1 for the second
            // response's head), long before the body's last piece
            let body_span = last.saturating_duration_since(sent);
            assert!(
                ttfb + std::time::Duration::from_millis(100) < body_span,
                "head after {ttfb:?}, the body's last piece {body_span:?} after the request"
            );
            // the body in one batch: nothing was reported before its last piece
            for (_, woke, _) in &calls {
                assert!(*woke >= last, "a read woke before the body's last piece");
            }
            // 16,384 bytes in 2,500-byte chunks (10 ms of 2 Mbit/s), dated
            // 10 ms apart and ending at the read
            assert_eq!(calls.len(), 7, "{} arrival calls", calls.len());
            assert_eq!(calls[0].2, LEN as u64 - 6 * 2_500);
            for w in calls.windows(2) {
                let step = w[1].0.saturating_duration_since(w[0].0);
                assert!(
                    step.as_secs_f64().mul_add(1e3, -10.0).abs() < 0.01,
                    "chunks dated {step:?} apart"
                );
            }
            assert!(calls.iter().all(|c| c.0 <= c.1));
        }
    }

    #[tokio::test]
    async fn an_unshaped_buffer_starts_small_and_grows_only_for_large_bodies() {
        // small responses never fill 8 KiB: the buffer stays small
        let small = buffer_sizes_after(&[100, 2_000, 300]).await;
        assert!(small.iter().all(|&s| s == FIRST_BUF), "{small:?}");
        // a 1 MB body fills the reads: the buffer doubles up to BUF, not past it
        let big = buffer_sizes_after(&[100, 1_000_000, 100]).await;
        assert_eq!(big[0], FIRST_BUF);
        assert_eq!(big[1], BUF, "{big:?}");
        assert_eq!(big[2], BUF);
    }

    #[tokio::test]
    async fn an_idle_connection_holds_no_buffer_but_keeps_unread_bytes() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let (near, mut far) = tokio::io::duplex(1 << 16);
        // two responses in one write: one read takes both
        let server = tokio::spawn(async move {
            let mut req = [0u8; 4096];
            let _ = far.read(&mut req).await.unwrap();
            far.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabcHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nde")
                .await
                .unwrap();
            let _ = far.read(&mut req).await.unwrap();
            far
        });
        let mut c = Connection::new(near, "h", &LinkSpec::default());
        let req = get_f();
        let mut body = Vec::new();
        let r = c
            .exchange(&req, &mut |_, b: &[u8]| body.extend_from_slice(b))
            .await
            .unwrap();
        assert_eq!((r.status, &body[..]), (200, &b"abc"[..]));
        // the second response's bytes are unread: the buffer stays
        assert_eq!(c.buffer_held(), FIRST_BUF);
        body.clear();
        let r = c
            .exchange(&req, &mut |_, b: &[u8]| body.extend_from_slice(b))
            .await
            .unwrap();
        assert_eq!((r.status, &body[..]), (200, &b"de"[..]));
        assert_eq!(c.buffer_held(), 0);
        drop(server.await.unwrap());
    }

    #[test]
    fn errors_are_classified_by_errno() {
        let e = io::Error::from_raw_os_error(libc::EMFILE);
        assert_eq!(ErrorKind::from_io(&e), ErrorKind::Descriptors);
        let e = io::Error::from_raw_os_error(libc::EADDRNOTAVAIL);
        assert_eq!(ErrorKind::from_io(&e), ErrorKind::Ports);
        let e = io::Error::from(io::ErrorKind::ConnectionRefused);
        assert_eq!(ErrorKind::from_io(&e), ErrorKind::Refused);
    }
}
