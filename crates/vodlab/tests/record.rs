//! `vodlab record` with a real player: dash.js (and hls.js) in headless
//! Chromium (Debian's `chromium`, driven by puppeteer-core from
//! `scripts/install-test-deps.sh`) plays a tiny real-media set for 25 s
//! (15 s) through Chromium's network emulation (2 Mbit/s, 20 ms); the
//! recording holds the manifest(s), the init segments and the media segments
//! in order. Replayed with `vodlab run` against `vodlab serve`, it reproduces
//! 100 % of the recorded (URL, Range) sequence with a median timing error of
//! at most 20 ms (issue 17's round trip). The browser tests run one at a time
//! (two Chromiums on a 2-core CI machine would disturb each other's timing).

mod common;
mod h3common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use common::{require, results, vodlab_ok, Running};

const SPEC: &str = include_str!("data/dash-vod-tiny.toml");
/// Seconds of dash.js playback recorded (CI budget: at most 60).
const SECONDS: &str = "25";
/// Seconds of hls.js playback recorded (a shorter title: the test stays
/// under 40 s).
const HLS_SECONDS: &str = "15";
/// One browser test at a time.
static BROWSER: Mutex<()> = Mutex::new(());
/// The issue's bound on the replay's median timing error, ms.
const MAX_MEDIAN_ERROR_MS: f64 = 20.0;

fn record_dir() -> PathBuf {
    // as `vodlab record` and scripts/install-test-deps.sh look for it
    std::env::var_os("VODLAB_RECORD_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_else(|| "/root".into()))
                .join(".cache/vodlab-record")
        })
}

/// A title of `seconds` (4 s segments; 40 s: a whole number of AAC frames,
/// the case in which the audio encoder's priming used to add a segment),
/// real media.
fn real_set(dir: &Path, seconds: u32) -> PathBuf {
    let spec = SPEC.replace("value = 14.0", &format!("value = {seconds}.0"));
    assert_ne!(spec, SPEC);
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
    let root = dir.join("set");
    vodlab_ok(&[
        "fileset",
        "create",
        w.to_str().unwrap(),
        "--root",
        root.to_str().unwrap(),
        "--media",
        "real",
    ]);
    root
}

/// Splits a recorded path `/t00000/{rep}/{n}.m4s` into (rep, n).
fn media_segment(path: &str) -> Option<(String, u32)> {
    let mut parts = path.trim_start_matches('/').split('/');
    let (_, rep, file) = (parts.next()?, parts.next()?, parts.next()?);
    let n = file.strip_suffix(".m4s")?.parse().ok()?;
    Some((rep.to_string(), n))
}

/// Replays `rec/recording.vsl` against `vodlab serve` on `root` and checks
/// that every recorded request is replayed with its path and range, at a
/// median timing error of at most 20 ms.
fn replay_reproduces(root: &Path, rec: &Path, reqs: &[serde_json::Value], work: &Path) {
    let s = Running::start(root, |_| {});
    let rep = work.join("replay");
    vodlab_ok(&[
        "run",
        rec.join("recording.vsl").to_str().unwrap(),
        "--target",
        &s.url(""),
        "--rate",
        "100",
        "--arrivals",
        "constant",
        "--check-bytes",
        "0",
        "--late-pacing",
        "burst",
        "--requests-csv",
        "--quiet",
        "-o",
        rep.to_str().unwrap(),
    ]);
    drop(s);
    assert_eq!(results(&rep)["failed_sessions"], 0);
    let csv = std::fs::read_to_string(rep.join("requests.csv")).unwrap();
    let mut lines = csv.lines();
    let head: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |k: &str| head.iter().position(|h| *h == k).unwrap();
    let (cp, cr, cs) = (col("path"), col("range"), col("sent_s"));
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert_eq!(rows.len(), reqs.len(), "every recorded request is replayed");
    let sent0: f64 = rows[0][cs].parse().unwrap();
    let mut errors = Vec::new();
    for (row, r) in rows.iter().zip(reqs) {
        assert_eq!(row[cp], r["path"].as_str().unwrap());
        let range = match r["range"].as_array() {
            Some(a) => format!(
                "{}-{}",
                a[0],
                a[1].as_u64().map_or(String::new(), |b| b.to_string())
            ),
            None => String::new(),
        };
        assert_eq!(row[cr], range, "{}", row[cp]);
        let sent: f64 = row[cs].parse().unwrap();
        let off = r["offset_ms"].as_f64().unwrap();
        errors.push(((sent - sent0) * 1e3 - off).abs());
    }
    errors.sort_by(f64::total_cmp);
    let median = errors[errors.len() / 2];
    eprintln!(
        "replay of {} requests: timing error median {median:.2} ms, max {:.2} ms",
        errors.len(),
        errors[errors.len() - 1]
    );
    assert!(
        median <= MAX_MEDIAN_ERROR_MS,
        "median {median} ms: {errors:?}"
    );
}

/// Checks the npm packages `vodlab record` needs (package directory names).
fn require_npm(packages: &[&str]) {
    let modules = record_dir().join("node_modules");
    for p in packages.iter().chain(&["puppeteer-core"]) {
        assert!(
            modules.join(p).is_dir(),
            "{}: {p} missing: run scripts/install-test-deps.sh",
            modules.display()
        );
    }
}

#[test]
fn a_recorded_dashjs_session_replays_with_its_urls_and_timing() {
    require("ffmpeg", "ffmpeg");
    let chromium = require("chromium", "chromium");
    require_npm(&["dashjs"]);
    let _one = BROWSER.lock().unwrap_or_else(|e| e.into_inner());
    let d = tempfile::tempdir().unwrap();
    let root = real_set(d.path(), 40);
    let rec = d.path().join("rec");
    let out = vodlab_ok(&[
        "record",
        "--root",
        root.to_str().unwrap(),
        "--seconds",
        SECONDS,
        "--down-kbps",
        "2000",
        "--latency-ms",
        "20",
        "--chromium",
        chromium.to_str().unwrap(),
        "-o",
        rec.to_str().unwrap(),
    ]);
    eprintln!("{out}");
    let requests: serde_json::Value =
        serde_json::from_slice(&std::fs::read(rec.join("requests.json")).unwrap()).unwrap();
    let reqs = requests["requests"].as_array().unwrap();
    let paths: Vec<&str> = reqs.iter().map(|r| r["path"].as_str().unwrap()).collect();
    // the MPD first, every rendition's init before its media, media in order
    assert_eq!(paths[0], "/t00000/manifest.mpd", "{paths:?}");
    let mut inits = BTreeMap::new();
    let mut last: BTreeMap<bool, u32> = BTreeMap::new();
    let mut video_segments = 0u32;
    for (i, p) in paths.iter().enumerate() {
        if let Some(rep) = p.strip_suffix("/init.mp4") {
            inits.entry(rep.to_string()).or_insert(i);
        } else if let Some((rep, n)) = media_segment(p) {
            let init = inits.get(&format!("/t00000/{rep}"));
            assert!(
                init.is_some_and(|&k| k < i),
                "{p} before its init: {paths:?}"
            );
            let audio = rep == "audio";
            // in order without gaps; dash.js may fetch an earlier segment
            // again in another rendition (fast switching replaces buffered
            // segments after an up-switch)
            let next = last.get(&audio).map_or(0, |&hi| hi + 1);
            assert!(n <= next, "{p} skips ahead of segment {next}: {paths:?}");
            last.insert(audio, next.max(n + 1) - 1);
            video_segments += u32::from(!audio);
        } else {
            assert_eq!(*p, "/t00000/manifest.mpd", "unexpected request {p}");
        }
    }
    // 25 s of playback at 2 Mbit/s with a 4 s segment: the player is ahead
    let distinct = last.get(&false).map_or(0, |hi| hi + 1);
    assert!(
        distinct >= 5 && video_segments >= distinct,
        "{distinct} distinct video segments: {paths:?}"
    );
    assert!(inits.contains_key("/t00000/audio"), "{paths:?}");
    for r in reqs {
        assert_eq!(r["status"], 200, "{r}");
    }
    // dash.js's metrics: no error, the rendition it rendered, a buffer series
    let m: serde_json::Value =
        serde_json::from_slice(&std::fs::read(rec.join("dashjs-metrics.json")).unwrap()).unwrap();
    assert_eq!(m["errors"].as_array().unwrap().len(), 0, "{}", m["errors"]);
    assert!(
        !m["switches"].as_array().unwrap().is_empty(),
        "{}",
        m["switches"]
    );
    assert!(
        m["buffer"].as_array().unwrap().len() > 40,
        "a sample every 250 ms"
    );
    assert!(m["stalls"].is_array());
    // the h2load timing script has a line per request
    let h2 = std::fs::read_to_string(rec.join("recording.h2load.txt")).unwrap();
    assert_eq!(h2.lines().count(), reqs.len());

    replay_reproduces(&root, &rec, reqs, d.path());
}

/// dash.js over HTTP/3: `record --h3` starts `vodlab serve --h3` with a
/// certificate of its own CA and forces Chromium onto QUIC for the origin.
/// Chromium reports every response of the player as `h3`; the server's own
/// statistics (written at its end) count every request it answered as an
/// HTTP/3 request on QUIC connections, the access log has a line per
/// request, and dash.js played without error. The recording replays over
/// h3 against `serve --h3`: every request completes, with as many body
/// bytes in all as Chromium received (a recorded script has no content
/// seed, so the bytes themselves are not compared).
#[test]
fn dashjs_plays_over_h3_in_chromium_and_replays_over_h3() {
    require("ffmpeg", "ffmpeg");
    let chromium = require("chromium", "chromium");
    require_npm(&["dashjs"]);
    let _one = BROWSER.lock().unwrap_or_else(|e| e.into_inner());
    let d = tempfile::tempdir().unwrap();
    let root = real_set(d.path(), 20);
    let rec = d.path().join("rec");
    let out = vodlab_ok(&[
        "record",
        "--h3",
        "--root",
        root.to_str().unwrap(),
        "--seconds",
        "12",
        "--chromium",
        chromium.to_str().unwrap(),
        "-o",
        rec.to_str().unwrap(),
    ]);
    eprintln!("{out}");
    let requests: serde_json::Value =
        serde_json::from_slice(&std::fs::read(rec.join("requests.json")).unwrap()).unwrap();
    assert_eq!(requests["h3"], true);
    assert!(requests["origin"].as_str().unwrap().starts_with("https://"));
    let reqs = requests["requests"].as_array().unwrap();
    assert!(reqs.len() >= 5, "{requests}");
    for r in reqs {
        assert_eq!(r["protocol"], "h3", "Chromium's protocol of {r}");
        assert_eq!(r["status"], 200, "{r}");
    }
    // the server's side: every request it answered came over HTTP/3
    let st: serde_json::Value =
        serde_json::from_slice(&std::fs::read(rec.join("serve-stats.json")).unwrap()).unwrap();
    let log = std::fs::read_to_string(rec.join("access.log")).unwrap();
    let answered = log.lines().count() as u64;
    assert_eq!(st["requests"].as_u64(), Some(answered), "{st}");
    assert_eq!(st["h3"]["requests"].as_u64(), Some(answered), "{st}");
    assert!(st["h3"]["connections"].as_u64().unwrap() >= 1, "{st}");
    let player = log.lines().filter(|l| l.contains(" /t00000/")).count();
    assert_eq!(player, reqs.len(), "{log}");
    let m: serde_json::Value =
        serde_json::from_slice(&std::fs::read(rec.join("dashjs-metrics.json")).unwrap()).unwrap();
    assert_eq!(m["errors"].as_array().unwrap().len(), 0, "{}", m["errors"]);
    // the recording replayed over h3
    let tls = rec.join("tls");
    let port = common::free_port();
    let serve = h3common::serve_h3_with_cert(
        &root,
        port,
        &tls.join("cert.pem"),
        &tls.join("key.pem"),
        &[],
    );
    let rep = d.path().join("replay");
    let o = common::vodlab(&[
        "run",
        rec.join("recording.vsl").to_str().unwrap(),
        "--protocol",
        "h3",
        "--target",
        &format!("https://127.0.0.1:{port}"),
        "--ca",
        tls.join("ca.pem").to_str().unwrap(),
        "--rate",
        "100",
        "--arrivals",
        "constant",
        "--quiet",
        "-o",
        rep.to_str().unwrap(),
    ]);
    drop(serve);
    assert!(o.status.success(), "{o:?}");
    let r = results(&rep);
    assert_eq!(r["failed_sessions"], 0, "{r}");
    assert_eq!(r["protocol"], "h3");
    assert_eq!(
        r["completed_requests"].as_u64(),
        Some(reqs.len() as u64),
        "{r}"
    );
    let recorded: u64 = reqs.iter().map(|q| q["bytes"].as_u64().unwrap()).sum();
    assert_eq!(r["completed_bytes"].as_u64(), Some(recorded), "{r}");
}

#[test]
fn a_recorded_hlsjs_session_replays_with_its_urls_and_timing() {
    require("ffmpeg", "ffmpeg");
    let chromium = require("chromium", "chromium");
    require_npm(&["hls.js"]);
    let _one = BROWSER.lock().unwrap_or_else(|e| e.into_inner());
    let d = tempfile::tempdir().unwrap();
    // 24 s: six 4 s segments, all fetched within 15 s at 2 Mbit/s
    let root = real_set(d.path(), 24);
    let rec = d.path().join("rec");
    let out = vodlab_ok(&[
        "record",
        "--player",
        "hls",
        "--root",
        root.to_str().unwrap(),
        "--seconds",
        HLS_SECONDS,
        "--down-kbps",
        "2000",
        "--latency-ms",
        "20",
        "--chromium",
        chromium.to_str().unwrap(),
        "-o",
        rec.to_str().unwrap(),
    ]);
    eprintln!("{out}");
    let requests: serde_json::Value =
        serde_json::from_slice(&std::fs::read(rec.join("requests.json")).unwrap()).unwrap();
    assert!(
        requests["player"]
            .as_str()
            .is_some_and(|p| p.starts_with("hls.js 1.7")),
        "{}",
        requests["player"]
    );
    let reqs = requests["requests"].as_array().unwrap();
    let paths: Vec<&str> = reqs.iter().map(|r| r["path"].as_str().unwrap()).collect();
    // the multivariant playlist first, a media playlist before its
    // rendition's init, an init before its media, media in order
    assert_eq!(paths[0], "/t00000/master.m3u8", "{paths:?}");
    let mut playlists = BTreeMap::new();
    let mut inits = BTreeMap::new();
    let mut last: BTreeMap<bool, u32> = BTreeMap::new();
    let mut video_segments = 0u32;
    for (i, p) in paths.iter().enumerate().skip(1) {
        if let Some(rep) = p.strip_suffix(".m3u8") {
            playlists.entry(rep.to_string()).or_insert(i);
        } else if let Some(rep) = p.strip_suffix("/init.mp4") {
            assert!(
                playlists.get(rep).is_some_and(|&k| k < i),
                "{p} before its playlist: {paths:?}"
            );
            inits.entry(rep.to_string()).or_insert(i);
        } else if let Some((rep, n)) = media_segment(p) {
            let init = inits.get(&format!("/t00000/{rep}"));
            assert!(
                init.is_some_and(|&k| k < i),
                "{p} before its init: {paths:?}"
            );
            let audio = rep == "audio";
            let next = last.get(&audio).map_or(0, |&hi| hi + 1);
            assert!(n <= next, "{p} skips ahead of segment {next}: {paths:?}");
            last.insert(audio, next.max(n + 1) - 1);
            video_segments += u32::from(!audio);
        } else {
            panic!("unexpected request {p}: {paths:?}");
        }
    }
    // hls.js buffers up to 30 s ahead: the whole 24 s title in 15 s
    assert_eq!(last.get(&false), Some(&5), "{paths:?}");
    assert_eq!(last.get(&true), Some(&5), "{paths:?}");
    assert!(video_segments >= 6, "{paths:?}");
    assert!(playlists.contains_key("/t00000/audio"), "{paths:?}");
    for r in reqs {
        assert_eq!(r["status"], 200, "{r}");
    }
    // hls.js's metrics: no fatal error, the level it switched to, buffer
    let m: serde_json::Value =
        serde_json::from_slice(&std::fs::read(rec.join("hlsjs-metrics.json")).unwrap()).unwrap();
    let fatal: Vec<&serde_json::Value> = m["errors"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["fatal"] == true)
        .collect();
    assert!(fatal.is_empty(), "{fatal:?}");
    assert_eq!(m["levels"]["video"].as_array().unwrap().len(), 3);
    assert!(
        !m["switches"].as_array().unwrap().is_empty(),
        "{}",
        m["switches"]
    );
    assert!(m["started_s"].is_number(), "hls.js never played");
    assert!(
        m["buffer"].as_array().unwrap().len() > 25,
        "a sample every 250 ms"
    );
    let h2 = std::fs::read_to_string(rec.join("recording.h2load.txt")).unwrap();
    assert_eq!(h2.lines().count(), reqs.len());
    replay_reproduces(&root, &rec, reqs, d.path());
}

#[test]
fn record_refuses_what_it_cannot_do_by_name() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("rec");
    let o = out.to_str().unwrap();
    let err = |args: &[&str]| {
        let r = common::vodlab(args);
        assert!(!r.status.success(), "{args:?} succeeded");
        String::from_utf8_lossy(&r.stderr).into_owned()
    };
    // no npm packages where they are looked for
    let e = err(&[
        "record",
        "--root",
        d.path().to_str().unwrap(),
        "--record-dir",
        d.path().join("none").to_str().unwrap(),
        "-o",
        o,
    ]);
    assert!(
        e.contains("dashjs and puppeteer-core are not installed")
            && e.contains("install-test-deps.sh"),
        "{e}"
    );
    // a remote target, a bad duration, neither root nor target
    let e = err(&[
        "record",
        "--target",
        "http://192.0.2.1:80",
        "--mpd",
        "/t/manifest.mpd",
        "-o",
        o,
    ]);
    assert!(e.contains("not a loopback address"), "{e}");
    // --h3 needs the server record starts itself
    let e = err(&[
        "record",
        "--h3",
        "--target",
        "http://127.0.0.1:9",
        "--manifest",
        "/m.mpd",
        "-o",
        o,
    ]);
    assert!(e.contains("--h3") && e.contains("--target"), "{e}");
    let e = err(&["record", "--root", ".", "--seconds", "0", "-o", o]);
    assert!(e.contains("--seconds 0"), "{e}");
    let e = err(&["record", "-o", o]);
    assert!(e.contains("--root"), "{e}");
    // dash.js's CMCD only
    let e = err(&[
        "record", "--player", "hls", "--root", ".", "--cmcd", "-o", o,
    ]);
    assert!(e.contains("--cmcd: dash.js's CMCD only"), "{e}");
    let e = err(&["record", "--root", ".", "--cmcd", "json", "-o", o]);
    assert!(e.contains("json"), "{e}");
    // settings that are not a JSON object; a namespace that does not exist
    let e = err(&["record", "--root", ".", "--player-settings", "{x", "-o", o]);
    assert!(e.contains("--player-settings: not JSON"), "{e}");
    let e = err(&["record", "--root", ".", "--player-settings", "[1]", "-o", o]);
    assert!(
        e.contains("--player-settings: expected a JSON object"),
        "{e}"
    );
    let e = err(&[
        "record",
        "--target",
        "http://10.77.0.1:8080",
        "--manifest",
        "/t/master.m3u8",
        "--netns",
        "vl-nosuchlab-c0",
        "-o",
        o,
    ]);
    assert!(
        e.contains("--netns vl-nosuchlab-c0: no such network namespace"),
        "{e}"
    );
    // a lab address without --netns
    let e = err(&[
        "record",
        "--target",
        "http://10.77.0.1:8080",
        "--manifest",
        "/t/manifest.mpd",
        "-o",
        o,
    ]);
    assert!(e.contains("needs --netns"), "{e}");
    // hls.js missing where it is looked for
    let e = err(&[
        "record",
        "--player",
        "hls",
        "--root",
        d.path().to_str().unwrap(),
        "--record-dir",
        d.path().join("none").to_str().unwrap(),
        "-o",
        o,
    ]);
    assert!(
        e.contains("hls.js and puppeteer-core are not installed") && e.contains("hls.js@1.7.4"),
        "{e}"
    );
}

/// `(rep id, bandwidth kbit/s as dash.js reports it: bit/s / 1000 rounded
/// down)` of each `<Representation>` of an MPD, and whether it is audio.
fn mpd_bitrates(mpd: &str) -> BTreeMap<String, (u64, bool)> {
    let attr = |tag: &str, name: &str| {
        let at = tag.find(&format!(" {name}=\""))? + name.len() + 3;
        Some(tag[at..].split('"').next()?.to_string())
    };
    let mut audio = false;
    let mut out = BTreeMap::new();
    for tag in mpd.split('<') {
        if tag.starts_with("AdaptationSet") {
            audio = tag.contains("audio");
        } else if tag.starts_with("Representation") {
            let id = attr(tag, "id").unwrap();
            let bw: u64 = attr(tag, "bandwidth").unwrap().parse().unwrap();
            out.insert(id, (bw / 1000, audio));
        }
    }
    out
}

/// The CMCD a recorded request carried, parsed strictly (every key
/// dash.js sends must be one the parser knows, every value well formed):
/// from its `cmcd_headers` or its path's query.
fn sent_cmcd(r: &serde_json::Value) -> vodlab_cmcd::Cmcd {
    let path = r["path"].as_str().unwrap();
    let lines: Vec<(String, String)> = r["cmcd_headers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            let (n, v) = l.as_str().unwrap().split_once(':').unwrap();
            (n.trim().to_ascii_lowercase(), v.trim().to_string())
        })
        .collect();
    let c = if lines.is_empty() {
        let q = path.split_once('?').map_or("", |(_, q)| q);
        vodlab_cmcd::Cmcd::try_from_query(q)
    } else {
        vodlab_cmcd::Cmcd::try_from_headers(|n| {
            lines.iter().find(|(k, _)| k == n).map(|(_, v)| v.as_str())
        })
    };
    let c = c.unwrap_or_else(|e| panic!("{path}: dash.js's CMCD does not parse: {e} ({r})"));
    assert!(
        c.custom.is_empty(),
        "{path}: keys unknown to the parser: {c:?}"
    );
    c
}

/// `(path without query, CMCD in query form)` of each access-log line of
/// `vodlab serve`, read back as `vodlab analyze` does, sorted.
fn logged_cmcd(log: &Path) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(log).unwrap();
    let mut v: Vec<(String, String)> = text
        .lines()
        // the browser's own request, not the player's
        .filter(|l| !l.contains(" /favicon.ico "))
        .map(|l| {
            let path = l.split_whitespace().nth(3).unwrap().to_string();
            let c = vodlab_analyze::parse::vodlab_cmcd_of(l)
                .unwrap_or_else(|| panic!("no CMCD logged: {l}"));
            (path, c.to_query())
        })
        .collect();
    v.sort();
    v
}

/// dash.js 4.7.4 with its own CMCD on (`vodlab record --cmcd MODE`) plays
/// a 24 s title for `seconds`: every request carries CMCD that the one
/// parser reads strictly with no unknown key, each value agrees with what
/// the player fetched (object type and bit rate of the path's
/// representation, top bit rate, duration, buffer and deadline, dash.js's
/// own `rtp` rule, the next segment, the session and content ids), the
/// server's access log holds the same reports, and the replayed script
/// sends them again. Returns the keys seen.
fn dashjs_cmcd_round(mode: &str, seconds: &str, chromium: &Path) -> Vec<String> {
    let d = tempfile::tempdir().unwrap();
    let root = real_set(d.path(), 24);
    let rec = d.path().join("rec");
    let out = vodlab_ok(&[
        "record",
        "--root",
        root.to_str().unwrap(),
        "--cmcd",
        mode,
        "--seconds",
        seconds,
        "--down-kbps",
        "2000",
        "--latency-ms",
        "20",
        "--chromium",
        chromium.to_str().unwrap(),
        "-o",
        rec.to_str().unwrap(),
    ]);
    eprintln!("{out}");
    let requests: serde_json::Value =
        serde_json::from_slice(&std::fs::read(rec.join("requests.json")).unwrap()).unwrap();
    assert_eq!(requests["cmcd"]["mode"], mode);
    let sid = requests["cmcd"]["sid"].as_str().unwrap().to_string();
    assert!(sid.starts_with("vodlab-record-"), "{sid}");
    let reqs = requests["requests"].as_array().unwrap();
    assert!(
        out.contains(&format!("{} with CMCD", reqs.len())),
        "every request has CMCD: {out}"
    );
    let mpd = std::fs::read_to_string(root.join("t00000/manifest.mpd")).unwrap();
    let rates = mpd_bitrates(&mpd);
    let top = |audio: bool| {
        rates
            .values()
            .filter(|(_, a)| *a == audio)
            .map(|(b, _)| *b)
            .max()
            .unwrap()
    };
    let mut keys = std::collections::BTreeSet::new();
    let mut first_media: BTreeMap<bool, usize> = BTreeMap::new();
    let mut recorded = Vec::new();
    for (i, r) in reqs.iter().enumerate() {
        let path = r["path"].as_str().unwrap();
        let bare = path.split('?').next().unwrap();
        match mode {
            "query" => assert!(r["cmcd_headers"].as_array().unwrap().is_empty(), "{r}"),
            _ => assert!(!path.contains('?'), "{r}"),
        }
        let c = sent_cmcd(r);
        eprintln!("{bare}: {}", c.to_list());
        keys.extend(c.items().into_iter().map(|(k, _)| k.to_string()));
        recorded.push((bare.to_string(), c.to_query()));
        // the session's ids, version 1 (no `v`)
        assert_eq!(c.sid.as_deref(), Some(sid.as_str()), "{path}");
        assert_eq!(c.cid.as_deref(), Some("t00000"), "{path}");
        assert_eq!(c.v, None, "{path}");
        assert_eq!(c.pr, None, "played at 1x: {path}");
        use vodlab_cmcd::ObjectType as O;
        if bare.ends_with(".mpd") {
            assert_eq!(c.ot, Some(O::Manifest), "{path}");
            assert_eq!((c.br, c.bl), (None, None), "{path}");
            continue;
        }
        if bare.ends_with("/init.mp4") {
            assert_eq!(c.ot, Some(O::Init), "{path}");
            assert!(c.su, "an init segment is start-up: {path}");
            continue;
        }
        let (rep, n) = media_segment(bare).unwrap_or_else(|| panic!("unexpected {bare}"));
        let (br, audio) = rates[&rep];
        assert_eq!(
            c.ot,
            Some(if audio { O::Audio } else { O::Video }),
            "{path}"
        );
        assert_eq!(c.br, Some(br), "{path}: the representation's bandwidth");
        assert_eq!(c.tb, Some(top(audio)), "{path}: the top of its type");
        assert_eq!(c.d, Some(4000), "{path}: 4 s segments");
        assert_eq!(c.sf, Some(vodlab_cmcd::StreamingFormat::Dash), "{path}");
        assert_eq!(c.st, Some(vodlab_cmcd::StreamType::Vod), "{path}");
        // the next segment, relative to this one (`../REP/` after a
        // switch; dash.js percent-encodes the relative URL)
        for nor in &c.nor {
            assert!(
                nor.replace("%2F", "/")
                    .ends_with(&format!("{:05}.m4s", n + 1)),
                "{path}: nor {nor}"
            );
        }
        if first_media.insert(audio, i).is_none() {
            assert!(c.su, "the first media segment is start-up: {path}");
        }
        // an empty buffer at start-up: bl=0, which dash.js's header mode
        // leaves out (it copies only truthy values into the headers)
        let bl = match c.bl {
            Some(bl) => bl,
            None => {
                assert!(
                    mode == "header" && c.su && c.dl.is_none(),
                    "no bl after start-up: {path}"
                );
                0
            }
        };
        assert!(bl % 100 == 0 && bl <= 60_000, "{path}: bl {bl}");
        if c.bl.is_some() {
            assert_eq!(c.dl, Some(bl), "{path}: deadline = buffer at 1x");
        }
        if let Some(m) = c.mtp {
            assert!(m % 100 == 0 && m <= 20_000, "{path}: mtp {m}");
        }
        // dash.js's rtp rule (CmcdModel._calculateRtp): the segment's
        // kbits over the buffer's time (0 counts as 0.5 s), times its
        // safety factor 5, rounded up to the next 100 kbit/s
        let bl_s = if bl == 0 { 0.5 } else { bl as f64 / 1000.0 };
        let want = ((br as f64 * 4.0 / bl_s * 5.0 / 100.0).floor() + 1.0) * 100.0;
        let rtp = c.rtp.unwrap_or_else(|| panic!("no rtp: {path}")) as f64;
        assert!(
            (rtp - want).abs() <= 100.0,
            "{path}: rtp {rtp}, dash.js's rule gives {want} (br {br}, bl {bl})"
        );
    }
    recorded.sort();
    // what vodlab serve logged (its access log, read as analyze reads it):
    // the same reports; a request the player cancelled before the server
    // answered may be missing there
    let logged = logged_cmcd(&rec.join("access.log"));
    for l in &logged {
        assert!(recorded.contains(l), "logged but not sent: {l:?}");
    }
    let complete: usize = reqs.iter().filter(|r| r["status"] == 200).count();
    assert!(
        logged.len() >= complete,
        "{} logged, {complete} complete",
        logged.len()
    );
    // replayed: each request sends the same CMCD again
    let log = d.path().join("replay-access.log");
    let s = Running::start(&root, |c| c.access_log = Some(log.clone()));
    let rep = d.path().join("replay");
    vodlab_ok(&[
        "run",
        rec.join("recording.vsl").to_str().unwrap(),
        "--target",
        &s.url(""),
        "--rate",
        "100",
        "--arrivals",
        "constant",
        "--check-bytes",
        "0",
        "--late-pacing",
        "burst",
        "--quiet",
        "-o",
        rep.to_str().unwrap(),
    ]);
    drop(s); // shuts down, flushing the access log
    assert_eq!(results(&rep)["failed_sessions"], 0);
    assert_eq!(
        logged_cmcd(&log),
        recorded,
        "the replay sends the recorded CMCD"
    );
    eprintln!(
        "dash.js CMCD ({mode}): {} requests, keys {keys:?}",
        reqs.len()
    );
    keys.into_iter().collect()
}

#[test]
fn dashjs_cmcd_reaches_serve_parsed_and_replays_in_header_and_query_mode() {
    require("ffmpeg", "ffmpeg");
    let chromium = require("chromium", "chromium");
    require_npm(&["dashjs"]);
    let _one = BROWSER.lock().unwrap_or_else(|e| e.into_inner());
    // dash.js 4.7.4 sends version 1's keys; bs only after a stall, nrr
    // only for byte ranges of one file, pr only when not 1
    let want = [
        "bl", "br", "cid", "d", "dl", "mtp", "nor", "ot", "rtp", "sf", "sid", "st", "su", "tb",
    ];
    for (mode, secs) in [("header", "15"), ("query", "10")] {
        let keys = dashjs_cmcd_round(mode, secs, &chromium);
        for k in want {
            assert!(keys.iter().any(|s| s == k), "{mode}: no {k} in {keys:?}");
        }
    }
}
