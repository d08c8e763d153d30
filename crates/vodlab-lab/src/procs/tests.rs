use super::*;
use vodlab_client::io::transport::{H2Settings, Protocol};
use vodlab_client::Arrivals;

fn args_text(a: &[OsString]) -> Vec<String> {
    a.iter().map(|x| x.to_string_lossy().into_owned()).collect()
}

/// The value after `flag`, if the flag is there.
fn value<'a>(a: &'a [String], flag: &str) -> Option<&'a str> {
    a.iter().position(|x| x == flag).map(|i| a[i + 1].as_str())
}

fn point<'a>(out: &'a Path, shard: ShardSpec, rate: f64, seed: u64) -> ChildPoint<'a> {
    ChildPoint {
        workload: Path::new("/w/yt"),
        target: "http://127.0.0.1:8080",
        remote: false,
        rate,
        seed,
        sessions: 37,
        duration_s: 0.1 + 120.2,
        shard,
        start_at_unix_s: 1_700_000_000.25,
        out,
    }
}

/// What a child is told reads back as the point's own numbers, bit for
/// bit: the same seed, rate, session cap and duration give the same
/// schedule (the split rule does the rest, next test).
#[test]
fn a_child_gets_the_points_settings_exactly() {
    let out = Path::new("/o/points/01/shard-2");
    let rate = 0.1 + 0.2; // not exactly 0.3: printed with every digit
    let s = PointSettings {
        late_threshold_ms: 12.5,
        check_bytes: 0.0,
        shaping: false,
        ..PointSettings::default()
    };
    let a = args_text(&child_args(
        &s,
        &point(out, ShardSpec { index: 2, count: 3 }, rate, 8),
    ));
    assert_eq!(a[0], "run");
    assert_eq!(a[1], "/w/yt");
    let f = |k| value(&a, k).unwrap_or_else(|| panic!("{k} missing: {a:?}"));
    assert_eq!(f("--rate").parse::<f64>().unwrap(), rate);
    assert_eq!(
        f("--duration").parse::<f64>().unwrap(),
        0.1 + 120.2,
        "duration exact"
    );
    assert_eq!(f("--seed"), "8");
    assert_eq!(f("--sessions"), "37");
    assert_eq!(f("--arrivals"), "poisson");
    assert_eq!(f("--interval"), "1", "the in-process point's interval");
    assert_eq!(f("--shard"), "2/3");
    assert_eq!(f("--start-at"), "1700000000.250000");
    assert_eq!(f("--late-threshold-ms"), "12.5");
    assert_eq!(f("--check-bytes"), "0");
    assert_eq!(f("--ramp-up"), "0", "ramps off unless kept");
    assert_eq!(f("--ramp-down"), "0");
    assert_eq!(f("-o"), out.to_str().unwrap());
    assert_eq!(f("--protocol"), "h1");
    for flag in [
        "--one-arrival-process",
        "--no-shaping",
        "--quiet",
        "--no-connect-check",
    ] {
        assert!(a.contains(&flag.to_string()), "{flag}: {a:?}");
    }
    for flag in [
        "--no-pacing",
        "--requests-csv",
        "--allow-remote",
        "--insecure",
        "--ca",
    ] {
        assert!(!a.contains(&flag.to_string()), "{flag}: {a:?}");
    }
    // kept ramps: the workload's own
    let kept = PointSettings {
        keep_ramps: true,
        pacing: false,
        requests_csv: true,
        ..PointSettings::default()
    };
    let mut p = point(out, ShardSpec { index: 0, count: 2 }, 1.0, 1);
    p.remote = true;
    let a = args_text(&child_args(&kept, &p));
    assert_eq!(value(&a, "--ramp-up"), None);
    for flag in ["--no-pacing", "--requests-csv", "--allow-remote"] {
        assert!(a.contains(&flag.to_string()), "{flag}: {a:?}");
    }
    assert!(!a.contains(&"--no-shaping".to_string()));
}

/// The transport settings go over as flags that rebuild them.
#[test]
fn transport_settings_become_the_flags_that_rebuild_them() {
    let mut s = PointSettings::default();
    s.transport.protocol = Protocol::H2;
    s.transport.tls.ca = Some("/etc/ca.pem".into());
    s.transport.tls.insecure = true;
    s.transport.h2 = H2Settings {
        stream_window: H2Settings::window_from_bits(16).unwrap(),
        connection_window: H2Settings::window_from_bits(24).unwrap(),
        max_frame_size: 32_768,
        max_concurrent_streams: 7,
        streams_per_connection: 3,
    };
    let out = Path::new("/o");
    let a = args_text(&child_args(
        &s,
        &point(out, ShardSpec { index: 0, count: 2 }, 1.0, 1),
    ));
    let f = |k| value(&a, k).unwrap_or_else(|| panic!("{k} missing: {a:?}"));
    assert_eq!(f("--protocol"), "h2");
    assert_eq!(f("--ca"), "/etc/ca.pem");
    assert_eq!(f("--h2-window-bits"), "16");
    assert_eq!(f("--h2-connection-window-bits"), "24");
    assert_eq!(f("--h2-max-frame-size"), "32768");
    assert_eq!(f("--h2-max-concurrent-streams"), "7");
    assert_eq!(f("--h2-streams-per-connection"), "3");
    assert!(a.contains(&"--insecure".to_string()));
    for bits in 0..=30 {
        let mut t = s.transport.clone();
        t.h2.stream_window = H2Settings::window_from_bits(bits).unwrap();
        let mut v = Vec::new();
        transport_flags(&t, &mut v);
        let v = args_text(&v);
        assert_eq!(
            value(&v, "--h2-window-bits"),
            Some(bits.to_string().as_str())
        );
    }
}

/// The per-point schedule with N processes is the one-process schedule:
/// after `one_arrival_process` the workload has one script shard, so
/// session `i` goes to child `i mod N`, and each child draws the same
/// offsets from the same seed and rate. Every session is run by exactly
/// one child, at its one-process offset.
#[test]
fn n_children_run_the_sessions_of_one_process_at_the_same_offsets() {
    for (rate, seed, n) in [(0.5, 1u64, 30usize), (7.25, 9, 101), (40.0, 2, 7)] {
        let one: Vec<Duration> = Arrivals::Poisson { rate }.offsets(seed).take(n).collect();
        for count in 1..=6u32 {
            let mut got: Vec<Option<Duration>> = vec![None; n];
            for index in 0..count {
                let spec = ShardSpec { index, count };
                // what the engine of child `index` does with --sessions n
                // and one script shard
                let offsets = Arrivals::Poisson { rate }.offsets(seed);
                for (i, off) in offsets.take(n).enumerate() {
                    if spec.owns(0, i, 1) {
                        assert!(got[i].is_none(), "session {i} run twice (N={count})");
                        got[i] = Some(off);
                    }
                }
            }
            let got: Vec<Duration> = got
                .into_iter()
                .enumerate()
                .map(|(i, o)| o.unwrap_or_else(|| panic!("session {i} not run (N={count})")))
                .collect();
            assert_eq!(got, one, "rate {rate} seed {seed} N {count}");
        }
    }
}

#[test]
fn the_start_lead_grows_with_the_load_time_and_the_rounds_of_children() {
    let ms = Duration::from_millis;
    assert_eq!(start_lead(ms(0), 1.0), ms(1000));
    assert_eq!(start_lead(ms(250), 1.0), ms(2000));
    assert_eq!(start_lead(ms(250), 4.0), ms(5000), "N = 4 x cores");
    assert_eq!(start_lead(ms(250), 0.0), ms(2000), "at least one round");
    assert_eq!(
        start_lead(Duration::from_secs(100), 1.0),
        ms(60_000),
        "capped"
    );
}

#[test]
fn never_more_children_than_sessions() {
    let s = PointSettings {
        client_processes: 4,
        client_exe: Some("/bin/true".into()),
        ..PointSettings::default()
    };
    assert_eq!(processes_for(&s, 100), 4);
    assert_eq!(processes_for(&s, 3), 3);
    assert_eq!(processes_for(&s, 1), 1);
    assert_eq!(processes_for(&PointSettings::default(), 100), 1);
}

#[test]
fn settings_are_validated_naming_the_key() {
    assert!(PointSettings::default().validate().is_ok());
    let zero = PointSettings {
        client_processes: 0,
        ..PointSettings::default()
    };
    let e = zero.validate().unwrap_err().to_string();
    assert!(e.contains("client_processes") && e.contains("got 0"), "{e}");
    let many = PointSettings {
        client_processes: MAX_CLIENT_PROCESSES + 1,
        client_exe: Some("/bin/true".into()),
        ..PointSettings::default()
    };
    assert!(many.validate().is_err());
    let no_exe = PointSettings {
        client_processes: 2,
        ..PointSettings::default()
    };
    let e = no_exe.validate().unwrap_err().to_string();
    assert!(e.contains("client_exe"), "{e}");
}

/// `sh -c SCRIPT` children in `dirs` under `root`.
fn children(root: &Path, scripts: &[&str]) -> Vec<(ShardSpec, Vec<OsString>, PathBuf)> {
    let count = scripts.len() as u32;
    scripts
        .iter()
        .enumerate()
        .map(|(i, s)| {
            (
                ShardSpec {
                    index: i as u32,
                    count,
                },
                vec!["-c".into(), (*s).into()],
                root.join(format!("shard-{i}")),
            )
        })
        .collect()
}

/// Children that fail, hang or are interrupted are stopped and named; with
/// no results at all the point is an error that says why, shard by shard.
#[test]
fn failing_hung_and_interrupted_children_are_stopped_and_named() {
    let t = tempfile::tempdir().unwrap();
    let live = Live::default();
    let i = Interrupter::new();
    let sh = Path::new("/bin/sh");
    // one exits 3 with a message, one hangs past its time (and ignores
    // nothing: SIGTERM ends it)
    let e = run_children(Children {
        exe: sh,
        args: children(
            t.path(),
            &["echo 'no such workload' >&2; exit 3", "exec sleep 30"],
        ),
        hang_after: Duration::from_millis(300),
        interrupter: &i,
        live: &live,
    })
    .err()
    .expect("no results: an error");
    let e = e.to_string();
    assert!(
        e.contains("shard 0/2") && e.contains("no such workload"),
        "{e}"
    );
    assert!(e.contains("exit status: 3"), "{e}");
    assert!(
        e.contains("shard 1/2") && e.contains("still running") && e.contains("was stopped"),
        "{e}"
    );
    // one ignores SIGTERM: killed after the grace period... is too slow for
    // a unit test; an interrupt SIGTERMs every child at once instead
    let i = Interrupter::new();
    i.interrupt();
    let t0 = Instant::now();
    let e = run_children(Children {
        exe: sh,
        args: children(
            t.path(),
            &["exec sleep 30", "exec sleep 30", "exec sleep 30"],
        ),
        hang_after: Duration::from_secs(60),
        interrupter: &i,
        live: &live,
    })
    .err()
    .expect("no results")
    .to_string();
    assert!(t0.elapsed() < Duration::from_secs(5), "stopped at once");
    for k in 0..3 {
        assert!(e.contains(&format!("shard {k}/3")), "{e}");
    }
    assert!(e.contains("signal: 15"), "killed by SIGTERM: {e}");
    assert_eq!(live.started.load(Ordering::Relaxed), 0);
}

/// A child that cannot be started is an error naming the executable.
#[test]
fn a_missing_executable_is_named() {
    let t = tempfile::tempdir().unwrap();
    let live = Live::default();
    let i = Interrupter::new();
    let e = run_children(Children {
        exe: Path::new("/nonexistent/vodlab"),
        args: children(t.path(), &["", ""]),
        hang_after: Duration::from_secs(1),
        interrupter: &i,
        live: &live,
    })
    .err()
    .expect("cannot start")
    .to_string();
    assert!(
        e.contains("/nonexistent/vodlab") && e.contains("shard 0/2"),
        "{e}"
    );
}

/// Writes a shard's results.json and metrics.json into `dir`: a run that
/// started `started` sessions and stopped by `stop`.
fn write_shard(dir: &Path, spec: ShardSpec, started: u64, stop: StopReason) {
    use vodlab_client::out::metrics::RunMetrics;
    use vodlab_client::out::results::{self, Monitor, RunInfo};
    use vodlab_client::out::shard::DumpInfo;
    let info = RunInfo {
        target: "http://127.0.0.1:8080".into(),
        workload: "w".into(),
        arrivals: Arrivals::Poisson { rate: 3.0 },
        seed: 4,
        shaping: false,
        kernel_shaping: None,
        pacing: false,
        interval_s: 1.0,
        late_threshold: Duration::from_millis(10),
        scheduled_sessions: started,
        started_sessions: started,
        started_unix: 1_700_000_000.0,
        duration_s: 5.0,
        stopped_by: stop,
        playback_buffer_s: 4.0,
        pace_target: 1.0,
    };
    let mut m = RunMetrics::new(10_000);
    for i in 0..started {
        let start_s = i as f64 * 0.3;
        m.record_start(start_s, 100);
        m.record_session(
            "c",
            true,
            &vodlab_client::out::metrics::SessionSample {
                start_s,
                end_s: start_s + 1.0,
                failure: None,
                skipped: 0,
                viewer: None,
                reconnects: 0,
                server_closes: 0,
            },
        );
    }
    let mon = Monitor::default();
    let dump = MetricsDump::new(
        &DumpInfo {
            shard: Some(spec),
            origin_unix_s: 1_700_000_000.0,
            actual_start_unix_s: 1_700_000_000.001,
        },
        &info,
        &m,
        &mon,
        2,
        10.0,
    )
    .unwrap();
    let r = results::assemble(&info, &m, &mon);
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("results.json"), serde_json::to_string(&r).unwrap()).unwrap();
    std::fs::write(
        dir.join("metrics.json"),
        serde_json::to_string(&dump).unwrap(),
    )
    .unwrap();
}

/// The point's merge names every shard that went wrong and is INVALID;
/// what the others measured is kept.
#[test]
fn a_point_with_a_failed_and_an_interrupted_shard_is_invalid_and_names_them() {
    let t = tempfile::tempdir().unwrap();
    let spec = |index| ShardSpec { index, count: 3 };
    let kid = |i: u32, trouble: Option<&str>| Kid {
        spec: spec(i),
        dir: t.path().join(format!("shard-{i}")),
        child: None,
        status: None,
        trouble: trouble.map(String::from),
        shown: [0; 5],
    };
    write_shard(&t.path().join("shard-0"), spec(0), 5, StopReason::Finished);
    // shard 1 exited with an error before writing anything
    write_shard(
        &t.path().join("shard-2"),
        spec(2),
        4,
        StopReason::Interrupted,
    );
    let kids = vec![
        kid(0, None),
        kid(1, Some("its process exited with exit status: 2")),
        kid(2, None),
    ];
    let s = merge_children(&kids, false).unwrap_or_else(|e| panic!("two shards merged: {e}"));
    assert_eq!(s.started, 9);
    assert_eq!(s.results.started_sessions, 9);
    assert!(!s.results.valid);
    assert!(!s.results.complete);
    let why = s.results.invalid_reasons.join("\n");
    assert!(
        why.contains("shard 1/3") && why.contains("wrote no results"),
        "{why}"
    );
    assert!(why.contains("exit status: 2"), "{why}");
    assert!(
        why.contains("shard 2/3") && why.contains("was interrupted"),
        "{why}"
    );
    assert!(!why.contains("shard 0/3"), "{why}");
    let m = s.results.merge.as_ref().unwrap();
    assert_eq!(m.missing, vec![1]);
    assert_eq!(m.merged, vec![0, 2]);
    // the search's own Ctrl-C: an interrupted shard is no fault of its own
    let s = merge_children(&kids, true).unwrap_or_else(|e| panic!("{e}"));
    let why = s.results.invalid_reasons.join("\n");
    assert!(!why.contains("was interrupted"), "{why}");
    assert!(why.contains("shard 1/3"), "{why}");
    // every shard fine: valid
    write_shard(&t.path().join("shard-1"), spec(1), 5, StopReason::Finished);
    write_shard(&t.path().join("shard-2"), spec(2), 5, StopReason::Finished);
    let ok = merge_children(&[kid(0, None), kid(1, None), kid(2, None)], false)
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(ok.results.valid, "{:?}", ok.results.invalid_reasons);
    assert!(ok.results.complete);
    assert_eq!(ok.started, 15);
}
