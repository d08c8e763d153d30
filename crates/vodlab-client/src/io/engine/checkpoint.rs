//! Periodic checkpoints of a run: what it has measured so far, written
//! every few seconds as one file (`checkpoint.json`: the results and the
//! exact `metrics.json` state) replaced atomically and durably
//! ([`crate::out::atomic::write`]: a kill or a full disk leaves the last
//! checkpoint whole, never a part of the next). A process that is
//! killed mid-run (SIGKILL, the OOM killer, a lost pod) cannot write its
//! results; `vodlab merge` then takes its last checkpoint and marks the
//! merged run incomplete, naming the shard (docs/scale-out.md).

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::Ctx;
use crate::out::metrics::RunMetrics;
use crate::out::results::{self, Monitor, Results, RunInfo, StopReason};
use crate::out::shard::{DumpInfo, MetricsDump, ShardRecord, SPLIT_RULE};

/// File name of a run's checkpoint inside its output directory.
pub const CHECKPOINT_FILE: &str = "checkpoint.json";

/// Where and how often a run writes its checkpoint.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckpointConfig {
    /// The run's output directory (the file is [`CHECKPOINT_FILE`] in it).
    pub dir: PathBuf,
    /// Time between checkpoints.
    pub every: Duration,
}

/// The content of `checkpoint.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Checkpoint {
    /// `"vodlab-checkpoint"`.
    pub format: String,
    /// Format version (1).
    pub version: u32,
    /// The run's results so far (`stopped_by` is `checkpoint`: it was
    /// still running).
    pub results: Results,
    /// The exact state `vodlab merge` combines, as in `metrics.json`.
    pub metrics: MetricsDump,
}

impl Checkpoint {
    /// Reads a checkpoint file, checking its format.
    pub fn read(path: &Path) -> Result<Self, String> {
        let text = std::fs::read(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
        let c: Checkpoint = serde_json::from_slice(&text)
            .map_err(|e| format!("parsing {}: {e}", path.display()))?;
        if c.format != "vodlab-checkpoint" || c.version != 1 {
            return Err(format!(
                "{}: not a vodlab-checkpoint version 1 file",
                path.display()
            ));
        }
        Ok(c)
    }
}

/// Writes the checkpoints of one run (owned by the aggregator task). The
/// aggregator serializes a checkpoint; the file is written and synced on
/// the blocking pool, so a slow disk (an fsync behind other writers took
/// seconds here) never holds a runtime worker: while one write is in
/// flight, a checkpoint that falls due is skipped.
pub(super) struct Checkpointer {
    cfg: CheckpointConfig,
    origin_unix_s: f64,
    next: Instant,
    failed: bool,
    /// The write in flight, if any; its outcome once it ended.
    in_flight: Option<tokio::task::JoinHandle<Result<(), String>>>,
}

impl Checkpointer {
    pub(super) fn new(cfg: CheckpointConfig, t0: Instant, origin_unix_s: f64) -> Self {
        let next = t0 + cfg.every;
        Self {
            cfg,
            origin_unix_s,
            next,
            failed: false,
            in_flight: None,
        }
    }

    /// The outcome of the write in flight when it has ended (reported as
    /// [`Self::write`] says); false while it is still writing.
    fn settle(&mut self) -> bool {
        let Some(h) = self.in_flight.as_mut() else {
            return true;
        };
        if !h.is_finished() {
            return false;
        }
        let h = self.in_flight.take().expect("in flight");
        // finished: polling it once gives its output
        let out = futures_util::FutureExt::now_or_never(h)
            .map(|r| r.unwrap_or_else(|e| Err(e.to_string())))
            .unwrap_or(Ok(()));
        self.report(out);
        true
    }

    fn report(&mut self, out: Result<(), String>) {
        match out {
            Err(e) => {
                if !self.failed {
                    eprintln!(
                        "vodlab run: could not write a checkpoint: {e}; the run goes on, the last checkpoint written stays"
                    );
                }
                self.failed = true;
            }
            Ok(()) if self.failed => {
                eprintln!("vodlab run: checkpoints are written again");
                self.failed = false;
            }
            Ok(()) => {}
        }
    }

    /// Waits for the write in flight, so no checkpoint lands after the
    /// run's results (which supersede it and remove it).
    pub(super) async fn finish(&mut self) {
        if let Some(h) = self.in_flight.take() {
            let out = h.await.unwrap_or_else(|e| Err(e.to_string()));
            self.report(out);
        }
    }

    /// When the next checkpoint is due.
    pub(super) fn due(&self) -> Instant {
        self.next
    }

    /// Writes a checkpoint of `m` at `now` and schedules the next one. A
    /// failed write does not stop the run and leaves the last checkpoint
    /// as it was; the first failure is reported on stderr, and so is the
    /// first success after failures.
    pub(super) fn write(&mut self, ctx: &Ctx, m: &RunMetrics, now: Instant) {
        while self.next <= now {
            self.next += self.cfg.every;
        }
        if !self.settle() {
            return; // the last one is still being written
        }
        match self.serialize(ctx, m, now) {
            Err(e) => self.report(Err(e)),
            Ok(text) => {
                let path = self.cfg.dir.join(CHECKPOINT_FILE);
                self.in_flight = Some(tokio::task::spawn_blocking(move || {
                    crate::out::atomic::write(&path, &text).map_err(|e| e.to_string())
                }));
            }
        }
    }

    fn serialize(&self, ctx: &Ctx, m: &RunMetrics, now: Instant) -> Result<Vec<u8>, String> {
        let cfg = &ctx.cfg;
        let info = RunInfo {
            target: cfg.target.clone(),
            workload: ctx.work.name.clone(),
            arrivals: cfg.arrivals.clone(),
            seed: cfg.seed,
            shaping: cfg.shaping,
            kernel_shaping: cfg.kernel_shaping.clone(),
            pacing: cfg.pacing,
            interval_s: cfg.interval_s,
            late_threshold: cfg.late_threshold,
            scheduled_sessions: ctx.live.total.load(Ordering::Relaxed),
            started_sessions: ctx.live.started.load(Ordering::Relaxed),
            started_unix: self.origin_unix_s,
            duration_s: ctx.secs(now),
            stopped_by: StopReason::Checkpoint,
            playback_buffer_s: cfg.playback_buffer.as_secs_f64(),
            pace_target: cfg.pace_target,
        };
        // the monitor's per-interval samples live in its own task; a
        // checkpoint carries the measurements, not the CPU series
        let mon = Monitor::default();
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let mut dump = MetricsDump::new(
            &DumpInfo {
                shard: cfg.shard,
                origin_unix_s: self.origin_unix_s,
                actual_start_unix_s: self.origin_unix_s,
            },
            &info,
            m,
            &mon,
            cpus,
            results::peak_rss_mb(),
        )
        .map_err(|e| e.to_string())?;
        let mut out = results::assemble(&info, m, &mon);
        out.protocol = cfg.transport.protocol;
        if let Some(p) = &ctx.players {
            let agg = p.lock();
            dump.players = Some(agg.dump().map_err(|e| e.to_string())?);
            out.players = Some(agg.results());
        }
        out.shard = cfg.shard.map(|s| ShardRecord {
            index: s.index,
            count: s.count,
            rule: SPLIT_RULE.into(),
            origin_unix_s: self.origin_unix_s,
            actual_start_unix_s: self.origin_unix_s,
        });
        let c = Checkpoint {
            format: "vodlab-checkpoint".into(),
            version: 1,
            results: out,
            metrics: dump,
        };
        serde_json::to_vec(&c).map_err(|e| e.to_string())
    }
}
