//! Client side of the HTTP/1 codec: the request encoder and a push-based
//! response decoder. No I/O and no clock: the caller owns the transport
//! and the buffers.
//!
//! - [`encode_request`] appends a request ([`RequestHead`]) to a `Vec<u8>`,
//!   refusing header injection with an [`EncodeError`].
//! - [`ResponseDecoder`] takes the received bytes as they arrive
//!   ([`ResponseDecoder::feed`], then [`ResponseDecoder::eof`] at end of
//!   stream), hands body bytes to a callback without copying them and
//!   keeps a small [`ResponseHead`]. It decodes Content-Length, chunked and
//!   close-delimited bodies, responses without a body (HEAD, 204, 304),
//!   skips 1xx interim responses and stops exactly at the end of the
//!   response, so pipelined responses decode one after another.
//!
//! ```
//! use vodlab_http::client::{encode_request, Decoded, RequestHead, ResponseDecoder};
//!
//! let mut out = Vec::new();
//! let req = RequestHead {
//!     method: "GET",
//!     target: "/v.mp4",
//!     host: "example",
//!     http10: false,
//!     range: Some("bytes=0-4"),
//!     headers: &[],
//!     session: Some(7),
//!     body: None,
//! };
//! encode_request(&req, &mut out).unwrap();
//! assert!(out.starts_with(b"GET /v.mp4 HTTP/1.1\r\nHost: example\r\n"));
//!
//! let wire = b"HTTP/1.1 206 Partial Content\r\nContent-Length: 5\r\n\
//!              Content-Range: bytes 0-4/100\r\n\r\nhello";
//! let mut dec = ResponseDecoder::new(false);
//! let mut body = Vec::new();
//! let p = dec.feed(wire, &mut |_off: u64, b: &[u8]| body.extend_from_slice(b)).unwrap();
//! assert_eq!((p.consumed, p.state), (wire.len(), Decoded::Complete));
//! assert_eq!(dec.head().unwrap().content_range, Some((0, 4, Some(100))));
//! assert_eq!(body, b"hello");
//! ```

mod decode;
mod encode;
mod head;

pub use decode::{Decoded, Progress, ResponseDecoder, MAX_CHUNK_LINE};
pub use encode::{encode_request, EncodeError, Part, RequestHead, USER_AGENT};
pub use head::{
    parse_content_range, DecodeError, Framing, ResponseHead, Version, MAX_HEADERS, MAX_HEAD_BYTES,
};
