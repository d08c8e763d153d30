//! Common Media Client Data (CTA-5004) a client sends with its requests.
//!
//! - A replayed session that knows its bit rate ([`Cmcd`]) sends header
//!   mode: `CMCD-Object` (`br` encoded bit rate in kbit/s, `d` object
//!   duration in ms, `ot` object type), `CMCD-Request` (`bl` buffer length
//!   in ms, rounded to 100 ms) and `CMCD-Session` (`sid`).
//! - A closed-loop player ([`PlayerReport`]) sends versions 1 and 2's keys
//!   from its own state, in headers or in the query ([`CmcdMode`]); what it
//!   remembers between requests (`bs`, the previous response's `ttfb`,
//!   `ttlb`, `rc`) is a [`CmcdSession`], told the values by the I/O edge.
//!
//! Keys are in alphabetical order within each header, as the specification
//! recommends. Encoded by `vodlab-cmcd`, the one CMCD module the server
//! parses with; `vodlab serve` reads `br`, `bl` and `rtp` for pacing and
//! prefetch sizes. Sans-IO: no clock is read here.

/// What a request tells the server.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cmcd<'a> {
    /// Encoded bit rate of the object, bit/s.
    pub bitrate_bps: u64,
    /// Duration of the object (the request's content), seconds.
    pub duration_s: Option<f64>,
    /// Object type token: `v` video, `a` audio, `av` muxed, `m` manifest, `i` init.
    pub object_type: &'a str,
    /// Buffer length, seconds.
    pub buffer_s: Option<f64>,
    /// Session id.
    pub session: u64,
}

impl Cmcd<'_> {
    /// The header lines (`Name: value`), to append to a request's headers.
    pub fn headers(&self) -> Vec<String> {
        let c = vodlab_cmcd::Cmcd {
            br: Some((self.bitrate_bps as f64 / 1000.0).round() as u64),
            d: self
                .duration_s
                .filter(|d| d.is_finite() && *d > 0.0)
                .map(|d| (d * 1000.0).round() as u64),
            ot: vodlab_cmcd::ObjectType::from_token(self.object_type),
            // rounded to 100 ms, as the specification asks
            bl: self
                .buffer_s
                .filter(|b| b.is_finite() && *b >= 0.0)
                .map(|b| ((b * 10.0).round() as u64) * 100),
            sid: Some(format!("vodlab-{}", self.session)),
            ..vodlab_cmcd::Cmcd::default()
        };
        c.to_headers()
            .into_iter()
            .map(|(h, list)| format!("{}: {list}", h.name()))
            .collect()
    }
}

/// How a closed-loop player sends its CMCD (`run --cmcd`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CmcdMode {
    /// In the four `CMCD-*` request headers (CTA-5004's header mode).
    #[default]
    Header,
    /// In one `CMCD` query parameter appended to the request's URL,
    /// percent-encoded (CTA-5004's query mode).
    Query,
    /// Not at all.
    Off,
}

impl CmcdMode {
    /// Its name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            CmcdMode::Header => "header",
            CmcdMode::Query => "query",
            CmcdMode::Off => "off",
        }
    }
}

impl std::fmt::Display for CmcdMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for CmcdMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "header" => Ok(CmcdMode::Header),
            "query" => Ok(CmcdMode::Query),
            "off" => Ok(CmcdMode::Off),
            _ => Err(format!(
                "unknown CMCD mode `{s}` (expected header, query or off)"
            )),
        }
    }
}

/// A response as the I/O edge measured it, reported with the next request
/// of the same session (CMCD v2's `ttfb`, `ttlb`, `rc`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Response {
    /// From the request leaving to the response's first byte (its head), ms.
    pub ttfb_ms: f64,
    /// From the request leaving to its last byte, ms.
    pub ttlb_ms: f64,
    /// HTTP status.
    pub status: u16,
}

/// What a player's session remembers between its requests for CMCD: the
/// player's stall time at its last request (`bs`) and the last response
/// (`ttfb`, `ttlb`, `rc`). Sans-IO: the values are given to it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CmcdSession {
    rebuffer_ms: f64,
    previous: Option<Response>,
}

/// Stall time growth below this (ms) is float noise, not starvation (the
/// player's own stall-episode threshold).
const STARVED_EPS_MS: f64 = crate::core::player::buffer::STALL_NOISE_MS;

impl CmcdSession {
    /// A session before its first request.
    pub fn new() -> Self {
        Self::default()
    }

    /// A request leaves while the player's total stall time is
    /// `rebuffer_ms`: whether the buffer starved since the previous request
    /// (`bs`: the stall time grew), and the previous response (`None` on
    /// the session's first request and after one that did not complete).
    pub fn request(&mut self, rebuffer_ms: f64) -> (bool, Option<Response>) {
        let starved = rebuffer_ms - self.rebuffer_ms >= STARVED_EPS_MS;
        self.rebuffer_ms = self.rebuffer_ms.max(rebuffer_ms);
        (starved, self.previous)
    }

    /// The request's exchange ended: `Some` with its measured response when
    /// it completed, `None` when it was abandoned or failed (the next request
    /// then reports no `ttfb`, `ttlb` or `rc`).
    pub fn response(&mut self, r: Option<Response>) {
        self.previous = r;
    }
}

/// `nor` and `nrr` of a request for `current` when the next object is
/// `next` (its URL and byte range): `nor` is `next`'s path relative to
/// `current`'s, left out when both are the same resource (byte ranges of
/// one file); `nrr` is the next range, `"first-last"`, when there is one.
pub fn next_request(
    current: &str,
    next: (&str, Option<(u64, u64)>),
) -> (Option<String>, Option<String>) {
    let (url, range) = next;
    let same = strip_query(current) == strip_query(url) && range.is_some();
    let nor = (!same).then(|| relative_path(current, url));
    (nor, range.map(|(a, b)| format!("{a}-{b}")))
}

fn strip_query(u: &str) -> &str {
    u.split(['?', '#']).next().unwrap_or(u)
}

/// `to` relative to `from` (both absolute paths, `/a/b/c.m4s`): the steps
/// up (`../`) from `from`'s directory to the first directory they share,
/// then the rest of `to`. `to`'s query is kept.
pub fn relative_path(from: &str, to: &str) -> String {
    let from_dir: Vec<&str> = {
        let f = strip_query(from);
        let mut parts: Vec<&str> = f.split('/').collect();
        parts.pop();
        parts
    };
    let (to_path, to_rest) = match to.find(['?', '#']) {
        Some(i) => to.split_at(i),
        None => (to, ""),
    };
    let to_parts: Vec<&str> = to_path.split('/').collect();
    let (to_dir, to_name) = to_parts.split_at(to_parts.len() - 1);
    let common = from_dir
        .iter()
        .zip(to_dir)
        .take_while(|(a, b)| a == b)
        .count();
    let mut out = String::new();
    for _ in common..from_dir.len() {
        out.push_str("../");
    }
    for d in &to_dir[common..] {
        out.push_str(d);
        out.push('/');
    }
    out.push_str(to_name[0]);
    out.push_str(to_rest);
    out
}

/// What a closed-loop player (`run --player`) tells the server with each
/// request, from its own state (docs/cmcd.md "What vodlab does"): the
/// object and its bit rate, the top bit rate, the buffer and the deadline,
/// its throughput estimate, whether it is starting up or starved since its
/// last request, the next object, the content, the rendition playing, and
/// version 2's timing of the previous response.
#[derive(Debug, Clone, PartialEq)]
pub struct PlayerReport {
    /// The object: the manifest, an init segment or a media segment.
    pub object: vodlab_cmcd::ObjectType,
    /// Encoded bit rate of the object's rendition, kbit/s (media and init).
    pub br_kbps: Option<f64>,
    /// Top bit rate of the rendition set, kbit/s.
    pub top_kbps: Option<f64>,
    /// Duration of the object, ms (media segments).
    pub duration_ms: Option<f64>,
    /// Buffer level, ms (`bl`, rounded to 100 ms as the specification
    /// asks; `dl` is it divided by the playback rate, rounded down to
    /// 100 ms).
    pub buffer_ms: Option<f64>,
    /// The player's throughput estimate, kbit/s (rounded to 100 kbit/s).
    pub measured_kbps: Option<f64>,
    /// The player has not started playing yet (`su`: needed urgently).
    pub startup: bool,
    /// The buffer ran dry since the previous request (`bs`).
    pub starved: bool,
    /// Playback rate, 1 being real time (`pr`, sent when not 1; `dl` is not
    /// sent at 0).
    pub playback_rate: f64,
    /// The next object's path relative to this one's (`nor`).
    pub next_object: Option<String>,
    /// The next byte range, `"first-last"` (`nrr`), when the player knows
    /// one.
    pub next_range: Option<String>,
    /// The content id (`cid`): the title.
    pub content_id: Option<String>,
    /// `rtp` = `MULT × br` rounded up to 100 kbit/s with this `MULT`
    /// (`--cmcd-rtp`); `None`: no `rtp`.
    pub rtp_multiplier: Option<f64>,
    /// Bit rate of the rendition at the playhead, kbit/s (`pb`).
    pub playhead_kbps: Option<f64>,
    /// The session's previous response (`ttfb`, `ttlb`, `rc`).
    pub previous: Option<Response>,
    /// DASH or HLS.
    pub format: vodlab_cmcd::StreamingFormat,
    /// Session id.
    pub session: u64,
}

impl Default for PlayerReport {
    /// An object of type `o` (other) with nothing known, at 1x.
    fn default() -> Self {
        Self {
            object: vodlab_cmcd::ObjectType::Other,
            br_kbps: None,
            top_kbps: None,
            duration_ms: None,
            buffer_ms: None,
            measured_kbps: None,
            startup: false,
            starved: false,
            playback_rate: 1.0,
            next_object: None,
            next_range: None,
            content_id: None,
            rtp_multiplier: None,
            playhead_kbps: None,
            previous: None,
            format: vodlab_cmcd::StreamingFormat::Other,
            session: 0,
        }
    }
}

impl PlayerReport {
    /// The keys, as `vodlab-cmcd` encodes them (`v=2` is added by the
    /// encoders when a version-2 key is set).
    pub fn cmcd(&self) -> vodlab_cmcd::Cmcd {
        let whole = |v: Option<f64>| v.filter(|x| x.is_finite() && *x >= 0.0);
        let rate = Some(self.playback_rate).filter(|r| r.is_finite() && *r >= 0.0);
        let br = whole(self.br_kbps).map(|b| b.round() as u64);
        vodlab_cmcd::Cmcd {
            ot: Some(self.object),
            br,
            tb: whole(self.top_kbps).map(|b| b.round() as u64),
            d: whole(self.duration_ms).map(|d| d.round() as u64),
            bl: whole(self.buffer_ms).map(|b| ((b / 100.0).round() as u64) * 100),
            dl: match (whole(self.buffer_ms), rate) {
                (Some(b), Some(r)) if r > 0.0 => Some(((b / r / 100.0).floor() as u64) * 100),
                _ => None,
            },
            mtp: whole(self.measured_kbps).map(|m| ((m / 100.0).round() as u64) * 100),
            nor: self.next_object.iter().cloned().collect(),
            nrr: self.next_range.clone(),
            su: self.startup,
            bs: self.starved,
            pr: rate.filter(|r| *r != 1.0),
            cid: self.content_id.clone(),
            rtp: match (whole(self.rtp_multiplier), br) {
                // CTA-5004: in 100 kbit/s steps; up, so as not to ask for less
                (Some(m), Some(b)) if m > 0.0 && b > 0 => {
                    Some((m * b as f64 / 100.0).ceil() as u64 * 100)
                }
                _ => None,
            },
            pb: whole(self.playhead_kbps).map(|b| b.round() as u64),
            ttfb: self
                .previous
                .and_then(|p| whole(Some(p.ttfb_ms)))
                .map(|t| t.round() as u64),
            ttlb: self
                .previous
                .and_then(|p| whole(Some(p.ttlb_ms)))
                .map(|t| t.round() as u64),
            rc: self.previous.map(|p| u64::from(p.status)),
            sf: Some(self.format),
            st: Some(vodlab_cmcd::StreamType::Vod),
            sid: Some(format!("vodlab-{}", self.session)),
            ..vodlab_cmcd::Cmcd::default()
        }
    }

    /// The header lines (`Name: value`), to append to the request's headers.
    pub fn headers(&self) -> Vec<String> {
        self.cmcd()
            .to_headers()
            .into_iter()
            .map(|(h, list)| format!("{}: {list}", h.name()))
            .collect()
    }

    /// `path` with the keys appended as its `CMCD` query parameter
    /// (`?CMCD=...`, or `&CMCD=...` after a query it has).
    pub fn with_query(&self, path: &str) -> String {
        let sep = if path.contains('?') { '&' } else { '?' };
        format!("{path}{sep}{}", self.cmcd().to_query())
    }
}

/// Whether a request's own headers already carry CMCD (a script may write
/// them; they are then sent as written).
pub fn present(headers: &[String]) -> bool {
    headers.iter().any(|h| {
        h.split_once(':')
            .is_some_and(|(n, _)| n.trim().to_ascii_lowercase().starts_with("cmcd"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_mode_lines_as_cta_5004_writes_them() {
        let c = Cmcd {
            bitrate_bps: 3_200_000,
            duration_s: Some(4.004),
            object_type: "v",
            buffer_s: Some(21.34),
            session: 42,
        };
        assert_eq!(
            c.headers(),
            vec![
                "CMCD-Object: br=3200,d=4004,ot=v".to_string(),
                "CMCD-Request: bl=21300".into(),
                "CMCD-Session: sid=\"vodlab-42\"".into(),
            ]
        );
        let bare = Cmcd {
            duration_s: None,
            buffer_s: None,
            ..c
        };
        assert_eq!(bare.headers()[0], "CMCD-Object: br=3200,ot=v");
        assert_eq!(bare.headers().len(), 2);
        assert!(present(&["cmcd-object: br=1".into()]));
        // a player's report: every key from its state, in the right header
        let p = PlayerReport {
            object: vodlab_cmcd::ObjectType::Video,
            br_kbps: Some(2095.4),
            top_kbps: Some(4000.0),
            duration_ms: Some(4000.0),
            buffer_ms: Some(12_340.0),
            measured_kbps: Some(5_432.0),
            startup: true,
            format: vodlab_cmcd::StreamingFormat::Dash,
            session: 7,
            ..PlayerReport::default()
        };
        assert_eq!(
            p.headers(),
            vec![
                "CMCD-Object: br=2095,d=4000,ot=v,tb=4000".to_string(),
                "CMCD-Request: bl=12300,dl=12300,mtp=5400,su".into(),
                "CMCD-Session: sf=d,sid=\"vodlab-7\",st=v".into(),
            ]
        );
        let back = vodlab_cmcd::Cmcd::from_headers(|n| {
            p.headers().into_iter().find_map(|l| {
                let (k, v) = l.split_once(": ").unwrap();
                (k.to_ascii_lowercase() == n).then(|| &*Box::leak(v.to_string().into_boxed_str()))
            })
        });
        assert_eq!(back, p.cmcd());
        assert!(!present(&["X-Other: cmcd".into()]));
    }

    #[test]
    fn the_server_reads_back_what_the_client_writes() {
        // vodlab serve's parser takes the bit rate from br (kbit/s)
        let c = Cmcd {
            bitrate_bps: 419_430,
            duration_s: Some(10.0),
            object_type: "v",
            buffer_s: Some(0.0),
            session: 1,
        };
        let h = c.headers();
        let r = vodlab_workload::script::Request {
            headers: h,
            ..vodlab_workload::script::Request::get("/v")
        };
        assert_eq!(
            crate::core::delivery::request_bitrate(&r, None),
            Some(419_000)
        );
    }

    /// A player of 4 s segments at 1000 and 3000 kbit/s, in virtual time.
    fn player() -> crate::core::player::Player {
        use crate::core::player::{AbrRule, Movie, Player, PlayerConfig};
        let movie = std::sync::Arc::new(Movie::constant(4000.0, &[1000.0, 3000.0], 10));
        let cfg = PlayerConfig {
            abr: AbrRule::Throughput,
            abandon: false,
            ..PlayerConfig::default()
        };
        Player::new(movie, cfg).unwrap()
    }

    fn fetch(p: &mut crate::core::player::Player, now: f64) -> usize {
        match p.poll_action(now) {
            Some(crate::core::player::Action::Fetch { index, .. }) => index,
            a => panic!("{a:?}"),
        }
    }

    fn complete(p: &mut crate::core::player::Player, now: f64) {
        p.handle(now, crate::core::player::Event::Completed { timing: None });
    }

    #[test]
    fn bs_on_the_first_request_after_a_stall_only() {
        use crate::core::player::Event;
        let mut p = player();
        let mut s = CmcdSession::new();
        // the manifest, then segment 0 at t=0: start-up is no starvation
        assert!(!s.request(0.0).0);
        assert_eq!(fetch(&mut p, 0.0), 0);
        assert!(!s.request(p.state_at(0.0).rebuffer_ms).0);
        complete(&mut p, 1000.0);
        // segment 1 leaves at 1 s with 4 s buffered...
        assert_eq!(fetch(&mut p, 1000.0), 1);
        assert!(!s.request(p.state_at(1000.0).rebuffer_ms).0);
        // ...and takes 8 s: at 7 s the buffer has been dry 2 s
        let mid = p.state_at(7000.0);
        assert_eq!((mid.buffer_ms, mid.rebuffer_ms), (0.0, 2000.0));
        p.handle(
            5000.0,
            Event::Progress {
                received_bits: 1.0,
                timing: None,
            },
        );
        complete(&mut p, 9000.0);
        assert_eq!(p.state_at(9000.0).rebuffer_ms, 4000.0);
        // the next request says so, the one after does not
        assert_eq!(fetch(&mut p, 9000.0), 2);
        assert!(s.request(p.state_at(9000.0).rebuffer_ms).0);
        complete(&mut p, 9500.0);
        assert_eq!(fetch(&mut p, 9500.0), 3);
        assert!(!s.request(p.state_at(9500.0).rebuffer_ms).0);
        let r = PlayerReport {
            starved: true,
            ..PlayerReport::default()
        };
        assert!(r.cmcd().bs && r.headers().contains(&"CMCD-Status: bs".to_string()));
    }

    #[test]
    fn dl_bl_and_pb_from_the_buffer_at_the_request_time() {
        let mut p = player();
        let s0 = p.state_at(0.0);
        assert_eq!((s0.buffer_ms, s0.playhead, s0.playing), (0.0, None, false));
        fetch(&mut p, 0.0);
        complete(&mut p, 1000.0);
        fetch(&mut p, 1000.0);
        // during segment 1's download the copy plays: 2.45 s later 1.55 s left
        let s = p.state_at(3450.0);
        assert!((s.buffer_ms - 1550.0).abs() < 1e-9, "{s:?}");
        assert_eq!((s.playhead, s.playing), (Some(0), true));
        // the player's own buffer is untouched until the phase ends
        assert_eq!(p.buffer_ms(), 4000.0);
        let r = PlayerReport {
            buffer_ms: Some(s.buffer_ms),
            playhead_kbps: Some(1000.0),
            ..PlayerReport::default()
        };
        let c = r.cmcd();
        // bl to the nearest 100 ms, dl rounded down, pb the playing rate, v=2
        assert_eq!(
            (c.bl, c.dl, c.pr, c.pb),
            (Some(1600), Some(1500), None, Some(1000))
        );
        assert_eq!(c.versioned().v, Some(2));
        // at 2x the buffer lasts half as long; pr is sent
        let c = PlayerReport {
            playback_rate: 2.0,
            ..r.clone()
        }
        .cmcd();
        assert_eq!((c.dl, c.pr), (Some(700), Some(2.0)));
        // paused: no deadline
        let c = PlayerReport {
            playback_rate: 0.0,
            ..r.clone()
        }
        .cmcd();
        assert_eq!((c.dl, c.pr), (None, Some(0.0)));
        // a version-1 report has no v
        let v1 = PlayerReport {
            buffer_ms: Some(0.0),
            ..PlayerReport::default()
        };
        assert_eq!(v1.cmcd().versioned().v, None);
        assert!(!v1.cmcd().to_list().contains("v="));
    }

    #[test]
    fn nor_is_the_next_segment_relative_to_this_one() {
        assert_eq!(
            next_request("/t1/720p/00001.m4s", ("/t1/720p/00002.m4s", None)),
            (Some("00002.m4s".to_string()), None)
        );
        // the init segment's next object: the media segment
        assert_eq!(
            next_request("/t1/720p/init.mp4", ("/t1/720p/00000.m4s", None)).0,
            Some("00000.m4s".to_string())
        );
        // byte ranges of one file: no nor (the same object), nrr
        assert_eq!(
            next_request("/t1/720p.mp4", ("/t1/720p.mp4", Some((1000, 1999)))),
            (None, Some("1000-1999".to_string()))
        );
        // another file's range: both
        assert_eq!(
            next_request("/t1/a.mp4", ("/t1/b.mp4", Some((0, 99)))),
            (Some("b.mp4".to_string()), Some("0-99".to_string()))
        );
        assert_eq!(
            relative_path("/t1/720p/1.m4s", "/t1/1080p/2.m4s"),
            "../1080p/2.m4s"
        );
        assert_eq!(
            relative_path("/a/b/c/1.m4s?x=1", "/a/2.m4s?y=2"),
            "../../2.m4s?y=2"
        );
        assert_eq!(relative_path("/1.m4s", "/t/2.m4s"), "t/2.m4s");
        let r = PlayerReport {
            next_object: Some("00002.m4s".into()),
            next_range: Some("0-99".into()),
            ..PlayerReport::default()
        };
        let c = r.cmcd();
        assert_eq!(
            (c.nor, c.nrr),
            (vec!["00002.m4s".to_string()], Some("0-99".into()))
        );
        // one nor is version 1's string
        assert!(
            r.headers()[1].contains(r#"nor="00002.m4s",nrr="0-99""#),
            "{:?}",
            r.headers()
        );
    }

    #[test]
    fn ttfb_ttlb_rc_are_the_previous_responses() {
        let mut s = CmcdSession::new();
        // the first request: none
        let (_, prev) = s.request(0.0);
        assert_eq!(prev, None);
        s.response(Some(Response {
            ttfb_ms: 35.4,
            ttlb_ms: 812.6,
            status: 206,
        }));
        let (_, prev) = s.request(0.0);
        let r = PlayerReport {
            previous: prev,
            ..PlayerReport::default()
        };
        let c = r.cmcd();
        assert_eq!((c.ttfb, c.ttlb, c.rc), (Some(35), Some(813), Some(206)));
        assert!(
            r.headers()[1].contains("rc=206,ttfb=35,ttlb=813"),
            "{:?}",
            r.headers()
        );
        assert!(r.headers()[2].contains("v=2"), "{:?}", r.headers());
        // an abandoned or failed exchange: none with the next request
        s.response(None);
        assert_eq!(s.request(0.0).1, None);
    }

    #[test]
    fn rtp_is_the_multiple_of_br_rounded_up_to_100() {
        let r = PlayerReport {
            br_kbps: Some(2095.4),
            rtp_multiplier: Some(1.5),
            ..PlayerReport::default()
        };
        // br = 2095, 1.5 x 2095 = 3142.5, up to 100 kbit/s: 3200
        assert_eq!((r.cmcd().br, r.cmcd().rtp), (Some(2095), Some(3200)));
        let exact = PlayerReport {
            br_kbps: Some(800.0),
            rtp_multiplier: Some(5.0),
            ..PlayerReport::default()
        };
        assert_eq!(exact.cmcd().rtp, Some(4000));
        // no bit rate (the manifest): no rtp
        let m = PlayerReport {
            br_kbps: None,
            ..r.clone()
        };
        assert_eq!(m.cmcd().rtp, None);
        assert_eq!(PlayerReport::default().cmcd().rtp, None);
    }

    #[test]
    fn query_mode_appends_one_percent_encoded_cmcd_parameter() {
        let r = PlayerReport {
            object: vodlab_cmcd::ObjectType::Video,
            br_kbps: Some(800.0),
            buffer_ms: Some(4000.0),
            next_object: Some("00002.m4s".into()),
            content_id: Some("t1".into()),
            session: 7,
            ..PlayerReport::default()
        };
        let q = r.with_query("/t1/720p/00001.m4s");
        assert_eq!(
            q,
            "/t1/720p/00001.m4s?CMCD=bl%3D4000%2Cbr%3D800%2Ccid%3D%22t1%22%2Cdl%3D4000%2C\
             nor%3D%2200002.m4s%22%2Cot%3Dv%2Csf%3Do%2Csid%3D%22vodlab-7%22%2Cst%3Dv"
        );
        // what a server reads back is what the player meant
        assert_eq!(
            vodlab_cmcd::Cmcd::from_request(&q, |_| None),
            r.cmcd().versioned()
        );
        // after a query the URL has: `&`
        assert!(r
            .with_query("/x.m4s?a=1")
            .starts_with("/x.m4s?a=1&CMCD=bl%3D4000"));
    }
}
