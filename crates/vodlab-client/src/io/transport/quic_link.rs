//! The in-process access link for QUIC: a quinn [`AsyncUdpSocket`] that
//! wraps a session's UDP socket and passes every datagram through the
//! link model of [`crate::core::link::datagrams`] — the uplink on the
//! client's sends, the downlink on what it receives (a datagram the
//! model drops on receive is never seen by quinn, as if lost on the way,
//! which is what matters for video: the server's packets are lost and
//! retransmitted).
//!
//! Sends: a datagram the model passes at once (no uplink rate, delay or
//! jitter) goes straight to the socket; a later one waits in a FIFO that
//! a small task of the socket sends at its time. Receives: everything the
//! socket holds is read and offered to the downlink; quinn gets the
//! datagrams whose arrival time has come, and a timer wakes it for the
//! next. A session without a rate, delay, jitter or loss gets quinn's own
//! socket (no wrapper: [`super::h3::endpoint`]).
//!
//! Memory: the downlink's queue is bounded by the model (tail drop); the
//! datagrams in flight for the one-way delay are bounded by QUIC's own
//! congestion and flow control (the server cannot have more in flight
//! than its window).

use std::collections::VecDeque;
use std::fmt;
use std::io::{self, IoSliceMut};
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::task::{Context, Poll};

use quinn::udp::{EcnCodepoint, RecvMeta, Transmit};
use quinn::{AsyncUdpSocket, Runtime, UdpPoller};
use tokio::sync::Notify;

use crate::core::link::datagrams::{Direction, DirectionCounts, DirectionSpec, Verdict};
use crate::core::time::{Clock, Time};

/// The counts of both directions of one session's link.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LinkCounts {
    /// The client's sends (toward the server).
    pub up: DirectionCounts,
    /// What the server sent the client.
    pub down: DirectionCounts,
}

/// A datagram waiting to be sent.
struct Outgoing {
    destination: SocketAddr,
    ecn: Option<EcnCodepoint>,
    src_ip: Option<IpAddr>,
    data: Vec<u8>,
}

impl Outgoing {
    fn transmit(&self) -> Transmit<'_> {
        Transmit {
            destination: self.destination,
            ecn: self.ecn,
            contents: &self.data,
            segment_size: None,
            src_ip: self.src_ip,
        }
    }
}

/// A datagram received, not yet due.
struct Incoming {
    addr: SocketAddr,
    ecn: Option<EcnCodepoint>,
    dst_ip: Option<IpAddr>,
    data: Vec<u8>,
}

struct State {
    up: Direction,
    down: Direction,
    /// Sends not yet due, by due time (FIFO: the model never reorders).
    outbox: VecDeque<(Time, Outgoing)>,
    /// Receives not yet due, likewise.
    inbox: VecDeque<(Time, Incoming)>,
    /// Wakes quinn's receiving task when the inbox's head is due.
    timer: Option<Pin<Box<tokio::time::Sleep>>>,
}

struct Shared {
    inner: Arc<dyn AsyncUdpSocket>,
    clock: Clock,
    state: Mutex<State>,
    /// Wakes the sending task (a datagram queued, or the socket gone).
    notify: Arc<Notify>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn now(&self) -> Time {
        self.clock.time_of(tokio::time::Instant::now().into_std())
    }
}

/// A UDP socket seen through an emulated access link (see the module's
/// documentation). Made with [`LinkSocket::wrap`] inside a tokio runtime.
pub struct LinkSocket {
    shared: Arc<Shared>,
}

impl fmt::Debug for LinkSocket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LinkSocket").finish_non_exhaustive()
    }
}

impl LinkSocket {
    /// Wraps `inner` in a link of `up` and `down`, and starts its sending
    /// task (which ends when the socket is dropped).
    pub fn wrap(inner: Arc<dyn AsyncUdpSocket>, up: DirectionSpec, down: DirectionSpec) -> Self {
        let clock = Clock::new(tokio::time::Instant::now().into_std());
        let now = Time::ZERO;
        let notify = Arc::new(Notify::new());
        let shared = Arc::new(Shared {
            inner,
            clock,
            state: Mutex::new(State {
                up: Direction::new(up, now),
                down: Direction::new(down, now),
                outbox: VecDeque::new(),
                inbox: VecDeque::new(),
                timer: None,
            }),
            notify: notify.clone(),
        });
        tokio::spawn(send_due(Arc::downgrade(&shared), notify));
        Self { shared }
    }

    /// Both directions' counts now.
    pub fn counts(&self) -> LinkCounts {
        let st = self.shared.lock();
        LinkCounts {
            up: st.up.counts(),
            down: st.down.counts(),
        }
    }
}

impl Drop for LinkSocket {
    fn drop(&mut self) {
        // the sending task finds the socket gone and ends
        self.shared.notify.notify_one();
    }
}

/// What the sending task waits for.
enum Wait {
    /// A datagram to be queued.
    Queued,
    /// The head's due time.
    Until(tokio::time::Instant),
    /// The socket to take more.
    Writable(Arc<dyn AsyncUdpSocket>),
}

/// Sends the outbox's datagrams at their times, until the socket is gone.
async fn send_due(shared: Weak<Shared>, notify: Arc<Notify>) {
    let mut poller: Option<Pin<Box<dyn UdpPoller>>> = None;
    loop {
        let wait = {
            let Some(sh) = shared.upgrade() else {
                return;
            };
            let now = sh.now();
            let mut st = sh.lock();
            loop {
                let Some((at, d)) = st.outbox.front() else {
                    break Wait::Queued;
                };
                if *at > now {
                    break Wait::Until(sh.clock.instant_of(*at).into());
                }
                match sh.inner.try_send(&d.transmit()) {
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        break Wait::Writable(sh.inner.clone());
                    }
                    // sent, or refused by the kernel (unreachable...): gone
                    // either way, as on a real link
                    _ => {
                        st.outbox.pop_front();
                    }
                }
            }
        };
        match wait {
            Wait::Queued => notify.notified().await,
            Wait::Until(t) => {
                tokio::select! {
                    _ = tokio::time::sleep_until(t) => {}
                    _ = notify.notified() => {}
                }
            }
            Wait::Writable(inner) => {
                let p = poller.get_or_insert_with(|| inner.create_io_poller());
                let _ = std::future::poll_fn(|cx| p.as_mut().poll_writable(cx)).await;
            }
        }
    }
}

thread_local! {
    /// The buffer a receive reads into before the datagrams are copied
    /// out (one per thread, not per socket: a UDP GRO batch is at most
    /// 64 KiB, and a session's socket would hold it for its life).
    static SCRATCH: std::cell::RefCell<Vec<u8>> = std::cell::RefCell::new(vec![0; 64 * 1024]);
}

impl AsyncUdpSocket for LinkSocket {
    fn create_io_poller(self: Arc<Self>) -> Pin<Box<dyn UdpPoller>> {
        // sends never block (a datagram the socket cannot take now waits
        // in the outbox), so writability is the socket's own
        self.shared.inner.clone().create_io_poller()
    }

    fn try_send(&self, transmit: &Transmit) -> io::Result<()> {
        let sh = &self.shared;
        let now = sh.now();
        let mut st = sh.lock();
        let seg = transmit
            .segment_size
            .unwrap_or(transmit.contents.len())
            .max(1);
        for data in transmit.contents.chunks(seg) {
            let Verdict::Deliver(at) = st.up.offer(now, data.len()) else {
                continue;
            };
            let d = Outgoing {
                destination: transmit.destination,
                ecn: transmit.ecn,
                src_ip: transmit.src_ip,
                data: data.to_vec(),
            };
            if at <= now && st.outbox.is_empty() {
                match sh.inner.try_send(&d.transmit()) {
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    // sent (or refused, as a real link would lose it)
                    _ => continue,
                }
            }
            st.outbox.push_back((at, d));
            sh.notify.notify_one();
        }
        Ok(())
    }

    fn poll_recv(
        &self,
        cx: &mut Context,
        bufs: &mut [IoSliceMut<'_>],
        meta: &mut [RecvMeta],
    ) -> Poll<io::Result<usize>> {
        let sh = &self.shared;
        let mut st = sh.lock();
        // everything the socket holds enters the downlink now
        let error = SCRATCH.with(|s| {
            let mut scratch = s.borrow_mut();
            loop {
                let mut m = [RecvMeta::default()];
                let got = {
                    let mut io = [IoSliceMut::new(&mut scratch[..])];
                    sh.inner.poll_recv(cx, &mut io, &mut m)
                };
                match got {
                    Poll::Pending => return None,
                    Poll::Ready(Err(e)) => return Some(e),
                    Poll::Ready(Ok(0)) => return None,
                    Poll::Ready(Ok(_)) => {
                        let now = sh.now();
                        let m = m[0];
                        let stride = if m.stride == 0 { m.len } else { m.stride }.max(1);
                        for data in scratch[..m.len].chunks(stride) {
                            if let Verdict::Deliver(at) = st.down.offer(now, data.len()) {
                                st.inbox.push_back((
                                    at,
                                    Incoming {
                                        addr: m.addr,
                                        ecn: m.ecn,
                                        dst_ip: m.dst_ip,
                                        data: data.to_vec(),
                                    },
                                ));
                            }
                        }
                    }
                }
            }
        });
        loop {
            let now = sh.now();
            let mut n = 0;
            while n < bufs.len().min(meta.len()) {
                let due = st.inbox.front().is_some_and(|(at, _)| *at <= now);
                if !due {
                    break;
                }
                let Some((_, d)) = st.inbox.pop_front() else {
                    break;
                };
                let len = d.data.len().min(bufs[n].len());
                bufs[n][..len].copy_from_slice(&d.data[..len]);
                meta[n] = RecvMeta {
                    addr: d.addr,
                    len,
                    stride: len,
                    ecn: d.ecn,
                    dst_ip: d.dst_ip,
                };
                n += 1;
            }
            if n > 0 {
                return Poll::Ready(Ok(n));
            }
            if let Some(e) = error {
                return Poll::Ready(Err(e));
            }
            let Some(at) = st.inbox.front().map(|(at, _)| *at) else {
                st.timer = None;
                return Poll::Pending;
            };
            let deadline: tokio::time::Instant = sh.clock.instant_of(at).into();
            let timer = st
                .timer
                .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
            if timer.deadline() != deadline {
                timer.as_mut().reset(deadline);
            }
            if std::future::Future::poll(timer.as_mut(), cx).is_pending() {
                return Poll::Pending;
            }
            // due by now: deliver it
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.shared.inner.local_addr()
    }

    fn may_fragment(&self) -> bool {
        self.shared.inner.may_fragment()
    }
}

/// A client endpoint for `peer` whose UDP socket goes through a link of
/// `up` and `down`; the socket's handle gives the link's counts.
pub fn endpoint(
    peer: SocketAddr,
    up: DirectionSpec,
    down: DirectionSpec,
) -> io::Result<(quinn::Endpoint, Arc<LinkSocket>)> {
    let bind: SocketAddr = if peer.is_ipv4() {
        (std::net::Ipv4Addr::UNSPECIFIED, 0).into()
    } else {
        (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
    };
    let runtime = Arc::new(quinn::TokioRuntime);
    let inner = runtime.wrap_udp_socket(std::net::UdpSocket::bind(bind)?)?;
    let link = Arc::new(LinkSocket::wrap(inner, up, down));
    let ep = quinn::Endpoint::new_with_abstract_socket(
        quinn::EndpointConfig::default(),
        None,
        link.clone(),
        runtime,
    )?;
    Ok((ep, link))
}

#[cfg(test)]
mod tests;
