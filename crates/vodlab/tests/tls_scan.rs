//! `vodlab serve --tls-self-signed` scanned by a real TLS scanner, Debian's
//! `testssl.sh` (3.0.8): TLS 1.2 and 1.3 only, only AEAD suites with
//! forward secrecy, no vulnerability testssl.sh knows, and no finding rated
//! MEDIUM or worse except the two a self-signed certificate cannot avoid
//! (docs/serve.md, "TLS and HTTP/2", has the scan and the command).
//!
//! Three scans run side by side against one server (testssl.sh spends most
//! of its time waiting on its own sockets, so in parallel the test takes
//! 27-41 s here rather than ~80 s): protocols, cipher categories, forward secrecy
//! and the suites per protocol (`-p -s -f -E`); the server's defaults and
//! certificate (`-S`); the vulnerability checks (`-U`). Loopback only: the
//! target is given as `--ip 127.0.0.1` with `--nodns none` (no DNS query)
//! and testssl.sh's `--phone-out` (CRL/OCSP fetches) stays off.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use vodlab_testkit::require;

/// Protocols and what testssl.sh must find for each (`-p`): the start of
/// the finding (TLS 1.3 reads "offered with final").
const PROTOCOLS: [(&str, &str); 6] = [
    ("SSLv2", "not offered"),
    ("SSLv3", "not offered"),
    ("TLS1", "not offered"),
    ("TLS1_1", "not offered"),
    ("TLS1_2", "offered"),
    ("TLS1_3", "offered"),
];

/// Cipher categories (`-s`): none weak offered, strong ones offered.
const CATEGORIES: [(&str, &str); 7] = [
    ("cipherlist_NULL", "not offered"),
    ("cipherlist_aNULL", "not offered"),
    ("cipherlist_EXPORT", "not offered"),
    ("cipherlist_LOW", "not offered"),
    ("cipherlist_3DES_IDEA", "not offered"),
    ("cipherlist_AVERAGE", "not offered"),
    ("cipherlist_STRONG", "offered"),
];

/// The suites offered (`-E`, ids `cipher-<protocol>_x<code>`): rustls's
/// ring defaults with an ECDSA key, all AEAD with ECDHE. TLS 1.3:
/// AES-256-GCM, ChaCha20-Poly1305, AES-128-GCM; TLS 1.2:
/// ECDHE-ECDSA with the same three.
const SUITES: [&str; 6] = [
    "tls1_2_xc02b", // ECDHE-ECDSA-AES128-GCM-SHA256
    "tls1_2_xc02c", // ECDHE-ECDSA-AES256-GCM-SHA384
    "tls1_2_xcca9", // ECDHE-ECDSA-CHACHA20-POLY1305
    "tls1_3_x1301", // TLS_AES_128_GCM_SHA256
    "tls1_3_x1302", // TLS_AES_256_GCM_SHA384
    "tls1_3_x1303", // TLS_CHACHA20_POLY1305_SHA256
];

/// The vulnerability checks (`-U`): each must be present and rated OK or
/// INFO.
const VULNERABILITIES: [&str; 18] = [
    "heartbleed",
    "CCS",
    "ticketbleed",
    "ROBOT",
    "secure_renego",
    "secure_client_renego",
    "CRIME_TLS",
    "BREACH",
    "POODLE_SSL",
    "fallback_SCSV",
    "SWEET32",
    "FREAK",
    "DROWN",
    "LOGJAM",
    "LOGJAM-common_primes",
    "BEAST",
    "LUCKY13",
    "RC4",
];

/// Server-default findings (`-S`) that must be rated OK or INFO (nothing to
/// say): the certificate's algorithm, key size, validity period (a year,
/// `tls::SELF_SIGNED_VALIDITY`; rcgen's default of 2,000 years was rated
/// HIGH) and expiry, and its name matching the host.
const DEFAULTS_OK: [&str; 5] = [
    "cert_signatureAlgorithm",
    "cert_keySize",
    "cert_validityPeriod",
    "cert_expirationStatus",
    "cert_trust",
];

/// The findings rated MEDIUM or worse that a self-signed test certificate
/// cannot avoid, and the only ones allowed: no CA signed it
/// (`cert_chain_of_trust`, CRITICAL) and it names no CRL or OCSP responder
/// (`cert_revocation`, HIGH). A certificate given with `--tls-cert` from a
/// real CA has both.
const SELF_SIGNED_ONLY: [&str; 2] = ["cert_chain_of_trust", "cert_revocation"];

/// Severities that fail the scan (testssl.sh rates LOW < MEDIUM < HIGH <
/// CRITICAL; WARN means a check could not run).
const BAD: [&str; 3] = ["MEDIUM", "HIGH", "CRITICAL"];

/// One testssl.sh finding (its flat JSON, `--jsonfile`).
#[derive(Debug, Clone)]
struct Finding {
    severity: String,
    finding: String,
}

/// A running testssl.sh scan: its child, its JSON file and its log.
struct Scan {
    what: &'static str,
    child: Child,
    json: PathBuf,
    log: PathBuf,
}

impl Scan {
    /// Starts `testssl.sh CHECKS` against the server, on loopback only.
    fn start(testssl: &Path, dir: &Path, what: &'static str, checks: &[&str], port: u16) -> Self {
        let json = dir.join(format!("{what}.json"));
        let log = dir.join(format!("{what}.log"));
        let child = Command::new(testssl)
            .args(["--quiet", "--color", "0", "--warnings", "off"])
            .args(["--ip", "127.0.0.1", "--nodns", "none"])
            .args(["--openssl-timeout", "10"])
            .arg("--jsonfile")
            .arg(&json)
            .args(checks)
            .arg(format!("localhost:{port}"))
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        Self {
            what,
            child,
            json,
            log,
        }
    }

    /// Waits for the scan (at most `limit`, else it is killed by PID and
    /// the test fails) and reads its findings by id.
    fn finish(mut self, limit: Duration) -> BTreeMap<String, Finding> {
        let t0 = Instant::now();
        let status = loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                break s;
            }
            if t0.elapsed() > limit {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!("testssl.sh {} took longer than {limit:?}", self.what);
            }
            std::thread::sleep(Duration::from_millis(100));
        };
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        // testssl.sh's exit status on a finished scan is the sum of its checks'
        // return values, not 0 when something was found (the JSON says what);
        // 242 and above are its own errors (connect problem, bad options...)
        assert!(
            status.code().is_some_and(|c| c < 242),
            "testssl.sh {} failed ({status}):\n{log}",
            self.what
        );
        let text = std::fs::read_to_string(&self.json).unwrap_or_else(|e| {
            panic!(
                "testssl.sh {} ({status}) wrote no {}: {e}\n{log}",
                self.what,
                self.json.display()
            )
        });
        let all: serde_json::Value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("testssl.sh {} JSON: {e}\n{text}", self.what));
        let mut by_id = BTreeMap::new();
        for f in all.as_array().expect("a JSON array of findings") {
            let field = |k: &str| f[k].as_str().unwrap_or_default().to_string();
            by_id.insert(
                field("id"),
                Finding {
                    severity: field("severity"),
                    finding: field("finding"),
                },
            );
        }
        assert!(
            by_id.contains_key("scanTime"),
            "testssl.sh {} did not finish its scan ({status}):\n{log}",
            self.what
        );
        by_id
    }
}

#[test]
fn testssl_finds_only_tls12_and_tls13_with_aead_forward_secret_suites() {
    let testssl = require("testssl", "testssl.sh");
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    std::fs::create_dir(&root).unwrap();
    std::fs::write(root.join("index.html"), "vodlab\n").unwrap();
    let server = common::ServeChild::start(&root, &["--tls-self-signed"]);

    let t0 = Instant::now();
    let scans = [
        Scan::start(
            &testssl,
            dir.path(),
            "ciphers",
            &["-p", "-s", "-f", "-E"],
            server.port,
        ),
        Scan::start(&testssl, dir.path(), "defaults", &["-S"], server.port),
        Scan::start(
            &testssl,
            dir.path(),
            "vulnerabilities",
            &["-U"],
            server.port,
        ),
    ];
    let mut found = BTreeMap::new();
    for s in scans {
        found.extend(s.finish(Duration::from_secs(300)));
    }
    eprintln!("testssl.sh: three scans in {:?}", t0.elapsed());
    drop(server);

    let get = |id: &str| -> &Finding {
        found
            .get(id)
            .unwrap_or_else(|| panic!("testssl.sh reported no `{id}` (testssl.sh 3.0.8's ids)"))
    };
    for (id, want) in PROTOCOLS.iter().chain(CATEGORIES.iter()) {
        let f = get(id);
        assert!(
            f.finding.starts_with(want) && f.severity != "WARN",
            "{id}: {f:?}, want `{want}`"
        );
    }
    let pfs = get("PFS");
    assert!(
        pfs.finding.starts_with("offered") && pfs.severity == "OK",
        "PFS: {pfs:?}"
    );

    let suites: BTreeSet<&str> = found
        .keys()
        .filter_map(|id| id.strip_prefix("cipher-"))
        .collect();
    assert_eq!(
        suites,
        SUITES.iter().copied().collect(),
        "the suites offered (testssl.sh -E)"
    );
    for s in &suites {
        let line = &get(&format!("cipher-{s}")).finding;
        assert!(
            line.contains("ECDH") && (line.contains("GCM") || line.contains("CHACHA20")),
            "{s}: not an ECDHE AEAD suite: {line}"
        );
        eprintln!("  {line}");
    }

    for id in VULNERABILITIES.iter().chain(DEFAULTS_OK.iter()) {
        let f = get(id);
        assert!(
            f.severity == "OK" || f.severity == "INFO",
            "{id}: {f:?} (testssl.sh -U or -S)"
        );
    }

    let bad: Vec<(&String, &Finding)> = found
        .iter()
        .filter(|(id, f)| {
            BAD.contains(&f.severity.as_str()) && !SELF_SIGNED_ONLY.contains(&id.as_str())
        })
        .collect();
    assert!(bad.is_empty(), "findings rated MEDIUM or worse: {bad:#?}");
    for (id, f) in &found {
        if BAD.contains(&f.severity.as_str()) || f.severity == "WARN" || f.severity == "LOW" {
            eprintln!("  {id} {}: {}", f.severity, f.finding);
        }
    }
}
