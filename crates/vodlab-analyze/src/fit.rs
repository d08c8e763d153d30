//! The chain-length survival function and its piecewise power-law fit
//! (thesis eq. 5.1–5.3 [T1547–T1561]): in each piece S(x) = P(X > x) =
//! A·x^(−c), A and c from a least-squares line through log S against log x;
//! the survival distance for probability P is d = (P^(−1/c) − 1)·x.

use serde::{Deserialize, Serialize};

/// Bins per decade of the length histogram.
pub const BINS_PER_DECADE: usize = 20;
/// Decades covered: 1 B to 10^15 B.
pub const DECADES: usize = 15;

/// Chain lengths in log-spaced bins: counts and bytes per bin; fixed size,
/// mergeable, whatever the number of chains.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LengthHistogram {
    /// Chains per bin; bin `i` holds lengths in [10^(i/20), 10^((i+1)/20)).
    pub counts: Vec<u64>,
    /// Bytes per bin.
    pub bytes: Vec<u64>,
}

impl Default for LengthHistogram {
    fn default() -> Self {
        LengthHistogram {
            counts: vec![0; BINS_PER_DECADE * DECADES],
            bytes: vec![0; BINS_PER_DECADE * DECADES],
        }
    }
}

/// Lower edge of bin `i`, bytes.
pub fn edge(i: usize) -> f64 {
    10f64.powf(i as f64 / BINS_PER_DECADE as f64)
}

impl LengthHistogram {
    /// Records one chain of `len` bytes (0 counts in the first bin).
    pub fn record(&mut self, len: u64) {
        let i = if len <= 1 {
            0
        } else {
            ((len as f64).log10() * BINS_PER_DECADE as f64).floor() as usize
        };
        let i = i.min(self.counts.len() - 1);
        self.counts[i] += 1;
        self.bytes[i] += len;
    }

    /// Adds another histogram's counts.
    pub fn merge(&mut self, o: &LengthHistogram) {
        for (a, b) in self.counts.iter_mut().zip(&o.counts) {
            *a += b;
        }
        for (a, b) in self.bytes.iter_mut().zip(&o.bytes) {
            *a += b;
        }
    }

    /// Chains recorded.
    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// Survival points (x, S(x) = share of chains of at least x bytes) at
    /// every bin edge from the first non-empty bin to the last.
    pub fn survival(&self) -> Vec<(f64, f64)> {
        let n = self.total();
        if n == 0 {
            return Vec::new();
        }
        let first = self.counts.iter().position(|c| *c > 0).unwrap_or(0);
        let last = self.counts.iter().rposition(|c| *c > 0).unwrap_or(0);
        let mut above: u64 = self.counts[first..].iter().sum();
        let mut out = Vec::with_capacity(last - first + 1);
        for i in first..=last {
            out.push((edge(i), above as f64 / n as f64));
            above -= self.counts[i];
        }
        out
    }

    /// Share of chains (and of bytes) in chains of at most `x` bytes, at
    /// bin resolution (`x` rounded to the nearest bin edge).
    pub fn share_at_most(&self, x: f64) -> (f64, f64) {
        let k = ((x.log10() * BINS_PER_DECADE as f64).round() as usize).min(self.counts.len());
        let n = self.total().max(1) as f64;
        let b: u64 = self.bytes.iter().sum();
        (
            self.counts[..k].iter().sum::<u64>() as f64 / n,
            self.bytes[..k].iter().sum::<u64>() as f64 / b.max(1) as f64,
        )
    }
}

/// One fitted piece.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Piece {
    /// Lower bound of the piece, bytes.
    pub from: f64,
    /// Upper bound, bytes (infinite for the last: `null` in JSON, which
    /// has no infinity, and read back as infinite).
    #[serde(deserialize_with = "null_is_infinite")]
    pub to: f64,
    /// A of S(x) = A·x^(−c), x in bytes (`null`: not fitted).
    #[serde(deserialize_with = "null_is_nan")]
    pub a: f64,
    /// c (`null`: not fitted).
    #[serde(deserialize_with = "null_is_nan")]
    pub c: f64,
    /// Survival points the line was fitted through.
    pub points: usize,
    /// Coefficient of determination of the log-log line (`null`: undefined).
    #[serde(deserialize_with = "null_is_nan")]
    pub r2: f64,
    /// Growth factor d/x = P^(−1/c) − 1 for the settings' P: infinite for
    /// a flat piece (c = 0: no chain ends in it), which JSON has no number
    /// for (`null`; read back as NaN, like a figure that is not defined).
    #[serde(deserialize_with = "null_is_nan")]
    pub growth: f64,
}

/// serde_json writes a non-finite f64 as `null`; the upper bound of the
/// last piece is the one infinite value, so `null` reads back as infinity.
fn null_is_infinite<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::INFINITY))
}

/// A figure that could not be computed (NaN, written as `null`).
fn null_is_nan<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

/// The survival distance factor d/x = P^(−1/c) − 1 (eq. 5.3).
pub fn growth_factor(p: f64, c: f64) -> f64 {
    p.powf(-1.0 / c) - 1.0
}

/// Least-squares line log10 S = log10 A − c·log10 x through `points` with
/// `from <= x < to` and S > 0; `None` with fewer than 2 points.
pub fn fit_piece(points: &[(f64, f64)], from: f64, to: f64, p: f64) -> Option<Piece> {
    let xy: Vec<(f64, f64)> = points
        .iter()
        .filter(|(x, s)| *x >= from && *x < to && *s > 0.0)
        .map(|(x, s)| (x.log10(), s.log10()))
        .collect();
    if xy.len() < 2 {
        return None;
    }
    let n = xy.len() as f64;
    let mx = xy.iter().map(|v| v.0).sum::<f64>() / n;
    let my = xy.iter().map(|v| v.1).sum::<f64>() / n;
    let sxx: f64 = xy.iter().map(|v| (v.0 - mx).powi(2)).sum();
    let sxy: f64 = xy.iter().map(|v| (v.0 - mx) * (v.1 - my)).sum();
    let syy: f64 = xy.iter().map(|v| (v.1 - my).powi(2)).sum();
    if sxx == 0.0 {
        return None;
    }
    // A flat piece (no chain ended in it: every S the same) is c = 0 and a
    // perfect fit. The sums would give c = ±1e-32 from rounding, and with
    // it a growth factor of -1 or of 10^18 and more by the noise's sign.
    let flat = xy.iter().all(|v| v.1 == xy[0].1);
    let slope = if flat { 0.0 } else { sxy / sxx };
    let c = if flat { 0.0 } else { -slope };
    let a = 10f64.powf(my - slope * mx);
    let r2 = if flat || syy == 0.0 {
        1.0
    } else {
        sxy * sxy / (sxx * syy)
    };
    Some(Piece {
        from,
        to,
        a,
        c,
        points: xy.len(),
        r2,
        growth: growth_factor(p, c),
    })
}

/// Fits every piece between consecutive `breaks` (and below the first and
/// above the last).
pub fn fit(h: &LengthHistogram, breaks: &[f64], p: f64) -> Vec<Piece> {
    let pts = h.survival();
    let mut bounds = vec![0.0];
    bounds.extend_from_slice(breaks);
    bounds.push(f64::INFINITY);
    bounds
        .windows(2)
        .filter_map(|w| fit_piece(&pts, w[0], w[1], p))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_read_back_from_json_with_the_infinite_bound_and_undefined_figures() {
        let p = Piece {
            from: 2e8,
            to: f64::INFINITY,
            a: 3.5,
            c: f64::NAN,
            points: 0,
            r2: f64::NAN,
            growth: f64::INFINITY,
        };
        let text = serde_json::to_string(&p).unwrap();
        assert!(text.contains("\"to\":null"), "{text}");
        let back: Piece = serde_json::from_str(&text).unwrap();
        assert_eq!(back.to, f64::INFINITY);
        assert_eq!((back.from, back.a, back.points), (2e8, 3.5, 0));
        // NaN and an infinite growth were both written as null: not fitted
        assert!(back.c.is_nan() && back.r2.is_nan() && back.growth.is_nan());
    }

    #[test]
    fn the_thesis_growth_factor() {
        // P = 0.45 and c = 0.543 give d = 3.35 x [T1561]
        assert!(
            (growth_factor(0.45, 0.543) - 3.35).abs() < 0.01,
            "{}",
            growth_factor(0.45, 0.543)
        );
    }

    #[test]
    fn recovers_a_and_c_of_power_law_data_within_two_percent() {
        // Pareto lengths with S(x) = (x / 10 kB)^-0.543 above 10 kB:
        // A = 10^4^0.543, c = 0.543; deterministic quantiles
        let (xmin, c) = (1e4f64, 0.543f64);
        let n = 400_000;
        let mut h = LengthHistogram::default();
        for i in 0..n {
            let u = (i as f64 + 0.5) / n as f64;
            h.record((xmin * u.powf(-1.0 / c)) as u64);
        }
        let pieces = fit(&h, &[1e6, 2e8], 0.45);
        let mid = pieces.iter().find(|p| p.from == 1e6).unwrap();
        let a = xmin.powf(c);
        assert!((mid.c - c).abs() / c < 0.02, "{mid:?}");
        assert!((mid.a - a).abs() / a < 0.02, "{mid:?} vs A {a}");
        assert!(mid.r2 > 0.999);
        assert!((mid.growth - growth_factor(0.45, c)).abs() < 0.1);
    }

    #[test]
    fn a_flat_piece_has_c_zero_and_no_finite_growth() {
        // one chain of 100 kB and six of 30 MB: S is 6/7 all through
        // 1 MB..30 MB, where no chain ends
        let mut h = LengthHistogram::default();
        h.record(100_000);
        for _ in 0..6 {
            h.record(30_000_000);
        }
        let pieces = fit(&h, &[1e6, 2e8], 0.45);
        let mid = pieces.iter().find(|p| p.from == 1e6).unwrap();
        assert!(mid.points >= 2, "{mid:?}");
        assert_eq!(
            mid.c.to_bits(),
            0f64.to_bits(),
            "+0, not rounding noise: {mid:?}"
        );
        assert!((mid.a - 6.0 / 7.0).abs() < 1e-12, "{mid:?}");
        assert_eq!(mid.r2, 1.0);
        assert_eq!(mid.growth, f64::INFINITY);
        // the lower piece falls from 1 to 6/7: a real slope
        let low = pieces.iter().find(|p| p.from == 0.0).unwrap();
        assert!(low.c > 0.0 && low.growth.is_finite(), "{low:?}");
    }

    #[test]
    fn shares_and_merge() {
        let mut h = LengthHistogram::default();
        for len in [100u64, 1000, 1_000_000, 50_000_000] {
            h.record(len);
        }
        let mut g = LengthHistogram::default();
        g.merge(&h);
        assert_eq!(g, h);
        let (chains, bytes) = h.share_at_most(1e6);
        assert_eq!(chains, 0.5);
        assert!(bytes < 0.001);
        let s = h.survival();
        assert_eq!(s[0].1, 1.0);
        assert!(s.windows(2).all(|w| w[0].1 >= w[1].1));
    }
}
