//! # vodlab-client
//!
//! The load engine behind `vodlab run`: it replays session scripts against an
//! HTTP server as viewers would. Sessions arrive open-loop on a seeded
//! schedule ([`schedule`]); each runs over persistent connections with pacing,
//! per-request deadlines and an emulated access link ([`link`]); a playout
//! buffer ([`viewer`]) turns completion times into start-up delay and stalls;
//! statistics are bounded HdrHistograms and time bins ([`metrics`]); the
//! outcome is [`results::Results`], written as `results.json`.
//!
//! Every session rule lives in the [`driver`] (no I/O, no clock: tested in
//! virtual time); [`engine`] executes drivers over tokio connections;
//! metrics are aggregated apart from the engine ([`metrics::RunMetrics`],
//! mergeable) and assembled into [`results::Results`]. The schedule, pacing
//! rule ([`driver::send_target`]), viewer and token bucket are pure.
//!
//! `vodlab run` itself is a library call: its flags are [`settings`] (clap's
//! `Args` with the `cli` feature), [`command::run`] checks them, runs and
//! writes the results.

#![warn(missing_docs)]

pub mod checks;
pub mod cmcd;
pub mod codec;
pub mod command;
pub mod config;
pub mod delivery;
pub mod driver;
pub mod engine;
pub mod exchange;
#[cfg(feature = "test-util")]
pub mod groundtruth;
pub mod http;
pub mod link;
pub mod load;
pub mod metrics;
pub mod player;
pub mod player_run;
pub mod results;
pub mod schedule;
pub mod settings;
pub mod shard;
pub mod slots;
#[cfg(feature = "test-util")]
pub mod testserver;
pub mod thresholds;
pub mod timing;
pub mod transport;
pub mod viewer;

pub use config::{Live, RunConfig};
pub use driver::{LatePacing, SessionDriver};
pub use engine::{run, run_parts, Checkpoint, CheckpointConfig, CHECKPOINT_FILE};
pub use load::LoadedWorkload;
pub use results::{Results, StopReason};
pub use schedule::Arrivals;
pub use shard::{MetricsDump, ShardSpec};
