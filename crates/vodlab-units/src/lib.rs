//! One grammar for the sizes, rates and durations every vodlab command and
//! spec key takes ([`parse_size`], [`parse_rate`], [`parse_duration`]), and
//! their inverses ([`format_size`], [`Rate`]'s `Display`,
//! [`format_duration`]) that parse back to the same value. docs/units.md is
//! the user's description.
//!
//! - sizes: `4096` bytes; a K, M, G or T (either case, optionally followed
//!   by `i` or `iB`) multiplies by a power of 1024 (`4M` = `4MiB` = 4×2^20,
//!   `1.5G`, `256k`); with a `B` the prefix is SI (`4MB` = 4×10^6,
//!   `256kB` = `256KB` = 256,000).
//! - rates: bits/s with `bit` and an SI prefix (`400kbit`, `3.5Mbit`,
//!   `1gbit`), or bytes/s written as a size with an optional `/s`
//!   (`10MB/s` = 10^7, `10MiB/s` = `10M` = 10×2^20, `50000`). `bps` is
//!   refused: `tc` reads `55mbps` as bytes/s, most people as bits/s.
//! - durations: a number with `ns`, `us`, `ms`, `s`, `m` (minutes), `min` or
//!   `h` (`500ms`, `1.5s`, `2m`, `1h`); a bare number is in the unit the
//!   flag documents ([`Bare`]), seconds for [`parse_duration`].
//!
//! Numbers are decimal with an optional fraction and exponent (`1e6`);
//! whole numbers are exact up to `u64::MAX`, fractions are rounded to the
//! nearest byte, bit or nanosecond.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use thiserror::Error;

/// How sizes are written, shown in every size error.
pub const SIZE_GRAMMAR: &str = "sizes are a number with an optional unit: 4096 (bytes), \
256k = 256K = 256KiB = 256x1024, 4M = 4MiB = 4x2^20, 1.5G, 2T; with a B the unit is SI: \
256kB = 256000, 4MB = 4x10^6 bytes";

/// How rates are written, shown in every rate error.
pub const RATE_GRAMMAR: &str = "rates are bits/s with `bit` and an SI prefix \
(400kbit, 3.5Mbit, 1Gbit) or bytes/s written as a size, `/s` optional \
(10MB/s = 10x10^6, 10MiB/s = 10M = 10x2^20, 50000)";

/// How durations are written, shown in every duration error.
pub const DURATION_GRAMMAR: &str = "durations are a number with a unit: \
250us, 500ms, 1.5s, 2m (minutes), 1h";

/// A value that does not follow the grammar.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum UnitError {
    /// Not a size.
    #[error("`{input}`: not a size{hint}; {grammar}", grammar = SIZE_GRAMMAR)]
    Size {
        /// The text given.
        input: String,
        /// What in particular is wrong ("" or a parenthesised clause).
        hint: String,
    },
    /// Not a rate.
    #[error("`{input}`: not a rate{hint}; {grammar}", grammar = RATE_GRAMMAR)]
    Rate {
        /// The text given.
        input: String,
        /// What in particular is wrong ("" or a parenthesised clause).
        hint: String,
    },
    /// A rate in `bps`, which means bytes/s to `tc` and bits/s to most
    /// people.
    #[error(
        "`{input}`: `bps` is ambiguous (tc reads it as bytes/s, most people as bits/s): \
         write bits/s as {number}{prefix}bit or bytes/s as {number}{prefix_upper}B/s"
    )]
    AmbiguousBps {
        /// The text given.
        input: String,
        /// Its number.
        number: String,
        /// Its SI prefix as given (`k`, `m`, ...; may be empty).
        prefix: String,
        /// The prefix as a byte unit writes it (`k`, `M`, `G`, `T`).
        prefix_upper: String,
    },
    /// Not a duration.
    #[error("`{input}`: not a duration; {grammar}{bare}", grammar = DURATION_GRAMMAR, bare = .bare.describe())]
    Duration {
        /// The text given.
        input: String,
        /// What a number without a unit means here.
        bare: Bare,
    },
    /// A well-formed value too large to represent.
    #[error("`{input}`: too large for a {what}")]
    TooLarge {
        /// The text given.
        input: String,
        /// `size`, `rate` or `duration`.
        what: &'static str,
    },
}

/// What a duration written without a unit means (the unit the flag
/// documents).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bare {
    /// A bare number is refused: a unit is required.
    Refused,
    /// Seconds (the default of [`parse_duration`]).
    Seconds,
    /// Milliseconds (flags named or documented in ms).
    Millis,
    /// Microseconds (flags named or documented in µs).
    Micros,
}

impl Bare {
    fn describe(self) -> &'static str {
        match self {
            Bare::Refused => "",
            Bare::Seconds => "; a bare number is seconds",
            Bare::Millis => "; a bare number is milliseconds",
            Bare::Micros => "; a bare number is microseconds",
        }
    }

    fn nanos(self) -> Option<u64> {
        match self {
            Bare::Refused => None,
            Bare::Seconds => Some(1_000_000_000),
            Bare::Millis => Some(1_000_000),
            Bare::Micros => Some(1_000),
        }
    }
}

/// A decimal number as given: its digits (for an exact whole number) and
/// its value.
struct Number<'a> {
    text: &'a str,
    whole: Option<u128>,
    value: f64,
}

/// Splits `t` into a leading decimal number and the rest (leading spaces
/// of the rest removed). `None` when `t` does not start with a number.
fn split_number(t: &str) -> Option<(Number<'_>, &str)> {
    let b = t.as_bytes();
    let mut i = 0;
    let digits = |i: &mut usize| {
        let s = *i;
        while *i < b.len() && b[*i].is_ascii_digit() {
            *i += 1;
        }
        *i - s
    };
    let int = digits(&mut i);
    let mut frac = 0;
    let mut plain = true;
    if i < b.len() && b[i] == b'.' {
        i += 1;
        frac = digits(&mut i);
        plain = false;
    }
    if int + frac == 0 {
        return None;
    }
    if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
        let mut j = i + 1;
        if j < b.len() && (b[j] == b'+' || b[j] == b'-') {
            j += 1;
        }
        if digits(&mut j) > 0 {
            i = j;
            plain = false;
        }
    }
    let text = &t[..i];
    let value: f64 = text.parse().ok()?;
    let whole = if plain { text.parse().ok() } else { None };
    Some((Number { text, whole, value }, t[i..].trim_start()))
}

/// Multiplies `n` by `mult`, exactly when `n` is whole, else rounded to
/// the nearest unit. `None` when the result exceeds `u64`.
fn scale(n: &Number<'_>, mult: u64) -> Option<u64> {
    if let Some(w) = n.whole {
        return u64::try_from(w.checked_mul(mult as u128)?).ok();
    }
    let v = (n.value * mult as f64).round();
    // 2^64 is exactly representable; anything at or above it does not fit
    (0.0..18_446_744_073_709_551_616.0)
        .contains(&v)
        .then_some(v as u64)
}

/// The power (1 = k, 2 = M, 3 = G, 4 = T) of a prefix letter, either case.
fn prefix_power(c: char) -> Option<u32> {
    match c.to_ascii_lowercase() {
        'k' => Some(1),
        'm' => Some(2),
        'g' => Some(3),
        't' => Some(4),
        _ => None,
    }
}

/// Why a size's unit was refused.
enum BadUnit {
    /// Not a unit of the grammar.
    Unknown,
    /// A lower-case `b`: bits.
    Bits,
}

impl BadUnit {
    /// The hint shown for `unit` in a size.
    fn size_hint(self, unit: &str) -> String {
        match self {
            BadUnit::Unknown => format!(" (unknown unit \"{unit}\")"),
            BadUnit::Bits => format!(" (\"{unit}\": `b` is bits; write B for bytes)"),
        }
    }
}

/// The bytes one unit of a size stands for.
fn size_unit(u: &str) -> Result<u64, BadUnit> {
    if u.is_empty() || u == "B" {
        return Ok(1);
    }
    let mut cs = u.chars();
    let p = cs.next().and_then(prefix_power).ok_or(BadUnit::Unknown)?;
    match cs.as_str() {
        "" | "i" | "iB" => Ok(1u64 << (10 * p)),
        "B" => Ok(1000u64.pow(p)),
        "b" | "ib" | "bit" => Err(BadUnit::Bits),
        _ => Err(BadUnit::Unknown),
    }
}

/// Parses a size in bytes: `4096`, `256k` = `256K` = `256KiB` (×1024),
/// `4M` = `4MiB` (×2^20), `1.5G`, `2T`, `256kB` (×1000), `4MB` (×10^6).
pub fn parse_size(s: &str) -> Result<u64, UnitError> {
    let t = s.trim();
    let err = |hint: String| UnitError::Size {
        input: t.to_string(),
        hint,
    };
    let (n, unit) = split_number(t).ok_or_else(|| err(String::new()))?;
    let mult = size_unit(unit).map_err(|b| err(b.size_hint(unit)))?;
    scale(&n, mult).ok_or_else(|| UnitError::TooLarge {
        input: t.to_string(),
        what: "size",
    })
}

/// Writes a size with the largest binary unit that divides it exactly
/// (`4M`, `256K`, `4096`, `3G`); [`parse_size`] reads it back unchanged.
pub fn format_size(n: u64) -> String {
    for (shift, u) in [(40, "T"), (30, "G"), (20, "M"), (10, "K")] {
        if n > 0 && n % (1u64 << shift) == 0 {
            return format!("{}{u}", n >> shift);
        }
    }
    n.to_string()
}

/// A rate, kept in bits per second.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Rate {
    bits: u64,
}

impl Rate {
    /// The rate of `bits` bits per second.
    pub const fn from_bits_per_s(bits: u64) -> Self {
        Rate { bits }
    }

    /// The rate of `bytes` bytes per second (saturating at `u64::MAX`
    /// bits/s).
    pub const fn from_bytes_per_s(bytes: u64) -> Self {
        Rate {
            bits: bytes.saturating_mul(8),
        }
    }

    /// Bits per second.
    pub const fn bits_per_s(self) -> u64 {
        self.bits
    }

    /// Whole bytes per second (rounded down).
    pub const fn bytes_per_s(self) -> u64 {
        self.bits / 8
    }

    /// Bytes per second, with the fraction.
    pub fn bytes_per_s_f64(self) -> f64 {
        self.bits as f64 / 8.0
    }
}

impl FromStr for Rate {
    type Err = UnitError;
    fn from_str(s: &str) -> Result<Self, UnitError> {
        parse_rate(s)
    }
}

impl fmt::Display for Rate {
    /// Bits/s with the largest SI prefix that divides exactly (`1Gbit`,
    /// `2500kbit`, `12bit`); [`parse_rate`] reads it back unchanged.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.bits;
        for (d, u) in [
            (1_000_000_000_000, "T"),
            (1_000_000_000, "G"),
            (1_000_000, "M"),
            (1_000, "k"),
        ] {
            if b > 0 && b % d == 0 {
                return write!(f, "{}{u}bit", b / d);
            }
        }
        write!(f, "{b}bit")
    }
}

/// Parses a rate: bits/s with `bit` and an SI prefix (`400kbit`, `3.5Mbit`,
/// `1gbit`, `/s` optional), or bytes/s as a size with an optional `/s`
/// (`10MB/s` = 10^7 B/s, `10MiB/s` = `10M` = 10×2^20 B/s, `50000`).
pub fn parse_rate(s: &str) -> Result<Rate, UnitError> {
    let t = s.trim();
    let err = |hint: &str| UnitError::Rate {
        input: t.to_string(),
        hint: hint.to_string(),
    };
    let too_large = || UnitError::TooLarge {
        input: t.to_string(),
        what: "rate",
    };
    let body = t.strip_suffix("/s").unwrap_or(t).trim_end();
    let (n, unit) = split_number(body).ok_or_else(|| err(""))?;
    let lower = unit.to_ascii_lowercase();
    if let Some(p) = lower.strip_suffix("bps") {
        if p.is_empty() || (p.len() == 1 && p.chars().all(|c| prefix_power(c).is_some())) {
            let prefix = unit[..p.len()].to_string();
            let prefix_upper = match p {
                "k" | "" => p.to_string(),
                _ => p.to_ascii_uppercase(),
            };
            return Err(UnitError::AmbiguousBps {
                input: t.to_string(),
                number: n.text.to_string(),
                prefix,
                prefix_upper,
            });
        }
        return Err(err(&format!(" (unknown unit \"{unit}\")")));
    }
    if let Some(p) = lower.strip_suffix("bit") {
        let mult = match p {
            "" => 1,
            _ if p.len() == 1 => 1000u64.pow(
                prefix_power(p.chars().next().expect("one"))
                    .ok_or_else(|| err(&format!(" (unknown unit \"{unit}\")")))?,
            ),
            _ => return Err(err(" (bit rates take an SI prefix: k, M, G, T)")),
        };
        return scale(&n, mult)
            .map(Rate::from_bits_per_s)
            .ok_or_else(too_large);
    }
    let mult = size_unit(unit).map_err(|b| match b {
        BadUnit::Bits => err(&format!(
            " (\"{unit}\": write bits/s with `bit`, e.g. 3.5Mbit)"
        )),
        BadUnit::Unknown => err(&format!(" (unknown unit \"{unit}\")")),
    })?;
    scale(&n, mult.checked_mul(8).ok_or_else(too_large)?)
        .map(Rate::from_bits_per_s)
        .ok_or_else(too_large)
}

/// Parses a duration; a bare number is seconds (`30` = `30s`, `500ms`,
/// `1.5s`, `2m`, `1h`).
pub fn parse_duration(s: &str) -> Result<Duration, UnitError> {
    parse_duration_bare(s, Bare::Seconds)
}

/// Parses a duration whose bare numbers are in `bare` (`ns`, `us` or `µs`,
/// `ms`, `s`, `m` or `min`, `h`).
pub fn parse_duration_bare(s: &str, bare: Bare) -> Result<Duration, UnitError> {
    let t = s.trim();
    let err = || UnitError::Duration {
        input: t.to_string(),
        bare,
    };
    let (n, unit) = split_number(t).ok_or_else(err)?;
    let ns = match unit {
        "" => bare.nanos().ok_or_else(err)?,
        "ns" => 1,
        "us" | "µs" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "m" | "min" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        _ => return Err(err()),
    };
    scale(&n, ns)
        .map(Duration::from_nanos)
        .ok_or_else(|| UnitError::TooLarge {
            input: t.to_string(),
            what: "duration",
        })
}

/// Parses a duration (a bare number is seconds) into seconds, for
/// settings kept as `f64` seconds.
pub fn parse_seconds(s: &str) -> Result<f64, UnitError> {
    parse_duration(s).map(|d| d.as_secs_f64())
}

/// A flag of seconds in the unit grammar (`500ms`, `30s`, `2m`; a bare
/// number is seconds, docs/units.md). A bare number is passed through as
/// written, even an absurd one, so that the flag's own bound check names
/// the bound.
pub fn seconds_arg(s: &str) -> Result<f64, String> {
    s.trim()
        .parse::<f64>()
        .or_else(|_| parse_seconds(s).map_err(|e| e.to_string()))
}

/// A flag of milliseconds in the unit grammar (a bare number is
/// milliseconds; `1.5s`, `250ms`), passed through as [`seconds_arg`] does.
pub fn millis_arg(s: &str) -> Result<f64, String> {
    s.trim().parse::<f64>().or_else(|_| {
        parse_duration_bare(s, Bare::Millis)
            .map(|d| d.as_secs_f64() * 1e3)
            .map_err(|e| e.to_string())
    })
}

/// Parses a duration whose bare numbers are milliseconds (`250` = `250ms`,
/// `1.5s`), into whole milliseconds (rounded to the nearest).
pub fn parse_millis(s: &str) -> Result<u64, UnitError> {
    let d = parse_duration_bare(s, Bare::Millis)?;
    Ok(((d.as_nanos() + 500_000) / 1_000_000) as u64)
}

/// Parses a duration whose bare numbers are microseconds (`250` =
/// `250us`, `1ms`), into whole microseconds (rounded to the nearest).
pub fn parse_micros(s: &str) -> Result<u64, UnitError> {
    let d = parse_duration_bare(s, Bare::Micros)?;
    Ok(((d.as_nanos() + 500) / 1_000) as u64)
}

/// Writes a duration with the largest unit that divides it exactly (`1h`,
/// `90s`, `500ms`, `7ns`); [`parse_duration`] reads it back unchanged for
/// durations up to `u64::MAX` nanoseconds.
pub fn format_duration(d: Duration) -> String {
    let ns = d.as_nanos();
    for (u, unit) in [
        (3_600_000_000_000u128, "h"),
        (60_000_000_000, "m"),
        (1_000_000_000, "s"),
        (1_000_000, "ms"),
        (1_000, "us"),
    ] {
        if ns > 0 && ns % u == 0 {
            return format!("{}{unit}", ns / u);
        }
    }
    format!("{ns}ns")
}

#[cfg(test)]
mod tests;
