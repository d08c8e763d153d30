//! Closed-loop players run live (`vodlab run --player dash|hls --abr RULE`):
//! the settings, the manifest → [`Movie`] step, the named errors that end a
//! player's session, and the run-wide QoE aggregate written as the
//! `players` object of `results.json`.
//!
//! The executor itself (connections, timers) is in the engine
//! (`engine/player_session.rs`); everything here is without I/O. A player
//! session: fetch the title's manifest (`/{title}/manifest.mpd`, or
//! `/{title}/master.m3u8` and its media playlists) on the session's
//! connection, parse it ([`vodlab_manifest`]), build the movie (segment
//! sizes from byte ranges when the manifest gives them, else bandwidth ×
//! segment duration), then run the [`Player`](crate::core::player::Player) core
//! until it is done. A session plays as many segments as its script's
//! viewing time covers ([`segments_to_play`]).

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::hash::{Hash, Hasher};
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use vodlab_manifest::{ManifestError, Presentation};
use vodlab_workload::script::Session;

use crate::core::exchange::ErrorKind;
use crate::core::player::{Movie, PlayerConfig, PlayerError, QoeSummary};
use crate::out::metrics::Summary;

mod agg;
pub use agg::{
    merge_dumps, rebuffer_ratio, signed_summary, PlayerClassDump, PlayersAgg, PlayersDump,
    PlayersSettings,
};
mod timeline;
pub use timeline::{
    keep_smallest, rebuffers_of, smallest_ids, SessionTimeline, TimelineAbandoned,
    TimelineRebuffer, TimelineRecorder, TimelineSegment, DEFAULT_TIMELINES, MAX_TIMELINES,
    MAX_TIMELINE_EVENTS, MAX_TIMELINE_SEGMENTS,
};

/// Which manifest a player reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PlayerKind {
    /// MPEG-DASH: `/{title}/manifest.mpd`.
    Dash,
    /// HLS: `/{title}/master.m3u8` and its media playlists.
    Hls,
}

impl PlayerKind {
    /// Its name on the command line and in results.
    pub fn name(self) -> &'static str {
        match self {
            PlayerKind::Dash => "dash",
            PlayerKind::Hls => "hls",
        }
    }

    /// URL path of a title's entry manifest.
    pub fn manifest_path(self, title: &str) -> String {
        match self {
            PlayerKind::Dash => format!("/{title}/{}", vodlab_manifest::MPD_NAME),
            PlayerKind::Hls => format!("/{title}/{}", vodlab_manifest::MASTER_NAME),
        }
    }
}

impl fmt::Display for PlayerKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for PlayerKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "dash" => Ok(PlayerKind::Dash),
            "hls" => Ok(PlayerKind::Hls),
            _ => Err(format!("unknown player `{s}` (expected dash or hls)")),
        }
    }
}

/// Settings of a run of closed-loop players.
#[derive(Debug, Clone, PartialEq)]
pub struct PlayerRun {
    /// DASH or HLS.
    pub kind: PlayerKind,
    /// The player core's settings (rule, buffer, abandonment).
    pub config: PlayerConfig,
    /// Play at most this many segments per session (`None`: the session's
    /// viewing time).
    pub max_segments: Option<usize>,
    /// A request (manifest or segment) taking longer than this fails the
    /// session.
    pub request_timeout: Duration,
    /// Write each session's ITU-T P.1203 mode-0 input here
    /// (`{session id}.json`).
    pub p1203_dir: Option<PathBuf>,
    /// Keep the rendition timelines of the sessions with this many
    /// smallest ids (`--player-timelines`; 0: none).
    pub timelines: usize,
    /// How the players send CMCD (`--cmcd`; the run's `--no-cmcd` wins).
    pub cmcd: crate::core::cmcd::CmcdMode,
    /// `rtp` = this multiple of `br`, rounded up to 100 kbit/s
    /// (`--cmcd-rtp`); `None`: no `rtp`.
    pub cmcd_rtp: Option<f64>,
    /// Cap the player's choice at the server's CMSD `mb`
    /// (`--honour-cmsd`).
    pub honour_cmsd: bool,
}

/// Largest manifest or playlist body a player accepts, bytes.
pub const MAX_MANIFEST_BYTES: usize = 4 << 20;
/// Largest number of media playlists an HLS player follows.
pub const MAX_VARIANTS: usize = 64;
/// Sabre's abandonment check spacing for executors that report every read:
/// bits since the last check...
pub const LIVE_ABANDON_CHECK_BITS: f64 = 12_000.0;
/// ...and ms since it.
pub const LIVE_ABANDON_CHECK_MS: f64 = 50.0;

impl PlayerRun {
    /// A run of `kind` players with `config`, the live executor's
    /// abandonment spacing ([`LIVE_ABANDON_CHECK_BITS`],
    /// [`LIVE_ABANDON_CHECK_MS`]; the hlsjs profile: hls.js's 100 ms timer
    /// whatever arrived) and lean players (no per-segment records).
    pub fn new(kind: PlayerKind, mut config: PlayerConfig) -> Self {
        if config.profile == crate::core::player::PlayerProfile::Hlsjs {
            config.abandon_check_min_bits = 0.0;
            config.abandon_check_min_ms = crate::core::player::abr::hlsjs::ABANDON_CHECK_MS;
        } else {
            config.abandon_check_min_bits = LIVE_ABANDON_CHECK_BITS;
            config.abandon_check_min_ms = LIVE_ABANDON_CHECK_MS;
        }
        config.keep_records = false;
        Self {
            kind,
            config,
            max_segments: None,
            request_timeout: Duration::from_secs(30),
            p1203_dir: None,
            timelines: DEFAULT_TIMELINES,
            cmcd: crate::core::cmcd::CmcdMode::Header,
            cmcd_rtp: None,
            honour_cmsd: false,
        }
    }

    /// Checks the settings that do not depend on a movie; errors name the
    /// flag.
    pub fn validate(&self) -> Result<(), String> {
        if self.max_segments == Some(0) {
            return Err("--max-segments must be at least 1".into());
        }
        if self.timelines > MAX_TIMELINES {
            return Err(format!(
                "--player-timelines must be at most {MAX_TIMELINES}, got {}",
                self.timelines
            ));
        }
        if self.request_timeout.is_zero() {
            return Err("--player-timeout must be positive".into());
        }
        if let Some(m) = self.cmcd_rtp {
            if !(m.is_finite() && m > 0.0 && m <= 1000.0) {
                return Err(format!(
                    "--cmcd-rtp must be a multiple of the bit rate above 0 and at most 1000, got {m}"
                ));
            }
        }
        // the buffer against a 1 ms segment: only the movie-free checks
        let probe = Movie::constant(1.0, &[1.0], 1);
        self.config
            .validate(&probe)
            .map_err(|e| format!("player settings: {e}"))
    }
}

/// Why a player's session ended early. Each variant has a stable name
/// ([`PlayerSessionError::name`]) counted in `results.json`.
#[derive(Debug, PartialEq, thiserror::Error)]
pub enum PlayerSessionError {
    /// The session's script names no title.
    #[error("the session names no title (#@session title=)")]
    NoTitle,
    /// A manifest or playlist was answered with another status than 200.
    #[error("{path}: HTTP {status}")]
    ManifestStatus {
        /// URL path.
        path: String,
        /// Status.
        status: u16,
    },
    /// A manifest or playlist did not parse or lacks what a player needs.
    #[error("{path}: {source}")]
    Manifest {
        /// URL path.
        path: String,
        /// The parser's error.
        source: ManifestError,
    },
    /// A manifest or playlist is larger than [`MAX_MANIFEST_BYTES`] or not
    /// UTF-8.
    #[error("{path}: {why}")]
    ManifestBody {
        /// URL path.
        path: String,
        /// Why.
        why: String,
    },
    /// The presentation cannot be played (no segments, equal bandwidths...).
    #[error("{path}: {source}")]
    Movie {
        /// URL path of the manifest.
        path: String,
        /// What is wrong.
        source: PlayerError,
    },
    /// A segment (or init segment) was answered with a status other than
    /// 200 or 206.
    #[error("{path}: HTTP {status}")]
    SegmentStatus {
        /// URL path.
        path: String,
        /// Status.
        status: u16,
    },
    /// A request failed on the wire.
    #[error("{path}: {kind:?}: {detail}")]
    Transfer {
        /// URL path.
        path: String,
        /// Type.
        kind: ErrorKind,
        /// Detail.
        detail: String,
    },
}

impl PlayerSessionError {
    /// Stable snake-case name, counted in `players.errors`.
    pub fn name(&self) -> &'static str {
        match self {
            PlayerSessionError::NoTitle => "no_title",
            PlayerSessionError::ManifestStatus { .. } => "manifest_status",
            PlayerSessionError::Manifest { source, .. } => match source {
                ManifestError::Xml(_) => "manifest_xml",
                ManifestError::Playlist(_) => "manifest_playlist",
                ManifestError::WrongPlaylistKind { .. } => "manifest_wrong_playlist_kind",
                ManifestError::Missing { .. } => "manifest_missing",
                ManifestError::Invalid { .. } => "manifest_invalid",
                ManifestError::Unsupported { .. } => "manifest_unsupported",
            },
            PlayerSessionError::ManifestBody { .. } => "manifest_body",
            PlayerSessionError::Movie { .. } => "manifest_unplayable",
            PlayerSessionError::SegmentStatus { .. } => "segment_status",
            PlayerSessionError::Transfer { kind, .. } => match kind {
                ErrorKind::Timeout => "transfer_timeout",
                ErrorKind::Refused => "transfer_refused",
                ErrorKind::Reset => "transfer_reset",
                ErrorKind::ShortBody => "transfer_short_body",
                _ => "transfer_other",
            },
        }
    }

    /// The request error kind this maps to in the run's `errors`.
    pub fn kind(&self) -> ErrorKind {
        match self {
            PlayerSessionError::ManifestStatus { .. }
            | PlayerSessionError::SegmentStatus { .. } => ErrorKind::BadStatus,
            PlayerSessionError::Manifest { .. }
            | PlayerSessionError::ManifestBody { .. }
            | PlayerSessionError::Movie { .. } => ErrorKind::BadResponse,
            PlayerSessionError::Transfer { kind, .. } => *kind,
            PlayerSessionError::NoTitle => ErrorKind::Other,
        }
    }
}

/// Segments a session plays: its script's viewing time (requests ×
/// `request_s`, or the request count when the script has no `request_s`)
/// over the segment duration, rounded up, at least 1.
pub fn segments_to_play(session: &Session, segment_s: f64) -> usize {
    segments_for(session.requests.len(), session.header.request_s, segment_s)
}

/// [`segments_to_play`] from a session's request count and `request_s`.
pub fn segments_for(requests: usize, request_s: Option<f64>, segment_s: f64) -> usize {
    let n = requests.max(1);
    match request_s {
        Some(r) if r > 0.0 && segment_s > 0.0 => {
            ((n as f64 * r / segment_s) - 1e-9).ceil().max(1.0) as usize
        }
        _ => n,
    }
}

/// Turns every segment and init URL of `p` into an absolute path, resolved
/// against the playlist (`base`) it came from.
pub fn absolutize(p: &mut Presentation, bases: &[String]) {
    for (i, l) in p.levels.iter_mut().enumerate() {
        let base = bases.get(i).or(bases.first()).map_or("/", String::as_str);
        if let Some(init) = l.init.as_mut() {
            init.url = vodlab_manifest::resolve(base, &init.url);
        }
        for s in &mut l.segments {
            s.url = vodlab_manifest::resolve(base, &s.url);
        }
    }
}

/// The movie of the first `segments` segments of `p` (all of them when it
/// has fewer): per level the announced bandwidth; per segment its byte
/// range's length when known, else bandwidth × segment duration; the
/// levels' resolutions when all are announced.
pub fn movie_of(p: &Presentation, segments: usize) -> Result<Movie, PlayerError> {
    let invalid = |key: &'static str, why: String| PlayerError::Invalid { key, why };
    if p.levels.is_empty() {
        return Err(invalid(
            "levels",
            "the manifest has no representation".into(),
        ));
    }
    if !(p.segment_s.is_finite() && p.segment_s > 0.0) {
        return Err(invalid(
            "segment_duration",
            format!("{} s is not a positive duration", p.segment_s),
        ));
    }
    let have = p.levels.iter().map(|l| l.segments.len()).min().unwrap_or(0);
    if have == 0 {
        return Err(invalid(
            "segments",
            "a representation has no segment".into(),
        ));
    }
    let n = segments.clamp(1, have);
    let seg_ms = p.segment_s * 1000.0;
    let bitrates_kbps: Vec<f64> = p
        .levels
        .iter()
        .map(|l| l.bandwidth_bps as f64 / 1000.0)
        .collect();
    let segment_sizes_bits = (0..n)
        .map(|i| {
            p.levels
                .iter()
                .map(|l| match l.segments[i].len() {
                    Some(b) => b as f64 * 8.0,
                    None => l.bandwidth_bps as f64 * p.segment_s,
                })
                .collect()
        })
        .collect();
    let resolutions = p
        .levels
        .iter()
        .map(|l| l.resolution.map(|(w, h)| format!("{w}x{h}")))
        .collect::<Option<Vec<_>>>();
    let m = Movie {
        segment_duration_ms: seg_ms,
        bitrates_kbps,
        segment_sizes_bits,
        resolutions,
        fps: None,
    };
    m.validate()?;
    Ok(m)
}

/// A title as its players see it: the presentation (absolute URLs) and
/// the movie of all its segments.
#[derive(Debug, Clone, PartialEq)]
pub struct Parsed {
    /// Levels and segment URLs.
    pub presentation: Presentation,
    /// The whole title's movie (a session stops after its viewing time).
    pub movie: Arc<Movie>,
}

/// Parsed titles shared by the sessions that fetched the same manifest
/// texts (keyed by a hash of the texts): each session still fetches its
/// manifest, but the segment lists and movies are held once.
#[derive(Debug, Default)]
pub struct PresentationCache {
    map: Mutex<HashMap<u64, Arc<Parsed>>>,
}

/// Entries the cache holds before it starts over.
const CACHE_ENTRIES: usize = 4096;

impl PresentationCache {
    /// Hash of the manifest texts of a session, in fetch order.
    pub fn key<'a>(texts: impl IntoIterator<Item = &'a str>) -> u64 {
        let mut h = DefaultHasher::new();
        for t in texts {
            t.hash(&mut h);
        }
        h.finish()
    }

    /// The cached title for `key`, or `make()`'s, stored.
    pub fn get_or_try<E>(
        &self,
        key: u64,
        make: impl FnOnce() -> Result<Parsed, E>,
    ) -> Result<Arc<Parsed>, E> {
        if let Some(p) = self.lock().get(&key) {
            return Ok(p.clone());
        }
        let p = Arc::new(make()?);
        let mut m = self.lock();
        if m.len() >= CACHE_ENTRIES {
            m.clear();
        }
        m.insert(key, p.clone());
        Ok(p)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Arc<Parsed>>> {
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// What a run's player sessions share: the presentation cache, the
/// aggregate (locked once per ended session) and the ids of the sessions
/// whose timelines are kept.
#[derive(Debug)]
pub struct PlayersShared {
    /// Parsed presentations.
    pub cache: PresentationCache,
    agg: Mutex<PlayersAgg>,
    timelines: usize,
    sample: OnceLock<BTreeSet<u64>>,
}

impl PlayersShared {
    /// An empty state for a run with these settings.
    pub fn new(run: &PlayerRun) -> Self {
        Self {
            cache: PresentationCache::default(),
            agg: Mutex::new(PlayersAgg::new(run)),
            timelines: run.timelines,
            sample: OnceLock::new(),
        }
    }

    /// True when session `id` is one of the [`PlayerRun::timelines`]
    /// smallest of `ids` (every session id of the run's workload, read once
    /// at the first call).
    pub fn sampled<I: IntoIterator<Item = u64>>(&self, id: u64, ids: impl FnOnce() -> I) -> bool {
        if self.timelines == 0 {
            return false;
        }
        self.sample
            .get_or_init(|| smallest_ids(ids(), self.timelines))
            .contains(&id)
    }

    /// The aggregate.
    pub fn lock(&self) -> std::sync::MutexGuard<'_, PlayersAgg> {
        self.agg.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// What one player session ended with.
#[derive(Debug, PartialEq)]
pub struct PlayerSessionOutcome {
    /// Client class.
    pub class: String,
    /// Time to fetch and parse the manifest (and playlists), ms.
    pub manifest_ms: f64,
    /// The QoE (of the segments played so far, for a failed session).
    pub qoe: Option<QoeSummary>,
    /// Nominal bit rate of each level of its movie, kbit/s.
    pub bitrates_kbps: Vec<f64>,
    /// Why it failed.
    pub error: Option<PlayerSessionError>,
}

impl PlayersResults {
    /// Lines for the summary table: overall, then per class.
    pub fn table(&self) -> String {
        use std::fmt::Write as _;
        let mut s = String::new();
        let _ = writeln!(
            s,
            "  players ({}, {}, buffer {} s): {} sessions, {} failed{}",
            self.player,
            self.abr,
            self.max_buffer_s,
            self.overall.sessions,
            self.overall.failed,
            if self.errors.is_empty() {
                String::new()
            } else {
                format!(" ({:?})", self.errors)
            }
        );
        if !self.timelines.is_empty() {
            let ids: Vec<String> = self
                .timelines
                .iter()
                .map(|t| t.session.to_string())
                .collect();
            let _ = writeln!(
                s,
                "    rendition timelines of sessions {} in results.json (players.timelines)",
                ids.join(", ")
            );
        }
        let rows = std::iter::once(("all", &self.overall))
            .chain(self.classes.iter().map(|(k, v)| (k.as_str(), v)));
        for (name, c) in rows {
            let _ = writeln!(
                s,
                "    {name}: bit rate mean {:.0} kbit/s (sessions' means p25 {:.0} p90 {:.0}), start-up median {:.0} ms p95 {:.0} ms, {} of {} sessions rebuffered ({:.1} s in all), switches up {:.1} down {:.1} per session, {} abandoned, Yin QoE/segment median {:.0}",
                c.mean_bitrate_kbps.mean,
                c.mean_bitrate_kbps.p25,
                c.mean_bitrate_kbps.p90,
                c.startup_delay_ms.p50,
                c.startup_delay_ms.p95,
                c.rebuffered_sessions,
                c.sessions - c.failed,
                c.rebuffer_time_s,
                c.switches_up.mean,
                c.switches_down.mean,
                c.abandoned,
                c.yin_qoe_per_segment.p50,
            );
        }
        s
    }
}

/// Media time played at one nominal bit rate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RenditionTime {
    /// Seconds of media.
    pub seconds: f64,
    /// Share of all media played (0..1).
    pub share: f64,
}

/// QoE distributions of the completed player sessions of a class (or all):
/// HdrHistograms (3 significant digits, nearest rank), so shards merge
/// exactly; totals exact.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlayerClassResults {
    /// Sessions that ended (completed or failed).
    pub sessions: u64,
    /// Of those, failed (their QoE is not in the distributions).
    pub failed: u64,
    /// Segments played by the completed sessions.
    pub segments: u64,
    /// Abandoned download attempts.
    pub abandoned: u64,
    /// Completed sessions with at least one rebuffer.
    pub rebuffered_sessions: u64,
    /// Rebuffer episodes of the completed sessions, in all.
    #[serde(default)]
    pub rebuffer_events: u64,
    /// Rebuffer time of the completed sessions, in all, s.
    #[serde(default)]
    pub rebuffer_time_s: f64,
    /// Up-switches of the completed sessions, in all.
    #[serde(default)]
    pub switches_up_total: u64,
    /// Down-switches of the completed sessions, in all.
    #[serde(default)]
    pub switches_down_total: u64,
    /// Manifest (and playlists) fetch and parse time, ms.
    pub manifest_ms: Summary,
    /// Start-up delay: first segment request to playback start, ms.
    pub startup_delay_ms: Summary,
    /// Rebuffer (stall) episodes per session.
    pub rebuffer_count: Summary,
    /// Rebuffer time per session, ms.
    pub rebuffer_ms: Summary,
    /// Mean nominal bit rate of the played segments, kbit/s.
    pub mean_bitrate_kbps: Summary,
    /// Sabre's time-average played bit rate, kbit/s.
    pub time_average_bitrate_kbps: Summary,
    /// Up-switches per session.
    pub switches_up: Summary,
    /// Down-switches per session.
    pub switches_down: Summary,
    /// Yin et al. QoE per segment (weights in docs/abr.md).
    pub yin_qoe_per_segment: Summary,
    /// Rebuffer ratio per session: stall time / (stall time + media time
    /// played), 0..1 (parts per million in the histogram).
    #[serde(default)]
    pub rebuffer_ratio: Summary,
    /// Media time per nominal bit rate (kbit/s as the key).
    pub time_per_bitrate: BTreeMap<String, RenditionTime>,
}

/// The `players` object of `results.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlayersResults {
    /// `dash` or `hls`.
    pub player: PlayerKind,
    /// Player profile (`--player-profile`; absent in older results: sabre).
    #[serde(default)]
    pub profile: crate::core::player::PlayerProfile,
    /// ABR rule (`dashjs` or `hlsjs` under those profiles).
    pub abr: String,
    /// Buffer capacity, s (the dashjs profile: its 30 s top-level target;
    /// hlsjs: its 30 s `maxBufferLength`).
    pub max_buffer_s: f64,
    /// Abandonment on.
    pub abandon: bool,
    /// The `--max-segments` cap, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_segments: Option<usize>,
    /// Every session.
    pub overall: PlayerClassResults,
    /// Per client class.
    pub classes: BTreeMap<String, PlayerClassResults>,
    /// Failed sessions by error name.
    pub errors: BTreeMap<String, u64>,
    /// Where the P.1203 inputs were written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p1203_dir: Option<String>,
    /// P.1203 inputs that could not be written.
    #[serde(default)]
    pub p1203_write_errors: u64,
    /// Sessions sampled for rendition timelines (`--player-timelines`).
    #[serde(default)]
    pub timeline_sample: usize,
    /// Rendition timelines of the sampled sessions (the smallest session
    /// ids that ended), by session id.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub timelines: Vec<SessionTimeline>,
}

#[cfg(test)]
mod tests;
