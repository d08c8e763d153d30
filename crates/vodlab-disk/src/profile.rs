//! Drive profiles: TOML files describing a hard disk or a solid-state drive,
//! six of them shipped in the binary ([`builtin`]), others loaded from a file
//! ([`Profile::from_file`]).
//!
//! Every profile is validated ([`Profile::validate`]); parse and validation
//! errors name the offending key (`hdd.average_seek_ms`, ...).

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{Problem, ProfileError};
pub use crate::geometry::ZoneCurve;
use crate::geometry::{SeekCurve, Zones};

/// A drive profile: either `[hdd]` or `[ssd]` parameters (exactly one).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    /// Short name (`ch3-sas-10k`, `wd10efrx`, ...).
    pub name: String,
    /// One line saying what drive this is.
    #[serde(default)]
    pub description: String,
    /// Read-ahead (KiB) a mount on this drive should use, like a Linux block
    /// device's `read_ahead_kb`. Not used by the model itself.
    #[serde(default = "default_mount_readahead_kib")]
    pub mount_readahead_kib: u32,
    /// Mechanical-disk parameters.
    #[serde(default)]
    pub hdd: Option<HddParams>,
    /// Solid-state-drive parameters.
    #[serde(default)]
    pub ssd: Option<SsdParams>,
}

fn default_mount_readahead_kib() -> u32 {
    128
}

/// How rotational latency is computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Rotation {
    /// From the platter's modelled angular position at the time the head is
    /// on the track (seeded initial phase).
    #[default]
    Modelled,
    /// Always half a revolution (the expected value).
    Expected,
}

/// Parameters of a mechanical disk. Rates are in MB/s (10⁶ bytes/s), times in
/// milliseconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HddParams {
    /// Capacity in bytes (the linear block space is `0..capacity_bytes`).
    pub capacity_bytes: u64,
    /// Spindle speed, revolutions per minute.
    pub rpm: f64,
    /// Command overhead paid by every positioned (non-sequential) request, ms.
    #[serde(default = "default_overhead")]
    pub command_overhead_ms: f64,
    /// Media transfer rate at address 0 (outermost track), MB/s.
    pub outer_mb_s: f64,
    /// Media transfer rate at the last address (innermost track), MB/s.
    pub inner_mb_s: f64,
    /// Shape of the rate between outer and inner.
    #[serde(default)]
    pub zone_curve: ZoneCurve,
    /// Seek to the adjacent track, ms; also the settle time of short seeks.
    pub track_to_track_ms: f64,
    /// Mean seek over uniformly random pairs of addresses (the datasheet's
    /// "average seek"), ms. The √d coefficient of short seeks is fitted to it.
    pub average_seek_ms: f64,
    /// Seek across the whole stroke, ms.
    pub full_stroke_ms: f64,
    /// Fraction of the stroke where short (settle + a·√d) seeks end and the
    /// linear part begins.
    #[serde(default = "default_short_seek_fraction")]
    pub short_seek_fraction: f64,
    /// Rotational latency mode.
    #[serde(default)]
    pub rotation: Rotation,
    /// Drive read-ahead segment, KiB; 0 disables the read-ahead cache.
    #[serde(default)]
    pub cache_segment_kib: u64,
    /// Host interface rate for data already in the drive's cache, MB/s.
    #[serde(default = "default_interface")]
    pub interface_mb_s: f64,
}

fn default_overhead() -> f64 {
    0.1
}
fn default_short_seek_fraction() -> f64 {
    0.3
}
fn default_interface() -> f64 {
    300.0
}

/// Parameters of a solid-state drive (SATA SSD or NVMe class).
///
/// An I/O occupies one of `parallelism` internal slots for `read_latency_us`,
/// then its bytes cross a shared link at `bandwidth_mb_s`. No seek, no
/// rotation, no garbage collection, no write model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SsdParams {
    /// Capacity in bytes.
    pub capacity_bytes: u64,
    /// Per-I/O latency (queue depth 1, small read), µs.
    pub read_latency_us: f64,
    /// Sequential read bandwidth, MB/s.
    pub bandwidth_mb_s: f64,
    /// Number of I/Os whose latency phases overlap.
    #[serde(default = "default_parallelism")]
    pub parallelism: u32,
}

fn default_parallelism() -> u32 {
    1
}

/// Names and TOML texts of the shipped profiles.
const BUILTIN: &[(&str, &str)] = &[
    ("ch3-sas-10k", include_str!("../profiles/ch3-sas-10k.toml")),
    ("wd10efrx", include_str!("../profiles/wd10efrx.toml")),
    ("st1000dm003", include_str!("../profiles/st1000dm003.toml")),
    (
        "hitachi-5k3000",
        include_str!("../profiles/hitachi-5k3000.toml"),
    ),
    ("sata-ssd", include_str!("../profiles/sata-ssd.toml")),
    ("nvme", include_str!("../profiles/nvme.toml")),
];

/// Names of the shipped profiles.
pub fn builtin_names() -> Vec<&'static str> {
    BUILTIN.iter().map(|(n, _)| *n).collect()
}

/// A shipped profile by name.
pub fn builtin(name: &str) -> Result<Profile, ProfileError> {
    let (_, text) =
        BUILTIN
            .iter()
            .find(|(n, _)| *n == name)
            .ok_or_else(|| ProfileError::Unknown {
                name: name.to_string(),
                known: builtin_names().join(", "),
            })?;
    Profile::from_toml_str(text, &format!("profile:{name}"))
}

impl Profile {
    /// A shipped profile if `name_or_path` names one, else the file at that
    /// path.
    pub fn resolve(name_or_path: &str) -> Result<Profile, ProfileError> {
        if BUILTIN.iter().any(|(n, _)| *n == name_or_path) {
            builtin(name_or_path)
        } else if Path::new(name_or_path).exists() {
            Profile::from_file(Path::new(name_or_path))
        } else {
            Err(ProfileError::Unknown {
                name: name_or_path.to_string(),
                known: builtin_names().join(", "),
            })
        }
    }

    /// Parses and validates a profile from TOML text; `origin` names the file
    /// in errors.
    pub fn from_toml_str(text: &str, origin: &str) -> Result<Profile, ProfileError> {
        let de = toml::Deserializer::new(text);
        let p: Profile = serde_path_to_error::deserialize(de).map_err(|e| {
            let path = e.path().to_string();
            let inner = e.into_inner();
            let (line, column) = inner
                .span()
                .map(|s| line_col(text, s.start))
                .unwrap_or((0, 0));
            ProfileError::Parse {
                file: origin.to_string(),
                line,
                column,
                path,
                reason: inner.message().trim().to_string(),
            }
        })?;
        p.validate().map_err(|problems| ProfileError::Invalid {
            file: origin.to_string(),
            problems,
        })?;
        Ok(p)
    }

    /// Reads, parses and validates a profile file.
    pub fn from_file(path: &Path) -> Result<Profile, ProfileError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ProfileError::Read {
            file: file.clone(),
            source,
        })?;
        Profile::from_toml_str(&text, &file)
    }

    /// Capacity of the drive in bytes.
    pub fn capacity_bytes(&self) -> u64 {
        match (&self.hdd, &self.ssd) {
            (Some(h), _) => h.capacity_bytes,
            (_, Some(s)) => s.capacity_bytes,
            _ => 0,
        }
    }

    /// Every problem with the values, each naming its key.
    pub fn validate(&self) -> Result<(), Vec<Problem>> {
        let mut p = Vec::new();
        let mut bad = |key: &str, reason: String| {
            p.push(Problem {
                path: key.to_string(),
                reason,
            })
        };
        if self.name.trim().is_empty() {
            bad("name", "must not be empty".into());
        }
        if self.mount_readahead_kib > 1 << 20 {
            bad(
                "mount_readahead_kib",
                "must be at most 1048576 (1 GiB)".into(),
            );
        }
        match (&self.hdd, &self.ssd) {
            (Some(_), Some(_)) => bad("hdd", "give either [hdd] or [ssd], not both".into()),
            (None, None) => bad("hdd", "give one of [hdd] or [ssd]".into()),
            _ => {}
        }
        if let Some(h) = &self.hdd {
            let pos = |v: f64| v.is_finite() && v > 0.0;
            let nonneg = |v: f64| v.is_finite() && v >= 0.0;
            if h.capacity_bytes < 1 << 20 {
                bad("hdd.capacity_bytes", "must be at least 1 MiB".into());
            }
            if !(pos(h.rpm) && h.rpm <= 100_000.0) {
                bad("hdd.rpm", format!("must be in (0, 100000], got {}", h.rpm));
            }
            if !(nonneg(h.command_overhead_ms) && h.command_overhead_ms < 1000.0) {
                bad("hdd.command_overhead_ms", "must be in [0, 1000)".into());
            }
            if !pos(h.outer_mb_s) {
                bad("hdd.outer_mb_s", "must be > 0".into());
            }
            if !pos(h.inner_mb_s) {
                bad("hdd.inner_mb_s", "must be > 0".into());
            } else if pos(h.outer_mb_s) && h.inner_mb_s > h.outer_mb_s {
                bad(
                    "hdd.inner_mb_s",
                    format!("must not exceed outer_mb_s ({})", h.outer_mb_s),
                );
            }
            if !nonneg(h.track_to_track_ms) {
                bad("hdd.track_to_track_ms", "must be >= 0".into());
            }
            if !(pos(h.full_stroke_ms) && h.full_stroke_ms < 1000.0) {
                bad("hdd.full_stroke_ms", "must be in (0, 1000)".into());
            }
            if !(h.short_seek_fraction.is_finite()
                && h.short_seek_fraction > 0.0
                && h.short_seek_fraction < 1.0)
            {
                bad("hdd.short_seek_fraction", "must be in (0, 1)".into());
            }
            if !(h.interface_mb_s.is_finite() && h.interface_mb_s > 0.0) {
                bad("hdd.interface_mb_s", "must be > 0".into());
            }
            if h.cache_segment_kib > 1 << 20 {
                bad(
                    "hdd.cache_segment_kib",
                    "must be at most 1048576 (1 GiB)".into(),
                );
            }
            if !pos(h.average_seek_ms) {
                bad("hdd.average_seek_ms", "must be > 0".into());
            } else if nonneg(h.track_to_track_ms)
                && pos(h.full_stroke_ms)
                && h.short_seek_fraction > 0.0
                && h.short_seek_fraction < 1.0
            {
                if let Err(reason) = SeekCurve::fit(h) {
                    bad("hdd.average_seek_ms", reason);
                }
            }
        }
        if let Some(s) = &self.ssd {
            if s.capacity_bytes < 1 << 20 {
                bad("ssd.capacity_bytes", "must be at least 1 MiB".into());
            }
            if !(s.read_latency_us.is_finite() && s.read_latency_us >= 0.0) {
                bad("ssd.read_latency_us", "must be >= 0".into());
            }
            if !(s.bandwidth_mb_s.is_finite() && s.bandwidth_mb_s > 0.0) {
                bad("ssd.bandwidth_mb_s", "must be > 0".into());
            }
            if s.parallelism == 0 || s.parallelism > 4096 {
                bad("ssd.parallelism", "must be in [1, 4096]".into());
            }
        }
        if p.is_empty() {
            Ok(())
        } else {
            Err(p)
        }
    }
}

fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

// The mechanics of a hard disk built from its profile's parameters: the types
// are `geometry`'s, which knows nothing of profiles.

impl SeekCurve {
    /// Fits the √x coefficient to `average_seek_ms`; the error says why the
    /// average cannot be met with the other seek parameters.
    pub fn fit(h: &HddParams) -> Result<SeekCurve, String> {
        let settle_ns = h.track_to_track_ms * 1e6;
        let full_ns = h.full_stroke_ms * 1e6;
        let short = h.short_seek_fraction;
        if full_ns < settle_ns {
            return Err(format!(
                "full_stroke_ms ({}) is below track_to_track_ms ({})",
                h.full_stroke_ms, h.track_to_track_ms
            ));
        }
        let a_max = (full_ns - settle_ns) / short.sqrt();
        let curve = |a: f64| SeekCurve {
            settle_ns,
            sqrt_ns: a,
            short,
            full_ns,
        };
        let m0 = curve(0.0).mean_random_ns();
        let m1 = curve(a_max).mean_random_ns();
        let want = h.average_seek_ms * 1e6;
        if want < m0 - 1.0 || want > m1 + 1.0 {
            return Err(format!(
                "{} ms cannot be met with track_to_track_ms = {}, full_stroke_ms = {} and \
                 short_seek_fraction = {}: the mean over random pairs is between {:.2} and {:.2} ms",
                h.average_seek_ms,
                h.track_to_track_ms,
                h.full_stroke_ms,
                short,
                m0 / 1e6,
                m1 / 1e6
            ));
        }
        // The mean is linear in `a`.
        let a = if m1 > m0 {
            (a_max * (want - m0) / (m1 - m0)).clamp(0.0, a_max)
        } else {
            0.0
        };
        Ok(curve(a))
    }
}

impl Zones {
    /// From a profile's parameters.
    pub fn new(h: &HddParams) -> Zones {
        Zones {
            capacity: h.capacity_bytes as f64,
            outer: h.outer_mb_s * 1e-3,
            inner: h.inner_mb_s * 1e-3,
            curve: h.zone_curve,
        }
    }
}
