//! `vodlab simulate --prefetch`: the flags of chapter 5's trace-driven
//! comparison of prefetch policies and its printed table (docs/simulate.md);
//! the library runs it ([`vodlab_lab::tracesim`]).

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::bail;
use clap::Args;
use vodlab_lab::tracesim::{self, DiskChoice, TraceObserver, TraceSettings};
use vodlab_prefetch::sim::{SimConfig, UtilModel};
use vodlab_prefetch::PolicySpec;

/// Options of the prefetch mode.
#[derive(Debug, Args)]
pub struct PrefetchSimArgs {
    /// Access logs to replay (vodlab serve, nginx `vodlab_analyze`, or CSV;
    /// see `vodlab analyze`), in time order.
    #[arg(long = "log", value_name = "LOG")]
    pub logs: Vec<PathBuf>,
    /// Policies, repeatable, in the grammar `vodlab serve --prefetch-policy`
    /// reads: fixed:SIZE, proportional:SIZE and sqrt:SIZE (sizes at 2,000
    /// kbit/s), first-grow:MAX and first-grow-sr:MAX, and
    /// auto[:KEY=VALUE,...] (e.g. auto:interval=60,busy=0.3). Sizes as
    /// everywhere (docs/units.md): 4M = 4MiB = 4×2^20, 7MB = 7×10^6, 4096.
    #[arg(long = "policy", value_name = "KIND:SIZE")]
    pub policies: Vec<String>,
    /// Run every policy kind named by --policy (or fixed, proportional,
    /// sqrt, first-grow and first-grow-sr) at each of these sizes (auto:
    /// its start size): the utilisation-against-memory curves.
    #[arg(long, value_delimiter = ',', value_name = "SIZE,SIZE,...")]
    pub sweep: Vec<String>,
    /// A `vodlab gen` workload whose catalog gives file sizes and bit rates.
    #[arg(long, value_name = "DIR")]
    pub workload: Option<PathBuf>,
    /// Replay this `vodlab gen` workload's own requests as the trace instead
    /// of a log (`netflix` sessions: their planned times and sizes; paced
    /// sessions: request k at k × pacing), sessions spread evenly over
    /// --trace-hours. Implies --workload.
    #[arg(long, value_name = "DIR", conflicts_with = "logs")]
    pub trace_workload: Option<PathBuf>,
    /// Hours the --trace-workload sessions arrive over (the thesis's logs
    /// cover a day).
    #[arg(long, default_value_t = 24.0, value_name = "H")]
    pub trace_hours: f64,
    /// Drives the files are spread over (by a hash of the path).
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub drives: u32,
    /// Drive transfer rate, MB/s (thesis: 125.5, Hitachi 5K3000).
    #[arg(long, default_value_t = 125.5, value_name = "MB/S")]
    pub transfer_mb_s: f64,
    /// Drive seek rate with no transfer, seeks/s (thesis: 39.4).
    #[arg(long, value_name = "SEEKS/S")]
    pub seeks_per_s: Option<f64>,
    /// Bucket length (a bare number is seconds; thesis: 60).
    #[arg(long, default_value_t = 60.0, value_name = "DURATION", value_parser = vodlab_units::parse_seconds)]
    pub bucket: f64,
    /// Chain window (a bare number is seconds; thesis: 40).
    #[arg(long, default_value_t = 40.0, value_name = "DURATION", value_parser = vodlab_units::parse_seconds)]
    pub chain_window: f64,
    /// Drive model: `linear` (the thesis's t/125.5 MB/s + s/39.4 seeks/s
    /// per bucket) or `mechanical[:PROFILE]`: also replay every prefetch on
    /// vodlab-disk's mechanical model (default profile hitachi-5k3000, the
    /// thesis's drive; any `vodlab disk` profile name or file), the files
    /// placed on each drive as `vodlab fileset` places them; needs the
    /// workload (--workload or --trace-workload) and holds the prefetch
    /// reads in memory (40 B each, every policy at once).
    #[arg(long, default_value = "linear", value_name = "MODEL")]
    pub disk: String,
    /// A page cache of this size shared by all viewers (least recently used
    /// out): viewers find each other's reads, and prefetches evicted before
    /// use are reported to the policy and read again. Default: none, each
    /// chain keeps its own reads until it ends (the thesis).
    #[arg(long, value_name = "SIZE", value_parser = vodlab_units::parse_size)]
    pub page_cache: Option<u64>,
    /// Most bytes one read reads, as `vodlab serve --max-prefetch`: a larger
    /// decision is read in pieces of this size.
    #[arg(long, value_name = "SIZE", default_value_t = vodlab_prefetch::defaults::MAX_PREFETCH, value_parser = vodlab_units::parse_size)]
    pub max_prefetch: u64,
    /// Instead of a trace: replay the events a live `vodlab serve
    /// --prefetch-events FILE` recorded into a fresh controller of the one
    /// --policy (the server's), and compare its decisions with the
    /// server's, one for one. Exit status 1 when any differs.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["logs", "trace_workload", "sweep"])]
    pub replay_events: Option<PathBuf>,
    /// Write results.json and results.csv here.
    #[arg(short = 'o', long = "out", alias = "output", value_name = "DIR")]
    pub out: Option<PathBuf>,
}

/// Parses a policy size in vodlab's one grammar
/// ([`vodlab_units::parse_size`]: `4M` = `4MiB` = 4×2^20, `7MB` = 7×10^6,
/// `1e6`), the same bytes `vodlab serve --prefetch-policy fixed:SIZE`
/// reads; 1 B to 1 TB.
pub fn parse_size(s: &str) -> anyhow::Result<u64> {
    let b = vodlab_units::parse_size(s)?;
    if !(1..=1_000_000_000_000).contains(&b) {
        bail!("size `{}` must be 1 B to 1 TB", s.trim());
    }
    Ok(b)
}

/// Policies to run, from the flags.
fn plan(a: &PrefetchSimArgs) -> anyhow::Result<Vec<tracesim::Planned>> {
    let sweep = a
        .sweep
        .iter()
        .map(|s| parse_size(s).map_err(|e| anyhow::anyhow!("--sweep {s:?}: {e}")))
        .collect::<anyhow::Result<Vec<u64>>>()?;
    Ok(tracesim::plan(&a.policies, &sweep)?)
}

/// The library's settings from the flags.
fn settings(a: &PrefetchSimArgs) -> anyhow::Result<TraceSettings> {
    let mut model = UtilModel {
        transfer_bytes_per_s: a.transfer_mb_s * 1e6,
        ..UtilModel::default()
    };
    if let Some(s) = a.seeks_per_s {
        model.seeks_per_s = s;
    }
    if !(model.transfer_bytes_per_s > 0.0 && model.seeks_per_s > 0.0) {
        bail!("--transfer-mb-s and --seeks-per-s must be > 0");
    }
    if !(a.bucket.is_finite() && a.bucket > 0.0) {
        bail!("--bucket must be > 0 s");
    }
    Ok(TraceSettings {
        logs: a.logs.clone(),
        workload: a.workload.clone(),
        trace_workload: a.trace_workload.clone(),
        trace_hours: a.trace_hours,
        drives: a.drives,
        chain_window: a.chain_window,
        sim: SimConfig {
            bucket_s: a.bucket,
            model,
            page_cache: a.page_cache,
            max_prefetch: a.max_prefetch,
            ..SimConfig::default()
        },
        disk: DiskChoice::parse(&a.disk)?,
        policies: plan(a)?,
    })
}

/// Progress of a long trace on stderr.
struct Progress;

impl TraceObserver for Progress {
    fn lines_read(&mut self, lines: u64) {
        eprintln!("vodlab simulate: {lines} lines read");
    }
    fn simulating(&mut self, chains: usize, policies: usize) {
        if chains > 1_000_000 {
            eprintln!("vodlab simulate: {chains} chains; running {policies} policies");
        }
    }
}

/// `--replay-events FILE --policy SPEC`: replays a live server's events
/// (see [`vodlab_prefetch::events`]); true when every decision was alike.
pub fn replay_events(a: &PrefetchSimArgs, file: &Path) -> anyhow::Result<bool> {
    let [p] = a.policies.as_slice() else {
        bail!("--replay-events needs exactly one --policy: the one the server ran");
    };
    let spec: PolicySpec = p.parse().map_err(|e| anyhow::anyhow!("--policy: {e}"))?;
    let (n, r) = tracesim::replay_events(file, &spec)?;
    let name = file.display();
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "{name}: {n} events; {} ranges decided ({} prefetches), {} feedback events; policy {spec}",
        r.decisions, r.prefetches, r.feedback
    )?;
    if r.mismatches.is_empty() {
        writeln!(out, "every decision alike")?;
    } else {
        writeln!(out, "{} decisions differ; the first:", r.mismatches.len())?;
        for m in r.mismatches.iter().take(10) {
            writeln!(
                out,
                "  event {}: recorded prefetch {:?} head {} evicted {:?}; replayed prefetch {:?} head {} evicted {:?}",
                m.index, m.recorded.0, m.recorded.1, m.recorded.2, m.replayed.0, m.replayed.1, m.replayed.2
            )?;
        }
    }
    if let Some(dir) = &a.out {
        std::fs::create_dir_all(dir)?;
        std::fs::write(
            dir.join("replay.json"),
            serde_json::to_string_pretty(&r)? + "\n",
        )?;
    }
    Ok(r.mismatches.is_empty())
}

/// Runs the prefetch mode; returns the rows printed.
pub fn run(a: &PrefetchSimArgs) -> anyhow::Result<Vec<tracesim::Row>> {
    let s = settings(a)?;
    let tracesim::TraceRun {
        lines,
        secs,
        rows,
        mechanical,
    } = tracesim::run(&s, &mut Progress)?;
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "{lines} log lines, {} chains, {} policies in {secs:.2} s ({:.0} lines/s)",
        rows.first().map_or(0, |r| r.result.chains),
        rows.len(),
        lines as f64 / secs.max(1e-9)
    )?;
    if let Some(p) = rows.iter().find(|r| r.size > a.max_prefetch) {
        writeln!(
            out,
            "  note: {} reads at most --max-prefetch {} per read, as serve does; raise it to read whole {} prefetches",
            p.spec,
            vodlab_units::format_size(a.max_prefetch),
            vodlab_units::format_size(p.size)
        )?;
    }
    if let Some(p) = &mechanical {
        writeln!(
            out,
            "  utilisation: linear model (thesis) and mechanical model ({}), busiest drive in its busiest {} s bucket",
            p,
            a.bucket
        )?;
    }
    let mech_head = if mechanical.is_some() {
        format!(" {:>9} {:>9} {:>8}", "mech peak", "mech mean", "svc ms")
    } else {
        String::new()
    };
    writeln!(
        out,
        "  {:<14} {:>10}  {:>9} {:>9} {:>11} {:>11} {:>12} {:>10} {:>9} {:>8}{mech_head}",
        "policy",
        "size MB",
        "peak util",
        "mean util",
        "peak mem GB",
        "mean mem GB",
        "device GB",
        "prefetches",
        "evictions",
        "end MB"
    )?;
    for r in &rows {
        let mech = match &r.mechanical {
            Some(m) => format!(
                " {:>8.1}% {:>8.1}% {:>8.2}",
                100.0 * m.peak_utilisation,
                100.0 * m.mean_utilisation,
                m.mean_service_ms
            ),
            None => String::new(),
        };
        writeln!(
            out,
            "  {:<14} {:>10.3}  {:>8.1}% {:>8.1}% {:>11.3} {:>11.3} {:>12.3} {:>10} {:>9} {:>8}{mech}",
            r.policy,
            r.size as f64 / 1e6,
            100.0 * r.result.peak_utilisation,
            100.0 * r.result.mean_utilisation,
            r.result.peak_memory_bytes as f64 / 1e9,
            r.result.mean_memory_bytes as f64 / 1e9,
            r.result.device_bytes as f64 / 1e9,
            r.result.prefetches,
            r.result.evictions,
            // where auto's size ended; the others' is their size
            r.result
                .auto_final_bytes
                .map_or_else(|| "-".to_string(), |b| format!("{:.3}", b as f64 / 1e6))
        )?;
    }
    if let Some(dir) = &a.out {
        tracesim::write_results(dir, &rows)?;
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use vodlab_server::PolicySpec;

    #[derive(Parser)]
    struct Sim {
        #[command(flatten)]
        a: PrefetchSimArgs,
    }

    #[derive(Parser)]
    struct Serve {
        #[command(flatten)]
        a: crate::serve::ServeArgs,
    }

    /// The bytes `vodlab simulate --prefetch --policy fixed:SIZE` runs.
    fn simulated(size: &str) -> u64 {
        let sim = Sim::try_parse_from(["simulate", "--policy", &format!("fixed:{size}")])
            .expect("simulate flags");
        let p = plan(&sim.a).expect("plan");
        assert_eq!(p.len(), 1);
        p[0].size
    }

    /// The bytes `vodlab serve --prefetch SIZE` and `--prefetch-policy
    /// fixed:SIZE` prefetch.
    fn served(size: &str) -> (u64, u64) {
        let fixed = |args: &[&str]| {
            let s = Serve::try_parse_from(["serve", "--root", "/srv"].iter().chain(args))
                .expect("serve flags");
            match s.a.config().expect("config").prefetch_policy {
                PolicySpec::Fixed(n) => n,
                p => panic!("{p}"),
            }
        };
        (
            fixed(&["--prefetch", size]),
            fixed(&["--prefetch-policy", &format!("fixed:{size}")]),
        )
    }

    #[test]
    fn serve_and_simulate_read_a_fixed_size_as_the_same_bytes() {
        for (size, bytes) in [
            ("4M", 4 << 20),
            ("4MiB", 4 << 20),
            ("4MB", 4_000_000),
            ("1.5M", 3 << 19),
            ("256k", 256 << 10),
            ("256kB", 256_000),
            ("65536", 65536),
        ] {
            assert_eq!(simulated(size), bytes, "simulate fixed:{size}");
            assert_eq!(served(size), (bytes, bytes), "serve fixed:{size}");
        }
    }

    #[test]
    fn sizes_out_of_range_or_malformed_are_refused() {
        for bad in ["0", "2TB", "4X", "4Mb", "-1M"] {
            let e = parse_size(bad).unwrap_err().to_string();
            assert!(e.contains(bad), "{bad}: {e}");
        }
        assert!(parse_size("4X")
            .unwrap_err()
            .to_string()
            .contains("4M = 4MiB"));
        let sim = Sim::try_parse_from(["simulate", "--sweep", "1M,4MB", "--policy", "sqrt:2M"])
            .expect("flags");
        let pairs = |a: &PrefetchSimArgs| -> Vec<(String, u64, String)> {
            plan(a)
                .unwrap()
                .into_iter()
                .map(|p| (p.kind, p.size, p.spec.to_string()))
                .collect()
        };
        assert_eq!(
            pairs(&sim.a),
            vec![
                ("sqrt".to_string(), 1 << 20, "fixed:1M,ref=2000".to_string()),
                (
                    "sqrt".to_string(),
                    4_000_000,
                    "fixed:4000000,ref=2000".to_string()
                )
            ]
        );
        // the serve grammar, auto included; a sweep moves auto's start
        let sim = Sim::try_parse_from([
            "simulate",
            "--policy",
            "auto:interval=60",
            "--policy",
            "proportional:3M",
        ])
        .expect("flags");
        assert_eq!(
            pairs(&sim.a),
            vec![
                ("auto".to_string(), 4 << 20, "auto:interval=60".to_string()),
                (
                    "proportional".to_string(),
                    3 << 20,
                    "fixed:3M,ref=2000,exp=1".to_string()
                )
            ]
        );
        let sim = Sim::try_parse_from(["simulate", "--sweep", "2M", "--policy", "auto"]).unwrap();
        assert_eq!(pairs(&sim.a)[0].2, "auto:start=2M");
        for bad in ["lru:4M", "fixed", "auto:step=x", "first-grow:4M,ref=1"] {
            let sim = Sim::try_parse_from(["simulate", "--policy", bad]).unwrap();
            let e = plan(&sim.a).expect_err(bad).to_string();
            assert!(e.contains("prefetch policy"), "{bad}: {e}");
        }
    }

    #[test]
    fn durations_and_out_aliases() {
        let s =
            Sim::try_parse_from(["simulate", "--bucket", "2m", "--chain-window", "500ms"]).unwrap();
        assert_eq!((s.a.bucket, s.a.chain_window), (120.0, 0.5));
        let s = Sim::try_parse_from(["simulate", "--bucket", "30"]).unwrap();
        assert_eq!(s.a.bucket, 30.0);
        for flag in ["-o", "--out", "--output"] {
            let s = Sim::try_parse_from(["simulate", flag, "d"]).unwrap();
            assert_eq!(s.a.out, Some(PathBuf::from("d")), "{flag}");
        }
        assert!(Sim::try_parse_from(["simulate", "--bucket", "1d"]).is_err());
    }
}
