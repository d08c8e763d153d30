//! Time compression of the server's settings (`vodlab serve
//! --time-compression K`): with the workload's times divided by k and its
//! bit rates multiplied by k (vodlab-workload's `TimeCompression`), the
//! server's control intervals are divided by k and every bit rate it is
//! told (catalog, default, the reference rates of bit-rate-scaled sizes)
//! multiplied by k, so it makes the same decisions in 1/k of the time.
//! Sizes in bytes are never scaled.

use std::time::Duration;

#[cfg(test)]
use super::PolicySpec;
use super::{Config, ConfigError};

/// Largest accepted k (the workload's bound too).
pub const MAX_TIME_COMPRESSION: f64 = 1_000.0;

fn div(d: Duration, k: f64) -> Duration {
    Duration::from_secs_f64(d.as_secs_f64() / k)
}

/// Whether `k` is an accepted factor.
pub(crate) fn valid_k(k: f64) -> bool {
    k.is_finite() && k > 0.0 && k <= MAX_TIME_COMPRESSION
}

impl Config {
    /// These settings for a load running `k` times faster (`k` recorded in
    /// `time_compression`, multiplying what was there):
    /// - divided by k: `idle_timeout` (keep-alive), `send_timeout`, the
    ///   controller `tick`, `pace_burst` (seconds of content at a k times
    ///   higher bit rate: the same bytes), and `auto`'s `interval` and
    ///   `ramp`;
    /// - multiplied by k: `default_bitrate_kbps`, `link_capacity`, the
    ///   `ref=` rate of `fixed:SIZE,ref=`, `auto:ref=` and First-Grow-SR,
    ///   and (when the
    ///   server loads it) every rate of the `bitrates` catalog; a CMCD `br`
    ///   comes from the compressed client already multiplied;
    /// - unchanged: sizes, `header_timeout` (a guard against slow clients,
    ///   not a workload time), `grace`, `stats_interval` (reporting), TLS
    ///   and HTTP/2 settings, and the eviction accounting's memory of
    ///   prefetched ranges (600 s, a constant: at k = 10 it covers 6,000 s
    ///   of nominal time; it only bounds how long an unused range can still
    ///   be counted as evicted).
    ///
    /// First-Grow's chain window (40 s) is divided by k like the other
    /// control times.
    pub fn compress_time(&self, k: f64) -> Result<Config, ConfigError> {
        if !valid_k(k) {
            return Err(ConfigError::Range {
                field: "time_compression",
                why: "must be a finite number > 0 and at most 1000 (--time-compression)",
            });
        }
        if k == 1.0 {
            return Ok(self.clone());
        }
        let mut c = self.clone();
        c.time_compression = self.time_compression * k;
        c.idle_timeout = div(self.idle_timeout, k);
        c.send_timeout = div(self.send_timeout, k);
        c.tick = div(self.tick, k);
        c.pace_burst = self.pace_burst / k;
        c.default_bitrate_kbps = self.default_bitrate_kbps.map(|b| b * k);
        if let Some(m) = c.cmsd.as_mut() {
            m.mb_kbps = m.mb_kbps.map(|b| ((b as f64 * k).round() as u64).max(1));
        }
        c.link_capacity = self
            .link_capacity
            .map(|l| ((l as f64 * k).round() as u64).max(1));
        c.prefetch_policy = self.prefetch_policy.time_compressed(k)?;
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vodlab_prefetch::auto::AutoConfig;

    fn secs(s: f64) -> Duration {
        Duration::from_secs_f64(s)
    }

    #[test]
    fn every_control_time_is_divided_every_rate_multiplied_nothing_else() {
        let base = Config {
            prefetch_policy: "auto:ref=2095".parse().unwrap(),
            default_bitrate_kbps: Some(419.0),
            link_capacity: Some(125_000_000),
            pace: 1.2,
            pace_burst: 4.0,
            pace_chunk: Some(8192),
            ..Config::new("/srv".into())
        };
        let c = base.compress_time(10.0).unwrap();
        let a0 = AutoConfig::default();
        let mut want = base.clone();
        want.time_compression = 10.0;
        want.idle_timeout = secs(6.0);
        want.send_timeout = secs(6.0);
        want.tick = secs(0.1);
        want.pace_burst = 0.4;
        want.default_bitrate_kbps = Some(4190.0);
        want.link_capacity = Some(1_250_000_000);
        let PolicySpec::Auto(mut a) = base.prefetch_policy else {
            panic!()
        };
        a.interval = div(a0.interval, 10.0);
        a.ramp = div(a0.ramp, 10.0);
        a.scaling.as_mut().unwrap().reference_kbps = 20_950.0;
        want.prefetch_policy = PolicySpec::Auto(a);
        assert_eq!(c, want);
        // bytes: sizes, the fixed chunk, the header timeout stay
        assert_eq!(c.max_prefetch, base.max_prefetch);
        assert_eq!(c.header_timeout, base.header_timeout);
        assert_eq!(c.grace, base.grace);
        c.validate().unwrap();
    }

    #[test]
    fn scaled_sizes_keep_their_bytes_at_compressed_rates() {
        let base = Config {
            prefetch_policy: "fixed:6M,ref=2095".parse().unwrap(),
            ..Config::default()
        };
        let c = base.compress_time(10.0).unwrap();
        let (PolicySpec::Scaled(n0, s0), PolicySpec::Scaled(n1, s1)) =
            (base.prefetch_policy, c.prefetch_policy)
        else {
            panic!()
        };
        assert_eq!(n0, n1);
        // b / ref is the same for a nominal rate and its compressed rate
        assert_eq!(419.0 / s0.reference_kbps, 4190.0 / s1.reference_kbps);
    }

    #[test]
    fn k_one_is_the_identity_and_bad_k_names_the_key() {
        let base = Config::default();
        assert_eq!(base.compress_time(1.0).unwrap(), base);
        for k in [0.0, -2.0, f64::NAN, 1e6] {
            let e = base.compress_time(k).unwrap_err().to_string();
            assert!(e.contains("time_compression"), "{e}");
        }
        let fg = Config {
            prefetch_policy: "first-grow:16M".parse().unwrap(),
            ..Config::default()
        };
        // First-Grow: its chain window divided, its reference rate
        // multiplied, its maximum (a size) kept
        let c = fg.compress_time(10.0).unwrap();
        assert_eq!(
            c.prefetch_policy.to_string(),
            "first-grow:16M,idle=4,ref=20000"
        );
        assert_eq!(fg.compress_time(1.0).unwrap(), fg);
        let bad = Config {
            time_compression: 0.0,
            ..Config::default()
        };
        assert!(bad
            .validate()
            .unwrap_err()
            .to_string()
            .contains("time_compression"));
    }

    #[test]
    fn a_catalog_is_multiplied() {
        let cat = crate::bitrate::BitrateCatalog::parse("[bitrates]\n\"/t1/\" = 400\n", false)
            .unwrap()
            .time_compressed(10.0);
        assert_eq!(cat.bitrates["/t1/"], 4000.0);
    }
}
