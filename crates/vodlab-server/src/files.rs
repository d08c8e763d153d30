//! Opening files under the root without leaving it, and their metadata for
//! the planner. The only file-system I/O of a request before its body.

use std::fs::File;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::os::unix::io::{AsRawFd, FromRawFd};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::UNIX_EPOCH;

use crate::error::ServeError;
use crate::plan::{FileKind, FileMeta};
use crate::request::{content_type, inside_root};

/// The root directory, held open.
pub struct Root {
    /// The root as configured.
    pub path: std::path::PathBuf,
    /// Its canonical form (for the fallback check).
    pub canonical: std::path::PathBuf,
    fd: File,
    no_openat2: AtomicBool,
}

impl Root {
    /// Opens the root directory.
    pub fn open(path: &Path) -> io::Result<Self> {
        let canonical = std::fs::canonicalize(path)?;
        let fd = File::open(&canonical)?;
        if !canonical.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::NotADirectory,
                format!("{} is not a directory", path.display()),
            ));
        }
        Ok(Self {
            path: path.to_path_buf(),
            canonical,
            fd,
            no_openat2: AtomicBool::new(false),
        })
    }

    /// Opens `path` (a path under the root, from
    /// [`crate::request::resolve_target`]) so that neither `..` nor a
    /// symlink can leave the root: openat2(RESOLVE_BENEATH) relative to the
    /// root directory, one syscall; where the kernel lacks it, open and
    /// check the canonical path. Returns the file and its metadata.
    pub fn open_file(&self, path: &Path) -> Result<(File, FileMeta), ServeError> {
        let file = self.open_beneath(path).map_err(ServeError::from_open)?;
        let meta = file.metadata().map_err(ServeError::Io)?;
        let ft = meta.file_type();
        let kind = if ft.is_file() {
            FileKind::Regular
        } else if ft.is_dir() {
            FileKind::Directory
        } else {
            FileKind::Other
        };
        let mtime = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map(|d| d.as_secs());
        let fm = FileMeta {
            size: meta.len(),
            mtime,
            kind,
            key: meta.dev().rotate_left(32) ^ meta.ino(),
            content_type: content_type(path),
        };
        Ok((file, fm))
    }

    fn open_beneath(&self, path: &Path) -> io::Result<File> {
        use std::os::unix::ffi::OsStrExt;
        let not_found = || io::Error::from_raw_os_error(libc::ENOENT);
        if !self.no_openat2.load(Ordering::Relaxed) {
            let rel = path.strip_prefix(&self.path).map_err(|_| not_found())?;
            let c = std::ffi::CString::new(rel.as_os_str().as_bytes()).map_err(|_| not_found())?;
            #[repr(C)]
            struct OpenHow {
                flags: u64,
                mode: u64,
                resolve: u64,
            }
            let how = OpenHow {
                // O_NONBLOCK: opening a FIFO without a writer must not block
                // the worker thread (and every connection behind it)
                flags: (libc::O_RDONLY | libc::O_CLOEXEC | libc::O_NONBLOCK) as u64,
                mode: 0,
                resolve: libc::RESOLVE_BENEATH | libc::RESOLVE_NO_MAGICLINKS,
            };
            // an empty relative path names the root itself
            let c = if rel.as_os_str().is_empty() {
                std::ffi::CString::new(".").expect("no NUL")
            } else {
                c
            };
            // SAFETY: openat2 reads the path and `how`, both live; on success we own the fd
            let fd = unsafe {
                libc::syscall(
                    libc::SYS_openat2,
                    self.fd.as_raw_fd(),
                    c.as_ptr(),
                    &how as *const OpenHow,
                    std::mem::size_of::<OpenHow>(),
                )
            };
            if fd >= 0 {
                // SAFETY: a fresh descriptor owned by nobody else
                return Ok(unsafe { File::from_raw_fd(fd as i32) });
            }
            let err = io::Error::last_os_error();
            let errno = err.raw_os_error();
            if errno != Some(libc::ENOSYS) && errno != Some(libc::EPERM) {
                return Err(err); // ENOENT, EXDEV (escape attempt), ELOOP, EACCES, EMFILE ...
            }
            self.no_openat2.store(true, Ordering::Relaxed);
        }
        use std::os::unix::fs::OpenOptionsExt;
        let f = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(path)?;
        if inside_root(&self.canonical, path) {
            Ok(f)
        } else {
            Err(not_found())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn open_errors_keep_their_status() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("a.mp4"), b"hello").unwrap();
        std::fs::create_dir(d.path().join("dir")).unwrap();
        let root = Root::open(d.path()).unwrap();
        let (_, m) = root.open_file(&d.path().join("a.mp4")).unwrap();
        assert_eq!(
            (m.size, m.kind, m.content_type),
            (5, FileKind::Regular, "video/mp4")
        );
        assert!(m.mtime.is_some());
        let (_, m) = root.open_file(&d.path().join("dir")).unwrap();
        assert_eq!(m.kind, FileKind::Directory);
        let e = root.open_file(&d.path().join("missing")).unwrap_err();
        assert_eq!(e.status(), 404);
        let e = root.open_file(&d.path().join("a.mp4/x")).unwrap_err();
        assert_eq!(e.status(), 404);
        // a FIFO without a writer: opened at once (O_NONBLOCK) and refused as not regular
        let fifo = d.path().join("fifo.mp4");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a live NUL-terminated path
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
        let t = std::time::Instant::now();
        let (_, m) = root.open_file(&fifo).unwrap();
        assert_eq!(m.kind, FileKind::Other);
        assert!(t.elapsed() < std::time::Duration::from_secs(1));
        root.no_openat2.store(true, Ordering::Relaxed); // the fallback path too
        let (_, m) = root.open_file(&fifo).unwrap();
        assert_eq!(m.kind, FileKind::Other);
        root.no_openat2.store(false, Ordering::Relaxed);
        // unreadable: 403, unless we are root (who reads anything)
        let p = d.path().join("secret.mp4");
        std::fs::write(&p, b"x").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o000)).unwrap();
        // SAFETY: geteuid has no preconditions
        if unsafe { libc::geteuid() } != 0 {
            assert_eq!(root.open_file(&p).unwrap_err().status(), 403);
        }
    }
}
