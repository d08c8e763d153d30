//! The session driver in virtual time: no sockets, no sleeps, no tolerances.
//! A scripted server answers each request after a given delay; the harness
//! steps time to the driver's next timeout or the next scripted event.

use std::collections::HashMap;
use std::time::Duration;

use vodlab_client::core::driver::{
    send_target, Action, DriverConfig, Event, LatePacing, Previous, RequestRecord, SessionDriver,
    SessionOutcome,
};
use vodlab_client::core::exchange::{ErrorKind, Failure, Response};
use vodlab_client::core::time::Time;
use vodlab_workload::script::{parse_script, Request, Session, Wait};

/// What the scripted server does with one request.
#[derive(Clone)]
enum Reply {
    /// Complete answer after `after`, keeping the connection open or not.
    Ok { after: f64, keep_alive: bool },
    /// A failure after `after`.
    Fail { after: f64, failure: Failure },
}

struct Trace {
    /// (t, conn) of every Connect.
    connects: Vec<(f64, usize)>,
    /// (t, conn, request) of every Send.
    sends: Vec<(f64, usize, usize)>,
    /// (t, conn) of every Close.
    closes: Vec<(f64, usize)>,
    records: Vec<RequestRecord>,
    outcome: SessionOutcome,
    t0: Time,
}

impl Trace {
    fn secs(&self, t: Time) -> f64 {
        (t - self.t0).as_secs_f64()
    }
    fn send_times(&self) -> Vec<f64> {
        self.sends.iter().map(|s| round(s.0)).collect()
    }
}

fn round(x: f64) -> f64 {
    (x * 1e6).round() / 1e6
}

fn session(text: &str) -> Session {
    parse_script(text).unwrap().sessions.remove(0)
}

fn ok(after: f64) -> Reply {
    Reply::Ok {
        after,
        keep_alive: true,
    }
}

/// A 200/206 answer that passes the driver's checks for `r`.
fn response_for(r: &Request, ttfb: Duration, keep_alive: bool) -> Response {
    match r.range {
        Some(g) => {
            let end = g.end.unwrap_or(g.start + 999);
            Response {
                status: 206,
                body_bytes: end - g.start + 1,
                header_bytes: 100,
                content_range: Some((g.start, end, Some(end + 1))),
                ttfb,
                keep_alive,
                cmsd_dynamic: None,
            }
        }
        None => Response {
            status: 200,
            body_bytes: 1000,
            header_bytes: 100,
            content_range: None,
            ttfb,
            keep_alive,
            cmsd_dynamic: None,
        },
    }
}

/// Runs `s` to its end; `server(request index, attempt on that request,
/// connection uses)` scripts the answers; connects take `connect_s`.
fn drive(
    s: &Session,
    cfg: DriverConfig,
    connect_s: f64,
    mut server: impl FnMut(usize, u32, u32) -> Reply,
) -> Trace {
    let t0 = Time::ZERO;
    let at = |x: f64| t0 + Duration::from_secs_f64(x);
    let mut d = SessionDriver::new(s, None, cfg, t0);
    let mut now = t0;
    // scripted events: (time, seq, event)
    let mut pending: Vec<(Time, u64, Event)> = Vec::new();
    let mut seq = 0u64;
    let mut uses: HashMap<usize, u32> = HashMap::new();
    let mut attempts: HashMap<usize, u32> = HashMap::new();
    let (mut connects, mut sends, mut closes, mut records) = (vec![], vec![], vec![], vec![]);
    for _ in 0..100_000 {
        while let Some(a) = d.poll_action(now) {
            let t = (now - t0).as_secs_f64();
            match a {
                Action::Connect { conn } => {
                    connects.push((t, conn));
                    uses.insert(conn, 0);
                    seq += 1;
                    pending.push((
                        now + Duration::from_secs_f64(connect_s),
                        seq,
                        Event::Connected { conn },
                    ));
                }
                Action::Send { conn, request } => {
                    sends.push((t, conn, request));
                    let n = attempts.entry(request).or_default();
                    let u = uses.entry(conn).or_default();
                    let reply = server(request, *n, *u);
                    *n += 1;
                    *u += 1;
                    seq += 1;
                    match reply {
                        Reply::Ok { after, keep_alive } => pending.push((
                            now + Duration::from_secs_f64(after),
                            seq,
                            Event::Response {
                                conn,
                                response: response_for(
                                    &s.requests[request],
                                    Duration::from_secs_f64(after / 2.0),
                                    keep_alive,
                                ),
                            },
                        )),
                        Reply::Fail { after, failure } => pending.push((
                            now + Duration::from_secs_f64(after),
                            seq,
                            Event::Failed { conn, failure },
                        )),
                    }
                }
                Action::Close { conn } => {
                    closes.push((t, conn));
                    pending.retain(|(_, _, e)| !matches!(e,
                        Event::Connected { conn: c } | Event::Response { conn: c, .. } | Event::Failed { conn: c, .. } if *c == conn));
                }
                Action::Record(r) => records.push(r),
                Action::Finished(outcome) => {
                    return Trace {
                        connects,
                        sends,
                        closes,
                        records,
                        outcome,
                        t0,
                    };
                }
            }
        }
        pending.sort_by_key(|p| (p.0, p.1));
        let next_event = pending.first().map(|p| p.0);
        let next = match (next_event, d.poll_timeout()) {
            (Some(a), Some(b)) => a.min(b),
            (Some(a), None) | (None, Some(a)) => a,
            (None, None) => panic!("driver stalled at {:?}", now - t0),
        };
        assert!(next >= now, "time never goes back");
        now = next;
        while pending.first().is_some_and(|p| p.0 <= now) {
            let (_, _, e) = pending.remove(0);
            d.handle(now, e);
        }
        let _ = at;
    }
    panic!("session did not finish")
}

#[test]
fn pacing_counts_from_the_previous_send_and_buffering_goes_back_to_back() {
    let s = session(
        "/v range=0-999\n/v range=1000-1999\n/v range=2000-2999 pacing=0.4\n/v range=3000-3999 pacing=0.4\n/v range=4000- pacing=0.4\n",
    );
    let t = drive(&s, DriverConfig::default(), 0.0, |_, _, _| ok(0.1));
    // buffering: 0 and 0.1 back to back; then every 0.4 s from the previous send
    assert_eq!(t.send_times(), vec![0.0, 0.1, 0.5, 0.9, 1.3]);
    assert_eq!(t.connects.len(), 1, "one persistent connection");
    assert!(t.outcome.failure.is_none());
    assert_eq!(t.outcome.completed, 5);
    assert_eq!(round(t.secs(t.outcome.end)), 1.4);
    // every burst head went exactly on time in virtual time
    assert!(t
        .records
        .iter()
        .all(|r| r.send_lateness == Some(Duration::ZERO)));
}

#[test]
fn pacing_off_sends_everything_back_to_back() {
    let s = session("/a\n/b pacing=5\n/c think=5\n");
    let cfg = DriverConfig {
        pacing: false,
        ..DriverConfig::default()
    };
    let t = drive(&s, cfg, 0.0, |_, _, _| ok(0.25));
    assert_eq!(t.send_times(), vec![0.0, 0.25, 0.5]);
}

#[test]
fn think_counts_from_completion() {
    // httperf's think= is the wait after its request, before the next
    let s = session("/a think=2\n/b\n/c pacing=1\n");
    let t = drive(&s, DriverConfig::default(), 0.0, |_, _, _| ok(0.5));
    // /b at 0.5 + 2; /c paced 1 s after /b's send
    assert_eq!(t.send_times(), vec![0.0, 2.5, 3.5]);
}

/// /b takes 2.5 s with 1 s pacing: the three named late-pacing behaviours.
fn late(behaviour: LatePacing) -> Vec<f64> {
    let s = session("/a\n/b pacing=1\n/c pacing=1\n/d pacing=1\n/e pacing=1\n");
    let cfg = DriverConfig {
        late_pacing: behaviour,
        ..DriverConfig::default()
    };
    drive(&s, cfg, 0.0, |j, _, _| ok(if j == 1 { 2.5 } else { 0.1 })).send_times()
}

#[test]
fn late_pacing_delay_shifts_every_later_send() {
    // /b 1.0 → done 3.5; /c at 3.5 (late); /d 1 s after /c's send
    assert_eq!(late(LatePacing::Delay), vec![0.0, 1.0, 3.5, 4.5, 5.5]);
}

#[test]
fn late_pacing_burst_catches_up_with_the_schedule() {
    // slots 1, 2, 3, 4: /c and /d go as soon as the previous completes
    assert_eq!(late(LatePacing::Burst), vec![0.0, 1.0, 3.5, 3.6, 4.0]);
}

#[test]
fn late_pacing_skip_waits_for_the_next_slot() {
    // slots 1, 2 (missed), 3 (missed), 4: /c at 4, then 5, 6
    assert_eq!(late(LatePacing::Skip), vec![0.0, 1.0, 4.0, 5.0, 6.0]);
}

/// Latency from schedule of the late-pacing runs above, rounded to ms:
/// each request's completion minus its slot on the session's own schedule.
fn from_schedule(behaviour: LatePacing) -> Vec<f64> {
    let s = session("/a\n/b pacing=1\n/c pacing=1\n/d pacing=1\n/e pacing=1\n");
    let cfg = DriverConfig {
        late_pacing: behaviour,
        ..DriverConfig::default()
    };
    let t = drive(&s, cfg, 0.0, |j, _, _| ok(if j == 1 { 2.5 } else { 0.1 }));
    t.records
        .iter()
        .map(|r| {
            let done = r.result.as_ref().expect("completed").done;
            ((t.secs(done) - t.secs(r.scheduled)) * 1e3).round()
        })
        .collect()
}

/// The slow /b (2.5 s from its slot at 1 s) pushes /c's send from its slot
/// at 2 s to 3.5 s: /c's latency from schedule is the 1.5 s it was held
/// back plus its own 0.1 s, in every mode. Before the fix the driver
/// recorded the send time (3.5 s) as the schedule and reported 100 ms —
/// the coordinated omission wrk2 exists to avoid.
#[test]
fn latency_from_schedule_counts_the_time_a_slow_response_held_the_next_request_back() {
    // delay: /c's slot is 2 (1 s after /b's send); /d and /e count from
    // /c's late send, so the shift is charged once
    assert_eq!(
        from_schedule(LatePacing::Delay),
        vec![100.0, 2500.0, 1600.0, 100.0, 100.0]
    );
    // burst: slots 2, 3, 4 — /c done 3.6 (1.6 late), /d sent 3.6 done 3.7
    // (0.7 after its slot 3), /e on time at 4
    assert_eq!(
        from_schedule(LatePacing::Burst),
        vec![100.0, 2500.0, 1600.0, 700.0, 100.0]
    );
    // skip: /c's slot is the first one it missed (2), though it goes at 4
    assert_eq!(
        from_schedule(LatePacing::Skip),
        vec![100.0, 2500.0, 2100.0, 100.0, 100.0]
    );
    // pacing off: every request counts from the previous completion
    let s = session("/a\n/b pacing=1\n/c pacing=1\n");
    let cfg = DriverConfig {
        pacing: false,
        ..DriverConfig::default()
    };
    let t = drive(&s, cfg, 0.0, |j, _, _| ok(if j == 1 { 2.5 } else { 0.1 }));
    let fs: Vec<f64> = t
        .records
        .iter()
        .map(|r| ((t.secs(r.result.as_ref().unwrap().done) - t.secs(r.scheduled)) * 1e3).round())
        .collect();
    assert_eq!(fs, vec![100.0, 2500.0, 100.0]);
}

#[test]
fn send_target_rules_directly() {
    let t0 = Time::ZERO;
    let s = |x: f64| t0 + Duration::from_secs_f64(x);
    let prev = Previous {
        slot: Some(s(0.0)),
        start: Some(s(0.0)),
        done: s(2.0),
    };
    assert_eq!(
        send_target(Wait::Pacing(10.0), prev, true, LatePacing::Delay).at,
        s(10.0)
    );
    let late = Previous {
        done: s(12.0),
        ..prev
    };
    assert_eq!(
        send_target(Wait::Pacing(10.0), late, true, LatePacing::Delay).at,
        s(12.0)
    );
    assert_eq!(
        send_target(Wait::Pacing(10.0), late, true, LatePacing::Skip).at,
        s(20.0)
    );
    assert_eq!(
        send_target(Wait::Think(10.0), prev, true, LatePacing::Delay).at,
        s(12.0)
    );
    assert_eq!(
        send_target(Wait::Pacing(10.0), prev, false, LatePacing::Delay).at,
        s(2.0)
    );
    // absurd waits saturate instead of panicking
    let far = send_target(Wait::Think(1e300), prev, true, LatePacing::Delay).at;
    assert!(far > s(1e9));
    let nan = send_target(Wait::Pacing(f64::NAN), prev, true, LatePacing::Skip);
    assert!(nan.at >= prev.done);
}

#[test]
fn a_missed_deadline_fails_the_session_closes_the_connection_and_skips_the_rest() {
    let s = session("/a timeout=5\n/slow timeout=0.3\n/c timeout=5\n/d timeout=5\n");
    let t = drive(&s, DriverConfig::default(), 0.0, |j, _, _| {
        ok(if j == 1 { 1.5 } else { 0.1 })
    });
    // /slow issued at 0.1, deadline exactly 0.4
    assert_eq!(t.send_times(), vec![0.0, 0.1], "the rest is never sent");
    let (k, f) = t.outcome.failure.clone().expect("failed");
    assert_eq!((k, f.kind), (1, ErrorKind::Timeout));
    assert_eq!(t.closes.first().map(|c| round(c.0)), Some(0.4));
    assert_eq!(round(t.secs(t.outcome.end)), 0.4);
    assert_eq!(t.outcome.completed, 1);
    assert_eq!(t.outcome.skipped, 2);
    assert_eq!(t.records.len(), 2);
    assert!(t.records[1].result.is_err());
}

#[test]
fn the_deadline_includes_connect_time() {
    let s = session("/a timeout=0.5\n");
    let t = drive(&s, DriverConfig::default(), 0.45, |_, _, _| ok(0.1));
    assert_eq!(
        t.outcome.failure.as_ref().map(|f| f.1.kind),
        Some(ErrorKind::Timeout)
    );
    assert_eq!(round(t.secs(t.outcome.end)), 0.5);
}

#[test]
fn a_stale_reused_connection_is_retried_once_on_a_new_one() {
    let s = session("/a\n/b\n/c\n");
    let stale = || Reply::Fail {
        after: 0.01,
        failure: Failure {
            kind: ErrorKind::Reset,
            retryable: true,
            unsent: false,
            detail: "closed while idle".into(),
        },
    };
    // /b's first attempt hits a connection the server closed
    let t = drive(&s, DriverConfig::default(), 0.0, |j, attempt, _| {
        if j == 1 && attempt == 0 {
            stale()
        } else {
            ok(0.1)
        }
    });
    assert!(t.outcome.failure.is_none(), "{:?}", t.outcome.failure);
    assert_eq!(t.outcome.reconnects, 1);
    assert_eq!(t.connects.len(), 2, "a new connection for the retry");
    assert_eq!(t.sends.iter().filter(|s| s.2 == 1).count(), 2);
    assert_eq!(
        t.records.len(),
        3,
        "one record per request, not per attempt"
    );
    // a second stale failure on the same request ends the session
    let t = drive(&s, DriverConfig::default(), 0.0, |j, _, _| {
        if j == 1 {
            stale()
        } else {
            ok(0.1)
        }
    });
    assert_eq!(
        t.outcome.failure.as_ref().map(|f| f.1.kind),
        Some(ErrorKind::Reset)
    );
    assert_eq!(t.outcome.reconnects, 1);
    assert_eq!(t.outcome.skipped, 1);
}

/// A request lost with rejected 0-RTT never reached the server: its retry
/// does not use up the one a stale connection is allowed. Here /b meets a
/// stale connection, then its retry's new connection has its 0-RTT
/// rejected, and the third attempt answers; a second stale failure after
/// that still ends the session.
#[test]
fn a_request_lost_with_rejected_0rtt_is_sent_again_beside_its_one_retry() {
    let s = session("/a\n/b\n/c\n");
    let fail = |unsent: bool| Reply::Fail {
        after: 0.01,
        failure: Failure {
            kind: ErrorKind::Other,
            retryable: true,
            unsent,
            detail: if unsent {
                "0-RTT rejected".into()
            } else {
                "closed while idle".into()
            },
        },
    };
    let t = drive(&s, DriverConfig::default(), 0.0, |j, attempt, _| {
        match (j, attempt) {
            (1, 0) => fail(false),
            (1, 1) => fail(true),
            _ => ok(0.1),
        }
    });
    assert!(t.outcome.failure.is_none(), "{:?}", t.outcome.failure);
    assert_eq!(t.outcome.reconnects, 2);
    assert_eq!(t.sends.iter().filter(|s| s.2 == 1).count(), 3);
    assert_eq!(t.records.len(), 3);
    let t = drive(&s, DriverConfig::default(), 0.0, |j, attempt, _| {
        match (j, attempt) {
            (1, 0) => fail(false),
            (1, 1) => fail(true),
            (1, _) => fail(false),
            _ => ok(0.1),
        }
    });
    assert_eq!(
        t.outcome.failure.as_ref().map(|f| f.1.kind),
        Some(ErrorKind::Other)
    );
    assert_eq!(t.outcome.reconnects, 2);
}

#[test]
fn a_failure_in_a_burst_stops_new_sends_but_lets_others_finish() {
    // one burst over two connections: conn 0 has /a then /c, conn 1 /b then /d
    let s = session("/a\n /b conn=1\n /c\n /d conn=1\n/e\n");
    let t = drive(&s, DriverConfig::default(), 0.0, |j, _, _| match j {
        0 => ok(0.2),
        1 => Reply::Fail {
            after: 0.1,
            failure: Failure::new(ErrorKind::BadStatus, "status 500"),
        },
        _ => ok(0.1),
    });
    let sent: Vec<usize> = t.sends.iter().map(|s| s.2).collect();
    assert_eq!(sent, vec![0, 1], "/c, /d and /e never go");
    assert_eq!(t.outcome.completed, 1, "/a in flight completes");
    assert_eq!(t.outcome.failure.as_ref().map(|f| f.0), Some(1));
    assert_eq!(t.outcome.skipped, 3);
    assert_eq!(round(t.secs(t.outcome.end)), 0.2, "ends when /a is done");
}

#[test]
fn parallel_connections_carry_a_burst_together() {
    let s = session("/a\n /b conn=1\n /c\n/d pacing=1\n");
    let t = drive(&s, DriverConfig::default(), 0.0, |_, _, _| ok(0.3));
    // /a and /b at 0 on two connections, /c after /a on conn 0
    assert_eq!(
        t.sends[..3]
            .iter()
            .map(|s| (round(s.0), s.1, s.2))
            .collect::<Vec<_>>(),
        vec![(0.0, 0, 0), (0.0, 1, 1), (0.3, 0, 2)]
    );
    // /d paced from the burst's send at 0, after /c completed at 0.6
    assert_eq!(round(t.sends[3].0), 1.0);
}

#[test]
fn link_delay_applies_both_ways() {
    let s = session("/a\n/b\n");
    let cfg = DriverConfig {
        link_delay: Duration::from_millis(50),
        ..DriverConfig::default()
    };
    let t = drive(&s, cfg, 0.0, |_, _, _| ok(0.1));
    // leaves 50 ms after issue; counts as arrived 50 ms after its last byte
    assert_eq!(t.send_times(), vec![0.05, 0.25]);
    let first = t.records[0].result.as_ref().unwrap();
    assert_eq!(round(t.secs(first.done)), 0.2);
    assert_eq!(
        first.ttfb,
        Duration::from_millis(50) + Duration::from_millis(100)
    );
}

#[test]
fn a_server_close_means_a_new_connection_for_the_next_request() {
    let s = session("/a\n/b\n");
    let t = drive(&s, DriverConfig::default(), 0.0, |_, _, _| Reply::Ok {
        after: 0.1,
        keep_alive: false,
    });
    assert!(t.outcome.failure.is_none());
    assert_eq!(t.outcome.server_closes, 2);
    assert_eq!(t.connects.len(), 2);
    assert_eq!(t.outcome.reconnects, 0);
}

#[test]
fn the_playout_buffer_turns_arrivals_into_startup_and_stalls() {
    // 3 buffering requests of 10 s content, then paced every 10 s; /d takes 15 s
    let s = session("#@session request_s=10\n/a\n/b\n/c\n/d pacing=10\n/e pacing=10\n");
    let t = drive(&s, DriverConfig::default(), 0.0, |j, _, _| {
        ok(if j == 3 { 15.0 } else { 1.0 })
    });
    let v = t.outcome.viewer.expect("viewer stats");
    // playback starts when /c arrives at 3 s; /d due to play at 33 s arrives at 27 s;
    // /e sent at 27 (late), arrives at 28, plays at 43: no stall
    assert_eq!(v.startup_s, Some(3.0));
    assert_eq!(v.stalls, 0);
    let t = drive(&s, DriverConfig::default(), 0.0, |j, _, _| {
        ok(if j == 3 { 35.0 } else { 1.0 })
    });
    let v = t.outcome.viewer.expect("viewer stats");
    // /d arrives at 12 + 35 = 47 s but plays at 33 s: one stall of 14 s
    assert_eq!(v.stalls, 1);
    assert!((v.stall_s - 14.0).abs() < 1e-9, "{}", v.stall_s);
}

#[test]
fn cloudsuite_range_headers_are_checked_as_ranges() {
    // make_zipf.c syntax: the Range header is the request's range, so a 206
    // with the matching Content-Range passes (it failed as bad_status before)
    let s = session(
        "/full-360p-00186.mp4 timeout=10 headers='Range: bytes=0-1310719'\n/full-360p-00186.mp4 timeout=10 pace_time=10 headers='Range: bytes=1310720-2621439'\n",
    );
    let t = drive(&s, DriverConfig::default(), 0.0, |_, _, _| ok(0.1));
    assert!(t.outcome.failure.is_none(), "{:?}", t.outcome.failure);
    let got: Vec<u64> = t
        .records
        .iter()
        .map(|r| r.result.as_ref().unwrap().bytes)
        .collect();
    assert_eq!(got, vec![1_310_720, 1_310_720]);
}

#[test]
fn wrong_statuses_and_ranges_fail_with_their_kind() {
    use vodlab_client::core::driver::check;
    let r = Request {
        range: Some(vodlab_workload::script::ByteRange {
            start: 0,
            end: Some(99),
        }),
        ..Request::get("/a")
    };
    let mut resp = response_for(&r, Duration::ZERO, true);
    assert!(check(&r, &resp, None).is_ok());
    resp.status = 200;
    assert_eq!(
        check(&r, &resp, None).unwrap_err().kind,
        ErrorKind::BadStatus
    );
    resp.status = 206;
    resp.content_range = Some((0, 49, Some(100)));
    assert_eq!(
        check(&r, &resp, None).unwrap_err().kind,
        ErrorKind::ContentMismatch
    );
    let whole = Request::get("/a");
    let resp = response_for(&whole, Duration::ZERO, true);
    assert!(check(&whole, &resp, Some(1000)).is_ok());
    assert_eq!(
        check(&whole, &resp, Some(999)).unwrap_err().kind,
        ErrorKind::ContentMismatch
    );
}

#[test]
fn a_detached_request_holds_up_neither_the_next_burst_nor_its_pacing_but_the_end() {
    // /audio (detached, conn 1) takes 5 s; /v requests paced 1 s apart on
    // conn 0 go on time beside it; /late on conn 1 waits for /audio's
    // connection; the session ends when /audio completed
    let s = session(
        "/v range=0-999\n/audio range=0- stop_after=1000 detach=1 conn=1 pacing=0.2\n/v range=1000-1999 pacing=0.8\n/v range=2000-2999 pacing=1\n/late range=0-9 conn=1 pacing=1\n/v range=3000-3999 pacing=1\n",
    );
    let t = drive(&s, DriverConfig::default(), 0.0, |r, _, _| {
        ok(if r == 1 { 5.0 } else { 0.1 })
    });
    let sends: Vec<(f64, usize)> = t.sends.iter().map(|s| (round(s.0), s.2)).collect();
    assert_eq!(
        sends,
        vec![(0.0, 0), (0.2, 1), (1.0, 2), (2.0, 3), (5.2, 4), (5.3, 5)],
        "without detach=1 /v at 1.0 would wait for /audio until 5.2"
    );
    assert!(t.outcome.failure.is_none());
    assert_eq!(t.outcome.completed, 6);
    assert_eq!(round(t.secs(t.outcome.end)), 5.4);

    // the last burst done and a detached request still in flight: the
    // session waits for it
    let s = session("/a\n/b range=0- stop_after=1000 detach=1 conn=1\n/c pacing=0.5\n");
    let t = drive(&s, DriverConfig::default(), 0.0, |r, _, _| {
        ok(if r == 1 { 3.0 } else { 0.1 })
    });
    assert_eq!(t.send_times(), vec![0.0, 0.1, 0.6]);
    assert_eq!(t.outcome.completed, 3);
    assert_eq!(round(t.secs(t.outcome.end)), 3.1);
}
