//! The hardware settings of `vodlab box` and `vodlab compare` (with the
//! `cli` feature, their flags): the box's limits ([`HwArgs`]) and the
//! arguments of `vodlab box` ([`BoxArgs`]).

use std::path::{Path, PathBuf};

use super::{profile, BoxError, BoxSpec, Dev, HwBox, Profile};
use crate::diskd::DiskArgs;

/// `--read-bps`: a rate ([`vodlab_units::parse_rate`]) in whole bytes/s,
/// at least 1.
pub fn parse_read_rate(s: &str) -> Result<u64, String> {
    match vodlab_units::parse_rate(s)
        .map_err(|e| e.to_string())?
        .bytes_per_s()
    {
        0 => Err(format!("`{}`: a read limit of at least 1 byte/s", s.trim())),
        b => Ok(b),
    }
}

/// Hardware settings shared by `box` and `compare`.
#[derive(Debug, Clone, Default)]
#[cfg_attr(feature = "cli", derive(clap::Args))]
pub struct HwArgs {
    /// Disk to emulate: hdd-5400, hdd-7200 or ssd (docs/experiments.md
    /// lists the numbers and their sources). Without it only --mem and the
    /// explicit limits apply. (`--profile` is an older name.)
    #[cfg_attr(
        feature = "cli",
        arg(long = "throttle-profile", alias = "profile", value_name = "PROFILE")
    )]
    pub profile: Option<String>,
    /// Memory limit, page cache included (a size: 512M = 512 MiB, 1.5G,
    /// 500MB = 5×10^8 bytes).
    #[cfg_attr(feature = "cli", arg(long, value_parser = vodlab_units::parse_size, value_name = "SIZE"))]
    pub mem: Option<u64>,
    /// The block device to throttle is the one holding this path
    /// (default: the current directory).
    #[cfg_attr(feature = "cli", arg(long, value_name = "PATH"))]
    pub device_of: Option<PathBuf>,
    /// Read limit in bytes/s (overrides the profile's): a rate, `60M` =
    /// 60 MiB/s, `100MB/s`, `800Mbit`.
    #[cfg_attr(feature = "cli", arg(long, value_parser = parse_read_rate, value_name = "RATE"))]
    pub read_bps: Option<u64>,
    /// Read operations/s limit (overrides the profile's).
    #[cfg_attr(feature = "cli", arg(long, value_name = "IOPS"))]
    pub read_iops: Option<u64>,
    /// Device read-ahead while the box lives, KiB (profiles set 128, Linux's
    /// default for a disk; `keep` leaves the device's own). Restored after.
    #[cfg_attr(feature = "cli", arg(long, value_name = "KIB|keep"))]
    pub readahead_kb: Option<String>,
}

impl HwArgs {
    /// The profile, if named.
    pub fn profile(&self) -> Result<Option<Profile>, BoxError> {
        self.profile.as_deref().map(profile).transpose()
    }

    /// The box these settings describe, named `name`.
    pub fn spec(&self, name: &str, default_path: &Path) -> Result<BoxSpec, BoxError> {
        let p = self.profile()?;
        let read_bps = self.read_bps.or(p.map(|p| p.read_bps));
        let read_iops = self.read_iops.or(p.map(|p| p.read_iops));
        let readahead_kb = match self.readahead_kb.as_deref() {
            Some("keep") => None,
            Some(v) => Some(v.parse::<u32>().map_err(|source| BoxError::Readahead {
                value: v.to_string(),
                source,
            })?),
            None => p.map(|p| p.readahead_kb),
        };
        let needs_dev = read_bps.is_some() || read_iops.is_some() || readahead_kb.is_some();
        let device = if needs_dev {
            let path = self.device_of.as_deref().unwrap_or(default_path);
            Some(Dev::of_path(path)?)
        } else {
            None
        };
        if self.mem.is_none() && !needs_dev {
            return Err(BoxError::NoLimits);
        }
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
#[derive(Debug)]
#[cfg_attr(feature = "cli", derive(clap::Args))]
pub struct BoxArgs {
    /// The box's limits.
    #[cfg_attr(feature = "cli", command(flatten))]
    pub hw: HwArgs,
    /// The emulated drive, if any.
    #[cfg_attr(feature = "cli", command(flatten))]
    pub disk: DiskArgs,
    /// With --disk: the `vodlab gen` workload whose file set the emulated
    /// drive presents.
    #[cfg_attr(feature = "cli", arg(long, value_name = "DIR", requires = "disk"))]
    pub workload: Option<PathBuf>,
    /// Time compression k of the whole experiment: the emulated drive's
    /// times / k, and the command gets VODLAB_TIME_COMPRESSION=K (the
    /// default of `vodlab serve` and `vodlab run --time-compression`) and
    /// `{k}` in its arguments replaced by K. Run the load with the same k.
    #[cfg_attr(
        feature = "cli",
        arg(long, default_value_t = 1.0, value_name = "K", requires = "disk")
    )]
    pub time_compression: f64,
    /// Cgroup name.
    #[cfg_attr(feature = "cli", arg(long, default_value = "vodlab-box"))]
    pub name: String,
    /// The command and its arguments (after `--`). With --disk, `{mount}`
    /// in an argument becomes the mount point, also given to the command as
    /// VODLAB_DISK_MOUNT.
    #[cfg_attr(
        feature = "cli",
        arg(last = true, required = true, value_name = "COMMAND")
    )]
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
