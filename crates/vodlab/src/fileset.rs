//! `vodlab fileset create|verify|warm|cool|seqread`.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use clap::{Args, Subcommand};
use vodlab_fileset::{CreateOptions, FilesetError};
use vodlab_workload::construct::Catalog;
use vodlab_workload::output::{read_manifest, read_workload_scripts, Manifest};
use vodlab_workload::script::Script;

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

/// What the files hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum MediaKind {
    /// Verifiable synthetic bytes (every byte a function of seed, path, offset).
    Synthetic,
    /// A test pattern encoded by ffmpeg (H.264/AAC fMP4 a browser can play;
    /// chunked one-file-per-segment layouts only; docs/fileset.md).
    Real,
}

/// Options of `create --media real`.
#[derive(Debug, Args)]
pub struct MediaArgs {
    /// Content of the files: `synthetic` (verifiable bytes) or `real`
    /// (ffmpeg testsrc2 + sine encoded at the ladder's bit rates and picture
    /// sizes, closed GOPs of one segment, fMP4).
    #[arg(long, value_enum, default_value_t = MediaKind::Synthetic)]
    pub media: MediaKind,
    /// With --media real: frames per second (segment seconds x fps must be whole).
    #[arg(long, default_value_t = 25)]
    pub fps: u32,
    /// With --media real: AAC audio bit rate in kbit/s; 0 = no audio rendition.
    #[arg(long, default_value_t = 64)]
    pub audio_kbps: u32,
    /// With --media real: the ffmpeg binary.
    #[arg(long, default_value = "ffmpeg")]
    pub ffmpeg: PathBuf,
}

/// Workload and root.
#[derive(Debug, Args)]
pub struct SetArgs {
    /// A `vodlab gen` directory.
    pub workload: PathBuf,
    /// Root directory of the file set (what the server serves).
    #[arg(long, value_name = "DIR")]
    pub root: PathBuf,
}

pub(crate) fn load(dir: &Path) -> anyhow::Result<(Manifest, Catalog)> {
    let m = read_manifest(dir)
        .with_context(|| format!("{} is not a `vodlab gen` workload", dir.display()))?;
    let p = dir.join("catalog.json");
    let text = std::fs::read(&p).with_context(|| format!("reading {}", p.display()))?;
    let c: Catalog =
        serde_json::from_slice(&text).with_context(|| format!("parsing {}", p.display()))?;
    Ok((m, c))
}

fn scripts(dir: &Path) -> anyhow::Result<Vec<Script>> {
    Ok(read_workload_scripts(dir)?
        .into_iter()
        .map(|(_, s)| s)
        .collect())
}

fn bar(total: u64, what: &str) -> indicatif::ProgressBar {
    let b = indicatif::ProgressBar::new(total);
    if std::io::stderr().is_terminal() {
        b.set_style(
            indicatif::ProgressStyle::with_template(&format!(
                "{what} [{{bar:30}}] {{bytes}}/{{total_bytes}} {{binary_bytes_per_sec}} eta {{eta}}"
            ))
            .expect("template")
            .progress_chars("=> "),
        );
    } else {
        b.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    b
}

fn gib(b: u64) -> f64 {
    b as f64 / 1073741824.0
}

pub fn run(cmd: FilesetCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        FilesetCommand::Create {
            set,
            dry_run,
            media,
        } if media.media == MediaKind::Real => {
            anyhow::ensure!(
                !dry_run,
                "--dry-run with --media real: the sizes are known only after encoding"
            );
            let (m, c) = load(&set.workload)?;
            let opts = vodlab_fileset::media::RealMediaOptions {
                ffmpeg: media.ffmpeg.clone(),
                fps: media.fps,
                audio_kbps: media.audio_kbps,
                ..Default::default()
            };
            let rep = vodlab_fileset::media::create_real(
                &set.root,
                &m.name,
                m.seed,
                &c,
                &opts,
                &mut |_, _| {},
            )?;
            println!(
                "{}: real media (ffmpeg testsrc2/sine, H.264{}, {} fps): {} files, {:.1} MiB in {:.1} s; {} streaming manifests; sizes recorded in {}",
                set.root.display(),
                if media.audio_kbps > 0 { " + AAC" } else { "" },
                media.fps,
                rep.files,
                rep.bytes as f64 / 1048576.0,
                rep.seconds,
                rep.manifest_files,
                vodlab_fileset::media::MEDIA_FILE
            );
            Ok(ExitCode::SUCCESS)
        }
        FilesetCommand::Create { set, dry_run, .. } => {
            let (m, c) = load(&set.workload)?;
            let opts = CreateOptions {
                dry_run,
                ..Default::default()
            };
            let b = bar(0, "writing");
            let rep = vodlab_fileset::create(
                &set.root,
                &m.name,
                m.seed,
                &c,
                &opts,
                &mut |done, total| {
                    b.set_length(total);
                    b.set_position(done);
                },
            );
            b.finish_and_clear();
            let rep = match rep {
                Err(e @ FilesetError::NoSpace { .. }) => anyhow::bail!("{e}; nothing was written"),
                r => r?,
            };
            if dry_run {
                println!(
                    "{}: {} files, {:.2} GiB in all; {} already present; would write {:.2} GiB",
                    set.root.display(),
                    rep.files,
                    gib(rep.bytes),
                    rep.kept_files,
                    gib(rep.written_bytes)
                );
            } else {
                println!(
                    "{}: {} files, {:.2} GiB ({} kept from an earlier run); wrote {:.2} GiB in {:.1} s, {:.0} MiB/s including the final sync",
                    set.root.display(),
                    rep.files,
                    gib(rep.bytes),
                    rep.kept_files,
                    gib(rep.written_bytes),
                    rep.seconds,
                    rep.written_bytes as f64 / 1048576.0 / rep.seconds.max(1e-9)
                );
                if rep.manifest_files > 0 {
                    println!(
                        "{}: {} streaming manifests (DASH MPDs, HLS playlists)",
                        set.root.display(),
                        rep.manifest_files
                    );
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        FilesetCommand::Verify { set, sample } => {
            let (_, c) = load(&set.workload)?;
            let b = bar(0, "verifying");
            let rep = vodlab_fileset::verify(&set.root, &c, sample, 1, &mut |done, total| {
                b.set_length(total);
                b.set_position(done);
            })?;
            b.finish_and_clear();
            for d in &rep.damaged {
                println!("DAMAGED {}: {}", d.rel, d.problem);
            }
            println!(
                "{}: checked {} files, {:.2} GiB in {:.1} s: {} damaged",
                set.root.display(),
                rep.files,
                gib(rep.bytes),
                rep.seconds,
                rep.damaged.len()
            );
            Ok(if rep.damaged.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
        FilesetCommand::Warm { set, chunks } => {
            let (_, c) = load(&set.workload)?;
            let s = scripts(&set.workload)?;
            let rep = vodlab_fileset::warm(&set.root, &c, &s, chunks)?;
            println!(
                "warmed {} chunks, {:.1} MiB in {:.2} s ({:.0} MiB/s)",
                rep.chunks,
                rep.bytes as f64 / 1048576.0,
                rep.seconds,
                rep.mib_per_s()
            );
            Ok(ExitCode::SUCCESS)
        }
        FilesetCommand::Cool { set } => {
            let (_, c) = load(&set.workload)?;
            let t = Instant::now();
            let n = vodlab_fileset::cool(&set.root, &c)?;
            println!(
                "evicted {n} files from the page cache in {:.2} s",
                t.elapsed().as_secs_f64()
            );
            Ok(ExitCode::SUCCESS)
        }
        FilesetCommand::Seqread { set, warm_cache } => {
            let (m, c) = load(&set.workload)?;
            let s = scripts(&set.workload)?;
            if !warm_cache {
                vodlab_fileset::cool(&set.root, &c)?;
            }
            let rep = vodlab_fileset::seqread(&set.root, &c, &s, m.seed)?;
            println!(
                "read {} chunks, {:.2} GiB in {:.1} s: {:.1} MiB/s ({})",
                rep.chunks,
                gib(rep.bytes),
                rep.seconds,
                rep.mib_per_s(),
                if warm_cache {
                    "page cache as it was"
                } else {
                    "from a cold page cache"
                }
            );
            Ok(ExitCode::SUCCESS)
        }
    }
}
