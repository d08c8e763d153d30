//! Property tests: any script model written in vodlab's format reads back
//! identically, and the httperf export keeps paths and order.

use proptest::prelude::*;
use vodlab_workload::script::{
    export_httperf, parse_script, write_vodlab, ByteRange, Method, Request, Script, Session,
    SessionHeader, Wait,
};

fn seconds() -> impl Strategy<Value = f64> {
    prop_oneof![
        (1u32..100_000).prop_map(|ms| ms as f64 / 1000.0),
        // at most limits::MAX_SECONDS, the bound the parser enforces
        (0.001f64..86_400.0),
    ]
}

fn word() -> impl Strategy<Value = String> {
    "[a-z0-9][a-z0-9._-]{0,8}"
}

fn request(first: bool) -> impl Strategy<Value = Request> {
    (
        "/[a-zA-Z0-9/_.%?&-]{0,24}",
        prop::sample::select(Method::ALL.to_vec()),
        prop::option::of((0u64..1 << 40, prop::option::of(0u64..1 << 30))),
        prop::option::of(seconds()),
        (0u8..3, seconds()),
        any::<bool>(),
        0u32..4,
        prop::collection::vec("[A-Za-z-]{1,10}: [ -~]{0,20}", 0..3),
        prop::option::of("[ -~\n\t]{0,30}"),
        // at most limits::MAX_BYTE, the bound the parser enforces
        prop::option::of(0..=vodlab_workload::limits::MAX_BYTE),
        any::<bool>(),
        // stop_after= is kept only on an open-ended range, as the parser requires
        prop::option::of(1..=vodlab_workload::limits::MAX_BYTE),
    )
        .prop_map(
            move |(
                path,
                method,
                range,
                timeout_s,
                (w, ws),
                burst,
                conn,
                headers,
                body,
                size,
                http10,
                stop_after,
            )| {
                let burst = burst && !first;
                let wait = match (burst, w) {
                    (true, _) | (_, 0) => Wait::None,
                    (false, 1) => Wait::Pacing(ws),
                    (false, _) if first => Wait::Pacing(ws),
                    (false, _) => Wait::Think(ws),
                };
                let range = range.map(|(start, len)| ByteRange {
                    start,
                    end: len.map(|l| start + l),
                });
                let open = matches!(range, Some(ByteRange { end: None, .. }));
                Request {
                    path,
                    method,
                    range,
                    timeout_s,
                    wait,
                    burst,
                    conn,
                    headers: headers
                        .into_iter()
                        .map(|h| h.trim_end().to_string())
                        .filter(|h| !h.ends_with(':'))
                        .collect(),
                    body,
                    size,
                    http10,
                    stop_after: stop_after.filter(|_| open),
                    read_kbps: stop_after.map(|n| n % 100_000 + 1),
                    // any request may be detached; derived from the same draw
                    detach: stop_after.is_some_and(|n| n % 3 == 0),
                }
            },
        )
}

fn session() -> impl Strategy<Value = Session> {
    (
        request(true),
        prop::collection::vec(request(false), 0..6),
        prop::option::of(any::<u64>()),
        prop::option::of(word()),
        prop::option::of(word()),
        prop::option::of(1u32..100_000),
        prop::option::of(any::<u16>()),
        prop::option::of(seconds()),
    )
        .prop_map(|(first, rest, id, class, rep, rank, port, request_s)| {
            let mut requests = vec![first];
            requests.extend(rest);
            Session {
                header: SessionHeader {
                    id,
                    class,
                    rep,
                    rank,
                    port,
                    request_s,
                    ..Default::default()
                },
                requests,
            }
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn vodlab_format_round_trips(sessions in prop::collection::vec(session(), 1..5)) {
        let script = Script { sessions };
        let text = write_vodlab(&script);
        let back = parse_script(&text).map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        prop_assert_eq!(back, script, "{}", text);
    }

    #[test]
    fn httperf_export_keeps_paths_of_exportable_sessions(sessions in prop::collection::vec(session(), 1..5)) {
        let script = Script { sessions };
        let (text, report) = export_httperf(&script);
        let back = parse_script(&text).map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        let kept: Vec<&Session> = script
            .sessions
            .iter()
            .filter(|s| s.requests.iter().all(|r| r.range.is_none() && r.headers.is_empty()))
            .collect();
        prop_assert_eq!(back.sessions.len(), kept.len());
        prop_assert_eq!(report.sessions_out, kept.len());
        for (b, k) in back.sessions.iter().zip(kept) {
            let paths: Vec<String> = k.requests.iter().map(|r| if r.path.starts_with('/') { r.path.clone() } else { format!("/{}", r.path) }).collect();
            prop_assert_eq!(b.requests.iter().map(|r| r.path.clone()).collect::<Vec<_>>(), paths);
            prop_assert_eq!(b.requests.iter().map(|r| r.burst).collect::<Vec<_>>(), k.requests.iter().map(|r| r.burst).collect::<Vec<_>>());
        }
    }
}
