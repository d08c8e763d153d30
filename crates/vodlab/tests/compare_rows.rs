//! `vodlab compare` rows that are configurations of `vodlab serve`
//! (`vodlab-asap:fixed:2M`, ...), the additive search, and `--protocol`
//! with servers configured for it (and skipped, with the reason, when they
//! cannot speak it). Tiny workloads, one or two points per row.

mod common;

use std::path::Path;

use common::{readable_tempdir, require, vodlab, vodlab_ok};

fn json(p: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
        .expect("JSON")
}

/// Asserts that `v` follows `docs/<schema>`.
fn assert_schema(schema: &str, v: &serde_json::Value) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../docs")
        .join(schema);
    let validator = jsonschema::validator_for(&json(&path)).expect("schema compiles");
    let errors: Vec<String> = validator
        .iter_errors(v)
        .map(|e| format!("{e} at {}", e.instance_path))
        .collect();
    assert!(errors.is_empty(), "{}: {errors:#?}", path.display());
}

/// A tiny workload (8 titles, ~130 MB) and its real file set, in a
/// directory the Debian servers' www-data workers can read.
fn tiny(dir: &Path) -> (String, String) {
    let w = dir.join("w");
    let root = dir.join("files");
    vodlab_ok(&[
        "gen",
        "--preset",
        "youtube-2011-2mb",
        "--scale",
        "0.002",
        "--sessions",
        "40",
        "--titles",
        "8",
        "-o",
        w.to_str().unwrap(),
    ]);
    vodlab_ok(&[
        "fileset",
        "create",
        w.to_str().unwrap(),
        "--root",
        root.to_str().unwrap(),
    ]);
    (w.display().to_string(), root.display().to_string())
}

/// compare's arguments for one workload: no box, no sequential bound,
/// unpaced, 2 s windows from 2 sessions/s.
fn args<'a>(w: &'a str, root: &'a str, port: &'a str, out: &'a str) -> Vec<&'a str> {
    vec![
        "compare",
        w,
        "--root",
        root,
        "--port",
        port,
        "--no-box",
        "--no-seqread",
        "--no-pacing",
        "--no-shaping",
        "--window",
        "2",
        "--drain",
        "10",
        "--pause",
        "0.2",
        "--quiet",
        "--late-threshold-ms",
        "1000",
        "-o",
        out,
    ]
}

/// The results.json of a row's first run (its search's first point), in
/// the row's directory (where its capacity.json is).
fn first_run(out: &Path, row: &serde_json::Value) -> serde_json::Value {
    let cap_json = row["capacity_json"].as_str().unwrap();
    let cap = json(&out.join(cap_json));
    let run = cap["search"]["points"][0]["runs"][0]["extra"]["results"]
        .as_str()
        .unwrap();
    let dir = cap_json.trim_end_matches("capacity.json");
    json(&out.join(dir).join(run).join("results.json"))
}

fn row<'a>(cmp: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    cmp["servers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["server"] == name)
        .unwrap_or_else(|| panic!("no row {name}: {cmp}"))
}

/// Two configurations of `vodlab serve` are two rows, each its own server
/// with its own policy (the server's statistics say which it ran), searched
/// additively: 2 then 4 sessions/s.
#[test]
fn two_prefetch_sizes_are_two_rows_searched_additively() {
    let d = readable_tempdir("vodlab-rows-");
    let (w, root) = tiny(d.path());
    let out = d.path().join("cmp");
    let port = common::free_port().to_string();
    let mut a = args(&w, &root, &port, out.to_str().unwrap());
    a.extend([
        "--servers",
        "vodlab-asap:fixed:2M,vodlab-asap:fixed:512K",
        "--search",
        "additive:2:2",
        "--max-points",
        "2",
    ]);
    let stdout = vodlab_ok(&a);
    assert!(stdout.contains("vodlab-asap:fixed:2M "), "{stdout}");
    assert!(stdout.contains("vodlab-asap:fixed:512K "), "{stdout}");
    let cmp = json(&out.join("compare.json"));
    assert_schema("compare.schema.json", &cmp);
    assert_eq!(cmp["complete"], true);
    assert_eq!(cmp["protocol"], "h1");
    let names: Vec<&str> = cmp["servers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["server"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["vodlab-asap:fixed:2M", "vodlab-asap:fixed:512K"]);
    for (name, policy, bytes) in [
        ("vodlab-asap:fixed:2M", "fixed:2M", 2u64 << 20),
        ("vodlab-asap:fixed:512K", "fixed:512K", 512 << 10),
    ] {
        let r = row(&cmp, name);
        assert!(r["error"].is_null(), "{name}: {r}");
        assert_eq!(r["kind"], "vodlab-asap");
        assert_eq!(r["prefetch_policy"], policy);
        let cap = json(&out.join(r["capacity_json"].as_str().unwrap()));
        assert_schema("capacity.schema.json", &cap);
        assert_eq!(cap["server"], name);
        assert_eq!(cap["search"]["config"]["mode"], "additive");
        let rates: Vec<f64> = cap["search"]["points"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["rate"].as_f64().unwrap())
            .collect();
        assert_eq!(rates, [2.0, 4.0], "{name}: additive steps of 2");
        // the server that ran this row had the row's policy
        let stats = &cap["search"]["points"][0]["runs"][0]["extra"]["server_stats_after"];
        assert_eq!(stats["prefetch_policy"], policy, "{name}: {stats}");
        assert_eq!(stats["prefetch_bytes"], bytes, "{name}");
    }
}

/// `--protocol h2`: vodlab serve, nginx and nghttpx (in front of a
/// `vodlab serve` backend with the row's policy) listen for TLS with the
/// run's certificate and ALPN h2 (the client trusts the run's CA), lighttpd
/// is skipped with the reason.
#[test]
fn h2_over_vodlab_serve_nginx_and_nghttpx() {
    require("nginx", "nginx-light");
    require("nghttpx", "nghttp2-proxy");
    let d = readable_tempdir("vodlab-rows-");
    let (w, root) = tiny(d.path());
    let out = d.path().join("cmp");
    let port = common::free_port().to_string();
    let mut a = args(&w, &root, &port, out.to_str().unwrap());
    a.extend([
        "--servers",
        "vodlab-asap,nginx,nghttpx:fixed:1M,lighttpd",
        "--protocol",
        "h2",
        "--start",
        "2",
        "--max-points",
        "1",
    ]);
    let stdout = vodlab_ok(&a);
    assert!(stdout.contains("protocol: h2"), "{stdout}");
    assert!(stdout.contains("skipped: lighttpd over h2"), "{stdout}");
    let cmp = json(&out.join("compare.json"));
    assert_schema("compare.schema.json", &cmp);
    assert_eq!(cmp["protocol"], "h2");
    for name in ["vodlab-asap", "nginx", "nghttpx:fixed:1M"] {
        let r = row(&cmp, name);
        assert!(r["error"].is_null(), "{name}: {r}");
        assert_eq!(r["answer"]["capacity"], 2.0, "{name}: {r}");
        let res = first_run(&out, r);
        assert_eq!(res["protocol"], "h2", "{name}");
        assert!(
            res["transport"]["tls_handshakes"].as_u64().unwrap() > 0,
            "{name}: {}",
            res["transport"]
        );
        assert!(res["target"].as_str().unwrap().starts_with("https://"));
    }
    let nginx_conf =
        std::fs::read_to_string(out.join("nginx").join("server").join("nginx.conf")).unwrap();
    assert!(nginx_conf.contains(" ssl http2;"), "{nginx_conf}");
    // nghttpx's backend ran the row's policy
    let ng = row(&cmp, "nghttpx:fixed:1M");
    assert_eq!(ng["kind"], "nghttpx");
    assert_eq!(ng["prefetch_policy"], "fixed:1M");
    let backend = std::fs::read_to_string(
        out.join("nghttpx_fixed_1M")
            .join("server")
            .join("backend.log"),
    )
    .unwrap();
    assert!(backend.contains("prefetch policy fixed:1M"), "{backend}");
    // and its statistics were fetched from the backend past the TLS proxy
    let cap = json(&out.join("nghttpx_fixed_1M").join("capacity.json"));
    let stats = &cap["search"]["points"][0]["runs"][0]["extra"]["server_stats_after"];
    assert_eq!(stats["prefetch_policy"], "fixed:1M", "{stats}");
    let l = row(&cmp, "lighttpd");
    assert_eq!(l["outcome"]["kind"], "skipped");
    assert!(l["outcome"]["reason"]
        .as_str()
        .unwrap()
        .contains("lighttpd-mod-openssl"));
    assert!(
        !out.join("lighttpd").exists(),
        "a skipped row starts nothing"
    );
}

/// `--protocol h2c`: every server compare knows takes HTTP/2 by prior
/// knowledge on its plain port (nginx 1.22's `listen ... http2`, apache2's
/// mod_http2 with H2Direct, lighttpd's h2c feature flag, nghttpx's
/// cleartext frontend) and serves the point.
#[test]
fn h2c_over_every_server() {
    for (p, pkg) in [
        ("nginx", "nginx-light"),
        ("apache2", "apache2"),
        ("lighttpd", "lighttpd"),
        ("nghttpx", "nghttp2-proxy"),
    ] {
        require(p, pkg);
    }
    let d = readable_tempdir("vodlab-rows-");
    let (w, root) = tiny(d.path());
    let out = d.path().join("cmp");
    let port = common::free_port().to_string();
    let mut a = args(&w, &root, &port, out.to_str().unwrap());
    a.extend([
        "--servers",
        "vodlab-asap,vodlab-vanilla,nginx,apache2,lighttpd,nghttpx",
        "--protocol",
        "h2c",
        "--start",
        "2",
        "--max-points",
        "1",
    ]);
    vodlab_ok(&a);
    let cmp = json(&out.join("compare.json"));
    assert_schema("compare.schema.json", &cmp);
    assert_eq!(cmp["protocol"], "h2c");
    assert_eq!(cmp["servers"].as_array().unwrap().len(), 6);
    for r in cmp["servers"].as_array().unwrap() {
        let name = r["server"].as_str().unwrap();
        assert!(r["error"].is_null(), "{name}: {r}");
        assert_eq!(r["answer"]["capacity"], 2.0, "{name}: {r}");
        let res = first_run(&out, r);
        assert_eq!(res["protocol"], "h2c", "{name}");
        assert!(res["completed_requests"].as_u64().unwrap() > 0, "{name}");
    }
}

/// `--protocol h3` without `--servers`: vodlab's two rows (`serve --h3`,
/// QUIC on the same port number) and ngtcp2's example server serve the
/// point over QUIC, with every request answered and every byte counted;
/// nginx, apache2, lighttpd and nghttpx are rows that say why they cannot
/// (none of Debian 12's speaks HTTP/3) and start nothing. A workload of
/// byte ranges skips ngtcp2 (it answers no `Range`), counting them.
#[test]
fn h3_over_vodlab_serve_and_ngtcp2() {
    require("gtlsserver", "ngtcp2-server");
    let d = readable_tempdir("vodlab-rows-");
    let (w, root) = tiny(d.path());
    let out = d.path().join("cmp");
    let port = common::free_port().to_string();
    let mut a = args(&w, &root, &port, out.to_str().unwrap());
    a.extend(["--protocol", "h3", "--start", "2", "--max-points", "1"]);
    let stdout = vodlab_ok(&a);
    assert!(stdout.contains("protocol: h3"), "{stdout}");
    // the table's reference is the peer that speaks h3: each row's rate
    // over ngtcp2's (2 sessions/s each here)
    assert!(stdout.contains("x ngtcp2"), "{stdout}");
    let line = stdout
        .lines()
        .find(|l| l.starts_with("vodlab-asap "))
        .unwrap();
    let cols: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(&cols[1..3], ["2.000", "1.00"], "{line}");
    let cmp = json(&out.join("compare.json"));
    assert_schema("compare.schema.json", &cmp);
    assert_eq!(cmp["protocol"], "h3");
    let names: Vec<&str> = cmp["servers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["server"].as_str().unwrap())
        .collect();
    for name in ["vodlab-asap", "vodlab-vanilla", "ngtcp2"] {
        let r = row(&cmp, name);
        assert!(r["error"].is_null(), "{name}: {r}");
        assert_eq!(r["answer"]["capacity"], 2.0, "{name}: {r}");
        let res = first_run(&out, r);
        assert_eq!(res["protocol"], "h3", "{name}");
        assert!(res["target"].as_str().unwrap().starts_with("https://"));
        let done = res["completed_requests"].as_u64().unwrap();
        assert!(done > 0, "{name}: {res}");
        let errors: u64 = res["errors"]
            .as_object()
            .unwrap()
            .values()
            .map(|v| v.as_u64().unwrap())
            .sum();
        assert_eq!(errors, 0, "{name}: {}", res["errors"]);
        let q = &res["transport"]["quic"];
        assert!(q["packets_sent"].as_u64().unwrap() > 0, "{name}: {q}");
        assert_eq!(
            res["transport"]["tls_handshakes"], res["transport"]["connections"],
            "{name}: one QUIC handshake per connection"
        );
    }
    // vodlab's rows also answered over h3 by their own count
    let cap = json(&out.join("vodlab-asap").join("capacity.json"));
    let stats = &cap["search"]["points"][0]["runs"][0]["extra"]["server_stats_after"];
    assert!(stats["h3"]["requests"].as_u64().unwrap() > 0, "{stats}");
    for (name, says) in [
        ("nginx", "no HTTP/3"),
        ("apache2", "no HTTP/3"),
        ("lighttpd", "no HTTP/3"),
        ("nghttpx", "without QUIC"),
    ] {
        let r = row(&cmp, name);
        assert_eq!(r["outcome"]["kind"], "skipped", "{name}: {r}");
        let why = r["outcome"]["reason"].as_str().unwrap();
        assert!(why.contains(says), "{name}: {why}");
        assert!(
            !out.join(name).exists(),
            "{name}: a skipped row starts nothing"
        );
    }
    assert_eq!(names.len(), 7, "{names:?}");
    // byte ranges: ngtcp2 is skipped, with their count
    let wr = d.path().join("wr");
    vodlab_ok(&[
        "gen",
        "--preset",
        "youtube-2011-unchunked",
        "--scale",
        "0.002",
        "--sessions",
        "5",
        "--titles",
        "4",
        "-o",
        wr.to_str().unwrap(),
    ]);
    let root2 = d.path().join("files2");
    vodlab_ok(&[
        "fileset",
        "create",
        wr.to_str().unwrap(),
        "--root",
        root2.to_str().unwrap(),
    ]);
    let out2 = d.path().join("cmp2");
    let mut a = args(
        wr.to_str().unwrap(),
        root2.to_str().unwrap(),
        &port,
        out2.to_str().unwrap(),
    );
    a.extend(["--protocol", "h3", "--servers", "ngtcp2"]);
    let stdout = vodlab_ok(&a);
    let cmp = json(&out2.join("compare.json"));
    let r = row(&cmp, "ngtcp2");
    assert_eq!(r["outcome"]["kind"], "skipped", "{stdout}\n{r}");
    let why = r["outcome"]["reason"].as_str().unwrap();
    assert!(
        why.contains("answers no Range") && why.contains("byte ranges"),
        "{why}"
    );
}

/// Bad rows are refused before anything runs, naming the row.
#[test]
fn bad_rows_are_named() {
    for (servers, says) in [
        (
            "nginx,vodlab-asap:fixed:2Q",
            "compare row `vodlab-asap:fixed:2Q`",
        ),
        ("vodlab-asap:lru", "unknown policy `lru`"),
        ("nginx:fixed:2M", "nginx takes no prefetch policy"),
        (
            "vodlab-asap:auto:busy=7",
            "compare row `vodlab-asap:auto:busy=7`",
        ),
        ("nginx,nginx", "given twice"),
    ] {
        let o = vodlab(&[
            "compare",
            "/nonexistent",
            "--root",
            "/nonexistent",
            "--servers",
            servers,
        ]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{servers}");
        assert!(err.contains(says), "{servers}: {err}");
    }
    let o = vodlab(&[
        "compare",
        "/nonexistent",
        "--root",
        "/nonexistent",
        "--servers",
        "vodlab-asap:fixed:2M",
        "--serve-arg=--prefetch-policy=fixed:4M",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("give it in one place"), "{err}");
}

/// A port another process listens on is refused, not measured: a readiness
/// probe would reach that process (here this test's own listener, standing
/// in for a second `vodlab compare` on the same `--port`), and every figure
/// of the row would be its. The row says why and nothing was measured.
#[test]
fn a_taken_port_is_refused_not_measured() {
    let d = readable_tempdir("vodlab-rows-");
    let (w, root) = tiny(d.path());
    let out = d.path().join("cmp");
    let stranger = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = stranger.local_addr().unwrap().port().to_string();
    let mut a = args(&w, &root, &port, out.to_str().unwrap());
    a.extend(["--servers", "vodlab-asap", "--max-points", "1"]);
    let o = vodlab(&a);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let said = "is already taken by another process";
    let cmp = out.join("compare.json");
    let row_error = cmp
        .exists()
        .then(|| json(&cmp))
        .and_then(|c| row(&c, "vodlab-asap")["error"].as_str().map(String::from));
    assert!(
        text.contains(said) || row_error.as_deref().is_some_and(|e| e.contains(said)),
        "{text} / {row_error:?}"
    );
    // nothing of the stranger's was measured as the row's
    if cmp.exists() {
        let c = json(&cmp);
        assert!(row(&c, "vodlab-asap")["at_capacity"].is_null(), "{c}");
    }
    drop(stranger);
}
