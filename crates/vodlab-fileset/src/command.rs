//! The file-set commands on a `vodlab gen` workload directory (`vodlab
//! fileset create|verify|warm|cool|seqread`): their settings (deriving
//! clap's `Args` with the `cli` feature), loading the workload, and each
//! command's work; the caller shows progress and prints the reports.

use std::path::{Path, PathBuf};
use std::time::Instant;

use thiserror::Error;
use vodlab_workload::construct::Catalog;
use vodlab_workload::output::{read_manifest, read_workload_scripts, Manifest, ReadError};
use vodlab_workload::script::Script;

use crate::media::{RealMediaOptions, MEDIA_FILE};
use crate::progress::gib;
use crate::{CreateOptions, CreateReport, FilesetError, ReadReport, VerifyReport};

/// Why a `vodlab gen` workload directory could not be loaded.
#[derive(Debug, Error)]
pub enum LoadError {
    /// The directory holds no workload manifest.
    #[error("{} is not a `vodlab gen` workload", dir.display())]
    NotAWorkload {
        /// The directory.
        dir: PathBuf,
        /// Why.
        #[source]
        source: ReadError,
    },
    /// The catalog could not be read.
    #[error("reading {}", path.display())]
    Read {
        /// The catalog file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The catalog is not valid JSON of a catalog.
    #[error("parsing {}", path.display())]
    Parse {
        /// The catalog file.
        path: PathBuf,
        /// Why.
        #[source]
        source: serde_json::Error,
    },
}

/// Why a file-set command failed.
#[derive(Debug, Error)]
pub enum CommandError {
    /// The workload could not be loaded.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// The workload's scripts could not be read.
    #[error(transparent)]
    Scripts(#[from] ReadError),
    /// The file-set operation failed.
    #[error(transparent)]
    Fileset(#[from] FilesetError),
    /// Not enough free space for the set: nothing was written.
    #[error("{0}; nothing was written")]
    NoSpace(FilesetError),
    /// `--dry-run` with `--media real`.
    #[error("--dry-run with --media real: the sizes are known only after encoding")]
    DryRunRealMedia,
}

/// What the files hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
pub enum MediaKind {
    /// Verifiable synthetic bytes (every byte a function of seed, path, offset).
    Synthetic,
    /// A test pattern encoded by ffmpeg (H.264/AAC fMP4 a browser can play;
    /// chunked one-file-per-segment layouts only; docs/fileset.md).
    Real,
}

/// Options of `create --media real`.
#[derive(Debug)]
#[cfg_attr(feature = "cli", derive(clap::Args))]
pub struct MediaArgs {
    /// Content of the files: `synthetic` (verifiable bytes) or `real`
    /// (ffmpeg testsrc2 + sine encoded at the ladder's bit rates and picture
    /// sizes, closed GOPs of one segment, fMP4).
    #[cfg_attr(feature = "cli", arg(long, value_enum, default_value_t = MediaKind::Synthetic))]
    pub media: MediaKind,
    /// With --media real: frames per second (segment seconds x fps must be whole).
    #[cfg_attr(feature = "cli", arg(long, default_value_t = 25))]
    pub fps: u32,
    /// With --media real: AAC audio bit rate in kbit/s; 0 = no audio rendition.
    #[cfg_attr(feature = "cli", arg(long, default_value_t = 64))]
    pub audio_kbps: u32,
    /// With --media real: the ffmpeg binary.
    #[cfg_attr(feature = "cli", arg(long, default_value = "ffmpeg"))]
    pub ffmpeg: PathBuf,
}

/// Workload and root.
#[derive(Debug)]
#[cfg_attr(feature = "cli", derive(clap::Args))]
pub struct SetArgs {
    /// A `vodlab gen` directory.
    pub workload: PathBuf,
    /// Root directory of the file set (what the server serves).
    #[cfg_attr(feature = "cli", arg(long, value_name = "DIR"))]
    pub root: PathBuf,
}

/// The manifest and catalog of the `vodlab gen` workload in `dir`.
pub fn load(dir: &Path) -> Result<(Manifest, Catalog), LoadError> {
    let m = read_manifest(dir).map_err(|source| LoadError::NotAWorkload {
        dir: dir.to_path_buf(),
        source,
    })?;
    let path = dir.join("catalog.json");
    let text = std::fs::read(&path).map_err(|source| LoadError::Read {
        path: path.clone(),
        source,
    })?;
    let c: Catalog =
        serde_json::from_slice(&text).map_err(|source| LoadError::Parse { path, source })?;
    Ok((m, c))
}

/// Every session script of the workload in `dir`.
pub fn scripts(dir: &Path) -> Result<Vec<Script>, ReadError> {
    Ok(read_workload_scripts(dir)?
        .into_iter()
        .map(|(_, s)| s)
        .collect())
}

/// `create`: writes (or with `dry_run` counts) the set's files, synthetic or
/// encoded by ffmpeg as `media` says; `progress(done, total)` counts bytes
/// (synthetic) or files (real media).
pub fn create(
    set: &SetArgs,
    dry_run: bool,
    media: &MediaArgs,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<CreateReport, CommandError> {
    if media.media == MediaKind::Real {
        if dry_run {
            return Err(CommandError::DryRunRealMedia);
        }
        let (m, c) = load(&set.workload)?;
        let opts = RealMediaOptions {
            ffmpeg: media.ffmpeg.clone(),
            fps: media.fps,
            audio_kbps: media.audio_kbps,
            ..Default::default()
        };
        return Ok(crate::media::create_real(
            &set.root, &m.name, m.seed, &c, &opts, progress,
        )?);
    }
    let (m, c) = load(&set.workload)?;
    let opts = CreateOptions {
        dry_run,
        ..Default::default()
    };
    match crate::create(&set.root, &m.name, m.seed, &c, &opts, progress) {
        Err(e @ FilesetError::NoSpace { .. }) => Err(CommandError::NoSpace(e)),
        r => Ok(r?),
    }
}

/// `verify`: re-reads the set (or `sample` files) and checks every byte;
/// `progress(done, total)` counts bytes.
pub fn verify(
    set: &SetArgs,
    sample: Option<usize>,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<VerifyReport, CommandError> {
    let (_, c) = load(&set.workload)?;
    Ok(crate::verify(&set.root, &c, sample, 1, progress)?)
}

/// `warm`: reads the `chunks` most requested chunks.
pub fn warm(set: &SetArgs, chunks: usize) -> Result<ReadReport, CommandError> {
    let (_, c) = load(&set.workload)?;
    let s = scripts(&set.workload)?;
    Ok(crate::warm(&set.root, &c, &s, chunks)?)
}

/// `cool`: evicts the set from the page cache; the files advised and the
/// seconds it took.
pub fn cool(set: &SetArgs) -> Result<(u64, f64), CommandError> {
    let (_, c) = load(&set.workload)?;
    let t = Instant::now();
    let n = crate::cool(&set.root, &c)?;
    Ok((n, t.elapsed().as_secs_f64()))
}

/// `seqread`: reads every chunk the workload requests once (after evicting
/// the set unless `warm_cache`).
pub fn seqread(set: &SetArgs, warm_cache: bool) -> Result<ReadReport, CommandError> {
    let (m, c) = load(&set.workload)?;
    let s = scripts(&set.workload)?;
    if !warm_cache {
        crate::cool(&set.root, &c)?;
    }
    Ok(crate::seqread(&set.root, &c, &s, m.seed)?)
}

/// What `create` prints: a line of the set written (or, with `dry_run`, to
/// write) and one of the streaming manifests if any were written.
pub fn create_summary(
    set: &SetArgs,
    dry_run: bool,
    media: &MediaArgs,
    rep: &CreateReport,
) -> String {
    let root = set.root.display();
    if media.media == MediaKind::Real {
        return format!(
            "{root}: real media (ffmpeg testsrc2/sine, H.264{}, {} fps): {} files, {:.1} MiB in {:.1} s; {} streaming manifests; sizes recorded in {MEDIA_FILE}",
            if media.audio_kbps > 0 { " + AAC" } else { "" },
            media.fps,
            rep.files,
            rep.bytes as f64 / 1048576.0,
            rep.seconds,
            rep.manifest_files,
        );
    }
    if dry_run {
        return format!(
            "{root}: {} files, {:.2} GiB in all; {} already present; would write {:.2} GiB",
            rep.files,
            gib(rep.bytes),
            rep.kept_files,
            gib(rep.written_bytes)
        );
    }
    let mut text = format!(
        "{root}: {} files, {:.2} GiB ({} kept from an earlier run); wrote {:.2} GiB in {:.1} s, {:.0} MiB/s including the final sync",
        rep.files,
        gib(rep.bytes),
        rep.kept_files,
        gib(rep.written_bytes),
        rep.seconds,
        rep.written_bytes as f64 / 1048576.0 / rep.seconds.max(1e-9)
    );
    if rep.manifest_files > 0 {
        text += &format!(
            "\n{root}: {} streaming manifests (DASH MPDs, HLS playlists)",
            rep.manifest_files
        );
    }
    text
}

/// What `verify` prints: a `DAMAGED` line per damaged file, then the count.
pub fn verify_summary(set: &SetArgs, rep: &VerifyReport) -> String {
    let mut text = String::new();
    for d in &rep.damaged {
        text += &format!("DAMAGED {}: {}\n", d.rel, d.problem);
    }
    text + &format!(
        "{}: checked {} files, {:.2} GiB in {:.1} s: {} damaged",
        set.root.display(),
        rep.files,
        gib(rep.bytes),
        rep.seconds,
        rep.damaged.len()
    )
}

/// What `warm` prints.
pub fn warm_summary(rep: &ReadReport) -> String {
    format!(
        "warmed {} chunks, {:.1} MiB in {:.2} s ({:.0} MiB/s)",
        rep.chunks,
        rep.bytes as f64 / 1048576.0,
        rep.seconds,
        rep.mib_per_s()
    )
}

/// What `seqread` prints.
pub fn seqread_summary(rep: &ReadReport, warm_cache: bool) -> String {
    format!(
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
    )
}
