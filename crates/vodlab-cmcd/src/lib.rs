//! # vodlab-cmcd
//!
//! Common Media Client Data (CTA-5004), versions 1 and 2: the keys a media
//! player sends with each object request, typed ([`Cmcd`]), parsed from and
//! encoded into both of its forms:
//!
//! - **headers**: `CMCD-Object`, `CMCD-Request`, `CMCD-Session` and
//!   `CMCD-Status`, each a comma-separated list; a key goes in the header
//!   its persistence names ([`Header::of`]);
//! - **query**: one `CMCD` parameter holding the whole list, percent-encoded.
//!
//! And Common Media Server Data (CTA-5006), the server's answer: the
//! `CMSD-Static` and `CMSD-Dynamic` response headers ([`cmsd`]).
//!
//! Within a list, items are `key=value` or, for a boolean that is true, the
//! bare `key`; strings are quoted (`\"` and `\\` escaped), tokens and
//! numbers are not, an inner list of strings is `("a" "b")`, and keys are
//! written in alphabetical order (the specification's rule against
//! fingerprinting). Version 2 keys ([`Cmcd::is_v2`]) make the encoders add
//! `v=2` when `v` is not set ([`Cmcd::versioned`]); version 1 omits `v`.
//!
//! Parsing comes in two strictnesses:
//!
//! - **lenient**, as a server must be, and never failing ([`Cmcd::parse`],
//!   [`Cmcd::from_headers`], [`Cmcd::from_query`], [`Cmcd::from_request`]):
//!   a key is taken from whichever header it came in, a malformed item is
//!   skipped, a key this crate does not know (a custom key such as
//!   `com.example-myKey`, or a later version's) is kept in [`Cmcd::custom`],
//!   and a key's first value wins. [`Cmcd::from_request`] reads a request's
//!   headers and its query, a header's value winning over the query's for
//!   the same key;
//! - **strict** ([`Cmcd::try_parse`], [`Cmcd::try_from_headers`],
//!   [`Cmcd::try_from_query`]): the first malformed item is a
//!   [`ParseError`] naming the key and what is wrong
//!   (`bl: not an integer: "abc"`); [`Cmcd::read_reporting`] does both,
//!   keeping the good items and listing the bad.
//!
//! Pure: no I/O, no dependencies.
//!
//! ```
//! use vodlab_cmcd::{Cmcd, ObjectType};
//!
//! let c = Cmcd::from_request("/seg.m4s?CMCD=bl%3D21300%2Cbr%3D800", |name| {
//!     (name == "cmcd-object").then_some("br=3200,d=4004,ot=v")
//! });
//! assert_eq!((c.br, c.bl, c.ot), (Some(3200), Some(21300), Some(ObjectType::Video)));
//! assert_eq!(c.to_query(), "CMCD=bl%3D21300%2Cbr%3D3200%2Cd%3D4004%2Cot%3Dv");
//! assert_eq!(Cmcd::from_query(&c.to_query()), c);
//!
//! let err = Cmcd::try_parse("br=800,bl=abc").unwrap_err();
//! assert_eq!(err.to_string(), "bl: not an integer: \"abc\"");
//!
//! // a version 2 key: `v=2` is sent with it
//! let c = Cmcd { ttfb: Some(35), ..Cmcd::default() };
//! assert_eq!(c.to_list(), "ttfb=35,v=2");
//! ```

#![warn(missing_docs)]

use std::collections::BTreeMap;

pub mod cmsd;
mod encode;
mod parse;

pub use parse::{ParseError, Problem};

#[cfg(test)]
mod tests;

/// The CMCD keys of one request (CTA-5004 versions 1 and 2). `None`,
/// `false` or an empty list is a key not sent. Units are the
/// specification's: kbit/s, ms.
///
/// Version 2 keys are those marked *v2*; which header each goes in is
/// [`Header::of`]'s. Version 2 also lets several keys (`br`, `bl`, `tb`,
/// `mtp`, ...) carry an inner list, one value per track: this crate keeps
/// them single integers, the form every version-1 player sends; an inner
/// list there is a malformed item.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Cmcd {
    // CMCD-Object
    /// `br`, encoded bit rate of the object, kbit/s.
    pub br: Option<u64>,
    /// `d`, object duration, ms.
    pub d: Option<u64>,
    /// `ot`, object type.
    pub ot: Option<ObjectType>,
    /// `tb`, top bit rate of the object's rendition set, kbit/s.
    pub tb: Option<u64>,
    /// `tpb`, *v2*, top playable bit rate: the highest bit rate the player
    /// would play now (given its constraints: screen, licence, ...),
    /// kbit/s.
    pub tpb: Option<u64>,

    // CMCD-Request
    /// `bl`, buffer length, ms (rounded to 100 ms by the player).
    pub bl: Option<u64>,
    /// `dl`, deadline from the request's time until the buffer starves, ms.
    pub dl: Option<u64>,
    /// `df`, *v2*, dropped frames since the last report (an integer).
    pub df: Option<u64>,
    /// `ltc`, *v2*, live latency: the playhead's delay behind the live
    /// edge, ms.
    pub ltc: Option<u64>,
    /// `mtp`, measured throughput, kbit/s (rounded to 100 kbit/s).
    pub mtp: Option<u64>,
    /// `nor`, next object request(s): paths relative to this one,
    /// URL-encoded (kept as sent). Version 1 sends one, as a string
    /// (`nor="seg2.m4s"`); version 2 may send several, as an inner list
    /// (`nor=("seg2.m4s" "seg3.m4s")`). Both are read; one is written as a
    /// string, several as an inner list. Empty: not sent.
    pub nor: Vec<String>,
    /// `nrr`, next range request: `"<start>-<end>"` (kept as sent).
    pub nrr: Option<String>,
    /// `pb`, *v2*, playhead bit rate: the encoded bit rate of what is being
    /// shown now, kbit/s. (The 2025 text names it so; "top playable bit
    /// rate" is `tpb`.)
    pub pb: Option<u64>,
    /// `rc`, *v2*, the response code of the request reported on (reporting
    /// mode: an HTTP status).
    pub rc: Option<u64>,
    /// `sn`, *v2*, sequence number of the report, counted per session.
    pub sn: Option<u64>,
    /// `su`, startup: the object is needed urgently (start-up, seek,
    /// recovery from a stall).
    pub su: bool,
    /// `ts`, *v2*, timestamp of the request (or the event), ms since the
    /// Unix epoch.
    pub ts: Option<u64>,
    /// `ttfb`, *v2*, time to first byte of the request reported on, ms.
    pub ttfb: Option<u64>,
    /// `ttlb`, *v2*, time to last byte of the request reported on, ms.
    pub ttlb: Option<u64>,
    /// `url`, *v2*, the URL of the request reported on (reporting mode).
    pub url: Option<String>,

    // CMCD-Session
    /// `cdn`, *v2*, an identifier of the CDN the object came from.
    pub cdn: Option<String>,
    /// `cid`, content id.
    pub cid: Option<String>,
    /// `msd`, *v2*, media start delay: from the play request to the first
    /// frame shown, ms (sent once).
    pub msd: Option<u64>,
    /// `pr`, playback rate (1 is real time; sent only when not 1).
    pub pr: Option<f64>,
    /// `sf`, streaming format.
    pub sf: Option<StreamingFormat>,
    /// `sid`, session id.
    pub sid: Option<String>,
    /// `st`, stream type.
    pub st: Option<StreamType>,
    /// `v`, CMCD version: absent is version 1 (a version-1 player omits
    /// it); a version-2 player sends `v=2` (the encoders add it when a
    /// version-2 key is set: [`Cmcd::versioned`]).
    pub v: Option<u64>,

    // CMCD-Status
    /// `bg`, *v2*, the player is in the background (not visible).
    pub bg: bool,
    /// `bs`, buffer starvation since the last request.
    pub bs: bool,
    /// `e`, *v2*, the event being reported (event mode).
    pub e: Option<Event>,
    /// `rtp`, requested maximum throughput, kbit/s.
    pub rtp: Option<u64>,
    /// `sta`, *v2*, the player's state.
    pub sta: Option<PlayerState>,

    /// Keys this crate does not know, by name: custom keys
    /// (`com.example-myKey`) and later versions' keys, with the value their
    /// syntax gives. Encoded into `CMCD-Request` in the header form.
    pub custom: BTreeMap<String, Value>,
}

/// The value of a key [`Cmcd`] does not know, by its syntax.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// A bare key: a boolean that is true.
    True,
    /// An integer (`-?[0-9]+`).
    Integer(i64),
    /// A decimal (`-?[0-9]+.[0-9]+`).
    Decimal(f64),
    /// A quoted string (unescaped).
    String(String),
    /// A token (unquoted, starting with a letter or `*`).
    Token(String),
}

/// The four CMCD headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Header {
    /// `CMCD-Object`: keys that vary with the object requested.
    Object,
    /// `CMCD-Request`: keys that vary with each request.
    Request,
    /// `CMCD-Session`: keys expected to be the same for the whole session.
    Session,
    /// `CMCD-Status`: keys that vary with neither every request nor object.
    Status,
}

impl Header {
    /// The four, in the order a parser reads them.
    pub const ALL: [Header; 4] = [
        Header::Object,
        Header::Request,
        Header::Status,
        Header::Session,
    ];

    /// The header's name as the specification writes it (`CMCD-Object`).
    pub fn name(self) -> &'static str {
        match self {
            Header::Object => "CMCD-Object",
            Header::Request => "CMCD-Request",
            Header::Session => "CMCD-Session",
            Header::Status => "CMCD-Status",
        }
    }

    /// The header's name in lower case (`cmcd-object`), as HTTP/2 and most
    /// header maps hold it.
    pub fn lower(self) -> &'static str {
        match self {
            Header::Object => "cmcd-object",
            Header::Request => "cmcd-request",
            Header::Session => "cmcd-session",
            Header::Status => "cmcd-status",
        }
    }

    /// The header a key belongs in (CTA-5004's key table); a key the table
    /// does not name goes in `CMCD-Request`. For the version-2 keys this is
    /// our reading of the 2025 text: `tpb` with the object's bit rates;
    /// `cdn` and `msd` once per session; `bg`, `e` and `sta` with the
    /// player's status; the reporting keys (`df`, `ltc`, `pb`, `rc`, `sn`,
    /// `ts`, `ttfb`, `ttlb`, `url`) in `CMCD-Request`.
    pub fn of(key: &str) -> Header {
        match key {
            "br" | "d" | "ot" | "tb" | "tpb" => Header::Object,
            "cdn" | "cid" | "msd" | "pr" | "sf" | "sid" | "st" | "v" => Header::Session,
            "bg" | "bs" | "e" | "rtp" | "sta" => Header::Status,
            _ => Header::Request,
        }
    }
}

/// Declares a token enum with its tokens.
macro_rules! tokens {
    ($(#[$doc:meta])* $name:ident { $($(#[$vdoc:meta])* $variant:ident = $token:literal,)+ }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$vdoc])* $variant,)+
        }

        impl $name {
            /// Every value.
            pub const ALL: &'static [$name] = &[$($name::$variant,)+];

            /// The token.
            pub fn token(self) -> &'static str {
                match self {
                    $($name::$variant => $token,)+
                }
            }

            /// The value of a token, `None` for one the specification does
            /// not list.
            pub fn from_token(t: &str) -> Option<Self> {
                match t {
                    $($token => Some($name::$variant),)+
                    _ => None,
                }
            }
        }
    };
}

tokens! {
    /// `ot`, the object type.
    ObjectType {
        /// `m`, a text file such as a manifest or playlist.
        Manifest = "m",
        /// `a`, audio only.
        Audio = "a",
        /// `v`, video only.
        Video = "v",
        /// `av`, muxed audio and video.
        Muxed = "av",
        /// `i`, an init segment.
        Init = "i",
        /// `c`, a caption or subtitle.
        Caption = "c",
        /// `tt`, ISOBMFF timed text track.
        TimedText = "tt",
        /// `k`, a cryptographic key, license or certificate.
        Key = "k",
        /// `o`, other.
        Other = "o",
    }
}

tokens! {
    /// `sf`, the streaming format.
    StreamingFormat {
        /// `d`, MPEG DASH.
        Dash = "d",
        /// `h`, HTTP Live Streaming.
        Hls = "h",
        /// `s`, Smooth Streaming.
        Smooth = "s",
        /// `o`, other.
        Other = "o",
    }
}

tokens! {
    /// `st`, the stream type.
    StreamType {
        /// `v`, all segments are available (VOD).
        Vod = "v",
        /// `l`, segments become available over time (live).
        Live = "l",
    }
}

tokens! {
    /// `e` (*v2*), the event a report is sent for. A token the
    /// specification adds later is a malformed `e` here (it is skipped).
    Event {
        /// `ps`, the player state changed (`sta` says to what).
        PlayState = "ps",
        /// `e`, an error.
        Error = "e",
        /// `t`, the reporting interval elapsed.
        TimeInterval = "t",
        /// `c`, the content id changed.
        ContentId = "c",
        /// `b`, the player went to or came back from the background.
        Background = "b",
        /// `m`, muted.
        Mute = "m",
        /// `um`, unmuted.
        Unmute = "um",
        /// `pe`, the player was expanded.
        PlayerExpand = "pe",
        /// `pc`, the player was collapsed.
        PlayerCollapse = "pc",
        /// `rr`, a response was received (response reporting).
        ResponseReceived = "rr",
    }
}

tokens! {
    /// `sta` (*v2*), the player's state.
    PlayerState {
        /// `s`, starting.
        Starting = "s",
        /// `p`, playing.
        Playing = "p",
        /// `k`, seeking.
        Seeking = "k",
        /// `r`, rebuffering.
        Rebuffering = "r",
        /// `a`, paused.
        Paused = "a",
        /// `w`, waiting (for user action).
        Waiting = "w",
        /// `e`, ended.
        Ended = "e",
        /// `f`, a fatal error.
        FatalError = "f",
        /// `q`, quit.
        Quit = "q",
        /// `d`, preloading.
        Preloading = "d",
    }
}

impl Cmcd {
    /// Whether no key is set (nothing to send).
    pub fn is_empty(&self) -> bool {
        *self == Cmcd::default()
    }

    /// Whether a key only version 2 defines is set (several `nor` values
    /// count: version 1 sends one).
    pub fn is_v2(&self) -> bool {
        self.tpb.is_some()
            || self.df.is_some()
            || self.ltc.is_some()
            || self.nor.len() > 1
            || self.pb.is_some()
            || self.rc.is_some()
            || self.sn.is_some()
            || self.ts.is_some()
            || self.ttfb.is_some()
            || self.ttlb.is_some()
            || self.url.is_some()
            || self.cdn.is_some()
            || self.msd.is_some()
            || self.bg
            || self.e.is_some()
            || self.sta.is_some()
    }

    /// `self` as the encoders send it: `v=2` when a version-2 key is set
    /// and `v` is not ([`Cmcd::is_v2`]); otherwise unchanged (version 1
    /// omits `v`). Parsing what [`Cmcd::to_list`] wrote gives this.
    #[must_use]
    pub fn versioned(mut self) -> Cmcd {
        if self.v.is_none() && self.is_v2() {
            self.v = Some(2);
        }
        self
    }

    /// Every key of `self`, and those of `other` that `self` does not
    /// have (`self` wins).
    #[must_use]
    pub fn or(mut self, other: Cmcd) -> Cmcd {
        fn fill<T>(a: &mut Option<T>, b: Option<T>) {
            if a.is_none() {
                *a = b;
            }
        }
        fill(&mut self.br, other.br);
        fill(&mut self.d, other.d);
        fill(&mut self.ot, other.ot);
        fill(&mut self.tb, other.tb);
        fill(&mut self.tpb, other.tpb);
        fill(&mut self.bl, other.bl);
        fill(&mut self.dl, other.dl);
        fill(&mut self.df, other.df);
        fill(&mut self.ltc, other.ltc);
        fill(&mut self.mtp, other.mtp);
        if self.nor.is_empty() {
            self.nor = other.nor;
        }
        fill(&mut self.nrr, other.nrr);
        fill(&mut self.pb, other.pb);
        fill(&mut self.rc, other.rc);
        fill(&mut self.sn, other.sn);
        self.su |= other.su;
        fill(&mut self.ts, other.ts);
        fill(&mut self.ttfb, other.ttfb);
        fill(&mut self.ttlb, other.ttlb);
        fill(&mut self.url, other.url);
        fill(&mut self.cdn, other.cdn);
        fill(&mut self.cid, other.cid);
        fill(&mut self.msd, other.msd);
        fill(&mut self.pr, other.pr);
        fill(&mut self.sf, other.sf);
        fill(&mut self.sid, other.sid);
        fill(&mut self.st, other.st);
        fill(&mut self.v, other.v);
        self.bg |= other.bg;
        self.bs |= other.bs;
        fill(&mut self.e, other.e);
        fill(&mut self.rtp, other.rtp);
        fill(&mut self.sta, other.sta);
        for (k, v) in other.custom {
            self.custom.entry(k).or_insert(v);
        }
        self
    }
}
