//! The search on simulated servers and clients.

use super::*;
use proptest::prelude::*;

/// A simulated server: sessions fail when the rate exceeds its capacity;
/// `noise` flips the verdict of rates within that fraction of the capacity.
fn outcome(rate: f64, capacity: f64) -> Outcome {
    let over = rate > capacity;
    Outcome {
        measured_sessions: 100,
        failed_sessions: if over {
            ((rate - capacity) * 10.0).ceil() as u64
        } else {
            0
        },
        throughput_bytes_per_s: rate.min(capacity) * 1e6,
        client_valid: true,
        ..Default::default()
    }
}

fn search(cfg: SearchConfig, capacity: f64) -> (Search, Answer) {
    let mut s = Search::new(cfg).unwrap();
    let a = s.run(|r, _| Ok::<_, ()>(outcome(r, capacity))).unwrap();
    (s, a)
}

#[test]
fn doubles_then_bisects() {
    let cfg = SearchConfig {
        start: 1.0,
        precision: 0.05,
        ..Default::default()
    };
    let (s, a) = search(cfg, 11.0);
    let rates: Vec<f64> = s.points.iter().map(|p| p.rate).collect();
    assert_eq!(&rates[..5], &[1.0, 2.0, 4.0, 8.0, 16.0]);
    assert_eq!(rates[5], 12.0);
    assert_eq!(rates[6], 10.0);
    assert_eq!(a.ending, Some(Ending::Converged));
    let (lo, hi) = (a.capacity.unwrap(), a.lowest_failed.unwrap());
    assert!(lo <= 11.0 && 11.0 < hi && hi - lo <= 0.05 * lo, "{lo} {hi}");
    assert!(!a.non_monotone);
}

#[test]
fn additive_steps_like_the_thesis() {
    let cfg = SearchConfig {
        start: 2.0,
        step: Step::Add(2.0),
        precision: 0.2,
        ..Default::default()
    };
    let (s, a) = search(cfg, 7.0);
    let rates: Vec<f64> = s.points.iter().map(|p| p.rate).collect();
    assert_eq!(rates, vec![2.0, 4.0, 6.0, 8.0, 7.0]);
    assert_eq!(a.capacity, Some(7.0));
    assert_eq!(a.lowest_failed, Some(8.0));
}

#[test]
fn first_rate_failing_searches_down() {
    let cfg = SearchConfig {
        start: 10.0,
        precision: 0.1,
        ..Default::default()
    };
    let (s, a) = search(cfg, 1.5);
    assert_eq!(s.points[0].rate, 10.0);
    assert!(!s.points[0].passed);
    assert_eq!(s.points[1].rate, 5.0);
    assert_eq!(a.ending, Some(Ending::Converged));
    assert!(a.capacity.unwrap() <= 1.5 && a.lowest_failed.unwrap() > 1.5);
}

#[test]
fn bounds_and_budget_end_the_search() {
    let cfg = SearchConfig {
        start: 1.0,
        max_rate: 5.0,
        ..Default::default()
    };
    let (s, a) = search(cfg, 100.0);
    assert_eq!(a.ending, Some(Ending::AboveMaxRate));
    assert_eq!(a.capacity, Some(5.0));
    assert_eq!(s.points.last().unwrap().rate, 5.0);

    let cfg = SearchConfig {
        start: 1.0,
        min_rate: 0.25,
        ..Default::default()
    };
    let (_, a) = search(cfg, 0.1);
    assert_eq!(a.ending, Some(Ending::BelowMinRate));
    assert_eq!(a.capacity, None);

    let cfg = SearchConfig {
        start: 1.0,
        precision: 0.001,
        max_points: 6,
        ..Default::default()
    };
    let (s, a) = search(cfg, 3.3);
    assert_eq!(s.points.len(), 6);
    assert_eq!(a.ending, Some(Ending::OutOfPoints));
}

#[test]
fn repeats_and_early_failure() {
    let cfg = SearchConfig {
        start: 1.0,
        repeats: 3,
        precision: 0.3,
        ..Default::default()
    };
    let mut calls = Vec::new();
    let mut s = Search::new(cfg).unwrap();
    s.run(|r, k| {
        calls.push((r, k));
        // the second repetition at 4 fails: no third one is run
        let cap = if r == 4.0 && k == 1 { 3.0 } else { 5.0 };
        Ok::<_, ()>(outcome(r, cap))
    })
    .unwrap();
    assert_eq!(&calls[..3], &[(1.0, 0), (1.0, 1), (1.0, 2)]);
    let p4 = s.points.iter().find(|p| p.rate == 4.0).unwrap();
    assert_eq!(p4.runs.len(), 2);
    assert!(!p4.passed);
    let p1 = &s.points[0];
    let tp = p1.throughput().unwrap();
    assert_eq!(tp.n, 3);
    assert_eq!(tp.half_width, Some(0.0));
    assert_eq!(p1.failed_pct().unwrap().mean, 0.0);
}

#[test]
fn measure_errors_keep_the_points() {
    let mut s = Search::new(SearchConfig::default()).unwrap();
    let r = s.run(|r, _| {
        if r > 3.0 {
            Err("server died")
        } else {
            Ok(outcome(r, 10.0))
        }
    });
    assert_eq!(r, Err("server died"));
    assert_eq!(s.points.len(), 2);
    assert_eq!(s.answer().capacity, Some(2.0));
}

#[test]
fn criteria() {
    let ok = Outcome {
        measured_sessions: 200,
        client_valid: true,
        ..Default::default()
    };
    let c = Criterion::parse("none").unwrap();
    assert!(c.judge(&ok).is_ok());
    let one = Outcome {
        failed_sessions: 1,
        ..ok.clone()
    };
    assert!(c.judge(&one).unwrap_err().contains("1 failed"));
    let cut = Outcome {
        unfinished_sessions: 1,
        ..ok.clone()
    };
    assert!(c.judge(&cut).is_err());
    assert!(c.judge(&Outcome::default()).is_err());

    let c = Criterion::parse("failed:1").unwrap();
    assert!(c
        .judge(&Outcome {
            failed_sessions: 2,
            ..ok.clone()
        })
        .is_ok());
    assert!(c
        .judge(&Outcome {
            failed_sessions: 3,
            ..ok.clone()
        })
        .is_err());

    let c = Criterion::parse("qoe:5:2.5").unwrap();
    assert_eq!(
        c,
        Criterion::Qoe {
            stalled_pct: 5.0,
            p95_startup_s: 2.5
        }
    );
    assert!(c
        .judge(&Outcome {
            stalled_sessions: 10,
            p95_startup_s: 2.0,
            ..ok.clone()
        })
        .is_ok());
    assert!(c
        .judge(&Outcome {
            stalled_sessions: 11,
            ..ok.clone()
        })
        .is_err());
    assert!(c
        .judge(&Outcome {
            p95_startup_s: 2.6,
            ..ok.clone()
        })
        .unwrap_err()
        .contains("p95"));

    for bad in [
        "",
        "failed",
        "failed:x",
        "failed:101",
        "qoe:1",
        "qoe:-1:2",
        "maybe",
    ] {
        assert!(Criterion::parse(bad).is_err(), "{bad}");
    }
}

#[test]
fn invalid_settings() {
    for cfg in [
        SearchConfig {
            start: 0.0,
            ..Default::default()
        },
        SearchConfig {
            step: Step::Mul(1.0),
            ..Default::default()
        },
        SearchConfig {
            step: Step::Add(0.0),
            ..Default::default()
        },
        SearchConfig {
            precision: 0.0,
            ..Default::default()
        },
        SearchConfig {
            repeats: 0,
            ..Default::default()
        },
        SearchConfig {
            start: 20_000.0,
            ..Default::default()
        },
    ] {
        assert!(Search::new(cfg).is_err());
    }
}

/// A simulated server of `capacity` loaded by a client that cannot offer
/// more than `client_max` sessions/s: above it the run is INVALID (and, as
/// on a saturated machine, the server's figures may look fine or not).
fn limited(rate: f64, capacity: f64, client_max: f64) -> Outcome {
    let mut o = outcome(rate, capacity);
    if rate > client_max {
        o.client_valid = false;
        o.client_invalid_reasons = vec![format!(
            "the client saturated its CPU (199 % of 2 core(s)) at {rate}/s"
        )];
    }
    o
}

#[test]
fn an_invalid_client_stops_the_climb_and_neither_passes_nor_fails() {
    // the bug: three INVALID points counted as passes gave "at least 1000"
    let cfg = SearchConfig {
        start: 1.0,
        max_rate: 1000.0,
        ..Default::default()
    };
    let mut s = Search::new(cfg).unwrap();
    let a = s
        .run(|r, _| Ok::<_, ()>(limited(r, 10_000.0, 100.0)))
        .unwrap();
    let rates: Vec<f64> = s.points.iter().map(|p| p.rate).collect();
    assert_eq!(rates, [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0]);
    let last = s.points.last().unwrap();
    assert_eq!(last.verdict, Verdict::Invalid);
    assert!(!last.passed);
    assert!(last
        .reason
        .as_deref()
        .unwrap()
        .contains("client INVALID: the client saturated"));
    assert_eq!(a.ending, Some(Ending::ClientLimited));
    assert_eq!(a.client_limited_at, Some(128.0));
    assert_eq!(
        a.capacity,
        Some(64.0),
        "the answer comes from valid points only"
    );
    assert_eq!(a.lowest_failed, None, "an INVALID point is not a failure");
    assert_eq!(s.next_rate(), None);
    assert_eq!(s.best_point().unwrap().rate, 64.0);
    assert!(s.lowest_failed_point().is_none());
}

#[test]
fn an_invalid_point_that_failed_is_still_only_invalid() {
    // the server is overloaded at 16 and the client INVALID there too: the
    // failures cannot be trusted either
    let cfg = SearchConfig::default();
    let mut s = Search::new(cfg).unwrap();
    let a = s.run(|r, _| Ok::<_, ()>(limited(r, 10.0, 8.0))).unwrap();
    let p16 = s.points.iter().find(|p| p.rate == 16.0).unwrap();
    assert!(p16.runs[0].failed_sessions > 0);
    assert_eq!(p16.verdict, Verdict::Invalid);
    assert_eq!(a.lowest_failed, None);
    assert_eq!(a.capacity, Some(8.0));
    assert_eq!(a.ending, Some(Ending::ClientLimited));
}

#[test]
fn an_invalid_first_point_gives_no_answer() {
    let mut s = Search::new(SearchConfig::default()).unwrap();
    let a = s.run(|r, _| Ok::<_, ()>(limited(r, 50.0, 0.5))).unwrap();
    assert_eq!(s.points.len(), 1);
    assert_eq!(a.capacity, None);
    assert_eq!(a.lowest_failed, None);
    assert_eq!(a.client_limited_at, Some(1.0));
    assert_eq!(a.ending, Some(Ending::ClientLimited));
}

#[test]
fn an_invalid_point_while_bisecting_ends_the_search() {
    // 1..16 pass, 32 fails (server), 24 is INVALID (client): stop, keep 16
    let cfg = SearchConfig {
        precision: 0.01,
        ..Default::default()
    };
    let mut s = Search::new(cfg).unwrap();
    let a = s
        .run(|r, _| {
            let mut o = outcome(r, 20.0);
            if r == 24.0 {
                o.client_valid = false;
            }
            Ok::<_, ()>(o)
        })
        .unwrap();
    let rates: Vec<f64> = s.points.iter().map(|p| p.rate).collect();
    assert_eq!(rates, [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 24.0]);
    assert_eq!(a.capacity, Some(16.0));
    assert_eq!(a.lowest_failed, Some(32.0));
    assert_eq!(a.client_limited_at, Some(24.0));
    assert_eq!(a.ending, Some(Ending::ClientLimited));
    assert!(s.points[6]
        .reason
        .as_deref()
        .unwrap()
        .contains("marked the run invalid"));
}

#[test]
fn an_invalid_repetition_settles_its_rate_at_once() {
    let cfg = SearchConfig {
        repeats: 3,
        ..Default::default()
    };
    let mut calls = Vec::new();
    let mut s = Search::new(cfg).unwrap();
    let a = s
        .run(|r, k| {
            calls.push((r, k));
            let mut o = outcome(r, 100.0);
            o.client_valid = !(r == 2.0 && k == 1);
            Ok::<_, ()>(o)
        })
        .unwrap();
    assert_eq!(calls, [(1.0, 0), (1.0, 1), (1.0, 2), (2.0, 0), (2.0, 1)]);
    assert_eq!(s.points[1].verdict, Verdict::Invalid);
    assert_eq!(s.points[1].runs.len(), 2);
    assert!(!s.points[1].client_valid());
    assert_eq!(a.capacity, Some(1.0));
}

#[test]
fn a_search_file_round_trips() {
    let mut s = Search::new(SearchConfig::default()).unwrap();
    s.run(|r, _| {
        let mut o = limited(r, 3.0, 1e9);
        o.extra.results = Some(format!("points/rate-{r}"));
        o.extra.disk_mb_s = Some(r * 2.0);
        Ok::<_, ()>(o)
    })
    .unwrap();
    let text = serde_json::to_string(&s).unwrap();
    let back: Search = serde_json::from_str(&text).unwrap();
    assert_eq!(back.points, s.points);
    assert_eq!(back.answer(), s.answer());
    let p = s.best_point().unwrap();
    assert_eq!(p.mean_of(|o| o.extra.disk_mb_s).unwrap().mean, p.rate * 2.0);
    // absent figures are left out of the file
    assert!(!text.contains("server_stats_before"));
}

proptest! {
    /// For any monotone server the answer brackets its capacity within
    /// the precision, with a bounded number of points.
    #[test]
    fn brackets_any_capacity(cap in 0.02f64..5000.0, start in 0.05f64..100.0, mul in 1.2f64..4.0, prec in 0.01f64..0.5) {
        let cfg = SearchConfig { start, step: Step::Mul(mul), precision: prec, max_points: 200, ..Default::default() };
        let (s, a) = search(cfg, cap);
        prop_assert_eq!(a.ending, Some(Ending::Converged));
        let (lo, hi) = (a.capacity.unwrap(), a.lowest_failed.unwrap());
        prop_assert!(lo <= cap && cap < hi);
        prop_assert!(hi - lo <= prec * lo + 1e-9);
        prop_assert!(s.points.len() < 60);
    }

    /// Whatever the client's limit, no answer comes from an INVALID point,
    /// no rate above the first INVALID one is tried, and the search says so.
    #[test]
    fn invalid_points_never_answer(cap in 0.05f64..2000.0, client in 0.05f64..2000.0, start in 0.05f64..50.0, mul in 1.2f64..4.0) {
        let cfg = SearchConfig { start, step: Step::Mul(mul), precision: 0.05, max_points: 200, ..Default::default() };
        let mut s = Search::new(cfg).unwrap();
        let a = s.run(|r, _| Ok::<_, ()>(limited(r, cap, client))).unwrap();
        for p in &s.points {
            prop_assert_eq!(p.verdict == Verdict::Invalid, p.rate > client);
            prop_assert_eq!(p.passed, p.verdict == Verdict::Pass);
        }
        let invalid: Vec<f64> = s.points.iter().filter(|p| p.verdict == Verdict::Invalid).map(|p| p.rate).collect();
        prop_assert!(invalid.len() <= 1);
        if let Some(&r) = invalid.first() {
            prop_assert_eq!(s.points.last().unwrap().rate, r, "the search stops at the INVALID point");
            prop_assert_eq!(a.ending, Some(Ending::ClientLimited));
            prop_assert_eq!(a.client_limited_at, Some(r));
        }
        if let Some(c) = a.capacity {
            prop_assert!(c <= client && c <= cap);
        }
    }
}

/// A scripted oracle: the verdicts of the rates in the order they are
/// asked, panicking on a rate the script did not expect.
fn scripted(cfg: SearchConfig, script: &[(f64, bool)]) -> (Search, Answer) {
    let mut s = Search::new(cfg).unwrap();
    let mut asked = 0;
    let a = s
        .run(|r, _| {
            let (want, pass) = *script
                .get(asked)
                .unwrap_or_else(|| panic!("rate {r} asked after the script's end"));
            assert!((r - want).abs() < 1e-9, "asked {r}, the script has {want}");
            asked += 1;
            Ok::<_, ()>(outcome(r, if pass { f64::INFINITY } else { 0.0 }))
        })
        .unwrap();
    assert_eq!(
        asked,
        script.len(),
        "the search stopped before the script's end"
    );
    (s, a)
}

fn additive(start: f64, by: f64) -> SearchConfig {
    SearchConfig {
        mode: SearchMode::Additive,
        start,
        step: Step::Add(by),
        ..Default::default()
    }
}

#[test]
fn additive_mode_stops_at_the_first_failing_step() {
    // the thesis's runs: 10, 20, 30 ... sessions/s until one fails
    let (s, a) = scripted(
        additive(10.0, 10.0),
        &[(10.0, true), (20.0, true), (30.0, true), (40.0, false)],
    );
    assert_eq!(a.capacity, Some(30.0));
    assert_eq!(a.lowest_failed, Some(40.0));
    assert_eq!(a.ending, Some(Ending::Converged));
    assert_eq!(s.next_rate(), None, "no bisection after the failing step");
    // the same server under bisection tries 35 next
    let mut b = Search::new(SearchConfig {
        mode: SearchMode::Bisect,
        ..additive(10.0, 10.0)
    })
    .unwrap();
    for (r, pass) in [(10.0, true), (20.0, true), (30.0, true), (40.0, false)] {
        b.record(r, outcome(r, if pass { f64::INFINITY } else { 0.0 }));
    }
    assert_eq!(b.next_rate(), Some(35.0));
}

#[test]
fn additive_mode_ignores_a_later_pass_it_never_tries() {
    // a non-monotone server (fails at 20, would pass at 30): additive
    // stops at 20 and reports 10, never looking above
    let (s, a) = scripted(additive(10.0, 10.0), &[(10.0, true), (20.0, false)]);
    assert_eq!(a.capacity, Some(10.0));
    assert!(!a.non_monotone);
    assert_eq!(s.points.len(), 2);
}

#[test]
fn additive_mode_steps_down_when_the_start_fails() {
    let (_, a) = scripted(
        additive(30.0, 10.0),
        &[(30.0, false), (20.0, false), (10.0, true)],
    );
    assert_eq!(a.capacity, Some(10.0));
    assert_eq!(a.lowest_failed, Some(20.0));
    assert_eq!(a.ending, Some(Ending::Converged));
    // down to the minimum rate: below it, nothing passed
    let cfg = SearchConfig {
        min_rate: 5.0,
        ..additive(10.0, 10.0)
    };
    let (_, a) = scripted(cfg, &[(10.0, false), (5.0, false)]);
    assert_eq!(a.capacity, None);
    assert_eq!(a.ending, Some(Ending::BelowMinRate));
}

#[test]
fn additive_mode_ends_at_the_maximum_rate_and_the_budget() {
    let cfg = SearchConfig {
        max_rate: 25.0,
        ..additive(10.0, 10.0)
    };
    let (_, a) = scripted(cfg, &[(10.0, true), (20.0, true), (25.0, true)]);
    assert_eq!(a.capacity, Some(25.0));
    assert_eq!(a.ending, Some(Ending::AboveMaxRate));
    let cfg = SearchConfig {
        max_points: 2,
        ..additive(10.0, 10.0)
    };
    let (_, a) = scripted(cfg, &[(10.0, true), (20.0, true)]);
    assert_eq!(a.ending, Some(Ending::OutOfPoints));
}

#[test]
fn additive_mode_repeats_and_an_invalid_client_still_rule() {
    // a rate passes only if every repetition passes: the second run at 20
    // fails, which is the failing step
    let cfg = SearchConfig {
        repeats: 2,
        ..additive(10.0, 10.0)
    };
    let mut s = Search::new(cfg).unwrap();
    let runs = [(10.0, true), (10.0, true), (20.0, true), (20.0, false)];
    for (r, pass) in runs {
        assert_eq!(s.next_rate(), Some(r));
        s.record(r, outcome(r, if pass { f64::INFINITY } else { 0.0 }));
    }
    assert_eq!(s.next_rate(), None);
    assert_eq!(s.answer().capacity, Some(10.0));
    // an INVALID point ends it as client-limited, not as a failing step
    let mut s = Search::new(additive(10.0, 10.0)).unwrap();
    s.record(10.0, outcome(10.0, f64::INFINITY));
    let mut bad = outcome(20.0, f64::INFINITY);
    bad.client_valid = false;
    s.record(20.0, bad);
    assert_eq!(s.answer().ending, Some(Ending::ClientLimited));
    assert_eq!(s.answer().capacity, Some(10.0));
}

#[test]
fn additive_mode_needs_an_increment_and_old_files_read_as_bisect() {
    let e = Search::new(SearchConfig {
        step: Step::Mul(2.0),
        ..additive(1.0, 1.0)
    })
    .unwrap_err();
    assert!(e.to_string().contains("+D"), "{e}");
    let mut v = serde_json::to_value(SearchConfig::default()).unwrap();
    v.as_object_mut().unwrap().remove("mode");
    let c: SearchConfig = serde_json::from_value(v).unwrap();
    assert_eq!(c.mode, SearchMode::Bisect);
    let v = serde_json::to_value(additive(1.0, 1.0)).unwrap();
    assert_eq!(v["mode"], "additive");
}

#[test]
fn search_mode_grammar() {
    let x2 = Step::Mul(2.0);
    assert_eq!(
        parse_mode("bisect", 1.0, x2).unwrap(),
        (SearchMode::Bisect, 1.0, x2)
    );
    assert_eq!(
        parse_mode("additive:10:2.5", 1.0, x2).unwrap(),
        (SearchMode::Additive, 10.0, Step::Add(2.5))
    );
    assert_eq!(
        parse_mode("additive", 3.0, Step::Add(1.0)).unwrap(),
        (SearchMode::Additive, 3.0, Step::Add(1.0))
    );
    for (bad, says) in [
        ("additive", "x2"),
        ("additive:10", "additive:START:STEP"),
        ("additive:ten:1", "START `ten`"),
        ("additive:1:-1", "STEP `-1`"),
        ("additive:1:0", "STEP `0`"),
        ("additive:1:NaN", "STEP `NaN`"),
        ("binary", "use `bisect`"),
    ] {
        let e = parse_mode(bad, 1.0, x2).unwrap_err().to_string();
        assert!(e.contains(says) && e.contains(bad), "{bad}: {e}");
    }
}
