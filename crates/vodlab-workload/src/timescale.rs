//! Time compression: one factor k that replays a workload k times faster
//! while keeping every byte count and every ratio of times.
//!
//! A thesis point lasts 30–50 minutes of arrivals and viewing; on an
//! emulated drive whose times are divided by k (`vodlab disk mount
//! --time-compression`), the same point runs in 1/k of that when the load
//! and the server are compressed by the same k. [`TimeCompression`] is the
//! workload's half, pure functions without I/O:
//!
//! - every **time** is divided by k: request pacing and think times, request
//!   deadlines (`timeout=`), seconds of content per request (`request_s`),
//!   client link delays, arrival gaps (an arrival rate is multiplied by k);
//! - every **rate** is multiplied by k: a session's bit rate (so CMCD `br`,
//!   and a server pacing by it, follow), `read_kbps=`, client link rates;
//! - **nothing else** changes: paths, ranges, sizes, `stop_after=` bytes,
//!   connections, bursts, headers.
//!
//! So bytes per request, requests per session, and each session's shape in
//! units of its own time are unchanged, and a result measured at k converts
//! back to nominal units with [`TimeCompression::nominal_rate`] (a rate
//! divided by k) and [`TimeCompression::nominal_seconds`] (a time multiplied
//! by k). k = 1 is the identity.

use std::time::Duration;

use crate::script::{Request, Script, Session, Wait};
use crate::spec::ClientClass;

/// Largest accepted k.
pub const MAX_TIME_COMPRESSION: f64 = 1_000.0;

/// An invalid time-compression factor; the message names the flag
/// `--time-compression` (and the config key `time_compression`).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("--time-compression (time_compression) must be a finite number > 0 and at most {max}, got {k}", max = MAX_TIME_COMPRESSION)]
pub struct TimeCompressionError {
    /// The value given.
    pub k: f64,
}

/// The environment variable that gives `--time-compression` its default
/// (`vodlab compare` and `bench` set it for the processes they start).
pub const TIME_COMPRESSION_ENV: &str = "VODLAB_TIME_COMPRESSION";

/// Why a `--time-compression` flag (or its variable) gives no factor.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TimeCompressionSettingError {
    /// [`TIME_COMPRESSION_ENV`] is set but not to a number.
    #[error(
        "{TIME_COMPRESSION_ENV}=`{value}` is not a number (the default of --time-compression)"
    )]
    Env {
        /// The variable's value.
        value: String,
        /// The parse error.
        #[source]
        source: std::num::ParseFloatError,
    },
    /// The factor is out of range.
    #[error(transparent)]
    Range(#[from] TimeCompressionError),
}

/// A time-compression factor k (checked: finite, > 0, at most
/// [`MAX_TIME_COMPRESSION`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TimeCompression {
    k: f64,
}

impl Default for TimeCompression {
    fn default() -> Self {
        Self::NONE
    }
}

impl TimeCompression {
    /// `--time-compression`: the flag, else [`TIME_COMPRESSION_ENV`], else
    /// 1; checked (an error names the flag or the variable).
    pub fn from_flag_or_env(flag: Option<f64>) -> Result<Self, TimeCompressionSettingError> {
        let k = match flag {
            Some(k) => k,
            None => match std::env::var(TIME_COMPRESSION_ENV) {
                Ok(v) => v
                    .trim()
                    .parse::<f64>()
                    .map_err(|source| TimeCompressionSettingError::Env { value: v, source })?,
                Err(_) => 1.0,
            },
        };
        Ok(Self::new(k)?)
    }

    /// k = 1: nominal time.
    pub const NONE: TimeCompression = TimeCompression { k: 1.0 };

    /// The factor `k`, checked.
    pub fn new(k: f64) -> Result<Self, TimeCompressionError> {
        if k.is_finite() && k > 0.0 && k <= MAX_TIME_COMPRESSION {
            Ok(Self { k })
        } else {
            Err(TimeCompressionError { k })
        }
    }

    /// The factor k.
    pub fn k(self) -> f64 {
        self.k
    }

    /// True for k = 1 (every function is then the identity).
    pub fn is_none(self) -> bool {
        self.k == 1.0
    }

    /// A nominal time in seconds, compressed: `s / k`.
    pub fn seconds(self, s: f64) -> f64 {
        s / self.k
    }

    /// A nominal duration, compressed: `d / k`.
    pub fn duration(self, d: Duration) -> Duration {
        if self.is_none() {
            d
        } else {
            Duration::from_secs_f64(d.as_secs_f64() / self.k)
        }
    }

    /// A nominal rate (anything per second), compressed: `r × k`.
    pub fn rate(self, r: f64) -> f64 {
        r * self.k
    }

    /// A nominal integer rate, compressed and rounded (saturating).
    pub fn rate_u64(self, r: u64) -> u64 {
        if self.is_none() {
            r
        } else {
            (r as f64 * self.k).round() as u64
        }
    }

    /// A time measured under compression, in nominal seconds: `s × k`.
    pub fn nominal_seconds(self, s: f64) -> f64 {
        s * self.k
    }

    /// A rate measured under compression, in nominal units: `r / k`.
    pub fn nominal_rate(self, r: f64) -> f64 {
        r / self.k
    }

    /// A wait, compressed (pacing and think times divided by k).
    pub fn wait(self, w: Wait) -> Wait {
        match w {
            Wait::None => Wait::None,
            Wait::Pacing(s) => Wait::Pacing(self.seconds(s)),
            Wait::Think(s) => Wait::Think(self.seconds(s)),
        }
    }

    /// A request, compressed: its wait and deadline divided by k, its
    /// `read_kbps` multiplied by k (at least 1); nothing else changes.
    pub fn request(self, r: &Request) -> Request {
        Request {
            wait: self.wait(r.wait),
            timeout_s: r.timeout_s.map(|t| self.seconds(t)),
            read_kbps: r.read_kbps.map(|v| self.rate_u64(v).max(1)),
            ..r.clone()
        }
    }

    /// A session, compressed: its bit rate multiplied by k, its seconds of
    /// content per request divided by k (bytes per request unchanged), and
    /// every request compressed.
    pub fn session(self, s: &Session) -> Session {
        let mut header = s.header.clone();
        header.bitrate_bps = header.bitrate_bps.map(|b| self.rate_u64(b).max(1));
        header.request_s = header.request_s.map(|t| self.seconds(t));
        Session {
            header,
            requests: s.requests.iter().map(|r| self.request(r)).collect(),
        }
    }

    /// A script, every session compressed.
    pub fn script(self, s: &Script) -> Script {
        Script {
            sessions: s.sessions.iter().map(|x| self.session(x)).collect(),
        }
    }

    /// A client class, compressed: link rates multiplied by k, the one-way
    /// delay divided by k; the name and share unchanged.
    pub fn client_class(self, c: &ClientClass) -> ClientClass {
        ClientClass {
            down_kbps: self.rate(c.down_kbps),
            up_kbps: self.rate(c.up_kbps),
            delay_ms: self.seconds(c.delay_ms),
            ..c.clone()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::script::{
        parse_script, write_vodlab, ByteRange, Method, Request, SessionHeader, Wait,
    };

    fn full_request() -> Request {
        Request {
            path: "/t1/c0003.mp4".into(),
            method: Method::Get,
            range: Some(ByteRange {
                start: 100,
                end: Some(2_000_099),
            }),
            timeout_s: Some(30.0),
            wait: Wait::Pacing(10.0),
            burst: false,
            conn: 1,
            headers: vec!["X-Test: 1".into()],
            body: Some("b".into()),
            size: Some(2_000_000),
            http10: true,
            stop_after: Some(1_000_000),
            read_kbps: Some(2_095),
            detach: true,
        }
    }

    fn full_session() -> Session {
        Session {
            header: SessionHeader {
                id: Some(7),
                class: Some("3.5mbit".into()),
                title: Some("t1".into()),
                rank: Some(3),
                rep: Some("hd".into()),
                bitrate_bps: Some(2_095_000),
                request_s: Some(10.0),
                server: Some("h".into()),
                port: Some(8080),
                ssl: Some(false),
            },
            requests: vec![
                full_request(),
                Request {
                    wait: Wait::Think(3.0),
                    timeout_s: None,
                    read_kbps: None,
                    ..full_request()
                },
                Request {
                    wait: Wait::None,
                    burst: true,
                    ..full_request()
                },
            ],
        }
    }

    #[test]
    fn every_time_field_is_divided_and_every_rate_multiplied_nothing_else() {
        let k = TimeCompression::new(10.0).unwrap();
        let s = full_session();
        let c = k.session(&s);
        // the expected session, written out field by field from the original
        let mut want = s.clone();
        want.header.bitrate_bps = Some(20_950_000);
        want.header.request_s = Some(1.0);
        want.requests[0].wait = Wait::Pacing(1.0);
        want.requests[0].timeout_s = Some(3.0);
        want.requests[0].read_kbps = Some(20_950);
        want.requests[1].wait = Wait::Think(0.3);
        want.requests[2].timeout_s = Some(3.0);
        want.requests[2].read_kbps = Some(20_950);
        assert_eq!(c, want);
        // bytes per request are the same: bit rate x seconds of content
        let bytes =
            |s: &Session| s.header.bitrate_bps.unwrap() as f64 * s.header.request_s.unwrap();
        assert!((bytes(&c) - bytes(&s)).abs() < 1e-6);
    }

    #[test]
    fn client_class_rates_up_delay_down_name_and_share_kept() {
        let k = TimeCompression::new(4.0).unwrap();
        let c = ClientClass {
            name: "dsl".into(),
            share: 0.25,
            down_kbps: 3_500.0,
            up_kbps: 512.0,
            delay_ms: 20.0,
        };
        let got = k.client_class(&c);
        assert_eq!(
            got,
            ClientClass {
                name: "dsl".into(),
                share: 0.25,
                down_kbps: 14_000.0,
                up_kbps: 2_048.0,
                delay_ms: 5.0,
            }
        );
        // 0 (unlimited) stays unlimited
        let u = ClientClass {
            down_kbps: 0.0,
            up_kbps: 0.0,
            delay_ms: 0.0,
            ..c
        };
        assert_eq!(k.client_class(&u), u);
    }

    #[test]
    fn k_one_is_the_identity() {
        let one = TimeCompression::new(1.0).unwrap();
        assert!(one.is_none());
        assert_eq!(one, TimeCompression::default());
        let s = full_session();
        assert_eq!(one.session(&s), s);
        let text = "#@session id=1 bitrate=419000 request_s=4.7\n/a timeout=30\n/b pacing=4.7 read_kbps=500\n/c think=2\n";
        let script = parse_script(text).unwrap();
        assert_eq!(one.script(&script), script);
        assert_eq!(
            one.duration(Duration::from_millis(1234)),
            Duration::from_millis(1234)
        );
        assert_eq!(one.rate_u64(12345), 12345);
    }

    #[test]
    fn compression_composes_and_converts_back() {
        let a = TimeCompression::new(2.0).unwrap();
        let b = TimeCompression::new(5.0).unwrap();
        let ab = TimeCompression::new(10.0).unwrap();
        let s = full_session();
        let twice = b.session(&a.session(&s));
        let once = ab.session(&s);
        assert_eq!(twice.header.bitrate_bps, once.header.bitrate_bps);
        for (x, y) in twice.requests.iter().zip(&once.requests) {
            match (x.wait, y.wait) {
                (Wait::Pacing(p), Wait::Pacing(q)) | (Wait::Think(p), Wait::Think(q)) => {
                    assert!((p - q).abs() < 1e-12)
                }
                (Wait::None, Wait::None) => {}
                other => panic!("{other:?}"),
            }
        }
        assert!((ab.nominal_seconds(ab.seconds(42.0)) - 42.0).abs() < 1e-12);
        assert!((ab.nominal_rate(ab.rate(0.7)) - 0.7).abs() < 1e-12);
        assert_eq!(
            ab.duration(Duration::from_secs(180)),
            Duration::from_secs(18)
        );
    }

    #[test]
    fn a_compressed_script_survives_the_text_format() {
        let k = TimeCompression::new(20.0).unwrap();
        let text = "#@session id=1 bitrate=2095000 request_s=10\n/a timeout=30\n/b pacing=10 read_kbps=2095\n/c think=2\n";
        let c = k.script(&parse_script(text).unwrap());
        let back = parse_script(&write_vodlab(&c)).unwrap();
        assert_eq!(back, c);
        assert_eq!(c.sessions[0].requests[1].wait, Wait::Pacing(0.5));
    }

    #[test]
    fn bad_factors_are_refused_naming_the_flag() {
        for k in [
            0.0,
            -1.0,
            f64::NAN,
            f64::INFINITY,
            MAX_TIME_COMPRESSION * 2.0,
        ] {
            let e = TimeCompression::new(k).unwrap_err().to_string();
            assert!(e.contains("--time-compression"), "{e}");
        }
        assert!(TimeCompression::new(0.5).is_ok(), "k < 1 slows time down");
        assert!(TimeCompression::new(MAX_TIME_COMPRESSION).is_ok());
    }
}
