//! # vodlab-server
//!
//! `vodlab serve`: a static HTTP/1.1 server built for video. GET and HEAD,
//! persistent and pipelined connections, single and multiple byte ranges
//! ([`range`]), If-Range, safe paths ([`request`]), limits and timeouts, and
//! two I/O modes ([`server::IoMode`]): `vanilla` sendfile, and `asap`, which
//! probes the page cache and, on a miss, prefetches through one serialized
//! helper per storage device ([`prefetch`]).

#![warn(missing_docs)]

pub mod prefetch;
pub mod range;
pub mod request;
pub mod server;

pub use server::{Config, IoMode, Server};
