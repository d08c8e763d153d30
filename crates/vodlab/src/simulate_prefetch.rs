//! `vodlab simulate --prefetch`: chapter 5's trace-driven comparison of
//! prefetch policies (docs/simulate.md). The log is read once, chains are
//! found as `vodlab analyze` finds them, and every policy's simulation
//! ([`vodlab_prefetch::sim`]) runs over the chains, through the very
//! prefetch core and controllers `vodlab serve` runs, with their feedback
//! (reads timed by the drive model, ticks, evictions of a page-cache
//! model).

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context};
use clap::Args;
use serde::Serialize;
use vodlab_analyze::parse::Line;
use vodlab_analyze::{key, Chain, ChainDetector, Form, LogFormat};
use vodlab_prefetch::sim::{simulate, SimChain, SimConfig, SimResult, UtilModel};
use vodlab_prefetch::PolicySpec;

use crate::simulate_disk::{replay, DiskChoice, MechResult, Placed};
use vodlab_prefetch::sim::DeviceRead;

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

/// The kinds a `--sweep` runs when no `--policy` names any (chapter 5's).
const KINDS: [&str; 5] = [
    "fixed",
    "proportional",
    "sqrt",
    "first-grow",
    "first-grow-sr",
];

/// A policy to run: its kind (the row's name), size and spec.
struct Planned {
    kind: String,
    size: u64,
    spec: PolicySpec,
}

/// Reads `KIND:SIZE[,...]` in the policy grammar.
fn policy(text: &str) -> anyhow::Result<Planned> {
    let spec: PolicySpec = text.parse().map_err(|e| anyhow::anyhow!("--policy: {e}"))?;
    let kind = text
        .trim()
        .split(':')
        .next()
        .unwrap_or_default()
        .to_string();
    let size = match spec {
        PolicySpec::Fixed(n) | PolicySpec::Scaled(n, _) => n,
        PolicySpec::FirstGrow { max, .. } => max,
        PolicySpec::Auto(a) => a.start,
    };
    if !(1..=1_000_000_000_000).contains(&size) {
        bail!("--policy {text:?}: size must be 1 B to 1 TB");
    }
    Ok(Planned { kind, size, spec })
}

/// Policies to run.
fn plan(a: &PrefetchSimArgs) -> anyhow::Result<Vec<Planned>> {
    let named = a
        .policies
        .iter()
        .map(|p| policy(p))
        .collect::<anyhow::Result<Vec<_>>>()?;
    if a.sweep.is_empty() {
        if named.is_empty() {
            bail!("give at least one --policy KIND:SIZE or a --sweep of sizes");
        }
        return Ok(named);
    }
    let mut kinds: Vec<String> = named.iter().map(|p| p.kind.clone()).collect();
    kinds.dedup();
    if kinds.is_empty() {
        kinds = KINDS.iter().map(|k| k.to_string()).collect();
    }
    let sizes = a
        .sweep
        .iter()
        .map(|s| parse_size(s).with_context(|| format!("--sweep {s:?}")))
        .collect::<anyhow::Result<Vec<u64>>>()?;
    let mut out = Vec::new();
    for k in &kinds {
        for s in &sizes {
            let text = match k.as_str() {
                "auto" => format!("auto:start={s}"),
                _ => format!("{k}:{s}"),
            };
            out.push(policy(&text)?);
        }
    }
    Ok(out)
}

/// One row of the output.
#[derive(Debug, Serialize)]
pub struct Row {
    /// Policy kind.
    pub policy: String,
    /// Size (the maximum for First-Grow, the start for auto), bytes.
    pub size: u64,
    /// The policy as `vodlab serve --prefetch-policy` reads it.
    pub spec: String,
    /// What the simulation measured.
    #[serde(flatten)]
    pub result: SimResult,
    /// What the mechanical drive model measured (`--disk mechanical`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mechanical: Option<MechResult>,
}

struct Files {
    sizes: HashMap<u64, u64>,
    rates: HashMap<u64, f64>,
    /// (key, size) in creation order, as a file set places them.
    order: Vec<(u64, u64)>,
}

fn catalog_files(dir: &Path) -> anyhow::Result<Files> {
    let (_, c) = crate::fileset::load(dir)?;
    let mut f = Files {
        sizes: HashMap::new(),
        rates: HashMap::new(),
        order: c
            .files()
            .map(|(rel, size)| (key(&format!("/{rel}")), size))
            .collect(),
    };
    for t in &c.titles {
        for tr in &t.representations {
            let b = c.representations[tr.rep].bitrate_kbps;
            let size = match c.layout {
                vodlab_workload::spec::Layout::Chunked => c.representations[tr.rep].chunk_bytes,
                vodlab_workload::spec::Layout::Single => tr.stored_bytes,
            };
            for k in 0..tr.files {
                let file = key(&format!("/{}", c.file_path(t, tr.rep, k)));
                f.sizes.insert(file, size);
                f.rates.insert(file, b);
            }
        }
    }
    Ok(f)
}

/// `--replay-events FILE --policy SPEC`: replays a live server's events
/// (see [`vodlab_prefetch::events`]); true when every decision was alike.
pub fn replay_events(a: &PrefetchSimArgs, file: &Path) -> anyhow::Result<bool> {
    let [p] = a.policies.as_slice() else {
        bail!("--replay-events needs exactly one --policy: the one the server ran");
    };
    let spec: PolicySpec = p.parse().map_err(|e| anyhow::anyhow!("--policy: {e}"))?;
    let name = file.display().to_string();
    let events = vodlab_prefetch::events::read_events(BufReader::new(
        File::open(file).with_context(|| format!("opening {name}"))?,
    ))
    .with_context(|| name.clone())?;
    let r = vodlab_prefetch::replay::replay(spec.build(), &events).with_context(|| name.clone())?;
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "{name}: {} events; {} ranges decided ({} prefetches), {} feedback events; policy {spec}",
        events.len(),
        r.decisions,
        r.prefetches,
        r.feedback
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
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let p = dir.join("replay.json");
        std::fs::write(&p, serde_json::to_string_pretty(&r)? + "\n")
            .with_context(|| format!("writing {}", p.display()))?;
    }
    Ok(r.mismatches.is_empty())
}

/// Runs the prefetch mode; returns the rows printed.
pub fn run(a: &PrefetchSimArgs) -> anyhow::Result<Vec<Row>> {
    if a.logs.is_empty() && a.trace_workload.is_none() {
        bail!("--prefetch needs at least one --log, or --trace-workload DIR");
    }
    if !(a.trace_hours.is_finite() && a.trace_hours > 0.0 && a.trace_hours <= 24.0 * 365.0) {
        bail!("--trace-hours must be > 0 and at most a year");
    }
    if a.drives == 0 || a.drives > 4096 {
        bail!("--drives must be 1 to 4096, got {}", a.drives);
    }
    if !(a.bucket.is_finite() && a.bucket > 0.0) {
        bail!("--bucket must be > 0 s");
    }
    let policies = plan(a)?;
    let disk = DiskChoice::parse(&a.disk)?;
    let files = match a.workload.as_ref().or(a.trace_workload.as_ref()) {
        Some(d) => Some(catalog_files(d)?),
        None => None,
    };
    let placed = match (&disk, &files) {
        (DiskChoice::Linear, _) => None,
        (DiskChoice::Mechanical(_), None) => bail!(
            "--disk mechanical places the workload's files on the drives: give --workload DIR or --trace-workload DIR"
        ),
        (DiskChoice::Mechanical(p), Some(f)) => {
            let profile = vodlab_disk::Profile::resolve(p)
                .map_err(|e| anyhow::anyhow!("--disk mechanical:{p}: {e}"))?;
            Some(Placed::new(profile, a.drives, f.order.iter().copied())?)
        }
    };
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
    let cfg = SimConfig {
        bucket_s: a.bucket,
        model,
        page_cache: a.page_cache,
        max_prefetch: a.max_prefetch,
        ..SimConfig::default()
    };
    cfg.validate().map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut chains: Vec<SimChain> = Vec::new();
    let mut det = ChainDetector::new(a.chain_window, 120.0);
    let (mut done, mut files_done) = (Vec::new(), Vec::new());
    let t0 = Instant::now();
    let mut lines = 0u64;
    let mut origin: Option<f64> = None;
    let to_sim = |c: &Chain, origin: f64| -> SimChain {
        let size = files
            .as_ref()
            .and_then(|f| f.sizes.get(&c.file).copied())
            .unwrap_or(u64::MAX / 4)
            .max(c.offset + c.bytes);
        let rate = c
            .bitrate_kbps
            .or_else(|| files.as_ref().and_then(|f| f.rates.get(&c.file).copied()));
        SimChain {
            session: c.session,
            file: c.file,
            drive: (c.file % a.drives as u64) as u32,
            file_size: size,
            offset: c.offset,
            bytes: c.bytes,
            start_s: c.start_s - origin,
            end_s: c.end_s - origin,
            bitrate_bps: rate.map(|k| (k * 1000.0).round() as u64),
            open_ended: c.form == Form::Open,
            requests: c.requests.max(1),
        }
    };
    if let Some(dir) = &a.trace_workload {
        let spec = vodlab_workload::Spec::from_file(&dir.join("spec.toml"))
            .with_context(|| format!("{} is not a `vodlab gen` workload", dir.display()))?;
        let w = vodlab_workload::try_construct(&spec, &dir.display().to_string())?;
        let spread = a.trace_hours * 3600.0 / w.sessions.len().max(1) as f64;
        // sessions in arrival order, each one's requests in completion order:
        // a log written as requests complete, up to one session's overlap
        let mut reqs: Vec<vodlab_analyze::Request> = Vec::new();
        for g in &w.sessions {
            reqs.clear();
            workload_requests(&w, g, g.id as f64 * spread, &mut reqs);
            reqs.sort_by(|x, y| x.end_s.total_cmp(&y.end_s));
            for r in &reqs {
                lines += 1;
                let o = *origin.get_or_insert(0.0);
                det.push(r, r.end_s, &mut done, &mut files_done);
                chains.extend(done.drain(..).map(|c| to_sim(&c, o)));
                files_done.clear();
            }
        }
    }
    for path in &a.logs {
        let name = path.display().to_string();
        let mut reader = BufReader::with_capacity(
            1 << 20,
            File::open(path).with_context(|| format!("opening {name}"))?,
        );
        let mut format: Option<LogFormat> = None;
        // one buffer for every line: no allocation per line
        let mut buf = Vec::with_capacity(512);
        let mut i = 0u64;
        loop {
            buf.clear();
            if reader
                .read_until(b'\n', &mut buf)
                .with_context(|| format!("reading {name}"))?
                == 0
            {
                break;
            }
            i += 1;
            let text = std::str::from_utf8(&buf)
                .with_context(|| format!("reading {name}: line {i} is not UTF-8"))?;
            lines += 1;
            if format.is_none() {
                if text.trim().is_empty() {
                    continue;
                }
                format = Some(LogFormat::detect(text).map_err(|e| anyhow::anyhow!("{name}: {e}"))?);
            }
            let f = format.as_ref().expect("set");
            let r = match f.parse(text, i) {
                Ok(Line::Request(r, _)) => r,
                Ok(Line::Skip(_)) => continue,
                Err(e) => bail!("{name}: {e}"),
            };
            let o = *origin.get_or_insert(r.start_s);
            det.push(&r, r.end_s, &mut done, &mut files_done);
            chains.extend(done.drain(..).map(|c| to_sim(&c, o)));
            files_done.clear();
        }
    }
    det.finish(&mut done, &mut files_done);
    let o = origin.unwrap_or(0.0);
    chains.extend(done.drain(..).map(|c| to_sim(&c, o)));
    // the policies run side by side, one thread each up to the cores
    let keep = placed.is_some();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut results: Vec<Option<(SimResult, Vec<DeviceRead>)>> =
        policies.iter().map(|_| None).collect();
    for batch in policies
        .iter()
        .zip(results.iter_mut())
        .collect::<Vec<_>>()
        .chunks_mut(threads)
    {
        std::thread::scope(|sc| {
            for (p, slot) in batch.iter_mut() {
                let (cfg, chains) = (&cfg, &chains);
                sc.spawn(move || **slot = Some(simulate(cfg, p.spec.build(), chains, keep)));
            }
        });
    }
    let secs = t0.elapsed().as_secs_f64();
    let rows: Vec<Row> = policies
        .into_iter()
        .zip(results)
        .map(|(p, r)| {
            let (result, mut reads) = r.expect("simulated");
            let mechanical = match &placed {
                Some(pl) => Some(replay(pl, &mut reads, a.bucket)?),
                None => None,
            };
            Ok(Row {
                policy: p.kind,
                size: p.size,
                spec: p.spec.to_string(),
                result,
                mechanical,
            })
        })
        .collect::<anyhow::Result<_>>()?;
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
    if let Some(p) = &placed {
        writeln!(
            out,
            "  utilisation: linear model (thesis) and mechanical model ({}), busiest drive in its busiest {} s bucket",
            p.profile_name(),
            a.bucket
        )?;
    }
    let mech_head = if placed.is_some() {
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
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let p = dir.join("results.json");
        std::fs::write(&p, serde_json::to_string_pretty(&rows)? + "\n")
            .with_context(|| format!("writing {}", p.display()))?;
        let mut csv = String::from("policy,size_bytes,peak_utilisation,mean_utilisation,peak_memory_bytes,device_bytes,wasted_bytes,prefetches,chains,mean_memory_bytes,mech_peak_utilisation,mech_mean_utilisation,decisions,hits,evictions,evicted_bytes,peak_cache_bytes,max_wait_s,auto_final_bytes,spec\n");
        for r in &rows {
            let s = &r.result;
            let (mp, mm) = r
                .mechanical
                .as_ref()
                .map_or((String::new(), String::new()), |m| {
                    (
                        format!("{:.6}", m.peak_utilisation),
                        format!("{:.6}", m.mean_utilisation),
                    )
                });
            csv.push_str(&format!(
                "{},{},{:.6},{:.6},{},{},{},{},{},{},{mp},{mm},{},{},{},{},{},{:.6},{},\"{}\"\n",
                r.policy,
                r.size,
                s.peak_utilisation,
                s.mean_utilisation,
                s.peak_memory_bytes,
                s.device_bytes,
                s.wasted_bytes,
                s.prefetches,
                s.chains,
                s.mean_memory_bytes,
                s.decisions,
                s.hits,
                s.evictions,
                s.evicted_bytes,
                s.peak_cache_bytes,
                s.max_wait_s,
                s.auto_final_bytes.map_or(String::new(), |b| b.to_string()),
                r.spec
            ));
        }
        let p = dir.join("results.csv");
        std::fs::write(&p, csv).with_context(|| format!("writing {}", p.display()))?;
    }
    Ok(rows)
}

/// A workload session's requests with nominal times, as a log would have
/// them: `netflix` sessions from their plan; paced sessions one request
/// every `pacing_s` after the buffering requests, each taking 1 s.
fn workload_requests(
    w: &vodlab_workload::Workload,
    g: &vodlab_workload::construct::GenSession,
    start_s: f64,
    out: &mut Vec<vodlab_analyze::Request>,
) {
    let t = &w.catalog.titles[g.title as usize];
    if let Some(plan) = w.netflix_plan(g) {
        for q in &plan.requests {
            let tr = &t.representations[q.file as usize];
            let rep = &w.catalog.representations[tr.rep];
            let s = start_s + q.t_ms as f64 / 1000.0;
            out.push(vodlab_analyze::Request {
                start_s: s,
                end_s: s + q.dur_ms as f64 / 1000.0,
                session: g.id as u64,
                file: key(&format!("/{}", w.catalog.file_path(t, tr.rep, 0))),
                conn: None,
                offset: q.offset,
                bytes: q.bytes,
                form: if q.open { Form::Open } else { Form::Chunk },
                bitrate_kbps: Some(rep.bitrate_kbps),
            });
        }
        return;
    }
    let session = w.session(g);
    let pacing = w.spec.sessions.pacing();
    let buffering = w.spec.sessions.buffering_requests as usize;
    let rate = session.header.bitrate_bps.map(|b| b as f64 / 1000.0);
    for (k, r) in session.requests.iter().enumerate() {
        let s = start_s + k.saturating_sub(buffering.saturating_sub(1)) as f64 * pacing;
        let (offset, bytes) = match r.range {
            Some(g) => (g.start, g.len().unwrap_or(0)),
            None => (
                0,
                w.catalog.representations[t.representations[g.title_rep as usize].rep]
                    .request_bytes,
            ),
        };
        out.push(vodlab_analyze::Request {
            start_s: s,
            end_s: s + 1.0,
            session: g.id as u64,
            file: key(&r.path),
            conn: None,
            offset,
            bytes,
            form: Form::Chunk,
            bitrate_kbps: rate,
        });
    }
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
            let e = plan(&sim.a).err().expect(bad).to_string();
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
