use super::*;
use crate::chainpf::FirstGrow;
use crate::controller::Fixed;
use crate::events::Event;
use crate::replay::replay;
use crate::PolicySpec;
use std::sync::{Arc, Mutex};

/// A chain of `bytes` in 1 MB range requests over `dur` seconds.
fn chain(session: u64, start: f64, bytes: u64, dur: f64) -> SimChain {
    SimChain {
        session,
        file: session,
        drive: 0,
        file_size: 1 << 40,
        offset: 0,
        bytes,
        requests: bytes.div_ceil(1_000_000) as u32,
        start_s: start,
        end_s: start + dur,
        bitrate_bps: Some(2_000_000),
        open_ended: false,
    }
}

fn run(cfg: &SimConfig, c: Box<dyn PrefetchController>, chains: &[SimChain]) -> SimResult {
    simulate(cfg, c, chains, false).0
}

#[test]
fn kept_reads_are_the_prefetches() {
    let cfg = SimConfig::default();
    let (_, none) = simulate(
        &cfg,
        Box::new(Fixed(4_000_000)),
        &[chain(1, 0.0, 10_000_000, 100.0)],
        false,
    );
    assert!(none.is_empty(), "not kept unless asked");
    let (_, r) = simulate(
        &cfg,
        Box::new(Fixed(4_000_000)),
        &[chain(2, 10.0, 10_000_000, 100.0)],
        true,
    );
    let at: Vec<(f64, u64, u64)> = r.iter().map(|d| (d.t_s, d.offset, d.bytes)).collect();
    assert_eq!(
        at,
        vec![
            (10.0, 0, 4_000_000),
            (50.0, 4_000_000, 4_000_000),
            (90.0, 8_000_000, 4_000_000)
        ]
    );
    assert!(r.iter().all(|d| d.file == 2 && d.drive == 0));
}

#[test]
fn the_thesis_seek_rate() {
    let m = UtilModel::default();
    assert!((m.seeks_per_s - 39.4).abs() < 0.05, "{}", m.seeks_per_s);
}

#[test]
fn fixed_prefetches_count_seeks_bytes_waste_and_memory() {
    // 10 MB over 100 s in 1 MB ranges: prefetches at 0, 40 and 80 s of 4 MB
    let r = run(
        &SimConfig::default(),
        Box::new(Fixed(4_000_000)),
        &[chain(1, 0.0, 10_000_000, 100.0)],
    );
    assert_eq!(r.prefetches, 3);
    assert_eq!(r.device_bytes, 12_000_000);
    assert_eq!(r.wasted_bytes, 2_000_000);
    // ten ranges asked, seven of them found in the page cache
    assert_eq!((r.decisions, r.hits), (10, 7));
    // buckets [0,60): two prefetches, 8 MB; [60,120): one, 4 MB
    let want = 8e6 / 60.0 / 125.5e6 + 2.0 / 60.0 / UtilModel::default().seeks_per_s;
    assert!((r.peak_utilisation - want).abs() < 1e-9, "{r:?}");
    // the 4 MB buffer is held from 0 to 140 s: buckets 0, 1 and 2
    assert_eq!(r.peak_memory_bytes, 4_000_000);
    assert_eq!(r.mean_memory_bytes, 4_000_000);
    assert_eq!(r.buckets, 3);
    // a 4 MB read waits a seek and its transfer on an idle drive
    let svc = UtilModel::default().service(4_000_000).as_secs_f64();
    assert!((r.max_wait_s - svc).abs() < 1e-6, "{r:?}");
    assert_eq!((r.evictions, r.peak_cache_bytes), (0, 0));
}

#[test]
fn concurrent_chains_add_memory_and_a_larger_size_means_fewer_seeks() {
    let chains: Vec<SimChain> = (0..10)
        .map(|k| chain(k, k as f64, 50_000_000, 50.0))
        .collect();
    let go = |size: u64| run(&SimConfig::default(), Box::new(Fixed(size)), &chains);
    let (small, large) = (go(1_000_000), go(16_000_000));
    assert_eq!(small.peak_memory_bytes, 10 * 1_000_000);
    assert_eq!(large.peak_memory_bytes, 10 * 16_000_000);
    assert!(large.prefetches < small.prefetches);
    assert!(large.wasted_bytes > small.wasted_bytes);
}

#[test]
fn first_grow_seeks_less_than_its_first_size_and_uses_less_memory_than_fixed_at_its_max() {
    // many short chains and a few long ones, as in the thesis's logs
    let chains: Vec<SimChain> = (0..200u64)
        .map(|k| {
            if k % 10 == 0 {
                chain(k, k as f64, 200_000_000, 400.0)
            } else {
                chain(k, k as f64, 300_000, 5.0)
            }
        })
        .collect();
    let cfg = SimConfig::default();
    let fg = run(&cfg, Box::new(FirstGrow::new(16_000_000, false)), &chains);
    let fx = run(&cfg, Box::new(Fixed(16_000_000)), &chains);
    assert!(fg.wasted_bytes < fx.wasted_bytes / 10, "{fg:?} {fx:?}");
    assert!(fg.peak_memory_bytes < fx.peak_memory_bytes, "{fg:?} {fx:?}");
    assert!(fg.peak_utilisation < fx.peak_utilisation, "{fg:?} {fx:?}");
}

#[test]
fn an_open_ended_chain_is_read_in_the_policys_size() {
    let mut c = chain(1, 0.0, 10_000_000, 100.0);
    c.requests = 1;
    c.open_ended = true;
    let (r, reads) = simulate(
        &SimConfig::default(),
        Box::new(Fixed(4_000_000)),
        &[c],
        true,
    );
    let at: Vec<(f64, u64, u64)> = reads.iter().map(|d| (d.t_s, d.offset, d.bytes)).collect();
    assert_eq!(
        at,
        vec![
            (0.0, 0, 4_000_000),
            (40.0, 4_000_000, 4_000_000),
            (80.0, 8_000_000, 4_000_000)
        ]
    );
    assert_eq!(r.decisions, 3);
}

#[test]
fn a_shared_page_cache_serves_a_second_viewer_of_the_same_file() {
    let a = chain(1, 0.0, 8_000_000, 80.0);
    let mut b = chain(2, 10.0, 8_000_000, 80.0);
    b.file = a.file;
    let both = [a, b];
    let own = run(&SimConfig::default(), Box::new(Fixed(4_000_000)), &both);
    let shared = run(
        &SimConfig {
            page_cache: Some(1 << 30),
            ..SimConfig::default()
        },
        Box::new(Fixed(4_000_000)),
        &both,
    );
    // each chain reads its own copy without a shared cache
    assert_eq!(own.device_bytes, 16_000_000);
    // the second viewer finds every range the first read
    assert_eq!(shared.device_bytes, 8_000_000, "{shared:?}");
    // only the first viewer's two ranges at 0 and 4 MB missed
    assert_eq!((shared.decisions, shared.hits), (16, 14));
    assert_eq!((own.decisions, own.hits), (16, 12));
    assert_eq!(shared.peak_cache_bytes, 8_000_000);
}

#[test]
fn a_small_page_cache_evicts_prefetches_and_the_controller_hears_of_it() {
    // 40 viewers of different files prefetching 8 MB each into 64 MB: a
    // viewer's prefetch is evicted by the others' before it is used
    let chains: Vec<SimChain> = (0..40)
        .map(|k| chain(k, k as f64 * 0.1, 40_000_000, 200.0))
        .collect();
    let cfg = SimConfig {
        page_cache: Some(64 << 20),
        ..SimConfig::default()
    };
    let r = run(&cfg, Box::new(Fixed(8_000_000)), &chains);
    assert!(r.evictions > 0, "{r:?}");
    assert!(r.evicted_bytes >= r.evictions * 1_000_000, "{r:?}");
    // evicted data is read again
    assert!(r.device_bytes > r.requested_bytes, "{r:?}");
    assert!(r.peak_cache_bytes <= 64 << 20, "{r:?}");
    // an eviction-driven policy shrinks: auto's eviction jump
    let auto: PolicySpec = "auto:interval=10,ramp=0,busy=0,start=8M".parse().unwrap();
    let a = run(&cfg, auto.build(), &chains);
    assert!(a.auto_intervals.unwrap() > 0, "{a:?}");
    assert!(a.auto_final_bytes.unwrap() < 8 << 20, "{a:?}");
}

#[test]
fn auto_measures_and_moves_its_size_in_simulation() {
    // 60 viewers at 2 Mbit/s in 1 MB ranges for 20 minutes: the drive is
    // busy about 20 % of the time, so auto's busy threshold is set below
    let chains: Vec<SimChain> = (0..60)
        .map(|k| chain(k, k as f64 * 0.5, 300_000_000, 1200.0))
        .collect();
    let idle: PolicySpec = "auto:interval=60,ramp=10".parse().unwrap();
    let r = run(&SimConfig::default(), idle.build(), &chains);
    // at the default 60 % the drive is too idle to adjust: nothing moves
    assert_eq!(r.auto_final_bytes, Some(4 << 20), "{r:?}");
    let spec: PolicySpec = "auto:interval=60,ramp=10,busy=0.1".parse().unwrap();
    let r = run(&SimConfig::default(), spec.build(), &chains);
    let intervals = r.auto_intervals.expect("auto reports its intervals");
    assert!(intervals >= 10, "{r:?}");
    assert_ne!(
        r.auto_final_bytes,
        Some(4 << 20),
        "the size never moved: {r:?}"
    );
    // a fixed size does not report any
    let f = run(&SimConfig::default(), Box::new(Fixed(4 << 20)), &chains);
    assert_eq!(f.auto_intervals, None);
}

/// Every policy, the simulator's own event stream replayed into a fresh
/// controller of the same policy: the same decisions, one for one.
#[test]
fn recorded_simulations_replay_decision_for_decision() {
    let mut chains: Vec<SimChain> = (0..30)
        .map(|k| chain(k, k as f64 * 0.7, 20_000_000 + k * 1_000_000, 150.0))
        .collect();
    chains[3].open_ended = true;
    chains[3].requests = 1;
    let cfg = SimConfig {
        page_cache: Some(96 << 20),
        ..SimConfig::default()
    };
    for spec in [
        "fixed:4M",
        "proportional:4M",
        "sqrt:4M",
        "auto:interval=20,ramp=5,busy=0",
        "first-grow:16M",
        "first-grow-sr:16M",
    ] {
        let p: PolicySpec = spec.parse().unwrap();
        let events: Arc<Mutex<Vec<Event>>> = Arc::default();
        let sink = events.clone();
        let r = simulate_recorded(
            &cfg,
            p.build(),
            &chains,
            Box::new(move |e| sink.lock().unwrap().push(e.clone())),
        );
        let events = events.lock().unwrap().clone();
        let rep = replay(p.build(), &events).unwrap();
        assert_eq!(rep.decisions, r.decisions, "{spec}");
        assert!(rep.prefetches > 0, "{spec}");
        assert!(rep.mismatches.is_empty(), "{spec}: {:?}", rep.mismatches);
        // and the comparison can fail: another policy decides otherwise
        let other: PolicySpec = "fixed:1M".parse().unwrap();
        let rep = replay(other.build(), &events).unwrap();
        assert!(!rep.mismatches.is_empty(), "{spec} against fixed:1M");
    }
}

/// A read that is partly resident already adds only its new bytes to the
/// shared page cache: with room for everything, the cache's peak is the
/// union of the bytes read, not their sum.
#[test]
fn a_shared_cache_holds_a_page_once_however_often_it_is_read() {
    let a = chain(1, 0.0, 8_000_000, 80.0);
    // starts inside a's first read and runs past it
    let mut b = chain(2, 10.0, 4_000_000, 40.0);
    b.file = a.file;
    b.offset = 3_500_000;
    let cfg = SimConfig {
        page_cache: Some(1 << 30),
        ..SimConfig::default()
    };
    let (r, reads) = simulate(&cfg, Box::new(Fixed(4_000_000)), &[a, b], true);
    let mut ranges: Vec<(u64, u64)> = reads
        .iter()
        .map(|d| (d.offset, d.offset + d.bytes))
        .collect();
    ranges.sort_unstable();
    let (mut union, mut at) = (0, 0);
    for (s, e) in ranges {
        let s = s.max(at);
        if e > s {
            union += e - s;
        }
        at = at.max(e);
    }
    let sum: u64 = reads.iter().map(|d| d.bytes).sum();
    assert!(sum > union, "the reads overlap: {reads:?}");
    assert_eq!(r.peak_cache_bytes, union, "{r:?}");
}

/// One session's `n` segments of `seg` bytes, each its own file, one
/// request each, `every` seconds apart (a DASH player's segment files).
fn segments(session: u64, n: u64, seg: u64, every: f64) -> Vec<SimChain> {
    (0..n)
        .map(|k| SimChain {
            session,
            file: session * 1000 + k,
            drive: 0,
            file_size: seg,
            offset: 0,
            bytes: seg,
            requests: 1,
            start_s: k as f64 * every,
            end_s: k as f64 * every + every,
            bitrate_bps: Some(2_000_000),
            open_ended: false,
        })
        .collect()
}

#[test]
fn the_next_chain_of_a_session_is_its_next_object() {
    let mut c = segments(1, 3, 1_000_000, 4.0);
    c.extend(segments(2, 2, 1_000_000, 4.0));
    // a session's later chain of the same file is no next object
    let mut same = c[0].clone();
    same.start_s = 20.0;
    c.push(same);
    // listed out of order: the order is by start within a session
    c.swap(0, 2);
    let next = next_chains(&c);
    assert_eq!(next[2], Some(1), "segment 0 → 1");
    assert_eq!(next[1], Some(0), "segment 1 → 2");
    assert_eq!(
        next[0],
        Some(5),
        "segment 2 → segment 0 again, a later chain"
    );
    assert_eq!(next[5], None, "the session's last");
    assert_eq!((next[3], next[4]), (Some(4), None));
}

#[test]
fn next_object_prefetch_makes_each_next_segment_a_hit() {
    // one viewer of 5 one-request segments of 1 MB, 4 s apart: without
    // next-object every segment misses; with it every segment after the
    // first was read while the previous one played
    let chains = segments(1, 5, 1_000_000, 4.0);
    for cache in [None, Some(1 << 30)] {
        let base = SimConfig {
            page_cache: cache,
            ..SimConfig::default()
        };
        let off = run(&base, Box::new(Fixed(4_000_000)), &chains);
        assert_eq!((off.decisions, off.hits), (5, 0), "{cache:?}: {off:?}");
        assert_eq!(off.next_object_reads, 0);
        let on = run(
            &SimConfig {
                next_object: Some(4 << 20),
                ..base
            },
            Box::new(Fixed(4_000_000)),
            &chains,
        );
        assert_eq!((on.decisions, on.hits), (5, 4), "{cache:?}: {on:?}");
        // four next objects, clipped at their 1 MB files; the drive read
        // each segment once
        assert_eq!((on.next_object_reads, on.next_object_bytes), (4, 4_000_000));
        assert_eq!(on.device_bytes, 5_000_000, "{cache:?}: {on:?}");
        assert_eq!(on.prefetches, 5);
        assert_eq!(on.wasted_bytes, 0);
    }
}

#[test]
fn a_next_object_read_is_capped_and_its_unused_bytes_are_waste() {
    // segments of 10 MB files of which the viewer reads 1 MB each: the
    // next-object read of 2 MB wastes 1 MB a segment
    let mut chains = segments(1, 3, 1_000_000, 4.0);
    for c in &mut chains {
        c.file_size = 10_000_000;
    }
    let r = run(
        &SimConfig {
            next_object: Some(2_000_000),
            page_cache: Some(1 << 30),
            ..SimConfig::default()
        },
        Box::new(Fixed(1_000_000)),
        &chains,
    );
    assert_eq!((r.next_object_reads, r.next_object_bytes), (2, 4_000_000));
    assert_eq!(r.wasted_bytes, 2_000_000, "{r:?}");
    assert_eq!(r.hits, 2);
}

#[test]
fn the_controller_does_not_hear_of_next_object_reads() {
    // the same decisions with and without next-object prefetch, apart from
    // the hits it makes: its reads are beside the policy, as on the server
    let chains = segments(1, 4, 1_000_000, 4.0);
    let calls = |next_object| {
        let seen = Arc::new(Mutex::new(0usize));
        let s2 = seen.clone();
        simulate_recorded(
            &SimConfig {
                next_object,
                ..SimConfig::default()
            },
            Box::new(Fixed(4_000_000)),
            &chains,
            Box::new(move |e: &Event| {
                if matches!(e, Event::ReadDone { .. }) {
                    *s2.lock().unwrap() += 1;
                }
            }),
        );
        let n = *seen.lock().unwrap();
        n
    };
    // four misses read and reported without; one (the first) with
    assert_eq!((calls(None), calls(Some(4 << 20))), (4, 1));
}
