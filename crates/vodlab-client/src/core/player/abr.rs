//! ABR rules: which level to fetch next, and whether to abandon a download.
//!
//! Ported from the rules' reference implementations as the Sabre simulator
//! (github.com/UMass-LIDS/sabre, `src/sabre.py` at `09b03bb`, BSD-2-Clause,
//! © 2018 Kevin Spiteri) has them, and from the BBA paper (Huang et al.,
//! SIGCOMM 2014, BBA-0). Units: ms, bits, kbit/s (= bits/ms). See
//! docs/abr.md for the formulas and their sources. BOLA-E is in its own
//! file, [`bolae`]; dash.js 4.7.4's rules (`--player-profile dashjs`) in
//! [`dashjs`]; hls.js 1.7.4's (`--player-profile hlsjs`) in [`hlsjs`].

pub mod bolae;
pub mod dashjs;
pub mod hlsjs;

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::movie::Movie;
use super::PlayerError;
use bolae::BolaE;
use dashjs::DashJs;
use hlsjs::HlsJs;

/// The ABR rule of a player.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AbrRule {
    /// Throughput rule (dash.js ThroughputRule with the insufficient-buffer
    /// cap, as Sabre's `throughput`).
    Throughput,
    /// BOLA (Spiteri et al.), BOLA-FINITE as Sabre's `bola` (BOLA-basic with
    /// [`AbrParams::bola_basic`]).
    Bola,
    /// BBA-0 (Huang et al.): a buffer map from a reservoir to a cushion.
    Bba,
    /// DYNAMIC (Spiteri et al., MMSys'18; Sabre's `dynamic`): BOLA above the
    /// threshold buffer, throughput below it.
    Dynamic,
    /// BOLA-E (MMSys'18; dash.js's BOLA, Sabre's `bolae`): BOLA with a
    /// placeholder buffer.
    Bolae,
    /// DYNAMIC-DASH (Sabre's `dynamicdash`, like dash.js's DYNAMIC): BOLA-E
    /// above 10 s of buffer, throughput below 5 s, only the active rule
    /// consulted.
    Dynamicdash,
}

impl AbrRule {
    /// Every rule, in documentation order.
    pub const ALL: [AbrRule; 6] = [
        AbrRule::Throughput,
        AbrRule::Bola,
        AbrRule::Bba,
        AbrRule::Dynamic,
        AbrRule::Bolae,
        AbrRule::Dynamicdash,
    ];

    /// The rule's name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            AbrRule::Throughput => "throughput",
            AbrRule::Bola => "bola",
            AbrRule::Bba => "bba",
            AbrRule::Dynamic => "dynamic",
            AbrRule::Bolae => "bolae",
            AbrRule::Dynamicdash => "dynamicdash",
        }
    }
}

impl fmt::Display for AbrRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for AbrRule {
    type Err = PlayerError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        AbrRule::ALL
            .into_iter()
            .find(|r| r.name() == s)
            .ok_or_else(|| PlayerError::Invalid {
                key: "abr",
                why: format!(
                    "unknown rule {s:?} (throughput, bola, bba, dynamic, bolae, dynamicdash)"
                ),
            })
    }
}

/// Parameters of the rules; defaults are Sabre's (and dash.js's where they
/// agree).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AbrParams {
    /// Throughput safety factor (dash.js `bandwidthSafetyFactor` 0.9).
    pub safety_factor: f64,
    /// Apply the insufficient-buffer cap to the throughput rule.
    pub insufficient_buffer_rule: bool,
    /// The cap's factor starts here and is multiplied by it after each
    /// decision (Sabre 0.9)...
    pub ibr_safety_init: f64,
    /// ...never going below this (Sabre 0.5).
    pub ibr_safety_min: f64,
    /// Throughput abandonment: abandon when the download would take longer
    /// than this many segment durations (dash.js/Sabre 1.8).
    pub abandon_multiplier: f64,
    /// Throughput abandonment is considered from this far into a request,
    /// latency included (Sabre 500 ms).
    pub abandon_grace_ms: f64,
    /// BOLA's γp (utility offset; Sabre 5).
    pub gamma_p: f64,
    /// BOLA-basic: a fixed V for the whole movie and no abandonment (off:
    /// BOLA-FINITE's smaller buffer near the start and end, and BOLA's
    /// abandonment).
    pub bola_basic: bool,
    /// BBA reservoir, ms (Huang et al.; pensieve: 5 s).
    pub bba_reservoir_ms: f64,
    /// BBA cushion, ms (pensieve: 10 s).
    pub bba_cushion_ms: f64,
    /// DYNAMIC switches between BOLA and throughput around this buffer
    /// level, ms (Sabre 10 s; dash.js uses 18 s up / 9 s down).
    pub dynamic_threshold_ms: f64,
    /// DYNAMIC-DASH hands over to BOLA-E above this buffer, ms (Sabre 10 s).
    pub dynamicdash_high_ms: f64,
    /// ...and back to throughput below this, ms (Sabre 5 s).
    pub dynamicdash_low_ms: f64,
}

impl Default for AbrParams {
    fn default() -> Self {
        Self {
            safety_factor: 0.9,
            insufficient_buffer_rule: true,
            ibr_safety_init: 0.9,
            ibr_safety_min: 0.5,
            abandon_multiplier: 1.8,
            abandon_grace_ms: 500.0,
            gamma_p: 5.0,
            bola_basic: false,
            bba_reservoir_ms: 5000.0,
            bba_cushion_ms: 10000.0,
            dynamic_threshold_ms: 10000.0,
            dynamicdash_high_ms: 10000.0,
            dynamicdash_low_ms: 5000.0,
        }
    }
}

impl AbrParams {
    /// Checks the parameters; errors name the key.
    pub fn validate(&self) -> Result<(), PlayerError> {
        let unit = |key: &'static str, v: f64| {
            if v > 0.0 && v <= 1.0 {
                Ok(())
            } else {
                Err(PlayerError::Invalid {
                    key,
                    why: format!("{v} is not in (0, 1]"),
                })
            }
        };
        let nonneg = |key: &'static str, v: f64| {
            if v.is_finite() && v >= 0.0 {
                Ok(())
            } else {
                Err(PlayerError::Invalid {
                    key,
                    why: format!("{v} is not a number ≥ 0"),
                })
            }
        };
        unit("safety_factor", self.safety_factor)?;
        unit("ibr_safety_init", self.ibr_safety_init)?;
        unit("ibr_safety_min", self.ibr_safety_min)?;
        nonneg("abandon_multiplier", self.abandon_multiplier)?;
        nonneg("abandon_grace_ms", self.abandon_grace_ms)?;
        nonneg("gamma_p", self.gamma_p)?;
        nonneg("bba_reservoir_ms", self.bba_reservoir_ms)?;
        nonneg("dynamic_threshold_ms", self.dynamic_threshold_ms)?;
        nonneg("dynamicdash_low_ms", self.dynamicdash_low_ms)?;
        if !(self.dynamicdash_high_ms.is_finite()
            && self.dynamicdash_high_ms >= self.dynamicdash_low_ms)
        {
            return Err(PlayerError::Invalid {
                key: "dynamicdash_high_ms",
                why: "must be a number ≥ dynamicdash_low_ms".into(),
            });
        }
        if !(self.bba_cushion_ms.is_finite() && self.bba_cushion_ms > 0.0) {
            return Err(PlayerError::Invalid {
                key: "bba_cushion_ms",
                why: "must be a positive number".into(),
            });
        }
        Ok(())
    }
}

/// What a rule sees when it decides.
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    /// The movie.
    pub movie: &'a Movie,
    /// Segment being decided.
    pub index: usize,
    /// Buffer level, ms.
    pub buffer_ms: f64,
    /// Throughput estimate, kbit/s (none before the first download).
    pub throughput_kbps: Option<f64>,
    /// Latency estimate, ms.
    pub latency_ms: Option<f64>,
    /// Buffer capacity, ms.
    pub max_buffer_ms: f64,
    /// Session time of the decision, ms (dash.js's BOLA grows its
    /// placeholder by the time between decisions).
    pub now_ms: f64,
}

/// A download in progress, as the abandonment rules see it.
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    /// Level being downloaded.
    pub quality: usize,
    /// Its size, bits.
    pub size_bits: f64,
    /// Bits received so far.
    pub downloaded_bits: f64,
    /// Time since the request was sent, ms (latency included).
    pub elapsed_ms: f64,
    /// Time to first byte, ms.
    pub ttfb_ms: f64,
}

/// The highest level `q` with `latency + seg × bitrate_q / tput ≤ seg`
/// (level 0 if none fits, or without an estimate). Sabre's
/// `quality_from_throughput`.
pub fn quality_from_throughput(movie: &Movie, tput_kbps: f64, latency_ms: f64) -> usize {
    let p = movie.segment_duration_ms;
    let b = &movie.bitrates_kbps;
    let mut q = 0;
    while q + 1 < b.len() && latency_ms + p * b[q + 1] / tput_kbps <= p {
        q += 1;
    }
    q
}

/// The throughput rule with the insufficient-buffer cap and its
/// abandonment test.
#[derive(Debug, Clone)]
pub struct ThroughputRule {
    p: AbrParams,
    ibr_safety: f64,
}

impl ThroughputRule {
    /// A fresh rule.
    pub fn new(p: AbrParams) -> Self {
        Self {
            p,
            ibr_safety: p.ibr_safety_init,
        }
    }

    /// The level for the next segment.
    pub fn decide(&mut self, c: &Context) -> usize {
        let t = c.throughput_kbps.unwrap_or(0.0);
        let lat = c.latency_ms.unwrap_or(0.0);
        let m = c.movie;
        let mut q = quality_from_throughput(m, t * self.p.safety_factor, lat);
        if self.p.insufficient_buffer_rule {
            let safe = self.ibr_safety * (c.buffer_ms - lat) * t;
            self.ibr_safety = (self.ibr_safety * self.p.ibr_safety_init).max(self.p.ibr_safety_min);
            for k in 0..q {
                if m.bitrates_kbps[k + 1] * m.segment_duration_ms > safe {
                    q = k;
                    break;
                }
            }
        }
        q
    }

    /// Abandon (to the returned level) when, from `p.abandon_grace_ms` on,
    /// the download at its current throughput would end later than
    /// `abandon_multiplier` segment durations after it was sent, and a lower
    /// level picked from that throughput is smaller than what remains.
    pub fn check_abandon(&self, m: &Movie, pr: &Progress, latency_ms: f64) -> Option<usize> {
        let dl = pr.elapsed_ms - pr.ttfb_ms;
        if pr.elapsed_ms < self.p.abandon_grace_ms || dl <= 0.0 || pr.downloaded_bits <= 0.0 {
            return None;
        }
        let tput = pr.downloaded_bits / dl;
        let left = pr.size_bits - pr.downloaded_bits;
        if pr.elapsed_ms + left / tput <= self.p.abandon_multiplier * m.segment_duration_ms {
            return None;
        }
        let q = quality_from_throughput(m, tput * self.p.safety_factor, latency_ms);
        let est = pr.size_bits * m.bitrates_kbps[q] / m.bitrates_kbps[pr.quality];
        (q < pr.quality && est < left).then_some(q)
    }
}

/// BOLA as Sabre's `Bola` (utilities `ln(bitrate/bitrate_0)`).
#[derive(Debug, Clone)]
pub struct Bola {
    p: AbrParams,
    utilities: Vec<f64>,
    buffer_size_ms: f64,
    vp: f64,
    last_quality: usize,
}

impl Bola {
    /// BOLA for `movie` with a buffer of `max_buffer_ms`.
    pub fn new(p: AbrParams, movie: &Movie, max_buffer_ms: f64) -> Self {
        let b0 = movie.bitrates_kbps[0].ln();
        let utilities: Vec<f64> = movie.bitrates_kbps.iter().map(|b| b.ln() - b0).collect();
        let umax = *utilities.last().unwrap_or(&0.0);
        Self {
            vp: (max_buffer_ms - movie.segment_duration_ms) / (umax + p.gamma_p),
            p,
            utilities,
            buffer_size_ms: max_buffer_ms,
            last_quality: 0,
        }
    }

    /// The utilities, `ln(bitrate / bitrate_0)`.
    pub fn utilities(&self) -> &[f64] {
        &self.utilities
    }

    /// The current V (ms per unit of utility).
    pub fn vp(&self) -> f64 {
        self.vp
    }

    /// The level maximising `(V (u_q + γp) − buffer) / bitrate_q`.
    pub fn quality_from_buffer(&self, m: &Movie, buffer_ms: f64) -> usize {
        let mut best = 0;
        let mut score = f64::NEG_INFINITY;
        for (q, b) in m.bitrates_kbps.iter().enumerate() {
            let s = (self.vp * (self.utilities[q] + self.p.gamma_p) - buffer_ms) / b;
            if s > score {
                best = q;
                score = s;
            }
        }
        best
    }

    /// The level for the next segment.
    pub fn decide(&mut self, c: &Context) -> usize {
        let m = c.movie;
        let umax = *self.utilities.last().unwrap_or(&0.0);
        if !self.p.bola_basic {
            let n = m.segments();
            let k = c.index.min(n.saturating_sub(c.index)) as f64;
            let t = (k / 2.0).max(3.0) * m.segment_duration_ms;
            let bs = self.buffer_size_ms.min(t);
            self.vp = (bs - m.segment_duration_ms) / (umax + self.p.gamma_p);
        }
        let mut q = self.quality_from_buffer(m, c.buffer_ms);
        if q > self.last_quality {
            let qt = quality_from_throughput(
                m,
                c.throughput_kbps.unwrap_or(0.0),
                c.latency_ms.unwrap_or(0.0),
            );
            if q <= qt {
            } else if self.last_quality > qt {
                q = self.last_quality;
            } else {
                q = qt + 1;
            }
        }
        self.last_quality = q;
        q
    }

    /// BOLA's abandonment: switch to a lower level whose score per
    /// remaining bit beats the current download's.
    pub fn check_abandon(&mut self, m: &Movie, pr: &Progress, buffer_ms: f64) -> Option<usize> {
        if self.p.bola_basic {
            return None;
        }
        let remain = pr.size_bits - pr.downloaded_bits;
        if pr.downloaded_bits <= 0.0 || remain <= 0.0 {
            return None;
        }
        let gp = self.p.gamma_p;
        let mut score = (self.vp * (gp + self.utilities[pr.quality]) - buffer_ms) / remain;
        if score < 0.0 {
            return None;
        }
        let mut to = None;
        for q in 0..pr.quality {
            let other = pr.size_bits * m.bitrates_kbps[q] / m.bitrates_kbps[pr.quality];
            let s = (self.vp * (gp + self.utilities[q]) - buffer_ms) / other;
            if other < remain && s > score {
                score = s;
                to = Some(q);
            }
        }
        if let Some(q) = to {
            self.last_quality = q;
        }
        to
    }
}

/// BBA-0 (Huang et al., SIGCOMM 2014, Algorithm 1): a rate map linear from
/// the lowest rate at the reservoir to the highest at reservoir + cushion;
/// the level changes only when the map crosses the next rate up or down.
#[derive(Debug, Clone)]
pub struct Bba {
    p: AbrParams,
    prev: usize,
}

impl Bba {
    /// A fresh rule (previous level 0).
    pub fn new(p: AbrParams) -> Self {
        Self { p, prev: 0 }
    }

    /// The rate map f(buffer), kbit/s.
    pub fn rate_map(&self, m: &Movie, buffer_ms: f64) -> f64 {
        let b = &m.bitrates_kbps;
        let (lo, hi) = (b[0], b[b.len() - 1]);
        let x = (buffer_ms - self.p.bba_reservoir_ms) / self.p.bba_cushion_ms;
        lo + (hi - lo) * x.clamp(0.0, 1.0)
    }

    /// The level for the next segment.
    pub fn decide(&mut self, c: &Context) -> usize {
        let b = &c.movie.bitrates_kbps;
        let top = b.len() - 1;
        let buf = c.buffer_ms;
        let q = if buf <= self.p.bba_reservoir_ms {
            0
        } else if buf >= self.p.bba_reservoir_ms + self.p.bba_cushion_ms {
            top
        } else {
            let f = self.rate_map(c.movie, buf);
            let up = b[(self.prev + 1).min(top)];
            let down = b[self.prev.saturating_sub(1)];
            if f >= up {
                // the highest rate below f(B)
                b.iter().rposition(|r| *r < f).unwrap_or(0)
            } else if f <= down {
                // the lowest rate above f(B)
                b.iter().position(|r| *r > f).unwrap_or(top)
            } else {
                self.prev
            }
        };
        self.prev = q;
        q
    }
}

/// A player's rule with its state.
#[derive(Debug, Clone)]
pub enum Abr {
    /// See [`AbrRule::Throughput`].
    Throughput(ThroughputRule),
    /// See [`AbrRule::Bola`].
    Bola(Bola),
    /// See [`AbrRule::Bba`].
    Bba(Bba),
    /// See [`AbrRule::Dynamic`]: both rules decide every time (both keep
    /// their state); abandonment is always the throughput rule's (Sabre
    /// disables the BOLA branch).
    Dynamic {
        /// The BOLA half.
        bola: Bola,
        /// The throughput half.
        tput: ThroughputRule,
        /// BOLA is in charge.
        is_bola: bool,
        /// The switch threshold, ms.
        threshold_ms: f64,
    },
    /// See [`AbrRule::Bolae`].
    Bolae(BolaE),
    /// See [`AbrRule::Dynamicdash`]: only the active rule decides and
    /// checks abandonment; both hear waits and downloads.
    Dynamicdash {
        /// The BOLA-E half.
        bola: BolaE,
        /// The throughput half.
        tput: ThroughputRule,
        /// BOLA-E is in charge.
        is_bola: bool,
        /// To throughput below this buffer, ms.
        low_ms: f64,
        /// To BOLA-E above this buffer, ms.
        high_ms: f64,
    },
    /// dash.js 4.7.4's rules (`--player-profile dashjs`).
    Dashjs(Box<DashJs>),
    /// hls.js 1.7.4's rules (`--player-profile hlsjs`).
    Hlsjs(Box<HlsJs>),
}

impl Abr {
    /// A fresh rule.
    pub fn new(rule: AbrRule, p: AbrParams, movie: &Movie, max_buffer_ms: f64) -> Self {
        match rule {
            AbrRule::Throughput => Abr::Throughput(ThroughputRule::new(p)),
            AbrRule::Bola => Abr::Bola(Bola::new(p, movie, max_buffer_ms)),
            AbrRule::Bba => Abr::Bba(Bba::new(p)),
            AbrRule::Dynamic => Abr::Dynamic {
                bola: Bola::new(p, movie, max_buffer_ms),
                tput: ThroughputRule::new(p),
                is_bola: false,
                threshold_ms: p.dynamic_threshold_ms,
            },
            AbrRule::Bolae => Abr::Bolae(BolaE::new(p, movie, max_buffer_ms)),
            AbrRule::Dynamicdash => Abr::Dynamicdash {
                bola: BolaE::new(p, movie, max_buffer_ms),
                tput: ThroughputRule::new(p),
                is_bola: false,
                low_ms: p.dynamicdash_low_ms,
                high_ms: p.dynamicdash_high_ms,
            },
        }
    }

    /// dash.js's rules for `movie`.
    pub fn dashjs(movie: &Movie) -> Self {
        Abr::Dashjs(Box::new(DashJs::new(movie)))
    }

    /// hls.js's rules for `movie`.
    pub fn hlsjs(movie: &Movie) -> Self {
        Abr::Hlsjs(Box::new(HlsJs::new(movie)))
    }

    /// The level of the first segment (Sabre's rules: the lowest; dash.js:
    /// the level for its initial bit rate; hls.js: its `firstAutoLevel`).
    pub fn first_quality(&self) -> usize {
        match self {
            Abr::Dashjs(d) => d.quality(),
            Abr::Hlsjs(h) => h.start_level(0.0),
            _ => 0,
        }
    }

    /// The level for segment `c.index` and a pause before fetching it, ms
    /// (only BOLA-E pauses).
    pub fn decide(&mut self, c: &Context) -> (usize, f64) {
        match self {
            Abr::Throughput(t) => (t.decide(c), 0.0),
            Abr::Bola(b) => (b.decide(c), 0.0),
            Abr::Bba(b) => (b.decide(c), 0.0),
            Abr::Bolae(b) => b.decide(c),
            Abr::Dashjs(d) => {
                let x = d.decide(c);
                (x.quality, x.delay_ms)
            }
            Abr::Hlsjs(h) => (h.decide(c), 0.0),
            Abr::Dynamicdash {
                bola,
                tput,
                is_bola,
                low_ms,
                high_ms,
            } => {
                if *is_bola && c.buffer_ms < *low_ms {
                    *is_bola = false;
                } else if !*is_bola && c.buffer_ms > *high_ms {
                    *is_bola = true;
                }
                if *is_bola {
                    bola.decide(c)
                } else {
                    (tput.decide(c), 0.0)
                }
            }
            Abr::Dynamic {
                bola,
                tput,
                is_bola,
                threshold_ms,
            } => {
                let b = bola.decide(c);
                let t = tput.decide(c);
                if *is_bola {
                    if c.buffer_ms < *threshold_ms && b < t {
                        *is_bola = false;
                    }
                } else if c.buffer_ms > *threshold_ms && b >= t {
                    *is_bola = true;
                }
                if *is_bola {
                    (b, 0.0)
                } else {
                    (t, 0.0)
                }
            }
        }
    }

    /// Heap bytes held (BOLA's utilities).
    pub fn heap_bytes(&self) -> usize {
        let f = std::mem::size_of::<f64>();
        match self {
            Abr::Bola(b) | Abr::Dynamic { bola: b, .. } => b.utilities.capacity() * f,
            Abr::Bolae(b) | Abr::Dynamicdash { bola: b, .. } => b.utilities_len() * f,
            Abr::Dashjs(d) => std::mem::size_of::<DashJs>() + d.heap_bytes(),
            Abr::Hlsjs(h) => std::mem::size_of::<HlsJs>() + h.heap_bytes(),
            Abr::Throughput(_) | Abr::Bba(_) => 0,
        }
    }

    /// The player waited `ms` because the buffer was full.
    pub fn report_delay(&mut self, ms: f64) {
        match self {
            Abr::Bolae(b) | Abr::Dynamicdash { bola: b, .. } => b.report_delay(ms),
            _ => {}
        }
    }

    /// A download of `quality` ended after `time_ms`, abandoned (to the
    /// suggested level) or completed; `level_ms` is the buffer now, the new
    /// segment included.
    pub fn report_download(
        &mut self,
        m: &Movie,
        quality: usize,
        abandoned_to: Option<usize>,
        time_ms: f64,
        level_ms: f64,
    ) {
        match self {
            Abr::Bolae(b) | Abr::Dynamicdash { bola: b, .. } => {
                b.report_download(m, quality, abandoned_to, time_ms, level_ms)
            }
            _ => {}
        }
    }

    /// Whether to abandon the download in progress, and the lower level
    /// suggested instead. `buffer_ms` is the buffer at the request's start
    /// minus the elapsed time, floored at 0; `index` the segment. hls.js's
    /// check needs the time ([`HlsJs::check_abandon`], which the player
    /// calls itself): `None` here.
    pub fn check_abandon(
        &mut self,
        m: &Movie,
        index: usize,
        pr: &Progress,
        buffer_ms: f64,
        latency_ms: f64,
    ) -> Option<usize> {
        match self {
            Abr::Dashjs(d) => d.check_abandon(index, pr, buffer_ms),
            Abr::Throughput(t) => t.check_abandon(m, pr, latency_ms),
            Abr::Bola(b) => b.check_abandon(m, pr, buffer_ms),
            Abr::Bba(_) | Abr::Hlsjs(_) => None,
            Abr::Dynamic { tput, .. } => tput.check_abandon(m, pr, latency_ms),
            Abr::Bolae(b) => b.check_abandon(m, pr, buffer_ms),
            Abr::Dynamicdash {
                bola,
                tput,
                is_bola,
                ..
            } => {
                if *is_bola {
                    bola.check_abandon(m, pr, buffer_ms)
                } else {
                    tput.check_abandon(m, pr, latency_ms)
                }
            }
        }
    }
}
