//! The planner on values: every range case the server's integration tests
//! check over sockets (`crates/vodlab/tests/serve.rs`), here without them.

use super::*;
use vodlab_http::server::parse_head;

const SIZE: u64 = 10_000;
const MTIME: u64 = 1_700_000_000;

fn file() -> FileMeta {
    FileMeta {
        size: SIZE,
        mtime: Some(MTIME),
        kind: FileKind::Regular,
        key: 0xabcd,
        content_type: "video/mp4",
    }
}

fn content() -> Vec<u8> {
    (0..SIZE).map(|i| b'a' + (i % 26) as u8).collect()
}

fn ctx() -> PlanCtx<'static> {
    PlanCtx {
        keep_alive: true,
        date: "Sun, 22 Nov 2026 08:00:00 GMT",
        conn: 7,
    }
}

fn req(method: &str, extra: &str) -> Head {
    let text = format!("{method} /v.mp4 HTTP/1.1\r\nHost: x\r\n{extra}\r\n");
    parse_head(text.as_bytes()).unwrap().unwrap()
}

fn get(extra: &str) -> ResponsePlan {
    plan(&req("GET", extra), &file(), &ctx())
}

fn header(p: &ResponsePlan, name: &str) -> Option<String> {
    p.head.get(name).map(HeaderValue::to_text)
}

/// The body bytes the executor would send, built from the file's content.
fn render(p: &ResponsePlan, data: &[u8]) -> Vec<u8> {
    let slice = |r: &ByteRange| &data[r.offset as usize..(r.offset + r.len) as usize];
    match &p.body {
        Body::None => Vec::new(),
        Body::Bytes(b) => b.clone(),
        Body::File(r) => slice(r).to_vec(),
        Body::Multipart { parts, closing } => {
            let mut out = Vec::new();
            for part in parts {
                out.extend_from_slice(&part.head);
                out.extend_from_slice(slice(&part.range));
                out.extend_from_slice(b"\r\n");
            }
            out.extend_from_slice(closing);
            out
        }
    }
}

fn content_length(p: &ResponsePlan) -> u64 {
    header(p, "content-length").unwrap().parse().unwrap()
}

#[test]
fn whole_file_without_range() {
    let p = get("");
    assert_eq!((p.status(), p.kind), (200, ResponseKind::Full));
    assert_eq!(header(&p, "content-type").as_deref(), Some("video/mp4"));
    assert_eq!(header(&p, "accept-ranges").as_deref(), Some("bytes"));
    assert_eq!(render(&p, &content()), content());
    assert_eq!(content_length(&p), SIZE);
    assert_eq!((p.offset, p.length), (0, SIZE));
    assert!(p.keep_alive && header(&p, "connection").is_none());
    assert_eq!(header(&p, "etag").as_deref(), Some("\"2710-6553f100\""));
    assert_eq!(
        header(&p, "last-modified").as_deref(),
        Some("Tue, 14 Nov 2023 22:13:20 GMT")
    );
}

#[test]
fn single_ranges() {
    let data = content();
    for (range, first, last) in [
        ("0-499", 0, 499),
        ("9500-", 9500, 9999),
        ("-500", 9500, 9999),
        ("9000-20000", 9000, 9999),
        // overlapping ranges merge into one
        ("0-99,50-199", 0, 199),
    ] {
        let p = get(&format!("Range: bytes={range}\r\n"));
        assert_eq!((p.status(), p.kind), (206, ResponseKind::Range), "{range}");
        assert_eq!(
            header(&p, "content-range"),
            Some(format!("bytes {first}-{last}/10000")),
            "{range}"
        );
        assert_eq!(
            render(&p, &data),
            &data[first as usize..=last as usize],
            "{range}"
        );
        assert_eq!(content_length(&p), last - first + 1);
        assert_eq!((p.offset, p.length), (first, last - first + 1));
    }
}

#[test]
fn unsatisfiable_ranges_are_416() {
    for range in ["20000-", "10000-", "-0"] {
        let p = get(&format!("Range: bytes={range}\r\n"));
        assert_eq!((p.status(), p.kind), (416, ResponseKind::Unsatisfiable));
        assert_eq!(
            header(&p, "content-range").as_deref(),
            Some("bytes */10000")
        );
        assert_eq!(content_length(&p), 0);
        assert_eq!(p.body, Body::None);
        assert!(p.kind.is_error());
    }
}

#[test]
fn malformed_or_excessive_ranges_are_ignored() {
    for range in ["bytes=a-b", "items=0-1", "bytes=5-1"] {
        let p = get(&format!("Range: {range}\r\n"));
        assert_eq!((p.status(), p.kind), (200, ResponseKind::Full), "{range}");
    }
    let many: Vec<String> = (0..17)
        .map(|i| format!("{}-{}", i * 10, i * 10 + 1))
        .collect();
    let p = get(&format!("Range: bytes={}\r\n", many.join(",")));
    assert_eq!(p.status(), 200);
    assert_eq!(content_length(&p), SIZE);
}

#[test]
fn two_ranges_make_a_multipart_body_with_an_exact_length() {
    let data = content();
    let p = get("Range: bytes=0-9,100-109\r\n");
    assert_eq!((p.status(), p.kind), (206, ResponseKind::Multipart));
    let ct = header(&p, "content-type").unwrap();
    let boundary = ct
        .strip_prefix("multipart/byteranges; boundary=")
        .unwrap()
        .to_string();
    let body = String::from_utf8(render(&p, &data)).unwrap();
    assert!(body.starts_with(&format!(
        "--{boundary}\r\nContent-Type: video/mp4\r\nContent-Range: bytes 0-9/10000\r\n\r\nabcdefghij\r\n"
    )));
    assert!(body.contains(&format!(
        "Content-Range: bytes 100-109/10000\r\n\r\n{}\r\n",
        String::from_utf8_lossy(&data[100..110])
    )));
    assert!(body.ends_with(&format!("--{boundary}--\r\n")));
    assert_eq!(content_length(&p), body.len() as u64);
    assert_eq!((p.offset, p.length), (0, 20));
    // the boundary depends on the file and the connection
    let other = plan(
        &req("GET", "Range: bytes=0-9,100-109\r\n"),
        &file(),
        &PlanCtx { conn: 8, ..ctx() },
    );
    assert_ne!(header(&other, "content-type").unwrap(), ct);
}

#[test]
fn if_range_applies_the_range_only_when_the_validator_matches() {
    let tag = file().etag();
    let p = get(&format!("Range: bytes=0-9\r\nIf-Range: {tag}\r\n"));
    assert_eq!((p.status(), content_length(&p)), (206, 10));
    let p = get("Range: bytes=0-9\r\nIf-Range: \"stale\"\r\n");
    assert_eq!((p.status(), content_length(&p)), (200, SIZE));
    let lm = file().last_modified();
    let p = get(&format!("Range: bytes=0-9\r\nIf-Range: {lm}\r\n"));
    assert_eq!(p.status(), 206);
    let earlier =
        httpdate::fmt_http_date(std::time::UNIX_EPOCH + std::time::Duration::from_secs(MTIME - 1));
    let p = get(&format!("Range: bytes=0-9\r\nIf-Range: {earlier}\r\n"));
    assert_eq!(p.status(), 200);
    let p = get("Range: bytes=0-9\r\nIf-Range: not a date\r\n");
    assert_eq!(p.status(), 200);
    // a file without a modification time matches no date
    let no_time = FileMeta {
        mtime: None,
        ..file()
    };
    let p = plan(
        &req("GET", &format!("Range: bytes=0-9\r\nIf-Range: {lm}\r\n")),
        &no_time,
        &ctx(),
    );
    assert_eq!(p.status(), 200);
}

#[test]
fn head_has_the_get_head_and_no_body() {
    for extra in ["", "Range: bytes=0-9\r\n", "Range: bytes=0-9,100-109\r\n"] {
        let g = get(extra);
        let h = plan(&req("HEAD", extra), &file(), &ctx());
        assert_eq!(h.head, g.head, "{extra}");
        assert_eq!(h.body, Body::None);
        assert_eq!((h.offset, h.length), (g.offset, g.length));
    }
    assert_eq!(
        content_length(&plan(&req("HEAD", ""), &file(), &ctx())),
        SIZE
    );
}

#[test]
fn a_file_named_as_a_directory_is_not_found() {
    for target in ["/v.mp4/", "/v.mp4/?x=1", "/v.mp4%2F", "/v.mp4%2f#f"] {
        let h = parse_head(format!("GET {target} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
            .unwrap()
            .unwrap();
        let p = plan(&h, &file(), &ctx());
        assert_eq!((p.status(), p.kind), (404, ResponseKind::Error), "{target}");
    }
    assert!(!names_a_directory("/v.mp4?next=/"));
    assert_eq!(get("").status(), 200);
    // a directory stays 403 with or without the slash
    let dir = FileMeta {
        kind: FileKind::Directory,
        ..file()
    };
    let h = parse_head(b"GET /t1/ HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap()
        .unwrap();
    assert_eq!(plan(&h, &dir, &ctx()).status(), 403);
}

#[test]
fn routing_refuses_without_the_file() {
    let root = Path::new("/srv/v");
    assert!(matches!(
        route(&req("POST", ""), root),
        Route::Refuse(ServeError::Method)
    ));
    assert!(matches!(
        route(&req("GET", "Content-Length: 5\r\n"), root),
        Route::Refuse(ServeError::Body)
    ));
    assert!(matches!(
        route(&req("GET", "Transfer-Encoding: chunked\r\n"), root),
        Route::Refuse(ServeError::Body)
    ));
    assert!(matches!(
        route(&req("GET", "Content-Length: 0\r\n"), root),
        Route::File(p) if p == Path::new("/srv/v/v.mp4")
    ));
    let stats = parse_head(b"GET /vodlab/stats HTTP/1.1\r\n\r\n")
        .unwrap()
        .unwrap();
    assert!(matches!(route(&stats, root), Route::Stats));
    let bad = parse_head(b"GET /../etc/passwd HTTP/1.1\r\n\r\n")
        .unwrap()
        .unwrap();
    assert!(matches!(
        route(&bad, root),
        Route::Refuse(ServeError::Target)
    ));
}

#[test]
fn errors_have_their_status_and_a_text_body() {
    let c = ctx();
    let p = plan_error(&ServeError::NotFound, false, &c);
    assert_eq!((p.status(), p.kind), (404, ResponseKind::Error));
    assert_eq!(p.body, Body::Bytes(b"404 Not Found\n".to_vec()));
    assert_eq!(content_length(&p), 14);
    assert!(p.keep_alive);
    let p = plan_error(&ServeError::Method, false, &c);
    assert_eq!(header(&p, "allow").as_deref(), Some("GET, HEAD"));
    assert_eq!(p.status(), 405);
    let p = plan_error(&ServeError::Body, false, &c);
    assert_eq!(p.status(), 413);
    assert!(!p.keep_alive);
    assert_eq!(header(&p, "connection").as_deref(), Some("close"));
    let p = plan_error(&ServeError::Forbidden, true, &c);
    assert_eq!((p.status(), &p.body), (403, &Body::None));
    // a directory is not served
    let dir = FileMeta {
        kind: FileKind::Directory,
        ..file()
    };
    assert_eq!(plan(&req("GET", ""), &dir, &c).status(), 403);
    let p = plan_error(
        &ServeError::Exhausted(std::io::Error::from_raw_os_error(libc::EMFILE)),
        false,
        &c,
    );
    assert_eq!(p.status(), 503);
}

#[test]
fn connection_close_when_not_kept_alive() {
    let p = plan(
        &req("GET", ""),
        &file(),
        &PlanCtx {
            keep_alive: false,
            ..ctx()
        },
    );
    assert!(!p.keep_alive);
    assert_eq!(header(&p, "connection").as_deref(), Some("close"));
}

#[test]
fn encoded_head_is_what_the_server_wrote_before() {
    let p = get("Range: bytes=0-499\r\n");
    let mut out = Vec::new();
    encode_head(&p, &mut out);
    let text = String::from_utf8(out).unwrap();
    assert_eq!(
        text,
        format!(
            "HTTP/1.1 206 Partial Content\r\nServer: vodlab\r\nDate: {}\r\nLast-Modified: Tue, 14 Nov 2023 22:13:20 GMT\r\nETag: \"2710-6553f100\"\r\nAccept-Ranges: bytes\r\nContent-Type: video/mp4\r\nContent-Length: 500\r\nContent-Range: bytes 0-499/10000\r\n\r\n",
            ctx().date
        )
    );
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// For any range header and file size, the planned Content-Length is
        /// the rendered body's length, and every byte of a 206 comes from
        /// inside the file.
        #[test]
        fn content_length_matches_the_body(
            specs in proptest::collection::vec((0u64..3000, 0u64..3000, 0u8..3), 1..6),
            size in 0u64..2500,
        ) {
            let set: Vec<String> = specs.iter().map(|&(a, b, k)| match k {
                0 => format!("{}-{}", a.min(b), a.max(b)),
                1 => format!("{a}-"),
                _ => format!("-{b}"),
            }).collect();
            let f = FileMeta { size, ..file() };
            let data: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
            let p = plan(&req("GET", &format!("Range: bytes={}\r\n", set.join(","))), &f, &ctx());
            let body = render(&p, &data);
            prop_assert_eq!(content_length(&p), if p.status() == 416 { 0 } else { body.len() as u64 });
            prop_assert_eq!(p.body.wire_len(), body.len() as u64);
            prop_assert!(p.offset + p.length <= size);
            prop_assert!(matches!(p.status(), 200 | 206 | 416));
        }
    }
}
