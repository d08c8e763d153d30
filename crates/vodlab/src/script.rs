//! `vodlab script check|export` (the library loads and exports:
//! [`vodlab_workload::script::export`]).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Subcommand;
use vodlab_workload::script::export::{self, ExportFormat, Summary};

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

pub fn run(cmd: ScriptCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        ScriptCommand::Check { input } => {
            for (path, s) in export::load(&input)? {
                let m = Summary::of(&s);
                println!(
                    "{}: {} sessions, {} requests ({} range, {} paced), up to {} connection(s) per session",
                    path.display(),
                    m.sessions,
                    m.requests,
                    m.ranged,
                    m.paced,
                    m.connections
                );
            }
        }
        ScriptCommand::Export {
            input,
            to,
            output,
            session,
        } => export::export(&input, to, &output, session, |path, rep| {
            eprintln!("{}: {rep}", path.display())
        })?,
    }
    Ok(ExitCode::SUCCESS)
}
