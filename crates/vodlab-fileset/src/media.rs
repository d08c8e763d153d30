//! Real media (`vodlab fileset create --media real`): a test pattern
//! encoded by ffmpeg into the workload ladder's H.264 renditions plus one
//! AAC audio rendition, as fragmented-MP4 segments at exactly the paths the
//! workload's manifests and session scripts name, with manifests a browser
//! (dash.js, hls.js, Safari) can play.
//!
//! Layout: only the chunked layout with one request per chunk (DASH
//! `SegmentTemplate` / `$Number%05d$`, one file per segment) is supported:
//! there the manifests carry no byte sizes, so the real segment sizes (which
//! differ from the synthetic ones) need no rewriting of manifests or session
//! scripts. Other layouts are refused with [`FilesetError::RealMedia`].
//!
//! Per representation ffmpeg encodes `testsrc2` at the rendition's picture
//! size and bit rate (x264, closed GOPs of exactly one segment: `-g` and
//! `-keyint_min` = fps x segment seconds, `-sc_threshold 0`,
//! `-force_key_frames` at every segment start) and packages it with its HLS
//! muxer as fMP4 (`init.mp4`, `00000.m4s`, ...), which is also what a DASH
//! `SegmentTemplate` with `startNumber=0` addresses. Audio (`sine`, AAC-LC)
//! goes to `{title}/audio/`. The MPD and playlists are the catalog's
//! ([`vodlab_manifest`]) with the real codecs strings (read from each init
//! segment's `avcC` box) and the audio rendition added.
//!
//! `media.json` in the root records every file written and its size;
//! [`verify_real`] checks presence and sizes against it (the content is not
//! synthetic, so it cannot be checked byte for byte).

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use dash_mpd_core::{AdaptationSet, Representation};
use m3u8_rs::{AlternativeMedia, AlternativeMediaType, MasterPlaylist, VariantStream};
use serde::{Deserialize, Serialize};
use vodlab_manifest::{Level, Presentation, SegmentRef, MASTER_NAME, MPD_NAME};
use vodlab_workload::construct::{Catalog, Title};
use vodlab_workload::spec::{parse_resolution, Layout, RepKind};

use crate::{
    entries, io_err, manifest_of, read_manifest, write_manifest, CreateReport, Damage,
    FilesetError, Manifest, VerifyReport,
};

/// Name of the record of a real-media set's files, in the root.
pub const MEDIA_FILE: &str = "media.json";
/// Representation id (and directory) of the audio rendition.
pub const AUDIO_ID: &str = "audio";
/// Codecs string of the audio rendition (MPEG-4 AAC-LC).
pub const AUDIO_CODECS: &str = "mp4a.40.2";
const FFMPEG_PLAYLIST: &str = ".ffmpeg.m3u8";

/// Options of [`create_real`].
#[derive(Debug, Clone, PartialEq)]
pub struct RealMediaOptions {
    /// The ffmpeg binary.
    pub ffmpeg: PathBuf,
    /// Frames per second of the video.
    pub fps: u32,
    /// x264 preset (`ultrafast` keeps creation fast).
    pub preset: String,
    /// Bit rate of the AAC audio rendition, kbit/s; 0 = no audio.
    pub audio_kbps: u32,
    /// Sampling rate of the audio, Hz.
    pub audio_rate: u32,
}

impl Default for RealMediaOptions {
    fn default() -> Self {
        RealMediaOptions {
            ffmpeg: PathBuf::from("ffmpeg"),
            fps: 25,
            preset: "ultrafast".into(),
            audio_kbps: 64,
            audio_rate: 48_000,
        }
    }
}

impl RealMediaOptions {
    /// Checks the options, naming the bad one.
    pub fn validate(&self) -> Result<(), FilesetError> {
        let bad = |reason: String| Err(FilesetError::RealMedia { reason });
        if !(1..=240).contains(&self.fps) {
            return bad(format!("fps {} is not in 1..=240", self.fps));
        }
        if self.preset.is_empty() || !self.preset.chars().all(|c| c.is_ascii_alphanumeric()) {
            return bad(format!(
                "x264 preset {:?} is not a preset name",
                self.preset
            ));
        }
        if self.audio_kbps > 512 {
            return bad(format!("audio_kbps {} is above 512", self.audio_kbps));
        }
        if !(8_000..=96_000).contains(&self.audio_rate) {
            return bad(format!(
                "audio_rate {} is not in 8000..=96000",
                self.audio_rate
            ));
        }
        Ok(())
    }
}

/// One file of a real-media set and its size.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MediaFile {
    /// Path relative to the root.
    pub rel: String,
    /// Bytes.
    pub size: u64,
}

/// `media.json`: what [`create_real`] wrote.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MediaRecord {
    /// `"vodlab-media"`.
    pub format: String,
    /// 1.
    pub version: u32,
    /// Workload name.
    pub workload: String,
    /// Frames per second.
    pub fps: u32,
    /// Segment duration, seconds.
    pub segment_s: f64,
    /// Codecs string per video representation name (from the init segments).
    pub codecs: BTreeMap<String, String>,
    /// Codecs of the audio rendition, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audio_codecs: Option<String>,
    /// Every file written (media, init segments, manifests), in creation order.
    pub files: Vec<MediaFile>,
}

/// Whether `root` holds a real-media set (a `media.json`).
pub fn is_real(root: &Path) -> bool {
    root.join(MEDIA_FILE).is_file()
}

/// Reads `media.json`.
pub fn read_record(root: &Path) -> Result<MediaRecord, FilesetError> {
    let p = root.join(MEDIA_FILE);
    let text = fs::read_to_string(&p).map_err(io_err(&p))?;
    serde_json::from_str(&text).map_err(|e| FilesetError::Manifest {
        path: p,
        reason: e.to_string(),
    })
}

/// Segment seconds and GOP length in frames for this catalog, or why real
/// media cannot be made for it: only the chunked layout with one whole-file
/// request per chunk, manifests on, every rendition a video one with a
/// picture size, and a whole number of frames per segment.
pub fn check_layout(catalog: &Catalog, fps: u32) -> Result<(f64, u32), FilesetError> {
    let bad = |reason: String| Err(FilesetError::RealMedia { reason });
    if catalog.manifests.is_none() {
        return bad("the workload has no [catalog.manifests]: real media is packaged for DASH/HLS players; add `manifests = { dash = true, hls = true }`".into());
    }
    if catalog.layout != Layout::Chunked {
        return bad("layout `single` (one file per rendition, byte ranges in the manifests) is not supported for real media; use `storage = { layout = \"chunked\", chunk_s = ... }` with sessions.request_s equal to chunk_s".into());
    }
    let seg = catalog.request_s;
    if catalog.chunk_s.is_some_and(|c| (c - seg).abs() > 1e-9) {
        return bad(format!(
            "chunk_s {} differs from request_s {seg}: requests are byte ranges of chunks, which real media cannot keep (its sizes differ); use one request per chunk",
            catalog.chunk_s.unwrap_or(0.0)
        ));
    }
    for r in &catalog.representations {
        if r.chunk_bytes != r.request_bytes {
            return bad(format!(
                "representation `{}`: several requests per chunk (byte ranges) are not supported for real media",
                r.name
            ));
        }
        if r.kind != RepKind::Video {
            return bad(format!(
                "representation `{}` is {}; real media encodes video renditions (and adds its own audio)",
                r.name,
                r.kind.name()
            ));
        }
        if r.name == AUDIO_ID {
            return bad(format!(
                "representation `{AUDIO_ID}`: the name is taken by the audio rendition"
            ));
        }
        let Some((w, h)) = r.resolution.as_deref().and_then(parse_resolution) else {
            return bad(format!(
                "representation `{}` has no resolution (WIDTHxHEIGHT) to encode at",
                r.name
            ));
        };
        if w % 2 != 0 || h % 2 != 0 {
            return bad(format!(
                "representation `{}`: {w}x{h} is odd; H.264 4:2:0 needs even sizes",
                r.name
            ));
        }
    }
    let frames = seg * fps as f64;
    if (frames - frames.round()).abs() > 1e-6 || frames < 1.0 {
        return bad(format!(
            "{seg} s segments at {fps} fps are not a whole number of frames"
        ));
    }
    Ok((seg, frames.round() as u32))
}

/// ffmpeg's arguments for one video rendition, written into the current
/// directory as `init.mp4` and `%05d.m4s` from 0.
pub fn video_args(
    opts: &RealMediaOptions,
    size: (u32, u32),
    kbps: f64,
    duration_s: f64,
    segment_s: f64,
) -> Vec<String> {
    let gop = (segment_s * opts.fps as f64).round() as u32;
    let kbps = kbps.round().max(1.0) as u64;
    let mut a: Vec<String> = [
        "-hide_banner",
        "-nostdin",
        "-loglevel",
        "error",
        "-y",
        "-f",
        "lavfi",
        "-i",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    a.push(format!(
        "testsrc2=size={}x{}:rate={}:duration={duration_s}",
        size.0, size.1, opts.fps
    ));
    for s in [
        "-map",
        "0:v",
        "-c:v",
        "libx264",
        "-preset",
        &opts.preset,
        "-profile:v",
        "high",
        "-pix_fmt",
        "yuv420p",
        "-b:v",
        &format!("{kbps}k"),
        "-maxrate",
        &format!("{kbps}k"),
        "-bufsize",
        &format!("{}k", 2 * kbps),
        "-g",
        &gop.to_string(),
        "-keyint_min",
        &gop.to_string(),
        "-sc_threshold",
        "0",
        "-force_key_frames",
        &format!("expr:gte(t,n_forced*{segment_s})"),
        "-x264-params",
        "open-gop=0",
    ] {
        a.push(s.to_string());
    }
    a.extend(hls_args(segment_s));
    a
}

/// ffmpeg's arguments for the audio rendition (`sine`, AAC-LC). The tone
/// is one AAC frame (1024 samples) shorter than the title: the encoder's
/// priming frame would otherwise push the last frame to the title's end, and
/// the muxer would open one segment more than the catalog counts whenever the
/// duration is a whole number of frames.
pub fn audio_args(opts: &RealMediaOptions, duration_s: f64, segment_s: f64) -> Vec<String> {
    let duration_s = (duration_s - 1024.0 / opts.audio_rate as f64).max(0.001);
    let mut a: Vec<String> = ["-hide_banner", "-nostdin", "-loglevel", "error", "-y"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    for s in [
        "-f".to_string(),
        "lavfi".into(),
        "-i".into(),
        format!(
            "sine=frequency=440:sample_rate={}:duration={duration_s}",
            opts.audio_rate
        ),
        "-map".into(),
        "0:a".into(),
        "-c:a".into(),
        "aac".into(),
        "-b:a".into(),
        format!("{}k", opts.audio_kbps),
        "-ac".into(),
        "2".into(),
    ] {
        a.push(s);
    }
    a.extend(hls_args(segment_s));
    a
}

fn hls_args(segment_s: f64) -> Vec<String> {
    [
        "-f",
        "hls",
        "-hls_time",
        &segment_s.to_string(),
        "-hls_playlist_type",
        "vod",
        "-hls_segment_type",
        "fmp4",
        "-start_number",
        "0",
        "-hls_fmp4_init_filename",
        "init.mp4",
        "-hls_segment_filename",
        "%05d.m4s",
        "-hls_flags",
        "independent_segments",
        FFMPEG_PLAYLIST,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// The RFC 6381 codecs string of an H.264 init segment (`avc1.PPCCLL` from
/// its `avcC` box), or `None` when it has none.
pub fn avc_codecs(init: &[u8]) -> Option<String> {
    let i = init.windows(4).position(|w| w == b"avcC")?;
    let c = init.get(i + 4..i + 8)?;
    // configurationVersion, AVCProfileIndication, profile_compatibility, AVCLevelIndication
    (c[0] == 1).then(|| format!("avc1.{:02x}{:02x}{:02x}", c[1], c[2], c[3]))
}

fn run_ffmpeg(ffmpeg: &Path, args: &[String], dir: &Path) -> Result<(), FilesetError> {
    fs::create_dir_all(dir).map_err(io_err(dir))?;
    let out = Command::new(ffmpeg)
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| FilesetError::RealMedia {
            reason: if e.kind() == io::ErrorKind::NotFound {
                format!(
                    "{} not found: install ffmpeg (Debian: apt-get install ffmpeg; scripts/install-test-deps.sh)",
                    ffmpeg.display()
                )
            } else {
                format!("cannot start {}: {e}", ffmpeg.display())
            },
        })?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let tail: String = err
            .lines()
            .rev()
            .take(5)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect::<Vec<_>>()
            .join("; ");
        return Err(FilesetError::RealMedia {
            reason: format!(
                "ffmpeg failed in {} ({}): {tail}",
                dir.display(),
                out.status
            ),
        });
    }
    let _ = fs::remove_file(dir.join(FFMPEG_PLAYLIST));
    Ok(())
}

/// The files ffmpeg wrote in `dir` (init first, then the segments from 0),
/// checked to be exactly `expected` segments.
fn written(dir: &Path, expected: u32, what: &str) -> Result<Vec<(String, u64)>, FilesetError> {
    let size = |name: &str| -> Result<u64, FilesetError> {
        let p = dir.join(name);
        Ok(fs::metadata(&p).map_err(io_err(&p))?.len())
    };
    let mut out = vec![("init.mp4".to_string(), size("init.mp4")?)];
    for n in 0..expected {
        let name = format!("{n:05}.m4s");
        out.push((name.clone(), size(&name)?));
    }
    if dir.join(format!("{expected:05}.m4s")).exists() {
        return Err(FilesetError::RealMedia {
            reason: format!(
                "{what}: ffmpeg wrote more than the catalog's {expected} segments (the title's duration is not covered by whole segments as the catalog counts them)"
            ),
        });
    }
    Ok(out)
}

/// The real-media manifests of one title: (path relative to the root, text).
pub fn title_manifests(
    catalog: &Catalog,
    title: &Title,
    codecs: &BTreeMap<String, String>,
    audio: Option<(u64, u32)>,
) -> Result<Vec<(String, String)>, FilesetError> {
    let Some(spec) = &catalog.manifests else {
        return Ok(Vec::new());
    };
    let p = vodlab_manifest::presentation(catalog, title);
    let codec_of = |id: &str| codecs.get(id).cloned().unwrap_or_default();
    let mut out = Vec::new();
    if spec.dash {
        let text = vodlab_manifest::write_mpd(&p);
        let mut mpd = dash_mpd_core::parse(&text).map_err(|e| FilesetError::RealMedia {
            reason: format!("re-reading the catalog's MPD: {e}"),
        })?;
        let period = &mut mpd.periods[0];
        let video = &mut period.adaptations[0];
        video.codecs = None;
        for r in &mut video.representations {
            r.codecs = r.id.as_deref().map(codec_of);
            r.mimeType = None;
        }
        if let Some((bps, rate)) = audio {
            let a = AdaptationSet {
                id: Some("1".into()),
                contentType: Some("audio".into()),
                mimeType: Some("audio/mp4".into()),
                codecs: Some(AUDIO_CODECS.into()),
                lang: Some("und".into()),
                segmentAlignment: Some(true),
                startWithSAP: Some(1),
                SegmentTemplate: video.SegmentTemplate.clone(),
                representations: vec![Representation {
                    id: Some(AUDIO_ID.into()),
                    bandwidth: Some(bps),
                    audioSamplingRate: Some(rate.to_string()),
                    ..Default::default()
                }],
                ..Default::default()
            };
            period.adaptations.push(a);
        }
        out.push((
            format!("{}/{MPD_NAME}", title.name),
            format!("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n{mpd}\n"),
        ));
    }
    if spec.hls {
        let files = vodlab_manifest::write_hls(&p);
        let master = MasterPlaylist {
            version: Some(7),
            independent_segments: true,
            alternatives: audio
                .map(|_| AlternativeMedia {
                    media_type: AlternativeMediaType::Audio,
                    uri: Some(format!("{AUDIO_ID}.m3u8")),
                    group_id: "aud".into(),
                    language: Some("und".into()),
                    name: "audio".into(),
                    default: true,
                    autoselect: true,
                    channels: Some("2".into()),
                    ..Default::default()
                })
                .into_iter()
                .collect(),
            variants: p
                .levels
                .iter()
                .map(|l| VariantStream {
                    uri: format!("{}.m3u8", l.id),
                    bandwidth: l.bandwidth_bps + audio.map_or(0, |a| a.0),
                    codecs: Some(match audio {
                        Some(_) => format!("{},{AUDIO_CODECS}", codec_of(&l.id)),
                        None => codec_of(&l.id),
                    }),
                    resolution: l.resolution.map(|(w, h)| m3u8_rs::Resolution {
                        width: w as u64,
                        height: h as u64,
                    }),
                    audio: audio.map(|_| "aud".into()),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        };
        let mut text = Vec::new();
        master
            .write_to(&mut text)
            .map_err(|e| FilesetError::RealMedia {
                reason: format!("writing the master playlist: {e}"),
            })?;
        out.push((
            format!("{}/{MASTER_NAME}", title.name),
            String::from_utf8_lossy(&text).into_owned(),
        ));
        out.extend(
            files
                .into_iter()
                .filter(|(name, _)| name != MASTER_NAME)
                .map(|(name, t)| (format!("{}/{name}", title.name), t)),
        );
        if let Some((bps, _)) = audio {
            let n = p.levels.first().map_or(0, |l| l.segments.len());
            let level = Level {
                id: AUDIO_ID.into(),
                bandwidth_bps: bps,
                resolution: None,
                init: Some(SegmentRef {
                    url: format!("{AUDIO_ID}/init.mp4"),
                    range: None,
                }),
                segments: (0..n)
                    .map(|k| SegmentRef {
                        url: format!("{AUDIO_ID}/{k:05}.m4s"),
                        range: None,
                    })
                    .collect(),
            };
            let ap = Presentation {
                levels: vec![level],
                ..p.clone()
            };
            out.extend(
                vodlab_manifest::write_hls(&ap)
                    .into_iter()
                    .filter(|(name, _)| name != MASTER_NAME)
                    .map(|(name, t)| (format!("{}/{name}", title.name), t)),
            );
        }
    }
    Ok(out)
}

/// Encodes the real-media file set of `catalog` under `root` (an empty
/// directory, or one holding a set of the same workload, which is
/// overwritten). `progress(done_files, total_files)` is called per file.
pub fn create_real(
    root: &Path,
    workload: &str,
    seed: u64,
    catalog: &Catalog,
    opts: &RealMediaOptions,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<CreateReport, FilesetError> {
    opts.validate()?;
    let (segment_s, _gop) = check_layout(catalog, opts.fps)?;
    let list = entries(catalog);
    let synthetic = manifest_of(workload, seed, &list);
    if root.exists() {
        match read_manifest(root) {
            Ok(m) if m.digest == synthetic.digest && m.seed == seed => {}
            Ok(m) => {
                return Err(FilesetError::OtherWorkload {
                    path: root.to_path_buf(),
                    other: m.workload,
                    seed: m.seed,
                })
            }
            Err(FilesetError::NotAFileset(_)) => {
                if fs::read_dir(root).map_err(io_err(root))?.next().is_some() {
                    return Err(FilesetError::Foreign(root.to_path_buf()));
                }
            }
            Err(e) => return Err(e),
        }
    }
    fs::create_dir_all(root).map_err(io_err(root))?;
    let _ = fs::remove_file(root.join(MEDIA_FILE));
    write_manifest(
        root,
        &Manifest {
            complete: false,
            ..synthetic.clone()
        },
    )?;
    let t0 = Instant::now();
    let total: u64 = catalog
        .titles
        .iter()
        .map(|t| t.representations.len() as u64 + u64::from(opts.audio_kbps > 0))
        .sum();
    let mut done = 0u64;
    let mut record = MediaRecord {
        format: "vodlab-media".into(),
        version: 1,
        workload: workload.to_string(),
        fps: opts.fps,
        segment_s,
        codecs: BTreeMap::new(),
        audio_codecs: (opts.audio_kbps > 0).then(|| AUDIO_CODECS.to_string()),
        files: Vec::new(),
    };
    let mut report = CreateReport::default();
    for t in &catalog.titles {
        let segments = t.representations.first().map_or(0, |tr| tr.files);
        for tr in &t.representations {
            let info = &catalog.representations[tr.rep];
            let size = info
                .resolution
                .as_deref()
                .and_then(parse_resolution)
                .expect("checked by check_layout");
            let dir_rel = format!("{}/{}", t.name, info.name);
            let dir = root.join(&dir_rel);
            let args = video_args(opts, size, info.bitrate_kbps, t.duration_s, segment_s);
            run_ffmpeg(&opts.ffmpeg, &args, &dir)?;
            let files = written(&dir, tr.files, &dir_rel)?;
            let init = dir.join("init.mp4");
            let head = fs::read(&init).map_err(io_err(&init))?;
            let codecs = avc_codecs(&head).ok_or_else(|| FilesetError::RealMedia {
                reason: format!("{}: no avcC box: not an H.264 init segment", init.display()),
            })?;
            match record.codecs.get(&info.name) {
                Some(c) if *c != codecs => {
                    return Err(FilesetError::RealMedia {
                        reason: format!(
                        "representation `{}` came out as {codecs} in {} but {c} in another title",
                        info.name, t.name
                    ),
                    })
                }
                _ => {
                    record.codecs.insert(info.name.clone(), codecs);
                }
            }
            for (name, size) in files {
                record.files.push(MediaFile {
                    rel: format!("{dir_rel}/{name}"),
                    size,
                });
            }
            done += 1;
            progress(done, total);
        }
        if opts.audio_kbps > 0 {
            let dir_rel = format!("{}/{AUDIO_ID}", t.name);
            let dir = root.join(&dir_rel);
            run_ffmpeg(
                &opts.ffmpeg,
                &audio_args(opts, t.duration_s, segment_s),
                &dir,
            )?;
            for (name, size) in written(&dir, segments, &dir_rel)? {
                record.files.push(MediaFile {
                    rel: format!("{dir_rel}/{name}"),
                    size,
                });
            }
            done += 1;
            progress(done, total);
        }
        let audio = (opts.audio_kbps > 0).then(|| (opts.audio_kbps as u64 * 1000, opts.audio_rate));
        for (rel, text) in title_manifests(catalog, t, &record.codecs, audio)? {
            let path = root.join(&rel);
            let tmp = path.with_extension("tmp");
            fs::write(&tmp, text.as_bytes()).map_err(io_err(&tmp))?;
            fs::rename(&tmp, &path).map_err(io_err(&path))?;
            report.manifest_files += 1;
            record.files.push(MediaFile {
                rel,
                size: text.len() as u64,
            });
        }
    }
    let p = root.join(MEDIA_FILE);
    let text = serde_json::to_string_pretty(&record).expect("serializes") + "\n";
    fs::write(&p, text).map_err(io_err(&p))?;
    report.files = record.files.len() as u64;
    report.bytes = record.files.iter().map(|f| f.size).sum();
    report.written_bytes = report.bytes;
    write_manifest(
        root,
        &Manifest {
            files: report.files,
            bytes: report.bytes,
            complete: true,
            ..synthetic
        },
    )?;
    report.seconds = t0.elapsed().as_secs_f64();
    Ok(report)
}

/// Checks a real-media set: every file `media.json` records is present with
/// its recorded size, and every file of the catalog is among them.
pub fn verify_real(root: &Path, catalog: &Catalog) -> Result<VerifyReport, FilesetError> {
    let t0 = Instant::now();
    let rec = read_record(root)?;
    let mut rep = VerifyReport::default();
    let recorded: std::collections::HashSet<&str> =
        rec.files.iter().map(|f| f.rel.as_str()).collect();
    for e in entries(catalog) {
        if !recorded.contains(e.rel.as_str()) {
            rep.damaged.push(Damage {
                rel: e.rel,
                problem: format!("a file of the catalog that {MEDIA_FILE} does not record"),
            });
        }
    }
    for f in &rec.files {
        rep.files += 1;
        let p = root.join(&f.rel);
        let problem = match fs::symlink_metadata(&p) {
            Ok(m) if !m.file_type().is_file() => {
                format!("{}, not a regular file", crate::kind_of(m.file_type()))
            }
            Ok(m) if m.len() != f.size => {
                format!("size {}, {MEDIA_FILE} recorded {}", m.len(), f.size)
            }
            Ok(m) => {
                rep.bytes += m.len();
                continue;
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => "missing".to_string(),
            Err(e) => format!("cannot stat: {e}"),
        };
        rep.damaged.push(Damage {
            rel: f.rel.clone(),
            problem,
        });
    }
    rep.seconds = t0.elapsed().as_secs_f64();
    Ok(rep)
}

#[cfg(test)]
mod tests;
