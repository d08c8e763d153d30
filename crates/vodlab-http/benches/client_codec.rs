//! Cost of the client codec per request: encoding a ranged GET and decoding
//! typical responses (nginx-like 206 with a body, chunked, 100 headers), each
//! fed whole and in 1460-byte pieces. Run with
//! `cargo bench -p vodlab-http --bench client_codec` (a few seconds).
//! BENCH_ITERS (default 200000) sets the iterations per case, BENCH_ONLY=text
//! keeps the cases whose name contains `text`.

use std::hint::black_box;
use std::time::Instant;

use vodlab_http::client::{encode_request, Decoded, RequestHead, ResponseDecoder};

fn iters() -> usize {
    std::env::var("BENCH_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200_000)
}

/// BENCH_ONLY=text runs only the cases whose name contains it.
fn wanted(name: &str) -> bool {
    std::env::var("BENCH_ONLY").map_or(true, |only| name.contains(&only))
}

fn report(name: &str, n: usize, start: Instant) {
    let ns = start.elapsed().as_nanos() as f64 / n as f64;
    println!("{name:<40} {ns:>9.1} ns/op");
}

/// Decodes `wire` fed in pieces of `piece` bytes as a connection would.
fn decode(wire: &[u8], piece: usize) -> u64 {
    let mut dec = ResponseDecoder::new(false);
    let mut sum = 0u64;
    let mut pending: &[u8] = &[];
    let mut from = 0;
    // the caller's buffer: unconsumed bytes stay, new bytes are appended;
    // here the window [start, end) of `wire` plays that buffer
    let mut start = 0;
    while from < wire.len() {
        from = from.saturating_add(piece).min(wire.len());
        pending = &wire[start..from];
        let p = dec
            .feed(pending, &mut |off: u64, b: &[u8]| {
                sum = sum.wrapping_add(off ^ b.len() as u64)
            })
            .expect("valid");
        start += p.consumed;
        if p.state == Decoded::Complete {
            break;
        }
    }
    black_box(pending);
    sum.wrapping_add(dec.head().expect("head").header_bytes)
}

fn main() {
    let n = iters();
    let extra = ["Accept: */*".to_string()];
    let req = RequestHead {
        method: "GET",
        target: "/t03974/sd.mp4",
        host: "10.0.0.1:8080",
        http10: false,
        range: Some("bytes=524288-1048575"),
        headers: &extra,
        session: Some(123_456),
        body: None,
    };
    if wanted("encode ranged GET") {
        let mut out = Vec::with_capacity(512);
        let start = Instant::now();
        for _ in 0..n {
            out.clear();
            encode_request(black_box(&req), &mut out).expect("valid");
            black_box(&out);
        }
        report("encode ranged GET", n, start);
    }

    let body = vec![7u8; 16 * 1024];
    let mut r206 = b"HTTP/1.1 206 Partial Content\r\nServer: nginx/1.24.0\r\n\
        Date: Mon, 02 Nov 2026 10:00:00 GMT\r\nContent-Type: video/mp4\r\n\
        Content-Length: 16384\r\nLast-Modified: Mon, 02 Nov 2026 09:00:00 GMT\r\n\
        Connection: keep-alive\r\nETag: \"65432-100000\"\r\n\
        Content-Range: bytes 0-16383/1048576\r\n\r\n"
        .to_vec();
    r206.extend_from_slice(&body);
    let mut chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    for c in body.chunks(4096) {
        chunked.extend_from_slice(format!("{:x}\r\n", c.len()).as_bytes());
        chunked.extend_from_slice(c);
        chunked.extend_from_slice(b"\r\n");
    }
    chunked.extend_from_slice(b"0\r\n\r\n");
    let mut many = b"HTTP/1.1 200 OK\r\n".to_vec();
    for i in 0..100 {
        many.extend_from_slice(format!("X-Header-{i}: value number {i}\r\n").as_bytes());
    }
    many.extend_from_slice(b"Content-Length: 0\r\n\r\n");

    // reference: httparse alone on the same head, 256 uninitialised slots
    let reference = "reference: httparse alone, 206 head";
    let start = Instant::now();
    for _ in 0..if wanted(reference) { n } else { 0 } {
        let mut headers = [std::mem::MaybeUninit::<httparse::Header<'_>>::uninit(); 256];
        let mut resp = httparse::Response::new(&mut []);
        let r = httparse::ParserConfig::default().parse_response_with_uninit_headers(
            &mut resp,
            black_box(&r206),
            &mut headers,
        );
        black_box((r.is_ok(), resp.code));
    }
    if wanted(reference) {
        report(reference, n, start);
    }

    for (name, wire) in [
        ("206, 9 headers, 16 KiB", &r206),
        ("chunked 4 x 4 KiB", &chunked),
        ("200, 100 headers, empty", &many),
    ] {
        for piece in [usize::MAX, 1460] {
            let how = if piece == usize::MAX {
                "whole"
            } else {
                "1460 B pieces"
            };
            let name = format!("decode {name} ({how})");
            if !wanted(&name) {
                continue;
            }
            let start = Instant::now();
            let mut acc = 0u64;
            for _ in 0..n {
                acc = acc.wrapping_add(decode(black_box(wire), piece));
            }
            black_box(acc);
            report(&name, n, start);
        }
    }
}
