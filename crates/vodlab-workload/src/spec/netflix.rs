//! `[sessions.netflix]`: the session model of thesis chapter 5 (Netflix's
//! 2014 catalog server), with every knob the thesis gives a number for.
//! docs/workload-spec.md documents each key and its source.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::dist::Distribution;
use crate::error::Problems;

/// The kind of content a representation carries.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RepKind {
    /// Video only (the default).
    #[default]
    Video,
    /// Audio only.
    Audio,
    /// Audio and video in one file.
    Combined,
}

impl RepKind {
    /// True for the default kind (video), which specs and catalogs omit.
    pub fn is_video(&self) -> bool {
        *self == RepKind::Video
    }

    /// Name used in tables.
    pub fn name(self) -> &'static str {
        match self {
            RepKind::Video => "video",
            RepKind::Audio => "audio",
            RepKind::Combined => "combined",
        }
    }
}

/// How sessions are turned into requests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionModel {
    /// One title, one representation, consecutive request units: a buffer
    /// fill, then pacing (thesis chapters 3 and 4; the default).
    #[default]
    Paced,
    /// Thesis chapter 5: transient, stable and inactive phases, rate
    /// probing, offset-table reads, audio beside video, chunk and
    /// open-ended requests, parallel connections (`[sessions.netflix]`).
    Netflix,
}

impl SessionModel {
    /// True for the default model.
    pub fn is_paced(&self) -> bool {
        *self == SessionModel::Paced
    }
}

/// Share of sessions per content kind that use open-ended requests
/// (`range=A-` ended by `stop_after=`) for that kind's chains.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FormShares {
    /// Audio chains.
    pub audio: f64,
    /// Video chains.
    pub video: f64,
    /// Combined chains.
    pub combined: f64,
}

impl Default for FormShares {
    fn default() -> Self {
        // Table 5.2 bytes: open/(open+chunk) per kind, 3.5/4.4, 18.5/76.9, 12.8/18.6
        FormShares {
            audio: 0.8,
            video: 0.24,
            combined: 0.69,
        }
    }
}

/// Where the next stable phase goes after a bit-rate change [T1639].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RateSteps {
    /// Next rate up the ladder.
    pub up: f64,
    /// Next rate down.
    pub down: f64,
    /// Same rate.
    pub same: f64,
}

impl Default for RateSteps {
    fn default() -> Self {
        RateSteps {
            up: 0.29,
            down: 0.17,
            same: 0.54,
        }
    }
}

/// The `[sessions.netflix]` table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NetflixSpec {
    /// Share of sessions that only probe (one transient phase, < 40 s)
    /// [T1624: 33 % of sessions are shorter than 40 s].
    pub browse_share: f64,
    /// Share of sessions longer than 40 s without a stable phase: a few
    /// transient phases at different positions [T1624: 11 %].
    pub skim_share: f64,
    /// Share of sessions that play combined (audio+video) files instead of
    /// separate audio and video.
    pub combined_share: f64,
    /// Audio representation mix (name to probability) of sessions with
    /// separate audio; empty = uniform over the audio representations.
    pub audio: BTreeMap<String, f64>,
    /// Per kind, the share of sessions using open-ended requests.
    pub open_share: FormShares,
    /// Table 5.3: most requests to one file within one second, weights for
    /// 1, 2, 3, 4, 5 and 6 connections.
    pub parallel: Vec<f64>,
    /// Lower rates probed in a first transient phase (besides the stable rate).
    pub probe_rates: Distribution,
    /// Rates probed in a successor transient phase.
    pub successor_probe_rates: Distribution,
    /// Seconds of content fetched from each probed rate.
    pub probe_s: Distribution,
    /// A transient phase probes its rates one after another (each probe
    /// 400 ms after the previous one ends: the rate search of Fig. 5.16,
    /// 6 rates in 0.75 min [T1619]); without it they start 400 ms apart.
    pub sequential_probes: bool,
    /// Bytes of a chunk read of a file's offset table (at offset 0)
    /// [T1535: 49 % < 16 KB, 98 % < 128 KB].
    pub table_read_bytes: Distribution,
    /// Bytes an open-ended read from offset 0 takes before the client closes
    /// it [T1533: 84 % are exactly 768 KB].
    pub open_table_bytes: u64,
    /// Share of open-ended offset-0 reads that stop at `open_table_bytes`;
    /// the rest stop at a `table_read_bytes` draw.
    pub open_table_exact_share: f64,
    /// Bytes of one offset-table entry (one per 2 s segment): the table at
    /// the start of each file takes segments x this.
    pub table_entry_bytes: u64,
    /// Seconds of title time per video chunk request [T1483: 0.4–1.9 s].
    pub chunk_s: Distribution,
    /// Seconds of title time per audio or combined chunk request (> 2 s).
    pub audio_chunk_s: Distribution,
    /// Seconds of content per open-ended video request [Table 5.4: 63.7 s].
    pub open_s: Distribution,
    /// Seconds of content per open-ended combined request [Table 5.4: 148.5 s].
    pub open_combined_s: Distribution,
    /// Seconds of audio content per chunk audio chain of a watching session,
    /// and per audio burst of a browsing or skimming one [Table 5.4: 134.7 s
    /// per chunk audio chain].
    pub audio_chain_s: Distribution,
    /// Seconds of audio content per open-ended audio chain of a watching
    /// session (one `range=A-` request) [Table 5.4: 534.1 s].
    pub audio_open_s: Distribution,
    /// Audio bursts of browsing and skimming sessions are fetched this many
    /// times faster than real time.
    pub audio_speed: f64,
    /// A watching session's audio chains are fetched at this multiple of
    /// real time: paced, so each lasts well over 40 s (a long chain, as
    /// Table 5.4's audio chains are) and the next starts more than 40 s
    /// after it (a new chain).
    pub audio_pace: f64,
    /// A watching session's chunk audio chains are fetched at this multiple
    /// of real time instead of `audio_pace` (absent: `audio_pace`). Fast
    /// enough (about 5x), a chain of 100–170 s of audio lasts under 40 s:
    /// a short chain beside the stable video chain rather than a long chain
    /// (a stable phase) of its own, so long chains and transient clusters
    /// come in about equal numbers, as the thesis tuned its thresholds to
    /// [T1608].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub audio_chunk_pace: Option<f64>,
    /// A stable phase fills at this multiple of the bit rate [T1454].
    pub fill_factor: f64,
    /// Seconds of content buffered before pacing at 1x.
    pub buffer_s: Distribution,
    /// Bit-rate changes (successor transient phases) per hour of stable play.
    pub rate_changes_per_hour: f64,
    /// Where the next stable rate goes [T1639].
    pub rate_steps: RateSteps,
    /// A rate change never goes above the session's first stable rate (the
    /// drawn rate is what its device and link sustain; an "up" step at the
    /// top stays). Without it, sessions drift up the ladder to rates the
    /// thesis says almost no session holds (4,500, 6,500 and 10,000
    /// kbit/s: 0.05 % of sessions [T1635]).
    pub cap_at_first_rate: bool,
    /// Pauses per hour of play.
    pub pauses_per_hour: f64,
    /// Pause length, seconds (an inactive phase is >= 40 s [T1671]).
    pub pause_s: Distribution,
    /// Seconds a browse session spends probing.
    pub browse_s: Distribution,
    /// Transient phases of a skim session.
    pub skim_phases: Distribution,
    /// Gap between a skim session's transient phases, seconds.
    pub skim_gap_s: Distribution,
}

fn uniform(min: f64, max: f64) -> Distribution {
    Distribution::Uniform { min, max }
}

impl Default for NetflixSpec {
    fn default() -> Self {
        NetflixSpec {
            browse_share: 0.33,
            skim_share: 0.11,
            combined_share: 0.12,
            audio: BTreeMap::new(),
            open_share: FormShares::default(),
            parallel: vec![41.9, 18.0, 33.0, 6.0, 0.8, 0.3],
            probe_rates: uniform(1.0, 5.0),
            successor_probe_rates: uniform(0.0, 2.0),
            probe_s: uniform(2.0, 8.0),
            sequential_probes: false,
            table_read_bytes: Distribution::Empirical {
                points: vec![[0.49, 16_000.0], [0.98, 128_000.0], [1.0, 512_000.0]],
                min: Some(1_000.0),
            },
            open_table_bytes: 768 * 1024,
            open_table_exact_share: 0.84,
            table_entry_bytes: 12,
            chunk_s: uniform(0.4, 1.9),
            audio_chunk_s: uniform(8.0, 16.0),
            open_s: uniform(45.0, 85.0),
            open_combined_s: uniform(120.0, 180.0),
            audio_chain_s: uniform(80.0, 190.0),
            audio_open_s: uniform(300.0, 770.0),
            audio_speed: 40.0,
            audio_pace: 1.5,
            audio_chunk_pace: None,
            fill_factor: 5.0,
            buffer_s: uniform(60.0, 200.0),
            rate_changes_per_hour: 5.0,
            rate_steps: RateSteps::default(),
            cap_at_first_rate: false,
            pauses_per_hour: 1.0,
            pause_s: Distribution::Exponential {
                mean: 600.0,
                min: Some(45.0),
                max: Some(3600.0),
            },
            browse_s: uniform(3.0, 30.0),
            skim_phases: uniform(2.0, 4.0),
            skim_gap_s: uniform(15.0, 60.0),
        }
    }
}

fn share(p: &mut Problems, key: &str, v: f64) {
    if !(v.is_finite() && (0.0..=1.0).contains(&v)) {
        p.push(key, format!("must be a share in [0, 1], got {v}"));
    }
}

fn positive(p: &mut Problems, key: &str, v: f64, max: f64) {
    if !(v.is_finite() && v > 0.0 && v <= max) {
        p.push(
            key,
            format!("must be a number > 0 and at most {max}, got {v}"),
        );
    }
}

impl NetflixSpec {
    /// Every problem, with key paths under `sessions.netflix`.
    pub fn validate(&self, p: &mut Problems) {
        let k = |s: &str| format!("sessions.netflix.{s}");
        share(p, &k("browse_share"), self.browse_share);
        share(p, &k("skim_share"), self.skim_share);
        if self.browse_share + self.skim_share > 1.0 + 1e-9 {
            p.push(
                k("skim_share"),
                format!(
                    "browse_share + skim_share must be at most 1, got {}",
                    self.browse_share + self.skim_share
                ),
            );
        }
        share(p, &k("combined_share"), self.combined_share);
        share(p, &k("open_share.audio"), self.open_share.audio);
        share(p, &k("open_share.video"), self.open_share.video);
        share(p, &k("open_share.combined"), self.open_share.combined);
        share(p, &k("open_table_exact_share"), self.open_table_exact_share);
        if self.parallel.len() != 6 {
            p.push(
                k("parallel"),
                format!(
                    "needs 6 weights (1..=5 and 6 connections), got {}",
                    self.parallel.len()
                ),
            );
        }
        if self.parallel.iter().any(|w| !w.is_finite() || *w < 0.0)
            || self.parallel.iter().sum::<f64>() <= 0.0
        {
            p.push(
                k("parallel"),
                "weights must be finite, >= 0 and not all zero",
            );
        }
        for (name, w) in &self.audio {
            if !w.is_finite() || *w < 0.0 {
                p.push(
                    k(&format!("audio.{name}")),
                    format!("weight must be finite and >= 0, got {w}"),
                );
            }
        }
        let s = &self.rate_steps;
        for (n, v) in [("up", s.up), ("down", s.down), ("same", s.same)] {
            share(p, &k(&format!("rate_steps.{n}")), v);
        }
        if (s.up + s.down + s.same - 1.0).abs() > 1e-6 {
            p.push(
                k("rate_steps"),
                format!("up + down + same must be 1, got {}", s.up + s.down + s.same),
            );
        }
        positive(p, &k("fill_factor"), self.fill_factor, 1000.0);
        if self.fill_factor.is_finite() && self.fill_factor < 1.0 {
            p.push(k("fill_factor"), "must be at least 1 (real time)");
        }
        positive(p, &k("audio_speed"), self.audio_speed, 1000.0);
        if let Some(v) = self.audio_chunk_pace {
            positive(p, &k("audio_chunk_pace"), v, 1000.0);
            if v.is_finite() && v < 1.0 {
                p.push(k("audio_chunk_pace"), "must be at least 1 (real time)");
            }
        }
        positive(p, &k("audio_pace"), self.audio_pace, 1000.0);
        if self.audio_pace.is_finite() && self.audio_pace < 1.0 {
            p.push(k("audio_pace"), "must be at least 1 (real time)");
        }
        for (n, v) in [
            ("rate_changes_per_hour", self.rate_changes_per_hour),
            ("pauses_per_hour", self.pauses_per_hour),
        ] {
            if !(v.is_finite() && (0.0..=3600.0).contains(&v)) {
                p.push(k(n), format!("must be between 0 and 3600, got {v}"));
            }
        }
        if self.open_table_bytes == 0 || self.open_table_bytes > 1 << 30 {
            p.push(
                k("open_table_bytes"),
                format!("must be between 1 and 2^30, got {}", self.open_table_bytes),
            );
        }
        if self.table_entry_bytes == 0 || self.table_entry_bytes > 1024 {
            p.push(
                k("table_entry_bytes"),
                format!("must be between 1 and 1024, got {}", self.table_entry_bytes),
            );
        }
        // distributions: positive ones and their bounds
        let dists: [(&str, &Distribution, f64, f64); 15] = [
            ("probe_rates", &self.probe_rates, 0.0, 64.0),
            (
                "successor_probe_rates",
                &self.successor_probe_rates,
                0.0,
                64.0,
            ),
            ("probe_s", &self.probe_s, 0.1, 600.0),
            ("table_read_bytes", &self.table_read_bytes, 1.0, 1e9),
            ("chunk_s", &self.chunk_s, 0.05, 600.0),
            ("audio_chunk_s", &self.audio_chunk_s, 0.05, 600.0),
            ("open_s", &self.open_s, 0.1, 86_400.0),
            ("open_combined_s", &self.open_combined_s, 0.1, 86_400.0),
            ("audio_chain_s", &self.audio_chain_s, 1.0, 86_400.0),
            ("audio_open_s", &self.audio_open_s, 1.0, 86_400.0),
            ("buffer_s", &self.buffer_s, 0.0, 86_400.0),
            ("pause_s", &self.pause_s, 0.0, 86_400.0),
            ("browse_s", &self.browse_s, 0.0, 86_400.0),
            ("skim_phases", &self.skim_phases, 1.0, 1000.0),
            ("skim_gap_s", &self.skim_gap_s, 0.0, 86_400.0),
        ];
        // a distribution's whole support (quantiles 0 and 1) must lie in bounds
        for (n, d, lo, hi) in dists.iter() {
            let key = k(n);
            let before = p.0.len();
            d.validate(&key, p);
            if p.0.len() == before {
                let (a, b) = (d.quantile(0.0), d.quantile(1.0));
                if a < *lo || b > *hi {
                    p.push(
                        key,
                        format!("values must lie in [{lo}, {hi}], this one spans [{a}, {b}]"),
                    );
                }
            }
        }
    }
}
