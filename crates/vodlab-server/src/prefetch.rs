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
use tokio::sync::oneshot;

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

struct Job {
    file: Arc<File>,
    offset: u64,
    len: u64,
    done: oneshot::Sender<ReadReport>,
}

/// A completed prefetch read, as the helper timed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadReport {
    /// Bytes read (fewer than asked when the file ended or a read failed).
    pub bytes: u64,
    /// Time the helper spent reading (not the time queued).
    pub duration: Duration,
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
}

#[derive(Default)]
struct Queue {
    jobs: VecDeque<Job>,
    reads: u64,
    bytes: u64,
    busy_ns: u128,
    first: Option<Instant>,
    stop: bool,
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

    /// Queues a prefetch of `[offset, offset + len)`; the receiver gets the
    /// read's report when the data is in the page cache (or the read failed).
    pub fn prefetch(
        &self,
        file: Arc<File>,
        offset: u64,
        len: u64,
    ) -> oneshot::Receiver<ReadReport> {
        let dev = file.metadata().map(|m| m.dev()).unwrap_or(0);
        let (tx, rx) = oneshot::channel();
        let d = self.device(dev);
        d.queue.lock().expect("lock").jobs.push_back(Job {
            file,
            offset,
            len,
            done: tx,
        });
        d.cv.notify_one();
        rx
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
                    queue_length: q.jobs.len() as u64,
                    busy_fraction: if wall > 0.0 {
                        (busy / wall / self.per_device as f64).min(1.0)
                    } else {
                        0.0
                    },
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
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let job = {
            let mut q = d.queue.lock().expect("lock");
            loop {
                if let Some(j) = q.jobs.pop_front() {
                    break j;
                }
                if q.stop {
                    return;
                }
                q = d.cv.wait(q).expect("lock");
            }
        };
        let t0 = Instant::now();
        let mut off = job.offset;
        let end = job.offset + job.len;
        while off < end {
            let n = ((end - off) as usize).min(buf.len());
            match job.file.read_at(&mut buf[..n], off) {
                Ok(0) | Err(_) => break,
                Ok(k) => off += k as u64,
            }
        }
        let took = t0.elapsed();
        {
            let mut q = d.queue.lock().expect("lock");
            q.first.get_or_insert(t0);
            q.reads += 1;
            q.bytes += off - job.offset;
            q.busy_ns += took.as_nanos();
        }
        let _ = job.done.send(ReadReport {
            bytes: off - job.offset,
            duration: took,
        });
    }
}
