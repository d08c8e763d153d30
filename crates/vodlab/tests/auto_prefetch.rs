//! `vodlab serve --prefetch-policy auto` end to end: the binary serves
//! ranges of files whose pages the test drops from the page cache, so the
//! prefetch helpers read the disk; the controller's intervals (1 s here)
//! then show in `/vodlab/stats` as `prefetch_auto`.

mod common;

use std::fs::File;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::io::AsRawFd;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::{free_port, wait_until};

/// The server process, killed (by its PID) on drop.
struct Serve(Child);

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One request on a fresh connection: (status, body).
fn get(port: u16, path: &str, extra: &str) -> (u16, Vec<u8>) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n{extra}\r\n"
    )
    .unwrap();
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).unwrap();
    let end = buf.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let head = String::from_utf8_lossy(&buf[..end]).to_string();
    let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    (status, buf[end + 4..].to_vec())
}

fn stats(port: u16) -> serde_json::Value {
    let (status, body) = get(port, "/vodlab/stats", "");
    assert_eq!(status, 200);
    serde_json::from_slice(&body).unwrap()
}

/// Drops a file's clean pages from the page cache.
fn drop_cache(f: &File) {
    // SAFETY: advisory call on an open descriptor
    unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
}

#[test]
fn serve_auto_reports_its_size_and_decisions_in_stats() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let path = dir.path().join("sd.mp4");
    std::fs::write(&path, vec![5u8; 32 << 20]).unwrap();
    let f = File::open(&path).unwrap();
    f.sync_all().unwrap(); // DONTNEED drops clean pages only
    let port = free_port();
    let child = Command::new(env!("CARGO_BIN_EXE_vodlab"))
        .args(["serve", "--root"])
        .arg(dir.path())
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .args([
            "--prefetch-policy",
            // 1 s intervals, no ramp, active at any load, small steps
            "auto:interval=1,ramp=0,busy=0,step=256K,start=1M,min=256K,max=8M",
            "--default-bitrate",
            "419",
            "--stats-interval",
            "0",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let _serve = Serve(child);
    wait_until("serve listening", Duration::from_secs(20), || {
        TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    let s = stats(port);
    assert!(s["prefetch_policy"].as_str().unwrap().starts_with("auto"));
    let a = &s["prefetch_auto"];
    assert_eq!(a["current_bytes"], 1 << 20, "{a}");
    assert_eq!(a["config"]["interval"], 1.0);
    // uncached ranges, so every interval has device reads and requests
    let mut i = 0u64;
    wait_until(
        "two scored intervals and a decision",
        Duration::from_secs(60),
        || {
            drop_cache(&f);
            let off = ((i * 3) << 20) % (30 << 20);
            i += 1;
            let (status, body) = get(
                port,
                "/sd.mp4",
                &format!("Range: bytes={off}-{}\r\n", off + (256 << 10) - 1),
            );
            assert_eq!((status, body.len()), (206, 256 << 10));
            let a = &stats(port)["prefetch_auto"];
            a["scores"].as_array().unwrap().len() >= 2 && a["decisions"].as_u64().unwrap() >= 2
        },
    );
    let s = stats(port);
    let a = &s["prefetch_auto"];
    // the decisions moved p on the 256 KiB grid within [min, max]
    let cur = a["current_bytes"].as_u64().unwrap();
    let target = a["target_bytes"].as_u64().unwrap();
    assert!(
        (256 << 10..=8 << 20).contains(&cur) && target % (256 << 10) == 0,
        "{a}"
    );
    assert!(a["intervals"].as_u64().unwrap() >= 2);
    let log = a["log"].as_array().unwrap();
    let scored: Vec<_> = log.iter().filter(|r| !r["score"].is_null()).collect();
    assert!(scored.len() >= 2, "{a}");
    for r in &scored {
        let (score, mspt, miss) = (
            r["score"].as_f64().unwrap(),
            r["mspt"].as_f64().unwrap(),
            r["miss_ratio"].as_f64().unwrap(),
        );
        assert!(mspt > 0.0 && miss > 0.0);
        assert!((score - mspt * miss).abs() <= 1e-9 * score.max(1.0), "{r}");
        // the default bit rate reaches the controller (419 kbit/s)
        assert!(
            (r["bitrate_kbps"].as_f64().unwrap() - 419.0).abs() < 1e-6,
            "{r}"
        );
    }
    let by: u64 = a["by_decision"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert_eq!(by, a["intervals"].as_u64().unwrap());
}

#[test]
fn a_fixed_policy_has_no_prefetch_auto_and_a_bad_auto_key_is_refused() {
    let out = Command::new(env!("CARGO_BIN_EXE_vodlab"))
        .args([
            "serve",
            "--root",
            "/tmp",
            "--prefetch-policy",
            "auto:busy=2",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("busy: must be 0 to 1"), "{err}");
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let child = Command::new(env!("CARGO_BIN_EXE_vodlab"))
        .args(["serve", "--root"])
        .arg(dir.path())
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .args([
            "--prefetch-policy",
            "fixed:6M,ref=2095",
            "--stats-interval",
            "0",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _serve = Serve(child);
    wait_until("serve listening", Duration::from_secs(20), || {
        TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    let s = stats(port);
    assert_eq!(s["prefetch_policy"], "fixed:6M,ref=2095");
    assert!(s.get("prefetch_auto").is_none(), "{s}");
}
