//! The session driver: every rule of one viewer's session, without I/O.
//!
//! A [`SessionDriver`] walks a session script — bursts, pacing and think
//! times, per-request deadlines, one retry on a reused connection, skipping
//! the rest after a failure, the emulated link's one-way delay and the
//! viewer's playout buffer — and tells an executor what to do. It never reads
//! a clock or touches a socket (quinn-proto's shape):
//!
//! - [`SessionDriver::handle`]`(now, event)`: what happened (a connection
//!   opened or failed, a response arrived, an exchange failed);
//! - [`SessionDriver::poll_action`]`(now)`: the next thing to do (connect,
//!   send request *j* on connection *k*, close, report a finished request,
//!   finished with an outcome); it first fires every timer due at `now`;
//! - [`SessionDriver::poll_timeout`]: when to call `poll_action` again if
//!   nothing happens (the next pacing target, deadline or delayed packet).
//!
//! Every point in time is a [`Time`] (virtual time from the run's epoch),
//! every span a [`Duration`]; the executor converts with its
//! [`crate::core::time::Clock`].
//!
//! One runtime drives it: the tokio engine ([`crate::io::engine`], one task
//! per scripted session in `engine/session.rs`), which executes its actions
//! over real connections for the scripted sessions of `vodlab run` and of
//! the points `capacity`, `compare` and `bench` run. Players (`--player`) run
//! `engine/player_session.rs` instead, and `vodlab simulate --player` runs
//! [`crate::core::player::sim::run_player`]: neither uses this driver. Only tests
//! step it in virtual time (`tests/driver.rs`, `tests/pacing_metrics.rs`,
//! `tests/protocol_schedule.rs`; `crates/vodlab/tests/absurd_input.rs`).
//!
//! ## Rules
//!
//! - A burst is a request and the indented lines after it; its requests are
//!   issued together, each connection's share in order (one outstanding
//!   request per connection), connections in parallel. The next burst is
//!   due when every request of this one completed and its wait has passed
//!   ([`send_target`]).
//! - A detached request (`detach=1`) does not hold up the next burst: the
//!   burst is over when its other requests completed (a later request on
//!   the detached one's connection still waits for it), and the session
//!   ends when the detached request completed too.
//! - A request's deadline counts from when it is issued (connect time
//!   included); missing it fails the request and closes its connection.
//! - A request that fails with nothing received on a reused connection (the
//!   server closed it while idle) is retried once on a new connection, with
//!   the same deadline.
//! - After the first failure nothing new is sent; requests in flight finish
//!   (or miss their deadlines), then the session ends as failed.
//! - With a one-way link delay `d`, a request leaves `d` after it is issued
//!   and its response counts as arrived `d` after its last byte was read.
//! - Body bytes reported as they are read ([`Event::Body`]) feed the
//!   delivery meters of [`crate::core::delivery`]: playback latency, 100 ms rate
//!   windows against the paced target, the aggregate rate. Bytes a response
//!   holds that were not reported count as arrived with the response.

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use vodlab_workload::script::Session;

pub use crate::core::checks::check;
use crate::core::delivery::{
    request_bitrate, AggregateMeter, DeliveryOut, Playback, ResponseMeter, DEFAULT_PLAYBACK_BUFFER,
};
use crate::core::exchange::{ErrorKind, Failure, Response};
use crate::core::slots::{add, FAR};
pub use crate::core::slots::{send_target, LatePacing, Previous, Target};
use crate::core::time::Time;
use crate::core::viewer::{self, ViewerStats};

/// Settings of a driver.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DriverConfig {
    /// Apply pacing and think times (off: every burst as soon as the
    /// previous one completed).
    pub pacing: bool,
    /// What a late paced request does.
    pub late_pacing: LatePacing,
    /// One-way delay of the emulated access link.
    pub link_delay: Duration,
    /// Deadline of a request whose script line gives none.
    pub default_timeout: Duration,
    /// Client buffer `B` of the playback latency (the paper's 4 s).
    pub playback_buffer: Duration,
    /// Paced target rate as a multiple `K` of the content's bit rate.
    pub pace_target: f64,
    /// Epoch of the aggregate rate windows (the run's start, which is
    /// [`Time::ZERO`] of the executor's clock); `None`: the session's start.
    pub epoch: Option<Time>,
}

impl Default for DriverConfig {
    fn default() -> Self {
        Self {
            pacing: true,
            late_pacing: LatePacing::Delay,
            link_delay: Duration::ZERO,
            default_timeout: DEFAULT_TIMEOUT,
            playback_buffer: DEFAULT_PLAYBACK_BUFFER,
            pace_target: 1.0,
            epoch: None,
        }
    }
}

/// Deadline of a request whose script gives none (one hour).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(3600);

/// What happened, told to [`SessionDriver::handle`].
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// Connection `conn` is open.
    Connected {
        /// Connection index.
        conn: usize,
    },
    /// Opening connection `conn` failed.
    ConnectFailed {
        /// Connection index.
        conn: usize,
        /// Why.
        failure: Failure,
    },
    /// The response to the request sent on `conn` is complete. The executor
    /// has dropped the connection if the response said it closes.
    Response {
        /// Connection index.
        conn: usize,
        /// What arrived.
        response: Response,
    },
    /// `bytes` body bytes of the response on `conn` were read (at the
    /// `now` given to `handle`). Optional: unreported bytes count as arrived
    /// with the response.
    Body {
        /// Connection index.
        conn: usize,
        /// Body bytes of this read.
        bytes: u64,
    },
    /// The exchange on `conn` failed; the executor has dropped the connection.
    Failed {
        /// Connection index.
        conn: usize,
        /// Why.
        failure: Failure,
    },
}

/// What to do, from [`SessionDriver::poll_action`].
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Open connection `conn`; answer with `Connected` or `ConnectFailed`.
    Connect {
        /// Connection index.
        conn: usize,
    },
    /// Send request `request` of the session on the open connection `conn`;
    /// answer with `Response` or `Failed`.
    Send {
        /// Connection index.
        conn: usize,
        /// Index of the request in the session.
        request: usize,
    },
    /// Abandon whatever is in flight on `conn` and drop the connection (a
    /// deadline passed).
    Close {
        /// Connection index.
        conn: usize,
    },
    /// A request ended (completed or failed): count it.
    Record(RequestRecord),
    /// The session is over; no more actions follow.
    Finished(SessionOutcome),
}

/// One issued request's result.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestRecord {
    /// Index in the session.
    pub request: usize,
    /// Connection index.
    pub conn: usize,
    /// When its burst was due on the session's own schedule
    /// ([`Target::on_schedule`]): latency from schedule counts from here.
    pub scheduled: Time,
    /// For a burst's head: how late it was issued after `scheduled`.
    pub send_lateness: Option<Duration>,
    /// When it was issued (connect time included in what follows).
    pub issued: Time,
    /// Completion, or why it failed.
    pub result: Result<Completed, Failure>,
}

/// A completed request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Completed {
    /// When its response counted as arrived (link delay included).
    pub done: Time,
    /// Time to first byte, link delay both ways included.
    pub ttfb: Duration,
    /// Body bytes.
    pub bytes: u64,
    /// Status.
    pub status: u16,
    /// Playback latency: issue to the first `B` seconds of content.
    pub playback: Playback,
}

/// How a session ended.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionOutcome {
    /// When it started.
    pub start: Time,
    /// When it ended.
    pub end: Time,
    /// The first failure (request index and why); `None` for a session that
    /// ran to its end.
    pub failure: Option<(usize, Failure)>,
    /// Requests completed.
    pub completed: usize,
    /// Requests never sent (or failed after the first failure).
    pub skipped: usize,
    /// What the viewer saw, when the session carries playout parameters.
    pub viewer: Option<ViewerStats>,
    /// Retries on a new connection after the server closed an idle one.
    pub reconnects: u32,
    /// Responses after which the server closed the connection.
    pub server_closes: u32,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    /// Waiting for `Connected`.
    Connecting,
    /// Issued; leaves when the link delay has passed.
    Delaying(Time),
    /// On the wire, waiting for `Response`/`Failed`.
    Sent,
    /// Response read; counts as arrived at `done` (link delay).
    Arriving(Completed),
}

#[derive(Debug, Clone, Copy)]
struct Inflight {
    request: usize,
    phase: Phase,
    issued: Time,
    deadline: Time,
    retried: bool,
    lateness: Option<Duration>,
    meter: ResponseMeter,
}

#[derive(Debug, Default)]
struct Conn {
    open: bool,
    queue: VecDeque<usize>,
    inflight: Option<Inflight>,
}

/// The state machine of one session (see the module docs).
#[derive(Debug)]
pub struct SessionDriver<'s> {
    session: &'s Session,
    sizes: Option<&'s HashMap<String, u64>>,
    cfg: DriverConfig,
    start: Time,
    /// Index of the next burst's head.
    next: usize,
    /// The next burst is due then (set once the previous one completed).
    due: Option<Target>,
    /// The current burst's due time.
    scheduled: Time,
    prev: Previous,
    conns: Vec<Conn>,
    /// Completion of each request since the session's start.
    arrivals: Vec<Option<Duration>>,
    failure: Option<(usize, Failure)>,
    actions: VecDeque<Action>,
    reconnects: u32,
    server_closes: u32,
    finished: bool,
    aggregate: AggregateMeter,
    delivery: DeliveryOut,
}

impl<'s> SessionDriver<'s> {
    /// A driver for `session` starting at `start`. `sizes` gives whole-file
    /// sizes (from the catalog) to check unranged responses against.
    pub fn new(
        session: &'s Session,
        sizes: Option<&'s HashMap<String, u64>>,
        cfg: DriverConfig,
        start: Time,
    ) -> Self {
        let nconn = session.requests.iter().map(|r| r.conn).max().unwrap_or(0) as usize + 1;
        let prev = Previous {
            slot: None,
            start: None,
            done: start,
        };
        let mut d = Self {
            session,
            sizes,
            cfg,
            start,
            next: 0,
            due: None,
            scheduled: start,
            prev,
            conns: (0..nconn).map(|_| Conn::default()).collect(),
            arrivals: vec![None; session.requests.len()],
            failure: None,
            actions: VecDeque::new(),
            reconnects: 0,
            server_closes: 0,
            finished: false,
            aggregate: AggregateMeter::new(cfg.epoch.unwrap_or(start)),
            delivery: DeliveryOut::default(),
        };
        d.schedule_next(start);
        d
    }

    /// The session this drives.
    pub fn session(&self) -> &'s Session {
        self.session
    }

    /// Number of connections the session uses.
    pub fn connections(&self) -> usize {
        self.conns.len()
    }

    /// True once [`Action::Finished`] has been returned or queued.
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// Moves the delivery figures produced so far (finished rate windows,
    /// aggregate bytes) to the end of `out`.
    pub fn take_delivery(&mut self, out: &mut DeliveryOut) {
        out.append(&mut self.delivery);
    }

    /// Delivery entries waiting for [`Self::take_delivery`].
    pub fn delivery_pending(&self) -> usize {
        self.delivery.len()
    }

    /// When `poll_action` must next be called if no event arrives.
    pub fn poll_timeout(&self) -> Option<Time> {
        if self.finished {
            return None;
        }
        let mut t = self.due.map(|d| d.at);
        for c in &self.conns {
            if let Some(f) = &c.inflight {
                let at = match f.phase {
                    Phase::Delaying(at) => at.min(f.deadline),
                    Phase::Arriving(done) => done.done.min(f.deadline),
                    Phase::Connecting | Phase::Sent => f.deadline,
                };
                t = Some(t.map_or(at, |x| x.min(at)));
            }
        }
        t
    }

    /// The next action, after firing every timer due at `now`.
    pub fn poll_action(&mut self, now: Time) -> Option<Action> {
        if self.actions.is_empty() {
            self.advance(now);
        }
        self.actions.pop_front()
    }

    /// Tells the driver what happened at `now`.
    pub fn handle(&mut self, now: Time, event: Event) {
        match event {
            Event::Body { conn, bytes } => {
                // the hot path: O(1), no allocation beyond a finished window
                let t = now + self.cfg.link_delay;
                if let Some(f) = self.conns.get_mut(conn).and_then(|c| c.inflight.as_mut()) {
                    if f.phase == Phase::Sent {
                        f.meter.on_body(t, bytes, &mut self.delivery.windows);
                    }
                }
                self.aggregate
                    .on_body(t, bytes, &mut self.delivery.aggregate);
                return;
            }
            Event::Connected { conn } => {
                let Some(c) = self.conns.get_mut(conn) else {
                    return;
                };
                c.open = true;
                if matches!(
                    c.inflight,
                    Some(Inflight {
                        phase: Phase::Connecting,
                        ..
                    })
                ) {
                    self.begin_send(conn, now);
                }
            }
            Event::ConnectFailed { conn, failure } => {
                if let Some(c) = self.conns.get_mut(conn) {
                    c.open = false;
                    if matches!(
                        c.inflight,
                        Some(Inflight {
                            phase: Phase::Connecting,
                            ..
                        })
                    ) {
                        self.fail(conn, now, failure);
                    }
                }
            }
            Event::Response { conn, response } => self.on_response(conn, now, response),
            Event::Failed { conn, failure } => {
                let Some(c) = self.conns.get_mut(conn) else {
                    return;
                };
                c.open = false;
                let Some(f) = c.inflight.as_mut() else { return };
                if f.phase != Phase::Sent {
                    return;
                }
                if failure.retryable && (!f.retried || failure.unsent) {
                    f.retried |= !failure.unsent;
                    f.phase = Phase::Connecting;
                    self.reconnects += 1;
                    self.actions.push_back(Action::Connect { conn });
                } else {
                    self.fail(conn, now, failure);
                }
            }
        }
        self.settle(now);
    }

    fn on_response(&mut self, conn: usize, now: Time, response: Response) {
        let Some(c) = self.conns.get_mut(conn) else {
            return;
        };
        if !response.keep_alive {
            c.open = false;
            self.server_closes += 1;
        }
        let Some(f) = c.inflight else { return };
        if f.phase != Phase::Sent {
            return;
        }
        let r = &self.session.requests[f.request];
        let expected = self.sizes.and_then(|s| s.get(&r.path).copied());
        if let Err(fail) = check(r, &response, expected) {
            self.fail(conn, now, fail);
            return;
        }
        let delay = self.cfg.link_delay;
        let at = now + delay;
        let mut meter = f.meter;
        let unreported = response.body_bytes.saturating_sub(meter.received());
        if unreported > 0 {
            meter.on_body(at, unreported, &mut self.delivery.windows);
            self.aggregate
                .on_body(at, unreported, &mut self.delivery.aggregate);
        }
        meter.finish(at, &mut self.delivery.windows);
        let done = Completed {
            done: at,
            ttfb: response.ttfb + 2 * delay,
            bytes: response.body_bytes,
            status: response.status,
            playback: meter.playback(),
        };
        if delay.is_zero() && done.done <= f.deadline {
            self.complete(conn, done);
        } else {
            // counts as arrived after the link delay; one that would arrive
            // after its deadline is failed by the deadline timer instead
            self.conns[conn].inflight.as_mut().expect("inflight").phase = Phase::Arriving(done);
        }
    }

    /// Fires timers due at `now`, then issues the next burst if it is due.
    fn advance(&mut self, now: Time) {
        if self.finished {
            return;
        }
        for k in 0..self.conns.len() {
            let Some(f) = self.conns[k].inflight else {
                continue;
            };
            match f.phase {
                Phase::Arriving(done) if done.done <= now && done.done <= f.deadline => {
                    self.complete(k, done);
                }
                Phase::Delaying(at) if at <= now && at < f.deadline => {
                    self.conns[k].inflight.as_mut().expect("inflight").phase = Phase::Sent;
                    self.actions.push_back(Action::Send {
                        conn: k,
                        request: f.request,
                    });
                }
                _ if f.deadline <= now => {
                    let secs = self.timeout_of(f.request).as_secs_f64();
                    self.conns[k].open = false;
                    self.actions.push_back(Action::Close { conn: k });
                    self.fail(
                        k,
                        f.deadline,
                        Failure::new(ErrorKind::Timeout, format!("not complete within {secs} s")),
                    );
                }
                _ => {}
            }
        }
        self.settle(now);
        if let Some(due) = self.due {
            if due.at <= now && self.failure.is_none() {
                self.due = None;
                self.issue_burst(due, now);
            }
        }
    }

    fn timeout_of(&self, j: usize) -> Duration {
        match self.session.requests[j].timeout_s {
            Some(s) => Duration::try_from_secs_f64(s.max(0.0)).unwrap_or(Duration::MAX),
            None => self.cfg.default_timeout,
        }
    }

    fn issue_burst(&mut self, due: Target, now: Time) {
        let reqs = &self.session.requests;
        let head = self.next;
        let end = reqs[head + 1..]
            .iter()
            .position(|r| !r.burst)
            .map_or(reqs.len(), |p| head + 1 + p);
        self.next = end;
        // latency from schedule counts from where the session's own
        // schedule put this burst, not from when the previous (late)
        // response let it go: a slow response must not hide the lateness
        // it causes (coordinated omission)
        self.scheduled = due.on_schedule;
        self.prev.slot = Some(due.slot);
        self.prev.start = Some(now);
        for (j, r) in reqs.iter().enumerate().take(end).skip(head) {
            self.conns[r.conn as usize].queue.push_back(j);
        }
        let lateness = now.saturating_duration_since(due.at);
        for k in 0..self.conns.len() {
            if self.conns[k].inflight.is_none() {
                if let Some(j) = self.conns[k].queue.pop_front() {
                    self.start_request(k, j, now, (j == head).then_some(lateness));
                }
            }
        }
        self.settle(now);
    }

    fn start_request(&mut self, k: usize, j: usize, now: Time, lateness: Option<Duration>) {
        let timeout = self.timeout_of(j);
        let deadline = now.checked_add(timeout).unwrap_or_else(|| add(now, FAR));
        let bitrate = request_bitrate(&self.session.requests[j], self.session.header.bitrate_bps);
        let meter =
            ResponseMeter::new(bitrate, self.cfg.playback_buffer, self.cfg.pace_target, now);
        self.conns[k].inflight = Some(Inflight {
            request: j,
            phase: Phase::Connecting,
            issued: now,
            deadline,
            retried: false,
            lateness,
            meter,
        });
        if self.conns[k].open {
            self.begin_send(k, now);
        } else {
            self.actions.push_back(Action::Connect { conn: k });
        }
    }

    fn begin_send(&mut self, k: usize, now: Time) {
        let delay = self.cfg.link_delay;
        let f = self.conns[k].inflight.as_mut().expect("inflight");
        if delay.is_zero() {
            f.phase = Phase::Sent;
            let request = f.request;
            self.actions.push_back(Action::Send { conn: k, request });
        } else {
            f.phase = Phase::Delaying(now + delay);
        }
    }

    fn complete(&mut self, k: usize, done: Completed) {
        let f = self.conns[k].inflight.take().expect("inflight");
        self.arrivals[f.request] = Some(done.done.saturating_duration_since(self.start));
        if !self.session.requests[f.request].detach {
            self.prev.done = self.prev.done.max(done.done);
        }
        self.actions.push_back(Action::Record(RequestRecord {
            request: f.request,
            conn: k,
            scheduled: self.scheduled,
            send_lateness: f.lateness,
            issued: f.issued,
            result: Ok(done),
        }));
        if self.failure.is_none() {
            if let Some(j) = self.conns[k].queue.pop_front() {
                self.start_request(k, j, done.done, None);
            }
        }
    }

    fn fail(&mut self, k: usize, at: Time, failure: Failure) {
        let Some(f) = self.conns[k].inflight.take() else {
            return;
        };
        self.actions.push_back(Action::Record(RequestRecord {
            request: f.request,
            conn: k,
            scheduled: self.scheduled,
            send_lateness: f.lateness,
            issued: f.issued,
            result: Err(failure.clone()),
        }));
        self.prev.done = self.prev.done.max(at);
        if self.failure.is_none() {
            self.failure = Some((f.request, failure));
        }
        for c in &mut self.conns {
            c.queue.clear();
        }
    }

    /// After any change: when the burst is over, schedule the next one or finish.
    fn settle(&mut self, now: Time) {
        if self.finished || self.due.is_some() {
            return;
        }
        let reqs = &self.session.requests;
        // the burst is over when only detached requests are in flight; the
        // session when nothing is
        let busy = self
            .conns
            .iter()
            .any(|c| c.inflight.is_some_and(|f| !reqs[f.request].detach) || !c.queue.is_empty());
        if busy {
            return;
        }
        if self.failure.is_some() || self.next >= reqs.len() {
            if self.conns.iter().any(|c| c.inflight.is_some()) {
                return;
            }
            self.finish(now);
        } else {
            self.schedule_next(now);
        }
    }

    fn schedule_next(&mut self, now: Time) {
        if self.next >= self.session.requests.len() {
            self.finish(now);
            return;
        }
        let wait = self.session.requests[self.next].wait;
        self.due = Some(send_target(
            wait,
            self.prev,
            self.cfg.pacing,
            self.cfg.late_pacing,
        ));
    }

    /// The session's playout buffer at `now`, seconds of content (`None`
    /// when the session carries no playout parameters): CMCD `bl`, an f64
    /// figure that goes out in a header as a number.
    pub fn buffer_s(&self, now: Time) -> Option<f64> {
        let (request_s, buffering) = crate::load::playout(self.session)?;
        let t = now.saturating_duration_since(self.start);
        Some(viewer::buffer_at(&self.arrivals, request_s, buffering, t))
    }

    fn finish(&mut self, now: Time) {
        self.finished = true;
        self.aggregate.flush(&mut self.delivery.aggregate);
        let end = now.max(self.prev.done);
        let completed = self.arrivals.iter().filter(|a| a.is_some()).count();
        let failed = self.failure.is_some();
        let skipped = self.session.requests.len() - completed - usize::from(failed);
        let ran = end.saturating_duration_since(self.start);
        let viewer = crate::load::playout(self.session).map(|(request_s, buffering)| {
            viewer::play(&self.arrivals, request_s, buffering, failed.then_some(ran))
        });
        for (k, c) in self.conns.iter_mut().enumerate() {
            if c.open {
                c.open = false;
                self.actions.push_back(Action::Close { conn: k });
            }
        }
        self.actions.push_back(Action::Finished(SessionOutcome {
            start: self.start,
            end,
            failure: self.failure.take(),
            completed,
            skipped,
            viewer,
            reconnects: self.reconnects,
            server_closes: self.server_closes,
        }));
    }
}
