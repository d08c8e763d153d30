//! `vodlab run --protocol h1|h2c|https|h2` against real peers on loopback:
//! nginx (HTTP/2 module, OpenSSL) and nghttpx (the BBC's proxy, Debian
//! `nghttp2-proxy`) in front of a plain HTTP/1.1 nginx. Every protocol must
//! send the same requests and get the same statuses and byte counts as h1.
//! Certificates: a throw-away CA and a leaf for localhost made with the
//! `openssl` command line in the test's temporary directory.

mod common;

use std::collections::BTreeMap;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::{free_port, require, results, vodlab, vodlab_ok};

/// A CA (`ca.pem`) and a leaf for localhost and 127.0.0.1 signed by it
/// (`cert.pem`, `key.pem`) in `dir`. A self-signed leaf would not do:
/// webpki refuses a CA certificate used as an end entity.
fn certificates(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let openssl = require("openssl", "openssl");
    let run = |args: &[&str]| {
        let o = Command::new(&openssl)
            .args(args)
            .current_dir(dir)
            .output()
            .expect("run openssl");
        assert!(
            o.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    };
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    let mut ca = vec!["req", "-x509"];
    ca.extend(ec);
    ca.extend([
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "2",
        "-subj",
        "/CN=vodlab test CA",
    ]);
    run(&ca);
    let mut leaf = vec!["req"];
    leaf.extend(ec);
    leaf.extend([
        "-keyout",
        "key.pem",
        "-out",
        "leaf.csr",
        "-subj",
        "/CN=localhost",
    ]);
    run(&leaf);
    std::fs::write(
        dir.join("leaf.ext"),
        "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap();
    run(&[
        "x509",
        "-req",
        "-in",
        "leaf.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "cert.pem",
        "-days",
        "2",
        "-extfile",
        "leaf.ext",
    ]);
    (
        dir.join("ca.pem"),
        dir.join("cert.pem"),
        dir.join("key.pem"),
    )
}

/// A peer process killed (by its PID) on drop.
struct Peer(Child);

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn wait_listening(child: &mut Child, ports: &[u16], what: &str) {
    common::wait_until(
        &format!("{what} listening on {ports:?}"),
        Duration::from_secs(10),
        || {
            if let Ok(Some(st)) = child.try_wait() {
                panic!("{what} exited at start: {st}");
            }
            ports
                .iter()
                .all(|p| TcpStream::connect(("127.0.0.1", *p)).is_ok())
        },
    );
}

/// Ports of the nginx test server.
struct NginxPorts {
    h1: u16,
    h2c: u16,
    h2: u16,
    https: u16,
    /// HTTPS closing after every response (so every request opens a new
    /// TLS connection and may resume the session).
    https_close: u16,
}

/// nginx 1.22 (Debian 12) syntax: `listen ... http2` (the `http2 on;`
/// directive came with 1.25.1); a plain port with `http2` speaks h2c by
/// prior knowledge only.
fn nginx(dir: &Path, root: &Path, cert: &Path, key: &Path) -> (Peer, NginxPorts) {
    let bin = require("nginx", "nginx-light");
    let p = NginxPorts {
        h1: free_port(),
        h2c: free_port(),
        h2: free_port(),
        https: free_port(),
        https_close: free_port(),
    };
    let tls = format!(
        "ssl_certificate {}; ssl_certificate_key {};",
        cert.display(),
        key.display()
    );
    let conf = dir.join("nginx.conf");
    std::fs::write(
        &conf,
        format!(
            "daemon off;\nmaster_process off;\nworker_processes 1;\npid {d}/nginx.pid;\nerror_log stderr warn;\n\
             events {{ worker_connections 1024; }}\n\
             http {{\n  access_log off;\n  sendfile on;\n  keepalive_requests 100000;\n\
               client_body_temp_path {d};\n  proxy_temp_path {d};\n  fastcgi_temp_path {d};\n\
               uwsgi_temp_path {d};\n  scgi_temp_path {d};\n  root {root};\n\
               server {{ listen 127.0.0.1:{h1}; }}\n\
               server {{ listen 127.0.0.1:{h2c} http2; }}\n\
               server {{ listen 127.0.0.1:{h2} ssl http2; {tls} }}\n\
               server {{ listen 127.0.0.1:{https} ssl; {tls} }}\n\
               server {{ listen 127.0.0.1:{close} ssl; {tls} keepalive_requests 1; }}\n}}\n",
            d = dir.display(),
            root = root.display(),
            h1 = p.h1,
            h2c = p.h2c,
            h2 = p.h2,
            https = p.https,
            close = p.https_close,
        ),
    )
    .unwrap();
    let mut child = Command::new(bin)
        .arg("-c")
        .arg(&conf)
        .arg("-p")
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start nginx");
    wait_listening(
        &mut child,
        &[p.h1, p.h2c, p.h2, p.https, p.https_close],
        "nginx",
    );
    (Peer(child), p)
}

/// nghttpx with a cleartext frontend (h2c by prior knowledge, or HTTP/1.1)
/// and a TLS frontend (ALPN h2) in front of the HTTP/1.1 `backend`:
/// (peer, h2c port, TLS port).
fn nghttpx(dir: &Path, backend: u16, cert: &Path, key: &Path) -> (Peer, u16, u16) {
    let bin = require("nghttpx", "nghttp2-proxy");
    let (plain, tls) = (free_port(), free_port());
    let mut child = Command::new(bin)
        .arg(format!("--frontend=127.0.0.1,{plain};no-tls"))
        .arg(format!("--frontend=127.0.0.1,{tls}"))
        .arg(format!("--backend=127.0.0.1,{backend}"))
        .arg("--conf=/dev/null")
        .arg("--workers=1")
        .arg("--no-ocsp")
        .arg(format!("--pid-file={}", dir.join("nghttpx.pid").display()))
        .arg("--errorlog-file=/dev/stderr")
        .arg("--accesslog-file=/dev/null")
        .arg(key)
        .arg(cert)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start nghttpx");
    wait_listening(&mut child, &[plain, tls], "nghttpx");
    (Peer(child), plain, tls)
}

/// A small unpaced workload (4 sessions of CloudSuite's preset: range
/// requests of 0.5-6.5 MB) with sparse files.
fn workload(dir: &Path) -> (PathBuf, PathBuf) {
    common::unpaced_workload(dir, "cloudsuite-2016", 4, 12, 1, 5)
}

/// `(session, request) -> (path, range, status, bytes)` of every request,
/// from requests.csv, and the order requests were sent in per session.
type Rows = BTreeMap<(u64, u64), (String, String, String, String)>;

fn rows(out: &Path) -> Rows {
    let text = std::fs::read_to_string(out.join("requests.csv")).expect("requests.csv");
    let mut m = Rows::new();
    for line in text.lines().skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        assert_eq!(f[15], "", "request failed: {line}");
        m.insert(
            (f[0].parse().unwrap(), f[3].parse().unwrap()),
            (f[4].into(), f[5].into(), f[12].into(), f[11].into()),
        );
    }
    m
}

/// Runs `w` with `protocol` against `target`; (results.json, rows).
fn run(
    w: &Path,
    out: &Path,
    target: &str,
    protocol: &str,
    tls: &[&str],
) -> (serde_json::Value, Rows) {
    let mut args = vec![
        "run",
        w.to_str().unwrap(),
        "--target",
        target,
        "--protocol",
        protocol,
        "--rate",
        "1000",
        "--arrivals",
        "constant",
        "--no-pacing",
        "--no-shaping",
        "--check-bytes",
        "0",
        "--requests-csv",
        "--quiet",
        "-o",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(tls);
    vodlab_ok(&args);
    let r = results(out);
    assert_eq!(r["protocol"], protocol, "{r}");
    assert_eq!(r["failed_sessions"], 0, "{protocol} at {target}: {r}");
    (r, rows(out))
}

fn same_as_h1(h1: &(serde_json::Value, Rows), other: &(serde_json::Value, Rows), what: &str) {
    assert!(!h1.1.is_empty());
    assert_eq!(
        h1.1, other.1,
        "{what}: requests, statuses or byte counts differ from h1"
    );
    for k in [
        "completed_requests",
        "completed_bytes",
        "scheduled_sessions",
    ] {
        assert_eq!(h1.0[k], other.0[k], "{what}: {k}");
    }
}

#[test]
fn h2c_https_and_h2_against_nginx_match_h1() {
    let t = tempfile::tempdir().unwrap();
    let (w, root) = workload(t.path());
    let (ca, cert, key) = certificates(t.path());
    let (_nginx, p) = nginx(t.path(), &root, &cert, &key);
    let ca_args = ["--ca", ca.to_str().unwrap()];
    let url =
        |port: u16, tls: bool| format!("{}://localhost:{port}", if tls { "https" } else { "http" });
    let h1 = run(&w, &t.path().join("h1"), &url(p.h1, false), "h1", &[]);
    assert_eq!(h1.0["transport"]["tls_handshakes"], 0);
    let h2c = run(&w, &t.path().join("h2c"), &url(p.h2c, false), "h2c", &[]);
    same_as_h1(&h1, &h2c, "nginx h2c");
    let h2 = run(&w, &t.path().join("h2"), &url(p.h2, true), "h2", &ca_args);
    same_as_h1(&h1, &h2, "nginx h2");
    let https = run(
        &w,
        &t.path().join("https"),
        &url(p.https, true),
        "https",
        &ca_args,
    );
    same_as_h1(&h1, &https, "nginx https");
    // one HTTP/2 connection per session (the preset's sessions use one
    // connection each, so as many as h1's), each with a TLS handshake
    let sessions = h1.0["scheduled_sessions"].as_u64().unwrap();
    assert_eq!(
        h2.0["transport"]["connections"],
        h1.0["transport"]["connections"]
    );
    assert_eq!(
        h2.0["transport"]["tls_handshakes"].as_u64().unwrap(),
        sessions
    );
    assert!(
        h2.0["transport"]["tls_handshake_ms"]["p50"]
            .as_f64()
            .unwrap()
            > 0.0
    );

    // a server that closes after every response: each request a new TLS
    // connection, resumed from the viewer's ticket after the first
    let close = run(
        &w,
        &t.path().join("close"),
        &url(p.https_close, true),
        "https",
        &ca_args,
    );
    same_as_h1(&h1, &close, "nginx https, one request per connection");
    let requests = h1.1.len() as u64;
    let tr = &close.0["transport"];
    assert_eq!(tr["tls_handshakes"].as_u64().unwrap(), requests, "{tr}");
    let resumed = tr["tls_resumed"].as_u64().unwrap();
    assert!(resumed >= requests - sessions && resumed < requests, "{tr}");

    // the wrong trust anchor fails the handshake: no request succeeds
    let out = t.path().join("untrusted");
    let o = vodlab(&[
        "run",
        w.to_str().unwrap(),
        "--target",
        &url(p.h2, true),
        "--protocol",
        "h2",
        "--rate",
        "1000",
        "--no-pacing",
        "--no-shaping",
        "--check-bytes",
        "0",
        "--quiet",
        "--ca",
        cert.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    // ran, and no session succeeded: exit 1 (README "Exit statuses")
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let r = results(&out);
    assert_eq!(r["completed_requests"], 0, "{r}");
    assert_eq!(r["failed_sessions"], r["measured_sessions"], "{r}");
}

#[test]
fn h2c_and_h2_through_nghttpx_match_h1() {
    let t = tempfile::tempdir().unwrap();
    let (w, root) = workload(t.path());
    let (ca, cert, key) = certificates(t.path());
    let (_nginx, p) = nginx(t.path(), &root, &cert, &key);
    let (_proxy, plain, tls) = nghttpx(t.path(), p.h1, &cert, &key);
    let h1 = run(
        &w,
        &t.path().join("h1"),
        &format!("http://127.0.0.1:{}", p.h1),
        "h1",
        &[],
    );
    let h1_proxy = run(
        &w,
        &t.path().join("h1p"),
        &format!("http://127.0.0.1:{plain}"),
        "h1",
        &[],
    );
    same_as_h1(&h1, &h1_proxy, "nghttpx h1");
    let h2c = run(
        &w,
        &t.path().join("h2c"),
        &format!("http://127.0.0.1:{plain}"),
        "h2c",
        &[],
    );
    same_as_h1(&h1, &h2c, "nghttpx h2c");
    let ca_args = ["--ca", ca.to_str().unwrap()];
    let h2 = run(
        &w,
        &t.path().join("h2"),
        &format!("https://localhost:{tls}"),
        "h2",
        &ca_args,
    );
    same_as_h1(&h1, &h2, "nghttpx h2");
    // h2load's smallest windows and frames still deliver every byte
    let small = run(
        &w,
        &t.path().join("small"),
        &format!("https://localhost:{tls}"),
        "h2",
        &[
            "--ca",
            ca.to_str().unwrap(),
            "--h2-window-bits",
            "16",
            "--h2-connection-window-bits",
            "16",
        ],
    );
    same_as_h1(&h1, &small, "nghttpx h2, 64 KiB windows");
}

#[test]
fn timing_scripts_replay_staggered_over_h2c() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("root");
    std::fs::create_dir_all(root.join("v")).unwrap();
    for (name, size) in [
        ("init.mp4", 1_000u64),
        ("1.m4s", 60_000),
        ("2.m4s", 300_000),
    ] {
        std::fs::File::create(root.join("v").join(name))
            .unwrap()
            .set_len(size)
            .unwrap();
    }
    let (_ca, cert, key) = certificates(t.path());
    let (_nginx, p) = nginx(t.path(), &root, &cert, &key);
    let script = t.path().join("timing.txt");
    std::fs::write(
        &script,
        "0\thttp://example/v/init.mp4\n20\t/v/1.m4s\n40\t/v/2.m4s\n",
    )
    .unwrap();
    let mut per_protocol = Vec::new();
    for (proto, port) in [("h1", p.h1), ("h2c", p.h2c)] {
        let out = t.path().join(proto);
        vodlab_ok(&[
            "run",
            "--timing-script",
            script.to_str().unwrap(),
            "--clients",
            "3",
            "--stagger",
            "30",
            "--target",
            &format!("http://127.0.0.1:{port}"),
            "--protocol",
            proto,
            "--check-bytes",
            "0",
            "--requests-csv",
            "--quiet",
            "-o",
            out.to_str().unwrap(),
        ]);
        let r = results(&out);
        assert_eq!(r["started_sessions"], 3, "{r}");
        assert_eq!(r["failed_sessions"], 0, "{r}");
        let rows = rows(&out);
        assert_eq!(rows.len(), 9);
        let bytes: u64 = rows.values().map(|v| v.3.parse::<u64>().unwrap()).sum();
        assert_eq!(bytes, 3 * 361_000);
        per_protocol.push(rows);
    }
    assert_eq!(per_protocol[0], per_protocol[1]);
    // a malformed script is refused with its line named
    std::fs::write(&script, "0\t/v/init.mp4\n20 /v/1.m4s\n").unwrap();
    let o = common::vodlab(&[
        "run",
        "--timing-script",
        script.to_str().unwrap(),
        "--target",
        "http://127.0.0.1:1",
    ]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("line 2"), "{err}");
}

#[test]
fn protocol_and_scheme_must_agree() {
    let t = tempfile::tempdir().unwrap();
    let script = t.path().join("timing.txt");
    std::fs::write(&script, "0\t/a\n").unwrap();
    for (target, proto) in [("http://127.0.0.1:1", "h2"), ("https://127.0.0.1:1", "h2c")] {
        let o = common::vodlab(&[
            "run",
            "--timing-script",
            script.to_str().unwrap(),
            "--target",
            target,
            "--protocol",
            proto,
        ]);
        assert!(!o.status.success());
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("--protocol"), "{err}");
    }
    let o = common::vodlab(&[
        "run",
        "--timing-script",
        script.to_str().unwrap(),
        "--target",
        "http://127.0.0.1:1",
        "--protocol",
        "h2c",
        "--h2-max-frame-size",
        "100",
    ]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("frame size"));
}

/// The emulated access link shapes every protocol: a 4 Mbit/s class
/// receives 250,000 bytes in about 0.5 s and a 100 ms one-way delay adds
/// about 200 ms to time to first byte, over h1, h2c and h2 alike (the
/// buckets sit under TLS and HTTP/2 for the latter).
#[test]
fn the_link_emulation_shapes_every_protocol() {
    use std::sync::Arc;
    use vodlab_client::core::link::LinkSpec;
    use vodlab_client::io::transport::{Protocol, TlsOptions};
    use vodlab_client::load::{LoadedWorkload, Shard};
    use vodlab_client::{Arrivals, Live, RunConfig};

    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("root");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::File::create(root.join("seg"))
        .unwrap()
        .set_len(250_000)
        .unwrap();
    let (ca, cert, key) = certificates(t.path());
    let (_nginx, p) = nginx(t.path(), &root, &cert, &key);
    let classes: BTreeMap<String, LinkSpec> = [
        (
            "slow".to_string(),
            LinkSpec {
                down_bps: 4e6,
                up_bps: 4e6,
                delay: Duration::ZERO,
            },
        ),
        (
            "far".to_string(),
            LinkSpec {
                delay: Duration::from_millis(100),
                ..LinkSpec::default()
            },
        ),
    ]
    .into();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    for (proto, port) in [
        (Protocol::H1, p.h1),
        (Protocol::H2c, p.h2c),
        (Protocol::H2, p.h2),
    ] {
        for (class, check) in [("slow", 0), ("far", 1)] {
            let text = format!("#@session id=1 class={class}\n/seg timeout=30\n");
            let w = LoadedWorkload {
                name: "link".into(),
                shards: vec![Shard {
                    file: "link.vsl".into(),
                    sessions: vodlab_workload::script::parse_script(&text)
                        .unwrap()
                        .sessions,
                    streamed: Vec::new(),
                }],
                classes: classes.clone(),
                ..LoadedWorkload::default()
            };
            let addr = format!("127.0.0.1:{port}").parse().unwrap();
            let scheme = if proto.is_tls() { "https" } else { "http" };
            let mut cfg = RunConfig::new(
                addr,
                format!("localhost:{port}"),
                format!("{scheme}://localhost:{port}"),
                Arrivals::Constant { rate: 1.0 },
            );
            cfg.interval_s = 1.0;
            cfg.transport.protocol = proto;
            cfg.transport.tls = TlsOptions {
                ca: Some(ca.clone()),
                insecure: false,
            };
            let (_tx, rx) = tokio::sync::watch::channel(false);
            let r = rt
                .block_on(vodlab_client::run(
                    Arc::new(w),
                    cfg,
                    Arc::new(Live::default()),
                    rx,
                ))
                .unwrap();
            assert_eq!(r.failed_sessions, 0, "{proto} {class}: {}", r.table());
            if check == 0 {
                // 250,000 bytes at 500,000 bytes/s
                let secs = r.response_time_ms.p50 / 1e3;
                assert!((0.42..0.75).contains(&secs), "{proto} {class}: {secs} s");
            } else {
                let ttfb = r.ttfb_ms.p50;
                assert!(
                    (190.0..260.0).contains(&ttfb),
                    "{proto} {class}: ttfb {ttfb} ms"
                );
            }
        }
    }
}
