//! Common Media Server Data (CTA-5006) on responses (`serve --cmsd`):
//! the values of `CMSD-Static` and `CMSD-Dynamic` for a response with a
//! file (200 or 206), computed without I/O by [`headers`] from what the
//! prelude ([`crate::prepare`]) knows: the request's path and CMCD, its
//! bit rate, the server's throughput so far and open connections, and the
//! time since the request's head arrived (docs/cmcd.md, "CMSD").
//!
//! - `CMSD-Static`: `ot` ([`object_type`]), `d` (the request's CMCD `d`,
//!   the only source of a segment's duration the server has), `br` (the
//!   request's bit rate when CMCD or the catalog gave it, not the
//!   default), `st=v` (every title is video on demand);
//! - `CMSD-Dynamic`: one hop, `"NAME"` (`--cmsd-name`), `etp` (bytes the
//!   server has sent since it started, over its uptime, shared among the
//!   open connections, kbit/s: [`etp_kbps`]; left out before the first
//!   byte), `rd` (ms from the request's head being parsed to its
//!   response head being planned, just before it is written; rounded
//!   down) and `mb` (`--cmsd-mb`, when given
//!   and, with `--cmsd-load-connections N`, only while more than N
//!   connections are open).

use serde::{Deserialize, Serialize};
use vodlab_cmcd::cmsd::{CmsdDynamic, CmsdHop, CmsdStatic};
use vodlab_cmcd::{Cmcd, ObjectType, StreamType};

/// The default server name of the `CMSD-Dynamic` hop.
pub const DEFAULT_NAME: &str = "vodlab";

/// `serve --cmsd` and its flags (`[cmsd]` in a config file).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CmsdSettings {
    /// The hop's server name (`--cmsd-name`).
    pub name: String,
    /// `mb`, kbit/s (`--cmsd-mb`); `None`: never sent.
    pub mb_kbps: Option<u64>,
    /// Send `mb` only while more than this many connections are open
    /// (`--cmsd-load-connections`); `None`: always.
    pub load_connections: Option<u64>,
}

impl Default for CmsdSettings {
    fn default() -> Self {
        Self {
            name: DEFAULT_NAME.to_string(),
            mb_kbps: None,
            load_connections: None,
        }
    }
}

impl CmsdSettings {
    /// Checks the name can be written as a Structured Field string
    /// (printable ASCII).
    pub fn validate(&self) -> Result<(), &'static str> {
        if self.name.is_empty() || !self.name.bytes().all(|b| (0x20..0x7f).contains(&b)) {
            return Err("must be printable ASCII, not empty (--cmsd-name)");
        }
        if self.mb_kbps == Some(0) {
            return Err("must be > 0 kbit/s (--cmsd-mb)");
        }
        Ok(())
    }
}

/// What the server knows of a response's object.
#[derive(Debug, Clone, Copy)]
pub struct Object<'a> {
    /// The request's path (the query is ignored).
    pub path: &'a str,
    /// The request's CMCD.
    pub cmcd: &'a Cmcd,
    /// The request's bit rate, kbit/s, when CMCD or the catalog gave it.
    pub br_kbps: Option<f64>,
}

/// The server's state when the response head is written.
#[derive(Debug, Clone, Copy)]
pub struct Load {
    /// [`etp_kbps`].
    pub etp_kbps: Option<u64>,
    /// Response delay, ms.
    pub rd_ms: u64,
    /// Connections open now.
    pub open_connections: u64,
}

/// The object type: `m` for a manifest or playlist (`.mpd`, `.m3u8`), else
/// what the request's CMCD `ot` says, else by the file's extension (`i`
/// for a name containing `init`; `v` for `.m4v`, `.cmfv`; `a` for `.m4a`,
/// `.cmfa`, `.aac`; `c` for `.vtt`, `.ttml`, `.cmft`), else `o` (other:
/// a `.m4s`, `.mp4` or `.ts` segment may hold video, audio or both, and
/// the server does not look inside).
pub fn object_type(path: &str, cmcd: &Cmcd) -> ObjectType {
    let path = path.split(['?', '#']).next().unwrap_or("");
    let name = path.rsplit('/').next().unwrap_or("").to_ascii_lowercase();
    let ext = name.rsplit_once('.').map_or("", |(_, e)| e);
    if matches!(ext, "mpd" | "m3u8") {
        return ObjectType::Manifest;
    }
    if let Some(ot) = cmcd.ot {
        return ot;
    }
    if name.contains("init") {
        return ObjectType::Init;
    }
    match ext {
        "m4v" | "cmfv" => ObjectType::Video,
        "m4a" | "cmfa" | "aac" => ObjectType::Audio,
        "vtt" | "ttml" | "cmft" => ObjectType::Caption,
        _ => ObjectType::Other,
    }
}

/// The server's estimated throughput per connection, kbit/s: `bytes` sent
/// in `uptime_s`, shared equally among the `open` connections (at least
/// one). `None` before anything was sent.
pub fn etp_kbps(bytes: u64, uptime_s: f64, open: u64) -> Option<u64> {
    if bytes == 0 || uptime_s.is_nan() || uptime_s <= 0.0 {
        return None;
    }
    let kbps = bytes as f64 * 8.0 / 1e3 / uptime_s / open.max(1) as f64;
    Some(kbps.round().max(1.0) as u64)
}

/// The values of `CMSD-Static` and `CMSD-Dynamic` (see the module note).
pub fn headers(cfg: &CmsdSettings, obj: Object<'_>, load: Load) -> (String, String) {
    let ot = object_type(obj.path, obj.cmcd);
    let media = !matches!(ot, ObjectType::Manifest);
    let st = CmsdStatic {
        ot: Some(ot),
        d: obj.cmcd.d.filter(|_| media),
        br: obj
            .br_kbps
            .filter(|_| media)
            .map(|b| b.round().max(1.0) as u64),
        st: Some(StreamType::Vod),
        ..CmsdStatic::default()
    };
    let loaded = cfg
        .load_connections
        .is_none_or(|n| load.open_connections > n);
    let dy = CmsdDynamic {
        hops: vec![CmsdHop {
            server: cfg.name.clone(),
            etp: load.etp_kbps,
            rd: Some(load.rd_ms),
            mb: cfg.mb_kbps.filter(|_| loaded),
            ..CmsdHop::default()
        }],
    };
    (st.encode(), dy.encode())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmcd(s: &str) -> Cmcd {
        Cmcd::from_request(&format!("/x?CMCD={s}"), |_| None)
    }

    #[test]
    fn object_types() {
        let none = Cmcd::default();
        for (path, want) in [
            ("/t/manifest.mpd", ObjectType::Manifest),
            ("/t/master.M3U8?x=1", ObjectType::Manifest),
            ("/t/sd/init.mp4", ObjectType::Init),
            ("/t/sd/0001.m4v", ObjectType::Video),
            ("/t/a/0001.cmfa", ObjectType::Audio),
            ("/t/sub.vtt", ObjectType::Caption),
            ("/t/sd/0001.m4s", ObjectType::Other),
            ("/t/movie.mp4", ObjectType::Other),
        ] {
            assert_eq!(object_type(path, &none), want, "{path}");
        }
        // the player's word for a segment, not for a manifest
        let v = cmcd("ot%3Dv");
        assert_eq!(v.ot, Some(ObjectType::Video));
        assert_eq!(object_type("/t/sd/0001.m4s", &v), ObjectType::Video);
        assert_eq!(object_type("/t/manifest.mpd", &v), ObjectType::Manifest);
    }

    #[test]
    fn etp_is_the_rate_so_far_per_open_connection() {
        assert_eq!(etp_kbps(0, 10.0, 1), None);
        assert_eq!(etp_kbps(1000, 0.0, 1), None);
        // 1.25 MB in 2 s = 5000 kbit/s, over 2 connections
        assert_eq!(etp_kbps(1_250_000, 2.0, 2), Some(2500));
        assert_eq!(etp_kbps(1_250_000, 2.0, 0), Some(5000));
        assert_eq!(etp_kbps(1, 1000.0, 1), Some(1));
    }

    #[test]
    fn header_values() {
        let cfg = CmsdSettings {
            name: "edge-1".into(),
            mb_kbps: Some(1500),
            load_connections: None,
        };
        let c = cmcd("br%3D3000%2Cd%3D4000%2Cot%3Dv");
        let load = Load {
            etp_kbps: Some(96_000),
            rd_ms: 3,
            open_connections: 1,
        };
        let obj = Object {
            path: "/t/hd/0003.m4s",
            cmcd: &c,
            br_kbps: Some(3000.0),
        };
        let (s, d) = headers(&cfg, obj, load);
        assert_eq!(s, "br=3000,d=4000,ot=v,st=v");
        assert_eq!(d, "\"edge-1\";etp=96000;mb=1500;rd=3");
        let hop = &CmsdDynamic::try_parse(&d).unwrap().hops[0];
        assert_eq!(
            (hop.etp, hop.mb, hop.rd),
            (Some(96_000), Some(1500), Some(3))
        );
        // a manifest: no duration or bit rate; no etp yet
        let m = Object {
            path: "/t/manifest.mpd",
            cmcd: &c,
            br_kbps: Some(3000.0),
        };
        let quiet = Load {
            etp_kbps: None,
            ..load
        };
        let (s, d) = headers(&cfg, m, quiet);
        assert_eq!(s, "ot=m,st=v");
        assert_eq!(d, "\"edge-1\";mb=1500;rd=3");
        // mb only under load
        let cfg = CmsdSettings {
            load_connections: Some(1),
            ..cfg
        };
        let (_, d) = headers(&cfg, obj, load);
        assert_eq!(d, "\"edge-1\";etp=96000;rd=3");
        let busy = Load {
            open_connections: 2,
            ..load
        };
        let (_, d) = headers(&cfg, obj, busy);
        assert_eq!(d, "\"edge-1\";etp=96000;mb=1500;rd=3");
        // without mb
        let (s, d) = headers(
            &CmsdSettings::default(),
            Object {
                path: "/t/sd/0001.m4s",
                cmcd: &Cmcd::default(),
                br_kbps: None,
            },
            load,
        );
        assert_eq!(s, "ot=o,st=v");
        assert_eq!(d, "\"vodlab\";etp=96000;rd=3");
        assert!(CmsdSettings::default().validate().is_ok());
        let bad = CmsdSettings {
            name: "é".into(),
            ..CmsdSettings::default()
        };
        assert!(bad.validate().is_err());
    }
}
