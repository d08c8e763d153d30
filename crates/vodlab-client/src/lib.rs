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
//! The schedule, pacing rule ([`engine::send_target`]), viewer and token
//! bucket are pure and tested without sockets or clocks.

#![warn(missing_docs)]

pub mod engine;
pub mod http;
pub mod link;
pub mod load;
pub mod metrics;
pub mod results;
pub mod schedule;
pub mod testserver;
pub mod viewer;

pub use engine::{run, Live, RunConfig};
pub use load::LoadedWorkload;
pub use results::{Results, StopReason};
pub use schedule::Arrivals;
