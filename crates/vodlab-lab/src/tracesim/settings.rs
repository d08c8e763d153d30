//! The settings of `vodlab simulate --prefetch` (its flags) and how they
//! become a [`TraceSettings`].

use std::path::PathBuf;

use vodlab_prefetch::sim::{SimConfig, UtilModel};

use super::{DiskChoice, Planned, TraceError, TraceSettings};

/// Options of the prefetch mode.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "cli", derive(clap::Args))]
pub struct PrefetchSimArgs {
    /// Access logs to replay (vodlab serve, nginx `vodlab_analyze`, or CSV;
    /// see `vodlab analyze`), in time order.
    #[cfg_attr(feature = "cli", arg(long = "log", value_name = "LOG"))]
    pub logs: Vec<PathBuf>,
    /// Policies, repeatable, in the grammar `vodlab serve --prefetch-policy`
    /// reads: fixed:SIZE, proportional:SIZE and sqrt:SIZE (sizes at 2,000
    /// kbit/s), first-grow:MAX and first-grow-sr:MAX, and
    /// auto[:KEY=VALUE,...] (e.g. auto:interval=60,busy=0.3). Sizes as
    /// everywhere (docs/units.md): 4M = 4MiB = 4×2^20, 7MB = 7×10^6, 4096.
    #[cfg_attr(feature = "cli", arg(long = "policy", value_name = "KIND:SIZE"))]
    pub policies: Vec<String>,
    /// Run every policy kind named by --policy (or fixed, proportional,
    /// sqrt, first-grow and first-grow-sr) at each of these sizes (auto:
    /// its start size): the utilisation-against-memory curves.
    #[cfg_attr(
        feature = "cli",
        arg(long, value_delimiter = ',', value_name = "SIZE,SIZE,...")
    )]
    pub sweep: Vec<String>,
    /// A `vodlab gen` workload whose catalog gives file sizes and bit rates.
    #[cfg_attr(feature = "cli", arg(long, value_name = "DIR"))]
    pub workload: Option<PathBuf>,
    /// Replay this `vodlab gen` workload's own requests as the trace instead
    /// of a log (`netflix` sessions: their planned times and sizes; paced
    /// sessions: request k at k × pacing), sessions spread evenly over
    /// --trace-hours. Implies --workload.
    #[cfg_attr(
        feature = "cli",
        arg(long, value_name = "DIR", conflicts_with = "logs")
    )]
    pub trace_workload: Option<PathBuf>,
    /// Hours the --trace-workload sessions arrive over (the thesis's logs
    /// cover a day).
    #[cfg_attr(feature = "cli", arg(long, default_value_t = 24.0, value_name = "H"))]
    pub trace_hours: f64,
    /// Drives the files are spread over (by a hash of the path).
    #[cfg_attr(feature = "cli", arg(long, default_value_t = 1, value_name = "N"))]
    pub drives: u32,
    /// Drive transfer rate, MB/s (thesis: 125.5, Hitachi 5K3000).
    #[cfg_attr(
        feature = "cli",
        arg(long, default_value_t = 125.5, value_name = "MB/S")
    )]
    pub transfer_mb_s: f64,
    /// Drive seek rate with no transfer, seeks/s (thesis: 39.4).
    #[cfg_attr(feature = "cli", arg(long, value_name = "SEEKS/S"))]
    pub seeks_per_s: Option<f64>,
    /// Bucket length (a bare number is seconds; thesis: 60).
    #[cfg_attr(feature = "cli", arg(long, default_value_t = 60.0, value_name = "DURATION", value_parser = vodlab_units::parse_seconds))]
    pub bucket: f64,
    /// Chain window (a bare number is seconds; thesis: 40).
    #[cfg_attr(feature = "cli", arg(long, default_value_t = 40.0, value_name = "DURATION", value_parser = vodlab_units::parse_seconds))]
    pub chain_window: f64,
    /// Drive model: `linear` (the thesis's t/125.5 MB/s + s/39.4 seeks/s
    /// per bucket) or `mechanical[:PROFILE]`: also replay every prefetch on
    /// vodlab-disk's mechanical model (default profile hitachi-5k3000, the
    /// thesis's drive; any `vodlab disk` profile name or file), the files
    /// placed on each drive as `vodlab fileset` places them; needs the
    /// workload (--workload or --trace-workload) and holds the prefetch
    /// reads in memory (40 B each, every policy at once).
    #[cfg_attr(
        feature = "cli",
        arg(long, default_value = "linear", value_name = "MODEL")
    )]
    pub disk: String,
    /// A page cache of this size shared by all viewers (least recently used
    /// out): viewers find each other's reads, and prefetches evicted before
    /// use are reported to the policy and read again. Default: none, each
    /// chain keeps its own reads until it ends (the thesis).
    #[cfg_attr(feature = "cli", arg(long, value_name = "SIZE", value_parser = vodlab_units::parse_size))]
    pub page_cache: Option<u64>,
    /// Most bytes one read reads, as `vodlab serve --max-prefetch`: a larger
    /// decision is read in pieces of this size.
    #[cfg_attr(feature = "cli", arg(long, value_name = "SIZE", default_value_t = vodlab_prefetch::defaults::MAX_PREFETCH, value_parser = vodlab_units::parse_size))]
    pub max_prefetch: u64,
    /// Next-object prefetch beside every policy, as `vodlab serve
    /// --prefetch-next-object[=SIZE]` (default 4M): when a viewer's first
    /// range of an object is served, the first SIZE bytes of its session's
    /// next object (the trace's next chain of another file, standing for
    /// CMCD `nor`) are read unless resident. Pays off with one file per
    /// segment, where chains are one segment long.
    #[cfg_attr(feature = "cli", arg(long, value_name = "SIZE", num_args = 0..=1, require_equals = true, default_missing_value = "4M", value_parser = vodlab_units::parse_size))]
    pub prefetch_next_object: Option<u64>,
    /// Instead of a trace: replay the events a live `vodlab serve
    /// --prefetch-events FILE` recorded into a fresh controller of the one
    /// --policy (the server's), and compare its decisions with the
    /// server's, one for one. Exit status 1 when any differs.
    #[cfg_attr(feature = "cli", arg(long, value_name = "FILE", conflicts_with_all = ["logs", "trace_workload", "sweep"]))]
    pub replay_events: Option<PathBuf>,
    /// Write results.json and results.csv here.
    #[cfg_attr(
        feature = "cli",
        arg(short = 'o', long = "out", alias = "output", value_name = "DIR")
    )]
    pub out: Option<PathBuf>,
}

/// Parses a policy size in vodlab's one grammar
/// ([`vodlab_units::parse_size`]: `4M` = `4MiB` = 4×2^20, `7MB` = 7×10^6,
/// `1e6`), the same bytes `vodlab serve --prefetch-policy fixed:SIZE`
/// reads; 1 B to 1 TB.
pub fn parse_size(s: &str) -> Result<u64, TraceError> {
    let b = vodlab_units::parse_size(s).map_err(|e| TraceError::Settings(e.to_string()))?;
    if !(1..=1_000_000_000_000).contains(&b) {
        return Err(TraceError::Settings(format!(
            "size `{}` must be 1 B to 1 TB",
            s.trim()
        )));
    }
    Ok(b)
}

impl PrefetchSimArgs {
    /// Policies to run, from the flags.
    pub fn plan(&self) -> Result<Vec<Planned>, TraceError> {
        let sweep = self
            .sweep
            .iter()
            .map(|s| parse_size(s).map_err(|e| TraceError::Settings(format!("--sweep {s:?}: {e}"))))
            .collect::<Result<Vec<u64>, TraceError>>()?;
        super::plan(&self.policies, &sweep)
    }

    /// The library's settings from the flags.
    pub fn settings(&self) -> Result<TraceSettings, TraceError> {
        let bad = |s: &str| Err(TraceError::Settings(s.to_string()));
        let mut model = UtilModel {
            transfer_bytes_per_s: self.transfer_mb_s * 1e6,
            ..UtilModel::default()
        };
        if let Some(s) = self.seeks_per_s {
            model.seeks_per_s = s;
        }
        if !(model.transfer_bytes_per_s > 0.0 && model.seeks_per_s > 0.0) {
            return bad("--transfer-mb-s and --seeks-per-s must be > 0");
        }
        if !(self.bucket.is_finite() && self.bucket > 0.0) {
            return bad("--bucket must be > 0 s");
        }
        Ok(TraceSettings {
            logs: self.logs.clone(),
            workload: self.workload.clone(),
            trace_workload: self.trace_workload.clone(),
            trace_hours: self.trace_hours,
            drives: self.drives,
            chain_window: self.chain_window,
            sim: SimConfig {
                bucket_s: self.bucket,
                model,
                page_cache: self.page_cache,
                max_prefetch: self.max_prefetch,
                next_object: self.prefetch_next_object,
                ..SimConfig::default()
            },
            disk: DiskChoice::parse(&self.disk)?,
            policies: self.plan()?,
        })
    }

    /// The one policy `--replay-events` replays (the server's).
    pub fn replay_policy(&self) -> Result<vodlab_prefetch::PolicySpec, TraceError> {
        let [p] = self.policies.as_slice() else {
            return Err(TraceError::Settings(
                "--replay-events needs exactly one --policy: the one the server ran".into(),
            ));
        };
        Ok(p.parse()?)
    }
}

#[cfg(all(test, feature = "cli"))]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Sim {
        #[command(flatten)]
        a: PrefetchSimArgs,
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
            a.plan()
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
        for bad in [
            "lru:4M",
            "fixed",
            "auto:step=x",
            "first-grow:4M,step=1",
            "first-grow:4M,idle=0",
        ] {
            let sim = Sim::try_parse_from(["simulate", "--policy", bad]).unwrap();
            let e = sim.a.plan().expect_err(bad).to_string();
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
