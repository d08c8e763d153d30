//! Shards as processes: which sessions shard `I/N` runs, the exact state a
//! run writes for a merge (`metrics.json`), and the merge itself.
//!
//! The split rule: a workload of `S` script shards numbers its sessions
//! `i·S + k` (session `i` of script shard `k`, the order a round-robin over
//! the script shards visits them); process `I` of `N` runs the sessions
//! whose number is `I` modulo `N`. Every script shard keeps its own seeded
//! schedule, its rate (the aggregate rate / `S`) and its ramps, so a
//! process's sessions start at exactly the offsets they have in the
//! one-process run. When `N` divides `S` each process runs whole script
//! shards (`k ≡ I mod N`).
//!
//! Everything here is pure: the engine and `vodlab merge` do the I/O.

use std::collections::BTreeMap;

use base64::Engine as _;
use hdrhistogram::serialization::{Deserializer, Serializer, V2Serializer};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::exchange::ErrorKind;
use crate::metrics::{Bin, Bins, ClassMetrics, Errors, RunMetrics};
use crate::results::{self, Monitor, Results, RunInfo, StopReason};

/// Most processes a run can be split into.
pub const MAX_SHARDS: u32 = 65_536;

/// Shard `index` of `count` (`--shard I/N`, `I` from 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardSpec {
    /// This process's index, `0..count`.
    pub index: u32,
    /// Processes in all.
    pub count: u32,
}

/// Why a `--shard` value or a merge input is unusable.
#[derive(Debug, thiserror::Error)]
pub enum ShardError {
    /// `--shard` is not `I/N` with `0 <= I < N <= MAX_SHARDS`.
    #[error("--shard `{0}`: expected I/N with 0 <= I < N <= {MAX_SHARDS} (e.g. 0/4)")]
    Spec(String),
    /// A histogram could not be encoded or decoded.
    #[error("histogram `{name}`: {reason}")]
    Histogram {
        /// Which one.
        name: String,
        /// Why.
        reason: String,
    },
    /// The parts of a merge do not belong to one run.
    #[error("{0}")]
    Mismatch(String),
}

impl ShardSpec {
    /// Parses `I/N`.
    pub fn parse(s: &str) -> Result<Self, ShardError> {
        let bad = || ShardError::Spec(s.to_string());
        let (i, n) = s.split_once('/').ok_or_else(bad)?;
        let index: u32 = i.trim().parse().map_err(|_| bad())?;
        let count: u32 = n.trim().parse().map_err(|_| bad())?;
        if count == 0 || count > MAX_SHARDS || index >= count {
            return Err(bad());
        }
        Ok(Self { index, count })
    }

    /// True when this process runs session `session` of script shard `k`
    /// of a workload with `script_shards` script shards (the split rule in
    /// the module documentation).
    pub fn owns(&self, k: usize, session: usize, script_shards: usize) -> bool {
        let n = session as u128 * script_shards as u128 + k as u128;
        n % u128::from(self.count) == u128::from(self.index)
    }
}

impl std::fmt::Display for ShardSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// The split rule, as written into results.
pub const SPLIT_RULE: &str = "session i of script shard k (of S) is number i*S+k; shard I/N runs the numbers equal to I mod N";

/// What `results.json` says about the shard a process ran.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShardRecord {
    /// This process's index.
    pub index: u32,
    /// Processes in all.
    pub count: u32,
    /// The split rule ([`SPLIT_RULE`]).
    pub rule: String,
    /// Wall-clock time of the run's origin (offset 0 of every schedule),
    /// Unix seconds: `--start-at` when given.
    pub origin_unix_s: f64,
    /// Wall-clock time the process actually began its schedule, Unix seconds.
    pub actual_start_unix_s: f64,
}

/// Encodes a histogram as HdrHistogram's V2 serialization in base64.
pub fn encode_histogram(name: &str, h: &Histogram<u64>) -> Result<String, ShardError> {
    let mut buf = Vec::new();
    V2Serializer::new()
        .serialize(h, &mut buf)
        .map_err(|e| ShardError::Histogram {
            name: name.into(),
            reason: format!("{e:?}"),
        })?;
    Ok(base64::engine::general_purpose::STANDARD.encode(buf))
}

/// Decodes [`encode_histogram`]'s output.
pub fn decode_histogram(name: &str, s: &str) -> Result<Histogram<u64>, ShardError> {
    let err = |reason: String| ShardError::Histogram {
        name: name.into(),
        reason,
    };
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(s)
        .map_err(|e| err(e.to_string()))?;
    Deserializer::new()
        .deserialize(&mut bytes.as_slice())
        .map_err(|e| err(format!("{e:?}")))
}

/// One client class's exact state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClassDump {
    /// Response time histogram, µs (V2, base64).
    pub response: String,
    /// Time to first byte, µs.
    pub ttfb: String,
    /// Scheduled send to last byte, µs.
    pub from_schedule: String,
    /// Start-up delay, µs.
    pub startup: String,
    /// Playback latency, µs.
    pub playback: String,
    /// `[sessions, failed, stalled_sessions, stalls, stall_us, requests,
    /// bytes, playback_no_bitrate, playback_short]`.
    pub counts: [u64; 9],
}

/// The monitor's per-interval samples.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct MonitorDump {
    /// Most active sessions per interval.
    pub active_peak: Vec<u64>,
    /// Highest CPU per interval, percent of one core.
    pub cpu_pct: Vec<f64>,
    /// Most active sessions at any sample.
    pub peak_active: u64,
    /// CPU cores of the process.
    pub cpus: usize,
    /// Peak resident memory, MiB.
    pub peak_rss_mb: f64,
}

/// `metrics.json`: everything a merge needs to rebuild a run's results
/// exactly. Times of the series are relative to `origin_unix_s`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MetricsDump {
    /// `"vodlab-metrics"`.
    pub format: String,
    /// Version (1).
    pub version: u32,
    /// The shard this process ran (none: the whole workload).
    #[serde(default)]
    pub shard: Option<ShardSpec>,
    /// Wall-clock time of offset 0, Unix seconds.
    pub origin_unix_s: f64,
    /// Wall-clock time the schedule actually began, Unix seconds.
    pub actual_start_unix_s: f64,
    /// Run length from the origin, s.
    pub duration_s: f64,
    /// Why it ended.
    pub stopped_by: StopReason,
    /// Sessions it was to start.
    pub scheduled_sessions: u64,
    /// Sessions started.
    pub started_sessions: u64,
    /// Lateness threshold, µs.
    pub late_threshold_us: u64,
    /// Per class.
    pub classes: BTreeMap<String, ClassDump>,
    /// Width of `bins`, s (0.1).
    pub bin_width_s: f64,
    /// `[completed_requests, completed_bytes, started, completed, failed]`
    /// per bin from the origin.
    pub bins: Vec<[u64; 5]>,
    /// First errors of failed sessions.
    pub errors: BTreeMap<ErrorKind, u64>,
    /// Session start lateness, µs (V2, base64).
    pub start_lateness: String,
    /// Send lateness, µs.
    pub send_lateness: String,
    /// `[late_starts, late_sends, reconnects, server_closes,
    /// skipped_requests, rate_windows, rate_windows_within]`.
    pub counts: [u64; 7],
    /// First measured start, s from the origin.
    pub measured_from: Option<f64>,
    /// Last measured end, s from the origin.
    pub measured_to: Option<f64>,
    /// Rate-window ratios, per mille.
    pub rate_ratio: String,
    /// Body bytes per 100 ms window from the origin.
    pub delivered: Vec<u64>,
    /// Width of the monitor's intervals, s.
    pub interval_s: f64,
    /// The monitor.
    pub monitor: MonitorDump,
}

/// How a run went, apart from its metrics (for [`MetricsDump::new`]).
#[derive(Debug, Clone)]
pub struct DumpInfo {
    /// The shard run, if any.
    pub shard: Option<ShardSpec>,
    /// Wall-clock time of offset 0, Unix seconds.
    pub origin_unix_s: f64,
    /// When the schedule actually began, Unix seconds.
    pub actual_start_unix_s: f64,
}

impl MetricsDump {
    /// The exact state of a run.
    pub fn new(
        d: &DumpInfo,
        info: &RunInfo,
        m: &RunMetrics,
        mon: &Monitor,
        cpus: usize,
        peak_rss_mb: f64,
    ) -> Result<Self, ShardError> {
        let classes = m
            .classes
            .iter()
            .map(|(k, c)| {
                let e = |n: &str, h| encode_histogram(&format!("{k}.{n}"), h);
                Ok((
                    k.clone(),
                    ClassDump {
                        response: e("response", &c.response)?,
                        ttfb: e("ttfb", &c.ttfb)?,
                        from_schedule: e("from_schedule", &c.from_schedule)?,
                        startup: e("startup", &c.startup)?,
                        playback: e("playback", &c.playback)?,
                        counts: [
                            c.sessions,
                            c.failed,
                            c.stalled_sessions,
                            c.stalls,
                            c.stall_us,
                            c.requests,
                            c.bytes,
                            c.playback_no_bitrate,
                            c.playback_short,
                        ],
                    },
                ))
            })
            .collect::<Result<_, ShardError>>()?;
        Ok(Self {
            format: "vodlab-metrics".into(),
            version: 1,
            shard: d.shard,
            origin_unix_s: d.origin_unix_s,
            actual_start_unix_s: d.actual_start_unix_s,
            duration_s: info.duration_s,
            stopped_by: info.stopped_by,
            scheduled_sessions: info.scheduled_sessions,
            started_sessions: info.started_sessions,
            late_threshold_us: m.late_threshold_us,
            classes,
            bin_width_s: m.bins.width_s,
            bins: m
                .bins
                .bins
                .iter()
                .map(|b| {
                    [
                        b.completed_requests,
                        b.completed_bytes,
                        b.started,
                        b.completed,
                        b.failed,
                    ]
                })
                .collect(),
            errors: m.errors.0.clone(),
            start_lateness: encode_histogram("start_lateness", &m.start_lateness)?,
            send_lateness: encode_histogram("send_lateness", &m.send_lateness)?,
            counts: [
                m.late_starts,
                m.late_sends,
                m.reconnects,
                m.server_closes,
                m.skipped_requests,
                m.rate_windows,
                m.rate_windows_within,
            ],
            measured_from: m.measured_from,
            measured_to: m.measured_to,
            rate_ratio: encode_histogram("rate_ratio", &m.rate_ratio)?,
            delivered: m.delivered.clone(),
            interval_s: info.interval_s,
            monitor: MonitorDump {
                active_peak: mon.active_peak.clone(),
                cpu_pct: mon.cpu_pct.clone(),
                peak_active: mon.peak_active,
                cpus,
                peak_rss_mb,
            },
        })
    }

    /// The metrics again, with every time shifted `shift_s` seconds later
    /// (series by whole bins of their width, rounded).
    pub fn metrics(&self, shift_s: f64) -> Result<RunMetrics, ShardError> {
        let mut m = RunMetrics::new(self.late_threshold_us);
        for (k, c) in &self.classes {
            let d = |n: &str, s: &str| decode_histogram(&format!("{k}.{n}"), s);
            let [sessions, failed, stalled_sessions, stalls, stall_us, requests, bytes, playback_no_bitrate, playback_short] =
                c.counts;
            let mut cm = ClassMetrics {
                response: d("response", &c.response)?,
                ttfb: d("ttfb", &c.ttfb)?,
                from_schedule: d("from_schedule", &c.from_schedule)?,
                startup: d("startup", &c.startup)?,
                playback: d("playback", &c.playback)?,
                sessions,
                failed,
                stalled_sessions,
                stalls,
                stall_us,
                requests,
                bytes,
                playback_no_bitrate,
                playback_short,
            };
            // the same bounds as a fresh one, so merges add without resizing
            let mut fresh = ClassMetrics::default();
            fresh.merge(&cm);
            std::mem::swap(&mut cm, &mut fresh);
            m.classes.insert(k.clone(), cm);
        }
        if self.bin_width_s > 0.0 && (self.bin_width_s - m.bins.width_s).abs() > 1e-12 {
            return Err(ShardError::Mismatch(format!(
                "bin width {} s, expected {} s",
                self.bin_width_s, m.bins.width_s
            )));
        }
        let bin_shift = whole(shift_s, m.bins.width_s);
        m.bins = Bins {
            width_s: m.bins.width_s,
            bins: std::iter::repeat_n(Bin::default(), bin_shift)
                .chain(self.bins.iter().map(|b| Bin {
                    completed_requests: b[0],
                    completed_bytes: b[1],
                    started: b[2],
                    completed: b[3],
                    failed: b[4],
                }))
                .collect(),
        };
        m.errors = Errors(self.errors.clone());
        let add = |h: &mut Histogram<u64>, n: &str, s: &str| -> Result<(), ShardError> {
            h.add(decode_histogram(n, s)?)
                .map_err(|e| ShardError::Histogram {
                    name: n.into(),
                    reason: format!("{e:?}"),
                })
        };
        add(
            &mut m.start_lateness,
            "start_lateness",
            &self.start_lateness,
        )?;
        add(&mut m.send_lateness, "send_lateness", &self.send_lateness)?;
        add(&mut m.rate_ratio, "rate_ratio", &self.rate_ratio)?;
        [
            m.late_starts,
            m.late_sends,
            m.reconnects,
            m.server_closes,
            m.skipped_requests,
            m.rate_windows,
            m.rate_windows_within,
        ] = self.counts;
        m.measured_from = self.measured_from.map(|t| t + shift_s);
        m.measured_to = self.measured_to.map(|t| t + shift_s);
        let w = crate::delivery::RATE_WINDOW.as_secs_f64();
        m.delivered = std::iter::repeat_n(0, whole(shift_s, w))
            .chain(self.delivered.iter().copied())
            .collect();
        Ok(m)
    }
}

/// `shift_s` in whole steps of `width`, rounded (0 for no or a negative shift).
fn whole(shift_s: f64, width: f64) -> usize {
    if shift_s > 0.0 && width > 0.0 {
        (shift_s / width).round() as usize
    } else {
        0
    }
}

/// One shard's files as `vodlab merge` read them.
#[derive(Debug, Clone)]
pub struct Part {
    /// Where it came from (a directory), for messages.
    pub label: String,
    /// Its `results.json`.
    pub results: Results,
    /// Its `metrics.json`.
    pub dump: MetricsDump,
}

/// One shard's line in a merged run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShardStart {
    /// Index (none: a run without `--shard`).
    pub index: Option<u32>,
    /// Directory.
    pub dir: String,
    /// Offset 0 of its schedule, Unix seconds.
    pub origin_unix_s: f64,
    /// When it actually began, Unix seconds.
    pub actual_start_unix_s: f64,
    /// Why it stopped.
    pub stopped_by: StopReason,
    /// Its own verdicts.
    pub complete: bool,
    /// Its own verdicts.
    pub valid: bool,
}

/// What `vodlab merge` adds to a merged `results.json`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct MergeInfo {
    /// Shards the run was split into.
    pub shards: u32,
    /// Indices of the shards merged.
    pub merged: Vec<u32>,
    /// Indices of the shards with no results (dead or never run).
    pub missing: Vec<u32>,
    /// Directories given that held no results.
    pub missing_dirs: Vec<String>,
    /// Why the merged run is incomplete, shard by shard.
    pub incomplete_reasons: Vec<String>,
    /// Shards that were invalid on their own, with their reasons.
    pub invalid_shards: Vec<String>,
    /// Largest minus smallest actual start, s.
    pub start_skew_s: f64,
    /// Largest minus smallest origin (schedule offset 0), s: 0 with
    /// `--start-at`; otherwise the series are aligned to the nearest bin.
    pub origin_skew_s: f64,
    /// Each shard merged.
    pub starts: Vec<ShardStart>,
}

/// Merges shard parts into one run's results: counts and bytes summed,
/// histograms added, series aligned by wall-clock time (`parts` non-empty).
/// `missing_dirs` are inputs that held no results (a killed shard).
pub fn merge(parts: &[Part], missing_dirs: &[String]) -> Result<Results, ShardError> {
    let first = parts
        .first()
        .ok_or_else(|| ShardError::Mismatch("no shard results to merge".into()))?;
    let r0 = &first.results;
    let d0 = &first.dump;
    let count = d0.shard.map_or(parts.len() as u32, |s| s.count);
    let mut seen = BTreeMap::new();
    for p in parts {
        let (r, d) = (&p.results, &p.dump);
        let differs = |what: &str| {
            ShardError::Mismatch(format!(
                "{} and {} are not shards of one run: their {what} differ",
                first.label, p.label
            ))
        };
        if r.workload != r0.workload {
            return Err(differs("workloads"));
        }
        if r.seed != r0.seed || r.arrivals != r0.arrivals {
            return Err(differs("seeds or arrivals"));
        }
        if d.interval_s != d0.interval_s || d.late_threshold_us != d0.late_threshold_us {
            return Err(differs("--interval or --late-threshold-ms"));
        }
        if d.shard.map(|s| s.count) != d0.shard.map(|s| s.count) {
            return Err(differs("shard counts (--shard I/N)"));
        }
        if let Some(s) = d.shard {
            if let Some(other) = seen.insert(s.index, p.label.clone()) {
                return Err(ShardError::Mismatch(format!(
                    "{other} and {} both hold shard {s}",
                    p.label
                )));
            }
        }
    }
    let origin = parts
        .iter()
        .map(|p| p.dump.origin_unix_s)
        .fold(f64::INFINITY, f64::min);
    let mut metrics = RunMetrics::new(d0.late_threshold_us);
    let mut mon = Monitor::default();
    let (mut cpus, mut rss) = (0usize, 0.0f64);
    let (mut scheduled, mut started, mut end) = (0u64, 0u64, 0.0f64);
    let mut stopped_by = StopReason::Finished;
    let mut info = MergeInfo {
        shards: count,
        missing_dirs: missing_dirs.to_vec(),
        ..MergeInfo::default()
    };
    let name = |p: &Part| match p.dump.shard {
        Some(s) => format!("shard {s} ({})", p.label),
        None => p.label.clone(),
    };
    for p in parts {
        let d = &p.dump;
        let shift = d.origin_unix_s - origin;
        metrics.merge(&d.metrics(shift)?);
        let k = whole(shift, d.interval_s);
        for (i, (&a, &c)) in d
            .monitor
            .active_peak
            .iter()
            .zip(&d.monitor.cpu_pct)
            .enumerate()
        {
            let j = i + k;
            if mon.active_peak.len() <= j {
                mon.active_peak.resize(j + 1, 0);
                mon.cpu_pct.resize(j + 1, 0.0);
            }
            // processes run side by side: their active sessions add up; the
            // CPU column is the busiest process's (each has its own cores)
            mon.active_peak[j] += a;
            mon.cpu_pct[j] = mon.cpu_pct[j].max(c);
        }
        mon.peak_active += d.monitor.peak_active;
        cpus = cpus.max(d.monitor.cpus);
        rss = rss.max(d.monitor.peak_rss_mb);
        scheduled += d.scheduled_sessions;
        started += d.started_sessions;
        end = end.max(shift + d.duration_s);
        if let Some(s) = d.shard {
            info.merged.push(s.index);
        }
        if !p.results.complete {
            if stopped_by == StopReason::Finished {
                stopped_by = p.results.stopped_by;
            }
            info.incomplete_reasons.push(format!(
                "{} is incomplete (stopped by {:?})",
                name(p),
                p.results.stopped_by
            ));
        }
        if !p.results.valid {
            info.invalid_shards.push(format!(
                "{}: {}",
                name(p),
                p.results.invalid_reasons.join("; ")
            ));
        }
        info.starts.push(ShardStart {
            index: d.shard.map(|s| s.index),
            dir: p.label.clone(),
            origin_unix_s: d.origin_unix_s,
            actual_start_unix_s: d.actual_start_unix_s,
            stopped_by: p.results.stopped_by,
            complete: p.results.complete,
            valid: p.results.valid,
        });
    }
    info.merged.sort_unstable();
    if d0.shard.is_some() {
        info.missing = (0..count).filter(|i| !seen.contains_key(i)).collect();
    }
    for i in &info.missing {
        info.incomplete_reasons.push(format!(
            "shard {i}/{count} has no results (it died or never ran)"
        ));
    }
    for dir in missing_dirs {
        info.incomplete_reasons
            .push(format!("{dir} holds no results.json and metrics.json"));
    }
    let spread = |f: fn(&ShardStart) -> f64| {
        let (lo, hi) = info
            .starts
            .iter()
            .map(f)
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), x| {
                (lo.min(x), hi.max(x))
            });
        hi - lo
    };
    info.start_skew_s = spread(|s| s.actual_start_unix_s);
    info.origin_skew_s = spread(|s| s.origin_unix_s);
    mon.cpus = Some(cpus.max(1));
    mon.peak_rss_mb = Some(rss);
    let run = RunInfo {
        target: r0.target.clone(),
        workload: r0.workload.clone(),
        arrivals: r0.arrivals.clone(),
        seed: r0.seed,
        shaping: r0.shaping,
        pacing: r0.pacing,
        interval_s: d0.interval_s,
        late_threshold: std::time::Duration::from_micros(d0.late_threshold_us),
        scheduled_sessions: scheduled,
        started_sessions: started,
        started_unix: origin,
        duration_s: end,
        stopped_by,
        playback_buffer_s: r0.delivery.playback_buffer_s,
        pace_target: r0.delivery.pace_target,
    };
    let mut out = results::assemble(&run, &metrics, &mon);
    out.complete = info.incomplete_reasons.is_empty();
    if !info.incomplete_reasons.is_empty() && out.stopped_by == StopReason::Finished {
        out.stopped_by = StopReason::ShardMissing;
    }
    for s in &info.invalid_shards {
        out.invalid_reasons.push(format!("invalid {s}"));
    }
    out.valid = out.invalid_reasons.is_empty();
    out.merge = Some(info);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::delivery::{DeliveryOut, Playback, WindowRun};
    use crate::metrics::{RequestSample, SampleDone, SessionSample};
    use crate::viewer::ViewerStats;
    use std::time::Duration;

    #[test]
    fn shard_specs_parse_and_refuse_nonsense() {
        assert_eq!(
            ShardSpec::parse("2/4").unwrap(),
            ShardSpec { index: 2, count: 4 }
        );
        for bad in ["4/4", "1", "a/2", "0/0", "-1/3", "1/70000", "1/2/3"] {
            assert!(ShardSpec::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn every_session_belongs_to_exactly_one_shard() {
        for (s, n) in [
            (1usize, 4u32),
            (2, 4),
            (4, 4),
            (6, 4),
            (8, 4),
            (3, 1),
            (5, 7),
        ] {
            let specs: Vec<ShardSpec> = (0..n).map(|index| ShardSpec { index, count: n }).collect();
            let mut per = vec![0usize; n as usize];
            for k in 0..s {
                for i in 0..100 {
                    let owners: Vec<_> = specs.iter().filter(|p| p.owns(k, i, s)).collect();
                    assert_eq!(owners.len(), 1, "S={s} N={n} k={k} i={i}");
                    per[owners[0].index as usize] += 1;
                }
            }
            // balanced to within one session per script shard
            let (lo, hi) = (per.iter().min().unwrap(), per.iter().max().unwrap());
            assert!(hi - lo <= s, "S={s} N={n}: {per:?}");
        }
        // N divides S: whole script shards, k mod N
        let p = ShardSpec { index: 1, count: 4 };
        assert!((0..50).all(|i| p.owns(5, i, 8) && !p.owns(4, i, 8)));
    }

    /// A deterministic stream of one session's samples (session `i` of
    /// script shard `k`), as the engine would report them.
    fn feed(m: &mut RunMetrics, k: usize, i: usize) {
        let n = (k * 1000 + i) as u64;
        let class = ["adsl", "cable", "fiber"][(n % 3) as usize];
        let measured = i >= 2;
        let start = i as f64 * 0.731 + k as f64 * 0.05;
        m.record_start(start, n * 7_919 % 9_000);
        for j in 0..(3 + n % 5) {
            let ok = (n + j) % 13 != 0;
            let done_us = ((start + 0.4 * j as f64) * 1e6) as u64 + n % 977;
            let r = RequestSample {
                request: j as u32,
                scheduled_s: start + 0.4 * j as f64,
                sent_s: start + 0.4 * j as f64 + 0.001,
                send_lateness_us: (j > 0).then_some((n * 31 + j * 17) % 9_000),
                outcome: if ok {
                    Ok(SampleDone {
                        done_us,
                        // spread over 5 decades so the percentiles move
                        response_us: 50 + (n * 104_729 + j * 7_717) % 9_000_000,
                        ttfb_us: 20 + (n * 6_151 + j) % 400_000,
                        from_schedule_us: 90 + (n * 3_571 + j * 13) % 9_500_000,
                        bytes: 1 + (n * 1_000_003 + j) % 5_000_000,
                        status: 206,
                        playback: if j % 2 == 0 {
                            Playback::After(Duration::from_micros(n * 919 % 4_000_000))
                        } else {
                            Playback::Short
                        },
                    })
                } else {
                    Err(ErrorKind::Timeout)
                },
            };
            m.record_request(class, measured, &r);
        }
        m.record_delivery(
            measured,
            &DeliveryOut {
                windows: vec![WindowRun {
                    ratio_permille: (n * 37 % 2_200) as u32,
                    within: n % 2 == 0,
                    count: (n % 4 + 1) as u32,
                }],
                aggregate: vec![((start * 10.0) as u64, n * 1_000 + 7)],
            },
        );
        m.record_session(
            class,
            measured,
            &SessionSample {
                start_s: start,
                end_s: start + 3.0 + (n % 7) as f64,
                failure: (n % 13 == 0).then_some(ErrorKind::Timeout),
                skipped: n % 3,
                viewer: Some(ViewerStats {
                    startup_s: Some(0.05 + (n % 11) as f64 * 0.17),
                    stalls: (n % 3) as u32,
                    stall_s: (n % 3) as f64 * 0.77,
                    played_s: 30.0,
                }),
                reconnects: n % 2,
                server_closes: n % 5,
            },
        );
    }

    fn info(started: u64, stopped_by: StopReason) -> RunInfo {
        RunInfo {
            target: "http://127.0.0.1:8080".into(),
            workload: "w".into(),
            arrivals: crate::schedule::Arrivals::Poisson { rate: 10.0 },
            seed: 1,
            shaping: true,
            pacing: true,
            interval_s: 1.0,
            late_threshold: Duration::from_millis(10),
            scheduled_sessions: started,
            started_sessions: started,
            started_unix: 1_700_000_000.0,
            duration_s: 60.0,
            stopped_by,
            playback_buffer_s: 4.0,
            pace_target: 1.0,
        }
    }

    fn mon() -> Monitor {
        Monitor {
            active_peak: vec![3; 60],
            cpu_pct: vec![20.0; 60],
            peak_active: 3,
            cpus: Some(2),
            peak_rss_mb: Some(30.0),
        }
    }

    /// Shard `spec`'s part: its sessions' samples, written to JSON and read
    /// back as `vodlab merge` does.
    fn part(spec: ShardSpec, s: usize, per: usize, origin: f64, stop: StopReason) -> Part {
        let mut m = RunMetrics::new(10_000);
        let mut n = 0;
        for k in 0..s {
            for i in 0..per {
                if spec.owns(k, i, s) {
                    feed(&mut m, k, i);
                    n += 1;
                }
            }
        }
        let mut inf = info(n, stop);
        inf.started_unix = origin;
        let dump = MetricsDump::new(
            &DumpInfo {
                shard: Some(spec),
                origin_unix_s: origin,
                actual_start_unix_s: origin + 0.001 * f64::from(spec.index),
            },
            &inf,
            &m,
            &mon(),
            2,
            30.0,
        )
        .unwrap();
        let results = results::assemble(&inf, &m, &mon());
        let json = serde_json::to_string(&dump).unwrap();
        let rjson = serde_json::to_string(&results).unwrap();
        Part {
            label: format!("shard-{}", spec.index),
            results: serde_json::from_str(&rjson).unwrap(),
            dump: serde_json::from_str(&json).unwrap(),
        }
    }

    #[test]
    fn a_dump_reads_back_into_the_same_metrics() {
        let mut m = RunMetrics::new(10_000);
        for i in 0..40 {
            feed(&mut m, i % 3, i);
        }
        let inf = info(40, StopReason::Finished);
        let d = DumpInfo {
            shard: None,
            origin_unix_s: 5.0,
            actual_start_unix_s: 5.0,
        };
        let dump = MetricsDump::new(&d, &inf, &m, &mon(), 2, 1.0).unwrap();
        let back: MetricsDump =
            serde_json::from_str(&serde_json::to_string(&dump).unwrap()).unwrap();
        assert!(back.metrics(0.0).unwrap() == m);
    }

    #[test]
    fn four_shards_merge_into_exactly_the_one_process_results() {
        let (s, per) = (2, 150);
        let mut whole = RunMetrics::new(10_000);
        for k in 0..s {
            for i in 0..per {
                feed(&mut whole, k, i);
            }
        }
        let parts: Vec<Part> = (0..4)
            .map(|index| {
                part(
                    ShardSpec { index, count: 4 },
                    s,
                    per,
                    1_700_000_000.0,
                    StopReason::Finished,
                )
            })
            .collect();
        let merged = merge(&parts, &[]).unwrap();
        let mut one_mon = mon();
        // four processes side by side: their active sessions add up
        one_mon.active_peak = vec![12; 60];
        one_mon.peak_active = 12;
        let one = results::assemble(
            &info((s * per) as u64, StopReason::Finished),
            &whole,
            &one_mon,
        );
        assert!(merged.complete && merged.valid, "{}", merged.table());
        assert_eq!(merged.measured_sessions, one.measured_sessions);
        assert_eq!(merged.started_sessions, one.started_sessions);
        assert_eq!(merged.failed_sessions, one.failed_sessions);
        assert_eq!(merged.completed_requests, one.completed_requests);
        assert_eq!(merged.completed_bytes, one.completed_bytes);
        assert_eq!(merged.skipped_requests, one.skipped_requests);
        assert_eq!(merged.errors, one.errors);
        // histograms added, so every percentile is the one-process one exactly
        for (a, b) in [
            (&merged.response_time_ms, &one.response_time_ms),
            (&merged.ttfb_ms, &one.ttfb_ms),
            (
                &merged.latency_from_schedule_ms,
                &one.latency_from_schedule_ms,
            ),
            (&merged.startup_delay_s, &one.startup_delay_s),
            (
                &merged.health.send_lateness_ms,
                &one.health.send_lateness_ms,
            ),
        ] {
            assert_eq!(a, b);
            assert!(a.p999 > a.p50, "the fixture spreads the values: {a:?}");
        }
        for (name, c) in &one.classes {
            let m = &merged.classes[name];
            assert_eq!(
                (m.requests, m.bytes, m.stalls),
                (c.requests, c.bytes, c.stalls)
            );
            assert_eq!(m.response_time_ms, c.response_time_ms);
            assert_eq!(m.response_time_cdf_ms, c.response_time_cdf_ms);
        }
        assert_eq!(merged.delivery, one.delivery);
        let series = |r: &Results| {
            r.intervals
                .iter()
                .map(|i| {
                    (
                        i.completed_requests,
                        i.started,
                        i.completed,
                        i.failed,
                        i.active_sessions,
                    )
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(series(&merged), series(&one));
        let m = merged.merge.as_ref().unwrap();
        assert_eq!(m.merged, vec![0, 1, 2, 3]);
        assert!((m.start_skew_s - 0.003).abs() < 1e-6, "{}", m.start_skew_s);
        // whereas averaging the shards' p99s would not give the p99
        let avg = parts
            .iter()
            .map(|p| p.results.response_time_ms.p99)
            .sum::<f64>()
            / 4.0;
        assert_ne!(avg, one.response_time_ms.p99);
    }

    #[test]
    fn a_missing_or_stopped_shard_makes_the_merge_incomplete_and_is_named() {
        let o = 1_700_000_000.0;
        let p = |i, stop| part(ShardSpec { index: i, count: 4 }, 1, 40, o, stop);
        let parts = vec![
            p(0, StopReason::Finished),
            p(1, StopReason::Finished),
            p(3, StopReason::Finished),
        ];
        let r = merge(&parts, &["out/shard-2".into()]).unwrap();
        assert!(!r.complete);
        assert_eq!(r.stopped_by, StopReason::ShardMissing);
        let m = r.merge.as_ref().unwrap();
        assert_eq!(m.missing, vec![2]);
        assert!(
            m.incomplete_reasons.iter().any(|x| x.contains("shard 2/4")),
            "{m:?}"
        );
        assert!(r.table().contains("shard 2/4"), "{}", r.table());

        let parts = vec![
            p(0, StopReason::Finished),
            p(1, StopReason::Interrupted),
            p(2, StopReason::Finished),
            p(3, StopReason::Finished),
        ];
        let r = merge(&parts, &[]).unwrap();
        assert!(!r.complete);
        assert_eq!(r.stopped_by, StopReason::Interrupted);
        assert!(r.merge.as_ref().unwrap().incomplete_reasons[0].contains("shard 1/4 (shard-1)"));
    }

    #[test]
    fn an_invalid_shard_makes_the_merge_invalid_and_is_named() {
        let o = 1_700_000_000.0;
        let mut parts: Vec<Part> = (0..2)
            .map(|i| {
                part(
                    ShardSpec { index: i, count: 2 },
                    1,
                    40,
                    o,
                    StopReason::Finished,
                )
            })
            .collect();
        parts[1].results.valid = false;
        parts[1].results.invalid_reasons = vec!["the client ran out of local ports 3 times".into()];
        let r = merge(&parts, &[]).unwrap();
        assert!(!r.valid);
        assert!(
            r.invalid_reasons
                .iter()
                .any(|x| x.contains("shard 1/2") && x.contains("local ports")),
            "{:?}",
            r.invalid_reasons
        );
    }

    #[test]
    fn series_are_aligned_by_wall_clock_and_shards_of_other_runs_refused() {
        let o = 1_700_000_000.0;
        let a = part(
            ShardSpec { index: 0, count: 2 },
            1,
            30,
            o,
            StopReason::Finished,
        );
        let b = part(
            ShardSpec { index: 1, count: 2 },
            1,
            30,
            o + 2.0,
            StopReason::Finished,
        );
        let alone = merge(std::slice::from_ref(&a), &[]).unwrap();
        let both = merge(&[a.clone(), b.clone()], &[]).unwrap();
        let mb = b.dump.metrics(0.0).unwrap();
        // b's first bin lands 2 s (20 bins, 2 intervals) after a's origin
        let first_b = mb.bins.bins.iter().position(|x| x.started > 0).unwrap();
        let started: u64 = both.intervals.iter().map(|i| i.started).sum();
        assert_eq!(started, 30);
        let shifted = b.dump.metrics(2.0).unwrap();
        assert_eq!(
            shifted.bins.bins.iter().position(|x| x.started > 0),
            Some(first_b + 20)
        );
        assert_eq!(both.started_at_unix_s, o);
        assert!((both.merge.as_ref().unwrap().origin_skew_s - 2.0).abs() < 1e-9);
        assert!(both.duration_s > alone.duration_s);
        let mut c = b.clone();
        c.results.seed = 7;
        assert!(merge(&[a.clone(), c], &[]).is_err());
        assert!(merge(&[a.clone(), a], &[])
            .unwrap_err()
            .to_string()
            .contains("both hold shard 0/2"));
    }
}
