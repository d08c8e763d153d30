//! Streaming manifests: `vodlab gen --preset dash-vod` → `vodlab fileset
//! create` writes a DASH MPD and HLS playlists per title whose every segment
//! names a file of the set, `verify` checks them, nginx serves them, and the
//! emulated disk presents the same text.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{require, vodlab, vodlab_ok, Nginx};
use vodlab_manifest::{
    hls_presentation, parse_master, parse_media, parse_mpd, resolve, MediaInfo, MASTER_NAME,
    MPD_NAME,
};
use vodlab_workload::Catalog;

fn gen(dir: &Path) -> (PathBuf, PathBuf) {
    let w = dir.join("w");
    let out = vodlab_ok(&[
        "gen",
        "--preset",
        "dash-vod",
        "--titles",
        "4",
        "--sessions",
        "8",
        "-o",
        w.to_str().unwrap(),
    ]);
    assert!(
        out.contains("streaming manifests: a DASH MPD and HLS playlists"),
        "{out}"
    );
    let root = dir.join("set");
    let out = vodlab_ok(&[
        "fileset",
        "create",
        w.to_str().unwrap(),
        "--root",
        root.to_str().unwrap(),
    ]);
    assert!(out.contains("streaming manifests"), "{out}");
    (w, root)
}

fn catalog(w: &Path) -> Catalog {
    serde_json::from_slice(&std::fs::read(w.join("catalog.json")).unwrap()).unwrap()
}

#[test]
fn every_segment_of_every_manifest_is_a_file_of_the_set() {
    let d = tempfile::tempdir().unwrap();
    let (w, root) = gen(d.path());
    let c = catalog(&w);
    let sizes: std::collections::HashMap<String, u64> = c.files().collect();
    for t in &c.titles {
        let mpd_path = format!("/{}/{MPD_NAME}", t.name);
        let mpd = std::fs::read_to_string(root.join(&mpd_path[1..])).unwrap();
        let dash = parse_mpd(&mpd).unwrap();
        assert_eq!(dash.levels.len(), t.representations.len());
        assert!((dash.duration_s - t.duration_s).abs() < 1e-3);
        for l in &dash.levels {
            let init = resolve(&mpd_path, &l.init.as_ref().unwrap().url);
            assert_eq!(
                std::fs::metadata(root.join(&init[1..])).unwrap().len(),
                1024,
                "{init}"
            );
            // whole segments cover the title, each an existing file of its size
            assert!(l.segments.len() as f64 * 4.0 >= t.duration_s);
            for s in &l.segments {
                let p = resolve(&mpd_path, &s.url);
                let on_disk = std::fs::metadata(root.join(&p[1..])).unwrap().len();
                assert_eq!(Some(&on_disk), sizes.get(&p[1..]), "{p}");
                // 4 s at the level's bit rate
                assert_eq!(on_disk, l.bandwidth_bps / 2, "{p}");
            }
        }
        // HLS names the same segments
        let master_path = format!("/{}/{MASTER_NAME}", t.name);
        let variants =
            parse_master(&std::fs::read_to_string(root.join(&master_path[1..])).unwrap()).unwrap();
        let media: Vec<MediaInfo> = variants
            .iter()
            .map(|v| {
                let p = resolve(&master_path, &v.uri);
                parse_media(&std::fs::read_to_string(root.join(&p[1..])).unwrap()).unwrap()
            })
            .collect();
        let hls = hls_presentation(&variants, &media).unwrap();
        assert_eq!(hls.levels, dash.levels);
    }
}

#[test]
fn verify_checks_manifests_and_the_emulated_disk_presents_them() {
    let d = tempfile::tempdir().unwrap();
    let (w, root) = gen(d.path());
    let (ws, rs) = (w.to_str().unwrap(), root.to_str().unwrap());
    let out = vodlab_ok(&["fileset", "verify", ws, "--root", rs]);
    assert!(out.contains(": 0 damaged"), "{out}");

    // the emulated disk's inline files are the same bytes
    let c = catalog(&w);
    let set = vodlab_diskfs::FileSet::from_catalog("dash-vod", 1, &c);
    let mpd = format!("{}/{MPD_NAME}", c.titles[0].name);
    let inline = set
        .inline
        .iter()
        .find(|(r, _)| *r == mpd)
        .expect("MPD inline");
    assert_eq!(inline.1, std::fs::read(root.join(&mpd)).unwrap());
    assert!(set
        .files
        .iter()
        .all(|(r, _)| !r.ends_with(".mpd") && !r.ends_with(".m3u8")));

    // a changed manifest is reported by name, and verify fails
    let victim = root.join(format!("{}/{MASTER_NAME}", c.titles[1].name));
    let mut text = std::fs::read_to_string(&victim).unwrap();
    text = text.replace("BANDWIDTH=235000", "BANDWIDTH=235001");
    std::fs::write(&victim, text).unwrap();
    let o = vodlab(&["fileset", "verify", ws, "--root", rs]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(!o.status.success());
    assert!(
        out.contains(&format!(
            "DAMAGED {}/{MASTER_NAME}: manifest differs",
            c.titles[1].name
        )),
        "{out}"
    );
}

#[test]
fn nginx_serves_the_manifests_and_byte_ranges_of_segments() {
    let d = tempfile::tempdir().unwrap();
    let (w, root) = gen(d.path());
    let c = catalog(&w);
    let nginx = Nginx::start(&root);
    let curl = require("curl", "curl");
    let t = &c.titles[0].name;
    let get = |path: &str, range: Option<&str>| -> Vec<u8> {
        let mut cmd = Command::new(&curl);
        cmd.args(["-sS", "--fail", "--max-time", "10"]);
        if let Some(r) = range {
            cmd.args(["-r", r]);
        }
        let o = cmd
            .arg(format!("http://127.0.0.1:{}{path}", nginx.port))
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "{path}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        o.stdout
    };
    let mpd = get(&format!("/{t}/{MPD_NAME}"), None);
    assert_eq!(
        mpd,
        std::fs::read(root.join(format!("{t}/{MPD_NAME}"))).unwrap()
    );
    let p = parse_mpd(std::str::from_utf8(&mpd).unwrap()).unwrap();
    let seg = resolve(&format!("/{t}/{MPD_NAME}"), &p.levels[2].segments[0].url);
    let body = get(&seg, Some("100-199"));
    assert_eq!(body, std::fs::read(root.join(&seg[1..])).unwrap()[100..200]);
}
