//! Unit tests of [`super`] (real media), without ffmpeg.

use super::*;

#[test]
fn avc_codecs_reads_the_avcc_box() {
    let mut b = b"....ftypisom....moov....avcC".to_vec();
    b.extend([1, 0x64, 0x00, 0x1f, 0xff]);
    assert_eq!(avc_codecs(&b).as_deref(), Some("avc1.64001f"));
    b[28] = 1;
    b[29] = 0x42;
    b[30] = 0xc0;
    b[31] = 0x0d;
    assert_eq!(avc_codecs(&b).as_deref(), Some("avc1.42c00d"));
    assert_eq!(avc_codecs(b"no box here"), None);
    // a truncated box
    assert_eq!(avc_codecs(b"avcC\x01\x64"), None);
}

#[test]
fn gop_is_one_segment() {
    let o = RealMediaOptions::default();
    let a = video_args(&o, (320, 240), 235.0, 12.0, 4.0);
    let at = |k: &str| a[a.iter().position(|x| x == k).unwrap() + 1].clone();
    assert_eq!(at("-g"), "100");
    assert_eq!(at("-keyint_min"), "100");
    assert_eq!(at("-sc_threshold"), "0");
    assert_eq!(at("-force_key_frames"), "expr:gte(t,n_forced*4)");
    assert_eq!(at("-b:v"), "235k");
    assert_eq!(at("-hls_time"), "4");
    assert_eq!(at("-start_number"), "0");
    assert!(at("-i").starts_with("testsrc2=size=320x240:rate=25:duration=12"));
    let o = RealMediaOptions { fps: 30, ..o };
    let a = video_args(&o, (640, 360), 800.0, 10.0, 2.0);
    assert_eq!(a[a.iter().position(|x| x == "-g").unwrap() + 1], "60");
}

fn catalog(edit: impl FnOnce(String) -> String) -> Catalog {
    let text = edit(include_str!("../../../vodlab/tests/data/dash-vod-tiny.toml").to_string());
    let spec = vodlab_workload::spec::Spec::from_toml_str(&text, "tiny").unwrap();
    vodlab_workload::construct::build_catalog(&spec)
}

#[test]
fn manifests_carry_real_codecs_and_an_audio_rendition_players_skip() {
    let c = catalog(|s| s);
    assert_eq!(check_layout(&c, 25).unwrap(), (4.0, 100));
    let t = &c.titles[0];
    let codecs: BTreeMap<String, String> =
        [("120p", "42c00b"), ("240p", "42c00d"), ("360p", "42c01e")]
            .iter()
            .map(|(r, c)| (r.to_string(), format!("avc1.{c}")))
            .collect();
    let files = title_manifests(&c, t, &codecs, Some((64_000, 48_000))).unwrap();
    let names: Vec<&str> = files.iter().map(|(r, _)| r.as_str()).collect();
    assert_eq!(
        names,
        [
            "t00000/manifest.mpd",
            "t00000/master.m3u8",
            "t00000/120p.m3u8",
            "t00000/240p.m3u8",
            "t00000/360p.m3u8",
            "t00000/audio.m3u8"
        ]
    );
    let mpd = &files[0].1;
    // the video levels as the catalog has them; the audio set is skipped
    let p = vodlab_manifest::parse_mpd(mpd).unwrap();
    assert_eq!(p, vodlab_manifest::presentation(&c, t));
    for (r, c) in &codecs {
        assert!(mpd.contains(&format!("id=\"{r}\"")) && mpd.contains(&format!("codecs=\"{c}\"")));
    }
    assert!(mpd.contains("contentType=\"audio\"") && mpd.contains("codecs=\"mp4a.40.2\""));
    assert!(mpd.contains("audioSamplingRate=\"48000\""));
    // HLS: variants with audio and video codecs; the audio playlist names audio/
    let v = vodlab_manifest::parse_master(&files[1].1).unwrap();
    assert_eq!(v.len(), 3);
    assert_eq!(v[0].bandwidth_bps, 150_000 + 64_000);
    assert!(files[1].1.contains("CODECS=\"avc1.42c00b,mp4a.40.2\""));
    let a = vodlab_manifest::parse_media(&files[5].1).unwrap();
    assert_eq!(a.segments.len(), 4);
    assert_eq!(a.segments[3].url, "audio/00003.m4s");
    assert_eq!(a.init.unwrap().url, "audio/init.mp4");
    // without audio: no audio set, no group
    let files = title_manifests(&c, t, &codecs, None).unwrap();
    assert!(!files[0].1.contains("audio") && !files[1].1.contains("AUDIO"));
    assert_eq!(files.len(), 5);
}

#[test]
fn layouts_real_media_cannot_keep_are_refused_by_name() {
    let reason = |c: &Catalog, fps| match check_layout(c, fps) {
        Err(FilesetError::RealMedia { reason }) => reason,
        other => panic!("{other:?}"),
    };
    let single =
        catalog(|s| s.replace("layout = \"chunked\", chunk_s = 4.0", "layout = \"single\""));
    assert!(reason(&single, 25).contains("layout `single`"));
    let ranged = catalog(|s| s.replace("chunk_s = 4.0", "chunk_s = 8.0"));
    assert!(reason(&ranged, 25).contains("chunk_s 8 differs from request_s 4"));
    let odd = catalog(|s| s.replace("160x120", "161x120"));
    assert!(reason(&odd, 25).contains("161x120 is odd"));
    let named = catalog(|s| s.replace("name = \"240p\"", "name = \"audio\""));
    assert!(reason(&named, 25).contains("taken by the audio rendition"));
    let none = catalog(|s| {
        s.replace(
            "manifests = { dash = true, hls = true, init_bytes = 1024 }\n",
            "",
        )
    });
    assert!(reason(&none, 25).contains("no [catalog.manifests]"));
    // 4 s is a whole number of frames at 24 fps; 2.5 s at 25 fps is not
    assert!(check_layout(&catalog(|s| s), 24).is_ok());
    let c = catalog(|s| {
        s.replace("chunk_s = 4.0", "chunk_s = 2.5")
            .replace("request_s = 4.0", "request_s = 2.5")
    });
    assert!(
        reason(&c, 25).contains("not a whole number of frames"),
        "{}",
        reason(&c, 25)
    );
}

#[test]
fn options_are_checked() {
    assert!(RealMediaOptions::default().validate().is_ok());
    for bad in [
        RealMediaOptions {
            fps: 0,
            ..Default::default()
        },
        RealMediaOptions {
            preset: "ultra fast; rm".into(),
            ..Default::default()
        },
        RealMediaOptions {
            audio_rate: 1,
            ..Default::default()
        },
    ] {
        assert!(matches!(
            bad.validate(),
            Err(FilesetError::RealMedia { .. })
        ));
    }
}
