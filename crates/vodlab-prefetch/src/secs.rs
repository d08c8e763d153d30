//! Serde for a [`Duration`] written as seconds (`interval = 180`,
//! `0.25`), the form every vodlab configuration file uses.

use serde::{Deserialize, Deserializer, Serializer};
use std::time::Duration;

/// Writes the duration as seconds (a float).
pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

/// Reads seconds (a float) into a duration; negative or non-finite values
/// are an error.
pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    let v = f64::deserialize(d)?;
    Duration::try_from_secs_f64(v).map_err(serde::de::Error::custom)
}
