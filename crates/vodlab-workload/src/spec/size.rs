//! The sizes a specification implies: the title durations its seed draws
//! (the construction, [`crate::construct`], draws the same ones, from the
//! same stream) and [`size_problems`], the check of the catalog's sizes
//! against [`crate::limits`] that [`Spec::check`] runs after
//! [`Spec::validate`].

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::{Ladder, Layout, Spec};
use crate::error::Problems;
use crate::limits;

/// The stream of the seed the catalog draws from.
pub(crate) const CATALOG_STREAM: u64 = 1;
/// The stream of the seed the sessions draw from (separate, so changing the
/// session count leaves the catalog as it was).
pub(crate) const SESSION_STREAM: u64 = 2;

/// The ChaCha8 generator of `stream` of `seed`.
pub(crate) fn rng(seed: u64, stream: u64) -> ChaCha8Rng {
    let mut r = ChaCha8Rng::seed_from_u64(seed);
    r.set_stream(stream);
    r
}

/// Title durations by rank (index 0 = rank 1): the first draws of the
/// catalog stream.
pub(crate) fn draw_durations(spec: &Spec, r: &mut ChaCha8Rng) -> Vec<f64> {
    let c = &spec.catalog;
    let mut durations: Vec<f64> = (0..c.titles)
        .map(|_| round_ms(c.duration.sample(r)))
        .collect();
    let median = round_ms(c.duration.median());
    for d in durations.iter_mut().take(c.median_duration_top as usize) {
        *d = median;
    }
    durations
}

/// Estimates what the catalog of a spec (every value already in bounds, see
/// [`Spec::validate`]) would hold, and reports each size over its limit in
/// [`crate::limits`]: request units of one title, of the whole catalog, and
/// bytes of the file set. Draws the real title durations (one `f64` per
/// title), so the estimate is exact up to which titles get a representation
/// of share below 1 (counted by its share). Nothing larger is allocated.
pub fn size_problems(spec: &Spec) -> Problems {
    let mut p = Problems::default();
    let c = &spec.catalog;
    let req_s = spec.sessions.request_s;
    let mut r = rng(spec.measurement.seed, CATALOG_STREAM);
    let durations = draw_durations(spec, &mut r);
    let pad_units = c
        .storage
        .pad_s
        .map_or(1.0, |p| (p / req_s).round().max(1.0));
    let per_chunk = c
        .storage
        .chunk_s
        .map_or(1.0, |ch| (ch / req_s).round().max(1.0));
    let mut longest = (0.0f64, 0.0f64, 0usize);
    let mut all_units = 0.0f64;
    for (rank0, &d) in durations.iter().enumerate() {
        let units = ((d / req_s) - 1e-9).ceil().max(1.0);
        let padded = (units / pad_units).ceil() * pad_units;
        let stored = match c.storage.layout {
            Layout::Chunked => (padded / per_chunk).ceil() * per_chunk,
            Layout::Single => padded,
        };
        if stored > longest.1 {
            longest = (d, stored, rank0 + 1);
        }
        all_units += stored;
    }
    let (dur, most, rank) = longest;
    if most > limits::MAX_TITLE_UNITS as f64 {
        p.push(
            "catalog.duration",
            format!(
                "the title of rank {rank} lasts {dur} s: {most} requests of {req_s} s (padding and whole chunks included), more than the limit of {} per title and representation",
                limits::MAX_TITLE_UNITS
            ),
        );
    }
    let shares: f64 = match c.ladder {
        Ladder::Nested => c.representations.iter().map(|r| r.share.min(1.0)).sum(),
        Ladder::Partition => 1.0,
    };
    let units = all_units * shares;
    if units > limits::MAX_CATALOG_UNITS as f64 {
        p.push(
            "catalog",
            format!(
                "{} titles x {} representation(s) would make about {units:.0} requests of {req_s} s to store, more than the limit of {}; lower catalog.titles or the durations, or raise sessions.request_s",
                c.titles,
                c.representations.len(),
                limits::MAX_CATALOG_UNITS
            ),
        );
    }
    let mut bytes = 0.0f64;
    for rep in &c.representations {
        let request_bytes = (req_s * rep.bitrate_kbps * 125.0).round().max(1.0);
        let share = match c.ladder {
            Ladder::Nested => rep.share.min(1.0),
            Ladder::Partition => rep.share,
        };
        bytes += all_units * share * request_bytes;
    }
    if bytes > limits::MAX_FILESET_BYTES as f64 {
        p.push(
            "catalog",
            format!(
                "the file set would take about {bytes:.3e} bytes, more than the limit of {} (1 PiB)",
                limits::MAX_FILESET_BYTES
            ),
        );
    }
    p
}

pub(crate) fn round_ms(s: f64) -> f64 {
    (s * 1000.0).round() / 1000.0
}
