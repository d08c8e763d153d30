//! The emulated drive of a box (`--disk`): `vodlab disk mount` started as a
//! daemon outside every box ([`DiskDaemon`]), its settings ([`DiskArgs`],
//! [`DiskSpec`]) and its statistics in words ([`describe_disk`]).

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use thiserror::Error;
use vodlab_diskfs::{Report, STATS_FILE};
use vodlab_workload::{TimeCompression, TimeCompressionError};

/// Why the emulated drive could not be started, read or stopped.
#[derive(Debug, Error)]
pub enum DiskdError {
    /// `--disk` without `--workload`.
    #[error("--disk needs --workload DIR (the workload whose file set the drive presents)")]
    NoWorkload,
    /// The time compression is out of its bounds.
    #[error(transparent)]
    TimeCompression(#[from] TimeCompressionError),
    /// The mount point could not be created.
    #[error("creating the mount point {}", path.display())]
    MountPoint {
        /// The mount point.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// `vodlab disk mount` could not be started.
    #[error("starting vodlab disk mount")]
    Start(#[source] std::io::Error),
    /// The daemon did not say it had mounted.
    #[error("vodlab disk mount {} did not mount ({got}): {stderr}", mountpoint.display())]
    NotMounted {
        /// The mount point.
        mountpoint: PathBuf,
        /// What it said instead (or `no answer`).
        got: String,
        /// Its standard error.
        stderr: String,
    },
    /// The daemon ended while in use.
    #[error("the emulated disk's daemon (vodlab disk mount) ended ({status}): {stderr}")]
    Ended {
        /// Its exit status.
        status: ExitStatus,
        /// Its standard error.
        stderr: String,
    },
    /// A statistics file could not be read.
    #[error("reading {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The final statistics could not be read.
    #[error("reading the final statistics {}", path.display())]
    FinalStats {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A statistics file is not what the daemon writes.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// A temporary directory, the daemon's process or its mount failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// The emulated disk of a box (`--disk`).
#[derive(Debug, Clone, Default)]
#[cfg_attr(feature = "cli", derive(clap::Args))]
pub struct DiskArgs {
    /// Serve the workload's file set from an emulated drive of this profile
    /// (`vodlab disk profiles`, or a profile TOML file): `vodlab disk mount`
    /// runs outside the box, the command inside reads the mount. Replaces
    /// the io.max throttle (--throttle-profile, --read-bps, --read-iops).
    #[cfg_attr(feature = "cli", arg(long, value_name = "PROFILE", conflicts_with_all = ["profile", "read_bps", "read_iops", "device_of", "readahead_kb"]))]
    pub disk: Option<String>,
    /// Where to mount the emulated drive (an empty directory; default: a
    /// new directory under the temporary directory, removed after).
    #[cfg_attr(feature = "cli", arg(long, value_name = "DIR", requires = "disk"))]
    pub mount: Option<PathBuf>,
    /// Extra argument for `vodlab disk mount` (repeatable), e.g.
    /// --disk-arg=--placement=high or --disk-arg=--scheduler=tagged:32.
    #[cfg_attr(
        feature = "cli",
        arg(
            long = "disk-arg",
            value_name = "ARG",
            allow_hyphen_values = true,
            requires = "disk"
        )
    )]
    pub disk_args: Vec<String>,
}

impl DiskArgs {
    /// The daemon's settings for `workload`'s file set, if `--disk` was
    /// given, with the experiment's time compression `k` (`--time-compression`).
    pub fn spec(&self, workload: Option<&Path>, k: f64) -> Result<Option<DiskSpec>, DiskdError> {
        let Some(profile) = &self.disk else {
            return Ok(None);
        };
        let workload = workload.ok_or(DiskdError::NoWorkload)?.to_path_buf();
        TimeCompression::new(k)?;
        Ok(Some(DiskSpec {
            workload,
            profile: profile.clone(),
            time_compression: k,
            extra: self.disk_args.clone(),
        }))
    }
}

/// What `vodlab disk mount` is started with.
#[derive(Debug, Clone, PartialEq)]
pub struct DiskSpec {
    /// The workload directory.
    pub workload: PathBuf,
    /// Profile name or file.
    pub profile: String,
    /// Time compression k.
    pub time_compression: f64,
    /// More arguments of `vodlab disk mount`.
    pub extra: Vec<String>,
}

/// A running emulated drive: `vodlab disk mount` as a child process, outside
/// every box (its CPU and memory are not charged to the server), in a
/// process group of its own (Ctrl-C at the terminal reaches the boxed
/// command, not the daemon), told to end with SIGTERM by its pid and killed
/// with us (`PR_SET_PDEATHSIG`; fusermount3's auto_unmount then removes the
/// mount). Dropping it stops it.
pub struct DiskDaemon {
    child: Option<Child>,
    mountpoint: PathBuf,
    stats: PathBuf,
    stderr: PathBuf,
    lines: mpsc::Receiver<String>,
    mounted: String,
    // the stats file, the daemon's stderr and (without --mount) the mount point
    tmp: Option<tempfile::TempDir>,
}

impl DiskDaemon {
    /// Mounts the workload's file set at `mountpoint` (default: a new
    /// directory) with `exe disk mount` (`exe`: the vodlab binary) and
    /// returns once the mount answers.
    pub fn start(
        spec: &DiskSpec,
        mountpoint: Option<&Path>,
        exe: &Path,
    ) -> Result<DiskDaemon, DiskdError> {
        let tmp = tempfile::Builder::new().prefix("vodlab-disk-").tempdir()?;
        // servers that drop privileges (www-data) must reach a mount inside it
        std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755))?;
        let mountpoint = match mountpoint {
            Some(m) => {
                if !m.exists() && !vodlab_diskfs::sys::is_stale(m) {
                    std::fs::create_dir_all(m).map_err(|source| DiskdError::MountPoint {
                        path: m.to_path_buf(),
                        source,
                    })?;
                }
                m.to_path_buf()
            }
            None => {
                let m = tmp.path().join("mnt");
                std::fs::create_dir(&m)?;
                m
            }
        };
        let stats = tmp.path().join("disk-stats.json");
        let stderr = tmp.path().join("disk-mount.stderr");
        let mut cmd = Command::new(exe);
        cmd.args(["disk", "mount"])
            .arg(&spec.workload)
            .arg(&mountpoint)
            .arg("--disk-profile")
            .arg(&spec.profile)
            .arg("--time-compression")
            .arg(spec.time_compression.to_string())
            .arg("--stats")
            .arg(&stats)
            .args(&spec.extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr)?)
            .process_group(0);
        // SAFETY: prctl is async-signal-safe; it only sets this child's death signal
        unsafe {
            cmd.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let mut child = cmd.spawn().map_err(DiskdError::Start)?;
        let out = child.stdout.take().expect("piped");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        let mut d = DiskDaemon {
            child: Some(child),
            mountpoint,
            stats,
            stderr,
            lines,
            mounted: String::new(),
            tmp: Some(tmp),
        };
        match d.lines.recv_timeout(Duration::from_secs(60)) {
            Ok(l) if l.starts_with("mounted") => {
                d.mounted = l;
                Ok(d)
            }
            got => {
                let _ = d.stop_inner();
                let err = std::fs::read_to_string(&d.stderr).unwrap_or_default();
                Err(DiskdError::NotMounted {
                    mountpoint: d.mountpoint.clone(),
                    got: match got {
                        Ok(l) => l,
                        Err(_) => "no answer".into(),
                    },
                    stderr: err.trim().to_string(),
                })
            }
        }
    }

    /// What `vodlab disk mount` said when the mount was up.
    pub fn mounted(&self) -> &str {
        &self.mounted
    }

    /// The mount point (the server's root).
    pub fn mountpoint(&self) -> &Path {
        &self.mountpoint
    }

    /// An error if the daemon has ended.
    pub fn check(&mut self) -> Result<(), DiskdError> {
        if let Some(c) = &mut self.child {
            if let Some(status) = c.try_wait()? {
                let err = std::fs::read_to_string(&self.stderr).unwrap_or_default();
                return Err(DiskdError::Ended {
                    status,
                    stderr: err.trim().to_string(),
                });
            }
        }
        Ok(())
    }

    /// The statistics now (read from the mount's statistics file).
    pub fn report(&self) -> Result<Report, DiskdError> {
        let path = self.mountpoint.join(STATS_FILE);
        let bytes = std::fs::read(&path).map_err(|source| DiskdError::Read {
            path: path.clone(),
            source,
        })?;
        Ok(serde_json::from_slice(&bytes)?)
    }

    fn stop_inner(&mut self) -> Result<(), DiskdError> {
        let Some(mut c) = self.child.take() else {
            return Ok(());
        };
        if c.try_wait()?.is_none() {
            // SAFETY: signals our own child by its pid
            unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
            let deadline = Instant::now() + Duration::from_secs(15);
            while c.try_wait()?.is_none() {
                if Instant::now() > deadline {
                    // SAFETY: as above
                    unsafe { libc::kill(c.id() as i32, libc::SIGKILL) };
                    c.wait()?;
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        // a daemon that was killed may leave its mount behind for a moment
        // (auto_unmount) or for good (no fusermount3 watcher): clean it
        vodlab_diskfs::sys::clean_stale(&self.mountpoint)?;
        if vodlab_diskfs::sys::is_mount_point(&self.mountpoint).unwrap_or(false) {
            vodlab_diskfs::sys::unmount(&self.mountpoint)?;
        }
        Ok(())
    }

    /// Unmounts and returns the final statistics (written by the daemon at
    /// unmount).
    pub fn stop(mut self) -> Result<Report, DiskdError> {
        self.stop_inner()?;
        let bytes = std::fs::read(&self.stats).map_err(|source| DiskdError::FinalStats {
            path: self.stats.clone(),
            source,
        })?;
        Ok(serde_json::from_slice(&bytes)?)
    }
}

impl Drop for DiskDaemon {
    fn drop(&mut self) {
        if let Err(e) = self.stop_inner() {
            eprintln!(
                "vodlab: stopping the emulated disk: {}",
                crate::point::error_chain(&e)
            );
        }
        if let Some(t) = self.tmp.take() {
            // only remove it once nothing is mounted inside
            if !vodlab_diskfs::sys::is_mount_point(&self.mountpoint).unwrap_or(false) {
                let _ = t.close();
            } else {
                let _ = t.keep();
            }
        }
    }
}

/// The disk statistics in a few lines (model time).
pub fn describe_disk(r: &Report) -> String {
    let h = &r.disk.service_us.0;
    format!(
        "emulated disk {} (k = {}): {} reads, {:.1} MB ({:.1} MB/s over {:.1} s of model time), mean read {:.0} KiB, {} seeks (mean distance {:.1} MB), {} sequential, busy {:.0} %, mean queue {:.2}; service ms p50 {:.2} p90 {:.2} p99 {:.2} max {:.2} (mean {:.2}); FUSE: {} reads, {:.1} MB",
        r.mount.profile,
        r.mount.time_compression,
        r.disk.reads,
        r.disk.bytes as f64 / 1e6,
        r.derived.throughput_mb_s,
        r.disk.elapsed_ns / 1e9,
        r.derived.mean_read_bytes / 1024.0,
        r.disk.seeks,
        r.derived.mean_seek_distance_bytes / 1e6,
        r.disk.sequential,
        r.derived.busy_fraction * 100.0,
        r.derived.mean_depth,
        h.value_at_quantile(0.5) as f64 / 1e3,
        h.value_at_quantile(0.9) as f64 / 1e3,
        h.value_at_quantile(0.99) as f64 / 1e3,
        h.max() as f64 / 1e3,
        r.derived.mean_service_ms,
        r.fuse.reads,
        r.fuse.bytes as f64 / 1e6,
    )
}
