//! ASAP: page-cache probes and serialized per-device prefetching.
//!
//! Before a range is sent, [`probe`] asks whether it is in the page cache
//! (`cachestat(2)`, else `preadv2(RWF_NOWAIT)` one byte per 128 KiB). On a
//! miss the connection queues a prefetch with its device's [`Helpers`]: a
//! FIFO served by N threads (1 = serialized, the thesis's ASAP), each reading
//! one prefetch at a time into the page cache, then waking the connection
//! with the read's size and duration ([`ReadReport`]). How much to read is
//! decided by a prefetch controller ([`crate::controller`]), which is pure.

use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::os::unix::io::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
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
/// Bytes of each later read of a prefetch; between two, the helper reports
/// progress and checks whether the prefetch was cancelled.
pub const PIECE: u64 = 1 << 20;

struct Job {
    file: Arc<File>,
    offset: u64,
    len: u64,
    progress: watch::Sender<Progress>,
    cancelled: Arc<AtomicBool>,
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
}

/// Why a prefetch ended without a report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the prefetch was dropped by its helper")]
pub struct Lost;

/// A queued or running prefetch. Dropping it before its read is done
/// cancels it: the helper drops it from the queue, or stops a read it has
/// begun at the next piece ([`PIECE`]). Awaiting it waits for the report.
#[derive(Debug)]
pub struct Pending {
    rx: watch::Receiver<Progress>,
    cancelled: Arc<AtomicBool>,
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
            self.cancelled.store(true, Ordering::Relaxed);
        }
    }

    /// Waits for the report.
    pub async fn finished(mut self) -> Result<ReadReport, Lost> {
        loop {
            if let Some(r) = self.progress().done {
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
    /// Queued prefetches dropped unread because their connection had gone.
    pub cancelled: u64,
    /// Prefetch reads stopped part-way because their connection went away.
    pub stopped: u64,
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

    /// Queues a prefetch of `[offset, offset + len)`. The handle follows
    /// its progress (the first [`FIRST_PIECE`] bytes are reported before
    /// the rest is read) and, awaited, gives the read's report when the
    /// data is in the page cache (or the read failed). Dropping the handle
    /// unfinished cancels the prefetch.
    pub fn prefetch(&self, file: Arc<File>, offset: u64, len: u64) -> Pending {
        let dev = file.metadata().map(|m| m.dev()).unwrap_or(0);
        let (tx, rx) = watch::channel(Progress::default());
        let cancelled = Arc::new(AtomicBool::new(false));
        let d = self.device(dev);
        d.queue.lock().expect("lock").jobs.push_back(Job {
            file,
            offset,
            len,
            progress: tx,
            cancelled: cancelled.clone(),
        });
        d.cv.notify_one();
        Pending {
            rx,
            cancelled,
            offset,
            len,
        }
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
            cancelled: Arc::new(AtomicBool::new(false)),
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
                    queue_length: q
                        .jobs
                        .iter()
                        .filter(|j| !j.cancelled.load(Ordering::Relaxed))
                        .count() as u64,
                    busy_fraction: if wall > 0.0 {
                        (busy / wall / self.per_device as f64).min(1.0)
                    } else {
                        0.0
                    },
                    cancelled: q.cancelled,
                    stopped: q.stopped,
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
                    // its connection has gone: nobody will send what it reads
                    Some(j) if j.cancelled.load(Ordering::Relaxed) => q.cancelled += 1,
                    Some(j) => break j,
                    None if q.stop => return,
                    None => q = d.cv.wait(q).expect("lock"),
                }
            }
        };
        let (report, stopped) = read_job(&job, &mut buf);
        {
            let mut q = d.queue.lock().expect("lock");
            q.first.get_or_insert(Instant::now() - report.duration);
            q.reads += 1;
            q.bytes += report.bytes;
            q.busy_ns += report.duration.as_nanos();
            q.stopped += u64::from(stopped);
        }
        job.progress.send_modify(|p| p.done = Some(report));
    }
}

/// Reads a job piece by piece into the page cache, publishing progress
/// after each piece; stops early when the job is cancelled. Returns the
/// report and whether it stopped early.
fn read_job(job: &Job, buf: &mut [u8]) -> (ReadReport, bool) {
    let t0 = Instant::now();
    let mut off = job.offset;
    let end = job.offset + job.len;
    let mut stopped = false;
    while off < end {
        if job.cancelled.load(Ordering::Relaxed) {
            stopped = true;
            break;
        }
        let piece = if off == job.offset {
            FIRST_PIECE
        } else {
            PIECE
        };
        let piece_end = end.min(off + piece);
        let mut failed = false;
        while off < piece_end {
            let n = ((piece_end - off) as usize).min(buf.len());
            match job.file.read_at(&mut buf[..n], off) {
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

    fn device() -> Arc<Device> {
        Arc::new(Device {
            queue: Mutex::new(Queue::default()),
            cv: Condvar::new(),
        })
    }

    fn queue(d: &Device, file: &Arc<File>, offset: u64, len: u64) -> Pending {
        let (tx, rx) = watch::channel(Progress::default());
        let cancelled = Arc::new(AtomicBool::new(false));
        d.queue.lock().unwrap().jobs.push_back(Job {
            file: file.clone(),
            offset,
            len,
            progress: tx,
            cancelled: cancelled.clone(),
        });
        Pending {
            rx,
            cancelled,
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
        let (report, stopped) = read_job(&job, &mut buf);
        assert!(stopped);
        assert_eq!(report.bytes, 0);
        // not cancelled: every piece published, the first one short
        let h = queue(&d, &f, 0, 4 << 20);
        let job = d.queue.lock().unwrap().jobs.pop_front().unwrap();
        let (report, stopped) = read_job(&job, &mut buf);
        assert!(!stopped);
        assert_eq!(report.bytes, 4 << 20);
        assert_eq!(h.progress().read, 4 << 20);
    }
}
