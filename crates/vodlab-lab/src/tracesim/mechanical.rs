//! The mechanical drive model of `vodlab simulate --prefetch --disk
//! mechanical[:PROFILE]`: the prefetch
//! reads a policy made, replayed on the mechanical drive model of
//! `vodlab-disk` (seek curve, rotation, zones, queue) instead of the thesis's
//! linear utilisation model. Each drive holds the workload's files that the
//! simulator maps to it (by the same hash of the path), placed on its block
//! space in creation order as `vodlab fileset` / `vodlab disk mount` place a
//! file set; every prefetch is one read of its bytes at the file's address,
//! submitted at its trace time. Utilisation per bucket is the model's busy
//! time in that bucket over the bucket's length (queued work carries over
//! into later buckets, so it never exceeds 100 %).
//!
//! The model is pure: `now` is the trace's time, passed in.

use std::collections::HashMap;
use std::time::Duration;

use serde::Serialize;
use vodlab_disk::{Disk, DiskOptions, Layout, LayoutBuilder, PlacementConfig, Profile};
use vodlab_prefetch::sim::DeviceRead;

use super::TraceError;

fn disk_err(e: impl std::fmt::Display) -> TraceError {
    TraceError::Disk(e.to_string())
}

/// The shipped profile of the thesis's chapter-5 drive (Hitachi Deskstar
/// 5K3000, the source of the linear model's 125.5 MB/s and 39.4 seeks/s).
pub const DEFAULT_PROFILE: &str = "hitachi-5k3000";

/// Which drive model `--disk` asks for.
#[derive(Debug, Clone, PartialEq)]
pub enum DiskChoice {
    /// The thesis's linear model only (t/125.5 MB/s + s/39.4 seeks/s).
    Linear,
    /// The mechanical model as well, with this profile (name or file).
    Mechanical(String),
}

impl DiskChoice {
    /// Parses `linear`, `mechanical` or `mechanical:PROFILE`.
    pub fn parse(s: &str) -> Result<DiskChoice, TraceError> {
        match s.split_once(':') {
            None if s == "linear" => Ok(DiskChoice::Linear),
            None if s == "mechanical" => Ok(DiskChoice::Mechanical(DEFAULT_PROFILE.into())),
            Some(("mechanical", p)) if !p.is_empty() => Ok(DiskChoice::Mechanical(p.into())),
            _ => Err(TraceError::Settings(format!(
                "--disk {s:?}: expected linear, mechanical or mechanical:PROFILE"
            ))),
        }
    }
}

/// The workload's files placed on the drives.
pub struct Placed {
    profile: Profile,
    drives: Vec<Layout>,
    /// file key -> (drive, index in that drive's layout)
    index: HashMap<u64, (u32, usize)>,
}

impl Placed {
    /// Places `files` (key, size, in creation order) on `drives` drives of
    /// `profile`, each file on drive `key % drives` (the linear model's
    /// mapping), each drive's files in creation order from its low end.
    pub fn new(
        profile: Profile,
        drives: u32,
        files: impl IntoIterator<Item = (u64, u64)>,
    ) -> Result<Placed, TraceError> {
        if drives == 0 {
            return Err(TraceError::Settings("--drives must be at least 1".into()));
        }
        let cfg = PlacementConfig::default();
        let mut builders = (0..drives)
            .map(|_| LayoutBuilder::new(cfg))
            .collect::<Result<Vec<_>, _>>()
            .map_err(disk_err)?;
        let mut index = HashMap::new();
        for (key, size) in files {
            let d = (key % drives as u64) as u32;
            let i = builders[d as usize].push_file(size);
            index.insert(key, (d, i));
        }
        let cap = profile.capacity_bytes();
        let drives = builders
            .into_iter()
            .enumerate()
            .map(|(d, b)| {
                b.finish(cap).map_err(|e| {
                    TraceError::Disk(format!(
                        "drive {d}: its share of the file set does not fit a {} drive; give more --drives ({e})",
                        profile.name
                    ))
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Placed {
            profile,
            drives,
            index,
        })
    }

    /// The profile's name.
    pub fn profile_name(&self) -> &str {
        &self.profile.name
    }
}

/// What the mechanical model measured for one policy.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct MechResult {
    /// Drive profile.
    pub profile: String,
    /// Busiest drive's busy fraction in its busiest bucket (1.0 = 100 %).
    pub peak_utilisation: f64,
    /// Mean busy fraction over buckets and drives with any load.
    pub mean_utilisation: f64,
    /// Reads submitted.
    pub reads: u64,
    /// Reads that needed a seek.
    pub seeks: u64,
    /// Mean service time of a read, ms.
    pub mean_service_ms: f64,
    /// Reads of files the placement does not know (not submitted).
    pub unplaced: u64,
}

/// Per drive: the model and the busy time at the start of its current bucket.
struct DriveRun {
    disk: Disk,
    bucket: i64,
    busy_at_start: f64,
}

fn at(t_s: f64) -> Duration {
    Duration::from_secs_f64(t_s.max(0.0))
}

/// Closes `d`'s buckets up to (not including) bucket `to`, calling `out`
/// with each closed bucket's busy fraction; stops early once the drive is
/// idle (the buckets after are empty).
fn close_buckets(
    d: &mut DriveRun,
    to: i64,
    bucket_s: f64,
    out: &mut impl FnMut(f64),
) -> Result<(), TraceError> {
    while d.bucket < to {
        let end = (d.bucket + 1) as f64 * bucket_s;
        d.disk.advance_to(at(end)).map_err(disk_err)?;
        while d.disk.poll_completion(at(end)).map_err(disk_err)?.is_some() {}
        let busy = d.disk.stats().busy_ns;
        out((busy - d.busy_at_start) / (bucket_s * 1e9));
        d.busy_at_start = busy;
        d.bucket += 1;
        if d.disk.next_event_time().is_none() {
            d.bucket = to;
        }
    }
    Ok(())
}

/// Replays `reads` (any order; sorted here by time) on the placed drives,
/// buckets of `bucket_s` seconds.
pub fn replay(
    placed: &Placed,
    reads: &mut [DeviceRead],
    bucket_s: f64,
) -> Result<MechResult, TraceError> {
    reads.sort_by(|a, b| a.t_s.total_cmp(&b.t_s));
    let mut runs: Vec<Option<DriveRun>> = (0..placed.drives.len()).map(|_| None).collect();
    let mut r = MechResult {
        profile: placed.profile.name.clone(),
        ..MechResult::default()
    };
    let (mut sum, mut n) = (0.0, 0u64);
    let mut record = |u: f64| {
        if u > 0.0 {
            sum += u;
            n += 1;
        }
        r.peak_utilisation = r.peak_utilisation.max(u);
    };
    for rd in reads.iter() {
        let Some(&(d, i)) = placed.index.get(&rd.file) else {
            r.unplaced += 1;
            continue;
        };
        let Some(req) = placed.drives[d as usize].read(i, rd.offset, rd.bytes) else {
            r.unplaced += 1;
            continue;
        };
        let b = (rd.t_s / bucket_s).floor() as i64;
        let run = match &mut runs[d as usize] {
            Some(run) => run,
            slot => slot.insert(DriveRun {
                disk: Disk::new(
                    &placed.profile,
                    DiskOptions {
                        seed: d as u64,
                        ..DiskOptions::default()
                    },
                )
                .map_err(disk_err)?,
                bucket: b,
                busy_at_start: 0.0,
            }),
        };
        close_buckets(run, b, bucket_s, &mut record)?;
        run.disk.submit(at(rd.t_s), req).map_err(disk_err)?;
        while run
            .disk
            .poll_completion(at(rd.t_s))
            .map_err(disk_err)?
            .is_some()
        {}
    }
    let (mut seeks, mut reads_done, mut service_us) = (0u64, 0u64, 0.0);
    for run in runs.iter_mut().flatten() {
        // drain the queue, bucket by bucket
        while run.disk.next_event_time().is_some() {
            let b = run.bucket + 1;
            close_buckets(run, b, bucket_s, &mut record)?;
        }
        close_buckets(run, run.bucket + 1, bucket_s, &mut record)?;
        let s = run.disk.stats();
        seeks += s.seeks;
        reads_done += s.reads;
        service_us += s.service_us.0.mean() * s.reads as f64;
    }
    r.mean_utilisation = if n > 0 { sum / n as f64 } else { 0.0 };
    r.reads = reads_done;
    r.seeks = seeks;
    r.mean_service_ms = if reads_done > 0 {
        service_us / reads_done as f64 / 1000.0
    } else {
        0.0
    };
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile() -> Profile {
        vodlab_disk::profile::builtin(DEFAULT_PROFILE).unwrap()
    }

    fn read(t_s: f64, file: u64, offset: u64, bytes: u64) -> DeviceRead {
        DeviceRead {
            t_s,
            drive: (file % 2) as u32,
            file,
            offset,
            bytes,
        }
    }

    #[test]
    fn disk_choices_parse() {
        assert_eq!(DiskChoice::parse("linear").unwrap(), DiskChoice::Linear);
        assert_eq!(
            DiskChoice::parse("mechanical").unwrap(),
            DiskChoice::Mechanical(DEFAULT_PROFILE.into())
        );
        assert_eq!(
            DiskChoice::parse("mechanical:wd10efrx").unwrap(),
            DiskChoice::Mechanical("wd10efrx".into())
        );
        for bad in ["mech", "mechanical:", "linear:x", ""] {
            assert!(DiskChoice::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_tiny_trace_busies_the_drive_for_its_transfers_and_seeks() {
        // two files on drive 0 (keys 2 and 4), one on drive 1 (key 3)
        let placed = Placed::new(
            profile(),
            2,
            [(2, 100_000_000), (3, 50_000_000), (4, 100_000_000)],
        )
        .unwrap();
        // bucket 0: 2 MB from file 2 and 2 MB from file 4 (a seek apart);
        // bucket 2: one 1 MB read of file 3 on drive 1
        let mut reads = vec![
            read(130.0, 3, 0, 1_000_000),
            read(10.0, 4, 0, 2_000_000),
            read(1.0, 2, 0, 2_000_000),
        ];
        let r = replay(&placed, &mut reads, 60.0).unwrap();
        assert_eq!(r.reads, 3);
        assert_eq!(r.unplaced, 0);
        // 2 MB at at most 125.5 MB/s takes at least 16 ms; with a seek and
        // rotation each read takes well under 100 ms
        assert!(
            r.mean_service_ms > 8.0 && r.mean_service_ms < 100.0,
            "{r:?}"
        );
        // drive 0's bucket: two reads of 16-60 ms in 60 s
        assert!(
            r.peak_utilisation > 2.0 * 0.016 / 60.0 && r.peak_utilisation < 0.12 / 60.0,
            "{r:?}"
        );
        // 200 reads of 1 MB alternating between two files keep the drive
        // far busier, and the linear model's figure is of the same order
        let mut many: Vec<DeviceRead> = (0..200)
            .map(|k| {
                read(
                    k as f64 * 0.25,
                    2 + 2 * (k % 2),
                    (k / 2) * 1_000_000,
                    1_000_000,
                )
            })
            .collect();
        let m = replay(&placed, &mut many, 60.0).unwrap();
        assert_eq!((m.reads, m.unplaced), (200, 0));
        let linear = 200e6 / 60.0 / 125.5e6 + 200.0 / 60.0 / 39.4;
        assert!(
            m.peak_utilisation > 0.3 * linear && m.peak_utilisation < 1.0,
            "mechanical {} linear {linear}",
            m.peak_utilisation
        );
        assert!(
            m.peak_utilisation > 20.0 * r.peak_utilisation,
            "{m:?} {r:?}"
        );
    }

    #[test]
    fn an_overloaded_drive_carries_its_queue_into_later_buckets() {
        let placed = Placed::new(profile(), 1, [(7, 2_000_000_000)]).unwrap();
        // 1,000 random 2 MB reads within 1 s: about 25 s of work
        let mut reads: Vec<DeviceRead> = (0..1000u64)
            .map(|k| DeviceRead {
                t_s: k as f64 / 1000.0,
                drive: 0,
                file: 7,
                offset: (k * 7919 % 997) * 2_000_000,
                bytes: 2_000_000,
            })
            .collect();
        let r = replay(&placed, &mut reads, 1.0).unwrap();
        assert_eq!(r.reads, 1000);
        // busy all of each 1 s bucket while the queue lasts, never above
        assert!((r.peak_utilisation - 1.0).abs() < 1e-6, "{r:?}");
        assert!(r.mean_utilisation > 0.9, "{r:?}");
    }

    #[test]
    fn reads_of_unknown_files_are_counted_not_submitted() {
        let placed = Placed::new(profile(), 1, [(1, 1_000_000)]).unwrap();
        let mut reads = vec![read(0.0, 99, 0, 1000), read(0.0, 1, 2_000_000, 10)];
        let r = replay(&placed, &mut reads, 60.0).unwrap();
        assert_eq!((r.reads, r.unplaced), (0, 2));
    }

    #[test]
    fn a_set_too_large_for_the_drives_is_refused() {
        let e = Placed::new(profile(), 1, [(1, 4_000_000_000_000)])
            .err()
            .unwrap();
        assert!(format!("{e:#}").contains("--drives"), "{e:#}");
    }
}
