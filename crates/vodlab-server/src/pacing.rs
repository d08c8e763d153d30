//! Paced responses (`--pace K`): the executor between the planner and the
//! socket. Two mechanisms ([`crate::config::PaceMode`]):
//!
//! - **user**: the server's [`Pacer`] (sans-IO, one timer heap) decides
//!   when each paced response may write how many bytes. One [`Pacer`] for
//!   the whole server behind a mutex, and one **driver task** that owns the
//!   timer: it sleeps until the heap's earliest time, takes every due
//!   [`Grant`] and writes it itself with one non-blocking `sendfile` run
//!   on the connection's socket, and reports what the socket took
//!   ([`Pacer::on_sent`]: n, a short n, or 0 on `EAGAIN`), under the one
//!   lock. A connection waits on a channel until its body is complete (no
//!   timer of its own, so no sleeping task per session). A connection that
//!   goes away removes its session (a drop guard), so the pacer never
//!   waits for it. The driver is a dedicated thread by default, waiting on
//!   a condition variable with an absolute deadline (µs precision), or
//!   that thread under `SCHED_FIFO`, or a tokio task woken by tokio's 1 ms
//!   timer ([`PaceDriver`], `--pace-driver`).
//!   Why one shared pacer and not one per tokio worker: tokio moves tasks
//!   between workers, so a per-worker heap would need its own runtime per
//!   thread; the lock is held for a heap operation (µs), and the measured
//!   cost is in docs/serve.md.
//!   An HTTP/2 stream is a session of the same pacer, but the driver
//!   cannot write DATA frames itself: it hands each grant (a byte count) to
//!   the stream's task over a channel and counts it as sent
//!   ([`register_stream`]); a stream short of flow-control window falls
//!   behind its grants, never ahead.
//! - **kernel**: `SO_MAX_PACING_RATE` = r on the socket and plain
//!   `sendfile` (TCP's internal pacing, see [`set_max_pacing_rate`]); the
//!   burst is sent first without a rate.
//!
//! Chunk rule (user mode): c = clamp(r × 2.5 ms, 64 B, 64 KiB) per session
//! unless `pace_chunk` fixes it, so the grid puts a 100 ms window of a
//! session paced at r within one chunk of r × 100 ms (±2.5 %), leaving the
//! other half of ±5 % to timer and scheduling jitter. Sockets have
//! `TCP_NODELAY` (set at accept), so a chunk smaller than an MSS leaves
//! when it is written instead of waiting for the previous one's ACK.

use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::os::unix::io::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use parking_lot::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde::Serialize;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot, Notify};

use crate::bitrate::ResponseRate;
use crate::config::{defaults, Config, PaceDriver, PaceMode};
use crate::pacer::{
    Grant, Kind, Pacer, PacerConfig, PacerConfigError, Sent, SessionId, SessionParams,
};

/// Header bytes per TCP segment on the link `--link-capacity` describes:
/// Ethernet 14 + IPv4 20 + TCP 20 + timestamps 12 (what `htb` counts). With
/// 125 B chunks a paced session takes 1.53 × its rate of the link, so on a
/// tight link the pacer reserves that much before it lets bursts in.
pub const WIRE_HEADER_BYTES: u64 = 66;

/// Pacing counters (lock-free).
#[derive(Debug, Default)]
pub struct PaceCounters {
    /// Responses sent paced.
    pub paced: AtomicU64,
    /// Responses sent unpaced because no bit rate was known.
    pub no_rate: AtomicU64,
    /// Bytes sent by bursts (initial and low-buffer; kernel mode: the
    /// initial burst sent before the rate is set).
    pub burst_bytes: AtomicU64,
    /// Grants acted on.
    pub grants: AtomicU64,
    /// Sum of grant lateness (time from due to the connection acting), µs.
    pub lateness_sum_us: AtomicU64,
    /// Largest grant lateness, µs.
    pub lateness_max_us: AtomicU64,
    /// Driver wake-ups that released at least one grant.
    pub wakeups: AtomicU64,
}

/// The statistics' `pacing` object.
#[derive(Debug, Clone, Serialize)]
pub struct PacingStats {
    /// Pace factor K (0: off).
    pub pace: f64,
    /// `user` or `kernel`.
    pub mode: PaceMode,
    /// `--pace-policy`: `fixed`, `cmcd` or `sammy:EMPTY,FULL,SECONDS`.
    pub policy: String,
    /// Responses sent paced.
    pub paced_responses: u64,
    /// Responses sent unpaced for lack of a bit rate.
    pub unpaced_no_rate: u64,
    /// Bytes sent by bursts.
    pub burst_bytes: u64,
    /// Grants acted on (user mode).
    pub grants: u64,
    /// Mean time from a grant's due time to the connection writing, µs.
    pub mean_grant_lateness_us: f64,
    /// Largest such time, µs.
    pub max_grant_lateness_us: u64,
    /// Driver wake-ups that released at least one grant (grants per
    /// wake-up: how many sessions shared one, see `pace_coalesce`).
    pub wakeups: u64,
    /// Paced sessions in the pacer now (user mode).
    pub active_sessions: u64,
    /// The driver asked for (`--pace-driver`: `task`, `thread`, `rt:PRIO`).
    pub driver: String,
    /// The scheduling the driver thread got: `fifo:PRIO`, or `other` (normal
    /// priority; also when `SCHED_FIFO` was refused); `task` for the tokio
    /// task; empty before the driver has started.
    pub driver_policy: String,
}

/// A paced response the driver is sending: the connection's socket and
/// file descriptors stay open while it is here, because the connection
/// task waits in [`send_paced`] until the driver completes it, and a
/// connection task dropped mid-response removes it (under the lock, so
/// never during a write) before either descriptor can close.
struct Job {
    writer: Writer,
    /// File offset of the next byte.
    off: u64,
    /// Last time the socket took a byte (the send timeout's clock).
    progress: Instant,
    /// Completes the connection's wait.
    done: oneshot::Sender<io::Result<()>>,
}

/// How a paced response's granted bytes are written.
enum Writer {
    /// The driver writes them itself: one non-blocking `sendfile` run on
    /// the connection's socket from the file.
    Sendfile { sock: RawFd, file: RawFd },
    /// An HTTP/2 stream's task writes them as DATA: the driver hands each
    /// grant over (a task wake-up per chunk) and counts it as sent; a stream
    /// short of window falls behind its grants, never ahead.
    Stream(mpsc::UnboundedSender<u64>),
}

struct Inner {
    pacer: Pacer,
    jobs: HashMap<SessionId, Job>,
    /// When the driver will wake next (`None`: it waits for a notify).
    planned: Option<Instant>,
}

/// The user-mode pacer, its driver's wake-up and the counters.
pub struct Pacing {
    inner: Mutex<Inner>,
    /// Wakes the driver task ([`PaceDriver::Task`]).
    wake: Notify,
    /// Wakes the driver thread (paired with `inner`).
    cv: Condvar,
    /// Tells the driver thread to end (under `inner`'s lock).
    stop: AtomicBool,
    driver: PaceDriver,
    /// The scheduling the driver got (see [`PacingStats::driver_policy`]).
    policy: OnceLock<String>,
    /// A wake-up releases every grant due up to this much later
    /// (`pace_coalesce`).
    coalesce: Duration,
    /// Counters.
    pub counters: PaceCounters,
    cfg_pace: f64,
    policy_name: String,
    mode: PaceMode,
    chunk: Option<u64>,
    send_timeout: Duration,
}

impl Pacing {
    /// From the server's settings.
    pub fn new(cfg: &Config) -> Result<Self, PacerConfigError> {
        Ok(Self {
            inner: Mutex::new(Inner {
                pacer: Pacer::new(PacerConfig {
                    header_bytes: WIRE_HEADER_BYTES,
                    ..cfg.pacer_config()
                })?,
                jobs: HashMap::new(),
                planned: None,
            }),
            wake: Notify::new(),
            cv: Condvar::new(),
            stop: AtomicBool::new(false),
            driver: cfg.pace_driver,
            policy: OnceLock::new(),
            coalesce: cfg.pace_coalesce,
            counters: PaceCounters::default(),
            cfg_pace: cfg.pace,
            policy_name: cfg.pace_policy.to_string(),
            mode: cfg.pace_mode,
            chunk: cfg.pace_chunk,
            send_timeout: cfg.send_timeout,
        })
    }

    /// Statistics now.
    pub fn stats(&self) -> PacingStats {
        let c = &self.counters;
        let grants = c.grants.load(Ordering::Relaxed);
        PacingStats {
            pace: self.cfg_pace,
            mode: self.mode,
            policy: self.policy_name.clone(),
            paced_responses: c.paced.load(Ordering::Relaxed),
            unpaced_no_rate: c.no_rate.load(Ordering::Relaxed),
            burst_bytes: c.burst_bytes.load(Ordering::Relaxed),
            grants,
            mean_grant_lateness_us: if grants > 0 {
                c.lateness_sum_us.load(Ordering::Relaxed) as f64 / grants as f64
            } else {
                0.0
            },
            max_grant_lateness_us: c.lateness_max_us.load(Ordering::Relaxed),
            wakeups: c.wakeups.load(Ordering::Relaxed),
            active_sessions: self.inner.lock().pacer.len() as u64,
            driver: self.driver.to_string(),
            driver_policy: self.policy.get().cloned().unwrap_or_default(),
        }
    }

    /// The session parameters of a response of `total` bytes at `rate`,
    /// with the chunk rule applied.
    fn params(&self, pacer: &Pacer, rate: &ResponseRate, total: u64) -> SessionParams {
        let mut p = SessionParams::new(rate.bytes_per_s, total);
        p.client_buffer = rate.client_buffer_s;
        p.max_rate = rate.max_bytes_per_s;
        p.factor = Some(rate.factor);
        p.chunk = Some(self.chunk.unwrap_or_else(|| chunk_rule(pacer.rate_for(&p))));
        p
    }

    /// Wakes the driver if `at` is before its planned wake-up.
    fn wake_for(&self, inner: &Inner, at: Instant) {
        if inner.planned.is_none_or(|p| at < p) {
            // both: a driver thread that could not start falls back to the task
            self.cv.notify_one();
            self.wake.notify_one();
        }
    }

    fn record(&self, g: &Grant, now: Instant) {
        let c = &self.counters;
        let late = now.saturating_duration_since(g.due).as_micros() as u64;
        c.grants.fetch_add(1, Ordering::Relaxed);
        c.lateness_sum_us.fetch_add(late, Ordering::Relaxed);
        c.lateness_max_us.fetch_max(late, Ordering::Relaxed);
    }

    /// The pacer's clock for a wake-up at `real`: `real` + `pace_coalesce`,
    /// so grants due that soon after go out in this wake-up.
    fn pacer_now(&self, real: Instant) -> Instant {
        real + self.coalesce
    }

    /// Acts on one due grant: one non-blocking `sendfile` run of at most
    /// the granted bytes on the session's socket, reported to the pacer
    /// (n, a short n, or 0 on `EAGAIN`) as of `now` (the pacer's clock,
    /// [`Self::pacer_now`]); the session's connection is told when the body
    /// is complete, or fails (an error, or no byte taken for the send
    /// timeout). `real` is the wake-up's time, for the lateness counters.
    fn act(
        &self,
        inner: &mut Inner,
        grant: Grant,
        now: Instant,
        real: Instant,
        sent_bytes: &AtomicU64,
    ) {
        let Some(job) = inner.jobs.get_mut(&grant.id) else {
            // its connection is gone
            inner.pacer.remove(now, grant.id);
            return;
        };
        self.record(&grant, real);
        let written = match &job.writer {
            Writer::Sendfile { sock, file } => write_chunk(*sock, *file, job.off, grant.bytes),
            Writer::Stream(tx) => match tx.send(grant.bytes) {
                // the stream's task counts the bytes it sends itself
                Ok(()) => Ok(grant.bytes),
                Err(_) => Err(io::Error::new(
                    io::ErrorKind::ConnectionAborted,
                    "the stream is gone",
                )),
            },
        };
        let counted = matches!(job.writer, Writer::Sendfile { .. });
        let outcome = match written {
            Ok(n) => {
                job.off += n;
                if counted {
                    sent_bytes.fetch_add(n, Ordering::Relaxed);
                }
                if grant.kind == Kind::Burst {
                    self.counters.burst_bytes.fetch_add(n, Ordering::Relaxed);
                }
                if n > 0 {
                    job.progress = now;
                }
                if n == 0 && now.duration_since(job.progress) >= self.send_timeout {
                    Some(Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "send timeout: the client read nothing",
                    )))
                } else {
                    match inner.pacer.on_sent(now, grant.id, n) {
                        Ok(Sent::Done) => Some(Ok(())),
                        Ok(Sent::Scheduled(_)) => None,
                        Err(e) => Some(Err(io::Error::other(e))),
                    }
                }
            }
            Err(e) => Some(Err(e)),
        };
        if let Some(r) = outcome {
            inner.pacer.remove(now, grant.id);
            if let Some(job) = inner.jobs.remove(&grant.id) {
                let _ = job.done.send(r);
            }
        }
    }
}

/// The chunk rule: c = r × 2.5 ms, clamped to 64 B … 64 KiB (`r` in
/// bytes/s).
pub fn chunk_rule(rate: u64) -> u64 {
    ((rate as f64 * defaults::PACE_CHUNK_TIME.as_secs_f64()).round() as u64)
        .clamp(defaults::MIN_PACE_CHUNK, defaults::MAX_PACE_CHUNK)
}

/// The driver: sleeps until the earliest release, writes every due grant
/// itself (no task wake-up per chunk: a first version handed each grant to
/// its connection task over a channel and spent 17-43 µs per chunk), and
/// sleeps again (or until a new session's time is earlier). Paced bytes
/// are added to `sent_bytes` (the server's byte counter). The returned
/// future runs until aborted. With a driver thread
/// ([`PaceDriver::is_thread`]) the thread is started here, before the
/// future is first polled (it has its name and policy when this returns),
/// and the future ends and joins it when dropped,
/// so a server's driver thread exists from its start to its shutdown.
pub(crate) fn drive(
    p: Arc<Pacing>,
    sent_bytes: Arc<AtomicU64>,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> {
    if p.driver.is_thread() {
        let (tp, tb) = (p.clone(), sent_bytes.clone());
        let (started, running) = std::sync::mpsc::sync_channel(1);
        match std::thread::Builder::new()
            .name("vodlab-pacer".into())
            .spawn(move || drive_thread(&tp, &tb, started))
        {
            Ok(thread) => {
                // the thread has its name and scheduling policy when the
                // server's start returns (an Err: it ended before, which
                // the statistics' empty policy then shows)
                let _ = running.recv();
                let stop = StopThread(p, Some(thread));
                return Box::pin(async move {
                    let _stop = stop;
                    std::future::pending::<()>().await
                });
            }
            // no thread, nothing would pace: say so and drive from a task
            Err(e) => eprintln!(
                "vodlab serve: the pacer's driver thread could not start ({e}); \
                 driving it from a task"
            ),
        }
    }
    Box::pin(drive_task(p, sent_bytes))
}

async fn drive_task(p: Arc<Pacing>, sent_bytes: Arc<AtomicU64>) {
    let _ = p.policy.set("task".into());
    loop {
        let next = {
            let mut g = p.inner.lock();
            let inner = &mut *g;
            let real = Instant::now();
            let now = p.pacer_now(real);
            let mut any = false;
            while let Some(grant) = inner.pacer.poll_ready(now) {
                p.act(inner, grant, now, real, &sent_bytes);
                any = true;
            }
            if any {
                p.counters.wakeups.fetch_add(1, Ordering::Relaxed);
            }
            let next = inner.pacer.next_wakeup();
            inner.planned = next;
            next
        };
        match next {
            Some(at) => {
                tokio::select! {
                    _ = tokio::time::sleep_until(at.into()) => {}
                    _ = p.wake.notified() => {}
                }
            }
            None => p.wake.notified().await,
        }
    }
}

/// Ends the driver thread when the driver's future is dropped (the server
/// aborts it at shutdown): sets the flag under the lock, so the thread sees
/// it before it waits again, wakes it, and joins it (it ends at its next
/// loop test, after at most one round of non-blocking sends).
struct StopThread(Arc<Pacing>, Option<std::thread::JoinHandle<()>>);

impl Drop for StopThread {
    fn drop(&mut self) {
        {
            let _g = self.0.inner.lock();
            self.0.stop.store(true, Ordering::Release);
            self.0.cv.notify_all();
        }
        if let Some(t) = self.1.take() {
            let _ = t.join();
        }
    }
}

/// The driver thread: the task's loop with a precise wait. It waits on the
/// condition variable paired with the pacer's lock until the heap's
/// earliest release (parking_lot's futex wait: the kernel's
/// high-resolution timer), after setting its timer slack to 1 ns (a normal
/// thread's default lets the kernel fire its timer up to 50 µs late) and,
/// for [`PaceDriver::Rt`], `SCHED_FIFO`. Holds the lock while it acts, and
/// hands it to a waiting connection between wake-ups (a fair unlock: a
/// driver that is behind would otherwise re-take it at once).
fn drive_thread(p: &Pacing, sent_bytes: &AtomicU64, started: std::sync::mpsc::SyncSender<()>) {
    // SAFETY: prctl with an integer argument on the calling thread
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
    let policy = match p.driver.rt_priority() {
        Some(prio) => match set_fifo(prio) {
            Ok(()) => format!("fifo:{prio}"),
            Err(e) => {
                eprintln!(
                    "vodlab serve: pace_driver {}: SCHED_FIFO refused ({e}); \
                     the pacer's driver runs at normal priority",
                    p.driver
                );
                "other".into()
            }
        },
        None => "other".into(),
    };
    let _ = p.policy.set(policy);
    let _ = started.send(());
    let mut g = p.inner.lock();
    while !p.stop.load(Ordering::Acquire) {
        // hand the lock to a connection waiting to register or remove its
        // session, if any (a fair unlock and lock again): a driver that is
        // behind never waits, and an unfair re-lock kept new sessions out
        // for tens of seconds at 1,000 sessions
        MutexGuard::bump(&mut g);
        let inner = &mut *g;
        let real = Instant::now();
        let now = p.pacer_now(real);
        let mut any = false;
        while let Some(grant) = inner.pacer.poll_ready(now) {
            p.act(inner, grant, now, real, sent_bytes);
            any = true;
        }
        if any {
            p.counters.wakeups.fetch_add(1, Ordering::Relaxed);
        }
        let next = inner.pacer.next_wakeup();
        inner.planned = next;
        match next {
            Some(at) if at <= Instant::now() => {}
            Some(at) => {
                p.cv.wait_until(&mut g, at);
            }
            None => p.cv.wait(&mut g),
        }
    }
}

/// Puts the calling thread under `SCHED_FIFO` at `prio` (root or
/// `CAP_SYS_NICE`, or an `RLIMIT_RTPRIO` of at least `prio`).
fn set_fifo(prio: u8) -> io::Result<()> {
    let param = libc::sched_param {
        sched_priority: i32::from(prio),
    };
    // SAFETY: the calling thread's handle and a live sched_param
    let r = unsafe { libc::pthread_setschedparam(libc::pthread_self(), libc::SCHED_FIFO, &param) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(r))
    }
}

/// Removes a session (and its job) from the pacer unless the driver
/// completed it: the connection task was dropped mid-response.
struct Guard<'a> {
    p: &'a Pacing,
    id: Option<SessionId>,
}

impl Drop for Guard<'_> {
    fn drop(&mut self) {
        if let Some(id) = self.id.take() {
            let mut g = self.p.inner.lock();
            g.jobs.remove(&id);
            g.pacer.remove(Instant::now(), id);
        }
    }
}

/// Sends `len` bytes of `file` from `off`, paced by the user-mode pacer:
/// registers the response with the driver and waits until the driver has
/// written it all. Fails with `TimedOut` when the socket takes nothing for
/// the send timeout.
pub(crate) async fn send_paced(
    p: &Pacing,
    sock: &TcpStream,
    file: &File,
    off: u64,
    len: u64,
    rate: &ResponseRate,
) -> io::Result<()> {
    if len == 0 {
        return Ok(());
    }
    let (tx, rx) = oneshot::channel();
    let id = {
        let mut g = p.inner.lock();
        let now = Instant::now();
        let params = p.params(&g.pacer, rate, len);
        let id = g
            .pacer
            .register(now, params)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        g.jobs.insert(
            id,
            Job {
                writer: Writer::Sendfile {
                    sock: sock.as_raw_fd(),
                    file: file.as_raw_fd(),
                },
                off,
                progress: now,
                done: tx,
            },
        );
        p.wake_for(&g, now);
        id
    };
    // holds `sock` and `file` open (borrowed) until the job is gone
    let mut guard = Guard { p, id: Some(id) };
    let r = rx
        .await
        .map_err(|_| io::Error::other("pacer driver stopped"))?;
    // the driver removed the session when it completed the job
    guard.id = None;
    r
}

/// A paced HTTP/2 stream registered with the pacer: its grants (byte
/// counts, in order) arrive on `grants`; dropping it removes the session.
pub(crate) struct StreamPacing<'a> {
    /// The driver's grants.
    pub(crate) grants: mpsc::UnboundedReceiver<u64>,
    _guard: Guard<'a>,
    _done: oneshot::Receiver<io::Result<()>>,
}

/// Registers a paced HTTP/2 stream of `len` bytes at `rate` with the
/// user-mode pacer (the same sessions, burst, chunk rule and link capacity
/// as a paced HTTP/1.1 response); the stream's task sends each grant's
/// bytes as DATA.
pub(crate) fn register_stream<'a>(
    p: &'a Pacing,
    len: u64,
    rate: &ResponseRate,
) -> io::Result<StreamPacing<'a>> {
    let (tx, grants) = mpsc::unbounded_channel();
    let (done_tx, done) = oneshot::channel();
    let mut g = p.inner.lock();
    let now = Instant::now();
    let params = p.params(&g.pacer, rate, len);
    let id = g
        .pacer
        .register(now, params)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    g.jobs.insert(
        id,
        Job {
            writer: Writer::Stream(tx),
            off: 0,
            progress: now,
            done: done_tx,
        },
    );
    p.wake_for(&g, now);
    Ok(StreamPacing {
        grants,
        _guard: Guard { p, id: Some(id) },
        _done: done,
    })
}

/// One non-blocking `sendfile` run of at most `n` bytes: what the socket
/// took (0 when it took nothing, `EAGAIN`).
fn write_chunk(sock: RawFd, file: RawFd, off: u64, n: u64) -> io::Result<u64> {
    let mut done = 0u64;
    while done < n {
        let mut o = (off + done) as libc::off_t;
        // SAFETY: both descriptors are open while their job is in the
        // pacer's table (see `Job`); `o` is a live local
        let r = unsafe { libc::sendfile(sock, file, &mut o, (n - done) as usize) };
        if r < 0 {
            let e = io::Error::last_os_error();
            return match e.kind() {
                io::ErrorKind::WouldBlock => Ok(done),
                io::ErrorKind::Interrupted => continue,
                _ => Err(e),
            };
        }
        if r == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "file shorter than its size",
            ));
        }
        done += r as u64;
    }
    Ok(done)
}

/// Sets `TCP_MAXSEG` on a listening socket (`pace_mss`): connections it
/// accepts advertise and send segments of at most `mss` bytes (less the
/// TCP options: with timestamps, 137 gives 125 B of payload per segment).
/// Kernel-mode pacing spaces whole segments, so this is its chunk size,
/// without the route MTU the lab otherwise sets.
pub fn set_listener_mss(listener: &impl AsRawFd, mss: u32) -> io::Result<()> {
    let v = mss as libc::c_int;
    // SAFETY: an open socket and a live c_int option value
    let r = unsafe {
        libc::setsockopt(
            listener.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_MAXSEG,
            (&v as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Sets `SO_MAX_PACING_RATE` (bytes/s; `u64::MAX` = no limit). Without an
/// `fq` qdisc (none on this kernel) the limit is enforced by TCP's
/// internal pacing (Linux ≥ 4.13), which spaces the socket's segments
/// (TSO/GSO packets of up to 64 KiB on loopback) with a high-resolution
/// timer.
pub fn set_max_pacing_rate(sock: &TcpStream, rate: u64) -> io::Result<()> {
    // SAFETY: an open socket and a live u64 option value of the right size
    let r = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_MAX_PACING_RATE,
            (&rate as *const u64).cast(),
            std::mem::size_of::<u64>() as libc::socklen_t,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunk_rule_is_five_ms_of_rate_within_bounds() {
        assert_eq!(chunk_rule(1_000_000), 2_500);
        assert_eq!(chunk_rule(50_000), 125); // 400 kbit/s
        assert_eq!(chunk_rule(10_000), 64); // 80 kbit/s: the floor
        assert_eq!(chunk_rule(200_000_000), 64 << 10);
        // half of ±5 % of a 100 ms window wherever not clamped
        for r in [30_000u64, 50_000, 300_000, 1_000_000, 10_000_000] {
            assert!(chunk_rule(r) as f64 <= 0.025 * r as f64 * 0.1 + 1.0);
        }
    }
}
