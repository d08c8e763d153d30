//! The BBC HTTP/2-for-DASH experiment end to end, in small
//! (`scripts/experiments/bbc-h2.sh --smoke`, `vodlab serve` only, h1 and h2):
//! the timing script replays for every client, every media request is
//! logged by the server and timed by the client, and the summary holds a
//! median for each. About 15 s.

use std::path::Path;
use std::process::Command;

#[test]
fn the_bbc_script_replays_and_summarises_h1_and_h2() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let work = tempfile::tempdir().unwrap();
    let out = work.path().join("out");
    let o = Command::new("bash")
        .arg(repo.join("scripts/experiments/bbc-h2.sh"))
        .arg("--smoke")
        .arg(env!("CARGO_BIN_EXE_vodlab"))
        .env("OUT", &out)
        .env("SERVERS", "vodlab")
        .env("VARIANTS", "h1 h2")
        .output()
        .expect("bash");
    let log = format!(
        "{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(o.status.success(), "{log}");
    assert!(!log.contains("exited"), "a run failed:\n{log}");
    let rows: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("results.json")).unwrap()).unwrap();
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 2, "{rows:?}");
    for r in rows {
        // 4 clients x 6 segment pairs: 24 audio and 24 video requests
        for k in [
            "audio_server",
            "video_server",
            "audio_client",
            "video_client",
        ] {
            assert_eq!(r[k]["n"], 24, "{k} of {r}");
            assert!(r[k]["median_ms"].as_f64().unwrap() >= 0.0, "{k} of {r}");
        }
    }
    // the raw logs are kept, compressed
    assert!(out.join("runs/vodlab-h2-1/server.log.gz").exists());
    assert!(out.join("timing-script.txt").exists());
}
