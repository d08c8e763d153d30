//! Controllers with scripted feedback, in virtual time.

use super::*;
use std::sync::{Arc, Mutex};

/// The range the server prefetched before the controller trait (the old
/// stateless `Fixed` policy and `prefetch_range`), kept as the oracle.
fn old_fixed(size: u64, offset: u64, len: u64, file_size: u64) -> (u64, u64) {
    (offset, size.max(len).min(file_size.saturating_sub(offset)))
}

fn info(offset: u64, length: u64, file_size: u64, resident: bool) -> RequestInfo<'static> {
    RequestInfo {
        session: "s1",
        file: 9,
        offset,
        length,
        file_size,
        bitrate_bps: None,
        resident,
        open_ended: false,
    }
}

#[test]
fn fixed_prefetches_as_before_on_a_miss_and_nothing_on_a_hit() {
    let t0 = Instant::now();
    let mut f = Fixed(4 << 20);
    let mut s = SessionState::default();
    let file_size = 10 << 20;
    // the cases of the old unit test: from the offset, clipped, never less than the request
    for (offset, len, want) in [
        (0, 524_288, (0, 4 << 20)),
        (9 << 20, 524_288, (9 << 20, 1 << 20)),
        (0, 8 << 20, (0, 8 << 20)),
    ] {
        let d = f.on_request(t0, &info(offset, len, file_size, false), &mut s, None);
        assert_eq!(clip(d, file_size), Some(want));
        assert_eq!(want, old_fixed(4 << 20, offset, len, file_size));
    }
    assert_eq!(
        f.on_request(t0, &info(0, 524_288, file_size, true), &mut s, None),
        PrefetchDecision::None
    );
}

mod same_as_before {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// For any sequence of misses, Fixed on the trait reads the same
        /// ranges as the old policy, whatever feedback it gets in between.
        #[test]
        fn fixed_matches_the_old_policy(
            size in 1u64..(16 << 20),
            reqs in proptest::collection::vec((0u64..(64 << 20), 1u64..(8 << 20), 1u64..(64 << 20)), 1..40),
        ) {
            let t0 = Instant::now();
            let mut f = Fixed(size);
            let mut s = SessionState::default();
            for (i, &(offset, len, file_size)) in reqs.iter().enumerate() {
                let file_size = file_size.max(offset + len);
                let now = t0 + Duration::from_millis(i as u64 * 10);
                f.on_tick(now);
                f.on_evicted(now, len, Duration::from_secs(3));
                let d = f.on_request(now, &info(offset, len, file_size, false), &mut s, None);
                f.on_read_complete(now, len, Duration::from_millis(5));
                prop_assert_eq!(clip(d, file_size), Some(old_fixed(size, offset, len, file_size)));
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Call {
    Request {
        at: Duration,
        offset: u64,
        resident: bool,
        session_requests: u64,
        chain_requests: Option<u64>,
    },
    Read(Duration, u64, Duration),
    Evicted(Duration, u64, Duration),
    Tick(Duration),
}

/// Records every call; prefetches 1 MiB on misses.
struct Recorder {
    t0: Instant,
    calls: Arc<Mutex<Vec<Call>>>,
}

impl PrefetchController for Recorder {
    fn on_request(
        &mut self,
        now: Instant,
        req: &RequestInfo<'_>,
        session: &mut SessionState,
        chain: Option<&mut ChainState>,
    ) -> PrefetchDecision {
        self.calls.lock().unwrap().push(Call::Request {
            at: now - self.t0,
            offset: req.offset,
            resident: req.resident,
            session_requests: session.requests,
            chain_requests: chain.map(|c| c.requests),
        });
        if req.resident {
            PrefetchDecision::None
        } else {
            PrefetchDecision::Prefetch {
                offset: req.offset,
                len: 1 << 20,
            }
        }
    }
    fn on_read_complete(&mut self, now: Instant, bytes: u64, duration: Duration) {
        self.calls
            .lock()
            .unwrap()
            .push(Call::Read(now - self.t0, bytes, duration));
    }
    fn on_evicted(&mut self, now: Instant, bytes: u64, unused_for: Duration) {
        self.calls
            .lock()
            .unwrap()
            .push(Call::Evicted(now - self.t0, bytes, unused_for));
    }
    fn on_tick(&mut self, now: Instant) {
        self.calls.lock().unwrap().push(Call::Tick(now - self.t0));
    }
}

/// The server's ASAP sequence for one range, in virtual time: account,
/// ask, "read" for `read_ms`, report, remember.
fn serve_range(
    core: &mut PrefetchCore,
    session: &mut SessionState,
    now: Instant,
    offset: u64,
    len: u64,
    resident: bool,
    read_ms: u64,
) -> (BeforeSend, Instant) {
    let overlap = session.account(9, offset, len);
    let req = RequestInfo {
        session: "s1",
        file: 9,
        offset,
        length: len,
        file_size: 100 << 20,
        bitrate_bps: Some(3_000_000),
        resident,
        open_ended: false,
    };
    let b = core.before_send(now, &req, session, Some("/t1"), overlap);
    let mut end = now;
    if let Some((off, n)) = clip(b.decision, req.file_size) {
        end = now + Duration::from_millis(read_ms);
        core.read_complete(end, n, Duration::from_millis(read_ms));
        session.record_prefetch(end, 9, off, n, len.min(n));
    }
    (b, end)
}

#[test]
fn feedback_reaches_the_controller_in_order() {
    let t0 = Instant::now();
    let calls = Arc::new(Mutex::new(Vec::new()));
    let mut core = PrefetchCore::new(Box::new(Recorder {
        t0,
        calls: calls.clone(),
    }));
    let mut s = SessionState::default();
    let ms = Duration::from_millis;
    // a miss: prefetch 1 MiB, the read takes 30 ms
    let (b, _) = serve_range(&mut core, &mut s, t0, 0, 512 << 10, false, 30);
    assert_eq!(
        b.decision,
        PrefetchDecision::Prefetch {
            offset: 0,
            len: 1 << 20
        }
    );
    assert_eq!(b.evicted, None);
    // the next range was prefetched and is resident: no eviction, no read
    let (b, _) = serve_range(
        &mut core,
        &mut s,
        t0 + ms(100),
        512 << 10,
        512 << 10,
        true,
        0,
    );
    assert_eq!((b.decision, b.evicted), (PrefetchDecision::None, None));
    core.tick(t0 + ms(1000));
    // 58 s later the first range is requested again and misses: evicted
    let (b, _) = serve_range(&mut core, &mut s, t0 + ms(58_030), 0, 4096, false, 7);
    assert_eq!(b.evicted, Some((4096, ms(58_000))));
    assert_eq!(
        *calls.lock().unwrap(),
        vec![
            Call::Request {
                at: ms(0),
                offset: 0,
                resident: false,
                session_requests: 1,
                chain_requests: Some(1)
            },
            Call::Read(ms(30), 1 << 20, ms(30)),
            Call::Request {
                at: ms(100),
                offset: 512 << 10,
                resident: true,
                session_requests: 2,
                chain_requests: Some(2)
            },
            Call::Tick(ms(1000)),
            Call::Evicted(ms(58_030), 4096, ms(58_000)),
            Call::Request {
                at: ms(58_030),
                offset: 0,
                resident: false,
                session_requests: 3,
                chain_requests: Some(3)
            },
            Call::Read(ms(58_037), 1 << 20, ms(7)),
        ]
    );
    assert_eq!(core.chain("/t1").map(|c| c.requests), Some(3));
    assert_eq!(core.chain("/t2"), None);
    // the first prefetch was requested in full (2 x 512 KiB + 4 KiB overlap);
    // the second (1 MiB) only 4 KiB: that is the waste at the end
    assert_eq!(s.finish(), (1 << 20) - 4096);
}

#[test]
fn session_state_counts_use_waste_and_forgets_old_ranges() {
    let t0 = Instant::now();
    let mut s = SessionState::default();
    assert_eq!(s.record_prefetch(t0, 1, 0, 1000, 100), 0);
    let o = s.account(1, 50, 200).unwrap();
    assert_eq!((o.at, o.bytes, o.start, o.end), (t0, 200, 50, 250));
    assert_eq!(s.prefetched[0].used, 300);
    // a range reaching past the prefetch: its overlap is the prefetched part
    let o = s.account(1, 900, 300).unwrap();
    assert_eq!((o.bytes, o.start, o.end), (100, 900, 1000));
    s.prefetched[0].used -= 100;
    s.requests -= 1;
    s.bytes_requested -= 300;
    assert_eq!(s.account(2, 50, 200), None, "another file");
    assert_eq!(s.account(1, 1000, 10), None, "past the end");
    // ranges older than the memory are forgotten (not counted as waste)
    assert_eq!(s.record_prefetch(t0 + PREFETCH_MEMORY, 1, 5000, 10, 10), 0);
    assert_eq!(s.prefetched.len(), 1);
    // beyond the cap the oldest goes and its unused bytes are waste
    let t1 = t0 + PREFETCH_MEMORY;
    for i in 1..=PREFETCH_RANGES as u64 {
        assert_eq!(s.record_prefetch(t1, 1, i * 10_000, 100, 0), 0);
    }
    assert_eq!(s.prefetched.len(), PREFETCH_RANGES + 1);
    assert_eq!(
        s.record_prefetch(t1, 1, 0, 100, 0),
        0,
        "the first kept range was fully used"
    );
    assert_eq!(s.record_prefetch(t1, 1, 0, 100, 0), 100);
    assert_eq!(s.requests, 3);
    assert_eq!(s.bytes_requested, 410);
}

#[test]
fn policies_build_their_controller() {
    let t0 = Instant::now();
    let mut c = crate::config::PolicySpec::Fixed(2 << 20).build();
    let mut s = SessionState::default();
    assert_eq!(
        c.on_request(t0, &info(100, 10, 10 << 20, false), &mut s, None),
        PrefetchDecision::Prefetch {
            offset: 100,
            len: 2 << 20
        }
    );
    assert_eq!(clip(PrefetchDecision::None, 10), None);
    assert_eq!(
        clip(PrefetchDecision::Prefetch { offset: 10, len: 5 }, 10),
        None
    );
}

#[test]
fn tick_devices_reports_what_the_helpers_read_since_the_last_tick() {
    #[derive(Default)]
    struct Seen(Arc<Mutex<Vec<(u64, Duration)>>>);
    impl PrefetchController for Seen {
        fn on_request(
            &mut self,
            _: Instant,
            _: &RequestInfo<'_>,
            _: &mut SessionState,
            _: Option<&mut ChainState>,
        ) -> PrefetchDecision {
            PrefetchDecision::None
        }
        fn on_read_complete(&mut self, _: Instant, _: u64, _: Duration) {}
        fn on_evicted(&mut self, _: Instant, _: u64, _: Duration) {}
        fn on_tick(&mut self, _: Instant) {
            self.0.lock().unwrap().push((u64::MAX, Duration::ZERO));
        }
        fn on_device_reads(&mut self, _: Instant, bytes: u64, busy: Duration) {
            self.0.lock().unwrap().push((bytes, busy));
        }
    }
    let seen = Arc::new(Mutex::new(Vec::new()));
    let mut core = PrefetchCore::new(Box::new(Seen(seen.clone())));
    let dev = |device, bytes, busy_s| crate::prefetch::DeviceStats {
        device,
        bytes,
        busy_s,
        ..Default::default()
    };
    let t0 = Instant::now();
    core.tick_devices(t0, &[dev(1, 1000, 0.5), dev(2, 500, 0.25)]);
    // nothing new: only the tick
    core.tick_devices(t0, &[dev(1, 1000, 0.5), dev(2, 500, 0.25)]);
    core.tick_devices(t0, &[dev(1, 3000, 1.0), dev(2, 500, 0.25)]);
    let tick = (u64::MAX, Duration::ZERO);
    assert_eq!(
        *seen.lock().unwrap(),
        vec![
            (1500, Duration::from_millis(750)),
            tick,
            tick,
            (2000, Duration::from_millis(500)),
            tick
        ]
    );
}
