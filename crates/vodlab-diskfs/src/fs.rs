//! The FUSE file system: a read-only tree whose file reads are charged to
//! the modelled drive before they are answered.
//!
//! * `lookup` of a file the kernel does not hold yet submits the file's
//!   metadata reads ([`Layout::meta_reads`]) and answers when they are
//!   served; `forget` down to zero lookups makes the next lookup pay again.
//! * `read` computes the bytes (the content function, or a `pread` of the
//!   backing file) on the FUSE thread, submits the drive request for the
//!   range ([`Layout::read`]) and hands the reply to the [`Engine`], which
//!   answers when the model says the data is ready. The FUSE thread returns
//!   at once.
//! * Files are opened with `FOPEN_KEEP_CACHE`: pages the kernel holds are
//!   served from the page cache and never reach the daemon or the model.
//! * `/.vodlab-disk-stats.json` (not listed by `readdir`): a JSON snapshot
//!   of [`Report`] taken when it is opened (direct I/O, size 0 in `stat`).

use std::collections::HashMap;
use std::ffi::OsStr;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo,
    KernelConfig, OpenFlags, ReplyAttr, ReplyData, ReplyDirectory, ReplyEntry, ReplyOpen,
    ReplyStatfs, Request as FuseRequest,
};
use serde::{Deserialize, Serialize};
use vodlab_disk::{DiskStats, Layout, MicrosHistogram};

use crate::engine::Engine;
use crate::synth;
use crate::tree::{Node, Tree, ROOT};

/// Name of the statistics file at the mount's root.
pub const STATS_FILE: &str = ".vodlab-disk-stats.json";

/// Largest read the daemon takes in one FUSE request (`max_read`, and the
/// kernel's `max_pages` through `max_write`).
pub const MAX_READ: u32 = 1 << 20;

/// Attributes never change: the kernel may keep them for a day.
const TTL: Duration = Duration::from_secs(86_400);

/// Where file bytes come from.
#[derive(Debug, Clone)]
pub enum Content {
    /// The workload's content function ([`vodlab_workload::content::fill`]),
    /// as `vodlab fileset create` writes it.
    Synthesized {
        /// The content seed (the workload's seed).
        seed: u64,
        /// [`vodlab_workload::content::file_key`] of each file, by index.
        keys: Vec<u64>,
    },
    /// Real files under a directory.
    Backing {
        /// The directory.
        root: PathBuf,
        /// Each file's path relative to it, by index.
        rels: Vec<String>,
    },
}

/// Describes a mount for its statistics.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MountInfo {
    /// The drive profile's name.
    pub profile: String,
    /// Time compression k.
    pub time_compression: f64,
    /// Queue discipline, as given.
    pub scheduler: String,
    /// `low` or `high`.
    pub placement: String,
    /// Files on the drive.
    pub files: u64,
    /// Bytes of those files.
    pub bytes: u64,
    /// Address of the first byte of the set on the drive.
    pub set_start: u64,
    /// Address space the set spans.
    pub set_span: u64,
    /// Where bytes come from (`synthesized` or the backing directory).
    pub content: String,
}

/// Counters of the FUSE side.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FuseCounters {
    /// Read requests from the kernel (page-cache misses).
    pub reads: u64,
    /// Bytes answered.
    pub bytes: u64,
    /// Largest read request, bytes.
    pub max_read_bytes: u64,
    /// Lookups that paid the file's metadata reads.
    pub meta_lookups: u64,
    /// How late each read's reply went to the kernel after the modelled
    /// drive had served it, µs of **model time** (wall lateness × k): what
    /// the emulation itself added to the drive's response (a timer thread
    /// woken late, bytes synthesized after the drive finished). At a time
    /// compression the machine keeps up with it stays small against
    /// `disk.response_us`; `derived.reply_late_share` says how small.
    #[serde(default)]
    pub reply_late_us: MicrosHistogram,
}

/// The statistics file: what was mounted, the FUSE counters, the drive's
/// statistics (model time) and figures derived from them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// The mount.
    pub mount: MountInfo,
    /// Wall seconds since the mount.
    pub wall_seconds: f64,
    /// FUSE counters.
    pub fuse: FuseCounters,
    /// The drive's statistics (times in model time).
    pub disk: DiskStats,
    /// Derived from `disk`.
    pub derived: Derived,
}

/// Figures derived from [`DiskStats`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Derived {
    /// Bytes over elapsed model time, MB/s (10⁶).
    pub throughput_mb_s: f64,
    /// Mean read size, bytes.
    pub mean_read_bytes: f64,
    /// Mean service time per read, ms (model time).
    pub mean_service_ms: f64,
    /// Mean seek distance over reads that seeked, bytes.
    pub mean_seek_distance_bytes: f64,
    /// Fraction of model time the drive was busy.
    pub busy_fraction: f64,
    /// Time-averaged requests queued or in service.
    pub mean_depth: f64,
    /// The share of the drive's response time, as the kernel saw it, that
    /// the emulation added: mean reply lateness / (mean drive response +
    /// mean reply lateness). 0 for a perfect emulation; over 0.1 the
    /// mount did not keep up (a time compression too high for the
    /// machine, or CPUs saturated), and the figures flatter no one.
    #[serde(default)]
    pub reply_late_share: f64,
}

impl Derived {
    /// From a drive's statistics and the replies' lateness (model µs).
    pub fn of(s: &DiskStats, late: &MicrosHistogram) -> Derived {
        let late_ms = late.0.mean() / 1e3;
        let response_ms = s.response_us.0.mean() / 1e3;
        Derived {
            reply_late_share: if late.0.is_empty() || late_ms + response_ms <= 0.0 {
                0.0
            } else {
                late_ms / (late_ms + response_ms)
            },
            throughput_mb_s: s.throughput_mb_s(),
            mean_read_bytes: if s.reads == 0 {
                0.0
            } else {
                s.bytes as f64 / s.reads as f64
            },
            mean_service_ms: s.service_us.0.mean() / 1e3,
            mean_seek_distance_bytes: s.mean_seek_distance(),
            busy_fraction: s.busy_fraction(),
            mean_depth: s.mean_depth(),
        }
    }
}

#[derive(Default)]
struct Counters {
    reads: AtomicU64,
    bytes: AtomicU64,
    max_read: AtomicU64,
    meta_lookups: AtomicU64,
}

enum Handle {
    Backing(Arc<File>),
    Stats(Arc<Vec<u8>>),
}

/// Reply buffers of [`MAX_READ`] bytes, reused: a fresh one would be zeroed
/// (or page-faulted in) for every read only to be overwritten.
static BUFFERS: Mutex<Vec<Vec<u8>>> = Mutex::new(Vec::new());

/// Buffers kept for reuse (enough for every read in flight: the kernel's
/// `max_background` plus the FUSE threads).
const BUFFERS_KEPT: usize = 96;

/// A reply buffer whose first `len` bytes are the reply.
struct Bytes {
    buf: Vec<u8>,
    len: usize,
}

impl Bytes {
    /// A buffer of at least `len` bytes (contents unspecified).
    fn take(len: usize) -> Bytes {
        let mut buf = BUFFERS
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .pop()
            .unwrap_or_default();
        if buf.len() < len {
            buf.resize(len.max(MAX_READ as usize), 0);
        }
        Bytes { buf, len }
    }

    fn as_slice(&self) -> &[u8] {
        &self.buf[..self.len]
    }

    fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.buf[..self.len]
    }
}

impl Drop for Bytes {
    fn drop(&mut self) {
        let buf = std::mem::take(&mut self.buf);
        let mut pool = BUFFERS.lock().unwrap_or_else(|p| p.into_inner());
        if pool.len() < BUFFERS_KEPT && buf.len() == MAX_READ as usize {
            pool.push(buf);
        }
    }
}

/// A read's reply, sent when both the drive (the engine) and the bytes (the
/// FUSE thread) are ready.
struct Pair {
    left: AtomicU8,
    failed: AtomicBool,
    data: Mutex<Option<Result<Bytes, Errno>>>,
    reply: Mutex<Option<ReplyData>>,
}

impl Pair {
    fn new(reply: ReplyData) -> Pair {
        Pair {
            left: AtomicU8::new(2),
            failed: AtomicBool::new(false),
            data: Mutex::new(None),
            reply: Mutex::new(Some(reply)),
        }
    }

    fn arrive(&self) {
        if self.left.fetch_sub(1, Ordering::AcqRel) != 1 {
            return;
        }
        let Some(reply) = self.reply.lock().expect("pair").take() else {
            return;
        };
        match self.data.lock().expect("pair").take() {
            _ if self.failed.load(Ordering::Relaxed) => reply.error(Errno::EIO),
            Some(Ok(d)) => reply.data(d.as_slice()),
            Some(Err(e)) => reply.error(e),
            None => reply.error(Errno::EIO),
        }
    }
}

/// State shared by the FUSE threads and the mount handle.
pub struct Shared {
    tree: Tree,
    layout: Layout,
    content: Content,
    engine: Engine,
    info: MountInfo,
    readahead_kib: u32,
    /// Outstanding kernel lookups per file index.
    lookups: Vec<AtomicU64>,
    counters: Counters,
    handles: Mutex<HashMap<u64, Handle>>,
    next_fh: AtomicU64,
    mounted_at: SystemTime,
}

impl Shared {
    /// Everything a mount serves. `tree` file `i` is `layout` file `i` and
    /// `content` file `i`.
    pub fn new(
        tree: Tree,
        layout: Layout,
        content: Content,
        engine: Engine,
        info: MountInfo,
        readahead_kib: u32,
    ) -> Shared {
        let lookups = (0..tree.file_count()).map(|_| AtomicU64::new(0)).collect();
        Shared {
            tree,
            layout,
            content,
            engine,
            info,
            readahead_kib,
            lookups,
            counters: Counters::default(),
            handles: Mutex::new(HashMap::new()),
            next_fh: AtomicU64::new(1),
            mounted_at: SystemTime::now(),
        }
    }

    /// A snapshot of the statistics.
    pub fn report(&self) -> Report {
        let disk = self.engine.stats();
        let late = self.engine.late();
        Report {
            mount: self.info.clone(),
            wall_seconds: self.engine.now().as_secs_f64(),
            fuse: FuseCounters {
                reads: self.counters.reads.load(Ordering::Relaxed),
                bytes: self.counters.bytes.load(Ordering::Relaxed),
                max_read_bytes: self.counters.max_read.load(Ordering::Relaxed),
                meta_lookups: self.counters.meta_lookups.load(Ordering::Relaxed),
                reply_late_us: late.clone(),
            },
            derived: Derived::of(&disk, &late),
            disk,
        }
    }

    /// Stops the engine (pending replies are dropped).
    pub fn stop(&self) {
        self.engine.stop();
    }

    fn stats_ino(&self) -> u64 {
        self.tree.inode_count() + 1
    }

    fn attr(&self, ino: u64) -> Option<FileAttr> {
        let (kind, size, perm, nlink) = if ino == self.stats_ino() {
            (FileType::RegularFile, 0, 0o444, 1)
        } else {
            match self.tree.node(ino)? {
                Node::Dir { children, .. } => (FileType::Directory, 0, 0o555, 2 + children.len()),
                Node::File { size, .. } => (FileType::RegularFile, *size, 0o444, 1),
                Node::Inline { data } => (FileType::RegularFile, data.len() as u64, 0o444, 1),
            }
        };
        let t = self.mounted_at;
        Some(FileAttr {
            ino: INodeNo(ino),
            size,
            blocks: size.div_ceil(512),
            atime: t,
            mtime: t,
            ctime: t,
            crtime: t,
            kind,
            perm,
            nlink: nlink as u32,
            uid: 0,
            gid: 0,
            rdev: 0,
            blksize: 4096,
            flags: 0,
        })
    }

    fn bytes(&self, index: usize, fh: u64, offset: u64, len: usize) -> Result<Bytes, Errno> {
        let mut out = Bytes::take(len);
        let buf = out.as_mut_slice();
        match &self.content {
            Content::Synthesized { seed, keys } => {
                synth::fill(*seed, keys[index], offset, buf);
            }
            Content::Backing { .. } => {
                let f = match self.handles.lock().expect("handles").get(&fh) {
                    Some(Handle::Backing(f)) => f.clone(),
                    _ => return Err(Errno::EBADF),
                };
                let mut done = 0;
                while done < len {
                    match f.read_at(&mut buf[done..], offset + done as u64) {
                        Ok(0) => break,
                        Ok(n) => done += n,
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                        Err(_) => return Err(Errno::EIO),
                    }
                }
                out.len = done;
            }
        }
        Ok(out)
    }
}

/// The [`Filesystem`] over a [`Shared`].
pub struct DiskFs(pub Arc<Shared>);

impl Filesystem for DiskFs {
    fn init(&mut self, _req: &FuseRequest, config: &mut KernelConfig) -> std::io::Result<()> {
        // max_pages follows max(max_write, max_readahead): 1 MiB reads
        let _ = config.set_max_write(MAX_READ);
        let ra = (self.0.readahead_kib.max(4)).saturating_mul(1024);
        if let Err(max) = config.set_max_readahead(ra) {
            let _ = config.set_max_readahead(max);
        }
        // many readahead requests in flight, so the drive's queue sees them
        let _ = config.set_max_background(64);
        Ok(())
    }

    fn lookup(&self, _req: &FuseRequest, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let s = &self.0;
        let Some(name) = name.to_str() else {
            return reply.error(Errno::ENOENT);
        };
        let ino = if parent.0 == ROOT && name == STATS_FILE {
            Some(s.stats_ino())
        } else {
            s.tree.lookup(parent.0, name)
        };
        let Some((ino, attr)) = ino.and_then(|i| Some((i, s.attr(i)?))) else {
            return reply.error(Errno::ENOENT);
        };
        if let Some(Node::File { index, .. }) = s.tree.node(ino) {
            let index = *index;
            if s.lookups[index].fetch_add(1, Ordering::Relaxed) == 0 {
                let meta = s.layout.meta_reads(index);
                if !meta.is_empty() {
                    s.counters.meta_lookups.fetch_add(1, Ordering::Relaxed);
                    s.engine.submit(
                        &meta,
                        Box::new(move |r| match r {
                            Ok(()) => reply.entry(&TTL, &attr, Generation(0)),
                            Err(_) => reply.error(Errno::EIO),
                        }),
                    );
                    return;
                }
            }
        }
        reply.entry(&TTL, &attr, Generation(0));
    }

    fn forget(&self, _req: &FuseRequest, ino: INodeNo, nlookup: u64) {
        if let Some(Node::File { index, .. }) = self.0.tree.node(ino.0) {
            let c = &self.0.lookups[*index];
            let _ = c.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| {
                Some(v.saturating_sub(nlookup))
            });
        }
    }

    fn getattr(&self, _req: &FuseRequest, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.0.attr(ino.0) {
            Some(a) => reply.attr(&TTL, &a),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn open(&self, _req: &FuseRequest, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let s = &self.0;
        if flags.0 & libc::O_ACCMODE != libc::O_RDONLY {
            return reply.error(Errno::EROFS);
        }
        let new_fh = || s.next_fh.fetch_add(1, Ordering::Relaxed);
        if ino.0 == s.stats_ino() {
            let text = serde_json::to_vec_pretty(&s.report()).expect("serializes");
            let fh = new_fh();
            s.handles
                .lock()
                .expect("handles")
                .insert(fh, Handle::Stats(Arc::new(text)));
            return reply.opened(FileHandle(fh), FopenFlags::FOPEN_DIRECT_IO);
        }
        match (s.tree.node(ino.0), &s.content) {
            (Some(Node::File { index, .. }), Content::Backing { root, rels }) => {
                match File::open(root.join(&rels[*index])) {
                    Ok(f) => {
                        let fh = new_fh();
                        s.handles
                            .lock()
                            .expect("handles")
                            .insert(fh, Handle::Backing(Arc::new(f)));
                        reply.opened(FileHandle(fh), FopenFlags::FOPEN_KEEP_CACHE);
                    }
                    Err(e) => reply.error(Errno::from_i32(e.raw_os_error().unwrap_or(libc::EIO))),
                }
            }
            (Some(Node::File { .. } | Node::Inline { .. }), _) => {
                reply.opened(FileHandle(0), FopenFlags::FOPEN_KEEP_CACHE)
            }
            (Some(Node::Dir { .. }), _) => reply.error(Errno::EISDIR),
            (None, _) => reply.error(Errno::ENOENT),
        }
    }

    fn read(
        &self,
        _req: &FuseRequest,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<fuser::LockOwner>,
        reply: ReplyData,
    ) {
        let s = &self.0;
        if ino.0 == s.stats_ino() {
            let h = match s.handles.lock().expect("handles").get(&fh.0) {
                Some(Handle::Stats(t)) => t.clone(),
                _ => return reply.error(Errno::EBADF),
            };
            let a = (offset as usize).min(h.len());
            let b = (a + size as usize).min(h.len());
            return reply.data(&h[a..b]);
        }
        match s.tree.node(ino.0) {
            Some(Node::Inline { data }) => {
                let a = (offset as usize).min(data.len());
                let b = (a + size as usize).min(data.len());
                reply.data(&data[a..b])
            }
            Some(Node::File { size: fsize, index }) => {
                let index = *index;
                let len = (*fsize).saturating_sub(offset).min(size as u64) as usize;
                let Some(req) = s.layout.read(index, offset, len as u64) else {
                    return reply.data(&[]);
                };
                let c = &s.counters;
                c.reads.fetch_add(1, Ordering::Relaxed);
                c.max_read.fetch_max(size as u64, Ordering::Relaxed);
                // the drive starts now; the bytes are made while it works and
                // whichever of the two finishes last sends the reply
                let pair = Arc::new(Pair::new(reply));
                let p2 = pair.clone();
                s.engine.submit_quiet(
                    &[req],
                    Box::new(move |r| {
                        if r.is_err() {
                            p2.failed.store(true, Ordering::Relaxed);
                        }
                        p2.arrive();
                    }),
                );
                let data = s.bytes(index, fh.0, offset, len);
                if let Ok(d) = &data {
                    c.bytes.fetch_add(d.len as u64, Ordering::Relaxed);
                }
                *pair.data.lock().expect("pair") = Some(data);
                pair.arrive();
                // the drive may have finished while the bytes were made: then
                // the reply goes from here, else the timer sends it
                s.engine.settle();
            }
            Some(Node::Dir { .. }) => reply.error(Errno::EISDIR),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn release(
        &self,
        _req: &FuseRequest,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<fuser::LockOwner>,
        _flush: bool,
        reply: fuser::ReplyEmpty,
    ) {
        if fh.0 != 0 {
            self.0.handles.lock().expect("handles").remove(&fh.0);
        }
        reply.ok();
    }

    fn readdir(
        &self,
        _req: &FuseRequest,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let Some(Node::Dir { parent, children }) = self.0.tree.node(ino.0) else {
            return reply.error(Errno::ENOTDIR);
        };
        let dots = [(".", ino.0), ("..", *parent)];
        let entries = dots
            .iter()
            .map(|(n, i)| (*n, *i, FileType::Directory))
            .chain(children.iter().map(|(n, i)| {
                let kind = match self.0.tree.node(*i) {
                    Some(Node::Dir { .. }) => FileType::Directory,
                    _ => FileType::RegularFile,
                };
                (&**n, *i, kind)
            }));
        for (k, (name, i, kind)) in entries.enumerate().skip(offset as usize) {
            if reply.add(INodeNo(i), k as u64 + 1, kind, name) {
                break;
            }
        }
        reply.ok();
    }

    fn statfs(&self, _req: &FuseRequest, _ino: INodeNo, reply: ReplyStatfs) {
        let s = &self.0;
        let blocks = s.info.bytes.div_ceil(4096);
        reply.statfs(blocks, 0, 0, s.tree.inode_count(), 0, 4096, 255, 4096);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 9 ms of drive response and 1 ms of lateness: the emulation added a
    /// tenth of what the kernel waited; none recorded, no share.
    #[test]
    fn the_late_share_is_lateness_over_the_response_the_kernel_saw() {
        let mut disk = DiskStats::default();
        disk.response_us.record_ns(9e6);
        let mut late = MicrosHistogram::default();
        assert_eq!(Derived::of(&disk, &late).reply_late_share, 0.0);
        late.record_ns(1e6);
        let share = Derived::of(&disk, &late).reply_late_share;
        assert!((share - 0.1).abs() < 1e-3, "{share}");
    }
}
