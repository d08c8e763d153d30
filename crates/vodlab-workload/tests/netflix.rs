//! The `netflix-2014` preset against the thesis's chapter-5 marginals,
//! measured the way a log is: every planned request (nominal send and
//! transfer times) goes through `vodlab_analyze::Analyzer`, which rebuilds
//! chains, Table 5.3's parallelism and the phases from scratch.
//!
//! Targets and tolerances are those of the issue ("netflix-2014's statistics
//! within the tolerances of part B's list"), with the thesis's numbers copied
//! here with their sources (Summers, PhD thesis, Waterloo 2016, chapter 5;
//! [Tnnn] = line of the thesis text).

use vodlab_analyze::{Analysis, Analyzer, Form, Request, Settings};
use vodlab_workload::construct::{try_construct, Workload};
use vodlab_workload::presets;
use vodlab_workload::spec::Overrides;

/// Table 5.2 [T1469–T1479]: chunk / open-ended requests and bytes, %.
const CHUNK_REQUESTS_PCT: f64 = 98.7;
const OPEN_REQUESTS_PCT: f64 = 1.3;
const CHUNK_BYTES_PCT: f64 = 65.2;
const OPEN_BYTES_PCT: f64 = 34.8;
/// Table 5.3 [T1485–T1489]: most requests to one file within one second,
/// per file per session: 1, 2, 3, 4, 5, >= 6.
const PARALLEL_PCT: [f64; 6] = [41.9, 18.0, 33.0, 6.0, 0.8, 0.3];
/// Phase time shares [T1683]: transient, stable, inactive.
const PHASE_TIME_PCT: [f64; 3] = [5.2, 79.1, 16.4];

/// Sessions of the test workload (the preset's default is 2,000).
const SESSIONS: u32 = 1500;

fn workload() -> Workload {
    let mut spec = presets::load("netflix-2014").unwrap();
    spec.apply(
        &Overrides {
            sessions: Some(SESSIONS),
            ..Overrides::default()
        },
        "test",
    )
    .unwrap();
    try_construct(&spec, "test").unwrap()
}

/// Runs the workload's nominal requests through the analyzer: sessions one
/// after another, 100,000 s apart (whole seconds, so the analyzer's
/// one-second bins fall where the generator's do), each in completion order.
fn analyse(w: &Workload) -> Analysis {
    let mut a = Analyzer::new(Settings::default()).unwrap();
    for g in &w.sessions {
        let plan = w.netflix_plan(g).expect("netflix model");
        let t = &w.catalog.titles[g.title as usize];
        let base = g.id as f64 * 100_000.0;
        let mut reqs: Vec<Request> = plan
            .requests
            .iter()
            .map(|q| {
                let tr = &t.representations[q.file as usize];
                let rep = &w.catalog.representations[tr.rep];
                let path = w.catalog.file_path(t, tr.rep, 0);
                let start_s = base + q.t_ms as f64 / 1000.0;
                Request {
                    start_s,
                    end_s: start_s + q.dur_ms as f64 / 1000.0,
                    session: g.id as u64,
                    file: vodlab_analyze::key(&path),
                    conn: None,
                    offset: q.offset,
                    bytes: q.bytes,
                    form: if q.open { Form::Open } else { Form::Chunk },
                    bitrate_kbps: Some(rep.bitrate_kbps),
                }
            })
            .collect();
        reqs.sort_by(|a, b| a.end_s.total_cmp(&b.end_s));
        for r in &reqs {
            a.push(r);
        }
    }
    a.finish()
}

fn row<'a>(a: &'a Analysis, form: &str) -> &'a vodlab_analyze::report::RequestRow {
    a.requests.iter().find(|r| r.form == form).unwrap()
}

fn within(what: &str, got: f64, want: f64, tol: f64) {
    assert!(
        (got - want).abs() <= tol,
        "{what}: {got:.2} %, thesis {want} % (tolerance {tol} points)"
    );
}

#[test]
fn netflix_2014_meets_the_thesis_marginals_through_the_analyzer() {
    let w = workload();
    let a = analyse(&w);
    eprintln!("{}", a.text());

    // Table 5.2, within 2 points
    within(
        "chunk requests",
        row(&a, "chunk").requests_pct,
        CHUNK_REQUESTS_PCT,
        2.0,
    );
    within(
        "open requests",
        row(&a, "open").requests_pct,
        OPEN_REQUESTS_PCT,
        2.0,
    );
    // the byte split is checked on a larger sample
    // (table_5_2_byte_split_holds_on_a_sample_large_enough_for_it)
    assert_eq!(row(&a, "whole").requests, 0, "every request has a range");

    // Table 5.3, within 2 points
    for (r, want) in a.parallel.iter().zip(PARALLEL_PCT) {
        within(
            &format!("files with {} connection(s)", r.connections),
            r.pct,
            want,
            2.0,
        );
    }

    // chain lengths [T1524]
    let l = &a.lengths;
    assert!(
        l.chains_le_1mb_pct > 60.0,
        "chains <= 1 MB: {:.1} % (thesis: more than 60 %)",
        l.chains_le_1mb_pct
    );
    assert!(
        l.bytes_gt_10mb_pct > 90.0,
        "bytes in chains > 10 MB: {:.1} % (thesis: more than 90 %)",
        l.bytes_gt_10mb_pct
    );

    // phases [T1587, T1683]
    let p = &a.phase_shares;
    assert!(
        p.start_transient_pct >= 97.0,
        "sessions starting transient: {:.1} % (thesis: over 97 %)",
        p.start_transient_pct
    );
    within(
        "transient time",
        p.transient_time_pct,
        PHASE_TIME_PCT[0],
        3.0,
    );
    within("stable time", p.stable_time_pct, PHASE_TIME_PCT[1], 3.0);
    within("inactive time", p.inactive_time_pct, PHASE_TIME_PCT[2], 3.0);

    // Not met, guarded: the thesis's survival exponent between 1 and 200 MB
    // (c = 0.543, d/x = 3.35 at P = 0.45 [T1561]) and mean stable phase
    // (8.5 min [T1648]). docs/workload-spec.md explains the gap; these
    // bounds only keep the calibration from sliding back (seeds 1-5 measured
    // c 0.56-0.60 and 5.4-6.2 min; before audio_chunk_pace and the longer
    // open-ended combined and audio reads, 0.62-0.67 and 3.9-4.3 min; after
    // the round of 2026-11-23, 303-334 s, seed 1 316 s).
    let mid = a
        .fit
        .iter()
        .find(|f| f.from >= 1e6 && f.to <= 2e8 + 1.0)
        .expect("the 1-200 MB piece");
    assert!(
        mid.c > 0.45 && mid.c < 0.6,
        "survival exponent 1-200 MB: {:.3} (thesis 0.543)",
        mid.c
    );
    let stable_s = w.stats.netflix.as_ref().unwrap().mean_stable_phase_s;
    assert!(
        stable_s > 300.0,
        "mean stable phase {stable_s:.0} s (thesis 510 s)"
    );
}

/// Sessions of the byte-split check: the chunk share of bytes over 1,500
/// sessions has a standard deviation of 2.6 points from seed to seed (100
/// seeds), about 100 / sqrt(sessions) points (a few long open-ended sessions
/// weigh a lot), so 2 points hold for 95 % of seeds only from about 9,000
/// sessions on; at 20,000 the spread is 0.8 points (docs/workload-spec.md).
const SPLIT_SESSIONS: u32 = 20_000;

#[test]
fn table_5_2_byte_split_holds_on_a_sample_large_enough_for_it() {
    let mut spec = presets::load("netflix-2014").unwrap();
    spec.apply(
        &Overrides {
            sessions: Some(SPLIT_SESSIONS),
            ..Overrides::default()
        },
        "test",
    )
    .unwrap();
    let w = try_construct(&spec, "test").unwrap();
    let s = w.stats.netflix.as_ref().expect("netflix stats");
    within("chunk bytes", s.chunk_bytes_pct, CHUNK_BYTES_PCT, 2.0);
    within("open bytes", s.open_bytes_pct, OPEN_BYTES_PCT, 2.0);
    within("open requests", s.open_requests_pct, OPEN_REQUESTS_PCT, 2.0);
}

#[test]
fn the_generators_own_figures_agree_with_the_analyzer() {
    // stats.json's netflix figures are the generator's bookkeeping; the
    // analyzer rebuilds chains from offsets and times alone
    let w = workload();
    let a = analyse(&w);
    let s = w.stats.netflix.as_ref().expect("netflix stats");
    assert_eq!(
        s.requests,
        a.requests.iter().map(|r| r.requests).sum::<u64>()
    );
    assert!((s.open_bytes_pct - row(&a, "open").bytes_pct).abs() < 1e-3);
    // Table 5.3 is "per file per session" [T1485]; the streaming analyzer
    // closes a (session, file) pair after 160 s without a request to it and
    // counts a later visit (after a pause, a rate change back, an audio
    // burst) as another file, mostly with one request per second. The
    // generator counts each file of a session once, so it sees fewer
    // one-connection files; the two agree within 8 points per bin.
    for (mine, r) in s.parallel_pct.iter().zip(&a.parallel) {
        assert!((mine - r.pct).abs() < 8.0, "{mine} vs {}", r.pct);
    }
    assert!(s.parallel_pct[0] <= a.parallel[0].pct);
    assert!((s.chains_le_1mb_pct - a.lengths.chains_le_1mb_pct).abs() < 2.0);
    assert!((s.stable_time_pct - a.phase_shares.stable_time_pct).abs() < 2.0);
    assert!((s.inactive_time_pct - a.phase_shares.inactive_time_pct).abs() < 2.0);
}

#[test]
fn netflix_scripts_carry_bursts_open_ended_reads_and_pauses() {
    let w = workload();
    let mut open = 0;
    let mut bursts = 0;
    let mut long_waits = 0;
    let mut detached = 0;
    for g in w.sessions.iter().take(200) {
        let s = w.session(g);
        let plan = w.netflix_plan(g).unwrap();
        assert_eq!(s.requests.len(), plan.requests.len());
        assert_eq!(s.requests.len() as u32, g.requests);
        for (r, q) in s.requests.iter().zip(&plan.requests) {
            let range = r.range.expect("every request has a range");
            // a request may take its nominal transfer time (a paced
            // open-ended audio read lasts minutes) plus the session timeout
            let timeout = r.timeout_s.expect("every request has a timeout");
            assert!(
                timeout >= w.spec.sessions.timeout_s + q.dur_ms as f64 / 1000.0 - 1e-9,
                "{timeout} s for a {} ms transfer",
                q.dur_ms
            );
            assert_eq!(range.start, q.offset);
            // every request is read at its nominal rate: it lasts its
            // planned transfer time, within rounding (read_kbps is rounded
            // up to whole kbit/s)
            let k = r.read_kbps.expect("every request is paced") as f64;
            let ms = q.bytes as f64 * 8.0 / k;
            let d = q.dur_ms as f64;
            assert!(
                ms <= d + 1.0 && ms >= d * (k - 1.0) / k - 1.0,
                "{ms} vs {d}"
            );
            if q.open {
                open += 1;
                assert_eq!(range.end, None);
                assert_eq!(r.stop_after, Some(q.bytes));
            } else {
                assert_eq!(range.len(), Some(q.bytes));
                assert_eq!(r.stop_after, None);
            }
            if r.burst {
                bursts += 1;
            }
            if let vodlab_workload::script::Wait::Pacing(p) = r.wait {
                if p >= 40.0 {
                    long_waits += 1;
                }
            }
        }
        // A script's bursts go one after another, each when the previous
        // one's responses are in: a request still running in the plan when
        // a later burst is sent (paced audio beside video) is detached, and
        // none else is; no later request uses a detached request's
        // connection before its planned end
        for (i, (r, q)) in s.requests.iter().zip(&plan.requests).enumerate() {
            let end = q.t_ms + q.dur_ms;
            let next = plan.requests[i + 1..].iter().find(|n| n.t_ms > q.t_ms);
            assert_eq!(
                r.detach,
                next.is_some_and(|n| n.t_ms < end),
                "session {} request {i}",
                g.id
            );
            if r.detach {
                detached += 1;
                for (r2, q2) in s.requests.iter().zip(&plan.requests).skip(i + 1) {
                    assert!(
                        q2.t_ms >= end || r2.conn != r.conn,
                        "session {}: request on detached conn {}",
                        g.id,
                        r.conn
                    );
                }
            }
            // bursts of a chunk chain no further apart than the thesis's
            // longest common pacing gap, 32 s [T1504] (a chain resumed after
            // a pause is another chain: its request starts after a gap)
            let cont = plan.requests[i + 1..]
                .iter()
                .find(|n| n.file == q.file && n.offset == q.offset + q.bytes && n.t_ms > q.t_ms);
            if let (false, Some(n)) = (q.open, cont) {
                if n.t_ms <= end + 1000 {
                    assert!(
                        n.t_ms - q.t_ms <= 32_001,
                        "session {}: chain gap {} ms",
                        g.id,
                        n.t_ms - q.t_ms
                    );
                }
            }
        }
        // a burst's requests use distinct connections
        let mut conns: Vec<u32> = Vec::new();
        for r in &s.requests {
            if !r.burst {
                conns.clear();
            }
            assert!(
                !conns.contains(&r.conn),
                "session {}: conn {} twice in a burst",
                g.id,
                r.conn
            );
            conns.push(r.conn);
        }
        // scripts round-trip through the text format
        let text = vodlab_workload::script::write_vodlab(&vodlab_workload::script::Script {
            sessions: vec![s.clone()],
        });
        let back = vodlab_workload::script::parse_script(&text).unwrap();
        assert_eq!(back.sessions[0], s);
    }
    assert!(
        open > 0 && bursts > 0 && long_waits > 0 && detached > 0,
        "{open} {bursts} {long_waits} {detached}"
    );
}

#[test]
fn netflix_generation_is_deterministic() {
    let a = workload();
    let b = workload();
    assert_eq!(a.stats, b.stats);
    for g in a.sessions.iter().take(50) {
        assert_eq!(a.session(g), b.session(g));
    }
}

#[test]
fn netflix_requests_stay_inside_their_files_and_their_degree() {
    let w = workload();
    let mut per_file_second = std::collections::HashMap::new();
    for g in &w.sessions {
        let plan = w.netflix_plan(g).unwrap();
        let t = &w.catalog.titles[g.title as usize];
        per_file_second.clear();
        for q in &plan.requests {
            let tr = &t.representations[q.file as usize];
            assert!(q.bytes >= 1);
            assert!(
                q.offset + q.bytes <= tr.stored_bytes,
                "session {}: {}+{} past the end of a {} B file",
                g.id,
                q.offset,
                q.bytes,
                tr.stored_bytes
            );
            *per_file_second
                .entry((q.file, q.t_ms / 1000))
                .or_insert(0u32) += 1;
        }
        // no file gets more than 6 requests (Table 5.3's largest degree)
        // within one second
        assert!(per_file_second.values().all(|&n| n <= 6));
        // sorted by send time
        assert!(plan.requests.windows(2).all(|p| p[0].t_ms <= p[1].t_ms));
    }
}

#[test]
fn extreme_netflix_knobs_still_generate() {
    use vodlab_workload::dist::Distribution;
    let mut spec = presets::load("netflix-2014").unwrap();
    spec.apply(
        &Overrides {
            sessions: Some(30),
            titles: Some(50),
            ..Overrides::default()
        },
        "test",
    )
    .unwrap();
    let n = spec.sessions.netflix.as_mut().unwrap();
    n.rate_changes_per_hour = 3600.0;
    n.pauses_per_hour = 0.0;
    n.probe_rates = Distribution::Uniform {
        min: 0.0,
        max: 64.0,
    };
    n.successor_probe_rates = Distribution::Constant { value: 64.0 };
    n.fill_factor = 1.0;
    n.open_share.video = 1.0;
    n.open_s = Distribution::Constant { value: 0.1 };
    n.parallel = vec![0.0, 0.0, 0.0, 0.0, 0.0, 1.0];
    n.browse_share = 0.0;
    n.skim_share = 1.0;
    n.skim_phases = Distribution::Constant { value: 5.0 };
    let w = try_construct(&spec, "test").unwrap();
    assert!(w.stats.netflix.as_ref().unwrap().requests > 0);
    for g in &w.sessions {
        let s = w.session(g);
        assert!(s.requests.iter().all(|r| r.conn < 64));
    }
    // and the other extreme: nothing but watching, no events
    let mut spec = presets::load("netflix-2014").unwrap();
    spec.apply(
        &Overrides {
            sessions: Some(20),
            titles: Some(50),
            ..Overrides::default()
        },
        "test",
    )
    .unwrap();
    let n = spec.sessions.netflix.as_mut().unwrap();
    n.browse_share = 0.0;
    n.skim_share = 0.0;
    n.rate_changes_per_hour = 0.0;
    n.pauses_per_hour = 0.0;
    n.combined_share = 1.0;
    let w = try_construct(&spec, "test").unwrap();
    let s = w.stats.netflix.as_ref().unwrap();
    // every session watches; only those starting within a few minutes of
    // the end of their title have too little left for a long chain
    assert!(
        s.sessions_with_stable_pct >= 80.0,
        "{}",
        s.sessions_with_stable_pct
    );
    assert_eq!(s.inactive_time_pct, 0.0);
    assert_eq!(
        s.bytes_by_kind_pct[0].1, 0.0,
        "combined sessions fetch no audio"
    );
}

#[test]
fn watching_sessions_fetch_audio_in_long_paced_chains_and_never_climb_above_their_first_rate() {
    use std::collections::BTreeMap;
    use vodlab_workload::construct::netflix::NetflixSessionKind;
    use vodlab_workload::spec::RepKind;
    let w = workload();
    // open-ended audio: chains, those lasting > 40 s, their bytes, bytes of those
    let (mut audio_chains, mut long_audio_chains) = (0u32, 0u32);
    let (mut audio_bytes, mut long_audio_bytes) = (0u64, 0u64);
    // chunk audio: chains, those lasting <= 40 s, title seconds
    let (mut chunk_audio, mut short_chunk_audio, mut chunk_audio_s) = (0u32, 0u32, 0.0);
    let mut stable_video_chains = 0u32;
    for g in &w.sessions {
        let plan = w.netflix_plan(g).unwrap();
        if plan.kind != NetflixSessionKind::Watch {
            continue;
        }
        let t = &w.catalog.titles[g.title as usize];
        let rate =
            |f: u16| w.catalog.representations[t.representations[f as usize].rep].bitrate_kbps;
        let kind = |f: u16| w.catalog.representations[t.representations[f as usize].rep].kind;
        let top = rate(plan.first_rate);
        // per generator chain: file, first send, last end, bytes, open-ended
        let mut chains: BTreeMap<u32, (u16, u64, u64, u64, bool)> = BTreeMap::new();
        for q in &plan.requests {
            let c = chains
                .entry(q.chain)
                .or_insert((q.file, q.t_ms, q.t_ms + q.dur_ms, 0, q.open));
            c.1 = c.1.min(q.t_ms);
            c.2 = c.2.max(q.t_ms + q.dur_ms);
            c.3 += q.bytes;
        }
        for (file, start, end, bytes, open) in chains.into_values() {
            let long = end - start > 40_000;
            match kind(file) {
                // offset-table reads at offset 0 are short by nature
                RepKind::Audio if bytes > 100_000 && open => {
                    audio_chains += 1;
                    audio_bytes += bytes;
                    if long {
                        long_audio_chains += 1;
                        long_audio_bytes += bytes;
                    }
                }
                RepKind::Audio if bytes > 100_000 => {
                    chunk_audio += 1;
                    chunk_audio_s += bytes as f64 / (rate(file) * 125.0);
                    if !long {
                        short_chunk_audio += 1;
                    }
                }
                RepKind::Video | RepKind::Combined if long => {
                    // a stable phase: never above the session's first rate
                    // (cap_at_first_rate; probes may look above it)
                    stable_video_chains += 1;
                    assert!(
                        rate(file) <= top + 1e-9,
                        "session {}: a long chain at {} kbit/s above its first rate {top}",
                        g.id,
                        rate(file)
                    );
                }
                _ => {}
            }
        }
    }
    assert!(audio_chains > 200 && chunk_audio > 100 && stable_video_chains > 300);
    // Table 5.4: open-ended audio chains are long and paced (534 s of title
    // time); only those cut short by a pause or the end of viewing are not
    let long_share = long_audio_chains as f64 / audio_chains as f64;
    let long_bytes = long_audio_bytes as f64 / audio_bytes as f64;
    assert!(
        long_share > 0.6 && long_bytes > 0.9,
        "{long_audio_chains} of {audio_chains} open audio chains last > 40 s ({:.1} % of their bytes)",
        100.0 * long_bytes
    );
    // chunk audio chains carry about Table 5.4's 134.7 s of title time but
    // are fetched fast (audio_chunk_pace): short chains, not stable phases
    let mean_s = chunk_audio_s / chunk_audio as f64;
    assert!(
        (90.0..=170.0).contains(&mean_s),
        "chunk audio chains average {mean_s:.0} s of title time"
    );
    assert!(
        short_chunk_audio as f64 > 0.9 * chunk_audio as f64,
        "{short_chunk_audio} of {chunk_audio} chunk audio chains last <= 40 s"
    );
}
