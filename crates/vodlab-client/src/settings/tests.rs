use std::time::{Duration, UNIX_EPOCH};

use super::*;
use crate::{Arrivals, RunConfig};

/// `vodlab run`'s flags, as the binary takes them.
#[derive(Debug, clap::Parser)]
struct Run {
    #[command(flatten)]
    a: RunSettings,
}

fn parse(args: &[&str]) -> RunSettings {
    use clap::Parser;
    Run::try_parse_from(["run"].iter().chain(args)).unwrap().a
}

/// Durations take the unit grammar (docs/units.md); a bare number keeps
/// its flag's unit and reaches the flag's bound check as written.
#[test]
fn duration_flags_take_the_unit_grammar() {
    use vodlab_units::{millis_arg, seconds_arg};
    assert_eq!(seconds_arg("500ms"), Ok(0.5));
    assert_eq!(seconds_arg("2m"), Ok(120.0));
    assert_eq!(seconds_arg("90"), Ok(90.0));
    assert_eq!(seconds_arg("1e300"), Ok(1e300), "bound checked later");
    assert!(seconds_arg("-1").is_ok_and(|x| x == -1.0));
    assert!(seconds_arg("5 parsecs").unwrap_err().contains("5 parsecs"));
    assert_eq!(millis_arg("1.5s"), Ok(1500.0));
    assert_eq!(millis_arg("250"), Ok(250.0));
    assert_eq!(millis_arg("250ms"), Ok(250.0));
    let a = parse(&[
        "w",
        "--target",
        "http://127.0.0.1:1",
        "--rate",
        "1",
        "--interval",
        "500ms",
        "--duration",
        "10m",
        "--late-threshold-ms",
        "0.1s",
    ]);
    assert_eq!(
        (a.interval, a.duration, a.late_threshold_ms),
        (0.5, Some(600.0), 100.0)
    );
}

/// `vodlab run`'s defaults, as `--help` shows them, are the library's:
/// a run with no flags gets the settings `RunConfig::new` gives.
#[test]
fn help_defaults_are_the_settings_a_run_gets() {
    use clap::Parser;
    let a = parse(&["w", "--target", "http://127.0.0.1:1", "--rate", "1"]);
    let lib = RunConfig::new(
        "127.0.0.1:1".parse().unwrap(),
        "127.0.0.1".into(),
        "http://127.0.0.1:1".into(),
        Arrivals::Poisson { rate: 1.0 },
    );
    assert_eq!(a.seed, lib.seed);
    assert_eq!(a.interval, lib.interval_s);
    assert_eq!(
        Duration::from_secs_f64(a.late_threshold_ms / 1e3),
        lib.late_threshold
    );
    assert_eq!(a.late_pacing, lib.late_pacing);
    assert_eq!(
        Duration::from_secs_f64(a.playback_buffer),
        lib.playback_buffer
    );
    assert_eq!(a.pace_target, lib.pace_target);
    assert_eq!(!a.no_pacing, lib.pacing);
    assert_eq!(!a.no_shaping, lib.shaping);
    assert_eq!(!a.no_cmcd, lib.cmcd);
    // and --help prints them
    let help = Run::try_parse_from(["run", "--help"])
        .unwrap_err()
        .to_string();
    for (flag, v) in [
        ("--interval", format!("{}", lib.interval_s)),
        ("--pace-target", format!("{}", lib.pace_target)),
        (
            "--playback-buffer",
            format!("{}", lib.playback_buffer.as_secs_f64()),
        ),
    ] {
        let at = help
            .find(&format!("{flag} <"))
            .unwrap_or_else(|| panic!("{flag}: {help}"));
        let rest = &help[at..];
        let next = rest[2..].find("\n      --").map_or(rest.len(), |i| i + 2);
        assert!(
            rest[..next].contains(&format!("[default: {v}]")),
            "{flag}: {}",
            &rest[..next]
        );
    }
}

#[test]
fn arrivals_are_compressed_rates_up_lengths_down() {
    let tc = vodlab_workload::TimeCompression::new(10.0).unwrap();
    let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
    match compress_arrivals(Arrivals::Poisson { rate: 0.5 }, tc) {
        Arrivals::Poisson { rate } => assert!(close(rate, 5.0)),
        other => panic!("{other:?}"),
    }
    match compress_arrivals(Arrivals::Constant { rate: 2.0 }, tc) {
        Arrivals::Constant { rate } => assert!(close(rate, 20.0)),
        other => panic!("{other:?}"),
    }
    match compress_arrivals(
        Arrivals::Steps {
            steps: vec![(60.0, 1.0), (30.0, 4.0)],
        },
        tc,
    ) {
        Arrivals::Steps { steps } => {
            assert!(close(steps[0].0, 6.0) && close(steps[0].1, 10.0));
            assert!(close(steps[1].0, 3.0) && close(steps[1].1, 40.0));
        }
        other => panic!("{other:?}"),
    }
    match compress_arrivals(
        Arrivals::Ramp {
            from: 1.0,
            to: 3.0,
            over_s: 100.0,
        },
        tc,
    ) {
        Arrivals::Ramp { from, to, over_s } => {
            assert!(close(from, 10.0) && close(to, 30.0) && close(over_s, 10.0))
        }
        other => panic!("{other:?}"),
    }
    // sessions started over the same nominal window are the same number
    let one = vodlab_workload::TimeCompression::NONE;
    match compress_arrivals(Arrivals::Poisson { rate: 0.5 }, one) {
        Arrivals::Poisson { rate } => assert_eq!(rate, 0.5),
        other => panic!("{other:?}"),
    }
}

#[test]
fn time_compression_flag_is_checked_naming_it() {
    assert_eq!(
        vodlab_workload::TimeCompression::from_flag_or_env(Some(4.0))
            .unwrap()
            .k(),
        4.0
    );
    let e = vodlab_workload::TimeCompression::from_flag_or_env(Some(0.0))
        .unwrap_err()
        .to_string();
    assert!(e.contains("--time-compression"), "{e}");
}

#[test]
fn start_at_takes_rfc3339_or_unix_seconds_and_refuses_the_past() {
    let now = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    let at = |s| parse_start_at(s, now);
    assert_eq!(
        at("1700000010.5").unwrap(),
        now + Duration::from_millis(10_500)
    );
    assert_eq!(
        at("2023-11-14T22:13:30Z").unwrap(),
        now + Duration::from_secs(10)
    );
    // just passed: accepted (the first sessions start late, and say so)
    assert!(at("1699999999.5").is_ok());
    let e = at("1699999990").unwrap_err().to_string();
    assert!(e.contains("in the past"), "{e}");
    assert!(at("tomorrow").is_err());
    assert!(at("1800000000").is_err(), "years ahead");
}

/// `--cmcd header|query|off` and `--cmcd-rtp MULT` reach the players'
/// settings; header by default; checked naming the flag.
#[test]
fn cmcd_mode_and_rtp_flags_reach_the_players() {
    use crate::core::cmcd::CmcdMode;
    use clap::Parser;
    let base = ["w", "--target", "http://127.0.0.1:1", "--rate", "1"];
    fn with<'a>(base: &[&'a str], extra: &[&'a str]) -> Vec<&'a str> {
        let mut v = base.to_vec();
        v.extend_from_slice(extra);
        v
    }
    let with = |extra: &[&'static str]| with(&base, extra);
    let dir = tempfile::tempdir().unwrap();
    let run = |a: &RunSettings| a.player.config(dir.path()).unwrap().unwrap();
    let a = parse(&with(&["--player", "dash"]));
    assert_eq!((run(&a).cmcd, run(&a).cmcd_rtp), (CmcdMode::Header, None));
    let a = parse(&with(&[
        "--player",
        "dash",
        "--cmcd",
        "query",
        "--cmcd-rtp",
        "5",
    ]));
    assert_eq!(
        (run(&a).cmcd, run(&a).cmcd_rtp),
        (CmcdMode::Query, Some(5.0))
    );
    let a = parse(&with(&["--player", "hls", "--cmcd", "off"]));
    assert_eq!(run(&a).cmcd, CmcdMode::Off);
    assert!(!run(&a).honour_cmsd);
    assert_eq!(run(&a).config.etp_weight, 0.0, "etp unused unless honoured");
    let a = parse(&with(&["--player", "dash", "--honour-cmsd"]));
    assert!(run(&a).honour_cmsd);
    assert_eq!(run(&a).config.etp_weight, 0.5, "the default weight");
    let a = parse(&with(&[
        "--player",
        "dash",
        "--honour-cmsd",
        "--cmsd-etp-weight",
        "1",
    ]));
    assert_eq!(run(&a).config.etp_weight, 1.0);
    let a = parse(&with(&[
        "--player",
        "dash",
        "--honour-cmsd",
        "--cmsd-etp-weight",
        "1.5",
    ]));
    let e = a.player.config(dir.path()).unwrap_err().to_string();
    assert!(
        e.contains("--cmsd-etp-weight must be between 0 and 1"),
        "{e}"
    );
    let a = parse(&with(&["--player", "dash", "--cmcd-rtp", "0"]));
    let e = a.player.config(dir.path()).unwrap_err().to_string();
    assert!(e.contains("--cmcd-rtp"), "{e}");
    for bad in [
        with(&["--player", "dash", "--cmcd", "both"]),
        with(&["--cmcd", "query"]),
        with(&["--honour-cmsd"]),
        with(&["--player", "dash", "--cmsd-etp-weight", "1"]),
        with(&["--player", "dash", "--cmcd", "query", "--no-cmcd"]),
    ] {
        assert!(
            Run::try_parse_from(["run"].iter().chain(&bad)).is_err(),
            "{bad:?}"
        );
    }
    for m in [CmcdMode::Header, CmcdMode::Query, CmcdMode::Off] {
        assert_eq!(m.to_string().parse::<CmcdMode>(), Ok(m));
    }
}
