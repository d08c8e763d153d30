//! Absurd input to `vodlab gen`, `script check` and `run` (issue 11): every
//! probe that used to abort on a huge allocation or panic in
//! `Duration::from_secs_f64` is now an error naming the file, the line and
//! column or the key, and the bound; names that would become paths or script
//! text are refused.

mod common;

use std::fs;
use std::path::Path;
use std::process::Output;

use common::{vodlab, vodlab_ok};

/// The error text of a command that must fail cleanly: a non-zero exit
/// status (not a signal: an abort has no code), no panic, no allocation
/// failure.
fn clean_error(o: &Output) -> String {
    let stderr = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(!o.status.success(), "accepted: {stderr}");
    assert!(
        o.status.code().is_some(),
        "killed by a signal ({:?}): {stderr}",
        o.status
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(!stderr.contains("memory allocation"), "{stderr}");
    assert!(stderr.contains("vodlab: error:"), "{stderr}");
    stderr
}

fn preset() -> String {
    vodlab_ok(&["gen", "--show-preset", "youtube-2011"])
}

/// `vodlab gen --spec` of `text` (written to `dir/w.toml`) plus `extra` flags.
fn gen_spec(dir: &Path, text: &str, extra: &[&str]) -> Output {
    let spec = dir.join("w.toml");
    fs::write(&spec, text).unwrap();
    let out = dir.join("out");
    let mut args = vec![
        "gen",
        "--spec",
        spec.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    vodlab(&args)
}

fn replace(text: &str, from: &str, to: &str) -> String {
    assert!(text.contains(from), "the preset has no `{from}`");
    text.replacen(from, to, 1)
}

#[test]
fn absurd_spec_numbers_are_errors_naming_file_key_and_bound() {
    let t = tempfile::tempdir().unwrap();
    let base = preset();
    // (replace, with, key in the message, bound in the message)
    let cases = [
        (
            "titles = 10000",
            "titles = 4294967295",
            "catalog.titles",
            "1000000",
        ),
        (
            "count = 7200",
            "count = 4294967295",
            "sessions.count",
            "2000000",
        ),
        (
            "request_s = 10.0",
            "request_s = 1e-9",
            "sessions.request_s",
            "0.001",
        ),
        (
            "bitrate_kbps = 419.4304",
            "bitrate_kbps = 1e300",
            "bitrate_kbps",
            "1000000",
        ),
        (
            "timeout_s = 10.0",
            "timeout_s = 1e300",
            "sessions.timeout_s",
            "86400",
        ),
        (
            "delay_ms = 50.0",
            "delay_ms = 1e300",
            "clients[0].delay_ms",
            "60000",
        ),
        (
            "shard_sessions = 600",
            "shard_sessions = 1",
            "measurement.shard_sessions",
            "1024",
        ),
    ];
    for (from, to, key, bound) in cases {
        let e = clean_error(&gen_spec(t.path(), &replace(&base, from, to), &[]));
        assert!(e.contains("w.toml"), "{to}: {e}");
        assert!(e.contains(key), "{to}: {e}");
        assert!(e.contains(bound), "{to}: {e}");
    }
}

#[test]
fn a_constant_billion_second_title_is_refused_from_the_estimate() {
    let t = tempfile::tempdir().unwrap();
    let base = preset();
    let start = base.find("[catalog.duration]").unwrap();
    let end = base[start..].find("[[catalog.representations]]").unwrap() + start;
    let text = format!(
        "{}[catalog.duration]\nkind = \"constant\"\nvalue = 1e9\n{}",
        &base[..start],
        &base[end..]
    );
    let e = clean_error(&gen_spec(t.path(), &text, &[]));
    assert!(e.contains("catalog.duration"), "{e}");
    assert!(e.contains("1000000 per title"), "{e}");
    // a valid duration that makes a catalog too large as a whole
    let text = format!(
        "{}[catalog.duration]\nkind = \"constant\"\nvalue = 60000\n{}",
        &base[..start],
        &base[end..]
    );
    let e = clean_error(&gen_spec(t.path(), &text, &[]));
    assert!(e.contains("catalog: "), "{e}");
    assert!(e.contains("50000000"), "{e}");
    // a small catalog of long titles whose sessions make too many requests:
    // refused while the sessions are drawn, before a script is written
    let text = format!(
        "{}[catalog.duration]\nkind = \"constant\"\nvalue = 5000\n{}",
        &base[..start],
        &base[end..]
    );
    let text = replace(&text, "titles = 10000", "titles = 10");
    let text = replace(&text, "count = 7200", "count = 100000");
    let e = clean_error(&gen_spec(t.path(), &text, &[]));
    assert!(
        e.contains("sessions.count") && e.contains("20000000"),
        "{e}"
    );
    assert!(!t.path().join("out/workload.json").exists());
}

#[test]
fn absurd_gen_flags_are_errors_naming_the_flag() {
    let t = tempfile::tempdir().unwrap();
    let out = t.path().join("o");
    let out = out.to_str().unwrap();
    let g = |extra: &[&str]| {
        let mut args = vec!["gen", "--preset", "youtube-2011", "-o", out];
        args.extend_from_slice(extra);
        clean_error(&vodlab(&args))
    };
    let e = g(&["--sessions", "4294967295"]);
    assert!(e.contains("--sessions") && e.contains("2000000"), "{e}");
    let e = g(&["--titles", "4294967295"]);
    assert!(e.contains("--titles") && e.contains("1000000"), "{e}");
    let e = g(&["--scale", "1e12"]);
    assert!(e.contains("--scale"), "{e}");
    let e = g(&["--scale", "500"]);
    assert!(
        e.contains("--scale 500") || e.contains("500 makes catalog.titles"),
        "{e}"
    );
    let e = g(&["--scale", "NaN"]);
    assert!(e.contains("--scale"), "{e}");
    let e = g(&["--shards", "4294967295"]);
    assert!(e.contains("--shards") && e.contains("1024"), "{e}");
    // a spec's own shard size making too many files is refused ...
    let text = replace(&preset(), "shard_sessions = 600", "shard_sessions = 1");
    let own = replace(&text, "count = 7200", "count = 1500");
    let e = clean_error(&gen_spec(t.path(), &own, &[]));
    assert!(
        e.contains("measurement.shard_sessions") && e.contains("1024"),
        "{e}"
    );
    // ... but --sessions growing past the limit grows the shard size
    // (docs/workload-spec.md: 1500 sessions in shards of 2, 750 files) ...
    let text = replace(&text, "count = 7200", "count = 1000");
    let o = gen_spec(t.path(), &text, &["--sessions", "1500", "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(t.path().join("out/sessions/shard-749.vsl").exists());
    assert!(!t.path().join("out/sessions/shard-750.vsl").exists());
    // ... and --shards replaces it
    let o = gen_spec(
        t.path(),
        &text,
        &["--sessions", "1500", "--shards", "12", "--json"],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(t.path().join("out/sessions/shard-11.vsl").exists());
}

#[test]
fn names_that_become_paths_or_script_text_are_validated() {
    let t = tempfile::tempdir().unwrap();
    let base = preset();
    let text = replace(&base, "name = \"sd\"", "name = \"..\"");
    let text = replace(
        &text,
        "kind = \"fixed\", name = \"sd\"",
        "kind = \"fixed\", name = \"..\"",
    );
    let e = clean_error(&gen_spec(t.path(), &text, &[]));
    assert!(e.contains("catalog.representations[0].name"), "{e}");

    let text = replace(
        &base,
        "name = \"youtube-2011\"",
        "name = \"a\\n/evil timeout=1\"",
    );
    let e = clean_error(&gen_spec(t.path(), &text, &[]));
    assert!(e.contains("name: "), "{e}");

    let text = replace(&base, "name = \"10mbit\"", "name = \"a#b\"");
    let text = text.replace("\"10mbit\"", "\"a#b\"");
    let e = clean_error(&gen_spec(t.path(), &text, &[]));
    assert!(e.contains("clients[0].name"), "{e}");
}

fn script_check(dir: &Path, bytes: &[u8]) -> Output {
    let f = dir.join("s.vsl");
    fs::write(&f, bytes).unwrap();
    vodlab(&["script", "check", f.to_str().unwrap()])
}

#[test]
fn absurd_script_values_are_errors_naming_line_and_column() {
    let t = tempfile::tempdir().unwrap();
    for (line, col, bound) in [
        ("/a timeout=1e300", 4, "86400"),
        ("/a pacing=1e300", 4, "86400"),
        ("/a think=1e300", 4, "86400"),
        ("/a pace_time=inf", 4, "86400"),
        ("/a timeout=NaN", 4, "86400"),
        ("/a conn=4294967295", 4, "63"),
        ("/a range=0-18446744073709551615", 4, "9007199254740991"),
        ("/a size=18446744073709551615", 4, "9007199254740991"),
        (
            "/a headers='Range: bytes=0-18446744073709551615'",
            4,
            "9007199254740991",
        ),
    ] {
        let text = format!("/first\n{line}\n");
        let e = clean_error(&script_check(t.path(), text.as_bytes()));
        assert!(
            e.contains(&format!("s.vsl: line 2, column {col}:")),
            "{line}: {e}"
        );
        assert!(e.contains(bound), "{line}: {e}");
    }
    let e = clean_error(&script_check(
        t.path(),
        b"#@session bitrate=18446744073709551615\n/a\n",
    ));
    assert!(e.contains("line 1, column 11"), "{e}");
}

#[test]
fn a_non_utf8_byte_is_reported_at_its_line_and_column() {
    let t = tempfile::tempdir().unwrap();
    let e = clean_error(&script_check(
        t.path(),
        b"/a timeout=10\n/b\xc3\xa9/c\xff timeout=10\n",
    ));
    // line 2: `/b`, `é` (one character), `/c`, then the bad byte: column 6
    assert!(e.contains("s.vsl: line 2, column 6: invalid UTF-8"), "{e}");
    assert!(e.contains("0xff"), "{e}");

    // the same for a workload spec
    let spec = t.path().join("w.toml");
    let mut bytes = b"name = \"x\"\n# comment \xfe\n".to_vec();
    bytes.extend_from_slice(preset().as_bytes());
    fs::write(&spec, bytes).unwrap();
    let e = clean_error(&vodlab(&[
        "gen",
        "--spec",
        spec.to_str().unwrap(),
        "-o",
        t.path().join("o").to_str().unwrap(),
    ]));
    assert!(e.contains("w.toml:2:11"), "{e}");
}

#[test]
fn absurd_run_flags_are_errors_not_panics() {
    let t = tempfile::tempdir().unwrap();
    let script = t.path().join("s.vsl");
    fs::write(&script, "/a timeout=10\n").unwrap();
    let s = script.to_str().unwrap();
    // a loopback port nobody listens on: every check happens before connecting
    let target = format!("http://127.0.0.1:{}", common::free_port());
    let run = |extra: &[&str]| {
        let mut args = vec!["run", s, "--target", &target, "--quiet"];
        let out = t.path().join("r");
        let out = out.to_str().unwrap().to_string();
        args.extend_from_slice(extra);
        args.extend_from_slice(&["-o", &out]);
        clean_error(&vodlab(&args))
    };
    for d in ["nan", "-1", "1e300", "0", "inf"] {
        let e = run(&["--rate", "1", &format!("--duration={d}")]);
        assert!(e.contains("--duration") && e.contains("604800"), "{d}: {e}");
    }
    for ms in ["-1", "nan", "1e300"] {
        let e = run(&["--rate", "1", &format!("--late-threshold-ms={ms}")]);
        assert!(
            e.contains("--late-threshold-ms") && e.contains("60000"),
            "{ms}: {e}"
        );
    }
    for i in ["1e-9", "nan", "1e300"] {
        let e = run(&["--rate", "1", "--interval", i]);
        assert!(e.contains("--interval"), "{i}: {e}");
    }
    let e = run(&["--rate", "1e-300"]);
    assert!(e.contains("--rate") && e.contains("0.001"), "{e}");
    let e = run(&["--rate", "1e300"]);
    assert!(e.contains("--rate"), "{e}");
    let e = run(&["--steps", "1e300:1"]);
    assert!(e.contains("--steps"), "{e}");
    let e = run(&["--ramp-rate", "1:2:1e300"]);
    assert!(e.contains("--ramp-rate"), "{e}");
    let e = run(&["--rate", "1", "--ramp-up", "18446744073709551615"]);
    assert!(e.contains("--ramp-up"), "{e}");

    // a script asking for four billion connections is refused when loaded
    fs::write(&script, "/a timeout=10 conn=4294967295\n").unwrap();
    let e = run(&["--rate", "1"]);
    assert!(
        e.contains("line 1, column 15") && e.contains("conn="),
        "{e}"
    );
}

/// The session driver saturates waits and deadlines a script could not carry
/// any more (the parser bounds them) but a library user might: a pacing of
/// 1e300 s, an infinite think time and a NaN or 1e300 s timeout drive a
/// session to its end without a panic, each wait lasting at most about a
/// century.
#[test]
fn the_session_driver_saturates_absurd_waits_and_timeouts() {
    use std::time::Duration;
    use vodlab_client::core::driver::{Action, DriverConfig, Event, SessionDriver};
    use vodlab_client::core::exchange::Response;
    use vodlab_client::core::time::Time;
    use vodlab_workload::script::{Request, Session, Wait};

    let req = |timeout_s: Option<f64>, wait: Wait| Request {
        timeout_s,
        wait,
        ..Request::get("/a")
    };
    let session = Session {
        requests: vec![
            req(Some(1e300), Wait::None),
            req(Some(f64::NAN), Wait::Pacing(1e300)),
            req(None, Wait::Think(f64::INFINITY)),
            req(Some(f64::INFINITY), Wait::Pacing(f64::NAN)),
        ],
        ..Session::default()
    };
    let start = Time::ZERO;
    let mut d = SessionDriver::new(&session, None, DriverConfig::default(), start);
    let mut now = start;
    let mut waits = 0;
    let outcome = loop {
        match d.poll_action(now) {
            Some(Action::Connect { conn }) => d.handle(now, Event::Connected { conn }),
            Some(Action::Send { conn, .. }) => d.handle(
                now,
                Event::Response {
                    conn,
                    response: Response {
                        status: 200,
                        keep_alive: true,
                        ..Response::default()
                    },
                },
            ),
            Some(Action::Finished(o)) => break o,
            Some(_) => {}
            None => {
                let next = d.poll_timeout().expect("a pending session has a deadline");
                assert!(next > now, "time must advance");
                assert!(
                    next.duration_since(now) <= Duration::from_secs(101 * 365 * 86_400),
                    "a wait saturates at about a century"
                );
                now = next;
                waits += 1;
                assert!(waits < 100, "the session never ends");
            }
        }
    };
    assert_eq!(outcome.completed, 4, "{outcome:?}");
    assert!(outcome.failure.is_none(), "{outcome:?}");
    assert!(
        waits >= 2,
        "the absurd pacing and think times were waited out"
    );
}
