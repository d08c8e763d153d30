//! Table 4.1's accounting (`table_4_1` in `/vodlab/stats`) on a real run of
//! the server: a cold file, a session whose prefetch is dropped from the
//! page cache before it asks for the next range (an eviction), and a second
//! session served from the first one's prefetch (a cache hit).

mod common;

use std::fs;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::io::AsRawFd;
use std::path::Path;
use std::time::Duration;

use common::{wait_until, Running};
use vodlab_server::{IoMode, PolicySpec};

const K: u64 = 1024;
const M: u64 = 1 << 20;

fn cool(path: &Path) {
    let f = fs::File::open(path).unwrap();
    f.sync_all().unwrap(); // DONTNEED drops clean pages only
                           // SAFETY: advisory call on an open descriptor
    unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
}

/// One range on a keep-alive connection; returns the body's length.
fn range(s: &mut TcpStream, from: u64, to: u64) -> u64 {
    write!(
        s,
        "GET /f.mp4 HTTP/1.1\r\nHost: t\r\nRange: bytes={from}-{to}\r\n\r\n"
    )
    .unwrap();
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        s.read_exact(&mut b).unwrap();
        head.push(b[0]);
    }
    let head = String::from_utf8(head).unwrap().to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 206"), "{head}");
    let len: u64 = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let mut body = vec![0u8; len as usize];
    s.read_exact(&mut body).unwrap();
    len
}

#[test]
fn table_4_1_counts_device_evicted_wasted_and_cached_bytes() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let path = dir.path().join("f.mp4");
    fs::write(&path, vec![7u8; (8 * M) as usize]).unwrap();
    cool(&path);
    let srv = Running::start(dir.path(), |c| {
        c.io = IoMode::Asap;
        c.prefetch_policy = PolicySpec::Fixed(2 * M);
    });
    let stats = || srv.server().state.stats();
    assert!(stats().table_4_1.is_none(), "nothing requested yet");

    // session 1: [0, 256K) misses and prefetches [0, 2M); the response ends
    // after its prefetch is read, so then the cache is dropped and
    // [256K, 512K) misses inside the session's own prefetch: evicted
    let mut s = TcpStream::connect(srv.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    assert_eq!(range(&mut s, 0, 256 * K - 1), 256 * K);
    cool(&path);
    assert_eq!(range(&mut s, 256 * K, 512 * K - 1), 256 * K);
    let t = stats().table_4_1.unwrap();
    assert_eq!(t.requested_bytes, 512 * K);
    assert_eq!(t.device_bytes, 4 * M, "two 2 MiB prefetches");
    assert_eq!(t.evicted_bytes, 256 * K);
    assert_eq!(t.wasted_bytes, 0, "counted when the session ends");
    assert_eq!(t.evicted_ratio, 0.5);
    assert_eq!(t.device_ratio, 8.0);
    drop(s);
    // session over: [0, 2M) had 512K requested, [256K, 2.25M) 256K
    let wasted = (2 * M - 512 * K) + (2 * M - 256 * K);
    wait_until(
        "the session's wasted bytes",
        Duration::from_secs(20),
        || stats().table_4_1.unwrap().wasted_bytes == wasted,
    );
    let t = stats().table_4_1.unwrap();
    // requested - (device - evicted - wasted): every requested byte came
    // from the disk for its own request
    assert_eq!(t.cached_bytes, 0);
    assert_eq!(t.probed_hit_bytes, 0);

    // session 2: [512K, 768K) is resident from session 1's second prefetch
    let mut s = TcpStream::connect(srv.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    assert_eq!(range(&mut s, 512 * K, 768 * K - 1), 256 * K);
    let t = stats().table_4_1.unwrap();
    assert_eq!(t.requested_bytes, 768 * K);
    assert_eq!(t.device_bytes, 4 * M, "a hit reads nothing");
    assert_eq!(t.probed_hit_bytes, 256 * K);
    assert_eq!(t.cached_bytes, 256 * K as i64);
    assert!((t.cached_ratio - 1.0 / 3.0).abs() < 1e-12, "{t:?}");
    assert!((t.wasted_ratio - wasted as f64 / (768 * K) as f64).abs() < 1e-12);
    // the JSON carries it
    let json = serde_json::to_value(stats()).unwrap();
    assert_eq!(json["table_4_1"]["evicted_bytes"], 256 * K);
}

#[test]
fn vanilla_mode_has_no_table_4_1() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    fs::write(dir.path().join("f.mp4"), vec![7u8; (M) as usize]).unwrap();
    let srv = Running::start(dir.path(), |c| c.io = IoMode::Vanilla);
    let mut s = TcpStream::connect(srv.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    assert_eq!(range(&mut s, 0, 1023), 1024);
    let s = srv.server().state.stats();
    assert!(
        s.table_4_1.is_none(),
        "sendfile's disk reads are not counted"
    );
    assert!(serde_json::to_value(&s).unwrap().get("table_4_1").is_none());
}
