//! The pacer's settings ([`PacerConfig`]): serde with defaults and
//! [`PacerConfig::validate`], whose errors name the key.

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// The default of every pacer setting, in one place (a CLI reads these).
pub mod defaults {
    /// Pace factor K: a session is paced at K × its bit rate (the paper
    /// paces at exactly the bit rate, K = 1 \[M47]).
    pub const PACE_FACTOR: f64 = 1.0;
    /// Chunk size c in bytes. The paper's chunk size is not stated \[M47];
    /// 16 KiB is four pages, a common sendfile quantum. At 50 KB/s
    /// (400 kbit/s) it gives one send every 0.33 s.
    pub const CHUNK_SIZE: u64 = 16 << 10;
    /// Most bytes one *burst* release allows (64 KiB): a burst has no
    /// per-window accuracy to keep, so it goes in larger pieces than the
    /// paced chunk (with 1460 B chunks, 1,000 sessions' 200 KB bursts were
    /// 137,000 releases and the server fell behind).
    pub const BURST_CHUNK: u64 = 64 << 10;
    /// Client buffer B in seconds of content: the initial burst and the
    /// level low-buffer bursts refill to (the paper's 4 s = 200 KB, \[M66]).
    pub const BUFFER: f64 = 4.0;
    /// Estimated client buffer (seconds) under which a catch-up burst
    /// refills it to [`BUFFER`] (not in the paper; a quarter of B).
    pub const LOW_BUFFER: f64 = 1.0;
    /// Deficit, in seconds of the paced rate, a session may carry and catch
    /// up after short or refused writes; a longer stall is forgiven.
    pub const CATCH_UP: f64 = 1.0;
    /// Catch-up speed: while behind, sends come at most this many times
    /// as often as the pacing delay c/r (the paper shortens the delay
    /// instead of growing the chunk, \[M49] footnote 3).
    pub const CATCH_UP_SPEED: f64 = 4.0;
    /// Depth of the server-wide burst token bucket, in seconds of
    /// `link_capacity`.
    pub const BURST_WINDOW: f64 = 0.01;
    /// Smallest chunk size [`super::PacerConfig::validate`] accepts: 64 B.
    /// ±5 % per 100 ms at 400 kbit/s (5,000 B a window) needs chunks of
    /// at most 250 B, and less to leave room for timer jitter (the chunk
    /// rule in `crate::pacing` uses 2.5 ms of the rate, 125 B there).
    pub const MIN_CHUNK_SIZE: u64 = 64;
    /// Header bytes a link carries per TCP segment besides its payload
    /// (0: `link_capacity` counts payload only). A server on Ethernet sets
    /// 66: Ethernet 14 + IPv4 20 + TCP 20 + timestamps 12, which is what an
    /// `htb` shaper counts; 125 B chunks then cost 1.53 × their payload.
    pub const HEADER_BYTES: u64 = 0;
    /// Largest TCP payload per segment (Ethernet with timestamps).
    pub const MSS: u64 = 1448;
    /// Largest chunk size [`super::PacerConfig::validate`] accepts (16 MiB).
    pub const MAX_CHUNK_SIZE: u64 = 16 << 20;
}

/// Pacer settings. Rates are bytes per second, durations seconds of
/// content (or of time, as each field says).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PacerConfig {
    /// Pace factor K: target rate r = K × the response's bit rate.
    pub pace_factor: f64,
    /// Chunk size c: most bytes one release allows (sessions may register
    /// a smaller one).
    pub chunk_size: u64,
    /// Most bytes one burst release allows (never less than a session's
    /// chunk); catch-up releases keep the chunk size.
    pub burst_chunk: u64,
    /// Whether sessions burst at all (initial and low-buffer bursts; the
    /// paper's "Zippy burst" against "Zippy no-burst").
    pub burst: bool,
    /// Client buffer B in seconds of content: the initial burst, the level
    /// at which estimated playout starts, and what low-buffer bursts refill.
    pub buffer: f64,
    /// Estimated buffer (seconds) below which a playing session gets a
    /// catch-up burst back to `buffer`.
    pub low_buffer: f64,
    /// Server-wide capacity in bytes/s that bursts may use beyond the sum
    /// of the paced rates (`None`: unlimited).
    pub link_capacity: Option<u64>,
    /// Depth of the burst token bucket in seconds of `link_capacity`.
    pub burst_window: f64,
    /// Deficit a session may carry after short writes, in seconds of its
    /// paced rate (0: no catch-up, missed bytes are forgiven at once).
    pub catch_up: f64,
    /// Catch-up sends come at most every c/(r × this).
    pub catch_up_speed: f64,
    /// Header bytes per TCP segment that `link_capacity` also carries (0:
    /// it counts payload only). A session paced at r in chunks of c then
    /// reserves r × (1 + header_bytes / min(c, mss)) of the link, and extra
    /// releases take their bytes × (1 + header_bytes / min(piece, mss))
    /// from the budget.
    pub header_bytes: u64,
    /// Largest TCP payload per segment, for `header_bytes`.
    pub mss: u64,
}

impl Default for PacerConfig {
    fn default() -> Self {
        Self {
            pace_factor: defaults::PACE_FACTOR,
            chunk_size: defaults::CHUNK_SIZE,
            burst_chunk: defaults::BURST_CHUNK,
            burst: true,
            buffer: defaults::BUFFER,
            low_buffer: defaults::LOW_BUFFER,
            link_capacity: None,
            burst_window: defaults::BURST_WINDOW,
            catch_up: defaults::CATCH_UP,
            catch_up_speed: defaults::CATCH_UP_SPEED,
            header_bytes: defaults::HEADER_BYTES,
            mss: defaults::MSS,
        }
    }
}

/// An invalid pacer setting.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[error("{key}: {why}")]
pub struct PacerConfigError {
    /// The setting's key.
    pub key: &'static str,
    /// Its allowed range.
    pub why: &'static str,
}

impl PacerConfig {
    /// Checks every setting's range.
    pub fn validate(&self) -> Result<(), PacerConfigError> {
        let check = |ok: bool, key, why| {
            if ok {
                Ok(())
            } else {
                Err(PacerConfigError { key, why })
            }
        };
        let finite_pos = |v: f64| v.is_finite() && v > 0.0;
        check(
            finite_pos(self.pace_factor) && self.pace_factor <= 1000.0,
            "pace_factor",
            "must be > 0 and at most 1000",
        )?;
        check(
            (defaults::MIN_CHUNK_SIZE..=defaults::MAX_CHUNK_SIZE).contains(&self.chunk_size),
            "chunk_size",
            "must be 64 B to 16 MiB",
        )?;
        check(
            (defaults::MIN_CHUNK_SIZE..=defaults::MAX_CHUNK_SIZE).contains(&self.burst_chunk),
            "burst_chunk",
            "must be 64 B to 16 MiB",
        )?;
        check(
            self.buffer.is_finite() && (0.0..=3600.0).contains(&self.buffer),
            "buffer",
            "must be 0 to 3600 s",
        )?;
        check(
            self.low_buffer.is_finite() && self.low_buffer >= 0.0,
            "low_buffer",
            "must be >= 0",
        )?;
        check(
            !self.burst || self.buffer == 0.0 || self.low_buffer < self.buffer,
            "low_buffer",
            "must be below buffer",
        )?;
        check(
            self.link_capacity != Some(0),
            "link_capacity",
            "must be > 0 when set",
        )?;
        check(
            finite_pos(self.burst_window) && self.burst_window <= 10.0,
            "burst_window",
            "must be > 0 and at most 10 s",
        )?;
        check(
            self.catch_up.is_finite() && (0.0..=3600.0).contains(&self.catch_up),
            "catch_up",
            "must be 0 to 3600 s",
        )?;
        check(
            self.catch_up_speed.is_finite() && (1.0..=1000.0).contains(&self.catch_up_speed),
            "catch_up_speed",
            "must be 1 to 1000",
        )?;
        check(
            self.header_bytes <= 1024,
            "header_bytes",
            "must be 0 to 1024",
        )?;
        check(
            (64..=65_535).contains(&self.mss),
            "mss",
            "must be 64 to 65535",
        )
    }

    /// Link bytes per payload byte for writes of `piece` bytes: 1 +
    /// header_bytes / min(piece, mss).
    pub fn wire_factor(&self, piece: u64) -> f64 {
        1.0 + self.header_bytes as f64 / piece.clamp(1, self.mss) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_round_trip() {
        let c = PacerConfig::default();
        c.validate().unwrap();
        let json = serde_json::to_string(&c).unwrap();
        assert_eq!(serde_json::from_str::<PacerConfig>(&json).unwrap(), c);
        let partial: PacerConfig = serde_json::from_str(r#"{"pace_factor": 1.5}"#).unwrap();
        assert_eq!(partial.pace_factor, 1.5);
        assert_eq!(partial.chunk_size, defaults::CHUNK_SIZE);
        assert!(serde_json::from_str::<PacerConfig>(r#"{"pace": 1}"#).is_err());
    }

    #[test]
    fn validate_names_the_bad_key() {
        let bad = |f: fn(&mut PacerConfig)| {
            let mut c = PacerConfig::default();
            f(&mut c);
            c.validate().unwrap_err().key
        };
        assert_eq!(bad(|c| c.pace_factor = 0.0), "pace_factor");
        assert_eq!(bad(|c| c.pace_factor = f64::NAN), "pace_factor");
        assert_eq!(bad(|c| c.chunk_size = 63), "chunk_size");
        assert_eq!(bad(|c| c.burst_chunk = 63), "burst_chunk");
        assert_eq!(bad(|c| c.buffer = -1.0), "buffer");
        assert_eq!(bad(|c| c.low_buffer = 4.0), "low_buffer");
        assert_eq!(bad(|c| c.link_capacity = Some(0)), "link_capacity");
        assert_eq!(bad(|c| c.burst_window = 0.0), "burst_window");
        assert_eq!(bad(|c| c.catch_up = f64::INFINITY), "catch_up");
        assert_eq!(bad(|c| c.catch_up_speed = 0.5), "catch_up_speed");
        assert_eq!(bad(|c| c.header_bytes = 5000), "header_bytes");
        assert_eq!(bad(|c| c.mss = 10), "mss");
        let mut no_burst = PacerConfig {
            burst: false,
            low_buffer: 9.0,
            ..PacerConfig::default()
        };
        no_burst.validate().unwrap();
        no_burst.low_buffer = -1.0;
        assert_eq!(no_burst.validate().unwrap_err().key, "low_buffer");
    }
}
