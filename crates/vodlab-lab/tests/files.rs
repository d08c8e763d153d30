//! The typed experiment files: version-1 files (the committed headline
//! experiment) still load, version-2 files round-trip, both validate
//! against `docs/capacity.schema.json` and `docs/compare.schema.json`, and
//! versions this crate does not know are refused by name.

use std::path::{Path, PathBuf};

use serde_json::Value;
use vodlab_lab::capacity::{CAPACITY_VERSION, CLIENT_LIMITED_ADVICE};
use vodlab_lab::compare::{COMPARE_FORMAT, COMPARE_VERSION};
use vodlab_lab::report::{capacity_section, compare_section, Page};
use vodlab_lab::{
    CapacityFile, CapacityMeta, CompareFile, Figures, FileError, Outcome, RunExtra, Search,
    SearchConfig, SearchOutcome, SeqRead, ServerRow, Stop, Verdict,
};

fn docs() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs")
}

fn headline() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments/headline")
}

fn validate(schema: &str, v: &Value) -> Vec<String> {
    let schema: Value =
        serde_json::from_str(&std::fs::read_to_string(docs().join(schema)).unwrap()).unwrap();
    let validator = jsonschema::validator_for(&schema).expect("schema compiles");
    validator
        .iter_errors(v)
        .map(|e| format!("{e} at {}", e.instance_path))
        .collect()
}

fn capacity_files() -> Vec<PathBuf> {
    let mut v = Vec::new();
    for wl in std::fs::read_dir(headline()).unwrap() {
        // one folder per workload; the folder also holds the gzipped report
        let wl = wl.unwrap().path();
        if !wl.is_dir() {
            continue;
        }
        for s in std::fs::read_dir(wl).unwrap() {
            let p = s.unwrap().path().join("capacity.json");
            if p.is_file() {
                v.push(p);
            }
        }
    }
    v.sort();
    v
}

/// A search on a simulated server that fails at 16/s, whose client is
/// INVALID between 10 and 16/s: 1, 2, 4, 8 pass, 16 fails, 12 is INVALID.
fn limited_search() -> Search {
    let mut s = Search::new(SearchConfig {
        max_rate: 1000.0,
        ..Default::default()
    })
    .unwrap();
    s.run(|rate, _| {
        Ok::<_, ()>(Outcome {
            measured_sessions: 50,
            failed_sessions: u64::from(rate >= 16.0),
            throughput_bytes_per_s: rate * 1e6,
            client_valid: !(rate > 10.0 && rate < 16.0),
            client_invalid_reasons: if rate > 10.0 && rate < 16.0 {
                vec!["the client saturated its CPU (199 % of 2 core(s))".into()]
            } else {
                vec![]
            },
            extra: RunExtra {
                results: Some(format!("points/rate-{rate}")),
                disk_mb_s: Some(rate / 2.0),
                ..Default::default()
            },
            ..Default::default()
        })
    })
    .unwrap();
    s
}

fn meta() -> CapacityMeta {
    CapacityMeta {
        workload: "w".into(),
        target: "http://127.0.0.1:1".into(),
        server: Some("sim".into()),
        window_s: 10.0,
        drain_s: 5.0,
        pacing: false,
        shaping: false,
        late_threshold_ms: Some(10.0),
        client_processes: Some(2),
        time_compression: Some(10.0),
        started_at_unix_s: 1000.0,
    }
}

#[test]
fn version_1_capacity_files_load_and_validate() {
    let files = capacity_files();
    assert_eq!(files.len(), 10, "the headline experiment's ten searches");
    for p in &files {
        let text = std::fs::read_to_string(p).unwrap();
        let errors = validate(
            "capacity.schema.json",
            &serde_json::from_str(&text).unwrap(),
        );
        assert!(errors.is_empty(), "{}: {errors:#?}", p.display());
        let f = CapacityFile::read(p).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(f.version, 1);
        assert_eq!(f.rows.len(), f.search.points.len());
        for (pt, row) in f.search.points.iter().zip(&f.rows) {
            // version 1 knew pass and fail only
            let want = if pt.passed {
                Verdict::Pass
            } else {
                Verdict::Fail
            };
            assert_eq!(pt.verdict, want);
            assert_eq!(row.verdict, want);
            assert!(pt.runs[0].extra.results.is_some(), "{}", p.display());
        }
        assert_eq!(f.complete, f.outcome.is_complete(), "{}", p.display());
    }
    // what the outcomes were derived from
    let nginx =
        CapacityFile::read(&headline().join("youtube-2011-2mb/nginx/capacity.json")).unwrap();
    assert_eq!(nginx.outcome, SearchOutcome::Found);
    assert_eq!(nginx.answer.capacity, Some(3.5));
    assert!(nginx.search.points[0].runs[0].extra.disk_mb_s.unwrap() > 0.0);
    let apache =
        CapacityFile::read(&headline().join("youtube-2011-unchunked/apache2/capacity.json"))
            .unwrap();
    assert!(
        matches!(&apache.outcome, SearchOutcome::Interrupted { message } if message.starts_with("interrupted")),
        "{:?}",
        apache.outcome
    );
}

#[test]
fn version_1_compare_files_load_validate_and_render() {
    for wl in ["youtube-2011-2mb", "youtube-2011-unchunked"] {
        let p = headline().join(wl).join("compare.json");
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
        let errors = validate("compare.schema.json", &v);
        assert!(errors.is_empty(), "{}: {errors:#?}", p.display());
        let f = CompareFile::read(&p).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(f.version, 1);
        assert_eq!(f.servers.len(), 5);
        assert!(f.seqread.as_ref().unwrap().mb_s > 0.0);
        assert_eq!(f.profile.as_ref().unwrap().name, "hdd-7200");
        assert!(f.hw_box.as_ref().unwrap().read_iops.is_some());
        let asap = f.server("vodlab-asap").unwrap();
        assert!(asap.at_capacity.as_ref().unwrap().disk_mb_s.unwrap() > 0.0);
        let dir = p.parent().unwrap().to_path_buf();
        let mut page = Page::new("t");
        compare_section(&mut page, &f, &|rel| {
            std::fs::read_to_string(dir.join(rel)).ok()
        });
        let html = page.finish();
        for want in [
            "Comparison",
            "Capacity of nginx",
            "Capacity of lighttpd",
            "Sequential-read bound",
        ] {
            assert!(html.contains(want), "{wl}: no {want}");
        }
        assert!(!html.contains("could not be read"), "{wl}");
    }
    let two = CompareFile::read(&headline().join("youtube-2011-2mb/compare.json")).unwrap();
    assert_eq!(
        two.server("vodlab-asap").unwrap().outcome,
        SearchOutcome::OutOfPoints
    );
    let un = CompareFile::read(&headline().join("youtube-2011-unchunked/compare.json")).unwrap();
    assert!(matches!(
        un.server("apache2").unwrap().outcome,
        SearchOutcome::Interrupted { .. }
    ));
}

#[test]
fn version_2_capacity_round_trips_validates_and_names_the_client_limit() {
    let s = limited_search();
    let f = CapacityFile::new(&s, None, meta(), 1060.0);
    assert_eq!(f.version, CAPACITY_VERSION);
    assert_eq!(f.duration_s, 60.0);
    assert!(f.complete);
    let SearchOutcome::ClientLimited { rate, reasons } = &f.outcome else {
        panic!("{:?}", f.outcome)
    };
    assert_eq!(*rate, 12.0);
    assert_eq!(
        reasons,
        &["the client saturated its CPU (199 % of 2 core(s))"]
    );
    assert_eq!(f.answer.capacity, Some(8.0), "16 failed, 12 was INVALID");
    assert_eq!(f.rows.last().unwrap().verdict, Verdict::Invalid);
    let line = f.answer_line();
    assert!(
        line.contains("LIMITED BY THE LOAD GENERATOR at 12.000"),
        "{line}"
    );
    assert!(line.contains(CLIENT_LIMITED_ADVICE), "{line}");

    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("capacity.json");
    f.write(&p).unwrap();
    let text = std::fs::read_to_string(&p).unwrap();
    let v: Value = serde_json::from_str(&text).unwrap();
    let errors = validate("capacity.schema.json", &v);
    assert!(errors.is_empty(), "{errors:#?}");
    assert_eq!(v["outcome"]["kind"], "client_limited");
    assert_eq!(v["answer"]["client_limited_at"], 12.0);
    assert_eq!(v["answer"]["lowest_failed"], 16.0);
    assert_eq!(v["search"]["points"][5]["verdict"], "invalid");
    let back = CapacityFile::read(&p).unwrap();
    assert_eq!(back.search.points, f.search.points);
    assert_eq!(back.outcome, f.outcome);
    assert_eq!(back.rows, f.rows);
    assert_eq!(back.answer, f.answer);

    // the report says the generator limited it and leaves the point out of the figures
    let mut page = Page::new("t");
    capacity_section(&mut page, &back, &|_| None);
    let html = page.finish();
    assert!(html.contains("LIMITED BY THE LOAD GENERATOR"));
    assert!(html.contains("INVALID"));

    // interrupted and failed searches say so
    let mut cut = Search::new(SearchConfig::default()).unwrap();
    let _ = cut.run(|r, _| {
        if r > 2.0 {
            Err("x")
        } else {
            Ok(Outcome {
                measured_sessions: 1,
                client_valid: true,
                ..Default::default()
            })
        }
    });
    let f = CapacityFile::new(
        &cut,
        Some(&Stop::Interrupted("interrupted".into())),
        meta(),
        1001.0,
    );
    assert!(!f.complete);
    assert_eq!(f.error.as_deref(), Some("interrupted"));
    assert_eq!(f.outcome.kind(), "interrupted");
    let f = CapacityFile::new(
        &cut,
        Some(&Stop::Error("the server stopped answering".into())),
        meta(),
        1001.0,
    );
    assert_eq!(
        f.outcome,
        SearchOutcome::Error {
            message: "the server stopped answering".into()
        }
    );
    let v = serde_json::to_value(&f).unwrap();
    assert!(validate("capacity.schema.json", &v).is_empty());
}

#[test]
fn version_2_compare_round_trips_and_validates() {
    let s = limited_search();
    let row = ServerRow {
        server: "nginx".into(),
        kind: Some("nginx".into()),
        prefetch_policy: None,
        serve_args: vec![],
        answer: s.answer(),
        outcome: SearchOutcome::of(&s, None),
        at_capacity: s.best_point().map(Figures::of),
        at_overload: s.lowest_failed_point().map(Figures::of),
        error: None,
        capacity_json: "nginx/capacity.json".into(),
    };
    // a configuration row of vodlab serve, and a row skipped for the protocol
    let policy_row = ServerRow {
        server: "vodlab-asap:fixed:2M".into(),
        kind: Some("vodlab-asap".into()),
        prefetch_policy: Some("fixed:2M".into()),
        serve_args: vec!["--helpers=1".into()],
        capacity_json: "vodlab-asap_fixed_2M/capacity.json".into(),
        ..row.clone()
    };
    let skipped = ServerRow {
        server: "lighttpd".into(),
        kind: Some("lighttpd".into()),
        outcome: SearchOutcome::Skipped {
            reason: "lighttpd over h2: no TLS module".into(),
        },
        at_capacity: None,
        at_overload: None,
        ..row.clone()
    };
    assert_eq!(row.at_capacity.as_ref().unwrap().rate, 8.0);
    assert_eq!(row.at_capacity.as_ref().unwrap().disk_mb_s, Some(4.0));
    assert_eq!(row.at_overload.as_ref().unwrap().rate, 16.0);
    let f = CompareFile {
        format: COMPARE_FORMAT.into(),
        version: COMPARE_VERSION,
        complete: true,
        workload: "w".into(),
        root: "/r".into(),
        hw_box: None,
        profile: vodlab_lab::hwbox::profile("ssd").ok().map(Into::into),
        disk: None,
        criterion: "no failed session".into(),
        window_s: 2.0,
        pacing: false,
        shaping: false,
        protocol: Some("h2".into()),
        seqread: Some(SeqRead {
            bytes_read: 10,
            seconds: 1.0,
            mb_s: 1e-5,
            output: "x".into(),
        }),
        servers: vec![row, policy_row, skipped],
        started_at_unix_s: 1.0,
        duration_s: Some(2.0),
    };
    let v = serde_json::to_value(&f).unwrap();
    let errors = validate("compare.schema.json", &v);
    assert!(errors.is_empty(), "{errors:#?}");
    assert_eq!(v["servers"][0]["outcome"]["kind"], "client_limited");
    assert_eq!(v["servers"][1]["prefetch_policy"], "fixed:2M");
    assert_eq!(v["servers"][2]["outcome"]["kind"], "skipped");
    assert_eq!(v["protocol"], "h2");
    let back = CompareFile::from_json(&v.to_string()).unwrap();
    assert_eq!(back.servers, f.servers);
    let mut page = Page::new("t");
    compare_section(&mut page, &back, &|_| None);
    assert!(page.finish().contains("load generator INVALID at 12.000/s"));
}

#[test]
fn unknown_versions_and_formats_are_named() {
    let f = CapacityFile::new(&limited_search(), None, meta(), 1001.0);
    let mut v = serde_json::to_value(&f).unwrap();
    v["version"] = 3.into();
    let e = CapacityFile::from_json(&v.to_string()).unwrap_err();
    assert!(matches!(
        e,
        FileError::Version {
            found: 3,
            newest: 2,
            ..
        }
    ));
    let msg = e.to_string();
    assert!(
        msg.contains("vodlab-capacity format version 3 cannot be read"),
        "{msg}"
    );
    assert!(msg.contains("versions 1 to 2"), "{msg}");
    assert!(
        !validate("capacity.schema.json", &v).is_empty(),
        "the schema refuses version 3 too"
    );

    v["version"] = 2.into();
    v.as_object_mut().unwrap().remove("outcome");
    let e = CapacityFile::from_json(&v.to_string()).unwrap_err();
    assert!(
        e.to_string()
            .contains("vodlab-capacity format version 2: missing field `outcome`"),
        "{e}"
    );
    assert!(!validate("capacity.schema.json", &v).is_empty());

    let e = CompareFile::from_json(&serde_json::to_string(&f).unwrap()).unwrap_err();
    assert!(
        e.to_string()
            .contains("format Some(\"vodlab-capacity\") where \"vodlab-compare\" was expected"),
        "{e}"
    );
    let e = CapacityFile::from_json("{").unwrap_err();
    assert!(e.to_string().starts_with("not JSON"), "{e}");
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("capacity.json");
    std::fs::write(&p, "{\"format\": \"vodlab-capacity\", \"version\": 9}").unwrap();
    let e = CapacityFile::read(&p).unwrap_err();
    assert!(e.to_string().starts_with(&p.display().to_string()), "{e}");
}
