//! `vodlab script check|export`.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::{Subcommand, ValueEnum};
use vodlab_workload::output::{read_manifest, read_script_file, read_workload_scripts};
use vodlab_workload::script::{
    export_cloudsuite, export_h2load, export_httperf, write_vodlab, ExportReport, Script, Wait,
};

/// Subcommands of `vodlab script`.
#[derive(Debug, Subcommand)]
pub enum ScriptCommand {
    /// Parse a script (vodlab, httperf wsesslog or CloudSuite videosesslog) or
    /// a workload directory and print a summary; errors name line and column.
    Check {
        /// Script file or `vodlab gen` output directory.
        input: PathBuf,
    },
    /// Convert a script or workload to another tool's syntax and report what
    /// the target cannot express.
    ///
    /// Examples:
    ///   vodlab script export work/yt --to httperf -o work/yt-httperf
    ///   vodlab script export work/yt/sessions/shard-00.vsl --to h2load --session 0 -o s0.txt
    #[command(verbatim_doc_comment)]
    Export {
        /// Script file or `vodlab gen` output directory.
        input: PathBuf,
        /// Target syntax.
        #[arg(long, value_enum)]
        to: ExportFormat,
        /// Output file (for a script input or h2load) or directory (for a
        /// workload directory: one file per shard).
        /// (`--output` is an older name.)
        #[arg(short = 'o', long = "out", alias = "output", value_name = "PATH")]
        output: PathBuf,
        /// For h2load: the session id (from its `#@session id=`) or, without
        /// ids, its position; default the first session.
        #[arg(long)]
        session: Option<u64>,
    },
}

/// Export targets.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ExportFormat {
    /// vodlab's own format (lossless).
    Vodlab,
    /// httperf --wsesslog (stock httperf 0.9).
    Httperf,
    /// CloudSuite videoperf --videosesslog.
    Cloudsuite,
    /// h2load --timing-script-file (one session).
    H2load,
}

/// Scripts of a file or of every shard of a workload directory.
fn load(input: &Path) -> anyhow::Result<Vec<(PathBuf, Script)>> {
    if input.is_dir() {
        read_manifest(input).with_context(|| {
            format!(
                "{} is a directory but not a `vodlab gen` workload",
                input.display()
            )
        })?;
        Ok(read_workload_scripts(input)?)
    } else {
        Ok(vec![(input.to_path_buf(), read_script_file(input)?)])
    }
}

pub fn run(cmd: ScriptCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        ScriptCommand::Check { input } => {
            for (path, s) in load(&input)? {
                let reqs = s.request_count();
                let ranged = s
                    .sessions
                    .iter()
                    .flat_map(|x| &x.requests)
                    .filter(|r| r.range.is_some())
                    .count();
                let paced = s
                    .sessions
                    .iter()
                    .flat_map(|x| &x.requests)
                    .filter(|r| matches!(r.wait, Wait::Pacing(_)))
                    .count();
                let conns = s
                    .sessions
                    .iter()
                    .flat_map(|x| &x.requests)
                    .map(|r| r.conn)
                    .max()
                    .map_or(0, |c| c + 1);
                println!(
                    "{}: {} sessions, {} requests ({} range, {} paced), up to {} connection(s) per session",
                    path.display(),
                    s.sessions.len(),
                    reqs,
                    ranged,
                    paced,
                    conns
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        ScriptCommand::Export {
            input,
            to,
            output,
            session,
        } => export(&input, to, &output, session),
    }
}

fn convert(s: &Script, to: ExportFormat) -> (String, ExportReport) {
    match to {
        ExportFormat::Vodlab => {
            let text = write_vodlab(s);
            let rep = ExportReport {
                sessions_in: s.sessions.len(),
                sessions_out: s.sessions.len(),
                requests_out: s.request_count(),
                ..Default::default()
            };
            (text, rep)
        }
        ExportFormat::Httperf => export_httperf(s),
        ExportFormat::Cloudsuite => export_cloudsuite(s),
        ExportFormat::H2load => unreachable!("h2load exports one session"),
    }
}

fn export(
    input: &Path,
    to: ExportFormat,
    output: &Path,
    session: Option<u64>,
) -> anyhow::Result<ExitCode> {
    let scripts = load(input)?;
    if let ExportFormat::H2load = to {
        let all = scripts.iter().flat_map(|(_, s)| s.sessions.iter());
        let chosen = match session {
            None => all.clone().next(),
            Some(id) => all.clone().find(|s| s.header.id == Some(id)).or_else(|| {
                all.clone()
                    .filter(|s| s.header.id.is_none())
                    .nth(id as usize)
            }),
        }
        .with_context(|| format!("no session {} in {}", session.unwrap_or(0), input.display()))?;
        let (text, rep) = export_h2load(chosen);
        fs::write(output, text).with_context(|| format!("writing {}", output.display()))?;
        eprintln!("{}: {rep}", output.display());
        return Ok(ExitCode::SUCCESS);
    }
    if input.is_dir() {
        fs::create_dir_all(output).with_context(|| format!("creating {}", output.display()))?;
        for (path, s) in &scripts {
            let name = path.file_name().expect("shard file name");
            let dest = output.join(Path::new(name).with_extension(match to {
                ExportFormat::Httperf => "wsesslog",
                ExportFormat::Cloudsuite => "videosesslog",
                _ => "vsl",
            }));
            let (text, rep) = convert(s, to);
            fs::write(&dest, text).with_context(|| format!("writing {}", dest.display()))?;
            eprintln!("{}: {rep}", dest.display());
        }
    } else {
        let (text, rep) = convert(&scripts[0].1, to);
        fs::write(output, text).with_context(|| format!("writing {}", output.display()))?;
        eprintln!("{}: {rep}", output.display());
    }
    Ok(ExitCode::SUCCESS)
}
