//! The HTTP/2 floods of scripts/h2probe (rapid reset, CONTINUATION,
//! SETTINGS, PING, WINDOW_UPDATE, small DATA, a slow reader) against an
//! in-process `vodlab serve`, over h2c and TLS: each is stopped, counted,
//! and leaves the server serving a benign curl. Its own test binary, so
//! that the process's resident memory is the server's and the floods'
//! alone. Also the per-address penalty: an address closed for abuse is
//! refused (at accept, or its packets dropped by the listener's SYN
//! filter, the default) while another is served.

mod common;
mod h2common;

use std::fs;
use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;

use common::{wait_until, Running};
use h2common::{curl, https, probe, python, root_with_files, script, stats, tls};

/// The tests of this binary one at a time: the first measures the
/// process's memory, the second floods.
static SERIAL: Mutex<()> = Mutex::new(());

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
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let root = root_with_files();
    let file = fs::read(root.path().join("seg.m4s")).unwrap();
    let s = Running::start(root.path(), |c| {
        tls(c);
        c.send_timeout = Duration::from_secs(1);
        // every flood and the benign curl come from 127.0.0.1: this test is
        // about each connection's limits, the address penalty is the next one's
        c.h2.abuse_ban_ms = 0;
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

#[test]
fn an_abusive_address_is_refused_at_accept_while_another_is_served() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let root = root_with_files();
    let file = fs::read(root.path().join("seg.m4s")).unwrap();
    let s = Running::start(root.path(), |c| {
        tls(c);
        // long enough that the ban cannot end during the test
        c.h2.abuse_ban_ms = 120_000;
        c.h2.abuse_max_ban_ms = 120_000;
        // this test is about the accept path; the SYN filter is the next one's
        c.h2.abuse_drop_syn = false;
    });
    let port = s.addr.port();
    // the attacker on 127.0.0.2 (loopback takes all of 127/8), over TLS
    let got = probe(
        port,
        &["--tls", "--bind", "127.0.0.2", "--wait", "8", "rapid_reset"],
    );
    assert!(got[0].1, "the flood is stopped: {}", got[0].3);
    wait_until("the ban", Duration::from_secs(5), || {
        stats(&s)["h2"]["abuse_bans"].as_u64().unwrap() >= 1
    });
    let before = stats(&s)["h2"].clone();
    assert_eq!(before["penalty_addresses"], 1, "{before}");
    // the banned address is refused at accept, even for a benign request...
    let got = probe(port, &["--bind", "127.0.0.2", "server_settings"]);
    assert!(!got[0].1, "served while banned: {}", got[0].3);
    // ...and an attacker reconnecting as fast as it can for a second is
    // refused at accept each time: no connection reaches the h2 layer
    let out = Command::new(python())
        .arg(script("h2probe.py"))
        .args(["127.0.0.1", &port.to_string(), "--bind", "127.0.0.2"])
        .args(["--loop", "1", "--threads", "2", "rapid_reset"])
        .output()
        .unwrap();
    let line: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let attempts = line["connections"].as_u64().unwrap();
    assert!(attempts >= 10, "{line}");
    let after = stats(&s)["h2"].clone();
    let refused = after["refused_banned"].as_u64().unwrap();
    assert!(
        refused > attempts,
        "every attempt refused ({refused} of {attempts} + 1): {after}"
    );
    for k in ["rapid_reset", "h2c_connections", "connections"] {
        assert_eq!(after[k], before[k], "{k}: {after}");
    }
    // other addresses are served: curl from 127.0.0.1 over h2c and h2, the
    // prober from 127.0.0.3
    let (b, w) = curl(&["--http2-prior-knowledge", &s.url("/seg.m4s")]);
    assert_eq!((w.as_str(), b.len()), ("2 200", file.len()));
    let (b, w) = curl(&["--http2", "-k", &https(&s, "/seg.m4s")]);
    assert_eq!((w.as_str(), b.len()), ("2 200", file.len()));
    let got = probe(port, &["--bind", "127.0.0.3", "server_settings"]);
    assert!(got[0].1, "{}", got[0].3);
    let st = stats(&s);
    assert_eq!(st["h2"]["abuse_bans"], 1, "{st}");
    assert_eq!(st["h2"]["refused_throttled"], 0, "{st}");
}

/// A TCP connect from `src` to the server with a deadline.
fn connect_from(src: &str, port: u16, within: Duration) -> std::io::Result<()> {
    let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)?;
    s.bind(
        &format!("{src}:0")
            .parse::<std::net::SocketAddr>()
            .unwrap()
            .into(),
    )?;
    let to: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    s.connect_timeout(&to.into(), within)
}

#[test]
fn a_banned_address_syns_are_dropped_in_the_kernel_until_the_ban_ends() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let root = root_with_files();
    let s = Running::start(root.path(), |c| {
        // a ban short enough to see it end, long enough to probe it
        c.h2.abuse_ban_ms = 3_000;
        c.h2.abuse_max_ban_ms = 3_000;
    });
    let port = s.addr.port();
    let got = probe(port, &["--bind", "127.0.0.2", "--wait", "8", "rapid_reset"]);
    assert!(got[0].1, "the flood is stopped: {}", got[0].3);
    wait_until("the filter", Duration::from_secs(2), || {
        stats(&s)["h2"]["syn_filter_addresses"] == 1
    });
    let before = stats(&s)["h2"].clone();
    assert_eq!(before["abuse_bans"], 1, "{before}");
    // the banned address's SYN gets no answer: the connect times out
    // instead of being reset, and nothing reaches the accept path
    let e = connect_from("127.0.0.2", port, Duration::from_millis(400)).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::TimedOut, "{e}");
    // another address connects and is served over h2c
    connect_from("127.0.0.3", port, Duration::from_secs(2)).unwrap();
    let (b, w) = curl(&["--http2-prior-knowledge", &s.url("/seg.m4s")]);
    assert_eq!(
        (w.as_str(), b.len() as u64),
        (
            "2 200",
            fs::metadata(root.path().join("seg.m4s")).unwrap().len()
        )
    );
    let mid = stats(&s)["h2"].clone();
    assert_eq!(mid["refused_banned"], before["refused_banned"], "{mid}");
    // the ban ends: the filter is removed and the address is served again
    wait_until("the ban's end", Duration::from_secs(6), || {
        stats(&s)["h2"]["syn_filter_addresses"] == 0
    });
    let after = stats(&s)["h2"].clone();
    assert_eq!(
        after["syn_filter_updates"], 2,
        "attached once, removed once: {after}"
    );
    // probation: 4 new connections a second, from an empty bucket (a
    // connection at once would be accepted and reset)
    std::thread::sleep(Duration::from_millis(750));
    connect_from("127.0.0.2", port, Duration::from_secs(2)).unwrap();
    let got = probe(port, &["--bind", "127.0.0.2", "server_settings"]);
    assert!(got[0].1, "served after the ban: {}", got[0].3);
}

#[test]
fn an_address_over_its_connection_rate_is_banned_and_others_are_served() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let root = root_with_files();
    let s = Running::start(root.path(), |c| {
        c.h2.abuse_conn_rate = 50;
        c.h2.abuse_ban_ms = 3_000;
        c.h2.abuse_max_ban_ms = 3_000;
    });
    let port = s.addr.port();
    // bare connections from 127.0.0.2 as fast as they go: the first
    // second's 50 pass, the next is over the rate and bans the address
    let mut opened = 0;
    let t0 = std::time::Instant::now();
    let mut last_err = None;
    while t0.elapsed() < Duration::from_secs(2) && opened < 1_000 {
        match connect_from("127.0.0.2", port, Duration::from_millis(300)) {
            Ok(()) => opened += 1,
            // the handshake completed in the kernel and the server reset
            // the connection over the rate before the connect's check of
            // SO_ERROR (a race on loopback): it was opened
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => opened += 1,
            Err(e) => {
                last_err = Some(e);
                break; // the SYN filter: no answer
            }
        }
    }
    wait_until("the ban", Duration::from_secs(2), || {
        stats(&s)["h2"]["syn_filter_addresses"] == 1
    });
    let st = stats(&s)["h2"].clone();
    assert!(st["conn_rate_exceeded"].as_u64().unwrap() >= 1, "{st}");
    assert_eq!(
        st["abuse_bans"], 1,
        "one ban, not one per excess connection: {st}"
    );
    // the kernel completes a handshake before the server accepts it, so
    // the burst's 50 and at least the one over the rate connected; the
    // filter then stopped the rest
    assert!(
        opened > 50,
        "{opened} connects before the ban (then {last_err:?})"
    );
    let e = connect_from("127.0.0.2", port, Duration::from_millis(400)).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::TimedOut, "{e}");
    // another address is served
    let got = probe(port, &["--bind", "127.0.0.3", "server_settings"]);
    assert!(got[0].1, "{}", got[0].3);
    let (b, w) = curl(&["--http2-prior-knowledge", &s.url("/seg.m4s")]);
    assert_eq!(w, "2 200", "{}", b.len());
}
