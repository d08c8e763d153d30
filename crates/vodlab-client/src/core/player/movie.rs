//! The movie: a bit-rate ladder, per-segment sizes and the segment duration,
//! in the JSON format of the Sabre simulator (`segment_duration_ms`,
//! `bitrates_kbps`, `segment_sizes_bits`).

use serde::{Deserialize, Serialize};

use super::PlayerError;

/// One movie as a player sees it. Units follow Sabre: ms, bits, kbit/s
/// (= bits per ms). Sizes are what a player downloads; nominal bit rates are
/// what it decides with and reports.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Movie {
    /// Duration of every segment, ms.
    pub segment_duration_ms: f64,
    /// Nominal bit rate of each level, kbit/s, lowest first.
    pub bitrates_kbps: Vec<f64>,
    /// One row per segment, one size per level, bits.
    pub segment_sizes_bits: Vec<Vec<f64>>,
    /// Optional video resolution per level ("1920x1080"), used by the
    /// P.1203 writer; absent: [`super::qoe::DEFAULT_RESOLUTION`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolutions: Option<Vec<String>>,
    /// Optional frame rate, used by the P.1203 writer; absent:
    /// [`super::qoe::DEFAULT_FPS`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fps: Option<f64>,
}

impl Movie {
    /// Parses and validates a Sabre movie JSON document.
    pub fn from_json(text: &str) -> Result<Self, PlayerError> {
        let m: Movie = serde_json::from_str(text).map_err(|e| PlayerError::Parse {
            what: "movie",
            detail: e.to_string(),
        })?;
        m.validate()?;
        Ok(m)
    }

    /// A movie of `segments` segments whose sizes are exactly the nominal
    /// bit rate times the segment duration (for tests and synthetic ladders).
    pub fn constant(segment_duration_ms: f64, bitrates_kbps: &[f64], segments: usize) -> Self {
        let row: Vec<f64> = bitrates_kbps
            .iter()
            .map(|b| b * segment_duration_ms)
            .collect();
        Self {
            segment_duration_ms,
            bitrates_kbps: bitrates_kbps.to_vec(),
            segment_sizes_bits: vec![row; segments],
            resolutions: None,
            fps: None,
        }
    }

    /// Checks the invariants every player relies on; errors name the key.
    pub fn validate(&self) -> Result<(), PlayerError> {
        let bad = |key: &'static str, why: String| Err(PlayerError::Invalid { key, why });
        if !(self.segment_duration_ms.is_finite() && self.segment_duration_ms > 0.0) {
            return bad("segment_duration_ms", "must be a positive number".into());
        }
        if self.bitrates_kbps.is_empty() {
            return bad("bitrates_kbps", "needs at least one level".into());
        }
        for (i, w) in self.bitrates_kbps.iter().enumerate() {
            if !(w.is_finite() && *w > 0.0) {
                return bad(
                    "bitrates_kbps",
                    format!("level {i} is not a positive number"),
                );
            }
        }
        if self.bitrates_kbps.len() > usize::from(u16::MAX) {
            return bad("bitrates_kbps", "more than 65 535 levels".into());
        }
        if self.bitrates_kbps.windows(2).any(|w| w[1] <= w[0]) {
            return bad("bitrates_kbps", "must be strictly increasing".into());
        }
        if self.segment_sizes_bits.is_empty() {
            return bad("segment_sizes_bits", "needs at least one segment".into());
        }
        let levels = self.bitrates_kbps.len();
        for (i, row) in self.segment_sizes_bits.iter().enumerate() {
            if row.len() != levels {
                return bad(
                    "segment_sizes_bits",
                    format!("segment {i} has {} sizes for {levels} levels", row.len()),
                );
            }
            if row.iter().any(|s| !(s.is_finite() && *s > 0.0)) {
                return bad(
                    "segment_sizes_bits",
                    format!("segment {i} has a size that is not a positive number"),
                );
            }
        }
        if let Some(r) = &self.resolutions {
            if r.len() != levels {
                return bad(
                    "resolutions",
                    format!("{} entries for {levels} levels", r.len()),
                );
            }
        }
        if let Some(f) = self.fps {
            if !(f.is_finite() && f > 0.0) {
                return bad("fps", "must be a positive number".into());
            }
        }
        Ok(())
    }

    /// Number of levels in the ladder.
    pub fn levels(&self) -> usize {
        self.bitrates_kbps.len()
    }

    /// Number of segments.
    pub fn segments(&self) -> usize {
        self.segment_sizes_bits.len()
    }

    /// Size of segment `index` at `level`, bits.
    pub fn size_bits(&self, index: usize, level: usize) -> f64 {
        self.segment_sizes_bits[index][level]
    }

    /// Media duration of the movie, ms.
    pub fn duration_ms(&self) -> f64 {
        self.segment_duration_ms * self.segments() as f64
    }
}
