//! Property tests of the response decoder: any valid response, cut into any
//! feeds, decodes to the same head, body and consumed total as when fed at
//! once; pipelined responses decode one after another; arbitrary bytes
//! never panic.

use proptest::prelude::*;
use proptest::sample::Index;
use vodlab_http::client::{DecodeError, Decoded, Framing, ResponseDecoder, ResponseHead, Version};

/// How the generated response delimits its body.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Frame {
    Length,
    Chunked,
    Close,
}

#[derive(Debug, Clone)]
struct Resp {
    interim: Vec<u16>,
    status: u16,
    http10: bool,
    connection: Option<&'static str>,
    frame: Frame,
    head_request: bool,
    body: Vec<u8>,
    chunk_sizes: Vec<usize>,
    extensions: bool,
    trailers: bool,
    extra_headers: usize,
}

/// What a correct decoder must report, derived from the generator's
/// choices (not from the decoder).
#[derive(Debug)]
struct Expected {
    status: u16,
    framing: Framing,
    content_length: Option<u64>,
    content_range: Option<(u64, u64, Option<u64>)>,
    keep_alive: bool,
    header_bytes: u64,
    interim: u32,
    body: Vec<u8>,
}

fn resp() -> impl Strategy<Value = Resp> {
    (
        prop::collection::vec(prop::sample::select(vec![100u16, 102, 103]), 0..3),
        prop::sample::select(vec![200u16, 206, 204, 304]),
        any::<bool>(),
        prop::sample::select(vec![
            None,
            Some("close"),
            Some("keep-alive"),
            Some("Keep-Alive, Foo"),
        ]),
        prop::sample::select(vec![Frame::Length, Frame::Chunked, Frame::Close]),
        prop::bool::weighted(0.15),
        prop::collection::vec(any::<u8>(), 0..1500),
        prop::collection::vec(1usize..400, 1..8),
        any::<bool>(),
        any::<bool>(),
        0usize..6,
    )
        .prop_map(
            |(
                interim,
                status,
                http10,
                connection,
                frame,
                head_request,
                body,
                chunk_sizes,
                extensions,
                trailers,
                extra_headers,
            )| Resp {
                interim,
                status,
                http10,
                connection,
                frame,
                head_request,
                body,
                chunk_sizes,
                extensions,
                trailers,
                extra_headers,
            },
        )
}

/// The response's bytes and what decoding them must give.
fn build(r: &Resp) -> (Vec<u8>, Expected) {
    let version = if r.http10 { "HTTP/1.0" } else { "HTTP/1.1" };
    let mut wire = Vec::new();
    for s in &r.interim {
        wire.extend_from_slice(format!("HTTP/1.1 {s} Interim\r\nX-I: 1\r\n\r\n").as_bytes());
    }
    wire.extend_from_slice(format!("{version} {} Whatever\r\n", r.status).as_bytes());
    for i in 0..r.extra_headers {
        wire.extend_from_slice(format!("X-Extra-{i}: some value {i}\r\n").as_bytes());
    }
    let no_body = r.head_request || r.status == 204 || r.status == 304;
    let len = r.body.len() as u64;
    let mut content_range = None;
    if r.status == 206 && len > 0 {
        wire.extend_from_slice(
            format!("Content-Range: bytes 10-{}/*\r\n", 10 + len - 1).as_bytes(),
        );
        content_range = Some((10, 10 + len - 1, None));
    }
    let mut content_length = None;
    match r.frame {
        Frame::Length => {
            wire.extend_from_slice(format!("Content-Length: {len}\r\n").as_bytes());
            content_length = Some(len);
        }
        Frame::Chunked => wire.extend_from_slice(b"Transfer-Encoding: chunked\r\n"),
        Frame::Close => {}
    }
    if let Some(c) = r.connection {
        wire.extend_from_slice(format!("Connection: {c}\r\n").as_bytes());
    }
    wire.extend_from_slice(b"\r\n");
    let header_bytes = wire.len() as u64;
    let framing = match (no_body, r.frame) {
        (true, _) => Framing::Empty,
        (false, Frame::Length) => Framing::Length(len),
        (false, Frame::Chunked) => Framing::Chunked,
        (false, Frame::Close) => Framing::UntilClose,
    };
    let mut keep_alive = match r.connection {
        Some("close") => false,
        Some(_) => true,
        None => !r.http10,
    };
    if (r.frame == Frame::Chunked && r.http10) || framing == Framing::UntilClose {
        keep_alive = false;
    }
    if !no_body {
        match r.frame {
            Frame::Length | Frame::Close => wire.extend_from_slice(&r.body),
            Frame::Chunked => {
                let mut rest = r.body.as_slice();
                let mut sizes = r.chunk_sizes.iter().cycle();
                while !rest.is_empty() {
                    let n = (*sizes.next().unwrap()).min(rest.len());
                    let ext = if r.extensions { ";ext=\"v\"" } else { "" };
                    wire.extend_from_slice(format!("{n:x}{ext}\r\n").as_bytes());
                    wire.extend_from_slice(&rest[..n]);
                    wire.extend_from_slice(b"\r\n");
                    rest = &rest[n..];
                }
                wire.extend_from_slice(b"0\r\n");
                if r.trailers {
                    wire.extend_from_slice(b"X-Trailer: t\r\nX-Sum: 1\r\n");
                }
                wire.extend_from_slice(b"\r\n");
            }
        }
    }
    let expected = Expected {
        status: r.status,
        framing,
        content_length,
        content_range,
        keep_alive,
        header_bytes,
        interim: r.interim.len() as u32,
        body: if no_body { Vec::new() } else { r.body.clone() },
    };
    (wire, expected)
}

/// What one decode gave: head, body rebuilt from offsets, bytes consumed.
#[derive(Debug, PartialEq)]
struct Outcome {
    head: ResponseHead,
    body: Vec<u8>,
    consumed: usize,
}

/// Decodes one response from `wire` arriving cut at `cuts` the way a
/// connection would: keep what was not consumed, append what arrives, feed
/// again. Calls `eof` when the stream ends before completion. Returns the
/// outcome and the unconsumed rest.
fn decode_split(
    wire: &[u8],
    cuts: &[usize],
    head_request: bool,
    eof_at_end: bool,
) -> Result<(Outcome, Vec<u8>), DecodeError> {
    let mut dec = ResponseDecoder::new(head_request);
    let mut pending: Vec<u8> = Vec::new();
    let mut body: Vec<u8> = Vec::new();
    let mut consumed = 0;
    let mut bounds: Vec<usize> = cuts.to_vec();
    bounds.push(wire.len());
    let mut from = 0;
    let mut done = false;
    for &to in &bounds {
        pending.extend_from_slice(&wire[from..to]);
        from = to;
        let p = dec.feed(&pending, &mut |off: u64, b: &[u8]| {
            assert_eq!(off, body.len() as u64, "offsets follow each other");
            body.extend_from_slice(b);
        })?;
        assert!(p.consumed <= pending.len());
        consumed += p.consumed;
        pending.drain(..p.consumed);
        if p.state == Decoded::Complete {
            assert!(dec.is_complete());
            done = true;
            break;
        }
    }
    pending.extend_from_slice(&wire[from..]);
    if !done && eof_at_end {
        dec.eof()?;
    }
    assert!(dec.is_complete(), "response completes");
    assert_eq!(dec.body_bytes(), body.len() as u64);
    let head = *dec.head().expect("head decoded");
    Ok((
        Outcome {
            head,
            body,
            consumed,
        },
        pending,
    ))
}

fn cut_points(len: usize, picks: &[Index]) -> Vec<usize> {
    let mut v: Vec<usize> = picks.iter().map(|i| i.index(len + 1)).collect();
    v.sort_unstable();
    v
}

fn check(out: &Outcome, exp: &Expected, http10: bool) {
    let h = &out.head;
    assert_eq!(h.status, exp.status);
    assert_eq!(
        h.version,
        if http10 {
            Version::Http10
        } else {
            Version::Http11
        }
    );
    assert_eq!(h.framing, exp.framing);
    assert_eq!(h.content_length, exp.content_length);
    assert_eq!(h.content_range, exp.content_range);
    assert_eq!(h.keep_alive, exp.keep_alive);
    assert_eq!(h.header_bytes, exp.header_bytes);
    assert_eq!(h.interim, exp.interim);
    assert_eq!(out.body, exp.body);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn any_split_decodes_like_one_feed(
        r in resp(),
        picks in prop::collection::vec(any::<Index>(), 0..12),
    ) {
        let (mut wire, exp) = build(&r);
        let close = exp.framing == Framing::UntilClose;
        let len = wire.len();
        if !close {
            // a following response's first bytes must stay unconsumed
            wire.extend_from_slice(b"HTTP/1.1 200");
        }
        let whole = decode_split(&wire, &[], r.head_request, close).expect("decodes at once");
        check(&whole.0, &exp, r.http10);
        prop_assert_eq!(whole.0.consumed, len);
        let cuts = cut_points(wire.len(), &picks);
        let split = decode_split(&wire, &cuts, r.head_request, close).expect("decodes in pieces");
        prop_assert_eq!(&split.0, &whole.0);
        prop_assert_eq!(split.1.as_slice(), &wire[len..]);
    }

    #[test]
    fn pipelined_responses_decode_in_turn(
        a in resp(),
        b in resp(),
        picks in prop::collection::vec(any::<Index>(), 0..6),
    ) {
        // a close-delimited body cannot be followed by anything
        let a = Resp { frame: if a.frame == Frame::Close { Frame::Length } else { a.frame }, ..a };
        let (wa, ea) = build(&a);
        let (wb, eb) = build(&b);
        let mut wire = wa.clone();
        wire.extend_from_slice(&wb);
        let cuts = cut_points(wire.len(), &picks);
        let (first, rest) = decode_split(&wire, &cuts, a.head_request, false).expect("first");
        check(&first, &ea, a.http10);
        prop_assert_eq!(first.consumed, wa.len());
        prop_assert_eq!(rest.as_slice(), wb.as_slice());
        let close = eb.framing == Framing::UntilClose;
        let (second, rest) = decode_split(&rest, &[], b.head_request, close).expect("second");
        check(&second, &eb, b.http10);
        prop_assert_eq!(second.consumed, wb.len());
        prop_assert!(rest.is_empty());
    }

    #[test]
    fn arbitrary_bytes_never_panic(
        bytes in prop::collection::vec(any::<u8>(), 0..600),
        picks in prop::collection::vec(any::<Index>(), 0..8),
        prefix in prop::sample::select(vec![
            "",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
            "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n",
            "HTTP/1.1 100 Continue\r\n\r\n",
            "HTTP/1.1 200 OK\r\n",
        ]),
        head_request: bool,
    ) {
        let mut wire = prefix.as_bytes().to_vec();
        wire.extend_from_slice(&bytes);
        let cuts = cut_points(wire.len(), &picks);
        // in pieces or at once: the same outcome
        let whole = decode_split_lenient(&wire, &[], head_request);
        let split = decode_split_lenient(&wire, &cuts, head_request);
        match (&whole, &split) {
            (Ok(a), Ok(b)) => {
                prop_assert_eq!(a, b);
                prop_assert!(a.2 <= wire.len());
            }
            (Err(e), Err(_)) => prop_assert!(!e.to_string().is_empty()),
            _ => prop_assert!(false, "whole {:?} but split {:?}", whole, split),
        }
    }

    #[test]
    fn chunked_bodies_with_garbage_after_any_chunk_fail_cleanly(
        body in prop::collection::vec(any::<u8>(), 1..300),
        junk in prop::collection::vec(any::<u8>(), 1..8),
        at in any::<Index>(),
    ) {
        // a valid chunked response with bytes inserted somewhere in its
        // framing is either still decodable or a typed error, never a panic
        let r = Resp {
            interim: vec![], status: 200, http10: false, connection: None,
            frame: Frame::Chunked, head_request: false, body, chunk_sizes: vec![7, 50],
            extensions: false, trailers: true, extra_headers: 0,
        };
        let (mut wire, _) = build(&r);
        let i = at.index(wire.len());
        wire.splice(i..i, junk);
        let _ = decode_split_lenient(&wire, &[], false);
    }
}

/// Like `decode_split` but for arbitrary input: errors are returned, an
/// unfinished response ends with `eof`. Returns the head, the body and the
/// bytes consumed.
fn decode_split_lenient(
    wire: &[u8],
    cuts: &[usize],
    head_request: bool,
) -> Result<(ResponseHead, Vec<u8>, usize), DecodeError> {
    let mut dec = ResponseDecoder::new(head_request);
    let mut pending = Vec::new();
    let mut body = Vec::new();
    let mut consumed = 0;
    let mut from = 0;
    let mut bounds = cuts.to_vec();
    bounds.push(wire.len());
    for &to in &bounds {
        pending.extend_from_slice(&wire[from..to]);
        from = to;
        let p = dec.feed(&pending, &mut |off: u64, b: &[u8]| {
            assert_eq!(off, body.len() as u64);
            body.extend_from_slice(b);
        })?;
        assert!(p.consumed <= pending.len());
        consumed += p.consumed;
        pending.drain(..p.consumed);
        if p.state == Decoded::Complete {
            break;
        }
    }
    if !dec.is_complete() {
        dec.eof()?;
    }
    Ok((*dec.head().expect("complete means a head"), body, consumed))
}
