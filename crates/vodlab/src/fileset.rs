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

/// What a pass counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unit {
    Bytes,
    Files,
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

/// Most time between two plain progress lines.
const PLAIN_EVERY: std::time::Duration = std::time::Duration::from_secs(10);

/// When to print a plain progress line: at the first report, each time
/// another tenth is done, and at least every `every` in between.
#[derive(Debug)]
struct ProgressLines {
    start: Instant,
    last: Instant,
    /// Tenths done at the last line printed (`None`: none printed yet).
    tenths: Option<u64>,
    every: std::time::Duration,
}

impl ProgressLines {
    fn new(start: Instant, every: std::time::Duration) -> Self {
        ProgressLines {
            start,
            last: start,
            tenths: None,
            every,
        }
    }

    /// The line to print for `done` of `total` at `now`, if one is due.
    fn line(
        &mut self,
        what: &str,
        unit: Unit,
        done: u64,
        total: u64,
        now: Instant,
    ) -> Option<String> {
        if total == 0 {
            return None;
        }
        let done = done.min(total);
        let tenths = done * 10 / total;
        let due = match self.tenths {
            None => true,
            Some(t) => tenths > t || now.duration_since(self.last) >= self.every,
        };
        if !due {
            return None;
        }
        self.tenths = Some(tenths);
        self.last = now;
        let pct = 100.0 * done as f64 / total as f64;
        let secs = now.duration_since(self.start).as_secs_f64();
        let rate = done as f64 / secs.max(1e-9);
        let eta = if done > 0 && done < total && secs > 0.0 {
            format!(", eta {:.0} s", (total - done) as f64 / rate)
        } else {
            String::new()
        };
        Some(match unit {
            Unit::Bytes => format!(
                "{what}: {pct:.0} % ({:.2} of {:.2} GiB, {:.0} MiB/s{eta})",
                gib(done),
                gib(total),
                rate / 1048576.0
            ),
            Unit::Files => format!("{what}: {pct:.0} % ({done} of {total} files{eta})"),
        })
    }
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
            let mut p = Progress::new("encoding", Unit::Files);
            let rep = vodlab_fileset::media::create_real(
                &set.root,
                &m.name,
                m.seed,
                &c,
                &opts,
                &mut |done, total| p.set(done, total),
            );
            p.finish();
            let rep = rep?;
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
            let mut p = Progress::new("writing", Unit::Bytes);
            let rep = vodlab_fileset::create(
                &set.root,
                &m.name,
                m.seed,
                &c,
                &opts,
                &mut |done, total| p.set(done, total),
            );
            p.finish();
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
            let mut p = Progress::new("verifying", Unit::Bytes);
            let rep = vodlab_fileset::verify(&set.root, &c, sample, 1, &mut |done, total| {
                p.set(done, total)
            });
            p.finish();
            let rep = rep?;
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

#[cfg(test)]
mod tests {
    use super::{ProgressLines, Unit};
    use std::time::{Duration, Instant};

    /// Feeds `steps` of (done, seconds after the start) and returns the
    /// lines printed.
    fn lines(total: u64, steps: &[(u64, u64)]) -> Vec<String> {
        let t0 = Instant::now();
        let mut p = ProgressLines::new(t0, Duration::from_secs(10));
        steps
            .iter()
            .filter_map(|&(done, s)| {
                p.line(
                    "writing",
                    Unit::Bytes,
                    done,
                    total,
                    t0 + Duration::from_secs(s),
                )
            })
            .collect()
    }

    #[test]
    fn a_line_at_the_start_and_at_each_tenth() {
        let total = 1000 << 20;
        // 1 MiB steps, 100 MiB/s
        let steps: Vec<(u64, u64)> = (0..=1000u64).map(|i| (i << 20, i / 100)).collect();
        let l = lines(total, &steps);
        assert_eq!(l.len(), 11, "{l:#?}");
        assert!(
            l[0].starts_with("writing: 0 % (0.00 of 0.98 GiB"),
            "{}",
            l[0]
        );
        assert!(
            l[5].starts_with("writing: 50 % (0.49 of 0.98 GiB"),
            "{}",
            l[5]
        );
        assert!(l[5].contains("100 MiB/s, eta 5 s"), "{}", l[5]);
        assert!(l[10].starts_with("writing: 100 %"), "{}", l[10]);
        assert!(!l[10].contains("eta"), "{}", l[10]);
    }

    #[test]
    fn a_slow_pass_gets_a_line_every_ten_seconds_between_tenths() {
        // 1 % per 5 s: 10 % takes 50 s, so lines at 0, 10, 20, ... s
        let steps: Vec<(u64, u64)> = (0..=20u64).map(|i| (i, i * 5)).collect();
        let l = lines(100, &steps);
        assert_eq!(l.len(), 11, "{l:#?}");
        assert!(l[1].starts_with("writing: 2 %"), "{}", l[1]);
        assert!(l.iter().filter(|s| s.starts_with("writing: 10 %")).count() == 1);
    }

    #[test]
    fn nothing_to_do_prints_nothing_and_files_are_counted() {
        assert!(lines(0, &[(0, 0), (0, 1)]).is_empty());
        let t0 = Instant::now();
        let mut p = ProgressLines::new(t0, Duration::from_secs(10));
        let l = p
            .line("encoding", Unit::Files, 3, 4, t0 + Duration::from_secs(3))
            .unwrap();
        assert_eq!(l, "encoding: 75 % (3 of 4 files, eta 1 s)");
    }
}
