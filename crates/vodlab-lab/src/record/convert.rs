//! The recording's conversion: the browser script's JSON
//! ([`RawRecording`]) into the requests to the server ([`recorded`]) and a
//! vodlab session replaying them ([`session`]); pure.

use serde::{Deserialize, Serialize};
use vodlab_workload::script::{ByteRange, Request, Session, SessionHeader, Wait};

/// Per-request timeout written into the session script, seconds.
const TIMEOUT_S: f64 = 30.0;

/// One request as the browser script reports it.
#[derive(Debug, Clone, Deserialize)]
pub struct RawRequest {
    /// Absolute URL.
    pub url: String,
    /// `Range` header value, when sent.
    #[serde(default)]
    pub range: Option<String>,
    /// DevTools monotonic time the request was issued, seconds.
    pub t_s: f64,
    /// HTTP status.
    #[serde(default)]
    pub status: Option<u16>,
    /// Body bytes received.
    #[serde(default)]
    pub body_bytes: Option<u64>,
    /// DevTools time the load finished or failed, seconds.
    #[serde(default)]
    pub end_s: Option<f64>,
    /// Failure text (a cancelled request: dash.js abandoned it).
    #[serde(default)]
    pub failed: Option<String>,
    /// The request's `CMCD-*` header lines as the player sent them
    /// (`Name: value`; dash.js with `--cmcd header`), none empty.
    #[serde(default)]
    pub cmcd_headers: Vec<String>,
    /// The protocol Chromium says the response came over (DevTools'
    /// `Response.protocol`: `http/1.1`, `h2`, `h3`); absent when no
    /// response arrived.
    #[serde(default)]
    pub protocol: Option<String>,
}

/// What the browser script writes.
#[derive(Debug, Clone, Deserialize)]
pub struct RawRecording {
    /// Chromium's version string.
    pub chromium: String,
    /// Requests in issue order.
    pub requests: Vec<RawRequest>,
    /// The player's metrics (switches, stalls, buffer levels, errors).
    pub metrics: serde_json::Value,
    /// Console messages of the page.
    #[serde(default)]
    pub console: Vec<String>,
}

/// One recorded request, relative to the first.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Recorded {
    /// URL path (and query) on the server.
    pub path: String,
    /// Byte range asked for.
    pub range: Option<(u64, Option<u64>)>,
    /// Issue time after the first request, ms (rounded to µs).
    pub offset_ms: f64,
    /// Issue to last byte (or failure), ms.
    pub duration_ms: Option<f64>,
    /// Body bytes received.
    pub bytes: Option<u64>,
    /// HTTP status.
    pub status: Option<u16>,
    /// Failure (e.g. cancelled by the player).
    pub failed: Option<String>,
    /// The `CMCD-*` header lines the player sent (`Name: value`), replayed
    /// as written; CMCD in the query stays in `path`.
    pub cmcd_headers: Vec<String>,
    /// The protocol of the response, as Chromium reports it (`http/1.1`,
    /// `h2`, `h3`).
    pub protocol: Option<String>,
}

impl Recorded {
    /// The request carried CMCD: `CMCD-*` headers or a `CMCD` query
    /// parameter.
    pub fn has_cmcd(&self) -> bool {
        !self.cmcd_headers.is_empty()
            || self.path.split_once('?').is_some_and(|(_, q)| {
                q.split('&')
                    .any(|p| p.split('=').next().unwrap_or("") == "CMCD")
            })
    }
}

/// Parses a `Range` header value `bytes=A-B` or `bytes=A-`.
pub fn parse_range(v: &str) -> Option<(u64, Option<u64>)> {
    let (a, b) = v.trim().strip_prefix("bytes=")?.split_once('-')?;
    let a = a.trim().parse().ok()?;
    let b = b.trim();
    if b.is_empty() {
        Some((a, None))
    } else {
        let b: u64 = b.parse().ok()?;
        (b >= a).then_some((a, Some(b)))
    }
}

/// The requests to `origin` (`http://HOST:PORT`) in issue order, timed from
/// the first; requests elsewhere are left out.
pub fn recorded(raw: &RawRecording, origin: &str) -> Vec<Recorded> {
    let mut reqs: Vec<&RawRequest> = raw
        .requests
        .iter()
        .filter(|r| r.url.starts_with(origin))
        .collect();
    reqs.sort_by(|a, b| a.t_s.total_cmp(&b.t_s));
    let Some(t0) = reqs.first().map(|r| r.t_s) else {
        return Vec::new();
    };
    let us = |s: f64| (s * 1e6).round() / 1e3;
    reqs.iter()
        .map(|r| {
            let path = &r.url[origin.len()..];
            Recorded {
                path: if path.starts_with('/') {
                    path.to_string()
                } else {
                    format!("/{path}")
                },
                range: r.range.as_deref().and_then(parse_range),
                offset_ms: us(r.t_s - t0),
                duration_ms: r.end_s.map(|e| us(e - r.t_s)),
                bytes: r.body_bytes,
                status: r.status,
                failed: r.failed.clone(),
                cmcd_headers: r
                    .cmcd_headers
                    .iter()
                    .filter(|h| {
                        h.split_once(':').is_some_and(|(n, v)| {
                            n.trim().to_ascii_lowercase().starts_with("cmcd")
                                && !v.trim().is_empty()
                                && !h.contains(['\r', '\n'])
                        })
                    })
                    .cloned()
                    .collect(),
                protocol: r.protocol.clone(),
            }
        })
        .collect()
}

/// One vodlab session replaying `rec`: each request paced at its recorded
/// offset after the previous one (`pacing=`), with its recorded range and
/// `CMCD-*` headers (its query, CMCD's included, is in its path).
pub fn session(rec: &[Recorded], title: Option<&str>) -> Session {
    let requests = rec
        .iter()
        .enumerate()
        .map(|(i, r)| Request {
            path: r.path.clone(),
            range: r.range.map(|(start, end)| ByteRange { start, end }),
            timeout_s: Some(TIMEOUT_S),
            headers: r.cmcd_headers.clone(),
            wait: if i == 0 {
                Wait::None
            } else {
                // from the offsets, so rounding never accumulates
                Wait::Pacing(
                    (((r.offset_ms * 1e3).round() - (rec[i - 1].offset_ms * 1e3).round()) / 1e6)
                        .max(0.0),
                )
            },
            ..Request::get(r.path.clone())
        })
        .collect();
    Session {
        header: SessionHeader {
            id: Some(0),
            title: title.map(str::to_string),
            ..Default::default()
        },
        requests,
    }
}

/// The title of an MPD path `/{title}/manifest.mpd`.
pub fn title_of(mpd: &str) -> Option<&str> {
    let mut parts = mpd.trim_start_matches('/').split('/');
    let t = parts.next()?;
    parts.next().map(|_| t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use vodlab_workload::script::parse_script;
    use vodlab_workload::script::{export_h2load, write_vodlab, Script};

    fn raw(reqs: &[(&str, Option<&str>, f64)]) -> RawRecording {
        RawRecording {
            chromium: "test".into(),
            requests: reqs
                .iter()
                .map(|(u, r, t)| RawRequest {
                    url: u.to_string(),
                    range: r.map(str::to_string),
                    t_s: *t,
                    status: Some(200),
                    body_bytes: Some(1000),
                    end_s: Some(t + 0.5),
                    failed: None,
                    cmcd_headers: vec![],
                    protocol: None,
                })
                .collect(),
            metrics: serde_json::json!({}),
            console: vec![],
        }
    }

    #[test]
    fn ranges_parse_or_are_refused() {
        assert_eq!(parse_range("bytes=0-99"), Some((0, Some(99))));
        assert_eq!(parse_range("bytes=100-"), Some((100, None)));
        assert_eq!(parse_range("bytes=9-3"), None);
        assert_eq!(parse_range("items=0-1"), None);
        assert_eq!(parse_range("bytes=a-1"), None);
    }

    #[test]
    fn requests_become_a_paced_script_at_their_offsets() {
        let o = "http://127.0.0.1:9";
        // out of order, one elsewhere
        let r = raw(&[
            ("http://127.0.0.1:9/t/v/00000.m4s", None, 100.25),
            ("http://127.0.0.1:9/t/manifest.mpd", None, 100.0),
            (
                "http://127.0.0.1:9/t/a/00000.m4s",
                Some("bytes=10-19"),
                100.2504,
            ),
            ("http://example.invalid/x", None, 100.1),
            ("http://127.0.0.1:9/t/v/00001.m4s", None, 104.0),
        ]);
        let rec = recorded(&r, o);
        let paths: Vec<&str> = rec.iter().map(|r| r.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "/t/manifest.mpd",
                "/t/v/00000.m4s",
                "/t/a/00000.m4s",
                "/t/v/00001.m4s"
            ]
        );
        assert_eq!(rec[2].range, Some((10, Some(19))));
        assert!((rec[3].offset_ms - 4000.0).abs() < 1e-9);
        assert_eq!(rec[0].duration_ms, Some(500.0));
        let s = session(&rec, title_of("/t/manifest.mpd"));
        assert_eq!(s.header.title.as_deref(), Some("t"));
        // written and read back: the pacing sums give back every offset
        let text = write_vodlab(&Script {
            sessions: vec![s.clone()],
        });
        let back = parse_script(&text).unwrap();
        let mut t = 0.0;
        for (i, q) in back.sessions[0].requests.iter().enumerate() {
            if let Wait::Pacing(p) = q.wait {
                t += p * 1e3;
            }
            assert!((t - rec[i].offset_ms).abs() < 1e-6, "{i}: {t} {text}");
            assert_eq!(q.path, rec[i].path);
        }
        assert_eq!(
            back.sessions[0].requests[2].range,
            Some(ByteRange {
                start: 10,
                end: Some(19)
            })
        );
        // h2load: one line a request at the offsets
        let h2 = export_h2load(&s).0;
        let offs: Vec<f64> = h2
            .lines()
            .map(|l| l.split('\t').next().unwrap().parse().unwrap())
            .collect();
        assert_eq!(offs.len(), 4);
        assert!((offs[1] - 250.0).abs() < 1e-3 && (offs[3] - 4000.0).abs() < 1e-3);
    }

    #[test]
    fn cmcd_headers_and_query_are_kept_and_replayed_as_sent() {
        let o = "http://127.0.0.1:9";
        let mut r = raw(&[
            (
                "http://127.0.0.1:9/t/manifest.mpd?CMCD=ot%3Dm%2Csid%3D%22s%22",
                None,
                1.0,
            ),
            ("http://127.0.0.1:9/t/v/00000.m4s", None, 1.5),
            ("http://127.0.0.1:9/t/v/00001.m4s", None, 2.0),
        ]);
        r.requests[1].cmcd_headers = vec![
            "CMCD-Object: br=800,d=4000,ot=v".into(),
            "CMCD-Request: bl=0,nor=\"00001.m4s\",su".into(),
            "CMCD-Status: ".into(),
            "X-Other: 1".into(),
        ];
        let rec = recorded(&r, o);
        assert!(rec[0].has_cmcd() && rec[1].has_cmcd() && !rec[2].has_cmcd());
        // an empty header and a header that is not CMCD's are left out
        assert_eq!(
            rec[1].cmcd_headers,
            [
                "CMCD-Object: br=800,d=4000,ot=v",
                "CMCD-Request: bl=0,nor=\"00001.m4s\",su"
            ]
        );
        let s = session(&rec, title_of("/t/manifest.mpd"));
        let text = write_vodlab(&Script {
            sessions: vec![s.clone()],
        });
        let back = parse_script(&text).unwrap();
        let q = &back.sessions[0].requests;
        assert_eq!(q[0].path, "/t/manifest.mpd?CMCD=ot%3Dm%2Csid%3D%22s%22");
        assert_eq!(q[1].headers, rec[1].cmcd_headers, "{text}");
        assert!(q[2].headers.is_empty());
    }
}
