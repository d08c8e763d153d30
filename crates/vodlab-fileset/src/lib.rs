//! # vodlab-fileset
//!
//! The bytes a server streams. A file set holds every file a workload's
//! catalog names, written in the catalog's creation order (titles in a seeded
//! random order, each title's chunks one after another, padded as the catalog
//! says), with verifiable content ([`vodlab_workload::content`]).
//!
//! Operations: [`create`] (resumable, checks free space), [`verify`],
//! [`warm`] (read the most popular chunks), [`cool`] (evict from the page
//! cache), [`seqread`] (the thesis's `wc` experiment) and [`resident_bytes`];
//! [`command`] runs them on a `vodlab gen` workload directory as `vodlab
//! fileset` does, [`progress`] words a pass's plain progress lines.

#![warn(missing_docs)]

pub mod command;
mod manifests;
pub mod media;
pub mod progress;

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Instant;

use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use vodlab_workload::construct::Catalog;
use vodlab_workload::content::{self, file_key};
use vodlab_workload::script::Script;

/// Name of the marker file in a file-set root.
pub const MANIFEST: &str = "fileset.json";
const WRITE_BUF: usize = 4 << 20;

/// Errors of file-set operations.
#[derive(Debug, thiserror::Error)]
pub enum FilesetError {
    /// An I/O error on a path.
    #[error("{path}: {source}")]
    Io {
        /// Path.
        path: PathBuf,
        /// Error.
        source: io::Error,
    },
    /// The root holds files that are not a vodlab file set.
    #[error("{0}: directory is not empty and holds no {MANIFEST}: not a vodlab file set; choose an empty directory")]
    Foreign(PathBuf),
    /// The root holds the file set of another workload.
    #[error("{path}: holds a file set of workload `{other}` (seed {seed}), not this one; choose another directory")]
    OtherWorkload {
        /// Root.
        path: PathBuf,
        /// Its workload.
        other: String,
        /// Its seed.
        seed: u64,
    },
    /// Not enough free space.
    #[error("{path}: needs {need} bytes ({:.2} GiB) but only {free} ({:.2} GiB) are free", *need as f64 / 1073741824.0, *free as f64 / 1073741824.0)]
    NoSpace {
        /// Root.
        path: PathBuf,
        /// Bytes needed.
        need: u64,
        /// Bytes free.
        free: u64,
    },
    /// A root without a manifest where one is needed.
    #[error("{0}: no {MANIFEST}: not a vodlab file set (create one with `vodlab fileset create`)")]
    NotAFileset(PathBuf),
    /// A path of the set names something other than a regular file (a
    /// FIFO, a device, a directory): never opened for I/O, so it cannot block.
    #[error("{path}: is {kind}, not a regular file")]
    NotAFile {
        /// Path.
        path: PathBuf,
        /// What it is.
        kind: &'static str,
    },
    /// Real media (`--media real`) cannot be made: unsupported layout,
    /// ffmpeg missing or failing, segments not as the catalog counts them.
    #[error("real media: {reason}")]
    RealMedia {
        /// Why.
        reason: String,
    },
    /// The manifest is malformed.
    #[error("{path}: {reason}")]
    Manifest {
        /// File.
        path: PathBuf,
        /// Why.
        reason: String,
    },
}

/// What a non-regular file-system object is, for messages.
fn kind_of(ft: fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if ft.is_fifo() {
        "a FIFO (named pipe)"
    } else if ft.is_socket() {
        "a socket"
    } else if ft.is_char_device() {
        "a character device"
    } else if ft.is_block_device() {
        "a block device"
    } else if ft.is_dir() {
        "a directory"
    } else {
        "not a regular file"
    }
}

/// Opens a file of the set for reading, refusing anything but a regular
/// file. `O_NONBLOCK` makes the open of a FIFO without a writer (or of a
/// device) return at once instead of blocking; the type is then checked on
/// the descriptor, so nothing can swap it between check and use.
fn open_regular(path: &Path) -> Result<File, FilesetError> {
    let f = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(io_err(path))?;
    let ft = f.metadata().map_err(io_err(path))?.file_type();
    if !ft.is_file() {
        return Err(FilesetError::NotAFile {
            path: path.to_path_buf(),
            kind: kind_of(ft),
        });
    }
    Ok(f)
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> FilesetError + '_ {
    move |source| FilesetError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The `fileset.json` marker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// `"vodlab-fileset"`.
    pub format: String,
    /// 1.
    pub version: u32,
    /// Workload name.
    pub workload: String,
    /// Content seed (the workload's seed).
    pub seed: u64,
    /// FNV-1a of every (path, size) in creation order: identifies the catalog.
    pub digest: String,
    /// Files.
    pub files: u64,
    /// Bytes.
    pub bytes: u64,
    /// All files written and synced.
    pub complete: bool,
}

/// One file of the set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Path relative to the root.
    pub rel: String,
    /// Size in bytes.
    pub size: u64,
}

/// Every file in creation order.
pub fn entries(catalog: &Catalog) -> Vec<Entry> {
    catalog
        .files()
        .map(|(rel, size)| Entry { rel, size })
        .collect()
}

fn digest(entries: &[Entry]) -> String {
    let h = entries.iter().fold(content::FNV_BASIS, |h, e| {
        content::fnv1a(h, e.rel.bytes().chain(e.size.to_le_bytes()))
    });
    format!("{h:016x}")
}

/// Reads a root's manifest.
pub fn read_manifest(root: &Path) -> Result<Manifest, FilesetError> {
    let p = root.join(MANIFEST);
    let text = match fs::read_to_string(&p) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(FilesetError::NotAFileset(root.to_path_buf()))
        }
        Err(e) => return Err(io_err(&p)(e)),
    };
    serde_json::from_str(&text).map_err(|e| FilesetError::Manifest {
        path: p,
        reason: e.to_string(),
    })
}

/// The manifest of a complete file set of these entries (what [`create`]
/// leaves in `fileset.json` when it finishes).
pub fn manifest_of(workload: &str, seed: u64, list: &[Entry]) -> Manifest {
    Manifest {
        format: "vodlab-fileset".into(),
        version: 1,
        workload: workload.to_string(),
        seed,
        digest: digest(list),
        files: list.len() as u64,
        bytes: list.iter().map(|e| e.size).sum(),
        complete: true,
    }
}

/// The text of `fileset.json` for a manifest, byte for byte as [`create`]
/// writes it.
pub fn manifest_text(m: &Manifest) -> String {
    serde_json::to_string_pretty(m).expect("serializes") + "\n"
}

fn write_manifest(root: &Path, m: &Manifest) -> Result<(), FilesetError> {
    let p = root.join(MANIFEST);
    let tmp = root.join(".fileset.json.tmp");
    fs::write(&tmp, manifest_text(m)).map_err(io_err(&tmp))?;
    fs::rename(&tmp, &p).map_err(io_err(&p))
}

/// Free bytes for an unprivileged writer on the filesystem holding `path`.
pub fn free_bytes(path: &Path) -> io::Result<u64> {
    let mut p = path.to_path_buf();
    while !p.exists() {
        if !p.pop() {
            p = PathBuf::from(".");
            break;
        }
    }
    let c = std::ffi::CString::new(p.as_os_str().as_bytes()).map_err(io::Error::other)?;
    // SAFETY: statvfs writes into the zeroed struct we pass
    unsafe {
        let mut s: libc::statvfs = std::mem::zeroed();
        if libc::statvfs(c.as_ptr(), &mut s) != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(s.f_bavail as u64 * s.f_frsize as u64)
    }
}

/// What [`create`] did or would do.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CreateReport {
    /// Files in the set.
    pub files: u64,
    /// Bytes in the set.
    pub bytes: u64,
    /// Files already present and kept (resume).
    pub kept_files: u64,
    /// Bytes written now.
    pub written_bytes: u64,
    /// Streaming manifests written (DASH MPDs and HLS playlists; written
    /// again whenever the media is complete).
    pub manifest_files: u64,
    /// Seconds spent writing (including the final sync).
    pub seconds: f64,
}

/// Options of [`create`].
#[derive(Debug, Clone, Default)]
pub struct CreateOptions {
    /// Only compute what would be written.
    pub dry_run: bool,
    /// Stop after this many files (simulates an interruption, for tests).
    pub stop_after_files: Option<u64>,
}

/// Creates (or resumes creating) the file set of `catalog` under `root`.
/// `progress(done_bytes, total_to_write)` is called as data is written.
pub fn create(
    root: &Path,
    workload: &str,
    seed: u64,
    catalog: &Catalog,
    opts: &CreateOptions,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<CreateReport, FilesetError> {
    let list = entries(catalog);
    let manifest = Manifest {
        complete: false,
        ..manifest_of(workload, seed, &list)
    };
    // where to start
    let mut start = 0usize;
    if root.exists() {
        match read_manifest(root) {
            Ok(m) => {
                if m.digest != manifest.digest || m.seed != seed {
                    return Err(FilesetError::OtherWorkload {
                        path: root.to_path_buf(),
                        other: m.workload,
                        seed: m.seed,
                    });
                }
                start = resume_point(root, seed, &list);
            }
            Err(FilesetError::NotAFileset(_)) => {
                if fs::read_dir(root).map_err(io_err(root))?.next().is_some() {
                    return Err(FilesetError::Foreign(root.to_path_buf()));
                }
            }
            Err(e) => return Err(e),
        }
    }
    let need: u64 = list[start..].iter().map(|e| e.size).sum();
    let mut report = CreateReport {
        files: manifest.files,
        bytes: manifest.bytes,
        kept_files: start as u64,
        ..Default::default()
    };
    if opts.dry_run {
        report.written_bytes = need;
        return Ok(report);
    }
    let free = free_bytes(root).map_err(io_err(root))?;
    // keep 1 % (at least 64 MiB) of headroom for metadata
    let margin = (need / 100).max(64 << 20);
    if need > 0 && need + margin > free {
        return Err(FilesetError::NoSpace {
            path: root.to_path_buf(),
            need: need + margin,
            free,
        });
    }
    fs::create_dir_all(root).map_err(io_err(root))?;
    // synthetic content replaces a real-media set of the same workload
    let _ = fs::remove_file(root.join(media::MEDIA_FILE));
    write_manifest(root, &manifest)?;
    let t0 = Instant::now();
    let end = match opts.stop_after_files {
        Some(n) => (start + n as usize).min(list.len()),
        None => list.len(),
    };
    report.written_bytes = write_files(root, seed, &list[start..end], need, progress)?;
    if end == list.len() {
        let (files, bytes) = manifests::write_all(root, catalog)?;
        report.manifest_files = files;
        report.written_bytes += bytes;
        sync_fs(root)?;
        write_manifest(
            root,
            &Manifest {
                complete: true,
                ..manifest
            },
        )?;
    }
    report.seconds = t0.elapsed().as_secs_f64();
    Ok(report)
}

/// Index of the first file to (re)write: the first missing or short file,
/// or one before it when that file's last block does not verify.
fn resume_point(root: &Path, seed: u64, list: &[Entry]) -> usize {
    let first_bad = list
        .iter()
        .position(|e| fs::metadata(root.join(&e.rel)).map_or(true, |m| m.len() != e.size))
        .unwrap_or(list.len());
    if first_bad > 0 {
        let prev = &list[first_bad - 1];
        if !tail_ok(&root.join(&prev.rel), seed, prev) {
            return first_bad - 1;
        }
    }
    first_bad
}

fn tail_ok(path: &Path, seed: u64, e: &Entry) -> bool {
    let n = e.size.min(content::BLOCK as u64);
    let mut buf = vec![0u8; n as usize];
    let ok = open_regular(path)
        .map_err(io::Error::other)
        .and_then(|mut f| {
            f.seek(SeekFrom::Start(e.size - n))?;
            f.read_exact(&mut buf)
        });
    ok.is_ok() && content::check(seed, file_key(&e.rel), e.size - n, &buf).is_ok()
}

/// Generates content on this thread and writes it on another, in large
/// sequential writes, so generation and I/O overlap.
fn write_files(
    root: &Path,
    seed: u64,
    list: &[Entry],
    total: u64,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<u64, FilesetError> {
    enum Msg {
        Open(PathBuf),
        Data(Vec<u8>),
    }
    let (tx, rx) = mpsc::sync_channel::<Msg>(4);
    let (back_tx, back_rx) = mpsc::channel::<Vec<u8>>();
    let writer = std::thread::spawn(move || -> Result<(), FilesetError> {
        let mut file: Option<(PathBuf, File)> = None;
        for m in rx {
            match m {
                Msg::Open(p) => {
                    if let Some(dir) = p.parent() {
                        fs::create_dir_all(dir).map_err(io_err(dir))?;
                    }
                    // a FIFO in the way: O_NONBLOCK makes its open fail (no
                    // reader) or return, and the type check refuses it
                    let f = OpenOptions::new()
                        .write(true)
                        .create(true)
                        .truncate(true)
                        .custom_flags(libc::O_NONBLOCK)
                        .open(&p)
                        .map_err(io_err(&p))?;
                    let ft = f.metadata().map_err(io_err(&p))?.file_type();
                    if !ft.is_file() {
                        return Err(FilesetError::NotAFile {
                            path: p,
                            kind: kind_of(ft),
                        });
                    }
                    file = Some((p, f));
                }
                Msg::Data(buf) => {
                    let (p, f) = file.as_mut().expect("opened");
                    f.write_all(&buf).map_err(io_err(p))?;
                    let _ = back_tx.send(buf);
                }
            }
        }
        Ok(())
    });
    let mut done = 0u64;
    let mut result = Ok(());
    'files: for e in list {
        if tx.send(Msg::Open(root.join(&e.rel))).is_err() {
            break;
        }
        let key = file_key(&e.rel);
        let mut off = 0u64;
        while off < e.size {
            let n = (e.size - off).min(WRITE_BUF as u64) as usize;
            let mut buf = back_rx.try_recv().unwrap_or_default();
            buf.resize(n, 0);
            content::fill(seed, key, off, &mut buf);
            if tx.send(Msg::Data(buf)).is_err() {
                break 'files;
            }
            off += n as u64;
            done += n as u64;
            progress(done, total);
        }
    }
    drop(tx);
    if let Err(e) = writer.join().expect("writer thread") {
        result = Err(e);
    }
    result.map(|_| done)
}

fn sync_fs(root: &Path) -> Result<(), FilesetError> {
    let f = File::open(root).map_err(io_err(root))?;
    // SAFETY: syncfs on an open descriptor
    if unsafe { libc::syncfs(f.as_raw_fd()) } != 0 {
        return Err(io_err(root)(io::Error::last_os_error()));
    }
    Ok(())
}

/// One damaged file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Damage {
    /// Path relative to the root.
    pub rel: String,
    /// What is wrong.
    pub problem: String,
}

/// What [`verify`] found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct VerifyReport {
    /// Files checked.
    pub files: u64,
    /// Bytes read.
    pub bytes: u64,
    /// Damaged files.
    pub damaged: Vec<Damage>,
    /// Seconds.
    pub seconds: f64,
}

/// Re-reads the set (or `sample` files chosen with `sample_seed`) and checks
/// every byte; without a sample, the streaming manifests are compared with
/// the catalog's text too.
pub fn verify(
    root: &Path,
    catalog: &Catalog,
    sample: Option<usize>,
    sample_seed: u64,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<VerifyReport, FilesetError> {
    let m = read_manifest(root)?;
    let mut list = entries(catalog);
    if m.digest != digest(&list) {
        return Err(FilesetError::OtherWorkload {
            path: root.to_path_buf(),
            other: m.workload,
            seed: m.seed,
        });
    }
    if media::is_real(root) {
        return media::verify_real(root, catalog);
    }
    if let Some(k) = sample {
        list.shuffle(&mut ChaCha8Rng::seed_from_u64(sample_seed));
        list.truncate(k);
    }
    let total: u64 = list.iter().map(|e| e.size).sum();
    let t0 = Instant::now();
    let mut rep = VerifyReport::default();
    let mut buf = vec![0u8; 1 << 20];
    for e in &list {
        rep.files += 1;
        let path = root.join(&e.rel);
        let mut f = match open_regular(&path) {
            Ok(f) => f,
            Err(FilesetError::NotAFile { kind, .. }) => {
                rep.damaged.push(Damage {
                    rel: e.rel.clone(),
                    problem: format!("{kind}, not a regular file"),
                });
                continue;
            }
            Err(FilesetError::Io { source, .. }) => {
                rep.damaged.push(Damage {
                    rel: e.rel.clone(),
                    problem: format!("cannot open: {source}"),
                });
                continue;
            }
            Err(other) => return Err(other),
        };
        let len = f.metadata().map(|m| m.len()).unwrap_or(0);
        if len != e.size {
            rep.damaged.push(Damage {
                rel: e.rel.clone(),
                problem: format!("size {len}, the catalog says {}", e.size),
            });
            continue;
        }
        let key = file_key(&e.rel);
        let mut off = 0u64;
        while off < e.size {
            let n = (e.size - off).min(buf.len() as u64) as usize;
            if let Err(err) = f.read_exact(&mut buf[..n]) {
                rep.damaged.push(Damage {
                    rel: e.rel.clone(),
                    problem: format!("read error at {off}: {err}"),
                });
                break;
            }
            if let Err(bad) = content::check(m.seed, key, off, &buf[..n]) {
                rep.damaged.push(Damage {
                    rel: e.rel.clone(),
                    problem: format!("wrong content at byte {bad}"),
                });
                break;
            }
            off += n as u64;
            rep.bytes += n as u64;
            progress(rep.bytes, total);
        }
    }
    if sample.is_none() {
        let (files, bytes) = manifests::verify_all(root, catalog, &mut rep.damaged);
        rep.files += files;
        rep.bytes += bytes;
    }
    rep.seconds = t0.elapsed().as_secs_f64();
    Ok(rep)
}

/// A request unit of a workload: a file and a byte range in it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Chunk {
    /// Path relative to the root.
    pub rel: String,
    /// First byte.
    pub start: u64,
    /// Bytes.
    pub len: u64,
}

fn chunk_of(
    path: &str,
    range: Option<vodlab_workload::script::ByteRange>,
    sizes: &HashMap<String, u64>,
) -> Option<Chunk> {
    let rel = path.trim_start_matches('/').to_string();
    let size = *sizes.get(&rel)?;
    let (start, end) = match range {
        Some(r) => (r.start, r.end.unwrap_or(size - 1).min(size - 1)),
        None => (0, size - 1),
    };
    (start <= end).then_some(Chunk {
        rel,
        start,
        len: end - start + 1,
    })
}

/// The chunks the scripts request, most requested first (ties: file order).
pub fn popular_chunks(catalog: &Catalog, scripts: &[Script]) -> Vec<(Chunk, u64)> {
    let sizes: HashMap<String, u64> = catalog.files().collect();
    let mut counts: HashMap<Chunk, u64> = HashMap::new();
    for s in scripts {
        for sess in &s.sessions {
            for r in &sess.requests {
                if let Some(c) = chunk_of(&r.path, r.range, &sizes) {
                    *counts.entry(c).or_default() += 1;
                }
            }
        }
    }
    let mut v: Vec<(Chunk, u64)> = counts.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    v
}

/// What a read pass did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReadReport {
    /// Chunks read.
    pub chunks: u64,
    /// Bytes read.
    pub bytes: u64,
    /// Seconds.
    pub seconds: f64,
}

impl ReadReport {
    /// MiB per second.
    pub fn mib_per_s(&self) -> f64 {
        self.bytes as f64 / 1048576.0 / self.seconds.max(1e-9)
    }
}

fn read_chunks<'a>(
    root: &Path,
    chunks: impl Iterator<Item = &'a Chunk>,
) -> Result<ReadReport, FilesetError> {
    let t0 = Instant::now();
    let mut rep = ReadReport::default();
    let mut buf = vec![0u8; 1 << 20];
    let mut open: Option<(String, File)> = None;
    for c in chunks {
        if open.as_ref().is_none_or(|(p, _)| *p != c.rel) {
            let p = root.join(&c.rel);
            open = Some((c.rel.clone(), open_regular(&p)?));
        }
        let (_, f) = open.as_mut().expect("open");
        f.seek(SeekFrom::Start(c.start))
            .map_err(io_err(&root.join(&c.rel)))?;
        let mut left = c.len;
        while left > 0 {
            let n = left.min(buf.len() as u64) as usize;
            f.read_exact(&mut buf[..n])
                .map_err(io_err(&root.join(&c.rel)))?;
            left -= n as u64;
        }
        rep.chunks += 1;
        rep.bytes += c.len;
    }
    rep.seconds = t0.elapsed().as_secs_f64();
    Ok(rep)
}

/// Reads the `n` most requested chunks, most popular first, to pre-warm the
/// page cache (thesis 3.6.1: 3,500 chunks).
pub fn warm(
    root: &Path,
    catalog: &Catalog,
    scripts: &[Script],
    n: usize,
) -> Result<ReadReport, FilesetError> {
    read_manifest(root)?;
    let chunks = popular_chunks(catalog, scripts);
    read_chunks(root, chunks.iter().take(n).map(|(c, _)| c))
}

/// Evicts every file of the set from the page cache (POSIX_FADV_DONTNEED after
/// a sync, so no page is dirty). Returns the files advised.
pub fn cool(root: &Path, catalog: &Catalog) -> Result<u64, FilesetError> {
    read_manifest(root)?;
    sync_fs(root)?;
    let mut n = 0;
    for e in entries(catalog) {
        let p = root.join(&e.rel);
        let f = open_regular(&p)?;
        // SAFETY: advisory call on an open descriptor
        let rc = unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        if rc != 0 {
            return Err(io_err(&p)(io::Error::from_raw_os_error(rc)));
        }
        n += 1;
    }
    Ok(n)
}

/// The thesis's `wc` experiment: reads every chunk the scripts request once,
/// each title's chunks in order and titles in a random (seeded) order, and
/// reports the rate — the bound on what a server can read from this disk.
pub fn seqread(
    root: &Path,
    catalog: &Catalog,
    scripts: &[Script],
    seed: u64,
) -> Result<ReadReport, FilesetError> {
    read_manifest(root)?;
    let mut chunks: Vec<Chunk> = popular_chunks(catalog, scripts)
        .into_iter()
        .map(|(c, _)| c)
        .collect();
    // group by title (first path component), in file order within a title
    chunks.sort();
    let mut titles: Vec<Vec<Chunk>> = Vec::new();
    for c in chunks {
        let t = c.rel.split('/').next().unwrap_or("").to_string();
        match titles.last_mut() {
            Some(v) if v[0].rel.split('/').next() == Some(t.as_str()) => v.push(c),
            _ => titles.push(vec![c]),
        }
    }
    titles.shuffle(&mut ChaCha8Rng::seed_from_u64(seed));
    read_chunks(root, titles.iter().flatten())
}

/// Bytes of `path` resident in the page cache (mincore over a mapping).
pub fn resident_bytes(path: &Path) -> io::Result<u64> {
    let f = open_regular(path).map_err(io::Error::other)?;
    let len = f.metadata()?.len() as usize;
    if len == 0 {
        return Ok(0);
    }
    // SAFETY: a read-only shared mapping of an open file, unmapped before return;
    // mincore writes one byte per page into a vector of the right length
    unsafe {
        let page = libc::sysconf(libc::_SC_PAGESIZE) as usize;
        let addr = libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_SHARED,
            f.as_raw_fd(),
            0,
        );
        if addr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let pages = len.div_ceil(page);
        let mut vec = vec![0u8; pages];
        let rc = libc::mincore(addr, len, vec.as_mut_ptr());
        libc::munmap(addr, len);
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok((vec.iter().filter(|b| **b & 1 == 1).count() * page).min(len) as u64)
    }
}
