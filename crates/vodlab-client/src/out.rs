//! What a run writes and how runs combine: [`atomic`] (the one writer of
//! result files: temporary file, fsync, rename, fsync), [`metrics`] (bounded
//! HdrHistograms and time bins, mergeable), [`results`] (`results.json`),
//! [`shard`] (the parts a sharded run writes and their exact merge),
//! [`codec`] (the dump's exact encoding), [`quic`] (QUIC's own figures of
//! an h3 run), [`quic_link`] (the in-process QUIC link's counts) and [`thresholds`] (`--fail-on` rules over any result file).

pub mod atomic;
pub mod codec;
pub mod metrics;
pub mod quic;
pub mod quic_link;
pub mod results;
pub mod shard;
pub mod summary;
pub mod thresholds;
