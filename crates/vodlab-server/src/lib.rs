//! # vodlab-server
//!
//! `vodlab serve`: a static HTTP/1.1 and HTTP/2 server (plain and TLS, one
//! port: [`accept`]) built for video. GET and HEAD,
//! persistent and pipelined connections, single and multiple byte ranges
//! ([`range`]), If-Range, safe paths ([`request`], [`files`]), limits and
//! timeouts, and two I/O modes ([`IoMode`]): `vanilla` sendfile, and `asap`,
//! which probes the page cache and, on a miss, prefetches through one
//! serialized helper per storage device ([`prefetch`]) as a prefetch
//! controller decides (the `vodlab-prefetch` crate, pure and shared with
//! `vodlab simulate`).
//!
//! Layers: the codec parses heads and encodes response heads
//! (`vodlab-http`); [`plan`] turns a request and a file's metadata into a
//! response plan without I/O; one prelude (`prepare`: route, open, plan,
//! the request's CMCD and bit rate, pacing) serves both front ends; the
//! HTTP/1.1 connection (a state machine) executes plans with `sendfile`, the
//! HTTP/2 front end ([`h2`]) on streams; [`config`] holds the settings,
//! [`settings`] reads `vodlab serve`'s flags into them (clap's derives with
//! the `cli` feature) and [`launch`] starts a server from them.

#![warn(missing_docs)]

pub mod accept;
mod access;
mod asap;
pub mod bitrate;
mod body_pool;
pub mod cmsd;
pub mod config;
mod conn;
mod conn_io;
pub mod conn_rate;
pub mod error;
pub mod files;
pub mod flood;
pub mod h2;
pub mod h3;
pub mod launch;
pub mod limits;
mod lowat;
pub mod pacer;
pub mod pacing;
pub mod penalty;
pub mod plan;
pub mod prefetch;
mod prepare;
pub mod proto_stats;
pub mod range;
pub mod request;
pub mod server;
pub mod settings;
pub mod state;
pub mod synfilter;
pub mod table41;
pub mod tls;
mod transport;
pub mod workers;

pub use access::CacheOutcome;
pub use config::{Config, IoMode, PaceMode, PolicySpec};
pub use conn::{CloseReason, ConnState};
pub use error::ServeError;
pub use server::{Server, StartError};
