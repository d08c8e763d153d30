//! # vodlab-diskfs
//!
//! The emulated disk: a FUSE file system presenting a workload's file set —
//! the paths and sizes `vodlab fileset create` would write, with the bytes
//! of the same content function, synthesized on demand — or the files of a
//! backing directory, with every page-cache miss served after the time the
//! [`vodlab_disk`] model says the drive takes. No disk space is used.
//!
//! A separate crate (not a feature of `vodlab-disk`) so that the model
//! stays free of I/O and of the FUSE, file-set and workload dependencies.
//!
//! * [`FileSet`] — what to present ([`FileSet::from_catalog`],
//!   [`FileSet::from_dir`]).
//! * [`mount`] — places the set on the drive in creation order
//!   ([`vodlab_disk::LayoutBuilder`]), mounts it (`fuser`, `fusermount3`
//!   with `auto_unmount`, so a killed daemon leaves no mount behind) and
//!   sets the mount's read-ahead.
//! * [`Mounted`] — statistics while mounted, waiting for a signal, unmount.
//! * [`command`] — `vodlab disk mount`: its settings and the whole pass
//!   from a workload directory to the unmount.
//!
//! See `docs/disk.md`, section "Mount".

#![warn(missing_docs)]

pub mod command;
pub mod engine;
pub mod fs;
pub mod synth;
pub mod sys;
pub mod tree;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use vodlab_disk::{Disk, DiskError, DiskOptions, LayoutBuilder, PlacementConfig, Profile};
use vodlab_workload::construct::Catalog;
use vodlab_workload::content::file_key;

pub use fs::{Content, Report, MAX_READ, STATS_FILE};

/// Errors of a mount.
#[derive(Debug, thiserror::Error)]
pub enum MountError {
    /// The file list does not make a tree.
    #[error(transparent)]
    Tree(#[from] tree::TreeError),
    /// The model or the placement refused.
    #[error(transparent)]
    Disk(#[from] DiskError),
    /// A backing file is missing or of the wrong size.
    #[error("{path}: {reason}")]
    Backing {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The mount point is in use.
    #[error("{0}: already a mount point; unmount it first (fusermount3 -u {0})")]
    Busy(PathBuf),
    /// An I/O error.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        source: std::io::Error,
    },
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> MountError {
    let what = what.into();
    move |source| MountError::Io { what, source }
}

/// The files a mount presents, in creation order, and where their bytes
/// come from.
#[derive(Debug, Clone)]
pub struct FileSet {
    /// `(relative path, size)` in creation order.
    pub files: Vec<(String, u64)>,
    /// Files held in memory and not placed on the drive (`fileset.json`,
    /// streaming manifests).
    pub inline: Vec<(String, Vec<u8>)>,
    /// Where file bytes come from.
    pub content: Content,
    /// For the statistics: `synthesized` or the backing directory.
    pub label: String,
}

impl FileSet {
    /// The set `vodlab fileset create` writes for a workload: every file of
    /// the catalog in creation order ([`vodlab_fileset::entries`]) with the
    /// content function's bytes, and the `fileset.json` it leaves when
    /// complete ([`vodlab_fileset::manifest_of`]), and the catalog's DASH
    /// and HLS manifests, if it has them.
    pub fn from_catalog(workload: &str, seed: u64, catalog: &Catalog) -> FileSet {
        let entries = vodlab_fileset::entries(catalog);
        let manifest = vodlab_fileset::manifest_of(workload, seed, &entries);
        let keys = entries.iter().map(|e| file_key(&e.rel)).collect();
        let mut inline = vec![(
            vodlab_fileset::MANIFEST.to_string(),
            vodlab_fileset::manifest_text(&manifest).into_bytes(),
        )];
        // the DASH MPDs and HLS playlists, text exactly as `fileset create`
        // writes it (held in memory: a few KiB per title with SegmentTemplate)
        inline.extend(vodlab_manifest::manifests(catalog).map(|m| (m.rel, m.text.into_bytes())));
        FileSet {
            inline,
            files: entries.into_iter().map(|e| (e.rel, e.size)).collect(),
            content: Content::Synthesized { seed, keys },
            label: "synthesized".into(),
        }
    }

    /// The workload's set with bytes read from the same paths under `dir`
    /// (e.g. a set `fileset create` wrote there); every file must exist
    /// with the catalog's size.
    pub fn from_catalog_backed(
        workload: &str,
        seed: u64,
        catalog: &Catalog,
        dir: &Path,
    ) -> Result<FileSet, MountError> {
        let mut set = FileSet::from_catalog(workload, seed, catalog);
        for (rel, size) in &set.files {
            let p = dir.join(rel);
            let m = std::fs::metadata(&p).map_err(|e| MountError::Backing {
                path: p.clone(),
                reason: e.to_string(),
            })?;
            if !m.is_file() || m.len() != *size {
                return Err(MountError::Backing {
                    path: p,
                    reason: format!("not a regular file of {size} bytes (the catalog's size)"),
                });
            }
        }
        set.content = Content::Backing {
            root: dir.to_path_buf(),
            rels: set.files.iter().map(|(r, _)| r.clone()).collect(),
        };
        set.label = dir.display().to_string();
        Ok(set)
    }

    /// Every regular file under `dir` (symbolic links not followed), in
    /// path order, with bytes read from it.
    pub fn from_dir(dir: &Path) -> Result<FileSet, MountError> {
        let mut files = Vec::new();
        let mut stack = vec![PathBuf::new()];
        while let Some(rel) = stack.pop() {
            let abs = dir.join(&rel);
            for e in std::fs::read_dir(&abs).map_err(io(abs.display().to_string()))? {
                let e = e.map_err(io(abs.display().to_string()))?;
                let ft = e.file_type().map_err(io(e.path().display().to_string()))?;
                let r = rel.join(e.file_name());
                if ft.is_dir() {
                    stack.push(r);
                } else if ft.is_file() {
                    let len = e
                        .metadata()
                        .map_err(io(e.path().display().to_string()))?
                        .len();
                    let s = r.to_str().ok_or_else(|| MountError::Backing {
                        path: e.path(),
                        reason: "name is not UTF-8".into(),
                    })?;
                    files.push((s.to_string(), len));
                }
            }
        }
        files.sort();
        Ok(FileSet {
            content: Content::Backing {
                root: dir.to_path_buf(),
                rels: files.iter().map(|(r, _)| r.clone()).collect(),
            },
            files,
            inline: Vec::new(),
            label: dir.display().to_string(),
        })
    }

    /// Bytes of the placed files.
    pub fn bytes(&self) -> u64 {
        self.files.iter().map(|(_, s)| s).sum()
    }
}

/// How to mount.
#[derive(Debug, Clone)]
pub struct MountConfig {
    /// The drive.
    pub profile: Profile,
    /// Scheduler, time compression, seed, rotation.
    pub options: DiskOptions,
    /// Placement on the drive.
    pub placement: PlacementConfig,
    /// The mount's read-ahead, KiB (`None`: the profile's
    /// `mount_readahead_kib`).
    pub readahead_kib: Option<u32>,
    /// Let `fusermount3` unmount when the daemon dies (`auto_unmount`).
    pub auto_unmount: bool,
    /// FUSE worker threads.
    pub threads: usize,
}

impl MountConfig {
    /// Defaults for a profile: FIFO, k = 1, seed 0, low placement, the
    /// profile's read-ahead, auto-unmount, [`default_threads`].
    pub fn new(profile: Profile) -> MountConfig {
        MountConfig {
            profile,
            options: DiskOptions::default(),
            placement: PlacementConfig::default(),
            readahead_kib: None,
            auto_unmount: true,
            threads: default_threads(),
        }
    }
}

/// FUSE worker threads by default: one per CPU, at least 2, at most 4. No
/// thread waits for the model, so more threads than CPUs only add context
/// switches: on this 2-CPU VM, 2 threads made 3.8 GB of zero-time misses per
/// CPU-second, 4 made 2.8–3.2 and 8 made 2.5, at the same wall-clock rate
/// (docs/disk.md, "Measured").
pub fn default_threads() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(4)
        .clamp(2, 4)
}

/// A mounted emulated disk. Dropping it unmounts.
pub struct Mounted {
    signals: std::sync::Mutex<signal_hook::iterator::Signals>,
    session: Option<fuser::BackgroundSession>,
    shared: Arc<fs::Shared>,
    mountpoint: PathBuf,
    readahead_kib: u32,
    bdi: String,
}

/// Places `set` on the drive and mounts it at `mountpoint` (an existing
/// directory that is not a mount point; a stale mount must be cleaned
/// first, [`sys::clean_stale`]).
pub fn mount(set: FileSet, mountpoint: &Path, cfg: &MountConfig) -> Result<Mounted, MountError> {
    if sys::is_mount_point(mountpoint).map_err(io(mountpoint.display().to_string()))? {
        return Err(MountError::Busy(mountpoint.to_path_buf()));
    }
    let mut tree = tree::Tree::build(set.files.iter().cloned())?;
    for (rel, data) in set.inline {
        tree.add_inline(&rel, data)?;
    }
    let mut b = LayoutBuilder::new(cfg.placement)?;
    for (_, size) in &set.files {
        b.push_file(*size);
    }
    let layout = b.finish(cfg.profile.capacity_bytes())?;
    let disk = Disk::new(&cfg.profile, cfg.options)?;
    let engine = engine::Engine::start(disk).map_err(io("starting the timer thread"))?;
    let readahead = cfg.readahead_kib.unwrap_or(cfg.profile.mount_readahead_kib);
    let info = fs::MountInfo {
        profile: cfg.profile.name.clone(),
        time_compression: cfg.options.time_compression,
        scheduler: format!("{:?}", cfg.options.scheduler),
        placement: format!("{:?}", cfg.placement.origin).to_lowercase(),
        files: set.files.len() as u64,
        bytes: set.files.iter().map(|(_, s)| s).sum(),
        set_start: layout.start(),
        set_span: layout.span(),
        content: set.label.clone(),
    };
    let shared = Arc::new(fs::Shared::new(
        tree,
        layout,
        set.content,
        engine,
        info,
        readahead,
    ));
    let mut opts = vec![
        fuser::MountOption::FSName("vodlab-disk".into()),
        fuser::MountOption::Subtype("vodlab-disk".into()),
        fuser::MountOption::RO,
        fuser::MountOption::NoAtime,
        fuser::MountOption::CUSTOM(format!("max_read={MAX_READ}")),
    ];
    if cfg.auto_unmount {
        opts.push(fuser::MountOption::AutoUnmount);
    }
    let mut config = fuser::Config::default();
    config.mount_options = opts;
    // allow_other: servers drop privileges (www-data) and must read it
    config.acl = fuser::SessionACL::All;
    config.n_threads = Some(cfg.threads.max(1));
    config.clone_fd = true;
    // catch the signals before the mount exists, so none is missed
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP])
        .map_err(io("installing signal handlers"))?;
    let session = fuser::spawn_mount(fs::DiskFs(shared.clone()), mountpoint, &config).map_err(
        io(format!(
            "mounting FUSE at {} (needs /dev/fuse and {})",
            mountpoint.display(),
            sys::FUSERMOUNT
        )),
    )?;
    let mut m = Mounted {
        signals: std::sync::Mutex::new(signals),
        session: Some(session),
        shared,
        mountpoint: mountpoint.to_path_buf(),
        readahead_kib: 0,
        bdi: String::new(),
    };
    m.bdi = sys::bdi_name(mountpoint).map_err(io(mountpoint.display().to_string()))?;
    m.readahead_kib =
        sys::set_readahead(mountpoint, readahead).map_err(io("setting the mount's read-ahead"))?;
    Ok(m)
}

/// Why [`Mounted::wait`] returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// SIGINT, SIGTERM or SIGHUP.
    Signal(i32),
    /// The file system was unmounted from outside (`fusermount3 -u`).
    Unmounted,
}

impl Mounted {
    /// The mount point.
    pub fn mountpoint(&self) -> &Path {
        &self.mountpoint
    }

    /// The mount's read-ahead, KiB, as read back from sysfs.
    pub fn readahead_kib(&self) -> u32 {
        self.readahead_kib
    }

    /// `MAJOR:MINOR` of the mount (its `/sys/class/bdi` entry).
    pub fn bdi(&self) -> &str {
        &self.bdi
    }

    /// Statistics now.
    pub fn report(&self) -> Report {
        self.shared.report()
    }

    /// Waits for SIGINT/SIGTERM/SIGHUP or an unmount from outside; calls
    /// `every_second` about once a second meanwhile (e.g. to rewrite a
    /// statistics file).
    pub fn wait(&self, every_second: &mut dyn FnMut(&Report)) -> std::io::Result<Ended> {
        let mut signals = self.signals.lock().unwrap_or_else(|p| p.into_inner());
        let mut last = Instant::now();
        loop {
            if let Some(s) = signals.pending().next() {
                return Ok(Ended::Signal(s));
            }
            if self.session.as_ref().is_none_or(|s| s.guard.is_finished()) {
                return Ok(Ended::Unmounted);
            }
            if last.elapsed() >= Duration::from_secs(1) {
                last = Instant::now();
                every_second(&self.report());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Unmounts, stops the model and returns the final statistics.
    pub fn unmount(mut self) -> std::io::Result<Report> {
        self.unmount_inner()
    }

    fn unmount_inner(&mut self) -> std::io::Result<Report> {
        let report = self.shared.report();
        // unmount ourselves: with auto_unmount, fuser only closes its socket
        // to fusermount3, which leaves a live daemon's mount in place
        let r = match self.session.take() {
            Some(s) => {
                let u = if s.guard.is_finished() {
                    Ok(())
                } else {
                    sys::unmount(&self.mountpoint)
                };
                u.and(s.umount_and_join())
            }
            None => Ok(()),
        };
        self.shared.stop();
        r.map(|_| report)
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        if self.session.is_some() {
            let _ = self.unmount_inner();
        }
    }
}
