//! The workload specification: a TOML document of distributions and rules.
//!
//! See `docs/workload-spec.md` for the user-facing reference. Every key is
//! checked: unknown keys are errors, and [`Spec::validate`] reports every
//! problem with its key path.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::dist::Distribution;
use crate::error::{Problems, SpecError};
use crate::limits::{self, is_path_name, is_token_name};

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
            problems = crate::construct::size_problems(self);
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
            let m = &mut self.measurement;
            m.ramp_up_sessions = (m.ramp_up_sessions as f64 * f).round() as u32;
            m.ramp_down_sessions = (m.ramp_down_sessions as f64 * f).round() as u32;
        }
        if let Some(n) = o.titles {
            self.catalog.titles = n;
        }
        if let Some(n) = o.sessions {
            self.sessions.count = n;
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

    /// Every problem with the specification, with key paths.
    pub fn validate(&self) -> Problems {
        let mut p = Problems::default();
        if !self.name.is_empty() && !is_path_name(&self.name) {
            p.push(
                "name",
                format!(
                    "{:?} must use only A-Z a-z 0-9 _ . -, not start with `.`, and have at most {} characters",
                    self.name,
                    limits::MAX_NAME_LEN
                ),
            );
        }
        let c = &self.catalog;
        if c.titles == 0 || c.titles > limits::MAX_TITLES {
            p.push(
                "catalog.titles",
                format!(
                    "must be between 1 and {}, got {}",
                    limits::MAX_TITLES,
                    c.titles
                ),
            );
        }
        match &c.popularity {
            Popularity::Zipf { alpha } => {
                if !alpha.is_finite() || *alpha < 0.0 {
                    p.push(
                        "catalog.popularity.alpha",
                        format!("alpha must be a finite number >= 0, got {alpha}"),
                    );
                } else if *alpha > limits::MAX_ZIPF_ALPHA {
                    p.push(
                        "catalog.popularity.alpha",
                        format!(
                            "alpha must be at most {}, got {alpha}",
                            limits::MAX_ZIPF_ALPHA
                        ),
                    );
                }
            }
            Popularity::Weights { weights } => {
                if weights.len() != c.titles as usize {
                    p.push(
                        "catalog.popularity.weights",
                        format!(
                            "has {} weights but catalog.titles is {}",
                            weights.len(),
                            c.titles
                        ),
                    );
                }
                for (i, w) in weights.iter().enumerate() {
                    if !w.is_finite() || *w < 0.0 {
                        p.push(
                            format!("catalog.popularity.weights[{i}]"),
                            format!("weight must be finite and >= 0, got {w}"),
                        );
                    }
                }
                if weights.iter().all(|w| *w <= 0.0) {
                    p.push("catalog.popularity.weights", "all weights are zero");
                }
            }
            Popularity::Uniform => {}
        }
        c.duration.validate("catalog.duration", &mut p);
        if c.duration.quantile(1.0) <= 0.0 {
            p.push("catalog.duration", "every title would have duration 0");
        }
        if c.median_duration_top > c.titles {
            p.push(
                "catalog.median_duration_top",
                format!(
                    "{} is more than the {} titles",
                    c.median_duration_top, c.titles
                ),
            );
        }
        self.validate_ladder(&mut p);
        self.validate_storage(&mut p);
        self.validate_sessions(&mut p);
        self.validate_clients(&mut p);
        let m = &self.measurement;
        if let Some(0) = m.shard_sessions {
            p.push(
                "measurement.shard_sessions",
                "must be at least 1 (or unset)",
            );
        } else if self.shard_count() > limits::MAX_SHARDS {
            p.push(
                "measurement.shard_sessions",
                format!(
                    "{} sessions in shards of {} make {} script files, more than the limit of {}",
                    self.sessions.count,
                    m.shard_sessions.unwrap_or(0),
                    self.shard_count(),
                    limits::MAX_SHARDS
                ),
            );
        }
        for (key, v) in [
            ("measurement.ramp_up_sessions", m.ramp_up_sessions),
            ("measurement.ramp_down_sessions", m.ramp_down_sessions),
        ] {
            if v > limits::MAX_SESSIONS {
                p.push(
                    key,
                    format!("must be at most {}, got {v}", limits::MAX_SESSIONS),
                );
            }
        }
        p
    }

    fn validate_ladder(&self, p: &mut Problems) {
        let reps = &self.catalog.representations;
        if reps.is_empty() {
            p.push(
                "catalog.representations",
                "needs at least one representation",
            );
            return;
        }
        if reps.len() > limits::MAX_REPRESENTATIONS {
            p.push(
                "catalog.representations",
                format!(
                    "has {} representations, more than the limit of {}",
                    reps.len(),
                    limits::MAX_REPRESENTATIONS
                ),
            );
        }
        let mut names = BTreeSet::new();
        for (i, r) in reps.iter().enumerate() {
            let at = format!("catalog.representations[{i}]");
            if !is_path_name(&r.name) {
                p.push(
                    format!("{at}.name"),
                    format!(
                        "{:?} must be 1 to {} characters from A-Z a-z 0-9 _ . - and not start with `.` (it becomes a path component)",
                        r.name,
                        limits::MAX_NAME_LEN
                    ),
                );
            }
            if !names.insert(r.name.as_str()) {
                p.push(
                    format!("{at}.name"),
                    format!("duplicate representation `{}`", r.name),
                );
            }
            if !(r.bitrate_kbps.is_finite()
                && r.bitrate_kbps > 0.0
                && r.bitrate_kbps <= limits::MAX_BITRATE_KBPS)
            {
                p.push(
                    format!("{at}.bitrate_kbps"),
                    format!(
                        "must be > 0 and at most {} (1 Gbit/s), got {}",
                        limits::MAX_BITRATE_KBPS,
                        r.bitrate_kbps
                    ),
                );
            }
            if !(r.share > 0.0 && r.share <= 1.0) {
                p.push(
                    format!("{at}.share"),
                    format!("must be in (0, 1], got {}", r.share),
                );
            }
        }
        match self.catalog.ladder {
            Ladder::Nested => {
                if !reps.iter().any(|r| r.share == 1.0) {
                    p.push(
                        "catalog.representations",
                        "with ladder = \"nested\" at least one representation needs share = 1 so every title has one",
                    );
                }
            }
            Ladder::Partition => {
                let sum: f64 = reps.iter().map(|r| r.share).sum();
                if (sum - 1.0).abs() > SHARE_TOLERANCE {
                    p.push(
                        "catalog.representations",
                        format!("with ladder = \"partition\" shares must sum to 1 within 1e-6, got {sum}"),
                    );
                }
            }
        }
    }

    fn validate_storage(&self, p: &mut Problems) {
        let s = &self.catalog.storage;
        let req = self.sessions.request_s;
        match (s.layout, s.chunk_s) {
            (Layout::Chunked, None) => p.push(
                "catalog.storage.chunk_s",
                "layout = \"chunked\" needs chunk_s",
            ),
            (Layout::Single, Some(_)) => p.push(
                "catalog.storage.chunk_s",
                "layout = \"single\" stores one file per title; remove chunk_s",
            ),
            (Layout::Chunked, Some(c)) => {
                if !(c.is_finite() && c > 0.0 && c <= limits::MAX_CHUNK_S) {
                    p.push(
                        "catalog.storage.chunk_s",
                        format!("must be > 0 and at most {}, got {c}", limits::MAX_CHUNK_S),
                    );
                } else if req > 0.0 && !is_multiple(c, req) {
                    p.push(
                        "catalog.storage.chunk_s",
                        format!(
                            "chunk files of {c} s must hold a whole number of {req} s requests (sessions.request_s)"
                        ),
                    );
                }
            }
            (Layout::Single, None) => {}
        }
        if let Some(pad) = s.pad_s {
            if !(pad.is_finite() && pad > 0.0 && pad <= limits::MAX_SECONDS) {
                p.push(
                    "catalog.storage.pad_s",
                    format!("must be > 0 and at most {}, got {pad}", limits::MAX_SECONDS),
                );
            } else if req > 0.0 && !is_multiple(pad, req) {
                p.push(
                    "catalog.storage.pad_s",
                    format!("padding of {pad} s must be a whole number of {req} s requests"),
                );
            } else if let Some(c) = s.chunk_s {
                if c > 0.0 && !is_multiple(pad, c) {
                    p.push(
                        "catalog.storage.pad_s",
                        format!("padding of {pad} s must be a whole number of {c} s chunks"),
                    );
                }
            }
        }
    }

    fn validate_sessions(&self, p: &mut Problems) {
        let s = &self.sessions;
        if s.count == 0 || s.count > limits::MAX_SESSIONS {
            p.push(
                "sessions.count",
                format!(
                    "must be between 1 and {}, got {}",
                    limits::MAX_SESSIONS,
                    s.count
                ),
            );
        }
        s.viewing_fraction.validate("sessions.viewing_fraction", p);
        if s.viewing_fraction.quantile(1.0) > 1.0 + 1e-9 {
            p.push(
                "sessions.viewing_fraction",
                "a viewing fraction above 1 would request past the end of the title",
            );
        }
        if let StartPosition::Fraction { distribution } = &s.start {
            distribution.validate("sessions.start.distribution", p);
            if distribution.quantile(1.0) > 1.0 {
                p.push(
                    "sessions.start.distribution",
                    "start fractions must be <= 1",
                );
            }
        }
        if !(s.request_s.is_finite()
            && s.request_s >= limits::MIN_REQUEST_S
            && s.request_s <= limits::MAX_REQUEST_S)
        {
            p.push(
                "sessions.request_s",
                format!(
                    "must be between {} and {} seconds, got {}",
                    limits::MIN_REQUEST_S,
                    limits::MAX_REQUEST_S,
                    s.request_s
                ),
            );
        }
        if let Some(pacing) = s.pacing_s {
            if !(0.0..=limits::MAX_SECONDS).contains(&pacing) {
                p.push(
                    "sessions.pacing_s",
                    format!(
                        "must be >= 0 and at most {} seconds, got {pacing}",
                        limits::MAX_SECONDS
                    ),
                );
            }
        }
        if !(s.timeout_s.is_finite() && s.timeout_s > 0.0 && s.timeout_s <= limits::MAX_SECONDS) {
            p.push(
                "sessions.timeout_s",
                format!(
                    "must be > 0 and at most {} seconds, got {}",
                    limits::MAX_SECONDS,
                    s.timeout_s
                ),
            );
        }
        if s.min_requests == 0 {
            p.push("sessions.min_requests", "must be at least 1");
        }
        let has_rep = |name: &str| self.representation_index(name).is_some();
        let check_mix = |path: &str, mix: &BTreeMap<String, f64>, p: &mut Problems| {
            let mut sum = 0.0;
            for (name, w) in mix {
                if !has_rep(name) {
                    p.push(
                        format!("{path}.{name}"),
                        format!("unknown representation `{name}`"),
                    );
                }
                if !(w.is_finite() && *w >= 0.0) {
                    p.push(format!("{path}.{name}"), format!("must be >= 0, got {w}"));
                }
                sum += w;
            }
            if (sum - 1.0).abs() > SHARE_TOLERANCE {
                p.push(
                    path.to_string(),
                    format!("probabilities must sum to 1 within 1e-6, got {sum}"),
                );
            }
        };
        match &s.representation {
            RepresentationChoice::Fixed { name } => {
                if !has_rep(name) {
                    p.push(
                        "sessions.representation.name",
                        format!("unknown representation `{name}`"),
                    );
                }
            }
            RepresentationChoice::Mix { weights } => {
                check_mix("sessions.representation.weights", weights, p)
            }
            RepresentationChoice::ClassMix { classes } => {
                for (class, mix) in classes {
                    if !self.clients.iter().any(|c| &c.name == class) {
                        p.push(
                            format!("sessions.representation.classes.{class}"),
                            format!("unknown client class `{class}`"),
                        );
                    }
                    check_mix(&format!("sessions.representation.classes.{class}"), mix, p);
                }
                for c in &self.clients {
                    if !classes.contains_key(&c.name) {
                        p.push(
                            "sessions.representation.classes",
                            format!("no mix for client class `{}`", c.name),
                        );
                    }
                }
            }
            RepresentationChoice::Rule { headroom } => {
                if !(headroom.is_finite() && *headroom > 0.0 && *headroom <= limits::MAX_HEADROOM) {
                    p.push(
                        "sessions.representation.headroom",
                        format!(
                            "must be > 0 and at most {}, got {headroom}",
                            limits::MAX_HEADROOM
                        ),
                    );
                }
            }
        }
    }

    fn validate_clients(&self, p: &mut Problems) {
        if self.clients.is_empty() {
            p.push("clients", "needs at least one client class");
            return;
        }
        if self.clients.len() > limits::MAX_CLIENT_CLASSES {
            p.push(
                "clients",
                format!(
                    "has {} classes, more than the limit of {}",
                    self.clients.len(),
                    limits::MAX_CLIENT_CLASSES
                ),
            );
        }
        let mut names = BTreeSet::new();
        let mut sum = 0.0;
        for (i, c) in self.clients.iter().enumerate() {
            let at = format!("clients[{i}]");
            if !is_token_name(&c.name) {
                p.push(
                    format!("{at}.name"),
                    format!(
                        "{:?} must be 1 to {} printable ASCII characters without spaces, `=`, `#`, quotes or `\\` (it becomes script text)",
                        c.name,
                        limits::MAX_NAME_LEN
                    ),
                );
            }
            if !names.insert(c.name.as_str()) {
                p.push(
                    format!("{at}.name"),
                    format!("duplicate client class `{}`", c.name),
                );
            }
            if !(c.share.is_finite() && c.share >= 0.0) {
                p.push(
                    format!("{at}.share"),
                    format!("must be >= 0, got {}", c.share),
                );
            }
            for (key, v, max) in [
                ("down_kbps", c.down_kbps, limits::MAX_LINK_KBPS),
                ("up_kbps", c.up_kbps, limits::MAX_LINK_KBPS),
                ("delay_ms", c.delay_ms, limits::MAX_DELAY_MS),
            ] {
                if !(v.is_finite() && v >= 0.0 && v <= max) {
                    p.push(
                        format!("{at}.{key}"),
                        format!("must be >= 0 and at most {max}, got {v}"),
                    );
                }
            }
            sum += c.share;
        }
        if (sum - 1.0).abs() > SHARE_TOLERANCE {
            p.push(
                "clients",
                format!("shares must sum to 1 within 1e-6, got {sum}"),
            );
        }
    }
}

fn is_multiple(big: f64, small: f64) -> bool {
    let r = big / small;
    r >= 1.0 - 1e-9 && (r - r.round()).abs() < 1e-9
}

/// 1-based line and column of a byte offset.
pub(crate) fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

#[cfg(test)]
#[path = "spec_tests.rs"]
mod tests;
