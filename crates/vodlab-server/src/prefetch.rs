//! ASAP: page-cache probes and serialized per-device prefetching.
//!
//! Before a range is sent, [`Prober::resident`] asks whether it is in the
//! page cache (`cachestat(2)`, else `preadv2(RWF_NOWAIT)` one byte per
//! 128 KiB). On a miss the connection queues a prefetch with its device's
//! [`Helpers`]: a FIFO served by N threads (1 = serialized, the thesis's
//! ASAP), each reading one prefetch at a time into the page cache, then
//! waking the connection with the read's size and duration
//! ([`ReadReport`]). How much to read is decided by a prefetch controller
//! (`vodlab_prefetch::controller`), which is pure.
//!
//! A helper reads exactly its prefetch: through a descriptor of its own
//! with the kernel's read-ahead off ([`own_descriptor`]), in pieces
//! ([`FIRST_PIECE`], then up to each multiple of [`PIECE`]), checking between two whether the
//! prefetch was cancelled or its client's socket closed
//! ([`socket_closed`]: the helper sees a client leave without waiting for
//! the connection's task to run). So a prefetch whose client has gone
//! stops after the piece it is reading, and no read-ahead the kernel
//! started on its behalf runs on past it (this VM's disk has an 8 MiB
//! read-ahead: four clients hanging up after their first bytes made the
//! disk read 14 MiB for 4.5 MiB of pieces, a 256 KiB range's 4 MiB
//! prefetch read 15 MiB).

use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::os::unix::io::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;
use tokio::sync::watch;

const PROBE_STRIDE: u64 = 128 * 1024;

/// Which probe the kernel allows.
#[derive(Debug, Default)]
pub struct Prober {
    no_cachestat: AtomicBool,
    /// Probes answered by preadv2 because cachestat was refused.
    pub fallbacks: AtomicU64,
}

#[repr(C)]
#[derive(Default)]
struct CachestatRange {
    off: u64,
    len: u64,
}

#[repr(C)]
#[derive(Default)]
struct Cachestat {
    nr_cache: u64,
    nr_dirty: u64,
    nr_writeback: u64,
    nr_evicted: u64,
    nr_recently_evicted: u64,
}

#[cfg(target_arch = "x86_64")]
const SYS_CACHESTAT: libc::c_long = 451;
#[cfg(target_arch = "aarch64")]
const SYS_CACHESTAT: libc::c_long = 451;

impl Prober {
    /// True when every page of `[off, off + len)` is in the page cache.
    pub fn resident(&self, file: &File, off: u64, len: u64) -> bool {
        if len == 0 {
            return true;
        }
        if !self.no_cachestat.load(Ordering::Relaxed) {
            let page = 4096u64;
            let start = off / page * page;
            let end = (off + len).div_ceil(page) * page;
            let range = CachestatRange {
                off: start,
                len: end - start,
            };
            let mut cs = Cachestat::default();
            // SAFETY: cachestat(2) reads `range` and writes `cs`, both live locals
            let rc = unsafe {
                libc::syscall(
                    SYS_CACHESTAT,
                    file.as_raw_fd(),
                    &range as *const CachestatRange,
                    &mut cs as *mut Cachestat,
                    0u32,
                )
            };
            if rc == 0 {
                return cs.nr_cache >= (end - start) / page;
            }
            // ENOSYS (old kernel) or EPERM (seccomp): use preadv2 from now on
            self.no_cachestat.store(true, Ordering::Relaxed);
        }
        self.fallbacks.fetch_add(1, Ordering::Relaxed);
        let mut byte = [0u8; 1];
        let mut at = off;
        loop {
            let iov = libc::iovec {
                iov_base: byte.as_mut_ptr().cast(),
                iov_len: 1,
            };
            // SAFETY: one iovec over a live one-byte buffer
            let n = unsafe {
                libc::preadv2(
                    file.as_raw_fd(),
                    &iov,
                    1,
                    at as libc::off_t,
                    libc::RWF_NOWAIT,
                )
            };
            if n != 1 {
                return false;
            }
            if at + PROBE_STRIDE >= off + len {
                break;
            }
            at += PROBE_STRIDE;
        }
        // and the last byte of the range
        let iov = libc::iovec {
            iov_base: byte.as_mut_ptr().cast(),
            iov_len: 1,
        };
        // SAFETY: as above
        unsafe {
            libc::preadv2(
                file.as_raw_fd(),
                &iov,
                1,
                (off + len - 1) as libc::off_t,
                libc::RWF_NOWAIT,
            ) == 1
        }
    }
}

/// Bytes of a prefetch's first read: the connection may send them while
/// the helper reads on, so a range starts after this much, not after the
/// whole prefetch.
pub const FIRST_PIECE: u64 = 128 * 1024;
/// Bytes of each later read of a prefetch (the second one is the rest of
/// the first [`PIECE`]: see `piece_end_from`); between two, the helper
/// reports progress and checks whether the prefetch was cancelled or its
/// client gone. A client that leaves costs at most the piece being read
/// then.
/// (Smaller pieces would cost a throttled device more operations per
/// prefetch: `vodlab box` charges each read one of its IOPS.)
pub const PIECE: u64 = 1 << 20;

/// A descriptor of `file`'s own, for the helper to read through, with the
/// kernel's read-ahead off (`POSIX_FADV_RANDOM`): each read then brings in
/// exactly its bytes (a 1 MiB read is one 1 MiB request on a disk whose
/// `max_sectors_kb` allows it), and no read-ahead window the kernel opened
/// for the helper goes on reading past a piece after the prefetch was
/// cancelled or past the prefetch's end. The request's own descriptor
/// keeps its read-ahead for its `sendfile`s. Reopened through
/// `/proc/self/fd`, so it is the same file whatever became of its path;
/// `None` where that cannot be opened (no `/proc`).
pub fn own_descriptor(file: &File) -> Option<File> {
    let own = File::open(format!("/proc/self/fd/{}", file.as_raw_fd())).ok()?;
    // SAFETY: an advisory call on an open descriptor
    let rc = unsafe { libc::posix_fadvise(own.as_raw_fd(), 0, 0, libc::POSIX_FADV_RANDOM) };
    (rc == 0).then_some(own)
}

/// Whether the client has closed or reset the TCP socket `fd`, without
/// waiting (`poll(2)`: `POLLRDHUP`, `POLLHUP` or `POLLERR`). A connection
/// takes its client's end of sending as its going away while it waits for
/// a read (as nginx takes a client's EOF while it waits for an upstream).
pub fn socket_closed(fd: RawFd) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLRDHUP,
        revents: 0,
    };
    // SAFETY: one pollfd over a live local, no wait; on a descriptor that
    // is not a socket, or no longer open, poll reports no hang-up
    let n = unsafe { libc::poll(&mut p, 1, 0) };
    n == 1 && p.revents & (libc::POLLRDHUP | libc::POLLHUP | libc::POLLERR) != 0
}

/// What a prefetch's handle and its helper share.
#[derive(Debug)]
struct Control {
    /// Set when the handle is dropped (or cancelled) unfinished.
    cancelled: AtomicBool,
    /// The client's socket, polled before each piece; -1 when not watched.
    /// The descriptor is open while the handle lives (a connection drops
    /// its prefetch before its socket), and the helper polls it only after
    /// finding the prefetch not cancelled: should the connection end in
    /// between and the number be reused, the answer is for a prefetch
    /// cancelled anyway (stopped one piece sooner or later), and polling
    /// any descriptor is harmless.
    client: AtomicI32,
}

/// Why a helper reads no (more) of a prefetch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Abandoned {
    /// Its handle was dropped: its connection has ended the response.
    Cancelled,
    /// Its client's socket is closed or reset (the connection may not know
    /// yet): told to the handle ([`Progress::client_gone`]).
    ClientGone,
}

impl Control {
    fn new(client: Option<RawFd>) -> Arc<Self> {
        Arc::new(Self {
            cancelled: AtomicBool::new(false),
            client: AtomicI32::new(client.unwrap_or(-1)),
        })
    }

    fn cancelled(&self) -> bool {
        self.cancelled.load(Ordering::Relaxed)
    }

    fn abandoned(&self) -> Option<Abandoned> {
        if self.cancelled() {
            return Some(Abandoned::Cancelled);
        }
        let fd = self.client.load(Ordering::Relaxed);
        (fd >= 0 && socket_closed(fd)).then_some(Abandoned::ClientGone)
    }
}

struct Job {
    file: Arc<File>,
    offset: u64,
    len: u64,
    progress: watch::Sender<Progress>,
    ctl: Arc<Control>,
}

/// A completed prefetch read, as the helper timed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadReport {
    /// Bytes read (fewer than asked when the file ended or a read failed).
    pub bytes: u64,
    /// Time the helper spent reading (not the time queued).
    pub duration: Duration,
}

/// How far a prefetch has come.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Progress {
    /// Bytes from the prefetch's offset now in the page cache.
    pub read: u64,
    /// The report once the read is over.
    pub done: Option<ReadReport>,
    /// The helper found the client's socket closed or reset and read no
    /// further: nobody will take the rest.
    pub client_gone: bool,
}

/// Why a prefetch ended without a report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the prefetch was dropped by its helper")]
pub struct Lost;

/// A queued or running prefetch. Dropping it before its read is done
/// cancels it: the helper drops it from the queue, or stops a read it has
/// begun at the next piece ([`PIECE`]). So does the client's socket
/// closing while it is watched ([`Progress::client_gone`]). Awaiting it
/// waits for the report.
#[derive(Debug)]
pub struct Pending {
    rx: watch::Receiver<Progress>,
    ctl: Arc<Control>,
    offset: u64,
    len: u64,
}

impl Pending {
    /// First byte.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// End (exclusive).
    pub fn end(&self) -> u64 {
        self.offset + self.len
    }

    /// Progress now.
    pub fn progress(&self) -> Progress {
        *self.rx.borrow()
    }

    /// Waits until the progress changes; `Err` when the helper dropped the
    /// prefetch (it never will report).
    pub async fn changed(&mut self) -> Result<(), Lost> {
        self.rx.changed().await.map_err(|_| Lost)
    }

    /// Cancels the prefetch (also done by dropping it unfinished).
    pub fn cancel(&self) {
        if self.rx.borrow().done.is_none() {
            self.ctl.cancelled.store(true, Ordering::Relaxed);
        }
    }

    /// Stops the helper watching the client's socket: its connection no
    /// longer takes the client's end of sending as its going away (it has
    /// sent a pipelined request).
    pub fn unwatch_client(&self) {
        self.ctl.client.store(-1, Ordering::Relaxed);
    }

    /// Waits for the report; `Err` also when the client went away first.
    pub async fn finished(mut self) -> Result<ReadReport, Lost> {
        loop {
            let pr = self.progress();
            if pr.client_gone {
                return Err(Lost);
            }
            if let Some(r) = pr.done {
                return Ok(r);
            }
            self.changed().await?;
        }
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        self.cancel();
    }
}

impl std::future::IntoFuture for Pending {
    type Output = Result<ReadReport, Lost>;
    type IntoFuture = std::pin::Pin<Box<dyn std::future::Future<Output = Self::Output> + Send>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(self.finished())
    }
}

/// Per-device statistics.
#[derive(Debug, Default, Clone, Serialize)]
pub struct DeviceStats {
    /// Device number (st_dev).
    pub device: u64,
    /// Prefetch reads done.
    pub reads: u64,
    /// Bytes read.
    pub bytes: u64,
    /// Mean milliseconds per prefetch read.
    pub mean_ms_per_read: f64,
    /// Mean milliseconds per 128 KiB read.
    pub mean_ms_per_128k: f64,
    /// Prefetches waiting now.
    pub queue_length: u64,
    /// Fraction of wall time since the first read that a helper was reading.
    pub busy_fraction: f64,
    /// Seconds the helpers spent reading, in all (reads of connections that
    /// went away included).
    pub busy_s: f64,
    /// Prefetches dropped unread because their connection had gone: taken
    /// off the queue, or never queued (the client had gone before).
    pub cancelled: u64,
    /// Prefetch reads stopped part-way because their connection went away.
    pub stopped: u64,
    /// Prefetches read through the request's own descriptor, the kernel's
    /// read-ahead on, because the helper could not open one of its own
    /// ([`own_descriptor`]: no `/proc`).
    pub readahead_fallbacks: u64,
}

#[derive(Default)]
struct Queue {
    jobs: VecDeque<Job>,
    reads: u64,
    bytes: u64,
    busy_ns: u128,
    first: Option<Instant>,
    stop: bool,
    cancelled: u64,
    stopped: u64,
    readahead_fallbacks: u64,
}

struct Device {
    queue: Mutex<Queue>,
    cv: Condvar,
}

/// Prefetch helpers, one group per storage device.
pub struct Helpers {
    per_device: usize,
    devices: Mutex<HashMap<u64, Arc<Device>>>,
}

impl Helpers {
    /// `per_device` threads per device (1 = serialized).
    pub fn new(per_device: usize) -> Self {
        Self {
            per_device: per_device.max(1),
            devices: Mutex::new(HashMap::new()),
        }
    }

    fn device(&self, dev: u64) -> Arc<Device> {
        let mut map = self.devices.lock().expect("lock");
        map.entry(dev)
            .or_insert_with(|| {
                let d = Arc::new(Device {
                    queue: Mutex::new(Queue::default()),
                    cv: Condvar::new(),
                });
                for i in 0..self.per_device {
                    let d2 = d.clone();
                    std::thread::Builder::new()
                        .name(format!("prefetch-{dev:x}-{i}"))
                        .spawn(move || helper(d2))
                        .expect("spawn helper");
                }
                d
            })
            .clone()
    }

    /// Queues a prefetch of `[offset, offset + len)` for the client on the
    /// TCP socket `client` (watched before each piece: [`socket_closed`];
    /// `None`: not watched). The handle follows its progress (the first
    /// [`FIRST_PIECE`] bytes are reported before the rest is read) and,
    /// awaited, gives the read's report when the data is in the page cache
    /// (or the read failed). Dropping the handle unfinished cancels the
    /// prefetch.
    pub fn prefetch(
        &self,
        file: Arc<File>,
        offset: u64,
        len: u64,
        client: Option<RawFd>,
    ) -> Pending {
        let dev = file.metadata().map(|m| m.dev()).unwrap_or(0);
        let (tx, rx) = watch::channel(Progress::default());
        let ctl = Control::new(client);
        let d = self.device(dev);
        d.queue.lock().expect("lock").jobs.push_back(Job {
            file,
            offset,
            len,
            progress: tx,
            ctl: ctl.clone(),
        });
        d.cv.notify_one();
        Pending {
            rx,
            ctl,
            offset,
            len,
        }
    }

    /// Counts a prefetch of `file` not queued because its client had gone
    /// before it could be (with the device's `cancelled`).
    pub fn gone_before_queued(&self, file: &File) {
        let dev = file.metadata().map(|m| m.dev()).unwrap_or(0);
        self.device(dev).queue.lock().expect("lock").cancelled += 1;
    }

    /// Queues a prefetch of `[offset, offset + len)` nobody waits for (a
    /// next object's, read for a request still to come): never cancelled,
    /// counted in the device's statistics like any other read.
    pub fn prefetch_detached(&self, file: Arc<File>, offset: u64, len: u64) {
        let dev = file.metadata().map(|m| m.dev()).unwrap_or(0);
        // no receiver: the helper's progress reports go nowhere
        let (tx, _) = watch::channel(Progress::default());
        let d = self.device(dev);
        d.queue.lock().expect("lock").jobs.push_back(Job {
            file,
            offset,
            len,
            progress: tx,
            ctl: Control::new(None),
        });
        d.cv.notify_one();
    }

    /// Statistics of every device.
    pub fn stats(&self) -> Vec<DeviceStats> {
        let map = self.devices.lock().expect("lock");
        let mut v: Vec<DeviceStats> = map
            .iter()
            .map(|(dev, d)| {
                let q = d.queue.lock().expect("lock");
                let wall = q.first.map_or(0.0, |f| f.elapsed().as_secs_f64());
                let busy = q.busy_ns as f64 / 1e9;
                DeviceStats {
                    device: *dev,
                    reads: q.reads,
                    bytes: q.bytes,
                    mean_ms_per_read: if q.reads > 0 {
                        busy * 1e3 / q.reads as f64
                    } else {
                        0.0
                    },
                    mean_ms_per_128k: if q.bytes > 0 {
                        busy * 1e3 / (q.bytes as f64 / 131072.0)
                    } else {
                        0.0
                    },
                    queue_length: q.jobs.iter().filter(|j| !j.ctl.cancelled()).count() as u64,
                    busy_fraction: if wall > 0.0 {
                        (busy / wall / self.per_device as f64).min(1.0)
                    } else {
                        0.0
                    },
                    cancelled: q.cancelled,
                    stopped: q.stopped,
                    readahead_fallbacks: q.readahead_fallbacks,
                    busy_s: busy,
                }
            })
            .collect();
        v.sort_by_key(|d| d.device);
        v
    }

    /// Stops the helper threads after the queued work.
    pub fn shutdown(&self) {
        for d in self.devices.lock().expect("lock").values() {
            d.queue.lock().expect("lock").stop = true;
            d.cv.notify_all();
        }
    }
}

fn helper(d: Arc<Device>) {
    let mut buf = vec![0u8; PIECE as usize];
    loop {
        let job = {
            let mut q = d.queue.lock().expect("lock");
            loop {
                match q.jobs.pop_front() {
                    // its client has gone: nobody will send what it reads
                    Some(j) => match j.ctl.abandoned() {
                        None => break j,
                        Some(why) => {
                            q.cancelled += 1;
                            if why == Abandoned::ClientGone {
                                j.progress.send_modify(|p| p.client_gone = true);
                            }
                        }
                    },
                    None if q.stop => return,
                    None => q = d.cv.wait(q).expect("lock"),
                }
            }
        };
        let own = own_descriptor(&job.file);
        let fallback = own.is_none();
        let (report, stop) = read_job(&job, own.as_ref().unwrap_or(&job.file), &mut buf);
        drop(own);
        {
            let mut q = d.queue.lock().expect("lock");
            q.first.get_or_insert(Instant::now() - report.duration);
            q.reads += 1;
            q.bytes += report.bytes;
            q.busy_ns += report.duration.as_nanos();
            q.stopped += u64::from(stop.is_some());
            q.readahead_fallbacks += u64::from(fallback);
        }
        job.progress.send_modify(|p| {
            p.done = Some(report);
            p.client_gone = stop == Some(Abandoned::ClientGone);
        });
    }
}

/// Where the piece that starts `done` bytes into a prefetch ends, from the
/// prefetch's offset: the first piece is [`FIRST_PIECE`] bytes, each later
/// one ends at the next multiple of [`PIECE`]. So the first two together
/// are one [`PIECE`], and a client that leaves before its first [`PIECE`]
/// has been read costs the disk at most that, its first piece included
/// (with a [`PIECE`] after the first, a client gone at its first bytes cost
/// 1.125 MiB).
fn piece_end_from(done: u64) -> u64 {
    if done == 0 {
        FIRST_PIECE
    } else {
        (done / PIECE + 1) * PIECE
    }
}

/// Reads a job piece by piece ([`FIRST_PIECE`], then up to each multiple
/// of [`PIECE`]) into the page cache through `via` (a descriptor of the job's file), publishing
/// progress after each piece; stops early when the job is abandoned
/// (cancelled, or its client gone). Returns the report and why it stopped
/// early.
fn read_job(job: &Job, via: &File, buf: &mut [u8]) -> (ReadReport, Option<Abandoned>) {
    let t0 = Instant::now();
    let mut off = job.offset;
    let end = job.offset + job.len;
    let mut stopped = None;
    while off < end {
        stopped = job.ctl.abandoned();
        if stopped.is_some() {
            break;
        }
        let piece_end = end.min(job.offset + piece_end_from(off - job.offset));
        let mut failed = false;
        while off < piece_end {
            let n = ((piece_end - off) as usize).min(buf.len());
            match via.read_at(&mut buf[..n], off) {
                Ok(0) | Err(_) => {
                    failed = true;
                    break;
                }
                Ok(k) => off += k as u64,
            }
        }
        let read = off - job.offset;
        job.progress.send_modify(|p| p.read = read);
        if failed {
            break;
        }
    }
    let report = ReadReport {
        bytes: off - job.offset,
        duration: t0.elapsed().max(Duration::from_nanos(1)),
    };
    (report, stopped)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_two_pieces_make_one_piece_and_later_ones_are_aligned() {
        assert_eq!(piece_end_from(0), FIRST_PIECE);
        assert_eq!(piece_end_from(FIRST_PIECE), PIECE);
        assert_eq!(piece_end_from(PIECE), 2 * PIECE);
        // a piece cut short by a failed read resumes to the same boundary
        assert_eq!(piece_end_from(PIECE + 4096), 2 * PIECE);
        let mut done = 0;
        let mut ends = Vec::new();
        while done < 3 * PIECE {
            done = piece_end_from(done);
            ends.push(done);
        }
        assert_eq!(ends, [FIRST_PIECE, PIECE, 2 * PIECE, 3 * PIECE]);
    }

    fn device() -> Arc<Device> {
        Arc::new(Device {
            queue: Mutex::new(Queue::default()),
            cv: Condvar::new(),
        })
    }

    fn queue(d: &Device, file: &Arc<File>, offset: u64, len: u64) -> Pending {
        queue_for(d, file, offset, len, None)
    }

    fn queue_for(
        d: &Device,
        file: &Arc<File>,
        offset: u64,
        len: u64,
        client: Option<RawFd>,
    ) -> Pending {
        let (tx, rx) = watch::channel(Progress::default());
        let ctl = Control::new(client);
        d.queue.lock().unwrap().jobs.push_back(Job {
            file: file.clone(),
            offset,
            len,
            progress: tx,
            ctl: ctl.clone(),
        });
        Pending {
            rx,
            ctl,
            offset,
            len,
        }
    }

    /// The helper is busy (here: not started) while four connections queue
    /// prefetches and two of them hang up: those two are dropped unread.
    #[test]
    fn queued_prefetches_of_connections_gone_are_dropped_unread() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, vec![1u8; 3 << 20]).unwrap();
        let f = Arc::new(File::open(&p).unwrap());
        let d = device();
        let a = queue(&d, &f, 0, 1 << 20);
        let gone1 = queue(&d, &f, 0, 3 << 20);
        let gone2 = queue(&d, &f, 1 << 20, 2 << 20);
        let b = queue(&d, &f, 2 << 20, 1 << 20);
        drop(gone1);
        drop(gone2);
        d.queue.lock().unwrap().stop = true;
        // runs the queue on this thread and returns when it is empty
        helper(d.clone());
        let q = d.queue.lock().unwrap();
        assert_eq!(
            (q.reads, q.bytes, q.cancelled, q.stopped),
            (2, 2 << 20, 2, 0)
        );
        drop(q);
        for (h, n) in [(a, 1 << 20), (b, 1 << 20)] {
            let pr = h.progress();
            assert_eq!(pr.read, n);
            assert_eq!(pr.done.map(|r| r.bytes), Some(n));
        }
    }

    #[test]
    fn a_read_cancelled_while_running_stops_at_the_next_piece() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, vec![1u8; 4 << 20]).unwrap();
        let f = Arc::new(File::open(&p).unwrap());
        let d = device();
        let h = queue(&d, &f, 0, 4 << 20);
        let job = d.queue.lock().unwrap().jobs.pop_front().unwrap();
        let mut buf = vec![0u8; PIECE as usize];
        // taken off the queue (started), then its connection goes
        drop(h);
        let (report, stopped) = read_job(&job, &job.file, &mut buf);
        assert_eq!(stopped, Some(Abandoned::Cancelled));
        assert_eq!(report.bytes, 0);
        // not cancelled: every piece published, through a descriptor of the helper's own
        let h = queue(&d, &f, 0, 4 << 20);
        let job = d.queue.lock().unwrap().jobs.pop_front().unwrap();
        let own = own_descriptor(&job.file).expect("/proc/self/fd reopens the file");
        let (report, stopped) = read_job(&job, &own, &mut buf);
        assert_eq!(stopped, None);
        assert_eq!(report.bytes, 4 << 20);
        assert_eq!(h.progress().read, 4 << 20);
    }

    /// The helper watches the client's socket itself, so a client that
    /// leaves stops its prefetch even before its connection (which drops
    /// the handle) has noticed: queued, it is dropped unread and its handle
    /// told (`client_gone`); begun, it stops before the next piece. One
    /// whose connection stopped watching (a pipelined request) is read.
    #[test]
    fn a_prefetch_whose_client_closed_its_socket_is_not_read_on() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, vec![1u8; 2 << 20]).unwrap();
        let f = Arc::new(File::open(&p).unwrap());
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (conn, _) = l.accept().unwrap();
        let fd = Some(conn.as_raw_fd());
        let d = device();
        d.queue.lock().unwrap().stop = true;
        // the client is there: read in full
        let live = queue_for(&d, &f, 0, 1 << 20, fd);
        helper(d.clone());
        assert!(!socket_closed(conn.as_raw_fd()));
        let gone = queue_for(&d, &f, 0, 2 << 20, fd);
        let unwatched = queue_for(&d, &f, 1 << 20, 1 << 20, fd);
        unwatched.unwatch_client();
        let begun = queue_for(&d, &f, 0, 2 << 20, fd);
        drop(client);
        let t0 = Instant::now();
        while !socket_closed(conn.as_raw_fd()) {
            assert!(
                t0.elapsed() < Duration::from_secs(5),
                "the close never arrived"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        // taken off the queue by a helper before the client left, read now
        let job = d.queue.lock().unwrap().jobs.pop_back().unwrap();
        let mut buf = vec![0u8; PIECE as usize];
        let (report, why) = read_job(&job, &job.file, &mut buf);
        assert_eq!((report.bytes, why), (0, Some(Abandoned::ClientGone)));
        drop(begun);
        helper(d.clone());
        let q = d.queue.lock().unwrap();
        assert_eq!(
            (q.reads, q.bytes, q.cancelled, q.stopped),
            (2, 2 << 20, 1, 0)
        );
        drop(q);
        assert_eq!(live.progress().done.map(|r| r.bytes), Some(1 << 20));
        assert_eq!(unwatched.progress().done.map(|r| r.bytes), Some(1 << 20));
        assert!(!live.progress().client_gone && !unwatched.progress().client_gone);
        let pr = gone.progress();
        assert!(
            pr.client_gone && pr.done.is_none() && pr.read == 0,
            "{pr:?}"
        );
    }

    /// The helper's descriptor is the same file as the request's, even
    /// once its path is gone, and reads its bytes.
    #[test]
    fn the_helpers_own_descriptor_reads_the_same_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        let data: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&p, &data).unwrap();
        let f = File::open(&p).unwrap();
        std::fs::remove_file(&p).unwrap();
        let own = own_descriptor(&f).unwrap();
        assert_ne!(own.as_raw_fd(), f.as_raw_fd());
        let mut got = vec![0u8; 1000];
        own.read_exact_at(&mut got, 299_000).unwrap();
        assert_eq!(got, data[299_000..]);
    }
}
