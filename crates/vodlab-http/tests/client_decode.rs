//! The response decoder on byte slices: every framing, interim responses,
//! limits and every typed error.

use vodlab_http::client::{
    parse_content_range, DecodeError, Decoded, Framing, Progress, ResponseDecoder, ResponseHead,
    Version, MAX_CHUNK_LINE, MAX_HEADERS, MAX_HEAD_BYTES,
};

/// Feeds `wire` in one piece; returns progress, the body (checking that
/// offsets are contiguous) and the decoder.
fn one(
    wire: &[u8],
    head_request: bool,
) -> (Result<Progress, DecodeError>, Vec<u8>, ResponseDecoder) {
    let mut dec = ResponseDecoder::new(head_request);
    let mut body = Vec::new();
    let r = dec.feed(wire, &mut |off: u64, b: &[u8]| {
        assert_eq!(off, body.len() as u64, "body offsets are contiguous");
        body.extend_from_slice(b);
    });
    (r, body, dec)
}

fn complete(wire: &[u8], head_request: bool) -> (ResponseHead, Vec<u8>, usize) {
    let (r, body, dec) = one(wire, head_request);
    let p = r.expect("decodes");
    assert_eq!(p.state, Decoded::Complete, "complete");
    assert_eq!(dec.body_bytes(), body.len() as u64);
    (*dec.head().expect("head"), body, p.consumed)
}

fn error(wire: &[u8]) -> DecodeError {
    one(wire, false).0.expect_err("must fail")
}

#[test]
fn content_length_body() {
    let wire = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nServer: x\r\n\r\nhello";
    let (h, body, n) = complete(wire, false);
    assert_eq!(body, b"hello");
    assert_eq!(n, wire.len());
    assert_eq!(h.status, 200);
    assert_eq!(h.version, Version::Http11);
    assert_eq!(h.framing, Framing::Length(5));
    assert_eq!(h.content_length, Some(5));
    assert_eq!(h.header_bytes, (wire.len() - 5) as u64);
    assert!(h.keep_alive);
    assert_eq!(h.interim, 0);
}

#[test]
fn zero_length_body_completes_at_once() {
    let wire = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
    let (h, body, n) = complete(wire, false);
    assert_eq!(
        (h.framing, body.len(), n),
        (Framing::Length(0), 0, wire.len())
    );
}

#[test]
fn partial_206_with_content_range() {
    let wire =
        b"HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 100-104/5000\r\nContent-Length: 5\r\n\r\nabcde";
    let (h, body, _) = complete(wire, false);
    assert_eq!(h.status, 206);
    assert_eq!(h.content_range, Some((100, 104, Some(5000))));
    assert_eq!(body, b"abcde");
}

#[test]
fn content_range_parser() {
    assert_eq!(
        parse_content_range("bytes 0-99/1000"),
        Some((0, 99, Some(1000)))
    );
    assert_eq!(parse_content_range("bytes 5-9/*"), Some((5, 9, None)));
    assert_eq!(
        parse_content_range("  bytes 5-9/10 "),
        Some((5, 9, Some(10)))
    );
    assert_eq!(parse_content_range("items 0-1/2"), None);
    assert_eq!(
        parse_content_range("Bytes 0-0/1"),
        Some((0, 0, Some(1))),
        "units are case-insensitive"
    );
    assert_eq!(
        parse_content_range("bytes 0-1/2x"),
        None,
        "junk after total"
    );
    assert_eq!(parse_content_range("bytes 0 - 1/2"), None);
    assert_eq!(parse_content_range("bytes */1000"), None);
    assert_eq!(
        parse_content_range("bytes 9-5/10"),
        None,
        "first after last"
    );
    assert_eq!(
        parse_content_range("bytes 5-10/10"),
        None,
        "last beyond total"
    );
    assert_eq!(
        parse_content_range("bytes +5-9/10"),
        None,
        "signs are not digits"
    );
    assert_eq!(parse_content_range("bytes0-1/2"), None);
    assert_eq!(parse_content_range("bytes 0-99999999999999999999/*"), None);
}

#[test]
fn invalid_content_range_is_none_not_an_error() {
    let wire =
        b"HTTP/1.1 206 Partial Content\r\nContent-Range: bytes x-y/z\r\nContent-Length: 1\r\n\r\na";
    let (h, _, _) = complete(wire, false);
    assert_eq!(h.content_range, None);
}

#[test]
fn chunked_with_extensions_and_trailers() {
    let wire = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\
        5;name=value\r\nhello\r\n\
        1A ; a=\"b c\"\r\nabcdefghijklmnopqrstuvwxyz\r\n\
        0\r\nX-Checksum: 1234\r\nX-Other:\tv\r\n\r\nNEXT";
    let (h, body, n) = complete(wire, false);
    assert_eq!(h.framing, Framing::Chunked);
    assert!(h.keep_alive);
    assert_eq!(body, b"helloabcdefghijklmnopqrstuvwxyz");
    assert_eq!(&wire[n..], b"NEXT", "stops at the end of the response");
}

#[test]
fn chunked_errors() {
    let pre = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
    for (body, what) in [
        ("zz\r\n", "non-hex size"),
        ("\r\n", "empty size"),
        ("-5\r\n", "signed size"),
        ("5 x\r\nhello\r\n0\r\n\r\n", "junk after size"),
        ("5\r\nhelloXX0\r\n\r\n", "no CRLF after data"),
        ("5\r\nhello\n0\r\n\r\n", "LF only after data"),
        ("5\nhello\r\n0\r\n\r\n", "bare LF after size"),
        (
            "5;a\x01b\r\nhello\r\n0\r\n\r\n",
            "control byte in extension",
        ),
        ("11111111111111111\r\n", "size over 64 bits"),
        ("0\r\nnot a field\r\n\r\n", "trailer without colon"),
        ("0\r\n: empty name\r\n\r\n", "trailer with empty name"),
    ] {
        let e = error(format!("{pre}{body}").as_bytes());
        assert!(matches!(e, DecodeError::Malformed(_)), "{what}: {e:?}");
    }
}

#[test]
fn chunk_size_line_is_bounded() {
    let mut wire = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;".to_vec();
    wire.resize(wire.len() + MAX_CHUNK_LINE, b'a');
    assert!(matches!(error(&wire), DecodeError::Malformed(m) if m.contains("chunk-size line")));
    // just under the bound it waits for more
    let mut wire = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;".to_vec();
    let head = wire.len() - 2;
    wire.resize(head + MAX_CHUNK_LINE - 1, b'a');
    let (r, _, _) = one(&wire, false);
    assert_eq!(
        r.unwrap(),
        Progress {
            consumed: head,
            state: Decoded::NeedMore
        }
    );
}

#[test]
fn trailer_section_is_bounded() {
    let mut wire = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n".to_vec();
    while wire.len() < 2 * MAX_HEAD_BYTES {
        wire.extend_from_slice(b"X-T: 0123456789\r\n");
    }
    assert_eq!(error(&wire), DecodeError::HeaderTooLarge);
}

#[test]
fn close_delimited_body() {
    let wire = b"HTTP/1.1 200 OK\r\nConnection: keep-alive\r\n\r\nsome bytes";
    let mut dec = ResponseDecoder::new(false);
    let mut body = Vec::new();
    let p = dec
        .feed(wire, &mut |_: u64, b: &[u8]| body.extend_from_slice(b))
        .unwrap();
    assert_eq!(
        p,
        Progress {
            consumed: wire.len(),
            state: Decoded::NeedMore
        }
    );
    let p = dec.feed(b" more", &mut |off: u64, b: &[u8]| {
        assert_eq!(off, 10);
        body.extend_from_slice(b)
    });
    assert_eq!(p.unwrap().consumed, 5);
    assert!(!dec.is_complete());
    dec.eof().expect("end of stream ends the body");
    assert!(dec.is_complete());
    let h = dec.head().unwrap();
    assert_eq!(h.framing, Framing::UntilClose);
    assert!(
        !h.keep_alive,
        "a close-delimited body closes the connection"
    );
    assert_eq!(body, b"some bytes more");
    assert_eq!(dec.body_bytes(), 15);
}

#[test]
fn head_response_has_no_body() {
    let wire = b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\nHTTP/1.1 200 OK";
    let (h, body, n) = complete(wire, true);
    assert_eq!(h.framing, Framing::Empty);
    assert_eq!(h.content_length, Some(1000));
    assert!(body.is_empty());
    assert_eq!(&wire[n..], b"HTTP/1.1 200 OK");
    assert!(h.keep_alive, "HEAD without length is not close-delimited");
    // the same bytes as a GET response wait for 1000 body bytes
    let (r, _, _) = one(wire, false);
    assert_eq!(r.unwrap().state, Decoded::NeedMore);
    // a HEAD response without Content-Length keeps the connection too
    let (h, _, _) = complete(b"HTTP/1.1 200 OK\r\n\r\n", true);
    assert!(h.keep_alive);
}

#[test]
fn no_body_for_204_and_304() {
    for status in [204, 304] {
        let wire = format!("HTTP/1.1 {status} X\r\nContent-Length: 10\r\n\r\nrest");
        let (h, body, n) = complete(wire.as_bytes(), false);
        assert_eq!((h.status, h.framing), (status, Framing::Empty));
        assert!(body.is_empty());
        assert_eq!(&wire.as_bytes()[n..], b"rest");
        assert!(h.keep_alive);
    }
}

#[test]
fn interim_responses_are_skipped() {
    let wire = b"HTTP/1.1 100 Continue\r\n\r\n\
        HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n\
        HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
    let (h, body, n) = complete(wire, false);
    assert_eq!(h.status, 200);
    assert_eq!(h.interim, 2);
    assert_eq!(
        h.header_bytes,
        (wire.len() - 2) as u64,
        "interim heads count as header bytes"
    );
    assert_eq!(body, b"ok");
    assert_eq!(n, wire.len());
}

#[test]
fn interim_head_is_consumed_before_the_final_one_arrives() {
    let mut dec = ResponseDecoder::new(false);
    let first = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 2";
    let p = dec
        .feed(first, &mut |_: u64, _: &[u8]| panic!("no body"))
        .unwrap();
    assert_eq!(
        p,
        Progress {
            consumed: 25,
            state: Decoded::NeedMore
        }
    );
    assert!(dec.head().is_none());
    assert!(dec.received_any());
    assert_eq!(dec.eof(), Err(DecodeError::ClosedInHead));
}

#[test]
fn switching_protocols_is_unsupported() {
    let e = error(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n\r\n");
    assert!(matches!(e, DecodeError::Unsupported(m) if m.contains("101")));
}

#[test]
fn status_below_100_is_malformed() {
    assert!(matches!(
        error(b"HTTP/1.1 099 What\r\n\r\n"),
        DecodeError::Malformed(_)
    ));
}

#[test]
fn keep_alive_rules() {
    let ka = |wire: &str| complete(wire.as_bytes(), false).0.keep_alive;
    assert!(ka("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"));
    assert!(!ka(
        "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
    ));
    assert!(!ka(
        "HTTP/1.1 200 OK\r\nConnection: Upgrade, CLOSE\r\nContent-Length: 0\r\n\r\n"
    ));
    assert!(
        !ka("HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n"),
        "1.0 closes by default"
    );
    assert!(ka(
        "HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 0\r\n\r\n"
    ));
    assert!(!ka(
        "HTTP/1.0 200 OK\r\nConnection: keep-alive, close\r\nContent-Length: 0\r\n\r\n"
    ));
    assert!(
        ka("HTTP/1.1 200 OK\r\nConnection: not-close\r\nContent-Length: 0\r\n\r\n"),
        "tokens, not substrings"
    );
    let (h, _, _) = complete(b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n", false);
    assert_eq!(h.version, Version::Http10);
}

#[test]
fn transfer_encoding_wins_over_content_length_and_closes() {
    let wire = b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n";
    let (h, body, n) = complete(wire, false);
    assert_eq!(h.framing, Framing::Chunked);
    assert_eq!(body, b"abc");
    assert_eq!(n, wire.len());
    assert!(!h.keep_alive);
    // HTTP/1.0 with Transfer-Encoding: decoded, then closed
    let wire =
        b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n";
    assert!(!complete(wire, false).0.keep_alive);
}

#[test]
fn transfer_codings_other_than_chunked_are_refused() {
    for te in ["gzip", "gzip, chunked", "chunked, gzip", "identity"] {
        let wire = format!("HTTP/1.1 200 OK\r\nTransfer-Encoding: {te}\r\n\r\n");
        assert!(
            matches!(error(wire.as_bytes()), DecodeError::Unsupported(_)),
            "{te}"
        );
    }
    for te in ["chunked, chunked", ""] {
        let wire = format!("HTTP/1.1 200 OK\r\nTransfer-Encoding: {te}\r\n\r\n");
        assert!(
            matches!(error(wire.as_bytes()), DecodeError::Malformed(_)),
            "`{te}`"
        );
    }
    // split over two fields: still chunked twice
    let wire =
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n";
    assert!(matches!(error(wire), DecodeError::Malformed(_)));
}

#[test]
fn content_length_errors() {
    for v in [
        "abc",
        "-1",
        "+5",
        "1 2",
        "",
        "99999999999999999999999",
        "5,",
    ] {
        let wire = format!("HTTP/1.1 200 OK\r\nContent-Length: {v}\r\n\r\n");
        assert!(
            matches!(error(wire.as_bytes()), DecodeError::InvalidContentLength(_)),
            "`{v}`"
        );
    }
    let wire = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n";
    assert_eq!(error(wire), DecodeError::ConflictingContentLength(5, 6));
    assert_eq!(
        error(b"HTTP/1.1 200 OK\r\nContent-Length: 5, 7\r\n\r\n"),
        DecodeError::ConflictingContentLength(5, 7)
    );
    // identical duplicates are one value
    let (h, body, _) = complete(
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2, 2\r\n\r\nab",
        false,
    );
    assert_eq!((h.content_length, body.as_slice()), (Some(2), &b"ab"[..]));
}

#[test]
fn many_headers_within_the_limit_work() {
    let mut wire = b"HTTP/1.1 200 OK\r\n".to_vec();
    for i in 0..MAX_HEADERS - 1 {
        wire.extend_from_slice(format!("X-Header-{i}: value {i}\r\n").as_bytes());
    }
    wire.extend_from_slice(b"Content-Length: 1\r\n\r\nz");
    let (h, body, _) = complete(&wire, false);
    assert_eq!((h.status, body.as_slice()), (200, &b"z"[..]));
}

#[test]
fn too_many_headers_is_header_too_large() {
    let mut wire = b"HTTP/1.1 200 OK\r\n".to_vec();
    for i in 0..=MAX_HEADERS {
        wire.extend_from_slice(format!("X-H{i}: v\r\n").as_bytes());
    }
    wire.extend_from_slice(b"\r\n");
    assert_eq!(error(&wire), DecodeError::HeaderTooLarge);
}

#[test]
fn head_over_64k_is_header_too_large() {
    let mut wire = b"HTTP/1.1 200 OK\r\nX-Big: ".to_vec();
    wire.resize(MAX_HEAD_BYTES, b'a');
    assert_eq!(error(&wire), DecodeError::HeaderTooLarge);
    // a complete head just under the limit is fine
    let mut wire = b"HTTP/1.1 200 OK\r\nX-Big: ".to_vec();
    let tail = b"\r\nContent-Length: 0\r\n\r\n";
    wire.resize(MAX_HEAD_BYTES - tail.len(), b'a');
    wire.extend_from_slice(tail);
    assert_eq!(complete(&wire, false).0.header_bytes, MAX_HEAD_BYTES as u64);
}

#[test]
fn incomplete_head_consumes_nothing() {
    let wire = b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc";
    let mut dec = ResponseDecoder::new(false);
    let mut body = Vec::new();
    for cut in 1..wire.len() - 3 {
        let p = dec
            .feed(&wire[..cut], &mut |_: u64, _: &[u8]| panic!("no body yet"))
            .unwrap();
        assert_eq!(
            p,
            Progress {
                consumed: 0,
                state: Decoded::NeedMore
            },
            "cut at {cut}"
        );
    }
    let p = dec
        .feed(wire, &mut |_: u64, b: &[u8]| body.extend_from_slice(b))
        .unwrap();
    assert_eq!(
        p,
        Progress {
            consumed: wire.len(),
            state: Decoded::Complete
        }
    );
    assert_eq!(body, b"abc");
}

#[test]
fn eof_errors_say_where_the_response_was_cut() {
    let mut dec = ResponseDecoder::new(false);
    assert!(!dec.received_any());
    assert_eq!(dec.eof(), Err(DecodeError::ClosedBeforeResponse));

    let mut dec = ResponseDecoder::new(false);
    dec.feed(b"HTTP/1.1 20", &mut |_: u64, _: &[u8]| {})
        .unwrap();
    assert_eq!(dec.eof(), Err(DecodeError::ClosedInHead));

    let mut dec = ResponseDecoder::new(false);
    dec.feed(
        b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabcd",
        &mut |_: u64, _: &[u8]| {},
    )
    .unwrap();
    let e = dec.eof().unwrap_err();
    assert_eq!(
        e,
        DecodeError::ShortBody {
            got: 4,
            expected: Some(10)
        }
    );
    assert_eq!(e.to_string(), "connection closed after 4 body bytes of 10");

    let mut dec = ResponseDecoder::new(false);
    dec.feed(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nabcd\r\n",
        &mut |_: u64, _: &[u8]| {},
    )
    .unwrap();
    assert_eq!(
        dec.eof(),
        Err(DecodeError::ShortBody {
            got: 4,
            expected: None
        })
    );

    // after a complete response, end of stream is fine
    let mut dec = ResponseDecoder::new(false);
    dec.feed(
        b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
        &mut |_: u64, _: &[u8]| {},
    )
    .unwrap();
    assert_eq!(dec.eof(), Ok(()));
}

#[test]
fn errors_stick() {
    let mut dec = ResponseDecoder::new(false);
    let e = dec
        .feed(b"garbage\r\n\r\n", &mut |_: u64, _: &[u8]| {})
        .unwrap_err();
    assert!(matches!(e, DecodeError::Malformed(_)));
    let again = dec
        .feed(
            b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
            &mut |_: u64, _: &[u8]| {},
        )
        .unwrap_err();
    assert_eq!(again, e);
    assert_eq!(dec.eof(), Err(e));
}

#[test]
fn complete_decoder_consumes_nothing_more() {
    let mut dec = ResponseDecoder::new(false);
    dec.feed(
        b"HTTP/1.1 204 No Content\r\n\r\n",
        &mut |_: u64, _: &[u8]| {},
    )
    .unwrap();
    let p = dec
        .feed(b"HTTP/1.1 200 OK\r\n", &mut |_: u64, _: &[u8]| {})
        .unwrap();
    assert_eq!(
        p,
        Progress {
            consumed: 0,
            state: Decoded::Complete
        }
    );
}

#[test]
fn chunk_delimiter_split_after_cr_waits() {
    let head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab\r";
    let mut dec = ResponseDecoder::new(false);
    let p = dec.feed(head, &mut |_: u64, _: &[u8]| {}).unwrap();
    assert_eq!(
        p,
        Progress {
            consumed: head.len() - 1,
            state: Decoded::NeedMore
        }
    );
    let p = dec
        .feed(b"\r\n0\r\n\r\n", &mut |_: u64, _: &[u8]| {})
        .unwrap();
    assert_eq!(
        p,
        Progress {
            consumed: 7,
            state: Decoded::Complete
        }
    );
}

#[test]
fn dyn_callback_with_send_bound_works() {
    // the client's sink type today: &mut (dyn FnMut(u64, &[u8]) + Send)
    let mut seen = 0u64;
    let mut f = |_: u64, b: &[u8]| seen += b.len() as u64;
    let sink: &mut (dyn FnMut(u64, &[u8]) + Send) = &mut f;
    let mut dec = ResponseDecoder::new(false);
    dec.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc", sink)
        .unwrap();
    assert_eq!(seen, 3);
}

#[test]
fn error_messages_say_what_was_wrong() {
    assert_eq!(
        DecodeError::ConflictingContentLength(1, 2).to_string(),
        "conflicting Content-Length values 1 and 2"
    );
    let e = error(b"HTTP/1.1 200 OK\r\nContent-Length: 12x\r\n\r\n");
    assert_eq!(e.to_string(), "invalid Content-Length `12x`");
    assert_eq!(
        DecodeError::ShortBody {
            got: 3,
            expected: None
        }
        .to_string(),
        "connection closed after 3 body bytes of a chunked body"
    );
}

#[test]
fn cmsd_dynamic_is_kept_and_its_field_lines_joined() {
    let wire = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nCMSD-Dynamic: \"origin\";rd=3 \r\ncmsd-dynamic:\"edge\";mb=800\r\n\r\n";
    let (r, _, dec) = one(wire, false);
    assert_eq!(r.unwrap().state, Decoded::Complete);
    assert_eq!(dec.cmsd_dynamic(), Some("\"origin\";rd=3,\"edge\";mb=800"));
    // skipped on an interim head, absent when not sent
    let wire = b"HTTP/1.1 103 Early Hints\r\nCMSD-Dynamic: \"x\"\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
    let (r, _, dec) = one(wire, false);
    assert_eq!(r.unwrap().state, Decoded::Complete);
    assert_eq!(dec.cmsd_dynamic(), None);
}
