//! Helpers of the HTTP/3 tests (h3.rs, h3_link.rs, hostile_h3.rs): `vodlab
//! serve --h3` with a generated certificate as a child process (its
//! statistics over HTTPS, its resident memory from /proc), `vodlab run
//! --protocol h3`, workloads whose files `vodlab fileset create` wrote
//! (every byte verifiable) and the checks of a run's rows against them,
//! aioquic's h3 client (scripts/h3probe/h3get.py) as the well-behaved peer,
//! and quinn clients for the attackers (their TLS configuration, a socket
//! that can be silenced, the server socket's kernel queue).

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::fmt;
use std::io::{self, IoSliceMut};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use quinn::udp::{RecvMeta, Transmit};
use quinn::{AsyncUdpSocket, UdpPoller};

use crate::common::{
    free_port, listening, require, results, status_kib, udp_bound, vodlab_ok, wait_until,
};

/// A child process stopped by SIGTERM (by its PID) on drop.
pub struct Peer(pub Child);

impl Peer {
    /// Stops it (SIGTERM) and waits; true when it exited successfully.
    pub fn stop(&mut self) -> bool {
        // SAFETY: signalling the child we started, by its PID
        unsafe { libc::kill(self.0.id() as i32, libc::SIGTERM) };
        self.0.wait().is_ok_and(|s| s.success())
    }

    /// Its resident memory now (`VmRSS`), KiB.
    pub fn rss_kib(&self) -> u64 {
        let s = std::fs::read_to_string(format!("/proc/{}/status", self.0.id()))
            .expect("the server's /proc status");
        status_kib(&s, "VmRSS:").expect("VmRSS")
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            self.stop();
        }
    }
}

/// A workload of `preset` (unpaced) in `dir/w` with its files written by
/// `vodlab fileset create` (verifiable content) in `dir/root`.
pub fn workload(dir: &Path, preset: &str, sessions: u32, titles: u32) -> (PathBuf, PathBuf) {
    let spec =
        vodlab_ok(&["gen", "--show-preset", preset]).replace("pacing_s = 10.0", "pacing_s = 0.0");
    std::fs::write(dir.join("spec.toml"), spec).unwrap();
    let w = dir.join("w");
    let root = dir.join("root");
    let (s, t) = (sessions.to_string(), titles.to_string());
    let p = |p: &Path| p.to_str().unwrap().to_string();
    vodlab_ok(&[
        "gen",
        "--spec",
        &p(&dir.join("spec.toml")),
        "--sessions",
        &s,
        "--titles",
        &t,
        "--shards",
        "1",
        "--seed",
        "5",
        "-o",
        &p(&w),
    ]);
    vodlab_ok(&["fileset", "create", &p(&w), "--root", &p(&root)]);
    (w, root)
}

/// `vodlab serve --h3` with a generated certificate (written to
/// `dir/ca.pem`) on a free port (TCP and UDP), with `extra` flags; waits
/// for both listeners.
pub fn serve_h3(dir: &Path, root: &Path, extra: &[&str]) -> (Peer, u16, PathBuf) {
    let port = free_port();
    let ca = dir.join("ca.pem");
    let tls = ["--tls-self-signed", "--tls-cert-out", ca.to_str().unwrap()];
    (spawn_h3(root, port, &tls, extra), port, ca)
}

/// `vodlab serve --h3` on `port` with a given certificate and key (what two
/// server processes share when one replaces the other), with `extra`
/// flags; waits for both listeners.
pub fn serve_h3_with_cert(root: &Path, port: u16, cert: &Path, key: &Path, extra: &[&str]) -> Peer {
    let tls = [
        "--tls-cert",
        cert.to_str().unwrap(),
        "--tls-key",
        key.to_str().unwrap(),
    ];
    spawn_h3(root, port, &tls, extra)
}

/// Starts `vodlab serve --h3` on `port` with its TLS flags `tls` and
/// `extra`, and waits (10 s at most) until it listens on TCP and UDP.
fn spawn_h3(root: &Path, port: u16, tls: &[&str], extra: &[&str]) -> Peer {
    let child = Command::new(env!("CARGO_BIN_EXE_vodlab"))
        .args(["serve", "--root", root.to_str().unwrap()])
        .args([
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--stats-interval",
            "0",
            "--h3",
        ])
        .args(tls)
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start vodlab serve");
    let mut peer = Peer(child);
    wait_until(
        "vodlab serve --h3 on TCP and UDP",
        Duration::from_secs(10),
        || {
            if let Ok(Some(st)) = peer.0.try_wait() {
                panic!("vodlab serve exited at start: {st}");
            }
            listening(port) && udp_bound(port)
        },
    );
    peer
}

/// A certificate for localhost and 127.0.0.1 (openssl; not a CA, which
/// rustls refuses as a server's) and its key in `dir`: (`cert.pem`,
/// `key.pem`). A client trusts it with `--ca cert.pem`.
pub fn localhost_cert(dir: &Path) -> (PathBuf, PathBuf) {
    let openssl = require("openssl", "openssl");
    let o = Command::new(openssl)
        .args(["req", "-x509", "-newkey", "ec"])
        .args(["-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"])
        .args(["-keyout", "key.pem", "-out", "cert.pem", "-days", "2"])
        .args(["-subj", "/CN=localhost"])
        .args(["-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"])
        .args(["-addext", "basicConstraints=critical,CA:FALSE"])
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "openssl: {o:?}");
    (dir.join("cert.pem"), dir.join("key.pem"))
}

/// The server's statistics page (over HTTPS, with curl).
pub fn stats(port: u16, ca: &Path) -> serde_json::Value {
    let curl = require("curl", "curl");
    let o = Command::new(curl)
        .args(["-s", "--max-time", "10", "--cacert", ca.to_str().unwrap()])
        .arg(format!("https://localhost:{port}/vodlab/stats"))
        .output()
        .unwrap();
    assert!(o.status.success(), "curl stats: {o:?}");
    serde_json::from_slice(&o.stdout).expect("stats JSON")
}

/// `vodlab run --protocol h3` of `w` against `port`, every byte checked,
/// without the classes' links.
pub fn run_h3(w: &Path, out: &Path, port: u16, ca: &Path) -> serde_json::Value {
    run_h3_with(w, out, port, ca, &["--no-shaping"])
}

/// [`run_h3`] with `extra` flags instead of `--no-shaping`.
pub fn run_h3_with(
    w: &Path,
    out: &Path,
    port: u16,
    ca: &Path,
    extra: &[&str],
) -> serde_json::Value {
    let target = format!("https://localhost:{port}");
    let mut args = vec![
        "run",
        w.to_str().unwrap(),
        "--target",
        &target,
        "--protocol",
        "h3",
        "--ca",
        ca.to_str().unwrap(),
        "--rate",
        "1000",
        "--arrivals",
        "constant",
        "--no-pacing",
        "--check-bytes",
        "1",
        "--requests-csv",
        "--quiet",
        "-o",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    vodlab_ok(&args);
    let r = results(out);
    assert_eq!(r["protocol"], "h3", "{r}");
    assert_eq!(r["failed_sessions"], 0, "{r}");
    for (kind, n) in r["errors"].as_object().unwrap() {
        assert_eq!(n, 0, "errors.{kind}: {r}");
    }
    r
}

/// requests.csv: `(session, request) -> (path, range, status, bytes)`.
pub type Rows = BTreeMap<(u64, u64), (String, String, u16, u64)>;

pub fn rows(out: &Path) -> Rows {
    let text = std::fs::read_to_string(out.join("requests.csv")).expect("requests.csv");
    text.lines()
        .skip(1)
        .map(|line| {
            let f: Vec<&str> = line.split(',').collect();
            assert_eq!(f[15], "", "request failed: {line}");
            (
                (f[0].parse().unwrap(), f[3].parse().unwrap()),
                (
                    f[4].into(),
                    f[5].into(),
                    f[12].parse().unwrap(),
                    f[11].parse().unwrap(),
                ),
            )
        })
        .collect()
}

/// The bytes a request for `range` (`A-B`, or empty: the whole file) of a
/// file of `size` bytes must get.
pub fn expected_bytes(range: &str, size: u64) -> u64 {
    match range.split_once('-') {
        None => size,
        Some((a, b)) => {
            let a: u64 = a.parse().unwrap();
            let b: u64 = b.parse::<u64>().unwrap().min(size - 1);
            b - a + 1
        }
    }
}

/// Every row got its range's bytes (206) or the whole file (200), as the
/// files on disk say; the sum is `completed_bytes`.
pub fn check_against_files(rows: &Rows, root: &Path, r: &serde_json::Value) {
    assert!(!rows.is_empty());
    let mut total = 0;
    for ((s, i), (path, range, status, bytes)) in rows {
        let size = std::fs::metadata(root.join(path.trim_start_matches('/')))
            .unwrap()
            .len();
        let want = expected_bytes(range, size);
        assert_eq!(*bytes, want, "session {s} request {i}: {path} {range}");
        assert_eq!(
            *status,
            if range.is_empty() { 200 } else { 206 },
            "{path} {range}"
        );
        total += want;
    }
    assert_eq!(r["completed_bytes"], total);
    assert_eq!(r["completed_requests"], rows.len());
}

/// The Python with aioquic: the test venv (`$VODLAB_TEST_VENV`, else
/// target/test-venv, where scripts/install-test-deps.sh installs it).
pub fn aioquic_python() -> PathBuf {
    let venv = std::env::var_os("VODLAB_TEST_VENV").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/test-venv"),
        PathBuf::from,
    );
    let p = venv.join("bin/python3");
    let found = Command::new(&p)
        .args(["-c", "import aioquic"])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        found,
        "aioquic (PyPI) is not installed in {}: run scripts/install-test-deps.sh \
         (it installs it into target/test-venv)",
        p.display()
    );
    p
}

/// scripts/h3probe/h3get.py: one GET (or `streams` at once) over HTTP/3;
/// the process's output, whatever its status.
pub fn h3get_output(port: u16, path: &str, out: &Path, ca: &Path, extra: &[&str]) -> Output {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/h3probe/h3get.py");
    Command::new(aioquic_python())
        .arg(script)
        .args(["localhost", &port.to_string(), path, out.to_str().unwrap()])
        .args(["--ca", ca.to_str().unwrap()])
        .args(extra)
        .output()
        .unwrap()
}

/// [`h3get_output`] that must succeed: its JSON line.
pub fn h3get(port: u16, path: &str, out: &Path, ca: &Path, extra: &[&str]) -> serde_json::Value {
    let o = h3get_output(port, path, out, ca, extra);
    assert!(
        o.status.success(),
        "h3get.py: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).expect("h3get.py prints JSON")
}

/// A quinn client configuration trusting `ca` (PEM), ALPN `h3`, with its
/// transport settings adjusted by `tweak`.
pub fn client_config(
    ca: &Path,
    tweak: impl FnOnce(&mut quinn::TransportConfig),
) -> quinn::ClientConfig {
    use quinn::rustls;
    use rustls::pki_types::{pem::PemObject, CertificateDer};
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_file_iter(ca).expect("ca.pem") {
        roots.add(c.expect("a certificate")).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    tls.alpn_protocols = vec![b"h3".to_vec()];
    let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(tls).unwrap();
    let mut cfg = quinn::ClientConfig::new(Arc::new(crypto));
    let mut t = quinn::TransportConfig::default();
    tweak(&mut t);
    cfg.transport_config(Arc::new(t));
    cfg
}

/// A UDP socket for a quinn endpoint that can be silenced: once muted,
/// every datagram its connections send is dropped (reported as sent), so
/// the server hears nothing more from them, as from clients that vanished
/// without closing. What it sends and receives is counted.
#[derive(Debug)]
pub struct MuteSocket {
    inner: Arc<dyn AsyncUdpSocket>,
    /// Whether sends are dropped.
    pub muted: AtomicBool,
    /// Datagrams sent (before muting).
    pub sent: AtomicU64,
}

impl MuteSocket {
    /// A loopback socket on a free port, registered with the tokio runtime
    /// entered (call it inside one).
    pub fn bind() -> Arc<Self> {
        let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let inner = quinn::TokioRuntime.wrap_udp_socket(s).unwrap();
        Arc::new(Self {
            inner,
            muted: AtomicBool::new(false),
            sent: AtomicU64::new(0),
        })
    }

    /// A client endpoint on this socket.
    pub fn endpoint(self: &Arc<Self>) -> quinn::Endpoint {
        quinn::Endpoint::new_with_abstract_socket(
            quinn::EndpointConfig::default(),
            None,
            self.clone(),
            Arc::new(quinn::TokioRuntime),
        )
        .unwrap()
    }
}

use quinn::Runtime as _;

impl AsyncUdpSocket for MuteSocket {
    fn create_io_poller(self: Arc<Self>) -> Pin<Box<dyn UdpPoller>> {
        self.inner.clone().create_io_poller()
    }

    fn try_send(&self, transmit: &Transmit) -> io::Result<()> {
        if self.muted.load(Ordering::Relaxed) {
            return Ok(());
        }
        self.inner.try_send(transmit)?;
        self.sent.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    fn poll_recv(
        &self,
        cx: &mut Context,
        bufs: &mut [IoSliceMut<'_>],
        meta: &mut [RecvMeta],
    ) -> Poll<io::Result<usize>> {
        self.inner.poll_recv(cx, bufs, meta)
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr()
    }

    fn max_transmit_segments(&self) -> usize {
        self.inner.max_transmit_segments()
    }

    fn max_receive_segments(&self) -> usize {
        self.inner.max_receive_segments()
    }

    fn may_fragment(&self) -> bool {
        self.inner.may_fragment()
    }
}

/// The kernel's view of the UDP socket bound to `port`: (datagram bytes
/// queued for the server to read, datagrams dropped because its queue was
/// full), from /proc/net/udp.
pub fn udp_queue(port: u16) -> (u64, u64) {
    let suffix = format!(":{port:04X}");
    let text = std::fs::read_to_string("/proc/net/udp").unwrap();
    text.lines()
        .skip(1)
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|c| c.len() > 12 && c[1].ends_with(&suffix))
        .map(|c| {
            let rx = c[4].split(':').nth(1).unwrap();
            (
                u64::from_str_radix(rx, 16).unwrap(),
                c[c.len() - 1].parse().unwrap(),
            )
        })
        .unwrap_or_else(|| panic!("no UDP socket on port {port}"))
}

/// A thread reading a process's `VmRSS` every 20 ms until stopped: the
/// peak it saw, KiB.
pub struct RssWatch {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<u64>,
}

impl RssWatch {
    /// Starts watching process `pid`.
    pub fn start(pid: u32) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut peak = 0;
            while !s.load(Ordering::Relaxed) {
                if let Some(k) = std::fs::read_to_string(format!("/proc/{pid}/status"))
                    .ok()
                    .and_then(|t| status_kib(&t, "VmRSS:"))
                {
                    peak = peak.max(k);
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            peak
        });
        Self { stop, thread }
    }

    /// Stops watching: the peak, KiB.
    pub fn peak_kib(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap()
    }
}

/// Mebibytes of `kib` KiB, for messages.
pub struct Mib(pub u64);

impl fmt::Display for Mib {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.1} MiB", self.0 as f64 / 1024.0)
    }
}
