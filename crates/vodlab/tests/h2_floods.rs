//! The HTTP/2 floods of scripts/h2probe (rapid reset, CONTINUATION,
//! SETTINGS, PING, WINDOW_UPDATE, small DATA, a slow reader) against an
//! in-process `vodlab serve`, over h2c and TLS: each is stopped, counted,
//! and leaves the server serving a benign curl. Its own test binary, so
//! that the process's resident memory is the server's and the floods'
//! alone.

mod common;
mod h2common;

use std::fs;
use std::time::Duration;

use common::{wait_until, Running};
use h2common::{curl, https, probe, root_with_files, stats, tls};

/// Resident memory of this process (the in-process server's), bytes.
fn rss() -> u64 {
    let s = fs::read_to_string("/proc/self/status").unwrap();
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().strip_suffix("kB"))
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap()
        * 1024
}

#[test]
fn each_flood_is_stopped_counted_and_leaves_the_server_serving() {
    let root = root_with_files();
    let file = fs::read(root.path().join("seg.m4s")).unwrap();
    let s = Running::start(root.path(), |c| {
        tls(c);
        c.send_timeout = Duration::from_secs(1);
    });
    let rss0 = rss();
    let floods = [
        ("rapid_reset", "rapid_reset"),
        ("continuation_flood", "continuation_flood"),
        ("settings_flood", "settings_flood"),
        ("ping_flood", "ping_flood"),
        ("window_update_flood", "window_update_flood"),
        ("small_data_flood", "small_data_flood"),
        ("slow_reader", "send_timeouts"),
    ];
    for (case, counter) in floods {
        let before = stats(&s)["h2"][counter].as_u64().unwrap();
        for tls_arg in [None, Some("--tls")] {
            let mut args: Vec<&str> = tls_arg.into_iter().collect();
            args.extend(["--wait", "8", case]);
            let got = probe(s.addr.port(), &args);
            assert_eq!(got.len(), 1);
            assert!(got[0].1, "{case} {tls_arg:?}: {}", got[0].3);
        }
        // counted (the connection task notes it as it ends)
        wait_until(
            &format!("{counter} counted twice"),
            Duration::from_secs(5),
            || stats(&s)["h2"][counter].as_u64().unwrap() >= before + 2,
        );
        // a benign client is served, over h2c and h2
        let (b, w) = curl(&[
            "--http2-prior-knowledge",
            "-r",
            "0-99999",
            &s.url("/seg.m4s"),
        ]);
        assert_eq!(
            (w.as_str(), &b[..]),
            ("2 206", &file[..100_000]),
            "after {case}"
        );
        let (b, w) = curl(&["--http2", "-k", &https(&s, "/seg.m4s")]);
        assert_eq!((w.as_str(), b.len()), ("2 200", file.len()), "after {case}");
    }
    // bounded memory: the floods (millions of frames) left little behind
    let grew = rss().saturating_sub(rss0);
    assert!(grew < 64 << 20, "RSS grew {grew} bytes over the floods");
    let st = stats(&s);
    assert_eq!(st["open_connections"], 1, "only the stats request: {st}");
}
