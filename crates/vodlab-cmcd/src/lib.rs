//! # vodlab-cmcd
//!
//! Common Media Client Data, version 1 (CTA-5004): the keys a media player
//! sends with each object request, typed ([`Cmcd`]), parsed from and encoded
//! into both of its forms:
//!
//! - **headers**: `CMCD-Object`, `CMCD-Request`, `CMCD-Session` and
//!   `CMCD-Status`, each a comma-separated list; a key goes in the header
//!   its persistence names ([`Header::of`]);
//! - **query**: one `CMCD` parameter holding the whole list, percent-encoded.
//!
//! Within a list, items are `key=value` or, for a boolean that is true, the
//! bare `key`; strings are quoted (`\"` and `\\` escaped), tokens and
//! numbers are not, and keys are written in alphabetical order (the
//! specification's rule against fingerprinting).
//!
//! Parsing is as lenient as a server must be, and never fails: a key is
//! taken from whichever header it came in, a malformed item is skipped,
//! a key this crate does not know (a custom key such as
//! `com.example-myKey`, or a later version's) is kept in [`Cmcd::custom`],
//! and a key's first value wins. [`Cmcd::from_request`] reads a request's
//! headers and its query, a header's value winning over the query's for the
//! same key.
//!
//! Pure: no I/O.
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
//! ```

#![warn(missing_docs)]

use std::collections::BTreeMap;

mod encode;
mod parse;

#[cfg(test)]
mod tests;

/// The CMCD keys of one request (CTA-5004 version 1). `None` (or `false`)
/// is a key not sent. Units are the specification's: kbit/s, ms.
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

    // CMCD-Request
    /// `bl`, buffer length, ms (rounded to 100 ms by the player).
    pub bl: Option<u64>,
    /// `dl`, deadline from the request's time until the buffer starves, ms.
    pub dl: Option<u64>,
    /// `mtp`, measured throughput, kbit/s (rounded to 100 kbit/s).
    pub mtp: Option<u64>,
    /// `nor`, next object request: a path relative to this one,
    /// URL-encoded (kept as sent).
    pub nor: Option<String>,
    /// `nrr`, next range request: `"<start>-<end>"` (kept as sent).
    pub nrr: Option<String>,
    /// `su`, startup: the object is needed urgently (start-up, seek,
    /// recovery from a stall).
    pub su: bool,

    // CMCD-Session
    /// `cid`, content id.
    pub cid: Option<String>,
    /// `pr`, playback rate (1 is real time; sent only when not 1).
    pub pr: Option<f64>,
    /// `sf`, streaming format.
    pub sf: Option<StreamingFormat>,
    /// `sid`, session id.
    pub sid: Option<String>,
    /// `st`, stream type.
    pub st: Option<StreamType>,
    /// `v`, CMCD version (sent only when not 1).
    pub v: Option<u64>,

    // CMCD-Status
    /// `bs`, buffer starvation since the last request.
    pub bs: bool,
    /// `rtp`, requested maximum throughput, kbit/s.
    pub rtp: Option<u64>,

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
    /// does not name goes in `CMCD-Request`.
    pub fn of(key: &str) -> Header {
        match key {
            "br" | "d" | "ot" | "tb" => Header::Object,
            "cid" | "pr" | "sf" | "sid" | "st" | "v" => Header::Session,
            "bs" | "rtp" => Header::Status,
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

impl Cmcd {
    /// Whether no key is set (nothing to send).
    pub fn is_empty(&self) -> bool {
        *self == Cmcd::default()
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
        fill(&mut self.bl, other.bl);
        fill(&mut self.dl, other.dl);
        fill(&mut self.mtp, other.mtp);
        fill(&mut self.nor, other.nor);
        fill(&mut self.nrr, other.nrr);
        self.su |= other.su;
        fill(&mut self.cid, other.cid);
        fill(&mut self.pr, other.pr);
        fill(&mut self.sf, other.sf);
        fill(&mut self.sid, other.sid);
        fill(&mut self.st, other.st);
        fill(&mut self.v, other.v);
        self.bs |= other.bs;
        fill(&mut self.rtp, other.rtp);
        for (k, v) in other.custom {
            self.custom.entry(k).or_insert(v);
        }
        self
    }
}
