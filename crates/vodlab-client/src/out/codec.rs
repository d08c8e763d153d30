//! The exact form of what a run dumps for a merge, and what can go wrong
//! with it: histograms as HdrHistogram's V2 serialization in base64
//! ([`encode_histogram`], [`decode_histogram`]), and why a `--shard` value or
//! a merge input is unusable ([`ShardError`]). Used by the shard merge
//! ([`crate::out::shard`], which re-exports them) and by the players' aggregates
//! ([`crate::player_run`]), both of which dump and merge.

use base64::Engine as _;
use hdrhistogram::serialization::{Deserializer, Serializer, V2Serializer};
use hdrhistogram::Histogram;

/// Most processes a run can be split into.
pub const MAX_SHARDS: u32 = 65_536;

/// Why a `--shard` value or a merge input is unusable.
#[derive(Debug, thiserror::Error)]
pub enum ShardError {
    /// `--shard` is not `I/N` with `0 <= I < N <= MAX_SHARDS`.
    #[error("--shard `{0}`: expected I/N with 0 <= I < N <= {MAX_SHARDS} (e.g. 0/4)")]
    Spec(String),
    /// A histogram could not be encoded or decoded.
    #[error("histogram `{name}`: {reason}")]
    Histogram {
        /// Which one.
        name: String,
        /// Why.
        reason: String,
    },
    /// The parts of a merge do not belong to one run.
    #[error("{0}")]
    Mismatch(String),
}

/// Encodes a histogram as HdrHistogram's V2 serialization in base64.
pub fn encode_histogram(name: &str, h: &Histogram<u64>) -> Result<String, ShardError> {
    let mut buf = Vec::new();
    V2Serializer::new()
        .serialize(h, &mut buf)
        .map_err(|e| ShardError::Histogram {
            name: name.into(),
            reason: format!("{e:?}"),
        })?;
    Ok(base64::engine::general_purpose::STANDARD.encode(buf))
}

/// Decodes [`encode_histogram`]'s output.
pub fn decode_histogram(name: &str, s: &str) -> Result<Histogram<u64>, ShardError> {
    let err = |reason: String| ShardError::Histogram {
        name: name.into(),
        reason,
    };
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(s)
        .map_err(|e| err(e.to_string()))?;
    Deserializer::new()
        .deserialize(&mut bytes.as_slice())
        .map_err(|e| err(format!("{e:?}")))
}
