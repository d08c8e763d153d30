//! `vodlab serve --pace` on loopback with real sockets: the delivery curve
//! a client sees against r·t, bursts, kernel pacing, the bit-rate sources,
//! and a stalled client next to a paced one. Each test lasts at most about
//! 3 s: the paper's 1 MB at 400 kbit/s (20 s) is scaled up in rate, not
//! down in size (2 MB at 8 Mbit/s = 1 MB/s lasts 2 s).
//!
//! Tolerance of the curve: one chunk (the chunk rule's r × 2.5 ms = 2.5 KB at
//! 1 MB/s) plus 30 ms of scheduling (30 KB at 1 MB/s): the server's timer,
//! the driver task and this client's reads run on a shared 2-core machine.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use common::Running;
use vodlab_server::PaceMode;

/// 8 Mbit/s in bytes per second.
const RATE: f64 = 1_000_000.0;
const SIZE: usize = 2_000_000;
/// One chunk of the chunk rule at RATE (r × 2.5 ms) plus 30 ms of scheduling.
const SLACK: f64 = 2_500.0 + RATE * 0.030;

/// The tests measure delivery against the clock within ±30 ms: they run one
/// at a time, so another test's server and client do not take the cores
/// (seven at once on two cores put one 40 ms behind in a CI run).
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn root() -> tempfile::TempDir {
    let d = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let body: Vec<u8> = (0..SIZE).map(|i| (i % 251) as u8).collect();
    std::fs::write(d.path().join("v.mp4"), &body).unwrap();
    std::fs::write(d.path().join("half.mp4"), &body[..SIZE / 2]).unwrap();
    std::fs::create_dir(d.path().join("t1")).unwrap();
    std::fs::write(d.path().join("t1").join("a.m4s"), &body[..SIZE / 2]).unwrap();
    std::fs::write(d.path().join("big.bin"), vec![1u8; 16 << 20]).unwrap();
    d
}

/// A response as the client saw it: (time since the request was sent,
/// body bytes received by then) after every read, and the body length.
struct Curve {
    samples: Vec<(f64, usize)>,
    body: usize,
}

impl Curve {
    fn end(&self) -> f64 {
        self.samples.last().map_or(0.0, |s| s.0)
    }

    /// Time the body had `n` bytes.
    fn time_of(&self, n: usize) -> f64 {
        self.samples.iter().find(|s| s.1 >= n).expect("reached").0
    }
}

/// GETs `path` with extra header lines and records the body's arrival.
fn get(addr: SocketAddr, path: &str, extra: &str) -> Curve {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n{extra}\r\n"
    )
    .unwrap();
    let t0 = Instant::now();
    let mut buf = vec![0u8; 64 << 10];
    let mut head = Vec::new();
    let mut body = 0usize;
    let mut samples = Vec::new();
    let mut in_body = false;
    loop {
        let n = s.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        let t = t0.elapsed().as_secs_f64();
        if in_body {
            body += n;
        } else {
            head.extend_from_slice(&buf[..n]);
            if let Some(i) = head.windows(4).position(|w| w == b"\r\n\r\n") {
                body += head.len() - i - 4;
                head.truncate(i);
                in_body = true;
            }
        }
        samples.push((t, body));
    }
    let head = String::from_utf8_lossy(&head).to_string();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    Curve { samples, body }
}

fn stats(addr: SocketAddr) -> serde_json::Value {
    let mut s = TcpStream::connect(addr).unwrap();
    write!(
        s,
        "GET /vodlab/stats HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    serde_json::from_str(text.split_once("\r\n\r\n").unwrap().1).unwrap()
}

fn paced(mode: PaceMode, burst: f64) -> impl FnOnce(&mut vodlab_server::Config) {
    move |c| {
        c.pace = 1.0;
        c.pace_mode = mode;
        c.pace_burst = burst;
        c.default_bitrate_kbps = Some(RATE * 8.0 / 1000.0);
    }
}

/// Asserts the curve stays within SLACK of `start + r·t` after time `from`.
fn assert_tracks(c: &Curve, start: f64, from: f64) {
    for &(t, n) in c.samples.iter().filter(|s| s.0 >= from) {
        let want = (start + RATE * t).min(c.body as f64);
        assert!(
            (n as f64 - want).abs() <= SLACK,
            "at {t:.3} s: {n} bytes received, r·t says {want:.0} (± {SLACK})"
        );
    }
}

#[test]
fn user_pacing_follows_r_t_without_burst() {
    let _serial = serial();
    let d = root();
    let s = Running::start(d.path(), paced(PaceMode::User, 0.0));
    let c = get(s.addr, "/v.mp4", "");
    assert_eq!(c.body, SIZE);
    // the grid releases its last chunk at (size − c)/r: just under 2 s
    let end = c.end();
    assert!((1.9..2.1).contains(&end), "ended at {end:.3} s, want ≈ 2 s");
    assert_tracks(&c, 0.0, 0.0);
    let st = stats(s.addr);
    assert_eq!(st["pacing"]["paced_responses"], 1);
    assert_eq!(st["pacing"]["burst_bytes"], 0);
    // one grant per 2.5 KB slot (800), fewer when a late wake-up sends
    // the slots fired since the last one together
    let grants = st["pacing"]["grants"].as_u64().unwrap();
    assert!((300..=801).contains(&grants), "{grants} grants");
    assert!(st["pacing"]["max_grant_lateness_us"].as_u64().is_some());
}

#[test]
fn user_pacing_bursts_the_first_seconds_then_paces() {
    let _serial = serial();
    let d = root();
    let s = Running::start(d.path(), paced(PaceMode::User, 0.5));
    let c = get(s.addr, "/v.mp4", "");
    assert_eq!(c.body, SIZE);
    let burst = (0.5 * RATE) as usize;
    let at = c.time_of(burst);
    assert!(at <= 0.1, "the 0.5 s burst ({burst} B) took {at:.3} s");
    // then r·t on top of the burst; the end at (size − B·r)/r = 1.5 s
    assert_tracks(&c, burst as f64, 0.1);
    let end = c.end();
    assert!(
        (1.4..1.6).contains(&end),
        "ended at {end:.3} s, want ≈ 1.5 s"
    );
    let st = stats(s.addr);
    let b = st["pacing"]["burst_bytes"].as_u64().unwrap();
    assert!(
        b as usize >= burst - 70_000 && b as usize <= burst,
        "{b} burst bytes"
    );
}

/// Kernel pacing paces at r, but Linux sends a connection's first 10 data
/// segments unpaced (`tcp_update_skb_after_send` in net/ipv4/tcp_output.c
/// paces only once `data_segs_out >= 10`), and a loopback segment is up to
/// 64 KiB: up to 640 KiB leave at once, so 2 MB at 1 MB/s ends after about
/// 1.4–1.7 s, not 2 s (on Ethernet, 10 × 1448 B is 1.4 % of this file). So
/// the end is judged against that bound, and the rate by the slope after
/// the first 800 KB.
#[test]
fn kernel_pacing_paces_at_r_after_the_unpaced_initial_window() {
    let _serial = serial();
    let d = root();
    let s = Running::start(d.path(), paced(PaceMode::Kernel, 0.0));
    let c = get(s.addr, "/v.mp4", "");
    assert_eq!(c.body, SIZE);
    let end = c.end();
    let unpaced = 10.0 * 65_536.0;
    assert!(
        end >= (SIZE as f64 - unpaced) / RATE - 0.05 && end <= SIZE as f64 / RATE * 1.1,
        "kernel pacing ended at {end:.3} s, want between {:.2} and 2.2 s",
        (SIZE as f64 - unpaced) / RATE - 0.05
    );
    let from = 800_000;
    let slope = (SIZE - from) as f64 / (end - c.time_of(from));
    assert!(
        (0.9 * RATE..1.1 * RATE).contains(&slope),
        "paced at {slope:.0} B/s after the first {from} B, want {RATE} ± 10 %"
    );
    assert_eq!(stats(s.addr)["pacing"]["paced_responses"], 1);
}

#[test]
fn cmcd_bit_rate_overrides_the_default() {
    let _serial = serial();
    let d = root();
    let s = Running::start(d.path(), paced(PaceMode::User, 0.0));
    // 1 MB at the CMCD's 16 Mbit/s (2 MB/s): 0.5 s; the default would be 1 s
    let c = get(s.addr, "/half.mp4", "CMCD-Object: br=16000,ot=v\r\n");
    let end = c.end();
    assert!(
        (0.4..0.6).contains(&end),
        "ended at {end:.3} s, want ≈ 0.5 s"
    );
    // the same through the query parameter
    let c = get(s.addr, "/half.mp4?CMCD=br%3D16000", "");
    let end = c.end();
    assert!(
        (0.4..0.6).contains(&end),
        "ended at {end:.3} s, want ≈ 0.5 s"
    );
    // and the default when there is none
    let c = get(s.addr, "/half.mp4", "");
    let end = c.end();
    assert!((0.9..1.1).contains(&end), "ended at {end:.3} s, want ≈ 1 s");
}

#[test]
fn a_catalog_rates_a_prefix_and_unrated_responses_go_unpaced() {
    let _serial = serial();
    let d = root();
    let cat = d.path().join("rates.toml");
    // 16 Mbit/s under /t1/: 1 MB in 0.5 s
    std::fs::write(&cat, "[bitrates]\n\"/t1/\" = 16000\n").unwrap();
    let s = Running::start(d.path(), |c| {
        c.pace = 1.0;
        c.pace_burst = 0.0;
        c.bitrates = Some(cat.clone());
    });
    let c = get(s.addr, "/t1/a.m4s", "");
    let end = c.end();
    assert!(
        (0.4..0.6).contains(&end),
        "ended at {end:.3} s, want ≈ 0.5 s"
    );
    // no CMCD, no catalog entry, no default: unpaced, and counted
    let c = get(s.addr, "/v.mp4", "");
    assert_eq!(c.body, SIZE);
    assert!(c.end() < 0.5, "unrated response took {:.3} s", c.end());
    let st = stats(s.addr);
    assert_eq!(st["pacing"]["paced_responses"], 1);
    assert_eq!(st["pacing"]["unpaced_no_rate"], 1);
}

#[test]
fn without_pace_nothing_is_paced() {
    let _serial = serial();
    let d = root();
    let s = Running::start(d.path(), |c| c.default_bitrate_kbps = Some(8000.0));
    let c = get(s.addr, "/v.mp4", "CMCD-Object: br=800\r\n");
    assert_eq!(c.body, SIZE);
    assert!(c.end() < 0.5, "unpaced response took {:.3} s", c.end());
    let st = stats(s.addr);
    assert_eq!(st["pacing"]["paced_responses"], 0);
    assert_eq!(st["pacing"]["unpaced_no_rate"], 0);
}

#[test]
fn a_client_that_stops_reading_does_not_delay_another() {
    let _serial = serial();
    let d = root();
    let s = Running::start(d.path(), paced(PaceMode::User, 0.0));
    // a 16 MiB response whose client never reads: its socket fills, its
    // writes are refused, and it stays in the pacer for the whole test
    let mut stalled = TcpStream::connect(s.addr).unwrap();
    write!(stalled, "GET /big.bin HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
    // until the stalled response is in the pacer (no guessed sleep)
    common::wait_until(
        "the stalled response in the pacer",
        Duration::from_secs(5),
        || s.server().state.stats().pacing.active_sessions >= 1,
    );
    let c = get(s.addr, "/v.mp4", "");
    assert_eq!(c.body, SIZE);
    let end = c.end();
    assert!((1.9..2.1).contains(&end), "ended at {end:.3} s, want ≈ 2 s");
    assert_tracks(&c, 0.0, 0.0);
    let st = stats(s.addr);
    assert_eq!(st["pacing"]["active_sessions"], 1, "the stalled one");
    drop(stalled);
}

#[test]
fn sammy_paces_at_a_multiple_of_the_top_bit_rate_falling_with_the_buffer() {
    let _serial = serial();
    let d = root();
    let s = Running::start(d.path(), |c| {
        paced(PaceMode::User, 0.0)(c);
        c.pace = 0.0; // the policy paces on its own
        c.pace_policy = vodlab_server::pacer::PacePolicy::Sammy(Default::default());
    });
    // 1 MB; the ladder's top (tb) 8 Mbit/s = 1 MB/s. Sammy's default rule:
    // 3x the top with an empty buffer (3 MB/s: 0.33 s), 1.5x at 12 s of
    // buffer and above (1.5 MB/s: 0.67 s), 2.25x half-way (0.44 s)
    for (object, bl, want) in [
        ("br=8000,tb=8000", 0, 1.0 / 3.0),
        ("br=8000,tb=8000", 12000, 2.0 / 3.0),
        ("br=8000,tb=8000", 6000, 1.0 / 2.25),
        // a lower rung is paced by the top rate, not its own
        ("br=2000,tb=8000", 30000, 2.0 / 3.0),
    ] {
        let extra = format!("CMCD-Object: {object}\r\nCMCD-Request: bl={bl}\r\n");
        let end = get(s.addr, "/half.mp4", &extra).end();
        assert!(
            (end - want).abs() < 0.1,
            "{object},bl={bl}: ended at {end:.3} s, want {want:.3} s"
        );
    }
    let st = stats(s.addr);
    assert_eq!(st["pacing"]["policy"], "sammy:3,1.5,12", "{st}");
    assert_eq!(st["pacing"]["paced_responses"], 4, "{st}");
}

#[test]
fn the_cmcd_policy_paces_at_the_requested_throughput() {
    let _serial = serial();
    let d = root();
    let s = Running::start(d.path(), |c| {
        paced(PaceMode::User, 0.0)(c);
        c.pace_policy = vodlab_server::pacer::PacePolicy::Cmcd;
    });
    // rtp 16 Mbit/s = 2 MB/s: 1 MB in 0.5 s; without rtp, K = 1 x the
    // default 1 MB/s: 1 s
    let c = get(s.addr, "/half.mp4", "CMCD-Request: rtp=16000\r\n");
    assert!(
        (c.end() - 0.5).abs() < 0.1,
        "rtp: ended at {:.3} s",
        c.end()
    );
    let c = get(s.addr, "/half.mp4", "");
    assert!(
        (c.end() - 1.0).abs() < 0.1,
        "no rtp: ended at {:.3} s",
        c.end()
    );
}
