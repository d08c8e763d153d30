//! Every event the prefetch core records (`vodlab serve --prefetch-events`)
//! validates against `docs/prefetch-events.schema.json`, the schema names
//! exactly the fields the events carry, and lines the schema refuses (an
//! unknown field, a missing one) are refused by the reader too.

use std::path::Path;
use std::sync::{Arc, Mutex};

use serde_json::Value;
use vodlab_prefetch::events::{read_events, Event};
use vodlab_prefetch::sim::{simulate_recorded, SimChain, SimConfig};
use vodlab_prefetch::PolicySpec;

fn schema() -> Value {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/prefetch-events.schema.json");
    serde_json::from_str(&std::fs::read_to_string(p).expect("schema file")).expect("schema JSON")
}

/// A chain of `bytes` in `requests` equal ranges over `dur` seconds.
fn chain(session: u64, start: f64, bytes: u64, requests: u32, dur: f64) -> SimChain {
    SimChain {
        session,
        file: session,
        drive: (session % 2) as u32,
        file_size: 1 << 30,
        offset: 0,
        bytes,
        requests,
        start_s: start,
        end_s: start + dur,
        bitrate_bps: Some(2_000_000),
        open_ended: false,
    }
}

/// The events of a small simulation: 3 MB ranges under `auto`'s 4 MiB
/// (resident heads), 1 MB ranges (hits), twenty-five viewers in a 48 MiB page cache (evictions),
/// one open-ended chain, ticks with the drives' totals.
fn recorded() -> Vec<Event> {
    let mut chains: Vec<SimChain> = (0..20)
        .map(|k| chain(k, k as f64 * 0.3, 30_000_000, 10, 120.0))
        .collect();
    // 1 MB ranges: hits inside each 4 MiB prefetch
    chains.extend((50..55).map(|k| chain(k, k as f64 * 0.2, 10_000_000, 10, 60.0)));
    let mut open = chain(99, 1.0, 20_000_000, 1, 80.0);
    open.open_ended = true;
    chains.push(open);
    let cfg = SimConfig {
        page_cache: Some(48 << 20),
        ..SimConfig::default()
    };
    let policy: PolicySpec = "auto:interval=10,ramp=2,busy=0".parse().unwrap();
    let events: Arc<Mutex<Vec<Event>>> = Arc::default();
    let sink = events.clone();
    let r = simulate_recorded(
        &cfg,
        policy.build(),
        &chains,
        Box::new(move |e| sink.lock().unwrap().push(e.clone())),
    );
    assert!(r.evictions > 0, "no eviction to record: {r:?}");
    let events = events.lock().unwrap().clone();
    events
}

fn errors(validator: &jsonschema::Validator, v: &Value) -> Vec<String> {
    validator
        .iter_errors(v)
        .map(|e| format!("{e} at {}", e.instance_path))
        .collect()
}

#[test]
fn recorded_events_validate_against_the_schema() {
    let validator = jsonschema::validator_for(&schema()).expect("schema compiles");
    let mut events = recorded();
    // the fields a simulation leaves out (it has no chains, knows every
    // bit rate): a request as serve writes it for a chunk of a title
    events.push(Event::Request {
        t_ns: 5,
        conn: 7,
        session: "c7".into(),
        file: 42,
        offset: 3_000_000,
        length: 3_000_000,
        file_size: 12_000_000,
        bitrate_bps: None,
        open_ended: false,
        continuation: false,
        chain: Some("/t00042".into()),
        probes: vec![false, true],
        prefetch: Some([4_194_304, 4_194_304]),
        head: 1_194_304,
        evicted: None,
    });
    events.push(Event::Tick {
        t_ns: 6,
        device_bytes: None,
        device_busy_ns: None,
    });
    let mut text = String::new();
    let mut keys: std::collections::BTreeMap<String, std::collections::BTreeSet<String>> =
        Default::default();
    for e in &events {
        let v = serde_json::to_value(e).unwrap();
        let errs = errors(&validator, &v);
        assert!(errs.is_empty(), "{v}: {errs:?}");
        let kind = v["event"].as_str().unwrap().to_string();
        keys.entry(kind)
            .or_default()
            .extend(v.as_object().unwrap().keys().cloned());
        text.push_str(&serde_json::to_string(e).unwrap());
        text.push('\n');
    }
    // the lines read back as the same events
    assert_eq!(read_events(text.as_bytes()).unwrap(), events);
    // what the stream covered
    let of = |kind: &str| {
        events
            .iter()
            .map(|e| serde_json::to_value(e).unwrap())
            .filter(|v| v["event"] == kind)
            .collect::<Vec<_>>()
    };
    let requests = of("request");
    assert!(requests.iter().any(|v| v["open_ended"] == true));
    assert!(requests.iter().any(|v| v["evicted"].as_u64() > Some(0)));
    assert!(requests
        .iter()
        .any(|v| v["probes"] == serde_json::json!([false, true]) && v["head"].as_u64() > Some(0)));
    assert!(requests.iter().any(|v| v.get("prefetch").is_none()));
    assert!(!of("read_done").is_empty());
    assert!(of("tick")
        .iter()
        .any(|v| v["device_bytes"].as_u64() > Some(0)));
    assert!(!of("session_end").is_empty());
    // the schema names exactly the fields the events carry
    let s = schema();
    for (kind, seen) in &keys {
        let props: std::collections::BTreeSet<String> = s["$defs"][kind]["properties"]
            .as_object()
            .unwrap_or_else(|| panic!("schema has no {kind}"))
            .keys()
            .cloned()
            .collect();
        assert_eq!(&props, seen, "{kind}");
    }
    assert_eq!(keys.len(), 4);
}

#[test]
fn unknown_and_missing_fields_are_refused() {
    let validator = jsonschema::validator_for(&schema()).expect("schema compiles");
    let events = recorded();
    let request = events
        .iter()
        .find(|e| matches!(e, Event::Request { .. }))
        .map(|e| serde_json::to_value(e).unwrap())
        .unwrap();
    let tick = serde_json::to_value(Event::Tick {
        t_ns: 1,
        device_bytes: Some(10),
        device_busy_ns: Some(20),
    })
    .unwrap();
    let with = |v: &Value, k: &str, x: Value| {
        let mut v = v.clone();
        v.as_object_mut().unwrap().insert(k.into(), x);
        v
    };
    let without = |v: &Value, k: &str| {
        let mut v = v.clone();
        v.as_object_mut().unwrap().remove(k);
        v
    };
    let bad = [
        ("unknown field", with(&request, "prefetch_bytes", 4.into())),
        ("missing t_ns", without(&request, "t_ns")),
        ("missing probes", without(&request, "probes")),
        ("unknown field on a tick", with(&tick, "busy", 1.into())),
        ("missing device_busy_ns", without(&tick, "device_busy_ns")),
        ("unknown kind", with(&tick, "event", "tock".into())),
        ("negative offset", with(&request, "offset", (-1).into())),
        (
            "three probes",
            with(&request, "probes", serde_json::json!([false, false, true])),
        ),
        (
            "a second probe after a hit",
            with(&request, "probes", serde_json::json!([true, false])),
        ),
    ];
    for (what, v) in bad {
        assert!(
            !errors(&validator, &v).is_empty(),
            "{what}: the schema accepts {v}"
        );
    }
    // the reader refuses what serde can tell: unknown and missing fields
    for (what, v) in [
        ("unknown field", with(&request, "prefetch_bytes", 4.into())),
        ("missing t_ns", without(&request, "t_ns")),
        ("unknown field on a tick", with(&tick, "busy", 1.into())),
        ("unknown kind", with(&tick, "event", "tock".into())),
    ] {
        let line = format!("{v}\n");
        let e = read_events(line.as_bytes()).expect_err(what).to_string();
        assert!(e.starts_with("line 1:"), "{what}: {e}");
    }
}
