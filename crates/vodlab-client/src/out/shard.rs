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
//! Everything here is pure but [`dirs`], the files of a shard's results
//! directory: `metrics.json` written, directories read back and merged
//! (`vodlab merge`).

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::core::exchange::ErrorKind;
pub use crate::out::codec::{decode_histogram, encode_histogram, ShardError, MAX_SHARDS};
use crate::out::metrics::{Bin, Bins, ClassMetrics, Errors, RunMetrics};
use crate::out::results::{self, Monitor, Results, RunInfo, StopReason};
pub use crate::out::results::{MergeInfo, ShardRecord, ShardStart};

/// Shard `index` of `count` (`--shard I/N`, `I` from 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardSpec {
    /// This process's index, `0..count`.
    pub index: u32,
    /// Processes in all.
    pub count: u32,
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
    /// Connections and TLS handshakes (absent in dumps from before HTTP/2
    /// and TLS: none counted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transport: Option<TransportDump>,
    /// Width of the monitor's intervals, s.
    pub interval_s: f64,
    /// The monitor.
    pub monitor: MonitorDump,
    /// Closed-loop players' aggregate (`vodlab run --player` only; set by
    /// the engine after [`MetricsDump::new`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub players: Option<crate::player_run::PlayersDump>,
}

/// [`crate::out::metrics::TransportMetrics`] in a dump.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TransportDump {
    /// `[connections, tls_handshakes, tls_resumed]`.
    pub counts: [u64; 3],
    /// TLS handshake times, µs (V2, base64).
    pub tls_handshake: String,
    /// QUIC's figures (h3 runs; absent otherwise and in older dumps).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quic: Option<crate::out::quic::QuicDump>,
    /// The in-process QUIC links' counts (`[links, up × 6, down × 6]`;
    /// absent without a link and in older dumps).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quic_link: Option<Vec<u64>>,
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
            transport: Some(TransportDump {
                counts: [
                    m.transport.connections,
                    m.transport.tls_handshakes,
                    m.transport.tls_resumed,
                ],
                tls_handshake: encode_histogram("tls_handshake", &m.transport.tls_handshake)?,
                quic: match m.transport.quic.connections {
                    0 => None,
                    _ => Some(m.transport.quic.dump()?),
                },
                quic_link: match m.transport.quic_link.links {
                    0 => None,
                    _ => Some(m.transport.quic_link.dump()),
                },
            }),
            interval_s: info.interval_s,
            monitor: MonitorDump {
                active_peak: mon.active_peak.clone(),
                cpu_pct: mon.cpu_pct.clone(),
                peak_active: mon.peak_active,
                cpus,
                peak_rss_mb,
            },
            players: None,
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
        let w = crate::core::delivery::RATE_WINDOW.as_secs_f64();
        m.delivered = std::iter::repeat_n(0, whole(shift_s, w))
            .chain(self.delivered.iter().copied())
            .collect();
        if let Some(t) = &self.transport {
            let tm = &mut m.transport;
            [tm.connections, tm.tls_handshakes, tm.tls_resumed] = t.counts;
            add(&mut tm.tls_handshake, "tls_handshake", &t.tls_handshake)?;
            if let Some(q) = &t.quic {
                tm.quic = crate::out::quic::QuicMetrics::from_dump(q)?;
            }
            if let Some(l) = &t.quic_link {
                tm.quic_link = crate::out::quic_link::QuicLinkMetrics::from_dump(l)?;
            }
        }
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
        kernel_shaping: r0.kernel_shaping_rate.clone(),
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
    out.protocol = r0.protocol;
    out.players = crate::player_run::merge_dumps(parts.iter().map(|p| p.dump.players.as_ref()))?;
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

pub mod dirs;

#[cfg(test)]
mod tests;
