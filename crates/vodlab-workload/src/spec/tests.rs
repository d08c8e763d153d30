//! Tests of `spec.rs`.

use super::*;
use crate::presets;

fn base() -> String {
    presets::source("youtube-2011").unwrap().to_string()
}

#[test]
fn every_preset_parses_and_validates() {
    for p in presets::PRESETS {
        let spec =
            Spec::from_toml_str(p.source, p.name).unwrap_or_else(|e| panic!("{}: {e}", p.name));
        assert_eq!(spec.name, p.name);
    }
}

#[test]
fn unknown_key_names_file_line_and_path() {
    let text = base().replace("[catalog]\n", "[catalog]\ncolour = \"red\"\n");
    let err = Spec::from_toml_str(&text, "w.toml")
        .unwrap_err()
        .to_string();
    assert!(err.starts_with("w.toml:"), "{err}");
    assert!(err.contains("unknown field `colour`"), "{err}");
    assert!(err.contains("catalog"), "{err}");
}

#[test]
fn negative_alpha_is_rejected() {
    let text = base().replace("alpha = 0.8", "alpha = -0.5");
    let err = Spec::from_toml_str(&text, "w.toml")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("catalog.popularity.alpha: alpha must be a finite number >= 0, got -0.5"),
        "{err}"
    );
}

#[test]
fn shares_must_sum_to_one() {
    let text = base().replacen("share = 0.16666666666666666", "share = 0.2", 1);
    let err = Spec::from_toml_str(&text, "w.toml")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("clients: shares must sum to 1 within 1e-6"),
        "{err}"
    );
}

#[test]
fn wrong_type_reports_path_and_position() {
    let text = base().replace("titles = 10000", "titles = \"many\"");
    let err = Spec::from_toml_str(&text, "w.toml").unwrap_err();
    match err {
        SpecError::Parse { line, path, .. } => {
            assert!(line > 0);
            assert_eq!(path, "catalog.titles");
        }
        other => panic!("{other}"),
    }
}

#[test]
fn chunk_must_hold_whole_requests() {
    let text = base().replace("request_s = 10.0", "request_s = 3.0");
    let err = Spec::from_toml_str(&text, "w.toml")
        .unwrap_err()
        .to_string();
    assert!(err.contains("catalog.storage.chunk_s"), "{err}");
}

#[test]
fn scale_shrinks_consistently() {
    let mut s = Spec::from_toml_str(&base(), "p").unwrap();
    s.apply(
        &Overrides {
            scale: Some(0.1),
            ..Default::default()
        },
        "p",
    )
    .unwrap();
    assert_eq!(s.catalog.titles, 1000);
    assert_eq!(s.sessions.count, 720);
    assert_eq!(s.measurement.shard_sessions, Some(60));
    assert_eq!(s.measurement.ramp_up_sessions, 20);
    assert_eq!(s.shard_count(), 12);
}

#[test]
fn manifest_settings_are_checked_by_key() {
    let dash = presets::source("dash-vod").unwrap();
    let err = |text: &str| Spec::from_toml_str(text, "w.toml").unwrap_err().to_string();
    let e = err(&dash.replace("resolution = \"1280x720\"", "resolution = \"1280*720\""));
    assert!(
        e.contains("catalog.representations[3].resolution: \"1280*720\" is not WIDTHxHEIGHT"),
        "{e}"
    );
    let e = err(&dash.replace("resolution = \"320x240\"", "resolution = \"0x240\""));
    assert!(e.contains("catalog.representations[0].resolution"), "{e}");
    let e = err(&dash.replace("init_bytes = 1024", "init_bytes = 0"));
    assert!(
        e.contains("catalog.manifests.init_bytes: must be 1 to"),
        "{e}"
    );
    let e = err(&dash.replace("dash = true, hls = true", "dash = false, hls = false"));
    assert!(
        e.contains("catalog.manifests: both dash and hls are false"),
        "{e}"
    );
    let e = err(&dash.replace("dash = true,", "dahs = true,"));
    assert!(e.contains("unknown field `dahs`"), "{e}");
    assert_eq!(parse_resolution("1920x1080"), Some((1920, 1080)));
    assert_eq!(parse_resolution("+1x2"), None);
    assert_eq!(parse_resolution("1x99999"), None);
}

#[test]
fn netflix_settings_are_checked_by_key() {
    let nf = presets::source("netflix-2014").unwrap();
    assert!(Spec::from_toml_str(nf, "nf").is_ok());
    let err = |text: &str| Spec::from_toml_str(text, "nf").unwrap_err().to_string();
    let e = err(&nf.replace("skim_share = 0.11", "skim_share = 0.8"));
    assert!(e.contains("sessions.netflix.skim_share"), "{e}");
    let e = err(&nf.replace(
        "rate_steps = { up = 0.29, down = 0.17, same = 0.54 }",
        "rate_steps = { up = 0.5, down = 0.17, same = 0.54 }",
    ));
    assert!(e.contains("sessions.netflix.rate_steps"), "{e}");
    let e = err(&nf.replace("a64 = 0.35", "v235 = 0.35"));
    assert!(e.contains("sessions.netflix.audio.v235"), "{e}");
    let e = err(&nf.replace("fill_factor = 5.0", "fill_factor = 0.5"));
    assert!(e.contains("sessions.netflix.fill_factor"), "{e}");
    let e = err(&nf.replace(
        "storage = { layout = \"single\" }",
        "storage = { layout = \"chunked\", chunk_s = 2.0 }",
    ));
    assert!(e.contains("catalog.storage.layout"), "{e}");
    let e = err(&nf.replace(
        "parallel = [31.7, 20.0, 37.5, 7.1, 0.8, 0.29]",
        "parallel = [1.0]",
    ));
    assert!(e.contains("sessions.netflix.parallel"), "{e}");
    let e = err(&nf.replace("model = \"netflix\"", "model = \"paced\""));
    assert!(e.contains("sessions.netflix: only used with"), "{e}");
    let e = err(&nf.replace("\"v5800\" = 0.2988", "\"a640\" = 0.2988"));
    assert!(e.contains("sessions.representation.classes.tv.a640"), "{e}");
    let e = err(&nf.replace("kind = \"audio\"", "kind = \"sound\""));
    assert!(e.contains("kind"), "{e}");
    let e = err(&nf.replace("audio_pace = 1.5", "audio_pace = 0.5"));
    assert!(e.contains("sessions.netflix.audio_pace"), "{e}");
    let e = err(&nf.replace("audio_chunk_pace = 6.0", "audio_chunk_pace = 0.9"));
    assert!(e.contains("sessions.netflix.audio_chunk_pace"), "{e}");
    let e = err(&nf.replace(
        "audio_open_s = { kind = \"uniform\", min = 600.0, max = 1300.0 }",
        "audio_open_s = { kind = \"uniform\", min = 600.0, max = 100000.0 }",
    ));
    assert!(e.contains("sessions.netflix.audio_open_s"), "{e}");
    let e = err(&nf.replace("pause_s = {", "pause_z = {"));
    assert!(e.contains("pause_z"), "{e}");
}

#[test]
fn overrides_keep_shards_within_the_limit() {
    use crate::limits::MAX_SHARDS;
    // bench's workload: 1/100 of youtube-2011 (shards of 6) with 10,000 sessions
    let mut s = presets::load("youtube-2011").unwrap();
    s.apply(
        &Overrides {
            scale: Some(0.01),
            sessions: Some(10_000),
            ..Default::default()
        },
        "p",
    )
    .unwrap();
    assert_eq!(s.sessions.count, 10_000);
    assert!(s.shard_count() <= MAX_SHARDS, "{}", s.shard_count());
    assert_eq!(
        s.measurement.shard_sessions,
        Some(10_000u32.div_ceil(MAX_SHARDS))
    );
    // a scale that keeps shards within the limit leaves the scaled size alone
    let mut s = presets::load("youtube-2011").unwrap();
    s.apply(
        &Overrides {
            scale: Some(0.01),
            ..Default::default()
        },
        "p",
    )
    .unwrap();
    assert_eq!(s.measurement.shard_sessions, Some(6));
    // a spec file that asks for too many scripts itself is still refused
    let text = presets::source("youtube-2011")
        .unwrap()
        .replace("shard_sessions = 600", "shard_sessions = 1");
    let e = Spec::from_toml_str(&text, "w.toml")
        .unwrap_err()
        .to_string();
    assert!(e.contains("more than the limit of 1024"), "{e}");
    // scale down to one title caps median_duration_top at it
    let mut s = presets::load("dash-vod").unwrap();
    s.apply(
        &Overrides {
            scale: Some(0.001),
            ..Default::default()
        },
        "p",
    )
    .unwrap();
    assert_eq!(s.catalog.titles, 1);
    assert_eq!(s.catalog.median_duration_top, 1);
}
