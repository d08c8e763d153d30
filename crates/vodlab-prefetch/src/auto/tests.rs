//! The automatic prefetch size and square-root sizes, in virtual time.

use super::*;
use crate::PolicySpec;

const MB: u64 = 1 << 20;
const HALF: u64 = 512 << 10;
/// 0.05 MB/s (the SD rate of the eviction example [T1120]) in bits/s.
const SD_BPS: u64 = 419_430;

fn info(length: u64, resident: bool, bitrate_bps: Option<u64>) -> RequestInfo<'static> {
    RequestInfo {
        session: "s1",
        file: 1,
        offset: 0,
        length,
        file_size: 1 << 40,
        bitrate_bps,
        resident,
        open_ended: false,
    }
}

/// What one interval's traffic looks like.
#[derive(Debug, Clone, Copy)]
struct Traffic {
    score: f64,
    busy: f64,
    /// Evicted bytes as a fraction of the requested bytes.
    evicted: f64,
    /// Time from prefetch to eviction.
    eviction_time: Duration,
    bitrate_bps: Option<u64>,
}

fn busy(score: f64) -> Traffic {
    Traffic {
        score,
        busy: 0.8,
        evicted: 0.0,
        eviction_time: Duration::ZERO,
        bitrate_bps: None,
    }
}

/// Drives an [`Auto`] second by second in virtual time.
struct Sim {
    a: Auto,
    now: Instant,
    /// p before each tick and after it, with the ramp's extent then.
    steps: Vec<(f64, f64, f64)>,
}

impl Sim {
    fn new(cfg: AutoConfig) -> Self {
        cfg.validate().unwrap();
        let now = Instant::now();
        let mut a = Auto::new(cfg);
        a.on_tick(now);
        Self {
            a,
            now,
            steps: Vec::new(),
        }
    }

    fn tick(&mut self) {
        self.now += Duration::from_secs(1);
        let before = self.a.p;
        let extent = (self.a.target as f64 - self.a.ramp_from).abs();
        self.a.on_tick(self.now);
        self.steps.push((before, self.a.p, extent));
    }

    /// Ticks until p is at its target and an interval is being measured.
    fn settle(&mut self) {
        for _ in 0..100_000 {
            if self.a.ramp_at.is_none() && self.a.since.is_some() {
                return;
            }
            self.tick();
        }
        panic!("never settled");
    }

    /// One measured interval with this traffic; its decision.
    fn interval(&mut self, t: Traffic) -> Decision {
        self.settle();
        let secs = self.a.cfg.interval.as_secs_f64();
        // read time = busy × interval; requested bytes chosen so that
        // mspt × miss ratio = read_ms × 128 KiB / requested = score
        let read = Duration::from_secs_f64(t.busy * secs);
        let requested = (read.as_secs_f64() * 1e3 * TRANSACTION / t.score).round() as u64;
        let mut s = SessionState::default();
        self.a.on_request(
            self.now,
            &info(requested, true, t.bitrate_bps),
            &mut s,
            None,
        );
        self.a.on_read_complete(self.now, 3 * requested / 2, read);
        if t.evicted > 0.0 {
            self.a.on_evicted(
                self.now,
                (t.evicted * requested as f64) as u64,
                t.eviction_time,
            );
        }
        let n = self.a.intervals;
        while self.a.intervals == n {
            self.tick();
        }
        self.a.log.back().unwrap().decision
    }
}

fn cfg() -> AutoConfig {
    AutoConfig::default()
}

#[test]
fn the_gradient_rule_in_every_case() {
    use Decision::*;
    let s = 10.0;
    // a lower neighbour: move to it
    assert_eq!(gradient(s, Some(9.0), Some(11.0)), MoveSmaller);
    assert_eq!(gradient(s, Some(12.0), Some(9.0)), MoveLarger);
    assert_eq!(gradient(s, None, Some(9.0)), MoveLarger);
    assert_eq!(gradient(s, Some(9.0), None), MoveSmaller);
    // both lower: the lower one; a tie grows
    assert_eq!(gradient(s, Some(8.0), Some(9.0)), MoveSmaller);
    assert_eq!(gradient(s, Some(9.0), Some(8.0)), MoveLarger);
    assert_eq!(gradient(s, Some(9.0), Some(9.0)), MoveLarger);
    // the smaller is worse and the larger unmeasured: try it, and the mirror
    assert_eq!(gradient(s, Some(11.0), None), TryLarger);
    assert_eq!(gradient(s, None, Some(11.0)), TrySmaller);
    // neither measured: grow
    assert_eq!(gradient(s, None, None), TryLarger);
    // both worse, or the same: a minimum
    assert_eq!(gradient(s, Some(11.0), Some(12.0)), Minimum);
    assert_eq!(gradient(s, Some(10.0), Some(10.0)), Minimum);
    // a bound is an infinitely bad neighbour
    assert_eq!(gradient(s, Some(f64::INFINITY), None), TryLarger);
    assert_eq!(gradient(s, None, Some(f64::INFINITY)), TrySmaller);
}

#[test]
fn grows_when_no_neighbour_is_measured() {
    let mut sim = Sim::new(cfg());
    assert_eq!(sim.interval(busy(10.0)), Decision::TryLarger);
    assert_eq!(sim.a.target(), 4 * MB + HALF);
    assert_eq!(sim.a.score(4 * MB), Some(10.0));
}

#[test]
fn moves_to_a_lower_neighbour_and_tries_the_unmeasured_one() {
    let mut sim = Sim::new(cfg());
    sim.interval(busy(10.0)); // 4 MB: grow
                              // 4.5 MB is worse than 4 MB: back to the lower neighbour
    assert_eq!(sim.interval(busy(12.0)), Decision::MoveSmaller);
    assert_eq!(sim.a.target(), 4 * MB);
    // at 4 MB again: the larger is worse, the smaller unmeasured: try it
    assert_eq!(sim.interval(busy(10.0)), Decision::TrySmaller);
    assert_eq!(sim.a.target(), 3 * MB + HALF);
    // 3.5 MB is better still: the mirror of the first rule keeps going down
    assert_eq!(sim.interval(busy(9.0)), Decision::TrySmaller);
    assert_eq!(sim.a.target(), 3 * MB);
    assert_eq!(sim.interval(busy(9.5)), Decision::MoveLarger);
    assert_eq!(sim.a.target(), 3 * MB + HALF);
}

#[test]
fn deflates_every_other_score_at_a_minimum_until_a_neighbour_is_retried() {
    let mut sim = Sim::new(cfg());
    sim.interval(busy(10.0)); // 4 -> 4.5
    sim.interval(busy(12.0)); // 4.5 -> 4
    sim.interval(busy(10.0)); // 4 -> 3.5
    assert_eq!(sim.interval(busy(11.0)), Decision::MoveLarger); // 3.5 -> 4
                                                                // at 4 MB both neighbours are worse: a minimum; 4 MB's own score is the
                                                                // fresh one, the others shrink by 5 %
    assert_eq!(sim.interval(busy(10.0)), Decision::Minimum);
    assert_eq!(sim.a.target(), 4 * MB);
    let near = |a: Option<f64>, b: f64| (a.unwrap() - b).abs() < 1e-6;
    assert!(near(sim.a.score(4 * MB), 10.0));
    assert!(near(sim.a.score(3 * MB + HALF), 11.0 * 0.95));
    assert!(near(sim.a.score(4 * MB + HALF), 12.0 * 0.95));
    // 11 × 0.95 = 10.45 is still worse: a second minimum; 11 × 0.95² =
    // 9.93 < 10: then 3.5 MB is retried
    assert_eq!(sim.interval(busy(10.0)), Decision::Minimum);
    assert_eq!(sim.interval(busy(10.0)), Decision::MoveSmaller);
    assert_eq!(sim.a.target(), 3 * MB + HALF);
    assert_eq!(sim.a.by_decision.get("minimum"), Some(&2));
}

#[test]
fn nothing_changes_below_the_busy_threshold() {
    let mut sim = Sim::new(cfg());
    for _ in 0..5 {
        let t = Traffic {
            busy: 0.59,
            evicted: 0.5,
            eviction_time: Duration::from_secs(10),
            bitrate_bps: Some(SD_BPS),
            ..busy(10.0)
        };
        assert_eq!(sim.interval(t), Decision::Inactive);
        assert_eq!((sim.a.target(), sim.a.current()), (4 * MB, 4 * MB));
    }
    assert!(sim.a.scores.is_empty(), "a light-load score is not stored");
    let r = sim.a.log.back().unwrap();
    assert!((r.busy - 0.59).abs() < 1e-6 && r.score.is_some());
    // at the threshold it acts
    let t = Traffic {
        busy: 0.6,
        ..busy(10.0)
    };
    assert_eq!(sim.interval(t), Decision::TryLarger);
}

#[test]
fn evictions_over_the_threshold_jump_to_eviction_time_times_bit_rate() {
    // the SD demo run [T1120]: start 8 MB, evictions after 60 s at 0.05 MB/s
    let mut sim = Sim::new(AutoConfig {
        start: 8 * MB,
        ..cfg()
    });
    let t = Traffic {
        evicted: 0.2,
        eviction_time: Duration::from_secs(60),
        bitrate_bps: Some(SD_BPS),
        ..busy(10.0)
    };
    assert_eq!(sim.interval(t), Decision::EvictionJump);
    // 60 s × 0.05 MB/s = 3.0 MB (on the 0.5 MB grid)
    assert_eq!(sim.a.target(), 3 * MB);
    let r = *sim.a.log.back().unwrap();
    assert_eq!((r.p, r.target, r.evictions), (8 * MB, 3 * MB, 1));
    assert!((r.eviction_time_s.unwrap() - 60.0).abs() < 1e-9);
    assert!((r.evicted_ratio - 0.2).abs() < 1e-6);
    // gradually: after 30 of the 60 s ramp p is half-way
    for _ in 0..30 {
        sim.tick();
    }
    let half = (8 * MB + 3 * MB) as f64 / 2.0;
    assert!((sim.a.p - half).abs() < 1.0, "{}", sim.a.p);
    // 5 % exactly is not over the threshold: the gradient rule instead
    let mut sim = Sim::new(AutoConfig {
        start: 8 * MB,
        ..cfg()
    });
    let t = Traffic { evicted: 0.05, ..t };
    assert_eq!(sim.interval(t), Decision::TryLarger);
}

#[test]
fn the_eviction_jump_only_shrinks_and_needs_a_bit_rate() {
    // 200 s × 0.05 MB/s = 10 MB > 4 MB: the gradient rule instead
    let mut sim = Sim::new(cfg());
    let t = Traffic {
        evicted: 0.5,
        eviction_time: Duration::from_secs(200),
        bitrate_bps: Some(SD_BPS),
        ..busy(10.0)
    };
    assert_eq!(sim.interval(t), Decision::TryLarger);
    // no bit rate known: no jump
    let mut sim = Sim::new(cfg());
    let t = Traffic {
        eviction_time: Duration::from_secs(10),
        bitrate_bps: None,
        ..t
    };
    assert_eq!(sim.interval(t), Decision::TryLarger);
    // with square-root sizes the reference rate sizes p: 60 s × 0.25 MB/s
    let mut sim = Sim::new(AutoConfig {
        start: 16 * MB,
        scaling: Some(Scaling {
            reference_kbps: 2097.152,
            exponent: 0.5,
        }),
        ..cfg()
    });
    let t = Traffic {
        eviction_time: Duration::from_secs(60),
        bitrate_bps: Some(SD_BPS),
        ..t
    };
    assert_eq!(sim.interval(t), Decision::EvictionJump);
    assert_eq!(sim.a.target(), 15 * MB);
}

#[test]
fn p_moves_gradually_and_the_measurement_waits_for_it() {
    let mut sim = Sim::new(cfg());
    sim.interval(busy(10.0)); // target 4.5 MB
    let ramp = sim.a.cfg.ramp.as_secs();
    sim.steps.clear();
    sim.settle();
    // 60 ticks of step/60 each, never more
    assert_eq!(sim.steps.len() as u64, ramp);
    let per_tick = HALF as f64 / ramp as f64;
    for &(before, after, _) in &sim.steps {
        assert!(after > before);
        assert!(after - before <= per_tick + 1e-6, "{before} -> {after}");
    }
    assert_eq!(sim.a.current(), 4 * MB + HALF);
    // the interval after it is measured from the settled size: 180 s more
    let start = sim.now;
    sim.interval(busy(9.0));
    assert_eq!(sim.now - start, sim.a.cfg.interval);
    assert_eq!(sim.a.log.back().unwrap().p, 4 * MB + HALF);
}

/// Figure 4.3 (HD, start 4 MB) [T1116–T1118]: p holds while the server is
/// not busy, grows to a local minimum (here a noisy score at 6.5 MB),
/// deflation makes it retry the larger size, and it settles at 7.5 MB.
#[test]
fn a_scripted_hd_run_follows_figure_4_3() {
    let mut sim = Sim::new(cfg());
    // the true score: lowest at 7.5 MB
    let f = |p: u64| {
        let mb = p as f64 / MB as f64;
        10.0 + 4.0 * (mb - 7.5) * (mb - 7.5)
    };
    let mut trace = Vec::new();
    // light load first: hold at 4 MB
    for _ in 0..3 {
        let t = Traffic {
            busy: 0.3,
            ..busy(f(sim.a.target()))
        };
        assert_eq!(sim.interval(t), Decision::Inactive);
        assert_eq!(sim.a.current(), 4 * MB);
    }
    let mut noisy_once = true;
    for _ in 0..60 {
        let p = sim.a.target();
        let mut s = f(p);
        if p == 6 * MB + HALF && noisy_once {
            // a burst of load makes 6.5 MB look bad once (22 instead of 14)
            s = 22.0;
            noisy_once = false;
        }
        let d = sim.interval(busy(s));
        trace.push((p, d, sim.a.target()));
    }
    // it grew to 6.5 MB, stepped back, and found a minimum at 6 MB
    let first_min = trace
        .iter()
        .position(|&(_, d, _)| d == Decision::Minimum)
        .unwrap();
    assert_eq!(trace[first_min].0, 6 * MB, "{trace:?}");
    assert!(trace[..first_min]
        .iter()
        .all(|&(p, _, _)| p <= 6 * MB + HALF));
    // then deflation made it retry 6.5 MB and it went on to 7.5 MB
    let past = trace
        .iter()
        .position(|&(p, _, _)| p == 7 * MB)
        .expect("retried past the local minimum");
    assert!(past > first_min);
    // settled: in the last 30 intervals p stays near 7.5 MB and is there
    // more than at any other size. Deflation keeps lowering the scores of
    // sizes not visited, so the neighbours (and now and then 6.5 MB) are
    // re-measured: the price of escaping local minima.
    let tail = &trace[30..];
    assert!(
        tail.iter()
            .all(|&(p, _, _)| (6 * MB + HALF..=8 * MB).contains(&p)),
        "{tail:?}"
    );
    let count = |size: u64| tail.iter().filter(|&&(p, _, _)| p == size).count();
    let at = count(7 * MB + HALF);
    assert!(at * 5 >= tail.len() * 2, "{tail:?}");
    for other in [6 * MB + HALF, 7 * MB, 8 * MB] {
        assert!(count(other) < at);
    }
}

#[test]
fn parameters_are_validated_naming_the_key() {
    let err = |f: fn(&mut AutoConfig)| {
        let mut c = cfg();
        f(&mut c);
        c.validate().unwrap_err()
    };
    assert_eq!(cfg().validate(), Ok(()));
    assert!(err(|c| c.min = 100).starts_with("min:"));
    assert!(err(|c| c.max = c.min - 1).starts_with("max:"));
    assert!(err(|c| c.start = 100 << 20).starts_with("start:"));
    assert!(err(|c| c.step = 0).starts_with("step:"));
    assert!(err(|c| c.step = 64 << 20).starts_with("step:"));
    assert!(err(|c| c.interval = Duration::ZERO).starts_with("interval:"));
    assert!(err(|c| c.ramp = Duration::from_secs(181)).starts_with("ramp:"));
    assert!(err(|c| c.deflation = 0.0).starts_with("deflation:"));
    assert!(err(|c| c.deflation = 1.0).starts_with("deflation:"));
    assert!(err(|c| c.busy = 1.5).starts_with("busy:"));
    assert!(err(|c| c.busy = f64::NAN).starts_with("busy:"));
    assert!(err(|c| c.evict = 0.0).starts_with("evict:"));
    assert!(err(|c| c.scaling = Some(Scaling {
        reference_kbps: 0.0,
        exponent: 0.5
    }))
    .starts_with("ref:"));
    assert!(err(|c| c.scaling = Some(Scaling {
        reference_kbps: 400.0,
        exponent: -1.0
    }))
    .starts_with("exp:"));
    // the same through the policy syntax, with the key in the message
    for (bad, key) in [
        ("auto:step=0", "step:"),
        ("auto:busy=2", "busy:"),
        ("auto:interval=x", "interval:"),
        ("auto:deflation=1", "deflation:"),
        ("auto:start=9G", "start:"),
        ("auto:evict_of=time", "evict_of:"),
        ("auto:colour=red", "unknown key `colour`"),
        ("auto:exp=1", "exp:"),
        ("fixed:4M,ref=0", "ref:"),
        ("fixed:4M,busy=1", "unknown key `busy`"),
    ] {
        let e = bad.parse::<PolicySpec>().unwrap_err().to_string();
        assert!(e.contains(key), "{bad}: {e}");
    }
}

#[test]
fn policies_parse_print_and_build() {
    assert_eq!(
        "auto".parse::<PolicySpec>(),
        Ok(PolicySpec::Auto(AutoConfig::default()))
    );
    let p: PolicySpec = "auto:start=wd10efrx-sd,interval=60,step=256K,busy=0.5,evict_of=prefetched,ramp=10,ref=2095"
        .parse()
        .unwrap();
    let PolicySpec::Auto(a) = p else {
        panic!("{p:?}")
    };
    assert_eq!(a.start, 3 * MB, "WD Red SD start [T1213]");
    assert_eq!(a.interval, Duration::from_secs(60));
    assert_eq!(a.step, 256 << 10);
    assert_eq!(a.evict_of, EvictBase::Prefetched);
    assert_eq!(
        a.scaling.map(|s| (s.reference_kbps, s.exponent)),
        Some((2095.0, 0.5))
    );
    assert_eq!(p.to_string().parse::<PolicySpec>(), Ok(p));
    assert_eq!(start_preset("st1000dm003-hd"), Some(3 * MB));
    assert_eq!(start_preset("wd10efrx-xd"), None);
    let s: PolicySpec = "fixed:6M,ref=2095".parse().unwrap();
    assert_eq!(s.to_string(), "fixed:6M,ref=2095");
    assert_eq!(s.fixed_bytes(), Some(6 * MB));
    let e: PolicySpec = "fixed:6M,ref=2095,exp=1".parse().unwrap();
    assert_eq!(e.to_string().parse::<PolicySpec>(), Ok(e));
    // built: an auto controller reports its state, a fixed one does not
    let mut c = p.build();
    let v = crate::PrefetchCore::new(p.build()).auto_view().unwrap();
    assert_eq!(
        (v.current_bytes, v.target_bytes, v.intervals),
        (3 * MB, 3 * MB, 0)
    );
    let mut st = SessionState::default();
    let d = c.on_request(Instant::now(), &info(1000, false, None), &mut st, None);
    assert_eq!(
        d,
        PrefetchDecision::Prefetch {
            offset: 0,
            len: 3 * MB
        }
    );
    assert!(crate::PrefetchCore::new(PolicySpec::Fixed(MB).build())
        .auto_view()
        .is_none());
}

#[test]
fn square_root_sizes_follow_the_thesis_numbers() {
    // SD 419 and HD 2,095 kbit/s [T1187]: sqrt(419/2095) = 0.447 [T1284]
    let s = Scaling {
        reference_kbps: 2095.0,
        exponent: 0.5,
    };
    let f = s.size(1.0, Some(419_000));
    assert!((f - 0.447).abs() < 0.005, "{f}");
    // HD 6 MB -> SD 2.68 MB
    let sd = s.size(6.0 * MB as f64, Some(419_000)) / MB as f64;
    assert!((sd - 2.68).abs() < 0.005, "{sd}");
    assert_eq!(s.size(6.0, Some(2_095_000)), 6.0);
    assert_eq!(
        s.size(6.0, None),
        6.0,
        "an unknown rate gets the reference size"
    );
    // proportional and same-size exponents
    let prop = Scaling { exponent: 1.0, ..s };
    assert!((prop.size(6.0, Some(419_000)) - 1.2).abs() < 1e-9);
    let same = Scaling { exponent: 0.0, ..s };
    assert_eq!(same.size(6.0, Some(419_000)), 6.0);
    // the fixed policy with ref: an SD miss prefetches 2.68 MB, an HD one 6 MB
    let mut c = "fixed:6M,ref=2095".parse::<PolicySpec>().unwrap().build();
    let mut st = SessionState::default();
    let now = Instant::now();
    let len = |c: &mut Box<dyn PrefetchController>, st: &mut SessionState, b| match c.on_request(
        now,
        &info(1000, false, Some(b)),
        st,
        None,
    ) {
        PrefetchDecision::Prefetch { len, .. } => len,
        PrefetchDecision::None => 0,
    };
    let sd = len(&mut c, &mut st, 419_000);
    assert!((sd as f64 / MB as f64 - 2.683).abs() < 0.001, "{sd}");
    assert_eq!(len(&mut c, &mut st, 2_095_000), 6 * MB);
    // auto with ref sizes the reference rate; SD follows
    let mut a = Auto::new(AutoConfig {
        start: 6 * MB,
        scaling: Some(s),
        ..cfg()
    });
    assert_eq!(a.size_for(Some(2_095_000)), 6 * MB);
    assert_eq!(a.size_for(Some(419_000)), sd);
    assert_eq!(
        a.on_request(now, &info(1000, true, Some(419_000)), &mut st, None),
        PrefetchDecision::None
    );
}

mod bounded {
    use super::*;
    use proptest::prelude::*;

    fn traffic() -> impl Strategy<Value = Traffic> {
        (
            1.0f64..50.0,
            0.0f64..1.0,
            prop_oneof![Just(0.0), 0.0f64..1.0],
            1u64..600,
            prop_oneof![Just(None), (100_000u64..20_000_000).prop_map(Some)],
        )
            .prop_map(|(score, busy, evicted, ev_s, bitrate_bps)| Traffic {
                score,
                busy,
                evicted,
                eviction_time: Duration::from_secs(ev_s),
                bitrate_bps,
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// Whatever the traffic, p stays in [min, max], moves at most
        /// |target - where the ramp began| × 1 s / ramp per tick, and a
        /// gradient decision moves the target by exactly one step.
        #[test]
        fn p_stays_in_bounds_and_moves_gradually(
            start_steps in 0u64..20,
            ramp_s in 1u64..120,
            script in proptest::collection::vec(traffic(), 1..25),
        ) {
            let c = AutoConfig {
                start: 2 * MB + start_steps * HALF,
                min: 2 * MB,
                max: 12 * MB,
                ramp: Duration::from_secs(ramp_s),
                interval: Duration::from_secs(120),
                ..cfg()
            };
            let mut sim = Sim::new(c);
            for t in script {
                let before = sim.a.target();
                let d = sim.interval(t);
                let after = sim.a.target();
                prop_assert!((c.min..=c.max).contains(&after));
                match d {
                    Decision::MoveLarger | Decision::TryLarger => prop_assert_eq!(after, before + c.step),
                    Decision::MoveSmaller | Decision::TrySmaller => prop_assert_eq!(after + c.step, before),
                    Decision::EvictionJump => prop_assert!(after < before),
                    _ => prop_assert_eq!(after, before),
                }
            }
            sim.settle();
            for &(b, a, extent) in &sim.steps {
                prop_assert!((c.min as f64..=c.max as f64).contains(&a));
                prop_assert!((a - b).abs() <= extent / ramp_s as f64 + 1e-6, "{} -> {} (extent {})", b, a, extent);
            }
        }
    }
}

/// Reads of connections that went away never reach `on_read_complete`;
/// when the server reports the devices' totals, those give busy, mspt and
/// the miss ratio instead.
#[test]
fn the_devices_reads_replace_the_connections_reports() {
    let mut sim = Sim::new(cfg());
    // the connections report 30 % busy (inactive on their own) ...
    sim.settle();
    let mut s = SessionState::default();
    let requested = 1000 * TRANSACTION as u64;
    sim.a
        .on_request(sim.now, &info(requested, true, None), &mut s, None);
    sim.a
        .on_read_complete(sim.now, requested / 2, Duration::from_secs(54));
    // ... the devices read 1.2 x the requested bytes, busy 90 % of 180 s
    let n = sim.a.intervals;
    while sim.a.intervals == n {
        sim.now += Duration::from_secs(1);
        sim.a
            .on_device_reads(sim.now, requested * 6 / 5 / 180, Duration::from_millis(900));
        sim.a.on_tick(sim.now);
    }
    let r = *sim.a.log.back().unwrap();
    assert!((r.busy - 0.9).abs() < 1e-6, "{r:?}");
    assert!((r.miss_ratio.unwrap() - 1.2).abs() < 0.01, "{r:?}");
    // mspt = 162 s over 1,200 transactions = 135 ms
    assert!((r.mspt.unwrap() - 135.0).abs() < 0.5, "{r:?}");
    assert_eq!(r.decision, Decision::TryLarger);
}

#[test]
fn bitrate_scale_sets_the_sd_to_hd_factor() {
    // the mixed experiment [T1280–T1284]: HD 2,095 kbit/s sized 6 MB, SD
    // 419 kbit/s gets F × that
    let hd = 6.0 * MB as f64;
    let s = Scaling::from_scale(2095.0, 0.45, None).unwrap();
    let sd = s.size(hd, Some(419_000)) / MB as f64;
    assert!((sd - 2.7).abs() < 1e-9, "0.45 of 6 MB is 2.7 MB, got {sd}");
    assert!((s.size(hd, Some(2_095_000)) - hd).abs() < 1e-6);
    // between the two: linear in log bit rate, so the geometric mean of the
    // rates gets the geometric mean of the sizes
    let mid = (419_000.0f64 * 2_095_000.0).sqrt() as u64;
    let m = s.size(hd, Some(mid)) / MB as f64;
    assert!((m - (6.0f64 * 2.7).sqrt()).abs() < 1e-3, "{m}");
    // F = 1: every rate the same size
    let same = Scaling::from_scale(2095.0, 1.0, None).unwrap();
    assert_eq!(same.exponent, 0.0);
    assert_eq!(same.size(hd, Some(419_000)), hd);
    assert_eq!(same.size(hd, Some(1_000)), hd);
    // F = 0.2 at 1:5 is proportional (Gill & Bathen), 0.45 near the square root
    let prop = Scaling::from_scale(2095.0, 0.2, None).unwrap();
    assert!((prop.exponent - 1.0).abs() < 1e-12);
    assert!((s.exponent - 0.5).abs() < 0.01, "{}", s.exponent);
    // an explicit low rate: 0.5 at 1,000 of 4,000 kbit/s
    let l = Scaling::from_scale(4000.0, 0.5, Some(1000.0)).unwrap();
    assert!((l.size(8.0, Some(1_000_000)) - 4.0).abs() < 1e-9);
    // 0 < F <= 1, low below ref; the errors name the key
    for bad in [0.0, -0.1, 1.01, f64::NAN] {
        let e = Scaling::from_scale(2095.0, bad, None).unwrap_err();
        assert!(e.starts_with("scale:"), "{e}");
    }
    let e = Scaling::from_scale(2095.0, 0.5, Some(3000.0)).unwrap_err();
    assert!(e.starts_with("low:"), "{e}");
    let e = Scaling::from_scale(2095.0, 1e-6, None).unwrap_err();
    assert!(e.starts_with("scale:"), "{e}");
}

#[test]
fn bitrate_scale_in_the_policy_string() {
    let p = "fixed:6M,ref=2095,scale=0.45"
        .parse::<PolicySpec>()
        .unwrap();
    let PolicySpec::Scaled(n, s) = p else {
        panic!("{p:?}")
    };
    assert_eq!(n, 6 * MB);
    assert!((s.size(n as f64, Some(419_000)) - 2.7 * MB as f64).abs() < 1.0);
    // shown as its exponent, which reads back to the same sizes
    assert_eq!(p.to_string().parse::<PolicySpec>().unwrap(), p);
    let a = "auto:ref=2095,scale=0.75,low=419"
        .parse::<PolicySpec>()
        .unwrap();
    let PolicySpec::Auto(a) = a else { panic!() };
    let sa = a.scaling.unwrap();
    assert!((sa.size(1.0, Some(419_000)) - 0.75).abs() < 1e-9);
    let err = |s: &str| s.parse::<PolicySpec>().unwrap_err().to_string();
    assert!(err("fixed:6M,scale=0.45").contains("scale: needs ref"));
    assert!(err("fixed:6M,ref=2095,scale=1.5").contains("scale:"));
    assert!(err("fixed:6M,ref=2095,scale=0.45,exp=1").contains("not both"));
    assert!(err("fixed:6M,ref=2095,low=400").contains("low: needs scale"));
    assert!(err("fixed:6M,ref=2095,scale=0.5,low=2095").contains("low:"));
}

/// An open-ended request asks for the rest of the file and is asked again
/// at each frontier: each ask counts one read's bytes as requested, not the
/// rest of the file again (else the miss ratio fell with every frontier).
#[test]
fn an_open_ended_stream_counts_one_read_per_ask_as_requested() {
    let cfg = AutoConfig {
        start: 1 << 20,
        interval: Duration::from_secs(1),
        ramp: Duration::ZERO,
        busy: 0.0,
        ..AutoConfig::default()
    };
    let mut a = Auto::new(cfg);
    let t0 = Instant::now();
    a.on_tick(t0);
    let mut st = SessionState::default();
    // a 100 MiB rest asked at three frontiers, each read 1 MiB in 10 ms
    for k in 0..3u64 {
        let mut r = info((100 << 20) - (k << 20), false, None);
        r.offset = k << 20;
        r.open_ended = true;
        let d = a.on_request(t0, &r, &mut st, None);
        assert_eq!(
            d,
            PrefetchDecision::Prefetch {
                offset: k << 20,
                len: 1 << 20
            }
        );
        a.on_read_complete(t0, 1 << 20, Duration::from_millis(10));
    }
    a.on_tick(t0 + Duration::from_secs(1));
    let rec = *a.records().last().expect("an interval");
    // 3 MiB read for 3 MiB asked
    assert_eq!(rec.miss_ratio, Some(1.0), "{rec:?}");
}

/// A resident open-ended ask sends the whole rest at once: all of it counts
/// as requested; a missed one near the end of the file counts only the rest.
#[test]
fn a_resident_or_short_open_ended_ask_counts_what_it_sends() {
    let cfg = AutoConfig {
        start: 1 << 20,
        interval: Duration::from_secs(1),
        ramp: Duration::ZERO,
        busy: 0.0,
        ..AutoConfig::default()
    };
    let mut a = Auto::new(cfg);
    let t0 = Instant::now();
    a.on_tick(t0);
    let mut st = SessionState::default();
    // resident: the 8 MiB rest is sent from the page cache
    let mut hit = info(8 << 20, true, None);
    hit.open_ended = true;
    assert_eq!(
        a.on_request(t0, &hit, &mut st, None),
        PrefetchDecision::None
    );
    // missed with 256 KiB left: at most the rest is asked
    let mut end = info(256 << 10, false, None);
    end.open_ended = true;
    a.on_request(t0, &end, &mut st, None);
    a.on_read_complete(t0, 256 << 10, Duration::from_millis(5));
    a.on_tick(t0 + Duration::from_secs(1));
    let rec = *a.records().last().expect("an interval");
    // 256 KiB read for 8 MiB + 256 KiB asked
    let want = (256u64 << 10) as f64 / ((8u64 << 20) + (256 << 10)) as f64;
    assert!((rec.miss_ratio.unwrap() - want).abs() < 1e-12, "{rec:?}");
}
