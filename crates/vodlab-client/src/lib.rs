//! # vodlab-client
//!
//! The load engine behind `vodlab run`: it replays session scripts against an
//! HTTP server as viewers would. Its modules are grouped by role:
//!
//! - [`core`], the sans-IO cores (no sockets, no clock; tested in virtual
//!   time): the session [`core::driver`] with its send [`core::slots`] and
//!   response [`core::checks`], the playout buffer ([`core::viewer`]), the
//!   delivery meter, the seeded arrival [`core::schedule`], the access-link
//!   token bucket ([`core::link`]) and the closed-loop [`core::player`]s.
//! - [`io`], the tokio edge: the [`io::engine`] executes drivers over the
//!   [`io::transport`]s (TCP, TLS, h2, shaped) and the HTTP/1.1 [`io::http`]
//!   connection.
//! - [`out`], what a run writes: bounded, mergeable [`out::metrics`], the
//!   [`out::results`] file, [`out::shard`] parts and their exact merge,
//!   `--fail-on` [`out::thresholds`].
//!
//! Around them: [`config`] (a run's settings and live counters), [`load`]
//! (what a run replays), [`timing`] (h2load timing scripts), [`player_run`]
//! (closed-loop players run live) and `vodlab run` itself as a library call:
//! its flags are [`settings`] (clap's `Args` with the `cli` feature) and
//! [`command::run`] checks them, runs and writes the results.

#![warn(missing_docs)]

pub mod command;
pub mod config;
pub mod core;
#[cfg(feature = "test-util")]
pub mod groundtruth;
pub mod io;
pub mod load;
pub mod out;
pub mod player_run;
pub mod settings;
#[cfg(feature = "test-util")]
pub mod testserver;
pub mod timing;

pub use crate::core::driver::{LatePacing, SessionDriver};
pub use crate::core::schedule::Arrivals;
pub use crate::io::engine::{run, run_parts, Checkpoint, CheckpointConfig, CHECKPOINT_FILE};
pub use crate::out::results::{Results, StopReason};
pub use crate::out::shard::{MetricsDump, ShardSpec};
pub use config::{Live, RunConfig};
pub use load::LoadedWorkload;
