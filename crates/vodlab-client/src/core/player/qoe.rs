//! Per-session QoE: start-up delay, stalls, bit rates, time per rendition,
//! switches, a Yin-style score, and the ITU-T P.1203 mode-0 input.

use serde::{Deserialize, Serialize};
use serde_json::json;

use super::buffer::PlayoutBuffer;
use super::movie::Movie;

/// Yin et al. (SIGCOMM 2015) linear QoE weight on the sum of bit-rate
/// changes, per kbit/s changed (goDASH `qoe/yin.go`: λ = 1).
pub const YIN_LAMBDA: f64 = 1.0;
/// Yin weight on stall time, per second (goDASH: 3 per ms = 3000 per s, the
/// paper's "balanced" μ = 3000 with bit rates in kbit/s).
pub const YIN_MU_PER_S: f64 = 3000.0;
/// Yin weight on start-up delay, per second (goDASH: 3000 per s).
pub const YIN_MU_S_PER_S: f64 = 3000.0;

/// Resolution the P.1203 writer uses when the movie gives none.
pub const DEFAULT_RESOLUTION: &str = "1920x1080";
/// Frame rate the P.1203 writer uses when the movie gives none.
pub const DEFAULT_FPS: f64 = 24.0;

/// One session's QoE.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QoeSummary {
    /// Segments played.
    pub segments: usize,
    /// From the first request to playback start (segment 0's arrival), ms.
    pub startup_delay_ms: f64,
    /// Stall episodes (start-up excluded).
    pub rebuffer_count: u32,
    /// Total stall time, ms.
    pub rebuffer_ms: f64,
    /// Session length (start-up, playback, stalls), ms.
    pub session_ms: f64,
    /// Plain mean of the played segments' nominal bit rates, kbit/s.
    pub mean_bitrate_kbps: f64,
    /// Σ bit rate × segment duration / session length (Sabre's "time
    /// average played bitrate"), kbit/s.
    pub time_average_bitrate_kbps: f64,
    /// Media time played at each level, ms.
    pub time_per_level_ms: Vec<f64>,
    /// Switches to a higher level between consecutive segments.
    pub switches_up: u32,
    /// Switches to a lower level.
    pub switches_down: u32,
    /// Σ |bit-rate change| between consecutive segments, kbit/s.
    pub total_bitrate_change_kbps: f64,
    /// Abandoned download attempts.
    pub abandoned: usize,
    /// Yin et al. QoE: Σ R − λ Σ|ΔR| − μ·stall_s − μs·startup_s (R in
    /// kbit/s; weights [`YIN_LAMBDA`], [`YIN_MU_PER_S`], [`YIN_MU_S_PER_S`]).
    pub yin_qoe: f64,
    /// `yin_qoe` per segment.
    pub yin_qoe_per_segment: f64,
}

pub(crate) fn summarize(
    movie: &Movie,
    played: &[u16],
    abandoned: usize,
    buffer: &PlayoutBuffer,
    first_ready_ms: Option<f64>,
) -> QoeSummary {
    let seg = movie.segment_duration_ms;
    let mut time_per_level_ms = vec![0.0; movie.levels()];
    let (mut up, mut down, mut change, mut sum) = (0, 0, 0.0, 0.0);
    let rate = |q: u16| movie.bitrates_kbps[q as usize];
    for (i, &q) in played.iter().enumerate() {
        time_per_level_ms[q as usize] += seg;
        sum += rate(q);
        if i > 0 {
            let p = played[i - 1];
            if q > p {
                up += 1;
            } else if q < p {
                down += 1;
            }
            change += (rate(q) - rate(p)).abs();
        }
    }
    let n = played.len();
    let session_ms = buffer.session_ms();
    let startup = first_ready_ms.unwrap_or(buffer.startup_ms());
    let yin = sum
        - YIN_LAMBDA * change
        - YIN_MU_PER_S * buffer.rebuffer_ms() / 1000.0
        - YIN_MU_S_PER_S * startup / 1000.0;
    QoeSummary {
        segments: n,
        startup_delay_ms: startup,
        rebuffer_count: buffer.rebuffer_events(),
        rebuffer_ms: buffer.rebuffer_ms(),
        session_ms,
        mean_bitrate_kbps: if n > 0 { sum / n as f64 } else { 0.0 },
        time_average_bitrate_kbps: if session_ms > 0.0 {
            sum * seg / session_ms
        } else {
            0.0
        },
        time_per_level_ms,
        switches_up: up,
        switches_down: down,
        total_bitrate_change_kbps: change,
        abandoned,
        yin_qoe: yin,
        yin_qoe_per_segment: if n > 0 { yin / n as f64 } else { 0.0 },
    }
}

/// What the P.1203 input needs beyond the session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct P1203Options {
    /// `streamId` of every input.
    pub stream_id: u64,
    /// Video codec name (`h264`, `h265`, `vp9`).
    pub video_codec: String,
    /// Audio bit rate, kbit/s (the movie has no audio ladder).
    pub audio_kbps: f64,
    /// Audio codec name (`aaclc`).
    pub audio_codec: String,
    /// `IGen.device` (`pc` or `mobile`).
    pub device: String,
    /// `IGen.displaySize`.
    pub display_size: String,
    /// `IGen.viewingDistance`.
    pub viewing_distance: String,
}

impl Default for P1203Options {
    fn default() -> Self {
        Self {
            stream_id: 1,
            video_codec: "h264".into(),
            audio_kbps: 128.0,
            audio_codec: "aaclc".into(),
            device: "pc".into(),
            display_size: "1920x1080".into(),
            viewing_distance: "150cm".into(),
        }
    }
}

/// The ITU-T P.1203 mode-0 input of a session, in the JSON format of the
/// reference implementation (`itu-p1203`): `I11` audio segments, `I13`
/// video segments (bit rate, codec, duration, fps, resolution, start; in
/// play order), `I23` stalling `[[media position s, duration s], …]` with
/// the initial loading at position 0, and `IGen` (as the reference
/// implementation's `examples/mode0*.json`). vodlab does not run the
/// model (its licence forbids redistribution); users score this file with
/// it themselves.
pub fn p1203_input(
    movie: &Movie,
    played: &[u16],
    buffer: &PlayoutBuffer,
    o: &P1203Options,
) -> serde_json::Value {
    let d = movie.segment_duration_ms / 1000.0;
    let fps = movie.fps.unwrap_or(DEFAULT_FPS);
    let video: Vec<_> = played
        .iter()
        .enumerate()
        .map(|(i, &q)| {
            let res = movie
                .resolutions
                .as_ref()
                .map_or(DEFAULT_RESOLUTION, |v| v[q as usize].as_str());
            json!({
                "bitrate": movie.bitrates_kbps[q as usize],
                "codec": o.video_codec,
                "duration": d,
                "fps": fps,
                "resolution": res,
                "start": i as f64 * d,
            })
        })
        .collect();
    let audio: Vec<_> = (0..played.len())
        .map(|i| {
            json!({
                "bitrate": o.audio_kbps,
                "codec": o.audio_codec,
                "duration": d,
                "start": i as f64 * d,
            })
        })
        .collect();
    let mut stalling = vec![json!([0.0, buffer.startup_ms() / 1000.0])];
    for (pos, dur) in buffer.stalls() {
        stalling.push(json!([pos / 1000.0, dur / 1000.0]));
    }
    json!({
        "I11": { "segments": audio, "streamId": o.stream_id },
        "I13": { "segments": video, "streamId": o.stream_id },
        "I23": { "stalling": stalling, "streamId": o.stream_id },
        "IGen": {
            "device": o.device,
            "displaySize": o.display_size,
            "viewingDistance": o.viewing_distance,
        },
    })
}
