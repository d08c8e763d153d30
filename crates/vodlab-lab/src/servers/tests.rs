//! Tests of `servers`.

use super::*;

fn setup(kind: ServerKind) -> ServerSetup {
    ServerSetup {
        kind,
        root: "/srv/files".into(),
        addr: "127.0.0.1:18080".parse().unwrap(),
        workdir: "/tmp/w".into(),
        vodlab: "vodlab".into(),
        workers: 2,
        vodlab_args: vec![],
        protocol: Protocol::H1,
        tls: None,
        backend: None,
    }
}

#[test]
fn configs_carry_the_papers_tuning() {
    let n = config_text(&setup(ServerKind::Nginx)).unwrap();
    for want in [
        "sendfile on;",
        "keepalive_timeout 60s;",
        "keepalive_requests 1000000000;",
        "worker_processes 2;",
        "listen 127.0.0.1:18080;",
        "root /srv/files;",
        "access_log off;",
    ] {
        assert!(n.contains(want), "nginx lacks {want}:\n{n}");
    }
    let a = config_text(&setup(ServerKind::Apache2)).unwrap();
    for want in [
        "EnableSendfile On",
        "KeepAliveTimeout 60",
        "MaxKeepAliveRequests 0",
        "Listen 127.0.0.1:18080",
        "DocumentRoot /srv/files",
        "mod_mpm_event.so",
    ] {
        assert!(a.contains(want), "apache lacks {want}:\n{a}");
    }
    let l = config_text(&setup(ServerKind::Lighttpd)).unwrap();
    for want in [
        "network-backend = \"sendfile\"",
        "max-keep-alive-idle = 60",
        "server.port = 18080",
        "document-root = \"/srv/files\"",
    ] {
        assert!(l.contains(want), "lighttpd lacks {want}:\n{l}");
    }
    assert!(config_text(&setup(ServerKind::VodlabAsap)).is_none());
}

#[test]
fn configs_listen_for_the_protocol() {
    let tls = TlsFiles {
        ca: "/c/ca.pem".into(),
        cert: "/c/cert.pem".into(),
        key: "/c/key.pem".into(),
    };
    let with = |kind, protocol| ServerSetup {
        protocol,
        tls: Some(tls.clone()),
        ..setup(kind)
    };
    let n = |p| config_text(&with(ServerKind::Nginx, p)).unwrap();
    assert!(n(Protocol::H1).contains("listen 127.0.0.1:18080;"));
    assert!(!n(Protocol::H1).contains("ssl"));
    assert!(n(Protocol::H2c).contains("listen 127.0.0.1:18080 http2;"));
    assert!(n(Protocol::Https).contains("listen 127.0.0.1:18080 ssl;"));
    let h2 = n(Protocol::H2);
    assert!(h2.contains("listen 127.0.0.1:18080 ssl http2;"), "{h2}");
    assert!(h2.contains("ssl_certificate /c/cert.pem;"), "{h2}");
    assert!(h2.contains("ssl_certificate_key /c/key.pem;"), "{h2}");
    let a = |p| config_text(&with(ServerKind::Apache2, p)).unwrap();
    assert!(a(Protocol::H1).contains("Protocols http/1.1\n"));
    assert!(!a(Protocol::H1).contains("mod_ssl"));
    assert!(a(Protocol::H2c).contains("Protocols h2c http/1.1"));
    assert!(a(Protocol::H2c).contains("mod_http2.so"));
    let ah2 = a(Protocol::H2);
    for want in [
        "mod_ssl.so",
        "SSLEngine on",
        "SSLCertificateFile /c/cert.pem",
        "Protocols h2 http/1.1",
    ] {
        assert!(ah2.contains(want), "apache h2 lacks {want}:\n{ah2}");
    }
    let l = config_text(&with(ServerKind::Lighttpd, Protocol::H2c)).unwrap();
    assert!(l.contains("\"server.h2c\" => \"enable\""), "{l}");
    // vodlab serve gets the certificate for TLS only
    let args = |p| {
        let d = tempfile::tempdir().unwrap();
        let s = ServerSetup {
            workdir: d.path().into(),
            ..with(ServerKind::VodlabAsap, p)
        };
        let c = command(&s).unwrap();
        c.get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect::<Vec<_>>()
    };
    assert!(args(Protocol::H2)
        .windows(2)
        .any(|w| w == ["--tls-cert", "/c/cert.pem"]));
    assert!(!args(Protocol::H2c).iter().any(|a| a == "--tls-cert"));
    // TLS without a certificate is refused before anything starts
    let d = tempfile::tempdir().unwrap();
    let e = command(&ServerSetup {
        workdir: d.path().into(),
        protocol: Protocol::Https,
        ..setup(ServerKind::Nginx)
    })
    .unwrap_err();
    assert!(e.to_string().contains("no certificate"), "{e}");
}

#[test]
fn nghttpx_fronts_a_vodlab_backend() {
    let d = tempfile::tempdir().unwrap();
    let tls = TlsFiles {
        ca: "/c/ca.pem".into(),
        cert: "/c/cert.pem".into(),
        key: "/c/key.pem".into(),
    };
    let s = ServerSetup {
        kind: ServerKind::Nghttpx,
        workdir: d.path().into(),
        backend: Some("127.0.0.1:18081".parse().unwrap()),
        vodlab_args: vec!["--prefetch-policy".into(), "fixed:2M".into()],
        ..setup(ServerKind::Nghttpx)
    };
    let mut c = Command::new("nghttpx");
    nghttpx_args(&s, &mut c).unwrap();
    let args: Vec<String> = c
        .get_args()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    for want in [
        "--frontend=127.0.0.1,18080;no-tls",
        "--backend=127.0.0.1,18081",
        "--workers=2",
    ] {
        assert!(args.iter().any(|a| a == want), "{want}: {args:?}");
    }
    let mut c = Command::new("nghttpx");
    nghttpx_args(
        &ServerSetup {
            protocol: Protocol::H2,
            tls: Some(tls),
            ..s.clone()
        },
        &mut c,
    )
    .unwrap();
    let args: Vec<String> = c
        .get_args()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    assert!(
        args.iter().any(|a| a == "--frontend=127.0.0.1,18080"),
        "{args:?}"
    );
    assert_eq!(args[args.len() - 2..], ["/c/key.pem", "/c/cert.pem"]);
    // the backend: vodlab serve asap on its own port with the row's policy
    let b = backend_command(&s).unwrap().unwrap();
    let bargs: Vec<String> = b
        .get_args()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    assert!(
        bargs
            .windows(2)
            .any(|w| w == ["--listen", "127.0.0.1:18081"]),
        "{bargs:?}"
    );
    assert!(bargs.windows(2).any(|w| w == ["--io", "asap"]));
    assert!(bargs
        .windows(2)
        .any(|w| w == ["--prefetch-policy", "fixed:2M"]));
    assert!(backend_command(&setup(ServerKind::Nginx))
        .unwrap()
        .is_none());
}

#[test]
fn who_speaks_what() {
    for p in Protocol::ALL {
        for k in [
            ServerKind::VodlabAsap,
            ServerKind::VodlabVanilla,
            ServerKind::Nginx,
        ] {
            assert_eq!(k.unsupported(p), None, "{k:?} {p}");
        }
    }
    for k in ServerKind::ALL {
        if k == ServerKind::Ngtcp2 {
            let why = k.unsupported(Protocol::H1).unwrap();
            assert!(why.contains("only HTTP/3"), "{why}");
        } else {
            assert_eq!(k.unsupported(Protocol::H1), None, "{k:?}");
        }
    }
    assert_eq!(ServerKind::Lighttpd.unsupported(Protocol::H2c), None);
    // over h3: vodlab's rows and ngtcp2 (when installed); each Debian TCP
    // server says why not
    for k in [ServerKind::VodlabAsap, ServerKind::VodlabVanilla] {
        assert_eq!(k.unsupported(Protocol::H3), None);
    }
    assert_eq!(
        ServerKind::Ngtcp2.unsupported(Protocol::H3).is_none(),
        Path::new(NGTCP2_SERVER).exists()
    );
    for (k, says) in [
        (ServerKind::Nginx, "1.22 has no HTTP/3"),
        (ServerKind::Apache2, "no HTTP/3"),
        (ServerKind::Lighttpd, "no HTTP/3"),
        (ServerKind::Nghttpx, "without QUIC"),
    ] {
        let why = k.unsupported(Protocol::H3).unwrap();
        assert!(why.contains(says), "{k:?}: {why}");
    }
    // the default rows: ngtcp2 over h3 only
    assert!(ServerKind::defaults(Protocol::H3).contains(&ServerKind::Ngtcp2));
    for p in Protocol::ALL {
        assert!(
            !ServerKind::defaults(p).contains(&ServerKind::Ngtcp2),
            "{p}"
        );
    }
    let why = ServerKind::Lighttpd.unsupported(Protocol::H2).unwrap();
    assert!(
        why.contains("lighttpd over h2") && why.contains("lighttpd-mod-openssl"),
        "{why}"
    );
}

/// ngtcp2's example server: the file set as its document root, the
/// address and port as two arguments, then key and certificate; vodlab
/// over h3 adds `--h3` to its TLS flags.
#[test]
fn h3_rows_are_started_with_quic() {
    let d = tempfile::tempdir().unwrap();
    let tls = TlsFiles {
        ca: "/c/ca.pem".into(),
        cert: "/c/cert.pem".into(),
        key: "/c/key.pem".into(),
    };
    let h3 = |kind| ServerSetup {
        workdir: d.path().into(),
        protocol: Protocol::H3,
        tls: Some(tls.clone()),
        ..setup(kind)
    };
    let args = |c: &Command| -> Vec<String> {
        c.get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    };
    if Path::new(NGTCP2_SERVER).exists() {
        let a = args(&command(&h3(ServerKind::Ngtcp2)).unwrap());
        assert_eq!(
            a,
            [
                "-q",
                "-d",
                "/srv/files",
                "--timeout=60s",
                "127.0.0.1",
                "18080",
                "/c/key.pem",
                "/c/cert.pem"
            ]
        );
    }
    let v = args(&command(&h3(ServerKind::VodlabAsap)).unwrap());
    assert!(v.iter().any(|a| a == "--h3"), "{v:?}");
    assert!(
        v.windows(2).any(|w| w == ["--tls-key", "/c/key.pem"]),
        "{v:?}"
    );
}

/// A bound UDP socket is seen in /proc/net/udp, on its own address or on
/// the unspecified one; a port nobody holds is not.
#[test]
fn udp_bound_reads_the_kernels_table() {
    let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let a = s.local_addr().unwrap();
    assert!(udp_bound(a));
    let any = std::net::UdpSocket::bind("0.0.0.0:0").unwrap();
    let port = any.local_addr().unwrap().port();
    assert!(udp_bound(SocketAddr::from(([127, 0, 0, 1], port))));
    drop(s);
    assert!(!udp_bound(a));
    if let Ok(s6) = std::net::UdpSocket::bind("[::1]:0") {
        assert!(udp_bound(s6.local_addr().unwrap()));
    }
}

#[test]
fn names_round_trip() {
    for k in ServerKind::ALL {
        assert_eq!(ServerKind::parse(k.name()).unwrap(), k);
    }
    assert!(ServerKind::parse("iis")
        .unwrap_err()
        .to_string()
        .contains("lighttpd"));
}
