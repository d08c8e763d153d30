//! Looks at `netflix-2014` plans by hand (docs/workload-spec.md and
//! docs/analyze.md, "Measured", say what they were used for).
//!
//! - `netflix_plan csv SPEC.toml OUT.csv`: the plan's requests at nominal
//!   time as a CSV log `vodlab analyze` reads (sessions start at 0 s; the
//!   session column is the session number, as in the scripts' logs), for
//!   comparing a replay's log with the plan session by session.
//! - `netflix_plan split SESSIONS SEED...`: the preset's chunk / open-ended
//!   byte split (Table 5.2) per seed, one line each: `seed chunk_bytes_pct
//!   open_bytes open_requests requests` (`NETFLIX_SPEC=FILE` for another
//!   spec than the preset).

use std::io::Write;

use vodlab_workload::construct::try_construct;
use vodlab_workload::presets;
use vodlab_workload::spec::{Overrides, Spec};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("csv") if args.len() == 3 => csv(&args[1], &args[2]),
        Some("split") if args.len() >= 3 => {
            let n: u32 = args[1].parse().expect("SESSIONS");
            for s in &args[2..] {
                split(n, s.parse().expect("SEED"));
            }
        }
        _ => {
            eprintln!(
                "usage: netflix_plan csv SPEC.toml OUT.csv | netflix_plan split SESSIONS SEED..."
            );
            std::process::exit(2);
        }
    }
}

fn csv(spec: &str, out: &str) {
    let text = std::fs::read_to_string(spec).expect("read spec");
    let spec = Spec::from_toml_str(&text, spec).expect("spec");
    let w = try_construct(&spec, "plan").expect("construct");
    let mut f = std::io::BufWriter::new(std::fs::File::create(out).expect("create"));
    writeln!(
        f,
        "start_s,end_s,session,file,offset,bytes,form,bitrate_kbps"
    )
    .unwrap();
    for g in &w.sessions {
        let plan = w.netflix_plan(g).expect("netflix model");
        let t = &w.catalog.titles[g.title as usize];
        let mut rows: Vec<(f64, f64, String, u64, u64, bool, f64)> = plan
            .requests
            .iter()
            .map(|q| {
                let tr = &t.representations[q.file as usize];
                let rep = &w.catalog.representations[tr.rep];
                let start = q.t_ms as f64 / 1000.0;
                (
                    start,
                    start + q.dur_ms as f64 / 1000.0,
                    format!("/{}", w.catalog.file_path(t, tr.rep, 0)),
                    q.offset,
                    q.bytes,
                    q.open,
                    rep.bitrate_kbps,
                )
            })
            .collect();
        rows.sort_by(|a, b| a.1.total_cmp(&b.1));
        for r in rows {
            writeln!(
                f,
                "{:.3},{:.3},{},{},{},{},{},{}",
                r.0,
                r.1,
                g.id,
                r.2,
                r.3,
                r.4,
                if r.5 { "open" } else { "chunk" },
                r.6
            )
            .unwrap();
        }
    }
}

fn split(sessions: u32, seed: u64) {
    let mut spec = match std::env::var("NETFLIX_SPEC") {
        Ok(f) => Spec::from_file(std::path::Path::new(&f)).expect("NETFLIX_SPEC"),
        Err(_) => presets::load("netflix-2014").expect("preset"),
    };
    spec.apply(
        &Overrides {
            sessions: Some(sessions),
            seed: Some(seed),
            ..Overrides::default()
        },
        "split",
    )
    .expect("overrides");
    let w = try_construct(&spec, "split").expect("construct");
    let (mut chunk, mut open, mut open_req, mut req) = (0u128, 0u128, 0u64, 0u64);
    for g in &w.sessions {
        for q in &w.netflix_plan(g).expect("netflix model").requests {
            req += 1;
            if q.open {
                open += q.bytes as u128;
                open_req += 1;
            } else {
                chunk += q.bytes as u128;
            }
        }
    }
    let st = w.stats.netflix.as_ref().expect("netflix stats");
    println!(
        "{seed} {:.3} {} {} {} | stats: open req {:.2} % par {:?} start tr {:.1} time {:.1}/{:.1}/{:.1} tr bytes {:.1} mean stable {:.0} s",
        100.0 * chunk as f64 / (chunk + open) as f64,
        open,
        open_req,
        req,
        st.open_requests_pct,
        st.parallel_pct.iter().map(|x| (x * 10.0).round() / 10.0).collect::<Vec<_>>(),
        st.start_transient_pct,
        st.transient_time_pct,
        st.stable_time_pct,
        st.inactive_time_pct,
        st.transient_bytes_pct,
        st.mean_stable_phase_s
    );
}
