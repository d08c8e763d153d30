//! Where a request's bit rate comes from, in this order: the client's CMCD
//! (CTA-5004, parsed once per request by [`vodlab_cmcd`]: `br` encoded bit
//! rate in kbit/s, `bl` buffer length in ms, `rtp` requested maximum
//! throughput in kbit/s), then a catalog file ([`BitrateCatalog`]), then a
//! default. [`request_bitrate`] decides it once per request
//! (`crate::prepare`), for the prefetch controllers
//! ([`Bitrate::bps`]) and the pacer ([`response_rate`]) alike. Pure: the
//! catalog is read once at start.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use thiserror::Error;
pub use vodlab_cmcd::Cmcd;

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
    /// The ladder's top bit rate, bytes per second (CMCD `tb`).
    pub top_bytes_per_s: Option<f64>,
    /// The multiple of `bytes_per_s` to pace at: the server's K, or what
    /// its pace policy made of the client's reports
    /// ([`crate::pacer::PacePolicy`]).
    pub factor: f64,
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

/// A request's content bit rate and where it came from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bitrate {
    /// kbit/s.
    pub kbps: f64,
    /// Where it came from.
    pub source: RateSource,
}

impl Bitrate {
    /// Bits per second, as the prefetch controllers take it.
    pub fn bps(self) -> u64 {
        (self.kbps * 1000.0).round() as u64
    }
}

/// Decides a request's bit rate: CMCD `br` (a `br` of 0 is none), else the
/// catalog's entry for `path` (the decoded path under the root, from `/`),
/// else `default_kbps`; `None` when none gives one.
pub fn request_bitrate(
    cmcd: &Cmcd,
    path: &str,
    catalog: Option<&BitrateCatalog>,
    default_kbps: Option<f64>,
) -> Option<Bitrate> {
    let (kbps, source) = if let Some(br) = cmcd.br.filter(|&b| b > 0) {
        (br as f64, RateSource::Cmcd)
    } else if let Some(k) = catalog.and_then(|c| c.lookup(path)) {
        (k, RateSource::Catalog)
    } else {
        (default_kbps?, RateSource::Default)
    };
    Some(Bitrate { kbps, source })
}

/// What a response of the request is paced by: its bit rate, and the
/// client's CMCD `bl`, `rtp` and `tb` (an `rtp` or `tb` of 0 is none)
/// whatever gave the rate, at the multiple `policy` gives for the
/// server's `k`.
pub fn response_rate(
    rate: Bitrate,
    cmcd: &Cmcd,
    policy: &crate::pacer::PacePolicy,
    k: f64,
) -> ResponseRate {
    let mut r = ResponseRate {
        bytes_per_s: rate.kbps * 125.0,
        client_buffer_s: cmcd.bl.map(|ms| ms as f64 / 1000.0),
        max_bytes_per_s: cmcd.rtp.filter(|&k| k > 0).map(|k| k.saturating_mul(125)),
        top_bytes_per_s: cmcd.tb.filter(|&k| k > 0).map(|k| k as f64 * 125.0),
        factor: k,
        source: rate.source,
    };
    r.factor = policy.factor(
        k,
        &crate::pacer::Reports {
            bitrate: r.bytes_per_s,
            top: r.top_bytes_per_s,
            buffer: r.client_buffer_s,
            requested: r.max_bytes_per_s.map(|v| v as f64),
        },
    );
    r
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
    use crate::pacer::PacePolicy;
    use vodlab_http::server::Head;

    fn head(text: &str) -> Head {
        vodlab_http::server::parse_head(text.as_bytes())
            .unwrap()
            .unwrap()
    }

    /// The request's CMCD as the server reads it (`crate::prepare`).
    fn cmcd(h: &Head) -> Cmcd {
        Cmcd::from_request(&h.target, |n| h.header(n))
    }

    fn paced(h: &Head) -> Option<ResponseRate> {
        let c = cmcd(h);
        request_bitrate(&c, "/v.mp4", None, None)
            .map(|r| response_rate(r, &c, &PacePolicy::Fixed, 1.0))
    }

    #[test]
    fn cmcd_keys_from_headers_and_query() {
        let h = head(
            "GET /v.mp4 HTTP/1.1\r\nCMCD-Object: br=3200,d=4004,ot=v\r\nCMCD-Request: bl=21300,mtp=25400,rtp=15000,su\r\n\r\n",
        );
        assert_eq!(
            paced(&h),
            Some(ResponseRate {
                top_bytes_per_s: None,
                factor: 1.0,
                bytes_per_s: 400_000.0,
                client_buffer_s: Some(21.3),
                max_bytes_per_s: Some(1_875_000),
                source: RateSource::Cmcd,
            })
        );
        let h = head("GET /v.mp4?x=1&CMCD=bl%3D500%2Cbr%3D800%2Cot%3Dv HTTP/1.1\r\n\r\n");
        let r = paced(&h).unwrap();
        assert_eq!(
            (r.bytes_per_s, r.client_buffer_s, r.max_bytes_per_s),
            (100_000.0, Some(0.5), None)
        );
        // the header wins over the query for the same key
        let h = head("GET /v.mp4?CMCD=br%3D800 HTTP/1.1\r\nCMCD-Object: br=100\r\n\r\n");
        assert_eq!(paced(&h).unwrap().bytes_per_s, 12_500.0);
        // br belongs in CMCD-Object, but is heard from any CMCD header
        let h = head("GET /v.mp4 HTTP/1.1\r\nCMCD-Request: br=100\r\n\r\n");
        assert_eq!(paced(&h).unwrap().bytes_per_s, 12_500.0);
        // malformed, zero and string values give no rate
        let h = head("GET /v HTTP/1.1\r\nCMCD-Object: br=fast,br=0,cid=\"x=1\"\r\nCMCD-Status: rtp=0\r\n\r\n");
        assert_eq!(paced(&h), None);
        let c = cmcd(&h);
        let r = response_rate(
            request_bitrate(&c, "/v", None, Some(8.0)).unwrap(),
            &c,
            &PacePolicy::Fixed,
            1.0,
        );
        assert_eq!((r.source, r.max_bytes_per_s), (RateSource::Default, None));
    }

    /// The CMCD examples of CTA-5004 (section 4: all keys as headers, and
    /// as one query parameter) give the same rate; a request without CMCD
    /// gives none.
    #[test]
    fn cmcd_of_the_spec_examples() {
        let h = head(concat!(
            "GET /t.m4v HTTP/1.1\r\n",
            "CMCD-Request: bl=21300,dl=18500,mtp=48100,nor=\"..%2F300kbps%2Ftrack.m4v\",nrr=\"12323-48763\",su\r\n",
            "CMCD-Object: br=3200,d=4004,ot=v,tb=6141\r\n",
            "CMCD-Status: bs,rtp=12000\r\n",
            "CMCD-Session: cid=\"faec5fc2-ac30-11ea-bb37-0242ac130002\",pr=1.08,sf=d,sid=\"6e2fb550-c457-11e9-bb97-0800200c9a66\",st=v\r\n\r\n"
        ));
        let want = Some(ResponseRate {
            // tb=6141 kbit/s
            top_bytes_per_s: Some(767_625.0),
            factor: 1.0,
            bytes_per_s: 400_000.0,
            client_buffer_s: Some(21.3),
            max_bytes_per_s: Some(1_500_000),
            source: RateSource::Cmcd,
        });
        assert_eq!(paced(&h), want);
        let h = head(concat!(
            "GET /t.m4v?CMCD=bl%3D21300%2Cbr%3D3200%2Cbs%2Ccid%3D%22faec5fc2-ac30-11ea-bb37-0242ac130002%22",
            "%2Cd%3D4004%2Cdl%3D18500%2Cmtp%3D48100%2Cnor%3D%22..%252F300kbps%252Ftrack.m4v%22%2Cnrr%3D%2212323-48763%22",
            "%2Cot%3Dv%2Cpr%3D1.08%2Crtp%3D12000%2Csf%3Dd%2Csid%3D%226e2fb550-c457-11e9-bb97-0800200c9a66%22%2Cst%3Dv%2Csu%2Ctb%3D6141",
            " HTTP/1.1\r\n\r\n"
        ));
        assert_eq!(paced(&h), want);
        assert_eq!(paced(&head("GET /t.m4v HTTP/1.1\r\n\r\n")), None);
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
            request_bitrate(c, p, Some(&cat), d).map(|r| {
                (
                    response_rate(r, c, &PacePolicy::Fixed, 1.0).bytes_per_s,
                    r.bps(),
                    r.source,
                )
            })
        };
        assert_eq!(
            r(&none, "/t1/hd/1", Some(8.0)),
            Some((375_000.0, 3_000_000, RateSource::Catalog))
        );
        assert_eq!(
            r(&none, "/other", Some(8.0)),
            Some((1000.0, 8000, RateSource::Default))
        );
        assert_eq!(r(&none, "/other", None), None);
        let cmcd = Cmcd {
            br: Some(800),
            bl: Some(1500),
            rtp: Some(2000),
            ..Cmcd::default()
        };
        let rate = request_bitrate(&cmcd, "/t1/hd/1", Some(&cat), Some(8.0)).unwrap();
        assert_eq!(rate.bps(), 800_000);
        let got = response_rate(rate, &cmcd, &PacePolicy::Fixed, 1.0);
        assert_eq!(got.bytes_per_s, 100_000.0);
        assert_eq!(got.source, RateSource::Cmcd);
        assert_eq!(got.client_buffer_s, Some(1.5));
        assert_eq!(got.max_bytes_per_s, Some(250_000));
        // a fractional catalog rate: bits per second rounded for the
        // controllers, exact bytes per second for the pacer
        let cat = BitrateCatalog::parse("[bitrates]\n\"/t1/sd/\" = 419.4304\n", false).unwrap();
        let rate = request_bitrate(&none, "/t1/sd/0001.m4s", Some(&cat), Some(2095.0)).unwrap();
        assert_eq!(rate.bps(), 419_430);
        assert!(
            (response_rate(rate, &none, &PacePolicy::Fixed, 1.0).bytes_per_s - 52_428.8).abs()
                < 1e-9
        );
        let rate = request_bitrate(&none, "/t2/hd/0001.m4s", Some(&cat), Some(2095.0)).unwrap();
        assert_eq!((rate.bps(), rate.source), (2_095_000, RateSource::Default));
        assert_eq!(
            request_bitrate(&none, "/t2/hd/0001.m4s", Some(&cat), None),
            None
        );
        assert_eq!(request_bitrate(&none, "/t2/hd/0001.m4s", None, None), None);
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
