//! Round trips catalog → manifest text → parsed presentation, for each
//! layout, and named errors for bad manifests.

use super::*;
use vodlab_workload::construct::build_catalog;
use vodlab_workload::{presets, Spec};

/// The `dash-vod` preset scaled down, with its layout replaced.
fn catalog_with(storage: &str, request_s: f64) -> Catalog {
    let src = presets::source("dash-vod").unwrap();
    let src = src
        .replace("storage = { layout = \"chunked\", chunk_s = 4.0 }", storage)
        .replace("titles = 1000", "titles = 12")
        .replace("request_s = 4.0", &format!("request_s = {request_s:?}"));
    let spec = Spec::from_toml_str(&src, "test").unwrap();
    build_catalog(&spec)
}

fn check_round_trip(catalog: &Catalog) {
    for t in &catalog.titles {
        let want = presentation(catalog, t);
        let files = title_manifests(catalog, t);
        let mpd = files.iter().find(|f| f.rel.ends_with(MPD_NAME)).unwrap();
        let got = parse_mpd(&mpd.text).unwrap_or_else(|e| panic!("{}: {e}\n{}", mpd.rel, mpd.text));
        assert_eq!(got.levels, want.levels, "{}", mpd.rel);
        assert!((got.duration_s - want.duration_s).abs() < 1e-3);
        let parsed = dash_mpd_core::parse(&mpd.text).unwrap();
        let problems = dash_mpd_core::check_conformity(&parsed);
        assert!(problems.is_empty(), "{}: {problems:?}", mpd.rel);

        let master = files.iter().find(|f| f.rel.ends_with(MASTER_NAME)).unwrap();
        let variants = parse_master(&master.text).unwrap();
        assert_eq!(variants.len(), want.levels.len());
        let media: Vec<MediaInfo> = variants
            .iter()
            .map(|v| {
                let rel = format!("{}/{}", t.name, v.uri);
                let f = files
                    .iter()
                    .find(|f| f.rel == rel)
                    .unwrap_or_else(|| panic!("{rel} missing"));
                parse_media(&f.text).unwrap()
            })
            .collect();
        let hls = hls_presentation(&variants, &media).unwrap();
        assert_eq!(hls.levels, want.levels);
        // EXTINF sums to the title's duration (to f32 precision)
        assert!(
            (hls.duration_s - t.duration_s).abs() < 0.01,
            "{} vs {}",
            hls.duration_s,
            t.duration_s
        );
        for m in &media {
            assert!(m
                .durations_s
                .iter()
                .all(|d| *d <= m.target_duration_s + 1e-6));
        }
    }
}

#[test]
fn chunked_one_request_per_chunk_uses_a_segment_template() {
    let c = catalog_with("storage = { layout = \"chunked\", chunk_s = 4.0 }", 4.0);
    let t = &c.titles[0];
    let mpd = &title_manifests(&c, t)[0].text;
    assert!(mpd.contains("$Number%05d$"), "{mpd}");
    assert!(!mpd.contains("SegmentURL"));
    check_round_trip(&c);
    // every segment and init segment URL names a file of the file set
    let files: std::collections::HashSet<String> = c.files().map(|(p, _)| p).collect();
    for t in &c.titles {
        for l in presentation(&c, t).levels {
            for s in l.segments.iter().chain(l.init.iter()) {
                let abs = resolve(&format!("/{}/{MPD_NAME}", t.name), &s.url);
                assert!(files.contains(&abs[1..]), "{abs} not in the file set");
            }
        }
    }
}

#[test]
fn chunked_with_ranges_and_single_files_use_segment_lists() {
    for (storage, req) in [
        ("storage = { layout = \"chunked\", chunk_s = 8.0 }", 4.0),
        ("storage = { layout = \"single\" }", 2.0),
    ] {
        let c = catalog_with(storage, req);
        let mpd = &title_manifests(&c, &c.titles[0])[0].text;
        assert!(mpd.contains("mediaRange"), "{storage}: {mpd}");
        let hls = &title_manifests(&c, &c.titles[0])[2].text;
        assert!(hls.contains("#EXT-X-BYTERANGE"), "{storage}: {hls}");
        check_round_trip(&c);
        // ranges tile each file with no gap or overlap
        for t in &c.titles {
            for l in presentation(&c, t).levels {
                let mut next: std::collections::HashMap<&str, u64> = Default::default();
                for s in &l.segments {
                    let (a, b) = s.range.unwrap();
                    let n = next.entry(&s.url).or_insert(0);
                    assert_eq!(a, *n, "{}", s.url);
                    *n = b + 1;
                }
            }
        }
    }
}

#[test]
fn a_catalog_without_manifests_has_no_init_segments() {
    let src = presets::source("cloudsuite-2016")
        .unwrap()
        .replace("titles = 8000", "titles = 5");
    let c = build_catalog(&Spec::from_toml_str(&src, "t").unwrap());
    assert!(manifests(&c).next().is_none());
    assert!(c.files().all(|(p, _)| !p.contains("init")));
}

#[test]
fn the_file_set_gains_one_init_segment_per_representation() {
    let c = catalog_with("storage = { layout = \"chunked\", chunk_s = 4.0 }", 4.0);
    let inits: Vec<(String, u64)> = c.files().filter(|(p, _)| p.ends_with("init.mp4")).collect();
    let reps: usize = c.titles.iter().map(|t| t.representations.len()).sum();
    assert_eq!(inits.len(), reps);
    assert!(inits.iter().all(|(_, s)| *s == 1024));
    // 1 MPD + 1 master + one media playlist per representation, per title
    assert_eq!(manifests(&c).count(), c.titles.len() * 2 + reps);
}

#[test]
fn resolve_follows_relative_paths() {
    assert_eq!(
        resolve("/t1/manifest.mpd", "720p/00003.m4s"),
        "/t1/720p/00003.m4s"
    );
    assert_eq!(resolve("/t1/master.m3u8", "../x/a.m3u8"), "/x/a.m3u8");
    assert_eq!(resolve("/t1/master.m3u8", "/abs.mp4"), "/abs.mp4");
    assert_eq!(resolve("manifest.mpd", "a/b"), "/a/b");
}

#[test]
fn bad_mpds_name_what_is_wrong() {
    assert!(matches!(
        parse_mpd("<MPD><Period>"),
        Err(ManifestError::Xml(_))
    ));
    assert!(matches!(
        parse_mpd("not xml at all"),
        Err(ManifestError::Xml(_)) | Err(ManifestError::Missing { .. })
    ));
    let no_bw = r#"<MPD xmlns="urn:mpeg:dash:schema:mpd:2011" type="static" mediaPresentationDuration="PT10S"><Period><AdaptationSet mimeType="video/mp4"><SegmentTemplate media="$RepresentationID$/$Number$.m4s" duration="4"/><Representation id="a"/></AdaptationSet></Period></MPD>"#;
    let e = parse_mpd(no_bw).unwrap_err();
    assert_eq!(
        e.to_string(),
        "Period[0]/AdaptationSet[0]/Representation[0]: missing @bandwidth"
    );
    let live = no_bw.replace("type=\"static\"", "type=\"dynamic\"");
    assert!(matches!(
        parse_mpd(&live),
        Err(ManifestError::Unsupported { .. })
    ));
    let bad_tpl = no_bw
        .replace(
            "<Representation id=\"a\"/>",
            "<Representation id=\"a\" bandwidth=\"1\"/>",
        )
        .replace("$Number$", "$Nmber$");
    assert!(parse_mpd(&bad_tpl)
        .unwrap_err()
        .to_string()
        .contains("unknown template identifier $Nmber$"));
    let no_dur = no_bw
        .replace(" mediaPresentationDuration=\"PT10S\"", "")
        .replace(
            "<Representation id=\"a\"/>",
            "<Representation id=\"a\" bandwidth=\"1\"/>",
        );
    assert!(parse_mpd(&no_dur)
        .unwrap_err()
        .to_string()
        .contains("mediaPresentationDuration"));
    let huge = no_bw.replace("PT10S", "PT1000000H").replace(
        "<Representation id=\"a\"/>",
        "<Representation id=\"a\" bandwidth=\"1\"/>",
    );
    assert!(parse_mpd(&huge)
        .unwrap_err()
        .to_string()
        .contains("more than the limit"));
    let ok = no_bw.replace(
        "<Representation id=\"a\"/>",
        "<Representation id=\"a\" bandwidth=\"1000\"/>",
    );
    let p = parse_mpd(&ok).unwrap();
    assert_eq!(p.levels[0].segments.len(), 3);
    assert_eq!(p.levels[0].segments[0].url, "a/1.m4s");
}

#[test]
fn bad_playlists_name_what_is_wrong() {
    assert!(matches!(
        parse_master("hello"),
        Err(ManifestError::Playlist(_))
    ));
    let media = "#EXTM3U\n#EXT-X-TARGETDURATION:4\n#EXTINF:4.0,\na.m4s\n#EXT-X-ENDLIST\n";
    assert_eq!(
        parse_master(media).unwrap_err(),
        ManifestError::WrongPlaylistKind {
            expected: "multivariant (master)",
            found: "media"
        }
    );
    let master = "#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=1000\na.m3u8\n";
    assert!(matches!(
        parse_media(master),
        Err(ManifestError::WrongPlaylistKind { .. })
    ));
    let live = "#EXTM3U\n#EXT-X-TARGETDURATION:4\n#EXTINF:4.0,\na.m4s\n";
    assert!(matches!(
        parse_media(live),
        Err(ManifestError::Unsupported { .. })
    ));
    let m = parse_media(media).unwrap();
    assert_eq!(
        m.segments,
        vec![SegmentRef {
            url: "a.m4s".into(),
            range: None
        }]
    );
    // implicit byte-range offsets continue from the previous segment
    let ranged = "#EXTM3U\n#EXT-X-TARGETDURATION:4\n#EXTINF:4.0,\n#EXT-X-BYTERANGE:100@0\nf.mp4\n#EXTINF:4.0,\n#EXT-X-BYTERANGE:50\nf.mp4\n#EXT-X-ENDLIST\n";
    let m = parse_media(ranged).unwrap();
    assert_eq!(m.segments[1].range, Some((100, 149)));
}

proptest::proptest! {
    #[test]
    fn parsers_never_panic_on_arbitrary_text(s in "\\PC{0,400}") {
        let _ = parse_mpd(&s);
        let _ = parse_master(&s);
        let _ = parse_media(&s);
        let _ = parse_mpd(&format!("<MPD type=\"static\" mediaPresentationDuration=\"PT4S\">{s}</MPD>"));
        let _ = parse_media(&format!("#EXTM3U\n{s}"));
    }
}
