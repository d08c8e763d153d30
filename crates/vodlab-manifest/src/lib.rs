//! Streaming manifests for vodlab workloads.
//!
//! A workload whose spec has `[catalog.manifests]` gets, for every title, an
//! MPEG-DASH MPD (`{title}/manifest.mpd`) and an HLS multivariant playlist
//! (`{title}/master.m3u8`) with one media playlist per representation. Their
//! segments are the workload's request units, so a player fetching segment
//! `i` asks for exactly the bytes a scripted session asks for as request `i`:
//!
//! - chunked layout with one request per chunk: `SegmentTemplate` with
//!   `$Number%05d$` (DASH) and one URI per segment (HLS);
//! - chunked layout with several requests per chunk, and the single-file
//!   layout: `SegmentList` with `mediaRange` (DASH) and `EXT-X-BYTERANGE`
//!   (HLS). Synthetic media has no `sidx` box, so the `SegmentBase` /
//!   `indexRange` form of one-file layouts is written only for real media.
//!
//! Every representation has an init segment (synthetic, `init_bytes` long).
//! [`Presentation`] is the model both writers start from and both parsers
//! return, so a player can work from a DASH or an HLS manifest alike.
//! Nothing here does I/O.

#![warn(missing_docs)]

mod dash;
mod error;
mod hls;

pub use dash::{parse_mpd, write_mpd};
pub use error::ManifestError;
pub use hls::{hls_presentation, parse_master, parse_media, write_hls, MediaInfo, Variant};

use vodlab_workload::construct::Title;
use vodlab_workload::script::ByteRange;
use vodlab_workload::spec::parse_resolution;
use vodlab_workload::Catalog;

/// File name of a title's DASH manifest, inside the title's directory.
pub const MPD_NAME: &str = "manifest.mpd";
/// File name of a title's HLS multivariant playlist.
pub const MASTER_NAME: &str = "master.m3u8";
/// Codecs announced for every representation (H.264 High 3.1, as the
/// `dash-vod` ladder's real media is encoded).
pub const VIDEO_CODECS: &str = "avc1.64001f";

/// A reference to a segment: a URL relative to the manifest's directory and
/// an optional inclusive byte range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentRef {
    /// URL relative to the manifest (no leading `/`).
    pub url: String,
    /// Inclusive byte range `(first, last)`; `None` = the whole resource.
    pub range: Option<(u64, u64)>,
}

impl SegmentRef {
    /// Bytes of the segment when its range is known.
    pub fn len(&self) -> Option<u64> {
        self.range.map(|(a, b)| b - a + 1)
    }

    /// Whether the range is known to be empty (never, for a valid range).
    pub fn is_empty(&self) -> bool {
        false
    }
}

/// One representation (rendition) of a presentation.
#[derive(Debug, Clone, PartialEq)]
pub struct Level {
    /// Representation id (the ladder name, e.g. `720p`).
    pub id: String,
    /// Announced bandwidth in bit/s.
    pub bandwidth_bps: u64,
    /// Picture size, when announced.
    pub resolution: Option<(u32, u32)>,
    /// The init segment.
    pub init: Option<SegmentRef>,
    /// Media segments in play order.
    pub segments: Vec<SegmentRef>,
}

/// What a player needs from a manifest: the levels and their segments.
#[derive(Debug, Clone, PartialEq)]
pub struct Presentation {
    /// Total duration, seconds.
    pub duration_s: f64,
    /// Nominal duration of one segment, seconds (the last may be shorter).
    pub segment_s: f64,
    /// Levels in ascending bandwidth.
    pub levels: Vec<Level>,
}

/// A manifest file of the file set: path relative to the root and its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestFile {
    /// Path relative to the file-set root.
    pub rel: String,
    /// UTF-8 content.
    pub text: String,
}

fn range_pair(r: &ByteRange) -> (u64, u64) {
    (r.start, r.end.unwrap_or(r.start))
}

/// The presentation of `title` as the catalog stores it. URLs are relative
/// to the title's directory.
pub fn presentation(catalog: &Catalog, title: &Title) -> Presentation {
    let prefix = format!("/{}/", title.name);
    let strip = |p: String| -> String { p.strip_prefix(&prefix).unwrap_or(&p).to_string() };
    let mut levels: Vec<Level> = title
        .representations
        .iter()
        .map(|tr| {
            let info = &catalog.representations[tr.rep];
            let segments = (0..tr.requests)
                .map(|u| {
                    let (path, range) = catalog.request(title, tr, u);
                    SegmentRef {
                        url: strip(path),
                        range: range.as_ref().map(range_pair),
                    }
                })
                .collect();
            let init = catalog.manifests.as_ref().map(|_| SegmentRef {
                url: strip(format!("/{}", catalog.init_path(title, tr.rep))),
                range: None,
            });
            Level {
                id: info.name.clone(),
                bandwidth_bps: info.bitrate_bps(),
                resolution: info.resolution.as_deref().and_then(parse_resolution),
                init,
                segments,
            }
        })
        .collect();
    levels.sort_by_key(|l| l.bandwidth_bps);
    Presentation {
        duration_s: title.duration_s,
        segment_s: catalog.request_s,
        levels,
    }
}

/// The manifest files of one title (empty when the catalog has no
/// `manifests`): the MPD, the HLS master playlist, then the media playlists.
pub fn title_manifests(catalog: &Catalog, title: &Title) -> Vec<ManifestFile> {
    let Some(m) = &catalog.manifests else {
        return Vec::new();
    };
    let p = presentation(catalog, title);
    let mut out = Vec::new();
    if m.dash {
        out.push(ManifestFile {
            rel: format!("{}/{MPD_NAME}", title.name),
            text: write_mpd(&p),
        });
    }
    if m.hls {
        for (name, text) in write_hls(&p) {
            out.push(ManifestFile {
                rel: format!("{}/{name}", title.name),
                text,
            });
        }
    }
    out
}

/// Every manifest file of the catalog, title by title in creation order,
/// generated as the iterator advances (the texts of a large catalog are
/// never all held at once).
pub fn manifests(catalog: &Catalog) -> impl Iterator<Item = ManifestFile> + '_ {
    catalog
        .titles
        .iter()
        .flat_map(move |t| title_manifests(catalog, t))
}

/// Resolves `rel` (a segment or playlist URL from a manifest) against the
/// URL path of the manifest it came from (`/t00001/manifest.mpd`), giving an
/// absolute path. Absolute `rel` paths are returned as they are.
pub fn resolve(manifest_path: &str, rel: &str) -> String {
    if rel.starts_with('/') {
        return rel.to_string();
    }
    let dir = match manifest_path.rfind('/') {
        Some(i) => &manifest_path[..=i],
        None => "/",
    };
    let mut parts: Vec<&str> = dir.split('/').filter(|s| !s.is_empty()).collect();
    for seg in rel.split('/') {
        match seg {
            "." | "" => {}
            ".." => {
                parts.pop();
            }
            s => parts.push(s),
        }
    }
    format!("/{}", parts.join("/"))
}

#[cfg(test)]
mod tests;
