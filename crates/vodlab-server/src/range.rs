//! `Range: bytes=...` (RFC 9110 section 14): parsing and resolution against
//! a file size. Pure. Overlapping and adjacent ranges are merged and a
//! request with many ranges is answered with the whole file, so no request
//! can multiply the work (CVE-2011-3192).

/// Most ranges answered as multipart; more get the whole file.
pub const MAX_RANGES: usize = 16;

/// One range as written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spec {
    /// `A-B`.
    FromTo(u64, u64),
    /// `A-`.
    From(u64),
    /// `-N`: the last N bytes.
    Suffix(u64),
}

/// How to answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolved {
    /// 200 with the whole file.
    Full,
    /// 206 with one range (inclusive bounds).
    Single(u64, u64),
    /// 206 multipart/byteranges with these disjoint, ordered ranges.
    Multi(Vec<(u64, u64)>),
    /// 416.
    Unsatisfiable,
}

/// Parses a Range header value. `None` when it is not a valid `bytes=`
/// range set; the server then ignores it and sends the whole file.
pub fn parse(value: &str) -> Option<Vec<Spec>> {
    let v = value.trim();
    let (unit, set) = v.split_once('=')?;
    if !unit.trim().eq_ignore_ascii_case("bytes") {
        return None;
    }
    let mut out = Vec::new();
    for part in set.split(',') {
        let p = part.trim();
        if p.is_empty() {
            continue;
        }
        let (a, b) = p.split_once('-')?;
        let (a, b) = (a.trim(), b.trim());
        let num = |s: &str| -> Option<u64> {
            if s.is_empty() || !s.bytes().all(|c| c.is_ascii_digit()) {
                return None;
            }
            s.parse().ok()
        };
        out.push(match (a.is_empty(), b.is_empty()) {
            (true, true) => return None,
            (true, false) => Spec::Suffix(num(b)?),
            (false, true) => Spec::From(num(a)?),
            (false, false) => {
                let (x, y) = (num(a)?, num(b)?);
                if y < x {
                    return None;
                }
                Spec::FromTo(x, y)
            }
        });
        if out.len() > 1000 {
            return None; // absurd: ignore the header rather than work on it
        }
    }
    (!out.is_empty()).then_some(out)
}

/// Resolves parsed ranges against a file of `size` bytes.
pub fn resolve(specs: &[Spec], size: u64) -> Resolved {
    let mut ranges: Vec<(u64, u64)> = specs
        .iter()
        .filter_map(|s| match *s {
            Spec::FromTo(a, b) if a < size => Some((a, b.min(size - 1))),
            Spec::From(a) if a < size => Some((a, size - 1)),
            Spec::Suffix(n) if n > 0 && size > 0 => Some((size - n.min(size), size - 1)),
            _ => None,
        })
        .collect();
    if ranges.is_empty() {
        return Resolved::Unsatisfiable;
    }
    ranges.sort_unstable();
    let mut merged: Vec<(u64, u64)> = Vec::with_capacity(ranges.len());
    for (a, b) in ranges {
        match merged.last_mut() {
            Some(last) if a <= last.1.saturating_add(1) => last.1 = last.1.max(b),
            _ => merged.push((a, b)),
        }
    }
    let total: u64 = merged.iter().map(|(a, b)| b - a + 1).sum();
    if merged.len() > MAX_RANGES || total >= size {
        return if merged.len() == 1 && merged[0] == (0, size - 1) && specs.len() == 1 {
            Resolved::Single(0, size - 1)
        } else {
            Resolved::Full
        };
    }
    if merged.len() == 1 {
        Resolved::Single(merged[0].0, merged[0].1)
    } else {
        Resolved::Multi(merged)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(h: &str, size: u64) -> Resolved {
        match parse(h) {
            Some(s) => resolve(&s, size),
            None => Resolved::Full,
        }
    }

    #[test]
    fn rfc_9110_examples() {
        // 14.1.2: the first 500 bytes, the second 500, the final 500 (two ways)
        assert_eq!(r("bytes=0-499", 10000), Resolved::Single(0, 499));
        assert_eq!(r("bytes=500-999", 10000), Resolved::Single(500, 999));
        assert_eq!(r("bytes=-500", 10000), Resolved::Single(9500, 9999));
        assert_eq!(r("bytes=9500-", 10000), Resolved::Single(9500, 9999));
        // first and last bytes only
        assert_eq!(
            r("bytes=0-0,-1", 10000),
            Resolved::Multi(vec![(0, 0), (9999, 9999)])
        );
        // overlapping and unordered: merged
        assert_eq!(
            r("bytes=500-600,601-999", 10000),
            Resolved::Single(500, 999)
        );
        assert_eq!(
            r("bytes=500-700,601-999", 10000),
            Resolved::Single(500, 999)
        );
    }

    #[test]
    fn unsatisfiable_and_clipped() {
        assert_eq!(r("bytes=10000-", 10000), Resolved::Unsatisfiable);
        assert_eq!(r("bytes=20000-30000", 10000), Resolved::Unsatisfiable);
        assert_eq!(r("bytes=-0", 10000), Resolved::Unsatisfiable);
        assert_eq!(r("bytes=9000-20000", 10000), Resolved::Single(9000, 9999));
        assert_eq!(r("bytes=-20000", 10000), Resolved::Single(0, 9999));
        assert_eq!(r("bytes=0-", 0), Resolved::Unsatisfiable);
    }

    #[test]
    fn bad_syntax_is_ignored() {
        for h in [
            "bytes=",
            "bytes=a-b",
            "bytes=5-1",
            "items=0-1",
            "bytes=--1",
            "bytes=1-2-3",
            "bytes=-",
        ] {
            assert_eq!(parse(h), None, "{h}");
        }
    }

    #[test]
    fn many_or_overlapping_ranges_cannot_multiply_the_work() {
        // the Apache killer: hundreds of overlapping ranges
        let h = format!(
            "bytes=0-,{}",
            (0..500)
                .map(|i| format!("5-{i}"))
                .collect::<Vec<_>>()
                .join(",")
        );
        assert_eq!(r(&h, 100_000), Resolved::Full);
        // 17 disjoint ranges: too many parts, whole file
        let h = format!(
            "bytes={}",
            (0..17)
                .map(|i| format!("{}-{}", i * 10, i * 10 + 1))
                .collect::<Vec<_>>()
                .join(",")
        );
        assert_eq!(r(&h, 100_000), Resolved::Full);
        // 16 are fine
        let h = format!(
            "bytes={}",
            (0..16)
                .map(|i| format!("{}-{}", i * 10, i * 10 + 1))
                .collect::<Vec<_>>()
                .join(",")
        );
        assert!(matches!(r(&h, 100_000), Resolved::Multi(v) if v.len() == 16));
        // more than 1000 specs: the header is ignored
        let h = format!("bytes={}", vec!["1-2"; 1001].join(","));
        assert_eq!(parse(&h), None);
    }

    #[test]
    fn resolved_ranges_are_inside_the_file_and_disjoint() {
        use proptest::prelude::*;
        proptest!(|(specs in proptest::collection::vec((0u64..2000, 0u64..2000, 0u8..3), 1..30), size in 0u64..1500)| {
            let s: Vec<Spec> = specs.iter().map(|&(a, b, k)| match k {
                0 => Spec::FromTo(a.min(b), a.max(b)),
                1 => Spec::From(a),
                _ => Spec::Suffix(b),
            }).collect();
            match resolve(&s, size) {
                Resolved::Single(a, b) => prop_assert!(a <= b && b < size),
                Resolved::Multi(v) => {
                    prop_assert!(v.len() >= 2 && v.len() <= MAX_RANGES);
                    for w in v.windows(2) { prop_assert!(w[0].1 + 1 < w[1].0); }
                    prop_assert!(v.iter().map(|(a, b)| b - a + 1).sum::<u64>() < size);
                }
                _ => {}
            }
        });
    }
}
