//! The tokio executor of session drivers: open-loop session arrivals from a
//! [`Schedule`](crate::schedule), one task per session running its
//! [`SessionDriver`] over persistent connections, and one aggregator task
//! that owns the run's [`RunMetrics`](crate::metrics::RunMetrics) (sessions report in batches over a
//! channel: no lock per request). Every session rule lives in the driver;
//! this module only sleeps, connects, sends and forwards.

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use std::future::{poll_fn, Future};
use std::task::Poll;

use futures_util::future::BoxFuture;
use futures_util::FutureExt;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;
use tokio::time::sleep_until;
use vodlab_workload::content;
use vodlab_workload::script::Session;

use crate::config::{Live, RunConfig};
use crate::delivery::DeliveryOut;
use crate::driver::{Action, DriverConfig, Event, RequestRecord, SessionDriver, SessionOutcome};
use crate::exchange::{ErrorKind, Failure};
use crate::http::{Connection, Outgoing};
use crate::link::LinkSpec;
use crate::load::LoadedWorkload;
use crate::metrics::{RequestSample, SampleDone, SessionSample};
use crate::results::{self, Monitor, Results, RunInfo, StopReason};
use crate::schedule::Arrivals;
use crate::shard::{DumpInfo, MetricsDump, ShardRecord, SPLIT_RULE};

mod collect;
use collect::{aggregate, session_id};

/// Requests a session reports at once.
const BATCH: usize = 64;
/// Delivery entries (rate-window runs, aggregate windows) a session holds
/// before reporting them (16 bytes each).
const DELIVERY_BATCH: usize = 4096;

struct Ctx {
    cfg: RunConfig,
    work: Arc<LoadedWorkload>,
    t0: Instant,
    live: Arc<Live>,
    refused_streak: AtomicU64,
    /// Last successful connect, µs after `t0`.
    last_connect_ok_us: AtomicU64,
}

impl Ctx {
    fn secs(&self, t: Instant) -> f64 {
        t.saturating_duration_since(self.t0).as_secs_f64()
    }
    fn us(&self, t: Instant) -> u64 {
        t.saturating_duration_since(self.t0).as_micros() as u64
    }
}

/// What sessions and dispatchers tell the aggregator.
enum Report {
    Start {
        t_s: f64,
        lateness_us: u64,
    },
    Requests {
        shard: u32,
        index: u32,
        samples: Vec<RequestSample>,
        delivery: DeliveryOut,
    },
    Session {
        shard: u32,
        index: u32,
        sample: SessionSample,
    },
}

/// Runs the workload until every session ended, `cancel` turns true, the
/// duration cap passes or the server stops accepting connections.
pub async fn run(
    work: Arc<LoadedWorkload>,
    cfg: RunConfig,
    live: Arc<Live>,
    cancel: watch::Receiver<bool>,
) -> std::io::Result<Results> {
    Ok(run_parts(work, cfg, live, cancel).await?.0)
}

/// [`run`], also returning the run's exact state for `vodlab merge`
/// (`metrics.json`). With [`RunConfig::shard`] only that shard's sessions
/// run; with [`RunConfig::start_at`] offset 0 of every schedule is that
/// wall-clock time.
pub async fn run_parts(
    work: Arc<LoadedWorkload>,
    cfg: RunConfig,
    live: Arc<Live>,
    mut cancel: watch::Receiver<bool>,
) -> std::io::Result<(Results, MetricsDump)> {
    let csv = match &cfg.requests_csv {
        Some(p) => {
            let mut f = std::io::BufWriter::new(std::fs::File::create(p)?);
            writeln!(
                f,
                "session,shard,class,request,path,range,measured,scheduled_s,sent_s,ttfb_ms,response_ms,bytes,status,playback_ms,download_ms,error"
            )?;
            Some(f)
        }
        None => None,
    };
    let unix = |t: SystemTime| {
        t.duration_since(UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64())
    };
    let (now_i, now_w) = (Instant::now(), SystemTime::now());
    let (t0, started_unix) = match cfg.start_at {
        Some(at) => {
            let t0 = match at.duration_since(now_w) {
                Ok(ahead) => now_i + ahead,
                // a start just passed (the caller refuses older ones): the
                // first sessions start late, and say so
                Err(e) => now_i.checked_sub(e.duration()).unwrap_or(now_i),
            };
            (t0, unix(at))
        }
        None => {
            let lead = Duration::from_millis(20);
            (now_i + lead, unix(now_w) + lead.as_secs_f64())
        }
    };
    // when the schedule really began: the wall clock read on waking at t0
    let began = tokio::spawn(async move {
        sleep_until(t0.into()).await;
        unix(SystemTime::now())
    });
    let ctx = Arc::new(Ctx {
        cfg: cfg.clone(),
        work: work.clone(),
        t0,
        live: live.clone(),
        refused_streak: AtomicU64::new(0),
        last_connect_ok_us: AtomicU64::new(0),
    });
    let shards = work.shards.len();
    let limits: Vec<usize> = (0..shards)
        .map(|k| {
            let n = work.shards[k].sessions.len();
            match cfg.max_sessions {
                // spread the cap over shards like the sessions themselves
                Some(m) => (m / shards + usize::from(k < m % shards)).min(n),
                None => n,
            }
        })
        .collect();
    let owned = |k: usize, i: usize| cfg.shard.is_none_or(|s| s.owns(k, i, shards));
    // the sessions this process starts (all of them unless it runs a shard)
    let mine: Vec<usize> = limits
        .iter()
        .enumerate()
        .map(|(k, &n)| (0..n).filter(|&i| owned(k, i)).count())
        .collect();
    let total: usize = mine.iter().sum();
    live.total.store(total as u64, Ordering::Relaxed);

    let (tx, rx) = mpsc::unbounded_channel::<Report>();
    let late_us = cfg.late_threshold.as_micros() as u64;
    let aggregator = tokio::spawn(aggregate(rx, ctx.clone(), limits.clone(), csv, late_us));

    // the monitor samples CPU and active sessions, and detects a dead server
    let (stop_tx, stop_rx) = watch::channel(None::<StopReason>);
    let (mon_done_tx, mon_done_rx) = watch::channel(false);
    let monitor = tokio::spawn(monitor(ctx.clone(), stop_tx.clone(), mon_done_rx));

    let mut dispatchers = JoinSet::new();
    for (k, &limit) in limits.iter().enumerate() {
        if mine[k] == 0 {
            continue;
        }
        let shard = cfg.shard;
        let ctx = ctx.clone();
        let arrivals = per_shard(&cfg.arrivals, shards);
        let mut stop = stop_rx.clone();
        let tx = tx.clone();
        dispatchers.spawn(async move {
            let mut sessions = JoinSet::new();
            let offsets = arrivals.offsets(ctx.cfg.seed.wrapping_add(k as u64 * 0x9e37_79b9));
            for (i, off) in offsets.take(limit).enumerate() {
                if shard.is_some_and(|s| !s.owns(k, i, shards)) {
                    continue;
                }
                let at = ctx.t0 + off;
                tokio::select! {
                    _ = sleep_until(at.into()) => {}
                    _ = stop.changed() => break,
                }
                if stop.borrow().is_some() {
                    break;
                }
                let now = Instant::now();
                let lateness = now.saturating_duration_since(at);
                let _ = tx.send(Report::Start {
                    t_s: ctx.secs(now),
                    lateness_us: lateness.as_micros() as u64,
                });
                let ctx2 = ctx.clone();
                let tx2 = tx.clone();
                sessions.spawn(async move { run_session(ctx2, k, i, tx2).await });
            }
            // wait for this shard's sessions, or abort them on stop
            if stop.borrow().is_some() {
                sessions.abort_all();
            }
            loop {
                tokio::select! {
                    r = sessions.join_next() => if r.is_none() { break },
                    _ = stop.changed() => {
                        sessions.abort_all();
                        while sessions.join_next().await.is_some() {}
                        break;
                    }
                }
            }
        });
    }
    drop(tx);

    let deadline = cfg.max_duration.map(|d| t0 + d);
    let mut stop_main = stop_rx.clone();
    let reason = loop {
        tokio::select! {
            r = dispatchers.join_next() => {
                if r.is_none() {
                    break StopReason::Finished;
                }
            }
            Ok(()) = cancel.changed() => {
                if *cancel.borrow() {
                    break StopReason::Interrupted;
                }
            }
            _ = async { match deadline { Some(d) => sleep_until(d.into()).await, None => std::future::pending().await } } => {
                break StopReason::Duration;
            }
            Ok(()) = stop_main.changed() => {
                let r = *stop_main.borrow();
                if let Some(r) = r { break r; }
            }
        }
    };
    // every session ran, but the last connections were all refused: the
    // server died (or never answered), and the last sessions failed for that
    let reason =
        if reason == StopReason::Finished && ctx.refused_streak.load(Ordering::Relaxed) >= 3 {
            StopReason::ServerUnreachable
        } else {
            reason
        };
    if reason != StopReason::Finished {
        let _ = stop_tx.send(Some(reason));
        while dispatchers.join_next().await.is_some() {}
    }
    live.done.store(true, Ordering::Relaxed);
    let end = Instant::now();
    let _ = mon_done_tx.send(true);
    let mon = monitor.await.unwrap_or_default();
    // every sender is gone once the dispatchers and their sessions are: the
    // aggregator drains what they reported and returns the run's metrics
    let (metrics, csv_err) = aggregator
        .await
        .map_err(|e| std::io::Error::other(format!("aggregator: {e}")))?;
    if let Some(e) = csv_err {
        return Err(e);
    }
    let info = RunInfo {
        target: cfg.target.clone(),
        workload: work.name.clone(),
        arrivals: cfg.arrivals.clone(),
        seed: cfg.seed,
        shaping: cfg.shaping,
        pacing: cfg.pacing,
        interval_s: cfg.interval_s,
        late_threshold: cfg.late_threshold,
        scheduled_sessions: live.total.load(Ordering::Relaxed),
        started_sessions: live.started.load(Ordering::Relaxed),
        started_unix,
        duration_s: ctx.secs(end),
        stopped_by: reason,
        playback_buffer_s: cfg.playback_buffer.as_secs_f64(),
        pace_target: cfg.pace_target,
    };
    let actual_start_unix_s = if began.is_finished() {
        began.await.unwrap_or(started_unix)
    } else {
        // stopped before the start time came
        began.abort();
        started_unix
    };
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let dump = MetricsDump::new(
        &DumpInfo {
            shard: cfg.shard,
            origin_unix_s: started_unix,
            actual_start_unix_s,
        },
        &info,
        &metrics,
        &mon,
        cpus,
        results::peak_rss_mb(),
    )
    .map_err(std::io::Error::other)?;
    let mut out = results::assemble(&info, &metrics, &mon);
    out.shard = cfg.shard.map(|s| ShardRecord {
        index: s.index,
        count: s.count,
        rule: SPLIT_RULE.into(),
        origin_unix_s: started_unix,
        actual_start_unix_s,
    });
    Ok((out, dump))
}

async fn monitor(
    ctx: Arc<Ctx>,
    stop: watch::Sender<Option<StopReason>>,
    mut done: watch::Receiver<bool>,
) -> Monitor {
    let tick = Duration::from_secs_f64(ctx.cfg.interval_s.clamp(0.1, 1.0));
    let mut last_cpu = cpu_seconds_of(None);
    let mut last = Instant::now();
    let mut mon = Monitor::default();
    let mut stopped = false;
    loop {
        tokio::select! {
            _ = tokio::time::sleep(tick) => {}
            _ = done.changed() => return mon,
        }
        let now = Instant::now();
        let cpu = cpu_seconds_of(None);
        let pct = 100.0 * (cpu - last_cpu) / now.duration_since(last).as_secs_f64().max(1e-3);
        last_cpu = cpu;
        last = now;
        let active = ctx.live.active.load(Ordering::Relaxed);
        mon.sample(ctx.secs(now), ctx.cfg.interval_s, active, pct);
        let streak = ctx.refused_streak.load(Ordering::Relaxed);
        let ok_at = ctx.t0 + Duration::from_micros(ctx.last_connect_ok_us.load(Ordering::Relaxed));
        let since_ok = now.saturating_duration_since(ok_at);
        if !stopped && streak >= 3 && since_ok >= ctx.cfg.unreachable_after {
            let _ = stop.send(Some(StopReason::ServerUnreachable));
            stopped = true;
        }
    }
}

/// A session's reports, sent in batches; what is left is sent when the
/// session ends or is aborted (dropped), so an interrupted run keeps it.
struct Batch {
    tx: mpsc::UnboundedSender<Report>,
    shard: u32,
    index: u32,
    samples: Vec<RequestSample>,
    delivery: DeliveryOut,
}

impl Batch {
    fn push(&mut self, s: RequestSample) {
        self.samples.push(s);
        if self.samples.len() >= BATCH {
            self.flush();
        }
    }

    /// Takes the driver's delivery figures, reporting them when many.
    fn take_delivery(&mut self, d: &mut SessionDriver<'_>) {
        if d.delivery_pending() > 0 {
            d.take_delivery(&mut self.delivery);
            if self.delivery.len() >= DELIVERY_BATCH {
                self.flush();
            }
        }
    }

    fn flush(&mut self) {
        if !self.samples.is_empty() || !self.delivery.is_empty() {
            let samples = std::mem::take(&mut self.samples);
            let delivery = std::mem::take(&mut self.delivery);
            let _ = self.tx.send(Report::Requests {
                shard: self.shard,
                index: self.index,
                samples,
                delivery,
            });
        }
    }
}

impl Drop for Batch {
    fn drop(&mut self) {
        self.flush();
    }
}

type Step<'a> = BoxFuture<'a, (usize, Option<Connection>, Event)>;

/// The session's driver, shared by its loop and the reads of its exchanges
/// (one task: the lock is never contended).
type Shared<'s> = Mutex<SessionDriver<'s>>;

fn lock<'a, 's>(d: &'a Shared<'s>) -> MutexGuard<'a, SessionDriver<'s>> {
    d.lock().unwrap_or_else(|e| e.into_inner())
}

/// Where an exchange reports delivery figures that pile up during one long
/// response (the session loop only wakes when it completes).
struct Reporter<'a> {
    tx: &'a mpsc::UnboundedSender<Report>,
    shard: u32,
    index: u32,
}

async fn run_session(ctx: Arc<Ctx>, shard: usize, index: usize, tx: mpsc::UnboundedSender<Report>) {
    let work = ctx.work.clone();
    let session: &Session = &work.shards[shard].sessions[index];
    let link = if ctx.cfg.shaping {
        let class = session.header.class.as_deref().unwrap_or("default");
        work.classes.get(class).copied().unwrap_or_default()
    } else {
        LinkSpec::default()
    };
    let id = session_id(session, shard, index);
    let start = Instant::now();
    ctx.live.started.fetch_add(1, Ordering::Relaxed);
    ctx.live.active.fetch_add(1, Ordering::Relaxed);
    let mut batch = Batch {
        tx: tx.clone(),
        shard: shard as u32,
        index: index as u32,
        samples: Vec::new(),
        delivery: DeliveryOut::default(),
    };
    let reporter = Reporter {
        tx: &tx,
        shard: shard as u32,
        index: index as u32,
    };
    let dcfg = DriverConfig {
        pacing: ctx.cfg.pacing,
        late_pacing: ctx.cfg.late_pacing,
        link_delay: link.delay,
        playback_buffer: ctx.cfg.playback_buffer,
        pace_target: ctx.cfg.pace_target,
        epoch: Some(ctx.t0),
        ..DriverConfig::default()
    };
    let shared: Shared<'_> = Mutex::new(SessionDriver::new(
        session,
        Some(&work.file_sizes),
        dcfg,
        start,
    ));
    let n = lock(&shared).connections();
    let mut conns: Vec<Option<Connection>> = (0..n).map(|_| None).collect();
    // what is in flight on each connection; dropping it abandons the exchange
    // (a session has few connections: polling each slot on a wake is cheaper
    // than a FuturesUnordered with its per-future task and abort handle)
    let mut steps: Vec<Option<Step<'_>>> = (0..n).map(|_| None).collect();
    let mut timer = Box::pin(tokio::time::sleep_until(start.into()));
    let mut armed: Option<Instant> = None;
    loop {
        let now = Instant::now();
        // the guard lives in this block only: never across an await
        let wake = {
            let mut driver = lock(&shared);
            while let Some(action) = driver.poll_action(now) {
                match action {
                    Action::Connect { conn } => {
                        conns[conn] = None;
                        let ctx = &ctx;
                        let link = &link;
                        let fut = async move {
                            match Connection::connect(ctx.cfg.addr, &ctx.cfg.host, link).await {
                                Ok(c) => {
                                    ctx.refused_streak.store(0, Ordering::Relaxed);
                                    ctx.last_connect_ok_us
                                        .store(ctx.us(Instant::now()), Ordering::Relaxed);
                                    (conn, Some(c), Event::Connected { conn })
                                }
                                Err(failure) => {
                                    if failure.kind == ErrorKind::Refused {
                                        ctx.refused_streak.fetch_add(1, Ordering::Relaxed);
                                    }
                                    (conn, None, Event::ConnectFailed { conn, failure })
                                }
                            }
                        }
                        .boxed();
                        steps[conn] = Some(fut);
                    }
                    Action::Send { conn, request } => {
                        let Some(c) = conns[conn].take() else {
                            // the driver only sends on connections it saw open
                            driver.handle(
                                now,
                                Event::Failed {
                                    conn,
                                    failure: Failure::new(ErrorKind::Other, "no open connection"),
                                },
                            );
                            continue;
                        };
                        let (shared, reporter) = (&shared, &reporter);
                        let fut = exchange(&ctx, c, conn, id, session, request, shared, reporter);
                        steps[conn] = Some(fut.boxed());
                    }
                    Action::Close { conn } => {
                        steps[conn] = None;
                        conns[conn] = None;
                    }
                    Action::Record(r) => {
                        if let Ok(d) = &r.result {
                            ctx.live.requests.fetch_add(1, Ordering::Relaxed);
                            ctx.live.bytes.fetch_add(d.bytes, Ordering::Relaxed);
                        }
                        batch.push(sample(&ctx, &r));
                    }
                    Action::Finished(o) => {
                        drop(steps);
                        batch.take_delivery(&mut driver);
                        batch.flush();
                        finish(&ctx, &batch, o);
                        return;
                    }
                }
            }
            batch.take_delivery(&mut driver);
            driver.poll_timeout()
        };
        let busy = steps.iter().any(Option::is_some);
        if !busy && wake.is_none() {
            // cannot happen with a correct driver; never spin
            debug_assert!(false, "session driver stalled");
            ctx.live.active.fetch_sub(1, Ordering::Relaxed);
            return;
        }
        // one timer per session, moved only when the driver's wake-up changes
        if let Some(t) = wake {
            if armed != Some(t) {
                timer.as_mut().reset(t.into());
                armed = Some(t);
            }
        }
        let done = poll_fn(|cx| {
            for slot in steps.iter_mut() {
                if let Some(f) = slot.as_mut() {
                    if let Poll::Ready(out) = f.as_mut().poll(cx) {
                        *slot = None;
                        return Poll::Ready(Some(out));
                    }
                }
            }
            if wake.is_some() && timer.as_mut().poll(cx).is_ready() {
                armed = None;
                return Poll::Ready(None);
            }
            Poll::Pending
        })
        .await;
        if let Some((conn, c, ev)) = done {
            conns[conn] = c;
            lock(&shared).handle(Instant::now(), ev);
        }
    }
}

/// Sends request `j` on `c` and reads its answer, checking a sample of body
/// bytes against the file set's content and telling the driver when body
/// bytes arrive.
#[allow(clippy::too_many_arguments)]
async fn exchange(
    ctx: &Ctx,
    mut c: Connection,
    conn: usize,
    session_id: u64,
    session: &Session,
    j: usize,
    shared: &Shared<'_>,
    reporter: &Reporter<'_>,
) -> (usize, Option<Connection>, Event) {
    let r = &session.requests[j];
    let range = r.range.map(|g| g.header_value());
    let out = Outgoing {
        method: r.method.as_str(),
        path: &r.path,
        range: range.as_deref(),
        headers: &r.headers,
        body: r.body.as_deref(),
        session: session_id,
        http10: r.http10,
    };
    let checked = match (
        ctx.work.content_seed,
        sampled(ctx.cfg.check_bytes, session_id, &r.path, r.range),
    ) {
        (Some(seed), true) => Some((
            seed,
            content::file_key(&r.path),
            r.range.map_or(0, |g| g.start),
        )),
        _ => None,
    };
    let mut bad_byte: Option<u64> = None;
    let mut sink = |at: u64, data: &[u8]| {
        if let (Some((seed, key, base)), None) = (checked, bad_byte) {
            if let Err(off) = content::check(seed, key, base + at, data) {
                bad_byte = Some(off);
            }
        }
    };
    // per read: one uncontended lock and the driver's O(1) meters
    let mut arrived = |at: Instant, bytes: u64| {
        let mut d = lock(shared);
        d.handle(at, Event::Body { conn, bytes });
        if d.delivery_pending() >= DELIVERY_BATCH {
            let mut delivery = DeliveryOut::default();
            d.take_delivery(&mut delivery);
            let _ = reporter.tx.send(Report::Requests {
                shard: reporter.shard,
                index: reporter.index,
                samples: Vec::new(),
                delivery,
            });
        }
    };
    match c.exchange_timed(&out, &mut sink, &mut arrived).await {
        Ok(_) if bad_byte.is_some() => {
            let off = bad_byte.unwrap_or(0);
            let failure = Failure::new(
                ErrorKind::ContentMismatch,
                format!("wrong content at byte {off} of {}", r.path),
            );
            (conn, None, Event::Failed { conn, failure })
        }
        Ok(response) => {
            let keep = response.keep_alive.then_some(c);
            (conn, keep, Event::Response { conn, response })
        }
        Err(failure) => (conn, None, Event::Failed { conn, failure }),
    }
}

fn sample(ctx: &Ctx, r: &RequestRecord) -> RequestSample {
    RequestSample {
        request: r.request as u32,
        scheduled_s: ctx.secs(r.scheduled),
        sent_s: ctx.secs(r.issued),
        send_lateness_us: r.send_lateness.map(|d| d.as_micros() as u64),
        outcome: match &r.result {
            Ok(d) => Ok(SampleDone {
                done_us: ctx.us(d.done),
                response_us: d.done.saturating_duration_since(r.issued).as_micros() as u64,
                ttfb_us: d.ttfb.as_micros() as u64,
                from_schedule_us: d.done.saturating_duration_since(r.scheduled).as_micros() as u64,
                bytes: d.bytes,
                status: d.status,
                playback: d.playback,
            }),
            Err(f) => Err(f.kind),
        },
    }
}

fn finish(ctx: &Ctx, batch: &Batch, o: SessionOutcome) {
    ctx.live.active.fetch_sub(1, Ordering::Relaxed);
    if o.failure.is_some() {
        ctx.live.failed.fetch_add(1, Ordering::Relaxed);
    } else {
        ctx.live.completed.fetch_add(1, Ordering::Relaxed);
    }
    let _ = batch.tx.send(Report::Session {
        shard: batch.shard,
        index: batch.index,
        sample: SessionSample {
            start_s: ctx.secs(o.start),
            end_s: ctx.secs(o.end),
            failure: o.failure.as_ref().map(|(_, f)| f.kind),
            skipped: o.skipped as u64,
            viewer: o.viewer,
            reconnects: u64::from(o.reconnects),
            server_closes: u64::from(o.server_closes),
        },
    });
}

/// Scales a schedule so `shards` independent copies add up to it.
fn per_shard(a: &Arrivals, shards: usize) -> Arrivals {
    let k = shards.max(1) as f64;
    match a {
        Arrivals::Poisson { rate } => Arrivals::Poisson { rate: rate / k },
        Arrivals::Constant { rate } => Arrivals::Constant { rate: rate / k },
        Arrivals::Steps { steps } => Arrivals::Steps {
            steps: steps.iter().map(|(d, r)| (*d, r / k)).collect(),
        },
        Arrivals::Ramp { from, to, over_s } => Arrivals::Ramp {
            from: from / k,
            to: to / k,
            over_s: *over_s,
        },
    }
}

/// CPU time (user + system) of a process in seconds, from /proc (0 when
/// unreadable); `None` is this process.
pub fn cpu_seconds_of(pid: Option<u32>) -> f64 {
    let path = pid.map_or_else(
        || "/proc/self/stat".to_string(),
        |p| format!("/proc/{p}/stat"),
    );
    let Ok(stat) = std::fs::read_to_string(path) else {
        return 0.0;
    };
    // fields after the parenthesised command name; utime and stime are 14 and 15
    let rest = stat.rsplit_once(')').map_or("", |x| x.1);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // SAFETY: sysconf has no preconditions
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    (ticks(11) + ticks(12)) / hz
}

/// Whether this request's bytes are checked: a deterministic sample of
/// `fraction` of (session, path, range) keys.
fn sampled(
    fraction: f64,
    session: u64,
    path: &str,
    range: Option<vodlab_workload::script::ByteRange>,
) -> bool {
    if fraction <= 0.0 {
        return false;
    }
    if fraction >= 1.0 {
        return true;
    }
    let h = content::file_key(path)
        ^ session.wrapping_mul(0x9e37_79b9_7f4a_7c15)
        ^ range.map_or(0, |g| g.start).rotate_left(29);
    let h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9) ^ (h >> 31);
    (h % 1_000_000) < (fraction * 1_000_000.0) as u64
}
