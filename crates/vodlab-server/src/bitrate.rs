//! Where a response's bit rate comes from, in this order: the client's CMCD
//! (CTA-5004: the `CMCD` query parameter or the `CMCD-Object`,
//! `CMCD-Request`, `CMCD-Status`, `CMCD-Session` headers; `br` encoded bit
//! rate in kbit/s, `bl` buffer length in ms, `rtp` requested maximum
//! throughput in kbit/s), then a catalog file ([`BitrateCatalog`]), then a
//! default. Pure: the catalog is read once at start.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use thiserror::Error;
use vodlab_http::server::Head;

/// The CMCD keys pacing uses (CTA-5004 section 3.3), as the client sent them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Cmcd {
    /// `br`: encoded bit rate of the object, kbit/s.
    pub br_kbps: Option<u64>,
    /// `bl`: buffer length, ms.
    pub bl_ms: Option<u64>,
    /// `rtp`: requested maximum throughput, kbit/s.
    pub rtp_kbps: Option<u64>,
}

impl Cmcd {
    /// Reads the keys from every CMCD header and the `CMCD` query parameter
    /// (a header's value wins over the query's for the same key).
    pub fn from_head(head: &Head) -> Self {
        let mut c = Cmcd::default();
        for h in ["cmcd-object", "cmcd-request", "cmcd-status", "cmcd-session"] {
            if let Some(v) = head.header(h) {
                c.read(v);
            }
        }
        if let Some(q) = head.target.split_once('?').map(|t| t.1) {
            let q = q.split('#').next().unwrap_or("");
            if let Some(v) = q.split('&').find_map(|p| p.strip_prefix("CMCD=")) {
                if let Some(v) = crate::request::percent_decode(&v.replace('+', " ")) {
                    let mut from_query = Cmcd::default();
                    from_query.read(&v);
                    c.br_kbps = c.br_kbps.or(from_query.br_kbps);
                    c.bl_ms = c.bl_ms.or(from_query.bl_ms);
                    c.rtp_kbps = c.rtp_kbps.or(from_query.rtp_kbps);
                }
            }
        }
        c
    }

    /// Reads one CMCD list (`key=value` or bare `key`, comma-separated;
    /// integer values; unknown keys and malformed values ignored; a comma
    /// inside a quoted string value does not split).
    pub fn read(&mut self, list: &str) {
        for kv in split_cmcd(list) {
            let Some((k, v)) = kv.split_once('=') else {
                continue;
            };
            let Ok(n) = v.trim().parse::<u64>() else {
                continue;
            };
            match k.trim() {
                "br" if n > 0 => self.br_kbps = self.br_kbps.or(Some(n)),
                "bl" => self.bl_ms = self.bl_ms.or(Some(n)),
                "rtp" if n > 0 => self.rtp_kbps = self.rtp_kbps.or(Some(n)),
                _ => {}
            }
        }
    }
}

/// The `key[=value]` items of a CMCD list: split on commas outside
/// double-quoted strings (CTA-5004 strings may hold commas; `\"` escapes).
fn split_cmcd(list: &str) -> impl Iterator<Item = &str> {
    let mut items = Vec::new();
    let (mut start, mut quoted, mut escaped) = (0, false, false);
    for (i, c) in list.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            ',' if !quoted => {
                items.push(&list[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(&list[start..]);
    items.into_iter()
}

/// Where a response's bit rate came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RateSource {
    /// The client's CMCD `br`.
    Cmcd,
    /// The `--bitrates` catalog.
    Catalog,
    /// `--default-bitrate`.
    Default,
}

/// What a paced response is paced by.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ResponseRate {
    /// The content's bit rate, bytes per second.
    pub bytes_per_s: f64,
    /// Seconds of content the client holds (CMCD `bl`).
    pub client_buffer_s: Option<f64>,
    /// Most bytes per second the client asked for (CMCD `rtp`).
    pub max_bytes_per_s: Option<u64>,
    /// Where the bit rate came from.
    pub source: RateSource,
}

/// A bit-rate catalog could not be read.
#[derive(Debug, Error)]
pub enum CatalogError {
    /// The file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Not a catalog in either format.
    #[error("{path}: {why}")]
    Format {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        why: String,
    },
}

/// The `--bitrates` file: request paths or path prefixes to kbit/s.
///
/// ```toml
/// [bitrates]
/// "/t00000/sd/" = 419.43   # every path under /t00000/sd/
/// "/movie.mp4" = 3200
/// ```
///
/// (JSON: `{"bitrates": {"/movie.mp4": 3200}}`; schema in
/// docs/bitrates.schema.json.) A path takes the rate of the longest key
/// that is a prefix of it (byte-wise, after percent-decoding the path), so
/// a directory prefix should end in `/`. A `vodlab gen` workload's
/// `catalog.json` is accepted too: each title's representation gives the
/// prefix of its files (`/{title}/{rep}/` for the chunked layout, the file
/// itself for the single one).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BitrateCatalog {
    /// Path or path prefix → kbit/s.
    pub bitrates: BTreeMap<String, f64>,
    /// Length of the longest key (bounds a lookup).
    #[serde(skip)]
    longest: usize,
}

/// The parts of a workload's `catalog.json` (docs/formats.md) a catalog
/// needs; the rest is ignored.
#[derive(Deserialize)]
struct Workload {
    path_format: String,
    representations: Vec<WorkloadRep>,
    titles: Vec<WorkloadTitle>,
}

#[derive(Deserialize)]
struct WorkloadRep {
    name: String,
    bitrate_kbps: f64,
}

#[derive(Deserialize)]
struct WorkloadTitle {
    name: String,
    representations: Vec<WorkloadTitleRep>,
}

#[derive(Deserialize)]
struct WorkloadTitleRep {
    rep: usize,
}

impl BitrateCatalog {
    /// Reads a catalog: JSON when the name ends in `.json`, else TOML; in
    /// either, a [`BitrateCatalog`] or a workload's `catalog.json`.
    pub fn load(path: &Path) -> Result<Self, CatalogError> {
        let text = std::fs::read_to_string(path).map_err(|source| CatalogError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let json = path.extension().is_some_and(|e| e == "json");
        Self::parse(&text, json).map_err(|why| CatalogError::Format {
            path: path.to_path_buf(),
            why,
        })
    }

    /// Parses a catalog's text (see [`BitrateCatalog::load`]).
    pub fn parse(text: &str, json: bool) -> Result<Self, String> {
        let own: Result<Self, String> = if json {
            serde_json::from_str(text).map_err(|e| e.to_string())
        } else {
            toml::from_str(text).map_err(|e| e.to_string())
        };
        let mut cat = match own {
            Ok(c) => c,
            Err(e) => {
                let w: Workload = if json {
                    serde_json::from_str(text).map_err(|_| e.clone())?
                } else {
                    return Err(e);
                };
                Self::from_workload(&w)?
            }
        };
        for (k, v) in &cat.bitrates {
            if !k.starts_with('/') {
                return Err(format!("bitrates: key `{k}` must start with /"));
            }
            if !(v.is_finite() && *v > 0.0 && *v <= crate::config::defaults::MAX_BITRATE_KBPS) {
                return Err(format!(
                    "bitrates.\"{k}\": {v} kbit/s must be > 0 and at most 1e9"
                ));
            }
        }
        cat.longest = cat.bitrates.keys().map(String::len).max().unwrap_or(0);
        Ok(cat)
    }

    fn from_workload(w: &Workload) -> Result<Self, String> {
        let mut bitrates = BTreeMap::new();
        for t in &w.titles {
            for tr in &t.representations {
                let rep = w.representations.get(tr.rep).ok_or_else(|| {
                    format!("title {}: representation {} unknown", t.name, tr.rep)
                })?;
                let p = w
                    .path_format
                    .replace("{title}", &t.name)
                    .replace("{rep}", &rep.name);
                let prefix = match p.find("{chunk") {
                    Some(i) => &p[..i],
                    None => &p[..],
                };
                bitrates.insert(
                    format!("/{}", prefix.trim_start_matches('/')),
                    rep.bitrate_kbps,
                );
            }
        }
        Ok(Self {
            bitrates,
            longest: 0,
        })
    }

    /// The bit rate (kbit/s) of a request path: the longest key that is a
    /// prefix of it.
    pub fn lookup(&self, path: &str) -> Option<f64> {
        // Every prefix no longer than the longest key, longest first: at
        // most `longest` map look-ups, whatever the request sent.
        (1..=path.len().min(self.longest))
            .rev()
            .filter(|&i| path.is_char_boundary(i))
            .find_map(|i| self.bitrates.get(&path[..i]).copied())
    }
}

/// Decides a response's rate: CMCD `br`, else the catalog's entry for
/// `path` (the decoded request path), else `default_kbps`; `None` when none
/// gives one. `bl` and `rtp` are taken from CMCD whatever gave the rate.
pub fn response_rate(
    cmcd: &Cmcd,
    path: &str,
    catalog: Option<&BitrateCatalog>,
    default_kbps: Option<f64>,
) -> Option<ResponseRate> {
    let (kbps, source) = if let Some(br) = cmcd.br_kbps {
        (br as f64, RateSource::Cmcd)
    } else if let Some(k) = catalog.and_then(|c| c.lookup(path)) {
        (k, RateSource::Catalog)
    } else {
        (default_kbps?, RateSource::Default)
    };
    Some(ResponseRate {
        bytes_per_s: kbps * 125.0,
        client_buffer_s: cmcd.bl_ms.map(|ms| ms as f64 / 1000.0),
        max_bytes_per_s: cmcd.rtp_kbps.map(|k| k.saturating_mul(125)),
        source,
    })
}

/// The rest of the bit-rate chain after CMCD, for the prefetch controllers:
/// the catalog's rate of the request's decoded path, else `default_kbps`;
/// bits per second. (The server asks CMCD first, `request::cmcd_bitrate`.)
pub fn fallback_bitrate_bps(
    head: &Head,
    catalog: Option<&BitrateCatalog>,
    default_kbps: Option<f64>,
) -> Option<u64> {
    let path = head.target.split(['?', '#']).next().unwrap_or("");
    let kbps = catalog
        .and_then(|c| crate::request::percent_decode(path).and_then(|p| c.lookup(&p)))
        .or(default_kbps)?;
    Some((kbps * 1000.0).round() as u64)
}

impl BitrateCatalog {
    /// The catalog with every rate multiplied by `k` (the server's
    /// `time_compression`).
    pub fn time_compressed(mut self, k: f64) -> Self {
        if k != 1.0 {
            for v in self.bitrates.values_mut() {
                *v *= k;
            }
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(text: &str) -> Head {
        vodlab_http::server::parse_head(text.as_bytes())
            .unwrap()
            .unwrap()
    }

    #[test]
    fn cmcd_keys_from_headers_and_query() {
        let h = head(
            "GET /v.mp4 HTTP/1.1\r\nCMCD-Object: br=3200,d=4004,ot=v\r\nCMCD-Request: bl=21300,mtp=25400,rtp=15000,su\r\n\r\n",
        );
        assert_eq!(
            Cmcd::from_head(&h),
            Cmcd {
                br_kbps: Some(3200),
                bl_ms: Some(21300),
                rtp_kbps: Some(15000)
            }
        );
        let h = head("GET /v.mp4?x=1&CMCD=bl%3D500%2Cbr%3D800%2Cot%3Dv HTTP/1.1\r\n\r\n");
        let c = Cmcd::from_head(&h);
        assert_eq!(
            (c.br_kbps, c.bl_ms, c.rtp_kbps),
            (Some(800), Some(500), None)
        );
        // the header wins over the query for the same key
        let h = head("GET /v.mp4?CMCD=br%3D800 HTTP/1.1\r\nCMCD-Object: br=100\r\n\r\n");
        assert_eq!(Cmcd::from_head(&h).br_kbps, Some(100));
        // malformed, zero and string values are ignored
        let h = head("GET /v HTTP/1.1\r\nCMCD-Object: br=fast,br=0,cid=\"x=1\"\r\n\r\n");
        assert_eq!(Cmcd::from_head(&h), Cmcd::default());
    }

    /// The CMCD examples of CTA-5004 (section 4: all keys as headers, and
    /// as one query parameter) and a dash.js-style query with a quoted
    /// comma; a request without CMCD and malformed lists give nothing.
    #[test]
    fn cmcd_of_the_spec_examples_and_dash_js() {
        let h = head(concat!(
            "GET /t.m4v HTTP/1.1\r\n",
            "CMCD-Request: bl=21300,dl=18500,mtp=48100,nor=\"..%2F300kbps%2Ftrack.m4v\",nrr=\"12323-48763\",su\r\n",
            "CMCD-Object: br=3200,d=4004,ot=v,tb=6141\r\n",
            "CMCD-Status: bs,rtp=12000\r\n",
            "CMCD-Session: cid=\"faec5fc2-ac30-11ea-bb37-0242ac130002\",pr=1.08,sf=d,sid=\"6e2fb550-c457-11e9-bb97-0800200c9a66\",st=v\r\n\r\n"
        ));
        let want = Cmcd {
            br_kbps: Some(3200),
            bl_ms: Some(21300),
            rtp_kbps: Some(12000),
        };
        assert_eq!(Cmcd::from_head(&h), want);
        let h = head(concat!(
            "GET /t.m4v?CMCD=bl%3D21300%2Cbr%3D3200%2Cbs%2Ccid%3D%22faec5fc2-ac30-11ea-bb37-0242ac130002%22",
            "%2Cd%3D4004%2Cdl%3D18500%2Cmtp%3D48100%2Cnor%3D%22..%252F300kbps%252Ftrack.m4v%22%2Cnrr%3D%2212323-48763%22",
            "%2Cot%3Dv%2Cpr%3D1.08%2Crtp%3D12000%2Csf%3Dd%2Csid%3D%226e2fb550-c457-11e9-bb97-0800200c9a66%22%2Cst%3Dv%2Csu%2Ctb%3D6141",
            " HTTP/1.1\r\n\r\n"
        ));
        assert_eq!(Cmcd::from_head(&h), want);
        // a quoted string holding commas and `br=` does not leak a key
        let mut c = Cmcd::default();
        c.read("cid=\"a,br=9,b\\\",bl=1\",sid=\"x\",br=800");
        assert_eq!((c.br_kbps, c.bl_ms), (Some(800), None));
        for bad in [
            "",
            ",,,",
            "br",
            "br=",
            "=5",
            "br=-1",
            "br=1e3",
            "\"unterminated,br=5",
        ] {
            let mut c = Cmcd::default();
            c.read(bad);
            assert_eq!(c, Cmcd::default(), "{bad}");
        }
        assert_eq!(
            Cmcd::from_head(&head("GET /t.m4v HTTP/1.1\r\n\r\n")),
            Cmcd::default()
        );
    }

    #[test]
    fn rate_order_is_cmcd_catalog_default() {
        let cat = BitrateCatalog::parse(
            "[bitrates]\n\"/t1/\" = 400\n\"/t1/hd/\" = 3000\n\"/movie.mp4\" = 1000\n",
            false,
        )
        .unwrap();
        assert_eq!(cat.lookup("/t1/hd/00001.m4s"), Some(3000.0));
        assert_eq!(cat.lookup("/t1/sd/00001.m4s"), Some(400.0));
        assert_eq!(cat.lookup("/t10/x"), None);
        assert_eq!(cat.lookup("/movie.mp4"), Some(1000.0));
        assert_eq!(cat.lookup("/a"), None);
        let none = Cmcd::default();
        let r = |c: &Cmcd, p: &str, d| {
            response_rate(c, p, Some(&cat), d).map(|r| (r.bytes_per_s, r.source))
        };
        assert_eq!(
            r(&none, "/t1/hd/1", Some(8.0)),
            Some((375_000.0, RateSource::Catalog))
        );
        assert_eq!(
            r(&none, "/other", Some(8.0)),
            Some((1000.0, RateSource::Default))
        );
        assert_eq!(r(&none, "/other", None), None);
        let cmcd = Cmcd {
            br_kbps: Some(800),
            bl_ms: Some(1500),
            rtp_kbps: Some(2000),
        };
        let got = response_rate(&cmcd, "/t1/hd/1", Some(&cat), Some(8.0)).unwrap();
        assert_eq!(got.bytes_per_s, 100_000.0);
        assert_eq!(got.source, RateSource::Cmcd);
        assert_eq!(got.client_buffer_s, Some(1.5));
        assert_eq!(got.max_bytes_per_s, Some(250_000));
    }

    #[test]
    fn prefetch_rates_after_cmcd_come_from_the_catalog_then_the_default() {
        let cat = BitrateCatalog::parse("[bitrates]\n\"/t1/sd/\" = 419\n", false).unwrap();
        let h = head("GET /t1/sd/0001.m4s?x=1 HTTP/1.1\r\n\r\n");
        assert_eq!(
            fallback_bitrate_bps(&h, Some(&cat), Some(2095.0)),
            Some(419_000)
        );
        let h = head("GET /t1/%73d/0001.m4s HTTP/1.1\r\n\r\n");
        assert_eq!(fallback_bitrate_bps(&h, Some(&cat), None), Some(419_000));
        let h = head("GET /t2/hd/0001.m4s HTTP/1.1\r\n\r\n");
        assert_eq!(
            fallback_bitrate_bps(&h, Some(&cat), Some(2095.0)),
            Some(2_095_000)
        );
        assert_eq!(fallback_bitrate_bps(&h, Some(&cat), None), None);
        assert_eq!(fallback_bitrate_bps(&h, None, None), None);
    }

    #[test]
    fn catalogs_in_json_and_the_workload_format() {
        let c = BitrateCatalog::parse(r#"{"bitrates": {"/a/": 400}}"#, true).unwrap();
        assert_eq!(c.lookup("/a/b"), Some(400.0));
        assert!(BitrateCatalog::parse(r#"{"bitrates": {"a/": 400}}"#, true)
            .unwrap_err()
            .contains("start with /"));
        assert!(BitrateCatalog::parse("[bitrates]\n\"/a\" = 0\n", false).is_err());
        assert!(BitrateCatalog::parse("[bitrates]\n\"/a\" = \"x\"\n", false).is_err());
        let w = r#"{"layout": "chunked", "request_s": 10, "chunk_s": 10,
            "path_format": "{title}/{rep}/{chunk:05}.m4s",
            "representations": [{"name": "sd", "bitrate_kbps": 419.4304, "request_bytes": 1, "chunk_bytes": 1},
                                {"name": "hd", "bitrate_kbps": 2097.152, "request_bytes": 1, "chunk_bytes": 1}],
            "titles": [{"id": 0, "name": "t00000", "rank": 1, "duration_s": 4,
                        "representations": [{"rep": 0, "content_bytes": 1, "stored_bytes": 1, "files": 1, "requests": 1},
                                            {"rep": 1, "content_bytes": 1, "stored_bytes": 1, "files": 1, "requests": 1}]}]}"#;
        let c = BitrateCatalog::parse(w, true).unwrap();
        assert_eq!(c.lookup("/t00000/sd/00003.m4s"), Some(419.4304));
        assert_eq!(c.lookup("/t00000/hd/00003.m4s"), Some(2097.152));
        let single = w.replace("{title}/{rep}/{chunk:05}.m4s", "{title}/{rep}.mp4");
        let c = BitrateCatalog::parse(&single, true).unwrap();
        assert_eq!(c.lookup("/t00000/hd.mp4"), Some(2097.152));
        assert_eq!(c.lookup("/t00000/sd/1"), None);
    }
}
