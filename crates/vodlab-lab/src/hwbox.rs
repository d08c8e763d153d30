//! Emulated hardware for a server: a cgroup whose memory limit includes the
//! page cache, with the reads of one block device throttled in bytes/s and
//! operations/s (cgroup v2 `memory.max`/`io.max`, or v1
//! `memory.limit_in_bytes`/`blkio.throttle.*`, whichever the machine has),
//! and optionally the device's read-ahead set as a real disk's would be.
//!
//! A throttle is not a disk: it has no seek distance and no elevator, and it
//! charges a read the larger of `1/iops` and `bytes/bps`, where a disk charges
//! the sum of positioning and transfer time. docs/experiments.md says what
//! that means for the results.

use std::ffi::CString;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Why a box could not be made or used.
#[derive(Debug, Error)]
pub enum BoxError {
    /// Cgroups are written under /sys/fs/cgroup, which only root may do.
    #[error("vodlab box needs root: it creates cgroups under /sys/fs/cgroup and sets device limits (run it with sudo)")]
    NotRoot,
    /// Neither cgroup v2 with memory+io nor v1 with memory+blkio is mounted.
    #[error("no usable cgroups: need cgroup v2 with the memory and io controllers, or v1 with memory and blkio mounted under /sys/fs/cgroup ({0})")]
    NoCgroups(String),
    /// The path is not on a block device (tmpfs, overlay without a device, ...).
    #[error("{0}: not on a block device (major 0); put the file set on a disk-backed file system to throttle its reads")]
    NotABlockDevice(PathBuf),
    /// A limit read back differently from what was written.
    #[error("the limit did not take effect: {file} reads `{got}`, expected {want}")]
    NotApplied {
        /// The control file.
        file: PathBuf,
        /// What it holds.
        got: String,
        /// What was written.
        want: String,
    },
    /// A file could not be read or written.
    #[error("{path}: {err}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        err: std::io::Error,
    },
    /// An unknown profile name.
    #[error("unknown hardware profile `{0}` (known: hdd-5400, hdd-7200, ssd)")]
    UnknownProfile(String),
    /// `--readahead-kb` is neither KiB nor `keep`.
    #[error("--readahead-kb `{value}`: give KiB or `keep`")]
    Readahead {
        /// What was given.
        value: String,
        /// Why it is no number.
        source: std::num::ParseIntError,
    },
    /// The settings set no limit at all.
    #[error("the box has no limits: give --mem (with or without --disk), --throttle-profile, --read-bps or --read-iops")]
    NoLimits,
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> BoxError + '_ {
    move |err| BoxError::Io {
        path: path.to_path_buf(),
        err,
    }
}

fn read(path: &Path) -> Result<String, BoxError> {
    fs::read_to_string(path).map_err(io_err(path))
}

fn write(path: &Path, value: &str) -> Result<(), BoxError> {
    fs::write(path, value).map_err(io_err(path))
}

/// A disk to emulate: the numbers the throttle gets and where they come from.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Profile {
    /// Name used on the command line.
    pub name: &'static str,
    /// Read bytes per second.
    pub read_bps: u64,
    /// Read operations per second (stands in for seeks).
    pub read_iops: u64,
    /// Device read-ahead, KiB (Linux's default for a SATA disk is 128).
    pub readahead_kb: u32,
    /// Where the numbers come from.
    pub source: &'static str,
}

/// The built-in profiles (docs/experiments.md explains each number).
pub const PROFILES: &[Profile] = &[
    Profile {
        name: "hdd-5400",
        read_bps: 125_500_000,
        read_iops: 40,
        readahead_kb: 128,
        source: "thesis 5.5 disk model of a 5,400 rpm Hitachi Deskstar 5K3000: t_max 125.5 MB/s sequential, s_max 39.4 seeks/s",
    },
    Profile {
        name: "hdd-7200",
        read_bps: 210_000_000,
        read_iops: 80,
        readahead_kb: 128,
        source: "7,200 rpm Seagate ST1000DM003 (the thesis's second drive): 210 MB/s max sustained (datasheet); 1/(8.5 ms average seek + 4.17 ms half rotation) = 79 reads/s",
    },
    Profile {
        name: "ssd",
        read_bps: 550_000_000,
        read_iops: 90_000,
        readahead_kb: 128,
        source: "SATA III SSD class (e.g. Samsung 860 EVO datasheet: 550 MB/s sequential read, up to 98k random 4 KiB read IOPS)",
    },
];

/// A built-in profile by name.
pub fn profile(name: &str) -> Result<Profile, BoxError> {
    PROFILES
        .iter()
        .find(|p| p.name == name)
        .copied()
        .ok_or_else(|| BoxError::UnknownProfile(name.to_string()))
}

/// Which cgroup hierarchy the machine has.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum Cgroups {
    /// Unified hierarchy at this mount point.
    V2 {
        /// Usually /sys/fs/cgroup.
        root: PathBuf,
    },
    /// Separate controller hierarchies.
    V1 {
        /// The memory controller's mount.
        memory: PathBuf,
        /// The blkio controller's mount.
        blkio: PathBuf,
        /// The cpuacct controller's mount, if any.
        cpuacct: Option<PathBuf>,
    },
}

impl Cgroups {
    /// Finds the hierarchy under /sys/fs/cgroup: v2 when its memory and io
    /// controllers are available, else v1 with memory and blkio.
    pub fn detect() -> Result<Self, BoxError> {
        let base = Path::new("/sys/fs/cgroup");
        if let Ok(c) = fs::read_to_string(base.join("cgroup.controllers")) {
            let have: Vec<&str> = c.split_whitespace().collect();
            if have.contains(&"memory") && have.contains(&"io") {
                return Ok(Self::V2 { root: base.into() });
            }
        }
        let (memory, blkio) = (base.join("memory"), base.join("blkio"));
        if memory.join("memory.limit_in_bytes").exists()
            && blkio.join("blkio.throttle.read_bps_device").exists()
        {
            let cpuacct = ["cpuacct", "cpu,cpuacct"]
                .iter()
                .map(|d| base.join(d))
                .find(|d| d.join("cpuacct.usage").exists());
            return Ok(Self::V1 {
                memory,
                blkio,
                cpuacct,
            });
        }
        Err(BoxError::NoCgroups(
            "neither /sys/fs/cgroup/cgroup.controllers lists memory and io, nor are /sys/fs/cgroup/memory and /sys/fs/cgroup/blkio mounted".into(),
        ))
    }

    /// "v1" or "v2".
    pub fn version(&self) -> &'static str {
        match self {
            Self::V1 { .. } => "v1",
            Self::V2 { .. } => "v2",
        }
    }
}

/// What the box should emulate.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BoxSpec {
    /// Cgroup name (a directory under each hierarchy).
    pub name: String,
    /// Memory limit in bytes, page cache included.
    pub mem_bytes: Option<u64>,
    /// The device whose reads are throttled.
    pub device: Option<Dev>,
    /// Read bytes/s of that device.
    pub read_bps: Option<u64>,
    /// Read operations/s of that device.
    pub read_iops: Option<u64>,
    /// Read-ahead of that device while the box lives, KiB (restored after).
    pub readahead_kb: Option<u32>,
}

/// Usage counters of a box.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Usage {
    /// Bytes the box's processes read from the throttled device.
    pub read_bytes: u64,
    /// Read operations on it.
    pub read_ios: u64,
    /// CPU time of the box's processes, ns (`None`: no CPU accounting).
    pub cpu_ns: Option<u64>,
    /// Memory charged now, bytes (page cache included).
    pub memory_bytes: u64,
    /// Highest memory charged, bytes (`None` when the kernel does not say).
    pub memory_peak_bytes: Option<u64>,
}

/// A live box. Dropping it tears it down.
#[derive(Debug)]
pub struct HwBox {
    /// Its settings.
    pub spec: BoxSpec,
    /// The hierarchy used.
    pub cgroups: Cgroups,
    /// Cgroup directories made (one per v1 controller, one for v2).
    dirs: Vec<PathBuf>,
    saved_readahead: Option<(PathBuf, String)>,
    torn_down: bool,
}

/// Where the devices' own read-ahead values are kept while boxes change them.
const READAHEAD_DIR: &str = "/run/vodlab";

/// Whether any vodlab box (a cgroup named `vodlab-*` that is still there) exists.
fn other_boxes_exist(c: &Cgroups) -> bool {
    let dir = match c {
        Cgroups::V2 { root } => root.clone(),
        Cgroups::V1 { memory, .. } => memory.clone(),
    };
    fs::read_dir(dir).is_ok_and(|rd| {
        rd.flatten()
            .any(|e| e.file_name().to_string_lossy().starts_with("vodlab-") && e.path().is_dir())
    })
}

/// Whether this process runs as root (boxes need it).
pub fn is_root() -> bool {
    // SAFETY: no arguments, cannot fail
    unsafe { libc::geteuid() == 0 }
}

fn parse_first_u64(text: &str) -> Option<u64> {
    text.split_whitespace().next()?.parse().ok()
}

impl HwBox {
    /// Creates the cgroup(s), sets and verifies every limit. A leftover box
    /// of the same name (from a run that was killed) is removed first.
    pub fn create(spec: BoxSpec) -> Result<Self, BoxError> {
        if !is_root() {
            return Err(BoxError::NotRoot);
        }
        let cgroups = Cgroups::detect()?;
        let dirs: Vec<PathBuf> = match &cgroups {
            Cgroups::V2 { root } => vec![root.join(&spec.name)],
            Cgroups::V1 {
                memory,
                blkio,
                cpuacct,
            } => {
                let mut d = vec![memory.join(&spec.name), blkio.join(&spec.name)];
                d.extend(cpuacct.as_ref().map(|c| c.join(&spec.name)));
                d
            }
        };
        let mut b = Self {
            spec,
            cgroups,
            dirs: Vec::new(),
            saved_readahead: None,
            torn_down: false,
        };
        for d in &dirs {
            if d.exists() {
                // left over: empty it of nothing (refuse if it has processes), then remove
                let procs = read(&d.join("cgroup.procs"))?;
                if !procs.trim().is_empty() {
                    return Err(BoxError::Io {
                        path: d.clone(),
                        err: std::io::Error::other(
                            "a box of this name exists and has processes; end them or choose another --name",
                        ),
                    });
                }
                fs::remove_dir(d).map_err(io_err(d))?;
            }
        }
        if let Cgroups::V2 { root } = &b.cgroups {
            let ctl = root.join("cgroup.subtree_control");
            let have = read(&ctl)?;
            for c in ["memory", "io", "cpu"] {
                if !have.split_whitespace().any(|x| x == c) {
                    let _ = fs::write(&ctl, format!("+{c}"));
                }
            }
        }
        for d in &dirs {
            fs::create_dir(d).map_err(io_err(d))?;
            b.dirs.push(d.clone());
        }
        b.apply()?;
        Ok(b)
    }

    fn dir_with(&self, file: &str) -> PathBuf {
        self.dirs
            .iter()
            .map(|d| d.join(file))
            .find(|p| p.exists())
            .unwrap_or_else(|| self.dirs[0].join(file))
    }

    fn apply(&mut self) -> Result<(), BoxError> {
        let spec = self.spec.clone();
        let v2 = matches!(self.cgroups, Cgroups::V2 { .. });
        if let Some(mem) = spec.mem_bytes {
            let f = self.dir_with(if v2 {
                "memory.max"
            } else {
                "memory.limit_in_bytes"
            });
            write(&f, &mem.to_string())?;
            let got = read(&f)?;
            // the kernel rounds down to whole pages
            let ok = parse_first_u64(&got).is_some_and(|g| g <= mem && mem - g < 64 * 1024);
            if !ok {
                return Err(BoxError::NotApplied {
                    file: f,
                    got: got.trim().into(),
                    want: mem.to_string(),
                });
            }
            if v2 {
                // no swap: the limit must bite on the page cache, not push anonymous memory out
                let _ = fs::write(self.dir_with("memory.swap.max"), "0");
            }
        }
        if let Some(dev) = spec.device {
            if v2 {
                let mut line = format!("{dev}");
                if let Some(b) = spec.read_bps {
                    line += &format!(" rbps={b}");
                }
                if let Some(i) = spec.read_iops {
                    line += &format!(" riops={i}");
                }
                if spec.read_bps.is_some() || spec.read_iops.is_some() {
                    let f = self.dir_with("io.max");
                    write(&f, &line)?;
                    let got = read(&f)?;
                    let applied = got.lines().any(|l| {
                        l.starts_with(&format!("{dev} "))
                            && spec
                                .read_bps
                                .is_none_or(|b| l.contains(&format!("rbps={b}")))
                            && spec
                                .read_iops
                                .is_none_or(|i| l.contains(&format!("riops={i}")))
                    });
                    if !applied {
                        return Err(BoxError::NotApplied {
                            file: f,
                            got: got.trim().into(),
                            want: line,
                        });
                    }
                }
            } else {
                for (file, v) in [
                    ("blkio.throttle.read_bps_device", spec.read_bps),
                    ("blkio.throttle.read_iops_device", spec.read_iops),
                ] {
                    let Some(v) = v else { continue };
                    let f = self.dir_with(file);
                    let want = format!("{dev} {v}");
                    write(&f, &want)?;
                    let got = read(&f)?;
                    if !got.lines().any(|l| l.trim() == want) {
                        return Err(BoxError::NotApplied {
                            file: f,
                            got: got.trim().into(),
                            want,
                        });
                    }
                }
            }
            if let Some(kb) = spec.readahead_kb {
                let f = dev.readahead_file();
                // read-ahead is device-wide: the device's own value is kept in
                // a file while any box has changed it, and the last box restores it
                let saved =
                    Path::new(READAHEAD_DIR).join(format!("readahead-{}-{}", dev.major, dev.minor));
                let old = read(&f)?;
                if !saved.exists() {
                    fs::create_dir_all(READAHEAD_DIR).map_err(io_err(Path::new(READAHEAD_DIR)))?;
                    write(&saved, old.trim())?;
                }
                write(&f, &kb.to_string())?;
                self.saved_readahead = Some((f.clone(), saved.display().to_string()));
                let got = read(&f)?;
                if parse_first_u64(&got) != Some(u64::from(kb)) {
                    return Err(BoxError::NotApplied {
                        file: f,
                        got: got.trim().into(),
                        want: kb.to_string(),
                    });
                }
            }
        }
        Ok(())
    }

    /// Makes `cmd` enter the box before it executes (so not one read of it
    /// escapes the limits): the child writes `0` (itself) to every
    /// hierarchy's cgroup.procs between fork and exec.
    pub fn command<'a>(&self, cmd: &'a mut Command) -> &'a mut Command {
        let files: Vec<CString> = self
            .dirs
            .iter()
            .map(|d| {
                CString::new(d.join("cgroup.procs").as_os_str().as_encoded_bytes())
                    .expect("cgroup paths have no NUL")
            })
            .collect();
        // SAFETY: the closure only calls async-signal-safe functions (open,
        // write, close) on memory prepared before the fork
        unsafe {
            cmd.pre_exec(move || {
                for f in &files {
                    let fd = libc::open(f.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
                    if fd < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    let n = libc::write(fd, b"0".as_ptr().cast(), 1);
                    let e = std::io::Error::last_os_error();
                    libc::close(fd);
                    if n != 1 {
                        return Err(e);
                    }
                }
                Ok(())
            })
        }
    }

    /// Moves a running process into the box (its later reads and new page
    /// cache are charged to the box).
    pub fn add_pid(&self, pid: u32) -> Result<(), BoxError> {
        for d in &self.dirs {
            write(&d.join("cgroup.procs"), &pid.to_string())?;
        }
        Ok(())
    }

    /// Processes in the box.
    pub fn pids(&self) -> Result<Vec<u32>, BoxError> {
        let text = read(&self.dirs[0].join("cgroup.procs"))?;
        Ok(text.lines().filter_map(|l| l.trim().parse().ok()).collect())
    }

    /// The box's counters now.
    pub fn usage(&self) -> Result<Usage, BoxError> {
        let dev = self.spec.device;
        let mut u = Usage::default();
        match &self.cgroups {
            Cgroups::V2 { .. } => {
                if let Some(dev) = dev {
                    let text = read(&self.dir_with("io.stat"))?;
                    for l in text.lines().filter(|l| l.starts_with(&format!("{dev} "))) {
                        for kv in l.split_whitespace().skip(1) {
                            match kv.split_once('=') {
                                Some(("rbytes", v)) => u.read_bytes = v.parse().unwrap_or(0),
                                Some(("rios", v)) => u.read_ios = v.parse().unwrap_or(0),
                                _ => {}
                            }
                        }
                    }
                }
                let cpu = read(&self.dir_with("cpu.stat")).unwrap_or_default();
                u.cpu_ns = cpu
                    .lines()
                    .find_map(|l| l.strip_prefix("usage_usec "))
                    .and_then(|v| v.trim().parse::<u64>().ok())
                    .map(|us| us * 1000);
                u.memory_bytes =
                    parse_first_u64(&read(&self.dir_with("memory.current"))?).unwrap_or(0);
                u.memory_peak_bytes = fs::read_to_string(self.dir_with("memory.peak"))
                    .ok()
                    .and_then(|t| parse_first_u64(&t));
            }
            Cgroups::V1 { .. } => {
                if let Some(dev) = dev {
                    let pick = |file: &str| -> Result<u64, BoxError> {
                        let text = read(&self.dir_with(file))?;
                        Ok(text
                            .lines()
                            .filter_map(|l| {
                                let f: Vec<&str> = l.split_whitespace().collect();
                                (f.len() == 3 && f[0] == dev.to_string() && f[1] == "Read")
                                    .then(|| f[2].parse::<u64>().ok())
                                    .flatten()
                            })
                            .sum())
                    };
                    u.read_bytes = pick("blkio.throttle.io_service_bytes")?;
                    u.read_ios = pick("blkio.throttle.io_serviced")?;
                }
                u.cpu_ns = fs::read_to_string(self.dir_with("cpuacct.usage"))
                    .ok()
                    .and_then(|t| parse_first_u64(&t));
                u.memory_bytes =
                    parse_first_u64(&read(&self.dir_with("memory.usage_in_bytes"))?).unwrap_or(0);
                u.memory_peak_bytes =
                    fs::read_to_string(self.dir_with("memory.max_usage_in_bytes"))
                        .ok()
                        .and_then(|t| parse_first_u64(&t));
            }
        }
        Ok(u)
    }

    /// Kills what is left in the box (processes the caller started there),
    /// removes the cgroups and restores the device's read-ahead.
    pub fn teardown(&mut self) -> Result<(), BoxError> {
        if self.torn_down {
            return Ok(());
        }
        self.torn_down = true;
        let mut first_err = None;
        if !self.dirs.is_empty() {
            let deadline = Instant::now() + Duration::from_secs(5);
            loop {
                let pids = self.pids().unwrap_or_default();
                if pids.is_empty() || Instant::now() > deadline {
                    break;
                }
                for p in pids {
                    // SAFETY: plain syscall; every process in the box descends from what the caller put there
                    unsafe { libc::kill(p as i32, libc::SIGKILL) };
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        for d in self.dirs.drain(..).rev() {
            // a cgroup can take a moment to become removable after its last process exits
            let mut res = fs::remove_dir(&d);
            for _ in 0..50 {
                if res.is_ok() || !d.exists() {
                    res = Ok(());
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
                res = fs::remove_dir(&d);
            }
            if let Err(e) = res {
                first_err.get_or_insert(BoxError::Io { path: d, err: e });
            }
        }
        if let Some((f, saved)) = self.saved_readahead.take() {
            if !other_boxes_exist(&self.cgroups) {
                let saved = PathBuf::from(saved);
                match read(&saved) {
                    Ok(old) => {
                        if let Err(e) = write(&f, old.trim()) {
                            first_err.get_or_insert(e);
                        }
                        let _ = fs::remove_file(&saved);
                    }
                    Err(e) => {
                        first_err.get_or_insert(e);
                    }
                }
            }
        }
        first_err.map_or(Ok(()), Err)
    }

    /// The cgroup directories (for messages).
    pub fn dirs(&self) -> &[PathBuf] {
        &self.dirs
    }
}

impl Drop for HwBox {
    fn drop(&mut self) {
        let _ = self.teardown();
    }
}

/// Parses a size in vodlab's one grammar ([`vodlab_units::parse_size`]:
/// `512M` = 512 MiB, `1.5g`, `2T`, `4096`, `500MB` = 5×10^8).
pub fn parse_size(s: &str) -> Result<u64, String> {
    vodlab_units::parse_size(s).map_err(|e| e.to_string())
}

pub mod command;
mod device;
pub mod settings;

pub use device::{Dev, DeviceStat};
pub use settings::{describe, BoxArgs, HwArgs};

#[cfg(test)]
mod tests;
