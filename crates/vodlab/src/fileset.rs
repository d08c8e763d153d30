//! `vodlab fileset create|verify|warm|cool|seqread`: the settings and the
//! work are the library's ([`vodlab_fileset::command`]); this shows
//! progress and prints the reports.

use std::io::IsTerminal;
use std::process::ExitCode;
use std::time::Instant;

use clap::Subcommand;
use vodlab_fileset::command::{self, MediaArgs, MediaKind, SetArgs};
use vodlab_fileset::progress::{ProgressLines, Unit, PLAIN_EVERY};

pub(crate) use vodlab_fileset::command::load;

/// File-set subcommands.
#[derive(Debug, Subcommand)]
pub enum FilesetCommand {
    /// Write every file the workload's catalog names, in creation order
    /// (titles in seeded random order, each title's chunks consecutive, padded),
    /// with verifiable content. Resumes an interrupted creation.
    ///
    /// Example: vodlab fileset create work/yt --root /srv/video
    #[command(verbatim_doc_comment)]
    Create {
        #[command(flatten)]
        set: SetArgs,
        /// Print the files and space needed, write nothing.
        #[arg(long)]
        dry_run: bool,
        #[command(flatten)]
        media: MediaArgs,
    },
    /// Re-read the set (or a sample) and check every byte; exits 1 on damage.
    Verify {
        #[command(flatten)]
        set: SetArgs,
        /// Check only this many files, chosen at random.
        #[arg(long, value_name = "FILES")]
        sample: Option<usize>,
    },
    /// Read the most requested chunks, most popular first, to pre-warm the
    /// page cache (the thesis warms 3,500 chunks).
    Warm {
        #[command(flatten)]
        set: SetArgs,
        /// Chunks to read.
        #[arg(long, default_value_t = 3500)]
        chunks: usize,
    },
    /// Evict the set from the page cache (sync, then POSIX_FADV_DONTNEED) so a
    /// run starts cold.
    Cool {
        #[command(flatten)]
        set: SetArgs,
    },
    /// Read every chunk the workload requests once, each title's chunks in
    /// order and titles in random order, and report MB/s: the thesis's `wc`
    /// experiment, the bound on what a server can read from this disk.
    Seqread {
        #[command(flatten)]
        set: SetArgs,
        /// Do not evict the set from the page cache first.
        #[arg(long)]
        warm_cache: bool,
    },
}

/// Progress of a long pass over the set, on stderr: indicatif's bar on a
/// terminal; otherwise (a pipe, a log file, CI) plain lines, which indicatif
/// would not draw.
enum Progress {
    Bar(indicatif::ProgressBar),
    Lines {
        what: &'static str,
        unit: Unit,
        lines: ProgressLines,
    },
}

impl Progress {
    /// Progress of `what` (e.g. "writing"), counted in `unit`.
    fn new(what: &'static str, unit: Unit) -> Self {
        if !std::io::stderr().is_terminal() {
            return Progress::Lines {
                what,
                unit,
                lines: ProgressLines::new(Instant::now(), PLAIN_EVERY),
            };
        }
        let b = indicatif::ProgressBar::new(0);
        let counts = match unit {
            Unit::Bytes => "{bytes}/{total_bytes} {binary_bytes_per_sec}",
            Unit::Files => "{pos}/{len} files",
        };
        b.set_style(
            indicatif::ProgressStyle::with_template(&format!(
                "{what} [{{bar:30}}] {counts} eta {{eta}}"
            ))
            .expect("template")
            .progress_chars("=> "),
        );
        Progress::Bar(b)
    }

    /// `done` of `total` are done.
    fn set(&mut self, done: u64, total: u64) {
        match self {
            Progress::Bar(b) => {
                b.set_length(total);
                b.set_position(done);
            }
            Progress::Lines { what, unit, lines } => {
                if let Some(l) = lines.line(what, *unit, done, total, Instant::now()) {
                    eprintln!("{l}");
                }
            }
        }
    }

    /// The pass is over: the bar is cleared (the summary follows).
    fn finish(self) {
        if let Progress::Bar(b) = self {
            b.finish_and_clear();
        }
    }
}

pub fn run(cmd: FilesetCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        FilesetCommand::Create {
            set,
            dry_run,
            media,
        } => {
            // (real media refuses --dry-run before any progress)
            let mut p = match (media.media == MediaKind::Real, dry_run) {
                (true, true) => None,
                (true, false) => Some(Progress::new("encoding", Unit::Files)),
                (false, _) => Some(Progress::new("writing", Unit::Bytes)),
            };
            let rep = command::create(&set, dry_run, &media, &mut |done, total| {
                if let Some(p) = p.as_mut() {
                    p.set(done, total)
                }
            });
            if let Some(p) = p {
                p.finish()
            }
            println!("{}", command::create_summary(&set, dry_run, &media, &rep?));
            Ok(ExitCode::SUCCESS)
        }
        FilesetCommand::Verify { set, sample } => {
            let mut p = Progress::new("verifying", Unit::Bytes);
            let rep = command::verify(&set, sample, &mut |done, total| p.set(done, total));
            p.finish();
            let rep = rep?;
            println!("{}", command::verify_summary(&set, &rep));
            Ok(ExitCode::from(u8::from(!rep.damaged.is_empty())))
        }
        FilesetCommand::Warm { set, chunks } => {
            println!("{}", command::warm_summary(&command::warm(&set, chunks)?));
            Ok(ExitCode::SUCCESS)
        }
        FilesetCommand::Cool { set } => {
            let (n, seconds) = command::cool(&set)?;
            println!("evicted {n} files from the page cache in {seconds:.2} s");
            Ok(ExitCode::SUCCESS)
        }
        FilesetCommand::Seqread { set, warm_cache } => {
            let rep = command::seqread(&set, warm_cache)?;
            println!("{}", command::seqread_summary(&rep, warm_cache));
            Ok(ExitCode::SUCCESS)
        }
    }
}
