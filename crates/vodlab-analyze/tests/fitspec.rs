//! `--fit-spec`: a spec fitted from a generated workload's own requests
//! recovers what the generator was given (Zipf exponent, title durations,
//! request size, pacing, viewing fraction), validates as a spec, and a
//! workload generated from it has the original's marginals.

use vodlab_analyze::fitspec::{Fitted, SpecFitter};
use vodlab_analyze::{key, Form, Request, Settings};
use vodlab_workload::construct::{try_construct, Workload};
use vodlab_workload::dist::Distribution;
use vodlab_workload::presets;
use vodlab_workload::script::Wait;
use vodlab_workload::spec::{Popularity, Spec};

const ALPHA: f64 = 0.8;

/// Every request of the workload as a log record: netflix sessions from
/// their plans (nominal times), paced sessions from their scripts (a
/// request takes 50 ms; `pacing=` after the previous start, otherwise
/// back to back), sessions 100,000 s apart, in completion order.
fn log_of(w: &Workload) -> Vec<(Request, String)> {
    let mut out = Vec::new();
    for g in &w.sessions {
        let t = &w.catalog.titles[g.title as usize];
        let base = g.id as f64 * 100_000.0;
        let mut reqs = Vec::new();
        if let Some(plan) = w.netflix_plan(g) {
            for q in &plan.requests {
                let tr = &t.representations[q.file as usize];
                let path = format!("/{}", w.catalog.file_path(t, tr.rep, 0));
                let start_s = base + q.t_ms as f64 / 1000.0;
                reqs.push((
                    Request {
                        start_s,
                        end_s: start_s + q.dur_ms as f64 / 1000.0,
                        session: g.id as u64,
                        file: key(&path),
                        conn: None,
                        offset: q.offset,
                        bytes: q.bytes,
                        form: if q.open { Form::Open } else { Form::Chunk },
                        bitrate_kbps: None,
                    },
                    path,
                ));
            }
        } else {
            let s = w.session(g);
            let (mut t0, mut prev_end) = (base, base);
            for (i, r) in s.requests.iter().enumerate() {
                let start_s = match (i, r.wait) {
                    (0, _) => base,
                    (_, Wait::Pacing(p)) => (t0 + p).max(prev_end),
                    _ => prev_end,
                };
                t0 = start_s;
                prev_end = start_s + 0.05;
                let range = r.range.expect("single-file workloads use ranges");
                reqs.push((
                    Request {
                        start_s,
                        end_s: prev_end,
                        session: g.id as u64,
                        file: key(&r.path),
                        conn: None,
                        offset: range.start,
                        bytes: range.len().expect("bounded"),
                        form: Form::Chunk,
                        bitrate_kbps: None,
                    },
                    r.path.clone(),
                ));
            }
        }
        reqs.sort_by(|a, b| a.0.end_s.total_cmp(&b.0.end_s));
        out.extend(reqs);
    }
    out
}

fn fit(w: &Workload, describe: bool) -> Fitted {
    let mut f = SpecFitter::new(&Settings::default());
    let c = &w.catalog;
    if describe {
        f.describe_catalog(c);
    }
    for (r, path) in log_of(w) {
        f.push(&r, &path);
    }
    f.finish().unwrap()
}

fn accepted(f: &Fitted) -> Spec {
    let text = f.to_toml();
    assert!(
        text.starts_with("# vodlab workload specification"),
        "{text}"
    );
    assert!(text.contains("Zipf alpha"), "{text}");
    Spec::from_toml_str(&text, "fitted.toml").unwrap_or_else(|e| panic!("{e}\n{text}"))
}

fn median(d: &Distribution) -> f64 {
    let Distribution::Empirical { points, .. } = d else {
        panic!("empirical expected: {d:?}")
    };
    let i = points.iter().position(|p| p[0] >= 0.5 - 1e-9).unwrap();
    points[i][1]
}

fn true_median_duration(w: &Workload) -> f64 {
    let mut seen: Vec<bool> = vec![false; w.catalog.titles.len()];
    for g in &w.sessions {
        seen[g.title as usize] = true;
    }
    let mut d: Vec<f64> = w
        .catalog
        .titles
        .iter()
        .filter(|t| seen[t.id as usize])
        .map(|t| t.duration_s)
        .collect();
    d.sort_by(f64::total_cmp);
    d[(d.len() - 1) / 2]
}

#[test]
fn a_netflix_workload_gives_back_its_exponent_and_durations() {
    let mut spec = presets::load("netflix-2014").unwrap();
    spec.catalog.titles = 100;
    spec.catalog.popularity = Popularity::Zipf { alpha: ALPHA };
    spec.catalog.duration = Distribution::Uniform {
        min: 600.0,
        max: 3000.0,
    };
    spec.sessions.count = 3000;
    let w = try_construct(&spec, "test").unwrap();
    let f = fit(&w, true);
    eprintln!("{}", f.to_toml());
    assert!(
        (f.alpha_mle - ALPHA).abs() < 0.06,
        "alpha {} (least squares {:?})",
        f.alpha_mle,
        f.alpha_ls
    );
    let s = accepted(&f);
    assert_eq!(s.catalog.titles, 100);
    assert_eq!(s.sessions.count, 3000);
    // durations from the files' sizes: the titles' own (plus the offset table)
    let want = true_median_duration(&w);
    let got = median(&s.catalog.duration);
    assert!(
        (got / want - 1.0).abs() < 0.03,
        "median duration {got} vs {want}"
    );
    // vodlab gen accepts it
    try_construct(&s, "fitted").unwrap();

    // without the workload: the titles seen, the furthest byte read, one
    // assumed bit rate; still a valid spec with the same exponent ordering
    let g = fit(&w, false);
    let s = accepted(&g);
    assert!(s.catalog.titles <= 100);
    assert!((g.alpha_mle - ALPHA).abs() < 0.1, "{}", g.alpha_mle);
    try_construct(&s, "fitted").unwrap();
}

#[test]
fn gen_fit_gen_keeps_the_marginals_of_a_paced_workload() {
    let mut spec = presets::load("youtube-2011-unchunked").unwrap();
    spec.catalog.titles = 100;
    spec.catalog.popularity = Popularity::Zipf { alpha: ALPHA };
    spec.sessions.count = 2000;
    spec.measurement.ramp_up_sessions = 0;
    spec.measurement.ramp_down_sessions = 0;
    spec.measurement.shard_sessions = None;
    let w1 = try_construct(&spec, "test").unwrap();
    let f1 = fit(&w1, true);
    eprintln!("{}", f1.to_toml());
    let s1 = accepted(&f1);
    assert!((f1.alpha_mle - ALPHA).abs() < 0.06, "{}", f1.alpha_mle);
    // request size and pacing: the preset's 10 s requests, one every 10 s
    // after the buffer fill (a long chain's rate is a little above 1x)
    assert!((s1.sessions.request_s / spec.sessions.request_s - 1.0).abs() < 0.02);
    let pace = s1.sessions.pacing();
    assert!(
        pace > 0.8 * spec.sessions.pacing() && pace <= 1.01 * spec.sessions.pacing(),
        "pacing {pace}"
    );

    let w2 = try_construct(&s1, "fitted").unwrap();
    let (a, b) = (&w1.stats, &w2.stats);
    let close = |what: &str, x: f64, y: f64, tol: f64| {
        assert!(
            (x / y - 1.0).abs() < tol,
            "{what}: generated {y}, regenerated {x}"
        );
    };
    close(
        "median title duration",
        b.median_title_duration_s,
        a.median_title_duration_s,
        0.1,
    );
    close(
        "mean title duration",
        b.mean_title_duration_s,
        a.mean_title_duration_s,
        0.1,
    );
    close(
        "requests per session",
        b.requests_per_session,
        a.requests_per_session,
        0.1,
    );
    close(
        "mean session time",
        b.mean_session_time_s,
        a.mean_session_time_s,
        0.15,
    );
    // and the regenerated workload fits back to the same exponent
    let f2 = fit(&w2, true);
    assert!(
        (f2.alpha_mle - f1.alpha_mle).abs() < 0.08,
        "{} vs {}",
        f2.alpha_mle,
        f1.alpha_mle
    );
}
