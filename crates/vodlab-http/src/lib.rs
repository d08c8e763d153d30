//! # vodlab-http
//!
//! The one HTTP/1 codec shared by vodlab's load client, its server, its test
//! server and its tools. Bytes in, bytes out: nothing here does I/O or reads
//! a clock, so every case is tested on byte slices.
//!
//! - [`client`]: the request encoder and a push-based response decoder
//!   (Content-Length, chunked and close-delimited bodies, HEAD, 1xx, 204/304,
//!   206 with Content-Range).
//! - [`server`]: the request-head parser and the response-head encoder.

#![warn(missing_docs)]

pub mod client;
pub mod server;
