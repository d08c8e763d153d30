//! Real media (`vodlab fileset create --media real`): a tiny dash-vod-like
//! workload encoded by ffmpeg. Every segment is one closed GOP of exactly one
//! segment's duration starting with a key frame (checked with ffprobe), the
//! MPD parses with vodlab-manifest and names existing files with the codecs
//! of their init segments, `verify` checks the recorded sizes, and closed-loop
//! `vodlab run --player dash` plays the set from `vodlab serve` without error.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{require, results, vodlab, vodlab_ok, Running};
use vodlab_fileset::media::avc_codecs;
use vodlab_manifest::{parse_master, parse_mpd, resolve, MASTER_NAME, MPD_NAME};

const SPEC: &str = include_str!("data/dash-vod-tiny.toml");
/// The spec's segment duration (`chunk_s`, `request_s`) and the default fps.
const SEG_S: f64 = 4.0;
const FPS: f64 = 25.0;

fn gen(dir: &Path, spec: &str) -> PathBuf {
    let p = dir.join("spec.toml");
    std::fs::write(&p, spec).unwrap();
    let w = dir.join("w");
    vodlab_ok(&[
        "gen",
        "--spec",
        p.to_str().unwrap(),
        "-o",
        w.to_str().unwrap(),
    ]);
    w
}

/// (key_frame, pict_type, pts_time) of every video frame of init + segment.
fn frames(ffprobe: &Path, init: &Path, seg: &Path, tmp: &Path) -> Vec<(bool, String, f64)> {
    let mut bytes = std::fs::read(init).unwrap();
    bytes.extend(std::fs::read(seg).unwrap());
    std::fs::write(tmp, bytes).unwrap();
    let out = Command::new(ffprobe)
        .args(["-v", "error", "-select_streams", "v"])
        .args(["-show_entries", "frame=key_frame,pict_type,pts_time"])
        .args(["-of", "compact=p=0"])
        .arg(tmp)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let field = |k: &str| {
                l.split('|')
                    .find_map(|kv| kv.strip_prefix(k)?.strip_prefix('='))
                    .unwrap_or_else(|| panic!("no {k} in {l}"))
                    .to_string()
            };
            (
                field("key_frame") == "1",
                field("pict_type"),
                field("pts_time").parse().unwrap(),
            )
        })
        .collect()
}

/// Duration of an audio init + segment's samples, seconds.
fn audio_duration(ffprobe: &Path, init: &Path, seg: &Path, tmp: &Path) -> f64 {
    let mut bytes = std::fs::read(init).unwrap();
    bytes.extend(std::fs::read(seg).unwrap());
    std::fs::write(tmp, bytes).unwrap();
    let out = Command::new(ffprobe)
        .args(["-v", "error", "-select_streams", "a"])
        .args(["-show_entries", "packet=duration_time", "-of", "csv=p=0"])
        // one number a line, possibly followed by a separator
        .arg(tmp)
        .output()
        .unwrap();
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter_map(|l| l.trim().trim_end_matches(',').parse::<f64>().ok())
        .sum()
}

#[test]
fn real_media_is_one_closed_gop_per_segment_and_players_play_it() {
    require("ffmpeg", "ffmpeg");
    let ffprobe = require("ffprobe", "ffmpeg");
    let d = tempfile::tempdir().unwrap();
    // 14 s: three full segments and a 2 s last one
    let w = gen(d.path(), SPEC);
    let root = d.path().join("set");
    let out = vodlab_ok(&[
        "fileset",
        "create",
        w.to_str().unwrap(),
        "--root",
        root.to_str().unwrap(),
        "--media",
        "real",
    ]);
    assert!(
        out.contains("real media") && out.contains("6 streaming manifests"),
        "{out}"
    );

    let mpd_path = format!("/t00000/{MPD_NAME}");
    let mpd_text = std::fs::read_to_string(root.join(&mpd_path[1..])).unwrap();
    let p = parse_mpd(&mpd_text).unwrap();
    assert_eq!(p.levels.len(), 3);
    assert!((p.duration_s - 14.0).abs() < 1e-9, "{}", p.duration_s);
    assert_eq!(p.segment_s, SEG_S);
    let tmp = d.path().join("probe.mp4");
    for l in &p.levels {
        assert_eq!(l.segments.len(), 4, "{}", l.id);
        let init = root.join(&resolve(&mpd_path, &l.init.as_ref().unwrap().url)[1..]);
        // the MPD announces the codecs of the init segment ffmpeg wrote
        let codecs = avc_codecs(&std::fs::read(&init).unwrap()).expect("an avcC box");
        assert!(
            mpd_text.contains(&format!("id=\"{}\"", l.id))
                && mpd_text.contains(&format!("codecs=\"{codecs}\"")),
            "{codecs} for {} not in {mpd_text}",
            l.id
        );
        for (n, s) in l.segments.iter().enumerate() {
            let seg = root.join(&resolve(&mpd_path, &s.url)[1..]);
            let f = frames(&ffprobe, &init, &seg, &tmp);
            let want_s = (14.0 - n as f64 * SEG_S).min(SEG_S);
            assert_eq!(
                f.len(),
                (want_s * FPS).round() as usize,
                "{}: frames",
                seg.display()
            );
            // starts with a key (I) frame at the segment's start, and has no other
            assert!(f[0].0 && f[0].1 == "I", "{}: {:?}", seg.display(), f[0]);
            assert!((f[0].2 - n as f64 * SEG_S).abs() < 1e-6, "{:?}", f[0]);
            assert_eq!(f.iter().filter(|x| x.0).count(), 1, "{}", seg.display());
        }
    }
    // the audio rendition: same segment count, each about one segment long
    // (AAC frames are 1024 samples, so a boundary may move by one frame)
    assert!(mpd_text.contains("contentType=\"audio\"") && mpd_text.contains("mp4a.40.2"));
    let ainit = root.join("t00000/audio/init.mp4");
    for n in 0..4 {
        let seg = root.join(format!("t00000/audio/{n:05}.m4s"));
        let dur = audio_duration(&ffprobe, &ainit, &seg, &tmp);
        let want_s = (14.0 - n as f64 * SEG_S).min(SEG_S);
        assert!((dur - want_s).abs() < 0.05, "audio {n}: {dur} s");
    }
    assert!(!root.join("t00000/audio/00004.m4s").exists());
    // HLS: the master has codecs with audio and the audio group
    let master = std::fs::read_to_string(root.join("t00000").join(MASTER_NAME)).unwrap();
    let variants = parse_master(&master).unwrap();
    assert_eq!(variants.len(), 3);
    assert!(master.contains("CODECS=\"avc1.") && master.contains(",mp4a.40.2\""));
    assert!(master.contains("TYPE=AUDIO") && master.contains("URI=\"audio.m3u8\""));

    // verify: sizes recorded at creation
    let set = [w.to_str().unwrap(), "--root", root.to_str().unwrap()];
    let v = vodlab_ok(&[&["fileset", "verify"][..], &set[..]].concat());
    assert!(v.contains(": 0 damaged"), "{v}");

    // closed-loop players play every segment from vodlab serve, from the
    // MPD and from the HLS playlists (with the audio group in the master)
    let s = Running::start(&root, |_| {});
    for player in ["dash", "hls"] {
        let out = d.path().join(format!("run-{player}"));
        vodlab_ok(&[
            "run",
            w.to_str().unwrap(),
            "--target",
            &s.url(""),
            "--rate",
            "50",
            "--arrivals",
            "constant",
            "--check-bytes",
            "0",
            "--quiet",
            "--ramp-up",
            "0",
            "--ramp-down",
            "0",
            "--player",
            player,
            "--abr",
            "dynamic",
            "--no-shaping",
            "-o",
            out.to_str().unwrap(),
        ]);
        let r = results(&out);
        assert_eq!(r["failed_sessions"], 0, "{player}: {r}");
        let pl = &r["players"]["overall"];
        assert_eq!(pl["sessions"], 2, "{player}: {pl}");
        assert_eq!(pl["failed"], 0, "{player}: {pl}");
        // every segment of the title played (4 per session)
        assert_eq!(pl["segments"], 8, "{player}: {pl}");
    }
    drop(s);

    // damage: a shortened segment and a missing one are named
    let seg = root.join("t00000/240p/00001.m4s");
    let len = std::fs::metadata(&seg).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&seg)
        .unwrap()
        .set_len(len - 1)
        .unwrap();
    std::fs::remove_file(root.join("t00000/audio/00002.m4s")).unwrap();
    let v = vodlab(&[&["fileset", "verify"][..], &set[..]].concat());
    assert_eq!(v.status.code(), Some(1));
    let text = String::from_utf8_lossy(&v.stdout);
    assert!(
        text.contains(&format!(
            "DAMAGED t00000/240p/00001.m4s: size {}, media.json recorded {len}",
            len - 1
        )) && text.contains("DAMAGED t00000/audio/00002.m4s: missing"),
        "{text}"
    );
}

#[test]
fn real_media_refuses_layouts_it_cannot_keep_before_encoding() {
    let d = tempfile::tempdir().unwrap();
    // one file per rendition: byte ranges in the manifests and scripts
    let single = SPEC.replace(
        "storage = { layout = \"chunked\", chunk_s = 4.0 }",
        "storage = { layout = \"single\" }",
    );
    assert_ne!(single, SPEC);
    let w = gen(d.path(), &single);
    let root = d.path().join("set");
    let out = vodlab(&[
        "fileset",
        "create",
        w.to_str().unwrap(),
        "--root",
        root.to_str().unwrap(),
        "--media",
        "real",
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("layout `single`"), "{err}");
    assert!(
        !root.exists(),
        "nothing is written before the layout is checked"
    );
    // sizes are known only after encoding
    let d2 = tempfile::tempdir().unwrap();
    let w = gen(d2.path(), SPEC);
    let out = vodlab(&[
        "fileset",
        "create",
        w.to_str().unwrap(),
        "--root",
        d2.path().join("set2").to_str().unwrap(),
        "--media",
        "real",
        "--dry-run",
    ]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--dry-run with --media real"));
}
