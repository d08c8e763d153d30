//! `vodlab analyze`: sessions, chains and phases from access logs (thesis
//! chapter 5; docs/analyze.md). Streams the logs line by line into the
//! `vodlab-analyze` core; memory depends on concurrent sessions, not on the
//! length of the log.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use clap::{Args, ValueEnum};
use vodlab_analyze::fitspec::SpecFitter;
use vodlab_analyze::parse::Line;
use vodlab_analyze::{key, Analyzer, LogFormat, Settings};
use vodlab_workload::construct::Catalog;

/// Log formats on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FormatArg {
    /// Tell from the first line of each file.
    Auto,
    /// `vodlab serve --access-log`.
    Vodlab,
    /// nginx with `log_format vodlab_analyze` (see --print-nginx-format).
    Nginx,
    /// CSV with a header line.
    Csv,
}

/// Arguments of `vodlab analyze`.
#[derive(Debug, Args)]
pub struct AnalyzeArgs {
    /// Access logs, in time order when several (`-` reads standard input).
    #[arg(value_name = "LOG", required_unless_present = "print_nginx_format")]
    pub logs: Vec<PathBuf>,
    /// Log format.
    #[arg(long, value_enum, default_value = "auto")]
    pub format: FormatArg,
    /// A `vodlab gen` workload directory whose catalog gives each file's bit
    /// rate (for the nominal title time of chains).
    #[arg(long, value_name = "DIR")]
    pub workload: Option<PathBuf>,
    /// Write analysis.json and summary.txt here (`--output` is an older
    /// name).
    #[arg(short = 'o', long = "out", alias = "output", value_name = "DIR")]
    pub output: Option<PathBuf>,
    /// Adjacent requests join a chain when they arrive within this long of
    /// each other (thesis: 40 s). Durations here: 500ms, 40s, 5m; a bare
    /// number is seconds.
    #[arg(long, value_name = "DURATION", value_parser = vodlab_units::parse_seconds)]
    pub chain_window: Option<f64>,
    /// How far out of arrival order the log may be.
    #[arg(long, value_name = "DURATION", value_parser = vodlab_units::parse_seconds)]
    pub reorder: Option<f64>,
    /// A chain lasting longer than this is a stable phase (thesis: 40).
    #[arg(long, value_name = "DURATION", value_parser = vodlab_units::parse_seconds)]
    pub long_chain: Option<f64>,
    /// Short chains closer than this form one transient phase (thesis: 10).
    #[arg(long, value_name = "DURATION", value_parser = vodlab_units::parse_seconds)]
    pub cluster_gap: Option<f64>,
    /// No request for this long is an inactive phase (thesis: 40).
    #[arg(long, value_name = "DURATION", value_parser = vodlab_units::parse_seconds)]
    pub inactive: Option<f64>,
    /// A session with no request for this long is over (default 300 s; at
    /// least --chain-window).
    #[arg(long, value_name = "DURATION", value_parser = vodlab_units::parse_seconds)]
    pub session_idle: Option<f64>,
    /// Breakpoints of the survival fit, sizes comma-separated (thesis:
    /// 1e6,2e8 = 1MB,200MB).
    #[arg(long, value_name = "SIZE,SIZE,...", value_delimiter = ',', value_parser = size_f64)]
    pub fit_breaks: Option<Vec<f64>>,
    /// Survival probability P of the growth factor d/x (thesis: 0.45).
    #[arg(long, value_name = "P")]
    pub survival_p: Option<f64>,
    /// Stop at the first line that cannot be read (default: report up to 10,
    /// count the rest, and go on).
    #[arg(long)]
    pub strict: bool,
    /// Also write a workload spec fitted from the log to this TOML file
    /// (Zipf exponent, duration, viewing-fraction and start CDFs, request
    /// size, pacing, bit rates; docs/analyze.md). `vodlab gen --spec` reads it.
    #[arg(long, value_name = "OUT.toml")]
    pub fit_spec: Option<PathBuf>,
    /// Print the nginx `log_format` line this command reads, and exit.
    #[arg(long)]
    pub print_nginx_format: bool,
}

/// A size ([`vodlab_units::parse_size`]: `1e6`, `1MB`, `200MB`, `4M`) as
/// bytes in an `f64`.
fn size_f64(s: &str) -> Result<f64, vodlab_units::UnitError> {
    vodlab_units::parse_size(s).map(|b| b as f64)
}

fn settings(a: &AnalyzeArgs) -> Settings {
    let mut s = Settings::default();
    let set = |v: Option<f64>, f: &mut f64| {
        if let Some(v) = v {
            *f = v;
        }
    };
    set(a.chain_window, &mut s.chain_window_s);
    set(a.reorder, &mut s.reorder_s);
    set(a.long_chain, &mut s.long_chain_s);
    set(a.cluster_gap, &mut s.cluster_gap_s);
    set(a.inactive, &mut s.inactive_s);
    set(a.survival_p, &mut s.survival_p);
    set(a.session_idle, &mut s.session_idle_s);
    if let Some(b) = &a.fit_breaks {
        s.fit_breaks = b.clone();
    }
    s
}

/// File key → bit rate (kbit/s) from a workload's catalog.
fn bitrates(c: &Catalog) -> HashMap<u64, f64> {
    let mut out = HashMap::new();
    for t in &c.titles {
        for tr in &t.representations {
            let b = c.representations[tr.rep].bitrate_kbps;
            for chunk in 0..tr.files {
                out.insert(key(&format!("/{}", c.file_path(t, tr.rep, chunk))), b);
            }
        }
    }
    out
}

/// Runs `vodlab analyze`.
pub fn run(a: AnalyzeArgs) -> anyhow::Result<ExitCode> {
    if a.print_nginx_format {
        println!("{}", vodlab_analyze::parse::NGINX_LOG_FORMAT);
        return Ok(ExitCode::SUCCESS);
    }
    let s = settings(&a);
    let mut an = Analyzer::new(s.clone()).context("invalid settings")?;
    let catalog = match &a.workload {
        Some(d) => Some(crate::fileset::load(d)?.1),
        None => None,
    };
    let rates = catalog.as_ref().map(bitrates);
    let mut fitter = a.fit_spec.as_ref().map(|_| {
        let mut f = SpecFitter::new(&s);
        if let Some(c) = &catalog {
            f.describe_catalog(c);
        }
        f
    });
    let t0 = Instant::now();
    let (mut lines, mut used, mut skipped, mut bad) = (0u64, 0u64, 0u64, 0u64);
    for path in &a.logs {
        let name = path.display().to_string();
        let reader: Box<dyn BufRead> = if name == "-" {
            Box::new(BufReader::new(std::io::stdin()))
        } else {
            Box::new(BufReader::with_capacity(
                1 << 20,
                File::open(path).with_context(|| format!("opening {name}"))?,
            ))
        };
        let mut format: Option<LogFormat> = match a.format {
            FormatArg::Vodlab => Some(LogFormat::Vodlab),
            FormatArg::Nginx => Some(LogFormat::Nginx),
            FormatArg::Auto | FormatArg::Csv => None,
        };
        // one buffer for every line: no allocation per line
        let mut reader = reader;
        let mut buf = Vec::with_capacity(512);
        let mut n = 0u64;
        loop {
            buf.clear();
            let got = reader
                .read_until(b'\n', &mut buf)
                .with_context(|| format!("reading {name}"))?;
            if got == 0 {
                break;
            }
            n += 1;
            let bytes = buf.strip_suffix(b"\n").unwrap_or(&buf);
            lines += 1;
            let Ok(text) = std::str::from_utf8(bytes) else {
                bad += 1;
                if a.strict {
                    anyhow::bail!("{name}: line {n}: not UTF-8");
                }
                if bad <= 10 {
                    eprintln!("{name}: line {n}: not UTF-8, skipped");
                }
                continue;
            };
            let f = match &format {
                Some(f) => f,
                None => {
                    if text.trim().is_empty() {
                        continue;
                    }
                    let f = if a.format == FormatArg::Csv {
                        LogFormat::from_csv_header(text)
                    } else {
                        LogFormat::detect(text)
                    }
                    .map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
                    format.insert(f)
                }
            };
            match f.parse(text, n) {
                Ok(Line::Request(mut r, file)) => {
                    if r.bitrate_kbps.is_none() {
                        if let Some(m) = &rates {
                            r.bitrate_kbps = m.get(&key(file.0)).copied();
                        }
                    }
                    an.push(&r);
                    if let Some(f) = &mut fitter {
                        f.push(&r, file.0);
                    }
                    used += 1;
                }
                Ok(Line::Skip(_)) => skipped += 1,
                Err(e) => {
                    bad += 1;
                    if a.strict {
                        anyhow::bail!("{name}: {e}");
                    }
                    if bad <= 10 {
                        eprintln!("{name}: {e}; skipped");
                    }
                }
            }
        }
    }
    let analysis = an.finish();
    let secs = t0.elapsed().as_secs_f64();
    let mut text = format!(
        "read {lines} lines in {secs:.2} s ({:.0} lines/s): {used} requests, {skipped} skipped (headers, blank lines, error statuses), {bad} unreadable\n",
        lines as f64 / secs.max(1e-9)
    );
    text.push_str(&analysis.text());
    if let (Some(f), Some(out)) = (fitter, &a.fit_spec) {
        let fitted = f.finish().context("--fit-spec")?;
        if let Some(dir) = out.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        std::fs::write(out, fitted.to_toml())
            .with_context(|| format!("writing {}", out.display()))?;
        text.push_str(&format!(
            "\nfitted workload spec written to {} (vodlab gen --spec): Zipf alpha {:.3}, {} titles, {} sessions at {:.4}/s\n",
            out.display(),
            fitted.alpha_mle,
            fitted.spec.catalog.titles,
            fitted.spec.sessions.count,
            fitted.sessions_per_s
        ));
    }
    print!("{text}");
    if let Some(dir) = &a.output {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let p = dir.join("analysis.json");
        // tagged so that `vodlab report` tells it from other results
        #[derive(serde::Serialize)]
        struct Tagged<'a> {
            format: &'static str,
            #[serde(flatten)]
            analysis: &'a vodlab_analyze::Analysis,
        }
        let tagged = Tagged {
            format: vodlab_lab::report::ch5::ANALYSIS_FORMAT,
            analysis: &analysis,
        };
        std::fs::write(&p, serde_json::to_string_pretty(&tagged)? + "\n")
            .with_context(|| format!("writing {}", p.display()))?;
        let p = dir.join("summary.txt");
        std::fs::File::create(&p)
            .and_then(|mut f| f.write_all(text.as_bytes()))
            .with_context(|| format!("writing {}", p.display()))?;
    }
    Ok(ExitCode::SUCCESS)
}
