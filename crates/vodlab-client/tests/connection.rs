//! The client connection over scripted mock transports: short reads,
//! stalls, early closes, interim responses, pipelined leftovers.

use std::time::Duration;

use tokio_test::io::Builder;
use vodlab_client::core::exchange::ErrorKind;
use vodlab_client::core::link::LinkSpec;
use vodlab_client::io::http::{Connection, Outgoing};

fn get(path: &str) -> Outgoing<'_> {
    Outgoing {
        method: "GET",
        path,
        range: None,
        headers: &[],
        body: None,
        session: 7,
        http10: false,
    }
}

/// The bytes the connection sends for `o` (the codec is tested on its own).
fn wire(o: &Outgoing<'_>) -> Vec<u8> {
    let mut out = Vec::new();
    vodlab_http::client::encode_request(
        &vodlab_http::client::RequestHead {
            method: o.method,
            target: o.path,
            host: "h",
            http10: o.http10,
            range: o.range,
            headers: o.headers,
            session: Some(o.session),
            body: o.body.map(str::as_bytes),
        },
        &mut out,
    )
    .unwrap();
    out
}

async fn exchange(
    c: &mut Connection<tokio_test::io::Mock>,
    o: &Outgoing<'_>,
) -> (
    Result<vodlab_client::core::exchange::Response, vodlab_client::core::exchange::Failure>,
    Vec<u8>,
) {
    let mut body = Vec::new();
    let mut sink = |at: u64, d: &[u8]| {
        assert_eq!(at as usize, body.len(), "body offsets are contiguous");
        body.extend_from_slice(d);
    };
    let r = c.exchange(o, &mut sink).await;
    (r, body)
}

#[tokio::test]
async fn a_response_in_one_byte_reads_decodes_whole() {
    let o = get("/a");
    let resp = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";
    let mut b = Builder::new();
    b.write(&wire(&o));
    for byte in resp.iter() {
        b.read(std::slice::from_ref(byte));
    }
    let mut c = Connection::new(b.build(), "h", &LinkSpec::default());
    let (r, body) = exchange(&mut c, &o).await;
    let r = r.unwrap();
    assert_eq!((r.status, r.body_bytes, r.keep_alive), (200, 5, true));
    assert_eq!(body, b"hello");
    assert_eq!(c.uses, 1);
}

#[tokio::test(start_paused = true)]
async fn a_stall_inside_the_body_is_waited_out_and_timed() {
    let o = get("/a");
    let mut c = Connection::new(
        Builder::new()
            .write(&wire(&o))
            .wait(Duration::from_millis(300))
            .read(b"HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 0-3/10\r\nContent-Length: 4\r\n\r\nab")
            .wait(Duration::from_secs(2))
            .read(b"cd")
            .build(),
        "h",
        &LinkSpec::default(),
    );
    let (r, body) = exchange(&mut c, &o).await;
    let r = r.unwrap();
    assert_eq!(r.status, 206);
    assert_eq!(r.content_range, Some((0, 3, Some(10))));
    assert_eq!(body, b"abcd");
}

#[tokio::test]
async fn an_early_close_is_a_short_body() {
    let o = get("/a");
    let mut c = Connection::new(
        Builder::new()
            .write(&wire(&o))
            .read(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc")
            .build(),
        "h",
        &LinkSpec::default(),
    );
    let (r, _) = exchange(&mut c, &o).await;
    let f = r.unwrap_err();
    assert_eq!(f.kind, ErrorKind::ShortBody);
    assert!(!f.retryable);
    assert!(f.detail.contains("3 body bytes of 10"), "{}", f.detail);
}

#[tokio::test]
async fn a_close_before_any_byte_on_a_reused_connection_may_be_retried() {
    let a = get("/a");
    let b = get("/b");
    let mut c = Connection::new(
        Builder::new()
            .write(&wire(&a))
            .read(b"HTTP/1.1 204 No Content\r\n\r\n")
            .write(&wire(&b))
            .build(),
        "h",
        &LinkSpec::default(),
    );
    assert_eq!(exchange(&mut c, &a).await.0.unwrap().status, 204);
    let f = exchange(&mut c, &b).await.0.unwrap_err();
    assert_eq!(f.kind, ErrorKind::Reset);
    assert!(f.retryable, "the server closed an idle connection: {f:?}");
}

#[tokio::test]
async fn a_first_request_closed_before_any_byte_is_not_retried() {
    let a = get("/a");
    let mut c = Connection::new(
        Builder::new().write(&wire(&a)).build(),
        "h",
        &LinkSpec::default(),
    );
    let f = exchange(&mut c, &a).await.0.unwrap_err();
    assert_eq!(f.kind, ErrorKind::Reset);
    assert!(!f.retryable);
}

#[tokio::test]
async fn interim_responses_and_many_headers_are_not_errors() {
    let a = get("/a");
    let mut head = String::from("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </s.css>\r\n\r\nHTTP/1.1 200 OK\r\n");
    for i in 0..120 {
        head.push_str(&format!("X-Header-{i}: {i}\r\n"));
    }
    head.push_str(
        "Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;ext=1\r\nde\r\n0\r\nTrailer: x\r\n\r\n",
    );
    let mut c = Connection::new(
        Builder::new()
            .write(&wire(&a))
            .read(head.as_bytes())
            .build(),
        "h",
        &LinkSpec::default(),
    );
    let (r, body) = exchange(&mut c, &a).await;
    let r = r.unwrap();
    assert_eq!((r.status, r.body_bytes), (200, 5));
    assert_eq!(body, b"abcde");
}

#[tokio::test]
async fn a_close_delimited_body_ends_at_eof_and_the_connection_is_not_reused() {
    let a = get("/a");
    let mut c = Connection::new(
        Builder::new()
            .write(&wire(&a))
            .read(b"HTTP/1.0 200 OK\r\n\r\nsome")
            .read(b" bytes")
            .build(),
        "h",
        &LinkSpec::default(),
    );
    let (r, body) = exchange(&mut c, &a).await;
    let r = r.unwrap();
    assert!(!r.keep_alive);
    assert_eq!(body, b"some bytes");
}

#[tokio::test]
async fn two_responses_in_one_read_serve_two_requests() {
    let a = get("/a");
    let b = get("/b");
    let mut c = Connection::new(
        Builder::new()
            .write(&wire(&a))
            .read(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nxHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nyz")
            .write(&wire(&b))
            .build(),
        "h",
        &LinkSpec::default(),
    );
    assert_eq!(exchange(&mut c, &a).await.1, b"x");
    assert_eq!(exchange(&mut c, &b).await.1, b"yz");
}

#[tokio::test]
async fn garbage_is_a_bad_response() {
    let a = get("/a");
    let mut c = Connection::new(
        Builder::new()
            .write(&wire(&a))
            .read(b"SSH-2.0-OpenSSH_9.2\r\n\r\n")
            .build(),
        "h",
        &LinkSpec::default(),
    );
    assert_eq!(
        exchange(&mut c, &a).await.0.unwrap_err().kind,
        ErrorKind::BadResponse
    );
}

#[tokio::test]
async fn a_header_injection_in_the_script_is_refused_before_sending() {
    let headers = vec!["X-A: b\r\nX-Evil: 1".to_string()];
    let o = Outgoing {
        headers: &headers,
        ..get("/a")
    };
    // the mock expects no write at all
    let mut c = Connection::new(Builder::new().build(), "h", &LinkSpec::default());
    let f = exchange(&mut c, &o).await.0.unwrap_err();
    assert_eq!(f.kind, ErrorKind::Other);
    assert!(f.detail.contains("request not sent"), "{}", f.detail);
}
