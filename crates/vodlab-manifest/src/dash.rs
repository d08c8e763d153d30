//! MPEG-DASH MPDs (ISO/IEC 23009-1), written and read through the typed
//! model of `dash-mpd-core`.

use std::time::Duration;

use dash_mpd_core::{
    AdaptationSet, Initialization, Period, Representation, SegmentList, SegmentTemplate,
    SegmentURL, MPD,
};

use crate::{Level, ManifestError, Presentation, SegmentRef, VIDEO_CODECS};

const TIMESCALE: u64 = 1000;
const NS: &str = "urn:mpeg:dash:schema:mpd:2011";
/// Static MPD with `SegmentTemplate`/`$Number$` (what dash.js and shaka test).
const PROFILE_LIVE: &str = "urn:mpeg:dash:profile:isoff-live:2011";
/// `SegmentList` with byte ranges falls outside the on-demand and live profiles.
const PROFILE_FULL: &str = "urn:mpeg:dash:profile:full:2011";
const MEDIA_TEMPLATE: &str = "$RepresentationID$/$Number%05d$.m4s";
const INIT_TEMPLATE: &str = "$RepresentationID$/init.mp4";

fn range_text(r: (u64, u64)) -> String {
    format!("{}-{}", r.0, r.1)
}

/// Whether every level's segments are `{id}/{n:05}.m4s` from 0, whole files,
/// with init `{id}/init.mp4`: then one `SegmentTemplate` describes them.
fn fits_template(p: &Presentation) -> bool {
    p.levels.iter().all(|l| {
        l.init
            .as_ref()
            .is_some_and(|i| i.range.is_none() && i.url == format!("{}/init.mp4", l.id))
            && l.segments
                .iter()
                .enumerate()
                .all(|(n, s)| s.range.is_none() && s.url == format!("{}/{n:05}.m4s", l.id))
    })
}

fn ms(s: f64) -> u64 {
    (s * TIMESCALE as f64).round() as u64
}

/// Writes a static, single-period MPD for a presentation.
pub fn write_mpd(p: &Presentation) -> String {
    let template = fits_template(p);
    let representations = p
        .levels
        .iter()
        .map(|l| {
            let mut r = Representation {
                id: Some(l.id.clone()),
                bandwidth: Some(l.bandwidth_bps),
                width: l.resolution.map(|(w, _)| w as u64),
                height: l.resolution.map(|(_, h)| h as u64),
                ..Default::default()
            };
            if !template {
                r.SegmentList = Some(SegmentList {
                    timescale: Some(TIMESCALE),
                    duration: Some(ms(p.segment_s)),
                    Initialization: l.init.as_ref().map(|i| Initialization {
                        sourceURL: Some(i.url.clone()),
                        range: i.range.map(range_text),
                    }),
                    segment_urls: l
                        .segments
                        .iter()
                        .map(|s| SegmentURL {
                            media: Some(s.url.clone()),
                            mediaRange: s.range.map(range_text),
                            ..Default::default()
                        })
                        .collect(),
                    ..Default::default()
                });
            }
            r
        })
        .collect();
    let adaptation = AdaptationSet {
        id: Some("0".into()),
        contentType: Some("video".into()),
        mimeType: Some("video/mp4".into()),
        codecs: Some(VIDEO_CODECS.into()),
        segmentAlignment: Some(true),
        startWithSAP: Some(1),
        SegmentTemplate: template.then(|| SegmentTemplate {
            media: Some(MEDIA_TEMPLATE.into()),
            initialization: Some(INIT_TEMPLATE.into()),
            startNumber: Some(0),
            timescale: Some(TIMESCALE),
            duration: Some(ms(p.segment_s) as f64),
            ..Default::default()
        }),
        representations,
        ..Default::default()
    };
    let mpd = MPD {
        xmlns: Some(NS.into()),
        profiles: Some(if template { PROFILE_LIVE } else { PROFILE_FULL }.into()),
        mpdtype: Some("static".into()),
        mediaPresentationDuration: Some(Duration::from_millis(ms(p.duration_s))),
        minBufferTime: Some(Duration::from_secs(2)),
        periods: vec![Period {
            id: Some("0".into()),
            start: Some(Duration::ZERO),
            adaptations: vec![adaptation],
            ..Default::default()
        }],
        ..Default::default()
    };
    format!("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n{mpd}\n")
}

/// Expands a `SegmentTemplate` pattern (`$RepresentationID$`, `$Bandwidth$`,
/// `$Number$` with an optional `%0Nd` width, `$$`).
fn expand(
    pattern: &str,
    id: &str,
    bandwidth: u64,
    number: u64,
    at: &str,
) -> Result<String, ManifestError> {
    let mut out = String::with_capacity(pattern.len() + 8);
    let mut rest = pattern;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        let Some(j) = after.find('$') else {
            return Err(ManifestError::Invalid {
                at: at.into(),
                what: format!("unterminated `$` identifier in template {pattern:?}"),
            });
        };
        let ident = &after[..j];
        let (name, fmt) = match ident.split_once('%') {
            Some((n, f)) => (n, Some(f)),
            None => (ident, None),
        };
        let value = match name {
            "" => "$".to_string(),
            "RepresentationID" => id.to_string(),
            "Bandwidth" => bandwidth.to_string(),
            "Number" => number.to_string(),
            "Time" => {
                return Err(ManifestError::Unsupported {
                    at: at.into(),
                    what: "$Time$ (SegmentTimeline addressing)",
                })
            }
            other => {
                return Err(ManifestError::Invalid {
                    at: at.into(),
                    what: format!("unknown template identifier ${other}$ in {pattern:?}"),
                })
            }
        };
        match fmt {
            None => out.push_str(&value),
            Some(f) => {
                let width = f
                    .strip_prefix('0')
                    .and_then(|w| w.strip_suffix('d'))
                    .and_then(|w| w.parse::<usize>().ok())
                    .filter(|w| *w <= 32)
                    .ok_or_else(|| ManifestError::Invalid {
                        at: at.into(),
                        what: format!("bad width format %{f} in {pattern:?}"),
                    })?;
                out.push_str(&format!("{value:0>width$}"));
            }
        }
        rest = &after[j + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

fn parse_range(text: &str, at: &str) -> Result<(u64, u64), ManifestError> {
    let bad = || ManifestError::Invalid {
        at: at.into(),
        what: format!("byte range {text:?} is not FIRST-LAST with FIRST <= LAST"),
    };
    let (a, b) = text.split_once('-').ok_or_else(bad)?;
    let a: u64 = a.trim().parse().map_err(|_| bad())?;
    let b: u64 = b.trim().parse().map_err(|_| bad())?;
    if a > b {
        return Err(bad());
    }
    Ok((a, b))
}

/// Most segments one representation may list or imply (a 24-hour title at
/// 0.5 s segments): bounds what a hostile MPD can make a player allocate.
pub const MAX_SEGMENTS: u64 = 172_800;

fn segment_count(duration_s: f64, seg_s: f64, at: &str) -> Result<u64, ManifestError> {
    if !(seg_s.is_finite() && seg_s > 0.0) {
        return Err(ManifestError::Invalid {
            at: at.into(),
            what: format!("segment duration {seg_s} s is not positive"),
        });
    }
    let n = ((duration_s / seg_s) - 1e-9).ceil().max(1.0);
    if n > MAX_SEGMENTS as f64 {
        return Err(ManifestError::Invalid {
            at: at.into(),
            what: format!("{n} segments, more than the limit of {MAX_SEGMENTS}"),
        });
    }
    Ok(n as u64)
}

/// Parses a static single-period MPD into a [`Presentation`]. Segment URLs
/// stay relative as written (resolve them with [`crate::resolve`]).
pub fn parse_mpd(xml: &str) -> Result<Presentation, ManifestError> {
    let mpd = dash_mpd_core::parse(xml).map_err(|e| ManifestError::Xml(e.to_string()))?;
    if mpd.mpdtype.as_deref() == Some("dynamic") {
        return Err(ManifestError::Unsupported {
            at: "MPD@type".into(),
            what: "a dynamic (live) MPD",
        });
    }
    let period = match mpd.periods.as_slice() {
        [] => {
            return Err(ManifestError::Missing {
                at: "MPD".into(),
                what: "a Period",
            })
        }
        [p] => p,
        _ => {
            return Err(ManifestError::Unsupported {
                at: "MPD".into(),
                what: "more than one Period",
            })
        }
    };
    let duration_s = mpd
        .mediaPresentationDuration
        .or(period.duration)
        .map(|d| d.as_secs_f64())
        .ok_or_else(|| ManifestError::Missing {
            at: "MPD".into(),
            what: "mediaPresentationDuration (or Period@duration)",
        })?;
    let mut levels = Vec::new();
    let mut segment_s = 0.0f64;
    for (ai, a) in period.adaptations.iter().enumerate() {
        let is_video = a.contentType.as_deref() == Some("video")
            || a.mimeType
                .as_deref()
                .is_some_and(|m| m.starts_with("video/"));
        let is_other = a.contentType.as_deref().is_some_and(|c| c != "video")
            || a.mimeType
                .as_deref()
                .is_some_and(|m| !m.starts_with("video/"));
        if !is_video && is_other {
            continue;
        }
        for (ri, r) in a.representations.iter().enumerate() {
            let at = format!("Period[0]/AdaptationSet[{ai}]/Representation[{ri}]");
            let id = r.id.clone().ok_or_else(|| ManifestError::Missing {
                at: at.clone(),
                what: "@id",
            })?;
            let bandwidth = r.bandwidth.ok_or_else(|| ManifestError::Missing {
                at: at.clone(),
                what: "@bandwidth",
            })?;
            let resolution = match (r.width.or(a.width), r.height.or(a.height)) {
                (Some(w), Some(h)) => Some((w as u32, h as u32)),
                _ => None,
            };
            let (init, segments, seg_s) = if let Some(list) = &r.SegmentList {
                let ts = list.timescale.unwrap_or(1).max(1) as f64;
                let seg_s = list.duration.ok_or_else(|| ManifestError::Missing {
                    at: format!("{at}/SegmentList"),
                    what: "@duration",
                })? as f64
                    / ts;
                if list.segment_urls.len() as u64 > MAX_SEGMENTS {
                    return Err(ManifestError::Invalid {
                        at: format!("{at}/SegmentList"),
                        what: format!("more than {MAX_SEGMENTS} SegmentURLs"),
                    });
                }
                let init = match &list.Initialization {
                    Some(i) => Some(SegmentRef {
                        url: i.sourceURL.clone().ok_or_else(|| ManifestError::Missing {
                            at: format!("{at}/SegmentList/Initialization"),
                            what: "@sourceURL",
                        })?,
                        range: i
                            .range
                            .as_deref()
                            .map(|t| parse_range(t, &format!("{at}/SegmentList/Initialization")))
                            .transpose()?,
                    }),
                    None => None,
                };
                let mut segs = Vec::with_capacity(list.segment_urls.len());
                for (si, s) in list.segment_urls.iter().enumerate() {
                    let sat = format!("{at}/SegmentList/SegmentURL[{si}]");
                    segs.push(SegmentRef {
                        url: s.media.clone().ok_or_else(|| ManifestError::Missing {
                            at: sat.clone(),
                            what: "@media",
                        })?,
                        range: s
                            .mediaRange
                            .as_deref()
                            .map(|t| parse_range(t, &sat))
                            .transpose()?,
                    });
                }
                (init, segs, seg_s)
            } else if let Some(t) = r.SegmentTemplate.as_ref().or(a.SegmentTemplate.as_ref()) {
                let tat = format!("{at}/SegmentTemplate");
                if t.SegmentTimeline.is_some() {
                    return Err(ManifestError::Unsupported {
                        at: tat,
                        what: "SegmentTimeline",
                    });
                }
                let media = t.media.as_deref().ok_or_else(|| ManifestError::Missing {
                    at: tat.clone(),
                    what: "@media",
                })?;
                let ts = t.timescale.unwrap_or(1).max(1) as f64;
                let seg_s = t.duration.ok_or_else(|| ManifestError::Missing {
                    at: tat.clone(),
                    what: "@duration",
                })? / ts;
                let n = segment_count(duration_s, seg_s, &tat)?;
                let first = t.startNumber.unwrap_or(1);
                let init = t
                    .initialization
                    .as_deref()
                    .map(|i| -> Result<SegmentRef, ManifestError> {
                        Ok(SegmentRef {
                            url: expand(i, &id, bandwidth, first, &tat)?,
                            range: None,
                        })
                    })
                    .transpose()?;
                let segs = (0..n)
                    .map(|k| {
                        Ok(SegmentRef {
                            url: expand(media, &id, bandwidth, first + k, &tat)?,
                            range: None,
                        })
                    })
                    .collect::<Result<Vec<_>, ManifestError>>()?;
                (init, segs, seg_s)
            } else if r.SegmentBase.is_some() || a.SegmentBase.is_some() {
                return Err(ManifestError::Unsupported {
                    at,
                    what: "SegmentBase (segment offsets are in the media's sidx box)",
                });
            } else {
                return Err(ManifestError::Missing {
                    at,
                    what: "SegmentTemplate, SegmentList or SegmentBase",
                });
            };
            if segments.is_empty() {
                return Err(ManifestError::Missing {
                    at,
                    what: "media segments",
                });
            }
            segment_s = segment_s.max(seg_s);
            levels.push(Level {
                id,
                bandwidth_bps: bandwidth,
                resolution,
                init,
                segments,
            });
        }
    }
    if levels.is_empty() {
        return Err(ManifestError::Missing {
            at: "Period[0]".into(),
            what: "a video Representation",
        });
    }
    levels.sort_by_key(|l| l.bandwidth_bps);
    Ok(Presentation {
        duration_s,
        segment_s,
        levels,
    })
}
