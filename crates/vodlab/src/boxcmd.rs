//! `vodlab box`: run a command on emulated hardware (a cgroup with a memory
//! limit that includes the page cache, and either an emulated drive —
//! `--disk`, `vodlab disk mount` outside the box — or a throttled block
//! device, cgroup io.max).

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::Args;
use vodlab_diskfs::{Report, STATS_FILE};
use vodlab_lab::hwbox::{self, BoxSpec, Dev, HwBox, Profile};

/// `--read-bps`: a rate ([`vodlab_units::parse_rate`]) in whole bytes/s,
/// at least 1.
fn parse_read_rate(s: &str) -> Result<u64, String> {
    match vodlab_units::parse_rate(s)
        .map_err(|e| e.to_string())?
        .bytes_per_s()
    {
        0 => Err(format!("`{}`: a read limit of at least 1 byte/s", s.trim())),
        b => Ok(b),
    }
}

/// Hardware settings shared by `box` and `compare`.
#[derive(Debug, Clone, Args)]
pub struct HwArgs {
    /// Disk to emulate: hdd-5400, hdd-7200 or ssd (docs/experiments.md
    /// lists the numbers and their sources). Without it only --mem and the
    /// explicit limits apply. (`--profile` is an older name.)
    #[arg(long = "throttle-profile", alias = "profile", value_name = "PROFILE")]
    pub profile: Option<String>,
    /// Memory limit, page cache included (a size: 512M = 512 MiB, 1.5G,
    /// 500MB = 5×10^8 bytes).
    #[arg(long, value_parser = vodlab_units::parse_size, value_name = "SIZE")]
    pub mem: Option<u64>,
    /// The block device to throttle is the one holding this path
    /// (default: the current directory).
    #[arg(long, value_name = "PATH")]
    pub device_of: Option<PathBuf>,
    /// Read limit in bytes/s (overrides the profile's): a rate, `60M` =
    /// 60 MiB/s, `100MB/s`, `800Mbit`.
    #[arg(long, value_parser = parse_read_rate, value_name = "RATE")]
    pub read_bps: Option<u64>,
    /// Read operations/s limit (overrides the profile's).
    #[arg(long, value_name = "IOPS")]
    pub read_iops: Option<u64>,
    /// Device read-ahead while the box lives, KiB (profiles set 128, Linux's
    /// default for a disk; `keep` leaves the device's own). Restored after.
    #[arg(long, value_name = "KIB|keep")]
    pub readahead_kb: Option<String>,
}

impl HwArgs {
    /// The profile, if named.
    pub fn profile(&self) -> anyhow::Result<Option<Profile>> {
        Ok(match &self.profile {
            Some(p) => Some(hwbox::profile(p)?),
            None => None,
        })
    }

    /// The box these settings describe, named `name`.
    pub fn spec(&self, name: &str, default_path: &std::path::Path) -> anyhow::Result<BoxSpec> {
        let p = self.profile()?;
        let read_bps = self.read_bps.or(p.map(|p| p.read_bps));
        let read_iops = self.read_iops.or(p.map(|p| p.read_iops));
        let readahead_kb = match self.readahead_kb.as_deref() {
            Some("keep") => None,
            Some(v) => Some(
                v.parse::<u32>()
                    .with_context(|| format!("--readahead-kb `{v}`: give KiB or `keep`"))?,
            ),
            None => p.map(|p| p.readahead_kb),
        };
        let needs_dev = read_bps.is_some() || read_iops.is_some() || readahead_kb.is_some();
        let device = if needs_dev {
            let path = self.device_of.as_deref().unwrap_or(default_path);
            Some(Dev::of_path(path)?)
        } else {
            None
        };
        anyhow::ensure!(
            self.mem.is_some() || needs_dev,
            "the box has no limits: give --mem (with or without --disk), --throttle-profile, --read-bps or --read-iops"
        );
        Ok(BoxSpec {
            name: name.to_string(),
            mem_bytes: self.mem,
            device,
            read_bps,
            read_iops,
            readahead_kb,
        })
    }
}

/// Arguments of `vodlab box`.
#[derive(Debug, Args)]
pub struct BoxArgs {
    #[command(flatten)]
    pub hw: HwArgs,
    #[command(flatten)]
    pub disk: DiskArgs,
    /// With --disk: the `vodlab gen` workload whose file set the emulated
    /// drive presents.
    #[arg(long, value_name = "DIR", requires = "disk")]
    pub workload: Option<PathBuf>,
    /// Time compression k of the whole experiment: the emulated drive's
    /// times / k, and the command gets VODLAB_TIME_COMPRESSION=K (the
    /// default of `vodlab serve` and `vodlab run --time-compression`) and
    /// `{k}` in its arguments replaced by K. Run the load with the same k.
    #[arg(long, default_value_t = 1.0, value_name = "K", requires = "disk")]
    pub time_compression: f64,
    /// Cgroup name.
    #[arg(long, default_value = "vodlab-box")]
    pub name: String,
    /// The command and its arguments (after `--`). With --disk, `{mount}`
    /// in an argument becomes the mount point, also given to the command as
    /// VODLAB_DISK_MOUNT.
    #[arg(last = true, required = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// One line describing a box.
pub fn describe(b: &HwBox) -> String {
    let s = &b.spec;
    let mut parts = vec![format!("cgroup {} {}", b.cgroups.version(), s.name)];
    if let Some(m) = s.mem_bytes {
        parts.push(format!("memory {} MiB (page cache included)", m >> 20));
    }
    if let Some(d) = s.device {
        let mut t = format!("device {d}");
        if let Some(v) = s.read_bps {
            t += &format!(" reads {:.1} MB/s", v as f64 / 1e6);
        }
        if let Some(v) = s.read_iops {
            t += &format!(" {v} IOPS");
        }
        if let Some(v) = s.readahead_kb {
            t += &format!(" read-ahead {v} KiB");
        }
        parts.push(t);
    }
    parts.join(", ")
}

pub fn run(a: BoxArgs) -> anyhow::Result<ExitCode> {
    let cwd = std::env::current_dir()?;
    let spec = a.hw.spec(&a.name, &cwd)?;
    let disk = a.disk.spec(a.workload.as_deref(), a.time_compression)?;
    let mut b = HwBox::create(spec)?;
    eprintln!(
        "vodlab box: {} (limits read back and verified)",
        describe(&b)
    );
    // the drive's daemon outside the box: its CPU and memory are not the server's
    let mut daemon = match &disk {
        Some(d) => Some(DiskDaemon::start(d, a.disk.mount.as_deref())?),
        None => None,
    };
    if let Some(d) = &daemon {
        eprintln!("vodlab box: emulated disk: {}", d.mounted());
    }
    let mount = daemon.as_ref().map(|d| d.mountpoint().to_path_buf());
    let k = a.time_compression.to_string();
    let args: Vec<String> = match &mount {
        Some(m) => a
            .command
            .iter()
            .map(|x| {
                x.replace("{mount}", &m.display().to_string())
                    .replace("{k}", &k)
            })
            .collect(),
        None => a.command.clone(),
    };
    let mut cmd = Command::new(&args[0]);
    cmd.args(&args[1..]);
    if let Some(m) = &mount {
        cmd.env("VODLAB_DISK_MOUNT", m);
        cmd.env(crate::run::TIME_COMPRESSION_ENV, &k);
    }
    b.command(&mut cmd);
    let before = b.usage()?;
    let t = Instant::now();
    let mut child = cmd
        .spawn()
        .with_context(|| format!("starting {}", args[0]))?;
    // the child shares our terminal and process group, so Ctrl-C reaches it;
    // we ignore it (after the spawn, so the child does not inherit that) and
    // tear the box down once the child has ended
    // SAFETY: changes this process's SIGINT disposition only
    unsafe { libc::signal(libc::SIGINT, libc::SIG_IGN) };
    let mut daemon_died = None;
    let status = loop {
        if let Some(st) = child.try_wait()? {
            break st;
        }
        if let Some(d) = &mut daemon {
            if let Err(e) = d.check() {
                // the server's files are gone: end the command (and all in the box)
                eprintln!("vodlab box: {e:#}; ending the command");
                // SAFETY: signals our own child by its pid
                unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
                daemon_died = Some(e);
                break child.wait()?;
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let secs = t.elapsed().as_secs_f64();
    let after = b.usage()?;
    let read = after.read_bytes.saturating_sub(before.read_bytes);
    let ios = after.read_ios.saturating_sub(before.read_ios);
    let device = if b.spec.device.is_some() {
        format!(
            "device reads {:.1} MB ({:.1} MB/s, {ios} reads{}), ",
            read as f64 / 1e6,
            read as f64 / 1e6 / secs.max(1e-9),
            if ios > 0 {
                format!(", {:.0} KiB each", read as f64 / ios as f64 / 1024.0)
            } else {
                String::new()
            },
        )
    } else {
        String::new()
    };
    eprintln!(
        "vodlab box: {} after {secs:.1} s; {device}CPU {}, memory peak {}",
        status,
        after.cpu_ns.map_or("n/a".into(), |c| format!(
            "{:.2} s",
            c.saturating_sub(before.cpu_ns.unwrap_or(0)) as f64 / 1e9
        )),
        after
            .memory_peak_bytes
            .map_or("n/a".into(), |m| format!("{} MiB", m >> 20)),
    );
    // the box's processes end before the drive goes (a lazy unmount under
    // a live reader would keep the daemon's files busy)
    b.teardown()?;
    if let Some(d) = daemon.take() {
        match d.stop() {
            Ok(r) => eprintln!("vodlab box: {}", describe_disk(&r)),
            Err(e) if daemon_died.is_some() => {
                eprintln!("vodlab box: no final disk statistics: {e:#}")
            }
            Err(e) => return Err(e),
        }
    }
    if let Some(e) = daemon_died {
        return Err(e.context("the emulated disk died under the command"));
    }
    Ok(match status.code() {
        Some(0) => ExitCode::SUCCESS,
        Some(c) => ExitCode::from(c.clamp(1, 255) as u8),
        None => ExitCode::from(1),
    })
}

/// The emulated disk of a box (`--disk`).
#[derive(Debug, Clone, Args)]
pub struct DiskArgs {
    /// Serve the workload's file set from an emulated drive of this profile
    /// (`vodlab disk profiles`, or a profile TOML file): `vodlab disk mount`
    /// runs outside the box, the command inside reads the mount. Replaces
    /// the io.max throttle (--throttle-profile, --read-bps, --read-iops).
    #[arg(long, value_name = "PROFILE", conflicts_with_all = ["profile", "read_bps", "read_iops", "device_of", "readahead_kb"])]
    pub disk: Option<String>,
    /// Where to mount the emulated drive (an empty directory; default: a
    /// new directory under the temporary directory, removed after).
    #[arg(long, value_name = "DIR", requires = "disk")]
    pub mount: Option<PathBuf>,
    /// Extra argument for `vodlab disk mount` (repeatable), e.g.
    /// --disk-arg=--placement=high or --disk-arg=--scheduler=tagged:32.
    #[arg(
        long = "disk-arg",
        value_name = "ARG",
        allow_hyphen_values = true,
        requires = "disk"
    )]
    pub disk_args: Vec<String>,
}

impl DiskArgs {
    /// The daemon's settings for `workload`'s file set, if `--disk` was
    /// given, with the experiment's time compression `k` (`--time-compression`).
    pub fn spec(&self, workload: Option<&Path>, k: f64) -> anyhow::Result<Option<DiskSpec>> {
        let Some(profile) = &self.disk else {
            return Ok(None);
        };
        let workload = workload
            .context(
                "--disk needs --workload DIR (the workload whose file set the drive presents)",
            )?
            .to_path_buf();
        vodlab_workload::TimeCompression::new(k)?;
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
    /// directory) and returns once the mount answers.
    pub fn start(spec: &DiskSpec, mountpoint: Option<&Path>) -> anyhow::Result<DiskDaemon> {
        let tmp = tempfile::Builder::new().prefix("vodlab-disk-").tempdir()?;
        // servers that drop privileges (www-data) must reach a mount inside it
        std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755))?;
        let mountpoint = match mountpoint {
            Some(m) => {
                if !m.exists() && !vodlab_diskfs::sys::is_stale(m) {
                    std::fs::create_dir_all(m)
                        .with_context(|| format!("creating the mount point {}", m.display()))?;
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
        let mut cmd = Command::new(std::env::current_exe()?);
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
        let mut child = cmd.spawn().context("starting vodlab disk mount")?;
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
                bail!(
                    "vodlab disk mount {} did not mount ({}): {}",
                    d.mountpoint.display(),
                    match got {
                        Ok(l) => l,
                        Err(_) => "no answer".into(),
                    },
                    err.trim()
                )
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
    pub fn check(&mut self) -> anyhow::Result<()> {
        if let Some(c) = &mut self.child {
            if let Some(st) = c.try_wait()? {
                let err = std::fs::read_to_string(&self.stderr).unwrap_or_default();
                bail!(
                    "the emulated disk's daemon (vodlab disk mount) ended ({st}): {}",
                    err.trim()
                );
            }
        }
        Ok(())
    }

    /// The statistics now (read from the mount's statistics file).
    pub fn report(&self) -> anyhow::Result<Report> {
        let p = self.mountpoint.join(STATS_FILE);
        let bytes = std::fs::read(&p).with_context(|| format!("reading {}", p.display()))?;
        Ok(serde_json::from_slice(&bytes)?)
    }

    fn stop_inner(&mut self) -> anyhow::Result<()> {
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
    pub fn stop(mut self) -> anyhow::Result<Report> {
        self.stop_inner()?;
        let bytes = std::fs::read(&self.stats)
            .with_context(|| format!("reading the final statistics {}", self.stats.display()))?;
        Ok(serde_json::from_slice(&bytes)?)
    }
}

impl Drop for DiskDaemon {
    fn drop(&mut self) {
        if let Err(e) = self.stop_inner() {
            eprintln!("vodlab: stopping the emulated disk: {e:#}");
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
