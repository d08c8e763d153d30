use super::*;

fn spec() -> DirectionSpec {
    DirectionSpec {
        rate_bps: 0.0,
        delay: Duration::ZERO,
        jitter: Duration::ZERO,
        loss: 0.0,
        queue_bytes: 1 << 30,
        seed: 1,
    }
}

fn ms(t: Time) -> f64 {
    t.offset().as_secs_f64() * 1e3
}

#[test]
fn a_transparent_direction_delivers_at_once() {
    let mut d = Direction::new(spec(), Time::ZERO);
    assert!(d.spec().is_transparent());
    let now = Time::ZERO + Duration::from_millis(5);
    assert_eq!(d.offer(now, 1200), Verdict::Deliver(now));
    assert_eq!(d.counts().passed_datagrams, 1);
    assert_eq!(d.counts().passed_bytes, 1200);
}

#[test]
fn the_rate_serializes_datagrams_one_after_another() {
    // 1 Mbit/s = 125,000 B/s: a 1,250-byte datagram takes 10 ms on the wire
    let mut d = Direction::new(
        DirectionSpec {
            rate_bps: 1e6,
            delay: Duration::from_millis(30),
            ..spec()
        },
        Time::ZERO,
    );
    for k in 0..100u32 {
        let Verdict::Deliver(at) = d.offer(Time::ZERO, 1250) else {
            panic!("datagram {k} dropped");
        };
        // serialization ends at (k + 1) × 10 ms, then 30 ms of delay
        let want = f64::from(k + 1) * 10.0 + 30.0;
        assert!((ms(at) - want).abs() < 1e-6, "{k}: {} vs {want}", ms(at));
    }
    // 125,000 bytes at 1 Mbit/s: 1 s of backlog at t = 0
    assert!((d.backlog(Time::ZERO) - 125_000.0).abs() < 1.0);
    // an idle link serializes at once: a datagram after the backlog drained
    let later = Time::ZERO + Duration::from_secs(2);
    assert_eq!(
        d.offer(later, 125),
        Verdict::Deliver(later + Duration::from_millis(31))
    );
}

#[test]
fn delay_and_jitter_stay_in_bounds_and_never_reorder() {
    let (delay, jitter) = (Duration::from_millis(20), Duration::from_millis(10));
    let mut d = Direction::new(
        DirectionSpec {
            delay,
            jitter,
            seed: 99,
            ..spec()
        },
        Time::ZERO,
    );
    let (mut last, mut spread_min, mut spread_max) = (Time::ZERO, f64::MAX, 0.0f64);
    let mut clamped = 0;
    for k in 0..10_000u64 {
        // one datagram per 1 ms: jitter (10 ms) larger than the spacing
        let now = Time::ZERO + Duration::from_millis(k);
        let Verdict::Deliver(at) = d.offer(now, 1200) else {
            panic!("no loss configured");
        };
        let extra = at - now;
        assert!(extra >= delay && extra <= delay + jitter, "{k}: {extra:?}");
        assert!(at >= last, "{k}: reordered");
        // the jitter actually drawn, where the FIFO did not hold it back
        let drawn = jitter.mul_f64(draw(99, JITTER, k));
        if extra == delay + drawn {
            let x = drawn.as_secs_f64() * 1e3;
            spread_min = spread_min.min(x);
            spread_max = spread_max.max(x);
        } else {
            // held back: it arrives with the datagram before it
            assert_eq!(at, last);
            clamped += 1;
        }
        last = at;
    }
    // the draws cover the range (uniform over [0, 10] ms)
    assert!(
        spread_min < 0.5 && spread_max > 9.5,
        "{spread_min}..{spread_max}"
    );
    assert!(clamped > 0 && clamped < 10_000, "{clamped}");
}

#[test]
fn loss_is_the_seeded_draw_exactly_and_about_p() {
    let (p, n) = (0.02, 100_000u64);
    let run = |seed| {
        let mut d = Direction::new(
            DirectionSpec {
                loss: p,
                seed,
                ..spec()
            },
            Time::ZERO,
        );
        let lost: Vec<u64> = (0..n)
            .filter(|_| d.offer(Time::ZERO, 1000) == Verdict::Lost)
            .collect();
        (lost, d.counts())
    };
    let (a, counts) = run(7);
    // exactly the draw: the same indices, the same count
    assert_eq!(counts.lost_datagrams, losses(7, n, p));
    assert_eq!(a, (0..n).filter(|&k| is_lost(7, k, p)).collect::<Vec<_>>());
    assert_eq!(counts.lost_bytes, 1000 * counts.lost_datagrams);
    assert_eq!(counts.offered(), n);
    // same seed, same drops; another seed, other drops
    assert_eq!(run(7).0, a);
    assert_ne!(run(8).0, a);
    // ≈ p: within 5 standard deviations of the binomial (σ ≈ 44 of 2,000)
    let sigma = (n as f64 * p * (1.0 - p)).sqrt();
    for seed in [1, 2, 3, 7, 1 << 40] {
        let l = losses(seed, n, p) as f64;
        assert!((l - n as f64 * p).abs() < 5.0 * sigma, "seed {seed}: {l}");
    }
    // no loss configured: none
    assert_eq!(losses(7, n, 0.0), 0);
}

#[test]
fn a_full_queue_drops_at_the_tail_and_counts_it() {
    // 1 Mbit/s, a 10,000-byte queue: ten 1,000-byte datagrams at once fill
    // it, the rest of a burst of 50 is dropped
    let mut d = Direction::new(
        DirectionSpec {
            rate_bps: 1e6,
            queue_bytes: 10_000,
            ..spec()
        },
        Time::ZERO,
    );
    let v: Vec<Verdict> = (0..50).map(|_| d.offer(Time::ZERO, 1000)).collect();
    assert!(v[..10].iter().all(|x| matches!(x, Verdict::Deliver(_))));
    assert!(v[10..].iter().all(|x| *x == Verdict::QueueFull));
    let c = d.counts();
    assert_eq!((c.passed_datagrams, c.queue_dropped_datagrams), (10, 40));
    assert_eq!(c.queue_dropped_bytes, 40_000);
    assert!(d.backlog(Time::ZERO) <= 10_000.0);
    // 8 ms later one datagram has left (1,000 bytes = 8 ms): one more fits
    let t = Time::ZERO + Duration::from_millis(8);
    assert!(matches!(d.offer(t, 1000), Verdict::Deliver(_)));
    assert_eq!(d.offer(t, 1000), Verdict::QueueFull);
    assert_eq!(d.counts().offered(), 52);
    // default queues: 100 ms of the rate, within bounds
    assert_eq!(default_queue_bytes(8e6), 100_000);
    assert_eq!(default_queue_bytes(1e5), 32 * 1024);
    assert_eq!(default_queue_bytes(1e12), 4 << 20);
}

#[test]
fn session_seeds_differ_by_session_and_direction() {
    let s = session_seed(5, 0, 0, 0);
    assert_eq!(s, session_seed(5, 0, 0, 0));
    for other in [
        session_seed(6, 0, 0, 0),
        session_seed(5, 1, 0, 0),
        session_seed(5, 0, 1, 0),
        session_seed(5, 0, 0, 1),
    ] {
        assert_ne!(s, other);
    }
}
