//! HLS playlists (RFC 8216), written and read through `m3u8-rs`.

use m3u8_rs::{
    ByteRange, Map, MasterPlaylist, MediaPlaylist, MediaPlaylistType, MediaSegment, Playlist,
    Resolution, VariantStream,
};

use crate::dash::MAX_SEGMENTS;
use crate::{Level, ManifestError, Presentation, SegmentRef, MASTER_NAME, VIDEO_CODECS};

/// HLS version 7: fragmented-MP4 segments with `EXT-X-MAP` (RFC 8216 §7).
const VERSION: usize = 7;

fn media_name(level: &Level) -> String {
    format!("{}.m3u8", level.id)
}

fn durations(p: &Presentation, n: usize) -> impl Iterator<Item = f64> + '_ {
    (0..n).map(move |i| {
        let start = i as f64 * p.segment_s;
        (p.duration_s - start).clamp(0.001, p.segment_s)
    })
}

fn text(write: impl FnOnce(&mut Vec<u8>) -> std::io::Result<()>) -> String {
    let mut out = Vec::new();
    write(&mut out).expect("writing to a Vec cannot fail");
    String::from_utf8(out).expect("m3u8-rs writes UTF-8")
}

/// Writes the multivariant playlist (`master.m3u8`) and one media playlist
/// per level (`{id}.m3u8`): (file name, text), master first.
pub fn write_hls(p: &Presentation) -> Vec<(String, String)> {
    let master = MasterPlaylist {
        version: Some(VERSION),
        independent_segments: true,
        variants: p
            .levels
            .iter()
            .map(|l| VariantStream {
                uri: media_name(l),
                bandwidth: l.bandwidth_bps,
                codecs: Some(VIDEO_CODECS.into()),
                resolution: l.resolution.map(|(w, h)| Resolution {
                    width: w as u64,
                    height: h as u64,
                }),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    };
    let mut out = vec![(MASTER_NAME.to_string(), text(|w| master.write_to(w)))];
    for l in &p.levels {
        let map = l.init.as_ref().map(|i| Map {
            uri: i.url.clone(),
            byte_range: i.range.map(|(a, b)| ByteRange {
                length: b - a + 1,
                offset: Some(a),
            }),
            ..Default::default()
        });
        let segments: Vec<MediaSegment> = l
            .segments
            .iter()
            .zip(durations(p, l.segments.len()))
            .enumerate()
            .map(|(i, (s, d))| MediaSegment {
                uri: s.url.clone(),
                duration: d as f32,
                byte_range: s.range.map(|(a, b)| ByteRange {
                    length: b - a + 1,
                    offset: Some(a),
                }),
                map: if i == 0 { map.clone() } else { None },
                ..Default::default()
            })
            .collect();
        let media = MediaPlaylist {
            version: Some(VERSION),
            target_duration: p.segment_s.ceil() as u64,
            media_sequence: 0,
            segments,
            end_list: true,
            playlist_type: Some(MediaPlaylistType::Vod),
            independent_segments: true,
            ..Default::default()
        };
        out.push((media_name(l), text(|w| media.write_to(w))));
    }
    out
}

/// One variant of a multivariant playlist.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Variant {
    /// Media playlist URI, relative to the master playlist.
    pub uri: String,
    /// `BANDWIDTH`, bit/s.
    pub bandwidth_bps: u64,
    /// `RESOLUTION`, when given.
    pub resolution: Option<(u32, u32)>,
}

/// A parsed media playlist.
#[derive(Debug, Clone, PartialEq)]
pub struct MediaInfo {
    /// The `EXT-X-MAP` init segment.
    pub init: Option<SegmentRef>,
    /// Segments in order.
    pub segments: Vec<SegmentRef>,
    /// `EXTINF` duration of each segment, seconds.
    pub durations_s: Vec<f64>,
    /// `EXT-X-TARGETDURATION`, seconds.
    pub target_duration_s: f64,
}

fn kind(p: &Playlist) -> &'static str {
    match p {
        Playlist::MasterPlaylist(_) => "multivariant (master)",
        Playlist::MediaPlaylist(_) => "media",
    }
}

fn parse(text: &str) -> Result<Playlist, ManifestError> {
    if !text.trim_start().starts_with("#EXTM3U") {
        return Err(ManifestError::Playlist(
            "does not start with #EXTM3U".into(),
        ));
    }
    m3u8_rs::parse_playlist_res(text.as_bytes()).map_err(|e| {
        let msg = e.to_string();
        ManifestError::Playlist(msg.chars().take(200).collect())
    })
}

/// Parses a multivariant (master) playlist into its variants, lowest
/// bandwidth first.
pub fn parse_master(text: &str) -> Result<Vec<Variant>, ManifestError> {
    let pl = parse(text)?;
    let Playlist::MasterPlaylist(m) = pl else {
        return Err(ManifestError::WrongPlaylistKind {
            expected: "multivariant (master)",
            found: kind(&pl),
        });
    };
    let mut out: Vec<Variant> = m
        .variants
        .iter()
        .filter(|v| !v.is_i_frame)
        .map(|v| Variant {
            uri: v.uri.clone(),
            bandwidth_bps: v.bandwidth,
            resolution: v.resolution.map(|r| (r.width as u32, r.height as u32)),
        })
        .collect();
    if out.is_empty() {
        return Err(ManifestError::Missing {
            at: "multivariant playlist".into(),
            what: "an EXT-X-STREAM-INF variant",
        });
    }
    if let Some(v) = out.iter().find(|v| v.uri.is_empty()) {
        return Err(ManifestError::Missing {
            at: format!("variant of BANDWIDTH={}", v.bandwidth_bps),
            what: "a URI",
        });
    }
    out.sort_by_key(|v| v.bandwidth_bps);
    Ok(out)
}

fn byte_range(r: &ByteRange, next: &mut u64, at: &str) -> Result<(u64, u64), ManifestError> {
    let start = r.offset.unwrap_or(*next);
    if r.length == 0 {
        return Err(ManifestError::Invalid {
            at: at.into(),
            what: "EXT-X-BYTERANGE of length 0".into(),
        });
    }
    let end = start
        .checked_add(r.length - 1)
        .ok_or_else(|| ManifestError::Invalid {
            at: at.into(),
            what: "EXT-X-BYTERANGE past 2^64".into(),
        })?;
    *next = end + 1;
    Ok((start, end))
}

/// Parses a media playlist. Only VOD playlists (with `EXT-X-ENDLIST`) are
/// followed: a live playlist would need reloading.
pub fn parse_media(text: &str) -> Result<MediaInfo, ManifestError> {
    let pl = parse(text)?;
    let Playlist::MediaPlaylist(m) = pl else {
        return Err(ManifestError::WrongPlaylistKind {
            expected: "media",
            found: kind(&pl),
        });
    };
    if !m.end_list && m.playlist_type != Some(MediaPlaylistType::Vod) {
        return Err(ManifestError::Unsupported {
            at: "media playlist".into(),
            what: "a live playlist (no EXT-X-ENDLIST)",
        });
    }
    if m.segments.is_empty() {
        return Err(ManifestError::Missing {
            at: "media playlist".into(),
            what: "segments",
        });
    }
    if m.segments.len() as u64 > MAX_SEGMENTS {
        return Err(ManifestError::Invalid {
            at: "media playlist".into(),
            what: format!("more than {MAX_SEGMENTS} segments"),
        });
    }
    let mut init = None;
    let mut next = 0u64;
    let mut segments = Vec::with_capacity(m.segments.len());
    let mut durations_s = Vec::with_capacity(m.segments.len());
    for (i, s) in m.segments.iter().enumerate() {
        let at = format!("segment {i} ({})", s.uri);
        if let Some(map) = &s.map {
            if init.is_some() && i > 0 {
                return Err(ManifestError::Unsupported {
                    at,
                    what: "a second EXT-X-MAP",
                });
            }
            let mut n = 0;
            init = Some(SegmentRef {
                url: map.uri.clone(),
                range: map
                    .byte_range
                    .as_ref()
                    .map(|r| byte_range(r, &mut n, &at))
                    .transpose()?,
            });
        }
        if !(s.duration.is_finite() && s.duration >= 0.0) {
            return Err(ManifestError::Invalid {
                at,
                what: format!("EXTINF duration {}", s.duration),
            });
        }
        segments.push(SegmentRef {
            url: s.uri.clone(),
            range: s
                .byte_range
                .as_ref()
                .map(|r| byte_range(r, &mut next, &at))
                .transpose()?,
        });
        durations_s.push(s.duration as f64);
    }
    Ok(MediaInfo {
        init,
        segments,
        durations_s,
        target_duration_s: m.target_duration as f64,
    })
}

/// Assembles a presentation from a master playlist's variants and their
/// media playlists (same order).
pub fn hls_presentation(
    variants: &[Variant],
    media: &[MediaInfo],
) -> Result<Presentation, ManifestError> {
    if variants.len() != media.len() {
        return Err(ManifestError::Invalid {
            at: "multivariant playlist".into(),
            what: format!(
                "{} variants but {} media playlists",
                variants.len(),
                media.len()
            ),
        });
    }
    let duration_s = media
        .iter()
        .map(|m| m.durations_s.iter().sum::<f64>())
        .fold(0.0, f64::max);
    let segment_s = media
        .iter()
        .map(|m| m.target_duration_s)
        .fold(0.0, f64::max);
    let levels = variants
        .iter()
        .zip(media)
        .map(|(v, m)| Level {
            id: v.uri.trim_end_matches(".m3u8").to_string(),
            bandwidth_bps: v.bandwidth_bps,
            resolution: v.resolution,
            init: m.init.clone(),
            segments: m.segments.clone(),
        })
        .collect();
    Ok(Presentation {
        duration_s,
        segment_s,
        levels,
    })
}
