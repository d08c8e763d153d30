//! Opening files under the root without leaving it, and their metadata for
//! the planner. The only file-system I/O of a request before its body.
//!
//! The root is held open and opened again when it is replaced (`held.rs`);
//! only regular files are served: anything else (a directory, a socket, a
//! FIFO, a device, a symlink to one inside the root) is
//! [`ServeError::NotRegular`], 403, whether it opens (a FIFO, a device:
//! `fstat` tells) or not (a socket: `ENXIO`).

mod held;

use std::fs::File;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::os::unix::io::{AsRawFd, FromRawFd};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, UNIX_EPOCH};

use crate::error::ServeError;
use crate::plan::{FileKind, FileMeta};
use crate::request::{content_type, inside_root};
use held::{Held, Opened};

pub use held::ROOT_RECHECK;

/// The root directory, held open (and opened again when replaced).
pub struct Root {
    /// The root as configured.
    pub path: std::path::PathBuf,
    held: Held,
    no_openat2: AtomicBool,
}

impl Root {
    /// Opens the root directory.
    pub fn open(path: &Path) -> io::Result<Self> {
        Self::open_rechecking(path, ROOT_RECHECK)
    }

    /// Opens the root directory, its path looked up again every `every`.
    pub(crate) fn open_rechecking(path: &Path, every: Duration) -> io::Result<Self> {
        Ok(Self {
            path: path.to_path_buf(),
            held: Held::open(path, every)?,
            no_openat2: AtomicBool::new(false),
        })
    }

    /// How many times the root was opened again because its path came to
    /// name another directory (the statistics' `root_reopens`).
    pub fn reopens(&self) -> u64 {
        self.held.reopens()
    }

    /// Opens `path` (a path under the root, from
    /// [`crate::request::resolve_target`]) so that neither `..` nor a
    /// symlink can leave the root: openat2(RESOLVE_BENEATH) relative to the
    /// root directory, one syscall; where the kernel lacks it, open and
    /// check the canonical path. A missing file looks the root's path up
    /// and, when the root was replaced, is looked for once more in the new
    /// one. Returns the file and its metadata; anything but a regular
    /// file is [`ServeError::NotRegular`].
    pub fn open_file(&self, path: &Path) -> Result<(File, FileMeta), ServeError> {
        let mut root = self.held.current();
        let mut opened = self.open_beneath(&root, path);
        if let Err(e) = &opened {
            if matches!(
                e.raw_os_error(),
                Some(libc::ENOENT | libc::ENOTDIR | libc::ESTALE)
            ) {
                if let Some(newer) = self.held.refresh(&root) {
                    root = newer;
                    opened = self.open_beneath(&root, path);
                }
            }
        }
        let file = opened.map_err(|e| self.refusal(&root, path, e))?;
        let meta = file.metadata().map_err(ServeError::Io)?;
        if !meta.file_type().is_file() {
            return Err(ServeError::NotRegular);
        }
        let mtime = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map(|d| d.as_secs());
        let fm = FileMeta {
            size: meta.len(),
            mtime,
            kind: FileKind::Regular,
            key: meta.dev().rotate_left(32) ^ meta.ino(),
            content_type: content_type(path),
        };
        Ok((file, fm))
    }

    /// The refusal for an open that failed with `e`: [`ServeError::from_open`],
    /// except that an error it leaves unexplained (500) on a file that
    /// is not a regular one (a device whose driver refused the open) is
    /// [`ServeError::NotRegular`], looked at without opening it.
    fn refusal(&self, root: &Opened, path: &Path, e: io::Error) -> ServeError {
        let err = ServeError::from_open(e);
        if !matches!(err, ServeError::Io(_)) {
            return err;
        }
        match self.kind_beneath(root, path) {
            Some(ft) if !ft.is_file() => ServeError::NotRegular,
            _ => err,
        }
    }

    /// What `path` is, looked up as [`Root::open_file`] would, without
    /// opening it for reading (an `O_PATH` descriptor and `fstat`).
    fn kind_beneath(&self, root: &Opened, path: &Path) -> Option<std::fs::FileType> {
        if self.no_openat2.load(Ordering::Relaxed) {
            let m = std::fs::metadata(path).ok()?;
            return inside_root(&root.canonical, path).then(|| m.file_type());
        }
        let f = openat2_beneath(root, &self.path, path, libc::O_PATH).ok()?;
        f.metadata().ok().map(|m| m.file_type())
    }

    fn open_beneath(&self, root: &Opened, path: &Path) -> io::Result<File> {
        let not_found = || io::Error::from_raw_os_error(libc::ENOENT);
        // O_NONBLOCK: opening a FIFO without a writer must not block the
        // worker thread (and every connection behind it); O_NOCTTY: a
        // terminal device in the root must not become the server's
        // controlling terminal
        let flags = libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOCTTY;
        if !self.no_openat2.load(Ordering::Relaxed) {
            match openat2_beneath(root, &self.path, path, flags) {
                Ok(f) => return Ok(f),
                Err(e) if !matches!(e.raw_os_error(), Some(libc::ENOSYS | libc::EPERM)) => {
                    return Err(e); // ENOENT, EXDEV (escape attempt), ELOOP, EACCES, ENXIO, EMFILE ...
                }
                Err(_) => self.no_openat2.store(true, Ordering::Relaxed),
            }
        }
        use std::os::unix::fs::OpenOptionsExt;
        let f = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
            .open(path)?;
        if inside_root(&root.canonical, path) {
            Ok(f)
        } else {
            Err(not_found())
        }
    }
}

/// openat2(`flags`, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS) of `path`
/// (under `configured`, the root's configured path) relative to the
/// opened `root`: one syscall that cannot leave that directory.
fn openat2_beneath(root: &Opened, configured: &Path, path: &Path, flags: i32) -> io::Result<File> {
    use std::os::unix::ffi::OsStrExt;
    let not_found = || io::Error::from_raw_os_error(libc::ENOENT);
    let rel = path.strip_prefix(configured).map_err(|_| not_found())?;
    // an empty relative path names the root itself
    let c = if rel.as_os_str().is_empty() {
        std::ffi::CString::new(".").expect("no NUL")
    } else {
        std::ffi::CString::new(rel.as_os_str().as_bytes()).map_err(|_| not_found())?
    };
    #[repr(C)]
    struct OpenHow {
        flags: u64,
        mode: u64,
        resolve: u64,
    }
    let how = OpenHow {
        flags: (flags | libc::O_CLOEXEC) as u64,
        mode: 0,
        resolve: libc::RESOLVE_BENEATH | libc::RESOLVE_NO_MAGICLINKS,
    };
    // SAFETY: openat2 reads the path and `how`, both live; on success we own the fd
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            root.fd.as_raw_fd(),
            c.as_ptr(),
            &how as *const OpenHow,
            std::mem::size_of::<OpenHow>(),
        )
    };
    if fd >= 0 {
        // SAFETY: a fresh descriptor owned by nobody else
        Ok(unsafe { File::from_raw_fd(fd as i32) })
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests;
