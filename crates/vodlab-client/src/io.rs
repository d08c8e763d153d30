//! The I/O edge: tokio executors that run the [`crate::core`] drivers over
//! real connections. [`engine`] runs a whole load (arrivals, sessions,
//! checkpoints, collection); [`transport`] opens TCP, TLS, h2 and shaped
//! connections; [`http`] is the HTTP/1.1 client connection over any of them.
//! `Instant` and the clock live here and nowhere in the cores: each run
//! holds one [`crate::core::time::Clock`] (its epoch) and converts at the
//! call, `clock.now()` into a core, `clock.instant_of(t)` for a timer.

pub mod engine;
pub mod http;
pub mod transport;
