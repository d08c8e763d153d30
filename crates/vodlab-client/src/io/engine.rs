//! The tokio executor of session drivers: open-loop session arrivals from a
//! [`Schedule`](crate::core::schedule), one task per session running its
//! [`SessionDriver`](crate::core::driver::SessionDriver) over persistent connections, and one aggregator task
//! that owns the run's [`RunMetrics`](crate::out::metrics::RunMetrics) (sessions report in batches over a
//! channel: no lock per request). Every session rule lives in the driver;
//! this module only sleeps, connects, sends and forwards.

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;
use tokio::time::sleep_until;

use crate::config::{Live, RunConfig};
use crate::core::delivery::DeliveryOut;
use crate::core::schedule::Arrivals;
use crate::core::time::{Clock, Time};
use crate::io::transport::{Connector, Opened};
use crate::load::LoadedWorkload;
use crate::out::metrics::{RequestSample, SessionSample};
use crate::out::results::{self, Monitor, Results, RunInfo, StopReason};
use crate::out::shard::{DumpInfo, MetricsDump, ShardRecord, SPLIT_RULE};

mod checkpoint;
mod collect;
mod descriptors;
mod player_session;
mod session;
pub use checkpoint::{Checkpoint, CheckpointConfig, CHECKPOINT_FILE};
use collect::aggregate;
pub use descriptors::{descriptor_need, DescriptorNeed, BASE_DESCRIPTORS};
use player_session::run_player_session;
use session::run_session;

/// Requests a session reports at once.
const BATCH: usize = 64;
/// Delivery entries (rate-window runs, aggregate windows) a session holds
/// before reporting them (16 bytes each).
const DELIVERY_BATCH: usize = 4096;

struct Ctx {
    cfg: RunConfig,
    /// The run's transport (protocol, TLS configuration).
    connector: Connector,
    work: Arc<LoadedWorkload>,
    /// The run's clock: its epoch `t0` is [`Time::ZERO`] of every core.
    clock: Clock,
    live: Arc<Live>,
    refused_streak: AtomicU64,
    /// Last successful connect, µs after `t0`.
    last_connect_ok_us: AtomicU64,
    /// Closed-loop players' shared state (`--player` runs only).
    players: Option<crate::player_run::PlayersShared>,
}

impl Ctx {
    /// Seconds from the run's start to `t` (zero before it).
    fn secs(&self, t: Instant) -> f64 {
        secs(self.clock.time_of(t))
    }
    /// Microseconds from the run's start to `t` (zero before it).
    fn us(&self, t: Instant) -> u64 {
        us(self.clock.time_of(t))
    }
}

/// Seconds from the run's start to `t`: a figure of the results.
fn secs(t: Time) -> f64 {
    t.offset().as_secs_f64()
}

/// Microseconds from the run's start to `t`: a figure of the results.
fn us(t: Time) -> u64 {
    t.offset().as_micros() as u64
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
    /// A new connection was opened (TLS handshake time and resumption).
    Opened(Opened),
    /// QUIC's figures of one of a session's h3 connections, at its end.
    Quic(crate::io::transport::QuicFigures),
    /// The counts of a session's in-process QUIC link, at its end.
    QuicLink(crate::io::transport::quic_link::LinkCounts),
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
    let connector = Connector::new(cfg.addr, &cfg.host, &cfg.transport)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    let ctx = Arc::new(Ctx {
        cfg: cfg.clone(),
        connector,
        work: work.clone(),
        clock: Clock::new(t0),
        live: live.clone(),
        refused_streak: AtomicU64::new(0),
        last_connect_ok_us: AtomicU64::new(0),
        players: cfg
            .player
            .as_ref()
            .map(crate::player_run::PlayersShared::new),
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
    // the shard's sessions, of the one class when --only-class is given
    let owned = |k: usize, i: usize| runs_session(&cfg, &work, k, i);
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
    let checkpointer = cfg
        .checkpoint
        .clone()
        .map(|c| checkpoint::Checkpointer::new(c, t0, started_unix));
    let aggregator = tokio::spawn(aggregate(
        rx,
        ctx.clone(),
        limits.clone(),
        csv,
        late_us,
        checkpointer,
    ));

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
                if (shard.is_some() || ctx.cfg.only_class.is_some())
                    && !runs_session(&ctx.cfg, &ctx.work, k, i)
                {
                    continue;
                }
                let at = ctx.clock.instant_of(Time::from_offset(off));
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
                if ctx2.players.is_some() {
                    sessions.spawn(async move { run_player_session(ctx2, k, i, tx2).await });
                } else {
                    sessions.spawn(async move { run_session(ctx2, k, i, tx2).await });
                }
                // a finished task stays in the set (its whole cell) until
                // joined: reap them as we go, or an hour-long run keeps
                // every ended session's task (about 2 KB each)
                while sessions.try_join_next().is_some() {}
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
        kernel_shaping: cfg.kernel_shaping.clone(),
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
    let mut dump = MetricsDump::new(
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
    if let Some(p) = &ctx.players {
        dump.players = Some(p.lock().dump().map_err(std::io::Error::other)?);
    }
    let mut out = results::assemble(&info, &metrics, &mon);
    out.protocol = cfg.transport.protocol;
    out.players = ctx.players.as_ref().map(|p| p.lock().results());
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
    // samples on the run's own grid (start + n ticks), so that they do not
    // drift across the intervals they are filed in
    let mut ticker = tokio::time::interval_at((ctx.clock.epoch() + tick).into(), tick);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut last_cpu = cpu_seconds_of(None);
    let mut last = Instant::now();
    let mut mon = Monitor::default();
    let mut stopped = false;
    loop {
        let finished = tokio::select! {
            _ = ticker.tick() => false,
            _ = done.changed() => true,
        };
        let now = Instant::now();
        let cpu = cpu_seconds_of(None);
        let pct = 100.0 * (cpu - last_cpu) / now.duration_since(last).as_secs_f64().max(1e-3);
        // the window since the previous sample (or the monitor's start, at
        // the run's start: times before it count as 0)
        let from_s = ctx.secs(last);
        last_cpu = cpu;
        last = now;
        // the most sessions active at once since the last sample, not the
        // number at this instant: sessions shorter than a tick count too
        let active = ctx.live.take_active_peak();
        let to_s = ctx.secs(now);
        let tick_s = tick.as_secs_f64();
        mon.sample(
            from_s,
            to_s,
            tick_s,
            ctx.cfg.interval_s,
            active,
            pct,
            finished,
        );
        if finished {
            return mon;
        }
        let streak = ctx.refused_streak.load(Ordering::Relaxed);
        let ok_at = ctx.clock.epoch()
            + Duration::from_micros(ctx.last_connect_ok_us.load(Ordering::Relaxed));
        let since_ok = now.saturating_duration_since(ok_at);
        if !stopped && streak >= 3 && since_ok >= ctx.cfg.unreachable_after {
            let _ = stop.send(Some(StopReason::ServerUnreachable));
            stopped = true;
        }
    }
}

/// True when this process runs session `i` of script shard `k`: its
/// `--shard` owns it and, with `--only-class`, it is of that class.
fn runs_session(cfg: &RunConfig, work: &LoadedWorkload, k: usize, i: usize) -> bool {
    let shards = work.shards.len();
    cfg.shard.is_none_or(|s| s.owns(k, i, shards))
        && cfg.only_class.as_ref().is_none_or(|c| {
            work.shards[k]
                .sessions
                .get(i)
                .and_then(|s| s.header.class.as_ref())
                == Some(c)
        })
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::Shard;
    use vodlab_workload::script::Session;

    fn session(class: &str) -> Session {
        let mut s = Session::default();
        s.header.class = Some(class.to_string());
        s
    }

    #[test]
    fn only_class_keeps_that_class_within_the_shard() {
        let classes = ["a", "b", "a", "c", "a", "b"];
        let work = LoadedWorkload {
            shards: vec![Shard {
                file: "s0".into(),
                sessions: classes.iter().map(|c| session(c)).collect(),
                streamed: Vec::new(),
            }],
            ..Default::default()
        };
        let addr = "127.0.0.1:1".parse().unwrap();
        let mut cfg = RunConfig::new(
            addr,
            "h".into(),
            "t".into(),
            Arrivals::Constant { rate: 1.0 },
        );
        let picked = |cfg: &RunConfig| -> Vec<usize> {
            (0..classes.len())
                .filter(|&i| runs_session(cfg, &work, 0, i))
                .collect()
        };
        assert_eq!(picked(&cfg).len(), 6);
        cfg.only_class = Some("a".into());
        assert_eq!(picked(&cfg), vec![0, 2, 4]);
        // with --shard 1/2: the odd numbers, then the class
        cfg.shard = Some(crate::out::shard::ShardSpec::parse("1/2").unwrap());
        cfg.only_class = Some("b".into());
        assert_eq!(picked(&cfg), vec![1, 5]);
        cfg.only_class = Some("none".into());
        assert!(picked(&cfg).is_empty());
    }
}

/// What one waiting session or player holds in its task: the future's
/// size is paid by every concurrent session for its whole life.
#[cfg(test)]
mod task_size {
    fn ret<A, B, C, D, R>(_: impl Fn(A, B, C, D) -> R) -> usize {
        std::mem::size_of::<R>()
    }

    #[test]
    fn a_session_task_and_a_player_task_stay_small() {
        // 928 and 2,816 bytes when written; a player's was 12,616 with its
        // fetches inline (they are boxed: on the heap only while they run)
        let session = ret(super::session::run_session);
        let player = ret(super::player_session::run_player_session);
        assert!(session <= 1536, "run_session's future is {session} bytes");
        assert!(
            player <= 4096,
            "run_player_session's future is {player} bytes"
        );
    }
}
