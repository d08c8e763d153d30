//! The load engine: open-loop session arrivals from a [`Schedule`](crate::schedule),
//! one task per session over persistent connections, link emulation, the
//! viewer model and measurement. The schedule, the pacing rule, the viewer
//! and the link bucket are pure; this module only sleeps, connects and counts.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures_util::future::join_all;
use hdrhistogram::Histogram;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::{sleep_until, timeout_at};
use vodlab_workload::content;
use vodlab_workload::script::{Request, Session, Wait};

use crate::http::{Connection, ErrorKind, Failure, Outgoing};
use crate::link::LinkSpec;
use crate::load::{playout, LoadedWorkload};
use crate::metrics::{histogram, record, Bins, ClassMetrics, Errors};
use crate::results::{self, Results, StopReason};
use crate::schedule::Arrivals;
use crate::viewer;

/// Run settings.
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// Server address.
    pub addr: SocketAddr,
    /// Host header value.
    pub host: String,
    /// The URL as given (for results).
    pub target: String,
    /// Aggregate session arrivals (split evenly over shards).
    pub arrivals: Arrivals,
    /// Seed of the arrival schedules.
    pub seed: u64,
    /// Width of the per-interval series, seconds.
    pub interval_s: f64,
    /// A session start or request send later than this is "late".
    pub late_threshold: Duration,
    /// Emulate client access links (rate, delay) from the workload's classes.
    pub shaping: bool,
    /// Apply pacing and think times (off: every request as soon as possible).
    pub pacing: bool,
    /// Stop after starting this many sessions.
    pub max_sessions: Option<usize>,
    /// Hard stop after this long.
    pub max_duration: Option<Duration>,
    /// Write one CSV row per request here.
    pub requests_csv: Option<PathBuf>,
    /// Stop when connections are refused for this long with no success.
    pub unreachable_after: Duration,
    /// Fraction of requests whose body bytes are checked against the file
    /// set's content (needs a `vodlab gen` workload and a file set written by
    /// `vodlab fileset create`); 0 disables.
    pub check_bytes: f64,
}

impl RunConfig {
    /// Defaults for a target and a rate.
    pub fn new(addr: SocketAddr, host: String, target: String, arrivals: Arrivals) -> Self {
        Self {
            addr,
            host,
            target,
            arrivals,
            seed: 1,
            interval_s: 5.0,
            late_threshold: Duration::from_millis(10),
            shaping: true,
            pacing: true,
            max_sessions: None,
            max_duration: None,
            requests_csv: None,
            unreachable_after: Duration::from_secs(3),
            check_bytes: 0.0,
        }
    }
}

/// Live counters for a progress display (read without locks).
#[derive(Debug, Default)]
pub struct Live {
    /// Sessions started.
    pub started: AtomicU64,
    /// Sessions running.
    pub active: AtomicU64,
    /// Sessions ended without failure.
    pub completed: AtomicU64,
    /// Sessions failed.
    pub failed: AtomicU64,
    /// Requests completed.
    pub requests: AtomicU64,
    /// Body bytes of completed requests.
    pub bytes: AtomicU64,
    /// Sessions scheduled in total.
    pub total: AtomicU64,
    /// Set when the run is over.
    pub done: AtomicBool,
}

/// Everything aggregated under one lock (held for microseconds per request).
pub(crate) struct Shared {
    pub classes: std::collections::BTreeMap<String, ClassMetrics>,
    pub bins: Bins,
    pub active_peak: Vec<u64>,
    pub cpu_pct: Vec<f64>,
    pub errors: Errors,
    pub start_lateness: Histogram<u64>,
    pub send_lateness: Histogram<u64>,
    pub late_starts: u64,
    pub late_sends: u64,
    pub reconnects: u64,
    pub server_closes: u64,
    pub skipped_requests: u64,
    pub measured_from: Option<f64>,
    pub measured_to: Option<f64>,
    pub peak_active: u64,
}

struct Ctx {
    cfg: RunConfig,
    work: Arc<LoadedWorkload>,
    t0: Instant,
    shared: Mutex<Shared>,
    live: Arc<Live>,
    csv: Option<Mutex<std::io::BufWriter<std::fs::File>>>,
    refused_streak: AtomicU64,
    last_connect_ok: Mutex<Instant>,
}

impl Ctx {
    fn secs(&self, t: Instant) -> f64 {
        t.saturating_duration_since(self.t0).as_secs_f64()
    }
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

/// When the head of a burst may be sent: its wait applied to the previous
/// burst's start and completion (pure; `pacing = false` ignores waits).
pub fn send_target(
    wait: Wait,
    prev_start: Option<Instant>,
    prev_done: Instant,
    pacing: bool,
) -> Instant {
    if !pacing {
        return prev_done;
    }
    match wait {
        Wait::None => prev_done,
        Wait::Pacing(p) => match prev_start {
            Some(s) => (s + Duration::from_secs_f64(p)).max(prev_done),
            None => prev_done + Duration::from_secs_f64(p),
        },
        Wait::Think(t) => prev_done + Duration::from_secs_f64(t),
    }
}

/// Runs the workload until every session ended, `cancel` turns true, the
/// duration cap passes or the server stops accepting connections.
pub async fn run(
    work: Arc<LoadedWorkload>,
    cfg: RunConfig,
    live: Arc<Live>,
    mut cancel: watch::Receiver<bool>,
) -> std::io::Result<Results> {
    let csv = match &cfg.requests_csv {
        Some(p) => {
            let mut f = std::io::BufWriter::new(std::fs::File::create(p)?);
            writeln!(
                f,
                "session,shard,class,request,path,range,measured,scheduled_s,sent_s,ttfb_ms,response_ms,bytes,status,error"
            )?;
            Some(Mutex::new(f))
        }
        None => None,
    };
    let started_unix = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    let t0 = Instant::now() + Duration::from_millis(20);
    let ctx = Arc::new(Ctx {
        shared: Mutex::new(Shared {
            classes: Default::default(),
            bins: Bins::new(0.1),
            active_peak: Vec::new(),
            cpu_pct: Vec::new(),
            errors: Errors::default(),
            start_lateness: histogram(),
            send_lateness: histogram(),
            late_starts: 0,
            late_sends: 0,
            reconnects: 0,
            server_closes: 0,
            skipped_requests: 0,
            measured_from: None,
            measured_to: None,
            peak_active: 0,
        }),
        cfg: cfg.clone(),
        work: work.clone(),
        t0,
        live: live.clone(),
        csv,
        refused_streak: AtomicU64::new(0),
        last_connect_ok: Mutex::new(t0),
    });
    let total: usize = match cfg.max_sessions {
        Some(m) => m.min(work.session_count()),
        None => work.session_count(),
    };
    live.total.store(total as u64, Ordering::Relaxed);

    // the monitor samples CPU and active sessions, and detects a dead server
    let (stop_tx, stop_rx) = watch::channel(None::<StopReason>);
    let monitor = tokio::spawn(monitor(ctx.clone(), stop_tx.clone()));

    let shards = work.shards.len();
    let limit_per_shard = |k: usize| -> usize {
        let n = work.shards[k].sessions.len();
        match cfg.max_sessions {
            // spread the cap over shards like the sessions themselves
            Some(m) => (m / shards + usize::from(k < m % shards)).min(n),
            None => n,
        }
    };
    let mut dispatchers = JoinSet::new();
    for k in 0..shards {
        let ctx = ctx.clone();
        let arrivals = per_shard(&cfg.arrivals, shards);
        let limit = limit_per_shard(k);
        let mut stop = stop_rx.clone();
        dispatchers.spawn(async move {
            let mut sessions = JoinSet::new();
            let offsets = arrivals.offsets(ctx.cfg.seed.wrapping_add(k as u64 * 0x9e37_79b9));
            for (i, off) in offsets.take(limit).enumerate() {
                let at = ctx.t0 + off;
                tokio::select! {
                    _ = sleep_until(at.into()) => {}
                    _ = stop.changed() => break,
                }
                if stop.borrow().is_some() {
                    break;
                }
                let lateness = Instant::now().saturating_duration_since(at);
                {
                    let mut sh = ctx.shared.lock().expect("lock");
                    record(&mut sh.start_lateness, lateness.as_micros() as u64);
                    if lateness > ctx.cfg.late_threshold {
                        sh.late_starts += 1;
                    }
                }
                let ctx2 = ctx.clone();
                sessions.spawn(async move { run_session(ctx2, k, i, limit).await });
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
    monitor.abort();
    let end = Instant::now();
    if let Some(c) = &ctx.csv {
        c.lock().expect("lock").flush()?;
    }
    let sh = ctx.shared.lock().expect("lock");
    Ok(results::assemble(
        &ctx.cfg,
        &work,
        &sh,
        &live,
        reason,
        started_unix,
        ctx.secs(end),
    ))
}

async fn monitor(ctx: Arc<Ctx>, stop: watch::Sender<Option<StopReason>>) {
    let tick = Duration::from_secs_f64(ctx.cfg.interval_s.clamp(0.1, 1.0));
    let mut last_cpu = cpu_seconds_of(None);
    let mut last = Instant::now();
    loop {
        tokio::time::sleep(tick).await;
        let now = Instant::now();
        let cpu = cpu_seconds_of(None);
        let pct = 100.0 * (cpu - last_cpu) / now.duration_since(last).as_secs_f64().max(1e-3);
        last_cpu = cpu;
        last = now;
        let active = ctx.live.active.load(Ordering::Relaxed);
        {
            let mut sh = ctx.shared.lock().expect("lock");
            let i = (ctx.secs(now) / ctx.cfg.interval_s) as usize;
            if sh.active_peak.len() <= i {
                sh.active_peak.resize(i + 1, 0);
                sh.cpu_pct.resize(i + 1, 0.0);
            }
            sh.active_peak[i] = sh.active_peak[i].max(active);
            sh.cpu_pct[i] = sh.cpu_pct[i].max(pct);
            sh.peak_active = sh.peak_active.max(active);
        }
        let streak = ctx.refused_streak.load(Ordering::Relaxed);
        let since_ok = now.saturating_duration_since(*ctx.last_connect_ok.lock().expect("lock"));
        if streak >= 3 && since_ok >= ctx.cfg.unreachable_after {
            let _ = stop.send(Some(StopReason::ServerUnreachable));
            return;
        }
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

struct ReqDone {
    sent: Instant,
    done: Instant,
    ttfb: Duration,
    bytes: u64,
    status: u16,
}

#[allow(clippy::too_many_arguments)]
async fn one_request(
    ctx: &Ctx,
    slot: &mut Option<Connection>,
    link: &LinkSpec,
    session_id: u64,
    r: &Request,
    expected_size: Option<u64>,
) -> Result<ReqDone, Failure> {
    let sent = Instant::now();
    if !link.delay.is_zero() {
        tokio::time::sleep(link.delay).await;
    }
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
    let mut attempt = 0;
    let resp = loop {
        if slot.is_none() {
            match Connection::connect(ctx.cfg.addr, &ctx.cfg.host, link).await {
                Ok(c) => {
                    ctx.refused_streak.store(0, Ordering::Relaxed);
                    *ctx.last_connect_ok.lock().expect("lock") = Instant::now();
                    *slot = Some(c);
                }
                Err(f) => {
                    if f.kind == ErrorKind::Refused {
                        ctx.refused_streak.fetch_add(1, Ordering::Relaxed);
                    }
                    return Err(f);
                }
            }
        }
        let conn = slot.as_mut().expect("connected");
        let mut bad_byte: Option<u64> = None;
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
        let mut sink = |at: u64, data: &[u8]| {
            if let (Some((seed, key, base)), None) = (checked, bad_byte) {
                if let Err(off) = content::check(seed, key, base + at, data) {
                    bad_byte = Some(off);
                }
            }
        };
        let result = conn.exchange(&out, &mut sink).await;
        if let (Ok(_), Some(off)) = (&result, bad_byte) {
            return Err(Failure {
                kind: ErrorKind::ContentMismatch,
                retryable: false,
                detail: format!("wrong content at byte {off} of {}", r.path),
            });
        }
        match result {
            Ok(resp) => break resp,
            Err(f) if f.retryable && attempt == 0 => {
                // the server closed an idle persistent connection: reopen and count it
                attempt += 1;
                *slot = None;
                ctx.shared.lock().expect("lock").reconnects += 1;
            }
            Err(f) => {
                *slot = None;
                return Err(f);
            }
        }
    };
    if !resp.keep_alive {
        *slot = None;
        ctx.shared.lock().expect("lock").server_closes += 1;
    }
    if !link.delay.is_zero() {
        tokio::time::sleep(link.delay).await;
    }
    let done = Instant::now();
    check(r, &resp, expected_size)?;
    Ok(ReqDone {
        sent,
        done,
        ttfb: resp.ttfb + 2 * link.delay,
        bytes: resp.body_bytes,
        status: resp.status,
    })
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

/// Status, Content-Range and length checks.
fn check(
    r: &Request,
    resp: &crate::http::Response,
    expected_size: Option<u64>,
) -> Result<(), Failure> {
    let fail = |kind, detail: String| Failure {
        kind,
        retryable: false,
        detail,
    };
    match (r.range, resp.status) {
        (Some(_), 206) | (None, 200) => {}
        (_, s) => {
            return Err(fail(
                ErrorKind::BadStatus,
                format!(
                    "status {s} (expected {})",
                    if r.range.is_some() { 206 } else { 200 }
                ),
            ))
        }
    }
    if let Some(g) = r.range {
        let Some((a, b, total)) = resp.content_range else {
            return Err(fail(
                ErrorKind::ContentMismatch,
                "206 without Content-Range".into(),
            ));
        };
        let want_end = match (g.end, total) {
            (Some(e), Some(t)) => e.min(t.saturating_sub(1)),
            (Some(e), None) => e,
            (None, Some(t)) => t.saturating_sub(1),
            (None, None) => b,
        };
        if a != g.start || b != want_end {
            return Err(fail(
                ErrorKind::ContentMismatch,
                format!("Content-Range {a}-{b} for requested {}", g.header_value()),
            ));
        }
        if resp.body_bytes != b - a + 1 {
            return Err(fail(
                ErrorKind::ContentMismatch,
                format!("{} body bytes for range {a}-{b}", resp.body_bytes),
            ));
        }
    } else if let Some(n) = expected_size {
        if r.method.as_str() == "GET" && resp.body_bytes != n {
            return Err(fail(
                ErrorKind::ContentMismatch,
                format!("{} body bytes, the catalog says {n}", resp.body_bytes),
            ));
        }
    }
    Ok(())
}

async fn run_session(ctx: Arc<Ctx>, shard: usize, index: usize, shard_len: usize) {
    let work = ctx.work.clone();
    let session: &Session = &work.shards[shard].sessions[index];
    let measured = work.is_measured(index, shard_len);
    let class = session
        .header
        .class
        .clone()
        .unwrap_or_else(|| "default".into());
    let link = if ctx.cfg.shaping {
        work.classes.get(&class).copied().unwrap_or_default()
    } else {
        LinkSpec::default()
    };
    let id = session
        .header
        .id
        .unwrap_or(((shard as u64) << 40) | index as u64);
    let start = Instant::now();
    ctx.live.started.fetch_add(1, Ordering::Relaxed);
    ctx.live.active.fetch_add(1, Ordering::Relaxed);
    ctx.shared
        .lock()
        .expect("lock")
        .bins
        .at(ctx.secs(start))
        .started += 1;

    let nconn = session.requests.iter().map(|r| r.conn).max().unwrap_or(0) as usize + 1;
    let mut conns: Vec<Option<Connection>> = (0..nconn).map(|_| None).collect();
    let mut arrivals: Vec<Option<f64>> = vec![None; session.requests.len()];
    let mut prev_start: Option<Instant> = None;
    let mut prev_done = start;
    let mut failure: Option<(usize, Failure)> = None;
    let mut i = 0;
    while i < session.requests.len() {
        let head = &session.requests[i];
        let end = session.requests[i + 1..]
            .iter()
            .position(|r| !r.burst)
            .map_or(session.requests.len(), |p| i + 1 + p);
        let target = send_target(head.wait, prev_start, prev_done, ctx.cfg.pacing);
        sleep_until(target.into()).await;
        let now = Instant::now();
        let late = now.saturating_duration_since(target);
        {
            let mut sh = ctx.shared.lock().expect("lock");
            record(&mut sh.send_lateness, late.as_micros() as u64);
            if late > ctx.cfg.late_threshold {
                sh.late_sends += 1;
            }
        }
        prev_start = Some(now);
        // group the burst's requests by connection; connections run in parallel
        let mut groups: Vec<(usize, Vec<usize>)> = Vec::new();
        for j in i..end {
            let c = session.requests[j].conn as usize;
            match groups.iter_mut().find(|g| g.0 == c) {
                Some(g) => g.1.push(j),
                None => groups.push((c, vec![j])),
            }
        }
        let futs = groups.into_iter().map(|(c, js)| {
            let mut slot = conns[c].take();
            let ctx = &ctx;
            let link = &link;
            async move {
                let mut outs = Vec::new();
                for j in js {
                    let r = &session.requests[j];
                    let timeout = Duration::from_secs_f64(r.timeout_s.unwrap_or(3600.0));
                    let expected = ctx.work.file_sizes.get(&r.path).copied();
                    let deadline = Instant::now() + timeout;
                    let res = match timeout_at(
                        deadline.into(),
                        one_request(ctx, &mut slot, link, id, r, expected),
                    )
                    .await
                    {
                        Ok(r) => r,
                        Err(_) => {
                            slot = None;
                            Err(Failure {
                                kind: ErrorKind::Timeout,
                                retryable: false,
                                detail: format!("not complete within {} s", timeout.as_secs_f64()),
                            })
                        }
                    };
                    let failed = res.is_err();
                    outs.push((j, res));
                    if failed {
                        break;
                    }
                }
                (c, slot, outs)
            }
        });
        for (c, slot, outs) in join_all(futs).await {
            conns[c] = slot;
            for (j, res) in outs {
                let r = &session.requests[j];
                match res {
                    Ok(d) => {
                        arrivals[j] = Some(d.done.duration_since(start).as_secs_f64());
                        prev_done = prev_done.max(d.done);
                        let resp_us = d.done.duration_since(d.sent).as_micros() as u64;
                        let sched_us = d.done.saturating_duration_since(target).as_micros() as u64;
                        {
                            let mut sh = ctx.shared.lock().expect("lock");
                            let b = sh.bins.at(ctx.secs(d.done));
                            b.completed_requests += 1;
                            b.completed_bytes += d.bytes;
                            if measured {
                                let m = class_metrics(&mut sh, &class);
                                record(&mut m.response, resp_us);
                                record(&mut m.ttfb, d.ttfb.as_micros() as u64);
                                record(&mut m.from_schedule, sched_us);
                                m.requests += 1;
                                m.bytes += d.bytes;
                            }
                        }
                        ctx.live.requests.fetch_add(1, Ordering::Relaxed);
                        ctx.live.bytes.fetch_add(d.bytes, Ordering::Relaxed);
                        csv_row(
                            &ctx,
                            id,
                            shard,
                            &class,
                            j,
                            r,
                            measured,
                            target,
                            Some(&d),
                            None,
                        );
                    }
                    Err(f) => {
                        csv_row(
                            &ctx,
                            id,
                            shard,
                            &class,
                            j,
                            r,
                            measured,
                            target,
                            None,
                            Some(&f),
                        );
                        if failure.is_none() {
                            failure = Some((j, f));
                        }
                    }
                }
            }
        }
        if failure.is_some() {
            break;
        }
        i = end;
    }
    drop(conns);
    let end = Instant::now();
    let failed = failure.is_some();
    let done_requests = arrivals.iter().filter(|a| a.is_some()).count();
    let skipped = session.requests.len() - done_requests - usize::from(failed);
    let view = playout(session).map(|(request_s, buffering)| {
        viewer::play(
            &arrivals,
            request_s,
            buffering,
            failed.then(|| end.duration_since(start).as_secs_f64()),
        )
    });
    ctx.live.active.fetch_sub(1, Ordering::Relaxed);
    if failed {
        ctx.live.failed.fetch_add(1, Ordering::Relaxed);
    } else {
        ctx.live.completed.fetch_add(1, Ordering::Relaxed);
    }
    let mut sh = ctx.shared.lock().expect("lock");
    let t_end = ctx.secs(end);
    let b = sh.bins.at(t_end);
    if failed {
        b.failed += 1;
    } else {
        b.completed += 1;
    }
    sh.skipped_requests += skipped as u64;
    if let Some((_, f)) = &failure {
        sh.errors.add(f.kind);
    }
    if measured {
        let t_start = ctx.secs(start);
        sh.measured_from = Some(sh.measured_from.map_or(t_start, |x: f64| x.min(t_start)));
        sh.measured_to = Some(sh.measured_to.map_or(t_end, |x: f64| x.max(t_end)));
        let m = class_metrics(&mut sh, &class);
        m.sessions += 1;
        m.failed += u64::from(failed);
        if let Some(v) = view {
            if let Some(s) = v.startup_s {
                record(&mut m.startup, (s * 1e6) as u64);
            }
            m.stalls += v.stalls as u64;
            m.stalled_sessions += u64::from(v.stalls > 0);
            m.stall_s += v.stall_s;
        }
    }
}

/// The measured-session figures of a class (histograms are shared, never per session).
fn class_metrics<'a>(sh: &'a mut Shared, class: &str) -> &'a mut ClassMetrics {
    if !sh.classes.contains_key(class) {
        sh.classes
            .insert(class.to_string(), ClassMetrics::default());
    }
    sh.classes.get_mut(class).expect("inserted")
}

#[allow(clippy::too_many_arguments)]
fn csv_row(
    ctx: &Ctx,
    id: u64,
    shard: usize,
    class: &str,
    j: usize,
    r: &Request,
    measured: bool,
    target: Instant,
    ok: Option<&ReqDone>,
    err: Option<&Failure>,
) {
    let Some(csv) = &ctx.csv else { return };
    let range = r
        .range
        .map(|g| g.header_value().trim_start_matches("bytes=").to_string())
        .unwrap_or_default();
    let line = match (ok, err) {
        (Some(d), _) => format!(
            "{id},{shard},{class},{j},{},{range},{},{:.6},{:.6},{:.3},{:.3},{},{},\n",
            r.path,
            u8::from(measured),
            ctx.secs(target),
            ctx.secs(d.sent),
            d.ttfb.as_secs_f64() * 1e3,
            d.done.duration_since(d.sent).as_secs_f64() * 1e3,
            d.bytes,
            d.status
        ),
        (None, Some(f)) => format!(
            "{id},{shard},{class},{j},{},{range},{},{:.6},,,,,,{}\n",
            r.path,
            u8::from(measured),
            ctx.secs(target),
            f.kind.name()
        ),
        _ => return,
    };
    let _ = csv.lock().expect("lock").write_all(line.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pacing_counts_from_the_previous_start_but_waits_for_its_end() {
        let t = Instant::now();
        let s = Some(t);
        let d = Duration::from_secs;
        // response took 2 s: next request 10 s after the previous start
        assert_eq!(
            send_target(Wait::Pacing(10.0), s, t + d(2), true),
            t + d(10)
        );
        // response took 12 s: next request as soon as it completed
        assert_eq!(
            send_target(Wait::Pacing(10.0), s, t + d(12), true),
            t + d(12)
        );
        // think counts from completion
        assert_eq!(send_target(Wait::Think(10.0), s, t + d(2), true), t + d(12));
        assert_eq!(send_target(Wait::None, s, t + d(2), true), t + d(2));
        // pacing off
        assert_eq!(
            send_target(Wait::Pacing(10.0), s, t + d(2), false),
            t + d(2)
        );
    }
}
