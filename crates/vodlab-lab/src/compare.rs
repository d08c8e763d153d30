//! `compare.json`: one workload, several servers in the same box, typed
//! (schema: `docs/compare.schema.json`).
//!
//! Version 2 added each server's search outcome (`servers[].outcome`);
//! figures that were absent are left out instead of written as null.
//! Version 1 files still load (the outcome is derived from the answer and
//! the error); newer versions fail with an error naming the version.

mod args;
mod error;
mod procs;
mod rows;
mod run;
mod summary;

use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::capacity::SearchOutcome;
use crate::files::{parse_versioned, read_with, write_pretty, FileError};
use crate::hwbox::{BoxSpec, DeviceStat, Profile, Usage};
use crate::search::{Answer, Point, RunExtra};

pub use args::{CompareArgs, MAX_WORKERS};
pub use error::CompareError;
pub use rows::{canonical_policy, skipped, sort};
pub use run::{breaches, Compare, CompareObserver, CompareRun};
pub use summary::summary;

/// The most, percent, that an emulated drive's own lateness may add to the
/// drive's response time as the server's kernel saw it
/// (`vodlab_diskfs::Derived::reply_late_share`) before a run on it is
/// INVALID: the tolerance within which a time-compressed point must agree
/// with real time (issue 28's 10 %).
pub const MAX_REPLY_LATE_PCT: f64 = 10.0;

/// Why a run on an emulated drive at time compression `k` is INVALID,
/// if it is: the mount answered reads later than its model had served
/// them by more than [`MAX_REPLY_LATE_PCT`] of the drive's response time,
/// so the server met a slower drive than the one named (the machine did
/// not keep up with the drive at this k: a timer woken late, bytes
/// synthesized after the drive had finished, CPUs saturated).
pub fn drive_fell_behind(late_share: f64, k: f64) -> Option<String> {
    let pct = 100.0 * late_share;
    (pct > MAX_REPLY_LATE_PCT).then(|| {
        format!(
            "the emulated drive fell behind its model: its replies added {pct:.0} % to the \
             drive's response time (at most {MAX_REPLY_LATE_PCT:.0} %); at time compression \
             k = {k} this machine does not keep up: lower --time-compression or free the CPUs"
        )
    })
}

/// The `format` of a compare.json.
pub const COMPARE_FORMAT: &str = "vodlab-compare";
/// The version this crate writes.
pub const COMPARE_VERSION: u32 = 2;

/// Everything `compare.json` holds.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CompareFile {
    /// `"vodlab-compare"`.
    pub format: String,
    /// 2 (a version-1 file keeps its 1 when read).
    pub version: u32,
    /// Every server was tried.
    pub complete: bool,
    /// The workload directory.
    pub workload: String,
    /// The file set every server served (absolute).
    pub root: String,
    /// The box every server ran in (`None`: `--no-box`).
    #[serde(rename = "box")]
    pub hw_box: Option<BoxSpec>,
    /// The disk profile the box emulated, if one was named.
    pub profile: Option<ProfileInfo>,
    /// The emulated drive every server read from (`vodlab disk mount`,
    /// `--disk`); then the disk figures are the drive model's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk: Option<EmulatedDisk>,
    /// The criterion in words.
    pub criterion: String,
    /// Seconds of arrivals per point.
    pub window_s: f64,
    /// Pacing was on.
    pub pacing: bool,
    /// Link emulation was on.
    pub shaping: bool,
    /// The protocol every server was loaded over (`h1`, `h2c`, `https`,
    /// `h2`); absent in files written before compare had `--protocol`
    /// (which were h1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
    /// The sequential-read bound (`None`: skipped).
    pub seqread: Option<SeqRead>,
    /// One row per server, in the usual order.
    pub servers: Vec<ServerRow>,
    /// Wall-clock start, Unix seconds.
    pub started_at_unix_s: f64,
    /// Length of the whole comparison, s (once complete).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_s: Option<f64>,
}

/// A disk profile as recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProfileInfo {
    /// Its name.
    pub name: String,
    /// Read bytes per second.
    pub read_bps: u64,
    /// Reads per second.
    pub read_iops: u64,
    /// Device read-ahead, KiB.
    pub readahead_kb: u32,
    /// Where the numbers come from.
    pub source: String,
}

impl From<Profile> for ProfileInfo {
    fn from(p: Profile) -> Self {
        Self {
            name: p.name.into(),
            read_bps: p.read_bps,
            read_iops: p.read_iops,
            readahead_kb: p.readahead_kb,
            source: p.source.into(),
        }
    }
}

/// The emulated drive of a comparison (`--disk`): each server read its
/// files from a fresh `vodlab disk mount` of this profile before every run,
/// and a run's disk figures are the drive model's statistics (the full
/// statistics are in the run's directory, `disk.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EmulatedDisk {
    /// Profile name or file as given.
    pub profile: String,
    /// The profile's own description.
    pub description: String,
    /// Time compression k of the drive model (only the drive's times).
    pub time_compression: f64,
    /// Further `vodlab disk mount` arguments (placement, scheduler).
    #[serde(default)]
    pub mount_args: Vec<String>,
}

/// `vodlab fileset seqread` in the box from a cold cache.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SeqRead {
    /// Bytes read from the device.
    pub bytes_read: u64,
    /// Seconds it took.
    pub seconds: f64,
    /// `bytes_read / seconds`, MB/s (10^6 bytes).
    pub mb_s: f64,
    /// What seqread printed.
    pub output: String,
}

/// A server's row of the comparison.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerRow {
    /// The row's name: the server (`nginx`, `vodlab-asap`, ...) or a
    /// configuration of it (`vodlab-asap:fixed:2M`, `vodlab-asap:auto`).
    pub server: String,
    /// The server program of the row (absent in files written before rows
    /// had configurations: then `server`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The `vodlab serve --prefetch-policy` the row ran with, as the
    /// server spells it (`None`: the server's default, or not vodlab).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefetch_policy: Option<String>,
    /// Further `vodlab serve` arguments of every vodlab row (`--serve-arg`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub serve_args: Vec<String>,
    /// Its search's answer.
    pub answer: Answer,
    /// How its search ended.
    pub outcome: SearchOutcome,
    /// Figures at the highest passing rate (means over its runs).
    pub at_capacity: Option<Figures>,
    /// Figures at the lowest failing rate (the server overloaded).
    pub at_overload: Option<Figures>,
    /// Why the server's search stopped early or could not start.
    pub error: Option<String>,
    /// Its capacity.json, relative to the compare.json.
    pub capacity_json: String,
}

/// Means over a point's runs of the figures the comparison shows.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Figures {
    /// Offered sessions/s.
    pub rate: f64,
    /// Delivered MB/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivered_mb_s: Option<f64>,
    /// Read from disk by the box, MB/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk_mb_s: Option<f64>,
    /// Read by the whole device, MB/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_mb_s: Option<f64>,
    /// Mean read size, KiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_read_kib: Option<f64>,
    /// Device ms per read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_ms_per_read: Option<f64>,
    /// Server CPU s per delivered GB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_cpu_s_per_gb: Option<f64>,
    /// Disk bytes per delivered byte, percent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_miss_pct: Option<f64>,
    /// p99 response time, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_p99_ms: Option<f64>,
    /// Concurrent viewers: time average of active sessions over the
    /// measured window ([`crate::capacity::concurrency`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_active_sessions: Option<f64>,
    /// Most sessions active at once (the most of any run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_active_sessions: Option<u64>,
    /// Delivered Gbit/s (10^9 bit/s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivered_gbit_s: Option<f64>,
}

impl Figures {
    /// The means of a point's runs.
    pub fn of(p: &Point) -> Self {
        let m = |f: fn(&RunExtra) -> Option<f64>| p.mean_of(|o| f(&o.extra)).map(|c| c.mean);
        Self {
            rate: p.rate,
            delivered_mb_s: p.throughput().map(|t| t.mean / 1e6),
            disk_mb_s: m(|e| e.disk_mb_s),
            device_mb_s: m(|e| e.device_mb_s),
            mean_read_kib: m(|e| e.mean_read_kib),
            device_ms_per_read: m(|e| e.device_ms_per_read),
            server_cpu_s_per_gb: m(|e| e.server_cpu_s_per_gb),
            cache_miss_pct: m(|e| e.cache_miss_pct),
            response_p99_ms: m(|e| e.response_p99_ms),
            mean_active_sessions: m(|e| e.mean_active_sessions),
            peak_active_sessions: p
                .runs
                .iter()
                .filter_map(|o| o.extra.peak_active_sessions)
                .max(),
            delivered_gbit_s: p.throughput().map(|t| t.mean * 8.0 / 1e9),
        }
    }
}

/// Adds the disk and CPU figures of one run of `secs` seconds: `device` is
/// the device's counters over the run, `usage` the box's before and after
/// (when the run was in a box; else the device's counters stand in).
pub fn add_box_figures(
    e: &mut RunExtra,
    secs: f64,
    device: Option<DeviceStat>,
    usage: Option<(Usage, Usage)>,
) {
    let secs = secs.max(1e-3);
    let delivered = e.delivered_bytes.unwrap_or(0);
    if let Some(d) = device {
        e.device_mb_s = Some(d.read_bytes as f64 / 1e6 / secs);
        if d.reads > 0 {
            e.device_ms_per_read = Some(d.read_ms as f64 / d.reads as f64);
        }
    }
    if let Some((u0, u1)) = usage {
        let read = u1.read_bytes.saturating_sub(u0.read_bytes);
        let ios = u1.read_ios.saturating_sub(u0.read_ios);
        e.disk_bytes = Some(read);
        e.disk_mb_s = Some(read as f64 / 1e6 / secs);
        if ios > 0 {
            e.mean_read_kib = Some(read as f64 / ios as f64 / 1024.0);
        }
        if delivered > 0 {
            e.cache_miss_pct = Some(100.0 * read as f64 / delivered as f64);
        }
        if let (Some(c0), Some(c1)) = (u0.cpu_ns, u1.cpu_ns) {
            let cpu = c1.saturating_sub(c0) as f64 / 1e9;
            e.server_cpu_s = Some(cpu);
            if delivered > 0 {
                e.server_cpu_s_per_gb = Some(cpu / (delivered as f64 / 1e9));
            }
        }
        if let Some(p) = u1.memory_peak_bytes {
            e.box_memory_peak_bytes = Some(p);
        }
    } else if let Some(d) = device {
        e.disk_mb_s = Some(d.read_bytes as f64 / 1e6 / secs);
        if d.reads > 0 {
            e.mean_read_kib = Some(d.read_bytes as f64 / d.reads as f64 / 1024.0);
        }
    }
}

impl CompareFile {
    /// Parses a compare.json of version 1 or 2.
    pub fn from_json(text: &str) -> Result<Self, FileError> {
        parse_versioned(text, COMPARE_FORMAT, COMPARE_VERSION, |v, version| {
            if version == 1 {
                upgrade_v1(v);
            }
        })
    }

    /// Reads a compare.json.
    pub fn read(path: &Path) -> Result<Self, FileError> {
        read_with(path, Self::from_json)
    }

    /// Writes it (pretty JSON and a newline).
    pub fn write(&self, path: &Path) -> Result<(), FileError> {
        write_pretty(path, self)
    }

    /// The row of `server`.
    pub fn server(&self, server: &str) -> Option<&ServerRow> {
        self.servers.iter().find(|r| r.server == server)
    }
}

/// Version 1 rows had no outcome; derive it from the answer and the error.
fn upgrade_v1(v: &mut Value) {
    let Some(rows) = v.get_mut("servers").and_then(Value::as_array_mut) else {
        return;
    };
    for r in rows {
        if r.get("outcome").is_some() {
            continue;
        }
        let outcome = SearchOutcome::from_v1(r);
        if let (Some(o), Ok(x)) = (r.as_object_mut(), serde_json::to_value(outcome)) {
            o.insert("outcome".into(), x);
        }
    }
}

#[cfg(test)]
mod drive_tests {
    use super::*;

    #[test]
    fn a_drive_late_by_more_than_a_tenth_makes_the_run_invalid() {
        assert_eq!(drive_fell_behind(0.0, 1.0), None);
        assert_eq!(drive_fell_behind(0.10, 4.0), None, "10 % is still within");
        let why = drive_fell_behind(0.25, 8.0).expect("25 % is not");
        assert!(why.contains("25 %") && why.contains("k = 8"), "{why}");
    }
}
