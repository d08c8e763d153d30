//! `vodlab disk mount` on a workload directory (or a backing directory):
//! its settings (deriving clap's `Args` with the `cli` feature) and the
//! work — the profile, the file set, a stale mount cleaned, the mount, the
//! statistics file, the unmount; the caller prints through a
//! [`MountObserver`].

use std::path::{Path, PathBuf};

use thiserror::Error;
use vodlab_disk::{
    DiskOptions, Origin, PlacementConfig, Profile, ProfileError, Scheduler, SsdParams,
};

use crate::{sys, Ended, FileSet, MountConfig, MountError, Mounted, Report, STATS_FILE};

/// Why `vodlab disk mount` failed.
#[derive(Debug, Error)]
pub enum CommandError {
    /// The drive profile could not be read.
    #[error(transparent)]
    Profile(#[from] ProfileError),
    /// `--time-compression` is not a finite number > 0.
    #[error("--time-compression must be a finite number > 0, got {0}")]
    TimeCompression(f64),
    /// WORKLOAD `-` without `--backing`.
    #[error("WORKLOAD `-` needs --backing DIR")]
    NeedsBacking,
    /// The workload could not be loaded.
    #[error(transparent)]
    Load(#[from] vodlab_fileset::command::LoadError),
    /// The mount point is not a directory.
    #[error("{}: not a directory", .0.display())]
    NotADirectory(PathBuf),
    /// The set could not be made or mounted.
    #[error(transparent)]
    Mount(#[from] MountError),
    /// An I/O error (cleaning a stale mount, waiting for the end).
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// The file system could not be unmounted.
    #[error("unmounting")]
    Unmount(#[source] std::io::Error),
    /// The statistics file could not be written.
    #[error(transparent)]
    Stats(#[from] StatsError),
}

/// Why the statistics file (`--stats`) could not be written.
#[derive(Debug, Error)]
pub enum StatsError {
    /// The report could not be serialised.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// The file could not be written.
    #[error("writing {}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// What `vodlab disk mount` reports as it goes.
pub trait MountObserver {
    /// A stale mount (its daemon died) was cleaned at `mountpoint`.
    fn stale_cleaned(&mut self, mountpoint: &Path);
    /// The set is mounted.
    fn mounted(&mut self, m: &MountedSet<'_>);
    /// The statistics file could not be rewritten (the mount goes on).
    fn stats_not_written(&mut self, e: StatsError);
}

/// A mounted set, as [`MountObserver::mounted`] sees it.
pub struct MountedSet<'a> {
    /// The mount.
    pub mounted: &'a Mounted,
    /// Its configuration.
    pub config: &'a MountConfig,
    /// Files in the set.
    pub files: usize,
    /// Bytes in the set.
    pub bytes: u64,
    /// What the set is ([`FileSet::label`]).
    pub label: &'a str,
}

impl MountedSet<'_> {
    /// What `vodlab disk mount` prints once mounted (`a` gave the mount).
    pub fn summary(&self, a: &MountArgs) -> String {
        let m = self.mounted;
        let r = m.report();
        format!(
            "mounted {} files, {:.2} GiB ({}) at {} on {} (k = {}, {:?}, placement {}: bytes {}..{} of the drive); read-ahead {} KiB (/sys/class/bdi/{}/read_ahead_kb); statistics in {}/{STATS_FILE}; synthesized bytes made with {}; Ctrl-C to unmount",
            self.files,
            self.bytes as f64 / 1073741824.0,
            self.label,
            a.mountpoint.display(),
            self.config.profile.name,
            a.time_compression,
            a.scheduler,
            r.mount.placement,
            r.mount.set_start,
            r.mount.set_start + r.mount.set_span,
            m.readahead_kib(),
            m.bdi(),
            a.mountpoint.display(),
            crate::synth::chosen(),
        )
    }
}

/// How a mount ended.
#[derive(Debug)]
pub struct Unmounted {
    /// Why it ended.
    pub ended: Ended,
    /// The statistics at unmount.
    pub report: Report,
}

impl Unmounted {
    /// What `vodlab disk mount` prints at the end (`mountpoint` was
    /// mounted).
    pub fn summary(&self, mountpoint: &Path) -> String {
        let how = match self.ended {
            Ended::Signal(s) => format!("signal {s}"),
            Ended::Unmounted => "unmounted from outside".to_string(),
        };
        let r = &self.report;
        format!(
            "unmounted {} ({how}): {} FUSE reads, {:.1} MiB; drive: {} reads, {:.1} MB/s over {:.1} s of model time, mean read {:.0} KiB in {:.2} ms, {} seeks (mean {:.1} MB), busy {:.0} %",
            mountpoint.display(),
            r.fuse.reads,
            r.fuse.bytes as f64 / 1048576.0,
            r.disk.reads,
            r.derived.throughput_mb_s,
            r.disk.elapsed_ns / 1e9,
            r.derived.mean_read_bytes / 1024.0,
            r.derived.mean_service_ms,
            r.disk.seeks,
            r.derived.mean_seek_distance_bytes / 1e6,
            r.derived.busy_fraction * 100.0,
        )
    }
}

/// `vodlab disk mount`.
#[derive(Debug)]
#[cfg_attr(feature = "cli", derive(clap::Args))]
pub struct MountArgs {
    /// A `vodlab gen` directory, or `-` with --backing to serve every file
    /// under the backing directory (path order).
    pub workload: PathBuf,
    /// An existing empty directory. A stale mount left there by a killed
    /// daemon is cleaned first.
    pub mountpoint: PathBuf,
    /// A shipped profile (`vodlab disk profiles`) or a profile TOML file
    /// (`--profile` is an older name).
    #[cfg_attr(
        feature = "cli",
        arg(
            long = "disk-profile",
            alias = "profile",
            value_name = "NAME|FILE",
            required_unless_present = "zero_time"
        )
    )]
    pub profile: Option<String>,
    /// Where the file set sits on the drive: from address 0 (outer, fast
    /// tracks) or ending at the last address (inner, slow).
    #[cfg_attr(feature = "cli", arg(long, default_value = "low", value_parser = parse_origin))]
    pub placement: Origin,
    /// The drive's queue: fifo, clook (elevator) or tagged:N (the drive
    /// picks the shortest positioning time among the first N).
    #[cfg_attr(feature = "cli", arg(long, default_value = "clook", value_parser = parse_scheduler))]
    pub scheduler: Scheduler,
    /// Time compression k: every modelled time is divided by k.
    #[cfg_attr(feature = "cli", arg(long, default_value_t = 1.0, value_name = "K"))]
    pub time_compression: f64,
    /// Seed of the platter's initial phase and head position.
    #[cfg_attr(feature = "cli", arg(long, default_value_t = 0))]
    pub seed: u64,
    /// Serve real files from DIR through the model: the workload's paths
    /// under DIR, or with WORKLOAD `-`, every regular file under DIR.
    #[cfg_attr(feature = "cli", arg(long, value_name = "DIR"))]
    pub backing: Option<PathBuf>,
    /// Rewrite the statistics (JSON) to FILE every second and at unmount.
    #[cfg_attr(feature = "cli", arg(long, value_name = "FILE"))]
    pub stats: Option<PathBuf>,
    /// The mount's read-ahead, KiB (default: the profile's
    /// mount_readahead_kib, 128 unless it says otherwise).
    #[cfg_attr(feature = "cli", arg(long, value_name = "KIB"))]
    pub readahead_kib: Option<u32>,
    /// A drive that takes no time (0 latency, unbounded bandwidth), to
    /// measure the daemon itself. Replaces --disk-profile.
    #[cfg_attr(feature = "cli", arg(long, conflicts_with = "profile"))]
    pub zero_time: bool,
    /// FUSE worker threads (default: one per CPU, 2 to 4).
    #[cfg_attr(feature = "cli", arg(long))]
    pub threads: Option<usize>,
    /// Do not ask fusermount3 to unmount if the daemon dies (tests use it
    /// to leave a stale mount on purpose).
    #[cfg_attr(feature = "cli", arg(long, hide = true))]
    pub no_auto_unmount: bool,
}

/// `--placement`: `low` or `high`.
pub fn parse_origin(s: &str) -> Result<Origin, String> {
    s.parse().map_err(|e: vodlab_disk::DiskError| e.to_string())
}

/// `--scheduler`: `fifo`, `clook` or `tagged:N`.
pub fn parse_scheduler(s: &str) -> Result<Scheduler, String> {
    s.parse().map_err(|e: vodlab_disk::DiskError| e.to_string())
}

/// A drive on which every read takes no time.
pub fn zero_time_profile() -> Profile {
    Profile {
        name: "zero-time".into(),
        description: "no latency, unbounded bandwidth: the FUSE daemon's own speed".into(),
        mount_readahead_kib: 128,
        hdd: None,
        ssd: Some(SsdParams {
            capacity_bytes: 1 << 60,
            read_latency_us: 0.0,
            bandwidth_mb_s: 1e12,
            parallelism: 4096,
        }),
    }
}

/// Writes `r` as JSON to `path` (through a temporary file, renamed).
pub fn write_stats(path: &Path, r: &Report) -> Result<(), StatsError> {
    let tmp = path.with_extension("json.tmp");
    let failed = |path: &Path| {
        let path = path.to_path_buf();
        move |source| StatsError::Write { path, source }
    };
    std::fs::write(&tmp, serde_json::to_vec_pretty(r)?).map_err(failed(&tmp))?;
    std::fs::rename(&tmp, path).map_err(failed(path))
}

/// `vodlab disk mount`: mounts the set `a` describes, rewrites `--stats`
/// every second, waits for a signal or an unmount from outside, unmounts
/// and writes the last statistics.
pub fn mount(a: &MountArgs, obs: &mut impl MountObserver) -> Result<Unmounted, CommandError> {
    let profile = match &a.profile {
        _ if a.zero_time => zero_time_profile(),
        Some(p) => Profile::resolve(p)?,
        None => unreachable!("clap requires --disk-profile or --zero-time"),
    };
    if !(a.time_compression.is_finite() && a.time_compression > 0.0) {
        return Err(CommandError::TimeCompression(a.time_compression));
    }
    let set = match (a.workload.as_os_str() == "-", &a.backing) {
        (true, Some(dir)) => FileSet::from_dir(dir)?,
        (true, None) => return Err(CommandError::NeedsBacking),
        (false, backing) => {
            let (m, c) = vodlab_fileset::command::load(&a.workload)?;
            match backing {
                None => FileSet::from_catalog(&m.name, m.seed, &c),
                Some(dir) => FileSet::from_catalog_backed(&m.name, m.seed, &c, dir)?,
            }
        }
    };
    if !a.mountpoint.is_dir() && !sys::is_stale(&a.mountpoint) {
        return Err(CommandError::NotADirectory(a.mountpoint.clone()));
    }
    if sys::clean_stale(&a.mountpoint)? {
        obs.stale_cleaned(&a.mountpoint);
    }
    let mut cfg = MountConfig::new(profile);
    cfg.options = DiskOptions {
        scheduler: a.scheduler,
        time_compression: a.time_compression,
        seed: a.seed,
        rotation: None,
    };
    cfg.placement = PlacementConfig {
        origin: a.placement,
        ..PlacementConfig::default()
    };
    cfg.readahead_kib = a.readahead_kib;
    cfg.auto_unmount = !a.no_auto_unmount;
    if let Some(t) = a.threads {
        cfg.threads = t;
    }
    let (files, bytes) = (set.files.len(), set.bytes());
    let label = set.label.clone();
    let m = crate::mount(set, &a.mountpoint, &cfg)?;
    obs.mounted(&MountedSet {
        mounted: &m,
        config: &cfg,
        files,
        bytes,
        label: &label,
    });
    let mut tick = |r: &Report| {
        if let Some(p) = &a.stats {
            if let Err(e) = write_stats(p, r) {
                obs.stats_not_written(e);
            }
        }
    };
    let ended = m.wait(&mut tick)?;
    let report = m.unmount().map_err(CommandError::Unmount)?;
    if let Some(p) = &a.stats {
        write_stats(p, &report)?;
    }
    Ok(Unmounted { ended, report })
}
