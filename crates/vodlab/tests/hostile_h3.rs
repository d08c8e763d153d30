//! `vodlab serve --h3` under hostile QUIC clients (issue 29): a flood of
//! Initial packets from many ports, a stream flood, streams that never
//! send their head, clients that never read, and 10,000 idle connections.
//! The server is a child process, so its resident memory (`VmRSS` of
//! /proc/PID/status) is its own; the attackers are quinn clients in this
//! process; aioquic (scripts/h3probe/h3get.py) is the well-behaved client
//! that must be served during or right after each attack. Everything on
//! loopback, every loop bounded in count and time; the tests run one at a
//! time (their timings and memory are not shared with each other).

mod common;
mod h3common;

use std::collections::HashMap;
use std::net::{SocketAddr, UdpSocket};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Buf;
use common::{raise_nofile, wait_until};
use h3common::{
    client_config, h3get, h3get_output, serve_h3, stats, udp_queue, Mib, MuteSocket, RssWatch,
};

/// One test at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// A test directory with the server's root in `root/`: `small.bin`
/// (1,000 bytes), `seg.bin` (1 MB) and `big.bin` (32 MiB),
/// position-dependent bytes (the certificate goes beside it).
fn test_dir() -> (tempfile::TempDir, std::path::PathBuf) {
    let t = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let root = t.path().join("root");
    std::fs::create_dir(&root).unwrap();
    let data: Vec<u8> = (0..32u32 << 20)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    std::fs::write(root.join("small.bin"), &data[..1000]).unwrap();
    std::fs::write(root.join("seg.bin"), &data[..1_000_000]).unwrap();
    std::fs::write(root.join("big.bin"), &data).unwrap();
    (t, root)
}

/// The attackers' runtime.
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// A statistics counter of the `h3` object.
fn h3n(st: &serde_json::Value, k: &str) -> u64 {
    st["h3"][k]
        .as_u64()
        .unwrap_or_else(|| panic!("h3.{k}: {st}"))
}

/// The well-behaved client: aioquic fetches /seg.bin whole on its own
/// connection, byte for byte; the seconds it took.
fn served(port: u16, ca: &Path, dir: &Path) -> f64 {
    let got = dir.join("seg.got");
    let j = h3get(port, "/seg.bin", &got, ca, &["--timeout", "20"]);
    assert_eq!(j["status"], 200, "{j}");
    assert_eq!(
        std::fs::read(&got).unwrap(),
        std::fs::read(dir.join("root/seg.bin")).unwrap(),
        "the file's bytes"
    );
    j["elapsed_s"].as_f64().unwrap()
}

// ---------------------------------------------------------------------
// Initial floods
// ---------------------------------------------------------------------

/// The first datagram of `n` QUIC connections quinn's client starts (a
/// real ClientHello in a padded Initial, each with its own destination
/// connection ID): the client connects `n` times to a UDP socket that
/// never answers, and the first datagram of each connection ID is kept.
fn captured_initials(rt: &tokio::runtime::Runtime, ca: &Path, n: usize) -> Vec<Vec<u8>> {
    let sink = UdpSocket::bind("127.0.0.1:0").unwrap();
    sink.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    let to = sink.local_addr().unwrap();
    let _rt = rt.enter();
    let mut ep = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
    ep.set_default_client_config(client_config(ca, |_| {}));
    let mut got: HashMap<Vec<u8>, Vec<u8>> = HashMap::new();
    let mut pending = Vec::new();
    let mut b = vec![0u8; 2048];
    let t0 = Instant::now();
    while got.len() < n {
        assert!(t0.elapsed() < Duration::from_secs(60), "capturing Initials");
        if pending.len() < n {
            pending.push(ep.connect(to, "localhost").unwrap());
        }
        while let Ok((k, _)) = sink.recv_from(&mut b) {
            let d = &b[..k];
            // a long header (0x80), type Initial (0x00 in bits 4-5)
            assert_eq!(d[0] & 0xb0, 0x80, "an Initial packet");
            let cid = d[6..6 + d[5] as usize].to_vec();
            got.entry(cid).or_insert_with(|| d.to_vec());
            if got.len() >= pending.len() {
                break;
            }
        }
    }
    ep.close(0u32.into(), b"");
    let v: Vec<Vec<u8>> = got.into_values().collect();
    assert!(
        v.iter().all(|d| d.len() >= 1200),
        "Initials are padded to 1200 bytes"
    );
    v
}

/// What one flood did: the sockets it sent from (one per Initial), when it
/// began, and how long it took.
struct Flood {
    sockets: Vec<UdpSocket>,
    sent_bytes: Vec<usize>,
    took: Duration,
}

impl Flood {
    /// Sends each Initial from a socket of its own (a port of its own) to
    /// `server`, 32 at a time, each batch once the server's socket queue
    /// is empty (so the kernel drops none), and keeps going while
    /// `until()` says so after all were sent (without more Initials: the
    /// flood's state is the server's then).
    fn send(initials: &[Vec<u8>], server: SocketAddr, during: impl FnOnce()) -> Self {
        let t0 = Instant::now();
        let mut sockets = Vec::with_capacity(initials.len());
        let mut sent_bytes = Vec::with_capacity(initials.len());
        let mut during = Some(during);
        for (i, d) in initials.iter().enumerate() {
            let s = UdpSocket::bind("127.0.0.1:0").unwrap();
            s.set_nonblocking(true).unwrap();
            assert_eq!(s.send_to(d, server).unwrap(), d.len());
            sockets.push(s);
            sent_bytes.push(d.len());
            if i % 32 == 31 {
                wait_until(
                    "the server's UDP queue read",
                    Duration::from_secs(10),
                    || udp_queue(server.port()).0 == 0,
                );
            }
            if i == initials.len() / 2 {
                // the well-behaved client, half-way through the flood
                (during.take().unwrap())();
            }
        }
        Self {
            sockets,
            sent_bytes,
            took: t0.elapsed(),
        }
    }

    /// The datagrams' sizes each socket received from the server so far
    /// (read now).
    fn received(&self) -> Vec<Vec<usize>> {
        let mut b = vec![0u8; 65536];
        self.sockets
            .iter()
            .map(|s| {
                let mut v = Vec::new();
                while let Ok(k) = s.recv(&mut b) {
                    v.push(k);
                }
                v
            })
            .collect()
    }
}

/// Without address validation (`--h3-retry-above` out of reach), a flood
/// of Initials from 2,000 ports, each a real ClientHello that is never
/// followed up, costs the server one pending handshake each up to
/// `--h3-max-connections` (500): the rest are refused (counted), and no
/// address is sent more than three times what it sent and one datagram
/// (RFC 9000 §8.1's anti-amplification limit, as quinn applies it). While the cap is full a real client is
/// refused too; once the handshake timeout has dropped the flood's state
/// it is served. Memory: the pending handshakes' cost, bounded.
#[test]
fn an_initial_flood_without_retry_fills_the_cap_and_no_more() {
    let _s = serial();
    raise_nofile();
    let (t, root) = test_dir();
    let (serve, port, ca) = serve_h3(
        t.path(),
        &root,
        &[
            "--h3-max-connections",
            "500",
            "--h3-retry-above",
            "1000000",
            "--header-timeout",
            "8",
        ],
    );
    let rt = runtime();
    let initials = captured_initials(&rt, &ca, 2000);
    served(port, &ca, t.path());
    let base = serve.rss_kib();
    let (_, drops0) = udp_queue(port);
    let watch = RssWatch::start(serve.0.id());
    let server: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let refused_client = Arc::new(Mutex::new(None));
    let rc = refused_client.clone();
    let (tc, cac) = (t.path().to_path_buf(), ca.clone());
    let flood = Flood::send(&initials, server, move || {
        // half-way, the cap is full: a real client is refused
        let o = h3get_output(port, "/seg.bin", &tc.join("x"), &cac, &[]);
        *rc.lock().unwrap() = Some(o);
    });
    let full = stats(port, &ca);
    let peak = watch.peak_kib();
    eprintln!(
        "flood of {} Initials in {:?}: open {}, handshaking {}, refused {}; RSS {} -> peak {} ({:.1} KiB per pending handshake)",
        initials.len(),
        flood.took,
        h3n(&full, "open_connections"),
        h3n(&full, "handshaking"),
        h3n(&full, "refused"),
        Mib(base),
        Mib(peak),
        peak.saturating_sub(base) as f64 / 500.0
    );
    assert!(
        flood.took < Duration::from_secs(7),
        "the flood is sent within the handshake timeout (8 s): {:?}",
        flood.took
    );
    assert_eq!(udp_queue(port).1, drops0, "the kernel dropped none");
    // the cap is full of the flood's handshakes, the rest refused
    assert_eq!(h3n(&full, "open_connections"), 500, "{full}");
    assert_eq!(h3n(&full, "handshaking"), 500, "{full}");
    assert_eq!(
        h3n(&full, "refused") + 500,
        initials.len() as u64 + 1,
        "every other Initial refused (and the real client): {full}"
    );
    assert_eq!(h3n(&full, "connections"), 1, "only the warm-up's: {full}");
    let o = refused_client.lock().unwrap().take().unwrap();
    assert!(
        !o.status.success(),
        "at the cap the real client is refused: {}",
        String::from_utf8_lossy(&o.stdout)
    );
    // the anti-amplification limit: RFC 9000 §8.1 allows three times the
    // bytes received; quinn checks it before each datagram (is there room
    // for one more byte?) and then sends the whole datagram, so an
    // address can get up to one datagram (1,200 bytes) more: here the
    // first flight (1,200 + 138) and two padded probes, 3,738 bytes for
    // 1,200 (3.1x)
    let datagrams = flood.received();
    eprintln!("datagrams to the first port: {:?}", datagrams[0]);
    let got: Vec<usize> = datagrams.iter().map(|d| d.iter().sum()).collect();
    for (i, (g, s)) in got.iter().zip(&flood.sent_bytes).enumerate() {
        assert!(
            g <= &(3 * s + 1200),
            "port {i}: {g} bytes sent back for {s}: {:?}",
            datagrams[i]
        );
    }
    let worst = got
        .iter()
        .zip(&flood.sent_bytes)
        .map(|(g, s)| *g as f64 / *s as f64)
        .fold(0.0, f64::max);
    let answered = got.iter().filter(|&&g| g > 0).count();
    assert_eq!(answered, initials.len(), "each got an answer (or refusal)");
    eprintln!(
        "bytes sent back: {} for {} received; at most {worst:.2}x to one address",
        got.iter().sum::<usize>(),
        flood.sent_bytes.iter().sum::<usize>()
    );
    assert!(
        peak - base < 64 << 10,
        "500 pending handshakes: RSS {} -> {}",
        Mib(base),
        Mib(peak)
    );
    // the handshake timeout drops them all; then the real client gets in
    wait_until(
        "the flood's handshakes timed out",
        Duration::from_secs(15),
        || h3n(&stats(port, &ca), "open_connections") == 0,
    );
    let took = served(port, &ca, t.path());
    let st = stats(port, &ca);
    eprintln!("after the flood: served in {took:.3} s; {}", st["h3"]);
    assert_eq!(h3n(&st, "handshake_failures"), 500, "{st}");
    assert_eq!(h3n(&st, "connections"), 2, "{st}");
    assert_eq!(h3n(&st, "handshaking"), 0, "{st}");
    assert_eq!(h3n(&st, "retries"), 0, "{st}");
    drop(serve);
}

/// The load-dependent Retry (the default, `--h3-retry-above 100`) and
/// `--h3-retry`: a flood of 2,000 Initials from as many ports keeps at
/// most 100 handshakes' state (with `--h3-retry`, none: `h3.retries`
/// moves, `connections` and `handshaking` do not), each port gets one
/// Retry packet (fewer bytes than it sent), memory stays flat, and a real
/// client in the middle of the flood is validated and served.
#[test]
fn under_an_initial_flood_retry_keeps_no_state_and_real_clients_get_in() {
    let _s = serial();
    raise_nofile();
    let (t, root) = test_dir();
    for (what, flags) in [
        ("default (retry above 100 handshakes)", &[][..]),
        ("--h3-retry", &["--h3-retry"][..]),
    ] {
        let mut args = vec!["--h3-max-connections", "500", "--header-timeout", "8"];
        args.extend_from_slice(flags);
        let (serve, port, ca) = serve_h3(t.path(), &root, &args);
        let rt = runtime();
        let initials = captured_initials(&rt, &ca, 2000);
        served(port, &ca, t.path());
        // the warm-up's own Retry (with --h3-retry) is not the flood's
        let retries0 = h3n(&stats(port, &ca), "retries");
        let base = serve.rss_kib();
        let (_, drops0) = udp_queue(port);
        let watch = RssWatch::start(serve.0.id());
        let server: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let during = Arc::new(Mutex::new((0.0, serde_json::Value::Null)));
        let d = during.clone();
        let (tc, cac) = (t.path().to_path_buf(), ca.clone());
        let flood = Flood::send(&initials, server, move || {
            let took = served(port, &cac, &tc);
            *d.lock().unwrap() = (took, stats(port, &cac));
        });
        let st = stats(port, &ca);
        let peak = watch.peak_kib();
        let (took, mid) = during.lock().unwrap().clone();
        eprintln!(
            "{what}: {} Initials in {:?}; real client served mid-flood in {took:.3} s; {}; RSS {} -> peak {}",
            initials.len(),
            flood.took,
            st["h3"],
            Mib(base),
            Mib(peak)
        );
        assert_eq!(udp_queue(port).1, drops0, "the kernel dropped none");
        let n = initials.len() as u64;
        let retries = h3n(&st, "retries") - retries0;
        assert!(
            h3n(&mid, "retries") > retries0 && h3n(&mid, "retries") - retries0 < n,
            "the real client came in the middle of the flood: {mid}"
        );
        let kept = if flags.is_empty() { 100 } else { 0 };
        // the flood's Initials: each a Retry or one of at most `kept`
        // pending handshakes (+ the real client's Retry, and its
        // validated connection); none refused
        assert_eq!(h3n(&st, "refused"), 0, "{st}");
        assert_eq!(h3n(&st, "connections"), 2, "warm-up and real: {st}");
        assert!(h3n(&st, "handshaking") <= kept, "{st}");
        assert_eq!(
            retries + h3n(&st, "handshaking") + h3n(&st, "handshake_failures"),
            n + 1,
            "every Initial a Retry or a pending handshake: {st}"
        );
        assert!(retries >= n - kept, "{st}");
        let got: Vec<usize> = flood.received().iter().map(|d| d.iter().sum()).collect();
        // the anti-amplification limit as quinn applies it (see the test
        // above: up to one datagram past 3x; CI once saw 3,738 for 1,200)
        for (g, s) in got.iter().zip(&flood.sent_bytes) {
            assert!(g <= &(3 * s + 1200), "{g} bytes sent back for {s}");
        }
        // a Retry is one small packet (a token, no handshake)
        let retried = got.iter().filter(|&&g| g > 0 && g < 300).count();
        assert!(
            retried as u64 >= n - kept,
            "{retried} ports got a Retry alone"
        );
        assert!(
            peak - base < 16 << 10,
            "{what}: RSS {} -> {}",
            Mib(base),
            Mib(peak)
        );
        drop(serve);
    }
}

// ---------------------------------------------------------------------
// Stream floods
// ---------------------------------------------------------------------

/// A quinn connection to the server with HTTP/3 on it (its driver
/// spawned): the QUIC connection and the request sender.
async fn h3_client(
    ep: &quinn::Endpoint,
    port: u16,
) -> (
    quinn::Connection,
    h3::client::SendRequest<h3_quinn::OpenStreams, bytes::Bytes>,
) {
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let quic = ep.connect(addr, "localhost").unwrap().await.unwrap();
    let (mut driver, send) = h3::client::new(h3_quinn::Connection::new(quic.clone()))
        .await
        .unwrap();
    tokio::spawn(async move { std::future::poll_fn(|cx| driver.poll_close(cx)).await });
    (quic, send)
}

/// A request stream of the h3 client.
type ClientStream = h3::client::RequestStream<h3_quinn::BidiStream<bytes::Bytes>, bytes::Bytes>;

/// GET `path` on a new stream: the stream once its head was sent (and,
/// when `finish`, its end).
async fn get(
    send: &mut h3::client::SendRequest<h3_quinn::OpenStreams, bytes::Bytes>,
    port: u16,
    path: &str,
    finish: bool,
) -> Result<ClientStream, String> {
    let req = http::Request::get(format!("https://localhost:{port}{path}"))
        .body(())
        .unwrap();
    let mut s = send
        .send_request(req)
        .await
        .map_err(|e| format!("sending the head: {e}"))?;
    if finish {
        match s.finish().await {
            // the server answered before the FIN went out and stopped the
            // request side with H3_NO_ERROR: the answer is still read
            Err(h3::error::StreamError::RemoteTerminate { code, .. })
                if code == h3::error::Code::H3_NO_ERROR => {}
            Err(e) => return Err(format!("ending the request: {e}")),
            Ok(()) => {}
        }
    }
    Ok(s)
}

/// The status and body length of a response read to its end.
async fn read_all(s: &mut ClientStream) -> Result<(u16, usize), String> {
    let resp = s
        .recv_response()
        .await
        .map_err(|e| format!("the response head: {e}"))?;
    let mut n = 0;
    while let Some(b) = s
        .recv_data()
        .await
        .map_err(|e| format!("the body after {n} bytes: {e}"))?
    {
        n += b.remaining();
    }
    Ok((resp.status().as_u16(), n))
}

/// One connection opens request streams as fast as it can, 64 waiting at
/// a time against a stream credit of 8, every other one reset by the
/// client right after its head (the HTTP/2 "rapid reset" over QUIC),
/// until a real client on another connection has been served (at least
/// 2,000 streams). The server never has more than 8 streams of the
/// connection open (`h3.open_streams`, sampled), answers every stream that
/// waits for its answer byte for byte, accounts for every stream
/// (`streams` = `requests` + `stream_errors`), and its memory stays flat.
#[test]
fn a_stream_flood_is_held_to_the_stream_credit() {
    let _s = serial();
    let (t, root) = test_dir();
    let (serve, port, ca) = serve_h3(t.path(), &root, &["--h3-max-concurrent-streams", "8"]);
    served(port, &ca, t.path());
    let base = serve.rss_kib();
    let watch = RssWatch::start(serve.0.id());
    let done = Arc::new(AtomicBool::new(false));
    // the real client and a sampler of the server's open streams
    let (d, cac, tc) = (done.clone(), ca.clone(), t.path().to_path_buf());
    let benign = std::thread::spawn(move || {
        // once the flood runs
        wait_until("the flood's first streams", Duration::from_secs(30), || {
            h3n(&stats(port, &cac), "streams") >= 100
        });
        let took = served(port, &cac, &tc);
        let mut most = 0;
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(1) {
            most = most.max(h3n(&stats(port, &cac), "open_streams"));
        }
        d.store(true, Ordering::Relaxed);
        (took, most)
    });
    let rt = runtime();
    let (launched, answered, reset, took) = rt.block_on(async {
        let mut ep = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
        ep.set_default_client_config(client_config(&ca, |_| {}));
        let (_quic, send) = h3_client(&ep, port).await;
        let mut set = tokio::task::JoinSet::new();
        let (mut launched, mut answered, mut reset) = (0u64, 0u64, 0u64);
        let t0 = Instant::now();
        while (!done.load(Ordering::Relaxed) || launched < 2000) && launched < 50_000 {
            assert!(t0.elapsed() < Duration::from_secs(120), "the flood's loop");
            while set.len() >= 64 {
                match set.join_next().await.unwrap().unwrap() {
                    Ok(true) => answered += 1,
                    Ok(false) => reset += 1,
                    Err(e) => panic!("stream: {e}"),
                }
            }
            let mut send = send.clone();
            let rapid_reset = launched % 2 == 1;
            set.spawn(async move {
                let mut s = get(&mut send, port, "/small.bin", !rapid_reset).await?;
                if rapid_reset {
                    s.stop_stream(h3::error::Code::H3_REQUEST_CANCELLED);
                    s.stop_sending(h3::error::Code::H3_REQUEST_CANCELLED);
                    return Ok(false);
                }
                assert_eq!(read_all(&mut s).await?, (200, 1000));
                Ok::<_, String>(true)
            });
            launched += 1;
        }
        while let Some(r) = set.join_next().await {
            match r.unwrap() {
                Ok(true) => answered += 1,
                Ok(false) => reset += 1,
                Err(e) => panic!("stream: {e}"),
            }
        }
        let took = t0.elapsed();
        // the connection stays open until the server has seen every stream:
        // a reset stream whose packets were lost is sent again only while
        // the connection lives, and closing at once left one unseen (CI,
        // 2026-12-07: 25,185 streams seen of 25,186)
        let ca = ca.clone();
        tokio::task::spawn_blocking(move || {
            wait_until(
                "the server saw every stream",
                Duration::from_secs(10),
                || h3n(&stats(port, &ca), "streams") >= launched + 2,
            )
        })
        .await
        .unwrap();
        (launched, answered, reset, took)
    });
    let (benign_took, most) = benign.join().unwrap();
    let peak = watch.peak_kib();
    // the server's view settles once the last resets arrived
    wait_until("the streams closed", Duration::from_secs(10), || {
        h3n(&stats(port, &ca), "open_streams") == 0
    });
    let st = stats(port, &ca);
    eprintln!(
        "{launched} streams in {took:?} ({:.0}/s): {answered} answered, {reset} reset by the client; \
         real client served in {benign_took:.3} s; most open streams seen {most}; {}; RSS {} -> peak {}",
        launched as f64 / took.as_secs_f64(),
        st["h3"],
        Mib(base),
        Mib(peak)
    );
    assert_eq!(answered + reset, launched);
    assert_eq!(
        answered,
        launched.div_ceil(2),
        "every awaited answer came whole"
    );
    assert!(most <= 8, "at most the credit open at once: {most}");
    // the flood's streams and the real clients' (warm-up, mid-flood)
    assert_eq!(h3n(&st, "streams"), launched + 2, "{st}");
    assert_eq!(
        h3n(&st, "requests") + h3n(&st, "stream_errors"),
        launched + 2,
        "every stream answered or counted as an error: {st}"
    );
    assert!(h3n(&st, "requests") >= answered + 2, "{st}");
    // a reset that came while its answer went out cut it (counted); the
    // rest were answered whole (1,000 bytes each, 1 MB each real client's)
    let (requests, aborted) = (h3n(&st, "requests"), h3n(&st, "aborted"));
    assert!(aborted <= reset, "{st}");
    let whole = (requests - 2 - aborted) * 1000 + 2 * 1_000_000;
    assert!(
        (whole..=whole + aborted * 1000).contains(&h3n(&st, "bytes")),
        "every request not cut answered whole: {st}"
    );
    assert_eq!(h3n(&st, "connections"), 3, "{st}");
    assert!(peak - base < 32 << 10, "RSS {} -> {}", Mib(base), Mib(peak));
    drop(serve);
}

/// A connection opens all 4 streams its credit allows and sends each a
/// HEADERS frame's first bytes, never the rest: the server answers
/// nothing on them and stops them at `--header-timeout` (2 s; counted,
/// STOP_SENDING to the client). A fifth request on the same connection
/// waits for credit: while the client ignores the STOP_SENDING (QUIC keeps
/// a stopped stream until its sender resets or ends it) it starves only
/// itself; once it resets them (RFC 9000 §3.5) the fifth is answered.
/// Another connection is served all the while.
#[test]
fn streams_without_a_head_are_dropped_at_the_header_timeout() {
    let _s = serial();
    let (t, root) = test_dir();
    let (serve, port, ca) = serve_h3(
        t.path(),
        &root,
        &["--h3-max-concurrent-streams", "4", "--header-timeout", "2"],
    );
    let rt = runtime();
    let (held, fifth, stopped) = rt.block_on(async {
        let mut ep = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
        ep.set_default_client_config(client_config(&ca, |_| {}));
        let (quic, mut send) = h3_client(&ep, port).await;
        let t0 = Instant::now();
        let mut raw = Vec::new();
        for _ in 0..4 {
            let (mut s, r) = quic.open_bi().await.unwrap();
            // HEADERS (type 1), 100 bytes long (a 2-byte varint), 1 byte of it
            s.write_all(&[0x01, 0x40, 0x64, 0x00]).await.unwrap();
            raw.push((s, r));
        }
        // the fifth waits for credit
        let fifth = tokio::spawn(async move {
            let mut s = get(&mut send, port, "/small.bin", true).await.unwrap();
            let r = read_all(&mut s).await.unwrap();
            (r, t0.elapsed())
        });
        // while they hang, the real client is served on its own connection
        let (tc, cac) = (t.path().to_path_buf(), ca.clone());
        let mid = tokio::task::spawn_blocking(move || {
            let took = served(port, &cac, &tc);
            (took, stats(port, &cac))
        })
        .await
        .unwrap();
        let held = t0.elapsed();
        // the server stops reading each headless stream (STOP_SENDING)
        let mut stopped = Vec::new();
        for (s, _) in &mut raw {
            let code = tokio::time::timeout(Duration::from_secs(10), s.stopped())
                .await
                .expect("the server stops the headless stream");
            stopped.push((code, t0.elapsed()));
        }
        // a client ignoring STOP_SENDING keeps its own credit used: the
        // fifth still waits
        tokio::time::sleep(Duration::from_millis(500)).await;
        let starved = !fifth.is_finished();
        // dropping a stopped stream resets it, as RFC 9000 §3.5 asks:
        // the credit comes back and the fifth is answered
        let reset_at = t0.elapsed();
        drop(raw);
        let fifth = fifth.await.unwrap();
        (held, (fifth, mid), (stopped, starved, reset_at))
    });
    let ((fifth, fifth_at), (mid_took, mid)) = fifth;
    let (stopped, starved, reset_at) = stopped;
    let st = stats(port, &ca);
    eprintln!(
        "real client served in {mid_took:.3} s while 4 headless streams hung ({held:?}); \
         headless stopped at {:?}; reset by the client at {reset_at:?}; fifth answered at {fifth_at:?}; {}",
        stopped.iter().map(|s| s.1).collect::<Vec<_>>(),
        st["h3"]
    );
    assert!(starved, "the credit stays used until the client resets");
    assert_eq!(
        h3n(&mid, "requests"),
        1,
        "the real client's request, none of the headless: {mid}"
    );
    assert_eq!(
        mid["header_timeouts"], 0,
        "served before the timeout: {mid}"
    );
    for (code, at) in &stopped {
        assert!(matches!(code, Ok(Some(_))), "STOP_SENDING: {code:?}");
        assert!(
            *at >= Duration::from_millis(1900) && *at < Duration::from_secs(6),
            "stopped at the header timeout: {at:?}"
        );
    }
    assert_eq!(fifth, (200, 1000));
    assert!(
        fifth_at >= reset_at && fifth_at < reset_at + Duration::from_secs(3),
        "the fifth got credit once the headless were reset: {fifth_at:?}"
    );
    assert_eq!(st["header_timeouts"], 4, "{st}");
    assert_eq!(
        h3n(&st, "streams"),
        6,
        "4 headless, the fifth, aioquic's: {st}"
    );
    assert_eq!(h3n(&st, "requests"), 2, "{st}");
    assert_eq!(h3n(&st, "open_streams"), 0, "{st}");
    drop(serve);
}

// ---------------------------------------------------------------------
// Clients that never read
// ---------------------------------------------------------------------

/// 10 connections each ask for the 32 MiB file on 4 streams with a 64 KiB
/// stream window and never read: the server's writes stall on QUIC flow
/// control, a real client is served meanwhile, and after `--send-timeout`
/// (3 s) without progress each stream is reset (H3_REQUEST_CANCELLED) and
/// counted (`send_timeouts`, `h3.aborted`). What a stalled stream holds at
/// the server is bounded by the client's window and one body chunk.
#[test]
fn clients_that_never_read_are_reset_at_the_send_timeout() {
    let _s = serial();
    let (t, root) = test_dir();
    let (serve, port, ca) = serve_h3(t.path(), &root, &["--send-timeout", "3"]);
    served(port, &ca, t.path());
    let base = serve.rss_kib();
    let watch = RssWatch::start(serve.0.id());
    const CONNS: usize = 10;
    const STREAMS: usize = 4;
    const WINDOW: u32 = 64 << 10;
    let rt = runtime();
    let (t_heads, after) = rt.block_on(async {
        let mut ep = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
        ep.set_default_client_config(client_config(&ca, |tc| {
            tc.stream_receive_window(WINDOW.into());
            tc.receive_window((4 * WINDOW).into());
        }));
        let t0 = Instant::now();
        let mut stalled = Vec::new();
        let mut conns = Vec::new();
        for _ in 0..CONNS {
            let (quic, mut send) = h3_client(&ep, port).await;
            for _ in 0..STREAMS {
                let mut s = get(&mut send, port, "/big.bin", true).await.unwrap();
                let head = s.recv_response().await.unwrap();
                assert_eq!(head.status(), 200);
                stalled.push(s);
            }
            conns.push((quic, send));
        }
        let t_heads = t0.elapsed();
        // meanwhile a real client is served, before any send timeout
        let (tc, cac) = (t.path().to_path_buf(), ca.clone());
        let mid = tokio::task::spawn_blocking(move || {
            let took = served(port, &cac, &tc);
            (took, stats(port, &cac))
        })
        .await
        .unwrap();
        // the timeouts fire; then read what each stream got: its window's
        // bytes at most, then the reset
        let (pc, cac) = (port, ca.clone());
        tokio::task::spawn_blocking(move || {
            wait_until("every send timed out", Duration::from_secs(20), || {
                stats(pc, &cac)["send_timeouts"] == (CONNS * STREAMS) as u64
            })
        })
        .await
        .unwrap();
        let mut got = Vec::new();
        for mut s in stalled {
            let mut n = 0usize;
            let end = loop {
                match tokio::time::timeout(Duration::from_secs(5), s.recv_data()).await {
                    Ok(Ok(Some(b))) => n += b.remaining(),
                    Ok(Ok(None)) => break "finished".to_string(),
                    Ok(Err(e)) => break e.to_string(),
                    Err(_) => break "nothing for 5 s".to_string(),
                }
            };
            got.push((n, end));
        }
        drop(conns);
        (t_heads, (mid, got))
    });
    let ((mid_took, mid), got) = after;
    let peak = watch.peak_kib();
    let st = stats(port, &ca);
    eprintln!(
        "{} stalled streams (heads in {t_heads:?}); real client served in {mid_took:.3} s; \
         received per stream {:?}; {}; send_timeouts {}; RSS {} -> peak {}",
        CONNS * STREAMS,
        got.iter().map(|g| g.0).collect::<Vec<_>>(),
        st["h3"],
        st["send_timeouts"],
        Mib(base),
        Mib(peak)
    );
    assert_eq!(mid["send_timeouts"], 0, "served during the stall: {mid}");
    let n = (CONNS * STREAMS) as u64;
    for (bytes, end) in &got {
        assert!(*bytes <= WINDOW as usize, "{bytes} bytes past the window");
        assert!(
            end.contains("reset") || end.contains("Reset") || end.contains("cancel"),
            "the stream was reset: {end}"
        );
    }
    assert_eq!(st["send_timeouts"], n, "{st}");
    assert_eq!(h3n(&st, "aborted"), n, "{st}");
    assert_eq!(h3n(&st, "requests"), n + 2, "{st}");
    // per stalled stream: the window in quinn and a 256 KiB chunk at most
    assert!(peak - base < 64 << 10, "RSS {} -> {}", Mib(base), Mib(peak));
    // and after it all, a real client is served
    served(port, &ca, t.path());
    drop(serve);
}

// ---------------------------------------------------------------------
// Idle connections
// ---------------------------------------------------------------------

/// 10,000 HTTP/3 connections from one client endpoint (one UDP socket),
/// each handshaken with its control streams up, then left idle (QUIC
/// keep-alives every 3 s while they are opened), at a cap of exactly
/// 10,000 (`--h3-max-connections`): the server holds them all (its
/// resident memory per connection is measured and bounded), refuses the
/// next 200 and a real client (counted in `h3.refused`); when the client
/// falls silent, QUIC's idle timeout (8 s) closes them (any it stretched
/// are closed by the server's keep-alive timer) and the real client is
/// served. `VODLAB_H3_IDLE_CONNS` sets another count.
#[test]
fn ten_thousand_idle_connections_are_held_capped_and_timed_out() {
    let _s = serial();
    let n = common::env_count("VODLAB_H3_IDLE_CONNS", 10_000);
    let (t, root) = test_dir();
    let cap = n.to_string();
    let (serve, port, ca) = serve_h3(
        t.path(),
        &root,
        &[
            "--h3-max-connections",
            &cap,
            "--h3-idle-timeout",
            "8",
            "--header-timeout",
            "20",
        ],
    );
    served(port, &ca, t.path());
    let base = serve.rss_kib();
    let rt = runtime();
    let sock = {
        let _rt = rt.enter();
        MuteSocket::bind()
    };
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let t0 = Instant::now();
    let held = rt.block_on(async {
        let mut ep = sock.endpoint();
        ep.set_default_client_config(client_config(&ca, |tc| {
            tc.keep_alive_interval(Some(Duration::from_secs(3)));
            tc.max_idle_timeout(Some(Duration::from_secs(120).try_into().unwrap()));
        }));
        let mut held = Vec::with_capacity(n);
        let mut set = tokio::task::JoinSet::new();
        let mut started = 0;
        while held.len() < n {
            assert!(
                t0.elapsed() < Duration::from_secs(300),
                "opening {n} connections: {} so far",
                held.len()
            );
            while started < n && set.len() < 64 {
                let ep = ep.clone();
                set.spawn(async move {
                    let quic = ep
                        .connect(addr, "localhost")
                        .unwrap()
                        .await
                        .map_err(|e| e.to_string())?;
                    let (mut driver, send) =
                        h3::client::new(h3_quinn::Connection::new(quic.clone()))
                            .await
                            .map_err(|e| e.to_string())?;
                    tokio::spawn(
                        async move { std::future::poll_fn(|cx| driver.poll_close(cx)).await },
                    );
                    Ok::<_, String>((quic, send))
                });
                started += 1;
            }
            let c = set.join_next().await.unwrap().unwrap();
            held.push(c.expect("an idle connection below the cap"));
        }
        held
    });
    let opened = t0.elapsed();
    // the client's side is up a half round trip before the server's
    wait_until("all held by the server", Duration::from_secs(30), || {
        let st = stats(port, &ca);
        h3n(&st, "connections") == n as u64 + 1 && h3n(&st, "handshaking") == 0
    });
    // the server's memory with them all open
    let full = serve.rss_kib();
    let per = (full.saturating_sub(base)) as f64 * 1024.0 / n as f64;
    let st = stats(port, &ca);
    eprintln!(
        "{n} idle h3 connections opened in {opened:?} ({:.0}/s); server RSS {} -> {} = {:.1} KiB per connection; {}",
        n as f64 / opened.as_secs_f64(),
        Mib(base),
        Mib(full),
        per / 1024.0,
        st["h3"]
    );
    assert_eq!(h3n(&st, "connections"), n as u64 + 1, "{st}");
    assert!(
        per < 64.0 * 1024.0,
        "{:.1} KiB per idle connection",
        per / 1024.0
    );
    // at the cap: 200 more are refused, and the real client too
    let refused = rt.block_on(async {
        let mut ep = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
        ep.set_default_client_config(client_config(&ca, |_| {}));
        let mut refused = 0;
        for _ in 0..200 {
            match ep.connect(addr, "localhost").unwrap().await {
                Err(quinn::ConnectionError::ConnectionClosed(c))
                    if c.error_code == quinn::TransportErrorCode::CONNECTION_REFUSED =>
                {
                    refused += 1
                }
                other => panic!("at the cap: {other:?}"),
            }
        }
        refused
    });
    assert_eq!(refused, 200);
    let o = h3get_output(port, "/seg.bin", &t.path().join("x"), &ca, &[]);
    assert!(!o.status.success(), "the real client at the cap is refused");
    let st = stats(port, &ca);
    assert_eq!(h3n(&st, "refused"), 201, "{st}");
    // the client falls silent: the idle timeout closes them all
    sock.muted.store(true, Ordering::Relaxed);
    let silent = Instant::now();
    let mut left = Vec::new();
    loop {
        let open = h3n(&stats(port, &ca), "open_connections");
        // the time the answer came: the count was read before it
        left.push((silent.elapsed().as_secs_f64(), open));
        if open == 0 {
            break;
        }
        assert!(
            silent.elapsed() < Duration::from_secs(70),
            "the idle connections timed out: (s, open) {left:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let closed_in = silent.elapsed();
    left.dedup_by_key(|l| l.1);
    let left: Vec<(f64, u64)> = left
        .into_iter()
        .map(|(t, o)| ((t * 10.0).round() / 10.0, o))
        .collect();
    // the slowest RTT the client measured (a QUIC idle timeout is at
    // least 3 PTOs, which a handshake storm can lengthen)
    let rtt = held.iter().map(|c| c.0.rtt()).max().unwrap();
    eprintln!("open after the client fell silent (s, open): {left:?}; largest client RTT {rtt:?}");
    let after = serve.rss_kib();
    let took = served(port, &ca, t.path());
    eprintln!(
        "silent client: all {n} closed in {closed_in:?} (idle timeout 8 s), {} by the keep-alive timer; RSS after {}; real client served in {took:.3} s",
        h3n(&stats(port, &ca), "idle_closed"),
        Mib(after)
    );
    // QUIC's idle timeout (8 s from the last keep-alive, 3 s or less
    // before the silence) closes them: not before 5 s (asserted with a
    // second's slack: on a loaded machine a keep-alive timer fires late,
    // and a full run here once read 9,996 in a count answered between 4
    // and 5 s), all but a few by 11 s (checked in the counts answered by
    // 12 s: a count under load takes up to seconds). A connection's QUIC idle timeout is at least 3 PTOs, which a
    // handshake storm can stretch; those few are closed by the server's
    // own `--keepalive` timer (60 s from their handshake, no request)
    let by = |secs: f64| {
        left.iter()
            .take_while(|l| l.0 <= secs)
            .last()
            .map_or(n as u64, |l| l.1)
    };
    assert_eq!(
        by(4.0),
        n as u64,
        "none closed before the timeout: {left:?}"
    );
    assert!(
        by(12.0) <= n as u64 / 100,
        "99 % closed in a count answered by 12 s: {left:?}"
    );
    assert!(closed_in < Duration::from_secs(62), "{closed_in:?}");
    let st = stats(port, &ca);
    assert!(
        h3n(&st, "idle_closed") <= by(12.0),
        "only stragglers were closed by the keep-alive timer: {st}"
    );
    drop(held);
    drop(rt);
    drop(serve);
}

/// Connections that keep QUIC alive with PINGs (every 500 ms) but send no
/// request are closed by the server at `--keepalive` (3 s) after their
/// handshake, with H3_NO_ERROR, and counted (`h3.idle_closed`): QUIC's own
/// idle timeout (30 s here) never fires for them. A connection that asks
/// for something every second stays open while it does, and is closed
/// 3 s after its last answer.
#[test]
fn pinging_connections_without_requests_are_closed_at_the_idle_timeout() {
    let _s = serial();
    let (t, root) = test_dir();
    let (serve, port, ca) = serve_h3(
        t.path(),
        &root,
        &["--keepalive", "3", "--h3-idle-timeout", "30"],
    );
    const N: usize = 200;
    let rt = runtime();
    let (idle, busy) = rt.block_on(async {
        let mut ep = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
        ep.set_default_client_config(client_config(&ca, |tc| {
            tc.keep_alive_interval(Some(Duration::from_millis(500)));
        }));
        let mut waits = tokio::task::JoinSet::new();
        for _ in 0..N {
            let (quic, send) = h3_client(&ep, port).await;
            let up = Instant::now();
            waits.spawn(async move {
                let why = quic.closed().await;
                drop(send);
                (up.elapsed(), why)
            });
        }
        // the busy one: a request a second for 5 s
        let (quic, mut send) = h3_client(&ep, port).await;
        let mut last = Instant::now();
        for _ in 0..5 {
            let mut s = get(&mut send, port, "/small.bin", true).await.unwrap();
            assert_eq!(read_all(&mut s).await.unwrap(), (200, 1000));
            last = Instant::now();
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        let why = tokio::time::timeout(Duration::from_secs(10), quic.closed())
            .await
            .expect("the busy connection closed after its last request");
        let busy = (last.elapsed(), why);
        let mut idle = Vec::new();
        while let Some(r) = waits.join_next().await {
            idle.push(r.unwrap());
        }
        (idle, busy)
    });
    let st = stats(port, &ca);
    let most = idle.iter().map(|i| i.0).max().unwrap();
    let least = idle.iter().map(|i| i.0).min().unwrap();
    eprintln!(
        "{N} pinging connections closed {least:?} to {most:?} after their handshake; \
         the busy one {:?} after its last answer; {}",
        busy.0, st["h3"]
    );
    let no_error = |e: &quinn::ConnectionError| matches!(e, quinn::ConnectionError::ApplicationClosed(c) if c.error_code == 0x100u32.into());
    for (after, why) in idle.iter().chain(std::iter::once(&busy)) {
        assert!(
            no_error(why),
            "closed by the server with H3_NO_ERROR: {why:?}"
        );
        assert!(
            *after >= Duration::from_millis(2900) && *after < Duration::from_secs(6),
            "closed at the idle timeout: {after:?}"
        );
    }
    assert_eq!(h3n(&st, "idle_closed"), N as u64 + 1, "{st}");
    assert_eq!(h3n(&st, "open_connections"), 0, "{st}");
    served(port, &ca, t.path());
    drop(serve);
}
