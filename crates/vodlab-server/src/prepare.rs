//! The prelude of every response, one for both front ends: route the
//! request, open its file, plan the response ([`crate::plan`]), count it,
//! read the request's CMCD once ([`vodlab_cmcd`]) and decide its bit rate
//! once (CMCD `br`, else the catalog, else the default:
//! [`crate::bitrate::request_bitrate`]) for the prefetch controller and,
//! when the front end paces the response, the pacer. The HTTP/1.1
//! connection (`conn`), the HTTP/2 stream (`h2`) and the HTTP/3 stream
//! (`h3`) only execute the
//! [`Prepared`] response on their transport.
//!
//! The decisions are pure functions of the request, the file's metadata
//! and the settings ([`plan::route`], [`plan::plan`],
//! [`catalog_path`], [`crate::bitrate::request_bitrate`], [`pace_of`]);
//! [`prepare`] adds the file system (open), the statistics page's
//! snapshot, the error log and the counters.

use std::fs::File;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use vodlab_cmcd::Cmcd;
use vodlab_http::server::{Head, HeaderValue};
use vodlab_prefetch::next_object;

use crate::access::count;
use crate::asap::{FileCtx, NextObject};
use vodlab_cmcd::cmsd::{DYNAMIC, STATIC};

use crate::bitrate::{request_bitrate, response_rate, Bitrate, RateSource, ResponseRate};
use crate::cmsd::{etp_kbps, headers, CmsdSettings, Load, Object};
use crate::config::IoMode;
use crate::plan::{self, Body, PlanCtx, ResponseKind, ResponsePlan, Route};
use crate::request::resolve_target;
use crate::state::State;

/// What the front end answering a request tells the prelude.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FrontEnd {
    /// The connection's number (the log's, the multipart boundary's seed).
    pub(crate) conn: u64,
    /// Whether the connection may stay open after the response.
    pub(crate) keep_alive: bool,
    /// Whether this transport can pace a file body in the configured pace
    /// mode (HTTP/1.1: not user mode over TLS; HTTP/2: user mode only).
    pub(crate) can_pace: bool,
    /// When the request's head arrived (CMSD's `rd` counts from it).
    pub(crate) arrived: Instant,
    /// Whether the response advertises HTTP/3 (`Alt-Svc`) when the server
    /// serves it: the TCP front ends (HTTP/1.1, HTTP/2), not HTTP/3 itself.
    pub(crate) alt_svc: bool,
}

/// The file a response is sent from.
#[derive(Debug)]
pub(crate) struct OpenFile {
    pub(crate) file: Arc<File>,
    /// Identity (device and inode).
    pub(crate) key: u64,
    pub(crate) size: u64,
}

/// A response ready to execute.
#[derive(Debug)]
pub(crate) struct Prepared {
    /// What to send.
    pub(crate) plan: ResponsePlan,
    /// The file, when the request named one that opened.
    pub(crate) file: Option<OpenFile>,
    /// The request's bit rate (with its file).
    pub(crate) bitrate: Option<Bitrate>,
    /// The rate a paced file body is sent at; `None`: unpaced.
    pub(crate) pace: Option<ResponseRate>,
    /// The request's CMCD (empty without a file; for the access log).
    pub(crate) cmcd: Cmcd,
    /// The next objects the request's CMCD names, to prefetch after the
    /// response (`--prefetch-next-object`; see [`next_objects`]).
    pub(crate) next: Vec<NextObject>,
}

/// The next objects a request to `target` names in its CMCD, resolved
/// against the target ([`next_object::resolve`]) and routed under `root`
/// as a request for them would be ([`resolve_target`]: percent-decoded,
/// `..` and NUL refused); the request's own object is left out, and any
/// after the first [`next_object::MAX_PER_REQUEST`]. `nrr` applies when
/// one object is named. Pure.
pub(crate) fn next_objects(root: &Path, target: &str, cmcd: &Cmcd) -> Vec<NextObject> {
    let own = resolve_target(root, target);
    let range = match cmcd.nor.len() {
        1 => cmcd.nrr.as_deref().and_then(next_object::nrr_range),
        _ => None,
    };
    cmcd.nor
        .iter()
        .map(|nor| NextObject {
            path: next_object::resolve(target, nor).and_then(|t| resolve_target(root, &t)),
            range,
        })
        .filter(|n| n.path.is_none() || n.path != own)
        .take(next_object::MAX_PER_REQUEST)
        .collect()
}

impl Prepared {
    /// What the range executors need of the file (`None` without one).
    pub(crate) fn file_ctx<'a>(&'a self, head: &'a Head) -> Option<FileCtx<'a>> {
        self.file.as_ref().map(|f| FileCtx {
            file: &f.file,
            key: f.key,
            size: f.size,
            head,
            bitrate_bps: self.bitrate.map(Bitrate::bps),
        })
    }
}

/// Whether a response is paced, and at what rate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Pace {
    /// Not paced: pacing is off, the body is not one range of a file, or
    /// the transport cannot pace it.
    Off,
    /// Paced at this rate.
    At(ResponseRate),
    /// To be paced, but nothing gave a bit rate (counted, sent unpaced).
    NoRate,
}

/// Decides a response's pacing: `paced` is the server's setting, `can_pace`
/// the transport's ([`FrontEnd::can_pace`]). Pure.
pub(crate) fn pace_of(
    paced: bool,
    can_pace: bool,
    plan: &ResponsePlan,
    bitrate: Option<Bitrate>,
    cmcd: &Cmcd,
    policy: (&crate::pacer::PacePolicy, f64),
) -> Pace {
    if !(paced && can_pace && matches!(plan.body, Body::File(_))) {
        return Pace::Off;
    }
    match bitrate {
        Some(b) => Pace::At(response_rate(b, cmcd, policy.0, policy.1)),
        None => Pace::NoRate,
    }
}

/// The catalog's key of a file: its path under the root, from `/` (the
/// request's path decoded and normalised by [`plan::route`]). Pure.
pub(crate) fn catalog_path(root: &Path, file: &Path) -> String {
    file.strip_prefix(root)
        .map(|r| format!("/{}", r.to_string_lossy()))
        .unwrap_or_default()
}

/// Adds `CMSD-Static` and `CMSD-Dynamic` to a response with a file
/// ([`crate::cmsd::headers`]), from the server's counters and the time
/// since the request's head arrived.
fn write_cmsd(
    st: &State,
    c: &CmsdSettings,
    plan: &mut ResponsePlan,
    path: &str,
    cmcd: &Cmcd,
    bitrate: Option<Bitrate>,
    arrived: Instant,
) {
    let open = st.counters.open.load(Ordering::Relaxed);
    let bytes = st.counters.bytes.load(Ordering::Relaxed);
    let load = Load {
        etp_kbps: etp_kbps(bytes, st.started.elapsed().as_secs_f64(), open),
        rd_ms: arrived.elapsed().as_millis() as u64,
        open_connections: open,
    };
    let obj = Object {
        path,
        cmcd,
        br_kbps: bitrate
            .filter(|b| b.source != RateSource::Default)
            .map(|b| b.kbps),
    };
    let (s, d) = headers(c, obj, load);
    plan.head.push(STATIC, s);
    plan.head.push(DYNAMIC, d);
}

/// Routes, opens, plans and counts one request, and decides its bit rate
/// and pacing (see the module note).
pub(crate) fn prepare(st: &State, head: &Head, fe: FrontEnd) -> Prepared {
    let is_head = head.method == "HEAD";
    let date = st.date();
    let ctx = PlanCtx {
        keep_alive: fe.keep_alive,
        date: &date,
        conn: fe.conn,
    };
    let mut file = None;
    let mut cmcd = Cmcd::default();
    let mut bitrate = None;
    let mut catalog_key = String::new();
    let mut next = Vec::new();
    let mut plan = match plan::route(head, &st.root.path) {
        Route::Refuse(e) => plan::plan_error(&e, is_head, &ctx),
        Route::Stats => {
            let json = serde_json::to_string_pretty(&st.stats()).expect("stats") + "\n";
            plan::plan_stats(json, is_head, &ctx)
        }
        Route::File(path) => match st.root.open_file(&path) {
            Ok((f, meta)) => {
                cmcd = Cmcd::from_request(&head.target, |name| head.header(name));
                catalog_key = catalog_path(&st.root.path, &path);
                if st.cfg.io == IoMode::Asap && st.cfg.next_object_bytes.is_some() {
                    next = next_objects(&st.root.path, &head.target, &cmcd);
                }
                bitrate = request_bitrate(
                    &cmcd,
                    &catalog_key,
                    st.bitrates.as_ref(),
                    st.cfg.default_bitrate_kbps,
                );
                file = Some(OpenFile {
                    file: Arc::new(f),
                    key: meta.key,
                    size: meta.size,
                });
                plan::plan(head, &meta, &ctx)
            }
            Err(e) => {
                if e.is_server_side() {
                    st.log_error(&format_args!("{}: {e}", path.display()));
                }
                plan::plan_error(&e, is_head, &ctx)
            }
        },
    };
    if let Some(c) = &st.cfg.cmsd {
        if matches!(
            plan.kind,
            ResponseKind::Full | ResponseKind::Range | ResponseKind::Multipart
        ) {
            write_cmsd(st, c, &mut plan, &catalog_key, &cmcd, bitrate, fe.arrived);
        }
    }
    if let (true, Some(v)) = (fe.alt_svc, &st.alt_svc) {
        plan.head
            .headers
            .push(("Alt-Svc".into(), HeaderValue::Text(v.clone().into())));
    }
    count(st, &plan);
    let policy = (&st.cfg.pace_policy, st.cfg.pace_factor());
    let pace = match pace_of(st.cfg.paced(), fe.can_pace, &plan, bitrate, &cmcd, policy) {
        Pace::At(rate) => Some(rate),
        Pace::Off => None,
        Pace::NoRate => {
            st.pacing.counters.no_rate.fetch_add(1, Ordering::Relaxed);
            None
        }
    };
    Prepared {
        plan,
        file,
        bitrate,
        pace,
        cmcd,
        next,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pacer::PacePolicy;
    use crate::plan::{FileKind, FileMeta};
    use std::path::PathBuf;

    fn head(text: &str) -> Head {
        vodlab_http::server::parse_head(text.as_bytes())
            .unwrap()
            .unwrap()
    }

    fn plan_of(h: &Head) -> ResponsePlan {
        let meta = FileMeta {
            size: 1000,
            mtime: Some(1),
            kind: FileKind::Regular,
            key: 7,
            content_type: "video/mp4",
        };
        let ctx = PlanCtx {
            keep_alive: true,
            date: "Sun, 22 Nov 2026 13:00:00 GMT",
            conn: 1,
        };
        plan::plan(h, &meta, &ctx)
    }

    #[test]
    fn catalog_paths_are_decoded_and_normalised_under_the_root() {
        let root = Path::new("/srv/v");
        for (target, want) in [
            ("/t1/sd/0001.m4s?x=1", "/t1/sd/0001.m4s"),
            ("/t1/%73d/0001.m4s", "/t1/sd/0001.m4s"),
            ("/t1//sd/./0001.m4s", "/t1/sd/0001.m4s"),
            ("/a%20b.mp4", "/a b.mp4"),
        ] {
            let Route::File(p) =
                plan::route(&head(&format!("GET {target} HTTP/1.1\r\n\r\n")), root)
            else {
                panic!("{target}: not a file");
            };
            assert_eq!(catalog_path(root, &p), want, "{target}");
        }
    }

    #[test]
    fn next_objects_are_routed_under_the_root() {
        let root = Path::new("/srv/v");
        let of = |target: &str, req: &str| {
            let h = head(&format!("GET {target} HTTP/1.1\r\n{req}\r\n"));
            let cmcd = Cmcd::from_request(&h.target, |n| h.header(n));
            next_objects(root, &h.target, &cmcd)
        };
        let p = |s: &str| Some(PathBuf::from(s));
        let n = of("/t1/sd/0004.m4s", "CMCD-Request: nor=\"0005.m4s\"\r\n");
        assert_eq!(
            n,
            vec![NextObject {
                path: p("/srv/v/t1/sd/0005.m4s"),
                range: None
            }]
        );
        // the query form, with a range; percent-decoding as for a request
        let n = of(
            "/t1/sd/0004.m4s?CMCD=nor%3D%22..%2Fhd%2F0005.m4s%22%2Cnrr%3D%220-99%22",
            "",
        );
        assert_eq!(
            n,
            vec![NextObject {
                path: p("/srv/v/t1/hd/0005.m4s"),
                range: Some((0, Some(100)))
            }]
        );
        let n = of("/t1/sd/0004.m4s", "CMCD-Request: nor=\"a%20b.m4s\"\r\n");
        assert_eq!(n[0].path, p("/srv/v/t1/sd/a b.m4s"));
        // out of the root: named, refused
        let n = of("/t1/0004.m4s", "CMCD-Request: nor=\"../../x\"\r\n");
        assert_eq!(
            n,
            vec![NextObject {
                path: None,
                range: None
            }]
        );
        let n = of("/t1/0004.m4s", "CMCD-Request: nor=\"%2e%2e/%2e%2e/x\"\r\n");
        assert_eq!(n[0].path, None);
        // the request's own object, and none at all
        assert!(of("/t1/0004.m4s", "CMCD-Request: nor=\"0004.m4s\"\r\n").is_empty());
        assert!(of("/t1/0004.m4s", "CMCD-Request: bl=100\r\n").is_empty());
        // v2: several, nrr ignored
        let n = of(
            "/t/1.m4s",
            "CMCD-Request: nor=(\"2.m4s\" \"3.m4s\"),nrr=\"0-9\"\r\n",
        );
        assert_eq!(
            n.iter()
                .map(|n| (n.path.clone(), n.range))
                .collect::<Vec<_>>(),
            vec![(p("/srv/v/t/2.m4s"), None), (p("/srv/v/t/3.m4s"), None)]
        );
    }

    #[test]
    fn at_most_a_few_next_objects_per_request() {
        let list: Vec<String> = (0..10).map(|k| format!("\"{k}.m4s\"")).collect();
        let h = head(&format!(
            "GET /t/x.m4s HTTP/1.1\r\nCMCD-Request: nor=({})\r\n\r\n",
            list.join(" ")
        ));
        let cmcd = Cmcd::from_request(&h.target, |n| h.header(n));
        assert_eq!(cmcd.nor.len(), 10);
        let n = next_objects(Path::new("/r"), &h.target, &cmcd);
        assert_eq!(n.len(), next_object::MAX_PER_REQUEST);
    }

    #[test]
    fn only_one_range_of_a_file_is_paced_where_the_transport_can() {
        let h = head("GET /v.mp4 HTTP/1.1\r\nCMCD-Object: br=800\r\nCMCD-Request: bl=1500\r\n\r\n");
        let cmcd = Cmcd::from_request(&h.target, |n| h.header(n));
        let rate = request_bitrate(&cmcd, "/v.mp4", None, None);
        assert_eq!(rate.map(Bitrate::bps), Some(800_000));
        let whole = plan_of(&h);
        let want = Pace::At(ResponseRate {
            top_bytes_per_s: None,
            factor: 1.0,
            bytes_per_s: 100_000.0,
            client_buffer_s: Some(1.5),
            max_bytes_per_s: None,
            source: RateSource::Cmcd,
        });
        assert_eq!(
            pace_of(true, true, &whole, rate, &cmcd, (&PacePolicy::Fixed, 1.0)),
            want
        );
        assert_eq!(
            pace_of(false, true, &whole, rate, &cmcd, (&PacePolicy::Fixed, 1.0)),
            Pace::Off
        );
        assert_eq!(
            pace_of(true, false, &whole, rate, &cmcd, (&PacePolicy::Fixed, 1.0)),
            Pace::Off
        );
        assert_eq!(
            pace_of(true, true, &whole, None, &cmcd, (&PacePolicy::Fixed, 1.0)),
            Pace::NoRate
        );
        // HEAD (no body) and multipart bodies are not paced
        let h = head("HEAD /v.mp4 HTTP/1.1\r\n\r\n");
        assert_eq!(
            pace_of(
                true,
                true,
                &plan_of(&h),
                rate,
                &cmcd,
                (&PacePolicy::Fixed, 1.0)
            ),
            Pace::Off
        );
        let h = head("GET /v.mp4 HTTP/1.1\r\nRange: bytes=0-1,5-9\r\n\r\n");
        assert_eq!(
            pace_of(
                true,
                true,
                &plan_of(&h),
                rate,
                &cmcd,
                (&PacePolicy::Fixed, 1.0)
            ),
            Pace::Off
        );
        let h = head("GET /v.mp4 HTTP/1.1\r\nRange: bytes=10-\r\n\r\n");
        assert_eq!(
            pace_of(
                true,
                true,
                &plan_of(&h),
                rate,
                &cmcd,
                (&PacePolicy::Fixed, 1.0)
            ),
            want
        );
    }
}
