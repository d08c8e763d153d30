//! `vodlab compare`: one workload, several servers, each in the same box and
//! from a cold cache; a capacity search per server plus the sequential-read
//! bound, and the thesis's comparison table (docs/experiments.md).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::Args;
use serde::Serialize;
use serde_json::{json, Value};
use vodlab_lab::hwbox::{BoxSpec, HwBox};
use vodlab_lab::servers::{self, ServerKind, ServerSetup};
use vodlab_lab::{Answer, Search};

use crate::boxcmd::{describe, HwArgs};
use crate::capacity::{self, PointRunner, SearchArgs};

/// Arguments of `vodlab compare`.
#[derive(Debug, Args)]
pub struct CompareArgs {
    /// A `vodlab gen` workload directory.
    pub workload: PathBuf,
    /// Its file set (`vodlab fileset create`), which every server serves.
    #[arg(long, value_name = "DIR")]
    pub root: PathBuf,
    /// Servers to compare, comma-separated, in order.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "vodlab-asap,vodlab-vanilla,nginx,apache2,lighttpd"
    )]
    pub servers: Vec<String>,
    #[command(flatten)]
    pub hw: HwArgs,
    /// Run without a box (no root needed; the disk figures then come from
    /// the device's counters, shared with every other process).
    #[arg(long)]
    pub no_box: bool,
    /// Loopback port the servers listen on.
    #[arg(long, default_value_t = 18480)]
    pub port: u16,
    /// Worker processes for nginx / Apache (default: CPU count).
    #[arg(long)]
    pub workers: Option<usize>,
    /// Extra argument for `vodlab serve` (repeatable), e.g. --serve-arg=--prefetch=2M.
    #[arg(long = "serve-arg", value_name = "ARG", allow_hyphen_values = true)]
    pub serve_args: Vec<String>,
    /// Skip the sequential-read bound (`vodlab fileset seqread` in the box).
    #[arg(long)]
    pub no_seqread: bool,
    /// Output directory: compare.json, summary.txt, one capacity directory per server.
    #[arg(short, long, value_name = "DIR")]
    pub output: Option<PathBuf>,
    #[command(flatten)]
    pub search: SearchArgs,
}

/// A server's row of the comparison.
#[derive(Debug, Serialize, serde::Deserialize)]
struct ServerResult {
    server: String,
    answer: Answer,
    /// Figures at the highest passing rate (means over its runs).
    at_capacity: Value,
    /// Figures at the lowest failing rate (the server overloaded).
    at_overload: Value,
    error: Option<String>,
    capacity_json: String,
}

fn box_usage(b: &Option<HwBox>) -> anyhow::Result<Option<vodlab_lab::Usage>> {
    Ok(match b {
        Some(b) => Some(b.usage()?),
        None => None,
    })
}

/// Means of the numeric extras of a point.
fn figures(p: Option<&vodlab_lab::Point>) -> Value {
    let Some(p) = p else { return Value::Null };
    let mut m = serde_json::Map::new();
    m.insert("rate".into(), p.rate.into());
    if let Some(t) = p.throughput() {
        m.insert("delivered_mb_s".into(), (t.mean / 1e6).into());
    }
    for key in [
        "disk_mb_s",
        "device_mb_s",
        "mean_read_kib",
        "device_ms_per_read",
        "server_cpu_s_per_gb",
        "cache_miss_pct",
        "response_p99_ms",
    ] {
        if let Some(c) = p.extra(key) {
            m.insert(key.into(), c.mean.into());
        }
    }
    Value::Object(m)
}

fn seqread(
    a: &CompareArgs,
    spec: Option<BoxSpec>,
    catalog: &vodlab_workload::construct::Catalog,
    out: &Path,
) -> anyhow::Result<Value> {
    vodlab_fileset::cool(&a.root, catalog)?;
    let b = spec.map(HwBox::create).transpose()?;
    let dev = vodlab_lab::Dev::of_path(&a.root).ok();
    let d0 = dev.and_then(|d| d.stat().ok());
    let u0 = box_usage(&b)?;
    let mut cmd = Command::new(std::env::current_exe()?);
    cmd.args(["fileset", "seqread"])
        .arg(&a.workload)
        .arg("--root")
        .arg(&a.root)
        .arg("--warm-cache");
    cmd.stdout(Stdio::piped()).stderr(Stdio::null());
    if let Some(b) = &b {
        b.command(&mut cmd);
    }
    let t = Instant::now();
    let o = cmd.output().context("running vodlab fileset seqread")?;
    let secs = t.elapsed().as_secs_f64();
    anyhow::ensure!(
        o.status.success(),
        "vodlab fileset seqread failed: {}",
        String::from_utf8_lossy(&o.stdout)
    );
    let printed = String::from_utf8_lossy(&o.stdout).trim().to_string();
    std::fs::write(out.join("seqread.txt"), &printed)?;
    let u1 = box_usage(&b)?;
    let dev_read = match (dev.and_then(|d| d.stat().ok()), d0) {
        (Some(a), Some(b)) => a.since(&b).read_bytes,
        _ => 0,
    };
    let read = match (u0, u1) {
        (Some(a), Some(b)) => b.read_bytes - a.read_bytes,
        _ => dev_read,
    };
    Ok(
        json!({ "bytes_read": read, "seconds": secs, "mb_s": read as f64 / 1e6 / secs, "output": printed }),
    )
}

pub fn run(a: CompareArgs) -> anyhow::Result<ExitCode> {
    let cfg = a.search.config()?;
    let kinds = a
        .servers
        .iter()
        .map(|s| ServerKind::parse(s))
        .collect::<Result<Vec<_>, _>>()?;
    anyhow::ensure!(!kinds.is_empty(), "--servers: name at least one server");
    let (_, catalog) = crate::fileset::load(&a.workload)?;
    let v = vodlab_fileset::verify(&a.root, &catalog, Some(8), 1, &mut |_, _| {}).with_context(
        || {
            format!(
                "{} is not this workload's file set (run `vodlab fileset create`)",
                a.root.display()
            )
        },
    )?;
    anyhow::ensure!(
        v.damaged.is_empty(),
        "{}: {} damaged file(s) in a sample of 8; run `vodlab fileset verify`",
        a.root.display(),
        v.damaged.len()
    );
    let out = a.output.clone().unwrap_or_else(|| {
        PathBuf::from(format!("results/compare-{}", capacity::unix_now() as u64))
    });
    std::fs::create_dir_all(&out)?;
    let root = std::fs::canonicalize(&a.root)?;
    let spec = |name: &str| -> anyhow::Result<Option<BoxSpec>> {
        if a.no_box {
            Ok(None)
        } else {
            Ok(Some(a.hw.spec(name, &root)?))
        }
    };
    // fail early (not after an hour of runs) if the box cannot be made
    if let Some(s) = spec(&format!("vodlab-compare-{}-check", std::process::id()))? {
        let b = HwBox::create(s)?;
        eprintln!("vodlab compare: box {}", describe(&b));
    }
    let addr: SocketAddr = format!("127.0.0.1:{}", a.port).parse()?;
    let started = capacity::unix_now();
    // an earlier compare of this workload in the same directory: keep its rows
    // (and its sequential bound) for the servers not run now
    let prior: Option<Value> = std::fs::read_to_string(out.join("compare.json"))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .filter(|v: &Value| v["workload"] == a.workload.display().to_string().as_str());
    let mut rows: Vec<ServerResult> = prior
        .as_ref()
        .and_then(|v| serde_json::from_value(v["servers"].clone()).ok())
        .unwrap_or_default();
    if !rows.is_empty() {
        eprintln!(
            "vodlab compare: keeping the earlier rows of {} in {}",
            rows.iter()
                .map(|r| r.server.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            out.join("compare.json").display()
        );
    }
    let seq = if a.no_seqread {
        prior.as_ref().map_or(Value::Null, |v| v["seqread"].clone())
    } else {
        eprintln!(
            "vodlab compare: sequential-read bound (vodlab fileset seqread, cold, in the box) ..."
        );
        let v = seqread(
            &a,
            spec(&format!("vodlab-compare-{}-seqread", std::process::id()))?,
            &catalog,
            &out,
        )?;
        eprintln!(
            "vodlab compare: sequential bound {:.1} MB/s",
            v["mb_s"].as_f64().unwrap_or(0.0)
        );
        v
    };
    for kind in kinds {
        let name = kind.name();
        let sdir = out.join(name);
        std::fs::create_dir_all(&sdir)?;
        eprintln!("vodlab compare: {name}");
        let r = one_server(
            &a,
            kind,
            &root,
            addr,
            &sdir,
            spec(&format!("vodlab-compare-{}-{name}", std::process::id()))?,
            &catalog,
            cfg.clone(),
        );
        let (answer, at_capacity, at_overload, error) = match r {
            Ok((search, res)) => {
                let best = search
                    .points
                    .iter()
                    .filter(|p| p.passed)
                    .max_by(|x, y| x.rate.total_cmp(&y.rate));
                let worst = search
                    .points
                    .iter()
                    .filter(|p| !p.passed)
                    .min_by(|x, y| x.rate.total_cmp(&y.rate));
                (
                    search.answer(),
                    figures(best),
                    figures(worst),
                    res.err().map(|e| format!("{e:#}")),
                )
            }
            Err(e) => {
                eprintln!("vodlab compare: {name}: {e:#}");
                (
                    Answer {
                        capacity: None,
                        lowest_failed: None,
                        ending: None,
                        non_monotone: false,
                    },
                    Value::Null,
                    Value::Null,
                    Some(format!("{e:#}")),
                )
            }
        };
        let row = ServerResult {
            server: name.into(),
            answer,
            at_capacity,
            at_overload,
            error,
            capacity_json: format!("{name}/capacity.json"),
        };
        match rows.iter_mut().find(|r| r.server == name) {
            Some(r) => *r = row,
            None => rows.push(row),
        }
        // the table in the servers' usual order
        rows.sort_by_key(|r| ServerKind::ALL.iter().position(|k| k.name() == r.server));
        let file = json!({
            "format": "vodlab-compare",
            "version": 1,
            "complete": false,
            "workload": a.workload.display().to_string(),
            "root": root.display().to_string(),
            "box": spec("vodlab-compare")?,
            "profile": a.hw.profile()?,
            "criterion": cfg.criterion.to_string(),
            "window_s": a.search.window,
            "pacing": !a.search.no_pacing,
            "shaping": !a.search.no_shaping,
            "seqread": seq,
            "servers": rows,
            "started_at_unix_s": started,
        });
        write_json(&out.join("compare.json"), &file)?;
    }
    let text = summary(&rows, &seq);
    let mut file: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("compare.json"))?)?;
    file["complete"] = true.into();
    file["duration_s"] = (capacity::unix_now() - started).into();
    write_json(&out.join("compare.json"), &file)?;
    std::fs::write(out.join("summary.txt"), &text)?;
    print!("{text}");
    println!("  results: {}", out.join("compare.json").display());
    Ok(ExitCode::SUCCESS)
}

fn write_json(p: &Path, v: &impl Serialize) -> anyhow::Result<()> {
    let mut t = serde_json::to_string_pretty(v)?;
    t.push('\n');
    std::fs::write(p, t).with_context(|| format!("writing {}", p.display()))
}

fn num(v: &Value, k: &str) -> Option<f64> {
    v.get(k).and_then(Value::as_f64)
}

fn summary(rows: &[ServerResult], seq: &Value) -> String {
    let nginx = rows
        .iter()
        .find(|r| r.server == "nginx")
        .and_then(|r| r.answer.capacity);
    let bound = num(seq, "mb_s");
    let mut s = String::new();
    s += &format!(
        "{:<15} {:>12} {:>8} {:>10} {:>9} {:>9} {:>9} {:>8} {:>9}\n",
        "server",
        "sessions/s",
        "x nginx",
        "deliv MB/s",
        "disk MB/s",
        "of seq",
        "read KiB",
        "ms/read",
        "CPU s/GB"
    );
    let f = |x: Option<f64>, d: usize| x.map_or("-".to_string(), |v| format!("{v:.d$}"));
    for r in rows {
        let c = &r.at_capacity;
        let cap = match (r.answer.capacity, r.answer.lowest_failed) {
            (Some(c), _) => format!("{c:.3}"),
            (None, Some(f)) => format!("<{f:.3}"),
            _ => "-".into(),
        };
        s += &format!(
            "{:<15} {:>12} {:>8} {:>10} {:>9} {:>9} {:>9} {:>8} {:>9}{}\n",
            r.server,
            cap,
            f(r.answer.capacity.zip(nginx).map(|(a, b)| a / b), 2),
            f(num(c, "delivered_mb_s"), 1),
            f(num(c, "disk_mb_s"), 1),
            f(
                num(c, "disk_mb_s").zip(bound).map(|(d, b)| 100.0 * d / b),
                0
            ) + if num(c, "disk_mb_s").is_some() && bound.is_some() {
                "%"
            } else {
                ""
            },
            f(num(c, "mean_read_kib"), 0),
            f(num(c, "device_ms_per_read"), 1),
            f(num(c, "server_cpu_s_per_gb"), 2),
            r.error
                .as_ref()
                .map_or(String::new(), |e| format!("  (error: {e})")),
        );
    }
    if let Some(b) = bound {
        s += &format!(
            "sequential-read bound (vodlab fileset seqread, cold, same box): {b:.1} MB/s\n"
        );
    }
    s += "figures at each server's highest failure-free rate; disk = reads charged to the box's cgroup\n";
    s
}

#[allow(clippy::too_many_arguments)]
fn one_server(
    a: &CompareArgs,
    kind: ServerKind,
    root: &Path,
    addr: SocketAddr,
    sdir: &Path,
    spec: Option<BoxSpec>,
    catalog: &vodlab_workload::construct::Catalog,
    cfg: vodlab_lab::SearchConfig,
) -> anyhow::Result<(Search, anyhow::Result<Answer>)> {
    let setup = ServerSetup {
        kind,
        root: root.to_path_buf(),
        addr,
        workdir: sdir.join("server"),
        vodlab: std::env::current_exe()?,
        workers: a
            .workers
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get())),
        vodlab_args: a.serve_args.clone(),
    };
    let mut cmd = servers::command(&setup)?;
    vodlab_fileset::cool(root, catalog)?;
    let b = spec.map(HwBox::create).transpose()?;
    if let Some(b) = &b {
        b.command(&mut cmd);
    }
    let mut child = cmd
        .spawn()
        .with_context(|| format!("starting {}", kind.name()))?;
    struct Stop<'a>(&'a mut std::process::Child);
    impl Drop for Stop<'_> {
        fn drop(&mut self) {
            servers::stop(self.0, Duration::from_secs(10));
        }
    }
    let guard = Stop(&mut child);
    servers::wait_listening(&setup, guard.0, Duration::from_secs(15))?;
    let target = format!("http://{addr}");
    let mut runner = PointRunner::new(&a.workload, &target, false, &a.search, sdir)?;
    let mut search = Search::new(cfg)?;
    let dev = vodlab_lab::Dev::of_path(root).ok();
    let started = capacity::unix_now();
    let before = std::cell::Cell::new((None, None));
    let label = format!("  {:<15}", kind.name());
    let res = {
        let child_ref = &mut *guard.0;
        capacity::search_with(
            &mut runner,
            &mut search,
            &label,
            || {
                if let Some(st) = child_ref.try_wait()? {
                    bail!(
                        "{} exited ({st}); see {}",
                        kind.name(),
                        setup.workdir.display()
                    );
                }
                vodlab_fileset::cool(root, catalog)?;
                before.set((box_usage(&b)?, dev.and_then(|d| d.stat().ok())));
                Ok(())
            },
            |m, o| {
                let (u0, d0) = before.get();
                let secs = m.results.duration_s.max(1e-3);
                let delivered = o
                    .extra
                    .get("delivered_bytes")
                    .and_then(Value::as_u64)
                    .unwrap_or(0);
                let d = match (dev.and_then(|d| d.stat().ok()), d0) {
                    (Some(x), Some(y)) => Some(x.since(&y)),
                    _ => None,
                };
                if let Some(d) = d {
                    o.extra.insert(
                        "device_mb_s".into(),
                        (d.read_bytes as f64 / 1e6 / secs).into(),
                    );
                    if d.reads > 0 {
                        o.extra.insert(
                            "device_ms_per_read".into(),
                            (d.read_ms as f64 / d.reads as f64).into(),
                        );
                    }
                }
                if let (Some(u0), Some(u1)) = (u0, box_usage(&b)?) {
                    let read = u1.read_bytes.saturating_sub(u0.read_bytes);
                    let ios = u1.read_ios.saturating_sub(u0.read_ios);
                    o.extra.insert("disk_bytes".into(), read.into());
                    o.extra
                        .insert("disk_mb_s".into(), (read as f64 / 1e6 / secs).into());
                    if ios > 0 {
                        o.extra.insert(
                            "mean_read_kib".into(),
                            (read as f64 / ios as f64 / 1024.0).into(),
                        );
                    }
                    if delivered > 0 {
                        o.extra.insert(
                            "cache_miss_pct".into(),
                            (100.0 * read as f64 / delivered as f64).into(),
                        );
                    }
                    if let (Some(c0), Some(c1)) = (u0.cpu_ns, u1.cpu_ns) {
                        o.extra
                            .insert("server_cpu_s".into(), ((c1 - c0) as f64 / 1e9).into());
                        if delivered > 0 {
                            o.extra.insert(
                                "server_cpu_s_per_gb".into(),
                                ((c1 - c0) as f64 / 1e9 / (delivered as f64 / 1e9)).into(),
                            );
                        }
                    }
                    if let Some(p) = u1.memory_peak_bytes {
                        o.extra.insert("box_memory_peak_bytes".into(), p.into());
                    }
                } else if let Some(d) = d {
                    o.extra.insert(
                        "disk_mb_s".into(),
                        (d.read_bytes as f64 / 1e6 / secs).into(),
                    );
                    if d.reads > 0 {
                        o.extra.insert(
                            "mean_read_kib".into(),
                            (d.read_bytes as f64 / d.reads as f64 / 1024.0).into(),
                        );
                    }
                }
                Ok(())
            },
        )
    };
    drop(guard);
    runner.write_capacity(&search, &res, Some(kind.name().into()), started)?;
    runner.finish();
    if let Some(mut b) = b {
        b.teardown()?;
    }
    Ok((search, res))
}
