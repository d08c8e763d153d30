//! Property tests (issue 11): random specifications (a preset with numbers
//! replaced by extreme values, random overrides, random text) and random
//! scripts (lines of keys with extreme values, random bytes) go through the
//! spec parser, validator and constructor and the script parser and writers.
//! Each call must return `Ok` or a clean error: a panic fails the test, and a
//! spec whose construction would allocate too much must be refused by the
//! estimate first (an abort would end the test binary).

use proptest::prelude::*;
use proptest::sample::Index;
use vodlab_workload::construct::try_construct;
use vodlab_workload::script::{
    export_cloudsuite, export_h2load, export_httperf, parse_script_bytes, write_vodlab,
};
use vodlab_workload::{limits, presets, Overrides, Spec, SpecError};

/// Extreme values written in place of a number of the spec.
const EXTREMES: [&str; 16] = [
    "0",
    "-1",
    "-0.0",
    "nan",
    "inf",
    "-inf",
    "1e300",
    "1e-300",
    "1e-9",
    "4294967295",
    "4294967296",
    "18446744073709551615",
    "9223372036854775807",
    "0.5",
    "1",
    "1000000",
];

/// The youtube-2011 preset shrunk so a valid variant constructs in
/// milliseconds (the mutations, not the base size, are under test).
fn base() -> String {
    presets::source("youtube-2011")
        .unwrap()
        .replace("titles = 10000", "titles = 300")
        .replace("count = 7200", "count = 200")
        .replace("shard_sessions = 600", "shard_sessions = 50")
        .replace("ramp_up_sessions = 200", "ramp_up_sessions = 5")
        .replace("ramp_down_sessions = 100", "ramp_down_sessions = 5")
}

/// Byte spans of the numeric literals of a TOML text (after `= `, `[` or `, `).
fn numbers(text: &str) -> Vec<(usize, usize)> {
    let b = text.as_bytes();
    let mut spans = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let starts = (b[i].is_ascii_digit() || b[i] == b'-')
            && i > 0
            && matches!(b[i - 1], b' ' | b'[')
            && (b[i - 1] == b'[' || (i > 1 && matches!(b[i - 2], b'=' | b',')));
        if starts {
            let mut j = i + 1;
            while j < b.len() && (b[j].is_ascii_alphanumeric() || b".+-_".contains(&b[j])) {
                j += 1;
            }
            spans.push((i, j));
            i = j;
        } else {
            i += 1;
        }
    }
    spans
}

/// Replaces numbers by extreme values; an edit with `keyed` picks among the
/// `key = number` values (titles, count, request_s, ...) rather than among
/// every number (mostly CDF points), so the scalar keys are hit often.
fn mutate(text: &str, edits: &[(bool, Index, Index)]) -> String {
    let all = numbers(text);
    let keyed: Vec<(usize, usize)> = all
        .iter()
        .copied()
        .filter(|&(s, _)| text[..s].ends_with("= "))
        .collect();
    let mut chosen: Vec<(usize, usize, &str)> = edits
        .iter()
        .map(|(k, at, v)| {
            let spans = if *k { &keyed } else { &all };
            let (s, e) = spans[at.index(spans.len())];
            (s, e, EXTREMES[v.index(EXTREMES.len())])
        })
        .collect();
    chosen.sort_by_key(|c| std::cmp::Reverse(c.0));
    chosen.dedup_by_key(|c| c.0);
    let mut out = text.to_string();
    for (s, e, v) in chosen {
        out.replace_range(s..e, v);
    }
    out
}

/// Parses, validates and (when valid) constructs; any error is fine.
fn exercise(text: &str, overrides: &Overrides) {
    let Ok(mut spec) = Spec::from_toml_str(text, "fuzz.toml") else {
        return;
    };
    if spec.apply(overrides, "fuzz.toml").is_err() {
        return;
    }
    match try_construct(&spec, "fuzz.toml") {
        Ok(w) => {
            assert!(w.stats.total_chunks <= limits::MAX_REQUESTS);
            // the scripts of the first sessions are well-formed
            let mut out = String::new();
            for g in w.sessions.iter().take(5) {
                out.push('\n'); // sessions are separated by a blank line
                vodlab_workload::script::write_vodlab_session(&w.session(g), &mut out);
            }
            parse_script_bytes(out.as_bytes()).expect("generated scripts parse");
        }
        Err(SpecError::Invalid { problems, .. }) => assert!(!problems.is_empty()),
        Err(e) => panic!("construction failed with an unexpected error: {e}"),
    }
}

fn overrides() -> impl Strategy<Value = Overrides> {
    let u32s = prop::option::of(prop_oneof![
        Just(0u32),
        Just(1),
        Just(u32::MAX),
        Just(limits::MAX_SESSIONS),
        Just(limits::MAX_TITLES + 1),
        1u32..500,
    ]);
    let scale = prop::option::of(prop_oneof![
        Just(f64::NAN),
        Just(f64::INFINITY),
        Just(-1.0),
        Just(0.0),
        Just(1e12),
        Just(1e-300),
        0.01f64..2.0,
    ]);
    (prop::option::of(any::<u64>()), u32s.clone(), u32s, scale).prop_map(
        |(seed, sessions, titles, scale)| Overrides {
            seed,
            sessions,
            titles,
            scale,
        },
    )
}

/// Script tokens: keys with extreme values, paths, headers, noise.
fn script_token() -> impl Strategy<Value = String> {
    let key = prop::sample::select(vec![
        "timeout",
        "pacing",
        "think",
        "pace_time",
        "conn",
        "size",
        "range",
        "method",
        "http",
        "contents",
        "headers",
        "cookie",
        "id",
        "rank",
        "bitrate",
        "request_s",
        "port",
        "ssl",
        "server",
        "colour",
    ]);
    let value = prop_oneof![
        prop::sample::select(EXTREMES.to_vec()).prop_map(str::to_string),
        Just("0-18446744073709551615".to_string()),
        Just("18446744073709551615-".to_string()),
        Just("'Range: bytes=0-18446744073709551615'".to_string()),
        Just("'Range: bytes=5-1'".to_string()),
        Just("GET".to_string()),
        Just("on".to_string()),
        "[ -~]{0,12}",
    ];
    prop_oneof![
        3 => (key, value).prop_map(|(k, v)| format!("{k}={v}")),
        1 => "/[a-z0-9./]{0,10}",
        1 => Just("#@session".to_string()),
        1 => Just("session".to_string()),
        1 => "[ -~]{1,8}",
    ]
}

fn script_line() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        6 => (
            prop::sample::select(vec!["", "", "  ", "\t", "#@"]),
            prop::collection::vec(script_token(), 1..6),
        )
            .prop_map(|(indent, toks)| format!("{indent}{}", toks.join(" ")).into_bytes()),
        1 => Just(Vec::new()),
        1 => prop::collection::vec(any::<u8>(), 0..24),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn mutated_specs_are_accepted_or_refused_cleanly(
        edits in prop::collection::vec((any::<bool>(), any::<Index>(), any::<Index>()), 1..4),
        o in overrides(),
    ) {
        exercise(&mutate(&base(), &edits), &o);
    }

    #[test]
    fn random_spec_text_is_refused_cleanly(text in "[ -~\n]{0,200}") {
        exercise(&text, &Overrides::default());
    }

    #[test]
    fn random_scripts_parse_or_fail_cleanly(
        lines in prop::collection::vec(script_line(), 0..12),
    ) {
        let bytes = lines.join(&b'\n');
        match parse_script_bytes(&bytes) {
            Ok(s) => {
                for r in s.sessions.iter().flat_map(|x| &x.requests) {
                    prop_assert!(r.conn < limits::MAX_CONNECTIONS_PER_SESSION);
                    prop_assert!(r.timeout_s.is_none_or(|t| t <= limits::MAX_SECONDS));
                    prop_assert!(r.size.is_none_or(|n| n <= limits::MAX_BYTE));
                }
                // every writer copes with whatever parsed
                let text = write_vodlab(&s);
                prop_assert_eq!(parse_script_bytes(text.as_bytes()).map(|x| x.request_count()), Ok(s.request_count()));
                let _ = export_httperf(&s);
                let _ = export_cloudsuite(&s);
                for sess in &s.sessions {
                    let _ = export_h2load(sess);
                }
            }
            Err(e) => {
                prop_assert!(e.line >= 1 && e.column >= 1, "{e}");
                // a random byte line may itself hold line breaks
                let physical = bytes.split(|b| *b == b'\n').count().max(1);
                prop_assert!(e.line <= physical, "{e}");
            }
        }
    }
}

#[test]
fn the_mutator_finds_the_numbers_of_the_preset() {
    let text = base();
    let spans = numbers(&text);
    let found: Vec<&str> = spans.iter().map(|&(s, e)| &text[s..e]).collect();
    for want in [
        "300", "0.8", "10.0", "40.0", "419.4304", "200", "0.018", "15.0",
    ] {
        assert!(found.contains(&want), "{want} not in {found:?}");
    }
    assert!(found.iter().all(|n| n.parse::<f64>().is_ok()), "{found:?}");
}

/// The probes of issue 11 that aborted on allocation, in-process: each is
/// refused with the key and the bound, before anything is allocated.
#[test]
fn issue_11_spec_probes_are_refused_in_process() {
    let text = presets::source("youtube-2011").unwrap();
    for (from, to, key) in [
        ("titles = 10000", "titles = 4294967295", "catalog.titles"),
        ("count = 7200", "count = 4294967295", "sessions.count"),
        ("request_s = 10.0", "request_s = 1e-9", "sessions.request_s"),
        (
            "bitrate_kbps = 419.4304",
            "bitrate_kbps = 1e300",
            "bitrate_kbps",
        ),
    ] {
        let err = Spec::from_toml_str(&text.replacen(from, to, 1), "w.toml")
            .unwrap_err()
            .to_string();
        assert!(err.contains(key), "{to}: {err}");
    }
    for o in [
        Overrides {
            sessions: Some(u32::MAX),
            ..Default::default()
        },
        Overrides {
            scale: Some(1e12),
            ..Default::default()
        },
    ] {
        let mut spec = presets::load("youtube-2011").unwrap();
        let err = spec.apply(&o, "p").unwrap_err().to_string();
        assert!(
            err.contains("--sessions") || err.contains("--scale"),
            "{err}"
        );
    }
}
