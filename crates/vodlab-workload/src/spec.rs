//! The workload specification: a TOML document of distributions and rules.
//!
//! See `docs/workload-spec.md` for the user-facing reference. Every key is
//! checked: unknown keys are errors, and [`Spec::validate`] reports every
//! problem with its key path.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::dist::Distribution;
use crate::error::{Problems, SpecError};
use crate::limits;

/// Tolerance for shares and mixes that must sum to one.
pub const SHARE_TOLERANCE: f64 = 1e-6;

/// A complete workload specification.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Spec {
    /// Short name of the workload (presets use their preset name).
    #[serde(default)]
    pub name: String,
    /// Free text: where the numbers come from.
    #[serde(default)]
    pub description: String,
    /// The titles, their popularity, durations, bit rates and storage.
    pub catalog: CatalogSpec,
    /// What each viewing session requests and when.
    pub sessions: SessionSpec,
    /// Client access-network classes; shares sum to 1.
    pub clients: Vec<ClientClass>,
    /// Steady-state measurement window and the seed.
    #[serde(default)]
    pub measurement: Measurement,
}

/// The catalog of titles.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CatalogSpec {
    /// Number of titles.
    pub titles: u32,
    /// Popularity over ranks (rank 1 is the most popular title).
    pub popularity: Popularity,
    /// Title duration in seconds.
    pub duration: Distribution,
    /// The this-many most popular titles get the median duration (thesis 3.2.1
    /// uses 2, so a seed cannot make the head of the workload unusually long or short).
    #[serde(default)]
    pub median_duration_top: u32,
    /// The bit-rate ladder.
    pub representations: Vec<Representation>,
    /// How representation shares assign representations to titles.
    #[serde(default)]
    pub ladder: Ladder,
    /// How titles are laid out in files.
    pub storage: Storage,
    /// Order in which titles are numbered (and created by `vodlab fileset`).
    #[serde(default)]
    pub placement: Placement,
    /// Streaming manifests (DASH MPD, HLS playlists) and init segments for
    /// every title; absent = plain files only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manifests: Option<ManifestSpec>,
}

/// Which streaming manifests the file set carries (`[catalog.manifests]`,
/// docs/workload-spec.md). A manifest's segments are the workload's request
/// units: `sessions.request_s` seconds each.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ManifestSpec {
    /// Write `{title}/manifest.mpd` (MPEG-DASH, ISO/IEC 23009-1).
    #[serde(default = "yes")]
    pub dash: bool,
    /// Write `{title}/master.m3u8` and one media playlist per representation
    /// (HLS, RFC 8216).
    #[serde(default = "yes")]
    pub hls: bool,
    /// Bytes of each representation's initialization segment (synthetic
    /// content, like the media segments).
    #[serde(default = "default_init_bytes")]
    pub init_bytes: u64,
}

/// Default of [`ManifestSpec::init_bytes`]: about the size of an H.264
/// fragmented-MP4 `ftyp`+`moov` (the real-media init segments ffmpeg writes
/// for the `dash-vod` ladder are 700–1,200 bytes).
pub const DEFAULT_INIT_BYTES: u64 = 1024;

fn default_init_bytes() -> u64 {
    DEFAULT_INIT_BYTES
}

fn yes() -> bool {
    true
}

impl Default for ManifestSpec {
    fn default() -> Self {
        ManifestSpec {
            dash: true,
            hls: true,
            init_bytes: DEFAULT_INIT_BYTES,
        }
    }
}

/// Title popularity.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Popularity {
    /// Zipf: weight of rank `r` is `r^-alpha`.
    Zipf {
        /// Exponent, >= 0 (0 is uniform).
        alpha: f64,
    },
    /// Explicit weights for ranks 1..=n; as many weights as titles.
    Weights {
        /// Non-negative weights, not all zero.
        weights: Vec<f64>,
    },
    /// Every title equally likely.
    Uniform,
}

/// One representation (bit rate) of the ladder.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Representation {
    /// Name used in paths and session headers (`[A-Za-z0-9_.-]+`).
    pub name: String,
    /// Encoded bit rate in kbit/s (1 kbit = 1000 bit).
    pub bitrate_kbps: f64,
    /// Share of titles that have this representation, in `(0, 1]`.
    #[serde(default = "one")]
    pub share: f64,
    /// Picture size `WIDTHxHEIGHT` announced in manifests (e.g. `"1280x720"`);
    /// absent for audio-only or when unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolution: Option<String>,
    /// Video (default), audio or combined; the `netflix` session model
    /// plays audio beside video.
    #[serde(default, skip_serializing_if = "RepKind::is_video")]
    pub kind: RepKind,
}

fn one() -> f64 {
    1.0
}

/// How representation shares are turned into title sets.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Ladder {
    /// Each representation is on a random `share` of titles, independently;
    /// at least one representation must have share 1 (every title has it).
    #[default]
    Nested,
    /// Every title has exactly one representation; shares sum to 1.
    Partition,
}

/// Storage layout.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Storage {
    /// Chunk files or one file per title and representation.
    pub layout: Layout,
    /// Seconds of content per chunk file (chunked layout only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chunk_s: Option<f64>,
    /// Pad every title to a whole multiple of this many seconds, so a title
    /// takes the same space whatever the chunk size (thesis 3.5.2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pad_s: Option<f64>,
}

/// Storage layout kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Layout {
    /// One file per chunk of `chunk_s` seconds; requests are whole files or
    /// ranges inside them.
    Chunked,
    /// One file per title and representation; requests are byte ranges.
    Single,
}

/// Title numbering order.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Placement {
    /// Title numbers are a seeded random permutation of ranks, so popularity
    /// and position on disk are unrelated (thesis 3.5.2).
    #[default]
    Random,
    /// Title number = rank - 1.
    Rank,
}

/// Session behaviour.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionSpec {
    /// Number of sessions.
    pub count: u32,
    /// Fraction of the title a session downloads.
    pub viewing_fraction: Distribution,
    /// Where in the title a session starts.
    #[serde(default)]
    pub start: StartPosition,
    /// Seconds of content per request.
    pub request_s: f64,
    /// The first this-many requests go back to back (buffer fill).
    #[serde(default = "default_buffering")]
    pub buffering_requests: u32,
    /// Later requests start this many seconds after the start of the previous
    /// one (0 = no pacing); defaults to `request_s` (real time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pacing_s: Option<f64>,
    /// A request not complete after this many seconds fails its session.
    #[serde(default = "default_timeout")]
    pub timeout_s: f64,
    /// Which representation a session requests.
    pub representation: RepresentationChoice,
    /// Whether the title or the representation is drawn first.
    #[serde(default)]
    pub selection: Selection,
    /// Shortest session, in requests.
    #[serde(default = "default_min_requests")]
    pub min_requests: u32,
    /// How sessions become requests: `paced` (default) or `netflix`.
    #[serde(default, skip_serializing_if = "SessionModel::is_paced")]
    pub model: SessionModel,
    /// Knobs of the `netflix` model (defaults when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub netflix: Option<NetflixSpec>,
}

fn default_buffering() -> u32 {
    3
}
fn default_timeout() -> f64 {
    10.0
}
fn default_min_requests() -> u32 {
    1
}

impl SessionSpec {
    /// The pacing interval in effect (`pacing_s`, or `request_s` when unset).
    pub fn pacing(&self) -> f64 {
        self.pacing_s.unwrap_or(self.request_s)
    }

    /// The `netflix` model's knobs in effect (`[sessions.netflix]`, or the
    /// defaults).
    pub fn netflix_spec(&self) -> NetflixSpec {
        self.netflix.clone().unwrap_or_default()
    }
}

/// Start position of a session within its title.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum StartPosition {
    /// Every session starts at the beginning of the title.
    #[default]
    Beginning,
    /// Uniformly random request position inside the title.
    Uniform,
    /// Start at a fraction of the title drawn from a distribution over [0, 1].
    Fraction {
        /// Distribution of the start fraction.
        distribution: Distribution,
    },
}

/// Rule for choosing a session's representation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum RepresentationChoice {
    /// Always this representation.
    Fixed {
        /// Representation name.
        name: String,
    },
    /// A probability mix over representations, the same for every class.
    Mix {
        /// Representation name to probability; sums to 1.
        weights: BTreeMap<String, f64>,
    },
    /// A probability mix per client class.
    ClassMix {
        /// Class name to (representation name to probability).
        classes: BTreeMap<String, BTreeMap<String, f64>>,
    },
    /// The highest bit rate not above `headroom` x the class's downlink.
    Rule {
        /// Fraction of the downlink a stream may use.
        #[serde(default = "default_headroom")]
        headroom: f64,
    },
}

fn default_headroom() -> f64 {
    0.8
}

/// Draw order of title and representation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Selection {
    /// Draw the title by popularity over the whole catalog, then the
    /// representation; when the title lacks it, take the highest one the title
    /// has below it (or its lowest).
    #[default]
    TitleFirst,
    /// Draw the representation, then the title by popularity among the titles
    /// that have it (popularity applied to ranks within that subset).
    RepresentationFirst,
}

/// A client access-network class.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientClass {
    /// Name used in session headers and results.
    pub name: String,
    /// Share of sessions in this class; shares sum to 1.
    pub share: f64,
    /// Downlink rate in kbit/s (0 = unlimited).
    pub down_kbps: f64,
    /// Uplink rate in kbit/s (0 = unlimited).
    #[serde(default)]
    pub up_kbps: f64,
    /// One-way delay in milliseconds, applied in both directions.
    #[serde(default)]
    pub delay_ms: f64,
}

/// Measurement window and seed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Measurement {
    /// Sessions per shard not measured at the start.
    #[serde(default)]
    pub ramp_up_sessions: u32,
    /// Sessions per shard not measured at the end.
    #[serde(default)]
    pub ramp_down_sessions: u32,
    /// Sessions per shard (one shard per client host); unset = one shard.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard_sessions: Option<u32>,
    /// Seed of every random draw.
    #[serde(default = "default_seed")]
    pub seed: u64,
}

fn default_seed() -> u64 {
    1
}

impl Default for Measurement {
    fn default() -> Self {
        Self {
            ramp_up_sessions: 0,
            ramp_down_sessions: 0,
            shard_sessions: None,
            seed: default_seed(),
        }
    }
}

/// Largest `--scale` factor.
pub const MAX_SCALE: f64 = 1_000_000.0;

/// Command-line adjustments applied on top of a specification.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Overrides {
    /// Replace the seed.
    pub seed: Option<u64>,
    /// Replace the number of sessions.
    pub sessions: Option<u32>,
    /// Replace the number of titles.
    pub titles: Option<u32>,
    /// Multiply titles, sessions, shard size and ramps by this factor.
    /// Overrides never make more than [`limits::MAX_SHARDS`] scripts: with
    /// `scale` or `sessions` the shard size is at least
    /// `ceil(count / MAX_SHARDS)`; `catalog.median_duration_top` is capped at
    /// the scaled title count.
    pub scale: Option<f64>,
}

impl Spec {
    /// Parses and validates a specification from TOML text; `origin` names the
    /// file in errors.
    pub fn from_toml_str(text: &str, origin: &str) -> Result<Self, SpecError> {
        let de = toml::Deserializer::new(text);
        let spec: Spec = serde_path_to_error::deserialize(de).map_err(|e| {
            let path = e.path().to_string();
            let inner = e.into_inner();
            let (line, column) = inner
                .span()
                .map(|s| line_col(text, s.start))
                .unwrap_or((0, 0));
            SpecError::Parse {
                file: origin.to_string(),
                line,
                column,
                path,
                reason: inner.message().trim().to_string(),
            }
        })?;
        spec.check(origin)?;
        Ok(spec)
    }

    /// Reads, parses and validates a specification file.
    pub fn from_file(path: &Path) -> Result<Self, SpecError> {
        let file = path.display().to_string();
        let bytes = std::fs::read(path).map_err(|source| SpecError::Read {
            file: file.clone(),
            source,
        })?;
        let text = std::str::from_utf8(&bytes).map_err(|e| {
            let (line, column) = crate::script::utf8_position(&bytes, e.valid_up_to());
            SpecError::Parse {
                file: file.clone(),
                line,
                column,
                path: ".".to_string(),
                reason: format!(
                    "invalid UTF-8 (byte 0x{:02x}); a specification is UTF-8 text",
                    bytes[e.valid_up_to()]
                ),
            }
        })?;
        Self::from_toml_str(text, &file)
    }

    /// Validates, turning problems into [`SpecError::Invalid`].
    pub fn check(&self, origin: &str) -> Result<(), SpecError> {
        let mut problems = self.validate();
        if problems.is_empty() {
            // only a spec whose every value is in bounds is worth estimating
            problems = size::size_problems(self);
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(SpecError::Invalid {
                file: origin.to_string(),
                problems,
            })
        }
    }

    /// Applies command-line overrides and re-validates.
    pub fn apply(&mut self, o: &Overrides, origin: &str) -> Result<(), SpecError> {
        let mut problems = Problems::default();
        if let Some(f) = o.scale {
            if !(f.is_finite() && f > 0.0 && f <= MAX_SCALE) {
                problems.push(
                    "--scale",
                    format!("must be a number > 0 and at most {MAX_SCALE}, got {f}"),
                );
            } else {
                for (key, v, max) in [
                    ("catalog.titles", self.catalog.titles, limits::MAX_TITLES),
                    ("sessions.count", self.sessions.count, limits::MAX_SESSIONS),
                ] {
                    let scaled = (v as f64 * f).round();
                    if scaled > max as f64 {
                        problems.push(
                            "--scale",
                            format!("{f} makes {key} {scaled}, more than the limit of {max}"),
                        );
                    }
                }
            }
        }
        for (flag, v, max) in [
            ("--titles", o.titles, limits::MAX_TITLES),
            ("--sessions", o.sessions, limits::MAX_SESSIONS),
        ] {
            match v {
                Some(n) if n == 0 || n > max => {
                    problems.push(flag, format!("must be between 1 and {max}, got {n}"))
                }
                _ => {}
            }
        }
        if !problems.is_empty() {
            return Err(SpecError::Invalid {
                file: origin.to_string(),
                problems,
            });
        }
        if let Some(f) = o.scale {
            let s = |v: u32| ((v as f64 * f).round() as u32).max(1);
            self.catalog.titles = s(self.catalog.titles);
            self.sessions.count = s(self.sessions.count);
            if let Some(n) = self.measurement.shard_sessions.as_mut() {
                *n = s(*n);
            }
            self.catalog.median_duration_top =
                self.catalog.median_duration_top.min(self.catalog.titles);
            let m = &mut self.measurement;
            m.ramp_up_sessions = (m.ramp_up_sessions as f64 * f).round() as u32;
            m.ramp_down_sessions = (m.ramp_down_sessions as f64 * f).round() as u32;
        }
        if let Some(n) = o.titles {
            self.catalog.titles = n;
            self.catalog.median_duration_top = self.catalog.median_duration_top.min(n);
        }
        if let Some(n) = o.sessions {
            self.sessions.count = n;
        }
        if o.scale.is_some() || o.sessions.is_some() {
            // an override changed the count or the shard size: the shard size
            // grows to what keeps the scripts within the limit (a spec file
            // that asks for too many scripts itself is still an error)
            if let Some(n) = self.measurement.shard_sessions.as_mut() {
                *n = (*n).max(self.sessions.count.div_ceil(limits::MAX_SHARDS));
            }
        }
        if let Some(seed) = o.seed {
            self.measurement.seed = seed;
        }
        self.check(origin)
    }

    /// Number of client shards (script files), from `shard_sessions`.
    pub fn shard_count(&self) -> u32 {
        match self.measurement.shard_sessions {
            Some(n) if n > 0 => self.sessions.count.div_ceil(n).max(1),
            _ => 1,
        }
    }

    /// Looks up a representation's index by name.
    pub fn representation_index(&self, name: &str) -> Option<usize> {
        self.catalog
            .representations
            .iter()
            .position(|r| r.name == name)
    }
}

/// 1-based line and column of a byte offset.
pub(crate) fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

mod netflix;
pub(crate) mod size;
mod validate;
pub use netflix::{FormShares, NetflixSpec, RateSteps, RepKind, SessionModel};
pub use validate::parse_resolution;

#[cfg(test)]
mod tests;
