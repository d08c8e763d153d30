//! # vodlab-prefetch
//!
//! How much a video server reads ahead of a request, decided by one of the
//! policies of the thesis (chapters 4 and 5), and the same decisions replayed
//! over a trace. Pure: no I/O, no async runtime, no clock reads; every call
//! gets `now`, so `vodlab serve` (the live server), `vodlab simulate
//! --prefetch` (virtual time over a trace) and a replay of events a live
//! server recorded all run the very same objects.
//!
//! - [`controller`]: the [`PrefetchController`] trait and its feedback
//!   (`on_request`, `on_read_complete`, `on_evicted`, `on_device_reads`,
//!   `on_tick`), the fixed size, and the per-session and per-chain state;
//! - [`core`]: [`PrefetchCore`], what a server holds: a controller, the
//!   chains, and the decision around it (overlap with the session's
//!   prefetches, the resident head, evictions), each call optionally
//!   recorded as an [`events::Event`];
//! - [`auto`]: the automatic size of chapter 4 and bit-rate scaled sizes;
//! - [`chainpf`]: First-Grow and First-Grow-SR of chapter 5;
//! - [`policy`]: [`PolicySpec`], the one `KIND:SIZE[,key=value]` grammar
//!   and table of policies, and [`PolicySpec::build`];
//! - [`events`]: the recorded event stream (`serve --prefetch-events`);
//! - [`replay`]: its replay into a fresh controller, decision for decision;
//! - [`sim`]: the trace-driven simulation of chapter 5, with drive and
//!   page-cache feedback;
//! - [`autolog`]: the automatic size's intervals as CSV.

#![warn(missing_docs)]

pub mod auto;
pub mod autolog;
pub mod chainpf;
pub mod controller;
pub mod core;
pub mod defaults;
pub mod events;
pub mod next_object;
pub mod policy;
pub mod replay;
pub mod secs;
pub mod sim;

pub use crate::core::PrefetchCore;
pub use controller::{PrefetchController, PrefetchDecision, RequestInfo, SessionState};
pub use policy::{PolicyError, PolicySpec};
