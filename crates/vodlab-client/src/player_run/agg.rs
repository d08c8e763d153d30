//! The run-wide aggregate of closed-loop player sessions: bounded and
//! mergeable (HdrHistograms and integer counters, never a value per
//! session), so the `players` object of shards' `metrics.json` add up in
//! `vodlab merge` to exactly what one process would have reported.
//!
//! Units of the histograms: times in µs, bit rates in bit/s, per-session
//! counts as they are, the Yin score in thousandths (split by sign into
//! two histograms). Every histogram has [`crate::out::metrics::histogram`]'s
//! bounds (1 ..= 3.6e9, 3 significant digits); a zero is recorded as a
//! zero (no rebuffer is not one µs of rebuffer).

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use super::{
    keep_smallest, PlayerClassResults, PlayerKind, PlayerRun, PlayerSessionOutcome, PlayersResults,
    RenditionTime, SessionTimeline,
};
use crate::out::codec::{decode_histogram, encode_histogram, ShardError};
use crate::out::metrics::{histogram, Summary};

/// Largest value a player histogram holds (larger ones are clamped).
const HIST_MAX: u64 = 3_600_000_000;

/// Records `v` (rounded, clamped to `0 ..= HIST_MAX`; NaN is not recorded).
fn put(h: &mut Histogram<u64>, v: f64) {
    if v.is_nan() {
        return;
    }
    let _ = h.record((v.round().max(0.0) as u64).min(HIST_MAX));
}

/// The `k`-th smallest value (1-based) a histogram holds: the highest value
/// equivalent to its bucket, as `value_at_quantile` gives.
fn value_at_rank(h: &Histogram<u64>, k: u64) -> u64 {
    let mut seen = 0;
    for v in h.iter_recorded() {
        seen += v.count_at_value();
        if seen >= k {
            return h.highest_equivalent(v.value_iterated_to());
        }
    }
    h.max()
}

/// A session's rebuffer ratio: stall time over stall time plus the media
/// time it played (0 with nothing played and no stall).
pub fn rebuffer_ratio(q: &crate::core::player::QoeSummary) -> f64 {
    let played: f64 = q.time_per_level_ms.iter().sum();
    let all = played + q.rebuffer_ms;
    if all > 0.0 {
        (q.rebuffer_ms / all).clamp(0.0, 1.0)
    } else {
        0.0
    }
}

/// Summary of values split by sign: `pos` holds those ≥ 0, `neg` the
/// magnitudes of those < 0, both multiplied by `scale`. Nearest-rank
/// percentiles over both.
pub fn signed_summary(pos: &Histogram<u64>, neg: &Histogram<u64>, scale: f64) -> Summary {
    let (np, nn) = (pos.len(), neg.len());
    let n = np + nn;
    if n == 0 {
        return Summary::default();
    }
    let at = |k: u64| -> f64 {
        if k <= nn {
            // the k-th smallest overall is the (nn - k + 1)-th smallest magnitude
            -(value_at_rank(neg, nn - k + 1) as f64) / scale
        } else {
            value_at_rank(pos, k - nn) as f64 / scale
        }
    };
    let q = |p: f64| at(((p * n as f64).ceil() as u64).clamp(1, n));
    let sum = pos.mean() * np as f64 - neg.mean() * nn as f64;
    Summary {
        count: n,
        min: if nn > 0 {
            -(neg.max() as f64) / scale
        } else {
            pos.min() as f64 / scale
        },
        mean: sum / n as f64 / scale,
        p25: q(0.25),
        p50: q(0.50),
        p75: q(0.75),
        p90: q(0.90),
        p95: q(0.95),
        p99: q(0.99),
        p999: q(0.999),
        max: if np > 0 {
            pos.max() as f64 / scale
        } else {
            -(neg.min() as f64) / scale
        },
        iqr: q(0.75) - q(0.25),
    }
}

/// Names of a class's histograms, in [`ClassAgg::hists`] order (the keys
/// of `hists` in a dump).
const HIST_NAMES: [&str; 11] = [
    "manifest_us",
    "startup_us",
    "rebuffer_count",
    "rebuffer_us",
    "mean_bitrate_bps",
    "time_average_bitrate_bps",
    "switches_up",
    "switches_down",
    "yin_milli_pos",
    "yin_milli_neg",
    "rebuffer_ratio_ppm",
];

/// Histograms a `metrics.json` of a vodlab before them may lack (read as
/// empty).
const HIST_OPTIONAL: [&str; 1] = ["rebuffer_ratio_ppm"];

/// Figures of the ended sessions of one class (or all).
#[derive(Debug, Clone, PartialEq)]
struct ClassAgg {
    /// `[sessions, failed, segments, abandoned, rebuffered_sessions,
    /// rebuffer_events, rebuffer_us, switches_up, switches_down]`.
    counts: [u64; 9],
    /// Per completed session, in [`HIST_NAMES`] order.
    hists: [Histogram<u64>; 11],
    /// Media µs played per nominal bit rate (kbit/s, as text).
    per_rate_us: BTreeMap<String, u64>,
}

impl Default for ClassAgg {
    fn default() -> Self {
        Self {
            counts: [0; 9],
            hists: std::array::from_fn(|_| histogram()),
            per_rate_us: BTreeMap::new(),
        }
    }
}

impl ClassAgg {
    fn add(&mut self, o: &PlayerSessionOutcome) {
        self.counts[0] += 1;
        if o.error.is_some() {
            self.counts[1] += 1;
            return;
        }
        let Some(q) = &o.qoe else { return };
        let c = &mut self.counts;
        c[2] += q.segments as u64;
        c[3] += q.abandoned as u64;
        c[4] += u64::from(q.rebuffer_count > 0);
        c[5] += u64::from(q.rebuffer_count);
        c[6] += (q.rebuffer_ms * 1e3).round().max(0.0) as u64;
        c[7] += u64::from(q.switches_up);
        c[8] += u64::from(q.switches_down);
        let h = &mut self.hists;
        put(&mut h[0], o.manifest_ms * 1e3);
        put(&mut h[1], q.startup_delay_ms * 1e3);
        put(&mut h[2], f64::from(q.rebuffer_count));
        put(&mut h[3], q.rebuffer_ms * 1e3);
        put(&mut h[4], q.mean_bitrate_kbps * 1e3);
        put(&mut h[5], q.time_average_bitrate_kbps * 1e3);
        put(&mut h[6], f64::from(q.switches_up));
        put(&mut h[7], f64::from(q.switches_down));
        let y = q.yin_qoe_per_segment * 1e3;
        if y >= 0.0 {
            put(&mut h[8], y);
        } else {
            put(&mut h[9], -y);
        }
        put(&mut h[10], rebuffer_ratio(q) * 1e6);
        for (l, ms) in q.time_per_level_ms.iter().enumerate() {
            if let Some(r) = o.bitrates_kbps.get(l) {
                if *ms > 0.0 {
                    *self.per_rate_us.entry(format!("{r}")).or_default() +=
                        (ms * 1e3).round() as u64;
                }
            }
        }
    }

    fn merge(&mut self, o: &ClassAgg) {
        for (a, b) in self.counts.iter_mut().zip(o.counts) {
            *a += b;
        }
        for (a, b) in self.hists.iter_mut().zip(&o.hists) {
            a.add(b).expect("same bounds");
        }
        for (k, us) in &o.per_rate_us {
            *self.per_rate_us.entry(k.clone()).or_default() += us;
        }
    }

    fn results(&self) -> PlayerClassResults {
        let total_us: u64 = self.per_rate_us.values().sum();
        let h = &self.hists;
        let [sessions, failed, segments, abandoned, rebuffered_sessions, rebuffer_events, rebuffer_us, ups, downs] =
            self.counts;
        PlayerClassResults {
            sessions,
            failed,
            segments,
            abandoned,
            rebuffered_sessions,
            rebuffer_events,
            rebuffer_time_s: rebuffer_us as f64 / 1e6,
            switches_up_total: ups,
            switches_down_total: downs,
            manifest_ms: Summary::of(&h[0], 1e3),
            startup_delay_ms: Summary::of(&h[1], 1e3),
            rebuffer_count: Summary::of(&h[2], 1.0),
            rebuffer_ms: Summary::of(&h[3], 1e3),
            mean_bitrate_kbps: Summary::of(&h[4], 1e3),
            time_average_bitrate_kbps: Summary::of(&h[5], 1e3),
            switches_up: Summary::of(&h[6], 1.0),
            switches_down: Summary::of(&h[7], 1.0),
            yin_qoe_per_segment: signed_summary(&h[8], &h[9], 1e3),
            rebuffer_ratio: Summary::of(&h[10], 1e6),
            time_per_bitrate: self
                .per_rate_us
                .iter()
                .map(|(k, &us)| {
                    (
                        k.clone(),
                        RenditionTime {
                            seconds: us as f64 / 1e6,
                            share: if total_us > 0 {
                                us as f64 / total_us as f64
                            } else {
                                0.0
                            },
                        },
                    )
                })
                .collect(),
        }
    }

    fn dump(&self, class: &str) -> Result<PlayerClassDump, ShardError> {
        let hists = HIST_NAMES
            .iter()
            .zip(&self.hists)
            .map(|(n, h)| {
                Ok((
                    n.to_string(),
                    encode_histogram(&format!("players.{class}.{n}"), h)?,
                ))
            })
            .collect::<Result<_, ShardError>>()?;
        Ok(PlayerClassDump {
            counts: self.counts,
            hists,
            per_rate_us: self.per_rate_us.clone(),
        })
    }

    fn of_dump(class: &str, d: &PlayerClassDump) -> Result<Self, ShardError> {
        let mut c = ClassAgg {
            counts: d.counts,
            per_rate_us: d.per_rate_us.clone(),
            ..ClassAgg::default()
        };
        for (n, h) in HIST_NAMES.iter().zip(c.hists.iter_mut()) {
            let name = format!("players.{class}.{n}");
            let Some(text) = d.hists.get(*n) else {
                if HIST_OPTIONAL.contains(n) {
                    continue;
                }
                return Err(ShardError::Histogram {
                    name,
                    reason: "missing".into(),
                });
            };
            // added into a fresh one: the same bounds as in a running process
            h.add(decode_histogram(&name, text)?)
                .map_err(|e| ShardError::Histogram {
                    name,
                    reason: format!("{e:?}"),
                })?;
        }
        Ok(c)
    }
}

/// The settings a players aggregate reports (and that shards of one run
/// share).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlayersSettings {
    /// `dash` or `hls`.
    pub player: PlayerKind,
    /// Player profile (`sabre`, `dashjs`, `hlsjs`); absent in older
    /// results: sabre.
    #[serde(default)]
    pub profile: crate::core::player::PlayerProfile,
    /// ABR rule (`dashjs` or `hlsjs` under those profiles).
    pub abr: String,
    /// Buffer capacity, s.
    pub max_buffer_s: f64,
    /// Abandonment on.
    pub abandon: bool,
    /// The `--max-segments` cap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_segments: Option<usize>,
    /// Where the P.1203 inputs are written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p1203_dir: Option<String>,
    /// Sessions sampled for rendition timelines.
    #[serde(default)]
    pub timelines: usize,
}

impl PlayersSettings {
    /// The settings of `run`.
    pub fn of(run: &PlayerRun) -> Self {
        Self {
            player: run.kind,
            profile: run.config.profile,
            abr: match run.config.profile {
                crate::core::player::PlayerProfile::Sabre => run.config.abr.name().to_string(),
                crate::core::player::PlayerProfile::Dashjs => "dashjs".to_string(),
                crate::core::player::PlayerProfile::Hlsjs => "hlsjs".to_string(),
            },
            max_buffer_s: run.config.max_buffer_ms / 1000.0,
            abandon: run.config.abandon,
            max_segments: run.max_segments,
            p1203_dir: run.p1203_dir.as_ref().map(|p| p.display().to_string()),
            timelines: run.timelines,
        }
    }
}

/// One class's player figures in `metrics.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlayerClassDump {
    /// `[sessions, failed, segments, abandoned, rebuffered_sessions,
    /// rebuffer_events, rebuffer_us, switches_up, switches_down]`.
    pub counts: [u64; 9],
    /// HdrHistograms (V2, base64) by name: `manifest_us`, `startup_us`,
    /// `rebuffer_count`, `rebuffer_us`, `mean_bitrate_bps`,
    /// `time_average_bitrate_bps`, `switches_up`, `switches_down`,
    /// `yin_milli_pos`, `yin_milli_neg`, `rebuffer_ratio_ppm`.
    pub hists: BTreeMap<String, String>,
    /// Media µs played per nominal bit rate (kbit/s as the key).
    pub per_rate_us: BTreeMap<String, u64>,
}

/// The `players` object of `metrics.json`: the exact state of a run's
/// players aggregate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlayersDump {
    /// The run's player settings.
    pub settings: PlayersSettings,
    /// Every session.
    pub overall: PlayerClassDump,
    /// Per client class.
    pub classes: BTreeMap<String, PlayerClassDump>,
    /// Failed sessions by error name.
    pub errors: BTreeMap<String, u64>,
    /// P.1203 inputs that could not be written.
    #[serde(default)]
    pub p1203_write_errors: u64,
    /// Rendition timelines of the sampled sessions, by session id.
    #[serde(default)]
    pub timelines: Vec<SessionTimeline>,
}

/// The run-wide aggregate of player sessions (one lock per ended session).
#[derive(Debug, Clone, PartialEq)]
pub struct PlayersAgg {
    settings: PlayersSettings,
    overall: ClassAgg,
    classes: BTreeMap<String, ClassAgg>,
    errors: BTreeMap<String, u64>,
    p1203_errors: u64,
    /// At most `settings.timelines`, the smallest session ids.
    timelines: BTreeMap<u64, SessionTimeline>,
}

impl PlayersAgg {
    /// An empty aggregate of a run with these settings.
    pub fn new(run: &PlayerRun) -> Self {
        Self::with_settings(PlayersSettings::of(run))
    }

    fn with_settings(settings: PlayersSettings) -> Self {
        Self {
            settings,
            overall: ClassAgg::default(),
            classes: BTreeMap::new(),
            errors: BTreeMap::new(),
            p1203_errors: 0,
            timelines: BTreeMap::new(),
        }
    }

    /// Adds one ended session.
    pub fn add(&mut self, o: &PlayerSessionOutcome) {
        self.overall.add(o);
        self.classes.entry(o.class.clone()).or_default().add(o);
        if let Some(e) = &o.error {
            *self.errors.entry(e.name().to_string()).or_default() += 1;
        }
    }

    /// Adds a sampled session's timeline (kept when its id is among the
    /// `--player-timelines` smallest so far).
    pub fn add_timeline(&mut self, t: SessionTimeline) {
        keep_smallest(&mut self.timelines, t, self.settings.timelines);
    }

    /// Counts a P.1203 input that could not be written.
    pub fn p1203_write_failed(&mut self) {
        self.p1203_errors += 1;
    }

    /// Adds another part of the same run (another shard's aggregate).
    /// Errors when its settings differ.
    pub fn merge(&mut self, o: &PlayersAgg) -> Result<(), ShardError> {
        if o.settings != self.settings {
            return Err(ShardError::Mismatch(format!(
                "the shards' player settings differ: {:?} and {:?}",
                self.settings, o.settings
            )));
        }
        self.overall.merge(&o.overall);
        for (k, c) in &o.classes {
            self.classes.entry(k.clone()).or_default().merge(c);
        }
        for (k, n) in &o.errors {
            *self.errors.entry(k.clone()).or_default() += n;
        }
        self.p1203_errors += o.p1203_errors;
        for t in o.timelines.values() {
            keep_smallest(&mut self.timelines, t.clone(), self.settings.timelines);
        }
        Ok(())
    }

    /// The exact state, for `metrics.json`.
    pub fn dump(&self) -> Result<PlayersDump, ShardError> {
        Ok(PlayersDump {
            settings: self.settings.clone(),
            overall: self.overall.dump("overall")?,
            classes: self
                .classes
                .iter()
                .map(|(k, c)| Ok((k.clone(), c.dump(k)?)))
                .collect::<Result<_, ShardError>>()?,
            errors: self.errors.clone(),
            p1203_write_errors: self.p1203_errors,
            timelines: self.timelines.values().cloned().collect(),
        })
    }

    /// The aggregate [`PlayersAgg::dump`] wrote.
    pub fn of_dump(d: &PlayersDump) -> Result<Self, ShardError> {
        let mut a = Self::with_settings(d.settings.clone());
        a.overall = ClassAgg::of_dump("overall", &d.overall)?;
        for (k, c) in &d.classes {
            a.classes.insert(k.clone(), ClassAgg::of_dump(k, c)?);
        }
        a.errors = d.errors.clone();
        a.p1203_errors = d.p1203_write_errors;
        for t in &d.timelines {
            keep_smallest(&mut a.timelines, t.clone(), a.settings.timelines);
        }
        Ok(a)
    }

    /// The `players` object of `results.json`.
    pub fn results(&self) -> PlayersResults {
        let s = &self.settings;
        PlayersResults {
            player: s.player,
            profile: s.profile,
            abr: s.abr.clone(),
            max_buffer_s: s.max_buffer_s,
            abandon: s.abandon,
            max_segments: s.max_segments,
            overall: self.overall.results(),
            classes: self
                .classes
                .iter()
                .map(|(k, v)| (k.clone(), v.results()))
                .collect(),
            errors: self.errors.clone(),
            p1203_dir: s.p1203_dir.clone(),
            p1203_write_errors: self.p1203_errors,
            timeline_sample: s.timelines,
            timelines: self.timelines.values().cloned().collect(),
        }
    }
}

/// The players of merged shards: `None` when no part ran players; an error
/// when only some did or their settings differ.
pub fn merge_dumps<'a>(
    dumps: impl IntoIterator<Item = Option<&'a PlayersDump>>,
) -> Result<Option<PlayersResults>, ShardError> {
    let (mut agg, mut with, mut without) = (None::<PlayersAgg>, 0, 0);
    for d in dumps {
        let Some(d) = d else {
            without += 1;
            continue;
        };
        with += 1;
        let a = PlayersAgg::of_dump(d)?;
        match agg.as_mut() {
            Some(m) => m.merge(&a)?,
            None => agg = Some(a),
        }
    }
    if with > 0 && without > 0 {
        return Err(ShardError::Mismatch(format!(
            "{with} part(s) ran players (--player) and {without} did not"
        )));
    }
    Ok(agg.map(|a| a.results()))
}
