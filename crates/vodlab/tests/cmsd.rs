//! CMSD (CTA-5006) end to end: `vodlab serve --cmsd` writes `CMSD-Static`
//! and `CMSD-Dynamic` on HTTP/1.1 and HTTP/2 responses with a file,
//! `vodlab run --player dash --honour-cmsd` (over HTTP/1.1 and h2c) keeps
//! every request at or below the server's `mb`, and its players' throughput
//! estimate follows a scripted server's `etp` (docs/cmcd.md, "CMSD").

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::{require, sparse_fileset, vodlab_ok};
use vodlab_cmcd::cmsd::{CmsdDynamic, CmsdStatic, DYNAMIC, STATIC};
use vodlab_cmcd::{ObjectType, StreamType};
use vodlab_manifest::MPD_NAME;
use vodlab_server::bitrate::BitrateCatalog;
use vodlab_workload::Catalog;

/// The `mb` the server sends, kbit/s: the dash-vod ladder's third rung
/// (235, 750, 1750, 3000, 4300, 5800).
const MB: u64 = 1750;

use common::ServeChild as Serve;

/// A `dash-vod` workload of 8 sessions over 4 titles with a sparse file set
/// and its manifests: (workload, root).
fn setup(dir: &Path) -> (PathBuf, PathBuf) {
    let spec = dir.join("spec.toml");
    std::fs::write(&spec, vodlab_ok(&["gen", "--show-preset", "dash-vod"])).unwrap();
    let w = dir.join("w");
    vodlab_ok(&[
        "gen",
        "--spec",
        spec.to_str().unwrap(),
        "--sessions",
        "8",
        "--titles",
        "4",
        "-o",
        w.to_str().unwrap(),
    ]);
    let root = dir.join("root");
    sparse_fileset(&w, &root);
    let c: Catalog =
        serde_json::from_slice(&std::fs::read(w.join("catalog.json")).unwrap()).unwrap();
    for m in vodlab_manifest::manifests(&c) {
        let p = root.join(&m.rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, m.text).unwrap();
    }
    (w, root)
}

/// The head of an HTTP/1.1 GET of `path` with `headers`, as (status line,
/// lower-case name → value).
fn get_h1(port: u16, path: &str, headers: &str) -> (String, Vec<(String, String)>) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n{headers}\r\n"
    )
    .unwrap();
    let mut all = Vec::new();
    s.read_to_end(&mut all).unwrap();
    let end = all.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let head = String::from_utf8_lossy(&all[..end]).to_string();
    let mut lines = head.lines();
    let status = lines.next().unwrap().to_string();
    let fields = lines
        .map(|l| {
            let (n, v) = l.split_once(':').unwrap();
            (n.trim().to_ascii_lowercase(), v.trim().to_string())
        })
        .collect();
    (status, fields)
}

fn field<'a>(fields: &'a [(String, String)], name: &str) -> Option<&'a str> {
    let name = name.to_ascii_lowercase();
    fields
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, v)| v.as_str())
}

/// A segment of the first title's `rep` (a path under the root).
fn segment(root: &Path, rep: &str) -> String {
    let mut found = None;
    for t in std::fs::read_dir(root).unwrap() {
        let d = t.unwrap().path().join(rep);
        if d.is_dir() {
            let mut names: Vec<String> = std::fs::read_dir(&d)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
                .filter(|n| !n.contains("init"))
                .collect();
            names.sort();
            let rel = d.strip_prefix(root).unwrap().join(&names[0]);
            found = Some(format!("/{}", rel.to_string_lossy()));
            break;
        }
    }
    found.unwrap_or_else(|| panic!("no rendition {rep} under {}", root.display()))
}

#[test]
fn serve_writes_cmsd_on_h1_and_h2_responses() {
    let d = tempfile::tempdir().unwrap();
    let (_, root) = setup(d.path());
    let s = Serve::start(
        &root,
        &[
            "--cmsd",
            "--cmsd-name",
            "edge-1",
            "--cmsd-mb",
            &MB.to_string(),
        ],
    );
    let seg = segment(&root, &rep_name(d.path(), 1));
    let cmcd = "CMCD-Object: br=750,d=4000,ot=v\r\n";
    // twice: the second response has bytes sent before it, so an etp
    let mut last = None;
    for _ in 0..2 {
        let (status, f) = get_h1(s.port, &seg, cmcd);
        assert!(status.ends_with("200 OK"), "{status}");
        let st = CmsdStatic::try_parse(field(&f, STATIC).expect("CMSD-Static")).unwrap();
        assert_eq!(st.ot, Some(ObjectType::Video));
        assert_eq!((st.d, st.br), (Some(4000), Some(750)));
        assert_eq!(st.st, Some(StreamType::Vod));
        let dy = CmsdDynamic::try_parse(field(&f, DYNAMIC).expect("CMSD-Dynamic")).unwrap();
        assert_eq!(dy.hops.len(), 1, "{dy:?}");
        let hop = &dy.hops[0];
        assert_eq!(hop.server, "edge-1");
        assert_eq!(hop.mb, Some(MB));
        assert!(hop.rd.is_some_and(|rd| rd < 5000), "{hop:?}");
        last = Some(hop.clone());
    }
    assert!(
        last.unwrap().etp.is_some_and(|e| e > 0),
        "etp once bytes went"
    );
    // a manifest: ot=m, no duration
    let title = seg.split('/').nth(1).unwrap();
    let mpd = format!("/{title}/{MPD_NAME}");
    let (status, f) = get_h1(s.port, &mpd, "");
    assert!(status.ends_with("200 OK"), "{status}");
    let st = CmsdStatic::try_parse(field(&f, STATIC).unwrap()).unwrap();
    assert_eq!((st.ot, st.d), (Some(ObjectType::Manifest), None));
    // no file, no CMSD
    let (status, f) = get_h1(s.port, "/nope.m4s", "");
    assert!(status.contains(" 404 "), "{status}");
    assert_eq!(field(&f, DYNAMIC), None);
    // HTTP/2 (h2c with prior knowledge): the same fields
    let curl = require("curl", "curl");
    let out = Command::new(curl)
        .args(["-sS", "--max-time", "30", "--http2-prior-knowledge"])
        .args(["-D", "-", "-o", "/dev/null", &s.url(&seg)])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let head = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(head.starts_with("HTTP/2 200"), "{head}");
    let f: Vec<(String, String)> = head
        .lines()
        .skip(1)
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let st = CmsdStatic::try_parse(field(&f, STATIC).expect("h2 CMSD-Static")).unwrap();
    assert_eq!(st.st, Some(StreamType::Vod));
    // the path says nothing of the track, and no CMCD said it
    assert_eq!(st.ot, Some(ObjectType::Other), "{head}");
    let dy = CmsdDynamic::try_parse(field(&f, DYNAMIC).expect("h2 CMSD-Dynamic")).unwrap();
    assert_eq!(
        (dy.hops[0].server.as_str(), dy.hops[0].mb),
        ("edge-1", Some(MB))
    );
}

/// The name of the workload's `i`th representation (0: the lowest).
fn rep_name(dir: &Path, i: usize) -> String {
    let c: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("w/catalog.json")).unwrap()).unwrap();
    c["representations"][i]["name"]
        .as_str()
        .unwrap()
        .to_string()
}

/// Runs the players (4 segments each, unshaped loopback) against `s`.
fn run_players(w: &Path, s: &Serve, out: &Path, extra: &[&str]) -> serde_json::Value {
    let mut flags = vec!["--abr", "throughput"];
    flags.extend_from_slice(extra);
    common::run_dash_players(w, &s.url(""), out, &flags)
}

/// The bit rates (kbit/s) of the media and init requests in an access log.
fn requested_kbps(log: &Path, w: &Path) -> Vec<f64> {
    let cat = BitrateCatalog::load(&w.join("catalog.json")).unwrap();
    std::fs::read_to_string(log)
        .unwrap()
        .lines()
        .filter_map(|l| {
            let path = l.split_whitespace().nth(3)?;
            (!path.ends_with(".mpd")).then(|| cat.lookup(path))?
        })
        .collect()
}

#[test]
fn players_honouring_cmsd_stay_at_or_below_mb() {
    let d = tempfile::tempdir().unwrap();
    let (w, root) = setup(d.path());
    let mut runs = Vec::new();
    // honoured over HTTP/1.1 and h2c, then not honoured
    for (honour, proto) in [(true, "h1"), (true, "h2c"), (false, "h1")] {
        let log = d.path().join(format!("access-{honour}-{proto}.log"));
        let s = Serve::start(
            &root,
            &[
                "--cmsd",
                "--cmsd-mb",
                &MB.to_string(),
                "--access-log",
                log.to_str().unwrap(),
            ],
        );
        let mut extra = vec!["--protocol", proto];
        if honour {
            extra.push("--honour-cmsd");
        }
        let out = d.path().join(format!("out-{honour}-{proto}"));
        let r = run_players(&w, &s, &out, &extra);
        drop(s); // flushes the access log
        let p = &r["players"];
        assert_eq!(p["overall"]["sessions"], 8, "{p}");
        assert_eq!(p["overall"]["failed"], 0, "{p}");
        let kbps = requested_kbps(&log, &w);
        assert!(kbps.len() >= 8 * 4, "{kbps:?}");
        runs.push(kbps);
    }
    // honouring: the manifest's CMSD came first, so every segment (and
    // init segment) request is at or below mb, over either protocol
    for honoured in &runs[..2] {
        assert!(
            honoured.iter().all(|&k| k <= MB as f64),
            "honoured: {honoured:?}"
        );
        assert!(
            honoured.contains(&(MB as f64)),
            "the cap is reached on loopback: {honoured:?}"
        );
    }
    // not honouring, loopback carries more than mb
    let free = &runs[2];
    assert!(free.iter().any(|&k| k > MB as f64), "free: {free:?}");
}

/// The ground-truth server holding the workload `w` (every file and
/// manifest), each response carrying `CMSD-Dynamic: "gt";etp=ETP`.
fn etp_site(w: &Path, etp: u64) -> vodlab_client::groundtruth::Site {
    use vodlab_client::groundtruth::{Behaviour, Site};
    let m: serde_json::Value =
        serde_json::from_slice(&std::fs::read(w.join("workload.json")).unwrap()).unwrap();
    let c: Catalog =
        serde_json::from_slice(&std::fs::read(w.join("catalog.json")).unwrap()).unwrap();
    let mut site = Site {
        seed: m["seed"].as_u64().unwrap(),
        files: c.files().map(|(p, n)| (format!("/{p}"), n)).collect(),
        ..Site::default()
    };
    for f in vodlab_manifest::manifests(&c) {
        site.texts
            .insert(format!("/{}", f.rel), f.text.into_bytes());
    }
    site.behaviours.insert(
        "*".into(),
        Behaviour {
            headers: vec![(DYNAMIC.to_string(), format!("\"gt\";etp={etp}"))],
            ..Behaviour::default()
        },
    );
    site
}

/// Per player session (its CMCD `sid`), the media segments it asked for in
/// order: (bit rate of the path's representation, CMCD `mtp` sent).
fn segments_by_session(
    served: &[vodlab_client::groundtruth::Served],
    w: &Path,
) -> std::collections::BTreeMap<String, Vec<(f64, Option<u64>)>> {
    let cat = BitrateCatalog::load(&w.join("catalog.json")).unwrap();
    let mut by = std::collections::BTreeMap::<String, Vec<(f64, Option<u64>)>>::new();
    for s in served {
        if s.cmcd.ot != Some(ObjectType::Video) {
            continue;
        }
        let kbps = cat.lookup(&s.path).expect("a media segment's bit rate");
        let sid = s.cmcd.sid.clone().expect("a sid");
        by.entry(sid).or_default().push((kbps, s.cmcd.mtp));
    }
    by
}

#[test]
fn players_honouring_cmsd_follow_the_servers_etp() {
    let d = tempfile::tempdir().unwrap();
    let (w, _) = setup(d.path());
    // the dash-vod ladder, kbit/s
    let ladder = [235.0, 750.0, 1750.0, 3000.0, 4300.0, 5800.0];
    let rt = tokio::runtime::Runtime::new().unwrap();
    let run = |etp: u64, extra: &[&str]| {
        let server = rt
            .block_on(vodlab_client::groundtruth::GroundTruthServer::start(
                etp_site(&w, etp),
            ))
            .unwrap();
        let out = d.path().join(format!("etp-{etp}-{}", extra.len()));
        let r = run_players_at(&w, &format!("http://{}", server.addr), &out, extra);
        let p = &r["players"]["overall"];
        assert_eq!(
            (p["sessions"].as_u64(), p["failed"].as_u64()),
            (Some(8), Some(0)),
            "{p}"
        );
        segments_by_session(&server.served(), &w)
    };
    for etp in [1000u64, 4000] {
        // weight 1: each throughput sample is the server's etp, so the
        // estimate is etp (the CMCD mtp the player sends, to 100 kbit/s)
        // and the throughput rule picks the highest rung within 0.9 x etp
        let want = ladder
            .iter()
            .copied()
            .filter(|&b| b <= 0.9 * etp as f64)
            .fold(ladder[0], f64::max);
        let by = run(etp, &["--honour-cmsd", "--cmsd-etp-weight", "1"]);
        assert_eq!(by.len(), 8, "{by:?}");
        for (sid, segs) in &by {
            assert!(segs.len() >= 4, "{sid}: {segs:?}");
            // the first segment is chosen before any estimate (the lowest)
            assert_eq!(segs[0].0, ladder[0], "{sid}: {segs:?}");
            for &(kbps, mtp) in &segs[1..] {
                assert_eq!(mtp, Some(etp), "{sid}: the estimate is etp: {segs:?}");
                assert!(kbps <= want, "{sid}: above {want}: {segs:?}");
            }
            assert_eq!(segs.last().unwrap().0, want, "{sid}: {segs:?}");
        }
        eprintln!("etp {etp} kbit/s honoured (weight 1): every session settles at {want} kbit/s");
    }
    // not honoured: the same server, the loopback's measured throughput, the
    // top rung; the estimate is far above the etp announced
    let by = run(1000, &[]);
    for (sid, segs) in &by {
        let (last, mtp) = *segs.last().unwrap();
        assert_eq!(last, ladder[5], "{sid}: {segs:?}");
        assert!(mtp.is_some_and(|m| m > 10 * 1000), "{sid}: {segs:?}");
    }
}

#[test]
fn dashjs_profile_players_honouring_cmsd_follow_the_servers_etp() {
    // --player-profile dashjs keeps dash.js's own throughput history: the
    // etp must reach it (dash.js 4.7.4 mixes it into each sample there)
    let d = tempfile::tempdir().unwrap();
    let (w, _) = setup(d.path());
    let rt = tokio::runtime::Runtime::new().unwrap();
    let run = |extra: &[&str]| {
        let server = rt
            .block_on(vodlab_client::groundtruth::GroundTruthServer::start(
                etp_site(&w, 1000),
            ))
            .unwrap();
        let out = d.path().join(format!("dashjs-{}", extra.len()));
        let mut flags = vec!["--player-profile", "dashjs", "--no-abandon"];
        flags.extend_from_slice(extra);
        let r = common::run_dash_players(&w, &format!("http://{}", server.addr), &out, &flags);
        let p = &r["players"]["overall"];
        assert_eq!(
            (p["sessions"].as_u64(), p["failed"].as_u64()),
            (Some(8), Some(0)),
            "{p}"
        );
        segments_by_session(&server.served(), &w)
    };
    // weight 1: every sample is 1,000 kbit/s; dash.js starts at the rung
    // for 1,000 (750) and its throughput rule keeps 0.9 x 1,000 = 900: 750
    let by = run(&["--honour-cmsd", "--cmsd-etp-weight", "1"]);
    assert_eq!(by.len(), 8, "{by:?}");
    for (sid, segs) in &by {
        assert!(segs.len() >= 4, "{sid}: {segs:?}");
        assert!(segs.iter().all(|&(k, _)| k <= 750.0), "{sid}: {segs:?}");
    }
    // not honoured: the loopback's measured throughput lifts them above it
    let by = run(&[]);
    for (sid, segs) in &by {
        assert!(segs.last().unwrap().0 > 1750.0, "{sid}: {segs:?}");
    }
}

/// Runs the players (4 segments each, unshaped loopback, the throughput
/// rule, no abandonment) against `url`.
fn run_players_at(w: &Path, url: &str, out: &Path, extra: &[&str]) -> serde_json::Value {
    let mut flags = vec!["--abr", "throughput", "--no-abandon"];
    flags.extend_from_slice(extra);
    common::run_dash_players(w, url, out, &flags)
}
