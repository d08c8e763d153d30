//! Chapter 5's trace-driven comparison of prefetch policies (`vodlab
//! simulate --prefetch`, docs/simulate.md): an access log (or a `vodlab
//! gen` workload's own requests) is read once, its chains found as `vodlab
//! analyze` finds them, and every policy's simulation
//! ([`vodlab_prefetch::sim`]) runs over the chains, through the very prefetch
//! core and controllers `vodlab serve` runs, optionally replayed on the
//! mechanical drive model too ([`mechanical`]). The library reads the
//! flags ([`PrefetchSimArgs`]), runs it and formats its table; the binary
//! prints.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::Serialize;
use thiserror::Error;
use vodlab_analyze::parse::Line;
use vodlab_analyze::{key, Chain, ChainDetector, Form, LogFormat};
use vodlab_prefetch::replay::Replay;
use vodlab_prefetch::sim::{simulate, DeviceRead, SimChain, SimConfig, SimResult};
use vodlab_prefetch::PolicySpec;

pub mod mechanical;
mod settings;
mod text;

use mechanical::{replay, Placed};
pub use mechanical::{DiskChoice, MechResult};
pub use settings::{parse_size, PrefetchSimArgs};
pub use text::replay_text;

/// Why a trace simulation could not run.
#[derive(Debug, Error)]
pub enum TraceError {
    /// A setting out of range, or settings that do not go together.
    #[error("{0}")]
    Settings(String),
    /// A policy could not be read.
    #[error("--policy: {0}")]
    Policy(#[from] vodlab_prefetch::PolicyError),
    /// A file could not be read.
    #[error("{what}: {source}")]
    Io {
        /// What was being read (the path and the step).
        what: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// A result file could not be written (it keeps its previous
    /// content).
    #[error("{0}")]
    Write(#[from] vodlab_client::out::atomic::AtomicWriteError),
    /// A log, workload or event file has bad content.
    #[error("{0}")]
    Input(String),
    /// The mechanical drive model refused.
    #[error("{0}")]
    Disk(String),
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> TraceError {
    let what = what.into();
    move |source| TraceError::Io { what, source }
}

/// The kinds a `--sweep` runs when no `--policy` names any (chapter 5's).
pub const KINDS: [&str; 5] = [
    "fixed",
    "proportional",
    "sqrt",
    "first-grow",
    "first-grow-sr",
];

/// A policy to run: its kind (the row's name), size and spec.
#[derive(Debug, Clone, PartialEq)]
pub struct Planned {
    /// The kind as written (the row's name).
    pub kind: String,
    /// Its size (First-Grow: the maximum; auto: the start), bytes.
    pub size: u64,
    /// The policy.
    pub spec: PolicySpec,
}

/// Reads `KIND:SIZE[,...]` in the policy grammar.
pub fn policy(text: &str) -> Result<Planned, TraceError> {
    let spec: PolicySpec = text.parse()?;
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
        return Err(TraceError::Settings(format!(
            "--policy {text:?}: size must be 1 B to 1 TB"
        )));
    }
    Ok(Planned { kind, size, spec })
}

/// The policies to run: those named (`KIND:SIZE[,...]`), or with a sweep
/// of sizes every kind named (else the five of chapter 5) at each size.
pub fn plan(named: &[String], sweep: &[u64]) -> Result<Vec<Planned>, TraceError> {
    let named = named
        .iter()
        .map(|p| policy(p))
        .collect::<Result<Vec<_>, _>>()?;
    if sweep.is_empty() {
        if named.is_empty() {
            return Err(TraceError::Settings(
                "give at least one --policy KIND:SIZE or a --sweep of sizes".into(),
            ));
        }
        return Ok(named);
    }
    let mut kinds: Vec<String> = named.iter().map(|p| p.kind.clone()).collect();
    kinds.dedup();
    if kinds.is_empty() {
        kinds = KINDS.iter().map(|k| k.to_string()).collect();
    }
    let mut out = Vec::new();
    for k in &kinds {
        for s in sweep {
            let text = match k.as_str() {
                "auto" => format!("auto:start={s}"),
                _ => format!("{k}:{s}"),
            };
            out.push(policy(&text)?);
        }
    }
    Ok(out)
}

/// What to simulate.
#[derive(Debug, Clone)]
pub struct TraceSettings {
    /// Access logs, in time order.
    pub logs: Vec<PathBuf>,
    /// A `vodlab gen` workload whose catalog gives file sizes and rates.
    pub workload: Option<PathBuf>,
    /// A workload whose own requests are the trace (implies `workload`).
    pub trace_workload: Option<PathBuf>,
    /// Hours the trace workload's sessions arrive over.
    pub trace_hours: f64,
    /// Drives the files are spread over (by the file key).
    pub drives: u32,
    /// Chain window, seconds.
    pub chain_window: f64,
    /// The simulation's settings (buckets, drive model, page cache, cap).
    pub sim: SimConfig,
    /// The drive model(s).
    pub disk: DiskChoice,
    /// The policies.
    pub policies: Vec<Planned>,
}

impl TraceSettings {
    /// Checks the values; the error names the setting.
    pub fn validate(&self) -> Result<(), TraceError> {
        let bad = |s: &str| Err(TraceError::Settings(s.to_string()));
        if self.logs.is_empty() && self.trace_workload.is_none() {
            return bad("--prefetch needs at least one --log, or --trace-workload DIR");
        }
        if !(self.trace_hours.is_finite()
            && self.trace_hours > 0.0
            && self.trace_hours <= 24.0 * 365.0)
        {
            return bad("--trace-hours must be > 0 and at most a year");
        }
        if self.drives == 0 || self.drives > 4096 {
            return Err(TraceError::Settings(format!(
                "--drives must be 1 to 4096, got {}",
                self.drives
            )));
        }
        if !(self.chain_window.is_finite() && self.chain_window > 0.0) {
            return bad("--chain-window must be > 0 s");
        }
        self.sim.validate().map_err(TraceError::Settings)?;
        if self.policies.is_empty() {
            return bad("no policy to run");
        }
        Ok(())
    }
}

/// What one run found.
#[derive(Debug)]
pub struct TraceRun {
    /// Log lines (or workload requests) read.
    pub lines: u64,
    /// Seconds the run took.
    pub secs: f64,
    /// One row per policy, in the order given.
    pub rows: Vec<Row>,
    /// The mechanical model's profile, when it ran.
    pub mechanical: Option<String>,
}

/// Hears of a long run's progress.
pub trait TraceObserver {
    /// `lines` lines read so far (every 1,000,000).
    fn lines_read(&mut self, _lines: u64) {}
    /// Every chain is found; the policies run now.
    fn simulating(&mut self, _chains: usize, _policies: usize) {}
}

/// An observer that hears nothing.
impl TraceObserver for () {}

/// One row of the output.
#[derive(Debug, Clone, Serialize)]
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

fn catalog_files(dir: &Path) -> Result<Files, TraceError> {
    let p = dir.join("catalog.json");
    let text = std::fs::read(&p).map_err(io(format!(
        "reading {} (is {} a `vodlab gen` workload?)",
        p.display(),
        dir.display()
    )))?;
    let c: vodlab_workload::Catalog = serde_json::from_slice(&text)
        .map_err(|e| TraceError::Input(format!("parsing {}: {e}", p.display())))?;
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

/// Runs every policy over the trace (see the module note).
pub fn run(a: &TraceSettings, obs: &mut impl TraceObserver) -> Result<TraceRun, TraceError> {
    a.validate()?;
    let policies = &a.policies;
    let cfg = a.sim;
    let files = match a.workload.as_ref().or(a.trace_workload.as_ref()) {
        Some(d) => Some(catalog_files(d)?),
        None => None,
    };
    let placed = match (&a.disk, &files) {
        (DiskChoice::Linear, _) => None,
        (DiskChoice::Mechanical(_), None) => {
            return Err(TraceError::Settings(
                "--disk mechanical places the workload's files on the drives: give --workload DIR or --trace-workload DIR".into(),
            ))
        }
        (DiskChoice::Mechanical(p), Some(f)) => {
            let profile = vodlab_disk::Profile::resolve(p)
                .map_err(|e| TraceError::Disk(format!("--disk mechanical:{p}: {e}")))?;
            Some(Placed::new(profile, a.drives, f.order.iter().copied())?)
        }
    };
    let mut chains: Vec<SimChain> = Vec::new();
    let mut next_report = 1_000_000u64;
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
        let spec = vodlab_workload::Spec::from_file(&dir.join("spec.toml")).map_err(|e| {
            TraceError::Input(format!(
                "{} is not a `vodlab gen` workload: {e}",
                dir.display()
            ))
        })?;
        let w = vodlab_workload::try_construct(&spec, &dir.display().to_string())
            .map_err(|e| TraceError::Input(format!("{}: {e}", dir.display())))?;
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
                if lines >= next_report {
                    obs.lines_read(lines);
                    next_report += 1_000_000;
                }
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
            File::open(path).map_err(io(format!("opening {name}")))?,
        );
        let mut format: Option<LogFormat> = None;
        // one buffer for every line: no allocation per line
        let mut buf = Vec::with_capacity(512);
        let mut i = 0u64;
        loop {
            buf.clear();
            if reader
                .read_until(b'\n', &mut buf)
                .map_err(io(format!("reading {name}")))?
                == 0
            {
                break;
            }
            i += 1;
            let text = std::str::from_utf8(&buf)
                .map_err(|_| TraceError::Input(format!("reading {name}: line {i} is not UTF-8")))?;
            lines += 1;
            if lines >= next_report {
                obs.lines_read(lines);
                next_report += 1_000_000;
            }
            if format.is_none() {
                if text.trim().is_empty() {
                    continue;
                }
                format = Some(
                    LogFormat::detect(text)
                        .map_err(|e| TraceError::Input(format!("{name}: {e}")))?,
                );
            }
            let f = format.as_ref().expect("set");
            let r = match f.parse(text, i) {
                Ok(Line::Request(r, _)) => r,
                Ok(Line::Skip(_)) => continue,
                Err(e) => return Err(TraceError::Input(format!("{name}: {e}"))),
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
    obs.simulating(chains.len(), policies.len());
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
        .iter()
        .cloned()
        .zip(results)
        .map(|(p, r)| {
            let (result, mut reads) = r.expect("simulated");
            let mechanical = match &placed {
                Some(pl) => Some(replay(pl, &mut reads, cfg.bucket_s)?),
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
        .collect::<Result<_, TraceError>>()?;
    Ok(TraceRun {
        lines,
        secs,
        rows,
        mechanical: placed.as_ref().map(|p| p.profile_name().to_string()),
    })
}

/// Writes `results.json` and `results.csv` (docs/simulate.md) into `dir`,
/// each atomically ([`vodlab_client::out::atomic::write`]).
pub fn write_results(dir: &Path, rows: &[Row]) -> Result<(), TraceError> {
    std::fs::create_dir_all(dir).map_err(io(format!("creating {}", dir.display())))?;
    let p = dir.join("results.json");
    let json = serde_json::to_string_pretty(rows).expect("rows serialize") + "\n";
    vodlab_client::out::atomic::write(&p, json.as_bytes())?;
    let mut csv = String::from("policy,size_bytes,peak_utilisation,mean_utilisation,peak_memory_bytes,device_bytes,wasted_bytes,prefetches,chains,mean_memory_bytes,mech_peak_utilisation,mech_mean_utilisation,decisions,hits,evictions,evicted_bytes,peak_cache_bytes,max_wait_s,auto_final_bytes,next_object_reads,next_object_bytes,spec\n");
    for r in rows {
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
            "{},{},{:.6},{:.6},{},{},{},{},{},{},{mp},{mm},{},{},{},{},{},{:.6},{},{},{},\"{}\"\n",
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
            s.next_object_reads,
            s.next_object_bytes,
            r.spec
        ));
    }
    vodlab_client::out::atomic::write(&dir.join("results.csv"), csv.as_bytes())?;
    Ok(())
}

/// Replays the events a live `vodlab serve --prefetch-events FILE`
/// recorded into a fresh controller of `spec`
/// ([`vodlab_prefetch::replay`]); returns the events read and the replay.
pub fn replay_events(file: &Path, spec: &PolicySpec) -> Result<(usize, Replay), TraceError> {
    let name = file.display().to_string();
    let f = File::open(file).map_err(io(format!("opening {name}")))?;
    let events = vodlab_prefetch::events::read_events(BufReader::new(f))
        .map_err(|e| TraceError::Input(format!("{name}: {e}")))?;
    let r = vodlab_prefetch::replay::replay(spec.build(), &events)
        .map_err(|e| TraceError::Input(format!("{name}: {e}")))?;
    Ok((events.len(), r))
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
