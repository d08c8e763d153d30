//! The request encoder: exact bytes, and header injection refused.

use vodlab_http::client::{encode_request, EncodeError, Part, RequestHead, USER_AGENT};

fn get<'a>(target: &'a str) -> RequestHead<'a> {
    RequestHead {
        method: "GET",
        target,
        host: "127.0.0.1:8080",
        http10: false,
        range: None,
        headers: &[],
        session: None,
        body: None,
    }
}

fn encode(req: &RequestHead<'_>) -> String {
    let mut out = Vec::new();
    encode_request(req, &mut out).expect("encodes");
    String::from_utf8(out).unwrap()
}

#[test]
fn user_agent_is_vodlab_and_version() {
    assert_eq!(USER_AGENT, format!("vodlab/{}", env!("CARGO_PKG_VERSION")));
}

#[test]
fn plain_get() {
    assert_eq!(
        encode(&get("/video/a.mp4")),
        format!(
            "GET /video/a.mp4 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nUser-Agent: {USER_AGENT}\r\n\r\n"
        )
    );
}

#[test]
fn every_field_in_order() {
    let extra = ["Accept: */*".to_string(), "X-Trace:  a b ".to_string()];
    let req = RequestHead {
        method: "POST",
        target: "upload",
        host: "h",
        http10: true,
        range: Some("bytes=0-99"),
        headers: &extra,
        session: Some(18446744073709551615),
        body: Some(b"hi\r\n"),
    };
    assert_eq!(
        encode(&req),
        format!(
            "POST /upload HTTP/1.0\r\nHost: h\r\nUser-Agent: {USER_AGENT}\r\n\
             X-Vodlab-Session: 18446744073709551615\r\nConnection: keep-alive\r\n\
             Range: bytes=0-99\r\nAccept: */*\r\nX-Trace:  a b \r\nContent-Length: 4\r\n\r\nhi\r\n"
        )
    );
}

#[test]
fn session_and_empty_body() {
    let req = RequestHead {
        session: Some(0),
        body: Some(b""),
        ..get("/x")
    };
    assert_eq!(
        encode(&req),
        format!(
            "GET /x HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nUser-Agent: {USER_AGENT}\r\n\
             X-Vodlab-Session: 0\r\nContent-Length: 0\r\n\r\n"
        )
    );
}

#[test]
fn asterisk_and_absolute_targets_are_kept() {
    let opts = RequestHead {
        method: "OPTIONS",
        ..get("*")
    };
    assert!(encode(&opts).starts_with("OPTIONS * HTTP/1.1\r\n"));
    assert!(encode(&get("http://h/a")).starts_with("GET http://h/a HTTP/1.1\r\n"));
    assert!(encode(&get("")).starts_with("GET / HTTP/1.1\r\n"));
}

#[test]
fn appends_to_what_is_there() {
    let mut out = b"previous".to_vec();
    encode_request(&get("/a"), &mut out).unwrap();
    encode_request(&get("/b"), &mut out).unwrap();
    let s = String::from_utf8(out).unwrap();
    assert!(s.starts_with("previousGET /a HTTP/1.1\r\n"));
    assert_eq!(s.matches("\r\n\r\n").count(), 2);
    assert!(s.contains("\r\n\r\nGET /b HTTP/1.1\r\n"));
}

fn refused(req: &RequestHead<'_>) -> EncodeError {
    let mut out = b"kept".to_vec();
    let e = encode_request(req, &mut out).expect_err("must be refused");
    assert_eq!(out, b"kept", "nothing written on error");
    e
}

#[test]
fn line_breaks_are_refused_everywhere() {
    for bad in ["\r", "\n", "\r\n", "a\r\nX-Evil: 1"] {
        let t = format!("/a{bad}");
        assert_eq!(
            refused(&get(&t)),
            EncodeError::LineBreak { part: Part::Target }
        );
        let host = format!("h{bad}");
        assert_eq!(
            refused(&RequestHead {
                host: &host,
                ..get("/")
            }),
            EncodeError::LineBreak { part: Part::Host }
        );
        let range = format!("bytes=0-1{bad}");
        assert_eq!(
            refused(&RequestHead {
                range: Some(&range),
                ..get("/")
            }),
            EncodeError::LineBreak { part: Part::Range }
        );
        let method = format!("GET{bad}");
        assert_eq!(
            refused(&RequestHead {
                method: &method,
                ..get("/")
            }),
            EncodeError::LineBreak { part: Part::Method }
        );
        let headers = ["A: b".to_string(), format!("X: y{bad}Z: w")];
        assert_eq!(
            refused(&RequestHead {
                headers: &headers,
                ..get("/")
            }),
            EncodeError::LineBreak {
                part: Part::Header(1)
            }
        );
    }
    let e = EncodeError::LineBreak {
        part: Part::Header(1),
    };
    assert_eq!(
        e.to_string(),
        "the request's extra header line 1 contains a CR or LF byte (header injection refused)"
    );
}

#[test]
fn request_line_cannot_be_split() {
    assert_eq!(
        refused(&get("/a HTTP/1.0")),
        EncodeError::ForbiddenByte {
            part: Part::Target,
            byte: b' '
        }
    );
    assert_eq!(
        refused(&RequestHead {
            method: "G T",
            ..get("/")
        }),
        EncodeError::ForbiddenByte {
            part: Part::Method,
            byte: b' '
        }
    );
    assert_eq!(
        refused(&RequestHead {
            method: "",
            ..get("/")
        }),
        EncodeError::Invalid { part: Part::Method }
    );
    assert_eq!(
        refused(&RequestHead {
            method: "GE(T",
            ..get("/")
        }),
        EncodeError::Invalid { part: Part::Method }
    );
    assert_eq!(
        refused(&get("/a\0b")),
        EncodeError::ForbiddenByte {
            part: Part::Target,
            byte: 0
        }
    );
}

#[test]
fn extra_lines_must_be_header_fields() {
    for bad in ["no colon", ": no name", "Bad Name: v", "X:\u{1}"] {
        let headers = [bad.to_string()];
        let e = refused(&RequestHead {
            headers: &headers,
            ..get("/")
        });
        assert!(
            matches!(
                e,
                EncodeError::MalformedHeader {
                    part: Part::Header(0)
                } | EncodeError::ForbiddenByte {
                    part: Part::Header(0),
                    ..
                }
            ),
            "`{bad}`: {e:?}"
        );
    }
}

#[test]
fn encoded_requests_parse_back_with_httparse() {
    let extra = ["Accept: */*".to_string()];
    let req = RequestHead {
        range: Some("bytes=5-"),
        headers: &extra,
        session: Some(42),
        body: Some(b"xyz"),
        ..get("/v/1.mp4")
    };
    let wire = encode(&req);
    let mut headers = [httparse::EMPTY_HEADER; 16];
    let mut parsed = httparse::Request::new(&mut headers);
    let n = parsed.parse(wire.as_bytes()).unwrap().unwrap();
    assert_eq!(&wire[n..], "xyz");
    assert_eq!(parsed.method, Some("GET"));
    assert_eq!(parsed.path, Some("/v/1.mp4"));
    let get = |name: &str| {
        parsed
            .headers
            .iter()
            .find(|h| h.name == name)
            .map(|h| std::str::from_utf8(h.value).unwrap())
    };
    assert_eq!(get("Range"), Some("bytes=5-"));
    assert_eq!(get("X-Vodlab-Session"), Some("42"));
    assert_eq!(get("Content-Length"), Some("3"));
    assert_eq!(get("Accept"), Some("*/*"));
}
