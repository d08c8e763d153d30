//! Helpers of the HTTP/2 and TLS tests (h2_serve, h2_floods): a root with
//! position-dependent bytes, curl with its protocol version and status,
//! the statistics, and the scripts/h2probe runners (Debian's python3 with
//! python3-h2).

#![allow(dead_code)]

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::{require, Running};

pub fn root_with_files() -> tempfile::TempDir {
    let d = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    // bytes that differ by position, so a misplaced range cannot pass
    let body: Vec<u8> = (0..3_000_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect();
    fs::write(d.path().join("seg.m4s"), &body).unwrap();
    fs::write(d.path().join("small.bin"), &body[..1000]).unwrap();
    fs::write(d.path().join("big.bin"), vec![7u8; 16 << 20]).unwrap();
    d
}

pub fn tls(cfg: &mut vodlab_server::Config) {
    cfg.tls.self_signed = true;
}

/// curl's (body, `HTTP-VERSION STATUS`).
pub fn curl(args: &[&str]) -> (Vec<u8>, String) {
    let bin = require("curl", "curl");
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(bin)
        .args([
            "-sS",
            "--max-time",
            "30",
            "-w",
            "%{http_version} %{http_code}",
        ])
        .args(["-o", dir.path().join("body").to_str().unwrap()])
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "curl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (
        fs::read(dir.path().join("body")).unwrap_or_default(),
        String::from_utf8_lossy(&out.stdout).to_string(),
    )
}

pub fn stats(s: &Running) -> serde_json::Value {
    let (b, _) = curl(&[&s.url("/vodlab/stats")]);
    serde_json::from_slice(&b).unwrap()
}

pub fn https(s: &Running, path: &str) -> String {
    format!("https://{}{path}", s.addr)
}

/// Debian's python3 (python3-h2 installs `h2` and `hpack` for it).
pub fn python() -> PathBuf {
    let p = PathBuf::from("/usr/bin/python3");
    let ok = Command::new(&p)
        .args(["-c", "import h2, hpack"])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        "this test needs Debian's python3 with `h2` and `hpack`: run `sudo apt-get install -y python3-h2` \
         (scripts/install-test-deps.sh installs it)"
    );
    p
}

pub fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../scripts/h2probe")
        .join(name)
}

/// The probe's JSON lines: (case, pass, deviation, detail).
pub fn probe(port: u16, args: &[&str]) -> Vec<(String, bool, bool, String)> {
    let out = Command::new(python())
        .arg(script("h2probe.py"))
        .args(["127.0.0.1", &port.to_string()])
        .args(args)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            (
                v["case"].as_str().unwrap().to_string(),
                v["pass"].as_bool().unwrap(),
                v["deviation"].as_bool().unwrap(),
                v["detail"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}
