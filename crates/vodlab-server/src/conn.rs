//! One connection: a state machine over the socket, and the executor of
//! response plans (head through the codec, bodies with `sendfile`, ASAP
//! probes and prefetches through the controller).
//!
//! States: [`ConnState::ReadingHead`] (idle timeout until the first byte of
//! a request, then the header timeout as a deadline for the whole head; a
//! body left by the previous request is drained first) →
//! [`ConnState::Responding`] (the shared prelude, [`crate::prepare`]:
//! route, open, plan, rates; then execute; every wait for the
//! socket bounded by the send timeout) → back to reading when the
//! connection is kept, or [`ConnState::Rejecting`] (an unparsable or
//! untrustworthy head: answer and close) → [`ConnState::Closing`] with the
//! reason. While it reads a head the connection may be shed by the accept
//! loop at the connection cap ([`crate::limits::HeadQueue`]).

use std::io::{self};
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{watch, Notify};
use vodlab_http::server::{check_request, parse_head, Head, Reject, MAX_HEAD};

use crate::access::{count, log_line, CacheOutcome};
use crate::asap::{FileCtx, RangeIo};
use crate::bitrate::ResponseRate;
use crate::config::{IoMode, PaceMode};
use crate::conn_io::{flush, reset_on_close, send_file, write_all, write_more};
use crate::error::ServeError;
use crate::limits::{body_action, BodyAction, HeadTimer};
use crate::plan::{self, Body, PlanCtx, ResponsePlan};
use crate::prepare::{prepare, FrontEnd};
use crate::request::chain_of;
use crate::server::State;
use crate::transport::Transport;
use vodlab_prefetch::SessionState;

/// Why a connection ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloseReason {
    /// The client closed it (or a read failed).
    PeerClosed,
    /// No complete head in time (the header timeout; counted) or no next
    /// request in time (the idle timeout; not counted).
    Timeout {
        /// Whether a head had begun or it was the first request.
        counted: bool,
    },
    /// The server is shutting down.
    Stopped,
    /// The response said `Connection: close`.
    Done,
    /// The client went away mid-response.
    Aborted,
    /// An unparsable head was answered.
    Rejected,
    /// Shed at the connection cap while it waited for a head.
    Shed,
    /// The response made no progress for the send timeout (a stalled reader).
    SendTimeout,
}

/// The connection's state.
#[derive(Debug)]
pub enum ConnState {
    /// Waiting for (the rest of) a request head.
    ReadingHead,
    /// A request to answer, and what to do with its body.
    Responding(Box<Head>, BodyAction),
    /// A head that could not be parsed.
    Rejecting(Reject),
    /// The end.
    Closing(CloseReason),
}

/// What executing a plan did.
struct Sent {
    /// File bytes sent.
    file_bytes: u64,
    /// Page-cache outcome of the (last) range.
    cache: CacheOutcome,
    result: io::Result<()>,
}

struct Conn<'a> {
    sock: Transport,
    id: u64,
    st: &'a State,
    stop: watch::Receiver<bool>,
    buf: Vec<u8>,
    out: Vec<u8>,
    first: bool,
    session: SessionState,
    /// Body bytes of the previous request still to drop.
    discard: u64,
    timer: HeadTimer,
    shed: Arc<Notify>,
    /// Read (and drop) what the client still sends before closing, so the
    /// answer is not destroyed by a reset.
    linger: bool,
    /// The rate the next file body is paced at (set per response).
    pace: Option<ResponseRate>,
    /// A kernel pacing rate is set on the socket (cleared before an
    /// unpaced response of the same connection).
    kernel_rate_set: bool,
    /// The `TCP_NOTSENT_LOWAT` set on the socket now (`crate::lowat`).
    lowat: u64,
    /// The rate the peer read at between file responses (`crate::lowat`).
    read_rate: crate::lowat::ReadRate,
}

/// Serves one connection to its end.
pub(crate) async fn run(
    sock: Transport,
    id: u64,
    st: &State,
    stop: watch::Receiver<bool>,
    accepted: Instant,
) {
    let mut c = Conn {
        sock,
        id,
        st,
        stop,
        buf: Vec::with_capacity(4096),
        out: Vec::with_capacity(512),
        first: true,
        session: SessionState::default(),
        discard: 0,
        timer: HeadTimer::first(accepted),
        shed: Arc::new(Notify::new()),
        linger: false,
        pace: None,
        kernel_rate_set: false,
        lowat: st.cfg.notsent_lowat,
        read_rate: crate::lowat::ReadRate::default(),
    };
    let mut state = ConnState::ReadingHead;
    loop {
        state = match state {
            ConnState::ReadingHead => c.read_head().await,
            ConnState::Responding(head, body) => c.respond(&head, body).await,
            ConnState::Rejecting(r) => c.reject(r).await,
            ConnState::Closing(reason) => {
                c.close(reason).await;
                return;
            }
        };
    }
}

impl Conn<'_> {
    fn stopping(&self) -> bool {
        *self.stop.borrow()
    }

    /// Reads until a head is complete, while the connection is sheddable
    /// at the connection cap.
    async fn read_head(&mut self) -> ConnState {
        if self.stopping() {
            return ConnState::Closing(CloseReason::Stopped);
        }
        let mut ticket = None;
        let next = self.read_head_inner(&mut ticket).await;
        let kept = match ticket {
            Some(t) => self.st.heads.lock().expect("lock").leave(t),
            None => true,
        };
        match next {
            ConnState::Closing(_) => next,
            // shed while its head completed: it closes all the same
            _ if !kept => ConnState::Closing(CloseReason::Shed),
            _ => next,
        }
    }

    /// Drops the rest of the previous request's body, then reads until a
    /// head is complete: the idle timeout until its first byte (on a kept
    /// connection), then the header timeout as one deadline for the whole
    /// head (later bytes do not extend it). The connection enters the
    /// shedding queue (`ticket`) when it first waits on its client: a new
    /// connection whose bytes are already in the kernel waits on this
    /// server's reactor, and is not shed for that.
    async fn read_head_inner(&mut self, ticket: &mut Option<u64>) -> ConnState {
        loop {
            if self.discard > 0 && !self.buf.is_empty() {
                let k = self.discard.min(self.buf.len() as u64);
                self.buf.drain(..k as usize);
                self.discard -= k;
            }
            if self.discard == 0 {
                match parse_head(&self.buf) {
                    Ok(Some(mut h)) => {
                        self.buf.drain(..h.len);
                        self.first = false;
                        return match check_request(&mut h) {
                            Ok(framing) => {
                                let body = body_action(framing, h.header("expect").is_some());
                                ConnState::Responding(Box::new(h), body)
                            }
                            Err(r) => ConnState::Rejecting(r),
                        };
                    }
                    Ok(None) => {}
                    Err(r) => return ConnState::Rejecting(r),
                }
            }
            if !self.buf.is_empty() {
                // a pipelined head's first bytes came with the previous request
                self.timer.bytes_arrived(Instant::now());
            }
            let deadline = self
                .timer
                .deadline(self.st.cfg.header_timeout, self.st.cfg.idle_timeout);
            let mut tmp = [0u8; 4096];
            let mut stop = self.stop.clone();
            let idle = self.buf.is_empty() && self.discard == 0;
            // peeks only while a connection's first head is read (until it
            // first waits on its client), never per request: later heads
            // come on connections the reactor already watches
            if ticket.is_none()
                && !(self.first && crate::conn_io::bytes_waiting(self.sock.tcp().as_raw_fd()))
            {
                *ticket = Some(self.st.heads.lock().expect("lock").enter(self.shed.clone()));
            }
            let read = tokio::select! {
                r = tokio::time::timeout_at(deadline.into(), self.sock.read(&mut tmp)) => r,
                _ = stop.changed(), if idle => return ConnState::Closing(CloseReason::Stopped),
                _ = self.shed.notified(), if ticket.is_some() => return ConnState::Closing(CloseReason::Shed),
            };
            match read {
                Ok(Ok(0)) | Ok(Err(_)) => return ConnState::Closing(CloseReason::PeerClosed),
                Ok(Ok(n)) => {
                    self.buf.extend_from_slice(&tmp[..n]);
                    self.timer.bytes_arrived(Instant::now());
                }
                Err(_) => {
                    let counted = self.timer.in_head();
                    return ConnState::Closing(CloseReason::Timeout { counted });
                }
            }
            if self.discard == 0 && self.buf.len() > MAX_HEAD + 4096 {
                return ConnState::Rejecting(Reject::TooLarge);
            }
        }
    }

    async fn reject(&mut self, r: Reject) -> ConnState {
        self.first = false;
        let date = self.st.date();
        let ctx = PlanCtx {
            keep_alive: false,
            date: &date,
            conn: self.id,
        };
        let p = plan::plan_error(&ServeError::Head(r), false, &ctx);
        let sent = self.execute(&p, None, "", Instant::now()).await;
        self.count(&p);
        self.linger = true;
        match sent.result {
            Err(e) if e.kind() == io::ErrorKind::TimedOut => {
                ConnState::Closing(CloseReason::SendTimeout)
            }
            _ => ConnState::Closing(CloseReason::Rejected),
        }
    }

    fn count(&self, p: &ResponsePlan) {
        count(self.st, p);
    }

    /// Prepares ([`crate::prepare`]: route, open, plan, rates) and
    /// executes one request.
    async fn respond(&mut self, head: &Head, body: BodyAction) -> ConnState {
        let t0 = Instant::now();
        let keep = head.keep_alive() && !self.stopping() && body != BodyAction::Close;
        // the user-mode pacer writes with sendfile: over TLS only kernel pacing applies
        let can_pace = !self.sock.is_tls() || self.st.cfg.pace_mode == PaceMode::Kernel;
        let fe = FrontEnd {
            conn: self.id,
            keep_alive: keep,
            can_pace,
            arrived: t0,
            alt_svc: true,
        };
        let prep = prepare(self.st, head, fe);
        let p = &prep.plan;
        self.pace = prep.pace;
        let chain = chain_of(&head.target);
        let sent = self
            .execute(p, prep.file_ctx(head).as_ref(), chain, t0)
            .await;
        crate::asap::prefetch_next_objects(self.st, &prep.next);
        self.st.counters.requests.fetch_add(1, Ordering::Relaxed);
        log_line(
            self.st,
            self.id,
            head,
            p,
            (sent.file_bytes, sent.cache),
            t0.elapsed(),
            &prep.cmcd,
        );
        match sent.result {
            Ok(()) if keep && p.keep_alive => {
                self.timer = HeadTimer::next(Instant::now());
                if let BodyAction::Discard(n) = body {
                    // the body is part of this request: the header deadline covers it
                    self.discard = n;
                    self.timer.bytes_arrived(Instant::now());
                }
                ConnState::ReadingHead
            }
            Ok(()) => {
                // a body not drained, or one that may still come: read it off before closing
                self.linger = body != BodyAction::Keep;
                ConnState::Closing(CloseReason::Done)
            }
            Err(e) if e.kind() == io::ErrorKind::TimedOut => {
                ConnState::Closing(CloseReason::SendTimeout)
            }
            Err(_) => ConnState::Closing(CloseReason::Aborted),
        }
    }

    async fn close(&mut self, reason: CloseReason) {
        let c = &self.st.counters;
        match reason {
            CloseReason::Timeout { counted: true } => {
                c.header_timeouts.fetch_add(1, Ordering::Relaxed);
            }
            CloseReason::Aborted => {
                c.aborted.fetch_add(1, Ordering::Relaxed);
            }
            CloseReason::SendTimeout => {
                c.send_timeouts.fetch_add(1, Ordering::Relaxed);
            }
            CloseReason::Shed => {
                c.shed.fetch_add(1, Ordering::Relaxed);
            }
            _ => {}
        }
        match reason {
            CloseReason::Done
            | CloseReason::Aborted
            | CloseReason::Rejected
            | CloseReason::Stopped => {
                let _ = self.sock.shutdown().await;
                if self.linger {
                    self.linger_close().await;
                }
            }
            CloseReason::SendTimeout => reset_on_close(self.sock.tcp()),
            _ => {}
        }
        crate::asap::end_session(self.st, self.id, &mut self.session);
    }

    /// After the answer to a request whose body was not drained: drop what
    /// the client still sends (at most 64 KiB, for at most a second) so
    /// that closing with unread bytes does not reset the connection and
    /// destroy the answer before the client reads it.
    async fn linger_close(&mut self) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(1);
        let mut left = 64 * 1024usize;
        let mut tmp = [0u8; 4096];
        while left > 0 {
            match tokio::time::timeout_at(deadline, self.sock.read(&mut tmp)).await {
                Ok(Ok(n)) if n > 0 => left = left.saturating_sub(n),
                _ => return,
            }
        }
    }

    /// Sends one file range: in ASAP mode through [`crate::asap`] (probe,
    /// controller, prefetch, bytes sent as they are read), else with
    /// `sendfile` on the blocking pool.
    async fn send_range(
        &mut self,
        f: &FileCtx<'_>,
        off: u64,
        len: u64,
        chain: &str,
    ) -> io::Result<CacheOutcome> {
        if self.st.cfg.io != IoMode::Asap {
            send_file(&mut self.sock, self.st, f.file, off, len).await?;
            return Ok(CacheOutcome::None);
        }
        let mut io = RangeIo {
            sink: crate::conn_io::Sink::Conn(&mut self.sock),
            st: self.st,
            session: &mut self.session,
            conn: self.id,
        };
        let (cache, res) = io.send_range(f, off, len, chain).await;
        res.map(|()| cache)
    }

    /// Sends one file range paced at `rate` ([`crate::pacing`]): in user
    /// mode through the server's pacer (inline non-blocking sendfile, no
    /// ASAP probe), in kernel mode as the burst unpaced, then the rest with
    /// `SO_MAX_PACING_RATE` set (left set until an unpaced response, so the
    /// tail still queued in the kernel stays paced).
    async fn send_paced(
        &mut self,
        f: &FileCtx<'_>,
        off: u64,
        len: u64,
        chain: &str,
        rate: ResponseRate,
    ) -> io::Result<CacheOutcome> {
        let st = self.st;
        let pc = &st.pacing.counters;
        pc.paced.fetch_add(1, Ordering::Relaxed);
        match st.cfg.pace_mode {
            PaceMode::User => {
                let Some(sock) = self.sock.plain() else {
                    // the user-mode pacer writes with sendfile: not over TLS (see `respond`)
                    return self.send_range(f, off, len, chain).await;
                };
                crate::pacing::send_paced(&st.pacing, sock, f.file, off, len, &rate).await?;
                Ok(CacheOutcome::None)
            }
            PaceMode::Kernel => {
                let have = rate.client_buffer_s.unwrap_or(0.0);
                let burst = ((st.cfg.pace_burst - have).max(0.0) * rate.bytes_per_s) as u64;
                let burst = burst.min(len);
                let mut cache = CacheOutcome::None;
                if burst > 0 {
                    if self.kernel_rate_set {
                        crate::pacing::set_max_pacing_rate(self.sock.tcp(), u64::MAX)?;
                    }
                    cache = self.send_range(f, off, burst, chain).await?;
                    pc.burst_bytes.fetch_add(burst, Ordering::Relaxed);
                }
                let mut r = (rate.factor * rate.bytes_per_s).round().max(1.0) as u64;
                if let Some(m) = rate.max_bytes_per_s {
                    r = r.min(m.max(1));
                }
                crate::pacing::set_max_pacing_rate(self.sock.tcp(), r)?;
                self.kernel_rate_set = true;
                if len > burst {
                    cache = self.send_range(f, off + burst, len - burst, chain).await?;
                }
                Ok(cache)
            }
        }
    }

    /// `TCP_INFO`'s bytes acknowledged and delivery rate, on plain TCP
    /// (over TLS the bytes acknowledged count records, not the body).
    fn tcp_facts(&mut self) -> Option<crate::lowat::TcpFacts> {
        crate::lowat::tcp_facts(self.sock.plain()?.as_raw_fd())
    }

    /// Sets the socket's low-water mark for the next file body: raised for
    /// a peer that reads fast by the kernel's delivery rate and by what it
    /// read since the previous response ([`crate::lowat`]), the configured
    /// one for a paced body, a first body or a peer not measured (TLS).
    fn fit_lowat(&mut self, facts: Option<crate::lowat::TcpFacts>, paced: bool, began: Instant) {
        let read = facts.and_then(|f| self.read_rate.observe(began, f.bytes_acked));
        let cfg = &self.st.cfg;
        let want = match (facts, read) {
            (Some(f), Some(read)) if !paced => crate::lowat::rate_aware(
                f.delivery_rate.min(read),
                cfg.notsent_lowat,
                cfg.notsent_lowat_max,
            ),
            _ => cfg.notsent_lowat,
        };
        if want != self.lowat {
            crate::lowat::set(self.sock.tcp().as_raw_fd(), want);
            self.lowat = want;
        }
        if want > cfg.notsent_lowat {
            self.st
                .counters
                .lowat_raised
                .fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Sends a plan that began (its request arrived) at `began`: the head
    /// (held with MSG_MORE when file bytes follow at once), then the body.
    async fn execute(
        &mut self,
        p: &ResponsePlan,
        file: Option<&FileCtx<'_>>,
        chain: &str,
        began: Instant,
    ) -> Sent {
        let mut sent = Sent {
            file_bytes: 0,
            cache: CacheOutcome::None,
            result: Ok(()),
        };
        self.out.clear();
        plan::encode_head(p, &mut self.out);
        sent.result = match (&p.body, file) {
            (Body::File(r), Some(f)) => {
                // the header goes out with the first body bytes (MSG_MORE), as nginx's TCP_NOPUSH does
                let r = *r;
                let pace = self.pace.take();
                let head_len = self.out.len() as u64;
                let facts = self.tcp_facts();
                self.fit_lowat(facts, pace.is_some(), began);
                let acked0 = facts.map(|f| f.bytes_acked);
                let res = async {
                    if pace.is_none() && self.kernel_rate_set {
                        crate::pacing::set_max_pacing_rate(self.sock.tcp(), u64::MAX)?;
                        self.kernel_rate_set = false;
                    }
                    write_more(&mut self.sock, &self.out, self.st.cfg.send_timeout).await?;
                    sent.cache = match pace {
                        Some(rate) => self.send_paced(f, r.offset, r.len, chain, rate).await?,
                        None => self.send_range(f, r.offset, r.len, chain).await?,
                    };
                    sent.file_bytes = r.len;
                    Ok(())
                }
                .await;
                if res.is_err() {
                    // cut short (a client ending an open-ended read by
                    // closing): log the body bytes its TCP acknowledged
                    if let (Some(a0), Some(a1)) = (acked0, self.tcp_facts().map(|f| f.bytes_acked))
                    {
                        sent.file_bytes =
                            (a1.saturating_sub(a0)).saturating_sub(head_len).min(r.len);
                    }
                }
                res
            }
            (Body::Multipart { parts, closing }, Some(f)) => {
                let facts = self.tcp_facts();
                self.fit_lowat(facts, false, began);
                let limit = self.st.cfg.send_timeout;
                let res = async {
                    write_all(&mut self.sock, &self.out, limit).await?;
                    for part in parts {
                        write_all(&mut self.sock, &part.head, limit).await?;
                        let r = part.range;
                        sent.cache = self.send_range(f, r.offset, r.len, chain).await?;
                        write_all(&mut self.sock, b"\r\n", limit).await?;
                        sent.file_bytes += r.len;
                    }
                    write_all(&mut self.sock, closing, limit).await
                }
                .await;
                res
            }
            (Body::Bytes(b), _) => {
                self.out.extend_from_slice(b);
                write_all(&mut self.sock, &self.out, self.st.cfg.send_timeout).await
            }
            _ => write_all(&mut self.sock, &self.out, self.st.cfg.send_timeout).await,
        };
        if sent.result.is_ok() {
            sent.result = flush(&mut self.sock, self.st.cfg.send_timeout).await;
        }
        sent
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::ResponseKind;
    use crate::state::kind_index;

    #[test]
    fn cache_outcomes_print_as_the_log_expects() {
        assert_eq!(
            [CacheOutcome::Hit, CacheOutcome::Miss, CacheOutcome::None].map(|c| c.to_string()),
            ["hit", "miss", "-"]
        );
    }

    #[test]
    fn response_kinds_have_distinct_counters() {
        let kinds = [
            ResponseKind::Full,
            ResponseKind::Range,
            ResponseKind::Multipart,
            ResponseKind::Unsatisfiable,
            ResponseKind::Stats,
            ResponseKind::Error,
        ];
        let mut slots: Vec<usize> = kinds.iter().map(|&k| kind_index(k)).collect();
        slots.sort_unstable();
        slots.dedup();
        assert_eq!(slots, (0..6).collect::<Vec<_>>());
    }
}
