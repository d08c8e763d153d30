//! `vodlab analyze` over files: access logs read line by line (a file, or
//! standard input for `-`) into an [`Analyzer`], an optional fitted
//! workload spec, and the outputs (`analysis.json`, `summary.txt`). This
//! module does the I/O the rest of the crate leaves out.

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::time::Instant;

use thiserror::Error;
use vodlab_workload::construct::Catalog;

use crate::fitspec::{FitError, SpecFitter};
use crate::parse::Line;
use crate::{key, Analysis, Analyzer, LogFormat, SettingsError};

mod args;

pub use args::{bitrates, size_f64, AnalyzeArgs, FormatArg};

/// `format` of `analysis.json`: tells it from other results (`vodlab
/// report`).
pub const ANALYSIS_FORMAT: &str = "vodlab-analysis";

/// Why an analysis could not run or write its outputs.
#[derive(Debug, Error)]
pub enum AnalyzeError {
    /// The settings are out of range.
    #[error("invalid settings")]
    Settings(#[source] SettingsError),
    /// `--workload` is not a `vodlab gen` workload.
    #[error("{dir} is not a `vodlab gen` workload")]
    Workload {
        /// The directory.
        dir: String,
        /// What reading its manifest said.
        #[source]
        source: vodlab_workload::output::ReadError,
    },
    /// A file could not be opened, read or written; `what` says which.
    #[error("{what}")]
    Io {
        /// The step and the path.
        what: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// A JSON file could not be parsed; `what` says which.
    #[error("{what}")]
    Parse {
        /// The step and the path.
        what: String,
        /// The error.
        #[source]
        source: serde_json::Error,
    },
    /// A log's line or header could not be read (with `--strict`, any
    /// line).
    #[error("{0}")]
    Input(String),
    /// The workload spec could not be fitted.
    #[error("--fit-spec")]
    Fit(#[source] FitError),
    /// A result could not be written as JSON.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> AnalyzeError {
    let what = what.into();
    move |source| AnalyzeError::Io { what, source }
}

/// Hears of lines left out.
pub trait AnalyzeObserver {
    /// A line could not be read and is skipped (the first ten only;
    /// `message` names the file and the line).
    fn unreadable(&mut self, _message: &str) {}
}

/// An observer that hears nothing.
impl AnalyzeObserver for () {}

/// What an analysis found.
#[derive(Debug)]
pub struct Analyzed {
    /// The analysis.
    pub analysis: Analysis,
    /// Its text: a line of counts, the tables and, with `--fit-spec`, a
    /// line on the spec written.
    pub text: String,
}

/// Reads a `vodlab gen` workload's catalog.
pub fn load_catalog(dir: &Path) -> Result<Catalog, AnalyzeError> {
    vodlab_workload::output::read_manifest(dir).map_err(|source| AnalyzeError::Workload {
        dir: dir.display().to_string(),
        source,
    })?;
    let p = dir.join("catalog.json");
    let text = std::fs::read(&p).map_err(io(format!("reading {}", p.display())))?;
    serde_json::from_slice(&text).map_err(|source| AnalyzeError::Parse {
        what: format!("parsing {}", p.display()),
        source,
    })
}

/// Runs `vodlab analyze` over `a.logs` (not `--print-nginx-format`, the
/// binary's): reads every line, writes the fitted spec when asked, and
/// returns the analysis with its text.
pub fn run(a: &AnalyzeArgs, obs: &mut impl AnalyzeObserver) -> Result<Analyzed, AnalyzeError> {
    let s = a.settings();
    let mut an = Analyzer::new(s.clone()).map_err(AnalyzeError::Settings)?;
    let catalog = match &a.workload {
        Some(d) => Some(load_catalog(d)?),
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
                File::open(path).map_err(io(format!("opening {name}")))?,
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
                .map_err(io(format!("reading {name}")))?;
            if got == 0 {
                break;
            }
            n += 1;
            let bytes = buf.strip_suffix(b"\n").unwrap_or(&buf);
            lines += 1;
            let Ok(text) = std::str::from_utf8(bytes) else {
                bad += 1;
                if a.strict {
                    return Err(AnalyzeError::Input(format!("{name}: line {n}: not UTF-8")));
                }
                if bad <= 10 {
                    obs.unreadable(&format!("{name}: line {n}: not UTF-8, skipped"));
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
                    .map_err(|e| AnalyzeError::Input(format!("{name}: {e}")))?;
                    format.insert(f)
                }
            };
            match f.parse(text, n) {
                Ok(Line::Request(mut r, file)) => {
                    // a CSV's own column first; vodlab's log has the
                    // client's CMCD `br`, which the catalog overrides
                    if r.bitrate_kbps.is_none() || *f == LogFormat::Vodlab {
                        if let Some(m) = &rates {
                            if let Some(&b) = m.get(&key(file.0)) {
                                r.bitrate_kbps = Some(b);
                            }
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
                        return Err(AnalyzeError::Input(format!("{name}: {e}")));
                    }
                    if bad <= 10 {
                        obs.unreadable(&format!("{name}: {e}; skipped"));
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
        let fitted = f.finish().map_err(AnalyzeError::Fit)?;
        if let Some(dir) = out.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(io(format!("creating {}", dir.display())))?;
        }
        std::fs::write(out, fitted.to_toml()).map_err(io(format!("writing {}", out.display())))?;
        text.push_str(&format!(
            "\nfitted workload spec written to {} (vodlab gen --spec): Zipf alpha {:.3}, {} titles, {} sessions at {:.4}/s\n",
            out.display(),
            fitted.alpha_mle,
            fitted.spec.catalog.titles,
            fitted.spec.sessions.count,
            fitted.sessions_per_s
        ));
    }
    Ok(Analyzed { analysis, text })
}

impl Analyzed {
    /// Writes `analysis.json` (tagged with [`ANALYSIS_FORMAT`]) and
    /// `summary.txt` (the text) into `dir`, creating it.
    pub fn write(&self, dir: &Path) -> Result<(), AnalyzeError> {
        std::fs::create_dir_all(dir).map_err(io(format!("creating {}", dir.display())))?;
        let p = dir.join("analysis.json");
        // tagged so that `vodlab report` tells it from other results
        #[derive(serde::Serialize)]
        struct Tagged<'a> {
            format: &'static str,
            #[serde(flatten)]
            analysis: &'a Analysis,
        }
        let tagged = Tagged {
            format: ANALYSIS_FORMAT,
            analysis: &self.analysis,
        };
        std::fs::write(&p, serde_json::to_string_pretty(&tagged)? + "\n")
            .map_err(io(format!("writing {}", p.display())))?;
        let p = dir.join("summary.txt");
        std::fs::File::create(&p)
            .and_then(|mut f| f.write_all(self.text.as_bytes()))
            .map_err(io(format!("writing {}", p.display())))?;
        Ok(())
    }
}
