//! Closed-loop players live (`vodlab run --player`): players of a small
//! `dash-vod` workload against an in-process `vodlab serve` on loopback.
//! Every session plays its segments in order from the manifest's URLs; a
//! tight client link makes the players choose lower bit rates than a fast
//! one; a bad manifest fails only the sessions of its title, by name.

mod common;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use common::{results, sparse_fileset, vodlab, vodlab_ok, Running};
use vodlab_client::player_run::segments_to_play;
use vodlab_client::LoadedWorkload;
use vodlab_manifest::{parse_mpd, resolve, MPD_NAME};
use vodlab_workload::Catalog;

/// Segments each player plays at most (keeps a shaped run to seconds).
const MAX_SEGMENTS: usize = 4;
/// The tight link of every class in the shaped runs, kbit/s.
const TIGHT_KBPS: &str = "1000.0";

/// A `dash-vod` workload of 8 sessions over 4 titles, every client class at
/// `down_kbps` when given, with a sparse file set and its manifests.
fn setup(dir: &Path, down_kbps: Option<&str>) -> (PathBuf, PathBuf) {
    setup_spec(dir, down_kbps, |s| s)
}

/// [`setup`] with the spec's text changed by `edit` first.
fn setup_spec(
    dir: &Path,
    down_kbps: Option<&str>,
    edit: impl FnOnce(String) -> String,
) -> (PathBuf, PathBuf) {
    let mut spec = edit(vodlab_ok(&["gen", "--show-preset", "dash-vod"]));
    if let Some(k) = down_kbps {
        for v in ["20000.0", "12500.0", "7000.0", "2500.0"] {
            spec = spec.replace(&format!("down_kbps = {v}"), &format!("down_kbps = {k}"));
        }
    }
    let spec_path = dir.join("spec.toml");
    std::fs::write(&spec_path, spec).unwrap();
    let w = dir.join("w");
    vodlab_ok(&[
        "gen",
        "--spec",
        spec_path.to_str().unwrap(),
        "--sessions",
        "8",
        "--titles",
        "4",
        "-o",
        w.to_str().unwrap(),
    ]);
    let root = dir.join("root");
    sparse_fileset(&w, &root);
    let c = catalog(&w);
    for m in vodlab_manifest::manifests(&c) {
        let p = root.join(&m.rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, m.text).unwrap();
    }
    (w, root)
}

fn catalog(w: &Path) -> Catalog {
    serde_json::from_slice(&std::fs::read(w.join("catalog.json")).unwrap()).unwrap()
}

fn run_players(w: &Path, s: &Running, out: &Path, extra: &[&str]) -> serde_json::Value {
    run_players_at(w, &s.url(""), out, MAX_SEGMENTS, extra)
}

fn run_players_at(
    w: &Path,
    target: &str,
    out: &Path,
    max_segments: usize,
    extra: &[&str],
) -> serde_json::Value {
    let max_segments = max_segments.to_string();
    let mut args = vec![
        "run",
        w.to_str().unwrap(),
        "--target",
        target,
        "--rate",
        "50",
        "--arrivals",
        "constant",
        "--check-bytes",
        "0",
        "--quiet",
        "--max-segments",
        &max_segments,
        "--ramp-up",
        "0",
        "--ramp-down",
        "0",
        "-o",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let table = vodlab_ok(&args);
    // the summary table has the players' lines, overall and per class
    assert!(
        table.contains("  players (") && table.contains("    all: bit rate mean"),
        "{table}"
    );
    let r = results(out);
    assert_schema(&r);
    r
}

/// Asserts that `v` follows docs/results.schema.json.
fn assert_schema(v: &serde_json::Value) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/results.schema.json");
    let schema: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let validator = jsonschema::validator_for(&schema).expect("schema compiles");
    let errors: Vec<String> = validator
        .iter_errors(v)
        .map(|e| format!("{e} at {}", e.instance_path))
        .collect();
    assert!(errors.is_empty(), "{}: {errors:#?}", path.display());
}

/// Access-log lines as (session, path, status), in log order.
fn log_lines(log: &Path) -> Vec<(String, String, u16)> {
    std::fs::read_to_string(log)
        .unwrap()
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f[2].to_string(), f[3].to_string(), f[6].parse().unwrap())
        })
        .collect()
}

/// Sessions of the workload as (id, title, segments its viewing time covers).
fn sessions(w: &Path) -> Vec<(u64, String, usize)> {
    let work = LoadedWorkload::open(w).unwrap();
    work.whole_sessions()
        .map(|s| {
            let s = s.unwrap();
            (
                s.header.id.unwrap(),
                s.header.title.clone().unwrap(),
                segments_to_play(&s, 4.0),
            )
        })
        .collect()
}

/// The rendition timelines of a run of [`setup`]'s 8 sessions with the
/// default sample (8): every session, by id, each with the segments its
/// viewing time covers, in order, at rungs of its manifest, its buffer
/// after each and start-up as measured; `vodlab report` draws them.
fn check_timelines(w: &Path, root: &Path, r: &serde_json::Value, out: &Path) {
    let p = &r["players"];
    assert_eq!(p["timeline_sample"], 8, "{p}");
    let tl = p["timelines"].as_array().expect("players.timelines");
    let mut want = sessions(w);
    want.sort();
    let ids: Vec<u64> = tl.iter().map(|t| t["session"].as_u64().unwrap()).collect();
    assert_eq!(ids, want.iter().map(|s| s.0).collect::<Vec<_>>(), "{tl:?}");
    for (t, (id, title, n)) in tl.iter().zip(&want) {
        assert_eq!(t["title"], title.as_str(), "{t}");
        let mpd = std::fs::read_to_string(root.join(title).join(MPD_NAME)).unwrap();
        let rungs: Vec<f64> = parse_mpd(&mpd)
            .unwrap()
            .levels
            .iter()
            .map(|l| l.bandwidth_bps as f64 / 1000.0)
            .collect();
        let segs = t["segments"].as_array().unwrap();
        assert_eq!(segs.len(), (*n).min(MAX_SEGMENTS), "session {id}: {t}");
        let mut last_start = 0.0;
        for (i, s) in segs.iter().enumerate() {
            assert_eq!(s["index"], i, "{t}");
            assert_eq!(s["media_s"].as_f64().unwrap(), i as f64 * 4.0);
            let kbps = s["bitrate_kbps"].as_f64().unwrap();
            assert_eq!(kbps, rungs[s["level"].as_u64().unwrap() as usize], "{t}");
            let start = s["start_s"].as_f64().unwrap();
            assert!(start >= last_start, "{t}");
            last_start = start;
            assert!(s["buffer_after_s"].as_f64().unwrap() >= 4.0 - 1e-6, "{t}");
        }
        let startup = t["startup_delay_ms"].as_f64().unwrap();
        assert!(startup > 0.0 && startup < 60_000.0, "{t}");
    }
    // the report of the run has a players section with the timelines drawn
    let html = out.join("report.html");
    vodlab_ok(&[
        "report",
        out.join("results.json").to_str().unwrap(),
        "-o",
        html.to_str().unwrap(),
    ]);
    let html = std::fs::read_to_string(&html).unwrap();
    assert!(html.contains("Closed-loop players"), "no players section");
    assert!(html.contains("Bit rate over time of sample sessions"));
    for id in &ids {
        assert!(
            html.contains(&format!("session {id}")),
            "session {id} not drawn"
        );
    }
}

#[test]
fn dash_players_play_every_segment_and_a_tight_link_lowers_the_bit_rate() {
    let d = tempfile::tempdir().unwrap();
    let (w, root) = setup(d.path(), Some(TIGHT_KBPS));
    let log = d.path().join("access.log");
    let s = Running::start(&root, |c| c.access_log = Some(log.clone()));
    let tight = run_players(
        &w,
        &s,
        &d.path().join("tight"),
        &["--player", "dash", "--abr", "throughput"],
    );
    let fast = run_players(
        &w,
        &s,
        &d.path().join("fast"),
        &["--player", "dash", "--abr", "throughput", "--no-shaping"],
    );
    drop(s); // flushes the access log

    for r in [&tight, &fast] {
        let p = &r["players"];
        assert_eq!(p["player"], "dash", "{p}");
        assert_eq!(p["abr"], "throughput");
        assert_eq!(p["overall"]["sessions"], 8, "{p}");
        assert_eq!(p["overall"]["failed"], 0, "{p}");
        assert_eq!(r["failed_sessions"], 0);
        assert!(p["errors"].as_object().unwrap().is_empty(), "{p}");
        assert_eq!(p["overall"]["startup_delay_ms"]["count"], 8);
    }
    let mean = |r: &serde_json::Value| {
        r["players"]["overall"]["mean_bitrate_kbps"]["mean"]
            .as_f64()
            .unwrap()
    };
    // 1 Mbit/s carries at most the 750 kbit/s rung (after the first
    // segment at 235); loopback carries the top one
    assert!(mean(&tight) <= 750.0, "tight {}", mean(&tight));
    assert!(
        mean(&tight) < mean(&fast),
        "tight {} fast {}",
        mean(&tight),
        mean(&fast)
    );
    // the time per rendition adds up to the segments played
    let segs = tight["players"]["overall"]["segments"].as_u64().unwrap();
    let secs: f64 = tight["players"]["overall"]["time_per_bitrate"]
        .as_object()
        .unwrap()
        .values()
        .map(|t| t["seconds"].as_f64().unwrap())
        .sum();
    assert!((secs - segs as f64 * 4.0).abs() < 1e-6, "{secs} vs {segs}");
    check_timelines(&w, &root, &tight, &d.path().join("tight"));

    // every session fetched its manifest, then segments 0..n in order, each
    // one of the manifest's URLs for that index, after its level's init
    let c = catalog(&w);
    let lines = log_lines(&log);
    let expected = sessions(&w);
    let mut by_session: HashMap<String, Vec<(String, u16)>> = HashMap::new();
    for (sess, path, status) in &lines {
        by_session
            .entry(sess.clone())
            .or_default()
            .push((path.clone(), *status));
    }
    for (id, title, n) in &expected {
        let mpd_path = format!("/{title}/{MPD_NAME}");
        let mpd = std::fs::read_to_string(root.join(&mpd_path[1..])).unwrap();
        let pres = parse_mpd(&mpd).unwrap();
        let seg_of: HashMap<String, (usize, usize)> = pres
            .levels
            .iter()
            .enumerate()
            .flat_map(|(q, l)| {
                let mpd_path = &mpd_path;
                l.segments
                    .iter()
                    .enumerate()
                    .map(move |(i, s)| (resolve(mpd_path, &s.url), (q, i)))
            })
            .collect();
        let init_of: HashMap<String, usize> = pres
            .levels
            .iter()
            .enumerate()
            .map(|(q, l)| (resolve(&mpd_path, &l.init.as_ref().unwrap().url), q))
            .collect();
        let reqs = &by_session[&id.to_string()];
        // two runs, each: manifest, then its segments
        let starts: Vec<usize> = reqs
            .iter()
            .enumerate()
            .filter(|(_, (p, _))| *p == mpd_path)
            .map(|(i, _)| i)
            .collect();
        assert_eq!(starts.len(), 2, "session {id}: {reqs:?}");
        for (k, &from) in starts.iter().enumerate() {
            let to = starts.get(k + 1).copied().unwrap_or(reqs.len());
            let mut next = 0;
            let mut inits = vec![false; pres.levels.len()];
            for (p, status) in &reqs[from + 1..to] {
                if let Some(&q) = init_of.get(p) {
                    inits[q] = true;
                    continue;
                }
                let &(q, i) = seg_of
                    .get(p)
                    .unwrap_or_else(|| panic!("session {id}: {p} is not in {mpd_path}"));
                assert!(inits[q], "session {id}: {p} before its init segment");
                assert_eq!(*status, 200, "{p}");
                // a segment repeats only after an abandoned attempt
                assert!(i == next || i + 1 == next, "session {id}: {p} after {next}");
                next = i + 1;
            }
            let n = (*n).min(MAX_SEGMENTS);
            assert_eq!(next, n, "session {id} ({title}) played {next} of {n}");
        }
    }
    assert!(c.titles.len() == 4);
}

#[test]
fn a_bad_manifest_fails_only_its_sessions_by_name_and_hls_plays_over_h2c() {
    let d = tempfile::tempdir().unwrap();
    let (w, root) = setup(d.path(), None);
    let expected = sessions(&w);
    let mut per_title: BTreeMap<String, u64> = BTreeMap::new();
    for (_, t, _) in &expected {
        *per_title.entry(t.clone()).or_default() += 1;
    }
    let titles: Vec<&String> = per_title.keys().collect();
    assert!(titles.len() >= 2, "{per_title:?}");
    // the first title's MPD is not XML, the second's is gone (404)
    let (bad_xml, gone) = (titles[0].clone(), titles[1].clone());
    std::fs::write(
        root.join(format!("{bad_xml}/{MPD_NAME}")),
        "<MPD><Period><AdaptationSet",
    )
    .unwrap();
    std::fs::remove_file(root.join(format!("{gone}/{MPD_NAME}"))).unwrap();
    let s = Running::start(&root, |_| {});
    let r = run_players(
        &w,
        &s,
        &d.path().join("bad"),
        &["--player", "dash", "--no-shaping"],
    );
    let p = &r["players"];
    let failed = per_title[&bad_xml] + per_title[&gone];
    assert_eq!(p["errors"]["manifest_xml"], per_title[&bad_xml], "{p}");
    assert_eq!(p["errors"]["manifest_status"], per_title[&gone], "{p}");
    assert_eq!(p["overall"]["failed"], failed);
    assert_eq!(r["failed_sessions"], failed);
    // the others played
    assert_eq!(
        p["overall"]["startup_delay_ms"]["count"].as_u64().unwrap(),
        8 - failed
    );

    // HLS players over HTTP/2 (h2c) read the master playlists;
    // the first title's second segment is gone at every level (404)
    let c = catalog(&w);
    let t0 = c.titles.iter().find(|t| t.name == bad_xml).unwrap();
    for tr in &t0.representations {
        let rep = &c.representations[tr.rep].name;
        let f = root.join(format!("{bad_xml}/{rep}/00001.m4s"));
        std::fs::remove_file(&f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
    }
    // its sessions that play two segments or more fail
    let cut: u64 = expected
        .iter()
        .filter(|(_, t, n)| *t == bad_xml && *n >= 2)
        .count() as u64;
    assert!(cut > 0, "{expected:?}");
    // the second title's master playlist names itself as a variant: a
    // loop, ended as a master playlist where a media playlist was expected
    let master = root.join(format!("{gone}/{}", vodlab_manifest::MASTER_NAME));
    let text = std::fs::read_to_string(&master).unwrap();
    let first_uri = text
        .lines()
        .find(|l| !l.starts_with('#') && !l.trim().is_empty())
        .unwrap()
        .to_string();
    std::fs::write(
        &master,
        text.replace(&first_uri, vodlab_manifest::MASTER_NAME),
    )
    .unwrap();
    let looped = per_title[&gone];
    let r = run_players(
        &w,
        &s,
        &d.path().join("hls"),
        &[
            "--player",
            "hls",
            "--abr",
            "bba",
            "--no-shaping",
            "--protocol",
            "h2c",
            "--p1203",
        ],
    );
    let p = &r["players"];
    assert_eq!(p["player"], "hls");
    assert_eq!(p["overall"]["sessions"], 8);
    assert_eq!(p["overall"]["failed"], cut + looped, "{p}");
    assert_eq!(p["errors"]["segment_status"], cut, "{p}");
    assert_eq!(p["errors"]["manifest_wrong_playlist_kind"], looped, "{p}");
    assert_eq!(r["protocol"], "h2c");
    // one P.1203 input per completed session, its video segments those played
    let inputs: Vec<_> = std::fs::read_dir(d.path().join("hls/p1203"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(inputs.len() as u64, 8 - cut - looped);
    let total: usize = inputs
        .iter()
        .map(|f| {
            let v: serde_json::Value = serde_json::from_slice(&std::fs::read(f).unwrap()).unwrap();
            v["I13"]["segments"].as_array().unwrap().len()
        })
        .sum();
    assert_eq!(total as u64, p["overall"]["segments"].as_u64().unwrap());
}

/// BOLA (BOLA-FINITE as Sabre has it) on this ladder at 1 Mbit/s abandons
/// often: Sabre's own network model does too (`vodlab simulate --player
/// --abr bola` on a constant 1,000 kbit/s, 40 ms trace abandons 23 of 60
/// segments of the dash-vod ladder). An abandonment drops the exchange: an
/// HTTP/1.1 connection is closed and the next request opens one; an h2c
/// stream is reset and the connection kept.
#[test]
fn abandoned_downloads_are_refetched_h1_reconnects_and_h2c_keeps_its_connection() {
    let d = tempfile::tempdir().unwrap();
    let (w, root) = setup(d.path(), Some(TIGHT_KBPS));
    let s = Running::start(&root, |_| {});
    let target = s.url("");
    let want: u64 = sessions(&w)
        .iter()
        .map(|(_, _, n)| (*n).min(8) as u64)
        .sum();
    let runs: Vec<(String, serde_json::Value)> = std::thread::scope(|sc| {
        let hs: Vec<_> = ["h1", "h2c"]
            .into_iter()
            .map(|proto| {
                let (w, target, out) = (&w, &target, d.path().join(proto));
                sc.spawn(move || {
                    let r = run_players_at(
                        w,
                        target,
                        &out,
                        8,
                        &["--player", "dash", "--abr", "bola", "--protocol", proto],
                    );
                    (proto.to_string(), r)
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (proto, r) in &runs {
        let o = &r["players"]["overall"];
        assert_eq!(o["sessions"], 8, "{proto}: {o}");
        assert_eq!(o["failed"], 0, "{proto}: {o}");
        // every session still played all its segments
        assert_eq!(o["segments"].as_u64().unwrap(), want, "{proto}: {o}");
        let abandoned = o["abandoned"].as_u64().unwrap();
        assert!(abandoned > 0, "{proto}: {o}");
        let conns = r["transport"]["connections"].as_u64().unwrap();
        if proto == "h1" {
            assert!(conns > 8 && conns <= 8 + abandoned, "{conns} {abandoned}");
        } else {
            assert_eq!(conns, 8, "h2c: one connection per player");
        }
    }
}

/// One file per rendition: the MPD has `SegmentList` with `mediaRange` and
/// the HLS playlists `EXT-X-BYTERANGE`; players request byte ranges (206)
/// and size the movie from them.
#[test]
fn byte_range_manifests_are_played_with_range_requests() {
    let d = tempfile::tempdir().unwrap();
    let (w, root) = setup_spec(d.path(), None, |spec| {
        let line = spec
            .lines()
            .find(|l| l.starts_with("storage = "))
            .expect("the preset has a storage line")
            .to_string();
        spec.replace(&line, "storage = { layout = \"single\" }")
    });
    let mpd =
        std::fs::read_to_string(root.join(format!("{}/{MPD_NAME}", catalog(&w).titles[0].name)))
            .unwrap();
    assert!(mpd.contains("mediaRange"), "{mpd}");
    let log = d.path().join("access.log");
    let s = Running::start(&root, |c| c.access_log = Some(log.clone()));
    let want: u64 = sessions(&w)
        .iter()
        .map(|(_, _, n)| (*n).min(MAX_SEGMENTS) as u64)
        .sum();
    for kind in ["dash", "hls"] {
        let r = run_players(
            &w,
            &s,
            &d.path().join(kind),
            &["--player", kind, "--no-shaping"],
        );
        let o = &r["players"]["overall"];
        assert_eq!(o["failed"], 0, "{kind}: {}", r["players"]);
        assert_eq!(o["segments"].as_u64().unwrap(), want, "{kind}");
    }
    drop(s);
    // media requests were ranges of the one file per rendition
    let lines = log_lines(&log);
    let ranged = lines
        .iter()
        .filter(|(_, p, st)| p.ends_with(".mp4") && !p.ends_with("init.mp4") && *st == 206)
        .count() as u64;
    assert!(
        ranged >= 2 * want,
        "{ranged} ranged requests for {want} segments x 2 runs"
    );
}

/// Player flags are refused with the flag named, before any connection.
/// `--player-profile dashjs` on loopback: every session starts at 384p (the
/// rung for dash.js's 1000 kbit/s initial bit rate), goes to the top rung
/// once its throughput is measured, and fetches a rung's init segment
/// before the first segment after each change of rung, as dash.js does.
#[test]
fn the_dashjs_profile_starts_at_384p_and_fetches_an_init_at_every_change() {
    let d = tempfile::tempdir().unwrap();
    let (w, root) = setup(d.path(), None);
    let log = d.path().join("access.log");
    let s = Running::start(&root, |c| c.access_log = Some(log.clone()));
    let r = run_players(
        &w,
        &s,
        &d.path().join("o"),
        &[
            "--player",
            "dash",
            "--player-profile",
            "dashjs",
            "--no-shaping",
        ],
    );
    drop(s); // flushes the access log
    let p = &r["players"];
    assert_eq!(p["profile"], "dashjs", "{p}");
    assert_eq!(p["abr"], "dashjs", "{p}");
    assert_eq!(p["max_buffer_s"], 30.0, "{p}");
    assert_eq!(p["overall"]["sessions"], 8, "{p}");
    assert_eq!(p["overall"]["failed"], 0, "{p}");
    let mut by_session: HashMap<String, Vec<String>> = HashMap::new();
    for (sess, path, status) in log_lines(&log) {
        assert_eq!(status, 200, "{path}");
        by_session.entry(sess).or_default().push(path);
    }
    for (id, title, n) in sessions(&w) {
        let reqs = &by_session[&id.to_string()];
        assert_eq!(reqs[0], format!("/{title}/{MPD_NAME}"), "session {id}");
        // (rung, is init) of every request after the manifest
        let parts: Vec<(String, bool)> = reqs[1..]
            .iter()
            .map(|p| {
                let f: Vec<&str> = p.split('/').collect();
                (f[2].to_string(), f[3] == "init.mp4")
            })
            .collect();
        let media: Vec<&String> = parts.iter().filter(|p| !p.1).map(|p| &p.0).collect();
        assert_eq!(media.len(), n.min(MAX_SEGMENTS), "session {id}: {reqs:?}");
        assert_eq!(media[0], "384p", "session {id}: {reqs:?}");
        assert!(
            media[1..].iter().all(|r| *r == "1080p-hi"),
            "session {id}: {reqs:?}"
        );
        // an init right before the first segment and each change of rung
        let mut last: Option<&String> = None;
        for (k, (rung, init)) in parts.iter().enumerate() {
            if *init {
                continue;
            }
            if last != Some(rung) {
                assert_eq!(
                    parts.get(k.wrapping_sub(1)),
                    Some(&(rung.clone(), true)),
                    "session {id}: {reqs:?}"
                );
            }
            last = Some(rung);
        }
    }
}

/// `--player hls --player-profile hlsjs` on loopback: every session reads
/// the master playlist and its media playlists, starts at 240p (the only
/// rung under hls.js's 500 kbit/s default estimate), goes to the top rung
/// once one fragment is measured (0.7 × the estimate is far above 5.8
/// Mbit/s on loopback, and its fragment loads well within the 4 s
/// buffered) and fetches each rung's init segment once, right before that
/// rung's first fragment, as hls.js does.
#[test]
fn the_hlsjs_profile_starts_at_240p_and_fetches_an_init_once_per_rung() {
    let d = tempfile::tempdir().unwrap();
    let (w, root) = setup(d.path(), None);
    let log = d.path().join("access.log");
    let s = Running::start(&root, |c| c.access_log = Some(log.clone()));
    let r = run_players(
        &w,
        &s,
        &d.path().join("o"),
        &[
            "--player",
            "hls",
            "--player-profile",
            "hlsjs",
            "--no-shaping",
        ],
    );
    drop(s); // flushes the access log
    let p = &r["players"];
    assert_eq!(p["player"], "hls", "{p}");
    assert_eq!(p["profile"], "hlsjs", "{p}");
    assert_eq!(p["abr"], "hlsjs", "{p}");
    assert_eq!(p["max_buffer_s"], 30.0, "{p}");
    assert_eq!(p["overall"]["sessions"], 8, "{p}");
    assert_eq!(p["overall"]["failed"], 0, "{p}");
    assert_eq!(p["overall"]["abandoned"], 0, "{p}");
    let mut by_session: HashMap<String, Vec<String>> = HashMap::new();
    for (sess, path, status) in log_lines(&log) {
        assert_eq!(status, 200, "{path}");
        by_session.entry(sess).or_default().push(path);
    }
    for (id, title, n) in sessions(&w) {
        let reqs = &by_session[&id.to_string()];
        assert_eq!(
            reqs[0],
            format!("/{title}/{}", vodlab_manifest::MASTER_NAME),
            "session {id}"
        );
        // (rung, is init) of every request after the playlists
        let parts: Vec<(String, bool)> = reqs[1..]
            .iter()
            .filter(|p| !p.ends_with(".m3u8"))
            .map(|p| {
                let f: Vec<&str> = p.split('/').collect();
                (f[2].to_string(), f[3] == "init.mp4")
            })
            .collect();
        let media: Vec<&String> = parts.iter().filter(|p| !p.1).map(|p| &p.0).collect();
        assert_eq!(media.len(), n.min(MAX_SEGMENTS), "session {id}: {reqs:?}");
        assert_eq!(media[0], "240p", "session {id}: {reqs:?}");
        assert!(
            media[1..].iter().all(|r| *r == "1080p-hi"),
            "session {id}: {reqs:?}"
        );
        // one init per rung played, right before its first fragment
        let inits: Vec<&String> = parts.iter().filter(|p| p.1).map(|p| &p.0).collect();
        let mut rungs: Vec<&String> = media.clone();
        rungs.dedup();
        assert_eq!(inits, rungs, "session {id}: {reqs:?}");
        for (k, (rung, init)) in parts.iter().enumerate() {
            if *init {
                assert_eq!(parts.get(k + 1), Some(&(rung.clone(), false)));
            }
        }
    }
}

#[test]
fn player_flags_are_checked() {
    let d = tempfile::tempdir().unwrap();
    let (w, _root) = setup(d.path(), None);
    let w = w.to_str().unwrap();
    let out = d.path().join("o");
    let out = out.to_str().unwrap();
    let base = [
        "run",
        w,
        "--target",
        "http://127.0.0.1:9",
        "--rate",
        "1",
        "-o",
        out,
    ];
    let cases: [(&[&str], &str); 12] = [
        (&["--player", "smooth"], "unknown player `smooth`"),
        (&["--player", "dash", "--abr", "mpc"], "--abr"),
        (&["--abr", "bola"], "--player"),
        (
            &["--player", "dash", "--max-buffer", "0"],
            "--max-buffer must be",
        ),
        (
            &["--player", "dash", "--max-segments", "0"],
            "--max-segments must be",
        ),
        (&["--player", "hls", "--requests-csv"], "--requests-csv"),
        (
            &["--player", "dash", "--player-timelines", "1001"],
            "--player-timelines must be at most 1000",
        ),
        (&["--player-timelines", "3"], "--player"),
        (
            &["--player", "dash", "--player-profile", "edge"],
            "unknown profile \"edge\"",
        ),
        (
            &[
                "--player",
                "dash",
                "--player-profile",
                "dashjs",
                "--abr",
                "bola",
            ],
            "cannot be used with",
        ),
        (
            &[
                "--player",
                "dash",
                "--player-profile",
                "dashjs",
                "--max-buffer",
                "20",
            ],
            "cannot be used with",
        ),
        (
            &[
                "--player",
                "hls",
                "--player-profile",
                "hlsjs",
                "--max-buffer",
                "20",
            ],
            "cannot be used with",
        ),
    ];
    for (extra, want) in cases {
        let mut args = base.to_vec();
        args.extend_from_slice(extra);
        let o = vodlab(&args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{extra:?} was accepted");
        assert!(err.contains(want), "{extra:?}: {err}");
    }
}
