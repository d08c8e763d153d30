//! Common Media Server Data (CTA-5006): what a server (or each CDN hop)
//! tells the player about a response, in two response headers written in
//! RFC 8941 Structured Field syntax:
//!
//! - `CMSD-Static` ([`CmsdStatic`]): keys that do not change as the object
//!   travels through caches, a dictionary as CMCD's lists are:
//!   `CMSD-Static: d=4000,ot=v,st=v,su`;
//! - `CMSD-Dynamic` ([`CmsdDynamic`]): one item per server the response
//!   passed through, the server's identifier (a string) with parameters:
//!   `CMSD-Dynamic: "cdn-a";etp=96000;mb=3000;rd=12,"origin";rtt=40`.
//!   A hop appends its item to the list it received.
//!
//! Parsing is lenient ([`CmsdStatic::parse`], [`CmsdDynamic::parse`]: a
//! malformed key or hop is skipped, unknown keys are kept, the first value
//! of a key wins) or strict (`try_parse`: the first malformed key is a
//! [`ParseError`] naming it). Encoding writes keys in alphabetical order,
//! booleans bare when true and left out when false, members separated by
//! `,` without spaces (parsers accept spaces around both `,` and `;`).
//!
//! ```
//! use vodlab_cmcd::cmsd::{CmsdDynamic, CmsdStatic};
//! use vodlab_cmcd::{ObjectType, StreamType};
//!
//! let s = CmsdStatic::parse("ot=v,d=4000,st=v");
//! assert_eq!((s.ot, s.d, s.st), (Some(ObjectType::Video), Some(4000), Some(StreamType::Vod)));
//! assert_eq!(s.encode(), "d=4000,ot=v,st=v");
//!
//! let d = CmsdDynamic::parse("\"cdn-a\";etp=96000;rd=12;mb=3000");
//! assert_eq!((d.hops[0].server.as_str(), d.hops[0].etp), ("cdn-a", Some(96000)));
//! assert_eq!(d.encode(), "\"cdn-a\";etp=96000;mb=3000;rd=12");
//! ```

use std::collections::BTreeMap;

use crate::encode::{custom_item, join, quote};
use crate::parse::{
    boolean, custom, integer, is_token, split, string, token, valid_key, ParseError, Problem,
};
use crate::{ObjectType, StreamType, StreamingFormat, Value};

/// The static header's name.
pub const STATIC: &str = "CMSD-Static";
/// The dynamic header's name.
pub const DYNAMIC: &str = "CMSD-Dynamic";

fn set<T>(field: &mut Option<T>, v: T) {
    if field.is_none() {
        *field = Some(v);
    }
}

/// `CMSD-Static`: what the origin says of the object, unchanged by the
/// caches it passes through. `None` or `false` is a key not sent.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CmsdStatic {
    /// `at`, availability time: when the object became (or becomes)
    /// available, ms since the Unix epoch (live streams).
    pub at: Option<u64>,
    /// `br`, encoded bit rate of the object, kbit/s.
    pub br: Option<u64>,
    /// `d`, object duration, ms.
    pub d: Option<u64>,
    /// `ht`, held time: how long the server advises the player to wait
    /// before asking for this object again, ms. (Our reading of CTA-5006's
    /// unit; it is kept as the integer sent.)
    pub ht: Option<u64>,
    /// `nor`, next object response: the path of the object the server
    /// expects to be asked for next, relative to this one.
    pub nor: Option<String>,
    /// `nrr`, next range response: `"<start>-<end>"`.
    pub nrr: Option<String>,
    /// `ot`, object type.
    pub ot: Option<ObjectType>,
    /// `sf`, streaming format.
    pub sf: Option<StreamingFormat>,
    /// `st`, stream type.
    pub st: Option<StreamType>,
    /// `su`, start-up: the object is meant for a player starting up.
    pub su: bool,
    /// `v`, CMSD version (absent is version 1).
    pub v: Option<u64>,
    /// Keys this crate does not know, with the value their syntax gives.
    pub custom: BTreeMap<String, Value>,
}

/// `CMSD-Dynamic`: one [`CmsdHop`] per server the response came through,
/// in the order they wrote them (the origin first, the last hop last).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CmsdDynamic {
    /// The hops.
    pub hops: Vec<CmsdHop>,
}

/// One server's item in `CMSD-Dynamic`: its identifier and its keys (the
/// item's parameters). `None` or `false` is a key not sent.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CmsdHop {
    /// The server's identifier: the item, a string (a token is read too,
    /// and written back as a string).
    pub server: String,
    /// `du`, duress: the server is under load and asks the player to ease
    /// off.
    pub du: bool,
    /// `etp`, estimated throughput from this server to the player, kbit/s.
    pub etp: Option<u64>,
    /// `mb`, the maximum bit rate the server suggests the player request,
    /// kbit/s.
    pub mb: Option<u64>,
    /// `rd`, response delay: from the request's arrival to the response's
    /// first byte at this server, ms.
    pub rd: Option<u64>,
    /// `rtt`, round-trip time from this server to the player, ms.
    pub rtt: Option<u64>,
    /// Parameters this crate does not know, with the value their syntax
    /// gives.
    pub custom: BTreeMap<String, Value>,
}

/// Splits `key[=value]`, trimmed.
fn key_value(item: &str) -> (&str, Option<&str>) {
    match item.split_once('=') {
        Some((k, v)) => (k.trim(), Some(v.trim())),
        None => (item.trim(), None),
    }
}

fn first<T>(value: T, errors: Vec<ParseError>) -> Result<T, ParseError> {
    match errors.into_iter().next() {
        Some(e) => Err(e),
        None => Ok(value),
    }
}

impl CmsdStatic {
    /// Parses a `CMSD-Static` value, leniently: malformed keys are skipped.
    pub fn parse(value: &str) -> CmsdStatic {
        let mut s = CmsdStatic::default();
        s.read_reporting(value, &mut Vec::new());
        s
    }

    /// Parses a `CMSD-Static` value strictly: the first malformed key is an
    /// error.
    pub fn try_parse(value: &str) -> Result<CmsdStatic, ParseError> {
        let mut s = CmsdStatic::default();
        let mut errors = Vec::new();
        s.read_reporting(value, &mut errors);
        first(s, errors)
    }

    /// Reads a `CMSD-Static` value into `self` (keys `self` has keep their
    /// values), pushing an error onto `errors` for each malformed key.
    pub fn read_reporting(&mut self, value: &str, errors: &mut Vec<ParseError>) {
        for item in split(value, ',') {
            if item.trim().is_empty() {
                continue;
            }
            let (key, v) = key_value(item);
            let r = if valid_key(key) {
                self.read_item(key, v)
            } else {
                Err(Problem::BadKey)
            };
            if let Err(p) = r {
                errors.push(ParseError::new(key, p, v));
            }
        }
    }

    fn read_item(&mut self, key: &str, v: Option<&str>) -> Result<(), Problem> {
        match key {
            "at" => set(&mut self.at, integer(v)?),
            "br" => set(&mut self.br, integer(v)?),
            "d" => set(&mut self.d, integer(v)?),
            "ht" => set(&mut self.ht, integer(v)?),
            "nor" => set(&mut self.nor, string(v)?),
            "nrr" => set(&mut self.nrr, string(v)?),
            "ot" => set(&mut self.ot, token(v, ObjectType::from_token)?),
            "sf" => set(&mut self.sf, token(v, StreamingFormat::from_token)?),
            "st" => set(&mut self.st, token(v, StreamType::from_token)?),
            "su" => self.su |= boolean(v)?,
            "v" => set(&mut self.v, integer(v)?),
            _ => {
                let v = custom(v)?;
                self.custom.entry(key.to_string()).or_insert(v);
            }
        }
        Ok(())
    }

    /// Whether no key is set (nothing to send).
    pub fn is_empty(&self) -> bool {
        *self == CmsdStatic::default()
    }

    /// The header's value: every key set, in alphabetical order,
    /// comma-separated.
    pub fn encode(&self) -> String {
        let int = |n: Option<u64>| n.map(|n| n.to_string());
        let mut items: Vec<(&str, Option<String>)> = vec![
            ("at", int(self.at)),
            ("br", int(self.br)),
            ("d", int(self.d)),
            ("ht", int(self.ht)),
            ("nor", self.nor.as_deref().map(quote)),
            ("nrr", self.nrr.as_deref().map(quote)),
            ("ot", self.ot.map(|t| t.token().to_string())),
            ("sf", self.sf.map(|t| t.token().to_string())),
            ("st", self.st.map(|t| t.token().to_string())),
            ("v", int(self.v)),
        ];
        let mut out: Vec<(&str, String)> = items
            .drain(..)
            .filter_map(|(k, v)| v.map(|v| (k, format!("{k}={v}"))))
            .collect();
        if self.su {
            out.push(("su", "su".to_string()));
        }
        for (k, v) in &self.custom {
            if let Some(item) = custom_item(k, v) {
                out.push((k.as_str(), item));
            }
        }
        out.sort_by(|a, b| a.0.cmp(b.0));
        join(out.into_iter().map(|(_, item)| item))
    }
}

impl CmsdDynamic {
    /// Parses a `CMSD-Dynamic` value, leniently: a hop whose identifier is
    /// malformed is skipped, and so is a malformed key of a hop.
    pub fn parse(value: &str) -> CmsdDynamic {
        let mut d = CmsdDynamic::default();
        d.read_reporting(value, &mut Vec::new());
        d
    }

    /// Parses a `CMSD-Dynamic` value strictly: the first malformed hop or
    /// key is an error (a hop's identifier is reported under the key
    /// `CMSD-Dynamic`).
    pub fn try_parse(value: &str) -> Result<CmsdDynamic, ParseError> {
        let mut d = CmsdDynamic::default();
        let mut errors = Vec::new();
        d.read_reporting(value, &mut errors);
        first(d, errors)
    }

    /// Reads a `CMSD-Dynamic` value, appending its hops to `self`'s and
    /// pushing an error onto `errors` for each malformed hop or key.
    pub fn read_reporting(&mut self, value: &str, errors: &mut Vec<ParseError>) {
        for member in split(value, ',') {
            if member.trim().is_empty() {
                continue;
            }
            let mut parts = split(member, ';');
            let id = parts.next().unwrap_or("").trim();
            let server = if id.starts_with('"') {
                string(Some(id)).ok()
            } else {
                is_token(id).then(|| id.to_string())
            };
            let Some(server) = server else {
                errors.push(ParseError::new(DYNAMIC, Problem::BadValue, Some(id)));
                continue;
            };
            let mut hop = CmsdHop {
                server,
                ..CmsdHop::default()
            };
            for param in parts {
                let (key, v) = key_value(param);
                let r = if valid_key(key) {
                    hop.read_param(key, v)
                } else {
                    Err(Problem::BadKey)
                };
                if let Err(p) = r {
                    errors.push(ParseError::new(key, p, v));
                }
            }
            self.hops.push(hop);
        }
    }

    /// The header's value: each hop, in order, comma-separated.
    pub fn encode(&self) -> String {
        join(self.hops.iter().map(CmsdHop::encode))
    }
}

impl CmsdHop {
    fn read_param(&mut self, key: &str, v: Option<&str>) -> Result<(), Problem> {
        match key {
            "du" => self.du |= boolean(v)?,
            "etp" => set(&mut self.etp, integer(v)?),
            "mb" => set(&mut self.mb, integer(v)?),
            "rd" => set(&mut self.rd, integer(v)?),
            "rtt" => set(&mut self.rtt, integer(v)?),
            _ => {
                let v = custom(v)?;
                self.custom.entry(key.to_string()).or_insert(v);
            }
        }
        Ok(())
    }

    /// The hop's item: the quoted identifier, then `;key=value` for each
    /// key set, in alphabetical order (`;du` bare when true).
    pub fn encode(&self) -> String {
        let mut params: Vec<(&str, String)> = [
            ("etp", self.etp),
            ("mb", self.mb),
            ("rd", self.rd),
            ("rtt", self.rtt),
        ]
        .into_iter()
        .filter_map(|(k, v)| v.map(|v| (k, format!("{k}={v}"))))
        .collect();
        if self.du {
            params.push(("du", "du".to_string()));
        }
        for (k, v) in &self.custom {
            if let Some(item) = custom_item(k, v) {
                params.push((k.as_str(), item));
            }
        }
        params.sort_by(|a, b| a.0.cmp(b.0));
        let mut out = quote(&self.server);
        for (_, p) in params {
            out.push(';');
            out.push_str(&p);
        }
        out
    }
}
