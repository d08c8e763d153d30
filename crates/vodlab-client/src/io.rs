//! The I/O edge: tokio executors that run the [`crate::core`] drivers over
//! real connections. [`engine`] runs a whole load (arrivals, sessions,
//! checkpoints, collection); [`transport`] opens TCP, TLS, h2 and shaped
//! connections; [`http`] is the HTTP/1.1 client connection over any of them.
//! `Instant` and the clock live here and nowhere in the cores.

pub mod engine;
pub mod http;
pub mod transport;
