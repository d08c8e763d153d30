//! Block devices: which one holds a path, its read-ahead, its counters
//! (`/sys/dev/block/M:m`).

use super::*;

/// A block device number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dev {
    /// Major number.
    pub major: u32,
    /// Minor number.
    pub minor: u32,
}

impl std::fmt::Display for Dev {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.major, self.minor)
    }
}

impl Dev {
    /// The whole disk holding `path` (a partition is mapped to its disk,
    /// since throttling and read-ahead apply to disks).
    pub fn of_path(path: &Path) -> Result<Self, BoxError> {
        let md = fs::metadata(path).map_err(io_err(path))?;
        let d = md.dev();
        let dev = Self {
            major: libc::major(d),
            minor: libc::minor(d),
        };
        if dev.major == 0 {
            return Err(BoxError::NotABlockDevice(path.to_path_buf()));
        }
        let sys = dev.sys_dir();
        if sys.join("partition").exists() {
            let parent = sys.join("..").join("dev");
            let text = read(&parent)?;
            if let Some((a, b)) = text.trim().split_once(':') {
                if let (Ok(major), Ok(minor)) = (a.parse(), b.parse()) {
                    return Ok(Self { major, minor });
                }
            }
        }
        Ok(dev)
    }

    fn sys_dir(&self) -> PathBuf {
        PathBuf::from(format!("/sys/dev/block/{self}"))
    }

    /// The device's read-ahead file.
    pub fn readahead_file(&self) -> PathBuf {
        self.sys_dir().join("queue/read_ahead_kb")
    }

    /// The device's own I/O counters (whole device, every process).
    pub fn stat(&self) -> Result<DeviceStat, BoxError> {
        let p = self.sys_dir().join("stat");
        let text = read(&p)?;
        let f: Vec<u64> = text
            .split_whitespace()
            .filter_map(|x| x.parse().ok())
            .collect();
        if f.len() < 4 {
            return Err(BoxError::Io {
                path: p,
                err: std::io::Error::other("fewer than 4 fields"),
            });
        }
        Ok(DeviceStat {
            reads: f[0],
            read_bytes: f[2] * 512,
            read_ms: f[3],
        })
    }
}

/// Counters of /sys/dev/block/M:m/stat.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct DeviceStat {
    /// Reads completed.
    pub reads: u64,
    /// Bytes read.
    pub read_bytes: u64,
    /// Milliseconds spent on reads (summed over reads in flight).
    pub read_ms: u64,
}

impl DeviceStat {
    /// The counters accumulated since `before`.
    pub fn since(&self, before: &Self) -> Self {
        Self {
            reads: self.reads.saturating_sub(before.reads),
            read_bytes: self.read_bytes.saturating_sub(before.read_bytes),
            read_ms: self.read_ms.saturating_sub(before.read_ms),
        }
    }
}
