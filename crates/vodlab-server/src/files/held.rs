//! The root directory held open, and opened again when its path comes to
//! name another directory (removed and re-created, renamed over, a symlink
//! retargeted): docs/serve.md, "The root".
//!
//! A request takes the opening held now (a read lock and a reference
//! count) and opens its file relative to that descriptor, so a request
//! racing a swap opens beneath the old tree or the new one, whole, and
//! never anywhere else. The path is looked up (one `stat`) at most every
//! [`ROOT_RECHECK`], by the first request after that, and at once by a
//! request whose file was missing (`ENOENT`, `ENOTDIR`: a removed root
//! is empty), which then retries once in the new tree.

use std::fs::File;
use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Mutex, RwLock};

/// How long, at most, a root replaced while the server runs keeps being
/// served from its old tree: the root's path is looked up again by the
/// first request this long after the last look-up.
pub const ROOT_RECHECK: Duration = Duration::from_millis(100);

/// The coarsest tick of [`coarse_now_us`] (HZ=100), by which periodic
/// look-ups come early so that a swap is always seen within [`ROOT_RECHECK`].
pub(crate) const COARSE_TICK_US: u64 = 10_000;

/// One opening of the root directory.
pub(crate) struct Opened {
    /// The directory, opened.
    pub(crate) fd: File,
    /// Its (device, inode): what the root's path must still name.
    id: (u64, u64),
    /// Its canonical path (the fallback check without openat2).
    pub(crate) canonical: PathBuf,
}

impl Opened {
    /// Opens the directory `path` names (following symlinks).
    fn open(path: &Path) -> io::Result<Self> {
        let fd = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECTORY | libc::O_CLOEXEC)
            .open(path)
            .map_err(|e| {
                if e.raw_os_error() == Some(libc::ENOTDIR) {
                    io::Error::new(
                        io::ErrorKind::NotADirectory,
                        format!("{} is not a directory", path.display()),
                    )
                } else {
                    e
                }
            })?;
        let m = fd.metadata()?;
        let canonical = std::fs::canonicalize(path)?;
        Ok(Self {
            id: (m.dev(), m.ino()),
            fd,
            canonical,
        })
    }
}

/// The root's path and the opening of it held now.
pub(crate) struct Held {
    path: PathBuf,
    now: RwLock<Arc<Opened>>,
    /// At most one thread opens a new root at a time.
    swapping: Mutex<()>,
    every: Duration,
    /// When the next periodic look-up is due ([`coarse_now_us`]).
    next_check_us: AtomicU64,
    reopens: AtomicU64,
}

impl Held {
    /// Opens the root at `path`, to be looked up again every `every`.
    pub(crate) fn open(path: &Path, every: Duration) -> io::Result<Self> {
        let first = Opened::open(path)?;
        Ok(Self {
            path: path.to_path_buf(),
            now: RwLock::new(Arc::new(first)),
            swapping: Mutex::new(()),
            every,
            next_check_us: AtomicU64::new(0),
            reopens: AtomicU64::new(0),
        })
    }

    /// The opening to serve from now; the first caller after a
    /// look-up's interval has passed looks the path up first.
    pub(crate) fn current(&self) -> Arc<Opened> {
        self.current_at(coarse_now_us())
    }

    /// [`Self::current`] at `now_us` (a [`coarse_now_us`] reading): the
    /// look-up's schedule without the clock, so its interval is tested in
    /// virtual time.
    pub(crate) fn current_at(&self, now_us: u64) -> Arc<Opened> {
        let held = self.now.read().clone();
        let due = self.next_check_us.load(Ordering::Relaxed);
        if now_us >= due
            && self
                .next_check_us
                .compare_exchange(
                    due,
                    // a tick early: the coarse clock lags by up to one
                    now_us + (self.every.as_micros() as u64).saturating_sub(COARSE_TICK_US),
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                )
                .is_ok()
        {
            if let Some(newer) = self.refresh(&held) {
                return newer;
            }
        }
        held
    }

    /// Looks the root's path up and, when it names another directory than
    /// the one held, opens that one and holds it instead. Returns the
    /// opening held afterwards when it is not `used` (a newer root to
    /// retry in), `None` when `used` is still the root. A path that names
    /// nothing, or nothing that opens as a directory (mid-swap), keeps the
    /// root held.
    pub(crate) fn refresh(&self, used: &Arc<Opened>) -> Option<Arc<Opened>> {
        if let Ok(m) = std::fs::metadata(&self.path) {
            let id = (m.dev(), m.ino());
            if self.now.read().id != id {
                let _one = self.swapping.lock();
                if self.now.read().id != id {
                    if let Ok(o) = Opened::open(&self.path) {
                        *self.now.write() = Arc::new(o);
                        self.reopens.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        }
        let held = self.now.read().clone();
        (!Arc::ptr_eq(&held, used)).then_some(held)
    }

    /// How many times the root was opened again (it was replaced).
    pub(crate) fn reopens(&self) -> u64 {
        self.reopens.load(Ordering::Relaxed)
    }
}

/// CLOCK_MONOTONIC_COARSE in µs: read from the vDSO without a syscall, in
/// a few nanoseconds, to a tick's resolution (1 to 4 ms), which is plenty
/// for [`ROOT_RECHECK`].
fn coarse_now_us() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the live timespec
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut ts) };
    ts.tv_sec as u64 * 1_000_000 + ts.tv_nsec as u64 / 1_000
}
