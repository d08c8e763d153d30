//! Why a request could not be answered with its file, and the status each
//! reason gets. Errors of opening a file keep their errno apart: a missing
//! file is 404, a forbidden one 403, a full descriptor table 503, anything
//! else 500 (nothing is folded into 404).

use std::io;

use thiserror::Error;
use vodlab_http::server::Reject;

/// A request refused by the server (each variant maps to one status).
#[derive(Debug, Error)]
pub enum ServeError {
    /// The request head could not be parsed (400, 431, 505).
    #[error("bad request head ({0:?})")]
    Head(Reject),
    /// A method other than GET and HEAD (405).
    #[error("method not allowed")]
    Method,
    /// The request has a body (413).
    #[error("request with a body")]
    Body,
    /// The target is malformed or would leave the root (400).
    #[error("bad request target")]
    Target,
    /// No such file, or a path that resolves outside the root (404).
    #[error("not found")]
    NotFound,
    /// The file may not be read (EACCES, EPERM) (403).
    #[error("permission denied")]
    Forbidden,
    /// A directory or a special file: a socket (`ENXIO` when opened), a
    /// FIFO, a device (403).
    #[error("not a regular file")]
    NotRegular,
    /// Out of file descriptors (EMFILE, ENFILE) (503).
    #[error("out of file descriptors: {0}")]
    Exhausted(#[source] io::Error),
    /// Any other failure to open or stat the file (500).
    #[error("cannot open: {0}")]
    Io(#[source] io::Error),
}

impl ServeError {
    /// The status code answered.
    pub fn status(&self) -> u16 {
        match self {
            ServeError::Head(r) => r.status(),
            ServeError::Method => 405,
            ServeError::Body => 413,
            ServeError::Target => 400,
            ServeError::NotFound => 404,
            ServeError::Forbidden | ServeError::NotRegular => 403,
            ServeError::Exhausted(_) => 503,
            ServeError::Io(_) => 500,
        }
    }

    /// Classifies an error of opening or stat-ing a file under the root.
    /// `ENXIO` and `ENODEV` (a socket or a device without its driver,
    /// opened for reading) are not regular files, 403. `EXDEV` and `ELOOP` (openat2 refused to leave the root or to follow
    /// a symlink out of it) are 404 like a missing file: the server does
    /// not tell what exists outside its root.
    pub fn from_open(e: io::Error) -> Self {
        match e.raw_os_error() {
            Some(libc::ENOENT | libc::ENOTDIR | libc::EXDEV | libc::ELOOP | libc::ENAMETOOLONG) => {
                ServeError::NotFound
            }
            Some(libc::EACCES | libc::EPERM) => ServeError::Forbidden,
            // opening for reading: a socket, or a device without its driver
            Some(libc::ENXIO | libc::ENODEV) => ServeError::NotRegular,
            Some(libc::EMFILE | libc::ENFILE) => ServeError::Exhausted(e),
            _ if e.kind() == io::ErrorKind::NotFound => ServeError::NotFound,
            _ if e.kind() == io::ErrorKind::PermissionDenied => ServeError::Forbidden,
            _ => ServeError::Io(e),
        }
    }

    /// Whether the connection must close after the answer (the request's
    /// framing cannot be trusted).
    pub fn closes(&self) -> bool {
        matches!(self, ServeError::Head(_) | ServeError::Body)
    }

    /// Whether the server should log the error on stderr (its own trouble,
    /// not the client's).
    pub fn is_server_side(&self) -> bool {
        matches!(self, ServeError::Exhausted(_) | ServeError::Io(_))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errnos_keep_their_status() {
        let s = |errno| ServeError::from_open(io::Error::from_raw_os_error(errno)).status();
        assert_eq!(s(libc::ENOENT), 404);
        assert_eq!(s(libc::ENOTDIR), 404);
        assert_eq!(s(libc::EXDEV), 404);
        assert_eq!(s(libc::ELOOP), 404);
        assert_eq!(s(libc::EACCES), 403);
        assert_eq!(s(libc::EPERM), 403);
        assert_eq!(s(libc::EMFILE), 503);
        assert_eq!(s(libc::ENFILE), 503);
        assert_eq!(s(libc::EIO), 500);
        assert_eq!(s(libc::ENOMEM), 500);
        assert_eq!(ServeError::NotRegular.status(), 403);
        // a socket opened for reading, a device without its driver: refused, not the server's trouble
        for errno in [libc::ENXIO, libc::ENODEV] {
            let e = ServeError::from_open(io::Error::from_raw_os_error(errno));
            assert!(matches!(e, ServeError::NotRegular), "{errno}: {e:?}");
            assert!(!e.is_server_side());
        }
        assert!(ServeError::from_open(io::Error::from_raw_os_error(libc::EIO)).is_server_side());
        assert!(!ServeError::NotFound.is_server_side());
        assert!(ServeError::Body.closes() && !ServeError::Method.closes());
        assert_eq!(ServeError::Head(Reject::TooLarge).status(), 431);
    }
}
